"""A real Prometheus evaluates the dashboard and the alert rules during a real Migration (tests/helm/run.sh).

    check_prometheus.py --workdir DIR --operator HOST:PORT --namespace NS --migration NAME --manifest FILE
                        --dashboard JSON --rules YAML [--online-manifest FILE --online-migration NAME]

Starts Prometheus (tests/helm/prom.py: loopback, one-second scrapes of the operator and, through
tests/helm/prom_worker.sh, of every worker pod), applies FILE (the Migration NAME in NS), and while the Migration
copies and after it ended evaluates every query of the dashboard (variables namespace=NS, migration=NAME, as a user
picks them) and every alert expression through /api/v1/query. Asserts what a user would see (see check()); prints
"result: ..." lines; exits 1 listing every failed expectation. Prometheus is stopped at the end.

Panels that are legitimately empty for a healthy Migration (LEGITIMATELY_EMPTY) are listed with the reason.
"""

import argparse
import json
import os
import subprocess
import sys
import time

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import prom  # noqa: E402

# Panel title -> why it may show nothing for a healthy Migration. Every other panel must show a series.
LEGITIMATELY_EMPTY = {
    "ETA (from the task completion rate of the last 30m)": "nothing to estimate before the first task succeeded "
    "and after the last one did (no task Pending or Running)",
    "Reconcile errors by reason": "no reconcile failed: the counter has no reason label yet",
}
# The online migration row: the offline Migration has no capture pod; --online-manifest runs an online one
# afterwards, and these panels must show its stream (see check_online()).
ONLINE_PANELS = [
    "Capture lag",
    "Changes applied/s by operation",
    "Retention headroom",
    "Replication slot retained WAL",
]
LEGITIMATELY_EMPTY.update({t: "the offline Migration has no capture pod (the online one is checked after it)"
                           for t in ONLINE_PANELS})
# Online panels that may stay empty for a healthy stream, with the reason.
ONLINE_EMPTY = {
    "Retention headroom": "the source sets no max_slot_wal_keep_size: nothing limits what the slot keeps",
}


def kubectl(*args, stdin=None):
    return subprocess.run(
        ["kubectl", *args], input=stdin, capture_output=True, text=True, check=True, timeout=60
    ).stdout


def status(ns, name):
    out = kubectl("get", "migration", name, "-n", ns, "-o", "json")
    return json.loads(out).get("status", {})


class Samples:
    """What every panel target and alert expression returned, per evaluation, with the Migration's status."""

    def __init__(self, url, queries, alerts):
        self.url, self.queries, self.alerts = url, queries, alerts
        self.copying = []  # [(status, {query index: result}, {alert: result})]
        self.started = time.time()
        self.errors = []

    def take(self, st):
        at = time.time()
        results, fired = {}, {}
        for i, (_, title, _, expr) in enumerate(self.queries):
            try:
                results[i] = prom.query(self.url, expr, at)
            except RuntimeError as e:
                self.errors.append(f"panel {title!r}: {e}")
                results[i] = []
        for name, expr in self.alerts:
            try:
                fired[name] = prom.query(self.url, expr, at)
            except RuntimeError as e:
                self.errors.append(f"alert {name}: {e}")
                fired[name] = []
        return st, results, fired


def check(args):
    dashboard = json.load(open(args.dashboard))
    variables = {"namespace": args.namespace, "migration": args.migration}
    queries = prom.dashboard_queries(dashboard, variables)
    rules = yaml.safe_load(open(args.rules))
    alerts = [(r["alert"], r["expr"]) for g in rules["groups"] for r in g["rules"] if "alert" in r]
    url = prom.start(args.workdir, args.operator, args.rules)
    print(f"prometheus on {url}, workdir {args.workdir}")
    samples = Samples(url, queries, alerts)
    failures = []
    try:
        # The operator scraped before the Migration exists, as in a cluster where Prometheus already runs.
        wait_for(url, 'up{job="mssql-pg-operator"} == 1', 30)
        kubectl("apply", "-n", args.namespace, "-f", args.manifest)
        def phase(name):
            return f'mssqlpg_migration_phase{{namespace="{args.namespace}", migration="{args.migration}", phase="{name}"}} == 1'
        deadline = time.monotonic() + args.timeout
        st = {}
        while time.monotonic() < deadline:
            st = status(args.namespace, args.migration)
            if st.get("phase") in ("Succeeded", "Failed"):
                break
            # Only once Prometheus has scraped the Copying phase too: a scrape earlier still holds Planning's
            # figures (no task counted yet), as Grafana does for one scrape interval.
            if st.get("phase") == "Copying" and prom.query(url, phase("Copying")):
                samples.copying.append(samples.take(st))
            time.sleep(prom.SCRAPE_SECONDS)
        if st.get("phase") != "Succeeded":
            return [f"the Migration ended in phase {st.get('phase')!r}: {st.get('lastError')}"]
        # Once Prometheus has scraped the end, and one more scrape so every series carries the final status.
        wait_for(url, phase("Succeeded"), 30)
        time.sleep(2 * prom.SCRAPE_SECONDS)
        final = samples.take(status(args.namespace, args.migration))
        failures = expectations(samples, final, variables)
        failures += rules_healthy(url)
        for name, q in prom.template_queries(dashboard, variables):
            got = prom.label_values(url, q)
            if variables[name] not in got:
                failures.append(f"variable {name}: {q} offers {got}, not {variables[name]}")
        if args.online_manifest:
            failures += check_online(url, args, dashboard, alerts)
        # Last: it takes the operator away.
        failures += operator_down_fires(url, args.workdir, dict(alerts))
    finally:
        prom.stop(args.workdir)
    return samples.errors + failures


