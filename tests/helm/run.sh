#!/usr/bin/env bash
# Tests of the Helm chart, the generated deploy/ assets and the Dockerfile, against a running loopback control
# plane (tests/control-plane/up.sh DIR). run-tests.sh calls this with its control plane's DIR.
#
#   tests/helm/run.sh K8S_DIR
#
# 1. hadolint on the Dockerfile, and that it builds the released binaries the tests use (--locked), stripped
# 2. helm lint (default and non-default values), values.schema.json refusals, helm template +
#    tests/helm/check_render.py on the objects
#    (security context, probes, RBAC exactly as operator/tests/e2e/operator-rbac.yaml and
#    deploy/examples/worker-rbac.yaml, leader election with 2 replicas, monitors, NetworkPolicies and the
#    admission policy by content (the node agent runs pods as processes: no CNI enforces NetworkPolicy here),
#    dashboard)
# 3. deploy/generate.sh --check (plain manifests, dashboard, alerts are what the chart renders); promtool check
#    rules and promtool test rules with tests/helm/alerts/ALERT.test.yaml, one file per alert
# 4. tests/helm/check_metrics.py: every metric the dashboard and the alerts query is exported (sources + a scrape
#    of the running operator below), and a doctored dashboard is caught
# 5. kubectl apply --server-side --dry-run=server of the non-default render, the plain manifests and the example
#    Migrations (the Prometheus Operator's CRDs are absent: those objects are checked by check_render only)
# 6. The upgrade path: helm install of the previous chart (from git, MSSQLPG_PREVIOUS_CHART_REF, default main) and
#    a Migration (the newest v* tag before HEAD, else main), then helm upgrade --reuse-values to this chart: the CRDs become this chart's (templates, owned by
#    the release, resource-policy keep), the Migration and the release's objects are the same objects. Then the
#    node agent runs the chart's operator Deployment as a local process with the
#    chart's service account, so the operator has exactly the chart's RBAC. It must become ready (leader
#    election on, so the Lease Role is exercised) and run a Migration to Succeeded, its worker Jobs running
#    as the chart's worker service account (operator/tests/e2e/fake-worker.sh stands in for the worker's
#    database work). helm test (the selftest pod), the aggregated user roles, and tenant safety: a user with only
#    Migration rights names a service account, a host or a port outside the allowlists and gets a Failed
#    Migration naming the field and no Job; a Migration outside the worker namespaces is refused (and deletes
#    cleanly); the admission policy turns away Jobs the operator's service account makes with another image or
#    service account.
#    Then helm upgrade (JSON logs, which the workers must follow), a real Migration, helm uninstall: the CRDs (kept
#    by their resource policy) and the Migrations stay.
# 7. A real Prometheus (loopback, one-second scrapes, file-based service discovery of the operator and of every
#    worker pod through tests/helm/prom_worker.sh) evaluates every dashboard query and alert expression while a
#    real Migration copies and after it ended (tests/helm/check_prometheus.py says what a user must see).
# Prints "N passed, N failed" last; exit 1 on any failure.
set -uo pipefail
K8S_DIR="${1:-${MSSQLPG_K8S_DIR:-}}"
[ -n "$K8S_DIR" ] && [ -s "$K8S_DIR/env" ] || { echo "usage: tests/helm/run.sh K8S_DIR (a running control plane)" >&2; exit 2; }
REPO="$(cd "$(dirname "$0")/../.." && pwd)"
HERE="$REPO/tests/helm"
CHART="$REPO/charts/mssql-pg-operator"
# shellcheck disable=SC1091
source "$K8S_DIR/env"
cd "$REPO"
PY="$REPO/.venv/bin/python"
WORK="$(mktemp -d /tmp/mssqlpg-helm.XXXXXX)"
RELEASE_NS="mssqlpg-helm-$RANDOM"
MIG_NS="mssqlpg-helm-mig-$RANDOM"
passed=0
failed=0
failures=()

TDS_PID=""
OWN_PG=""
# The real Migration's servers, for the Prometheus step.
REAL_TDS="" REAL_PW="" REAL_PG=""
cleanup() {
    [ -n "$TDS_PID" ] && kill "$TDS_PID" 2>/dev/null
    [ -n "$OWN_PG" ] && tests/scripts/postgres.sh stop "$OWN_PG"
    [ -s "$WORK/prometheus/pid" ] && "$PY" "$HERE/prom.py" stop "$WORK/prometheus"
    kubectl patch mig helm-prom -n "$MIG_NS" --type merge -p '{"metadata":{"finalizers":null}}' >/dev/null 2>&1 || true
    kubectl patch mig helm-online -n "$MIG_NS" --type merge -p '{"metadata":{"finalizers":null}}' >/dev/null 2>&1 || true
    kubectl patch mig helm-real -n "$MIG_NS" --type merge -p '{"metadata":{"finalizers":null}}' >/dev/null 2>&1 || true
    kubectl patch mig helm-kept -n "$MIG_NS" --type merge -p '{"metadata":{"finalizers":null}}' >/dev/null 2>&1 || true
    helm uninstall mssql-pg-operator -n "$RELEASE_NS" >/dev/null 2>&1 || true
    # The operator is gone by now: drop its finalizer so the namespace can go.
    kubectl patch mig helm-e2e -n "$MIG_NS" --type merge -p '{"metadata":{"finalizers":null}}' >/dev/null 2>&1 || true
    kubectl delete ns "$RELEASE_NS" "$MIG_NS" --wait=false >/dev/null 2>&1 || true
    rm -rf "$WORK"
}
trap cleanup EXIT

ok() { passed=$((passed + 1)); echo "helm tests: ok   $1"; }
bad() { failed=$((failed + 1)); failures+=("$1"); echo "helm tests: FAIL $1${2:+: $2}" >&2; }
# step NAME CMD...: runs CMD with its output in $WORK/NAME.log, shown on failure.
step() {
    local name="$1"
    shift
    if "$@" >"$WORK/step.log" 2>&1; then
        ok "$name"
        sed -n 's/^result: /    /p' "$WORK/step.log"
    else
        bad "$name"
        tail -n 40 "$WORK/step.log" >&2
    fi
}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }

command -v helm >/dev/null || { echo "helm tests: helm not found in $MSSQLPG_K8S_BIN (tests/control-plane/build.sh)" >&2; exit 1; }
if [ ! -x "$PY" ] || ! "$PY" -c 'import yaml, promql_parser' 2>/dev/null || [ ! -x "$REPO/.venv/bin/hadolint" ] ||
    ! command -v promtool >/dev/null; then
    tests/scripts/install-deps.sh
