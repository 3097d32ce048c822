//! The reader half of the PostgreSQL -> SQL Server pipeline: one
//! `COPY (SELECT ... WHERE key range ORDER BY key) TO STDOUT (FORMAT binary)` per task, each
//! field decoded in place (text and bytea borrowed from the COPY data) and encoded straight into
//! TDS bulk-load ROW tokens (tiberius `BulkRowEncoder`), sent in batches of encoded bytes with a
//! chunk end (and the chunk's last key) every `chunkRows` rows.

use crate::chunk_loop::{BulkRows, ChunkEnd, Msg};
use crate::copy::checkpoint::KeyValue;
use crate::copy::chunk::ChunkLimit;
use crate::copy::row_hash::{RowFields, RowHasher, RowSink};
use crate::error_text::RowKey;
use crate::plan::mssql_to_pg::TaskPlan;
use crate::plan::pg_to_mssql::PgToMssqlTablePlan;
use crate::schema::mssql_to_pg_types::quote_pg;
use crate::schema::pg_to_mssql_types::Decode;
use bytes::{Buf, BytesMut};
use futures_util::TryStreamExt;
use std::borrow::Cow;
use tiberius::{BulkRowEncoder, ColumnData};
use tokio::sync::mpsc::Sender;
use tokio_postgres::Client;

/// Rows per message to the writer (or fewer, when their encoded bytes reach `BATCH_BYTES`).
pub const BATCH_ROWS: usize = 1000;
/// Encoded bytes per message to the writer, so a batch of long rows stays small.
const BATCH_BYTES: usize = 512 * 1024;

/// Microseconds per day.
const DAY_US: i64 = 86_400_000_000;
/// Days from 0001-01-01 (SQL Server's date epoch) to 2000-01-01 (PostgreSQL's).
const DAYS_0001_TO_2000: i64 = 730_119;
/// Days from 0001-01-01 to 9999-12-31, the last day datetime2/date hold.
const DAYS_0001_TO_9999_12_31: i64 = 3_652_058;

#[derive(Debug, thiserror::Error)]
pub enum PgReadError {
    #[error("reading {table} from PostgreSQL: {source}")]
    Copy {
        table: String,
        #[source]
        source: tokio_postgres::Error,
    },
    #[error("table {table}, key ({key}), column {column}: {message}")]
    Value {
        table: String,
        key: RowKey,
        column: String,
        message: String,
    },
    #[error("PostgreSQL's binary COPY output for {0} is malformed")]
    Malformed(String),
}

impl PgReadError {
    /// A value of a row that cannot be written as its target type: the same row fails every
    /// attempt.
    pub fn is_data(&self) -> bool {
        matches!(self, PgReadError::Value { .. })
    }
}

/// Session settings for reading (and for the checksum): text forms that do not depend on the
/// server's configuration.
pub const SESSION_SETTINGS: &str = "SET intervalstyle = 'iso_8601'; SET TimeZone = 'UTC'; SET standard_conforming_strings = on; \
     SET extra_float_digits = 3; SET DateStyle = 'ISO, YMD'";

fn value_err(message: impl Into<String>) -> String {
    message.into()
}

