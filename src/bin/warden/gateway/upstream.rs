//! The upstream side over HTTP/1.1: one fresh TCP connection per exchange, written by hand on
//! `std::net` so the one fact the outcome table rests on is exact — whether a connection was
//! ever established before anything was sent (FAILED) or not (everything after the connect is
//! AMBIGUOUS). No proxy is ever read from the environment, nothing is decompressed, no redirect
//! is followed (a 3xx is relayed as the upstream's answer). Every request made here carries the
//! gateway's own upstream credential when the document sets one (`credential`), resolved
//! before the connection is opened, in place of any header of that name from the client, and
//! the answer is scrubbed of that credential (`Guarded`, the sights' echo guard) before any of
//! it is relayed: an upstream that echoes it back never shows it to the client.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

use warden::sight::echo::Echo;
use zeroize::Zeroizing;

use super::credential::UpstreamCredential;

/// Where the upstream is: `http://host:port/path?query`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upstream {
    pub url: String,
    pub host: String,
    pub port: u16,
    /// The request target: path and query.
    pub target: String,
    /// The `Host` header value.
    pub authority: String,
    pub https: bool,
}

impl Upstream {
    /// Parse the `--upstream` value. Refused: no `http://`/`https://` scheme, credentials in the
    /// URL, a fragment, characters the WHATWG parser would silently rewrite.
    pub fn parse(raw: &str) -> Result<Upstream, String> {
        let lower = raw.to_ascii_lowercase();
        if !(lower.starts_with("http://") || lower.starts_with("https://")) {
            return Err(format!(
                "--upstream {raw:?} has no scheme; give the MCP endpoint as http://HOST:PORT/PATH or https://…"
            ));
        }
        if raw.chars().any(|c| c.is_control() || c == '\\' || c.is_whitespace()) {
            return Err("--upstream holds whitespace, a backslash or a control character; give a plain URL".into());
        }
        let url = url::Url::parse(raw).map_err(|e| format!("--upstream is not a URL ({e})"))?;
        if !url.username().is_empty() || url.password().is_some() {
            return Err("--upstream carries credentials; put them nowhere in the URL".into());
        }
        if url.fragment().is_some() {
            return Err("--upstream has a #fragment; remove it".into());
        }
        let host = url.host_str().ok_or("--upstream has no host")?.to_owned();
        let port = url.port_or_known_default().ok_or("--upstream has no port")?;
        let mut target = url.path().to_owned();
        if let Some(query) = url.query() {
            target.push('?');
            target.push_str(query);
        }
        let authority = match url.port() {
            Some(port) => format!("{host}:{port}"),
            None => host.clone(),
        };
        let host = host.trim_start_matches('[').trim_end_matches(']').to_owned();
        let https = url.scheme() == "https";
        Ok(Upstream { url: raw.to_owned(), host, port, target, authority, https })
    }
}

/// The connection to the upstream, plain or TLS.
pub enum Wire {
    Plain(TcpStream),
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>),
}

impl Read for Wire {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Wire::Plain(stream) => stream.read(out),
            Wire::Tls(stream) => stream.read(out),
        }
    }
}

impl Write for Wire {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        match self {
            Wire::Plain(stream) => stream.write(bytes),
            Wire::Tls(stream) => stream.write(bytes),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Wire::Plain(stream) => stream.flush(),
            Wire::Tls(stream) => stream.flush(),
        }
    }
}

/// Why an exchange produced no answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// No connection was established: nothing was sent.
    NeverConnected(String),
    /// The connection was up; what happened after is unknown.
    Broken(String),
    /// The upstream credential did not resolve: no connection was opened, nothing was sent.
    /// The text names the reference and where it was looked for, never a value.
    NoCredential(String),
}

/// An answer's head and its body, still on the wire.
pub struct Response {
    pub status: u16,
    /// Scrubbed of the gateway's credential, as the body is.
    pub headers: Vec<(String, String)>,
    pub body: Guarded,
    /// A handle on the socket to shut it down from another thread (a client gone mid-stream).
    pub socket: TcpStream,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    pub fn is_event_stream(&self) -> bool {
        self.header("content-type")
            .is_some_and(|v| v.split(';').next().is_some_and(|t| t.trim().eq_ignore_ascii_case("text/event-stream")))
    }
}

