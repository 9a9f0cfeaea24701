//! `--admin HOST:PORT`: the gateway's admin listener (off unless given; loopback unless
//! `--allow-remote`). It serves one thing, `GET /metrics`: every instrument and gauge in the
//! Prometheus text format, collected at the scrape. One connection at a time, each with a short
//! deadline and a bounded head: a scraper is one client, not the agents' traffic.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Weak;
use std::time::Duration;

use super::intercept::Engine;
use super::log;

/// The largest request head read.
const MAX_HEAD_BYTES: usize = 8 * 1024;
/// How long one connection may take to send its head and read the answer.
const DEADLINE: Duration = Duration::from_secs(5);

/// The answer to one request head (pure): status, content type, body.
pub fn route(head: &[u8], metrics: &dyn Fn() -> Option<String>) -> (u16, &'static str, String) {
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut request = httparse::Request::new(&mut headers);
    match request.parse(head) {
        Ok(httparse::Status::Complete(_)) => {}
        _ => return (400, "text/plain; charset=utf-8", "bad request\n".into()),
    }
    let path = request.path.unwrap_or_default();
    let path = path.split_once('?').map_or(path, |(path, _)| path);
    if path != "/metrics" {
        return (404, "text/plain; charset=utf-8", "not found: the admin address serves GET /metrics\n".into());
    }
    if request.method != Some("GET") {
        return (405, "text/plain; charset=utf-8", "method not allowed: GET /metrics\n".into());
    }
    match metrics() {
        Some(text) => (200, "text/plain; version=0.0.4; charset=utf-8", text),
        None => (503, "text/plain; charset=utf-8", "metrics are unavailable\n".into()),
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        _ => "Service Unavailable",
    }
}

fn answer(mut stream: TcpStream, engine: &Weak<Engine>) {
    let _ = stream.set_read_timeout(Some(DEADLINE));
    let _ = stream.set_write_timeout(Some(DEADLINE));
    let mut head = Vec::with_capacity(512);
    let mut chunk = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < MAX_HEAD_BYTES {
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&chunk[..n]),
        }
    }
    let metrics = || engine.upgrade().and_then(|engine| engine.telemetry.prometheus_text());
    let (status, content_type, body) = route(&head, &metrics);
    let reply = format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n",
        reason(status),
        body.len()
    );
    let _ = stream.write_all(reply.as_bytes()).and_then(|()| stream.write_all(body.as_bytes()));
    let _ = stream.flush();
}

/// Serve `listener` on a thread of its own until the gateway is gone.
pub fn serve(listener: TcpListener, engine: Weak<Engine>) {
    let spawned = std::thread::Builder::new().name("gateway-admin".into()).spawn(move || {
        for stream in listener.incoming() {
            if engine.strong_count() == 0 {
                return;
            }
            match stream {
                Ok(stream) => answer(stream, &engine),
                Err(error) => log::warn(&format!("the admin listener: {error}")),
            }
        }
    });
    if let Err(error) = spawned {
        log::warn(&format!("the admin listener could not start: {error}"));
    }
}

#[cfg(test)]
mod tests {
    use super::route;

    #[test]
    fn only_get_metrics_is_served() {
        let metrics = || Some("# TYPE x counter\nx_total 1\n".to_owned());
        let none = || None;
        let cases: &[(&[u8], u16)] = &[
            (b"GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n", 200),
            (b"GET /metrics?x=1 HTTP/1.1\r\n\r\n", 200),
            (b"POST /metrics HTTP/1.1\r\n\r\n", 405),
            (b"GET / HTTP/1.1\r\n\r\n", 404),
            (b"GET /metricsx HTTP/1.1\r\n\r\n", 404),
            (b"GET /metrics HTTP/1.1\r\n", 400),
            (b"\x00\x01 nonsense\r\n\r\n", 400),
        ];
        for (head, status) in cases {
            assert_eq!(route(head, &metrics).0, *status, "{}", String::from_utf8_lossy(head));
        }
        let (status, content_type, body) = route(b"GET /metrics HTTP/1.1\r\n\r\n", &metrics);
        assert_eq!(
            (status, content_type, body.as_str()),
            (200, "text/plain; version=0.0.4; charset=utf-8", "# TYPE x counter\nx_total 1\n")
        );
        assert_eq!(route(b"GET /metrics HTTP/1.1\r\n\r\n", &none).0, 503);
    }
}
