#![allow(clippy::unwrap_used)]

use super::*;
use crate::catalog::store::tests::{col, sample, table};
use crate::catalog::{ComputedSpec, IdentitySpec};
use rusqlite::Connection;

fn refreshed(cat: &Catalog) -> Connection {
    let conn = Connection::open_in_memory().unwrap();
    crate::catalog::store::create_commits_table(&conn).unwrap();
    refresh(&conn, cat, 1, |t: &Table| if t.name == "orders" { 42 } else { 0 }).unwrap();
    conn
}

fn query(conn: &Connection, sql: &str) -> Vec<Vec<Stored>> {
    let mut stmt = conn.prepare(sql).unwrap();
    let n = stmt.column_count();
    stmt.query_map([], |r| (0..n).map(|i| r.get::<_, Stored>(i)).collect())
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

fn i(v: i64) -> Stored {
    Stored::Integer(v)
}

fn s(v: &str) -> Stored {
    Stored::Text(v.to_string())
}

#[test]
fn registry_is_case_insensitive_and_well_formed() {
    assert_eq!(view("SYS.TABLES").unwrap().name, "sys.tables");
    assert_eq!(
        view("information_schema.columns").unwrap().sqlite_name(),
        "temp.\"INFORMATION_SCHEMA.COLUMNS\""
    );
    assert!(view("sys.nothing").is_none());
    assert_eq!(
        view_by_parts(&["tempdb", "SYS", "columns"]).unwrap().name,
        "sys.columns"
    );
    assert_eq!(view_by_parts(&["sys", "tables"]).unwrap().name, "sys.tables");
    assert!(view_by_parts(&["tables"]).is_none());
    assert!(view_by_parts(&["srv", "db", "sys", "tables"]).is_none());
    let cols = view_columns("sys.columns").unwrap();
    let max_length = cols.iter().find(|c| c.name == "max_length").unwrap();
    assert_eq!(max_length.ty, SqlType::SmallInt);
    assert!(!max_length.nullable);
    for v in all_views() {
        let mut names: Vec<String> = v.columns.iter().map(|c| c.name.to_ascii_lowercase()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), v.columns.len(), "{}", v.name);
    }
    let last = view_columns("sys.identity_columns")
        .unwrap()
        .iter()
        .find(|c| c.name == "last_value");
    assert_eq!(last.unwrap().ty, SqlType::SqlVariant);
}

#[test]
fn every_view_is_materialised_with_its_columns() {
    let (cat, _, _) = sample();
    let conn = refreshed(&cat);
    for v in all_views() {
        let stmt = conn
            .prepare(&format!("SELECT * FROM {}", v.sqlite_name()))
            .unwrap();
        let names: Vec<&str> = stmt.column_names().collect();
        let expected: Vec<&str> = v.columns.iter().map(|c| c.name).collect();
        assert_eq!(names, expected, "{}", v.name);
    }
    // Refreshing again replaces rather than appends.
    refresh(&conn, &cat, 1, |_: &Table| 0).unwrap();
    assert_eq!(
        query(&conn, "SELECT count(*) FROM temp.\"sys.tables\""),
        vec![vec![i(2)]]
    );
}

