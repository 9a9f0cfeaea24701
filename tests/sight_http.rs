//! The sight fetch and credentials against real local HTTP and HTTPS servers that misbehave
//! (hostile-fetch-sample.md section E and D19). Every recorded request is checked: GET, no
//! body, the requested path and query, only `host` and the configured auth header.

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use support::{response, self_signed, Conn, Recorded, Server, Silent, TestCa};
use warden::http::{fetch, CancelToken, FetchRequest, FetchResponse};
use warden::sight::credentials::{
    header_for, AuthSpec, CallbackProvider, CredentialProvider, DirectoryProvider, EnvProvider,
};
use warden::sight::SightError;
use zeroize::Zeroizing;

/// Serialises the tests that change the environment with the ones that resolve `localhost`
/// (the libc resolver reads the environment without Rust's lock).
static ENV_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn env_lock() -> std::sync::MutexGuard<'static, ()> {
    ENV_LOCK.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

const TOKEN: &str = "sk-test-9f8e7d6c5b4a39281706";

fn auth_header() -> Option<(String, Zeroizing<String>)> {
    Some(("authorization".to_string(), Zeroizing::new(format!("Bearer {TOKEN}"))))
}

fn request(url: url::Url) -> FetchRequest {
    FetchRequest { url, header: auth_header(), timeout_ms: 500, max_response_bytes: 1024, ca_certs: None }
}

fn get(req: &FetchRequest) -> Result<FetchResponse, SightError> {
    fetch(req, &CancelToken::default())
}

fn err(req: &FetchRequest) -> SightError {
    match get(req) {
        Ok(resp) => panic!("expected an error, got HTTP {} with {} bytes", resp.status, resp.body.len()),
        Err(e) => e,
    }
}

/// A handler that answers every request with `bytes` then closes.
fn answer(bytes: Vec<u8>) -> impl Fn(Conn, &Recorded) -> Option<Conn> + Send + Sync + 'static {
    move |mut conn, _| {
        conn.send(&bytes);
        Some(conn)
    }
}

/// Method GET, no body, the exact target, and only `host` plus the configured auth header.
fn assert_clean(server: &Server, target: &str, auth: Option<(&str, &str)>) {
    let requests = server.requests();
    assert!(!requests.is_empty(), "the server saw no request");
    for req in requests {
        assert_eq!(req.method, "GET");
        assert_eq!(req.target, target);
        assert!(req.extra.is_empty(), "a request body was sent");
        let mut names: Vec<&str> = req.headers.iter().map(|(n, _)| n.as_str()).collect();
        names.sort_unstable();
        let mut expected = vec!["host"];
        if let Some((name, _)) = auth {
            expected.push(name);
        }
        expected.sort_unstable();
        assert_eq!(names, expected, "unexpected headers on the wire: {:?}", req.headers);
        if let Some((name, value)) = auth {
            assert_eq!(req.header(name), Some(value));
        }
    }
}

fn assert_no_secret(e: &SightError) {
    assert!(!e.message.contains(TOKEN), "the credential leaked into {e}");
    assert!(!e.message.contains('\n') && !e.message.contains('\r'), "multi-line message: {e}");
}

#[test]
fn a_plain_get_sends_only_host_and_the_auth_header_and_returns_the_body() {
    let server = Server::http(answer(response("200 OK", &[("content-type", "application/json")], b"{\"a\":1}")));
    let resp = get(&request(server.url("/v2/items?q=a%20b&n=3"))).expect("fetch");
    assert_eq!(resp.status, 200);
    assert_eq!(resp.body, b"{\"a\":1}");
    assert_eq!(resp.content_type.as_deref(), Some("application/json"));
    assert_clean(&server, "/v2/items?q=a%20b&n=3", Some(("authorization", &format!("Bearer {TOKEN}"))));
}

#[test]
fn a_request_without_auth_sends_only_host() {
    let server = Server::http(answer(response("200 OK", &[], b"[]")));
    let mut req = request(server.url("/x"));
    req.header = None;
    get(&req).expect("fetch");
    assert_clean(&server, "/x", None);
}

