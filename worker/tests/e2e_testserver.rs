//! End to end against the TDS test server (standing in for SQL Server) and the real PostgreSQL:
//! every type arrives exactly, schema objects are recreated, and a copy killed after N chunks
//! resumes with no row lost or duplicated.
#![allow(clippy::unwrap_used)]

mod common;

use common::{ms_exec, start_tds_server, tds_engine};
use mssql_pg_worker::engine::EngineExt as _;
use mssql_pg_worker::options::PartitionOptions;
use mssql_pg_worker::pipeline::CopyOptions;

const ALL_TYPES: &str = "CREATE TABLE dbo.AllTypes (
    Id int IDENTITY(1,1) NOT NULL PRIMARY KEY,
    CBit bit NULL, CTiny tinyint NULL, CSmall smallint NULL, CInt int NULL, CBig bigint NULL,
    CDec decimal(38,10) NULL, CNum numeric(5,2) NULL, CMoney money NULL, CSmallMoney smallmoney NULL,
    CFloat float NULL, CReal real NULL, CDate date NULL, CTime time(7) NULL, CDateTime datetime NULL,
    CSmallDateTime smalldatetime NULL, CDateTime2 datetime2(7) NULL, CDto datetimeoffset(7) NULL,
    CGuid uniqueidentifier NULL, CChar char(5) NULL, CVarchar varchar(50) NULL, CNChar nchar(5) NULL,
    CNVarchar nvarchar(50) NULL, CNVarcharMax nvarchar(max) NULL, CBinary binary(4) NULL,
    CVarbinary varbinary(max) NULL, CXml xml NULL)";

const ROW_MAX: &str = "INSERT INTO dbo.AllTypes (CBit, CTiny, CSmall, CInt, CBig, CDec, CNum, CMoney, CSmallMoney,
    CFloat, CReal, CDate, CTime, CDateTime, CSmallDateTime, CDateTime2, CDto, CGuid, CChar, CVarchar, CNChar,
    CNVarchar, CNVarcharMax, CBinary, CVarbinary, CXml) VALUES (1, 255, 32767, 2147483647, 9223372036854775807,
    CAST('9999999999999999999999999999.9999999999' AS decimal(38,10)), 999.99, CAST('922337203685477.5807' AS money), CAST('214748.3647' AS smallmoney),
    1.7976931348623157E+308, 3.4028235E+38, '9999-12-31', '23:59:59.9999999', '9999-12-31 23:59:59.997',
    '2079-06-06 23:59:00', '9999-12-31 23:59:59.9999999', '2020-01-01 05:30:00.1234567 +05:30',
    '6F9619FF-8B86-D011-B42D-00C04FC964FF', 'ab', 'plain ascii', N'日本', N'héllo 😀', REPLICATE(N'x', 10000),
    0x00010203, 0xDEADBEEF, N'<a b=\"1\">x &amp; y</a>')";

const ROW_MIN: &str = "INSERT INTO dbo.AllTypes (CBit, CTiny, CSmall, CInt, CBig, CDec, CNum, CMoney, CSmallMoney,
    CFloat, CReal, CDate, CTime, CDateTime, CSmallDateTime, CDateTime2, CDto, CGuid, CChar, CVarchar, CNChar,
    CNVarchar, CNVarcharMax, CBinary, CVarbinary, CXml) VALUES (0, 0, -32768, -2147483648, -9223372036854775808,
    -0.0000000001, -999.99, CAST('-922337203685477.5808' AS money), CAST('-214748.3648' AS smallmoney),
    -2.2250738585072014E-308, -1.175494E-38, '0001-01-01', '00:00:00', '1753-01-01 00:00:00',
    '1900-01-01 00:00', '0001-01-01 00:00:00', '0001-01-01 00:00:00 +00:00',
    '00000000-0000-0000-0000-000000000000', '', '', N'', N'', N'', 0x00000000, 0x, N'<r/>')";

const ROW_NULL: &str = "INSERT INTO dbo.AllTypes (CBit) VALUES (NULL)";