def wait_for(url, expr, timeout):
    deadline = time.monotonic() + timeout
    while not prom.query(url, expr):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{expr} stayed empty for {timeout}s")
        time.sleep(0.2)


def values(result):
    return [v for _, v in result]


def expectations(samples, final, variables):
    """What a user looking at the dashboard during and after the copy must see; returns the failures."""
    queries = samples.queries
    failures = []
    by_title = {}
    for i, (_, title, _, _) in enumerate(queries):
        by_title.setdefault(title, []).append(i)
    copying = samples.copying
    fst, fres, _ = final
    print(f"result: {len(copying)} evaluations of {len(queries)} panel queries and {len(samples.alerts)} alert "
          f"expressions while Copying, one after Succeeded")
    if len(copying) < 2:
        return failures + [f"only {len(copying)} evaluations while Copying: the copy was too short to watch"]

    def some(title, pred, what):
        hits = [s for s in copying for i in by_title[title] if any(pred(v) for v in values(s[1][i]))]
        if not hits:
            failures.append(f"{title!r}: never {what} while copying")

    # Throughput: above zero at some evaluation while copying.
    for title in ("Rows/s (all migrations)", "Rows/s per migration", "Bytes/s (all migrations)",
                  "Bytes/s per migration", "Current rows/s reported by running tasks", "Rows/s per worker pod",
                  "Chunks committed/s per table", "Reconciles/s"):
        some(title, lambda v: v > 0, "above zero")
    some("Worker memory (RSS and peak RSS per pod)", lambda v: v > 0, "above zero")
    some("Per chunk, p95: source read, target write, commit", lambda v: v > 0, "above zero")
    # Which side is slow: run.sh reads the source through a throttled link, so the writers wait for the source
    # most of a chunk's time. Each share is a fraction of the chunk time; source read must come out the largest.
    share = by_title["Share of chunk time: source read, target write, commit"]
    seen_shares = []
    for _, res, _ in copying:
        got = [sum(values(res[i])) for i in share]
        if any(not 0 <= v <= 1.0001 for v in got):
            failures.append(f"'Share of chunk time': {got} (source read, target write, commit) is not a fraction")
        if all(res[i] for i in share):
            seen_shares.append([round(v, 3) for v in got])
    if not seen_shares:
        failures.append("'Share of chunk time' never showed all three parts while copying")
    elif not any(src > max(write, commit) for src, write, commit in seen_shares):
        failures.append(f"'Share of chunk time': source read never the largest with the source throttled: {seen_shares}")
    print(f"result: share of chunk time (source read, target write, commit) at the last evaluations while copying: "
          f"{seen_shares[-3:]}")
    # Versions running: the operator's build, and the workers' while they run.
    components = {lab.get("component") for _, res, _ in copying + [final] for i in by_title["Versions running"]
                  for lab, _ in res[i]}
    if components != {"operator", "worker"}:
        failures.append(f"'Versions running' showed components {components}, expected the operator and the workers")
    # Rows/s per table: every table whose copy outlasted a few scrapes shows a positive rate.
    per_table_max = {}
    for _, res, _ in copying:
        for labels, v in res[by_title["Rows/s per table"][0]]:
            t = labels.get("table", "")
            per_table_max[t] = max(per_table_max.get(t, 0.0), v)
    big = [t["name"] for t in fst.get("tables", []) if t.get("rowsCopied", 0) >= 50_000]
    # A table copied in a few seconds can fall between the instant evaluations above; what a user
    # scrolling the graph sees is the range over the whole run, at the scrape step.
    i = by_title["Rows/s per table"][0]
    start = samples.started - 5 * prom.SCRAPE_SECONDS
    for labels, points in prom.query_range(samples.url, queries[i][3], start, time.time(), prom.SCRAPE_SECONDS):
        t = labels.get("table", "")
        per_table_max[t] = max([per_table_max.get(t, 0.0)] + [v for _, v in points])
    for table in big:
        if not any(per_table_max.get(k, 0) > 0 for k in per_table_max if k.endswith(table.split(".")[-1])):
            failures.append(f"'Rows/s per table': {table} never above zero while copying ({per_table_max})")
    print(f"result: highest rows/s per table while copying: "
          + ", ".join(f"{k} {v:.0f}" for k, v in sorted(per_table_max.items())))

    # Tasks by state sum to the plan's total at every evaluation.
    total = fst.get("plan", {}).get("tasksTotal")
    sums = [sum(values(res[by_title["Tasks by state"][0]])) for _, res, _ in copying + [final]]
    if any(got != total for got in sums):
        failures.append(f"'Tasks by state' sums to {sums} at the evaluations, the plan has {total} tasks "
                        f"(status progress {[st.get('progress') for st, _, _ in copying + [final]]})")
    # Progress: a fraction while copying, 1 at the end.
    prog = by_title["Progress (tasks done / planned)"][0]
    for _, res, _ in copying:
        if any(not 0 <= v <= 1 for v in values(res[prog])) or not res[prog]:
            failures.append(f"'Progress': {res[prog]} while copying")
            break
    if values(fres[prog]) != [1.0]:
        failures.append(f"'Progress' after Succeeded: {fres[prog]}, expected 1")
    # The phase gauge: Copying seen while copying, Succeeded (and nothing else) at the end.
    phases = by_title["Migrations by phase"][0]
    seen = {lab.get("phase") for _, res, _ in copying for lab, _ in res[phases]}
    if "Copying" not in seen:
        failures.append(f"'Migrations by phase' never showed Copying while copying (saw {seen})")
    final_phases = {lab.get("phase"): v for lab, v in fres[phases]}
    if final_phases != {fst["phase"]: 1.0}:
        failures.append(f"'Migrations by phase' after the end: {final_phases}, status phase {fst['phase']}")
    # Peak memory: the status's figure.
    mem = values(fres[by_title["Peak worker memory"][0]])
    if mem != [float(fst.get("peakWorkerMemoryBytes", -1))]:
        failures.append(f"'Peak worker memory' {mem}, status.peakWorkerMemoryBytes {fst.get('peakWorkerMemoryBytes')}")
    # Rows copied per table: the status's per-table counts.
    table_rows = {lab.get("table"): v for lab, v in fres[by_title["Rows copied per table"][0]]}
    status_rows = {t["name"]: float(t.get("rowsCopied", 0)) for t in fst.get("tables", [])}
    if sorted(table_rows.values()) != sorted(status_rows.values()) or sum(table_rows.values()) != float(fst.get("rowsCopied", -1)):
        failures.append(f"'Rows copied per table' {table_rows}, status {status_rows} (rowsCopied {fst.get('rowsCopied')})")
    # No failure anywhere: the failure panels show zeros, not nothing.
    for title in ("Failed tasks", "Failed tasks and failed migrations", "Reconcile errors (1h)"):
        for i in by_title[title]:
            wrong = [res[i] for _, res, _ in copying + [final] if not res[i] or any(v != 0 for v in values(res[i]))]
            if wrong:
                failures.append(f"{title!r} ({queries[i][3]}): {wrong[0]}, expected zeros")
    # ETA: a non-negative number of seconds when shown.
    for _, res, _ in copying:
        for i in by_title["ETA (from the task completion rate of the last 30m)"]:
            if any(v < 0 for v in values(res[i])):
                failures.append(f"'ETA': {res[i]}")
    # No panel empty that should not be: every panel showed a series at some evaluation.
    shown = {}
    for _, res, _ in copying + [final]:
        for i, r in res.items():
            if r:
                shown[queries[i][1]] = True
    empty = sorted({q[1] for q in queries} - set(shown))
    unexpected = [t for t in empty if t not in LEGITIMATELY_EMPTY]
    if unexpected:
        failures.append(f"panels that never showed a series: {unexpected}")
    for t in empty:
        if t in LEGITIMATELY_EMPTY:
            print(f"result: empty, legitimately: {t!r}: {LEGITIMATELY_EMPTY[t]}")
    # Alerts: a healthy Migration fires none (during or after), and the operator is scraped.
    for n, (st, _, fired) in enumerate(copying + [final]):
        for name, res in fired.items():
            mine = [lab for lab, _ in res if lab.get("migration") in (None, variables["migration"])]
            if mine:
                failures.append(f"alert {name} would fire on a healthy Migration at evaluation {n} "
                                f"(status {st.get('phase')} {st.get('progress')}, {st.get('rowsCopied')} rows): {mine}")
    return failures


