//! Which constraint a failed write broke, for SQL Server's message 547. SQLite reports only
//! "FOREIGN KEY constraint failed" and a CHECK's name; SQL Server names the foreign key that
//! failed and the column a CHECK reads.

use crate::ast::quote;
use crate::meta::TableMeta;
use crate::state::Db;
use rusqlite::types::Value as Stored;
use sqlparser::dialect::MsSqlDialect;
use sqlparser::tokenizer::{Token, Tokenizer};

/// The column SQL Server reports a CHECK on: the one it was declared on, or else the only
/// column of the table its definition reads (a table-level `CHECK ([a] > 0)` is reported on
/// `a` too). `None` when it reads several.
pub(crate) fn check_column(meta: &TableMeta, index: usize) -> Option<String> {
    let ck = meta.def.checks.get(index)?;
    if let Some(c) = &ck.column {
        return Some(c.clone());
    }
    let toks: Vec<Token> = Tokenizer::new(&MsSqlDialect {}, &ck.definition)
        .tokenize()
        .ok()?
        .into_iter()
        .filter(|t| !matches!(t, Token::Whitespace(_)))
        .collect();
    let mut found: Option<String> = None;
    for (i, t) in toks.iter().enumerate() {
        let Token::Word(w) = t else { continue };
        // A function name is not a column even when one has its name.
        if toks.get(i + 1) == Some(&Token::LParen) {
            continue;
        }
        let Some((_, col)) = meta.column(&w.value) else {
            continue;
        };
        match &found {
            None => found = Some(col.name.clone()),
            Some(f) if f.eq_ignore_ascii_case(&col.name) => {}
            Some(_) => return None,
        }
    }
    found
}

/// The foreign key of `meta` whose parent has no row for the written key (`cols` are the
/// column indexes `values` are for). Keys with a NULL part never break one.
pub(crate) fn broken_foreign_key(
    db: &Db,
    meta: &TableMeta,
    cols: &[usize],
    values: &[Stored],
) -> Option<usize> {
    let tables = db.engine.tables();
    meta.def.foreign_keys.iter().enumerate().find_map(|(i, fk)| {
        if fk.disabled {
            return None;
        }
        let key: Vec<&Stored> = fk
            .columns
            .iter()
            .map(|c| {
                let (ci, _) = meta.column(c)?;
                values.get(cols.iter().position(|x| *x == ci)?)
            })
            .collect::<Option<_>>()?;
        if key.iter().any(|v| matches!(v, Stored::Null)) {
            return None;
        }
        let parent = if fk.referenced_table.eq_ignore_ascii_case(&meta.def.name)
            && fk.referenced_schema.eq_ignore_ascii_case(&meta.def.schema)
        {
            meta.sqlite_sql()
        } else {
            tables
                .get(&fk.referenced_schema, &fk.referenced_table)?
                .sqlite_sql()
        };
        let cond: Vec<String> = fk
            .referenced_columns
            .iter()
            .enumerate()
            .map(|(k, r)| format!("{} = ?{}", quote(r), k + 1))
            .collect();
        let sql = format!(
            "SELECT EXISTS (SELECT 1 FROM {parent} WHERE {})",
            cond.join(" AND ")
        );
        let found: bool = db
            .conn
            .query_row(&sql, rusqlite::params_from_iter(key), |r| r.get(0))
            .ok()?;
        (!found).then_some(i)
    })
}

/// The foreign key of another table (or `meta` itself) with rows that still reference
/// the row `rowid` of `meta`: (child table, index of its foreign key).
pub(crate) fn referencing_foreign_key(db: &Db, meta: &TableMeta, rowid: i64) -> Option<(TableMeta, usize)> {
    let tables = db.engine.tables();
    let parent = meta.sqlite_sql();
    for child in tables.all() {
        for (i, fk) in child.def.foreign_keys.iter().enumerate() {
            if fk.disabled
                || !fk.referenced_table.eq_ignore_ascii_case(&meta.def.name)
                || !fk.referenced_schema.eq_ignore_ascii_case(&meta.def.schema)
            {
                continue;
            }
            let cond: Vec<String> = fk
                .columns
                .iter()
                .zip(&fk.referenced_columns)
                .map(|(c, r)| format!("c.{} = p.{}", quote(c), quote(r)))
                .collect();
            let sql = format!(
                "SELECT EXISTS (SELECT 1 FROM {} AS c, {parent} AS p WHERE p.rowid = ?1 AND {})",
                child.sqlite_sql(),
                cond.join(" AND ")
            );
            if db
                .conn
                .query_row(&sql, [rowid], |r| r.get::<_, bool>(0))
                .unwrap_or(false)
            {
                return Some((child.clone(), i));
            }
        }
    }
    None
}
