//! The plan: every source table mapped to a target table with target names, its keyset key, and
//! the copy tasks (one per table, or per key range of a large table).

use crate::options::Options;
use crate::schema::mssql_model::SourceTable;
use crate::schema::mssql_to_pg_types::{ColumnMapping, GeneratedColumn, MappingError, PgType, map_column};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// PostgreSQL's NAMEDATALEN - 1.
pub const PG_MAX_IDENT: usize = 63;

#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error("table {table}: {source}")]
    Mapping {
        table: String,
        #[source]
        source: MappingError,
    },
    #[error("table selection: {0}")]
    Pattern(String),
    #[error("table {0}: upsert needs a primary key to match rows on")]
    UpsertWithoutKey(String),
    #[error(
        "target name collision in {scope}: {first:?} and {second:?} both become {target:?} (after case folding \
         or PostgreSQL's 63-byte limit); rename one of them or change the identifier options"
    )]
    Collision {
        scope: String,
        first: String,
        second: String,
        target: String,
    },
    #[error(transparent)]
    Merged(#[from] MergeCollision),
    #[error(transparent)]
    StateSchema(#[from] StateSchemaTarget),
    #[error("{}", online_without_key(.0))]
    OnlineWithoutKey(Vec<String>),
}

/// The refusal of tables an online migration cannot stream: their changes are matched to target
/// rows by primary key.
pub fn online_without_key(tables: &[String]) -> String {
    format!(
        "an online migration streams changes by primary key, and these tables have none: {}; add a \
         primary key or leave them out with spec.tables.exclude",
        tables.join(", ")
    )
}

/// How a keyset key column is compared when resuming or splitting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum KeyKind {
    Int,
    /// nchar/nvarchar: the parameter is sent as nvarchar.
    UnicodeString,
    /// char/varchar: the parameter is cast to varchar so the column's collation (not the Unicode
    /// rules of an nvarchar comparison) decides, the same as its ORDER BY.
    AnsiString,
    Uuid,
    Date,
    /// datetime2: the parameter (a datetime2(7)) holds the value exactly.
    DateTime,
    /// datetime (1/300 s) and smalldatetime (minutes): the value comes back as a datetime2 that is
    /// not exactly the stored one (.003 is read as .0033333), so it is cast back to the column's
    /// type before comparing; compared as datetime2, rows at chunk boundaries would repeat (or,
    /// below compatibility level 130, be skipped).
    LegacyDateTime {
        smalldatetime: bool,
    },
    Decimal,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KeyColumn {
    /// Index into the table's column list (= the select list).
    pub index: usize,
    pub kind: KeyKind,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TablePlan {
    pub source: SourceTable,
    pub target_schema: String,
    pub target_name: String,
    /// The copied columns, in source order: the select list of the reader and the COPY list.
    pub columns: Vec<ColumnMapping>,
    /// Computed columns PostgreSQL computes itself (not in `columns`, not copied).
    pub generated: Vec<GeneratedColumn>,
    /// The primary key, when every column of it can drive keyset paging.
    pub keyset: Option<Vec<KeyColumn>>,
    pub pk_name: Option<String>,
    /// Target names of `source.indexes`, in the same order.
    pub index_names: Vec<String>,
    pub fk_names: Vec<String>,
    pub check_names: Vec<String>,
}

impl TablePlan {
    pub fn task_base_name(&self) -> String {
        format!("{}.{}", self.source.schema, self.source.name)
    }

    pub fn target_column(&self, source_name: &str) -> Option<&ColumnMapping> {
        self.all_columns().find(|c| c.source.name == source_name)
    }

    /// Turns generated column `index` back into a copied one (PostgreSQL refused its translated
    /// expression) and returns the plan warning saying so.
    pub fn demote_generated(&mut self, index: usize, why: &str) -> Option<String> {
        if index >= self.generated.len() {
            return None;
        }
        let g = self.generated.remove(index);
        let key_names: Option<Vec<(String, KeyKind)>> = self.keyset.as_ref().map(|key| {
            key.iter()
                .map(|k| (self.columns[k.index].source.name.clone(), k.kind))
                .collect()
        });
        let warning = format!(
            "table {}: computed column {} AS {} is copied as plain values (not generated in PostgreSQL): \
             PostgreSQL refused the translation {}: {why}",
            self.source.qualified(),
            g.column.source.name,
            g.column.source.computed.as_deref().unwrap_or(""),
            g.expression
        );
        self.columns.push(g.column);
        let order = |name: &str| self.source.columns.iter().position(|s| s.name == name);
        let mut columns = std::mem::take(&mut self.columns);
        columns.sort_by_key(|c| order(&c.source.name));
        self.columns = columns;
        // Key indices point into the select list, which just grew.
        self.keyset = key_names.and_then(|names| {
            names
                .into_iter()
                .map(|(name, kind)| {
                    let index = self.columns.iter().position(|c| c.source.name == name)?;
                    Some(KeyColumn { index, kind })
                })
                .collect()
        });
        Some(warning)
    }

    /// Copied and generated columns.
    /// What the target table is made for ([`crate::plan::identity::table_identity`]).
    pub fn identity(&self) -> String {
        use crate::plan::identity::{ColumnShape, TableShape, table_identity};
        fn column<'a>(c: &'a ColumnMapping, generated: Option<&'a str>) -> ColumnShape<'a> {
            ColumnShape {
                source: &c.source.name,
                target: &c.target_name,
                target_type: c.domain.clone().unwrap_or_else(|| c.pg_type.to_string()),
                nullable: c.source.nullable,
                identity: c.source.identity.is_some(),
                generated,
            }
        }
        let mut columns: Vec<ColumnShape<'_>> = self.columns.iter().map(|c| column(c, None)).collect();
        columns.extend(
            self.generated
                .iter()
                .map(|g| column(&g.column, Some(g.expression.as_str()))),
        );
        table_identity(&TableShape {
            source: self.source.qualified(),
            target: format!("{}.{}", self.target_schema, self.target_name),
            columns,
            key: self
                .keyset
                .iter()
                .flatten()
                .filter_map(|k| self.columns.get(k.index).map(|c| c.target_name.as_str()))
                .collect(),
        })
    }

    pub fn all_columns(&self) -> impl Iterator<Item = &ColumnMapping> {
        self.columns
            .iter()
            .chain(self.generated.iter().map(|g| &g.column))
    }

    /// A single integer key column allows range partitioning.
    pub fn int_key(&self) -> Option<usize> {
        match self.keyset.as_deref() {
            Some([k]) if k.kind == KeyKind::Int => Some(k.index),
            _ => None,
        }
    }
}

/// The T-SQL -> PostgreSQL translation of a computed column's definition for a generated column
/// of the given type, over the table's copied columns (SQL Server does not let one computed
/// column use another); passed in by the caller so the plan does not depend on the translator.
pub type TranslateComputed = fn(&str, &[ColumnMapping], PgType) -> Result<String, String>;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct TaskPlan {
    pub name: String,
    /// Index into `Plan::tables`.
    pub table: usize,
    /// Key range `(lower, upper]` of a partition; `None` = unbounded.
    pub lower: Option<i64>,
    pub upper: Option<i64>,
    pub estimated_rows: i64,
    /// The source bytes the task reads, estimated from the table's size (0: unknown).
    #[serde(default)]
    pub estimated_bytes: i64,
    /// Where the source table's writes stood when the copy started (set by prepare; `None`
    /// where the source does not say, or for a run stored by an older worker).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_mark: Option<crate::plan::source_mark::SourceMark>,
    /// The identity of the task's table's plan when prepare stored the run
    /// ([`crate::plan::identity`]); empty in a plan not yet stored.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub table_identity: String,
}

impl TaskPlan {
    /// How long the task is expected to take, to order work largest first: bytes where the
    /// source reports them (one long text column outweighs many narrow rows), then rows.
    pub fn size(&self) -> (i64, i64) {
        (self.estimated_bytes, self.estimated_rows)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Plan {
    pub tables: Vec<TablePlan>,
    pub tasks: Vec<TaskPlan>,
    pub warnings: Vec<String>,
    /// The source's views translated to PostgreSQL, in the order finalize creates them.
    pub views: Vec<crate::plan::views::ViewPlan>,
    /// The run of the migration this plan is copied by (its generation in `_mssqlpg.runs`): set by
    /// prepare and by reading the stored plan, 0 before; a copy task claims its task for it.
    #[serde(skip)]
    pub run: i64,
}

impl Plan {
    /// The plan's identity ([`crate::plan::identity`]): a rerun resumes, and the later steps go
    /// on, only while it is unchanged.
    pub fn fingerprint(&self) -> String {
        let ids: Vec<String> = self.tables.iter().map(TablePlan::identity).collect();
        crate::plan::identity::fingerprint(ids.iter().map(String::as_str))
    }

    /// Each table's (source name, identity), in plan order.
    pub fn table_identities(&self) -> Vec<(String, String)> {
        self.tables
            .iter()
            .map(|t| (t.source.qualified(), t.identity()))
            .collect()
    }

    /// Gives every task its table's identity, for a later step to tell which tables changed.
    pub fn stamp_tasks(&mut self) {
        let ids: Vec<String> = self.tables.iter().map(TablePlan::identity).collect();
        for task in &mut self.tasks {
            task.table_identity = ids.get(task.table).cloned().unwrap_or_default();
        }
    }
}

/// Folds and truncates an identifier the way PostgreSQL will store it.
pub fn target_ident(name: &str, lowercase: bool) -> String {
    let mut s = if lowercase {
        name.to_lowercase()
    } else {
        name.to_string()
    };
    if s.len() > PG_MAX_IDENT {
        let mut cut = PG_MAX_IDENT;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
    }
    s
}

/// Tracks names in one PostgreSQL namespace and reports collisions.
struct Namespace {
    scope: String,
    used: HashMap<String, String>,
}

impl Namespace {
    fn new(scope: impl Into<String>) -> Self {
        Namespace {
            scope: scope.into(),
            used: HashMap::new(),
        }
    }

    fn claim(&mut self, source: &str, target: String) -> Result<String, PlanError> {
        if let Some(first) = self.used.get(&target) {
            return Err(PlanError::Collision {
                scope: self.scope.clone(),
                first: first.clone(),
                second: source.to_string(),
                target,
            });
        }
        self.used.insert(target.clone(), source.to_string());
        Ok(target)
    }

    /// Index and constraint names are per table in SQL Server but per schema in PostgreSQL: keep
    /// the name when it is free, otherwise prefix it with the table name.
    fn claim_relation(
        &mut self,
        table: &str,
        source: &str,
        lowercase: bool,
        warnings: &mut Vec<String>,
    ) -> Result<String, PlanError> {
        let plain = target_ident(source, lowercase);
        if !self.used.contains_key(&plain) {
            return self.claim(source, plain);
        }
        let prefixed = target_ident(&format!("{table}_{source}"), lowercase);
        warnings.push(format!(
            "{table}: index/constraint {source:?} renamed to {prefixed:?} (name already used in the schema)"
        ));
        self.claim(&format!("{table}.{source}"), prefixed)
    }
}

fn key_kind(ty: &str) -> Option<KeyKind> {
    Some(match ty {
        "tinyint" | "smallint" | "int" | "bigint" => KeyKind::Int,
        "nchar" | "nvarchar" => KeyKind::UnicodeString,
        "char" | "varchar" => KeyKind::AnsiString,
        "uniqueidentifier" => KeyKind::Uuid,
        "date" => KeyKind::Date,
        "datetime2" => KeyKind::DateTime,
        "datetime" => KeyKind::LegacyDateTime { smalldatetime: false },
        "smalldatetime" => KeyKind::LegacyDateTime { smalldatetime: true },
        "decimal" | "numeric" => KeyKind::Decimal,
        _ => return None,
    })
}

/// Whether `source.*.schemas` selects a source schema (globs, case-insensitive).
pub fn schema_selected(opts: &Options, schema: &str) -> Result<bool, PlanError> {
    let mut selected = false;
    for (i, pattern) in opts.source_schemas.iter().enumerate() {
        selected |= mssql_pg_crds::glob::name_matches(pattern, schema)
            .map_err(|e| PlanError::Pattern(format!("source schemas[{i}] {pattern:?}: {e}")))?;
    }
    Ok(selected)
}

/// The target schema a source schema's tables go to: the source endpoint's `schema` goes to the
/// target's `schema` (SQL Server `dbo` to PostgreSQL `public` by default), one the target's
/// `schemaMap` lists to its `to` (as written), any other keeps its name (under `identifierCase`).
pub fn target_schema_of(source_schema: &str, opts: &Options) -> String {
    let lc = opts.lowercase_identifiers;
    if source_schema.eq_ignore_ascii_case(&opts.source_schema) {
        target_ident(&opts.target_schema, lc)
    } else if let Some(to) = mapped_schema(source_schema, opts, true) {
        to.to_string()
    } else {
        target_ident(source_schema, lc)
    }
}

/// The `to` of the `schemaMap` entry for `source_schema`, compared case-insensitively when the
/// source is SQL Server (`source_ci`), whose catalog compares schema names that way; an exact
/// match wins over a folded one.
pub fn mapped_schema<'a>(source_schema: &str, opts: &'a Options, source_ci: bool) -> Option<&'a str> {
    let map = &opts.schema_map;
    map.iter()
        .find(|m| m.from == source_schema)
        .or_else(|| {
            let folded = source_schema.to_lowercase();
            map.iter().find(|m| source_ci && m.from.to_lowercase() == folded)
        })
        .map(|m| m.to.as_str())
}

/// Plan warnings for `schemaMap` entries no migrated table uses: a misspelt `from` would
/// otherwise leave its schema going by its own name without a word.
pub fn unused_schema_map_warnings<'a>(
    opts: &Options,
    source_schemas: impl Iterator<Item = &'a str>,
    source_ci: bool,
) -> Vec<String> {
    let read: Vec<&str> = source_schemas.collect();
    opts.schema_map
        .iter()
        .enumerate()
        .filter(|(_, m)| {
            !read
                .iter()
                .any(|s| *s == m.from || (source_ci && s.to_lowercase() == m.from.to_lowercase()))
        })
        .map(|(i, m)| {
            format!(
                "schemaMap[{i}]: no migrated table is in source schema {:?}, so the entry (to {:?}) has no \
                 effect; check its spelling and source.*.schemas",
                m.from, m.to
            )
        })
        .collect()
}

/// A source schema whose tables would land in the worker's own schema, where tables named
/// `runs` or `checkpoints` would replace its state: `source.*.schemas` selected it (by a pattern,
/// or `identifierCase: lower` folded its name onto it).
#[derive(Debug, thiserror::Error)]
#[error(
    "source schema {source_schema:?} would go to target schema {target:?}, the worker's own schema \
     (checkpoints and run state): leave it out of source.*.schemas or send it elsewhere with \
     target.*.schemaMap"
)]
pub struct StateSchemaTarget {
    pub source_schema: String,
    pub target: String,
}

