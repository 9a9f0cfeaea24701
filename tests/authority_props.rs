//! Properties of the pattern grammar: parsing never panics, every valid pattern contains
//! itself, containment is transitive, and containment is sound — whatever a contained child
//! matches, its parent matches too.

use proptest::prelude::*;
use warden::authority::{contains, matches, validate_pattern, PatternKind};

const KINDS: [PatternKind; 4] = [PatternKind::Subject, PatternKind::Action, PatternKind::Resource, PatternKind::Task];

fn kind() -> impl Strategy<Value = PatternKind> {
    prop::sample::select(KINDS.to_vec())
}

/// Strings over a small alphabet that includes every separator and wildcard, so valid and
/// invalid patterns and overlapping values all come up often.
fn text() -> &'static str {
    "[ab*.:?]{0,8}"
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4000, ..ProptestConfig::default() })]

    #[test]
    fn parsing_arbitrary_text_never_panics(pattern in any::<String>(), k in kind()) {
        let _ = validate_pattern(&pattern, k);
    }

    #[test]
    fn every_valid_pattern_contains_itself(pattern in text(), k in kind()) {
        if validate_pattern(&pattern, k).is_ok() {
            prop_assert!(contains(&pattern, &pattern, k), "{pattern}");
        }
    }

    #[test]
    fn a_contained_child_never_matches_what_its_parent_does_not(parent in text(), child in text(), value in text(), k in kind()) {
        if validate_pattern(&parent, k).is_ok() && validate_pattern(&child, k).is_ok() && contains(&parent, &child, k) && matches(&child, &value, k) {
            prop_assert!(matches(&parent, &value, k), "{parent} ⊇ {child} but {value} escapes");
        }
    }

    #[test]
    fn containment_is_transitive(a in text(), b in text(), c in text(), k in kind()) {
        let valid = |p: &str| validate_pattern(p, k).is_ok();
        if valid(&a) && valid(&b) && valid(&c) && contains(&a, &b, k) && contains(&b, &c, k) {
            prop_assert!(contains(&a, &c, k), "{a} ⊇ {b} ⊇ {c}");
        }
    }

    #[test]
    fn a_literal_matches_exactly_itself(value in "[ab.:]{1,8}", other in "[ab.:]{1,8}", k in kind()) {
        if validate_pattern(&value, k).is_ok() {
            prop_assert!(matches(&value, &value, k));
            prop_assert_eq!(matches(&value, &other, k), value == other);
        }
    }
}
