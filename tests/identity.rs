//! Identity providers: static, header, and JWT (pinned key and JWK Set over HTTPS). Every
//! refusal the issue lists — forged signature, `alg: none`, HS/RS confusion, wrong `aud`, `iss`
//! and `typ`, missing `exp`, expired — with keys generated here.

mod support;

use std::sync::{Arc, OnceLock};

use base64::Engine as _;
use jsonwebtoken::jwk::Jwk;
use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
use rsa::pkcs8::{EncodePrivateKey, EncodePublicKey, LineEnding};
use rsa::Generate as _;
use serde_json::{json, Value};
use support::{response, Server, TestCa};
use warden::clock::{ManualClock, MICROS_PER_SECOND};
use warden::identity::{
    HeaderProvider, IdentityContext, IdentityProvider, JwtAlgorithm, JwtConfig, JwtProvider, KeySource, Refusal,
    StaticProvider,
};
use warden::Principal;

const NOW: i64 = 1_800_000_000; // seconds
const ISSUER: &str = "https://id.example.com/tenant-1";
const AUDIENCE: &str = "warden";

struct KeyPair {
    private_pem: String,
    public_pem: String,
}

fn rsa_pair() -> KeyPair {
    let key = rsa::PrivateKey::generate();
    let public = rsa::PublicKey::from(&key);
    KeyPair {
        private_pem: key.to_pkcs8_pem(LineEnding::LF).unwrap().to_string(),
        public_pem: public.to_public_key_pem(LineEnding::LF).unwrap(),
    }
}

/// Two RSA keys, generated once per test binary (key generation is the slow part).
fn rsa_keys() -> &'static (KeyPair, KeyPair) {
    static KEYS: OnceLock<(KeyPair, KeyPair)> = OnceLock::new();
    KEYS.get_or_init(|| (rsa_pair(), rsa_pair()))
}

fn rcgen_pair(algorithm: &'static rcgen::SignatureAlgorithm) -> KeyPair {
    let key = rcgen::KeyPair::generate_for(algorithm).unwrap();
    KeyPair { private_pem: key.serialize_pem(), public_pem: key.public_key_pem() }
}

fn claims() -> Value {
    json!({"iss": ISSUER, "aud": [AUDIENCE, "other"], "sub": "support-1", "exp": NOW + 300, "user": "alice"})
}

fn sign(alg: Algorithm, private_pem: &str, claims: &Value, typ: Option<&str>, kid: Option<&str>) -> String {
    let key = match alg {
        Algorithm::RS256 => EncodingKey::from_rsa_pem(private_pem.as_bytes()),
        Algorithm::ES256 => EncodingKey::from_ec_pem(private_pem.as_bytes()),
        Algorithm::EdDSA => EncodingKey::from_ed_pem(private_pem.as_bytes()),
        _ => EncodingKey::from_secret(private_pem.as_bytes()),
    }
    .unwrap();
    let mut header = Header::new(alg);
    header.typ = typ.map(str::to_owned);
    header.kid = kid.map(str::to_owned);
    encode(&header, claims, &key).unwrap()
}

fn clock() -> ManualClock {
    ManualClock::new(NOW * MICROS_PER_SECOND)
}

fn pinned(algorithm: JwtAlgorithm, public_pem: &str, clock: &ManualClock) -> JwtProvider {
    let mut config =
        JwtConfig::new(KeySource::Pinned { pem: public_pem.to_owned() }, vec![algorithm], ISSUER, AUDIENCE, "at+jwt");
    config.user_claim = Some("user".into());
    JwtProvider::new(config, Arc::new(clock.clone())).unwrap()
}

fn refusal(provider: &JwtProvider, token: &str) -> Refusal {
    match provider.verify(token) {
        Ok(identity) => panic!("accepted: {identity:?}"),
        Err(e) => {
            assert!(!e.to_string().contains(token), "an error never repeats the credential");
            e.kind
        }
    }
}

fn b64(value: &Value) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(serde_json::to_vec(value).unwrap())
}

