//! Scalar resolution: YAML 1.1 as PyYAML reads it, YAML 1.2 core, and Warden's refusal of the gap.

use std::sync::LazyLock;

use regex::Regex;

use super::integer::{decimal, radix_to_decimal, sexagesimal_to_decimal, signed, split_sign};
use super::quote::shorten;

/// A resolved plain scalar.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Scalar {
    Null,
    Bool(bool),
    /// Canonical decimal text, as Python prints the `int`.
    Int(String),
    Float(f64),
    /// PyYAML's implicit timestamp (a `date` or `datetime` in Python).
    Timestamp,
    Str,
}

struct Patterns {
    bool11: Regex,
    float11: Regex,
    int11: Regex,
    null: Regex,
    timestamp11: Regex,
    int12: Regex,
    float12: Regex,
    leading_zero: Regex,
}

static PATTERNS: LazyLock<Result<Patterns, String>> = LazyLock::new(|| {
    let compile = |pattern: &str| Regex::new(pattern).map_err(|e| e.to_string());
    Ok(Patterns {
        // PyYAML's resolver.py, verbatim but for the verbose-mode whitespace.
        bool11: compile(r"^(?:yes|Yes|YES|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF)$")?,
        float11: compile(
            r"^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$",
        )?,
        int11: compile(
            r"^(?:[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+|[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+)$",
        )?,
        null: compile(r"^(?:~|null|Null|NULL|)$")?,
        timestamp11: compile(
            r"^(?:[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]|[0-9][0-9][0-9][0-9]-[0-9][0-9]?-[0-9][0-9]?(?:[Tt]|[ \t]+)[0-9][0-9]?:[0-9][0-9]:[0-9][0-9](?:\.[0-9]*)?(?:[ \t]*(?:Z|[-+][0-9][0-9]?(?::[0-9][0-9])?))?)$",
        )?,
        // YAML 1.2.2 §10.3.2, the core schema.
        int12: compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$")?,
        float12: compile(
            r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$",
        )?,
        leading_zero: compile(r"^[-+]?0[0-9_]+$")?,
    })
});

fn patterns() -> Result<&'static Patterns, String> {
    PATTERNS.as_ref().map_err(|e| format!("internal error: a scalar pattern failed to compile: {e}"))
}

pub(super) fn is_null_text(text: &str) -> bool {
    matches!(text, "" | "~" | "null" | "Null" | "NULL")
}

/// A plain scalar as PyYAML's `SafeLoader` resolves and constructs it. `Err` where PyYAML (and
/// so ctrlrun) refuses the document.
pub(super) fn yaml11(text: &str) -> Result<Scalar, String> {
    let p = patterns()?;
    if p.bool11.is_match(text) {
        return Ok(Scalar::Bool(matches!(text.to_ascii_lowercase().as_str(), "yes" | "true" | "on")));
    }
    if p.float11.is_match(text) {
        return Ok(Scalar::Float(float11(text)?));
    }
    if p.int11.is_match(text) {
        return int11(text).map(Scalar::Int);
    }
    if text == "<<" {
        return Err("YAML merge keys ('<<') are not supported; write the keys out".into());
    }
    if p.null.is_match(text) {
        return Ok(Scalar::Null);
    }
    if p.timestamp11.is_match(text) {
        return Ok(Scalar::Timestamp);
    }
    if text == "=" {
        return Err("a plain '=' is YAML 1.1's value key, which no loader constructs; quote it".into());
    }
    Ok(Scalar::Str)
}

/// PyYAML's `construct_yaml_int`, with Python's unbounded integers.
fn int11(text: &str) -> Result<String, String> {
    let cleaned: String = text.chars().filter(|c| *c != '_').collect();
    let (negative, body) = split_sign(&cleaned);
    let invalid = || format!("'{}' is not a valid integer", shorten(text));
    let magnitude = if body == "0" {
        "0".to_owned()
    } else if let Some(digits) = body.strip_prefix("0b") {
        radix_to_decimal(digits, 2).ok_or_else(invalid)??
    } else if let Some(digits) = body.strip_prefix("0x") {
        radix_to_decimal(digits, 16).ok_or_else(invalid)??
    } else if body.starts_with('0') {
        radix_to_decimal(body, 8).ok_or_else(invalid)??
    } else if body.contains(':') {
        sexagesimal_to_decimal(body).ok_or_else(invalid)??
    } else {
        decimal(body)?
    };
    Ok(signed(negative, magnitude))
}

