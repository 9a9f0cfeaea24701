//! `warden gateway`: every MCP `tools/call` through the kernel, with no change to the agent.
//!
//! A module tree of the binary, not of the library: the gateway is a program (a listener, a
//! child process, threads), it adds no C ABI surface and no dependency to the library the
//! bindings load, and it uses only the library's public API (`Warden::submit`, permits,
//! approvals, identity providers). See docs/GATEWAY.md.
//!
//! `wire` (pure checks before forwarding) → `classify` (pure outcome table) → `upstream`
//! (HTTP/1.1 client, one fresh connection per call) / `stdio` (child process) → `intercept`
//! (kernel calls, receipts, answers) → `http` (the listener).

mod admin;
mod answer;
mod catalog;
mod classify;
mod client;
mod commands;
mod coverage;
mod credential;
mod elicitation;
mod exchange;
mod http;
mod intercept;
mod lists;
mod log;
#[cfg(feature = "otel")]
mod otel_record;
mod pins;
mod resource;
mod sampling;
mod scaffold;
pub mod settings;
mod sse;
mod stdio;
mod tasks;
mod telemetry;
mod tls;
mod toolset;
mod upstream;
mod wire;

use std::io::Write;
use std::net::{IpAddr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use warden::identity::{
    HeaderProvider, IdentityProvider, JwtAlgorithm, JwtConfig, JwtProvider, KeySource, StaticProvider,
};
use warden::pipeline::{Warden, WardenOptions};

use crate::exit::{Failure, EXIT_INTERNAL};

// Each bool is one command-line switch.
#[allow(clippy::struct_excessive_bools)]
#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct GatewayArgs {
    #[command(subcommand)]
    pub action: Option<GatewayCommand>,
    /// The upstream MCP server's Streamable HTTP endpoint (http://HOST:PORT/PATH).
    #[arg(long, value_name = "URL")]
    pub upstream: Option<String>,
    /// The name in every action: a tool T becomes mcp.<alias>.T (lowercase letters, digits, _ and -).
    #[arg(long, value_name = "NAME", required_unless_present = "settings")]
    pub alias: Option<String>,
    /// Read these flags (and --config, --store, the server's command) from a YAML file, each
    /// under its name in snake_case (upstream_timeout: 30); a flag is given in the file or on
    /// the command line, not both.
    #[arg(long, value_name = "FILE")]
    pub settings: Option<PathBuf>,
    /// Where to listen; port 0 picks a free one (the first stdout line says which).
    #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:8900")]
    pub listen: String,
    /// The MCP endpoint's path.
    #[arg(long, value_name = "PATH", default_value = "/mcp")]
    pub path: String,
    /// Listen on an address other than loopback.
    #[arg(long)]
    pub allow_remote: bool,
    /// Serve GET /metrics (Prometheus text: actions, effects by state, approvals, store writes)
    /// on this address; off unless given, loopback unless --allow-remote; port 0 picks one (the
    /// startup block says which).
    #[arg(long, value_name = "HOST:PORT")]
    pub admin: Option<String>,
    /// Connections one client address (an IPv4 address or IPv6 /64) may hold at once, 1 to 64.
    /// Behind a TLS-terminating proxy every client is the proxy's address: raise it to what the
    /// proxy itself bounds.
    #[arg(long, value_name = "N", default_value_t = http::gate::MAX_PER_PEER as u16,
          value_parser = clap::value_parser!(u16).range(1..=http::gate::MAX_CONNECTIONS as i64))]
    pub max_connections_per_peer: u16,
    /// What a returned write survives (a file store): power, the default, or process (the
    /// journal is not synced: a power loss can lose the last calls' reservations and outcomes).
    #[arg(long, value_name = "LEVEL", default_value = "power", value_parser = ["power", "process"])]
    pub durability: String,
    /// An Origin allowed to call (repeatable); without any, every request with an Origin is refused.
    #[arg(long = "allow-origin", value_name = "ORIGIN")]
    pub allow_origin: Vec<String>,
    /// The HTTP status of a JSON-RPC refusal of a tools/call the gateway accepted: reference
    /// (400, 403, 409 or 502 by code, as ctrlrun's gateway) or 200 (as the MCP Streamable HTTP
    /// transport answers a request; the TypeScript SDK reads a refusal's code and data only so).
    #[arg(long, value_name = "STATUS", default_value = "reference", value_parser = ["reference", "200"])]
    pub refusal_status: String,
    /// The largest request body accepted.
    #[arg(long, value_name = "N", default_value_t = 1_048_576)]
    pub max_body_bytes: usize,
    /// How long to wait for the upstream to connect, and between bytes of its answer.
    #[arg(long, value_name = "SECONDS", default_value_t = 30)]
    pub upstream_timeout: u64,
    /// Elicitation rounds (input_required answers) allowed per call; one more is AMBIGUOUS.
    #[arg(long, value_name = "N", default_value_t = 8)]
    pub max_elicitation_rounds: u32,
    /// How long a suspended call waits for its continuation before it is recorded AMBIGUOUS.
    #[arg(long, value_name = "SECONDS", default_value_t = 300)]
    pub elicitation_timeout: u64,
    /// How long a tools/call answered with a task handle is held without being seen alive (a
    /// task's ttlMs, when shorter, bounds it too); then its effect is recorded AMBIGUOUS.
    #[arg(long, value_name = "SECONDS", default_value_t = 3600)]
    pub task_timeout: u64,
    /// How long a call that needs approval waits for a human's answer (then runs, or is
    /// refused); 0 answers -41002 at once.
    #[arg(long, value_name = "SECONDS", default_value_t = 0)]
    pub wait_approvals: u64,
    /// A fixed principal, AGENT or AGENT/USER, asserted by whoever starts the gateway.
    #[arg(long, value_name = "AGENT[/USER]")]
    pub principal: Option<String>,
    /// The header that names the agent (set by a proxy that authenticates the caller).
    #[arg(long, value_name = "H")]
    pub principal_header: Option<String>,
    /// The header that names the user, beside --principal-header.
    #[arg(long, value_name = "U")]
    pub user_header: Option<String>,
    /// Verify a bearer JWT per call and take the principal from its claims.
    #[arg(long)]
    pub identity_jwt: bool,
    /// The authorization server whose tokens are accepted (`iss`, exactly); published as the
    /// resource's authorization server.
    #[arg(long, value_name = "ISS")]
    pub identity_jwt_issuer: Option<String>,
    /// The `aud` tokens must name: this gateway's --resource (given alone it must equal it).
    #[arg(long, value_name = "AUD")]
    pub identity_jwt_audience: Option<String>,
    /// This gateway's canonical URI as clients reach it (https://HOST/PATH, RFC 8707), with
    /// --identity-jwt: a token's aud must name it, and its protected-resource metadata (RFC
    /// 9728) is served at /.well-known/oauth-protected-resource/PATH.
    #[arg(long, value_name = "URI")]
    pub resource: Option<String>,
    /// A scope published in the resource's metadata and its 401 challenges (repeatable).
    #[arg(long = "scopes-supported", value_name = "SCOPE")]
    pub scopes_supported: Vec<String>,
    /// RS256, ES256 or EdDSA (repeatable).
    #[arg(long = "identity-jwt-algorithms", value_name = "ALG")]
    pub identity_jwt_algorithms: Vec<String>,
    /// A PEM public key (SPKI) that signs the tokens.
    #[arg(long, value_name = "FILE")]
    pub identity_jwt_public_key: Option<PathBuf>,
    /// A JWK Set over HTTPS.
    #[arg(long, value_name = "URL")]
    pub identity_jwt_jwks_url: Option<String>,
    /// The `typ` the tokens declare ("" when the issuer sets none).
    #[arg(long, value_name = "TYP")]
    pub identity_jwt_token_type: Option<String>,
    /// The header carrying `Bearer <jwt>`; consumed here and never forwarded upstream.
    #[arg(long, value_name = "H")]
    pub identity_jwt_header: Option<String>,
    /// The claim naming the user.
    #[arg(long, value_name = "CLAIM")]
    pub identity_jwt_user_claim: Option<String>,
    /// Also write each call's arguments in its log line (off by default: arguments may carry
    /// personal data or secrets that a log must not hold).
    #[arg(long)]
    pub log_arguments: bool,
    /// Where the upstream's tool set is pinned (default: <store>.<alias>.pins.json beside a
    /// file store; required with a PostgreSQL store).
    #[arg(long, value_name = "FILE")]
    pub pins: Option<PathBuf>,
    /// Read the document's `gateway.upstream_auth` credential references from the file of that
    /// name in DIR instead of from the environment (systemd credentials, container secrets).
    #[arg(long, value_name = "DIR")]
    pub credentials_dir: Option<PathBuf>,
    /// Speak MCP on stdin/stdout and run the upstream server as a child: -- COMMAND [ARGS…].
    #[arg(long)]
    pub stdio: bool,
    /// The upstream server's command line, after `--` (with --stdio).
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// `warden gateway pins …` and the other commands beside running a gateway.
#[derive(Debug, clap::Subcommand)]
pub enum GatewayCommand {
    /// The upstream's tool set as pinned: what is accepted, what changed since, and accepting
    /// the changed set (the tools it changed are refused until then).
    #[command(subcommand)]
    Pins(commands::PinsCommand),
    /// Connect to a server, list its tools, and write a commented warden.yaml skeleton: one
    /// mcp.<alias>.<tool> action per tool, each denied (or --decision approve) until you
    /// decide, with an effect template suggested from the schema's required properties.
    Scaffold(commands::ScaffoldArgs),
}