#[test]
fn every_redirect_status_is_refused_and_its_target_never_contacted() {
    // E01 and every 3xx kind; E03 is why: nothing is followed, whatever the header.
    let evil = Server::http(answer(response("200 OK", &[], b"stolen")));
    let location = format!("http://127.0.0.1:{}/steal?k=evil-marker", evil.port);
    for status in [
        "300 Multiple Choices",
        "301 Moved Permanently",
        "302 Found",
        "303 See Other",
        "304 Not Modified",
        "305 Use Proxy",
        "307 Temporary Redirect",
        "308 Permanent Redirect",
    ] {
        let server = Server::http(answer(response(status, &[("location", &location)], b"")));
        let mut req = request(server.url("/r"));
        req.header = Some(("x-api-key".to_string(), Zeroizing::new(TOKEN.to_string())));
        let e = err(&req);
        assert_eq!(e.code, "redirect_refused", "{status}: {e}");
        assert!(!e.message.contains("evil-marker") && !e.message.contains("steal"), "{e}");
        assert!(!e.message.contains(&evil.port.to_string()), "{e}");
        assert_no_secret(&e);
        assert_clean(&server, "/r", Some(("x-api-key", TOKEN)));
    }
    assert_eq!(evil.connections(), 0, "the redirect target was contacted");
}

#[test]
fn a_location_header_on_a_201_is_ignored() {
    // E25
    let evil = Server::http(answer(response("200 OK", &[], b"stolen")));
    let location = format!("http://127.0.0.1:{}/steal", evil.port);
    let server = Server::http(answer(response("201 Created", &[("location", &location)], b"{}")));
    let resp = get(&request(server.url("/c"))).expect("fetch");
    assert_eq!((resp.status, resp.body.as_slice()), (201, b"{}".as_slice()));
    assert_eq!(evil.connections(), 0);
}

#[test]
fn an_advertised_length_over_the_cap_is_refused_before_reading() {
    // E05: the server claims 999999999 bytes and sends only a few; the refusal comes anyway.
    let server = Server::http(|mut conn, _| {
        conn.send(b"HTTP/1.1 200 OK\r\ncontent-length: 999999999\r\n\r\n{\"a\":");
        Some(conn)
    });
    let e = err(&request(server.url("/big")));
    assert_eq!(e.code, "response_too_large", "{e}");
}

#[test]
fn a_lying_content_length_reads_only_the_advertised_bytes() {
    // E07: 100 advertised, 10 MiB sent.
    let server = Server::http(|mut conn, _| {
        let mut bytes = b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n".to_vec();
        bytes.extend(std::iter::repeat_n(b'x', 10 * 1024 * 1024));
        conn.send(&bytes);
        None
    });
    let resp = get(&request(server.url("/lie"))).expect("fetch");
    assert_eq!(resp.body.len(), 100);
}

#[test]
fn a_body_exactly_at_the_cap_is_accepted() {
    let server = Server::http(answer(response("200 OK", &[], &[b'a'; 1024])));
    assert_eq!(get(&request(server.url("/"))).expect("fetch").body.len(), 1024);
}

