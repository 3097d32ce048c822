//! Values in SQLite storage form and conversions between SQL Server types.
//!
//! Storage forms (chosen so values round-trip exactly and sort correctly as text):
//! ints/bit INTEGER; float/real REAL; decimal/numeric/money TEXT with the column's fixed scale
//! (compared numerically through the `DEC` collation); date `YYYY-MM-DD`; time
//! `HH:MM:SS.fffffff`; datetime2 `YYYY-MM-DD HH:MM:SS.fffffff`; datetime `... .fff0000`;
//! smalldatetime `... HH:MM:00.0000000` (datetime and smalldatetime use datetime2's width so all
//! three compare correctly as text); datetimeoffset local time + ` +HH:MM`; GUID upper-case text;
//! strings TEXT; binaries BLOB.

pub mod clr;
pub mod month_names;
pub mod row_buffer;
pub mod row_decoder;

use crate::error::SqlError;
use crate::convert::row_buffer::RowBuffer;
use crate::types::names::{base_name, is_binary, is_string};
use crate::types::{SqlType, Value};
use rusqlite::types::{Value as Stored, ValueRef};

pub const DAYS_TO_1900: i64 = 693_595;
const T100_PER_DAY: u64 = 864_000_000_000;

/// Days since 0001-01-01 of a proleptic Gregorian date.
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (i64::from(m) + 9) % 12;
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468 + 719_162
}

/// (year, month, day) of days since 0001-01-01.
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days - 719_162 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

pub fn format_date(days: i64) -> String {
    let mut out = String::with_capacity(10);
    push_date(&mut out, days);
    out
}

/// Appends `n` as exactly `width` decimal digits (zero-padded; `n` must fit).
fn push_digits(out: &mut String, n: u64, width: usize) {
    let mut buf = [b'0'; 20];
    put_digits(&mut buf[..width], n);
    push_ascii(out, &buf[..width]);
}

/// Fills `buf` with `n` as zero-padded decimal digits (the low digits if `n` is wider).
fn put_digits(buf: &mut [u8], mut n: u64) {
    for b in buf.iter_mut().rev() {
        *b = b'0' + (n % 10) as u8;
        n /= 10;
    }
}

/// Appends a buffer of ASCII digits and separators (built on the stack, then appended in one
/// copy: these run for every date and time a bulk load stores).
fn push_ascii(out: &mut String, buf: &[u8]) {
    out.push_str(std::str::from_utf8(buf).unwrap_or_default());
}

/// `YYYY-MM-DD` (storage form; rows are formatted per value, so no `format!`).
fn push_date(out: &mut String, days: i64) {
    let (y, m, d) = civil_from_days(days);
    if !(0..=9999).contains(&y) {
        out.push_str(&format!("{y:04}-{m:02}-{d:02}"));
        return;
    }
    let mut buf = *b"0000-00-00";
    put_digits(&mut buf[..4], y as u64);
    put_digits(&mut buf[5..7], u64::from(m));
    put_digits(&mut buf[8..], u64::from(d));
    push_ascii(out, &buf);
}

/// `HH:MM:SS` plus `digits` fractional digits of a 100 ns time of day.
pub fn format_time(t: u64, digits: usize) -> String {
    let mut out = String::with_capacity(16);
    push_time(&mut out, t, digits);
    out
}

fn push_time(out: &mut String, t: u64, digits: usize) {
    let secs = t / 10_000_000;
    let frac = t % 10_000_000;
    let mut buf = *b"00:00:00.0000000";
    put_digits(&mut buf[..2], secs / 3600);
    put_digits(&mut buf[3..5], secs / 60 % 60);
    put_digits(&mut buf[6..8], secs % 60);
    let digits = digits.min(7);
    if digits == 0 {
        push_ascii(out, &buf[..8]);
        return;
    }
    put_digits(&mut buf[9..9 + digits], frac / 10u64.pow(7 - digits as u32));
    push_ascii(out, &buf[..9 + digits]);
}

/// `YYYY-MM-DD HH:MM:SS.fffffff`, the datetime2 storage form.
fn datetime2_text(days: i64, t: u64) -> String {
    let mut out = String::with_capacity(27);
    push_datetime2(&mut out, days, t);
    out
}

fn push_datetime2(out: &mut String, days: i64, t: u64) {
    push_date(out, days);
    out.push(' ');
    push_time(out, t, 7);
}

/// `YYYY-MM-DD HH:MM:SS.fffffff +HH:MM` (local date and time, then the offset), the
/// datetimeoffset storage form.
fn datetimeoffset_text(days: i64, t: u64, offset_minutes: i16) -> String {
    let mut out = String::with_capacity(34);
    push_datetimeoffset(&mut out, days, t, offset_minutes);
    out
}

fn push_datetimeoffset(out: &mut String, days: i64, t: u64, offset_minutes: i16) {
    push_datetime2(out, days, t);
    out.push(' ');
    push_offset(out, offset_minutes);
}

/// Shifts (days, 100 ns of the day) by `minutes`: UTC to local time with a positive shift,
/// local to UTC with a negative one. Days may leave 0001..9999; callers check.
fn shift_minutes(days: i64, time: u64, minutes: i32) -> (i64, u64) {
    let per_day = i128::from(T100_PER_DAY);
    let total = i128::from(days) * per_day + i128::from(time) + i128::from(minutes) * 600_000_000;
    (total.div_euclid(per_day) as i64, total.rem_euclid(per_day) as u64)
}

/// `+HH:MM` / `-HH:MM`.
fn push_offset(out: &mut String, minutes: i16) {
    out.push(if minutes < 0 { '-' } else { '+' });
    let m = u64::from(minutes.unsigned_abs());
    if m / 60 > 99 {
        // Not a valid offset; formatted in full for whoever reports it.
        out.push_str(&format!("{:02}:{:02}", m / 60, m % 60));
        return;
    }
    push_digits(out, m / 60, 2);
    out.push(':');
    push_digits(out, m % 60, 2);
}

/// A parsed date/time literal: days since 0001-01-01, 100 ns since midnight, optional offset.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DateTimeParts {
    pub days: i64,
    pub time: u64,
    pub offset: Option<i16>,
    pub has_date: bool,
}

