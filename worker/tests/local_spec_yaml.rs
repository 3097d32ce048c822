//! How a local Migration file's YAML is read (`mssql-pg-worker run -f`): the file users apply
//! with kubectl, Secrets and all, read as kubectl would.
#![allow(clippy::unwrap_used)]

use mssql_pg_crds::MssqlEncryption;
use mssql_pg_worker::spec::parse;

const MIGRATION: &str = "apiVersion: mssqlpg.dev/v1alpha1
kind: Migration
metadata: {name: orders}
spec:
  source:
    mssql: {host: h, database: d, encryption: Off}
  target:
    postgres: {host: p, database: d}
";

#[test]
fn the_migration_is_found_among_the_secrets_of_a_multi_document_file() {
    let text = format!(
        "# applied with kubectl apply -f
apiVersion: v1
kind: Secret
metadata: {{name: source-creds}}
stringData: {{username: sa, password: not-read}}
---
apiVersion: v1
kind: Secret
metadata: {{name: target-creds}}
stringData: {{username: postgres}}
---
{MIGRATION}---
apiVersion: v1
kind: ConfigMap
metadata: {{name: after}}
"
    );
    let m = parse("m.yaml", &text).unwrap();
    assert_eq!(m.metadata.name.as_deref(), Some("orders"));
    // YAML 1.2, as the API server reads it: `Off` is the enum's word, not a boolean.
    assert_eq!(
        m.spec.source.mssql.map(|s| s.encryption),
        Some(MssqlEncryption::Off)
    );
}

#[test]
fn a_file_without_a_migration_is_refused() {
    let text = "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\n";
    let e = parse("m.yaml", text).unwrap_err().to_string();
    assert_eq!(e, "invalid Migration: m.yaml holds no document of kind Migration");
}

#[test]
fn a_yaml_syntax_error_names_its_line() {
    let text = "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\ndata: a: b\n";
    let e = parse("m.yaml", text).unwrap_err().to_string();
    assert!(e.starts_with("m.yaml: line 4: "), "{e}");
    let text = format!("{MIGRATION}  mode: copy: upsert\n");
    let e = parse("m.yaml", &text).unwrap_err().to_string();
    assert!(e.starts_with("m.yaml: line 9: "), "{e}");
}

#[test]
fn duplicate_keys_are_an_error() {
    let text = format!("{MIGRATION}  mode: copy\n  mode: upsert\n");
    let e = parse("m.yaml", &text).unwrap_err().to_string();
    assert!(e.contains("duplicate"), "{e}");
}
