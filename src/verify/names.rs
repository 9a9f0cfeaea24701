//! The principals and names verify's scenarios act under, none of them a real caller's.

pub(super) const AGENT: &str = "warden-verify";
pub(super) const USER: &str = "verify-requester";
pub(super) const APPROVER: &str = "verify-approver";
/// The agent verify's approvers answer through: not the requester's (an approver with any part
/// of the requester's principal is the requester, `approval::person::is_requester`).
pub(super) const APPROVER_AGENT: &str = "warden-verify-host";
pub(super) const MUTATION_KEY: &str = "_verify_mutation";
pub(super) const UNKNOWN_ACTION: &str = "warden.verify.unknown_action";
