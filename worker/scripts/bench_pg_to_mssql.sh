#!/bin/bash
# PostgreSQL -> SQL Server (TDS test server) release-build measurement, 1M-row mixed table, TDS
# packet sizes side by side; then SQL Server -> PostgreSQL on the same rows for the ratio.
# SHAPE=narrow: a narrow table instead (id, account_id, amount numeric; use ROWS=10000000).
# SHAPE=shapes_mixed / shapes_narrow: the columns of `bench shapes` (issue 3's benchmark) as
# PostgreSQL declares them, so that both directions are measured on the same shapes: 12 columns
# with texts of up to 100 and 400 characters (5% with non-ASCII words) and NULLs, and
# (id int, account_id int, amount bigint).
# CHUNK_ROWS and PARALLELISM set those of the PostgreSQL -> SQL Server run, PART_ROWS the
# partitioning's rowsPerPartition of both runs (defaults otherwise).
# Prints the test server's and the worker's CPU time per direction; FWD_PERF=FILE records a perf
# profile of the test server serving the SQL Server -> PostgreSQL run.
set -u
: "${MSSQLPG_TEST_PG_URL:?start PostgreSQL: eval \"$(tests/scripts/postgres.sh start)\"}"
ROWS=${ROWS:-1000000}
W=${W:-target/release/mssql-pg-worker}
S=${S:-target/release/tds-testserver}
PGPORT=$(echo "$MSSQLPG_TEST_PG_URL" | sed -E 's/.*port=([0-9]+).*/\1/')
PASS=BenchPass123
OUT=${OUT:-/tmp/bench-pg-to-mssql}; mkdir -p $OUT
SHAPE=${SHAPE:-mixed}
case "$SHAPE" in
  mixed) psql "$MSSQLPG_TEST_PG_URL" -q <<SQL
DROP SCHEMA IF EXISTS bench_rev CASCADE; CREATE SCHEMA bench_rev;
CREATE TABLE bench_rev.mixed (id bigint PRIMARY KEY, i int NOT NULL, b bigint, n numeric(12,2), t text,
  v varchar(40), ts timestamp, tz timestamptz, d date, f boolean, u uuid, x double precision);
INSERT INTO bench_rev.mixed SELECT g, (g * 7) % 100000, g::bigint * 1000003, (g % 100000) / 100.0,
  'text value number ' || g || ' with some more words', 'v' || (g % 5000),
  timestamp '2020-01-01' + g * interval '1 second', timestamptz '2020-01-01 00:00:00+00' + g * interval '1 ms',
  date '2000-01-01' + (g % 9000), g % 2 = 0, md5(g::text)::uuid, g / 3.0
  FROM generate_series(1, $ROWS) g;
ANALYZE bench_rev.mixed;
SQL
  ;;
  narrow) psql "$MSSQLPG_TEST_PG_URL" -q <<SQL
DROP SCHEMA IF EXISTS bench_rev CASCADE; CREATE SCHEMA bench_rev;
CREATE TABLE bench_rev.narrow (id int PRIMARY KEY, account_id int NOT NULL, amount numeric(12,2));
INSERT INTO bench_rev.narrow SELECT g, (g * 7) % 100000, CASE WHEN g % 10 = 0 THEN NULL ELSE (g % 1000000) / 100.0 END
  FROM generate_series(1, $ROWS) g;
ANALYZE bench_rev.narrow;
SQL
  ;;
  shapes_mixed) psql "$MSSQLPG_TEST_PG_URL" -q <<SQL
DROP SCHEMA IF EXISTS bench_rev CASCADE; CREATE SCHEMA bench_rev;
CREATE TABLE bench_rev.shapes_mixed (id int PRIMARY KEY, big bigint NOT NULL, small smallint,
  amount numeric(18,4) NOT NULL, price double precision, flag boolean NOT NULL, name varchar(100) NOT NULL,
  code varchar(20), note text, created timestamp(3) NOT NULL, day date, guid uuid NOT NULL);
\o /dev/null
SELECT setseed(0.25);
\o
INSERT INTO bench_rev.shapes_mixed
SELECT g, (random() * 9.2e18 - 4.6e18)::bigint,
  CASE WHEN random() < 0.1 THEN NULL ELSE (floor(random() * 60000) - 30000)::smallint END,
  round((random() * 2e13 - 1e13)::numeric, 4), CASE WHEN random() < 0.1 THEN NULL ELSE floor(random() * 2^40) / 1024 END,
  random() < 0.5, substr(w, 1 + (g % 97), 1 + floor(random() * 100)::int),
  CASE WHEN random() < 0.2 THEN NULL ELSE 'C-' || upper(lpad(to_hex(floor(random() * 4294967296)::bigint), 8, '0')) END,
  CASE WHEN random() < 0.3 THEN NULL ELSE substr(w, 1 + (g % 89), 1 + floor(random() * 400)::int) END,
  timestamp '2008-01-01' + floor(random() * 504921600000) * interval '1 millisecond',
  CASE WHEN random() < 0.15 THEN NULL ELSE date '2007-11-06' + floor(random() * 6000)::int END, gen_random_uuid()
