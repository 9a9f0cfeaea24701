//! The file sink against the paths it must refuse, the HTTP sink against a local server, and
//! the loopback server the TSA tests share.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt as _;
use std::thread::JoinHandle;
use std::time::Duration;

use super::*;
use crate::evidence::tsa::TsaClient;

const NOTE: &[u8] = b"warden.example/log\n3\nq0U7Zb3dQz5yCk1vJ7yB0m8Zb8mZ0l1c8Gk4Wn4bX2o=\n\n\xe2\x80\x94 warden.example/log Az3grlgtzPICa5OS8npVmf1Myq/5IZniMp+ZJurmRDeOoRDe4URYN7u5/Zhcyv2q1gGzGku9nTo+zyWE+xeMcTOAYQ8=\n";

fn checkpoint() -> SignedCheckpoint<'static> {
    SignedCheckpoint { note: NOTE, size: 3, number: 7 }
}

// ---- a loopback HTTP/1.1 server -----------------------------------------------------------

/// One request the server read: its head (request line and headers) and its body.
#[derive(Debug, Clone)]
pub(crate) struct Seen {
    pub head: String,
    pub body: Vec<u8>,
}

impl Seen {
    /// The value of header `name` (case-insensitive), if sent.
    pub fn header(&self, name: &str) -> Option<String> {
        self.head.lines().skip(1).find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.trim().eq_ignore_ascii_case(name).then(|| value.trim().to_owned())
        })
    }
}

/// A server on 127.0.0.1 answering `connections` connections, one request each, with what
/// `handler` returns for it (the raw response bytes), then stopping.
pub(crate) struct Server {
    port: u16,
    thread: Option<JoinHandle<Vec<Seen>>>,
}

impl Server {
    pub fn start(connections: usize, handler: impl Fn(&Seen) -> Vec<u8> + Send + 'static) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let thread = std::thread::spawn(move || {
            let mut seen = Vec::new();
            for _ in 0..connections {
                let Ok((mut stream, _)) = listener.accept() else { break };
                let Some(request) = read_request(&mut stream) else { continue };
                let answer = handler(&request);
                // The client may hang up early (an answer over its cap): not the test's failure.
                let _ = stream.write_all(&answer);
                let _ = stream.flush();
                let _ = stream.shutdown(std::net::Shutdown::Write);
                // Let the client read to the end before the socket is dropped.
                let mut rest = [0u8; 1024];
                let _ = stream.set_read_timeout(Some(Duration::from_millis(200)));
                let _ = stream.read(&mut rest);
                seen.push(request);
            }
            seen
        });
        Server { port, thread: Some(thread) }
    }

    pub fn url(&self, path_and_query: &str) -> String {
        format!("http://127.0.0.1:{}{path_and_query}", self.port)
    }

    /// The requests seen, once the server has answered all its connections.
    pub fn finish(mut self) -> Vec<Seen> {
        self.thread.take().map(|thread| thread.join().unwrap()).unwrap_or_default()
    }
}

fn read_request(stream: &mut TcpStream) -> Option<Seen> {
    stream.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break at;
        }
        let n = stream.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
    let mut seen = Seen { head, body: buffer[head_end + 4..].to_vec() };
    let length: usize = seen.header("content-length").and_then(|v| v.parse().ok()).unwrap_or(0);
    while seen.body.len() < length {
        let n = stream.read(&mut chunk).ok()?;
        if n == 0 {
            break;
        }
        seen.body.extend_from_slice(&chunk[..n]);
    }
    Some(seen)
}

/// An HTTP/1.1 response with `status` (e.g. "200 OK"), `headers` and `body`.
pub(crate) fn response(status: &str, headers: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let mut out = format!("HTTP/1.1 {status}\r\ncontent-length: {}\r\nconnection: close\r\n", body.len());
    for (name, value) in headers {
        out += &format!("{name}: {value}\r\n");
    }
    out += "\r\n";
    let mut out = out.into_bytes();
    out.extend_from_slice(body);
    out
}

// ---- the file sink ------------------------------------------------------------------------