pub struct Timeouts {
    pub connect: Duration,
    pub io: Duration,
}

/// How to reach the upstream: timeouts, the TLS configuration for an https:// one, and the
/// gateway's own credential when the document sets one.
pub struct Dialer {
    pub timeouts: Timeouts,
    pub tls: Option<std::sync::Arc<rustls::ClientConfig>>,
    pub credential: Option<std::sync::Arc<UpstreamCredential>>,
}

/// Send one request on a fresh connection and read the answer's head. `subject` is the
/// client's verified token when the request is made for one (never sent: a `token_exchange`
/// credential exchanges it for the token that is).
pub fn send(
    upstream: &Upstream,
    method: &str,
    headers: &[(String, String)],
    body: &[u8],
    dialer: &Dialer,
    subject: Option<&str>,
) -> Result<Response, Failure> {
    let timeouts = &dialer.timeouts;
    // Resolved for this request only, before any connection: a missing value sends nothing.
    let mut credential = match &dialer.credential {
        Some(credential) => Some(credential.header(subject).map_err(Failure::NoCredential)?),
        None => None,
    };
    let tcp = connect(upstream, timeouts)?;
    let broken = |what: &str, e: std::io::Error| {
        let kind = e.kind();
        let timeout = matches!(kind, std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock);
        Failure::Broken(if timeout { format!("timeout {what}") } else { format!("{what}: {kind}") })
    };
    // Nothing has been sent yet: a failure here still proves the request never left.
    let never = |what: &str| Failure::NeverConnected(what.to_owned());
    tcp.set_read_timeout(Some(timeouts.io)).map_err(|_| never("connect failed (socket options)"))?;
    tcp.set_write_timeout(Some(timeouts.io)).map_err(|_| never("connect failed (socket options)"))?;
    let _ = tcp.set_nodelay(true);
    let socket = tcp.try_clone().map_err(|_| never("connect failed (socket clone)"))?;
    let mut stream = match (&dialer.tls, upstream.https) {
        (_, false) => Wire::Plain(tcp),
        (None, true) => return Err(never("no TLS configuration for an https:// upstream")),
        (Some(config), true) => Wire::Tls(Box::new(handshake(config, &upstream.host, tcp)?)),
    };
    let mut head = format!("{method} {} HTTP/1.1\r\nHost: {}\r\n", upstream.target, upstream.authority);
    for (name, value) in headers {
        // The gateway's credential replaces any header of its name (a client's `X-Api-Key`).
        if credential.as_ref().is_some_and(|c| c.name.eq_ignore_ascii_case(name)) {
            continue;
        }
        head.push_str(name);
        head.push_str(": ");
        head.push_str(value);
        head.push_str("\r\n");
    }
    if method != "GET" || !body.is_empty() {
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    let tail = "Connection: close\r\n\r\n";
    // One buffer of exactly the request's size (never reallocated, so no copy of the
    // credential is left behind), zeroized when dropped.
    let secret_len = credential.as_ref().map_or(0, |c| c.name.len() + 2 + c.value.len() + 2);
    let echo = credential.as_mut().map_or_else(Echo::none, |c| std::mem::replace(&mut c.echo, Echo::none()));
    let mut wire = Zeroizing::new(Vec::with_capacity(head.len() + secret_len + tail.len() + body.len()));
    wire.extend_from_slice(head.as_bytes());
    if let Some(credential) = &credential {
        wire.extend_from_slice(credential.name.as_bytes());
        wire.extend_from_slice(b": ");
        wire.extend_from_slice(credential.value.as_bytes());
        wire.extend_from_slice(b"\r\n");
    }
    wire.extend_from_slice(tail.as_bytes());
    wire.extend_from_slice(body);
    drop(credential);
    stream.write_all(&wire).map_err(|e| broken("writing the request", e))?;
    stream.flush().map_err(|e| broken("writing the request", e))?;
    let mut reader = BufReader::new(stream);
    loop {
        let (status, headers) = read_head(&mut reader).map_err(Failure::Broken)?;
        if (100..200).contains(&status) && status != 101 {
            continue;
        }
        let body = Body::framed(reader, status, method, &headers).map_err(Failure::Broken)?;
        let mut headers = headers;
        if !echo.is_empty() {
            for (name, value) in &mut headers {
                let (scrubbed, found) = echo.scrub_text(value);
                if found > 0 {
                    super::log::warn(&format!(
                        "the upstream echoed the gateway's own credential in its {name} header; redacted"
                    ));
                    *value = scrubbed;
                }
            }
        }
        return Ok(Response { status, headers, body: Guarded::new(body, echo), socket });
    }
}

/// A TCP connection to the upstream, or why there is none (nothing was sent).
fn connect(upstream: &Upstream, timeouts: &Timeouts) -> Result<TcpStream, Failure> {
    let addresses: Vec<SocketAddr> = (upstream.host.as_str(), upstream.port)
        .to_socket_addrs()
        .map_err(|_| Failure::NeverConnected(format!("cannot resolve {}", upstream.host)))?
        .collect();
    let mut last = format!("no address for {}", upstream.host);
    for address in addresses {
        match TcpStream::connect_timeout(&address, timeouts.connect) {
            Ok(connected) => return Ok(connected),
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => last = "connect timeout".into(),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => last = "connect refused".into(),
            Err(e) => last = format!("connect failed ({})", e.kind()),
        }
    }
    Err(Failure::NeverConnected(last))
}

/// What a startup probe of an https:// upstream's certificate found.
pub enum Probe {
    /// The handshake passed every check (pins included).
    Passed,
    /// The upstream could not be reached: nothing was checked.
    Unreachable(String),
    /// The handshake failed: the certificate is not one the document pins (or not valid).
    Refused(String),
}

/// One TLS handshake with the upstream and nothing sent: the same checks every call's
/// handshake makes, done once before the gateway listens.
pub fn probe(upstream: &Upstream, dialer: &Dialer) -> Probe {
    let Some(config) = &dialer.tls else { return Probe::Passed };
    let tcp = match connect(upstream, &dialer.timeouts) {
        Ok(tcp) => tcp,
        Err(Failure::NeverConnected(what) | Failure::Broken(what) | Failure::NoCredential(what)) => {
            return Probe::Unreachable(what)
        }
    };
    let _ = tcp.set_read_timeout(Some(dialer.timeouts.io));
    let _ = tcp.set_write_timeout(Some(dialer.timeouts.io));
    match handshake(config, &upstream.host, tcp) {
        Ok(mut stream) => {
            stream.conn.send_close_notify();
            let _ = stream.flush();
            Probe::Passed
        }
        Err(Failure::NeverConnected(what) | Failure::Broken(what) | Failure::NoCredential(what)) => {
            Probe::Refused(what)
        }
    }
}

/// A completed TLS handshake, or proof that no request byte was sent: rustls sends no
/// application data before the handshake is done, so any failure here is NeverConnected.
fn handshake(
    config: &std::sync::Arc<rustls::ClientConfig>,
    host: &str,
    mut tcp: TcpStream,
) -> Result<rustls::StreamOwned<rustls::ClientConnection, TcpStream>, Failure> {
    let name = rustls::pki_types::ServerName::try_from(host.to_owned())
        .map_err(|_| Failure::NeverConnected(format!("{host} is not a TLS server name")))?;
    let mut connection = rustls::ClientConnection::new(std::sync::Arc::clone(config), name)
        .map_err(|e| Failure::NeverConnected(format!("TLS setup failed: {e}")))?;
    while connection.is_handshaking() {
        if let Err(error) = connection.complete_io(&mut tcp) {
            return Err(Failure::NeverConnected(format!("TLS handshake failed: {error}")));
        }
    }
    Ok(rustls::StreamOwned::new(connection, tcp))
}

/// The most header bytes read before the answer is called broken.
const MAX_HEAD_BYTES: usize = 64 * 1024;

fn read_head(reader: &mut BufReader<Wire>) -> Result<(u16, Vec<(String, String)>), String> {
    let mut head = Vec::new();
    loop {
        let before = head.len();
        let read = reader.by_ref().take((MAX_HEAD_BYTES + 1 - before) as u64).read_until(b'\n', &mut head);
        match read {
            Ok(0) if head.is_empty() => return Err("closed before any answer".into()),
            Ok(0) => return Err("closed inside the answer's headers".into()),
            Ok(_) => {}
            Err(e) if matches!(e.kind(), std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock) => {
                return Err(if head.is_empty() {
                    "timeout before headers".into()
                } else {
                    "timeout inside headers".into()
                });
            }
            Err(e) => return Err(format!("reading the answer: {}", e.kind())),
        }
        if head.len() > MAX_HEAD_BYTES {
            return Err(format!("the answer's headers are over {MAX_HEAD_BYTES} bytes"));
        }
        let line = &head[before..];
        if line == b"\r\n" || line == b"\n" {
            break;
        }
    }
    let mut fields = [httparse::EMPTY_HEADER; 128];
    let mut parsed = httparse::Response::new(&mut fields);
    match parsed.parse(&head) {
        Ok(httparse::Status::Complete(_)) => {}
        _ => return Err("the answer's headers are not HTTP/1.1".into()),
    }
    let status = parsed.code.ok_or("the answer has no status")?;
    let headers =
        parsed.headers.iter().map(|h| (h.name.to_owned(), String::from_utf8_lossy(h.value).into_owned())).collect();
    Ok((status, headers))
}

/// A response body as its framing says: by length, chunked, or until the connection closes.
pub enum Body {
    Empty,
    Length {
        reader: BufReader<Wire>,
        left: u64,
    },
    /// `line` keeps a chunk-size line (or the CRLF ending the previous chunk) read in part,
    /// so a read that timed out can be tried again without losing a byte.
    Chunked {
        reader: BufReader<Wire>,
        left: u64,
        done: bool,
        line: Vec<u8>,
        crlf_due: bool,
    },
    Close(BufReader<Wire>),
}

impl Body {
    fn framed(
        reader: BufReader<Wire>,
        status: u16,
        method: &str,
        headers: &[(String, String)],
    ) -> Result<Body, String> {
        if method == "HEAD" || status == 204 || status == 304 {
            return Ok(Body::Empty);
        }
        let field = |name: &str| headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.trim());
        if let Some(encoding) = field("transfer-encoding") {
            if encoding.to_ascii_lowercase().split(',').next_back().map(str::trim) == Some("chunked") {
                return Ok(Body::Chunked { reader, left: 0, done: false, line: Vec::new(), crlf_due: false });
            }
            return Ok(Body::Close(reader));
        }
        match field("content-length") {
            Some(text) => {
                let left = text.parse::<u64>().map_err(|_| "the answer's Content-Length is not a number".to_owned())?;
                Ok(if left == 0 { Body::Empty } else { Body::Length { reader, left } })
            }
            None => Ok(Body::Close(reader)),
        }
    }
}

