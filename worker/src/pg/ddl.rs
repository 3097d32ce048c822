//! PostgreSQL DDL for a planned table: CREATE TABLE before the copy; keys, indexes, checks, foreign
//! keys and identity values after it.

use crate::options::SchemaOptions;
use crate::pg::expr;
use crate::plan::mssql_to_pg::{Plan, TablePlan};
use crate::preflight::target_names::{ObjectKind, Planned};
use crate::schema::mssql_model::IndexDef;
use crate::schema::mssql_to_pg_types::{PgType, quote_pg};

/// One DDL statement. `optional` statements carry translated T-SQL: if PostgreSQL rejects one,
/// it becomes a warning instead of failing the migration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stmt {
    pub what: String,
    pub sql: String,
    pub optional: bool,
    /// The named object it creates, checked against the target before it runs.
    pub creates: Option<Planned>,
}

impl Stmt {
    fn required(what: impl Into<String>, sql: String) -> Self {
        Stmt {
            what: what.into(),
            sql,
            optional: false,
            creates: None,
        }
    }

    fn optional(what: impl Into<String>, sql: String) -> Self {
        Stmt {
            what: what.into(),
            sql,
            optional: true,
            creates: None,
        }
    }

    /// Names `kind` `name` of table `t` as what it creates.
    fn creating(mut self, kind: ObjectKind, t: &TablePlan, name: &str) -> Self {
        self.creates = Some(Planned::on(kind, &t.target_schema, &t.target_name, name));
        self
    }
}

