//! The Migration's aggregate follows its tasks while workers keep reporting: against a real control plane
//! (tests/control-plane/up.sh), the operator (periodic requeue set to an hour, so only watch events can bring
//! the change) runs a Migration whose copy Job holds its tasks (tests/e2e/fake-worker.sh, a Migration named
//! `hold*`); this test plays the workers, patching one task's progress every 100 ms, and marks another task
//! Succeeded. The Migration's status must count it while the progress reports go on: a trailing debounce
//! reset by every report kept the aggregate at 0/12 in `make demo` while five tasks had succeeded.
//!
//! Needs `MSSQLPG_K8S_DIR` (make test sets it):
//!   MSSQLPG_K8S_DIR=/tmp/k8s cargo test -p mssql-pg-operator --test status_follows_tasks
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use kube::api::{Api, Patch, PatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use mssql_pg_crds::{Migration, MigrationTask};
use serde_json::json;

const E2E: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/e2e");
/// How long the test waits for the aggregate at most; the progress reports go on all that time.
const PATIENCE: Duration = Duration::from_secs(180);

fn kubectl(kubeconfig: &Path, args: &[&str], stdin: Option<&str>) -> Result<String, String> {
    let mut child = Command::new("kubectl")
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("kubectl: {e}"))?;
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

/// The namespace, the operator process and its log; all removed on drop.
struct Setup {
    kubeconfig: PathBuf,
    ns: String,
    operator: Option<Child>,
    log: PathBuf,
}

impl Setup {
    fn must(&self, args: &[&str], stdin: Option<&str>) -> String {
        kubectl(&self.kubeconfig, args, stdin).unwrap_or_else(|e| panic!("{e}"))
    }

    fn diagnostics(&self) -> String {
        let objects = kubectl(
            &self.kubeconfig,
            &["get", "mig,mtask,jobs", "-n", &self.ns, "-o", "wide"],
            None,
        )
        .unwrap_or_else(|e| e);
        let status = kubectl(
            &self.kubeconfig,
            &["get", "mig", "hold", "-n", &self.ns, "-o", "jsonpath={.status}"],
            None,
        )
        .unwrap_or_else(|e| e);
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(40).collect();
        format!(
            "{objects}\nstatus: {status}\n--- operator log (tail)\n{}",
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        )
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        if let Some(mut op) = self.operator.take() {
            let _ = op.kill();
            let _ = op.wait();
        }
        let _ = kubectl(
            &self.kubeconfig,
            &["delete", "ns", &self.ns, "--wait=false"],
            None,
        );
    }
}

fn setup(dir: &Path) -> Setup {
    let kubeconfig = dir.join("kubeconfig");
    assert!(
        kubeconfig.exists(),
        "{} is missing: is the control plane in {} up?",
        kubeconfig.display(),
        dir.display()
    );
    let ns = format!("follow-{}", std::process::id());
    let work = std::env::temp_dir().join(format!("mssqlpg-{ns}"));
    std::fs::create_dir_all(&work).unwrap();
    let mut s = Setup {
        kubeconfig,
        ns,
        operator: None,
        log: work.join("operator.log"),
    };
    let crds = concat!(env!("CARGO_MANIFEST_DIR"), "/../crds/generated/");
    s.must(&["apply", "--server-side", "-f", crds], None);
    s.must(
        &[
            "wait",
            "--for=condition=Established",
            "crd/migrations.mssqlpg.dev",
            "crd/migrationtasks.mssqlpg.dev",
            "--timeout=60s",
        ],
        None,
    );
    s.must(&["create", "ns", &s.ns], None);
    // The worker's RBAC (the fake worker's plan step creates the tasks) and the Secrets the Jobs reference.
    s.must(
        &["apply", "-n", &s.ns, "-f", "-"],
        Some(
            r#"
apiVersion: v1
kind: ServiceAccount
metadata: {name: mssql-pg-worker}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: mssql-pg-worker}
rules:
- apiGroups: [mssqlpg.dev]
  resources: [migrations]
  verbs: [get]
- apiGroups: [mssqlpg.dev]
  resources: [migrations/status, migrationtasks/status]
  verbs: [get, patch]
- apiGroups: [mssqlpg.dev]
  resources: [migrationtasks]
  verbs: [get, list, create, patch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: mssql-pg-worker}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: mssql-pg-worker}
subjects: [{kind: ServiceAccount, name: mssql-pg-worker}]
---
apiVersion: v1
kind: Secret
metadata: {name: src-creds}
stringData: {username: sa, password: follow-src-secret}
---
apiVersion: v1
kind: Secret
metadata: {name: dst-creds}
stringData: {username: pg, password: follow-dst-secret}
"#,
        ),
    );
    // The operator runs with the documented RBAC, as the tester identity when the control plane has one.
    s.must(&["apply", "-f", &format!("{E2E}/operator-rbac.yaml")], None);
    s.must(
        &[
            "create",
            "rolebinding",
            "mssql-pg-operator-e2e-jobs",
            "-n",
            &s.ns,
            "--clusterrole=mssql-pg-operator-e2e-jobs",
            "--user=tester",
        ],
        None,
    );
    let op_kubeconfig = match dir.join("kubeconfig-tester") {
        p if p.exists() => p,
        _ => s.kubeconfig.clone(),
    };
    let log = std::fs::File::create(&s.log).unwrap();
    s.operator = Some(
        Command::new(env!("CARGO_BIN_EXE_mssql-pg-operator"))
            .env("KUBECONFIG", op_kubeconfig)
            .env("METRICS_ADDR", "127.0.0.1:0")
            .env("WATCH_NAMESPACE", &s.ns)
            .env("MSSQLPG_WORKER_COMMAND", format!("{E2E}/fake-worker.sh"))
            // Only watch events can bring a task's change within the test.
            .env("MSSQLPG_REQUEUE_SECONDS", "3600")
            .env("RUST_LOG", "info,mssql_pg_operator=debug")
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("starting the operator"),
    );
    s
}

