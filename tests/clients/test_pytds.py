"""pytds (python-tds): an independent pure-Python TDS 7.4 client. It sends RPC parameters and
bulk rows with encodings of its own (NVARCHAR(MAX) PLP strings, parameters named "", every bulk
column as NVARCHAR(4000)), so it exercises server paths tiberius does not."""

import datetime as dt
import decimal
import uuid

import pytest
import pytds

D = decimal.Decimal


def test_login_and_version(server):
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute("SELECT @@VERSION, DB_NAME()")
        version, db = cur.fetchone()
        assert "Microsoft SQL Server" in version
        assert db == server.database


def test_logs_in_with_tds_74_and_its_packet_size(server):
    with server.connect(blocksize=8192) as conn, conn.cursor() as cur:
        cur.execute(
            "SELECT protocol_version, net_packet_size FROM sys.dm_exec_connections WHERE session_id = @@SPID"
        )
        assert tuple(cur.fetchone()) == (0x74000004, 8192)


def test_wrong_password_is_login_failure_18456(server):
    with pytest.raises(pytds.Error) as err:
        server.connect(password="wrong")
    assert "18456" in str(err.value) or "Login failed" in str(err.value)


TYPES = [
    # (column type, T-SQL literal, expected Python value)
    ("bit", "1", True),
    ("tinyint", "255", 255),
    ("smallint", "-32768", -32768),
    ("int", "2147483647", 2147483647),
    ("bigint", "-9223372036854775808", -9223372036854775808),
    ("decimal(38,10)", "1234567890123456789012345678.0123456789", D("1234567890123456789012345678.0123456789")),
    ("numeric(5,2)", "-123.45", D("-123.45")),
    ("money", "922337203685477.5807", D("922337203685477.5807")),
    ("smallmoney", "-214748.3648", D("-214748.3648")),
    ("float", "1.7976931348623157E+308", 1.7976931348623157e308),
    ("real", "1.5", 1.5),
    ("date", "'9999-12-31'", dt.date(9999, 12, 31)),
    ("time(7)", "'23:59:59.9999999'", dt.time(23, 59, 59, 999999)),
    ("datetime", "'2024-02-29 13:14:15.997'", dt.datetime(2024, 2, 29, 13, 14, 15, 997000)),
    ("smalldatetime", "'2079-06-06 23:59'", dt.datetime(2079, 6, 6, 23, 59)),
    ("datetime2(7)", "'0001-01-01 00:00:00.0000000'", dt.datetime(1, 1, 1)),
    ("uniqueidentifier", "'6F9619FF-8B86-D011-B42D-00C04FC964FF'", uuid.UUID("6F9619FF-8B86-D011-B42D-00C04FC964FF")),
    ("varchar(20)", "'café'", "café"),
    ("nvarchar(20)", "N'日本語 😀'", "日本語 😀"),
    ("nvarchar(max)", "REPLICATE(N'x', 9000)", "x" * 9000),
    ("varbinary(10)", "0x00FF10", b"\x00\xff\x10"),
    ("char(3)", "'ab'", "ab "),
]


@pytest.mark.parametrize("sqltype,literal,expected", TYPES, ids=[t[0] for t in TYPES])
def test_every_type_round_trips(server, unique, sqltype, literal, expected):
    table = f"t_types_{unique}"
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute(f"CREATE TABLE {table} (id int NOT NULL PRIMARY KEY, v {sqltype} NULL)")
        cur.execute(f"INSERT INTO {table} (id, v) VALUES (1, {literal}), (2, NULL)")
        cur.execute(f"SELECT v FROM {table} ORDER BY id")
        rows = cur.fetchall()
        assert rows[0][0] == expected
        assert rows[1][0] is None
        cur.execute(f"DROP TABLE {table}")


