//! How a document's text is quoted in a message: cut to 40 characters.

pub(super) fn shorten(text: &str) -> String {
    const LIMIT: usize = 40;
    if text.chars().count() <= LIMIT {
        text.to_owned()
    } else {
        let mut short: String = text.chars().take(LIMIT).collect();
        short.push('…');
        short
    }
}
