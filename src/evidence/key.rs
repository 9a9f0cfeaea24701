//! Checkpoint signing keys, in the signed-note key formats (`c2sp.org/signed-note`): a signer
//! key `PRIVATE+KEY+NAME+ID+BASE64(0x01 ‖ seed)` in a file only its owner may read, and the
//! verifier key `NAME+ID+BASE64(0x01 ‖ public key)` anyone may hold. `ID` is the first four
//! bytes of SHA-256(NAME ‖ "\n" ‖ 0x01 ‖ public key), in hex. Ed25519 (RFC 8032) only.
//!
//! The signer never enters the store, an error or a log line: `Debug` prints its verifier key.

use std::io::Read;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

use base64::prelude::{Engine, BASE64_STANDARD};
use ed25519_dalek::{Signer as _, SigningKey, VerifyingKey};
use zeroize::Zeroizing;

use crate::error::{Error, InvalidInputKind, Result};

/// The signed-note algorithm byte for Ed25519.
const ALG_ED25519: u8 = 0x01;

/// The most of a key file read (a key line is about 100 bytes).
const MAX_KEY_FILE: u64 = 4096;

/// The key id of `name` and an encoded public key (`0x01 ‖ key`).
fn key_id(name: &str, encoded: &[u8]) -> u32 {
    signed_note::key_id(name, encoded)
}

/// Whether `name` may name a key: non-empty, no whitespace, no `+`, at most 128 bytes.
pub fn is_key_name(name: &str) -> bool {
    signed_note::is_key_name_valid(name) && name.len() <= 128
}

/// The fields of a key line `NAME+ID+BASE64(0x01 ‖ 32 bytes)` (a signer key without its
/// `PRIVATE+KEY+`): the name, the id and the 32 key bytes (a seed or a public key, `what`), or
/// what is wrong with it. The base64 may itself hold a '+'.
fn key_fields<'t>(text: &'t str, what: &str) -> std::result::Result<(&'t str, u32, Zeroizing<[u8; 32]>), String> {
    let mut parts = text.splitn(3, '+');
    let (Some(name), Some(id), Some(key)) = (parts.next(), parts.next(), parts.next()) else {
        return Err("it does not have the fields NAME+ID+KEY".into());
    };
    if !is_key_name(name) {
        return Err("its name is empty, too long or has a space".into());
    }
    let id = (id.len() == 8)
        .then(|| u32::from_str_radix(id, 16).ok())
        .flatten()
        .ok_or_else(|| "its id is not 8 hex digits".to_owned())?;
    let decoded = Zeroizing::new(BASE64_STANDARD.decode(key).map_err(|_| "its key is not base64".to_owned())?);
    match (decoded.first(), <[u8; 32]>::try_from(decoded.get(1..).unwrap_or_default())) {
        (Some(&ALG_ED25519), Ok(bytes)) => Ok((name, id, Zeroizing::new(bytes))),
        _ => Err(format!("its key is not 0x01 followed by a 32-byte Ed25519 {what}")),
    }
}

/// A checkpoint signer: an Ed25519 key and its name.
pub struct NoteSigner {
    name: String,
    id: u32,
    key: SigningKey,
}

impl std::fmt::Debug for NoteSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NoteSigner").field("verifier", &self.verifier().encoded()).finish()
    }
}

impl NoteSigner {
    /// A new key named `name`, from the operating system's random source.
    pub fn generate(name: &str) -> Result<NoteSigner> {
        if !is_key_name(name) {
            return Err(Error::invalid_at(
                InvalidInputKind::Malformed,
                "name",
                format!("{name:?} cannot name a key: a key name is 1 to 128 bytes with no spaces and no '+'"),
            ));
        }
        let mut seed = Zeroizing::new([0u8; 32]);
        getrandom::fill(&mut *seed).map_err(|e| Error::Config(format!("no randomness for a new key: {e}")))?;
        Ok(NoteSigner::from_seed(name, &seed))
    }

