//! Approvers are principals, and who counts as the requester: one notion of a person.
//!
//! An approver is `{agent, user}` plus, when the host's identity provider vouched for it, the
//! issuer and claims it verified (`Verified`); a name typed at a CLI is *asserted*. Every
//! requester check and every one-answer-per-person check goes through this module, and every
//! approver name typed as one line is parsed here (`parse_name`).
//!
//! - A name is compared by its `person_key`: Unicode NFKC with full case folding (NFKC_Casefold's
//!   reading), invisible characters removed, the Unicode TR39 confusables skeleton (`adа` with a
//!   Cyrillic `а` is `ada`, `agent‑7` with U+2011 is `agent-7`), folded again, and whitespace and
//!   the connectors `-`, `_`, `.` removed.
//! - A principal's *parts* are its agent's and its user's keys, each whole and split at every `:`
//!   or `/` (or anything whose key is one): `agent-7/ada`, `ada/agent-7`, `agent-7:` and `ada:`
//!   all have a part the requester `agent-7/ada` has.
//! - An approver is the requester when any of its parts is one of the requester's parts, or when
//!   both carry the same verified identity (`Verified::same_identity`: the issuer and `sub`).
//! - Two answers are one person's when their answering names (the user, else the agent; its last
//!   part) have one key, or when they carry the same verified identity.
//!
//! Folding more names together only ever refuses more: a false match refuses an approval or a
//! vote, it never lets one through.

use serde::{Deserialize, Serialize};
use unicode_normalization::UnicodeNormalization;

use crate::action::Principal;
use crate::canonical::{parse_json, to_canonical_string};
use crate::error::{Error, InvalidInputKind};
use crate::hint::is_control_or_format;

/// Longest approver, resolver or reason text accepted.
pub const MAX_NAME_CHARS: usize = 200;

/// The largest claims object kept with a verified identity, as canonical JSON.
pub const MAX_CLAIMS_BYTES: usize = 16 * 1024;

/// What the host's identity provider verified about a principal: who issued it, and the claims.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verified {
    /// Who vouched (an identity provider's issuer), if known.
    pub issuer: Option<String>,
    /// A JSON object, canonical text.
    pub claims: String,
}

impl Verified {
    /// `claims` must be a JSON object that encodes canonically (no floats), at most
    /// [`MAX_CLAIMS_BYTES`].
    pub fn new(issuer: Option<&str>, claims: &serde_json::Value) -> Result<Verified, String> {
        if !claims.is_object() {
            return Err("the verified claims must be a JSON object".into());
        }
        let text = to_canonical_string(claims, "claims").map_err(|e| format!("the verified claims: {e}"))?;
        if text.len() > MAX_CLAIMS_BYTES {
            return Err(format!("the verified claims are {} bytes; at most {MAX_CLAIMS_BYTES} are kept", text.len()));
        }
        if issuer.is_some_and(|issuer| issuer.trim().is_empty()) {
            return Err("the verified issuer must be a non-empty string or absent".into());
        }
        Ok(Verified { issuer: issuer.map(str::to_owned), claims: text })
    }

    /// The claims as a JSON value.
    pub fn claims_json(&self) -> serde_json::Value {
        parse_json(&self.claims).unwrap_or(serde_json::Value::Null)
    }

    /// The roles claim (`roles`: a list of strings, or one string), each folded like a name.
    pub fn roles(&self) -> Vec<String> {
        match self.claims_json().get("roles") {
            Some(serde_json::Value::Array(items)) => items.iter().filter_map(|v| v.as_str()).map(role_key).collect(),
            Some(serde_json::Value::String(one)) => vec![role_key(one)],
            _ => Vec::new(),
        }
    }

    /// The subject the issuer vouched for: the `sub` claim (a string, or any other JSON value
    /// as its canonical text), if there is one.
    pub fn subject(&self) -> Option<String> {
        match self.claims_json().get("sub")? {
            serde_json::Value::Null => None,
            serde_json::Value::String(sub) => Some(sub.clone()),
            other => Some(other.to_string()),
        }
    }

