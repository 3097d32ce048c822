#!/usr/bin/env python3
"""Checks that every metric the Grafana dashboard and the alert rules query is one the code exports.

Exported = registered in the Rust sources (prometheus `Opts::new("mssqlpg_...")` and friends in operator/src,
worker/src, telemetry/src; histograms add _bucket/_sum/_count; a registered process collector its process_*), plus whatever a scrape of a running operator
(--scrape FILE, Prometheus text) shows. With a scrape, the labels each query matches on must also be labels
that metric carries. Queries are parsed with the PromQL grammar (promql-parser), so a syntax error fails too. Also
checks that every dashboard panel uses the `${datasource}` variable.

  check_metrics.py --dashboard deploy/dashboards/mssql-pg-operator.json --rules deploy/alerts/prometheus-rules.yaml \
      [--scrape metrics.txt]
Exit status 1 with one line per problem.
"""
import argparse
import json
import pathlib
import re
import sys

import promql_parser
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
SOURCE_DIRS = ["operator/src", "worker/src", "telemetry/src"]
REGISTRATION = re.compile(
    r'(?:Histogram)?Opts::new\(\s*"(mssqlpg_\w+)"|(?:Int)?(?:Counter|Gauge)::new\(\s*"(mssqlpg_\w+)"'
)
HISTOGRAM = re.compile(r'HistogramOpts::new\(\s*"(mssqlpg_\w+)"')
# The prometheus crate's process collector (Linux), registered by name in the sources.
PROCESS_COLLECTOR = re.compile(r"ProcessCollector::for_self\(\)")
PROCESS_METRICS = {
    "process_cpu_seconds_total", "process_open_fds", "process_max_fds", "process_virtual_memory_bytes",
    "process_resident_memory_bytes", "process_start_time_seconds", "process_threads",
}


def exported_from_source():
    names = set()
    for d in SOURCE_DIRS:
        for path in sorted((ROOT / d).rglob("*.rs")):
            text = path.read_text()
            for m in REGISTRATION.finditer(text):
                names.add(m.group(1) or m.group(2))
            for m in HISTOGRAM.finditer(text):
                names.update(m.group(1) + s for s in ("_bucket", "_sum", "_count"))
            if PROCESS_COLLECTOR.search(text):
                names.update(PROCESS_METRICS)
    return names


def parse_scrape(text):
    """metric name -> set of label names, from the Prometheus text format."""
    labels = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})?\s", line)
        if not m:
            continue
        seen = labels.setdefault(m.group(1), set())
        if m.group(3):
            seen.update(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="', m.group(3)))
    return labels


def grafana_to_promql(expr):
    """Grafana's interval variables are not PromQL; any valid duration parses the same way."""
    return re.sub(r"\$__(rate_interval|interval|range)", "5m", expr)


def selectors(expr):
    """(metric, {label names matched}) for every series selector, from the real PromQL grammar (promql-parser).
    A query that does not parse raises ValueError."""
    found = []

    def walk(node):
        if node is None:
            return
        if isinstance(node, promql_parser.VectorSelector):
            labels = {m.name for m in node.matchers.matchers}
            for group in node.matchers.or_matchers or []:
                labels.update(m.name for m in group)
            name = node.name or next((m.value for m in node.matchers.matchers if m.name == "__name__"), None)
            found.append((name, labels - {"__name__"}))
        elif isinstance(node, promql_parser.MatrixSelector):
            walk(node.vector_selector)
        elif isinstance(node, promql_parser.BinaryExpr):
            walk(node.lhs)
            walk(node.rhs)
        elif isinstance(node, promql_parser.Call):
            for a in node.args:
                walk(a)
        elif isinstance(node, promql_parser.AggregateExpr):
            walk(node.expr)
            walk(node.param)
        elif isinstance(node, (promql_parser.ParenExpr, promql_parser.UnaryExpr, promql_parser.SubqueryExpr)):
            walk(node.expr)

    try:
        walk(promql_parser.parse(grafana_to_promql(expr)))
    except ValueError:
        raise
    except Exception as e:  # the binding raises its own error types for syntax errors
        raise ValueError(str(e)) from e
    return found


def dashboard_queries(path, problems):
    dash = json.loads(path.read_text())
    queries = []

    def walk(panels):
        for p in panels:
            if p.get("type") != "row":
                ds = p.get("datasource", {})
                if ds.get("uid") != "${datasource}":
                    problems.append(f"{path.name}: panel {p.get('title')!r} does not use the ${{datasource}} variable")
                for t in p.get("targets", []):
                    if t.get("datasource", ds).get("uid") != "${datasource}":
                        problems.append(f"{path.name}: a query of {p.get('title')!r} does not use ${{datasource}}")
                    queries.append((f"panel {p.get('title')!r}", t["expr"]))
            walk(p.get("panels", []))

    walk(dash.get("panels", []))
    for v in dash.get("templating", {}).get("list", []):
        if v.get("type") == "query":
            q = v["query"]["query"] if isinstance(v.get("query"), dict) else v["query"]
            m = re.fullmatch(r"label_values\((.*),\s*([a-zA-Z_]\w*)\)", q)
            if m:
                queries.append((f"variable {v['name']}", m.group(1)))
            else:
                queries.append((f"variable {v['name']}", q))
    if not any(v.get("type") == "datasource" and v.get("name") == "datasource"
               for v in dash.get("templating", {}).get("list", [])):
        problems.append(f"{path.name}: no `datasource` variable")
    return queries


def rule_queries(path):
    doc = yaml.safe_load(path.read_text())
    groups = doc["spec"]["groups"] if "spec" in doc else doc["groups"]
    return [(f"rule {r.get('alert') or r.get('record')}", r["expr"]) for g in groups for r in g["rules"]]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dashboard", action="append", default=[])
    ap.add_argument("--rules", action="append", default=[])
    ap.add_argument("--scrape", action="append", default=[])
    args = ap.parse_args()

    exported = exported_from_source()
    scraped = {}
    for s in args.scrape:
        for name, labels in parse_scrape(pathlib.Path(s).read_text()).items():
            scraped.setdefault(name, set()).update(labels)
    problems = []
    queries = []
    for d in args.dashboard:
        queries += [(f"{pathlib.Path(d).name}: {w}", q) for w, q in dashboard_queries(pathlib.Path(d), problems)]
    for r in args.rules:
        queries += [(f"{pathlib.Path(r).name}: {w}", q) for w, q in rule_queries(pathlib.Path(r))]
    if not queries:
        problems.append("no queries found")
    used = set()
    for where, q in queries:
        try:
            found = selectors(q)
        except ValueError as e:
            problems.append(f"{where}: not valid PromQL ({e}): {q}")
            continue
        for name, labels in found:
            used.add(name)
            if name not in exported and name not in scraped:
                problems.append(f"{where}: metric {name} is not exported by the code")
            elif name in scraped:
                missing = labels - scraped[name] - {"__name__"}
                if missing:
                    problems.append(f"{where}: {name} has no label(s) {sorted(missing)} (scraped: {sorted(scraped[name])})")
    for p in problems:
        print(f"check_metrics: {p}", file=sys.stderr)
    if problems:
        return 1
    print(f"check_metrics: {len(queries)} queries over {len(used)} metrics, all exported "
          f"({len(exported)} registered in the sources, {len(scraped)} scraped)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
