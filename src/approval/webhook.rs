//! The built-in signed webhook: `notify: {webhook: {url, secret_ref}}` in the document.
//!
//! Each new approval request is POSTed as JSON (the request record, arguments included) with
//! `Warden-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, t + "." + body)>`, so the
//! receiver can check who sent it and reject a replay outside its own window. The secret is a
//! credential *reference* resolved per delivery like a sight credential (environment variable,
//! `credentials_dir`, or the host's callback), lives in zeroizing buffers and never appears in an
//! error, an event or the store. https only (http only with `allow_insecure_http`), no proxy from
//! the environment, redirects never followed (a 3xx is a failed delivery), one deadline per
//! attempt, and a bounded number of attempts with exponential backoff, each recorded as an event.

use std::path::PathBuf;
use std::time::Duration;

use hmac::{Hmac, Mac};
use serde_json::{Map, Value};
use zeroize::Zeroizing;

use crate::sight::credentials::{is_reference, CredentialProvider};

/// One delivery attempt's deadline unless `timeout_ms` says otherwise.
pub const DEFAULT_TIMEOUT_MS: u64 = 5_000;
/// The shortest `timeout_ms` accepted.
pub const MIN_TIMEOUT_MS: u64 = 100;
/// The longest `timeout_ms` accepted.
pub const MAX_TIMEOUT_MS: u64 = 60_000;
/// Delivery attempts unless `max_attempts` says otherwise.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 3;
/// The most `max_attempts` accepted.
pub const MAX_ATTEMPTS: u32 = 10;
/// The wait before the second attempt; it doubles for each later one.
pub const FIRST_BACKOFF: Duration = Duration::from_millis(500);
/// The longest wait between two attempts.
pub const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// The header that carries the HMAC signature of the body.
pub const SIGNATURE_HEADER: &str = "Warden-Signature";

const KEYS: [&str; 7] =
    ["allow_insecure_http", "ca_certs", "max_attempts", "secret_ref", "timeout_ms", "url", "user_agent"];

/// The `notify` section, validated.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NotifyConfig {
    /// The webhook to POST each new request to, if any.
    pub webhook: Option<WebhookConfig>,
    /// Where `warden console` is reached (`notify.console_url`): each notification then carries
    /// `link`, the console's page for that request.
    pub console_url: Option<url::Url>,
}

/// One webhook, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookConfig {
    /// Where requests are POSTed (https unless `allow_insecure_http`).
    pub url: url::Url,
    /// The credential reference of the signing secret, resolved per delivery.
    pub secret_ref: String,
    /// One attempt's deadline.
    pub timeout_ms: u64,
    /// How many attempts before giving up.
    pub max_attempts: u32,
    /// Extra PEM roots for this endpoint only.
    pub ca_certs: Option<PathBuf>,
    /// The `User-Agent` sent.
    pub user_agent: String,
}

/// A refusal of the `notify` section: the path inside the document and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotifyConfigError {
    /// Where in the document.
    pub path: String,
    /// What is wrong.
    pub message: String,
}

fn refuse(path: &str, message: impl Into<String>) -> NotifyConfigError {
    NotifyConfigError { path: path.to_owned(), message: message.into() }
}

impl NotifyConfig {
    /// Parse `notify` (as JSON). `allow_insecure_http` is the document's top-level flag.
    pub fn parse(value: &Value, allow_insecure_http: Option<bool>) -> Result<NotifyConfig, NotifyConfigError> {
        let Value::Object(map) = value else {
            return Err(refuse("notify", "'notify' must be a mapping such as {webhook: {url, secret_ref}}"));
        };
        if let Some(key) = map.keys().find(|key| !["webhook", "console_url"].contains(&key.as_str())) {
            return Err(refuse(
                &format!("notify.{key}"),
                format!("unknown key '{key}'; allowed here: webhook, console_url"),
            ));
        }
        let webhook = match map.get("webhook") {
            None | Some(Value::Null) => None,
            Some(value) => Some(WebhookConfig::parse(value, allow_insecure_http.unwrap_or(false))?),
        };
        let console_url = match map.get("console_url") {
            None | Some(Value::Null) => None,
            Some(Value::String(text)) => Some(console_url(text)?),
            Some(_) => return Err(refuse("notify.console_url", "'console_url' must be a string, the console's URL")),
        };
        Ok(NotifyConfig { webhook, console_url })
    }

    /// The console's page for one request (`<console_url>/approval/<id>`), when a console URL
    /// is configured.
    pub fn link(&self, approval_id: &str) -> Option<String> {
        console_link(self.console_url.as_ref()?, approval_id)
    }
}

