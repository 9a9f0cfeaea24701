//! `warden operator`: an MCP server for an operator's own MCP client (docs/OPERATOR.md). Read
//! tools show what the CLI's store commands show; write tools (approve, deny, resolve) answer
//! through the kernel as the approver an operator token names — `operator:NAME`, verified by
//! `warden-operator` — never as the agent that asked, and the kernel's rules (the requester is
//! never the approver in any spelling, one answer per person, single use, expiry, M-of-N, the
//! action hash shown) hold unchanged.
//!
//! Two transports, as the gateway names them: `--stdio` (one JSON-RPC message per line; the
//! token from `$WARDEN_OPERATOR_TOKEN` or `--token-file`, never a command-line argument, which
//! other users can read in /proc), or Streamable HTTP on loopback (`--listen`, default
//! `127.0.0.1:0`; `POST /mcp` answered with JSON, no event stream), served on the console's
//! hyper/axum stack with its limits, where every request needs `Authorization: Bearer TOKEN`.
//! Fail closed: a write without a valid token, or with any argument amiss, changes nothing.

mod tools;

use std::io::{BufRead, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use serde_json::Value;

use crate::console::{self, approvers};
use crate::exit::Failure;
use crate::output::shown;
use tools::{rpc_error, Server, INVALID_REQUEST, PARSE_ERROR};

/// The environment variable `--stdio` reads the operator token from.
pub const TOKEN_ENV: &str = "WARDEN_OPERATOR_TOKEN";
/// The path the Streamable HTTP endpoint is served at.
pub const PATH: &str = "/mcp";
/// The largest message over either transport (the console's body limit).
const MAX_MESSAGE: usize = console::MAX_BODY;
/// The largest token file read.
const MAX_TOKEN_FILE: u64 = 4096;

/// `warden operator`'s flags.
#[derive(Debug, clap::Args)]
pub struct OperatorArgs {
    /// Speak MCP on stdin/stdout (one JSON-RPC message per line) instead of HTTP; reads need no
    /// token, writes the one in $WARDEN_OPERATOR_TOKEN or --token-file.
    #[arg(long, conflicts_with = "listen")]
    pub stdio: bool,
    /// Serve Streamable HTTP at http://HOST:PORT/mcp; port 0 picks a free one (the first stdout
    /// line is the URL). Anything but loopback needs --tls-cert, --tls-key and --public-url.
    #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:0")]
    pub listen: String,
    /// With --stdio: read the operator token from this file (mode 0600 or stricter) instead of
    /// $WARDEN_OPERATOR_TOKEN.
    #[arg(long, value_name = "FILE", requires = "stdio")]
    pub token_file: Option<PathBuf>,
    /// The approvers file (default: STORE.approvers beside the store).
    #[arg(long, value_name = "FILE")]
    pub approvers: Option<PathBuf>,
    #[command(flatten)]
    pub tls: console::tls::TlsArgs,
}

/// Serve until stdin ends (`--stdio`) or until SIGINT/SIGTERM (HTTP). With `--config`, a
/// document's `sign_in` section lets a token from its issuer stand for an operator token.
pub fn run(args: &OperatorArgs, store: &Path, config: Option<&Path>) -> Result<(), Failure> {
    let registry = approvers::registry_path(args.approvers.as_deref(), store)?;
    let sso = match config.filter(|path| !path.as_os_str().is_empty()) {
        Some(path) => console::sso::Sso::from_section(crate::policy_commands::load_config(path)?.sign_in.as_ref())?,
        None => None,
    };
    if args.stdio {
        let token = stdio_token(args.token_file.as_deref())?;
        let server = Server { kernel: crate::store_commands::open_store(Some(store))?, registry, sso };
        return serve_stdio(&server, token.as_deref());
    }
    // Refused before the store is opened: a non-loopback address touches nothing.
    let (address, tls) = console::listen_address(&args.listen, &args.tls, "the operator server")?;
    if std::env::var_os(TOKEN_ENV).is_some() {
        crate::output::write_stderr(&format!(
            "${TOKEN_ENV} is not used over HTTP: each client sends its own `Authorization: Bearer` \
             token"
        ));
    }
    let server = Server { kernel: crate::store_commands::open_store(Some(store))?, registry, sso };
    let bound = console::Bound::bind(address, tls)?;
    let http = Arc::new(Http { server, hosts: bound.hosts.clone(), origin: bound.scheme() });
    let router = console::limits(Router::new().route(PATH, post(mcp).get(no_stream).delete(no_stream)))
        .fallback(not_found)
        .with_state(http);
    let runtime = console::runtime()?;
    crate::output::write_stdout(&format!("{}{PATH}\n", bound.base()))?;
    runtime.block_on(console::serve(bound, router))
}

/// The operator token for `--stdio`: the file's first line, else the environment's; none is
/// fine (reads only). Never echoed in a message.
fn stdio_token(file: Option<&Path>) -> Result<Option<String>, Failure> {
    let from_env = match std::env::var_os(TOKEN_ENV) {
        None => None,
        Some(value) if value.is_empty() => None,
        Some(value) => Some(value.into_string().map_err(|_| Failure::usage(format!("${TOKEN_ENV} is not UTF-8")))?),
    };
    let Some(file) = file else { return Ok(from_env.map(|t| t.trim().to_owned())) };
    if from_env.is_some() {
        return Err(Failure::usage(format!("give the operator token once: --token-file or ${TOKEN_ENV}, not both")));
    }
    let shown_path = shown(&file.display().to_string());
    let opened = std::fs::File::open(file)
        .and_then(|f| f.metadata().map(|meta| (f, meta)))
        .map_err(|e| Failure::usage(format!("cannot read the token file {shown_path}: {e}")))?;
    let (handle, meta) = opened;
    if meta.permissions().mode() & 0o077 != 0 {
        return Err(Failure::usage(format!(
            "the token file {shown_path} can be read by other users (mode {:o}); chmod 600 it",
            meta.permissions().mode() & 0o777
        )));
    }
    let mut text = String::new();
    handle
        .take(MAX_TOKEN_FILE)
        .read_to_string(&mut text)
        .map_err(|e| Failure::usage(format!("cannot read the token file {shown_path}: {e}")))?;
    match text.lines().next().map(str::trim).filter(|line| !line.is_empty()) {
        Some(token) => Ok(Some(token.to_owned())),
        None => Err(Failure::usage(format!("the token file {shown_path} is empty"))),
    }
}

/// One JSON-RPC message per line on stdin, one answer per line on stdout, in order.
fn serve_stdio(server: &Server, token: Option<&str>) -> Result<(), Failure> {
    let mut input = std::io::stdin().lock();
    let mut output = std::io::stdout().lock();
    loop {
        let mut line = Vec::new();
        let read = Read::by_ref(&mut input)
            .take(MAX_MESSAGE as u64 + 1)
            .read_until(b'\n', &mut line)
            .map_err(|e| Failure::internal(format!("cannot read stdin: {e}")))?;
        if read == 0 {
            return Ok(());
        }
        let answer = if line.len() > MAX_MESSAGE {
            // The rest of the line is read and dropped, never parsed as messages of its own.
            if !line.ends_with(b"\n") {
                let mut rest = Vec::new();
                input.read_until(b'\n', &mut rest).map_err(|e| Failure::internal(format!("cannot read stdin: {e}")))?;
            }
            Some(rpc_error(&Value::Null, INVALID_REQUEST, &format!("a message is at most {MAX_MESSAGE} bytes")))
        } else if line.iter().all(u8::is_ascii_whitespace) {
            None
        } else {
            match parse(&line) {
                Ok(message) => server.handle(&message, token),
                Err(refused) => Some(refused),
            }
        };
        if let Some(answer) = answer {
            let mut text = answer.to_string();
            text.push('\n');
            // A client that closed stdout has left: stop serving it.
            if output.write_all(text.as_bytes()).and_then(|()| output.flush()).is_err() {
                return Ok(());
            }
        }
    }
}

/// One message: a JSON object (a batch is refused, as the gateway refuses it).
fn parse(bytes: &[u8]) -> Result<Value, Value> {
    match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Array(_)) => Err(rpc_error(
            &Value::Null,
            INVALID_REQUEST,
            "batches are not accepted; send one JSON-RPC message at a time",
        )),
        Ok(message) => Ok(message),
        Err(_) => Err(rpc_error(&Value::Null, PARSE_ERROR, "the message is not JSON")),
    }
}