/// PyYAML's `construct_yaml_float`.
fn float11(text: &str) -> Result<f64, String> {
    let cleaned = text.replace('_', "").to_ascii_lowercase();
    let (negative, body) = split_sign(&cleaned);
    let sign = if negative { -1.0 } else { 1.0 };
    let invalid = || format!("'{}' is not a valid float", shorten(text));
    if body == ".inf" {
        return Ok(sign * f64::INFINITY);
    }
    if body == ".nan" {
        return Ok(f64::NAN);
    }
    if body.contains(':') {
        let mut value = 0.0;
        let mut base = 1.0;
        for part in body.split(':').rev() {
            let digit: f64 = part.parse().map_err(|_| invalid())?;
            value += digit * base;
            base *= 60.0;
        }
        return Ok(sign * value);
    }
    body.parse::<f64>().map(|v| sign * v).map_err(|_| invalid())
}

/// A plain scalar under the YAML 1.2 core schema.
fn yaml12(text: &str) -> Result<Scalar, String> {
    let p = patterns()?;
    if is_null_text(text) {
        return Ok(Scalar::Null);
    }
    match text {
        "true" | "True" | "TRUE" => return Ok(Scalar::Bool(true)),
        "false" | "False" | "FALSE" => return Ok(Scalar::Bool(false)),
        _ => {}
    }
    if p.int12.is_match(text) {
        let magnitude = if let Some(digits) = text.strip_prefix("0o") {
            radix_to_decimal(digits, 8).unwrap_or_else(|| Err(format!("'{}' is not a valid integer", shorten(text))))?
        } else if let Some(digits) = text.strip_prefix("0x") {
            radix_to_decimal(digits, 16)
                .unwrap_or_else(|| Err(format!("'{}' is not a valid integer", shorten(text))))?
        } else {
            let (negative, body) = split_sign(text);
            return Ok(Scalar::Int(signed(negative, decimal(body)?)));
        };
        return Ok(Scalar::Int(magnitude));
    }
    if p.float12.is_match(text) {
        let lower = text.to_ascii_lowercase();
        let (negative, body) = split_sign(&lower);
        let sign = if negative { -1.0 } else { 1.0 };
        let value = match body {
            ".inf" => f64::INFINITY,
            ".nan" => f64::NAN,
            _ => body.parse::<f64>().map_err(|_| format!("'{}' is not a valid float", shorten(text)))?,
        };
        return Ok(Scalar::Float(sign * value));
    }
    Ok(Scalar::Str)
}

fn same_scalar(a: &Scalar, b: &Scalar) -> bool {
    match (a, b) {
        (Scalar::Float(x), Scalar::Float(y)) => x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()),
        _ => a == b,
    }
}

fn describe_scalar(scalar: &Scalar, text: &str) -> String {
    match scalar {
        Scalar::Null => "null".into(),
        Scalar::Bool(b) => format!("the boolean {b}"),
        Scalar::Int(i) => format!("the integer {}", shorten(i)),
        Scalar::Float(f) => format!("the float {f}"),
        Scalar::Timestamp => "a timestamp".into(),
        Scalar::Str => format!("the string \"{}\"", shorten(text)),
    }
}