impl Read for Body {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Body::Empty => Ok(0),
            Body::Close(reader) => reader.read(out),
            Body::Length { reader, left } => {
                if *left == 0 {
                    return Ok(0);
                }
                let want = out.len().min(usize::try_from(*left).unwrap_or(usize::MAX));
                let n = reader.read(&mut out[..want])?;
                if n == 0 {
                    return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "body shorter than its length"));
                }
                *left -= n as u64;
                Ok(n)
            }
            Body::Chunked { reader, left, done, line, crlf_due } => {
                if *done {
                    return Ok(0);
                }
                if *left == 0 {
                    if *crlf_due {
                        // The CRLF after the previous chunk's data, read only now so that data
                        // was returned before anything could time out.
                        whole_line(reader, line)?;
                        if line.trim_ascii() != b"" {
                            return Err(std::io::Error::new(
                                std::io::ErrorKind::InvalidData,
                                "chunk not ended by CRLF",
                            ));
                        }
                        line.clear();
                        *crlf_due = false;
                    }
                    whole_line(reader, line)?;
                    let size = chunk_size(line);
                    line.clear();
                    let size = size?;
                    if size == 0 {
                        // Trailers, up to the blank line.
                        loop {
                            let mut line = Vec::new();
                            if reader.by_ref().take(8192).read_until(b'\n', &mut line)? == 0
                                || line.trim_ascii().is_empty()
                            {
                                break;
                            }
                        }
                        *done = true;
                        return Ok(0);
                    }
                    *left = size;
                }
                let want = out.len().min(usize::try_from(*left).unwrap_or(usize::MAX));
                let n = reader.read(&mut out[..want])?;
                if n == 0 {
                    return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "chunk cut short"));
                }
                *left -= n as u64;
                if *left == 0 {
                    *crlf_due = true;
                }
                Ok(n)
            }
        }
    }
}

