#![allow(clippy::unwrap_used)]
//! The catalog end to end through `Session`: DDL lands in the catalog, and the system views and
//! metadata functions answer with SQL Server's values and column types (the worker's
//! introspection queries are used as they are).
mod common;
use common::*;
use tds_testserver_engine::{SqlType, Value};

const SCHEMA: &str = "
    CREATE TABLE dbo.customers (
        id int IDENTITY(1,1) NOT NULL CONSTRAINT PK_customers PRIMARY KEY,
        name nvarchar(50) NOT NULL,
        email varchar(200) NULL,
        balance decimal(12,2) NOT NULL DEFAULT 0,
        created datetime2(7) NOT NULL DEFAULT getdate(),
        notes nvarchar(max) NULL
    );
    CREATE TABLE dbo.orders (
        id bigint NOT NULL PRIMARY KEY,
        customer_id int NOT NULL CONSTRAINT FK_orders_customers REFERENCES dbo.customers (id) ON DELETE CASCADE,
        qty int NOT NULL CONSTRAINT CK_orders_qty CHECK (qty >= 0),
        label nchar(10) NULL
    );
    CREATE INDEX IX_orders_customer ON dbo.orders (customer_id DESC) INCLUDE (qty);
";

fn setup() -> (
    std::sync::Arc<tds_testserver_engine::Engine>,
    tds_testserver_engine::Session,
) {
    let (e, mut s) = session();
    exec(&mut s, SCHEMA);
    (e, s)
}

fn int(s: &mut tds_testserver_engine::Session, sql: &str) -> i32 {
    match scalar(s, sql) {
        Value::Int(v) => v,
        other => panic!("{sql}: {other:?}"),
    }
}

fn txt(v: &str) -> Value {
    Value::String(v.to_string())
}

#[test]
fn tables_joined_with_schemas() {
    let (_e, mut s) = setup();
    let (cols, rows) = query(
        &mut s,
        "SELECT t.object_id, s.name, t.name FROM sys.tables t JOIN sys.schemas s ON s.schema_id = t.schema_id \
         WHERE s.name = 'dbo' AND t.is_ms_shipped = 0 ORDER BY t.name",
    );
    assert_eq!(cols[0].ty, SqlType::Int);
    assert_eq!(cols[1].ty, SqlType::NVarChar { len: Some(128) });
    let customers = int(&mut s, "SELECT OBJECT_ID('dbo.customers')");
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0], vec![Value::Int(customers), txt("dbo"), txt("customers")]);
    assert_eq!(rows[1][2], txt("orders"));
}

#[test]
fn columns_have_sql_server_sizes_and_types() {
    let (_e, mut s) = setup();
    let (cols, rows) = query(
        &mut s,
        "SELECT column_id, name, system_type_id, user_type_id, max_length, precision, scale, is_nullable, is_identity, \
         is_computed FROM sys.columns WHERE object_id = OBJECT_ID('customers') ORDER BY column_id",
    );
    let tys: Vec<SqlType> = cols.iter().map(|c| c.ty).collect();
    assert_eq!(
        tys,
        vec![
            SqlType::Int,
            SqlType::NVarChar { len: Some(128) },
            SqlType::TinyInt,
            SqlType::Int,
            SqlType::SmallInt,
            SqlType::TinyInt,
            SqlType::TinyInt,
            SqlType::Bit,
            SqlType::Bit,
            SqlType::Bit,
        ]
    );
    let row = |id: i32, name: &str, ty: u8, len: i16, p: u8, sc: u8, null: bool, ident: bool| {
        vec![
            Value::Int(id),
            txt(name),
            Value::TinyInt(ty),
            Value::Int(i32::from(ty)),
            Value::SmallInt(len),
            Value::TinyInt(p),
            Value::TinyInt(sc),
            Value::Bit(null),
            Value::Bit(ident),
            Value::Bit(false),
        ]
    };
    assert_eq!(
        rows,
        vec![
            row(1, "id", 56, 4, 10, 0, false, true),
            row(2, "name", 231, 100, 0, 0, false, false),
            row(3, "email", 167, 200, 0, 0, true, false),
            row(4, "balance", 106, 9, 12, 2, false, false),
            row(5, "created", 42, 8, 27, 7, false, false),
            row(6, "notes", 231, -1, 0, 0, true, false),
        ]
    );
}

