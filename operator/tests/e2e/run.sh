#!/usr/bin/env bash
# End-to-end test of the operator against a real control plane (tests/control-plane/up.sh DIR; source DIR/env),
# with tests/e2e/fake-worker.sh standing in for the worker. Checks: plan -> copy (3 tasks, one Job) -> finalize
# (verifying beside) -> Succeeded, the status totals, worker-owned status fields kept, metrics, Events, and that deleting
# the Migration removes its Jobs and tasks.
#   operator/tests/e2e/run.sh        (or: MSSQLPG_K8S_DIR=DIR cargo test -p mssql-pg-operator --test cluster)
set -euo pipefail
: "${MSSQLPG_K8S_DIR:?start a control plane first: tests/control-plane/up.sh DIR && source DIR/env}"
HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$HERE/../../.." && pwd)"
NS="e2e-$RANDOM"
WORK="$(mktemp -d)"
OP_PID=""
cleanup() {
    [ -n "$OP_PID" ] && kill "$OP_PID" 2>/dev/null || true
    kubectl delete ns "$NS" --wait=false >/dev/null 2>&1 || true
    rm -rf "$WORK"
}
trap cleanup EXIT
fail() { cp "$WORK/operator.log" "$MSSQLPG_K8S_DIR/logs/operator-e2e.log" 2>/dev/null || true; echo "e2e: FAIL: $*" >&2; echo "--- operator log" >&2; tail -n 40 "$WORK/operator.log" >&2 || true; exit 1; }

# The cargo test wrapper (tests/cluster.rs) passes its freshly built binary; a nested cargo would wait on its lock.
OPERATOR="${MSSQLPG_OPERATOR_BIN:-}"
if [ -z "$OPERATOR" ]; then
    cargo build -q --manifest-path "$REPO/Cargo.toml" -p mssql-pg-operator
    OPERATOR="$REPO/target/debug/mssql-pg-operator"
fi
kubectl apply --server-side -f "$REPO/crds/generated/" >/dev/null
kubectl wait --for=condition=Established crd/migrations.mssqlpg.dev crd/migrationtasks.mssqlpg.dev --timeout=30s >/dev/null
kubectl create ns "$NS" >/dev/null
kubectl apply -n "$NS" -f - >/dev/null <<YAML
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
stringData: {username: sa, password: s3cret-src}
---
apiVersion: v1
kind: Secret
metadata: {name: dst-creds}
stringData: {username: pg, password: s3cret-dst}
YAML

# The operator runs as the non-admin identity with exactly the documented RBAC (when the control plane has one).
kubectl apply -f "$HERE/operator-rbac.yaml" >/dev/null
kubectl create rolebinding mssql-pg-operator-e2e-jobs -n "$NS" --clusterrole=mssql-pg-operator-e2e-jobs --user=tester >/dev/null
OP_KUBECONFIG="$KUBECONFIG"
if [ -f "$MSSQLPG_K8S_DIR/kubeconfig-tester" ]; then
    OP_KUBECONFIG="$MSSQLPG_K8S_DIR/kubeconfig-tester"
fi

port=$(( 20000 + RANDOM % 20000 ))
KUBECONFIG="$OP_KUBECONFIG" METRICS_ADDR="127.0.0.1:$port" WATCH_NAMESPACE="$NS" MSSQLPG_WORKER_COMMAND="$HERE/fake-worker.sh" \
    MSSQLPG_REQUEUE_SECONDS=2 RUST_LOG=info,mssql_pg_operator=debug \
    "$OPERATOR" >"$WORK/operator.log" 2>&1 &
OP_PID=$!

kubectl apply -n "$NS" -f - >/dev/null <<YAML
apiVersion: mssqlpg.dev/v1alpha1
kind: Migration
metadata: {name: e2e}
spec:
  source: {mssql: {host: sql.invalid, database: db, credentialsSecret: src-creds}}
  target: {postgres: {host: pg.invalid, database: db, credentialsSecret: dst-creds}}
  parallelism: 2
YAML

phase=""
for _ in $(seq 1 180); do
    phase="$(kubectl get mig e2e -n "$NS" -o jsonpath='{.status.phase}')"
    [ "$phase" = Succeeded ] || [ "$phase" = Failed ] && break
    sleep 1
done
kubectl get mig,mtask,jobs -n "$NS" >&2 || true
[ "$phase" = Succeeded ] || fail "phase is '$phase', expected Succeeded: $(kubectl get mig e2e -n "$NS" -o jsonpath='{.status}')"

