#![allow(clippy::unwrap_used)]
//! Every field of the generated CRDs has a description written for a user (what `kubectl explain`
//! shows): none missing, none carrying Rust's or Go's names (constants, types, paths, doc links) or
//! the Go documentation of embedded Kubernetes types.

use mssql_pg_crds::generate;
use serde_json::Value;

/// Text that belongs to the code, not to a user's description.
fn leak(description: &str) -> Option<String> {
    const PHRASES: [&str; 8] = [
        "Time is a wrapper",
        "time.Time",
        "marshal",
        "AsInt64",
        "::",
        "Option<",
        "Vec<",
        "[`",
    ];
    if let Some(p) = PHRASES.iter().find(|p| description.contains(*p)) {
        return Some(format!("{p:?}"));
    }
    // A Rust constant: SCREAMING_SNAKE_CASE with at least one underscore (MAX_WARNINGS).
    description
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .find(|w| {
            w.contains('_')
                && w.chars().any(|c| c.is_ascii_uppercase())
                && w.chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
                && !w.starts_with('_')
        })
        .map(|w| format!("the constant {w}"))
}

/// Walks a schema; `path` is the field path as `kubectl explain` spells it.
fn walk(schema: &Value, path: &str, problems: &mut Vec<String>) {
    if let Some(d) = schema.get("description").and_then(Value::as_str)
        && let Some(what) = leak(d)
    {
        problems.push(format!("{path}: description shows {what}: {d:?}"));
    }
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (name, field) in props {
            let field_path = format!("{path}.{name}");
            let described = field
                .get("description")
                .and_then(Value::as_str)
                .is_some_and(|d| !d.trim().is_empty());
            if !described {
                problems.push(format!("{field_path}: no description"));
            }
            walk(field, &field_path, problems);
        }
    }
    if let Some(items) = schema.get("items") {
        walk(items, &format!("{path}[]"), problems);
    }
    if let Some(values) = schema.get("additionalProperties").filter(|v| v.is_object()) {
        walk(values, &format!("{path}{{}}"), problems);
    }
}

fn problems_of(crd: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    let kind = crd["spec"]["names"]["kind"].as_str().unwrap().to_string();
    for version in crd["spec"]["versions"].as_array().unwrap() {
        let schema = &version["schema"]["openAPIV3Schema"];
        // apiVersion, kind and metadata are Kubernetes' own and explained by the API server.
        for (name, field) in schema["properties"].as_object().unwrap() {
            if ["apiVersion", "kind", "metadata"].contains(&name.as_str()) {
                continue;
            }
            let path = format!("{kind}.{name}");
            if field.get("description").and_then(Value::as_str).is_none() {
                problems.push(format!("{path}: no description"));
            }
            walk(field, &path, &mut problems);
        }
    }
    problems
}

#[test]
fn every_field_has_a_description_for_users() {
    let mut problems = Vec::new();
    for (_, crd) in generate::all() {
        problems.extend(problems_of(&serde_json::to_value(&crd).unwrap()));
    }
    assert!(
        problems.is_empty(),
        "{} fields of the generated CRDs need a description for users:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn the_check_finds_missing_descriptions_and_code_names() {
    let crd = serde_json::json!({
        "spec": {"names": {"kind": "Migration"}, "versions": [{"schema": {"openAPIV3Schema": {"properties": {
            "status": {"description": "Observed state.", "properties": {
                "rowsCopied": {"type": "integer"},
                "startedAt": {"description": "Time is a wrapper around time.Time which supports correct marshaling"},
                "tables": {"description": "At most `MAX_TABLE_SUMMARIES` (200) entries.", "items": {
                    "properties": {"name": {"description": "See [`TableRef::new`]."}}
                }}
            }}
        }}}}]}
    });
    let problems = problems_of(&crd);
    let joined = problems.join("\n");
    assert_eq!(problems.len(), 4, "{joined}");
    assert!(
        joined.contains("Migration.status.rowsCopied: no description"),
        "{joined}"
    );
    assert!(
        joined.contains("Migration.status.startedAt: description shows \"Time is a wrapper\""),
        "{joined}"
    );
    assert!(
        joined.contains("Migration.status.tables: description shows the constant MAX_TABLE_SUMMARIES"),
        "{joined}"
    );
    assert!(
        joined.contains("Migration.status.tables[].name: description shows \"::\""),
        "{joined}"
    );
}