#[test]
fn constraints_in_normal_form() {
    let (_e, mut s) = setup();
    let (_, rows) = query(
        &mut s,
        "SELECT c.name, d.definition FROM sys.default_constraints d JOIN sys.columns c \
         ON c.object_id = d.parent_object_id AND c.column_id = d.parent_column_id ORDER BY c.column_id",
    );
    assert_eq!(
        rows,
        vec![
            vec![txt("balance"), txt("((0))")],
            vec![txt("created"), txt("(getdate())")]
        ]
    );
    let (_, rows) = query(
        &mut s,
        "SELECT name, definition, is_disabled FROM sys.check_constraints",
    );
    assert_eq!(
        rows,
        vec![vec![txt("CK_orders_qty"), txt("([qty]>=(0))"), Value::Bit(false)]]
    );
    let (_, rows) = query(
        &mut s,
        "SELECT name, OBJECT_NAME(parent_object_id), OBJECT_NAME(referenced_object_id), delete_referential_action_desc, \
         update_referential_action_desc FROM sys.foreign_keys",
    );
    assert_eq!(
        rows,
        vec![vec![
            txt("FK_orders_customers"),
            txt("orders"),
            txt("customers"),
            txt("CASCADE"),
            txt("NO_ACTION")
        ]]
    );
    let (_, rows) = query(
        &mut s,
        "SELECT constraint_column_id, parent_column_id, referenced_column_id FROM sys.foreign_key_columns",
    );
    assert_eq!(rows, vec![vec![Value::Int(1), Value::Int(2), Value::Int(1)]]);
    let (_, rows) = query(
        &mut s,
        "SELECT k.name, k.type, i.index_id, i.is_primary_key FROM sys.key_constraints k JOIN sys.indexes i \
         ON i.object_id = k.parent_object_id AND i.index_id = k.unique_index_id WHERE k.parent_object_id = OBJECT_ID('customers')",
    );
    assert_eq!(
        rows,
        vec![vec![
            txt("PK_customers"),
            txt("PK"),
            Value::Int(1),
            Value::Bit(true)
        ]]
    );
}

#[test]
fn indexes_and_their_columns() {
    let (_e, mut s) = setup();
    let (_, rows) = query(
        &mut s,
        "SELECT index_id, name, is_unique, is_primary_key, type_desc FROM sys.indexes \
         WHERE object_id = OBJECT_ID('orders') ORDER BY index_id",
    );
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0][0], Value::Int(1));
    assert_eq!(rows[0][3], Value::Bit(true));
    assert_eq!(
        rows[1],
        vec![
            Value::Int(2),
            txt("IX_orders_customer"),
            Value::Bit(false),
            Value::Bit(false),
            txt("NONCLUSTERED")
        ]
    );
    let (_, rows) = query(
        &mut s,
        "SELECT key_ordinal, column_id, is_descending_key, is_included_column FROM sys.index_columns \
         WHERE object_id = OBJECT_ID('orders') AND index_id = 2 ORDER BY index_column_id",
    );
    assert_eq!(
        rows,
        vec![
            vec![
                Value::TinyInt(1),
                Value::Int(2),
                Value::Bit(true),
                Value::Bit(false)
            ],
            vec![
                Value::TinyInt(0),
                Value::Int(3),
                Value::Bit(false),
                Value::Bit(true)
            ],
        ]
    );
}

