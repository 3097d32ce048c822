//! Bulk load: `INSERT BULK` remembers the target; the BULK_LOAD message's rows are converted to
//! the target columns' types (clients such as pytds send every column as nvarchar), checked,
//! buffered, and inserted at the end inside a savepoint (or the load's own transaction) so
//! that all rows land or none.

use crate::convert::{fast_storage_into, value_to_stored};
use crate::dml::length_limit;
use crate::error::SqlError;
use crate::exec::Fail;
use crate::meta::TableMeta;
use crate::row_buffer::RowBuffer;
use crate::session::Session;
use crate::translate::{quote, sqlite_table_sql};
use crate::typename::is_string;
use crate::types::{ColumnMeta, SqlType, Value};
use crate::{Done, Interrupt, ResultSink, StatementKind};
use rusqlite::types::{Value as Stored, ValueRef};

#[derive(Debug, Clone)]
pub struct BulkColumn {
    /// Only the name matters: the BULK_LOAD COLMETADATA decides value types.
    pub name: String,
}

/// The parsed `INSERT BULK` statement.
#[derive(Debug, Clone)]
pub struct BulkTarget {
    pub name: Vec<String>,
    pub columns: Vec<BulkColumn>,
    /// Upper-case option words (KEEP_NULLS, CHECK_CONSTRAINTS, TABLOCK, ...).
    pub options: Vec<String>,
}

/// A prepared target: the table and, per INSERT BULK column, the table column index.
#[derive(Debug)]
pub struct PendingBulk {
    meta: TableMeta,
    cols: Vec<usize>,
    keep_nulls: bool,
    check_constraints: bool,
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
    /// Counts this load in [`Engine::bulk_loads`](crate::session::Engine) while it lives.
    _counted: CountedLoad,
    /// Table column per buffered value: the client's columns, then a generated identity and
    /// rowversion (the columns of `sql_all`).
    columns: Vec<usize>,
    /// Buffered rows (index) with NULLs that the column default replaces (without
    /// KEEP_NULLS), and the positions of those NULLs.
    omitted: Vec<(usize, Vec<usize>)>,
}

/// One bulk load under way, counted in the engine until dropped.
struct CountedLoad(std::sync::Arc<crate::session::Engine>);

impl std::fmt::Debug for CountedLoad {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CountedLoad")
    }
}

