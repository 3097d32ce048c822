//! The PostgreSQL -> SQL Server copy computes the checksum's source side as it reads the rows:
//! for every mapped type its digest equals the one PostgreSQL computes itself in SQL over the
//! verify expressions (and verify's reading of them, `pg_digest`), numeric and money included (the copy reads them at the value's own
//! scale, the verify casts them to the target's `numeric(p,s)`). And a checkpoints table made by
//! an older worker, without the digest column, is upgraded in place.
#![allow(clippy::unwrap_used)]

mod common;

use common::{ms_exec, start_tds_server};
use mssql_pg_worker::copy::chunk::ChunkLimit;
use mssql_pg_worker::copy::row_hash::RowHasher;
use mssql_pg_worker::engine::{Engine as _, EngineExt as _};
use mssql_pg_worker::options::Mode;
use mssql_pg_worker::pg::read::{SESSION_SETTINGS, verify_columns};
use mssql_pg_worker::pg_to_mssql::PgToMssqlEngine;
use mssql_pg_worker::verify::pg_digest;

fn engine(
    target: &mssql_pg_worker::mssql::connect::MssqlEndpoint,
    schema: &str,
    migration: &str,
) -> PgToMssqlEngine {
    match std::sync::Arc::try_unwrap(common::pg_engine(target, schema, migration, Mode::DropRecreate)) {
        Ok(e) => e,
        Err(_) => panic!("engine shared"),
    }
}

/// PostgreSQL's cast of a numeric with at most `s` fractional digits to `numeric(p,s)` keeps its
/// digits, weight and sign and only sets the display scale: the fix-up the copy's hash applies.
#[tokio::test]
async fn numeric_cast_to_the_target_scale_only_changes_the_display_scale() {
    let pg = common::pg_connect().await;
    let values = [
        "0",
        "-0",
        "0.00",
        "1",
        "-1",
        "1.5",
        "1.50",
        "-1.5",
        "100",
        "10000",
        "100000000",
        "0.0001",
        "0.0100",
        "-0.0001",
        "-12345.6789",
        "99999999.9999",
        "12.3",
        "123456789012345678901234.5678",
    ];
    for scale in [4u16, 6, 9] {
        for v in values {
            let r = pg
                .query_one(
                    &format!("SELECT numeric_send($1::text::numeric), numeric_send($1::text::numeric::numeric(38,{scale}))"),
                    &[&v],
                )
                .await
                .unwrap();
            let (read, cast): (Vec<u8>, Vec<u8>) = (r.get(0), r.get(1));
            let fixed = RowHasher::new(vec![1700])
                .with_numeric_scales(vec![Some(scale)])
                .hash_fields(&[Some(&read)]);
            let plain = RowHasher::new(vec![1700]).hash_fields(&[Some(&cast)]);
            assert_eq!(fixed, plain, "{v} at scale {scale}: read {read:?}, cast {cast:?}");
        }
    }
    // money read as numeric (its locale's 2 decimals), verified as numeric(19,4).
    for m in [
        "0",
        "12.34",
        "-0.01",
        "-12.30",
        "1000000",
        "922337203685477.58",
        "-922337203685477.58",
    ] {
        let r = pg
            .query_one(
                "SELECT numeric_send($1::text::money::numeric), numeric_send($1::text::money::numeric::numeric(19,4))",
                &[&m],
            )
            .await
            .unwrap();
        let (read, cast): (Vec<u8>, Vec<u8>) = (r.get(0), r.get(1));
        let fixed = RowHasher::new(vec![1700])
            .with_numeric_scales(vec![Some(4)])
            .hash_fields(&[Some(&read)]);
        assert_eq!(
            fixed,
            RowHasher::new(vec![1700]).hash_fields(&[Some(&cast)]),
            "money {m}"
        );
    }
}

