//! The writer commits each chunk with its checkpoint in one transaction: a failure after N chunks
//! and a resume from the checkpoint give every row exactly once; a reader dying mid-chunk leaves
//! nothing of that chunk behind.
#![allow(clippy::unwrap_used)]

mod common;

use bytes::BytesMut;
use mssql_pg_worker::chunk_loop::{ChunkEnd, Msg};
use mssql_pg_worker::copy::binary::RowEncoder;
use mssql_pg_worker::copy::checkpoint::{self, KeyValue};
use mssql_pg_worker::pg::load::{LoadError, WriterCtx, write_chunks};
use mssql_pg_worker::schema::mssql_to_pg_types::PgType;
use mssql_pg_worker::verify::RowHasher;
use std::borrow::Cow;
use tiberius::ColumnData;
use tokio::sync::mpsc;

const TOTAL: i32 = 1000;
const CHUNK: i32 = 100;

/// Plays the reader: rows `after+1..=TOTAL`, cut into chunks of CHUNK rows, in several buffers each.
fn spawn_reader(after: i32, tx: mpsc::Sender<Msg>, die_mid_chunk: bool) {
    tokio::spawn(async move {
        let enc = RowEncoder::new(vec![PgType::Int4, PgType::Text]);
        let mut buf = BytesMut::new();
        let mut in_chunk = 0;
        let mut hasher = RowHasher::for_types([PgType::Int4, PgType::Text].into_iter());
        let mut digest = 0u64;
        for id in after + 1..=TOTAL {
            let text = format!("row {id}");
            let row = [
                ColumnData::I32(Some(id)),
                ColumnData::String(Some(Cow::Owned(text))),
            ];
            let before = buf.len();
            enc.encode_row(&mut buf, row.iter()).unwrap();
            digest = digest.wrapping_add(hasher.hash(&buf[before..]));
            in_chunk += 1;
            if in_chunk % 30 == 0 && tx.send(Msg::Data(buf.split().freeze())).await.is_err() {
                return;
            }
            if die_mid_chunk && id == after + CHUNK + 50 {
                // The chunk's first buffers were sent; the reader now disappears.
                return;
            }
            if in_chunk == CHUNK || id == TOTAL {
                if !buf.is_empty() && tx.send(Msg::Data(buf.split().freeze())).await.is_err() {
                    return;
                }
                let end = ChunkEnd {
                    last_key: Some(vec![KeyValue::Int(i64::from(id))]),
                    rows: in_chunk as u64,
                    done: id == TOTAL,
                    digest: Some(std::mem::take(&mut digest)),
                };
                if tx.send(Msg::ChunkEnd(end)).await.is_err() {
                    return;
                }
                in_chunk = 0;
            }
        }
    });
}

async fn count(client: &tokio_postgres::Client, table: &str) -> (i64, i64) {
    let r = client
        .query_one(&format!("SELECT count(*), count(DISTINCT id) FROM {table}"), &[])
        .await
        .unwrap();
    (r.get(0), r.get(1))
}

