//! T-SQL DDL for the PostgreSQL -> SQL Server direction: tables before the copy; keys, indexes,
//! checks, defaults, identity reseed and foreign keys after it. Statements that cannot be
//! translated become plan warnings, never silently dropped.

use crate::mssql::expr::{self, Ctx};
use crate::plan::pg_to_mssql::{PgToMssqlPlan, PgToMssqlTablePlan, TableNames};
use crate::preflight::target_names::{ObjectKind, Planned};
use crate::schema::mssql_to_pg_types::quote_mssql;
use crate::schema::pg_to_mssql_types::PgToMssqlColumn;

/// One DDL statement and what it is for (messages).
#[derive(Debug, Clone)]
pub struct MsStmt {
    pub what: String,
    pub sql: String,
    /// Failure is a warning (a translated expression SQL Server rejected), not an error.
    pub optional: bool,
    /// The named object it creates, checked against the target before it runs.
    pub creates: Option<Planned>,
}

/// `kind` `name` of table `t`, as a statement creates it.
fn planned(kind: ObjectKind, t: &PgToMssqlTablePlan, name: &str) -> Option<Planned> {
    Some(Planned::on(kind, &t.target_schema, &t.target_name, name))
}

pub fn qualified(t: &PgToMssqlTablePlan) -> String {
    format!(
        "{}.{}",
        quote_mssql(&t.target_schema),
        quote_mssql(&t.target_name)
    )
}

pub fn create_table(t: &PgToMssqlTablePlan, identity: bool) -> String {
    let mut types: Vec<String> = Vec::new();
    let cols = t
        .columns
        .iter()
        .map(|c| {
            if let Some(expr) = &c.computed {
                return format!("{} AS ({expr}) PERSISTED", quote_mssql(&c.target_name));
            }
            let ident = if identity && c.identity {
                " IDENTITY(1,1)"
            } else {
                ""
            };
            // A domain becomes an alias type of the same name over the mapped base type (an
            // identity column keeps the base type, as its PostgreSQL column had no domain there).
            let ty = match &c.source.domain {
                Some(d) if ident.is_empty() => {
                    let stmt = create_alias_type(&t.target_schema, &d.name, c.ms_type);
                    if !types.contains(&stmt) {
                        types.push(stmt);
                    }
                    format!("{}.{}", quote_mssql(&t.target_schema), quote_mssql(&d.name))
                }
                _ => c.ms_type.to_string(),
            };
            let nullable = c.source.nullable && !c.source.domain.as_ref().is_some_and(|d| d.not_null);
            format!(
                "{} {ty}{ident} {}",
                quote_mssql(&c.target_name),
                if nullable { "NULL" } else { "NOT NULL" }
            )
        })
        .collect::<Vec<_>>()
        .join(", ");
    types.push(format!("CREATE TABLE {} ({cols})", qualified(t)));
    types.join(";\n")
}

/// The alias type standing for a PostgreSQL domain, unless one of that name exists (tables
/// sharing it, an earlier run); one over another base type stops the batch rather than giving
/// the column a different type. Dynamic SQL, so that the batch parses where the type exists.
pub fn create_alias_type(schema: &str, name: &str, base: crate::schema::pg_to_mssql_types::MsType) -> String {
    use crate::schema::pg_to_mssql_types::MsType;
    let lit = |s: &str| format!("N'{}'", s.replace('\'', "''"));
    let rendered = base.to_string();
    let base_name = rendered.split('(').next().unwrap_or(&rendered);
    let shape = match base {
        MsType::NVarChar { length } => {
            format!(" AND t.max_length = {}", length.map_or(-1, |n| i64::from(n) * 2))
        }
        MsType::NChar { length } => format!(" AND t.max_length = {}", i64::from(length) * 2),
        MsType::VarChar { length } | MsType::Char { length } => format!(" AND t.max_length = {length}"),
        MsType::Decimal { precision, scale } => {
            format!(" AND t.precision = {precision} AND t.scale = {scale}")
        }
        MsType::Time { scale } | MsType::DateTime2 { scale } | MsType::DateTimeOffset { scale } => {
            format!(" AND t.scale = {scale}")
        }
        _ => String::new(),
    };
    let named = format!(
        "FROM sys.types t JOIN sys.schemas s ON s.schema_id = t.schema_id \
         WHERE s.name = {} AND t.name = {} AND t.is_user_defined = 1",
        lit(schema),
        lit(name)
    );
    format!(
        "IF NOT EXISTS (SELECT 1 {named}) EXEC ({});\n\
         IF EXISTS (SELECT 1 {named} AND NOT EXISTS (SELECT 1 FROM sys.types b \
         WHERE b.user_type_id = t.system_type_id AND b.name = {}{shape})) THROW 50000, {}, 1",
        lit(&format!(
            "CREATE TYPE {}.{} FROM {base}",
            quote_mssql(schema),
            quote_mssql(name)
        )),
        lit(base_name),
        lit(&format!(
            "alias type {schema}.{name} exists over another type than {base}, the type of the domain it stands for"
        ))
    )
}

