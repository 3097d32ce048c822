#!/usr/bin/env bash
# Checks of the release machinery that need no GitHub (make test: `make release-check`):
# 1. actionlint (with shellcheck on every `run:` script) on .github/workflows/*.yml; built once from the Go module
#    proxy into $MSSQLPG_CACHE/tools (like the Kubernetes binaries)
# 2. deploy/release-version.sh accepts the chart's own tag and refuses another one
# 3. the README's install command names the chart where the release workflow pushes it, at the chart's version
# Prints "release checks: N passed, N failed" last.
set -uo pipefail
REPO="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$REPO"
ACTIONLINT_VERSION=v1.7.12
CACHE="${MSSQLPG_CACHE:-$HOME/.cache/mssql-pg-operator}"
TOOLS="$CACHE/tools/actionlint-$ACTIONLINT_VERSION"
passed=0
failed=0
ok() { passed=$((passed + 1)); echo "release checks: ok   $1"; }
bad() { failed=$((failed + 1)); echo "release checks: FAIL $1${2:+: $2}" >&2; }

if [ ! -x "$TOOLS/actionlint" ]; then
    command -v go >/dev/null || export PATH="$PATH:/usr/local/go/bin"
    mkdir -p "$TOOLS"
    echo "release checks: building actionlint $ACTIONLINT_VERSION into $TOOLS"
    CGO_ENABLED=0 GOBIN="$TOOLS" nice go install "github.com/rhysd/actionlint/cmd/actionlint@$ACTIONLINT_VERSION" ||
        { bad "go install actionlint"; echo "release checks: $passed passed, $failed failed"; exit 1; }
fi
shellcheck_flag=()
if command -v shellcheck >/dev/null; then
    shellcheck_flag=(-shellcheck "$(command -v shellcheck)")
else
    echo "release checks: shellcheck not found: workflow scripts are not shell-checked (make deps installs it)" >&2
fi
if out="$("$TOOLS/actionlint" "${shellcheck_flag[@]}" .github/workflows/*.yml 2>&1)"; then
    ok "actionlint $ACTIONLINT_VERSION: $(ls .github/workflows/*.yml | xargs -n1 basename | tr '\n' ' ')"
else
    bad "actionlint" "$out"
fi

meta="$(deploy/release-version.sh "v$(sed -n 's/^version: *//p' charts/mssql-pg-operator/Chart.yaml)" 2>&1)"
rc=$?
version="$(sed -n 's/^version=//p' <<<"$meta")"
chart_repo="$(sed -n 's/^chart_repo=//p' <<<"$meta")"
if [ $rc = 0 ] && [ -n "$version" ] && [ -n "$chart_repo" ]; then
    ok "release-version.sh accepts v$version ($chart_repo)"
else
    bad "release-version.sh on the chart's own tag" "$meta"
fi
if wrong="$(deploy/release-version.sh "v$version.1" 2>&1)"; then
    bad "release-version.sh accepted the tag v$version.1" "$wrong"
elif grep -q "does not match the chart" <<<"$wrong"; then
    ok "release-version.sh refuses a tag that is not the chart's version"
else
    bad "release-version.sh on a wrong tag" "$wrong"
fi

want="helm install mssql-pg-operator $chart_repo/mssql-pg-operator --version $version"
if grep -qF -- "$want" README.md && grep -qF -- "$want" docs/operations.md; then
    ok "README and docs/operations.md install from $chart_repo at $version"
else
    bad "README.md and docs/operations.md must say: $want"
fi

echo "release checks: $passed passed, $failed failed"
[ $failed = 0 ]
