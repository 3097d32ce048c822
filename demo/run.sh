#!/usr/bin/env bash
# `make demo`: one real migration, end to end, on this machine, with nothing but the repository.
#
#   1. installs what is missing (tests/scripts/install-deps.sh), builds the Kubernetes binaries once
#      (tests/control-plane/build.sh, cached) and the project's binaries (cargo build)
#   2. starts a loopback Kubernetes control plane, a private PostgreSQL and the TDS test server (the SQL Server
#      stand-in), and seeds the latter with the StackOverflow-shaped sample database (bench generator)
#   3. installs the Helm chart (CRDs, RBAC, the operator Deployment: the node agent runs its pods as local
#      processes, so the operator runs with exactly the chart's service account and RBAC)
#   4. applies deploy/examples/mssql-to-postgres.yaml, adapted to the local ports, shows live progress and ends
#      with the Migration's status (rows, rows/s, peak memory, verification) and the metrics endpoint
#   5. renders the dashboard's main panels over the run from its own Prometheus into a PNG (demo/render_dashboard.py)
#   6. stops everything it started (DEMO_KEEP=1 leaves it running; `make demo-down` stops it later)
#
# DEMO_ONLINE=1 shows an online migration instead: PostgreSQL (a shop's customers and orders, DEMO_SCALE as
# above) -> the TDS test server, with a writer changing the source throughout; the lag in `kubectl get mig` while
# it streams; the writer stops and `kubectl mssqlpg cutover --wait` cuts over and prints the downtime; both sides
# counted and summed at the end.
#
# Environment: DEMO_DB (`stackoverflow`, the default, or `adventureworks`: Microsoft's AdventureWorks OLTP loaded by
# its own install script from ../shared/sample-databases and migrated whole, every schema), DEMO_SCALE (sample
# size, default 0.005 = 97k rows; 1.0 = 19.3M), DEMO_DIR (state, default
# /tmp/mssqlpg-demo), DEMO_TIMEOUT (seconds for the migration, default 900), DEMO_KEEP=1, DEMO_PNG (the dashboard
# picture, default /tmp/mssqlpg-demo-dashboard.png; DEMO_PNG=demo/dashboard.png refreshes the README's).
set -euo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
cd "$REPO"
SCALE="${DEMO_SCALE:-0.005}"
DB="${DEMO_DB:-stackoverflow}"
case "$DB" in
    stackoverflow) SRC_DB=StackOverflow2010 ;;
    adventureworks)
        SRC_DB=AdventureWorks
        AW_DIR="$(cd "$REPO/../shared/sample-databases/adventure-works-oltp" 2>/dev/null && pwd)" \
            || { echo "demo: DEMO_DB=adventureworks needs ../shared/sample-databases/adventure-works-oltp" >&2; exit 1; }
        ;;
    *) echo "demo: DEMO_DB is stackoverflow or adventureworks, not '$DB'" >&2; exit 1 ;;
esac
DIR="${DEMO_DIR:-/tmp/mssqlpg-demo}"
TIMEOUT="${DEMO_TIMEOUT:-900}"
PNG="${DEMO_PNG:-$DIR-dashboard.png}"
NS=demo
MIG="${DEMO_DB:-stackoverflow}-to-postgres"
ONLINE="${DEMO_ONLINE:-0}"
if [ "$ONLINE" = 1 ]; then
    DB=shop
    SRC_DB=Shop
    MIG=shop-to-mssql
fi

say() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }
die() { echo "demo: $*" >&2; exit 1; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }

