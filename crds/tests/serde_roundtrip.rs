#![allow(clippy::unwrap_used)]
//! The API types read and write the YAML users and workers exchange, exactly.

use mssql_pg_crds::*;
use serde::Deserialize;

fn fixture(name: &str) -> String {
    std::fs::read_to_string(format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

#[test]
fn full_migration_round_trips_exactly() {
    let text = fixture("full-migration.yaml");
    let input: serde_json::Value = serde_norway::from_str(&text).unwrap();
    let mig: Migration = serde_norway::from_str(&text).unwrap();

    // Every field is set in the fixture, so writing it back must reproduce the input value by value:
    // nothing dropped, renamed or defaulted over.
    let output = serde_json::to_value(&mig).unwrap();
    assert_eq!(output, input);
    let again: Migration = serde_json::from_value(output).unwrap();
    assert_eq!(again, mig);

    let src = mig.spec.source.mssql.as_ref().unwrap();
    assert_eq!(src.encryption, MssqlEncryption::On);
    assert_eq!(src.packet_size, 8192);
    let dst = mig.spec.target.postgres.as_ref().unwrap();
    assert_eq!(dst.ssl_mode, PostgresSslMode::VerifyFull);
    assert_eq!(dst.ca_secret.as_deref(), Some("pg-ca"));
    assert_eq!(
        dst.schema_map,
        vec![
            SchemaMapping::new("so_archive", "archive"),
            SchemaMapping::new("so_users", "so_copy")
        ]
    );
    assert_eq!(mig.spec.mode, CopyMode::Upsert);
    assert_eq!(mig.spec.schema.identifier_case, IdentifierCase::Lower);
    assert_eq!(mig.spec.verify, VerifyMode::Count);
    assert!(mig.spec.online.enabled);
    assert_eq!(mig.spec.online.reinitialize, Reinitialize::Auto);
    assert_eq!(mig.spec.online.poll_interval_ms(), Ok(250));
    assert_eq!(mig.spec.online.max_batch_bytes(), Ok(8 << 20));
    assert_eq!(
        (mig.spec.chunk_rows, mig.spec.chunk_bytes()),
        (Some(20_000), Ok(32 << 20))
    );
    assert_eq!(mig.spec.timeouts.stall_seconds, 120);
    assert_eq!(mig.spec.timeouts.lock_seconds, 30);
    assert_eq!(mig.spec.retries.attempts, 7);
    assert_eq!(
        (mig.spec.copy_jobs.max_tasks, mig.spec.copy_jobs.max_rows),
        (16, 500_000)
    );
    assert_eq!(mig.spec.worker.active_deadline_seconds, Some(86400));
    let status = mig.status.as_ref().unwrap();
    assert_eq!(status.phase, Some(MigrationPhase::Copying));
    assert_eq!(status.conditions.len(), 2);
    assert_eq!(status.tables[0].state, TaskState::Running);
    assert_eq!(mig.spec.source.engine(), Some(Engine::Mssql));
    assert_eq!(mig.spec.target.engine(), Some(Engine::Postgres));
    assert_eq!(mig.validate(), Ok(()));
}

#[test]
fn full_task_round_trips_exactly() {
    let text = fixture("full-task.yaml");
    let input: serde_json::Value = serde_norway::from_str(&text).unwrap();
    let task: MigrationTask = serde_norway::from_str(&text).unwrap();
    assert_eq!(serde_json::to_value(&task).unwrap(), input);
    assert_eq!(
        task.spec.partition,
        PartitionSpec::new(
            1,
            8,
            Some("Id".into()),
            Some("1000000".into()),
            Some("2000000".into())
        )
    );
    assert_eq!(task.state(), TaskState::Running);
    assert_eq!(task.spec.table.to_string(), "so.Posts");
}

#[test]
fn minimal_migration_gets_every_default() {
    let mig: Migration = serde_norway::from_str(
        r#"
apiVersion: mssqlpg.dev/v1alpha1
kind: Migration
metadata: {name: m}
spec:
  source: {mssql: {host: sql, database: db, credentialsSecret: s}}
  target: {postgres: {host: pg, database: db, credentialsSecret: t}}
"#,
    )
    .unwrap();
    let spec = &mig.spec;
    let src = spec.source.mssql.as_ref().unwrap();
    assert_eq!(
        (
            src.port,
            src.schema.as_str(),
            src.encryption,
            src.trust_server_certificate,
            src.packet_size
        ),
        (1433, "dbo", MssqlEncryption::Required, false, 32767)
    );
    let dst = spec.target.postgres.as_ref().unwrap();
    assert_eq!(
        (
            dst.port,
            dst.schema.as_str(),
            dst.ssl_mode,
            dst.ca_secret.as_deref()
        ),
        (5432, "public", PostgresSslMode::Prefer, None)
    );
    assert_eq!(spec.tables.include, vec!["*".to_string()]);
    assert!(spec.tables.exclude.is_empty());
    assert_eq!(spec.mode, CopyMode::DropRecreate);
    assert_eq!(spec.schema, SchemaOptions::default());
    assert!(spec.schema.indexes && spec.schema.foreign_keys && spec.schema.check_constraints);
    assert!(spec.schema.defaults && spec.schema.identity);
    assert_eq!(spec.schema.identifier_case, IdentifierCase::Preserve);
    assert_eq!(
        (
            spec.partitioning.min_rows_to_split,
            spec.partitioning.rows_per_partition
        ),
        (1_000_000, 1_000_000)
    );
    assert_eq!(spec.partitioning.max_partitions_per_table, 16);
    assert_eq!((spec.parallelism, spec.chunk_rows), (4, None));
    assert_eq!(
        (spec.copy_jobs.max_tasks, spec.copy_jobs.max_rows),
        (32, 1_000_000)
    );
    assert_eq!(spec.chunk_bytes.0, "64Mi");
    assert_eq!(spec.chunk_bytes(), Ok(64 << 20));
    assert_eq!(spec.verify, VerifyMode::Checksum);
    assert!(!spec.dry_run && !spec.suspend);
    assert_eq!(spec.worker.backoff_limit, 3);
    assert_eq!(spec.worker.image, None);
    assert_eq!(mig.status, None);
    // The constructor and serde agree on defaults.
    assert_eq!(
        *spec,
        MigrationSpec::new(
            Endpoint::mssql(MssqlEndpoint::new("sql", "db", "s")),
            Endpoint::postgres(PostgresEndpoint::new("pg", "db", "t"))
        )
    );
}

#[test]
fn status_without_optional_fields_serializes_compactly() {
    // Server-side apply of a status sends exactly what is serialized: unset options must not become nulls.
    let v = serde_json::to_value(MigrationStatus::default()).unwrap();
    let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    assert!(keys.iter().all(|k| !v[*k].is_null()), "{v}");
    assert!(!keys.contains(&"conditions") && !keys.contains(&"phase"), "{v}");
}

#[test]
fn deploy_examples_parse_and_validate() {
    for file in ["mssql-to-postgres.yaml", "postgres-to-mssql.yaml"] {
        let path = format!("{}/../deploy/examples/{file}", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).unwrap();
        let mut migrations = 0;
        for doc in serde_norway::Deserializer::from_str(&text) {
            let value = serde_norway::Value::deserialize(doc).unwrap();
            if value["kind"] == "Migration" {
                let mig: Migration = serde_norway::from_value(value).unwrap();
                assert_eq!(mig.validate(), Ok(()), "{file}");
                migrations += 1;
            }
        }
        assert_eq!(migrations, 1, "{file}");
    }
}

#[test]
fn tasks_for_a_migration_carry_name_label_and_owner() {
    let mut mig = Migration::new(
        "orders",
        MigrationSpec::new(
            Endpoint::mssql(MssqlEndpoint::new("sql", "db", "a")),
            Endpoint::postgres(PostgresEndpoint::new("pg", "db", "b")),
        ),
    );
    let spec = MigrationTaskSpec {
        migration: String::new(),
        table: TableRef::new("dbo", "Posts"),
        target_table: TableRef::new("public", "posts"),
        partition: PartitionSpec::new(2, 8, Some("Id".into()), Some("10".into()), Some("20".into())),
        estimated_rows: 10,
        estimated_bytes: 4096,
        columns: vec![],
    };
    assert!(mig.task(spec.clone()).is_none(), "no uid yet");
    mig.metadata.namespace = Some("data".into());
    mig.metadata.uid = Some("u-1".into());
    let task = mig.task(spec).unwrap();
    let name = task.metadata.name.clone().unwrap();
    assert_eq!(name, mssql_pg_crds::names::task_name("orders", "dbo", "Posts", 2));
    assert_eq!(task.metadata.namespace.as_deref(), Some("data"));
    assert_eq!(
        task.metadata.labels.as_ref().unwrap()["mssqlpg.dev/migration"],
        "orders"
    );
    assert_eq!(task.spec.migration, "orders");
    let owner = &task.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
        ("Migration", "u-1", Some(true))
    );
}
