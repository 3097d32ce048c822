//! Throughput of the PostgreSQL half alone: rows shaped like StackOverflow's Votes and Comments
//! are built as tiberius `ColumnData` (what the reader gets), encoded and committed in chunks with
//! checkpoints, through the same channel the pipeline uses.
//!
//!   MSSQLPG_TEST_PG_URL='host=... port=... user=postgres dbname=postgres' \
//!     cargo run --release -p mssql-pg-worker --example pg_copy_bench -- 2000000
#![allow(clippy::unwrap_used)]

use bytes::BytesMut;
use mssql_pg_worker::chunk_loop::{ChunkEnd, Msg};
use mssql_pg_worker::copy::binary::RowEncoder;
use mssql_pg_worker::copy::checkpoint::{self, KeyValue};
use mssql_pg_worker::mssql::read::FLUSH_BYTES;
use mssql_pg_worker::pg::connect::PgEndpoint;
use mssql_pg_worker::pg::load::{WriterCtx, write_chunks};
use mssql_pg_worker::pipeline::CHANNEL_DEPTH;
use mssql_pg_worker::schema::mssql_to_pg_types::PgType;
use std::borrow::Cow;
use std::time::Instant;
use tiberius::ColumnData;
use tiberius::time::{Date, DateTime, DateTime2, Time};
use tokio::sync::mpsc;

#[tokio::main]
async fn main() {
    let n: i64 = std::env::args()
        .nth(1)
        .map(|s| s.parse().unwrap())
        .unwrap_or(1_000_000);
    let target = PgEndpoint::from_conn_str(&std::env::var("MSSQLPG_TEST_PG_URL").unwrap()).unwrap();
    let mut client = target.connect().await.unwrap();
    checkpoint::ensure_tables(&client).await.unwrap();
    client
        .batch_execute(
            "DROP TABLE IF EXISTS bench_votes; CREATE UNLOGGED TABLE bench_votes (id int NOT NULL, post_id int NOT NULL, \
             user_id int, bounty int, vote_type smallint NOT NULL, created timestamp(3) NOT NULL);
             DROP TABLE IF EXISTS bench_comments; CREATE UNLOGGED TABLE bench_comments (id int NOT NULL, post_id int NOT NULL, \
             score int, text varchar(700) NOT NULL, created timestamp(6) NOT NULL, user_id int)",
        )
        .await
        .unwrap();

    for (table, types) in [
        (
            "bench_votes",
            vec![
                PgType::Int4,
                PgType::Int4,
                PgType::Int4,
                PgType::Int4,
                PgType::Int2,
                PgType::Timestamp { precision: 3 },
            ],
        ),
        (
            "bench_comments",
            vec![
                PgType::Int4,
                PgType::Int4,
                PgType::Int4,
                PgType::Varchar { length: 700 },
                PgType::Timestamp { precision: 6 },
                PgType::Int4,
            ],
        ),
    ] {
        let started = Instant::now();
        let (tx, mut rx) = mpsc::channel(CHANNEL_DEPTH);
        let comments = table == "bench_comments";
        let reader = tokio::spawn(async move {
            let enc = RowEncoder::new(types);
            let mut buf = BytesMut::with_capacity(FLUSH_BYTES + 65536);
            let chunk = 50_000;
            let mut in_chunk = 0u64;
            let text =
                "This is a typical comment of about a hundred characters, give or take a few words here.";
            for id in 1..=n {
                let i = id as i32;
                let row: [ColumnData<'static>; 6] = if comments {
                    [
                        ColumnData::I32(Some(i)),
                        ColumnData::I32(Some(i / 3)),
                        ColumnData::I32(Some(i % 17)),
                        ColumnData::String(Some(Cow::Owned(text.to_string()))),
                        ColumnData::DateTime2(Some(DateTime2::new(
                            Date::new(733_000 + (id % 3000) as u32),
                            Time::new(id as u64 * 1_234_567 % 863_999_999_999, 7),
                        ))),
                        if id % 10 == 0 {
                            ColumnData::I32(None)
                        } else {
                            ColumnData::I32(Some(i % 100_000))
                        },
                    ]
                } else {
                    [
                        ColumnData::I32(Some(i)),
                        ColumnData::I32(Some(i / 3)),
                        if id % 2 == 0 {
                            ColumnData::I32(None)
                        } else {
                            ColumnData::I32(Some(i % 100_000))
                        },
                        if id % 50 == 0 {
                            ColumnData::I32(Some(50))
                        } else {
                            ColumnData::I32(None)
                        },
                        ColumnData::U8(Some((id % 15) as u8)),
                        ColumnData::DateTime(Some(DateTime::new(
                            40_000 + (id % 3000) as i32,
                            (id % 25_920_000) as u32,
                        ))),
                    ]
                };
                enc.encode_row(&mut buf, row.iter()).unwrap();
                in_chunk += 1;
                if buf.len() >= FLUSH_BYTES {
                    tx.send(Msg::Data(buf.split().freeze())).await.unwrap();
                }
                if in_chunk == chunk || id == n {
                    if !buf.is_empty() {
                        tx.send(Msg::Data(buf.split().freeze())).await.unwrap();
                    }
                    let end = ChunkEnd {
                        last_key: Some(vec![KeyValue::Int(id)]),
                        rows: in_chunk,
                        done: id == n,
                        digest: None,
                    };
                    tx.send(Msg::ChunkEnd(end)).await.unwrap();
                    in_chunk = 0;
                }
            }
        });
        let copy_sql = format!("COPY {table} FROM STDIN (FORMAT binary)");
        let task = format!("bench.{table}");
        let fence = mssql_pg_worker::fence::claim_pg(
            &client,
            &mssql_pg_worker::copy::checkpoint::fences_table(),
            "bench",
            &task,
        )
        .await
        .unwrap();
        let ctx = WriterCtx {
            migration: "bench",
            task: &task,
            fence: &fence,
            table,
            copy_sql: &copy_sql,
            committed_rows: 0,
            committed_digest: None,
            fail_after_chunks: None,
            merge_sql: None,
            stall: None,
            committed: None,
        };
        let stats = write_chunks(&mut client, &mut rx, &ctx).await.unwrap();
        reader.await.unwrap();
        let secs = started.elapsed().as_secs_f64();
        println!(
            "{table}: {} rows, {:.1} MiB, {} chunks in {secs:.2}s = {:.0} rows/s, {:.1} MiB/s; peak RSS {:?} KiB",
            stats.rows,
            stats.bytes as f64 / 1048576.0,
            stats.chunks,
            stats.rows as f64 / secs,
            stats.bytes as f64 / 1048576.0 / secs,
            mssql_pg_worker::metrics::peak_memory_bytes().map(|b| b / 1024)
        );
    }
}
