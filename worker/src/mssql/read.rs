//! The reader half of the pipeline: one ordered keyset query per task, rows encoded straight into
//! COPY buffers and cut into chunks for the writer.

use crate::chunk_loop::{ChunkEnd, Msg};
use crate::copy::binary::{EncodeErrorKind, RawRowError, RowEncoder};
use crate::copy::checkpoint::KeyValue;
use crate::copy::chunk::ChunkLimit;
use crate::copy::row_hash::{RowFields, RowHasher, RowSink};
use crate::error_text::RowKey;
use crate::mssql::connect::TdsClient;
use crate::plan::mssql_to_pg::{KeyColumn, KeyKind, TablePlan, TaskPlan};
use crate::schema::mssql_to_pg_types::{quote_mssql, select_expr};
use bytes::Bytes;
use tiberius::numeric::Numeric;
use tiberius::{ColumnData, FromSql, KeptValues, Query, RawRow, RawValue};
use tokio::sync::mpsc::Sender;

/// Encoded bytes handed to the writer at a time. Large enough to amortise the channel, small
/// enough that memory stays flat (channel capacity x this).
pub const FLUSH_BYTES: usize = 512 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("reading {table} from SQL Server: {source}")]
    Query {
        table: String,
        #[source]
        source: tiberius::error::Error,
    },
    #[error("table {table}, row with key {key}, column {column}: {kind}")]
    Encode {
        table: String,
        key: RowKey,
        column: String,
        kind: EncodeErrorKind,
    },
    #[error("table {table}, row with key {key}, column {column}: invalid value from SQL Server: {source}")]
    Decode {
        table: String,
        key: RowKey,
        column: String,
        #[source]
        source: Box<tiberius::error::Error>,
    },
    #[error("table {table}: key column value {value} cannot be used for keyset paging")]
    Key { table: String, value: RowKey },
    #[error("checkpoint key {0} does not match the table's key")]
    CheckpointKey(RowKey),
}

impl ReadError {
    /// A value of a row that cannot be decoded or written as its target type: the same row fails
    /// every attempt.
    pub fn is_data(&self) -> bool {
        matches!(self, ReadError::Encode { .. } | ReadError::Decode { .. })
    }

    /// A row that could not be decoded or encoded, named by its table, key and column.
    fn of_row(table: String, key: String, column: String, e: RawRowError) -> Self {
        let key = RowKey(key);
        match e {
            RawRowError::Encode(e) => ReadError::Encode {
                table,
                key,
                column,
                kind: e.kind,
            },
            RawRowError::Decode { source, .. } => ReadError::Decode {
                table,
                key,
                column,
                source: Box::new(source),
            },
        }
    }
}

/// An owned query parameter.
enum Param {
    I64(i64),
    Str(String),
    Uuid(uuid::Uuid),
    Date(chrono::NaiveDate),
    DateTime(chrono::NaiveDateTime),
    Numeric(Numeric),
}

fn param_of(kind: KeyKind, v: &KeyValue) -> Option<Param> {
    Some(match (kind, v) {
        (KeyKind::Int, KeyValue::Int(i)) => Param::I64(*i),
        (KeyKind::UnicodeString | KeyKind::AnsiString, KeyValue::Str(s)) => Param::Str(s.clone()),
        (KeyKind::Uuid, KeyValue::Uuid(u)) => Param::Uuid(u.parse().ok()?),
        (KeyKind::Date, KeyValue::Date(d)) => Param::Date(d.parse().ok()?),
        (KeyKind::DateTime | KeyKind::LegacyDateTime { .. }, KeyValue::DateTime(d)) => {
            Param::DateTime(d.parse().ok()?)
        }
        (KeyKind::Decimal, KeyValue::Decimal(v, s)) => {
            Param::Numeric(Numeric::new_with_scale(v.parse().ok()?, *s))
        }
        _ => return None,
    })
}

