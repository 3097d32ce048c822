#!/usr/bin/env bash
# What a release publishes, read from the chart, and the check that a version tag matches it.
#   deploy/release-version.sh TAG      (TAG: the pushed git tag, e.g. v0.1.0)
# Prints KEY=VALUE lines for $GITHUB_OUTPUT (the release workflow) and exits 1 when TAG is not "v" + the chart's
# version, or when the chart's version, its appVersion (the image tag the chart defaults to: chart and image are
# released together) and the Cargo workspace's version (what the binaries' --version print) differ.
#   version=0.1.0
#   image=ghcr.io/mssql-pg-operator/mssql-pg-operator      (values.yaml image.repository)
#   chart_repo=oci://ghcr.io/mssql-pg-operator/charts      (where `helm push` puts the chart)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
chart="$root/charts/mssql-pg-operator"
tag="${1:?usage: deploy/release-version.sh TAG}"

# Top-level scalar keys only: Chart.yaml and values.yaml keep them unindented and unquoted or double-quoted.
field() { sed -n "s/^$2:[[:space:]]*\"\{0,1\}\([^\"#[:space:]]*\)\"\{0,1\}.*/\1/p" "$1" | head -n 1; }
version="$(field "$chart/Chart.yaml" version)"
app_version="$(field "$chart/Chart.yaml" appVersion)"
# image.repository: the first `repository:` under the top-level `image:` block.
image="$(awk '/^image:/ { inside = 1; next } /^[^[:space:]#]/ { inside = 0 } inside && $1 == "repository:" { print $2; exit }' \
    "$chart/values.yaml")"

fail() { echo "release-version.sh: $*" >&2; exit 1; }
[ -n "$version" ] && [ -n "$app_version" ] || fail "no version/appVersion in $chart/Chart.yaml"
[ -n "$image" ] || fail "no image.repository in $chart/values.yaml"
[ "$version" = "$app_version" ] ||
    fail "Chart.yaml version $version and appVersion $app_version differ: the chart and the image are released together"
crate_version="$(awk '/^\[workspace.package\]/ { inside = 1; next } /^\[/ { inside = 0 }
    inside && $1 == "version" { gsub(/"/, "", $3); print $3; exit }' "$root/Cargo.toml")"
[ "$crate_version" = "$version" ] ||
    fail "Cargo.toml [workspace.package] version ${crate_version:-none} differs from the chart's $version"
[ "$tag" = "v$version" ] || fail "tag $tag does not match the chart: expected v$version (charts/mssql-pg-operator/Chart.yaml)"
registry_org="${image%/*}"
echo "version=$version"
echo "image=$image"
echo "chart_repo=oci://$registry_org/charts"