/// Parses the date/time string forms SQL Server accepts in practice: ISO `YYYY-MM-DD`,
/// `YYYYMMDD`, with ` ` or `T` and `HH:MM[:SS[.fffffff]]`, an optional `Z`/`+HH:MM` offset, or a
/// time alone.
pub fn parse_datetime(s: &str) -> Option<DateTimeParts> {
    let s = s.trim();
    if let Some(parts) = parse_mdy(s) {
        return Some(parts);
    }
    // A month name ('Jan 5 2020'); 'T' and 'Z' alone belong to ISO forms.
    if s.bytes()
        .any(|b| b.is_ascii_alphabetic() && b != b'T' && b != b'Z')
    {
        return crate::convert::month_names::parse(s);
    }
    let (date_part, rest) = if s.len() >= 8 && s.as_bytes()[..4].iter().all(u8::is_ascii_digit) {
        let end = s.find([' ', 'T']).unwrap_or(s.len());
        (Some(&s[..end]), s[end..].trim_start_matches([' ', 'T']))
    } else {
        (None, s)
    };
    let days = match date_part {
        Some(d) => {
            let (y, m, dd) = if d.len() == 8 && d.bytes().all(|b| b.is_ascii_digit()) {
                (d[..4].parse().ok()?, d[4..6].parse().ok()?, d[6..8].parse().ok()?)
            } else {
                let mut it = d.split(['-', '/', '.']);
                let y: i64 = it.next()?.parse().ok()?;
                let m: u32 = it.next()?.parse().ok()?;
                let dd: u32 = it.next()?.parse().ok()?;
                if it.next().is_some() {
                    return None;
                }
                (y, m, dd)
            };
            if !(1..=9999).contains(&y) || !(1..=12).contains(&m) || dd == 0 || dd > days_in_month(y, m) {
                return None;
            }
            days_from_civil(y, m, dd)
        }
        None => DAYS_TO_1900,
    };
    let mut rest = rest.trim();
    let mut offset = None;
    if let Some(r) = rest.strip_suffix('Z') {
        offset = Some(0);
        rest = r.trim();
    } else if let Some(pos) = rest.rfind(['+', '-'])
        && rest.len() - pos == 6
        && rest.as_bytes()[pos + 3] == b':'
    {
        let sign: i16 = if rest.as_bytes()[pos] == b'-' { -1 } else { 1 };
        let h: i16 = rest[pos + 1..pos + 3].parse().ok()?;
        let m: i16 = rest[pos + 4..].parse().ok()?;
        if h > 14 || m > 59 {
            return None;
        }
        offset = Some(sign * (h * 60 + m));
        rest = rest[..pos].trim();
    }
    let time = if rest.is_empty() {
        date_part?;
        0
    } else {
        parse_time(rest)?
    };
    Some(DateTimeParts {
        days,
        time,
        offset,
        has_date: date_part.is_some(),
    })
}

/// `M/D/YYYY`, `MM-DD-YY`, `M.D.YYYY` with an optional time: the month-first form of SQL
/// Server's default DATEFORMAT mdy. A two-digit year is 1950-2049 (two digit year cutoff).
fn parse_mdy(s: &str) -> Option<DateTimeParts> {
    let sep_at = s.find(['/', '-', '.'])?;
    if !(1..=2).contains(&sep_at) || !s[..sep_at].bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let end = s.find([' ', 'T']).unwrap_or(s.len());
    let date = &s[..end];
    let sep = date.as_bytes()[sep_at] as char;
    let mut it = date.split(sep);
    let m: u32 = it.next()?.parse().ok()?;
    let d: u32 = it.next()?.parse().ok()?;
    let y_text = it.next()?;
    if it.next().is_some() || !(y_text.len() == 2 || y_text.len() == 4) {
        return None;
    }
    let mut y: i64 = y_text.parse().ok()?;
    if y_text.len() == 2 {
        y += if y < 50 { 2000 } else { 1900 };
    }
    if !(1..=9999).contains(&y) || !(1..=12).contains(&m) || d == 0 || d > days_in_month(y, m) {
        return None;
    }
    let rest = s[end..].trim_start_matches([' ', 'T']).trim();
    let time = if rest.is_empty() { 0 } else { parse_time(rest)? };
    Some(DateTimeParts {
        days: days_from_civil(y, m, d),
        time,
        offset: None,
        has_date: true,
    })
}

pub(crate) fn days_in_month(y: i64, m: u32) -> u32 {
    match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        _ => 28,
    }
}

/// `HH:MM[:SS[.f{1,7}]]` to 100 ns units; more than 7 digits are cut.
pub(crate) fn parse_time(s: &str) -> Option<u64> {
    let mut it = s.split(':');
    let h: u64 = it.next()?.trim().parse().ok()?;
    let m: u64 = it.next()?.trim().parse().ok()?;
    let (sec, frac) = match it.next() {
        Some(sf) => match sf.split_once('.') {
            Some((a, b)) => {
                if !b.bytes().all(|c| c.is_ascii_digit()) {
                    return None;
                }
                let mut digits: String = b.chars().take(7).collect();
                while digits.len() < 7 {
                    digits.push('0');
                }
                (a.parse::<u64>().ok()?, digits.parse::<u64>().ok()?)
            }
            None => (sf.parse().ok()?, 0),
        },
        None => (0, 0),
    };
    if it.next().is_some() || h > 23 || m > 59 || sec > 59 {
        return None;
    }
    Some(((h * 60 + m) * 60 + sec) * 10_000_000 + frac)
}

/// Rounds a 100 ns time to `scale` fractional digits; may carry into the next day.
fn round_time(t: u64, scale: u8) -> u64 {
    let unit = 10u64.pow(7 - u32::from(scale.min(7)));
    (t + unit / 2) / unit * unit
}

// ---- decimals -------------------------------------------------------------------------------

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
fn parse_plain_decimal(b: &[u8]) -> Option<(i128, u8)> {
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
fn push_decimal(out: &mut String, m: i128, scale: u8) {
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

fn digits_of(m: i128) -> u32 {
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

// ---- GUIDs ----------------------------------------------------------------------------------

pub fn format_guid(b: &[u8; 16]) -> String {
    let mut out = String::with_capacity(36);
    push_guid(&mut out, b);
    out
}

fn push_guid(out: &mut String, b: &[u8; 16]) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for (i, x) in b.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            out.push('-');
        }
        out.push(char::from(HEX[usize::from(x >> 4)]));
        out.push(char::from(HEX[usize::from(x & 0xF)]));
    }
}

/// `XXXXXXXX-XXXX-XXXX-XXXX-XXXXXXXXXXXX` (optionally in braces, any case) in display byte
/// order. Allocation-free: the GUID collation calls it for every comparison.
pub fn parse_guid(s: &str) -> Option<[u8; 16]> {
    // Stored values are canonical: the table-driven parse takes them without the checks below.
    if let Some(g) = fast_guid(s.as_bytes()) {
        return Some(g);
    }
    let s = s.trim();
    let s = s.strip_prefix('{').and_then(|r| r.strip_suffix('}')).unwrap_or(s);
    let b = s.as_bytes();
    if b.len() != 36 || [8, 13, 18, 23].iter().any(|&i| b[i] != b'-') {
        return None;
    }
    let nibble = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    };
    let mut out = [0u8; 16];
    let mut k = 0;
    let mut i = 0;
    while i < 36 {
        if b[i] == b'-' {
            i += 1;
            continue;
        }
        out[k] = (nibble(b[i])? << 4) | nibble(b[i + 1])?;
        k += 1;
        i += 2;
    }
    Some(out)
}

// ---- errors ---------------------------------------------------------------------------------

fn conv_error(from: &str, value: &str, ty: SqlType) -> SqlError {
    match ty {
        SqlType::Bit | SqlType::TinyInt | SqlType::SmallInt | SqlType::Int | SqlType::BigInt => {
            SqlError::new(
                245,
                16,
                format!(
                    "Conversion failed when converting the {from} value '{value}' to data type {}.",
                    base_name(ty)
                ),
            )
        }
        SqlType::Date
        | SqlType::Time { .. }
        | SqlType::DateTime
        | SqlType::SmallDateTime
        | SqlType::DateTime2 { .. }
        | SqlType::DateTimeOffset { .. } => SqlError::new(
            241,
            16,
            "Conversion failed when converting date and/or time from character string.",
        ),
        SqlType::UniqueIdentifier => SqlError::new(
            8169,
            16,
            "Conversion failed when converting from a character string to uniqueidentifier.",
        ),
        SqlType::Money | SqlType::SmallMoney => SqlError::new(
            235,
            16,
            "Cannot convert a char value to money. The char value has incorrect syntax.".to_string(),
        ),
        SqlType::Decimal { .. } | SqlType::Numeric { .. } => {
            SqlError::new(8114, 16, format!("Error converting data type {from} to numeric."))
        }
        _ => SqlError::new(
            8114,
            16,
            format!("Error converting data type {from} to {}.", base_name(ty)),
        ),
    }
}

