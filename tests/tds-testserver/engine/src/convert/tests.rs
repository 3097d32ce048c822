//! Conversions checked against each other: every shortcut gives what the general path gives.
use super::calendar::{DAYS_TO_1900, civil_from_days, days_from_civil};
use super::datetime::{format_date, parse_datetime, push_offset};
use super::decimal::{format_decimal, parse_decimal, parse_plain_decimal, rescale};
use super::errors::overflow;
use super::guid::{fast_guid, parse_guid};
use super::row_buffer::RowBuffer;
use super::storage::{coerce, fast_storage_into, value_to_stored};
use super::values::{datetime_value, to_value};
use crate::types::{SqlType, Value};
use rusqlite::types::{Value as Stored, ValueRef};

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
