//! Grant patterns (SPEC v0.3 §4.4): segments, a trailing `*`, a final `**`, and the separate
//! `contains` relation delegation containment rests on.
//!
//! A pattern is a non-empty sequence of segments joined by its kind's separator (`.` for action
//! names, `:` for resources and tasks; a subject pattern is one segment with no separator). A
//! segment is a literal, or a literal followed by one `*` that matches any continuation of that
//! segment and never crosses a separator. A final `**` matches one or more further segments, and
//! every segment before it must be a literal. Matching is case-sensitive and nothing is
//! normalised. There is no `?`, no character class, no leading or infix `*`.

/// What a pattern addresses; it decides the separator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatternKind {
    /// `subject.agent` / `subject.user`: one segment, so no `**`.
    Subject,
    /// Action names: dotted, `stripe.refund`.
    Action,
    /// Resources: `type:id`.
    Resource,
    /// Tasks: colon-separated like resources, so `run-*` does not reach `run-7:step-2`.
    Task,
}

impl PatternKind {
    /// The character that separates segments, if the kind has segments.
    pub fn separator(self) -> Option<char> {
        match self {
            PatternKind::Subject => None,
            PatternKind::Action => Some('.'),
            PatternKind::Resource | PatternKind::Task => Some(':'),
        }
    }
}

/// The only spelling of "one or more segments".
pub const DEEP_WILDCARD: &str = "**";

fn segments(text: &str, kind: PatternKind) -> Vec<&str> {
    match kind.separator() {
        None => vec![text],
        Some(separator) => text.split(separator).collect(),
    }
}

/// Refuse anything outside the grammar. The message names the pattern and what to write.
pub fn validate_pattern(pattern: &str, kind: PatternKind) -> Result<(), String> {
    if pattern.is_empty() {
        return Err("a pattern must be a non-empty string".to_owned());
    }
    let shown = shorten(pattern);
    let parts = segments(pattern, kind);
    let last = parts.len() - 1;
    for (index, segment) in parts.iter().enumerate() {
        if segment.is_empty() {
            let separator = kind.separator().map(String::from).unwrap_or_default();
            return Err(format!(
                "'{shown}' has an empty segment; a pattern is non-empty segments joined by '{separator}'"
            ));
        }
        if segment.contains(['?', '[', ']']) {
            return Err(format!(
                "'{shown}' is not a pattern: there is no '?' and there are no character classes; a \
                 segment is a literal, a literal with one trailing '*', or a final '**'"
            ));
        }
        if *segment == DEEP_WILDCARD {
            if kind.separator().is_none() {
                return Err(format!(
                    "'{shown}' may not use '**': a subject has no separator, so '**' says nothing '*' \
                     does not; write '*'"
                ));
            }
            if index != last {
                return Err(format!("'{shown}' may use '**' only as its last segment"));
            }
            if parts[..index].iter().any(|earlier| earlier.contains('*')) {
                return Err(format!(
                    "'{shown}' puts a wildcard before '**'; every segment before a deep wildcard must \
                     be a literal"
                ));
            }
            continue;
        }
        let stars = segment.matches('*').count();
        if stars > 1 || (stars == 1 && !segment.ends_with('*')) {
            return Err(format!(
                "'{shown}' has the segment '{}', which is neither a literal nor a literal with one \
                 trailing '*' (no leading or infix '*', and '**' is a whole segment)",
                shorten(segment)
            ));
        }
    }
    Ok(())
}

/// Does `value` match the (valid) `pattern`? Segment-wise, case-sensitive.
pub fn matches(pattern: &str, value: &str, kind: PatternKind) -> bool {
    let parts = segments(pattern, kind);
    let actual = segments(value, kind);
    if let Some((&DEEP_WILDCARD, prefix)) = parts.split_last() {
        return actual.len() > prefix.len() && actual[..prefix.len()] == *prefix;
    }
    parts.len() == actual.len() && parts.iter().zip(&actual).all(|(part, item)| segment_matches(part, item))
}

fn segment_matches(pattern: &str, value: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => value.starts_with(prefix),
        None => pattern == value,
    }
}

/// Is every value matching `child` also matched by `parent`? Both must be valid patterns.
///
/// Not `matches` over patterns: `a.**` does not contain `a` (a `**` needs at least one more
/// segment), and `**` counts as one segment on the child side, which is what makes every valid
/// pattern contain itself.
pub fn contains(parent: &str, child: &str, kind: PatternKind) -> bool {
    let outer = segments(parent, kind);
    let inner = segments(child, kind);
    if outer == [DEEP_WILDCARD] {
        return true;
    }
    if let Some((&DEEP_WILDCARD, prefix)) = outer.split_last() {
        return inner.len() > prefix.len() && inner[..prefix.len()] == *prefix;
    }
    if inner.last() == Some(&DEEP_WILDCARD) || inner.len() != outer.len() {
        return false;
    }
    outer.iter().zip(&inner).all(|(out, item)| segment_contains(out, item))
}

fn segment_contains(parent: &str, child: &str) -> bool {
    match parent.strip_suffix('*') {
        // A literal contains only the same literal; a prefix wildcard is never inside one.
        None => !child.ends_with('*') && parent == child,
        Some(prefix) => child.strip_suffix('*').unwrap_or(child).starts_with(prefix),
    }
}

/// Every `child` pattern is contained in some `parent` pattern.
pub fn all_contained(parent: &[String], child: &[String], kind: PatternKind) -> bool {
    child.iter().all(|inner| parent.iter().any(|outer| contains(outer, inner, kind)))
}

