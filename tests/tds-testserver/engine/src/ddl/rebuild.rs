//! Applying a changed definition to a table with rows: indexes built in place, the SQLite
//! schema rewritten, or the table rebuilt by copying its rows.

use super::metadata::{finish_meta, store_meta};
use super::sqlite_schema::{build_index, duplicate_key_error, one_index_ddl, sqlite_ddl, table_expr};
use crate::ast::quote;
use crate::catalog::ColumnDef;
use crate::error::SqlError;
use crate::meta::TableMeta;
use crate::results::Fail;
use crate::state::State;
use crate::transaction;
use crate::types::SqlType;
use crate::types::names::type_decl;

/// Whether `new` differs from `old` only by indexes appended at the end (names aside), so
/// the table itself needs no rebuild.
fn only_indexes_added(old: &TableMeta, new: &TableMeta) -> bool {
    fn unnamed<T: Clone>(v: &[T], clear: impl Fn(&mut T)) -> Vec<T> {
        v.iter()
            .cloned()
            .map(|mut x| {
                clear(&mut x);
                x
            })
            .collect()
    }
    let (o, n) = (&old.def, &new.def);
    n.indexes.len() > o.indexes.len()
        && o.columns == n.columns
        && unnamed(&o.indexes, |i| i.name = None) == unnamed(&n.indexes[..o.indexes.len()], |i| i.name = None)
        && unnamed(&o.foreign_keys, |f| f.name = None) == unnamed(&n.foreign_keys, |f| f.name = None)
        && unnamed(&o.checks, |c| c.name = None) == unnamed(&n.checks, |c| c.name = None)
        && old.sqlite_name == new.sqlite_name
}

/// Only defaults, CHECKs or foreign keys differ. SQL Server adds or drops those as metadata
/// (checking the rows against a new constraint); they do not change how SQLite stores a row,
/// so the table's stored CREATE statement is rewritten (SQLite's documented procedure for
/// defaults and constraints) instead of copying every row through a new table.
fn only_metadata_changed(old: &TableMeta, new: &TableMeta) -> bool {
    let (o, n) = (&old.def, &new.def);
    let without_default = |c: &ColumnDef| {
        let mut c = c.clone();
        c.default = None;
        c
    };
    o.columns.len() == n.columns.len()
        && o.columns
            .iter()
            .zip(&n.columns)
            .all(|(a, b)| without_default(a) == without_default(b))
        && o.indexes == n.indexes
        && !n.temporary
        && old.sqlite_name == new.sqlite_name
}