/// How the principal is found, for the startup block.
enum IdentitySource {
    Static(String),
    Header { agent: String, user: Option<String> },
    Jwt { header: String, resource: Box<resource::ProtectedResource> },
}

/// `warden gateway pins …` (and the other subcommands): a report, like any other command.
pub fn subcommand(command: &GatewayCommand, store: &Path, json: bool) -> Result<crate::exit::Done, Failure> {
    match command {
        GatewayCommand::Pins(pins) => commands::pins(pins, store, json),
        GatewayCommand::Scaffold(args) => commands::scaffold(args, json),
    }
}

/// Run the gateway until it is stopped. Returns only on a startup refusal (exit 2) or a fault.
pub fn run(args: &GatewayArgs, store: Option<&Path>, config: Option<&Path>) -> Result<(), Failure> {
    let (source, provider) = identity(args)?;
    let alias = args.alias.as_deref().unwrap_or_default();
    check_alias(alias)?;
    let most = u64::try_from(warden::kernel::MAX_WAIT / 1_000_000).unwrap_or(u64::MAX);
    if args.wait_approvals > most {
        return Err(Failure::usage(format!("--wait-approvals is at most {most} seconds (a day); give a shorter wait")));
    }
    check_path(&args.path)?;
    let Some(config) = config else {
        return Err(Failure::usage(
            "warden gateway needs the administrator's document: pass --config FILE or set WARDEN_CONFIG",
        ));
    };
    let Some(store) = store.filter(|s| !s.as_os_str().is_empty()) else {
        return Err(Failure::usage("warden gateway needs a store: pass --store PATH or set WARDEN_STORE"));
    };
    if args.stdio {
        if args.upstream.is_some() {
            return Err(Failure::usage("--stdio runs the upstream as a child (-- COMMAND …); drop --upstream"));
        }
        if args.command.is_empty() {
            return Err(Failure::usage("--stdio needs the upstream server's command after --, e.g. -- npx -y @modelcontextprotocol/server-everything"));
        }
        if !matches!(source, IdentitySource::Static(_)) {
            return Err(Failure::usage(
                "--stdio has no headers to read an identity from; give --principal AGENT[/USER] (asserted by the launch configuration)",
            ));
        }
        let admin = admin_listener(args)?;
        let telemetry = telemetry::Telemetry::from_env(admin.is_some()).map_err(Failure::usage)?;
        let warden = open(store, config, &args.durability)?;
        refuse_unmatched_alias(&warden, alias)?;
        refuse_certificate_pins(&warden, alias, "a stdio child has no certificate")?;
        refuse_stdio_credential(&warden, args)?;
        let catalog = catalog(args, alias, store)?;
        let mut block = startup_block(
            &warden,
            &source,
            &format!("child process: {}", log::printable(&args.command.join(" "))),
            config,
            true,
        );
        block.push_str(&pins_block(&catalog, alias, warden.document()));
        block.push_str(arguments_logged(args));
        block.push_str(&telemetry_block(&telemetry, admin.as_ref()));
        let mut engine = engine(warden, args, provider, catalog);
        engine.telemetry = telemetry;
        let engine = Arc::new(engine);
        start_telemetry(&engine, admin);
        sweeper(&engine);
        resumed(&engine);
        write_stderr(&block);
        let ran = stdio::run(Arc::clone(&engine), &args.command, Duration::from_secs(args.upstream_timeout.max(1)));
        engine.telemetry.shutdown();
        return ran;
    }
    if !args.command.is_empty() {
        return Err(Failure::usage("a command after -- is only for --stdio"));
    }
    let Some(raw) = args.upstream.as_deref() else {
        return Err(Failure::usage("give --upstream http://HOST:PORT/PATH (or --stdio -- COMMAND …)"));
    };
    let upstream = upstream::Upstream::parse(raw).map_err(Failure::usage)?;
    check_listen("--listen", &args.listen, args.allow_remote)?;
    if args.upstream_timeout == 0 {
        return Err(Failure::usage("--upstream-timeout must be at least 1 second"));
    }
    let admin = admin_listener(args)?;
    let telemetry = telemetry::Telemetry::from_env(admin.is_some()).map_err(Failure::usage)?;
    let warden = open(store, config, &args.durability)?;
    refuse_unmatched_alias(&warden, alias)?;
    let catalog = catalog(args, alias, store)?;
    let tls = if upstream.https {
        let prefix = format!("mcp.{alias}.");
        let pins: Vec<&warden::document::UpstreamPins> = warden
            .document()
            .actions
            .iter()
            .filter(|(name, _)| name.starts_with(&prefix))
            .filter_map(|(_, entry)| entry.upstream.as_ref())
            .collect();
        Some(tls::client_config(&pins).map_err(Failure::config)?)
    } else {
        refuse_certificate_pins(&warden, alias, "--upstream is http://, which has no certificate")?;
        None
    };
    let credential = upstream_credential(&warden, args, &source)?;
    let dialer = upstream::Dialer {
        timeouts: upstream::Timeouts {
            connect: Duration::from_secs(args.upstream_timeout),
            io: Duration::from_secs(args.upstream_timeout),
        },
        tls,
        credential: credential.clone(),
    };
    if pins_certificate(&warden, alias) {
        // The first call would find out; a swapped server is better found before listening.
        match upstream::probe(&upstream, &dialer) {
            upstream::Probe::Passed => {}
            upstream::Probe::Unreachable(what) => log::warn(&format!(
                "the upstream's certificate could not be checked at startup ({what}); every handshake checks it"
            )),
            upstream::Probe::Refused(what) => {
                return Err(Failure::usage(format!(
                    "the upstream's certificate does not pass the document's pins ({}); fix upstream.tls_cert_sha256 or the server",
                    log::printable(&what)
                )))
            }
        }
    }
    let listener = TcpListener::bind(&args.listen)
        .map_err(|e| Failure::usage(format!("cannot listen on {}: {e}; pick another --listen", args.listen)))?;
    let local = listener.local_addr().map_err(|e| Failure::internal(format!("the listener has no address: {e}")))?;
    let shown_host = match local.ip() {
        IpAddr::V6(ip) => format!("[{ip}]"),
        IpAddr::V4(ip) => ip.to_string(),
    };
    let mut block = startup_block(&warden, &source, &upstream.url, config, false);
    match &credential {
        Some(credential) => block.push_str(&credential.describe()),
        None => {
            block.push_str("upstream credential none (gateway.upstream_auth); the client's token is never forwarded\n")
        }
    }
    block.push_str(&pins_block(&catalog, alias, warden.document()));
    block.push_str(arguments_logged(args));
    block.push_str(&telemetry_block(&telemetry, admin.as_ref()));
    let mut identity_headers = Vec::new();
    let mut consumed = Vec::new();
    match &source {
        IdentitySource::Static(_) => {}
        IdentitySource::Header { agent, user } => {
            // The identity is the gateway's to read, not the upstream's: a server that trusted
            // a relayed `X-Agent` would take whatever name reached the gateway as vouched for.
            identity_headers.push(agent.clone());
            identity_headers.extend(user.clone());
            consumed.push(agent.clone());
            consumed.extend(user.clone());
        }
        IdentitySource::Jwt { header, .. } => {
            identity_headers.push(header.clone());
            consumed.push(header.clone());
        }
    }
    let protected = match &source {
        IdentitySource::Jwt { resource, .. } => Some((**resource).clone()),
        _ => None,
    };
    let http_config = http::HttpConfig {
        path: args.path.clone(),
        max_body_bytes: args.max_body_bytes,
        upstream,
        dialer,
        identity_headers,
        allowed_origins: args.allow_origin.clone(),
        consumed,
        max_per_peer: usize::from(args.max_connections_per_peer),
        protected,
        refusals_ok: args.refusal_status == "200",
    };
    let mut engine = engine(warden, args, provider, catalog);
    engine.telemetry = telemetry;
    engine.upstream_credential = credential;
    let engine = Arc::new(engine);
    start_telemetry(&engine, admin);
    sweeper(&engine);
    let http_config = Arc::new(http_config);
    resumed(&engine);
    http::poll_tasks(&engine, &http_config);
    let mut out = std::io::stdout().lock();
    let first = format!("warden gateway: listening on http://{shown_host}:{}{}\n", local.port(), args.path);
    if out
        .write_all(first.as_bytes())
        .and_then(|()| out.write_all(block.as_bytes()))
        .and_then(|()| out.flush())
        .is_err()
    {
        return Err(Failure::internal("stdout is gone; the gateway did not start"));
    }
    drop(out);
    if !local.ip().is_loopback() {
        log::warn(&format!("listening on {local}, which is not loopback (--allow-remote)"));
    }
    let stopping = Arc::new(AtomicBool::new(false));
    let wake = match local.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, local.port())),
        IpAddr::V6(ip) if ip.is_unspecified() => SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, local.port())),
        _ => local,
    };
    let watching = {
        let (stopping, engine) = (Arc::clone(&stopping), Arc::clone(&engine));
        on_termination(move |_| {
            stopping.store(true, Ordering::SeqCst);
            engine.stopping.store(true, Ordering::SeqCst);
            // The listener blocks in accept: one connection of our own wakes it to stop.
            let _ = std::net::TcpStream::connect_timeout(&wake, Duration::from_secs(1));
        })
    };
    let active =
        http::serve(listener, Arc::clone(&engine), http_config, Arc::clone(&stopping)).map_err(Failure::internal)?;
    if !stopping.load(Ordering::SeqCst) {
        return Err(Failure::new(EXIT_INTERNAL, "internal", "the listener stopped".into()));
    }
    let _ = watching.join();
    drain(&engine, || active.load(Ordering::SeqCst));
    engine.telemetry.shutdown();
    log::info("stopped");
    Ok(())
}

