//! Credential resolution for sights (DESIGN.md §6, "Credentials").
//!
//! A source's auth names *references*, never values. Each request resolves its references
//! afresh through a [`CredentialProvider`] (nothing is cached), checks the values before any
//! I/O, and builds the one auth header in zeroizing buffers. Errors name the reference only.

use std::io::Read;
use std::path::PathBuf;

use base64::Engine as _;
use zeroize::Zeroizing;

use crate::error::SightError;

/// The largest credential file [`DirectoryProvider`] reads; a bigger file resolves to nothing.
pub const MAX_CREDENTIAL_FILE_BYTES: u64 = 64 * 1024;

/// Where credential values come from. `resolve` returns `None` when the reference has no
/// value; implementations must not log or cache the value.
pub trait CredentialProvider: Send + Sync {
    /// The value of `reference`, or `None` when it has none.
    fn resolve(&self, reference: &str) -> Option<Zeroizing<String>>;

    /// Where this provider looked for `reference` (a valid reference) and why that can come up
    /// empty, for the `credential_unavailable` message: never a value, only a place.
    fn looked_in(&self, reference: &str) -> String {
        format!("the host's credential provider had no value for {reference}")
    }
}

/// The default provider: the environment variable named by the reference.
#[derive(Debug, Clone, Copy, Default)]
pub struct EnvProvider;

impl CredentialProvider for EnvProvider {
    fn resolve(&self, reference: &str) -> Option<Zeroizing<String>> {
        if !is_reference(reference) {
            return None;
        }
        let value = std::env::var_os(reference)?;
        value.into_string().ok().map(Zeroizing::new)
    }

    fn looked_in(&self, reference: &str) -> String {
        format!(
            "Warden looked for the environment variable {reference}, which is not set (or not UTF-8); set it, \
             or use a credentials directory or a credential callback"
        )
    }
}

/// One file per reference in `dir` (systemd credentials, container secrets). A single
/// trailing newline (`\n` or `\r\n`) is trimmed; files over [`MAX_CREDENTIAL_FILE_BYTES`],
/// non-UTF-8 files and non-regular files resolve to nothing.
#[derive(Debug, Clone)]
pub struct DirectoryProvider {
    /// The directory holding one file per reference.
    pub dir: PathBuf,
}

impl CredentialProvider for DirectoryProvider {
    fn resolve(&self, reference: &str) -> Option<Zeroizing<String>> {
        // The reference syntax has no separators or dots, so the join stays inside `dir`.
        if !is_reference(reference) {
            return None;
        }
        let path = self.dir.join(reference);
        // Not a plain open: a FIFO planted under the reference's name would block it.
        let file = crate::files::open_regular(&path).ok()?;
        let meta = file.metadata().ok()?;
        if !meta.is_file() || meta.len() > MAX_CREDENTIAL_FILE_BYTES {
            return None;
        }
        // Capacity for the whole cap up front: the buffer never reallocates, so no
        // un-zeroized copy of a partial value is left behind.
        let cap = MAX_CREDENTIAL_FILE_BYTES as usize + 1;
        let mut bytes = Zeroizing::new(Vec::with_capacity(cap));
        file.take(MAX_CREDENTIAL_FILE_BYTES + 1).read_to_end(&mut bytes).ok()?;
        if bytes.len() as u64 > MAX_CREDENTIAL_FILE_BYTES {
            return None;
        }
        if bytes.last() == Some(&b'\n') {
            bytes.pop();
            if bytes.last() == Some(&b'\r') {
                bytes.pop();
            }
        }
        let owned = std::mem::take(&mut *bytes);
        match String::from_utf8(owned) {
            Ok(text) => Some(Zeroizing::new(text)),
            Err(err) => {
                // Wipe the rejected bytes too.
                drop(Zeroizing::new(err.into_bytes()));
                None
            }
        }
    }

    fn looked_in(&self, reference: &str) -> String {
        format!(
            "Warden looked for the file {} (the credentials directory), which is missing, unreadable, \
             not a regular file, over {} KiB or not UTF-8",
            self.dir.join(reference).display(),
            MAX_CREDENTIAL_FILE_BYTES / 1024
        )
    }
}

/// A host-supplied resolver (the bindings register one). The returned `String` is moved into
/// a zeroizing buffer at once.
pub struct CallbackProvider<F: Fn(&str) -> Option<String> + Send + Sync>(pub F);

