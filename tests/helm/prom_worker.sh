#!/usr/bin/env bash
# The worker command (the chart's worker.command) when a test's or the demo's Prometheus scrapes the worker pods:
# what a PodMonitor does in a cluster, done with Prometheus's file-based service discovery. The node agent runs
# pods as host processes that share one network, so each worker serves /metrics on its own free loopback port
# and announces it in SD_DIR/worker-POD.json (labels namespace and pod, as the PodMonitor's relabelling gives).
#   prom_worker.sh SD_DIR WORKER_ARGS...      (the operator appends the step's arguments)
# The target file stays after the pod ends: Prometheus then sees it down and the pod's series go stale.
set -euo pipefail
sd_dir="$1"
shift
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')"
pod="${HOSTNAME:-worker-$$}"
tmp="$sd_dir/.worker-$pod.json.tmp"
printf '[{"targets": ["127.0.0.1:%s"], "labels": {"namespace": "%s", "pod": "%s"}}]\n' \
    "$port" "${MIGRATION_NAMESPACE:-}" "$pod" >"$tmp"
# Renamed into place so Prometheus never reads half a file.
mv "$tmp" "$sd_dir/worker-$pod.json"
# Progress every second, so the operator's per-table counters move between one-second scrapes.
export WORKER_METRICS_ADDR="127.0.0.1:$port" WORKER_PROGRESS_INTERVAL="${WORKER_PROGRESS_INTERVAL:-1}"
exec mssql-pg-worker "$@"