/// Decodes one field of PostgreSQL's binary format into the value tiberius bulk-loads.
pub fn decode_field(d: Decode, raw: Option<&[u8]>) -> Result<ColumnData<'_>, String> {
    let Some(b) = raw else {
        return Ok(match d {
            Decode::Bool => ColumnData::Bit(None),
            Decode::Int2 => ColumnData::I16(None),
            Decode::Int4 => ColumnData::I32(None),
            Decode::Int8 => ColumnData::I64(None),
            Decode::Float4 => ColumnData::F32(None),
            Decode::Float8 => ColumnData::F64(None),
            Decode::Numeric { .. } | Decode::Money => ColumnData::Numeric(None),
            Decode::Date => ColumnData::Date(None),
            Decode::Time { .. } => ColumnData::Time(None),
            Decode::Timestamp { .. } => ColumnData::DateTime2(None),
            Decode::Timestamptz { .. } => ColumnData::DateTimeOffset(None),
            Decode::Uuid => ColumnData::Guid(None),
            Decode::Bytea => ColumnData::Binary(None),
            Decode::Text { .. } => ColumnData::String(None),
        });
    };
    let fixed = |n: usize| -> Result<(), String> {
        if b.len() == n {
            Ok(())
        } else {
            Err(format!("expected {n} bytes, got {}", b.len()))
        }
    };
    Ok(match d {
        Decode::Bool => {
            fixed(1)?;
            ColumnData::Bit(Some(b[0] != 0))
        }
        Decode::Int2 => {
            fixed(2)?;
            ColumnData::I16(Some(i16::from_be_bytes([b[0], b[1]])))
        }
        Decode::Int4 => {
            fixed(4)?;
            ColumnData::I32(Some(i32::from_be_bytes([b[0], b[1], b[2], b[3]])))
        }
        Decode::Int8 => {
            fixed(8)?;
            ColumnData::I64(Some(be_i64(b)))
        }
        Decode::Float4 => {
            fixed(4)?;
            let v = f32::from_be_bytes([b[0], b[1], b[2], b[3]]);
            if !v.is_finite() {
                return Err(value_err(format!("{v} cannot be stored in SQL Server's real")));
            }
            ColumnData::F32(Some(v))
        }
        Decode::Float8 => {
            fixed(8)?;
            let v = f64::from_bits(be_i64(b) as u64);
            if !v.is_finite() {
                return Err(value_err(format!("{v} cannot be stored in SQL Server's float")));
            }
            ColumnData::F64(Some(v))
        }
        Decode::Numeric { precision, scale } => {
            ColumnData::Numeric(Some(decode_numeric(b, precision, scale)?))
        }
        Decode::Money => ColumnData::Numeric(Some(decode_money(b)?)),
        Decode::Date => {
            fixed(4)?;
            let days = i32::from_be_bytes([b[0], b[1], b[2], b[3]]);
            if days == i32::MAX || days == i32::MIN {
                return Err(value_err(format!(
                    "date {}infinity has no SQL Server equivalent",
                    if days == i32::MIN { "-" } else { "" }
                )));
            }
            ColumnData::Date(Some(sql_date(i64::from(days))?))
        }
        Decode::Time { scale } => {
            fixed(8)?;
            let us = be_i64(b);
            if !(0..DAY_US).contains(&us) {
                return Err(value_err(
                    "time 24:00:00 is past SQL Server's time range (up to 23:59:59.999999)",
                ));
            }
            ColumnData::Time(Some(sql_time(us, scale)))
        }
        Decode::Timestamp { scale } => {
            fixed(8)?;
            ColumnData::DateTime2(Some(sql_datetime2(be_i64(b), scale)?))
        }
        Decode::Timestamptz { scale } => {
            fixed(8)?;
            let dt = sql_datetime2(be_i64(b), scale)?;
            ColumnData::DateTimeOffset(Some(tiberius::time::DateTimeOffset::new(dt, 0)))
        }
        Decode::Uuid => {
            fixed(16)?;
            let mut a = [0u8; 16];
            a.copy_from_slice(b);
            ColumnData::Guid(Some(uuid::Uuid::from_bytes(a)))
        }
        Decode::Bytea => ColumnData::Binary(Some(Cow::Borrowed(b))),
        Decode::Text { max_units } => {
            let s = std::str::from_utf8(b).map_err(|e| format!("invalid UTF-8: {e}"))?;
            if let Some(max) = max_units {
                // UTF-16 units never exceed UTF-8 bytes: only long values need counting.
                if b.len() > max as usize {
                    let units = s.encode_utf16().count();
                    if units > max as usize {
                        return Err(value_err(format!(
                            "value needs {units} UTF-16 code units, more than the target's {max} \
                             (characters outside the BMP take two)"
                        )));
                    }
                }
            }
            ColumnData::String(Some(Cow::Borrowed(s)))
        }
    })
}

fn be_i64(b: &[u8]) -> i64 {
    i64::from_be_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
}

fn sql_date(days_since_2000: i64) -> Result<tiberius::time::Date, String> {
    let d = days_since_2000 + DAYS_0001_TO_2000;
    if d < 0 {
        return Err(value_err(
            "date before 0001-01-01 (a BC date) is outside SQL Server's date/datetime2 range",
        ));
    }
    if d > DAYS_0001_TO_9999_12_31 {
        return Err(value_err(
            "date after 9999-12-31 is outside SQL Server's date/datetime2 range",
        ));
    }
    Ok(tiberius::time::Date::new(d as u32))
}

fn sql_time(us: i64, scale: u8) -> tiberius::time::Time {
    // PostgreSQL already rounded the value to the column's precision, so the division is exact.
    let div = 10i64.pow(u32::from(6 - scale.min(6)));
    tiberius::time::Time::new((us / div) as u64, scale)
}

fn sql_datetime2(us: i64, scale: u8) -> Result<tiberius::time::DateTime2, String> {
    if us == i64::MAX || us == i64::MIN {
        return Err(value_err(format!(
            "timestamp {}infinity has no SQL Server equivalent",
            if us == i64::MIN { "-" } else { "" }
        )));
    }
    let days = us.div_euclid(DAY_US);
    let tod = us.rem_euclid(DAY_US);
    Ok(tiberius::time::DateTime2::new(
        sql_date(days)?,
        sql_time(tod, scale),
    ))
}

/// 10^0 ..= 10^38: a table instead of `pow` per base-10000 digit group.
const POW10: [i128; 39] = {
    let mut t = [1i128; 39];
    let mut i = 1;
    while i < 39 {
        t[i] = t[i - 1] * 10;
        i += 1;
    }
    t
};