/// Adds foreign key `name` to `schema.table` with `definition` (`FOREIGN KEY (...) REFERENCES
/// ...`, built with quoted names from the catalog), to recreate one of a table outside the
/// migration; every identifier quoted, whatever it holds.
pub fn add_foreign_key(schema: &str, table: &str, name: &str, definition: &str) -> String {
    format!(
        "ALTER TABLE {}.{} WITH CHECK ADD CONSTRAINT {} {definition}",
        quote_mssql(schema),
        quote_mssql(table),
        quote_mssql(name)
    )
}

pub fn drop_table(t: &PgToMssqlTablePlan) -> String {
    format!("DROP TABLE IF EXISTS {}", qualified(t))
}

fn col_list(t: &PgToMssqlTablePlan, names: &[String]) -> Result<String, String> {
    names
        .iter()
        .map(|n| {
            t.columns
                .iter()
                .find(|c| &c.source.name == n)
                .map(|c| quote_mssql(&c.target_name))
                .ok_or_else(|| format!("column {n} is not copied"))
        })
        .collect::<Result<Vec<_>, _>>()
        .map(|v| v.join(", "))
}

fn lookup(t: &PgToMssqlTablePlan) -> impl Fn(&str) -> Option<String> + '_ {
    move |n: &str| {
        t.columns
            .iter()
            .find(|c| c.source.name == n)
            .map(|c| c.target_name.clone())
    }
}

/// Source column -> target column and its type, for the expression translator.
fn expr_lookup(t: &PgToMssqlTablePlan) -> impl Fn(&str) -> Option<(String, expr::Operand)> + '_ {
    move |n: &str| {
        t.columns
            .iter()
            .find(|c| c.source.name == n)
            .map(|c| (c.target_name.clone(), expr::column_operand(&c.source, c.ms_type)))
    }
}

/// Whether SQL Server can use the column as an index key (not (max), not varbinary(max)).
fn indexable(t: &PgToMssqlTablePlan, name: &str) -> bool {
    use crate::schema::pg_to_mssql_types::MsType;
    t.columns.iter().find(|c| c.source.name == name).is_some_and(|c| {
        !matches!(
            c.ms_type,
            MsType::NVarChar { length: None } | MsType::VarBinaryMax
        )
    })
}

/// The nullable columns among `cols` (PostgreSQL names).
fn nullable_of<'a>(t: &PgToMssqlTablePlan, cols: impl IntoIterator<Item = &'a String>) -> Vec<&'a String> {
    cols.into_iter()
        .filter(|n| {
            t.columns
                .iter()
                .any(|c| &c.source.name == *n && c.source.nullable)
        })
        .collect()
}

/// `c1 IS NOT NULL AND c2 IS NOT NULL` in SQL Server names.
fn not_null_filter(t: &PgToMssqlTablePlan, cols: &[&String]) -> String {
    cols.iter()
        .map(|c| {
            format!(
                "{} IS NOT NULL",
                quote_mssql(&lookup(t)(c).unwrap_or_else(|| (*c).clone()))
            )
        })
        .collect::<Vec<_>>()
        .join(" AND ")
}

