//! Numbers as text: decimal mantissa and scale parsed, rescaled (rounding half away from zero)
//! and formatted, and the shortest exact text of a float.

use super::digits::push_ascii;

/// Parses `-123.4500`, `1e3`, `.5`; returns the mantissa and scale as written.
pub fn parse_decimal(s: &str) -> Option<(i128, u8)> {
    if let Some(plain) = parse_plain_decimal(s.as_bytes()) {
        return Some(plain);
    }
    let s = s.trim();
    if s.contains(['e', 'E']) {
        let f: f64 = s.parse().ok()?;
        return decimal_from_f64(f, 15);
    }
    let (neg, digits) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    if !int.bytes().all(|b| b.is_ascii_digit()) || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let frac = if frac.len() > 38 { &frac[..38] } else { frac };
    let m: i128 = if int.len() + frac.len() <= 18 {
        // Fits in a u64 (the common case when reading stored decimals): no i128 arithmetic.
        let mut x: u64 = 0;
        for b in int.bytes().chain(frac.bytes()) {
            x = x * 10 + u64::from(b - b'0');
        }
        i128::from(x)
    } else {
        let mut m: i128 = 0;
        for b in int.bytes().chain(frac.bytes()) {
            m = m.checked_mul(10)?.checked_add(i128::from(b - b'0'))?;
        }
        m
    };
    Some((if neg { -m } else { m }, frac.len() as u8))
}

/// `parse_decimal` of the form decimals are stored in, `[-]digits[.digits]` with at most 18
/// digits, in one pass (every streamed decimal cell comes here); `None` for anything else, which
/// the general parser then reads.
pub(super) fn parse_plain_decimal(b: &[u8]) -> Option<(i128, u8)> {
    let (neg, digits) = match b.split_first()? {
        (b'-', rest) => (true, rest),
        _ => (false, b),
    };
    if digits.len() > 19 {
        return None;
    }
    let mut x: u64 = 0;
    let mut dot = None;
    for (i, &c) in digits.iter().enumerate() {
        match c {
            b'0'..=b'9' => x = x * 10 + u64::from(c - b'0'),
            b'.' if dot.is_none() => dot = Some(i),
            _ => return None,
        }
    }
    let n_digits = digits.len() - usize::from(dot.is_some());
    if n_digits == 0 || n_digits > 18 {
        return None;
    }
    let scale = dot.map_or(0, |i| digits.len() - i - 1) as u8;
    let m = i128::from(x);
    Some((if neg { -m } else { m }, scale))
}

pub fn decimal_from_f64(f: f64, max_scale: u8) -> Option<(i128, u8)> {
    if !f.is_finite() {
        return None;
    }
    let text = format!("{:.*}", usize::from(max_scale), f);
    let (m, s) = parse_decimal(&text)?;
    Some(normalize_scale(m, s))
}

/// Drops trailing fractional zeros.
fn normalize_scale(mut m: i128, mut s: u8) -> (i128, u8) {
    while s > 0 && m % 10 == 0 {
        m /= 10;
        s -= 1;
    }
    (m, s)
}

/// Changes the scale, rounding half away from zero as SQL Server does.
pub fn rescale(m: i128, from: u8, to: u8) -> Option<i128> {
    if to >= from {
        m.checked_mul(10i128.checked_pow(u32::from(to - from))?)
    } else {
        let div = 10i128.checked_pow(u32::from(from - to))?;
        let q = m / div;
        let r = m % div;
        Some(if r.abs() * 2 >= div { q + m.signum() } else { q })
    }
}

pub fn format_decimal(m: i128, scale: u8) -> String {
    let mut out = String::with_capacity(24);
    push_decimal(&mut out, m, scale);
    out
}

/// Appends the decimal text of `m` at `scale`.
pub(super) fn push_decimal(out: &mut String, m: i128, scale: u8) {
    // Written right to left into a stack buffer: no formatting machinery (this runs for every
    // decimal a bulk load stores).
    let mut buf = [0u8; 80];
    let mut pos = buf.len();
    let abs = m.unsigned_abs();
    let scale = usize::from(scale);
    let mut written = 0;
    let mut digit = |pos: &mut usize, d: u8, written: &mut usize| {
        if *written == scale && scale > 0 {
            *pos -= 1;
            buf[*pos] = b'.';
        }
        *pos -= 1;
        buf[*pos] = b'0' + d;
        *written += 1;
    };
    // u128 division is a library call; most values fit in a u64.
    match u64::try_from(abs) {
        Ok(mut n) => {
            while n > 0 || written <= scale {
                digit(&mut pos, (n % 10) as u8, &mut written);
                n /= 10;
            }
        }
        Err(_) => {
            let mut n = abs;
            while n > 0 || written <= scale {
                digit(&mut pos, (n % 10) as u8, &mut written);
                n /= 10;
            }
        }
    }
    if m < 0 {
        pos -= 1;
        buf[pos] = b'-';
    }
    push_ascii(out, &buf[pos..]);
}

pub(super) fn digits_of(m: i128) -> u32 {
    // Compares against powers of ten: no (slow) i128 division.
    let n = m.unsigned_abs();
    let mut d = 1;
    let mut p: u128 = 10;
    while d < 39 && n >= p {
        d += 1;
        p = p.saturating_mul(10);
    }
    d
}

/// SQL Server's default float to string conversion is lossy; we keep the shortest exact form.
pub fn format_float(f: f64) -> String {
    if f.fract() == 0.0 && f.abs() < 1e15 {
        format!("{}", f as i64)
    } else {
        format!("{f}")
    }
}
