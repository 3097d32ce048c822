//! `INSERT BULK`: the target a bulk load's rows go to, checked and remembered until the
//! BULK_LOAD message comes.

use crate::error::SqlError;
use crate::meta::Tables;
use crate::parse::BulkTarget;
use crate::results::Fail;
use crate::state::PendingBulk;
use crate::translate::{Globals, Translator};

/// Checks an INSERT BULK statement's table and columns against `tables` and the session's
/// `temp` tables.
pub(crate) fn prepare(tables: &Tables, temp: &Tables, t: BulkTarget) -> Result<PendingBulk, Fail> {
    let vt = std::collections::HashMap::new();
    let ctx = Translator::new(tables, temp, &vt, Globals::default());
    let meta = ctx
        .lookup(&t.name)
        .cloned()
        .ok_or_else(|| crate::error::invalid_object(&t.name.join(".")))?;
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
    Ok(PendingBulk {
        meta,
        cols,
        keep_nulls: t.options.iter().any(|o| o == "KEEP_NULLS"),
        check_constraints: t.options.iter().any(|o| o == "CHECK_CONSTRAINTS"),
    })
}
