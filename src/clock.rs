//! Time as integer microseconds since the Unix epoch, UTC, from an injectable clock.
//!
//! Leases and expiries are decided against a `Clock`, never against the wall directly, so every
//! test that crosses an expiry moves a `ManualClock` instead of sleeping.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// Microseconds since 1970-01-01T00:00:00Z.
pub type Micros = i64;

/// Microseconds in one second.
pub const MICROS_PER_SECOND: Micros = 1_000_000;

/// Where "now" comes from. Shared by every handle that opens a kernel.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// The current instant.
    fn now(&self) -> Micros;

    /// Whether this is the operating system's clock, which every process reads for itself
    /// (so another process applying an operation can read it inside the transaction).
    fn is_system(&self) -> bool {
        false
    }
}

/// The operating system's wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn is_system(&self) -> bool {
        true
    }

    fn now(&self) -> Micros {
        match SystemTime::now().duration_since(UNIX_EPOCH) {
            Ok(elapsed) => Micros::try_from(elapsed.as_micros()).unwrap_or(Micros::MAX),
            // A wall clock before 1970 is a broken host; report the epoch rather than panic.
            Err(_) => 0,
        }
    }
}

/// A clock that only moves when told to. Cloning shares the same instant.
#[derive(Debug, Clone, Default)]
pub struct ManualClock {
    now: Arc<AtomicI64>,
}

impl ManualClock {
    /// A clock standing at `start`.
    pub fn new(start: Micros) -> Self {
        ManualClock { now: Arc::new(AtomicI64::new(start)) }
    }

    /// Moves the clock (and every clone of it) to `to`.
    pub fn set(&self, to: Micros) {
        self.now.store(to, Ordering::SeqCst);
    }

    /// Moves the clock (and every clone of it) forward by `by`.
    pub fn advance(&self, by: Micros) {
        self.now.fetch_add(by, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Micros {
        self.now.load(Ordering::SeqCst)
    }
}

/// Read back exactly what [`render`] writes (`YYYY-MM-DDTHH:MM:SS.mmmZ`); anything else is `Err`.
/// Rendered instants compare as text in time order.
pub fn parse(text: &str) -> Result<Micros, String> {
    let moment = time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339)
        .map_err(|_| format!("{text:?} is not an RFC 3339 time"))?;
    let at = i64::try_from(moment.unix_timestamp_nanos() / 1000).map_err(|_| format!("{text:?} is out of range"))?;
    if render(at) == text {
        Ok(at)
    } else {
        Err(format!("{text:?} is not in the form YYYY-MM-DDTHH:MM:SS.mmmZ"))
    }
}

/// Render as `YYYY-MM-DDTHH:MM:SS.mmmZ`, the one timestamp form Warden prints.
pub fn render(at: Micros) -> String {
    let seconds = at.div_euclid(MICROS_PER_SECOND);
    let millis = at.rem_euclid(MICROS_PER_SECOND) / 1000;
    match time::OffsetDateTime::from_unix_timestamp(seconds) {
        Ok(moment) => format!(
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
            moment.year(),
            u8::from(moment.month()),
            moment.day(),
            moment.hour(),
            moment.minute(),
            moment.second(),
            millis
        ),
        Err(_) => format!("@{at}us"),
    }
}

/// Parse an ISO 8601 duration of the forms Warden documents use (`PT15M`, `P1D`, `PT1H30M`,
/// `PT45S`) into microseconds. Refuses anything it cannot read exactly: fractions, years and
/// months (whose length depends on the calendar), and a bare `P`/`PT`.
pub fn parse_duration(text: &str) -> Result<Micros, String> {
    let refuse = || {
        format!(
            "'{}' is not an ISO 8601 duration such as PT15M, PT1H30M or P1D (weeks, days, hours, \
             minutes and whole seconds only)",
            text.chars().take(40).collect::<String>()
        )
    };
    let rest = text.strip_prefix('P').ok_or_else(refuse)?;
    let (date, time_part) = match rest.split_once('T') {
        Some((date, clock)) => (date, Some(clock)),
        None => (rest, None),
    };
    let mut total: i128 = 0;
    let mut seen_any = false;
    for (section, units) in [
        (date, &[('W', 604_800i128), ('D', 86_400)][..]),
        (time_part.unwrap_or(""), &[('H', 3_600), ('M', 60), ('S', 1)][..]),
    ] {
        let mut digits = String::new();
        let mut next_unit = 0;
        for c in section.chars() {
            if c.is_ascii_digit() {
                digits.push(c);
                continue;
            }
            let position = units.iter().position(|(unit, _)| *unit == c).ok_or_else(refuse)?;
            if position < next_unit || digits.is_empty() || digits.len() > 12 {
                return Err(refuse());
            }
            let amount: i128 = digits.parse().map_err(|_| refuse())?;
            total += amount * units[position].1;
            digits.clear();
            next_unit = position + 1;
            seen_any = true;
        }
        if !digits.is_empty() {
            return Err(refuse());
        }
    }
    if time_part == Some("") || !seen_any {
        return Err(refuse());
    }
    let micros = total * i128::from(MICROS_PER_SECOND);
    Micros::try_from(micros).map_err(|_| refuse())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn render_uses_milliseconds_and_zulu() {
        assert_eq!(render(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(render(1_764_000_000_123_456), "2025-11-24T16:00:00.123Z");
    }

    #[test]
    fn durations_read_exactly_or_are_refused() {
        assert_eq!(parse_duration("PT15M"), Ok(900 * MICROS_PER_SECOND));
        assert_eq!(parse_duration("P1D"), Ok(86_400 * MICROS_PER_SECOND));
        assert_eq!(parse_duration("PT1H30M"), Ok(5_400 * MICROS_PER_SECOND));
        assert_eq!(parse_duration("P1DT1S"), Ok(86_401 * MICROS_PER_SECOND));
        for bad in ["", "P", "PT", "15M", "PT1.5S", "P1M", "P1Y", "PT15", "PTM", "PT1S1M", "P1DT"] {
            assert!(parse_duration(bad).is_err(), "{bad:?} must be refused");
        }
    }

    #[test]
    fn manual_clock_clones_share_one_instant() {
        let clock = ManualClock::new(5);
        let other = clock.clone();
        clock.advance(10);
        assert_eq!(other.now(), 15);
    }
}
