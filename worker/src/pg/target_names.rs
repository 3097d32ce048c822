//! What a PostgreSQL target holds under the plan's names ([`crate::preflight::target_names`]), and the
//! worker's record of what a migration created there (`_mssqlpg.objects`). Reading never creates
//! the record table (a dry run writes nothing).

use crate::copy::checkpoint::SCHEMA;
use crate::preflight::target_names::{Catalog, Holder, ObjectKind, Planned, Recorded, Scope};
use crate::schema::mssql_to_pg_types::quote_pg;
use tokio_postgres::{Client, GenericClient};

/// The record table, created on the first record.
fn objects_table() -> String {
    format!("\"{SCHEMA}\".\"objects\"")
}

/// Reads the holders of `planned`'s names in their schemas, the primary keys of their tables, and
/// what migration `migration` recorded creating.
pub async fn read(
    pg: &Client,
    planned: &[Planned],
    migration: &str,
) -> Result<Catalog, tokio_postgres::Error> {
    let schemas: Vec<&str> = planned.iter().map(|p| p.schema.as_str()).collect();
    let names: Vec<&str> = planned.iter().map(|p| p.name.as_str()).collect();
    let tables: Vec<&str> = planned.iter().filter_map(|p| p.table.as_deref()).collect();
    let mut holders = Vec::new();
    // Relations: tables, indexes (a key's or a unique constraint's among them), views, sequences.
    for r in pg
        .query(
            "SELECT n.nspname::text, c.relname::text, c.relkind::text, t.relname::text, k.contype::text, \
                    c.oid::bigint \
             FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
             LEFT JOIN pg_index i ON i.indexrelid = c.oid \
             LEFT JOIN pg_class t ON t.oid = i.indrelid \
             LEFT JOIN pg_constraint k ON k.conindid = c.oid AND k.conrelid = i.indrelid \
                                      AND k.contype IN ('p', 'u', 'x') \
             WHERE n.nspname = ANY($1) AND c.relname = ANY($2)",
            &[&schemas, &names],
        )
        .await?
    {
        let (relkind, table, contype): (String, Option<String>, Option<String>) =
            (r.get(2), r.get(3), r.get(4));
        let (kind, what) = match (relkind.as_str(), contype.as_deref()) {
            ("i" | "I", Some("p")) => (Some(ObjectKind::PrimaryKey), "primary key"),
            ("i" | "I", Some("u")) => (Some(ObjectKind::Unique), "unique constraint"),
            ("i" | "I", Some(_)) => (None, "exclusion constraint"),
            ("i" | "I", None) => (Some(ObjectKind::Index), "index"),
            ("v", _) => (Some(ObjectKind::View), "view"),
            ("m", _) => (None, "materialized view"),
            ("r" | "p", _) => (None, "table"),
            ("S", _) => (None, "sequence"),
            ("f", _) => (None, "foreign table"),
            ("c", _) => (None, "composite type"),
            _ => (None, "relation"),
        };
        holders.push(Holder {
            schema: r.get(0),
            name: r.get(1),
            scope: Scope::Schema,
            kind,
            what: what.into(),
            table,
            id: r.get(5),
        });
    }
    // Constraints, each unique by name on its table.
    for r in pg
        .query(
            "SELECT n.nspname::text, c.conname::text, c.contype::text, t.relname::text, c.oid::bigint \
             FROM pg_constraint c JOIN pg_class t ON t.oid = c.conrelid \
             JOIN pg_namespace n ON n.oid = t.relnamespace \
             WHERE n.nspname = ANY($1) AND c.conname = ANY($2) AND t.relname = ANY($3)",
            &[&schemas, &names, &tables],
        )
        .await?
    {
        let contype: String = r.get(2);
        let (kind, what) = match contype.as_str() {
            "p" => (Some(ObjectKind::PrimaryKey), "primary key"),
            "u" => (Some(ObjectKind::Unique), "unique constraint"),
            "c" => (Some(ObjectKind::Check), "check constraint"),
            "f" => (Some(ObjectKind::ForeignKey), "foreign key"),
            "x" => (None, "exclusion constraint"),
            "n" => (None, "not-null constraint"),
            "t" => (None, "constraint trigger"),
            _ => (None, "constraint"),
        };
        let table: String = r.get(3);
        holders.push(Holder {
            schema: r.get(0),
            name: r.get(1),
            scope: Scope::Table(table.clone()),
            kind,
            what: what.into(),
            table: Some(table),
            id: r.get(4),
        });
    }
    let primary_keys = pg
        .query(
            "SELECT n.nspname::text, t.relname::text, c.conname::text \
             FROM pg_constraint c JOIN pg_class t ON t.oid = c.conrelid \
             JOIN pg_namespace n ON n.oid = t.relnamespace \
             WHERE c.contype = 'p' AND n.nspname = ANY($1) AND t.relname = ANY($2)",
            &[&schemas, &tables],
        )
        .await?
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    Ok(Catalog {
        holders,
        primary_keys,
        recorded: recorded(pg, migration).await?,
    })
}

