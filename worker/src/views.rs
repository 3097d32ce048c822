//! The source's views in a SQL Server -> PostgreSQL plan: those [`crate::pg::view`] translates
//! are created in finalize, after the tables, keys and foreign keys; the others, like procedures,
//! functions and triggers, are listed with their definitions as plan warnings.

use crate::model::ModuleDef;
use crate::options::Options;
use crate::pg::ddl::{self, Stmt};
use crate::pg::view::{Catalog, Naming, Relation, ViewColumn, Views, translate_views};
use crate::plan::{Plan, target_ident, target_schema_of};

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
    let (views, others): (Vec<ModuleDef>, Vec<ModuleDef>) =
        modules.iter().cloned().partition(|m| m.kind == "view");
    let Views { translated, refused } = translate_views(
        &views,
        &tables,
        &Naming {
            schema: &schema,
            ident: &ident,
        },
    );
    plan.warnings
        .extend(refused.iter().map(|(m, why)| Views::warning(m, why)));
    plan.warnings.extend(others.iter().map(ModuleDef::warning));
    plan.views = translated;
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
        })
        .collect();
    out.extend(plan.views.iter().map(|v| Stmt {
        what: format!("view {} (translated from {})", v.target, v.qualified_source()),
        sql: v.sql.clone(),
        optional: false,
    }));
    out
}
