//! The loaded document as the rest of Warden sees it: [`Document`], its [`ActionEntry`]s and
//! their [`Rule`]s, and the [`Mode`]. Types only; parsing them is the section parsers' work.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::clock::Micros;
use crate::condition::Condition;
use crate::decision::Decision;
use crate::template::Template;

use super::gateway::GatewaySettings;
use super::schema_kind::Schema;
use super::upstream::UpstreamPins;

/// Names a condition may not address: they are fields of the action or of its principal, not
/// arguments, and a rule written against one would silently match nothing (ctrlrun's rule).
pub const RESERVED_SUBJECTS: [&str; 9] =
    ["action_id", "agent", "claims", "environment", "expires_at", "issuer", "principal", "resource", "user"];

/// Whether decisions are applied or only recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Decisions are applied (the default).
    Enforce,
    /// Everything runs; receipts record what enforce mode would have done.
    Observe,
}

impl Mode {
    /// The mode as the document spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Enforce => "enforce",
            Mode::Observe => "observe",
        }
    }
}

/// The administrator's document, loaded strictly and hashed: the trust boundary.
#[derive(Debug, Clone)]
pub struct Document {
    /// The declared schema.
    pub schema: Schema,
    /// The administrator's label for this version (outside the policy hash).
    pub version: Option<String>,
    /// The environment the document is for, if it names one.
    pub environment: Option<String>,
    /// Enforce or observe.
    pub mode: Mode,
    /// Every action the document lists, by name; any other action is denied.
    pub actions: BTreeMap<String, ActionEntry>,
    /// The `authority` section as written (parsed values), which the policy hash covers.
    pub authority: Option<Value>,
    /// The same section as typed grants (`crate::authority`); `Some` exactly when `authority` is.
    pub authority_config: Option<crate::authority::Authority>,
    /// Validated by the sights module; kept as JSON here.
    pub sources: Option<Value>,
    /// `sources` as validated by `crate::sight::config` at load; empty when absent.
    pub sources_config: crate::sight::config::Sources,
    /// The top-level flag that lets sights and notification webhooks use plain http.
    pub allow_insecure_http: Option<bool>,
    /// `notify`: who is told of a new approval request (`warden/v1` only). Not part of the
    /// policy hash: it decides nothing.
    pub notify: Option<crate::approval::webhook::NotifyConfig>,
    /// `evidence`: the key and the bounds of automatic checkpoints (`warden/v1` only). Not part
    /// of the policy hash: it decides nothing.
    pub evidence: Option<crate::evidence::settings::EvidenceSettings>,
    /// `sign_in`: the JWT issuer people sign in to the console and the operator server through
    /// (`warden/v1` only). Not part of the policy hash: it decides no action.
    pub sign_in: Option<crate::identity::sign_in::SignIn>,
    /// `gateway`: what `warden gateway` does with methods it does not know (`warden/v1` only;
    /// the default otherwise). Not part of the policy hash: it decides no action.
    pub gateway: GatewaySettings,
    /// `sha256:` + hex. ctrlrun's definition for ctrlrun documents; for `warden/v1`, over the
    /// canonical JSON of `{actions, authority, environment, mode, schema, sources}` as parsed
    /// (`version` excluded: relabelling a document does not change the policy).
    pub policy_hash: String,
    /// The canonical policy `policy_hash` is the SHA-256 of, as bytes (canonical JSON): what the
    /// store keeps under the hash (`policies`) and `warden export` carries as
    /// `policies/<hex>.json`. It holds what decides (the entries, `authority`, `sources` with
    /// their credential references), never a credential value.
    pub canonical_policy: Vec<u8>,
    /// Load-time warnings: the document is valid, but something in it is probably a mistake.
    pub warnings: Vec<String>,
}

/// What the document says about one action.
#[derive(Debug, Clone)]
pub struct ActionEntry {
    /// Exactly one of `decision` and a non-empty `rules` is set.
    pub decision: Option<Decision>,
    /// The rules, in order; the first whose conditions all hold decides.
    pub rules: Vec<Rule>,
    /// `TemplateMode::Escaped` for `warden/v1`, `TemplateMode::Raw` for ctrlrun documents.
    pub effect: Option<Template>,
    /// The template that renders what the action acts on.
    pub resource: Option<Template>,
    /// How many FAILED attempts an effect may have before retries are refused.
    pub max_attempts: Option<u32>,
    /// `warden/v1` only.
    pub lease: Option<Micros>,
    /// `warden/v1` only.
    pub description: Option<String>,
    /// `approval` beside `decision: approve` (`warden/v1` only).
    pub approval: Option<crate::approval::Requirement>,
    /// `approval.scoped` beside `decision: approve`: what a scoped grant may reach (`None`: no
    /// scoped grant may be made).
    pub scoped: Option<crate::approval::scope::ScopeLimits>,
    /// `mcp.not_executed_on_error`: for `warden gateway`, an upstream `isError` on this tool
    /// means it did nothing (FAILED, retry allowed) instead of AMBIGUOUS. An unchecked claim.
    pub not_executed_on_error: bool,
    /// `upstream:` pins for `warden gateway` (`warden/v1` and `ctrlrun.policy/v8`).
    pub upstream: Option<UpstreamPins>,
}

/// One rule of an action: its conditions and the decision when they hold.
#[derive(Debug, Clone)]
pub struct Rule {
    /// Empty: the rule always matches. Conditions are in document order; all must hold.
    pub when: Vec<Condition>,
    /// The decision when every condition holds.
    pub decision: Decision,
    /// `approval: {required, roles}` on an `approve` rule (`warden/v1` only); `None` is one
    /// approver, any role.
    pub approval: Option<crate::approval::Requirement>,
    /// `approval.scoped` on an `approve` rule: what a scoped grant may reach (`None`: no scoped
    /// grant may be made under this rule).
    pub scoped: Option<crate::approval::scope::ScopeLimits>,
}
