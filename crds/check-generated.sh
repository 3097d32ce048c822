#!/usr/bin/env bash
# Fails when the committed CRD files differ from what the Rust types generate.
# Usage: crds/check-generated.sh   (from anywhere; run crdgen without --out-dir to fix)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cargo run --quiet --manifest-path "$root/Cargo.toml" -p mssql-pg-crds --bin crdgen -- --out-dir "$tmp" >/dev/null
status=0
for generated in "$tmp"/*.yaml; do
    file="$(basename "$generated")"
    for committed in "$root/crds/generated/$file" "$root/charts/mssql-pg-operator/crds/$file"; do
        if ! diff -u "$committed" "$generated" >"$tmp/diff" 2>&1; then
            echo "stale CRD: ${committed#"$root"/} differs from the types (run: cargo run -p mssql-pg-crds --bin crdgen)" >&2
            head -n 40 "$tmp/diff" >&2
            status=1
        fi
    done
done
for dir in "$root/crds/generated" "$root/charts/mssql-pg-operator/crds"; do
    for committed in "$dir"/*.yaml; do
        [ -e "$committed" ] || continue
        if [ ! -e "$tmp/$(basename "$committed")" ]; then
            echo "stale CRD: ${committed#"$root"/} is no longer generated" >&2
            status=1
        fi
    done
done
[ "$status" -eq 0 ] && echo "CRDs up to date"
exit "$status"
