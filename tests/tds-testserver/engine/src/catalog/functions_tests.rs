#![allow(clippy::unwrap_used)]

use super::*;
use crate::catalog::store::tests::{col, sample, table};
use rusqlite::Connection;

fn setup() -> (Connection, Arc<RwLock<Catalog>>, i32, i32) {
    let (cat, c, o) = sample();
    let catalog = Arc::new(RwLock::new(cat));
    let conn = Connection::open_in_memory().unwrap();
    register(
        &conn,
        FunctionContext {
            catalog: Arc::clone(&catalog),
            session_id: 1,
            database: "shop".to_string(),
        },
    )
    .unwrap();
    (conn, catalog, c, o)
}

fn one(conn: &Connection, sql: &str) -> Stored {
    conn.query_row(sql, [], |r| r.get::<_, Stored>(0)).unwrap()
}

fn i(v: impl Into<i64>) -> Stored {
    Stored::Integer(v.into())
}

fn s(v: &str) -> Stored {
    Stored::Text(v.to_string())
}

#[test]
fn name_parsing() {
    let n = |db: Option<&str>, schema: Option<&str>, name: &str| ObjectName {
        database: db.map(str::to_string),
        schema: schema.map(str::to_string),
        name: name.to_string(),
    };
    assert_eq!(parse_object_name("t"), Some(n(None, None, "t")));
    assert_eq!(parse_object_name("dbo.t"), Some(n(None, Some("dbo"), "t")));
    assert_eq!(
        parse_object_name("[my db].[dbo].[a.b]"),
        Some(n(Some("my db"), Some("dbo"), "a.b"))
    );
    assert_eq!(
        parse_object_name("\"sales\".\"order\"\"s\""),
        Some(n(None, Some("sales"), "order\"s"))
    );
    assert_eq!(parse_object_name("[x]]y]"), Some(n(None, None, "x]y")));
    assert_eq!(
        parse_object_name("tempdb..#tmp"),
        Some(n(Some("tempdb"), None, "#tmp"))
    );
    assert_eq!(parse_object_name("a.b.c.d"), None);
    assert_eq!(parse_object_name("dbo."), None);
    assert_eq!(parse_object_name("[unterminated"), None);
}

#[test]
fn object_id_resolves_names() {
    let (conn, catalog, c, o) = setup();
    for name in [
        "customers",
        "dbo.customers",
        "[dbo].[Customers]",
        "shop.dbo.customers",
        "shop..customers",
        "\"dbo\".\"customers\"",
    ] {
        assert_eq!(one(&conn, &format!("SELECT OBJECT_ID('{name}')")), i(c), "{name}");
    }
    assert_eq!(
        one(&conn, "SELECT object_id('otherdb.dbo.customers')"),
        Stored::Null
    );
    assert_eq!(one(&conn, "SELECT OBJECT_ID('sys.customers')"), Stored::Null);
    assert_eq!(one(&conn, "SELECT OBJECT_ID('nope')"), Stored::Null);
    assert_eq!(one(&conn, "SELECT OBJECT_ID(NULL)"), Stored::Null);
    assert_eq!(one(&conn, "SELECT OBJECT_ID('dbo.orders', 'U')"), i(o));
    assert_eq!(one(&conn, "SELECT OBJECT_ID('dbo.orders', 'V')"), Stored::Null);
    assert_eq!(one(&conn, "SELECT OBJECT_ID('CK_qty', 'C') IS NOT NULL"), i(1));
    assert_eq!(
        one(&conn, "SELECT OBJECT_ID('PK_orders', 'PK') IS NOT NULL"),
        i(1)
    );
    // Temp tables: the session's own only.
    let mut t = table("#tmp", vec![col("a", SqlType::Int, true)]);
    t.temporary = true;
    let tmp = catalog.write().unwrap().create_table(t.clone(), 1).unwrap();
    catalog.write().unwrap().create_table(t, 2).unwrap();
    assert_eq!(one(&conn, "SELECT OBJECT_ID('tempdb..#tmp')"), i(tmp));
    assert_eq!(one(&conn, "SELECT OBJECT_ID('#tmp')"), i(tmp));
    assert_eq!(one(&conn, "SELECT OBJECT_ID('shop..#tmp')"), Stored::Null);
    assert_eq!(one(&conn, &format!("SELECT OBJECT_NAME({tmp})")), s("#tmp"));
}

