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

say() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }
die() { echo "demo: $*" >&2; exit 1; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }

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
cargo build --locked -q -p mssql-pg-operator -p mssql-pg-worker -p tds-testserver -p bench -p node-agent
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
if [ "$DB" = adventureworks ]; then
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
# worker.command: tests/helm/prom_worker.sh runs mssql-pg-worker and announces its /metrics port to the demo's
# Prometheus (in a cluster the chart's PodMonitor finds the worker pods; here pods are processes on one host).
helm install mssql-pg-operator charts/mssql-pg-operator --namespace mssql-pg-operator --create-namespace \
    --set metricsPort="$METRICS_PORT" --set "worker.serviceAccount.namespaces={$NS}" --set requeueSeconds=5 \
    --set worker.command="$REPO/tests/helm/prom_worker.sh $PROM_DIR/targets" \
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