#[tokio::test]
async fn copy_digest_equals_postgresql_hash_for_every_mapped_type() {
    let (_server, target) = start_tds_server();
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "digest_types").await;
    let s = format!("\"{schema}\"");
    pg.batch_execute(&format!(
        "CREATE DOMAIN {s}.posint AS int CHECK (VALUE > 0);
         CREATE DOMAIN {s}.price AS numeric(10,2);
         CREATE DOMAIN {s}.label AS varchar(20);
         CREATE TYPE {s}.mood AS ENUM ('sad', 'ok', 'happy');
         CREATE TYPE {s}.pair AS (a int, b text);
         CREATE TABLE {s}.everything (
             id int PRIMARY KEY, d_int {s}.posint, d_price {s}.price, d_label {s}.label,
             c bpchar(5), mood {s}.mood, js json, jb jsonb, arr int[], tarr text[], iv interval,
             m money, n numeric, n2 numeric(12,4), n3 numeric(5,5), f4 real, f8 double precision,
             b boolean, sm smallint, bi bigint, t text, vc varchar(10), vcu varchar, by bytea,
             dt date, tm time(3), ts timestamp(0), tstz timestamptz, u uuid, x xml, ip inet,
             net cidr, mac macaddr, bits bit(4), vbits varbit, ttz timetz, comp {s}.pair,
             rng int4range, nm name);
         INSERT INTO {s}.everything
           SELECT g,
                  CASE WHEN g % 9 = 0 THEN NULL ELSE g END,
                  CASE WHEN g % 9 = 1 THEN NULL ELSE g * 1.5 END,
                  CASE WHEN g % 9 = 2 THEN NULL ELSE 'label ' || g END,
                  CASE WHEN g % 9 = 3 THEN NULL ELSE 'c' || (g % 10) END,
                  (ARRAY['sad', 'ok', 'happy'])[g % 3 + 1]::{s}.mood,
                  CASE WHEN g % 9 = 4 THEN NULL ELSE json_build_object('g', g, 'name', 'n ' || g) END,
                  jsonb_build_object('g', g, 'list', jsonb_build_array(g, 'x', null)),
                  ARRAY[g, g + 1, NULL], ARRAY['a' || g, 'é'],
                  make_interval(0, g % 13, 0, g % 5, g % 24, g % 60, (g % 7) + 0.5),
                  ((g - 150) * 1.23)::numeric::money,
                  CASE g % 6 WHEN 0 THEN 0 WHEN 1 THEN -g * 1.5 WHEN 2 THEN 1.50 * g
                             WHEN 3 THEN g + 0.000001 WHEN 4 THEN g * 100 ELSE NULL END,
                  CASE WHEN g % 2 = 0 THEN -g / 8.0 ELSE g END,
                  (g % 1000) / 100000.0,
                  g / 7.0, -g / 3.0,
                  g % 2 = 0, (g % 30000)::smallint, g * 100000000000, 'text ' || g || ' ✓',
                  left('v' || g, 10), repeat('x', g % 50), int4send(g),
                  date '2020-01-01' + g, time '10:00:00.123' + g * interval '1 second',
                  timestamp '2020-01-01 10:00:00' + g * interval '1 minute',
                  timestamptz '2020-01-01 10:00:00.123456+02' + g * interval '1 hour',
                  md5(g::text)::uuid, ('<r g=\"' || g || '\"/>')::xml,
                  ('10.0.' || (g % 256) || '.1')::inet, ('10.' || (g % 256) || '.0.0/16')::cidr,
                  ('08:00:2b:01:02:' || lpad(to_hex(g % 256), 2, '0'))::macaddr,
                  (g % 16)::bit(4), (g % 64)::bit(6)::varbit, time with time zone '10:00:00+03',
                  ROW(g, 'p' || g)::{s}.pair, int4range(g, g + 10), ('name' || g)::name
           FROM generate_series(1, 300) g;
         ANALYZE {s}.everything"
    ))
    .await
    .unwrap();

    let mut e = engine(&target, &schema, "test/digest_types");
    e.copy.chunk = ChunkLimit::rows(70);
    let prepared = e.prepare().await.unwrap();
    let reports = e.copy_all(&prepared.plan).await.unwrap();
    assert!(reports.iter().all(|r| r.chunks > 1), "{reports:#?}");
    e.finalize(&prepared.plan).await.unwrap();

    let parts = e.verify_parts(&prepared.plan).await.unwrap();
    assert_eq!(parts.len(), 1, "{parts:#?}");
    let stored = parts[0].stored.clone().expect("the copy stored its digest");
    pg.batch_execute(SESSION_SETTINGS).await.unwrap();
    let t = &prepared.plan.tables[0];
    let cols = verify_columns(&pg, t).await.unwrap();
    let from = format!("{s}.everything");
    let in_sql = common::sql_digest(&pg, &cols.exprs, &from).await;
    assert_eq!((stored.rows, stored.sum), in_sql);
    assert_eq!(stored.rows, 300);
    // Verify's own reading of PostgreSQL's side (binary COPY, hashed by the worker) gives the
    // digest PostgreSQL computes in SQL.
    let read_back = pg_digest(&pg, &cols.exprs, RowHasher::new(cols.oids.clone()), &from, None)
        .await
        .unwrap();
    assert_eq!((read_back.rows, read_back.sum), in_sql);

    let v = e.verify(&prepared.plan).await.unwrap();
    assert!(v.iter().all(|t| t.ok), "{v:#?}");
}

