//! `warden gateway pins show|accept`: an operator's view of the tool-set pins and the one way
//! to accept a changed set. Accepting names the digest of the set the operator reviewed, so a
//! set that changed again in between is never accepted unseen.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use super::client::{self, Listed, Target};
use super::pins::{self, PinFile, Pins};
use super::toolset::{self, Change};
use crate::exit::{Done, Failure};
use crate::output::{document, shown};

#[derive(Debug, clap::Subcommand)]
pub enum PinsCommand {
    /// What is accepted, what the upstream lists now, and each quarantined tool's change
    /// (both entries), with the command that accepts the observed set.
    Show {
        /// The gateway's alias.
        #[arg(long, value_name = "NAME")]
        alias: String,
        /// The pin file (default: <store>.<alias>.pins.json beside the store).
        #[arg(long, value_name = "FILE")]
        pins: Option<PathBuf>,
    },
    /// Accept the observed tool set: its tools are let through again, checked against it.
    Accept {
        /// The gateway's alias.
        #[arg(long, value_name = "NAME")]
        alias: String,
        /// The digest of the observed set you reviewed (`pins show` prints it); a set that
        /// changed since is refused.
        #[arg(long, value_name = "DIGEST")]
        set: String,
        /// Who accepts it (recorded in the pin file).
        #[arg(long, value_name = "USER")]
        by: String,
        /// The pin file (default: <store>.<alias>.pins.json beside the store).
        #[arg(long, value_name = "FILE")]
        pins: Option<PathBuf>,
    },
}

/// `warden gateway scaffold`.
#[derive(Debug, clap::Args)]
pub struct ScaffoldArgs {
    /// The alias the gateway will run with: each tool T becomes the action mcp.<alias>.T.
    #[arg(long, value_name = "NAME")]
    pub alias: String,
    /// The server's Streamable HTTP endpoint (or the server's command after --).
    #[arg(long, value_name = "URL")]
    pub upstream: Option<String>,
    /// Where to write the skeleton; an existing file is refused without --force.
    #[arg(long, value_name = "FILE", default_value = "warden.yaml")]
    pub out: PathBuf,
    /// Overwrite an existing file.
    #[arg(long)]
    pub force: bool,
    /// What every action decides until you edit it: deny (the default) or approve.
    #[arg(long, value_name = "DECISION", default_value = "deny", value_parser = ["deny", "approve"])]
    pub decision: String,
    /// How long to wait for the server to connect and to answer.
    #[arg(long, value_name = "SECONDS", default_value_t = 30)]
    pub upstream_timeout: u64,
    /// The server's command line, after `--` (a server over stdio).
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// Where a command that lists a server's tools reaches it: `--upstream URL` or `-- COMMAND …`.
pub fn target<'a>(upstream: Option<&str>, command: &'a [String], timeout: u64) -> Result<Target<'a>, Failure> {
    let timeout = Duration::from_secs(timeout.max(1));
    match (upstream, command.is_empty()) {
        (Some(raw), true) => {
            let upstream = super::upstream::Upstream::parse(raw).map_err(Failure::usage)?;
            let tls = if upstream.https { Some(super::tls::client_config(&[]).map_err(Failure::config)?) } else { None };
            let timeouts = super::upstream::Timeouts { connect: timeout, io: timeout };
            Ok(Target::Http { upstream, dialer: super::upstream::Dialer { timeouts, tls, credential: None } })
        }
        (None, false) => Ok(Target::Child { command, timeout }),
        _ => Err(Failure::usage(
            "name the server one way: --upstream http://HOST:PORT/PATH, or its command after -- (e.g. -- npx -y @modelcontextprotocol/server-everything)",
        )),
    }
}

/// Connect, list every tool, and say why not in words an operator can act on.
pub fn listed(target: &Target<'_>) -> Result<Listed, Failure> {
    client::list_tools(target).map_err(|why| {
        Failure::check("upstream_unlisted", format!("the server's tools could not be listed: {}", shown(&why)))
    })
}