def check_online(url, args, dashboard, alerts):
    """An online Migration (--online-manifest, named --online-migration): while it streams, the dashboard's
    online row shows its capture pod's series and no alert fires on it; the cutover requested through the
    Migration then ends it Succeeded. Returns the failures."""
    name = args.online_migration
    variables = {"namespace": args.namespace, "migration": name}
    queries = [q for q in prom.dashboard_queries(dashboard, variables) if q[1] in ONLINE_PANELS]
    kubectl("apply", "-n", args.namespace, "-f", args.online_manifest)
    deadline = time.monotonic() + args.timeout
    st = {}
    while time.monotonic() < deadline:
        st = status(args.namespace, name)
        if st.get("phase") in ("Streaming", "Failed"):
            break
        time.sleep(prom.SCRAPE_SECONDS)
    if st.get("phase") != "Streaming":
        return [f"the online Migration reached {st.get('phase')!r}, not Streaming: {st.get('lastError')}"]
    failures = []
    shown = {}
    fired = []
    # Some scrapes of the stream: the lag series needs the capture's first report after the stream started.
    for _ in range(12):
        time.sleep(prom.SCRAPE_SECONDS)
        at = time.time()
        for _, title, _, expr in queries:
            r = prom.query(url, expr, at)
            if r:
                shown[title] = r
        for alert, expr in alerts:
            fired += [(alert, lab) for lab, _ in prom.query(url, expr, at) if name in lab.get("migration", "")]
    for title in ONLINE_PANELS:
        if title in shown:
            print(f"result: online panel {title!r}: {shown[title]}")
        elif title in ONLINE_EMPTY:
            print(f"result: online panel {title!r} empty, legitimately: {ONLINE_EMPTY[title]}")
        else:
            failures.append(f"online panel {title!r} never showed a series while {name} streamed")
    lag = [v for _, v in shown.get("Capture lag", [])]
    if lag and not all(0 <= v < 60 for v in lag):
        failures.append(f"'Capture lag' {lag} while streaming an idle source")
    if fired:
        failures.append(f"alerts would fire on a healthy stream: {fired}")
    kubectl("patch", "mig", name, "-n", args.namespace, "--type=merge", "-p",
            '{"spec":{"cutover":{"requested":true}}}')
    while time.monotonic() < deadline:
        st = status(args.namespace, name)
        if st.get("phase") in ("Succeeded", "Failed"):
            break
        time.sleep(prom.SCRAPE_SECONDS)
    if st.get("phase") != "Succeeded":
        failures.append(f"the online Migration ended in {st.get('phase')!r} after the cutover: {st.get('lastError')}")
    else:
        print(f"result: online Migration cut over, downtime {st.get('online', {}).get('downtimeSeconds')}s")
    return failures


