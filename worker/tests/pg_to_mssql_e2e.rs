//! The PostgreSQL -> SQL Server direction end to end, against the real PostgreSQL and the TDS test
//! server (standing in for SQL Server): every type at its edges arrives as the exact SQL Server
//! value (read back through tiberius), the schema objects are there, identity continues after the
//! maximum, a large partitioned copy killed after N chunks resumes with nothing lost or
//! duplicated, upsert inserts and updates only what changed, and bad input gets clear errors.
#![allow(clippy::unwrap_used)]

mod common;

use chrono::{NaiveDate, NaiveDateTime, NaiveTime};
use mssql_pg_worker::engine::EngineExt as _;
use mssql_pg_worker::engine::Prepared;
use mssql_pg_worker::mssql::connect::{MssqlEndpoint, TdsClient};
use mssql_pg_worker::options::{Mode, PartitionOptions};
use mssql_pg_worker::pg_to_mssql::{PgToMssqlEngine, PgToMssqlError};
use mssql_pg_worker::pipeline::TaskReport;
use mssql_pg_worker::plan::pg_to_mssql::PgToMssqlPlan;
use mssql_pg_worker::verify::TableVerification;
use std::sync::Arc;
use tiberius::numeric::Numeric;

fn engine(target: &MssqlEndpoint, schema: &str, migration: &str, mode: Mode) -> Arc<PgToMssqlEngine> {
    common::pg_engine(target, schema, migration, mode)
}

type Outcome = (
    Prepared<PgToMssqlPlan>,
    Vec<TaskReport>,
    Vec<String>,
    Vec<TableVerification>,
);

async fn run(e: &Arc<PgToMssqlEngine>) -> Result<Outcome, PgToMssqlError> {
    let prepared = e.prepare().await?;
    let reports = e.copy_all(&prepared.plan).await?;
    let warnings = e.finalize(&prepared.plan).await?;
    let verification = e.verify(&prepared.plan).await?;
    Ok((prepared, reports, warnings, verification))
}

async fn pg_exec(sql: &str) {
    let pg = common::pg_connect().await;
    pg.batch_execute(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e:?}"));
}

