"""What "the same value" means across SQL Server and PostgreSQL, per type. Each rule is the
promise the README's type mapping makes, written down independently of the worker's code:

- integers (tinyint/smallint/int/bigint, PostgreSQL smallint/integer/bigint): equal as integers;
- bit <-> boolean: 0/1 equal false/true;
- decimal/numeric/money/smallmoney <-> numeric: equal as exact decimal numbers (trailing zeros of
  the scale do not matter: money 12.3400 = numeric 12.34, never a rounded float);
- real/float <-> real/double precision: equal after rounding to the narrower side's width;
- datetime family: equal as points in time at the coarser side's resolution: SQL Server `datetime`
  (ticks of 1/300 s, shown as .000/.003/.007) at milliseconds, `smalldatetime` at minutes,
  datetime2(p)/time(p)/timestamp(p) at p digits, never finer than microseconds (PostgreSQL's
  limit; the 7th digit is truncated, as the worker's plan warns); datetimeoffset/timestamptz as
  UTC instants;
- uniqueidentifier <-> uuid: equal as UUIDs (case of the hex text does not matter);
- binary/varbinary/image <-> bytea: equal as bytes (shown as hex);
- hierarchyid/geography: SQL Server's ToString() text equals the text column PostgreSQL holds;
- xml: equal as text; when the text differs, equal if the canonical XML (C14N 2.0) of both is;
- everything else (char/nchar/varchar/nvarchar/text, PostgreSQL text types): equal as strings,
  exactly, trailing blanks of fixed-length types included.
"""
import datetime as dt
import decimal
import struct
import uuid
import xml.etree.ElementTree as ET

INTEGER = {"tinyint", "smallint", "int", "bigint", "integer"}
BOOLEAN = {"bit", "boolean"}
EXACT = {"decimal", "numeric", "money", "smallmoney"}
FLOAT = {"float", "real", "double precision"}
TIMESTAMP = {"datetime", "smalldatetime", "datetime2", "timestamp"}
ZONED = {"datetimeoffset", "timestamptz"}
DATE = {"date"}
TIME = {"time"}
UUID = {"uniqueidentifier", "uuid"}
BINARY = {"binary", "varbinary", "image", "bytea", "rowversion", "timestamp_bytes"}
XML = {"xml"}


def family(col):
    t = col.type
    for name, members in (("int", INTEGER), ("bool", BOOLEAN), ("exact", EXACT), ("float", FLOAT),
                          ("timestamp", TIMESTAMP), ("zoned", ZONED), ("date", DATE), ("time", TIME),
                          ("uuid", UUID), ("binary", BINARY), ("xml", XML)):
        if t in members:
            return name
    return "text"


def resolution(engine, col):
    """Fractional-second digits a column keeps (-2: minutes)."""
    if engine == "mssql":
        if col.type == "datetime":
            return 3
        if col.type == "smalldatetime":
            return -2
        if col.type in ("datetime2", "time", "datetimeoffset"):
            return min(col.scale if col.scale or col.precision else 7, 6)
        return 6
    # PostgreSQL: without a declared precision, microseconds.
    if col.type in ("timestamp", "timestamptz", "time") and col.precision is not None:
        return col.precision
    return 6


def is_real(engine, col):
    if engine == "mssql":
        return col.type == "real" or (col.type == "float" and 0 < col.precision <= 24)
    return col.type == "real"


def _round_micro(value, digits):
    """A datetime/time rounded to `digits` fractional digits (minutes for -2)."""
    if digits == -2:
        if isinstance(value, dt.time):
            return value.replace(second=0, microsecond=0)
        return (value + dt.timedelta(seconds=30)).replace(second=0, microsecond=0)
    unit = 10 ** (6 - digits)
    micro = value.microsecond
    rounded = (micro + unit // 2) // unit * unit
    if isinstance(value, dt.time):
        # times are truncated at a digit they cannot keep; never carried into the next second
        return value.replace(microsecond=micro // unit * unit)
    return value.replace(microsecond=0) + dt.timedelta(microseconds=rounded)


class Pair:
    """How one column of side A compares with its counterpart on side B."""

    def __init__(self, a_engine, a_col, b_engine, b_col):
        self.a, self.b = (a_engine, a_col), (b_engine, b_col)
        self.family_a, self.family_b = family(a_col), family(b_col)
        self.digits = min(resolution(a_engine, a_col), resolution(b_engine, b_col))
        self.real = is_real(a_engine, a_col) or is_real(b_engine, b_col)

    def canon(self, fam, value):
        if value is None:
            return None
        if fam == "int":
            return int(value)
        if fam == "bool":
            return bool(value)
        if fam == "exact":
            return decimal.Decimal(value).normalize() if not isinstance(value, float) else ("float!", value)
        if fam == "float":
            f = float(value)
            return struct.unpack("f", struct.pack("f", f))[0] if self.real else f
        if fam in ("timestamp", "time"):
            return _round_micro(value, self.digits)
        if fam == "zoned":
            return _round_micro(value.astimezone(dt.timezone.utc), self.digits)
        if fam == "uuid":
            return uuid.UUID(str(value))
        if fam == "binary":
            return bytes(value)
        return value

    def key_of(self, side, value):
        fam = self.family_a if side == "a" else self.family_b
        return self.canon(fam, value)

    def equal(self, va, vb):
        ca, cb = self.canon(self.family_a, va), self.canon(self.family_b, vb)
        if ca == cb:
            return True
        if "xml" in (self.family_a, self.family_b) and isinstance(va, str) and isinstance(vb, str):
            return c14n(va) == c14n(vb)
        return False


def c14n(text):
    try:
        return ET.canonicalize(text)
    except ET.ParseError:
        # Fragments (xml CONTENT) may have several top-level nodes.
        try:
            return ET.canonicalize(f"<r>{text}</r>")
        except ET.ParseError:
            return text


def show(value):
    """A value as a difference report prints it."""
    if value is None:
        return "NULL"
    if isinstance(value, (bytes, bytearray)):
        b = bytes(value)
        return "0x" + b.hex().upper() if len(b) <= 32 else f"0x{b[:32].hex().upper()}... ({len(b)} bytes)"
    if isinstance(value, str):
        s = repr(value)
        return s if len(s) <= 120 else s[:117] + "...'"
    return repr(value) if not isinstance(value, (dt.datetime, dt.date, dt.time)) else value.isoformat()