/// The console's page for one request under `console_url`, the id one path segment.
pub fn console_link(console_url: &url::Url, approval_id: &str) -> Option<String> {
    let mut link = console_url.clone();
    link.path_segments_mut().ok()?.pop_if_empty().push("approval").push(approval_id);
    Some(link.to_string())
}

/// `notify.console_url`: http or https (a link carries no secret, and the console listens on
/// loopback, often reached through a tunnel), a host, no user or password, no query or fragment.
fn console_url(text: &str) -> Result<url::Url, NotifyConfigError> {
    let path = "notify.console_url";
    let url = url::Url::parse(text)
        .map_err(|e| refuse(path, format!("'console_url' is not a URL ({e}); write it as warden console prints it")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(refuse(path, format!("the console URL must be http or https, not {}", url.scheme())));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(refuse(path, "the console URL must not carry a user or password"));
    }
    if url.host().is_none() || url.query().is_some() || url.fragment().is_some() {
        return Err(refuse(path, "the console URL needs a host and no ?query or #fragment"));
    }
    Ok(url)
}

impl WebhookConfig {
    fn parse(value: &Value, global_insecure: bool) -> Result<WebhookConfig, NotifyConfigError> {
        let path = "notify.webhook";
        let Value::Object(map) = value else {
            return Err(refuse(path, "'webhook' must be a mapping with 'url' and 'secret_ref'"));
        };
        if let Some(key) = map.keys().find(|key| !KEYS.contains(&key.as_str())) {
            return Err(refuse(
                &format!("{path}.{key}"),
                format!("unknown key '{key}'; allowed here: {}", KEYS.join(", ")),
            ));
        }
        let field = |key: &str| format!("{path}.{key}");
        let text = |map: &Map<String, Value>, key: &str| -> Result<Option<String>, NotifyConfigError> {
            match map.get(key) {
                None => Ok(None),
                Some(Value::String(text)) => Ok(Some(text.clone())),
                Some(_) => Err(refuse(&field(key), format!("'{key}' must be a string"))),
            }
        };
        let insecure = match map.get("allow_insecure_http") {
            None => global_insecure,
            Some(Value::Bool(flag)) => *flag,
            Some(_) => {
                return Err(refuse(&field("allow_insecure_http"), "'allow_insecure_http' must be true or false"))
            }
        };
        let raw = text(map, "url")?.ok_or_else(|| refuse(&field("url"), "the webhook needs 'url', an https URL"))?;
        let url = url::Url::parse(&raw).map_err(|e| refuse(&field("url"), format!("'url' is not a URL: {e}")))?;
        match url.scheme() {
            "https" => {}
            "http" if insecure => {}
            "http" => {
                return Err(refuse(
                    &field("url"),
                    "the webhook URL must be https; plain http needs allow_insecure_http: true (the request it \
                     carries names the action and its arguments)",
                ))
            }
            other => return Err(refuse(&field("url"), format!("the webhook URL must be https, not {other}"))),
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(refuse(&field("url"), "the webhook URL must not carry a user or password; use secret_ref"));
        }
        if url.fragment().is_some() || url.host_str().is_none_or(str::is_empty) {
            return Err(refuse(&field("url"), "the webhook URL needs a host and no #fragment"));
        }
        let secret_ref = text(map, "secret_ref")?.ok_or_else(|| {
            refuse(&field("secret_ref"), "the webhook needs 'secret_ref', the name of the signing secret")
        })?;
        if !is_reference(&secret_ref) {
            return Err(refuse(
                &field("secret_ref"),
                "'secret_ref' names a credential (letters, digits, underscore; up to 128), never the secret itself",
            ));
        }
        let number = |key: &str, default: u64, min: u64, max: u64| -> Result<u64, NotifyConfigError> {
            match map.get(key) {
                None => Ok(default),
                Some(value) => match value.as_u64() {
                    Some(n) if (min..=max).contains(&n) => Ok(n),
                    _ => Err(refuse(&field(key), format!("'{key}' must be an integer in {min}..={max}"))),
                },
            }
        };
        let timeout_ms = number("timeout_ms", DEFAULT_TIMEOUT_MS, MIN_TIMEOUT_MS, MAX_TIMEOUT_MS)?;
        let max_attempts =
            u32::try_from(number("max_attempts", u64::from(DEFAULT_MAX_ATTEMPTS), 1, u64::from(MAX_ATTEMPTS))?)
                .unwrap_or(DEFAULT_MAX_ATTEMPTS);
        let ca_certs = text(map, "ca_certs")?.map(PathBuf::from);
        let user_agent = text(map, "user_agent")?.unwrap_or_else(|| "warden-approvals".to_owned());
        if user_agent.chars().any(char::is_control) || user_agent.len() > 200 {
            return Err(refuse(&field("user_agent"), "'user_agent' must be one plain line of at most 200 bytes"));
        }
        Ok(WebhookConfig { url, secret_ref, timeout_ms, max_attempts, ca_certs, user_agent })
    }

    /// The configuration as the policy would show it: never a secret (there is none here).
    pub fn to_json(&self) -> Value {
        serde_json::json!({
            "url": self.url.as_str(), "secret_ref": self.secret_ref, "timeout_ms": self.timeout_ms,
            "max_attempts": self.max_attempts,
            "ca_certs": self.ca_certs.as_ref().map(|p| p.display().to_string()),
        })
    }
}

/// `t=<unix>,v1=<hex HMAC-SHA256(secret, t + "." + body)>`.
pub fn signature(secret: &[u8], unix_seconds: i64, body: &[u8]) -> String {
    let t = unix_seconds.to_string();
    // HMAC takes a key of any length; `new_from_slice` cannot fail for it.
    let Ok(mut mac) = Hmac::<sha2::Sha256>::new_from_slice(secret) else {
        return format!("t={t},v1=");
    };
    mac.update(t.as_bytes());
    mac.update(b".");
    mac.update(body);
    format!("t={t},v1={}", hex::encode(mac.finalize().into_bytes()))
}

/// How one delivery attempt ended. Never carries the secret, the body or the URL's query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    /// A 2xx.
    Delivered {
        /// The HTTP status.
        status: u16,
    },
    /// Worth another attempt (a timeout, a connection failure, a 5xx, a 429).
    Retry {
        /// What went wrong (never the secret, the body or the query).
        error: String,
    },
    /// Another attempt would fail the same way (no secret, a redirect, a 4xx).
    GiveUp {
        /// What went wrong (never the secret, the body or the query).
        error: String,
    },
}

