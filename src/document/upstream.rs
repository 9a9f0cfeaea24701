//! `upstream:` on an action entry (`warden/v1`): what `warden gateway` pins about the MCP
//! server behind an `mcp.*` action. Closed key set, checked at load:
//!
//! - `tls_cert_sha256`: `sha256:` + 64 lowercase hex digits over the leaf certificate's DER, a
//!   non-empty list (a list so that rotation needs no outage);
//! - `tls_cert_file`: PEM files (relative to the document), each of which must hash to one of
//!   the listed digests; the gateway trusts them as the only anchors;
//! - `tool_schema_sha256`: `sha256:` over the canonical `{"schema":
//!   "ctrlrun.upstream.tool_schema/v1", "entry": <the tools/list entry>}`.

use std::path::{Path, PathBuf};

use base64::Engine;

use super::tree::{child_path, Member, NodeValue};
use super::validate::Cx;
use super::DocumentError;

const UPSTREAM_KEYS: [&str; 3] = ["tls_cert_file", "tls_cert_sha256", "tool_schema_sha256"];

/// The pins of one action entry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UpstreamPins {
    /// The SHA-256 of each certificate the upstream may present.
    pub tls_cert_sha256: Vec<String>,
    /// The DER of each `tls_cert_file`, read at load.
    pub tls_cert_der: Vec<Vec<u8>>,
    /// The SHA-256 the tool's `tools/list` entry must hash to.
    pub tool_schema_sha256: Option<String>,
}

impl UpstreamPins {
    /// Whether any certificate is pinned.
    pub fn pins_certificate(&self) -> bool {
        !self.tls_cert_sha256.is_empty()
    }
}

/// `sha256:` followed by 64 lowercase hex digits.
pub fn is_digest(text: &str) -> bool {
    text.strip_prefix("sha256:")
        .is_some_and(|hex| hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
}

/// The DER of the first `CERTIFICATE` block of a PEM text.
pub fn pem_certificate(text: &str) -> Option<Vec<u8>> {
    let start = text.find("-----BEGIN CERTIFICATE-----")? + "-----BEGIN CERTIFICATE-----".len();
    let end = start + text[start..].find("-----END CERTIFICATE-----")?;
    let body: String = text[start..end].chars().filter(|c| !c.is_whitespace()).collect();
    base64::engine::general_purpose::STANDARD.decode(body).ok()
}

impl Cx<'_> {
    pub(super) fn upstream_pins(&self, member: &Member, path: &str) -> Result<UpstreamPins, DocumentError> {
        let path = child_path(path, "upstream");
        let NodeValue::Map(members) = &member.value.value else {
            return Err(self.error(
                &path,
                Some(member.line),
                format!("'upstream' must be a mapping, got {}", member.value.kind()),
            ));
        };
        self.reject_unknown(members, &UPSTREAM_KEYS, &path)?;
        let mut pins = UpstreamPins::default();
        let mut files = Vec::new();
        for entry in members {
            let here = child_path(&path, &entry.key);
            match entry.key.as_str() {
                "tool_schema_sha256" => match entry.value.as_str() {
                    Some(text) if is_digest(text) => pins.tool_schema_sha256 = Some(text.to_owned()),
                    _ => {
                        return Err(self.error(
                            &here,
                            Some(entry.line),
                            format!(
                                "'tool_schema_sha256' must be 'sha256:' and 64 lowercase hex digits, got {}",
                                entry.value.shown()
                            ),
                        ))
                    }
                },
                key => {
                    let NodeValue::Seq(items) = &entry.value.value else {
                        return Err(self.error(
                            &here,
                            Some(entry.line),
                            format!("'{key}' must be a list, got {}", entry.value.kind()),
                        ));
                    };
                    if items.is_empty() {
                        return Err(self.error(&here, Some(entry.line), format!("'{key}' must not be empty")));
                    }
                    for item in items {
                        let Some(text) = item.as_str() else {
                            return Err(self.error(
                                &here,
                                Some(item.line),
                                format!("'{key}' holds strings, got {}", item.shown()),
                            ));
                        };
                        if key == "tls_cert_sha256" {
                            if !is_digest(text) {
                                return Err(self.error(
                                    &here,
                                    Some(item.line),
                                    format!(
                                        "'{key}' entries are 'sha256:' and 64 lowercase hex digits, got {}",
                                        item.shown()
                                    ),
                                ));
                            }
                            pins.tls_cert_sha256.push(text.to_owned());
                        } else {
                            files.push((text.to_owned(), item.line));
                        }
                    }
                }
            }
        }
        for (file, line) in files {
            let resolved = self.beside_document(&file);
            let here = child_path(&path, "tls_cert_file");
            let text = std::fs::read_to_string(&resolved).map_err(|e| {
                self.error(&here, Some(line), format!("cannot read the certificate file {}: {e}", resolved.display()))
            })?;
            let der = pem_certificate(&text).ok_or_else(|| {
                self.error(&here, Some(line), format!("{} holds no PEM CERTIFICATE block", resolved.display()))
            })?;
            let digest = crate::canonical::sha256_prefixed(&der);
            if !pins.tls_cert_sha256.contains(&digest) {
                return Err(self.error(
                    &here,
                    Some(line),
                    format!(
                        "{} hashes to {digest}, which tls_cert_sha256 does not list; add it there (or fix the file)",
                        resolved.display()
                    ),
                ));
            }
            pins.tls_cert_der.push(der);
        }
        Ok(pins)
    }

    /// A path as written, relative to the document's folder when it is relative.
    fn beside_document(&self, file: &str) -> PathBuf {
        let path = Path::new(file);
        if path.is_absolute() {
            return path.to_owned();
        }
        match Path::new(self.origin).parent() {
            Some(folder) => folder.join(path),
            None => path.to_owned(),
        }
    }
}
