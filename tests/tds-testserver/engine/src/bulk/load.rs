//! Bulk load: `INSERT BULK` remembers the target; the BULK_LOAD message's rows are converted to
//! the target columns' types (clients such as pytds send every column as nvarchar), checked,
//! buffered, and inserted at the end inside a savepoint (or the load's own transaction) so
//! that all rows land or none.

use crate::ast::quote;
use crate::catalog::RowWriteByName;
use crate::convert::row_buffer::RowBuffer;
use crate::convert::{fast_storage_into, value_to_stored};
use crate::error::SqlError;
use crate::meta::TableMeta;
use crate::results::{Done, Interrupt, ResultSink, StatementKind};
use crate::state::PendingBulk;
use crate::state::{Db, State, Tran};
use crate::transaction;
use crate::types::names::is_string;
use crate::types::{ColumnMeta, SqlType, Value};
use crate::write::column_values;
use crate::write::constraints;
use crate::write::counters;
use column_values::length_limit;
use rusqlite::types::{Value as Stored, ValueRef};

/// A session's bulk load under way, and the buffer of its last one, emptied, for the next.
#[derive(Default)]
pub(crate) struct BulkLoad {
    /// Boxed: it is taken out and put back for every row (moving the whole state showed in
    /// profiles).
    current: Option<Box<BulkState>>,
    spare: RowBuffer,
}

#[derive(Debug)]
pub struct BulkState {
    pending: PendingBulk,
    /// Table column per client column, in the client's COLMETADATA order.
    order: Vec<usize>,
    /// `None` until the rows are written: then `Some(nested)`, the load's savepoint inside an
    /// open transaction (`true`) or its own write transaction (`false`).
    open: Option<bool>,
    rows: u64,
    error: Option<SqlError>,
    last_identity: Option<i64>,
    sql_all: String,
    /// The same INSERT for `rows_per_insert` rows at once (SQLite's per-statement work,
    /// cursor set-up and statement end, showed as much as the row's own insert in profiles).
    sql_multi: String,
    rows_per_insert: usize,
    /// The table has a rowversion column the server fills.
    rowversion: bool,
    /// Converted rows not yet written, a value per `columns` entry each. SQLite has one writer at a time, and
    /// a load that wrote as its rows arrived would hold that lock while it waits on its client:
    /// when several loads run (the reverse worker's tasks), each buffers and takes the lock only
    /// to write, so they receive and convert side by side, as SQL Server runs bulk loads into one
    /// heap side by side. A load alone takes the lock as soon as it is free and writes in
    /// batches of [`WRITE_BATCH`] rows as they come. Past [`BUFFER_BYTES`] a load waits for the
    /// lock, so memory stays bounded.
    buffer: RowBuffer,
    /// Counts this load in [`Engine::bulk_loads`](crate::engine::Engine) while it lives.
    _counted: CountedLoad,
    /// Table column per buffered value: the client's columns, then a generated identity and
    /// rowversion (the columns of `sql_all`).
    columns: Vec<usize>,
    /// Buffered rows (index) with NULLs that the column default replaces (without
    /// KEEP_NULLS), and the positions of those NULLs.
    omitted: Vec<(usize, Vec<usize>)>,
}

/// One bulk load under way, counted in the engine until dropped.
struct CountedLoad(std::sync::Arc<crate::engine::Engine>);

impl std::fmt::Debug for CountedLoad {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CountedLoad")
    }
}

impl CountedLoad {
    fn new(engine: &std::sync::Arc<crate::engine::Engine>) -> Self {
        engine
            .bulk_loads
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        CountedLoad(std::sync::Arc::clone(engine))
    }
}

