//! An RFC 3161 Time-Stamp Protocol client and an offline verifier of its tokens.
//!
//! [`TsaClient::timestamp`] sends a `TimeStampReq` (a SHA-256 message imprint of a checkpoint's
//! note bytes, a random nonce, `certReq` true) as `application/timestamp-query` through the
//! sights' bounded, no-redirect HTTP client ([`crate::http::post`]), refuses any status
//! but granted or grantedWithMods, checks that the token's `TSTInfo` repeats the request's
//! imprint and nonce, and returns the token (a CMS `ContentInfo`, DER) to store beside the
//! checkpoint. [`verify`] checks a stored token offline against the note bytes and the TSA's
//! certificate: the imprint, the signed attributes (content type `id-ct-TSTInfo`, the message
//! digest of the `TSTInfo`) and the TSA's signature over them (RSA PKCS#1 v1.5 with SHA-256,
//! SHA-384 or SHA-512; ECDSA P-256 or P-384), the certificate's `timeStamping` extended key
//! usage and its validity at `genTime`.
//!
//! The DER types are RustCrypto's (`x509-tsp`, `cms`, `x509-cert`, `der`); the signature is
//! checked with `ring`. A `genTime` with fractional seconds is refused as malformed: the stable
//! `x509-tsp` decodes GeneralizedTime the RFC 5280 way, to the second (`openssl ts` writes
//! none unless `clock_precision_digits` is set).

use std::time::Duration;

use cms::cert::x509::ext::pkix::{ExtendedKeyUsage, SubjectKeyIdentifier};
use cms::cert::x509::spki::AlgorithmIdentifier;
use cms::cert::x509::Certificate;
use cms::content_info::ContentInfo;
use cms::signed_data::{SignedData, SignerIdentifier, SignerInfo};
use der::asn1::{Int, ObjectIdentifier, OctetString};
use der::{Any, Decode, DecodePem, Encode, Tag, Tagged};
use sha2::Digest;
use x509_tsp::{MessageImprint, TimeStampReq, TimeStampResp, TspVersion, TstInfo};

use crate::evidence::anchor::{
    remedy, AnchorError, AnchorProvider, AnchorReceipt, HttpTarget, SignedCheckpoint, KIND_RFC3161,
};

/// The media type of a request (RFC 3161 §3.4).
pub const QUERY_CONTENT_TYPE: &str = "application/timestamp-query";

/// The bytes of the random nonce sent with each request.
const NONCE_BYTES: usize = 16;
/// The longest `statusString` text quoted in a refusal.
const STATUS_TEXT_CHARS: usize = 200;

const ID_SIGNED_DATA: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.7.2");
const ID_CT_TST_INFO: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.9.16.1.4");
const ID_CONTENT_TYPE: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.9.3");
const ID_MESSAGE_DIGEST: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.9.4");
const ID_SHA256: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.16.840.1.101.3.4.2.1");
const ID_SHA384: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.16.840.1.101.3.4.2.2");
const ID_SHA512: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.16.840.1.101.3.4.2.3");
const RSA_ENCRYPTION: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.1.1");
const SHA256_WITH_RSA: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.1.11");
const SHA384_WITH_RSA: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.1.12");
const SHA512_WITH_RSA: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.1.13");
const EC_PUBLIC_KEY: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.2.1");
const ECDSA_WITH_SHA256: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.4.3.2");
const ECDSA_WITH_SHA384: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.4.3.3");
const CURVE_P256: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.3.1.7");
const CURVE_P384: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.132.0.34");
const ID_KP_TIME_STAMPING: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.6.1.5.5.7.3.8");
const ID_CE_EXT_KEY_USAGE: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.37");
const ID_CE_SUBJECT_KEY_ID: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.14");