    /// Do both name one verified identity: the same `sub`, from the same issuer (or an issuer
    /// left unsaid on either side, which cannot tell them apart)? Without a `sub` on both sides
    /// there is no identity to compare, and names decide.
    pub fn same_identity(&self, other: &Verified) -> bool {
        let (Some(mine), Some(theirs)) = (self.subject(), other.subject()) else {
            return false;
        };
        let issuer =
            |verified: &Verified| verified.issuer.as_deref().map(|i| i.trim().trim_end_matches('/').to_owned());
        mine == theirs
            && match (issuer(self), issuer(other)) {
                (Some(a), Some(b)) => a == b,
                _ => true,
            }
    }
}

/// Who answers an approval request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Approver {
    /// Who they are.
    pub principal: Principal,
    /// `None`: asserted (typed at a CLI, passed as a bare name); `Some`: verified by the host.
    pub verified: Option<Verified>,
}

impl Approver {
    /// An approver nobody verified.
    pub fn asserted(principal: Principal) -> Approver {
        Approver { principal, verified: None }
    }

    /// An approver the host verified.
    pub fn verified(principal: Principal, verified: Verified) -> Approver {
        Approver { principal, verified: Some(verified) }
    }

    /// `cli:ada`, or the agent alone when there is no user.
    pub fn label(&self) -> String {
        label(&self.principal)
    }
}

/// `agent:user`, or the agent alone.
pub fn label(principal: &Principal) -> String {
    match &principal.user {
        Some(user) => format!("{}:{user}", principal.agent),
        None => principal.agent.clone(),
    }
}

/// The separators of the principal forms `AGENT:USER` and `AGENT/USER`.
const SEPARATORS: [char; 2] = [':', '/'];

/// A name as every person comparison sees it. See the module documentation.
pub fn person_key(name: &str) -> String {
    look_alike_key(name).chars().filter(|c| !c.is_whitespace() && !matches!(c, '-' | '_' | '.')).collect()
}

/// Text as a reader who cannot tell look-alikes apart sees it: NFKC case folding, invisible
/// characters removed, the Unicode TR39 confusables skeleton, folded again. Two texts with one
/// key are spellings of one thing to a person (`adа` with a Cyrillic `а` is `ada`); the person
/// key above and the gateway's method names build on it.
pub fn look_alike_key(text: &str) -> String {
    let visible: String = fold(text).chars().filter(|c| !ignorable(*c)).collect();
    let skeleton: String = unicode_security::skeleton(&visible).collect();
    fold(&skeleton).chars().filter(|c| !ignorable(*c)).collect()
}

/// NFKC, full case folding, NFKC again.
fn fold(text: &str) -> String {
    let composed: String = text.nfkc().collect();
    caseless::default_case_fold_str(&composed).nfkc().collect()
}

/// A name's parts: its whole key, and the key split at every separator, empty pieces dropped.
fn parts(name: &str) -> Vec<String> {
    let whole = person_key(name);
    let mut parts: Vec<String> = whole.split(SEPARATORS).filter(|piece| !piece.is_empty()).map(str::to_owned).collect();
    if !whole.is_empty() && !parts.contains(&whole) {
        parts.push(whole);
    }
    parts
}

/// Every part of a principal's agent and user.
fn principal_parts(principal: &Principal) -> Vec<String> {
    let mut all = parts(&principal.agent);
    if let Some(user) = &principal.user {
        all.extend(parts(user));
    }
    all
}

/// The name a principal answers as: the last part of its user, or of its agent when it acts for
/// nobody.
fn answering_name(principal: &Principal) -> String {
    let key = person_key(principal.user.as_deref().unwrap_or(&principal.agent));
    key.split(SEPARATORS).rfind(|piece| !piece.is_empty()).map_or_else(|| key.clone(), str::to_owned)
}

