//! The catalog's clock: dates it stamps on objects, sessions and index usage.

/// The current time in datetime's text form (`YYYY-MM-DD HH:MM:SS.fff`, 1/300 s resolution).
pub(crate) fn now_datetime() -> String {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let secs = since.as_secs() as i64;
    let ticks = i64::from(since.subsec_millis()) * 3 / 10;
    let ms = (ticks * 10 + 1) / 3;
    let days = secs.div_euclid(86_400);
    let tod = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_unix_days(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}.{ms:03}",
        tod / 3600,
        tod / 60 % 60,
        tod % 60
    )
}

/// (year, month, day) of days since 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_unix_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400;
    (if m <= 2 { y + 1 } else { y }, m, d)
}
