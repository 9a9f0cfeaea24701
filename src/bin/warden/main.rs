//! The `warden` command line: the administrator's document (`init`, `check`, `decide`,
//! `verify`), pure checks (`canonical`, `action-hash`, `template`) and the operator's view of one
//! store (`effects`, `resolve`, `receipts`, `events`, `pending`, `approve`, `deny`, `inspect`).
//!
//! Exit codes, one rule for every command (`exit::EXIT_CODES_HELP`): 0 ok; 1 refused or check
//! failed; 2 usage or configuration error (clap's own errors, a missing or unusable file: a
//! document that does not load, `check` included, a missing store; invalid input such as a
//! resolver name with a newline); 3 internal error (store faults). Errors go to stderr as one line
//! `warden: <message>`; with `--json` the error is also printed on stdout as `{"error": {...}}`
//! (`check` prints its own `{"ok": false, ...}`), so stdout always holds exactly one JSON
//! document.

mod about;
mod approval_view;
mod authority_commands;
mod bench;
mod console;
mod demo;
mod demo_authority;
mod doctor;
mod evidence_commands;
mod exit;
// Maintained on another branch; these pedantic lints are fixed there.
#[allow(clippy::if_not_else, clippy::redundant_closure_for_method_calls, clippy::semicolon_if_nothing_returned)]
mod gateway;
mod grant_commands;
mod init;
mod inspect;
mod operator;
mod output;
mod policy_commands;
mod pure_commands;
mod retention_commands;
mod sight_commands;
mod store_commands;
mod verify_race;

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{ArgGroup, CommandFactory, FromArgMatches, Parser, Subcommand};
use serde_json::json;

use warden::EffectState;

use crate::exit::{Done, Failure, EXIT_CODES_HELP, EXIT_INTERNAL, EXIT_USAGE};
use crate::output::{count, document, read_stdin, write_stderr, write_stdout};
use crate::policy_commands::{document_path, load_config, DecideRequest};
use crate::store_commands::{default_person, open_store, open_store_to_read, parse_ttl};

#[derive(Debug, Parser)]
#[command(
    name = "warden",
    version,
    // `--version` is ours (below), so that `--version --json` prints one document.
    disable_version_flag = true,
    about = "At-most-once effects and confined reads for AI agents: the administrator's document, checks, and the operator's view of a store",
    after_help = EXIT_CODES_HELP
)]
struct Cli {
    /// The store file (default: warden.redb in the current directory). Store commands refuse a
    /// path that does not exist.
    #[arg(long, global = true, env = "WARDEN_STORE", value_name = "PATH")]
    store: Option<PathBuf>,

    /// The administrator's document (warden.yaml), for commands that read one.
    #[arg(long, global = true, env = "WARDEN_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,

    /// Print exactly one JSON document on stdout, also on error.
    #[arg(long, global = true)]
    json: bool,

    /// Print the version, the C ABI version and the store schema (one JSON document with --json).
    #[arg(short = 'V', long)]
    version: bool,

    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the story in process against a real store under the starter policy: a lost reply,
    /// an approval bound to one action, two agents racing, an unknown action, delegation, a
    /// budget, revocation. No network.
    ///
    /// The store is always a fresh one in a scratch folder of its own, removed afterwards
    /// unless --keep; --store, --config, WARDEN_STORE and WARDEN_CONFIG are ignored (with a
    /// note on stderr), so the demo never writes into your store.
    Demo {
        /// Keep the scratch folder and print the command that looks into its store.
        #[arg(long)]
        keep: bool,
    },

    /// Write a commented starter document (warden/v1) that `check` accepts and `verify` passes.
    Init {
        /// Where to write it.
        #[arg(value_name = "PATH", default_value = "warden.yaml")]
        path: PathBuf,
        /// Overwrite an existing file (without it, an existing file is refused: exit 1).
        #[arg(long)]
        force: bool,
    },

    /// Validate a document: print OK, its policy hash and every warning.
    ///
    /// A document that does not load (or is missing) is exit 2, as for every other command,
    /// with the file, line and reason on stderr. With --json:
    /// {"ok", "policy_hash", "warnings"}, and {"ok": false, "error", ...} when refused.
    Check {
        /// The document (default: --config, then $WARDEN_CONFIG).
        #[arg(value_name = "FILE")]
        file: Option<PathBuf>,
        #[command(flatten)]
        upstream: policy_commands::UpstreamCheck,
    },

