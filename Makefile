# mssql-pg-operator: every developer and CI command starts here.
#   make test   - install what is missing, lint, and run every test (what .ci/run calls)
#   make demo   - a real migration end to end (see README)
#   make bench  - benchmarks (release builds), results in bench/RESULTS.md
SHELL := /bin/bash
.DEFAULT_GOAL := help

CACHE ?= $(HOME)/.cache/mssql-pg-operator
VENV  := .venv
export MSSQLPG_CACHE := $(CACHE)

.PHONY: help deps lint crds crds-check tiberius-check release-check test test-rust test-clients bench fmt demo demo-down manifests manifests-check

help:
	@echo "make test   install missing tools, lint, run all tests"
	@echo "make deps   install Debian/PyPI packages the tests need"
	@echo "make lint   cargo fmt --check + clippy -D warnings"
	@echo "make crds   regenerate the CRD YAML"
	@echo "make bench  run the benchmarks (release)"
	@echo "make demo   a real migration end to end on a local control plane (make demo-down stops leftovers)"
	@echo "make manifests  regenerate deploy/manifests, dashboards, alerts and the chart README from the chart"

deps:
	@tests/scripts/install-deps.sh

lint:
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets --locked -- -D warnings

crds:
	cargo run -q -p mssql-pg-crds --bin crdgen

crds-check:
	crds/check-generated.sh

# vendor/tiberius/upstream/*.patch are cut from the vendored tree; fail when they are stale.
tiberius-check:
	vendor/tiberius/upstream/make-patches.sh --check

fmt:
	cargo fmt --all

# The release and CI workflows (actionlint, built once into $(CACHE)/tools), the tag check, the README's install line.
release-check:
	tests/release/run.sh

# Everything, against a private PostgreSQL started for the run and stopped at the end.
# On a fresh machine the Kubernetes binaries (a Go build on one core) are built while clippy runs.
test: deps
	@mkdir -p $(CACHE) && (tests/control-plane/build.sh > $(CACHE)/k8s-build-early.log 2>&1 &)
	$(MAKE) lint crds-check tiberius-check release-check
	tests/scripts/run-tests.sh

test-rust:
	tests/scripts/run-tests.sh rust

test-clients:
	tests/scripts/run-tests.sh clients

# The benchmark harness: release worker + TDS test server + a private PostgreSQL; results into
# bench/RESULTS.md and bench/results/*.png (SCALE=0.1 for the larger run; issue 3's shapes:
# cargo run --release -p bench -- shapes --shape mixed --rows 1000000 --out bench/RESULTS.md).
SCALE ?= 0.01
bench:
	cargo build --release --locked -p mssql-pg-worker -p tds-testserver
	cargo run --release --locked -p bench -- harness --scale $(SCALE) --out bench/RESULTS.md

# A real migration end to end: control plane, PostgreSQL, TDS test server, the chart, a Migration (demo/run.sh).
demo:
	demo/run.sh

demo-down:
	demo/down.sh

# Plain manifests, the dashboard, the alert rules and the chart README, from the chart (helm from the control plane's bin dir).
manifests:
	PATH="$$(tests/control-plane/build.sh):$$PATH" deploy/generate.sh

manifests-check:
	PATH="$$(tests/control-plane/build.sh):$$PATH" deploy/generate.sh --check
