//! Local HTTP and HTTPS test servers for the sight fetch tests. Each server records every
//! request it receives (method, target, headers, any body bytes) and hands the connection to
//! a test-supplied handler that may misbehave however it likes.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// One request as the server saw it on the wire.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub target: String,
    pub version: String,
    /// Header names lower-cased, in wire order.
    pub headers: Vec<(String, String)>,
    /// Bytes received after the header section before the handler ran.
    pub extra: Vec<u8>,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

/// A server-side connection, plain or TLS.
pub enum Conn {
    Plain(TcpStream),
    Tls(Box<rustls::StreamOwned<rustls::ServerConnection, TcpStream>>),
}

impl Conn {
    pub fn tcp(&self) -> &TcpStream {
        match self {
            Conn::Plain(s) => s,
            Conn::Tls(s) => s.get_ref(),
        }
    }

    /// Write everything, ignoring errors (the client may hang up on purpose).
    pub fn send(&mut self, bytes: &[u8]) -> bool {
        self.write_all(bytes).and_then(|()| self.flush()).is_ok()
    }

    /// Close the connection abortively: SO_LINGER 0, so the peer sees a reset.
    pub fn reset(self) {
        let tcp = match self {
            Conn::Plain(s) => s,
            Conn::Tls(s) => s.into_parts().1,
        };
        set_linger_zero(&tcp);
        drop(tcp);
    }

    fn close(self) {
        if let Conn::Tls(mut s) = self {
            s.conn.send_close_notify();
            let _ = s.flush();
        }
    }
}

impl Read for Conn {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Conn::Plain(s) => s.read(buf),
            Conn::Tls(s) => s.read(buf),
        }
    }
}

impl Write for Conn {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Conn::Plain(s) => s.write(buf),
            Conn::Tls(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Conn::Plain(s) => s.flush(),
            Conn::Tls(s) => s.flush(),
        }
    }
}

fn set_linger_zero(tcp: &TcpStream) {
    use std::os::fd::AsRawFd;
    let linger = libc::linger { l_onoff: 1, l_linger: 0 };
    // SAFETY: a valid socket descriptor and a correctly sized `linger` value.
    unsafe {
        libc::setsockopt(
            tcp.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&raw const linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
}

/// What the handler does with a connection. Returning `Some(conn)` closes it gracefully.
pub type Handler = dyn Fn(Conn, &Recorded) -> Option<Conn> + Send + Sync;

pub struct Server {
    pub port: u16,
    requests: Arc<Mutex<Vec<Recorded>>>,
    connections: Arc<Mutex<usize>>,
}

impl Server {
    /// A plain HTTP server on 127.0.0.1.
    pub fn http(handler: impl Fn(Conn, &Recorded) -> Option<Conn> + Send + Sync + 'static) -> Server {
        Server::start(None, Arc::new(handler))
    }

    /// An HTTPS server on 127.0.0.1 presenting `identity`.
    pub fn https(
        identity: &ServerIdentity,
        handler: impl Fn(Conn, &Recorded) -> Option<Conn> + Send + Sync + 'static,
    ) -> Server {
        // rustls 0.23.48 deprecates the ring provider (no post-quantum key exchange; aws-lc-rs has it).
        // Warden keeps ring, the one ureq already builds, without a C toolchain to build aws-lc.
        #[allow(deprecated)]
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("protocol versions")
            .with_no_client_auth()
            .with_single_cert(
                identity.chain.clone(),
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(identity.key_der.clone())),
            )
            .expect("server certificate");
        Server::start(Some(Arc::new(config)), Arc::new(handler))
    }

    fn start(tls: Option<Arc<rustls::ServerConfig>>, handler: Arc<Handler>) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let connections = Arc::new(Mutex::new(0usize));
        let (reqs, conns) = (requests.clone(), connections.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                *conns.lock().expect("lock") += 1;
                let (reqs, handler, tls) = (reqs.clone(), handler.clone(), tls.clone());
                std::thread::spawn(move || serve(stream, tls, reqs, handler));
            }
        });
        Server { port, requests, connections }
    }

    pub fn url(&self, path_and_query: &str) -> url::Url {
        url::Url::parse(&format!("http://127.0.0.1:{}{}", self.port, path_and_query)).expect("url")
    }

    pub fn https_url(&self, host: &str, path_and_query: &str) -> url::Url {
        url::Url::parse(&format!("https://{host}:{}{}", self.port, path_and_query)).expect("url")
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().expect("lock").clone()
    }

    /// TCP connections accepted (including ones that never completed a request).
    pub fn connections(&self) -> usize {
        *self.connections.lock().expect("lock")
    }
}

