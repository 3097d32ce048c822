//! The names the plan gives the target's keys, indexes, constraints and views, compared with what
//! the target already holds before anything is created: in the dry run, in prepare (nothing
//! written before) and again at the start of finalize (the target may have changed since).
//!
//! A name held by an object this migration created (recorded in the worker's `_mssqlpg` state
//! when it created it, with the catalog's id of the object, so one dropped and made again by
//! someone else under that name is not taken for it) is reused; one held by the same kind of object on the same table is kept
//! as found, with a warning (a table loaded as it is, or a creation whose record a crash lost);
//! a view of a planned view's name is replaced only when the mode allows it. Any other holder
//! refuses the run, naming schema, table and object: an index of another table named like the
//! plan's primary key must not stand in for that key. "Already exists" from the database is never
//! read as "done" (the checks decide before the statement runs).
//! Both directions share these rules; each engine reads its own catalog
//! ([`crate::pg::target_names`], [`crate::mssql::target_names`]).

use std::collections::BTreeMap;

/// The kinds of object the plan names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ObjectKind {
    PrimaryKey,
    Unique,
    Index,
    Check,
    ForeignKey,
    Default,
    View,
}

impl ObjectKind {
    pub fn describe(self) -> &'static str {
        match self {
            ObjectKind::PrimaryKey => "primary key",
            ObjectKind::Unique => "unique constraint",
            ObjectKind::Index => "index",
            ObjectKind::Check => "check constraint",
            ObjectKind::ForeignKey => "foreign key",
            ObjectKind::Default => "default",
            ObjectKind::View => "view",
        }
    }

    /// As the state records it.
    pub fn code(self) -> &'static str {
        match self {
            ObjectKind::PrimaryKey => "pk",
            ObjectKind::Unique => "unique",
            ObjectKind::Index => "index",
            ObjectKind::Check => "check",
            ObjectKind::ForeignKey => "fk",
            ObjectKind::Default => "default",
            ObjectKind::View => "view",
        }
    }

    pub fn from_code(code: &str) -> Option<ObjectKind> {
        [
            ObjectKind::PrimaryKey,
            ObjectKind::Unique,
            ObjectKind::Index,
            ObjectKind::Check,
            ObjectKind::ForeignKey,
            ObjectKind::Default,
            ObjectKind::View,
        ]
        .into_iter()
        .find(|k| k.code() == code)
    }
}

/// An object a statement of the plan creates in the target.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Planned {
    pub kind: ObjectKind,
    pub schema: String,
    /// The table it belongs to; none for a view.
    pub table: Option<String>,
    pub name: String,
}

impl Planned {
    pub fn on(kind: ObjectKind, schema: &str, table: &str, name: &str) -> Planned {
        Planned {
            kind,
            schema: schema.to_string(),
            table: Some(table.to_string()),
            name: name.to_string(),
        }
    }

    pub fn view(schema: &str, name: &str) -> Planned {
        Planned {
            kind: ObjectKind::View,
            schema: schema.to_string(),
            table: None,
            name: name.to_string(),
        }
    }

    /// `primary key PK_Orders of table sales.Orders`, `view sales.v`.
    pub fn describe(&self) -> String {
        match &self.table {
            Some(t) => format!(
                "{} {} of table {}.{t}",
                self.kind.describe(),
                self.name,
                self.schema
            ),
            None => format!("{} {}.{}", self.kind.describe(), self.schema, self.name),
        }
    }
}

/// Where a name is unique in the target's catalog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// Among the schema's objects (PostgreSQL: relations; SQL Server: `sys.objects`).
    Schema,
    /// Among one table's (PostgreSQL: constraints; SQL Server: indexes).
    Table(String),
}

/// Something in the target's catalog holding a name the plan uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    pub schema: String,
    pub name: String,
    pub scope: Scope,
    /// What it is, when it is a kind the plan creates.
    pub kind: Option<ObjectKind>,
    /// What the catalog calls it ("table", "sequence", "stored procedure"...), for messages.
    pub what: String,
    /// The table it belongs to (a key, index or constraint).
    pub table: Option<String>,
    /// The catalog's id of the object ([`Recorded::id`]).
    pub id: i64,
}