    /// Dry run: what the policy decides for one call, and why. Writes nothing, opens no store.
    ///
    /// Exit 0 for any decision (it is a report); exit 2 for invalid input or a document that does
    /// not load. With --json: {"decision", "reason", "warnings"}.
    Decide {
        /// The document (default: --config, then $WARDEN_CONFIG).
        #[arg(value_name = "FILE")]
        file: Option<PathBuf>,
        /// The action name, e.g. stripe.refund.
        #[arg(long, value_name = "NAME")]
        action: String,
        /// The action's arguments, a JSON object.
        #[arg(long, value_name = "JSON", default_value = "{}")]
        args: String,
        /// The agent asking (checked, not used by the policy).
        #[arg(long, value_name = "A")]
        agent: Option<String>,
        /// The user the agent acts for.
        #[arg(long, value_name = "U", requires = "agent")]
        user: Option<String>,
    },

    /// Prove the guarantees G1–G14 against a document, in a scratch store (never the live one).
    ///
    /// Exit 0 when no guarantee fails, 1 when one does, 2 for an observe-mode document (where
    /// nothing is refused, so nothing can be shown) or one that does not load.
    Verify {
        /// The document (default: --config, then $WARDEN_CONFIG).
        #[arg(value_name = "FILE")]
        file: Option<PathBuf>,
        /// Put the scratch stores in this PostgreSQL database instead of temporary files, each
        /// in a schema of its own, dropped at the end (a postgresql:// URL without options=; its
        /// user needs CREATE). Never the live store.
        #[arg(long, value_name = "URL")]
        scratch_postgres: Option<String>,
    },

    /// List the configured sight windows: sources, endpoints, params and field aliases.
    Sources {
        /// The document (default: --config, then $WARDEN_CONFIG).
        #[arg(value_name = "FILE")]
        file: Option<PathBuf>,
        /// Print the JSON Schema tool definitions an agent framework hands to a model
        /// (warden_sources, warden_query, warden_history, warden_diff) instead.
        #[arg(long)]
        tool_schema: bool,
    },

    /// One confined read through a configured window (credentials from the environment or --credentials-dir).
    Query {
        /// The source id.
        source: String,
        /// The endpoint id.
        endpoint: String,
        /// A declared parameter, NAME=VALUE (repeatable).
        #[arg(long = "param", value_name = "NAME=VALUE")]
        params: Vec<String>,
        /// A field alias to select (repeatable; default: every alias).
        #[arg(long = "field", value_name = "ALIAS")]
        fields: Vec<String>,
        /// Keep the result as an append-only snapshot in --store (created if missing).
        #[arg(long)]
        snapshot: bool,
        /// Read each credential reference from the file of that name in DIR instead of from
        /// the environment (systemd credentials, container secrets).
        #[arg(long, env = "WARDEN_CREDENTIALS_DIR", value_name = "DIR")]
        credentials_dir: Option<PathBuf>,
    },

    /// Page through the snapshots of one endpoint (or, with --param or --window, one window),
    /// newest first.
    History {
        /// The source id.
        source: String,
        /// The endpoint id.
        endpoint: String,
        /// A declared parameter, NAME=VALUE (repeatable); selects one window.
        #[arg(long = "param", value_name = "NAME=VALUE")]
        params: Vec<String>,
        /// Only the window of the given params with defaults applied (implied by --param).
        #[arg(long)]
        window: bool,
        /// The nextCursor printed by the previous page.
        #[arg(long, value_name = "SNAPSHOT_ID")]
        cursor: Option<String>,
        /// Snapshots per page, 1–100.
        #[arg(long, default_value_t = 20)]
        limit: u64,
    },

    /// Compare two snapshots of one window: what was added, removed or changed (at most 50
    /// entries, the rest counted).
    Diff {
        /// The earlier snapshot id (snp_…).
        a: String,
        /// The later snapshot id (snp_…).
        b: String,
    },

    /// Read one JSON value on stdin and print its canonical form (floats are refused).
    Canonical,

    /// Read an action document on stdin and print its action hash (`sha256:…`).
    ///
    /// The document is {"name", "arguments", "principal": {"agent", "user"}, "resource",
    /// "environment"}; user and resource may be absent or null, environment defaults to
    /// "production".
    ActionHash,

    /// Render an effect-key template against arguments and print the key.
    Template {
        /// The template, e.g. 'refund:{payment_id}'.
        template: String,
        /// The action's arguments, a JSON object.
        #[arg(long, value_name = "JSON", default_value = "{}")]
        args: String,
        /// The action's resource, for a `{resource}` placeholder.
        #[arg(long, value_name = "R")]
        resource: Option<String>,
        /// Insert values as they are (ctrlrun's raw mode) instead of percent-encoding them.
        #[arg(long)]
        raw: bool,
    },

    /// List effect records in key order.
    Effects {
        /// Only effects in this state (reserved, executing, committed, failed, ambiguous).
        #[arg(long, value_name = "S", value_parser = parse_state)]
        state: Option<EffectState>,
        /// At most this many effects.
        #[arg(long, value_name = "N", default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..))]
        limit: u64,
    },