pub fn quote_literal(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

pub fn qualified(t: &TablePlan) -> String {
    format!("{}.{}", quote_pg(&t.target_schema), quote_pg(&t.target_name))
}

/// The table's target columns, quoted, in the order its COPY rows carry them.
pub fn copied_columns(t: &TablePlan) -> String {
    t.columns
        .iter()
        .map(|c| quote_pg(&c.target_name))
        .collect::<Vec<_>>()
        .join(", ")
}

pub fn create_schema(schema: &str) -> String {
    format!("CREATE SCHEMA IF NOT EXISTS {}", quote_pg(schema))
}

pub fn drop_table(t: &TablePlan) -> String {
    drop_tables(&[qualified(t)], false)
}

/// One `DROP TABLE` for tables that may reference each other. `cascade` only when the dependents
/// outside the migration were listed and the user allowed them to go (`dropDependents`).
pub fn drop_tables(qualified_names: &[String], cascade: bool) -> String {
    format!(
        "DROP TABLE IF EXISTS {}{}",
        qualified_names.join(", "),
        if cascade { " CASCADE" } else { "" }
    )
}

/// Drops foreign key `name` of `schema.table` (a table outside the migration that references one
/// it empties); every identifier quoted, whatever it holds.
pub fn drop_constraint(schema: &str, table: &str, name: &str) -> String {
    format!(
        "ALTER TABLE {}.{} DROP CONSTRAINT {}",
        quote_pg(schema),
        quote_pg(table),
        quote_pg(name)
    )
}

/// Adds constraint `name` to `schema.table` with `definition` as `pg_get_constraintdef` printed
/// it (PostgreSQL's own rendering, identifiers quoted), to recreate a dropped foreign key.
pub fn add_constraint(schema: &str, table: &str, name: &str, definition: &str) -> String {
    format!(
        "ALTER TABLE {}.{} ADD CONSTRAINT {} {definition}",
        quote_pg(schema),
        quote_pg(table),
        quote_pg(name)
    )
}

fn type_range(ty: PgType) -> Option<(i64, i64)> {
    match ty {
        PgType::Int2 => Some((i64::from(i16::MIN), i64::from(i16::MAX))),
        PgType::Int4 => Some((i64::from(i32::MIN), i64::from(i32::MAX))),
        PgType::Int8 => Some((i64::MIN, i64::MAX)),
        _ => None,
    }
}

/// CREATE TABLE with column types, NOT NULL, identity and the tinyint range check; `unlogged`
/// skips the WAL for the load (finalize switches the table to LOGGED).
pub fn create_table(t: &TablePlan, schema: &SchemaOptions, unlogged: bool) -> String {
    let mut cols = Vec::new();
    // Source column order, generated columns in their place.
    let mut ordered: Vec<(&crate::schema::mssql_to_pg_types::ColumnMapping, Option<&str>)> = t
        .columns
        .iter()
        .map(|c| (c, None))
        .chain(
            t.generated
                .iter()
                .map(|g| (&g.column, Some(g.expression.as_str()))),
        )
        .collect();
    ordered.sort_by_key(|(c, _)| t.source.columns.iter().position(|s| s.name == c.source.name));
    let mut domains: Vec<String> = Vec::new();
    for (c, generated) in ordered {
        // PostgreSQL refuses identity on a domain: an identity column keeps the base type.
        let ty = match &c.domain {
            Some(d) if c.source.identity.is_none() => {
                let stmt = create_domain(&t.target_schema, d, c.pg_type);
                if !domains.contains(&stmt) {
                    domains.push(stmt);
                }
                format!("{}.{}", quote_pg(&t.target_schema), quote_pg(d))
            }
            _ => c.pg_type.to_string(),
        };
        let mut s = format!("{} {ty}", quote_pg(&c.target_name));
        if let Some(e) = generated {
            s.push_str(&format!(" GENERATED ALWAYS AS ({e}) STORED"));
        }
        if !c.source.nullable {
            s.push_str(" NOT NULL");
        }
        if schema.identity
            && let (Some(id), Some((min, max))) = (&c.source.identity, type_range(c.pg_type))
        {
            // The type's whole range: SQL Server seeds are often 0 or negative, PostgreSQL's
            // default MINVALUE is 1.
            s.push_str(&format!(
                " GENERATED BY DEFAULT AS IDENTITY (START WITH {} INCREMENT BY {} MINVALUE {min} MAXVALUE {max})",
                id.seed, id.increment
            ));
        }
        if c.check_0_255 {
            s.push_str(&format!(
                " CHECK ({} BETWEEN 0 AND 255)",
                quote_pg(&c.target_name)
            ));
        }
        cols.push(s);
    }
    domains.push(format!(
        "CREATE {}TABLE {} (\n  {}\n)",
        if unlogged { "UNLOGGED " } else { "" },
        qualified(t),
        cols.join(",\n  ")
    ));
    domains.join(";\n")
}

/// `format_type`'s spelling of a type, to compare an existing domain's base type with.
fn catalog_spelling(t: PgType) -> String {
    match t {
        PgType::Time { precision } => format!("time({precision}) without time zone"),
        PgType::Timestamp { precision } => format!("timestamp({precision}) without time zone"),
        PgType::Timestamptz { precision } => format!("timestamp({precision}) with time zone"),
        PgType::Varchar { length } => format!("character varying({length})"),
        PgType::Char { length } => format!("character({length})"),
        other => other.to_string(),
    }
}

/// The domain standing for a SQL Server alias type, unless it exists: tables sharing it, and an
/// earlier run, find it there. One of the same name over another base type is an error, not
/// silently a different column type.
pub fn create_domain(schema: &str, name: &str, base: PgType) -> String {
    let want = catalog_spelling(base);
    format!(
        "DO $mssqlpg$\nDECLARE found text;\nBEGIN\n  \
         SELECT format_type(t.typbasetype, t.typtypmod) INTO found FROM pg_type t \
         JOIN pg_namespace n ON n.oid = t.typnamespace \
         WHERE n.nspname = {} AND t.typname = {} AND t.typtype = 'd';\n  \
         IF found IS NULL THEN\n    CREATE DOMAIN {}.{} AS {base};\n  \
         ELSIF found <> {} THEN\n    \
         RAISE EXCEPTION 'domain %.% exists over %, the alias type it stands for is %', {}, {}, found, {};\n  \
         END IF;\nEND\n$mssqlpg$",
        quote_literal(schema),
        quote_literal(name),
        quote_pg(schema),
        quote_pg(name),
        quote_literal(&want),
        quote_literal(schema),
        quote_literal(name),
        quote_literal(&want),
    )
}

/// A throwaway table with the copied columns and generated column `index`: PostgreSQL's verdict on
/// the translated expression (types, immutability) before the plan relies on it.
pub fn probe_generated(t: &TablePlan, index: usize) -> Option<String> {
    let g = t.generated.get(index)?;
    let mut cols: Vec<String> = t
        .columns
        .iter()
        .map(|c| format!("{} {}", quote_pg(&c.target_name), c.pg_type))
        .collect();
    cols.push(format!(
        "{} {} GENERATED ALWAYS AS ({}) STORED",
        quote_pg(&g.column.target_name),
        g.column.pg_type,
        g.expression
    ));
    Some(format!(
        "CREATE TEMP TABLE \"_mssqlpg_probe\" ({})",
        cols.join(", ")
    ))
}

/// Switches a table loaded UNLOGGED back to LOGGED (a rewrite that writes it to the WAL).
pub fn set_logged(t: &TablePlan) -> String {
    format!("ALTER TABLE {} SET LOGGED", qualified(t))
}

/// Column defaults, translated from T-SQL; untranslatable ones become warnings.
pub fn defaults(t: &TablePlan, warnings: &mut Vec<String>) -> Vec<Stmt> {
    let mut out = Vec::new();
    for d in &t.source.defaults {
        let Some(col) = t.target_column(&d.column) else {
            continue;
        };
        if col.source.identity.is_some() {
            continue;
        }
        match expr::translate(&d.definition, t, col.pg_type == PgType::Bool) {
            Ok(e) => out.push(Stmt::optional(
                format!("default of {}.{}", t.target_name, col.target_name),
                format!(
                    "ALTER TABLE {} ALTER COLUMN {} SET DEFAULT {e}",
                    qualified(t),
                    quote_pg(&col.target_name)
                ),
            )),
            Err(why) => warnings.push(format!(
                "table {}: default {} of column {} not migrated: {why}",
                t.source.qualified(),
                d.definition,
                d.column
            )),
        }
    }
    out
}

fn column_list(t: &TablePlan, names: &[String]) -> String {
    names
        .iter()
        .map(|n| quote_pg(t.target_column(n).map_or(n.as_str(), |c| c.target_name.as_str())))
        .collect::<Vec<_>>()
        .join(", ")
}

fn nulls_not_distinct(
    t: &TablePlan,
    ix: &IndexDef,
    pg_major: u32,
    warnings: &mut Vec<String>,
) -> &'static str {
    // SQL Server unique indexes treat NULLs as equal; PostgreSQL 15+ can keep that rule.
    let nullable: Vec<&str> = ix
        .columns
        .iter()
        .filter(|c| t.target_column(&c.name).is_none_or(|m| m.source.nullable))
        .map(|c| c.name.as_str())
        .collect();
    if nullable.is_empty() {
        ""
    } else if pg_major >= 15 {
        " NULLS NOT DISTINCT"
    } else {
        // Older servers have no way to say it: the key is weaker than the source's, so say so.
        warnings.push(format!(
            "table {}: unique key {} over nullable column(s) {}: SQL Server lets one row per key \
             have NULLs there, PostgreSQL {pg_major} any number (NULLS NOT DISTINCT needs 15+)",
            t.source.qualified(),
            ix.name,
            nullable.join(", ")
        ));
        ""
    }
}