/// PostgreSQL's binary numeric (ndigits, weight, sign, dscale, base-10000 digits) as a decimal
/// at exactly `scale`, or an error when it does not fit decimal(precision, scale).
pub fn decode_numeric(b: &[u8], precision: u8, scale: u8) -> Result<tiberius::numeric::Numeric, String> {
    if b.len() < 8 {
        return Err("numeric value too short".into());
    }
    let ndigits = i16::from_be_bytes([b[0], b[1]]).max(0) as usize;
    let weight = i32::from(i16::from_be_bytes([b[2], b[3]]));
    let sign = u16::from_be_bytes([b[4], b[5]]);
    match sign {
        0xC000 => return Err("NaN cannot be stored in SQL Server's decimal".into()),
        0xD000 | 0xF000 => return Err("infinity cannot be stored in SQL Server's decimal".into()),
        _ => {}
    }
    if b.len() < 8 + 2 * ndigits {
        return Err("numeric value too short".into());
    }
    let too_big = || format!("value does not fit decimal({precision},{scale})");
    let mut unscaled: i128 = 0;
    for i in 0..ndigits {
        let g = i128::from(i16::from_be_bytes([b[8 + 2 * i], b[9 + 2 * i]]));
        if g == 0 {
            continue;
        }
        // This group is worth g * 10^(4 * (weight - i)); scaled by 10^scale.
        let exp = 4 * (weight - i as i32) + i32::from(scale);
        let term = if exp >= 0 {
            let Some(p) = POW10.get(exp as usize) else {
                return Err(too_big());
            };
            g.checked_mul(*p).ok_or_else(too_big)?
        } else {
            let div = if -exp >= 4 {
                None
            } else {
                Some(POW10[(-exp) as usize])
            };
            match div {
                Some(d) if g % d == 0 => g / d,
                _ => {
                    return Err(format!(
                        "value has more than {scale} fractional digits (target decimal({precision},{scale})); \
                         it would be rounded"
                    ));
                }
            }
        };
        unscaled = unscaled.checked_add(term).ok_or_else(too_big)?;
    }
    if POW10
        .get(usize::from(precision))
        .is_none_or(|limit| unscaled >= *limit)
    {
        return Err(too_big());
    }
    if sign == 0x4000 {
        unscaled = -unscaled;
    }
    Ok(tiberius::numeric::Numeric::new_with_scale(unscaled, scale))
}

/// SQL Server money's range in 1/10,000ths: exactly an i64.
const MONEY_RANGE: &str = "-922,337,203,685,477.5808 .. 922,337,203,685,477.5807";

/// A PostgreSQL money value (read as numeric) as SQL Server money, or an error naming money's
/// range: PostgreSQL's money reaches +-92,233,720,368,547,758.07, 100 times SQL Server's.
pub fn decode_money(b: &[u8]) -> Result<tiberius::numeric::Numeric, String> {
    let out_of_range = || format!("value is outside SQL Server money's range ({MONEY_RANGE})");
    // 38 digits hold any PostgreSQL money value; the i64 bound below is money's.
    let n = decode_numeric(b, 38, 4).map_err(|e| {
        if e.starts_with("value does not fit") {
            out_of_range()
        } else {
            e
        }
    })?;
    if i64::try_from(n.value()).is_err() {
        return Err(out_of_range());
    }
    Ok(n)
}

/// The checkpoint form of a key value.
pub fn key_value(v: &ColumnData<'_>) -> Option<KeyValue> {
    Some(match v {
        ColumnData::I16(Some(i)) => KeyValue::Int(i64::from(*i)),
        ColumnData::I32(Some(i)) => KeyValue::Int(i64::from(*i)),
        ColumnData::I64(Some(i)) => KeyValue::Int(*i),
        ColumnData::String(Some(s)) => KeyValue::Str(s.to_string()),
        ColumnData::Guid(Some(g)) => KeyValue::Uuid(g.hyphenated().to_string()),
        ColumnData::Date(Some(d)) => KeyValue::Date(date_text(d.days())),
        ColumnData::DateTime2(Some(dt)) => KeyValue::DateTime(datetime_text(dt)),
        ColumnData::DateTimeOffset(Some(dt)) => KeyValue::DateTime(datetime_text(&dt.datetime2())),
        ColumnData::Numeric(Some(n)) => KeyValue::Decimal(n.value().to_string(), n.scale()),
        _ => return None,
    })
}

fn date_text(days_since_0001: u32) -> String {
    let d = chrono::NaiveDate::from_ymd_opt(1, 1, 1)
        .and_then(|d| d.checked_add_days(chrono::Days::new(u64::from(days_since_0001))));
    d.map_or_else(String::new, |d| d.format("%Y-%m-%d").to_string())
}

fn datetime_text(dt: &tiberius::time::DateTime2) -> String {
    let t = dt.time();
    let scale = t.scale();
    let us = t.increments() * 10u64.pow(u32::from(6 - scale.min(6)));
    let secs = us / 1_000_000;
    format!(
        "{}T{:02}:{:02}:{:02}.{:06}",
        date_text(dt.date().days()),
        secs / 3600,
        secs / 60 % 60,
        secs % 60,
        us % 1_000_000
    )
}