    /// Say what happened to an AMBIGUOUS effect: it committed, or it failed.
    #[command(group(ArgGroup::new("outcome").required(true).args(["committed", "failed"])))]
    Resolve {
        /// The effect key.
        key: String,
        /// The effect did happen.
        #[arg(long)]
        committed: bool,
        /// The effect did not happen; a later attempt may run it.
        #[arg(long)]
        failed: bool,
        /// Who says so (default: cli:$USER).
        #[arg(long, value_name = "WHO")]
        by: Option<String>,
        /// Resolve only if the effect is still at this attempt (the ATTEMPT column of `warden
        /// effects`): a resolution never lands on a later attempt you did not look at.
        #[arg(long, value_name = "N")]
        attempt: Option<u32>,
    },

    /// List the last receipts, or verify the receipt chain.
    Receipts {
        /// Show the last N receipts.
        #[arg(long, value_name = "N", default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..))]
        last: u64,
        /// Recompute every receipt hash and link; exit 1 on any break.
        #[arg(long, conflicts_with = "last")]
        verify_chain: bool,
    },

    /// List events in id order.
    Events {
        /// Only events with an id greater than this.
        #[arg(long, value_name = "ID", default_value_t = 0)]
        after: u64,
        /// At most this many events.
        #[arg(long, value_name = "N", default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..))]
        limit: u64,
    },

    /// List approval requests still waiting for a human.
    Pending,

    /// Show what a pending approval request binds, then grant it.
    ///
    /// On a terminal it asks for confirmation; elsewhere --yes is required. The approver is
    /// asserted (typed here, not verified), so it counts only where one approver with no role
    /// is required.
    Approve {
        /// The approval id (apr_…).
        id: String,
        /// The person granting it (required); never the agent or user who asked, in any
        /// spelling (`ada`, `ADA`, `cli:ada` and a fullwidth `ａｄａ` are one person).
        #[arg(long, value_name = "USER")]
        by: String,
        /// Grant without asking (needed when stdin is not a terminal); read `warden inspect ID`
        /// first.
        #[arg(long)]
        yes: bool,
        /// How long the approval may be used from now, ISO 8601 (PT15M, PT1H, P1D); default: until
        /// the request's own expiry.
        #[arg(long, value_name = "DURATION", conflicts_with = "scope_uses")]
        ttl: Option<String>,
        /// Also grant the next N proposals of this shape (a scoped grant): same action, same
        /// requester, decided approve by the same rule of the same document, whose approval sets
        /// `scoped: {max_uses, max_minutes}` (N at most max_uses). Needs --scope-minutes.
        #[arg(long, value_name = "N")]
        scope_uses: Option<u32>,
        /// How long the scoped grant lasts, in minutes (at most the rule's max_minutes).
        #[arg(long, value_name = "M", requires = "scope_uses")]
        scope_minutes: Option<u32>,
        /// An argument (JSON pointer, /customer_id) a covered proposal must have with this
        /// request's value; repeat for more.
        #[arg(long, value_name = "POINTER", requires = "scope_uses")]
        scope_fixed: Vec<String>,
        /// A numeric argument a covered proposal must have at most NUMBER (/amount=5000; at least
        /// this request's own value); repeat for more.
        #[arg(long, value_name = "POINTER=NUMBER", requires = "scope_uses")]
        scope_at_most: Vec<String>,
    },

    /// Deny a pending approval request.
    Deny {
        /// The approval id (apr_…).
        id: String,
        /// The person denying it (required); never the agent or user who asked.
        #[arg(long, value_name = "USER")]
        by: String,
        /// Why, one line.
        #[arg(long, value_name = "TEXT")]
        reason: Option<String>,
    },

    /// The store in numbers: pending approvals, effects by state, receipts held, the chain's
    /// size and the last signed checkpoint.
    Stats,

    /// Everything the store knows about an approval id, an effect key or a receipt id.
    ///
    /// An approval (apr_…): its record, events and receipts. An effect key: its record, events
    /// and receipts. A receipt (rct_…): the receipt. Exit 1 if nothing is known about ID.
    Inspect {
        /// An approval id, an effect key or a receipt id.
        id: String,
    },

    /// Delegate part of a grant under --parent, from a grant file, as AGENT[/USER]
    ///
    /// The parent is a root grant id or a dlg_ id; the file holds the keys of a grant minus
    /// id. The delegation is recorded created_via cli. A refusal is exit 1 with its reason and
    /// dimension.
    Delegate {
        /// The parent: a root grant id of the document, or a delegation id (dlg_…).
        #[arg(long, value_name = "ID")]
        parent: String,
        /// The delegated grant, YAML or JSON.
        #[arg(long, value_name = "FILE")]
        file: PathBuf,
        /// Who delegates: the principal the parent grant names, AGENT or AGENT/USER.
        #[arg(long = "as", value_name = "AGENT[/USER]")]
        as_: String,
    },

