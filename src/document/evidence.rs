//! `warden/v1`'s top-level `evidence` section: the key and the bounds of automatic checkpoints
//! (parsed by [`crate::evidence::settings`]). It decides no action, so, like `notify`, it is
//! outside the policy hash.

use super::cx::Cx;
use super::error::DocumentError;
use super::tree::{Member, Node, NodeValue};
use crate::evidence::settings::EvidenceSettings;

impl Cx<'_> {
    pub(super) fn evidence(&self, member: &Member) -> Result<EvidenceSettings, DocumentError> {
        let value = self.json(&member.value, "evidence")?;
        EvidenceSettings::parse(&value).map_err(|refused| {
            let line = refused
                .path
                .strip_prefix("evidence")
                .map_or(member.line, |rest| line_of(&member.value, rest).unwrap_or(member.line));
            self.error(&refused.path, Some(line), refused.message)
        })
    }
}

impl Cx<'_> {
    /// The `sign_in` section, parsed by [`crate::identity::sign_in::SignIn::parse`].
    pub(super) fn sign_in(&self, member: &Member) -> Result<crate::identity::sign_in::SignIn, DocumentError> {
        let value = self.json(&member.value, "sign_in")?;
        crate::identity::sign_in::SignIn::parse(&value).map_err(|refused| {
            let line = refused
                .path
                .strip_prefix("sign_in")
                .map_or(member.line, |rest| line_of(&member.value, rest).unwrap_or(member.line));
            self.error(&refused.path, Some(line), refused.message)
        })
    }
}

/// The line of what `path` (`.key`, `[index]`, in turn) names under `node`: the deepest part
/// found, `None` when not even the first is.
pub(super) fn line_of(node: &Node, path: &str) -> Option<usize> {
    let (step, rest) = match path.strip_prefix('.') {
        Some(key) => {
            let end = key.find(['.', '[']).unwrap_or(key.len());
            let NodeValue::Map(members) = &node.value else { return None };
            let found = members.iter().find(|m| m.key == key[..end])?;
            return Some(line_of(&found.value, &key[end..]).unwrap_or(found.line));
        }
        None => {
            let inner = path.strip_prefix('[')?;
            let end = inner.find(']')?;
            (inner[..end].parse::<usize>().ok()?, &inner[end + 1..])
        }
    };
    let NodeValue::Seq(items) = &node.value else { return None };
    let item = items.get(step)?;
    Some(line_of(item, rest).unwrap_or(item.line))
}

#[cfg(test)]
mod tests {
    use super::super::load_str;
    use crate::evidence::settings::{Due, KeySource};

    const BASE: &str = "schema: warden/v1\nactions: {}\n";

    #[test]
    fn the_section_is_read_outside_the_policy_hash_and_refusals_name_its_line() {
        let plain = load_str(BASE, "t").expect("loads");
        assert!(plain.evidence.is_none());
        let with = load_str(&format!("{BASE}evidence:\n  key_file: /etc/warden/evidence.key\n  every: PT10S\n"), "t")
            .expect("loads");
        let settings = with.evidence.as_ref().expect("evidence");
        assert_eq!(settings.key, KeySource::File("/etc/warden/evidence.key".into()));
        assert_eq!(settings.due, Due { every_receipts: 1000, every: 10_000_000 });
        assert_eq!(with.policy_hash, plain.policy_hash, "the section decides nothing");

        let refused =
            load_str(&format!("{BASE}evidence:\n  key_file: /k\n  every_receipts: 0\n"), "t").expect_err("refused");
        let text = refused.to_string();
        assert!(text.contains("evidence.every_receipts") && text.starts_with("t:5: "), "{text}");
        let refused = load_str(
            &format!("{BASE}evidence:\n  key_file: /k\n  anchors:\n    - file: /a\n    - rfc3161: ftp://tsa\n"),
            "t",
        )
        .expect_err("refused");
        let text = refused.to_string();
        assert!(text.contains("evidence.anchors[1].rfc3161") && text.starts_with("t:7: "), "{text}");
        let refused = load_str(&format!("{BASE}evidence: 7\n"), "t").expect_err("refused");
        assert!(refused.to_string().contains("must be a mapping"), "{refused}");
    }

    #[test]
    fn sign_in_is_read_outside_the_policy_hash_and_refusals_name_its_line() {
        let plain = load_str(BASE, "t").expect("loads");
        assert!(plain.sign_in.is_none());
        let section = "sign_in:\n  jwt:\n    issuer: https://id.example.com/\n    audience: warden-console\n    \
                       algorithms: [ES256]\n    public_key_file: /etc/warden/idp.pem\n    token_type: JWT\n";
        let with = load_str(&format!("{BASE}{section}"), "t").expect("loads");
        let jwt = &with.sign_in.as_ref().expect("sign_in").jwt;
        assert_eq!(jwt.key, crate::identity::sign_in::SignInKey::PublicKeyFile("/etc/warden/idp.pem".into()));
        assert_eq!(with.policy_hash, plain.policy_hash, "the section decides nothing");
        let refused =
            load_str(&format!("{BASE}{}", section.replace("[ES256]", "[ES256, none]")), "t").expect_err("refused");
        let text = refused.to_string();
        assert!(text.contains("sign_in.jwt.algorithms[1]") && text.starts_with("t:7: "), "{text}");
        let refused = load_str(&format!("schema: ctrlrun.policy/v8\nactions: {{}}\n{section}"), "t")
            .expect_err("a ctrlrun document has no sign_in");
        assert!(refused.to_string().contains("sign_in"), "{refused}");
    }
}