#[test]
fn the_file_sink_appends_one_synced_line_per_checkpoint_to_a_new_0600_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("anchors.jsonl");
    let sink = FileSink::new(&path);
    assert_eq!(sink.name(), format!("file {}", path.display()));

    let first = sink.anchor(&checkpoint()).unwrap().unwrap();
    let second_checkpoint = SignedCheckpoint { note: b"other\n4\nroot\n\n", size: 4, number: 8 };
    let second = sink.anchor(&second_checkpoint).unwrap().unwrap();

    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2);
    assert!(text.ends_with('\n'));

    let line: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
    assert_eq!(line["format"], FILE_LINE_FORMAT);
    assert_eq!(line["checkpoint"], 7);
    assert_eq!(line["size"], 3);
    assert_eq!(line["sha256"], hex::encode(sha2::Sha256::digest(NOTE)));
    assert_eq!(line["note"].as_str().unwrap().as_bytes(), NOTE);
    // Member order is fixed, so the lines of one checkpoint are byte-identical everywhere.
    assert!(lines[0].starts_with(r#"{"format":"warden.anchor/v1","checkpoint":7,"size":3,"sha256":""#));

    assert_eq!(first.kind, KIND_FILE);
    assert_eq!(first.bytes, lines[0].as_bytes());
    assert!(first.description.contains("at byte 0 of"), "{}", first.description);
    let second_at = lines[0].len() + 1;
    assert_eq!(second.bytes, lines[1].as_bytes());
    assert!(second.description.contains(&format!("at byte {second_at} of")), "{}", second.description);
}

#[test]
fn the_file_sink_appends_to_an_existing_file_and_never_truncates_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("anchors.jsonl");
    std::fs::write(&path, "earlier line\n").unwrap();
    FileSink::new(&path).anchor(&checkpoint()).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.starts_with("earlier line\n{\"format\""), "{text}");
}

#[test]
fn the_file_sink_refuses_a_symlink_a_directory_a_fifo_and_a_device() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("target");
    std::fs::write(&target, "untouched\n").unwrap();
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let dangling = dir.path().join("dangling");
    std::os::unix::fs::symlink(dir.path().join("nowhere"), &dangling).unwrap();
    let subdir = dir.path().join("subdir");
    std::fs::create_dir(&subdir).unwrap();
    let fifo = dir.path().join("fifo");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status().is_ok_and(|s| s.success());

    let mut table = vec![
        (link.clone(), "symbolic link"),
        (dangling.clone(), "symbolic link"),
        (subdir, "regular file"),
        (PathBuf::from("/dev/null"), "a device"),
        (dir.path().join("missing-dir").join("anchors"), "cannot open"),
    ];
    if made {
        table.push((fifo, "regular file"));
    }
    for (path, expected) in table {
        let error = FileSink::new(&path).anchor(&checkpoint()).unwrap_err();
        assert_eq!(error.code, "io_error", "{path:?}: {error}");
        assert!(error.message.contains(expected), "{path:?}: {error}");
        assert!(error.to_string().starts_with(&format!("anchor file {}: ", path.display())), "{error}");
    }
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "untouched\n");
    assert!(!dir.path().join("nowhere").exists(), "a dangling symlink's target was created");
}

#[test]
fn the_file_sink_refuses_a_note_that_is_not_utf8() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("anchors.jsonl");
    let bad = SignedCheckpoint { note: b"\xff\xfe", size: 1, number: 1 };
    let error = FileSink::new(&path).anchor(&bad).unwrap_err();
    assert_eq!(error.code, "invalid_input", "{error}");
    assert!(!path.exists());
}

// ---- HTTP targets and the HTTP sink -------------------------------------------------------

#[test]
fn an_http_target_refuses_credentials_in_the_url_without_repeating_it() {
    let table = [
        ("https://alice:hunter2@tsa.example/tsr", "user name or password"),
        ("https://alice@tsa.example/tsr", "user name or password"),
        ("https://:hunter2@tsa.example/tsr", "user name or password"),
        ("ftp://tsa.example/tsr", "http:// or https://"),
        ("file:///etc/passwd", "http:// or https://"),
        ("not a url hunter2", "not an absolute URL"),
    ];
    for (url, expected) in table {
        let error = HttpTarget::new(url).unwrap_err();
        assert_eq!(error.code, "configuration_invalid", "{url}: {error}");
        assert!(error.message.contains(expected), "{url}: {error}");
        let shown = format!("{error} {error:?}");
        assert!(!shown.contains("hunter2") && !shown.contains("alice"), "{shown}");
    }
}

#[test]
fn an_http_target_shows_scheme_host_port_and_path_only() {
    let target = HttpTarget::new("https://tsa.example:8443/a/tsr?key=hunter2#frag")
        .unwrap()
        .header("authorization", Zeroizing::new("Bearer hunter2".to_owned()));
    assert_eq!(target.shown(), "https://tsa.example:8443/a/tsr");
    let debug = format!("{target:?}");
    assert!(!debug.contains("hunter2"), "{debug}");
    assert!(debug.contains("authorization"), "{debug}");
    assert_eq!(HttpSink::new(target.clone()).name(), "http https://tsa.example:8443/a/tsr");
    assert_eq!(TsaClient::new(target).name(), "rfc3161 https://tsa.example:8443/a/tsr");
}

