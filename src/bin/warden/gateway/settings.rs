//! `warden gateway --settings FILE`: what are flags, in a YAML file. Each key is a flag of
//! `warden gateway` without its dashes, in snake_case (`upstream_timeout: 30` is
//! `--upstream-timeout 30`), plus `config` and `store` (the global `--config`/`--store`) and
//! `command` (the server's command line after `--`, as a list). A value is what the flag takes:
//! a string or an integer, `true`/`false` for a switch, a list for a repeatable flag.
//!
//! A setting is in the file or on the command line, never both: one given twice (or `config`
//! and `store` also set by `WARDEN_CONFIG`/`WARDEN_STORE`) is refused, naming both places, so
//! what runs is never a matter of precedence rules. The file is read with the document's
//! strict YAML (`warden::document::load_settings_file`) and every value is checked by the
//! flag's own parser, each refusal naming the file and line.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use clap::parser::ValueSource;
use clap::{Arg, ArgAction, ArgMatches, Args, Command, FromArgMatches};
use serde_json::Value;
use warden::document::Setting;

use super::GatewayArgs;
use crate::exit::Failure;

/// The keys that are not flags of `warden gateway` itself.
const GLOBAL_KEYS: [&str; 2] = ["config", "store"];
/// The key holding the server's command line.
const COMMAND_KEY: &str = "command";

/// The gateway's arguments with its settings file folded in.
pub struct Merged {
    pub args: GatewayArgs,
    pub store: Option<PathBuf>,
    pub config: Option<PathBuf>,
}

/// `warden gateway`'s own arguments, as clap parses them.
fn command() -> Command {
    GatewayArgs::augment_args(Command::new("gateway"))
}

/// The flags a settings file may name (every long flag but `--settings`), by key.
fn flags(command: &Command) -> Vec<(String, &Arg)> {
    command
        .get_arguments()
        .filter(|arg| arg.get_id() != "settings")
        .filter_map(|arg| Some((arg.get_long()?.replace('-', "_"), arg)))
        .collect()
}

/// Every key a settings file may hold, sorted, for a refusal.
fn allowed_keys(command: &Command) -> String {
    let mut keys: Vec<String> = flags(command).into_iter().map(|(key, _)| key).collect();
    keys.extend(GLOBAL_KEYS.iter().map(|k| (*k).to_owned()));
    keys.push(COMMAND_KEY.to_owned());
    keys.sort();
    keys.join(", ")
}

/// Where a refusal points: `FILE:LINE: key`.
fn at(path: &Path, setting: &Setting) -> String {
    format!("{}:{}: {}", super::log::printable(&path.display().to_string()), setting.line, setting.key)
}

/// A value a flag takes as text: a string, or an integer as written.
fn scalar(value: &Value) -> Option<String> {
    match value {
        Value::String(text) => Some(text.clone()),
        Value::Number(number) => Some(number.to_string()),
        _ => None,
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

/// The command-line words of one setting for the flag `arg`.
fn words(path: &Path, setting: &Setting, arg: &Arg) -> Result<Vec<OsString>, Failure> {
    let long = arg.get_long().unwrap_or_default();
    let flag = |value: &str| OsString::from(format!("--{long}={value}"));
    let refused = |what: &str| Failure::usage(format!("{}: {what}, got {}", at(path, setting), kind(&setting.value)));
    match arg.get_action() {
        ArgAction::SetTrue => match setting.value {
            Value::Bool(true) => Ok(vec![OsString::from(format!("--{long}"))]),
            Value::Bool(false) => Ok(Vec::new()),
            _ => Err(refused("a switch is true or false")),
        },
        ArgAction::Append => match &setting.value {
            Value::Array(items) => items
                .iter()
                .map(|item| scalar(item).map(|v| flag(&v)))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| refused("a repeatable flag takes a string or a number, or a list of them")),
            value => scalar(value)
                .map(|v| vec![flag(&v)])
                .ok_or_else(|| refused("a repeatable flag takes a string or a number, or a list of them")),
        },
        _ => scalar(&setting.value).map(|v| vec![flag(&v)]).ok_or_else(|| refused("it takes one string or number")),
    }
}

/// clap's refusal in one line (its first, without `error: `).
fn clap_message(error: &clap::Error) -> String {
    let text = error.to_string();
    let first = text.lines().next().unwrap_or_default();
    first.strip_prefix("error: ").unwrap_or(first).to_owned()
}

/// Parse `words` as `warden gateway`'s arguments.
fn parse(words: &[OsString]) -> Result<GatewayArgs, clap::Error> {
    let matches =
        command().try_get_matches_from(std::iter::once(OsString::from("gateway")).chain(words.iter().cloned()))?;
    GatewayArgs::from_arg_matches(&matches)
}

/// Where a global was set besides the file, if anywhere.
fn global_source(top: &ArgMatches, id: &str) -> Option<&'static str> {
    match top.value_source(id) {
        Some(ValueSource::CommandLine) => Some("on the command line"),
        Some(ValueSource::EnvVariable) => Some(if id == "store" { "by WARDEN_STORE" } else { "by WARDEN_CONFIG" }),
        _ => None,
    }
}