/// Why a time-stamp could not be had or a token was refused. `code` is one of `malformed`,
/// `rejected`, `imprint_mismatch`, `nonce_mismatch`, `untrusted`, `unsupported`,
/// `certificate_invalid`, or the HTTP client's (`network_error`, `timeout`, `redirect_refused`,
/// `response_too_large`, `upstream_error`, `invalid_response`, `aborted`,
/// `configuration_invalid`). The message never carries a URL, a header or a credential.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct TsaError {
    /// The kind of failure.
    pub code: &'static str,
    /// What happened, in one line.
    pub message: String,
}

impl TsaError {
    fn new(code: &'static str, message: impl Into<String>) -> TsaError {
        TsaError { code, message: message.into() }
    }
}

fn malformed(what: &str) -> TsaError {
    TsaError::new("malformed", format!("the time-stamp {what} is not well-formed DER of its RFC 3161 type"))
}

/// One `TimeStampReq`, kept to check the answer against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimeStampRequest {
    der: Vec<u8>,
    imprint: [u8; 32],
    nonce: Int,
}

impl TimeStampRequest {
    /// The request, DER, as it is posted.
    pub fn der(&self) -> &[u8] {
        &self.der
    }

    /// The SHA-256 of the stamped bytes.
    pub fn imprint(&self) -> &[u8; 32] {
        &self.imprint
    }

    /// The nonce, as the INTEGER's big-endian content bytes.
    pub fn nonce(&self) -> &[u8] {
        self.nonce.as_bytes()
    }
}

/// A `TimeStampReq` for `note`: version 1, a SHA-256 imprint of the bytes, a fresh random
/// 128-bit nonce, no policy, `certReq` true.
pub fn request(note: &[u8]) -> Result<TimeStampRequest, TsaError> {
    let mut nonce = [0u8; NONCE_BYTES];
    getrandom::fill(&mut nonce)
        .map_err(|e| TsaError::new("configuration_invalid", format!("no randomness for a time-stamp nonce: {e}")))?;
    // A positive INTEGER of exactly NONCE_BYTES content bytes: the top bit clear (not negative),
    // the next one set (no leading zero byte to strip).
    nonce[0] = (nonce[0] & 0x7f) | 0x40;
    request_with_nonce(note, &nonce)
}

fn request_with_nonce(note: &[u8], nonce: &[u8]) -> Result<TimeStampRequest, TsaError> {
    let internal = |_| TsaError::new("malformed", "the time-stamp request could not be encoded");
    let imprint: [u8; 32] = sha2::Sha256::digest(note).into();
    let nonce = Int::new(nonce).map_err(internal)?;
    let req = TimeStampReq {
        version: TspVersion::V1,
        message_imprint: MessageImprint {
            hash_algorithm: AlgorithmIdentifier { oid: ID_SHA256, parameters: Some(Any::null()) },
            hashed_message: OctetString::new(imprint.to_vec()).map_err(internal)?,
        },
        req_policy: None,
        nonce: Some(nonce.clone()),
        cert_req: true,
        extensions: None,
    };
    Ok(TimeStampRequest { der: req.to_der().map_err(internal)?, imprint, nonce })
}

/// A granted time-stamp: the token to keep and what its `TSTInfo` says (not yet verified
/// against a TSA certificate unless the client was given one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stamped {
    /// The `TimeStampToken` (a CMS `ContentInfo`), DER.
    pub token: Vec<u8>,
    /// Its `genTime` (UTC).
    pub gen_time: time::OffsetDateTime,
    /// Its serial number, hex.
    pub serial: String,
}