#[test]
fn a_valid_token_of_each_algorithm_names_its_principal_and_expiry() {
    let (rsa, _) = rsa_keys();
    let ec = rcgen_pair(&rcgen::PKCS_ECDSA_P256_SHA256);
    let ed = rcgen_pair(&rcgen::PKCS_ED25519);
    let clock = clock();
    for (algorithm, library, pair) in [
        (JwtAlgorithm::Rs256, Algorithm::RS256, rsa),
        (JwtAlgorithm::Es256, Algorithm::ES256, &ec),
        (JwtAlgorithm::EdDsa, Algorithm::EdDSA, &ed),
    ] {
        let provider = pinned(algorithm, &pair.public_pem, &clock);
        let token = sign(library, &pair.private_pem, &claims(), Some("at+jwt"), None);
        let identity = provider.verify(&token).unwrap_or_else(|e| panic!("{}: {e}", algorithm.name()));
        assert_eq!(identity.principal, Principal::new("support-1", Some("alice")).unwrap());
        assert_eq!(identity.expires_at, Some((NOW + 300) * MICROS_PER_SECOND));
        assert_eq!(identity.issuer.as_deref(), Some(ISSUER));
        // `application/at+jwt` is the same type.
        let typed = sign(library, &pair.private_pem, &claims(), Some("application/AT+JWT"), None);
        assert!(provider.verify(&typed).is_ok());
    }
}

#[test]
fn every_listed_forgery_and_mismatch_is_refused() {
    let (rsa, other) = rsa_keys();
    let clock = clock();
    let provider = pinned(JwtAlgorithm::Rs256, &rsa.public_pem, &clock);
    let with = |change: &dyn Fn(&mut Value)| {
        let mut c = claims();
        change(&mut c);
        c
    };
    let good = sign(Algorithm::RS256, &rsa.private_pem, &claims(), Some("at+jwt"), None);
    let [head, _, signature] = good.split('.').collect::<Vec<_>>()[..] else { panic!() };
    let tampered = format!("{head}.{}.{signature}", b64(&with(&|c| c["sub"] = json!("admin"))));
    let none = format!("{}.{}.", b64(&json!({"alg": "none", "typ": "at+jwt"})), b64(&claims()));
    let none_signed = format!("{}.{}.{signature}", b64(&json!({"alg": "none", "typ": "at+jwt"})), b64(&claims()));
    // HS/RS confusion: HMAC over the token with the public key's PEM as the secret.
    let confused = sign(Algorithm::HS256, &rsa.public_pem, &claims(), Some("at+jwt"), None);

    let cases: Vec<(&str, String, Refusal)> = vec![
        (
            "forged: another key's signature",
            sign(Algorithm::RS256, &other.private_pem, &claims(), Some("at+jwt"), None),
            Refusal::Signature,
        ),
        ("forged: payload changed after signing", tampered, Refusal::Signature),
        ("alg none, empty signature", none, Refusal::Algorithm),
        ("alg none, a signature attached", none_signed, Refusal::Algorithm),
        ("HS256 with the public key as secret", confused, Refusal::Algorithm),
        (
            "wrong audience",
            sign(
                Algorithm::RS256,
                &rsa.private_pem,
                &with(&|c| c["aud"] = json!("warden-staging")),
                Some("at+jwt"),
                None,
            ),
            Refusal::Audience,
        ),
        (
            "audience as a substring",
            sign(
                Algorithm::RS256,
                &rsa.private_pem,
                &with(&|c| c["aud"] = json!("warden-extra warden")),
                Some("at+jwt"),
                None,
            ),
            Refusal::Audience,
        ),
        (
            "no audience",
            sign(
                Algorithm::RS256,
                &rsa.private_pem,
                &with(&|c| {
                    c.as_object_mut().unwrap().remove("aud");
                }),
                Some("at+jwt"),
                None,
            ),
            Refusal::Audience,
        ),
        (
            "wrong issuer",
            sign(
                Algorithm::RS256,
                &rsa.private_pem,
                &with(&|c| c["iss"] = json!("https://id.example.com/tenant-2")),
                Some("at+jwt"),
                None,
            ),
            Refusal::Issuer,
        ),
        (
            "issuer with a trailing slash",
            sign(
                Algorithm::RS256,
                &rsa.private_pem,
                &with(&|c| c["iss"] = json!(format!("{ISSUER}/"))),
                Some("at+jwt"),
                None,
            ),
            Refusal::Issuer,
        ),
        (
            "no issuer",
            sign(
                Algorithm::RS256,
                &rsa.private_pem,
                &with(&|c| {
                    c.as_object_mut().unwrap().remove("iss");
                }),
                Some("at+jwt"),
                None,
            ),
            Refusal::MissingClaim,
        ),
        (
            "an ID token (typ JWT)",
            sign(Algorithm::RS256, &rsa.private_pem, &claims(), Some("JWT"), None),
            Refusal::TokenType,
        ),
        ("no typ", sign(Algorithm::RS256, &rsa.private_pem, &claims(), None, None), Refusal::TokenType),
        (
            "no exp",
            sign(
                Algorithm::RS256,
                &rsa.private_pem,
                &with(&|c| {
                    c.as_object_mut().unwrap().remove("exp");
                }),
                Some("at+jwt"),
                None,
            ),
            Refusal::MissingClaim,
        ),
        (
            "exp as a string",
            sign(Algorithm::RS256, &rsa.private_pem, &with(&|c| c["exp"] = json!("1800000300")), Some("at+jwt"), None),
            Refusal::MissingClaim,
        ),
        (
            "expired past the leeway",
            sign(Algorithm::RS256, &rsa.private_pem, &with(&|c| c["exp"] = json!(NOW - 61)), Some("at+jwt"), None),
            Refusal::Expired,
        ),
        (
            "not valid yet",
            sign(Algorithm::RS256, &rsa.private_pem, &with(&|c| c["nbf"] = json!(NOW + 61)), Some("at+jwt"), None),
            Refusal::NotYetValid,
        ),
        (
            "no subject",
            sign(Algorithm::RS256, &rsa.private_pem, &with(&|c| c["sub"] = json!("  ")), Some("at+jwt"), None),
            Refusal::MissingClaim,
        ),
        ("two parts", "a.b".to_owned(), Refusal::Malformed),
        ("four parts", format!("{good}.x"), Refusal::Malformed),
    ];
    for (name, token, expected) in cases {
        assert_eq!(refusal(&provider, &token), expected, "{name}");
    }
}

