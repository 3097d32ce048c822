//! The reader half of the PostgreSQL -> SQL Server pipeline: one
//! `COPY (SELECT ... WHERE key range ORDER BY key) TO STDOUT (FORMAT binary)` per task, the binary
//! stream decoded straight into tiberius bulk rows, sent in batches with a chunk end (and the
//! chunk's last key) every `chunkRows` rows.

use crate::checkpoint::KeyValue;
use crate::mapping::quote_pg;
use crate::mapping_pg_to_mssql::Decode;
use crate::pg::load::ChunkEnd;
use crate::pg_to_mssql::RevTablePlan;
use crate::plan::TaskPlan;
use bytes::{Buf, BytesMut};
use futures_util::TryStreamExt;
use std::borrow::Cow;
use tiberius::{ColumnData, TokenRow};
use tokio::sync::mpsc::Sender;
use tokio_postgres::Client;

/// Rows per message to the writer.
pub const BATCH_ROWS: usize = 1000;

/// Microseconds per day.
const DAY_US: i64 = 86_400_000_000;
/// Days from 0001-01-01 (SQL Server's date epoch) to 2000-01-01 (PostgreSQL's).
const DAYS_0001_TO_2000: i64 = 730_119;
/// Days from 0001-01-01 to 9999-12-31, the last day datetime2/date hold.
const DAYS_0001_TO_9999_12_31: i64 = 3_652_058;

