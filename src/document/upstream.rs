//! `upstream:` on an action entry (`warden/v1`): what `warden gateway` pins about the MCP
//! server behind an `mcp.*` action. Closed key set, checked at load:
//!
//! - `tls_cert_sha256`: `sha256:` + 64 lowercase hex digits over the leaf certificate's DER, a
//!   non-empty list (a list so that rotation needs no outage);
//! - `tls_cert_file`: PEM files (relative to the document), each holding one certificate that
//!   must hash to one of the listed digests; the gateway trusts them as the only anchors;
//! - `tool_schema_sha256`: `sha256:` over the canonical `{"schema":
//!   "ctrlrun.upstream.tool_schema/v1", "entry": <the tools/list entry>}`.
//!
//! `ctrlrun.policy/v8` documents carry the same key set with ctrlrun's spellings too: a single
//! string where a list belongs, an empty list (no pin), `upstream: null` and
//! `tool_schema_sha256: null` (absent). `warden/v1` writes each of those one way only.

use std::io::Read as _;
use std::path::{Path, PathBuf};

use base64::Engine;

use super::cx::Cx;
use super::error::DocumentError;
use super::tree::{child_path, Member, Node, NodeValue};

/// The largest certificate file read (a PEM certificate is a few KiB).
const MAX_CERTIFICATE_FILE_BYTES: u64 = 1024 * 1024;

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

const PEM_BEGIN: &str = "-----BEGIN CERTIFICATE-----";
const PEM_END: &str = "-----END CERTIFICATE-----";

/// The DER of the first `CERTIFICATE` block of a PEM text.
pub fn pem_certificate(text: &str) -> Option<Vec<u8>> {
    pem_certificates(text).ok()?.into_iter().next()
}

/// The DER of every `CERTIFICATE` block of a PEM text, in order; `Err` names the first block
/// that is unterminated or not base64.
pub fn pem_certificates(text: &str) -> Result<Vec<Vec<u8>>, String> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find(PEM_BEGIN) {
        let body_start = at + PEM_BEGIN.len();
        let number = found.len() + 1;
        let Some(length) = rest[body_start..].find(PEM_END) else {
            return Err(format!("certificate block {number} has no '{PEM_END}' line"));
        };
        let body: String = rest[body_start..body_start + length].chars().filter(|c| !c.is_whitespace()).collect();
        let der = base64::engine::general_purpose::STANDARD
            .decode(body)
            .map_err(|e| format!("certificate block {number} is not base64: {e}"))?;
        found.push(der);
        rest = &rest[body_start + length + PEM_END.len()..];
    }
    Ok(found)
}

impl Cx<'_> {
    /// `None` for ctrlrun's `upstream: null`, which pins nothing.
    pub(super) fn upstream_pins(&self, member: &Member, path: &str) -> Result<Option<UpstreamPins>, DocumentError> {
        let path = child_path(path, "upstream");
        let ctrlrun = !self.warden();
        if ctrlrun && member.value.is_null() {
            return Ok(None);
        }
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
                    None if ctrlrun && entry.value.is_null() => {}
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
                    let items: &[Node] = match &entry.value.value {
                        NodeValue::Seq(items) => items,
                        NodeValue::Str(_) if ctrlrun => std::slice::from_ref(&entry.value),
                        _ => {
                            return Err(self.error(
                                &here,
                                Some(entry.line),
                                format!("'{key}' must be a list, got {}", entry.value.kind()),
                            ))
                        }
                    };
                    if items.is_empty() && !ctrlrun {
                        return Err(self.error(
                            &here,
                            Some(entry.line),
                            format!("'{key}' must not be empty; remove the key for no pin"),
                        ));
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
            let text = crate::files::open_regular(&resolved)
                .and_then(|file| {
                    let mut text = String::new();
                    file.take(MAX_CERTIFICATE_FILE_BYTES + 1).read_to_string(&mut text)?;
                    if text.len() as u64 > MAX_CERTIFICATE_FILE_BYTES {
                        return Err(std::io::Error::other("it is larger than 1 MiB"));
                    }
                    Ok(text)
                })
                .map_err(|e| {
                    self.error(
                        &here,
                        Some(line),
                        format!("cannot read the certificate file {}: {e}", resolved.display()),
                    )
                })?;
            let certificates = pem_certificates(&text)
                .map_err(|e| self.error(&here, Some(line), format!("{} is not PEM: {e}", resolved.display())))?;
            // One certificate per file: ctrlrun 0.12.2 refuses a file of several, and reading only
            // the first would drop the rest without a word.
            let der = match certificates.as_slice() {
                [der] => der.clone(),
                [] => {
                    return Err(self.error(
                        &here,
                        Some(line),
                        format!("{} holds no PEM CERTIFICATE block", resolved.display()),
                    ))
                }
                several => {
                    return Err(self.error(
                        &here,
                        Some(line),
                        format!(
                            "{} holds {} certificates; put each in a file of its own and list every file",
                            resolved.display(),
                            several.len()
                        ),
                    ))
                }
            };
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
        Ok(Some(pins))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pem_blocks_are_read_in_order_and_a_broken_one_is_named() {
        let block = |body: &str| format!("{PEM_BEGIN}\n{body}\n{PEM_END}\n");
        let two = format!("intro\n{}{}", block("AAEC"), block("AwQF"));
        assert_eq!(pem_certificates(&two), Ok(vec![vec![0, 1, 2], vec![3, 4, 5]]));
        assert_eq!(pem_certificate(&two), Some(vec![0, 1, 2]));
        assert_eq!(pem_certificates("no certificate here"), Ok(Vec::new()));
        let unterminated = format!("{}{PEM_BEGIN}\nAAEC\n", block("AAEC"));
        assert!(pem_certificates(&unterminated).is_err_and(|e| e.contains("block 2 has no")));
        assert!(pem_certificates(&block("not base64!")).is_err_and(|e| e.contains("block 1 is not base64")));
        assert_eq!(pem_certificate(&block("not base64!")), None);
    }
}