/// The document's `gateway.upstream_auth` with its provider (`--credentials-dir`, else the
/// environment), or `None`. A reference with no value now is a warning, not a refusal to
/// start: each call resolves it afresh, and is refused `-41020` while it has none.
fn upstream_credential(
    warden: &Warden,
    args: &GatewayArgs,
    source: &IdentitySource,
) -> Result<Option<Arc<credential::UpstreamCredential>>, Failure> {
    let Some(auth) = &warden.document().gateway.upstream_auth else {
        if args.credentials_dir.is_some() {
            return Err(Failure::usage(
                "--credentials-dir is given but the document sets no gateway.upstream_auth; add one or drop the flag",
            ));
        }
        return Ok(None);
    };
    // `token_exchange` exchanges the client's token `--identity-jwt` verified, and no other.
    let subjects = match source {
        IdentitySource::Jwt { header, .. } => Some(credential::Subjects {
            header: header.clone(),
            timeout: Duration::from_secs(args.upstream_timeout.max(1)),
        }),
        _ => None,
    };
    let credential = credential::UpstreamCredential::new(auth, args.credentials_dir.as_deref(), subjects.as_ref())
        .map_err(Failure::usage)?;
    if let Err(why) = credential.check_at_startup() {
        log::warn(&format!(
            "the upstream credential is not available now ({}); every call is refused -41020 until it is",
            log::printable(&why)
        ));
    }
    Ok(Some(Arc::new(credential)))
}

