//! What both directions do with the source's views alike: a translated view as the plan carries
//! it, the order views are translated in (each after the views it reads), and the plan warning
//! that lists a view left for the user to port.

use crate::schema::mssql_model::ModuleDef;
use serde::Serialize;
use std::collections::BTreeSet;

/// A translated view, created in the target in finalize after the tables, keys and foreign keys.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ViewPlan {
    pub source_schema: String,
    pub source_name: String,
    /// The target's qualified name, quoted as the target quotes.
    pub target: String,
    /// The target's schema and name, unquoted (the name check compares them with the catalog).
    #[serde(skip)]
    pub target_schema: String,
    #[serde(skip)]
    pub target_name: String,
    /// The CREATE VIEW statement.
    pub sql: String,
}

impl ViewPlan {
    pub fn qualified_source(&self) -> String {
        format!("{}.{}", self.source_schema, self.source_name)
    }
}

/// The views of the source: translated (in the order they can be created) or refused.
#[derive(Debug, Clone, Default)]
pub struct Views {
    pub translated: Vec<ViewPlan>,
    /// With why: the construct and where it is.
    pub refused: Vec<(ModuleDef, String)>,
}

impl Views {
    /// The plan warning for a refused view: the reason and the whole definition.
    pub fn warning(view: &ModuleDef, reason: &str) -> String {
        format!(
            "view {}.{} is not migrated (port it by hand): {reason}; its definition: {}",
            view.schema, view.name, view.definition
        )
    }
}

/// A view's schema and name as the source compares them.
pub type Key = (String, String);

/// One attempt at translating a view.
pub enum Attempt {
    Done(ViewPlan),
    /// It reads a view not translated yet: tried again after the others.
    Waits,
    Refused(String),
}

/// Why a translator gave up on a view, for now or for good.
pub enum Fail {
    /// Reads a view not translated yet: try again after the others.
    Waits,
    Refused(String),
}

impl From<String> for Fail {
    fn from(s: String) -> Fail {
        Fail::Refused(s)
    }
}

impl From<Fail> for Attempt {
    fn from(f: Fail) -> Attempt {
        match f {
            Fail::Waits => Attempt::Waits,
            Fail::Refused(reason) => Attempt::Refused(reason),
        }
    }
}

/// What a step of a view translator gives.
pub type ViewResult<T> = Result<T, Fail>;

/// Gives up on the view with `why` as the plan warning's reason.
pub fn refuse<T>(why: impl Into<String>) -> ViewResult<T> {
    Err(Fail::Refused(why.into()))
}

/// Where the other views stand while one is translated.
pub struct Progress {
    pub waiting: BTreeSet<Key>,
    pub refused: BTreeSet<Key>,
}

/// Translates `views` each after the views it reads: `attempt` is called again for a view that
/// waits as long as another one got translated or refused in the same round; what still waits
/// then reads views that read each other. `key` says how the source compares names.
pub fn in_dependency_order(
    views: &[ModuleDef],
    key: impl Fn(&str, &str) -> Key,
    mut attempt: impl FnMut(&ModuleDef, &Progress) -> Attempt,
) -> Views {
    let mut out = Views::default();
    let mut pending: Vec<&ModuleDef> = views.iter().collect();
    let mut progress = Progress {
        waiting: BTreeSet::new(),
        refused: BTreeSet::new(),
    };
    loop {
        progress.waiting = pending.iter().map(|v| key(&v.schema, &v.name)).collect();
        let mut still = Vec::new();
        let mut moved = false;
        for v in pending {
            match attempt(v, &progress) {
                Attempt::Done(plan) => {
                    out.translated.push(plan);
                    moved = true;
                }
                Attempt::Waits => still.push(v),
                Attempt::Refused(reason) => {
                    progress.refused.insert(key(&v.schema, &v.name));
                    out.refused.push((v.clone(), reason));
                    moved = true;
                }
            }
        }
        pending = still;
        if pending.is_empty() {
            return out;
        }
        if !moved {
            for v in pending {
                out.refused
                    .push((v.clone(), "it reads views that read each other".to_string()));
            }
            return out;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(name: &str) -> ModuleDef {
        ModuleDef {
            schema: "s".into(),
            name: name.into(),
            kind: "view".into(),
            definition: String::new(),
        }
    }

    #[test]
    fn each_view_after_those_it_reads() {
        // c reads b reads a; d reads e reads d.
        let reads = |n: &str| match n {
            "c" => Some("b"),
            "b" => Some("a"),
            "d" => Some("e"),
            "e" => Some("d"),
            _ => None,
        };
        let views: Vec<ModuleDef> = ["c", "d", "b", "a", "e"].iter().map(|n| view(n)).collect();
        let out = in_dependency_order(
            &views,
            |s, n| (s.to_string(), n.to_string()),
            |v, p| match reads(&v.name) {
                Some(r) if p.waiting.contains(&("s".to_string(), r.to_string())) => Attempt::Waits,
                _ => Attempt::Done(ViewPlan {
                    source_schema: v.schema.clone(),
                    source_name: v.name.clone(),
                    target: v.name.clone(),
                    target_schema: "s".into(),
                    target_name: v.name.clone(),
                    sql: String::new(),
                }),
            },
        );
        let order: Vec<&str> = out.translated.iter().map(|v| v.source_name.as_str()).collect();
        assert_eq!(order, ["a", "b", "c"]);
        let refused: Vec<(&str, &str)> = out
            .refused
            .iter()
            .map(|(v, why)| (v.name.as_str(), why.as_str()))
            .collect();
        assert_eq!(
            refused,
            [
                ("d", "it reads views that read each other"),
                ("e", "it reads views that read each other")
            ]
        );
    }
}
