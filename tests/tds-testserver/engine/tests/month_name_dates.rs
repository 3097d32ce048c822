//! Dates with month names convert as SQL Server's default language (us_english) reads them,
//! in CAST and in implicit conversions; what is no such date is error 241 (242 for a
//! datetime out of its range).
#![allow(clippy::unwrap_used)]
mod common;
use common::*;
use tds_testserver_engine::Value;

const JAN_5_2020_DAYS_SINCE_1900: i32 = 43_833;
const JAN_5_2020_DAYS_SINCE_0001: u32 = 737_428;
const HOUR: u64 = 36_000_000_000;

#[test]
fn every_us_english_form_converts() {
    let (_e, mut s) = session();
    let jan5 = Value::DateTime {
        days: JAN_5_2020_DAYS_SINCE_1900,
        ticks: 0,
    };
    for text in [
        "Jan 5 2020",
        "January 5, 2020",
        "5 January 2020",
        "2020 Jan 5",
        "05-Jan-2020",
        "jan 05, 2020",
    ] {
        assert_eq!(
            scalar(&mut s, &format!("SELECT CAST('{text}' AS datetime)")),
            jan5,
            "{text}"
        );
        assert_eq!(
            scalar(&mut s, &format!("SELECT CAST('{text}' AS date)")),
            Value::Date(JAN_5_2020_DAYS_SINCE_0001),
            "{text}"
        );
    }
    assert_eq!(
        scalar(&mut s, "SELECT CAST('5 January 2020 10:30' AS datetime2)"),
        Value::DateTime2 {
            days: JAN_5_2020_DAYS_SINCE_0001,
            time: 10 * HOUR + HOUR / 2
        }
    );
    // CAST(datetime AS varchar)'s own form, with AM/PM.
    assert_eq!(
        scalar(&mut s, "SELECT CAST('Jan  5 2020 10:30PM' AS datetime)"),
        Value::DateTime {
            days: JAN_5_2020_DAYS_SINCE_1900,
            ticks: (22 * 3600 + 30 * 60) * 300
        }
    );
}

#[test]
fn implicit_conversions_read_month_names_too() {
    let (_e, mut s) = session();
    exec(
        &mut s,
        "CREATE TABLE dbo.E (Id int PRIMARY KEY, At datetime); \
         INSERT INTO dbo.E VALUES (1, 'Jan 5 2020'), (2, 'February 1, 2020 8:00AM')",
    );
    let (_, rows) = query(
        &mut s,
        "SELECT Id FROM dbo.E WHERE At > 'Jan 31 2020' ORDER BY Id",
    );
    assert_eq!(rows, vec![vec![Value::Int(2)]]);
    assert_eq!(
        scalar(&mut s, "SELECT DATEADD(day, 1, 'Jan 31 2020')"),
        Value::DateTime {
            days: JAN_5_2020_DAYS_SINCE_1900 + 27,
            ticks: 0
        }
    );
}

#[test]
fn impossible_dates_are_errors() {
    let (_e, mut s) = session();
    let failed = "Conversion failed when converting date and/or time from character string.";
    for sql in [
        "SELECT CAST('Feb 30 2020' AS datetime)",
        "SELECT CAST('Feb 30 2020' AS date)",
        "SELECT CAST('Janu 5 2020' AS datetime2)",
        "SELECT CAST('Jan 5 2020 13:00PM' AS datetime)",
        "SELECT CAST('Jan Feb 2020' AS date)",
    ] {
        let e = error(&mut s, sql);
        assert_eq!((e.number, e.message.as_str()), (241, failed), "{sql}");
    }
    assert_eq!(error(&mut s, "SELECT CAST('Jan 5 1700' AS datetime)").number, 242);
}

#[test]
fn datetime_to_string_uses_style_0_and_reads_back() {
    let (_e, mut s) = session();
    assert_eq!(
        scalar(
            &mut s,
            "SELECT CAST(CAST('2020-01-05 09:05:59' AS datetime) AS varchar(30))"
        ),
        Value::String("Jan  5 2020  9:05AM".to_string())
    );
    assert_eq!(
        scalar(
            &mut s,
            "SELECT CONVERT(varchar(30), CAST('2020-12-25 00:00' AS smalldatetime))"
        ),
        Value::String("Dec 25 2020 12:00AM".to_string())
    );
    assert_eq!(
        scalar(
            &mut s,
            "SELECT CONVERT(varchar(30), CAST('2020-12-25 12:30' AS datetime2), 100)"
        ),
        Value::String("Dec 25 2020 12:30PM".to_string())
    );
    // date and datetime2 keep their ISO default.
    assert_eq!(
        scalar(&mut s, "SELECT CAST(CAST('2020-12-25' AS date) AS varchar(30))"),
        Value::String("2020-12-25".to_string())
    );
    assert_eq!(
        scalar(
            &mut s,
            "SELECT CAST(CAST(CAST('2020-01-05 13:00' AS datetime) AS varchar(30)) AS datetime)"
        ),
        Value::DateTime {
            days: JAN_5_2020_DAYS_SINCE_1900,
            ticks: 13 * 3600 * 300
        }
    );
}

#[test]
fn explicit_date_styles() {
    let (_e, mut s) = session();
    let styled = |s: &mut tds_testserver_engine::Session, style: u32| {
        scalar(
            s,
            &format!("SELECT CONVERT(varchar(30), CAST('2020-01-05 13:04:05.997' AS datetime), {style})"),
        )
    };
    let text = |t: &str| Value::String(t.to_string());
    assert_eq!(styled(&mut s, 121), text("2020-01-05 13:04:05.997"));
    assert_eq!(styled(&mut s, 104), text("05.01.2020"));
    assert_eq!(styled(&mut s, 106), text("05 Jan 2020"));
    assert_eq!(styled(&mut s, 107), text("Jan 05, 2020"));
    assert_eq!(styled(&mut s, 111), text("2020/01/05"));
}