#[test]
fn a_chunked_body_over_the_cap_is_refused_while_streaming() {
    let server = Server::http(|mut conn, _| {
        conn.send(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n");
        for _ in 0..64 {
            if !conn.send(format!("400\r\n{}\r\n", "y".repeat(1024)).as_bytes()) {
                return None;
            }
        }
        conn.send(b"0\r\n\r\n");
        Some(conn)
    });
    let e = err(&request(server.url("/chunked")));
    assert_eq!(e.code, "response_too_large", "{e}");
}

#[test]
fn a_close_delimited_body_over_the_cap_is_refused_while_streaming() {
    let server = Server::http(|mut conn, _| {
        let mut bytes = b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\n".to_vec();
        bytes.extend(std::iter::repeat_n(b'z', 5000));
        conn.send(&bytes);
        Some(conn)
    });
    let e = err(&request(server.url("/eof")));
    assert_eq!(e.code, "response_too_large", "{e}");
}

#[test]
fn a_gzip_bomb_is_refused_undecoded() {
    // E09: a small body claiming gzip; it is never inflated.
    let body = vec![0x1f, 0x8b, 0x08, 0, 0, 0, 0, 0, 0, 0x03, 0x4b, 0x4c, 0x04, 0];
    let server = Server::http(answer(response("200 OK", &[("content-encoding", "gzip")], &body)));
    let e = err(&request(server.url("/gz")));
    assert_eq!(e.code, "invalid_response", "{e}");
}

#[test]
fn every_content_encoding_but_identity_is_refused() {
    // E11
    for encoding in ["GZIP", "x-gzip", "deflate", "br", "identity, gzip", "zstd", ""] {
        let server = Server::http(answer(response("200 OK", &[("content-encoding", encoding)], b"{}")));
        let e = err(&request(server.url("/enc")));
        assert_eq!(e.code, "invalid_response", "{encoding:?}: {e}");
    }
    for encoding in ["identity", "Identity"] {
        let server = Server::http(answer(response("200 OK", &[("content-encoding", encoding)], b"{}")));
        assert_eq!(get(&request(server.url("/enc"))).expect("identity").body, b"{}");
    }
}

#[test]
fn a_server_that_never_sends_headers_times_out_at_the_deadline() {
    // E13
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let release_rx = std::sync::Mutex::new(release_rx);
    let server = Server::http(move |conn, _| {
        let _ = release_rx.lock().map(|rx| rx.recv_timeout(Duration::from_secs(10)));
        Some(conn)
    });
    let started = Instant::now();
    let e = err(&request(server.url("/silent")));
    let elapsed = started.elapsed();
    let _ = release_tx.send(());
    assert_eq!(e.code, "timeout", "{e}");
    assert!(elapsed >= Duration::from_millis(450) && elapsed < Duration::from_secs(3), "{elapsed:?}");
}

#[test]
fn a_slow_drip_body_times_out_at_the_deadline() {
    let server = Server::http(|mut conn, _| {
        conn.send(b"HTTP/1.1 200 OK\r\ncontent-length: 1000\r\n\r\n");
        for _ in 0..100 {
            if !conn.send(b"x") {
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    });
    let started = Instant::now();
    let e = err(&request(server.url("/drip")));
    assert_eq!(e.code, "timeout", "{e}");
    assert!(started.elapsed() < Duration::from_secs(3));
}

#[test]
fn a_hundred_kib_of_response_headers_is_an_error() {
    // E15
    let server = Server::http(|mut conn, _| {
        let mut head = String::from("HTTP/1.1 200 OK\r\n");
        let mut n = 0;
        while head.len() < 100 * 1024 {
            head.push_str(&format!("x-pad-{n}: {}\r\n", "p".repeat(100)));
            n += 1;
        }
        head.push_str("content-length: 2\r\n\r\n{}");
        conn.send(head.as_bytes());
        Some(conn)
    });
    let e = err(&request(server.url("/headers")));
    assert!(e.code == "invalid_response" || e.code == "network_error", "{e}");
}

#[test]
fn an_error_status_is_upstream_error_with_a_one_line_bounded_excerpt() {
    // E17: the body echoes the credential; http keeps a raw one-line excerpt (the orchestrator
    // redacts it), never adds request headers of its own.
    let html = format!(
        "<html>\n<body>\r\n<pre>Authorization: Bearer {TOKEN}\n\n</pre>{}</body></html>",
        "filler ".repeat(2000)
    );
    let server =
        Server::http(answer(response("500 Internal Server Error", &[("content-type", "text/html")], html.as_bytes())));
    let e = err(&request(server.url("/boom")));
    assert_eq!(e.code, "upstream_error");
    assert!(e.message.contains("HTTP 500"), "{e}");
    assert!(e.message.contains("<html> <body> <pre>Authorization: Bearer"), "{e}");
    assert!(!e.message.contains('\n') && !e.message.contains('\r'));
    assert!(e.message.len() <= 2048 + 64, "{}", e.message.len());

    let server = Server::http(answer(response("404 Not Found", &[], b"no such\nthing")));
    let e = err(&request(server.url("/missing")));
    assert_eq!(e.code, "upstream_error");
    assert!(e.message.contains("HTTP 404") && e.message.contains("no such thing"), "{e}");
    assert_no_secret(&e);
}

#[test]
fn a_huge_error_body_is_still_upstream_error() {
    let server = Server::http(answer(response("503 Service Unavailable", &[], &vec![b'e'; 100_000])));
    let e = err(&request(server.url("/busy")));
    assert_eq!(e.code, "upstream_error", "{e}");
    assert!(e.message.len() <= 2048 + 64);
}

#[test]
fn an_html_success_is_returned_for_the_parser_to_judge() {
    // E19
    let server = Server::http(answer(response("200 OK", &[("content-type", "text/html")], b"<html></html>")));
    let resp = get(&request(server.url("/page"))).expect("fetch");
    assert_eq!(resp.content_type.as_deref(), Some("text/html"));
    assert_eq!(resp.body, b"<html></html>");
}

#[test]
fn a_refused_connection_is_a_bounded_network_error() {
    // E23 (refused)
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("addr").port()
    };
    let url = url::Url::parse(&format!("http://127.0.0.1:{port}/x?secret=q")).expect("url");
    let e = err(&request(url));
    assert_eq!(e.code, "network_error", "{e}");
    assert!(e.message.len() <= 300 && !e.message.contains("secret=q"), "{e}");
    assert_no_secret(&e);
}

#[test]
fn a_reset_mid_body_is_a_network_error_with_no_partial_body() {
    // E23 (RST)
    let server = Server::http(|mut conn, _| {
        conn.send(b"HTTP/1.1 200 OK\r\ncontent-length: 1000\r\n\r\n{\"partial\":");
        conn.reset();
        None
    });
    let e = err(&request(server.url("/rst")));
    assert_eq!(e.code, "network_error", "{e}");
    assert!(e.message.len() <= 300, "{e}");
}

#[test]
fn a_cancel_mid_body_ends_the_fetch_aborted() {
    // D19, with a handshake: the server says when part of the body is out, the test cancels,
    // then tells the server to continue.
    let (sent_tx, sent_rx) = mpsc::channel::<()>();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let channels = std::sync::Mutex::new((sent_tx, go_rx));
    let server = Server::http(move |mut conn, _| {
        conn.send(b"HTTP/1.1 200 OK\r\ncontent-length: 1000\r\n\r\n[1,2,3,");
        let Ok(guard) = channels.lock() else { return None };
        let _ = guard.0.send(());
        let _ = guard.1.recv_timeout(Duration::from_secs(10));
        conn.send(&[b' '; 993]);
        Some(conn)
    });
    let token = CancelToken::default();
    let mut req = request(server.url("/stream"));
    req.timeout_ms = 10_000;
    let worker = {
        let token = token.clone();
        std::thread::spawn(move || fetch(&req, &token))
    };
    sent_rx.recv_timeout(Duration::from_secs(10)).expect("the server sent part of the body");
    token.cancel();
    go_tx.send(()).expect("server waiting");
    let result = worker.join().expect("fetch thread");
    match result {
        Err(e) => assert_eq!(e.code, "aborted", "{e}"),
        Ok(resp) => panic!("a cancelled fetch returned {} bytes", resp.body.len()),
    }
}

#[test]
fn a_cancel_before_the_fetch_sends_nothing() {
    let server = Server::http(answer(response("200 OK", &[], b"{}")));
    let token = CancelToken::default();
    token.cancel();
    let e = fetch(&request(server.url("/")), &token).expect_err("aborted");
    assert_eq!(e.code, "aborted");
    assert_eq!(server.connections(), 0);
}

/// A generous bound on how long a test waits for a cancelled fetch (a test timeout, never a
/// timing assertion): a prompt cancel answers within a few poll intervals, one that is not
/// prompt waits for the request's `timeout_ms` of a minute.
const TEST_BOUND: Duration = Duration::from_secs(20);

/// Runs `fetch` on a thread of its own with a fresh token; the answer comes on the receiver.
fn cancellable(mut req: FetchRequest) -> (CancelToken, mpsc::Receiver<Result<FetchResponse, SightError>>) {
    req.timeout_ms = 60_000;
    let token = CancelToken::default();
    let (tx, rx) = mpsc::channel();
    let worker_token = token.clone();
    std::thread::spawn(move || {
        let _ = tx.send(fetch(&req, &worker_token));
    });
    (token, rx)
}

fn assert_aborted_within_the_bound(answer: &mpsc::Receiver<Result<FetchResponse, SightError>>, phase: &str) {
    match answer.recv_timeout(TEST_BOUND) {
        Ok(Err(e)) => assert_eq!(e.code, "aborted", "{phase}: {e}"),
        Ok(Ok(resp)) => panic!("{phase}: a cancelled fetch returned HTTP {}", resp.status),
        Err(waited) => panic!("{phase}: the cancelled fetch was still waiting after {TEST_BOUND:?} ({waited})"),
    }
}

#[test]
fn a_cancel_while_waiting_for_the_response_head_of_a_silent_server_returns_aborted_and_hangs_up() {
    let server = Silent::start(b"");
    let (token, answer) = cancellable(request(server.url("/silent")));
    assert!(server.received_within(TEST_BOUND), "the request never reached the server");
    token.cancel();
    assert_aborted_within_the_bound(&answer, "waiting for the head");
    assert!(server.closed_within(TEST_BOUND), "the connection was left open after the cancel");
}

#[test]
fn a_cancel_while_the_body_stalls_after_the_headers_returns_aborted_and_hangs_up() {
    let server = Silent::start(b"HTTP/1.1 200 OK\r\ncontent-length: 1000\r\n\r\n[1,2,");
    let (token, answer) = cancellable(request(server.url("/stall")));
    assert!(server.received_within(TEST_BOUND), "the request never reached the server");
    // The handshake: the head and the first body bytes were delivered and read, so the fetch
    // is (or is about to be) blocked reading the rest.
    let waited = Instant::now();
    while !sent_and_read(server.port) {
        assert!(waited.elapsed() < TEST_BOUND, "the client never read what the server sent");
        std::thread::sleep(Duration::from_millis(10));
    }
    token.cancel();
    assert_aborted_within_the_bound(&answer, "a stalled body");
    assert!(server.closed_within(TEST_BOUND), "the connection was left open after the cancel");
}

#[test]
fn a_cancel_during_a_tls_handshake_the_server_never_answers_returns_aborted_and_hangs_up() {
    let _env = env_lock();
    let server = Silent::start(b"");
    let (token, answer) = cancellable(request(server.https_url("/tls")));
    assert!(server.received_within(TEST_BOUND), "the ClientHello never reached the server");
    token.cancel();
    assert_aborted_within_the_bound(&answer, "the TLS handshake");
    assert!(server.closed_within(TEST_BOUND), "the connection was left open after the cancel");
}

/// A listener whose accept queue is full and that never accepts: a new connection waits in
/// SYN_SENT (Linux drops the SYNs) until the client gives up. The fillers are returned so the
/// queue stays full.
fn unaccepting_listener() -> (std::net::TcpListener, Vec<std::net::TcpStream>) {
    use std::os::fd::AsRawFd;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    // SAFETY: a listening socket's descriptor; listen(2) again only changes its backlog.
    let changed = unsafe { libc::listen(listener.as_raw_fd(), 0) };
    assert_eq!(changed, 0, "listen(fd, 0)");
    let addr = listener.local_addr().expect("addr");
    let mut fillers = Vec::new();
    for _ in 0..16 {
        match std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(300)) {
            Ok(stream) => fillers.push(stream),
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => return (listener, fillers),
            Err(e) => panic!("filling the accept queue: {e}"),
        }
    }
    panic!("the accept queue never filled; connections to {addr} do not wait");
}

/// The loopback TCP connections (from /proc/net/tcp) as (local port, remote port, state,
/// bytes waiting to be sent or acknowledged, bytes received and not yet read).
fn tcp_table() -> Vec<(u16, u16, u8, u64, u64)> {
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
    let port = |field: &str| field.split_once(':').and_then(|(_, p)| u16::from_str_radix(p, 16).ok());
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (tx, rx) = fields.get(4)?.split_once(':')?;
            Some((
                port(fields.get(1)?)?,
                port(fields.get(2)?)?,
                u8::from_str_radix(fields.get(3)?, 16).ok()?,
                u64::from_str_radix(tx, 16).ok()?,
                u64::from_str_radix(rx, 16).ok()?,
            ))
        })
        .collect()
}