fi

# --- 1. Dockerfile ---------------------------------------------------------------------------------------
step "hadolint Dockerfile" "$REPO/.venv/bin/hadolint" Dockerfile
dockerfile_builds() {
    grep -Eq 'cargo build --release --locked -p mssql-pg-operator -p mssql-pg-worker' Dockerfile &&
        grep -q 'USER 65532:65532' Dockerfile &&
        grep -q 'objcopy --strip-debug' Dockerfile &&
        grep -q 'COPY --from=build /usr/local/bin/mssql-pg-operator /usr/local/bin/mssql-pg-worker' Dockerfile
}
step "Dockerfile builds both release binaries (--locked), stripped, into a non-root image" dockerfile_builds

# --- 2. lint and render ----------------------------------------------------------------------------------
step "helm lint (default values)" helm lint --strict "$CHART"
step "helm lint (tests/helm/values-full.yaml)" helm lint --strict "$CHART" -f "$HERE/values-full.yaml"
# The chart's kubeVersion is checked against --kube-version; without it helm assumes the Kubernetes its build names
# (1.20 for one built from source, as tests/control-plane/build.sh does). The control plane's version, then.
KUBE_VERSION="$(sed -n 's/^K8S_VERSION=//p' tests/control-plane/build.sh)"
template() { helm template "$@" --kube-version "$KUBE_VERSION"; }
render() { template mssql-pg-operator "$CHART" --namespace mssql-pg-operator "$@"; }
render_check() {
    local mode="$1"
    shift
    render "$@" >"$WORK/$mode.yaml" && "$PY" "$HERE/check_render.py" "$mode" "$WORK/$mode.yaml"
}
step "render: default values" render_check default
step "render: 2 replicas, monitors, NetworkPolicy, dashboard, worker namespaces" render_check full -f "$HERE/values-full.yaml"
step "render: watchNamespace -> namespaced Role, crds.install=false -> no CRDs" render_check namespaced --set watchNamespace=migrations --set crds.install=false
step "render: rbac.jobsInAllNamespaces -> Jobs everywhere" render_check clusterwide --set rbac.jobsInAllNamespaces=true
# values.schema.json: a wrong value fails at lint/template/install time instead of rendering something else.
rejected() {
    local expect="$1"
    shift
    ! "$@" >"$WORK/rejected.log" 2>&1 && grep -q -- "$expect" "$WORK/rejected.log" ||
        { echo "expected a refusal mentioning '$expect' from: $*"; cat "$WORK/rejected.log"; return 1; }
}
schema_rejects() {
    rejected "replicaCount" helm lint --strict "$CHART" --set replicaCount=two &&
        rejected "pullPolicy" template x "$CHART" --set image.pullPolicy=Sometimes &&
        rejected "imagee" template x "$CHART" --set imagee.tag=1.0 &&
        rejected "digest" template x "$CHART" --set image.digest=sha256:abc &&
        rejected "metricsPort" template x "$CHART" --set metricsPort=70000 &&
        rejected "enabled" template x "$CHART" --set networkPolicy.worker.enabled=yes &&
        rejected "allowedServiceAccounts" template x "$CHART" --set 'worker.allowedServiceAccounts={Not_A_Name}' &&
        rejected "has no cidrs" template x "$CHART" --set networkPolicy.worker.enabled=true \
            --set 'networkPolicy.apiServerCIDRs={10.0.0.1/32}' &&
        rejected "networkPolicy.apiServerCIDRs" template x "$CHART" --set networkPolicy.enabled=true &&
        rejected "allowedEndpoints" template x "$CHART" --set-json 'worker.allowedEndpoints=[{"hosts":["a b"],"ports":[1433]}]' &&
        rejected "allowedEndpoints" template x "$CHART" --set-json 'worker.allowedEndpoints=[{"ports":[1433]}]' &&
        rejected "allowedEndpoints" template x "$CHART" --set-json 'worker.allowedEndpoints=[{"cidrs":["10.0.0.0"],"ports":[1433]}]' &&
        rejected "databases" template x "$CHART" --set 'networkPolicy.worker.databases[0].cidr=10.0.0.0/8' &&
        rejected "incompatible with Kubernetes v1.29" helm template x "$CHART" --kube-version 1.29.9 &&
        template x "$CHART" --set image.digest="sha256:$(printf 'ab%.0s' $(seq 32))" --set replicaCount=3 >/dev/null
}
step "values.schema.json refuses wrong types, enums, unknown keys and bad digests; kubeVersion a 1.29 cluster" schema_rejects

# --- 3. generated deploy assets --------------------------------------------------------------------------
step "deploy/ assets match the chart (deploy/generate.sh --check)" deploy/generate.sh --check

# --- 3b. alert rules: valid, and each alert unit-tested (fires on its series, silent otherwise, for: kept) ----
RULES=deploy/alerts/prometheus-rules.yaml
step "promtool check rules $RULES" promtool check rules "$RULES"
step "every alert has a unit test that fires it and one that keeps it silent, and a runbook in docs/operations.md" \
    "$PY" "$HERE/check_alert_tests.py" "$RULES" "$HERE/alerts" docs/operations.md
