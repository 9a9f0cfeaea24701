//! RFC 8693 token exchange for `gateway.upstream_auth: {mode: token_exchange}`: the client's
//! verified bearer token (`--identity-jwt` checked it for this gateway's resource) is the
//! `subject_token` of a POST to the document's token endpoint, and the access token issued is
//! what the upstream gets as `Authorization: Bearer`. The client's token never reaches the
//! upstream (no passthrough), and neither token is in any message, log line, receipt or store
//! file: a failure names the endpoint and the OAuth error code only.
//!
//! The POST goes through Warden's one outbound client (`warden::http`): no proxy from the
//! environment, no redirect followed, one deadline, the answer read under a cap. Issued tokens
//! are cached per subject token — keyed by its SHA-256, never the token — until shortly before
//! their `expires_in`, in a bounded map of zeroizing values.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::Value;
use sha2::{Digest, Sha256};
use warden::document::{ClientAuthMethod, TokenExchange};
use warden::http::{post_for_answer, CancelToken, FetchRequest};
use warden::sight::credentials::{resolve_checked, CredentialProvider};
use zeroize::Zeroizing;

/// `grant_type` of a token exchange (RFC 8693 §2.1).
const GRANT_TYPE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
/// The type of the subject token sent, and of the token asked for.
const ACCESS_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:access_token";
/// An issued JWT, which a resource takes as a bearer access token too.
const JWT_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:jwt";
/// The largest answer read from the token endpoint.
pub const MAX_ANSWER_BYTES: u64 = 64 * 1024;
/// The longest issued token used.
const MAX_TOKEN_BYTES: usize = 16 * 1024;
/// Issued tokens held at once; past it the expired go first, then the soonest to expire.
pub const MAX_CACHED: usize = 1024;
/// How long before its `expires_in` a cached token stops being used: a tenth of its lifetime,
/// at most this.
const MAX_MARGIN: Duration = Duration::from_secs(30);
/// The longest an issued token is used, whatever its `expires_in` says.
const MAX_HELD: Duration = Duration::from_secs(3600);

/// One issued token, and until when it is used.
struct Cached {
    token: Zeroizing<String>,
    until: Instant,
}

/// The token endpoint, the exchange's parameters and the cache of issued tokens.
pub struct Exchanger {
    config: TokenExchange,
    url: url::Url,
    timeout: Duration,
    cache: Mutex<HashMap<[u8; 32], Cached>>,
}

impl Exchanger {
    /// The document's exchange, each POST bounded by `timeout`.
    pub fn new(config: &TokenExchange, timeout: Duration) -> Result<Exchanger, String> {
        let url = url::Url::parse(&config.token_endpoint)
            .map_err(|e| format!("gateway.upstream_auth.token_endpoint is not a URL ({e})"))?;
        Ok(Exchanger { config: config.clone(), url, timeout, cache: Mutex::new(HashMap::new()) })
    }

    pub fn config(&self) -> &TokenExchange {
        &self.config
    }

    /// The token the upstream gets for `subject`: cached, or exchanged now. The error names the
    /// endpoint and what failed (the OAuth error code, a status, a missing field), never a
    /// token; it is safe to show the client.
    pub fn token(&self, subject: &str, provider: &dyn CredentialProvider) -> Result<Zeroizing<String>, String> {
        let key: [u8; 32] = Sha256::digest(subject.as_bytes()).into();
        let now = Instant::now();
        {
            let cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(hit) = cache.get(&key).filter(|hit| hit.until > now) {
                return Ok(hit.token.clone());
            }
        }
        let (token, lifetime) = self
            .exchange(subject, provider)
            .map_err(|why| format!("the token exchange at {} failed: {why}", self.config.token_endpoint))?;
        // From when the request was sent, not when the answer came: the earlier bound.
        if let Some(until) = lifetime.and_then(|lifetime| held_until(now, lifetime)) {
            self.remember(key, Cached { token: token.clone(), until }, now);
        }
        Ok(token)
    }

    /// Keep an issued token, making room first when the map is full.
    fn remember(&self, key: [u8; 32], cached: Cached, now: Instant) {
        let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        if cache.len() >= MAX_CACHED && !cache.contains_key(&key) {
            cache.retain(|_, entry| entry.until > now);
            if cache.len() >= MAX_CACHED {
                if let Some(soonest) = cache.iter().min_by_key(|(_, entry)| entry.until).map(|(k, _)| *k) {
                    cache.remove(&soonest);
                }
            }
        }
        cache.insert(key, cached);
    }