get() { kubectl get mig e2e -n "$NS" -o jsonpath="{.status.$1}"; }
[ "$(get progress)" = 3/3 ] || fail "progress $(get progress)"
[ "$(get rowsCopied)" = 6000 ] || fail "rowsCopied $(get rowsCopied)"
[ "$(get rowsTotal)" = 6000 ] || fail "rowsTotal $(get rowsTotal)"
[ "$(get bytesCopied)" = 600000 ] || fail "bytesCopied $(get bytesCopied)"
[ "$(get peakWorkerMemoryBytes)" = 3072000 ] || fail "peak memory $(get peakWorkerMemoryBytes)"
[ "$(get 'warnings[0]')" = "fake worker: no lossy columns" ] || fail "worker-written warnings lost"
[ "$(get plan.tasksTotal)" = 3 ] || fail "worker-written plan lost"
for c in Validated Planned Copied Finalized Verified Ready; do
    [ "$(get "conditions[?(@.type==\"$c\")].status")" = True ] || fail "condition $c is not True"
done
[ "$(get 'conditions[?(@.type=="Failed")].status')" = False ] || fail "Failed condition is not False"
jobs="$(kubectl get jobs -n "$NS" -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}' | sort | tr '\n' ' ')"
# The three small tables share one copy Job, named like the largest and listing all three.
# The finalize Job verifies beside (`--verify`): no verify Job follows it.
[ "$jobs" = "e2e-finalize e2e-plan e2e-t2 " ] || fail "jobs: $jobs"
finalize_args="$(kubectl get job e2e-finalize -n "$NS" -o jsonpath='{.spec.template.spec.containers[0].args}')"
case "$finalize_args" in *--verify*) ;; *) fail "finalize Job args: $finalize_args" ;; esac
listed="$(kubectl get job e2e-t2 -n "$NS" -o jsonpath='{.metadata.annotations.mssqlpg\.dev/tasks}')"
[ "$listed" = "e2e-t2,e2e-t1,e2e-t0" ] || fail "tasks of the copy Job: $listed"
kubectl get events -n "$NS" --field-selector involvedObject.name=e2e -o jsonpath='{.items[*].reason}' | grep -q Succeeded \
    || fail "no Succeeded Event"
metrics="$(curl -fsS "http://127.0.0.1:$port/metrics")"
grep -q "mssqlpg_migration_phase{migration=\"e2e\",namespace=\"$NS\",phase=\"Succeeded\"} 1" <<<"$metrics" || fail "phase metric"
grep -q "mssqlpg_rows_copied_total{migration=\"e2e\",namespace=\"$NS\",table=\"dbo.T2\"} 3000" <<<"$metrics" || fail "rows metric"
grep -q "s3cret" "$WORK/operator.log" && fail "a secret value appears in the operator log"
curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null || fail "readyz"

# A copy that always fails: retried by its Job (backoffLimit 1), then the task and the Migration fail; the
# other two tasks of the same Job stay Succeeded.
kubectl apply -n "$NS" -f - >/dev/null <<YAML
apiVersion: mssqlpg.dev/v1alpha1
kind: Migration
metadata: {name: e2e-fail}
spec:
  source: {mssql: {host: sql.invalid, database: db, credentialsSecret: src-creds}}
  target: {postgres: {host: pg.invalid, database: db, credentialsSecret: dst-creds}}
  parallelism: 3
  worker: {backoffLimit: 1}
YAML
for _ in $(seq 1 180); do
    phase="$(kubectl get mig e2e-fail -n "$NS" -o jsonpath='{.status.phase}')"
    [ "$phase" = Succeeded ] || [ "$phase" = Failed ] && break
    sleep 1
done
kubectl get mig,mtask -n "$NS" >&2 || true
getf() { kubectl get mig e2e-fail -n "$NS" -o jsonpath="{.status.$1}"; }
[ "$phase" = Failed ] || fail "e2e-fail: phase is '$phase', expected Failed"
[ "$(getf tasksFailed)" = 1 ] || fail "e2e-fail: tasksFailed $(getf tasksFailed)"
[ "$(getf tasksSucceeded)" = 2 ] || fail "e2e-fail: tasksSucceeded $(getf tasksSucceeded)"
[ "$(getf 'conditions[?(@.type=="Failed")].status')" = True ] || fail "e2e-fail: Failed condition not True"
# The fake worker writes no status: the operator records the Job's failure in its own field.
case "$(kubectl get mtask e2e-fail-t1 -n "$NS" -o jsonpath='{.status.jobFailure}')" in
    *"copy Job failed"*) ;;
    *) fail "the Job's failure not recorded in the task's status.jobFailure" ;;
esac
echo "e2e-fail lastError: $(getf lastError)" >&2
getf lastError | grep -q "simulated copy failure of e2e-fail-t1" || fail "lastError lacks the pod's message"
pods="$(kubectl get pods -n "$NS" -l batch.kubernetes.io/job-name=e2e-fail-t2 -o name | wc -l)"
[ "$pods" = 2 ] || fail "e2e-fail: expected 2 pods (1 retry), got $pods"
kubectl get jobs -n "$NS" -o name | grep -q e2e-fail-finalize && fail "finalize ran after a failed copy"

kubectl delete mig e2e -n "$NS" --timeout=60s >/dev/null || fail "Migration deletion did not finish (finalizer stuck?)"
left="$(kubectl get jobs,mtask -n "$NS" -l mssqlpg.dev/migration=e2e -o name 2>/dev/null | wc -l)"
[ "$left" = 0 ] || fail "$left Jobs/tasks left after deleting the Migration"
cp "$WORK/operator.log" "$MSSQLPG_K8S_DIR/logs/operator-e2e.log" 2>/dev/null || true
echo "e2e: OK (plan -> 3 tasks in one copy Job -> finalize, verifying beside -> Succeeded; cleanup by finalizer)"
