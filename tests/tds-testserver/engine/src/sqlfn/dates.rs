//! Date functions: DATEADD, DATEDIFF, DATEPART, YEAR/MONTH/DAY, EOMONTH, DATEFROMPARTS.

use super::args::{int_arg, text_arg};
use crate::convert::{DateTimeParts, civil_from_days, days_from_civil, format_date, parse_datetime};
use crate::error::SqlError;
use crate::sqlite_errors::encode_error;
use crate::types::SqlType;
use crate::types::names::parse_type_name;
use rusqlite::Connection;
use rusqlite::functions::FunctionFlags;

/// Registers the date functions.
pub(super) fn register(conn: &Connection) -> rusqlite::Result<()> {
    let det = FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC;
    conn.create_scalar_function("dateadd", 4, det, |ctx| {
        let (Some(part), Some(n), Some(d)) = (text_arg(ctx, 0), int_arg(ctx, 1), text_arg(ctx, 2)) else {
            return Ok(None);
        };
        let ty = text_arg(ctx, 3)
            .and_then(|t| parse_type_name(&t))
            .unwrap_or(SqlType::DateTime);
        let p = date_part_of(&d).ok_or_else(|| {
            encode_error(&SqlError::new(
                241,
                16,
                "Conversion failed when converting date and/or time from character string.",
            ))
        })?;
        let r = dateadd(&part, n, p).map_err(|p| bad_part(&p, "dateadd"))?;
        crate::convert::format_datetime_parts(r, ty)
            .map(Some)
            .map_err(|e| encode_error(&e))
    })?;
    conn.create_scalar_function("datediff", 3, det, |ctx| {
        let (Some(part), Some(a), Some(b)) = (text_arg(ctx, 0), text_arg(ctx, 1), text_arg(ctx, 2)) else {
            return Ok(None);
        };
        let err = || {
            encode_error(&SqlError::new(
                241,
                16,
                "Conversion failed when converting date and/or time from character string.",
            ))
        };
        let (pa, pb) = (
            date_part_of(&a).ok_or_else(err)?,
            date_part_of(&b).ok_or_else(err)?,
        );
        datediff(&part, pa, pb)
            .map(Some)
            .map_err(|p| bad_part(&p, "datediff"))
    })?;
    conn.create_scalar_function("datepart", 2, det, |ctx| {
        let (Some(part), Some(d)) = (text_arg(ctx, 0), text_arg(ctx, 1)) else {
            return Ok(None);
        };
        let p = date_part_of(&d).ok_or_else(|| {
            encode_error(&SqlError::new(
                241,
                16,
                "Conversion failed when converting date and/or time from character string.",
            ))
        })?;
        datepart(&part, p).map(Some).map_err(|p| bad_part(&p, "datepart"))
    })?;
    for (name, part) in [("year", "year"), ("month", "month"), ("day", "day")] {
        conn.create_scalar_function(name, 1, det, move |ctx| {
            let Some(d) = text_arg(ctx, 0) else {
                return Ok(None);
            };
            let p = date_part_of(&d).ok_or_else(|| {
                encode_error(&SqlError::new(
                    241,
                    16,
                    "Conversion failed when converting date and/or time from character string.",
                ))
            })?;
            datepart(part, p).map(Some).map_err(|p| bad_part(&p, "datepart"))
        })?;
    }
    conn.create_scalar_function("eomonth", 1, det, |ctx| {
        let Some(d) = text_arg(ctx, 0) else {
            return Ok(None);
        };
        let Some(p) = date_part_of(&d) else {
            return Ok(None);
        };
        let (y, m, _) = civil_from_days(p.days);
        let next = add_months(
            DateTimeParts {
                days: days_from_civil(y, m, 1),
                ..p
            },
            1,
        );
        Ok(Some(format_date(next.days - 1)))
    })?;
    conn.create_scalar_function("datefromparts", 3, det, |ctx| {
        let (Some(y), Some(m), Some(d)) = (int_arg(ctx, 0), int_arg(ctx, 1), int_arg(ctx, 2)) else {
            return Ok(None);
        };
        Ok(Some(format_date(days_from_civil(y, m as u32, d as u32))))
    })?;
    Ok(())
}

fn date_part_of(s: &str) -> Option<DateTimeParts> {
    parse_datetime(s)
}

fn part_name(p: &str) -> &str {
    match p {
        "yy" | "yyyy" | "year" => "year",
        "qq" | "q" | "quarter" => "quarter",
        "mm" | "m" | "month" => "month",
        "dy" | "y" | "dayofyear" => "dayofyear",
        "dd" | "d" | "day" => "day",
        "wk" | "ww" | "week" => "week",
        "dw" | "w" | "weekday" => "weekday",
        "hh" | "hour" => "hour",
        "mi" | "n" | "minute" => "minute",
        "ss" | "s" | "second" => "second",
        "ms" | "millisecond" => "millisecond",
        "mcs" | "microsecond" => "microsecond",
        "ns" | "nanosecond" => "nanosecond",
        other => other,
    }
}