/// The key value of a row's key column, for the checkpoint.
pub fn key_value(cell: &ColumnData<'_>) -> Option<KeyValue> {
    Some(match cell {
        ColumnData::U8(Some(v)) => KeyValue::Int(i64::from(*v)),
        ColumnData::I16(Some(v)) => KeyValue::Int(i64::from(*v)),
        ColumnData::I32(Some(v)) => KeyValue::Int(i64::from(*v)),
        ColumnData::I64(Some(v)) => KeyValue::Int(*v),
        ColumnData::String(Some(s)) => KeyValue::Str(s.to_string()),
        ColumnData::Guid(Some(u)) => KeyValue::Uuid(u.to_string()),
        ColumnData::Numeric(Some(n)) => KeyValue::Decimal(n.value().to_string(), n.scale()),
        // `FromSql` wants a `'static` value; dates borrow nothing, so a copy is one.
        ColumnData::Date(Some(d)) => KeyValue::Date(
            chrono::NaiveDate::from_sql(&ColumnData::Date(Some(*d)))
                .ok()??
                .to_string(),
        ),
        ColumnData::DateTime(Some(_))
        | ColumnData::DateTime2(Some(_))
        | ColumnData::SmallDateTime(Some(_)) => {
            let owned = match cell {
                ColumnData::DateTime(v) => ColumnData::DateTime(*v),
                ColumnData::DateTime2(v) => ColumnData::DateTime2(*v),
                ColumnData::SmallDateTime(v) => ColumnData::SmallDateTime(*v),
                _ => return None,
            };
            KeyValue::DateTime(
                chrono::NaiveDateTime::from_sql(&owned)
                    .ok()??
                    .format("%Y-%m-%dT%H:%M:%S%.f")
                    .to_string(),
            )
        }
        _ => return None,
    })
}

/// The key value of a value decoded in place.
fn raw_key_value(v: &RawValue<'_>) -> Option<KeyValue> {
    match v {
        RawValue::Data(c) => key_value(c),
        RawValue::Text(t) => Some(KeyValue::Str(t.to_str().ok()?.into_owned())),
    }
}

/// Overwrites `out` with the row's key (keeping its allocation); false if a key value cannot be
/// used for keyset paging.
fn capture_key(row: &RawRow<'_>, key: &[KeyColumn], out: &mut Vec<KeyValue>) -> bool {
    key_from(key.iter().map(|k| row.value(k.index)), out)
}

/// [`capture_key`] for a key kept by [`RawRow::keep`] from a row of `rows`.
fn decode_kept_key<S>(
    rows: &tiberius::RawRowStream<'_, S>,
    kept: &KeptValues,
    out: &mut Vec<KeyValue>,
) -> bool
where
    S: futures_util::AsyncRead + futures_util::AsyncWrite + Unpin + Send,
{
    key_from((0..kept.len()).map(|j| rows.kept_value(kept, j)), out)
}

/// Overwrites `out` with the key `values`; false at the first one that is missing or cannot be
/// used for keyset paging.
fn key_from<'v>(values: impl Iterator<Item = Option<RawValue<'v>>>, out: &mut Vec<KeyValue>) -> bool {
    out.clear();
    for v in values {
        match v.as_ref().and_then(raw_key_value) {
            Some(v) => out.push(v),
            None => return false,
        }
    }
    true
}

fn describe_key(row: &RawRow<'_>, key: Option<&[KeyColumn]>) -> String {
    match key {
        Some(key) => key
            .iter()
            .map(|k| {
                let name = row.column_name(k.index).unwrap_or("?");
                let v = match row.value(k.index) {
                    Some(v) => match raw_key_value(&v) {
                        Some(KeyValue::Int(i)) => i.to_string(),
                        Some(KeyValue::Str(s)) => format!("'{s}'"),
                        Some(KeyValue::Uuid(s) | KeyValue::Date(s) | KeyValue::DateTime(s)) => s,
                        Some(KeyValue::Decimal(v, scale)) => format!("{v}e-{scale}"),
                        None => format!("{v:?}"),
                    },
                    _ => "?".to_string(),
                };
                format!("{name}={v}")
            })
            .collect::<Vec<_>>()
            .join(", "),
        None => "(table has no key)".into(),
    }
}

