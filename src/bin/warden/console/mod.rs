//! `warden console`: a web console for the humans in Warden's loop — the approver, the person who
//! resolves an AMBIGUOUS effect, the auditor. Server-rendered HTML that works without
//! JavaScript, served on loopback by hyper 1.x with axum's router on a current-thread tokio
//! runtime (the CLI's only; the library has no async runtime). See docs/CONSOLE.md.
//!
//! Every write goes through the library's own calls — `Kernel::answer` (as `warden approve` /
//! `deny` do, naming the action hash shown) and `Kernel::resolve` — so the kernel's rules
//! (the requester is never the approver, one answer per person, single use, expiry, M-of-N)
//! hold unchanged. The approver is the logged-in approver's registered name, `console:NAME`,
//! recorded as verified by the console (`approvers`). Fail closed: a request without a live
//! session, or a POST without the session's CSRF token, writes nothing.

pub mod approvers;
mod html;
mod pages;
pub mod sso;
pub mod tls;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::{Path as UrlPath, RawQuery, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;

use warden::approval::{ApprovalStatus, Approver};
use warden::{EffectState, Kernel};

use crate::exit::{Failure, EXIT_CHECK_FAILED, EXIT_USAGE};
use crate::output::shown;
use crate::server::{self, blocking};
use html::{esc, page, Nav, Viewer};

/// The issuer the console's approvers are verified by, as recorded on their votes.
pub const ISSUER: &str = "warden-console";
/// The session cookie's name.
const COOKIE: &str = "warden_console";
/// How long a session lasts from login.
const SESSION_TTL: Duration = Duration::from_secs(12 * 60 * 60);
/// The most sessions kept at once (the oldest is dropped past it).
const MAX_SESSIONS: usize = 1_000;

/// `warden console`'s flags.
#[derive(Debug, clap::Args)]
pub struct ConsoleArgs {
    /// Where to listen, HOST:PORT; port 0 picks a free one (the first stdout line is the URL).
    /// Anything but loopback needs --tls-cert, --tls-key and --public-url.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
    pub listen: String,
    /// The approvers file (default: STORE.approvers beside the store).
    #[arg(long, value_name = "FILE")]
    pub approvers: Option<PathBuf>,
    #[command(flatten)]
    pub tls: tls::TlsArgs,
}

/// `warden approvers add|remove|list`.
#[derive(Debug, clap::Subcommand)]
pub enum ApproversCommand {
    /// Register an approver and print its one-time login token on the last line (with
    /// --operator, a long-lived operator token for `warden operator`).
    Add {
        /// The name: one plain name; the approver answers as console:NAME (operator:NAME).
        name: String,
        /// A role a requirement may ask for (repeatable).
        #[arg(long = "role", value_name = "ROLE")]
        roles: Vec<String>,
        /// Print a long-lived operator token (wot_…) for an MCP client of `warden operator`
        /// instead of a one-time console login token; revoked by `warden approvers remove`.
        #[arg(long)]
        operator: bool,
        /// The approvers file (default: STORE.approvers beside the store).
        #[arg(long, value_name = "FILE")]
        approvers: Option<PathBuf>,
    },
    /// Remove an approver; its sessions end at their next request.
    Remove {
        /// The name.
        name: String,
        /// The approvers file (default: STORE.approvers beside the store).
        #[arg(long, value_name = "FILE")]
        approvers: Option<PathBuf>,
    },
    /// List the approvers (names, roles, whether the token is still unused; never a hash).
    List {
        /// The approvers file (default: STORE.approvers beside the store).
        #[arg(long, value_name = "FILE")]
        approvers: Option<PathBuf>,
    },
}

/// `warden approvers …`.
pub fn approvers_command(what: &ApproversCommand, store: &Path, json: bool) -> Result<String, Failure> {
    match what {
        ApproversCommand::Add { name, roles, operator, approvers } => {
            approvers::add(&approvers::registry_path(approvers.as_deref(), store)?, name, roles, *operator, json)
        }
        ApproversCommand::Remove { name, approvers } => {
            approvers::remove(&approvers::registry_path(approvers.as_deref(), store)?, name, json)
        }
        ApproversCommand::List { approvers } => {
            approvers::list(&approvers::registry_path(approvers.as_deref(), store)?, json)
        }
    }
}

/// One logged-in approver.
#[derive(Clone)]
struct Session {
    /// The approvers-file entry a login token named; `None` for single sign-on (no entry: the
    /// document's `sign_in` issuer verified the person).
    entry_id: Option<String>,
    name: String,
    roles: Vec<String>,
    csrf: String,
    expires: Instant,
}

struct App {
    kernel: Kernel,
    registry: PathBuf,
    /// Keyed by the SHA-256 of the cookie's value.
    sessions: Mutex<HashMap<String, Session>>,
    /// The Host header values this listener answers (DNS rebinding is refused).
    hosts: Vec<String>,
    /// The scheme pages are served with (`http`, `https`): the one an Origin must name.
    origin: &'static str,
    policy_hash: Option<String>,
    grants: Option<serde_json::Value>,
    /// The same grants, typed: their budgets are summed on the Authority page.
    authority: Option<warden::authority::Authority>,
    /// The document's `sign_in` issuer, when people may sign in through it.
    sso: Option<Arc<sso::Sso>>,
}

/// Serve the console until SIGINT or SIGTERM. The URL is the first line of stdout.
pub fn run(args: &ConsoleArgs, store: &Path, config: Option<&Path>) -> Result<(), Failure> {
    let (address, tls) = server::listen_address(&args.listen, &args.tls, "the console")?;
    let registry = approvers::registry_path(args.approvers.as_deref(), store)?;
    let (policy_hash, grants, authority, sso) = match config.filter(|path| !path.as_os_str().is_empty()) {
        Some(path) => {
            let doc = crate::policy_commands::load_config(path)?;
            let sso = sso::Sso::from_section(doc.sign_in.as_ref())?;
            (Some(doc.policy_hash.clone()), doc.authority.clone(), doc.authority_config.clone(), sso)
        }
        None => (None, None, None, None),
    };
    let kernel = crate::store_commands::open_store(Some(store))?;
    let bound = server::Bound::bind(address, tls)?;
    let hosts = bound.hosts.clone();
    let origin = bound.scheme();
    let sessions = Mutex::new(HashMap::new());
    let app = Arc::new(App { kernel, registry, sessions, hosts, origin, policy_hash, grants, authority, sso });
    let runtime = server::runtime()?;
    crate::output::write_stdout(&format!("{}/\n", bound.base()))?;
    if app.sso.is_none() && approvers::list(&app.registry, true).is_ok_and(|listed| listed.trim() == "[]") {
        crate::output::write_stderr(&format!(
            "no approvers yet; `warden approvers add NAME --store {}` prints a login token",
            shown(&store.display().to_string())
        ));
    }
    runtime.block_on(server::serve(bound, router(app)))
}

fn router(app: Arc<App>) -> Router {
    let router = Router::new()
        .route("/", get(inbox))
        .route("/approval/{id}", get(approval))
        .route("/effects", get(effects))
        .route("/receipts", get(receipts))
        .route("/receipt/{id}", get(receipt))
        .route("/authority", get(authority))
        .route("/login", get(login_get).post(login_post))
        .route("/login/sso", post(login_sso))
        .route("/logout", post(logout))
        .route("/approve", post(approve))
        .route("/deny", post(deny))
        .route("/grants/revoke", post(revoke_grant))
        .route("/resolve", post(resolve))
        .route("/console.css", get(css))
        .fallback(not_found)
        .layer(axum::middleware::from_fn_with_state(Arc::clone(&app), guard));
    server::limits(router).with_state(app)
}

/// Every request: the Host must be this listener's (no DNS rebinding), and every response
/// carries headers that keep pages out of frames, caches and referrers.
async fn guard(State(app): State<Arc<App>>, request: Request, next: Next) -> Response {
    let host = request.headers().get(header::HOST).and_then(|h| h.to_str().ok()).map(str::to_ascii_lowercase);
    let mut response = if host.is_some_and(|host| app.hosts.contains(&host)) {
        next.run(request).await
    } else {
        (StatusCode::MISDIRECTED_REQUEST, "warden console: this Host is not the console's address\n").into_response()
    };
    let headers = response.headers_mut();
    let set = |headers: &mut HeaderMap, name: header::HeaderName, value: &'static str| {
        headers.insert(name, HeaderValue::from_static(value));
    };
    set(
        headers,
        header::CONTENT_SECURITY_POLICY,
        "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    );
    set(headers, header::X_CONTENT_TYPE_OPTIONS, "nosniff");
    set(headers, header::REFERRER_POLICY, "no-referrer");
    set(headers, header::X_FRAME_OPTIONS, "DENY");
    set(headers, header::CACHE_CONTROL, "no-store");
    response
}

// ---- sessions ---------------------------------------------------------------------------------

/// The session the request's cookie names, if it is live and its approver is still registered.
/// Two cookies of the console's name are none (fail closed).
fn session(app: &App, headers: &HeaderMap) -> Option<Session> {
    let mut found = None;
    for value in headers.get_all(header::COOKIE) {
        for pair in value.to_str().ok()?.split(';') {
            if let Some((name, value)) = pair.trim().split_once('=') {
                if name == COOKIE {
                    if found.is_some() {
                        return None;
                    }
                    found = Some(value.to_owned());
                }
            }
        }
    }
    let key = approvers::token_hash(&found?);
    let live = {
        let mut sessions = app.sessions.lock().ok()?;
        match sessions.get(&key) {
            Some(session) if session.expires > Instant::now() => session.clone(),
            Some(_) => {
                sessions.remove(&key);
                return None;
            }
            None => return None,
        }
    };
    // Removed from the registry (or re-added: a new entry id) ends a token's session; a single
    // sign-on session ends with its token's expiry (`open_session`).
    if live.entry_id.as_ref().is_some_and(|entry_id| approvers::current(&app.registry, entry_id).is_none()) {
        if let Ok(mut sessions) = app.sessions.lock() {
            sessions.remove(&key);
        }
        return None;
    }
    Some(live)
}

/// A new session for the approver a token was redeemed for, or a person single sign-on
/// verified (`ttl` then ends it with their token); the cookie's value.
fn open_session(
    app: &App,
    entry_id: Option<&str>,
    name: &str,
    roles: &[String],
    ttl: Duration,
) -> Result<String, Failure> {
    let id = approvers::random_hex()?;
    let session = Session {
        entry_id: entry_id.map(str::to_owned),
        name: name.to_owned(),
        roles: roles.to_vec(),
        csrf: approvers::random_hex()?,
        expires: Instant::now() + ttl.min(SESSION_TTL),
    };
    let mut sessions = app.sessions.lock().map_err(|_| Failure::internal("the session table is poisoned"))?;
    let now = Instant::now();
    sessions.retain(|_, s| s.expires > now);
    if sessions.len() >= MAX_SESSIONS {
        if let Some(oldest) = sessions.iter().min_by_key(|(_, s)| s.expires).map(|(k, _)| k.clone()) {
            sessions.remove(&oldest);
        }
    }
    sessions.insert(approvers::token_hash(&id), session);
    Ok(id)
}

/// The form fields of a POST body; a repeated field is refused (fail closed).
fn form(body: &Bytes) -> Option<HashMap<String, String>> {
    let mut fields = HashMap::new();
    for (name, value) in url::form_urlencoded::parse(body) {
        if fields.insert(name.into_owned(), value.into_owned()).is_some() {
            return None;
        }
    }
    Some(fields)
}

/// A POST's session and fields (boxed refusal: a response is large): refused 403 without a live session or without its CSRF token,
/// before anything is read from or written to the store.
fn authorized(
    app: &App,
    headers: &HeaderMap,
    body: &Bytes,
) -> Result<(Session, HashMap<String, String>), Box<Response>> {
    let Some(session) = session(app, headers) else {
        return Err(Box::new(message(
            StatusCode::FORBIDDEN,
            None,
            "Not signed in",
            "Sign in with your login token first; nothing was changed.",
        )));
    };
    let Some(fields) = form(body) else {
        return Err(Box::new(message(
            StatusCode::BAD_REQUEST,
            Some(&session),
            "Malformed form",
            "A field was given twice; nothing was changed.",
        )));
    };
    let csrf_ok = fields.get("csrf").is_some_and(|given| approvers::same(given, &session.csrf));
    if !csrf_ok {
        return Err(Box::new(message(
            StatusCode::FORBIDDEN,
            Some(&session),
            "Form not accepted",
            "The form did not carry this session's CSRF token (an old page, or another site's form); nothing was changed.",
        )));
    }
    Ok((session, fields))
}

/// The approver a session answers as: `console:NAME`, verified by the console.
fn approver(app: &App, session: &Session) -> Result<Approver, Failure> {
    match (&app.sso, &session.entry_id) {
        (_, Some(_)) => {
            approvers::verified_approver(approvers::AGENT, ISSUER, "console_token", &session.name, &session.roles)
        }
        (Some(sso), None) => sso.approver(approvers::AGENT, &session.name, &session.roles),
        (None, None) => Err(Failure::internal("a single sign-on session without the sign_in section")),
    }
}

// ---- responses --------------------------------------------------------------------------------

fn html(status: StatusCode, body: String) -> Response {
    (status, [(header::CONTENT_TYPE, "text/html; charset=utf-8")], body).into_response()
}

fn viewer(session: &Session) -> Viewer<'_> {
    Viewer { name: &session.name, csrf: &session.csrf }
}