async fn rows(ms: &mut TdsClient, sql: &str) -> Vec<tiberius::Row> {
    ms.simple_query(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .into_first_result()
        .await
        .unwrap()
}

async fn scalar_i64(ms: &mut TdsClient, sql: &str) -> i64 {
    let r = rows(ms, sql).await;
    let row = &r[0];
    row.try_get::<i64, _>(0)
        .ok()
        .flatten()
        .or_else(|| row.try_get::<i32, _>(0).ok().flatten().map(i64::from))
        .unwrap()
}

const TYPES_DDL: &str = "
CREATE TYPE {s}.mood AS ENUM ('sad', 'ok', 'happy');
CREATE TABLE {s}.all_types (
    id serial PRIMARY KEY,
    c_bool boolean, c_i2 smallint, c_i4 integer, c_i8 bigint, c_f4 real, c_f8 double precision,
    c_num numeric(38,10), c_unb numeric, c_money money,
    c_text text, c_vc varchar(20), c_ch char(5), c_bytea bytea,
    c_date date, c_time time, c_ts timestamp, c_tstz timestamptz, c_ts3 timestamp(3),
    c_uuid uuid, c_json json, c_jsonb jsonb, c_enum {s}.mood, c_inet inet, c_mac macaddr,
    c_arr int[], c_interval interval, c_range int4range);
INSERT INTO {s}.all_types (c_bool, c_i2, c_i4, c_i8, c_f4, c_f8, c_num, c_unb, c_money, c_text, c_vc, c_ch,
    c_bytea, c_date, c_time, c_ts, c_tstz, c_ts3, c_uuid, c_json, c_jsonb, c_enum, c_inet, c_mac, c_arr,
    c_interval, c_range) VALUES
 (true, 32767, 2147483647, 9223372036854775807, 3.4028235e38, 1.7976931348623157e308,
  9999999999999999999999999999.9999999999, 12345678901234567890.123456789, 922337203685477.57,
  'héllo 😀' || repeat('x', 5000), 'ünïcödé 日本 twenty', 'ab', '\\x00010203ff',
  '9999-12-31', '23:59:59.999999', '9999-12-31 23:59:59.999999', '2020-01-01 05:30:00.123456+05:30',
  '2020-02-29 12:00:00.123', '6f9619ff-8b86-d011-b42d-00c04fc964ff', '{\"a\": [1, 2]}', '{\"b\": 1, \"a\": \"x\"}',
  'happy', '192.168.0.1/24', '08:00:2b:01:02:03', '{1,2,NULL}', '1 year 2 months 3 days 04:05:06.5', '[1,10)'),
 (false, -32768, -2147483648, -9223372036854775808, -1.17549435e-38, -2.2250738585072014e-308,
  -9999999999999999999999999999.9999999999, -0.000000001, -922337203685477.58,
  '', '', 'a', '\\x', '0001-01-01', '00:00:00', '0001-01-01 00:00:00', '0001-01-01 00:00:00+00',
  '1970-01-01 00:00:00', '00000000-0000-0000-0000-000000000000', '[]', '{}', 'sad', '::1',
  'ff:ff:ff:ff:ff:ff', '{}', '-1 days -00:00:01', 'empty'),
 (NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
  NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
";

fn dt(s: &str) -> NaiveDateTime {
    NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S%.f").unwrap()
}

#[tokio::test]
async fn every_type_at_its_edges_arrives_exactly() {
    let (_server, target) = common::start_tds_server();
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "rev_types").await;
    pg_exec(&TYPES_DDL.replace("{s}", &format!("\"{schema}\""))).await;
    let e = engine(&target, &schema, "test/rev_types", Mode::DropRecreate);
    let (prepared, reports, warnings, verification) = run(&e).await.unwrap();
    assert_eq!(prepared.negotiated_packet_size, Some(32767));
    assert_eq!(reports.iter().map(|r| r.rows).sum::<u64>(), 3);
    assert!(
        verification.iter().all(|v| v.ok),
        "{verification:#?}\n{warnings:#?}"
    );
    assert!(
        prepared
            .plan
            .warnings
            .iter()
            .any(|w| w.contains("c_unb") && w.contains("decimal(38,9)")),
        "{:#?}",
        prepared.plan.warnings
    );

    let mut ms = target.connect().await.unwrap();
    // Declared SQL Server types.
    let types = rows(
        &mut ms,
        "SELECT c.name, t.name, c.max_length, c.precision, c.scale FROM sys.columns c \
         JOIN sys.types t ON t.user_type_id = c.user_type_id \
         WHERE c.object_id = OBJECT_ID(N'dbo.all_types') ORDER BY c.column_id",
    )
    .await;
    let decl: Vec<String> = types
        .iter()
        .map(|r| {
            format!(
                "{} {} {} {} {}",
                r.get::<&str, _>(0).unwrap(),
                r.get::<&str, _>(1).unwrap(),
                r.get::<i16, _>(2).unwrap(),
                r.get::<u8, _>(3).unwrap(),
                r.get::<u8, _>(4).unwrap()
            )
        })
        .collect();
    assert_eq!(
        decl,
        vec![
            "id int 4 10 0",
            "c_bool bit 1 1 0",
            "c_i2 smallint 2 5 0",
            "c_i4 int 4 10 0",
            "c_i8 bigint 8 19 0",
            "c_f4 real 4 24 0",
            "c_f8 float 8 53 0",
            "c_num decimal 17 38 10",
            "c_unb decimal 17 38 9",
            "c_money money 8 19 4",
            "c_text nvarchar -1 0 0",
            "c_vc nvarchar 40 0 0",
            "c_ch nchar 10 0 0",
            "c_bytea varbinary -1 0 0",
            "c_date date 3 10 0",
            "c_time time 5 15 6",
            "c_ts datetime2 8 26 6",
            "c_tstz datetimeoffset 10 33 6",
            "c_ts3 datetime2 7 23 3",
            "c_uuid uniqueidentifier 16 0 0",
            "c_json nvarchar -1 0 0",
            "c_jsonb nvarchar -1 0 0",
            "c_enum nvarchar 10 0 0",
            "c_inet varchar 43 0 0",
            "c_mac char 17 0 0",
            "c_arr nvarchar -1 0 0",
            "c_interval nvarchar 128 0 0",
            "c_range nvarchar -1 0 0",
        ]
    );

    let r = rows(&mut ms, "SELECT * FROM dbo.all_types ORDER BY id").await;
    assert_eq!(r.len(), 3);
    let max = &r[0];
    assert_eq!(max.get::<i32, _>("id"), Some(1));
    assert_eq!(max.get::<bool, _>("c_bool"), Some(true));
    assert_eq!(max.get::<i16, _>("c_i2"), Some(32767));
    assert_eq!(max.get::<i32, _>("c_i4"), Some(2147483647));
    assert_eq!(max.get::<i64, _>("c_i8"), Some(i64::MAX));
    assert_eq!(max.get::<f32, _>("c_f4"), Some(3.4028235e38));
    assert_eq!(max.get::<f64, _>("c_f8"), Some(1.7976931348623157e308));
    let n = max.get::<Numeric, _>("c_num").unwrap();
    assert_eq!(
        (n.value(), n.scale()),
        (99_999_999_999_999_999_999_999_999_999_999_999_999, 10)
    );
    let n = max.get::<Numeric, _>("c_unb").unwrap();
    assert_eq!(
        (n.value(), n.scale()),
        (12_345_678_901_234_567_890_123_456_789, 9)
    );
    let text = max.get::<&str, _>("c_text").unwrap();
    assert_eq!(text, format!("héllo 😀{}", "x".repeat(5000)));
    assert_eq!(max.get::<&str, _>("c_vc"), Some("ünïcödé 日本 twenty"));
    assert_eq!(max.get::<&str, _>("c_ch"), Some("ab   "));
    assert_eq!(max.get::<&[u8], _>("c_bytea"), Some(&[0u8, 1, 2, 3, 255][..]));
    assert_eq!(
        max.get::<NaiveDate, _>("c_date"),
        NaiveDate::from_ymd_opt(9999, 12, 31)
    );
    assert_eq!(
        max.get::<NaiveTime, _>("c_time"),
        NaiveTime::from_hms_micro_opt(23, 59, 59, 999_999)
    );
    assert_eq!(
        max.get::<NaiveDateTime, _>("c_ts"),
        Some(dt("9999-12-31 23:59:59.999999"))
    );
    let tz = max
        .get::<chrono::DateTime<chrono::FixedOffset>, _>("c_tstz")
        .unwrap();
    assert_eq!(tz.naive_utc(), dt("2020-01-01 00:00:00.123456"));
    assert_eq!(tz.offset().local_minus_utc(), 0);
    assert_eq!(
        max.get::<NaiveDateTime, _>("c_ts3"),
        Some(dt("2020-02-29 12:00:00.123"))
    );
    assert_eq!(
        max.get::<uuid::Uuid, _>("c_uuid").map(|u| u.to_string()),
        Some("6f9619ff-8b86-d011-b42d-00c04fc964ff".into())
    );
    assert_eq!(max.get::<&str, _>("c_json"), Some("{\"a\": [1, 2]}"));
    assert_eq!(max.get::<&str, _>("c_jsonb"), Some("{\"a\": \"x\", \"b\": 1}"));
    assert_eq!(max.get::<&str, _>("c_enum"), Some("happy"));
    assert_eq!(max.get::<&str, _>("c_inet"), Some("192.168.0.1/24"));
    assert_eq!(max.get::<&str, _>("c_mac"), Some("08:00:2b:01:02:03"));
    assert_eq!(max.get::<&str, _>("c_arr"), Some("[1,2,null]"));
    assert_eq!(max.get::<&str, _>("c_interval"), Some("P1Y2M3DT4H5M6.5S"));
    assert_eq!(max.get::<&str, _>("c_range"), Some("\"[1,10)\""));

    let min = &r[1];
    assert_eq!(min.get::<bool, _>("c_bool"), Some(false));
    assert_eq!(min.get::<i16, _>("c_i2"), Some(-32768));
    assert_eq!(min.get::<i32, _>("c_i4"), Some(i32::MIN));
    assert_eq!(min.get::<i64, _>("c_i8"), Some(i64::MIN));
    assert_eq!(min.get::<f32, _>("c_f4"), Some(-f32::MIN_POSITIVE));
    assert_eq!(min.get::<f64, _>("c_f8"), Some(-2.2250738585072014e-308));
    let n = min.get::<Numeric, _>("c_num").unwrap();
    assert_eq!(
        (n.value(), n.scale()),
        (-99_999_999_999_999_999_999_999_999_999_999_999_999, 10)
    );
    let n = min.get::<Numeric, _>("c_unb").unwrap();
    assert_eq!((n.value(), n.scale()), (-1, 9));
    assert_eq!(min.get::<&str, _>("c_text"), Some(""));
    assert_eq!(min.get::<&str, _>("c_ch"), Some("a    "));
    assert_eq!(min.get::<&[u8], _>("c_bytea"), Some(&[][..]));
    assert_eq!(
        min.get::<NaiveDate, _>("c_date"),
        NaiveDate::from_ymd_opt(1, 1, 1)
    );
    assert_eq!(
        min.get::<NaiveTime, _>("c_time"),
        NaiveTime::from_hms_opt(0, 0, 0)
    );
    assert_eq!(
        min.get::<NaiveDateTime, _>("c_ts"),
        Some(dt("0001-01-01 00:00:00"))
    );
    assert_eq!(
        min.get::<uuid::Uuid, _>("c_uuid").map(|u| u.to_string()),
        Some("00000000-0000-0000-0000-000000000000".into())
    );
    assert_eq!(min.get::<&str, _>("c_interval"), Some("P-1DT-1S"));
    assert_eq!(min.get::<&str, _>("c_range"), Some("\"empty\""));

    let nulls = &r[2];
    assert_eq!(nulls.get::<i32, _>("id"), Some(3));
    for (i, c) in nulls.columns().iter().enumerate().skip(1) {
        assert!(
            matches!(
                nulls.cells().nth(i).map(|(_, v)| v),
                Some(
                    tiberius::ColumnData::Bit(None)
                        | tiberius::ColumnData::I16(None)
                        | tiberius::ColumnData::I32(None)
                        | tiberius::ColumnData::I64(None)
                        | tiberius::ColumnData::F32(None)
                        | tiberius::ColumnData::F64(None)
                        | tiberius::ColumnData::Numeric(None)
                        | tiberius::ColumnData::String(None)
                        | tiberius::ColumnData::Binary(None)
                        | tiberius::ColumnData::Date(None)
                        | tiberius::ColumnData::Time(None)
                        | tiberius::ColumnData::DateTime2(None)
                        | tiberius::ColumnData::DateTimeOffset(None)
                        | tiberius::ColumnData::Guid(None)
                )
            ),
            "column {} is not NULL",
            c.name()
        );
    }
    // money is read back as f64 by tiberius: compare exactly through decimal.
    let m = rows(
        &mut ms,
        "SELECT CAST(c_money AS decimal(19,4)) FROM dbo.all_types ORDER BY id",
    )
    .await;
    let n = m[0].get::<Numeric, _>(0).unwrap();
    assert_eq!((n.value(), n.scale()), (9_223_372_036_854_775_700, 4));
    let n = m[1].get::<Numeric, _>(0).unwrap();
    assert_eq!((n.value(), n.scale()), (-9_223_372_036_854_775_800, 4));
}

const SCHEMA_DDL: &str = "
CREATE TYPE {s}.status AS ENUM ('new', 'done');
CREATE TABLE {s}.parent (
    id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    code text NOT NULL CONSTRAINT parent_code_key UNIQUE,
    created_at timestamptz NOT NULL DEFAULT now(),
    local_at timestamp DEFAULT CURRENT_TIMESTAMP,
    token uuid DEFAULT gen_random_uuid(),
    active boolean NOT NULL DEFAULT true,
    note varchar(40) DEFAULT 'n/a');
CREATE TABLE {s}.child (
    id serial PRIMARY KEY,
    parent_id bigint NOT NULL REFERENCES {s}.parent (id) ON DELETE CASCADE ON UPDATE NO ACTION,
    qty integer NOT NULL CONSTRAINT child_qty_check CHECK (qty >= 0),
    price numeric(10,2) CHECK (price > 0::numeric),
    state {s}.status NOT NULL DEFAULT 'new',
    doc jsonb,
    total numeric(14,2) GENERATED ALWAYS AS (qty * price) STORED);
CREATE TABLE {s}.audit_log (msg text, at timestamp);
INSERT INTO {s}.audit_log VALUES ('a', '2020-01-01'), ('a', '2020-01-01'), (NULL, NULL);
CREATE INDEX child_parent_idx ON {s}.child (parent_id, qty DESC);
CREATE UNIQUE INDEX child_doc_idx ON {s}.child (parent_id) INCLUDE (qty) WHERE state = 'done';
INSERT INTO {s}.parent (id, code) VALUES (1, 'one'), (2, 'two'), (40, 'forty');
SELECT setval(pg_get_serial_sequence('{s}.parent', 'id'), 40);
INSERT INTO {s}.child (parent_id, qty, price, state, doc) VALUES
    (1, 5, 1.50, 'new', '{\"k\": 1}'), (1, 6, NULL, 'done', '[1]'), (2, 7, 9.99, 'new', NULL);
DELETE FROM {s}.child WHERE qty = 7;
";

#[tokio::test]
async fn schema_objects_are_created_and_identity_continues_after_the_maximum() {
    let (_server, target) = common::start_tds_server();
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "rev_schema").await;
    pg_exec(&SCHEMA_DDL.replace("{s}", &format!("\"{schema}\""))).await;
    let e = engine(&target, &schema, "test/rev_schema", Mode::DropRecreate);
    let (prepared, _, warnings, verification) = run(&e).await.unwrap();
    assert!(verification.iter().all(|v| v.ok), "{verification:#?}");
    assert_eq!(verification.len(), 3);
    assert!(warnings.is_empty(), "{warnings:#?}");
    // A table without a primary key is copied in one task (and says so).
    assert!(
        prepared
            .plan
            .warnings
            .iter()
            .any(|w| w.contains("audit_log") && w.contains("no primary key")),
        "{:#?}",
        prepared.plan.warnings
    );

    let mut ms = target.connect().await.unwrap();
    assert_eq!(
        scalar_i64(&mut ms, "SELECT COUNT_BIG(*) FROM dbo.audit_log").await,
        3
    );
    // The generated column is a computed PERSISTED column, computing what PostgreSQL stored.
    let cc = rows(
        &mut ms,
        "SELECT name, definition, is_persisted FROM sys.computed_columns WHERE object_id = OBJECT_ID(N'dbo.child')",
    )
    .await;
    assert_eq!(cc.len(), 1);
    assert_eq!(cc[0].get::<&str, _>(0), Some("total"));
    assert!(
        // PostgreSQL computes `(qty)::numeric * price`: the cast stays.
        cc[0]
            .get::<&str, _>(1)
            .unwrap()
            .to_lowercase()
            .contains("cast(([qty]) as decimal(10,0))*[price]"),
        "{:?}",
        cc[0].get::<&str, _>(1)
    );
    assert_eq!(cc[0].get::<bool, _>(2), Some(true));
    let total = rows(&mut ms, "SELECT total FROM dbo.child WHERE id = 1").await;
    assert_eq!(
        total[0].get::<Numeric, _>(0).map(|n| n.to_string()),
        Some("7.50".into())
    );

    // Keys and indexes.
    let ix = rows(
        &mut ms,
        "SELECT OBJECT_NAME(i.object_id), i.name, i.is_primary_key, i.is_unique, i.is_unique_constraint, \
         i.has_filter FROM sys.indexes i WHERE i.name IS NOT NULL AND OBJECT_SCHEMA_NAME(i.object_id) = N'dbo' \
         ORDER BY 1, 2",
    )
    .await;
    let ix: Vec<String> = ix
        .iter()
        .map(|r| {
            format!(
                "{}.{} pk={} u={} uc={} f={}",
                r.get::<&str, _>(0).unwrap(),
                r.get::<&str, _>(1).unwrap(),
                r.get::<bool, _>(2).unwrap(),
                r.get::<bool, _>(3).unwrap(),
                r.get::<bool, _>(4).unwrap(),
                r.get::<bool, _>(5).unwrap()
            )
        })
        .collect();
    assert_eq!(
        ix,
        vec![
            "child.child_doc_idx pk=false u=true uc=false f=true",
            "child.child_parent_idx pk=false u=false uc=false f=false",
            "child.child_pkey pk=true u=true uc=false f=false",
            "parent.parent_code_key pk=false u=true uc=true f=false",
            "parent.parent_pkey pk=true u=true uc=false f=false",
        ]
    );
    // Foreign key with its actions.
    let fk = rows(
        &mut ms,
        "SELECT name, delete_referential_action_desc, update_referential_action_desc FROM sys.foreign_keys",
    )
    .await;
    assert_eq!(fk.len(), 1);
    assert_eq!(fk[0].get::<&str, _>(1), Some("CASCADE"));
    assert_eq!(fk[0].get::<&str, _>(2), Some("NO_ACTION"));
    // Checks: the table's own and the mapping's (enum labels, ISJSON).
    let ck = rows(
        &mut ms,
        "SELECT name, definition FROM sys.check_constraints ORDER BY name",
    )
    .await;
    let ck: Vec<String> = ck
        .iter()
        .map(|r| {
            format!(
                "{} {}",
                r.get::<&str, _>(0).unwrap(),
                r.get::<&str, _>(1).unwrap()
            )
        })
        .collect();
    assert_eq!(ck.len(), 4, "{ck:#?}");
    assert!(
        ck.iter()
            .any(|c| c.starts_with("child_qty_check") && c.contains("[qty]>=(0)")),
        "{ck:#?}"
    );
    assert!(
        ck.iter()
            .any(|c| c.starts_with("CK_child_state") && c.contains("N'new'")),
        "{ck:#?}"
    );
    assert!(
        ck.iter()
            .any(|c| c.starts_with("CK_child_doc") && c.to_lowercase().contains("isjson")),
        "{ck:#?}"
    );
    // Defaults translated.
    let df = rows(
        &mut ms,
        "SELECT COL_NAME(parent_object_id, parent_column_id), definition FROM sys.default_constraints ORDER BY 1",
    )
    .await;
    let df: Vec<String> = df
        .iter()
        .map(|r| {
            format!(
                "{} {}",
                r.get::<&str, _>(0).unwrap(),
                r.get::<&str, _>(1).unwrap().to_lowercase()
            )
        })
        .collect();
    for want in [
        "active (1)",
        "created_at (sysdatetimeoffset())",
        "local_at (sysdatetime())",
        "note (n'n/a')",
        "state (n'new')",
        "token (newid())",
    ] {
        assert!(
            df.iter().any(|d| d.replace("((1))", "(1)") == want),
            "{want} not in {df:#?}"
        );
    }
    // The enum check rejects what PostgreSQL rejected.
    let bad = match ms
        .simple_query("INSERT INTO dbo.child (parent_id, qty, state) VALUES (1, 1, N'bogus')")
        .await
    {
        Ok(s) => s.into_results().await.map(|_| ()),
        Err(e) => Err(e),
    };
    assert!(bad.is_err(), "the enum CHECK let an unknown label in");
    // Identity continues after the maximum (and after the source sequence): parent's sequence was
    // at 40, child's max is 2 (its sequence at 3 after the deleted row).
    rows(
        &mut ms,
        "INSERT INTO dbo.parent (code) OUTPUT INSERTED.id VALUES (N'new')",
    )
    .await;
    assert_eq!(scalar_i64(&mut ms, "SELECT MAX(id) FROM dbo.parent").await, 41);
    rows(
        &mut ms,
        "INSERT INTO dbo.child (parent_id, qty) OUTPUT INSERTED.id VALUES (1, 1)",
    )
    .await;
    assert_eq!(scalar_i64(&mut ms, "SELECT MAX(id) FROM dbo.child").await, 4);
    // The default fills new rows.
    let r = rows(
        &mut ms,
        "SELECT state, active FROM dbo.parent p JOIN dbo.child c ON c.parent_id = p.id WHERE c.id = 4",
    )
    .await;
    assert_eq!(r[0].get::<&str, _>(0), Some("new"));
    assert_eq!(r[0].get::<bool, _>(1), Some(true));
}