impl Holder {
    fn describe(&self) -> String {
        match &self.table {
            Some(t) => format!("{} {} of table {}.{t}", self.what, self.name, self.schema),
            None => format!("{} {}.{}", self.what, self.schema, self.name),
        }
    }
}

/// How an engine's catalog scopes and compares names.
#[derive(Debug, Clone, Copy)]
pub struct Rules {
    /// SQL Server's catalog compares names case-insensitively (under the usual collations).
    pub case_insensitive: bool,
    /// Kinds whose name is unique in the schema.
    pub schema_scoped: fn(ObjectKind) -> bool,
    /// Kinds whose name is unique among the table's.
    pub table_scoped: fn(ObjectKind) -> bool,
}

/// PostgreSQL: a primary key, unique constraint and index create a relation (an index) of their
/// name in the schema, as a view does; every constraint's name is unique on its table.
pub const PG: Rules = Rules {
    case_insensitive: false,
    schema_scoped: |k| {
        matches!(
            k,
            ObjectKind::PrimaryKey | ObjectKind::Unique | ObjectKind::Index | ObjectKind::View
        )
    },
    table_scoped: |k| {
        matches!(
            k,
            ObjectKind::PrimaryKey | ObjectKind::Unique | ObjectKind::Check | ObjectKind::ForeignKey
        )
    },
};

/// SQL Server: constraints and views are schema-scoped objects; an index's name (a primary key's
/// or unique constraint's too) is unique on its table.
pub const MSSQL: Rules = Rules {
    case_insensitive: true,
    schema_scoped: |k| k != ObjectKind::Index,
    table_scoped: |k| matches!(k, ObjectKind::PrimaryKey | ObjectKind::Unique | ObjectKind::Index),
};

impl Rules {
    pub fn same(&self, a: &str, b: &str) -> bool {
        if self.case_insensitive {
            a.to_lowercase() == b.to_lowercase()
        } else {
            a == b
        }
    }

    fn same_table(&self, schema: &str, table: &str, other_schema: &str, other: &str) -> bool {
        self.same(schema, other_schema) && self.same(table, other)
    }
}

/// What the target holds under the plan's names, read before anything is created.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    pub holders: Vec<Holder>,
    /// The primary keys the planned tables already have: (schema, table, name).
    pub primary_keys: Vec<(String, String, String)>,
    /// What this migration created in the target (its `_mssqlpg` state).
    pub recorded: Vec<Recorded>,
}

/// An object a migration created, as the worker's state remembers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    pub object: Planned,
    /// The catalog's id of what was created (PostgreSQL: the constraint's oid for a key or
    /// constraint, the relation's for an index or view; SQL Server: `sys.objects.object_id`, or
    /// for an index its table's `object_id` * 65536 + `index_id`).
    pub id: i64,
}

/// How a run may treat names held by objects it did not create.
#[derive(Debug, Clone, Default)]
pub struct Allowances {
    /// Tables the run drops before creating them again (`dropRecreate`): what belongs to them goes
    /// with them. (schema, table)
    pub dropped: Vec<(String, String)>,
    /// A view of a planned view's name that this migration did not create may be replaced:
    /// `dropRecreate` (the plan's views are dropped and created again) or `dropDependents`.
    pub replace_views: bool,
}

/// What the run does with one planned object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The name is free.
    Create,
    /// This migration created it before: left as it is (a view is dropped and created again).
    Ours,
    /// The same kind of object on the same table, not recorded as this migration's (or the
    /// table's primary key under another name): kept as found, with this warning.
    Found(String),
    /// A view the mode lets the run replace, with this warning.
    Replace(String),
    /// Another object holds the name: the run must not go on.
    Refuse(String),
}

/// The verdict on every planned object, and the refusals among them.
#[derive(Debug, Clone, Default)]
pub struct Checked {
    pub verdicts: BTreeMap<Planned, Verdict>,
}

impl Checked {
    /// Judges `planned` against `catalog`.
    pub fn new(
        rules: &Rules,
        planned: impl IntoIterator<Item = Planned>,
        catalog: &Catalog,
        allow: &Allowances,
    ) -> Checked {
        let verdicts = planned
            .into_iter()
            .map(|p| {
                let v = verdict(rules, &p, catalog, allow);
                (p, v)
            })
            .collect();
        Checked { verdicts }
    }