/// A page with one message.
fn message(status: StatusCode, session: Option<&Session>, title: &str, text: &str) -> Response {
    let class = if status.is_success() { "note" } else { "bad" };
    let body = format!(
        "<h1>{}</h1><p class=\"banner {class}\">{}</p><p><a href=\"/\">Inbox</a> · <a href=\"/effects\">Effects</a></p>",
        esc(title),
        esc(text)
    );
    html(status, page(title, Nav::None, session.map(viewer).as_ref(), &body))
}

/// A failure from the kernel as a page: a refusal is 409, bad input 400, anything else 500.
fn failed(session: Option<&Session>, what: &str, failure: &Failure) -> Response {
    let status = match failure.code {
        EXIT_CHECK_FAILED => StatusCode::CONFLICT,
        EXIT_USAGE => StatusCode::BAD_REQUEST,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    message(status, session, what, &format!("{}; nothing was changed by this request.", failure.message))
}

/// The sign-in form. Only its POST spends a token.
fn login_page(status: StatusCode, sso: bool, note: Option<&str>) -> Response {
    let note = note.map_or_else(String::new, |n| format!("<p class=\"banner bad\">{}</p>", esc(n)));
    let single = if sso {
        "<section class=\"card\"><p>Sign in through your organisation's identity provider. The session \
         ends when its token does.</p><form method=\"post\" action=\"/login/sso\" class=\"actions\">\
         <button class=\"primary\" type=\"submit\">Sign in with single sign-on</button></form></section>"
    } else {
        ""
    };
    let body = format!(
        "<h1>Sign in</h1>{note}{single}<section class=\"card\"><p>Paste the one-time login token that \
         <code>warden approvers add NAME</code> printed. It works once; the session lasts 12 hours.</p>\
         <form method=\"post\" action=\"/login\" class=\"actions\"><label>Login token\
         <input type=\"password\" name=\"token\" required autocomplete=\"off\"></label>\
         <button class=\"primary\" type=\"submit\">Sign in</button></form></section>"
    );
    html(status, page("Sign in", Nav::None, None, &body))
}

/// Whether a POST comes from the console's own pages, as far as the browser says (login CSRF:
/// a form elsewhere posting to the console). `Sec-Fetch-Site`, which browsers set and pages
/// cannot, decides when present: `same-origin` or `none` only. Without it, an `Origin` must name
/// the console (`null`, which a browser sends under the console's `no-referrer` policy or from
/// an opaque origin, is refused). A client that sends neither (curl, a script) is no browser.
fn same_origin(app: &App, headers: &HeaderMap) -> bool {
    if let Some(site) = headers.get("sec-fetch-site") {
        return matches!(site.to_str(), Ok("same-origin" | "none"));
    }
    match headers.get(header::ORIGIN).map(|origin| origin.to_str()) {
        None => true,
        Some(Ok(origin)) => names_us(origin, app.origin, &app.hosts),
        Some(Err(_)) => false,
    }
}

/// Whether an `Origin` header names this listener: its scheme and one of the Host values it
/// answers (any case).
pub fn names_us(origin: &str, scheme: &str, hosts: &[String]) -> bool {
    origin
        .to_ascii_lowercase()
        .strip_prefix(scheme)
        .and_then(|rest| rest.strip_prefix("://"))
        .is_some_and(|host| hosts.iter().any(|known| known == host))
}

/// `; Secure` on a cookie served over TLS: the browser then never sends it over plain HTTP.
fn secure(app: &App) -> &'static str {
    if app.origin == "https" {
        "; Secure"
    } else {
        ""
    }
}