/// Over `--stdio` there is no request header to carry a credential: the child gets the
/// environment the operator starts the gateway with. A document that sets one is refused
/// rather than run without it (fail closed).
fn refuse_stdio_credential(warden: &Warden, args: &GatewayArgs) -> Result<(), Failure> {
    if warden.document().gateway.upstream_auth.is_some() {
        return Err(Failure::usage(
            "the document sets gateway.upstream_auth, which --stdio cannot send (a child process has no request \
             headers); remove it and give the server its credential in its own environment, or run it over HTTP \
             with --upstream",
        ));
    }
    if args.credentials_dir.is_some() {
        return Err(Failure::usage(
            "--credentials-dir is for gateway.upstream_auth over HTTP; --stdio sends no credential",
        ));
    }
    Ok(())
}

/// `--admin`'s listener, bound before anything else starts (checked like `--listen`).
fn admin_listener(args: &GatewayArgs) -> Result<Option<TcpListener>, Failure> {
    let Some(address) = &args.admin else { return Ok(None) };
    check_listen("--admin", address, args.allow_remote)?;
    TcpListener::bind(address)
        .map(Some)
        .map_err(|e| Failure::usage(format!("cannot listen on {address}: {e}; pick another --admin")))
}

/// The startup block's telemetry lines: what is exported, and where /metrics is.
fn telemetry_block(telemetry: &telemetry::Telemetry, admin: Option<&TcpListener>) -> String {
    let mut out = format!("telemetry {}\n", telemetry.summary());
    if let Some(address) = admin.and_then(|listener| listener.local_addr().ok()) {
        out.push_str(&format!("admin http://{address}/metrics\n"));
    }
    out
}

/// The store's gauges join the meter, and `--admin` starts serving.
fn start_telemetry(engine: &Arc<intercept::Engine>, admin: Option<TcpListener>) {
    engine.telemetry.register_gauges(Arc::downgrade(engine));
    if let Some(listener) = admin {
        if let Ok(local) = listener.local_addr() {
            if !local.ip().is_loopback() {
                log::warn(&format!("--admin listens on {local}, which is not loopback (--allow-remote)"));
            }
        }
        admin::serve(listener, Arc::downgrade(engine));
    }
}

/// How long a stopping gateway waits for the calls in flight.
pub const DRAIN: Duration = Duration::from_secs(10);