#[test]
fn expiry_is_checked_against_the_provider_clock_with_sixty_seconds_of_leeway() {
    let (rsa, _) = rsa_keys();
    let clock = clock();
    let provider = pinned(JwtAlgorithm::Rs256, &rsa.public_pem, &clock);
    let token = sign(Algorithm::RS256, &rsa.private_pem, &claims(), Some("at+jwt"), None);
    clock.set((NOW + 300 + 60) * MICROS_PER_SECOND);
    assert!(provider.verify(&token).is_ok(), "exp + leeway is still valid");
    clock.advance(1);
    assert_eq!(refusal(&provider, &token), Refusal::Expired, "one microsecond later it is not");
}

#[test]
fn nbf_is_checked_with_the_same_leeway_at_the_instant_and_one_microsecond_before() {
    let (rsa, _) = rsa_keys();
    let clock = clock();
    let provider = pinned(JwtAlgorithm::Rs256, &rsa.public_pem, &clock);
    let mut early = claims();
    early["nbf"] = json!(NOW + 60);
    let token = sign(Algorithm::RS256, &rsa.private_pem, &early, Some("at+jwt"), None);
    assert!(provider.verify(&token).is_ok(), "nbf - leeway is already valid");
    clock.set(NOW * MICROS_PER_SECOND - 1);
    assert_eq!(refusal(&provider, &token), Refusal::NotYetValid, "one microsecond earlier it is not");
}

#[test]
fn a_single_audience_string_must_equal_the_configured_audience() {
    let (rsa, _) = rsa_keys();
    let clock = clock();
    let provider = pinned(JwtAlgorithm::Rs256, &rsa.public_pem, &clock);
    let mut one = claims();
    one["aud"] = json!(AUDIENCE);
    assert!(provider.verify(&sign(Algorithm::RS256, &rsa.private_pem, &one, Some("at+jwt"), None)).is_ok());
    one["aud"] = json!(format!("{AUDIENCE} "));
    let near = sign(Algorithm::RS256, &rsa.private_pem, &one, Some("at+jwt"), None);
    assert_eq!(refusal(&provider, &near), Refusal::Audience);
}