#[test]
fn names_of_ids() {
    let (conn, catalog, c, o) = setup();
    assert_eq!(one(&conn, &format!("SELECT OBJECT_NAME({c})")), s("customers"));
    assert_eq!(one(&conn, &format!("SELECT OBJECT_NAME({c}, 5)")), s("customers"));
    assert_eq!(one(&conn, &format!("SELECT OBJECT_SCHEMA_NAME({o})")), s("dbo"));
    assert_eq!(one(&conn, "SELECT OBJECT_NAME(1)"), Stored::Null);
    let ck = one(&conn, "SELECT OBJECT_NAME(OBJECT_ID('CK_qty'))");
    assert_eq!(ck, s("CK_qty"));
    assert_eq!(one(&conn, "SELECT SCHEMA_NAME()"), s("dbo"));
    assert_eq!(one(&conn, "SELECT SCHEMA_NAME(4)"), s("sys"));
    assert_eq!(one(&conn, "SELECT SCHEMA_NAME(99)"), Stored::Null);
    assert_eq!(one(&conn, "SELECT SCHEMA_ID()"), i(1));
    assert_eq!(one(&conn, "SELECT SCHEMA_ID('INFORMATION_SCHEMA')"), i(3));
    catalog.write().unwrap().create_schema("sales").unwrap();
    // Functions see DDL made after registration.
    assert_eq!(one(&conn, "SELECT SCHEMA_ID('Sales')"), i(5));
    assert_eq!(one(&conn, "SELECT TYPE_NAME(231)"), s("nvarchar"));
    assert_eq!(one(&conn, "SELECT TYPE_NAME(256)"), s("sysname"));
    assert_eq!(one(&conn, "SELECT TYPE_ID('datetime2')"), i(42));
    assert_eq!(one(&conn, "SELECT TYPE_ID('[INT]')"), i(56));
    assert_eq!(one(&conn, "SELECT TYPE_ID('nope')"), Stored::Null);
    assert_eq!(one(&conn, "SELECT DB_NAME()"), s("shop"));
    assert_eq!(one(&conn, "SELECT DB_ID()"), i(5));
    assert_eq!(one(&conn, "SELECT DB_ID('tempdb')"), i(2));
    assert_eq!(one(&conn, "SELECT DB_NAME(5)"), s("shop"));
    assert_eq!(one(&conn, "SELECT DB_NAME(1)"), s("master"));
    assert_eq!(one(&conn, "SELECT DB_ID('nope')"), Stored::Null);
}

#[test]
fn column_object_and_index_properties() {
    let (conn, catalog, c, o) = setup();
    let cp = |col: &str, prop: &str| one(&conn, &format!("SELECT COLUMNPROPERTY({c}, '{col}', '{prop}')"));
    assert_eq!(cp("id", "IsIdentity"), i(1));
    assert_eq!(cp("name", "isidentity"), i(0));
    assert_eq!(cp("id", "AllowsNull"), i(0));
    assert_eq!(cp("name", "AllowsNull"), i(1));
    assert_eq!(cp("name", "ColumnId"), i(2));
    assert_eq!(cp("name", "Precision"), i(50));
    assert_eq!(cp("name", "CharMaxLen"), i(100));
    assert_eq!(cp("name", "Scale"), Stored::Null);
    assert_eq!(cp("id", "Precision"), i(10));
    assert_eq!(cp("id", "Scale"), i(0));
    assert_eq!(cp("id", "IsComputed"), i(0));
    assert_eq!(cp("id", "IsRowGuidCol"), i(0));
    assert_eq!(cp("id", "NoSuchProperty"), Stored::Null);
    assert_eq!(cp("nope", "IsIdentity"), Stored::Null);
    let op = |id: i32, prop: &str| one(&conn, &format!("SELECT OBJECTPROPERTY({id}, '{prop}')"));
    assert_eq!(op(c, "TableHasPrimaryKey"), i(1));
    assert_eq!(op(c, "IsUserTable"), i(1));
    assert_eq!(op(c, "IsTable"), i(1));
    assert_eq!(op(c, "TableHasIdentity"), i(1));
    assert_eq!(op(o, "TableHasIdentity"), i(0));
    let heap = catalog
        .write()
        .unwrap()
        .create_table(table("heap", vec![col("a", SqlType::Int, true)]), 1)
        .unwrap();
    assert_eq!(op(heap, "TableHasPrimaryKey"), i(0));
    assert_eq!(
        one(&conn, "SELECT OBJECTPROPERTY(OBJECT_ID('CK_qty'), 'IsUserTable')"),
        i(0)
    );
    assert_eq!(
        one(&conn, "SELECT OBJECTPROPERTY(OBJECT_ID('CK_qty'), 'IsCheckCnst')"),
        i(1)
    );
    assert_eq!(op(12345, "IsUserTable"), Stored::Null);
    assert_eq!(
        one(
            &conn,
            &format!("SELECT INDEXPROPERTY({o}, 'PK_orders', 'IsUnique')")
        ),
        i(1)
    );
    assert_eq!(
        one(
            &conn,
            &format!("SELECT INDEXPROPERTY({o}, 'pk_orders', 'IsClustered')")
        ),
        i(1)
    );
    assert_eq!(
        one(
            &conn,
            &format!("SELECT INDEXPROPERTY({o}, 'nope', 'IsClustered')")
        ),
        Stored::Null
    );
}