#[test]
fn the_http_sink_posts_the_note_as_text_and_keeps_what_comes_back() {
    let server = Server::start(2, |seen| {
        if seen.head.starts_with("POST /witness?") {
            response("200 OK", &[("content-type", "text/plain")], b"\xe2\x80\x94 witness.example cosig\n")
        } else {
            response("204 No Content", &[], b"")
        }
    });
    let target = HttpTarget::new(&server.url("/witness?k=hunter2"))
        .unwrap()
        .header("authorization", Zeroizing::new("Bearer hunter2".to_owned()));
    let receipt = HttpSink::new(target).anchor(&checkpoint()).unwrap().unwrap();
    assert_eq!(receipt.kind, KIND_HTTP);
    assert_eq!(receipt.bytes, b"\xe2\x80\x94 witness.example cosig\n");
    assert!(receipt.description.contains("HTTP 200"), "{}", receipt.description);
    assert!(!receipt.description.contains("hunter2"), "{}", receipt.description);

    let empty = HttpSink::new(HttpTarget::new(&server.url("/empty")).unwrap()).anchor(&checkpoint()).unwrap();
    assert_eq!(empty, None);

    let seen = server.finish();
    assert_eq!(seen.len(), 2);
    assert!(seen[0].head.starts_with("POST /witness?k=hunter2 HTTP/1.1"), "{}", seen[0].head);
    assert_eq!(seen[0].body, NOTE);
    assert_eq!(seen[0].header("content-type").as_deref(), Some(NOTE_CONTENT_TYPE));
    assert_eq!(seen[0].header("authorization").as_deref(), Some("Bearer hunter2"));
    // Nothing but host, content-type, content-length and the configured header goes out.
    let names: Vec<String> = seen[0]
        .head
        .lines()
        .skip(1)
        .filter_map(|line| line.split_once(':').map(|(name, _)| name.trim().to_ascii_lowercase()))
        .collect();
    for name in &names {
        assert!(["host", "content-type", "content-length", "authorization"].contains(&name.as_str()), "{names:?}");
    }
}

#[test]
fn the_http_sink_refuses_redirects_errors_and_oversized_answers_naming_the_sink() {
    let big = vec![b'x'; 8 * 1024];
    let table: Vec<(&str, Vec<u8>, &str)> = vec![
        ("redirect", response("302 Found", &[("location", "http://127.0.0.1:9/elsewhere")], b""), "redirect_refused"),
        ("server-error", response("500 Internal Server Error", &[], b"down for repairs"), "upstream_error"),
        ("forbidden", response("403 Forbidden", &[], b""), "upstream_error"),
        ("advertised-too-large", response("200 OK", &[], &big), "response_too_large"),
        (
            "streamed-too-large",
            {
                let mut raw = b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\n".to_vec();
                raw.extend_from_slice(&big);
                raw
            },
            "response_too_large",
        ),
        ("garbage", b"this is not http\r\n\r\n".to_vec(), "invalid_response"),
    ];
    for (name, answer, code) in table {
        let server = Server::start(1, move |_| answer.clone());
        let target = HttpTarget::new(&server.url("/sink?token=hunter2")).unwrap().max_response_bytes(1024);
        let sink = HttpSink::new(target);
        let error = sink.anchor(&checkpoint()).unwrap_err();
        assert_eq!(error.code, code, "{name}: {error}");
        assert_eq!(error.sink, sink.name(), "{name}");
        let shown = error.to_string();
        assert!(shown.starts_with(&format!("anchor http http://127.0.0.1:{}/sink: ", server.port)), "{name}: {shown}");
        assert!(shown.contains("checkpoint 7 not delivered"), "{name}: {shown}");
        assert!(!shown.contains("hunter2") && !shown.contains("elsewhere"), "{name}: {shown}");
        server.finish();
    }
}

#[test]
fn the_http_sink_reports_a_refused_connection_as_retried() {
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let sink = HttpSink::new(HttpTarget::new(&format!("http://127.0.0.1:{port}/x")).unwrap().timeout_ms(2000));
    let error = sink.anchor(&checkpoint()).unwrap_err();
    assert_eq!(error.code, "network_error", "{error}");
    assert!(error.message.contains("it is retried"), "{error}");
}

#[test]
fn a_custom_provider_is_a_trait_object() {
    struct Witness;
    impl AnchorProvider for Witness {
        fn name(&self) -> String {
            "witness test".into()
        }
        fn anchor(&self, checkpoint: &SignedCheckpoint<'_>) -> Result<Option<AnchorReceipt>, AnchorError> {
            Ok(Some(AnchorReceipt {
                kind: "cosignature".into(),
                bytes: checkpoint.number.to_string().into_bytes(),
                description: "cosigned".into(),
            }))
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let providers: Vec<Box<dyn AnchorProvider>> =
        vec![Box::new(Witness), Box::new(FileSink::new(dir.path().join("a.jsonl")))];
    let receipts: Vec<AnchorReceipt> = providers.iter().map(|p| p.anchor(&checkpoint()).unwrap().unwrap()).collect();
    assert_eq!(receipts[0].bytes, b"7");
    assert_eq!(receipts[1].kind, KIND_FILE);
}