/// Refuses a target schema that is the worker's own (compared case-insensitively: SQL Server's
/// catalog does, and `identifierCase: lower` folds onto it).
pub fn check_target_schema(source_schema: &str, target: &str) -> Result<(), StateSchemaTarget> {
    if target.eq_ignore_ascii_case(crate::copy::checkpoint::SCHEMA) {
        return Err(StateSchemaTarget {
            source_schema: source_schema.to_string(),
            target: target.to_string(),
        });
    }
    Ok(())
}

/// Two source tables that would become one target table because the target's `schemaMap` sends
/// their schemas to the same target schema.
#[derive(Debug, thiserror::Error)]
#[error(
    "source tables {first} and {second} both become target table {target}: their schemas map to one \
     target schema (target.*.schemaMap); leave one out with tables.exclude or map the schemas apart"
)]
pub struct MergeCollision {
    pub first: String,
    pub second: String,
    pub target: String,
}

/// The target tables claimed so far across source schemas (either direction), to find
/// [`MergeCollision`]s before anything is written.
#[derive(Default)]
pub struct MergedTables {
    /// (target schema, target table), folded when the target compares names case-insensitively
    /// -> (source schema, qualified source table).
    owners: HashMap<(String, String), (String, String)>,
}

impl MergedTables {
    /// Claims `target_schema.target_name` for `source_schema.source_name`. Collisions within one
    /// source schema (case folding, truncation) are the namespace checks' to report.
    pub fn claim(
        &mut self,
        (source_schema, source_name): (&str, &str),
        (target_schema, target_name): (&str, &str),
        target_ci: bool,
    ) -> Result<(), MergeCollision> {
        let fold = |s: &str| {
            if target_ci {
                s.to_lowercase()
            } else {
                s.to_string()
            }
        };
        let key = (fold(target_schema), fold(target_name));
        match self.owners.get(&key) {
            Some((schema, first)) if schema != source_schema => Err(MergeCollision {
                first: first.clone(),
                second: format!("{source_schema}.{source_name}"),
                target: format!("{target_schema}.{target_name}"),
            }),
            Some(_) => Ok(()),
            None => {
                self.owners.insert(
                    key,
                    (
                        source_schema.to_string(),
                        format!("{source_schema}.{source_name}"),
                    ),
                );
                Ok(())
            }
        }
    }
}