pub fn overflow(ty: SqlType) -> SqlError {
    match ty {
        SqlType::Decimal { .. } | SqlType::Numeric { .. } => SqlError::new(
            8115,
            16,
            format!(
                "Arithmetic overflow error converting {} to data type numeric.",
                "numeric"
            ),
        ),
        SqlType::DateTime | SqlType::SmallDateTime => SqlError::new(
            242,
            16,
            "The conversion of a varchar data type to a datetime data type resulted in an out-of-range value.",
        ),
        _ => SqlError::new(
            8115,
            16,
            format!(
                "Arithmetic overflow error converting expression to data type {}.",
                base_name(ty)
            ),
        ),
    }
}

fn clash(from: &str, ty: SqlType) -> SqlError {
    SqlError::new(
        206,
        16,
        format!(
            "Operand type clash: {from} is incompatible with {}",
            base_name(ty)
        ),
    )
}

fn class_name(v: &ValueRef<'_>) -> &'static str {
    match v {
        ValueRef::Null => "null",
        ValueRef::Integer(_) => "int",
        ValueRef::Real(_) => "float",
        ValueRef::Text(_) => "varchar",
        ValueRef::Blob(_) => "varbinary",
    }
}

// ---- conversion to storage ------------------------------------------------------------------

/// A value in its natural storage form (for its own shape; no target type).
pub fn value_to_stored(v: &Value) -> Stored {
    match v {
        Value::Null => Stored::Null,
        Value::Bit(b) => Stored::Integer(i64::from(*b)),
        Value::TinyInt(x) => Stored::Integer(i64::from(*x)),
        Value::SmallInt(x) => Stored::Integer(i64::from(*x)),
        Value::Int(x) => Stored::Integer(i64::from(*x)),
        Value::BigInt(x) => Stored::Integer(*x),
        Value::Real(x) => Stored::Real(f64::from(*x)),
        Value::Float(x) => Stored::Real(*x),
        Value::Decimal { mantissa, scale } => Stored::Text(format_decimal(*mantissa, *scale)),
        Value::Money(m) => Stored::Text(format_decimal(i128::from(*m), 4)),
        Value::Date(d) => Stored::Text(format_date(i64::from(*d))),
        Value::Time(t) => Stored::Text(format_time(*t, 7)),
        Value::DateTime { days, ticks } => {
            Stored::Text(datetime_text(i64::from(*days) + DAYS_TO_1900, u64::from(*ticks)))
        }
        Value::SmallDateTime { days, minutes } => Stored::Text(format!(
            "{} {:02}:{:02}:00.0000000",
            format_date(i64::from(*days) + DAYS_TO_1900),
            minutes / 60,
            minutes % 60
        )),
        Value::DateTime2 { days, time } => Stored::Text(datetime2_text(i64::from(*days), *time)),
        Value::DateTimeOffset {
            days,
            time,
            offset_minutes,
        } => {
            let (d, t) = shift_minutes(i64::from(*days), *time, i32::from(*offset_minutes));
            Stored::Text(datetimeoffset_text(d, t, *offset_minutes))
        }
        Value::Guid(g) => Stored::Text(format_guid(g)),
        Value::String(s) => Stored::Text(s.clone()),
        Value::Binary(b) => Stored::Blob(b.clone()),
    }
}

fn datetime_text(days: i64, ticks: u64) -> String {
    let secs = ticks / 300;
    let ms = ((ticks % 300) * 10 + 1) / 3;
    format!(
        "{} {:02}:{:02}:{:02}.{:03}0000",
        format_date(days),
        secs / 3600,
        secs / 60 % 60,
        secs % 60,
        ms
    )
}

fn int_range(ty: SqlType) -> (i64, i64) {
    match ty {
        SqlType::Bit => (i64::MIN, i64::MAX),
        SqlType::TinyInt => (0, 255),
        SqlType::SmallInt => (i64::from(i16::MIN), i64::from(i16::MAX)),
        SqlType::Int => (i64::from(i32::MIN), i64::from(i32::MAX)),
        _ => (i64::MIN, i64::MAX),
    }
}

fn decimal_of(v: &ValueRef<'_>) -> Option<(i128, u8)> {
    match v {
        ValueRef::Integer(i) => Some((i128::from(*i), 0)),
        ValueRef::Real(f) => decimal_from_f64(*f, 15),
        ValueRef::Text(t) => parse_decimal(std::str::from_utf8(t).ok()?),
        _ => None,
    }
}

/// Converts a stored value to the canonical storage form of `ty`, as an implicit conversion
/// (assignment, parameter, bulk load) in SQL Server would.
pub fn coerce(v: ValueRef<'_>, ty: SqlType) -> Result<Stored, SqlError> {
    if let ValueRef::Null = v {
        return Ok(Stored::Null);
    }
    let text = || match v {
        ValueRef::Text(t) => String::from_utf8_lossy(t).into_owned(),
        ValueRef::Integer(i) => i.to_string(),
        ValueRef::Real(f) => format_float(f),
        _ => String::new(),
    };
    match ty {
        SqlType::Bit | SqlType::TinyInt | SqlType::SmallInt | SqlType::Int | SqlType::BigInt => {
            let i = match v {
                ValueRef::Integer(i) => i,
                ValueRef::Real(f) => {
                    let t = f.trunc();
                    if !(-9.3e18..=9.3e18).contains(&t) {
                        return Err(overflow(ty));
                    }
                    t as i64
                }
                ValueRef::Text(t) => {
                    let s = String::from_utf8_lossy(t);
                    let st = s.trim();
                    if ty == SqlType::Bit {
                        if st.eq_ignore_ascii_case("true") {
                            return Ok(Stored::Integer(1));
                        }
                        if st.eq_ignore_ascii_case("false") {
                            return Ok(Stored::Integer(0));
                        }
                    }
                    match st.parse::<i64>() {
                        Ok(i) => i,
                        Err(_) => {
                            if st.bytes().all(|b| b.is_ascii_digit() || b == b'-' || b == b'+')
                                && !st.is_empty()
                            {
                                return Err(overflow(ty));
                            }
                            return Err(conv_error("varchar", &s, ty));
                        }
                    }
                }
                ValueRef::Blob(b) => {
                    let mut x: i64 = 0;
                    for byte in b.iter().rev().take(8).rev() {
                        x = (x << 8) | i64::from(*byte);
                    }
                    x
                }
                ValueRef::Null => return Ok(Stored::Null),
            };
            if ty == SqlType::Bit {
                return Ok(Stored::Integer(i64::from(i != 0)));
            }
            let (lo, hi) = int_range(ty);
            if i < lo || i > hi {
                return Err(overflow(ty));
            }
            Ok(Stored::Integer(i))
        }
        SqlType::Real | SqlType::Float => {
            let f = match v {
                ValueRef::Integer(i) => i as f64,
                ValueRef::Real(f) => f,
                ValueRef::Text(t) => {
                    let s = String::from_utf8_lossy(t);
                    s.trim()
                        .parse::<f64>()
                        .map_err(|_| conv_error("varchar", &s, ty))?
                }
                _ => return Err(clash("varbinary", ty)),
            };
            Ok(Stored::Real(if ty == SqlType::Real {
                f64::from(f as f32)
            } else {
                f
            }))
        }
        SqlType::Decimal { precision, scale } | SqlType::Numeric { precision, scale } => {
            let (m, s) = decimal_of(&v).ok_or_else(|| conv_error(class_name(&v), &text(), ty))?;
            let m = rescale(m, s, scale).ok_or_else(|| overflow(ty))?;
            if digits_of(m) > u32::from(precision) {
                return Err(overflow(ty));
            }
            Ok(Stored::Text(format_decimal(m, scale)))
        }
        SqlType::Money | SqlType::SmallMoney => {
            let (m, s) = decimal_of(&v).ok_or_else(|| conv_error(class_name(&v), &text(), ty))?;
            let m = rescale(m, s, 4).ok_or_else(|| overflow(ty))?;
            let limit: i128 = if ty == SqlType::Money {
                i128::from(i64::MAX)
            } else {
                i128::from(i32::MAX)
            };
            if m > limit || m < -limit - 1 {
                return Err(overflow(ty));
            }
            Ok(Stored::Text(format_decimal(m, 4)))
        }
        SqlType::Date
        | SqlType::Time { .. }
        | SqlType::DateTime
        | SqlType::SmallDateTime
        | SqlType::DateTime2 { .. }
        | SqlType::DateTimeOffset { .. } => {
            let parts = match v {
                ValueRef::Text(t) => {
                    let s = String::from_utf8_lossy(t);
                    parse_datetime(&s).ok_or_else(|| conv_error("varchar", &s, ty))?
                }
                ValueRef::Integer(i) if matches!(ty, SqlType::DateTime | SqlType::SmallDateTime) => {
                    DateTimeParts {
                        days: DAYS_TO_1900 + i,
                        time: 0,
                        offset: None,
                        has_date: true,
                    }
                }
                ValueRef::Real(f) if matches!(ty, SqlType::DateTime | SqlType::SmallDateTime) => {
                    let days = f.floor();
                    DateTimeParts {
                        days: DAYS_TO_1900 + days as i64,
                        time: ((f - days) * T100_PER_DAY as f64).round() as u64,
                        offset: None,
                        has_date: true,
                    }
                }
                other => return Err(clash(class_name(&other), ty)),
            };
            Ok(Stored::Text(format_datetime_parts(parts, ty)?))
        }
        SqlType::UniqueIdentifier => match v {
            ValueRef::Text(t) => {
                let s = String::from_utf8_lossy(t);
                let g = parse_guid(&s).ok_or_else(|| conv_error("varchar", &s, ty))?;
                Ok(Stored::Text(format_guid(&g)))
            }
            ValueRef::Blob(b) if b.len() == 16 => {
                let mut g = [0u8; 16];
                g.copy_from_slice(b);
                Ok(Stored::Text(format_guid(&g)))
            }
            other => Err(clash(class_name(&other), ty)),
        },
        SqlType::Char { len } | SqlType::NChar { len } => {
            let s = match v {
                ValueRef::Blob(b) => String::from_utf8_lossy(b).into_owned(),
                _ => text(),
            };
            let width = if matches!(ty, SqlType::NChar { .. }) {
                s.encode_utf16().count()
            } else {
                s.len()
            };
            if width < usize::from(len) {
                let mut p = s;
                p.extend(std::iter::repeat_n(' ', usize::from(len) - width));
                Ok(Stored::Text(p))
            } else {
                Ok(Stored::Text(s))
            }
        }
        SqlType::VarChar { .. }
        | SqlType::NVarChar { .. }
        | SqlType::Text
        | SqlType::NText
        | SqlType::Xml => match v {
            ValueRef::Blob(b) => Ok(Stored::Text(String::from_utf8_lossy(b).into_owned())),
            _ => Ok(Stored::Text(text())),
        },
        SqlType::Binary { len } => {
            let mut b = binary_of(v, ty)?;
            if b.len() < usize::from(len) {
                b.resize(usize::from(len), 0);
            }
            Ok(Stored::Blob(b))
        }
        SqlType::VarBinary { .. } | SqlType::Image | SqlType::RowVersion => {
            Ok(Stored::Blob(binary_of(v, ty)?))
        }
        SqlType::SqlVariant => Ok(match v {
            ValueRef::Integer(i) => Stored::Integer(i),
            ValueRef::Real(f) => Stored::Real(f),
            ValueRef::Text(_) => Stored::Text(text()),
            ValueRef::Blob(b) => Stored::Blob(b.to_vec()),
            ValueRef::Null => Stored::Null,
        }),
    }
}

fn binary_of(v: ValueRef<'_>, ty: SqlType) -> Result<Vec<u8>, SqlError> {
    match v {
        ValueRef::Blob(b) => Ok(b.to_vec()),
        ValueRef::Text(t) => {
            // Bulk clients that send every column as text send binaries as hex.
            let s = String::from_utf8_lossy(t);
            let h = s.trim();
            let h = h.strip_prefix("0x").or_else(|| h.strip_prefix("0X")).unwrap_or(h);
            if h.len().is_multiple_of(2) && h.bytes().all(|c| c.is_ascii_hexdigit()) {
                (0..h.len())
                    .step_by(2)
                    .map(|i| u8::from_str_radix(&h[i..i + 2], 16))
                    .collect::<Result<Vec<u8>, _>>()
                    .map_err(|_| clash("varchar", ty))
            } else {
                Err(SqlError::new(
                    257,
                    16,
                    format!(
                        "Implicit conversion from data type varchar to {} is not allowed. Use the CONVERT function to run this query.",
                        base_name(ty)
                    ),
                ))
            }
        }
        ValueRef::Integer(i) => Ok(i.to_be_bytes().to_vec()),
        other => Err(clash(class_name(&other), ty)),
    }
}

/// The canonical storage text of a date/time value of type `ty`.
pub fn format_datetime_parts(p: DateTimeParts, ty: SqlType) -> Result<String, SqlError> {
    let (days, time) = (p.days, p.time);
    Ok(match ty {
        SqlType::Date => format_date(days),
        SqlType::Time { scale } => format_time(round_time(time, scale) % T100_PER_DAY, 7),
        SqlType::DateTime2 { scale } => {
            let t = round_time(time, scale);
            let (d, t) = (days + (t / T100_PER_DAY) as i64, t % T100_PER_DAY);
            datetime2_text(d, t)
        }
        SqlType::DateTimeOffset { scale } => {
            let t = round_time(time, scale);
            let (d, t) = (days + (t / T100_PER_DAY) as i64, t % T100_PER_DAY);
            datetimeoffset_text(d, t, p.offset.unwrap_or(0))
        }
        SqlType::DateTime => {
            let ticks = (time * 3 + 50_000) / 100_000;
            let (d, ticks) = (days + (ticks / 25_920_000) as i64, ticks % 25_920_000);
            if d < days_from_civil(1753, 1, 1) {
                return Err(overflow(ty));
            }
            datetime_text(d, ticks)
        }
        SqlType::SmallDateTime => {
            let minutes = (time + 300_000_000) / 600_000_000;
            let (d, minutes) = (days + (minutes / 1440) as i64, minutes % 1440);
            if d < DAYS_TO_1900 || d > days_from_civil(2079, 6, 6) {
                return Err(overflow(ty));
            }
            format!(
                "{} {:02}:{:02}:00.0000000",
                format_date(d),
                minutes / 60,
                minutes % 60
            )
        }
        _ => return Err(clash("datetime", ty)),
    })
}

/// SQL Server's default float to string conversion is lossy; we keep the shortest exact form.
pub fn format_float(f: f64) -> String {
    if f.fract() == 0.0 && f.abs() < 1e15 {
        format!("{}", f as i64)
    } else {
        format!("{f}")
    }
}

// ---- storage to Value -----------------------------------------------------------------------

/// Reads a stored value as a value of type `ty`. Non-canonical input (an expression result)
/// is converted first.
pub fn to_value(v: ValueRef<'_>, ty: SqlType) -> Result<Value, SqlError> {
    Ok(match (ty, v) {
        (_, ValueRef::Null) => Value::Null,
        (SqlType::Bit, ValueRef::Integer(i)) => Value::Bit(i != 0),
        (SqlType::TinyInt, ValueRef::Integer(i)) => {
            Value::TinyInt(u8::try_from(i).map_err(|_| overflow(ty))?)
        }
        (SqlType::SmallInt, ValueRef::Integer(i)) => {
            Value::SmallInt(i16::try_from(i).map_err(|_| overflow(ty))?)
        }
        (SqlType::Int, ValueRef::Integer(i)) => Value::Int(i32::try_from(i).map_err(|_| overflow(ty))?),
        (SqlType::BigInt, ValueRef::Integer(i)) => Value::BigInt(i),
        (SqlType::Float, ValueRef::Real(f)) => Value::Float(f),
        (SqlType::Real, ValueRef::Real(f)) => Value::Real(f as f32),
        (SqlType::Float, ValueRef::Integer(i)) => Value::Float(i as f64),
        (SqlType::Real, ValueRef::Integer(i)) => Value::Real(i as f32),
        (SqlType::Decimal { scale, .. } | SqlType::Numeric { scale, .. }, ValueRef::Text(t)) => {
            let s = std::str::from_utf8(t).unwrap_or("");
            match parse_decimal(s) {
                Some((m, sc)) if sc == scale => Value::Decimal { mantissa: m, scale },
                _ => return to_value_slow(v, ty),
            }
        }
        (SqlType::Money | SqlType::SmallMoney, ValueRef::Text(t)) => {
            let s = std::str::from_utf8(t).unwrap_or("");
            match parse_decimal(s) {
                Some((m, 4)) => Value::Money(i64::try_from(m).map_err(|_| overflow(ty))?),
                _ => return to_value_slow(v, ty),
            }
        }
        (
            SqlType::Char { .. }
            | SqlType::VarChar { .. }
            | SqlType::NChar { .. }
            | SqlType::NVarChar { .. }
            | SqlType::Text
            | SqlType::NText
            | SqlType::Xml,
            ValueRef::Text(t),
        ) => Value::String(String::from_utf8_lossy(t).into_owned()),
        (
            SqlType::Binary { .. } | SqlType::VarBinary { .. } | SqlType::Image | SqlType::RowVersion,
            ValueRef::Blob(b),
        ) => Value::Binary(b.to_vec()),
        (SqlType::SqlVariant, ValueRef::Integer(i)) => Value::BigInt(i),
        (SqlType::SqlVariant, ValueRef::Real(f)) => Value::Float(f),
        (SqlType::SqlVariant, ValueRef::Text(t)) => Value::String(String::from_utf8_lossy(t).into_owned()),
        (SqlType::SqlVariant, ValueRef::Blob(b)) => Value::Binary(b.to_vec()),
        // The canonical storage forms convert directly; anything else takes the general parser.
        (SqlType::DateTime2 { .. }, ValueRef::Text(t)) => match fast_datetime(t) {
            Some((days, time)) => Value::DateTime2 {
                days: u32::try_from(days).map_err(|_| overflow(ty))?,
                time,
            },
            None => datetime_from_text(t, ty)?,
        },
        (SqlType::DateTimeOffset { scale }, ValueRef::Text(t)) => match fast_datetimeoffset(t, scale) {
            Some((days, time, offset_minutes)) => Value::DateTimeOffset {
                days,
                time,
                offset_minutes,
            },
            None => datetime_from_text(t, ty)?,
        },
        (SqlType::Date, ValueRef::Text(t)) => match fast_datetime(t).filter(|_| t.len() == 10) {
            Some((days, _)) => Value::Date(u32::try_from(days).map_err(|_| overflow(ty))?),
            None => datetime_from_text(t, ty)?,
        },
        (SqlType::Time { .. } | SqlType::DateTime | SqlType::SmallDateTime, ValueRef::Text(t)) => {
            datetime_from_text(t, ty)?
        }
        (SqlType::UniqueIdentifier, ValueRef::Text(t)) => match fast_guid(t) {
            Some(g) => Value::Guid(g),
            None => {
                let s = std::str::from_utf8(t).unwrap_or("");
                Value::Guid(parse_guid(s).ok_or_else(|| conv_error("varchar", s, ty))?)
            }
        },
        _ => return to_value_slow(v, ty),
    })
}

/// A date or time type's value from any text the general parser accepts.
fn datetime_from_text(t: &[u8], ty: SqlType) -> Result<Value, SqlError> {
    let s = std::str::from_utf8(t).unwrap_or("");
    let p = parse_datetime(s).ok_or_else(|| conv_error("varchar", s, ty))?;
    datetime_value(p, ty)
}

fn to_value_slow(v: ValueRef<'_>, ty: SqlType) -> Result<Value, SqlError> {
    let stored = coerce(v, ty)?;
    let r = ValueRef::from(&stored);
    // The canonical form always matches a fast arm above.
    match (ty, r) {
        (SqlType::Decimal { scale, .. } | SqlType::Numeric { scale, .. }, ValueRef::Text(t)) => {
            let (m, _) = parse_decimal(std::str::from_utf8(t).unwrap_or("0")).unwrap_or((0, scale));
            Ok(Value::Decimal { mantissa: m, scale })
        }
        (SqlType::Money | SqlType::SmallMoney, ValueRef::Text(t)) => {
            let (m, _) = parse_decimal(std::str::from_utf8(t).unwrap_or("0")).unwrap_or((0, 4));
            Ok(Value::Money(i64::try_from(m).map_err(|_| overflow(ty))?))
        }
        (_, r @ (ValueRef::Integer(_) | ValueRef::Real(_) | ValueRef::Text(_) | ValueRef::Blob(_))) => {
            to_value_canonical(r, ty)
        }
        (_, ValueRef::Null) => Ok(Value::Null),
    }
}

fn to_value_canonical(r: ValueRef<'_>, ty: SqlType) -> Result<Value, SqlError> {
    match (ty, r) {
        (SqlType::Bit, ValueRef::Integer(i)) => Ok(Value::Bit(i != 0)),
        (SqlType::TinyInt, ValueRef::Integer(i)) => Ok(Value::TinyInt(i as u8)),
        (SqlType::SmallInt, ValueRef::Integer(i)) => Ok(Value::SmallInt(i as i16)),
        (SqlType::Int, ValueRef::Integer(i)) => Ok(Value::Int(i as i32)),
        (SqlType::BigInt, ValueRef::Integer(i)) => Ok(Value::BigInt(i)),
        (SqlType::Float, ValueRef::Real(f)) => Ok(Value::Float(f)),
        (SqlType::Real, ValueRef::Real(f)) => Ok(Value::Real(f as f32)),
        (_, ValueRef::Text(t)) if is_string(ty) => Ok(Value::String(String::from_utf8_lossy(t).into_owned())),
        (_, ValueRef::Blob(b)) if is_binary(ty) => Ok(Value::Binary(b.to_vec())),
        (_, ValueRef::Text(t)) => {
            let s = std::str::from_utf8(t).unwrap_or("");
            if ty == SqlType::UniqueIdentifier {
                return Ok(Value::Guid(parse_guid(s).ok_or_else(|| clash("varchar", ty))?));
            }
            let p = parse_datetime(s).ok_or_else(|| clash("varchar", ty))?;
            datetime_value(p, ty)
        }
        (_, other) => to_value_sqlvariant(other),
    }
}

fn to_value_sqlvariant(r: ValueRef<'_>) -> Result<Value, SqlError> {
    Ok(match r {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(i) => Value::BigInt(i),
        ValueRef::Real(f) => Value::Float(f),
        ValueRef::Text(t) => Value::String(String::from_utf8_lossy(t).into_owned()),
        ValueRef::Blob(b) => Value::Binary(b.to_vec()),
    })
}

fn datetime_value(p: DateTimeParts, ty: SqlType) -> Result<Value, SqlError> {
    let canon = format_datetime_parts(p, ty)?;
    let p = parse_datetime(&canon).ok_or_else(|| overflow(ty))?;
    let days32 = |d: i64| u32::try_from(d).map_err(|_| overflow(ty));
    Ok(match ty {
        SqlType::Date => Value::Date(days32(p.days)?),
        SqlType::Time { .. } => Value::Time(p.time),
        SqlType::DateTime2 { .. } => Value::DateTime2 {
            days: days32(p.days)?,
            time: p.time,
        },
        SqlType::DateTimeOffset { .. } => {
            let off = p.offset.unwrap_or(0);
            let (days, time) = shift_minutes(p.days, p.time, -i32::from(off));
            Value::DateTimeOffset {
                days: days32(days)?,
                time,
                offset_minutes: off,
            }
        }
        SqlType::DateTime => {
            let ticks = (p.time * 3 + 50_000) / 100_000;
            Value::DateTime {
                days: i32::try_from(p.days - DAYS_TO_1900).map_err(|_| overflow(ty))?,
                ticks: ticks as u32,
            }
        }
        SqlType::SmallDateTime => Value::SmallDateTime {
            days: u16::try_from(p.days - DAYS_TO_1900).map_err(|_| overflow(ty))?,
            minutes: (p.time / 600_000_000) as u16,
        },
        _ => return Err(clash("datetime", ty)),
    })
}

/// Appends the storage form of a value already of (or trivially convertible to) `ty` to
/// `out`, without going through text; `None` (with nothing appended) when the general
/// conversion is needed. Text and bytes are the caller's (they need the column's length check).
pub(crate) fn fast_storage_into(v: &Value, ty: SqlType, out: &mut RowBuffer) -> Option<Result<(), SqlError>> {
    match (v, ty) {
        (Value::Null, _) => out.push_null(),
        (Value::BigInt(i), SqlType::BigInt) => out.push_integer(*i),
        (Value::Int(i), SqlType::Int | SqlType::BigInt) => out.push_integer(i64::from(*i)),
        (Value::SmallInt(i), SqlType::SmallInt | SqlType::Int | SqlType::BigInt) => {
            out.push_integer(i64::from(*i));
        }
        (Value::TinyInt(i), SqlType::TinyInt | SqlType::SmallInt | SqlType::Int | SqlType::BigInt) => {
            out.push_integer(i64::from(*i));
        }
        (Value::Bit(b), SqlType::Bit) => out.push_integer(i64::from(*b)),
        (Value::Float(f), SqlType::Float) => out.push_real(*f),
        (Value::Real(f), SqlType::Real) => out.push_real(f64::from(*f)),
        (
            Value::Decimal { mantissa, scale },
            SqlType::Decimal { precision, scale: s } | SqlType::Numeric { precision, scale: s },
        ) => {
            let m = match rescale(*mantissa, *scale, s) {
                Some(m) if digits_of(m) <= u32::from(precision) => m,
                _ => return Some(Err(overflow(ty))),
            };
            out.push_text_with(|t| push_decimal(t, m, s));
        }
        (Value::Money(m), SqlType::Money) => {
            out.push_text_with(|t| push_decimal(t, i128::from(*m), 4));
        }
        (Value::Guid(g), SqlType::UniqueIdentifier) => out.push_text_with(|t| push_guid(t, g)),
        (Value::Date(d), SqlType::Date) => out.push_text_with(|t| push_date(t, i64::from(*d))),
        (Value::DateTime2 { days, time }, SqlType::DateTime2 { scale }) => {
            let t = round_time(*time, scale);
            let (d, t) = (i64::from(*days) + (t / T100_PER_DAY) as i64, t % T100_PER_DAY);
            out.push_text_with(|text| push_datetime2(text, d, t));
        }
        (
            Value::DateTimeOffset {
                days,
                time,
                offset_minutes,
            },
            SqlType::DateTimeOffset { scale },
        ) => {
            // The wire value is UTC; the storage form is the local time and its offset, as
            // value_to_stored and coerce would make it in two steps through text.
            let (d, t) = shift_minutes(i64::from(*days), *time, i32::from(*offset_minutes));
            let t = round_time(t, scale);
            let (d, t) = (d + (t / T100_PER_DAY) as i64, t % T100_PER_DAY);
            if !(0..=MAX_DAYS).contains(&d) {
                // Outside 0001..9999 in local time: the general path reports it.
                return None;
            }
            out.push_text_with(|text| push_datetimeoffset(text, d, t, *offset_minutes));
        }
        _ => return None,
    }
    Some(Ok(()))
}

/// 9999-12-31 in days since 0001-01-01.
const MAX_DAYS: i64 = 3_652_058;

/// Parses the canonical fixed-width storage forms directly (the hot path of reading rows).
fn fast_datetime(s: &[u8]) -> Option<(i64, u64)> {
    fn num(b: &[u8]) -> Option<u64> {
        let mut n = 0u64;
        for c in b {
            if !c.is_ascii_digit() {
                return None;
            }
            n = n * 10 + u64::from(c - b'0');
        }
        Some(n)
    }
    if s.len() < 10 || s[4] != b'-' || s[7] != b'-' {
        return None;
    }
    let days = days_from_civil(
        num(&s[..4])? as i64,
        num(&s[5..7])? as u32,
        num(&s[8..10])? as u32,
    );
    if s.len() == 10 {
        return Some((days, 0));
    }
    if s.len() != 27 || s[10] != b' ' || s[13] != b':' || s[16] != b':' || s[19] != b'.' {
        return None;
    }
    let secs = num(&s[11..13])? * 3600 + num(&s[14..16])? * 60 + num(&s[17..19])?;
    Some((days, secs * 10_000_000 + num(&s[20..27])?))
}

/// The canonical datetimeoffset storage form `YYYY-MM-DD HH:MM:SS.fffffff +HH:MM` (local time)
/// as the wire value (UTC days and time, offset), when it is already at `scale`; `None`
/// sends it down the general path.
fn fast_datetimeoffset(s: &[u8], scale: u8) -> Option<(u32, u64, i16)> {
    if s.len() != 34 || s[27] != b' ' || s[31] != b':' {
        return None;
    }
    let (days, time) = fast_datetime(&s[..27])?;
    if round_time(time, scale) != time {
        return None;
    }
    let two = |b: &[u8]| -> Option<i16> {
        (b[0].is_ascii_digit() && b[1].is_ascii_digit())
            .then(|| i16::from(b[0] - b'0') * 10 + i16::from(b[1] - b'0'))
    };
    let minutes = two(&s[29..31])? * 60 + two(&s[32..34])?;
    let offset = match s[28] {
        b'+' => minutes,
        b'-' => -minutes,
        _ => return None,
    };
    let (utc_days, utc_time) = shift_minutes(days, time, -i32::from(offset));
    Some((u32::try_from(utc_days).ok()?, utc_time, offset))
}

/// The canonical uniqueidentifier storage form (36 characters, hyphens at 8, 13, 18, 23).
fn fast_guid(s: &[u8]) -> Option<[u8; 16]> {
    /// Hex digit values; 0x10 marks a byte that is not one.
    const HEX: [u8; 256] = {
        let mut t = [0x10u8; 256];
        let mut i = 0;
        while i < 10 {
            t[b'0' as usize + i] = i as u8;
            i += 1;
        }
        let mut i = 0;
        while i < 6 {
            t[b'a' as usize + i] = 10 + i as u8;
            t[b'A' as usize + i] = 10 + i as u8;
            i += 1;
        }
        t
    };
    const STARTS: [usize; 16] = [0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34];
    if s.len() != 36 || s[8] != b'-' || s[13] != b'-' || s[18] != b'-' || s[23] != b'-' {
        return None;
    }
    let mut out = [0u8; 16];
    let mut bad = 0u8;
    for (o, &i) in out.iter_mut().zip(STARTS.iter()) {
        let (hi, lo) = (HEX[usize::from(s[i])], HEX[usize::from(s[i + 1])]);
        bad |= hi | lo;
        *o = (hi << 4) | (lo & 0x0F);
    }
    (bad & 0x10 == 0).then_some(out)
}

/// Converts a value to the storage form of `ty` (parameters, bulk rows).
pub fn value_to_storage(v: &Value, ty: SqlType) -> Result<Stored, SqlError> {
    match (v, ty) {
        (Value::Null, _) => Ok(Stored::Null),
        (Value::String(s), t)
            if is_string(t) && !matches!(t, SqlType::Char { .. } | SqlType::NChar { .. }) =>
        {
            Ok(Stored::Text(s.clone()))
        }
        (Value::Binary(b), SqlType::VarBinary { .. } | SqlType::Image | SqlType::RowVersion) => {
            Ok(Stored::Blob(b.clone()))
        }
        (Value::Int(i), SqlType::Int | SqlType::BigInt) => Ok(Stored::Integer(i64::from(*i))),
        (Value::BigInt(i), SqlType::BigInt) => Ok(Stored::Integer(*i)),
        (Value::Float(f), SqlType::Float) => Ok(Stored::Real(*f)),
        (Value::Guid(g), SqlType::UniqueIdentifier) => Ok(Stored::Text(format_guid(g))),
        (
            Value::Decimal { mantissa, scale },
            SqlType::Decimal { scale: s, .. } | SqlType::Numeric { scale: s, .. },
        ) if *scale == s => coerce(ValueRef::Text(format_decimal(*mantissa, *scale).as_bytes()), ty),
        _ => {
            let natural = value_to_stored(v);
            coerce(ValueRef::from(&natural), ty)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The read path's shortcuts give what the general path gives.
    #[test]
    fn fast_reads_agree_with_the_general_path() {
        for text in [
            "2024-05-06 07:08:09.1234567 +05:30",
            "0001-01-01 00:00:00.0000000 +14:00",
            "0001-01-01 00:00:00.0000000 -00:01",
            "9999-12-31 23:59:59.9999999 -14:00",
            "2024-02-29 23:59:59.0000000 -08:00",
            "2024-02-29 23:59:59.1230000 +00:00",
        ] {
            for scale in 0..=7u8 {
                let ty = SqlType::DateTimeOffset { scale };
                let v = ValueRef::Text(text.as_bytes());
                let general = coerce(v, ty).and_then(|st| {
                    let r = ValueRef::from(&st);
                    let s = std::str::from_utf8(match r {
                        ValueRef::Text(t) => t,
                        _ => b"",
                    })
                    .unwrap_or("")
                    .to_owned();
                    datetime_value(parse_datetime(&s).ok_or_else(|| overflow(ty))?, ty)
                });
                let fast = to_value(v, ty);
                match (fast, general) {
                    (Ok(a), Ok(b)) => assert_eq!(a, b, "{text} as {ty:?}"),
                    (Err(_), Err(_)) => {}
                    (a, b) => panic!("{text} as {ty:?}: {a:?} vs {b:?}"),
                }
            }
        }
        for g in [
            "6F9619FF-8B86-D011-B42D-00C04FC964FF",
            "6f9619ff-8b86-d011-b42d-00c04fc964ff",
            "00000000-0000-0000-0000-000000000000",
        ] {
            assert_eq!(fast_guid(g.as_bytes()), parse_guid(g));
            assert!(fast_guid(g.as_bytes()).is_some());
        }
        for bad in [
            "6F9619FF-8B86-D011-B42D-00C04FC964FG",
            "{6F9619FF-8B86-D011-B42D-00C04FC964FF}",
            "6F9619FF8B86-D011-B42D-00C04FC964FF0",
        ] {
            assert_eq!(fast_guid(bad.as_bytes()), None, "{bad}");
        }
    }

    /// The bulk path's shortcut gives what the general path (value → text → column type) gives.
    #[test]
    fn fast_storage_agrees_with_the_general_path() {
        let mut values = Vec::new();
        for days in [0u32, 1, 738_000, 3_652_058] {
            for time in [0u64, 1, 4_999_999, 5_000_000, 863_999_999_999, 863_999_999_995] {
                for offset_minutes in [0i16, 1, -1, 330, -480, 840, -840] {
                    values.push(Value::DateTimeOffset {
                        days,
                        time,
                        offset_minutes,
                    });
                }
                values.push(Value::DateTime2 { days, time });
            }
        }
        for v in &values {
            for scale in 0..=7u8 {
                for ty in [SqlType::DateTimeOffset { scale }, SqlType::DateTime2 { scale }] {
                    let mut out = RowBuffer::default();
                    let Some(fast) = fast_storage_into(v, ty, &mut out) else {
                        assert_eq!(out.len(), 0, "{v:?} as {ty:?}: nothing appended");
                        continue;
                    };
                    let fast = fast.map(|()| out.to_stored(0..1).remove(0));
                    let stored = value_to_stored(v);
                    let slow = coerce(ValueRef::from(&stored), ty);
                    match (fast, slow) {
                        (Ok(a), Ok(b)) => assert_eq!(a, b, "{v:?} as {ty:?}"),
                        (Err(_), Err(_)) => {}
                        (a, b) => panic!("{v:?} as {ty:?}: {a:?} vs {b:?}"),
                    }
                }
            }
        }
    }

    /// The same for the other shortcuts: numbers, decimals (with rescaling and overflow),
    /// money, GUIDs and dates.
    #[test]
    fn fast_storage_agrees_for_numbers_guids_and_dates() {
        let dec = |precision, scale| SqlType::Decimal { precision, scale };
        let cases = [
            (Value::Null, SqlType::Int),
            (Value::Int(-5), SqlType::BigInt),
            (Value::SmallInt(-300), SqlType::Int),
            (Value::TinyInt(255), SqlType::SmallInt),
            (Value::BigInt(i64::MIN), SqlType::BigInt),
            (Value::Bit(true), SqlType::Bit),
            (Value::Float(-0.1), SqlType::Float),
            (Value::Real(1.5), SqlType::Real),
            (
                Value::Decimal {
                    mantissa: -12_345,
                    scale: 3,
                },
                dec(10, 2),
            ),
            (
                Value::Decimal {
                    mantissa: 5,
                    scale: 3,
                },
                dec(10, 4),
            ),
            (
                Value::Decimal {
                    mantissa: 0,
                    scale: 0,
                },
                dec(5, 2),
            ),
            (
                Value::Decimal {
                    mantissa: 12_345,
                    scale: 2,
                },
                dec(3, 2),
            ),
            (
                Value::Decimal {
                    mantissa: -99_999_999_999_999_999_999_999_999_999_999_999_999,
                    scale: 38,
                },
                SqlType::Numeric {
                    precision: 38,
                    scale: 38,
                },
            ),
            (Value::Money(-123_456_789), SqlType::Money),
            (Value::Money(i64::MAX), SqlType::Money),
            (Value::Guid([0xAB; 16]), SqlType::UniqueIdentifier),
            (
                Value::Guid([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]),
                SqlType::UniqueIdentifier,
            ),
            (Value::Date(0), SqlType::Date),
            (Value::Date(3_652_058), SqlType::Date),
        ];
        for (v, ty) in cases {
            let mut out = RowBuffer::default();
            let fast = fast_storage_into(&v, ty, &mut out)
                .unwrap_or_else(|| panic!("{v:?} as {ty:?} has a shortcut"))
                .map(|()| out.to_stored(0..1).remove(0));
            let stored = value_to_stored(&v);
            match (fast, coerce(ValueRef::from(&stored), ty)) {
                (Ok(a), Ok(b)) => assert_eq!(a, b, "{v:?} as {ty:?}"),
                (Err(a), Err(b)) => assert_eq!(a.number, b.number, "{v:?} as {ty:?}"),
                (a, b) => panic!("{v:?} as {ty:?}: {a:?} vs {b:?}"),
            }
        }
        for (minutes, text) in [(-330, "-05:30"), (840, "+14:00")] {
            let mut out = String::new();
            push_offset(&mut out, minutes);
            assert_eq!(out, text);
        }
    }

    #[test]
    fn civil_round_trip() {
        assert_eq!(days_from_civil(1, 1, 1), 0);
        assert_eq!(days_from_civil(1900, 1, 1), DAYS_TO_1900);
        for d in [0i64, 1, 59, 60, 365, 693_595, 738_000, 3_652_058] {
            let (y, m, dd) = civil_from_days(d);
            assert_eq!(days_from_civil(y, m, dd), d);
        }
        assert_eq!(format_date(3_652_058), "9999-12-31");
    }

    #[test]
    fn decimals() {
        assert_eq!(parse_decimal("-123.4500"), Some((-1_234_500, 4)));
        assert_eq!(format_decimal(-5, 3), "-0.005");
        assert_eq!(format_decimal(0, 0), "0");
        assert_eq!(format_decimal(0, 2), "0.00");
        assert_eq!(format_decimal(12_345, 2), "123.45");
        assert_eq!(format_decimal(-12_345, 5), "-0.12345");
        assert_eq!(format_decimal(7, 0), "7");
        assert_eq!(format_decimal(-100, 0), "-100");
        assert_eq!(
            format_decimal(-99_999_999_999_999_999_999_999_999_999_999_999_999, 38),
            "-0.99999999999999999999999999999999999999"
        );
        assert_eq!(format_decimal(i128::MIN + 1, 0), (i128::MIN + 1).to_string());
        assert_eq!(rescale(12_345, 3, 2), Some(1_235));
        assert_eq!(rescale(-12_345, 3, 2), Some(-1_235));
        let big = "99999999999999999999999999999999999999";
        assert_eq!(
            parse_decimal(big).map(|(m, _)| format_decimal(m, 0)),
            Some(big.to_string())
        );
    }

    /// The one-pass reader of stored decimals gives what the general parser gives, and leaves
    /// every other form to it.
    #[test]
    fn plain_decimals_parse_as_the_general_path_does() {
        let general = |s: &str| {
            let (neg, digits) = s.strip_prefix('-').map_or((false, s), |d| (true, d));
            let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
            let m: i128 = format!("{int}{frac}").parse().ok()?;
            Some((if neg { -m } else { m }, frac.len() as u8))
        };
        for s in [
            "0",
            "-0",
            "7",
            "-123.4500",
            "5.",
            ".5",
            "-.5",
            "0.0000",
            "999999999999999999",
            "-99999999999999.9999",
            "1234567890123456.78",
        ] {
            assert_eq!(parse_plain_decimal(s.as_bytes()), general(s), "{s}");
            assert_eq!(parse_decimal(s), general(s), "{s}");
        }
        // Not the stored form: the general parser's business (19+ digits, signs, spaces,
        // exponents, a second dot, nothing at all).
        for s in [
            "1234567890123456789",
            "-12345678901234567.89",
            "+5",
            " 5",
            "5 ",
            "1e3",
            "1.2.3",
            ".",
            "-",
            "",
        ] {
            assert_eq!(parse_plain_decimal(s.as_bytes()), None, "{s}");
        }
        assert_eq!(
            parse_decimal("1234567890123456789"),
            Some((1_234_567_890_123_456_789, 0))
        );
        assert_eq!(parse_decimal(" -1.50 "), Some((-150, 2)));
        assert_eq!(parse_decimal("+5"), Some((5, 0)));
        assert_eq!(parse_decimal("1.2.3"), None);
    }

    #[test]
    fn datetime_forms() {
        let v = Value::DateTime { days: 0, ticks: 2 };
        assert_eq!(
            value_to_stored(&v),
            Stored::Text("1900-01-01 00:00:00.0070000".into())
        );
        let back = to_value(ValueRef::Text(b"1900-01-01 00:00:00.007"), SqlType::DateTime);
        assert_eq!(back, Ok(v));
        let dto = Value::DateTimeOffset {
            days: 738_000,
            time: 10,
            offset_minutes: -300,
        };
        let s = value_to_stored(&dto);
        assert_eq!(
            to_value(ValueRef::from(&s), SqlType::DateTimeOffset { scale: 7 }),
            Ok(dto)
        );
    }
}