/// The unique constraints of `t` (their column lists) that a migrated foreign key references:
/// SQL Server foreign keys cannot reference a filtered index, so these stay plain UNIQUE.
pub fn referenced_keys(plan: &PgToMssqlPlan, t: &PgToMssqlTablePlan) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for other in &plan.tables {
        for fk in &other.source.foreign_keys {
            if fk.ref_schema == t.source.schema && fk.ref_table == t.source.name {
                let mut cols = fk.ref_columns.clone();
                cols.sort();
                out.push(cols);
            }
        }
    }
    out
}

/// Primary key, unique constraints, indexes, checks and defaults of one table.
///
/// SQL Server treats NULLs as equal in a UNIQUE constraint or index; PostgreSQL (unless
/// `NULLS NOT DISTINCT`) treats them as distinct. A PostgreSQL unique key over nullable columns
/// therefore becomes a filtered unique index `WHERE c IS NOT NULL AND ...`, which enforces exactly
/// what PostgreSQL does, except when a foreign key references it (`referenced`, from
/// [`referenced_keys`]): SQL Server FKs need an unfiltered key, so it stays a plain UNIQUE that
/// holds only while at most one row per key has NULLs; if the data has more, SQL Server refuses it,
/// the refusal is a warning and the referencing foreign keys are then refused (warnings) too.
pub fn finalize_table(
    t: &PgToMssqlTablePlan,
    opts: &crate::options::SchemaOptions,
    names: &TableNames,
    referenced: &[Vec<String>],
    warnings: &mut Vec<String>,
) -> Vec<MsStmt> {
    let mut out = primary_key(t, names, warnings);
    if opts.indexes {
        out.extend(unique_constraints(t, names, referenced, warnings));
        out.extend(indexes(t, warnings));
    }
    if opts.check_constraints {
        out.extend(check_constraints(t, names, warnings));
        out.extend(domain_checks(t, warnings));
    }
    out.extend(type_checks(t, names));
    if opts.defaults {
        out.extend(defaults(t, names, warnings));
    }
    out
}

/// Whether `cols` can be an index key in SQL Server; if not, a warning says `what` is not created.
fn keyed(t: &PgToMssqlTablePlan, cols: &[String], what: &str, warnings: &mut Vec<String>) -> bool {
    if let Some(c) = cols.iter().find(|c| !indexable(t, c)) {
        warnings.push(format!(
            "table {}: {what} not created: column {c} is nvarchar(max)/varbinary(max) in SQL Server, \
             which cannot be an index key (no value short enough to size it was found)",
            t.source.qualified()
        ));
        return false;
    }
    true
}

fn primary_key(t: &PgToMssqlTablePlan, names: &TableNames, warnings: &mut Vec<String>) -> Vec<MsStmt> {
    let q = qualified(t);
    let tq = t.source.qualified();
    let mut out = Vec::new();
    if let Some(pk) = &t.source.primary_key
        && keyed(t, &pk.columns, &format!("primary key {}", pk.name), warnings)
        && let Ok(cols) = col_list(t, &pk.columns)
    {
        out.push(MsStmt {
            what: format!("primary key of {tq}"),
            sql: format!(
                "ALTER TABLE {q} ADD CONSTRAINT {} PRIMARY KEY ({cols})",
                quote_mssql(&names.pk)
            ),
            optional: false,
            creates: planned(ObjectKind::PrimaryKey, t, &names.pk),
        });
    }
    out
}

