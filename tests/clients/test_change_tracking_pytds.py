"""Change Tracking and SNAPSHOT isolation seen by an independent client (pytds): net changes,
one version per committed transaction, snapshot reads that neither block writers nor wait for
them, and the minimum valid version after TRUNCATE and after a retention clean-up. The
expected net changes are SQL Server's for the same statements."""

import time

import pytest
import pytds


def _enable_database(cur):
    # The session's server is shared: enable once.
    cur.execute("SELECT COUNT(*) FROM sys.change_tracking_databases WHERE database_id = DB_ID()")
    if cur.fetchone()[0] == 0:
        cur.execute(
            "ALTER DATABASE CURRENT SET CHANGE_TRACKING = ON (CHANGE_RETENTION = 1 MINUTES, AUTO_CLEANUP = OFF)"
        )
    cur.execute("ALTER DATABASE CURRENT SET ALLOW_SNAPSHOT_ISOLATION ON")


def _tracked(cur, table):
    _enable_database(cur)
    cur.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, v nvarchar(20) NULL)")
    cur.execute(f"ALTER TABLE {table} ENABLE CHANGE_TRACKING")


def _current(cur):
    cur.execute("SELECT CHANGE_TRACKING_CURRENT_VERSION()")
    return cur.fetchone()[0]


def _changes(cur, table, last):
    cur.execute(
        "SELECT ct.id, ct.SYS_CHANGE_OPERATION, ct.SYS_CHANGE_VERSION, ct.SYS_CHANGE_CREATION_VERSION, t.v "
        f"FROM CHANGETABLE(CHANGES dbo.{table}, %s) AS ct LEFT OUTER JOIN dbo.{table} t ON t.id = ct.id ORDER BY ct.id",
        (last,),
    )
    return [tuple(r) for r in cur.fetchall()]


def test_insert_update_delete_of_one_key_nets_as_sql_server_does(server, unique):
    table = f"t_ct_net_{unique}"
    with server.connect() as conn, conn.cursor() as cur:
        _tracked(cur, table)
        cur.execute(f"INSERT INTO {table} VALUES (1, N'one')")
        last = _current(cur)
        cur.execute(f"INSERT INTO {table} VALUES (2, N'zwei')")
        cur.execute(f"UPDATE {table} SET v = N'two' WHERE id = 2")
        cur.execute(f"UPDATE {table} SET v = N'uno' WHERE id = 1")
        # Inserted then updated after @last: one insert, with the current image.
        assert _changes(cur, table, last) == [
            (1, "U", last + 3, None, "uno"),
            (2, "I", last + 2, last + 1, "two"),
        ]
        cur.execute(f"DELETE FROM {table} WHERE id = 2")
        # Inserted, updated and deleted after @last: one delete (SQL Server reports it too).
        assert _changes(cur, table, last) == [
            (1, "U", last + 3, None, "uno"),
            (2, "D", last + 4, last + 1, None),
        ]
        cur.execute(f"ALTER TABLE {table} DISABLE CHANGE_TRACKING")
        cur.execute(f"DROP TABLE {table}")


def test_one_version_per_committed_transaction_and_none_for_a_rollback(server, unique):
    table = f"t_ct_tx_{unique}"
    with server.connect() as setup, setup.cursor() as cur:
        _tracked(cur, table)
        before = _current(cur)
    with server.connect(autocommit=False) as conn:
        with conn.cursor() as cur:
            cur.execute(f"INSERT INTO {table} VALUES (1, N'a')")
            cur.execute(f"INSERT INTO {table} VALUES (2, N'b')")
        conn.rollback()
        with server.connect() as check, check.cursor() as c:
            assert _current(c) == before
        with conn.cursor() as cur:
            cur.execute(f"INSERT INTO {table} VALUES (3, N'c')")
            cur.execute(f"UPDATE {table} SET v = N'cc' WHERE id = 3")
            cur.execute(f"INSERT INTO {table} VALUES (4, N'd')")
        conn.commit()
    with server.connect() as check, check.cursor() as cur:
        assert _current(cur) == before + 1
        assert _changes(cur, table, before) == [
            (3, "I", before + 1, before + 1, "cc"),
            (4, "I", before + 1, before + 1, "d"),
        ]
        cur.execute(f"ALTER TABLE {table} DISABLE CHANGE_TRACKING")
        cur.execute(f"DROP TABLE {table}")


