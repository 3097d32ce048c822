"""The two databases as an outsider reads them: SQL Server (the TDS test server) through pytds and
PostgreSQL through psql. Nothing here comes from the worker: the point is a second opinion.

Every reader returns plain Python values, decoded by its own client, with each column's type as
that database's catalog names it; `canon.py` decides what counts as equal.
"""
import os
import subprocess
from dataclasses import dataclass, field

import pytds


@dataclass
class Column:
    name: str
    type: str  # the base type, lower case: "datetime", "numeric", "character varying", ...
    precision: int = 0
    scale: int = 0
    computed: bool = False
    identity: bool = False
    nullable: bool = True
    has_default: bool = False


@dataclass
class Table:
    schema: str
    name: str
    columns: list = field(default_factory=list)
    key: list = field(default_factory=list)  # primary key column names, in key order

    @property
    def qualified(self):
        return f"{self.schema}.{self.name}"

    def column(self, name):
        for c in self.columns:
            if c.name.lower() == name.lower():
                return c
        return None


class MssqlSide:
    """SQL Server through pytds (python-tds), a pure-Python TDS client."""

    engine = "mssql"
    # CLR types pytds cannot decode; SQL Server's own ToString() is what the worker promises to copy.
    TO_STRING = {"hierarchyid", "geography", "geometry"}

    def __init__(self, host, port, user, password, database):
        self.args = dict(server=host, port=int(port), user=user, password=password, database=database,
                         autocommit=True, timeout=300, login_timeout=10)
        self.conn = pytds.connect(**self.args)
        self.label = f"SQL Server {database}@{host}:{port}"

    def query(self, sql, params=None):
        with self.conn.cursor() as cur:
            cur.execute(sql, params)
            return cur.fetchall() if cur.description else []

    def execute(self, sql):
        with self.conn.cursor() as cur:
            cur.execute(sql)
            while cur.nextset():
                pass

    @staticmethod
    def quote(name):
        return "[" + name.replace("]", "]]") + "]"

    def qname(self, table):
        return f"{self.quote(table.schema)}.{self.quote(table.name)}"

    def tables(self):
        rows = self.query(
            "SELECT s.name, t.name, t.object_id FROM sys.tables t JOIN sys.schemas s ON s.schema_id = t.schema_id "
            "WHERE s.name <> '_mssqlpg' ORDER BY s.name, t.name")
        out = []
        for schema, name, object_id in rows:
            t = Table(schema, name)
            # Alias types (dbo.Name, dbo.Flag, ...) are read as the system type under them.
            for (cname, tname, base, user_defined, assembly, prec, scale, max_len, computed, identity,
                 nullable, default_id) in self.query(
                    "SELECT c.name, ty.name, bt.name, ty.is_user_defined, ty.is_assembly_type, c.precision, "
                    "c.scale, c.max_length, c.is_computed, c.is_identity, c.is_nullable, c.default_object_id "
                    "FROM sys.columns c JOIN sys.types ty ON ty.user_type_id = c.user_type_id "
                    "LEFT JOIN sys.types bt ON bt.user_type_id = c.system_type_id "
                    f"WHERE c.object_id = {int(object_id)} ORDER BY c.column_id"):
                typ = base if user_defined and not assembly and base else tname
                t.columns.append(Column(cname, typ.lower(), prec or 0, scale or 0, bool(computed), bool(identity),
                                        bool(nullable), bool(default_id)))
            t.key = [r[0] for r in self.query(
                "SELECT c.name FROM sys.indexes i "
                "JOIN sys.index_columns ic ON ic.object_id = i.object_id AND ic.index_id = i.index_id "
                "JOIN sys.columns c ON c.object_id = ic.object_id AND c.column_id = ic.column_id "
                f"WHERE i.object_id = {int(object_id)} AND i.is_primary_key = 1 ORDER BY ic.key_ordinal")]
            out.append(t)
        return out

    def select_list(self, table, columns):
        parts = []
        for c in columns:
            q = self.quote(c.name)
            parts.append(f"{q}.ToString()" if c.type in self.TO_STRING else q)
        return ", ".join(parts)

    def rows(self, table, columns):
        return self.query(f"SELECT {self.select_list(table, columns)} FROM {self.qname(table)}")

    def close(self):
        self.conn.close()