step "promtool test rules tests/helm/alerts/*.test.yaml" promtool test rules "$HERE"/alerts/*.test.yaml

# --- 4. metrics the dashboard and alerts use (sources; the scrape below adds labels) -------------------------
ASSETS=(--dashboard deploy/dashboards/mssql-pg-operator.json --rules deploy/alerts/prometheus-rules.yaml)
step "dashboard and alert metrics are registered in the code" "$PY" "$HERE/check_metrics.py" "${ASSETS[@]}"
doctored() {
    sed 's/mssqlpg_rows_copied_total/mssqlpg_rows_copyed_total/' deploy/dashboards/mssql-pg-operator.json >"$WORK/bad.json"
    ! "$PY" "$HERE/check_metrics.py" --dashboard "$WORK/bad.json" 2>"$WORK/bad.err" &&
        grep -q "mssqlpg_rows_copyed_total is not exported" "$WORK/bad.err"
}
step "check_metrics catches a metric the code does not export" doctored

# --- 5. server-side dry run --------------------------------------------------------------------------------
kubectl apply --server-side --force-conflicts -f crds/generated/ >/dev/null
kubectl wait --for=condition=Established crd/migrations.mssqlpg.dev crd/migrationtasks.mssqlpg.dev --timeout=60s >/dev/null
for ns in mssql-pg-operator migrations team-a monitoring; do
    kubectl get ns "$ns" >/dev/null 2>&1 || kubectl create ns "$ns" >/dev/null
done
NO_PROM=(--set serviceMonitor.enabled=false,podMonitor.enabled=false,prometheusRule.enabled=false)
dry_run_full() {
    # --skip-tests: the test pod's service account would only exist after a real install.
    render --set crds.install=false --skip-tests -f "$HERE/values-full.yaml" "${NO_PROM[@]}" >"$WORK/full-noprom.yaml" &&
        kubectl apply --server-side --dry-run=server -f "$WORK/full-noprom.yaml"
}
step "dry-run=server: non-default render" dry_run_full
step "dry-run=server: deploy/manifests/operator.yaml (plain manifests)" \
    kubectl apply --server-side --dry-run=server -f deploy/manifests/operator.yaml
step "dry-run=server: deploy/examples (both directions, Secrets, worker RBAC) validate against the CRDs" \
    kubectl apply --server-side --dry-run=server -f deploy/examples/

# --- 6. install for real and run a Migration with exactly the chart's RBAC ------------------------------------
# The node agent runs the Deployment's container as the program named like the image (mssql-pg-operator) from
# the freshly built binaries (run-tests.sh builds them; standalone runs build here).
NODE_BIN="${MSSQLPG_NODE_PATH:-${CARGO_TARGET_DIR:-$REPO/target}/debug}"
for b in mssql-pg-operator mssql-pg-worker tds-testserver bench; do
    [ -x "$NODE_BIN/$b" ] || { cargo build -q --locked -p mssql-pg-operator -p mssql-pg-worker -p tds-testserver -p bench; break; }
done
PORT="$(free_port)"
# Nothing listens there: export fails quietly; the point is that the endpoint reaches the worker Jobs.
OTLP="http://127.0.0.1:$(free_port)"
kubectl create ns "$MIG_NS" >/dev/null
FAKE_WORKER="$REPO/operator/tests/e2e/fake-worker.sh"
# The upgrade path: the release is installed from the previous chart (git: MSSQLPG_PREVIOUS_CHART_REF, default
# main), with the CRDs as that chart's users had them, and upgraded to this one with --reuse-values (so the new
# templates meet values without this chart's new keys). The CRDs must come out as this chart's, owned by the
# release and kept by it; the Migration and the release's objects must survive as the same objects.
# The previous chart: the newest release tag before this commit, else main (origin/main in a CI checkout).
PREV_REF="${MSSQLPG_PREVIOUS_CHART_REF:-$(git -C "$REPO" describe --tags --abbrev=0 --match 'v*' HEAD^ 2>/dev/null)}"
if [ -z "$PREV_REF" ]; then
    PREV_REF=main
    git -C "$REPO" rev-parse -q --verify main^{commit} >/dev/null || PREV_REF=origin/main
fi
PREV_CHART="$WORK/previous/charts/mssql-pg-operator"
CRDS=(migrations.mssqlpg.dev migrationtasks.mssqlpg.dev)
uids() {
    kubectl get crd "${CRDS[@]}" -o jsonpath='{range .items[*]}{.metadata.uid}{"\n"}{end}' &&
        kubectl get mig helm-kept -n "$MIG_NS" -o jsonpath='{.metadata.uid}{"\n"}' &&
        kubectl get deploy,sa,clusterrole -n "$RELEASE_NS" mssql-pg-operator -o jsonpath='{range .items[*]}{.metadata.uid}{"\n"}{end}'
}
# What docs/operations.md (Upgrade) tells the owner of CRDs from a chart's crds/ directory to do once.
adopt_crds() {
    kubectl label crd "${CRDS[@]}" app.kubernetes.io/managed-by=Helm --overwrite >/dev/null &&
        kubectl annotate crd "${CRDS[@]}" meta.helm.sh/release-name=mssql-pg-operator \
            meta.helm.sh/release-namespace="$RELEASE_NS" --overwrite >/dev/null
}
install_previous() {
    mkdir -p "$WORK/previous" &&
        git -C "$REPO" archive "$PREV_REF" charts/mssql-pg-operator | tar -x -C "$WORK/previous" || return 1
    if [ -d "$PREV_CHART/crds" ]; then
        # That chart's CRDs, installed as its README said (Helm skips crds/ when they exist).
        kubectl apply --server-side --force-conflicts -f "$PREV_CHART/crds/" >/dev/null || return 1
    fi
    # The CRDs exist already (step 5): a chart with templates/crds/ installs only over CRDs handed to the release.
    adopt_crds &&
        helm install mssql-pg-operator "$PREV_CHART" --namespace "$RELEASE_NS" --create-namespace \
            --set metricsPort="$PORT" --set leaderElection.enabled=true --set requeueSeconds=2 \
            --set "worker.serviceAccount.namespaces={$MIG_NS}" --set worker.command="$FAKE_WORKER" \
            --set "worker.allowedServiceAccounts={etl-allowed}" --set selftest.readyzUrl="http://127.0.0.1:$PORT/readyz" \
            --set otlpEndpoint="$OTLP" \
            --set logLevel='info\,mssql_pg_operator=debug' --wait --timeout 120s || return 1
    # A Migration the upgrade must keep (suspended: it starts no Job).
    kubectl apply -n "$MIG_NS" -f - >/dev/null <<YAML || return 1
apiVersion: mssqlpg.dev/v1alpha1
kind: Migration
metadata: {name: helm-kept}
spec:
  source: {mssql: {host: sql.invalid, database: db, credentialsSecret: src-creds}}
  target: {postgres: {host: pg.invalid, database: db, credentialsSecret: dst-creds}}
  suspend: true
YAML
    uids >"$WORK/uids-before" && kubectl get crd "${CRDS[@]}" -o json >"$WORK/crds-before.json" &&
        echo "result: $(git -C "$REPO" rev-parse --short "$PREV_REF") ($PREV_REF), CRDs from its $(
            [ -d "$PREV_CHART/crds" ] && echo crds/ || echo templates/crds/)"
}
step "helm install of the previous chart ($PREV_REF) and a Migration" install_previous
upgrade_from_previous() {
    adopt_crds &&
        helm upgrade mssql-pg-operator "$CHART" --namespace "$RELEASE_NS" --reuse-values \
            --set-json 'worker.allowedEndpoints=[{"hosts":["*.invalid"],"ports":[1433,5432]}]' \
            --set admissionPolicy.enabled=true --wait --timeout 120s &&
        uids >"$WORK/uids-after" || return 1
    diff "$WORK/uids-before" "$WORK/uids-after" || { echo "objects recreated or gone (UIDs above)"; return 1; }
    kubectl get crd "${CRDS[@]}" -o json >"$WORK/crds-after.json" &&
        "$PY" - "$WORK/crds-before.json" "$WORK/crds-after.json" crds/generated "$RELEASE_NS" <<'PY'
import json
import pathlib
import sys

import yaml

before, after = (json.loads(pathlib.Path(p).read_text())["items"] for p in sys.argv[1:3])
generated = {}
for path in pathlib.Path(sys.argv[3]).glob("*.yaml"):
    crd = yaml.safe_load(path.read_text())
    generated[crd["metadata"]["name"]] = crd
release_ns = sys.argv[4]
changed = []
for old, crd in zip(before, after):
    name = crd["metadata"]["name"]
    want = generated[name]["spec"]
    # The API server fills in defaults (conversion, listKind); what the generator wrote must be there as written.
    for key in ("group", "scope", "versions"):
        assert crd["spec"][key] == want[key], f"{name}: spec.{key} is not this chart's after the upgrade"
    assert crd["spec"]["names"] | want["names"] == crd["spec"]["names"], f"{name}: spec.names"
    ann, labels = crd["metadata"].get("annotations", {}), crd["metadata"].get("labels", {})
    assert ann.get("helm.sh/resource-policy") == "keep", f"{name}: no resource-policy keep: {ann}"
    assert ann.get("meta.helm.sh/release-name") == "mssql-pg-operator", f"{name}: not the release's: {ann}"
    assert ann.get("meta.helm.sh/release-namespace") == release_ns, f"{name}: {ann}"
    assert labels.get("app.kubernetes.io/managed-by") == "Helm", f"{name}: {labels}"
    if old["spec"]["versions"] != crd["spec"]["versions"]:
        changed.append(name)
print(f"result: CRDs now this chart's, owned by the release with resource-policy keep; changed by the upgrade: "
      f"{', '.join(changed) or 'none (the previous chart had the same)'}; the Migration, CRDs, Deployment, "
      f"service account and ClusterRole are the same objects")
PY
}
step "helm upgrade --reuse-values to this chart: CRDs updated and owned by the release, objects kept" upgrade_from_previous
ready() {
    kubectl -n "$RELEASE_NS" rollout status deploy/mssql-pg-operator --timeout=120s &&
        for _ in $(seq 1 120); do
            curl -fsS "http://127.0.0.1:$PORT/readyz" >/dev/null 2>&1 && return 0
            sleep 0.5
        done
    curl -fsS "http://127.0.0.1:$PORT/readyz"
}
step "the operator pod becomes ready (/readyz) as the chart's service account" ready
SA="system:serviceaccount:$RELEASE_NS:mssql-pg-operator"
WSA="system:serviceaccount:$MIG_NS:mssql-pg-worker"
rbac() {
    kubectl auth can-i watch migrations.mssqlpg.dev -A --as "$SA" &&
        kubectl auth can-i create jobs.batch -n "$MIG_NS" --as "$SA" &&
        kubectl auth can-i list pods -n "$MIG_NS" --as "$SA" &&
        ! kubectl auth can-i create jobs.batch -n default --as "$SA" &&
        ! kubectl auth can-i list pods -n default --as "$SA" &&
        kubectl auth can-i watch jobs.batch -A --as "$SA" &&
        kubectl auth can-i update leases.coordination.k8s.io -n "$RELEASE_NS" --as "$SA" &&
        ! kubectl auth can-i update leases.coordination.k8s.io -n "$MIG_NS" --as "$SA" &&
        ! kubectl auth can-i get secrets -n "$MIG_NS" --as "$SA" &&
        ! kubectl auth can-i create pods -n "$MIG_NS" --as "$SA" &&
        kubectl auth can-i create migrationtasks.mssqlpg.dev -n "$MIG_NS" --as "$WSA" &&
        kubectl auth can-i patch migrations.mssqlpg.dev --subresource=status -n "$MIG_NS" --as "$WSA" &&
        ! kubectl auth can-i get secrets -n "$MIG_NS" --as "$WSA" &&
        ! kubectl auth can-i delete migrationtasks.mssqlpg.dev -n "$MIG_NS" --as "$WSA"
}
step "RBAC: operator and worker can what they need and no more (no Secrets, Jobs only in worker namespaces)" rbac
lease() {
    for _ in $(seq 1 60); do
        holder="$(kubectl -n "$RELEASE_NS" get lease mssql-pg-operator -o jsonpath='{.spec.holderIdentity}' 2>/dev/null)"
        [[ "$holder" == mssql-pg-operator-* ]] && return 0
        sleep 0.5
    done
    echo "lease holder: '${holder:-}'"
    return 1
}
step "leader election: the pod holds the Lease in the release namespace" lease
helm_test() {
    helm test mssql-pg-operator -n "$RELEASE_NS" --timeout 120s >"$WORK/helm-test.log" 2>&1 ||
        { cat "$WORK/helm-test.log"; return 1; }
    grep -q "Phase:.*Succeeded" "$WORK/helm-test.log" || { cat "$WORK/helm-test.log"; return 1; }
    # The pod is deleted once it passed (hook-succeeded); the node agent keeps its output.
    cat "$K8S_DIR"/node/pods/"${RELEASE_NS}"_mssql-pg-operator-selftest_*/selftest.log >"$WORK/selftest.log" &&
        cat "$WORK/selftest.log" &&
        grep -q "ok: GET http://127.0.0.1:$PORT/readyz answered 200" "$WORK/selftest.log" &&
        grep -q "ok: the API server serves migrations and migrationtasks" "$WORK/selftest.log"
}
step "helm test: the selftest pod finds /readyz answering and the CRDs served" helm_test