    /// How many issued tokens are held (for tests).
    #[cfg(test)]
    fn cached(&self) -> usize {
        self.cache.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    /// One POST to the token endpoint: the issued token and its lifetime, or why not.
    fn exchange(
        &self,
        subject: &str,
        provider: &dyn CredentialProvider,
    ) -> Result<(Zeroizing<String>, Option<Duration>), String> {
        let config = &self.config;
        let resolve = |reference: &warden::sight::config::CredentialRef, what: &str| {
            resolve_checked(provider, reference.as_str()).map_err(|error| {
                // Where it was looked for goes to the gateway's log, not to the client.
                super::log::warn(&format!("the token exchange's {what}: {}", error.message));
                format!("the gateway's {what} ({reference}) is not available")
            })
        };
        let client_id = resolve(&config.client_id, "client_id")?;
        let client_secret = resolve(&config.client_secret, "client_secret")?;
        let mut fields: Vec<(&str, &str)> = vec![
            ("grant_type", GRANT_TYPE),
            ("subject_token", subject),
            ("subject_token_type", ACCESS_TOKEN_TYPE),
            ("requested_token_type", ACCESS_TOKEN_TYPE),
        ];
        for (name, value) in [("audience", &config.audience), ("resource", &config.resource), ("scope", &config.scope)]
        {
            if let Some(value) = value {
                fields.push((name, value.as_str()));
            }
        }
        let header = match config.auth_method {
            ClientAuthMethod::ClientSecretBasic => {
                Some(("authorization".to_owned(), basic(&client_id, &client_secret)))
            }
            ClientAuthMethod::ClientSecretPost => {
                fields.push(("client_id", client_id.as_str()));
                fields.push(("client_secret", client_secret.as_str()));
                None
            }
        };
        // Room for every byte percent-encoded, so the form is never reallocated (no copy of a
        // token or secret is left behind) and is zeroized when dropped.
        let room = fields.iter().map(|(k, v)| 3 * (k.len() + v.len()) + 2).sum::<usize>();
        let mut form = Zeroizing::new(String::with_capacity(room));
        url::form_urlencoded::Serializer::new(&mut *form).extend_pairs(fields).finish();
        let request = FetchRequest {
            url: self.url.clone(),
            header,
            timeout_ms: u64::try_from(self.timeout.as_millis()).unwrap_or(u64::MAX),
            max_response_bytes: MAX_ANSWER_BYTES,
            ca_certs: None,
        };
        let answer =
            post_for_answer(&request, "application/x-www-form-urlencoded", form.as_bytes(), &CancelToken::new())
                .map_err(|error| match error.code {
                    "redirect_refused" => {
                        "the token endpoint answered with a redirect, which is never followed".to_owned()
                    }
                    "response_too_large" => format!("the token endpoint's answer is over {MAX_ANSWER_BYTES} bytes"),
                    _ => format!("the token endpoint could not be reached or read ({})", error.message),
                })?;
        let body = Zeroizing::new(answer.body);
        issued(answer.status, &body)
    }
}

/// Until when a token issued at `sent` for `lifetime` is used: a tenth of its lifetime (at most
/// `MAX_MARGIN`) before it lapses, at most `MAX_HELD` on; `None` (not cached) for no lifetime.
fn held_until(sent: Instant, lifetime: Duration) -> Option<Instant> {
    let usable = lifetime.saturating_sub((lifetime / 10).min(MAX_MARGIN)).min(MAX_HELD);
    sent.checked_add(usable).filter(|_| !usable.is_zero())
}

/// `Basic` of the form-encoded client id and secret (RFC 6749 §2.3.1), zeroized when dropped.
fn basic(id: &str, secret: &str) -> Zeroizing<String> {
    let encoded = |text: &str| {
        let mut out = Zeroizing::new(String::with_capacity(3 * text.len()));
        out.extend(url::form_urlencoded::byte_serialize(text.as_bytes()));
        out
    };
    let (id, secret) = (encoded(id), encoded(secret));
    let mut pair = Zeroizing::new(String::with_capacity(id.len() + 1 + secret.len()));
    pair.push_str(&id);
    pair.push(':');
    pair.push_str(&secret);
    let mut value = Zeroizing::new(String::with_capacity(6 + base64::encoded_len(pair.len(), true).unwrap_or(0)));
    value.push_str("Basic ");
    base64::engine::general_purpose::STANDARD.encode_string(pair.as_bytes(), &mut value);
    value
}

/// The token endpoint's answer read (RFC 8693 §2.2): a 200 with `access_token`,
/// `issued_token_type` (an access token or a JWT), `token_type` Bearer and, when given,
/// `expires_in`; anything else is why not, naming the OAuth error code when there is one.
fn issued(status: u16, body: &[u8]) -> Result<(Zeroizing<String>, Option<Duration>), String> {
    let parsed = serde_json::from_slice::<Value>(body).ok();
    let mut answer = match parsed {
        Some(Value::Object(map)) => map,
        _ if status != 200 => return Err(format!("HTTP {status}, with no OAuth error in the answer")),
        _ => return Err("HTTP 200, but the answer is not a JSON object".to_owned()),
    };
    if status != 200 {
        return Err(match answer.get("error").and_then(Value::as_str) {
            Some(code) if is_error_code(code) => format!("OAuth error {code} (HTTP {status})"),
            Some(_) => format!("an OAuth error whose code is not RFC 6749's (HTTP {status})"),
            None => format!("HTTP {status}, with no OAuth error in the answer"),
        });
    }
    let token = match answer.remove("access_token") {
        Some(Value::String(token)) => Zeroizing::new(token),
        Some(_) => return Err("the answer's access_token is not a string".to_owned()),
        None => return Err("the answer has no access_token".to_owned()),
    };
    if token.is_empty() || token.len() > MAX_TOKEN_BYTES || !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(format!(
            "the answer's access_token is not a token a header can carry (1 to {MAX_TOKEN_BYTES} visible ASCII characters)"
        ));
    }
    match answer.get("token_type").and_then(Value::as_str) {
        Some(kind) if kind.eq_ignore_ascii_case("bearer") => {}
        Some(kind) if kind.eq_ignore_ascii_case("n_a") => return Err(
            "token_type N_A: the token issued is not an access token (RFC 8693 §2.2.1), and the upstream takes Bearer"
                .to_owned(),
        ),
        Some(kind) if kind.len() <= 32 && kind.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') => {
            return Err(format!("token_type {kind} is not Bearer"))
        }
        Some(_) => return Err("the answer's token_type is not Bearer".to_owned()),
        None => return Err("the answer has no token_type (RFC 8693 §2.2.1)".to_owned()),
    }
    match answer.get("issued_token_type").and_then(Value::as_str) {
        Some(ACCESS_TOKEN_TYPE | JWT_TOKEN_TYPE) => {}
        Some(kind) if kind.len() <= 128 && kind.bytes().all(|b| b.is_ascii_graphic()) => {
            return Err(format!("issued_token_type {kind} is not an access token or a JWT"))
        }
        Some(_) => return Err("the answer's issued_token_type is not an access token or a JWT".to_owned()),
        None => return Err("the answer has no issued_token_type (RFC 8693 §2.2.1)".to_owned()),
    }
    let lifetime = match answer.get("expires_in") {
        None | Some(Value::Null) => None,
        Some(seconds) => Some(Duration::from_secs(
            seconds.as_u64().ok_or("the answer's expires_in is not a whole number of seconds")?,
        )),
    };
    Ok((token, lifetime))
}