#[tokio::test]
async fn a_large_partitioned_copy_killed_mid_table_resumes_exactly() {
    let (_server, target) = common::start_tds_server();
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "rev_resume").await;
    pg_exec(&format!(
        "CREATE TABLE \"{schema}\".big (id bigint PRIMARY KEY, grp int NOT NULL, v text, n numeric(12,3));
         INSERT INTO \"{schema}\".big SELECT g, g % 7, 'row ' || g, g / 1000.0 FROM generate_series(1, 60000) g;
         CREATE TABLE \"{schema}\".events (day date NOT NULL, seq int NOT NULL, v text,
             PRIMARY KEY (day, seq)) PARTITION BY RANGE (day);
         CREATE TABLE \"{schema}\".events_a PARTITION OF \"{schema}\".events FOR VALUES FROM ('2020-01-01') TO ('2021-01-01');
         CREATE TABLE \"{schema}\".events_b PARTITION OF \"{schema}\".events FOR VALUES FROM ('2021-01-01') TO ('2022-01-01');
         INSERT INTO \"{schema}\".events SELECT date '2020-06-01' + (g % 400), g, 'e' || g FROM generate_series(1, 9000) g;
         ANALYZE \"{schema}\".big; ANALYZE \"{schema}\".events;"
    ))
    .await;
    let mut e = engine(&target, &schema, "test/rev_resume", Mode::DropRecreate);
    {
        let e = Arc::get_mut(&mut e).unwrap();
        e.options.partitioning = PartitionOptions {
            min_rows_to_split: 10_000,
            rows_per_partition: 20_000,
            max_partitions_per_table: 8,
        };
        e.options.parallelism = std::num::NonZeroUsize::new(2).unwrap();
        // Chunks by bytes alone: ~100 kB of bulk rows is ~2,000 rows of `big`, so each task
        // commits several before the injected failure.
        e.copy.chunk = mssql_pg_worker::copy::chunk::ChunkLimit::bytes(100_000);
        e.copy.fail_after_chunks = Some(2);
    }
    let prepared = e.prepare().await.unwrap();
    let big_tasks = prepared
        .plan
        .tasks
        .iter()
        .filter(|t| t.name.starts_with(&format!("{schema}.big")))
        .count();
    assert_eq!(big_tasks, 3, "{:#?}", prepared.plan.tasks);
    // The first attempt dies after 2 committed chunks per task.
    let err = e.copy_all(&prepared.plan).await.unwrap_err();
    assert!(err.to_string().contains("injected failure"), "{err}");
    let mut ms = target.connect().await.unwrap();
    let partial = scalar_i64(&mut ms, "SELECT COUNT_BIG(*) FROM dbo.big").await;
    assert!(partial > 0 && partial < 60_000, "{partial}");

    // A rerun resumes every task from its checkpoint.
    let mut e2 = engine(&target, &schema, "test/rev_resume", Mode::DropRecreate);
    {
        let e2 = Arc::get_mut(&mut e2).unwrap();
        e2.options.partitioning = e.options.partitioning.clone();
        e2.options.parallelism = std::num::NonZeroUsize::new(2).unwrap();
        e2.copy.chunk = mssql_pg_worker::copy::chunk::ChunkLimit::bytes(100_000);
    }
    let (prepared, reports, _, verification) = run(&e2).await.unwrap();
    assert!(prepared.resumed);
    assert!(reports.iter().any(|r| r.resumed));
    assert!(verification.iter().all(|v| v.ok), "{verification:#?}");
    let r = rows(
        &mut ms,
        "SELECT COUNT_BIG(*), COUNT_BIG(DISTINCT id), MIN(id), MAX(id), SUM(CAST(grp AS bigint)) FROM dbo.big",
    )
    .await;
    assert_eq!(r[0].get::<i64, _>(0), Some(60_000));
    assert_eq!(r[0].get::<i64, _>(1), Some(60_000));
    assert_eq!(r[0].get::<i64, _>(2), Some(1));
    assert_eq!(r[0].get::<i64, _>(3), Some(60_000));
    let expected_grp: i64 = (1..=60_000i64).map(|g| g % 7).sum();
    assert_eq!(r[0].get::<i64, _>(4), Some(expected_grp));
    let r = rows(
        &mut ms,
        "SELECT COUNT_BIG(*), COUNT_BIG(DISTINCT seq) FROM dbo.events",
    )
    .await;
    assert_eq!(r[0].get::<i64, _>(0), Some(9_000));
    assert_eq!(r[0].get::<i64, _>(1), Some(9_000));
}