    fn from_seed(name: &str, seed: &[u8; 32]) -> NoteSigner {
        let key = SigningKey::from_bytes(seed);
        let id = key_id(name, &encoded_public(&key.verifying_key()));
        NoteSigner { name: name.to_owned(), id, key }
    }

    /// Parse a signer key line (`PRIVATE+KEY+NAME+ID+BASE64`). The error never repeats the
    /// text (it is a secret).
    pub fn parse(text: &str) -> Result<NoteSigner> {
        let bad = |why: &str| Error::Config(format!("the signing key is not a signed-note Ed25519 signer key: {why}"));
        let rest = text.trim_end_matches(['\n', '\r']);
        let rest = rest.strip_prefix("PRIVATE+KEY+").ok_or_else(|| bad("it does not start with PRIVATE+KEY+"))?;
        let (name, id, seed) = key_fields(rest, "seed").map_err(|why| bad(&why))?;
        let signer = NoteSigner::from_seed(name, &seed);
        if signer.id != id {
            return Err(bad("its id does not match its key"));
        }
        Ok(signer)
    }

    /// Read a signer key file: a regular file only its owner may read or write (mode 0600 or
    /// stricter), else refused with the mode it has and the `chmod` that fixes it.
    pub fn load(path: &Path) -> Result<NoteSigner> {
        let shown = path.display();
        let file = crate::files::open_regular(path)
            .map_err(|e| Error::Config(format!("cannot open the signing key {shown}: {e}")))?;
        let mode = file
            .metadata()
            .map_err(|e| Error::Config(format!("cannot read the signing key {shown}: {e}")))?
            .permissions()
            .mode();
        if mode & 0o077 != 0 {
            return Err(Error::Config(format!(
                "the signing key {shown} may be read or written by others (mode {:o}); it was not used. Run `chmod 600 {shown}`",
                mode & 0o777
            )));
        }
        let mut text = Zeroizing::new(String::new());
        file.take(MAX_KEY_FILE)
            .read_to_string(&mut text)
            .map_err(|_| Error::Config(format!("the signing key {shown} is not UTF-8 text")))?;
        NoteSigner::parse(&text).map_err(|e| match e {
            Error::Config(message) => Error::Config(format!("{shown}: {message}")),
            other => other,
        })
    }

    /// Write this key to a new file at `path` with mode 0600; an existing file is never
    /// overwritten.
    pub fn save(&self, path: &Path) -> Result<()> {
        use std::io::Write;
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
            .map_err(|e| Error::Config(format!("cannot create the key file {}: {e}", path.display())))?;
        let seed = Zeroizing::new(self.key.to_bytes());
        let mut encoded = Zeroizing::new(vec![ALG_ED25519]);
        encoded.extend_from_slice(&*seed);
        let line = Zeroizing::new(format!(
            "PRIVATE+KEY+{}+{:08x}+{}\n",
            self.name,
            self.id,
            BASE64_STANDARD.encode(&*encoded)
        ));
        file.write_all(line.as_bytes())
            .and_then(|()| file.sync_all())
            .map_err(|e| Error::Config(format!("cannot write the key file {}: {e}", path.display())))
    }

    /// The key's name (the name on every signature line it writes).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The matching verifier key.
    pub fn verifier(&self) -> NoteVerifier {
        NoteVerifier { name: self.name.clone(), id: self.id, key: self.key.verifying_key() }
    }

    /// Sign `text` (a note's text, ending in a newline): the signed note, text and signature line.
    pub fn sign_note(&self, text: &str) -> Result<String> {
        let mut note = signed_note::Note::new(text.as_bytes(), &[]).map_err(|e| {
            Error::invalid(InvalidInputKind::Malformed, format!("cannot make a signed note of this text: {e}"))
        })?;
        note.add_sigs(&[self])
            .map_err(|e| Error::invalid(InvalidInputKind::Malformed, format!("cannot sign the note: {e}")))?;
        String::from_utf8(note.to_bytes())
            .map_err(|_| Error::invalid(InvalidInputKind::Malformed, "a signed note is not UTF-8"))
    }
}

