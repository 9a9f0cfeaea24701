//! `warden operator`, the real binary on a real store, spoken to as an MCP client would: over
//! stdio (one JSON-RPC message per line) and over Streamable HTTP (requests written by hand on a
//! TCP socket, the URL read from the first stdout line).
//!
//! What must hold: both transports initialize and list the same ten tools; the read tools
//! return what the CLI's `--json` commands print, whole actions included; a write answers
//! through the kernel as `operator:NAME`, verified by `warden-operator`, and the request it
//! grants can then be run; an approve with a scope makes a scoped grant that the next covered
//! proposals spend without a human until its uses run out, and revoking it makes the next one ask
//! again; every refused write — no token, a wrong or revoked token, the
//! requester approving its own request, a missing reason, an unknown id, a hash other than the
//! request's, a stray argument, a foreign Host or Origin — leaves the store file byte-identical,
//! and no answer echoes a token.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;
use warden::test_support::KernelInternals;

use serde_json::{json, Value};
use warden::{Action, Error, Kernel, KernelOptions, Principal};

mod common;

const WARDEN: &str = env!("CARGO_BIN_EXE_warden");

/// A note longer than `warden pending` shows unelided (40 characters): the tools show it whole.
const LONG_NOTE: &str = "refund for the duplicate charge of 3 March, ticket 88213, approved by the customer desk";

/// One store: a pending `stripe.refund` asked by refund-agent for ada, and an AMBIGUOUS effect
/// `refund:p1`.
struct Store {
    dir: tempfile::TempDir,
    approval_id: String,
}

fn refund(arguments: Value) -> Action {
    let principal = Principal::new("refund-agent", Some("ada")).expect("principal");
    Action::new("stripe.refund", arguments, principal, Some("acct_7"), "production").expect("action")
}

fn big_refund() -> Action {
    refund(json!({"payment_id": "p2", "amount": 400000, "note": LONG_NOTE}))
}

impl Store {
    fn new() -> Store {
        let dir = tempfile::tempdir().expect("tempdir");
        let kernel = Kernel::open(dir.path().join("state.redb"), KernelOptions::default()).expect("open kernel");
        let template = common::key_template();
        let lost = refund(json!({"payment_id": "p1", "amount": 500}));
        let allowed = common::allow(&lost, &template);
        kernel.propose(&allowed).expect("permit").ambiguous("the provider timed out").expect("ambiguous");
        let big = big_refund();
        let approval_id = match kernel.propose(&common::approve(&big, &template, None)) {
            Err(Error::ApprovalRequired { request_id, .. }) => request_id,
            other => panic!("expected an approval request, got {other:?}"),
        };
        Store { dir, approval_id }
    }

    fn path(&self) -> PathBuf {
        self.dir.path().join("state.redb")
    }

    fn bytes(&self) -> Vec<u8> {
        std::fs::read(self.path()).expect("read the store file")
    }

    fn cli(&self, args: &[&str]) -> (Option<i32>, String, String) {
        common::cli(&self.path(), args)
    }

    /// A CLI command's `--json` document.
    fn json(&self, args: &[&str]) -> Value {
        let mut all = args.to_vec();
        all.push("--json");
        let (code, stdout, stderr) = self.cli(&all);
        assert_eq!(code, Some(0), "warden {args:?}: {stderr}");
        serde_json::from_str(&stdout).expect("one JSON document")
    }

    /// `warden approvers add NAME --operator`: the operator token on the last line.
    fn operator(&self, name: &str) -> String {
        let (code, stdout, stderr) = self.cli(&["approvers", "add", name, "--operator"]);
        assert_eq!(code, Some(0), "{stderr}");
        let token = stdout.lines().last().expect("a last line").to_owned();
        assert!(token.starts_with("wot_"), "{stdout}");
        token
    }

    fn approval(&self) -> Value {
        self.json(&["inspect", &self.approval_id])["approval"].clone()
    }

    fn hash(&self) -> String {
        self.approval()["action_hash"].as_str().expect("an action hash").to_owned()
    }
}

/// `warden operator --stdio`, killed when dropped.
struct StdioServer {
    child: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
    next_id: u64,
}

impl StdioServer {
    fn start(store: &Path, token: Option<&str>) -> StdioServer {
        let mut command = Command::new(WARDEN);
        command
            .args(["operator", "--stdio", "--store"])
            .arg(store)
            .env_remove("WARDEN_STORE")
            .env_remove("WARDEN_CONFIG")
            .env_remove("WARDEN_OPERATOR_TOKEN")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        if let Some(token) = token {
            command.env("WARDEN_OPERATOR_TOKEN", token);
        }
        let mut child = command.spawn().expect("start warden operator --stdio");
        let input = child.stdin.take().expect("stdin");
        let output = BufReader::new(child.stdout.take().expect("stdout"));
        let mut server = StdioServer { child, input, output, next_id: 0 };
        let init = server.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                                                        "clientInfo": {"name": "test", "version": "1"}}),
        );
        assert_eq!(init["result"]["protocolVersion"], "2025-06-18", "{init}");
        server.send_line(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string());
        server
    }

    fn send_line(&mut self, line: &str) {
        self.input.write_all(line.as_bytes()).and_then(|()| self.input.write_all(b"\n")).expect("write a line");
        self.input.flush().expect("flush");
    }

    fn read(&mut self) -> Value {
        let mut line = String::new();
        self.output.read_line(&mut line).expect("read an answer");
        serde_json::from_str(&line).unwrap_or_else(|_| panic!("not one JSON answer: {line:?}"))
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        self.send_line(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string());
        let answer = self.read();
        assert_eq!(answer["id"], id, "{answer}");
        answer
    }

    /// A tools/call's result (`content`, `structuredContent`, `isError`).
    fn call(&mut self, tool: &str, arguments: Value) -> Value {
        let answer = self.request("tools/call", json!({"name": tool, "arguments": arguments}));
        answer.get("result").cloned().unwrap_or_else(|| panic!("{tool}: no result: {answer}"))
    }
}

