#!/usr/bin/env bash
# Starts a real Kubernetes control plane on 127.0.0.1 without containers: etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler and the node agent (which plays the kubelet for one Node).
#
#   tests/control-plane/up.sh DIR      # then: source DIR/env; kubectl get nodes
#   tests/control-plane/down.sh DIR
#
# DIR receives: env (to source), kubeconfig (admin, group system:masters), kubeconfig-tester (user "tester",
# group "testers", no RBAC granted: for permission tests), certs/, logs/, node/ (pod work dirs with each
# container's <name>.log and termination message), pids.
# Idempotent: if DIR's control plane is already running it does nothing; a stale one is cleaned up first.
# Each start gets fresh etcd data and random free ports; the PKI in DIR/certs is reused.
#
# Environment:
#   MSSQLPG_NODE_PATH      directories prepended to the PATH pods run with (default: <repo>/target/debug),
#                          so containers can run the freshly built worker/operator binaries by name
#   MSSQLPG_NODE_AGENT     node-agent binary to use (default: target/debug/node-agent, built when stale)
#   MSSQLPG_K8S_NODE       Node name (default loopback-node)
#   MSSQLPG_K8S_TIMEOUT    seconds to wait for each component (default 120)
#   MSSQLPG_K8S_APISERVER_ARGS, MSSQLPG_K8S_CM_ARGS
#                          extra flags (word-split) for kube-apiserver / kube-controller-manager, e.g.
#                          MSSQLPG_K8S_CM_ARGS="--node-monitor-grace-period=20s" for node-failure tests
set -euo pipefail

DIR="${1:?usage: up.sh DIR}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
NODE="${MSSQLPG_K8S_NODE:-loopback-node}"
TIMEOUT="${MSSQLPG_K8S_TIMEOUT:-120}"

log() { echo "up.sh: $*" >&2; }

mkdir -p "$DIR"
DIR="$(cd "$DIR" && pwd)"

# shellcheck source=lib.sh
source "$HERE/lib.sh"

if [[ -s "$DIR/pids" ]]; then
	if all_alive "$DIR/pids"; then
		log "control plane in $DIR is already running"
		exit 0
	fi
	log "stale control plane in $DIR: stopping its leftovers first"
	"$HERE/down.sh" "$DIR"
fi

started=$SECONDS
BIN="$("$HERE/build.sh" --no-helm)"

if [[ -n "${MSSQLPG_NODE_AGENT:-}" ]]; then
	AGENT="$MSSQLPG_NODE_AGENT"
else
	AGENT="${CARGO_TARGET_DIR:-$REPO/target}/debug/node-agent"
	STAMP="${CARGO_TARGET_DIR:-$REPO/target}/debug/.node-agent.up-stamp"
	# Only call cargo when the agent's sources changed since the last build through here: with other builds
	# running, cargo may wait minutes for the target-dir lock just to find nothing to do.
	if [[ ! -x "$AGENT" || ! -f "$STAMP" ]] || [[ -n "$(find "$REPO/tests/node-agent" "$REPO/Cargo.toml" \
		-newer "$STAMP" -type f \( -name '*.rs' -o -name Cargo.toml \) 2>/dev/null | head -n 1)" ]]; then
		log "building the node agent (cargo build -p node-agent)"
		(cd "$REPO" && cargo build -q -p node-agent) >&2
		touch "$STAMP"
	fi
fi
[[ -x "$AGENT" ]] || { log "error: node agent binary $AGENT not found"; exit 1; }

