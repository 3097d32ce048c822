//! The command line as a person meets it: `plan` writes nothing, `prepare` is the writing step,
//! `check` reports versions and rights (and the GRANT for a missing one), `--output json` gives one
//! JSON object per line for every command, and `--help` names the environment variables.
#![allow(clippy::unwrap_used)]

mod common;

use std::process::Command;
use tds_testserver::{ServerConfig, TestServer};

/// A Migration from the test server's `dbo` into `schema` of the test PostgreSQL's database
/// `postgres`.
fn yaml(name: &str, ms_port: u16, pg_port: &str, schema: &str) -> String {
    yaml_into(name, ms_port, pg_port, "postgres", schema)
}

fn yaml_into(name: &str, ms_port: u16, pg_port: &str, database: &str, schema: &str) -> String {
    format!(
        "apiVersion: mssqlpg.dev/v1alpha1
kind: Migration
metadata:
  name: {name}
  namespace: tests
spec:
  source:
    mssql: {{host: 127.0.0.1, port: {ms_port}, database: master, schema: dbo, encryption: NotSupported}}
  target:
    postgres: {{host: 127.0.0.1, port: {pg_port}, database: {database}, schema: {schema}, sslMode: disable}}
  chunkRows: 100
  verify: checksum
"
    )
}

fn write_file(name: &str, text: &str) -> String {
    let dir = std::env::temp_dir().join(format!("mssqlpg-cli-commands-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(format!("{name}.yaml"));
    std::fs::write(&file, text).unwrap();
    file.to_string_lossy().into_owned()
}

struct Outcome {
    code: Option<i32>,
    stdout: String,
}

impl Outcome {
    /// Every stdout line parsed, each asserted to be one JSON object.
    fn events(&self) -> Vec<serde_json::Value> {
        self.stdout
            .lines()
            .map(|l| {
                let v: serde_json::Value =
                    serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}"));
                assert!(v.is_object(), "not a JSON object: {l}");
                v
            })
            .collect()
    }
}

/// Runs the worker with the test server's login as the source and `target_user` as the target's.
fn worker(args: &[&str], password: &str, target_user: &str) -> Outcome {
    let out = Command::new(env!("CARGO_BIN_EXE_mssql-pg-worker"))
        .args(args)
        .env("SOURCE_USERNAME", "sa")
        .env("SOURCE_PASSWORD", password)
        .env("TARGET_USERNAME", target_user)
        .env_remove("TARGET_PASSWORD")
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stdout.contains(password) && !stderr.contains(password),
        "the password leaked"
    );
    Outcome {
        code: out.status.code(),
        stdout,
    }
}

/// A test server holding `dbo.Items` (ids 1..=rows) and its password.
async fn seeded(rows: i64) -> (TestServer, String) {
    let config = ServerConfig::default();
    let password = config.password.clone();
    let server = TestServer::start(config.clone()).unwrap();
    let endpoint = mssql_pg_worker::mssql::connect::MssqlEndpoint {
        host: "127.0.0.1".into(),
        port: server.addr().port(),
        database: config.database.clone(),
        user: config.user.clone(),
        password: password.clone(),
        encryption: mssql_pg_worker::mssql::connect::Encryption::NotSupported,
        trust_server_certificate: false,
        ca_file: None,
        packet_size: 32767,
        timeouts: Default::default(),
    };
    let mut ms = endpoint.connect().await.unwrap();
    common::ms_exec(
        &mut ms,
        "CREATE TABLE dbo.Items (Id int NOT NULL PRIMARY KEY, Name nvarchar(30) NOT NULL)",
    )
    .await;
    let values = (1..=rows)
        .map(|i| format!("({i}, N'item {i}')"))
        .collect::<Vec<_>>()
        .join(", ");
    common::ms_exec(
        &mut ms,
        &format!("INSERT INTO dbo.Items (Id, Name) VALUES {values}"),
    )
    .await;
    (server, password)
}