/// Whether an established connection to `server_port` exists, the server's side has nothing
/// left to send and the client's side has read everything it received.
fn sent_and_read(server_port: u16) -> bool {
    const ESTABLISHED: u8 = 1;
    let table = tcp_table();
    let server = table.iter().find(|(local, _, state, _, _)| *local == server_port && *state == ESTABLISHED);
    let client = table.iter().find(|(_, remote, state, _, _)| *remote == server_port && *state == ESTABLISHED);
    matches!((server, client), (Some((_, _, _, 0, _)), Some((_, _, _, _, 0))))
}

/// Whether a connection to 127.0.0.1:`port` is in SYN_SENT (from /proc/net/tcp).
fn connecting_to(port: u16) -> bool {
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
    let remote = format!("0100007F:{port:04X}");
    table.lines().skip(1).any(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        fields.get(2) == Some(&remote.as_str()) && fields.get(3) == Some(&"02")
    })
}

#[test]
fn a_cancel_while_waiting_for_the_connection_returns_aborted() {
    let (listener, _fillers) = unaccepting_listener();
    let port = listener.local_addr().expect("addr").port();
    // No SYN_SENT yet: the fillers' timed-out attempt is gone, and only the fetch connects.
    let waited = Instant::now();
    while connecting_to(port) && waited.elapsed() < TEST_BOUND {
        std::thread::sleep(Duration::from_millis(10));
    }
    let url = url::Url::parse(&format!("http://127.0.0.1:{port}/connect")).expect("url");
    let (token, answer) = cancellable(request(url));
    // The handshake: the fetch's SYN is out and unanswered.
    let waited = Instant::now();
    while !connecting_to(port) {
        assert!(waited.elapsed() < TEST_BOUND, "the fetch never started connecting");
        std::thread::sleep(Duration::from_millis(10));
    }
    token.cancel();
    assert_aborted_within_the_bound(&answer, "connecting");
}