/// Why two principals are taken for one person.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Match {
    /// A part of one's name is a part of the other's (after folding; see the module docs).
    Name,
    /// Both carry the same verified identity (issuer and `sub`).
    Identity,
}

/// Is `approver` the principal that made the request? Any of its parts against any of the
/// requester's, and its verified identity against the requester's (`requester_identity`).
pub fn is_requester(
    approver: &Approver,
    requester: &Principal,
    requester_identity: Option<&Verified>,
) -> Option<Match> {
    let theirs = principal_parts(requester);
    if principal_parts(&approver.principal).iter().any(|part| theirs.contains(part)) {
        return Some(Match::Name);
    }
    match (&approver.verified, requester_identity) {
        (Some(mine), Some(theirs)) if mine.same_identity(theirs) => Some(Match::Identity),
        _ => None,
    }
}

/// Are two answerers one person (one answer each, one vote counted)? Their answering names
/// folded alike, or one verified identity.
pub fn same_person(
    a: &Principal,
    a_verified: Option<&Verified>,
    b: &Principal,
    b_verified: Option<&Verified>,
) -> Option<Match> {
    if answering_name(a) == answering_name(b) {
        return Some(Match::Name);
    }
    match (a_verified, b_verified) {
        (Some(a), Some(b)) if a.same_identity(b) => Some(Match::Identity),
        _ => None,
    }
}

/// The forms an approver name typed as one line may take, for the errors that refuse one.
const FORMS: &str = "write USER, AGENT:USER or AGENT/USER (e.g. ada, cli:ada, slack/ada)";

/// An approver name typed as one line (`--by`, the C `by`, the bindings' `by=`) as a principal:
/// `USER` (the agent is `default_agent`), `AGENT:USER` or `AGENT/USER`, or `AGENT:` / `AGENT/`
/// (the agent alone), each part trimmed. Refused, naming the name: what `check_person_name`
/// refuses, invisible characters, a character that reads as a separator without being a plain
/// `:` or `/` (a fullwidth `：`, U+2236 `∶`, U+2215 `∕`), more than one separator, or nothing
/// before the separator.
pub fn parse_name(what: &str, name: &str, default_agent: &str) -> Result<Principal, Error> {
    check_part(what, name, true)?;
    let refuse = |why: String| Error::invalid(InvalidInputKind::Malformed, format!("{what} {name:?} {why}; {FORMS}"));
    let mut pieces = name.split(SEPARATORS);
    let (first, second) = (pieces.next().unwrap_or_default().trim(), pieces.next().map(str::trim));
    if pieces.next().is_some() {
        return Err(refuse("has more than one separator (':' or '/')".into()));
    }
    match second {
        None => Ok(Principal { agent: default_agent.to_owned(), user: Some(first.to_owned()) }),
        Some(_) if first.is_empty() => Err(refuse("has nothing before its separator".into())),
        Some("") => Ok(Principal { agent: first.to_owned(), user: None }),
        Some(user) => Ok(Principal { agent: first.to_owned(), user: Some(user.to_owned()) }),
    }
}

/// An approver's principal given as fields (the C `warden_approval_answer`, and every answer the
/// kernel records): the agent and the user each one plain name, with no separator (a name that
/// holds one is one of the forms `parse_name` reads, not a field) and nothing invisible.
pub fn check_principal(principal: &Principal) -> Result<(), Error> {
    check_part("the approver's agent", &principal.agent, false)?;
    if let Some(user) = &principal.user {
        check_part("the approver's user", user, false)?;
    }
    Ok(())
}

/// An approver, resolver or reason: one line, no control or format characters (so a name can
/// never forge a line of CLI output or hide text with a bidi override), bounded.
pub fn check_person_name(what: &str, name: &str) -> Result<(), Error> {
    if name.trim().is_empty() {
        return Err(Error::invalid(InvalidInputKind::Missing, format!("{what} must be a non-empty name")));
    }
    if name.chars().count() > MAX_NAME_CHARS {
        return Err(Error::invalid(
            InvalidInputKind::TooLarge,
            format!("{what} is longer than {MAX_NAME_CHARS} characters"),
        ));
    }
    if let Some(bad) = name.chars().find(|c| is_control_or_format(*c)) {
        return Err(Error::invalid(
            InvalidInputKind::Malformed,
            format!("{what} contains the control or format character U+{:04X}; use one plain line", u32::from(bad)),
        ));
    }
    Ok(())
}