/// PostgreSQL cannot switch a constraint off: a disabled one is created NOT VALID, which still
/// checks new and updated rows (see `pg::ddl::finalize_table`).
fn disabled_at_source(table: &str, what: &str, name: &str) -> String {
    format!(
        "table {table}: {what} {name} is disabled at the source (NOCHECK CONSTRAINT); PostgreSQL cannot \
         disable a constraint, so it is created NOT VALID: existing rows are not checked, new and \
         updated rows are"
    )
}

/// The source tables `tables.include` and `tables.exclude` select (either direction), with the
/// same glob semantics as the operator's validation (`table` or `schema.table`). Only the
/// selected schemas were read: a pattern without a schema part applies to each.
pub fn select_tables<T>(
    source: Vec<T>,
    opts: &Options,
    name: impl Fn(&T) -> (&str, &str),
) -> Result<Vec<T>, String> {
    let selection = mssql_pg_crds::TableSelection {
        include: opts.include.clone(),
        exclude: opts.exclude.clone(),
    }
    .compile()
    .map_err(|errors| {
        errors
            .iter()
            .map(|(f, e)| format!("tables.{f}: {e}"))
            .collect::<Vec<_>>()
            .join("; ")
    })?;
    Ok(source
        .into_iter()
        .filter(|t| {
            let (schema, table) = name(t);
            selection.matches(schema, schema, table)
        })
        .collect())
}