/// The task's SELECT and its parameters. Rows come in key order, after `after` (the checkpoint)
/// and inside the task's partition range.
fn build_query(
    t: &TablePlan,
    task: &TaskPlan,
    after: Option<&[KeyValue]>,
) -> Result<(String, Vec<Param>), ReadError> {
    let cols = t.columns.iter().map(select_expr).collect::<Vec<_>>().join(", ");
    let mut sql = format!(
        "SELECT {cols} FROM {}.{}",
        quote_mssql(&t.source.schema),
        quote_mssql(&t.source.name)
    );
    let mut params: Vec<Param> = Vec::new();
    let mut conds: Vec<String> = Vec::new();
    let Some(key) = t.keyset.as_deref() else {
        return Ok((sql, params));
    };

    let key_name = |k: &KeyColumn| quote_mssql(&t.columns[k.index].source.name);
    let placeholder = |k: &KeyColumn, n: usize| match k.kind {
        KeyKind::AnsiString => ansi_key_param(n, t.columns[k.index].source.collation.as_deref()),
        KeyKind::LegacyDateTime { smalldatetime: false } => format!("CAST(@P{n} AS datetime)"),
        KeyKind::LegacyDateTime { smalldatetime: true } => format!("CAST(@P{n} AS smalldatetime)"),
        _ => format!("@P{n}"),
    };
    if let Some(after) = after {
        if after.len() != key.len() {
            return Err(ReadError::CheckpointKey(RowKey::of(after)));
        }
        let mut first = Vec::new();
        for (k, v) in key.iter().zip(after) {
            params.push(param_of(k.kind, v).ok_or_else(|| ReadError::CheckpointKey(RowKey::of(after)))?);
            first.push(params.len());
        }
        // (k1 > a) OR (k1 = a AND k2 > b) OR ...
        let mut ors = Vec::new();
        for i in 0..key.len() {
            let mut ands: Vec<String> = (0..i)
                .map(|j| format!("{} = {}", key_name(&key[j]), placeholder(&key[j], first[j])))
                .collect();
            ands.push(format!(
                "{} > {}",
                key_name(&key[i]),
                placeholder(&key[i], first[i])
            ));
            ors.push(format!("({})", ands.join(" AND ")));
        }
        conds.push(format!("({})", ors.join(" OR ")));
    }
    if let [k] = key {
        if let Some(lo) = task.lower {
            params.push(Param::I64(lo));
            conds.push(format!("{} > @P{}", key_name(k), params.len()));
        }
        if let Some(hi) = task.upper {
            params.push(Param::I64(hi));
            conds.push(format!("{} <= @P{}", key_name(k), params.len()));
        }
    }
    if !conds.is_empty() {
        sql.push_str(&format!(" WHERE {}", conds.join(" AND ")));
    }
    let order = key.iter().map(key_name).collect::<Vec<_>>().join(", ");
    sql.push_str(&format!(" ORDER BY {order}"));
    Ok((sql, params))
}

/// A char/varchar key's parameter (sent as nvarchar: the key as read) compared as the column
/// orders: converted to varchar in the column's own collation. The conversion happens in that
/// collation's code page (or UTF-8), which holds every character the key was read with, so it is
/// exact; converted in the database default's code page instead, a character that page lacks
/// would become '?' and the comparison would skip or repeat rows at a chunk boundary. Compared
/// as nvarchar instead, a SQL collation (`SQL_Latin1_General_CP1_CI_AS`) would order by its
/// Unicode rules, not by the varchar ones of ORDER BY.
fn ansi_key_param(n: usize, collation: Option<&str>) -> String {
    // A collation name is an identifier of letters, digits and underscores.
    match collation.filter(|c| !c.is_empty() && c.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')) {
        Some(c) => format!("CAST(@P{n} COLLATE {c} AS varchar(8000))"),
        None => format!("CAST(@P{n} AS varchar(8000))"),
    }
}

#[derive(Debug, Clone, Copy, Default)]
pub struct ReadStats {
    pub rows: u64,
}

