#![allow(clippy::unwrap_used)]
//! `validate()` names the field at fault and says what is wrong.

use mssql_pg_crds::*;

fn valid() -> Migration {
    let mut m = Migration::new(
        "orders",
        MigrationSpec::new(
            Endpoint::mssql(MssqlEndpoint::new("sql.example", "Orders", "mssql-creds")),
            Endpoint::postgres(PostgresEndpoint::new("pg.example", "orders", "pg-creds")),
        ),
    );
    m.metadata.namespace = Some("data".into());
    m
}

fn paths(m: &Migration) -> Vec<String> {
    m.validate().unwrap_err().into_iter().map(|e| e.path).collect()
}

#[test]
fn valid_spec_passes_both_directions() {
    assert_eq!(valid().validate(), Ok(()));
    let mut reverse = valid();
    std::mem::swap(&mut reverse.spec.source, &mut reverse.spec.target);
    assert_eq!(reverse.validate(), Ok(()));
}

#[test]
fn endpoint_must_have_exactly_one_engine() {
    let mut m = valid();
    m.spec.source.postgres = Some(PostgresEndpoint::new("h", "d", "s"));
    assert_eq!(paths(&m), vec!["spec.source"]);
    let err = m.validate().unwrap_err();
    assert!(err[0].message.contains("not both"), "{err:?}");

    let mut m = valid();
    m.spec.target.postgres = None;
    assert_eq!(paths(&m), vec!["spec.target"]);
}

#[test]
fn same_engine_on_both_sides_is_rejected() {
    let mut m = valid();
    m.spec.target = Endpoint::mssql(MssqlEndpoint::new("other", "db", "creds"));
    let err = m.validate().unwrap_err();
    assert_eq!(err.len(), 1);
    assert_eq!(err[0].path, "spec.target");
    assert!(err[0].message.contains("both mssql"), "{}", err[0]);
}

#[test]
fn each_bad_field_is_named() {
    let mut m = valid();
    let src = m.spec.source.mssql.as_mut().unwrap();
    src.port = 0;
    src.packet_size = 511;
    src.host = " ".into();
    src.credentials_secret = "Not_A_Secret".into();
    let dst = m.spec.target.postgres.as_mut().unwrap();
    dst.database = String::new();
    dst.schema = "s".repeat(64);
    m.spec.parallelism = 0;
    m.spec.copy_jobs.max_tasks = 257;
    m.spec.copy_jobs.max_rows = 0;
    m.spec.chunk_rows = Some(-1);
    m.spec.chunk_bytes.0 = "64MB".into();
    m.spec.partitioning.rows_per_partition = 0;
    m.spec.partitioning.max_partitions_per_table = 2000;
    m.spec.worker.image = Some("bad image".into());
    m.spec.tables.include = vec!["dbo.[ab".into(), "a.b.c".into()];
    m.spec.tables.exclude = vec![String::new()];
    m.metadata.name = Some("Orders_Migration".into());
    let got = paths(&m);
    let want = [
        "metadata.name",
        "spec.source.mssql.host",
        "spec.source.mssql.port",
        "spec.source.mssql.credentialsSecret",
        "spec.source.mssql.packetSize",
        "spec.target.postgres.database",
        "spec.target.postgres.schema",
        "spec.tables.include[0]",
        "spec.tables.include[1]",
        "spec.tables.exclude[0]",
        "spec.parallelism",
        "spec.copyJobs.maxTasks",
        "spec.copyJobs.maxRows",
        "spec.chunkRows",
        "spec.chunkBytes",
        "spec.partitioning.rowsPerPartition",
        "spec.partitioning.maxPartitionsPerTable",
        "spec.worker.image",
    ];
    assert_eq!(got, want);
    let err = m.validate().unwrap_err();
    let msg = mssql_pg_crds::validate::describe(&err);
    assert!(
        msg.contains("spec.tables.include[0]: bad pattern: unclosed '[' at position 4"),
        "{msg}"
    );
    assert!(
        msg.contains("spec.source.mssql.packetSize: must be between 512 and 32767"),
        "{msg}"
    );
}

#[test]
fn long_migration_name_is_rejected() {
    let mut m = valid();
    m.metadata.name = Some("m".repeat(41));
    assert_eq!(paths(&m), vec!["metadata.name"]);
}

#[test]
fn unlogged_is_for_the_postgres_target_only() {
    let mut m = valid();
    m.spec.target.postgres.as_mut().unwrap().unlogged = true;
    assert_eq!(m.validate(), Ok(()));

    let mut reverse = valid();
    std::mem::swap(&mut reverse.spec.source, &mut reverse.spec.target);
    reverse.spec.source.postgres.as_mut().unwrap().unlogged = true;
    let err = reverse.validate().unwrap_err();
    assert_eq!(err.len(), 1, "{err:?}");
    assert_eq!(err[0].path, "spec.source.postgres.unlogged");
    assert!(err[0].message.contains("target only"), "{}", err[0]);
}

#[test]
fn timeouts_retries_and_deadline_out_of_range_are_named() {
    let mut m = valid();
    m.spec.timeouts.connect_seconds = 0;
    m.spec.timeouts.stall_seconds = 100_000;
    m.spec.timeouts.lock_seconds = 0;
    m.spec.retries.attempts = 0;
    m.spec.retries.backoff_seconds = -1;
    m.spec.worker.active_deadline_seconds = Some(0);
    assert_eq!(
        paths(&m),
        [
            "spec.timeouts.connectSeconds",
            "spec.timeouts.stallSeconds",
            "spec.timeouts.lockSeconds",
            "spec.retries.attempts",
            "spec.retries.backoffSeconds",
            "spec.worker.activeDeadlineSeconds",
        ]
    );
}