/// SIGTERM and SIGINT are caught (as a flag) and `stop` runs on a watcher thread when one
/// arrives. Without the handlers (they could not be installed) the signals end the process as
/// before: calls in flight then stay in progress until their leases lapse, never re-run.
pub(super) fn on_termination(stop: impl FnOnce(i32) + Send + 'static) -> std::thread::JoinHandle<()> {
    if !warden::os::signals::catch_termination() {
        log::warn("SIGTERM/SIGINT could not be caught; they will stop the gateway without draining");
    }
    std::thread::spawn(move || loop {
        if let Some(signal) = warden::os::signals::termination() {
            let name = if signal == libc::SIGINT { "SIGINT" } else { "SIGTERM" };
            log::info(&format!("{name}: taking no new calls; letting the calls in flight finish"));
            stop(signal);
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    })
}

/// After the gateway stopped taking calls: wait (at most `DRAIN`) for the calls in flight,
/// record held suspensions AMBIGUOUS, make every outcome durable.
pub(super) fn drain(engine: &intercept::Engine, in_flight: impl Fn() -> usize) {
    let deadline = Instant::now() + DRAIN;
    while in_flight() > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let left = in_flight();
    if left > 0 {
        log::warn(&format!(
            "{left} call(s) still in flight after {} s: their effects stay in progress under their leases, then AMBIGUOUS (never re-run)",
            DRAIN.as_secs()
        ));
    }
    let tasks = engine.leave_tasks_open();
    if tasks > 0 {
        log::warn(&format!(
            "{tasks} open task(s) left EXECUTING under their leases: the next gateway on this store resumes them"
        ));
    }
    let abandoned = engine.abandon_suspensions();
    if abandoned > 0 {
        log::warn(&format!("{abandoned} suspended call(s) recorded AMBIGUOUS: their continuation can no longer come"));
    }
    if let Err(error) = engine.warden.kernel().flush() {
        log::warn(&format!("flushing the store failed: {error}"));
    }
}

fn engine(
    warden: Warden,
    args: &GatewayArgs,
    provider: Box<dyn IdentityProvider>,
    catalog: catalog::Catalog,
) -> intercept::Engine {
    let alias = args.alias.clone().unwrap_or_default();
    let mut engine = intercept::Engine::new(warden, alias, provider, elicitation(args), catalog);
    engine.approval_wait = Duration::from_secs(args.wait_approvals);
    engine.log_arguments = args.log_arguments;
    engine.task_timeout = Duration::from_secs(args.task_timeout.max(1));
    engine
}

fn elicitation(args: &GatewayArgs) -> elicitation::Elicitation {
    elicitation::Elicitation {
        max_rounds: args.max_elicitation_rounds,
        timeout: Duration::from_secs(args.elicitation_timeout.max(1)),
    }
}

/// The tasks an earlier gateway process left open on this store, adopted (`tasks`); how many.
fn resumed(engine: &intercept::Engine) -> usize {
    let adopted = engine.resume_tasks();
    if adopted > 0 {
        log::info(&format!("resumed {adopted} open task(s) an earlier gateway process left on this store"));
    }
    adopted
}

/// Suspensions whose continuation never came are recorded AMBIGUOUS once they lapse.
fn sweeper(engine: &Arc<intercept::Engine>) {
    let engine = Arc::downgrade(engine);
    let _ = std::thread::Builder::new().name("gateway-sweeper".into()).spawn(move || loop {
        std::thread::sleep(Duration::from_millis(500));
        match engine.upgrade() {
            Some(engine) => {
                engine.sweep();
                engine.sweep_tasks();
            }
            None => return,
        }
    });
}

/// The tool-set pins, read from their file: a damaged file is a refusal to start.
fn catalog(args: &GatewayArgs, alias: &str, store: &Path) -> Result<catalog::Catalog, Failure> {
    let path = match &args.pins {
        Some(path) => path.clone(),
        None => pins::PinFile::beside(store, alias).map_err(Failure::usage)?,
    };
    catalog::Catalog::with_file(pins::PinFile::new(path, alias), alias)
        .map_err(|why| Failure::usage(log::printable(&why)))
}

/// The startup block's lines on the tool set: where it is pinned, what is accepted, what is
/// quarantined.
fn pins_block(catalog: &catalog::Catalog, alias: &str, document: &warden::document::Document) -> String {
    let (pins, changes) = catalog.snapshot();
    let place = catalog.path().map(|p| log::printable(&p.display().to_string())).unwrap_or_default();
    let mut out = match &pins.accepted {
        None => format!("tool set: none pinned yet; the first tools/list is pinned as it comes, in {place}\n"),
        Some(accepted) => format!(
            "tool set: {} tool(s) pinned, {}, accepted {} by {}, in {place}\n",
            accepted.set.len(),
            accepted.set.digest(),
            accepted.at,
            log::printable(accepted.by.as_deref().unwrap_or("?"))
        ),
    };
    if !changes.is_empty() {
        out.push_str(&format!(
            "{} tool(s) quarantined until the observed set is accepted (warden gateway pins show --alias {alias}): {}\n",
            changes.len(),
            log::printable(&catalog::describe(&changes))
        ));
    }
    if let Some(accepted) = &pins.accepted {
        for line in coverage::coverage(document, alias, accepted.set.tools()).session_lines(alias) {
            out.push_str(&format!("{}\n", log::printable(&line)));
        }
    }
    out
}

/// The startup block's line for `--log-arguments` (nothing without it).
fn arguments_logged(args: &GatewayArgs) -> &'static str {
    if args.log_arguments {
        "call log lines carry each call's arguments (--log-arguments): the log holds whatever agents send\n"
    } else {
        ""
    }
}

/// An `--alias` that names no `mcp.<alias>.*` action is a typo, not a gateway that denies
/// every call: a refusal to start naming the aliases the document has.
fn refuse_unmatched_alias(warden: &Warden, alias: &str) -> Result<(), Failure> {
    match coverage::alias_matches_nothing(warden.document(), alias) {
        Some(why) => Err(Failure::usage(log::printable(&why))),
        None => Ok(()),
    }
}

