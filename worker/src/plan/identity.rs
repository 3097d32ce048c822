//! A plan's identity: what a run's target tables were made for, so that the steps after `plan`
//! (and a rerun of `plan` resuming an interrupted copy) go on only with the plan the copy so far
//! was made with. It is a SHA-256 of a canonical form of what matters: per table, the source and
//! target names, each column's source name, target name, type as created, nullability and
//! identity, generated columns with their expressions, and the key the copy pages and resumes
//! by; nothing that moves with the data alone (row counts, sizes, task ranges) or with how a
//! worker version reads. The form is versioned ([`FORM`]): the same plan gives the same identity
//! on every platform and Rust release, and a worker that changes the form changes [`FORM`].
//!
//! When it changes (a column added or retyped in the source; a type derived from the data, like
//! an unbounded numeric's scale, moved by a new row), the steps refuse with
//! [`mismatch`]'s message, which names the tables and says what to do.

use serde::Serialize;
use sha2::Digest as _;

/// The version of the canonical form, hashed first.
pub const FORM: &str = "mssql-pg plan identity v1";

/// One column as the target table was created with it.
#[derive(Debug, Serialize)]
pub struct ColumnShape<'a> {
    pub source: &'a str,
    pub target: &'a str,
    /// The target type as created (`numeric(12,2)`, `nvarchar(40)`).
    pub target_type: String,
    pub nullable: bool,
    pub identity: bool,
    /// A generated (computed) column's expression on the target.
    pub generated: Option<&'a str>,
}

/// What a target table was made for ([`table_identity`]).
#[derive(Debug, Serialize)]
pub struct TableShape<'a> {
    /// The source table, `schema.name`.
    pub source: String,
    /// The target table, `schema.name`.
    pub target: String,
    pub columns: Vec<ColumnShape<'a>>,
    /// The target names of the key columns the copy pages and resumes by, in order.
    pub key: Vec<&'a str>,
}

/// The identity of one table's plan: 32 hex digits of the SHA-256 of [`FORM`] and the table's
/// shape as JSON (fields in declaration order, so the text is canonical).
pub fn table_identity(shape: &TableShape<'_>) -> String {
    let json = serde_json::to_string(shape).unwrap_or_default();
    hex(&sha2::Sha256::digest(format!("{FORM}\n{json}").as_bytes())[..16])
}

/// The identity of a whole plan, from its tables' identities in plan order: 64 hex digits.
pub fn fingerprint<'a>(tables: impl IntoIterator<Item = &'a str>) -> String {
    let mut h = sha2::Sha256::new();
    h.update(FORM.as_bytes());
    for t in tables {
        h.update(b"\n");
        h.update(t.as_bytes());
    }
    hex(&h.finalize())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Why a stored run's plan is not the current one, and what to do: the tables (by source name)
/// whose identity no stored task carries, and the stored tasks whose table is gone or changed.
/// `current` is each current table's (source name, identity); `stored` the run's tasks as
/// (task name, table identity).
pub fn mismatch(current: &[(String, String)], stored: &[(&str, &str)]) -> String {
    let advice = "the tables copied so far were made for the old plan. To start this migration's copy \
                  over with the new plan, rerun `plan` (in the cluster: delete the Migration and create \
                  it again); to go on with the copy made so far, undo the change in the source and rerun \
                  this step";
    if stored.iter().all(|(_, id)| id.is_empty()) {
        return format!(
            "the run was prepared by an older worker, which recorded no plan identity this one can \
             check; {advice}"
        );
    }
    let changed: Vec<&str> = current
        .iter()
        .filter(|(_, id)| !stored.iter().any(|(_, stored_id)| stored_id == id))
        .map(|(name, _)| name.as_str())
        .collect();
    let mut gone: Vec<&str> = stored
        .iter()
        .filter(|(_, stored_id)| !current.iter().any(|(_, id)| id == stored_id))
        .map(|(name, _)| *name)
        .collect();
    gone.dedup();
    let mut what = Vec::new();
    if !changed.is_empty() {
        what.push(format!(
            "table {} changed since `plan` (a column added, dropped or retyped, its key, or a type \
             derived from the data such as an unbounded numeric's scale, which a new row can change)",
            changed.join(", ")
        ));
    }
    if !gone.is_empty() {
        what.push(format!(
            "task {} belongs to a table no longer planned as it was",
            gone.join(", ")
        ));
    }
    if what.is_empty() {
        what.push("the tables' order in the plan changed".into());
    }
    format!(
        "the plan no longer matches the run `plan` prepared: {}; {advice}",
        what.join("; ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(target_type: &str) -> TableShape<'static> {
        TableShape {
            source: "dbo.Orders".into(),
            target: "public.Orders".into(),
            columns: vec![
                ColumnShape {
                    source: "Id",
                    target: "Id",
                    target_type: "integer".into(),
                    nullable: false,
                    identity: true,
                    generated: None,
                },
                ColumnShape {
                    source: "Amount",
                    target: "Amount",
                    target_type: target_type.into(),
                    nullable: true,
                    identity: false,
                    generated: None,
                },
            ],
            key: vec!["Id"],
        }
    }

    #[test]
    fn identities_are_fixed_values_of_the_canonical_form() {
        // Pinned: a worker built with any Rust release, on any platform, computes these (as does
        // `sha256(FORM + "\n" + compact JSON)` in any language); a change of the form must change
        // FORM, and these values, deliberately.
        let t = table_identity(&shape("numeric(12,2)"));
        assert_eq!(t, "1195c9893814a33d20243a0652cea884");
        assert_eq!(
            fingerprint([t.as_str()]),
            "0ad5f653e2493840d0eaf58c4a71c29b8ca711a508f17f5405e8740b331c204d"
        );
        assert_ne!(t, table_identity(&shape("numeric(14,2)")));
    }

    #[test]
    fn a_mismatch_names_the_changed_tables_and_what_to_do() {
        let current = vec![
            ("dbo.Orders".to_string(), "new".to_string()),
            ("dbo.Users".to_string(), "u".to_string()),
        ];
        let stored = vec![
            ("dbo.Orders.p1", "old"),
            ("dbo.Orders.p2", "old"),
            ("dbo.Users", "u"),
        ];
        let m = mismatch(&current, &stored);
        assert!(m.contains("table dbo.Orders changed"), "{m}");
        assert!(m.contains("task dbo.Orders.p1, dbo.Orders.p2 belongs"), "{m}");
        assert!(!m.contains("dbo.Users"), "{m}");
        assert!(
            m.contains("rerun `plan`") && m.contains("undo the change in the source"),
            "{m}"
        );
        let legacy = mismatch(&current, &[("dbo.Orders", "")]);
        assert!(legacy.contains("older worker"), "{legacy}");
    }
}