def test_datetimeoffset_keeps_its_offset(server):
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute("SELECT CAST('2024-01-02 03:04:05.123456 +05:30' AS datetimeoffset(6))")
        (value,) = cur.fetchone()
        assert value.utcoffset() == dt.timedelta(hours=5, minutes=30)
        assert value.replace(tzinfo=None) == dt.datetime(2024, 1, 2, 3, 4, 5, 123456)


def test_parameters_of_each_python_type(server):
    params = (
        42,
        -(2**40),
        1.25,
        D("12345.6789"),
        "ascii",
        "ünïcödé 😀",
        # pytds sends plain bytes as a string (bytes_to_unicode defaults on); Binary is varbinary.
        pytds.Binary(b"\x01\x02"),
        True,
        dt.date(2020, 5, 17),
        dt.datetime(2020, 5, 17, 1, 2, 3, 456000),
        uuid.UUID("12345678-1234-5678-9abc-def012345678"),
        None,
    )
    placeholders = ", ".join(["%s"] * len(params))
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute(f"SELECT {placeholders}", params)
        assert tuple(cur.fetchone()) == params


def test_errors_carry_sql_server_numbers_and_connection_survives(server, unique):
    table = f"t_err_{unique}"
    with server.connect() as conn, conn.cursor() as cur:
        with pytest.raises(pytds.Error) as err:
            cur.execute("SELECT * FROM no_such_table_anywhere")
        assert err.value.msg_no == 208
        with pytest.raises(pytds.Error) as err:
            cur.execute("SELEC 1")
        assert err.value.msg_no == 102
        cur.execute(f"CREATE TABLE {table} (id int PRIMARY KEY)")
        cur.execute(f"INSERT INTO {table} VALUES (1)")
        with pytest.raises(pytds.Error) as err:
            cur.execute(f"INSERT INTO {table} VALUES (1)")
        assert err.value.msg_no == 2627
        cur.execute("SELECT 7")
        assert cur.fetchone()[0] == 7
        cur.execute(f"DROP TABLE {table}")


def test_rowcount_of_dml(server, unique):
    table = f"t_rc_{unique}"
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, n int)")
        cur.execute(f"INSERT INTO {table} VALUES (1, 0), (2, 0), (3, 1)")
        assert cur.rowcount == 3
        cur.execute(f"UPDATE {table} SET n = 5 WHERE n = 0")
        assert cur.rowcount == 2
        cur.execute(f"DELETE FROM {table} WHERE id = %s", (3,))
        assert cur.rowcount == 1
        cur.execute(f"DROP TABLE {table}")


def test_transactions_commit_and_rollback(server, unique):
    table = f"t_tx_{unique}"
    with server.connect() as setup, setup.cursor() as cur:
        cur.execute(f"CREATE TABLE {table} (id int PRIMARY KEY)")
    with server.connect(autocommit=False) as conn:
        with conn.cursor() as cur:
            cur.execute(f"INSERT INTO {table} VALUES (1)")
        conn.rollback()
        with conn.cursor() as cur:
            cur.execute(f"INSERT INTO {table} VALUES (2)")
        conn.commit()
    with server.connect() as check, check.cursor() as cur:
        cur.execute(f"SELECT id FROM {table} ORDER BY id")
        assert [r[0] for r in cur.fetchall()] == [2]
        cur.execute(f"DROP TABLE {table}")


def test_bulk_copy_every_row_lands_exactly(server, unique):
    table = f"t_bulk_{unique}"
    rows = [(i, f"name {i} ü", None if i % 7 == 0 else D(i) / 100) for i in range(1, 2001)]
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute(f"CREATE TABLE {table} (id int NOT NULL PRIMARY KEY, name nvarchar(50) NOT NULL, amount decimal(10,2) NULL)")
        # Without explicit columns pytds declares every bulk column nvarchar(4000) and sends the
        # values as strings; the server converts them to the table's types, as SQL Server does.
        text_rows = [(str(i), name, None if amount is None else str(amount)) for i, name, amount in rows]
        cur.copy_to(table_or_view=table, data=text_rows)
        cur.execute(f"SELECT COUNT(*), SUM(id), SUM(amount), COUNT(amount) FROM {table}")
        count, id_sum, amount_sum, amount_count = cur.fetchone()
        assert count == 2000
        assert id_sum == sum(r[0] for r in rows)
        assert amount_sum == sum(r[2] for r in rows if r[2] is not None)
        assert amount_count == sum(1 for r in rows if r[2] is not None)
        cur.execute(f"SELECT name FROM {table} WHERE id = 1999")
        assert cur.fetchone()[0] == "name 1999 ü"
        cur.execute(f"DROP TABLE {table}")