#[tokio::test]
async fn upsert_inserts_new_rows_and_updates_only_changed_ones() {
    let (_server, target) = common::start_tds_server();
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "rev_upsert").await;
    pg_exec(&format!(
        "CREATE TABLE \"{schema}\".items (id int PRIMARY KEY, name text NOT NULL, price numeric(8,2));
         INSERT INTO \"{schema}\".items VALUES (1, 'a', 1.00), (2, 'b', NULL), (3, 'c', 3.00);"
    ))
    .await;
    // An existing target table (upsert keeps it) with a rowversion column, which shows which rows
    // the upsert rewrites: only changed rows get a new one.
    let mut ms = target.connect().await.unwrap();
    rows(
        &mut ms,
        "CREATE TABLE dbo.items (id int NOT NULL PRIMARY KEY, name nvarchar(max) NOT NULL, \
         price decimal(8,2) NULL, rv rowversion)",
    )
    .await;
    let first = engine(&target, &schema, "test/rev_upsert", Mode::Upsert);
    run(&first).await.unwrap();
    let versions = |r: &[tiberius::Row]| -> Vec<(i32, Vec<u8>)> {
        r.iter()
            .map(|r| {
                (
                    r.get::<i32, _>(0).unwrap(),
                    r.get::<&[u8], _>(1).unwrap().to_vec(),
                )
            })
            .collect()
    };
    let before = versions(&rows(&mut ms, "SELECT id, rv FROM dbo.items ORDER BY id").await);
    pg_exec(&format!(
        "UPDATE \"{schema}\".items SET price = 2.50 WHERE id = 2;
         INSERT INTO \"{schema}\".items VALUES (4, 'd', 4.00);"
    ))
    .await;
    let up = engine(&target, &schema, "test/rev_upsert", Mode::Upsert);
    let prepared = up.prepare().await.unwrap();
    let reports = up.copy_all(&prepared.plan).await.unwrap();
    assert_eq!(reports.iter().map(|r| r.rows).sum::<u64>(), 4);
    let r = rows(&mut ms, "SELECT id, name, price FROM dbo.items ORDER BY id").await;
    let got: Vec<String> = r
        .iter()
        .map(|r| {
            format!(
                "{} {} {:?}",
                r.get::<i32, _>(0).unwrap(),
                r.get::<&str, _>(1).unwrap(),
                r.get::<Numeric, _>(2).map(|n| n.value())
            )
        })
        .collect();
    assert_eq!(
        got,
        vec!["1 a Some(100)", "2 b Some(250)", "3 c Some(300)", "4 d Some(400)"]
    );
    let after = versions(&rows(&mut ms, "SELECT id, rv FROM dbo.items ORDER BY id").await);
    assert_eq!(after[0], before[0], "unchanged row 1 was rewritten");
    assert_ne!(after[1].1, before[1].1, "changed row 2 was not updated");
    assert_eq!(after[2], before[2], "unchanged row 3 was rewritten");
    assert_eq!(after.len(), 4);
    // The per-task staging table is gone.
    assert_eq!(
        scalar_i64(
            &mut ms,
            "SELECT COUNT(*) FROM sys.tables WHERE name LIKE N'stage%'"
        )
        .await,
        0
    );
    let verification = up.verify(&prepared.plan).await.unwrap();
    assert!(verification.iter().all(|v| v.ok), "{verification:#?}");
    // Rows only the target has, before and after the source's keys, are the upsert's own; a
    // source row changed in the target is a failure (case only: compared exactly).
    rows(
        &mut ms,
        "INSERT INTO dbo.items (id, name, price) VALUES (0, N'only here', NULL), (10, N'only here', NULL)",
    )
    .await;
    let v = up.verify(&prepared.plan).await.unwrap();
    assert!(
        v[0].ok && v[0].target_only_rows == Some(2) && v[0].target_rows == 6,
        "{v:#?}"
    );
    rows(&mut ms, "UPDATE dbo.items SET name = N'A' WHERE id = 1").await;
    let v = up.verify(&prepared.plan).await.unwrap();
    assert!(!v[0].ok && v[0].target_only_rows == Some(3), "{v:#?}");
}

