//! `warden console` over plain HTTP: the real binary started on a real store, its URL read from
//! the first line of its stdout, requests written by hand on a TCP socket (no client library
//! that could follow a redirect or keep a cookie on its own).
//!
//! What must hold: every page needs a session; a token logs in once; values are escaped; a POST
//! without a session or without the session's CSRF token — or a deny or resolve without a reason
//! — is refused and leaves the store file byte-identical; an approve goes through the kernel's
//! answer (the requester refused as approver, the approver recorded as verified `console:NAME`);
//! a resolve moves an AMBIGUOUS effect once.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use warden::test_support::KernelInternals;

use serde_json::{json, Value};
use warden::{Action, Decision, Error, Kernel, KernelOptions, Principal, Proposal, Ruling, Template, TemplateMode};

mod common;

const WARDEN: &str = env!("CARGO_BIN_EXE_warden");

/// A store with one approved and executed `stripe.refund` (amount 4000), one AMBIGUOUS effect
/// `refund:p1`, and one pending request for amount 400000 whose note is markup.
struct Store {
    dir: tempfile::TempDir,
    approval_id: String,
}

impl Store {
    fn new() -> Store {
        let dir = tempfile::tempdir().expect("tempdir");
        let kernel = Kernel::open(dir.path().join("state.redb"), KernelOptions::default()).expect("open kernel");
        let template = Template::parse("refund:{payment_id}", TemplateMode::Escaped).expect("template");
        let principal = Principal::new("refund-agent", Some("ada")).expect("principal");
        let action =
            |args: Value| Action::new("stripe.refund", args, principal.clone(), None, "production").expect("action");
        let ask = |action: &Action| {
            let mut proposal = Proposal::new(action, Ruling::new(Decision::Approve, "rule[1]"));
            proposal.effect = Some(&template);
            match kernel.propose(&proposal) {
                Err(Error::ApprovalRequired { request_id, .. }) => request_id,
                other => panic!("expected an approval request, got {other:?}"),
            }
        };
        // The last approved refund: 4000, granted by bob, run and committed.
        let earlier = action(json!({"payment_id": "p0", "amount": 4000, "note": "usual", "currency": "eur"}));
        let granted = ask(&earlier);
        kernel.grant(&granted, "bob").expect("grant");
        let mut with = Proposal::new(&earlier, Ruling::new(Decision::Approve, "rule[1]"));
        with.effect = Some(&template);
        with.approval_id = Some(&granted);
        kernel.propose(&with).expect("permit").commit(&json!({"id": "re_0"})).expect("commit");

        let lost = action(json!({"payment_id": "p1", "amount": 500}));
        let mut proposal = Proposal::new(&lost, Ruling::new(Decision::Allow, "rule[0]"));
        proposal.effect = Some(&template);
        kernel.propose(&proposal).expect("permit").ambiguous("the provider timed out").expect("report ambiguous");

        let big = action(
            json!({"payment_id": "p2", "amount": 400000, "note": "<script>alert(1)</script>", "currency": "eur"}),
        );
        let approval_id = ask(&big);
        drop(kernel);
        Store { dir, approval_id }
    }

    fn path(&self) -> PathBuf {
        self.dir.path().join("state.redb")
    }

    fn bytes(&self) -> Vec<u8> {
        std::fs::read(self.path()).expect("read the store file")
    }

    fn cli(&self, args: &[&str]) -> (i32, String, String) {
        let out = Command::new(WARDEN)
            .args(args)
            .arg("--store")
            .arg(self.path())
            .env_remove("WARDEN_STORE")
            .env_remove("WARDEN_CONFIG")
            .output()
            .expect("run warden");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    fn json(&self, args: &[&str]) -> Value {
        let mut all = args.to_vec();
        all.push("--json");
        let (code, stdout, stderr) = self.cli(&all);
        assert_eq!(code, 0, "warden {args:?}: {stderr}");
        serde_json::from_str(&stdout).expect("one JSON document")
    }

    /// `warden approvers add NAME`: the token on the last line.
    fn add_approver(&self, name: &str) -> String {
        let (code, stdout, stderr) = self.cli(&["approvers", "add", name]);
        assert_eq!(code, 0, "{stderr}");
        let token = stdout.lines().last().expect("a last line").to_owned();
        assert!(token.starts_with("wct_"), "{stdout}");
        token
    }
}

trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}

/// A self-signed certificate for `localhost` and 127.0.0.1, and its key with mode 0600, in
/// files.
struct TestCert {
    dir: tempfile::TempDir,
    cert: PathBuf,
    key: PathBuf,
    der: rustls::pki_types::CertificateDer<'static>,
}

impl TestCert {
    fn new() -> TestCert {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().expect("tempdir");
        let issued = rcgen::generate_simple_self_signed(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
            .expect("a self-signed certificate");
        let cert = dir.path().join("console.crt");
        let key = dir.path().join("console.key");
        std::fs::write(&cert, issued.cert.pem()).expect("write the certificate");
        std::fs::write(&key, issued.signing_key.serialize_pem()).expect("write the key");
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).expect("chmod 600");
        let der = issued.cert.der().clone();
        TestCert { dir, cert, key, der }
    }
}

/// The running console; killed when dropped. With `tls`, requests go over HTTPS to `address`
/// (the port bound) naming `host` (the URL's authority).
struct Console {
    child: Child,
    address: String,
    host: String,
    tls: Option<std::sync::Arc<rustls::ClientConfig>>,
}

impl Console {
    fn start(store: &Path, extra: &[&str]) -> Console {
        let (child, address) = Console::spawn(store, extra, "http://");
        Console { child, host: address.clone(), address, tls: None }
    }