impl CountedLoad {
    fn new(engine: &std::sync::Arc<crate::session::Engine>) -> Self {
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

impl Session {
    pub(crate) fn prepare_bulk(&mut self, t: BulkTarget) -> Result<(), Fail> {
        let tables = self.engine.tables();
        let vt = std::collections::HashMap::new();
        let ctx = crate::translate::Ctx {
            tables: &tables,
            temp: &self.temp,
            vars: &vt,
            globals: &self.globals,
            ctes: Vec::new(),
            uses_views: false,
            row_counts: false,
            sizes: false,
        };
        let meta = ctx
            .lookup(&t.name)
            .cloned()
            .ok_or_else(|| crate::translate::invalid_object(&t.name.join(".")))?;
        let mut cols = Vec::new();
        for c in &t.columns {
            let (i, def) = meta
                .column(&c.name)
                .ok_or_else(|| SqlError::new(207, 16, format!("Invalid column name '{}'.", c.name)))?;
            if def.computed.is_some() {
                return Err(SqlError::new(271, 16, format!("The column \"{}\" cannot be modified because it is either a computed column or is the result of a UNION operator.", def.name)).into());
            }
            cols.push(i);
        }
        if t.columns.is_empty() {
            cols = meta
                .def
                .columns
                .iter()
                .enumerate()
                .filter(|(_, c)| c.computed.is_none() && c.identity.is_none())
                .map(|(i, _)| i)
                .collect();
        }
        self.pending_bulk = Some(PendingBulk {
            meta,
            cols,
            keep_nulls: t.options.iter().any(|o| o == "KEEP_NULLS"),
            check_constraints: t.options.iter().any(|o| o == "CHECK_CONSTRAINTS"),
        });
        Ok(())
    }

    pub(crate) fn bulk_begin(&mut self, columns: &[ColumnMeta]) -> Result<(), SqlError> {
        let pending = self.pending_bulk.take().ok_or_else(|| {
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
        let mut buffer = std::mem::take(&mut self.bulk_spare);
        buffer.clear();
        self.bulk = Some(Box::new(BulkState {
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
            _counted: CountedLoad::new(&self.engine),
            columns: all,
            omitted: Vec::new(),
        }));
        Ok(())
    }

    pub(crate) fn bulk_add(&mut self, row: &[Value]) {
        let Some(mut st) = self.bulk.take() else { return };
        if st.error.is_none()
            && let Err(e) = self.bulk_accept(&mut st, row)
        {
            st.error = Some(e);
        }
        self.bulk = Some(st);
    }

    /// Converts a row into the buffer; writes the buffer when it is full.
    fn bulk_accept(&mut self, st: &mut BulkState, row: &[Value]) -> Result<(), SqlError> {
        let width = st.columns.len();
        let start = st.buffer.len();
        let omitted = self.bulk_convert(st, row)?;
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
                let alone = self.engine.bulk_loads.load(std::sync::atomic::Ordering::Relaxed) == 1;
                st.buffer.bytes() > BUFFER_BYTES
                    || (alone && buffered_rows.is_multiple_of(WRITE_BATCH) && self.bulk_try_open(st)?)
            }
        };
        if write {
            self.bulk_flush(st)?;
        }
        Ok(())
    }

    /// Opens the load's transaction if SQLite's write lock is free now; `false` when another
    /// session holds it.
    fn bulk_try_open(&mut self, st: &mut BulkState) -> Result<bool, SqlError> {
        let map = |e: rusqlite::Error| crate::exec::map_sqlite(&e);
        self.conn.busy_timeout(std::time::Duration::ZERO).map_err(map)?;
        let opened = self.bulk_open(st);
        self.conn
            .busy_timeout(crate::session::LOCK_TIMEOUT)
            .map_err(map)?;
        match opened {
            Ok(()) => Ok(true),
            // 1222: "Lock request time out period exceeded", SQLite's SQLITE_BUSY.
            Err(e) if e.number == 1222 => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Opens the load's transaction (or savepoint) if needed and writes the buffered rows.
    fn bulk_flush(&mut self, st: &mut BulkState) -> Result<(), SqlError> {
        if st.open.is_none() {
            self.bulk_open(st)?;
        }
        let map = |e: rusqlite::Error| crate::exec::map_sqlite(&e);
        let meta = &st.pending.meta;
        let width = st.columns.len().max(1);
        let total = st.buffer.len() / width;
        let mut multi = self.conn.prepare_cached(&st.sql_multi).map_err(map)?;
        let mut single = self.conn.prepare_cached(&st.sql_all).map_err(map)?;
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
                        self.insert_without(meta, &st.columns, &st.buffer.to_stored(row.clone()), skip)
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
                    return Err(self.constraint_error(meta, &e, &st.columns, &row, crate::dml::Verb::Insert));
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
        &self,
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
        let mut stmt = self.conn.prepare_cached(&insert_sql(meta, &cols))?;
        for (i, v) in vals.iter().enumerate() {
            stmt.raw_bind_parameter(i + 1, *v)?;
        }
        stmt.raw_execute()
    }

    fn bulk_open(&mut self, st: &mut BulkState) -> Result<(), SqlError> {
        let map = |e: rusqlite::Error| crate::exec::map_sqlite(&e);
        let nested = self.trancount > 0;
        if nested {
            self.ensure_sqlite_tran().map_err(map)?;
            self.conn.execute_batch("SAVEPOINT __bulk").map_err(map)?;
        } else {
            self.conn.execute_batch("BEGIN IMMEDIATE").map_err(map)?;
        }
        st.open = Some(nested);
        if !st.pending.check_constraints {
            // SQL Server's bulk load skips CHECK constraints unless CHECK_CONSTRAINTS is given.
            self.conn
                .execute_batch("PRAGMA ignore_check_constraints=ON")
                .map_err(map)?;
        }
        Ok(())
    }

    /// Appends one client row to the buffer in the table's storage forms, with identity and
    /// rowversion values filled; nothing is written. Returns the positions of NULLs the
    /// column default replaces.
    fn bulk_convert(&mut self, st: &mut BulkState, row: &[Value]) -> Result<Vec<usize>, SqlError> {
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
                    if length_limit(t).is_none_or(|limit| s.len() <= limit) {
                        values.push_text(s);
                    } else {
                        values.push_stored(&self.check_length(meta, col, Stored::Text(s.clone()))?);
                    }
                    continue;
                }
                (Value::Binary(b), t @ (SqlType::VarBinary { .. } | SqlType::Image)) => {
                    if length_limit(t).is_none_or(|limit| b.len() <= limit) {
                        values.push_blob(b);
                    } else {
                        values.push_stored(&self.check_length(meta, col, Stored::Blob(b.clone()))?);
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
                    values.push_stored(&self.column_value(meta, col, ValueRef::from(&stored))?);
                }
            }
        }
        let ident = meta.identity_column().map(|(i, _)| i);
        let auto_ident = ident.filter(|i| !st.order.contains(i));
        if auto_ident.is_some() {
            let v = self.bulk_next_identity(meta);
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
            values.push_blob(&self.engine.next_rowversion());
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
                self.check_rowid_key(meta, &cols, &row, crate::dml::Verb::Insert)?;
            }
        }
        Ok(omitted)
    }

    fn bulk_next_identity(&self, meta: &TableMeta) -> i64 {
        self.engine
            .with_catalog(|c| c.identity_next(meta.object_id))
            .unwrap_or(1)
    }

    /// Ends the load's transaction or savepoint, if the load got as far as opening it.
    fn bulk_close(&mut self, st: &mut BulkState, ok: bool) -> Result<(), SqlError> {
        let Some(nested) = st.open.take() else {
            return Ok(());
        };
        let map = |e: rusqlite::Error| crate::exec::map_sqlite(&e);
        let _ = self.conn.execute_batch("PRAGMA ignore_check_constraints=OFF");
        let sql = match (nested, ok) {
            (true, true) => "RELEASE __bulk",
            (true, false) => "ROLLBACK TO __bulk; RELEASE __bulk",
            (false, true) => "COMMIT",
            (false, false) => "ROLLBACK",
        };
        self.conn.execute_batch(sql).map_err(map)
    }

    pub(crate) fn bulk_end(&mut self, sink: &mut dyn ResultSink) -> Result<(), Interrupt> {
        let Some(mut st) = self.bulk.take() else {
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
                in_transaction: self.in_transaction(),
            });
        };
        if st.error.is_none()
            && let Err(e) = self.bulk_flush(&mut st)
        {
            st.error = Some(e);
        }
        let mut error = st.error.clone();
        let open = st.open;
        let close = self.bulk_close(&mut st, error.is_none());
        if let (Err(e), None) = (close, &error) {
            st.open = open;
            let _ = self.bulk_close(&mut st, false);
            error = Some(e);
        }
        self.keep_buffer(&mut st);
        match error {
            Some(e) => {
                sink.error(&e)?;
                sink.done(Done {
                    kind: StatementKind::Insert,
                    rows: None,
                    error: true,
                    in_transaction: self.in_transaction(),
                })
            }
            None => {
                if let Some(id) = st.last_identity {
                    let oid = st.pending.meta.object_id;
                    self.engine.with_catalog(|c| c.identity_observe(oid, id));
                    self.globals.identity = Some(id);
                }
                self.globals.rowcount = st.rows as i64;
                let oid = st.pending.meta.object_id;
                self.engine.read_catalog(|c| {
                    c.usage().updated(oid);
                    c.record_rows(oid, crate::catalog::RowWriteByName::Inserted(st.rows));
                });
                sink.done(Done {
                    kind: StatementKind::Insert,
                    rows: Some(st.rows),
                    error: false,
                    in_transaction: self.in_transaction(),
                })
            }
        }
    }

    pub(crate) fn bulk_cancel(&mut self) {
        if let Some(mut st) = self.bulk.take() {
            let _ = self.bulk_close(&mut st, false);
            self.keep_buffer(&mut st);
        }
        self.pending_bulk = None;
    }

    /// Keeps the load's buffer for the next load (a chunk a second, each allocating and
    /// faulting in megabytes, showed in profiles), unless it grew past the bound.
    fn keep_buffer(&mut self, st: &mut BulkState) {
        let mut buffer = std::mem::take(&mut st.buffer);
        buffer.clear();
        // The buffer may have doubled once past the bound before it was written.
        if buffer.capacity_bytes() <= 2 * BUFFER_BYTES {
            self.bulk_spare = buffer;
        }
    }
}

fn insert_sql(meta: &TableMeta, cols: &[usize]) -> String {
    insert_sql_rows(meta, cols, 1)
}

/// `INSERT INTO t (cols) VALUES (?1, ...), (...), ...` for `rows` rows.
fn insert_sql_rows(meta: &TableMeta, cols: &[usize], rows: usize) -> String {
    let mut sql = format!(
        "INSERT INTO {} ({}) VALUES ",
        sqlite_table_sql(meta),
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