fn serve(
    stream: TcpStream,
    tls: Option<Arc<rustls::ServerConfig>>,
    requests: Arc<Mutex<Vec<Recorded>>>,
    handler: Arc<Handler>,
) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let _ = stream.set_write_timeout(Some(Duration::from_secs(10)));
    let mut conn = match tls {
        None => Conn::Plain(stream),
        Some(config) => {
            let Ok(server) = rustls::ServerConnection::new(config) else { return };
            Conn::Tls(Box::new(rustls::StreamOwned::new(server, stream)))
        }
    };
    let Some(recorded) = read_head(&mut conn) else { return };
    requests.lock().expect("lock").push(recorded.clone());
    if let Some(conn) = handler(conn, &recorded) {
        conn.close();
    }
}

fn read_head(conn: &mut Conn) -> Option<Recorded> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 1024];
    let end = loop {
        if let Some(pos) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break pos;
        }
        if buf.len() > 256 * 1024 {
            return None;
        }
        let n = conn.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
    let extra = buf[end + 4..].to_vec();
    let mut lines = head.split("\r\n");
    let request_line = lines.next()?;
    let mut parts = request_line.split(' ');
    let method = parts.next()?.to_string();
    let target = parts.next()?.to_string();
    let version = parts.next().unwrap_or("").to_string();
    let headers = lines
        .filter_map(|line| {
            let (name, value) = line.split_once(':')?;
            Some((name.trim().to_ascii_lowercase(), value.trim().to_string()))
        })
        .collect();
    Some(Recorded { method, target, version, headers, extra })
}

/// A certificate chain and key for an HTTPS test server.
pub struct ServerIdentity {
    pub chain: Vec<CertificateDer<'static>>,
    pub key_der: Vec<u8>,
}

/// A test CA (its PEM written to a file for `ca_certs`) and helpers to issue leaf certs.
pub struct TestCa {
    pub dir: tempfile::TempDir,
    pub pem_path: PathBuf,
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
}

impl TestCa {
    pub fn new() -> TestCa {
        let key = rcgen::KeyPair::generate().expect("ca key");
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("ca params");
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.distinguished_name.push(rcgen::DnType::CommonName, "warden sight test CA");
        params.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::CrlSign,
            rcgen::KeyUsagePurpose::DigitalSignature,
        ];
        let cert = params.self_signed(&key).expect("ca cert");
        let dir = tempfile::tempdir().expect("tempdir");
        let pem_path = dir.path().join("ca.pem");
        std::fs::write(&pem_path, cert.pem()).expect("write ca pem");
        TestCa { dir, pem_path, issuer: rcgen::Issuer::new(params, key) }
    }

    /// A leaf certificate for `names`, signed by this CA.
    pub fn leaf(&self, names: &[&str]) -> ServerIdentity {
        let key = rcgen::KeyPair::generate().expect("leaf key");
        let names: Vec<String> = names.iter().map(std::string::ToString::to_string).collect();
        let params = rcgen::CertificateParams::new(names).expect("leaf params");
        let cert = params.signed_by(&key, &self.issuer).expect("leaf cert");
        ServerIdentity { chain: vec![cert.der().clone()], key_der: key.serialize_der() }
    }
}

/// A self-signed leaf for `names` that no CA vouches for.
pub fn self_signed(names: &[&str]) -> ServerIdentity {
    let names: Vec<String> = names.iter().map(std::string::ToString::to_string).collect();
    let certified = rcgen::generate_simple_self_signed(names).expect("self-signed");
    ServerIdentity { chain: vec![certified.cert.der().clone()], key_der: certified.signing_key.serialize_der() }
}

