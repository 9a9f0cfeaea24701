//! An incremental `text/event-stream` decoder for intercepted streams (mcp-gateway.md §3.6):
//! bytes arrive in any chunking; lines end in CR, LF or CRLF (a CR at the end of one chunk and
//! the LF at the start of the next are one ending); a leading BOM is dropped; multi-line `data:`
//! is joined with `\n`. Lines are cut on bytes, and CR/LF never occur inside a UTF-8 sequence,
//! so a character split across chunks is whole again before it is decoded.

/// One event: its lines as received (for relaying, minus `id:`) and its joined data.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Event {
    pub lines: Vec<String>,
    pub data: Option<String>,
}

impl Event {
    /// The event re-emitted without any `id:` line, so the stream cannot be resumed elsewhere.
    pub fn without_id(&self) -> String {
        let mut out = String::new();
        for line in &self.lines {
            if line == "id" || line.starts_with("id:") {
                continue;
            }
            out.push_str(line);
            out.push('\n');
        }
        out.push('\n');
        out
    }
}

/// The longest line kept; a longer one is a broken stream, not a reason to run out of memory.
pub const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

#[derive(Debug, Default)]
pub struct Decoder {
    line: Vec<u8>,
    after_cr: bool,
    started: bool,
    current: Event,
    data: Vec<String>,
}

impl Decoder {
    pub fn new() -> Decoder {
        Decoder::default()
    }

    /// Feed bytes; every event completed by them, in order. Errors when a line is too long.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<Vec<Event>, String> {
        if !self.started {
            // The BOM may itself be split; hold bytes back until three of them decide.
            self.line.extend_from_slice(bytes);
            if self.line.len() < 3 && b"\xEF\xBB\xBF".starts_with(&self.line) {
                return Ok(Vec::new());
            }
            self.started = true;
            let held = std::mem::take(&mut self.line);
            let rest = held.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(&held);
            return self.feed_started(rest, Vec::new());
        }
        self.feed_started(bytes, Vec::new())
    }

    fn feed_started(&mut self, bytes: &[u8], mut events: Vec<Event>) -> Result<Vec<Event>, String> {
        let mut i = 0;
        if self.after_cr && bytes.first() == Some(&b'\n') {
            i = 1;
        }
        self.after_cr = false;
        while i < bytes.len() {
            match memchr::memchr2(b'\r', b'\n', &bytes[i..]) {
                None => {
                    self.line.extend_from_slice(&bytes[i..]);
                    if self.line.len() > MAX_LINE_BYTES {
                        return Err(format!("an event-stream line is longer than {MAX_LINE_BYTES} bytes"));
                    }
                    break;
                }
                Some(offset) => {
                    let end = i + offset;
                    self.line.extend_from_slice(&bytes[i..end]);
                    let was_cr = bytes[end] == b'\r';
                    i = end + 1;
                    if was_cr {
                        if i < bytes.len() {
                            if bytes[i] == b'\n' {
                                i += 1;
                            }
                        } else {
                            self.after_cr = true;
                        }
                    }
                    let line = String::from_utf8_lossy(&std::mem::take(&mut self.line)).into_owned();
                    if let Some(event) = self.line_done(line) {
                        events.push(event);
                    }
                }
            }
        }
        Ok(events)
    }

    fn line_done(&mut self, line: String) -> Option<Event> {
        if line.is_empty() {
            if self.current.lines.is_empty() {
                return None;
            }
            let mut event = std::mem::take(&mut self.current);
            let data = std::mem::take(&mut self.data);
            event.data = (!data.is_empty()).then(|| data.join("\n"));
            return Some(event);
        }
        if let Some(rest) = line.strip_prefix("data") {
            if rest.is_empty() {
                self.data.push(String::new());
            } else if let Some(value) = rest.strip_prefix(':') {
                self.data.push(value.strip_prefix(' ').unwrap_or(value).to_owned());
            }
        }
        self.current.lines.push(line);
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_in_chunks(bytes: &[u8], size: usize) -> Vec<Event> {
        let mut decoder = Decoder::new();
        let mut events = Vec::new();
        for chunk in bytes.chunks(size) {
            events.extend(decoder.feed(chunk).expect("decodes"));
        }
        events
    }

    #[test]
    fn the_same_events_whatever_the_chunking_and_line_endings() {
        let table: &[(&[u8], &[Option<&str>])] = &[
            (b"data: {\"a\":1}\n\n", &[Some("{\"a\":1}")]),
            (b"data: one\r\n\r\ndata: two\r\r", &[Some("one"), Some("two")]),
            (b"\xEF\xBB\xBFdata: bom\n\n", &[Some("bom")]),
            (b"event: message\nid: 7\ndata: a\ndata: b\n\n", &[Some("a\nb")]),
            (b"data:no-space\n\n", &[Some("no-space")]),
            (b"data\n\n", &[Some("")]),
            (b": comment\n\n", &[None]),
            (b"data: caf\xC3\xA9 \xE2\x82\xAC\r\n\r\n", &[Some("caf\u{e9} \u{20ac}")]),
            (b"data: x\n\n\n\ndata: y\n\n", &[Some("x"), Some("y")]),
            (b"data: unfinished\n", &[]),
        ];
        for (bytes, expected) in table {
            for size in [1, 2, 3, 17, 1024] {
                let events = decode_in_chunks(bytes, size);
                let data: Vec<Option<&str>> = events.iter().map(|e| e.data.as_deref()).collect();
                assert_eq!(&data, expected, "{} in chunks of {size}", String::from_utf8_lossy(bytes));
            }
        }
    }

    #[test]
    fn relayed_events_lose_their_id_line_only() {
        let events = decode_in_chunks(b"event: progress\nid: 1\ndata: p\n\n", 5);
        assert_eq!(events[0].without_id(), "event: progress\ndata: p\n\n");
    }

    #[test]
    fn a_line_without_end_is_bounded() {
        let mut decoder = Decoder::new();
        let big = vec![b'a'; MAX_LINE_BYTES + 10];
        assert!(decoder.feed(&big).is_err());
    }
}
