"""FreeTDS (C): tsql sends plain SQL batches (often without semicolons) and freebcp bulk-loads
with `SET FMTONLY ON` metadata queries and a BULK_LOAD message with no trailing DONE."""

import os
import re
import subprocess

from conftest import run_tsql


def test_tsql_connects_with_tds_74_and_queries(server):
    out = run_tsql(server, "SELECT CAST(42 AS int) AS answer, N'héllo' AS greeting")
    assert out.returncode == 0, out.stderr
    assert "answer" in out.stdout and "42" in out.stdout
    assert "héllo" in out.stdout


def test_tsql_really_speaks_tds_74(server):
    # FreeTDS silently falls back to TDS 7.1 when the prelogin reply lacks MARS; the server
    # reports the version the LOGIN7 asked for, as SQL Server does (0x74000004 = TDS 7.4).
    out = run_tsql(server, "SELECT protocol_version FROM sys.dm_exec_connections WHERE session_id = @@SPID")
    assert out.returncode == 0, out.stderr
    assert "1946157060" in out.stdout, out.stdout


def test_tsql_batch_without_semicolons(server):
    out = run_tsql(server, "SELECT 1 AS a SELECT 2 AS b")
    assert out.returncode == 0, out.stderr
    # tsql echoes its "1> 2> " prompts in front of the first output line of the batch.
    lines = [re.sub(r"^(\d+> )+", "", l).strip() for l in out.stdout.splitlines()]
    assert "a" in lines and "b" in lines and "1" in lines and "2" in lines


def test_tsql_every_type(server, unique):
    table = f"t_tsql_{unique}"
    sql = f"""
CREATE TABLE {table} (i int, d decimal(10,3), dt datetime2(3), g uniqueidentifier, s nvarchar(10), b varbinary(4))
INSERT INTO {table} VALUES (-5, 12.345, '2021-03-04 05:06:07.891', '6F9619FF-8B86-D011-B42D-00C04FC964FF', N'ok', 0xCAFE)
SELECT * FROM {table}
DROP TABLE {table}
"""
    out = run_tsql(server, sql)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    for expected in ["-5", "12.345", "2021", "6F9619FF-8B86-D011-B42D-00C04FC964FF", "ok", "cafe"]:
        assert expected.lower() in text.lower(), f"{expected!r} missing from tsql output:\n{text}"


def test_tsql_error_shows_msg_number(server):
    out = run_tsql(server, "SELECT * FROM missing_table_xyz")
    combined = out.stdout + out.stderr
    assert "208" in combined and "Invalid object name" in combined


def test_tsql_key_over_duplicates_sends_1505_then_1750(server, unique):
    # SQL Server sends two messages for one failed ADD CONSTRAINT; both must reach the client,
    # in that order, and the batch goes on.
    table = f"t_dup_{unique}"
    sql = f"""
CREATE TABLE {table} (a int NOT NULL)
INSERT INTO {table} VALUES (1), (1)
ALTER TABLE {table} ADD CONSTRAINT pk_{table} PRIMARY KEY (a)
SELECT COUNT(*) AS still_there FROM {table}
DROP TABLE {table}
"""
    out = run_tsql(server, sql)
    combined = out.stdout + out.stderr
    first = combined.find("Msg 1505")
    second = combined.find("Msg 1750")
    assert 0 <= first < second, combined
    assert "The duplicate key value is (1)." in combined
    assert "Could not create constraint or index. See previous errors." in combined
    assert "still_there" in combined


def test_freebcp_in_loads_all_rows(server, unique, tmp_path):
    table = f"t_bcp_{unique}"
    data = tmp_path / "rows.tsv"
    data.write_text("".join(f"{i}\tname {i}\t{i * 1.5}\n" for i in range(1, 1001)))
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute(f"CREATE TABLE {table} (id int NOT NULL PRIMARY KEY, name nvarchar(40) NOT NULL, x float NULL)")
    env = dict(os.environ, TDSVER="7.4", TDSPORT=str(server.port))
    out = subprocess.run(
        ["freebcp", f"[dbo].[{table}]", "in", str(data), "-c", "-S", server.host, "-U", server.user,
         "-P", server.password, "-D", server.database],
        capture_output=True, text=True, env=env, timeout=60,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "1000 rows copied" in out.stdout
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute(f"SELECT COUNT(*), SUM(id), MAX(name) FROM {table}")
        assert tuple(cur.fetchone()) == (1000, 500500, "name 999")
        cur.execute(f"SELECT x FROM {table} WHERE id = 3")
        assert cur.fetchone()[0] == 4.5
        cur.execute(f"DROP TABLE {table}")
