//! The approval lifecycle as pure checks: who may answer, what may be consumed. A human's
//! approval is bound to one exact action hash, answered once per approver, spent once, and
//! expires. The request keeps the whole action, so the approver sees what the hash covers.
//!
//! - `person`: approvers as principals, one notion of a person (who is the requester, who
//!   already answered), the parse of a typed approver name and the check of any name's line
//!   (`check_person_name`).
//! - `requirement`: M-of-N with roles (`approval: {required, roles}` in a rule).
//! - `precondition`: the fingerprint of the world an approval was given in.
//! - `notify`, `webhook`: telling someone that a request is waiting.

use serde::{Deserialize, Serialize};

use crate::action::{Action, Principal};
use crate::clock::{Micros, MICROS_PER_SECOND};
use crate::error::Error;

pub mod notify;
pub mod person;
pub mod precondition;
pub mod requirement;
pub mod scope;
pub mod webhook;

pub use crate::hint::is_control_or_format;
pub use person::{check_person_name, Approver, Verified, MAX_NAME_CHARS};
pub use requirement::Requirement;

/// How long a human has to answer unless the caller says otherwise.
pub const DEFAULT_APPROVAL_TTL: Micros = 15 * 60 * MICROS_PER_SECOND;

/// Where an approval request stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalStatus {
    /// Waiting for enough approvers (or one deny).
    Pending,
    /// Granted: usable once, for the exact action, until it expires.
    Granted,
    /// Denied by an approver.
    Denied,
    /// Lapsed before it was answered or used.
    Expired,
    /// Spent on the action it binds.
    Consumed,
}

impl ApprovalStatus {
    /// The status as records and the bindings spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalStatus::Pending => "pending",
            ApprovalStatus::Granted => "granted",
            ApprovalStatus::Denied => "denied",
            ApprovalStatus::Expired => "expired",
            ApprovalStatus::Consumed => "consumed",
        }
    }
}

/// One approval request, as stored (schema 4). The request keeps the whole action it binds
/// (`action`), so an approver sees exactly what the hash covers, and every read checks that the
/// stored action still hashes to `action_hash` (`check_binding`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalRecord {
    /// The request's id (`apr_…`).
    pub approval_id: String,
    /// The exact action it binds.
    pub action_hash: String,
    /// That action's name.
    pub action_name: String,
    /// The proposal that asked; a different proposal of the same action may consume it.
    pub action_id: String,
    /// Who proposed the action.
    pub requested_by: Principal,
    /// Where the request stands.
    pub status: ApprovalStatus,
    /// When it was made.
    pub requested_at: Micros,
    /// When it (or its grant) lapses.
    pub expires_at: Micros,
    /// Who decided it (the approver whose grant reached the count, or who denied), as a label.
    pub approver: Option<String>,
    /// When it was granted or denied.
    pub answered_at: Option<Micros>,
    /// When it was spent.
    pub consumed_at: Option<Micros>,
    /// The action (`act_…`) that spent it.
    pub consumed_by: Option<String>,
    /// The denier's one-line reason, if any.
    pub note: Option<String>,
    /// The action the request binds. `None` only for a request migrated from a store older
    /// than schema 4, which kept the name and hash alone: such a request cannot be shown, so it
    /// cannot be answered (a grant given before the migration can still be used).
    pub action: Option<RequestedAction>,
    /// How many entitled approvers must grant, and which roles entitle them.
    pub requirement: Requirement,
    /// Every answer recorded, in order: the grants counted so far, and the deny that ended it.
    pub votes: Vec<Vote>,
    /// The precondition fingerprint taken when the request was made (`precondition::fingerprint`).
    pub precondition: Option<String>,
}