/// `warden check --upstream`: list a server's tools and report `document`'s coverage of them
/// under `alias` (`coverage`): the report as JSON (`lines` holds it as text), and the failure
/// when the alias matches no action or a template names a property the schema lacks.
pub fn upstream_coverage(
    document: &warden::document::Document,
    alias: &str,
    upstream: Option<&str>,
    command: &[String],
    timeout: u64,
) -> Result<(serde_json::Value, Option<Failure>), Failure> {
    check_alias(alias)?;
    let mut target = commands::target(upstream, command, timeout)?;
    // The document's upstream credential, from the environment, as the gateway would send it.
    if let (client::Target::Http { dialer, .. }, Some(auth)) = (&mut target, &document.gateway.upstream_auth) {
        if let warden::document::UpstreamAuth::TokenExchange(exchange) = auth {
            return Err(Failure::usage(format!(
                "gateway.upstream_auth (line {}) is token_exchange: the upstream takes a client's token exchanged at {}, \
                 and warden check --upstream has no client token; list the tools through a running gateway, or \
                 check against an upstream that needs no credential",
                exchange.line,
                log::printable(&exchange.token_endpoint)
            )));
        }
        dialer.credential =
            Some(Arc::new(credential::UpstreamCredential::new(auth, None, None).map_err(Failure::usage)?));
    }
    let listed = commands::listed(&target)?;
    let tools: std::collections::BTreeMap<String, serde_json::Value> = listed
        .tools
        .iter()
        .filter_map(|entry| Some((entry.get("name")?.as_str()?.to_owned(), entry.clone())))
        .collect();
    let found = coverage::coverage(document, alias, &tools);
    let mut lines = found.lines(alias);
    let failed = if let Some(why) = coverage::alias_matches_nothing(document, alias) {
        lines.insert(0, why.clone());
        Some(Failure::check("alias_matches_nothing", why))
    } else if !found.templates_render() {
        Some(Failure::check(
            "templates_unrenderable",
            format!(
                "{} template placeholder(s) name properties the server's schemas do not have; every such call would be denied",
                found.missing.len()
            ),
        ))
    } else {
        None
    };
    let mut report = found.to_json();
    report["server"] = listed.server;
    report["lines"] = serde_json::json!(lines);
    Ok((report, failed))
}

fn open(store: &Path, config: &Path, durability: &str) -> Result<Warden, Failure> {
    let durability = warden::store::Withstands::parse(durability).map_err(|e| Failure::usage(e.to_string()))?;
    let store_options = warden::store::StoreOptions { durability, ..warden::store::StoreOptions::default() };
    let options = WardenOptions { store: store_options, ..WardenOptions::default() };
    Warden::open_files(store, config, options).map_err(|error| match error {
        warden::Error::Config(message) => Failure::config(message),
        other if other.is_access_problem() => Failure::usage(other.to_string()),
        other => Failure::internal(other.to_string()),
    })
}

/// Whether any `mcp.<alias>.*` entry pins the upstream's certificate.
fn pins_certificate(warden: &Warden, alias: &str) -> bool {
    let prefix = format!("mcp.{alias}.");
    warden
        .document()
        .actions
        .iter()
        .any(|(name, entry)| name.starts_with(&prefix) && entry.upstream.as_ref().is_some_and(|u| u.pins_certificate()))
}

/// A certificate pin this gateway cannot enforce is a refusal to start, never a silent pass.
fn refuse_certificate_pins(warden: &Warden, alias: &str, why: &str) -> Result<(), Failure> {
    let prefix = format!("mcp.{alias}.");
    let pinned: Vec<&str> = warden
        .document()
        .actions
        .iter()
        .filter(|(name, entry)| {
            name.starts_with(&prefix) && entry.upstream.as_ref().is_some_and(|u| u.pins_certificate())
        })
        .map(|(name, _)| name.as_str())
        .collect();
    if pinned.is_empty() {
        return Ok(());
    }
    Err(Failure::usage(format!(
        "{} pin(s) the upstream's TLS certificate (upstream.tls_cert_sha256), and {why}; a certificate pin needs an https:// upstream",
        log::printable(&pinned.join(", "))
    )))
}