#[test]
fn identity_and_row_counts_follow_inserts() {
    let (_e, mut s) = setup();
    exec(
        &mut s,
        "INSERT INTO customers (name) VALUES (N'a'); INSERT INTO customers (name) VALUES (N'b'); \
         INSERT INTO customers (name) VALUES (N'c');",
    );
    let (_, rows) = query(
        &mut s,
        "SELECT CAST(seed_value AS bigint), CAST(increment_value AS bigint), CAST(last_value AS bigint) \
         FROM sys.identity_columns WHERE object_id = OBJECT_ID('customers')",
    );
    assert_eq!(
        rows,
        vec![vec![Value::BigInt(1), Value::BigInt(1), Value::BigInt(3)]]
    );
    let (cols, rows) = query(
        &mut s,
        "SELECT object_id, SUM(rows) FROM sys.partitions WHERE index_id IN (0, 1) AND object_id = OBJECT_ID('customers') \
         GROUP BY object_id",
    );
    assert_eq!(cols[1].ty, SqlType::BigInt);
    assert_eq!(rows[0][1], Value::BigInt(3));
    assert_eq!(
        scalar(&mut s, "SELECT IDENT_CURRENT('customers')"),
        Value::Decimal {
            mantissa: 3,
            scale: 0
        }
    );
    // Referenced by orders' foreign key: SQL Server refuses to truncate it.
    assert_eq!(error(&mut s, "TRUNCATE TABLE customers").number, 4712);
    exec(
        &mut s,
        "CREATE TABLE log (id bigint IDENTITY(100, 10) PRIMARY KEY, msg varchar(10)); \
         INSERT INTO log (msg) VALUES ('a'); INSERT INTO log (msg) VALUES ('b');",
    );
    assert_eq!(scalar(&mut s, "SELECT MAX(id) FROM log"), Value::BigInt(110));
    exec(&mut s, "TRUNCATE TABLE log; INSERT INTO log (msg) VALUES ('c');");
    assert_eq!(scalar(&mut s, "SELECT MAX(id) FROM log"), Value::BigInt(100));
    let (_, rows) = query(
        &mut s,
        "SELECT CAST(last_value AS bigint) FROM sys.identity_columns WHERE object_id = OBJECT_ID('log')",
    );
    assert_eq!(rows, vec![vec![Value::BigInt(100)]]);
}

#[test]
fn information_schema_columns() {
    let (_e, mut s) = setup();
    let (cols, rows) = query(
        &mut s,
        "SELECT COLUMN_NAME, DATA_TYPE, CHARACTER_MAXIMUM_LENGTH, IS_NULLABLE, COLUMN_DEFAULT \
         FROM INFORMATION_SCHEMA.COLUMNS WHERE TABLE_NAME = 'customers' ORDER BY ORDINAL_POSITION",
    );
    assert_eq!(cols[2].ty, SqlType::Int);
    assert_eq!(cols[3].ty, SqlType::VarChar { len: Some(3) });
    assert_eq!(
        rows[1],
        vec![
            txt("name"),
            txt("nvarchar"),
            Value::Int(50),
            txt("NO"),
            Value::Null
        ]
    );
    assert_eq!(
        rows[5],
        vec![
            txt("notes"),
            txt("nvarchar"),
            Value::Int(-1),
            txt("YES"),
            Value::Null
        ]
    );
    assert_eq!(rows[3][4], txt("((0))"));
}

#[test]
fn metadata_functions() {
    let (_e, mut s) = setup();
    let (cols, _) = query(
        &mut s,
        "SELECT OBJECT_ID('customers'), OBJECT_NAME(OBJECT_ID('customers'))",
    );
    assert_eq!(cols[0].ty, SqlType::Int);
    assert_eq!(cols[1].ty, SqlType::NVarChar { len: Some(128) });
    assert_eq!(scalar(&mut s, "SELECT OBJECT_ID('nope')"), Value::Null);
    assert_eq!(
        scalar(
            &mut s,
            "SELECT COLUMNPROPERTY(OBJECT_ID('customers'), 'id', 'IsIdentity')"
        ),
        Value::Int(1)
    );
    assert_eq!(
        scalar(
            &mut s,
            "SELECT OBJECTPROPERTY(OBJECT_ID('orders'), 'TableHasPrimaryKey')"
        ),
        Value::Int(1)
    );
    assert_eq!(scalar(&mut s, "SELECT SCHEMA_NAME()"), txt("dbo"));
    assert_eq!(scalar(&mut s, "SELECT TYPE_NAME(231)"), txt("nvarchar"));
    assert_eq!(scalar(&mut s, "SELECT DB_NAME()"), txt("testdb"));
    assert_eq!(
        scalar(
            &mut s,
            "SELECT CAST(SERVERPROPERTY('ProductVersion') AS nvarchar(128))"
        ),
        txt("16.0.4000.0")
    );
}

#[test]
fn ddl_errors_have_sql_server_numbers() {
    let (_e, mut s) = setup();
    assert_eq!(error(&mut s, "CREATE TABLE customers (a int)").number, 2714);
    assert_eq!(error(&mut s, "DROP TABLE customers").number, 3726);
    assert_eq!(
        error(
            &mut s,
            "CREATE TABLE x (a int CONSTRAINT FK_x REFERENCES missing (id))"
        )
        .number,
        1767
    );
    assert_eq!(
        error(&mut s, "CREATE INDEX IX_orders_customer ON orders (qty)").number,
        1913
    );
    assert_eq!(
        error(&mut s, "ALTER TABLE orders DROP CONSTRAINT nope").number,
        3728
    );
    // Nothing half-created is left behind.
    assert_eq!(scalar(&mut s, "SELECT OBJECT_ID('x')"), Value::Null);
}