async fn run_err(schema_sql: &str, name: &str) -> String {
    let (_server, target) = common::start_tds_server();
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, name).await;
    pg_exec(&schema_sql.replace("{s}", &format!("\"{schema}\""))).await;
    let e = engine(&target, &schema, &format!("test/{name}"), Mode::DropRecreate);
    let err = run(&e).await.map(|_| ()).unwrap_err();
    let mut ms = target.connect().await.unwrap();
    // A failed chunk leaves nothing behind.
    let exists = rows(&mut ms, "SELECT OBJECT_ID(N'dbo.t')").await[0]
        .get::<i32, _>(0)
        .is_some();
    if exists {
        assert_eq!(
            scalar_i64(&mut ms, "SELECT COUNT_BIG(*) FROM dbo.t").await,
            0,
            "{err}"
        );
    }
    format!("{err:#}")
}

#[tokio::test]
async fn bad_input_gets_clear_errors_naming_table_key_and_column() {
    let cases: [(&str, &str, &[&str]); 14] = [
        (
            "CREATE TABLE {s}.t (id int PRIMARY KEY, at timestamp); INSERT INTO {s}.t VALUES (1, '2020-01-01'), (7, 'infinity');",
            "rev_bad_inf",
            &["t", "id=7", "column at", "infinity"],
        ),
        (
            "CREATE TABLE {s}.t (id int PRIMARY KEY, d date); INSERT INTO {s}.t VALUES (3, '0044-03-15 BC');",
            "rev_bad_bc",
            &["t", "id=3", "column d", "BC"],
        ),
        (
            "CREATE TABLE {s}.t (id int PRIMARY KEY, ts timestamptz); INSERT INTO {s}.t VALUES (4, '10000-01-01 00:00:00+00');",
            "rev_bad_future",
            &["t", "id=4", "column ts", "9999-12-31"],
        ),
        (
            "CREATE TABLE {s}.t (id int PRIMARY KEY, n numeric(10,2)); INSERT INTO {s}.t VALUES (5, 'NaN');",
            "rev_bad_nan",
            &["t", "id=5", "column n", "NaN"],
        ),
        (
            "CREATE TABLE {s}.t (id int PRIMARY KEY, n numeric); INSERT INTO {s}.t VALUES (6, 1e40);",
            "rev_bad_wide",
            &["t", "column n", "decimal(38)"],
        ),
        // PostgreSQL's money reaches 100 times SQL Server money's range: just past the maximum
        // (fits decimal(19,4), not money), far past it, and just below the minimum.
        (
            "CREATE TABLE {s}.t (id int PRIMARY KEY, m money); INSERT INTO {s}.t VALUES (1, 1), (8, '922337203685477.59');",
            "rev_bad_money_max",
            &[
                "t",
                "id=8",
                "column m",
                "money's range",
                "922,337,203,685,477.5807",
            ],
        ),
        (
            "CREATE TABLE {s}.t (id int PRIMARY KEY, m money); INSERT INTO {s}.t VALUES (1, 1), (9, '90000000000000000.00');",
            "rev_bad_money_far",
            &["t", "id=9", "column m", "money's range"],
        ),
        (
            "CREATE TABLE {s}.t (id int PRIMARY KEY, m money); INSERT INTO {s}.t VALUES (10, '-922337203685477.59'), (11, 2);",
            "rev_bad_money_min",
            &[
                "t",
                "id=10",
                "column m",
                "money's range",
                "-922,337,203,685,477.5808",
            ],
        ),
        // datetime2/date range from the other columns: a BC timestamp, date infinity, a date
        // after 9999-12-31, and time 24:00:00.
        (
            "CREATE TABLE {s}.t (id int PRIMARY KEY, ts timestamp); INSERT INTO {s}.t VALUES (12, '0001-12-31 23:59:59 BC');",
            "rev_bad_ts_bc",
            &["t", "id=12", "column ts", "BC"],
        ),
        (
            "CREATE TABLE {s}.t (id int PRIMARY KEY, d date); INSERT INTO {s}.t VALUES (13, '-infinity');",
            "rev_bad_date_inf",
            &["t", "id=13", "column d", "-infinity"],
        ),
        (
            "CREATE TABLE {s}.t (id int PRIMARY KEY, d date); INSERT INTO {s}.t VALUES (14, '10000-01-01');",
            "rev_bad_date_future",
            &["t", "id=14", "column d", "9999-12-31"],
        ),
        (
            "CREATE TABLE {s}.t (id int PRIMARY KEY, tm time); INSERT INTO {s}.t VALUES (15, '24:00:00');",
            "rev_bad_time_24",
            &["t", "id=15", "column tm", "24:00:00"],
        ),
        (
            "CREATE TABLE {s}.t (code text PRIMARY KEY); INSERT INTO {s}.t VALUES ('abc'), ('ABC ');",
            "rev_bad_ci",
            &["t", "primary key", "case-insensitive", "abc"],
        ),
        (
            "CREATE TABLE {s}.t (id int PRIMARY KEY, \"Name\" text, name text);",
            "rev_bad_cols",
            &["columns of table", "Name", "name", "case-insensitive"],
        ),
    ];
    for (sql, name, wants) in cases {
        let err = run_err(sql, name).await;
        for w in wants {
            assert!(err.contains(w), "{name}: {w:?} not in: {err}");
        }
    }
}