/// What `migration` recorded creating; nothing before the record table exists.
async fn recorded(pg: &Client, migration: &str) -> Result<Vec<Recorded>, tokio_postgres::Error> {
    let exists: bool = pg
        .query_one("SELECT to_regclass($1) IS NOT NULL", &[&objects_table()])
        .await?
        .get(0);
    if !exists {
        return Ok(Vec::new());
    }
    Ok(pg
        .query(
            &format!(
                "SELECT kind, schema_name, table_name, object_name, object_id FROM {} WHERE migration = $1",
                objects_table()
            ),
            &[&migration],
        )
        .await?
        .iter()
        .filter_map(|r| {
            Some(Recorded {
                object: Planned {
                    kind: ObjectKind::from_code(r.get(0))?,
                    schema: r.get(1),
                    table: r.get(2),
                    name: r.get(3),
                },
                id: r.get(4),
            })
        })
        .collect())
}

/// Creates the record table when missing (after [`crate::copy::checkpoint::ensure_tables`], which
/// creates the schema).
pub async fn ensure_table(pg: &Client) -> Result<(), tokio_postgres::Error> {
    pg.batch_execute(&format!(
        "CREATE TABLE IF NOT EXISTS {} (
            migration text NOT NULL,
            kind text NOT NULL,
            schema_name text NOT NULL,
            table_name text,
            object_name text NOT NULL,
            object_id bigint NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now())",
        objects_table()
    ))
    .await
}

/// Runs `sql`, which creates `p`, and records it as `migration`'s in the same transaction: a
/// crash leaves both or neither.
pub async fn create_recorded(
    pg: &Client,
    migration: &str,
    p: &Planned,
    sql: &str,
) -> Result<(), tokio_postgres::Error> {
    pg.batch_execute("BEGIN").await?;
    let result = async {
        pg.batch_execute(sql).await?;
        record(pg, migration, p).await?;
        pg.batch_execute("COMMIT").await
    }
    .await;
    if result.is_err() {
        // A failed statement leaves the transaction aborted; end it so the connection stays usable.
        let _ = pg.batch_execute("ROLLBACK").await;
    }
    result
}

async fn record<C: GenericClient>(pg: &C, migration: &str, p: &Planned) -> Result<(), tokio_postgres::Error> {
    // The catalog's id of what was just created: a key's or constraint's oid, an index's or view's.
    let id: i64 = match (p.kind, &p.table) {
        (ObjectKind::Index | ObjectKind::View, _) | (_, None) => {
            let qualified = format!("{}.{}", quote_pg(&p.schema), quote_pg(&p.name));
            pg.query_one("SELECT to_regclass($1)::oid::bigint", &[&qualified])
                .await?
                .get(0)
        }
        (_, Some(table)) => pg
            .query_one(
                "SELECT c.oid::bigint FROM pg_constraint c JOIN pg_class t ON t.oid = c.conrelid \
                 JOIN pg_namespace n ON n.oid = t.relnamespace \
                 WHERE n.nspname = $1 AND t.relname = $2 AND c.conname = $3",
                &[&p.schema, table, &p.name],
            )
            .await?
            .get(0),
    };
    pg.execute(
        &format!(
            "DELETE FROM {} WHERE migration = $1 AND kind = $2 AND schema_name = $3 \
             AND table_name IS NOT DISTINCT FROM $4 AND object_name = $5",
            objects_table()
        ),
        &[&migration, &p.kind.code(), &p.schema, &p.table, &p.name],
    )
    .await?;
    pg.execute(
        &format!(
            "INSERT INTO {} (migration, kind, schema_name, table_name, object_name, object_id) \
             VALUES ($1, $2, $3, $4, $5, $6)",
            objects_table()
        ),
        &[&migration, &p.kind.code(), &p.schema, &p.table, &p.name, &id],
    )
    .await?;
    Ok(())
}