/// Check a `TimeStampResp` (DER) against the request it answers and return its token: the
/// status must be granted or grantedWithMods, the token a SignedData over a `TSTInfo` whose
/// imprint and nonce are the request's. The signature is not checked here (see [`verify`];
/// [`TsaClient::trust`] makes the client check it too).
pub fn parse_response(body: &[u8], request: &TimeStampRequest) -> Result<Stamped, TsaError> {
    let response = TimeStampResp::from_der(body).map_err(|_| malformed("response"))?;
    // PKIStatus as its INTEGER value (the enum is cmpv2's, a dependency of x509-tsp's).
    let status = response.status.status as u8;
    if status > 1 {
        let mut message = format!("the time-stamp authority refused the request (status {})", status_name(status));
        if let Some(info) = response.status.fail_info {
            message += &format!(", failInfo bits {:#x}", info.bits());
        }
        if let Some(text) = response.status.status_string.as_ref() {
            let joined: Vec<&str> = text.iter().map(|line| line.as_str()).collect();
            let shown = one_line(&joined.join(" "));
            if !shown.is_empty() {
                message += &format!(": {shown}");
            }
        }
        return Err(TsaError::new("rejected", message));
    }
    let token = response
        .time_stamp_token
        .ok_or_else(|| TsaError::new("malformed", "the time-stamp authority granted the request but sent no token"))?;
    let token_der = token.to_der().map_err(|_| malformed("token"))?;
    let parsed = Token::parse(&token_der)?;
    parsed.check_imprint_sha256(&request.imprint)?;
    if parsed.info.nonce.as_ref() != Some(&request.nonce) {
        return Err(TsaError::new(
            "nonce_mismatch",
            "the time-stamp token's nonce is not the request's (a replayed or misdirected answer)",
        ));
    }
    let gen_time = gen_time(&parsed.info)?;
    Ok(Stamped { token: token_der, gen_time, serial: hex::encode(parsed.info.serial_number.as_bytes()) })
}

fn gen_time(info: &TstInfo) -> Result<time::OffsetDateTime, TsaError> {
    i64::try_from(info.gen_time.to_unix_duration().as_secs())
        .ok()
        .and_then(|secs| time::OffsetDateTime::from_unix_timestamp(secs).ok())
        .ok_or_else(|| malformed("TSTInfo's genTime"))
}

fn status_name(status: u8) -> &'static str {
    match status {
        0 => "granted",
        1 => "grantedWithMods",
        2 => "rejection",
        3 => "waiting",
        4 => "revocationWarning",
        5 => "revocationNotification",
        _ => "keyUpdateWarning",
    }
}

/// At most [`STATUS_TEXT_CHARS`] characters of a text from the wire, on one line.
fn one_line(text: &str) -> String {
    let line: String = text.chars().map(|c| if c.is_control() { ' ' } else { c }).take(STATUS_TEXT_CHARS).collect();
    line.trim().to_owned()
}

/// A token's parts: the SignedData and the `TSTInfo` it carries, with the `TSTInfo`'s DER.
struct Token {
    signed: SignedData,
    info: TstInfo,
    info_der: Vec<u8>,
}

impl Token {
    fn parse(token_der: &[u8]) -> Result<Token, TsaError> {
        let content = ContentInfo::from_der(token_der).map_err(|_| malformed("token"))?;
        if content.content_type != ID_SIGNED_DATA {
            return Err(TsaError::new("malformed", "the time-stamp token is not a CMS SignedData"));
        }
        let signed_der = content.content.to_der().map_err(|_| malformed("token"))?;
        let signed = SignedData::from_der(&signed_der).map_err(|_| malformed("token's SignedData"))?;
        if signed.encap_content_info.econtent_type != ID_CT_TST_INFO {
            return Err(TsaError::new("malformed", "the time-stamp token's content is not a TSTInfo"));
        }
        let econtent = signed
            .encap_content_info
            .econtent
            .as_ref()
            .filter(|any| any.tag() == Tag::OctetString)
            .ok_or_else(|| TsaError::new("malformed", "the time-stamp token carries no TSTInfo"))?;
        let info_der = econtent.value().to_vec();
        let info = TstInfo::from_der(&info_der).map_err(|_| malformed("TSTInfo"))?;
        Ok(Token { signed, info, info_der })
    }

