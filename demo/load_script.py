"""Runs a SQL Server install script batch by batch, as sqlcmd does: `:setvar` and `-v` variables
substituted as $(name), batches cut at lines holding only GO. A batch the server refuses is
reported and the script goes on (sqlcmd without -b). Used by `DEMO_DB=adventureworks make demo`.

    load_script.py HOST PORT USER PASSWORD DATABASE SCRIPT NAME=VALUE...
"""
import re
import sys

import pytds


def batches(text, variables):
    text = text.lstrip("\ufeff")
    values = dict(variables)
    current, out = [], []
    for line in text.split("\n"):
        line = line.rstrip("\r")
        stripped = line.strip()
        m = re.match(r":setvar\s+(\w+)\s+\"?([^\"]*)\"?", stripped, re.I)
        if m:
            values.setdefault(m.group(1).lower(), m.group(2))
            continue
        if re.fullmatch(r"go", stripped, re.I):
            out.append("\n".join(current))
            current = []
            continue
        current.append(re.sub(r"\$\((\w+)\)", lambda v: values.get(v.group(1).lower(), v.group(0)), line))
    if "\n".join(current).strip():
        out.append("\n".join(current))
    return [b for b in out if b.strip()]


def main():
    host, port, user, password, database, script, *pairs = sys.argv[1:]
    variables = {k.lower(): v for k, v in (p.split("=", 1) for p in pairs)}
    conn = pytds.connect(server=host, port=int(port), user=user, password=password, database=database,
                         autocommit=True)
    done, refused = 0, []
    with conn.cursor() as cur:
        for b in batches(open(script, encoding="utf-8").read(), variables):
            try:
                cur.execute(b)
                while cur.nextset():
                    pass
                done += 1
            except pytds.Error as e:
                refused.append(str(e).splitlines()[0][:160])
    print(f"{done} batches run, {len(refused)} refused as SQL Server would refuse them here:")
    for r in refused:
        print(f"  {r}")


if __name__ == "__main__":
    main()
