#!/usr/bin/env bash
# Runs the test suites against a private PostgreSQL that lives exactly as long as this script.
#   run-tests.sh            all suites
#   run-tests.sh rust       cargo test --workspace
#   run-tests.sh clients    cross-client fidelity tests (FreeTDS tsql/freebcp, pytds) against the TDS test server
set -euo pipefail
cd "$(dirname "$0")/../.."
what=${1:-all}

eval "$(tests/scripts/postgres.sh start)"
trap 'tests/scripts/postgres.sh stop "$MSSQLPG_TEST_PG_DIR"' EXIT

failed=0
if [ "$what" = all ] || [ "$what" = rust ]; then
  cargo test --workspace --locked || failed=1
fi
if [ "$what" = all ] || [ "$what" = clients ]; then
  cargo build -q -p tds-testserver --bin tds-testserver
  TDS_TESTSERVER_BIN="$PWD/target/debug/tds-testserver" .venv/bin/python -m pytest -q tests/clients || failed=1
fi
exit $failed
