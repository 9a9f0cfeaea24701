//! The RFC 3161 client and verifier against `openssl ts` acting as a local TSA (a CA and a TSA
//! certificate generated per test, RSA and P-256), over a loopback HTTP server, and against
//! hand-made and damaged responses.

use std::process::Command;
use std::sync::Arc;

use proptest::prelude::*;

use super::local_tsa::{openssl_available, run, KeyKind, Pki};

use super::*;
use crate::evidence::anchor::tests::{response, Server};
use crate::evidence::anchor::{AnchorProvider, SignedCheckpoint, KIND_RFC3161};

const NOTE: &[u8] = b"warden.example/log\n12\nq0U7Zb3dQz5yCk1vJ7yB0m8Zb8mZ0l1c8Gk4Wn4bX2o=\nwarden-time 2026-01-01T00:00:00.000Z\n\n\xe2\x80\x94 warden.example/log Az3grlgtzPICa5OS8npVmf1Myq/5IZniMp+ZJurmRDeOoRDe4URYN7u5=\n";

/// The token of `openssl ts -reply` to a fresh request for `note`.
fn token_for(pki: &Pki, note: &[u8]) -> Vec<u8> {
    let request = request(note).unwrap();
    parse_response(&pki.reply(request.der()), &request).unwrap().token
}

/// A loopback TSA: each POST is answered with `openssl ts -reply` to its body.
fn tsa_server(pki: &Arc<Pki>, connections: usize) -> Server {
    let pki = Arc::clone(pki);
    Server::start(connections, move |seen| {
        let reply = pki.reply(&seen.body);
        response("200 OK", &[("content-type", "application/timestamp-reply")], &reply)
    })
}

// ---- the request --------------------------------------------------------------------------

#[test]
fn a_request_carries_a_sha256_imprint_a_fresh_positive_nonce_and_cert_req() {
    let first = request(NOTE).unwrap();
    let second = request(NOTE).unwrap();
    assert_ne!(first.nonce(), second.nonce());
    assert_eq!(first.imprint(), second.imprint());
    let parsed = TimeStampReq::from_der(first.der()).unwrap();
    assert_eq!(parsed.version, TspVersion::V1);
    assert_eq!(parsed.message_imprint.hash_algorithm.oid, ID_SHA256);
    let expected: [u8; 32] = sha2::Sha256::digest(NOTE).into();
    assert_eq!(parsed.message_imprint.hashed_message.as_bytes(), expected);
    assert!(parsed.cert_req);
    assert_eq!(parsed.req_policy, None);
    let nonce = parsed.nonce.unwrap();
    assert_eq!(nonce.as_bytes().len(), NONCE_BYTES);
    assert!(nonce.as_bytes()[0] & 0x80 == 0, "the nonce is positive");
}

// ---- refused responses --------------------------------------------------------------------

/// A TimeStampResp with `status` only (and a statusString when given).
fn status_only(status: u8, text: Option<&str>) -> Vec<u8> {
    let mut info = vec![0x02, 0x01, status];
    if let Some(text) = text {
        let mut utf8 = vec![0x0c, text.len() as u8];
        utf8.extend_from_slice(text.as_bytes());
        info.push(0x30);
        info.push(utf8.len() as u8);
        info.extend_from_slice(&utf8);
    }
    let mut pki_status = vec![0x30, info.len() as u8];
    pki_status.extend_from_slice(&info);
    let mut out = vec![0x30, pki_status.len() as u8];
    out.extend_from_slice(&pki_status);
    out
}

