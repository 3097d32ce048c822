//! Dates written with a month name, as SQL Server reads them under its default language
//! (us_english): `Jan 5 2020`, `January 5, 2020`, `5 January 2020`, `2020 Jan 5`,
//! `05-Jan-2020`, with or without a time (`10:30`, `10:30:15.123`, `10:30AM`, `Jan  5 2020
//! 10:30AM` being what CAST(datetime AS varchar) itself writes). The month is its full name
//! or three-letter abbreviation in any case; the other two parts are the day and the year,
//! told apart by the year's four digits, else by order (day first). A missing day is the
//! first of the month. Anything else with letters is no date (error 241 at the caller).

use super::calendar::{DateTimeParts, days_from_civil, days_in_month, parse_time};

const MONTHS: [&str; 12] = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
];

fn month_of(word: &str) -> Option<u32> {
    let w = word.to_ascii_lowercase();
    MONTHS
        .iter()
        .position(|m| w == *m || (w.len() == 3 && m.starts_with(w.as_str())))
        .map(|i| i as u32 + 1)
}

/// A time of day with an optional AM/PM suffix (`10:30AM`, `10:30 pm`, `10AM`).
fn time_of(text: &str) -> Option<u64> {
    let t = text.trim();
    let lower = t.to_ascii_lowercase();
    let (clock, pm) = match lower.strip_suffix("am") {
        Some(rest) => (rest.trim_end(), Some(false)),
        None => match lower.strip_suffix("pm") {
            Some(rest) => (rest.trim_end(), Some(true)),
            None => (lower.as_str(), None),
        },
    };
    let Some(pm) = pm else {
        return parse_time(clock);
    };
    let clock = if clock.contains(':') {
        clock.to_string()
    } else {
        format!("{clock}:00")
    };
    let t = parse_time(&clock)?;
    let hour_ticks = 36_000_000_000u64;
    let hour = t / hour_ticks;
    if !(1..=12).contains(&hour) && hour != 0 {
        return None;
    }
    let base = t - hour * hour_ticks;
    Some(base + (hour % 12 + if pm { 12 } else { 0 }) * hour_ticks)
}

/// Parses a date with a month name; `None` when `s` has no month name or is no such date.
pub fn parse(s: &str) -> Option<DateTimeParts> {
    let s = s.trim();
    // The time starts at the first word with a colon, or at a lone AM/PM hour ("10AM").
    let words: Vec<&str> = s.split_whitespace().collect();
    let time_at = words.iter().position(|w| {
        w.contains(':') || {
            let l = w.to_ascii_lowercase();
            (l.ends_with("am") || l.ends_with("pm")) && l[..l.len() - 2].bytes().all(|b| b.is_ascii_digit())
        }
    });
    let (date_words, time_words) = words.split_at(time_at.unwrap_or(words.len()));
    let mut month = None;
    let mut numbers: Vec<&str> = Vec::new();
    for part in date_words
        .iter()
        .flat_map(|w| w.split([',', '-', '/', '.']))
        .filter(|p| !p.is_empty())
    {
        if part.bytes().all(|b| b.is_ascii_digit()) {
            numbers.push(part);
        } else if month.is_none() {
            month = Some(month_of(part)?);
        } else {
            return None;
        }
    }
    let month = month?;
    let year_of = |t: &str| -> Option<i64> {
        let y: i64 = t.parse().ok()?;
        match t.len() {
            4 => Some(y),
            // Two-digit year cutoff 2049.
            1 | 2 => Some(if y < 50 { 2000 + y } else { 1900 + y }),
            _ => None,
        }
    };
    let (day, year): (u32, i64) = match numbers.as_slice() {
        [y] if y.len() == 4 => (1, year_of(y)?),
        [a, b] => {
            if a.len() == 4 || (a.len() > 2 && b.len() <= 2) {
                (b.parse().ok()?, year_of(a)?)
            } else {
                if a.len() > 2 {
                    return None;
                }
                (a.parse().ok()?, year_of(b)?)
            }
        }
        _ => return None,
    };
    if !(1..=9999).contains(&year) || day == 0 || day > days_in_month(year, month) {
        return None;
    }
    let time = if time_words.is_empty() {
        0
    } else {
        time_of(&time_words.join(" "))?
    };
    Some(DateTimeParts {
        days: days_from_civil(year, month, day),
        time,
        offset: None,
        has_date: true,
    })
}

#[cfg(test)]
mod tests {
    use super::super::calendar::days_from_civil;
    use super::parse;

    fn day(s: &str) -> Option<(i64, u64)> {
        parse(s).map(|p| (p.days, p.time))
    }

    #[test]
    fn forms_of_us_english() {
        let jan5 = Some((days_from_civil(2020, 1, 5), 0));
        for s in [
            "Jan 5 2020",
            "January 5, 2020",
            "5 January 2020",
            "2020 Jan 5",
            "05-Jan-2020",
            "JAN 05, 2020",
            "2020 5 Jan",
            "5 Jan, 20",
        ] {
            assert_eq!(day(s), jan5, "{s}");
        }
        assert_eq!(day("Jan 2020"), Some((days_from_civil(2020, 1, 1), 0)));
        let h = 36_000_000_000u64;
        assert_eq!(
            day("Jan  5 2020 10:30AM"),
            Some((days_from_civil(2020, 1, 5), 10 * h + h / 2))
        );
        assert_eq!(day("Jan 5 2020 12:00AM"), Some((days_from_civil(2020, 1, 5), 0)));
        assert_eq!(day("Jan 5 2020 1PM"), Some((days_from_civil(2020, 1, 5), 13 * h)));
        assert_eq!(
            day("5 January 2020 23:59:59.5"),
            Some((
                days_from_civil(2020, 1, 5),
                23 * h + 59 * h / 60 + 595 * h / 3600 / 10
            ))
        );
    }

    #[test]
    fn not_dates() {
        for s in [
            "Feb 30 2020",
            "Foo 5 2020",
            "Jan 5",
            "Jan Feb 2020",
            "Jan 5 2020 25:00",
            "Jan 5 2020 13:00PM",
            "2020-01-05",
        ] {
            assert_eq!(day(s), None, "{s}");
        }
    }
}