/// The wait before attempt `attempt` (2, 3, …): 0.5 s, 1 s, 2 s, … at most [`MAX_BACKOFF`].
pub fn backoff(attempt: u32) -> Duration {
    let doublings = attempt.saturating_sub(2).min(16);
    FIRST_BACKOFF.saturating_mul(1u32 << doublings).min(MAX_BACKOFF)
}

/// One POST of `body`, signed at `unix_seconds` with the secret `credentials` resolves now.
pub fn deliver(
    config: &WebhookConfig,
    credentials: &dyn CredentialProvider,
    body: &[u8],
    unix_seconds: i64,
) -> Delivery {
    let Some(secret) = credentials.resolve(&config.secret_ref).filter(|s| !s.is_empty()) else {
        return Delivery::GiveUp {
            error: format!("the webhook secret {} has no value; nothing was sent", config.secret_ref),
        };
    };
    let signed = Zeroizing::new(signature(secret.as_bytes(), unix_seconds, body));
    drop(secret);
    let deadline = Duration::from_millis(config.timeout_ms);
    let agent = match crate::http::confined_agent(config.ca_certs.as_deref(), deadline) {
        Ok(agent) => agent,
        Err(error) => return Delivery::GiveUp { error: format!("the webhook cannot be set up: {}", error.message) },
    };
    let sent = agent
        .post(config.url.as_str())
        .header("content-type", "application/json")
        .header("user-agent", config.user_agent.as_str())
        .header(SIGNATURE_HEADER, signed.as_str())
        .send(body);
    drop(signed);
    match sent {
        Ok(response) => {
            let status = response.status().as_u16();
            match status {
                200..=299 => Delivery::Delivered { status },
                300..=399 => Delivery::GiveUp {
                    error: format!("the webhook answered with a redirect (HTTP {status}); redirects are not followed"),
                },
                408 | 425 | 429 | 500..=599 => Delivery::Retry { error: format!("the webhook answered HTTP {status}") },
                _ => Delivery::GiveUp { error: format!("the webhook answered HTTP {status}") },
            }
        }
        Err(error) => {
            let mapped = crate::http::transport_error(error, config.timeout_ms);
            Delivery::Retry { error: format!("{} ({})", mapped.message, mapped.code) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(value: Value) -> Result<NotifyConfig, NotifyConfigError> {
        NotifyConfig::parse(&value, None)
    }

    #[test]
    fn the_signature_is_an_hmac_over_time_dot_body() {
        // RFC 4231 test case 2's key and data, split as "t.body" would be: "what do ya want " +
        // "for nothing?" is not of that shape, so compute the reference with the crate directly.
        let mut mac = Hmac::<sha2::Sha256>::new_from_slice(b"whsec").unwrap();
        mac.update(b"1700000000.{\"a\":1}");
        let expected = hex::encode(mac.finalize().into_bytes());
        assert_eq!(signature(b"whsec", 1_700_000_000, br#"{"a":1}"#), format!("t=1700000000,v1={expected}"));
        assert_ne!(
            signature(b"whsec", 1_700_000_001, br#"{"a":1}"#),
            signature(b"whsec", 1_700_000_000, br#"{"a":1}"#)
        );
    }

    #[test]
    fn a_console_url_gives_each_request_its_page() {
        let table = [
            ("http://127.0.0.1:8080", "http://127.0.0.1:8080/approval/apr_1"),
            ("http://127.0.0.1:8080/", "http://127.0.0.1:8080/approval/apr_1"),
            ("https://ops.example/warden", "https://ops.example/warden/approval/apr_1"),
            ("https://ops.example/warden/", "https://ops.example/warden/approval/apr_1"),
        ];
        for (base, link) in table {
            let config = parse(serde_json::json!({"console_url": base})).expect(base);
            assert_eq!(config.link("apr_1").as_deref(), Some(link), "{base}");
        }
        let config = parse(serde_json::json!({"console_url": "https://ops.example"})).unwrap();
        assert_eq!(config.link("a/b?c").as_deref(), Some("https://ops.example/approval/a%2Fb%3Fc"));
        assert_eq!(parse(serde_json::json!({})).unwrap().link("apr_1"), None);
    }

    #[test]
    fn refused_webhook_configurations_name_the_field() {
        let table = [
            (serde_json::json!([]), "notify"),
            (serde_json::json!({"email": {}}), "notify.email"),
            (serde_json::json!({"console_url": 8080}), "notify.console_url"),
            (serde_json::json!({"console_url": "not a url"}), "notify.console_url"),
            (serde_json::json!({"console_url": "ftp://ops.example"}), "notify.console_url"),
            (serde_json::json!({"console_url": "https://u:p@ops.example"}), "notify.console_url"),
            (serde_json::json!({"console_url": "https://ops.example/?x=1"}), "notify.console_url"),
            (serde_json::json!({"console_url": "https://ops.example/#top"}), "notify.console_url"),
            (serde_json::json!({"webhook": {"secret_ref": "S"}}), "notify.webhook.url"),
            (serde_json::json!({"webhook": {"url": "http://hooks.example", "secret_ref": "S"}}), "notify.webhook.url"),
            (serde_json::json!({"webhook": {"url": "ftp://hooks.example", "secret_ref": "S"}}), "notify.webhook.url"),
            (
                serde_json::json!({"webhook": {"url": "https://u:p@hooks.example", "secret_ref": "S"}}),
                "notify.webhook.url",
            ),
            (serde_json::json!({"webhook": {"url": "https://hooks.example"}}), "notify.webhook.secret_ref"),
            (
                serde_json::json!({"webhook": {"url": "https://hooks.example", "secret_ref": "whsec_live_abc-123"}}),
                "notify.webhook.secret_ref",
            ),
            (
                serde_json::json!({"webhook": {"url": "https://hooks.example", "secret_ref": "S", "timeout_ms": 99}}),
                "notify.webhook.timeout_ms",
            ),
            (
                serde_json::json!({"webhook": {"url": "https://hooks.example", "secret_ref": "S", "timeout_ms": 60001}}),
                "notify.webhook.timeout_ms",
            ),
            (
                serde_json::json!({"webhook": {"url": "https://hooks.example", "secret_ref": "S", "max_attempts": 0}}),
                "notify.webhook.max_attempts",
            ),
            (
                serde_json::json!({"webhook": {"url": "https://hooks.example", "secret_ref": "S", "max_attempts": 11}}),
                "notify.webhook.max_attempts",
            ),
            (
                serde_json::json!({"webhook": {"url": "https://hooks.example", "secret_ref": "S", "method": "GET"}}),
                "notify.webhook.method",
            ),
        ];
        for (value, path) in table {
            let error = parse(value.clone()).unwrap_err();
            assert_eq!(error.path, path, "{value}: {}", error.message);
        }
        let ok = parse(serde_json::json!({"webhook": {"url": "https://hooks.example/a", "secret_ref": "S", "timeout_ms": 100, "max_attempts": 10}})).unwrap();
        assert_eq!(ok.webhook.unwrap().max_attempts, 10);
        let insecure = NotifyConfig::parse(
            &serde_json::json!({"webhook": {"url": "http://127.0.0.1:9/h", "secret_ref": "S"}}),
            Some(true),
        );
        assert!(insecure.is_ok());
    }

    #[test]
    fn backoff_doubles_from_half_a_second_and_is_capped() {
        assert_eq!(backoff(2), Duration::from_millis(500));
        assert_eq!(backoff(3), Duration::from_secs(1));
        assert_eq!(backoff(4), Duration::from_secs(2));
        assert_eq!(backoff(40), MAX_BACKOFF);
    }
}