/// Everything of the action an approval binds beyond its name and principal, and why it was
/// asked. Arguments and claims are canonical JSON text (postcard cannot carry a JSON value).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestedAction {
    /// The canonical arguments, as JSON text.
    pub arguments: String,
    /// What the action acts on, if known.
    pub resource: Option<String>,
    /// Where it acts.
    pub environment: String,
    /// The requester's verified identity, when the host's identity provider vouched for it.
    pub identity: Option<Verified>,
    /// The policy's reason for asking (`rule[1]`, `decision`, `requested directly`).
    pub rule: String,
    /// The matched rule's `when`, canonical JSON, when it had one.
    pub when: Option<String>,
    /// The hash of the document that asked.
    pub policy_hash: Option<String>,
    /// That document's `version`.
    pub policy_version: Option<String>,
}

/// What the pipeline knows about an approval it asks for, beyond the action: how many approvers
/// with which roles, the matched rule's `when`, and the requester's verified identity.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalAsk {
    /// How many approvers, with which roles.
    pub requirement: Requirement,
    /// The matched rule's `when`, canonical JSON, when it had one.
    pub when: Option<String>,
    /// The requester's verified identity, if the host's provider vouched for it.
    pub identity: Option<Verified>,
}

/// One recorded answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Vote {
    /// Who answered.
    pub approver: Principal,
    /// What the host verified about them, if anything.
    pub verified: Option<Verified>,
    /// A grant (`true`) or a deny.
    pub grant: bool,
    /// When.
    pub at: Micros,
    /// The one-line reason given with a deny, if any.
    pub note: Option<String>,
}

impl ApprovalRecord {
    /// The action this request binds, rebuilt from the stored fields; `None` for a migrated
    /// request that never kept it.
    pub fn bound_action(&self) -> Option<Result<Action, String>> {
        let stored = self.action.as_ref()?;
        Some(rebuild(self, stored))
    }

    /// `Err` when the stored action does not hash to the stored `action_hash`: the row was
    /// altered, and nothing may be shown or decided from it.
    pub fn check_binding(&self) -> Result<(), String> {
        match self.bound_action() {
            None => Ok(()),
            Some(Err(problem)) => Err(problem),
            Some(Ok(action)) => {
                let hash = action.hash().map_err(|e| format!("its stored action cannot be hashed ({e})"))?;
                if hash == self.action_hash {
                    Ok(())
                } else {
                    Err(format!(
                        "holds an action that hashes to {hash}, not to its action_hash {}; the stored action was altered",
                        self.action_hash
                    ))
                }
            }
        }
    }

    /// The canonical action document the hash covers (`{arguments, environment, name,
    /// principal, resource, schema}`), pretty-printable; `None` for a migrated request.
    pub fn action_document(&self) -> Option<serde_json::Value> {
        let action = self.bound_action()?.ok()?;
        crate::canonical::parse_json(&action.canonical().ok()?).ok()
    }

    /// The canonical arguments as JSON; `None` for a migrated request.
    pub fn arguments(&self) -> Option<serde_json::Value> {
        let stored = self.action.as_ref()?;
        crate::canonical::parse_json(&stored.arguments).ok()
    }

    /// How many people granted: granting votes, each counted unless an earlier granting vote
    /// is the same person (`person::same_person`: one name, or one verified identity). Answers
    /// are refused before a repeat is recorded; this also holds for rows written otherwise.
    pub fn grants(&self) -> usize {
        let granting: Vec<&Vote> = self.votes.iter().filter(|vote| vote.grant).collect();
        granting
            .iter()
            .enumerate()
            .filter(|(at, vote)| {
                !granting[..*at].iter().any(|earlier| {
                    person::same_person(
                        &earlier.approver,
                        earlier.verified.as_ref(),
                        &vote.approver,
                        vote.verified.as_ref(),
                    )
                    .is_some()
                })
            })
            .count()
    }