/// A PostgreSQL literal for a stored key value of a column.
pub fn key_literal(v: &KeyValue, decode: Decode, formatted_type: &str) -> String {
    let quoted = |s: &str| format!("'{}'", s.replace('\'', "''"));
    match v {
        KeyValue::Int(i) => i.to_string(),
        KeyValue::Str(s) => format!("{}::{formatted_type}", quoted(s)),
        KeyValue::Uuid(s) => format!("{}::uuid", quoted(s)),
        KeyValue::Date(s) => format!("{}::date", quoted(s)),
        KeyValue::DateTime(s) => match decode {
            Decode::Timestamptz { .. } => format!("{}::timestamptz", quoted(&format!("{s}+00"))),
            _ => format!("{}::timestamp", quoted(s)),
        },
        KeyValue::Decimal(u, scale) => {
            let neg = u.starts_with('-');
            let digits = u.trim_start_matches('-');
            let s = usize::from(*scale);
            let padded = format!("{digits:0>width$}", width = s + 1);
            let (int, frac) = padded.split_at(padded.len() - s);
            let sign = if neg { "-" } else { "" };
            // PostgreSQL has no money-to-numeric comparison: compare money with money.
            let cast = if decode == Decode::Money {
                "::numeric::money"
            } else {
                "::numeric"
            };
            if s == 0 {
                format!("{sign}{int}{cast}")
            } else {
                format!("{sign}{int}.{frac}{cast}")
            }
        }
    }
}

/// How the checksum's PostgreSQL side sees a table's columns: each `verify_expr` cast to the type
/// PostgreSQL reports for it (a domain as its base type, a `bpchar` as itself; `record_send`
/// writes a domain's own OID otherwise), and those types' OIDs.
#[derive(Debug, Clone)]
pub struct VerifyColumns {
    pub exprs: Vec<String>,
    pub oids: Vec<u32>,
}

/// [`VerifyColumns`] of a table, learned from one prepared `SELECT verify_exprs`.
pub async fn verify_columns(
    pg: &Client,
    t: &PgToMssqlTablePlan,
) -> Result<VerifyColumns, tokio_postgres::Error> {
    let exprs: Vec<String> = t.columns.iter().map(|c| c.verify_expr.clone()).collect();
    let stmt = pg
        .prepare(&format!(
            "SELECT {} FROM {}.{}",
            exprs.join(", "),
            quote_pg(&t.source.schema),
            quote_pg(&t.source.name)
        ))
        .await?;
    let types: Vec<&tokio_postgres::types::Type> = stmt.columns().iter().map(|c| c.type_()).collect();
    Ok(VerifyColumns {
        exprs: exprs
            .iter()
            .zip(&types)
            .map(|(e, ty)| format!("CAST(({e}) AS {}.{})", quote_pg(ty.schema()), quote_pg(ty.name())))
            .collect(),
        oids: types.iter().map(|ty| ty.oid()).collect(),
    })
}

impl VerifyColumns {
    /// The hasher of the rows the copy reads ([`copy_sql`]'s `read_expr`s), giving each row the
    /// hash PostgreSQL computes over [`VerifyColumns::exprs`]. The two select the same values
    /// with the same send functions except for numerics the verify casts to the target's
    /// `numeric(p,s)` (numeric and money columns), which only changes their display scale.
    pub fn copy_hasher(&self, t: &PgToMssqlTablePlan) -> RowHasher {
        let scales = t
            .columns
            .iter()
            .map(|c| match c.decode {
                Decode::Numeric { scale, .. } => Some(u16::from(scale)),
                Decode::Money => Some(4),
                _ => None,
            })
            .collect();
        RowHasher::new(self.oids.clone()).with_numeric_scales(scales)
    }
}

/// The COPY statement of a task: `after` is the checkpointed last key.
pub fn copy_sql(t: &PgToMssqlTablePlan, task: &TaskPlan, after: Option<&[KeyValue]>) -> String {
    let cols = t
        .columns
        .iter()
        .map(|c| c.read_expr.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    let mut conds = Vec::new();
    let mut order = String::new();
    if let Some(key) = &t.key {
        let names: Vec<String> = key.iter().map(|&i| quote_pg(&t.columns[i].source.name)).collect();
        if let Some(after) = after
            && after.len() == key.len()
        {
            let lits: Vec<String> = key
                .iter()
                .zip(after)
                .map(|(&i, v)| key_literal(v, t.columns[i].decode, &t.columns[i].source.formatted))
                .collect();
            conds.push(format!("({}) > ({})", names.join(", "), lits.join(", ")));
        }
        if let [k] = names.as_slice() {
            if let Some(lo) = task.lower {
                conds.push(format!("{k} > {lo}"));
            }
            if let Some(hi) = task.upper {
                conds.push(format!("{k} <= {hi}"));
            }
        }
        order = format!(" ORDER BY {}", names.join(", "));
    }
    let filter = if conds.is_empty() {
        String::new()
    } else {
        format!(" WHERE {}", conds.join(" AND "))
    };
    format!(
        "COPY (SELECT {cols} FROM {}.{}{filter}{order}) TO STDOUT (FORMAT binary)",
        quote_pg(&t.source.schema),
        quote_pg(&t.source.name)
    )
}

/// Splits PostgreSQL binary COPY output into fields; `None` = NULL.
pub struct CopyParser {
    /// An incomplete row (or header) carried over to the next piece of input.
    buf: BytesMut,
    header_done: bool,
    /// The field list's allocation, kept between calls (empty; see [`recycle`]).
    spare: Vec<Option<&'static [u8]>>,
}

impl Default for CopyParser {
    fn default() -> Self {
        Self::new()
    }
}

/// An empty vector of field slices reusing `v`'s allocation for another lifetime (the standard
/// library collects a mapped `into_iter` in place), so rows are split without allocating.
fn recycle<'y>(mut v: Vec<Option<&[u8]>>) -> Vec<Option<&'y [u8]>> {
    v.clear();
    v.into_iter().map(|_| None).collect()
}

/// Calls `f` for every complete row at the start of `b`; returns the bytes consumed and
/// whether the trailer was reached.
fn split_rows<'b, E>(
    b: &'b [u8],
    fields: &mut Vec<Option<&'b [u8]>>,
    f: &mut impl FnMut(&[Option<&[u8]>], usize) -> Result<(), E>,
) -> Result<(usize, bool), E> {
    let mut at = 0usize;
    loop {
        let rest = &b[at..];
        if rest.len() < 2 {
            return Ok((at, false));
        }
        let n = i16::from_be_bytes([rest[0], rest[1]]);
        if n == -1 {
            return Ok((at + 2, true));
        }
        fields.clear();
        let mut p = 2usize;
        for _ in 0..n.max(0) {
            let Some(l) = rest.get(p..p + 4) else {
                return Ok((at, false));
            };
            let len = i32::from_be_bytes([l[0], l[1], l[2], l[3]]);
            p += 4;
            if len < 0 {
                fields.push(None);
            } else {
                let Some(v) = rest.get(p..p + len as usize) else {
                    return Ok((at, false));
                };
                fields.push(Some(v));
                p += len as usize;
            }
        }
        f(fields, p)?;
        at += p;
    }
}

