"""Computed columns of the tables the sample leaves empty: their values are compared nowhere else
(compare_values.py sees only rows that exist). A made-up row is inserted on both sides inside a
transaction that is rolled back, and each computed (SQL Server) / generated (PostgreSQL) column
of it is read back and compared with canon.py's rules.
"""
import json

import pytds

from canon import Pair, show
from sides import pg_value
from trial_rows import identity_insert_off, insert, where

PG_PROBE = r"""
CREATE FUNCTION pg_temp.probe(stmts text[], q text) RETURNS text LANGUAGE plpgsql AS $f$
DECLARE s text; r text; st text;
BEGIN
  BEGIN
    FOREACH s IN ARRAY stmts LOOP EXECUTE s; END LOOP;
    EXECUTE q INTO r;
    RAISE EXCEPTION USING ERRCODE = 'P0T01';
  EXCEPTION
    WHEN SQLSTATE 'P0T01' THEN RETURN 'ok ' || r;
    WHEN OTHERS THEN GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE; RETURN 'error ' || st;
  END;
END $f$;
"""


def pg_literal_array(stmts):
    return "ARRAY[" + ", ".join("'" + s.replace("'", "''") + "'" for s in stmts) + "]::text[]"


def probe(ms, pg, tables, pg_table_of, made_up):
    """Returns (tables probed, failure lines)."""
    failures, probed = [], 0
    jobs = []
    for t in tables:
        computed = [c for c in t.columns if c.computed]
        if not computed or not made_up.is_empty(t):
            continue
        tp = pg_table_of(t)
        values, parents = made_up.row(t)
        key = [(c, v) for c, v in values if c.name.lower() in {k.lower() for k in t.key}]
        ms_setup, pg_setup = [], []
        for pt, pv in parents + [(t, values)]:
            ms_setup += insert(ms, pt, pv)
            pg_setup += insert(pg, pg_table_of(pt), pv)
        jobs.append((t, tp, computed, key, ms_setup, pg_setup))

    # PostgreSQL: one psql run; each made-up row's computed values as a JSON array of their text.
    script = ["BEGIN;", PG_PROBE]
    for i, (t, tp, computed, key, _, pg_setup) in enumerate(jobs):
        cols = ", ".join(f"{pg.quote(tp.column(c.name).name)}::text" for c in computed)
        q = f"SELECT json_build_array({cols})::text FROM {pg.qname(tp)} WHERE {where(pg, tp, key)}"
        script.append(f"COPY (SELECT {i}, pg_temp.probe({pg_literal_array(pg_setup)}, "
                      f"'{q.replace(chr(39), chr(39) * 2)}')) TO STDOUT;")
    script.append("ROLLBACK;")
    pg_out = {int(i): r for i, r in pg.query_script("\n".join(script))} if jobs else {}

    cur = ms.conn.cursor()
    for i, (t, tp, computed, key, ms_setup, _) in enumerate(jobs):
        ms_row, ms_err = None, None
        cur.execute("BEGIN TRANSACTION")
        try:
            for s in ms_setup:
                cur.execute(s)
            cur.execute(f"SELECT {ms.select_list(t, computed)} FROM {ms.qname(t)} WHERE {where(ms, t, key)}")
            ms_row = cur.fetchone()
        except pytds.Error as e:
            ms_err = str(e).splitlines()[0][:120]
        finally:
            for s in ["ROLLBACK TRANSACTION"] + identity_insert_off(ms_setup):
                try:
                    cur.execute(s)
                except pytds.Error:
                    pass
        result = pg_out.get(i, "error missing")
        if ms_err or not result.startswith("ok "):
            # A made-up row one side refuses is compare_checks.py's to report.
            continue
        probed += 1
        pg_row = json.loads(result[3:])
        for c, ms_v, pg_text in zip(computed, ms_row, pg_row):
            pc = tp.column(c.name)
            pg_v = pg_value(pc, pg_text)
            if not Pair(ms.engine, c, pg.engine, pc).equal(ms_v, pg_v):
                failures.append(f"computed column {t.qualified}.{c.name} of a made-up row: "
                                f"SQL Server {show(ms_v)}, PostgreSQL {show(pg_v)}")
    return probed, failures