/// What PostgreSQL must hold, rendered by `format('%s', col)` (NULL stays NULL).
fn expected() -> Vec<Vec<Option<String>>> {
    let s = |v: &str| Some(v.to_string());
    vec![
        vec![
            s("1"),
            s("t"),
            s("255"),
            s("32767"),
            s("2147483647"),
            s("9223372036854775807"),
            s("9999999999999999999999999999.9999999999"),
            s("999.99"),
            s("922337203685477.5807"),
            s("214748.3647"),
            s("1.7976931348623157e+308"),
            s("3.4028235e+38"),
            s("9999-12-31"),
            s("23:59:59.999999"),
            s("9999-12-31 23:59:59.997"),
            s("2079-06-06 23:59:00"),
            s("9999-12-31 23:59:59.999999"),
            s("2020-01-01 00:00:00.123456+00"),
            s("6f9619ff-8b86-d011-b42d-00c04fc964ff"),
            s("ab   "),
            s("plain ascii"),
            s("日本   "),
            s("héllo 😀"),
            Some("x".repeat(10000)),
            s("\\x00010203"),
            s("\\xdeadbeef"),
            s("<a b=\"1\">x &amp; y</a>"),
        ],
        vec![
            s("2"),
            s("f"),
            s("0"),
            s("-32768"),
            s("-2147483648"),
            s("-9223372036854775808"),
            s("-0.0000000001"),
            s("-999.99"),
            s("-922337203685477.5808"),
            s("-214748.3648"),
            s("-2.2250738585072014e-308"),
            s("-1.175494e-38"),
            s("0001-01-01"),
            s("00:00:00"),
            s("1753-01-01 00:00:00"),
            s("1900-01-01 00:00:00"),
            s("0001-01-01 00:00:00"),
            s("0001-01-01 00:00:00+00"),
            s("00000000-0000-0000-0000-000000000000"),
            s("     "),
            s(""),
            s("     "),
            s(""),
            s(""),
            s("\\x00000000"),
            s("\\x"),
            s("<r/>"),
        ],
        std::iter::once(s("3"))
            .chain(std::iter::repeat_n(None, 26))
            .collect(),
    ]
}