#[test]
fn proxy_variables_in_the_environment_are_ignored() {
    let _env = env_lock();
    let proxy = Server::http(answer(response("200 OK", &[], b"proxied")));
    let proxy_url = format!("http://127.0.0.1:{}", proxy.port);
    for name in ["HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"] {
        std::env::set_var(name, &proxy_url);
    }
    let server = Server::http(answer(response("200 OK", &[], b"direct")));
    let resp = get(&request(server.url("/p")));
    for name in ["HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"] {
        std::env::remove_var(name);
    }
    assert_eq!(resp.expect("fetch").body, b"direct");
    assert_eq!(proxy.connections(), 0);
}

#[test]
fn https_with_the_configured_ca_succeeds_and_sends_only_the_configured_headers() {
    let _env = env_lock();
    let ca = TestCa::new();
    let server = Server::https(&ca.leaf(&["localhost"]), answer(response("200 OK", &[], b"{\"tls\":true}")));
    let mut req = request(server.https_url("localhost", "/secure?a=1"));
    req.ca_certs = Some(ca.pem_path.clone());
    let resp = get(&req).expect("fetch over TLS");
    assert_eq!(resp.body, b"{\"tls\":true}");
    assert_clean(&server, "/secure?a=1", Some(("authorization", &format!("Bearer {TOKEN}"))));
}