fn bad_part(p: &str, f: &str) -> rusqlite::Error {
    encode_error(&SqlError::new(
        155,
        15,
        format!("'{p}' is not a recognized {f} option."),
    ))
}

fn add_months(p: DateTimeParts, months: i64) -> DateTimeParts {
    let (y, m, d) = civil_from_days(p.days);
    let total = y * 12 + i64::from(m) - 1 + months;
    let (ny, nm) = (total.div_euclid(12), (total.rem_euclid(12) + 1) as u32);
    // Clamp to the month's last day (Jan 31 + 1 month = Feb 28/29).
    let (fy, fm) = if nm == 12 { (ny + 1, 1) } else { (ny, nm + 1) };
    let last = (days_from_civil(fy, fm, 1) - days_from_civil(ny, nm, 1)) as u32;
    let nd = d.min(last);
    DateTimeParts {
        days: days_from_civil(ny, nm, nd),
        ..p
    }
}

fn dateadd(part: &str, n: i64, p: DateTimeParts) -> Result<DateTimeParts, String> {
    let unit: u64 = match part_name(part) {
        "year" => return Ok(add_months(p, n * 12)),
        "quarter" => return Ok(add_months(p, n * 3)),
        "month" => return Ok(add_months(p, n)),
        "day" | "dayofyear" | "weekday" => 864_000_000_000,
        "week" => 7 * 864_000_000_000,
        "hour" => 36_000_000_000,
        "minute" => 600_000_000,
        "second" => 10_000_000,
        "millisecond" => 10_000,
        "microsecond" => 10,
        "nanosecond" => return Ok(p),
        other => return Err(other.to_string()),
    };
    let per_day = 864_000_000_000i128;
    let total = i128::from(p.days) * per_day + i128::from(p.time) + i128::from(n) * i128::from(unit);
    Ok(DateTimeParts {
        days: total.div_euclid(per_day) as i64,
        time: total.rem_euclid(per_day) as u64,
        ..p
    })
}

fn datediff(part: &str, a: DateTimeParts, b: DateTimeParts) -> Result<i64, String> {
    let (ya, ma, _) = civil_from_days(a.days);
    let (yb, mb, _) = civil_from_days(b.days);
    let abs = |p: DateTimeParts| i128::from(p.days) * 864_000_000_000 + i128::from(p.time);
    let div = |unit: i128| (abs(b).div_euclid(unit) - abs(a).div_euclid(unit)) as i64;
    Ok(match part_name(part) {
        "year" => yb - ya,
        "quarter" => (yb * 4 + i64::from((mb - 1) / 3)) - (ya * 4 + i64::from((ma - 1) / 3)),
        "month" => (yb * 12 + i64::from(mb)) - (ya * 12 + i64::from(ma)),
        "day" | "dayofyear" | "weekday" => b.days - a.days,
        "week" => (b.days + 1).div_euclid(7) - (a.days + 1).div_euclid(7),
        "hour" => div(36_000_000_000),
        "minute" => div(600_000_000),
        "second" => div(10_000_000),
        "millisecond" => div(10_000),
        "microsecond" => div(10),
        "nanosecond" => div(1) * 100,
        other => return Err(other.to_string()),
    })
}

fn datepart(part: &str, p: DateTimeParts) -> Result<i64, String> {
    let (y, m, d) = civil_from_days(p.days);
    Ok(match part_name(part) {
        "year" => y,
        "quarter" => i64::from((m - 1) / 3 + 1),
        "month" => i64::from(m),
        "day" => i64::from(d),
        "dayofyear" => p.days - days_from_civil(y, 1, 1) + 1,
        "weekday" => (p.days + 1).rem_euclid(7) + 1,
        "week" => (p.days - days_from_civil(y, 1, 1) + (days_from_civil(y, 1, 1) + 1).rem_euclid(7)) / 7 + 1,
        "hour" => (p.time / 36_000_000_000) as i64,
        "minute" => (p.time / 600_000_000 % 60) as i64,
        "second" => (p.time / 10_000_000 % 60) as i64,
        "millisecond" => (p.time / 10_000 % 1000) as i64,
        "microsecond" => (p.time / 10 % 1_000_000) as i64,
        "nanosecond" => (p.time % 10_000_000 * 100) as i64,
        other => return Err(other.to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn date_arithmetic() {
        let p = parse_datetime("2024-01-31 10:00:00").unwrap_or_else(|| panic!("parse"));
        let r = dateadd("month", 1, p).unwrap_or_else(|_| panic!("add"));
        assert_eq!(format_date(r.days), "2024-02-29");
        let b = parse_datetime("2025-03-01").unwrap_or_else(|| panic!("parse"));
        assert_eq!(datediff("year", p, b), Ok(1));
        assert_eq!(datediff("month", p, b), Ok(14));
    }
}
