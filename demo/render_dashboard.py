"""Renders the dashboard's main panels over a run into a PNG: what Grafana shows, without Grafana.

    render_dashboard.py --prometheus URL --namespace NS --migration NAME --start UNIX --end UNIX --out PNG
                        [--dashboard deploy/dashboards/mssql-pg-operator.json]

The queries are the dashboard's own (its variables set to NS and NAME, $__rate_interval as Grafana computes it for
the step), asked of Prometheus's query_range; the panels drawn are Rows/s per table, Progress, Tasks by state and
Peak worker memory. make demo (demo/run.sh) calls it over the demo's own run.
"""

import argparse
import json
import os
import re
import sys
from datetime import datetime, timezone

import matplotlib

matplotlib.use("Agg")
import matplotlib.dates as mdates  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "helm"))
import prom  # noqa: E402

# (panel title in the dashboard, unit scale, y label); the Progress bar gauge is drawn over time.
PANELS = [
    ("Rows/s per table", 1, "rows/s"),
    ("Progress (tasks done / planned)", 100, "% of tasks done"),
    ("Tasks by state", 1, "tasks"),
    ("Peak worker memory", 1 / (1024 * 1024), "MiB"),
]


def legend(fmt, labels):
    return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: labels.get(m.group(1), ""), fmt) or json.dumps(labels)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--prometheus", required=True)
    p.add_argument("--namespace", required=True)
    p.add_argument("--migration", required=True)
    p.add_argument("--start", type=float, required=True)
    p.add_argument("--end", type=float, required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--dashboard", default="deploy/dashboards/mssql-pg-operator.json")
    args = p.parse_args()
    dashboard = json.load(open(args.dashboard))
    # Grafana's step for a panel about 600 px wide, and $__rate_interval = max(step + scrape, 4 x scrape).
    step = max(prom.SCRAPE_SECONDS, round((args.end - args.start) / 600))
    rate_interval = f"{max(step + prom.SCRAPE_SECONDS, 4 * prom.SCRAPE_SECONDS)}s"
    queries = prom.dashboard_queries(
        dashboard, {"namespace": args.namespace, "migration": args.migration}, rate_interval
    )
    # Rows/s per table across the top (its legend beside it), the other three panels below.
    fig = plt.figure(figsize=(14, 8), layout="constrained")
    grid = fig.add_gridspec(2, 3, height_ratios=[1.1, 1])
    axes = [fig.add_subplot(grid[0, :])]
    axes += [fig.add_subplot(grid[1, i], sharex=axes[0]) for i in range(3)]
    fig.suptitle(f"mssql-pg-operator dashboard: {args.namespace}/{args.migration} (make demo)", fontsize=13)
    for n, (ax, (title, scale, unit)) in enumerate(zip(axes, PANELS)):
        targets = [(fmt, expr) for _, t, fmt, expr in queries if t == title]
        if not targets:
            sys.exit(f"render_dashboard: the dashboard has no panel {title!r}")
        for fmt, expr in targets:
            for labels, points in prom.query_range(args.prometheus, expr, args.start, args.end, step):
                xs = [datetime.fromtimestamp(t, tz=timezone.utc) for t, _ in points]
                # One Migration is selected: its name in every legend entry says nothing.
                label = legend(fmt, labels).replace(f"{args.migration} ", "")
                ax.plot(xs, [v * scale for _, v in points], label=label, linewidth=1.6)
        ax.set_title(title, fontsize=11, loc="left")
        ax.set_ylabel(unit)
        ax.grid(alpha=0.3)
        ax.set_ylim(bottom=0)
        ax.xaxis.set_major_locator(mdates.AutoDateLocator(maxticks=5))
        ax.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M:%S"))
        if n == 0 and ax.lines:
            ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), title="table")
        elif ax.lines:
            ax.legend(fontsize=7, loc="center right", framealpha=0.7)
        if n > 0:
            ax.set_xlabel("time (UTC)")
    fig.savefig(args.out, dpi=90)
    print(f"render_dashboard: wrote {args.out}")


if __name__ == "__main__":
    main()
