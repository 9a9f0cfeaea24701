//! The gateway's knowledge of the upstream's tools: the tool set pinned from `tools/list`
//! answers (every page of one listing, relayed or the gateway's own), each tool's schema
//! compiled once per set, and the check every intercepted `tools/call` passes before anything
//! is sent upstream — the tool is in the pinned set, and its arguments match its
//! `inputSchema`.
//!
//! When no set is pinned yet, the first call has the gateway list the tools itself, on the
//! call's own transport (and, over HTTP, in the call's session), before it decides anything.

use std::sync::{Arc, Mutex, RwLock};

use serde_json::{json, Value};

use super::log;
use super::toolset::{self, Rejection, ToolSet, Validators};

/// The most pages one listing may take; a server that pages further is not pinned.
pub const MAX_PAGES: usize = 64;

/// Listings (page collections) followed at once: each relayed `tools/list` without a cursor
/// starts one; the oldest is dropped past this.
const MAX_COLLECTIONS: usize = 16;

/// One page of `tools/list`, fetched by the gateway itself over the call's transport.
pub trait ListTools {
    /// The JSON-RPC response to a `tools/list` with `cursor`.
    fn page(&self, cursor: Option<&str>) -> Result<Value, String>;
}

/// A tool set and its compiled schemas.
pub struct Pinned {
    pub set: ToolSet,
    pub validators: Validators,
}

impl Pinned {
    pub fn new(set: ToolSet) -> Pinned {
        let validators = toolset::compile(&set);
        Pinned { set, validators }
    }
}

/// Why a call is refused before it becomes a request upstream; the receipt's reason is `reason`.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    pub status: u16,
    pub code: i64,
    pub token: &'static str,
    pub reason: &'static str,
    pub message: String,
    /// Members of the error's `data` besides `error`, `reason` and `action_id`.
    pub data: Value,
}

/// `-41017`: the arguments do not match the tool's pinned `inputSchema`.
pub const SCHEMA_REJECTED: i64 = -41017;
/// `-41018`: the tool is not in the pinned tool set (or the set is unknown).
pub const TOOL_QUARANTINED: i64 = -41018;

/// A page collection: the tools of a listing so far, and the cursor its next page is asked with.
struct Collection {
    next: String,
    tools: Vec<Value>,
}

#[derive(Default)]
pub struct Catalog {
    pinned: RwLock<Option<Arc<Pinned>>>,
    collections: Mutex<Vec<Collection>>,
}

impl Catalog {
    pub fn new() -> Catalog {
        Catalog::default()
    }

    /// The pinned set, when there is one.
    pub fn pinned(&self) -> Option<Arc<Pinned>> {
        self.pinned.read().ok()?.clone()
    }

    /// A `tools/list` response for a request that carried `cursor`: its page joins the listing
    /// it continues (a request without a cursor starts one), and a listing whose last page has
    /// come is pinned. `Err` names why the answer was not usable (an error, no tools array, a
    /// set that cannot be pinned); nothing changes then.
    pub fn observe(&self, cursor: Option<&str>, envelope: &Value) -> Result<(), String> {
        let result = envelope.get("result").ok_or_else(|| match envelope.get("error") {
            Some(error) => {
                format!("the upstream answered tools/list with error {}", error.get("code").unwrap_or(&Value::Null))
            }
            None => "the tools/list answer has no result".to_owned(),
        })?;
        let page = result.get("tools").and_then(Value::as_array).ok_or("the tools/list result has no tools array")?;
        let next = match result.get("nextCursor") {
            None | Some(Value::Null) => None,
            Some(Value::String(next)) if !next.is_empty() => Some(next.clone()),
            Some(_) => return Err("the tools/list result's nextCursor is not a non-empty string".into()),
        };
        let mut collections = self.collections.lock().map_err(|_| "the listing table is unavailable")?;
        let mut tools = match cursor {
            None => Vec::new(),
            Some(cursor) => match collections.iter().position(|c| c.next == cursor) {
                Some(at) => collections.remove(at).tools,
                // A page of a listing this gateway did not see begin: it cannot be told whole.
                None => return Err("a tools/list page of a listing whose first page this gateway did not see".into()),
            },
        };
        tools.extend(page.iter().cloned());
        if tools.len() > toolset::MAX_TOOLS {
            return Err(format!("the listing holds over {} tools", toolset::MAX_TOOLS));
        }
        if let Some(next) = next {
            if collections.len() >= MAX_COLLECTIONS {
                collections.remove(0);
            }
            collections.push(Collection { next, tools });
            return Ok(());
        }
        drop(collections);
        let set = ToolSet::from_entries(&tools)?;
        self.install(set);
        Ok(())
    }