struct Http {
    server: Server,
    /// The Host header values this listener answers (DNS rebinding is refused).
    hosts: Vec<String>,
    /// `http` or `https`: the scheme an Origin must name.
    origin: &'static str,
}

/// `POST /mcp`: Host and Origin must be this listener's, the bearer token an operator's, the
/// revision one this server speaks; then one message, answered with JSON (202 for a
/// notification). Every refusal is made before the store is read or written.
async fn mcp(State(http): State<Arc<Http>>, headers: HeaderMap, body: Bytes) -> Response {
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok()).map(str::to_ascii_lowercase);
    if !host.is_some_and(|host| http.hosts.contains(&host)) {
        return refused(StatusCode::MISDIRECTED_REQUEST, "this Host is not the operator server's address");
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let ours = origin.to_str().is_ok_and(|origin| console::names_us(origin, http.origin, &http.hosts));
        if !ours {
            return refused(StatusCode::FORBIDDEN, "a request from another origin is not served");
        }
    }
    let Some(token) = bearer(&headers) else {
        let mut response = refused(
            StatusCode::UNAUTHORIZED,
            "every request needs `Authorization: Bearer TOKEN` with an operator token (`warden approvers add NAME \
             --operator` prints one); nothing was changed",
        );
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer realm=\"warden-operator\""));
        return response;
    };
    let worker = Arc::clone(&http);
    let checked = token.clone();
    let known = console::blocking(move || Ok(worker.server.caller(&checked))).await;
    if let Ok(Err(why)) | Err(crate::exit::Failure { message: why, .. }) = known {
        let mut response = refused(StatusCode::UNAUTHORIZED, &format!("{why}; nothing was changed"));
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"warden-operator\", error=\"invalid_token\""),
        );
        return response;
    }
    let revisions: Vec<&str> = headers.get_all("mcp-protocol-version").iter().filter_map(|v| v.to_str().ok()).collect();
    match revisions.as_slice() {
        [] => {}
        [revision] if tools::REVISIONS.contains(revision) => {}
        _ => {
            return refused(
                StatusCode::BAD_REQUEST,
                &format!("MCP-Protocol-Version must be one of {}", tools::REVISIONS.join(", ")),
            )
        }
    }
    let message = match parse(&body) {
        Ok(message) => message,
        Err(answer) => return json(StatusCode::BAD_REQUEST, &answer),
    };
    let worker = Arc::clone(&http);
    match console::blocking(move || Ok(worker.server.handle(&message, Some(&token)))).await {
        Ok(Some(answer)) => json(StatusCode::OK, &answer),
        Ok(None) => StatusCode::ACCEPTED.into_response(),
        Err(failure) => json(
            StatusCode::INTERNAL_SERVER_ERROR,
            &rpc_error(&Value::Null, tools::INVALID_REQUEST, &format!("{}; nothing was changed", failure.message)),
        ),
    }
}

