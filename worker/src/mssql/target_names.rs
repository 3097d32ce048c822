//! What a SQL Server target holds under the plan's names ([`crate::preflight::target_names`]), and the
//! worker's record of what a migration created there (`[_mssqlpg].[objects]`). Reading never
//! creates the record table (a dry run writes nothing).

use crate::copy::checkpoint::SCHEMA;
use crate::mssql::connect::TdsClient;
use crate::preflight::target_names::{Catalog, Holder, ObjectKind, Planned, Recorded, Scope};

type R<T> = Result<T, tiberius::error::Error>;

fn objects_table() -> String {
    format!("[{SCHEMA}].[objects]")
}

/// `(N'a', N'b')`; `(NULL)` for none, which matches nothing.
fn in_list<'a>(names: impl IntoIterator<Item = &'a str>) -> String {
    let items: Vec<String> = names
        .into_iter()
        .map(|n| format!("N'{}'", n.replace('\'', "''")))
        .collect();
    if items.is_empty() {
        "(NULL)".into()
    } else {
        format!("({})", items.join(", "))
    }
}

async fn rows(ms: &mut TdsClient, sql: &str) -> R<Vec<tiberius::Row>> {
    ms.simple_query(sql).await?.into_first_result().await
}

fn text(r: &tiberius::Row, i: usize) -> String {
    r.get::<&str, _>(i).unwrap_or_default().to_string()
}

/// Reads the holders of `planned`'s names in their schemas, the primary keys of their tables, and
/// what migration `migration` recorded creating.
pub async fn read(ms: &mut TdsClient, planned: &[Planned], migration: &str) -> R<Catalog> {
    let schemas = in_list(planned.iter().map(|p| p.schema.as_str()));
    let names = in_list(planned.iter().map(|p| p.name.as_str()));
    let tables = in_list(planned.iter().filter_map(|p| p.table.as_deref()));
    let mut holders = Vec::new();
    // Schema-scoped: tables, views, constraints (keys, checks, foreign keys, defaults), modules.
    let sql = format!(
        "SELECT s.name, o.name, o.type, OBJECT_NAME(o.parent_object_id), CAST(o.object_id AS bigint) \
         FROM sys.objects o JOIN sys.schemas s ON s.schema_id = o.schema_id \
         WHERE s.name IN {schemas} AND o.name IN {names}"
    );
    for r in rows(ms, &sql).await? {
        let code = text(&r, 2);
        let (kind, what) = match code.trim() {
            "PK" => (Some(ObjectKind::PrimaryKey), "primary key"),
            "UQ" => (Some(ObjectKind::Unique), "unique constraint"),
            "C" => (Some(ObjectKind::Check), "check constraint"),
            "F" => (Some(ObjectKind::ForeignKey), "foreign key"),
            "D" => (Some(ObjectKind::Default), "default"),
            "V" => (Some(ObjectKind::View), "view"),
            "U" => (None, "table"),
            "SO" => (None, "sequence"),
            "P" => (None, "stored procedure"),
            "FN" | "IF" | "TF" => (None, "function"),
            "TR" => (None, "trigger"),
            "SN" => (None, "synonym"),
            _ => (None, "object"),
        };
        let parent = r.get::<&str, _>(3).map(str::to_string);
        holders.push(Holder {
            schema: text(&r, 0),
            name: text(&r, 1),
            scope: Scope::Schema,
            kind,
            what: what.into(),
            table: parent,
            id: r.get::<i64, _>(4).unwrap_or_default(),
        });
    }
    // Table-scoped: indexes (a key's or unique constraint's among them).
    let sql = format!(
        "SELECT s.name, t.name, i.name, i.is_primary_key, i.is_unique_constraint, \
                CAST(t.object_id AS bigint) * 65536 + i.index_id \
         FROM sys.indexes i JOIN sys.objects t ON t.object_id = i.object_id \
         JOIN sys.schemas s ON s.schema_id = t.schema_id \
         WHERE s.name IN {schemas} AND i.name IN {names} AND t.name IN {tables}"
    );
    for r in rows(ms, &sql).await? {
        let (pk, uq) = (
            r.get::<bool, _>(3).unwrap_or(false),
            r.get::<bool, _>(4).unwrap_or(false),
        );
        let (kind, what) = if pk {
            (ObjectKind::PrimaryKey, "primary key")
        } else if uq {
            (ObjectKind::Unique, "unique constraint")
        } else {
            (ObjectKind::Index, "index")
        };
        let table = text(&r, 1);
        holders.push(Holder {
            schema: text(&r, 0),
            name: text(&r, 2),
            scope: Scope::Table(table.clone()),
            kind: Some(kind),
            what: what.into(),
            table: Some(table),
            id: r.get::<i64, _>(5).unwrap_or_default(),
        });
    }
    let sql = format!(
        "SELECT s.name, t.name, k.name FROM sys.key_constraints k \
         JOIN sys.objects t ON t.object_id = k.parent_object_id \
         JOIN sys.schemas s ON s.schema_id = t.schema_id \
         WHERE k.type = 'PK' AND s.name IN {schemas} AND t.name IN {tables}"
    );
    let primary_keys = rows(ms, &sql)
        .await?
        .iter()
        .map(|r| (text(r, 0), text(r, 1), text(r, 2)))
        .collect();
    Ok(Catalog {
        holders,
        primary_keys,
        recorded: recorded(ms, migration).await?,
    })
}