#[test]
fn sys_columns_use_sql_server_conventions() {
    let (mut cat, c, o) = sample();
    cat.add_column(c, col("bio", SqlType::NVarChar { len: None }, true))
        .unwrap();
    cat.add_column(
        c,
        col(
            "price",
            SqlType::Decimal {
                precision: 10,
                scale: 2,
            },
            true,
        ),
    )
    .unwrap();
    cat.add_column(c, col("at", SqlType::DateTime2 { scale: 7 }, true))
        .unwrap();
    let conn = refreshed(&cat);
    let rows = query(
        &conn,
        &format!(
            "SELECT name, column_id, system_type_id, user_type_id, max_length, precision, scale, collation_name, \
             is_nullable, is_identity, is_ansi_padded FROM temp.\"sys.columns\" WHERE object_id = {c} ORDER BY column_id"
        ),
    );
    let coll = s("SQL_Latin1_General_CP1_CI_AS");
    assert_eq!(
        rows,
        vec![
            vec![
                s("id"),
                i(1),
                i(56),
                i(56),
                i(4),
                i(10),
                i(0),
                Stored::Null,
                i(0),
                i(1),
                i(0)
            ],
            vec![
                s("name"),
                i(2),
                i(231),
                i(231),
                i(100),
                i(0),
                i(0),
                coll.clone(),
                i(1),
                i(0),
                i(1)
            ],
            vec![
                s("bio"),
                i(3),
                i(231),
                i(231),
                i(-1),
                i(0),
                i(0),
                coll,
                i(1),
                i(0),
                i(1)
            ],
            vec![
                s("price"),
                i(4),
                i(106),
                i(106),
                i(9),
                i(10),
                i(2),
                Stored::Null,
                i(1),
                i(0),
                i(0)
            ],
            vec![
                s("at"),
                i(5),
                i(42),
                i(42),
                i(8),
                i(27),
                i(7),
                Stored::Null,
                i(1),
                i(0),
                i(0)
            ],
        ]
    );
    let df = cat
        .table(o)
        .unwrap()
        .column("qty")
        .unwrap()
        .default
        .as_ref()
        .unwrap()
        .object_id;
    let rows = query(
        &conn,
        &format!("SELECT default_object_id FROM temp.\"sys.columns\" WHERE object_id = {o} AND name = 'qty'"),
    );
    assert_eq!(rows, vec![vec![i(i64::from(df))]]);
    // The flags SQL Server reports as 0 are 0, not NULL.
    let rows = query(
        &conn,
        "SELECT count(*) FROM temp.\"sys.columns\" WHERE is_masked IS NULL OR is_filestream IS NULL",
    );
    assert_eq!(rows, vec![vec![i(0)]]);
}

#[test]
fn objects_tables_and_schemas() {
    let (cat, c, o) = sample();
    let conn = refreshed(&cat);
    let rows = query(
        &conn,
        "SELECT type, type_desc, count(*) FROM temp.\"sys.objects\" GROUP BY type, type_desc ORDER BY type",
    );
    assert_eq!(
        rows,
        vec![
            vec![s("C "), s("CHECK_CONSTRAINT"), i(1)],
            vec![s("D "), s("DEFAULT_CONSTRAINT"), i(1)],
            vec![s("F "), s("FOREIGN_KEY_CONSTRAINT"), i(1)],
            vec![s("PK"), s("PRIMARY_KEY_CONSTRAINT"), i(2)],
            vec![s("U "), s("USER_TABLE"), i(2)],
        ]
    );
    let rows = query(
        &conn,
        "SELECT t.name, s.name, t.max_column_id_used, t.lob_data_space_id, t.temporal_type FROM temp.\"sys.tables\" t \
         JOIN temp.\"sys.schemas\" s ON s.schema_id = t.schema_id ORDER BY t.object_id",
    );
    assert_eq!(
        rows,
        vec![
            vec![s("customers"), s("dbo"), i(2), i(0), i(0)],
            vec![s("orders"), s("dbo"), i(3), i(0), i(0)],
        ]
    );
    let rows = query(
        &conn,
        "SELECT parent_object_id FROM temp.\"sys.objects\" WHERE type = 'F'",
    );
    assert_eq!(rows, vec![vec![i(i64::from(o))]]);
    let rows = query(
        &conn,
        "SELECT object_id FROM temp.\"sys.tables\" WHERE name = 'CUSTOMERS'",
    );
    assert_eq!(rows, vec![vec![i(i64::from(c))]]);
    let created = query(
        &conn,
        &format!("SELECT create_date FROM temp.\"sys.objects\" WHERE object_id = {c}"),
    );
    let Stored::Text(created) = &created[0][0] else {
        panic!("{created:?}")
    };
    // datetime's text form: YYYY-MM-DD HH:MM:SS.fff
    assert_eq!(created.len(), 23, "{created}");
    assert_eq!(&created[10..11], " ");
    let schemas = query(
        &conn,
        "SELECT name FROM temp.\"sys.schemas\" WHERE schema_id < 5 ORDER BY schema_id",
    );
    assert_eq!(
        schemas,
        vec![
            vec![s("dbo")],
            vec![s("guest")],
            vec![s("INFORMATION_SCHEMA")],
            vec![s("sys")]
        ]
    );
}

