//! Commands over the administrator's document: `check`, `decide` and `verify`. None of them
//! touches the live store.

use std::path::Path;

use serde_json::json;

use warden::authority::{Call, NoDelegations};
use warden::canonical::parse_json;
use warden::clock::{Clock as _, SystemClock};
use warden::decision::Decision;
use warden::document::{load_file, Document, Mode};
use warden::kernel::resolve_environment;
use warden::pipeline::{action_for, ActionRequest};
use warden::policy::evaluate;
use warden::Principal;

use crate::exit::{Done, Failure};
use crate::output::{document, shown};

/// The principal a dry run is attributed to when `--agent` is not given; the policy never
/// looks at it.
const DRY_RUN_AGENT: &str = "warden-decide";

/// The document a command reads: its FILE argument, else `--config`, else `$WARDEN_CONFIG`
/// (clap folds the last two together). An empty path counts as none.
pub fn document_path<'p>(file: Option<&'p Path>, config: Option<&'p Path>) -> Result<&'p Path, Failure> {
    file.or(config)
        .filter(|path| !path.as_os_str().is_empty())
        .ok_or_else(|| Failure::usage("no document given; pass FILE or --config FILE, or set WARDEN_CONFIG"))
}

/// Load the document for a command that needs a valid one: a document that does not load is a
/// configuration error (exit 2). `check` reports the same failure as its result instead.
pub fn load_config(path: &Path) -> Result<Document, Failure> {
    load_file(path).map_err(|e| Failure::config(e.to_string()))
}

/// `warden check --upstream URL --alias A` (or `-- COMMAND …`): the document's coverage of a
/// server's tools, as `warden gateway` would front it.
#[derive(Debug, Default, clap::Args)]
pub struct UpstreamCheck {
    /// Also list the tools of the MCP server at URL (or run after --) and report the document's
    /// coverage of them under --alias: tools with no action, actions with no tool, templates
    /// naming properties the schema lacks (exit 1 for an alias matching no action, or such a
    /// template).
    #[arg(long, value_name = "URL")]
    pub upstream: Option<String>,
    /// The gateway's alias, with --upstream or -- COMMAND.
    #[arg(long, value_name = "NAME")]
    pub alias: Option<String>,
    /// How long to wait for the server to connect and to answer.
    #[arg(long, value_name = "SECONDS", default_value_t = 30)]
    pub upstream_timeout: u64,
    /// The server's command line, after `--` (a server over stdio).
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// `OK`, the policy hash and every load-time warning; a document that does not load is exit 2 (as
/// for every command) with the path and line on stderr (and `{"ok": false, "error": ...}` under `--json`).
/// With an upstream, then its coverage report (`gateway::upstream_coverage`).
pub fn check(path: &Path, upstream: &UpstreamCheck, json: bool) -> Done {
    let wants_upstream = upstream.upstream.is_some() || !upstream.command.is_empty();
    if wants_upstream || upstream.alias.is_some() {
        let Some(alias) = upstream.alias.as_deref().filter(|_| wants_upstream) else {
            return Done {
                stdout: String::new(),
                failed: Some(Failure::usage(
                    "--alias and --upstream URL (or -- COMMAND …) go together: the coverage of a server's tools under an alias",
                )),
            };
        };
        let doc = match load_file(path) {
            Ok(doc) => doc,
            Err(error) => return Done { stdout: String::new(), failed: Some(Failure::config(error.to_string())) },
        };
        let listing = crate::gateway::upstream_coverage(
            &doc,
            alias,
            upstream.upstream.as_deref(),
            &upstream.command,
            upstream.upstream_timeout,
        );
        let (report, failed) = match listing {
            Ok(found) => found,
            Err(failure) => return Done { stdout: String::new(), failed: Some(failure) },
        };
        let stdout = if json {
            document(
                &json!({"ok": failed.is_none(), "policy_hash": doc.policy_hash, "warnings": doc.warnings, "coverage": report}),
            )
        } else {
            let mut out = loaded(path, &doc);
            for line in report["lines"].as_array().into_iter().flatten().filter_map(serde_json::Value::as_str) {
                out.push_str(&format!("{}\n", shown(line)));
            }
            out
        };
        return Done { stdout, failed };
    }
    match load_file(path) {
        Ok(doc) => {
            let stdout = if json {
                document(&json!({"ok": true, "policy_hash": doc.policy_hash, "warnings": doc.warnings}))
            } else {
                loaded(path, &doc)
            };
            Done::ok(stdout)
        }
        Err(error) => {
            let message = error.to_string();
            let stdout = if json {
                document(&json!({"ok": false, "error": message, "policy_hash": null, "warnings": []}))
            } else {
                String::new()
            };
            // The same exit code as every other command that is handed a document it cannot use.
            Done { stdout, failed: Some(Failure::config(message)) }
        }
    }
}

/// `check`'s text for a document that loads: `OK`, what it is, its policy hash, every warning.
fn loaded(path: &Path, doc: &Document) -> String {
    let mut out = format!(
        "OK {} ({}, {} mode, {} action{})\npolicy hash: {}\n",
        shown(&path.display().to_string()),
        doc.schema.name(),
        doc.mode.as_str(),
        doc.actions.len(),
        if doc.actions.len() == 1 { "" } else { "s" },
        doc.policy_hash
    );
    for warning in &doc.warnings {
        out.push_str(&format!("warning: {}\n", shown(warning)));
    }
    out
}

/// What the policy would decide for one call, computed the way the pipeline computes it and
/// written nowhere. Any decision is exit 0: this is a report. Invalid input is exit 2.
pub struct DecideRequest<'a> {
    pub action: &'a str,
    pub args: &'a str,
    pub agent: Option<&'a str>,
    pub user: Option<&'a str>,
}