fn write_stderr(text: &str) {
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

/// Exactly one identity source, and only its own settings.
fn identity(args: &GatewayArgs) -> Result<(IdentitySource, Box<dyn IdentityProvider>), Failure> {
    let sources = [args.principal.is_some(), args.principal_header.is_some(), args.identity_jwt]
        .iter()
        .filter(|given| **given)
        .count();
    if sources != 1 {
        return Err(Failure::usage(
            "give exactly one identity source: --principal AGENT[/USER], --principal-header H, or --identity-jwt",
        ));
    }
    if args.user_header.is_some() && args.principal_header.is_none() {
        return Err(Failure::usage("--user-header needs --principal-header beside it"));
    }
    let jwt_settings = args.identity_jwt_issuer.is_some()
        || args.identity_jwt_audience.is_some()
        || !args.identity_jwt_algorithms.is_empty()
        || args.identity_jwt_public_key.is_some()
        || args.identity_jwt_jwks_url.is_some()
        || args.identity_jwt_token_type.is_some()
        || args.identity_jwt_header.is_some()
        || args.identity_jwt_user_claim.is_some()
        || args.resource.is_some()
        || !args.scopes_supported.is_empty();
    if jwt_settings && !args.identity_jwt {
        return Err(Failure::usage("--identity-jwt-*, --resource and --scopes-supported need --identity-jwt"));
    }
    if let Some(text) = &args.principal {
        let (agent, user) = match text.split_once('/') {
            Some((agent, user)) => (agent, Some(user)),
            None => (text.as_str(), None),
        };
        let principal = warden::kernel::principal(agent, user)
            .map_err(|e| Failure::usage(format!("--principal {}: {e}", log::printable(text))))?;
        return Ok((IdentitySource::Static(text.clone()), Box::new(StaticProvider::new(principal, None))));
    }
    if let Some(agent) = &args.principal_header {
        let provider = HeaderProvider::new(agent, args.user_header.as_deref(), None).map_err(Failure::usage)?;
        let source = IdentitySource::Header { agent: agent.clone(), user: args.user_header.clone() };
        return Ok((source, Box::new(provider)));
    }
    let issuer = args
        .identity_jwt_issuer
        .as_deref()
        .ok_or_else(|| Failure::usage("--identity-jwt needs --identity-jwt-issuer"))?;
    let resource = args.resource.as_deref().ok_or_else(|| {
        Failure::usage(
            "--identity-jwt needs --resource URI: this gateway's canonical URI (https://HOST/PATH), which a token's aud must name (RFC 8707)",
        )
    })?;
    resource::parse_resource(resource).map_err(|e| Failure::usage(log::printable(&e)))?;
    if let Some(audience) = args.identity_jwt_audience.as_deref().filter(|a| *a != resource) {
        return Err(Failure::usage(format!(
            "--identity-jwt-audience {} is not --resource {}: a token is for this gateway when its aud names the gateway's resource URI (RFC 8707); drop --identity-jwt-audience",
            log::printable(audience),
            log::printable(resource)
        )));
    }
    let audience = resource;
    let token_type = args.identity_jwt_token_type.as_deref().ok_or_else(|| {
        Failure::usage("--identity-jwt needs --identity-jwt-token-type (\"\" when the issuer sets none)")
    })?;
    if args.identity_jwt_algorithms.is_empty() {
        return Err(Failure::usage("--identity-jwt needs --identity-jwt-algorithms (RS256, ES256 or EdDSA)"));
    }
    let mut algorithms = Vec::new();
    for name in &args.identity_jwt_algorithms {
        algorithms.push(JwtAlgorithm::parse(name).ok_or_else(|| {
            Failure::usage(format!("--identity-jwt-algorithms {}: use RS256, ES256 or EdDSA", log::printable(name)))
        })?);
    }
    let key = match (&args.identity_jwt_public_key, &args.identity_jwt_jwks_url) {
        (Some(path), None) => {
            let pem = crate::console::sso::read_public_key(path)
                .map_err(|e| Failure::usage(format!("--identity-jwt-public-key {}: {e}", path.display())))?;
            KeySource::Pinned { pem }
        }
        (None, Some(url)) => KeySource::Jwks { url: url.clone(), ca_certs: None },
        _ => {
            return Err(Failure::usage(
                "--identity-jwt needs exactly one key source: --identity-jwt-public-key FILE or --identity-jwt-jwks-url URL",
            ))
        }
    };
    let mut config = JwtConfig::new(key, algorithms, issuer, audience, token_type);
    if let Some(header) = &args.identity_jwt_header {
        config.header = header.clone();
    }
    config.user_claim = args.identity_jwt_user_claim.clone();
    let header = config.header.clone();
    let provider = JwtProvider::new(config, Arc::new(warden::SystemClock)).map_err(Failure::usage)?;
    let protected = resource::ProtectedResource::new(resource, issuer, args.scopes_supported.clone(), &header)
        .map_err(|e| Failure::usage(log::printable(&e)))?;
    Ok((IdentitySource::Jwt { header, resource: Box::new(protected) }, Box::new(provider)))
}

/// `^[a-z0-9][a-z0-9_-]*$`: no dots, so `mcp.<alias>.<tool>` splits one way only.
pub(super) fn check_alias(alias: &str) -> Result<(), Failure> {
    let mut chars = alias.chars();
    let first = chars.next().is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    if first && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-') {
        return Ok(());
    }
    Err(Failure::usage(format!(
        "--alias {:?} is not a valid alias: use lowercase letters, digits, _ and - (starting with a letter or digit), no dots",
        log::printable(alias)
    )))
}

fn check_path(path: &str) -> Result<(), Failure> {
    if !path.starts_with('/') || path.chars().any(|c| c.is_control() || c.is_whitespace() || c == '?' || c == '#') {
        return Err(Failure::usage("--path must be an absolute path such as /mcp, with no query"));
    }
    let lower = path.to_ascii_lowercase();
    if lower == "/.well-known" || lower.starts_with("/.well-known/") {
        return Err(Failure::usage("--path may not be under /.well-known/, where the resource's metadata is served"));
    }
    if lower == "/warden" || lower.starts_with("/warden/") {
        return Err(Failure::usage(
            "--path may not be under /warden/, which is reserved for the gateway's own endpoints",
        ));
    }
    Ok(())
}

/// Loopback unless `--allow-remote`.
fn check_listen(flag: &str, listen: &str, allow_remote: bool) -> Result<(), Failure> {
    let (host, port) =
        listen.rsplit_once(':').ok_or_else(|| Failure::usage(format!("{flag} {listen:?} is not HOST:PORT")))?;
    port.parse::<u16>().map_err(|_| Failure::usage(format!("{flag} {listen:?}: the port is not a number")))?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let loopback = host == "localhost" || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback());
    if !loopback && !allow_remote {
        return Err(Failure::usage(format!(
            "{flag} {listen} is not a loopback address; the gateway listens on 127.0.0.1, localhost or ::1 unless --allow-remote is given"
        )));
    }
    Ok(())
}

