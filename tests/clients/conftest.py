"""Cross-client fidelity tests: independent TDS clients (pytds, FreeTDS tsql and freebcp) against
the TDS test server binary. They check that what tiberius accepts is also what other real
clients accept, so the test server is not just shaped around one driver."""

import os
import socket
import subprocess
import time

import pytest

PASSWORD = "Cl1ents-Test-Pw"
USER = "sa"
DATABASE = "clientsdb"


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, proc, port):
        self.proc = proc
        self.port = port
        self.host = "127.0.0.1"
        self.user = USER
        self.password = PASSWORD
        self.database = DATABASE

    def connect(self, **kw):
        import pytds

        args = dict(
            server=self.host,
            port=self.port,
            user=self.user,
            password=self.password,
            database=self.database,
            autocommit=True,
            timeout=30,
            login_timeout=10,
        )
        args.update(kw)
        return pytds.connect(**args)


@pytest.fixture(scope="session")
def server():
    binary = os.environ.get("TDS_TESTSERVER_BIN", "target/debug/tds-testserver")
    port = _free_port()
    proc = subprocess.Popen(
        [binary, "--listen", f"127.0.0.1:{port}", "--user", USER, "--password", PASSWORD, "--database", DATABASE],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    line = proc.stdout.readline()
    assert f"listening on 127.0.0.1:{port}" in line, f"unexpected first line from the server: {line!r}"
    yield Server(proc, port)
    proc.terminate()
    assert proc.wait(timeout=10) == 0, "the server must exit cleanly on SIGTERM"


def run_tsql(server, sql, extra_env=None):
    """Runs a script through FreeTDS tsql (TDS 7.4, plain connection) and returns stdout."""
    env = dict(os.environ, TDSVER="7.4")
    if extra_env:
        env.update(extra_env)
    script = sql.rstrip() + "\ngo\nexit\n"
    out = subprocess.run(
        ["tsql", "-H", server.host, "-p", str(server.port), "-U", server.user, "-P", server.password, "-D", server.database],
        input=script,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    return out


@pytest.fixture
def unique():
    """A unique table-name suffix, so tests sharing the session's server do not collide."""
    return f"{os.getpid()}_{time.monotonic_ns()}"
