#!/usr/bin/env bash
# `make demo-down`: stops whatever `make demo` left running (DEMO_KEEP=1, or an interrupted run), using the
# state file demo/run.sh writes (DEMO_DIR, default /tmp/mssqlpg-demo). Safe to run when nothing is left.
set -uo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
DIR="${DEMO_DIR:-/tmp/mssqlpg-demo}"
[ -e "$DIR/state" ] || { echo "demo-down: nothing to stop in $DIR"; exit 0; }
# Reverse start order: Prometheus, the test server, PostgreSQL, then the control plane (which stops the operator's pods).
while IFS='=' read -r what value; do
    case "$what" in
        # The online demo's writer (psql fed by a generator that ends with its pipe).
        writer) [ "$(cat "/proc/$value/comm" 2>/dev/null)" = psql ] && kill "$value" \
            && echo "demo-down: stopped the writer (pid $value)" ;;
        # Only if that pid still is the test server (pids are reused).
        tds) [ "$(cat "/proc/$value/comm" 2>/dev/null)" = tds-testserver ] && kill "$value" \
            && echo "demo-down: stopped the TDS test server (pid $value)" ;;
        prom) "$REPO/.venv/bin/python" "$REPO/tests/helm/prom.py" stop "$value" && echo "demo-down: stopped Prometheus ($value)" ;;
        pg) "$REPO/tests/scripts/postgres.sh" stop "$value" && echo "demo-down: stopped PostgreSQL ($value)" ;;
        k8s) "$REPO/tests/control-plane/down.sh" "$value" >/dev/null 2>&1 && echo "demo-down: stopped the control plane ($value)" ;;
    esac
done < <(tac "$DIR/state")
rm -rf "$DIR"
