#!/usr/bin/env bash
# Runs the test suites against a private PostgreSQL and a loopback Kubernetes control plane that
# live exactly as long as this script.
#   run-tests.sh            all suites
#   run-tests.sh rust       cargo test --workspace (with PostgreSQL and the control plane), then the worker's
#                           e2e suites against a separately started test server (tests/scripts/external-mssql.sh)
#   run-tests.sh clients    cross-client fidelity tests (FreeTDS tsql/freebcp, pytds) against the TDS test server
#   run-tests.sh helm       helm lint / template / server-side apply of the chart (needs the control plane)
#   run-tests.sh adventureworks  AdventureWorks through the worker binary both ways, every value and
#                           CHECK compared by pytds and psql (tests/adventure_works/run.sh)
# The Kubernetes binaries are built once into ~/.cache/mssql-pg-operator (tests/control-plane/build.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
what=${1:-all}

k8s_dir=""
cleanup() {
  if [ -n "$k8s_dir" ]; then tests/control-plane/down.sh "$k8s_dir" || true; fi
  if [ -n "${MSSQLPG_TEST_PG_DIR:-}" ]; then tests/scripts/postgres.sh stop "$MSSQLPG_TEST_PG_DIR" || true; fi
}
trap cleanup EXIT

eval "$(tests/scripts/postgres.sh start)"

needs_cluster=0
case "$what" in all | rust | helm) needs_cluster=1 ;; esac
if [ $needs_cluster = 1 ]; then
  # On a fresh machine the Kubernetes build (Go, one core) overlaps the Rust build below; build.sh holds a
  # lock, so a build already started by `make test` is waited for, not repeated.
  mkdir -p "${MSSQLPG_CACHE:-$HOME/.cache/mssql-pg-operator}"
  k8s_build_log="${MSSQLPG_CACHE:-$HOME/.cache/mssql-pg-operator}/k8s-build.log"
  tests/control-plane/build.sh >"$k8s_build_log" 2>&1 &
  k8s_build_pid=$!
fi

# A full disk shows up as odd compiler errors; say how much there was.
df -h . | sed 's/^/run-tests.sh: disk: /' >&2

failed=()
if [ "$what" = all ] || [ "$what" = rust ]; then
  # Pods on the loopback node run the freshly built debug binaries (MSSQLPG_NODE_PATH default).
  cargo build --workspace --locked --bins
  cargo test --workspace --locked --no-run
fi
if [ $needs_cluster = 1 ]; then
  wait "$k8s_build_pid" || { cat "$k8s_build_log" >&2; echo "run-tests.sh: building Kubernetes failed" >&2; exit 1; }
  k8s_dir=$(mktemp -d /tmp/mssqlpg-k8s.XXXXXX)
  tests/control-plane/up.sh "$k8s_dir"
  export MSSQLPG_K8S_DIR="$k8s_dir"
fi
if [ "$what" = all ] || [ "$what" = rust ]; then
  cargo test --workspace --locked --no-fail-fast || failed+=("cargo test")
  # The harness's switch to an external SQL Server, against a second, separately started test server.
  tests/scripts/external-mssql.sh || failed+=("worker e2e suites against an external server (external-mssql.sh)")
fi
if [ "$what" = all ] || [ "$what" = clients ]; then
  cargo build -q --locked -p tds-testserver --bin tds-testserver
  TDS_TESTSERVER_BIN="${CARGO_TARGET_DIR:-$PWD/target}/debug/tds-testserver" .venv/bin/python -m pytest -q tests/clients \
    || failed+=("cross-client tests")
fi
if [ "$what" = all ] || [ "$what" = adventureworks ]; then
  tests/adventure_works/run.sh || failed+=("AdventureWorks comparison")
fi
if { [ "$what" = all ] || [ "$what" = helm ]; } && [ -x tests/helm/run.sh ]; then
  tests/helm/run.sh "$k8s_dir" || failed+=("helm chart tests")
fi

if [ ${#failed[@]} -gt 0 ]; then
  echo "run-tests.sh: FAILED: ${failed[*]}" >&2
  if [ -n "$k8s_dir" ]; then echo "run-tests.sh: control-plane logs in $k8s_dir/logs" >&2; fi
  exit 1
fi
echo "run-tests.sh: all passed"
