//! The operator end to end with the REAL worker against a real control plane (tests/control-plane/up.sh), a
//! TDS test server standing in for SQL Server, and a real PostgreSQL:
//! - a Migration of four tables (one of 50,000 rows split into four key ranges, one with every common type,
//!   a parent/child pair with a foreign key) reaches Succeeded with exact data, status totals and metrics;
//! - every partition's first worker attempt crashes after two committed chunks (the worker's hidden test
//!   hook), the Job retries the pod, and the copy resumes from the checkpoint without losing or duplicating a
//!   row;
//! - the operator is killed while copy Jobs run, and a new one carries on;
//! - a Migration deleted while its copy Jobs run leaves no Jobs or tasks behind;
//! - wrong source credentials fail the Migration with a condition naming the login failure, never the
//!   password;
//! - the operator runs with an endpoint allowlist of the two test servers: a Migration naming another host or
//!   port fails Validated naming the field, and no Job is made.
//! - PostgreSQL -> SQL Server (the TDS test server as the target): a Migration suspended while copying starts
//!   no new copy Job, resumes when unsuspended, every first copy attempt crashes and resumes from the checkpoint
//!   stored in SQL Server, and SQL Server (read back through tiberius) holds exactly the source's rows.
//! - online, both directions, with a capture Deployment, a cutover and, with `cutover.reverse`, the target's
//!   changes streamed back across a killed capture pod and going back (`kubectl mssqlpg cutover --go-back`).
//!
//! Needs `MSSQLPG_K8S_DIR` (a running control plane), `MSSQLPG_TEST_PG_URL` (tests/scripts/postgres.sh) and the
//! worker binary where the node agent finds it (`cargo build --workspace --bins`; make test does all this):
//!   MSSQLPG_K8S_DIR=/tmp/k8s cargo test -p mssql-pg-operator --test real_worker
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mssql_pg_worker::mssql::connect::{Encryption, MssqlEndpoint, TdsClient};
use tds_testserver::{ServerConfig, TestServer};

const SOURCE_PASSWORD: &str = "Src-Passw0rd-e2e";
const WRONG_PASSWORD: &str = "Wr0ng-Passw0rd-xyz";
const BIG_ROWS: i64 = 50_000;

struct Cluster {
    dir: PathBuf,
    kubeconfig: PathBuf,
    ns: String,
}