/// Streams the task's rows into the channel as COPY bytes, cut into chunks at `limit` (rows or
/// COPY bytes; tables without a usable key are one chunk). Returns when the last chunk is sent.
/// With `digest`, each chunk's end carries the verify checksum of its rows, hashed from the very
/// bytes the target receives.
pub async fn read_task(
    client: &mut TdsClient,
    t: &TablePlan,
    task: &TaskPlan,
    after: Option<&[KeyValue]>,
    limit: ChunkLimit,
    digest: bool,
    tx: Sender<Msg>,
) -> Result<ReadStats, ReadError> {
    let table = t.source.qualified();
    let (sql, params) = build_query(t, task, after)?;
    let encoder = RowEncoder::new(t.columns.iter().map(|c| c.pg_type).collect());
    let key = t.keyset.as_deref();
    let limit = if key.is_some() {
        limit
    } else {
        ChunkLimit::UNBOUNDED
    };

    let mut query = Query::new(sql);
    for p in params {
        match p {
            Param::I64(v) => query.bind(v),
            Param::Str(v) => query.bind(v),
            Param::Uuid(v) => query.bind(v),
            Param::Date(v) => query.bind(v),
            Param::DateTime(v) => query.bind(v),
            Param::Numeric(v) => query.bind(v),
        }
    }
    let qerr = |source| ReadError::Query {
        table: table.clone(),
        source,
    };
    // Rows decoded in place from tiberius's read buffer and encoded straight into the COPY
    // buffer: no `Row`, `Vec` or `String` per row or value (bench/RESULTS.md, "Worker hot path").
    let mut rows = query.query_raw(client).await.map_err(qerr)?;

    // A `Vec` rather than a `BytesMut`: its small appends inline to plain stores, and it becomes
    // the channel's `Bytes` without a copy.
    let new_buf = || Vec::with_capacity(FLUSH_BYTES + 64 * 1024);
    let mut buf: Vec<u8> = new_buf();
    let mut in_chunk = 0u64;
    let mut chunk_bytes = 0u64;
    let mut stats = ReadStats::default();
    // The key of the last row read. Decoding it row after row cost ~10% of the worker's CPU on
    // a narrow table (bench/RESULTS.md), so rows inside a chunk only keep its wire bytes
    // (`kept`, a copy of a few bytes); it is decoded at a chunk's end, where the checkpoint
    // needs it, and for the last row of the stream.
    let key_columns: Vec<usize> = key.map_or_else(Vec::new, |k| k.iter().map(|c| c.index).collect());
    let mut kept = KeptValues::default();
    let mut kept_is_last = false;
    let mut last_key: Vec<KeyValue> = Vec::new();
    let mut last_key_ok = true;
    let mut any_row = false;
    let mut hasher = digest.then(|| RowHasher::for_types(t.columns.iter().map(|c| c.pg_type)));
    let mut chunk_digest = 0u64;
    // A closed channel means the writer failed; its error is the one to report.
    macro_rules! send {
        ($msg:expr) => {
            if tx.send($msg).await.is_err() {
                return Ok(stats);
            }
        };
    }
    loop {
        let chunk_end = {
            let Some(row) = rows.next_row().await.map_err(qerr)? else {
                break;
            };
            let before = buf.len();
            if let Err(e) = encoder.encode_raw_row(&mut buf, &row) {
                let column = t
                    .columns
                    .get(e.column())
                    .map_or_else(|| format!("#{}", e.column()), |c| c.source.name.clone());
                return Err(ReadError::of_row(table, describe_key(&row, key), column, e));
            }
            if let Some(h) = &mut hasher {
                chunk_digest = chunk_digest.wrapping_add(h.hash(&buf[before..]));
            }
            in_chunk += 1;
            chunk_bytes += (buf.len() - before) as u64;
            stats.rows += 1;
            any_row = true;
            let end = limit.reached(in_chunk, chunk_bytes);
            if let Some(k) = key {
                kept_is_last = !end && row.keep(&key_columns, &mut kept);
                if !kept_is_last {
                    last_key_ok = capture_key(&row, k, &mut last_key);
                }
            }
            if end && key.is_some() && !last_key_ok {
                return Err(ReadError::Key {
                    table: table.clone(),
                    value: RowKey(describe_key(&row, key)),
                });
            }
            end
        };
        if buf.len() >= FLUSH_BYTES {
            send!(Msg::Data(Bytes::from(std::mem::replace(&mut buf, new_buf()))));
        }
        if chunk_end {
            if !buf.is_empty() {
                send!(Msg::Data(Bytes::from(std::mem::replace(&mut buf, new_buf()))));
            }
            send!(Msg::ChunkEnd(ChunkEnd {
                last_key: key.map(|_| last_key.clone()),
                rows: in_chunk,
                done: false,
                digest: hasher.as_ref().map(|_| chunk_digest),
            }));
            in_chunk = 0;
            chunk_digest = 0;
            chunk_bytes = 0;
        }
    }
    if !buf.is_empty() {
        send!(Msg::Data(Bytes::from(std::mem::take(&mut buf))));
    }
    if kept_is_last {
        last_key_ok = decode_kept_key(&rows, &kept, &mut last_key);
    }
    let last_key = match key {
        Some(_) if any_row && last_key_ok => Some(last_key),
        Some(_) if any_row => None,
        _ => after.map(<[KeyValue]>::to_vec),
    };
    send!(Msg::ChunkEnd(ChunkEnd {
        last_key,
        rows: in_chunk,
        done: true,
        digest: hasher.as_ref().map(|_| chunk_digest),
    }));
    Ok(stats)
}

