//! Running a query for a statement: translating it, binding the session's variables, and
//! streaming its rows to the client or collecting them; and the DONE a statement ends with.

mod tables_read;

use crate::ast::select_expr;
use crate::convert::row_decoder::{DecodeError, RowDecoder};
use crate::error::SqlError;
use crate::meta::Tables;
use crate::results::Fail;
use crate::results::{Done, EnvChange, Interrupt, ResultSink, StatementKind};
use crate::state::State;
use crate::translate::{OutCol, Translator};
use crate::types::{ColumnMeta, SqlType, Value};
use rusqlite::types::{Value as Stored, ValueRef};
use sqlparser::ast::{Expr, Query};

/// Evaluates one scalar expression (DECLARE/SET/PRINT/IF).
pub(crate) fn eval_scalar(cx: &mut State, e: Expr) -> Result<Stored, Fail> {
    let mut q = select_expr(e);
    let mut out = Collect::default();
    run_query(cx, &mut q, &mut out, false)?;
    Ok(out.first.unwrap_or(Stored::Null))
}

pub(crate) fn eval_condition(cx: &mut State, cond: Expr) -> Result<bool, Fail> {
    let case = Expr::Case {
        case_token: sqlparser::ast::helpers::attached_token::AttachedToken::empty(),
        end_token: sqlparser::ast::helpers::attached_token::AttachedToken::empty(),
        operand: None,
        conditions: vec![sqlparser::ast::CaseWhen {
            condition: cond,
            result: crate::ast::num(1),
        }],
        else_result: Some(Box::new(crate::ast::num(0))),
    };
    Ok(matches!(eval_scalar(cx, case)?, Stored::Integer(1)))
}

/// Binds every `@name` parameter of a prepared statement from the session's variables.
pub(crate) fn bind_vars(cx: &State, stmt: &mut rusqlite::CachedStatement<'_>) -> Result<(), Fail> {
    for i in 1..=stmt.parameter_count() {
        if let Some(name) = stmt.parameter_name(i) {
            let v = cx
                .vars
                .values
                .get(&name.to_lowercase())
                .map(|(_, v)| v.clone())
                .unwrap_or(Stored::Null);
            stmt.raw_bind_parameter(i, v)?;
        }
    }
    Ok(())
}

/// Translates and runs a query, streaming into `sink` (or only collecting the first value
/// when `to_client` is false). Returns the row count.
pub(crate) fn run_query(
    cx: &mut State,
    q: &mut Query,
    sink: &mut dyn ResultSink,
    to_client: bool,
) -> Result<u64, Fail> {
    let tables = cx.db.engine.tables();
    let vt = cx.vars.types();
    let (cols, uses_views, row_counts, sizes, counters) = {
        let mut ctx = Translator::new(&tables, &cx.db.temp, &vt, cx.globals());
        let c = ctx.query(q, None)?;
        (c, ctx.uses_views, ctx.row_counts, ctx.sizes, ctx.counters)
    };
    if uses_views {
        refresh_views(cx, row_counts, sizes, counters)?;
    }
    let read = tables_read::tables_read(q, &tables);
    cx.db
        .engine
        .read_catalog(|c| read.iter().for_each(|&id| c.usage().read(id)));
    let sql = q.to_string();
    tracing::trace!(%sql, "query");
    let mut stmt = cx.db.conn.prepare_cached(&sql)?;
    bind_vars(cx, &mut stmt)?;
    let mut rows = stmt.raw_query();
    let first = rows.next()?;
    let metas: Vec<ColumnMeta> = cols
        .iter()
        .enumerate()
        .map(|(i, c)| column_meta(c, first.and_then(|r| r.get_ref(i).ok())))
        .collect();
    let types: Vec<SqlType> = metas.iter().map(|m| m.ty).collect();
    sink.columns(&metas)?;
    if cx.opts.fmtonly && to_client {
        drop(rows);
        cx.done(sink, StatementKind::Select, None)?;
        return Ok(0);
    }
    let mut count = 0u64;
    let mut decoder = RowDecoder::new(types);
    let mut current = first;
    // SET ROWCOUNT n: the client gets the first n rows.
    let limit = if to_client && cx.opts.rowcount_limit > 0 {
        cx.opts.rowcount_limit
    } else {
        u64::MAX
    };
    while let Some(row) = current {
        if count >= limit {
            break;
        }
        let values = decoder.decode(row).map_err(|e| match e {
            DecodeError::Sqlite(e) => Fail::from(e),
            DecodeError::Sql(e) => Fail::from(e),
        })?;
        sink.row(values)?;
        count += 1;
        current = rows.next()?;
    }
    drop(rows);
    if to_client {
        cx.vars.globals.rowcount = count as i64;
        cx.done(sink, StatementKind::Select, Some(count))?;
    }
    Ok(count)
}