async fn table_exists(ms: &mut TdsClient) -> R<bool> {
    let sql = format!("SELECT OBJECT_ID(N'{}')", objects_table());
    Ok(ms
        .simple_query(sql)
        .await?
        .into_row()
        .await?
        .is_some_and(|r| r.get::<i32, _>(0).is_some()))
}

/// What `migration` recorded creating; nothing before the record table exists.
async fn recorded(ms: &mut TdsClient, migration: &str) -> R<Vec<Recorded>> {
    if !table_exists(ms).await? {
        return Ok(Vec::new());
    }
    let rows = ms
        .query(
            format!(
                "SELECT kind, schema_name, table_name, object_name, object_id FROM {} WHERE migration = @P1",
                objects_table()
            ),
            &[&migration],
        )
        .await?
        .into_first_result()
        .await?;
    Ok(rows
        .iter()
        .filter_map(|r| {
            let table = text(r, 2);
            Some(Recorded {
                object: Planned {
                    kind: ObjectKind::from_code(r.get::<&str, _>(0)?)?,
                    schema: text(r, 1),
                    table: (!table.is_empty()).then_some(table),
                    name: text(r, 3),
                },
                id: r.get::<i64, _>(4)?,
            })
        })
        .collect())
}

/// Creates the record table when missing (after [`crate::mssql::checkpoint::ensure_tables`],
/// which creates the schema).
pub async fn ensure_table(ms: &mut TdsClient) -> R<()> {
    if table_exists(ms).await? {
        return Ok(());
    }
    let sql = format!(
        "CREATE TABLE {} (migration nvarchar(400) NOT NULL, kind nvarchar(16) NOT NULL, \
         schema_name nvarchar(128) NOT NULL, table_name nvarchar(128) NOT NULL, \
         object_name nvarchar(128) NOT NULL, object_id bigint NOT NULL, created_at datetime2(3) NOT NULL DEFAULT SYSUTCDATETIME())",
        objects_table()
    );
    match ms.simple_query(sql).await {
        Ok(s) => s.into_results().await.map(|_| ()),
        // A concurrent worker created it first.
        Err(tiberius::error::Error::Server(e)) if e.code() == 2714 => Ok(()),
        Err(e) => Err(e),
    }
}

/// Records `p` as created by `migration` (right after the statement that created it: a crash in
/// between leaves it unrecorded, then kept as found with a warning).
pub async fn record(ms: &mut TdsClient, migration: &str, p: &Planned) -> R<()> {
    let table = p.table.as_deref().unwrap_or_default();
    // The catalog's id of what was just created (see [`Recorded::id`]).
    let found = if p.kind == ObjectKind::Index {
        ms.query(
            "SELECT CAST(t.object_id AS bigint) * 65536 + i.index_id FROM sys.indexes i \
             JOIN sys.objects t ON t.object_id = i.object_id JOIN sys.schemas s ON s.schema_id = t.schema_id \
             WHERE s.name = @P1 AND t.name = @P2 AND i.name = @P3",
            &[&p.schema.as_str(), &table, &p.name.as_str()],
        )
        .await?
        .into_row()
        .await?
    } else {
        ms.query(
            "SELECT CAST(o.object_id AS bigint) FROM sys.objects o \
             JOIN sys.schemas s ON s.schema_id = o.schema_id WHERE s.name = @P1 AND o.name = @P2",
            &[&p.schema.as_str(), &p.name.as_str()],
        )
        .await?
        .into_row()
        .await?
    };
    let id = found.and_then(|r| r.get::<i64, _>(0)).unwrap_or_default();
    ms.execute(
        format!(
            "DELETE FROM {t} WHERE migration = @P1 AND kind = @P2 AND schema_name = @P3 \
             AND table_name = @P4 AND object_name = @P5; \
             INSERT INTO {t} (migration, kind, schema_name, table_name, object_name, object_id) \
             VALUES (@P1, @P2, @P3, @P4, @P5, @P6)",
            t = objects_table()
        ),
        &[
            &migration,
            &p.kind.code(),
            &p.schema.as_str(),
            &table,
            &p.name.as_str(),
            &id,
        ],
    )
    .await?;
    Ok(())
}
