#!/usr/bin/env python3
"""Every alert of a Prometheus rule file has its promtool unit test file, and that file shows it both ways.

  check_alert_tests.py RULES.yaml TESTS_DIR RUNBOOKS.md

For each alert A of RULES.yaml, TESTS_DIR/A.test.yaml must exist, load RULES.yaml, and hold at least one
alert_rule_test for A that expects it firing and one that expects it silent (promtool test rules then checks
that the expectations hold). A test file naming an alert the rules do not have is an error too.
Every alert's runbook_url must point into RUNBOOKS.md (docs/operations.md) at a heading there, as GitHub
anchors it.
"""
import pathlib
import re
import sys

import yaml


def github_anchors(markdown):
    """The anchors GitHub gives a page's headings: lower case, punctuation but - and _ dropped, spaces to -."""
    anchors = set()
    in_code = False
    for line in markdown.splitlines():
        if line.startswith("```"):
            in_code = not in_code
        m = None if in_code else re.match(r"#{1,6} +(.+?) *$", line)
        if m:
            anchors.add(re.sub(r"[^\w\- ]", "", m.group(1).lower()).replace(" ", "-"))
    return anchors


def main():
    rules_path, tests_dir = pathlib.Path(sys.argv[1]).resolve(), pathlib.Path(sys.argv[2])
    runbooks = pathlib.Path(sys.argv[3])
    rules = yaml.safe_load(rules_path.read_text())
    alerts = {r["alert"] for g in rules["groups"] for r in g["rules"] if "alert" in r}
    problems = []
    anchors = github_anchors(runbooks.read_text())
    for rule in (r for g in rules["groups"] for r in g["rules"] if "alert" in r):
        url = rule.get("annotations", {}).get("runbook_url", "")
        page, _, anchor = url.partition("#")
        # RUNBOOKS.md is given relative to the repository, as the URL names it.
        if not page.endswith("/" + runbooks.as_posix()):
            problems.append(f"{rule['alert']}: runbook_url {url!r} does not point at {runbooks}")
        elif anchor not in anchors:
            problems.append(f"{rule['alert']}: runbook_url {url!r}: no heading #{anchor} in {runbooks}")
    for alert in sorted(alerts):
        path = tests_dir / f"{alert}.test.yaml"
        if not path.exists():
            problems.append(f"{alert}: no unit test file {path}")
            continue
        doc = yaml.safe_load(path.read_text())
        loaded = {(path.parent / f).resolve() for f in doc.get("rule_files", [])}
        if rules_path not in loaded:
            problems.append(f"{path.name}: rule_files does not load {rules_path}")
        cases = [c for t in doc.get("tests", []) for c in t.get("alert_rule_test", []) if c.get("alertname") == alert]
        if not any(c.get("exp_alerts") for c in cases):
            problems.append(f"{path.name}: no case expects {alert} to fire")
        if not any(not c.get("exp_alerts") for c in cases):
            problems.append(f"{path.name}: no case expects {alert} to stay silent")
    for path in sorted(tests_dir.glob("*.test.yaml")):
        name = path.name.removesuffix(".test.yaml")
        if name not in alerts:
            problems.append(f"{path.name}: no alert {name} in {rules_path.name}")
    for p in problems:
        print(f"check_alert_tests: {p}", file=sys.stderr)
    if not problems:
        print(f"result: {len(alerts)} alerts, each with a unit test that fires it and one that keeps it silent, "
              f"and a runbook_url to its section of {runbooks}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