    /// Revoke a delegation (and everything beneath it), or every one a principal created or beneath an id
    #[command(group(ArgGroup::new("which").required(true).args(["id", "created_by", "under"])))]
    Revoke {
        /// The delegation id (dlg_…).
        id: Option<String>,
        /// Revoke every delegation this principal created (AGENT: all its users; AGENT/USER: one).
        #[arg(long, value_name = "AGENT[/USER]")]
        created_by: Option<String>,
        /// Revoke every delegation beneath this root grant or delegation id, at any depth.
        #[arg(long, value_name = "ID")]
        under: Option<String>,
        /// Who revokes (default: cli:$USER).
        #[arg(long, value_name = "WHO")]
        by: Option<String>,
    },

    /// List stored delegations, revoked ones included.
    Delegations,

    /// List every budget with what its window holds now and what is left: the live
    /// delegations' and, with --config, the document's grants'.
    Budgets,

    /// Write a new Ed25519 checkpoint signing key to FILE (mode 0600, never overwritten) and
    /// print its verifier key, the line auditors pin.
    Keygen {
        /// The new key file.
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
        /// The key's name, on every signature it makes (no spaces, no '+').
        #[arg(long, default_value = "warden")]
        name: String,
    },

    /// Sign a checkpoint of the receipt log now: its size, Merkle root and the effects still
    /// open, as a C2SP signed note. The key never enters the store.
    Checkpoint {
        /// The signing key file (from `warden keygen`; mode 0600 or stricter).
        #[arg(long, value_name = "FILE")]
        key: PathBuf,
        /// The log's name on its first checkpoint (default warden/<random>); later ones keep it.
        #[arg(long)]
        origin: Option<String>,
    },

    /// List the checkpoints, oldest first.
    Checkpoints,

    /// Send the checkpoints waiting for each of the document's anchors (evidence.anchors) now,
    /// failed ones included; each try is recorded as the automatic worker records it. Exit 1
    /// naming the first sink that failed.
    Anchor,

    /// Delete the receipts through a checkpoint, and the events of their time, once it or a
    /// later checkpoint was anchored and no hold stands. The prune's own receipt is written
    /// first, in the same transaction; every later receipt stays provable (docs/EVIDENCE.md).
    Prune {
        /// The checkpoint to prune through: its receipts go.
        #[arg(long, value_name = "CHECKPOINT")]
        through: u64,
        /// Who prunes (recorded on the prune's receipt).
        #[arg(long, value_name = "NAME")]
        by: String,
        /// Why (recorded on the prune's receipt).
        #[arg(long, value_name = "TEXT")]
        reason: String,
    },

    /// Place, release or list retention holds: while one stands, nothing is pruned.
    Hold {
        /// What to do.
        #[command(subcommand)]
        what: HoldCommand,
    },

    /// Scoped grants (made by `warden approve … --scope-uses N`): list them, or revoke one.
    Grants {
        /// What to do.
        #[command(subcommand)]
        what: GrantsCommand,
    },

    /// Print a Merkle proof: a receipt's inclusion in a checkpoint, or one checkpoint's
    /// consistency with a later one.
    Proof {
        /// Which proof.
        #[command(subcommand)]
        what: ProofCommand,
    },

    /// Write an offline bundle (receipts.jsonl, checkpoints, proofs, keys, approvals) into a
    /// new directory, for `warden verify-bundle` anywhere.
    Export {
        /// The directory to create.
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
        /// Start after this checkpoint's receipts (default: the first receipt).
        #[arg(long, value_name = "CHECKPOINT")]
        from: Option<u64>,
        /// End at this checkpoint (default: the last).
        #[arg(long, value_name = "CHECKPOINT")]
        to: Option<u64>,
        /// Also write the directory as one archive, DIR.tar.
        #[arg(long)]
        tar: bool,
    },

    /// Check an offline bundle with no access to the store: signatures, roots, order, every
    /// receipt and every outcome a checkpoint counts closed. Exit 0 when sound, 1 naming the
    /// first failure.
    VerifyBundle {
        /// The bundle's directory.
        dir: PathBuf,
        /// A verifier key to trust (NAME+ID+BASE64, or a file holding one); repeatable. Without
        /// it the bundle's own keys are trusted, and a swapped key goes unseen.
        #[arg(long = "key", value_name = "VKEY")]
        keys: Vec<String>,
        /// A time-stamp authority's certificate (PEM or DER): every RFC 3161 anchor receipt must
        /// verify against one of them; repeatable. Without it the tokens are carried unchecked.
        #[arg(long = "tsa-cert", value_name = "FILE")]
        tsa_certs: Vec<PathBuf>,
    },

    /// Check a store without changing it: every row's integrity, the receipt chain, rows that
    /// point at nothing, and where the signed checkpoints stand (with --config, whether the
    /// document's automatic ones are overdue). Exit 0 when sound, 1 when damage was found.
    Doctor,