    /// The record as the CLI and the bindings show it.
    pub fn to_json(&self) -> serde_json::Value {
        use crate::clock::render;
        use serde_json::Value;
        let stored = self.action.as_ref();
        let claims = |verified: &Option<Verified>| verified.as_ref().map(Verified::claims_json);
        let identity = stored.and_then(|s| s.identity.clone());
        serde_json::json!({
            "approval_id": self.approval_id,
            "status": self.status.as_str(),
            "action": self.action_name,
            "action_hash": self.action_hash,
            "action_id": self.action_id,
            "arguments": self.arguments().unwrap_or(Value::Null),
            "resource": stored.and_then(|s| s.resource.clone()),
            "environment": stored.map(|s| s.environment.clone()),
            "action_recorded": stored.is_some(),
            "requested_by": {"agent": self.requested_by.agent, "user": self.requested_by.user},
            "requester_identity": {
                "verified": identity.is_some(),
                "issuer": identity.as_ref().and_then(|v| v.issuer.clone()),
                "claims": claims(&identity),
            },
            "rule": stored.map(|s| s.rule.clone()),
            "when": stored.and_then(|s| s.when.as_deref()).and_then(|w| crate::canonical::parse_json(w).ok()),
            "policy_hash": stored.and_then(|s| s.policy_hash.clone()),
            "policy_version": stored.and_then(|s| s.policy_version.clone()),
            "required": self.requirement.required,
            "roles": self.requirement.roles,
            "grants": self.grants(),
            "votes": self.votes.iter().map(|vote| serde_json::json!({
                "agent": vote.approver.agent,
                "user": vote.approver.user,
                "decision": if vote.grant { "grant" } else { "deny" },
                "verified": vote.verified.is_some(),
                "issuer": vote.verified.as_ref().and_then(|v| v.issuer.clone()),
                "at": render(vote.at),
                "note": vote.note,
            })).collect::<Vec<_>>(),
            "precondition": self.precondition,
            "requested_at": render(self.requested_at),
            "expires_at": render(self.expires_at),
            "approver": self.approver,
            "answered_at": self.answered_at.map(render),
            "consumed_at": self.consumed_at.map(render),
            "consumed_by": self.consumed_by,
            "note": self.note,
        })
    }
}

fn rebuild(record: &ApprovalRecord, stored: &RequestedAction) -> Result<Action, String> {
    let arguments = match crate::canonical::parse_json(&stored.arguments) {
        Ok(serde_json::Value::Object(map)) => map,
        Ok(_) => return Err("holds arguments that are not a JSON object".into()),
        Err(e) => return Err(format!("holds arguments that are not JSON ({e})")),
    };
    Ok(Action {
        action_id: record.action_id.clone(),
        name: record.action_name.clone(),
        arguments,
        principal: record.requested_by.clone(),
        resource: stored.resource.clone(),
        environment: stored.environment.clone(),
    })
}

/// What a store must do with one approval check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The approval applies: consume it with the reservation.
    Proceed,
    /// Refuse with this error; nothing is written.
    Refuse(Error),
    /// The approval lapsed: mark it `expired`, keep that write, and refuse.
    ExpireAndRefuse(Error),
}

fn mismatch(reason: &str, approval_id: &str, detail: String) -> Error {
    Error::ApprovalMismatch { reason: reason.to_owned(), approval_id: approval_id.to_owned(), detail }
}

