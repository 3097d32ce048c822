#!/usr/bin/env bash
# Writes a kubeconfig that authenticates as a service account of the control plane in DIR, so a process run
# outside the cluster (the operator under test, say) gets exactly that account's RBAC.
#
#   tests/control-plane/sa-kubeconfig.sh DIR NAMESPACE SERVICEACCOUNT OUT [DURATION]
#
# The service account must exist (e.g. created by the Helm chart). DURATION defaults to 24h.
set -euo pipefail

DIR="${1:?usage: sa-kubeconfig.sh DIR NAMESPACE SERVICEACCOUNT OUT [DURATION]}"
NS="${2:?namespace}"
SA="${3:?service account}"
OUT="${4:?output file}"
DURATION="${5:-24h}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
DIR="$(cd "$DIR" && pwd)"
# shellcheck source=lib.sh
source "$HERE/lib.sh"

[[ -s "$DIR/env" ]] || { echo "sa-kubeconfig.sh: no running control plane in $DIR" >&2; exit 1; }
API="$(awk -F'"' '/MSSQLPG_K8S_API=/{print $2}' "$DIR/env")"
TOKEN="$(kubectl --kubeconfig "$DIR/kubeconfig" -n "$NS" create token "$SA" --duration "$DURATION")"
write_kubeconfig "$OUT" "$API" "$DIR/certs/ca.crt" "system:serviceaccount:$NS:$SA" "$TOKEN"
# The account's namespace is the natural default for clients that use the kubeconfig's namespace.
sed -i "s/^    namespace: default$/    namespace: $NS/" "$OUT"