/// A complete response with a content-length.
pub fn response(status: &str, headers: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let mut out = format!("HTTP/1.1 {status}\r\nconnection: close\r\ncontent-length: {}\r\n", body.len());
    for (name, value) in headers {
        out.push_str(&format!("{name}: {value}\r\n"));
    }
    out.push_str("\r\n");
    let mut bytes = out.into_bytes();
    bytes.extend_from_slice(body);
    bytes
}

/// A server that accepts connections and never finishes an answer: it reads what the client
/// sends, optionally answers the first bytes with `opening` (a response head, say) and then
/// stalls. It reports when a connection's first bytes arrived and when the client closed the
/// connection — the server itself never closes one.
pub struct Silent {
    pub port: u16,
    received: Mutex<std::sync::mpsc::Receiver<()>>,
    closed: Mutex<std::sync::mpsc::Receiver<()>>,
}

impl Silent {
    pub fn start(opening: &'static [u8]) -> Silent {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let (received_tx, received) = std::sync::mpsc::channel();
        let (closed_tx, closed) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let (received_tx, closed_tx) = (received_tx.clone(), closed_tx.clone());
                std::thread::spawn(move || {
                    // Short reads so the thread notices a hang-up; it never gives up on its own
                    // before a minute has passed.
                    let _ = stream.set_read_timeout(Some(Duration::from_millis(100)));
                    let started = std::time::Instant::now();
                    let mut first = true;
                    let mut chunk = [0u8; 4096];
                    while started.elapsed() < Duration::from_secs(60) {
                        match stream.read(&mut chunk) {
                            Ok(0) => break,
                            Ok(_) if first => {
                                first = false;
                                if !opening.is_empty() {
                                    let _ = stream.write_all(opening);
                                }
                                let _ = received_tx.send(());
                            }
                            Ok(_) => {}
                            Err(e)
                                if matches!(
                                    e.kind(),
                                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                                ) => {}
                            Err(_) => break,
                        }
                    }
                    let _ = closed_tx.send(());
                    // Held until the client is gone: the server never closes first.
                    drop(stream);
                });
            }
        });
        Silent { port, received: Mutex::new(received), closed: Mutex::new(closed) }
    }

    pub fn url(&self, path_and_query: &str) -> url::Url {
        url::Url::parse(&format!("http://127.0.0.1:{}{}", self.port, path_and_query)).expect("url")
    }

    pub fn https_url(&self, path_and_query: &str) -> url::Url {
        url::Url::parse(&format!("https://localhost:{}{}", self.port, path_and_query)).expect("url")
    }

    /// Waits (at most `bound`, a test timeout) until a connection's first bytes arrived.
    pub fn received_within(&self, bound: Duration) -> bool {
        self.received.lock().expect("lock").recv_timeout(bound).is_ok()
    }

    /// Waits (at most `bound`, a test timeout) until the client closed a connection.
    pub fn closed_within(&self, bound: Duration) -> bool {
        self.closed.lock().expect("lock").recv_timeout(bound).is_ok()
    }
}

/// The whole body of a request: what the server buffered with the header, then the rest read
/// from `conn` up to its content-length.
pub fn read_body(conn: &mut Conn, seen: &Recorded) -> Vec<u8> {
    let length: usize = seen.header("content-length").and_then(|v| v.parse().ok()).unwrap_or(0);
    let mut body = seen.extra.clone();
    let mut chunk = [0u8; 4096];
    while body.len() < length {
        match conn.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => body.extend_from_slice(&chunk[..n]),
        }
    }
    body
}

/// The `warden` binary this test run built, with nothing of the test's own environment that
/// would change what it does: no `WARDEN_STORE`/`WARDEN_CONFIG`, and no `OTEL_*` variables (a
/// gateway exports only when they say so), backtraces off.
pub fn warden_command() -> std::process::Command {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_warden"));
    command.env_remove("WARDEN_STORE").env_remove("WARDEN_CONFIG").env("RUST_BACKTRACE", "0");
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("OTEL_") {
            command.env_remove(name);
        }
    }
    command
}