/// The longest line `Guarded` holds back before scrubbing what it has (an answer's own cap).
const MAX_GUARDED_LINE: usize = 64 * 1024 * 1024;

/// A body scrubbed of the gateway's own credential (the sights' echo guard) before any of it is
/// read: line by line — a JSON string never spans a line, nor does an event stream's field — so a
/// line is held back until its `\n` (or the end) has arrived, and then every guarded form in it,
/// in any view the sights search, is `[REDACTED]`. A read that fails (a timeout) keeps what was
/// held, so it can be tried again. With nothing to guard it is the body as it is.
pub struct Guarded {
    body: Body,
    echo: Echo,
    /// Bytes read but not yet scrubbed: the start of a line.
    held: Vec<u8>,
    /// Scrubbed bytes not yet returned, from `at` on.
    ready: Vec<u8>,
    at: usize,
    ended: bool,
    /// Whether an echo was found (logged once).
    echoed: bool,
}

impl Guarded {
    pub fn new(body: Body, echo: Echo) -> Guarded {
        Guarded { body, echo, held: Vec::new(), ready: Vec::new(), at: 0, ended: false, echoed: false }
    }

    /// No body.
    pub fn empty() -> Guarded {
        Guarded::new(Body::Empty, Echo::none())
    }

    /// Scrub `bytes` (whole lines, or the last of the body) into `ready`.
    fn release(&mut self, bytes: Vec<u8>) {
        let text = match String::from_utf8(bytes) {
            Ok(text) => text,
            // JSON and event streams are UTF-8: anything else is searched as the text it decodes to.
            Err(error) => String::from_utf8_lossy(error.as_bytes()).into_owned(),
        };
        let (scrubbed, found) = self.echo.scrub_text(&text);
        if found > 0 && !self.echoed {
            self.echoed = true;
            super::log::warn(
                "the upstream echoed the gateway's own credential in its answer; redacted before relaying",
            );
        }
        self.ready = scrubbed.into_bytes();
        self.at = 0;
    }
}