fn see_other(location: &str) -> Response {
    (StatusCode::SEE_OTHER, [(header::LOCATION, location.to_owned())]).into_response()
}

fn query(raw: Option<&str>) -> HashMap<String, String> {
    let mut fields = HashMap::new();
    for (name, value) in url::form_urlencoded::parse(raw.unwrap_or("").as_bytes()) {
        fields.entry(name.into_owned()).or_insert_with(|| value.into_owned());
    }
    fields
}

// ---- handlers ---------------------------------------------------------------------------------

async fn css() -> Response {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], html::CSS).into_response()
}

async fn not_found(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    let session = session(&app, &headers);
    message(StatusCode::NOT_FOUND, session.as_ref(), "Not found", "There is no such page.")
}

/// A `GET` never spends a token (a link previewer or a cross-site navigation would) and never
/// shows one back: a token in the query is ignored, and the form asks for it.
async fn login_get(State(app): State<Arc<App>>, RawQuery(raw): RawQuery) -> Response {
    if query(raw.as_deref()).contains_key("token") {
        return login_page(
            StatusCode::OK,
            app.sso.is_some(),
            Some("A token in the address is not used (nothing was spent): paste it below and sign in."),
        );
    }
    login_page(StatusCode::OK, app.sso.is_some(), None)
}

