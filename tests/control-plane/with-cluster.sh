#!/usr/bin/env bash
# Runs a command against a loopback control plane: reuses the one in $MSSQLPG_K8S_DIR when it runs, otherwise
# starts one in a temporary directory and stops it afterwards (logs kept there when the command fails).
#
#   tests/control-plane/with-cluster.sh cargo test -p node-agent --test cluster
#
# The command sees KUBECONFIG, MSSQLPG_K8S_DIR, MSSQLPG_K8S_API, MSSQLPG_K8S_NODE, MSSQLPG_K8S_BIN and PATH
# (with helm) from DIR/env. Exit status: the command's.
set -euo pipefail

[[ $# -gt 0 ]] || { echo "usage: with-cluster.sh COMMAND [ARGS...]" >&2; exit 2; }
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
DIR="${MSSQLPG_K8S_DIR:-}"
OWN=0
if [[ -z "$DIR" || ! -s "$DIR/pids" ]]; then
	DIR="$(mktemp -d /tmp/mssqlpg-k8s.XXXXXX)"
	OWN=1
	"$HERE/up.sh" "$DIR"
fi
# shellcheck disable=SC1091
source "$DIR/env"
# Interrupted (Ctrl-C, a CI timeout): do not leave a control plane behind.
trap 'if [[ $OWN -eq 1 ]]; then "$HERE/down.sh" "$DIR"; fi; exit 130' INT TERM

status=0
"$@" || status=$?
if [[ $OWN -eq 1 ]]; then
	"$HERE/down.sh" "$DIR"
	if [[ $status -eq 0 ]]; then
		rm -rf "$DIR"
	else
		echo "with-cluster.sh: command failed ($status); control-plane logs kept in $DIR/logs, pods in $DIR/node/pods" >&2
	fi
fi
exit "$status"