/// What the reader sends the writer.
#[derive(Debug)]
pub enum RowsMsg {
    /// Decoded rows and the binary COPY bytes they came from.
    Rows(Vec<TokenRow<'static>>, u64),
    ChunkEnd(ChunkEnd),
}

#[derive(Debug, thiserror::Error)]
pub enum RevReadError {
    #[error("reading {table} from PostgreSQL: {source}")]
    Copy {
        table: String,
        #[source]
        source: tokio_postgres::Error,
    },
    #[error("table {table}, key ({key}), column {column}: {message}")]
    Value {
        table: String,
        key: String,
        column: String,
        message: String,
    },
    #[error("PostgreSQL's binary COPY output for {0} is malformed")]
    Malformed(String),
}

/// Session settings for reading (and for the checksum): text forms that do not depend on the
/// server's configuration.
pub const SESSION_SETTINGS: &str = "SET intervalstyle = 'iso_8601'; SET TimeZone = 'UTC'; SET standard_conforming_strings = on; \
     SET extra_float_digits = 3; SET DateStyle = 'ISO, YMD'";

fn value_err(message: impl Into<String>) -> String {
    message.into()
}

/// Decodes one field of PostgreSQL's binary format into the value tiberius bulk-loads.
pub fn decode_field(d: Decode, raw: Option<&[u8]>) -> Result<ColumnData<'static>, String> {
    let Some(b) = raw else {
        return Ok(match d {
            Decode::Bool => ColumnData::Bit(None),
            Decode::Int2 => ColumnData::I16(None),
            Decode::Int4 => ColumnData::I32(None),
            Decode::Int8 => ColumnData::I64(None),
            Decode::Float4 => ColumnData::F32(None),
            Decode::Float8 => ColumnData::F64(None),
            Decode::Numeric { .. } => ColumnData::Numeric(None),
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
        Decode::Bytea => ColumnData::Binary(Some(Cow::Owned(b.to_vec()))),
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
            ColumnData::String(Some(Cow::Owned(s.to_owned())))
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
            if exp > 38 {
                return Err(too_big());
            }
            g.checked_mul(10i128.pow(exp as u32)).ok_or_else(too_big)?
        } else {
            let div = if -exp >= 4 {
                None
            } else {
                Some(10i128.pow((-exp) as u32))
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
    if unscaled >= 10i128.pow(u32::from(precision)) {
        return Err(too_big());
    }
    if sign == 0x4000 {
        unscaled = -unscaled;
    }
    Ok(tiberius::numeric::Numeric::new_with_scale(unscaled, scale))
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
            if s == 0 {
                format!("{sign}{int}::numeric")
            } else {
                format!("{sign}{int}.{frac}::numeric")
            }
        }
    }
}

/// The COPY statement of a task: `after` is the checkpointed last key.
pub fn copy_sql(t: &RevTablePlan, task: &TaskPlan, after: Option<&[KeyValue]>) -> String {
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
    buf: BytesMut,
    header_done: bool,
}

impl Default for CopyParser {
    fn default() -> Self {
        Self::new()
    }
}

impl CopyParser {
    pub fn new() -> Self {
        CopyParser {
            buf: BytesMut::with_capacity(256 * 1024),
            header_done: false,
        }
    }

    pub fn push(&mut self, data: &[u8]) {
        self.buf.extend_from_slice(data);
    }

    /// Length of the complete row at the start of the buffer; `Some(0)` for the trailer.
    fn row_len(&self) -> Option<usize> {
        let b = &self.buf[..];
        if b.len() < 2 {
            return None;
        }
        let fields = i16::from_be_bytes([b[0], b[1]]);
        if fields == -1 {
            return Some(0);
        }
        let mut at = 2usize;
        for _ in 0..fields.max(0) {
            let l = b.get(at..at + 4)?;
            let len = i32::from_be_bytes([l[0], l[1], l[2], l[3]]);
            at += 4;
            if len > 0 {
                at += len as usize;
            }
        }
        (b.len() >= at).then_some(at)
    }

    /// Calls `f` with the fields of every complete row buffered; returns `Ok(true)` after the
    /// trailer.
    pub fn rows<E>(
        &mut self,
        mut f: impl FnMut(&[Option<&[u8]>], usize) -> Result<(), E>,
        malformed: impl Fn() -> E,
    ) -> Result<bool, E> {
        if !self.header_done {
            if self.buf.len() < 19 {
                return Ok(false);
            }
            let ext = u32::from_be_bytes([self.buf[15], self.buf[16], self.buf[17], self.buf[18]]) as usize;
            if self.buf.len() < 19 + ext {
                return Ok(false);
            }
            self.buf.advance(19 + ext);
            self.header_done = true;
        }
        let mut fields: Vec<Option<&[u8]>> = Vec::new();
        let mut consumed = 0usize;
        let mut finished = false;
        {
            let mut rest = &self.buf[..];
            loop {
                if rest.len() < 2 {
                    break;
                }
                let n = i16::from_be_bytes([rest[0], rest[1]]);
                if n == -1 {
                    consumed += 2;
                    finished = true;
                    break;
                }
                // Check the row is complete before decoding it.
                let mut at = 2usize;
                let mut complete = true;
                for _ in 0..n.max(0) {
                    let Some(l) = rest.get(at..at + 4) else {
                        complete = false;
                        break;
                    };
                    let len = i32::from_be_bytes([l[0], l[1], l[2], l[3]]);
                    at += 4;
                    if len > 0 {
                        at += len as usize;
                    }
                }
                if !complete || rest.len() < at {
                    break;
                }
                fields.clear();
                let mut p = 2usize;
                for _ in 0..n.max(0) {
                    let len = i32::from_be_bytes([rest[p], rest[p + 1], rest[p + 2], rest[p + 3]]);
                    p += 4;
                    if len < 0 {
                        fields.push(None);
                    } else {
                        let l = len as usize;
                        fields.push(Some(&rest[p..p + l]));
                        p += l;
                    }
                }
                f(&fields, at)?;
                consumed += at;
                rest = &rest[at..];
            }
        }
        self.buf.advance(consumed);
        if finished && !self.buf.is_empty() {
            return Err(malformed());
        }
        let _ = self.row_len();
        Ok(finished)
    }
}

fn key_text(t: &RevTablePlan, cells: &[ColumnData<'static>]) -> String {
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

/// Streams one task into `tx`. Without a key the whole task is one chunk (it cannot resume).
pub async fn read_task(
    pg: &Client,
    t: &RevTablePlan,
    task: &TaskPlan,
    after: Option<&[KeyValue]>,
    chunk_rows: u64,
    tx: Sender<RowsMsg>,
) -> Result<(), RevReadError> {
    let table = t.source.qualified();
    let copy_err = |source| RevReadError::Copy {
        table: table.clone(),
        source,
    };
    pg.batch_execute(SESSION_SETTINGS).await.map_err(copy_err)?;
    let sql = copy_sql(t, task, after);
    let stream = pg.copy_out(&sql).await.map_err(copy_err)?;
    futures_util::pin_mut!(stream);
    let decodes: Vec<Decode> = t.columns.iter().map(|c| c.decode).collect();
    let bulk_cols: Vec<bool> = t.columns.iter().map(|c| c.computed.is_none()).collect();
    let keyed = t.key.is_some();
    let chunk_rows = if keyed { chunk_rows.max(1) } else { u64::MAX };
    let mut parser = CopyParser::new();
    let mut batch: Vec<TokenRow<'static>> = Vec::with_capacity(BATCH_ROWS);
    let mut batch_bytes = 0u64;
    let mut in_chunk = 0u64;
    let mut last_key: Option<Vec<KeyValue>> = None;
    let mut finished = false;
    // Rows are decoded synchronously in the parser callback; chunk/batch boundaries are sent
    // after it returns.
    let mut pending: Vec<RowsMsg> = Vec::new();
    while !finished {
        let Some(data) = stream.try_next().await.map_err(copy_err)? else {
            break;
        };
        parser.push(&data);
        finished = parser.rows(
            |fields, len| {
                if fields.len() != decodes.len() {
                    return Err(RevReadError::Malformed(table.clone()));
                }
                let mut cells: Vec<ColumnData<'static>> = Vec::with_capacity(fields.len());
                let mut first_err: Option<(usize, String)> = None;
                for (i, (f, d)) in fields.iter().zip(&decodes).enumerate() {
                    match decode_field(*d, *f) {
                        Ok(v) => cells.push(v),
                        Err(m) => {
                            if first_err.is_none() {
                                first_err = Some((i, m));
                            }
                            cells.push(ColumnData::I32(None));
                        }
                    }
                }
                if let Some((i, message)) = first_err {
                    return Err(RevReadError::Value {
                        table: table.clone(),
                        key: key_text(t, &cells),
                        column: t.columns[i].source.name.clone(),
                        message,
                    });
                }
                if let Some(key) = &t.key {
                    last_key = key.iter().map(|&i| key_value(&cells[i])).collect();
                }
                let mut row = TokenRow::with_capacity(cells.len());
                // Computed columns are read (for keys) but SQL Server computes them.
                for (c, bulk) in cells.into_iter().zip(&bulk_cols) {
                    if *bulk {
                        row.push(c);
                    }
                }
                batch.push(row);
                batch_bytes += len as u64;
                in_chunk += 1;
                if in_chunk >= chunk_rows {
                    pending.push(RowsMsg::Rows(std::mem::take(&mut batch), batch_bytes));
                    batch_bytes = 0;
                    pending.push(RowsMsg::ChunkEnd(ChunkEnd {
                        last_key: last_key.clone(),
                        rows: in_chunk,
                        done: false,
                    }));
                    in_chunk = 0;
                } else if batch.len() >= BATCH_ROWS {
                    pending.push(RowsMsg::Rows(std::mem::take(&mut batch), batch_bytes));
                    batch_bytes = 0;
                }
                Ok(())
            },
            || RevReadError::Malformed(table.clone()),
        )?;
        for m in pending.drain(..) {
            if tx.send(m).await.is_err() {
                // The writer stopped (it reports why).
                return Ok(());
            }
        }
    }
    if !finished {
        return Err(RevReadError::Malformed(table));
    }
    if !batch.is_empty() {
        let _ = tx
            .send(RowsMsg::Rows(std::mem::take(&mut batch), batch_bytes))
            .await;
    }
    // The last chunk (possibly empty) marks the task done.
    let _ = tx
        .send(RowsMsg::ChunkEnd(ChunkEnd {
            last_key,
            rows: in_chunk,
            done: true,
        }))
        .await;
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
    }
}