    pub fn verdict(&self, p: &Planned) -> Option<&Verdict> {
        self.verdicts.get(p)
    }

    /// Whether the statement creating `p` runs: a free name, and a view (the plan's views are
    /// dropped and created again); not what is kept. An object the check did not judge runs.
    pub fn runs(&self, p: &Planned) -> bool {
        match self.verdicts.get(p) {
            None | Some(Verdict::Create) | Some(Verdict::Replace(_)) => true,
            Some(Verdict::Ours) => p.kind == ObjectKind::View,
            Some(Verdict::Found(_)) | Some(Verdict::Refuse(_)) => false,
        }
    }

    /// Each refusal, naming the object and the holder of its name.
    pub fn refusals(&self) -> Vec<(&Planned, &str)> {
        self.verdicts
            .iter()
            .filter_map(|(p, v)| match v {
                Verdict::Refuse(why) => Some((p, why.as_str())),
                _ => None,
            })
            .collect()
    }

    /// The warnings of objects kept as found (finalize leaves them alone).
    pub fn found_warnings(&self) -> Vec<String> {
        self.verdicts
            .values()
            .filter_map(|v| match v {
                Verdict::Found(w) => Some(w.clone()),
                _ => None,
            })
            .collect()
    }

    /// The warnings of views replaced (prepare may drop them already).
    pub fn replace_warnings(&self) -> Vec<String> {
        self.verdicts
            .values()
            .filter_map(|v| match v {
                Verdict::Replace(w) => Some(w.clone()),
                _ => None,
            })
            .collect()
    }
}

/// Adds each refusal of `checked` to the action of the table it belongs to (a view's to the first
/// table of its schema, or the first table): a run then refuses to start, and a dry run says why.
/// `tables` are the plan's target (schema, table) in the order of `actions`.
pub fn refuse_taken(
    rules: &Rules,
    checked: &Checked,
    tables: &[(String, String)],
    actions: &mut [crate::preflight::target_tables::TableAction],
) {
    use crate::preflight::target_tables::TableAction;
    for (p, why) in checked.refusals() {
        let i = tables
            .iter()
            .position(|(s, t)| {
                rules.same(s, &p.schema) && p.table.as_deref().is_none_or(|pt| rules.same(t, pt))
            })
            .unwrap_or(0);
        let Some(action) = actions.get_mut(i) else {
            continue;
        };
        match action {
            TableAction::Refuse { reasons } => reasons.push(why.to_string()),
            other => {
                *other = TableAction::Refuse {
                    reasons: vec![why.to_string()],
                }
            }
        }
    }
}