    /// Protected no-op actions per second and p50/p99 latency for several thread counts and
    /// for several processes on one store, beside the disk's raw fdatasync and redb commit
    /// rates measured in the same run. Scratch stores go in --dir and are removed.
    Bench {
        /// Where the scratch stores live (the disk being measured); default: the current directory.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
        /// Actions per configuration.
        #[arg(long, default_value_t = 2000)]
        actions: usize,
        /// Thread counts to run, in one process.
        #[arg(long, value_delimiter = ',', default_value = "1,2,4,8")]
        threads: Vec<usize>,
        /// Processes (one thread each) sharing one store.
        #[arg(long, default_value_t = 8)]
        processes: usize,
        /// durable, deferred or both.
        #[arg(long, default_value = "both")]
        outcomes: String,
        /// What a returned write survives: power (the default), process, or both.
        #[arg(long, default_value = "power")]
        durability: String,
        /// Automatic checkpoints (the document's evidence section at its defaults): off (the
        /// default), on, or both, side by side in the same run.
        #[arg(long, default_value = "off")]
        checkpoints: String,
    },

    /// Put Warden in front of an MCP server: every tools/call becomes the action
    /// mcp.<alias>.<tool> (decided, approved, reserved, recorded); everything else is relayed
    /// untouched. Over Streamable HTTP (--upstream URL), or over stdio with the server as a
    /// child (--stdio -- COMMAND …). Needs --config and --store. See docs/GATEWAY.md.
    Gateway(Box<gateway::GatewayArgs>),

    /// Serve the web console for approvers, resolvers and auditors on loopback (elsewhere over
    /// HTTPS, --tls-cert/--tls-key/--public-url): the inbox of
    /// pending approvals (whole actions, a diff against the last approved one, approve/deny),
    /// effects (AMBIGUOUS first, resolve), the receipt chain verified, authority. Prints the URL
    /// as the first line of stdout and serves until SIGINT/SIGTERM. Sign in with a token from
    /// `warden approvers add`. See docs/CONSOLE.md.
    Console(console::ConsoleArgs),

    /// Serve the operator's MCP server for an operator's own MCP client: read tools
    /// (list_pending_approvals with whole actions, inspect, effects, receipts, stats) and write
    /// tools (approve, deny, resolve, a reason required for deny and resolve) that answer as the
    /// approver an operator token names (`warden approvers add NAME --operator`). Over stdio
    /// (--stdio; the token from $WARDEN_OPERATOR_TOKEN or --token-file), or Streamable HTTP on
    /// loopback or over HTTPS (--listen, --tls-cert; `Authorization: Bearer TOKEN`; the URL is
    /// the first line of stdout).
    /// See docs/OPERATOR.md.
    Operator(operator::OperatorArgs),

    /// Register or remove the approvers of the console and the operator server (`add` prints a
    /// one-time console login token, or with --operator a long-lived operator token).
    Approvers {
        #[command(subcommand)]
        what: console::ApproversCommand,
    },

    /// Print the shell completion script for bash, zsh or fish (also elvish, powershell).
    ///
    /// bash: `source <(warden completions bash)`; zsh: `warden completions zsh > ~/.zfunc/_warden`;
    /// fish: `warden completions fish > ~/.config/fish/completions/warden.fish`.
    Completions {
        /// The shell.
        #[arg(value_name = "SHELL")]
        shell: clap_complete::Shell,
    },

    /// Write the man pages (warden.1 and warden-SUBCOMMAND.1 for each subcommand) into DIR.
    ManPages {
        /// An existing directory, e.g. share/man/man1.
        #[arg(value_name = "DIR")]
        dir: PathBuf,
    },
}

/// `warden hold place|release|list`.
#[derive(Subcommand, Debug)]
enum HoldCommand {
    /// Place a hold: `warden prune` is refused until it is released.
    Place {
        /// The hold's name (letters, digits, '.', '_', ':', '-').
        name: String,
        /// Who places it.
        #[arg(long, value_name = "NAME")]
        by: String,
        /// Why (a case, a request, an audit).
        #[arg(long, value_name = "TEXT")]
        reason: String,
    },
    /// Release a standing hold.
    Release {
        /// The hold's name.
        name: String,
        /// Who releases it.
        #[arg(long, value_name = "NAME")]
        by: String,
        /// Why.
        #[arg(long, value_name = "TEXT")]
        reason: String,
    },
    /// List the standing holds.
    List {
        /// Released holds too.
        #[arg(long)]
        all: bool,
    },
}

/// `warden grants list|revoke`.
#[derive(Subcommand, Debug)]
enum GrantsCommand {
    /// List the live scoped grants: action, uses left, expiry, approver, requester.
    List {
        /// Used-up, expired and revoked grants too.
        #[arg(long)]
        all: bool,
    },
    /// Revoke a scoped grant: no later proposal is covered by it (its receipt records who and why).
    Revoke {
        /// The scoped grant id (sgr_…).
        id: String,
        /// Who revokes it.
        #[arg(long, value_name = "NAME")]
        by: String,
        /// Why.
        #[arg(long, value_name = "TEXT")]
        reason: String,
    },
}