#[test]
fn indexes_and_key_constraints() {
    let (mut cat, c, o) = sample();
    let mut ix = crate::catalog::store::tests::index("IX_orders_customer", &["customer_id"], false);
    ix.included = vec!["qty".to_string()];
    ix.keys[0].descending = true;
    cat.add_index(o, ix).unwrap();
    let h = cat
        .create_table(table("heap", vec![col("a", SqlType::Int, true)]), 1)
        .unwrap();
    let conn = refreshed(&cat);
    let rows = query(
        &conn,
        &format!(
            "SELECT object_id, name IS NULL, index_id, type, type_desc, is_unique, is_primary_key FROM temp.\"sys.indexes\" \
             WHERE object_id IN ({o}, {h}) ORDER BY object_id, index_id"
        ),
    );
    assert_eq!(
        rows,
        vec![
            vec![i(o.into()), i(0), i(1), i(1), s("CLUSTERED"), i(1), i(1)],
            vec![i(o.into()), i(0), i(2), i(2), s("NONCLUSTERED"), i(0), i(0)],
            vec![i(h.into()), i(1), i(0), i(0), s("HEAP"), i(0), i(0)],
        ]
    );
    let rows = query(
        &conn,
        &format!(
            "SELECT index_column_id, column_id, key_ordinal, is_descending_key, is_included_column \
             FROM temp.\"sys.index_columns\" WHERE object_id = {o} AND index_id = 2 ORDER BY index_column_id"
        ),
    );
    assert_eq!(
        rows,
        vec![
            vec![i(1), i(2), i(1), i(1), i(0)],
            vec![i(2), i(3), i(0), i(0), i(1)]
        ]
    );
    let rows = query(
        &conn,
        &format!(
            "SELECT k.name, k.type, k.unique_index_id, k.is_system_named, i.name FROM temp.\"sys.key_constraints\" k \
             JOIN temp.\"sys.indexes\" i ON i.object_id = k.parent_object_id AND i.index_id = k.unique_index_id \
             WHERE k.parent_object_id = {c}"
        ),
    );
    let pk = cat.table(c).unwrap().primary_key().unwrap().name.clone();
    assert_eq!(rows, vec![vec![s(&pk), s("PK"), i(1), i(1), s(&pk)]]);
}

#[test]
fn foreign_keys_checks_defaults() {
    let (cat, c, o) = sample();
    let conn = refreshed(&cat);
    let rows = query(
        &conn,
        "SELECT referenced_object_id, key_index_id, delete_referential_action, delete_referential_action_desc, \
         update_referential_action_desc, is_system_named, is_disabled FROM temp.\"sys.foreign_keys\"",
    );
    assert_eq!(
        rows,
        vec![vec![
            i(c.into()),
            i(1),
            i(1),
            s("CASCADE"),
            s("NO_ACTION"),
            i(1),
            i(0)
        ]]
    );
    let rows = query(
        &conn,
        "SELECT constraint_column_id, parent_object_id, parent_column_id, referenced_object_id, referenced_column_id \
         FROM temp.\"sys.foreign_key_columns\"",
    );
    assert_eq!(rows, vec![vec![i(1), i(o.into()), i(2), i(c.into()), i(1)]]);
    let rows = query(
        &conn,
        "SELECT name, parent_column_id, definition, is_system_named FROM temp.\"sys.check_constraints\"",
    );
    assert_eq!(rows, vec![vec![s("CK_qty"), i(0), s("([qty]>=(0))"), i(0)]]);
    let rows = query(
        &conn,
        "SELECT parent_column_id, definition, is_system_named, type FROM temp.\"sys.default_constraints\"",
    );
    assert_eq!(rows, vec![vec![i(3), s("((0))"), i(1), s("D ")]]);
}

