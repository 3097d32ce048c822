//! The PostgreSQL source schema from pg_catalog (the PostgreSQL -> SQL Server direction): tables
//! of one schema with columns and typmods, identity/serial, defaults, generated columns, keys,
//! indexes, foreign keys, checks and enum labels.

use crate::schema::pg_model::{PgCheck, PgColumn, PgDomain, PgForeignKey, PgIndex, PgKey, PgTable};
use std::collections::HashMap;
use tokio_postgres::Client;

#[derive(Debug, thiserror::Error)]
pub enum PgIntrospectError {
    #[error("reading the PostgreSQL catalog ({what}): {source}")]
    Query {
        what: &'static str,
        #[source]
        source: tokio_postgres::Error,
    },
}

fn q(what: &'static str) -> impl Fn(tokio_postgres::Error) -> PgIntrospectError {
    move |source| PgIntrospectError::Query { what, source }
}

/// typmod decoding as `format_type` does it.
fn typmod_parts(type_name: &str, typmod: i32) -> (Option<i32>, Option<i32>, Option<i32>) {
    if typmod < 0 {
        return (None, None, None);
    }
    match type_name {
        "varchar" | "bpchar" => (Some(typmod - 4), None, None),
        "numeric" => {
            let t = typmod - 4;
            // The scale is an 11-bit signed field (PostgreSQL 15 allows negative scales).
            let scale = ((t & 0x7ff) ^ 1024) - 1024;
            (None, Some((t >> 16) & 0xffff), Some(scale))
        }
        "time" | "timetz" | "timestamp" | "timestamptz" | "interval" => (None, Some(typmod & 0xffff), None),
        "bit" | "varbit" => (Some(typmod), None, None),
        _ => (None, None, None),
    }
}

/// The schemas holding user tables, in name order, without the system schemas and the worker's
/// own state schema.
pub async fn user_schemas(client: &Client) -> Result<Vec<String>, PgIntrospectError> {
    let rows = client
        .query(
            "SELECT DISTINCT n.nspname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
             WHERE c.relkind IN ('r', 'p') AND NOT c.relispartition \
               AND n.nspname NOT IN ('pg_catalog', 'information_schema', $1) \
               AND n.nspname NOT LIKE 'pg\\_%' ORDER BY 1",
            &[&crate::copy::checkpoint::SCHEMA],
        )
        .await
        .map_err(|source| PgIntrospectError::Query {
            what: "schemas",
            source,
        })?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}

/// The views, functions, procedures and triggers of `schema`, with their definitions (those an
/// extension owns are left out).
pub async fn modules(
    client: &Client,
    schema: &str,
) -> Result<Vec<crate::schema::mssql_model::ModuleDef>, PgIntrospectError> {
    // With only pg_catalog on the search path, pg_get_viewdef qualifies every relation, so a
    // view's definition names its tables without depending on the session's search path.
    client
        .batch_execute("SET search_path = pg_catalog")
        .await
        .map_err(q("views, functions and triggers"))?;
    let rows = client
        .query(
            "SELECT c.relname::text, CASE c.relkind WHEN 'm' THEN 'materialized view' ELSE 'view' END, \
                    pg_get_viewdef(c.oid) \
             FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
             WHERE n.nspname = $1 AND c.relkind IN ('v', 'm') \
               AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.objid = c.oid AND d.deptype = 'e') \
             UNION ALL \
             SELECT p.proname::text, CASE p.prokind WHEN 'p' THEN 'procedure' ELSE 'function' END, \
                    pg_get_functiondef(p.oid) \
             FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace \
             WHERE n.nspname = $1 AND p.prokind IN ('f', 'p') \
               AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.objid = p.oid AND d.deptype = 'e') \
             UNION ALL \
             SELECT t.tgname::text, 'trigger', pg_get_triggerdef(t.oid) \
             FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace \
             WHERE n.nspname = $1 AND NOT t.tgisinternal \
             ORDER BY 2, 1",
            &[&schema],
        )
        .await
        .map_err(q("views, functions and triggers"));
    client
        .batch_execute("RESET search_path")
        .await
        .map_err(q("views, functions and triggers"))?;
    let rows = rows?;
    Ok(rows
        .iter()
        .map(|r| crate::schema::mssql_model::ModuleDef {
            schema: schema.to_string(),
            name: r.get(0),
            kind: r.get(1),
            definition: r.get(2),
        })
        .collect())
}