impl Cluster {
    fn kubectl(&self, args: &[&str], stdin: Option<&str>) -> Result<String, String> {
        let mut cmd = Command::new("kubectl");
        cmd.args(args)
            .env("KUBECONFIG", &self.kubeconfig)
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().map_err(|e| format!("kubectl: {e}"))?;
        if let Some(input) = stdin {
            use std::io::Write;
            child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
        }
        let out = child.wait_with_output().unwrap();
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(format!(
                "kubectl {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    }

    fn must(&self, args: &[&str], stdin: Option<&str>) -> String {
        self.kubectl(args, stdin).unwrap_or_else(|e| panic!("{e}"))
    }

    fn apply(&self, yaml: &str) {
        self.must(&["apply", "-n", &self.ns, "-f", "-"], Some(yaml));
    }

    fn get(&self, kind: &str, name: &str, path: &str) -> String {
        self.kubectl(
            &[
                "get",
                kind,
                name,
                "-n",
                &self.ns,
                "-o",
                &format!("jsonpath={{{path}}}"),
            ],
            None,
        )
        .unwrap_or_default()
    }

    /// Waits for a terminal phase; returns it.
    fn wait_terminal(&self, name: &str, timeout: Duration) -> String {
        let started = Instant::now();
        loop {
            let phase = self.get("migration", name, ".status.phase");
            if phase == "Succeeded" || phase == "Failed" || started.elapsed() > timeout {
                return phase;
            }
            std::thread::sleep(Duration::from_secs(1));
        }
    }

    /// What to print when an assertion fails: objects, the operator log and the worker pods' logs.
    fn diagnostics(&self, operator_log: &Path) -> String {
        let mut s = self
            .kubectl(
                &["get", "mig,mtask,jobs,pods", "-n", &self.ns, "-o", "wide"],
                None,
            )
            .unwrap_or_else(|e| e);
        s.push_str("\n--- operator log (tail)\n");
        s.push_str(&tail(
            &std::fs::read_to_string(operator_log).unwrap_or_default(),
            40,
        ));
        s.push_str("\n--- operator stderr (tail)\n");
        s.push_str(&tail(
            &std::fs::read_to_string(operator_log.with_extension("err")).unwrap_or_default(),
            20,
        ));
        let pods = self.dir.join("node/pods");
        for entry in std::fs::read_dir(&pods).into_iter().flatten().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if !name.starts_with(&format!("{}_", self.ns)) {
                continue;
            }
            let log = std::fs::read_to_string(entry.path().join("worker.log")).unwrap_or_default();
            s.push_str(&format!("\n--- {name}\n{}", tail(&log, 15)));
        }
        s
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = self.kubectl(&["delete", "ns", &self.ns, "--wait=false"], None);
    }
}

struct Operator(Child);

impl Drop for Operator {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn tail(s: &str, lines: usize) -> String {
    let all: Vec<&str> = s.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// What both directions' tests stand on: a namespace of the control plane holding the CRDs, the worker's
/// documented RBAC, the test's Secrets and the operator's RBAC; a TDS test server in this process (the
/// source or the target); the test PostgreSQL; and a work directory for the operator's logs.
struct E2e {
    cluster: Cluster,
    /// Held for the test's length: the server stops when it is dropped.
    _server: TestServer,
    /// How the test itself reaches the TDS test server.
    mssql: MssqlEndpoint,
    pg_cfg: tokio_postgres::Config,
    pg: tokio_postgres::Client,
    work: PathBuf,
    operator_log: PathBuf,
    op_kubeconfig: PathBuf,
}

impl E2e {
    /// `name` makes the namespace (`e2e-NAME-PID`) and the work directory unique; the TDS test server's `sa`
    /// logs in with `mssql_password`; `secrets` gives the Secrets' YAML for PostgreSQL's user.
    async fn start(name: &str, mssql_password: &str, secrets: impl FnOnce(&str) -> String) -> E2e {
        Self::start_on(name, mssql_password, None, secrets).await
    }

    /// [`Self::start`], the TDS test server's database named `database` (else its default).
    async fn start_on(
        name: &str,
        mssql_password: &str,
        database: Option<&str>,
        secrets: impl FnOnce(&str) -> String,
    ) -> E2e {
        let dir = match std::env::var("MSSQLPG_K8S_DIR") {
            Ok(d) if !d.is_empty() => PathBuf::from(d),
            _ => panic!(
                "MSSQLPG_K8S_DIR is not set: this test needs a running control plane. Start one with \
                 `tests/control-plane/up.sh DIR` and run with MSSQLPG_K8S_DIR=DIR (make test does this)."
            ),
        };
        let pg_url = std::env::var("MSSQLPG_TEST_PG_URL").unwrap_or_else(|_| {
            panic!(
                "MSSQLPG_TEST_PG_URL is not set: eval \"$(tests/scripts/postgres.sh start)\" or run make test"
            )
        });
        let repo = Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .unwrap()
            .to_path_buf();
        let node_path = std::env::var("MSSQLPG_NODE_PATH")
            .map(PathBuf::from)
            .unwrap_or_else(|_| {
                // Where up.sh points the node's PATH when MSSQLPG_NODE_PATH is unset.
                std::env::var("CARGO_TARGET_DIR")
                    .map(PathBuf::from)
                    .unwrap_or_else(|_| repo.join("target"))
                    .join("debug")
            });
        assert!(
            node_path.join("mssql-pg-worker").exists(),
            "{} is missing: pods run the worker from there; build it first \
             (cargo build -p mssql-pg-worker, or make test's cargo build --workspace --bins)",
            node_path.join("mssql-pg-worker").display()
        );
        let cluster = Cluster {
            kubeconfig: dir.join("kubeconfig"),
            dir: dir.clone(),
            ns: format!("e2e-{name}-{}", std::process::id()),
        };
        assert!(
            cluster.kubeconfig.exists(),
            "{} is missing",
            cluster.kubeconfig.display()
        );

        let mut config = ServerConfig {
            password: mssql_password.into(),
            ..ServerConfig::default()
        };
        if let Some(db) = database {
            config.database = db.into();
        }
        let server = TestServer::start(config).unwrap();
        let mssql = MssqlEndpoint {
            host: "127.0.0.1".into(),
            port: server.addr().port(),
            database: database.unwrap_or("master").into(),
            user: "sa".into(),
            password: mssql_password.into(),
            encryption: Encryption::NotSupported,
            trust_server_certificate: false,
            ca_file: None,
            packet_size: 32767,
            timeouts: Default::default(),
        };
        let pg_cfg: tokio_postgres::Config = pg_url.parse().unwrap();
        let (pg, conn) = pg_cfg.connect(tokio_postgres::NoTls).await.unwrap();
        tokio::spawn(conn);

        cluster.must(
            &[
                "apply",
                "--server-side",
                "-f",
                &repo.join("crds/generated").display().to_string(),
            ],
            None,
        );
        cluster.must(
            &[
                "wait",
                "--for=condition=Established",
                "crd/migrations.mssqlpg.dev",
                "crd/migrationtasks.mssqlpg.dev",
                "--timeout=30s",
            ],
            None,
        );
        cluster.must(&["create", "ns", &cluster.ns], None);
        let worker_rbac = std::fs::read_to_string(repo.join("deploy/examples/worker-rbac.yaml"))
            .unwrap()
            .replace("namespace: migrations", &format!("namespace: {}", cluster.ns));
        cluster.apply(&worker_rbac);
        cluster.apply(&secrets(pg_cfg.get_user().unwrap_or("postgres")));
        cluster.must(
            &[
                "apply",
                "-f",
                &repo
                    .join("operator/tests/e2e/operator-rbac.yaml")
                    .display()
                    .to_string(),
            ],
            None,
        );
        // Starting pods is granted per namespace, as the chart does in each worker namespace.
        cluster.must(
            &[
                "create",
                "rolebinding",
                "mssql-pg-operator-e2e-jobs",
                "-n",
                &cluster.ns,
                "--clusterrole=mssql-pg-operator-e2e-jobs",
                "--user=tester",
            ],
            None,
        );
        let op_kubeconfig = if dir.join("kubeconfig-tester").exists() {
            dir.join("kubeconfig-tester")
        } else {
            cluster.kubeconfig.clone()
        };
        let work = std::env::temp_dir().join(format!("mssqlpg-{name}-worker-{}", std::process::id()));
        std::fs::create_dir_all(&work).unwrap();
        let operator_log = work.join("operator.log");
        E2e {
            cluster,
            _server: server,
            mssql,
            pg_cfg,
            pg,
            work,
            operator_log,
            op_kubeconfig,
        }
    }

    /// Starts an operator watching the namespace, appending to the logs (a restarted one continues them).
    /// Every copy's first attempt crashes after 2 committed chunks (the worker's hidden hook); progress is
    /// patched every second; worker pods share the host network here, so they do not serve /metrics. Workers
    /// may reach the TDS test server and PostgreSQL only (the endpoint allowlist).
    fn start_operator(&self, metrics_addr: &str) -> Operator {
        self.start_operator_reaching(metrics_addr, &[])
    }

    /// [`Self::start_operator`], the allowlist also holding `more_ports` (a test's own servers).
    fn start_operator_reaching(&self, metrics_addr: &str, more_ports: &[u16]) -> Operator {
        self.start_operator_with(metrics_addr, more_ports, None)
    }

    /// [`Self::start_operator_reaching`]; with `worker_metrics`, worker pods serve /metrics on that loopback
    /// port (pods share the host's network: the first to bind it serves, the others log it and go on).
    fn start_operator_with(
        &self,
        metrics_addr: &str,
        more_ports: &[u16],
        worker_metrics: Option<u16>,
    ) -> Operator {
        let (pg_host, pg_port, _) = pg_endpoint(&self.pg_cfg);
        let ports: Vec<String> = [self.mssql.port, pg_port]
            .iter()
            .chain(more_ports)
            .map(u16::to_string)
            .collect();
        let allowlist = format!(
            r#"[{{"hosts": ["{pg_host}"], "cidrs": ["127.0.0.0/8"], "ports": [{}]}}]"#,
            ports.join(", ")
        );
        let append = |path: &Path| {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .unwrap()
        };
        Operator(
            Command::new(env!("CARGO_BIN_EXE_mssql-pg-operator"))
                .env("KUBECONFIG", &self.op_kubeconfig)
                .env("METRICS_ADDR", metrics_addr)
                .env("WATCH_NAMESPACE", &self.cluster.ns)
                .env(
                    "MSSQLPG_WORKER_COMMAND",
                    format!(
                        "env MSSQLPG_FAIL_AFTER_CHUNKS=2 WORKER_PROGRESS_INTERVAL=1 WORKER_METRICS_ADDR={} \
                         mssql-pg-worker",
                        worker_metrics.map_or_else(|| "off".to_string(), |p| format!("127.0.0.1:{p}"))
                    ),
                )
                .env("MSSQLPG_WORKER_LOG", "info")
                .env("MSSQLPG_ALLOWED_ENDPOINTS", &allowlist)
                .env("MSSQLPG_REQUEUE_SECONDS", "2")
                .env("RUST_LOG", "info,mssql_pg_operator=debug")
                .stdout(append(&self.operator_log))
                .stderr(append(&self.operator_log.with_extension("err")))
                .spawn()
                .expect("starting the operator"),
        )
    }

    fn diag(&self) -> String {
        self.cluster.diagnostics(&self.operator_log)
    }

    /// Waits until Migration `name` is in `phase`.
    fn wait_phase(&self, name: &str, phase: &str, timeout: Duration) {
        let started = Instant::now();
        while self.cluster.get("migration", name, ".status.phase") != phase {
            assert!(
                started.elapsed() < timeout,
                "{name} never reached {phase}: {}",
                self.diag()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The termination messages of copy Job `job`'s pods: the crashed first attempt said why and a retry
    /// succeeded. Returned for further checks.
    fn assert_crashed_then_succeeded(&self, job: &str) -> String {
        let messages = self.cluster.must(
            &[
                "get",
                "pods",
                "-n",
                &self.cluster.ns,
                "-l",
                &format!("batch.kubernetes.io/job-name={job}"),
                "-o",
                "jsonpath={range .items[*]}{.status.containerStatuses[0].state.terminated.message}{\"\\n\"}{end}",
            ],
            None,
        );
        assert!(
            messages.contains("injected failure after 2 committed chunks")
                && messages.contains("\"ok\":true"),
            "{job}: {messages}"
        );
        messages
    }

    /// Removes the work directory (kept when a test fails, for its logs).
    fn finish(self) {
        let _ = std::fs::remove_dir_all(&self.work);
    }
}

/// Host, port and database of the test PostgreSQL, for a Migration's spec.
fn pg_endpoint(pg: &tokio_postgres::Config) -> (String, u16, String) {
    let host = match pg.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(h)) => h.clone(),
        _ => "127.0.0.1".to_string(),
    };
    let port = pg.get_ports().first().copied().unwrap_or(5432);
    let db = pg.get_dbname().unwrap_or("postgres").to_string();
    (host, port, db)
}

async fn exec(client: &mut TdsClient, sql: &str) {
    client
        .simple_query(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .into_results()
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
}

/// `Amount` of row `i` of dbo.Big, as text with four decimals.
fn amount(i: i64) -> String {
    format!("{}.{:04}", i * 3, i % 10_000)
}

async fn seed(source: &MssqlEndpoint) {
    let mut ms = source.connect().await.expect("connecting to the TDS test server");
    exec(
        &mut ms,
        "CREATE TABLE dbo.Big (Id int NOT NULL CONSTRAINT PK_Big PRIMARY KEY, Name nvarchar(40) NOT NULL, \
         Amount decimal(18,4) NOT NULL, Created datetime2(3) NOT NULL, Note varchar(20) NULL)",
    )
    .await;
    for batch in 0..BIG_ROWS / 1000 {
        let values: Vec<String> = (batch * 1000 + 1..=batch * 1000 + 1000)
            .map(|i| {
                format!(
                    "({i}, N'nämé-{i}', {}, '2024-01-01 {:02}:{:02}:{:02}', {})",
                    amount(i),
                    i / 3600,
                    i % 3600 / 60,
                    i % 60,
                    if i % 7 == 0 {
                        "NULL".to_string()
                    } else {
                        format!("'n{}'", i % 100)
                    }
                )
            })
            .collect();
        exec(
            &mut ms,
            &format!(
                "INSERT INTO dbo.Big (Id, Name, Amount, Created, Note) VALUES {}",
                values.join(", ")
            ),
        )
        .await;
    }
    exec(
        &mut ms,
        "CREATE TABLE dbo.AllTypes (Id int IDENTITY(1,1) NOT NULL PRIMARY KEY, CBit bit NULL, CTiny tinyint NULL, \
         CSmall smallint NULL, CInt int NULL, CBig bigint NULL, CDec decimal(38,10) NULL, CMoney money NULL, \
         CFloat float NULL, CReal real NULL, CDate date NULL, CTime time(7) NULL, CDateTime datetime NULL, \
         CDateTime2 datetime2(7) NULL, CDto datetimeoffset(7) NULL, CGuid uniqueidentifier NULL, CChar char(5) NULL, \
         CVarchar varchar(50) NULL, CNVarchar nvarchar(50) NULL, CNVarcharMax nvarchar(max) NULL, \
         CVarbinary varbinary(max) NULL, CXml xml NULL)",
    )
    .await;
    exec(
        &mut ms,
        "INSERT INTO dbo.AllTypes (CBit, CTiny, CSmall, CInt, CBig, CDec, CMoney, CFloat, CReal, CDate, CTime, \
         CDateTime, CDateTime2, CDto, CGuid, CChar, CVarchar, CNVarchar, CNVarcharMax, CVarbinary, CXml) VALUES \
         (1, 255, 32767, 2147483647, 9223372036854775807, CAST('9999999999999999999999999999.9999999999' AS \
         decimal(38,10)), CAST('922337203685477.5807' AS money), 1.7976931348623157E+308, 3.4028235E+38, \
         '9999-12-31', '23:59:59.9999999', '9999-12-31 23:59:59.997', '9999-12-31 23:59:59.9999999', \
         '2020-01-01 05:30:00.1234567 +05:30', '6F9619FF-8B86-D011-B42D-00C04FC964FF', 'ab', 'plain ascii', \
         N'héllo 😀', REPLICATE(N'x', 10000), 0xDEADBEEF, N'<a b=\"1\">x &amp; y</a>'), \
         (0, 0, -32768, -2147483648, -9223372036854775808, -0.0000000001, CAST('-922337203685477.5808' AS money), \
         -2.2250738585072014E-308, -1.175494E-38, '0001-01-01', '00:00:00', '1753-01-01 00:00:00', \
         '0001-01-01 00:00:00', '0001-01-01 00:00:00 +00:00', '00000000-0000-0000-0000-000000000000', '', '', N'', \
         N'', 0x, N'<r/>')",
    )
    .await;
    exec(&mut ms, "INSERT INTO dbo.AllTypes (CBit) VALUES (NULL)").await;
    exec(
        &mut ms,
        "CREATE TABLE dbo.Parent (Id int NOT NULL CONSTRAINT PK_Parent PRIMARY KEY, Code nvarchar(10) NOT NULL)",
    )
    .await;
    exec(
        &mut ms,
        "CREATE TABLE dbo.Child (Id bigint IDENTITY(10,5) NOT NULL CONSTRAINT PK_Child PRIMARY KEY, ParentId int \
         NOT NULL CONSTRAINT FK_Child_Parent REFERENCES dbo.Parent (Id), Qty int NOT NULL)",
    )
    .await;
    exec(
        &mut ms,
        "INSERT INTO dbo.Parent (Id, Code) VALUES (1, N'one'), (2, N'two')",
    )
    .await;
    exec(
        &mut ms,
        "INSERT INTO dbo.Child (ParentId, Qty) VALUES (1, 5), (1, 6), (2, 7)",
    )
    .await;
}

fn migration_yaml(
    name: &str,
    secret: &str,
    mssql_port: u16,
    pg: &tokio_postgres::Config,
    schema: &str,
    backoff: i32,
) -> String {
    let (host, port, db) = pg_endpoint(pg);
    format!(
        "apiVersion: mssqlpg.dev/v1alpha1
kind: Migration
metadata: {{name: {name}}}
spec:
  source: {{mssql: {{host: 127.0.0.1, port: {mssql_port}, database: master, credentialsSecret: {secret}, encryption: NotSupported}}}}
  target: {{postgres: {{host: '{host}', port: {port}, database: '{db}', schema: {schema}, credentialsSecret: dst-creds, sslMode: disable}}}}
  parallelism: 3
  chunkRows: 2000
  partitioning: {{minRowsToSplit: 10000, rowsPerPartition: 12500}}
  verify: checksum
  worker: {{backoffLimit: {backoff}}}
"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migration_with_the_real_worker() {
    let e2e = E2e::start("real", SOURCE_PASSWORD, |pg_user| {
        format!(
            "apiVersion: v1
kind: Secret
metadata: {{name: src-creds}}
stringData: {{username: sa, password: {SOURCE_PASSWORD}}}
---
apiVersion: v1
kind: Secret
metadata: {{name: src-bad}}
stringData: {{username: sa, password: {WRONG_PASSWORD}}}
---
apiVersion: v1
kind: Secret
metadata: {{name: dst-creds}}
stringData: {{username: {pg_user}, password: unused-with-trust}}
"
        )
    })
    .await;
    let (cluster, pg, pg_cfg) = (&e2e.cluster, &e2e.pg, &e2e.pg_cfg);
    // The source: the TDS test server, seeded through the worker's own client.
    seed(&e2e.mssql).await;
    let schema = format!("e2e_real_{}", std::process::id());
    pg.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
        .await
        .unwrap();
    pg.batch_execute(&format!(
        "DELETE FROM _mssqlpg.checkpoints WHERE migration LIKE '{}/%'; DELETE FROM _mssqlpg.runs WHERE migration LIKE '{}/%'",
        cluster.ns, cluster.ns
    ))
    .await
    .ok();

    let metrics_port = 20_000 + (std::process::id() % 20_000) as u16;
    let metrics_addr = format!("127.0.0.1:{metrics_port}");
    let operator = e2e.start_operator(&metrics_addr);

    let mssql_port = e2e.mssql.port;
    cluster.apply(&migration_yaml(
        "real",
        "src-creds",
        mssql_port,
        pg_cfg,
        &schema,
        3,
    ));
    // The operator is killed while copy Jobs run and a new one carries on from what the cluster holds.
    e2e.wait_phase("real", "Copying", Duration::from_secs(180));
    drop(operator);
    std::thread::sleep(Duration::from_secs(2));
    let _operator = e2e.start_operator(&metrics_addr);
    let phase = cluster.wait_terminal("real", Duration::from_secs(420));
    let diag = || e2e.diag();
    assert_eq!(phase, "Succeeded", "{}", diag());

    // Status totals: 4 tables, Big in 4 ranges + 3 whole tables.
    let status = |path: &str| cluster.get("migration", "real", path);
    let total_rows = BIG_ROWS + 3 + 2 + 3;
    assert_eq!(status(".status.progress"), "7/7", "{}", diag());
    assert_eq!(status(".status.tasksSucceeded"), "7");
    assert_eq!(status(".status.tasksFailed"), "0");
    assert_eq!(status(".status.rowsCopied"), total_rows.to_string(), "{}", diag());
    assert!(status(".status.bytesCopied").parse::<i64>().unwrap() > 50_000 * 20);
    assert!(status(".status.peakWorkerMemoryBytes").parse::<i64>().unwrap() > 0);
    assert_eq!(status(".status.plan.tablesTotal"), "4");
    assert_eq!(status(".status.plan.tasksTotal"), "7");
    for c in ["Validated", "Planned", "Copied", "Finalized", "Verified", "Ready"] {
        assert_eq!(
            status(&format!(".status.conditions[?(@.type==\"{c}\")].status")),
            "True",
            "condition {c}: {}",
            diag()
        );
    }

    // The partitions: each crashed once, was retried by its Job and resumed from its checkpoint.
    let big_tasks = cluster.must(
        &[
            "get",
            "mtask",
            "-n",
            &cluster.ns,
            "-l",
            "mssqlpg.dev/migration=real",
            "-o",
            "jsonpath={range .items[?(@.spec.table.name==\"Big\")]}{.metadata.name} {.spec.partition.label} \
             {.status.state} {.status.attempts} {.status.rowsCopied} {.status.checkpoint}{\"\\n\"}{end}",
        ],
        None,
    );
    let lines: Vec<&str> = big_tasks.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 4, "Big should be split into 4 tasks: {big_tasks}");
    let mut big_sum = 0;
    for line in &lines {
        let f: Vec<&str> = line.splitn(6, ' ').collect();
        assert_eq!(f.len(), 6, "{line}");
        assert_eq!(f[2], "Succeeded", "{line}");
        assert_eq!(f[3], "2", "one crash and one resumed retry: {line}");
        big_sum += f[4].parse::<i64>().unwrap();
        // Where the task resumed, without the key (status is readable with `view`).
        assert_eq!(f[5], format!("after row {}", f[4]), "{line}");
        e2e.assert_crashed_then_succeeded(f[0]);
    }
    assert_eq!(big_sum, BIG_ROWS, "{big_tasks}");

    // The data in PostgreSQL is exactly the source's.
    let row = pg
        .query_one(
            &format!(
                "SELECT count(*), count(DISTINCT \"Id\"), min(\"Id\")::bigint, max(\"Id\")::bigint, sum(\"Amount\")::text, \
                 count(*) FILTER (WHERE \"Created\" = timestamp '2024-01-01' + \"Id\" * interval '1 second'), \
                 count(*) FILTER (WHERE \"Name\" = 'nämé-' || \"Id\"), count(\"Note\") \
                 FROM {schema}.\"Big\""
            ),
            &[],
        )
        .await
        .unwrap();
    let expected_sum: i128 = (1..=BIG_ROWS)
        .map(|i| i128::from(i * 3) * 10_000 + i128::from(i % 10_000))
        .sum();
    assert_eq!(row.get::<_, i64>(0), BIG_ROWS, "rows");
    assert_eq!(row.get::<_, i64>(1), BIG_ROWS, "distinct ids: no duplicates");
    assert_eq!(row.get::<_, i64>(2), 1);
    assert_eq!(row.get::<_, i64>(3), BIG_ROWS);
    assert_eq!(
        row.get::<_, String>(4),
        format!("{}.{:04}", expected_sum / 10_000, expected_sum % 10_000),
        "sum of Amount"
    );
    assert_eq!(row.get::<_, i64>(5), BIG_ROWS, "Created values");
    assert_eq!(row.get::<_, i64>(6), BIG_ROWS, "Name values");
    assert_eq!(
        row.get::<_, i64>(7),
        BIG_ROWS - BIG_ROWS / 7,
        "non-NULL Note values"
    );
    let types = pg
        .query(
            &format!(
                "SELECT format('%s|%s|%s|%s|%s|%s|%s|%s|%s|%s', \"CDec\", \"CMoney\", \"CDto\", \"CGuid\", \"CChar\", \
                 \"CNVarchar\", length(\"CNVarcharMax\"), \"CVarbinary\", \"CXml\", \"CBig\") FROM {schema}.\"AllTypes\" \
                 ORDER BY \"Id\""
            ),
            &[],
        )
        .await
        .unwrap();
    let types: Vec<String> = types.iter().map(|r| r.get(0)).collect();
    assert_eq!(
        types,
        vec![
            "9999999999999999999999999999.9999999999|922337203685477.5807|2020-01-01 00:00:00.123456+00|\
             6f9619ff-8b86-d011-b42d-00c04fc964ff|ab   |héllo 😀|10000|\\xdeadbeef|<a b=\"1\">x &amp; y</a>|\
             9223372036854775807",
            "-0.0000000001|-922337203685477.5808|0001-01-01 00:00:00+00|00000000-0000-0000-0000-000000000000|     \
             ||0|\\x|<r/>|-9223372036854775808",
            "|||||||||",
        ],
        "AllTypes"
    );
    let fk: i64 = pg
        .query_one(
            "SELECT count(*) FROM pg_constraint WHERE contype = 'f' AND conrelid = to_regclass($1)",
            &[&format!("{schema}.\"Child\"")],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(fk, 1, "finalize created the foreign key");

    // The operator's metrics report the rows.
    let metrics = reqwest_free_get(metrics_port, "/metrics");
    let line = format!(
        "mssqlpg_rows_copied_total{{migration=\"real\",namespace=\"{}\",table=\"dbo.Big\"}} {BIG_ROWS}",
        cluster.ns
    );
    assert!(metrics.contains(&line), "{line} not in:\n{metrics}");

    // Wrong credentials: the plan Job fails, the Migration fails with the login error and not the password.
    cluster.apply(&migration_yaml(
        "badcreds",
        "src-bad",
        mssql_port,
        pg_cfg,
        &format!("{schema}_bad"),
        0,
    ));
    let phase = cluster.wait_terminal("badcreds", Duration::from_secs(180));
    assert_eq!(phase, "Failed", "{}", diag());
    let message = cluster.get(
        "migration",
        "badcreds",
        ".status.conditions[?(@.type==\"Failed\")].message",
    );
    assert!(
        message.contains("Login failed for user 'sa'") && message.contains("plan Job failed"),
        "{message}"
    );
    for text in [
        message.clone(),
        cluster.must(&["get", "mig,mtask", "-n", &cluster.ns, "-o", "yaml"], None),
        std::fs::read_to_string(&e2e.operator_log).unwrap_or_default(),
    ] {
        assert!(!text.contains(WRONG_PASSWORD), "the wrong password leaked");
        assert!(!text.contains(SOURCE_PASSWORD), "the source password leaked");
    }
    // kubectl mssqlpg: the summary names the failure; retry runs the failed plan Job again (the operator makes
    // a new one, which fails the same way).
    let (ok, summary) = plugin(&e2e, &["status", "badcreds"]);
    assert!(
        ok && summary.contains("badcreds: Failed") && summary.contains("Login failed for user 'sa'"),
        "{summary}"
    );
    assert!(!summary.contains(WRONG_PASSWORD), "the wrong password leaked");
    let first_plan = cluster.get("job", "badcreds-plan", ".metadata.uid");
    let (ok, out) = plugin(&e2e, &["retry", "badcreds"]);
    assert!(ok && out.contains("deleted failed Job badcreds-plan"), "{out}");
    let started = Instant::now();
    loop {
        let uid = cluster.get("job", "badcreds-plan", ".metadata.uid");
        if !uid.is_empty() && uid != first_plan {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no new plan Job after the retry: {}",
            diag()
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    // Deleting a Migration while its copy Jobs run removes its Jobs and tasks (the finalizer completes).
    cluster.apply(&migration_yaml(
        "deleteme",
        "src-creds",
        mssql_port,
        pg_cfg,
        &format!("{schema}_del"),
        3,
    ));
    e2e.wait_phase("deleteme", "Copying", Duration::from_secs(180));
    cluster
        .kubectl(
            &["delete", "mig", "deleteme", "-n", &cluster.ns, "--timeout=90s"],
            None,
        )
        .unwrap_or_else(|e| panic!("deleting a running Migration did not finish: {e}\n{}", diag()));
    let left = cluster.must(
        &[
            "get",
            "jobs,mtask",
            "-n",
            &cluster.ns,
            "-l",
            "mssqlpg.dev/migration=deleteme",
            "-o",
            "name",
        ],
        None,
    );
    assert!(left.trim().is_empty(), "left after deletion: {left}");

    // Data the target cannot hold (NUL in text): the copy Job fails at once through its pod
    // failure policy instead of starting 3 more pods that would fail on the same row, and the
    // Migration names the table, the row's key and the column.
    let mut ms = e2e.mssql.connect().await.unwrap();
    exec(
        &mut ms,
        "CREATE TABLE dbo.Nul (Id int NOT NULL PRIMARY KEY, Txt nvarchar(10) NULL)",
    )
    .await;
    exec(
        &mut ms,
        "INSERT INTO dbo.Nul (Id, Txt) VALUES (1, N'ok'), (2, N'a' + NCHAR(0) + N'b')",
    )
    .await;
    cluster.apply(
        &(migration_yaml(
            "nul",
            "src-creds",
            mssql_port,
            pg_cfg,
            &format!("{schema}_nul"),
            3,
        ) + "  tables: {include: [\"dbo.Nul\"]}\n"),
    );
    let phase = cluster.wait_terminal("nul", Duration::from_secs(180));
    assert_eq!(phase, "Failed", "{}", diag());
    let copy = |what: &str, path: &str| {
        cluster.must(
            &[
                "get",
                what,
                "-n",
                &cluster.ns,
                "-l",
                "mssqlpg.dev/migration=nul,mssqlpg.dev/step=copy",
                "-o",
                &format!("jsonpath={path}"),
            ],
            None,
        )
    };
    assert_eq!(
        copy(
            "jobs",
            "{.items[*].status.conditions[?(@.type==\"Failed\")].reason}"
        ),
        "PodFailurePolicy",
        "{}",
        diag()
    );
    assert_eq!(
        copy("pods", "{range .items[*]}{.metadata.name}{\"\\n\"}{end}")
            .lines()
            .count(),
        1,
        "one pod, no retries: {}",
        diag()
    );
    let message = cluster.get("migration", "nul", ".status.lastError");
    for part in [
        "dbo.Nul",
        "key (withheld: see the worker's log)",
        "column Txt",
        "NUL character",
        "failed on attempt 1",
    ] {
        assert!(message.contains(part), "{part:?} not in {message}");
    }
    // A row key is data: the status (readable by anyone who can list Migrations) withholds it.
    assert!(!message.contains("Id=2"), "row key in status: {message}");
    exec(&mut ms, "DROP TABLE dbo.Nul").await;

    pg.batch_execute(&format!(
        "DROP SCHEMA IF EXISTS {schema} CASCADE; DROP SCHEMA IF EXISTS {schema}_del CASCADE; \
         DROP SCHEMA IF EXISTS {schema}_nul CASCADE"
    ))
    .await
    .unwrap();
    e2e.finish();
}

/// `dryRun: true` in the cluster: the plan Job reads the source and the target's catalog, writes
/// the outcome (with each existing table's fate) to status.plan, creates no MigrationTasks and
/// leaves the target exactly as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_run_in_the_cluster_writes_nothing() {
    let e2e = E2e::start("dry", SOURCE_PASSWORD, |pg_user| {
        format!(
            "apiVersion: v1
kind: Secret
metadata: {{name: src-creds}}
stringData: {{username: sa, password: {SOURCE_PASSWORD}}}
---
apiVersion: v1
kind: Secret
metadata: {{name: dst-creds}}
stringData: {{username: {pg_user}, password: unused-with-trust}}
"
        )
    })
    .await;
    let (cluster, pg, pg_cfg) = (&e2e.cluster, &e2e.pg, &e2e.pg_cfg);
    seed(&e2e.mssql).await;
    let schema = format!("e2e_dry_{}", std::process::id());
    pg.batch_execute(&format!(
        "DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema}; \
         CREATE TABLE {schema}.\"Parent\" (keep int); INSERT INTO {schema}.\"Parent\" VALUES (42)"
    ))
    .await
    .unwrap();
    let catalog = || async {
        pg.query(
            "SELECT c.relname::text || ':' || coalesce(string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod), ',' \
             ORDER BY a.attnum), '') FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
             LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 \
             WHERE n.nspname = $1 GROUP BY c.relname, n.nspname ORDER BY 1",
            &[&schema],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get::<_, String>(0))
        .collect::<Vec<_>>()
    };
    let runs = |migration: String| async move {
        pg.query_one(
            "SELECT CASE WHEN to_regclass('_mssqlpg.runs') IS NULL THEN 0 ELSE \
             (SELECT count(*) FROM _mssqlpg.runs WHERE migration = $1) END",
            &[&migration],
        )
        .await
        .map(|r| r.get::<_, i64>(0))
        .unwrap_or(0)
    };
    let before = catalog().await;
    let _operator = e2e.start_operator("127.0.0.1:0");
    let yaml = migration_yaml("dry", "src-creds", e2e.mssql.port, pg_cfg, &schema, 1)
        .replace("  verify: checksum\n", "  verify: checksum\n  dryRun: true\n");
    cluster.apply(&yaml);
    let phase = cluster.wait_terminal("dry", Duration::from_secs(240));
    assert_eq!(phase, "Succeeded", "{}", e2e.diag());

    let status = |path: &str| cluster.get("migration", "dry", path);
    assert_eq!(status(".status.plan.tablesTotal"), "4", "{}", e2e.diag());
    let actions = status(".status.plan.tables[*].targetAction");
    assert!(
        actions.contains(&format!("{schema}.Parent: the existing table ("))
            && actions.contains("is dropped and recreated"),
        "{actions}"
    );
    assert!(actions.contains(&format!("{schema}.Big: created")), "{actions}");
    let tasks = cluster.must(&["get", "mtask", "-n", &cluster.ns, "-o", "name"], None);
    assert!(tasks.trim().is_empty(), "a dry run created tasks: {tasks}");
    assert_eq!(
        catalog().await,
        before,
        "the dry run changed the target's catalog"
    );
    let kept: i32 = pg
        .query_one(&format!("SELECT keep FROM {schema}.\"Parent\""), &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(kept, 42);
    assert_eq!(runs(format!("{}/dry", cluster.ns)).await, 0, "a run was recorded");

    // Endpoints outside the operator's allowlist: refused at validation, the field named, no Job made.
    let port = e2e.mssql.port;
    for (name, from, to, field) in [
        (
            "port-53",
            format!("port: {port}"),
            "port: 53".to_string(),
            "spec.source.mssql.port 53",
        ),
        (
            "elsewhere",
            "host: 127.0.0.1".to_string(),
            "host: someone.else".to_string(),
            "spec.source.mssql.host \"someone.else\"",
        ),
    ] {
        let yaml = migration_yaml(name, "src-creds", port, pg_cfg, &schema, 1).replacen(&from, &to, 1);
        assert!(yaml.contains(&to), "{yaml}");
        cluster.apply(&yaml);
        assert_eq!(
            cluster.wait_terminal(name, Duration::from_secs(60)),
            "Failed",
            "{}",
            e2e.diag()
        );
        let validated = |what: &str| {
            cluster.get(
                "migration",
                name,
                &format!(".status.conditions[?(@.type==\"Validated\")].{what}"),
            )
        };
        assert_eq!(validated("reason"), "EndpointNotAllowed");
        let message = validated("message");
        assert!(
            message.contains(&format!("{field} is not allowed"))
                && message.contains("worker.allowedEndpoints"),
            "{message}"
        );
        let jobs = cluster.must(
            &[
                "get",
                "jobs",
                "-n",
                &cluster.ns,
                "-l",
                &format!("mssqlpg.dev/migration={name}"),
                "-o",
                "name",
            ],
            None,
        );
        assert!(
            jobs.trim().is_empty(),
            "{name}: a refused Migration made Jobs: {jobs}"
        );
    }
    pg.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
        .await
        .unwrap();
    e2e.finish();
}

/// Microsoft's AdventureWorks, loaded by its own install script, migrated whole through the
/// operator (`schemas: ["*"]`): the plan Job reads every schema, a handful of copy Jobs take the 71
/// small tables (packed, several to a pod), finalize
/// and verify Jobs; every table's checksum matches and every row arrives. (The worker's own
/// AdventureWorks test checks the same both ways at the engine level, with constraint counts.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adventure_works_through_the_operator() {
    let e2e = E2e::start("aw", SOURCE_PASSWORD, |pg_user| {
        format!(
            "apiVersion: v1
kind: Secret
metadata: {{name: src-creds}}
stringData: {{username: sa, password: {SOURCE_PASSWORD}}}
---
apiVersion: v1
kind: Secret
metadata: {{name: dst-creds}}
stringData: {{username: {pg_user}, password: unused-with-trust}}
"
        )
    })
    .await;
    let (cluster, pg, pg_cfg) = (&e2e.cluster, &e2e.pg, &e2e.pg_cfg);
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/sample-databases/adventure-works-oltp")
        .canonicalize()
        .expect("the AdventureWorks sample in ../shared/sample-databases");
    let server = TestServer::start(ServerConfig {
        password: SOURCE_PASSWORD.into(),
        database: "AdventureWorks".into(),
        bulk_insert_dir: Some(dir.clone()),
        ..ServerConfig::default()
    })
    .unwrap();
    let source = MssqlEndpoint {
        port: server.addr().port(),
        database: "AdventureWorks".into(),
        ..e2e.mssql.clone()
    };
    let mut ms = source.connect().await.unwrap();
    let script = std::fs::read_to_string(dir.join("instawdb.sql")).unwrap();
    let path = format!("{}/", dir.display());
    for b in tds_testserver::engine::sqlcmd::batches(&script, &[("SqlSamplesSourceDataPath", &path)]) {
        // The batches SQL Server would refuse here too are asserted by the test server's own test.
        if let Ok(stream) = ms.simple_query(b.sql.as_str()).await {
            let _ = stream.into_results().await;
        }
    }
    let source_rows: i64 = {
        let tables = ms_rows(
            &mut ms,
            "SELECT s.name, t.name FROM sys.tables t JOIN sys.schemas s ON s.schema_id = t.schema_id",
        )
        .await;
        let mut total = 0;
        for t in &tables {
            let (s, n) = (t[0].clone().unwrap(), t[1].clone().unwrap());
            let rows = ms_rows(
                &mut ms,
                &format!("SELECT CAST(COUNT_BIG(*) AS nvarchar(20)) FROM [{s}].[{n}]"),
            )
            .await;
            total += rows[0][0].clone().unwrap().parse::<i64>().unwrap();
        }
        total
    };
    assert!(source_rows > 200_000, "{source_rows}");

    let db = format!("e2e_aw_{}", std::process::id());
    for sql in [
        format!("DROP DATABASE IF EXISTS {db}"),
        format!("CREATE DATABASE {db}"),
    ] {
        pg.batch_execute(&sql).await.unwrap();
    }
    let _operator = e2e.start_operator_reaching("127.0.0.1:0", &[source.port]);
    let (host, port, _) = pg_endpoint(pg_cfg);
    cluster.apply(&format!(
        "apiVersion: mssqlpg.dev/v1alpha1
kind: Migration
metadata: {{name: aw}}
spec:
  source: {{mssql: {{host: 127.0.0.1, port: {}, database: AdventureWorks, schemas: ['*'], credentialsSecret: src-creds, encryption: NotSupported}}}}
  target: {{postgres: {{host: '{host}', port: {port}, database: '{db}', credentialsSecret: dst-creds, sslMode: disable}}}}
  parallelism: 4
  verify: checksum
  worker: {{backoffLimit: 3}}
",
        source.port
    ));
    let phase = cluster.wait_terminal("aw", Duration::from_secs(900));
    assert_eq!(phase, "Succeeded", "{}", e2e.diag());
    let status = |path: &str| cluster.get("migration", "aw", path);
    assert_eq!(status(".status.tasksFailed"), "0", "{}", e2e.diag());
    assert_eq!(
        status(".status.rowsCopied"),
        source_rows.to_string(),
        "{}",
        e2e.diag()
    );
    assert_eq!(
        status(".status.conditions[?(@.type==\"Verified\")].status"),
        "True",
        "{}",
        e2e.diag()
    );
    // Small tables share copy Jobs: a pod start and fresh connections per table cost more than
    // their copy.
    let copy_jobs = cluster
        .must(
            &[
                "get",
                "jobs",
                "-n",
                &cluster.ns,
                "-l",
                "mssqlpg.dev/migration=aw,mssqlpg.dev/step=copy",
                "-o",
                "name",
            ],
            None,
        )
        .lines()
        .filter(|l| !l.trim().is_empty())
        .count();
    let tasks: usize = status(".status.tasksTotal").parse().unwrap();
    eprintln!("adventure_works_through_the_operator: {tasks} tasks, {copy_jobs} copy Jobs");
    assert!(
        copy_jobs <= tasks / 4,
        "{copy_jobs} copy Jobs for {tasks} tasks: {}",
        e2e.diag()
    );
    let schemas = status(".status.plan.tables[*].target");
    for schema in [
        "HumanResources.",
        "Person.",
        "Production.",
        "Purchasing.",
        "Sales.",
        "public.",
    ] {
        assert!(schemas.contains(schema), "{schema} missing: {schemas}");
    }
    drop(ms);
    pg.batch_execute(&format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)"))
        .await
        .unwrap();
    e2e.finish();
}

/// Three small tables share one copy Job. Its first pod's copy of the table of three chunks crashes after
/// two (the worker's hidden hook); the pod still copies the other two, then exits non-zero. The Job's
/// retry skips the two finished tasks and resumes the third from its checkpoint: every row once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_packed_copy_job_retry_skips_finished_tasks_and_resumes_the_crashed_one() {
    const MEDIUM_ROWS: i64 = 5_000;
    let e2e = E2e::start("pack", SOURCE_PASSWORD, |pg_user| {
        format!(
            "apiVersion: v1
kind: Secret
metadata: {{name: src-creds}}
stringData: {{username: sa, password: {SOURCE_PASSWORD}}}
---
apiVersion: v1
kind: Secret
metadata: {{name: dst-creds}}
stringData: {{username: {pg_user}, password: unused-with-trust}}
"
        )
    })
    .await;
    let (cluster, pg, pg_cfg) = (&e2e.cluster, &e2e.pg, &e2e.pg_cfg);
    let mut ms = e2e.mssql.connect().await.unwrap();
    exec(
        &mut ms,
        "CREATE TABLE dbo.Medium (Id int NOT NULL PRIMARY KEY, Name nvarchar(20) NOT NULL)",
    )
    .await;
    for batch in 0..MEDIUM_ROWS / 1000 {
        let values: Vec<String> = (batch * 1000 + 1..=batch * 1000 + 1000)
            .map(|i| format!("({i}, N'm{i}')"))
            .collect();
        exec(
            &mut ms,
            &format!("INSERT INTO dbo.Medium (Id, Name) VALUES {}", values.join(", ")),
        )
        .await;
    }
    exec(&mut ms, "CREATE TABLE dbo.Two (Id int NOT NULL PRIMARY KEY)").await;
    exec(&mut ms, "INSERT INTO dbo.Two (Id) VALUES (1), (2)").await;
    exec(&mut ms, "CREATE TABLE dbo.Three (Id int NOT NULL PRIMARY KEY)").await;
    exec(&mut ms, "INSERT INTO dbo.Three (Id) VALUES (1), (2), (3)").await;
    let schema = format!("e2e_pack_{}", std::process::id());
    pg.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
        .await
        .unwrap();
    let _operator = e2e.start_operator("127.0.0.1:0");
    let (host, port, db) = pg_endpoint(pg_cfg);
    cluster.apply(&format!(
        "apiVersion: mssqlpg.dev/v1alpha1
kind: Migration
metadata: {{name: pack}}
spec:
  source: {{mssql: {{host: 127.0.0.1, port: {}, database: master, credentialsSecret: src-creds, encryption: NotSupported}}}}
  target: {{postgres: {{host: '{host}', port: {port}, database: '{db}', schema: {schema}, credentialsSecret: dst-creds, sslMode: disable}}}}
  parallelism: 2
  chunkRows: 2000
  verify: count
  worker: {{backoffLimit: 2}}
",
        e2e.mssql.port
    ));
    let phase = cluster.wait_terminal("pack", Duration::from_secs(420));
    assert_eq!(phase, "Succeeded", "{}", e2e.diag());
    let jobs = cluster.must(
        &[
            "get",
            "jobs",
            "-n",
            &cluster.ns,
            "-l",
            "mssqlpg.dev/migration=pack,mssqlpg.dev/step=copy",
            "-o",
            "jsonpath={range .items[*]}{.metadata.name} {.metadata.annotations.mssqlpg\\.dev/tasks}{\"\\n\"}{end}",
        ],
        None,
    );
    let jobs: Vec<&str> = jobs.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(jobs.len(), 1, "three small tables, one copy Job: {jobs:?}");
    let tasks = cluster.must(
        &[
            "get",
            "mtask",
            "-n",
            &cluster.ns,
            "-l",
            "mssqlpg.dev/migration=pack",
            "-o",
            "jsonpath={range .items[*]}{.spec.table.name} {.status.state} {.status.attempts} \
             {.status.rowsCopied}{\"\\n\"}{end}",
        ],
        None,
    );
    let mut lines: Vec<&str> = tasks.lines().filter(|l| !l.trim().is_empty()).collect();
    lines.sort();
    assert_eq!(
        lines,
        [
            format!("Medium Succeeded 2 {MEDIUM_ROWS}"),
            "Three Succeeded 1 3".to_string(),
            "Two Succeeded 1 2".to_string(),
        ],
        "the retry copied only the crashed task: {}",
        e2e.diag()
    );
    let job = jobs[0].split_whitespace().next().unwrap();
    let messages = e2e.assert_crashed_then_succeeded(job);
    assert!(messages.contains("1 of 3 tasks failed"), "{messages}");
    assert!(messages.contains("\"resumed\":true"), "{messages}");
    let row = pg
        .query_one(
            &format!("SELECT count(*), count(DISTINCT \"Id\") FROM {schema}.\"Medium\""),
            &[],
        )
        .await
        .unwrap();
    let (rows, distinct): (i64, i64) = (row.get(0), row.get(1));
    assert_eq!((rows, distinct), (MEDIUM_ROWS, MEDIUM_ROWS), "every row once");
    pg.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
        .await
        .unwrap();
    e2e.finish();
}

/// A plain HTTP/1.0 GET on 127.0.0.1 (no HTTP client dependency for one request).
fn reqwest_free_get(port: u16, path: &str) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).expect("operator metrics port");
    write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").unwrap();
    let mut body = String::new();
    stream.read_to_string(&mut body).unwrap();
    body
}

const TARGET_PASSWORD: &str = "Tgt-Passw0rd-rev";
const REV_BIG_ROWS: i64 = 30_000;

/// Every column of every row of `sql`'s first result set, as text (the query casts to nvarchar).
async fn ms_rows(client: &mut TdsClient, sql: &str) -> Vec<Vec<Option<String>>> {
    let rows = client
        .simple_query(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .into_first_result()
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    rows.iter()
        .map(|r| {
            (0..r.len())
                .map(|i| {
                    r.try_get::<&str, usize>(i)
                        .unwrap_or_else(|e| panic!("{sql}: column {i}: {e}"))
                        .map(str::to_string)
                })
                .collect()
        })
        .collect()
}

/// The PostgreSQL source of the reverse test: a table split into three key ranges, one with common types,
/// a parent/child pair with a foreign key.
async fn seed_pg(pg: &tokio_postgres::Client, schema: &str) {
    pg.batch_execute(&format!(
        "DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema};
         CREATE TABLE {schema}.big (id int PRIMARY KEY, name text NOT NULL, amount numeric(18,4) NOT NULL,
           created timestamp(3) NOT NULL, note varchar(20));
         INSERT INTO {schema}.big SELECT g, 'nämé-' || g, (g * 3)::numeric + (g % 10000)::numeric / 10000,
           timestamp '2024-01-01' + g * interval '1 second', CASE WHEN g % 7 = 0 THEN NULL ELSE 'n' || (g % 100) END
           FROM generate_series(1, {REV_BIG_ROWS}) g;
         CREATE TABLE {schema}.all_types (id int GENERATED ALWAYS AS IDENTITY PRIMARY KEY, c_bool boolean,
           c_small smallint, c_int int, c_big bigint, c_num numeric(38,10), c_float float8, c_date date,
           c_ts timestamp(6), c_uuid uuid, c_varchar varchar(50), c_text text, c_bytea bytea);
         INSERT INTO {schema}.all_types (c_bool, c_small, c_int, c_big, c_num, c_float, c_date, c_ts, c_uuid,
           c_varchar, c_text, c_bytea) VALUES
           (true, 32767, 2147483647, 9223372036854775807, 9999999999999999999999999999.9999999999, 1.5,
            '9999-12-31', '2024-02-29 23:59:59.123456', '6f9619ff-8b86-d011-b42d-00c04fc964ff', 'plain ascii',
            'héllo 😀 ' || repeat('x', 10000), '\\xdeadbeef'),
           (false, -32768, -2147483648, -9223372036854775808, -0.0000000001, -2.25, '0001-01-01',
            '0001-01-01 00:00:00', '00000000-0000-0000-0000-000000000000', '', '', '\\x'),
           (NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
         CREATE TABLE {schema}.parent (id int PRIMARY KEY, code text NOT NULL);
         CREATE TABLE {schema}.child (id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
           parent_id int NOT NULL REFERENCES {schema}.parent (id), qty int NOT NULL);
         INSERT INTO {schema}.parent VALUES (1, 'one'), (2, 'two');
         INSERT INTO {schema}.child (parent_id, qty) VALUES (1, 5), (1, 6), (2, 7);
         ANALYZE {schema}.big; ANALYZE {schema}.all_types; ANALYZE {schema}.parent; ANALYZE {schema}.child;"
    ))
    .await
    .unwrap();
}

fn reverse_migration_yaml(name: &str, pg: &tokio_postgres::Config, schema: &str, mssql_port: u16) -> String {
    let (host, port, db) = pg_endpoint(pg);
    format!(
        "apiVersion: mssqlpg.dev/v1alpha1
kind: Migration
metadata: {{name: {name}}}
spec:
  source: {{postgres: {{host: '{host}', port: {port}, database: '{db}', schema: {schema}, credentialsSecret: pg-creds, sslMode: disable}}}}
  target: {{mssql: {{host: 127.0.0.1, port: {mssql_port}, database: master, schema: dbo, credentialsSecret: ms-creds, encryption: NotSupported}}}}
  parallelism: 2
  chunkRows: 2000
  partitioning: {{minRowsToSplit: 10000, rowsPerPartition: 10000}}
  verify: checksum
  worker: {{backoffLimit: 3}}
"
    )
}

/// PostgreSQL -> SQL Server through the operator and the real worker, suspended while copying and resumed:
/// no copy Job starts while suspended, every first copy attempt crashes after two chunks and resumes from the
/// checkpoint stored in SQL Server, and the SQL Server side ends up with exactly the source's rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reverse_migration_with_the_real_worker() {
    let e2e = E2e::start("rev", TARGET_PASSWORD, |pg_user| {
        format!(
            "apiVersion: v1
kind: Secret
metadata: {{name: pg-creds}}
stringData: {{username: {pg_user}, password: unused-with-trust}}
---
apiVersion: v1
kind: Secret
metadata: {{name: ms-creds}}
stringData: {{username: sa, password: {TARGET_PASSWORD}}}
"
        )
    })
    .await;
    let (cluster, pg) = (&e2e.cluster, &e2e.pg);
    // The source: PostgreSQL; the target: the TDS test server.
    let schema = format!("e2e_rev_{}", std::process::id());
    seed_pg(pg, &schema).await;
    let _operator = e2e.start_operator("127.0.0.1:0");
    let diag = || e2e.diag();

    cluster.apply(&reverse_migration_yaml(
        "rev",
        &e2e.pg_cfg,
        &schema,
        e2e.mssql.port,
    ));
    let status = |path: &str| cluster.get("migration", "rev", path);
    e2e.wait_phase("rev", "Copying", Duration::from_secs(180));

    // Suspend while copying: the running copies finish, no new copy Job starts.
    cluster.must(
        &[
            "patch",
            "mig",
            "rev",
            "-n",
            &cluster.ns,
            "--type=merge",
            "-p",
            r#"{"spec":{"suspend":true}}"#,
        ],
        None,
    );
    e2e.wait_phase("rev", "Suspended", Duration::from_secs(60));
    let copy_jobs = || {
        cluster
            .must(
                &[
                    "get",
                    "jobs",
                    "-n",
                    &cluster.ns,
                    "-l",
                    "mssqlpg.dev/migration=rev,mssqlpg.dev/step=copy",
                    "-o",
                    "name",
                ],
                None,
            )
            .lines()
            .filter(|l| !l.trim().is_empty())
            .count()
    };
    let jobs_when_suspended = copy_jobs();
    assert!(jobs_when_suspended <= 2, "parallelism is 2: {}", diag());
    let task_states = || {
        cluster.must(
            &[
                "get",
                "mtask",
                "-n",
                &cluster.ns,
                "-l",
                "mssqlpg.dev/migration=rev",
                "-o",
                "jsonpath={range .items[*]}{.status.state}{\"\\n\"}{end}",
            ],
            None,
        )
    };
    // Wait for the copies that were running to end, then a few reconciles more.
    let started = Instant::now();
    while task_states().lines().any(|s| s == "Running") {
        assert!(
            started.elapsed() < Duration::from_secs(180),
            "running copies never ended while suspended: {}",
            diag()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    std::thread::sleep(Duration::from_secs(6));
    assert_eq!(
        copy_jobs(),
        jobs_when_suspended,
        "a copy Job started while suspended: {}",
        diag()
    );
    assert_eq!(status(".status.phase"), "Suspended", "{}", diag());
    let succeeded: i64 = status(".status.tasksSucceeded").parse().unwrap_or(0);
    assert!(
        succeeded < 6,
        "everything was copied before the suspension took effect: {}",
        diag()
    );

    // Resume: the rest is copied, finalized and verified.
    cluster.must(
        &[
            "patch",
            "mig",
            "rev",
            "-n",
            &cluster.ns,
            "--type=merge",
            "-p",
            r#"{"spec":{"suspend":false}}"#,
        ],
        None,
    );
    let phase = cluster.wait_terminal("rev", Duration::from_secs(420));
    assert_eq!(phase, "Succeeded", "{}", diag());

    // Status totals: 4 tables, big in 3 ranges + 3 whole tables.
    let total_rows = REV_BIG_ROWS + 3 + 2 + 3;
    assert_eq!(status(".status.progress"), "6/6", "{}", diag());
    assert_eq!(status(".status.tasksSucceeded"), "6");
    assert_eq!(status(".status.tasksFailed"), "0");
    assert_eq!(status(".status.rowsCopied"), total_rows.to_string(), "{}", diag());
    assert_eq!(status(".status.plan.tablesTotal"), "4");
    assert_eq!(status(".status.plan.tasksTotal"), "6");
    assert!(
        status(".status.bytesCopied").parse::<i64>().unwrap() > REV_BIG_ROWS * 20,
        "{}",
        diag()
    );
    assert_eq!(
        copy_jobs(),
        4,
        "a copy Job per partition of big, one for the three small tables together: {}",
        diag()
    );
    for c in ["Validated", "Planned", "Copied", "Finalized", "Verified", "Ready"] {
        assert_eq!(
            status(&format!(".status.conditions[?(@.type==\"{c}\")].status")),
            "True",
            "condition {c}: {}",
            diag()
        );
    }
    // The partitions of big: each crashed once after two chunks and resumed from its SQL Server checkpoint.
    let big_tasks = cluster.must(
        &[
            "get",
            "mtask",
            "-n",
            &cluster.ns,
            "-l",
            "mssqlpg.dev/migration=rev",
            "-o",
            "jsonpath={range .items[?(@.spec.table.name==\"big\")]}{.metadata.name} {.status.state} \
             {.status.attempts} {.status.rowsCopied} {.spec.columns[0].targetType} {.status.checkpoint}{\"\\n\"}{end}",
        ],
        None,
    );
    let lines: Vec<&str> = big_tasks.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 3, "big should be split into 3 tasks: {big_tasks}");
    let mut big_sum = 0;
    for line in &lines {
        let f: Vec<&str> = line.splitn(6, ' ').collect();
        assert_eq!(f.len(), 6, "{line}");
        assert_eq!(f[1], "Succeeded", "{line}");
        assert_eq!(f[2], "2", "one crash and one resumed retry: {line}");
        big_sum += f[3].parse::<i64>().unwrap();
        assert_eq!(f[4], "int", "{line}");
        assert_eq!(
            f[5],
            format!("after row {}", f[3]),
            "the checkpoint names no key: {line}"
        );
        // The crashed attempt's pod said why in its termination message; the retry resumed.
        let messages = e2e.assert_crashed_then_succeeded(f[0]);
        assert!(messages.contains("\"resumed\":true"), "{}: {messages}", f[0]);
    }
    assert_eq!(big_sum, REV_BIG_ROWS, "{big_tasks}");
    // The task spec shows the type mapping (PostgreSQL's spelling -> SQL Server's).
    let mapping = cluster.must(
        &[
            "get",
            "mtask",
            "-n",
            &cluster.ns,
            "-l",
            "mssqlpg.dev/migration=rev",
            "-o",
            "jsonpath={range .items[?(@.spec.table.name==\"all_types\")]}{range .spec.columns[*]}{.name}:{.sourceType}:{.targetType} {end}{end}",
        ],
        None,
    );
    // Verify recorded the checksum-verified count of the whole-table tasks.
    let verified = cluster.must(
        &[
            "get",
            "mtask",
            "-n",
            &cluster.ns,
            "-l",
            "mssqlpg.dev/migration=rev",
            "-o",
            "jsonpath={range .items[?(@.spec.partition.count==1)]}{.spec.table.name}={.status.rowsVerified}:{.status.checksum} {end}",
        ],
        None,
    );
    for (table, rows) in [("all_types", 3), ("parent", 2), ("child", 3)] {
        let prefix = format!("{table}={rows}:");
        assert!(
            verified
                .split_whitespace()
                .any(|f| f.starts_with(&prefix) && f.len() > prefix.len()),
            "{prefix}<checksum> not in {verified}"
        );
    }
    for expected in [
        "c_num:numeric(38,10):decimal(38,10)",
        "c_uuid:uuid:uniqueidentifier",
        "c_bool:boolean:bit",
        "c_ts:timestamp(6) without time zone:datetime2(6)",
        "c_text:text:nvarchar(max)",
    ] {
        assert!(mapping.contains(expected), "{expected} not in {mapping}");
    }

    // SQL Server holds exactly the source's rows.
    let mut ms = e2e
        .mssql
        .connect()
        .await
        .expect("connecting to the TDS test server");
    let big = ms_rows(
        &mut ms,
        "SELECT CAST(COUNT(*) AS nvarchar(20)), CAST(COUNT(DISTINCT id) AS nvarchar(20)), \
         CAST(MIN(id) AS nvarchar(20)), CAST(MAX(id) AS nvarchar(20)), CAST(SUM(amount) AS nvarchar(40)), \
         CAST(SUM(CASE WHEN name = N'nämé-' + CAST(id AS nvarchar(10)) THEN 1 ELSE 0 END) AS nvarchar(20)), \
         CAST(COUNT(note) AS nvarchar(20)) FROM dbo.big",
    )
    .await;
    let expected_sum: i128 = (1..=REV_BIG_ROWS)
        .map(|i| i128::from(i * 3) * 10_000 + i128::from(i % 10_000))
        .sum();
    let some = |s: String| Some(s);
    assert_eq!(
        big,
        vec![vec![
            some(REV_BIG_ROWS.to_string()),
            some(REV_BIG_ROWS.to_string()),
            some("1".into()),
            some(REV_BIG_ROWS.to_string()),
            some(format!("{}.{:04}", expected_sum / 10_000, expected_sum % 10_000)),
            some(REV_BIG_ROWS.to_string()),
            some((REV_BIG_ROWS - REV_BIG_ROWS / 7).to_string()),
        ]],
        "dbo.big"
    );
    let created = ms_rows(
        &mut ms,
        "SELECT CONVERT(nvarchar(30), created, 121) FROM dbo.big WHERE id IN (1, 29999) ORDER BY id",
    )
    .await;
    assert_eq!(
        created,
        vec![
            vec![some("2024-01-01 00:00:01.000".into())],
            vec![some("2024-01-01 08:19:59.000".into())]
        ],
        "created"
    );
    let types = ms_rows(
        &mut ms,
        "SELECT CAST(c_bool AS nvarchar(5)), CAST(c_small AS nvarchar(10)), CAST(c_int AS nvarchar(20)), \
         CAST(c_big AS nvarchar(30)), CAST(c_num AS nvarchar(60)), CAST(c_float AS nvarchar(30)), \
         CONVERT(nvarchar(10), c_date, 23), CONVERT(nvarchar(30), c_ts, 121), CAST(c_uuid AS nvarchar(36)), \
         c_varchar, CAST(LEN(c_text) AS nvarchar(10)), LEFT(c_text, 8), CONVERT(nvarchar(20), c_bytea, 1) \
         FROM dbo.all_types ORDER BY id",
    )
    .await;
    let row = |v: &[&str]| -> Vec<Option<String>> {
        v.iter().map(|s| (*s != "NULL").then(|| s.to_string())).collect()
    };
    assert_eq!(
        types,
        vec![
            row(&[
                "1",
                "32767",
                "2147483647",
                "9223372036854775807",
                "9999999999999999999999999999.9999999999",
                "1.5",
                "9999-12-31",
                "2024-02-29 23:59:59.123456",
                "6F9619FF-8B86-D011-B42D-00C04FC964FF",
                "plain ascii",
                "10008",
                "héllo 😀 ",
                "0xDEADBEEF",
            ]),
            row(&[
                "0",
                "-32768",
                "-2147483648",
                "-9223372036854775808",
                "-0.0000000001",
                "-2.25",
                "0001-01-01",
                "0001-01-01 00:00:00.000000",
                "00000000-0000-0000-0000-000000000000",
                "",
                "0",
                "",
                "0x",
            ]),
            row(&["NULL"; 13]),
        ],
        "dbo.all_types"
    );
    let family = ms_rows(
        &mut ms,
        "SELECT CAST(c.id AS nvarchar(20)) + N':' + p.code + N':' + CAST(c.qty AS nvarchar(10)) \
         FROM dbo.child c JOIN dbo.parent p ON p.id = c.parent_id ORDER BY c.id",
    )
    .await;
    assert_eq!(
        family,
        vec![
            vec![some("1:one:5".into())],
            vec![some("2:one:6".into())],
            vec![some("3:two:7".into())]
        ]
    );
    let fks = ms_rows(
        &mut ms,
        "SELECT CAST(COUNT(*) AS nvarchar(10)) FROM sys.foreign_keys WHERE parent_object_id = OBJECT_ID(N'dbo.child')",
    )
    .await;
    assert_eq!(
        fks,
        vec![vec![some("1".into())]],
        "finalize created the foreign key"
    );

    pg.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
        .await
        .unwrap();
    e2e.finish();
}

const ONLINE_PASSWORD: &str = "Tgt-Passw0rd-onl";
const ONLINE_ROWS: i64 = 20_000;

/// The online test's source: `acct` (split into two key ranges) and `pair` (a composite key).
async fn seed_online(pg: &tokio_postgres::Client, schema: &str) {
    pg.batch_execute(&format!(
        "DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema};
         CREATE TABLE {schema}.acct (id bigint PRIMARY KEY, name text NOT NULL, amount numeric(12,2), note text);
         INSERT INTO {schema}.acct SELECT g, 'nämé ' || g, g * 1.25, CASE WHEN g % 5 = 0 THEN NULL ELSE 'n' || g END
           FROM generate_series(1, {ONLINE_ROWS}) g;
         CREATE TABLE {schema}.pair (a int, b text, v text, PRIMARY KEY (a, b));
         INSERT INTO {schema}.pair SELECT g % 50, 'k' || g, 'v' || g FROM generate_series(1, 500) g;
         ANALYZE {schema}.acct; ANALYZE {schema}.pair;"
    ))
    .await
    .unwrap();
}

/// Small transactions of inserts, updates and deletes against the source until `stop`; returns how many
/// committed.
async fn online_writer(
    cfg: tokio_postgres::Config,
    schema: String,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> u64 {
    use std::sync::atomic::Ordering;
    let (mut pg, conn) = cfg.connect(tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    pg.batch_execute(&format!("SET search_path = {schema}"))
        .await
        .unwrap();
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move |n: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % n
    };
    let mut new_id = 1_000_000i64;
    let mut committed = 0;
    while !stop.load(Ordering::Relaxed) {
        let tx = pg.transaction().await.unwrap();
        for _ in 0..=next(4) {
            let id = i64::try_from(next(ONLINE_ROWS as u64)).unwrap() + 1;
            match next(5) {
                0 | 1 => {
                    new_id += 1;
                    tx.execute(
                        "INSERT INTO acct VALUES ($1::bigint, 'new ' || $1::bigint::text, ($1::bigint % 1000) * 0.5, NULL)",
                        &[&new_id],
                    )
                    .await
                    .unwrap();
                }
                2 => {
                    tx.execute(
                        "UPDATE acct SET name = name || '+', amount = amount + 1, note = 'upd' WHERE id = $1",
                        &[&id],
                    )
                    .await
                    .unwrap();
                }
                3 => {
                    tx.execute("DELETE FROM acct WHERE id = $1", &[&id])
                        .await
                        .unwrap();
                }
                _ => {
                    let a = i32::try_from(next(50)).unwrap();
                    tx.execute("UPDATE pair SET v = v || 'x' WHERE a = $1", &[&a])
                        .await
                        .unwrap();
                }
            }
        }
        tx.commit().await.unwrap();
        committed += 1;
        tokio::time::sleep(Duration::from_millis(15)).await;
    }
    committed
}

/// Every row of the online test's tables, as text, sorted: the source through tokio-postgres.
async fn online_source_rows(pg: &tokio_postgres::Client, schema: &str) -> Vec<Vec<Vec<Option<String>>>> {
    let mut out = Vec::new();
    for q in [
        format!("SELECT id::text, name, amount::text, note FROM {schema}.acct"),
        format!("SELECT a::text, b, v FROM {schema}.pair"),
    ] {
        let rows = pg.query(&q, &[]).await.unwrap();
        let mut table: Vec<Vec<Option<String>>> = rows
            .iter()
            .map(|r| (0..r.len()).map(|i| r.get::<_, Option<String>>(i)).collect())
            .collect();
        table.sort();
        out.push(table);
    }
    out
}

/// The same from SQL Server, through tiberius.
async fn online_target_rows(ms: &mut TdsClient) -> Vec<Vec<Vec<Option<String>>>> {
    let mut out = Vec::new();
    for q in [
        "SELECT CAST(id AS nvarchar(20)), name, CAST(amount AS nvarchar(40)), note FROM dbo.acct",
        "SELECT CAST(a AS nvarchar(20)), b, v FROM dbo.pair",
    ] {
        let mut table = ms_rows(ms, q).await;
        table.sort();
        out.push(table);
    }
    out
}

/// The Secrets of the online tests: PostgreSQL's user (trusted) and the TDS test server's `sa`.
fn online_secrets(pg_user: &str) -> String {
    format!(
        "apiVersion: v1
kind: Secret
metadata: {{name: pg-creds}}
stringData: {{username: {pg_user}, password: unused-with-trust}}
---
apiVersion: v1
kind: Secret
metadata: {{name: ms-creds}}
stringData: {{username: sa, password: {ONLINE_PASSWORD}}}
"
    )
}

/// An online Migration `name` PostgreSQL (`schema`) -> SQL Server (`dbo`), streaming with short intervals.
fn online_migration_yaml(e2e: &E2e, name: &str, schema: &str) -> String {
    let (host, port, db) = pg_endpoint(&e2e.pg_cfg);
    format!(
        "apiVersion: mssqlpg.dev/v1alpha1
kind: Migration
metadata: {{name: {name}}}
spec:
  source: {{postgres: {{host: '{host}', port: {port}, database: '{db}', schema: {schema}, credentialsSecret: pg-creds, sslMode: disable}}}}
  target: {{mssql: {{host: 127.0.0.1, port: {mssql_port}, database: master, schema: dbo, credentialsSecret: ms-creds, encryption: NotSupported}}}}
  parallelism: 2
  chunkRows: 2000
  partitioning: {{minRowsToSplit: 10000, rowsPerPartition: 10000}}
  verify: checksum
  online: {{enabled: true, pollInterval: 100ms, heartbeatSeconds: 1, maxBatchDelay: 100ms}}
  cutover: {{maxLagSeconds: 5}}
",
        mssql_port = e2e.mssql.port
    )
}

/// An online Migration PostgreSQL -> SQL Server through the operator: a writer changes the source throughout;
/// the operator starts the capture Deployment after the plan and the copy Jobs once it anchored the stream;
/// the lag reaches a steady state shown in `kubectl get mig`; the capture pod is killed mid-stream and its
/// replacement goes on from the stored position; the writer stops, the cutover is requested through the
/// Migration; the target then equals the source value by value, the Deployment and the slot are gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn online_migration_with_a_capture_deployment() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let e2e = E2e::start("onl", ONLINE_PASSWORD, online_secrets).await;
    let (cluster, pg) = (&e2e.cluster, &e2e.pg);
    let schema = format!("e2e_onl_{}", std::process::id());
    seed_online(pg, &schema).await;
    let stop = Arc::new(AtomicBool::new(false));
    let writer = tokio::spawn(online_writer(e2e.pg_cfg.clone(), schema.clone(), stop.clone()));
    // The capture pod starts before the copy Jobs and binds the workers' metrics port first.
    let capture_metrics = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let _operator = e2e.start_operator_with("127.0.0.1:0", &[], Some(capture_metrics));
    let diag = || e2e.diag();

    cluster.apply(&online_migration_yaml(&e2e, "onl", &schema));
    let status = |path: &str| cluster.get("migration", "onl", path);
    e2e.wait_phase("onl", "Streaming", Duration::from_secs(300));
    assert!(!writer.is_finished(), "the writer stopped early");

    // One capture pod, replaced whole, owned by the Migration.
    let deployment = cluster.must(
        &[
            "get",
            "deployment",
            "onl-capture",
            "-n",
            &cluster.ns,
            "-o",
            "jsonpath={.spec.replicas} {.spec.strategy.type} {.metadata.ownerReferences[0].kind}",
        ],
        None,
    );
    assert_eq!(deployment, "1 Recreate Migration", "{}", diag());
    // The lag settles: every sample over a few seconds is fresh and under the cutover's maximum.
    let sample_lag = |seconds: u64| -> Vec<f64> {
        let mut lags = Vec::new();
        for _ in 0..seconds {
            std::thread::sleep(Duration::from_secs(1));
            if let Ok(l) = status(".status.online.lagSeconds").parse::<f64>() {
                lags.push(l);
            }
        }
        lags
    };
    let lags = sample_lag(8);
    assert!(
        lags.len() >= 6 && lags.iter().all(|l| *l < 5.0),
        "lag samples {lags:?}: {}",
        diag()
    );
    let get_mig = cluster.must(&["get", "mig", "onl", "-n", &cluster.ns], None);
    assert!(
        get_mig.contains("LAG") && get_mig.contains("Streaming"),
        "{get_mig}"
    );
    assert_eq!(
        status(".status.conditions[?(@.type==\"CaughtUp\")].status"),
        "True",
        "{}",
        diag()
    );

    // The capture pod's series, as the PodMonitor scrapes them.
    // The operator's labels: the Migration's name and namespace, so the two sides join.
    let label = format!("migration=\"onl\",namespace=\"{}\"", cluster.ns);
    let started = Instant::now();
    let scrape = loop {
        let text = reqwest_free_get(capture_metrics, "/metrics");
        if text.contains(&format!("mssqlpg_changes_applied_total{{{label},op=\"insert\"}}")) {
            break text;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the capture's metrics lack applied inserts: {text}"
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    for metric in [
        "mssqlpg_capture_lag_seconds",
        "mssqlpg_capture_slot_retained_bytes",
    ] {
        assert!(
            scrape.contains(&format!("{metric}{{{label}}} ")),
            "{metric} not in {scrape}"
        );
    }

    // Kill the capture pod mid-stream: its replacement takes over from the stored position.
    kill_the_capture_pod(cluster, &status, &diag);

    // A capture that goes on without the Lease (a stale pod whose node stopped answering) takes the stream
    // over through the fencing epoch in the target: the Deployment's pod stops applying and restarts; once it
    // streams again, the stale one finds the epoch moved and stops. Every change is applied once (compared at
    // the end).
    let pg_user = e2e.pg_cfg.get_user().unwrap_or("postgres").to_string();
    let rogue_log = e2e.work.join("rogue.log");
    let log_file = std::fs::File::create(&rogue_log).unwrap();
    let mut rogue = Command::new(sibling_bin("mssql-pg-worker"))
        .args(["capture", "--migration", &format!("{}/onl", cluster.ns)])
        .env("KUBECONFIG", &cluster.kubeconfig)
        .env("POD_NAME", "stale-capture")
        .env("MSSQLPG_CAPTURE_WITHOUT_LEASE", "1")
        .env("SOURCE_USERNAME", &pg_user)
        .env("SOURCE_PASSWORD", "unused-with-trust")
        .env("TARGET_USERNAME", "sa")
        .env("TARGET_PASSWORD", ONLINE_PASSWORD)
        .env("WORKER_METRICS_ADDR", "off")
        .env("WORKER_PROGRESS_INTERVAL", "1")
        .env("RUST_LOG", "info")
        .stdout(log_file.try_clone().unwrap())
        .stderr(log_file)
        .spawn()
        .unwrap();
    let started = Instant::now();
    let rogue_exit = loop {
        if let Some(exit) = rogue.try_wait().unwrap() {
            break exit;
        }
        assert!(
            started.elapsed() < Duration::from_secs(180),
            "the stale capture was never fenced: {}\n--- stale capture\n{}",
            diag(),
            tail(&std::fs::read_to_string(&rogue_log).unwrap_or_default(), 30)
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    let rogue_text = std::fs::read_to_string(&rogue_log).unwrap_or_default();
    assert!(
        !rogue_exit.success() && rogue_text.contains("another streaming process took over"),
        "{rogue_exit:?}: {}",
        tail(&rogue_text, 30)
    );
    let deployment_pod_log = pod_logs(cluster, "onl-capture-");
    assert!(
        deployment_pod_log.contains("another streaming process took over"),
        "the Deployment's pod was not fenced while the stale one streamed: {}",
        tail(&deployment_pod_log, 40)
    );
    let started = Instant::now();
    while status(".status.online.pod").starts_with("stale") || status(".status.online.phase") != "Streaming" {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the Deployment's pod does not stream again: {}",
            diag()
        );
        std::thread::sleep(Duration::from_millis(500));
    }

    // The plugin's summary shows the stream.
    let (ok, summary) = plugin(&e2e, &["status", "onl"]);
    assert!(ok, "{summary}");
    for expected in [
        "Migration ",
        "Streaming (online)",
        "stream: Streaming lag",
        "capture pod onl-capture-",
    ] {
        assert!(summary.contains(expected), "{expected:?} not in {summary}");
    }
    let (ok, logs) = plugin(&e2e, &["logs", "onl", "--tail", "20"]);
    assert!(
        ok && logs.contains("(capture) <==") && logs.contains("(plan) <=="),
        "{logs}"
    );

    // A cutover asked for while the lag is above its maximum is refused, and waits.
    let patch_cutover = |patch: &str| {
        cluster.must(
            &[
                "patch",
                "mig",
                "onl",
                "-n",
                &cluster.ns,
                "--type=merge",
                "-p",
                patch,
            ],
            None,
        )
    };
    patch_cutover(r#"{"spec":{"cutover":{"requested":true,"maxLagSeconds":0}}}"#);
    let started = Instant::now();
    while status(".status.conditions[?(@.type==\"CutOver\")].reason") != "LagAboveMaximum" {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the cutover was not refused at maxLagSeconds 0: {}",
            diag()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(status(".status.phase"), "Streaming", "{}", diag());
    assert!(status(".status.cutoverAcceptedAt").is_empty(), "{}", diag());
    patch_cutover(r#"{"spec":{"cutover":{"requested":false,"maxLagSeconds":5}}}"#);

    // The applications stop writing; the cutover is asked for through the plugin, which waits for it.
    stop.store(true, Ordering::Relaxed);
    let committed = writer.await.unwrap();
    assert!(committed > 50, "the writer committed {committed} transactions");
    let (ok, out) = plugin(&e2e, &["cutover", "onl", "--wait", "--timeout", "300"]);
    assert!(
        ok && out.contains("cut over at ") && out.contains("downtime"),
        "{out}: {}",
        diag()
    );
    assert_eq!(status(".status.phase"), "Succeeded", "{}", diag());
    for c in ["CutOver", "Finalized", "Verified", "Ready"] {
        assert_eq!(
            status(&format!(".status.conditions[?(@.type==\"{c}\")].status")),
            "True",
            "condition {c}: {}",
            diag()
        );
    }
    let downtime: f64 = status(".status.online.downtimeSeconds").parse().unwrap_or(-1.0);
    assert!(downtime >= 0.0, "downtime {downtime}: {}", diag());
    assert!(!status(".status.online.fencePosition").is_empty(), "{}", diag());

    // The target equals the source, value by value.
    let source = online_source_rows(pg, &schema).await;
    let mut ms = e2e.mssql.connect().await.unwrap();
    let target = online_target_rows(&mut ms).await;
    for (i, (s, t)) in source.iter().zip(&target).enumerate() {
        assert_eq!(s.len(), t.len(), "table {i}: row counts differ");
        for (rs, rt) in s.iter().zip(t) {
            assert_eq!(rs, rt, "table {i}: first differing row");
        }
    }
    assert!(source[0].len() as i64 > ONLINE_ROWS / 2);

    // One file for a bug report: the Migration, its tasks, events and the pods' logs.
    let report = e2e.work.join("report.txt");
    let (ok, out) = plugin(&e2e, &["report", "onl", "-o", &report.display().to_string()]);
    assert!(ok, "{out}");
    let text = std::fs::read_to_string(&report).unwrap();
    for expected in [
        "## Migration",
        "kind: Migration",
        "## MigrationTasks (3)",
        "(copy) <==",
        "## Events",
    ] {
        assert!(text.contains(expected), "{expected:?} not in the report:\n{text}");
    }
    assert!(!text.contains(ONLINE_PASSWORD), "the report holds no credentials");

    // The capture is gone, and so is what it held on the source.
    let started = Instant::now();
    while cluster
        .kubectl(&["get", "deployment", "onl-capture", "-n", &cluster.ns], None)
        .is_ok()
    {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the capture Deployment stays after the cutover: {}",
            diag()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let slots: i64 = pg
        .query_one(
            "SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE '%' || $1 || '%'",
            &[&cluster.ns.replace('-', "_")],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(slots, 0, "the slot was dropped at the cutover");

    pg.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
        .await
        .unwrap();
    e2e.finish();
}

/// Waits until `cond` holds, up to `seconds`; the assertion names `what`.
fn wait_for(what: &str, seconds: u64, diag: &dyn Fn() -> String, mut cond: impl FnMut() -> bool) {
    let started = Instant::now();
    while !cond() {
        assert!(
            started.elapsed() < Duration::from_secs(seconds),
            "{what}: {}",
            diag()
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// A column added in the source to one table of a streaming Migration (PostgreSQL -> SQL Server): that table
/// pauses, `SchemaDrift=True` and `status.online.schemaDrift` name it and the column, the other table's
/// changes still arrive in the target while the paused one's do not, and a requested cutover is refused with
/// a condition message naming the paused table. Annotated `mssqlpg.dev/reinitialize`, the table is planned
/// again, re-created with the column and copied again; after the cutover the target equals the source.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_column_added_while_streaming_pauses_its_table_until_copied_again() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let e2e = E2e::start("ondr", ONLINE_PASSWORD, online_secrets).await;
    let (cluster, pg) = (&e2e.cluster, &e2e.pg);
    let schema = format!("e2e_ondr_{}", std::process::id());
    seed_online(pg, &schema).await;
    let stop = Arc::new(AtomicBool::new(false));
    let writer = tokio::spawn(online_writer(e2e.pg_cfg.clone(), schema.clone(), stop.clone()));
    let _operator = e2e.start_operator("127.0.0.1:0");
    let diag = || e2e.diag();
    cluster.apply(&online_migration_yaml(&e2e, "ondr", &schema));
    let status = |path: &str| cluster.get("migration", "ondr", path);
    let condition = |c: &str, field: &str| status(&format!(".status.conditions[?(@.type==\"{c}\")].{field}"));
    e2e.wait_phase("ondr", "Streaming", Duration::from_secs(300));
    assert_ne!(condition("SchemaDrift", "status"), "True", "{}", diag());

    // The writer's next change of acct carries the relation with the new column.
    pg.batch_execute(&format!("ALTER TABLE {schema}.acct ADD COLUMN rating int"))
        .await
        .unwrap();
    wait_for("SchemaDrift never turned True", 60, &diag, || {
        condition("SchemaDrift", "status") == "True"
    });
    let message = condition("SchemaDrift", "message");
    assert!(
        message.contains(&format!("table {schema}.acct paused")) && message.contains("added rating"),
        "{message}"
    );
    assert!(!message.contains(".pair"), "{message}");
    let listed = status(".status.online.schemaDrift");
    assert!(
        listed.contains(&format!("{schema}.acct")) && listed.contains("added rating"),
        "{listed}"
    );
    stop.store(true, Ordering::Relaxed);
    writer.await.unwrap();

    // The other table streams on; the paused one's changes are no longer applied.
    pg.batch_execute(&format!(
        "INSERT INTO {schema}.pair VALUES (9999, 'after drift', 'streamed');
         INSERT INTO {schema}.acct VALUES (5000000, 'paused', 1, NULL, 5);"
    ))
    .await
    .unwrap();
    let mut ms = e2e.mssql.connect().await.unwrap();
    let started = Instant::now();
    while ms_rows(&mut ms, "SELECT v FROM dbo.pair WHERE a = 9999")
        .await
        .is_empty()
    {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "a change of the table that did not drift never arrived: {}",
            diag()
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert!(
        ms_rows(&mut ms, "SELECT name FROM dbo.acct WHERE id = 5000000")
            .await
            .is_empty(),
        "a change of the paused table was applied"
    );

    // A cutover is refused, naming the paused table; streaming goes on.
    cluster.must(
        &[
            "patch",
            "mig",
            "ondr",
            "-n",
            &cluster.ns,
            "--type=merge",
            "-p",
            r#"{"spec":{"cutover":{"requested":true}}}"#,
        ],
        None,
    );
    wait_for("the cutover was not refused", 60, &diag, || {
        condition("CutOver", "reason") == "CutoverFailed"
    });
    let refused = condition("CutOver", "message");
    assert!(
        refused.contains("schema change paused") && refused.contains(&format!("{schema}.acct")),
        "{refused}"
    );
    assert_eq!(condition("CutOver", "status"), "False", "{}", diag());
    assert_eq!(status(".status.phase"), "Streaming", "{}", diag());

    // Planned again, re-created with the new column and copied again: its changes apply again.
    cluster.must(
        &[
            "annotate",
            "mig",
            "ondr",
            "-n",
            &cluster.ns,
            &format!("mssqlpg.dev/reinitialize={schema}.acct"),
        ],
        None,
    );
    wait_for("SchemaDrift never turned False again", 120, &diag, || {
        condition("SchemaDrift", "status") == "False"
    });
    pg.batch_execute(&format!(
        "INSERT INTO {schema}.acct VALUES (5000001, 'after the re-copy', 2, 'n', 9);
         UPDATE {schema}.acct SET rating = 3 WHERE id <= 100;
         DELETE FROM {schema}.acct WHERE id BETWEEN 101 AND 110;
         UPDATE {schema}.pair SET v = 'later' WHERE a = 1;"
    ))
    .await
    .unwrap();
    cluster.must(
        &[
            "patch",
            "mig",
            "ondr",
            "-n",
            &cluster.ns,
            "--type=merge",
            "-p",
            r#"{"spec":{"cutover":{"requested":false}}}"#,
        ],
        None,
    );
    // The operator withdraws the refused request before it is asked again: else it may see only the second.
    wait_for("the refused cutover request was not withdrawn", 60, &diag, || {
        status(".status.cutoverAcceptedAt").is_empty()
    });
    let (ok, out) = plugin(&e2e, &["cutover", "ondr", "--wait", "--timeout", "300"]);
    assert!(ok && out.contains("cut over at "), "{out}: {}", diag());
    let source = online_source_rows(pg, &schema).await;
    let target = online_target_rows(&mut ms).await;
    for (i, (s, t)) in source.iter().zip(&target).enumerate() {
        assert_eq!(s.len(), t.len(), "table {i}: row counts differ");
        for (rs, rt) in s.iter().zip(t) {
            assert_eq!(rs, rt, "table {i}: first differing row");
        }
    }
    let rows = pg
        .query(&format!("SELECT id::text, rating::text FROM {schema}.acct"), &[])
        .await
        .unwrap();
    let mut ratings: Vec<Vec<Option<String>>> = rows
        .iter()
        .map(|r| vec![r.get::<_, Option<String>>(0), r.get::<_, Option<String>>(1)])
        .collect();
    ratings.sort();
    let mut target_ratings = ms_rows(
        &mut ms,
        "SELECT CAST(id AS nvarchar(20)), CAST(rating AS nvarchar(20)) FROM dbo.acct",
    )
    .await;
    target_ratings.sort();
    assert_eq!(ratings, target_ratings, "the new column, value by value");

    pg.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
        .await
        .unwrap();
    e2e.finish();
}

/// A binary of the workspace built beside the tests (`cargo build --workspace --bins`).
/// Kills an online Migration's capture pod (`status` reads the Migration's status by path) and waits
/// until a new pod streams and applies more changes: a writer must be changing the source.
fn kill_the_capture_pod(cluster: &Cluster, status: &dyn Fn(&str) -> String, diag: &dyn Fn() -> String) {
    let first_pod = status(".status.online.pod");
    assert!(!first_pod.is_empty(), "{}", diag());
    cluster.must(
        &[
            "delete",
            "pod",
            &first_pod,
            "-n",
            &cluster.ns,
            "--grace-period=0",
            "--force",
        ],
        None,
    );
    let started = Instant::now();
    loop {
        let pod = status(".status.online.pod");
        if !pod.is_empty() && pod != first_pod && status(".status.online.phase") == "Streaming" {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "no new capture pod streams: {}",
            diag()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let changes_before: i64 = status(".status.online.changesApplied").parse().unwrap_or(0);
    std::thread::sleep(Duration::from_secs(3));
    let changes_after: i64 = status(".status.online.changesApplied").parse().unwrap_or(0);
    assert!(
        changes_after > changes_before,
        "the new capture applies the writer's changes ({changes_before} -> {changes_after}): {}",
        diag()
    );
}

fn sibling_bin(name: &str) -> PathBuf {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let bin = std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| repo.join("target"))
        .join("debug")
        .join(name);
    assert!(
        bin.exists(),
        "{} is missing: cargo build --workspace --bins",
        bin.display()
    );
    bin
}

/// The logs of every pod of the test's namespace whose name starts with `prefix`, as the node agent keeps
/// them (across restarts).
fn pod_logs(cluster: &Cluster, prefix: &str) -> String {
    let mut s = String::new();
    for entry in std::fs::read_dir(cluster.dir.join("node/pods"))
        .into_iter()
        .flatten()
        .flatten()
    {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with(&format!("{}_{prefix}", cluster.ns)) {
            s.push_str(&std::fs::read_to_string(entry.path().join("worker.log")).unwrap_or_default());
        }
    }
    s
}

/// Runs `kubectl-mssqlpg ARGS -n NS` (built beside the worker) as the admin; (succeeded, stdout and stderr).
fn plugin(e2e: &E2e, args: &[&str]) -> (bool, String) {
    let bin = sibling_bin("kubectl-mssqlpg");
    let out = Command::new(&bin)
        .args(args)
        .args(["-n", &e2e.cluster.ns])
        .env("KUBECONFIG", &e2e.cluster.kubeconfig)
        .output()
        .unwrap();
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// Deleting an online Migration that streams stops its capture and, with `online.cleanup` (the default),
/// runs a Job that drops the replication slot and publication on the source before the Migration goes: the
/// operator itself never connects to a database.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_streaming_migration_drops_its_slot() {
    let e2e = E2e::start("ondel", ONLINE_PASSWORD, online_secrets).await;
    let (cluster, pg) = (&e2e.cluster, &e2e.pg);
    let schema = format!("e2e_ondel_{}", std::process::id());
    seed_online(pg, &schema).await;
    let _operator = e2e.start_operator("127.0.0.1:0");
    let diag = || e2e.diag();
    let (host, port, db) = pg_endpoint(&e2e.pg_cfg);
    cluster.apply(&format!(
        "apiVersion: mssqlpg.dev/v1alpha1
kind: Migration
metadata: {{name: ondel}}
spec:
  source: {{postgres: {{host: '{host}', port: {port}, database: '{db}', schema: {schema}, credentialsSecret: pg-creds, sslMode: disable}}}}
  target: {{mssql: {{host: 127.0.0.1, port: {mssql_port}, database: master, schema: dbo, credentialsSecret: ms-creds, encryption: NotSupported}}}}
  online: {{enabled: true, pollInterval: 100ms, heartbeatSeconds: 1}}
",
        mssql_port = e2e.mssql.port
    ));
    e2e.wait_phase("ondel", "Streaming", Duration::from_secs(300));
    let stream_objects = || async {
        let tag = cluster.ns.replace('-', "_");
        let row = pg
            .query_one(
                "SELECT (SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE '%' || $1 || '%'), \
                 (SELECT count(*) FROM pg_publication WHERE pubname LIKE '%' || $1 || '%')",
                &[&tag],
            )
            .await
            .unwrap();
        (row.get::<_, i64>(0), row.get::<_, i64>(1))
    };
    assert_eq!(stream_objects().await, (1, 1), "{}", diag());

    cluster.must(
        &["delete", "mig", "ondel", "-n", &cluster.ns, "--timeout=180s"],
        None,
    );
    assert_eq!(
        stream_objects().await,
        (0, 0),
        "the slot and publication outlived the Migration: {}",
        diag()
    );
    let left = cluster.must(
        &["get", "deployments,jobs,mtask", "-n", &cluster.ns, "-o", "name"],
        None,
    );
    // The cleanup Job itself goes with the Migration (garbage collection of what it owns).
    assert!(
        !left.contains("deployment.apps/ondel-capture"),
        "{left}: {}",
        diag()
    );
    pg.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
        .await
        .unwrap();
    e2e.finish();
}

/// Small transactions against the SQL Server source (the TDS test server) until `stop`; returns how many
/// committed.
async fn ct_writer(endpoint: MssqlEndpoint, stop: std::sync::Arc<std::sync::atomic::AtomicBool>) -> u64 {
    use std::sync::atomic::Ordering;
    let mut ms = endpoint.connect().await.unwrap();
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move |n: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % n
    };
    let mut new_id = 1_000_000u64;
    let mut committed = 0;
    while !stop.load(Ordering::Relaxed) {
        new_id += 1;
        let id = next(ONLINE_ROWS as u64) + 1;
        let sql = format!(
            "BEGIN TRANSACTION; INSERT INTO dbo.acct VALUES ({new_id}, N'new {new_id}', {}.50, NULL); \
             UPDATE dbo.acct SET name = name + N'+', amount = amount + 1, note = N'upd' WHERE id = {id}; \
             DELETE FROM dbo.acct WHERE id = {}; COMMIT",
            new_id % 1000,
            next(ONLINE_ROWS as u64) + 1
        );
        exec(&mut ms, &sql).await;
        committed += 1;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    committed
}

/// An online Migration `name` SQL Server (the TDS test server's `shop`, `dbo`; Change Tracking switched on by
/// the worker) -> PostgreSQL (`schema`), streaming with short intervals.
fn online_ct_migration_yaml(e2e: &E2e, name: &str, schema: &str) -> String {
    let (host, port, db) = pg_endpoint(&e2e.pg_cfg);
    format!(
        "apiVersion: mssqlpg.dev/v1alpha1
kind: Migration
metadata: {{name: {name}}}
spec:
  source: {{mssql: {{host: 127.0.0.1, port: {mssql_port}, database: shop, schema: dbo, credentialsSecret: ms-creds, encryption: NotSupported}}}}
  target: {{postgres: {{host: '{host}', port: {port}, database: '{db}', schema: {schema}, credentialsSecret: pg-creds, sslMode: disable}}}}
  parallelism: 2
  chunkRows: 2000
  partitioning: {{minRowsToSplit: 10000, rowsPerPartition: 10000}}
  verify: checksum
  online: {{enabled: true, enableChangeTracking: true, pollInterval: 100ms, heartbeatSeconds: 1, maxBatchDelay: 100ms}}
  cutover: {{maxLagSeconds: 5}}
",
        mssql_port = e2e.mssql.port
    )
}

/// The online path the other way, SQL Server (the TDS test server, Change Tracking switched on by the
/// worker) -> PostgreSQL, through the operator: a writer changes the source throughout; the capture anchors,
/// the copy Jobs run, the stream catches up (status shows the retention headroom); the capture pod is killed
/// mid-stream and its replacement goes on; the writer stops, `kubectl mssqlpg cutover --wait` cuts over;
/// PostgreSQL then equals the source value by value, and the Deployment is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn online_migration_from_sql_server_with_a_capture_deployment() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let e2e = E2e::start_on("onct", ONLINE_PASSWORD, Some("shop"), online_secrets).await;
    let (cluster, pg) = (&e2e.cluster, &e2e.pg);
    let schema = format!("e2e_onct_{}", std::process::id());
    pg.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
        .await
        .unwrap();
    let mut ms = e2e.mssql.connect().await.unwrap();
    exec(
        &mut ms,
        "CREATE TABLE dbo.acct (id bigint NOT NULL PRIMARY KEY, name nvarchar(200) NOT NULL, \
         amount decimal(12,2) NULL, note nvarchar(100) NULL)",
    )
    .await;
    for first in (1..=ONLINE_ROWS).step_by(500) {
        let values: Vec<String> = (first..first + 500)
            .map(|g| {
                let note = if g % 5 == 0 {
                    "NULL".to_string()
                } else {
                    format!("N'n{g}'")
                };
                format!("({g}, N'nämé {g}', {}.{:02}, {note})", g / 4, (g % 4) * 25)
            })
            .collect();
        exec(
            &mut ms,
            &format!("INSERT INTO dbo.acct VALUES {}", values.join(", ")),
        )
        .await;
    }
    let stop = Arc::new(AtomicBool::new(false));
    let writer = tokio::spawn(ct_writer(e2e.mssql.clone(), stop.clone()));
    let _operator = e2e.start_operator("127.0.0.1:0");
    let diag = || e2e.diag();
    cluster.apply(&online_ct_migration_yaml(&e2e, "onct", &schema));
    let status = |path: &str| cluster.get("migration", "onct", path);
    e2e.wait_phase("onct", "Streaming", Duration::from_secs(300));
    assert!(!writer.is_finished(), "the writer stopped early");
    let started = Instant::now();
    while status(".status.online.changesApplied")
        .parse::<i64>()
        .unwrap_or(0)
        == 0
    {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no change streamed: {}",
            diag()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let lag: f64 = status(".status.online.lagSeconds").parse().unwrap_or(-1.0);
    assert!((0.0..5.0).contains(&lag), "lag {lag}: {}", diag());
    // Two days of Change Tracking retention less the age of the oldest change not applied yet.
    let headroom: f64 = status(".status.online.retentionHeadroomSeconds")
        .parse()
        .unwrap_or(-1.0);
    assert!(
        (2.0 * 86400.0 - 180.0..=2.0 * 86400.0 + 60.0).contains(&headroom),
        "retention headroom {headroom}: {}",
        diag()
    );

    // Kill the capture pod mid-stream: its replacement goes on from the version stored in
    // PostgreSQL, and every change still arrives once (compared value by value below).
    kill_the_capture_pod(cluster, &status, &diag);

    stop.store(true, Ordering::Relaxed);
    let committed = writer.await.unwrap();
    assert!(committed > 20, "the writer committed {committed} transactions");
    let (ok, out) = plugin(&e2e, &["cutover", "onct", "--wait", "--timeout", "300"]);
    assert!(ok && out.contains("cut over at "), "{out}: {}", diag());
    assert_eq!(status(".status.phase"), "Succeeded", "{}", diag());

    // PostgreSQL equals the source, value by value.
    let mut source = ms_rows(
        &mut ms,
        "SELECT CAST(id AS nvarchar(20)), name, CAST(amount AS nvarchar(40)), note FROM dbo.acct",
    )
    .await;
    source.sort();
    let rows = pg
        .query(
            &format!("SELECT id::text, name, amount::text, note FROM {schema}.acct"),
            &[],
        )
        .await
        .unwrap();
    let mut target: Vec<Vec<Option<String>>> = rows
        .iter()
        .map(|r| (0..r.len()).map(|i| r.get::<_, Option<String>>(i)).collect())
        .collect();
    target.sort();
    assert_eq!(source.len(), target.len(), "row counts differ");
    for (s, t) in source.iter().zip(&target) {
        assert_eq!(s, t, "first differing row");
    }
    let started = Instant::now();
    while cluster
        .kubectl(&["get", "deployment", "onct-capture", "-n", &cluster.ns], None)
        .is_ok()
    {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the capture Deployment stays after the cutover: {}",
            diag()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    pg.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
        .await
        .unwrap();
    e2e.finish();
}

/// A column's type changed in the SQL Server source of a streaming Migration (SQL Server -> PostgreSQL): that
/// table pauses, `SchemaDrift=True` and `status.online.schemaDrift` name it with the column's old and new type,
/// the other table's changes still arrive in PostgreSQL while the paused one's do not, and a requested cutover
/// is refused naming the paused table. Annotated `mssqlpg.dev/reinitialize`, the capture plans the table
/// again, re-creates and copies it while the other streams on; `SchemaDrift` turns False, its changes apply
/// again, and after the cutover PostgreSQL equals the source value by value.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_type_changed_while_streaming_from_sql_server_pauses_its_table_until_copied_again() {
    let e2e = E2e::start_on("onctdr", ONLINE_PASSWORD, Some("shop"), online_secrets).await;
    let (cluster, pg) = (&e2e.cluster, &e2e.pg);
    let schema = format!("e2e_onctdr_{}", std::process::id());
    pg.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
        .await
        .unwrap();
    let mut ms = e2e.mssql.connect().await.unwrap();
    exec(
        &mut ms,
        "CREATE TABLE dbo.acct (id bigint NOT NULL PRIMARY KEY, name nvarchar(200) NOT NULL, note nvarchar(100) NULL); \
         CREATE TABLE dbo.pair (a int NOT NULL, b nvarchar(20) NOT NULL, v nvarchar(100) NULL, PRIMARY KEY (a, b)); \
         INSERT INTO dbo.acct VALUES (1, N'nämé 1', N'n1'), (2, N'nämé 2', NULL); \
         INSERT INTO dbo.pair VALUES (1, N'k1', N'v1'), (2, N'k2', N'v2')",
    )
    .await;
    let _operator = e2e.start_operator("127.0.0.1:0");
    let diag = || e2e.diag();
    cluster.apply(&online_ct_migration_yaml(&e2e, "onctdr", &schema));
    let status = |path: &str| cluster.get("migration", "onctdr", path);
    let condition = |c: &str, field: &str| status(&format!(".status.conditions[?(@.type==\"{c}\")].{field}"));
    e2e.wait_phase("onctdr", "Streaming", Duration::from_secs(300));
    assert_ne!(condition("SchemaDrift", "status"), "True", "{}", diag());

    exec(
        &mut ms,
        "ALTER TABLE dbo.acct ALTER COLUMN note nvarchar(400) NULL",
    )
    .await;
    wait_for("SchemaDrift never turned True", 60, &diag, || {
        condition("SchemaDrift", "status") == "True"
    });
    let message = condition("SchemaDrift", "message");
    assert!(
        message.contains("table dbo.acct paused")
            && message.contains("changed the type of note from nvarchar(100) NULL to nvarchar(400) NULL"),
        "{message}"
    );
    let listed = status(".status.online.schemaDrift");
    assert!(
        listed.contains("dbo.acct") && listed.contains("nvarchar(400)"),
        "{listed}"
    );

    exec(
        &mut ms,
        "INSERT INTO dbo.pair VALUES (9999, N'after drift', N'streamed'); \
         INSERT INTO dbo.acct VALUES (5000000, N'paused', N'x')",
    )
    .await;
    let count = |sql: String| async move { pg.query_one(&sql, &[]).await.unwrap().get::<_, i64>(0) };
    let started = Instant::now();
    while count(format!("SELECT count(*) FROM {schema}.pair WHERE a = 9999")).await == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "a change of the table that did not drift never arrived: {}",
            diag()
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert_eq!(
        count(format!("SELECT count(*) FROM {schema}.acct WHERE id = 5000000")).await,
        0,
        "a change of the paused table was applied"
    );

    let (ok, out) = plugin(&e2e, &["cutover", "onctdr"]);
    assert!(ok, "{out}");
    wait_for("the cutover was not refused", 60, &diag, || {
        condition("CutOver", "reason") == "CutoverFailed"
    });
    let refused = condition("CutOver", "message");
    assert!(
        refused.contains("schema change paused") && refused.contains("dbo.acct"),
        "{refused}"
    );
    assert_eq!(status(".status.phase"), "Streaming", "{}", diag());

    // The table is planned again, re-created with the new type and copied again; its changes apply again.
    cluster.must(
        &[
            "annotate",
            "mig",
            "onctdr",
            "-n",
            &cluster.ns,
            "mssqlpg.dev/reinitialize=dbo.acct",
        ],
        None,
    );
    wait_for("SchemaDrift never turned False again", 120, &diag, || {
        condition("SchemaDrift", "status") == "False"
    });
    assert_eq!(status(".status.online.schemaDrift"), "", "{}", diag());
    let long = "ü".repeat(300);
    exec(
        &mut ms,
        &format!(
            "INSERT INTO dbo.acct VALUES (5000001, N'after the re-copy', N'{long}'); \
             UPDATE dbo.acct SET note = N'updated after' WHERE id = 1; DELETE FROM dbo.acct WHERE id = 2; \
             UPDATE dbo.pair SET v = N'later' WHERE a = 1"
        ),
    )
    .await;
    cluster.must(
        &[
            "patch",
            "mig",
            "onctdr",
            "-n",
            &cluster.ns,
            "--type=merge",
            "-p",
            r#"{"spec":{"cutover":{"requested":false}}}"#,
        ],
        None,
    );
    // The operator withdraws the refused request before it is asked again: else it may see only the second.
    wait_for("the refused cutover request was not withdrawn", 60, &diag, || {
        status(".status.cutoverAcceptedAt").is_empty()
    });
    let (ok, out) = plugin(&e2e, &["cutover", "onctdr", "--wait", "--timeout", "300"]);
    assert!(ok && out.contains("cut over at "), "{out}: {}", diag());
    assert_eq!(status(".status.phase"), "Succeeded", "{}", diag());
    for (ms_sql, pg_sql) in [
        (
            "SELECT CAST(id AS nvarchar(20)), name, note FROM dbo.acct",
            format!("SELECT id::text, name, note FROM {schema}.acct"),
        ),
        (
            "SELECT CAST(a AS nvarchar(20)), b, v FROM dbo.pair",
            format!("SELECT a::text, b, v FROM {schema}.pair"),
        ),
    ] {
        let mut source = ms_rows(&mut ms, ms_sql).await;
        source.sort();
        let rows = pg.query(&pg_sql, &[]).await.unwrap();
        let mut target: Vec<Vec<Option<String>>> = rows
            .iter()
            .map(|r| (0..r.len()).map(|i| r.get::<_, Option<String>>(i)).collect())
            .collect();
        target.sort();
        assert_eq!(source, target, "{pg_sql}");
    }
    let note_type: String = pg
        .query_one(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = $1::text::regclass \
             AND attname = 'note'",
            &[&format!("{schema}.acct")],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(
        note_type, "character varying(400)",
        "the table was re-created with the new type"
    );

    pg.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
        .await
        .unwrap();
    e2e.finish();
}

/// `spec.cutover.reverse` through the operator, SQL Server -> PostgreSQL: after the cutover the capture
/// Deployment stays and streams the target's changes back (`Reversing=True`, `status.online.reverse`); a
/// writer changes PostgreSQL (inserts, updates to NULL and non-ASCII text, deletes), the capture pod is killed
/// mid-way and its replacement resumes from the position stored in SQL Server; `kubectl mssqlpg cutover
/// --go-back --wait` goes back; SQL Server then equals PostgreSQL value by value, `Reversing=False`
/// `WentBack`, and the Deployment is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn online_migration_from_sql_server_streams_back_and_goes_back() {
    let e2e = E2e::start_on("onrv", ONLINE_PASSWORD, Some("shop"), online_secrets).await;
    let (cluster, pg) = (&e2e.cluster, &e2e.pg);
    let schema = format!("e2e_onrv_{}", std::process::id());
    pg.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
        .await
        .unwrap();
    let mut ms = e2e.mssql.connect().await.unwrap();
    exec(
        &mut ms,
        "CREATE TABLE dbo.acct (id bigint NOT NULL PRIMARY KEY, name nvarchar(200) NOT NULL, \
         amount decimal(12,2) NULL, note nvarchar(100) NULL)",
    )
    .await;
    let values: Vec<String> = (1..=500)
        .map(|g| format!("({g}, N'nämé {g}', {}.{:02}, N'n{g}')", g / 4, (g % 4) * 25))
        .collect();
    exec(
        &mut ms,
        &format!("INSERT INTO dbo.acct VALUES {}", values.join(", ")),
    )
    .await;
    let _operator = e2e.start_operator("127.0.0.1:0");
    let diag = || e2e.diag();
    let (host, port, db) = pg_endpoint(&e2e.pg_cfg);
    cluster.apply(&format!(
        "apiVersion: mssqlpg.dev/v1alpha1
kind: Migration
metadata: {{name: onrv}}
spec:
  source: {{mssql: {{host: 127.0.0.1, port: {mssql_port}, database: shop, schema: dbo, credentialsSecret: ms-creds, encryption: NotSupported}}}}
  target: {{postgres: {{host: '{host}', port: {port}, database: '{db}', schema: {schema}, credentialsSecret: pg-creds, sslMode: disable}}}}
  verify: checksum
  online: {{enabled: true, enableChangeTracking: true, pollInterval: 100ms, heartbeatSeconds: 1, maxBatchDelay: 100ms}}
  cutover: {{maxLagSeconds: 5, reverse: true}}
",
        mssql_port = e2e.mssql.port
    ));
    let status = |path: &str| cluster.get("migration", "onrv", path);
    let wait_for = |what: &str, done: &dyn Fn() -> bool| {
        let started = Instant::now();
        while !done() {
            assert!(started.elapsed() < Duration::from_secs(180), "{what}: {}", diag());
            std::thread::sleep(Duration::from_millis(500));
        }
    };
    e2e.wait_phase("onrv", "Streaming", Duration::from_secs(300));
    let (ok, out) = plugin(&e2e, &["cutover", "onrv", "--wait", "--timeout", "300"]);
    assert!(ok && out.contains("cut over at "), "{out}: {}", diag());
    wait_for("no reverse stream reported", &|| {
        ["CatchingUp", "Streaming"].contains(&status(".status.online.reverse.phase").as_str())
    });
    assert_eq!(status(".status.phase"), "Succeeded", "{}", diag());
    assert_eq!(
        status(r#".status.conditions[?(@.type=="Reversing")].status"#),
        "True",
        "{}",
        diag()
    );
    assert!(
        cluster
            .kubectl(&["get", "deployment", "onrv-capture", "-n", &cluster.ns], None)
            .is_ok(),
        "the capture Deployment must stay while streaming back: {}",
        diag()
    );

    // The applications write to PostgreSQL now.
    let write = |round: i64| {
        let schema = schema.clone();
        async move {
            for i in 0..20 {
                let n = round * 100 + i;
                pg.batch_execute(&format!(
                    "BEGIN; INSERT INTO {schema}.acct VALUES ({}, 'nouveau ✓ {n}', {n}.25, NULL); \
                     UPDATE {schema}.acct SET name = 'Zoë {n}', note = NULL, amount = NULL WHERE id = {}; \
                     DELETE FROM {schema}.acct WHERE id = {}; COMMIT",
                    10_000 + n,
                    1 + n % 400,
                    401 + n % 100
                ))
                .await
                .unwrap();
            }
        }
    };
    write(1).await;
    wait_for("no change streamed back", &|| {
        status(".status.online.reverse.changesApplied")
            .parse::<i64>()
            .unwrap_or(0)
            > 0
    });
    // The capture pod killed mid-way: its replacement resumes from the position stored in SQL Server.
    let first_pod = status(".status.online.pod");
    cluster.must(
        &[
            "delete",
            "pod",
            &first_pod,
            "-n",
            &cluster.ns,
            "--grace-period=0",
            "--force",
        ],
        None,
    );
    write(2).await;
    wait_for("no new capture pod streams back", &|| {
        let pod = status(".status.online.pod");
        !pod.is_empty() && pod != first_pod && status(".status.online.reverse.phase") == "Streaming"
    });
    write(3).await;

    let (ok, out) = plugin(
        &e2e,
        &["cutover", "onrv", "--go-back", "--wait", "--timeout", "300"],
    );
    assert!(ok && out.contains("WentBack"), "{out}: {}", diag());
    assert_eq!(status(".status.online.reverse.phase"), "Succeeded", "{}", diag());

    // SQL Server equals PostgreSQL, value by value.
    let mut source = ms_rows(
        &mut ms,
        "SELECT CAST(id AS nvarchar(20)), name, CAST(amount AS nvarchar(40)), note FROM dbo.acct",
    )
    .await;
    source.sort();
    let rows = pg
        .query(
            &format!("SELECT id::text, name, amount::text, note FROM {schema}.acct"),
            &[],
        )
        .await
        .unwrap();
    let mut target: Vec<Vec<Option<String>>> = rows
        .iter()
        .map(|r| (0..r.len()).map(|i| r.get::<_, Option<String>>(i)).collect())
        .collect();
    target.sort();
    assert!(target.iter().any(|r| r[1].as_deref() == Some("nouveau ✓ 310")));
    assert_eq!(source.len(), target.len(), "row counts differ");
    for (s, t) in source.iter().zip(&target) {
        assert_eq!(s, t, "first differing row");
    }
    wait_for("the capture Deployment stays after going back", &|| {
        cluster
            .kubectl(&["get", "deployment", "onrv-capture", "-n", &cluster.ns], None)
            .is_err()
    });
    pg.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
        .await
        .unwrap();
    e2e.finish();
}

/// `spec.cutover.reverse` through the operator, PostgreSQL -> SQL Server: after the cutover the capture turns
/// Change Tracking on in the SQL Server target and streams its changes back into PostgreSQL; a writer changes
/// SQL Server (identity values it generates, updates to NULL and non-ASCII text, deletes);
/// `spec.cutover.goBack` goes back; PostgreSQL then equals SQL Server value by value, its sequence is past
/// what SQL Server generated, Change Tracking is off again in the target, and the Deployment is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn online_migration_to_sql_server_streams_back_and_goes_back() {
    let e2e = E2e::start_on("onrp", ONLINE_PASSWORD, Some("shop"), online_secrets).await;
    let (cluster, pg) = (&e2e.cluster, &e2e.pg);
    let schema = format!("e2e_onrp_{}", std::process::id());
    pg.batch_execute(&format!(
        "DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema};
         CREATE TABLE {schema}.acct (id int GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, name text NOT NULL,
                                     amount numeric(12,2), note text);
         INSERT INTO {schema}.acct (name, amount, note)
           SELECT 'nämé ' || g, g * 1.25, 'n' || g FROM generate_series(1, 500) g;"
    ))
    .await
    .unwrap();
    let _operator = e2e.start_operator("127.0.0.1:0");
    let diag = || e2e.diag();
    let (host, port, db) = pg_endpoint(&e2e.pg_cfg);
    cluster.apply(&format!(
        "apiVersion: mssqlpg.dev/v1alpha1
kind: Migration
metadata: {{name: onrp}}
spec:
  source: {{postgres: {{host: '{host}', port: {port}, database: '{db}', schema: {schema}, credentialsSecret: pg-creds, sslMode: disable}}}}
  target: {{mssql: {{host: 127.0.0.1, port: {mssql_port}, database: shop, schema: dbo, credentialsSecret: ms-creds, encryption: NotSupported}}}}
  verify: checksum
  online: {{enabled: true, pollInterval: 100ms, heartbeatSeconds: 1, maxBatchDelay: 100ms}}
  cutover: {{maxLagSeconds: 5, reverse: true}}
",
        mssql_port = e2e.mssql.port
    ));
    let status = |path: &str| cluster.get("migration", "onrp", path);
    let wait_for = |what: &str, done: &dyn Fn() -> bool| {
        let started = Instant::now();
        while !done() {
            assert!(started.elapsed() < Duration::from_secs(180), "{what}: {}", diag());
            std::thread::sleep(Duration::from_millis(500));
        }
    };
    e2e.wait_phase("onrp", "Streaming", Duration::from_secs(300));
    let (ok, out) = plugin(&e2e, &["cutover", "onrp", "--wait", "--timeout", "300"]);
    assert!(ok && out.contains("cut over at "), "{out}: {}", diag());
    wait_for("no reverse stream reported", &|| {
        ["CatchingUp", "Streaming"].contains(&status(".status.online.reverse.phase").as_str())
    });

    // The applications write to SQL Server now.
    let mut ms = e2e.mssql.connect().await.unwrap();
    for n in 0..40 {
        exec(
            &mut ms,
            &format!(
                "BEGIN TRANSACTION; INSERT INTO dbo.acct (name, amount, note) VALUES (N'nouveau ✓ {n}', {n}.25, NULL); \
                 UPDATE dbo.acct SET name = N'Zoë {n}', note = NULL, amount = NULL WHERE id = {}; \
                 DELETE FROM dbo.acct WHERE id = {}; COMMIT",
                1 + n,
                401 + n
            ),
        )
        .await;
    }
    wait_for("no change streamed back", &|| {
        status(".status.online.reverse.changesApplied")
            .parse::<i64>()
            .unwrap_or(0)
            >= 40
    });
    // Going back through the spec field itself.
    cluster.must(
        &[
            "patch",
            "migration",
            "onrp",
            "-n",
            &cluster.ns,
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"cutover":{"goBack":true}}}"#,
        ],
        None,
    );
    wait_for("not gone back", &|| {
        status(r#".status.conditions[?(@.type=="Reversing")].reason"#) == "WentBack"
    });

    // PostgreSQL equals SQL Server, value by value.
    let mut target = ms_rows(
        &mut ms,
        "SELECT CAST(id AS nvarchar(20)), name, CAST(amount AS nvarchar(40)), note FROM dbo.acct",
    )
    .await;
    target.sort();
    let rows = pg
        .query(
            &format!("SELECT id::text, name, amount::text, note FROM {schema}.acct"),
            &[],
        )
        .await
        .unwrap();
    let mut source: Vec<Vec<Option<String>>> = rows
        .iter()
        .map(|r| (0..r.len()).map(|i| r.get::<_, Option<String>>(i)).collect())
        .collect();
    source.sort();
    assert!(source.iter().any(|r| r[1].as_deref() == Some("nouveau ✓ 39")));
    assert_eq!(source.len(), target.len(), "row counts differ");
    for (s, t) in source.iter().zip(&target) {
        assert_eq!(s, t, "first differing row");
    }
    // The source's sequence is past the identity values SQL Server generated.
    let next: i32 = pg
        .query_one(
            &format!("INSERT INTO {schema}.acct (name) VALUES ('back') RETURNING id"),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(next > 540, "{next}");
    wait_for("the capture Deployment stays after going back", &|| {
        cluster
            .kubectl(&["get", "deployment", "onrp-capture", "-n", &cluster.ns], None)
            .is_err()
    });
    let tracked: i32 = {
        let rows = ms_rows(
            &mut ms,
            "SELECT CAST(COUNT(*) AS nvarchar(10)) FROM sys.change_tracking_tables",
        )
        .await;
        rows[0][0].as_deref().unwrap_or("-1").parse().unwrap()
    };
    assert_eq!(
        tracked, 0,
        "Change Tracking the reverse stream turned on is off again"
    );
    pg.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
        .await
        .unwrap();
    e2e.finish();
}

/// Deleting a Migration whose capture streams the target's changes back (`cutover.reverse`, after the
/// cutover) stops it, and the cleanup Job drops the reverse stream's slot and publication from the
/// PostgreSQL target before the Migration goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_migration_that_streams_back_drops_its_reverse_slot() {
    let e2e = E2e::start_on("onrd", ONLINE_PASSWORD, Some("shop"), online_secrets).await;
    let (cluster, pg) = (&e2e.cluster, &e2e.pg);
    let schema = format!("e2e_onrd_{}", std::process::id());
    pg.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
        .await
        .unwrap();
    let mut ms = e2e.mssql.connect().await.unwrap();
    exec(
        &mut ms,
        "CREATE TABLE dbo.acct (id bigint NOT NULL PRIMARY KEY, name nvarchar(200) NOT NULL); \
         INSERT INTO dbo.acct VALUES (1, N'one'), (2, N'two')",
    )
    .await;
    let _operator = e2e.start_operator("127.0.0.1:0");
    let diag = || e2e.diag();
    let (host, port, db) = pg_endpoint(&e2e.pg_cfg);
    cluster.apply(&format!(
        "apiVersion: mssqlpg.dev/v1alpha1
kind: Migration
metadata: {{name: onrd}}
spec:
  source: {{mssql: {{host: 127.0.0.1, port: {mssql_port}, database: shop, schema: dbo, credentialsSecret: ms-creds, encryption: NotSupported}}}}
  target: {{postgres: {{host: '{host}', port: {port}, database: '{db}', schema: {schema}, credentialsSecret: pg-creds, sslMode: disable}}}}
  online: {{enabled: true, enableChangeTracking: true, pollInterval: 100ms, heartbeatSeconds: 1}}
  cutover: {{requested: true, reverse: true}}
",
        mssql_port = e2e.mssql.port
    ));
    let status = |path: &str| cluster.get("migration", "onrd", path);
    let started = Instant::now();
    while status(".status.online.reverse.phase") != "Streaming" {
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "no reverse stream: {}",
            diag()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let stream_objects = || async {
        let tag = cluster.ns.replace('-', "_");
        let row = pg
            .query_one(
                "SELECT (SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE '%' || $1 || '%'), \
                 (SELECT count(*) FROM pg_publication WHERE pubname LIKE '%' || $1 || '%')",
                &[&tag],
            )
            .await
            .unwrap();
        (row.get::<_, i64>(0), row.get::<_, i64>(1))
    };
    assert_eq!(
        stream_objects().await,
        (1, 1),
        "the reverse stream's slot: {}",
        diag()
    );
    cluster.must(
        &["delete", "mig", "onrd", "-n", &cluster.ns, "--timeout=180s"],
        None,
    );
    assert_eq!(
        stream_objects().await,
        (0, 0),
        "the reverse slot and publication outlived the Migration: {}",
        diag()
    );
    pg.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
        .await
        .unwrap();
    e2e.finish();
}