async fn client(kubeconfig: &Path) -> kube::Client {
    let config = kube::Config::from_custom_kubeconfig(
        Kubeconfig::read_from(kubeconfig).unwrap(),
        &KubeConfigOptions::default(),
    )
    .await
    .unwrap();
    kube::Client::try_from(config).unwrap()
}

async fn wait_for<F: Fn(&Migration) -> bool>(
    api: &Api<Migration>,
    what: &str,
    setup: &Setup,
    pred: F,
) -> Migration {
    let started = Instant::now();
    loop {
        if let Ok(m) = api.get("hold").await
            && pred(&m)
        {
            return m;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "{what}: not within {PATIENCE:?}\n{}",
            setup.diagnostics()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_status_change_reaches_the_migration_while_workers_keep_reporting() {
    let dir = match std::env::var("MSSQLPG_K8S_DIR") {
        Ok(d) if !d.is_empty() => PathBuf::from(d),
        _ => panic!(
            "MSSQLPG_K8S_DIR is not set: this test needs a running control plane. Start one with \
             `tests/control-plane/up.sh DIR` and run with MSSQLPG_K8S_DIR=DIR (make test does this)."
        ),
    };
    let setup = setup(&dir);
    setup.must(
        &["apply", "-n", &setup.ns, "-f", "-"],
        Some(
            r#"
apiVersion: mssqlpg.dev/v1alpha1
kind: Migration
metadata: {name: hold}
spec:
  source: {mssql: {host: sql.invalid, database: db, credentialsSecret: src-creds}}
  target: {postgres: {host: pg.invalid, database: db, credentialsSecret: dst-creds}}
  parallelism: 2
"#,
        ),
    );
    let client = client(&setup.kubeconfig).await;
    let migrations: Api<Migration> = Api::namespaced(client.clone(), &setup.ns);
    let tasks: Api<MigrationTask> = Api::namespaced(client, &setup.ns);
    // The plan made three tasks and the copy Job holding them runs.
    let copying = wait_for(&migrations, "Copying with 3 tasks running", &setup, |m| {
        m.status.as_ref().is_some_and(|s| {
            s.phase.map(|p| p.as_str()) == Some("Copying") && s.tasks_total == 3 && s.tasks_running == 3
        })
    })
    .await;
    assert_eq!(copying.status.as_ref().unwrap().tasks_succeeded, 0);

    // A worker reporting progress every 100 ms, for as long as the test waits.
    let reporting = Arc::new(AtomicBool::new(true));
    let reports = Arc::new(AtomicU64::new(0));
    let reporter = {
        let (tasks, reporting, reports) = (tasks.clone(), reporting.clone(), reports.clone());
        tokio::spawn(async move {
            let mut rows = 0_i64;
            while reporting.load(Ordering::Relaxed) {
                rows += 10;
                let patch = Patch::Merge(
                    json!({"status": {"state": "Running", "rowsCopied": rows, "rowsPerSecond": 100}}),
                );
                if tasks
                    .patch_status("hold-t0", &PatchParams::default(), &patch)
                    .await
                    .is_ok()
                {
                    reports.fetch_add(1, Ordering::Relaxed);
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    while reports.load(Ordering::Relaxed) < 10 {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let done = Patch::Merge(json!({"status": {
        "state": "Succeeded",
        "rowsCopied": 2000,
        "bytesCopied": 200_000,
        "startedAt": "2026-01-01T00:00:00Z",
        "completedAt": "2026-01-01T00:00:02Z",
    }}));
    tasks
        .patch_status("hold-t1", &PatchParams::default(), &done)
        .await
        .unwrap();
    let before = reports.load(Ordering::Relaxed);
    let followed = wait_for(
        &migrations,
        "the Migration counting hold-t1 Succeeded",
        &setup,
        |m| {
            m.status
                .as_ref()
                .is_some_and(|s| s.tasks_succeeded == 1 && s.rows_copied >= 2000)
        },
    )
    .await;
    let during = reports.load(Ordering::Relaxed) - before;
    reporting.store(false, Ordering::Relaxed);
    reporter.await.unwrap();
    let status = followed.status.unwrap();
    assert_eq!(status.progress.as_deref(), Some("1/3"), "{}", setup.diagnostics());
    // The progress reports went on while the operator caught up: it did not wait for them to pause.
    assert!(
        during > 0,
        "no progress report while waiting\n{}",
        setup.diagnostics()
    );
    println!("the Migration counted the task after {during} more progress reports of another task");
}
