//! The SQL Server reader's checkpoint keys: each chunk ends with the key of its last row, and so
//! does the task's last (partial) chunk, for integer, composite text and GUID/date keys. The
//! reader keeps a row's key undecoded until it knows the row ends a chunk or the stream
//! (`RawRow::keep`), so this is where a wrong or stale key would show.
#![allow(clippy::unwrap_used)]

mod common;

use common::{ms_exec, start_tds_server};
use mssql_pg_worker::chunk_loop::{ChunkEnd, Msg};
use mssql_pg_worker::copy::checkpoint::KeyValue;
use mssql_pg_worker::copy::chunk::ChunkLimit;
use mssql_pg_worker::mssql::introspect::introspect;
use mssql_pg_worker::mssql::read::read_task;
use mssql_pg_worker::options::Options;
use mssql_pg_worker::plan::mssql_to_pg::build_plan;
use tokio::sync::mpsc;

/// The chunk ends `read_task` sends for `table`, resuming after `after`, cut at `chunk_rows`.
async fn chunk_ends(
    source: &mssql_pg_worker::mssql::connect::MssqlEndpoint,
    table: &str,
    after: Option<Vec<KeyValue>>,
    chunk_rows: u64,
) -> Vec<ChunkEnd> {
    chunks(source, table, after, ChunkLimit::rows(chunk_rows))
        .await
        .into_iter()
        .map(|(end, _)| end)
        .collect()
}

/// Each chunk `read_task` sends for `table` cut at `limit`: its end and its COPY data's bytes.
async fn chunks(
    source: &mssql_pg_worker::mssql::connect::MssqlEndpoint,
    table: &str,
    after: Option<Vec<KeyValue>>,
    limit: ChunkLimit,
) -> Vec<(ChunkEnd, usize)> {
    let mut client = source.connect().await.unwrap();
    let tables = introspect(&mut client, "dbo").await.unwrap();
    let plan = build_plan(
        tables,
        &Options::default(),
        mssql_pg_worker::pg::expr::translate_computed,
    )
    .unwrap();
    let index = plan.tables.iter().position(|t| t.source.name == table).unwrap();
    let task = plan.tasks.iter().find(|t| t.table == index).unwrap().clone();
    let (tx, mut rx) = mpsc::channel(1024);
    let t = plan.tables[index].clone();
    let reader = tokio::spawn(async move {
        read_task(&mut client, &t, &task, after.as_deref(), limit, false, tx)
            .await
            .unwrap()
    });
    let mut ends = Vec::new();
    let mut bytes = 0;
    while let Some(msg) = rx.recv().await {
        match msg {
            Msg::Data(data) => bytes += data.len(),
            Msg::ChunkEnd(end) => ends.push((end, std::mem::take(&mut bytes))),
        }
    }
    reader.await.unwrap();
    ends
}

fn summary(ends: &[ChunkEnd]) -> Vec<(u64, bool, Option<Vec<KeyValue>>)> {
    ends.iter()
        .map(|e| (e.rows, e.done, e.last_key.clone()))
        .collect()
}

