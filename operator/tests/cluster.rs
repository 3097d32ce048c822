//! The operator end to end against a real control plane (tests/control-plane/up.sh) with a fake worker:
//! runs tests/e2e/run.sh. Needs `MSSQLPG_K8S_DIR` (make test sets it):
//!   tests/control-plane/up.sh /tmp/k8s && MSSQLPG_K8S_DIR=/tmp/k8s cargo test -p mssql-pg-operator --test cluster

use std::path::PathBuf;
use std::process::Command;

#[test]
fn operator_end_to_end_with_fake_worker() {
    let dir = match std::env::var("MSSQLPG_K8S_DIR") {
        Ok(d) if !d.is_empty() => PathBuf::from(d),
        _ => panic!(
            "MSSQLPG_K8S_DIR is not set: this test needs a running control plane. Start one with \
             `tests/control-plane/up.sh DIR` and run with MSSQLPG_K8S_DIR=DIR (make test does this)."
        ),
    };
    let kubeconfig = dir.join("kubeconfig");
    assert!(
        kubeconfig.exists(),
        "{} is missing: is the control plane in {} up?",
        kubeconfig.display(),
        dir.display()
    );
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/e2e/run.sh");
    let output = Command::new("bash")
        .arg(script)
        .env("MSSQLPG_K8S_DIR", &dir)
        .env("KUBECONFIG", &kubeconfig)
        .env("MSSQLPG_OPERATOR_BIN", env!("CARGO_BIN_EXE_mssql-pg-operator"))
        .output()
        .unwrap_or_else(|e| panic!("running {script}: {e}"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "{script} failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    assert!(stdout.contains("e2e: OK"), "{stdout}\n{stderr}");
}
