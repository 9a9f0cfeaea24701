//! The gateway's log lines on stderr, with control and format characters escaped so nothing a
//! client or upstream sends can forge a line.

use std::io::Write;

/// `text` with control and format characters written as `\u{XXXX}`.
pub fn printable(text: &str) -> String {
    crate::output::shown(text)
}

pub fn warn(message: &str) {
    let line = format!("warden gateway: warning: {}\n", printable(message));
    // Nothing useful is left to do when stderr is gone.
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

pub fn info(message: &str) {
    let line = format!("warden gateway: {}\n", printable(message));
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

/// One call's structured line: `warden gateway: call {…}`, the fields as one JSON object (the
/// caller leaves the arguments out unless `--log-arguments`).
pub fn call(fields: &serde_json::Value) {
    let line = format!("warden gateway: call {}\n", json_line(fields));
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

/// `value` as compact JSON on one line that stays valid JSON: every control or format character
/// a string holds (serde_json escapes only those below U+0020) is written as a `\uXXXX` escape
/// (a surrogate pair above U+FFFF), so nothing in a value can break, forge or hide part of the
/// line. Outside strings, JSON text is ASCII.
pub fn json_line(value: &serde_json::Value) -> String {
    let text = value.to_string();
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if warden::approval::is_control_or_format(c) {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn log_lines_cannot_be_forged() {
        assert_eq!(super::printable("a\nwarden gateway: b\u{202e}"), "a\\u{000A}warden gateway: b\\u{202E}");
    }

    #[test]
    fn a_json_line_escapes_every_control_and_format_character_and_stays_the_same_json() {
        let value = serde_json::json!({
            "key": "refund:a\nwarden gateway: call {}\u{202e}\u{2028}\u{85}\u{7f}\u{e0001}\u{feff}x",
            "plain": "café ✓ 😀",
            "n": [1, 2.50],
        });
        let line = super::json_line(&value);
        assert!(line.contains("café ✓ 😀"), "printable text is left as it is: {line}");
        assert!(!line.chars().any(warden::approval::is_control_or_format), "{line}");
        assert!(line.contains(r"\u202e") && line.contains(r"\udb40\udc01") && line.contains(r"\n"), "{line}");
        let back: serde_json::Value = serde_json::from_str(&line).expect("still JSON");
        assert_eq!(back, value, "the same value");
    }
}