impl Drop for StdioServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `warden operator --listen 127.0.0.1:0`, killed when dropped.
struct HttpServer {
    child: Child,
    address: String,
}

/// A status and a body, as read off the socket.
struct Answer {
    status: u16,
    head: String,
    body: String,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|_| panic!("{}: not JSON: {}", self.status, self.body))
    }
}

impl HttpServer {
    fn start(store: &Path) -> HttpServer {
        HttpServer::start_with(store, &[])
    }

    /// `warden operator --listen 127.0.0.1:0 --store STORE EXTRA…`.
    fn start_with(store: &Path, extra: &[&str]) -> HttpServer {
        let mut child = Command::new(WARDEN)
            .args(["operator", "--listen", "127.0.0.1:0", "--store"])
            .arg(store)
            .args(extra)
            .env_remove("WARDEN_STORE")
            .env_remove("WARDEN_CONFIG")
            .env_remove("WARDEN_OPERATOR_TOKEN")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start warden operator");
        let mut first = String::new();
        BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut first).expect("read the first line");
        let address = first
            .trim()
            .strip_prefix("http://")
            .and_then(|rest| rest.strip_suffix("/mcp"))
            .unwrap_or_else(|| panic!("the first line is not the URL: {first:?}"))
            .to_owned();
        HttpServer { child, address }
    }

    fn post(&self, headers: &[(&str, &str)], body: &str) -> Answer {
        let mut stream = TcpStream::connect(&self.address).expect("connect");
        stream.set_read_timeout(Some(Duration::from_secs(60))).expect("timeout");
        let mut request = "POST /mcp HTTP/1.1\r\nConnection: close\r\nContent-Type: application/json\r\n".to_owned();
        if !headers.iter().any(|(name, _)| name.eq_ignore_ascii_case("host")) {
            request.push_str(&format!("Host: {}\r\n", self.address));
        }
        for (name, value) in headers {
            request.push_str(&format!("{name}: {value}\r\n"));
        }
        request.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
        stream.write_all(request.as_bytes()).expect("write");
        let mut raw = String::new();
        stream.read_to_string(&mut raw).expect("read");
        let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
        let status = head.split(' ').nth(1).and_then(|code| code.parse().ok()).unwrap_or(0);
        Answer { status, head: head.to_owned(), body: body.to_owned() }
    }

    /// One JSON-RPC request with a bearer token.
    fn rpc(&self, token: &str, method: &str, params: Value) -> Answer {
        let bearer = format!("Bearer {token}");
        let body = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}).to_string();
        self.post(&[("Authorization", &bearer), ("Accept", "application/json, text/event-stream")], &body)
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn tool_names(listed: &Value) -> Vec<String> {
    let tools = listed["result"]["tools"].as_array().unwrap_or_else(|| panic!("no tools: {listed}"));
    tools.iter().map(|tool| tool["name"].as_str().unwrap_or_default().to_owned()).collect()
}

/// Request headers, name and value.
type Headers<'a> = Vec<(&'a str, &'a str)>;

const TOOLS: [&str; 10] = [
    "list_pending_approvals",
    "inspect",
    "effects",
    "receipts",
    "stats",
    "list_scoped_grants",
    "approve",
    "deny",
    "revoke_scoped_grant",
    "resolve",
];