#[test]
fn chunk_bytes_takes_integers_and_quantities() {
    let with = |yaml: &str| -> MigrationSpec {
        let mut v = serde_json::to_value(valid().spec).unwrap();
        v["chunkBytes"] = serde_norway::from_str(yaml).unwrap();
        serde_json::from_value(v).unwrap()
    };
    assert_eq!(with("8388608").chunk_bytes(), Ok(8 << 20));
    assert_eq!(with("\"1.5Gi\"").chunk_bytes(), Ok(3 << 29));
    assert_eq!(with("100M").chunk_bytes(), Ok(100_000_000));
    for (bad, says) in [
        ("64MB", "not a byte size"),
        ("0", "at least 1 byte"),
        ("2Ti", "at most 1Ti"),
        ("\"0.5\"", "whole number of bytes"),
    ] {
        let spec = with(bad);
        let err = spec.validate().unwrap_err();
        assert_eq!(err.len(), 1, "{bad}: {err:?}");
        assert_eq!(err[0].path, "spec.chunkBytes", "{bad}");
        assert!(err[0].message.contains(says), "{bad}: {}", err[0]);
    }
}

#[test]
fn schema_map_errors_name_the_entry_and_field() {
    let mut m = valid();
    m.spec.source.mssql.as_mut().unwrap().schemas = vec!["*".into()];
    m.spec.target.postgres.as_mut().unwrap().schema_map = vec![
        SchemaMapping::new("Sales", "sales"),
        SchemaMapping::new("HR", "pg_people"),
        // SQL Server names schemas case-insensitively: this is Sales again.
        SchemaMapping::new("SALES", "sales2"),
        SchemaMapping::new("dbo", "app"),
        SchemaMapping::new("Archive", &"a".repeat(64)),
        SchemaMapping::new("Audit", "_mssqlpg"),
        SchemaMapping::new("Merged", "sales"),
    ];
    let err = m.validate().unwrap_err();
    let got: Vec<&str> = err.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(
        got,
        [
            "spec.target.postgres.schemaMap[1].to",
            "spec.target.postgres.schemaMap[2].from",
            "spec.target.postgres.schemaMap[3].from",
            "spec.target.postgres.schemaMap[4].to",
            "spec.target.postgres.schemaMap[5].to",
        ],
        "{err:?}"
    );
    assert!(err[0].message.contains("pg_"), "{}", err[0]);
    assert!(err[1].message.contains("schemaMap[0]"), "{}", err[1]);
    assert!(
        err[2].message.contains("spec.target.postgres.schema"),
        "{}",
        err[2]
    );
    assert!(err[3].message.contains("63-byte"), "{}", err[3]);
    assert!(err[4].message.contains("_mssqlpg"), "{}", err[4]);
}

#[test]
fn schema_map_follows_the_engines_rules_in_the_reverse_direction() {
    let mut m = valid();
    std::mem::swap(&mut m.spec.source, &mut m.spec.target);
    // PostgreSQL names are case-sensitive: "Sales" and "sales" are two schemas.
    m.spec.target.mssql.as_mut().unwrap().schema_map = vec![
        SchemaMapping::new("Sales", "Sales"),
        SchemaMapping::new("sales", "Sales_lower"),
        SchemaMapping::new("pg_like", "pg_is_fine_in_sql_server"),
        SchemaMapping::new("internal", "SYS"),
    ];
    let err = m.validate().unwrap_err();
    let got: Vec<&str> = err.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(got, ["spec.target.mssql.schemaMap[3].to"], "{err:?}");
    // The source's own schema goes to the target's `schema`, not through the map.
    let mut m2 = m.clone();
    m2.spec.target.mssql.as_mut().unwrap().schema_map = vec![SchemaMapping::new("public", "app")];
    assert_eq!(paths(&m2), ["spec.target.mssql.schemaMap[0].from"]);
    // A map on the source is refused.
    let mut m3 = valid();
    m3.spec.source.mssql.as_mut().unwrap().schema_map = vec![SchemaMapping::new("a", "b")];
    assert_eq!(paths(&m3), ["spec.source.mssql.schemaMap"]);
}

#[test]
fn the_workers_own_schema_is_refused_as_the_target_schema_in_both_directions() {
    let mut m = valid();
    m.spec.target.postgres.as_mut().unwrap().schema = "_mssqlpg".into();
    let err = m.validate().unwrap_err();
    assert_eq!(err.len(), 1, "{err:?}");
    assert_eq!(err[0].path, "spec.target.postgres.schema");
    assert!(err[0].message.contains("worker's own schema"), "{}", err[0]);
    // Folded by identifierCase: lower, and the same schema to SQL Server's catalog.
    m.spec.target.postgres.as_mut().unwrap().schema = "_MsSqlPg".into();
    assert_eq!(paths(&m), ["spec.target.postgres.schema"]);

    let mut reverse = valid();
    std::mem::swap(&mut reverse.spec.source, &mut reverse.spec.target);
    reverse.spec.target.mssql.as_mut().unwrap().schema = "_MSSQLPG".into();
    assert_eq!(paths(&reverse), ["spec.target.mssql.schema"]);
    // A source schema of that name is only read.
    let mut source = valid();
    source.spec.source.mssql.as_mut().unwrap().schema = "_mssqlpg".into();
    assert_eq!(source.validate(), Ok(()));
}
