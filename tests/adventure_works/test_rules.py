"""The comparison's own rules, without databases: what counts as equal, how psql's COPY text is
decoded, and which values a CHECK is tried with. A rule that wrongly says "equal" would hide a
real difference in every run, so each has a case that must differ."""
import datetime as dt
import decimal
import uuid

from canon import Pair
from sides import Column, parse_copy_text, pg_value, split_pg_type
from trial_rows import candidates, literal


def pair(a_engine, a_type, b_engine, b_type, a_scale=0, b_prec=None):
    return Pair(a_engine, Column("c", a_type, 0, a_scale), b_engine, Column("c", b_type, b_prec, 0))


def test_datetime_equal_at_its_tick_and_not_a_millisecond_off():
    p = pair("mssql", "datetime", "postgres", "timestamp", b_prec=3)
    # pytds decodes the 1/300 s tick .003333 as 3333 us; PostgreSQL's timestamp(3) holds .003
    assert p.equal(dt.datetime(2011, 5, 31, 0, 0, 0, 3333), dt.datetime(2011, 5, 31, 0, 0, 0, 3000))
    assert not p.equal(dt.datetime(2011, 5, 31), dt.datetime(2011, 5, 31, 0, 0, 0, 1000))


def test_time7_truncated_to_microseconds_but_not_more():
    p = pair("mssql", "time", "postgres", "time", a_scale=7, b_prec=6)
    assert p.equal(dt.time(7, 0, 0, 123456), dt.time(7, 0, 0, 123456))
    assert not p.equal(dt.time(7, 0), dt.time(7, 0, 0, 1))


def test_money_equal_as_exact_decimals():
    p = pair("mssql", "money", "postgres", "numeric")
    assert p.equal(decimal.Decimal("12.3400"), decimal.Decimal("12.34"))
    assert not p.equal(decimal.Decimal("1.0000"), decimal.Decimal("1.0001"))


def test_bit_is_boolean_and_uuid_ignores_case():
    assert pair("mssql", "bit", "postgres", "boolean").equal(True, True)
    assert not pair("mssql", "bit", "postgres", "boolean").equal(False, True)
    u = uuid.uuid4()
    assert pair("mssql", "uniqueidentifier", "postgres", "uuid").equal(u, uuid.UUID(str(u).upper()))


def test_strings_exact_with_trailing_blanks():
    p = pair("mssql", "nvarchar", "postgres", "character varying")
    assert p.equal("a", "a")
    assert not p.equal("a", "a ")
    assert not p.equal("a", "A")


def test_xml_equal_as_canonical_xml_only():
    p = pair("mssql", "xml", "postgres", "xml")
    assert p.equal('<a x="1" y="2"/>', "<a y='2' x='1'></a>")
    assert not p.equal("<a>1</a>", "<a>2</a>")


def test_copy_text_escapes_and_null():
    rows = parse_copy_text("1\ta\\tb\\\\c\t\\N\t\\\\x00ff\n")
    assert rows == [("1", "a\tb\\c", None, "\\x00ff")]
    assert pg_value(Column("b", "bytea"), rows[0][3]) == b"\x00\xff"
    assert split_pg_type("timestamp(3) without time zone") == ("timestamp", 3, 0)
    assert split_pg_type("numeric(19,4)") == ("numeric", 19, 4)
    assert split_pg_type("timestamp without time zone") == ("timestamp", None, 0)


def test_candidates_straddle_the_constants():
    rate = Column("Rate", "money", 19, 4, nullable=False)
    values = candidates(rate, "([Rate]>=(6.50) AND [Rate]<=(200.00))", {"rate": decimal.Decimal("125.5")})
    assert {decimal.Decimal("6.49"), decimal.Decimal("6.50"), decimal.Decimal("200.01")} <= set(values)
    shelf = Column("Shelf", "nvarchar", 0, 0, nullable=False)
    values = candidates(shelf, "([Shelf] LIKE '[A-Za-z]' OR [Shelf]='N/A')", {"shelf": "A"})
    assert {"N/A", "n/a", "N/A ", "1", "z"} <= set(values)
    assert None not in values


def test_dates_are_typed_literals_on_sql_server():
    # The test server compares a datetime column with a bare string as text (no match).
    d = dt.datetime(2009, 1, 14)
    assert literal("mssql", Column("d", "datetime"), d) == "CAST('2009-01-14T00:00:00.000' AS datetime)"
    assert literal("postgres", Column("d", "timestamp"), d) == "'2009-01-14T00:00:00.000000'"
    assert literal("mssql", Column("s", "nvarchar"), "it's") == "N'it''s'"


class _TdsError(Exception):
    def __init__(self, number, text):
        super().__init__(text)
        self.msg_no = number


def test_refusals_name_the_constraint_on_both_sides():
    from trial_exec import mssql_outcome, pg_outcome
    fk = mssql_outcome(_TdsError(547, 'The DELETE statement conflicted with the REFERENCE constraint "FK_A_B". '
                                      'The conflict occurred in database "X"'))
    assert (fk.accepted, fk.kind, fk.detail) == (False, "fk", "FK_A_B")
    ix = mssql_outcome(_TdsError(2601, "Cannot insert duplicate key row in object 'dbo.T' with unique index 'AK_T'."))
    assert (ix.kind, ix.detail) == ("unique", "AK_T")
    pk = mssql_outcome(_TdsError(2627, "Violation of PRIMARY KEY constraint 'PK_T'. Cannot insert duplicate key"))
    assert (pk.kind, pk.detail) == ("unique", "PK_T")
    # another error is never taken for a constraint's refusal
    assert mssql_outcome(_TdsError(8102, "Cannot update identity column 'Id'.")).kind == "error"
    assert pg_outcome("23505 AK_T")[:3] == (False, "unique", "AK_T")
    assert pg_outcome("23503 FK_A_B")[:3] == (False, "fk", "FK_A_B")
    ok = pg_outcome("ok 1 [\"x\"]")
    assert (ok.accepted, ok.rows, ok.seen) == (True, 1, '["x"]')


def test_default_kinds():
    from key_trials import default_kind
    assert default_kind("(getdate())") == "now"
    assert default_kind("(newid())") == "uuid"
    assert default_kind("((0.00))") == "value"