#[test]
fn both_transports_initialize_and_list_the_same_tools() {
    let store = Store::new();
    let token = store.operator("bob");
    {
        let mut stdio = StdioServer::start(&store.path(), None);
        let listed = stdio.request("tools/list", json!({}));
        assert_eq!(tool_names(&listed), TOOLS);
        let pong = stdio.request("ping", json!({}));
        assert_eq!(pong["result"], json!({}));
        let unknown = stdio.request("tools/cal", json!({}));
        assert_eq!(unknown["error"]["code"], -32601, "{unknown}");
        let no_tool = stdio.request("tools/call", json!({"name": "drop_everything"}));
        assert_eq!(no_tool["error"]["code"], -32602, "{no_tool}");
    }
    let http = HttpServer::start(&store.path());
    let init = http.rpc(&token, "initialize", json!({"protocolVersion": "2025-11-25", "capabilities": {}}));
    assert_eq!(init.status, 200, "{}", init.body);
    assert!(init.head.to_ascii_lowercase().contains("content-type: application/json"), "{}", init.head);
    assert_eq!(init.json()["result"]["serverInfo"]["name"], "warden-operator");
    assert_eq!(init.json()["result"]["protocolVersion"], "2025-11-25");
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string();
    let accepted = http.post(&[("Authorization", &format!("Bearer {token}"))], &note);
    assert_eq!((accepted.status, accepted.body.as_str()), (202, ""));
    let listed = http.rpc(&token, "tools/list", json!({}));
    assert_eq!(tool_names(&listed.json()), TOOLS);
    for (tool, read_only) in listed.json()["result"]["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| (t["name"].as_str().unwrap_or_default().to_owned(), t["annotations"]["readOnlyHint"].as_bool()))
    {
        let writes = ["approve", "deny", "revoke_scoped_grant", "resolve"].contains(&tool.as_str());
        assert_eq!(read_only, Some(!writes), "{tool}");
    }
}

#[test]
fn the_read_tools_show_what_the_cli_shows_whole_actions_included() {
    let store = Store::new();
    let mut stdio = StdioServer::start(&store.path(), None);
    let pending = stdio.call("list_pending_approvals", json!({}));
    assert_eq!(pending["isError"], false, "{pending}");
    let approvals = &pending["structuredContent"]["approvals"];
    assert_eq!(approvals, &store.json(&["pending"]), "the same as `warden pending --json`");
    let first = &approvals[0];
    assert_eq!(first["approval_id"], store.approval_id.as_str());
    assert_eq!(first["arguments"], json!({"payment_id": "p2", "amount": 400000, "note": LONG_NOTE}), "{first}");
    assert_eq!((first["resource"].as_str(), first["environment"].as_str()), (Some("acct_7"), Some("production")));
    assert_eq!(first["requested_by"], json!({"agent": "refund-agent", "user": "ada"}));
    assert_eq!(first["action_hash"].as_str().map(|h| h.starts_with("sha256:")), Some(true), "{first}");
    // The text block is the same JSON (MCP clients without structured content read it).
    let text = pending["content"][0]["text"].as_str().expect("text");
    assert_eq!(serde_json::from_str::<Value>(text).ok().as_ref(), Some(&pending["structuredContent"]));
    assert!(text.contains(LONG_NOTE), "the note is whole");

    let inspected = stdio.call("inspect", json!({"id": store.approval_id}));
    assert_eq!(inspected["structuredContent"], store.json(&["inspect", &store.approval_id]));
    let ambiguous = stdio.call("effects", json!({"state": "ambiguous"}));
    assert_eq!(ambiguous["structuredContent"]["effects"], store.json(&["effects", "--state", "ambiguous"]));
    assert_eq!(ambiguous["structuredContent"]["effects"][0]["effect_key"], "refund:p1");
    let receipts = stdio.call("receipts", json!({"last": 5}));
    assert_eq!(receipts["structuredContent"]["receipts"], store.json(&["receipts", "--last", "5"]));
    let chain = stdio.call("receipts", json!({"verify_chain": true}));
    assert_eq!(chain["structuredContent"]["ok"], true, "{chain}");
    let stats = stdio.call("stats", json!({}));
    assert_eq!(stats["structuredContent"], store.json(&["stats"]));
    assert_eq!(stats["structuredContent"]["pending_approvals"], 1);
    assert_eq!(stats["structuredContent"]["effects"]["ambiguous"], 1);

    for (tool, arguments) in [
        ("inspect", json!({"id": "apr_nothing"})),
        ("inspect", json!({})),
        ("effects", json!({"state": "lost"})),
        ("effects", json!({"limit": 0})),
        ("receipts", json!({"last": 5, "verify_chain": true})),
        ("stats", json!({"verbose": true})),
    ] {
        let refused = stdio.call(tool, arguments.clone());
        assert_eq!(refused["isError"], true, "{tool} {arguments}: {refused}");
    }
}

#[test]
fn an_operator_approves_as_itself_verified_and_the_request_then_runs() {
    let store = Store::new();
    let token = store.operator("bob");
    let hash = store.hash();
    {
        let http = HttpServer::start(&store.path());
        let arguments = json!({"approval_id": store.approval_id, "action_hash": hash});
        let granted = http.rpc(&token, "tools/call", json!({"name": "approve", "arguments": arguments}));
        assert_eq!(granted.status, 200, "{}", granted.body);
        let result = &granted.json()["result"];
        assert_eq!(result["isError"], false, "{result}");
        assert_eq!(result["structuredContent"]["approval"]["status"], "granted");
        assert!(!granted.body.contains(&token), "the token is echoed");
        let record = store.approval();
        assert_eq!(record["approver"], "operator:bob", "{record}");
        assert_eq!(record["votes"][0]["verified"], true, "{record}");
        assert_eq!(record["votes"][0]["issuer"], "warden-operator", "{record}");
        // Single use stays the kernel's.
        let twice = http.rpc(&token, "tools/call", json!({"name": "approve", "arguments": arguments}));
        assert_eq!(twice.json()["result"]["isError"], true, "{}", twice.body);
    }
    // The agent's request, presented again with the approval, runs once.
    let kernel = Kernel::open(store.path(), KernelOptions::default()).expect("open kernel");
    let template = common::key_template();
    let big = big_refund();
    kernel
        .propose(&common::approve(&big, &template, Some(&store.approval_id)))
        .expect("the approved request is permitted")
        .commit(&json!({"id": "re_2"}))
        .expect("commit");
    assert_eq!(kernel.effect("refund:p2").expect("read").map(|e| e.state.to_string()).as_deref(), Some("committed"));
}

/// A document whose one `stripe.refund` rule asks a human and lets a scoped grant cover up to 5
/// further refunds for up to an hour.
const SCOPED_DOCUMENT: &str = r#"schema: warden/v1
actions:
  stripe.refund:
    effect: "refund:{payment_id}"
    rules:
      - decision: approve
        approval: { scoped: { max_uses: 5, max_minutes: 60 } }
"#;

fn scoped_warden(path: &Path) -> warden::Warden {
    let document = warden::document::load_str(SCOPED_DOCUMENT, "scoped.yaml").expect("document");
    warden::Warden::open(path, document, warden::WardenOptions::default()).expect("open")
}

/// ada's refund of `amount` for customer `cus_1`, as payment `payment`.
fn ada_refund(payment: &str, amount: i64) -> warden::ActionRequest<'static> {
    let ada = Principal::new("refund-agent", Some("ada")).expect("principal");
    warden::ActionRequest::new(
        "stripe.refund",
        json!({"payment_id": payment, "customer_id": "cus_1", "amount": amount}),
        ada,
    )
}