impl Read for Guarded {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        if self.echo.is_empty() {
            return self.body.read(out);
        }
        loop {
            if self.at < self.ready.len() {
                let n = out.len().min(self.ready.len() - self.at);
                out[..n].copy_from_slice(&self.ready[self.at..self.at + n]);
                self.at += n;
                return Ok(n);
            }
            if self.ended {
                return Ok(0);
            }
            let mut chunk = [0u8; 16 * 1024];
            let n = self.body.read(&mut chunk)?;
            if n == 0 {
                self.ended = true;
                let rest = std::mem::take(&mut self.held);
                self.release(rest);
                continue;
            }
            self.held.extend_from_slice(&chunk[..n]);
            if let Some(last) = self.held.iter().rposition(|&b| b == b'\n') {
                let rest = self.held.split_off(last + 1);
                let lines = std::mem::replace(&mut self.held, rest);
                self.release(lines);
            } else if self.held.len() > MAX_GUARDED_LINE {
                let held = std::mem::take(&mut self.held);
                self.release(held);
            }
        }
    }
}

/// Complete `line` up to its `\n` (at most 1024 bytes). An error leaves what was read in
/// `line` (`read_until` keeps it), so the call can be repeated after a timeout.
fn whole_line(reader: &mut BufReader<Wire>, line: &mut Vec<u8>) -> std::io::Result<()> {
    const MAX: usize = 1024;
    while !line.ends_with(b"\n") {
        let room = MAX.saturating_sub(line.len());
        if room == 0 {
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, "a chunk line is over 1024 bytes"));
        }
        if reader.by_ref().take(room as u64).read_until(b'\n', line)? == 0 {
            return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "closed before the next chunk"));
        }
    }
    Ok(())
}