# Aggregated roles, and tenant safety: "migration-author" holds only the chart's Migration rights in $MIG_NS.
# Not the control plane's "tester": the operator's e2e tests bind that user to the operator's ClusterRole
# (which creates Jobs) on the same control plane before this script runs.
kubectl create rolebinding mig-only -n "$MIG_NS" --clusterrole=mssql-pg-operator-edit --user=migration-author >/dev/null
kubectl create rolebinding mig-read -n "$MIG_NS" --clusterrole=mssql-pg-operator-view --user=migration-author >/dev/null
kubectl create rolebinding editor -n "$MIG_NS" --clusterrole=edit --user=editor >/dev/null
kubectl create rolebinding viewer -n "$MIG_NS" --clusterrole=view --user=viewer >/dev/null
user_roles() {
    # The aggregation controller folds the chart's rules into edit/view asynchronously.
    for _ in $(seq 1 60); do
        kubectl auth can-i create migrations.mssqlpg.dev -n "$MIG_NS" --as editor >/dev/null 2>&1 &&
            kubectl auth can-i list migrationtasks.mssqlpg.dev -n "$MIG_NS" --as viewer >/dev/null 2>&1 && break
        sleep 0.5
    done
    kubectl auth can-i create migrations.mssqlpg.dev -n "$MIG_NS" --as editor &&
        ! kubectl auth can-i patch migrationtasks.mssqlpg.dev -n "$MIG_NS" --as editor &&
        kubectl auth can-i watch migrations.mssqlpg.dev -n "$MIG_NS" --as viewer &&
        ! kubectl auth can-i create migrations.mssqlpg.dev -n "$MIG_NS" --as viewer &&
        kubectl auth can-i create migrations.mssqlpg.dev -n "$MIG_NS" --as migration-author &&
        kubectl auth can-i delete migrations.mssqlpg.dev -n "$MIG_NS" --as migration-author &&
        ! kubectl auth can-i create migrationtasks.mssqlpg.dev -n "$MIG_NS" --as migration-author &&
        ! kubectl auth can-i create pods -n "$MIG_NS" --as migration-author &&
        ! kubectl auth can-i create jobs.batch -n "$MIG_NS" --as migration-author &&
        ! kubectl auth can-i get secrets -n "$MIG_NS" --as migration-author
}
step "aggregated ClusterRoles: edit/admin write Migrations, view reads them, nobody writes MigrationTasks" user_roles
refused_sa() {
    # Created by the user with only Migration rights; the service account exists, it is just not allowlisted.
    kubectl create serviceaccount namespace-admin -n "$MIG_NS" >/dev/null &&
        kubectl apply --as migration-author -n "$MIG_NS" -f - <<YAML || return 1
apiVersion: mssqlpg.dev/v1alpha1
kind: Migration
metadata: {name: helm-sa}
spec:
  source: {mssql: {host: sql.invalid, database: db, credentialsSecret: src-creds}}
  target: {postgres: {host: pg.invalid, database: db, credentialsSecret: dst-creds}}
  worker: {serviceAccountName: namespace-admin}
YAML
    local phase=""
    for _ in $(seq 1 120); do
        phase="$(kubectl get mig helm-sa -n "$MIG_NS" -o jsonpath='{.status.phase}')"
        [ "$phase" = Failed ] && break
        sleep 0.5
    done
    local reason message jobs
    reason="$(kubectl get mig helm-sa -n "$MIG_NS" -o jsonpath='{.status.conditions[?(@.type=="Validated")].reason}')"
    message="$(kubectl get mig helm-sa -n "$MIG_NS" -o jsonpath='{.status.conditions[?(@.type=="Validated")].message}')"
    jobs="$(kubectl get jobs,pods -n "$MIG_NS" -l mssqlpg.dev/migration=helm-sa -o name)"
    echo "phase $phase, Validated $reason: $message; jobs/pods: ${jobs:-none}"
    [ "$phase" = Failed ] && [ "$reason" = WorkerOverrideNotAllowed ] &&
        [[ "$message" == *'spec.worker.serviceAccountName "namespace-admin" is not allowed'*etl-allowed* ]] &&
        [ -z "$jobs" ] && kubectl delete mig helm-sa -n "$MIG_NS" --wait=false >/dev/null
}
step "tenant safety: a Migration naming a service account outside the allowlist fails and creates no Job" refused_sa
# refused NAME NS REASON MESSAGE-GLOB: Migration NAME (applied already) fails Validated with REASON and a message
# matching the glob, and has no Job or pod.
refused() {
    local name="$1" ns="$2" reason="$3" want="$4" phase="" got message jobs
    for _ in $(seq 1 120); do
        phase="$(kubectl get mig "$name" -n "$ns" -o jsonpath='{.status.phase}')"
        [ "$phase" = Failed ] && break
        sleep 0.5
    done
    got="$(kubectl get mig "$name" -n "$ns" -o jsonpath='{.status.conditions[?(@.type=="Validated")].reason}')"
    message="$(kubectl get mig "$name" -n "$ns" -o jsonpath='{.status.conditions[?(@.type=="Validated")].message}')"
    jobs="$(kubectl get jobs,pods -n "$ns" -l "mssqlpg.dev/migration=$name" -o name)"
    echo "$name: phase $phase, Validated $got: $message; jobs/pods: ${jobs:-none}"
    # shellcheck disable=SC2053
    [ "$phase" = Failed ] && [ "$got" = "$reason" ] && [[ "$message" == $want ]] && [ -z "$jobs" ]
}
refused_endpoints() {
    # The install allows *.invalid on 1433 and 5432; the user with only Migration rights tries DNS's port, then a
    # host of the cluster.
    kubectl apply --as migration-author -n "$MIG_NS" -f - <<YAML || return 1
apiVersion: mssqlpg.dev/v1alpha1
kind: Migration
metadata: {name: helm-port}
spec:
  source: {mssql: {host: sql.invalid, port: 53, database: db, credentialsSecret: src-creds}}
  target: {postgres: {host: pg.invalid, database: db, credentialsSecret: dst-creds}}
---
apiVersion: mssqlpg.dev/v1alpha1
kind: Migration
metadata: {name: helm-host}
spec:
  source: {mssql: {host: sql.invalid, database: db, credentialsSecret: src-creds}}
  target: {postgres: {host: kubernetes.default.svc.cluster.local, database: db, credentialsSecret: dst-creds}}
YAML
    refused helm-port "$MIG_NS" EndpointNotAllowed \
        '*spec.source.mssql.port 53 is not allowed: the operator lets workers reach "sql.invalid" only on port 1433, 5432 (chart value worker.allowedEndpoints*' &&
        refused helm-host "$MIG_NS" EndpointNotAllowed \
            '*spec.target.postgres.host "kubernetes.default.svc.cluster.local" is not allowed: the operator lets workers reach only *.invalid (*' &&
        kubectl delete mig helm-port helm-host -n "$MIG_NS" --wait=false >/dev/null
}
step "tenant safety: Migrations naming a host or port outside worker.allowedEndpoints fail naming the field, no Job" refused_endpoints
refused_namespace() {
    # team-a holds no worker RBAC and is not a worker namespace of this release: the operator may not start pods
    # there. Deleting the Migration must not wait on Jobs the operator may not delete.
    kubectl apply -n team-a -f - <<YAML || return 1
apiVersion: mssqlpg.dev/v1alpha1
kind: Migration
metadata: {name: helm-elsewhere}
spec:
  source: {mssql: {host: sql.invalid, database: db, credentialsSecret: src-creds}}
  target: {postgres: {host: pg.invalid, database: db, credentialsSecret: dst-creds}}
YAML
    refused helm-elsewhere team-a NamespaceNotAllowed \
        "*metadata.namespace \"team-a\" is not allowed: the operator runs Migrations only in $RELEASE_NS, $MIG_NS *" &&
        kubectl delete mig helm-elsewhere -n team-a --timeout=60s >/dev/null
}
step "tenant safety: a Migration outside the worker namespaces fails without a Job and deletes cleanly" refused_namespace
admission_policy() {
    # As the operator's service account (which may create Jobs in $MIG_NS): another image, and the worker image
    # under another service account, are turned away by the ValidatingAdmissionPolicy.
    local out
    for _ in $(seq 1 30); do
        kubectl get validatingadmissionpolicybinding mssql-pg-operator-worker-jobs >/dev/null 2>&1 && break
        sleep 0.5
    done
    job() {
        cat <<YAML
apiVersion: batch/v1
kind: Job
metadata: {name: $1, namespace: $MIG_NS}
spec:
  template:
    spec:
      restartPolicy: Never
      serviceAccountName: $3
      containers: [{name: worker, image: "$2", command: ["$FAKE_WORKER"]}]
YAML
    }
    # A policy takes a moment to reach the admission chain after it is created.
    for _ in $(seq 1 30); do
        out="$(job vap-image busybox:1 mssql-pg-worker | kubectl create --as "$SA" -f - 2>&1)" && break
        [[ "$out" == *ValidatingAdmissionPolicy* ]] && break
        kubectl delete job vap-image -n "$MIG_NS" >/dev/null 2>&1
        sleep 1
    done
    echo "another image: $out"
    [[ "$out" == *"mssql-pg-operator-worker-jobs"*"denied request"*"not busybox:1"* ]] || return 1
    out="$(job vap-sa ghcr.io/mssql-pg-operator/mssql-pg-operator:0.1.0 default | kubectl create --as "$SA" -f - 2>&1)"
    echo "another service account: $out"
    [[ "$out" == *"denied request"*"not default"* ]] || return 1
    # The admission policy applies to the operator's identity only.
    job vap-admin busybox:1 default | kubectl create --dry-run=server -f - >/dev/null &&
        [ -z "$(kubectl get jobs -n "$MIG_NS" -o name | grep vap-)" ]
}
step "admission policy: Jobs of the operator's service account run only the worker image and service account" admission_policy

