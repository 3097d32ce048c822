//! The source's views in a plan, both directions: those [`crate::pg::view`] (SQL Server ->
//! PostgreSQL) or [`crate::mssql::view`] (PostgreSQL -> SQL Server) translates are created in
//! finalize, after the tables, keys and foreign keys; the others, like procedures, functions and
//! triggers, are listed with their definitions as plan warnings.

use crate::mssql::ddl::MsStmt;
use crate::mssql::expr::column_operand;
use crate::mssql::view::{MsCatalog, MsRelation, MsViewColumn};
use crate::options::Options;
use crate::pg::ddl::{self, Stmt};
use crate::pg::view::{Catalog, Naming, Relation, ViewColumn, translate_views};
use crate::plan::mssql_to_pg::{Plan, target_ident, target_schema_of};
use crate::plan::pg_to_mssql::PgToMssqlPlan;
use crate::plan::views::{ViewPlan, Views};
use crate::preflight::target_names::Planned;
use crate::schema::mssql_model::ModuleDef;

/// Splits `modules` into the plan's views and its warnings.
pub fn plan_views(plan: &mut Plan, modules: &[ModuleDef], opts: &Options) {
    let mut tables = Catalog::default();
    for t in &plan.tables {
        let mut columns = Vec::new();
        for c in &t.source.columns {
            if let Some(m) = t.all_columns().find(|m| m.source.name == c.name) {
                columns.push(ViewColumn {
                    source_name: c.name.clone(),
                    target_name: m.target_name.clone(),
                    pg_type: m.pg_type,
                    unicode: matches!(c.type_name.as_str(), "nvarchar" | "nchar" | "ntext"),
                });
            }
        }
        tables.insert(
            &t.source.schema,
            &t.source.name,
            Relation {
                target: ddl::qualified(t),
                complete: columns.len() == t.source.columns.len(),
                columns,
            },
        );
    }
    let lc = opts.lowercase_identifiers;
    let schema = |s: &str| target_schema_of(s, opts);
    let ident = |s: &str| target_ident(s, lc);
    plan.views = listed(modules, &mut plan.warnings, |views| {
        translate_views(
            views,
            &tables,
            &Naming {
                schema: &schema,
                ident: &ident,
            },
        )
    });
}

/// The views `translate` translates (in the order they are created); the refused ones and the
/// other modules become `warnings`, each with its definition. The same in both directions.
fn listed(
    modules: &[ModuleDef],
    warnings: &mut Vec<String>,
    translate: impl FnOnce(&[ModuleDef]) -> Views,
) -> Vec<ViewPlan> {
    let (views, others): (Vec<ModuleDef>, Vec<ModuleDef>) =
        modules.iter().cloned().partition(|m| m.kind == "view");
    let Views { translated, refused } = translate(&views);
    warnings.extend(refused.iter().map(|(m, why)| Views::warning(m, why)));
    warnings.extend(others.iter().map(ModuleDef::warning));
    translated
}

/// Before the tables are dropped: the plan's own views, dependents last created first.
pub fn drop_statements(plan: &Plan, cascade: bool) -> Vec<String> {
    plan.views
        .iter()
        .rev()
        .map(|v| {
            format!(
                "DROP VIEW IF EXISTS {}{}",
                v.target,
                if cascade { " CASCADE" } else { "" }
            )
        })
        .collect()
}

/// In finalize: each view replaced, in dependency order. A failure is a translation bug and
/// fails finalize naming the view.
pub fn create_statements(plan: &Plan) -> Vec<Stmt> {
    let mut out: Vec<Stmt> = drop_statements(plan, false)
        .into_iter()
        .map(|sql| Stmt {
            what: "previous view".into(),
            sql,
            optional: false,
            creates: None,
        })
        .collect();
    out.extend(plan.views.iter().map(|v| Stmt {
        what: format!("view {} (translated from {})", v.target, v.qualified_source()),
        sql: v.sql.clone(),
        optional: false,
        creates: Some(Planned::view(&v.target_schema, &v.target_name)),
    }));
    out
}

/// PostgreSQL -> SQL Server: splits `modules` into the plan's views (those
/// [`crate::mssql::view`] translates) and its warnings. `target_schema` names a PostgreSQL
/// schema's SQL Server schema.
pub fn plan_views_pg_to_mssql(
    plan: &mut PgToMssqlPlan,
    modules: &[ModuleDef],
    target_schema: &dyn Fn(&str) -> String,
) {
    let mut tables = MsCatalog::default();
    for t in &plan.tables {
        tables.insert(
            &t.source.schema,
            &t.source.name,
            MsRelation {
                target: crate::mssql::ddl::qualified(t),
                columns: t
                    .columns
                    .iter()
                    .map(|c| MsViewColumn {
                        source_name: c.source.name.clone(),
                        target_name: c.target_name.clone(),
                        operand: column_operand(&c.source, c.ms_type),
                    })
                    .collect(),
            },
        );
    }
    plan.views = listed(modules, &mut plan.warnings, |views| {
        crate::mssql::view::translate_views(views, &tables, target_schema)
    });
}

/// Whether view `schema.name` (as SQL Server's catalog names a view reading a target table) is
/// one of the plan's own views: a rerun drops and creates those itself.
pub fn is_own_mssql_view(plan: &PgToMssqlPlan, schema: &str, name: &str) -> bool {
    let target = format!(
        "{}.{}",
        crate::schema::mssql_to_pg_types::quote_mssql(schema),
        crate::schema::mssql_to_pg_types::quote_mssql(name)
    );
    plan.views.iter().any(|v| v.target.eq_ignore_ascii_case(&target))
}

/// Before the tables are dropped or emptied: the plan's own views in SQL Server, dependents first.
pub fn mssql_drop_statements(plan: &PgToMssqlPlan) -> Vec<String> {
    plan.views
        .iter()
        .rev()
        .map(|v| {
            let literal = v.target.replace('\'', "''");
            format!(
                "IF OBJECT_ID(N'{literal}', N'V') IS NOT NULL DROP VIEW {}",
                v.target
            )
        })
        .collect()
}

/// In finalize, after the foreign keys: each view replaced, in dependency order. One SQL Server
/// rejects is a warning naming it and the statement, and its dependents fail after it.
pub fn mssql_create_statements(plan: &PgToMssqlPlan) -> Vec<MsStmt> {
    let mut out: Vec<MsStmt> = mssql_drop_statements(plan)
        .into_iter()
        .map(|sql| MsStmt {
            what: "previous view".into(),
            sql,
            optional: false,
            creates: None,
        })
        .collect();
    out.extend(plan.views.iter().map(|v| MsStmt {
        what: format!("view {} (translated from {})", v.target, v.qualified_source()),
        sql: v.sql.clone(),
        optional: true,
        creates: Some(Planned::view(&v.target_schema, &v.target_name)),
    }));
    out
}