pub(super) fn rebuild(cx: &mut State, old: &TableMeta, mut new: TableMeta) -> Result<(), Fail> {
    finish_meta(cx, &mut new)?;
    if only_indexes_added(old, &new) {
        // ADD PRIMARY KEY / UNIQUE on a loaded table: build the new indexes in place
        // rather than copying every row through a new table (minutes for millions).
        let added = old.def.indexes.len();
        let mut ddl = Vec::new();
        for (ix, name) in new.def.indexes.iter().zip(new.index_names.iter()).skip(added) {
            ddl.push((ix, name, one_index_ddl(cx, &new, ix, name)?));
        }
        transaction::atomic(cx, |s| {
            for (ix, name, st) in &ddl {
                build_index(s, &new, ix, name, st)?;
            }
            Ok(())
        })?;
        store_meta(cx, new);
        return Ok(());
    }
    // SQL Server checks the rows only against the CHECKs this ALTER adds (unless WITH
    // NOCHECK) or re-enables WITH CHECK; checks already there, trusted or not, are not
    // re-run, so the copy ignores them all and the ones to check are checked by name.
    let mut verify: Vec<String> = std::mem::take(&mut cx.batch.recheck);
    if !cx.batch.ignore_checks {
        verify.extend(
            new.check_names
                .iter()
                .filter(|n| !old.check_names.iter().any(|o| o.eq_ignore_ascii_case(n)))
                .cloned(),
        );
    }
    if only_metadata_changed(old, &new) {
        new.rowid_pk = old.rowid_pk;
        let ddl = sqlite_ddl(cx, &new, &quote(&new.sqlite_name))?;
        let (name, create, table) = (new.sqlite_name.clone(), ddl[0].clone(), old.sqlite_sql());
        transaction::atomic(cx, |s| {
            rewrite_table_sql(s, &name, &create)?;
            verify_checks(s, &new, &table, &verify)
        })?;
        store_meta(cx, new);
        return Ok(());
    }
    new.rowid_pk = crate::meta::rowid_key_candidate(&new.def).is_some();
    let tmp = format!("{}__rebuild", new.sqlite_name);
    let prefix = if new.def.temporary { "temp." } else { "" };
    let mut tmp_meta = new.clone();
    tmp_meta.sqlite_name = tmp.clone();
    let ddl = sqlite_ddl(cx, &new, &format!("{prefix}{}", quote(&tmp)))?;
    let (common, converted) = copied_columns(cx, old, &new)?;
    let old_sql = old.sqlite_sql();
    let fk_off = cx.tran.count == 0;
    if fk_off {
        cx.db.conn.execute_batch("PRAGMA foreign_keys=OFF")?;
    }
    cx.db.conn.execute_batch("PRAGMA ignore_check_constraints=ON")?;
    let r = transaction::atomic(cx, |s| {
        // The first statement creates the table; index statements need the final name.
        s.db.conn.execute_batch(&ddl[0])?;
        let copy = format!(
            "INSERT INTO {prefix}{} ({}) SELECT {} FROM {old_sql}",
            quote(&tmp),
            common.join(", "),
            converted.join(", ")
        );
        let copied = s.db.conn.execute_batch(&copy);
        if copied.is_ok() {
            verify_checks(s, &new, &format!("{prefix}{}", quote(&tmp)), &verify)?;
        }
        if let Err(e) = copied {
            // A rowid primary key is enforced while the rows are copied, not by an index.
            let pk = new
                .def
                .indexes
                .iter()
                .zip(new.index_names.iter())
                .find(|(ix, _)| new.is_rowid_index(ix));
            return Err(match pk {
                Some((ix, name)) if e.to_string().contains("UNIQUE constraint failed") => {
                    duplicate_key_error(s, old, ix, name).into()
                }
                _ => e.into(),
            });
        }
        s.db.conn.execute_batch(&format!("DROP TABLE {old_sql}"))?;
        s.db.conn.execute_batch(&format!(
            "ALTER TABLE {prefix}{} RENAME TO {}",
            quote(&tmp),
            quote(&new.sqlite_name)
        ))?;
        for (ix, name) in new.def.indexes.iter().zip(new.index_names.iter()) {
            if new.is_rowid_index(ix) {
                continue;
            }
            let st = one_index_ddl(s, &new, ix, name)?;
            build_index(s, &new, ix, name, &st)?;
        }
        // The old table's Change Tracking triggers went with it.
        if s.db.engine.tables().is_tracked(new.object_id) {
            crate::tracking::side::create_triggers(&s.db.conn, &new)?;
        }
        Ok(())
    });
    if fk_off {
        cx.db.conn.execute_batch("PRAGMA foreign_keys=ON")?;
    }
    cx.db.conn.execute_batch("PRAGMA ignore_check_constraints=OFF")?;
    r?;
    store_meta(cx, new);
    Ok(())
}