impl CopyParser {
    pub fn new() -> Self {
        CopyParser {
            buf: BytesMut::with_capacity(64 * 1024),
            header_done: false,
            spare: Vec::new(),
        }
    }

    pub fn push(&mut self, data: &[u8]) {
        self.buf.extend_from_slice(data);
    }

    /// Consumes the 19-byte signature + flags + header extension once it is buffered.
    fn header(&mut self) -> bool {
        if !self.header_done {
            if self.buf.len() < 19 {
                return false;
            }
            let ext = u32::from_be_bytes([self.buf[15], self.buf[16], self.buf[17], self.buf[18]]) as usize;
            if self.buf.len() < 19 + ext {
                return false;
            }
            self.buf.advance(19 + ext);
            self.header_done = true;
        }
        true
    }

    /// Calls `f` with the fields (and byte length) of every complete row buffered; returns
    /// `Ok(true)` after the trailer.
    pub fn rows<E>(
        &mut self,
        mut f: impl FnMut(&[Option<&[u8]>], usize) -> Result<(), E>,
        malformed: impl Fn() -> E,
    ) -> Result<bool, E> {
        if !self.header() {
            return Ok(false);
        }
        let mut fields = recycle(std::mem::take(&mut self.spare));
        let split = split_rows(&self.buf[..], &mut fields, &mut f);
        self.spare = recycle(fields);
        let (consumed, finished) = split?;
        self.buf.advance(consumed);
        if finished && !self.buf.is_empty() {
            return Err(malformed());
        }
        Ok(finished)
    }

    /// `push(data)` then `rows(..)`, without copying `data` when nothing is carried over:
    /// PostgreSQL sends each row in its own CopyData message, so rows are split in place and
    /// only an incomplete tail is buffered.
    pub fn rows_in<E>(
        &mut self,
        data: &[u8],
        mut f: impl FnMut(&[Option<&[u8]>], usize) -> Result<(), E>,
        malformed: impl Fn() -> E,
    ) -> Result<bool, E> {
        if !self.header_done || !self.buf.is_empty() {
            self.push(data);
            return self.rows(f, malformed);
        }
        let mut fields = recycle(std::mem::take(&mut self.spare));
        let split = split_rows(data, &mut fields, &mut f);
        self.spare = recycle(fields);
        let (consumed, finished) = split?;
        if finished && consumed != data.len() {
            return Err(malformed());
        }
        self.buf.extend_from_slice(&data[consumed..]);
        Ok(finished)
    }
}