/// Rows [`hash_rows`] reads between two [`RowSink::pause`]s.
const PAUSE_ROWS: u64 = 1024;

/// Runs `sql` and hands each row, with its verify hash, to `sink`: the row encoded by `encoder`
/// into the canonical binary form and hashed by `hasher`, decoded in place like [`read_task`]'s
/// rows (no `Row` per row). For the checksum's SQL Server side, in either direction; `table`
/// names the table in errors.
pub async fn hash_rows(
    client: &mut TdsClient,
    table: &str,
    sql: String,
    encoder: &RowEncoder,
    hasher: &mut RowHasher,
    sink: &mut impl RowSink,
) -> Result<(), ReadError> {
    let qerr = |source| ReadError::Query {
        table: table.to_string(),
        source,
    };
    let mut rows = Query::new(sql).query_raw(client).await.map_err(qerr)?;
    let mut buf: Vec<u8> = Vec::with_capacity(64 * 1024);
    let mut read = 0u64;
    while let Some(row) = rows.next_row().await.map_err(qerr)? {
        buf.clear();
        if let Err(e) = encoder.encode_raw_row(&mut buf, &row) {
            let column = row
                .column_name(e.column())
                .map_or_else(|| format!("#{}", e.column()), str::to_string);
            let key = "(not tracked when verifying)".to_string();
            return Err(ReadError::of_row(table.to_string(), key, column, e));
        }
        sink.row(hasher.hash(&buf), RowFields::Row(&buf));
        read += 1;
        if read.is_multiple_of(PAUSE_ROWS) {
            sink.pause().await;
        }
    }
    Ok(())
}

/// Exact `COUNT_BIG(*)` of the source table's rows matching `filter` (a T-SQL condition).
pub async fn count_rows(
    client: &mut TdsClient,
    t: &TablePlan,
    filter: Option<&str>,
) -> Result<i64, ReadError> {
    let table = t.source.qualified();
    let filter = filter.map(|f| format!(" WHERE {f}")).unwrap_or_default();
    let sql = format!(
        "SELECT COUNT_BIG(*) FROM {}.{}{filter}",
        quote_mssql(&t.source.schema),
        quote_mssql(&t.source.name)
    );
    let qerr = |source| ReadError::Query {
        table: table.clone(),
        source,
    };
    let row = client
        .simple_query(sql)
        .await
        .map_err(qerr)?
        .into_row()
        .await
        .map_err(qerr)?;
    Ok(row
        .and_then(|r| {
            r.cells()
                .next()
                .and_then(|(_, c)| crate::mssql::introspect::cell_int(c))
        })
        .unwrap_or(0))
}

/// (min, max) of a single integer key, for range partitioning.
pub async fn int_key_bounds(client: &mut TdsClient, t: &TablePlan) -> Result<Option<(i64, i64)>, ReadError> {
    let Some(k) = t.int_key() else { return Ok(None) };
    let table = t.source.qualified();
    let col = quote_mssql(&t.columns[k].source.name);
    let from = format!(
        "{}.{}",
        quote_mssql(&t.source.schema),
        quote_mssql(&t.source.name)
    );
    // Two subqueries, each a seek to one end of the key's index. SQL Server plans MIN and MAX in
    // one SELECT as two such seeks too, but not every engine does (SQLite, behind the test
    // server, read the whole table: 0.3 s of a 10M-row table's plan).
    let sql = format!(
        "SELECT CAST((SELECT MIN({col}) FROM {from}) AS bigint), CAST((SELECT MAX({col}) FROM {from}) AS bigint)"
    );
    let qerr = |source| ReadError::Query {
        table: table.clone(),
        source,
    };
    let row = client
        .simple_query(sql)
        .await
        .map_err(qerr)?
        .into_row()
        .await
        .map_err(qerr)?;
    let Some(row) = row else { return Ok(None) };
    let mut cells = row.cells().map(|(_, c)| crate::mssql::introspect::cell_int(c));
    Ok(match (cells.next().flatten(), cells.next().flatten()) {
        (Some(a), Some(b)) => Some((a, b)),
        _ => None,
    })
}