ok=0
on_exit() {
	if [[ $ok -ne 1 ]]; then
		log "startup failed; last lines of the logs in $DIR/logs:"
		for f in "$DIR"/logs/*.log; do
			[[ -f "$f" ]] || continue
			echo "----- $f" >&2
			tail -n 15 "$f" >&2
		done
		"$HERE/down.sh" "$DIR" || true
	fi
}
trap on_exit EXIT

rm -rf "$DIR/etcd" "$DIR/logs" "$DIR/node"
rm -f "$DIR/pids" "$DIR/env"
mkdir -p "$DIR/certs" "$DIR/logs" "$DIR/etcd" "$DIR/node"
chmod 700 "$DIR/certs" "$DIR/etcd"

# --- PKI ------------------------------------------------------------------------------------------------
C="$DIR/certs"
if [[ ! -s "$C/apiserver.crt" || ! -s "$C/kubelet.crt" || ! -s "$C/sa.pub" || ! -s "$C/tokens.csv" ]]; then
	log "creating the PKI in $C"
	(
		cd "$C"
		umask 077
		openssl genrsa -out ca.key 2048 2>/dev/null
		openssl req -x509 -new -nodes -sha256 -key ca.key -days 3650 -subj "/CN=mssql-pg-test-ca" \
			-addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
			-out ca.crt 2>/dev/null
		openssl genrsa -out apiserver.key 2048 2>/dev/null
		openssl req -new -sha256 -key apiserver.key -subj "/CN=kube-apiserver" -out apiserver.csr 2>/dev/null
		cat >apiserver.ext <<-'EOF'
			basicConstraints=CA:FALSE
			keyUsage=critical,digitalSignature,keyEncipherment
			extendedKeyUsage=serverAuth
			subjectAltName=IP:127.0.0.1,DNS:localhost,IP:10.0.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local
		EOF
		openssl x509 -req -sha256 -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
			-extfile apiserver.ext -out apiserver.crt 2>/dev/null
		# The node agent's kubelet API (container logs for kubectl logs) serves this one.
		openssl genrsa -out kubelet.key 2048 2>/dev/null
		openssl req -new -sha256 -key kubelet.key -subj "/CN=node-agent" -out kubelet.csr 2>/dev/null
		sed 's/^subjectAltName=.*/subjectAltName=IP:127.0.0.1,DNS:localhost/' apiserver.ext >kubelet.ext
		openssl x509 -req -sha256 -in kubelet.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
			-extfile kubelet.ext -out kubelet.crt 2>/dev/null
		openssl genrsa -out sa.key 2048 2>/dev/null
		openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
		echo "$(openssl rand -hex 24),admin,admin-uid,\"system:masters\"" >tokens.csv
		echo "$(openssl rand -hex 24),tester,tester-uid,\"testers\"" >>tokens.csv
		chmod 644 ca.crt
	)
fi
ADMIN_TOKEN="$(awk -F, '$2=="admin"{print $1}' "$C/tokens.csv")"
TESTER_TOKEN="$(awk -F, '$2=="tester"{print $1}' "$C/tokens.csv")"
# A header file keeps the token off curl's command line (visible in ps).
(umask 077 && printf 'Authorization: Bearer %s\n' "$ADMIN_TOKEN" >"$C/admin-header")

# --- etcd ---------------------------------------------------------------------------------------------
ETCD_PORT="$(free_port)"
ETCD_PEER="$(free_port)"
log "starting etcd on 127.0.0.1:$ETCD_PORT"
start_bg "$DIR" etcd "$BIN/etcd" --name default --data-dir "$DIR/etcd" \
	--listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
	--listen-peer-urls "http://127.0.0.1:$ETCD_PEER" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER" \
	--initial-cluster "default=http://127.0.0.1:$ETCD_PEER" --listen-metrics-urls "" --log-level warn
wait_for "$DIR" etcd "$TIMEOUT" curl -sf "http://127.0.0.1:$ETCD_PORT/health"

# --- kube-apiserver -----------------------------------------------------------------------------------
API_PORT="$(free_port)"
API="https://127.0.0.1:$API_PORT"
log "starting kube-apiserver on $API"
start_bg "$DIR" kube-apiserver "$BIN/kube-apiserver" \
	--etcd-servers="http://127.0.0.1:$ETCD_PORT" --bind-address=127.0.0.1 --advertise-address=127.0.0.1 \
	--secure-port="$API_PORT" --cert-dir="$C" --tls-cert-file="$C/apiserver.crt" \
	--tls-private-key-file="$C/apiserver.key" --client-ca-file="$C/ca.crt" \
	--token-auth-file="$C/tokens.csv" --authorization-mode=RBAC \
	--service-account-issuer="$API/" --service-account-key-file="$C/sa.pub" \
	--service-account-signing-key-file="$C/sa.key" --service-cluster-ip-range=10.0.0.0/24 \
	--allow-privileged=true --endpoint-reconciler-type=none --kubelet-preferred-address-types=InternalIP ${MSSQLPG_K8S_APISERVER_ARGS:-}