/// The proposal's outcome: the grant that covered it (committed), or the request it asks.
enum Outcome {
    Covered(String),
    Asks(String),
}

fn submit(warden: &warden::Warden, request: &warden::ActionRequest<'_>) -> Outcome {
    match warden.submit(request) {
        Ok(permit) => {
            let grant = permit.scoped_grant_id().expect("a permit with no approval names its grant").to_owned();
            permit.commit(&json!({"ok": true})).expect("commit");
            Outcome::Covered(grant)
        }
        Err(Error::ApprovalRequired { request_id, .. }) => Outcome::Asks(request_id),
        Err(other) => panic!("expected a permit or an approval request, got {other:?}"),
    }
}

fn asks(outcome: Outcome) -> String {
    match outcome {
        Outcome::Asks(id) => id,
        Outcome::Covered(grant) => panic!("covered by {grant}, expected to ask a human"),
    }
}

/// The receipts' documents, in chain order.
fn receipts(warden: &warden::Warden) -> Vec<Value> {
    let rows = warden.kernel().receipts(1, 1000).expect("receipts");
    rows.into_iter().map(|(_, row)| serde_json::from_str(&row.document).expect("a receipt document")).collect()
}

/// A store holding one pending request made under `SCOPED_DOCUMENT`.
fn scoped_store() -> Store {
    let dir = tempfile::tempdir().expect("tempdir");
    let warden = scoped_warden(&dir.path().join("state.redb"));
    let approval_id = asks(submit(&warden, &ada_refund("p0", 2000)));
    Store { dir, approval_id }
}

/// The operator's approve with a scope grants the request and makes a scoped grant (approver
/// `operator:bob`, verified); the next two covered refunds run without a human, each receipt
/// naming the grant; the third asks again. A second grant, revoked through the tool, covers
/// nothing more: the next refund asks. list_scoped_grants shows each state.
#[test]
fn an_operator_scoped_grant_covers_the_next_proposals_until_used_up_or_revoked() {
    let store = scoped_store();
    let token = store.operator("bob");
    let scope = json!({"uses": 2, "minutes": 30, "fixed": ["/customer_id"], "at_most": {"/amount": 5000}});
    let grant_id = {
        let mut stdio = StdioServer::start(&store.path(), Some(&token));
        let arguments = json!({"approval_id": store.approval_id, "action_hash": store.hash(), "scope": scope});
        let made = stdio.call("approve", arguments);
        assert_eq!(made["isError"], false, "{made}");
        let done = &made["structuredContent"];
        assert_eq!(done["approval"]["status"], "granted", "{done}");
        assert_eq!(done["grant"]["approver"], "operator:bob", "{done}");
        assert_eq!(done["grant"]["approver_verified"], true, "{done}");
        assert_eq!(done["grant"]["uses_left"], 2, "{done}");
        assert_eq!(done["grant"]["fixed_values"], json!({"/customer_id": "cus_1"}), "{done}");
        let listed = stdio.call("list_scoped_grants", json!({}));
        assert_eq!(listed["structuredContent"], store.json(&["grants", "list"]), "the CLI's document");
        assert_eq!(listed["structuredContent"]["grants"][0]["state"], "live", "{listed}");
        done["grant"]["grant_id"].as_str().expect("a grant id").to_owned()
    };
    let warden = scoped_warden(&store.path());
    let mut approved = ada_refund("p0", 2000);
    approved.approval_id = Some(&store.approval_id);
    warden.submit(&approved).expect("the approved refund").commit(&json!({"ok": true})).expect("commit");
    for payment in ["p1", "p2"] {
        match submit(&warden, &ada_refund(payment, 4000)) {
            Outcome::Covered(by) => assert_eq!(by, grant_id, "{payment}"),
            Outcome::Asks(id) => panic!("{payment} asked a human ({id}) with a use left"),
        }
    }
    let covered: Vec<Value> = receipts(&warden)
        .into_iter()
        .filter(|d| d["action"] == "stripe.refund" && d["scoped_grant_id"] == grant_id.as_str())
        .collect();
    let payments: Vec<&Value> = covered.iter().map(|d| &d["arguments"]["payment_id"]).collect();
    assert_eq!(payments, [&json!("p1"), &json!("p2")], "each covered refund's receipt names the grant");
    assert!(covered.iter().all(|d| d["result"] == "committed" && d["approver"] == "operator:bob"), "{covered:?}");
    // Its uses ran out: the next refund of the same shape asks a human again.
    let next = asks(submit(&warden, &ada_refund("p3", 4000)));
    drop(warden);

    // A second grant, revoked before it is spent: the next refund asks again.
    let second = Store { dir: store.dir, approval_id: next };
    let revoked_id = {
        let mut stdio = StdioServer::start(&second.path(), Some(&token));
        let arguments = json!({"approval_id": second.approval_id, "action_hash": second.hash(), "scope": scope});
        let made = stdio.call("approve", arguments);
        assert_eq!(made["isError"], false, "{made}");
        let id = made["structuredContent"]["grant"]["grant_id"].as_str().expect("a grant id").to_owned();
        let revoked = stdio.call("revoke_scoped_grant", json!({"grant_id": id, "reason": "the customer complained"}));
        assert_eq!(revoked["isError"], false, "{revoked}");
        let grant = &revoked["structuredContent"]["grant"];
        assert_eq!(grant["state"], "revoked", "{grant}");
        assert_eq!(grant["revoked"]["by"], "operator:bob", "{grant}");
        assert_eq!(grant["revoked"]["reason"], "the customer complained", "{grant}");
        assert_eq!(grant["uses_left"], 2, "{grant}");
        let live = stdio.call("list_scoped_grants", json!({}));
        assert_eq!(live["structuredContent"], json!({"grants": []}), "{live}");
        let all = stdio.call("list_scoped_grants", json!({"all": true}));
        let states: Vec<&Value> =
            all["structuredContent"]["grants"].as_array().into_iter().flatten().map(|g| &g["state"]).collect();
        assert_eq!(states.len(), 2, "{all}");
        assert!(states.contains(&&json!("used_up")) && states.contains(&&json!("revoked")), "{all}");
        id
    };
    let warden = scoped_warden(&second.path());
    let mut approved = ada_refund("p3", 4000);
    approved.approval_id = Some(&second.approval_id);
    warden.submit(&approved).expect("the approved refund").commit(&json!({"ok": true})).expect("commit");
    asks(submit(&warden, &ada_refund("p4", 4000)));
    let revocations = receipts(&warden)
        .iter()
        .filter(|d| d["action"] == "warden.approval.scoped_revoke" && d["scoped_grant_id"] == revoked_id.as_str())
        .count();
    assert_eq!(revocations, 1, "the revocation has its own receipt");
}