/// The tables of `_mssqlpg` and the rows naming `migration` in its run table: what a writing
/// step leaves behind.
async fn bookkeeping(pg: &tokio_postgres::Client, migration: &str) -> (Vec<String>, i64) {
    let tables: Vec<String> = pg
        .query(
            "SELECT table_name::text FROM information_schema.tables WHERE table_schema = '_mssqlpg' ORDER BY 1",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let runs = if tables.iter().any(|t| t == "runs") {
        pg.query_one(
            "SELECT count(*) FROM \"_mssqlpg\".\"runs\" WHERE migration = $1",
            &[&migration],
        )
        .await
        .unwrap()
        .get(0)
    } else {
        0
    };
    (tables, runs)
}

async fn tables_in(pg: &tokio_postgres::Client, schema: &str) -> i64 {
    pg.query_one(
        "SELECT count(*) FROM information_schema.tables WHERE table_schema = $1",
        &[&schema],
    )
    .await
    .unwrap()
    .get(0)
}

#[tokio::test(flavor = "multi_thread")]
async fn plan_writes_nothing_and_prepare_then_copy_does_the_run() {
    let (server, password) = seeded(250).await;
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "cli_plan").await;
    let name = "cli-plan";
    pg.batch_execute("DELETE FROM \"_mssqlpg\".\"runs\" WHERE migration = 'tests/cli-plan'")
        .await
        .ok();
    let pg_port = std::env::var("MSSQLPG_TEST_PG_PORT").unwrap();
    let file = write_file(name, &yaml(name, server.addr().port(), &pg_port, &schema));
    let before = bookkeeping(&pg, "tests/cli-plan").await;

    // plan: read-only, whatever spec.dryRun says (false here).
    let plan = worker(&["plan", "-f", &file, "--output", "json"], &password, "postgres");
    assert_eq!(plan.code, Some(0), "{}", plan.stdout);
    let events = plan.events();
    assert_eq!(events.len(), 1, "{}", plan.stdout);
    assert_eq!(events[0]["event"], "dryRun");
    assert_eq!(events[0]["written"], false);
    assert_eq!(events[0]["plan"]["tables"][0]["source"], "dbo.Items");
    assert_eq!(tables_in(&pg, &schema).await, 0, "plan created a target table");
    assert_eq!(
        bookkeeping(&pg, "tests/cli-plan").await,
        before,
        "plan wrote bookkeeping"
    );

    let text = worker(&["plan", "-f", &file, "--output", "text"], &password, "postgres");
    assert_eq!(text.code, Some(0));
    assert!(
        text.stdout
            .starts_with("plan (nothing written): 1 tables, 1 tasks\n"),
        "{}",
        text.stdout
    );
    assert!(text.stdout.contains("dbo.Items"), "{}", text.stdout);
    assert!(text.stdout.contains(": created"), "{}", text.stdout);
    assert_eq!(tables_in(&pg, &schema).await, 0);

    // prepare: the writing step; its task list feeds copy.
    let prepared = worker(
        &["prepare", "-f", &file, "--output", "json"],
        &password,
        "postgres",
    );
    assert_eq!(prepared.code, Some(0), "{}", prepared.stdout);
    let events = prepared.events();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["event"], "plan");
    let task = events[0]["tasks"][0]["name"].as_str().unwrap().to_string();
    assert_eq!(
        tables_in(&pg, &schema).await,
        1,
        "prepare creates the target table"
    );
    assert_eq!(
        bookkeeping(&pg, "tests/cli-plan").await.1,
        1,
        "prepare stores the run"
    );

    let copy = worker(
        &["copy", "-f", &file, "--task", &task, "--output", "json"],
        &password,
        "postgres",
    );
    assert_eq!(copy.code, Some(0), "{}", copy.stdout);
    let events = copy.events();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["rows"], 250);
    let copied: i64 = pg
        .query_one(&format!("SELECT count(*) FROM \"{schema}\".\"Items\""), &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(copied, 250);

    let finalize = worker(
        &["finalize", "-f", &file, "--output", "text"],
        &password,
        "postgres",
    );
    assert_eq!(finalize.code, Some(0), "{}", finalize.stdout);
    assert!(finalize.stdout.starts_with("finalized: "), "{}", finalize.stdout);
    assert!(
        !finalize.stdout.contains('{'),
        "a Debug dump: {}",
        finalize.stdout
    );

    let verify = worker(
        &["verify", "-f", &file, "--output", "json"],
        &password,
        "postgres",
    );
    assert_eq!(verify.code, Some(0), "{}", verify.stdout);
    let events = verify.events();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["event"], "verified");
    assert_eq!(events[0]["ok"], true);

    let verify = worker(
        &["verify", "-f", &file, "--output", "text"],
        &password,
        "postgres",
    );
    assert!(
        verify
            .stdout
            .starts_with("verified: 1 tables equal on both sides\n"),
        "{}",
        verify.stdout
    );
    assert!(
        verify
            .stdout
            .contains("dbo.Items  250          250          equal     ok"),
        "{}",
        verify.stdout
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn check_reports_versions_and_every_right_present() {
    let (server, password) = seeded(1).await;
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "cli_check_ok").await;
    let pg_port = std::env::var("MSSQLPG_TEST_PG_PORT").unwrap();
    let file = write_file(
        "cli-check-ok",
        &yaml("cli-check-ok", server.addr().port(), &pg_port, &schema),
    );

    let check = worker(&["check", "-f", &file, "--output", "json"], &password, "postgres");
    assert_eq!(check.code, Some(0), "{}", check.stdout);
    let events = check.events();
    assert_eq!(events.len(), 1, "{}", check.stdout);
    let report = &events[0];
    assert_eq!(report["event"], "check");
    assert_eq!(report["ok"], true, "{report}");
    let (source, target) = (&report["sides"][0], &report["sides"][1]);
    assert_eq!(source["side"], "source");
    assert_eq!(source["engine"], "SQL Server");
    assert!(source["version"].as_str().unwrap().contains("16.0"), "{source}");
    assert_eq!(source["collation"], "SQL_Latin1_General_CP1_CI_AS");
    assert!(source["tls"].as_str().unwrap().starts_with("off"), "{source}");
    let rights = |side: &serde_json::Value| -> Vec<String> {
        side["rights"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["right"].as_str().unwrap().to_string())
            .collect()
    };
    assert!(
        rights(source).contains(&"SELECT on schema [dbo]".to_string()),
        "{source}"
    );
    assert_eq!(target["engine"], "PostgreSQL");
    assert_eq!(target["encoding"], "UTF8");
    assert!(
        target["version"].as_str().unwrap().starts_with("PostgreSQL "),
        "{target}"
    );
    assert!(
        rights(target).contains(&"CREATE on database \"postgres\"".to_string()),
        "{target}"
    );
    for side in [source, target] {
        for r in side["rights"].as_array().unwrap() {
            assert!(r["present"] == true || r["required"] == false, "{r}");
        }
    }

    let text = worker(&["check", "-f", &file, "--output", "text"], &password, "postgres");
    assert_eq!(text.code, Some(0));
    assert!(
        text.stdout.contains("source ok: SQL Server at 127.0.0.1:"),
        "{}",
        text.stdout
    );
    assert!(
        text.stdout
            .ends_with("check passed: both sides reached, every right the run needs is present\n"),
        "{}",
        text.stdout
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn check_names_a_missing_right_with_the_grant_to_run() {
    let (server, password) = seeded(1).await;
    // A database of its own, so that nothing another test left (`_mssqlpg`) changes what is
    // missing; and a role that may log in and nothing more: PUBLIC's CONNECT and TEMPORARY.
    let (database, role, schema) = ("mssqlpg_check", "mssqlpg_check_norights", "app");
    let admin = common::pg_connect().await;
    // One statement each: DROP and CREATE DATABASE refuse to run in a transaction.
    for sql in [
        format!("DROP DATABASE IF EXISTS {database}"),
        format!("DROP ROLE IF EXISTS {role}"),
        format!("CREATE ROLE {role} LOGIN NOSUPERUSER"),
        format!("CREATE DATABASE {database}"),
    ] {
        admin.batch_execute(&sql).await.unwrap();
    }
    let url = common::pg_url().replace("dbname=postgres", &format!("dbname={database}"));
    let (pg, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    // The target table exists already, owned by another role: dropping it is for its owner.
    pg.batch_execute(&format!(
        "CREATE SCHEMA {schema}; CREATE TABLE {schema}.\"Items\" (\"Id\" int PRIMARY KEY, \"Name\" text)"
    ))
    .await
    .unwrap();
    let pg_port = std::env::var("MSSQLPG_TEST_PG_PORT").unwrap();
    let file = write_file(
        "cli-check-missing",
        &yaml_into(
            "cli-check-missing",
            server.addr().port(),
            &pg_port,
            database,
            schema,
        ),
    );

    let check = worker(&["check", "-f", &file, "--output", "json"], &password, role);
    assert_eq!(check.code, Some(1), "{}", check.stdout);
    let report = &check.events()[0];
    assert_eq!(report["ok"], false);
    let target = &report["sides"][1];
    let missing: Vec<&serde_json::Value> = target["rights"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["present"] == false)
        .collect();
    let create = missing
        .iter()
        .find(|r| r["right"] == "CREATE on database \"mssqlpg_check\"")
        .unwrap_or_else(|| panic!("CREATE on the database not reported missing: {target}"));
    assert_eq!(
        create["fix"],
        format!("GRANT CONNECT, TEMPORARY, CREATE ON DATABASE \"mssqlpg_check\" TO \"{role}\";")
    );
    let on_schema = missing
        .iter()
        .find(|r| r["right"] == format!("USAGE and CREATE on schema \"{schema}\""))
        .unwrap_or_else(|| panic!("the target schema's rights not reported missing: {target}"));
    assert_eq!(
        on_schema["fix"],
        format!("GRANT USAGE, CREATE ON SCHEMA \"{schema}\" TO \"{role}\";")
    );
    assert_eq!(missing.len(), 2, "{target}");
    // Without USAGE on the schema the dry run cannot read the existing table: said, not failed on.
    assert!(
        report["notes"][0]
            .as_str()
            .unwrap()
            .starts_with("the dry run could not be made"),
        "{report}"
    );
    // The source's login has every right.
    assert_eq!(
        report["sides"][0]["rights"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["present"] == false && r["required"] == true)
            .count(),
        0
    );

    let text = worker(&["check", "-f", &file, "--output", "text"], &password, role);
    assert_eq!(text.code, Some(1));
    assert!(
        text.stdout.contains("target FAILED: PostgreSQL at 127.0.0.1:"),
        "{}",
        text.stdout
    );
    assert!(
        text.stdout
            .contains("MISSING CREATE on database \"mssqlpg_check\""),
        "{}",
        text.stdout
    );
    assert!(
        text.stdout.contains(&format!(
            "run: GRANT CONNECT, TEMPORARY, CREATE ON DATABASE \"mssqlpg_check\" TO \"{role}\";"
        )),
        "{}",
        text.stdout
    );
    assert!(
        text.stdout
            .ends_with("check FAILED: 2 missing (run the statements above as an administrator)\n"),
        "{}",
        text.stdout
    );

    // With the grants, the dry run reads the existing table: dropping it needs its owner's rights.
    pg.batch_execute(&format!(
        "GRANT CREATE ON DATABASE {database} TO {role}; GRANT USAGE, CREATE ON SCHEMA {schema} TO {role}"
    ))
    .await
    .unwrap();
    let check = worker(&["check", "-f", &file, "--output", "json"], &password, role);
    assert_eq!(check.code, Some(1), "{}", check.stdout);
    let report = &check.events()[0];
    let missing: Vec<&serde_json::Value> = report["sides"][1]["rights"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["present"] == false)
        .collect();
    assert_eq!(missing.len(), 1, "{report}");
    assert_eq!(
        missing[0]["right"],
        format!("ownership of existing table \"{schema}\".\"Items\" (owner postgres)")
    );
    assert_eq!(missing[0]["fix"], format!("GRANT \"postgres\" TO \"{role}\";"));

    // Granted, the check passes.
    pg.batch_execute(&format!("ALTER TABLE {schema}.\"Items\" OWNER TO {role}"))
        .await
        .unwrap();
    let again = worker(&["check", "-f", &file, "--output", "json"], &password, role);
    assert_eq!(again.code, Some(0), "{}", again.stdout);
    drop(pg);
    admin
        .batch_execute(&format!("DROP DATABASE {database} WITH (FORCE)"))
        .await
        .unwrap();
    admin.batch_execute(&format!("DROP ROLE {role}")).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn check_names_a_side_it_cannot_reach() {
    let (server, password) = seeded(1).await;
    // Nothing listens on port 1.
    let file = write_file(
        "cli-check-unreachable",
        &yaml("cli-check-unreachable", server.addr().port(), "1", "public"),
    );
    let check = worker(&["check", "-f", &file, "--output", "text"], &password, "postgres");
    assert_eq!(check.code, Some(1), "{}", check.stdout);
    assert!(
        check.stdout.contains("target FAILED: PostgreSQL at 127.0.0.1:1,"),
        "{}",
        check.stdout
    );
    assert!(
        check
            .stdout
            .contains("check FAILED: not checked: target (127.0.0.1:1)"),
        "{}",
        check.stdout
    );
    assert!(check.stdout.contains("source ok: SQL Server"), "{}", check.stdout);
}

#[test]
fn help_names_the_environment_and_examples() {
    let out = Command::new(env!("CARGO_BIN_EXE_mssql-pg-worker"))
        .arg("--help")
        .output()
        .unwrap();
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for needed in [
        "SQL Server and PostgreSQL, in either direction",
        "SOURCE_USERNAME, SOURCE_PASSWORD",
        "TARGET_USERNAME, TARGET_PASSWORD",
        "SOURCE_SSL_ROOT_CERT, TARGET_SSL_ROOT_CERT",
        "WORKER_METRICS_ADDR",
        "mssql-pg-worker check -f m.yaml",
        "mssql-pg-worker plan -f m.yaml",
        "mssql-pg-worker copy -f m.yaml --task",
        "mssql-pg-worker cutover -f m.yaml",
        "--output <OUTPUT>",
        "prepare",
    ] {
        assert!(help.contains(needed), "--help lacks {needed:?}:\n{help}");
    }
}

#[test]
fn plan_and_check_refuse_kubernetes_mode_as_a_usage_error() {
    for command in ["plan", "check"] {
        let out = Command::new(env!("CARGO_BIN_EXE_mssql-pg-worker"))
            .args([
                command,
                "--migration",
                "ns/m",
                "--output",
                "json",
                "--metrics-addr",
                "off",
            ])
            .output()
            .unwrap();
        // 2: the Job of an operator that expects the old writing `plan` fails at once.
        assert_eq!(out.status.code(), Some(2), "{command}");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.contains("-f FILE"), "{stdout}");
    }
}

/// Runs the worker with exactly these credentials.
fn worker_as(args: &[&str], env: &[(&str, &str)]) -> Outcome {
    let out = Command::new(env!("CARGO_BIN_EXE_mssql-pg-worker"))
        .args(args)
        .env_remove("SOURCE_PASSWORD")
        .env_remove("TARGET_PASSWORD")
        .envs(env.iter().copied())
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    Outcome {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
    }
}

/// The missing rights of `side` (0 source, 1 target): right -> statement.
fn missing(report: &serde_json::Value, side: usize) -> std::collections::BTreeMap<String, String> {
    report["sides"][side]["rights"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["present"] == false && r["required"] == true)
        .map(|r| {
            (
                r["right"].as_str().unwrap().to_string(),
                r["fix"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// PostgreSQL → SQL Server, online: a role that may only use the schema lacks SELECT on its
/// tables and sequences, the REPLICATION attribute, CREATE for the publication and ownership of
/// the published table; each is named with the statement that gives it.
#[tokio::test(flavor = "multi_thread")]
async fn check_lists_what_a_postgres_source_lacks_for_an_online_run() {
    let config = ServerConfig::default();
    let server = TestServer::start(config.clone()).unwrap();
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "cli_check_pg_source").await;
    let role = "mssqlpg_check_reader";
    for sql in [
        format!("DROP ROLE IF EXISTS {role}"),
        format!("CREATE ROLE {role} LOGIN NOSUPERUSER"),
        // An identity column (a sequence) and a text column (a TOAST table beside the table).
        format!(
            "CREATE TABLE \"{schema}\".items (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, body text)"
        ),
        format!("GRANT USAGE ON SCHEMA \"{schema}\" TO {role}"),
    ] {
        pg.batch_execute(&sql).await.unwrap();
    }
    let pg_port = std::env::var("MSSQLPG_TEST_PG_PORT").unwrap();
    let file = write_file(
        "cli-check-pg-source",
        &format!(
            "apiVersion: mssqlpg.dev/v1alpha1
kind: Migration
metadata: {{name: cli-check-pg-source, namespace: tests}}
spec:
  source:
    postgres: {{host: 127.0.0.1, port: {pg_port}, database: postgres, schema: {schema}, sslMode: disable}}
  target:
    mssql: {{host: 127.0.0.1, port: {}, database: master, schema: dbo, encryption: NotSupported}}
  online: {{enabled: true}}
  tables: {{exclude: [other]}}
",
            server.addr().port()
        ),
    );
    let env = [
        ("SOURCE_USERNAME", role),
        ("SOURCE_PASSWORD", ""),
        ("TARGET_USERNAME", "sa"),
        ("TARGET_PASSWORD", config.password.as_str()),
    ];
    let check = worker_as(&["check", "-f", &file, "--output", "json"], &env);
    assert_eq!(check.code, Some(1), "{}", check.stdout);
    let report = &check.events()[0];
    let lacking = missing(report, 0);
    let q = |s: &str| format!("\"{s}\"");
    let expected = [
        (
            format!("SELECT on the tables of schema {} (1 without: items)", q(&schema)),
            format!(
                "GRANT SELECT ON ALL TABLES IN SCHEMA {} TO {};",
                q(&schema),
                q(role)
            ),
        ),
        (
            format!(
                "SELECT on the sequences of schema {} (1 without: items_id_seq)",
                q(&schema)
            ),
            format!(
                "GRANT SELECT ON ALL SEQUENCES IN SCHEMA {} TO {};",
                q(&schema),
                q(role)
            ),
        ),
        (
            "the REPLICATION attribute".to_string(),
            format!("ALTER ROLE {} REPLICATION;", q(role)),
        ),
        (
            "CREATE on database \"postgres\"".to_string(),
            format!("GRANT CREATE ON DATABASE \"postgres\" TO {};", q(role)),
        ),
        (
            format!(
                "ownership of 1 table owned by postgres ({}.\"items\")",
                q(&schema)
            ),
            format!("GRANT \"postgres\" TO {};", q(role)),
        ),
    ];
    for (right, fix) in &expected {
        assert_eq!(lacking.get(right), Some(fix), "{right}: {report}");
    }
    assert_eq!(lacking.len(), expected.len(), "{report}");
    assert!(
        missing(report, 1).is_empty(),
        "the stand-in's login has every right: {report}"
    );

    // Once the dry run can read the source, a table the Migration excludes is not published, so
    // its owner is not asked for.
    pg.batch_execute(&format!(
        "CREATE TABLE \"{schema}\".other (id int PRIMARY KEY); \
         GRANT SELECT ON ALL TABLES IN SCHEMA \"{schema}\" TO {role}; \
         GRANT SELECT ON ALL SEQUENCES IN SCHEMA \"{schema}\" TO {role}"
    ))
    .await
    .unwrap();
    let check = worker_as(&["check", "-f", &file, "--output", "json"], &env);
    let report = &check.events()[0];
    assert!(report.get("notes").is_none(), "the dry run was made: {report}");
    let lacking = missing(report, 0);
    assert_eq!(
        lacking.keys().cloned().collect::<Vec<_>>(),
        [
            "CREATE on database \"postgres\"".to_string(),
            format!(
                "ownership of 1 table owned by postgres ({}.\"items\")",
                q(&schema)
            ),
            "the REPLICATION attribute".to_string(),
        ],
        "{report}"
    );

    pg.batch_execute(&format!("DROP SCHEMA \"{schema}\" CASCADE; DROP ROLE {role}"))
        .await
        .unwrap();
}

/// SQL Server → PostgreSQL, online: the Change Tracking a source lacks is listed statement by
/// statement; with `online.enableChangeTracking` the worker runs them, so only its rights to do
/// so are checked.
#[tokio::test(flavor = "multi_thread")]
async fn check_lists_the_change_tracking_a_sql_server_source_lacks() {
    let (server, password) = seeded(1).await;
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "cli_check_ct").await;
    let pg_port = std::env::var("MSSQLPG_TEST_PG_PORT").unwrap();
    let base = yaml("cli-check-ct", server.addr().port(), &pg_port, &schema);
    let file = write_file("cli-check-ct", &format!("{base}  online: {{enabled: true}}\n"));
    let check = worker(&["check", "-f", &file, "--output", "json"], &password, "postgres");
    assert_eq!(check.code, Some(1), "{}", check.stdout);
    let report = &check.events()[0];
    let lacking = missing(report, 0);
    assert_eq!(
        lacking
            .get("Change Tracking on table [dbo].[Items]")
            .map(String::as_str),
        Some("USE [master]; ALTER TABLE [dbo].[Items] ENABLE CHANGE_TRACKING;"),
        "{report}"
    );
    assert!(
        lacking["Change Tracking on the database"].contains("SET CHANGE_TRACKING = ON"),
        "{report}"
    );
    assert!(missing(report, 1).is_empty(), "{report}");

    let file = write_file(
        "cli-check-ct-enable",
        &format!("{base}  online: {{enabled: true, enableChangeTracking: true}}\n"),
    );
    let check = worker(&["check", "-f", &file, "--output", "json"], &password, "postgres");
    assert_eq!(check.code, Some(0), "{}", check.stdout);
    let events = check.events();
    let rights: Vec<&str> = events[0]["sides"][0]["rights"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["right"].as_str().unwrap())
        .collect();
    assert!(rights.contains(&"ALTER on database [master]"), "{rights:?}");
}
