//! A test identity provider for single sign-on (`sign_in.jwt`): an ES256 key pair, its public
//! key in a file, tokens signed with its private key, and the document section naming it.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

pub const ISSUER: &str = "https://id.example.com/";
pub const AUDIENCE: &str = "warden-console";

pub struct Idp {
    encoding: jsonwebtoken::EncodingKey,
    /// The PEM public key's file.
    pub public_key: PathBuf,
}

pub fn now_seconds() -> i64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock after 1970");
    i64::try_from(since.as_secs()).expect("seconds")
}

impl Idp {
    /// A fresh key pair, its public key written to `dir/NAME.pem`.
    pub fn new(dir: &Path, name: &str) -> Idp {
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("key");
        let public_key = dir.join(format!("{name}.pem"));
        std::fs::write(&public_key, key.public_key_pem()).expect("public key");
        let encoding = jsonwebtoken::EncodingKey::from_ec_pem(key.serialize_pem().as_bytes()).expect("encoding key");
        Idp { encoding, public_key }
    }

    /// Good claims for `sub` with `groups`, from ISSUER for AUDIENCE, valid for `seconds`.
    pub fn claims(sub: &str, groups: &[&str], seconds: i64) -> Value {
        json!({"iss": ISSUER, "aud": AUDIENCE, "sub": sub, "groups": groups, "exp": now_seconds() + seconds})
    }

    /// `claims` signed with `typ` in the header: the bare compact token.
    pub fn sign(&self, claims: &Value, typ: &str) -> String {
        let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
        header.typ = Some(typ.into());
        jsonwebtoken::encode(&header, claims, &self.encoding).expect("sign")
    }

    /// A `warden/v1` document whose `sign_in` names this provider (token type JWT, the token in
    /// `header`, roles from `groups`), written to `dir/sign-in.yaml`.
    pub fn document(&self, dir: &Path, header: &str) -> PathBuf {
        let text = format!(
            "schema: warden/v1\nactions: {{}}\nsign_in:\n  jwt:\n    issuer: {ISSUER}\n    audience: {AUDIENCE}\n    \
             algorithms: [ES256]\n    public_key_file: {}\n    token_type: JWT\n    header: {header}\n    \
             roles_claim: groups\n",
            self.public_key.display()
        );
        let path = dir.join("sign-in.yaml");
        std::fs::write(&path, text).expect("write the document");
        path
    }
}