#[test]
fn alter_table_shows_up() {
    let (_e, mut s) = setup();
    exec(
        &mut s,
        "ALTER TABLE orders ADD shipped bit NOT NULL CONSTRAINT DF_orders_shipped DEFAULT 0",
    );
    let (_, rows) = query(
        &mut s,
        "SELECT c.column_id, d.name, d.definition FROM sys.columns c JOIN sys.default_constraints d \
         ON d.object_id = c.default_object_id WHERE c.object_id = OBJECT_ID('orders') AND c.name = 'shipped'",
    );
    assert_eq!(
        rows,
        vec![vec![Value::Int(5), txt("DF_orders_shipped"), txt("((0))")]]
    );
    exec(
        &mut s,
        "ALTER TABLE orders DROP CONSTRAINT DF_orders_shipped; ALTER TABLE orders DROP COLUMN shipped",
    );
    assert_eq!(
        scalar(
            &mut s,
            "SELECT COUNT(*) FROM sys.columns WHERE object_id = OBJECT_ID('orders')"
        ),
        Value::Int(4)
    );
}

#[test]
fn rolled_back_ddl_disappears() {
    let (_e, mut s) = setup();
    exec(
        &mut s,
        "BEGIN TRANSACTION; CREATE TABLE scratch (a int); ROLLBACK;",
    );
    assert_eq!(
        scalar(&mut s, "SELECT COUNT(*) FROM sys.tables WHERE name = 'scratch'"),
        Value::Int(0)
    );
    assert_eq!(scalar(&mut s, "SELECT OBJECT_ID('scratch')"), Value::Null);
}

#[test]
fn temp_tables_belong_to_their_session() {
    let (e, mut s) = setup();
    exec(&mut s, "CREATE TABLE #work (a int)");
    let id = int(&mut s, "SELECT OBJECT_ID('tempdb..#work')");
    assert_eq!(
        scalar(
            &mut s,
            &format!("SELECT COUNT(*) FROM tempdb.sys.columns WHERE object_id = {id}")
        ),
        Value::Int(1)
    );
    let mut other = e.connect(None).unwrap();
    assert_eq!(
        scalar(&mut other, "SELECT OBJECT_ID('tempdb..#work')"),
        Value::Null
    );
    // A second session sees the first one's permanent tables.
    assert_eq!(
        scalar(&mut other, "SELECT COUNT(*) FROM sys.tables"),
        Value::Int(2)
    );
}