#[tokio::test]
async fn truncate_mode_keeps_the_table_and_replaces_its_rows_exactly() {
    let (_server, target) = common::start_tds_server();
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "rev_truncate").await;
    pg_exec(&format!(
        "CREATE TABLE \"{schema}\".items (id int PRIMARY KEY, name text NOT NULL);
         INSERT INTO \"{schema}\".items SELECT g, 'item ' || g FROM generate_series(1, 500) g;"
    ))
    .await;
    let first = engine(&target, &schema, "test/rev_truncate", Mode::DropRecreate);
    run(&first).await.unwrap();
    let mut ms = target.connect().await.unwrap();
    // Rows only the target has, and source changes: truncate must leave exactly the source's rows.
    rows(
        &mut ms,
        "INSERT INTO dbo.items (id, name) VALUES (9001, N'target only')",
    )
    .await;
    pg_exec(&format!(
        "DELETE FROM \"{schema}\".items WHERE id <= 10;
         UPDATE \"{schema}\".items SET name = 'changed' WHERE id = 20;
         INSERT INTO \"{schema}\".items VALUES (501, 'new');"
    ))
    .await;
    let again = engine(&target, &schema, "test/rev_truncate", Mode::Truncate);
    let (_, reports, _, verification) = run(&again).await.unwrap();
    assert_eq!(reports.iter().map(|r| r.rows).sum::<u64>(), 491);
    assert!(verification.iter().all(|v| v.ok), "{verification:#?}");
    assert_eq!(
        scalar_i64(&mut ms, "SELECT COUNT_BIG(*) FROM dbo.items").await,
        491
    );
    assert_eq!(
        scalar_i64(
            &mut ms,
            "SELECT COUNT_BIG(*) FROM dbo.items WHERE id = 9001 OR id <= 10"
        )
        .await,
        0
    );
    let r = rows(
        &mut ms,
        "SELECT name FROM dbo.items WHERE id IN (20, 501) ORDER BY id",
    )
    .await;
    let names: Vec<&str> = r.iter().map(|r| r.get::<&str, _>(0).unwrap()).collect();
    assert_eq!(names, vec!["changed", "new"]);
}

