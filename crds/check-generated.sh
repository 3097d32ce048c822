#!/usr/bin/env bash
# Fails when the committed CRD files (crds/generated/, the chart's templates/crds/) differ from what the Rust
# types generate.
# Usage: crds/check-generated.sh   (from anywhere; `make crds` fixes it)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cargo run --quiet --manifest-path "$root/Cargo.toml" -p mssql-pg-crds --bin crdgen -- \
    --out-dir "$tmp/plain" --chart-dir "$tmp/chart" >/dev/null
status=0
# generated-dir committed-dir
pairs=("$tmp/plain" "$root/crds/generated" "$tmp/chart/templates/crds" "$root/charts/mssql-pg-operator/templates/crds")
for ((i = 0; i < ${#pairs[@]}; i += 2)); do
    want="${pairs[i]}" have="${pairs[i + 1]}"
    for generated in "$want"/*.yaml; do
        committed="$have/$(basename "$generated")"
        if ! diff -u "$committed" "$generated" >"$tmp/diff" 2>&1; then
            echo "stale CRD: ${committed#"$root"/} differs from the types (run: make crds)" >&2
            head -n 40 "$tmp/diff" >&2
            status=1
        fi
    done
    for committed in "$have"/*.yaml; do
        [ -e "$committed" ] || continue
        if [ ! -e "$want/$(basename "$committed")" ]; then
            echo "stale CRD: ${committed#"$root"/} is no longer generated" >&2
            status=1
        fi
    done
done
# Before the CRDs were templates the chart carried them in crds/, where Helm installs them but never upgrades them.
if compgen -G "$root/charts/mssql-pg-operator/crds/*" >/dev/null; then
    echo "stale CRD: charts/mssql-pg-operator/crds/ must be empty (the CRDs are templates/crds/)" >&2
    status=1
fi
[ "$status" -eq 0 ] && echo "CRDs up to date"
exit "$status"