    fn check_imprint_sha256(&self, expected: &[u8; 32]) -> Result<(), TsaError> {
        let imprint = &self.info.message_imprint;
        if imprint.hash_algorithm.oid != ID_SHA256 || imprint.hashed_message.as_bytes() != expected {
            return Err(TsaError::new(
                "imprint_mismatch",
                "the time-stamp token's message imprint is not the SHA-256 of these bytes (it stamps something else)",
            ));
        }
        Ok(())
    }
}

/// What a verified token says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimeStamp {
    /// The `genTime`: the TSA says the stamped bytes existed no later than this (UTC).
    pub gen_time: time::OffsetDateTime,
    /// The token's serial number, hex (the INTEGER's content bytes).
    pub serial: String,
    /// The TSA's policy under which the token was issued, dotted.
    pub policy: String,
    /// The nonce of the request the token answered, hex, if it carries one.
    pub nonce: Option<String>,
    /// The `accuracy` of `genTime` in microseconds, if the TSA states one.
    pub accuracy_micros: Option<u64>,
    /// The subject of the TSA certificate that signed it.
    pub tsa: String,
}

/// A TSA certificate a verifier trusts: the certificate itself (DER or PEM), not its CA. The
/// certificate must carry the `timeStamping` extended key usage.
#[derive(Debug, Clone)]
pub struct TrustedTsa {
    cert: Certificate,
}

impl TrustedTsa {
    /// Parse the certificate (DER, or PEM with a `CERTIFICATE` block).
    pub fn parse(der_or_pem: &[u8]) -> Result<TrustedTsa, TsaError> {
        let text_start = der_or_pem.iter().position(|b| !b.is_ascii_whitespace()).unwrap_or(der_or_pem.len());
        let cert = if der_or_pem[text_start..].starts_with(b"-----BEGIN") {
            let text = std::str::from_utf8(der_or_pem).map_err(|_| cert_invalid("is not UTF-8 PEM"))?;
            Certificate::from_pem(text.trim()).map_err(|_| cert_invalid("is not a PEM X.509 certificate"))?
        } else {
            Certificate::from_der(der_or_pem).map_err(|_| cert_invalid("is not a DER X.509 certificate"))?
        };
        let tbs = &cert.tbs_certificate;
        let eku = tbs
            .extensions
            .iter()
            .flatten()
            .find(|ext| ext.extn_id == ID_CE_EXT_KEY_USAGE)
            .ok_or_else(|| cert_invalid("has no extended key usage; a TSA certificate must say timeStamping"))?;
        let usages = ExtendedKeyUsage::from_der(eku.extn_value.as_bytes())
            .map_err(|_| cert_invalid("has a malformed extended key usage"))?;
        if !usages.0.contains(&ID_KP_TIME_STAMPING) {
            return Err(cert_invalid("is not for time-stamping (its extended key usage lacks timeStamping)"));
        }
        Ok(TrustedTsa { cert })
    }

    /// The certificate's subject.
    pub fn subject(&self) -> String {
        self.cert.tbs_certificate.subject.to_string()
    }

    fn identifies(&self, sid: &SignerIdentifier) -> bool {
        let tbs = &self.cert.tbs_certificate;
        match sid {
            SignerIdentifier::IssuerAndSerialNumber(id) => {
                id.issuer == tbs.issuer && id.serial_number == tbs.serial_number
            }
            SignerIdentifier::SubjectKeyIdentifier(ski) => tbs
                .extensions
                .iter()
                .flatten()
                .filter(|ext| ext.extn_id == ID_CE_SUBJECT_KEY_ID)
                .filter_map(|ext| SubjectKeyIdentifier::from_der(ext.extn_value.as_bytes()).ok())
                .any(|own| own == *ski),
        }
    }
}

fn cert_invalid(why: &str) -> TsaError {
    TsaError::new("certificate_invalid", format!("the trusted TSA certificate {why}"))
}