def test_bulk_copy_failure_loads_nothing(server, unique):
    table = f"t_bulkfail_{unique}"
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute(f"CREATE TABLE {table} (id int NOT NULL PRIMARY KEY, v int NOT NULL)")
        with pytest.raises(pytds.Error):
            cur.copy_to(table_or_view=table, data=[("1", "1"), ("2", "2"), ("1", "3")])
        cur.execute(f"SELECT COUNT(*) FROM {table}")
        assert cur.fetchone()[0] == 0
        cur.execute(f"DROP TABLE {table}")


def test_index_usage_stats_count_statements_of_every_kind(server, unique):
    """sys.dm_db_index_usage_stats as a change detector reads it: one user_updates per writing
    statement (a bulk load and a rolled-back DELETE included), reads in seeks + scans + lookups,
    and last_user_update moving with each write."""
    table = f"t_usage_{unique}"
    usage = (
        "SELECT user_seeks + user_scans + user_lookups, user_updates, last_user_update "
        f"FROM sys.dm_db_index_usage_stats WHERE database_id = DB_ID() AND object_id = OBJECT_ID(N'dbo.{table}')"
    )
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute(f"CREATE TABLE {table} (id int NOT NULL PRIMARY KEY, v nvarchar(10) NULL)")
        cur.execute(usage)
        assert cur.fetchall() == []
        # Columns named: without them pytds first reads `select top 1 * ... where 1<>1`, which
        # SQL Server answers without touching the table and the stand-in counts as a read.
        cur.copy_to(table_or_view=table, data=[("1", "a"), ("2", "b")], columns=["id", "v"])
        cur.execute(usage)
        reads, updates, first = cur.fetchone()
        assert (reads, updates) == (0, 1) and isinstance(first, dt.datetime)
        cur.execute(f"SELECT v FROM {table} WHERE id = %s", (2,))
        assert cur.fetchone()[0] == "b"
        cur.execute(f"UPDATE {table} SET v = N'c' WHERE id = 2")
        cur.execute(f"BEGIN TRANSACTION; DELETE FROM {table}; ROLLBACK")
        cur.execute(usage)
        reads, updates, last = cur.fetchone()
        assert (reads, updates) == (1, 3) and last >= first
        cur.execute(f"DROP TABLE {table}")


@pytest.mark.parametrize(
    "collation, stored",
    [
        ("Cyrillic_General_CI_AS", "Ж ж"),
        ("Latin1_General_CI_AS", "? ?"),
        ("SQL_Latin1_General_CP1_CI_AS", "? ?"),
        ("Polish_CI_AS", "? ?"),
        ("Japanese_CI_AS", "Ж ж"),
    ],
)
def test_varchar_keeps_its_collations_code_page(server, unique, collation, stored):
    """Each char/varchar/text column holds its collation's code page, as SQL Server does: 'Ж'
    is a character of 1251 (and of 932), not of 1252 or 1250, where it is stored as '?'. Written
    by a literal, a parameter and a bulk load; read back by pytds, which decodes by the column's
    collation as sent in COLMETADATA."""
    table = f"t_cp_{unique}"
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute(
            f"CREATE TABLE {table} (id int NOT NULL PRIMARY KEY, v varchar(10) COLLATE {collation} NULL, "
            f"c char(6) COLLATE {collation} NULL, t text COLLATE {collation} NULL)"
        )
        cur.execute(f"INSERT INTO {table} VALUES (1, N'Ж ж', N'Ж ж', N'Ж ж')")
        cur.execute(f"INSERT INTO {table} VALUES (2, %s, %s, %s)", ("Ж ж", "Ж ж", "Ж ж"))
        cur.copy_to(table_or_view=table, data=[("3", "Ж ж", "Ж ж", "Ж ж")])
        cur.execute(f"SELECT v, c, t, DATALENGTH(v) FROM {table} ORDER BY id")
        rows = cur.fetchall()
        width = 5 if collation.startswith("Japanese") and stored == "Ж ж" else 3
        # char(6) pads to six bytes of the code page ('Ж' is two bytes in 932).
        assert [tuple(r) for r in rows] == [(stored, stored + " " * (6 - width), stored, width)] * 3
        cur.execute(f"DROP TABLE {table}")


