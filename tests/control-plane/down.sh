#!/usr/bin/env bash
# Stops the control plane that up.sh started in DIR: the node agent (which kills its pods' processes),
# the scheduler, controller manager, API server and etcd, then any pod process group still alive.
# Leaves DIR (logs, certs) in place; safe to run twice or when nothing runs.
set -uo pipefail

DIR="${1:?usage: down.sh DIR}"
[[ -d "$DIR" ]] || exit 0
DIR="$(cd "$DIR" && pwd)"
GRACE="${MSSQLPG_K8S_STOP_GRACE:-15}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
source "$HERE/lib.sh"

# alive PID: running, not merely a zombie waiting for init (which here may reap only every few seconds).
alive() {
	local stat
	stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 1
	[[ "${stat##*) }" != Z* ]]
}

stop() {
	local name="$1" pid="$2" deadline
	is_ours "$pid" "$name" || return 0
	kill -TERM "$pid" 2>/dev/null || return 0
	deadline=$((SECONDS + GRACE))
	while alive "$pid" && ((SECONDS < deadline)); do sleep 0.1; done
	if alive "$pid"; then
		echo "down.sh: $name (pid $pid) ignored SIGTERM for ${GRACE}s: killing it" >&2
		kill -KILL "$pid" 2>/dev/null
	fi
}

# stop_all NAME...: stops those components in parallel.
stop_all() {
	local name pid
	for name in "$@"; do
		pid="$(awk -v n="$name" '$1==n{print $2}' "$DIR/pids")"
		for p in $pid; do stop "$name" "$p" & done
	done
	wait
}

if [[ -f "$DIR/pids" ]]; then
	# The node agent first (it still needs the API server while it stops its pods), etcd last (the API
	# server flushes to it while shutting down), the rest together.
	stop_all node-agent
	stop_all kube-scheduler kube-controller-manager kube-apiserver
	stop_all etcd
fi

# Pod process groups the agent could not clean up (it was killed, or crashed).
if [[ -d "$DIR/node/pgids" ]]; then
	for f in "$DIR"/node/pgids/*; do
		[[ -f "$f" ]] || continue
		pgid="$(cat "$f" 2>/dev/null)"
		# Only a group that still exists and is led by a process of the pod (same pgid): never a stranger.
		if [[ "$pgid" =~ ^[0-9]+$ ]] && pgrep -g "$pgid" >/dev/null 2>&1; then
			kill -KILL -- "-$pgid" 2>/dev/null
		fi
		rm -f "$f"
	done
fi
rm -f "$DIR/pids" "$DIR/env"
exit 0