#[test]
fn a_numeric_date_that_is_not_an_integer_is_refused_as_such() {
    let (rsa, _) = rsa_keys();
    let clock = clock();
    let provider = pinned(JwtAlgorithm::Rs256, &rsa.public_pem, &clock);
    for (claim, value, message) in [
        ("exp", json!(1_800_000_300.5), "exp is not an integer NumericDate"),
        ("exp", json!(true), "exp is not an integer NumericDate"),
        ("nbf", json!(1.0e9), "nbf is not an integer NumericDate"),
        ("exp", json!(u64::MAX), "exp is out of range"),
    ] {
        let mut changed = claims();
        changed[claim] = value.clone();
        let token = sign(Algorithm::RS256, &rsa.private_pem, &changed, Some("at+jwt"), None);
        let error = provider.verify(&token).unwrap_err();
        assert_eq!(
            (error.kind, error.to_string().contains(message)),
            (Refusal::MissingClaim, true),
            "{value}: {error}"
        );
    }
}

#[test]
fn a_provider_is_shown_by_issuer_audience_and_algorithms_only() {
    let (rsa, _) = rsa_keys();
    let shown = format!("{:?}", pinned(JwtAlgorithm::Rs256, &rsa.public_pem, &clock()));
    assert!(shown.starts_with("JwtProvider {"), "{shown}");
    for part in [ISSUER, AUDIENCE, "Rs256"] {
        assert!(shown.contains(part), "{part} missing: {shown}");
    }
    assert!(!shown.contains("BEGIN") && !shown.contains("key"), "{shown}");
}

#[test]
fn the_allow_list_is_never_taken_from_the_token() {
    let (rsa, _) = rsa_keys();
    let ec = rcgen_pair(&rcgen::PKCS_ECDSA_P256_SHA256);
    let clock = clock();
    // An ES256 token presented to an RS256-only provider is refused before any key is tried.
    let provider = pinned(JwtAlgorithm::Rs256, &rsa.public_pem, &clock);
    let token = sign(Algorithm::ES256, &ec.private_pem, &claims(), Some("at+jwt"), None);
    assert_eq!(refusal(&provider, &token), Refusal::Algorithm);
    // Configuration mistakes are refused before a token is seen.
    let config =
        |key: KeySource, algorithms: Vec<JwtAlgorithm>| JwtConfig::new(key, algorithms, ISSUER, AUDIENCE, "at+jwt");
    let arc = Arc::new(clock.clone());
    assert!(JwtProvider::new(config(KeySource::Pinned { pem: rsa.public_pem.clone() }, vec![]), arc.clone()).is_err());
    assert!(JwtProvider::new(
        config(KeySource::Pinned { pem: rsa.public_pem.clone() }, vec![JwtAlgorithm::Rs256, JwtAlgorithm::Es256]),
        arc.clone()
    )
    .is_err());
    assert!(JwtProvider::new(
        config(KeySource::Pinned { pem: rsa.public_pem.clone() }, vec![JwtAlgorithm::Es256]),
        arc.clone()
    )
    .is_err());
    assert!(JwtProvider::new(
        config(KeySource::Jwks { url: "http://id.example.com/jwks".into(), ca_certs: None }, vec![JwtAlgorithm::Rs256]),
        arc.clone()
    )
    .is_err());
    let mut empty_issuer = config(KeySource::Pinned { pem: rsa.public_pem.clone() }, vec![JwtAlgorithm::Rs256]);
    empty_issuer.issuer = " ".into();
    assert!(JwtProvider::new(empty_issuer, arc).is_err());
    assert_eq!(JwtAlgorithm::parse("none"), None);
    assert_eq!(JwtAlgorithm::parse("HS256"), None);
}