/// Every refused revocation — no token, a wrong token, no or a blank reason, an unknown or a
/// malformed id, a stray argument, a grant revoked already — says so, says nothing was changed,
/// and leaves the store file byte-identical.
#[test]
fn refused_revocations_change_nothing_in_the_store() {
    let store = scoped_store();
    let bob = store.operator("bob");
    let wrong = format!("wot_{}", "0".repeat(64));
    let grant_id = {
        let mut stdio = StdioServer::start(&store.path(), Some(&bob));
        let scope = json!({"uses": 1, "minutes": 5});
        let arguments = json!({"approval_id": store.approval_id, "action_hash": store.hash(), "scope": scope});
        let made = stdio.call("approve", arguments);
        let id = made["structuredContent"]["grant"]["grant_id"].as_str().expect("a grant id").to_owned();
        let revoked = stdio.call("revoke_scoped_grant", json!({"grant_id": id, "reason": "done"}));
        assert_eq!(revoked["isError"], false, "{revoked}");
        id
    };
    let unknown = format!("sgr_{}", "0".repeat(32));
    // (why, token, arguments, what the refusal says)
    let cases: Vec<(&str, Option<&str>, Value, &str)> = vec![
        ("no token", None, json!({"grant_id": grant_id, "reason": "x"}), "a write needs an operator token"),
        (
            "a wrong token",
            Some(&wrong),
            json!({"grant_id": grant_id, "reason": "x"}),
            "the operator token is not valid",
        ),
        ("no reason", Some(&bob), json!({"grant_id": grant_id}), "a reason is required"),
        ("a blank reason", Some(&bob), json!({"grant_id": grant_id, "reason": "  "}), "a reason is required"),
        ("no id", Some(&bob), json!({"reason": "x"}), "grant_id is required"),
        ("an unknown id", Some(&bob), json!({"grant_id": unknown, "reason": "x"}), "no scoped grant sgr_000"),
        ("a malformed id", Some(&bob), json!({"grant_id": "sgr_1", "reason": "x"}), "sgr_ followed by 32"),
        (
            "a stray argument",
            Some(&bob),
            json!({"grant_id": grant_id, "reason": "x", "by": "eve"}),
            "no argument \"by\"",
        ),
        (
            "revoked already",
            Some(&bob),
            json!({"grant_id": grant_id, "reason": "x"}),
            "was revoked already, by operator:bob",
        ),
    ];
    for (why, token, arguments, says) in &cases {
        let mut stdio = StdioServer::start(&store.path(), *token);
        let before = store.bytes();
        let refused = stdio.call("revoke_scoped_grant", arguments.clone());
        assert!(store.bytes() == before, "{why}: {arguments} changed the store file");
        assert_eq!(refused["isError"], true, "{why}: {refused}");
        let text = refused["content"][0]["text"].as_str().unwrap_or_default();
        assert!(text.contains(says) && text.ends_with("nothing was changed"), "{why}: {text}");
        for secret in [&bob, &wrong] {
            assert!(!refused.to_string().contains(secret.as_str()), "{why}: a token was echoed: {refused}");
        }
    }
}

