//! What a run would do to each target table, decided before anything is written.
//!
//! Both directions read the target's catalog into [`ExistingTable`] (PostgreSQL: `pg/target_catalog.rs`,
//! SQL Server: `mssql/target_catalog.rs`) and compare it with the plan here, as a pure function: a
//! `truncate` or `upsert` into a table whose columns do not take the planned values exactly is refused
//! with the table, column, expected and found type, and a drop that would take other objects with it
//! is refused unless the spec allows it (`target.*.dropDependents`). A dry run reports the same
//! outcome without acting on it.

use crate::options::Mode;
use serde::{Deserialize, Serialize};

/// A column of a table that already exists in the target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExistingColumn {
    pub name: String,
    /// The type as the target's catalog spells it (`character varying(40)`, `nvarchar(40)`).
    pub type_name: String,
    pub not_null: bool,
    /// A default or an identity/generated value fills it when the copy leaves it out.
    pub filled_by_server: bool,
}

/// Something outside the migration that depends on a target table, as the catalog names it:
/// carried as separate identifiers (quoted by the DDL that uses them, never parsed back out of a
/// display string), since a name may hold any text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dependent {
    /// `view`, `materialized view`, `foreign key`.
    pub kind: String,
    /// The schema of the view, or of the table holding the foreign key.
    pub schema: String,
    /// The view, or the table holding the foreign key.
    pub relation: String,
    /// The foreign key's name; none for a view.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub constraint: Option<String>,
    /// Its definition as the catalog prints it (a view's query; a foreign key's
    /// `FOREIGN KEY (...) REFERENCES ...` clause, from which the worker recreates it after the load),
    /// so a user can recreate what they allowed to be dropped.
    pub definition: String,
}

impl Dependent {
    /// `schema.view`, or `constraint on schema.table`: for messages only.
    pub fn display_name(&self) -> String {
        match &self.constraint {
            Some(c) => format!("{c} on {}.{}", self.schema, self.relation),
            None => format!("{}.{}", self.schema, self.relation),
        }
    }

    /// A foreign key of another table: dropped for the load and recreated after it.
    pub fn is_foreign_key(&self) -> bool {
        self.constraint.is_some()
    }
}

/// A target table as its catalog describes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExistingTable {
    /// `schema.table` in the target.
    pub name: String,
    /// The catalog's estimate (PostgreSQL `reltuples`, SQL Server partition stats); `None` when
    /// never analysed.
    pub rows_estimate: Option<i64>,
    pub columns: Vec<ExistingColumn>,
    pub primary_key: Vec<String>,
    /// Objects outside the migration that depend on the table.
    pub dependents: Vec<Dependent>,
}

/// A column the plan loads, in the form the comparison needs.
#[derive(Debug, Clone)]
pub struct PlannedColumn {
    pub name: String,
    /// The planned type, as the plan prints it.
    pub type_name: String,
    pub nullable: bool,
}

/// The verdict of the engine's type comparison for one column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TypeFit {
    Exact,
    /// A documented widening that stores every value unchanged.
    Widening,
    No,
}

/// What a run does to one target table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "action", rename_all = "camelCase")]
pub enum TableAction {
    /// The table does not exist: it is created.
    Create,
    /// `dropRecreate` of an existing table (and, when allowed, of its dependents).
    Drop {
        rows_estimate: Option<i64>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        dependents: Vec<Dependent>,
    },
    /// `truncate`: the existing table is emptied and loaded.
    Truncate {
        rows_estimate: Option<i64>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        dependents: Vec<Dependent>,
    },
    /// `upsert` into the existing table.
    Upsert { rows_estimate: Option<i64> },
    /// The run refuses the table; nothing is written to any table.
    Refuse { reasons: Vec<String> },
}

impl TableAction {
    pub fn refused(&self) -> bool {
        matches!(self, TableAction::Refuse { .. })
    }

