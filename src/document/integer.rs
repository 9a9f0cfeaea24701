//! Integer text the way Python prints its unbounded `int`, within Python's digit limit.

use super::quote::shorten;

/// Python refuses to print an `int` longer than this (`sys.int_info.str_digits_check_threshold`),
/// so ctrlrun cannot hash one; neither does Warden.
const MAX_INT_DIGITS: usize = 4300;

pub(super) fn split_sign(text: &str) -> (bool, &str) {
    if let Some(rest) = text.strip_prefix('-') {
        (true, rest)
    } else {
        (false, text.strip_prefix('+').unwrap_or(text))
    }
}

pub(super) fn signed(negative: bool, magnitude: String) -> String {
    if negative && magnitude != "0" {
        format!("-{magnitude}")
    } else {
        magnitude
    }
}

fn too_long_integer() -> String {
    format!("integers are limited to {MAX_INT_DIGITS} decimal digits")
}

/// Decimal digits without leading zeros (Python's `int(body)`).
pub(super) fn decimal(body: &str) -> Result<String, String> {
    if body.is_empty() || !body.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("'{}' is not a valid integer", shorten(body)));
    }
    if body.len() > MAX_INT_DIGITS {
        return Err(too_long_integer());
    }
    let trimmed = body.trim_start_matches('0');
    Ok(if trimmed.is_empty() { "0".to_owned() } else { trimmed.to_owned() })
}

/// Little-endian base-10⁹ limbs: just enough arithmetic to print Python's integers.
struct Big(Vec<u32>);

const LIMB: u64 = 1_000_000_000;

impl Big {
    fn zero() -> Big {
        Big(Vec::new())
    }

    fn mul_add(&mut self, factor: u32, addend: u32) {
        let mut carry = u64::from(addend);
        for limb in &mut self.0 {
            let value = u64::from(*limb) * u64::from(factor) + carry;
            *limb = (value % LIMB) as u32;
            carry = value / LIMB;
        }
        while carry > 0 {
            self.0.push((carry % LIMB) as u32);
            carry /= LIMB;
        }
    }

    fn decimal_digits_at_least(&self) -> usize {
        self.0.len().saturating_sub(1) * 9
    }

    fn to_decimal(&self) -> String {
        let mut limbs = self.0.iter().rev();
        let Some(top) = limbs.next() else { return "0".to_owned() };
        let mut out = top.to_string();
        for limb in limbs {
            out.push_str(&format!("{limb:09}"));
        }
        out
    }
}

/// `None` for an empty digit string (Python's `int("", base)` raises); `Some(Err)` if too large.
pub(super) fn radix_to_decimal(digits: &str, radix: u32) -> Option<Result<String, String>> {
    if digits.is_empty() {
        return None;
    }
    let significant = digits.trim_start_matches('0');
    // log10(radix) ≤ 1.21; refuse before doing quadratic work on a huge literal.
    let bound = (significant.len() as f64) * f64::from(radix).log10();
    if bound > (MAX_INT_DIGITS + 2) as f64 {
        return Some(Err(too_long_integer()));
    }
    let mut big = Big::zero();
    for c in significant.chars() {
        let digit = c.to_digit(radix)?;
        big.mul_add(radix, digit);
    }
    let text = big.to_decimal();
    if text.len() > MAX_INT_DIGITS {
        return Some(Err(too_long_integer()));
    }
    Some(Ok(text))
}

/// PyYAML's base-60 integers (`1:30` is 90).
pub(super) fn sexagesimal_to_decimal(body: &str) -> Option<Result<String, String>> {
    let mut parts = body.split(':');
    let first = parts.next()?;
    let first = match decimal(first) {
        Ok(text) => text,
        Err(e) => return Some(Err(e)),
    };
    let mut big = Big::zero();
    for c in first.chars() {
        big.mul_add(10, c.to_digit(10)?);
    }
    for part in parts {
        let digit: u32 = part.parse().ok()?;
        big.mul_add(60, digit);
        if big.decimal_digits_at_least() > MAX_INT_DIGITS {
            return Some(Err(too_long_integer()));
        }
    }
    let text = big.to_decimal();
    if text.len() > MAX_INT_DIGITS {
        return Some(Err(too_long_integer()));
    }
    Some(Ok(text))
}