/// Unique constraints: a filtered unique index where PostgreSQL lets NULLs repeat.
fn unique_constraints(
    t: &PgToMssqlTablePlan,
    names: &TableNames,
    referenced: &[Vec<String>],
    warnings: &mut Vec<String>,
) -> Vec<MsStmt> {
    let q = qualified(t);
    let tq = t.source.qualified();
    let mut out = Vec::new();
    for (u, name) in t.source.unique.iter().zip(&names.unique) {
        if keyed(t, &u.columns, &format!("unique constraint {}", u.name), warnings)
            && let Ok(cols) = col_list(t, &u.columns)
        {
            let nullable = nullable_of(t, &u.columns);
            let mut sorted = u.columns.clone();
            sorted.sort();
            if u.nulls_not_distinct || nullable.is_empty() {
                out.push(MsStmt {
                    what: format!("unique constraint {} of {tq}", u.name),
                    sql: format!(
                        "ALTER TABLE {q} ADD CONSTRAINT {} UNIQUE ({cols})",
                        quote_mssql(name)
                    ),
                    optional: false,
                    creates: planned(ObjectKind::Unique, t, name),
                });
            } else if referenced.contains(&sorted) {
                warnings.push(format!(
                    "table {tq}: unique constraint {} ({}) allows any number of NULLs in PostgreSQL                          but a foreign key references it, so it is a plain UNIQUE in SQL Server (NULLs                          equal): if more than one row per key has NULLs it is not created and the                          referencing foreign keys are not either",
                    u.name,
                    u.columns.join(", ")
                ));
                out.push(MsStmt {
                    what: format!("unique constraint {} of {tq}", u.name),
                    sql: format!(
                        "ALTER TABLE {q} ADD CONSTRAINT {} UNIQUE ({cols})",
                        quote_mssql(name)
                    ),
                    optional: true,
                    creates: planned(ObjectKind::Unique, t, name),
                });
            } else {
                out.push(MsStmt {
                    what: format!("unique constraint {} of {tq} (filtered unique index)", u.name),
                    sql: format!(
                        "CREATE UNIQUE INDEX {} ON {q} ({cols}) WHERE {}",
                        quote_mssql(name),
                        not_null_filter(t, &nullable)
                    ),
                    optional: false,
                    creates: planned(ObjectKind::Index, t, name),
                });
            }
        }
    }
    out
}

/// Indexes (expression indexes are listed, not migrated).
fn indexes(t: &PgToMssqlTablePlan, warnings: &mut Vec<String>) -> Vec<MsStmt> {
    let q = qualified(t);
    let tq = t.source.qualified();
    let mut out = Vec::new();
    for ix in &t.source.indexes {
        if let Some(e) = &ix.expression {
            warnings.push(format!(
                "table {tq}: expression index {} ({e}) not migrated: SQL Server indexes columns only",
                ix.name
            ));
            continue;
        }
        let names_only: Vec<String> = ix.columns.iter().map(|(c, _)| c.clone()).collect();
        if !keyed(t, &names_only, &format!("index {}", ix.name), warnings) {
            continue;
        }
        let keys = ix
            .columns
            .iter()
            .map(|(c, desc)| {
                format!(
                    "{} {}",
                    quote_mssql(&lookup(t)(c).unwrap_or_else(|| c.clone())),
                    if *desc { "DESC" } else { "ASC" }
                )
            })
            .collect::<Vec<_>>()
            .join(", ");
        let mut sql = format!(
            "CREATE {}INDEX {} ON {q} ({keys})",
            if ix.unique { "UNIQUE " } else { "" },
            quote_mssql(&ix.name)
        );
        if !ix.included.is_empty() {
            match col_list(t, &ix.included) {
                Ok(inc) => sql.push_str(&format!(" INCLUDE ({inc})")),
                Err(e) => {
                    warnings.push(format!("table {tq}: index {}: {e}", ix.name));
                    continue;
                }
            }
        }
        let mut filter = Vec::new();
        if let Some(pred) = &ix.predicate {
            let cols = expr_lookup(t);
            match expr::translate(
                pred,
                &Ctx {
                    columns: &cols,
                    qualified: None,
                    column_type: None,
                },
            ) {
                Ok(p) => filter.push(format!("({p})")),
                Err(e) => {
                    warnings.push(format!(
                        "table {tq}: partial index {} not migrated: its predicate {pred} could not be \
                         translated ({e})",
                        ix.name
                    ));
                    continue;
                }
            }
        }
        // NULLs distinct (PostgreSQL's default) over nullable key columns: only rows without
        // NULLs in the key take part, as in PostgreSQL (SQL Server would allow one NULL).
        if ix.unique && !ix.nulls_not_distinct {
            let nullable = nullable_of(t, &names_only);
            if !nullable.is_empty() {
                filter.push(not_null_filter(t, &nullable));
            }
        }
        if !filter.is_empty() {
            sql.push_str(&format!(" WHERE {}", filter.join(" AND ")));
        }
        out.push(MsStmt {
            what: format!("index {} of {tq}", ix.name),
            sql,
            optional: true,
            creates: planned(ObjectKind::Index, t, &ix.name),
        });
    }
    out
}