pub async fn introspect(client: &Client, schema: &str) -> Result<Vec<PgTable>, PgIntrospectError> {
    let rows = client
        .query(
            "SELECT c.oid, c.relname, c.relkind::text,
                    CASE WHEN c.relkind = 'p' THEN
                        (SELECT coalesce(sum(greatest(p.reltuples, 0)), 0)::bigint FROM pg_inherits i
                         JOIN pg_class p ON p.oid = i.inhrelid WHERE i.inhparent = c.oid)
                    ELSE c.reltuples::bigint END,
                    CASE WHEN c.relkind = 'p' THEN
                        (SELECT coalesce(sum(pg_table_size(i.inhrelid)), 0)::bigint FROM pg_inherits i
                         WHERE i.inhparent = c.oid)
                    ELSE pg_table_size(c.oid) END
             FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE n.nspname = $1 AND c.relkind IN ('r', 'p') AND NOT c.relispartition
             ORDER BY c.relname",
            &[&schema],
        )
        .await
        .map_err(q("tables"))?;
    let mut tables = Vec::new();
    for r in rows {
        let oid: u32 = r.get(0);
        let name: String = r.get(1);
        let kind: String = r.get(2);
        let mut row_count: i64 = r.get(3);
        if row_count <= 0 {
            // Never analyzed (reltuples -1) or empty: count, so planning splits large tables.
            let sql = format!(
                "SELECT count(*) FROM {}.{}",
                crate::schema::mssql_to_pg_types::quote_pg(schema),
                crate::schema::mssql_to_pg_types::quote_pg(&name)
            );
            row_count = client.query_one(&sql, &[]).await.map_err(q("row count"))?.get(0);
        }
        let mut t = PgTable {
            schema: schema.to_string(),
            name,
            partitioned: kind == "p",
            columns: Vec::new(),
            primary_key: None,
            unique: Vec::new(),
            indexes: Vec::new(),
            foreign_keys: Vec::new(),
            checks: Vec::new(),
            row_count,
            size_bytes: r.get(4),
        };
        let attnames = columns(client, oid, &mut t).await?;
        constraints(client, oid, &attnames, &mut t).await?;
        indexes(client, oid, &attnames, &mut t).await?;
        tables.push(t);
    }
    Ok(tables)
}

