//! `--admin HOST:PORT`: the gateway's admin listener (off unless given; loopback unless
//! `--allow-remote`). It serves one thing, `GET /metrics`: every instrument and gauge in the
//! Prometheus text format, collected at the scrape. Served by the CLI's one HTTP stack
//! (`crate::server`: hyper 1.x and axum) on a runtime of its own thread: at most
//! [`MAX_CONNECTIONS`] at once, one request each (`Connection: close`), each closed after
//! [`DEADLINE`], the head within it too — a
//! scraper is one client, not the agents' traffic.

use std::net::TcpListener;
use std::sync::Weak;
use std::time::Duration;

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

use super::intercept::Engine;
use super::log;
use crate::server;

/// Connections served at once; more are closed at accept.
const MAX_CONNECTIONS: usize = 4;
/// How long one connection may take to send its head and read the answer.
const DEADLINE: Duration = Duration::from_secs(5);

/// What collects the text at a scrape (`None`: metrics are unavailable).
type Metrics = std::sync::Arc<dyn Fn() -> Option<String> + Send + Sync>;

fn text(status: StatusCode, body: &'static str) -> Response {
    (status, [(header::CONTENT_TYPE, "text/plain; charset=utf-8"), (header::CACHE_CONTROL, "no-store")], body)
        .into_response()
}

/// The admin routes: `GET /metrics` (a query is ignored), 405 for another method on it, 404
/// elsewhere; every answer `Cache-Control: no-store`.
pub fn router(metrics: Metrics) -> Router {
    let scrape = move || {
        let metrics = std::sync::Arc::clone(&metrics);
        async move {
            match server::blocking(move || Ok(metrics())).await.ok().flatten() {
                Some(body) => (
                    StatusCode::OK,
                    [
                        (header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8"),
                        (header::CACHE_CONTROL, "no-store"),
                    ],
                    body,
                )
                    .into_response(),
                None => text(StatusCode::SERVICE_UNAVAILABLE, "metrics are unavailable\n"),
            }
        }
    };
    let routes = Router::new()
        .route(
            "/metrics",
            get(scrape)
                .fallback(|| async { text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed: GET /metrics\n") }),
        )
        .fallback(|| async { text(StatusCode::NOT_FOUND, "not found: the admin address serves GET /metrics\n") });
    server::limits(routes)
}

/// Serve `listener` on a thread of its own for as long as the gateway runs.
pub fn serve(listener: TcpListener, engine: Weak<Engine>) {
    let metrics: Metrics = std::sync::Arc::new(move || engine.upgrade().and_then(|e| e.telemetry.prometheus_text()));
    let spawned = std::thread::Builder::new().name("gateway-admin".into()).spawn(move || {
        let served = listener
            .set_nonblocking(true)
            .map_err(|e| crate::exit::Failure::internal(format!("cannot set up the listener: {e}")))
            .and_then(|()| server::runtime())
            .and_then(|runtime| {
                let limits = server::Connections {
                    most: MAX_CONNECTIONS,
                    lifetime: DEADLINE,
                    keep_alive: false,
                    title_case: true,
                };
                runtime.block_on(server::serve_until(listener, None, router(metrics), limits, std::future::pending()))
            });
        if let Err(failure) = served {
            log::warn(&format!("the admin listener stopped: {}", failure.message));
        }
    });
    if let Err(error) = spawned {
        log::warn(&format!("the admin listener could not start: {error}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::http::Request;
    use tower::ServiceExt as _;

    /// The status, content type and body `router` gives `method path`.
    fn ask(metrics: Metrics, method: &str, path: &str) -> (u16, String, String) {
        let runtime = server::runtime().expect("runtime");
        runtime.block_on(async move {
            let request = Request::builder().method(method).uri(path).body(Body::empty()).expect("request");
            let response = router(metrics).oneshot(request).await.expect("answered");
            let status = response.status().as_u16();
            let kind =
                response.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
            assert_eq!(response.headers().get(header::CACHE_CONTROL).and_then(|v| v.to_str().ok()), Some("no-store"));
            let bytes = axum::body::to_bytes(response.into_body(), 1 << 20).await.expect("body");
            (status, kind, String::from_utf8_lossy(&bytes).into_owned())
        })
    }

    #[test]
    fn only_get_metrics_is_served() {
        let metrics: Metrics = std::sync::Arc::new(|| Some("# TYPE x counter\nx_total 1\n".to_owned()));
        let none: Metrics = std::sync::Arc::new(|| None);
        let cases: &[(&str, &str, u16)] = &[
            ("GET", "/metrics", 200),
            ("GET", "/metrics?x=1", 200),
            ("POST", "/metrics", 405),
            ("DELETE", "/metrics", 405),
            ("GET", "/", 404),
            ("GET", "/metricsx", 404),
            ("GET", "/metrics/x", 404),
        ];
        for (method, path, status) in cases {
            assert_eq!(ask(std::sync::Arc::clone(&metrics), method, path).0, *status, "{method} {path}");
        }
        assert_eq!(
            ask(std::sync::Arc::clone(&metrics), "GET", "/metrics"),
            (200, "text/plain; version=0.0.4; charset=utf-8".to_owned(), "# TYPE x counter\nx_total 1\n".to_owned())
        );
        assert_eq!(ask(none, "GET", "/metrics").0, 503);
    }
}