impl<F: Fn(&str) -> Option<String> + Send + Sync> CredentialProvider for CallbackProvider<F> {
    fn resolve(&self, reference: &str) -> Option<Zeroizing<String>> {
        (self.0)(reference).map(Zeroizing::new)
    }

    fn looked_in(&self, reference: &str) -> String {
        format!("Warden asked the host's credential callback, which returned no value for {reference}")
    }
}

/// The auth a source uses, as references (mirrors the config's `auth`; the orchestrator
/// converts).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthSpec {
    /// No credential.
    None,
    /// `Authorization: Bearer <credential>`.
    Bearer {
        /// The token's reference.
        credential: String,
    },
    /// `Authorization: Basic`, from two references.
    Basic {
        /// The username's reference.
        username: String,
        /// The password's reference.
        password: String,
    },
    /// The credential in a header of the source's choosing.
    ApiKey {
        /// The header's name.
        header: String,
        /// The key's reference.
        credential: String,
        /// Text sent before the key, if any.
        prefix: Option<String>,
    },
}

/// The one auth header of a request and the resolved values it was built from (a bearer
/// token; a basic username and password; an api key without its prefix), all in zeroizing
/// buffers. The echo guard scrubs each of them, whatever the header's own shape.
pub struct SentCredential {
    /// The header name, lower-cased.
    pub name: String,
    /// The header value sent.
    pub value: Zeroizing<String>,
    /// The resolved values the header was built from.
    pub parts: Vec<Zeroizing<String>>,
}

impl std::fmt::Debug for SentCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never a value.
        f.debug_struct("SentCredential").field("name", &self.name).field("parts", &self.parts.len()).finish()
    }
}

/// Resolve `auth` through `provider` and build the one header to send, or `None` for no auth.
/// Every value is checked before returning (and so before any I/O): missing or empty →
/// `credential_unavailable`; CR, LF, NUL or another control character (or `:` in a basic
/// username) → `credential_unavailable` naming the reference and the reason, never the value.
pub fn header_for(
    auth: &AuthSpec,
    provider: &dyn CredentialProvider,
) -> Result<Option<(String, Zeroizing<String>)>, SightError> {
    Ok(credential_for(auth, provider)?.map(|sent| (sent.name, sent.value)))
}

/// [`header_for`], keeping the values the header was built from for the echo guard.
pub fn credential_for(
    auth: &AuthSpec,
    provider: &dyn CredentialProvider,
) -> Result<Option<SentCredential>, SightError> {
    match auth {
        AuthSpec::None => Ok(None),
        AuthSpec::Bearer { credential } => {
            let value = resolve_checked(provider, credential)?;
            let mut out = Zeroizing::new(String::with_capacity(7 + value.len()));
            out.push_str("Bearer ");
            out.push_str(&value);
            Ok(Some(SentCredential { name: "authorization".to_string(), value: out, parts: vec![value] }))
        }
        AuthSpec::Basic { username, password } => {
            let user = resolve_checked(provider, username)?;
            if user.contains(':') {
                return Err(SightError::new(
                    "credential_unavailable",
                    format!("credential {} (basic username) contains ':'", reference_label(username)),
                ));
            }
            let pass = resolve_checked(provider, password)?;
            let mut raw = Zeroizing::new(String::with_capacity(user.len() + 1 + pass.len()));
            raw.push_str(&user);
            raw.push(':');
            raw.push_str(&pass);
            let encoded_len = base64::encoded_len(raw.len(), true).unwrap_or(0);
            let mut out = Zeroizing::new(String::with_capacity(6 + encoded_len));
            out.push_str("Basic ");
            base64::engine::general_purpose::STANDARD.encode_string(raw.as_bytes(), &mut out);
            Ok(Some(SentCredential { name: "authorization".to_string(), value: out, parts: vec![raw, user, pass] }))
        }
        AuthSpec::ApiKey { header, credential, prefix } => {
            if !is_header_token(header) {
                return Err(SightError::new("configuration_invalid", "api_key header name is not a valid HTTP token"));
            }
            let prefix = prefix.as_deref().unwrap_or("");
            if prefix.chars().any(is_forbidden_char) {
                return Err(SightError::new("configuration_invalid", "api_key prefix contains a control character"));
            }
            let value = resolve_checked(provider, credential)?;
            let mut out = Zeroizing::new(String::with_capacity(prefix.len() + value.len()));
            out.push_str(prefix);
            out.push_str(&value);
            Ok(Some(SentCredential { name: header.to_ascii_lowercase(), value: out, parts: vec![value] }))
        }
    }
}