impl signed_note::Signer for NoteSigner {
    fn name(&self) -> &str {
        &self.name
    }
    fn key_id(&self) -> u32 {
        self.id
    }
    fn sign(&self, msg: &[u8]) -> std::result::Result<Vec<u8>, signature::Error> {
        Ok(self.key.sign(msg).to_bytes().to_vec())
    }
}

fn encoded_public(key: &VerifyingKey) -> Vec<u8> {
    let mut out = vec![ALG_ED25519];
    out.extend_from_slice(key.as_bytes());
    out
}

/// A verifier key: who may have signed a checkpoint.
#[derive(Clone, PartialEq, Eq)]
pub struct NoteVerifier {
    name: String,
    id: u32,
    key: VerifyingKey,
}

impl std::fmt::Debug for NoteVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.encoded())
    }
}

impl NoteVerifier {
    /// Parse a verifier key (`NAME+ID+BASE64`), checking its id against its key.
    pub fn parse(text: &str) -> Result<NoteVerifier> {
        let text = text.trim();
        let bad = |why: &str| {
            Error::invalid(
                InvalidInputKind::Malformed,
                format!("{text:?} is not a signed-note Ed25519 verifier key: {why}"),
            )
        };
        let (name, id, public) = key_fields(text, "public key").map_err(|why| bad(&why))?;
        let mut encoded = vec![ALG_ED25519];
        encoded.extend_from_slice(&*public);
        if key_id(name, &encoded) != id {
            return Err(bad("its id does not match its key"));
        }
        let key = VerifyingKey::from_bytes(&public).map_err(|_| bad("its key is not a point on the curve"))?;
        Ok(NoteVerifier { name: name.to_owned(), id, key })
    }

    /// The key in its text form, `NAME+ID+BASE64(0x01 ‖ key)`.
    pub fn encoded(&self) -> String {
        format!("{}+{:08x}+{}", self.name, self.id, BASE64_STANDARD.encode(encoded_public(&self.key)))
    }

    /// The key's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The key's id.
    pub fn id(&self) -> u32 {
        self.id
    }
}

impl signed_note::Verifier for NoteVerifier {
    fn name(&self) -> &str {
        &self.name
    }
    fn key_id(&self) -> u32 {
        self.id
    }
    fn verify(&self, msg: &[u8], sig: &[u8]) -> bool {
        let Ok(sig) = ed25519_dalek::Signature::from_slice(sig) else { return false };
        self.key.verify_strict(msg, &sig).is_ok()
    }
}

/// Why a signed note did not verify against a set of trusted keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoteRefusal {
    /// Not a signed note at all (text, blank line, signature lines).
    Malformed(String),
    /// No signature line is by a trusted key (`name+id` of each line found).
    Untrusted(Vec<String>),
    /// A trusted key's signature does not verify.
    BadSignature(String),
}

/// Verify `note` against `trusted`: the note's text when at least one trusted key signed it and
/// no trusted key's signature fails.
pub fn open_note(note: &[u8], trusted: &[NoteVerifier]) -> std::result::Result<String, NoteRefusal> {
    let parsed = signed_note::Note::from_bytes(note).map_err(|e| NoteRefusal::Malformed(e.to_string()))?;
    let mut verified = false;
    let mut seen = Vec::new();
    for line in parsed_signatures(note) {
        let (name, id, sig) = line.map_err(NoteRefusal::Malformed)?;
        match trusted.iter().find(|key| key.name == name && key.id == id) {
            Some(key) => {
                if !signed_note::Verifier::verify(key, parsed.text(), &sig) {
                    return Err(NoteRefusal::BadSignature(format!("{name}+{id:08x}")));
                }
                verified = true;
            }
            None => seen.push(format!("{name}+{id:08x}")),
        }
    }
    if !verified {
        return Err(NoteRefusal::Untrusted(seen));
    }
    String::from_utf8(parsed.text().to_vec()).map_err(|_| NoteRefusal::Malformed("its text is not UTF-8".into()))
}