/// Re-materialises the system views when the catalog changed (or row counts are read);
/// `sizes`: measure the tables' bytes too (a walk over their pages). `counters`: the statement
/// reads the counter views, which alone are rebuilt when the catalog did not change.
pub(crate) fn refresh_views(
    cx: &mut State,
    row_counts: bool,
    sizes: bool,
    counters: bool,
) -> Result<(), Fail> {
    let version = cx.db.engine.read_catalog(|c| c.version());
    if cx.db.views_version == Some(version) && !row_counts {
        if counters {
            let (conn, sid) = (&cx.db.conn, cx.db.session_id);
            let r = cx.db.engine.read_catalog(|c| {
                crate::catalog::views::refresh_counters(
                    conn,
                    c,
                    sid,
                    SqliteSizes {
                        conn,
                        catalog: c,
                        bytes: false,
                    },
                )
            });
            r.map_err(|e| {
                tracing::error!(error = %e, "counter views could not be refreshed");
                crate::sqlite_errors::no_plan()
            })?;
        }
        return Ok(());
    }
    let conn = &cx.db.conn;
    let sid = cx.db.session_id;
    let r = cx.db.engine.read_catalog(|c| {
        crate::catalog::views::refresh(
            conn,
            c,
            sid,
            SqliteSizes {
                conn,
                catalog: c,
                bytes: sizes,
            },
        )
    });
    r.map_err(|e| {
        // An engine defect, not the client's: the details go to the server log.
        tracing::error!(error = %e, "catalog views could not be refreshed");
        crate::sqlite_errors::no_plan()
    })?;
    cx.db.views_version = Some(version);
    Ok(())
}

/// The COLMETADATA of an output column; unknown types are decided by the first row's value.
pub fn column_meta(c: &OutCol, first: Option<ValueRef<'_>>) -> ColumnMeta {
    let ty = c.ty.ty.unwrap_or(match first {
        Some(ValueRef::Integer(i)) if i32::try_from(i).is_ok() => SqlType::Int,
        Some(ValueRef::Integer(_)) => SqlType::BigInt,
        Some(ValueRef::Real(_)) => SqlType::Float,
        Some(ValueRef::Text(_)) => SqlType::NVarChar { len: Some(4000) },
        Some(ValueRef::Blob(_)) => SqlType::VarBinary { len: None },
        _ => SqlType::Int,
    });
    ColumnMeta {
        name: c.name.clone(),
        ty,
        nullable: c.ty.nullable,
        identity: c.identity,
        computed: c.computed,
        updateable: c.updateable,
        table_name: if matches!(ty, SqlType::Text | SqlType::NText | SqlType::Image) {
            c.table.clone()
        } else {
            Vec::new()
        },
        collation: c.collation,
    }
}

/// An owned copy of a SQLite value.
pub fn owned(v: ValueRef<'_>) -> Stored {
    match v {
        ValueRef::Null => Stored::Null,
        ValueRef::Integer(i) => Stored::Integer(i),
        ValueRef::Real(f) => Stored::Real(f),
        ValueRef::Text(t) => Stored::Text(String::from_utf8_lossy(t).into_owned()),
        ValueRef::Blob(b) => Stored::Blob(b.to_vec()),
    }
}

/// Collects the first value of a scalar query.
#[derive(Default)]
pub struct Collect {
    pub first: Option<Stored>,
    pub rows: Vec<Vec<Value>>,
    pub columns: Vec<ColumnMeta>,
}