/// One approver name: one plain line (`check_person_name`), nothing invisible, no separator
/// look-alike, and (unless `separators_allowed`) no separator at all.
fn check_part(what: &str, name: &str, separators_allowed: bool) -> Result<(), Error> {
    // Empty or too long first, before any per-character work on what could be megabytes.
    if name.trim().is_empty() || name.chars().nth(super::MAX_NAME_CHARS).is_some() {
        return super::check_person_name(what, name);
    }
    let refuse = |why: String| Error::invalid(InvalidInputKind::Malformed, format!("{what} {name:?} {why}; {FORMS}"));
    for c in name.chars() {
        if SEPARATORS.contains(&c) {
            if !separators_allowed {
                return Err(Error::invalid(
                    InvalidInputKind::Malformed,
                    format!(
                        "{what} {name:?} contains {c:?}, a separator; give the agent and the user as separate \
                     fields, each one plain name"
                    ),
                ));
            }
            continue;
        }
        if ignorable(c) || unicode_security::skeleton(c.encode_utf8(&mut [0; 4])).next().is_none() {
            return Err(refuse(format!(
                "contains the invisible or control character U+{:04X}; type the name without it",
                u32::from(c)
            )));
        }
        let key = person_key(c.encode_utf8(&mut [0; 4]));
        if key.contains(SEPARATORS) {
            return Err(refuse(format!(
                "contains U+{:04X}, which reads as a separator but is not a plain ':' or '/'",
                u32::from(c)
            )));
        }
    }
    // A name (or a part of one) that folds to nothing names nobody: `_` and `-` would be one
    // person to `same_person` yet share no part for `is_requester`.
    if name.split(SEPARATORS).any(|piece| !piece.trim().is_empty() && person_key(piece).is_empty()) {
        return Err(refuse(
            "has a part with no letters or digits once case, look-alikes and the connectors - _ . are set aside".into(),
        ));
    }
    super::check_person_name(what, name)
}

fn role_key(role: &str) -> String {
    fold(role).trim().to_owned()
}

/// A role as a requirement names it, folded as the claims' roles are.
pub fn role(name: &str) -> String {
    role_key(name)
}

