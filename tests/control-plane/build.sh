#!/usr/bin/env bash
# Builds (once) the binaries of a loopback Kubernetes control plane into a cache keyed by version:
# kube-apiserver, kube-controller-manager, kube-scheduler (from the Go module proxy through the wrapper module
# in gomod/), etcd (Debian etcd-server, unpacked without root) and helm. Does nothing when they are already there.
# Prints the bin directory on stdout; progress goes to stderr. With --no-helm, helm is not required (up.sh).
#
# Environment: MSSQLPG_CACHE (default ~/.cache/mssql-pg-operator), BUILD_NICE (default 10),
# BUILD_PARALLEL (go build -p, default 1 so concurrent Rust builds are not starved).
set -euo pipefail

K8S_VERSION=1.33.13
HELM_VERSION=v3.22.0
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE_ROOT="${MSSQLPG_CACHE:-$HOME/.cache/mssql-pg-operator}"
BIN="$CACHE_ROOT/k8s-v$K8S_VERSION/bin"
NICE="${BUILD_NICE:-10}"
PAR="${BUILD_PARALLEL:-1}"

log() { echo "build.sh: $*" >&2; }
die() { log "error: $*"; exit 1; }

WANT=(etcd kube-apiserver kube-controller-manager kube-scheduler)
[[ "${1:-}" == "--no-helm" ]] || WANT+=(helm)
missing=0
for b in "${WANT[@]}"; do [[ -x "$BIN/$b" ]] || missing=1; done
if [[ $missing -eq 0 ]]; then
	echo "$BIN"
	exit 0
fi

mkdir -p "$BIN"
# Two concurrent callers (make test and a helper, say) must not build into the same files at once.
exec 9>"$BIN/.lock"
flock 9

command -v go >/dev/null || die "go is not installed (needed to build Kubernetes from the module proxy)"

# The binaries are the cache; Go's build cache for them is several GB that nothing reuses, so it lives in a
# directory removed when the build ends (CI disks are not large).
GOCACHE="$(mktemp -d "${TMPDIR:-/tmp}/mssqlpg-gocache.XXXXXX")"
export GOCACHE
trap 'chmod -R u+w "$GOCACHE" 2>/dev/null; rm -rf "$GOCACHE"' EXIT

build_k8s() {
	local name="$1" minor="${K8S_VERSION#1.}"
	minor="${minor%%.*}"
	[[ -x "$BIN/$name" ]] && return 0
	log "building $name v$K8S_VERSION (cold: several minutes)"
	local start=$SECONDS
	# The -X flags matter: without them /version answers v0.0.0-master+$Format:%H$, which clients fail to parse.
	(cd "$HERE/gomod" && CGO_ENABLED=0 nice -n "$NICE" go build -p "$PAR" -trimpath \
		-ldflags "-s -w -X k8s.io/component-base/version.gitVersion=v$K8S_VERSION \
			-X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor \
			-X k8s.io/component-base/version.gitTreeState=clean" \
		-o "$BIN/.$name.tmp" "k8s.io/kubernetes/cmd/$name") || die "go build of $name failed"
	mv -f "$BIN/.$name.tmp" "$BIN/$name"
	log "built $name in $((SECONDS - start)) s"
}

fetch_etcd() {
	[[ -x "$BIN/etcd" ]] && return 0
	if [[ -x /usr/bin/etcd ]]; then
		ln -sf /usr/bin/etcd "$BIN/etcd"
		return 0
	fi
	log "fetching etcd from the Debian package etcd-server"
	local tmp
	tmp="$(mktemp -d)"
	# apt-get download needs no root: it only fetches the .deb into the current directory.
	(cd "$tmp" && apt-get download -q -o APT::Sandbox::User="$(id -un)" etcd-server >&2) || { rm -rf "$tmp"; die "apt-get download etcd-server failed (try apt-get update)"; }
	dpkg-deb -x "$tmp"/etcd-server_*.deb "$tmp/root" || { rm -rf "$tmp"; die "dpkg-deb -x failed"; }
	[[ -x "$tmp/root/usr/bin/etcd" ]] || { rm -rf "$tmp"; die "etcd-server package has no usr/bin/etcd"; }
	cp "$tmp/root/usr/bin/etcd" "$BIN/.etcd.tmp" && mv -f "$BIN/.etcd.tmp" "$BIN/etcd"
	rm -rf "$tmp"
}

fetch_helm() {
	[[ -x "$BIN/helm" ]] && return 0
	log "building helm $HELM_VERSION"
	local start=$SECONDS tmp
	tmp="$(mktemp -d)"
	CGO_ENABLED=0 GOBIN="$tmp" nice -n "$NICE" go install -p "$PAR" -trimpath -ldflags "-s -w" \
		"helm.sh/helm/v3/cmd/helm@$HELM_VERSION" || { rm -rf "$tmp"; die "go install helm failed"; }
	mv -f "$tmp/helm" "$BIN/helm"
	rm -rf "$tmp"
	log "built helm in $((SECONDS - start)) s"
}

total=$SECONDS
fetch_etcd
build_k8s kube-apiserver
build_k8s kube-controller-manager
build_k8s kube-scheduler
[[ " ${WANT[*]} " == *" helm "* ]] && fetch_helm
[[ $((SECONDS - total)) -gt 2 ]] && log "done in $((SECONDS - total)) s"
echo "$BIN"