#[tokio::test]
async fn every_chunk_ends_with_the_key_of_its_last_row() {
    let (_server, source) = start_tds_server();
    let mut client = source.connect().await.unwrap();
    ms_exec(
        &mut client,
        "CREATE TABLE dbo.ByInt (Id bigint NOT NULL PRIMARY KEY, V nvarchar(20) NULL)",
    )
    .await;
    ms_exec(
        &mut client,
        "CREATE TABLE dbo.ByText (Region nvarchar(10) NOT NULL, Code varchar(10) NOT NULL, V int NULL,
         CONSTRAINT PK_ByText PRIMARY KEY (Region, Code))",
    )
    .await;
    ms_exec(
        &mut client,
        "CREATE TABLE dbo.ByGuidDate (G uniqueidentifier NOT NULL, D date NOT NULL, V int NULL,
         CONSTRAINT PK_ByGuidDate PRIMARY KEY (G, D))",
    )
    .await;
    for id in 1..=23 {
        ms_exec(
            &mut client,
            &format!("INSERT INTO dbo.ByInt VALUES ({}, N'v{id}')", id * 10),
        )
        .await;
        let region = if id <= 12 { "nörd" } else { "süd" };
        ms_exec(
            &mut client,
            &format!("INSERT INTO dbo.ByText VALUES (N'{region}', 'c{id:02}', {id})"),
        )
        .await;
    }
    ms_exec(
        &mut client,
        "INSERT INTO dbo.ByGuidDate VALUES
         ('6F9619FF-8B86-D011-B42D-00C04FC964FF', '2024-02-29', 1),
         ('6F9619FF-8B86-D011-B42D-00C04FC964FF', '2024-03-01', 2),
         ('00000000-0000-0000-0000-000000000001', '0001-01-01', 3)",
    )
    .await;
    drop(client);

    let int = |i: i64| Some(vec![KeyValue::Int(i)]);
    // 23 rows in chunks of 5: four full chunks, then the last 3 rows.
    assert_eq!(
        summary(&chunk_ends(&source, "ByInt", None, 5).await),
        vec![
            (5, false, int(50)),
            (5, false, int(100)),
            (5, false, int(150)),
            (5, false, int(200)),
            (3, true, int(230)),
        ]
    );
    // A chunk size dividing the rows: the last chunk is empty and keeps the last row's key.
    let ends = summary(&chunk_ends(&source, "ByInt", None, 23).await);
    assert_eq!(ends, vec![(23, false, int(230)), (0, true, int(230))]);
    // Resumed after a key: the rows after it, the last key the same.
    assert_eq!(
        summary(&chunk_ends(&source, "ByInt", int(200), 5).await),
        vec![(3, true, int(230))]
    );
    // Nothing after the key: no rows, the key it resumed after.
    assert_eq!(
        summary(&chunk_ends(&source, "ByInt", int(230), 5).await),
        vec![(0, true, int(230))]
    );

    let text = |r: &str, c: &str| Some(vec![KeyValue::Str(r.into()), KeyValue::Str(c.into())]);
    assert_eq!(
        summary(&chunk_ends(&source, "ByText", None, 10).await),
        vec![
            (10, false, text("nörd", "c10")),
            (10, false, text("süd", "c20")),
            (3, true, text("süd", "c23")),
        ]
    );

    // uniqueidentifier sorts by SQL Server's byte-group order, so the expected keys are the ones
    // the server returns in key order.
    let mut client = source.connect().await.unwrap();
    let ordered: Vec<Vec<KeyValue>> = tiberius::Query::new("SELECT G, D FROM dbo.ByGuidDate ORDER BY G, D")
        .query(&mut client)
        .await
        .unwrap()
        .into_first_result()
        .await
        .unwrap()
        .iter()
        .map(|r| {
            let g: tiberius::Uuid = r.get(0).unwrap();
            let d: chrono::NaiveDate = r.get(1).unwrap();
            vec![KeyValue::Uuid(g.to_string()), KeyValue::Date(d.to_string())]
        })
        .collect();
    assert_eq!(ordered.len(), 3);
    assert_eq!(
        summary(&chunk_ends(&source, "ByGuidDate", None, 2).await),
        vec![
            (2, false, Some(ordered[1].clone())),
            (1, true, Some(ordered[2].clone()))
        ]
    );
}