/// May `approver` still answer this request? Pending, unexpired, shown (its action recorded),
/// not the requester, entitled by the request's requirement, and not an answer already given.
pub fn check_answerable(
    record: Option<&ApprovalRecord>,
    approval_id: &str,
    approver: &Approver,
    now: Micros,
) -> Verdict {
    let Some(record) = record else {
        return Verdict::Refuse(mismatch("unknown", approval_id, "no such approval request".into()));
    };
    if record.status != ApprovalStatus::Pending {
        return Verdict::Refuse(mismatch(
            record.status.as_str(),
            approval_id,
            format!("it is already {}, and a request is answered exactly once", record.status.as_str()),
        ));
    }
    if now > record.expires_at {
        return Verdict::ExpireAndRefuse(mismatch(
            "expired",
            approval_id,
            format!("it expired at {}", crate::clock::render(record.expires_at)),
        ));
    }
    if record.action.is_none() {
        return Verdict::Refuse(mismatch(
            "action_not_recorded",
            approval_id,
            "it was requested before Warden kept the whole action, so what it binds cannot be shown and it \
             cannot be answered; propose the action again to ask anew"
                .into(),
        ));
    }
    let requester_identity = record.action.as_ref().and_then(|stored| stored.identity.as_ref());
    if let Some(found) = person::is_requester(approver, &record.requested_by, requester_identity) {
        let how = match found {
            person::Match::Name => {
                "requested this action (names compared part by part, agent and user, after Unicode NFKC case \
                 folding and the TR39 confusables skeleton)"
            }
            person::Match::Identity => "carries the requester's verified identity (the same issuer and sub)",
        };
        return Verdict::Refuse(mismatch(
            "approver_is_requester",
            approval_id,
            format!("{} {how} and cannot also approve or deny it", shown_label(&approver.principal)),
        ));
    }
    if let Err((reason, detail)) = record.requirement.entitles(approver) {
        return Verdict::Refuse(mismatch(reason, approval_id, detail));
    }
    let earlier = record.votes.iter().find_map(|vote| {
        person::same_person(&vote.approver, vote.verified.as_ref(), &approver.principal, approver.verified.as_ref())
            .map(|found| (vote, found))
    });
    if let Some((vote, found)) = earlier {
        let decision = if vote.grant { "grant" } else { "deny" };
        let detail = match found {
            person::Match::Name => format!(
                "{} already answered it ({decision}); each approver counts once",
                shown_label(&approver.principal)
            ),
            person::Match::Identity => format!(
                "{} carries the verified identity (the same issuer and sub) of {}, who already answered it \
                 ({decision}); each verified identity counts once, whatever name it answers under",
                shown_label(&approver.principal),
                shown_label(&vote.approver)
            ),
        };
        return Verdict::Refuse(mismatch("already_answered", approval_id, detail));
    }
    Verdict::Proceed
}

fn shown_label(principal: &Principal) -> String {
    format!("{:?}", person::label(principal))
}

/// The reason a presented approval that lapsed is refused with (distinct from
/// `approval_denied`).
pub const EXPIRED: &str = "approval_expired";