/// The columns a rebuild copies from `old` into `new` (the INSERT's list) and what it copies
/// into each (the SELECT's list): stored forms converted where the type changed, and the
/// next rowversion values for a rowversion column added to a table with rows.
fn copied_columns(cx: &State, old: &TableMeta, new: &TableMeta) -> Result<(Vec<String>, Vec<String>), Fail> {
    let mut common: Vec<String> = new
        .def
        .columns
        .iter()
        .filter(|c| c.computed.is_none() && old.column(&c.name).is_some_and(|(_, o)| o.computed.is_none()))
        .map(|c| quote(&c.name))
        .collect();
    let mut converted: Vec<String> = new
        .def
        .columns
        .iter()
        .filter(|c| c.computed.is_none() && old.column(&c.name).is_some_and(|(_, o)| o.computed.is_none()))
        .map(|c| match old.column(&c.name) {
            // Same type: the stored form is already right; a UDF call per cell would
            // dominate rebuilding a large table (ADD CHECK / FOREIGN KEY after a load).
            Some((_, o)) if o.ty == c.ty => quote(&c.name),
            o => format!(
                "tsql_cast({}, '{}', '{}', NULL, 0, {})",
                quote(&c.name),
                type_decl(c.ty),
                o.map(|(_, o)| type_decl(o.ty)).unwrap_or_default(),
                crate::write::column_values::code_page(c).number()
            ),
        })
        .collect();
    // A rowversion column added to a table with rows: each row gets the next value of the
    // database counter, as SQL Server fills it.
    if let Some(rv) = new
        .def
        .columns
        .iter()
        .find(|c| c.ty == SqlType::RowVersion && old.column(&c.name).is_none())
    {
        let count: i64 =
            cx.db
                .conn
                .query_row(&format!("SELECT COUNT(*) FROM {}", old.sqlite_sql()), [], |r| {
                    r.get(0)
                })?;
        let base = cx
            .db
            .engine
            .rowversion
            .fetch_add(count.max(0) as u64, std::sync::atomic::Ordering::Relaxed);
        common.push(quote(&rv.name));
        converted.push(format!(
            "unhex(printf('%016X', {} + ROW_NUMBER() OVER ()))",
            i64::try_from(base).unwrap_or(i64::MAX) - 1
        ));
    }
    Ok((common, converted))
}

/// Replaces a table's stored CREATE statement (SQLite's procedure for changing defaults:
/// writable_schema, then a new schema_version so every connection re-reads the schema).
fn rewrite_table_sql(cx: &mut State, sqlite_name: &str, create: &str) -> Result<(), Fail> {
    let version: i64 = cx.db.conn.query_row("PRAGMA schema_version", [], |r| r.get(0))?;
    cx.db.conn.execute_batch("PRAGMA writable_schema=ON")?;
    let updated = cx.db.conn.execute(
        "UPDATE sqlite_schema SET sql = ?1 WHERE type = 'table' AND name = ?2",
        rusqlite::params![create, sqlite_name],
    );
    let bumped = cx
        .db
        .conn
        .execute_batch(&format!("PRAGMA schema_version={}", version + 1));
    cx.db.conn.execute_batch("PRAGMA writable_schema=OFF")?;
    bumped?;
    match updated? {
        1 => Ok(()),
        n => Err(SqlError::new(
            50000,
            16,
            format!("internal: {n} stored definitions matched table {sqlite_name}"),
        )
        .into()),
    }
}

/// The rows of `table` (holding `meta`'s rows) against the CHECKs named `names`: the
/// first one a row breaks is error 547, named as SQL Server names it.
fn verify_checks(cx: &State, meta: &TableMeta, table: &str, names: &[String]) -> Result<(), Fail> {
    for name in names {
        let Some(i) = meta.check_names.iter().position(|n| n.eq_ignore_ascii_case(name)) else {
            continue;
        };
        if meta.def.checks[i].disabled {
            continue;
        }
        let (expr, _) = table_expr(cx, meta, &meta.def.checks[i].definition)?;
        // NOT(NULL) is NULL: as for the constraint itself, unknown passes.
        let sql = format!("SELECT EXISTS (SELECT 1 FROM {table} WHERE NOT ({expr}))");
        let broken: bool = cx.db.conn.query_row(&sql, [], |r| r.get(0))?;
        if broken {
            let col_part = crate::write::conflicts::check_column(meta, i)
                .map(|c| format!(", column '{c}'"))
                .unwrap_or_default();
            return Err(SqlError::new(
                547,
                16,
                format!(
                    "The ALTER TABLE statement conflicted with the CHECK constraint \"{}\". The conflict occurred in database \"{}\", table \"{}\"{col_part}.",
                    meta.check_names[i],
                    cx.db.database,
                    meta.display_name()
                ),
            )
            .into());
        }
    }
    Ok(())
}