fn check_constraints(t: &PgToMssqlTablePlan, names: &TableNames, warnings: &mut Vec<String>) -> Vec<MsStmt> {
    let q = qualified(t);
    let tq = t.source.qualified();
    let mut out = Vec::new();
    for (ck, name) in t.source.checks.iter().zip(&names.checks) {
        let cols = expr_lookup(t);
        match expr::translate(
            &ck.expression,
            &Ctx {
                columns: &cols,
                qualified: None,
                column_type: None,
            },
        ) {
            Ok(e) => out.push(MsStmt {
                what: format!("check constraint {} of {tq}", ck.name),
                // NOT VALID: rows the source holds may violate it; SQL Server then checks
                // only new and updated rows (an untrusted constraint), as PostgreSQL does.
                sql: format!(
                    "ALTER TABLE {q}{} ADD CONSTRAINT {} CHECK ({e})",
                    if ck.not_valid { " WITH NOCHECK" } else { "" },
                    quote_mssql(name)
                ),
                optional: true,
                creates: planned(ObjectKind::Check, t, name),
            }),
            Err(e) => warnings.push(format!(
                "table {tq}: check constraint {} {} not migrated: {e}",
                ck.name, ck.expression
            )),
        }
    }
    out
}

/// An alias type has no constraints: a domain's CHECKs become checks of each column typed with
/// it, `VALUE` standing for the column.
fn domain_checks(t: &PgToMssqlTablePlan, warnings: &mut Vec<String>) -> Vec<MsStmt> {
    let q = qualified(t);
    let tq = t.source.qualified();
    let mut out = Vec::new();
    for c in &t.columns {
        let Some(d) = &c.source.domain else { continue };
        for (i, def) in d.checks.iter().enumerate() {
            let e = def
                .strip_prefix("CHECK ")
                .unwrap_or(def)
                .trim_end_matches(" NOT VALID");
            let target = (c.target_name.clone(), expr::column_operand(&c.source, c.ms_type));
            let cols = move |n: &str| (n == "value").then(|| target.clone());
            match expr::translate(
                e,
                &Ctx {
                    columns: &cols,
                    qualified: None,
                    column_type: None,
                },
            ) {
                Ok(sql) => {
                    let mut name = format!("CK_{}_{}_{}", t.target_name, c.target_name, d.name);
                    if d.checks.len() > 1 {
                        name.push_str(&format!("_{}", i + 1));
                    }
                    // sysname: 128 characters.
                    let name: String = name.chars().take(128).collect();
                    out.push(MsStmt {
                        what: format!("check of domain {} on column {} of {tq}", d.name, c.source.name),
                        sql: format!(
                            "ALTER TABLE {q} ADD CONSTRAINT {} CHECK ({sql})",
                            quote_mssql(&name)
                        ),
                        optional: true,
                        creates: planned(ObjectKind::Check, t, &name),
                    });
                }
                Err(why) => warnings.push(format!(
                    "table {tq}: {def} of domain {} on column {} not migrated: {why}",
                    d.name, c.source.name
                )),
            }
        }
    }
    out
}

/// The mapping's own checks (enum labels, ISJSON) keep what the PostgreSQL type enforced.
fn type_checks(t: &PgToMssqlTablePlan, names: &TableNames) -> Vec<MsStmt> {
    let q = qualified(t);
    let tq = t.source.qualified();
    let mut out = Vec::new();
    for (c, name) in t.columns.iter().zip(&names.column_checks) {
        if let (Some(check), Some(name)) = (&c.check, name) {
            out.push(MsStmt {
                what: format!("type check of column {} of {tq}", c.source.name),
                sql: format!(
                    "ALTER TABLE {q} ADD CONSTRAINT {} CHECK ({check})",
                    quote_mssql(name)
                ),
                optional: true,
                creates: planned(ObjectKind::Check, t, name),
            });
        }
    }
    out
}