/// `warden proof inclusion|consistency`.
#[derive(Subcommand, Debug)]
enum ProofCommand {
    /// The audit path of one receipt in a checkpoint's tree.
    Inclusion {
        /// The receipt id (rct_…).
        receipt: String,
        /// The checkpoint (default: the last).
        #[arg(long, value_name = "N")]
        checkpoint: Option<u64>,
    },
    /// The proof that checkpoint NEW's log extends checkpoint OLD's.
    Consistency {
        /// The older checkpoint's number.
        old: u64,
        /// The newer checkpoint's number.
        new: u64,
    },
}

fn parse_state(text: &str) -> Result<EffectState, String> {
    EffectState::parse(text)
        .ok_or_else(|| "expected one of reserved, executing, committed, failed, ambiguous".to_owned())
}

/// The worker processes that `verify` (G4's contenders) and `bench` start are not commands: they
/// are recognised here, before the command line is parsed, so that clap never lists them, and
/// never suggests one for a typo (`warden verfy`).
fn worker(args: &[OsString]) -> Option<ExitCode> {
    let name = args.get(1)?.to_str()?;
    let run: fn(&[String]) -> i32 = if name == warden::verify::CHILD_SUBCOMMAND {
        warden::verify::child_main
    } else if name == bench::CHILD_SUBCOMMAND {
        bench::child_main
    } else {
        return None;
    };
    let Some(rest) = args[2..].iter().map(|arg| arg.to_str().map(str::to_owned)).collect::<Option<Vec<String>>>()
    else {
        write_stderr(&format!("warden {name}: an argument is not UTF-8"));
        return Some(ExitCode::from(EXIT_USAGE));
    };
    Some(ExitCode::from(u8::try_from(run(&rest)).unwrap_or(EXIT_INTERNAL)))
}

fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().collect();
    if let Some(code) = worker(&args) {
        return code;
    }
    // Parsed as `Cli::parse_from` does, keeping the matches: `warden gateway --settings` needs
    // to know which flags the command line gave.
    let matches = Cli::command().get_matches_from(args);
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(error) => error.format(&mut Cli::command()).exit(),
    };
    if cli.version {
        return match write_stdout(&about::version(cli.json)) {
            Ok(()) => ExitCode::SUCCESS,
            Err(failure) => ExitCode::from(failure.code),
        };
    }
    let Some(command) = &cli.command else {
        Cli::command()
            .error(clap::error::ErrorKind::MissingSubcommand, "name a command (warden --help lists them)")
            .exit()
    };
    if let Some(args) = match command {
        Command::Gateway(args) if args.action.is_none() => Some(args),
        _ => None,
    } {
        let merged = match gateway::settings::resolve(args, &matches, cli.store.as_deref(), cli.config.as_deref()) {
            Ok(merged) => merged,
            Err(failure) => {
                write_stderr(&failure.message);
                return ExitCode::from(failure.code);
            }
        };
        let (args, store, config) = match &merged {
            Some(merged) => (&merged.args, merged.store.as_deref(), merged.config.as_deref()),
            None => (&**args, cli.store.as_deref(), cli.config.as_deref()),
        };
        // Runs until stopped; only a startup refusal or a fault returns.
        return match gateway::run(args, store, config) {
            Ok(()) => ExitCode::SUCCESS,
            Err(failure) => {
                write_stderr(&failure.message);
                ExitCode::from(failure.code)
            }
        };
    }
    if let Command::Console(args) = command {
        // Runs until stopped; only a startup refusal or a fault returns.
        let store = store_commands::store_path(cli.store.as_deref());
        return match console::run(args, store, cli.config.as_deref()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(failure) => {
                write_stderr(&failure.message);
                ExitCode::from(failure.code)
            }
        };
    }
    if let Command::Operator(args) = command {
        // Runs until stopped (or, over stdio, until stdin ends); only a startup refusal or a
        // fault returns early.
        let store = store_commands::store_path(cli.store.as_deref());
        return match operator::run(args, store, cli.config.as_deref()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(failure) => {
                write_stderr(&failure.message);
                ExitCode::from(failure.code)
            }
        };
    }
    match run(&cli, command) {
        Ok(done) => {
            let written = write_stdout(&done.stdout);
            match (done.failed, written) {
                (_, Err(failure)) | (Some(failure), Ok(())) => {
                    write_stderr(&failure.message);
                    ExitCode::from(failure.code)
                }
                (None, Ok(())) => ExitCode::SUCCESS,
            }
        }
        Err(failure) => {
            if cli.json {
                // Nothing useful is left to do if stdout is gone; the exit code still says it.
                let _ = write_stdout(&document(&json!({"error": failure.json})));
            }
            write_stderr(&failure.message);
            ExitCode::from(failure.code)
        }
    }
}