/// Primary key, unique constraints, indexes and checks, built after the data is in.
pub fn finalize_table(
    t: &TablePlan,
    schema: &SchemaOptions,
    pg_major: u32,
    warnings: &mut Vec<String>,
) -> Vec<Stmt> {
    let q = qualified(t);
    let mut out = Vec::new();
    out.extend(primary_key(t));
    {
        for (ix, name) in t.source.indexes.iter().zip(&t.index_names) {
            let cols: Vec<String> = ix.columns.iter().map(|c| c.name.clone()).collect();
            // Unique constraints are part of the data model (foreign keys may reference them);
            // `indexes: false` only drops secondary indexes.
            if !ix.unique_constraint && !schema.indexes {
                continue;
            }
            if ix.unique_constraint && ix.filter.is_none() {
                out.push(
                    Stmt::required(
                        format!("unique constraint {name}"),
                        format!(
                            "ALTER TABLE {q} ADD CONSTRAINT {} UNIQUE{} ({})",
                            quote_pg(name),
                            nulls_not_distinct(t, ix, pg_major, warnings),
                            column_list(t, &cols)
                        ),
                    )
                    .creating(ObjectKind::Unique, t, name),
                );
                continue;
            }
            let keys = ix
                .columns
                .iter()
                .map(|c| {
                    let n = quote_pg(
                        t.target_column(&c.name)
                            .map_or(c.name.as_str(), |m| m.target_name.as_str()),
                    );
                    if c.descending { format!("{n} DESC") } else { n }
                })
                .collect::<Vec<_>>()
                .join(", ");
            let mut sql = format!(
                "CREATE {}INDEX {} ON {q} ({keys})",
                if ix.unique { "UNIQUE " } else { "" },
                quote_pg(name)
            );
            if !ix.included.is_empty() {
                sql.push_str(&format!(" INCLUDE ({})", column_list(t, &ix.included)));
            }
            if ix.unique {
                sql.push_str(nulls_not_distinct(t, ix, pg_major, warnings));
            }
            let mut optional = false;
            if let Some(f) = &ix.filter {
                match expr::translate(f, t, false) {
                    Ok(e) => {
                        sql.push_str(&format!(" WHERE {e}"));
                        optional = true;
                    }
                    Err(why) => {
                        warnings.push(format!(
                            "table {}: filtered index {} not migrated: filter {f}: {why}",
                            t.source.qualified(),
                            ix.name
                        ));
                        continue;
                    }
                }
            }
            out.push(Stmt {
                what: format!("index {name}"),
                sql,
                optional,
                creates: Some(Planned::on(
                    ObjectKind::Index,
                    &t.target_schema,
                    &t.target_name,
                    name,
                )),
            });
        }
    }
    if schema.check_constraints {
        for (ck, name) in t.source.checks.iter().zip(&t.check_names) {
            match expr::translate(&ck.definition, t, false) {
                Ok(e) => {
                    // Untrusted (or disabled, which the plan warns about): rows the source holds
                    // may violate it; PostgreSQL then checks only new and updated rows.
                    out.push(
                        Stmt::optional(
                            format!("check constraint {name}"),
                            format!(
                                "ALTER TABLE {q} ADD CONSTRAINT {} CHECK ({e}){}",
                                quote_pg(name),
                                if ck.not_trusted { " NOT VALID" } else { "" }
                            ),
                        )
                        .creating(ObjectKind::Check, t, name),
                    )
                }
                Err(why) => warnings.push(format!(
                    "table {}: check constraint {} not migrated: {}: {why}",
                    t.source.qualified(),
                    ck.name,
                    ck.definition
                )),
            }
        }
    }
    out
}