/// A checkpoints table from a worker without digests: prepare adds the column; a task resumed
/// from a checkpoint without a digest is verified by PostgreSQL hashing its rows, the others
/// from their digests.
#[tokio::test]
async fn checkpoints_table_of_an_older_worker_is_upgraded() {
    let (_server, target) = start_tds_server();
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "digest_upgrade").await;
    pg.batch_execute(&format!(
        "CREATE TABLE \"{schema}\".a (id int PRIMARY KEY, v numeric(8,3), t text);
         INSERT INTO \"{schema}\".a SELECT g, g / 8.0, 'a' || g FROM generate_series(1, 500) g;
         CREATE TABLE \"{schema}\".b (id int PRIMARY KEY, m money);
         INSERT INTO \"{schema}\".b SELECT g, g * 1.01 FROM generate_series(1, 500) g"
    ))
    .await
    .unwrap();
    let mut ms = target.connect().await.unwrap();
    ms_exec(&mut ms, "CREATE SCHEMA [_mssqlpg]").await;
    // The table as an older worker made it.
    ms_exec(
        &mut ms,
        "CREATE TABLE [_mssqlpg].[checkpoints] (migration nvarchar(400) NOT NULL, task nvarchar(400) NOT NULL, \
         last_key nvarchar(max) NULL, [rows] bigint NOT NULL, done bit NOT NULL, \
         updated_at datetime2(3) NOT NULL DEFAULT SYSUTCDATETIME(), \
         CONSTRAINT [PK__mssqlpg_checkpoints] PRIMARY KEY (migration, task))",
    )
    .await;
    let mut e = engine(&target, &schema, "test/digest_upgrade");
    e.copy.chunk = ChunkLimit::rows(100);
    e.copy.fail_after_chunks = Some(2);
    let prepared = e.prepare().await.unwrap();
    assert!(e.copy_all(&prepared.plan).await.is_err());
    // Interrupted: an older worker would have left its checkpoints without a digest, then the
    // newer one resumes with the column dropped again (prepare adds it back).
    ms_exec(&mut ms, "ALTER TABLE [_mssqlpg].[checkpoints] DROP COLUMN digest").await;
    e.copy.fail_after_chunks = None;
    let prepared = e.prepare().await.unwrap();
    assert!(prepared.resumed);
    e.copy_all(&prepared.plan).await.unwrap();
    e.finalize(&prepared.plan).await.unwrap();
    let parts = e.verify_parts(&prepared.plan).await.unwrap();
    // Both tables' tasks resumed after a checkpoint without a digest.
    assert!(parts.iter().all(|p| p.stored.is_none()), "{parts:#?}");
    let v = e.verify(&prepared.plan).await.unwrap();
    assert!(
        v.len() == 2 && v.iter().all(|t| t.ok && t.source_rows == 500),
        "{v:#?}"
    );

    // A new run stores digests in the upgraded table.
    let mut e = engine(&target, &schema, "test/digest_upgrade2");
    e.copy.chunk = ChunkLimit::rows(100);
    let prepared = e.prepare().await.unwrap();
    e.copy_all(&prepared.plan).await.unwrap();
    e.finalize(&prepared.plan).await.unwrap();
    let parts = e.verify_parts(&prepared.plan).await.unwrap();
    assert!(parts.iter().all(|p| p.stored.is_some()), "{parts:#?}");
    let v = e.verify(&prepared.plan).await.unwrap();
    assert!(v.len() == 2 && v.iter().all(|t| t.ok), "{v:#?}");
    ms_exec(&mut ms, "UPDATE dbo.b SET m = m + 0.01 WHERE id = 7").await;
    let v = e.verify(&prepared.plan).await.unwrap();
    let bad: Vec<&str> = v.iter().filter(|t| !t.ok).map(|t| t.table.as_str()).collect();
    assert_eq!(bad, [format!("{schema}.b")], "{v:#?}");
}