pub(crate) fn shorten(text: &str) -> String {
    const LIMIT: usize = 60;
    if text.chars().count() <= LIMIT {
        text.to_owned()
    } else {
        let mut short: String = text.chars().take(LIMIT).collect();
        short.push('…');
        short
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use PatternKind::{Action, Resource, Subject, Task};

    #[test]
    fn the_grammar_accepts_literals_trailing_stars_and_a_final_deep_wildcard() {
        for (pattern, kind) in [
            ("stripe.refund", Action),
            ("stripe.*", Action),
            ("stripe.re*", Action),
            ("*", Action),
            ("**", Action),
            ("stripe.**", Action),
            ("customer:*", Resource),
            ("customer:acme:**", Resource),
            ("run-*", Task),
            ("support-*", Subject),
            ("alice", Subject),
            ("a.b:c", Subject),
        ] {
            assert_eq!(validate_pattern(pattern, kind), Ok(()), "{pattern}");
        }
    }

    #[test]
    fn the_grammar_refuses_everything_else_with_a_reason() {
        for (pattern, kind) in [
            ("", Action),
            ("stripe..refund", Action),
            ("stripe.", Action),
            (".stripe", Action),
            ("*.refund.**.x", Action),
            ("**.refund", Action),
            ("stripe.*.**", Action),
            ("st*ripe", Action),
            ("*stripe", Action),
            ("stripe**", Action),
            ("a**.b", Action),
            ("stripe.re?und", Action),
            ("stripe.[rR]efund", Action),
            ("**", Subject),
            ("a*b", Subject),
            ("customer::x", Resource),
            ("run-**", Task),
        ] {
            assert!(validate_pattern(pattern, kind).is_err(), "{pattern:?} must be refused");
        }
    }

    #[test]
    fn matching_is_segment_wise_and_case_sensitive() {
        let table = [
            ("stripe.refund", "stripe.refund", true),
            ("stripe.refund", "Stripe.refund", false),
            ("stripe.*", "stripe.refund", true),
            ("stripe.*", "stripe.refund.partial", false),
            ("stripe.re*", "stripe.refund", true),
            ("stripe.re*", "stripe.re", true),
            ("stripe.re*", "stripe.charge", false),
            ("stripe.**", "stripe.refund", true),
            ("stripe.**", "stripe.refund.partial", true),
            ("stripe.**", "stripe", false),
            ("**", "anything.at.all", true),
            ("*", "one", true),
            ("*", "one.two", false),
        ];
        for (pattern, value, expected) in table {
            assert_eq!(matches(pattern, value, Action), expected, "{pattern} vs {value}");
        }
        assert!(matches("customer:*", "customer:acme", Resource));
        assert!(!matches("customer:*", "customer:acme:eu", Resource));
        assert!(matches("support-*", "support-7", Subject));
        assert!(matches("support-*", "support-7.eu:x", Subject));
        assert!(!matches("run-*", "run-7:step-2", Task));
    }

    #[test]
    fn contains_is_its_own_relation() {
        let table = [
            ("**", "stripe.refund", true),
            ("**", "**", true),
            ("stripe.**", "stripe.**", true),
            ("stripe.**", "stripe.refund", true),
            ("stripe.**", "stripe", false),
            ("stripe.**", "stripe.*", true),
            ("stripe.*", "stripe.**", false),
            ("stripe.*", "stripe.refund", true),
            ("stripe.*", "stripe.re*", true),
            ("stripe.re*", "stripe.*", false),
            ("stripe.re*", "stripe.refund*", true),
            ("stripe.refund", "stripe.refund", true),
            ("stripe.refund", "stripe.refund*", false),
            ("stripe.refund", "stripe.*", false),
            ("stripe.*", "stripe.refund.partial", false),
            ("a.b", "a.b.c", false),
        ];
        for (parent, child, expected) in table {
            assert_eq!(contains(parent, child, Action), expected, "{parent} ⊇ {child}");
        }
    }

    #[test]
    fn a_deep_wildcard_needs_its_literal_prefix_as_well_as_one_more_segment() {
        assert!(!matches("stripe.**", "mail.send", Action));
        assert!(!matches("stripe.refund.**", "stripe.charge.partial", Action));
        assert!(matches("stripe.refund.**", "stripe.refund.partial", Action));
        assert!(!contains("stripe.**", "mail.send", Action));
        assert!(!contains("stripe.refund.**", "stripe.charge.*", Action));
        assert!(contains("stripe.refund.**", "stripe.refund.*", Action));
    }

    #[test]
    fn a_literal_segment_contains_only_the_same_literal() {
        assert!(!contains("stripe.refund", "stripe.charge", Action));
        assert!(!contains("customer:acme", "customer:globex", Resource));
        assert!(contains("customer:acme", "customer:acme", Resource));
        assert!(contains("run-*", "run-7", Task));
        assert!(!contains("run-*", "walk-7", Task));
    }

    #[test]
    fn a_pattern_is_shown_whole_up_to_sixty_characters_and_cut_one_past() {
        let sixty = "a".repeat(60);
        assert_eq!(shorten(&sixty), sixty);
        let sixty_one = "b".repeat(61);
        assert_eq!(shorten(&sixty_one), format!("{}…", "b".repeat(60)));
        let message = validate_pattern("stripe.re?und", Action).unwrap_err();
        assert!(message.contains("'stripe.re?und'"), "{message}");
        let long = format!("{}.x*y", "s".repeat(70));
        let message = validate_pattern(&long, Action).unwrap_err();
        assert!(message.contains(&format!("'{}…'", "s".repeat(60))), "{message}");
    }
}
