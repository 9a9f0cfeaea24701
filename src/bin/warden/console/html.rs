//! HTML by hand: every value goes through [`esc`], which first makes control and format
//! characters visible as the terminal output does (`shown`: no bidi override can reorder what
//! an approver reads), then escapes the five characters HTML gives meaning to. Nothing else puts
//! text into a page.

use serde_json::Value;

use crate::output::shown;

/// The stylesheet, served at `/console.css`.
pub const CSS: &str = include_str!("console.css");

/// Text as HTML: control and format characters shown as `\u{…}`, then `& < > " '` escaped.
pub fn esc(text: &str) -> String {
    let visible = shown(text);
    let mut out = String::with_capacity(visible.len());
    for c in visible.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            other => out.push(other),
        }
    }
    out
}

/// A JSON value for a table cell: a string as itself, anything else as compact JSON; escaped.
pub fn value(value: Option<&Value>) -> String {
    match value {
        None => "<span class=\"muted\">(absent)</span>".to_owned(),
        Some(Value::Null) => "<span class=\"muted\">null</span>".to_owned(),
        Some(Value::String(text)) => esc(text),
        Some(other) => format!("<code>{}</code>", esc(&other.to_string())),
    }
}

/// A value pretty-printed as JSON inside `<pre>`, escaped.
pub fn pre_json(value: &Value) -> String {
    let text = serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string());
    let lines: Vec<String> = text.lines().map(esc).collect();
    format!("<pre>{}</pre>", lines.join("\n"))
}

/// Everything but RFC 3986's unreserved characters is percent-encoded in a URL part.
const URL_PART: &percent_encoding::AsciiSet =
    &percent_encoding::NON_ALPHANUMERIC.remove(b'-').remove(b'_').remove(b'.').remove(b'~');

/// A path segment or query component, percent-encoded.
pub fn url_part(text: &str) -> String {
    percent_encoding::utf8_percent_encode(text, URL_PART).to_string()
}

/// Which page the navigation marks.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Nav {
    Inbox,
    Effects,
    Receipts,
    Authority,
    None,
}

/// Who is logged in, for the header (and the logout form's CSRF token).
pub struct Viewer<'a> {
    pub name: &'a str,
    pub csrf: &'a str,
}

/// A whole page: header with navigation and the approver, then `body`.
pub fn page(title: &str, nav: Nav, viewer: Option<&Viewer<'_>>, body: &str) -> String {
    let link = |href: &str, label: &str, which: Nav| {
        let here = if nav == which { " class=\"here\"" } else { "" };
        format!("<a href=\"{href}\"{here}>{label}</a>")
    };
    let navigation = if viewer.is_some() {
        format!(
            "<nav>{}{}{}{}</nav>",
            link("/", "Inbox", Nav::Inbox),
            link("/effects", "Effects", Nav::Effects),
            link("/receipts", "Receipts", Nav::Receipts),
            link("/authority", "Authority", Nav::Authority)
        )
    } else {
        String::new()
    };
    let who = viewer.map_or_else(String::new, |viewer| {
        format!(
            "<span class=\"who\">signed in as <strong>console:{}</strong> \
             <form method=\"post\" action=\"/logout\"><input type=\"hidden\" name=\"csrf\" value=\"{}\">\
             <button type=\"submit\">Log out</button></form></span>",
            esc(viewer.name),
            esc(viewer.csrf)
        )
    });
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{} · warden console</title><link rel=\"stylesheet\" href=\"/console.css\"></head>\
         <body><header><span class=\"brand\">warden console</span>{navigation}{who}</header>\
         <main>{body}</main></body></html>\n",
        esc(title)
    )
}

/// A hidden CSRF field for a form.
pub fn csrf_field(csrf: &str) -> String {
    format!("<input type=\"hidden\" name=\"csrf\" value=\"{}\">", esc(csrf))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_and_invisible_characters_are_escaped() {
        assert_eq!(esc("<script>alert('x')</script>"), "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;");
        assert_eq!(esc("a\"b&c"), "a&quot;b&amp;c");
        assert_eq!(esc("pay\u{202E}1"), "pay\\u{202E}1");
        assert_eq!(esc("line\nbreak"), "line\\u{000A}break");
        assert_eq!(value(Some(&serde_json::json!({"k": "<b>"}))), "<code>{&quot;k&quot;:&quot;&lt;b&gt;&quot;}</code>");
    }
}