fn assert_tls_error(e: &SightError) {
    assert_eq!(e.code, "network_error", "{e}");
    assert!(e.message.contains("TLS"), "{e}");
    assert!(e.message.len() <= 300, "{e}");
    assert_no_secret(e);
}

#[test]
fn https_without_the_ca_is_refused_as_a_tls_error() {
    let _env = env_lock();
    // E21: a CA-signed cert not trusted by this request.
    let ca = TestCa::new();
    let server = Server::https(&ca.leaf(&["localhost"]), answer(response("200 OK", &[], b"{}")));
    let e = err(&request(server.https_url("localhost", "/")));
    assert_tls_error(&e);
    assert!(server.requests().is_empty(), "a request went out over an untrusted connection");
}

#[test]
fn https_for_the_wrong_host_is_refused_as_a_tls_error() {
    let _env = env_lock();
    // E21: trusted CA, but the certificate names another host.
    let ca = TestCa::new();
    let server = Server::https(&ca.leaf(&["api.example.com"]), answer(response("200 OK", &[], b"{}")));
    let mut req = request(server.https_url("localhost", "/"));
    req.ca_certs = Some(ca.pem_path.clone());
    assert_tls_error(&err(&req));
    assert!(server.requests().is_empty());
}

#[test]
fn a_self_signed_certificate_is_refused_even_with_a_ca_file() {
    let _env = env_lock();
    // E21: self-signed, not in ca_certs.
    let ca = TestCa::new();
    let server = Server::https(&self_signed(&["localhost"]), answer(response("200 OK", &[], b"{}")));
    let mut req = request(server.https_url("localhost", "/"));
    req.ca_certs = Some(ca.pem_path.clone());
    assert_tls_error(&err(&req));
    assert!(server.requests().is_empty());
}

