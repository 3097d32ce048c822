//! `--bulk-insert-dir` over the wire: BULK INSERT reads files under the directory the server
//! was started with and nothing else (SQL Server's error 4861).
#![allow(clippy::unwrap_used)]

mod common;

use common::{connect, server_error};
use tds_testserver::{ServerConfig, TestServer};

#[tokio::test]
async fn bulk_insert_reads_files_under_the_configured_directory() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("rows.tsv"), "1\tone\n2\ttwo\n").unwrap();
    let server = TestServer::start(ServerConfig {
        bulk_insert_dir: Some(dir.path().to_path_buf()),
        ..common::config(32767)
    })
    .unwrap();
    let mut c = connect(server.addr()).await;
    c.simple_query("CREATE TABLE t (id int, v nvarchar(10))")
        .await
        .unwrap()
        .into_results()
        .await
        .unwrap();
    let path = dir.path().join("rows.tsv");
    let sql = format!(
        "BULK INSERT t FROM '{}' WITH (ROWTERMINATOR = '0x0a')",
        path.display()
    );
    c.simple_query(sql).await.unwrap().into_results().await.unwrap();
    let n = c
        .simple_query("SELECT COUNT(*) FROM t WHERE v IN ('one', 'two')")
        .await
        .unwrap()
        .into_row()
        .await
        .unwrap()
        .unwrap()
        .get::<i32, _>(0);
    assert_eq!(n, Some(2));
    let outside = c.simple_query("BULK INSERT t FROM '/etc/hostname'").await;
    let e = match outside {
        Err(e) => server_error(e),
        Ok(s) => server_error(s.into_results().await.unwrap_err()),
    };
    assert_eq!(e.code(), 4861);

    // Without the flag no file can be read.
    let plain = TestServer::start(common::config(32767)).unwrap();
    let mut c = connect(plain.addr()).await;
    c.simple_query("CREATE TABLE t (id int, v nvarchar(10))")
        .await
        .unwrap()
        .into_results()
        .await
        .unwrap();
    let r = c
        .simple_query(format!("BULK INSERT t FROM '{}'", path.display()))
        .await;
    let e = match r {
        Err(e) => server_error(e),
        Ok(s) => server_error(s.into_results().await.unwrap_err()),
    };
    assert_eq!(e.code(), 4861);
}