    /// `warden console --store STORE EXTRA…` and the authority of the URL its first line prints
    /// with `scheme`.
    fn spawn(store: &Path, extra: &[&str], scheme: &str) -> (Child, String) {
        let mut child = Command::new(WARDEN)
            .arg("console")
            .arg("--store")
            .arg(store)
            .args(extra)
            .env_remove("WARDEN_STORE")
            .env_remove("WARDEN_CONFIG")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start warden console");
        let mut first = String::new();
        BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut first).expect("read the first line");
        let authority = first
            .trim()
            .strip_prefix(scheme)
            .and_then(|rest| rest.strip_suffix('/'))
            .unwrap_or_else(|| panic!("the first line is not a {scheme} URL: {first:?}"))
            .to_owned();
        (child, authority)
    }

    /// A console served over TLS with `cert`, trusted by the client; the first line is the
    /// https URL (`--public-url`'s when given, else the bound address), and `port` the port bound.
    fn start_tls(store: &Path, cert: &TestCert, extra: &[&str], port: Option<u16>) -> Console {
        let mut args = vec!["--tls-cert", cert.cert.to_str().unwrap(), "--tls-key", cert.key.to_str().unwrap()];
        args.extend_from_slice(extra);
        let (child, host) = Console::spawn(store, &args, "https://");
        let address = match port {
            Some(port) => format!("127.0.0.1:{port}"),
            None => host.clone(),
        };
        let mut roots = rustls::RootCertStore::empty();
        roots.add(cert.der.clone()).expect("trust the test certificate");
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("protocols")
            .with_root_certificates(roots)
            .with_no_client_auth();
        Console { child, address, host, tls: Some(std::sync::Arc::new(config)) }
    }

    fn send(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Response {
        let tcp = TcpStream::connect(&self.address).expect("connect");
        tcp.set_read_timeout(Some(Duration::from_secs(60))).expect("timeout");
        let mut stream: Box<dyn ReadWrite> = match &self.tls {
            None => Box::new(tcp),
            Some(config) => {
                let name = rustls::pki_types::ServerName::try_from("localhost").expect("a server name");
                let client = rustls::ClientConnection::new(std::sync::Arc::clone(config), name).expect("tls client");
                Box::new(rustls::StreamOwned::new(client, tcp))
            }
        };
        let mut request = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
        if !headers.iter().any(|(name, _)| name.eq_ignore_ascii_case("host")) {
            request.push_str(&format!("Host: {}\r\n", self.host));
        }
        for (name, value) in headers {
            request.push_str(&format!("{name}: {value}\r\n"));
        }
        if method == "POST" {
            request.push_str("Content-Type: application/x-www-form-urlencoded\r\n");
            request.push_str(&format!("Content-Length: {}\r\n", body.len()));
        }
        request.push_str("\r\n");
        request.push_str(body);
        // A connection closed by the server (at accept, past the limit) is a response of status
        // 0: nothing was served.
        let mut raw = Vec::new();
        if stream.write_all(request.as_bytes()).is_ok() && stream.read_to_end(&mut raw).is_err() {
            raw.clear();
        }
        Response::parse(&String::from_utf8_lossy(&raw))
    }

    fn get(&self, path: &str, cookie: Option<&str>) -> Response {
        match cookie {
            Some(cookie) => self.send("GET", path, &[("Cookie", cookie)], ""),
            None => self.send("GET", path, &[], ""),
        }
    }

    fn post(&self, path: &str, cookie: Option<&str>, body: &str) -> Response {
        match cookie {
            Some(cookie) => self.send("POST", path, &[("Cookie", cookie)], body),
            None => self.send("POST", path, &[], body),
        }
    }

    /// Log in with a token through the sign-in form's POST: the session cookie (`name=value`)
    /// and the raw Set-Cookie line.
    fn login(&self, token: &str) -> (String, String) {
        // As a browser posts the console's own form.
        // Chromium sends `Origin: null` under the console's no-referrer policy.
        let headers = [("Origin", "null"), ("Sec-Fetch-Site", "same-origin")];
        let response = self.send("POST", "/login", &headers, &format!("token={token}"));
        assert_eq!(response.status, 303, "{}", response.body);
        assert_eq!(response.header("location"), Some("/"));
        let set = response.header("set-cookie").expect("a cookie").to_owned();
        (set.split(';').next().expect("name=value").to_owned(), set)
    }
}