/// Verify a stored token offline: it stamps exactly `note` (its imprint is the SHA-256, SHA-384
/// or SHA-512 of the bytes, as the token names), and it is signed by `trusted_cert` (DER or PEM):
/// one signer, identified as that certificate, whose signed attributes name the `TSTInfo`
/// content type and its digest, and whose signature over them verifies with the certificate's
/// key. The certificate must be for time-stamping and valid at `genTime`. Neither revocation
/// nor a chain to a CA is checked.
pub fn verify(token_der: &[u8], note: &[u8], trusted_cert: &[u8]) -> Result<TimeStamp, TsaError> {
    let trusted = TrustedTsa::parse(trusted_cert)?;
    verify_with(token_der, note, &trusted)
}

/// [`verify`] with a parsed certificate.
pub fn verify_with(token_der: &[u8], note: &[u8], trusted: &TrustedTsa) -> Result<TimeStamp, TsaError> {
    let token = Token::parse(token_der)?;
    let imprint = &token.info.message_imprint;
    let hash = Hash::of(&imprint.hash_algorithm.oid).ok_or_else(|| {
        TsaError::new(
            "unsupported",
            "the time-stamp token's imprint uses a hash other than SHA-256, SHA-384 or SHA-512",
        )
    })?;
    if imprint.hashed_message.as_bytes() != hash.digest(note).as_slice() {
        return Err(TsaError::new(
            "imprint_mismatch",
            "the time-stamp token's message imprint is not the hash of these bytes (it stamps something else)",
        ));
    }

    let signers = token.signed.signer_infos.0.as_slice();
    let [signer] = signers else {
        return Err(TsaError::new(
            "malformed",
            format!("a time-stamp token has exactly one signer; this one has {}", signers.len()),
        ));
    };
    if !trusted.identifies(&signer.sid) {
        return Err(TsaError::new(
            "untrusted",
            format!(
                "the time-stamp token was not signed by the trusted TSA certificate ({}); it names another signer",
                trusted.subject()
            ),
        ));
    }
    check_signed_attributes(signer, &token.info_der)?;
    check_signature(signer, trusted)?;

    let gen_secs = token.info.gen_time.to_unix_duration().as_secs();
    let validity = &trusted.cert.tbs_certificate.validity;
    let (from, until) = (validity.not_before.to_unix_duration(), validity.not_after.to_unix_duration());
    if Duration::from_secs(gen_secs) < from || Duration::from_secs(gen_secs) > until {
        return Err(TsaError::new(
            "untrusted",
            "the time-stamp's genTime is outside the TSA certificate's validity period",
        ));
    }
    let gen_time = gen_time(&token.info)?;
    let accuracy_micros = token.info.accuracy.as_ref().map(|accuracy| {
        let part = |value: Option<i16>| u64::try_from(value.unwrap_or(0)).unwrap_or(0);
        accuracy
            .seconds
            .unwrap_or(0)
            .saturating_mul(1_000_000)
            .saturating_add(part(accuracy.millis).saturating_mul(1000))
            .saturating_add(part(accuracy.micros))
    });
    Ok(TimeStamp {
        gen_time,
        serial: hex::encode(token.info.serial_number.as_bytes()),
        policy: token.info.policy.to_string(),
        nonce: token.info.nonce.as_ref().map(|nonce| hex::encode(nonce.as_bytes())),
        accuracy_micros,
        tsa: trusted.subject(),
    })
}