kubectl apply -n "$MIG_NS" -f - >/dev/null <<YAML
apiVersion: v1
kind: Secret
metadata: {name: src-creds}
stringData: {username: sa, password: helm-test-src-secret}
---
apiVersion: v1
kind: Secret
metadata: {name: dst-creds}
stringData: {username: pg, password: helm-test-dst-secret}
---
apiVersion: mssqlpg.dev/v1alpha1
kind: Migration
metadata: {name: helm-e2e}
spec:
  source: {mssql: {host: sql.invalid, database: db, credentialsSecret: src-creds}}
  target: {postgres: {host: pg.invalid, database: db, credentialsSecret: dst-creds}}
  parallelism: 2
YAML
migrate() {
    local phase=""
    for _ in $(seq 1 240); do
        phase="$(kubectl get mig helm-e2e -n "$MIG_NS" -o jsonpath='{.status.phase}')"
        [ "$phase" = Succeeded ] || [ "$phase" = Failed ] && break
        sleep 0.5
    done
    kubectl get mig,mtask,jobs -n "$MIG_NS"
    [ "$phase" = Succeeded ] || { echo "phase '$phase': $(kubectl get mig helm-e2e -n "$MIG_NS" -o jsonpath='{.status}')"; return 1; }
    get() { kubectl get mig helm-e2e -n "$MIG_NS" -o jsonpath="{.status.$1}"; }
    [ "$(get progress)" = 3/3 ] && [ "$(get rowsCopied)" = 6000 ] && [ "$(get peakWorkerMemoryBytes)" = 3072000 ] &&
        [ "$(get plan.tasksTotal)" = 3 ] &&
        [ "$(get 'conditions[?(@.type=="Ready")].status')" = True ] || { echo "status: $(get '')"; return 1; }
    # The worker pods ran as the chart's worker service account.
    sas="$(kubectl get pods -n "$MIG_NS" -o jsonpath='{range .items[*]}{.spec.serviceAccountName}{"\n"}{end}' | sort -u)"
    [ "$sas" = mssql-pg-worker ] || { echo "worker pods ran as: $sas"; return 1; }
    # otlpEndpoint reached every worker Job through the operator; logJson is off, so no LOG_FORMAT.
    local env
    env="$(kubectl get jobs -n "$MIG_NS" -l mssqlpg.dev/migration=helm-e2e -o jsonpath='{range .items[*]}{.spec.template.spec.containers[0].env[?(@.name=="OTEL_EXPORTER_OTLP_ENDPOINT")].value}{"|"}{.spec.template.spec.containers[0].env[?(@.name=="LOG_FORMAT")].value}{"\n"}{end}' | sort -u)"
    [ "$env" = "$OTLP|" ] || { echo "worker Jobs' OTEL_EXPORTER_OTLP_ENDPOINT|LOG_FORMAT: $env"; return 1; }
}
step "a Migration runs to Succeeded (plan, 3 copies, finalize, verify) with the chart's RBAC; its Jobs get otlpEndpoint" migrate

