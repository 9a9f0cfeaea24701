//! The CLI's one HTTP server stack (the library has no async runtime): hyper 1.x with axum's
//! router on a current-thread tokio runtime. What every listener of the CLI shares — binding
//! (with TLS), the runtime, hyper's HTTP/1.1 connection with its header-read timeout, the
//! request limits, running blocking work off the runtime — is here, in one place: `warden
//! console`, `warden operator --listen`, the gateway's listener and its `--admin` `/metrics`.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use axum::Router;
use tower::ServiceExt as _;

use crate::console::tls;
use crate::exit::Failure;
use crate::output::shown;

/// The most connections served at once; more are closed at accept.
pub const MAX_CONNECTIONS: usize = 64;
/// A request's head must arrive within this.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// A request's body must arrive within this.
pub const BODY_TIMEOUT: Duration = Duration::from_secs(10);
/// A request must be answered within this (a slow store read ends in 408).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// A connection is closed after this, however busy (keep-alive included).
pub const CONNECTION_TIMEOUT: Duration = Duration::from_secs(300);
/// The largest request body (every form is a few hundred bytes).
pub const MAX_BODY: usize = 64 * 1024;

/// Parse `--listen` and read the TLS flags: anything but loopback needs TLS and a public URL.
/// `who` names the server in the refusal (`the console`, `the operator server`). Nothing is
/// bound or opened yet.
pub fn listen_address(listen: &str, tls: &tls::TlsArgs, who: &str) -> Result<(SocketAddr, Option<tls::Tls>), Failure> {
    let address = match listen.rsplit_once(':') {
        Some(("localhost", port)) => {
            port.parse::<u16>().ok().map(|port| SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port))
        }
        _ => listen.parse::<SocketAddr>().ok(),
    };
    let Some(address) = address else {
        return Err(Failure::usage(format!(
            "--listen {} is not HOST:PORT with HOST an IP address or localhost (e.g. 127.0.0.1:0, [::1]:8080)",
            shown(listen)
        )));
    };
    let tls = tls::load(tls)?;
    if !address.ip().is_loopback() {
        match &tls {
            None => {
                return Err(Failure::usage(format!(
                    "--listen {} is not a loopback address: {who} would carry its credentials and approvals over \
                     plain HTTP to other hosts; serve HTTPS (TLS) with --tls-cert FILE --tls-key FILE --public-url \
                     https://HOST:PORT/, or listen on 127.0.0.1, localhost or [::1] (an SSH tunnel reaches it \
                     from elsewhere)",
                    shown(listen)
                )))
            }
            Some(tls) if tls.public.is_none() => {
                return Err(Failure::usage(format!(
                    "--listen {} is not a loopback address: name the https URL clients use with --public-url \
                     https://HOST:PORT/ ({who} answers only the Host it is reached by)",
                    shown(listen)
                )))
            }
            Some(_) => {}
        }
    }
    Ok((address, tls))
}

/// A listener, bound and non-blocking, with the Host values it answers and its TLS, if any.
pub struct Bound {
    pub listener: std::net::TcpListener,
    /// `HOST:PORT` as a URL names it (`[::1]:8080`): `--public-url`'s when given.
    pub authority: String,
    /// The Host header values this listener answers (DNS rebinding is refused).
    pub hosts: Vec<String>,
    /// Served over TLS with this configuration.
    pub tls: Option<Arc<rustls::ServerConfig>>,
}

impl Bound {
    pub fn bind(address: SocketAddr, tls: Option<tls::Tls>) -> Result<Bound, Failure> {
        let listener = std::net::TcpListener::bind(address)
            .map_err(|e| Failure::usage(format!("cannot listen on {address}: {e}; pick another --listen")))?;
        let local =
            listener.local_addr().map_err(|e| Failure::internal(format!("the listener has no address: {e}")))?;
        listener.set_nonblocking(true).map_err(|e| Failure::internal(format!("cannot set up the listener: {e}")))?;
        let host = match local.ip() {
            IpAddr::V6(ip) => format!("[{ip}]"),
            IpAddr::V4(ip) => ip.to_string(),
        };
        let mut authority = format!("{host}:{}", local.port());
        let mut hosts = vec![authority.clone(), format!("localhost:{}", local.port())];
        let (config, public) = match tls {
            Some(tls) => (Some(tls.config), tls.public),
            None => (None, None),
        };
        if let Some(public) = public {
            hosts.push(public.clone());
            // A browser leaves the default port out of Host and Origin.
            if let Some(bare) = public.strip_suffix(":443") {
                hosts.push(bare.to_owned());
            }
            authority = public;
        }
        Ok(Bound { listener, authority, hosts, tls: config })
    }

    /// `https` when served over TLS, else `http`.
    pub fn scheme(&self) -> &'static str {
        if self.tls.is_some() {
            "https"
        } else {
            "http"
        }
    }

    /// `SCHEME://HOST:PORT`, the base of the URL printed.
    pub fn base(&self) -> String {
        format!("{}://{}", self.scheme(), self.authority)
    }
}