/// The signed attributes name the `TSTInfo` content type and hold its digest (RFC 5652 §5.3,
/// §11.1, §11.2; RFC 3161 §2.4.2 requires signed attributes).
fn check_signed_attributes(signer: &SignerInfo, info_der: &[u8]) -> Result<(), TsaError> {
    let attrs = signer
        .signed_attrs
        .as_ref()
        .ok_or_else(|| TsaError::new("malformed", "the time-stamp token's signer has no signed attributes"))?;
    let single = |oid: ObjectIdentifier, name: &str| -> Result<&Any, TsaError> {
        let mut found = attrs.iter().filter(|attr| attr.oid == oid);
        match (found.next(), found.next()) {
            (Some(attr), None) if attr.values.len() == 1 => attr
                .values
                .iter()
                .next()
                .ok_or_else(|| TsaError::new("malformed", format!("the token's {name} attribute has no value"))),
            _ => Err(TsaError::new(
                "malformed",
                format!("the time-stamp token's signed attributes need exactly one {name} with one value"),
            )),
        }
    };
    let content_type = single(ID_CONTENT_TYPE, "content-type")?;
    if content_type.decode_as::<ObjectIdentifier>().ok() != Some(ID_CT_TST_INFO) {
        return Err(TsaError::new("malformed", "the time-stamp token's signed content type is not TSTInfo"));
    }
    let digest = single(ID_MESSAGE_DIGEST, "message-digest")?;
    let hash = Hash::of(&signer.digest_alg.oid).ok_or_else(|| {
        TsaError::new(
            "unsupported",
            "the time-stamp token is signed over a hash other than SHA-256, SHA-384 or SHA-512",
        )
    })?;
    if digest.tag() != Tag::OctetString || digest.value() != hash.digest(info_der).as_slice() {
        return Err(TsaError::new(
            "untrusted",
            "the time-stamp token's signed message digest is not the digest of its TSTInfo (the TSTInfo was altered)",
        ));
    }
    Ok(())
}

/// The signer's signature over the DER of its signed attributes, by the trusted key.
fn check_signature(signer: &SignerInfo, trusted: &TrustedTsa) -> Result<(), TsaError> {
    use ring::signature as sig;
    let spki = &trusted.cert.tbs_certificate.subject_public_key_info;
    let hash = Hash::of(&signer.digest_alg.oid);
    let algorithm: &'static dyn sig::VerificationAlgorithm = if spki.algorithm.oid == RSA_ENCRYPTION {
        let named = &signer.signature_algorithm.oid;
        match hash {
            Some(Hash::Sha256) if *named == RSA_ENCRYPTION || *named == SHA256_WITH_RSA => {
                &sig::RSA_PKCS1_2048_8192_SHA256
            }
            Some(Hash::Sha384) if *named == RSA_ENCRYPTION || *named == SHA384_WITH_RSA => {
                &sig::RSA_PKCS1_2048_8192_SHA384
            }
            Some(Hash::Sha512) if *named == RSA_ENCRYPTION || *named == SHA512_WITH_RSA => {
                &sig::RSA_PKCS1_2048_8192_SHA512
            }
            _ => return Err(unsupported_signature()),
        }
    } else if spki.algorithm.oid == EC_PUBLIC_KEY {
        let curve = spki.algorithm.parameters.as_ref().and_then(|any| any.decode_as::<ObjectIdentifier>().ok());
        let named = &signer.signature_algorithm.oid;
        match (curve, hash) {
            (Some(c), Some(Hash::Sha256)) if c == CURVE_P256 && *named == ECDSA_WITH_SHA256 => {
                &sig::ECDSA_P256_SHA256_ASN1
            }
            (Some(c), Some(Hash::Sha384)) if c == CURVE_P256 && *named == ECDSA_WITH_SHA384 => {
                &sig::ECDSA_P256_SHA384_ASN1
            }
            (Some(c), Some(Hash::Sha256)) if c == CURVE_P384 && *named == ECDSA_WITH_SHA256 => {
                &sig::ECDSA_P384_SHA256_ASN1
            }
            (Some(c), Some(Hash::Sha384)) if c == CURVE_P384 && *named == ECDSA_WITH_SHA384 => {
                &sig::ECDSA_P384_SHA384_ASN1
            }
            _ => return Err(unsupported_signature()),
        }
    } else {
        return Err(unsupported_signature());
    };
    let key = spki.subject_public_key.as_bytes().ok_or_else(|| cert_invalid("has a malformed public key"))?;
    let signed = signer.signed_attrs.as_ref().map(Encode::to_der).transpose().map_err(|_| malformed("token"))?;
    let signed = signed.unwrap_or_default();
    sig::UnparsedPublicKey::new(algorithm, key).verify(&signed, signer.signature.as_bytes()).map_err(|_| {
        TsaError::new(
            "untrusted",
            "the time-stamp token's signature does not verify with the trusted TSA certificate's key",
        )
    })
}