#[test]
fn the_header_decides_decline_or_refusal() {
    let (rsa, _) = rsa_keys();
    let clock = clock();
    let provider = pinned(JwtAlgorithm::Rs256, &rsa.public_pem, &clock);
    let token = sign(Algorithm::RS256, &rsa.private_pem, &claims(), Some("at+jwt"), None);
    let context = |headers: &'static [(String, String)]| IdentityContext {
        headers,
        ..IdentityContext::new("stripe.refund", "production")
    };
    assert_eq!(provider.resolve(&context(&[])).unwrap(), None, "no header: a decline");
    let bearer: &'static [(String, String)] =
        Box::leak(Box::new([("Authorization".to_owned(), format!("bearer {token}"))]));
    assert_eq!(provider.resolve(&context(bearer)).unwrap().unwrap().principal.agent, "support-1");
    let basic: &'static [(String, String)] =
        Box::leak(Box::new([("authorization".to_owned(), format!("Basic {token}"))]));
    assert_eq!(provider.resolve(&context(basic)).unwrap_err().kind, Refusal::Malformed, "present and wrong: a refusal");
}

#[test]
fn static_and_header_providers_say_who_without_verifying() {
    let fixed = StaticProvider::new(Principal::new("dev-agent", None).unwrap(), Some(5));
    let cx = IdentityContext::new("x.y", "production");
    let identity = fixed.resolve(&cx).unwrap().unwrap();
    assert_eq!((identity.principal.agent.as_str(), identity.expires_at), ("dev-agent", Some(5)));

    let provider = HeaderProvider::new("x-agent", Some("x-user"), Some("proxy")).unwrap();
    assert_eq!(provider.resolve(&cx).unwrap(), None);
    let headers = [("X-Agent".to_owned(), " support-1 ".to_owned()), ("x-user".to_owned(), "  ".to_owned())];
    let identity = provider.resolve(&IdentityContext { headers: &headers, ..cx }).unwrap().unwrap();
    assert_eq!(identity.principal, Principal::new("support-1", None).unwrap(), "trimmed; a blank user is absent");
    assert!(HeaderProvider::new(" ", None, None).is_err());
}

fn jwk(pair: &KeyPair, kid: &str, extra: Value) -> Value {
    let key = EncodingKey::from_rsa_pem(pair.private_pem.as_bytes()).unwrap();
    let mut value = serde_json::to_value(Jwk::from_encoding_key(&key, Algorithm::RS256).unwrap()).unwrap();
    value["kid"] = json!(kid);
    for (k, v) in extra.as_object().unwrap() {
        value[k] = v.clone();
    }
    value
}

/// A P-256 public key as a JWK with a kid and no `alg`.
fn ec_jwk_without_alg(kid: &str) -> Value {
    let pair = rcgen_pair(&rcgen::PKCS_ECDSA_P256_SHA256);
    let key = EncodingKey::from_ec_pem(pair.private_pem.as_bytes()).unwrap();
    let mut value = serde_json::to_value(Jwk::from_encoding_key(&key, Algorithm::ES256).unwrap()).unwrap();
    value.as_object_mut().unwrap().remove("alg");
    value["kid"] = json!(kid);
    value
}

fn jwks_provider(server: &Server, ca: &TestCa, clock: &ManualClock) -> JwtProvider {
    let url = server.https_url("localhost", "/.well-known/jwks.json").to_string();
    let config = JwtConfig::new(
        KeySource::Jwks { url, ca_certs: Some(ca.pem_path.clone()) },
        vec![JwtAlgorithm::Rs256],
        ISSUER,
        AUDIENCE,
        "at+jwt",
    );
    JwtProvider::new(config, Arc::new(clock.clone())).unwrap()
}

fn serve_json(body: Value) -> impl Fn(support::Conn, &support::Recorded) -> Option<support::Conn> + Send + Sync {
    let bytes = serde_json::to_vec(&body).unwrap();
    move |mut conn, _| {
        conn.send(&response("200 OK", &[("content-type", "application/json")], &bytes));
        Some(conn)
    }
}