#[test]
fn responses_without_a_matching_granted_token_are_refused() {
    let request = request(NOTE).unwrap();
    let mut table: Vec<(&str, Vec<u8>, &str, &str)> = vec![
        ("rejection", status_only(2, None), "rejected", "status rejection"),
        ("rejection with text", status_only(2, Some("bad\nalg")), "rejected", "bad alg"),
        ("waiting", status_only(3, None), "rejected", "status waiting"),
        ("granted, no token", status_only(0, None), "malformed", "sent no token"),
        ("empty", Vec::new(), "malformed", "not well-formed"),
        ("garbage", b"<html>502 Bad Gateway</html>".to_vec(), "malformed", "not well-formed"),
        ("a bare SEQUENCE", vec![0x30, 0x00], "malformed", "not well-formed"),
        ("an endless length", vec![0x30, 0x84, 0xff, 0xff, 0xff, 0xff, 0x30], "malformed", "not well-formed"),
    ];
    if openssl_available() {
        let pki = Pki::new(KeyKind::P256, "a");
        let good = pki.reply(request.der());
        assert!(parse_response(&good, &request).is_ok());
        let other_note = super::request(b"some other bytes").unwrap();
        let replayed = super::request(NOTE).unwrap();
        let sha1 = {
            std::fs::write(pki.path("note.txt"), NOTE).unwrap();
            run(Command::new("openssl")
                .current_dir(pki.dir.path())
                .args(["ts", "-query", "-data", "note.txt", "-sha1", "-cert", "-out", "sha1.tsq"]));
            pki.reply(&std::fs::read(pki.path("sha1.tsq")).unwrap())
        };
        let mut trailing = good.clone();
        trailing.push(0);
        table.extend([
            ("a TSA refusing SHA-1", sha1, "rejected", "status rejection"),
            ("the imprint of other bytes", pki.reply(other_note.der()), "imprint_mismatch", "not the SHA-256"),
            ("another request's nonce", pki.reply(replayed.der()), "nonce_mismatch", "nonce"),
            ("truncated", good[..good.len() - 9].to_vec(), "malformed", "not well-formed"),
            ("cut to its head", good[..8].to_vec(), "malformed", "not well-formed"),
            ("trailing bytes", trailing, "malformed", "not well-formed"),
        ]);
    }
    for (name, body, code, says) in table {
        let error = parse_response(&body, &request).unwrap_err();
        assert_eq!(error.code, code, "{name}: {error}");
        assert!(error.message.contains(says), "{name}: {error}");
        assert!(!error.message.contains('\n'), "{name}: {error}");
    }
}

// ---- the round trip -----------------------------------------------------------------------

#[test]
fn a_local_tsa_stamps_a_note_over_http_and_both_verifiers_accept_the_token() {
    if !openssl_available() {
        return;
    }
    for kind in [KeyKind::Rsa, KeyKind::P256] {
        let pki = Arc::new(Pki::new(kind, "a"));
        let server = tsa_server(&pki, 2);
        let trusted = TrustedTsa::parse(&pki.tsa_pem()).unwrap();
        let client = TsaClient::new(HttpTarget::new(&server.url("/tsr")).unwrap()).trust(trusted);

        let stamped = client.timestamp(NOTE).unwrap();
        let stamp = verify(&stamped.token, NOTE, &pki.tsa_pem()).unwrap();
        assert_eq!(stamp.gen_time, stamped.gen_time);
        assert_eq!(stamp.serial, stamped.serial);
        assert_eq!(stamp.policy, "1.2.3.4.1");
        assert_eq!(stamp.accuracy_micros, Some(1_500_100));
        assert_eq!(stamp.tsa, "CN=Warden Test TSA a");
        assert_eq!(stamp.nonce.as_ref().map(String::len), Some(NONCE_BYTES * 2));
        let age = time::OffsetDateTime::now_utc() - stamp.gen_time;
        assert!(age.whole_seconds().abs() < 120, "{kind:?}: genTime {} is not now", stamp.gen_time);
        pki.openssl_verifies(&stamped.token, NOTE).unwrap_or_else(|e| panic!("{kind:?}: openssl ts -verify: {e}"));
        // The DER certificate verifies the same token.
        let der = run(Command::new("openssl")
            .current_dir(pki.dir.path())
            .args(["x509", "-in", "tsa.pem", "-outform", "DER"]));
        assert_eq!(verify(&stamped.token, NOTE, &der).unwrap(), stamp);

        // Through the provider interface: a receipt of kind rfc3161 holding the token.
        let checkpoint = SignedCheckpoint { note: NOTE, size: 12, number: 3 };
        let receipt = client.anchor(&checkpoint).unwrap().unwrap();
        assert_eq!(receipt.kind, KIND_RFC3161);
        assert!(receipt.description.starts_with("RFC 3161 token for checkpoint 3 from http://127.0.0.1:"));
        assert!(receipt.description.contains("genTime 20"), "{}", receipt.description);
        verify(&receipt.bytes, NOTE, &pki.tsa_pem()).unwrap();
        pki.openssl_verifies(&receipt.bytes, NOTE).unwrap();

        for seen in server.finish() {
            assert!(seen.head.starts_with("POST /tsr HTTP/1.1"), "{}", seen.head);
            assert_eq!(seen.header("content-type").as_deref(), Some(QUERY_CONTENT_TYPE));
            let query = TimeStampReq::from_der(&seen.body).unwrap();
            assert!(query.cert_req);
        }
    }
}

