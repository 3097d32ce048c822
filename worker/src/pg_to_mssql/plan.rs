//! The plan of a PostgreSQL -> SQL Server run: tables selected and named under SQL Server's
//! case-insensitive rules, columns mapped (scanning the data where the type depends on it), keys
//! checked for rows that would collide, large tables split into key ranges.

use super::{MAX_KEY_UNITS, PgToMssqlEngine, PgToMssqlError, pg_table, scan_err};
use crate::options::{Mode, Options};
use crate::pg::introspect::introspect;
use crate::plan::pg_to_mssql::{PgToMssqlPlan, PgToMssqlTablePlan, TableNames};
use crate::schema::mssql_to_pg_types::quote_pg;
use crate::schema::pg_model::PgTable;
use crate::schema::pg_to_mssql_types::{
    Decode, MsType, NumericScan, PgToMssqlColumn, map_column, needs_numeric_scan,
};
use std::collections::{BTreeMap, HashMap};
use tokio_postgres::Client;

/// Case-insensitive namespace of SQL Server names.
struct CiNames {
    scope: String,
    used: HashMap<String, String>,
}

impl CiNames {
    fn new(scope: impl Into<String>) -> Self {
        CiNames {
            scope: scope.into(),
            used: HashMap::new(),
        }
    }

    fn claim(&mut self, name: &str) -> Result<String, PgToMssqlError> {
        let k = name.to_lowercase();
        if let Some(first) = self.used.get(&k) {
            return Err(PgToMssqlError::NameCollision {
                scope: self.scope.clone(),
                first: first.clone(),
                second: name.to_string(),
            });
        }
        self.used.insert(k, name.to_string());
        Ok(name.to_string())
    }

    /// Constraint names are schema-wide in SQL Server but per table in PostgreSQL: keep the name
    /// when free, else prefix the table's.
    fn claim_or_prefix(&mut self, table: &str, name: &str, warnings: &mut Vec<String>) -> String {
        if let Ok(n) = self.claim(name) {
            return n;
        }
        let mut candidate = format!("{table}_{name}");
        let mut i = 2;
        while self.used.contains_key(&candidate.to_lowercase()) {
            candidate = format!("{table}_{name}_{i}");
            i += 1;
        }
        warnings.push(format!(
            "table {table}: constraint {name:?} renamed to {candidate:?} (the name is already used in the schema, \
             case-insensitively)"
        ));
        self.used.insert(candidate.to_lowercase(), candidate.clone());
        candidate
    }
}

async fn numeric_scan(pg: &Client, t: &PgTable, column: &str) -> Result<NumericScan, PgToMssqlError> {
    let c = quote_pg(column);
    let normal = format!("{c} NOT IN ('NaN'::numeric, 'Infinity'::numeric, '-Infinity'::numeric)");
    let sql = format!(
        "SELECT coalesce(max(length(trunc(abs({c}))::text)) FILTER (WHERE {normal}), 0)::int,
                coalesce(max(scale({c})) FILTER (WHERE {normal}), 0)::int,
                coalesce(bool_or(NOT ({normal})), false)
         FROM {}",
        pg_table(t)
    );
    let r = pg.query_one(&sql, &[]).await.map_err(scan_err(t, column))?;
    Ok(NumericScan {
        int_digits: r.get(0),
        scale: r.get(1),
        special: r.get(2),
    })
}

/// The longest value in UTF-16 code units (characters outside the BMP count twice).
async fn longest_text(pg: &Client, t: &PgTable, column: &str) -> Result<i64, PgToMssqlError> {
    let c = quote_pg(column);
    let sql = format!(
        "SELECT coalesce(max(length({c}::text) + length(regexp_replace({c}::text, '[\\u0001-\\uFFFF]', '', 'g'))), 0)::bigint FROM {}",
        pg_table(t)
    );
    let r = pg.query_one(&sql, &[]).await.map_err(scan_err(t, column))?;
    Ok(r.get(0))
}

