//! TLS to the PostgreSQL server, with rustls (the same rustls and ring the rest of Warden
//! builds). `sslmode` in the URL says whether: `disable` (no TLS), `require`, `verify-ca` and
//! `verify-full`. Every TLS mode verifies the server's certificate chain and name against the
//! roots — libpq's `require` would accept any certificate; Warden does not, since a store that
//! anyone on the path can impersonate is no store — the Mozilla roots, or only the certificates
//! of the PEM file `sslrootcert=PATH` names. libpq's `prefer` and `allow` (TLS when offered, plain
//! text otherwise) are refused: they give no guarantee either way. A URL that does not say is
//! plain text to a loopback address (`localhost`, `127.0.0.0/8`, `::1`: no network is crossed)
//! and refused for any other host.

use std::io::Read;
use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use rustls::RootCertStore;

use crate::error::{Error, Result};

/// The most a root file may hold.
const MAX_ROOT_FILE_BYTES: u64 = 1 << 20;

/// What the URL asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Tls {
    /// `sslmode=disable`: plain text (a trusted network, a Unix socket, a TLS tunnel).
    Disabled,
    /// Any other mode: TLS, verified against these roots.
    Verified { root_file: Option<String> },
}

/// The URL without the parameters the driver does not know (`sslmode`'s stricter values,
/// `sslrootcert`), and what they asked for. No `sslmode` is refused: say `disable` or a TLS mode.
pub(super) fn split(location: &str, shown: &str) -> Result<(String, Tls)> {
    let mut parsed =
        url::Url::parse(location).map_err(|e| Error::Config(format!("the store URL {shown} is not a URL: {e}")))?;
    let mut mode: Option<String> = None;
    let mut root_file: Option<String> = None;
    let kept: Vec<(String, String)> = parsed
        .query_pairs()
        .filter_map(|(key, value)| match key.as_ref() {
            "sslmode" => {
                mode = Some(value.into_owned());
                None
            }
            "sslrootcert" => {
                root_file = Some(value.into_owned());
                None
            }
            _ => Some((key.into_owned(), value.into_owned())),
        })
        .collect();
    parsed.set_query(None);
    if !kept.is_empty() {
        parsed.query_pairs_mut().extend_pairs(kept);
    }
    let tls = match mode.as_deref() {
        Some("disable") => {
            if root_file.is_some() {
                return Err(Error::Config(format!(
                    "the store URL {shown} names sslrootcert but says sslmode=disable; say which you mean"
                )));
            }
            Tls::Disabled
        }
        Some("require" | "verify-ca" | "verify-full") => Tls::Verified { root_file },
        Some(other) => {
            return Err(Error::Config(format!(
                "the store URL {shown} has sslmode={other}; Warden takes disable, require, verify-ca or verify-full \
                 (prefer and allow may fall back to plain text, so they are refused)"
            )))
        }
        // Plain text to this host's own loopback address reaches no network.
        None if loopback(&parsed) => Tls::Disabled,
        None => {
            return Err(Error::Config(format!(
                "the store URL {shown} does not say sslmode, and its server is not on this host: add \
                 sslmode=verify-full (TLS, the server's certificate checked) or sslmode=disable (plain text, for a \
                 network you trust)"
            )))
        }
    };
    Ok((parsed.to_string(), tls))
}

fn loopback(parsed: &url::Url) -> bool {
    let overridden = parsed.query_pairs().any(|(key, _)| key == "host" || key == "hostaddr");
    let local = match parsed.host() {
        // A postgresql:// URL's host is opaque to the URL parser: an address comes as text.
        Some(url::Host::Domain(name)) => {
            name == "localhost" || name.parse::<std::net::IpAddr>().is_ok_and(|address| address.is_loopback())
        }
        Some(url::Host::Ipv4(address)) => address.is_loopback(),
        Some(url::Host::Ipv6(address)) => address.is_loopback(),
        None => false,
    };
    local && !overridden
}

/// The rustls client configuration for `Tls::Verified`.
pub(super) fn client_config(root_file: Option<&str>) -> Result<rustls::ClientConfig> {
    let mut roots = RootCertStore::empty();
    match root_file {
        None => {
            let (_, _rejected) = roots.add_parsable_certificates(
                webpki_root_certs::TLS_SERVER_ROOT_CERTS.iter().map(|der| CertificateDer::from(der.as_ref())),
            );
        }
        Some(path) => {
            let unreadable = |why: String| Error::Config(format!("the sslrootcert file {path} {why}"));
            let file =
                crate::files::open_regular(Path::new(path)).map_err(|e| unreadable(format!("cannot be read ({e})")))?;
            let mut pem = Vec::new();
            file.take(MAX_ROOT_FILE_BYTES + 1)
                .read_to_end(&mut pem)
                .map_err(|e| unreadable(format!("cannot be read ({e})")))?;
            if pem.len() as u64 > MAX_ROOT_FILE_BYTES {
                return Err(unreadable("is larger than 1 MiB".into()));
            }
            for cert in CertificateDer::pem_slice_iter(&pem) {
                let cert = cert.map_err(|e| unreadable(format!("is not valid PEM ({e})")))?;
                roots.add(cert).map_err(|e| unreadable(format!("holds a certificate that cannot be a root ({e})")))?;
            }
            if roots.is_empty() {
                return Err(unreadable("holds no certificate".into()));
            }
        }
    }
    // rustls 0.23.48 deprecates the ring provider (no post-quantum key exchange; aws-lc-rs has it).
    // Warden keeps ring, the one ureq already builds, without a C toolchain to build aws-lc.
    #[allow(deprecated)]
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Config(format!("no TLS protocol versions: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth())
}
