//! HTTPS for the CLI's servers (`warden console`, `warden operator`): `--tls-cert` and
//! `--tls-key` (PEM files) make a listener serve TLS 1.2/1.3 through rustls, and only then may
//! it listen beyond loopback — with `--public-url`, the https URL clients use, whose `HOST:PORT`
//! the listener answers (the Host check that refuses DNS rebinding on loopback still holds).

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::exit::Failure;
use crate::output::shown;

/// The largest certificate chain or key file read.
const MAX_PEM: u64 = 1 << 20;

/// `--tls-cert`, `--tls-key`, `--public-url`: shared by the console and the operator server.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct TlsArgs {
    /// Serve HTTPS with this PEM certificate chain (leaf first); with --tls-key. Needed to
    /// listen beyond loopback; session cookies are then marked Secure.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert; refused if its group or others may read it.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// With TLS: the https URL clients reach this server at (https://HOST[:PORT]/). Its HOST:PORT
    /// is answered besides the bound address and it is the URL printed; required with a
    /// --listen beyond loopback.
    #[arg(long, value_name = "URL", requires = "tls_cert")]
    pub public_url: Option<String>,
}

/// A listener's TLS: the server configuration, and the authority clients name when
/// `--public-url` was given.
pub struct Tls {
    pub config: Arc<rustls::ServerConfig>,
    /// `HOST:PORT` of `--public-url`, lower case, the port always written.
    pub public: Option<String>,
}

/// Read the certificate and key `args` name, or `None` without TLS. Every refusal names the
/// file and what to do; a key's bytes never appear in a message.
pub fn load(args: &TlsArgs) -> Result<Option<Tls>, Failure> {
    let (Some(cert), Some(key)) = (&args.tls_cert, &args.tls_key) else { return Ok(None) };
    let chain = read_pem(cert, "--tls-cert")?;
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&chain)
        .collect::<Result<_, _>>()
        .map_err(|e| Failure::usage(format!("--tls-cert {}: not a PEM certificate chain ({e})", shown_path(cert))))?;
    if chain.is_empty() {
        return Err(Failure::usage(format!(
            "--tls-cert {}: no CERTIFICATE block in it; give the PEM chain, leaf first",
            shown_path(cert)
        )));
    }
    check_key_mode(key)?;
    let key_pem = read_pem(key, "--tls-key")?;
    let private = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|_| {
        Failure::usage(format!(
            "--tls-key {}: no PEM private key in it (PKCS#8, PKCS#1 or SEC1 \"PRIVATE KEY\" block)",
            shown_path(key)
        ))
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Failure::internal(format!("cannot set up TLS: {e}")))?
        .with_no_client_auth()
        .with_single_cert(chain, private)
        .map_err(|e| {
            Failure::usage(format!(
                "--tls-cert {} and --tls-key {} do not make a usable pair ({e})",
                shown_path(cert),
                shown_path(key)
            ))
        })?;
    let public = args.public_url.as_deref().map(public_authority).transpose()?;
    Ok(Some(Tls { config: Arc::new(config), public }))
}

/// `HOST:PORT` of an https URL with nothing but a host, a port and `/`.
fn public_authority(text: &str) -> Result<String, Failure> {
    let refuse = |why: &str| Failure::usage(format!("--public-url {}: {why}", shown(text)));
    let url = url::Url::parse(text).map_err(|e| refuse(&format!("not a URL ({e})")))?;
    if url.scheme() != "https" {
        return Err(refuse("it must be an https URL (the server it names serves TLS)"));
    }
    if !url.username().is_empty() || url.password().is_some() || url.query().is_some() || url.fragment().is_some() {
        return Err(refuse("it must carry no user, password, query or fragment"));
    }
    if url.path() != "/" {
        return Err(refuse("it must name the server's root (https://HOST[:PORT]/): the pages are served at /"));
    }
    let host = url.host_str().ok_or_else(|| refuse("it has no host"))?;
    Ok(format!("{}:{}", host.to_ascii_lowercase(), url.port_or_known_default().unwrap_or(443)))
}

fn read_pem(path: &Path, flag: &str) -> Result<Vec<u8>, Failure> {
    use std::io::Read as _;
    let file = std::fs::File::open(path)
        .map_err(|e| Failure::usage(format!("{flag} {}: cannot open it: {e}", shown_path(path))))?;
    let mut bytes = Vec::new();
    file.take(MAX_PEM + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Failure::usage(format!("{flag} {}: cannot read it: {e}", shown_path(path))))?;
    if bytes.len() as u64 > MAX_PEM {
        return Err(Failure::usage(format!("{flag} {}: larger than {MAX_PEM} bytes", shown_path(path))));
    }
    Ok(bytes)
}

/// A private key others may read is refused, as `--token-file` is.
fn check_key_mode(path: &Path) -> Result<(), Failure> {
    let meta = std::fs::metadata(path)
        .map_err(|e| Failure::usage(format!("--tls-key {}: cannot read it: {e}", shown_path(path))))?;
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(Failure::usage(format!(
            "--tls-key {} is readable by others (mode {mode:o}); make it private: chmod 600 {}",
            shown_path(path),
            warden::hint::shell_word(&path.display().to_string())
        )));
    }
    Ok(())
}

fn shown_path(path: &Path) -> String {
    shown(&path.display().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_public_url_is_an_https_root_with_its_port_written() {
        let table: [(&str, Option<&str>); 9] = [
            ("https://ops.example.com/", Some("ops.example.com:443")),
            ("https://OPS.example.com:8443", Some("ops.example.com:8443")),
            ("https://[::1]:9443/", Some("[::1]:9443")),
            ("http://ops.example.com/", None),
            ("https://ops.example.com/warden", None),
            ("https://u:p@ops.example.com/", None),
            ("https://ops.example.com/?x=1", None),
            ("https://ops.example.com/#top", None),
            ("not a url", None),
        ];
        for (text, expected) in table {
            assert_eq!(public_authority(text).ok().as_deref(), expected, "{text}");
        }
    }
}