async fn login_post(State(app): State<Arc<App>>, headers: HeaderMap, body: Bytes) -> Response {
    if !same_origin(&app, &headers) {
        return login_page(
            StatusCode::FORBIDDEN,
            app.sso.is_some(),
            Some("This sign-in did not come from the console's own page; nothing was spent. Open the console and sign in there."),
        );
    }
    match form(&body).as_ref().and_then(|fields| fields.get("token")) {
        Some(token) => login(&app, token).await,
        None => login_page(StatusCode::BAD_REQUEST, app.sso.is_some(), Some("Give the login token.")),
    }
}

/// Exchange a token for a session: the token is spent in the registry first, then the cookie is
/// set. A bad token says only that it is not valid (never which part, never the token).
async fn login(app: &Arc<App>, token: &str) -> Response {
    let registry = app.registry.clone();
    let token = token.trim().to_owned();
    let redeemed = blocking(move || Ok(approvers::redeem(&registry, &token))).await.ok().flatten();
    let Some(entry) = redeemed else {
        return login_page(
            StatusCode::FORBIDDEN,
            app.sso.is_some(),
            Some("That login token is not valid: unknown, already used, or its approver was removed."),
        );
    };
    signed_in(app, Some(&entry.entry_id), &entry.name, &entry.roles, SESSION_TTL)
}