fn defaults(t: &PgToMssqlTablePlan, names: &TableNames, warnings: &mut Vec<String>) -> Vec<MsStmt> {
    let q = qualified(t);
    let tq = t.source.qualified();
    let mut out = Vec::new();
    for (c, name) in t.columns.iter().zip(&names.defaults) {
        let (Some(def), Some(name)) = (&c.source.default, name) else {
            continue;
        };
        let cols = expr_lookup(t);
        match expr::translate(
            def,
            &Ctx {
                columns: &cols,
                qualified: None,
                column_type: Some(c.ms_type),
            },
        ) {
            Ok(e) => out.push(MsStmt {
                what: format!("default of column {} of {tq}", c.source.name),
                sql: format!(
                    "ALTER TABLE {q} ADD CONSTRAINT {} DEFAULT {e} FOR {}",
                    quote_mssql(name),
                    quote_mssql(&c.target_name)
                ),
                optional: true,
                creates: planned(ObjectKind::Default, t, name),
            }),
            Err(e) => warnings.push(format!(
                "table {tq}: default {def} of column {} not migrated: {e}",
                c.source.name
            )),
        }
    }
    out
}

/// Foreign keys among the migrated tables (after all of them are loaded).
pub fn foreign_keys(plan: &PgToMssqlPlan, warnings: &mut Vec<String>) -> Vec<MsStmt> {
    let mut out = Vec::new();
    for (ti, t) in plan.tables.iter().enumerate() {
        let tq = t.source.qualified();
        for (fi, fk) in t.source.foreign_keys.iter().enumerate() {
            let Some(rt) = plan
                .tables
                .iter()
                .find(|r| r.source.schema == fk.ref_schema && r.source.name == fk.ref_table)
            else {
                warnings.push(format!(
                    "table {tq}: foreign key {} not created: {}.{} is not migrated",
                    fk.name, fk.ref_schema, fk.ref_table
                ));
                continue;
            };
            let (Ok(cols), Ok(refs)) = (col_list(t, &fk.columns), col_list(rt, &fk.ref_columns)) else {
                warnings.push(format!(
                    "table {tq}: foreign key {} refers to columns not copied",
                    fk.name
                ));
                continue;
            };
            let action = |a: char, what: &str| -> Option<String> {
                match a {
                    'c' => Some(format!(" ON {what} CASCADE")),
                    'n' => Some(format!(" ON {what} SET NULL")),
                    'd' => Some(format!(" ON {what} SET DEFAULT")),
                    // RESTRICT and NO ACTION are both SQL Server's NO ACTION (checked at once).
                    _ => None,
                }
            };
            let name = plan.names[ti]
                .fks
                .get(fi)
                .cloned()
                .unwrap_or_else(|| fk.name.clone());
            out.push(MsStmt {
                what: format!("foreign key {} of {tq}", fk.name),
                sql: format!(
                    "ALTER TABLE {}{} ADD CONSTRAINT {} FOREIGN KEY ({cols}) REFERENCES {} ({refs}){}{}",
                    qualified(t),
                    if fk.not_valid { " WITH NOCHECK" } else { "" },
                    quote_mssql(&name),
                    qualified(rt),
                    action(fk.on_delete, "DELETE").unwrap_or_default(),
                    action(fk.on_update, "UPDATE").unwrap_or_default()
                ),
                optional: true,
                creates: planned(ObjectKind::ForeignKey, t, &name),
            });
        }
    }
    out
}

/// Upsert: the staging table (a per-task real table, so a reconnecting writer finds it).
pub fn stage_name(t: &PgToMssqlTablePlan, task: &str) -> String {
    use std::hash::{DefaultHasher, Hash, Hasher};
    let mut h = DefaultHasher::new();
    task.hash(&mut h);
    format!(
        "[{}].[stage_{}_{:08x}]",
        crate::copy::checkpoint::SCHEMA,
        t.target_name.replace(']', "]]"),
        h.finish() as u32
    )
}

/// `SELECT ... INTO` an empty copy of the target's columns (no identity, no constraints).
pub fn create_stage(t: &PgToMssqlTablePlan, stage: &str) -> String {
    let cols = t
        .columns
        .iter()
        .filter(|c| c.computed.is_none())
        .map(|c| format!("{} {} NULL", quote_mssql(&c.target_name), c.ms_type))
        .collect::<Vec<_>>()
        .join(", ");
    format!("DROP TABLE IF EXISTS {stage}; CREATE TABLE {stage} ({cols})")
}