/// The current-thread runtime a listener is served on (the CLI's only).
pub fn runtime() -> Result<tokio::runtime::Runtime, Failure> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::internal(format!("cannot start the server's runtime: {e}")))
}

/// How many connections one listener serves at once, and for how long each.
#[derive(Debug, Clone, Copy)]
pub struct Connections {
    /// More are closed at accept.
    pub most: usize,
    /// The handshake, the headers and the whole connection share this deadline.
    pub lifetime: Duration,
    /// More than one request per connection; else each answer says `Connection: close`.
    pub keep_alive: bool,
    /// Header names written `Title-Case` (as the gateway's hand-written listeners did), else
    /// hyper's lower case.
    pub title_case: bool,
}

/// The console's and the operator server's: [`MAX_CONNECTIONS`], [`CONNECTION_TIMEOUT`].
pub const INTERACTIVE: Connections =
    Connections { most: MAX_CONNECTIONS, lifetime: CONNECTION_TIMEOUT, keep_alive: true, title_case: false };

/// Serve `router` on `listener` until SIGINT or SIGTERM: hyper 1.x, HTTP/1.1 with keep-alive,
/// [`HEADER_TIMEOUT`], [`CONNECTION_TIMEOUT`] and at most [`MAX_CONNECTIONS`] at once.
pub async fn serve(bound: Bound, router: Router) -> Result<(), Failure> {
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| Failure::internal(format!("cannot watch for SIGTERM: {e}")))?;
    let stop = async move {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = terminate.recv() => {}
        }
    };
    serve_until(bound.listener, bound.tls, router, INTERACTIVE, stop).await
}

/// Serve `router` on `listener` (non-blocking) until `stop` completes, within `limits`.
pub async fn serve_until(
    listener: std::net::TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    router: Router,
    limits: Connections,
    stop: impl std::future::Future<Output = ()>,
) -> Result<(), Failure> {
    let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
    let listener = tokio::net::TcpListener::from_std(listener)
        .map_err(|e| Failure::internal(format!("cannot set up the listener: {e}")))?;
    let slots = Arc::new(tokio::sync::Semaphore::new(limits.most));
    tokio::pin!(stop);
    loop {
        let (stream, _) = tokio::select! {
            accepted = accept(&listener) => accepted,
            () = &mut stop => break,
        };
        let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
            drop(stream);
            continue;
        };
        let router = router.clone();
        let acceptor = acceptor.clone();
        tokio::spawn(async move {
            // The handshake, the headers and the whole connection share one deadline.
            let _ = tokio::time::timeout(limits.lifetime, async move {
                match acceptor {
                    Some(acceptor) => {
                        // A client that fails the handshake (plain HTTP, an unknown CA) is dropped.
                        if let Ok(stream) = acceptor.accept(stream).await {
                            connection(stream, router, limits).await;
                        }
                    }
                    None => connection(stream, router, limits).await,
                }
            })
            .await;
            drop(slot);
        });
    }
    Ok(())
}

/// The next connection. A client that left before accept, or no descriptor free: go on
/// serving, after a pause, so a lasting fault (EMFILE) does not spin.
pub async fn accept(listener: &tokio::net::TcpListener) -> (tokio::net::TcpStream, SocketAddr) {
    loop {
        match listener.accept().await {
            Ok(accepted) => return accepted,
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

/// hyper's HTTP/1.1 connection as every listener of the CLI has it: tokio's timer, and the
/// request head must arrive within `header_timeout`.
pub fn http1(header_timeout: Duration) -> hyper::server::conn::http1::Builder {
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder.timer(hyper_util::rt::TokioTimer::new()).header_read_timeout(header_timeout);
    builder
}

/// One HTTP/1.1 connection, with [`HEADER_TIMEOUT`] (and keep-alive when `limits` say so).
async fn connection<S>(stream: S, router: Router, limits: Connections)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
        router.clone().oneshot(request.map(axum::body::Body::new))
    });
    let _ = http1(HEADER_TIMEOUT)
        .keep_alive(limits.keep_alive)
        .title_case_headers(limits.title_case)
        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
        .await;
}

/// The limits every request of a CLI server has: [`MAX_BODY`], [`BODY_TIMEOUT`] and
/// [`REQUEST_TIMEOUT`] (408).
pub fn limits<S: Clone + Send + Sync + 'static>(router: Router<S>) -> Router<S> {
    router
        .layer(tower_http::limit::RequestBodyLimitLayer::new(MAX_BODY))
        .layer(tower_http::timeout::RequestBodyTimeoutLayer::new(BODY_TIMEOUT))
        .layer(tower_http::timeout::TimeoutLayer::with_status_code(StatusCode::REQUEST_TIMEOUT, REQUEST_TIMEOUT))
}

/// Run a kernel call off the runtime's thread.
pub async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, Failure> + Send + 'static,
) -> Result<T, Failure> {
    tokio::task::spawn_blocking(work).await.unwrap_or_else(|_| Err(Failure::internal("a store call panicked")))
}