#[test]
fn a_ca_file_without_certificates_is_a_configuration_error_before_any_io() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("empty.pem");
    std::fs::write(&path, "not a pem").expect("write");
    let server = Server::http(answer(response("200 OK", &[], b"{}")));
    let mut req = request(server.url("/"));
    req.ca_certs = Some(path);
    assert_eq!(err(&req).code, "configuration_invalid");
    req.ca_certs = Some(dir.path().join("missing.pem"));
    assert_eq!(err(&req).code, "configuration_invalid");
    assert_eq!(server.connections(), 0);
}

// ---- credentials ----

struct MapProvider(Vec<(&'static str, &'static str)>);

impl CredentialProvider for MapProvider {
    fn resolve(&self, reference: &str) -> Option<Zeroizing<String>> {
        self.0.iter().find(|(r, _)| *r == reference).map(|(_, v)| Zeroizing::new(v.to_string()))
    }
}

fn bearer(reference: &str) -> AuthSpec {
    AuthSpec::Bearer { credential: reference.to_string() }
}

fn header(auth: &AuthSpec, provider: &dyn CredentialProvider) -> (String, String) {
    let (name, value) = header_for(auth, provider).expect("header").expect("some header");
    (name, value.as_str().to_string())
}

#[test]
fn the_environment_provider_reads_the_named_variable() {
    let _env = env_lock();
    std::env::set_var("WARDEN_TEST_HTTP_ENV_TOKEN", "env-secret-123");
    let got = header(&bearer("WARDEN_TEST_HTTP_ENV_TOKEN"), &EnvProvider);
    assert_eq!(got, ("authorization".to_string(), "Bearer env-secret-123".to_string()));
    std::env::remove_var("WARDEN_TEST_HTTP_ENV_TOKEN");
    let e = header_for(&bearer("WARDEN_TEST_HTTP_ENV_TOKEN"), &EnvProvider).expect_err("gone");
    assert_eq!(e.code, "credential_unavailable");
}

#[test]
fn the_directory_provider_reads_one_file_per_reference_and_trims_one_newline() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("API_TOKEN"), "dir-secret\n").expect("write");
    std::fs::write(dir.path().join("CRLF_TOKEN"), "crlf-secret\r\n").expect("write");
    std::fs::write(dir.path().join("TWO_LINES"), "a\n\n").expect("write");
    std::fs::write(dir.path().join("HUGE"), vec![b'h'; 70 * 1024]).expect("write");
    std::fs::write(dir.path().join("EMPTY"), "").expect("write");
    let provider = DirectoryProvider { dir: dir.path().to_path_buf() };
    assert_eq!(header(&bearer("API_TOKEN"), &provider).1, "Bearer dir-secret");
    assert_eq!(header(&bearer("CRLF_TOKEN"), &provider).1, "Bearer crlf-secret");
    // Only one newline is trimmed: the second one is refused as a control character.
    let e = header_for(&bearer("TWO_LINES"), &provider).expect_err("LF");
    assert_eq!(e.code, "credential_unavailable");
    for reference in ["HUGE", "EMPTY", "MISSING"] {
        let e = header_for(&bearer(reference), &provider).expect_err(reference);
        assert_eq!(e.code, "credential_unavailable", "{reference}");
        assert!(e.message.contains(reference), "{e}");
    }
    // Never outside the directory.
    assert!(provider.resolve("../API_TOKEN").is_none());
    assert!(provider.resolve("API_TOKEN/..").is_none());
    assert!(provider.resolve("").is_none());
}