scrape() {
    curl -fsS "http://127.0.0.1:$PORT/metrics" >"$WORK/metrics.txt" &&
        grep -q "mssqlpg_migration_phase{migration=\"helm-e2e\",namespace=\"$MIG_NS\",phase=\"Succeeded\"} 1" "$WORK/metrics.txt" &&
        grep -q "mssqlpg_rows_copied_total{migration=\"helm-e2e\",namespace=\"$MIG_NS\",table=\"dbo.T2\"} 3000" "$WORK/metrics.txt" &&
        "$PY" "$HERE/check_metrics.py" "${ASSETS[@]}" --scrape "$WORK/metrics.txt"
}
step "the running operator exports every metric and label the dashboard and alerts use" scrape
no_secrets_logged() {
    local log
    log="$(kubectl -n "$RELEASE_NS" logs deploy/mssql-pg-operator 2>&1)"
    [ -n "$log" ] && ! grep -q "helm-test-.*-secret" <<<"$log"
}
step "no Secret value in the operator log" no_secrets_logged

# From here on the workers are the real mssql-pg-worker (the chart's default worker command), and they may reach
# only the TDS test server and PostgreSQL of the steps below (worker.allowedEndpoints: their loopback ports).
if [ -z "${MSSQLPG_TEST_PG_PORT:-}" ]; then
    eval "$(tests/scripts/postgres.sh start)"
    OWN_PG="$MSSQLPG_TEST_PG_DIR"