fn chunk_size(line: &[u8]) -> std::io::Result<u64> {
    let text = String::from_utf8_lossy(line);
    let size = text.split(';').next().unwrap_or_default().trim();
    u64::from_str_radix(size, 16)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "a chunk size is not hexadecimal"))
}

/// Read a whole body up to `cap` bytes.
pub fn read_all(body: &mut Guarded, cap: usize) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    let read = body.take(cap as u64 + 1).read_to_end(&mut out);
    match read {
        Ok(_) if out.len() > cap => Err(format!("the answer's body is over {cap} bytes")),
        Ok(_) => Ok(out),
        Err(e) if matches!(e.kind(), std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock) => {
            Err("timeout after headers".into())
        }
        Err(e) => Err(format!("reading the answer's body: {e}")),
    }
}

/// Stop an exchange from another thread.
pub fn shut(socket: &TcpStream) {
    let _ = socket.shutdown(Shutdown::Both);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chunked_body_read_that_times_out_mid_line_loses_no_byte() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let address = listener.local_addr().expect("address");
        let server = std::thread::spawn(move || {
            let (mut conn, _) = listener.accept().expect("accept");
            // The chunk-size line "10" arrives in two parts, a timeout apart; then the
            // chunk's CRLF arrives after another.
            for part in ["1", "0\r\n0123456789abcdef", "\r\n0\r\n\r\n"] {
                conn.write_all(part.as_bytes()).expect("write");
                conn.flush().expect("flush");
                std::thread::sleep(Duration::from_millis(300));
            }
        });
        let tcp = TcpStream::connect(address).expect("connect");
        tcp.set_read_timeout(Some(Duration::from_millis(100))).expect("timeout");
        let mut body = Body::Chunked {
            reader: BufReader::new(Wire::Plain(tcp)),
            left: 0,
            done: false,
            line: Vec::new(),
            crlf_due: false,
        };
        let (mut out, mut timeouts, mut buffer) = (Vec::new(), 0, [0u8; 64]);
        loop {
            match body.read(&mut buffer) {
                Ok(0) => break,
                Ok(n) => out.extend_from_slice(&buffer[..n]),
                Err(e) if matches!(e.kind(), std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock) => {
                    timeouts += 1;
                }
                Err(e) => panic!("{e}"),
            }
        }
        server.join().expect("server");
        assert!(timeouts >= 2, "the reads did time out in between");
        assert_eq!(out, b"0123456789abcdef");
    }

    #[test]
    fn upstream_urls_are_checked_before_parsing() {
        let ok = Upstream::parse("http://127.0.0.1:9000/mcp?x=1").expect("parses");
        assert_eq!((ok.host.as_str(), ok.port, ok.target.as_str()), ("127.0.0.1", 9000, "/mcp?x=1"));
        let ipv6 = Upstream::parse("http://[::1]:9000/mcp").expect("parses");
        assert_eq!(ipv6.host, "::1");
        for bad in [
            "127.0.0.1:9000/mcp",
            "localhost:9000",
            "ftp://x/",
            "http://u:p@127.0.0.1/",
            "http://127.0.0.1/a b",
            "http://127.0.0.1/\\mcp",
            "http://127.0.0.1/#x",
            "http://127.0.0.1/\n",
        ] {
            assert!(Upstream::parse(bad).is_err(), "{bad}");
        }
    }
}