#[test]
fn the_callback_provider_is_asked_on_every_request_and_never_cached() {
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = calls.clone();
    let provider = CallbackProvider(move |reference: &str| {
        let n = counter.fetch_add(1, Ordering::SeqCst);
        (reference == "HOST_TOKEN").then(|| format!("rotated-{n}"))
    });
    assert_eq!(header(&bearer("HOST_TOKEN"), &provider).1, "Bearer rotated-0");
    assert_eq!(header(&bearer("HOST_TOKEN"), &provider).1, "Bearer rotated-1");
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    let e = header_for(&bearer("OTHER"), &provider).expect_err("missing");
    assert_eq!((e.code, e.message.contains("OTHER")), ("credential_unavailable", true));
}

#[test]
fn basic_auth_encodes_user_and_password_and_refuses_a_colon_in_the_username() {
    let auth = AuthSpec::Basic { username: "USER_REF".into(), password: "PASS_REF".into() };
    let provider = MapProvider(vec![("USER_REF", "alice"), ("PASS_REF", "p:ss w0rd")]);
    assert_eq!(header(&auth, &provider), ("authorization".to_string(), "Basic YWxpY2U6cDpzcyB3MHJk".to_string()));
    let provider = MapProvider(vec![("USER_REF", "ali:ce-user"), ("PASS_REF", "pw-secret")]);
    let e = header_for(&auth, &provider).expect_err("colon");
    assert_eq!(e.code, "credential_unavailable");
    assert!(e.message.contains("USER_REF") && !e.message.contains("ali:ce") && !e.message.contains("pw-secret"), "{e}");
}

#[test]
fn api_key_auth_uses_the_configured_header_and_prefix() {
    let auth =
        AuthSpec::ApiKey { header: "X-Api-Key".into(), credential: "KEY_REF".into(), prefix: Some("token ".into()) };
    let provider = MapProvider(vec![("KEY_REF", "abc123")]);
    assert_eq!(header(&auth, &provider), ("x-api-key".to_string(), "token abc123".to_string()));
    let bare = AuthSpec::ApiKey { header: "X-Api-Key".into(), credential: "KEY_REF".into(), prefix: None };
    assert_eq!(header(&bare, &provider).1, "abc123");
    assert!(header_for(&AuthSpec::None, &provider).expect("none").is_none());
}

#[test]
fn values_with_line_breaks_or_nul_are_refused_and_never_echoed() {
    let hostile = [
        "good\r\nX-Injected: evil-value-1",
        "good\nX-Injected: evil-value-2",
        "evil-value-3\r",
        "evil\0value-4",
        "evil\u{7f}value-5",
    ];
    for value in hostile {
        let provider = CallbackProvider(move |_: &str| Some(value.to_string()));
        for auth in [
            bearer("REF_A"),
            AuthSpec::Basic { username: "REF_A".into(), password: "REF_B".into() },
            AuthSpec::ApiKey { header: "X-Key".into(), credential: "REF_A".into(), prefix: None },
        ] {
            let e = header_for(&auth, &provider).expect_err("refused");
            assert_eq!(e.code, "credential_unavailable", "{value:?}");
            assert!(e.message.contains("REF_A"), "{e}");
            for fragment in ["evil", "good", "Injected", "value"] {
                assert!(!e.message.contains(fragment), "value leaked: {e}");
            }
        }
    }
}

#[test]
fn an_empty_value_is_unavailable() {
    let provider = CallbackProvider(|_: &str| Some(String::new()));
    let e = header_for(&bearer("EMPTY_REF"), &provider).expect_err("empty");
    assert_eq!(e.code, "credential_unavailable");
    assert!(e.message.contains("EMPTY_REF"));
}

#[test]
fn a_resolved_credential_reaches_the_wire_in_the_one_configured_header() {
    let server = Server::http(answer(response("200 OK", &[], b"{}")));
    let auth =
        AuthSpec::ApiKey { header: "X-Api-Key".into(), credential: "WIRE_REF".into(), prefix: Some("token ".into()) };
    let provider = MapProvider(vec![("WIRE_REF", "wire-secret")]);
    let mut req = request(server.url("/w?x=1"));
    req.header = header_for(&auth, &provider).expect("header");
    get(&req).expect("fetch");
    assert_clean(&server, "/w?x=1", Some(("x-api-key", "token wire-secret")));
}