    /// One line for the plan's output.
    pub fn describe(&self, table: &str) -> String {
        let rows = |r: &Option<i64>| r.map_or_else(|| "rows unknown".to_string(), |n| format!("~{n} rows"));
        let deps = |d: &[Dependent]| {
            if d.is_empty() {
                String::new()
            } else {
                format!(
                    ", and with it {}",
                    d.iter()
                        .map(|d| format!("{} {}", d.kind, d.display_name()))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
        };
        match self {
            TableAction::Create => format!("{table}: created"),
            TableAction::Drop {
                rows_estimate,
                dependents,
            } => format!(
                "{table}: the existing table ({}) is dropped and recreated{}",
                rows(rows_estimate),
                deps(dependents)
            ),
            TableAction::Truncate {
                rows_estimate,
                dependents,
            } => format!(
                "{table}: the existing table ({}) is emptied and loaded{}",
                rows(rows_estimate),
                deps(dependents)
            ),
            TableAction::Upsert { rows_estimate } => {
                format!(
                    "{table}: rows are upserted into the existing table ({})",
                    rows(rows_estimate)
                )
            }
            TableAction::Refuse { reasons } => format!("{table}: refused: {}", reasons.join("; ")),
        }
    }
}

/// The refusals among a plan's actions, each naming its table (`tables` in plan order): the
/// error of a run that must not start.
pub fn refusals(tables: impl IntoIterator<Item = String>, actions: &[TableAction]) -> Vec<String> {
    tables
        .into_iter()
        .zip(actions)
        .filter(|(_, a)| a.refused())
        .map(|(t, a)| a.describe(&format!("table {t}")))
        .collect()
}

/// Compares one planned table with what exists in the target.
///
/// `key` is the planned primary key (target names), needed for `upsert`; `type_fit` is the
/// engine's verdict on planned column `i` stored in a column of the catalog's type `found`.
pub fn decide(
    mode: Mode,
    existing: Option<&ExistingTable>,
    planned: &[PlannedColumn],
    key: Option<&[String]>,
    drop_dependents: bool,
    type_fit: impl Fn(usize, &str) -> TypeFit,
) -> TableAction {
    let Some(found) = existing else {
        return TableAction::Create;
    };
    let mut reasons = Vec::new();
    // Emptying a table takes along only the foreign keys that reference it; views stay.
    let dependents: Vec<Dependent> = found
        .dependents
        .iter()
        .filter(|d| mode == Mode::DropRecreate || d.is_foreign_key())
        .cloned()
        .collect();
    if mode != Mode::Upsert && !dependents.is_empty() && !drop_dependents {
        let verb = if mode == Mode::DropRecreate {
            "dropping"
        } else {
            "emptying"
        };
        reasons.push(format!(
            "{verb} it would also drop {} outside the migration: {} (set dropDependents: true on the \
             target to allow it; foreign keys are then recreated after the load, views are not)",
            if dependents.len() == 1 {
                "an object"
            } else {
                "objects"
            },
            dependents
                .iter()
                .map(|d| format!("{} {}", d.kind, d.display_name()))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if mode != Mode::DropRecreate {
        reasons.extend(column_mismatches(found, planned, &type_fit));
    }
    if mode == Mode::Upsert {
        match key {
            None => reasons.push("upsert needs a primary key in the source to match rows on".into()),
            Some(key) if !found.primary_key.is_empty() && !same_names(&found.primary_key, key) => reasons
                .push(format!(
                    "upsert matches rows on ({}), but the existing target table's primary key is ({})",
                    key.join(", "),
                    found.primary_key.join(", ")
                )),
            Some(_) => {}
        }
    }
    if !reasons.is_empty() {
        return TableAction::Refuse { reasons };
    }
    match mode {
        Mode::DropRecreate => TableAction::Drop {
            rows_estimate: found.rows_estimate,
            dependents,
        },
        Mode::Truncate => TableAction::Truncate {
            rows_estimate: found.rows_estimate,
            dependents,
        },
        Mode::Upsert => TableAction::Upsert {
            rows_estimate: found.rows_estimate,
        },
    }
}

fn same_names(a: &[String], b: &[String]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

/// Every way the existing columns fail to take the planned rows exactly.
fn column_mismatches(
    found: &ExistingTable,
    planned: &[PlannedColumn],
    type_fit: &impl Fn(usize, &str) -> TypeFit,
) -> Vec<String> {
    let mut out = Vec::new();
    for (i, p) in planned.iter().enumerate() {
        let Some(c) = found.columns.iter().find(|c| c.name == p.name) else {
            out.push(format!(
                "column {}: missing in the existing target table (expected {})",
                p.name, p.type_name
            ));
            continue;
        };
        if type_fit(i, &c.type_name) == TypeFit::No {
            out.push(format!(
                "column {}: expected {}, found {}",
                p.name, p.type_name, c.type_name
            ));
        }
        if c.not_null && p.nullable {
            out.push(format!(
                "column {}: NOT NULL in the existing target table, nullable in the source",
                p.name
            ));
        }
    }
    for c in &found.columns {
        if c.not_null && !c.filled_by_server && !planned.iter().any(|p| p.name == c.name) {
            out.push(format!(
                "column {}: only in the existing target table, NOT NULL and without a default, so no \
                 copied row could be stored",
                c.name
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn col(name: &str, ty: &str, not_null: bool) -> ExistingColumn {
        ExistingColumn {
            name: name.into(),
            type_name: ty.into(),
            not_null,
            filled_by_server: false,
        }
    }

    fn planned(name: &str, ty: &str) -> PlannedColumn {
        PlannedColumn {
            name: name.into(),
            type_name: ty.into(),
            nullable: true,
        }
    }

    /// Exact when the catalog spells the planned type, a widening into `text`, else no.
    fn fit(planned: &[PlannedColumn]) -> impl Fn(usize, &str) -> TypeFit + '_ {
        move |i, found| {
            if planned[i].type_name == found {
                TypeFit::Exact
            } else if found == "text" {
                TypeFit::Widening
            } else {
                TypeFit::No
            }
        }
    }

    fn table(columns: Vec<ExistingColumn>) -> ExistingTable {
        ExistingTable {
            name: "public.Orders".into(),
            rows_estimate: Some(1),
            columns,
            primary_key: vec!["id".into()],
            dependents: Vec::new(),
        }
    }

    #[test]
    fn a_missing_table_is_created() {
        assert_eq!(
            decide(Mode::Truncate, None, &[], None, false, |_, _| TypeFit::No),
            TableAction::Create
        );
    }

    #[test]
    fn truncate_into_another_type_is_refused_naming_column_expected_and_found() {
        let t = table(vec![col("id", "real", false)]);
        let p = [planned("id", "integer")];
        let a = decide(Mode::Truncate, Some(&t), &p, None, false, fit(&p));
        let TableAction::Refuse { reasons } = a else {
            panic!("{a:?}")
        };
        assert_eq!(reasons, vec!["column id: expected integer, found real"]);
    }

    #[test]
    fn missing_columns_nullability_and_required_extra_columns_are_refused() {
        let t = table(vec![col("a", "integer", true), col("extra", "text", true)]);
        let p = [planned("a", "integer"), planned("b", "text")];
        let a = decide(
            Mode::Upsert,
            Some(&t),
            &p,
            Some(&["a".to_string()]),
            false,
            fit(&p),
        );
        let TableAction::Refuse { reasons } = a else {
            panic!("{a:?}")
        };
        assert_eq!(reasons.len(), 4, "{reasons:?}");
        assert!(reasons[0].contains("column a: NOT NULL"), "{reasons:?}");
        assert!(reasons[1].contains("column b: missing"), "{reasons:?}");
        assert!(reasons[2].contains("column extra: only in the existing target table"));
        assert!(reasons[3].contains("primary key is (id)"));
    }

    #[test]
    fn widenings_pass_and_drop_recreate_ignores_columns() {
        let t = table(vec![col("id", "text", false)]);
        let p = [planned("id", "character varying(10)")];
        assert!(matches!(
            decide(Mode::Truncate, Some(&t), &p, None, false, fit(&p)),
            TableAction::Truncate { .. }
        ));
        let p = [planned("id", "integer")];
        assert!(matches!(
            decide(Mode::DropRecreate, Some(&t), &p, None, false, fit(&p)),
            TableAction::Drop { .. }
        ));
    }

    #[test]
    fn dependents_refuse_a_drop_unless_allowed() {
        let mut t = table(vec![]);
        t.dependents.push(Dependent {
            kind: "view".into(),
            schema: "public".into(),
            relation: "v".into(),
            constraint: None,
            definition: "SELECT 1".into(),
        });
        let a = decide(Mode::DropRecreate, Some(&t), &[], None, false, |_, _| TypeFit::No);
        assert!(a.refused());
        assert!(a.describe("public.Orders").contains("view public.v"), "{a:?}");
        let a = decide(Mode::DropRecreate, Some(&t), &[], None, true, |_, _| TypeFit::No);
        assert!(matches!(a, TableAction::Drop { ref dependents, .. } if dependents.len() == 1));
        // A view does not stop a TRUNCATE.
        let a = decide(Mode::Truncate, Some(&t), &[], None, false, |_, _| TypeFit::No);
        assert!(matches!(a, TableAction::Truncate { ref dependents, .. } if dependents.is_empty()));
    }
}