/// One signature line: (key name, key id, signature).
type SignatureLine = (String, u32, Vec<u8>);

/// The signature lines of a note (after the last blank line).
fn parsed_signatures(note: &[u8]) -> Vec<std::result::Result<SignatureLine, String>> {
    let text = String::from_utf8_lossy(note);
    let Some((_, sigs)) = text.rsplit_once("\n\n") else {
        return vec![Err("no blank line before the signatures".into())];
    };
    sigs.lines()
        .map(|line| {
            let rest = line
                .strip_prefix("\u{2014} ")
                .ok_or_else(|| format!("signature line {line:?} does not start with an em dash"))?;
            let (name, b64) =
                rest.split_once(' ').ok_or_else(|| format!("signature line {line:?} has no signature"))?;
            let raw = BASE64_STANDARD.decode(b64).map_err(|_| format!("signature line {line:?} is not base64"))?;
            if raw.len() < 5 {
                return Err(format!("signature line {line:?} is too short"));
            }
            let id = u32::from_be_bytes([raw[0], raw[1], raw[2], raw[3]]);
            Ok((name.to_owned(), id, raw[4..].to_vec()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    // The example of golang.org/x/mod/sumdb/note (the format's reference implementation).
    const SKEY: &str = "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz";
    const VKEY: &str = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW";
    const TEXT: &str =
        "If you think cryptography is the answer to your problem,\nthen you don't know what your problem is.\n";
    const SIGNED: &str = "If you think cryptography is the answer to your problem,\nthen you don't know what your problem is.\n\n\u{2014} PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n";

    #[test]
    fn the_reference_example_signs_and_verifies_byte_for_byte() {
        let signer = NoteSigner::parse(SKEY).unwrap();
        assert_eq!(signer.verifier().encoded(), VKEY);
        assert_eq!(signer.sign_note(TEXT).unwrap(), SIGNED);
        let verifier = NoteVerifier::parse(VKEY).unwrap();
        assert_eq!(open_note(SIGNED.as_bytes(), &[verifier]).unwrap(), TEXT);
    }

    #[test]
    fn a_changed_text_an_unknown_key_and_a_mangled_key_are_refused() {
        let verifier = NoteVerifier::parse(VKEY).unwrap();
        let altered = SIGNED.replace("answer", "Answer");
        assert_eq!(
            open_note(altered.as_bytes(), std::slice::from_ref(&verifier)),
            Err(NoteRefusal::BadSignature("PeterNeumann+c74f20a3".into()))
        );
        let other = NoteSigner::generate("PeterNeumann").unwrap().verifier();
        assert!(matches!(open_note(SIGNED.as_bytes(), &[other]), Err(NoteRefusal::Untrusted(_))));
        assert!(matches!(open_note(TEXT.as_bytes(), &[verifier]), Err(NoteRefusal::Malformed(_))));
        for bad in [
            "PeterNeumann+c74f20a4+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",
            "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10T",
            "Peter Neumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",
            "PeterNeumann+c74f20a3+ZRpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",
        ] {
            assert!(NoteVerifier::parse(bad).is_err(), "{bad}");
        }
        let wrong_id = SKEY.replace("c74f20a3", "c74f20a4");
        let error = NoteSigner::parse(&wrong_id).unwrap_err().to_string();
        assert!(!error.contains("AYEK"), "the error repeats the secret: {error}");
    }

    #[test]
    fn a_key_file_others_may_read_is_refused_and_an_existing_file_is_never_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k");
        let signer = NoteSigner::generate("warden.test").unwrap();
        signer.save(&path).unwrap();
        assert_eq!(NoteSigner::load(&path).unwrap().verifier(), signer.verifier());
        assert!(signer.save(&path).is_err());
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        let error = NoteSigner::load(&path).unwrap_err().to_string();
        assert!(error.contains("mode 640") && error.contains("chmod 600"), "{error}");
    }
}
