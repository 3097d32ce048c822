"""Rows to try a CHECK with: the row each trial starts from (an existing one, or one made up for an
empty table), the values tried in the checked columns, and the SQL text of both dialects.
"""
import datetime as dt
import decimal
import re
import uuid

from canon import family

# Values a made-up row needs to satisfy the table's own CHECKs (the rest follow from the types).
OVERRIDES = {
    "person.person": {"PersonType": "EM", "EmailPromotion": 2},
    "production.transactionhistory": {"TransactionType": "W"},
    "production.transactionhistoryarchive": {"TransactionType": "W"},
}
BASE_DATE = dt.datetime(2020, 1, 1)
BASE_UUID = uuid.UUID("6f9619ff-8b86-d011-b42d-00c04fc964ff")


def literal(engine, col, value):
    """`value` as a SQL literal for a column of that side's type."""
    if value is None:
        return "NULL"
    fam = family(col)
    if isinstance(value, bool) or fam == "bool":
        return ("1" if value else "0") if engine == "mssql" else ("true" if value else "false")
    if isinstance(value, (int, decimal.Decimal)) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        if isinstance(value, dt.datetime) and fam == "date":
            value = value.date()
        if isinstance(value, dt.datetime):
            text = value.isoformat(timespec="milliseconds" if engine == "mssql" and col.type == "datetime"
                                   else "microseconds")
        else:
            text = value.isoformat()
        if engine == "mssql":
            # Typed, not a bare string: the test server compares a datetime column with a string
            # literal as text (WHERE d = '2009-01-14' matches nothing), SQL Server converts it.
            return f"CAST('{text}' AS {mssql_type(col)})"
        return f"'{text}'"
    if isinstance(value, uuid.UUID):
        return f"'{value}'"
    if isinstance(value, (bytes, bytearray)):
        return "0x" + bytes(value).hex() if engine == "mssql" else f"'\\x{bytes(value).hex()}'::bytea"
    text = str(value).replace("'", "''")
    return f"N'{text}'" if engine == "mssql" else f"'{text}'"


def mssql_type(col):
    if col.type in ("datetime2", "time", "datetimeoffset"):
        return f"{col.type}({col.scale})"
    return col.type


def where(side, table, key_values):
    """WHERE text selecting one row by primary key on `side`."""
    parts = []
    for col, value in key_values:
        c = table.column(col.name)
        q = side.quote(c.name)
        if side.engine == "mssql" and c.type in side.TO_STRING:
            q = f"{q}.ToString()"
        parts.append(f"{q} = {literal(side.engine, c, value)}")
    return " AND ".join(parts)


def update(side, table, key_values, assignment):
    sets = ", ".join(f"{side.quote(table.column(c.name).name)} = {literal(side.engine, table.column(c.name), v)}"
                     for c, v in assignment)
    return f"UPDATE {side.qname(table)} SET {sets} WHERE {where(side, table, key_values)}"


def insert(side, table, values):
    """INSERT of a made-up row; identity values are given explicitly (statements to run in order)."""
    cols = [(table.column(c.name), v) for c, v in values]
    names = ", ".join(side.quote(c.name) for c, _ in cols)
    vals = ", ".join(literal(side.engine, c, v) for c, v in cols)
    has_identity = any(c.identity for c, _ in cols)
    if side.engine == "mssql":
        stmt = f"INSERT INTO {side.qname(table)} ({names}) VALUES ({vals})"
        if has_identity:
            return [f"SET IDENTITY_INSERT {side.qname(table)} ON", stmt, f"SET IDENTITY_INSERT {side.qname(table)} OFF"]
        return [stmt]
    overriding = " OVERRIDING SYSTEM VALUE" if has_identity else ""
    return [f"INSERT INTO {side.qname(table)} ({names}){overriding} VALUES ({vals})"]


def identity_insert_off(setup):
    """SET IDENTITY_INSERT ... OFF for each table `setup` turns it ON for: a session option, which
    a rollback leaves on when the INSERT between failed (one table at a time may have it)."""
    return [s[:-3] + " OFF" for s in setup if s.startswith("SET IDENTITY_INSERT ") and s.endswith(" ON")]


def default_value(col):
    fam = family(col)
    if fam in ("int", "exact", "float"):
        # Not 0 or 1: a computed column with its operators regrouped must give another value.
        return 3 if fam == "int" else decimal.Decimal("2.5")
    if fam == "bool":
        return False
    if fam in ("timestamp", "zoned"):
        return BASE_DATE
    if fam == "date":
        return BASE_DATE.date()
    if fam == "time":
        return dt.time(8, 0)
    if fam == "uuid":
        return BASE_UUID
    if fam == "binary":
        return b"\x01"
    if fam == "xml" or col.type in ("hierarchyid", "geography", "geometry"):
        return None
    return "A"


