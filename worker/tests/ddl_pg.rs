//! DDL from a planned schema, applied to the real PostgreSQL: keys, indexes, checks, defaults,
//! foreign keys and identity are all there and behave.
#![allow(clippy::unwrap_used)]

mod common;

use mssql_pg_worker::options::{Options, SchemaOptions};
use mssql_pg_worker::pg::ddl;
use mssql_pg_worker::plan::mssql_to_pg::build_plan;
use mssql_pg_worker::schema::mssql_model::*;
use mssql_pg_worker::schema::mssql_to_pg_types::{Identity, SourceColumn};

fn col(name: &str, ty: &str, max_length: i16, nullable: bool) -> SourceColumn {
    SourceColumn {
        name: name.into(),
        type_name: ty.into(),
        max_length,
        precision: if ty == "decimal" { 10 } else { 0 },
        scale: if ty == "decimal" { 2 } else { 0 },
        nullable,
        identity: None,
        computed: None,
        alias_type: None,
        collation: None,
    }
}

fn schema_tables() -> Vec<SourceTable> {
    let mut id = col("Id", "int", 4, false);
    id.identity = Some(Identity {
        seed: 100,
        increment: 10,
    });
    let parent = SourceTable {
        schema: "dbo".into(),
        name: "Parent".into(),
        columns: vec![
            id,
            col("Code", "nvarchar", 20, true),
            col("Active", "bit", 1, false),
            col("Small", "tinyint", 1, true),
            col("Price", "decimal", 9, true),
            col("Created", "datetime2", 8, true),
            col("Guid", "uniqueidentifier", 16, true),
            col("Note", "nvarchar", 40, true),
        ],
        primary_key: Some(KeyConstraint {
            name: "PK_Parent".into(),
            columns: vec!["Id".into()],
        }),
        indexes: vec![
            IndexDef {
                name: "UQ_Parent_Code".into(),
                unique: true,
                unique_constraint: true,
                columns: vec![IndexColumn {
                    name: "Code".into(),
                    descending: false,
                }],
                included: vec![],
                filter: None,
            },
            IndexDef {
                name: "IX_Parent_Price".into(),
                unique: false,
                unique_constraint: false,
                columns: vec![IndexColumn {
                    name: "Price".into(),
                    descending: true,
                }],
                included: vec!["Note".into()],
                filter: None,
            },
            IndexDef {
                name: "UX_Parent_Note_Active".into(),
                unique: true,
                unique_constraint: false,
                columns: vec![IndexColumn {
                    name: "Note".into(),
                    descending: false,
                }],
                included: vec![],
                filter: Some("([Active]=(1))".into()),
            },
        ],
        foreign_keys: vec![],
        checks: vec![
            CheckDef {
                name: "CK_Parent_Price".into(),
                definition: "([Price]>=(0))".into(),
                not_trusted: false,
                disabled: false,
            },
            CheckDef {
                name: "CK_Parent_Created".into(),
                definition: "([Created]<dateadd(day,(1),getdate()))".into(),
                not_trusted: false,
                disabled: false,
            },
        ],
        defaults: vec![
            DefaultDef {
                column: "Active".into(),
                definition: "((1))".into(),
            },
            DefaultDef {
                column: "Created".into(),
                definition: "(sysdatetime())".into(),
            },
            DefaultDef {
                column: "Guid".into(),
                definition: "(newid())".into(),
            },
            DefaultDef {
                column: "Note".into(),
                definition: "(N'it''s')".into(),
            },
        ],
        row_count: 0,
        size_bytes: 0,
        identity_last_value: Some(150),
    };
    let child = SourceTable {
        schema: "dbo".into(),
        name: "Child".into(),
        columns: vec![
            col("Id", "bigint", 8, false),
            col("ParentId", "int", 4, true),
            col("OtherId", "int", 4, true),
        ],
        primary_key: Some(KeyConstraint {
            name: "PK_Child".into(),
            columns: vec!["Id".into()],
        }),
        indexes: vec![],
        foreign_keys: vec![
            ForeignKeyDef {
                name: "FK_Child_Parent".into(),
                columns: vec!["ParentId".into()],
                ref_schema: "dbo".into(),
                ref_table: "Parent".into(),
                ref_columns: vec!["Id".into()],
                on_delete: "CASCADE".into(),
                on_update: "NO_ACTION".into(),
                not_trusted: false,
                disabled: false,
            },
            ForeignKeyDef {
                name: "FK_Child_Other".into(),
                columns: vec!["OtherId".into()],
                ref_schema: "other".into(),
                ref_table: "Elsewhere".into(),
                ref_columns: vec!["Id".into()],
                on_delete: "NO_ACTION".into(),
                on_update: "NO_ACTION".into(),
                not_trusted: false,
                disabled: false,
            },
        ],
        checks: vec![],
        defaults: vec![],
        row_count: 0,
        size_bytes: 0,
        identity_last_value: None,
    };
    vec![parent, child]
}

