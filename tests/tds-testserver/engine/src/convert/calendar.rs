//! Dates and times as numbers: days since 0001-01-01 (proleptic Gregorian) and 100 ns units
//! since midnight, the parts a parsed date/time value has, and the time-of-day text form
//! `HH:MM[:SS[.fffffff]]` that every date/time text form ends with.

pub const DAYS_TO_1900: i64 = 693_595;

pub(super) const T100_PER_DAY: u64 = 864_000_000_000;

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

pub(crate) fn days_in_month(y: i64, m: u32) -> u32 {
    match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        _ => 28,
    }
}

/// A parsed date/time literal: days since 0001-01-01, 100 ns since midnight, optional offset.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DateTimeParts {
    pub days: i64,
    pub time: u64,
    pub offset: Option<i16>,
    pub has_date: bool,
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
pub(super) fn round_time(t: u64, scale: u8) -> u64 {
    let unit = 10u64.pow(7 - u32::from(scale.min(7)));
    (t + unit / 2) / unit * unit
}

/// Shifts (days, 100 ns of the day) by `minutes`: UTC to local time with a positive shift,
/// local to UTC with a negative one. Days may leave 0001..9999; callers check.
pub(super) fn shift_minutes(days: i64, time: u64, minutes: i32) -> (i64, u64) {
    let per_day = i128::from(T100_PER_DAY);
    let total = i128::from(days) * per_day + i128::from(time) + i128::from(minutes) * 600_000_000;
    (total.div_euclid(per_day) as i64, total.rem_euclid(per_day) as u64)
}

/// 9999-12-31 in days since 0001-01-01.
pub(super) const MAX_DAYS: i64 = 3_652_058;