impl Drop for Console {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Response {
    fn parse(raw: &str) -> Response {
        let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((raw, ""));
        let mut lines = head.split("\r\n");
        let status =
            lines.next().and_then(|line| line.split(' ').nth(1)).and_then(|code| code.parse().ok()).unwrap_or(0);
        let headers = lines
            .filter_map(|line| line.split_once(':'))
            .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
            .collect();
        Response { status, headers, body: body.to_owned() }
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    /// The CSRF token of the page's first form.
    fn csrf(&self) -> String {
        let marker = "name=\"csrf\" value=\"";
        let start = self.body.find(marker).expect("a form with a CSRF token") + marker.len();
        self.body[start..].split('"').next().expect("the token").to_owned()
    }
}

fn approval(store: &Store) -> Value {
    store.json(&["inspect", &store.approval_id])["approval"].clone()
}

#[test]
fn every_page_needs_a_session_and_a_token_logs_in_once() {
    let store = Store::new();
    let token = store.add_approver("bob");
    let console = Console::start(&store.path(), &[]);
    for page in ["/", "/effects", "/receipts", "/authority", &format!("/approval/{}", store.approval_id)] {
        let response = console.get(page, None);
        assert_eq!((response.status, response.header("location")), (303, Some("/login")), "{page}");
        assert!(!response.body.contains("stripe.refund"), "{page}");
    }
    assert_eq!(console.post("/login", None, "token=wct_0000").status, 403);
    // A GET never spends a token (a prefetcher or a cross-site link would) and never shows it.
    let linked = console.get(&format!("/login?token={token}"), None);
    assert_eq!((linked.status, linked.header("set-cookie")), (200, None));
    assert!(!linked.body.contains(&token), "the token is never echoed");
    // A cross-site form (login CSRF) spends nothing either.
    let own = format!("http://{}", console.address);
    let forgeries: [&[(&str, &str)]; 5] = [
        &[("Origin", "http://evil.example")],
        &[("Origin", "null")],
        &[("Sec-Fetch-Site", "cross-site")],
        &[("Sec-Fetch-Site", "same-site"), ("Origin", &own)],
        &[("Sec-Fetch-Site", "cross-site"), ("Origin", &own)],
    ];
    for headers in forgeries {
        let forged = console.send("POST", "/login", headers, &format!("token={token}"));
        assert_eq!((forged.status, forged.header("set-cookie")), (403, None), "{headers:?}");
    }
    let (cookie, set_cookie) = console.login(&token);
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(set_cookie.contains(attribute), "{set_cookie}");
    }
    assert!(!set_cookie.contains("Secure"), "loopback is plain HTTP: {set_cookie}");
    let again = console.post("/login", None, &format!("token={token}"));
    assert_eq!(again.status, 403, "a token works once");
    assert!(!again.body.contains(&token), "the token is never echoed");
    let inbox = console.get("/", Some(&cookie));
    assert_eq!(inbox.status, 200);
    assert!(inbox.header("content-security-policy").is_some_and(|csp| csp.contains("default-src 'none'")));
    assert_eq!(console.get("/", Some("warden_console=00")).status, 303, "an unknown session is none");
    // DNS rebinding: a page asked for under another Host name is not served.
    let rebound = console.send("GET", "/", &[("Host", "evil.example:80"), ("Cookie", &cookie)], "");
    assert_eq!(rebound.status, 421);
    // Removing the approver ends its session.
    let (code, _, stderr) = store.cli(&["approvers", "remove", "bob"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(console.get("/", Some(&cookie)).status, 303);
}

#[test]
fn the_inbox_shows_the_whole_action_escaped_with_its_diff() {
    let store = Store::new();
    let console = Console::start(&store.path(), &[]);
    let (cookie, _) = console.login(&store.add_approver("bob"));
    let inbox = console.get("/", Some(&cookie));
    assert_eq!(inbox.status, 200);
    let body = &inbox.body;
    assert!(body.contains(&store.approval_id), "{body}");
    assert!(body.contains("&lt;script&gt;alert(1)&lt;/script&gt;"), "{body}");
    assert!(!body.contains("<script>"), "markup from an agent's argument reached the page: {body}");
    for shown in ["400000", "p2", "refund-agent for ada", "rule[1]", "production", "0 of 1 grant(s)", "left)"] {
        assert!(body.contains(shown), "{shown}: {body}");
    }
    // The diff against the last approved stripe.refund: amount and note changed, marked.
    let changed = "<span class=\"pill warn\">changed</span>";
    assert!(body.contains(&format!("<td><code>4000</code> {changed}</td>")), "{body}");
    assert!(body.contains(&format!("<td>usual {changed}</td>")), "{body}");
    assert!(body.contains(&format!("<td>p0 {changed}</td>")), "{body}");
    assert_eq!(body.matches("<tr class=\"changed\">").count(), 3, "{body}");
    assert!(body.contains("<tr><td class=\"mono\">currency</td><td class=\"new\">eur</td><td>eur</td></tr>"), "{body}");
    assert!(body.contains("approved by cli:bob"), "{body}");
}

#[test]
fn a_post_without_session_or_csrf_or_reason_is_refused_and_writes_nothing() {
    let store = Store::new();
    let console = Console::start(&store.path(), &[]);
    let (cookie, _) = console.login(&store.add_approver("bob"));
    let csrf = console.get("/", Some(&cookie)).csrf();
    let id = &store.approval_id;
    let hash = approval(&store)["action_hash"].as_str().expect("hash").to_owned();
    let before = store.bytes();
    let refused: Vec<(&str, Option<&str>, String, u16)> = vec![
        ("/approve", None, format!("csrf={csrf}&id={id}&hash={hash}"), 403),
        ("/approve", Some(&cookie), format!("id={id}&hash={hash}"), 403),
        ("/approve", Some(&cookie), format!("csrf=00{}&id={id}&hash={hash}", &csrf[2..]), 403),
        ("/approve", Some(&cookie), format!("csrf={csrf}&csrf={csrf}&id={id}&hash={hash}"), 400),
        ("/approve", Some("warden_console=forged"), format!("csrf={csrf}&id={id}&hash={hash}"), 403),
        ("/deny", None, format!("csrf={csrf}&id={id}&reason=no"), 403),
        ("/deny", Some(&cookie), format!("id={id}&reason=no"), 403),
        ("/deny", Some(&cookie), format!("csrf={csrf}&id={id}"), 400),
        ("/deny", Some(&cookie), format!("csrf={csrf}&id={id}&reason=+++"), 400),
        ("/resolve", None, format!("csrf={csrf}&key=refund%3Ap1&outcome=committed&reason=seen"), 403),
        ("/resolve", Some(&cookie), "key=refund%3Ap1&outcome=committed&reason=seen".to_owned(), 403),
        ("/resolve", Some(&cookie), format!("csrf={csrf}&key=refund%3Ap1&outcome=committed"), 400),
        ("/resolve", Some(&cookie), format!("csrf={csrf}&key=refund%3Ap1&reason=seen"), 400),
        ("/resolve", Some(&cookie), format!("csrf={csrf}&key=refund%3Ap1&outcome=committed&reason=seen"), 400),
        (
            "/resolve",
            Some(&cookie),
            format!("csrf={csrf}&key=refund%3Ap1&attempt=2&outcome=committed&reason=seen"),
            400,
        ),
        (
            "/resolve",
            Some(&cookie),
            format!("csrf={csrf}&key=refund%3Ap1&attempt=x&outcome=committed&reason=seen"),
            400,
        ),
        ("/logout", Some(&cookie), String::new(), 403),
    ];
    for (path, cookie, body, status) in &refused {
        let response = console.post(path, *cookie, body);
        assert_eq!(response.status, *status, "{path} {cookie:?} {body}: {}", response.body);
        assert!(response.body.contains("nothing was changed"), "{path} {body}: {}", response.body);
    }
    assert!(store.bytes() == before, "a refused POST changed the store file");
    assert_eq!(approval(&store)["status"], "pending");
    assert_eq!(store.json(&["effects", "--state", "ambiguous"]).as_array().map(Vec::len), Some(1));
    // The session still works after all that (logout needed its token too).
    assert_eq!(console.get("/", Some(&cookie)).status, 200);
}

#[test]
fn approve_goes_through_the_kernel_the_requester_refused_the_approver_verified() {
    let store = Store::new();
    let console = Console::start(&store.path(), &[]);
    // `ada` is the user the agent acts for: console:ada is the requester, and the kernel says no.
    let (ada, _) = console.login(&store.add_approver("ada"));
    let page = console.get("/", Some(&ada));
    let csrf = page.csrf();
    let id = &store.approval_id;
    let hash = approval(&store)["action_hash"].as_str().expect("hash").to_owned();
    let refused = console.post("/approve", Some(&ada), &format!("csrf={csrf}&id={id}&hash={hash}"));
    assert_eq!(refused.status, 409, "{}", refused.body);
    assert!(refused.body.contains("nothing was changed"), "{}", refused.body);
    assert_eq!(approval(&store)["status"], "pending");
    // A hash other than the one shown is refused too.
    let (bob, _) = console.login(&store.add_approver("bob"));
    let csrf = console.get("/", Some(&bob)).csrf();
    let wrong = format!("sha256:{}", "0".repeat(64));
    let mismatch = console.post("/approve", Some(&bob), &format!("csrf={csrf}&id={id}&hash={wrong}"));
    assert_eq!(mismatch.status, 409, "{}", mismatch.body);
    assert_eq!(approval(&store)["status"], "pending");

    let granted = console.post("/approve", Some(&bob), &format!("csrf={csrf}&id={id}&hash={hash}"));
    assert_eq!(granted.status, 303, "{}", granted.body);
    assert_eq!(granted.header("location"), Some(format!("/approval/{id}").as_str()));
    let record = approval(&store);
    assert_eq!(record["status"], "granted", "{record}");
    assert_eq!(record["approver"], "console:bob", "{record}");
    assert_eq!(record["votes"][0]["verified"], true, "{record}");
    assert_eq!(record["votes"][0]["issuer"], "warden-console", "{record}");
    let shown = console.get(&format!("/approval/{id}"), Some(&bob));
    assert!(shown.body.contains("<strong>granted</strong>"), "{}", shown.body);
    // Single use stays the kernel's: a second answer is refused.
    let twice = console.post("/approve", Some(&bob), &format!("csrf={csrf}&id={id}&hash={hash}"));
    assert_eq!(twice.status, 409, "{}", twice.body);
    assert!(!console.get("/", Some(&bob)).body.contains(id.as_str()), "an answered request left the inbox");
}

#[test]
fn deny_with_a_reason_records_it() {
    let store = Store::new();
    let console = Console::start(&store.path(), &[]);
    let (bob, _) = console.login(&store.add_approver("bob"));
    let csrf = console.get("/", Some(&bob)).csrf();
    let id = &store.approval_id;
    let denied = console.post("/deny", Some(&bob), &format!("csrf={csrf}&id={id}&reason=too+large"));
    assert_eq!(denied.status, 303, "{}", denied.body);
    let record = approval(&store);
    assert_eq!((record["status"].as_str(), record["note"].as_str()), (Some("denied"), Some("too large")), "{record}");
}

#[test]
fn resolve_moves_the_ambiguous_effect_once_and_names_who_and_why() {
    let store = Store::new();
    let console = Console::start(&store.path(), &[]);
    let (bob, _) = console.login(&store.add_approver("bob"));
    let effects = console.get("/effects", Some(&bob));
    assert!(effects.body.contains("refund:p1"), "{}", effects.body);
    assert!(
        effects.body.find("refund:p1").unwrap_or(usize::MAX) < effects.body.find("refund:p0").unwrap_or(0),
        "AMBIGUOUS comes first: {}",
        effects.body
    );
    let csrf = effects.csrf();
    assert!(
        effects.body.contains("name=\"attempt\" value=\"1\""),
        "the form carries the attempt shown: {}",
        effects.body
    );
    let body = format!("csrf={csrf}&key=refund%3Ap1&attempt=1&outcome=committed&reason=seen+in+the+Stripe+dashboard");
    let resolved = console.post("/resolve", Some(&bob), &body);
    assert_eq!(resolved.status, 200, "{}", resolved.body);
    let record = store.json(&["inspect", "refund:p1"])["effect"].clone();
    assert_eq!(record["state"], "committed", "{record}");
    assert_eq!(record["resolved_by"], "console:bob (seen in the Stripe dashboard)", "{record}");
    let again = console.post("/resolve", Some(&bob), &body);
    assert_eq!(again.status, 409, "{}", again.body);
}

#[test]
fn a_resolve_made_for_an_earlier_attempt_moves_nothing() {
    let store = Store::new();
    let console = Console::start(&store.path(), &[]);
    let (bob, _) = console.login(&store.add_approver("bob"));
    let csrf = console.get("/effects", Some(&bob)).csrf();
    // Attempt 1 is on bob's page. Meanwhile someone says it failed, the agent tries again, and
    // attempt 2 is lost as well.
    let (code, _, stderr) = store.cli(&["resolve", "refund:p1", "--failed", "--attempt", "1", "--by", "ops:eve"]);
    assert_eq!(code, 0, "{stderr}");
    {
        let kernel = Kernel::open(store.path(), KernelOptions::default()).expect("open beside the console");
        let template = Template::parse("refund:{payment_id}", TemplateMode::Escaped).expect("template");
        let principal = Principal::new("refund-agent", Some("ada")).expect("principal");
        let retry =
            Action::new("stripe.refund", json!({"payment_id": "p1", "amount": 500}), principal, None, "production")
                .expect("action");
        let mut proposal = Proposal::new(&retry, Ruling::new(Decision::Allow, "rule[0]"));
        proposal.effect = Some(&template);
        let permit = kernel.propose(&proposal).expect("attempt 2");
        assert_eq!(permit.attempt(), 2);
        permit.ambiguous("timed out again").expect("report ambiguous");
    }
    let before = store.bytes();
    let stale = format!("csrf={csrf}&key=refund%3Ap1&attempt=1&outcome=committed&reason=seen");
    let refused = console.post("/resolve", Some(&bob), &stale);
    assert_eq!(refused.status, 400, "{}", refused.body);
    assert!(refused.body.contains("at attempt 2, not at attempt 1"), "{}", refused.body);
    assert!(store.bytes() == before, "a stale resolve changed the store file");
    let record = store.json(&["inspect", "refund:p1"])["effect"].clone();
    assert_eq!((record["state"].as_str(), record["attempt"].as_u64()), (Some("ambiguous"), Some(2)), "{record}");
    // The CLI refuses the same way, and names the attempt to look at.
    let (code, _, stderr) = store.cli(&["resolve", "refund:p1", "--committed", "--attempt", "1"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("warden inspect refund:p1"), "{stderr}");
    // Resolving what the page now shows works.
    let fresh = console.get("/effects", Some(&bob));
    assert!(fresh.body.contains("name=\"attempt\" value=\"2\""), "{}", fresh.body);
    let body = format!("csrf={}&key=refund%3Ap1&attempt=2&outcome=committed&reason=seen", fresh.csrf());
    assert_eq!(console.post("/resolve", Some(&bob), &body).status, 200);
    let record = store.json(&["inspect", "refund:p1"])["effect"].clone();
    assert_eq!((record["state"].as_str(), record["attempt"].as_u64()), (Some("committed"), Some(2)), "{record}");
}

#[test]
fn the_receipts_page_verifies_the_chain_and_shows_one_receipt_whole() {
    let store = Store::new();
    let console = Console::start(&store.path(), &[]);
    let (bob, _) = console.login(&store.add_approver("bob"));
    let page = console.get("/receipts", Some(&bob));
    assert!(page.body.contains("Chain verified"), "{}", page.body);
    let marker = "href=\"/receipt/";
    let start = page.body.find(marker).expect("a receipt link") + marker.len();
    let id = page.body[start..].split('"').next().expect("an id");
    let one = console.get(&format!("/receipt/{id}"), Some(&bob));
    assert_eq!(one.status, 200);
    assert!(one.body.contains("prev_hash"), "{}", one.body);
    let filtered = console.get("/receipts?action=nothing.such", Some(&bob));
    assert!(filtered.body.contains("0 receipt(s) shown"), "{}", filtered.body);
    assert_eq!(console.get("/receipt/rct_none", Some(&bob)).status, 404);
    let rows = |page: &Response| page.body.matches("href=\"/receipt/").count();
    let all = rows(&page);
    assert_eq!(all, 2, "the committed and the AMBIGUOUS receipt: {}", page.body);
    assert_eq!(rows(&console.get("/receipts?from=2000-01-01T00:00:00Z&to=2999-01-01T00:00:00Z", Some(&bob))), all);
    assert_eq!(rows(&console.get("/receipts?to=2000-01-01T00:00:00Z", Some(&bob))), 0);
    assert_eq!(rows(&console.get("/receipts?from=2999-01-01T00:00:00Z", Some(&bob))), 0);
    assert_eq!(rows(&console.get("/receipts?agent=refund-agent&key=refund%3Ap1", Some(&bob))), 1);
    let bad = console.get("/receipts?from=yesterday", Some(&bob));
    assert!(bad.body.contains("Not a time: from") && rows(&bad) == 0, "{}", bad.body);
}

#[test]
fn a_non_loopback_listen_is_refused_naming_tls() {
    let store = Store::new();
    let out = Command::new(WARDEN)
        .args(["console", "--listen", "0.0.0.0:0", "--store"])
        .arg(store.path())
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("not a loopback address") && stderr.contains("TLS"), "{stderr}");
}

#[test]
fn a_body_past_the_limit_is_refused_before_any_handler_and_writes_nothing() {
    let store = Store::new();
    let console = Console::start(&store.path(), &[]);
    let (bob, _) = console.login(&store.add_approver("bob"));
    let csrf = console.get("/", Some(&bob)).csrf();
    let before = store.bytes();
    let id = &store.approval_id;
    let reason = "a".repeat(70 * 1024);
    let response = console.post("/deny", Some(&bob), &format!("csrf={csrf}&id={id}&reason={reason}"));
    assert_eq!(response.status, 413);
    assert!(store.bytes() == before, "a refused POST changed the store file");
    assert_eq!(approval(&store)["status"], "pending");
}

#[test]
fn connections_past_the_limit_are_closed_at_accept_and_served_again_once_freed() {
    let store = Store::new();
    let console = Console::start(&store.path(), &[]);
    // 64 connections that send nothing hold every slot (until the 10 s header timeout).
    let held: Vec<TcpStream> = (0..64).map(|_| TcpStream::connect(&console.address).expect("connect")).collect();
    let mut extra = TcpStream::connect(&console.address).expect("connect");
    extra.set_read_timeout(Some(Duration::from_secs(60))).expect("timeout");
    let request = format!("GET /login HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n", console.address);
    // The server may close before the request is written; either way, nothing is served.
    let _ = extra.write_all(request.as_bytes());
    let mut answer = Vec::new();
    let _ = extra.read_to_end(&mut answer);
    assert!(answer.is_empty(), "the 65th connection was served: {}", String::from_utf8_lossy(&answer));
    drop(held);
    // Slots come back as the held connections close; the next request is served.
    let mut served = None;
    for _ in 0..200 {
        let response = console.send("GET", "/login", &[], "");
        if response.status == 200 {
            served = Some(response);
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(served.is_some(), "no request was served after the held connections closed");
}

#[test]
fn over_tls_the_console_serves_https_and_marks_its_cookie_secure() {
    let store = Store::new();
    let cert = TestCert::new();
    let console = Console::start_tls(&store.path(), &cert, &[], None);
    assert!(console.host.starts_with("127.0.0.1:"), "{}", console.host);
    let login = console.get("/login", None);
    assert_eq!(login.status, 200, "{}", login.body);
    let token = store.add_approver("bob");
    let signed_in = console.post("/login", None, &format!("token={token}"));
    assert_eq!(signed_in.status, 303, "{}", signed_in.body);
    let cookie = signed_in.header("set-cookie").unwrap_or_default();
    assert!(cookie.contains("; Secure"), "{cookie}");
    let session = cookie.split(';').next().unwrap_or_default().to_owned();
    assert_eq!(console.get("/", Some(&session)).status, 200);
    // A sign-in whose Origin names the plain-HTTP scheme comes from another origin: refused,
    // and the token is not spent.
    let second = store.add_approver("carol");
    let origin = format!("http://{}", console.host);
    let refused = console.send("POST", "/login", &[("Origin", &origin)], &format!("token={second}"));
    assert_eq!(refused.status, 403, "{}", refused.body);
    let origin = format!("https://{}", console.host);
    let accepted = console.send("POST", "/login", &[("Origin", &origin)], &format!("token={second}"));
    assert_eq!(accepted.status, 303, "{}", accepted.body);
    // Plain HTTP to the TLS port gets no HTTP answer.
    let plain = Console {
        child: Command::new("true").spawn().expect("a stand-in child"),
        address: console.address.clone(),
        host: console.host.clone(),
        tls: None,
    };
    assert_eq!(plain.get("/login", None).status, 0);
}

#[test]
fn beyond_loopback_the_console_needs_tls_and_a_public_url_and_answers_that_host() {
    let store = Store::new();
    let cert = TestCert::new();
    let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port();
    let listen = format!("0.0.0.0:{port}");
    let public = format!("https://localhost:{port}/");
    let console = Console::start_tls(&store.path(), &cert, &["--listen", &listen, "--public-url", &public], Some(port));
    assert_eq!(console.host, format!("localhost:{port}"));
    assert_eq!(console.get("/login", None).status, 200);
    let elsewhere = console.send("GET", "/login", &[("Host", "evil.example:443")], "");
    assert_eq!(elsewhere.status, 421, "{}", elsewhere.body);
}

#[test]
fn tls_settings_that_cannot_serve_safely_are_refused_naming_the_fix() {
    use std::os::unix::fs::PermissionsExt as _;
    let store = Store::new();
    let cert = TestCert::new();
    let (crt, key) = (cert.cert.to_str().unwrap().to_owned(), cert.key.to_str().unwrap().to_owned());
    let open_key = cert.dir.path().join("open.key");
    std::fs::copy(&cert.key, &open_key).expect("copy the key");
    std::fs::set_permissions(&open_key, std::fs::Permissions::from_mode(0o644)).expect("chmod 644");
    let private_crt = cert.dir.path().join("private.crt");
    std::fs::copy(&cert.cert, &private_crt).expect("copy the certificate");
    std::fs::set_permissions(&private_crt, std::fs::Permissions::from_mode(0o600)).expect("chmod 600");
    let private_crt = private_crt.to_str().unwrap().to_owned();
    let garbage = cert.dir.path().join("garbage.crt");
    std::fs::write(&garbage, "not a certificate").expect("write");
    let (open_key, garbage) = (open_key.to_str().unwrap().to_owned(), garbage.to_str().unwrap().to_owned());
    // (arguments, what stderr says)
    let table: Vec<(Vec<&str>, &str)> = vec![
        (vec!["--listen", "0.0.0.0:0"], "--tls-cert FILE --tls-key FILE --public-url"),
        (vec!["--listen", "0.0.0.0:0", "--tls-cert", &crt, "--tls-key", &key], "--public-url"),
        (vec!["--tls-cert", &crt, "--tls-key", &open_key], "chmod 600"),
        (vec!["--tls-cert", &garbage, "--tls-key", &key], "no CERTIFICATE block"),
        (vec!["--tls-cert", &crt, "--tls-key", &private_crt], "no PEM private key"),
        (vec!["--tls-cert", &crt], "--tls-key"),
        (vec!["--tls-cert", &crt, "--tls-key", &key, "--public-url", "http://localhost/"], "https URL"),
    ];
    for (args, says) in table {
        let mut all = vec!["console"];
        all.extend_from_slice(&args);
        let (code, _, stderr) = store.cli(&all);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert!(!stderr.contains("PRIVATE KEY-----"), "{stderr}");
    }
}

#[test]
fn the_authority_page_sums_each_budget_and_draws_the_delegation_tree() {
    const DOCUMENT: &str = r#"schema: warden/v1
environment: production
actions:
  stripe.refund:
    effect: "refund:{payment_id}"
    rules:
      - decision: allow
authority:
  grants:
    - id: head-of-finance
      subject: { agent: finance-console, user: alice }
      actions: [stripe.refund]
      expires_at: "2099-01-01T00:00:00Z"
      delegable: true
      budgets: [{ metric: amount, limit: 100000, window: P1D }]
"#;
    const CHILD: &str = r#"subject: { agent: finance-agent, user: alice }
actions: [stripe.refund]
expires_at: "2098-01-01T00:00:00Z"
delegable: true
budgets: [{ metric: amount, limit: 50000, window: P1D }]
"#;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("warden.yaml");
    std::fs::write(&config, DOCUMENT).expect("document");
    std::fs::write(dir.path().join("child.yaml"), CHILD).expect("grant file");
    std::fs::write(dir.path().join("grandchild.yaml"), CHILD.replace("finance-agent", "support-agent")).expect("grant");
    let path = dir.path().join("state.redb");
    let document = warden::document::load_str(DOCUMENT, "warden.yaml").expect("document");
    let opened = warden::pipeline::Warden::open(&path, document, Default::default()).expect("open");
    let refund = warden::pipeline::ActionRequest::new(
        "stripe.refund",
        json!({"payment_id": "p1", "amount": 4200}),
        Principal::new("finance-console", Some("alice")).expect("principal"),
    );
    opened.submit(&refund).expect("permit").commit(&json!({"ok": true})).expect("commit");
    drop(opened);
    let home = dir.path().to_owned();
    let cli = |args: &[&str]| {
        let out = Command::new(WARDEN)
            .args(args)
            .current_dir(&home)
            .env("WARDEN_STORE", &path)
            .env("WARDEN_CONFIG", &config)
            .output()
            .expect("run warden");
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice::<Value>(&out.stdout).unwrap_or(Value::Null)
    };
    let child = cli(&[
        "delegate",
        "--parent",
        "head-of-finance",
        "--file",
        "child.yaml",
        "--as",
        "finance-console/alice",
        "--json",
    ]);
    let child = child["delegation_id"].as_str().expect("an id").to_owned();
    let grandchild =
        cli(&["delegate", "--parent", &child, "--file", "grandchild.yaml", "--as", "finance-agent/alice", "--json"]);
    let grandchild = grandchild["delegation_id"].as_str().expect("an id").to_owned();
    let store = Store { dir, approval_id: String::new() };
    let token = store.add_approver("bob");

    let with_document = Console::start(&path, &["--config", config.to_str().expect("utf-8")]);
    let (bob, _) = with_document.login(&token);
    let page = with_document.get("/authority", Some(&bob)).body;
    // The document's grant: 4200 of 100000 spent; the delegation's own budget: nothing yet.
    assert!(page.contains("<td class=\"mono\">head-of-finance</td><td>document</td><td>amount</td><td>86400 s</td><td>4200</td><td>100000</td>"), "{page}");
    assert!(
        page.contains(&format!(
            "<td class=\"mono\">{child}</td><td>delegation</td><td>amount</td><td>86400 s</td><td>0</td><td>50000</td>"
        )),
        "{page}"
    );
    // The tree: the grandchild's item is inside the child's list, inside the grant's.
    let (root, one, two) = (
        page.find("head-of-finance</span>"),
        page.find(&format!("{child}</span> to")),
        page.find(&format!("{grandchild}</span> to")),
    );
    assert!(root < one && one < two && root.is_some(), "{page}");
    let between = &page[one.unwrap_or(0)..two.unwrap_or(0)];
    assert!(between.contains("<ul><li>"), "the grandchild is nested under the child: {between}");
    drop(with_document);

    // Revoking the child: it shows revoked, the grandchild beneath a revoked one, and neither
    // budget is listed any more.
    cli(&["revoke", &child, "--json"]);
    let console = Console::start(&path, &["--config", config.to_str().expect("utf-8")]);
    let (bob, _) = console.login(&store.add_approver("carol"));
    let page = console.get("/authority", Some(&bob)).body;
    assert!(page.contains("beneath a revoked delegation"), "{page}");
    assert!(!page.contains(&format!("<td class=\"mono\">{child}</td>")), "{page}");
    assert!(!page.contains(&format!("<td class=\"mono\">{grandchild}</td>")), "{page}");
    assert!(page.contains("<td class=\"mono\">head-of-finance</td>"), "{page}");
}

/// A request made under a document whose rule allows scoped grants: the inbox offers the scoped
/// form (with the document's caps), a scope past them is refused and writes nothing, a scope
/// within them grants the request and makes the grant, the inbox lists it with its uses left and
/// a revoke form, and the revoke ends it.
#[test]
fn the_inbox_makes_lists_and_revokes_a_scoped_grant() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("state.redb");
    let document = warden::document::load_str(
        "schema: warden/v1\nactions:\n  stripe.refund:\n    effect: \"refund:{payment_id}\"\n    rules:\n      - decision: \
         approve\n        approval: { scoped: { max_uses: 5, max_minutes: 60 } }\n",
        "scoped.yaml",
    )
    .expect("document");
    let warden = warden::Warden::open(&path, document, warden::WardenOptions::default()).expect("open");
    let ada = Principal::new("refund-agent", Some("ada")).expect("principal");
    let refund = |payment: &str| {
        warden::ActionRequest::new(
            "stripe.refund",
            json!({"payment_id": payment, "customer_id": "cus_1", "amount": 2000}),
            ada.clone(),
        )
    };
    let id = match warden.submit(&refund("p0")) {
        Err(Error::ApprovalRequired { request_id, .. }) => request_id,
        other => panic!("expected an approval request, got {other:?}"),
    };
    drop(warden);
    let store = Store { dir, approval_id: id.clone() };
    let console = Console::start(&store.path(), &[]);
    let (bob, _) = console.login(&store.add_approver("bob"));
    let inbox = console.get("/", Some(&bob));
    assert!(inbox.body.contains("Approve as a scoped grant"), "{}", inbox.body);
    assert!(inbox.body.contains("at most 5 uses, 60 minutes"), "{}", inbox.body);
    let csrf = inbox.csrf();
    let hash = approval(&store)["action_hash"].as_str().expect("hash").to_owned();
    let form = |uses: u32| {
        format!(
            "csrf={csrf}&id={id}&hash={hash}&scope_uses={uses}&scope_minutes=30&scope_fixed=%2Fcustomer_id\
             &scope_at_most=%2Famount%3D5000"
        )
    };
    let before = store.bytes();
    let refused = console.post("/approve", Some(&bob), &form(6));
    assert_ne!(refused.status, 303, "{}", refused.body);
    assert!(refused.body.contains("scope uses must be 1..=5"), "{}", refused.body);
    assert_eq!(store.bytes(), before, "a refused scope writes nothing");
    let granted = console.post("/approve", Some(&bob), &form(3));
    assert_eq!(granted.status, 303, "{}", granted.body);
    assert_eq!(approval(&store)["status"], "granted");
    let listed = store.json(&["grants", "list"]);
    let grant = listed["grants"][0].clone();
    assert_eq!((grant["uses_left"].as_u64(), grant["approver"].as_str()), (Some(3), Some("console:bob")), "{grant}");
    let grant_id = grant["grant_id"].as_str().expect("id").to_owned();
    let inbox = console.get("/", Some(&bob));
    assert!(inbox.body.contains("1 live scoped grants"), "{}", inbox.body);
    assert!(inbox.body.contains(&grant_id) && inbox.body.contains("3 of 3"), "{}", inbox.body);
    let no_reason = console.post("/grants/revoke", Some(&bob), &format!("csrf={csrf}&id={grant_id}"));
    assert_eq!(no_reason.status, 400, "{}", no_reason.body);
    let revoked = console.post("/grants/revoke", Some(&bob), &format!("csrf={csrf}&id={grant_id}&reason=done"));
    assert_eq!(revoked.status, 303, "{}", revoked.body);
    assert!(console.get("/", Some(&bob)).body.contains("0 live scoped grants"));
    let all = store.json(&["grants", "list", "--all"]);
    assert_eq!(all["grants"][0]["revoked"]["by"], "console:bob", "{all}");
    assert_eq!(all["grants"][0]["state"], "revoked");
}

/// Single sign-on: with the document's `sign_in` naming an issuer, "Sign in with single sign-on"
/// reads the token from the header the proxy sets, and only a token that passes every check —
/// in that one header, on a same-origin POST — opens a session, which ends when the token does.
/// Every refusal sets no cookie and never shows the token; the session then answers as
/// `console:NAME` verified by the issuer, with the roles the token lists, and the requester is
/// still refused as approver.
#[test]
fn single_sign_on_signs_in_only_with_a_token_the_documents_issuer_vouches_for() {
    use common::idp::{Idp, ISSUER};
    let store = Store::new();
    let idp = Idp::new(store.dir.path(), "idp");
    let stranger = Idp::new(store.dir.path(), "stranger");
    let header = "X-Auth-Request-Access-Token";
    let document = idp.document(store.dir.path(), header);
    let console = Console::start(&store.path(), &["--config", document.to_str().expect("utf-8")]);
    let page = console.get("/login", None);
    assert!(page.body.contains("Sign in with single sign-on"), "{}", page.body);
    let same_origin = [("Origin", "null"), ("Sec-Fetch-Site", "same-origin")];
    let with = |token: &str| -> Response {
        let mut headers = same_origin.to_vec();
        headers.push((header, token));
        console.send("POST", "/login/sso", &headers, "")
    };
    let good = |sub: &str| Idp::claims(sub, &["finance", "ops"], 300);
    let claims_without = |field: &str| {
        let mut claims = good("bob");
        claims.as_object_mut().expect("object").remove(field);
        claims
    };
    let wrong = |field: &str, value: Value| {
        let mut claims = good("bob");
        claims[field] = value;
        claims
    };
    let before = store.bytes();
    let refusals: Vec<(String, u16, &str)> = vec![
        (idp.sign(&wrong("aud", json!("another-app")), "JWT"), 403, "aud"),
        (idp.sign(&wrong("iss", json!("https://id.example.com/evil")), "JWT"), 403, "iss"),
        (idp.sign(&wrong("exp", json!(common::idp::now_seconds() - 3600)), "JWT"), 403, "expired"),
        (idp.sign(&wrong("nbf", json!(common::idp::now_seconds() + 3600)), "JWT"), 403, "nbf"),
        (idp.sign(&claims_without("exp"), "JWT"), 403, "exp is required"),
        (idp.sign(&claims_without("sub"), "JWT"), 403, "claim"),
        (idp.sign(&good("bob"), "at+jwt"), 403, "typ"),
        (stranger.sign(&good("bob"), "JWT"), 403, "signature"),
        ("Basic Ym9iOmJvYg==".to_owned(), 403, "neither"),
        ("not.a.token".to_owned(), 403, "rejected"),
    ];
    for (token, status, says) in &refusals {
        let refused = with(token);
        assert_eq!(refused.status, *status, "{says}: {}", refused.body);
        assert!(refused.body.contains(says), "{says}: {}", refused.body);
        assert!(refused.header("set-cookie").is_none(), "{says}: a cookie was set");
        assert!(!refused.body.contains(token.as_str()), "{says}: the token is shown");
    }
    let valid = idp.sign(&good("bob"), "JWT");
    // No header, the header twice, a cross-site POST: no session, nothing spent.
    let none = console.send("POST", "/login/sso", &same_origin, "");
    assert_eq!(none.status, 401, "{}", none.body);
    let mut twice = same_origin.to_vec();
    twice.extend([(header, valid.as_str()), (header, valid.as_str())]);
    assert_eq!(console.send("POST", "/login/sso", &twice, "").status, 401);
    let cross = console.send("POST", "/login/sso", &[("Sec-Fetch-Site", "cross-site"), (header, &valid)], "");
    assert_eq!(cross.status, 403, "{}", cross.body);
    assert!(cross.header("set-cookie").is_none());
    // A GET signs nobody in.
    assert_eq!(console.send("GET", "/login/sso", &[(header, &valid)], "").status, 405);
    assert_eq!(store.bytes(), before, "a refused sign-in wrote to the store");

    // The requester's own name signs in, and the kernel refuses it as approver.
    let ada = with(&idp.sign(&good("ada"), "JWT"));
    assert_eq!(ada.status, 303, "{}", ada.body);
    let ada_cookie = ada.header("set-cookie").expect("a cookie").split(';').next().expect("pair").to_owned();
    let csrf = console.get("/", Some(&ada_cookie)).csrf();
    let id = &store.approval_id;
    let hash = approval(&store)["action_hash"].as_str().expect("hash").to_owned();
    let refused = console.post("/approve", Some(&ada_cookie), &format!("csrf={csrf}&id={id}&hash={hash}"));
    assert_eq!(refused.status, 409, "{}", refused.body);
    assert_eq!(store.bytes(), before, "the requester's refused answer wrote to the store");

    let signed_in = with(&valid);
    assert_eq!(signed_in.status, 303, "{}", signed_in.body);
    let set = signed_in.header("set-cookie").expect("a cookie");
    assert!(set.contains("HttpOnly") && set.contains("SameSite=Strict"), "{set}");
    // The session ends with the token (300 s), not after the console's 12 hours.
    let max_age: u64 = set
        .split(';')
        .find_map(|part| part.trim().strip_prefix("Max-Age="))
        .and_then(|age| age.parse().ok())
        .expect("Max-Age");
    assert!((1..=300).contains(&max_age), "{set}");
    let cookie = set.split(';').next().expect("pair").to_owned();
    let inbox = console.get("/", Some(&cookie));
    assert_eq!(inbox.status, 200, "{}", inbox.body);
    let csrf = inbox.csrf();
    let granted = console.post("/approve", Some(&cookie), &format!("csrf={csrf}&id={id}&hash={hash}"));
    assert_eq!(granted.status, 303, "{}", granted.body);
    let record = approval(&store);
    assert_eq!(record["approver"], "console:bob", "{record}");
    assert_eq!(record["votes"][0]["verified"], true, "{record}");
    assert_eq!(record["votes"][0]["issuer"], ISSUER, "{record}");
}

/// Without a `sign_in` section there is no single sign-on: no button, and the endpoint says so.
#[test]
fn without_a_sign_in_section_single_sign_on_is_not_offered() {
    let store = Store::new();
    let console = Console::start(&store.path(), &[]);
    assert!(!console.get("/login", None).body.contains("single sign-on"));
    let refused = console.send("POST", "/login/sso", &[("Sec-Fetch-Site", "same-origin")], "");
    assert_eq!(refused.status, 404, "{}", refused.body);
    assert!(refused.body.contains("no sign_in section"), "{}", refused.body);
}
