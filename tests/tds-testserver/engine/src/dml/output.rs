//! The OUTPUT clause: the rows a statement wrote, read back from a snapshot or by rowid,
//! and the sinks that hold a statement's results until it is done.

use crate::ddl;
use crate::error::SqlError;
use crate::meta::TableMeta;
use crate::results::Fail;
use crate::results::ResultSink;
use crate::state::State;

pub(super) fn drop_output_snapshot(cx: &mut State, name: &str) -> Result<(), Fail> {
    let dialect = sqlparser::dialect::MsSqlDialect {};
    let stmts = sqlparser::parser::Parser::parse_sql(&dialect, &format!("DROP TABLE {name}"))
        .map_err(|e| SqlError::new(102, 15, e.to_string()))?;
    for st in stmts {
        if let sqlparser::ast::Statement::Drop {
            object_type,
            if_exists,
            names,
            table,
            ..
        } = st
        {
            let mut quiet = NoDone(&mut Buffered::default());
            ddl::drop_objects(cx, object_type, if_exists, &names, table.as_ref(), &mut quiet)?;
        }
    }
    Ok(())
}

/// The select list of `OUTPUT ...` (no INTO) as T-SQL text; `None` without OUTPUT.
pub(super) fn output_list(
    output: Option<&sqlparser::ast::OutputClause>,
    returning: bool,
) -> Result<Option<String>, SqlError> {
    match output {
        Some(sqlparser::ast::OutputClause::Output {
            select_items,
            into_table: None,
            ..
        }) if !returning => Ok(Some(
            select_items
                .iter()
                .map(|i| i.to_string())
                .collect::<Vec<_>>()
                .join(", "),
        )),
        None if !returning => Ok(None),
        _ => Err(SqlError::new(
            102,
            15,
            "Incorrect syntax near 'OUTPUT'. (OUTPUT INTO / RETURNING are not supported by the test server)",
        )),
    }
}

/// The T-SQL name of a DML target, for the OUTPUT query.
pub(super) fn output_target(meta: &TableMeta) -> String {
    let q = |s: &str| format!("[{}]", s.replace(']', "]]"));
    if meta.def.temporary {
        q(&meta.def.name)
    } else {
        format!("{}.{}", q(&meta.def.schema), q(&meta.def.name))
    }
}

pub(super) fn rowid_list(ids: impl Iterator<Item = i64>) -> String {
    let list = ids.map(|i| i.to_string()).collect::<Vec<_>>().join(", ");
    if list.is_empty() { "NULL".to_string() } else { list }
}

/// A result set held back until its statement succeeded (OUTPUT of UPDATE/DELETE: a failed
/// statement must not have sent rows).
#[derive(Default)]
pub(super) struct Buffered {
    columns: Vec<crate::types::ColumnMeta>,
    rows: Vec<Vec<crate::types::Value>>,
}

impl Buffered {
    pub(super) fn replay(self, sink: &mut dyn ResultSink) -> Result<(), crate::results::Interrupt> {
        sink.columns(&self.columns)?;
        for r in &self.rows {
            sink.row(r)?;
        }
        Ok(())
    }
}

impl ResultSink for Buffered {
    fn columns(&mut self, columns: &[crate::types::ColumnMeta]) -> Result<(), crate::results::Interrupt> {
        self.columns = columns.to_vec();
        Ok(())
    }
    fn row(&mut self, row: &[crate::types::Value]) -> Result<(), crate::results::Interrupt> {
        self.rows.push(row.to_vec());
        Ok(())
    }
    fn done(&mut self, _done: crate::results::Done) -> Result<(), crate::results::Interrupt> {
        Ok(())
    }
    fn error(&mut self, _error: &SqlError) -> Result<(), crate::results::Interrupt> {
        Ok(())
    }
    fn info(&mut self, _number: i32, _message: &str) -> Result<(), crate::results::Interrupt> {
        Ok(())
    }
    fn env_change(&mut self, _change: crate::results::EnvChange) -> Result<(), crate::results::Interrupt> {
        Ok(())
    }
}

/// Forwards a result set but not its DONE (OUTPUT rows belong to the INSERT's DONE).
pub(super) struct NoDone<'a>(pub(super) &'a mut dyn ResultSink);

impl ResultSink for NoDone<'_> {
    fn columns(&mut self, columns: &[crate::types::ColumnMeta]) -> Result<(), crate::results::Interrupt> {
        self.0.columns(columns)
    }
    fn row(&mut self, row: &[crate::types::Value]) -> Result<(), crate::results::Interrupt> {
        self.0.row(row)
    }
    fn done(&mut self, _done: crate::results::Done) -> Result<(), crate::results::Interrupt> {
        Ok(())
    }
    fn error(&mut self, error: &SqlError) -> Result<(), crate::results::Interrupt> {
        self.0.error(error)
    }
    fn info(&mut self, number: i32, message: &str) -> Result<(), crate::results::Interrupt> {
        self.0.info(number, message)
    }
    fn env_change(&mut self, change: crate::results::EnvChange) -> Result<(), crate::results::Interrupt> {
        self.0.env_change(change)
    }
}