async fn columns(
    client: &Client,
    oid: u32,
    t: &mut PgTable,
) -> Result<HashMap<i16, String>, PgIntrospectError> {
    let rows = client
        .query(
            "SELECT a.attnum, a.attname,
                    CASE WHEN ty.typtype = 'd' THEN bt.typname ELSE ty.typname END::text,
                    format_type(a.atttypid, a.atttypmod),
                    (CASE WHEN ty.typtype = 'd' THEN bt.typtype ELSE ty.typtype END)::text,
                    (CASE WHEN ty.typtype = 'd' THEN bt.typcategory ELSE ty.typcategory END)::text,
                    CASE WHEN ty.typtype = 'd' THEN ty.typtypmod ELSE a.atttypmod END,
                    a.attnotnull, a.attidentity::text, a.attgenerated::text,
                    pg_get_expr(d.adbin, d.adrelid),
                    pg_get_serial_sequence(quote_ident(n.nspname) || '.' || quote_ident(c.relname), a.attname),
                    CASE WHEN ty.typtype = 'd' THEN ty.typbasetype ELSE a.atttypid END,
                    CASE WHEN ty.typtype = 'd' THEN ty.typname::text END,
                    ARRAY(SELECT pg_get_constraintdef(dc.oid) FROM pg_constraint dc
                          WHERE ty.typtype = 'd' AND dc.contypid = ty.oid AND dc.contype = 'c'
                          ORDER BY dc.conname),
                    ty.typtype = 'd' AND ty.typnotnull
             FROM pg_attribute a
             JOIN pg_class c ON c.oid = a.attrelid
             JOIN pg_namespace n ON n.oid = c.relnamespace
             JOIN pg_type ty ON ty.oid = a.atttypid
             LEFT JOIN pg_type bt ON bt.oid = ty.typbasetype
             LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
             WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped
             ORDER BY a.attnum",
            &[&oid],
        )
        .await
        .map_err(q("columns"))?;
    let mut names = HashMap::new();
    for r in rows {
        let attnum: i16 = r.get(0);
        let name: String = r.get(1);
        let type_name: String = r.get(2);
        let typmod: i32 = r.get(6);
        let identity_kind: String = r.get(8);
        let generated: String = r.get(9);
        let default: Option<String> = r.get(10);
        let sequence: Option<String> = r.get(11);
        let type_oid: u32 = r.get(12);
        let type_kind = r.get::<_, String>(4).chars().next().unwrap_or('b');
        let serial = default.as_deref().is_some_and(|d| d.starts_with("nextval(")) && sequence.is_some();
        let identity = !identity_kind.is_empty() || serial;
        let (length, precision, scale) = typmod_parts(&type_name, typmod);
        let enum_labels = if type_kind == 'e' {
            client
                .query(
                    "SELECT enumlabel::text FROM pg_enum WHERE enumtypid = $1 ORDER BY enumsortorder",
                    &[&type_oid],
                )
                .await
                .map_err(q("enum labels"))?
                .iter()
                .map(|r| r.get(0))
                .collect()
        } else {
            Vec::new()
        };
        names.insert(attnum, name.clone());
        t.columns.push(PgColumn {
            name,
            type_name,
            formatted: r.get(3),
            type_kind,
            category: r.get::<_, String>(5).chars().next().unwrap_or('U'),
            length,
            precision,
            scale,
            nullable: !r.get::<_, bool>(7),
            identity,
            sequence: if identity { sequence } else { None },
            default: if identity || generated == "s" {
                None
            } else {
                default.clone()
            },
            generated: (generated == "s").then(|| default.unwrap_or_default()),
            enum_labels,
            domain: r.get::<_, Option<String>>(13).map(|name| PgDomain {
                name,
                checks: r.get(14),
                not_null: r.get(15),
            }),
        });
    }
    Ok(names)
}

fn names_of(attnames: &HashMap<i16, String>, nums: &[i16]) -> Vec<String> {
    nums.iter()
        .map(|n| attnames.get(n).cloned().unwrap_or_else(|| format!("#{n}")))
        .collect()
}

