//! The `authority:` section as the kernel uses it: the root grants by id and the depth bound.

use std::collections::BTreeMap;

use super::grant::Grant;
use super::pattern::shorten;

/// A root grant is depth 0 and a delegation of it depth 1; `0` forbids delegation entirely.
pub const DEFAULT_MAX_DELEGATION_DEPTH: u32 = 3;

/// Root grant ids may not use the namespace delegation ids are minted in.
pub const DELEGATION_ID_PREFIX: &str = "dlg_";

/// The document's grants. Opt-in, then fail-closed: once a document has one of these, every
/// action needs a grant.
#[derive(Debug, Clone, PartialEq)]
pub struct Authority {
    /// How many delegations deep a chain may go below a root grant.
    pub max_delegation_depth: u32,
    /// By id; iteration is in code-point order, which is also the tie-break order.
    pub grants: BTreeMap<String, Grant>,
}

impl Authority {
    /// Build from grants, refusing an invalid grant, an empty or `dlg_` id, and a duplicate id.
    pub fn new(grants: Vec<Grant>, max_delegation_depth: u32) -> Result<Authority, String> {
        let mut by_id = BTreeMap::new();
        for grant in grants {
            grant.validate().map_err(|e| format!("grant '{}': {e}", shorten(&grant.id)))?;
            check_root_id(&grant.id)?;
            if by_id.contains_key(&grant.id) {
                return Err(format!(
                    "duplicate grant id '{}'; a delegation names its parent by id, so two grants answering \
                     to one name is an ambiguity nobody can resolve later",
                    shorten(&grant.id)
                ));
            }
            by_id.insert(grant.id.clone(), grant);
        }
        Ok(Authority { max_delegation_depth, grants: by_id })
    }
}

/// A root grant's id: non-empty and outside the delegation namespace.
pub fn check_root_id(id: &str) -> Result<(), String> {
    if id.is_empty() {
        return Err("'id' must be a non-empty string".to_owned());
    }
    if id.starts_with(DELEGATION_ID_PREFIX) {
        return Err(format!(
            "grant id '{}' may not begin '{DELEGATION_ID_PREFIX}': that namespace is minted for delegations, \
             and one namespace addresses both kinds",
            shorten(id)
        ));
    }
    if !super::grant::is_grant_id(id) {
        return Err(format!("grant id '{}' must match ^[A-Za-z0-9][A-Za-z0-9._-]*$", shorten(id)));
    }
    Ok(())
}