/// A new session, its cookie set, and the inbox.
fn signed_in(app: &App, entry_id: Option<&str>, name: &str, roles: &[String], ttl: Duration) -> Response {
    match open_session(app, entry_id, name, roles, ttl) {
        Ok(id) => {
            let cookie = format!(
                "{COOKIE}={id}; HttpOnly; SameSite=Strict; Path=/; Max-Age={}{}",
                ttl.min(SESSION_TTL).as_secs(),
                secure(app)
            );
            (StatusCode::SEE_OTHER, [(header::LOCATION, "/".to_owned()), (header::SET_COOKIE, cookie)]).into_response()
        }
        Err(failure) => failed(None, "Sign-in failed", &failure),
    }
}

/// "Sign in with single sign-on": the document's `sign_in` issuer vouches for the person in the
/// token its header carries (set by the authenticating proxy in front of the console). Only a
/// same-origin POST signs in (a cross-site form cannot), and the session ends when the token
/// does. A refusal says why in the verifier's words, never the token.
async fn login_sso(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    let Some(sso) = app.sso.clone() else {
        return login_page(
            StatusCode::NOT_FOUND,
            false,
            Some("Single sign-on is not set up: the document has no sign_in section."),
        );
    };
    if !same_origin(&app, &headers) {
        return login_page(
            StatusCode::FORBIDDEN,
            true,
            Some("This sign-in did not come from the console's own page. Open the console and sign in there."),
        );
    }
    let mut values = headers.get_all(sso.header()).iter();
    let value = match (values.next(), values.next()) {
        (Some(value), None) => value.to_str().ok().map(str::to_owned),
        _ => None,
    };
    let Some(value) = value else {
        return login_page(
            StatusCode::UNAUTHORIZED,
            true,
            Some(&format!(
                "No single sign-on token arrived: the request carries no single {} header. The console reads it \
                 from the proxy that signs people in to the organisation's identity provider.",
                sso.header()
            )),
        );
    };
    let verifier = Arc::clone(&sso);
    let verified = blocking(move || Ok(verifier.verify(&value))).await;
    let user = match verified {
        Ok(Ok(user)) => user,
        Ok(Err(why)) => {
            return login_page(StatusCode::FORBIDDEN, true, Some(&format!("Single sign-on refused: {why}.")))
        }
        Err(failure) => return failed(None, "Sign-in failed", &failure),
    };
    if let Err(failure) = sso.approver(approvers::AGENT, &user.name, &user.roles) {
        return login_page(StatusCode::FORBIDDEN, true, Some(&format!("Single sign-on refused: {}.", failure.message)));
    }
    let left = user.expires_at.saturating_sub(app.kernel.now());
    let ttl = Duration::from_micros(u64::try_from(left).unwrap_or(0));
    if ttl.is_zero() {
        return login_page(StatusCode::FORBIDDEN, true, Some("Single sign-on refused: the token has expired."));
    }
    signed_in(&app, None, &user.name, &user.roles, ttl)
}

async fn logout(State(app): State<Arc<App>>, headers: HeaderMap, body: Bytes) -> Response {
    let (_, _) = match authorized(&app, &headers, &body) {
        Ok(found) => found,
        Err(refused) => return *refused,
    };
    if let Some(value) = headers.get(header::COOKIE).and_then(|v| v.to_str().ok()) {
        for pair in value.split(';') {
            if let Some((COOKIE, id)) = pair.trim().split_once('=') {
                if let Ok(mut sessions) = app.sessions.lock() {
                    sessions.remove(&approvers::token_hash(id));
                }
            }
        }
    }
    let cookie = format!("{COOKIE}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0{}", secure(&app));
    (StatusCode::SEE_OTHER, [(header::LOCATION, "/login".to_owned()), (header::SET_COOKIE, cookie)]).into_response()
}