/// A plain scalar in a `warden/v1` document: YAML 1.2's reading, refused wherever YAML 1.1 would
/// read it differently, or wherever it merely looks like it might.
pub(super) fn warden_scalar(text: &str) -> Result<Scalar, String> {
    let shown = shorten(text);
    let refuse = |why: String| {
        format!(
            "the unquoted value `{shown}` {why}; warden/v1 refuses values whose meaning depends on \
             the YAML version. Quote it (\"{shown}\") if you mean the text, or write it unambiguously"
        )
    };
    let lower = text.to_ascii_lowercase();
    if matches!(lower.as_str(), "yes" | "no" | "on" | "off" | "y" | "n") {
        return Err(refuse(
            "is a boolean to YAML 1.1 readers and a string to YAML 1.2 readers (write true or false for a boolean)"
                .into(),
        ));
    }
    if patterns()?.leading_zero.is_match(text) {
        return Err(refuse("has a leading zero, which YAML 1.1 reads as octal and YAML 1.2 as decimal".into()));
    }
    let modern = yaml12(text)?;
    match yaml11(text) {
        Ok(old) if same_scalar(&old, &modern) => Ok(modern),
        Ok(old) => Err(refuse(format!(
            "means {} in YAML 1.1 but {} in YAML 1.2",
            describe_scalar(&old, text),
            describe_scalar(&modern, text)
        ))),
        Err(why) => Err(refuse(format!(
            "is refused by YAML 1.1 readers ({why}) but means {} in YAML 1.2",
            describe_scalar(&modern, text)
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_1_1_reads_integers_the_way_pyyaml_does() {
        let int = |text: &str| match yaml11(text) {
            Ok(Scalar::Int(i)) => i,
            other => panic!("{text}: {other:?}"),
        };
        assert_eq!(int("017"), "15");
        assert_eq!(int("1_000"), "1000");
        assert_eq!(int("0x1F"), "31");
        assert_eq!(int("-0x1F"), "-31");
        assert_eq!(int("0b101"), "5");
        assert_eq!(int("1:30"), "90");
        assert_eq!(int("-1:00:00"), "-3600");
        assert_eq!(int("+5"), "5");
        assert_eq!(int("-0"), "0");
        assert_eq!(int("0_"), "0");
        assert_eq!(int("99999999999999999999999"), "99999999999999999999999");
        assert_eq!(int("0xFFFFFFFFFFFFFFFFFFFF"), "1208925819614629174706175");
        assert_eq!(yaml11("08"), Ok(Scalar::Str));
        assert_eq!(yaml11("0o17"), Ok(Scalar::Str));
        assert!(yaml11("0b_").is_err());
        assert_eq!(yaml11("yes"), Ok(Scalar::Bool(true)));
        assert_eq!(yaml11("OFF"), Ok(Scalar::Bool(false)));
        assert_eq!(yaml11("y"), Ok(Scalar::Str));
        assert_eq!(yaml11("1e3"), Ok(Scalar::Str));
        assert_eq!(yaml11("1.0e+3"), Ok(Scalar::Float(1000.0)));
        assert_eq!(yaml11("2026-11-01"), Ok(Scalar::Timestamp));
        assert_eq!(yaml11("~"), Ok(Scalar::Null));
        assert_eq!(yaml11(""), Ok(Scalar::Null));
        assert!(yaml11("<<").is_err());
        assert!(yaml11("=").is_err());
    }

    #[test]
    fn warden_scalars_are_refused_where_yaml_versions_disagree() {
        for ambiguous in [
            "yes",
            "No",
            "ON",
            "off",
            "y",
            "N",
            "017",
            "00",
            "08",
            "0o17",
            "1_000",
            "1:30",
            "0b1",
            "-0x1F",
            "1e3",
            "+.5",
            "2026-11-01",
            "<<",
            "=",
        ] {
            assert!(warden_scalar(ambiguous).is_err(), "{ambiguous} must be refused");
        }
        assert_eq!(warden_scalar("0x1F"), Ok(Scalar::Int("31".into())));
        assert_eq!(warden_scalar("17"), Ok(Scalar::Int("17".into())));
        assert_eq!(warden_scalar("-5"), Ok(Scalar::Int("-5".into())));
        assert_eq!(warden_scalar("0"), Ok(Scalar::Int("0".into())));
        assert_eq!(warden_scalar("true"), Ok(Scalar::Bool(true)));
        assert_eq!(warden_scalar("1.5"), Ok(Scalar::Float(1.5)));
        assert_eq!(warden_scalar("null"), Ok(Scalar::Null));
        assert_eq!(warden_scalar("hello"), Ok(Scalar::Str));
    }

    #[test]
    fn huge_radix_literals_are_refused_before_any_quadratic_work() {
        let huge = format!("0x{}", "F".repeat(100_000));
        assert!(yaml11(&huge).is_err());
        let many = format!("1{}", ":59".repeat(10_000));
        assert!(yaml11(&many).is_err());
    }
}