#[tokio::test]
async fn upsert_into_an_identity_table_keeps_source_ids_and_identity_continues() {
    let (_server, target) = common::start_tds_server();
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "rev_upsert_ident").await;
    pg_exec(&format!(
        "CREATE TABLE \"{schema}\".people (id int GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, name text NOT NULL);
         INSERT INTO \"{schema}\".people (name) SELECT 'p' || g FROM generate_series(1, 100) g;"
    ))
    .await;
    let first = engine(&target, &schema, "test/rev_upsert_ident", Mode::DropRecreate);
    run(&first).await.unwrap();
    pg_exec(&format!(
        "UPDATE \"{schema}\".people SET name = 'renamed' WHERE id = 7;
         INSERT INTO \"{schema}\".people (id, name) VALUES (500, 'explicit');"
    ))
    .await;
    let up = engine(&target, &schema, "test/rev_upsert_ident", Mode::Upsert);
    let (_, _, _, verification) = run(&up).await.unwrap();
    assert!(verification.iter().all(|v| v.ok), "{verification:#?}");
    let mut ms = target.connect().await.unwrap();
    assert_eq!(
        scalar_i64(&mut ms, "SELECT COUNT_BIG(*) FROM dbo.people").await,
        101
    );
    let r = rows(
        &mut ms,
        "SELECT name FROM dbo.people WHERE id IN (7, 500) ORDER BY id",
    )
    .await;
    let names: Vec<&str> = r.iter().map(|r| r.get::<&str, _>(0).unwrap()).collect();
    assert_eq!(names, vec!["renamed", "explicit"]);
    // The next generated id comes after the copied maximum.
    rows(&mut ms, "INSERT INTO dbo.people (name) VALUES (N'generated')").await;
    assert_eq!(
        scalar_i64(
            &mut ms,
            "SELECT CAST(id AS bigint) FROM dbo.people WHERE name = N'generated'"
        )
        .await,
        501
    );
}

/// A money value outside SQL Server money's range in the third of five chunks: the error names
/// table, key and column; the two chunks before it are committed, the failing one is rolled back;
/// once the value is fixed in PostgreSQL the rerun resumes after the last committed chunk and the
/// table ends up exact (no row lost or duplicated, the edge values exact).
#[tokio::test]
async fn money_out_of_range_fails_its_chunk_and_the_fixed_rerun_resumes_exactly() {
    let (_server, target) = common::start_tds_server();
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "rev_money").await;
    pg_exec(&format!(
        "CREATE TABLE \"{schema}\".t (id int PRIMARY KEY, m money NOT NULL, n numeric(19,4));
         INSERT INTO \"{schema}\".t SELECT g, g * 1.25, g FROM generate_series(1, 500) g;
         UPDATE \"{schema}\".t SET m = '922337203685477.57', n = 922337203685477.5807 WHERE id = 250;
         UPDATE \"{schema}\".t SET m = '-922337203685477.58', n = -922337203685477.5808 WHERE id = 1;
         UPDATE \"{schema}\".t SET m = '1000000000000000.00' WHERE id = 260;"
    ))
    .await;
    let mut e = engine(&target, &schema, "test/rev_money", Mode::DropRecreate);
    Arc::get_mut(&mut e).unwrap().copy.chunk = mssql_pg_worker::copy::chunk::ChunkLimit::rows(100);
    let err = run(&e).await.map(|_| ()).unwrap_err();
    let msg = format!("{err:#}");
    for want in ["t", "id=260", "column m", "money's range"] {
        assert!(msg.contains(want), "{want:?} not in: {msg}");
    }
    let mut ms = target.connect().await.unwrap();
    let r = rows(&mut ms, "SELECT COUNT_BIG(*), MIN(id), MAX(id) FROM dbo.t").await;
    // Chunks 1-100 and 101-200 committed; 201-300 (with id 260) rolled back entirely.
    assert_eq!(r[0].get::<i64, _>(0), Some(200));
    assert_eq!(r[0].get::<i32, _>(1), Some(1));
    assert_eq!(r[0].get::<i32, _>(2), Some(200));

    pg_exec(&format!("UPDATE \"{schema}\".t SET m = '-0.01' WHERE id = 260")).await;
    let (prepared, reports, _, verification) = run(&e).await.unwrap();
    assert!(prepared.resumed);
    assert_eq!(reports.iter().map(|r| r.rows).sum::<u64>(), 300);
    assert!(verification.iter().all(|v| v.ok), "{verification:#?}");
    let r = rows(
        &mut ms,
        "SELECT COUNT_BIG(*), COUNT_BIG(DISTINCT id), SUM(CAST(id AS bigint)) FROM dbo.t",
    )
    .await;
    assert_eq!(r[0].get::<i64, _>(0), Some(500));
    assert_eq!(r[0].get::<i64, _>(1), Some(500));
    assert_eq!(r[0].get::<i64, _>(2), Some(500 * 501 / 2));
    let r = rows(
        &mut ms,
        "SELECT id, CAST(m AS decimal(19,4)), n FROM dbo.t WHERE id IN (1, 2, 250, 260) ORDER BY id",
    )
    .await;
    let got: Vec<(i32, i128, i128)> = r
        .iter()
        .map(|r| {
            (
                r.get::<i32, _>(0).unwrap(),
                r.get::<Numeric, _>(1).unwrap().value(),
                r.get::<Numeric, _>(2).map_or(0, |n| n.value()),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            (1, -9_223_372_036_854_775_800, -9_223_372_036_854_775_808),
            (2, 25_000, 20_000),
            (250, 9_223_372_036_854_775_700, 9_223_372_036_854_775_807),
            (260, -100, 2_600_000),
        ]
    );
}