    fn install(&self, set: ToolSet) {
        if self.pinned().is_some_and(|pinned| pinned.set == set) {
            // The same list again: its schemas are compiled already.
            return;
        }
        let names: Vec<&str> = set.tools().keys().map(String::as_str).collect();
        log::info(&format!("pinned the upstream's {} tool(s), {}: {}", set.len(), set.digest(), names.join(", ")));
        let pinned = Arc::new(Pinned::new(set));
        if let Ok(mut slot) = self.pinned.write() {
            *slot = Some(pinned);
        }
    }

    /// The check before a call is sent: the tool is in the pinned set and `arguments` match its
    /// schema. `unlisted` says why no set could be listed, when none is pinned.
    pub fn check(&self, action: &str, tool: &str, arguments: &Value, unlisted: Option<&str>) -> Result<(), Refusal> {
        let pinned = self.pinned().ok_or_else(|| Refusal {
            status: 403,
            code: TOOL_QUARANTINED,
            token: "warden.tool_quarantined",
            reason: "tool_set_unknown",
            message: format!(
                "{action}: the upstream's tools could not be listed ({}), so the call cannot be checked; nothing was sent",
                unlisted.unwrap_or("no tools/list answer yet")
            ),
            data: json!({}),
        })?;
        match pinned.validators.check(tool, arguments) {
            Some(Ok(())) => Ok(()),
            None => Err(Refusal {
                status: 403,
                code: TOOL_QUARANTINED,
                token: "warden.tool_quarantined",
                reason: "tool_not_listed",
                message: format!("{action}: the upstream's tools/list does not offer {tool:?}; nothing was sent"),
                data: json!({}),
            }),
            Some(Err(Rejection::Invalid { pointer, message })) => Err(Refusal {
                status: 400,
                code: SCHEMA_REJECTED,
                token: "warden.schema_rejected",
                reason: "schema_rejected",
                message: format!(
                    "{action}: the arguments do not match the tool's inputSchema at {}: {message}; nothing was sent, fix the arguments and call again",
                    if pointer.is_empty() { "the top level" } else { pointer.as_str() }
                ),
                data: json!({"pointer": pointer}),
            }),
            Some(Err(Rejection::Unusable(why))) => Err(Refusal {
                status: 400,
                code: SCHEMA_REJECTED,
                token: "warden.schema_rejected",
                reason: "schema_unusable",
                message: format!("{action}: {why}, so no call of it can be checked; nothing was sent"),
                data: json!({}),
            }),
        }
    }
}

/// What a listing hands each page to: the page's answer and the cursor it was asked with.
pub type Observe<'a> = dyn Fn(Option<&str>, &Value) -> Result<(), String> + 'a;

/// List every page with `lister`, handing each answer to `observe` with the cursor it was
/// asked with; `Err` names why the listing did not complete.
pub fn list_all(lister: &dyn ListTools, observe: &Observe<'_>) -> Result<(), String> {
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let envelope = lister.page(cursor.as_deref())?;
        observe(cursor.as_deref(), &envelope)?;
        match envelope.get("result").and_then(|r| r.get("nextCursor")).and_then(Value::as_str) {
            Some(next) if !next.is_empty() => cursor = Some(next.to_owned()),
            _ => return Ok(()),
        }
    }
    Err(format!("the upstream's tools/list took more than {MAX_PAGES} pages"))
}