#[test]
fn concurrent_sessions_doing_ddl_and_reading_views() {
    let (e, mut s) = setup();
    let workers: Vec<_> = (0..3)
        .map(|w| {
            let e = std::sync::Arc::clone(&e);
            std::thread::spawn(move || {
                let mut s = e.connect(None).unwrap();
                for i in 0..15 {
                    let name = format!("w{w}_t{i}");
                    exec(
                        &mut s,
                        &format!("CREATE TABLE {name} (id int IDENTITY PRIMARY KEY, v int); INSERT INTO {name} (v) VALUES ({i})"),
                    );
                    let id = int(&mut s, &format!("SELECT OBJECT_ID('{name}')"));
                    let (_, rows) = query(
                        &mut s,
                        &format!("SELECT COUNT(*) FROM sys.columns WHERE object_id = {id}"),
                    );
                    assert_eq!(rows, vec![vec![Value::Int(2)]]);
                    let (_, rows) = query(
                        &mut s,
                        &format!("SELECT SUM(rows) FROM sys.partitions WHERE object_id = {id} AND index_id IN (0, 1)"),
                    );
                    assert_eq!(rows, vec![vec![Value::BigInt(1)]]);
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    assert_eq!(
        scalar(&mut s, "SELECT COUNT(*) FROM sys.tables"),
        Value::Int(2 + 3 * 15)
    );
    // Every object id is distinct.
    assert_eq!(
        scalar(
            &mut s,
            "SELECT COUNT(DISTINCT object_id) - COUNT(*) FROM sys.objects"
        ),
        Value::Int(0)
    );
}

#[test]
fn views_stay_usable_after_a_failing_statement_read_them() {
    let (_e, mut s) = setup();
    assert_eq!(
        error(&mut s, "SELECT CAST(name AS int) FROM sys.tables").number,
        245
    );
    assert_eq!(scalar(&mut s, "SELECT COUNT(*) FROM sys.tables"), Value::Int(2));
    exec(&mut s, "CREATE TABLE later (a int)");
    assert_eq!(
        error(
            &mut s,
            "SELECT CAST(name AS int) FROM sys.tables WHERE name = 'later'"
        )
        .number,
        245
    );
    assert_eq!(scalar(&mut s, "SELECT COUNT(*) FROM sys.tables"), Value::Int(3));
}

/// sys.allocation_units measures what a table's data takes: long values count in full, a
/// narrow table of as many rows takes far less, and an index has pages of its own.
#[test]
fn allocation_units_measure_the_data() {
    let (_e, mut s) = setup();
    exec(
        &mut s,
        "CREATE TABLE posts (id int PRIMARY KEY, body nvarchar(max)); \
         CREATE TABLE votes (id int PRIMARY KEY, post_id int); \
         CREATE INDEX votes_post ON votes (post_id);",
    );
    for i in 0..200 {
        exec(
            &mut s,
            &format!(
                "INSERT INTO posts VALUES ({i}, REPLICATE(N'x', 4000)); INSERT INTO votes VALUES ({i}, {i})"
            ),
        );
    }
    let used = |s: &mut _, table: &str, data: bool| {
        int(
            s,
            &format!(
                "SELECT CAST(COALESCE(SUM(a.used_pages), 0) AS int) FROM sys.partitions p \
                 JOIN sys.allocation_units a ON a.container_id = p.partition_id \
                 WHERE p.object_id = OBJECT_ID('{table}') AND p.index_id {}",
                if data { "IN (0, 1)" } else { "> 1" }
            ),
        )
    };
    // 200 values of 4000 characters: at least 800,000 bytes, 98 pages of 8 KB, in any encoding.
    let posts = used(&mut s, "posts", true);
    assert!(posts >= 98, "posts: {posts} pages");
    let votes = used(&mut s, "votes", true);
    assert!(
        (1..posts / 10).contains(&votes),
        "votes: {votes} pages, posts {posts}"
    );
    assert!(
        used(&mut s, "votes", false) >= 1,
        "the nonclustered index has pages"
    );
    let (_, rows) = query(
        &mut s,
        "SELECT type, type_desc FROM sys.allocation_units a JOIN sys.partitions p \
         ON a.container_id = p.partition_id WHERE p.object_id = OBJECT_ID('posts')",
    );
    assert_eq!(
        rows,
        vec![vec![Value::TinyInt(1), Value::String("IN_ROW_DATA".into())]]
    );
}

/// The rights a migration tool asks about before a run (`mssql-pg-worker check`), as SQL Server
/// answers them for the server's one login, a sysadmin entering as dbo.
#[test]
fn permission_functions_answer_for_the_sysadmin_login() {
    let (_e, mut s) = setup();
    for sql in [
        "SELECT HAS_PERMS_BY_NAME(NULL, NULL, 'VIEW SERVER STATE')",
        "SELECT HAS_PERMS_BY_NAME(NULL, N'DATABASE', N'CREATE TABLE')",
        "SELECT HAS_PERMS_BY_NAME(N'dbo', N'SCHEMA', N'SELECT')",
        "SELECT HAS_PERMS_BY_NAME(N'[dbo].[orders]', N'OBJECT', N'ALTER')",
        "SELECT IS_ROLEMEMBER('db_owner')",
        "SELECT CASE WHEN IS_ROLEMEMBER('db_ddladmin') = 1 OR IS_ROLEMEMBER('db_owner') = 1 THEN 1 ELSE 0 END",
    ] {
        assert_eq!(int(&mut s, sql), 1, "{sql}");
    }
    assert_eq!(int(&mut s, "SELECT IS_ROLEMEMBER('db_datareader')"), 0);
    assert_eq!(
        scalar(&mut s, "SELECT HAS_PERMS_BY_NAME(N'nope', N'SCHEMA', N'SELECT')"),
        Value::Null
    );
    let (cols, _) = query(&mut s, "SELECT HAS_PERMS_BY_NAME(N'dbo', N'SCHEMA', N'SELECT')");
    assert_eq!(cols[0].ty, SqlType::Int);
}