// ---- verification refusals ----------------------------------------------------------------

#[test]
fn verify_refuses_other_bytes_another_tsa_a_bad_signature_and_a_certificate_not_for_stamping() {
    if !openssl_available() {
        return;
    }
    let pki = Pki::new(KeyKind::P256, "a");
    let rsa = Pki::new(KeyKind::Rsa, "b");
    // Same names and serials as `pki`, other keys: only the signature tells them apart.
    let twin = Pki::new(KeyKind::P256, "a");
    let token = token_for(&pki, NOTE);
    let rsa_token = token_for(&rsa, NOTE);
    let mut bad_signature = token.clone();
    *bad_signature.last_mut().unwrap() ^= 0x01;
    let mut bad_rsa_signature = rsa_token.clone();
    *bad_rsa_signature.last_mut().unwrap() ^= 0x01;
    // The TSTInfo's genTime one second off (still a valid time): the signed digest no longer
    // matches.
    let info = Token::parse(&token).unwrap().info_der;
    let at = token.windows(info.len()).position(|w| w == info.as_slice()).unwrap();
    let time_at = at + info.windows(2).position(|w| w == [0x18, 0x0f]).unwrap();
    let mut bad_info = token.clone();
    let seconds_unit = time_at + 2 + 13;
    bad_info[seconds_unit] = if bad_info[seconds_unit] == b'0' { b'1' } else { b'0' };

    /// (case, token, note, trusted certificate, code, what the message says)
    type Case<'a> = (&'a str, &'a [u8], &'a [u8], Vec<u8>, &'a str, &'a str);
    let table: Vec<Case<'_>> = vec![
        ("other bytes", &token, b"warden.example/log\n13\n", pki.tsa_pem(), "imprint_mismatch", "not the hash"),
        ("another TSA", &token, NOTE, rsa.tsa_pem(), "untrusted", "names another signer"),
        ("a twin TSA", &token, NOTE, twin.tsa_pem(), "untrusted", "does not verify"),
        ("ECDSA signature flipped", &bad_signature, NOTE, pki.tsa_pem(), "untrusted", "does not verify"),
        ("RSA signature flipped", &bad_rsa_signature, NOTE, rsa.tsa_pem(), "untrusted", "does not verify"),
        ("TSTInfo altered", &bad_info, NOTE, pki.tsa_pem(), "untrusted", "TSTInfo was altered"),
        (
            "the CA, not the TSA",
            &token,
            NOTE,
            std::fs::read(pki.path("ca.pem")).unwrap(),
            "certificate_invalid",
            "extended key usage",
        ),
        ("no certificate", &token, NOTE, b"hello".to_vec(), "certificate_invalid", "not a DER X.509"),
        (
            "a broken PEM",
            &token,
            NOTE,
            b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n".to_vec(),
            "certificate_invalid",
            "PEM",
        ),
        ("a truncated token", &token[..token.len() / 2], NOTE, pki.tsa_pem(), "malformed", "not well-formed"),
        ("garbage", b"\x30\x03\x02\x01\x00", NOTE, pki.tsa_pem(), "malformed", "not well-formed"),
    ];
    assert!(verify(&token, NOTE, &pki.tsa_pem()).is_ok());
    assert!(verify(&rsa_token, NOTE, &rsa.tsa_pem()).is_ok());
    for (name, token, note, cert, code, says) in table {
        let error = verify(token, note, &cert).unwrap_err();
        assert_eq!(error.code, code, "{name}: {error}");
        assert!(error.message.contains(says), "{name}: {error}");
    }
    // openssl agrees the damaged tokens are bad.
    assert!(pki.openssl_verifies(&bad_signature, NOTE).is_err());
    assert!(pki.openssl_verifies(&bad_info, NOTE).is_err());
}

