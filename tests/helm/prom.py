"""A throwaway Prometheus on loopback, for the chart tests (check_prometheus.py) and the demo (render_dashboard.py).

It scrapes every second (honoring the series' own labels, as the chart's monitors do), with file-based service
discovery in DIR/targets: operator-*.json for the operator's
metrics address (written by start()), worker-*.json for worker pods (written by tests/helm/prom_worker.sh, the
worker command that stands in for the chart's PodMonitor). The alert rules are loaded too, so Prometheus itself
evaluates them.

    prom.py start DIR OPERATOR_ADDR [RULES]   starts it in the background; prints its URL (DIR/url, DIR/pid)
    prom.py stop DIR                          stops the one started in DIR

Also the dashboard's queries with its template variables substituted as Grafana does (dashboard_queries).
"""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

SCRAPE_SECONDS = 1
# Grafana's $__rate_interval is max($__interval + scrape interval, 4 x scrape interval): 4s for a one-second
# scrape over a range of a few minutes.
RATE_INTERVAL = f"{4 * SCRAPE_SECONDS}s"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_target(sd_dir, name, addr, labels=None):
    """Writes one file-SD target file, renamed into place so Prometheus never reads half of it."""
    tmp = os.path.join(sd_dir, f".{name}.json.tmp")
    with open(tmp, "w") as f:
        json.dump([{"targets": [addr], "labels": labels or {}}], f)
    os.rename(tmp, os.path.join(sd_dir, f"{name}.json"))


def start(workdir, operator_addr, rules=None, timeout=60):
    """Starts Prometheus scraping `operator_addr` and the worker targets in workdir/targets; returns its URL."""
    sd = os.path.join(workdir, "targets")
    os.makedirs(sd, exist_ok=True)
    write_target(sd, "operator-0", operator_addr)
    port = free_port()
    rule_files = f"rule_files: ['{os.path.abspath(rules)}']\n" if rules else ""
    config = os.path.join(workdir, "prometheus.yml")
    with open(config, "w") as f:
        f.write(
            f"""global:
  scrape_interval: {SCRAPE_SECONDS}s
  scrape_timeout: {SCRAPE_SECONDS}s
  evaluation_interval: {SCRAPE_SECONDS}s
{rule_files}scrape_configs:
- job_name: mssql-pg-operator
  honor_labels: true
  file_sd_configs: [{{files: ['{sd}/operator-*.json'], refresh_interval: 1s}}]
- job_name: mssql-pg-worker
  honor_labels: true
  file_sd_configs: [{{files: ['{sd}/worker-*.json'], refresh_interval: 1s}}]
"""
        )
    log = open(os.path.join(workdir, "prometheus.log"), "w")
    proc = subprocess.Popen(
        [
            "prometheus",
            f"--config.file={config}",
            f"--storage.tsdb.path={os.path.join(workdir, 'data')}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--log.level=warn",
        ],
        stdout=log,
        stderr=log,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    with open(os.path.join(workdir, "pid"), "w") as f:
        f.write(str(proc.pid))
    with open(os.path.join(workdir, "url"), "w") as f:
        f.write(url)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"prometheus exited: {open(log.name).read()[-2000:]}")
        try:
            with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as r:
                if r.status == 200:
                    return url
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.2)
    stop(workdir)
    raise RuntimeError(f"prometheus not ready within {timeout}s: {open(log.name).read()[-2000:]}")


def stop(workdir, timeout=20):
    """Stops the Prometheus started in workdir (its pid file), waiting for it to exit."""
    path = os.path.join(workdir, "pid")
    try:
        pid = int(open(path).read())
    except (OSError, ValueError):
        return
    try:
        # Only if that pid still is Prometheus (pids are reused).
        if open(f"/proc/{pid}/comm").read().strip() != "prometheus":
            raise ProcessLookupError
        os.kill(pid, signal.SIGTERM)
    except (ProcessLookupError, FileNotFoundError):
        os.remove(path)
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            # Reaps it when it is our child; otherwise only probes that it still exists.
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                break
        except ChildProcessError:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
        time.sleep(0.1)
    else:
        os.kill(pid, signal.SIGKILL)
    os.remove(path)


def api(url, path, params):
    """GETs a Prometheus HTTP API path; returns `data` or raises with Prometheus's error."""
    full = f"{url}{path}?{urllib.parse.urlencode(params, doseq=True)}"
    try:
        with urllib.request.urlopen(full, timeout=10) as r:
            body = json.load(r)
    except urllib.error.HTTPError as e:
        body = json.load(e)
    if body.get("status") != "success":
        raise RuntimeError(f"{path} {params}: {body.get('errorType')}: {body.get('error')}")
    return body["data"]


def query(url, expr, at=None):
    """An instant query: [(labels, value)] of a vector, or [({}, value)] of a scalar."""
    params = {"query": expr}
    if at is not None:
        params["time"] = f"{at:.3f}"
    data = api(url, "/api/v1/query", params)
    if data["resultType"] == "scalar":
        return [({}, float(data["result"][1]))]
    return [(r["metric"], float(r["value"][1])) for r in data["result"]]


def query_range(url, expr, start, end, step):
    """A range query: [(labels, [(t, value)])]."""
    data = api(
        url, "/api/v1/query_range", {"query": expr, "start": start, "end": end, "step": step}
    )
    return [(r["metric"], [(float(t), float(v)) for t, v in r["values"]]) for r in data["result"]]


def label_values(url, expr):
    """Grafana's label_values(SELECTOR, LABEL) template query, answered by the series API."""
    m = re.fullmatch(r"\s*label_values\((.*),\s*(\w+)\)\s*", expr)
    if not m:
        raise ValueError(f"not a label_values() query: {expr}")
    series = api(url, "/api/v1/series", {"match[]": m.group(1)})
    return sorted({s[m.group(2)] for s in series if m.group(2) in s})


def substitute(expr, variables, rate_interval=RATE_INTERVAL):
    """The dashboard's variables ($name or ${name}) and Grafana's $__rate_interval, as Grafana sends them."""
    expr = expr.replace("$__rate_interval", rate_interval)
    for name, value in variables.items():
        expr = expr.replace("${" + name + "}", value).replace("$" + name, value)
    if "$" in expr:
        raise ValueError(f"a variable is left unsubstituted: {expr}")
    return expr


def dashboard_queries(dashboard, variables, rate_interval=RATE_INTERVAL):
    """[(panel id, panel title, legendFormat, PromQL)] of every panel target, variables substituted."""
    out = []
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            if "expr" in target:
                out.append(
                    (
                        panel["id"],
                        panel["title"],
                        target.get("legendFormat", ""),
                        substitute(target["expr"], variables, rate_interval),
                    )
                )
    return out


def template_queries(dashboard, variables):
    """[(variable name, label_values query)] of the dashboard's query variables, earlier variables substituted."""
    out = []
    for var in dashboard.get("templating", {}).get("list", []):
        if var.get("type") == "query":
            q = var["query"]["query"] if isinstance(var["query"], dict) else var["query"]
            for name, value in variables.items():
                q = q.replace("$" + name, value)
            out.append((var["name"], q))
    return out


def main(argv):
    if len(argv) >= 3 and argv[0] == "start":
        print(start(argv[1], argv[2], argv[3] if len(argv) > 3 else None))
        return 0
    if len(argv) == 2 and argv[0] == "stop":
        stop(argv[1])
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