wait_for "$DIR" kube-apiserver "$TIMEOUT" \
	curl -sf --cacert "$C/ca.crt" -H @"$C/admin-header" "$API/readyz"

# --- kubeconfigs --------------------------------------------------------------------------------------
write_kubeconfig "$DIR/kubeconfig" "$API" "$C/ca.crt" admin "$ADMIN_TOKEN"
write_kubeconfig "$DIR/kubeconfig-tester" "$API" "$C/ca.crt" tester "$TESTER_TOKEN"
KUBECTL=(kubectl --kubeconfig "$DIR/kubeconfig")

# --- controller manager and scheduler -------------------------------------------------------------------
CM_PORT="$(free_port)"
log "starting kube-controller-manager"
start_bg "$DIR" kube-controller-manager "$BIN/kube-controller-manager" \
	--kubeconfig="$DIR/kubeconfig" --authentication-kubeconfig="$DIR/kubeconfig" \
	--authorization-kubeconfig="$DIR/kubeconfig" --leader-elect=false --bind-address=127.0.0.1 \
	--secure-port="$CM_PORT" --service-account-private-key-file="$C/sa.key" --root-ca-file="$C/ca.crt" \
	--controllers='*' --use-service-account-credentials=false ${MSSQLPG_K8S_CM_ARGS:-}
SCHED_PORT="$(free_port)"
log "starting kube-scheduler"
start_bg "$DIR" kube-scheduler "$BIN/kube-scheduler" \
	--kubeconfig="$DIR/kubeconfig" --authentication-kubeconfig="$DIR/kubeconfig" \
	--authorization-kubeconfig="$DIR/kubeconfig" --leader-elect=false --bind-address=127.0.0.1 \
	--secure-port="$SCHED_PORT"
wait_for "$DIR" kube-controller-manager "$TIMEOUT" curl -sfk "https://127.0.0.1:$CM_PORT/healthz"
wait_for "$DIR" kube-scheduler "$TIMEOUT" curl -sfk "https://127.0.0.1:$SCHED_PORT/healthz"

# --- node agent ---------------------------------------------------------------------------------------
NODE_PATH="${MSSQLPG_NODE_PATH:-${CARGO_TARGET_DIR:-$REPO/target}/debug}"
log "starting the node agent for Node $NODE (pods' PATH starts with $NODE_PATH)"
KUBECONFIG="$DIR/kubeconfig" PATH="$NODE_PATH:$PATH" RUST_LOG="${NODE_AGENT_LOG:-info}" \
	start_bg "$DIR" node-agent "$AGENT" --node-name "$NODE" --work-dir "$DIR/node" --ca-file "$C/ca.crt" \
	--api-server "$API" --tls-cert "$C/kubelet.crt" --tls-key "$C/kubelet.key"

node_schedulable() {
	local ready taints
	ready="$("${KUBECTL[@]}" get node "$NODE" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)"
	taints="$("${KUBECTL[@]}" get node "$NODE" -o jsonpath='{.spec.taints}' 2>/dev/null)"
	# The node lifecycle controller removes the not-ready taint once it has seen the Node Ready.
	[[ "$ready" == "True" && -z "$taints" ]]
}
wait_for "$DIR" node-agent "$TIMEOUT" node_schedulable
# Pods are only admitted once the service-account controller has created the namespace's "default" SA.
wait_for "$DIR" kube-controller-manager "$TIMEOUT" "${KUBECTL[@]}" get serviceaccount default -n default -o name

cat >"$DIR/env" <<EOF
# Generated by tests/control-plane/up.sh: source this file.
export KUBECONFIG="$DIR/kubeconfig"
export MSSQLPG_K8S_DIR="$DIR"
export MSSQLPG_K8S_API="$API"
export MSSQLPG_K8S_NODE="$NODE"
export MSSQLPG_K8S_BIN="$BIN"
export PATH="$BIN:\$PATH"
EOF
ok=1
log "control plane up in $((SECONDS - started)) s: source $DIR/env"