/// A `tools/list` request of the gateway's own, with an id no client is likely to use.
pub fn list_request(cursor: Option<&str>, meta: Option<&Value>) -> (Value, Value) {
    let mut random = [0u8; 8];
    let _ = getrandom::fill(&mut random);
    let id = json!(format!("warden-gateway-tools-list-{}", hex::encode(random)));
    let mut params = serde_json::Map::new();
    if let Some(cursor) = cursor {
        params.insert("cursor".into(), json!(cursor));
    }
    if let Some(meta) = meta {
        params.insert("_meta".into(), meta.clone());
    }
    let message = json!({"jsonrpc": "2.0", "id": id, "method": "tools/list", "params": params});
    (id, message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    fn page(id: u64, tools: Value, next: Option<&str>) -> Value {
        let mut result = json!({"tools": tools});
        if let Some(next) = next {
            result["nextCursor"] = json!(next);
        }
        json!({"jsonrpc": "2.0", "id": id, "result": result})
    }

    struct Scripted(RefCell<Vec<Result<Value, String>>>, RefCell<Vec<Option<String>>>);
    impl ListTools for Scripted {
        fn page(&self, cursor: Option<&str>) -> Result<Value, String> {
            self.1.borrow_mut().push(cursor.map(str::to_owned));
            self.0.borrow_mut().remove(0)
        }
    }

    fn refund() -> Value {
        json!({"name": "refund", "inputSchema": {"type": "object", "required": ["amount"],
               "properties": {"amount": {"type": "integer", "maximum": 100}}}})
    }

    #[test]
    fn a_listing_is_pinned_once_its_last_page_has_come() {
        let catalog = Catalog::new();
        catalog.observe(None, &page(1, json!([refund()]), Some("p2"))).expect("first page");
        assert!(catalog.pinned().is_none(), "not whole yet");
        let orphan = catalog.observe(Some("elsewhere"), &page(2, json!([]), None));
        assert!(orphan.is_err() && catalog.pinned().is_none(), "a page of an unseen listing pins nothing");
        catalog
            .observe(Some("p2"), &page(3, json!([{"name": "lookup", "inputSchema": {"type": "object"}}]), None))
            .expect("last");
        let pinned = catalog.pinned().expect("pinned");
        assert_eq!(pinned.set.tools().keys().collect::<Vec<_>>(), ["lookup", "refund"]);
        for bad in [
            json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": "no"}}),
            json!({"jsonrpc": "2.0", "id": 1, "result": {}}),
            page(1, json!([{"name": "x"}, {"name": "x"}]), None),
            json!({"jsonrpc": "2.0", "id": 1, "result": {"tools": [], "nextCursor": 5}}),
        ] {
            assert!(catalog.observe(None, &bad).is_err(), "{bad}");
        }
        assert_eq!(catalog.pinned().expect("kept").set.len(), 2, "an unusable answer changes nothing");
    }

    #[test]
    fn a_call_is_checked_against_the_pinned_schema_once_every_page_is_listed() {
        let catalog = Catalog::new();
        let refused = catalog
            .check("mcp.a.refund", "refund", &json!({"amount": 1}), Some("connect refused"))
            .expect_err("no set");
        assert_eq!((refused.code, refused.reason), (TOOL_QUARANTINED, "tool_set_unknown"));
        assert!(refused.message.contains("connect refused"), "{}", refused.message);
        let lister = Scripted(
            RefCell::new(vec![Ok(page(1, json!([refund()]), Some("c1"))), Ok(page(2, json!([]), None))]),
            RefCell::new(Vec::new()),
        );
        list_all(&lister, &|cursor, envelope| catalog.observe(cursor, envelope)).expect("listed");
        assert_eq!(*lister.1.borrow(), [None, Some("c1".to_owned())], "both pages, the second with its cursor");
        assert_eq!(catalog.check("mcp.a.refund", "refund", &json!({"amount": 100}), None), Ok(()));
        let over = catalog.check("mcp.a.refund", "refund", &json!({"amount": 101}), None).expect_err("over");
        assert_eq!((over.code, over.reason, over.status), (SCHEMA_REJECTED, "schema_rejected", 400));
        assert_eq!(over.data, json!({"pointer": "/amount"}));
        let missing = catalog.check("mcp.a.refund", "refund", &json!({}), None).expect_err("missing");
        assert_eq!(missing.data, json!({"pointer": ""}));
        let unlisted = catalog.check("mcp.a.other", "other", &json!({}), None).expect_err("unlisted");
        assert_eq!((unlisted.code, unlisted.reason), (TOOL_QUARANTINED, "tool_not_listed"));

        let failing = Scripted(RefCell::new(vec![Err("connect refused".into())]), RefCell::new(Vec::new()));
        assert_eq!(list_all(&failing, &|_, _| Ok(())), Err("connect refused".to_owned()));
        let endless = Scripted(
            RefCell::new((0..=MAX_PAGES).map(|i| Ok(page(i as u64, json!([]), Some(&format!("c{i}"))))).collect()),
            RefCell::new(Vec::new()),
        );
        let fresh = Catalog::new();
        assert!(list_all(&endless, &|c, e| fresh.observe(c, e)).is_err(), "a listing past MAX_PAGES");
        assert_eq!(endless.1.borrow().len(), MAX_PAGES);
        assert!(fresh.pinned().is_none(), "is not pinned");
    }
}