fn key_text(t: &PgToMssqlTablePlan, cells: &[ColumnData<'_>]) -> String {
    match &t.key {
        Some(key) => key
            .iter()
            .map(|&i| {
                let v = cells.get(i).and_then(key_value);
                format!(
                    "{}={}",
                    t.columns[i].source.name,
                    match v {
                        Some(KeyValue::Int(i)) => i.to_string(),
                        Some(
                            KeyValue::Str(s) | KeyValue::Uuid(s) | KeyValue::Date(s) | KeyValue::DateTime(s),
                        ) => {
                            format!("{s:?}")
                        }
                        Some(KeyValue::Decimal(u, s)) =>
                            key_literal(&KeyValue::Decimal(u, s), t.columns[i].decode, ""),
                        None => "?".into(),
                    }
                )
            })
            .collect::<Vec<_>>()
            .join(", "),
        None => "no primary key".into(),
    }
}

/// The error of a field that cannot be stored, naming the row by its key (the row's fields
/// decoded again: this runs once, on the way out).
fn value_error(
    t: &PgToMssqlTablePlan,
    decodes: &[Decode],
    fields: &[Option<&[u8]>],
    column: usize,
    message: String,
) -> PgReadError {
    let cells: Vec<ColumnData<'_>> = fields
        .iter()
        .zip(decodes)
        .map(|(f, d)| decode_field(*d, *f).unwrap_or(ColumnData::I32(None)))
        .collect();
    PgReadError::Value {
        table: t.source.qualified(),
        key: RowKey(key_text(t, &cells)),
        column: t.columns[column].source.name.clone(),
        message,
    }
}

/// Streams one task into `tx`, encoding rows with `encoder` (made for the table the writer loads,
/// its bulk columns in the order of the table's non-computed columns), cut into chunks at `limit`
/// (rows or encoded bulk-row bytes). Without a key the whole task is one chunk (it cannot resume).
/// With `digest`, each chunk's end carries the verify checksum of its rows as PostgreSQL computes
/// it ([`VerifyColumns::copy_hasher`]), so the verify reads only the target.
#[allow(clippy::too_many_arguments)]
pub async fn read_task(
    pg: &Client,
    t: &PgToMssqlTablePlan,
    task: &TaskPlan,
    after: Option<&[KeyValue]>,
    limit: ChunkLimit,
    digest: bool,
    encoder: &BulkRowEncoder,
    tx: Sender<Msg<BulkRows>>,
) -> Result<(), PgReadError> {
    let table = t.source.qualified();
    let copy_err = |source| PgReadError::Copy {
        table: table.clone(),
        source,
    };
    pg.batch_execute(SESSION_SETTINGS).await.map_err(copy_err)?;
    let mut hasher = if digest {
        Some(verify_columns(pg, t).await.map_err(copy_err)?.copy_hasher(t))
    } else {
        None
    };
    let mut chunk_digest = 0u64;
    let sql = copy_sql(t, task, after);
    let stream = pg.copy_out(&sql).await.map_err(copy_err)?;
    futures_util::pin_mut!(stream);
    let decodes: Vec<Decode> = t.columns.iter().map(|c| c.decode).collect();
    let bulk_cols: Vec<bool> = t.columns.iter().map(|c| c.computed.is_none()).collect();
    // The table column of each bulk column (an encoder error names the bulk column).
    let bulk_to_col: Vec<usize> = (0..bulk_cols.len()).filter(|&i| bulk_cols[i]).collect();
    if encoder.columns().len() != bulk_to_col.len() {
        return Err(PgReadError::Value {
            table: table.clone(),
            key: RowKey("no row read".into()),
            column: "*".into(),
            message: format!(
                "the target table has {} bulk-loadable columns, the plan {}",
                encoder.columns().len(),
                bulk_to_col.len()
            ),
        });
    }
    let key_cols: Vec<usize> = t.key.clone().unwrap_or_default();
    let keyed = t.key.is_some();
    let limit = if keyed { limit } else { ChunkLimit::UNBOUNDED };
    let mut parser = CopyParser::new();
    let mut buf = BytesMut::with_capacity(BATCH_BYTES + 64 * 1024);
    let mut batch_rows = 0usize;
    let mut any_row = false;
    let mut batch_bytes = 0u64;
    let mut in_chunk = 0u64;
    let mut chunk_bytes = 0u64;
    // The last row's key fields as raw bytes (allocations reused row after row); decoded into a
    // key only at batch and chunk ends.
    let mut last_key_raw: Vec<Option<Vec<u8>>> = vec![None; key_cols.len()];
    let decode_key = |raw: &[Option<Vec<u8>>]| -> Option<Vec<KeyValue>> {
        if !keyed {
            return None;
        }
        key_cols
            .iter()
            .zip(raw)
            .map(|(&i, r)| {
                decode_field(decodes[i], r.as_deref())
                    .ok()
                    .as_ref()
                    .and_then(key_value)
            })
            .collect()
    };
    let mut finished = false;
    // Rows are encoded synchronously in the parser callback; batch and chunk boundaries are
    // sent after it returns.
    let mut pending: Vec<Msg<BulkRows>> = Vec::new();
    while !finished {
        let Some(data) = stream.try_next().await.map_err(copy_err)? else {
            break;
        };
        finished = parser.rows_in(
            &data,
            |fields, len| {
                if fields.len() != decodes.len() {
                    return Err(PgReadError::Malformed(table.clone()));
                }
                let mut decode_error: Option<(usize, String)> = None;
                let values = fields.iter().zip(&decodes).enumerate().filter_map(|(i, (f, d))| {
                    if decode_error.is_some() {
                        return None;
                    }
                    match decode_field(*d, *f) {
                        Ok(v) => bulk_cols[i].then_some(v),
                        Err(message) => {
                            decode_error = Some((i, message));
                            None
                        }
                    }
                });
                let before = buf.len();
                let encoded = encoder.encode_row(values, &mut buf);
                if let Some((i, message)) = decode_error {
                    return Err(value_error(t, &decodes, fields, i, message));
                }
                if let Err(e) = encoded {
                    let column = bulk_to_col.get(e.column).copied().unwrap_or(0);
                    return Err(value_error(t, &decodes, fields, column, e.error.to_string()));
                }
                if let Some(h) = &mut hasher {
                    chunk_digest = chunk_digest.wrapping_add(h.hash_fields(fields));
                }
                for (slot, &i) in last_key_raw.iter_mut().zip(&key_cols) {
                    match (slot.as_mut(), fields[i]) {
                        (Some(v), Some(f)) => {
                            v.clear();
                            v.extend_from_slice(f);
                        }
                        (_, f) => *slot = f.map(<[u8]>::to_vec),
                    }
                }
                batch_rows += 1;
                any_row = true;
                batch_bytes += len as u64;
                in_chunk += 1;
                chunk_bytes += (buf.len() - before) as u64;
                let chunk_full = limit.reached(in_chunk, chunk_bytes);
                if chunk_full || batch_rows >= BATCH_ROWS || buf.len() >= BATCH_BYTES {
                    pending.push(Msg::Data(BulkRows(buf.split(), batch_bytes)));
                    batch_rows = 0;
                    batch_bytes = 0;
                }
                if chunk_full {
                    pending.push(Msg::ChunkEnd(ChunkEnd {
                        last_key: decode_key(&last_key_raw),
                        rows: in_chunk,
                        done: false,
                        digest: hasher.as_ref().map(|_| chunk_digest),
                    }));
                    in_chunk = 0;
                    chunk_digest = 0;
                    chunk_bytes = 0;
                }
                Ok(())
            },
            || PgReadError::Malformed(table.clone()),
        )?;
        for m in pending.drain(..) {
            if tx.send(m).await.is_err() {
                // The writer stopped (it reports why).
                return Ok(());
            }
        }
    }
    if !finished {
        return Err(PgReadError::Malformed(table));
    }
    if batch_rows > 0 {
        let _ = tx.send(Msg::Data(BulkRows(buf.split(), batch_bytes))).await;
    }
    // The last chunk (possibly empty) marks the task done; its key is the last row read.
    let _ = tx
        .send(Msg::ChunkEnd(ChunkEnd {
            last_key: if any_row { decode_key(&last_key_raw) } else { None },
            rows: in_chunk,
            done: true,
            digest: hasher.as_ref().map(|_| chunk_digest),
        }))
        .await;
    Ok(())
}

/// Runs `query` as `COPY (query) TO STDOUT (FORMAT binary)` and hands each row, with its verify
/// hash, to `sink`: the fields as PostgreSQL's send functions give them, hashed in `record_send` form by
/// `hasher` (one OID per selected column). For the checksum's PostgreSQL side in either direction;
/// `table` names the table in errors.
///
/// The server only reads and sends: hashing `sha256(record_send(ROW(..)))` in SQL costs it about
/// three times the CPU of this COPY, and the worker hashes as the rows arrive.
pub async fn hash_rows(
    pg: &Client,
    table: &str,
    query: &str,
    hasher: &mut RowHasher,
    sink: &mut impl RowSink,
) -> Result<(), PgReadError> {
    let copy_err = |source| PgReadError::Copy {
        table: table.to_string(),
        source,
    };
    let columns = hasher.columns();
    let stream = pg
        .copy_out(&format!("COPY ({query}) TO STDOUT (FORMAT binary)"))
        .await
        .map_err(copy_err)?;
    futures_util::pin_mut!(stream);
    let mut parser = CopyParser::new();
    let mut finished = false;
    while let Some(data) = stream.try_next().await.map_err(copy_err)? {
        finished = parser.rows_in(
            &data,
            |fields, _| {
                if fields.len() != columns {
                    return Err(PgReadError::Malformed(table.to_string()));
                }
                sink.row(hasher.hash_fields(fields), RowFields::Split(fields));
                Ok(())
            },
            || PgReadError::Malformed(table.to_string()),
        )?;
        sink.pause().await;
    }
    if !finished {
        return Err(PgReadError::Malformed(table.to_string()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn numeric(ndigits: i16, weight: i16, sign: u16, dscale: i16, digits: &[i16]) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&ndigits.to_be_bytes());
        v.extend_from_slice(&weight.to_be_bytes());
        v.extend_from_slice(&sign.to_be_bytes());
        v.extend_from_slice(&dscale.to_be_bytes());
        for d in digits {
            v.extend_from_slice(&d.to_be_bytes());
        }
        v
    }

    #[test]
    fn numeric_decodes_at_the_target_scale() {
        // 12345.678 = [1, 2345, 6780] weight 1
        let b = numeric(3, 1, 0, 3, &[1, 2345, 6780]);
        let n = decode_numeric(&b, 10, 4).unwrap();
        assert_eq!((n.value(), n.scale()), (123_456_780, 4));
        let neg = numeric(3, 1, 0x4000, 3, &[1, 2345, 6780]);
        assert_eq!(decode_numeric(&neg, 10, 3).unwrap().value(), -12_345_678);
        // Too many fractional digits for scale 2.
        assert!(decode_numeric(&b, 10, 2).is_err());
        // Too many integer digits for precision 6.
        assert!(decode_numeric(&b, 6, 2).is_err());
        assert!(decode_numeric(&numeric(0, 0, 0xC000, 0, &[]), 10, 2).is_err());
    }

    #[test]
    fn money_is_checked_against_sql_server_money_range() {
        // 922337203685477.57 = [922, 3372, 368, 5477, 5700] weight 3
        let max = numeric(5, 3, 0, 2, &[922, 3372, 368, 5477, 5700]);
        assert_eq!(decode_money(&max).unwrap().value(), 9_223_372_036_854_775_700);
        let past = numeric(5, 3, 0, 2, &[922, 3372, 368, 5477, 5900]);
        assert!(decode_money(&past).unwrap_err().contains("money's range"));
        let min = numeric(5, 3, 0x4000, 4, &[922, 3372, 368, 5477, 5808]);
        assert_eq!(decode_money(&min).unwrap().value(), i64::MIN.into());
        let below = numeric(5, 3, 0x4000, 4, &[922, 3372, 368, 5477, 5809]);
        assert!(decode_money(&below).unwrap_err().contains("money's range"));
        // 9e16: past decimal(19,4) too; still reported against money's range.
        let far = numeric(1, 4, 0, 0, &[9]);
        assert!(decode_money(&far).unwrap_err().contains("money's range"));
    }

    /// A binary COPY stream of `rows` (two fields each: int4 and nullable text).
    fn copy_stream(rows: &[(i32, Option<&str>)]) -> Vec<u8> {
        let mut v = b"PGCOPY\n\xff\r\n\0".to_vec();
        v.extend_from_slice(&0u32.to_be_bytes());
        v.extend_from_slice(&0u32.to_be_bytes());
        for (i, t) in rows {
            v.extend_from_slice(&2i16.to_be_bytes());
            v.extend_from_slice(&4i32.to_be_bytes());
            v.extend_from_slice(&i.to_be_bytes());
            match t {
                Some(t) => {
                    v.extend_from_slice(&(t.len() as i32).to_be_bytes());
                    v.extend_from_slice(t.as_bytes());
                }
                None => v.extend_from_slice(&(-1i32).to_be_bytes()),
            }
        }
        v.extend_from_slice(&(-1i16).to_be_bytes());
        v
    }

    #[test]
    fn copy_parser_splits_rows_whatever_the_message_boundaries() {
        let rows = [(1, Some("one")), (2, None), (3, Some("")), (4, Some("four four"))];
        let stream = copy_stream(&rows);
        for piece in [1, 2, 3, 7, 19, 23, 40, stream.len()] {
            let mut parser = CopyParser::new();
            let mut got = Vec::new();
            let mut lens = 0usize;
            let mut finished = false;
            for data in stream.chunks(piece) {
                assert!(!finished, "data after the trailer (piece {piece})");
                finished = parser
                    .rows_in(
                        data,
                        |fields, len| {
                            lens += len;
                            let i = i32::from_be_bytes(fields[0].unwrap().try_into().unwrap());
                            got.push((i, fields[1].map(|t| String::from_utf8(t.to_vec()).unwrap())));
                            Ok::<(), String>(())
                        },
                        || "malformed".to_string(),
                    )
                    .unwrap();
            }
            assert!(finished, "piece {piece}");
            let want: Vec<(i32, Option<String>)> =
                rows.iter().map(|(i, t)| (*i, t.map(str::to_string))).collect();
            assert_eq!(got, want, "piece {piece}");
            // Header (19) and trailer (2) are not row bytes.
            assert_eq!(lens, stream.len() - 21, "piece {piece}");
        }
        // Bytes after the trailer are malformed.
        let mut bad = stream.clone();
        bad.push(0);
        let mut parser = CopyParser::new();
        assert!(
            parser
                .rows_in(&bad, |_, _| Ok::<(), String>(()), || "malformed".to_string())
                .is_err()
        );
    }

    /// tiberius sizes every decimal it bulk-loads from `Numeric::precision` (patched in
    /// vendor/tiberius to count digits without dividing): the same as the original definition.
    #[test]
    fn tiberius_numeric_precision_counts_the_integer_part_digits() {
        use tiberius::numeric::Numeric;
        fn reference(n: Numeric) -> u8 {
            let mut result = 0;
            let mut i = n.int_part();
            while i != 0 {
                i /= 10;
                result += 1;
            }
            if result == 0 {
                1 + n.scale()
            } else {
                result + n.scale()
            }
        }
        let mut values = vec![0i128, 1, -1, 9, 10, 99_999, 100_000, i128::MAX, i128::MIN + 1];
        for p in 0..38u32 {
            let x = 10i128.pow(p);
            values.extend([x - 1, x, x + 1, -x, -(x - 1), 9 * x]);
        }
        for v in values {
            for scale in [0u8, 1, 2, 4, 9, 18, 37, 38] {
                let n = Numeric::new_with_scale(v, scale);
                assert_eq!(n.precision(), reference(n), "{v} scale {scale}");
            }
        }
    }

    #[test]
    fn key_literals() {
        assert_eq!(
            key_literal(&KeyValue::Decimal("-1205".into(), 3), Decode::Int4, ""),
            "-1.205::numeric"
        );
        assert_eq!(
            key_literal(&KeyValue::Decimal("5".into(), 2), Decode::Int4, ""),
            "0.05::numeric"
        );
        assert_eq!(
            key_literal(
                &KeyValue::Str("it's".into()),
                Decode::Text { max_units: None },
                "text"
            ),
            "'it''s'::text"
        );
        assert_eq!(
            key_literal(&KeyValue::Decimal("-1205".into(), 4), Decode::Money, ""),
            "-0.1205::numeric::money"
        );
    }
}
