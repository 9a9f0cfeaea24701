//! `warden/v1`'s approval settings: `approval: {required, roles, scoped}` on an `approve` rule
//! (or an entry whose `decision` is `approve`), and the top-level `notify` section.

use crate::approval::requirement::Requirement;
use crate::approval::scope::ScopeLimits;
use crate::approval::webhook::NotifyConfig;
use crate::decision::Decision;

use super::cx::Cx;
use super::error::DocumentError;
use super::tree::{child_path, Member, NodeValue};

const APPROVAL_KEYS: [&str; 3] = ["required", "roles", "scoped"];
const SCOPED_KEYS: [&str; 2] = ["max_uses", "max_minutes"];

impl Cx<'_> {
    /// `approval: {required: N, roles: [..], scoped: {max_uses, max_minutes}}` under `path`,
    /// allowed only with `decision: approve`; `scoped` only with `required: 1`.
    pub(super) fn approval_requirement(
        &self,
        member: &Member,
        path: &str,
        decision: Decision,
    ) -> Result<(Requirement, Option<ScopeLimits>), DocumentError> {
        let path = child_path(path, "approval");
        if decision != Decision::Approve {
            return Err(self.error(
                &path,
                Some(member.line),
                format!(
                    "'approval' says who must approve, so it goes only with 'decision: approve', not '{}'",
                    decision.as_str()
                ),
            ));
        }
        let NodeValue::Map(members) = &member.value.value else {
            return Err(self.error(
                &path,
                Some(member.line),
                format!(
                    "'approval' must be a mapping such as {{required: 2, roles: [finance]}}, got {}",
                    member.value.kind()
                ),
            ));
        };
        self.reject_unknown(members, &APPROVAL_KEYS, &path)?;
        let get = |key: &str| members.iter().find(|m| m.key == key);
        let required = match get("required") {
            None => 1,
            Some(required) => match &required.value.value {
                NodeValue::Int(text) => text.parse::<u32>().map_err(|_| {
                    self.error(
                        &child_path(&path, "required"),
                        Some(required.line),
                        format!("'required' is {text}; it must be 1..=20"),
                    )
                })?,
                _ => {
                    return Err(self.error(
                        &child_path(&path, "required"),
                        Some(required.line),
                        format!(
                            "'required' must be an integer (how many distinct approvers), got {}",
                            required.value.shown()
                        ),
                    ))
                }
            },
        };
        let mut roles = Vec::new();
        if let Some(list) = get("roles") {
            let NodeValue::Seq(items) = &list.value.value else {
                return Err(self.error(
                    &child_path(&path, "roles"),
                    Some(list.line),
                    format!("'roles' must be a list of role names, got {}", list.value.kind()),
                ));
            };
            for (index, item) in items.iter().enumerate() {
                match item.as_str() {
                    Some(name) => roles.push(name.to_owned()),
                    None => {
                        return Err(self.error(
                            &format!("{}[{index}]", child_path(&path, "roles")),
                            Some(item.line),
                            format!("a role must be a string, got {}", item.shown()),
                        ))
                    }
                }
            }
        }
        let requirement =
            Requirement::new(required, &roles).map_err(|message| self.error(&path, Some(member.line), message))?;
        let scoped = match get("scoped") {
            None => None,
            Some(scoped) => Some(self.scoped(scoped, &path, requirement.required)?),
        };
        Ok((requirement, scoped))
    }

    /// `scoped: {max_uses: N, max_minutes: M}`: what one scoped grant under this rule may reach.
    /// Only where one approver decides: a grant made by one answer of an M-of-N request would let
    /// that one approver speak for the others on every later action.
    fn scoped(&self, member: &Member, path: &str, required: u32) -> Result<ScopeLimits, DocumentError> {
        let path = child_path(path, "scoped");
        if required != 1 {
            return Err(self.error(
                &path,
                Some(member.line),
                format!(
                    "'scoped' goes only with 'required: 1': a scoped grant is made by one approver's answer, and this \
                     rule requires {required}"
                ),
            ));
        }
        let NodeValue::Map(members) = &member.value.value else {
            return Err(self.error(
                &path,
                Some(member.line),
                format!(
                    "'scoped' must be a mapping such as {{max_uses: 9, max_minutes: 30}}, got {}",
                    member.value.kind()
                ),
            ));
        };
        self.reject_unknown(members, &SCOPED_KEYS, &path)?;
        let field = |key: &str| -> Result<u32, DocumentError> {
            let Some(found) = members.iter().find(|m| m.key == key) else {
                return Err(self.error(&path, Some(member.line), format!("'scoped' needs '{key}'")));
            };
            match &found.value.value {
                NodeValue::Int(text) => text.parse::<u32>().map_err(|_| {
                    self.error(&child_path(&path, key), Some(found.line), format!("'{key}' is {text}, out of range"))
                }),
                _ => Err(self.error(
                    &child_path(&path, key),
                    Some(found.line),
                    format!("'{key}' must be an integer, got {}", found.value.shown()),
                )),
            }
        };
        let (max_uses, max_minutes) = (field("max_uses")?, field("max_minutes")?);
        ScopeLimits::new(max_uses, max_minutes).map_err(|message| self.error(&path, Some(member.line), message))
    }

    /// The `notify` section (`warden/v1` only).
    pub(super) fn notify(
        &self,
        member: &Member,
        allow_insecure_http: Option<bool>,
    ) -> Result<NotifyConfig, DocumentError> {
        let value = self.json(&member.value, "notify")?;
        NotifyConfig::parse(&value, allow_insecure_http).map_err(|e| self.error(&e.path, Some(member.line), e.message))
    }
}