/// Rows of a key that are equal under a case-insensitive, trailing-space-insensitive collation.
async fn key_collision(
    pg: &Client,
    t: &PgTable,
    mapped: &[PgToMssqlColumn],
    constraint: &str,
    columns: &[String],
    nulls_distinct: bool,
) -> Result<(), PgToMssqlError> {
    let texty = |n: &String| {
        mapped
            .iter()
            .find(|c| &c.source.name == n)
            .is_some_and(|c| matches!(c.decode, Decode::Text { .. }))
    };
    if !columns.iter().any(texty) {
        return Ok(());
    }
    let exprs: Vec<String> = columns
        .iter()
        .map(|n| {
            if texty(n) {
                format!("lower(rtrim({}::text))", quote_pg(n))
            } else {
                format!("{}::text", quote_pg(n))
            }
        })
        .collect();
    // NULLs distinct (PostgreSQL's default): the SQL Server key is a filtered index over the rows
    // without NULLs in it (mssql::ddl::finalize_table), so only those rows can collide.
    let filter = if nulls_distinct {
        format!(
            " WHERE {}",
            columns
                .iter()
                .map(|n| format!("{} IS NOT NULL", quote_pg(n)))
                .collect::<Vec<_>>()
                .join(" AND ")
        )
    } else {
        String::new()
    };
    let sql = format!(
        "SELECT concat_ws(', ', {e}), count(*) FROM {}{filter} GROUP BY {e} HAVING count(*) > 1 LIMIT 1",
        pg_table(t),
        e = exprs.join(", ")
    );
    if let Some(r) = pg
        .query_opt(&sql, &[])
        .await
        .map_err(scan_err(t, &columns.join(", ")))?
    {
        return Err(PgToMssqlError::KeyCollision {
            table: t.qualified(),
            constraint: constraint.to_string(),
            values: r.get::<_, Option<String>>(0).unwrap_or_default(),
            count: r.get(1),
        });
    }
    Ok(())
}

fn keyable(d: Decode) -> bool {
    !matches!(
        d,
        Decode::Bool | Decode::Float4 | Decode::Float8 | Decode::Bytea | Decode::Time { .. }
    )
}

/// The table's columns mapped to SQL Server types, with the data scans the mapping needs
/// (unbounded numerics, text columns that are index keys).
async fn map_columns(
    pg: &Client,
    t: &PgTable,
    warnings: &mut Vec<String>,
) -> Result<Vec<PgToMssqlColumn>, PgToMssqlError> {
    let q = t.qualified();
    let mut cols = CiNames::new(format!("columns of table {q}"));
    // Columns that are (part of) an index key need a sized nvarchar.
    let mut key_cols: Vec<&String> = Vec::new();
    if let Some(pk) = &t.primary_key {
        key_cols.extend(pk.columns.iter());
    }
    for u in &t.unique {
        key_cols.extend(u.columns.iter());
    }
    for ix in &t.indexes {
        key_cols.extend(ix.columns.iter().map(|(c, _)| c));
    }
    let mut columns = Vec::new();
    for c in &t.columns {
        cols.claim(&c.name)?;
        let scan = if needs_numeric_scan(c) {
            Some(numeric_scan(pg, t, &c.name).await?)
        } else {
            None
        };
        let mut w = Vec::new();
        let mut m = map_column(c, scan, &mut w).map_err(|source| PgToMssqlError::Mapping {
            table: q.clone(),
            source,
        })?;
        if m.ms_type == (MsType::NVarChar { length: None }) && key_cols.contains(&&c.name) {
            let longest = longest_text(pg, t, &c.name).await?;
            if longest <= MAX_KEY_UNITS {
                let n = longest.max(1) as u32;
                // Headroom for new rows: at least 100 units, within the key limit.
                let n = n.max(100).min(MAX_KEY_UNITS as u32);
                w.push(format!(
                    "column {}: {} is an index key; nvarchar(max) cannot be, so it becomes nvarchar({n}) \
                     (longest value: {longest})",
                    c.name, c.formatted
                ));
                m.ms_type = MsType::NVarChar { length: Some(n) };
                m.decode = Decode::Text { max_units: Some(n) };
            }
        }
        warnings.extend(w.into_iter().map(|w| format!("table {q}: {w}")));
        columns.push(m);
    }
    Ok(columns)
}

/// Generated columns become computed PERSISTED columns where their expression translates.
fn computed_columns(t: &PgTable, columns: &mut [PgToMssqlColumn], warnings: &mut Vec<String>) {
    let q = t.qualified();
    // A generated column refers to stored columns only.
    let stored: Vec<(String, crate::mssql::expr::Operand)> = columns
        .iter()
        .filter(|c| c.source.generated.is_none())
        .map(|c| {
            let kind = crate::mssql::expr::column_operand(&c.source, c.ms_type);
            (c.source.name.clone(), kind)
        })
        .collect();
    for col in columns.iter_mut() {
        let Some(expr) = col.source.generated.clone() else {
            continue;
        };
        let lookup = |n: &str| stored.iter().find(|(s, _)| s == n).cloned();
        let name = col.source.name.clone();
        match crate::mssql::expr::translate(
            &expr,
            &crate::mssql::expr::Ctx {
                columns: &lookup,
                qualified: None,
                column_type: Some(col.ms_type),
            },
        ) {
            Ok(tsql) => {
                warnings.push(format!(
                    "table {q}: generated column {name} becomes the computed column AS ({tsql}) PERSISTED"
                ));
                col.computed = Some(tsql);
            }
            Err(e) => warnings.push(format!(
                "table {q}: generated column {name} ({expr}) is copied as plain values: its expression \
                 could not be translated ({e})"
            )),
        }
    }
}