def test_an_unknown_collation_is_error_448(server, unique):
    with server.connect() as conn, conn.cursor() as cur:
        with pytest.raises(pytds.Error) as err:
            cur.execute(f"CREATE TABLE t_badcoll_{unique} (v varchar(10) COLLATE Klingon_CI_AS)")
        assert "Invalid collation 'Klingon_CI_AS'" in str(err.value)


def test_utf8_collation_to_a_client_without_utf8_support(server, unique):
    """pytds does not send the LOGIN7 feature UTF8_SUPPORT: a _UTF8 column's values reach it in
    the collation locale's code page (1252 for Latin1_General), each other character '?', as
    SQL Server sends them to such a client; what is stored stays whole (DATALENGTH in UTF-8)."""
    table = f"t_utf8_{unique}"
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute(f"CREATE TABLE {table} (v varchar(20) COLLATE Latin1_General_100_CI_AS_SC_UTF8 NULL)")
        cur.execute(f"INSERT INTO {table} VALUES (N'Ж日€é')")
        cur.execute(f"SELECT v, DATALENGTH(v) FROM {table}")
        assert tuple(cur.fetchone()) == ("??€é", 10)
        cur.execute(f"DROP TABLE {table}")


def test_syntax_sql_server_accepts(server, unique):
    """DELETE without FROM, APP_NAME(), EXEC sp_executesql inside a batch and an integer & a
    binary constant (Northwind's `sysstat & 0xf = 4`): each works as in SQL Server."""
    table = f"t_gap_{unique}"
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute(f"CREATE TABLE {table} (id int NOT NULL)")
        cur.execute(f"INSERT INTO {table} VALUES (1), (2), (3)")
        cur.execute(f"DELETE {table} WHERE id = 2")
        cur.execute(f"SELECT COUNT(*) FROM {table}")
        assert cur.fetchone()[0] == 2
        cur.execute("SELECT APP_NAME()")
        assert cur.fetchone()[0] == "pytds"
        cur.execute("DECLARE @n int = 20; EXEC sp_executesql N'SELECT @x & 0xf', N'@x int', @x = @n")
        assert cur.fetchone()[0] == 4
        cur.execute(f"DROP TABLE {table}")


@pytest.mark.parametrize(
    "collation, code_page",
    [
        ("SQL_Latin1_General_CP1_CI_AS", 1252),
        ("Latin1_General_100_CI_AS", 1252),
        ("Cyrillic_General_CI_AS", 1251),
        ("Czech_CI_AS", 1250),
        ("Polish_100_CS_AS", 1250),
        ("Croatian_CI_AS", 1250),
        ("Hungarian_CI_AI", 1250),
        ("Japanese_CI_AS", 932),
        ("Latin1_General_100_CI_AS_SC_UTF8", 65001),
    ],
)
def test_collationproperty_code_page(server, collation, code_page):
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute(f"SELECT COLLATIONPROPERTY('{collation}', 'CodePage'), COLLATIONPROPERTY('Klingon', 'CodePage')")
        assert tuple(cur.fetchone()) == (code_page, None)
