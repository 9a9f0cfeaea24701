//! The dictionary row layout 3 compresses against (`codec`): the text stored rows repeat —
//! a receipt document's keys in canonical order, the data of the common events, the prefixes
//! of ids and hashes. A receipt of about 900 bytes is stored in about 330.
//!
//! Frozen: a layout-3 row can only be read with exactly these bytes. Changing one byte needs a
//! new layout number (and this one kept for reading); `the_dictionary_is_frozen` pins its hash.

/// The dictionary. LZ4 finds matches anywhere in it; the most common text comes last.
pub(in crate::store) const DICTIONARY: &[u8] = concat!(
    r#"{"error":"","reason":"","detail":null,"effect_key_error":"","resource_template_error":"","#,
    r#""approval_required","approval_expired","approval_denied","duplicate","ambiguous","lease_expired","#,
    r#"{"request_id":"apr_","expires_at":"2026-01-01T00:00:00.000Z","approver":{"name":"","verified":true},"#,
    r#""authority_grant_id":"dlg_","hop":1,"budget_charges":[{"metric":"","amount":0,"window":"P1D"}],"#,
    r#""executor_result":{"ok":true},"execution":"committed","result":"failed","result":"ambiguous","#,
    r#""result":"denied","decision":"deny","decision":"approve","would_have":"denied","result":"blocked","#,
    r#"{"reason":"rule[0]"}{"attempt":1,"error":"lease_expired"}"#,
    r#"{"action":"","action_hash":"sha256:","principal":{"agent":"","user":""}}"#,
    r#"{"decision":"allow","reason":"rule[0]","warnings":[]}"#,
    r#"{"attempt":1,"lease_expires_at":"2026-01-01T00:00:00.000Z"}{"attempt":1}"#,
    r#"{"action":"","action_hash":"sha256:","action_id":"act_","approval_id":null,"approver":null,"#,
    r#""arguments":{},"attempt":1,"decision":"allow","decision_reason":"rule[0]","effect_key":"","#,
    r#""environment":"production","error":null,"execution":null,"finished_at":"2026-01-01T00:00:00.000Z","#,
    r#""policy_hash":"sha256:","policy_version":null,"prev_hash":"sha256:","principal":{"agent":"","#,
    r#""user":""},"receipt_id":"rct_","resource":null,"result":"committed","schema":"warden.receipt/v1","#,
    r#""seq":1,"started_at":"2026-01-01T00:00:00.000Z","would_have":null}sha256:"#,
)
.as_bytes();

#[cfg(test)]
mod tests {
    use super::DICTIONARY;

    #[test]
    fn the_dictionary_is_frozen() {
        // Rows written with it exist: these bytes may never change (see the module doc).
        assert_eq!(
            crate::canonical::sha256_prefixed(DICTIONARY),
            "sha256:e61dbe19bef4f90b1505ef612f34822d34fff95ad63bb085abb2c99f8cf98612",
            "the layout-3 dictionary changed; rows written with the old one could no longer be read"
        );
    }
}