pub fn decide(doc: &Document, request: &DecideRequest<'_>, json: bool) -> Result<String, Failure> {
    let arguments = parse_json(request.args).map_err(|e| Failure::usage(format!("--args: {e}")))?;
    if !arguments.is_object() {
        return Err(Failure::usage("--args must be a JSON object"));
    }
    let entry = doc.actions.get(request.action);
    let principal = Principal::new(request.agent.unwrap_or(DRY_RUN_AGENT), request.user)
        .map_err(|e| Failure::usage(e.to_string()))?;
    let environment = resolve_environment(None, doc.environment.as_deref());
    // The action the pipeline would build, so the same checks before it decides: a float, a
    // bad name, too deep, a resource template that does not render.
    let action = action_for(Some(doc), &ActionRequest::new(request.action, arguments, principal), &environment)
        .map_err(|e| match e {
            warden::Error::InvalidInput(invalid) => Failure::usage(invalid.message),
            other => Failure::usage(other.to_string()),
        })?;

    let evaluation = evaluate(doc, &action.name, &action.arguments);
    let mut decision = evaluation.ruling.decision;
    let mut reason = evaluation.ruling.reason.clone();
    let mut warnings = evaluation.warnings;
    if let Some(authority) = &doc.authority_config {
        // Authority before policy, as the pipeline decides: on the document's root grants, now.
        // A dry run reads no store, so delegations are not consulted.
        let outcome = warden::authority::evaluate(authority, &Call::new(&action, SystemClock.now()), &NoDelegations);
        match outcome {
            Ok(result) if result.passed => {}
            Ok(result) => {
                warnings.push(format!(
                    "no root grant covers this call ({}), so the pipeline denies it; the policy alone says {} \
                     ({reason}); delegations are not consulted by a dry run",
                    result.reason,
                    decision.as_str()
                ));
                warnings.extend(result.warnings);
                decision = Decision::Deny;
                reason = result.reason.as_str().to_owned();
            }
            Err(fault) => {
                warnings.push(fault.to_string());
                decision = Decision::Deny;
                reason = warden::authority::AuthorityReason::Unreadable.as_str().to_owned();
            }
        }
    }
    // A denied call never gets as far as its effect key.
    let effect_key = entry
        .and_then(|e| e.effect.as_ref())
        .filter(|_| decision != Decision::Deny)
        .map(|template| template.render_effect_key(&action.arguments, action.resource.as_deref()));
    if let Some(Err(error)) = &effect_key {
        warnings.push(format!(
            "the effect key cannot be rendered from these arguments ({error}), so the pipeline would refuse \
             the call (effect_key_error)"
        ));
    }
    if doc.mode == Mode::Observe {
        warnings.push(
            "the document is in observe mode: the call would run whatever the decision; this is what enforce \
             mode would decide"
                .to_owned(),
        );
    }
    if json {
        return Ok(document(&json!({"decision": decision.as_str(), "reason": reason, "warnings": warnings})));
    }
    let mut out = format!("{} ({})\n", decision.as_str(), shown(&reason));
    if let Some(Ok(key)) = &effect_key {
        out.push_str(&format!("effect key: {}\n", shown(key)));
    }
    for warning in &warnings {
        out.push_str(&format!("warning: {}\n", shown(warning)));
    }
    Ok(out)
}

/// G1–G14 against the document in a scratch store (files, or schemas in `scratch_postgres`); G4 races this very binary as
/// `warden __verify-child`. Exit 0 only when no guarantee failed.
pub fn verify(doc: &Document, scratch_postgres: Option<&str>, json: bool) -> Result<Done, Failure> {
    let program = std::env::current_exe()
        .map_err(|e| Failure::internal(format!("cannot find the warden binary for the G4 race: {e}")))?;
    let report = warden::verify::run_on(doc, Some(&crate::verify_race::ChildProgram(program)), scratch_postgres)?;
    let stdout = if json { document(&report.to_json()) } else { report.render() };
    let failed = (!report.ok()).then(|| {
        let failed = report.guarantees.iter().filter(|g| g.status == warden::verify::Status::Fail).count();
        Failure::check("verify_failed", format!("verify failed: {failed} guarantee(s) did not hold for this document"))
    });
    Ok(Done { stdout, failed })
}