class MadeUpRows:
    """Rows for tables the sample leaves empty, built from the SQL Server side's catalog: every
    foreign key pointing at an existing row (or at a made-up row of another empty table, inserted
    first), identity columns given 1, dates 2020-01-01, numbers 3 or 2.5 (defaults too), the rest
    a plain value of its type when NOT NULL."""

    def __init__(self, mssql, tables):
        self.mssql = mssql
        self.tables = {t.qualified.lower(): t for t in tables}
        self.fks = {}
        for fk, parent, ref in mssql.query(
                "SELECT fk.object_id, OBJECT_SCHEMA_NAME(fk.parent_object_id) + '.' + OBJECT_NAME(fk.parent_object_id), "
                "OBJECT_SCHEMA_NAME(fk.referenced_object_id) + '.' + OBJECT_NAME(fk.referenced_object_id) "
                "FROM sys.foreign_keys fk"):
            cols = mssql.query(
                "SELECT pc.name, rc.name FROM sys.foreign_key_columns k "
                "JOIN sys.columns pc ON pc.object_id = k.parent_object_id AND pc.column_id = k.parent_column_id "
                "JOIN sys.columns rc ON rc.object_id = k.referenced_object_id AND rc.column_id = k.referenced_column_id "
                f"WHERE k.constraint_object_id = {int(fk)} ORDER BY k.constraint_column_id")
            self.fks.setdefault(parent.lower(), []).append((ref.lower(), cols))
        self.cache = {}

    def is_empty(self, table):
        return not self.mssql.query(f"SELECT TOP 1 1 FROM {self.mssql.qname(table)}")

    def row(self, table):
        """(values, setup): the made-up row as [(Column, value)] and the tables to insert first
        [(Table, values)], parents before children."""
        key = table.qualified.lower()
        if key in self.cache:
            return self.cache[key]
        values, setup = {}, []
        for ref_name, cols in self.fks.get(key, []):
            ref = self.tables[ref_name]
            if self.is_empty(ref):
                ref_values, ref_setup = self.row(ref)
                for t, v in ref_setup + [(ref, ref_values)]:
                    if all(t is not s for s, _ in setup):
                        setup.append((t, v))
                by_name = {c.name.lower(): v for c, v in ref_values}
                for pc, rc in cols:
                    values.setdefault(pc.lower(), by_name[rc.lower()])
            else:
                ref_cols = [ref.column(rc) for _, rc in cols]
                order = ", ".join(self.mssql.quote(c.name) for c in ref_cols)
                found = self.mssql.query(f"SELECT TOP 1 {order} FROM {self.mssql.qname(ref)} ORDER BY {order}")
                for (pc, _), v in zip(cols, found[0]):
                    values.setdefault(pc.lower(), v)
        overrides = {k.lower(): v for k, v in OVERRIDES.get(key, {}).items()}
        row = []
        for c in table.columns:
            n = c.name.lower()
            if c.computed:
                continue
            if n in overrides:
                row.append((c, overrides[n]))
            elif n in values:
                row.append((c, values[n]))
            elif c.identity:
                row.append((c, 1))
            elif (not c.nullable and not c.has_default) or family(c) in ("timestamp", "date", "int", "exact"):
                v = default_value(c)
                if v is not None:
                    row.append((c, v))
        self.cache[key] = (row, setup)
        return row, setup


NUMBER = re.compile(r"(?<![\w\]])-?\d+(?:\.\d+)?")
STRING = re.compile(r"N?'((?:[^']|'')*)'")
DATE_TEXT = re.compile(r"^\d{4}-\d{2}-\d{2}$")
GENERIC_TEXT = ["A", "z", "x", "1", "", "AB", "N/A"]


def candidates(col, definition, row):
    """Values to try in `col`: the definition's own constants and their neighbours, the other
    checked columns' values and theirs, a few plain ones, NULL, and the row's current value."""
    fam = family(col)
    text_lits = [m.group(1).replace("''", "'") for m in STRING.finditer(definition)]
    without_strings = STRING.sub("''", definition)
    num_lits = [decimal.Decimal(m.group(0)) for m in NUMBER.finditer(without_strings)]
    current = row.get(col.name.lower())
    out = [current]
    if fam in ("int", "exact", "float"):
        step = decimal.Decimal(1) if fam == "int" else decimal.Decimal("0.01")
        base = num_lits + [v for v in row.values() if isinstance(v, (int, decimal.Decimal))
                           and not isinstance(v, bool)]
        for n in base + [decimal.Decimal(0)]:
            for v in (n - step, n, n + step):
                if fam != "int":
                    out.append(v)
                elif v == int(v):
                    # never a fraction into an integer column: SQL Server truncates it, PostgreSQL rounds
                    out.append(int(v))
        out.append(-1)
    elif fam in ("timestamp", "date"):
        dates = [dt.datetime.fromisoformat(s) for s in text_lits if DATE_TEXT.match(s)]
        dates += [v if isinstance(v, dt.datetime) else dt.datetime.combine(v, dt.time())
                  for v in row.values() if isinstance(v, (dt.datetime, dt.date))]
        for d in dates + [dt.datetime(1900, 1, 1), dt.datetime(2099, 12, 31)]:
            for v in (d - dt.timedelta(days=1), d, d + dt.timedelta(days=1)):
                out.append(v.date() if fam == "date" else v)
    elif fam == "text":
        for s in text_lits:
            out += [s, s.lower(), s + " "]
        out += GENERIC_TEXT
    if col.nullable:
        out.append(None)
    seen, unique = set(), []
    for v in out:
        k = (type(v).__name__, v)
        if k not in seen:
            seen.add(k)
            unique.append(v)
    return unique
