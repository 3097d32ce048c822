"""Compares every value of every row of every table of two databases, read by clients that share
no code with the worker (pytds for SQL Server, psql for PostgreSQL), rows matched by primary key.
What counts as equal per type is `canon.py`'s docstring.

    compare_values.py A B      A, B: mssql://USER:PASSWORD@HOST:PORT/DB or postgres://USER@HOST:PORT/DB

Tables are matched by name, schema `dbo` on SQL Server being `public` on PostgreSQL. Prints one line
per difference (table, key, column, both values; at most --show per table) and a summary; exits 1
when anything differs, a table or column is missing on B, or B has tables A has not.
"""
import argparse
import collections
import concurrent.futures
import sys
import time
from urllib.parse import unquote, urlparse

from canon import Pair, show
from sides import MssqlSide, PgSide


def open_side(url):
    u = urlparse(url)
    db = u.path.lstrip("/")
    if u.scheme == "mssql":
        return MssqlSide(u.hostname, u.port, unquote(u.username), unquote(u.password or ""), db)
    if u.scheme == "postgres":
        return PgSide(u.hostname, u.port, unquote(u.username), db)
    raise SystemExit(f"unknown database URL scheme {u.scheme!r}")


def target_schema(a, b, schema):
    if a.engine == "mssql" and b.engine == "postgres" and schema == "dbo":
        return "public"
    if a.engine == "postgres" and b.engine == "mssql" and schema == "public":
        return "dbo"
    return schema


class Report:
    def __init__(self, show_max):
        self.show_max = show_max
        self.problems = 0
        self.per_table = collections.Counter()

    def diff(self, table, line):
        self.problems += 1
        self.per_table[table] += 1
        if self.per_table[table] <= self.show_max:
            print(f"DIFF {table}: {line}")


def compare_table(a, ta, b, tb, report):
    name = ta.qualified
    pairs = []
    for ca in ta.columns:
        cb = tb.column(ca.name)
        if cb is None:
            report.diff(name, f"column {ca.name} missing on B")
            continue
        pairs.append((ca, cb, Pair(a.engine, ca, b.engine, cb)))
    for cb in tb.columns:
        if ta.column(cb.name) is None:
            report.diff(name, f"column {cb.name} only on B")
    cols_a = [p[0] for p in pairs]
    cols_b = [p[1] for p in pairs]
    # B is read while A is: one side's wait on its server overlaps the other's decoding.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        future_b = pool.submit(b.rows, tb, cols_b)
        rows_a = a.rows(ta, cols_a)
        rows_b = future_b.result()
    key_idx = [i for i, c in enumerate(cols_a) if c.name.lower() in {k.lower() for k in ta.key}]
    key_idx.sort(key=lambda i: [k.lower() for k in ta.key].index(cols_a[i].name.lower()))
    if not key_idx:
        # No primary key: rows compared as multisets of whole rows.
        key_idx = list(range(len(pairs)))

    def index(rows, side):
        out = collections.defaultdict(list)
        for r in rows:
            out[tuple(hashable(pairs[i][2].key_of(side, r[i])) for i in key_idx)].append(r)
        return out

    ia, ib = index(rows_a, "a"), index(rows_b, "b")
    values = 0
    for key, ra_list in ia.items():
        rb_list = ib.get(key, [])
        key_text = ", ".join(f"{cols_a[i].name}={show(ra_list[0][i])}" for i in key_idx)
        if len(ra_list) != len(rb_list):
            report.diff(name, f"key ({key_text}): {len(ra_list)} row(s) on A, {len(rb_list)} on B")
            continue
        for ra, rb in zip(ra_list, rb_list):
            for i, (ca, cb, pair) in enumerate(pairs):
                values += 1
                if not pair.equal(ra[i], rb[i]):
                    report.diff(name, f"key ({key_text}) column {ca.name}: A {ca.type} {show(ra[i])} "
                                      f"<> B {cb.type} {show(rb[i])}")
    for key, rb_list in ib.items():
        if key not in ia:
            key_text = ", ".join(f"{cols_b[i].name}={show(rb_list[0][i])}" for i in key_idx)
            report.diff(name, f"key ({key_text}): only on B ({len(rb_list)} row(s))")
    return len(rows_a), values


def hashable(v):
    return v.hex() if isinstance(v, (bytes, bytearray)) else v


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--show", type=int, default=20, help="differences printed per table")
    args = ap.parse_args()
    started = time.monotonic()
    a, b = open_side(args.a), open_side(args.b)
    print(f"A: {a.label}\nB: {b.label}")
    report = Report(args.show)
    tables_b = {(t.schema.lower(), t.name.lower()): t for t in b.tables()}
    seen = set()
    total_rows = total_values = 0
    tables_a = a.tables()
    for ta in tables_a:
        key = (target_schema(a, b, ta.schema).lower(), ta.name.lower())
        tb = tables_b.get(key)
        if tb is None:
            report.diff(ta.qualified, "table missing on B")
            continue
        seen.add(key)
        rows, values = compare_table(a, ta, b, tb, report)
        total_rows += rows
        total_values += values
    for key, tb in tables_b.items():
        if key not in seen:
            report.diff(tb.qualified, "table only on B")
    took = time.monotonic() - started
    print(f"compared {len(tables_a)} tables, {total_rows} rows, {total_values} values in {took:.1f} s: "
          f"{report.problems} difference(s)")
    for table, n in sorted(report.per_table.items()):
        print(f"  {table}: {n}")
    return 1 if report.problems else 0


if __name__ == "__main__":
    sys.exit(main())