#[test]
fn a_jwk_set_over_https_verifies_by_kid_and_refetches_at_most_once_per_interval() {
    let (rsa, other) = rsa_keys();
    let ca = TestCa::new();
    let set = json!({"keys": [
        jwk(rsa, "k1", json!({"use": "sig", "alg": "RS256"})),
        jwk(other, "enc", json!({"use": "enc"})),
        jwk(other, "k3", json!({"alg": "RS512"})),
        {"kid": "junk", "kty": "RSA"},
        ec_jwk_without_alg("ec")
    ]});
    let server = Server::https(&ca.leaf(&["localhost"]), serve_json(set));
    let clock = clock();
    let provider = jwks_provider(&server, &ca, &clock);
    let token = sign(Algorithm::RS256, &rsa.private_pem, &claims(), Some("at+jwt"), Some("k1"));
    assert_eq!(provider.verify(&token).unwrap().principal.agent, "support-1");
    assert_eq!(server.requests().len(), 1);
    assert!(provider.verify(&token).is_ok());
    assert_eq!(server.requests().len(), 1, "a known kid is served from the cache");

    let encryption_key = sign(Algorithm::RS256, &other.private_pem, &claims(), Some("at+jwt"), Some("enc"));
    assert_eq!(refusal(&provider, &encryption_key), Refusal::Key, "a key for encryption never verifies");
    let other_alg = sign(Algorithm::RS256, &other.private_pem, &claims(), Some("at+jwt"), Some("k3"));
    assert_eq!(refusal(&provider, &other_alg), Refusal::Key, "a key that constrains itself to RS512");
    let no_kid = sign(Algorithm::RS256, &rsa.private_pem, &claims(), Some("at+jwt"), None);
    assert_eq!(refusal(&provider, &no_kid), Refusal::Key);
    let forged = sign(Algorithm::RS256, &other.private_pem, &claims(), Some("at+jwt"), Some("k1"));
    assert_eq!(refusal(&provider, &forged), Refusal::Signature);
    // An EC key that names no algorithm, under the kid of an RS256 token: the key does not fit.
    let misfit = sign(Algorithm::RS256, &rsa.private_pem, &claims(), Some("at+jwt"), Some("ec"));
    let error = provider.verify(&misfit).unwrap_err();
    assert_eq!(error.kind, Refusal::Key);
    assert!(error.to_string().contains("the verification key does not fit the token's algorithm"), "{error}");
    assert_eq!(server.requests().len(), 1, "unknown kids inside the interval fetch nothing");
    clock.advance(30 * MICROS_PER_SECOND - 1);
    let _ = provider.verify(&encryption_key);
    assert_eq!(server.requests().len(), 1, "one microsecond before the interval has passed: no fetch");
    clock.advance(1);
    let _ = provider.verify(&encryption_key);
    assert_eq!(server.requests().len(), 2, "one refetch once the interval has passed");
    let _ = provider.verify(&other_alg);
    assert_eq!(server.requests().len(), 2);
    assert!(server.requests().iter().all(|r| r.method == "GET" && r.header("authorization").is_none()));
}

#[test]
fn a_redirecting_or_ambiguous_jwk_set_is_refused() {
    let (rsa, _) = rsa_keys();
    let ca = TestCa::new();
    let clock = clock();
    let token = sign(Algorithm::RS256, &rsa.private_pem, &claims(), Some("at+jwt"), Some("k1"));

    let redirect = Server::https(&ca.leaf(&["localhost"]), |mut conn, _| {
        conn.send(&response("302 Found", &[("location", "https://evil.example.com/jwks.json")], b""));
        Some(conn)
    });
    assert_eq!(refusal(&jwks_provider(&redirect, &ca, &clock), &token), Refusal::KeySet);
    assert_eq!(redirect.requests().len(), 1, "the redirect was not followed");

    let duplicate = Server::https(
        &ca.leaf(&["localhost"]),
        serve_json(json!({"keys": [jwk(rsa, "k1", json!({})), jwk(rsa, "k1", json!({}))]})),
    );
    assert_eq!(refusal(&jwks_provider(&duplicate, &ca, &clock), &token), Refusal::KeySet);

    let failing = Server::https(&ca.leaf(&["localhost"]), |mut conn, _| {
        conn.send(&response("500 Internal Server Error", &[], b"{}"));
        Some(conn)
    });
    assert_eq!(refusal(&jwks_provider(&failing, &ca, &clock), &token), Refusal::KeySet);
}