#[test]
fn deny_records_the_reason_and_the_operator() {
    let store = Store::new();
    let token = store.operator("bob");
    let mut stdio = StdioServer::start(&store.path(), Some(&token));
    let denied = stdio.call("deny", json!({"approval_id": store.approval_id, "reason": "too large"}));
    assert_eq!(denied["isError"], false, "{denied}");
    let record = store.approval();
    assert_eq!((record["status"].as_str(), record["note"].as_str()), (Some("denied"), Some("too large")), "{record}");
    assert_eq!(record["approver"], "operator:bob", "{record}");
}

#[test]
fn resolve_moves_the_ambiguous_effect_once_naming_who_and_why() {
    let store = Store::new();
    let token = store.operator("bob");
    let mut stdio = StdioServer::start(&store.path(), Some(&token));
    let arguments =
        json!({"effect_key": "refund:p1", "attempt": 1, "outcome": "committed", "reason": "seen in the dashboard"});
    let resolved = stdio.call("resolve", arguments.clone());
    assert_eq!(resolved["isError"], false, "{resolved}");
    assert_eq!(resolved["structuredContent"]["effect"]["state"], "committed");
    let record = store.json(&["inspect", "refund:p1"])["effect"].clone();
    assert_eq!(record["resolved_by"], "operator:bob (seen in the dashboard)", "{record}");
    let again = stdio.call("resolve", arguments);
    assert_eq!(again["isError"], true, "{again}");
}