#[test]
fn a_client_trusting_one_tsa_refuses_another_tsas_token() {
    if !openssl_available() {
        return;
    }
    let pki = Arc::new(Pki::new(KeyKind::P256, "a"));
    let other = Pki::new(KeyKind::P256, "b");
    let server = tsa_server(&pki, 1);
    let client = TsaClient::new(HttpTarget::new(&server.url("/tsr")).unwrap())
        .trust(TrustedTsa::parse(&other.tsa_pem()).unwrap());
    let error = client.anchor(&SignedCheckpoint { note: NOTE, size: 12, number: 4 }).unwrap_err();
    assert_eq!(error.code, "untrusted", "{error}");
    assert!(error
        .to_string()
        .starts_with(&format!("anchor rfc3161 {}: checkpoint 4 not time-stamped", client.shown())));
    assert!(error.message.contains("trusted TSA certificate"), "{error}");
    server.finish();
}

#[test]
fn the_client_refuses_a_redirect_an_oversized_answer_and_a_rejection_over_http() {
    let big = vec![0x30u8; 100 * 1024];
    let table: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "redirect",
            response("307 Temporary Redirect", &[("location", "http://127.0.0.1:9/tsr")], b""),
            "redirect_refused",
        ),
        ("oversized", response("200 OK", &[], &big), "response_too_large"),
        (
            "streamed oversized",
            {
                let mut raw = b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\n".to_vec();
                raw.extend_from_slice(&big);
                raw
            },
            "response_too_large",
        ),
        ("rejection", response("200 OK", &[], &status_only(2, Some("policy"))), "rejected"),
        ("an HTML error page", response("200 OK", &[], b"<html>oops</html>"), "malformed"),
        ("a 503", response("503 Service Unavailable", &[], b"busy"), "upstream_error"),
    ];
    for (name, answer, code) in table {
        let server = Server::start(1, move |_| answer.clone());
        let client = TsaClient::new(HttpTarget::new(&server.url("/tsr?apikey=hunter2")).unwrap());
        let error = client.anchor(&SignedCheckpoint { note: NOTE, size: 12, number: 5 }).unwrap_err();
        assert_eq!(error.code, code, "{name}: {error}");
        let shown = error.to_string();
        assert!(shown.starts_with("anchor rfc3161 http://127.0.0.1:"), "{name}: {shown}");
        assert!(!shown.contains("hunter2"), "{name}: {shown}");
        server.finish();
    }
}

// ---- never a panic ------------------------------------------------------------------------

#[test]
fn every_truncation_and_byte_flip_of_a_real_response_is_an_error_or_a_token_never_a_panic() {
    if !openssl_available() {
        return;
    }
    let pki = Pki::new(KeyKind::P256, "a");
    let request = request(NOTE).unwrap();
    let good = pki.reply(request.der());
    let cert = pki.tsa_pem();
    for cut in 0..good.len() {
        assert!(parse_response(&good[..cut], &request).is_err(), "cut at {cut}");
    }
    let token = parse_response(&good, &request).unwrap().token;
    for at in 0..good.len() {
        let mut damaged = good.clone();
        damaged[at] ^= 0x5a;
        if let Ok(stamped) = parse_response(&damaged, &request) {
            // A flip the parser tolerates (a certificate's bytes, the signature) still has to
            // get past the verifier, which refuses it unless it touched nothing signed.
            let _ = verify(&stamped.token, NOTE, &cert);
        }
    }
    for at in 0..token.len() {
        let mut damaged = token.clone();
        damaged[at] ^= 0xff;
        let _ = verify(&damaged, NOTE, &cert);
    }
}

proptest! {
    #[test]
    fn the_response_parser_never_panics(body in proptest::collection::vec(any::<u8>(), 0..1024)) {
        let request = request(NOTE).unwrap();
        let _ = parse_response(&body, &request);
        // The same bytes inside a SEQUENCE reach the status and token parsers.
        let mut wrapped = vec![0x30, 0x82, (body.len() >> 8) as u8, body.len() as u8];
        wrapped.extend_from_slice(&body);
        let _ = parse_response(&wrapped, &request);
    }

    #[test]
    fn the_verifier_never_panics(token in proptest::collection::vec(any::<u8>(), 0..1024)) {
        let _ = verify(&token, NOTE, &token);
    }
}
