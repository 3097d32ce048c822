#!/usr/bin/env bash
# Stops the control plane that up.sh started in DIR: the node agent (which kills its pods' processes),
# the scheduler, controller manager, API server and etcd, then any pod process group still alive.
# Leaves DIR (logs, certs) in place; safe to run twice or when nothing runs.
set -uo pipefail

DIR="${1:?usage: down.sh DIR}"
[[ -d "$DIR" ]] || exit 0
DIR="$(cd "$DIR" && pwd)"
GRACE="${MSSQLPG_K8S_STOP_GRACE:-15}"

# is_ours PID NAME: the pid still belongs to the component we started (pids get reused).
is_ours() {
	local exe
	exe="$(readlink "/proc/$1/exe" 2>/dev/null)" || return 1
	[[ "$(basename "$exe")" == "$2" || "$(basename "$exe")" == "$2 (deleted)" ]]
}

stop() {
	local name="$1" pid="$2" deadline
	is_ours "$pid" "$name" || return 0
	kill -TERM "$pid" 2>/dev/null || return 0
	deadline=$((SECONDS + GRACE))
	while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.2; done
	if kill -0 "$pid" 2>/dev/null; then
		echo "down.sh: $name (pid $pid) ignored SIGTERM for ${GRACE}s: killing it" >&2
		kill -KILL "$pid" 2>/dev/null
	fi
}

if [[ -f "$DIR/pids" ]]; then
	# Reverse start order: the node agent first (so it still reaches the API server), etcd last.
	tac "$DIR/pids" | while read -r name pid; do
		[[ -n "$pid" ]] && stop "$name" "$pid"
	done
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
rm -f "$DIR/pids"
exit 0