FROM (SELECT g, CASE WHEN g % 20 = 0
  THEN repeat('order café customer Müller invoice Ærø shipment naïve return Zürich payment 東京 account Łódź balance smörgåsbord ', 6)
  ELSE repeat('order customer invoice shipment return payment account balance ledger north south east west priority standard express pending closed open review ', 4) END w
  FROM generate_series(1, $ROWS) g) s;
ANALYZE bench_rev.shapes_mixed;
SQL
  ;;
  shapes_narrow) psql "$MSSQLPG_TEST_PG_URL" -q <<SQL
DROP SCHEMA IF EXISTS bench_rev CASCADE; CREATE SCHEMA bench_rev;
CREATE TABLE bench_rev.shapes_narrow (id int PRIMARY KEY, account_id int NOT NULL, amount bigint NOT NULL);
\o /dev/null
SELECT setseed(0.25);
\o
INSERT INTO bench_rev.shapes_narrow SELECT g, 1 + floor(random() * 100000)::int, (random() * 1.7e13 - 8.7e12)::bigint
  FROM generate_series(1, $ROWS) g;
ANALYZE bench_rev.shapes_narrow;
SQL
  ;;
  *) echo "SHAPE is mixed, narrow, shapes_mixed or shapes_narrow" >&2; exit 2 ;;
esac
echo "source rows: $(psql "$MSSQLPG_TEST_PG_URL" -Atc "select count(*) from bench_rev.$SHAPE"), size $(psql "$MSSQLPG_TEST_PG_URL" -Atc "select pg_size_pretty(pg_table_size('bench_rev.$SHAPE'))")"
if [ -n "${PROFILE:-}" ]; then
  # Instruction counts of the worker's copy phase (repeatable on a busy machine, unlike wall time):
  # `plan` runs natively, then `copy` of the one task runs under valgrind's callgrind.
  P=${PACKETS:-32767}
  PORT=$((20000 + RANDOM % 20000))
  TDS_TESTSERVER_PASSWORD=$PASS $S --listen 127.0.0.1:$PORT > $OUT/server-prof.log 2>&1 &
  SPID=$!
  sleep 1
  cat > $OUT/m-prof.yaml <<Y
apiVersion: mssqlpg.dev/v1alpha1
kind: Migration
metadata: {name: bench-rev-prof, namespace: bench}
spec:
  source:
    postgres: {host: 127.0.0.1, port: $PGPORT, database: postgres, schema: bench_rev, credentialsSecret: s, sslMode: disable}
  target:
    mssql: {host: 127.0.0.1, port: $PORT, database: master, schema: dbo, credentialsSecret: t, encryption: NotSupported, packetSize: $P}
  verify: count
Y
  export SOURCE_USERNAME=postgres SOURCE_PASSWORD= TARGET_USERNAME=sa TARGET_PASSWORD=$PASS RUST_LOG=warn
  $W prepare -f $OUT/m-prof.yaml > $OUT/plan-prof.json
  valgrind --tool=callgrind --callgrind-out-file=$OUT/callgrind.out $W copy -f $OUT/m-prof.yaml \
    --task bench_rev.$SHAPE > $OUT/copy-prof.json 2> $OUT/callgrind.log
  echo "copy: $(head -c 300 $OUT/copy-prof.json)"
  echo "worker instructions (Ir): $(grep -E '^(summary|totals):' $OUT/callgrind.out | head -1 | awk '{print $2}')"
  callgrind_annotate --inclusive=no $OUT/callgrind.out 2>/dev/null | sed -n 1,60p > $OUT/callgrind-top.txt
  kill $SPID; wait $SPID 2>/dev/null
  exit 0
fi
for P in ${PACKETS:-4096 8192 16384 32767}; do
  PORT=$((20000 + RANDOM % 20000))
  TDS_TESTSERVER_PASSWORD=$PASS $S --listen 127.0.0.1:$PORT > $OUT/server-$P.log 2>&1 &
  SPID=$!
  sleep 1
  cat > $OUT/m-$P.yaml <<Y