/// Environment, identity, authority, upstream, and every action without an effect template.
fn startup_block(warden: &Warden, source: &IdentitySource, upstream: &str, config: &Path, stdio: bool) -> String {
    let document = warden.document();
    let mut out = String::new();
    out.push_str(&format!("environment {}\n", log::printable(warden.kernel().environment())));
    match source {
        IdentitySource::Static(principal) => {
            let who = if stdio { "whoever wrote the launch configuration" } else { "whoever started the gateway" };
            out.push_str(&format!(
                "identity static principal {} — asserted by {who}, verified by nothing\n",
                log::printable(principal)
            ));
        }
        IdentitySource::Header { agent, user } => {
            out.push_str(&format!(
                "identity header {}{} — worth exactly what the proxy that overwrites it on every request is worth\n",
                log::printable(agent),
                user.as_ref().map(|u| format!(" (user {})", log::printable(u))).unwrap_or_default()
            ));
        }
        IdentitySource::Jwt { header, resource } => {
            out.push_str(&format!(
                "identity JWT from the {} header — verified on every request for resource {} (aud) from {} (iss); \
                 the header is not forwarded upstream\n",
                log::printable(header),
                log::printable(&resource.resource),
                log::printable(&resource.issuer)
            ));
            out.push_str(&format!("resource metadata {}\n", log::printable(&resource.metadata_url)));
        }
    }
    match &document.authority_config {
        None => out.push_str("no authority: section — every principal is unrestricted\n"),
        Some(authority) => out.push_str(&format!(
            "authority {} grant(s) from {}\n",
            authority.grants.len(),
            log::printable(&config.display().to_string())
        )),
    }
    out.push_str(&format!("upstream {}\n", log::printable(upstream)));
    let keyless: Vec<&String> =
        document.actions.iter().filter(|(_, e)| e.effect.is_none()).map(|(name, _)| name).collect();
    if !keyless.is_empty() {
        out.push_str(&format!("{} action(s) have no effect: template and get no reservation:\n", keyless.len()));
        for name in keyless {
            out.push_str(&format!("  {}\n", log::printable(name)));
        }
        out.push_str("That is right for a read, and wrong for anything that changes the world.\n");
    }
    out
}

const HOP_BY_HOP: [&str; 10] = [
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "trailers",
    "transfer-encoding",
    "upgrade",
    "host",
];

/// Headers nominated by `Connection:` are hop-by-hop too.
fn nominated(headers: &[(String, String)]) -> Vec<String> {
    headers
        .iter()
        .filter(|(k, _)| k.eq_ignore_ascii_case("connection"))
        .flat_map(|(_, v)| v.split(',').map(|s| s.trim().to_ascii_lowercase()).collect::<Vec<_>>())
        .collect()
}

/// A client's headers as forwarded: no hop-by-hop field, no framing, no consumed credential,
/// and never `Authorization`, in any identity mode: the MCP authorization spec forbids token
/// passthrough (a token issued for this gateway is not the upstream's to accept). The
/// gateway's own credential (`gateway.upstream_auth`) is added by `upstream::send`.
pub fn end_to_end_request(headers: &[(String, String)], consumed: &[String]) -> Vec<(String, String)> {
    let nominated = nominated(headers);
    headers
        .iter()
        .filter(|(k, _)| {
            let lower = k.to_ascii_lowercase();
            !HOP_BY_HOP.contains(&lower.as_str())
                && lower != "authorization"
                && !nominated.contains(&lower)
                && lower != "content-length"
                && lower != "content-encoding"
                && lower != "content-type"
                && !consumed.iter().any(|c| c.eq_ignore_ascii_case(&lower))
        })
        .cloned()
        .collect()
}

/// An upstream's headers as relayed: no hop-by-hop field and no framing (the gateway frames).
pub fn end_to_end_response(headers: &[(String, String)]) -> Vec<(String, String)> {
    let nominated = nominated(headers);
    headers
        .iter()
        .filter(|(k, _)| {
            let lower = k.to_ascii_lowercase();
            !HOP_BY_HOP.contains(&lower.as_str()) && !nominated.contains(&lower) && lower != "content-length"
        })
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hop_by_hop_headers_and_consumed_tokens_are_not_forwarded() {
        let headers: Vec<(String, String)> = [
            ("Authorization", "Bearer t"),
            ("Connection", "keep-alive, X-Drop"),
            ("X-Drop", "1"),
            ("Proxy-Authorization", "Basic x"),
            ("TE", "trailers"),
            ("Mcp-Session-Id", "s1"),
            ("X-Identity", "jwt"),
            ("Content-Length", "3"),
        ]
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
        let kept: Vec<String> =
            end_to_end_request(&headers, &["x-identity".to_owned()]).into_iter().map(|(k, _)| k).collect();
        assert_eq!(kept, ["Mcp-Session-Id"], "Authorization is never forwarded, consumed or not");
        let static_mode: Vec<String> = end_to_end_request(&headers, &[]).into_iter().map(|(k, _)| k).collect();
        assert_eq!(static_mode, ["Mcp-Session-Id", "X-Identity"]);
    }

    #[test]
    fn startup_refusals_name_the_reason() {
        assert!(check_alias("acme").is_ok());
        assert!(check_alias("a-1_b").is_ok());
        for bad in ["", "Acme", "a.b", "-a", "a b"] {
            assert!(check_alias(bad).is_err(), "{bad}");
        }
        assert!(check_path("/mcp").is_ok());
        for bad in ["mcp", "/warden/x", "/WARDEN", "/a?b", "/.well-known/oauth-protected-resource"] {
            assert!(check_path(bad).is_err(), "{bad}");
        }
        assert!(check_listen("--listen", "127.0.0.1:0", false).is_ok());
        assert!(check_listen("--listen", "[::1]:80", false).is_ok());
        assert!(check_listen("--listen", "localhost:80", false).is_ok());
        assert!(check_listen("--listen", "0.0.0.0:80", false).is_err());
        assert!(check_listen("--listen", "0.0.0.0:80", true).is_ok());
        assert!(check_listen("--listen", "127.0.0.1", false).is_err());
        let admin = check_listen("--admin", "0.0.0.0:9464", false).err().map(|f| f.message);
        assert!(admin.as_deref().is_some_and(|m| m.contains("--admin 0.0.0.0:9464 is not a loopback")), "{admin:?}");
    }
}