impl ResultSink for Collect {
    fn columns(&mut self, columns: &[ColumnMeta]) -> Result<(), Interrupt> {
        self.columns = columns.to_vec();
        Ok(())
    }
    fn row(&mut self, row: &[Value]) -> Result<(), Interrupt> {
        if self.first.is_none() {
            self.first = Some(match row.first() {
                Some(v) => crate::convert::value_to_stored(v),
                None => Stored::Null,
            });
        }
        self.rows.push(row.to_vec());
        Ok(())
    }
    fn done(&mut self, _done: Done) -> Result<(), Interrupt> {
        Ok(())
    }
    fn error(&mut self, _error: &SqlError) -> Result<(), Interrupt> {
        Ok(())
    }
    fn info(&mut self, _number: i32, _message: &str) -> Result<(), Interrupt> {
        Ok(())
    }
    fn env_change(&mut self, _change: EnvChange) -> Result<(), Interrupt> {
        Ok(())
    }
}

/// Tables' sizes for the size views, read from SQLite: rows by `COUNT(*)`, bytes (when asked
/// for) by summing the pages of the table's b-tree, or of a nonclustered index's, in `dbstat`.
struct SqliteSizes<'a> {
    conn: &'a rusqlite::Connection,
    catalog: &'a crate::catalog::Catalog,
    bytes: bool,
}

impl SqliteSizes<'_> {
    /// The table's SQLite name (unquoted) and schema.
    fn sqlite_name(&self, t: &crate::catalog::store::Table) -> (String, &'static str) {
        if t.session.is_some() {
            (t.name.clone(), "temp")
        } else {
            let schema = self.catalog.schema_name(t.schema_id).unwrap_or("dbo");
            (format!("{schema}.{}", t.name), "main")
        }
    }
}

impl crate::catalog::views::TableSizes for SqliteSizes<'_> {
    fn rows(&self, t: &crate::catalog::store::Table) -> i64 {
        let table = match self.sqlite_name(t) {
            (name, "temp") => format!("temp.{}", crate::ast::quote(&name)),
            (name, _) => crate::ast::quote(&name),
        };
        self.conn
            .query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |r| r.get(0))
            .unwrap_or(0)
    }

    fn bytes(&self, t: &crate::catalog::store::Table, index_id: i32) -> i64 {
        if !self.bytes {
            return 0;
        }
        let (name, schema) = self.sqlite_name(t);
        let btree = match t.indexes.iter().find(|i| i.index_id == index_id) {
            Some(ix) if index_id > 1 => format!("{name}.{}", ix.name),
            _ => name,
        };
        self.conn
            .query_row(
                "SELECT coalesce(sum(pgsize), 0) FROM dbstat(?1) WHERE name = ?2",
                rusqlite::params![schema, btree],
                |r| r.get(0),
            )
            .unwrap_or(0)
    }
}

/// Runs a query and returns its raw SQLite values (no conversion) with the output types.
pub(crate) fn query_rows(cx: &mut State, q: &mut Query) -> Result<(Vec<OutCol>, Vec<Vec<Stored>>), Fail> {
    let tables = cx.db.engine.tables();
    let vt = cx.vars.types();
    let (cols, uses_views, row_counts, sizes, counters) = {
        let mut ctx = Translator::new(&tables, &cx.db.temp, &vt, cx.globals());
        let c = ctx.query(q, None)?;
        (c, ctx.uses_views, ctx.row_counts, ctx.sizes, ctx.counters)
    };
    if uses_views {
        refresh_views(cx, row_counts, sizes, counters)?;
    }
    let sql = q.to_string();
    let mut stmt = cx.db.conn.prepare_cached(&sql)?;
    bind_vars(cx, &mut stmt)?;
    let n = cols.len();
    let mut rows = stmt.raw_query();
    let mut out = Vec::new();
    while let Some(r) = rows.next()? {
        let mut row = Vec::with_capacity(n);
        for i in 0..n {
            row.push(owned(r.get_ref(i)?));
        }
        out.push(row);
    }
    Ok((cols, out))
}

/// A translator over `tables`, the session's temp tables and the variables' types `vt`.
pub(crate) fn translator<'a>(
    cx: &'a State,
    tables: &'a Tables,
    vt: &'a std::collections::HashMap<String, SqlType>,
) -> Translator<'a> {
    Translator::new(tables, &cx.db.temp, vt, cx.globals())
}
