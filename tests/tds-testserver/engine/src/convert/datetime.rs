//! Date/time text: the storage forms (`YYYY-MM-DD`, `HH:MM:SS.fffffff`, datetime2, datetime,
//! smalldatetime and datetimeoffset), and the string forms SQL Server reads as dates (ISO,
//! `YYYYMMDD`, month first `M/D/YYYY`, month names).

use super::calendar::{
    DAYS_TO_1900, DateTimeParts, T100_PER_DAY, civil_from_days, days_from_civil, days_in_month, parse_time,
    round_time, shift_minutes,
};
use super::digits::{push_ascii, push_digits, put_digits};
use super::errors::{clash, overflow};
use crate::error::SqlError;
use crate::types::SqlType;

pub fn format_date(days: i64) -> String {
    let mut out = String::with_capacity(10);
    push_date(&mut out, days);
    out
}

/// `YYYY-MM-DD` (storage form; rows are formatted per value, so no `format!`).
pub(super) fn push_date(out: &mut String, days: i64) {
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
pub(super) fn datetime2_text(days: i64, t: u64) -> String {
    let mut out = String::with_capacity(27);
    push_datetime2(&mut out, days, t);
    out
}

pub(super) fn push_datetime2(out: &mut String, days: i64, t: u64) {
    push_date(out, days);
    out.push(' ');
    push_time(out, t, 7);
}

/// `YYYY-MM-DD HH:MM:SS.fffffff +HH:MM` (local date and time, then the offset), the
/// datetimeoffset storage form.
pub(super) fn datetimeoffset_text(days: i64, t: u64, offset_minutes: i16) -> String {
    let mut out = String::with_capacity(34);
    push_datetimeoffset(&mut out, days, t, offset_minutes);
    out
}

pub(super) fn push_datetimeoffset(out: &mut String, days: i64, t: u64, offset_minutes: i16) {
    push_datetime2(out, days, t);
    out.push(' ');
    push_offset(out, offset_minutes);
}

/// `+HH:MM` / `-HH:MM`.
pub(super) fn push_offset(out: &mut String, minutes: i16) {
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
        return super::month_names::parse(s);
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

pub(super) fn datetime_text(days: i64, ticks: u64) -> String {
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

/// Parses the canonical fixed-width storage forms directly (the hot path of reading rows).
pub(super) fn fast_datetime(s: &[u8]) -> Option<(i64, u64)> {
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
pub(super) fn fast_datetimeoffset(s: &[u8], scale: u8) -> Option<(u32, u64, i16)> {
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
