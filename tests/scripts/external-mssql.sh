#!/usr/bin/env bash
# The test harness's switch to an external SQL Server (MSSQLPG_TEST_MSSQL, worker/tests/common/mod.rs), exercised
# without one: a second TDS test server, started here as its own process on its own port, plays the SQL Server
# someone points the suites at, and the worker's end-to-end suites run against it unchanged. The tests must have
# logged in there, more often than there are tests.
#   tests/scripts/external-mssql.sh [SUITE...]   default: e2e_testserver pg_to_mssql_e2e (both directions)
# Needs MSSQLPG_TEST_PG_URL (eval "$(tests/scripts/postgres.sh start)"; run-tests.sh provides it).
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${MSSQLPG_TEST_PG_URL:?start PostgreSQL first: eval \"\$(tests/scripts/postgres.sh start)\"}"
suites=("$@")
[ ${#suites[@]} -gt 0 ] || suites=(e2e_testserver pg_to_mssql_e2e)

cargo build -q --locked -p tds-testserver --bin tds-testserver
bin=${CARGO_TARGET_DIR:-$PWD/target}/debug/tds-testserver
work=$(mktemp -d /tmp/mssqlpg-external.XXXXXX)
password="External-$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')"
# Logins are logged at debug: they show the tests came here.
RUST_LOG=warn,tds_testserver::session=debug NO_COLOR=1 \
    "$bin" --listen 127.0.0.1:0 --user sa --password "$password" --database mssqlpg_test >"$work/out" 2>"$work/log" &
pid=$!
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -rf "$work"' EXIT
port=""
for _ in $(seq 1 300); do
    port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$work/out" | head -n 1)
    [ -n "$port" ] && break
    sleep 0.1
done
[ -n "$port" ] || { cat "$work/log" >&2; echo "external-mssql.sh: the test server did not start" >&2; exit 1; }

tests=()
for s in "${suites[@]}"; do tests+=(--test "$s"); done
echo "external-mssql.sh: ${suites[*]} against the test server on 127.0.0.1:$port (MSSQLPG_TEST_MSSQL)"
MSSQLPG_TEST_MSSQL="127.0.0.1:$port" MSSQLPG_TEST_MSSQL_PASSWORD="$password" \
    cargo test -q --locked -p mssql-pg-worker "${tests[@]}" 2>&1 | tee "$work/cargo.log"
rc=${PIPESTATUS[0]}
[ "$rc" = 0 ] || { echo "external-mssql.sh: FAILED against the external server" >&2; exit 1; }
logins=$(grep -c "logged in" "$work/log" || true)
ran=$(sed -n 's/^test result: ok\. \([0-9]*\) passed.*/\1/p' "$work/cargo.log" | awk '{ n += $1 } END { print n + 0 }')
[ "${logins:-0}" -gt "${ran:-0}" ] ||
    { echo "external-mssql.sh: only ${logins:-0} logins on the external server for ${ran:-0} tests" >&2; exit 1; }
echo "external-mssql.sh: ${ran} tests of ${suites[*]} passed against the external server ($logins logins there)"