# DEMO_ONLINE=1, from the Migration on: a writer keeps changing the source, the lag shows while it streams, the
# writer stops, the plugin cuts over, both sides are counted.
online_demo() {
    say "a writer changes the source throughout: small transactions of inserts, updates and deletes"
    rm -f "$DIR/writer.stop"
    python3 - "$DIR/writer.stop" "$ROWS" <<'PY' | "$PSQL" -q -h 127.0.0.1 -p "$PG_PORT" -U postgres -d "$DB" >"$DIR/writer.log" 2>&1 &
import os, random, sys, time
stop, rows = sys.argv[1], int(sys.argv[2])
customers, orders = rows // 5, rows - rows // 5
rng = random.Random(7)
n = 0
while not os.path.exists(stop):
    order = rng.randint(1, orders)
    print("BEGIN;")
    orders += 1
    print(f"INSERT INTO orders VALUES ({orders}, {rng.randint(1, customers)}, {rng.randint(1, 99999) / 100}, 'new', now());")
    print(f"UPDATE orders SET status = 'paid', amount = amount + 1, updated = now() WHERE id = {order};")
    if n % 5 == 0:
        print(f"DELETE FROM orders WHERE id = {rng.randint(1, orders)};")
    if n % 20 == 0:
        customers += 1
        print(f"INSERT INTO customers VALUES ({customers}, 'customer {customers}', NULL, now());")
    print("COMMIT;", flush=True)
    n += 1
    time.sleep(0.02)
print(f"\\echo writer: {n} transactions", flush=True)
PY
    echo "writer=$!" >>"$DIR/state"
    kubectl apply -f "$DIR/migration.yaml"

    say "live progress: the capture anchors the stream, the copy Jobs run, then it streams (LAG)"
    local started=$SECONDS phase="" last="" streaming_since=""
    while [ $((SECONDS - started)) -lt "$TIMEOUT" ]; do
        phase="$(kubectl get mig "$MIG" -n "$NS" -o jsonpath='{.status.phase}')"
        now="$(kubectl get mig,deploy,jobs -n "$NS" 2>/dev/null)"
        if [ "$now" != "$last" ] || [ "$phase" = Streaming ]; then
            printf '\n[%4ss]\n%s\n' $((SECONDS - started)) "$now"
            last="$now"
        fi
        [ "$phase" = Failed ] && die "the Migration failed: $(kubectl get mig "$MIG" -n "$NS" -o jsonpath='{.status.lastError}')"
        if [ "$phase" = Streaming ]; then
            streaming_since="${streaming_since:-$SECONDS}"
            # A few seconds of steady streaming under the writer's load, for the lag to show.
            [ $((SECONDS - streaming_since)) -ge 12 ] && break
        fi
        sleep 2
    done
    [ "$phase" = Streaming ] || die "the Migration did not reach Streaming within ${TIMEOUT}s (phase '$phase')"

    say "kubectl mssqlpg status $MIG"
    "$TARGET/kubectl-mssqlpg" status "$MIG" -n "$NS"

    say "the applications stop writing; then: kubectl mssqlpg cutover $MIG --wait"
    touch "$DIR/writer.stop"
    sleep 1
    cat "$DIR/writer.log"
    "$TARGET/kubectl-mssqlpg" cutover "$MIG" -n "$NS" --wait --timeout 300 || die "the cutover did not succeed"

    say "result"
    kubectl get mig "$MIG" -n "$NS"
    local jp='{.status.online.downtimeSeconds}'
    printf '%-22s %s\n' "downtime (s)" "$(kubectl get mig "$MIG" -n "$NS" -o jsonpath="$jp")" \
        "changes streamed" "$(kubectl get mig "$MIG" -n "$NS" -o jsonpath='{.status.online.changesApplied}')" \
        "fence" "$(kubectl get mig "$MIG" -n "$NS" -o jsonpath='{.status.online.fencePosition}')" \
        "verified" "$(kubectl get mig "$MIG" -n "$NS" -o jsonpath='{.status.conditions[?(@.type=="Verified")].status}')"
    say "both sides counted and summed (PostgreSQL through psql, SQL Server through pytds)"
    for table in customers orders; do
        local sum="count(*)"
        [ "$table" = orders ] && sum="count(*) || ' rows, amount ' || sum(amount)"
        printf '  PostgreSQL  %-10s %s\n' "$table" \
            "$("$PSQL" -h 127.0.0.1 -p "$PG_PORT" -U postgres -d "$DB" -At -c "SELECT $sum FROM $table")"
    done
    "$REPO/.venv/bin/python" - <<PY
import pytds
with pytds.connect("127.0.0.1", "$SRC_DB", "sa", "$TDS_PASSWORD", port=$TDS_PORT) as c, c.cursor() as cur:
    cur.execute("SELECT COUNT(*) FROM dbo.customers")
    print(f"  SQL Server  customers  {cur.fetchone()[0]}")
    cur.execute("SELECT COUNT(*), SUM(amount) FROM dbo.orders")
    n, total = cur.fetchone()
    print(f"  SQL Server  orders     {n} rows, amount {total}")
PY
    say "the dashboard over this run (its own queries, from Prometheus's query_range): $PNG"
    sleep 3
    "$REPO/.venv/bin/python" demo/render_dashboard.py --prometheus "$PROM_URL" --namespace "$NS" --migration "$MIG" \
        --start "$((RUN_START - 5))" --end "$(date +%s)" --out "$PNG" || true
}