/// MERGE from the staging table: inserts new rows, updates only rows whose values differ, then
/// empties the staging table.
pub fn upsert_merge(t: &PgToMssqlTablePlan, stage: &str, identity: bool) -> Option<String> {
    let key: Vec<&str> = t
        .key
        .as_ref()?
        .iter()
        .map(|&i| t.columns[i].target_name.as_str())
        .collect();
    let on = key
        .iter()
        .map(|k| format!("t.{q} = s.{q}", q = quote_mssql(k)))
        .collect::<Vec<_>>()
        .join(" AND ");
    let non_key: Vec<&PgToMssqlColumn> = t
        .columns
        .iter()
        .filter(|c| c.computed.is_none() && !key.contains(&c.target_name.as_str()))
        .collect();
    let all: Vec<String> = t
        .columns
        .iter()
        .filter(|c| c.computed.is_none())
        .map(|c| quote_mssql(&c.target_name))
        .collect();
    let mut sql = String::new();
    let has_identity = identity && t.columns.iter().any(|c| c.identity);
    if has_identity {
        sql.push_str(&format!("SET IDENTITY_INSERT {} ON; ", qualified(t)));
    }
    sql.push_str(&format!(
        "MERGE INTO {} AS t USING {stage} AS s ON {on}",
        qualified(t)
    ));
    if !non_key.is_empty() {
        // Unchanged rows are not rewritten; every other difference is a change.
        let differs = non_key
            .iter()
            .map(|c| differs_exactly(c))
            .collect::<Vec<_>>()
            .join(" OR ");
        let set = non_key
            .iter()
            .map(|c| format!("{q} = s.{q}", q = quote_mssql(&c.target_name)))
            .collect::<Vec<_>>()
            .join(", ");
        sql.push_str(&format!(" WHEN MATCHED AND ({differs}) THEN UPDATE SET {set}"));
    }
    sql.push_str(&format!(
        " WHEN NOT MATCHED THEN INSERT ({}) VALUES ({});",
        all.join(", "),
        all.iter()
            .map(|c| format!("s.{c}"))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    if has_identity {
        sql.push_str(&format!(" SET IDENTITY_INSERT {} OFF;", qualified(t)));
    }
    sql.push_str(&format!(" DELETE FROM {stage};"));
    Some(sql)
}

/// Whether column `c` of the target row `t` and the staged row `s` differ as values, NULL-safe.
///
/// `<>` alone compares strings under the column's collation, usually case-insensitive, and pads
/// the shorter with blanks under every collation, binary ones too: PostgreSQL's `'abc'` -> `'ABC'`
/// and `'x'` -> `'x '` would never reach the target. Strings are therefore compared under a
/// binary collation (code point by code point) and by `DATALENGTH` (which counts trailing
/// blanks); binary values by `DATALENGTH` too, since `<>` ignores trailing zero bytes.
fn differs_exactly(c: &PgToMssqlColumn) -> String {
    use crate::schema::pg_to_mssql_types::MsType;
    let q = quote_mssql(&c.target_name);
    let (t, s) = (format!("t.{q}"), format!("s.{q}"));
    let lengths = format!("DATALENGTH({t}) <> DATALENGTH({s})");
    let values = match c.ms_type {
        MsType::NVarChar { .. } | MsType::NChar { .. } | MsType::VarChar { .. } | MsType::Char { .. } => {
            format!("{t} COLLATE {BINARY_COLLATION} <> {s} COLLATE {BINARY_COLLATION} OR {lengths}")
        }
        MsType::VarBinaryMax => format!("{t} <> {s} OR {lengths}"),
        _ => format!("{t} <> {s}"),
    };
    format!("({values} OR ({t} IS NULL AND {s} IS NOT NULL) OR ({t} IS NOT NULL AND {s} IS NULL))")
}

/// The collation that compares strings by code point (not by case or accent rules).
const BINARY_COLLATION: &str = "Latin1_General_BIN2";
