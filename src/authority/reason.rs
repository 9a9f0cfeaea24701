//! The closed vocabularies of authority: evaluation reasons in their precedence order, the
//! containment dimensions, and the reasons a delegation is refused at creation.

use std::fmt;

/// Why an evaluation passed or failed. The variant order **is** the precedence order of
/// failures (SPEC v0.3 §4.3 with the v0.9 and v0.10 additions): when no grant passes, the
/// reported reason is the first of these that any candidate failed with, so the evidence for one
/// configuration does not depend on the order grants were written or checked in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AuthorityReason {
    /// A stored delegation could not be read, parsed or addressed, or its chain loops.
    Unreadable,
    /// A delegation's chain is broken, over-deep, not contained, or under an expired or
    /// undelegable ancestor.
    Escalation,
    /// The delegation, or one above it, was revoked.
    Revoked,
    /// The grant expired (its own expiry instant is still valid).
    Expired,
    /// The grant names tasks and the call carries none of them.
    Task,
    /// A grant constraint does not hold for these arguments.
    Constraint,
    /// A presented hop names no delegation, or one whose shape does not reach the action.
    Hop,
    /// No grant's shape matches the action.
    NoAuthority,
    /// The passing reason.
    Grant,
}

impl AuthorityReason {
    /// The reason as receipts, events and the bindings spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            AuthorityReason::Unreadable => "authority_unreadable",
            AuthorityReason::Escalation => "authority_escalation",
            AuthorityReason::Revoked => "authority_revoked",
            AuthorityReason::Expired => "authority_expired",
            AuthorityReason::Task => "authority_task",
            AuthorityReason::Constraint => "authority_constraint",
            AuthorityReason::Hop => "authority_hop",
            AuthorityReason::NoAuthority => "no_authority",
            AuthorityReason::Grant => "authority_grant",
        }
    }

    /// Every failing reason, most important first.
    pub const PRECEDENCE: [AuthorityReason; 8] = [
        AuthorityReason::Unreadable,
        AuthorityReason::Escalation,
        AuthorityReason::Revoked,
        AuthorityReason::Expired,
        AuthorityReason::Task,
        AuthorityReason::Constraint,
        AuthorityReason::Hop,
        AuthorityReason::NoAuthority,
    ];
}

impl fmt::Display for AuthorityReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One row of the containment table (SPEC v0.3 §5.4, v0.9 §2.6, §6.2), in checking order. The
/// first four are also the shape rows an action is matched on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Dimension {
    /// Who the grant is addressed to.
    Subject,
    /// The action-name patterns.
    Actions,
    /// The resource patterns.
    Resources,
    /// The argument constraints.
    Constraints,
    /// The environments.
    Environments,
    /// The expiry.
    ExpiresAt,
    /// The task patterns.
    Tasks,
    /// The budgets.
    Budgets,
}

impl Dimension {
    /// Every dimension, in checking order.
    pub const ALL: [Dimension; 8] = [
        Dimension::Subject,
        Dimension::Actions,
        Dimension::Resources,
        Dimension::Constraints,
        Dimension::Environments,
        Dimension::ExpiresAt,
        Dimension::Tasks,
        Dimension::Budgets,
    ];

    /// The dimension as refusals spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Dimension::Subject => "subject",
            Dimension::Actions => "actions",
            Dimension::Resources => "resources",
            Dimension::Constraints => "constraints",
            Dimension::Environments => "environments",
            Dimension::ExpiresAt => "expires_at",
            Dimension::Tasks => "tasks",
            Dimension::Budgets => "budgets",
        }
    }
}

impl fmt::Display for Dimension {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a delegation was not created. Disjoint from [`AuthorityReason`]: creation never answers
/// with an evaluation reason, and the other way round.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CreationReason {
    /// The delegating principal's credential had expired (rule 0).
    PrincipalExpired,
    /// The proposed grant carried an id; a delegation's id is assigned, never chosen.
    IdAssigned,
    /// No root grant or live delegation has the parent id (rule 1).
    UnknownParent,
    /// The parent is not `delegable` (rule 2).
    ParentNotDelegable,
    /// The parent expired, is unreadable, or the chain above it is no longer valid (rule 3).
    ParentNotValid,
    /// The delegating principal does not match the parent's subject (rule 4).
    NotTheSubject,
    /// The new delegation would be deeper than `max_delegation_depth` (rule 5).
    MaxDepth,
    /// The child is not contained in its parent on one dimension (rule 6).
    Containment,
}

impl CreationReason {
    /// The reason as refusals spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            CreationReason::PrincipalExpired => "principal_expired",
            CreationReason::IdAssigned => "id_assigned",
            CreationReason::UnknownParent => "unknown_parent",
            CreationReason::ParentNotDelegable => "parent_not_delegable",
            CreationReason::ParentNotValid => "parent_not_valid",
            CreationReason::NotTheSubject => "not_the_subject",
            CreationReason::MaxDepth => "max_depth",
            CreationReason::Containment => "containment",
        }
    }
}

impl fmt::Display for CreationReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_precedence_order_is_the_declared_order() {
        let mut sorted = AuthorityReason::PRECEDENCE;
        sorted.sort();
        assert_eq!(sorted, AuthorityReason::PRECEDENCE);
        let names: Vec<&str> = AuthorityReason::PRECEDENCE.iter().map(|r| r.as_str()).collect();
        assert_eq!(
            names,
            [
                "authority_unreadable",
                "authority_escalation",
                "authority_revoked",
                "authority_expired",
                "authority_task",
                "authority_constraint",
                "authority_hop",
                "no_authority"
            ]
        );
    }
}