#[tokio::test]
async fn every_type_round_trips_and_schema_is_recreated() {
    let (_server, source) = start_tds_server();
    let mut ms = source.connect().await.unwrap();
    ms_exec(&mut ms, ALL_TYPES).await;
    ms_exec(&mut ms, ROW_MAX).await;
    ms_exec(&mut ms, ROW_MIN).await;
    ms_exec(&mut ms, ROW_NULL).await;
    ms_exec(
        &mut ms,
        "CREATE TABLE dbo.Parent (Id int NOT NULL CONSTRAINT PK_Parent PRIMARY KEY, Code nvarchar(10) NOT NULL \
         CONSTRAINT UQ_Parent_Code UNIQUE, Active bit NOT NULL CONSTRAINT DF_Parent_Active DEFAULT ((1)))",
    )
    .await;
    ms_exec(
        &mut ms,
        "CREATE TABLE dbo.Child (Id bigint IDENTITY(10,5) NOT NULL CONSTRAINT PK_Child PRIMARY KEY, ParentId int NOT NULL \
         CONSTRAINT FK_Child_Parent REFERENCES dbo.Parent (Id) ON DELETE CASCADE, Qty int NOT NULL \
         CONSTRAINT CK_Child_Qty CHECK (Qty >= 0))",
    )
    .await;
    ms_exec(&mut ms, "CREATE INDEX IX_Child_ParentId ON dbo.Child (ParentId)").await;
    ms_exec(
        &mut ms,
        "INSERT INTO dbo.Parent (Id, Code) VALUES (1, N'one'), (2, N'two')",
    )
    .await;
    ms_exec(
        &mut ms,
        "INSERT INTO dbo.Child (ParentId, Qty) VALUES (1, 5), (1, 6), (2, 7)",
    )
    .await;

    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "e2e_types").await;
    let engine = tds_engine(&source, &schema, "test/e2e_types");
    let prepared = engine.prepare().await.unwrap();
    assert!(!prepared.resumed);
    assert_eq!(
        prepared.negotiated_packet_size,
        Some(32767),
        "granted packet size read from the login response"
    );
    let reports = engine.copy_all(&prepared.plan).await.unwrap();
    assert_eq!(reports.iter().map(|r| r.rows).sum::<u64>(), 3 + 2 + 3);
    let warnings = engine.finalize(&prepared.plan).await.unwrap();
    let verification = engine.verify(&prepared.plan).await.unwrap();
    assert!(verification.iter().all(|v| v.ok), "{verification:#?}");
    assert_eq!(verification.len(), 3);

    pg.batch_execute("SET TimeZone = 'UTC'; SET extra_float_digits = 1")
        .await
        .unwrap();
    let cols = "\"Id\", \"CBit\", \"CTiny\", \"CSmall\", \"CInt\", \"CBig\", \"CDec\", \"CNum\", \"CMoney\", \
        \"CSmallMoney\", \"CFloat\", \"CReal\", \"CDate\", \"CTime\", \"CDateTime\", \"CSmallDateTime\", \"CDateTime2\", \
        \"CDto\", \"CGuid\", \"CChar\", \"CVarchar\", \"CNChar\", \"CNVarchar\", \"CNVarcharMax\", \"CBinary\", \
        \"CVarbinary\", \"CXml\"";
    let select = cols
        .split(", ")
        .map(|c| format!("CASE WHEN {c} IS NULL THEN NULL ELSE format('%s', {c}) END"))
        .collect::<Vec<_>>()
        .join(", ");
    let rows = pg
        .query(
            &format!("SELECT {select} FROM \"{schema}\".\"AllTypes\" ORDER BY \"Id\""),
            &[],
        )
        .await
        .unwrap();
    let got: Vec<Vec<Option<String>>> = rows
        .iter()
        .map(|r| (0..27).map(|i| r.get::<_, Option<String>>(i)).collect())
        .collect();
    let want = expected();
    for (g, w) in got.iter().zip(&want) {
        for (i, name) in cols.split(", ").enumerate() {
            assert_eq!(g[i], w[i], "column {name}");
        }
    }
    assert_eq!(got.len(), want.len());

    // Types as mapped.
    let types: Vec<(String, String)> = pg
        .query(
            "SELECT column_name::text, format_type(atttypid, atttypmod) FROM information_schema.columns c \
             JOIN pg_attribute a ON a.attrelid = format('%I.%I', c.table_schema, c.table_name)::regclass \
             AND a.attname = c.column_name WHERE table_schema = $1 AND table_name = 'AllTypes' ORDER BY ordinal_position",
            &[&schema],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    let t = |n: &str| {
        types
            .iter()
            .find(|(c, _)| c == n)
            .map(|(_, t)| t.as_str())
            .unwrap()
    };
    assert_eq!(t("CMoney"), "numeric(19,4)");
    assert_eq!(t("CTime"), "time(6) without time zone");
    assert_eq!(t("CDateTime"), "timestamp(3) without time zone");
    assert_eq!(t("CDto"), "timestamp(6) with time zone");
    assert_eq!(t("CNChar"), "character(5)");
    assert_eq!(t("CNVarchar"), "character varying(50)");

    // Keys, FK cascade, check, default, identity continuing after the copied values.
    let q = |t: &str| format!("\"{schema}\".\"{t}\"");
    let row = pg
        .query_one(
            &format!(
                "INSERT INTO {} (\"ParentId\", \"Qty\") VALUES (2, 1) RETURNING \"Id\"",
                q("Child")
            ),
            &[],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, i64>(0), 25, "identity(10,5) after 10, 15, 20");
    let row = pg
        .query_one(
            &format!(
                "INSERT INTO {} (\"Id\", \"Code\") VALUES (3, 'three') RETURNING \"Active\"",
                q("Parent")
            ),
            &[],
        )
        .await
        .unwrap();
    assert!(row.get::<_, bool>(0));
    assert!(
        pg.batch_execute(&format!(
            "INSERT INTO {} (\"ParentId\", \"Qty\") VALUES (1, -1)",
            q("Child")
        ))
        .await
        .is_err()
    );
    assert!(
        pg.batch_execute(&format!(
            "INSERT INTO {} (\"ParentId\", \"Qty\") VALUES (99, 1)",
            q("Child")
        ))
        .await
        .is_err()
    );
    assert!(
        pg.batch_execute(&format!(
            "INSERT INTO {} (\"Id\", \"Code\") VALUES (4, 'one')",
            q("Parent")
        ))
        .await
        .is_err()
    );
    pg.batch_execute(&format!("DELETE FROM {} WHERE \"Id\" = 1", q("Parent")))
        .await
        .unwrap();
    let n: i64 = pg
        .query_one(&format!("SELECT count(*) FROM {}", q("Child")), &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 2);
    let ix: i64 = pg
        .query_one(
            "SELECT count(*) FROM pg_indexes WHERE schemaname = $1 AND indexname = 'IX_Child_ParentId'",
            &[&schema],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(ix, 1, "warnings: {warnings:?}");
}

#[tokio::test]
async fn killed_copy_resumes_without_loss_or_duplicates() {
    let (_server, source) = start_tds_server();
    let mut ms = source.connect().await.unwrap();
    ms_exec(
        &mut ms,
        "CREATE TABLE dbo.Numbers (Id int NOT NULL PRIMARY KEY, V nvarchar(20) NOT NULL)",
    )
    .await;
    for block in 0..10 {
        let values = (1..=100)
            .map(|i| {
                let id = block * 100 + i;
                format!("({id}, N'v{id}')")
            })
            .collect::<Vec<_>>()
            .join(", ");
        ms_exec(
            &mut ms,
            &format!("INSERT INTO dbo.Numbers (Id, V) VALUES {values}"),
        )
        .await;
    }

    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "e2e_resume").await;
    let mut engine = tds_engine(&source, &schema, "test/e2e_resume");
    // Two partitions of ~500 rows, chunks of 70 rows, killed after 3 chunks per task.
    engine.options.partitioning = PartitionOptions {
        min_rows_to_split: 100,
        rows_per_partition: 500,
        max_partitions_per_table: 4,
    };
    engine.copy = CopyOptions {
        chunk: mssql_pg_worker::copy::chunk::ChunkLimit::rows(70),
        fail_after_chunks: Some(3),
        digest: false,
        mode: Default::default(),
        retry: Default::default(),
    };
    let prepared = engine.prepare().await.unwrap();
    assert_eq!(prepared.plan.tasks.len(), 2, "{:?}", prepared.plan.tasks);
    assert!(engine.copy_all(&prepared.plan).await.is_err());
    let q = format!("SELECT count(*), count(DISTINCT \"Id\") FROM \"{schema}\".\"Numbers\"");
    let r = pg.query_one(&q, &[]).await.unwrap();
    assert_eq!(
        (r.get::<_, i64>(0), r.get::<_, i64>(1)),
        (420, 420),
        "3 chunks x 70 rows x 2 tasks committed"
    );

    // A new process: same plan, so it resumes from the checkpoints instead of starting over.
    engine.copy.fail_after_chunks = None;
    let prepared = engine.prepare().await.unwrap();
    assert!(prepared.resumed);
    let reports = engine.copy_all(&prepared.plan).await.unwrap();
    assert_eq!(reports.iter().map(|r| r.rows).sum::<u64>(), 580);
    assert!(reports.iter().all(|r| r.resumed));
    let r = pg.query_one(&q, &[]).await.unwrap();
    assert_eq!((r.get::<_, i64>(0), r.get::<_, i64>(1)), (1000, 1000));
    let r = pg
        .query_one(
            &format!(
                "SELECT sum(\"Id\")::bigint, bool_and(\"V\" = 'v' || \"Id\") FROM \"{schema}\".\"Numbers\""
            ),
            &[],
        )
        .await
        .unwrap();
    assert_eq!((r.get::<_, i64>(0), r.get::<_, bool>(1)), (500_500, true));
    engine.finalize(&prepared.plan).await.unwrap();
    let v = engine.verify(&prepared.plan).await.unwrap();
    assert!(v.iter().all(|t| t.ok) && v[0].source_rows == 1000, "{v:#?}");
}