async fn constraints(
    client: &Client,
    oid: u32,
    attnames: &HashMap<i16, String>,
    t: &mut PgTable,
) -> Result<(), PgIntrospectError> {
    let rows = client
        .query(
            // pg_index.indnullsnotdistinct exists from PostgreSQL 15 on: read through to_jsonb so
            // the same query runs on older servers (missing key -> NULL -> false, their only behaviour).
            "SELECT co.conname::text, co.contype::text, co.conkey, co.confkey,
                    rn.nspname::text, rc.relname::text, co.confdeltype::text, co.confupdtype::text,
                    pg_get_constraintdef(co.oid), co.confrelid, coalesce((to_jsonb(ix) ->> 'indnullsnotdistinct')::bool, false),
                    co.convalidated
             FROM pg_constraint co
             LEFT JOIN pg_index ix ON ix.indexrelid = co.conindid AND co.contype IN ('p', 'u')
             LEFT JOIN pg_class rc ON rc.oid = co.confrelid
             LEFT JOIN pg_namespace rn ON rn.oid = rc.relnamespace
             WHERE co.conrelid = $1 AND co.contype IN ('p', 'u', 'f', 'c')
             ORDER BY co.conname",
            &[&oid],
        )
        .await
        .map_err(q("constraints"))?;
    for r in rows {
        let name: String = r.get(0);
        let kind: String = r.get(1);
        let conkey: Vec<i16> = r.get::<_, Option<Vec<i16>>>(2).unwrap_or_default();
        let cols = names_of(attnames, &conkey);
        match kind.as_str() {
            "p" => {
                t.primary_key = Some(PgKey {
                    name,
                    columns: cols,
                    nulls_not_distinct: false,
                })
            }
            "u" => t.unique.push(PgKey {
                name,
                columns: cols,
                nulls_not_distinct: r.get(10),
            }),
            "f" => {
                let confkey: Vec<i16> = r.get::<_, Option<Vec<i16>>>(3).unwrap_or_default();
                let ref_oid: u32 = r.get(9);
                let ref_names: HashMap<i16, String> = client
                    .query(
                        "SELECT attnum, attname::text FROM pg_attribute WHERE attrelid = $1 AND attnum > 0",
                        &[&ref_oid],
                    )
                    .await
                    .map_err(q("referenced columns"))?
                    .iter()
                    .map(|r| (r.get(0), r.get(1)))
                    .collect();
                t.foreign_keys.push(PgForeignKey {
                    name,
                    columns: cols,
                    ref_schema: r.get::<_, Option<String>>(4).unwrap_or_default(),
                    ref_table: r.get::<_, Option<String>>(5).unwrap_or_default(),
                    ref_columns: names_of(&ref_names, &confkey),
                    on_delete: r.get::<_, String>(6).chars().next().unwrap_or('a'),
                    on_update: r.get::<_, String>(7).chars().next().unwrap_or('a'),
                    not_valid: !r.get::<_, bool>(11),
                });
            }
            _ => {
                let def: String = r.get(8);
                let expression = def
                    .strip_prefix("CHECK ")
                    .unwrap_or(&def)
                    .trim_end_matches(" NOT VALID")
                    .to_string();
                t.checks.push(PgCheck {
                    name,
                    expression,
                    not_valid: !r.get::<_, bool>(11),
                });
            }
        }
    }
    Ok(())
}

async fn indexes(
    client: &Client,
    oid: u32,
    attnames: &HashMap<i16, String>,
    t: &mut PgTable,
) -> Result<(), PgIntrospectError> {
    // Indexes that back a constraint are created with it.
    let rows = client
        .query(
            "SELECT i.relname::text, ix.indisunique, ix.indkey::int2[], ix.indoption::int2[], ix.indnkeyatts,
                    pg_get_expr(ix.indpred, ix.indrelid), pg_get_expr(ix.indexprs, ix.indrelid),
                    coalesce((to_jsonb(ix) ->> 'indnullsnotdistinct')::bool, false)
             FROM pg_index ix JOIN pg_class i ON i.oid = ix.indexrelid
             WHERE ix.indrelid = $1
               AND NOT EXISTS (SELECT 1 FROM pg_constraint co WHERE co.conindid = ix.indexrelid
                               AND co.conrelid = ix.indrelid)
             ORDER BY i.relname",
            &[&oid],
        )
        .await
        .map_err(q("indexes"))?;
    for r in rows {
        let keys: Vec<i16> = r.get(2);
        let options: Vec<i16> = r.get(3);
        let nkey = usize::try_from(r.get::<_, i16>(4)).unwrap_or(0);
        let mut columns = Vec::new();
        let mut included = Vec::new();
        for (i, k) in keys.iter().enumerate() {
            let name = attnames.get(k).cloned().unwrap_or_else(|| format!("#{k}"));
            if i < nkey {
                // indoption bit 0 = DESC.
                columns.push((name, options.get(i).is_some_and(|o| o & 1 == 1)));
            } else {
                included.push(name);
            }
        }
        t.indexes.push(PgIndex {
            name: r.get(0),
            unique: r.get(1),
            nulls_not_distinct: r.get(7),
            columns,
            included,
            predicate: r.get(5),
            expression: r.get(6),
        });
    }
    Ok(())
}