/// The command line's own words for the gateway's flags it was given (not their defaults).
fn given_words(command: &Command, given: &ArgMatches) -> (Vec<OsString>, Vec<OsString>) {
    let (mut flags, mut trailing) = (Vec::new(), Vec::new());
    for arg in command.get_arguments() {
        let id = arg.get_id().as_str();
        if id == "settings" || given.value_source(id) != Some(ValueSource::CommandLine) {
            continue;
        }
        let raw: Vec<OsString> = given.get_raw(id).into_iter().flatten().map(OsString::from).collect();
        match (arg.get_long(), arg.get_action()) {
            (None, _) => trailing.extend(raw),
            (Some(long), ArgAction::SetTrue) => flags.push(OsString::from(format!("--{long}"))),
            (Some(long), _) => flags.extend(raw.into_iter().map(|value| {
                let mut word = OsString::from(format!("--{long}="));
                word.push(value);
                word
            })),
        }
    }
    (flags, trailing)
}

/// `args` with the settings file it names folded in (`None` when it names none). `top` is the
/// whole command line's matches: which flags it gave, and whether `--config`/`--store` came
/// from it or the environment.
pub fn resolve(
    args: &GatewayArgs,
    top: &ArgMatches,
    store: Option<&Path>,
    config: Option<&Path>,
) -> Result<Option<Merged>, Failure> {
    let Some(path) = &args.settings else { return Ok(None) };
    let given = top.subcommand_matches("gateway").ok_or_else(|| Failure::internal("no gateway matches"))?;
    let settings = warden::document::load_settings_file(path).map_err(|e| Failure::config(e.to_string()))?;
    let command = command();
    let known = flags(&command);
    let mut named = OsString::from("--settings=");
    named.push(path.as_os_str());
    let mut from_file: Vec<OsString> = vec![named];
    let mut trailing_from_file = Vec::new();
    let (mut store, mut config) = (store.map(Path::to_path_buf), config.map(Path::to_path_buf));
    for setting in &settings {
        let key = setting.key.as_str();
        if let Some(global) = GLOBAL_KEYS.iter().find(|g| **g == key) {
            if let Some(elsewhere) = global_source(top, global) {
                return Err(Failure::usage(format!(
                    "{}: --{global} is also given {elsewhere}; give it in one place",
                    at(path, setting)
                )));
            }
            let Some(value) = setting.value.as_str().filter(|s| !s.is_empty()) else {
                return Err(Failure::usage(format!("{}: a path, got {}", at(path, setting), kind(&setting.value))));
            };
            let slot = if *global == "store" { &mut store } else { &mut config };
            *slot = Some(PathBuf::from(value));
            continue;
        }
        if key == COMMAND_KEY {
            if given.value_source(COMMAND_KEY) == Some(ValueSource::CommandLine) {
                return Err(Failure::usage(format!(
                    "{}: the server's command is also given after -- on the command line; give it in one place",
                    at(path, setting)
                )));
            }
            let items = setting.value.as_array().filter(|items| !items.is_empty());
            let Some(words) = items.and_then(|items| items.iter().map(scalar).collect::<Option<Vec<_>>>()) else {
                return Err(Failure::usage(format!(
                    "{}: the server's command line is a list of strings, e.g. [python3, server.py], got {}",
                    at(path, setting),
                    kind(&setting.value)
                )));
            };
            trailing_from_file.extend(words.into_iter().map(OsString::from));
            continue;
        }
        let Some((_, arg)) = known.iter().find(|(k, _)| k == key) else {
            let hint = if key.contains('-') { " (keys are snake_case: upstream_timeout)" } else { "" };
            return Err(Failure::usage(format!(
                "{}: not a setting{hint}; allowed: {}",
                at(path, setting),
                allowed_keys(&command)
            )));
        };
        if given.value_source(arg.get_id().as_str()) == Some(ValueSource::CommandLine) {
            return Err(Failure::usage(format!(
                "{}: --{} is also given on the command line; give it in one place",
                at(path, setting),
                arg.get_long().unwrap_or_default()
            )));
        }
        let words = words(path, setting, arg)?;
        // Each setting through the flag's own parser, so a refusal names its line.
        let alone: Vec<OsString> = from_file[..1].iter().cloned().chain(words.iter().cloned()).collect();
        parse(&alone).map_err(|e| Failure::usage(format!("{}: {}", at(path, setting), clap_message(&e))))?;
        from_file.extend(words);
    }
    let (mut words, trailing) = given_words(&command, given);
    words.splice(0..0, from_file);
    let trailing = if trailing.is_empty() { trailing_from_file } else { trailing };
    if !trailing.is_empty() {
        words.push(OsString::from("--"));
        words.extend(trailing);
    }
    let args = parse(&words).map_err(|e| {
        Failure::usage(format!(
            "{} with the command line: {}",
            super::log::printable(&path.display().to_string()),
            clap_message(&e)
        ))
    })?;
    if args.alias.is_none() {
        return Err(Failure::usage(format!(
            "warden gateway needs an alias: --alias NAME, or alias: NAME in {}",
            super::log::printable(&path.display().to_string())
        )));
    }
    Ok(Some(Merged { args, store, config }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_flag_of_the_gateway_is_a_key_and_switches_and_lists_take_their_kind() {
        let command = command();
        let keys = allowed_keys(&command);
        for key in [
            "upstream",
            "alias",
            "listen",
            "allow_remote",
            "admin",
            "allow_origin",
            "upstream_timeout",
            "log_arguments",
            "identity_jwt_algorithms",
            "pins",
            "stdio",
            "command",
            "config",
            "store",
        ] {
            assert!(keys.split(", ").any(|k| k == key), "{key}: {keys}");
        }
        assert!(!keys.split(", ").any(|k| k == "settings" || k == "help"), "{keys}");
        let path = Path::new("g.yaml");
        let arg = |id: &str| command.get_arguments().find(|a| a.get_id() == id).expect(id).clone();
        let setting = |key: &str, value: Value| Setting { key: key.into(), line: 3, value };
        // A key, its value, and the words it becomes or the refusal.
        type Case = (&'static str, Value, Result<Vec<&'static str>, &'static str>);
        let table: [Case; 9] = [
            ("allow_remote", Value::Bool(true), Ok(vec!["--allow-remote"])),
            ("allow_remote", Value::Bool(false), Ok(vec![])),
            ("allow_remote", Value::String("true".into()), Err("g.yaml:3: allow_remote: a switch is true or false, got a string")),
            ("upstream_timeout", serde_json::json!(5), Ok(vec!["--upstream-timeout=5"])),
            ("listen", serde_json::json!("-x"), Ok(vec!["--listen=-x"])),
            ("listen", serde_json::json!(["a"]), Err("g.yaml:3: listen: it takes one string or number, got a list")),
            ("allow_origin", serde_json::json!(["https://a", "https://b"]), Ok(vec!["--allow-origin=https://a", "--allow-origin=https://b"])),
            ("allow_origin", serde_json::json!("https://a"), Ok(vec!["--allow-origin=https://a"])),
            ("allow_origin", serde_json::json!([{"a": 1}]), Err("g.yaml:3: allow_origin: a repeatable flag takes a string or a number, or a list of them, got a list")),
        ];
        for (key, value, expected) in table {
            let found = words(path, &setting(key, value.clone()), &arg(key));
            match expected {
                Ok(expected) => {
                    let expected: Vec<OsString> = expected.into_iter().map(OsString::from).collect();
                    assert_eq!(found.ok(), Some(expected), "{key} {value}");
                }
                Err(message) => assert_eq!(found.err().map(|f| f.message), Some(message.to_owned()), "{key} {value}"),
            }
        }
    }
}