#[tokio::test]
async fn nul_in_a_string_is_a_clear_error() {
    let (_server, source) = start_tds_server();
    let mut ms = source.connect().await.unwrap();
    ms_exec(
        &mut ms,
        "CREATE TABLE dbo.Bad (Id int NOT NULL PRIMARY KEY, S nvarchar(20) NULL)",
    )
    .await;
    ms_exec(&mut ms, "INSERT INTO dbo.Bad (Id, S) VALUES (1, N'fine')").await;
    ms.execute("INSERT INTO dbo.Bad (Id, S) VALUES (@P1, @P2)", &[&2i32, &"a\0b"])
        .await
        .unwrap();
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "e2e_nul").await;
    let engine = tds_engine(&source, &schema, "test/e2e_nul");
    let prepared = engine.prepare().await.unwrap();
    let err = format!("{:#}", engine.copy_all(&prepared.plan).await.unwrap_err());
    assert!(
        err.contains("dbo.Bad") && err.contains("Id=2") && err.contains("column S") && err.contains("NUL"),
        "{err}"
    );
}

#[tokio::test]
async fn composite_string_key_resumes_exactly() {
    let (_server, source) = start_tds_server();
    let mut ms = source.connect().await.unwrap();
    ms_exec(
        &mut ms,
        "CREATE TABLE dbo.Orders (Region varchar(10) NOT NULL, Id int NOT NULL, Note nvarchar(20) NULL, \
         CONSTRAINT PK_Orders PRIMARY KEY (Region, Id))",
    )
    .await;
    let mut values = Vec::new();
    for region in ["east", "North", "south", "West"] {
        for id in 1..=50 {
            values.push(format!("('{region}', {id}, N'{region}-{id}')"));
        }
    }
    ms_exec(
        &mut ms,
        &format!(
            "INSERT INTO dbo.Orders (Region, Id, Note) VALUES {}",
            values.join(", ")
        ),
    )
    .await;

    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "e2e_composite").await;
    let mut engine = tds_engine(&source, &schema, "test/e2e_composite");
    // Chunks by bytes alone (~30 rows of ~30 bytes): resumes cut at a byte budget are exact too.
    engine.copy = CopyOptions {
        chunk: mssql_pg_worker::copy::chunk::ChunkLimit::bytes(900),
        fail_after_chunks: Some(2),
        digest: false,
        mode: Default::default(),
        retry: Default::default(),
    };
    let prepared = engine.prepare().await.unwrap();
    assert!(engine.copy_all(&prepared.plan).await.is_err());
    engine.copy.fail_after_chunks = Some(3);
    let prepared = engine.prepare().await.unwrap();
    assert!(prepared.resumed);
    assert!(engine.copy_all(&prepared.plan).await.is_err());
    engine.copy.fail_after_chunks = None;
    let prepared = engine.prepare().await.unwrap();
    assert!(prepared.resumed);
    engine.copy_all(&prepared.plan).await.unwrap();
    let r = pg
        .query_one(
            &format!(
                "SELECT count(*), count(DISTINCT (\"Region\", \"Id\")), bool_and(\"Note\" = \"Region\" || '-' || \"Id\") \
                 FROM \"{schema}\".\"Orders\""
            ),
            &[],
        )
        .await
        .unwrap();
    assert_eq!(
        (r.get::<_, i64>(0), r.get::<_, i64>(1), r.get::<_, bool>(2)),
        (200, 200, true)
    );
    engine.finalize(&prepared.plan).await.unwrap();
    let v = engine.verify(&prepared.plan).await.unwrap();
    assert!(v.iter().all(|t| t.ok), "{v:#?}");
}