/// The token of the one `Authorization: Bearer …` header; two such headers are none.
fn bearer(headers: &HeaderMap) -> Option<String> {
    let mut values = headers.get_all(header::AUTHORIZATION).iter();
    let value = values.next()?;
    if values.next().is_some() {
        return None;
    }
    let text = value.to_str().ok()?;
    let (scheme, token) = text.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then(|| token.to_owned())
}

/// No event stream is served: a client that opens one (GET) or ends a session (DELETE) is told
/// so, as the spec allows.
async fn no_stream() -> Response {
    let mut response = refused(StatusCode::METHOD_NOT_ALLOWED, "this server answers POST with JSON only");
    response.headers_mut().insert(header::ALLOW, HeaderValue::from_static("POST"));
    response
}

async fn not_found() -> Response {
    refused(StatusCode::NOT_FOUND, "the operator server answers at /mcp only")
}

/// A refusal as a JSON-RPC error with no id (the body was not read, or not understood).
fn refused(status: StatusCode, message: &str) -> Response {
    json(status, &rpc_error(&Value::Null, INVALID_REQUEST, message))
}

fn json(status: StatusCode, value: &Value) -> Response {
    let mut response = (status, [(header::CONTENT_TYPE, "application/json")], value.to_string()).into_response();
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response.headers_mut().insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_one_bearer_header_carries_a_token() {
        let with = |values: &[&str]| {
            let mut headers = HeaderMap::new();
            for value in values {
                headers.append(header::AUTHORIZATION, HeaderValue::from_str(value).expect("header"));
            }
            bearer(&headers)
        };
        assert_eq!(with(&["Bearer wot_1"]), Some("wot_1".to_owned()));
        assert_eq!(with(&["bearer  wot_1 "]), Some("wot_1".to_owned()));
        for none in [&[][..], &["Basic d290XzE="], &["Bearer "], &["Bearer wot_1", "Bearer wot_1"], &["wot_1"]] {
            assert_eq!(with(none), None, "{none:?}");
        }
    }

    #[test]
    fn a_batch_or_a_non_json_line_is_refused() {
        assert_eq!(parse(b"[]").err().map(|e| e["error"]["code"].clone()), Some(INVALID_REQUEST.into()));
        assert_eq!(parse(b"{").err().map(|e| e["error"]["code"].clone()), Some(PARSE_ERROR.into()));
        assert!(parse(br#"{"jsonrpc":"2.0"}"#).is_ok());
    }
}