pub fn scaffold(args: &ScaffoldArgs, json: bool) -> Result<Done, Failure> {
    super::check_alias(&args.alias)?;
    let target = target(args.upstream.as_deref(), &args.command, args.upstream_timeout)?;
    let listed = listed(&target)?;
    let source = match &args.upstream {
        Some(url) => format!("at {url}"),
        None => format!("run as: {}", args.command.join(" ")),
    };
    let text = super::scaffold::skeleton(&listed, &args.alias, &source, &args.decision);
    let loaded = warden::document::load_str(&text, "the scaffold")
        .map_err(|e| Failure::internal(format!("the skeleton written from this server does not load: {e}")))?;
    let place = shown(&args.out.display().to_string());
    let mut options = std::fs::OpenOptions::new();
    options.write(true);
    if args.force {
        options.create(true).truncate(true);
    } else {
        options.create_new(true);
    }
    let mut file = match options.open(&args.out) {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {
            return Err(Failure::check(
                "exists",
                format!(
                "{place} already exists; it was left as it is (pass --force to overwrite it, or --out another file)"
            ),
            ))
        }
        Err(error) => return Err(Failure::usage(format!("cannot create {place}: {error}"))),
    };
    file.write_all(text.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|e| Failure::internal(format!("cannot write {place}: {e}")))?;
    let server = listed.server.get("name").and_then(Value::as_str).unwrap_or("the server");
    if json {
        return Ok(Done::ok(document(&json!({
            "path": args.out.display().to_string(),
            "tools": listed.tools.len(),
            "actions": loaded.actions.keys().collect::<Vec<_>>(),
            "decision": args.decision,
            "policy_hash": loaded.policy_hash,
        }))));
    }
    Ok(Done::ok(format!(
        "wrote {place}: {} tool(s) of {}, each mcp.{}.<tool>, every one '{}' until you decide\n\
         next: edit it, then warden check {} --alias {} with the same --upstream or -- COMMAND\n",
        listed.tools.len(),
        shown(server),
        args.alias,
        args.decision,
        warden::hint::shell_word(&args.out.display().to_string()),
        args.alias
    )))
}

pub fn pins(command: &PinsCommand, store: &Path, json: bool) -> Result<Done, Failure> {
    match command {
        PinsCommand::Show { alias, pins } => show(&open(alias, pins.as_deref(), store)?, alias, json),
        PinsCommand::Accept { alias, set, by, pins } => {
            accept(&open(alias, pins.as_deref(), store)?, alias, set, by, json)
        }
    }
}

fn open(alias: &str, pins: Option<&Path>, store: &Path) -> Result<PinFile, Failure> {
    super::check_alias(alias)?;
    let path = match pins {
        Some(path) => path.to_owned(),
        None => PinFile::beside(store, alias).map_err(Failure::usage)?,
    };
    Ok(PinFile::new(path, alias))
}