/// A chunk ends at the first row that brings its COPY data to the byte budget, or at the row
/// cap when that comes first; the budget is counted afresh in each chunk.
#[tokio::test]
async fn chunks_end_at_the_byte_budget_or_the_row_cap() {
    let (_server, source) = start_tds_server();
    let mut client = source.connect().await.unwrap();
    // Every row is 22 bytes of binary COPY: a field count (2), then length (4) + int (4) and
    // length (4) + bigint (8).
    ms_exec(
        &mut client,
        "CREATE TABLE dbo.Fixed (Id int NOT NULL PRIMARY KEY, A bigint NOT NULL)",
    )
    .await;
    for id in 1..=23 {
        ms_exec(
            &mut client,
            &format!("INSERT INTO dbo.Fixed VALUES ({id}, {})", id * 1000),
        )
        .await;
    }
    drop(client);
    let got = |c: Vec<(ChunkEnd, usize)>| -> Vec<(u64, usize, bool, Option<Vec<KeyValue>>)> {
        c.into_iter()
            .map(|(e, bytes)| (e.rows, bytes, e.done, e.last_key))
            .collect()
    };
    let int = |i: i64| Some(vec![KeyValue::Int(i)]);
    // 100 bytes: four rows are 88, the fifth reaches 110 and ends the chunk.
    assert_eq!(
        got(chunks(&source, "Fixed", None, ChunkLimit::bytes(100)).await),
        vec![
            (5, 110, false, int(5)),
            (5, 110, false, int(10)),
            (5, 110, false, int(15)),
            (5, 110, false, int(20)),
            (3, 66, true, int(23)),
        ]
    );
    // A budget of exactly four rows ends the chunk at the fourth.
    let ends = got(chunks(&source, "Fixed", None, ChunkLimit::bytes(88)).await);
    assert_eq!(ends.len(), 6, "{ends:?}");
    assert!(ends[..5].iter().all(|e| e.0 == 4 && e.1 == 88), "{ends:?}");
    // A row cap below the budget wins.
    let limit = ChunkLimit { rows: 3, bytes: 100 };
    let ends = got(chunks(&source, "Fixed", None, limit).await);
    assert_eq!(ends.len(), 8, "{ends:?}");
    assert_eq!(ends[0], (3, 66, false, int(3)));
    // One byte: a row per chunk, never an empty one before the end.
    let ends = got(chunks(&source, "Fixed", int(20), ChunkLimit::bytes(1)).await);
    assert_eq!(
        ends,
        vec![
            (1, 22, false, int(21)),
            (1, 22, false, int(22)),
            (1, 22, false, int(23)),
            (0, 0, true, int(23)),
        ]
    );
    // The default budget (64 MiB) holds the whole table in one chunk.
    let ends = got(chunks(&source, "Fixed", None, ChunkLimit::default()).await);
    assert_eq!(ends, vec![(23, 506, true, int(23))]);
}

/// A datetime key (1/300 s) comes back as a datetime2 that is not the stored value (.003 reads as
/// .0033333); resuming after it must start at the next row, neither repeating the row (as a
/// datetime2 comparison does from compatibility level 130) nor skipping one. smalldatetime alike.
#[tokio::test]
async fn resuming_after_a_datetime_key_neither_repeats_nor_skips_rows() {
    let (_server, source) = start_tds_server();
    let mut client = source.connect().await.unwrap();
    ms_exec(
        &mut client,
        "CREATE TABLE dbo.Ticks (At datetime NOT NULL PRIMARY KEY, V int NULL);
         CREATE TABLE dbo.Minutes (At smalldatetime NOT NULL PRIMARY KEY, V int NULL)",
    )
    .await;
    let ticks = [
        "2024-01-01T00:00:00.000",
        "2024-01-01T00:00:00.003",
        "2024-01-01T00:00:00.007",
        "2024-01-01T00:00:00.010",
        "2024-01-01T23:59:59.997",
    ];
    for (i, at) in ticks.iter().enumerate() {
        ms_exec(
            &mut client,
            &format!("INSERT INTO dbo.Ticks VALUES ('{at}', {i})"),
        )
        .await;
        ms_exec(
            &mut client,
            &format!("INSERT INTO dbo.Minutes VALUES (DATEADD(minute, {i}, '2024-01-01T10:00:00'), {i})"),
        )
        .await;
    }
    drop(client);
    for table in ["Ticks", "Minutes"] {
        // One row a chunk, each chunk resumed after the key the previous one ended with, as a
        // retried task does from its checkpoint.
        let mut after = None;
        let mut rows = 0;
        loop {
            let ends = chunk_ends(&source, table, after.clone(), 1).await;
            let first = &ends[0];
            rows += first.rows;
            if first.rows == 0 {
                break;
            }
            assert_ne!(
                after, first.last_key,
                "{table}: resumed at the row it resumed after"
            );
            after = first.last_key.clone();
            assert!(rows <= ticks.len() as u64, "{table}: rows repeat: {rows} read");
        }
        assert_eq!(rows, ticks.len() as u64, "{table}: every row once");
    }
}