/// RFC 6749 §5.2: `error = 1*( %x20-21 / %x23-5B / %x5D-7E )`, here at most 64 characters.
fn is_error_code(code: &str) -> bool {
    !code.is_empty() && code.len() <= 64 && code.bytes().all(|b| matches!(b, 0x20..=0x21 | 0x23..=0x5b | 0x5d..=0x7e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_is_used_only_when_it_is_a_bearer_access_token() {
        let ok = br#"{"access_token":"exchanged-1","issued_token_type":"urn:ietf:params:oauth:token-type:access_token","token_type":"bearer","expires_in":60}"#;
        let (token, lifetime) = issued(200, ok).expect("usable");
        assert_eq!((token.as_str(), lifetime), ("exchanged-1", Some(Duration::from_secs(60))));
        let jwt =
            br#"{"access_token":"e","issued_token_type":"urn:ietf:params:oauth:token-type:jwt","token_type":"Bearer"}"#;
        assert_eq!(issued(200, jwt).expect("usable").1, None, "no expires_in: not cached");
        let table: [(u16, &[u8], &str); 13] = [
            (400, br#"{"error":"invalid_grant","error_description":"subject eyJsecret expired"}"#, "OAuth error invalid_grant (HTTP 400)"),
            (401, br#"{"error":"invalid_client"}"#, "OAuth error invalid_client (HTTP 401)"),
            (400, br#"{"error":"bad\"quote"}"#, "not RFC 6749's"),
            (500, b"oops", "HTTP 500, with no OAuth error"),
            (201, br#"{"access_token":"e","issued_token_type":"urn:ietf:params:oauth:token-type:jwt","token_type":"Bearer"}"#, "HTTP 201"),
            (200, b"[1]", "not a JSON object"),
            (200, br#"{"issued_token_type":"urn:ietf:params:oauth:token-type:jwt","token_type":"Bearer"}"#, "no access_token"),
            (200, br#"{"access_token":"a b","issued_token_type":"urn:ietf:params:oauth:token-type:jwt","token_type":"Bearer"}"#, "a header can carry"),
            (200, br#"{"access_token":"e","issued_token_type":"urn:ietf:params:oauth:token-type:access_token","token_type":"N_A"}"#, "token_type N_A"),
            (200, br#"{"access_token":"e","issued_token_type":"urn:ietf:params:oauth:token-type:access_token","token_type":"DPoP"}"#, "token_type DPoP is not Bearer"),
            (200, br#"{"access_token":"e","issued_token_type":"urn:ietf:params:oauth:token-type:access_token"}"#, "no token_type"),
            (200, br#"{"access_token":"e","issued_token_type":"urn:ietf:params:oauth:token-type:id_token","token_type":"Bearer"}"#, "id_token is not an access token"),
            (200, br#"{"access_token":"e","issued_token_type":"urn:ietf:params:oauth:token-type:jwt","token_type":"Bearer","expires_in":"60"}"#, "expires_in"),
        ];
        for (status, body, expected) in table {
            let why = issued(status, body).map(|(t, _)| t.to_string()).expect_err(expected);
            assert!(why.contains(expected), "{expected}: {why}");
            assert!(!why.contains("eyJ") && !why.contains("a b"), "never a token: {why}");
        }
    }

    #[test]
    fn a_token_is_held_until_shortly_before_it_lapses_and_never_past_an_hour() {
        let now = Instant::now();
        let table = [
            (0, None),
            (1, Some(Duration::from_millis(900))),
            (60, Some(Duration::from_secs(54))),
            (1200, Some(Duration::from_secs(1170))),
            (86_400, Some(MAX_HELD)),
            (u64::MAX, Some(MAX_HELD)),
        ];
        for (seconds, held) in table {
            let until = held_until(now, Duration::from_secs(seconds));
            assert_eq!(until.map(|until| until - now), held, "expires_in {seconds}");
        }
    }

    #[test]
    fn client_authentication_is_basic_of_the_form_encoded_pair() {
        let value = basic("gateway client", "s3cr:t/+");
        let decoded = base64::engine::general_purpose::STANDARD.decode(&value["Basic ".len()..]).expect("base64");
        assert_eq!(String::from_utf8(decoded).expect("utf-8"), "gateway+client:s3cr%3At%2F%2B");
    }

    #[test]
    fn the_cache_is_bounded_and_drops_the_expired_first() {
        let config = TokenExchange {
            token_endpoint: "http://127.0.0.1:9/token".into(),
            audience: Some("a".into()),
            resource: None,
            scope: None,
            client_id: warden::sight::config::CredentialRef::parse("I").expect("ref"),
            client_secret: warden::sight::config::CredentialRef::parse("S").expect("ref"),
            auth_method: ClientAuthMethod::ClientSecretBasic,
            line: 1,
        };
        let exchanger = Exchanger::new(&config, Duration::from_secs(1)).expect("new");
        let now = Instant::now();
        let entry = |secs: u64| Cached { token: Zeroizing::new("t".into()), until: now + Duration::from_secs(secs) };
        exchanger.remember([0; 32], Cached { token: Zeroizing::new("old".into()), until: now }, now);
        for i in 1..MAX_CACHED {
            let mut key = [0u8; 32];
            key[..8].copy_from_slice(&(i as u64).to_be_bytes());
            exchanger.remember(key, entry(100 + i as u64), now);
        }
        assert_eq!(exchanger.cached(), MAX_CACHED);
        exchanger.remember([9; 32], entry(50), now);
        assert_eq!(exchanger.cached(), MAX_CACHED, "bounded");
        let cache = exchanger.cache.lock().expect("lock");
        assert!(!cache.contains_key(&[0; 32]), "the expired entry went first");
        drop(cache);
        exchanger.remember([8; 32], entry(200), now);
        let cache = exchanger.cache.lock().expect("lock");
        assert_eq!(cache.len(), MAX_CACHED);
        assert!(!cache.contains_key(&[9; 32]), "then the soonest to expire");
    }
}