#[tokio::test]
async fn failure_after_n_chunks_then_resume_is_exact() {
    let mut client = common::pg_connect().await;
    let schema = common::fresh_schema(&client, "load_resume").await;
    checkpoint::ensure_tables(&client).await.unwrap();
    let migration = "test/load_resume";
    // The task's claim, as a copy task makes it before its first chunk.
    let fence = mssql_pg_worker::fence::claim_pg(&client, &checkpoint::fences_table(), migration, "dbo.t")
        .await
        .unwrap();
    checkpoint::reset(&client, migration).await.unwrap();
    let table = format!("\"{schema}\".t");
    client
        .batch_execute(&format!("CREATE TABLE {table} (id int, v text)"))
        .await
        .unwrap();
    let copy_sql = format!("COPY {table} (id, v) FROM STDIN (FORMAT binary)");

    // Attempt 1: fails after 3 committed chunks.
    let (tx, mut rx) = mpsc::channel(4);
    spawn_reader(0, tx, false);
    let ctx = WriterCtx {
        migration,
        task: "dbo.t",
        fence: &fence,
        table: &table,
        copy_sql: &copy_sql,
        committed_rows: 0,
        committed_digest: Some(0),
        fail_after_chunks: Some(3),
        merge_sql: None,
        stall: None,
        committed: None,
    };
    let err = write_chunks(&mut client, &mut rx, &ctx).await.unwrap_err();
    assert!(matches!(err, LoadError::Injected(3)), "{err}");
    drop(rx);
    assert_eq!(count(&client, &table).await, (300, 300));
    let cp = checkpoint::load(&client, migration, "dbo.t")
        .await
        .unwrap()
        .unwrap();
    assert_eq!((cp.rows, cp.done), (300, false));
    assert_eq!(cp.last_key, Some(vec![KeyValue::Int(300)]));

    // Attempt 2: the reader dies in the middle of the 2nd chunk: that chunk must vanish.
    let (tx, mut rx) = mpsc::channel(4);
    spawn_reader(300, tx, true);
    let ctx = WriterCtx {
        committed_rows: cp.rows,
        committed_digest: cp.digest,
        fail_after_chunks: None,
        ..ctx
    };
    let err = write_chunks(&mut client, &mut rx, &ctx).await.unwrap_err();
    assert!(matches!(err, LoadError::ReaderGone), "{err}");
    assert_eq!(count(&client, &table).await, (400, 400));
    let cp = checkpoint::load(&client, migration, "dbo.t")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(cp.last_key, Some(vec![KeyValue::Int(400)]));

    // Attempt 3: resumes after key 400 and completes.
    let Some(KeyValue::Int(after)) = cp.last_key.as_ref().and_then(|k| k.first().cloned()) else {
        panic!()
    };
    let (tx, mut rx) = mpsc::channel(4);
    spawn_reader(after as i32, tx, false);
    let ctx = WriterCtx {
        committed_rows: cp.rows,
        committed_digest: cp.digest,
        ..ctx
    };
    let stats = write_chunks(&mut client, &mut rx, &ctx).await.unwrap();
    assert_eq!(stats.rows, 600);
    assert_eq!(count(&client, &table).await, (i64::from(TOTAL), i64::from(TOTAL)));
    let r = client
        .query_one(
            &format!("SELECT min(id), max(id), sum(id)::bigint FROM {table}"),
            &[],
        )
        .await
        .unwrap();
    assert_eq!(
        (r.get::<_, i32>(0), r.get::<_, i32>(1), r.get::<_, i64>(2)),
        (1, TOTAL, 500_500)
    );
    let cp = checkpoint::load(&client, migration, "dbo.t")
        .await
        .unwrap()
        .unwrap();
    assert_eq!((cp.rows, cp.done), (i64::from(TOTAL), true));
    // The verify digest carried from checkpoint to checkpoint across the three attempts counts
    // every committed row once: it is PostgreSQL's own digest of the table.
    let (rows, sum) =
        common::sql_digest(&client, &["id::int4".to_string(), "v::text".to_string()], &table).await;
    assert_eq!(rows, i64::from(TOTAL));
    assert_eq!(cp.digest, Some(sum));
}

#[tokio::test]
async fn upsert_inserts_new_updates_changed_and_leaves_identical_rows_alone() {
    let mut client = common::pg_connect().await;
    let schema = common::fresh_schema(&client, "load_upsert").await;
    checkpoint::ensure_tables(&client).await.unwrap();
    let migration = "test/load_upsert";
    // The task's claim, as a copy task makes it before its first chunk.
    let fence = mssql_pg_worker::fence::claim_pg(&client, &checkpoint::fences_table(), migration, "dbo.t")
        .await
        .unwrap();
    checkpoint::reset(&client, migration).await.unwrap();
    let table = format!("\"{schema}\".t");
    client
        .batch_execute(&format!(
            "CREATE TABLE {table} (id int PRIMARY KEY, v text);
             INSERT INTO {table} SELECT g, CASE WHEN g <= 250 THEN 'old' ELSE 'row ' || g END FROM generate_series(1, 500) g;
             CREATE TEMP TABLE _mssqlpg_stage (LIKE {table}) ON COMMIT DELETE ROWS"
        ))
        .await
        .unwrap();
    let xmin_before: String = client
        .query_one(&format!("SELECT xmin::text FROM {table} WHERE id = 300"), &[])
        .await
        .unwrap()
        .get(0);
    let merge = format!(
        "INSERT INTO {table} AS t (id, v) SELECT id, v FROM _mssqlpg_stage ON CONFLICT (id) DO UPDATE SET v = EXCLUDED.v \
         WHERE (t.v) IS DISTINCT FROM (EXCLUDED.v)"
    );
    let copy_sql = "COPY _mssqlpg_stage (id, v) FROM STDIN (FORMAT binary)".to_string();
    let (tx, mut rx) = mpsc::channel(4);
    spawn_reader(0, tx, false);
    let ctx = WriterCtx {
        migration,
        task: "dbo.t",
        fence: &fence,
        table: &table,
        copy_sql: &copy_sql,
        committed_rows: 0,
        committed_digest: None,
        fail_after_chunks: None,
        merge_sql: Some(&merge),
        stall: None,
        committed: None,
    };
    write_chunks(&mut client, &mut rx, &ctx).await.unwrap();
    assert_eq!(count(&client, &table).await, (i64::from(TOTAL), i64::from(TOTAL)));
    let wrong: i64 = client
        .query_one(
            &format!("SELECT count(*) FROM {table} WHERE v <> 'row ' || id"),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(wrong, 0);
    let xmin_after: String = client
        .query_one(&format!("SELECT xmin::text FROM {table} WHERE id = 300"), &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(xmin_before, xmin_after, "an identical row is not rewritten");
}