/// Moves each identity sequence past both the source's last identity value and max(col), so the
/// next generated value never collides (`setval(..., false)` on an empty table keeps the seed).
pub fn identity_reset(t: &TablePlan) -> Vec<Stmt> {
    let mut out = Vec::new();
    for c in &t.columns {
        let Some(id) = &c.source.identity else { continue };
        if type_range(c.pg_type).is_none() {
            continue;
        }
        let col = quote_pg(&c.target_name);
        let (agg, pick) = if id.increment >= 0 {
            ("max", "greatest")
        } else {
            ("min", "least")
        };
        let last = t
            .source
            .identity_last_value
            .map_or("NULL".to_string(), |v| v.to_string());
        out.push(Stmt::required(
            format!("identity of {}.{}", t.target_name, c.target_name),
            format!(
                "SELECT setval(pg_get_serial_sequence({}, {}), coalesce({pick}({agg}({col}), {last}), {}), \
                 {agg}({col}) IS NOT NULL OR {last} IS NOT NULL) FROM {}",
                quote_literal(&qualified(t)),
                quote_literal(&c.target_name),
                id.seed,
                qualified(t)
            ),
        ));
    }
    out
}

/// Name of the per-connection staging table of upsert mode.
pub const STAGE: &str = "_mssqlpg_stage";

/// The staging table for upsert: same columns, emptied at every commit.
pub fn upsert_stage(t: &TablePlan) -> String {
    if t.generated.is_empty() {
        return format!(
            "CREATE TEMP TABLE IF NOT EXISTS {} (LIKE {}) ON COMMIT DELETE ROWS",
            quote_pg(STAGE),
            qualified(t)
        );
    }
    // LIKE would copy a generated column as a plain one, NOT NULL included, that the COPY does
    // not fill: take the copied columns only.
    let cols = copied_columns(t);
    format!(
        "CREATE TEMP TABLE IF NOT EXISTS {} ON COMMIT DELETE ROWS AS SELECT {cols} FROM {} WITH NO DATA",
        quote_pg(STAGE),
        qualified(t)
    )
}

/// Moves a chunk from the staging table into the target: new keys are inserted, changed rows
/// updated, identical rows left alone (no dead tuples for unchanged data).
pub fn upsert_merge(t: &TablePlan) -> String {
    upsert_merge_from(t, &quote_pg(STAGE))
}