/// One copy task per table (either direction), from each table's task name and estimated rows, in
/// the plan's table order; [`split_task_list`] cuts large ones into key ranges.
pub fn whole_table_tasks(tables: impl Iterator<Item = (String, i64, i64)>) -> Vec<TaskPlan> {
    tables
        .enumerate()
        .map(|(i, (name, estimated_rows, estimated_bytes))| TaskPlan {
            name,
            table: i,
            lower: None,
            upper: None,
            estimated_rows,
            estimated_bytes,
            source_mark: None,
            table_identity: String::new(),
        })
        .collect()
}

/// Selects the tables, maps them, names everything on the target side, and makes one task per
/// table (see [`split_tasks`] for partitions).
pub fn build_plan(
    source: Vec<SourceTable>,
    opts: &Options,
    translate_computed: TranslateComputed,
) -> Result<Plan, PlanError> {
    let mut warnings = Vec::new();
    // Table, index and constraint names share a namespace per target schema in PostgreSQL.
    let mut namespaces: BTreeMap<String, Namespace> = BTreeMap::new();
    let mut tables = Vec::new();
    let lc = opts.lowercase_identifiers;

    let selected = select_tables(source, opts, |t| (&t.schema, &t.name)).map_err(PlanError::Pattern)?;

    // Table names first, so index names yield to tables rather than the other way round.
    let mut table_names = Vec::new();
    let mut merged = MergedTables::default();
    warnings.extend(unused_schema_map_warnings(
        opts,
        selected.iter().map(|t| t.schema.as_str()),
        true,
    ));
    for t in &selected {
        let schema = target_schema_of(&t.schema, opts);
        check_target_schema(&t.schema, &schema)?;
        merged.claim((&t.schema, &t.name), (&schema, &target_ident(&t.name, lc)), false)?;
        let relations = namespaces
            .entry(schema.clone())
            .or_insert_with(|| Namespace::new(format!("schema {schema}")));
        table_names.push(relations.claim(&t.qualified(), target_ident(&t.name, lc))?);
        if t.name.len() > PG_MAX_IDENT {
            warnings.push(format!("table {}: name truncated to 63 bytes", t.qualified()));
        }
    }

    for (t, target_name) in selected.into_iter().zip(table_names) {
        let q = t.qualified();
        let mut col_ns = Namespace::new(format!("table {q}"));
        let mut columns = Vec::new();
        for c in &t.columns {
            let mut w = Vec::new();
            let mut m = map_column(c, &mut w).map_err(|source| PlanError::Mapping {
                table: q.clone(),
                source,
            })?;
            m.target_name = col_ns.claim(&c.name, target_ident(&c.name, lc))?;
            m.domain = c.alias_type.as_ref().map(|a| target_ident(&a.name, lc));
            warnings.extend(w.into_iter().map(|w| format!("table {q}: {w}")));
            columns.push(m);
        }

        // Computed columns become generated ones where the definition translates; otherwise (and
        // for key columns, which the reader pages by) they are copied as plain values.
        let (computed, plain): (Vec<ColumnMapping>, Vec<ColumnMapping>) =
            columns.into_iter().partition(|c| c.source.computed.is_some());
        let mut columns = plain;
        let mut generated = Vec::new();
        for c in computed {
            let Some(definition) = c.source.computed.clone() else {
                continue;
            };
            let in_key = t
                .primary_key
                .as_ref()
                .is_some_and(|pk| pk.columns.contains(&c.source.name));
            let translated = if in_key {
                Err("it is part of the primary key the copy pages by".to_string())
            } else {
                translate_computed(&definition, &columns, c.pg_type)
            };
            match translated {
                Ok(expression) => generated.push(GeneratedColumn {
                    column: c,
                    expression,
                }),
                Err(why) => {
                    warnings.push(format!(
                        "table {q}: computed column {} AS {definition} is copied as plain values (not \
                         generated in PostgreSQL): {why}",
                        c.source.name
                    ));
                    columns.push(c);
                }
            }
        }
        // Back to source order for the select list.
        columns.sort_by_key(|c| t.columns.iter().position(|s| s.name == c.source.name));

        let keyset = t.primary_key.as_ref().and_then(|pk| {
            pk.columns
                .iter()
                .map(|name| {
                    let index = columns.iter().position(|c| &c.source.name == name)?;
                    Some(KeyColumn {
                        index,
                        kind: key_kind(&columns[index].source.type_name)?,
                    })
                })
                .collect::<Option<Vec<_>>>()
        });
        if opts.mode == crate::options::Mode::Upsert && t.primary_key.is_none() {
            return Err(PlanError::UpsertWithoutKey(q));
        }
        if keyset.is_none() {
            warnings.push(format!(
                "table {q}: no primary key usable for keyset paging; it is copied in one transaction and \
                 restarted from scratch if interrupted"
            ));
        }

        let target_schema = target_schema_of(&t.schema, opts);
        let relations = namespaces
            .entry(target_schema.clone())
            .or_insert_with(|| Namespace::new(format!("schema {target_schema}")));
        let mut pk_name = None;
        if let Some(pk) = &t.primary_key {
            pk_name = Some(relations.claim_relation(&t.name, &pk.name, lc, &mut warnings)?);
        }
        let mut index_names = Vec::new();
        for ix in &t.indexes {
            index_names.push(relations.claim_relation(&t.name, &ix.name, lc, &mut warnings)?);
        }
        let mut con_ns = Namespace::new(format!("constraints of {q}"));
        let mut fk_names = Vec::new();
        for fk in &t.foreign_keys {
            fk_names.push(con_ns.claim(&fk.name, target_ident(&fk.name, lc))?);
            if fk.disabled && opts.schema.foreign_keys {
                warnings.push(disabled_at_source(&q, "foreign key", &fk.name));
            }
        }
        let mut check_names = Vec::new();
        for ck in &t.checks {
            check_names.push(con_ns.claim(&ck.name, target_ident(&ck.name, lc))?);
            if ck.disabled && opts.schema.check_constraints {
                warnings.push(disabled_at_source(&q, "check constraint", &ck.name));
            }
        }

        tables.push(TablePlan {
            source: t,
            target_schema,
            target_name,
            columns,
            generated,
            keyset,
            pk_name,
            index_names,
            fk_names,
            check_names,
        });
    }
    if opts.online {
        let keyless: Vec<String> = tables
            .iter()
            .filter(|t| t.source.primary_key.is_none())
            .map(|t| t.source.qualified())
            .collect();
        if !keyless.is_empty() {
            return Err(PlanError::OnlineWithoutKey(keyless));
        }
    }

    let tasks = whole_table_tasks(
        tables
            .iter()
            .map(|t| (t.task_base_name(), t.source.row_count, t.source.size_bytes)),
    );
    Ok(Plan {
        tables,
        tasks,
        warnings,
        views: Vec::new(),
        run: 0,
    })
}