if [ -e "$DIR/state" ]; then
    echo "demo: a previous demo left things in $DIR; stopping them first" >&2
    demo/down.sh
fi
mkdir -p "$DIR"
: >"$DIR/state"
cleanup() {
    local rc=$?
    if [ "${DEMO_KEEP:-0}" = 1 ] && [ $rc = 0 ]; then
        say "left running (DEMO_KEEP=1): source $DIR/k8s/env; stop with: make demo-down"
    else
        if [ $rc != 0 ]; then
            # Keep the operator's and workers' logs for a look after everything stopped.
            rm -rf "$DIR.logs" && mkdir -p "$DIR.logs" && cp -r "$DIR/k8s/node/pods" "$DIR.logs/" 2>/dev/null
            echo "demo: failed (exit $rc); operator and worker logs: $DIR.logs/pods/*/*.log" >&2
        fi
        demo/down.sh
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say "installing what is missing and building (cached after the first run)"
tests/scripts/install-deps.sh
BIN="$(tests/control-plane/build.sh)"
export PATH="$BIN:$PATH"
cargo build --locked -q -p mssql-pg-operator -p mssql-pg-worker -p tds-testserver -p bench -p node-agent -p kubectl-mssqlpg
TARGET="${CARGO_TARGET_DIR:-$REPO/target}/debug"

say "starting the Kubernetes control plane"
echo "k8s=$DIR/k8s" >>"$DIR/state"
tests/control-plane/up.sh "$DIR/k8s"
# shellcheck disable=SC1091
source "$DIR/k8s/env"
kubectl get nodes

say "starting PostgreSQL"
eval "$(tests/scripts/postgres.sh start)"
echo "pg=$MSSQLPG_TEST_PG_DIR" >>"$DIR/state"
PG_PORT="$MSSQLPG_TEST_PG_PORT"
PSQL="$(ls /usr/lib/postgresql/*/bin/psql | head -n 1)"
"$PSQL" -q -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres -c "CREATE DATABASE $DB"
echo "PostgreSQL on 127.0.0.1:$PG_PORT, database $DB"

say "starting the TDS test server (SQL Server stand-in) and loading the sample database ($DB$([ "$DB" = stackoverflow ] && echo ", scale $SCALE"))"
TDS_PORT="$(free_port)"
# Throwaway credentials of throwaway servers; they go to the Secrets below and nowhere else.
TDS_PASSWORD="Demo-$(openssl rand -hex 6)"
"$TARGET/tds-testserver" --listen "127.0.0.1:$TDS_PORT" --user sa --password "$TDS_PASSWORD" \
    --database "$SRC_DB" ${AW_DIR:+--bulk-insert-dir "$AW_DIR"} >"$DIR/tds-testserver.log" 2>&1 &
echo "tds=$!" >>"$DIR/state"
for _ in $(seq 1 100); do
    grep -q "listening" "$DIR/tds-testserver.log" && break
    sleep 0.1
done
grep -q "listening" "$DIR/tds-testserver.log" || die "the TDS test server did not start: $(cat "$DIR/tds-testserver.log")"
if [ "$ONLINE" = 1 ]; then
    # The source is PostgreSQL: a shop whose applications keep writing while it is migrated.
    ROWS="$(python3 -c "print(max(1000, int(20000000 * $SCALE)))")"
    "$PSQL" -q -h 127.0.0.1 -p "$PG_PORT" -U postgres -d "$DB" <<SQL
CREATE TABLE customers (id bigint PRIMARY KEY, name text NOT NULL, email text, created timestamp(3) NOT NULL);
INSERT INTO customers SELECT g, 'customer ' || g, 'c' || g || '@example.com', timestamp '2024-01-01' + g * interval '1 minute'
  FROM generate_series(1, $ROWS / 5) g;
CREATE TABLE orders (id bigint PRIMARY KEY, customer_id bigint NOT NULL REFERENCES customers (id),
  amount numeric(12,2) NOT NULL, status text NOT NULL, updated timestamp(3) NOT NULL);
INSERT INTO orders SELECT g, 1 + g % ($ROWS / 5), (g % 1000) * 1.5, 'new', timestamp '2024-06-01' + g * interval '1 second'
  FROM generate_series(1, $ROWS - $ROWS / 5) g;
ANALYZE customers; ANALYZE orders;
SQL
    echo "PostgreSQL database $DB: customers and orders, $ROWS rows; the SQL Server stand-in's database $SRC_DB is empty"
elif [ "$DB" = adventureworks ]; then
    "$REPO/.venv/bin/python" demo/load_script.py 127.0.0.1 "$TDS_PORT" sa "$TDS_PASSWORD" master \
        "$AW_DIR/instawdb.sql" "SqlSamplesSourceDataPath=$AW_DIR/"
else
    MSSQL_USER=sa MSSQL_PASSWORD="$TDS_PASSWORD" "$TARGET/bench" load --scale "$SCALE" \
        --mssql "127.0.0.1:$TDS_PORT" --mssql-no-tls --mssql-database StackOverflow2010
fi

say "installing the Helm chart (CRDs, RBAC, operator)"
METRICS_PORT="$(free_port)"
kubectl create namespace "$NS" >/dev/null
PROM_DIR="$DIR/prometheus"
mkdir -p "$PROM_DIR/targets"
# worker.allowedEndpoints: the two local servers listen on free ports, not on 1433 and 5432.
# worker.command: tests/helm/prom_worker.sh runs mssql-pg-worker and announces its /metrics port to the demo's
# Prometheus (in a cluster the chart's PodMonitor finds the worker pods; here pods are processes on one host).
helm install mssql-pg-operator charts/mssql-pg-operator --namespace mssql-pg-operator --create-namespace \
    --set metricsPort="$METRICS_PORT" --set "worker.serviceAccount.namespaces={$NS}" --set requeueSeconds=5 \
    --set worker.command="$REPO/tests/helm/prom_worker.sh $PROM_DIR/targets" \
    --set-json "worker.allowedEndpoints=[{\"hosts\":[\"127.0.0.1\"],\"ports\":[$TDS_PORT,$PG_PORT]}]" \
    --wait --timeout 2m
kubectl -n mssql-pg-operator get deploy,pods,sa
for _ in $(seq 1 100); do
    curl -fsS "http://127.0.0.1:$METRICS_PORT/readyz" >/dev/null 2>&1 && break
    sleep 0.3
done
curl -fsS "http://127.0.0.1:$METRICS_PORT/readyz" >/dev/null || die "the operator is not ready (kubectl -n mssql-pg-operator logs deploy/mssql-pg-operator)"

say "starting Prometheus (scrapes the operator and the worker pods every second; the alert rules loaded)"
echo "prom=$PROM_DIR" >>"$DIR/state"
PROM_URL="$("$REPO/.venv/bin/python" tests/helm/prom.py start "$PROM_DIR" "127.0.0.1:$METRICS_PORT" \
    deploy/alerts/prometheus-rules.yaml)"
echo "Prometheus on $PROM_URL"

if [ "$ONLINE" = 1 ]; then
    say "applying deploy/examples/postgres-to-mssql-online.yaml, adapted to the local servers"
    "$REPO/.venv/bin/python" - "$REPO/deploy/examples/postgres-to-mssql-online.yaml" "$DIR/migration.yaml" <<PY
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
for d in docs:
    d["metadata"]["namespace"] = "$NS"
    if d["kind"] == "Secret" and "mssql" in d["metadata"]["name"]:
        d["stringData"] = {"username": "sa", "password": "$TDS_PASSWORD"}
    elif d["kind"] == "Secret":
        d["stringData"] = {"username": "postgres", "password": "unused-trust-auth"}
    elif d["kind"] == "Migration":
        d["metadata"]["name"] = "$MIG"
        s = d["spec"]
        s["source"]["postgres"].update(host="127.0.0.1", port=$PG_PORT, database="$DB", sslMode="disable")
        s["target"]["mssql"].update(host="127.0.0.1", port=$TDS_PORT, database="$SRC_DB", encryption="NotSupported")
        s["partitioning"] = {"minRowsToSplit": 15000, "rowsPerPartition": 12500, "maxPartitionsPerTable": 4}
        s["parallelism"] = 2
        s["chunkRows"] = 10000
        s["online"].update(pollInterval="200ms", heartbeatSeconds=1)
        s["worker"] = {"backoffLimit": 1}
yaml.safe_dump_all(docs, open(sys.argv[2], "w"), sort_keys=False)
PY
    RUN_START="$(date +%s)"
    online_demo
    exit 0
fi

say "applying deploy/examples/mssql-to-postgres.yaml, adapted to the local servers"
"$REPO/.venv/bin/python" - "$REPO/deploy/examples/mssql-to-postgres.yaml" "$DIR/migration.yaml" <<PY
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
for d in docs:
    d["metadata"]["namespace"] = "$NS"
    if d["kind"] == "Secret" and "mssql" in d["metadata"]["name"]:
        d["stringData"] = {"username": "sa", "password": "$TDS_PASSWORD"}
    elif d["kind"] == "Secret":
        d["stringData"] = {"username": "postgres", "password": "unused-trust-auth"}
    elif d["kind"] == "Migration":
        d["metadata"]["name"] = "$MIG"
        s = d["spec"]
        s["source"]["mssql"].update(host="127.0.0.1", port=$TDS_PORT, database="$SRC_DB",
                                    encryption="NotSupported", trustServerCertificate=False)
        s["target"]["postgres"].update(host="127.0.0.1", port=$PG_PORT, database="$DB", sslMode="disable")
        if "$DB" == "adventureworks":
            # The whole database: every schema, each to a PostgreSQL schema of its name (dbo to public).
            s["source"]["mssql"]["schemas"] = ["*"]
            s["source"]["mssql"]["schema"] = "dbo"
            s["target"]["postgres"]["schema"] = "public"
            s["tables"] = {"include": ["*"]}
        # Split the larger tables into key ranges so the demo shows parallel partitioned copies.
        s["partitioning"] = {"minRowsToSplit": 15000, "rowsPerPartition": 12500, "maxPartitionsPerTable": 4}
        s["parallelism"] = 2
        s["chunkRows"] = 10000
        s["worker"] = {"backoffLimit": 1}
yaml.safe_dump_all(docs, open(sys.argv[2], "w"), sort_keys=False)
PY
RUN_START="$(date +%s)"
kubectl apply -f "$DIR/migration.yaml"

say "live progress (kubectl get mig,mtask -n $NS)"
started=$SECONDS
phase=""
last=""
while [ $((SECONDS - started)) -lt "$TIMEOUT" ]; do
    phase="$(kubectl get mig "$MIG" -n "$NS" -o jsonpath='{.status.phase}')"
    now="$(kubectl get mig,mtask -n "$NS" 2>/dev/null)"
    if [ "$now" != "$last" ]; then
        printf '\n[%4ss]\n%s\n' $((SECONDS - started)) "$now"
        last="$now"
    fi
    [ "$phase" = Succeeded ] || [ "$phase" = Failed ] && break
    sleep 2
done

say "result"
jp() { kubectl get mig "$MIG" -n "$NS" -o jsonpath="{$1}"; }
cond() { jp ".status.conditions[?(@.type==\"$1\")].status"; }
printf '%-22s %s\n' phase "$phase" \
    progress "$(jp .status.progress)" \
    "rows copied" "$(jp .status.rowsCopied) of ~$(jp .status.rowsTotal) estimated" \
    "rows/s (average)" "$(jp .status.rowsPerSecond)" \
    "bytes copied" "$(jp .status.bytesCopied)" \
    "peak worker memory" "$(( $(jp .status.peakWorkerMemoryBytes) / 1024 / 1024 )) MiB" \
    "verification" "Verified=$(cond Verified) ($(jp .spec.verify))" \
    "duration" "$(jp .status.startedAt) -> $(jp .status.completedAt)"
echo
kubectl get mig "$MIG" -n "$NS" -o jsonpath='{range .status.tables[*]}{.name}{"\t"}{.rowsCopied}{"\t"}{.state}{"\n"}{end}' \
    | awk -F'\t' '{ printf "  %-24s %10s rows  %s\n", $1, $2, $3 }'

warnings="$(kubectl get mig "$MIG" -n "$NS" -o jsonpath='{range .status.warnings[*]}{"  "}{@}{"\n"}{end}')"
[ -n "$warnings" ] && printf 'warnings (lossy or approximated mappings):\n%s\n' "$warnings"
[ "$phase" = Succeeded ] || die "the Migration ended in phase '$phase': $(jp .status.lastError)"

say "the same rows, counted in PostgreSQL (SELECT count(*) of every target table)"
kubectl get mtask -n "$NS" -o jsonpath='{range .items[*]}{.spec.targetTable.schema}{"\t"}{.spec.targetTable.name}{"\n"}{end}' \
    | sort -u | while IFS=$'\t' read -r schema table; do
        n="$("$PSQL" -h 127.0.0.1 -p "$PG_PORT" -U postgres -d "$DB" -At \
            -c "SELECT count(*) FROM \"$schema\".\"$table\"")"
        printf '  %-24s %10s rows\n' "$schema.$table" "$n"
    done

say "metrics: http://127.0.0.1:$METRICS_PORT/metrics (in a cluster: service mssql-pg-operator-metrics:8080)"
# head may close the pipe early (a migration of many tables has more lines): not a failure.
curl -fsS "http://127.0.0.1:$METRICS_PORT/metrics" | grep -E "^mssqlpg_(migration_phase.*Succeeded|tasks|bytes_copied|worker_peak|rows_copied)" | head -n 20 || true
echo
echo "dashboard: deploy/dashboards/mssql-pg-operator.json; operations guide: docs/operations.md"

say "the dashboard over this run (its own queries, from Prometheus's query_range): $PNG"
# A few more scrapes, so the final status is in the picture.
sleep 3
"$REPO/.venv/bin/python" demo/render_dashboard.py --prometheus "$PROM_URL" --namespace "$NS" --migration "$MIG" \
    --start "$((RUN_START - 5))" --end "$(date +%s)" --out "$PNG"