/// Every refused write: the answer says so and says nothing was changed, names no token, and
/// the store file is byte-identical.
#[test]
fn refused_writes_change_nothing_in_the_store() {
    let store = Store::new();
    let bob = store.operator("bob");
    // The requester is user `ada`: registered as `ADA`, still the same person to the kernel.
    let ada = store.operator("ADA");
    let gone = store.operator("carol");
    let (code, _, stderr) = store.cli(&["approvers", "remove", "carol"]);
    assert_eq!(code, Some(0), "{stderr}");
    let wrong = format!("wot_{}", "0".repeat(64));
    let id = store.approval_id.clone();
    let hash = store.hash();
    let other_hash = format!("sha256:{}", "0".repeat(64));
    let approve = json!({"approval_id": id, "action_hash": hash});
    let resolve = |extra: Value| {
        let mut arguments = json!({"effect_key": "refund:p1", "attempt": 1, "outcome": "committed"});
        if let (Some(arguments), Some(extra)) = (arguments.as_object_mut(), extra.as_object()) {
            arguments.extend(extra.clone());
        }
        arguments
    };
    // (why, token, tool, arguments, what the refusal says)
    let cases: Vec<(&str, Option<&str>, &str, Value, &str)> = vec![
        ("no token", None, "approve", approve.clone(), "a write needs an operator token"),
        ("no token", None, "deny", json!({"approval_id": id, "reason": "no"}), "a write needs an operator token"),
        ("no token", None, "resolve", resolve(json!({"reason": "seen"})), "a write needs an operator token"),
        ("a wrong token", Some(&wrong), "approve", approve.clone(), "the operator token is not valid"),
        ("a console login token", Some("wct_00"), "approve", approve.clone(), "the operator token is not valid"),
        ("a removed approver", Some(&gone), "approve", approve.clone(), "the operator token is not valid"),
        ("the requester", Some(&ada), "approve", approve.clone(), "(approver_is_requester)"),
        ("the requester", Some(&ada), "deny", json!({"approval_id": id, "reason": "no"}), "(approver_is_requester)"),
        ("another hash", Some(&bob), "approve", json!({"approval_id": id, "action_hash": other_hash}), "(mismatch)"),
        ("no hash", Some(&bob), "approve", json!({"approval_id": id}), "action_hash is required"),
        (
            "an unknown id",
            Some(&bob),
            "approve",
            json!({"approval_id": "apr_unknown", "action_hash": hash}),
            "(unknown)",
        ),
        ("an unknown id", Some(&bob), "deny", json!({"approval_id": "apr_unknown", "reason": "no"}), "(unknown)"),
        ("no reason", Some(&bob), "deny", json!({"approval_id": id}), "a reason is required"),
        ("a blank reason", Some(&bob), "deny", json!({"approval_id": id, "reason": "   "}), "a reason is required"),
        ("a misspelt reason", Some(&bob), "deny", json!({"approval_id": id, "reasn": "no"}), "no argument \"reasn\""),
        ("no reason", Some(&bob), "resolve", resolve(json!({})), "a reason is required"),
        (
            "no outcome",
            Some(&bob),
            "resolve",
            json!({"effect_key": "refund:p1", "attempt": 1, "reason": "seen"}),
            "outcome is required",
        ),
        (
            "no attempt",
            Some(&bob),
            "resolve",
            json!({"effect_key": "refund:p1", "outcome": "committed", "reason": "seen"}),
            "attempt is required",
        ),
        ("attempt zero", Some(&bob), "resolve", resolve(json!({"attempt": 0, "reason": "x"})), "1 or more"),
        (
            "another attempt than the effect's",
            Some(&bob),
            "resolve",
            resolve(json!({"attempt": 2, "reason": "x"})),
            "at attempt 1, not at attempt 2",
        ),
        (
            "another outcome",
            Some(&bob),
            "resolve",
            resolve(json!({"outcome": "maybe", "reason": "x"})),
            "committed or failed",
        ),
        (
            "an unknown effect",
            Some(&bob),
            "resolve",
            resolve(json!({"effect_key": "refund:p9", "reason": "x"})),
            "no effect",
        ),
        (
            "a bad ttl",
            Some(&bob),
            "approve",
            json!({"approval_id": id, "action_hash": hash, "ttl": "PT0S"}),
            "ttl must",
        ),
        (
            "a scope the rule does not allow",
            Some(&bob),
            "approve",
            json!({"approval_id": id, "action_hash": hash, "scope": {"uses": 1, "minutes": 1}}),
            "does not allow scoped grants",
        ),
        (
            "a scope and a ttl",
            Some(&bob),
            "approve",
            json!({"approval_id": id, "action_hash": hash, "ttl": "PT1H", "scope": {"uses": 1, "minutes": 1}}),
            "ttl or scope",
        ),
        (
            "a scope without minutes",
            Some(&bob),
            "approve",
            json!({"approval_id": id, "action_hash": hash, "scope": {"uses": 1}}),
            "scope.minutes must be an integer",
        ),
        (
            "a bound that is not a number",
            Some(&bob),
            "approve",
            json!({"approval_id": id, "action_hash": hash, "scope": {"uses": 1, "minutes": 1, "at_most": {"/amount": "5"}}}),
            "scope.at_most maps JSON pointers to numbers",
        ),
    ];
    for (why, token, tool, arguments, says) in &cases {
        let mut stdio = StdioServer::start(&store.path(), *token);
        let before = store.bytes();
        let refused = stdio.call(tool, arguments.clone());
        assert!(store.bytes() == before, "{why}: {tool} {arguments} changed the store file");
        assert_eq!(refused["isError"], true, "{why}: {tool}: {refused}");
        let text = refused["content"][0]["text"].as_str().unwrap_or_default();
        assert!(text.contains(says) && text.ends_with("nothing was changed"), "{why}: {text}");
        assert!(!text.contains("--ttl"), "a tool has arguments, not flags: {text}");
        for secret in [&bob, &ada, &gone, &wrong] {
            assert!(!refused.to_string().contains(secret.as_str()), "{why}: a token was echoed: {refused}");
        }
    }
    assert_eq!(store.approval()["status"], "pending");
    assert_eq!(store.json(&["effects", "--state", "ambiguous"]).as_array().map(Vec::len), Some(1));

    // Over HTTP every request needs the bearer token of a registered operator, from this
    // listener's own Host and Origin; the refusals come before the body is read.
    let http = HttpServer::start(&store.path());
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                      "params": {"name": "approve", "arguments": approve}})
    .to_string();
    let own = format!("Bearer {bob}");
    let gone_bearer = format!("Bearer {gone}");
    let wrong_bearer = format!("Bearer {wrong}");
    let http_cases: Vec<(&str, Headers<'_>, u16)> = vec![
        ("no Authorization", vec![], 401),
        ("a wrong token", vec![("Authorization", &wrong_bearer)], 401),
        ("a removed approver", vec![("Authorization", &gone_bearer)], 401),
        ("not Bearer", vec![("Authorization", "Basic Ym9iOng=")], 401),
        ("two tokens", vec![("Authorization", &own), ("Authorization", &own)], 401),
        ("another site", vec![("Authorization", &own), ("Origin", "http://evil.example")], 403),
        ("DNS rebinding", vec![("Authorization", &own), ("Host", "evil.example:80")], 421),
        ("an unknown revision", vec![("Authorization", &own), ("MCP-Protocol-Version", "1999-01-01")], 400),
    ];
    let before = store.bytes();
    for (why, headers, status) in &http_cases {
        let answer = http.post(headers, &call);
        assert_eq!(answer.status, *status, "{why}: {}", answer.body);
        assert!(answer.json()["error"]["message"].is_string(), "{why}: {}", answer.body);
        for secret in [&bob, &gone, &wrong] {
            assert!(!answer.body.contains(secret.as_str()), "{why}: a token was echoed");
        }
    }
    let read = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "list_pending_approvals"}});
    assert_eq!(http.post(&[], &read.to_string()).status, 401, "a read over HTTP needs the token too");
    let no_reason = http.rpc(&bob, "tools/call", json!({"name": "deny", "arguments": {"approval_id": id}}));
    assert_eq!(no_reason.json()["result"]["isError"], true, "{}", no_reason.body);
    let batch = http.post(&[("Authorization", &own)], &format!("[{call}]"));
    assert_eq!(batch.status, 400, "{}", batch.body);
    assert!(store.bytes() == before, "a refused HTTP request changed the store file");
    assert_eq!(store.approval()["status"], "pending");
}

