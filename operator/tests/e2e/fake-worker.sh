#!/bin/sh
# Stand-in for mssql-pg-worker in the operator's end-to-end test: does what the real worker's Kubernetes side
# does (prepare, the plan step: create MigrationTasks owned by the Migration and write status.plan/warnings; copy: report its tasks
# Succeeded) without touching any database. Runs under the worker service account's RBAC.
set -eu
step="$1"
ns="${MIGRATION_NAMESPACE:?}"
mig="${MIGRATION_NAME:?}"
# Credentials arrive through secretKeyRef; the real worker would fail without them.
for v in SOURCE_USERNAME SOURCE_PASSWORD TARGET_USERNAME TARGET_PASSWORD; do
    eval "val=\${$v:-}"
    [ -n "$val" ] || { echo "fake-worker: $v is not set" >&2; exit 3; }
done
export HOME="${TMPDIR:-/tmp}"
case "$step" in
prepare)
    uid="$(kubectl get migration "$mig" -n "$ns" -o jsonpath='{.metadata.uid}')"
    for i in 0 1 2; do
        kubectl apply -f - <<YAML
apiVersion: mssqlpg.dev/v1alpha1
kind: MigrationTask
metadata:
  name: $mig-t$i
  namespace: $ns
  labels: {mssqlpg.dev/migration: $mig}
  ownerReferences: [{apiVersion: mssqlpg.dev/v1alpha1, kind: Migration, name: $mig, uid: "$uid", controller: true}]
spec:
  migration: $mig
  table: {schema: dbo, name: T$i}
  targetTable: {schema: public, name: t$i}
  partition: {index: 0, count: 1, label: 1/1}
  estimatedRows: $(( (i + 1) * 1000 ))
YAML
    done
    kubectl patch migration "$mig" -n "$ns" --subresource=status --type=merge \
        -p '{"status":{"plan":{"tablesTotal":3,"tasksTotal":3,"rowsEstimated":6000},"warnings":["fake worker: no lossy columns"]}}'
    ;;
copy)
    # The tasks as the real worker takes them: `copy --task A [--task B ...]`; one at a time, a failure
    # does not stop the others, the exit says whether all succeeded.
    shift
    tasks=""
    while [ $# -gt 0 ]; do
        case "$1" in
        --task) tasks="$tasks $2"; shift 2 ;;
        *) shift ;;
        esac
    done
    [ -n "$tasks" ] || tasks="${TASK_NAME:?}"
    # Migrations named "hold*" keep their copy Job running: the test reports for the tasks itself
    # (operator/tests/status_follows_tasks.rs) and deletes the namespace at the end.
    case "$mig" in hold*) exec sleep 600 ;; esac
    failed=0
    for task in $tasks; do
        # Migrations named "*fail*" have a table whose copy always fails, to exercise retries and Failed.
        case "$mig:$task" in
        *fail*:*-t1) echo "fake-worker: simulated copy failure of $task" >&2; failed=1; continue ;;
        esac
        rows="$(kubectl get migrationtask "$task" -n "$ns" -o jsonpath='{.spec.estimatedRows}')"
        kubectl patch migrationtask "$task" -n "$ns" --subresource=status --type=merge \
            -p "{\"status\":{\"state\":\"Succeeded\",\"rowsCopied\":$rows,\"bytesCopied\":$((rows * 100)),\"rowsPerSecond\":500,\"peakMemoryBytes\":$((rows * 1024)),\"attempts\":1}}"
    done
    exit "$failed"
    ;;
finalize|verify)
    echo "fake-worker: $step done"
    ;;
*)
    echo "fake-worker: unknown step $step" >&2
    exit 2
    ;;
esac
