//! TLS to an https:// upstream. Without pins: the usual chain and hostname checks against the
//! bundled web roots. With `upstream.tls_cert_sha256` pins (pooled over every `mcp.<alias>.*`
//! entry: one gateway fronts one server), the leaf's SHA-256 must be listed, at every
//! handshake, before any request byte is sent; with `tls_cert_file` the pinned certificates
//! are the only trust anchors (a self-signed server works), else the web roots still apply.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, Error, RootCertStore, SignatureScheme};

use warden::document::UpstreamPins;

#[derive(Debug)]
struct Pinned {
    inner: Arc<WebPkiServerVerifier>,
    digests: Vec<String>,
}

impl ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        if !self.digests.is_empty() {
            let digest = warden::canonical::sha256_prefixed(end_entity.as_ref());
            if !self.digests.contains(&digest) {
                return Err(Error::General(format!(
                    "the upstream's certificate is {digest}, which no upstream.tls_cert_sha256 pin lists (pinned: {})",
                    self.digests.join(", ")
                )));
            }
        }
        self.inner.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// The client configuration for every connection to this upstream.
pub fn client_config(pins: &[&UpstreamPins]) -> Result<Arc<rustls::ClientConfig>, String> {
    let digests: Vec<String> = pins.iter().flat_map(|p| p.tls_cert_sha256.iter().cloned()).collect();
    let files: Vec<&Vec<u8>> = pins.iter().flat_map(|p| p.tls_cert_der.iter()).collect();
    let mut roots = RootCertStore::empty();
    if files.is_empty() {
        let (_, rejected) = roots.add_parsable_certificates(
            webpki_root_certs::TLS_SERVER_ROOT_CERTS.iter().map(|der| CertificateDer::from(der.as_ref())),
        );
        let _ = rejected;
    } else {
        for der in files {
            roots
                .add(CertificateDer::from(der.as_slice()))
                .map_err(|e| format!("a pinned tls_cert_file cannot be a trust anchor: {e}"))?;
        }
    }
    // rustls 0.23.48 deprecates the ring provider (no post-quantum key exchange; aws-lc-rs has it).
    // Warden keeps ring, the one ureq already builds, without a C toolchain to build aws-lc.
    #[allow(deprecated)]
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let inner = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), Arc::clone(&provider))
        .build()
        .map_err(|e| format!("no TLS verifier: {e}"))?;
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("no TLS protocol versions: {e}"))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(Pinned { inner, digests }))
        .with_no_client_auth();
    Ok(Arc::new(config))
}