def test_snapshot_reads_do_not_block_writers_and_are_not_blocked(server, unique):
    table = f"t_ct_snap_{unique}"
    with server.connect() as setup, setup.cursor() as cur:
        _tracked(cur, table)
        cur.execute(f"INSERT INTO {table} VALUES (1, N'old')")
    with server.connect() as reader, reader.cursor() as r, server.connect() as writer, writer.cursor() as w:
        r.execute("SET TRANSACTION ISOLATION LEVEL SNAPSHOT")
        r.execute("BEGIN TRAN")
        r.execute(f"SELECT v FROM {table} WHERE id = 1")
        assert r.fetchone()[0] == "old"
        version = _current(r)
        started = time.monotonic()
        w.execute(f"UPDATE {table} SET v = N'new' WHERE id = 1")
        w.execute(f"INSERT INTO {table} VALUES (2, N'two')")
        assert time.monotonic() - started < 2, "the writer waited for the snapshot reader"
        r.execute(f"SELECT COUNT(*), MAX(v) FROM {table}")
        assert tuple(r.fetchone()) == (1, "old")
        assert _current(r) == version
        # A writer's open transaction does not hold the snapshot reader up.
        w.execute("BEGIN TRAN")
        w.execute(f"DELETE FROM {table} WHERE id = 1")
        started = time.monotonic()
        r.execute(f"SELECT v FROM {table} WHERE id = 1")
        assert r.fetchone()[0] == "old"
        assert time.monotonic() - started < 2, "the snapshot reader waited for the writer"
        w.execute("ROLLBACK")
        # Writing after another transaction committed is an update conflict.
        with pytest.raises(pytds.Error) as err:
            r.execute(f"UPDATE {table} SET v = N'mine' WHERE id = 1")
        assert err.value.msg_no == 3960
        r.execute("SELECT @@TRANCOUNT")
        assert r.fetchone()[0] == 0
        r.execute("SET TRANSACTION ISOLATION LEVEL READ COMMITTED")
        w.execute(f"ALTER TABLE {table} DISABLE CHANGE_TRACKING")
        w.execute(f"DROP TABLE {table}")


def test_minimum_valid_version_after_truncate_and_after_clean_up(server, unique):
    table = f"t_ct_min_{unique}"
    min_valid = f"SELECT CHANGE_TRACKING_MIN_VALID_VERSION(OBJECT_ID(N'dbo.{table}'))"
    with server.connect() as conn, conn.cursor() as cur:
        _tracked(cur, table)
        cur.execute(min_valid)
        enabled_at = cur.fetchone()[0]
        assert enabled_at == _current(cur)
        cur.execute(f"INSERT INTO {table} VALUES (1, N'a'), (2, N'b')")
        cur.execute(f"TRUNCATE TABLE {table}")
        # The table's history restarts at the current version.
        now = _current(cur)
        cur.execute(min_valid)
        assert cur.fetchone()[0] == now > enabled_at
        assert _changes(cur, table, enabled_at) == []
        cur.execute(f"INSERT INTO {table} VALUES (3, N'c')")
        # The retention (1 minute) has not passed: the clean-up keeps everything.
        cur.execute(f"EXEC sys.sp_flush_CT_internal_table_on_demand @TableToClean = N'{table}'")
        cur.execute(min_valid)
        assert cur.fetchone()[0] == now
        # Let the retention pass (the test server's own clock), then change another row.
        cur.execute("EXEC sp_testserver_advance_ct_clock @seconds = 120")
        cur.execute(f"INSERT INTO {table} VALUES (4, N'd')")
        latest = _current(cur)
        cur.execute(f"EXEC sys.sp_flush_CT_internal_table_on_demand @TableToClean = N'{table}'")
        cur.execute(min_valid)
        assert cur.fetchone()[0] == latest - 1
        assert [r[0] for r in _changes(cur, table, latest - 1)] == [4]
        assert [r[0] for r in _changes(cur, table, enabled_at)] == [4]
        cur.execute(f"ALTER TABLE {table} DISABLE CHANGE_TRACKING")
        cur.execute(f"DROP TABLE {table}")