#[test]
fn identity_and_computed_columns() {
    let (mut cat, c, _) = sample();
    let mut total = col("twice", SqlType::Int, true);
    total.computed = Some(ComputedSpec {
        definition: "([id]*(2))".to_string(),
        persisted: true,
    });
    cat.add_column(c, total).unwrap();
    let conn = refreshed(&cat);
    let sql = "SELECT name, seed_value, increment_value, last_value FROM temp.\"sys.identity_columns\"";
    assert_eq!(query(&conn, sql), vec![vec![s("id"), i(1), i(1), Stored::Null]]);
    cat.identity_next(c);
    cat.identity_next(c);
    refresh(&conn, &cat, 1, |_: &Table| 0).unwrap();
    assert_eq!(query(&conn, sql), vec![vec![s("id"), i(1), i(1), i(2)]]);
    let rows = query(
        &conn,
        "SELECT name, definition, is_persisted, is_computed FROM temp.\"sys.computed_columns\"",
    );
    assert_eq!(rows, vec![vec![s("twice"), s("([id]*(2))"), i(1), i(1)]]);
}

#[test]
fn partitions_follow_row_counts() {
    let (cat, c, o) = sample();
    let conn = refreshed(&cat);
    let sql = format!(
        "SELECT object_id, index_id, rows FROM temp.\"sys.partitions\" WHERE object_id IN ({c}, {o}) ORDER BY object_id"
    );
    assert_eq!(
        query(&conn, &sql),
        vec![vec![i(c.into()), i(1), i(0)], vec![i(o.into()), i(1), i(42)]]
    );
    refresh_row_counts(&conn, &cat, 1, |_: &Table| 7).unwrap();
    assert_eq!(
        query(&conn, &sql),
        vec![vec![i(c.into()), i(1), i(7)], vec![i(o.into()), i(1), i(7)]]
    );
    let rows = query(
        &conn,
        &format!(
            "SELECT row_count, used_page_count > 0 FROM temp.\"sys.dm_db_partition_stats\" WHERE object_id = {o}"
        ),
    );
    assert_eq!(rows, vec![vec![i(7), i(1)]]);
}