fn run(cli: &Cli, command: &Command) -> Result<Done, Failure> {
    let store = Some(store_commands::store_path(cli.store.as_deref()));
    let config = cli.config.as_deref();
    let json = cli.json;
    match command {
        Command::Demo { keep } => {
            demo::demo(&demo::Ignored { store: cli.store.as_deref(), config }, *keep, init::STARTER).map(Done::ok)
        }
        Command::Init { path, force } => init::init(path, *force, json).map(Done::ok),
        Command::Check { file, upstream } => {
            Ok(policy_commands::check(document_path(file.as_deref(), config)?, upstream, json))
        }
        Command::Decide { file, action, args, agent, user } => {
            let doc = load_config(document_path(file.as_deref(), config)?)?;
            let request = DecideRequest { action, args, agent: agent.as_deref(), user: user.as_deref() };
            policy_commands::decide(&doc, &request, json).map(Done::ok)
        }
        Command::Verify { file, scratch_postgres } => {
            let doc = load_config(document_path(file.as_deref(), config)?)?;
            policy_commands::verify(&doc, scratch_postgres.as_deref(), json)
        }
        Command::Sources { file, tool_schema } => {
            let doc = load_config(document_path(file.as_deref(), config)?)?;
            if *tool_schema {
                return Ok(Done::ok(document(&warden::sight::tool_schema::tool_schema(&doc.sources_config))));
            }
            sight_commands::sources(&doc, json).map(Done::ok)
        }
        Command::Query { source, endpoint, params, fields, snapshot, credentials_dir } => {
            let doc = load_config(document_path(None, config)?)?;
            let request = sight_commands::QueryArgs { source, endpoint, params, fields, snapshot: *snapshot };
            sight_commands::query(doc, store, credentials_dir.as_deref(), &request, json).map(Done::ok)
        }
        Command::History { source, endpoint, params, window, cursor, limit } => {
            let doc = load_config(document_path(None, config)?)?;
            let page = sight_commands::Page { cursor: cursor.as_deref(), limit: *limit, window: *window };
            sight_commands::history(doc, store, source, endpoint, params, &page, json).map(Done::ok)
        }
        Command::Diff { a, b } => {
            let doc = load_config(document_path(None, config)?)?;
            sight_commands::diff(doc, store, a, b, json).map(Done::ok)
        }
        Command::Canonical => pure_commands::canonical(&read_stdin()?).map(Done::ok),
        Command::ActionHash => pure_commands::action_hash(&read_stdin()?, json).map(Done::ok),
        Command::Template { template, args, resource, raw } => {
            pure_commands::render_template(template, args, resource.as_deref(), *raw, json).map(Done::ok)
        }
        Command::Effects { state, limit } => {
            store_commands::effects(&open_store_to_read(store)?, *state, count(*limit), json).map(Done::ok)
        }
        Command::Resolve { key, committed, failed, by, attempt } => {
            let to = match (committed, failed) {
                (true, false) => EffectState::Committed,
                (false, true) => EffectState::Failed,
                _ => return Err(Failure::usage("give exactly one of --committed or --failed")),
            };
            let by = by.clone().unwrap_or_else(default_person);
            store_commands::resolve(&open_store(store)?, key, *attempt, to, &by, json).map(Done::ok)
        }
        Command::Receipts { last, verify_chain } => {
            let kernel = open_store_to_read(store)?;
            if *verify_chain {
                store_commands::chain(&kernel.verify_chain()?, json)
            } else {
                store_commands::receipts(&kernel, count(*last), json).map(Done::ok)
            }
        }
        Command::Events { after, limit } => {
            store_commands::events(&open_store_to_read(store)?, *after, count(*limit), json).map(Done::ok)
        }
        Command::Pending => store_commands::pending(&open_store_to_read(store)?, json).map(Done::ok),
        Command::Approve { id, by, yes, ttl, scope_uses, scope_minutes, scope_fixed, scope_at_most } => {
            // A bad duration or scope is a usage error whatever the store says.
            let ttl = ttl.as_deref().map(parse_ttl).transpose()?;
            let scope = grant_commands::scope_from_flags(*scope_uses, *scope_minutes, scope_fixed, scope_at_most)?;
            let confirm = store_commands::Confirm { yes: *yes };
            store_commands::approve(store, id, by, ttl, scope.as_ref(), confirm, json).map(Done::ok)
        }
        Command::Deny { id, by, reason } => {
            store_commands::deny(&open_store(store)?, id, by, reason.as_deref(), json).map(Done::ok)
        }
        Command::Stats => store_commands::stats(&open_store_to_read(store)?, json).map(Done::ok),
        Command::Inspect { id } => inspect::inspect(&open_store_to_read(store)?, id, json).map(Done::ok),
        Command::Delegate { parent, file, as_ } => {
            let doc = load_config(document_path(None, config)?)?;
            authority_commands::delegate(doc, store, parent, file, as_, json).map(Done::ok)
        }
        Command::Revoke { id, created_by, under, by } => {
            let by = by.clone().unwrap_or_else(default_person);
            authority_commands::revoke(store, id.as_deref(), created_by.as_deref(), under.as_deref(), &by, json)
                .map(Done::ok)
        }
        Command::Delegations => authority_commands::delegations(store, json).map(Done::ok),
        Command::Budgets => {
            let doc = match config.filter(|path| !path.as_os_str().is_empty()) {
                Some(path) => Some(load_config(path)?),
                None => None,
            };
            authority_commands::budgets(store, doc.as_ref(), json).map(Done::ok)
        }
        Command::Keygen { out, name } => evidence_commands::keygen(out, name, json).map(Done::ok),
        Command::Checkpoint { key, origin } => {
            evidence_commands::checkpoint(&open_store(store)?, key, origin.as_deref(), json).map(Done::ok)
        }
        Command::Checkpoints => evidence_commands::checkpoints(&open_store_to_read(store)?, json).map(Done::ok),
        Command::Anchor => {
            let doc = load_config(document_path(None, config)?)?;
            let Some(settings) = doc.evidence else {
                return Err(Failure::config(
                    "the document has no evidence section, so no anchors; see docs/EVIDENCE.md, \"Anchors\"",
                ));
            };
            evidence_commands::anchor(&open_store(store)?, &settings, json)
        }
        Command::Prune { through, by, reason } => {
            retention_commands::prune(&open_store(store)?, *through, by, reason, json).map(Done::ok)
        }
        Command::Hold { what: HoldCommand::Place { name, by, reason } } => {
            retention_commands::place(&open_store(store)?, name, by, reason, json).map(Done::ok)
        }
        Command::Hold { what: HoldCommand::Release { name, by, reason } } => {
            retention_commands::release(&open_store(store)?, name, by, reason, json).map(Done::ok)
        }
        Command::Grants { what: GrantsCommand::List { all } } => {
            grant_commands::list(&open_store_to_read(store)?, *all, json).map(Done::ok)
        }
        Command::Grants { what: GrantsCommand::Revoke { id, by, reason } } => {
            grant_commands::revoke(&open_store(store)?, id, by, reason, json).map(Done::ok)
        }
        Command::Hold { what: HoldCommand::List { all } } => {
            retention_commands::list(&open_store_to_read(store)?, *all, json).map(Done::ok)
        }
        Command::Proof { what: ProofCommand::Inclusion { receipt, checkpoint } } => {
            evidence_commands::inclusion(&open_store_to_read(store)?, receipt, *checkpoint, json).map(Done::ok)
        }
        Command::Proof { what: ProofCommand::Consistency { old, new } } => {
            evidence_commands::consistency(&open_store_to_read(store)?, *old, *new, json).map(Done::ok)
        }
        Command::Export { out, from, to, tar } => {
            evidence_commands::export(&open_store_to_read(store)?, out, *from, *to, *tar, json).map(Done::ok)
        }
        Command::VerifyBundle { dir, keys, tsa_certs } => evidence_commands::verify_bundle(dir, keys, tsa_certs, json),
        Command::Doctor => {
            // With a document, whether its automatic checkpoints keep up.
            let evidence = match config.filter(|path| !path.as_os_str().is_empty()) {
                Some(path) => load_config(path)?.evidence,
                None => None,
            };
            doctor::doctor(&open_store_to_read(store)?, evidence.as_ref(), json)
        }
        Command::Bench { dir, actions, threads, processes, outcomes, durability, checkpoints } => {
            bench::bench(&bench::BenchArgs {
                dir: dir.as_deref(),
                actions: *actions,
                threads,
                processes: *processes,
                outcomes,
                durability,
                checkpoints,
                json,
            })
            .map(Done::ok)
        }
        Command::Completions { shell } => Ok(Done::ok(about::completions(*shell))),
        Command::ManPages { dir } => about::man_pages(dir, json).map(Done::ok),
        Command::Console(_) => Err(Failure::internal("the console runs only from main")),
        Command::Operator(_) => Err(Failure::internal("the operator server runs only from main")),
        Command::Approvers { what } => {
            console::approvers_command(what, store_commands::store_path(cli.store.as_deref()), json).map(Done::ok)
        }
        Command::Gateway(args) => match &args.action {
            Some(action) => gateway::subcommand(action, store_commands::store_path(cli.store.as_deref()), json),
            None => Err(Failure::internal("the gateway runs only from main")),
        },
    }
}