#[test]
fn identity_functions() {
    let (conn, catalog, c, _) = setup();
    assert_eq!(one(&conn, "SELECT IDENT_SEED('dbo.customers')"), i(1));
    assert_eq!(one(&conn, "SELECT IDENT_INCR('customers')"), i(1));
    assert_eq!(one(&conn, "SELECT IDENT_CURRENT('customers')"), i(1));
    assert_eq!(one(&conn, "SELECT IDENT_CURRENT('orders')"), Stored::Null);
    assert_eq!(one(&conn, "SELECT IDENT_CURRENT('nope')"), Stored::Null);
    {
        let mut cat = catalog.write().unwrap();
        cat.identity_next(c);
        cat.identity_next(c);
        cat.identity_next(c);
    }
    assert_eq!(one(&conn, "SELECT IDENT_CURRENT('customers')"), i(3));
}

#[test]
fn server_properties() {
    let (conn, _, _, _) = setup();
    assert_eq!(
        one(&conn, "SELECT SERVERPROPERTY('ProductVersion')"),
        s("16.0.4000.0")
    );
    assert_eq!(
        one(&conn, "SELECT SERVERPROPERTY('collation')"),
        s("SQL_Latin1_General_CP1_CI_AS")
    );
    assert_eq!(one(&conn, "SELECT SERVERPROPERTY('EngineEdition')"), i(3));
    assert_eq!(
        one(&conn, "SELECT SERVERPROPERTY('Edition')"),
        s("Developer Edition (64-bit)")
    );
    assert_eq!(one(&conn, "SELECT SERVERPROPERTY('Nope')"), Stored::Null);
}

#[test]
fn permissions_of_the_all_powerful_login() {
    let (conn, _, _, _) = setup();
    let q = |sql: &str| one(&conn, &format!("SELECT {sql}"));
    assert_eq!(q("HAS_PERMS_BY_NAME(NULL, NULL, 'VIEW SERVER STATE')"), i(1));
    assert_eq!(q("HAS_PERMS_BY_NAME(NULL, 'DATABASE', 'CREATE TABLE')"), i(1));
    assert_eq!(q("HAS_PERMS_BY_NAME('shop', 'DATABASE', 'create schema')"), i(1));
    assert_eq!(
        q("HAS_PERMS_BY_NAME('dbo', 'SCHEMA', 'VIEW CHANGE TRACKING')"),
        i(1)
    );
    assert_eq!(q("HAS_PERMS_BY_NAME('dbo.customers', 'OBJECT', 'ALTER')"), i(1));
    assert_eq!(
        q("HAS_PERMS_BY_NAME('dbo.customers', 'OBJECT', 'SELECT', 'name', 'COLUMN')"),
        i(1)
    );
    // SQL Server answers NULL, not 0, for what does not exist or is not a permission.
    assert_eq!(q("HAS_PERMS_BY_NAME('nope', 'SCHEMA', 'SELECT')"), Stored::Null);
    assert_eq!(
        q("HAS_PERMS_BY_NAME('dbo.nope', 'OBJECT', 'SELECT')"),
        Stored::Null
    );
    assert_eq!(
        q("HAS_PERMS_BY_NAME('elsewhere', 'DATABASE', 'CONNECT')"),
        Stored::Null
    );
    assert_eq!(q("HAS_PERMS_BY_NAME('dbo', 'SCHEMA', 'FLY')"), Stored::Null);
    assert_eq!(q("HAS_PERMS_BY_NAME(NULL, 'NOPE', 'SELECT')"), Stored::Null);

    // The login enters as dbo: db_owner, not the other fixed roles it needs no membership of.
    assert_eq!(q("IS_ROLEMEMBER('db_owner')"), i(1));
    assert_eq!(q("IS_ROLEMEMBER('public')"), i(1));
    assert_eq!(q("IS_ROLEMEMBER('db_ddladmin')"), i(0));
    assert_eq!(q("IS_ROLEMEMBER('db_owner', 'dbo')"), i(1));
    assert_eq!(q("IS_ROLEMEMBER('no_such_role')"), Stored::Null);
    assert_eq!(q("IS_ROLEMEMBER('db_owner', 'someone')"), Stored::Null);
}

#[test]
fn return_types() {
    assert_eq!(return_type("OBJECT_ID"), Some(SqlType::Int));
    assert_eq!(
        return_type("object_name"),
        Some(SqlType::NVarChar { len: Some(128) })
    );
    assert_eq!(return_type("ColumnProperty"), Some(SqlType::Int));
    assert_eq!(
        return_type("IDENT_SEED"),
        Some(SqlType::Numeric {
            precision: 38,
            scale: 0
        })
    );
    assert_eq!(return_type("SERVERPROPERTY"), Some(SqlType::SqlVariant));
    assert_eq!(return_type("len"), None);
}