/// Refuses a table whose unique keys would collide under SQL Server's case-insensitive,
/// trailing-space-insensitive comparison.
async fn check_key_collisions(
    pg: &Client,
    t: &PgTable,
    columns: &[PgToMssqlColumn],
) -> Result<(), PgToMssqlError> {
    if let Some(pk) = &t.primary_key {
        key_collision(
            pg,
            t,
            columns,
            &format!("primary key {}", pk.name),
            &pk.columns,
            false,
        )
        .await?;
    }
    for u in &t.unique {
        key_collision(
            pg,
            t,
            columns,
            &format!("unique constraint {}", u.name),
            &u.columns,
            !u.nulls_not_distinct,
        )
        .await?;
    }
    for ix in t.indexes.iter().filter(|ix| ix.unique && ix.expression.is_none()) {
        let cols: Vec<String> = ix.columns.iter().map(|(c, _)| c.clone()).collect();
        key_collision(
            pg,
            t,
            columns,
            &format!("unique index {}", ix.name),
            &cols,
            !ix.nulls_not_distinct,
        )
        .await?;
    }
    Ok(())
}

/// The primary key's columns, when every one can drive keyset paging.
fn keyset_key(t: &PgTable, columns: &[PgToMssqlColumn]) -> Option<Vec<usize>> {
    t.primary_key.as_ref().and_then(|pk| {
        pk.columns
            .iter()
            .map(|n| {
                let i = columns.iter().position(|c| &c.source.name == n)?;
                keyable(columns[i].decode).then_some(i)
            })
            .collect::<Option<Vec<_>>>()
    })
}

/// SQL Server names of the table's constraints (schema-scoped there: a taken one gets the table's
/// name as prefix).
fn constraint_names(
    t: &PgTable,
    columns: &[PgToMssqlColumn],
    constraints: &mut CiNames,
    warnings: &mut Vec<String>,
) -> TableNames {
    let tn = t.name.clone();
    let mut n = TableNames {
        pk: t
            .primary_key
            .as_ref()
            .map(|pk| constraints.claim_or_prefix(&tn, &pk.name, warnings))
            .unwrap_or_default(),
        ..TableNames::default()
    };
    for u in &t.unique {
        n.unique.push(constraints.claim_or_prefix(&tn, &u.name, warnings));
    }
    for ck in &t.checks {
        n.checks
            .push(constraints.claim_or_prefix(&tn, &ck.name, warnings));
    }
    for fk in &t.foreign_keys {
        n.fks.push(constraints.claim_or_prefix(&tn, &fk.name, warnings));
    }
    for c in columns {
        n.column_checks.push(
            c.check
                .as_ref()
                .map(|_| constraints.claim_or_prefix(&tn, &format!("CK_{tn}_{}", c.source.name), warnings)),
        );
        n.defaults.push(
            c.source
                .default
                .as_ref()
                .map(|_| constraints.claim_or_prefix(&tn, &format!("DF_{tn}_{}", c.source.name), warnings)),
        );
    }
    n
}

/// Refuses, all named at once, the tables an online migration cannot stream: without a primary
/// key, or with `REPLICA IDENTITY NOTHING` (PostgreSQL then refuses the applications' UPDATEs and
/// DELETEs of a table once it is in a publication).
async fn online_keys(pg: &Client, tables: &[PgToMssqlTablePlan]) -> Result<(), PgToMssqlError> {
    let mut refused = Vec::new();
    for t in tables {
        let q = t.source.qualified();
        if t.source.primary_key.is_none() {
            refused.push(q);
            continue;
        }
        let identity: String = pg
            .query_one(
                "SELECT relreplident::text FROM pg_class WHERE oid = $1::text::regclass",
                &[&pg_table(&t.source)],
            )
            .await
            .map_err(scan_err(&t.source, "(replica identity)"))?
            .get(0);
        if identity == "n" {
            refused.push(format!("{q} (REPLICA IDENTITY NOTHING)"));
        }
    }
    if refused.is_empty() {
        Ok(())
    } else {
        Err(PgToMssqlError::OnlineWithoutKey(refused))
    }
}