fi
TDS_PORT="$(free_port)"
loopback_endpoints() {
    local IFS=,
    printf '[{"hosts":["127.0.0.1"],"cidrs":["127.0.0.0/8"],"ports":[%s]}]' "$*"
}
upgrade() {
    helm upgrade mssql-pg-operator "$CHART" --namespace "$RELEASE_NS" --reuse-values --set logJson=true --set otlpEndpoint= \
        --set worker.command=mssql-pg-worker \
        --set-json "worker.allowedEndpoints=$(loopback_endpoints "$TDS_PORT" "$MSSQLPG_TEST_PG_PORT")" --wait --timeout 120s &&
        kubectl -n "$RELEASE_NS" rollout status deploy/mssql-pg-operator --timeout=120s &&
        [ "$(kubectl -n "$RELEASE_NS" get deploy mssql-pg-operator -o jsonpath='{.spec.template.spec.containers[0].env[?(@.name=="LOG_JSON")].value}')" = true ] &&
        for _ in $(seq 1 120); do
            curl -fsS "http://127.0.0.1:$PORT/readyz" >/dev/null 2>&1 && return 0
            sleep 0.5
        done
}
step "helm upgrade --reuse-values (JSON logs, the real worker), the new pod ready" upgrade

# A real migration: the TDS test server seeded by the bench generator -> PostgreSQL, planned, copied, finalized
# and checksum-verified by mssql-pg-worker pods running as the chart's worker service account.
real_migration() {
    local tds_port="$TDS_PORT" pw pg_port psql expected phase
    pw="Helm-$(openssl rand -hex 6)"
    "$NODE_BIN/tds-testserver" --listen "127.0.0.1:$tds_port" --user sa --password "$pw" --database Src \
        >"$WORK/tds.log" 2>&1 &
    TDS_PID=$!
    for _ in $(seq 1 100); do grep -q listening "$WORK/tds.log" && break; sleep 0.1; done
    MSSQL_USER=sa MSSQL_PASSWORD="$pw" "$NODE_BIN/bench" load --scale 0.001 --tables Users,Badges,PostTypes \
        --mssql "127.0.0.1:$tds_port" --mssql-no-tls --mssql-database Src || return 1
    expected="$("$NODE_BIN/bench" counts --scale 0.001 | awk '$1=="Users"||$1=="Badges"||$1=="PostTypes"{n+=$2} END{print n}')"
    pg_port="$MSSQLPG_TEST_PG_PORT"
    psql="$(ls /usr/lib/postgresql/*/bin/psql | head -n 1)"
    "$psql" -q -h 127.0.0.1 -p "$pg_port" -U postgres -d postgres -c "DROP DATABASE IF EXISTS helm_real" -c "CREATE DATABASE helm_real"
    # The Prometheus step below migrates from the same servers.
    REAL_TDS="$tds_port" REAL_PW="$pw" REAL_PG="$pg_port"
    kubectl apply -n "$MIG_NS" -f - <<YAML
apiVersion: v1
kind: Secret
metadata: {name: tds-creds}
stringData: {username: sa, password: "$pw"}
---
apiVersion: v1
kind: Secret
metadata: {name: pg-creds}
stringData: {username: postgres, password: unused-trust-auth}
---
apiVersion: mssqlpg.dev/v1alpha1
kind: Migration
metadata: {name: helm-real}
spec:
  source: {mssql: {host: 127.0.0.1, port: $tds_port, database: Src, schema: dbo, credentialsSecret: tds-creds, encryption: NotSupported}}
  target: {postgres: {host: 127.0.0.1, port: $pg_port, database: helm_real, schema: public, credentialsSecret: pg-creds, sslMode: disable}}
  parallelism: 2
  verify: checksum
  worker: {backoffLimit: 0}
YAML
    for _ in $(seq 1 600); do
        phase="$(kubectl get mig helm-real -n "$MIG_NS" -o jsonpath='{.status.phase}')"
        [ "$phase" = Succeeded ] || [ "$phase" = Failed ] && break
        sleep 0.5
    done
    kubectl get mig,mtask -n "$MIG_NS"
    get() { kubectl get mig helm-real -n "$MIG_NS" -o jsonpath="{.status.$1}"; }
    [ "$phase" = Succeeded ] || { echo "phase '$phase', lastError: $(get lastError)"; return 1; }
    [ "$(get rowsCopied)" = "$expected" ] || { echo "rowsCopied $(get rowsCopied), expected $expected"; return 1; }
    [ "$(get 'conditions[?(@.type=="Verified")].status')" = True ] || { echo "not Verified"; return 1; }
    got="$("$psql" -h 127.0.0.1 -p "$pg_port" -U postgres -d helm_real -At -c \
        "SELECT (SELECT count(*) FROM public.\"Users\") + (SELECT count(*) FROM public.\"Badges\") + (SELECT count(*) FROM public.\"PostTypes\")")"
    [ "$got" = "$expected" ] || { echo "PostgreSQL holds $got rows, expected $expected"; return 1; }
    # The copy phase's rate and the whole run's, both filled once Succeeded.
    [ "$(get rowsPerSecond)" -gt 0 ] && [ "$(get overallRowsPerSecond)" -gt 0 ] ||
        { echo "rowsPerSecond '$(get rowsPerSecond)', overallRowsPerSecond '$(get overallRowsPerSecond)'"; return 1; }
    echo "result: $expected rows (Users, Badges, PostTypes) migrated, checksum-verified, counted in PostgreSQL; $(get rowsPerSecond) rows/s copying, $(get overallRowsPerSecond) rows/s over the run, peak worker memory $(get peakWorkerMemoryBytes) bytes"
}
step "a real Migration (TDS test server -> PostgreSQL) with mssql-pg-worker pods and the chart's RBAC" real_migration
# logJson=true since the upgrade: the operator hands LOG_FORMAT=json to its workers.
worker_json_logs() {
    local logs=("$K8S_DIR"/node/pods/"${MIG_NS}"_helm-real-*/worker.log)
    [ -e "${logs[0]}" ] || { echo "no worker pod logs under $K8S_DIR/node/pods"; return 1; }
    "$PY" - "${logs[@]}" <<'PY'
import json
import sys

n = 0
for path in sys.argv[1:]:
    for line in open(path):
        n += 1
        obj = json.loads(line)
        assert isinstance(obj, dict), (path, line)
print(f"result: {n} log lines of {len(sys.argv) - 1} worker pods, each a JSON object")
PY
}
step "worker pods log JSON lines when the operator does (logJson)" worker_json_logs
# A real Prometheus scrapes the operator and every worker pod (file-based service discovery: prom_worker.sh is the
# worker command and announces each pod's metrics port) every second, and check_prometheus.py evaluates every
# dashboard query and alert expression through its HTTP API while a Migration of ~280k rows copies and after it.
prometheus_dashboard() {
    [ -n "$REAL_TDS" ] || { echo "needs the servers of the real Migration step"; return 1; }
    local prom_dir="$WORK/prometheus" psql
    mkdir -p "$prom_dir/targets"
    # The workers read the source through a link of 500 kB/s per connection, so every worker pod copies for
    # several one-second scrapes however fast the machine or the build is (~30 s for the whole copy).
    rm -f "$prom_dir/proxy-port"
    "$PY" "$HERE/throttle_proxy.py" --target "127.0.0.1:$REAL_TDS" --bytes-per-second 500000 \
        --port-file "$prom_dir/proxy-port" &
    local proxy_pid=$! slow_tds=""
    for _ in $(seq 1 100); do
        [ -s "$prom_dir/proxy-port" ] && break
        sleep 0.1
    done
    slow_tds="$(cat "$prom_dir/proxy-port" 2>/dev/null)" || { kill "$proxy_pid"; return 1; }
    # The proxy's port joins the allowlist.
    helm upgrade mssql-pg-operator "$CHART" --namespace "$RELEASE_NS" --reuse-values \
        --set worker.command="$HERE/prom_worker.sh $prom_dir/targets" \
        --set-json "worker.allowedEndpoints=$(loopback_endpoints "$REAL_TDS" "$REAL_PG" "$slow_tds")" --wait --timeout 120s &&
        kubectl -n "$RELEASE_NS" rollout status deploy/mssql-pg-operator --timeout=120s || { kill "$proxy_pid"; return 1; }
    for _ in $(seq 1 120); do
        curl -fsS "http://127.0.0.1:$PORT/readyz" >/dev/null 2>&1 && break
        sleep 0.5
    done
    MSSQL_USER=sa MSSQL_PASSWORD="$REAL_PW" "$NODE_BIN/bench" load --scale 0.02 --tables Votes,Comments \
        --mssql "127.0.0.1:$REAL_TDS" --mssql-no-tls --mssql-database Src || { kill "$proxy_pid"; return 1; }
    psql="$(ls /usr/lib/postgresql/*/bin/psql | head -n 1)"
    "$psql" -q -h 127.0.0.1 -p "$REAL_PG" -U postgres -d postgres -c "DROP DATABASE IF EXISTS helm_prom" -c "CREATE DATABASE helm_prom"
    cat >"$WORK/prom-mig.yaml" <<YAML
apiVersion: mssqlpg.dev/v1alpha1
kind: Migration
metadata: {name: helm-prom}
spec:
  source: {mssql: {host: 127.0.0.1, port: $slow_tds, database: Src, schema: dbo, credentialsSecret: tds-creds, encryption: NotSupported}}
  target: {postgres: {host: 127.0.0.1, port: $REAL_PG, database: helm_prom, schema: public, credentialsSecret: pg-creds, sslMode: disable}}
  tables: {include: [Votes, Comments]}
  parallelism: 2
  chunkRows: 2000
  partitioning: {minRowsToSplit: 100000, rowsPerPartition: 100000}
  worker: {backoffLimit: 0}
YAML
    # Then an online Migration (PostgreSQL -> the TDS test server): its capture pod's series fill the dashboard's
    # online row while it streams, and the cutover asked through the Migration ends it.
    "$psql" -q -h 127.0.0.1 -p "$REAL_PG" -U postgres -d postgres -c "DROP DATABASE IF EXISTS helm_online" \
        -c "CREATE DATABASE helm_online"
    "$psql" -q -h 127.0.0.1 -p "$REAL_PG" -U postgres -d helm_online \
        -c "CREATE TABLE accounts (id int PRIMARY KEY, name text NOT NULL, balance numeric(12,2))" \
        -c "INSERT INTO accounts SELECT g, 'account ' || g, g * 0.5 FROM generate_series(1, 5000) g"
    cat >"$WORK/prom-online.yaml" <<YAML
apiVersion: mssqlpg.dev/v1alpha1
kind: Migration
metadata: {name: helm-online}
spec:
  source: {postgres: {host: 127.0.0.1, port: $REAL_PG, database: helm_online, schema: public, credentialsSecret: pg-creds, sslMode: disable}}
  target: {mssql: {host: 127.0.0.1, port: $REAL_TDS, database: master, schema: dbo, credentialsSecret: tds-creds, encryption: NotSupported}}
  online: {enabled: true, pollInterval: 200ms, heartbeatSeconds: 1}
  worker: {backoffLimit: 0}
YAML
    "$PY" "$HERE/check_prometheus.py" --workdir "$prom_dir" --operator "127.0.0.1:$PORT" --namespace "$MIG_NS" \
        --migration helm-prom --manifest "$WORK/prom-mig.yaml" --dashboard deploy/dashboards/mssql-pg-operator.json \
        --rules deploy/alerts/prometheus-rules.yaml --timeout 300 \
        --online-manifest "$WORK/prom-online.yaml" --online-migration helm-online
    local rc=$?
    kill "$proxy_pid" 2>/dev/null
    wait "$proxy_pid" 2>/dev/null
    return $rc
}
step "a real Prometheus evaluates every dashboard query and alert during and after a real Migration, and an online one's stream" prometheus_dashboard
uninstall() {
    helm uninstall mssql-pg-operator -n "$RELEASE_NS" --wait --timeout 120s &&
        kubectl get crd migrations.mssqlpg.dev migrationtasks.mssqlpg.dev >/dev/null &&
        kubectl get mig helm-e2e -n "$MIG_NS" >/dev/null &&
        ! kubectl get clusterrole mssql-pg-operator >/dev/null 2>&1
}
step "helm uninstall keeps the CRDs and the Migrations" uninstall

echo "helm tests: logs of failed steps above; control-plane logs in $K8S_DIR/logs"
[ $failed -gt 0 ] && printf 'helm tests: failed: %s\n' "${failures[@]}" >&2
echo "helm: $passed passed, $failed failed"
[ $failed = 0 ]