#[test]
fn information_schema() {
    let (cat, _, _) = sample();
    let conn = refreshed(&cat);
    let rows = query(
        &conn,
        "SELECT TABLE_CATALOG, TABLE_SCHEMA, TABLE_NAME, TABLE_TYPE FROM temp.\"INFORMATION_SCHEMA.TABLES\" ORDER BY TABLE_NAME",
    );
    assert_eq!(
        rows,
        vec![
            vec![s("shop"), s("dbo"), s("customers"), s("BASE TABLE")],
            vec![s("shop"), s("dbo"), s("orders"), s("BASE TABLE")],
        ]
    );
    let rows = query(
        &conn,
        "SELECT COLUMN_NAME, ORDINAL_POSITION, COLUMN_DEFAULT, IS_NULLABLE, DATA_TYPE, CHARACTER_MAXIMUM_LENGTH, \
         CHARACTER_OCTET_LENGTH, NUMERIC_PRECISION, NUMERIC_SCALE, CHARACTER_SET_NAME FROM temp.\"INFORMATION_SCHEMA.COLUMNS\" \
         ORDER BY TABLE_NAME, ORDINAL_POSITION",
    );
    let n = Stored::Null;
    assert_eq!(
        rows,
        vec![
            vec![
                s("id"),
                i(1),
                n.clone(),
                s("NO"),
                s("int"),
                n.clone(),
                n.clone(),
                i(10),
                i(0),
                n.clone()
            ],
            vec![
                s("name"),
                i(2),
                n.clone(),
                s("YES"),
                s("nvarchar"),
                i(50),
                i(100),
                n.clone(),
                n.clone(),
                s("UNICODE")
            ],
            vec![
                s("id"),
                i(1),
                n.clone(),
                s("NO"),
                s("bigint"),
                n.clone(),
                n.clone(),
                i(19),
                i(0),
                n.clone()
            ],
            vec![
                s("customer_id"),
                i(2),
                n.clone(),
                s("NO"),
                s("int"),
                n.clone(),
                n.clone(),
                i(10),
                i(0),
                n.clone()
            ],
            vec![
                s("qty"),
                i(3),
                s("((0))"),
                s("NO"),
                s("int"),
                n.clone(),
                n.clone(),
                i(10),
                i(0),
                n
            ],
        ]
    );
    let rows = query(
        &conn,
        "SELECT TABLE_NAME, CONSTRAINT_TYPE FROM temp.\"INFORMATION_SCHEMA.TABLE_CONSTRAINTS\" ORDER BY TABLE_NAME, CONSTRAINT_TYPE",
    );
    assert_eq!(
        rows,
        vec![
            vec![s("customers"), s("PRIMARY KEY")],
            vec![s("orders"), s("CHECK")],
            vec![s("orders"), s("FOREIGN KEY")],
            vec![s("orders"), s("PRIMARY KEY")],
        ]
    );
    let rows = query(
        &conn,
        "SELECT CONSTRAINT_NAME, TABLE_NAME, COLUMN_NAME, ORDINAL_POSITION FROM temp.\"INFORMATION_SCHEMA.KEY_COLUMN_USAGE\" \
         WHERE CONSTRAINT_NAME = 'PK_orders'",
    );
    assert_eq!(rows, vec![vec![s("PK_orders"), s("orders"), s("id"), i(1)]]);
    let pk = cat
        .find_table("dbo", "customers", 1)
        .unwrap()
        .primary_key()
        .unwrap()
        .name
        .clone();
    let rows = query(
        &conn,
        "SELECT UNIQUE_CONSTRAINT_SCHEMA, UNIQUE_CONSTRAINT_NAME, MATCH_OPTION, UPDATE_RULE, DELETE_RULE \
         FROM temp.\"INFORMATION_SCHEMA.REFERENTIAL_CONSTRAINTS\"",
    );
    assert_eq!(
        rows,
        vec![vec![s("dbo"), s(&pk), s("SIMPLE"), s("NO ACTION"), s("CASCADE")]]
    );
    let rows = query(
        &conn,
        "SELECT CONSTRAINT_NAME, CHECK_CLAUSE FROM temp.\"INFORMATION_SCHEMA.CHECK_CONSTRAINTS\"",
    );
    assert_eq!(rows, vec![vec![s("CK_qty"), s("([qty]>=(0))")]]);
    let rows = query(
        &conn,
        "SELECT COLUMN_NAME FROM temp.\"INFORMATION_SCHEMA.CONSTRAINT_COLUMN_USAGE\" WHERE CONSTRAINT_NAME = 'CK_qty'",
    );
    assert_eq!(rows, vec![vec![s("qty")]]);
}

#[test]
fn sys_types_is_static() {
    let conn = refreshed(&Catalog::new("db"));
    let rows = query(
        &conn,
        "SELECT name, system_type_id, user_type_id, max_length, precision, scale, is_nullable FROM temp.\"sys.types\" \
         WHERE name IN ('int', 'nvarchar', 'sysname', 'datetime2') ORDER BY user_type_id",
    );
    assert_eq!(
        rows,
        vec![
            vec![s("datetime2"), i(42), i(42), i(8), i(27), i(7), i(1)],
            vec![s("int"), i(56), i(56), i(4), i(10), i(0), i(1)],
            vec![s("nvarchar"), i(231), i(231), i(8000), i(0), i(0), i(1)],
            vec![s("sysname"), i(231), i(256), i(256), i(0), i(0), i(0)],
        ]
    );
}