async fn exec_all(client: &tokio_postgres::Client, stmts: Vec<ddl::Stmt>, warnings: &mut Vec<String>) {
    for s in stmts {
        if let Err(e) = client.batch_execute(&s.sql).await {
            assert!(s.optional, "{}: {e:?}\n{}", s.what, s.sql);
            warnings.push(format!("{}: {e}", s.what));
        }
    }
}

#[tokio::test]
async fn schema_objects_are_created_and_behave() {
    let client = common::pg_connect().await;
    let schema = common::fresh_schema(&client, "ddl").await;
    let opts = Options {
        target_schema: schema.clone(),
        ..Options::default()
    };
    let plan = build_plan(
        schema_tables(),
        &opts,
        mssql_pg_worker::pg::expr::translate_computed,
    )
    .unwrap();
    let so = SchemaOptions::default();
    let mut warnings = plan.warnings.clone();
    for t in &plan.tables {
        client
            .batch_execute(&ddl::create_table(t, &so, false))
            .await
            .unwrap();
        exec_all(&client, ddl::defaults(t, &mut warnings), &mut warnings).await;
    }
    let q = |t: &str| format!("\"{schema}\".\"{t}\"");
    // Loaded data: explicit identity values.
    client
        .batch_execute(&format!(
            "INSERT INTO {} (\"Id\", \"Code\", \"Active\", \"Small\", \"Price\", \"Note\") VALUES (100, 'a', true, 255, 1.5, 'n1'), (120, 'b', false, 0, 2, 'n2')",
            q("Parent")
        ))
        .await
        .unwrap();
    client
        .batch_execute(&format!("INSERT INTO {} VALUES (1, 100, NULL)", q("Child")))
        .await
        .unwrap();
    for t in &plan.tables {
        exec_all(
            &client,
            ddl::finalize_table(t, &so, 15, &mut warnings),
            &mut warnings,
        )
        .await;
        exec_all(&client, ddl::identity_reset(t), &mut warnings).await;
    }
    exec_all(&client, ddl::foreign_keys(&plan, &mut warnings), &mut warnings).await;

    // Identity continues after max(source last_value 150, max 120), step 10.
    let row = client
        .query_one(&format!("INSERT INTO {} (\"Code\") VALUES ('c') RETURNING \"Id\", \"Active\", \"Note\", \"Guid\" IS NOT NULL, \"Created\" IS NOT NULL", q("Parent")), &[])
        .await
        .unwrap();
    assert_eq!(row.get::<_, i32>(0), 160);
    assert!(row.get::<_, bool>(1), "bit default ((1)) becomes true");
    assert_eq!(row.get::<_, String>(2), "it's");
    assert!(row.get::<_, bool>(3) && row.get::<_, bool>(4));

    // tinyint range, check constraint, unique constraint, PK, FK cascade.
    let fails = |sql: String| {
        let client = &client;
        async move { client.batch_execute(&sql).await.unwrap_err().code().cloned() }
    };
    use tokio_postgres::error::SqlState;
    assert_eq!(
        fails(format!("UPDATE {} SET \"Small\" = 256", q("Parent"))).await,
        Some(SqlState::CHECK_VIOLATION)
    );
    assert_eq!(
        fails(format!("UPDATE {} SET \"Price\" = -1", q("Parent"))).await,
        Some(SqlState::CHECK_VIOLATION)
    );
    assert_eq!(
        fails(format!("INSERT INTO {} (\"Code\") VALUES ('a')", q("Parent"))).await,
        Some(SqlState::UNIQUE_VIOLATION)
    );
    assert_eq!(
        fails(format!("INSERT INTO {} (\"Id\") VALUES (100)", q("Parent"))).await,
        Some(SqlState::UNIQUE_VIOLATION)
    );
    assert_eq!(
        fails(format!("INSERT INTO {} VALUES (2, 999, NULL)", q("Child"))).await,
        Some(SqlState::FOREIGN_KEY_VIOLATION)
    );
    client
        .batch_execute(&format!("DELETE FROM {} WHERE \"Id\" = 100", q("Parent")))
        .await
        .unwrap();
    let n: i64 = client
        .query_one(&format!("SELECT count(*) FROM {}", q("Child")), &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 0, "ON DELETE CASCADE");

    // Index shapes.
    let defs: Vec<String> = client
        .query(
            "SELECT indexdef FROM pg_indexes WHERE schemaname = $1 ORDER BY indexname",
            &[&schema],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let all = defs.join("\n");
    assert!(
        all.contains("\"IX_Parent_Price\"") && all.contains("\"Price\" DESC) INCLUDE (\"Note\")"),
        "{all}"
    );
    assert!(
        all.contains("UNIQUE INDEX \"UX_Parent_Note_Active\"") && all.contains("WHERE (\"Active\" = true)"),
        "{all}"
    );
    assert!(
        all.contains("\"PK_Parent\"") && all.contains("\"PK_Child\""),
        "{all}"
    );
    assert!(
        all.contains("\"UQ_Parent_Code\"") && all.contains("NULLS NOT DISTINCT"),
        "{all}"
    );

    // The generated upsert statements run against this schema (an unchanged row is left alone).
    let parent = &plan.tables[0];
    let merge = ddl::upsert_merge(parent);
    assert!(merge.contains("ON CONFLICT (\"Id\") DO UPDATE SET"), "{merge}");
    client
        .batch_execute(&format!(
            "BEGIN; {}; INSERT INTO \"_mssqlpg_stage\" SELECT * FROM {}; {merge}; COMMIT",
            ddl::upsert_stage(parent),
            q("Parent")
        ))
        .await
        .unwrap();

    // What could not be translated is reported, not silently dropped.
    let w = warnings.join("\n");
    assert!(w.contains("CK_Parent_Created"), "{w}");
    assert!(w.contains("FK_Child_Other"), "{w}");
}

/// PostgreSQL before 15 cannot keep SQL Server's rule that NULLs repeat only once in a unique
/// key: the key is created (weaker), and the run says so instead of differing silently.
#[test]
fn nullable_unique_keys_are_warned_of_before_postgres_15() {
    let plan = build_plan(
        schema_tables(),
        &Options::default(),
        mssql_pg_worker::pg::expr::translate_computed,
    )
    .unwrap();
    let so = SchemaOptions::default();
    let parent = &plan.tables[0];
    let mut old = Vec::new();
    let stmts = ddl::finalize_table(parent, &so, 14, &mut old);
    assert!(stmts.iter().all(|s| !s.sql.contains("NULLS NOT DISTINCT")));
    assert!(
        old.iter()
            .any(|w| w.contains("UQ_Parent_Code") && w.contains("Code") && w.contains("15+")),
        "{old:?}"
    );
    let mut new = Vec::new();
    let stmts = ddl::finalize_table(parent, &so, 15, &mut new);
    assert!(stmts.iter().any(|s| s.sql.contains("NULLS NOT DISTINCT")));
    assert!(
        new.iter().all(|w| !w.contains("NULLS NOT DISTINCT needs")),
        "{new:?}"
    );
}