class PgSide:
    """PostgreSQL through psql: rows as COPY's text format, decoded here."""

    engine = "postgres"

    def __init__(self, host, port, user, database, psql="psql"):
        self.conninfo = f"host={host} port={port} user={user} dbname={database}"
        self.psql = psql
        self.label = f"PostgreSQL {database}@{host}:{port}"
        self.env = dict(os.environ, PGTZ="UTC", PGOPTIONS="-c DateStyle=ISO -c IntervalStyle=postgres "
                                                         "-c extra_float_digits=1 -c bytea_output=hex")

    def script(self, sql):
        """Runs a psql script (ON_ERROR_STOP) and returns its standard output."""
        out = subprocess.run([self.psql, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", self.conninfo],
                             input=sql, capture_output=True, text=True, env=self.env, timeout=600)
        if out.returncode != 0:
            raise RuntimeError(f"psql failed: {out.stderr.strip()}\n--- script:\n{sql[:2000]}")
        return out.stdout

    def query(self, sql):
        """Rows of one query, every value a str or None (COPY text format)."""
        return parse_copy_text(self.script(f"COPY ({sql}) TO STDOUT;\n"))

    def query_script(self, sql):
        """The rows every COPY ... TO STDOUT of a script printed, in order."""
        return parse_copy_text(self.script(sql))

    @staticmethod
    def quote(name):
        return '"' + name.replace('"', '""') + '"'

    def qname(self, table):
        return f"{self.quote(table.schema)}.{self.quote(table.name)}"

    def tables(self):
        cols = self.query(
            "SELECT n.nspname, c.relname, a.attname, "
            # a domain is read as its base type
            "format_type(COALESCE(NULLIF(t.typbasetype, 0), a.atttypid), "
            "  CASE WHEN t.typtype = 'd' THEN t.typtypmod ELSE a.atttypmod END), "
            "a.attgenerated <> '', a.attidentity <> '', NOT a.attnotnull, a.atthasdef "
            "FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid "
            "JOIN pg_namespace n ON n.oid = c.relnamespace JOIN pg_type t ON t.oid = a.atttypid "
            "WHERE c.relkind IN ('r', 'p') AND a.attnum > 0 AND NOT a.attisdropped "
            "AND n.nspname NOT IN ('pg_catalog', 'information_schema', '_mssqlpg') "
            "AND n.nspname NOT LIKE 'pg_toast%' ORDER BY n.nspname, c.relname, a.attnum")
        keys = self.query(
            "SELECT n.nspname, c.relname, a.attname, k.ord FROM pg_constraint p "
            "JOIN pg_class c ON c.oid = p.conrelid JOIN pg_namespace n ON n.oid = c.relnamespace "
            "CROSS JOIN LATERAL unnest(p.conkey) WITH ORDINALITY AS k(attnum, ord) "
            "JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.attnum "
            "WHERE p.contype = 'p' ORDER BY 1, 2, 4")
        tables = {}
        for schema, name, cname, ftype, generated, identity, nullable, hasdef in cols:
            t = tables.setdefault((schema, name), Table(schema, name))
            base, prec, scale = split_pg_type(ftype)
            t.columns.append(Column(cname, base, prec, scale, generated == "t", identity == "t", nullable == "t",
                                    hasdef == "t"))
        for schema, name, cname, _ in keys:
            if (schema, name) in tables:
                tables[(schema, name)].key.append(cname)
        return list(tables.values())

    def rows(self, table, columns):
        cols = ", ".join(self.quote(c.name) for c in columns)
        raw = self.query(f"SELECT {cols} FROM {self.qname(table)}")
        return [tuple(pg_value(c, v) for c, v in zip(columns, r)) for r in raw]


def split_pg_type(ftype):
    """'numeric(19,4)' -> ('numeric', 19, 4); 'timestamp(3) without time zone' -> ('timestamp', 3, 0);
    no modifier: precision None."""
    name, prec, scale = ftype, None, 0
    if "(" in ftype:
        head, rest = ftype.split("(", 1)
        args, tail = rest.split(")", 1)
        nums = [int(x) for x in args.split(",")]
        prec = nums[0]
        scale = nums[1] if len(nums) > 1 else 0
        name = (head + tail).strip()
    name = name.replace(" without time zone", "").replace("timestamp with time zone", "timestamptz")
    name = name.replace("time with time zone", "timetz")
    return name.strip('"').lower(), prec, scale


_ESCAPES = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v", "\\": "\\"}


def unescape_copy(field):
    """One field of COPY's text format: backslash escapes (\\t, \\n, \\\\, \\ooo, \\xhh)."""
    if "\\" not in field:
        return field
    out, i, n = [], 0, len(field)
    while i < n:
        ch = field[i]
        if ch != "\\" or i + 1 == n:
            out.append(ch)
            i += 1
            continue
        nxt = field[i + 1]
        if nxt in _ESCAPES:
            out.append(_ESCAPES[nxt])
            i += 2
        elif nxt in "01234567":
            j = i + 1
            while j < n and j < i + 4 and field[j] in "01234567":
                j += 1
            out.append(chr(int(field[i + 1:j], 8)))
            i = j
        elif nxt == "x" and i + 2 < n and field[i + 2] in "0123456789abcdefABCDEF":
            j = i + 2
            while j < n and j < i + 4 and field[j] in "0123456789abcdefABCDEF":
                j += 1
            out.append(chr(int(field[i + 2:j], 16)))
            i = j
        else:
            out.append(nxt)
            i += 2
    return "".join(out)


def parse_copy_text(text):
    rows = []
    for line in text.split("\n"):
        if line == "":
            continue
        rows.append(tuple(None if f == "\\N" else unescape_copy(f) for f in line.split("\t")))
    return rows


def pg_value(col, text):
    """A PostgreSQL text value as a Python value of its type (as psycopg would decode it)."""
    import datetime as dt
    import decimal
    import uuid

    if text is None:
        return None
    t = col.type
    if t in ("integer", "smallint", "bigint"):
        return int(text)
    if t == "numeric":
        return decimal.Decimal(text)
    if t in ("real", "double precision"):
        return float(text)
    if t == "boolean":
        return text == "t"
    if t == "timestamp":
        return dt.datetime.fromisoformat(text)
    if t == "timestamptz":
        return dt.datetime.fromisoformat(text)
    if t == "date":
        return dt.date.fromisoformat(text)
    if t == "time":
        return dt.time.fromisoformat(text)
    if t == "uuid":
        return uuid.UUID(text)
    if t == "bytea":
        return bytes.fromhex(text[2:])
    return text