#[test]
fn temp_tables_only_in_object_id_views_of_their_session() {
    let mut cat = Catalog::new("db");
    let mut id = col("id", SqlType::Int, false);
    id.identity = Some(IdentitySpec {
        seed: 10,
        increment: 1,
    });
    let mut t = table("#work", vec![id]);
    t.temporary = true;
    let tid = cat.create_table(t, 1).unwrap();
    let conn = refreshed(&cat);
    let sql = format!("SELECT name FROM temp.\"sys.columns\" WHERE object_id = {tid}");
    assert_eq!(query(&conn, &sql), vec![vec![s("id")]]);
    assert_eq!(
        query(&conn, "SELECT count(*) FROM temp.\"sys.tables\""),
        vec![vec![i(0)]]
    );
    // Another session does not see it.
    refresh(&conn, &cat, 2, |_: &Table| 0).unwrap();
    assert!(query(&conn, &sql).is_empty());
}

#[test]
fn refresh_inside_a_rolled_back_transaction_rolls_back_too() {
    let (mut cat, _, _) = sample();
    let conn = refreshed(&cat);
    conn.execute_batch("BEGIN").unwrap();
    cat.create_table(table("extra", vec![col("a", SqlType::Int, true)]), 1)
        .unwrap();
    refresh(&conn, &cat, 1, |_: &Table| 0).unwrap();
    assert_eq!(
        query(&conn, "SELECT count(*) FROM temp.\"sys.tables\""),
        vec![vec![i(3)]]
    );
    conn.execute_batch("ROLLBACK").unwrap();
    assert_eq!(
        query(&conn, "SELECT count(*) FROM temp.\"sys.tables\""),
        vec![vec![i(2)]]
    );
}

#[test]
fn databases_and_schemata() {
    let (cat, _, _) = sample();
    let conn = refreshed(&cat);
    let rows = query(
        &conn,
        "SELECT name, database_id, compatibility_level, collation_name FROM temp.\"sys.databases\" ORDER BY database_id",
    );
    assert_eq!(rows.len(), 5);
    assert_eq!(
        rows[4],
        vec![s("shop"), i(5), i(160), s("SQL_Latin1_General_CP1_CI_AS")]
    );
    let rows = query(
        &conn,
        "SELECT SCHEMA_NAME, SCHEMA_OWNER FROM temp.\"INFORMATION_SCHEMA.SCHEMATA\" WHERE SCHEMA_NAME IN ('dbo', 'sys')",
    );
    assert_eq!(rows, vec![vec![s("dbo"), s("dbo")], vec![s("sys"), s("sys")]]);
    for empty in [
        "sys.views",
        "sys.procedures",
        "sys.triggers",
        "sys.sql_modules",
        "sys.sequences",
        "INFORMATION_SCHEMA.VIEWS",
    ] {
        let sql = format!("SELECT count(*) FROM {}", view(empty).unwrap().sqlite_name());
        assert_eq!(query(&conn, &sql), vec![vec![i(0)]], "{empty}");
    }
}