def operator_down_fires(url, workdir, alerts):
    """The operator gone from service discovery: MssqlPgOperatorDown's expression holds on the real series."""
    os.remove(os.path.join(workdir, "targets", "operator-0.json"))
    try:
        wait_for(url, alerts["MssqlPgOperatorDown"], 30)
    except RuntimeError as e:
        return [f"MssqlPgOperatorDown never held with the operator gone: {e}"]
    print("result: with the operator no longer scraped, MssqlPgOperatorDown's expression holds")
    return []


def rules_healthy(url):
    """Prometheus loaded every alert rule and evaluates it without error."""
    groups = prom.api(url, "/api/v1/rules", {"type": "alert"})["groups"]
    rules = [r for g in groups for r in g["rules"]]
    bad = [f"{r['name']}: {r.get('health')} {r.get('lastError', '')}" for r in rules if r.get("health") != "ok"]
    print(f"result: Prometheus evaluates {len(rules)} alert rules, {len(bad)} unhealthy")
    return [f"rule not healthy: {b}" for b in bad] + ([] if rules else ["Prometheus loaded no alert rule"])


def main():
    p = argparse.ArgumentParser()
    for a in ("workdir", "operator", "namespace", "migration", "manifest", "dashboard", "rules"):
        p.add_argument(f"--{a}", required=True)
    p.add_argument("--timeout", type=float, default=300)
    p.add_argument("--online-manifest", help="an online Migration to stream after the offline one")
    p.add_argument("--online-migration", help="its name")
    args = p.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    failures = check(args)
    for f in failures:
        print(f"FAIL: {f}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