/// The value of one reference, checked as every header value built from one is (not empty, no
/// control character but tab), or `credential_unavailable` naming the reference and where the
/// provider looked (never a value). For a caller that sends a value other than in a header
/// (the gateway's client secret at a token endpoint).
pub fn resolve_checked(provider: &dyn CredentialProvider, reference: &str) -> Result<Zeroizing<String>, SightError> {
    let label = reference_label(reference);
    let Some(value) = provider.resolve(reference) else {
        // Where it looked, so the operator knows what to fix; the label is the reference
        // itself only when it has reference syntax.
        let place = if is_reference(reference) { provider.looked_in(reference) } else { String::new() };
        let message = if place.is_empty() {
            format!("credential {label} is not available")
        } else {
            format!("credential {label} is not available: {place}")
        };
        return Err(SightError::new("credential_unavailable", message));
    };
    if value.is_empty() {
        return Err(SightError::new("credential_unavailable", format!("credential {label} is empty")));
    }
    if value.chars().any(is_forbidden_char) {
        return Err(SightError::new(
            "credential_unavailable",
            format!("credential {label} contains a control character (CR, LF, NUL or similar)"),
        ));
    }
    Ok(value)
}

/// Characters a header value may not carry: every control character except horizontal tab
/// (CR, LF and NUL among them), and DEL.
fn is_forbidden_char(c: char) -> bool {
    (c.is_ascii_control() && c != '\t') || c == '\u{7f}'
}

/// `^[A-Za-z_][A-Za-z0-9_]{0,127}$`.
pub fn is_reference(reference: &str) -> bool {
    let bytes = reference.as_bytes();
    match bytes.first() {
        Some(first) if first.is_ascii_alphabetic() || *first == b'_' => {}
        _ => return false,
    }
    bytes.len() <= 128 && bytes.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'_')
}

/// How a reference appears in a message: itself when it has reference syntax (config already
/// refused references that look like secrets), otherwise a neutral placeholder so a pasted
/// value can never be echoed.
fn reference_label(reference: &str) -> String {
    if is_reference(reference) {
        reference.to_string()
    } else {
        "(invalid reference)".to_string()
    }
}

fn is_header_token(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 128
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unavailable(auth: &AuthSpec, provider: &dyn CredentialProvider) -> String {
        let error = header_for(auth, provider).expect_err("no value, so no header");
        assert_eq!(error.code, "credential_unavailable");
        error.message
    }

    fn bearer(reference: &str) -> AuthSpec {
        AuthSpec::Bearer { credential: reference.to_owned() }
    }

    #[test]
    fn a_missing_credential_names_where_warden_looked_for_it() {
        let reference = "WARDEN_TEST_SURELY_UNSET_CREDENTIAL";
        assert_eq!(
            unavailable(&bearer(reference), &EnvProvider),
            format!(
                "credential {reference} is not available: Warden looked for the environment variable {reference}, \
                 which is not set (or not UTF-8); set it, or use a credentials directory or a credential callback"
            )
        );

        let dir = std::env::temp_dir().join("warden-credentials-test-no-such-dir");
        let message = unavailable(&bearer("STATUS_TOKEN"), &DirectoryProvider { dir: dir.clone() });
        assert!(
            message.starts_with(&format!(
                "credential STATUS_TOKEN is not available: Warden looked for the file {} (the credentials directory)",
                dir.join("STATUS_TOKEN").display()
            )),
            "{message}"
        );

        let message = unavailable(&bearer("STATUS_TOKEN"), &CallbackProvider(|_: &str| None));
        assert_eq!(
            message,
            "credential STATUS_TOKEN is not available: Warden asked the host's credential callback, which returned \
             no value for STATUS_TOKEN"
        );
    }

    #[test]
    fn a_provider_without_its_own_words_still_says_it_had_no_value() {
        struct Nothing;
        impl CredentialProvider for Nothing {
            fn resolve(&self, _: &str) -> Option<Zeroizing<String>> {
                None
            }
        }
        let basic = AuthSpec::Basic { username: "USER_REF".into(), password: "PASS_REF".into() };
        assert_eq!(
            unavailable(&basic, &Nothing),
            "credential USER_REF is not available: the host's credential provider had no value for USER_REF"
        );
    }

    #[test]
    fn a_reference_that_is_not_one_is_never_echoed_nor_looked_up() {
        let message = unavailable(&bearer("sk-live-not-a-reference"), &EnvProvider);
        assert_eq!(message, "credential (invalid reference) is not available");
    }
}
