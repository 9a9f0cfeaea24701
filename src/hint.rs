//! The commands Warden prints for a human to run: each one must work as pasted, so every word
//! that comes from data (a path, an effect key) is shell-quoted here, once. A leaf module: it
//! names nothing else in the crate, so `error` can word its messages with it.

use std::path::Path;

/// `text` as one POSIX shell word: as it is when every character is plainly safe, otherwise
/// single-quoted (a `'` inside becomes `'\''`). Control and format characters are shown as
/// `\u{…}` escapes first, so no hint can forge a line or hide text on a terminal.
pub fn shell_word(text: &str) -> String {
    let mut shown = String::with_capacity(text.len());
    for c in text.chars() {
        if is_control_or_format(c) {
            shown.push_str(&format!("\\u{{{:04X}}}", u32::from(c)));
        } else {
            shown.push(c);
        }
    }
    let plain = |c: char| c.is_ascii_alphanumeric() || "_-./:=@%+,".contains(c);
    if !shown.is_empty() && shown.chars().all(plain) {
        return shown;
    }
    format!("'{}'", shown.replace('\'', r"'\''"))
}

/// `warden --store STORE resolve KEY --committed`, the command that records an AMBIGUOUS
/// effect's outcome once a human has checked the remote side (`--failed` when it did not
/// happen). Without a store the command relies on `WARDEN_STORE`.
pub fn resolve_command(effect_key: &str, store: Option<&Path>) -> String {
    match store {
        Some(store) => format!(
            "warden --store {} resolve {} --committed",
            shell_word(&store.display().to_string()),
            shell_word(effect_key)
        ),
        None => format!("warden resolve {} --committed", shell_word(effect_key)),
    }
}

/// Unicode general categories Cc (control) and Cf (format), plus the line and paragraph
/// separators, which end a line just as well.
pub fn is_control_or_format(c: char) -> bool {
    c.is_control()
        || matches!(c,
            '\u{00AD}' | '\u{0600}'..='\u{0605}' | '\u{061C}' | '\u{06DD}' | '\u{070F}' | '\u{0890}'..='\u{0891}'
            | '\u{08E2}' | '\u{180E}' | '\u{200B}'..='\u{200F}' | '\u{2028}'..='\u{202E}' | '\u{2060}'..='\u{2064}'
            | '\u{2066}'..='\u{206F}' | '\u{FEFF}' | '\u{FFF9}'..='\u{FFFB}' | '\u{110BD}' | '\u{110CD}'
            | '\u{13430}'..='\u{1343F}' | '\u{1BCA0}'..='\u{1BCA3}' | '\u{1D173}'..='\u{1D17A}'
            | '\u{E0001}' | '\u{E0020}'..='\u{E007F}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_words_quote_exactly_what_the_shell_would_split_or_expand() {
        for (text, word) in [
            ("/tmp/warden-demo-1/demo.redb", "/tmp/warden-demo-1/demo.redb"),
            ("refund:pay_1001", "refund:pay_1001"),
            ("", "''"),
            ("my store.redb", "'my store.redb'"),
            ("$HOME/x", "'$HOME/x'"),
            ("it's", r"'it'\''s'"),
            ("a*b", "'a*b'"),
            ("~/x", "'~/x'"),
            ("a\nb", r"'a\u{000A}b'"),
        ] {
            assert_eq!(shell_word(text), word, "{text:?}");
        }
    }

    #[test]
    fn the_resolve_command_names_the_store_when_it_is_known() {
        assert_eq!(
            resolve_command("refund:pay 1", Some(Path::new("/srv/my store.redb"))),
            "warden --store '/srv/my store.redb' resolve 'refund:pay 1' --committed"
        );
        assert_eq!(resolve_command("refund:pay_1", None), "warden resolve refund:pay_1 --committed");
    }
}
