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
/// caller leaves the arguments out).
pub fn call(fields: &serde_json::Value) {
    let line = format!("warden gateway: call {fields}\n");
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

#[cfg(test)]
mod tests {
    #[test]
    fn log_lines_cannot_be_forged() {
        assert_eq!(super::printable("a\nwarden gateway: b\u{202e}"), "a\\u{000A}warden gateway: b\\u{202E}");
    }
}