/// What the run does with `p`, given what holds its name.
pub fn verdict(rules: &Rules, p: &Planned, catalog: &Catalog, allow: &Allowances) -> Verdict {
    let dropped = |schema: &str, table: &str| {
        allow
            .dropped
            .iter()
            .any(|(s, t)| rules.same_table(s, t, schema, table))
    };
    let holders: Vec<&Holder> = catalog
        .holders
        .iter()
        .filter(|h| rules.same(&h.schema, &p.schema) && rules.same(&h.name, &p.name))
        .filter(|h| match &h.scope {
            Scope::Schema => (rules.schema_scoped)(p.kind),
            Scope::Table(t) => {
                (rules.table_scoped)(p.kind) && p.table.as_deref().is_some_and(|pt| rules.same(t, pt))
            }
        })
        // Gone before the plan's object is created: a dropped table, and what belongs to it.
        .filter(|h| {
            let owner = h.table.as_deref().unwrap_or(&h.name);
            !dropped(&h.schema, owner)
        })
        .collect();
    let recorded = catalog.recorded.iter().any(|r| {
        let o = &r.object;
        o.kind == p.kind
            && rules.same(&o.schema, &p.schema)
            && rules.same(&o.name, &p.name)
            && match (&o.table, &p.table) {
                (Some(a), Some(b)) => rules.same(a, b),
                (None, None) => true,
                _ => false,
            }
            && holders.iter().any(|h| h.id == r.id)
    });
    if holders.is_empty() {
        if p.kind == ObjectKind::PrimaryKey
            && let Some(table) = &p.table
            && !dropped(&p.schema, table)
            && let Some((_, _, existing)) = catalog
                .primary_keys
                .iter()
                .find(|(s, t, _)| rules.same_table(s, t, &p.schema, table))
        {
            return Verdict::Found(format!(
                "table {}.{table} keeps its primary key {existing} (the target had it before this run): \
                 the plan's {} is not created and the two are not compared",
                p.schema, p.name
            ));
        }
        return Verdict::Create;
    }
    let same_object = holders.iter().all(|h| {
        h.kind == Some(p.kind)
            && match (&h.table, &p.table) {
                (Some(a), Some(b)) => rules.same(a, b),
                (None, None) => true,
                _ => false,
            }
    });
    if same_object && recorded {
        return Verdict::Ours;
    }
    if same_object && p.kind != ObjectKind::View {
        return Verdict::Found(format!(
            "{} already exists in the target and this migration did not record creating it: \
             kept as found (its definition is not compared with the plan's)",
            p.describe()
        ));
    }
    if same_object && allow.replace_views {
        return Verdict::Replace(format!(
            "{} existed in the target, not created by this migration, and was replaced by the plan's view",
            p.describe()
        ));
    }
    let held = holders
        .iter()
        .map(|h| h.describe())
        .collect::<Vec<_>>()
        .join(", ");
    let fix = if same_object {
        "drop or rename that view, or allow the run to replace it with dropDependents: true"
    } else {
        "drop or rename that object, or send the table to another schema (target schemaMap)"
    };
    Verdict::Refuse(format!(
        "{}: the name is taken in the target by {held}, which this migration did not create; {fix}",
        p.describe()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn holder(kind: Option<ObjectKind>, what: &str, name: &str, table: Option<&str>, scope: Scope) -> Holder {
        Holder {
            schema: "s".into(),
            name: name.into(),
            scope,
            kind,
            what: what.into(),
            table: table.map(str::to_string),
            id: 7,
        }
    }

    fn ours(p: &Planned, id: i64) -> Recorded {
        Recorded {
            object: p.clone(),
            id,
        }
    }

    #[test]
    fn an_index_of_another_table_refuses_the_primary_key_of_its_name() {
        let pk = Planned::on(ObjectKind::PrimaryKey, "s", "Orders", "PK_Orders");
        let catalog = Catalog {
            holders: vec![holder(
                Some(ObjectKind::Index),
                "index",
                "PK_Orders",
                Some("Other"),
                Scope::Schema,
            )],
            ..Catalog::default()
        };
        let v = verdict(&PG, &pk, &catalog, &Allowances::default());
        let Verdict::Refuse(why) = v else { panic!("{v:?}") };
        assert!(why.contains("primary key PK_Orders of table s.Orders"), "{why}");
        assert!(why.contains("index PK_Orders of table s.Other"), "{why}");
        // Recorded as ours does not help: it is another object.
        let recorded = Catalog {
            recorded: vec![ours(&pk, 7)],
            ..catalog.clone()
        };
        assert!(matches!(
            verdict(&PG, &pk, &recorded, &Allowances::default()),
            Verdict::Refuse(_)
        ));
        // Unless that table is dropped first.
        let allow = Allowances {
            dropped: vec![("s".into(), "Other".into())],
            ..Allowances::default()
        };
        assert_eq!(verdict(&PG, &pk, &catalog, &allow), Verdict::Create);
    }

    #[test]
    fn ours_is_reused_the_same_kind_on_the_same_table_is_kept_with_a_warning() {
        let pk = Planned::on(ObjectKind::PrimaryKey, "s", "Orders", "PK_Orders");
        let mut catalog = Catalog {
            holders: vec![
                holder(
                    Some(ObjectKind::PrimaryKey),
                    "primary key",
                    "PK_Orders",
                    Some("Orders"),
                    Scope::Schema,
                ),
                holder(
                    Some(ObjectKind::PrimaryKey),
                    "primary key",
                    "PK_Orders",
                    Some("Orders"),
                    Scope::Table("Orders".into()),
                ),
            ],
            primary_keys: vec![("s".into(), "Orders".into(), "PK_Orders".into())],
            recorded: vec![ours(&pk, 7)],
        };
        assert_eq!(verdict(&PG, &pk, &catalog, &Allowances::default()), Verdict::Ours);
        // Dropped and made again under that name: not the one this migration recorded.
        catalog.recorded = vec![ours(&pk, 8)];
        assert!(matches!(
            verdict(&PG, &pk, &catalog, &Allowances::default()),
            Verdict::Found(_)
        ));
        catalog.recorded.clear();
        assert!(matches!(
            verdict(&PG, &pk, &catalog, &Allowances::default()),
            Verdict::Found(_)
        ));
    }

    #[test]
    fn a_primary_key_under_another_name_is_kept() {
        let pk = Planned::on(ObjectKind::PrimaryKey, "s", "Orders", "PK_Orders");
        let catalog = Catalog {
            primary_keys: vec![("s".into(), "Orders".into(), "orders_pkey".into())],
            ..Catalog::default()
        };
        let Verdict::Found(w) = verdict(&PG, &pk, &catalog, &Allowances::default()) else {
            panic!()
        };
        assert!(w.contains("orders_pkey"), "{w}");
        let dropped = Allowances {
            dropped: vec![("s".into(), "Orders".into())],
            ..Allowances::default()
        };
        assert_eq!(verdict(&PG, &pk, &catalog, &dropped), Verdict::Create);
    }

    #[test]
    fn a_view_not_ours_is_replaced_only_when_allowed() {
        let v = Planned::view("s", "v");
        let catalog = Catalog {
            holders: vec![holder(Some(ObjectKind::View), "view", "v", None, Scope::Schema)],
            ..Catalog::default()
        };
        assert!(matches!(
            verdict(&PG, &v, &catalog, &Allowances::default()),
            Verdict::Refuse(w) if w.contains("dropDependents")
        ));
        let allow = Allowances {
            replace_views: true,
            ..Allowances::default()
        };
        assert!(matches!(verdict(&PG, &v, &catalog, &allow), Verdict::Replace(_)));
        let recorded = Catalog {
            recorded: vec![ours(&v, 7)],
            ..catalog.clone()
        };
        assert_eq!(verdict(&PG, &v, &recorded, &Allowances::default()), Verdict::Ours);
        let remade = Catalog {
            recorded: vec![ours(&v, 8)],
            ..catalog.clone()
        };
        assert!(matches!(
            verdict(&PG, &v, &remade, &Allowances::default()),
            Verdict::Refuse(_)
        ));
        // A table of that name is never replaced.
        let table = Catalog {
            holders: vec![holder(None, "table", "v", None, Scope::Schema)],
            recorded: vec![ours(&v, 7)],
            ..Catalog::default()
        };
        assert!(matches!(verdict(&PG, &v, &table, &allow), Verdict::Refuse(_)));
    }

    #[test]
    fn scopes_follow_the_engine() {
        // PostgreSQL: a check constraint of another table may share the name; SQL Server: not.
        let ck = Planned::on(ObjectKind::Check, "s", "Orders", "CK_Qty");
        let catalog = Catalog {
            holders: vec![
                holder(
                    Some(ObjectKind::Check),
                    "check constraint",
                    "CK_Qty",
                    Some("Other"),
                    Scope::Table("Other".into()),
                ),
                holder(
                    Some(ObjectKind::Check),
                    "check constraint",
                    "ck_qty",
                    Some("Other"),
                    Scope::Schema,
                )
                .clone(),
            ],
            ..Catalog::default()
        };
        let pg_only = Catalog {
            holders: catalog.holders[..1].to_vec(),
            ..Catalog::default()
        };
        assert_eq!(
            verdict(&PG, &ck, &pg_only, &Allowances::default()),
            Verdict::Create
        );
        assert!(matches!(
            verdict(&MSSQL, &ck, &catalog, &Allowances::default()),
            Verdict::Refuse(_)
        ));
        // SQL Server: an index of another table may share an index's name.
        let ix = Planned::on(ObjectKind::Index, "s", "Orders", "IX_1");
        let other = Catalog {
            holders: vec![holder(
                Some(ObjectKind::Index),
                "index",
                "IX_1",
                Some("Other"),
                Scope::Table("Other".into()),
            )],
            ..Catalog::default()
        };
        assert_eq!(
            verdict(&MSSQL, &ix, &other, &Allowances::default()),
            Verdict::Create
        );
    }
}
