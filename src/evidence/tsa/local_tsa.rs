//! A local time-stamp authority for tests: a CA and a TSA certificate generated per test (RSA
//! or P-256, extendedKeyUsage critical timeStamping) and `openssl ts -reply` answering queries.
//! Shared by the library's RFC 3161 tests (`tests.rs` beside it) and the integration tests of
//! wired anchors (`tests/anchors.rs`, which includes this file by path).
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

pub fn openssl_available() -> bool {
    let found = Command::new("openssl").arg("version").output().is_ok_and(|out| out.status.success());
    if !found {
        eprintln!("skipped: `openssl` is not installed, so no local TSA can be run");
    }
    found
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    Rsa,
    P256,
}

/// A CA, a TSA certificate it issued (extendedKeyUsage critical timeStamping) and an
/// `openssl ts` configuration, in a directory of their own.
pub struct Pki {
    pub dir: tempfile::TempDir,
    replies: AtomicUsize,
}

pub fn run(command: &mut Command) -> Vec<u8> {
    let out = command.output().expect("run openssl");
    assert!(out.status.success(), "{command:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    out.stdout
}

impl Pki {
    pub fn new(kind: KeyKind, label: &str) -> Pki {
        let dir = tempfile::tempdir().unwrap();
        let pki = Pki { dir, replies: AtomicUsize::new(0) };
        let newkey: &[&str] = match kind {
            KeyKind::Rsa => &["-newkey", "rsa:2048"],
            KeyKind::P256 => &["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"],
        };
        std::fs::write(
            pki.path("pki.cnf"),
            "[req]\ndistinguished_name = dn\nprompt = no\n[dn]\nCN = unused\n\
             [v3_ca]\nbasicConstraints = critical, CA:TRUE\nkeyUsage = critical, keyCertSign, cRLSign\n\
             subjectKeyIdentifier = hash\n\
             [v3_tsa]\nbasicConstraints = critical, CA:FALSE\nkeyUsage = critical, digitalSignature, nonRepudiation\n\
             extendedKeyUsage = critical, timeStamping\nsubjectKeyIdentifier = hash\n\
             authorityKeyIdentifier = keyid:always\n",
        )
        .unwrap();
        let openssl = |args: &[&str]| {
            let mut command = Command::new("openssl");
            command.current_dir(pki.dir.path()).args(args);
            run(&mut command)
        };
        let ca_subject = format!("/CN=Warden Test CA {label}");
        let tsa_subject = format!("/CN=Warden Test TSA {label}");
        let mut args = vec!["req", "-x509", "-config", "pki.cnf", "-extensions", "v3_ca", "-subj", &ca_subject];
        args.extend_from_slice(newkey);
        args.extend_from_slice(&["-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2"]);
        openssl(&args);
        let mut args = vec!["req", "-new", "-config", "pki.cnf", "-subj", &tsa_subject];
        args.extend_from_slice(newkey);
        args.extend_from_slice(&["-nodes", "-keyout", "tsa.key", "-out", "tsa.csr"]);
        openssl(&args);
        openssl(&[
            "x509",
            "-req",
            "-in",
            "tsa.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-set_serial",
            "0x1001",
            "-days",
            "2",
            "-extfile",
            "pki.cnf",
            "-extensions",
            "v3_tsa",
            "-out",
            "tsa.pem",
        ]);
        std::fs::write(pki.path("tsaserial"), "01\n").unwrap();
        let dir = pki.dir.path().display();
        std::fs::write(
            pki.path("tsa.cnf"),
            format!(
                "[tsa]\ndefault_tsa = tsa_config1\n[tsa_config1]\ndir = {dir}\nserial = $dir/tsaserial\n\
                 crypto_device = builtin\nsigner_cert = $dir/tsa.pem\ncerts = $dir/ca.pem\n\
                 signer_key = $dir/tsa.key\nsigner_digest = sha256\ndefault_policy = 1.2.3.4.1\n\
                 other_policies = 1.2.3.4.5\ndigests = sha256, sha384, sha512\n\
                 accuracy = secs:1, millisecs:500, microsecs:100\nclock_precision_digits = 0\n\
                 ordering = yes\ntsa_name = yes\ness_cert_id_chain = no\ness_cert_id_alg = sha256\n"
            ),
        )
        .unwrap();
        pki
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub fn tsa_pem(&self) -> Vec<u8> {
        std::fs::read(self.path("tsa.pem")).unwrap()
    }

    /// `openssl ts -reply` to a query (DER): the TimeStampResp (DER).
    pub fn reply(&self, query: &[u8]) -> Vec<u8> {
        let n = self.replies.fetch_add(1, Ordering::SeqCst);
        let (query_file, reply_file) = (format!("q{n}.tsq"), format!("r{n}.tsr"));
        std::fs::write(self.path(&query_file), query).unwrap();
        run(Command::new("openssl").current_dir(self.dir.path()).args([
            "ts",
            "-reply",
            "-config",
            "tsa.cnf",
            "-queryfile",
            &query_file,
            "-inkey",
            "tsa.key",
            "-signer",
            "tsa.pem",
            "-out",
            &reply_file,
        ]));
        std::fs::read(self.path(&reply_file)).unwrap()
    }

    /// Whether `openssl ts -verify` accepts `token` for `note`, chained to this CA.
    pub fn openssl_verifies(&self, token: &[u8], note: &[u8]) -> Result<(), String> {
        let n = self.replies.fetch_add(1, Ordering::SeqCst);
        let (token_file, data_file) = (format!("t{n}.der"), format!("d{n}.txt"));
        std::fs::write(self.path(&token_file), token).unwrap();
        std::fs::write(self.path(&data_file), note).unwrap();
        let out = Command::new("openssl")
            .current_dir(self.dir.path())
            .args(["ts", "-verify", "-data", &data_file, "-in", &token_file, "-token_in", "-CAfile", "ca.pem"])
            .args(["-untrusted", "tsa.pem"])
            .output()
            .unwrap();
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        if out.status.success() && text.contains("Verification: OK") {
            Ok(())
        } else {
            Err(text)
        }
    }
}