fn unsupported_signature() -> TsaError {
    TsaError::new(
        "unsupported",
        "the time-stamp token's signature is neither RSA PKCS#1 v1.5 (SHA-256/384/512) nor ECDSA P-256/P-384 by the trusted key",
    )
}

/// The hashes a token may name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hash {
    Sha256,
    Sha384,
    Sha512,
}

impl Hash {
    fn of(oid: &ObjectIdentifier) -> Option<Hash> {
        match *oid {
            ID_SHA256 => Some(Hash::Sha256),
            ID_SHA384 => Some(Hash::Sha384),
            ID_SHA512 => Some(Hash::Sha512),
            _ => None,
        }
    }

    fn digest(self, bytes: &[u8]) -> Vec<u8> {
        match self {
            Hash::Sha256 => sha2::Sha256::digest(bytes).to_vec(),
            Hash::Sha384 => sha2::Sha384::digest(bytes).to_vec(),
            Hash::Sha512 => sha2::Sha512::digest(bytes).to_vec(),
        }
    }
}

/// A time-stamp authority reached over HTTP(S): each [`TsaClient::timestamp`] is one POST of
/// a fresh request through the sights' bounded client.
#[derive(Debug, Clone)]
pub struct TsaClient {
    target: HttpTarget,
    trusted: Option<TrustedTsa>,
}

impl TsaClient {
    /// A client of the TSA at `target`'s URL.
    pub fn new(target: HttpTarget) -> TsaClient {
        TsaClient { target, trusted: None }
    }

    /// Also verify every token against this TSA certificate before returning it (so a token
    /// from another TSA, or one that does not verify, is an error now rather than at audit).
    pub fn trust(mut self, trusted: TrustedTsa) -> TsaClient {
        self.trusted = Some(trusted);
        self
    }

    /// Where the requests go, for messages: scheme, host, port and path (never a user name, a
    /// password or a query).
    pub fn shown(&self) -> String {
        self.target.shown()
    }

    /// Time-stamp `note`: one request, the checked token.
    pub fn timestamp(&self, note: &[u8]) -> Result<Stamped, TsaError> {
        let request = request(note)?;
        let response = self
            .target
            .post(QUERY_CONTENT_TYPE, request.der())
            .map_err(|e| TsaError { code: e.code, message: e.message })?;
        let stamped = parse_response(&response.body, &request)?;
        if let Some(trusted) = &self.trusted {
            verify_with(&stamped.token, note, trusted)?;
        }
        Ok(stamped)
    }
}

impl AnchorProvider for TsaClient {
    fn name(&self) -> String {
        format!("rfc3161 {}", self.shown())
    }

    fn anchor(&self, checkpoint: &SignedCheckpoint<'_>) -> Result<Option<AnchorReceipt>, AnchorError> {
        let shown = self.shown();
        let stamped = self.timestamp(checkpoint.note).map_err(|e: TsaError| {
            AnchorError::new(
                self.name(),
                e.code,
                format!(
                    "checkpoint {} not time-stamped: {} ({}); {}",
                    checkpoint.number,
                    e.message,
                    e.code,
                    remedy(e.code, &shown)
                ),
            )
        })?;
        let when = stamped
            .gen_time
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap_or_else(|_| stamped.gen_time.unix_timestamp().to_string());
        let description = format!(
            "RFC 3161 token for checkpoint {} from {shown}: genTime {when}, serial {}",
            checkpoint.number, stamped.serial
        );
        Ok(Some(AnchorReceipt { kind: KIND_RFC3161.to_owned(), bytes: stamped.token, description }))
    }
}

#[cfg(test)]
pub(crate) mod local_tsa;
#[cfg(test)]
mod tests;