/// [`upsert_merge`] of the rows `from` gives (a table, and a condition): an online migration's
/// apply takes the upserts of its staging table this way.
pub fn upsert_merge_from(t: &TablePlan, from: &str) -> String {
    let cols: Vec<String> = t.columns.iter().map(|c| quote_pg(&c.target_name)).collect();
    let key: Vec<String> = t
        .source
        .primary_key
        .as_ref()
        .map(|pk| {
            pk.columns
                .iter()
                .map(|n| quote_pg(t.target_column(n).map_or(n.as_str(), |c| c.target_name.as_str())))
                .collect()
        })
        .unwrap_or_default();
    let non_key: Vec<&crate::schema::mssql_to_pg_types::ColumnMapping> = t
        .columns
        .iter()
        .filter(|c| !key.contains(&quote_pg(&c.target_name)))
        .collect();
    let list = cols.join(", ");
    let mut sql = format!(
        // A `GENERATED ALWAYS` identity of a table that exists already (upsert; the source a
        // reverse stream writes back into) takes the row's own value too.
        "INSERT INTO {} AS t ({list}) OVERRIDING SYSTEM VALUE SELECT {list} FROM {from} ON CONFLICT ({}) ",
        qualified(t),
        key.join(", ")
    );
    if non_key.is_empty() {
        sql.push_str("DO NOTHING");
    } else {
        // xml has no equality operator: compare its text.
        let cmp = |prefix: &str, c: &crate::schema::mssql_to_pg_types::ColumnMapping| {
            let e = format!("{prefix}.{}", quote_pg(&c.target_name));
            if c.pg_type == PgType::Xml {
                format!("{e}::text")
            } else {
                e
            }
        };
        let sets = non_key
            .iter()
            .map(|c| format!("{0} = EXCLUDED.{0}", quote_pg(&c.target_name)))
            .collect::<Vec<_>>();
        let old = non_key.iter().map(|c| cmp("t", c)).collect::<Vec<_>>();
        let new = non_key.iter().map(|c| cmp("EXCLUDED", c)).collect::<Vec<_>>();
        sql.push_str(&format!(
            "DO UPDATE SET {} WHERE ({}) IS DISTINCT FROM ({})",
            sets.join(", "),
            old.join(", "),
            new.join(", ")
        ));
    }
    sql
}

/// The primary key alone (upsert mode needs it before the first chunk).
pub fn primary_key(t: &TablePlan) -> Option<Stmt> {
    let (pk, name) = (t.source.primary_key.as_ref()?, t.pk_name.as_ref()?);
    Some(
        Stmt::required(
            format!("primary key of {}", t.target_name),
            format!(
                "ALTER TABLE {} ADD CONSTRAINT {} PRIMARY KEY ({})",
                qualified(t),
                quote_pg(name),
                column_list(t, &pk.columns)
            ),
        )
        .creating(ObjectKind::PrimaryKey, t, name),
    )
}

fn referential_action(desc: &str) -> &'static str {
    match desc {
        "CASCADE" => "CASCADE",
        "SET_NULL" => "SET NULL",
        "SET_DEFAULT" => "SET DEFAULT",
        _ => "NO ACTION",
    }
}

/// Foreign keys, after every table is finalized. References to tables outside the plan are
/// skipped with a warning.
pub fn foreign_keys(plan: &Plan, warnings: &mut Vec<String>) -> Vec<Stmt> {
    let mut out = Vec::new();
    for t in &plan.tables {
        for (fk, name) in t.source.foreign_keys.iter().zip(&t.fk_names) {
            let Some(rt) = plan
                .tables
                .iter()
                .find(|r| r.source.schema == fk.ref_schema && r.source.name == fk.ref_table)
            else {
                warnings.push(format!(
                    "table {}: foreign key {} skipped: {}.{} is not part of the migration",
                    t.source.qualified(),
                    fk.name,
                    fk.ref_schema,
                    fk.ref_table
                ));
                continue;
            };
            out.push(
                Stmt::required(
                format!("foreign key {name}"),
                format!(
                    "ALTER TABLE {} ADD CONSTRAINT {} FOREIGN KEY ({}) REFERENCES {} ({}) ON DELETE {} ON UPDATE {}{}",
                    qualified(t),
                    quote_pg(name),
                    column_list(t, &fk.columns),
                    qualified(rt),
                    column_list(rt, &fk.ref_columns),
                    referential_action(&fk.on_delete),
                    referential_action(&fk.on_update),
                    if fk.not_trusted { " NOT VALID" } else { "" }
                ),
            )
                .creating(ObjectKind::ForeignKey, t, name),
            );
        }
    }
    out
}
