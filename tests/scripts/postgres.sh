#!/usr/bin/env bash
# A private PostgreSQL for tests: initdb into a temporary directory, a free loopback port, no
# password (trust on loopback). Debian's postgresql server binaries are used.
#
#   eval "$(tests/scripts/postgres.sh start)"   # exports MSSQLPG_TEST_PG_URL and MSSQLPG_TEST_PG_DIR
#   tests/scripts/postgres.sh start --durable   # a commit survives `crash` (synchronous_commit on)
#   tests/scripts/postgres.sh restart "$MSSQLPG_TEST_PG_DIR"   # fast shutdown, then start (fault tests)
#   tests/scripts/postgres.sh crash "$MSSQLPG_TEST_PG_DIR"     # immediate shutdown, then start: crash recovery
#   tests/scripts/postgres.sh stop "$MSSQLPG_TEST_PG_DIR"
set -euo pipefail

pg_bin() {
  local d
  for d in /usr/lib/postgresql/*/bin; do
    if [ -x "$d/initdb" ]; then echo "$d"; return; fi
  done
  return 1
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

case "${1:-}" in
  start)
    # Without --durable, commits are asynchronous (fast): an immediate shutdown may lose the last
    # ones, as PostgreSQL documents, which a test that crashes the server cannot tell from a bug.
    # With fsync off either way, a durable commit waits for a write(), not for the disk.
    sync_commit=off
    [ "${2:-}" = --durable ] && sync_commit=on
    bin=$(pg_bin) || { echo "postgres.sh: no PostgreSQL server binaries (apt-get install postgresql)" >&2; exit 1; }
    dir=$(mktemp -d /tmp/mssqlpg-test-pg.XXXXXX)
    port=$(free_port)
    run_as=()
    if [ "$(id -u)" = 0 ]; then
      # initdb refuses to run as root: the data directory belongs to the postgres user.
      id postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres
      chown postgres "$dir"
      run_as=(runuser -u postgres --)
    fi
    "${run_as[@]}" "$bin/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 \
      || { cat "$dir/initdb.log" >&2; exit 1; }
    cat >>"$dir/data/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$dir'
max_connections = 200
shared_buffers = 256MB
fsync = off
synchronous_commit = $sync_commit
full_page_writes = off
max_wal_size = 4GB
# Online migrations read the source by logical decoding (a publication and a replication slot).
wal_level = logical
max_replication_slots = 32
max_wal_senders = 32
CONF
    "${run_as[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start >/dev/null \
      || { cat "$dir/server.log" >&2; exit 1; }
    echo "export MSSQLPG_TEST_PG_DIR='$dir'"
    echo "export MSSQLPG_TEST_PG_URL='host=127.0.0.1 port=$port user=postgres dbname=postgres'"
    echo "export MSSQLPG_TEST_PG_PORT='$port'"
    ;;
  restart)
    dir=${2:?usage: postgres.sh restart DIR}
    bin=$(pg_bin)
    run_as=()
    [ "$(id -u)" = 0 ] && run_as=(runuser -u postgres --)
    "${run_as[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -m fast -w -t 60 restart >/dev/null \
      || { cat "$dir/server.log" >&2; exit 1; }
    ;;
  crash)
    # An immediate shutdown skips the checkpoint: the next start runs crash recovery (which, among
    # other things, empties every UNLOGGED table), as after a power loss or a killed postmaster.
    dir=${2:?usage: postgres.sh crash DIR}
    bin=$(pg_bin)
    run_as=()
    [ "$(id -u)" = 0 ] && run_as=(runuser -u postgres --)
    "${run_as[@]}" "$bin/pg_ctl" -D "$dir/data" -m immediate -w -t 60 stop >/dev/null \
      || { cat "$dir/server.log" >&2; exit 1; }
    "${run_as[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start >/dev/null \
      || { cat "$dir/server.log" >&2; exit 1; }
    ;;
  stop)
    dir=${2:?usage: postgres.sh stop DIR}
    bin=$(pg_bin)
    run_as=()
    [ "$(id -u)" = 0 ] && run_as=(runuser -u postgres --)
    "${run_as[@]}" "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
    rm -rf "$dir"
    ;;
  *)
    echo "usage: $0 start | restart DIR | crash DIR | stop DIR" >&2; exit 2 ;;
esac
