#!/usr/bin/env bash
# AdventureWorks migrated by the worker binary, then checked by clients that share no code with it:
#   0. test_rules.py: the comparison's rules (pytest, no database);
#   1. the TDS test server loads Microsoft's instawdb.sql as written (demo/load_script.py, pytds);
#   2. `mssql-pg-worker run -f` migrates every schema into a fresh PostgreSQL database;
#   3. compare_values.py reads every table of both (pytds, psql) and compares every value by key;
#   4. compare_checks.py tries rows that each CHECK accepts and refuses on both sides, and compares
#      the computed columns of made-up rows in the tables the sample leaves empty;
#   5. compare_keys.py tries rows that each FK, unique key and default must treat alike on both
#      sides (child rows pointing at existing and missing parents, parents deleted and re-keyed,
#      duplicate and new keys, rows inserted without their defaulted columns), each rolled back;
#   6. `mssql-pg-worker run -f` migrates the PostgreSQL database into a fresh test server (while 3
#      to 5 run), and that is compared with PostgreSQL and with the original, and its CHECKs, keys
#      and defaults with PostgreSQL's, the same way.
# Needs MSSQLPG_TEST_PG_PORT (tests/scripts/postgres.sh start; run-tests.sh provides it), the venv
# with pytds (make deps) and the sample at ../shared/sample-databases (or AW_DIR).
# With MSSQLPG_TEST_MSSQL=host:port (and MSSQLPG_TEST_MSSQL_PASSWORD, _USER, _DATABASE, _AW_DIR as the worker's
# tests read them: README, "Against a real SQL Server") the SQL Server sides are that server instead of test
# servers: the sample goes into its test database (recreated by the install script; _AW_DIR is the sample's folder
# as the server sees it) and the way back into <database>_back (dropped and created here).
#   tests/adventure_works/run.sh            all of it
#   AW_SKIP_BACK=1 tests/adventure_works/run.sh   without step 6
# Python's output is unbuffered so that the steps' lines interleave in order.
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$PWD
: "${MSSQLPG_TEST_PG_PORT:?start PostgreSQL first: eval \"\$(tests/scripts/postgres.sh start)\"}"
AW_DIR=${AW_DIR:-$repo/../shared/sample-databases/adventure-works-oltp}
AW_DIR=$(cd "$AW_DIR" && pwd)
py=$repo/.venv/bin/python
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
psql_bin=$(command -v psql || ls /usr/lib/postgresql/*/bin/psql | tail -n 1)
pg_host=127.0.0.1
pg_port=$MSSQLPG_TEST_PG_PORT
password="Aw-$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')"
ms_host=127.0.0.1 ms_user=sa ms_dir=$AW_DIR
src_db=AdventureWorks back_db=AdventureWorksBack
external=${MSSQLPG_TEST_MSSQL:-}
if [ -n "$external" ]; then
  ms_host=${external%:*} ms_user=${MSSQLPG_TEST_MSSQL_USER:-sa} ms_dir=${MSSQLPG_TEST_MSSQL_AW_DIR:-$AW_DIR}
  password=${MSSQLPG_TEST_MSSQL_PASSWORD:?MSSQLPG_TEST_MSSQL is set: MSSQLPG_TEST_MSSQL_PASSWORD is needed too}
  src_db=${MSSQLPG_TEST_MSSQL_DATABASE:-mssqlpg_test} back_db=${MSSQLPG_TEST_MSSQL_DATABASE:-mssqlpg_test}_back
fi
db=aw_compare_$$
work=$(mktemp -d /tmp/mssqlpg-aw.XXXXXX)
pids=()

say() { printf '\n== %s (%ss)\n' "$*" "$SECONDS"; }
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  "$psql_bin" -X -q -h "$pg_host" -p "$pg_port" -U postgres -d postgres \
    -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

# The comparison's own rules first (seconds, no database): a rule that says "equal" wrongly would
# hide every difference below.
"$py" -m pytest -q -p no:cacheprovider tests/adventure_works/test_rules.py

cargo build -q --locked -p mssql-pg-worker -p tds-testserver --bins
bin=${CARGO_TARGET_DIR:-$repo/target}/debug

# Starts a test server for DATABASE on a free port and sets $port (not in a subshell: its pid
# must reach the cleanup). With an external server: sets its $port, and for the way back makes DATABASE
# empty there (the install script recreates the source's itself).
start_server() {
  local name=$1 database=$2; shift 2
  if [ -n "$external" ]; then
    port=${external##*:}
    [ "$name" = source ] && return 0
    "$py" - "$ms_host" "$port" "$ms_user" "$password" "$database" <<'PY'
import sys

import pytds

host, port, user, password, database = sys.argv[1:]
with pytds.connect(server=host, port=int(port), user=user, password=password, database="master",
                   autocommit=True) as conn, conn.cursor() as cur:
    cur.execute(f"IF DB_ID(N'{database}') IS NOT NULL DROP DATABASE [{database}]")
    cur.execute(f"CREATE DATABASE [{database}]")
PY
    return 0
  fi
  : >"$work/$name.log"
  "$bin/tds-testserver" --listen 127.0.0.1:0 --user sa --password "$password" --database "$database" "$@" \
    >"$work/$name.log" 2>&1 &
  pids+=($!)
  port=""
  for _ in $(seq 1 300); do
    port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$work/$name.log" | head -n 1)
    [ -n "$port" ] && break
    sleep 0.1
  done
  [ -n "$port" ] || { cat "$work/$name.log" >&2; echo "run.sh: the $name test server did not start" >&2; exit 1; }
}

# Runs the worker on a Migration YAML; the JSON summary lands in $work/NAME.out.
run_worker() {
  local name=$1
  if ! "$bin/mssql-pg-worker" run -f "$work/$name.yaml" >"$work/$name.out" 2>"$work/$name.err"; then
    grep -v 'TLS encryption is not enabled' "$work/$name.err" | tail -n 30 >&2
    echo "run.sh: the worker failed ($name)" >&2
    exit 1
  fi
}

say "loading AdventureWorks into ${external:-the TDS test server} (instawdb.sql, batch by batch)"
start_server source "$src_db" --bulk-insert-dir "$AW_DIR"
src_port=$port
# From master: the script drops and creates its database.
"$py" demo/load_script.py "$ms_host" "$src_port" "$ms_user" "$password" master "$AW_DIR/instawdb.sql" \
  "SqlSamplesSourceDataPath=$ms_dir/" "DatabaseName=$src_db" >"$work/load.out"
head -n 1 "$work/load.out"
# The exact list of refused batches is the test server's own test; here a load that mostly failed stops the run.
ran=$(sed -n 's/^\([0-9]*\) batches run.*/\1/p' "$work/load.out")
[ "${ran:-0}" -ge 400 ] || { cat "$work/load.out" >&2; echo "run.sh: the install script did not load" >&2; exit 1; }

say "SQL Server -> PostgreSQL: mssql-pg-worker run -f (every schema)"
"$psql_bin" -X -q -h "$pg_host" -p "$pg_port" -U postgres -d postgres -c "CREATE DATABASE $db"
cat >"$work/forward.yaml" <<YAML
apiVersion: mssqlpg.dev/v1alpha1
kind: Migration
metadata: {name: aw-forward, namespace: tests}
spec:
  source:
    mssql: {host: $ms_host, port: $src_port, database: $src_db, schema: dbo, schemas: ["*"], encryption: NotSupported}
  target:
    postgres: {host: $pg_host, port: $pg_port, database: $db, schema: public, sslMode: disable}
  verify: checksum
YAML
SOURCE_USERNAME=$ms_user SOURCE_PASSWORD=$password TARGET_USERNAME=postgres TARGET_PASSWORD='' RUST_LOG=warn \
  run_worker forward

src_url="mssql://$ms_user:$password@$ms_host:$src_port/$src_db"
pg_url="postgres://postgres@$pg_host:$pg_port/$db"
failed=()

# The way back reads only PostgreSQL, so it runs while the first leg is compared.
back=0
if [ "${AW_SKIP_BACK:-0}" != 1 ]; then
  back=1
  start_server back "$back_db"
  back_port=$port
  cat >"$work/back.yaml" <<YAML
apiVersion: mssqlpg.dev/v1alpha1
kind: Migration
metadata: {name: aw-back, namespace: tests}
spec:
  source:
    postgres: {host: $pg_host, port: $pg_port, database: $db, schema: public, schemas: ["*"], sslMode: disable}
  target:
    mssql: {host: $ms_host, port: $back_port, database: $back_db, schema: dbo, encryption: NotSupported}
  verify: checksum
YAML
  say "PostgreSQL -> a fresh SQL Server: mssql-pg-worker run -f (every schema), in the background"
  (SOURCE_USERNAME=postgres SOURCE_PASSWORD='' TARGET_USERNAME=$ms_user TARGET_PASSWORD=$password RUST_LOG=warn \
    run_worker back) &
  back_pid=$!
  pids+=("$back_pid")
fi

cd tests/adventure_works
say "every value, SQL Server (pytds) vs PostgreSQL (psql)"
"$py" compare_values.py "$src_url" "$pg_url" || failed+=("values SQL Server -> PostgreSQL")
say "every CHECK accepts and refuses the same rows, SQL Server vs PostgreSQL"
"$py" compare_checks.py "$src_url" "$pg_url" --worker-summary "$work/forward.out" \
  || failed+=("CHECKs SQL Server -> PostgreSQL")
say "every FK, unique key and default enforces and gives the same, SQL Server vs PostgreSQL"
"$py" compare_keys.py "$src_url" "$pg_url" --worker-summary "$work/forward.out" \
  || failed+=("keys and defaults SQL Server -> PostgreSQL")

if [ $back = 1 ]; then
  wait "$back_pid" || { echo "run.sh: the way back failed" >&2; exit 1; }
  back_url="mssql://$ms_user:$password@$ms_host:$back_port/$back_db"
  say "every value, PostgreSQL (psql) vs the SQL Server it was migrated into (pytds); the original vs it"
  # Two readers at once: each mostly waits on its servers.
  "$py" compare_values.py "$src_url" "$back_url" >"$work/roundtrip.txt" 2>&1 &
  roundtrip_pid=$!
  "$py" compare_values.py "$pg_url" "$back_url" || failed+=("values PostgreSQL -> SQL Server")
  roundtrip=0
  wait "$roundtrip_pid" || roundtrip=$?
  echo "-- the original SQL Server vs the round trip's (both pytds):"
  cat "$work/roundtrip.txt"
  [ $roundtrip = 0 ] || failed+=("values after the round trip")
  say "every CHECK of the SQL Server migrated into, vs PostgreSQL"
  "$py" compare_checks.py "$back_url" "$pg_url" --worker-summary "$work/back.out" --sqlserver-is-target \
    || failed+=("CHECKs PostgreSQL -> SQL Server")
  say "every FK, unique key and default of the SQL Server migrated into, vs PostgreSQL"
  "$py" compare_keys.py "$back_url" "$pg_url" --worker-summary "$work/back.out" --sqlserver-is-target \
    || failed+=("keys and defaults PostgreSQL -> SQL Server")
fi

say "done"
if [ ${#failed[@]} -gt 0 ]; then
  echo "tests/adventure_works: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "tests/adventure_works: all passed"