impl Drop for CountedLoad {
    fn drop(&mut self) {
        self.0
            .bulk_loads
            .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// How much converted data a bulk load holds before it starts writing (see `BulkState::buffer`):
/// a worker chunk of the default 50,000 rows fits with room to spare.
const BUFFER_BYTES: usize = 64 << 20;

/// Rows per write once a load is writing as its rows come.
const WRITE_BATCH: usize = 1024;

/// Rows per INSERT statement, and SQLite's limit on a statement's parameters.
const ROWS_PER_INSERT: usize = 64;
const MAX_PARAMETERS: usize = 32_766;

pub(crate) fn bulk_begin(
    db: &Db,
    load: &mut BulkLoad,
    pending: Option<PendingBulk>,
    columns: &[ColumnMeta],
) -> Result<(), SqlError> {
    let pending = pending.ok_or_else(|| {
        SqlError::new(4804, 16, "While reading current row from host, a premature end-of-message was encountered--an incoming data stream was interrupted when the server expected to see more data. The host program may have terminated. Ensure that you are using a supported client application programming interface (API).")
    })?;
    // Client columns map by name to the INSERT BULK list; positionally when names differ.
    let mut order = Vec::with_capacity(columns.len());
    for (k, c) in columns.iter().enumerate() {
        let by_name = pending
            .cols
            .iter()
            .copied()
            .find(|i| pending.meta.def.columns[*i].name.eq_ignore_ascii_case(&c.name));
        match by_name.or_else(|| pending.cols.get(k).copied()) {
            Some(i) => order.push(i),
            None => {
                return Err(SqlError::new(
                    4819,
                    16,
                    format!(
                        "Cannot bulk load. The bulk data stream was incorrectly specified as sorted or the data violates a uniqueness constraint. (column '{}' is not in the INSERT BULK list)",
                        c.name
                    ),
                ));
            }
        }
    }
    let mut all = order.clone();
    if let Some((ident, _)) = pending.meta.identity_column()
        && !all.contains(&ident)
    {
        all.push(ident);
    }
    let rv = pending
        .meta
        .def
        .columns
        .iter()
        .position(|c| c.ty == crate::types::SqlType::RowVersion);
    let rowversion = rv.is_some_and(|i| !all.contains(&i));
    if let (Some(i), true) = (rv, rowversion) {
        all.push(i);
    }
    let sql_all = insert_sql(&pending.meta, &all);
    let rows_per_insert = (MAX_PARAMETERS / all.len().max(1)).clamp(1, ROWS_PER_INSERT);
    let sql_multi = insert_sql_rows(&pending.meta, &all, rows_per_insert);
    let mut buffer = std::mem::take(&mut load.spare);
    buffer.clear();
    load.current = Some(Box::new(BulkState {
        pending,
        order,
        open: None,
        rows: 0,
        error: None,
        last_identity: None,
        sql_all,
        sql_multi,
        rows_per_insert,
        rowversion,
        buffer,
        _counted: CountedLoad::new(&db.engine),
        columns: all,
        omitted: Vec::new(),
    }));
    Ok(())
}

pub(crate) fn bulk_add(db: &Db, tran: &Tran, load: &mut BulkLoad, row: &[Value]) {
    let Some(mut st) = load.current.take() else { return };
    if st.error.is_none()
        && let Err(e) = bulk_accept(db, tran, &mut st, row)
    {
        st.error = Some(e);
    }
    load.current = Some(st);
}

/// Converts a row into the buffer; writes the buffer when it is full.
fn bulk_accept(db: &Db, tran: &Tran, st: &mut BulkState, row: &[Value]) -> Result<(), SqlError> {
    let width = st.columns.len();
    let start = st.buffer.len();
    let omitted = bulk_convert(db, st, row)?;
    if st.buffer.len() - start != width {
        return Err(SqlError::new(
            4815,
            16,
            format!(
                "Received an invalid column length from the bcp client: {} values for {width} columns.",
                st.buffer.len() - start,
            ),
        ));
    }
    let row_index = start / width.max(1);
    if !omitted.is_empty() {
        st.omitted.push((row_index, omitted));
    }
    let buffered_rows = row_index + 1;
    let write = match st.open {
        Some(_) => buffered_rows >= WRITE_BATCH,
        None => {
            // A load alone writes while its rows arrive, overlapping the inserts with the
            // client's sending (buffering everything stalled a single stream for the whole
            // write); loads side by side buffer, so that none holds the one write lock while
            // it waits on its client.
            let alone = db.engine.bulk_loads.load(std::sync::atomic::Ordering::Relaxed) == 1;
            st.buffer.bytes() > BUFFER_BYTES
                || (alone && buffered_rows.is_multiple_of(WRITE_BATCH) && bulk_try_open(db, tran, st)?)
        }
    };
    if write {
        bulk_flush(db, tran, st)?;
    }
    Ok(())
}

/// Opens the load's transaction if SQLite's write lock is free now; `false` when another
/// session holds it.
fn bulk_try_open(db: &Db, tran: &Tran, st: &mut BulkState) -> Result<bool, SqlError> {
    let map = |e: rusqlite::Error| crate::sqlite_errors::map_sqlite(&e);
    db.conn.busy_timeout(std::time::Duration::ZERO).map_err(map)?;
    let opened = bulk_open(db, tran, st);
    db.conn.busy_timeout(crate::engine::LOCK_TIMEOUT).map_err(map)?;
    match opened {
        Ok(()) => Ok(true),
        // 1222: "Lock request time out period exceeded", SQLite's SQLITE_BUSY.
        Err(e) if e.number == 1222 => Ok(false),
        Err(e) => Err(e),
    }
}

/// Opens the load's transaction (or savepoint) if needed and writes the buffered rows.
fn bulk_flush(db: &Db, tran: &Tran, st: &mut BulkState) -> Result<(), SqlError> {
    if st.open.is_none() {
        bulk_open(db, tran, st)?;
    }
    let map = |e: rusqlite::Error| crate::sqlite_errors::map_sqlite(&e);
    let meta = &st.pending.meta;
    let width = st.columns.len().max(1);
    let total = st.buffer.len() / width;
    let mut multi = db.conn.prepare_cached(&st.sql_multi).map_err(map)?;
    let mut single = db.conn.prepare_cached(&st.sql_all).map_err(map)?;
    let mut next_omitted = 0;
    let mut n = 0;
    while n < total {
        let group = (total - n).min(st.rows_per_insert);
        let first = n * width;
        let omits = st.omitted[next_omitted..]
            .iter()
            .take_while(|(row, _)| *row < n + group)
            .count();
        if group == st.rows_per_insert && omits == 0 {
            for i in 0..group * width {
                multi
                    .raw_bind_parameter(i + 1, st.buffer.param(first + i))
                    .map_err(map)?;
            }
            if multi.raw_execute().is_ok() {
                st.rows += group as u64;
                n += group;
                continue;
            }
            // A row of the group failed (and the statement left no row): find which, below.
        }
        for k in 0..group {
            let row = first + k * width..first + (k + 1) * width;
            let skip = st.omitted[next_omitted..next_omitted + omits]
                .iter()
                .find(|(r, _)| *r == n + k)
                .map(|(_, skip)| skip);
            let result = match skip {
                Some(skip) if !st.rowversion => {
                    insert_without(db, meta, &st.columns, &st.buffer.to_stored(row.clone()), skip)
                }
                _ => {
                    for (i, v) in row.clone().enumerate() {
                        single
                            .raw_bind_parameter(i + 1, st.buffer.param(v))
                            .map_err(map)?;
                    }
                    single.raw_execute()
                }
            };
            if let Err(e) = result {
                let row = st.buffer.to_stored(row);
                return Err(constraints::constraint_error(
                    db,
                    meta,
                    &e,
                    &st.columns,
                    &row,
                    constraints::Verb::Insert,
                ));
            }
            st.rows += 1;
        }
        next_omitted += omits;
        n += group;
    }
    drop((multi, single));
    st.buffer.clear();
    st.omitted.clear();
    Ok(())
}

/// Inserts a row leaving out the columns at `skip` (their defaults apply).
fn insert_without(
    db: &Db,
    meta: &TableMeta,
    columns: &[usize],
    values: &[Stored],
    skip: &[usize],
) -> Result<usize, rusqlite::Error> {
    let mut cols = Vec::new();
    let mut vals = Vec::new();
    for (k, (ci, v)) in columns.iter().zip(values).enumerate() {
        if !skip.contains(&k) {
            cols.push(*ci);
            vals.push(v);
        }
    }
    let mut stmt = db.conn.prepare_cached(&insert_sql(meta, &cols))?;
    for (i, v) in vals.iter().enumerate() {
        stmt.raw_bind_parameter(i + 1, *v)?;
    }
    stmt.raw_execute()
}

fn bulk_open(db: &Db, tran: &Tran, st: &mut BulkState) -> Result<(), SqlError> {
    let map = |e: rusqlite::Error| crate::sqlite_errors::map_sqlite(&e);
    let nested = tran.count > 0;
    if nested {
        transaction::ensure_sqlite_tran(db, tran).map_err(map)?;
        db.conn.execute_batch("SAVEPOINT __bulk").map_err(map)?;
    } else {
        db.conn.execute_batch("BEGIN IMMEDIATE").map_err(map)?;
    }
    st.open = Some(nested);
    if !st.pending.check_constraints {
        // SQL Server's bulk load skips CHECK constraints unless CHECK_CONSTRAINTS is given.
        db.conn
            .execute_batch("PRAGMA ignore_check_constraints=ON")
            .map_err(map)?;
    }
    Ok(())
}

/// Appends one client row to the buffer in the table's storage forms, with identity and
/// rowversion values filled; nothing is written. Returns the positions of NULLs the
/// column default replaces.
fn bulk_convert(db: &Db, st: &mut BulkState, row: &[Value]) -> Result<Vec<usize>, SqlError> {
    let meta = &st.pending.meta;
    let start = st.buffer.len();
    let values = &mut st.buffer;
    let mut omitted: Vec<usize> = Vec::new();
    for (k, v) in row.iter().enumerate() {
        let Some(&ci) = st.order.get(k) else { continue };
        let col = &meta.def.columns[ci];
        if v.is_null() && !st.pending.keep_nulls && col.default.is_some() {
            omitted.push(k);
            values.push_null();
            continue;
        }
        // Text and bytes are stored as they are, once their length is checked.
        match (v, col.ty) {
            (Value::String(s), t)
                if is_string(t) && !matches!(t, SqlType::Char { .. } | SqlType::NChar { .. }) =>
            {
                if !s.is_ascii() && matches!(t, SqlType::VarChar { .. } | SqlType::Text) {
                    // Stored as the column's code page holds it: this is where a character it
                    // lacks becomes `?` (a client encoding for the column has none).
                    let cp = column_values::code_page(col);
                    let kept = cp.reduce(s);
                    values.push_stored(&column_values::check_length(
                        db,
                        meta,
                        col,
                        Stored::Text(kept.into_owned()),
                    )?);
                    continue;
                }
                if length_limit(t).is_none_or(|limit| s.len() <= limit) {
                    values.push_text(s);
                } else {
                    values.push_stored(&column_values::check_length(
                        db,
                        meta,
                        col,
                        Stored::Text(s.clone()),
                    )?);
                }
                continue;
            }
            (Value::Binary(b), t @ (SqlType::VarBinary { .. } | SqlType::Image)) => {
                if length_limit(t).is_none_or(|limit| b.len() <= limit) {
                    values.push_blob(b);
                } else {
                    values.push_stored(&column_values::check_length(
                        db,
                        meta,
                        col,
                        Stored::Blob(b.clone()),
                    )?);
                }
                continue;
            }
            _ => {}
        }
        // Values already of the column's type skip the trip through text.
        match fast_storage_into(v, col.ty, values) {
            Some(r) => r?,
            None => {
                let stored = value_to_stored(v);
                values.push_stored(&column_values::column_value(
                    db,
                    meta,
                    col,
                    ValueRef::from(&stored),
                )?);
            }
        }
    }
    let ident = meta.identity_column().map(|(i, _)| i);
    let auto_ident = ident.filter(|i| !st.order.contains(i));
    if auto_ident.is_some() {
        let v = bulk_next_identity(db, meta);
        values.push_integer(v);
        st.last_identity = Some(v);
    } else if let Some((i, col)) = meta.identity_column()
        && let Some(p) = st.order.iter().position(|c| *c == i)
        && let Some(v) = values.integer(start + p)
    {
        // KEEPIDENTITY: SQL Server moves the identity to the furthest value loaded in the
        // increment's direction, not to the file's last row.
        let down = col.identity.as_ref().is_some_and(|s| s.increment < 0);
        st.last_identity = Some(match st.last_identity {
            Some(seen) if down => seen.min(v),
            Some(seen) => seen.max(v),
            None => v,
        });
    }
    if st.rowversion {
        values.push_blob(&db.engine.next_rowversion());
    }
    if let Some(rc) = meta.rowid_column() {
        // Checked here because SQLite would give a NULL key a fresh rowid.
        let given = st.order.iter().position(|c| *c == rc);
        let null = match given {
            Some(p) => values.is_null(start + p) && !omitted.contains(&p),
            None => auto_ident != Some(rc),
        };
        if null {
            let mut cols = st.order.clone();
            cols.extend(auto_ident);
            let row = values.to_stored(start..values.len());
            constraints::check_rowid_key(db, meta, &cols, &row, constraints::Verb::Insert)?;
        }
    }
    Ok(omitted)
}

fn bulk_next_identity(db: &Db, meta: &TableMeta) -> i64 {
    db.engine
        .with_catalog(|c| c.identity_next(meta.object_id))
        .unwrap_or(1)
}

/// Ends the load's transaction or savepoint, if the load got as far as opening it.
fn bulk_close(db: &Db, st: &mut BulkState, ok: bool) -> Result<(), SqlError> {
    let Some(nested) = st.open.take() else {
        return Ok(());
    };
    let map = |e: rusqlite::Error| crate::sqlite_errors::map_sqlite(&e);
    let _ = db.conn.execute_batch("PRAGMA ignore_check_constraints=OFF");
    let sql = match (nested, ok) {
        (true, true) => "RELEASE __bulk",
        (true, false) => "ROLLBACK TO __bulk; RELEASE __bulk",
        (false, true) => "COMMIT",
        (false, false) => "ROLLBACK",
    };
    db.conn.execute_batch(sql).map_err(map)
}

pub(crate) fn bulk_end(
    cx: &mut State,
    load: &mut BulkLoad,
    sink: &mut dyn ResultSink,
) -> Result<(), Interrupt> {
    let Some(mut st) = load.current.take() else {
        let e = SqlError::new(
            4804,
            16,
            "While reading current row from host, a premature end-of-message was encountered--an incoming data stream was interrupted when the server expected to see more data. The host program may have terminated. Ensure that you are using a supported client application programming interface (API).",
        );
        sink.error(&e)?;
        return sink.done(Done {
            kind: StatementKind::Insert,
            rows: None,
            error: true,
            in_transaction: cx.in_transaction(),
        });
    };
    if st.error.is_none()
        && let Err(e) = bulk_flush(&cx.db, &cx.tran, &mut st)
    {
        st.error = Some(e);
    }
    let mut error = st.error.clone();
    let open = st.open;
    let close = bulk_close(&cx.db, &mut st, error.is_none());
    if let (Err(e), None) = (close, &error) {
        st.open = open;
        let _ = bulk_close(&cx.db, &mut st, false);
        error = Some(e);
    }
    keep_buffer(load, &mut st);
    match error {
        Some(e) => {
            sink.error(&e)?;
            sink.done(Done {
                kind: StatementKind::Insert,
                rows: None,
                error: true,
                in_transaction: cx.in_transaction(),
            })
        }
        None => {
            if let Some(id) = st.last_identity {
                let oid = st.pending.meta.object_id;
                cx.db.engine.with_catalog(|c| c.identity_observe(oid, id));
                cx.vars.globals.identity = Some(id);
            }
            cx.vars.globals.rowcount = st.rows as i64;
            let oid = st.pending.meta.object_id;
            counters::statement_wrote(&cx.db, oid);
            counters::rows_written(&cx.db, oid, RowWriteByName::Inserted(st.rows));
            sink.done(Done {
                kind: StatementKind::Insert,
                rows: Some(st.rows),
                error: false,
                in_transaction: cx.in_transaction(),
            })
        }
    }
}

pub(crate) fn bulk_cancel(db: &Db, load: &mut BulkLoad) {
    if let Some(mut st) = load.current.take() {
        let _ = bulk_close(db, &mut st, false);
        keep_buffer(load, &mut st);
    }
}

/// Keeps the load's buffer for the next load (a chunk a second, each allocating and
/// faulting in megabytes, showed in profiles), unless it grew past the bound.
fn keep_buffer(load: &mut BulkLoad, st: &mut BulkState) {
    let mut buffer = std::mem::take(&mut st.buffer);
    buffer.clear();
    // The buffer may have doubled once past the bound before it was written.
    if buffer.capacity_bytes() <= 2 * BUFFER_BYTES {
        load.spare = buffer;
    }
}

fn insert_sql(meta: &TableMeta, cols: &[usize]) -> String {
    insert_sql_rows(meta, cols, 1)
}

/// `INSERT INTO t (cols) VALUES (?1, ...), (...), ...` for `rows` rows.
fn insert_sql_rows(meta: &TableMeta, cols: &[usize], rows: usize) -> String {
    let mut sql = format!(
        "INSERT INTO {} ({}) VALUES ",
        meta.sqlite_sql(),
        cols.iter()
            .map(|i| quote(&meta.def.columns[*i].name))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let mut p = 0;
    for r in 0..rows {
        sql.push_str(if r == 0 { "(" } else { ", (" });
        for c in 0..cols.len() {
            p += 1;
            if c > 0 {
                sql.push_str(", ");
            }
            sql.push_str(&format!("?{p}"));
        }
        sql.push(')');
    }
    sql
}