/// Values past 65,535 bytes go through the PLP path whole: a 40,000-character nvarchar(max)
/// (mixed ASCII and not), a 100,000-byte varbinary(max); a numeric whose scale exceeds its
/// precision (PostgreSQL 15) becomes a decimal that holds it.
#[tokio::test]
async fn long_plp_values_and_scale_above_precision_arrive_exactly() {
    let (_server, target) = common::start_tds_server();
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "rev_long").await;
    pg_exec(&format!(
        "CREATE TABLE \"{schema}\".t (id int PRIMARY KEY, t text, b bytea, small numeric(2,5));
         INSERT INTO \"{schema}\".t VALUES
           (1, repeat('abcdefghij', 4000), decode(repeat('00ff10', 33334), 'hex'), 0.00012),
           (2, repeat('x', 39999) || 'é', '\\x', -0.00099),
           (3, repeat('日本語', 13334), NULL, NULL);"
    ))
    .await;
    let e = engine(&target, &schema, "test/rev_long", Mode::DropRecreate);
    let (_, reports, warnings, verification) = run(&e).await.unwrap();
    assert_eq!(reports.iter().map(|r| r.rows).sum::<u64>(), 3);
    assert!(
        verification.iter().all(|v| v.ok),
        "{verification:#?}\n{warnings:#?}"
    );
    let mut ms = target.connect().await.unwrap();
    let r = rows(&mut ms, "SELECT id, t, b, small FROM dbo.t ORDER BY id").await;
    assert_eq!(r[0].get::<&str, _>(1), Some("abcdefghij".repeat(4000).as_str()));
    let bytes: Vec<u8> = [0u8, 0xff, 0x10].repeat(33_334);
    assert_eq!(r[0].get::<&[u8], _>(2), Some(bytes.as_slice()));
    let n = r[0].get::<Numeric, _>(3).unwrap();
    assert_eq!((n.value(), n.scale()), (12, 5));
    assert_eq!(
        r[1].get::<&str, _>(1),
        Some(format!("{}é", "x".repeat(39_999)).as_str())
    );
    assert_eq!(r[1].get::<&[u8], _>(2), Some(&[][..]));
    let n = r[1].get::<Numeric, _>(3).unwrap();
    assert_eq!((n.value(), n.scale()), (-99, 5));
    assert_eq!(r[2].get::<&str, _>(1), Some("日本語".repeat(13_334).as_str()));
    let types = rows(
        &mut ms,
        "SELECT c.precision, c.scale FROM sys.columns c WHERE c.object_id = OBJECT_ID(N'dbo.t') AND c.name = N'small'",
    )
    .await;
    assert_eq!(
        (types[0].get::<u8, _>(0), types[0].get::<u8, _>(1)),
        (Some(5), Some(5))
    );
}

/// Upsert compares values exactly: a change of case only, a trailing blank added, and a trailing
/// zero byte added reach SQL Server (whose `<>` ignores all three under its default collation),
/// unchanged rows are not rewritten, and the checksum then passes.
#[tokio::test]
async fn upsert_applies_changes_of_case_trailing_blanks_and_trailing_zero_bytes() {
    let (_server, target) = common::start_tds_server();
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "rev_upsert_exact").await;
    pg_exec(&format!(
        "CREATE TABLE \"{schema}\".words (id int PRIMARY KEY, w text, code varchar(10), b bytea);
         INSERT INTO \"{schema}\".words VALUES (1, 'abc', 'x', '\\x01'), (2, 'same', 'y', '\\x02'),
             (3, NULL, 'z', NULL);"
    ))
    .await;
    let mut ms = target.connect().await.unwrap();
    rows(
        &mut ms,
        "CREATE TABLE dbo.words (id int NOT NULL PRIMARY KEY, w nvarchar(max) NULL, \
         code nvarchar(10) NULL, b varbinary(max) NULL, rv rowversion)",
    )
    .await;
    let first = engine(&target, &schema, "test/rev_upsert_exact", Mode::Upsert);
    run(&first).await.unwrap();
    let versions = |r: &[tiberius::Row]| -> Vec<Vec<u8>> {
        r.iter().map(|r| r.get::<&[u8], _>(0).unwrap().to_vec()).collect()
    };
    let before = versions(&rows(&mut ms, "SELECT rv FROM dbo.words ORDER BY id").await);
    pg_exec(&format!(
        "UPDATE \"{schema}\".words SET w = 'ABC', code = 'x ', b = '\\x0100' WHERE id = 1;
         UPDATE \"{schema}\".words SET w = '' WHERE id = 3;"
    ))
    .await;
    let up = engine(&target, &schema, "test/rev_upsert_exact", Mode::Upsert);
    let (_, _, _, verification) = run(&up).await.unwrap();
    assert!(verification.iter().all(|v| v.ok), "{verification:#?}");
    let r = rows(&mut ms, "SELECT id, w, code, b FROM dbo.words ORDER BY id").await;
    type Row = (i32, Option<String>, Option<String>, Option<Vec<u8>>);
    let got: Vec<Row> = r
        .iter()
        .map(|r| {
            (
                r.get::<i32, _>(0).unwrap(),
                r.get::<&str, _>(1).map(str::to_string),
                r.get::<&str, _>(2).map(str::to_string),
                r.get::<&[u8], _>(3).map(<[u8]>::to_vec),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            (1, Some("ABC".into()), Some("x ".into()), Some(vec![1, 0])),
            (2, Some("same".into()), Some("y".into()), Some(vec![2])),
            (3, Some(String::new()), Some("z".into()), None),
        ]
    );
    let after = versions(&rows(&mut ms, "SELECT rv FROM dbo.words ORDER BY id").await);
    assert_ne!(after[0], before[0], "row 1 changed");
    assert_eq!(after[1], before[1], "unchanged row 2 was rewritten");
    assert_ne!(after[2], before[2], "row 3 changed from NULL");
}

/// A key the merge cannot follow in order (text) is compared by both sides' hashes, sorted.
#[tokio::test(flavor = "multi_thread")]
async fn upsert_of_a_text_key_verifies_by_sorted_hashes() {
    let (_server, target) = common::start_tds_server();
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "rev_upsert_text").await;
    pg_exec(&format!(
        "CREATE TABLE \"{schema}\".codes (code text PRIMARY KEY, n int);
         INSERT INTO \"{schema}\".codes VALUES ('b', 1), ('a', 2), ('c', 3);"
    ))
    .await;
    let up = engine(&target, &schema, "test/rev_upsert_text", Mode::Upsert);
    let prepared = up.prepare().await.unwrap();
    up.copy_all(&prepared.plan).await.unwrap();
    up.finalize(&prepared.plan).await.unwrap();
    let mut ms = target.connect().await.unwrap();
    rows(&mut ms, "INSERT INTO dbo.codes VALUES (N'zz', 9)").await;
    let v = up.verify(&prepared.plan).await.unwrap();
    assert!(v[0].ok && v[0].target_only_rows == Some(1), "{v:#?}");
    rows(&mut ms, "UPDATE dbo.codes SET n = 5 WHERE code = N'a'").await;
    let v = up.verify(&prepared.plan).await.unwrap();
    assert!(!v[0].ok, "{v:#?}");
}
