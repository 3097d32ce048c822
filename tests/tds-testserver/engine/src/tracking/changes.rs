//! `CHANGETABLE(CHANGES t, @last_sync_version)`: the net change of each key since a version,
//! computed from the side table's records (see [`super::side`]).
//!
//! The rules, as SQL Server 2025 gives them (probed results published with the
//! SqlServerSimulator project's ChangeTrackingTests, which match the documentation's
//! examples), over the records of the key with a version above `@last` and at most the
//! current committed version:
//! * `SYS_CHANGE_OPERATION`: `D` when the key's last change deleted it (also for a row inserted
//!   and deleted after `@last`); otherwise `U` when the row existed before the first of those
//!   changes (a delete and re-insert is an update); otherwise `I` (an insert and later updates
//!   are one insert).
//! * `SYS_CHANGE_VERSION`: the version of the key's last change.
//! * `SYS_CHANGE_CREATION_VERSION`: the version of the key's last insert after `@last`, else NULL.
//! * `SYS_CHANGE_COLUMNS` and `SYS_CHANGE_CONTEXT`: NULL (no column tracking, no context).
//! * `@last` NULL: every recorded change; a negative `@last`: no rows. A `@last` below the
//!   table's minimum valid version is not an error: the rows still recorded are returned and the
//!   client is to check `CHANGE_TRACKING_MIN_VALID_VERSION` itself.

use super::side::{STATE, key_columns, side_table};
use crate::ast::quote;
use crate::meta::TableMeta;
use crate::types::SqlType;

/// The columns CHANGETABLE(CHANGES) returns before the key columns, with their types.
pub(crate) const CHANGE_COLUMNS: [(&str, SqlType); 5] = [
    ("SYS_CHANGE_VERSION", SqlType::BigInt),
    ("SYS_CHANGE_CREATION_VERSION", SqlType::BigInt),
    ("SYS_CHANGE_OPERATION", SqlType::NChar { len: 1 }),
    ("SYS_CHANGE_COLUMNS", SqlType::VarBinary { len: Some(4100) }),
    ("SYS_CHANGE_CONTEXT", SqlType::VarBinary { len: Some(128) }),
];

/// The SQLite query of CHANGETABLE(CHANGES `meta`, `last`), its columns named `names` (the five
/// SYS_ columns, then the key columns). `last` is SQLite SQL: a literal, NULL or a parameter.
pub(crate) fn changes_query(meta: &TableMeta, last: &str, names: &[String]) -> String {
    let keys: Vec<String> = key_columns(meta).into_iter().map(|(n, _)| quote(&n)).collect();
    let name = |i: usize| quote(&names[i]);
    let key_out: Vec<String> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| format!("{k} AS {}", name(5 + i)))
        .collect();
    let last = format!("CAST({last} AS INTEGER)");
    format!(
        "SELECT max(\"__ver\") AS {v}, \
             max(CASE WHEN \"__ins\" = 1 THEN \"__ver\" END) AS {cv}, \
             CASE WHEN max(\"__ver\" * 2 + \"__after\") % 2 = 0 THEN 'D' \
                  WHEN min(\"__ver\" * 2 + \"__before\") % 2 = 1 THEN 'U' ELSE 'I' END AS {op}, \
             CAST(NULL AS BLOB) AS {cols}, CAST(NULL AS BLOB) AS {ctx}, {keys_out} \
         FROM {side} \
         WHERE ({last} IS NULL OR ({last} >= 0 AND \"__ver\" > {last})) \
           AND \"__ver\" <= (SELECT version - coalesce(txn = __ct_txn(), 0) FROM {STATE}) \
         GROUP BY {group}",
        v = name(0),
        cv = name(1),
        op = name(2),
        cols = name(3),
        ctx = name(4),
        keys_out = key_out.join(", "),
        side = side_table(meta.object_id),
        group = keys.join(", "),
    )
}