#[test]
fn connections() {
    let (mut cat, _, _) = sample();
    cat.register_connection(
        51,
        crate::catalog::ConnectionInfo {
            net_packet_size: 32767,
            protocol_version: 0x7400_0004,
            client_net_address: "127.0.0.1".to_string(),
            client_tcp_port: Some(50000),
            login_name: "sa".to_string(),
            host_name: "h".to_string(),
            program_name: "worker".to_string(),
            connect_time: String::new(),
        },
    );
    let conn = refreshed(&cat);
    let rows = query(
        &conn,
        "SELECT net_packet_size, auth_scheme FROM temp.\"sys.dm_exec_connections\" WHERE session_id = 51",
    );
    assert_eq!(rows, vec![vec![i(32767), s("SQL")]]);
    let rows = query(
        &conn,
        "SELECT login_name, is_user_process FROM temp.\"sys.dm_exec_sessions\"",
    );
    assert_eq!(rows, vec![vec![s("sa"), i(1)]]);
    cat.drop_session(51);
    refresh(&conn, &cat, 1, |_: &Table| 0).unwrap();
    assert!(query(&conn, "SELECT * FROM temp.\"sys.dm_exec_connections\"").is_empty());
}

#[test]
fn refresh_views_rebuilds_only_what_changed() {
    let (mut cat, _, _) = sample();
    let conn = Connection::open_in_memory().unwrap();
    refresh_views(&conn, &cat, 1, &["SYS.TABLES", "sys.nothing"], |_: &Table| 0).unwrap();
    assert_eq!(
        query(&conn, "SELECT count(*) FROM temp.\"sys.tables\""),
        vec![vec![i(2)]]
    );
    // Views not asked for are not built.
    assert!(conn.prepare("SELECT * FROM temp.\"sys.columns\"").is_err());
    // An alias builds its base.
    refresh_views(&conn, &cat, 1, &["sys.all_columns"], |_: &Table| 0).unwrap();
    assert_eq!(
        query(&conn, "SELECT count(*) FROM temp.\"sys.all_columns\""),
        vec![vec![i(5)]]
    );
    // Unchanged catalog: a stale copy is left alone (proved by tampering with it).
    conn.execute_batch("DELETE FROM temp.\"sys.tables\"").unwrap();
    refresh_views(&conn, &cat, 1, &["sys.tables"], |_: &Table| 0).unwrap();
    assert_eq!(
        query(&conn, "SELECT count(*) FROM temp.\"sys.tables\""),
        vec![vec![i(0)]]
    );
    // A change rebuilds it.
    cat.create_table(table("more", vec![col("a", SqlType::Int, true)]), 1)
        .unwrap();
    refresh_views(&conn, &cat, 1, &["sys.tables"], |_: &Table| 0).unwrap();
    assert_eq!(
        query(&conn, "SELECT count(*) FROM temp.\"sys.tables\""),
        vec![vec![i(3)]]
    );
    // Row counts are always fresh.
    refresh_views(&conn, &cat, 1, &["sys.partitions"], |_: &Table| 9).unwrap();
    refresh_views(&conn, &cat, 1, &["sys.partitions"], |_: &Table| 11).unwrap();
    assert_eq!(
        query(&conn, "SELECT DISTINCT rows FROM temp.\"sys.partitions\""),
        vec![vec![i(11)]]
    );
}

#[test]
fn refresh_views_after_rollback_rebuilds() {
    let (mut cat, _, _) = sample();
    let conn = Connection::open_in_memory().unwrap();
    refresh_views(&conn, &cat, 1, &["sys.tables"], |_: &Table| 0).unwrap();
    // Another session's change is seen inside this connection's transaction, which then rolls
    // back: the views and their recorded versions roll back together, so the next call rebuilds.
    conn.execute_batch("BEGIN").unwrap();
    cat.create_table(table("other", vec![col("a", SqlType::Int, true)]), 2)
        .unwrap();
    refresh_views(&conn, &cat, 1, &["sys.tables"], |_: &Table| 0).unwrap();
    conn.execute_batch("ROLLBACK").unwrap();
    assert_eq!(
        query(&conn, "SELECT count(*) FROM temp.\"sys.tables\""),
        vec![vec![i(2)]]
    );
    refresh_views(&conn, &cat, 1, &["sys.tables"], |_: &Table| 0).unwrap();
    assert_eq!(
        query(&conn, "SELECT count(*) FROM temp.\"sys.tables\""),
        vec![vec![i(3)]]
    );
}
