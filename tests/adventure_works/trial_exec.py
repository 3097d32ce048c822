"""Running trial statements on both sides, each inside a transaction that is rolled back, and
reading what each side did: accepted (with the rows changed and, optionally, what a query saw
afterwards, before the rollback) or refused (by which constraint, or with which error).
"""
import collections
import re

import pytds

from trial_rows import identity_insert_off

PG_TRY = r"""
CREATE FUNCTION pg_temp.try(stmts text[], q text DEFAULT NULL) RETURNS text LANGUAGE plpgsql AS $f$
DECLARE s text; st text; cn text; n bigint := 0; r text;
BEGIN
  BEGIN
    FOREACH s IN ARRAY stmts LOOP EXECUTE s; GET DIAGNOSTICS n = ROW_COUNT; END LOOP;
    IF q IS NOT NULL THEN EXECUTE q INTO r; END IF;
    RAISE EXCEPTION USING ERRCODE = 'P0T01';
  EXCEPTION
    WHEN SQLSTATE 'P0T01' THEN RETURN 'ok ' || n || COALESCE(' ' || r, '');
    WHEN OTHERS THEN
      GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, cn = CONSTRAINT_NAME;
      RETURN st || ' ' || COALESCE(cn, '');
  END;
END $f$;
"""

# SQL Server's constraint errors: 547 (CHECK, FOREIGN KEY, and REFERENCE: a row others point at),
# 2627 (PRIMARY KEY / UNIQUE KEY constraint), 2601 (unique index).
_MS_547 = re.compile(r'conflicted with the (CHECK|FOREIGN KEY|REFERENCE) constraint "([^"]+)"')
_MS_2627 = re.compile(r"Violation of (?:PRIMARY|UNIQUE) KEY constraint '([^']+)'")
_MS_2601 = re.compile(r"with unique index '([^']+)'")
_PG_KIND = {"23514": "check", "23503": "fk", "23505": "unique", "23502": "notnull"}


class Outcome(collections.namedtuple("Outcome", "accepted kind detail rows seen", defaults=(None, None))):
    """accepted: bool; kind: "check", "fk", "unique" or "error"; detail: constraint name or error
    code; rows: rows the accepted statement changed; seen: what the follow-up query returned."""

    def __str__(self):
        return "accepted" if self.accepted else f"refused ({self.kind} {self.detail})"


def mssql_outcome(err, rows=None, seen=None):
    if err is None:
        return Outcome(True, "", "", rows, seen)
    number = getattr(err, "msg_no", None) or getattr(err, "number", None)
    text = str(err)
    m = _MS_547.search(text)
    if number == 547 and m:
        return Outcome(False, "check" if m.group(1) == "CHECK" else "fk", m.group(2))
    m = (_MS_2627 if number == 2627 else _MS_2601).search(text)
    if number in (2601, 2627) and m:
        return Outcome(False, "unique", m.group(1))
    return Outcome(False, "error", f"{number}: {text.splitlines()[0][:100]}")


def pg_outcome(text):
    if text.startswith("ok"):
        parts = text.split(" ", 2)
        return Outcome(True, "", "", int(parts[1]), parts[2] if len(parts) > 2 else None)
    state, _, name = text.partition(" ")
    kind = _PG_KIND.get(state, "error")
    return Outcome(False, kind, name if kind != "error" else state)


class MssqlTrials:
    def __init__(self, side):
        self.side = side
        self.cur = side.conn.cursor()

    def run(self, setup, stmt, query=None):
        """(setup error or None, outcome of stmt); `query` (one row) is read after an accepted
        stmt, before the rollback, into the outcome's `seen`."""
        self._exec("BEGIN TRANSACTION")
        try:
            for s in setup:
                err = self._exec(s)
                if err is not None:
                    return mssql_outcome(err), None
            err = self._exec(stmt)
            if err is not None:
                return None, mssql_outcome(err)
            rows = self.cur.rowcount
            seen = None
            if query:
                try:
                    self.cur.execute(query)
                    seen = self.cur.fetchone()
                except pytds.Error as e:
                    return None, mssql_outcome(e)
            return None, mssql_outcome(None, rows, seen)
        finally:
            # (IF @@TRANCOUNT > 0 ROLLBACK is refused by the test server; 3903 when nothing is open is harmless.)
            self._exec("ROLLBACK TRANSACTION")
            for s in identity_insert_off(setup + [stmt]):
                self._exec(s)

    def _exec(self, sql):
        try:
            self.cur.execute(sql)
            while self.cur.nextset():
                pass
            return None
        except pytds.Error as e:
            return e


def pg_array(stmts):
    return "ARRAY[" + ", ".join("'" + s.replace("'", "''") + "'" for s in stmts) + "]::text[]"


def pg_text(s):
    return "NULL" if s is None else "'" + s.replace("'", "''") + "'"


def run_pg(side, trials):
    """Outcomes of [(setup, stmt)] or [(setup, stmt, query)] on PostgreSQL, each in its own
    rolled-back subtransaction: [(setup error or None, outcome)]."""
    parts = ["BEGIN;", PG_TRY]
    for i, trial in enumerate(trials):
        setup, stmt = trial[0], trial[1]
        query = trial[2] if len(trial) > 2 else None
        parts.append(f"COPY (SELECT {i}, pg_temp.try({pg_array(setup)}), "
                     f"pg_temp.try({pg_array(setup + [stmt])}, {pg_text(query)})) TO STDOUT;")
    parts.append("ROLLBACK;")
    out = {}
    for i, setup_result, result in side.query_script("\n".join(parts)):
        out[int(i)] = (None if setup_result.startswith("ok") else pg_outcome(setup_result), pg_outcome(result))
    return [out[i] for i in range(len(trials))]