#[test]
fn a_non_loopback_listen_is_refused_before_the_store_is_opened() {
    let store = Store::new();
    let before = store.bytes();
    let (code, _, stderr) = store.cli(&["operator", "--listen", "0.0.0.0:0"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("not a loopback address") && stderr.contains("TLS"), "{stderr}");
    assert!(store.bytes() == before);
    let (code, _, stderr) = store.cli(&["operator", "--stdio", "--listen", "127.0.0.1:0"]);
    assert_eq!(code, Some(2), "one transport: {stderr}");
}

#[test]
fn a_token_file_must_be_private_and_is_the_only_source_when_given() {
    let store = Store::new();
    let token = store.operator("bob");
    let file = store.dir.path().join("operator.token");
    std::fs::write(&file, format!("{token}\n")).expect("write the token file");
    let run = |mode: u32, env: Option<&str>| {
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).expect("chmod");
        let mut command = Command::new(WARDEN);
        command
            .args(["operator", "--stdio", "--token-file"])
            .arg(&file)
            .arg("--store")
            .arg(store.path())
            .env_remove("WARDEN_STORE")
            .env_remove("WARDEN_OPERATOR_TOKEN")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(env) = env {
            command.env("WARDEN_OPERATOR_TOKEN", env);
        }
        let mut child = command.spawn().expect("start");
        let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                          "params": {"name": "deny", "arguments": {"approval_id": "apr_unknown", "reason": "x"}}});
        if let Some(mut input) = child.stdin.take() {
            // A server that refused to start has closed its stdin: the write may fail.
            let _ = input.write_all(format!("{call}\n").as_bytes());
        }
        let out = child.wait_with_output().expect("wait");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, stdout, stderr) = run(0o644, None);
    assert_eq!(code, Some(2), "{stdout}{stderr}");
    assert!(stderr.contains("chmod 600") && !stderr.contains(&token), "{stderr}");
    let (code, _, stderr) = run(0o600, Some(&token));
    assert_eq!(code, Some(2), "both: {stderr}");
    // With the file alone the token is read: the write reaches the kernel (an unknown request).
    let (code, stdout, stderr) = run(0o600, None);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("no such approval request"), "{stdout}");
    let (code, listed, _) = store.cli(&["approvers", "list", "--json"]);
    assert_eq!(code, Some(0), "{listed}");
    let listed: Value = serde_json::from_str(&listed).expect("JSON");
    assert_eq!(listed[0]["operator"], true, "{listed}");
    assert!(!listed.to_string().contains("sha256"), "no hash is listed: {listed}");
}

/// Single sign-on over HTTP: with `--config` naming a document whose `sign_in` names an issuer,
/// a token it signed stands for an operator token. A write answers as `operator:NAME` verified by
/// that issuer; a token that fails any check is refused with 401 before anything is read, the
/// store byte-identical and the token never echoed; an operator token still works beside it.
#[test]
fn a_token_from_the_documents_issuer_answers_as_that_person_and_nothing_else_does() {
    use common::idp::{Idp, ISSUER};
    let store = Store::new();
    let idp = Idp::new(store.dir.path(), "idp");
    let stranger = Idp::new(store.dir.path(), "stranger");
    let document = idp.document(store.dir.path(), "Authorization");
    let http = HttpServer::start_with(&store.path(), &["--config", document.to_str().expect("utf-8")]);
    let arguments = json!({"approval_id": store.approval_id, "action_hash": store.hash()});
    let call = json!({"name": "approve", "arguments": arguments});
    let before = store.bytes();
    let mut expired = Idp::claims("bob", &[], 300);
    expired["exp"] = json!(common::idp::now_seconds() - 3600);
    let mut elsewhere = Idp::claims("bob", &[], 300);
    elsewhere["aud"] = json!("another-app");
    for (token, why) in [
        (stranger.sign(&Idp::claims("bob", &[], 300), "JWT"), "signature"),
        (idp.sign(&expired, "JWT"), "expired"),
        (idp.sign(&elsewhere, "JWT"), "aud"),
        (idp.sign(&Idp::claims("bob", &[], 300), "at+jwt"), "typ"),
        ("wot_not-an-operator-token".to_owned(), "operator token is not valid"),
    ] {
        let refused = http.rpc(&token, "tools/call", call.clone());
        assert_eq!(refused.status, 401, "{why}: {}", refused.body);
        assert!(refused.body.contains(why), "{why}: {}", refused.body);
        assert!(!refused.body.contains(&token), "{why}: the token is echoed");
        assert_eq!(store.bytes(), before, "{why}: the store changed");
    }
    // The requester's own name is verified, and refused as approver by the kernel.
    let ada = idp.sign(&Idp::claims("ada", &[], 300), "JWT");
    let refused = http.rpc(&ada, "tools/call", call.clone());
    assert_eq!(refused.json()["result"]["isError"], true, "{}", refused.body);
    assert_eq!(store.bytes(), before, "the requester's refused answer changed the store");

    let bob = idp.sign(&Idp::claims("bob", &["finance"], 300), "JWT");
    let granted = http.rpc(&bob, "tools/call", call);
    assert_eq!(granted.status, 200, "{}", granted.body);
    assert_eq!(granted.json()["result"]["isError"], false, "{}", granted.body);
    let record = store.approval();
    assert_eq!(record["approver"], "operator:bob", "{record}");
    assert_eq!(record["votes"][0]["verified"], true, "{record}");
    assert_eq!(record["votes"][0]["issuer"], ISSUER, "{record}");
    // An operator token works beside single sign-on.
    let token = store.operator("carol");
    let listed = http.rpc(&token, "tools/call", json!({"name": "stats", "arguments": {}}));
    assert_eq!(listed.json()["result"]["isError"], false, "{}", listed.body);
}