/// Replaces the task of each large table that has a single integer key with key-range partitions.
/// `bounds` holds (min, max) of that key per table index.
pub fn split_tasks(plan: &mut Plan, bounds: &BTreeMap<usize, (i64, i64)>, opts: &Options) {
    plan.tasks = split_task_list(std::mem::take(&mut plan.tasks), bounds, opts);
}

/// [`split_tasks`] on a bare task list (shared with the PostgreSQL -> SQL Server plan).
pub fn split_task_list(
    tasks_in: Vec<TaskPlan>,
    bounds: &BTreeMap<usize, (i64, i64)>,
    opts: &Options,
) -> Vec<TaskPlan> {
    let p = &opts.partitioning;
    let mut tasks = Vec::new();
    for task in tasks_in {
        let rows = task.estimated_rows;
        let parts = if rows >= p.min_rows_to_split && p.rows_per_partition > 0 {
            (rows / p.rows_per_partition).clamp(1, i64::from(p.max_partitions_per_table.max(1)))
        } else {
            1
        };
        match bounds.get(&task.table) {
            Some(&(min, max)) if parts > 1 && max > min => {
                let span = (i128::from(max) - i128::from(min) + 1) as u128;
                let parts = (parts as u128).min(span);
                let mut lower: Option<i64> = None;
                for k in 1..=parts {
                    let upper = if k == parts {
                        None
                    } else {
                        Some((i128::from(min) - 1 + (span * k / parts) as i128) as i64)
                    };
                    tasks.push(TaskPlan {
                        name: format!("{}.p{k}", task.name),
                        table: task.table,
                        lower,
                        upper,
                        estimated_rows: rows / parts as i64,
                        estimated_bytes: task.estimated_bytes / parts as i64,
                        source_mark: task.source_mark,
                        table_identity: task.table_identity.clone(),
                    });
                    lower = upper;
                }
            }
            _ => tasks.push(task),
        }
    }
    // Largest first, so the long poles start early.
    tasks.sort_by(|a, b| b.size().cmp(&a.size()).then_with(|| a.name.cmp(&b.name)));
    tasks
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::mssql_model::{IndexColumn, IndexDef, KeyConstraint};
    use crate::schema::mssql_to_pg_types::SourceColumn;

    fn untranslated(_: &str, _: &[ColumnMapping], _: PgType) -> Result<String, String> {
        Err("not translated here".into())
    }

    fn int_col(name: &str) -> SourceColumn {
        SourceColumn {
            name: name.into(),
            type_name: "int".into(),
            max_length: 4,
            precision: 10,
            scale: 0,
            nullable: false,
            identity: None,
            computed: None,
            alias_type: None,
            collation: None,
        }
    }

    fn table(name: &str, cols: &[&str]) -> SourceTable {
        SourceTable {
            schema: "dbo".into(),
            name: name.into(),
            columns: cols.iter().map(|c| int_col(c)).collect(),
            primary_key: Some(KeyConstraint {
                name: format!("PK_{name}"),
                columns: vec![cols[0].to_string()],
            }),
            indexes: vec![IndexDef {
                name: "IX_1".into(),
                unique: false,
                unique_constraint: false,
                columns: vec![IndexColumn {
                    name: cols[0].into(),
                    descending: false,
                }],
                included: vec![],
                filter: None,
            }],
            foreign_keys: vec![],
            checks: vec![],
            defaults: vec![],
            row_count: 10,
            size_bytes: 0,
            identity_last_value: None,
        }
    }

    #[test]
    fn case_fold_collision_is_an_error() {
        let opts = Options {
            lowercase_identifiers: true,
            ..Options::default()
        };
        let err = build_plan(vec![table("T", &["Id", "ID"])], &opts, untranslated).unwrap_err();
        assert!(matches!(err, PlanError::Collision { .. }), "{err}");
        // Preserved case: no collision.
        assert!(build_plan(vec![table("T", &["Id", "ID"])], &Options::default(), untranslated).is_ok());
    }

    #[test]
    fn truncation_collision_is_an_error() {
        let a = format!("{}A", "x".repeat(63));
        let b = format!("{}B", "x".repeat(63));
        let err = build_plan(
            vec![table(&a, &["Id"]), table(&b, &["Id"])],
            &Options::default(),
            untranslated,
        )
        .unwrap_err();
        assert!(matches!(err, PlanError::Collision { .. }), "{err}");
    }

    #[test]
    fn duplicate_index_names_are_prefixed() {
        let plan = build_plan(
            vec![table("A", &["Id"]), table("B", &["Id"])],
            &Options::default(),
            untranslated,
        )
        .unwrap();
        assert_eq!(plan.tables[0].index_names, vec!["IX_1"]);
        assert_eq!(plan.tables[1].index_names, vec!["B_IX_1"]);
    }

    fn in_schema(schema: &str, name: &str) -> SourceTable {
        SourceTable {
            schema: schema.into(),
            ..table(name, &["Id"])
        }
    }

    fn mapped(map: &[(&str, &str)]) -> Options {
        Options {
            source_schemas: vec!["*".into()],
            include: vec!["*".into()],
            schema_map: map
                .iter()
                .map(|(f, t)| mssql_pg_crds::SchemaMapping::new(f, t))
                .collect(),
            ..Options::default()
        }
    }

    fn targets(plan: &Plan) -> Vec<String> {
        plan.tables
            .iter()
            .map(|t| format!("{}.{}", t.target_schema, t.target_name))
            .collect()
    }

    #[test]
    fn schema_map_sends_listed_schemas_to_their_targets_and_others_by_name() {
        let opts = Options {
            lowercase_identifiers: true,
            ..mapped(&[("sales", "Sales_2024"), ("HR", "people")])
        };
        let plan = build_plan(
            vec![
                in_schema("dbo", "A"),
                // SQL Server compares schema names case-insensitively: `sales` lists Sales.
                in_schema("Sales", "B"),
                in_schema("HR", "C"),
                in_schema("Archive", "D"),
            ],
            &opts,
            untranslated,
        )
        .unwrap();
        // `to` is written as given; unmapped names fold under identifierCase lower.
        assert_eq!(
            targets(&plan),
            ["public.a", "Sales_2024.b", "people.c", "archive.d"]
        );
        assert!(
            !plan.warnings.iter().any(|w| w.contains("schemaMap")),
            "{:?}",
            plan.warnings
        );
    }

    #[test]
    fn schemas_merged_into_one_target_are_fine_until_two_tables_meet() {
        let opts = mapped(&[("Sales", "app"), ("HR", "app")]);
        let plan = build_plan(
            vec![in_schema("Sales", "Orders"), in_schema("HR", "Staff")],
            &opts,
            untranslated,
        )
        .unwrap();
        assert_eq!(targets(&plan), ["app.Orders", "app.Staff"]);
        // Index names are per schema in PostgreSQL: the second IX_1 yields.
        assert_eq!(plan.tables[1].index_names, ["Staff_IX_1"]);

        let err = build_plan(
            vec![in_schema("Sales", "Notes"), in_schema("HR", "Notes")],
            &opts,
            untranslated,
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "source tables Sales.Notes and HR.Notes both become target table app.Notes: their schemas map to \
             one target schema (target.*.schemaMap); leave one out with tables.exclude or map the schemas apart"
        );
        // The same with the default mapping: HR mapped onto the schema dbo goes to.
        let opts = mapped(&[("HR", "public")]);
        let err = build_plan(
            vec![in_schema("dbo", "T"), in_schema("HR", "T")],
            &opts,
            untranslated,
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("dbo.T and HR.T both become target table public.T"),
            "{err}"
        );
    }

    #[test]
    fn an_unused_schema_map_entry_is_a_plan_warning() {
        let opts = mapped(&[("Sales", "app"), ("Slaes", "app2")]);
        let plan = build_plan(vec![in_schema("Sales", "Orders")], &opts, untranslated).unwrap();
        assert_eq!(
            plan.warnings
                .iter()
                .filter(|w| w.starts_with("schemaMap[1]: no migrated table is in source schema \"Slaes\""))
                .count(),
            1,
            "{:?}",
            plan.warnings
        );
    }

    #[test]
    fn partitions_cover_the_key_range_without_gaps() {
        let mut t = table("Big", &["Id"]);
        t.row_count = 2_000_000;
        let opts = Options::default();
        let mut plan = build_plan(vec![t], &opts, untranslated).unwrap();
        split_tasks(&mut plan, &BTreeMap::from([(0, (1, 2_000_000))]), &opts);
        assert_eq!(plan.tasks.len(), 4);
        let mut ranges: Vec<_> = plan.tasks.iter().map(|t| (t.lower, t.upper)).collect();
        ranges.sort_by_key(|r| r.0.unwrap_or(i64::MIN));
        assert_eq!(ranges[0].0, None);
        assert_eq!(ranges[3].1, None);
        for w in ranges.windows(2) {
            assert_eq!(w[0].1, w[1].0);
        }
    }
}
