//! Everything that reaches the terminal: escaped text, tables, key/value blocks, one JSON
//! document, stdin, stdout and the one-line stderr message.

use std::io::{Read, Write};

use serde_json::{json, Value};

use warden::approval::is_control_or_format;

use crate::exit::Failure;

/// `--limit`/`--last` arrive as `u64`; on a 32-bit host anything larger than memory is "all".
pub fn count(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

/// Stored text (effect keys from raw templates, action names, data) may hold control or format
/// characters; human output escapes them so no value can forge a line or hide text.
pub fn shown(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if is_control_or_format(c) {
            out.push_str(&format!("\\u{{{:04X}}}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    out
}

/// `-` for nothing, the text itself (escaped) for a string, compact JSON (escaped) otherwise.
pub fn shown_value(value: Option<&Value>) -> String {
    match value {
        None | Some(Value::Null) => "-".to_owned(),
        Some(Value::String(text)) => shown(text),
        Some(other) => shown(&other.to_string()),
    }
}

/// Left-aligned columns two spaces apart; the last column is not padded.
pub fn table(header: Option<&[&str]>, rows: Vec<Vec<String>>) -> String {
    let mut all: Vec<Vec<String>> = Vec::with_capacity(rows.len() + 1);
    if let Some(header) = header {
        all.push(header.iter().map(|h| (*h).to_owned()).collect());
    }
    all.extend(rows);
    let columns = all.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|i| all.iter().filter_map(|row| row.get(i)).map(|cell| cell.chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in &all {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            if i > 0 {
                line.push_str("  ");
            }
            line.push_str(cell);
            if i + 1 < row.len() {
                let pad = widths.get(i).copied().unwrap_or(0).saturating_sub(cell.chars().count());
                line.extend(std::iter::repeat_n(' ', pad));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// The fields of a JSON object as `  key: value` lines, keys aligned, values escaped.
pub fn fields(value: &Value) -> String {
    let Value::Object(map) = value else {
        return format!("  {}\n", shown_value(Some(value)));
    };
    let width = map.keys().map(|key| key.chars().count()).max().unwrap_or(0);
    let mut out = String::new();
    for (key, item) in map {
        let pad = width.saturating_sub(key.chars().count());
        out.push_str(&format!("  {}:{} {}\n", shown(key), " ".repeat(pad), shown_value(Some(item))));
    }
    out
}

pub fn document(value: &Value) -> String {
    match serde_json::to_string_pretty(value) {
        Ok(text) => format!("{text}\n"),
        // A `Value` always serializes; keep the one-document promise regardless.
        Err(error) => {
            format!("{}\n", json!({"error": {"reason": "internal", "message": error.to_string(), "refusal": false}}))
        }
    }
}

pub fn read_stdin() -> Result<String, Failure> {
    let mut text = String::new();
    match std::io::stdin().read_to_string(&mut text) {
        Ok(_) => Ok(text),
        Err(error) if error.kind() == std::io::ErrorKind::InvalidData => {
            Err(Failure::check("invalid_json", "stdin is not UTF-8 text"))
        }
        Err(error) => Err(Failure::internal(format!("cannot read stdin: {error}"))),
    }
}

/// A closed pipe (`warden events | head`) is not an error worth a message.
pub fn write_stdout(text: &str) -> Result<(), Failure> {
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush()) {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(error) => Err(Failure::internal(format!("cannot write to stdout: {error}"))),
    }
}

/// One line, always: a message can carry an effect key or a path with a newline in it.
pub fn write_stderr(message: &str) {
    let _ = writeln!(std::io::stderr().lock(), "warden: {}", shown(message));
}