async fn inbox(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    let Some(session) = session(&app, &headers) else { return see_other("/login") };
    let worker = Arc::clone(&app);
    let read = blocking(move || {
        let pending = worker.kernel.pending_approvals()?;
        // Only the requests the page shows are compared and given their scope's caps.
        let mut names: Vec<&str> = pages::shown(&pending).map(|r| r.action_name.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        let previous = pages::last_approved(&worker.kernel, &names)?;
        let grants = worker.kernel.scoped_grants(true)?;
        let limits = pages::scope_limits(&worker.kernel, pages::shown(&pending))?;
        Ok((pending, previous, grants, limits, worker.kernel.now()))
    })
    .await;
    match read {
        Ok((pending, previous, grants, limits, now)) => {
            let body = pages::inbox(&pages::Inbox {
                pending: &pending,
                previous: &previous,
                now,
                csrf: &session.csrf,
                policy_hash: app.policy_hash.as_deref(),
                grants: &grants,
                limits: &limits,
            });
            html(StatusCode::OK, page("Inbox", Nav::Inbox, Some(&viewer(&session)), &body))
        }
        Err(failure) => failed(Some(&session), "Cannot read the inbox", &failure),
    }
}

/// One request as it stands now (where an answer leads).
async fn approval(State(app): State<Arc<App>>, headers: HeaderMap, UrlPath(id): UrlPath<String>) -> Response {
    let Some(session) = session(&app, &headers) else { return see_other("/login") };
    let worker = Arc::clone(&app);
    let read = blocking(move || {
        let record = worker.kernel.approval(&id)?;
        let names: Vec<&str> = record.iter().map(|r| r.action_name.as_str()).collect();
        let previous = pages::last_approved(&worker.kernel, &names)?;
        let limits = pages::scope_limits(&worker.kernel, record.iter())?;
        Ok((record, previous, limits, worker.kernel.now()))
    })
    .await;
    let (record, previous, limits, now) = match read {
        Ok((Some(record), previous, limits, now)) => (record, previous, limits, now),
        Ok((None, _, _, _)) => {
            return message(StatusCode::NOT_FOUND, Some(&session), "Not found", "No such approval request.")
        }
        Err(failure) => return failed(Some(&session), "Cannot read the request", &failure),
    };
    let mut status = record.status;
    if status == ApprovalStatus::Pending && now > record.expires_at {
        status = ApprovalStatus::Expired;
    }
    let mut body = format!(
        "<p class=\"banner {}\" id=\"status\">Request <span class=\"mono\">{}</span> is <strong>{}</strong>{}.</p>",
        if status == ApprovalStatus::Denied || status == ApprovalStatus::Expired { "bad" } else { "ok" },
        esc(&record.approval_id),
        status.as_str(),
        record.approver.as_deref().map_or_else(String::new, |a| format!(" (decided by {})", esc(a)))
    );
    if status == ApprovalStatus::Pending {
        body.push_str(&pages::inbox(&pages::Inbox {
            pending: std::slice::from_ref(&record),
            previous: &previous,
            now,
            csrf: &session.csrf,
            policy_hash: app.policy_hash.as_deref(),
            grants: &[],
            limits: &limits,
        }));
    } else {
        body.push_str(&format!("<h2>The request as stored</h2>{}", html::pre_json(&record.to_json())));
    }
    body.push_str("<p><a href=\"/\">Back to the inbox</a></p>");
    html(StatusCode::OK, page("Approval", Nav::Inbox, Some(&viewer(&session)), &body))
}

async fn approve(State(app): State<Arc<App>>, headers: HeaderMap, body: Bytes) -> Response {
    let (session, fields) = match authorized(&app, &headers, &body) {
        Ok(found) => found,
        Err(refused) => return *refused,
    };
    let (Some(id), Some(hash)) = (fields.get("id").cloned(), fields.get("hash").cloned()) else {
        return message(
            StatusCode::BAD_REQUEST,
            Some(&session),
            "Not approved",
            "The form named no request or no action hash; nothing was changed.",
        );
    };
    let approver = match approver(&app, &session) {
        Ok(approver) => approver,
        Err(failure) => return failed(Some(&session), "Not approved", &failure),
    };
    let scope = match form_scope(&fields) {
        Ok(scope) => scope,
        Err(failure) => return failed(Some(&session), "Not approved", &failure),
    };
    let worker = Arc::clone(&app);
    let target = id.clone();
    // As `warden approve`: the grant names the action hash the approver was shown.
    let answered = blocking(move || {
        match scope {
            Some(scope) => {
                worker.kernel.answer_scoped(&target, &approver, &scope, Some(&hash))?;
            }
            None => {
                worker.kernel.answer(&target, &approver, None, true, None, Some(&hash))?;
            }
        }
        Ok(())
    })
    .await;
    match answered {
        Ok(()) => see_other(&format!("/approval/{}", html::url_part(&id))),
        Err(failure) => failed(Some(&session), "Not approved", &failure),
    }
}

/// The scope an approve form asks for: `None` without `scope_uses`; pointers and bounds one per
/// line, as `warden approve`'s repeated flags.
fn form_scope(fields: &HashMap<String, String>) -> Result<Option<warden::approval::scope::Scope>, Failure> {
    let text = |name: &str| fields.get(name).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
    let number = |name: &str| -> Result<Option<u32>, Failure> {
        text(name)
            .map(|v| v.parse::<u32>().map_err(|_| Failure::usage(format!("{name} must be a whole number, got {v}"))))
            .transpose()
    };
    let lines = |name: &str| -> Vec<String> {
        text(name)
            .map_or_else(Vec::new, |v| v.lines().map(str::trim).filter(|l| !l.is_empty()).map(str::to_owned).collect())
    };
    crate::grant_commands::scope_from_flags(
        number("scope_uses")?,
        number("scope_minutes")?,
        &lines("scope_fixed"),
        &lines("scope_at_most"),
    )
}

async fn revoke_grant(State(app): State<Arc<App>>, headers: HeaderMap, body: Bytes) -> Response {
    let (session, fields) = match authorized(&app, &headers, &body) {
        Ok(found) => found,
        Err(refused) => return *refused,
    };
    let id = fields.get("id").cloned();
    let reason = fields.get("reason").map(|r| r.trim().to_owned()).filter(|r| !r.is_empty());
    let (Some(id), Some(reason)) = (id, reason) else {
        return message(
            StatusCode::BAD_REQUEST,
            Some(&session),
            "Not revoked",
            "A revocation names the grant and needs a reason; nothing was changed.",
        );
    };
    let by = match approver(&app, &session) {
        Ok(approver) => approver.label(),
        Err(failure) => return failed(Some(&session), "Not revoked", &failure),
    };
    let worker = Arc::clone(&app);
    let revoked = blocking(move || Ok(worker.kernel.revoke_scoped_grant(&id, &by, &reason)?)).await;
    match revoked {
        Ok(_) => see_other("/"),
        Err(failure) => failed(Some(&session), "Not revoked", &failure),
    }
}

async fn deny(State(app): State<Arc<App>>, headers: HeaderMap, body: Bytes) -> Response {
    let (session, fields) = match authorized(&app, &headers, &body) {
        Ok(found) => found,
        Err(refused) => return *refused,
    };
    let Some(id) = fields.get("id").cloned() else {
        return message(
            StatusCode::BAD_REQUEST,
            Some(&session),
            "Not denied",
            "The form named no request; nothing was changed.",
        );
    };
    let reason = fields.get("reason").map(|r| r.trim().to_owned()).filter(|r| !r.is_empty());
    let Some(reason) = reason else {
        return message(
            StatusCode::BAD_REQUEST,
            Some(&session),
            "Not denied",
            "A deny needs a reason; nothing was changed.",
        );
    };
    let approver = match approver(&app, &session) {
        Ok(approver) => approver,
        Err(failure) => return failed(Some(&session), "Not denied", &failure),
    };
    let worker = Arc::clone(&app);
    let target = id.clone();
    let answered =
        blocking(move || Ok(worker.kernel.answer(&target, &approver, Some(&reason), false, None, None)?)).await;
    match answered {
        Ok(_) => see_other(&format!("/approval/{}", html::url_part(&id))),
        Err(failure) => failed(Some(&session), "Not denied", &failure),
    }
}

async fn resolve(State(app): State<Arc<App>>, headers: HeaderMap, body: Bytes) -> Response {
    let (session, fields) = match authorized(&app, &headers, &body) {
        Ok(found) => found,
        Err(refused) => return *refused,
    };
    let Some(key) = fields.get("key").cloned() else {
        return message(
            StatusCode::BAD_REQUEST,
            Some(&session),
            "Not resolved",
            "The form named no effect; nothing was changed.",
        );
    };
    let to = match fields.get("outcome").map(String::as_str) {
        Some("committed") => EffectState::Committed,
        Some("failed") => EffectState::Failed,
        _ => {
            return message(
                StatusCode::BAD_REQUEST,
                Some(&session),
                "Not resolved",
                "Say whether it committed or failed; nothing was changed.",
            )
        }
    };
    let reason = fields.get("reason").map(|r| r.trim().to_owned()).filter(|r| !r.is_empty());
    let Some(reason) = reason else {
        return message(
            StatusCode::BAD_REQUEST,
            Some(&session),
            "Not resolved",
            "A resolution needs a reason; nothing was changed.",
        );
    };
    // The attempt the page showed: the kernel refuses the resolution if the effect has moved
    // on to another attempt since (resolved and tried again).
    let Some(attempt) = fields.get("attempt").and_then(|a| a.parse::<u32>().ok()) else {
        return message(
            StatusCode::BAD_REQUEST,
            Some(&session),
            "Not resolved",
            "The form named no attempt of the effect (reload the Effects page and resolve from there); nothing was changed.",
        );
    };
    // The kernel keeps one resolver line per effect: who, and why.
    let resolver = format!("{}:{} ({reason})", approvers::AGENT, session.name);
    let worker = Arc::clone(&app);
    let resolved = blocking(move || Ok(worker.kernel.resolve_attempt(&key, Some(attempt), to, &resolver)?)).await;
    match resolved {
        Ok(record) => {
            let text = format!(
                "Effect {} is now {}, resolved by {}.",
                record.effect_key,
                record.state,
                record.resolved_by.as_deref().unwrap_or("-")
            );
            message(StatusCode::OK, Some(&session), "Resolved", &text)
        }
        Err(failure) => failed(Some(&session), "Not resolved", &failure),
    }
}

async fn effects(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    let Some(session) = session(&app, &headers) else { return see_other("/login") };
    let worker = Arc::clone(&app);
    let read = blocking(move || {
        let ambiguous = worker.kernel.effects(Some(EffectState::Ambiguous), pages::EFFECT_ROWS)?;
        let mut others: Vec<_> = worker
            .kernel
            .effects(None, pages::EFFECT_ROWS)?
            .into_iter()
            .filter(|r| r.state != EffectState::Ambiguous)
            .collect();
        others.sort_by_key(|r| (pages::state_rank(r.state), std::cmp::Reverse(r.updated_at)));
        Ok((ambiguous, others))
    })
    .await;
    match read {
        Ok((ambiguous, others)) => {
            let body = pages::effects(&pages::Effects { ambiguous: &ambiguous, others: &others, csrf: &session.csrf });
            html(StatusCode::OK, page("Effects", Nav::Effects, Some(&viewer(&session)), &body))
        }
        Err(failure) => failed(Some(&session), "Cannot read the effects", &failure),
    }
}

async fn receipts(State(app): State<Arc<App>>, headers: HeaderMap, RawQuery(raw): RawQuery) -> Response {
    let Some(session) = session(&app, &headers) else { return see_other("/login") };
    let fields = query(raw.as_deref());
    let filter = pages::ReceiptFilter {
        action: fields.get("action").cloned(),
        agent: fields.get("agent").cloned(),
        key: fields.get("key").cloned(),
        from: fields.get("from").cloned(),
        to: fields.get("to").cloned(),
    };
    let worker = Arc::clone(&app);
    // The same verifier as `warden receipts --verify-chain`.
    let read =
        blocking(move || Ok((worker.kernel.verify_chain()?, worker.kernel.last_receipts(pages::RECEIPT_WINDOW)?)))
            .await;
    match read {
        Ok((report, rows)) => {
            let body = pages::receipts(&report, &rows, &filter);
            html(StatusCode::OK, page("Receipts", Nav::Receipts, Some(&viewer(&session)), &body))
        }
        Err(failure) => failed(Some(&session), "Cannot read the receipts", &failure),
    }
}

async fn receipt(State(app): State<Arc<App>>, headers: HeaderMap, UrlPath(id): UrlPath<String>) -> Response {
    let Some(session) = session(&app, &headers) else { return see_other("/login") };
    let worker = Arc::clone(&app);
    let read = blocking(move || {
        let Some(seq) = worker.kernel.receipt_seq(&id)? else { return Ok(None) };
        Ok(worker.kernel.receipts(seq, 1)?.into_iter().find(|(found, _)| *found == seq))
    })
    .await;
    match read {
        Ok(Some((seq, found))) => {
            html(StatusCode::OK, page("Receipt", Nav::Receipts, Some(&viewer(&session)), &pages::receipt(seq, &found)))
        }
        Ok(None) => message(StatusCode::NOT_FOUND, Some(&session), "Not found", "No such receipt."),
        Err(failure) => failed(Some(&session), "Cannot read the receipt", &failure),
    }
}

async fn authority(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    let Some(session) = session(&app, &headers) else { return see_other("/login") };
    let worker = Arc::clone(&app);
    let read = blocking(move || {
        let delegations = worker.kernel.all_delegations()?;
        let budgets = crate::authority_commands::budget_rows(&worker.kernel, worker.authority.as_ref(), &delegations)?;
        Ok((delegations, budgets))
    });
    match read.await {
        Ok((delegations, budgets)) => {
            let body = pages::authority(&delegations, &budgets, app.grants.as_ref(), app.authority.is_some());
            html(StatusCode::OK, page("Authority", Nav::Authority, Some(&viewer(&session)), &body))
        }
        Err(failure) => failed(Some(&session), "Cannot read the delegations", &failure),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::listen_address;

    #[test]
    fn without_tls_only_loopback_is_served() {
        let plain = tls::TlsArgs::default();
        for ok in ["127.0.0.1:0", "[::1]:8080", "localhost:9000", "127.0.0.2:1"] {
            assert!(listen_address(ok, &plain, "the console").is_ok(), "{ok}");
        }
        for refused in ["0.0.0.0:8080", "[::]:80", "10.0.0.1:80", "example.com:80", "127.0.0.1", "localhost:x"] {
            assert!(listen_address(refused, &plain, "the console").is_err(), "{refused}");
        }
        let message =
            listen_address("0.0.0.0:8080", &plain, "the console").err().map(|f| f.message).unwrap_or_default();
        assert!(message.contains("--tls-cert"), "{message}");
    }

    #[test]
    fn an_origin_names_us_by_scheme_and_host() {
        let hosts = vec!["127.0.0.1:8080".to_owned(), "ops.example.com".to_owned()];
        let table = [
            ("http://127.0.0.1:8080", "http", true),
            ("HTTP://127.0.0.1:8080", "http", true),
            ("https://127.0.0.1:8080", "http", false),
            ("http://127.0.0.1:8080", "https", false),
            ("https://ops.example.com", "https", true),
            ("https://ops.example.com.evil", "https", false),
            ("https:ops.example.com", "https", false),
            ("null", "https", false),
        ];
        for (origin, scheme, ours) in table {
            assert_eq!(names_us(origin, scheme, &hosts), ours, "{origin} under {scheme}");
        }
    }

    #[test]
    fn a_repeated_form_field_is_refused() {
        assert!(form(&Bytes::from_static(b"csrf=a&csrf=b")).is_none());
        assert_eq!(
            form(&Bytes::from_static(b"id=apr_1&reason=a+b")).and_then(|f| f.get("reason").cloned()),
            Some("a b".into())
        );
    }
}