/// Does this presented approval authorize exactly this action, now? The hash is checked
/// before the status, so a mutated action leaves the approval untouched and still usable for
/// the action the human actually saw. A request fingerprinted with a precondition is spent only
/// when `precondition` (the fingerprint taken just now) is the same; otherwise it is refused
/// `precondition_changed` and stays granted.
pub fn check_consumable(
    record: Option<&ApprovalRecord>,
    approval_id: &str,
    action_hash: &str,
    precondition: Option<&str>,
    now: Micros,
) -> Verdict {
    let Some(record) = record else {
        return Verdict::Refuse(mismatch("unknown", approval_id, "no such approval".into()));
    };
    if record.action_hash != action_hash {
        return Verdict::Refuse(mismatch(
            "mismatch",
            approval_id,
            format!("it authorizes {}, not {action_hash}", record.action_hash),
        ));
    }
    // Expiry is not denial: a request that lapsed unanswered, or a grant that lapsed unspent,
    // is refused as `approval_expired`, and a new request may be made for the action.
    let expired = || {
        mismatch(
            EXPIRED,
            approval_id,
            format!(
                "it expired at {} ({}); nobody denied it, and proposing the action again asks anew",
                crate::clock::render(record.expires_at),
                if record.status == ApprovalStatus::Granted { "granted and never used" } else { "never answered" }
            ),
        )
    };
    match record.status {
        ApprovalStatus::Granted => {}
        ApprovalStatus::Pending if now > record.expires_at => return Verdict::ExpireAndRefuse(expired()),
        ApprovalStatus::Expired => return Verdict::Refuse(expired()),
        ApprovalStatus::Denied => {
            return Verdict::Refuse(Error::Denied {
                reason: crate::error::DenialReason::ApprovalDenied,
                detail: format!(
                    "approval {approval_id} was denied by {}",
                    record.approver.as_deref().unwrap_or("an approver")
                ),
            })
        }
        other => {
            return Verdict::Refuse(mismatch(
                other.as_str(),
                approval_id,
                format!("it is {}, not granted", other.as_str()),
            ))
        }
    }
    if now > record.expires_at {
        return Verdict::ExpireAndRefuse(expired());
    }
    if let Some(expected) = record.precondition.as_deref() {
        if precondition != Some(expected) {
            let now_text =
                precondition.map_or_else(|| "no precondition was checked".to_owned(), |p| format!("it is {p}"));
            return Verdict::Refuse(mismatch(
                "precondition_changed",
                approval_id,
                format!(
                    "the precondition was {expected} when approval was requested and {now_text} now: the world \
                     changed between request and approval, so the approver's yes no longer applies (the approval \
                     stays granted for the state it was given in)"
                ),
            ));
        }
    }
    Verdict::Proceed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(status: ApprovalStatus) -> ApprovalRecord {
        let action = Action::new(
            "stripe.refund",
            serde_json::json!({"payment_id": "pay_1", "amount": 90000}),
            Principal { agent: "refund-agent".into(), user: Some("ada".into()) },
            None,
            "production",
        )
        .unwrap();
        ApprovalRecord {
            approval_id: "apr_1".into(),
            action_hash: action.hash().unwrap(),
            action_name: action.name.clone(),
            action_id: action.action_id.clone(),
            requested_by: action.principal.clone(),
            status,
            requested_at: 0,
            expires_at: 100,
            approver: None,
            answered_at: None,
            consumed_at: None,
            consumed_by: None,
            note: None,
            action: Some(RequestedAction {
                arguments: crate::canonical::to_canonical_string(&action.canonical_arguments(), "arguments").unwrap(),
                resource: None,
                environment: "production".into(),
                identity: None,
                rule: "rule[1]".into(),
                when: None,
                policy_hash: None,
                policy_version: None,
            }),
            requirement: Requirement::default(),
            votes: Vec::new(),
            precondition: None,
        }
    }

    fn asserted(user: &str) -> Approver {
        Approver::asserted(Principal { agent: "cli".into(), user: Some(user.into()) })
    }

    fn refused_for(verdict: &Verdict) -> Option<&str> {
        match verdict {
            Verdict::Refuse(Error::ApprovalMismatch { reason, .. }) => Some(reason),
            _ => None,
        }
    }

    #[test]
    fn the_requester_cannot_answer_their_own_request_in_any_spelling() {
        let pending = record(ApprovalStatus::Pending);
        for who in ["refund-agent", "ada", "ADA", "ada ", " Ada", "cli:ada", "ａｄａ", "CLI:ＡＤＡ", "a\u{200B}da"]
        {
            let verdict = check_answerable(Some(&pending), "apr_1", &asserted(who), 1);
            assert_eq!(refused_for(&verdict), Some("approver_is_requester"), "{who:?}");
        }
        assert_eq!(check_answerable(Some(&pending), "apr_1", &asserted("bob"), 1), Verdict::Proceed);
    }

    #[test]
    fn a_stored_action_that_no_longer_hashes_to_its_hash_fails_the_binding_check() {
        let mut altered = record(ApprovalStatus::Pending);
        altered.check_binding().unwrap();
        if let Some(stored) = altered.action.as_mut() {
            stored.arguments = r#"{"amount":9000000,"payment_id":"pay_1"}"#.into();
        }
        assert!(altered.check_binding().unwrap_err().contains("was altered"));
    }

    #[test]
    fn hash_is_checked_before_status() {
        let verdict = check_consumable(Some(&record(ApprovalStatus::Consumed)), "apr_1", "sha256:bb", None, 1);
        assert_eq!(refused_for(&verdict), Some("mismatch"));
    }

    #[test]
    fn a_changed_or_missing_precondition_refuses_a_granted_approval() {
        let mut granted = record(ApprovalStatus::Granted);
        granted.precondition = Some("sha256:before".into());
        let hash = granted.action_hash.clone();
        let check = |now: Option<&str>| check_consumable(Some(&granted), "apr_1", &hash, now, 1);
        assert_eq!(check(Some("sha256:before")), Verdict::Proceed);
        assert_eq!(refused_for(&check(Some("sha256:after"))), Some("precondition_changed"));
        assert_eq!(refused_for(&check(None)), Some("precondition_changed"));
    }

    fn granted() -> ApprovalRecord {
        let mut granted = record(ApprovalStatus::Granted);
        granted.approver = Some("bob".into());
        granted
    }

    fn refusal_reason(verdict: &Verdict) -> Option<&str> {
        match verdict {
            Verdict::Refuse(Error::ApprovalMismatch { reason, .. })
            | Verdict::ExpireAndRefuse(Error::ApprovalMismatch { reason, .. }) => Some(reason),
            _ => None,
        }
    }

    fn refusal_detail(verdict: &Verdict) -> &str {
        match verdict {
            Verdict::Refuse(Error::ApprovalMismatch { detail, .. })
            | Verdict::ExpireAndRefuse(Error::ApprovalMismatch { detail, .. }) => detail,
            other => panic!("not a refusal: {other:?}"),
        }
    }

    #[test]
    fn a_refused_approver_is_named_in_the_message() {
        let pending = record(ApprovalStatus::Pending);
        let own = check_answerable(Some(&pending), "apr_1", &asserted("ada"), 1);
        assert!(refusal_detail(&own).starts_with("\"cli:ada\" requested this action"), "{own:?}");
        let mut voted = record(ApprovalStatus::Pending);
        voted.votes.push(Vote { approver: asserted("bob").principal, verified: None, grant: true, at: 0, note: None });
        let again = check_answerable(Some(&voted), "apr_1", &asserted("bob"), 1);
        assert_eq!(refusal_reason(&again), Some("already_answered"));
        assert_eq!(refusal_detail(&again), "\"cli:bob\" already answered it (grant); each approver counts once");
    }

    #[test]
    fn the_shown_document_is_the_canonical_action_the_hash_covers() {
        let pending = record(ApprovalStatus::Pending);
        let document = pending.action_document().expect("a recorded action");
        let hashed = crate::canonical::sha256_prefixed(
            crate::canonical::to_canonical_string(&document, "doc").unwrap().as_bytes(),
        );
        assert_eq!(hashed, pending.action_hash, "{document}");
        assert_eq!(document["name"], "stripe.refund");
        assert_eq!(document["arguments"], serde_json::json!({"amount": 90000, "payment_id": "pay_1"}));
        assert_eq!(pending.arguments(), Some(document["arguments"].clone()));
        let mut migrated = record(ApprovalStatus::Pending);
        migrated.action = None;
        assert_eq!((migrated.action_document(), migrated.arguments()), (None, None));
    }

    #[test]
    fn grants_count_the_granting_votes_only() {
        let mut request = record(ApprovalStatus::Pending);
        assert_eq!(request.grants(), 0);
        for (who, grant) in [("bob", true), ("carol", false), ("dan", true)] {
            request.votes.push(Vote { approver: asserted(who).principal, verified: None, grant, at: 0, note: None });
        }
        assert_eq!(request.grants(), 2);
    }

    fn verified_vote(agent: &str, user: &str, sub: &str) -> Vote {
        let verified = Verified::new(Some("https://idp.test"), &serde_json::json!({ "sub": sub })).unwrap();
        Vote {
            approver: Principal::new(agent, Some(user)).unwrap(),
            verified: Some(verified),
            grant: true,
            at: 0,
            note: None,
        }
    }

    #[test]
    fn grants_count_people_one_verified_identity_or_one_name_once() {
        let mut request = record(ApprovalStatus::Pending);
        request.votes.push(verified_vote("slack", "bob", "u-123"));
        // The same identity under another name, and an asserted vote under the verified voter's
        // name: neither is a second person.
        request.votes.push(verified_vote("teams", "robert", "u-123"));
        request.votes.push(Vote {
            approver: asserted("BOB").principal,
            verified: None,
            grant: true,
            at: 0,
            note: None,
        });
        assert_eq!(request.grants(), 1);
        request.votes.push(verified_vote("slack", "carol", "u-456"));
        assert_eq!(request.grants(), 2);
    }

    #[test]
    fn an_answer_by_a_person_who_already_answered_is_refused_by_identity_or_by_name() {
        let mut voted = record(ApprovalStatus::Pending);
        voted.votes.push(verified_vote("slack", "bob", "u-123"));
        let verified = |user: &str, sub: &str| {
            let vote = verified_vote("teams", user, sub);
            Approver { principal: vote.approver, verified: vote.verified }
        };
        let by_identity = check_answerable(Some(&voted), "apr_1", &verified("robert", "u-123"), 1);
        assert_eq!(refusal_reason(&by_identity), Some("already_answered"));
        assert!(
            refusal_detail(&by_identity).contains("the verified identity (the same issuer and sub) of \"slack:bob\"")
        );
        let by_name = check_answerable(Some(&voted), "apr_1", &asserted("b\u{043E}b"), 1);
        assert_eq!(refusal_reason(&by_name), Some("already_answered"));
        assert_eq!(check_answerable(Some(&voted), "apr_1", &verified("carol", "u-456"), 1), Verdict::Proceed);
    }

    #[test]
    fn an_approver_with_the_verified_requesters_identity_is_the_requester() {
        let mut pending = record(ApprovalStatus::Pending);
        if let Some(stored) = pending.action.as_mut() {
            stored.identity = verified_vote("x", "x", "u-9").verified;
        }
        let robert = verified_vote("slack", "robert", "u-9");
        let approver = Approver { principal: robert.approver, verified: robert.verified };
        let verdict = check_answerable(Some(&pending), "apr_1", &approver, 1);
        assert_eq!(refusal_reason(&verdict), Some("approver_is_requester"));
        assert!(refusal_detail(&verdict).contains("carries the requester's verified identity"));
    }

    #[test]
    fn the_default_approval_ttl_is_exactly_fifteen_minutes() {
        assert_eq!(DEFAULT_APPROVAL_TTL, 900_000_000);
    }

    #[test]
    fn a_request_is_answerable_at_its_expiry_instant_and_expires_one_microsecond_after() {
        let pending = record(ApprovalStatus::Pending);
        assert_eq!(check_answerable(Some(&pending), "apr_1", &asserted("bob"), pending.expires_at), Verdict::Proceed);
        let late = check_answerable(Some(&pending), "apr_1", &asserted("bob"), pending.expires_at + 1);
        assert!(matches!(late, Verdict::ExpireAndRefuse(_)), "{late:?}");
        assert_eq!(refusal_reason(&late), Some("expired"));
    }

    #[test]
    fn a_granted_approval_is_consumable_at_its_expiry_instant_and_expires_one_microsecond_after() {
        let granted = granted();
        let hash = granted.action_hash.clone();
        assert_eq!(check_consumable(Some(&granted), "apr_1", &hash, None, granted.expires_at), Verdict::Proceed);
        let late = check_consumable(Some(&granted), "apr_1", &hash, None, granted.expires_at + 1);
        assert!(matches!(late, Verdict::ExpireAndRefuse(_)), "{late:?}");
        assert_eq!(refusal_reason(&late), Some("approval_expired"));
        assert!(refusal_detail(&late).contains("granted and never used"), "{late:?}");
    }

    #[test]
    fn a_request_presented_after_it_lapsed_unanswered_is_expired_not_pending_nor_denied() {
        let pending = record(ApprovalStatus::Pending);
        let hash = pending.action_hash.clone();
        // (status, now, reason, whether the lapse is to be written now)
        let table = [
            (ApprovalStatus::Pending, pending.expires_at, "pending", false),
            (ApprovalStatus::Pending, pending.expires_at + 1, "approval_expired", true),
            (ApprovalStatus::Expired, 1, "approval_expired", false),
            (ApprovalStatus::Expired, pending.expires_at + 1, "approval_expired", false),
        ];
        for (status, now, reason, expire) in table {
            let verdict = check_consumable(Some(&record(status)), "apr_1", &hash, None, now);
            assert_eq!(refusal_reason(&verdict), Some(reason), "{status:?} at {now}");
            assert_eq!(matches!(verdict, Verdict::ExpireAndRefuse(_)), expire, "{status:?} at {now}: {verdict:?}");
            if reason == EXPIRED {
                assert!(refusal_detail(&verdict).contains("never answered"), "{verdict:?}");
            }
        }
    }

    #[test]
    fn a_request_is_answered_exactly_once() {
        for status in
            [ApprovalStatus::Granted, ApprovalStatus::Denied, ApprovalStatus::Expired, ApprovalStatus::Consumed]
        {
            let verdict = check_answerable(Some(&record(status)), "apr_1", &asserted("bob"), 1);
            assert_eq!(refusal_reason(&verdict), Some(status.as_str()), "{status:?}");
            assert!(matches!(verdict, Verdict::Refuse(_)));
        }
        let unknown = check_answerable(None, "apr_9", &asserted("bob"), 1);
        assert_eq!(refusal_reason(&unknown), Some("unknown"));
    }

    #[test]
    fn the_requester_is_recognized_whatever_the_case_and_surrounding_spaces() {
        for who in [" Refund-Agent", "ADA ", "Ada"] {
            let verdict = check_answerable(Some(&record(ApprovalStatus::Pending)), "apr_1", &asserted(who), 1);
            assert_eq!(refusal_reason(&verdict), Some("approver_is_requester"), "{who:?}");
        }
        let mut agent_only = record(ApprovalStatus::Pending);
        agent_only.requested_by.user = None;
        assert_eq!(check_answerable(Some(&agent_only), "apr_1", &asserted("ada"), 1), Verdict::Proceed);
    }

    #[test]
    fn only_a_granted_approval_for_exactly_this_hash_is_consumable() {
        let hash = granted().action_hash;
        assert_eq!(check_consumable(Some(&granted()), "apr_1", &hash, None, 1), Verdict::Proceed);
        let other = check_consumable(Some(&granted()), "apr_1", "sha256:bb", None, 1);
        assert_eq!(refusal_reason(&other), Some("mismatch"));
        for (status, reason) in [
            (ApprovalStatus::Pending, "pending"),
            (ApprovalStatus::Expired, "approval_expired"),
            (ApprovalStatus::Consumed, "consumed"),
        ] {
            let verdict = check_consumable(Some(&record(status)), "apr_1", &hash, None, 1);
            assert_eq!(refusal_reason(&verdict), Some(reason), "{status:?}");
        }
        let mut denied = record(ApprovalStatus::Denied);
        denied.approver = Some("bob".into());
        let verdict = check_consumable(Some(&denied), "apr_1", &hash, None, 1);
        assert!(
            matches!(verdict, Verdict::Refuse(Error::Denied { ref reason, ref detail }) if reason == "approval_denied" && detail.contains("bob")),
            "{verdict:?}"
        );
        assert_eq!(refusal_reason(&check_consumable(None, "apr_9", &hash, None, 1)), Some("unknown"));
    }
}