apiVersion: mssqlpg.dev/v1alpha1
kind: Migration
metadata: {name: bench-rev-$P, namespace: bench}
spec:
  source:
    postgres: {host: 127.0.0.1, port: $PGPORT, database: postgres, schema: bench_rev, credentialsSecret: s, sslMode: disable}
  target:
    mssql: {host: 127.0.0.1, port: $PORT, database: master, schema: dbo, credentialsSecret: t, encryption: NotSupported, packetSize: $P}
  verify: count
${CHUNK_ROWS:+  chunkRows: $CHUNK_ROWS}
${PARALLELISM:+  parallelism: $PARALLELISM}
${PART_ROWS:+  partitioning: {rowsPerPartition: $PART_ROWS\}}
Y
  SOURCE_USERNAME=postgres SOURCE_PASSWORD= TARGET_USERNAME=sa TARGET_PASSWORD=$PASS RUST_LOG=warn \
    /usr/bin/time -v $W run -f $OUT/m-$P.yaml > $OUT/run-$P.json 2> $OUT/time-$P.txt
  # The test server's CPU (user+sys, clock ticks) so far: the bulk loads of this run.
  SCPU=$(awk '{print $14+$15}' /proc/$SPID/stat)
  echo "packet $P: test server CPU $(awk -v t=$SCPU -v hz=$(getconf CLK_TCK) 'BEGIN{printf "%.2f", t/hz}') s; worker CPU $(awk '/User time|System time/{s+=$NF} END{printf "%.2f", s}' $OUT/time-$P.txt) s"
  echo "packet $P: $(grep '"event":"summary"' $OUT/run-$P.json | python3 -c 'import json,sys; s=json.load(sys.stdin); print("ok=%s rows=%d copy_s=%.1f rows/s=%.0f peak_MiB=%.1f negotiated=%s" % (s["ok"], s["rows"], s["copy_seconds"], s["rows_per_second"], s["peak_memory_bytes"]/1048576, s["negotiated_packet_size"]))') maxrss_kB=$(grep 'Maximum resident' $OUT/time-$P.txt | awk '{print $NF}')"
  if [ "$P" = "${REVERSE_AT:-32767}" ]; then
    # The other direction on the same rows (now in the test server), into a fresh PostgreSQL schema.
    psql "$MSSQLPG_TEST_PG_URL" -qc "DROP SCHEMA IF EXISTS bench_fwd CASCADE"
    cat > $OUT/f-$P.yaml <<Y
apiVersion: mssqlpg.dev/v1alpha1
kind: Migration
metadata: {name: bench-fwd-$P, namespace: bench}
spec:
  source:
    mssql: {host: 127.0.0.1, port: $PORT, database: master, schema: dbo, credentialsSecret: t, encryption: NotSupported, packetSize: $P}
  target:
    postgres: {host: 127.0.0.1, port: $PGPORT, database: postgres, schema: bench_fwd, credentialsSecret: s, sslMode: disable}
  tables: {include: [$SHAPE]}
  verify: count
${PART_ROWS:+  partitioning: {rowsPerPartition: $PART_ROWS\}}
Y
    # FWD_PERF=FILE: a perf profile of the test server while it serves this direction.
    [ -n "${FWD_PERF:-}" ] && { perf record -F 1999 -g -p $SPID -o "$FWD_PERF" 2>/dev/null & PERFPID=$!; sleep 0.5; }
    SOURCE_USERNAME=sa SOURCE_PASSWORD=$PASS TARGET_USERNAME=postgres TARGET_PASSWORD= RUST_LOG=warn \
      /usr/bin/time -v $W run -f $OUT/f-$P.yaml > $OUT/fwd-$P.json 2> $OUT/ftime-$P.txt
    [ -n "${FWD_PERF:-}" ] && { kill -INT $PERFPID; wait $PERFPID; }
    echo "mssql->pg same rows, packet $P: test server CPU $(awk -v t0=$SCPU -v hz=$(getconf CLK_TCK) '{printf "%.2f", ($14+$15-t0)/hz}' /proc/$SPID/stat) s; worker CPU $(awk '/User time|System time/{s+=$NF} END{printf "%.2f", s}' $OUT/ftime-$P.txt) s"
    echo "mssql->pg same rows, packet $P: $(grep '"event":"summary"' $OUT/fwd-$P.json | python3 -c 'import json,sys; s=json.load(sys.stdin); print("ok=%s rows=%d copy_s=%.1f rows/s=%.0f peak_MiB=%.1f" % (s["ok"], s["rows"], s["copy_seconds"], s["rows_per_second"], s["peak_memory_bytes"]/1048576))')"
  fi
  kill $SPID; wait $SPID 2>/dev/null
done