fn show(file: &PinFile, alias: &str, json: bool) -> Result<Done, Failure> {
    let (pins, _) = file.read().map_err(Failure::usage)?;
    let changes = changes(&pins);
    let place = file.path.display().to_string();
    if json {
        let recorded = |r: &Option<pins::Recorded>| match r {
            None => Value::Null,
            Some(r) => {
                json!({"digest": r.set.digest(), "at": r.at, "by": r.by, "tools": r.set.tools().keys().collect::<Vec<_>>()})
            }
        };
        let detail: serde_json::Map<String, Value> = changes
            .iter()
            .map(|(name, changes)| {
                let (before, after) = entries(&pins, name);
                let reasons: Vec<&str> = changes.iter().map(Change::reason).collect();
                (name.clone(), json!({"changes": reasons, "accepted": before, "observed": after}))
            })
            .collect();
        return Ok(Done::ok(document(&json!({
            "pin_file": place,
            "accepted": recorded(&pins.accepted),
            "observed": recorded(&pins.observed),
            "quarantined": detail,
        }))));
    }
    let mut out = format!("pin file: {}\n", shown(&place));
    let Some(accepted) = &pins.accepted else {
        out.push_str("no tool set pinned yet: the gateway pins the first tools/list it sees\n");
        return Ok(Done::ok(out));
    };
    out.push_str(&format!(
        "accepted: {} ({} tool(s)), {} by {}\n",
        accepted.set.digest(),
        accepted.set.len(),
        shown(&accepted.at),
        shown(accepted.by.as_deref().unwrap_or("?"))
    ));
    let Some(observed) = &pins.observed else {
        out.push_str("observed: the same set; nothing is quarantined\n");
        return Ok(Done::ok(out));
    };
    out.push_str(&format!(
        "observed: {} ({} tool(s)), {}\n",
        observed.set.digest(),
        observed.set.len(),
        shown(&observed.at)
    ));
    out.push_str(&format!("quarantined: {} tool(s)\n", changes.len()));
    for (name, changes) in &changes {
        let described: Vec<String> = changes.iter().map(Change::describe).collect();
        out.push_str(&format!("  {}: {}\n", shown(name), shown(&described.join(", "))));
        let (before, after) = entries(&pins, name);
        if let Some(before) = before {
            out.push_str(&format!("    - accepted: {}\n", shown(&before.to_string())));
        }
        if let Some(after) = after {
            out.push_str(&format!("    + observed: {}\n", shown(&after.to_string())));
        }
    }
    out.push_str(&format!(
        "accept the observed set once reviewed: warden gateway pins accept --alias {alias} --set {} --by NAME\n",
        observed.set.digest()
    ));
    Ok(Done::ok(out))
}

fn accept(file: &PinFile, alias: &str, digest: &str, by: &str, json: bool) -> Result<Done, Failure> {
    warden::kernel::asserted(by).map_err(|e| Failure::usage(format!("--by: {e}")))?;
    let mut accepted = None;
    file.update(|pins| {
        let Some(observed) = pins.observed.take() else {
            return Err(if pins.accepted.is_some() {
                "the observed tool set is the accepted one; there is nothing to accept".to_owned()
            } else {
                "no tool set is pinned yet; the gateway pins the first tools/list it sees".to_owned()
            });
        };
        let now = observed.set.digest();
        if now != digest {
            return Err(format!(
                "the observed tool set is {now}, not {}: it changed since it was reviewed; run 'warden gateway pins show --alias {alias}' again",
                shown(digest)
            ));
        }
        accepted = Some((now, observed.set.len()));
        pins.accepted = Some(pins::Recorded { set: observed.set, at: pins::now(), by: Some(by.trim().to_owned()) });
        Ok(true)
    })
    .map_err(|why| Failure::check("not_accepted", why))?;
    let (digest, count) = accepted.unwrap_or_default();
    let stdout = if json {
        document(
            &json!({"accepted": digest, "tools": count, "by": by.trim(), "pin_file": file.path.display().to_string()}),
        )
    } else {
        format!(
            "accepted {digest} ({count} tool(s)) by {}; every gateway with --alias {alias} checks calls against it from its next call\n",
            shown(by.trim())
        )
    };
    Ok(Done::ok(stdout))
}

/// Each quarantined tool and its changes.
fn changes(pins: &Pins) -> std::collections::BTreeMap<String, Vec<Change>> {
    match (&pins.accepted, &pins.observed) {
        (Some(accepted), Some(observed)) => toolset::diff(&accepted.set, &observed.set),
        _ => std::collections::BTreeMap::new(),
    }
}

/// A tool's accepted and observed entries.
fn entries<'p>(pins: &'p Pins, name: &str) -> (Option<&'p Value>, Option<&'p Value>) {
    let accepted = pins.accepted.as_ref().and_then(|r| r.set.tools().get(name));
    let observed = pins.observed.as_ref().and_then(|r| r.set.tools().get(name));
    (accepted, observed)
}