/// Characters NFKC_Casefold maps to nothing (default ignorables) plus controls: invisible, so
/// they must not make two spellings of one name differ.
fn ignorable(c: char) -> bool {
    super::is_control_or_format(c)
        || matches!(c, '\u{034F}' | '\u{115F}' | '\u{1160}' | '\u{17B4}' | '\u{17B5}'
        | '\u{180B}'..='\u{180F}' | '\u{3164}' | '\u{FFA0}' | '\u{FE00}'..='\u{FE0F}' | '\u{E0100}'..='\u{E01EF}')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::InvalidInput;

    #[test]
    fn spellings_of_one_name_share_a_key() {
        for spelling in
            ["ada", "ADA", "ada ", "\tAda", "ａｄａ", "a\u{200D}da", "a\u{034F}da", "ad\u{0430}", "\u{0430}d\u{0430}"]
        {
            assert_eq!(person_key(spelling), "ada", "{spelling:?}");
        }
        for spelling in ["agent-7", "agent\u{2011}7", "AGENT-7", "agent_7", "agent 7", "agent7", "ａｇｅｎｔ－７"]
        {
            assert_eq!(person_key(spelling), person_key("agent-7"), "{spelling:?}");
        }
        // A control character the skeleton keeps is dropped by `ignorable`, not by the skeleton.
        assert_eq!(person_key("a\u{0007}da"), "ada");
        assert_eq!(person_key("Straße"), person_key("STRASSE"));
        assert_ne!(person_key("bob"), person_key("ada"));
        assert_eq!(person_key("ＣＬＩ：ａｄａ"), person_key("cli:ada"));
    }

    fn principal(agent: &str, user: Option<&str>) -> Principal {
        Principal::new(agent, user).unwrap()
    }

    #[test]
    fn two_principals_are_the_same_person_when_their_answering_names_fold_alike() {
        let same = |a: &Principal, b: &Principal| same_person(a, None, b, None);
        assert_eq!(same(&principal("slack", Some("Ada")), &principal("cli", Some("ADA"))), Some(Match::Name));
        assert_eq!(same(&principal("slack", Some("ada")), &principal("slack", Some("bob"))), None);
        assert_eq!(same(&principal("slack", Some("ops/ada")), &principal("ada", None)), Some(Match::Name));
    }

    fn identity(issuer: Option<&str>, sub: &str) -> Verified {
        Verified::new(issuer, &serde_json::json!({"sub": sub})).unwrap()
    }

    #[test]
    fn one_verified_identity_is_one_person_whatever_name_it_gives() {
        let (bob, robert) = (principal("slack", Some("bob")), principal("teams", Some("robert")));
        let idp = identity(Some("https://idp.test"), "u-123");
        let table = [
            (identity(Some("https://idp.test"), "u-123"), Some(Match::Identity)),
            (identity(Some("https://idp.test/"), "u-123"), Some(Match::Identity)),
            (identity(None, "u-123"), Some(Match::Identity)),
            (identity(Some("https://other.test"), "u-123"), None),
            (identity(Some("https://idp.test"), "u-456"), None),
            (Verified::new(Some("https://idp.test"), &serde_json::json!({})).unwrap(), None),
        ];
        for (other, expected) in table {
            assert_eq!(same_person(&bob, Some(&idp), &robert, Some(&other)), expected, "{other:?}");
        }
        assert_eq!(same_person(&bob, Some(&idp), &robert, None), None);
        assert_eq!(identity(None, "7").subject().as_deref(), Some("7"));
        let numeric = Verified::new(None, &serde_json::json!({"sub": 7})).unwrap();
        assert_eq!(numeric.subject().as_deref(), Some("7"));
    }

    /// Every spelling of the requester `agent-7/ada` as a typed approver name, each refused as
    /// the requester: the principal forms and each class of look-alike.
    const REQUESTER_SPELLINGS: [&str; 24] = [
        "ada",
        "ada:",
        "ada/",
        "agent-7:",
        "agent-7/",
        "agent-7/ada",
        "agent-7:ada",
        "ada/agent-7",
        "ada:agent-7",
        "cli:ada",
        "cli/ada",
        "ops:agent-7",
        "ada:bob",
        "agent\u{2011}7:",
        "agent\u{2010}7/ada",
        "ad\u{0430}",
        "\u{0430}d\u{0430}:",
        "ＡＤＡ",
        "ａｇｅｎｔ－７",
        "Agent_7",
        "agent 7:",
        "A D A",
        "ADA ",
        "\u{0391}DA",
    ];

    #[test]
    fn every_spelling_of_the_requester_is_the_requester() {
        let requester = principal("agent-7", Some("ada"));
        for name in REQUESTER_SPELLINGS {
            let approver = Approver::asserted(parse_name("--by", name, "cli").unwrap());
            assert_eq!(is_requester(&approver, &requester, None), Some(Match::Name), "{name:?}");
        }
        for name in ["bob", "cli:bob", "slack/bob", "bob:", "adam", "agent-8"] {
            let approver = Approver::asserted(parse_name("--by", name, "cli").unwrap());
            assert_eq!(is_requester(&approver, &requester, None), None, "{name:?}");
        }
    }

    /// The whole key is a part even when splitting it leaves no piece, and a name whose key is
    /// empty (connectors alone) has no part at all: empty pieces are dropped (module docs).
    #[test]
    fn a_name_of_separators_alone_is_a_part_and_a_name_that_folds_to_nothing_has_none() {
        let table = [
            // Split at its separator, "/" leaves nothing: the whole key is its one part.
            (("/", None), ("/", None), Some(Match::Name)),
            (("ops", Some(":")), ("cli", Some(":")), Some(Match::Name)),
            // "-" and "_" fold to the empty key, which is no part.
            (("cli", Some("_")), ("ops", Some("-")), None),
            (("_", None), ("-", None), None),
        ];
        for ((agent, user), (requester_agent, requester_user), expected) in table {
            let approver = Approver::asserted(principal(agent, user));
            let requester = principal(requester_agent, requester_user);
            assert_eq!(is_requester(&approver, &requester, None), expected, "{agent:?} {user:?}");
        }
    }

    #[test]
    fn an_approver_with_the_requesters_verified_identity_is_the_requester_under_any_name() {
        let requester = principal("agent-7", Some("ada"));
        let ada = identity(Some("https://idp.test"), "u-9");
        let robert = Approver::verified(principal("slack", Some("robert")), identity(Some("https://idp.test"), "u-9"));
        assert_eq!(is_requester(&robert, &requester, Some(&ada)), Some(Match::Identity));
        let other = Approver::verified(principal("slack", Some("robert")), identity(Some("https://idp.test"), "u-1"));
        assert_eq!(is_requester(&other, &requester, Some(&ada)), None);
        // An asserted approver is compared by name alone: the requester's name is the requester.
        let named = Approver::asserted(principal("cli", Some("ADA")));
        assert_eq!(is_requester(&named, &requester, Some(&ada)), Some(Match::Name));
    }

    #[test]
    fn typed_names_parse_into_agent_and_user() {
        let table: [(&str, &str, Option<&str>); 7] = [
            ("ada", "cli", Some("ada")),
            (" ada ", "cli", Some("ada")),
            ("ops:ada", "ops", Some("ada")),
            ("ops/ada", "ops", Some("ada")),
            ("ops : ada", "ops", Some("ada")),
            ("ada:", "ada", None),
            ("agent-7/", "agent-7", None),
        ];
        for (name, agent, user) in table {
            assert_eq!(parse_name("--by", name, "cli").unwrap(), principal(agent, user), "{name:?}");
        }
        assert_eq!(parse_name("--by", "ada", "host").unwrap(), principal("host", Some("ada")));
    }

    #[test]
    fn unparseable_names_are_refused_by_name_with_why_and_the_form_to_use() {
        let table = [
            ("a:b:c", "has more than one separator (':' or '/')"),
            ("a/b:c", "has more than one separator (':' or '/')"),
            (":ada", "has nothing before its separator"),
            ("/", "has nothing before its separator"),
            ("ops\u{FF1A}ada", "contains U+FF1A, which reads as a separator but is not a plain ':' or '/'"),
            ("ops\u{2236}ada", "contains U+2236, which reads as a separator"),
            ("ops\u{2215}ada", "contains U+2215, which reads as a separator"),
            ("ops\u{A789}ada", "contains U+A789, which reads as a separator"),
            ("ops\u{FF0F}ada", "contains U+FF0F, which reads as a separator"),
            ("a\u{200D}da", "contains the invisible or control character U+200D"),
            ("a\u{200B}da", "contains the invisible or control character U+200B"),
            ("ad\u{034F}a", "contains the invisible or control character U+034F"),
            ("ada\u{FE0F}", "contains the invisible or control character U+FE0F"),
            ("\u{3164}ada", "contains the invisible or control character U+3164"),
            ("a\u{202E}da", "contains the invisible or control character U+202E"),
            // A control character the skeleton keeps: refused as invisible by `ignorable` alone.
            ("a\u{0007}da", "contains the invisible or control character U+0007"),
            // Parts that fold to nothing name nobody.
            ("_", "has a part with no letters or digits"),
            ("cli:_", "has a part with no letters or digits"),
            ("- . _:ada", "has a part with no letters or digits"),
        ];
        for (name, why) in table {
            let Err(Error::InvalidInput(InvalidInput { kind: InvalidInputKind::Malformed, message, .. })) =
                parse_name("--by", name, "cli")
            else {
                panic!("{name:?} was not refused");
            };
            assert!(message.starts_with(&format!("--by {name:?} {why}")), "{name:?}: {message}");
            assert!(message.ends_with(FORMS), "{name:?}: {message}");
        }
        for bad in ["", " ", &"n".repeat(201)] {
            assert!(parse_name("--by", bad, "cli").is_err(), "{bad:?}");
        }
        assert!(parse_name("--by", &"n".repeat(200), "cli").is_ok());
        let huge = format!("{}\u{200B}", "n".repeat(1 << 20));
        assert_eq!(
            parse_name("--by", &huge, "cli"),
            Err(Error::invalid(InvalidInputKind::TooLarge, "--by is longer than 200 characters"))
        );
    }

    #[test]
    fn approver_fields_are_each_one_plain_name() {
        check_principal(&principal("slack", Some("bob@example.com"))).unwrap();
        // A field that folds to nothing is refused; one letter is enough (the instant past it).
        assert!(check_principal(&principal("slack", Some("-"))).is_err());
        assert!(check_principal(&principal("_", None)).is_err());
        check_principal(&principal("slack", Some("-a"))).unwrap();
        check_principal(&principal("slack", None)).unwrap();
        for (agent, user) in
            [("slack", Some("ada:")), ("slack", Some("agent-7/ada")), ("a:b", None), ("slack", Some("a\u{034F}b"))]
        {
            assert!(check_principal(&principal(agent, user)).is_err(), "{agent:?} {user:?}");
        }
        let Err(Error::InvalidInput(InvalidInput { message, .. })) = check_principal(&principal("slack", Some("ada:")))
        else {
            panic!("not refused");
        };
        assert!(message.starts_with("the approver's user \"ada:\" contains ':', a separator"), "{message}");
    }

    #[test]
    fn verified_claims_must_be_an_object_without_floats() {
        assert!(Verified::new(Some("https://id"), &serde_json::json!([1])).is_err());
        assert!(Verified::new(Some("https://id"), &serde_json::json!({"x": 1.5})).is_err());
        assert!(Verified::new(Some(" "), &serde_json::json!({})).is_err());
        let roles = Verified::new(None, &serde_json::json!({"roles": ["Finance", "risk"]})).unwrap().roles();
        assert_eq!(roles, ["finance", "risk"]);
    }

    #[test]
    fn verified_claims_are_kept_up_to_16_kib_and_refused_one_byte_past() {
        // `{"k":"…"}` is the text plus 8 bytes.
        let claims = |len: usize| serde_json::json!({ "k": "x".repeat(len - 8) });
        let kept = Verified::new(None, &claims(16_384)).unwrap();
        assert_eq!(kept.claims.len(), 16_384);
        assert_eq!(
            Verified::new(None, &claims(16_385)),
            Err("the verified claims are 16385 bytes; at most 16384 are kept".into())
        );
    }

    #[test]
    fn a_name_of_exactly_two_hundred_characters_is_accepted_and_one_more_is_refused() {
        assert_eq!(MAX_NAME_CHARS, 200);
        check_person_name("--by", &"n".repeat(200)).unwrap();
        // Characters, not bytes: two hundred two-byte characters are still two hundred.
        check_person_name("--by", &"é".repeat(200)).unwrap();
        assert!(check_person_name("--by", &"n".repeat(201)).is_err());
        assert!(check_person_name("--by", &"é".repeat(201)).is_err());
    }

    #[test]
    fn names_with_controls_or_format_characters_are_refused() {
        for bad in ["", "  ", "a\nb", "a\u{202E}b", "a\u{200B}", "x\u{0007}", &"n".repeat(201)] {
            assert!(check_person_name("--by", bad).is_err(), "{bad:?}");
        }
        check_person_name("--by", "Ada Lovelace (ops)").unwrap();
    }
}
