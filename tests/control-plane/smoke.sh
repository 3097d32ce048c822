#!/usr/bin/env bash
# Smoke test of the loopback control plane and the node agent, with kubectl only.
#
#   tests/control-plane/smoke.sh [DIR]
#
# Uses the control plane running in DIR (default: $MSSQLPG_K8S_DIR); when none runs there, starts one in a
# temporary directory, reports how long the start took, and stops it at the end.
# Checks: a Job whose pod gets env from a Secret completes and reports termination message "done"; a failing
# Job (backoffLimit 1) gets exactly two pods, each Failed with exit code 3 and the log tail as message, and
# ends Failed.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
DIR="${1:-${MSSQLPG_K8S_DIR:-}}"
OWN=0
if [[ -z "$DIR" || ! -s "$DIR/pids" ]]; then
	OWN=1
	if [[ -z "$DIR" ]]; then
		DIR="$(mktemp -d /tmp/mssqlpg-k8s.XXXXXX)"
		OWN=2
	fi
	t0=$SECONDS
	"$HERE/up.sh" "$DIR"
	echo "smoke.sh: control plane started in $((SECONDS - t0)) s" >&2
fi
# shellcheck disable=SC1091
source "$DIR/env"

NS="smoke-$RANDOM$RANDOM"
passed=0
cleanup() {
	kubectl delete namespace "$NS" --wait=false >/dev/null 2>&1 || true
	if [[ $OWN -ge 1 ]]; then
		"$HERE/down.sh" "$DIR"
		# Keep the logs of a failed run for a post-mortem.
		if [[ $passed -eq 1 && $OWN -eq 2 ]]; then
			rm -rf "$DIR"
		elif [[ $passed -ne 1 ]]; then
			echo "smoke.sh: logs kept in $DIR/logs" >&2
		fi
	fi
}
trap cleanup EXIT
fail() {
	echo "smoke.sh: FAIL: $*" >&2
	kubectl get jobs,pods -n "$NS" -o wide >&2 || true
	exit 1
}

kubectl create namespace "$NS" >/dev/null
kubectl -n "$NS" create secret generic greeting --from-literal=GREETING=hello-from-secret >/dev/null

kubectl -n "$NS" apply -f - >/dev/null <<'EOF'
apiVersion: batch/v1
kind: Job
metadata: {name: ok}
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: main
        image: ignored
        command: [sh, -c, 'echo "$GREETING"; echo done > $TERMINATION_MESSAGE_PATH']
        env:
        - name: GREETING
          valueFrom: {secretKeyRef: {name: greeting, key: GREETING}}
---
apiVersion: batch/v1
kind: Job
metadata: {name: bad}
spec:
  backoffLimit: 1
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: main
        image: ignored
        command: [sh, -c, 'echo boom >&2; exit 3']
        terminationMessagePolicy: FallbackToLogsOnError
EOF

kubectl -n "$NS" wait --for=condition=complete job/ok --timeout=120s >/dev/null || fail "job ok did not complete"
msg="$(kubectl -n "$NS" get pods -l job-name=ok -o jsonpath='{.items[*].status.containerStatuses[0].state.terminated.message}')"
[[ "$msg" == "done" ]] || fail "termination message of job ok is '$msg', expected 'done'"
uid="$(kubectl -n "$NS" get pods -l job-name=ok -o jsonpath='{.items[0].metadata.uid}')"
pod="$(kubectl -n "$NS" get pods -l job-name=ok -o jsonpath='{.items[0].metadata.name}')"
grep -qx hello-from-secret "$DIR/node/pods/${NS}_${pod}_${uid}/main.log" || fail "the pod's log lacks the secret's value"
[[ "$(kubectl -n "$NS" logs "$pod")" == hello-from-secret ]] || fail "kubectl logs does not show the pod's output"
echo "smoke.sh: job ok completed; termination message 'done'; env from the Secret reached the process; kubectl logs works" >&2

# The Job controller backs off 10 s before the retry.
kubectl -n "$NS" wait --for=condition=failed job/bad --timeout=180s >/dev/null || fail "job bad did not fail"
pods="$(kubectl -n "$NS" get pods -l job-name=bad -o jsonpath='{range .items[*]}{.status.phase}/{.status.containerStatuses[0].state.terminated.exitCode}/{.status.containerStatuses[0].state.terminated.message}{"\n"}{end}')"
[[ "$(echo "$pods" | grep -c .)" == 2 ]] || fail "job bad ran $(echo "$pods" | grep -c .) pods, expected 2: $pods"
[[ "$(echo "$pods" | grep -cx 'Failed/3/boom')" == 2 ]] || fail "job bad pods: $pods, expected Failed/3/boom twice"
echo "smoke.sh: job bad retried once (2 pods, exit 3, message from the log tail) and failed" >&2
echo "smoke.sh: PASS" >&2
passed=1