/// Selects, maps and names the tables; scans the data where the mapping depends on it.
pub async fn build_plan(
    pg: &Client,
    source: Vec<PgTable>,
    opts: &Options,
) -> Result<PgToMssqlPlan, PgToMssqlError> {
    let selected = crate::plan::mssql_to_pg::select_tables(source, opts, |t| (&t.schema, &t.name))
        .map_err(PgToMssqlError::Pattern)?;
    let mut warnings = Vec::new();
    // Object names are unique per schema in SQL Server, compared case-insensitively.
    let mut namespaces: BTreeMap<String, (CiNames, CiNames)> = BTreeMap::new();
    let mut tables = Vec::new();
    let mut names = Vec::new();
    let mut merged = crate::plan::mssql_to_pg::MergedTables::default();
    warnings.extend(crate::plan::mssql_to_pg::unused_schema_map_warnings(
        opts,
        selected.iter().map(|t| t.schema.as_str()),
        false,
    ));
    for t in selected {
        let q = t.qualified();
        let target_schema = crate::plan::pg_to_mssql::target_schema_of(&t.schema, opts);
        crate::plan::mssql_to_pg::check_target_schema(&t.schema, &target_schema)?;
        merged.claim((&t.schema, &t.name), (&target_schema, &t.name), true)?;
        let (table_names, constraints) =
            namespaces.entry(target_schema.to_lowercase()).or_insert_with(|| {
                (
                    CiNames::new(format!("tables of schema {target_schema}")),
                    CiNames::new(format!("constraints of schema {target_schema}")),
                )
            });
        table_names.claim(&t.name)?;
        let mut columns = map_columns(pg, &t, &mut warnings).await?;
        computed_columns(&t, &mut columns, &mut warnings);
        check_key_collisions(pg, &t, &columns).await?;
        let key = keyset_key(&t, &columns);
        if opts.mode == Mode::Upsert && t.primary_key.is_none() {
            return Err(PgToMssqlError::UpsertWithoutKey(q));
        }
        if key.is_none() {
            warnings.push(format!(
                "table {q}: no primary key usable for keyset paging; it is copied in one transaction and \
                 restarted from scratch if interrupted"
            ));
        }
        names.push(constraint_names(&t, &columns, constraints, &mut warnings));
        tables.push(PgToMssqlTablePlan {
            target_name: t.name.clone(),
            source: t,
            target_schema,
            columns,
            key,
        });
    }
    if opts.online {
        online_keys(pg, &tables).await?;
    }
    let tasks = crate::plan::mssql_to_pg::whole_table_tasks(
        tables
            .iter()
            .map(|t| (t.task_base_name(), t.source.row_count, t.source.size_bytes)),
    );
    Ok(PgToMssqlPlan {
        tables,
        names,
        tasks,
        warnings,
        views: Vec::new(),
        run: 0,
    })
}

impl PgToMssqlEngine {
    /// Introspects the source and builds the plan, with partitions for large tables.
    pub async fn plan(&self) -> Result<PgToMssqlPlan, PgToMssqlError> {
        let pg = self.source.connect().await?;
        let mut tables = Vec::new();
        let mut modules = Vec::new();
        for schema in self.source_schemas(&pg).await? {
            tables.extend(introspect(&pg, &schema).await?);
            modules.extend(crate::pg::introspect::modules(&pg, &schema).await?);
        }
        let mut plan = build_plan(&pg, tables, &self.options).await?;
        crate::views::plan_views_pg_to_mssql(&mut plan, &modules, &|s| {
            crate::plan::pg_to_mssql::target_schema_of(s, &self.options)
        });
        let mut bounds = BTreeMap::new();
        for (i, t) in plan.tables.iter().enumerate() {
            if t.source.row_count >= self.options.partitioning.min_rows_to_split
                && let Some(k) = t.int_key()
            {
                let c = quote_pg(&t.columns[k].source.name);
                let sql = format!(
                    "SELECT min({c})::bigint, max({c})::bigint FROM {}",
                    pg_table(&t.source)
                );
                let r = pg
                    .query_one(&sql, &[])
                    .await
                    .map_err(scan_err(&t.source, &t.columns[k].source.name))?;
                if let (Some(lo), Some(hi)) = (r.get::<_, Option<i64>>(0), r.get::<_, Option<i64>>(1)) {
                    bounds.insert(i, (lo, hi));
                }
            }
        }
        plan.tasks = crate::plan::mssql_to_pg::split_task_list(
            std::mem::take(&mut plan.tasks),
            &bounds,
            &self.options,
        );
        plan.warnings
            .extend(self.source.plaintext_warning(&pg, "source.postgres").await);
        Ok(plan)
    }

    /// The source schemas to read: `source_schema`, or those `source.*.schemas` selects.
    async fn source_schemas(&self, pg: &Client) -> Result<Vec<String>, PgToMssqlError> {
        if self.options.source_schemas.is_empty() {
            return Ok(vec![self.options.source_schema.clone()]);
        }
        let mut out = Vec::new();
        for schema in crate::pg::introspect::user_schemas(pg).await? {
            if crate::plan::mssql_to_pg::schema_selected(&self.options, &schema)
                .map_err(|e| PgToMssqlError::Pattern(e.to_string()))?
            {
                out.push(schema);
            }
        }
        Ok(out)
    }
}
