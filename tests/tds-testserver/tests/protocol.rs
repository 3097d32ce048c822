//! The wire layer end to end through tiberius 0.13 (and a raw client where tiberius cannot
//! show the detail), against a scripted backend so every case is independent of the engine.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::atomic::Ordering;

use common::expect::expected_column_data;
use common::raw::{RawClient, all_headers};
use common::scripted::{every_type, mixed_row};
use common::{Proxy, connect, contains, scripted_server, server_error, try_connect, utf16};
use futures_util::TryStreamExt;
use tds_testserver::engine::{SqlType, Value};
use tiberius::{ColumnData, TokenRow, Uuid};

#[tokio::test]
async fn login_succeeds_and_the_session_answers() {
    let (server, _) = scripted_server(32767);
    let mut client = connect(server.addr()).await;
    let row = client
        .simple_query("@@TRANCOUNT")
        .await
        .unwrap()
        .into_row()
        .await
        .unwrap()
        .unwrap();
    assert_eq!(row.get::<i32, _>(0), Some(0));
}

#[tokio::test]
async fn wrong_password_is_error_18456_and_the_server_closes() {
    let (server, _) = scripted_server(32767);
    let err = server_error(try_connect(server.addr(), "wrong", None).await.err().unwrap());
    assert_eq!((err.code(), err.class()), (18456, 14));
    assert_eq!(err.message(), "Login failed for user 'sa'.");

    let (mut raw, reply) = RawClient::login(server.addr(), "also wrong");
    assert_eq!(reply[0], 0xAA, "the reply starts with the ERROR token");
    assert_eq!(&reply[3..7], &18456i32.to_le_bytes());
    assert!(
        reply.ends_with(&[0xFD, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
        "DONE(ERROR) ends the reply"
    );
    assert!(
        raw.closed(),
        "the server closes the connection after a failed login"
    );
}

#[tokio::test]
async fn unknown_database_fails_the_login_with_4060() {
    let (server, _) = scripted_server(32767);
    let mut config = common::client_config(server.addr(), common::PASSWORD, None);
    config.database("nope");
    let tcp = tokio::net::TcpStream::connect(server.addr()).await.unwrap();
    use tokio_util::compat::TokioAsyncWriteCompatExt;
    let err = server_error(
        tiberius::Client::connect(config, tcp.compat_write())
            .await
            .err()
            .unwrap(),
    );
    assert_eq!(err.code(), 4060);
}

/// Lengths of the server's packets per message, and the concatenated payload of each message.
/// Per reply message: (status, length) of each packet, and the concatenated payload.
type Message = (Vec<(u8, usize)>, Vec<u8>);

fn messages(recorded: &[(u8, u8, usize, Vec<u8>)]) -> Vec<Message> {
    let mut out = Vec::new();
    let mut packets = Vec::new();
    let mut payload = Vec::new();
    for (_, status, len, p) in recorded {
        packets.push((*status, *len));
        payload.extend_from_slice(p);
        if status & 1 != 0 {
            out.push((std::mem::take(&mut packets), std::mem::take(&mut payload)));
        }
    }
    out
}

fn packet_size_envchange(size: &str) -> Vec<u8> {
    let mut v = vec![0x04, size.len() as u8];
    v.extend(utf16(size));
    v
}

#[tokio::test]
async fn packet_size_is_negotiated_and_replies_are_split_at_it() {
    let (server, _) = scripted_server(16384);
    let proxy = Proxy::start(server.addr());
    let mut client = try_connect(proxy.addr, common::PASSWORD, Some(32767))
        .await
        .unwrap();
    let rows = client
        .simple_query("ROWS 5000")
        .await
        .unwrap()
        .into_first_result()
        .await
        .unwrap();
    assert_eq!(rows.len(), 5000);
    for (i, row) in rows.iter().enumerate().step_by(997) {
        assert_eq!(row.get::<i32, _>(0), Some(i as i32));
        assert_eq!(row.get::<&str, _>(1), Some(format!("customer {i}").as_str()));
    }
    // A request larger than a packet: the client must split it at the granted size too.
    let long = format!("ROWS 2{}", " ".repeat(20_000));
    assert_eq!(
        client
            .simple_query(long)
            .await
            .unwrap()
            .into_first_result()
            .await
            .unwrap()
            .len(),
        2
    );

    let server_msgs = messages(&proxy.from_server.lock().unwrap());
    // [prelogin, login, ROWS 5000, ROWS 2]
    assert_eq!(server_msgs.len(), 4);
    assert!(
        contains(&server_msgs[1].1, &packet_size_envchange("16384")),
        "ENVCHANGE 4 grants 16384"
    );
    let (packets, _) = &server_msgs[2];
    assert!(packets.len() > 10, "a 5000-row result spans many packets");
    for (status, len) in &packets[..packets.len() - 1] {
        assert_eq!((*status, *len), (0, 16384), "middle packets are full and not EOM");
    }
    let (last_status, last_len) = packets[packets.len() - 1];
    assert_eq!(last_status, 1);
    assert!(last_len <= 16384);
    let client_packets = proxy.from_client.lock().unwrap();
    assert!(client_packets.iter().all(|p| p.2 <= 16384));
    assert!(
        client_packets.iter().filter(|p| p.0 == 0x01).count() >= 4,
        "the long batch took several packets"
    );
}

#[tokio::test]
async fn default_packet_size_is_4096() {
    let (server, _) = scripted_server(32767);
    let proxy = Proxy::start(server.addr());
    let mut client = try_connect(proxy.addr, common::PASSWORD, None).await.unwrap();
    assert_eq!(
        client
            .simple_query("ROWS 300")
            .await
            .unwrap()
            .into_first_result()
            .await
            .unwrap()
            .len(),
        300
    );
    let msgs = messages(&proxy.from_server.lock().unwrap());
    assert!(contains(&msgs[1].1, &packet_size_envchange("4096")));
    let (packets, _) = &msgs[2];
    assert!(packets.len() > 2);
    assert!(
        packets[..packets.len() - 1]
            .iter()
            .all(|&(s, l)| s == 0 && l == 4096)
    );
}

#[tokio::test]
async fn errors_leave_the_connection_usable() {
    let (server, _) = scripted_server(32767);
    let mut client = connect(server.addr()).await;
    let err = server_error(client.simple_query("FAIL 208").await.err().unwrap());
    assert_eq!(
        (err.code(), err.class(), err.message()),
        (208, 16, "Scripted failure 208.")
    );
    assert_eq!(err.server(), "tds-testserver");

    // An error after rows: the rows arrive, the error ends the stream.
    let err = client
        .simple_query("ROWS_THEN_FAIL")
        .await
        .unwrap()
        .into_results()
        .await
        .err()
        .unwrap();
    assert_eq!(server_error(err).code(), 547);

    // Through RPC as well.
    let err = client.query("FAIL 2627", &[]).await.err().unwrap();
    assert_eq!(server_error(err).code(), 2627);

    let rows = client
        .simple_query("ROWS 3")
        .await
        .unwrap()
        .into_first_result()
        .await
        .unwrap();
    assert_eq!(rows.len(), 3);
    let rows = client
        .query("ROWS 4", &[])
        .await
        .unwrap()
        .into_first_result()
        .await
        .unwrap();
    assert_eq!(rows.len(), 4);
}

#[tokio::test]
async fn a_value_the_column_cannot_carry_is_an_error_not_a_corrupt_row() {
    let (server, _) = scripted_server(32767);
    let mut client = connect(server.addr()).await;
    let err = client
        .simple_query("BAD_VALUE")
        .await
        .unwrap()
        .into_results()
        .await
        .err()
        .unwrap();
    assert_eq!(server_error(err).code(), 50000);
    assert_eq!(
        client
            .simple_query("ROWS 1")
            .await
            .unwrap()
            .into_first_result()
            .await
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test]
async fn done_more_and_row_counts() {
    let (server, _) = scripted_server(32767);
    let mut client = connect(server.addr()).await;
    // Batch: every statement's DONE counts; DONE without COUNT reports 0.
    let res = client.execute("MULTI", &[]).await.unwrap();
    assert_eq!(res.rows_affected(), &[3, 2, 0, 0]);

    // The exact tokens: MORE on all but the last DONE, COUNT where a count applies.
    let (mut raw, _) = RawClient::login(server.addr(), common::PASSWORD);
    let reply = raw.batch("MULTI");
    let done = |status: u16, cmd: u16, rows: u64| {
        let mut v = vec![0xFD];
        v.extend(status.to_le_bytes());
        v.extend(cmd.to_le_bytes());
        v.extend(rows.to_le_bytes());
        v
    };
    let mut expect = done(0x11, 0xC3, 3);
    expect.extend(done(0x11, 0xC5, 2));
    expect.extend(done(0x01, 0x00, 0));
    assert!(reply.starts_with(&expect), "{reply:02X?}");
    assert!(reply.ends_with(&done(0x10, 0xC4, 0)));
    assert_eq!(reply[expect.len()], 0xAB, "the INFO token follows");
}

#[tokio::test]
async fn rpc_reply_has_doneinproc_returnstatus_doneproc() {
    let (server, _) = scripted_server(32767);
    let proxy = Proxy::start(server.addr());
    let mut client = try_connect(proxy.addr, common::PASSWORD, None).await.unwrap();
    let row = client
        .query("SELECT @P1", &[&5i32])
        .await
        .unwrap()
        .into_row()
        .await
        .unwrap()
        .unwrap();
    assert_eq!(row.get::<i32, _>(0), Some(5));
    let msgs = messages(&proxy.from_server.lock().unwrap());
    let reply = &msgs.last().unwrap().1;
    let mut tail = vec![0xFF, 0x11, 0x00, 0xC1, 0x00, 1, 0, 0, 0, 0, 0, 0, 0];
    tail.extend([0x79, 0, 0, 0, 0]);
    tail.extend([0xFE, 0, 0, 0xE0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    assert!(reply.ends_with(&tail), "{reply:02X?}");
}

#[tokio::test]
async fn every_type_decodes_in_tiberius_as_sent() {
    let (server, _) = scripted_server(32767);
    let mut client = connect(server.addr()).await;
    let rows = client
        .simple_query("TYPES")
        .await
        .unwrap()
        .into_first_result()
        .await
        .unwrap();
    assert_eq!(rows.len(), 2);
    let cases = every_type();
    for (row_index, row) in rows.into_iter().enumerate() {
        let got: Vec<ColumnData<'static>> = row.into_iter().collect();
        assert_eq!(got.len(), cases.len());
        for ((meta, value), got) in cases.iter().zip(got) {
            let value = if row_index == 0 {
                value.clone()
            } else {
                Value::Null
            };
            // NOT NULL fixed-length columns cannot hold NULL; the row is sent as NBCROW anyway.
            let want = expected_column_data(meta.ty, &value);
            assert_eq!(got, want, "column {} row {row_index}", meta.name);
        }
    }
}

#[tokio::test]
async fn cancelling_mid_result_stops_the_stream_and_keeps_the_connection() {
    let (server, shared) = scripted_server(32767);
    let mut client = connect(server.addr()).await;
    {
        // Far more than socket buffers hold, so the server is still producing when the
        // attention arrives.
        let mut stream = client
            .simple_query("ROWS 100000000")
            .await
            .unwrap()
            .into_row_stream();
        for i in 0..1000 {
            let row = stream.try_next().await.unwrap().unwrap();
            assert_eq!(row.get::<i32, _>(0), Some(i));
        }
    }
    client.cancel_query().await.unwrap();
    assert_eq!(
        shared.cancelled.load(Ordering::SeqCst),
        1,
        "the backend saw the cancel"
    );
    let rows = client
        .simple_query("ROWS 3")
        .await
        .unwrap()
        .into_first_result()
        .await
        .unwrap();
    assert_eq!(rows.len(), 3);
    assert_eq!(rows[2].get::<i32, _>(0), Some(2));
}

#[tokio::test]
async fn an_attention_after_the_reply_gets_its_own_acknowledgement() {
    let (server, _) = scripted_server(32767);
    let (mut raw, _) = RawClient::login(server.addr(), common::PASSWORD);
    raw.batch("ROWS 1");
    raw.send(0x06, &[]);
    let ack = raw.read_message().unwrap();
    assert_eq!(ack, [0xFD, 0x20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    let reply = raw.batch("@@TRANCOUNT");
    assert_eq!(reply[0], 0x81, "the next request is answered normally");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_concurrent_sessions() {
    let (server, _) = scripted_server(32767);
    let addr = server.addr();
    let tasks: Vec<_> = (0..8u64)
        .map(|t| {
            tokio::spawn(async move {
                let mut client = connect(addr).await;
                for round in 0..5u64 {
                    let n = 500 + t * 100 + round;
                    let rows = client
                        .simple_query(format!("ROWS {n}"))
                        .await
                        .unwrap()
                        .into_first_result()
                        .await
                        .unwrap();
                    assert_eq!(rows.len() as u64, n);
                    let last = rows.last().unwrap();
                    assert_eq!(last.get::<i64, _>(5), Some((n as i64 - 1) * 1_000_003));
                    let tag = format!("task {t} round {round}");
                    let row = client
                        .query("SELECT @P1, @P2", &[&(t as i64), &tag.as_str()])
                        .await
                        .unwrap()
                        .into_row()
                        .await
                        .unwrap()
                        .unwrap();
                    assert_eq!(row.get::<i64, _>(0), Some(t as i64));
                    assert_eq!(row.get::<&str, _>(1), Some(tag.as_str()));
                    assert!(client.simple_query("FAIL 208").await.is_err());
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
}

#[tokio::test]
async fn rpc_parameters_of_every_type_round_trip() {
    use chrono::{FixedOffset, NaiveDate, NaiveTime, TimeZone};
    let (server, shared) = scripted_server(32767);
    let mut client = connect(server.addr()).await;
    let long_text = "é".repeat(3000); // 6000 UTF-8 bytes: nvarchar(max), sent as PLP
    let big_blob = vec![0x5Au8; 9000]; // varbinary(max), PLP
    let guid = Uuid::parse_str("6F9619FF-8B86-D011-B42D-00C04FC964FF").unwrap();
    let dec = rust_decimal::Decimal::from_i128_with_scale(-12_345_678_901_234_567_890_123_456_789, 10);
    let date = NaiveDate::from_ymd_opt(9999, 12, 31).unwrap();
    let time = NaiveTime::from_hms_nano_opt(23, 59, 59, 999_999_900).unwrap();
    let dt2 = NaiveDate::from_ymd_opt(1, 1, 1)
        .unwrap()
        .and_hms_nano_opt(0, 0, 0, 100)
        .unwrap();
    let dto = FixedOffset::west_opt(14 * 3600)
        .unwrap()
        .with_ymd_and_hms(2024, 2, 29, 23, 30, 0)
        .unwrap();
    let none: Option<&str> = None;
    let none_i32: Option<i32> = None;
    let sql = "SELECT @P1, @P2, @P3, @P4, @P5, @P6, @P7, @P8, @P9, @P10, @P11, @P12, @P13, @P14, @P15, @P16, @P17, @P18, @P19, @P20";
    let row = client
        .query(
            sql,
            &[
                &255u8,
                &i16::MIN,
                &i32::MIN,
                &i64::MAX,
                &f32::MAX,
                &f64::MIN_POSITIVE,
                &true,
                &"ünï 😀",
                &long_text.as_str(),
                &none,
                &guid,
                &&[0u8, 1, 255][..],
                &big_blob.as_slice(),
                &dec,
                &date,
                &time,
                &dt2,
                &dto,
                &none_i32,
                &"",
            ],
        )
        .await
        .unwrap()
        .into_row()
        .await
        .unwrap()
        .unwrap();
    assert_eq!(row.get::<u8, _>(0), Some(255));
    assert_eq!(row.get::<i16, _>(1), Some(i16::MIN));
    assert_eq!(row.get::<i32, _>(2), Some(i32::MIN));
    assert_eq!(row.get::<i64, _>(3), Some(i64::MAX));
    assert_eq!(row.get::<f32, _>(4), Some(f32::MAX));
    assert_eq!(row.get::<f64, _>(5), Some(f64::MIN_POSITIVE));
    assert_eq!(row.get::<bool, _>(6), Some(true));
    assert_eq!(row.get::<&str, _>(7), Some("ünï 😀"));
    assert_eq!(row.get::<&str, _>(8), Some(long_text.as_str()));
    assert_eq!(row.get::<&str, _>(9), None);
    assert_eq!(row.get::<Uuid, _>(10), Some(guid));
    assert_eq!(row.get::<&[u8], _>(11), Some(&[0u8, 1, 255][..]));
    assert_eq!(row.get::<&[u8], _>(12), Some(big_blob.as_slice()));
    assert_eq!(row.get::<rust_decimal::Decimal, _>(13), Some(dec));
    assert_eq!(row.get::<NaiveDate, _>(14), Some(date));
    assert_eq!(row.get::<NaiveTime, _>(15), Some(time));
    assert_eq!(row.get::<chrono::NaiveDateTime, _>(16), Some(dt2));
    assert_eq!(row.get::<chrono::DateTime<FixedOffset>, _>(17), Some(dto));
    assert_eq!(row.get::<i32, _>(18), None);
    assert_eq!(row.get::<&str, _>(19), Some(""));

    let params = shared.rpc_params.lock().unwrap();
    let tys: Vec<SqlType> = params.iter().map(|p| p.ty).collect();
    assert_eq!(
        tys,
        vec![
            SqlType::TinyInt,
            SqlType::SmallInt,
            SqlType::Int,
            SqlType::BigInt,
            SqlType::Real,
            SqlType::Float,
            SqlType::Bit,
            SqlType::NVarChar { len: Some(4000) },
            SqlType::NVarChar { len: None },
            SqlType::NVarChar { len: Some(4000) },
            SqlType::UniqueIdentifier,
            SqlType::VarBinary { len: Some(8000) },
            SqlType::VarBinary { len: None },
            SqlType::Numeric {
                precision: 29,
                scale: 10
            },
            SqlType::Date,
            SqlType::Time { scale: 7 },
            SqlType::DateTime2 { scale: 7 },
            SqlType::DateTimeOffset { scale: 7 },
            SqlType::Int,
            SqlType::NVarChar { len: Some(4000) },
        ]
    );
    assert_eq!(params[0].name, "@P1");
    assert_eq!(params[9].value, Value::Null);
    // datetimeoffset arrives as UTC plus the offset.
    assert!(matches!(
        params[17].value,
        Value::DateTimeOffset {
            offset_minutes: -840,
            ..
        }
    ));
}

#[tokio::test]
async fn transactions_through_sql_and_the_transaction_manager() {
    let (server, _) = scripted_server(32767);
    let proxy = Proxy::start(server.addr());
    let mut client = try_connect(proxy.addr, common::PASSWORD, None).await.unwrap();

    client
        .simple_query("BEGIN TRAN")
        .await
        .unwrap()
        .into_results()
        .await
        .unwrap();
    assert_eq!(trancount(&mut client).await, 1);
    client
        .simple_query("COMMIT")
        .await
        .unwrap()
        .into_results()
        .await
        .unwrap();
    assert_eq!(trancount(&mut client).await, 0);
    {
        // While the transaction was open the client sent its descriptor (1) in ALL_HEADERS.
        let sent = proxy.from_client.lock().unwrap();
        let batches: Vec<&Vec<u8>> = sent.iter().filter(|p| p.0 == 0x01).map(|p| &p.3).collect();
        let desc = |p: &Vec<u8>| u64::from_le_bytes(p[10..18].try_into().unwrap());
        assert_eq!(
            batches.iter().map(|p| desc(p)).collect::<Vec<_>>(),
            vec![0, 1, 1, 0]
        );
    }
    let err = client.simple_query("COMMIT").await.err().unwrap();
    assert_eq!(server_error(err).code(), 3902);

    client.begin_transaction().await.unwrap();
    assert_eq!(trancount(&mut client).await, 1);
    client.save_transaction("sp1").await.unwrap();
    client.commit_transaction().await.unwrap();
    assert_eq!(trancount(&mut client).await, 0);
    client.begin_transaction().await.unwrap();
    client.rollback_transaction().await.unwrap();
    assert_eq!(trancount(&mut client).await, 0);
    let tm_requests = proxy
        .from_client
        .lock()
        .unwrap()
        .iter()
        .filter(|p| p.0 == 0x0E)
        .count();
    assert_eq!(tm_requests, 5);
}

async fn trancount(c: &mut common::TdsClient) -> i32 {
    let row = c
        .simple_query("@@TRANCOUNT")
        .await
        .unwrap()
        .into_row()
        .await
        .unwrap()
        .unwrap();
    row.get::<i32, _>(0).unwrap()
}

#[tokio::test]
async fn pytds_style_commit_and_begin_sends_both_envchanges() {
    let (server, _) = scripted_server(32767);
    let (mut raw, _) = RawClient::login(server.addr(), common::PASSWORD);
    let mut begin = all_headers();
    begin.extend([5, 0, 0, 0]);
    raw.send(0x0E, &begin);
    let reply = raw.read_message().unwrap();
    assert!(
        reply.starts_with(&[0xE3, 11, 0, 8, 8, 1, 0, 0, 0, 0, 0, 0, 0, 0]),
        "{reply:02X?}"
    );
    let mut commit = all_headers();
    commit.extend([7, 0, 0, 1]);
    raw.send(0x0E, &commit);
    let reply = raw.read_message().unwrap();
    let mut want = vec![0xE3, 11, 0, 9, 0, 8, 1, 0, 0, 0, 0, 0, 0, 0];
    want.extend([0xE3, 11, 0, 8, 8, 2, 0, 0, 0, 0, 0, 0, 0]);
    assert!(reply.starts_with(&want), "{reply:02X?}");
}

#[tokio::test]
async fn bulk_load_of_every_type_arrives_as_sent() {
    let (server, shared) = scripted_server(32767);
    let mut client = connect(server.addr()).await;
    let cases: Vec<_> = every_type()
        .into_iter()
        .filter(|(c, _)| c.updateable && !matches!(c.ty, SqlType::Image | SqlType::SqlVariant))
        .collect();
    let full: Vec<ColumnData<'static>> = cases.iter().map(|(c, v)| expected_column_data(c.ty, v)).collect();
    // NULL wherever the column allows it.
    let nulls: Vec<ColumnData<'static>> = cases
        .iter()
        .map(|(c, v)| expected_column_data(c.ty, if c.nullable { &Value::Null } else { v }))
        .collect();
    let mut req = client.bulk_insert("[dbo].[every_type]").await.unwrap();
    for values in [&full, &nulls, &full] {
        let mut row = TokenRow::new();
        for v in values {
            row.push(v.clone());
        }
        req.send(row).await.unwrap();
    }
    let res = req.finalize().await.unwrap();
    assert_eq!(res.rows_affected(), &[3]);

    let columns = shared.bulk_columns.lock().unwrap().clone();
    let names: Vec<&str> = columns.iter().map(|c| c.name.as_str()).collect();
    let want_names: Vec<&str> = cases.iter().map(|(c, _)| c.name.as_str()).collect();
    assert_eq!(names, want_names, "identity and rowversion columns are not sent");
    for (got, (want, _)) in columns.iter().zip(&cases) {
        assert_eq!(got.ty, want.ty, "{}", want.name);
        assert_eq!(got.nullable, want.nullable, "{}", want.name);
    }
    let rows = shared.bulk_rows.lock().unwrap().clone();
    assert_eq!(rows.len(), 3);
    for (i, (meta, value)) in cases.iter().enumerate() {
        let want_null = if meta.nullable { Value::Null } else { value.clone() };
        // Money goes through f64 in tiberius; everything else must be exact.
        assert_eq!(rows[0][i], *value, "{} (full row)", meta.name);
        assert_eq!(rows[1][i], want_null, "{} (null row)", meta.name);
        assert_eq!(rows[2][i], *value, "{}", meta.name);
    }
    assert_eq!(shared.bulk_finished.load(Ordering::SeqCst), 1);
    // The session is usable after the load.
    assert_eq!(
        client
            .simple_query("ROWS 2")
            .await
            .unwrap()
            .into_first_result()
            .await
            .unwrap()
            .len(),
        2
    );
}

#[tokio::test]
async fn large_bulk_load_streams_in() {
    let (server, shared) = scripted_server(32767);
    let mut client = connect(server.addr()).await;
    let mut req = client.bulk_insert("[dbo].[every_type]").await.unwrap();
    let cases: Vec<_> = every_type()
        .into_iter()
        .filter(|(c, _)| c.updateable && !matches!(c.ty, SqlType::Image | SqlType::SqlVariant))
        .collect();
    let n = 20_000u64;
    for i in 0..n {
        let mut row = TokenRow::new();
        for (c, v) in &cases {
            // Small values keep the message at a few MB; the row count is what matters here.
            let v = match (c.ty, v) {
                (SqlType::Int, _) => Value::Int(i as i32),
                (SqlType::NVarChar { len: None }, _) => Value::String(format!("row {i}")),
                (SqlType::VarBinary { len: None }, _) => Value::Binary(i.to_le_bytes().to_vec()),
                (_, v) => v.clone(),
            };
            row.push(expected_column_data(c.ty, &v));
        }
        req.send(row).await.unwrap();
    }
    assert_eq!(req.finalize().await.unwrap().rows_affected(), &[n]);
    let rows = shared.bulk_rows.lock().unwrap();
    let int_col = cases.iter().position(|(c, _)| c.ty == SqlType::Int).unwrap();
    assert_eq!(rows.len(), 10_000, "the scripted backend keeps the first 10000");
    assert!(
        rows.iter()
            .enumerate()
            .all(|(i, r)| r[int_col] == Value::Int(i as i32))
    );
}

#[test]
fn mixed_rows_are_deterministic() {
    assert_eq!(mixed_row(3), mixed_row(3));
}
