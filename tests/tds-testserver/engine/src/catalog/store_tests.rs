#![allow(clippy::unwrap_used)]

use super::*;
use crate::catalog::IndexKeyDef;

pub(crate) fn col(name: &str, ty: SqlType, nullable: bool) -> ColumnDef {
    ColumnDef {
        name: name.to_string(),
        ty,
        nullable,
        identity: None,
        computed: None,
        default: None,
        collation: None,
        rowguidcol: false,
        user_type: None,
    }
}

pub(crate) fn key(cols: &[&str]) -> Vec<IndexKeyDef> {
    cols.iter()
        .map(|c| IndexKeyDef {
            column: c.to_string(),
            descending: false,
        })
        .collect()
}

pub(crate) fn pk(name: Option<&str>, cols: &[&str]) -> IndexDef {
    IndexDef {
        name: name.map(str::to_string),
        clustered: true,
        unique: true,
        primary_key: true,
        unique_constraint: false,
        keys: key(cols),
        included: Vec::new(),
        filter: None,
    }
}

pub(crate) fn index(name: &str, cols: &[&str], unique: bool) -> IndexDef {
    IndexDef {
        name: Some(name.to_string()),
        clustered: false,
        unique,
        primary_key: false,
        unique_constraint: false,
        keys: key(cols),
        included: Vec::new(),
        filter: None,
    }
}

pub(crate) fn table(name: &str, columns: Vec<ColumnDef>) -> TableDef {
    TableDef {
        schema: "dbo".to_string(),
        name: name.to_string(),
        columns,
        indexes: Vec::new(),
        foreign_keys: Vec::new(),
        checks: Vec::new(),
        temporary: false,
    }
}

pub(crate) fn fk(name: Option<&str>, cols: &[&str], target: &str, target_cols: &[&str]) -> ForeignKeyDef {
    ForeignKeyDef {
        name: name.map(str::to_string),
        columns: cols.iter().map(|c| c.to_string()).collect(),
        referenced_schema: "dbo".to_string(),
        referenced_table: target.to_string(),
        referenced_columns: target_cols.iter().map(|c| c.to_string()).collect(),
        on_delete: ReferentialAction::Cascade,
        on_update: ReferentialAction::NoAction,
        disabled: false,
        not_trusted: false,
    }
}

/// customers(id int identity PK, name nvarchar(50)) and orders(id PK, customer_id FK, qty CHECK,
/// created DEFAULT).
pub(crate) fn sample() -> (Catalog, i32, i32) {
    let mut cat = Catalog::new("shop");
    let mut id = col("id", SqlType::Int, false);
    id.identity = Some(IdentitySpec {
        seed: 1,
        increment: 1,
    });
    let mut customers = table(
        "customers",
        vec![id, col("name", SqlType::NVarChar { len: Some(50) }, true)],
    );
    customers.indexes.push(pk(None, &["id"]));
    let c = cat.create_table(customers, 1).unwrap();

    let mut qty = col("qty", SqlType::Int, false);
    qty.default = Some(DefaultSpec {
        name: None,
        definition: "((0))".to_string(),
    });
    let mut orders = table(
        "orders",
        vec![
            col("id", SqlType::BigInt, true),
            col("customer_id", SqlType::Int, false),
            qty,
        ],
    );
    orders.indexes.push(pk(Some("PK_orders"), &["id"]));
    orders
        .foreign_keys
        .push(fk(None, &["customer_id"], "customers", &["id"]));
    orders.checks.push(CheckDef {
        name: Some("CK_qty".to_string()),
        definition: "([qty]>=(0))".to_string(),
        column: None,
        disabled: false,
        not_trusted: false,
    });
    let o = cat.create_table(orders, 1).unwrap();
    (cat, c, o)
}

#[test]
fn create_table_assigns_ids_names_and_indexes() {
    let (cat, c, o) = sample();
    assert_eq!(c, 245_575_913);
    assert!(o > c);
    let customers = cat.table(c).unwrap();
    let pk = customers.primary_key().unwrap();
    assert_eq!(pk.index_id, 1);
    assert!(pk.system_named);
    assert!(pk.name.starts_with("PK__customer__"), "{}", pk.name);
    assert_eq!(pk.name.len(), "PK__customer__".len() + 16);
    let orders = cat.table(o).unwrap();
    // PK columns become NOT NULL.
    assert!(!orders.column("id").unwrap().nullable);
    let d = orders.column("qty").unwrap().default.as_ref().unwrap();
    assert!(d.name.starts_with("DF__orders__qty__"), "{}", d.name);
    assert_eq!(orders.foreign_keys[0].referenced_object_id, c);
    assert_eq!(orders.foreign_keys[0].key_index_id, 1);
    assert_eq!(orders.checks[0].name, "CK_qty");
    // Every object has its own id.
    let objects = cat.objects();
    let mut ids: Vec<i32> = objects.iter().map(|o| o.object_id).collect();
    ids.dedup();
    assert_eq!(ids.len(), objects.len());
    assert_eq!(objects.len(), 2 + 1 + 4);
}

#[test]
fn duplicate_names_are_2714_and_leave_nothing_behind() {
    let (mut cat, _, _) = sample();
    let version = cat.version();
    let e = cat
        .create_table(table("Orders", vec![col("a", SqlType::Int, true)]), 1)
        .unwrap_err();
    assert_eq!(e.number, 2714);
    assert_eq!(
        e.message,
        "There is already an object named 'Orders' in the database."
    );
    // A constraint name is an object name too.
    let mut t = table("t2", vec![col("a", SqlType::Int, false)]);
    t.indexes.push(pk(Some("pk_orders"), &["a"]));
    assert_eq!(cat.create_table(t, 1).unwrap_err().number, 2714);
    assert_eq!(cat.version(), version);
    assert!(cat.find_table("dbo", "t2", 1).is_none());
    // The failed attempts did not consume ids.
    let id = cat
        .create_table(table("t3", vec![col("a", SqlType::Int, true)]), 1)
        .unwrap();
    let max_before = cat
        .objects()
        .iter()
        .map(|o| o.object_id)
        .filter(|&i| i != id)
        .max()
        .unwrap();
    assert_eq!(id, max_before + 16_000_057);
}

#[test]
fn foreign_key_errors() {
    let (mut cat, _, _) = sample();
    let mut t = table("lines", vec![col("order_id", SqlType::BigInt, false)]);
    t.foreign_keys
        .push(fk(Some("FK_x"), &["order_id"], "missing", &["id"]));
    let e = cat.create_table(t.clone(), 1).unwrap_err();
    assert_eq!(e.number, 1767);
    assert_eq!(
        e.message,
        "Foreign key 'FK_x' references invalid table 'missing'."
    );
    t.foreign_keys[0] = fk(Some("FK_x"), &["order_id"], "customers", &["name"]);
    assert_eq!(cat.create_table(t.clone(), 1).unwrap_err().number, 1776);
    t.foreign_keys[0] = fk(Some("FK_x"), &["order_id"], "orders", &[]);
    let id = cat.create_table(t, 1).unwrap();
    assert_eq!(cat.table(id).unwrap().foreign_keys[0].referenced_columns, vec![1]);
}

#[test]
fn self_reference_and_drop_rules() {
    let (mut cat, c, o) = sample();
    let mut t = table(
        "emp",
        vec![col("id", SqlType::Int, false), col("boss", SqlType::Int, true)],
    );
    t.indexes.push(pk(None, &["id"]));
    t.foreign_keys.push(fk(None, &["boss"], "emp", &["id"]));
    let emp = cat.create_table(t, 1).unwrap();
    // Referenced by orders' FK.
    let e = cat.drop_table(c).unwrap_err();
    assert_eq!(e.number, 3726);
    assert_eq!(
        e.message,
        "Could not drop object 'dbo.customers' because it is referenced by a FOREIGN KEY constraint."
    );
    // A self-reference does not block.
    cat.drop_table(emp).unwrap();
    cat.drop_table(o).unwrap();
    cat.drop_table(c).unwrap();
    assert!(cat.objects().is_empty());
}

#[test]
fn temp_tables_are_per_session() {
    let mut cat = Catalog::new("db");
    let mut t = table("#work", vec![col("a", SqlType::Int, true)]);
    t.temporary = true;
    let id = cat.create_table(t.clone(), 7).unwrap();
    assert!(id < 0);
    assert_eq!(cat.find_table("dbo", "#WORK", 7).map(|t| t.object_id), Some(id));
    assert!(cat.find_table("dbo", "#work", 8).is_none());
    // Another session may use the same name.
    cat.create_table(t.clone(), 8).unwrap();
    // Foreign keys on temp tables are skipped, so they never block dropping their target.
    let target = cat.create_table(table("target", vec![col("id", SqlType::Int, false)]), 7);
    let target = target.unwrap();
    cat.add_index(target, pk(None, &["id"])).unwrap();
    let mut child = table("#child", vec![col("t", SqlType::Int, true)]);
    child.temporary = true;
    child.foreign_keys.push(fk(None, &["t"], "target", &["id"]));
    let child = cat.create_table(child, 7).unwrap();
    assert!(cat.table(child).unwrap().foreign_keys.is_empty());
    cat.drop_table(target).unwrap();
    assert!(cat.objects().is_empty());
    cat.drop_session(7);
    assert!(cat.find_table("dbo", "#work", 7).is_none());
    assert!(cat.find_table("dbo", "#work", 8).is_some());
}

#[test]
fn find_object_resolves_constraints_case_insensitively() {
    let (cat, c, o) = sample();
    let obj = cat.find_object("DBO", "ck_QTY", 1).unwrap();
    assert_eq!(obj.kind, ObjectKind::Check);
    assert_eq!(obj.parent_object_id, o);
    assert_eq!(cat.find_object("dbo", "CUSTOMERS", 1).unwrap().object_id, c);
    assert!(cat.find_object("sys", "customers", 1).is_none());
    let df = &cat
        .table(o)
        .unwrap()
        .column("qty")
        .unwrap()
        .default
        .clone()
        .unwrap();
    assert_eq!(
        cat.find_object("dbo", &df.name, 1).unwrap().kind,
        ObjectKind::Default
    );
    assert_eq!(cat.object(df.object_id, 1).unwrap().name, df.name);
}

#[test]
fn schemas() {
    let mut cat = Catalog::new("db");
    assert_eq!(cat.schema_id("dbo"), Some(1));
    assert_eq!(cat.schema_id("information_schema"), Some(3));
    assert_eq!(cat.schema_id("SYS"), Some(4));
    let s = cat.create_schema("sales").unwrap();
    assert_eq!(s, 5);
    assert_eq!(cat.create_schema("Sales").unwrap_err().number, 2714);
    let mut t = table("t", vec![col("a", SqlType::Int, true)]);
    t.schema = "sales".to_string();
    let id = cat.create_table(t.clone(), 1).unwrap();
    assert_eq!(cat.table(id).unwrap().schema_id, 5);
    assert!(cat.find_table("dbo", "t", 1).is_none());
    assert_eq!(cat.drop_schema("sales").unwrap_err().number, 3729);
    t.schema = "nope".to_string();
    assert_eq!(cat.create_table(t, 1).unwrap_err().number, 2760);
    cat.drop_table(id).unwrap();
    cat.drop_schema("sales").unwrap();
    assert_eq!(cat.schema_id("sales"), None);
}

#[test]
fn columns_add_drop_alter() {
    let (mut cat, c, o) = sample();
    let id = cat
        .add_column(c, col("email", SqlType::VarChar { len: Some(200) }, true))
        .unwrap();
    assert_eq!(id, 3);
    assert_eq!(
        cat.add_column(c, col("EMAIL", SqlType::Int, true))
            .unwrap_err()
            .number,
        2705
    );
    cat.drop_column(c, "email").unwrap();
    // Column ids are not reused.
    assert_eq!(cat.add_column(c, col("phone", SqlType::Int, true)).unwrap(), 4);
    assert_eq!(cat.table(c).unwrap().max_column_id_used, 4);
    assert_eq!(cat.drop_column(c, "nope").unwrap_err().number, 4924);
    // Used by the PK, by a foreign key, by a default.
    let e = cat.drop_column(c, "id").unwrap_err();
    assert_eq!(e.number, 5074);
    assert_eq!(cat.drop_column(o, "customer_id").unwrap_err().number, 5074);
    assert_eq!(cat.drop_column(o, "qty").unwrap_err().number, 5074);
    cat.alter_column(c, "name", SqlType::NVarChar { len: Some(100) }, false)
        .unwrap();
    let name = cat.table(c).unwrap().column("name").unwrap().clone();
    assert_eq!(name.ty, SqlType::NVarChar { len: Some(100) });
    assert!(!name.nullable);
    assert_eq!(
        cat.alter_column(c, "id", SqlType::Int, true).unwrap_err().number,
        8111
    );
    let mut second = col("id2", SqlType::Int, false);
    second.identity = Some(IdentitySpec {
        seed: 1,
        increment: 1,
    });
    assert_eq!(cat.add_column(c, second).unwrap_err().number, 2744);
    let mut bad = col("idf", SqlType::Float, false);
    bad.identity = Some(IdentitySpec {
        seed: 1,
        increment: 1,
    });
    assert_eq!(cat.add_column(o, bad).unwrap_err().number, 2749);
}

#[test]
fn indexes() {
    let (mut cat, c, o) = sample();
    let ix = cat
        .add_index(o, index("IX_orders_customer", &["customer_id"], false))
        .unwrap();
    assert_eq!(ix, 2);
    let e = cat
        .add_index(o, index("ix_orders_customer", &["qty"], false))
        .unwrap_err();
    assert_eq!(e.number, 1913);
    assert_eq!(
        e.message,
        "The operation failed because an index or statistics with name 'ix_orders_customer' already exists on table 'dbo.orders'."
    );
    assert_eq!(
        cat.add_index(o, index("IX2", &["nope"], false))
            .unwrap_err()
            .number,
        1911
    );
    let mut clustered = index("CX", &["qty"], false);
    clustered.clustered = true;
    assert_eq!(cat.add_index(o, clustered).unwrap_err().number, 1902);
    assert_eq!(cat.add_index(o, index("IX3", &["qty"], true)).unwrap(), 3);
    cat.drop_index(o, "ix_orders_customer").unwrap();
    assert_eq!(cat.drop_index(o, "ix_orders_customer").unwrap_err().number, 3703);
    assert_eq!(cat.drop_index(o, "PK_orders").unwrap_err().number, 3723);
    // A heap gets a clustered index later.
    let h = cat
        .create_table(table("heap", vec![col("a", SqlType::Int, false)]), 1)
        .unwrap();
    assert!(cat.table(h).unwrap().indexes.is_empty());
    let mut cx = index("CX_heap", &["a"], false);
    cx.clustered = true;
    assert_eq!(cat.add_index(h, cx).unwrap(), 1);
    // ALTER TABLE ADD PRIMARY KEY on a table that has one.
    assert_eq!(
        cat.add_index(c, pk(Some("PK2"), &["name"])).unwrap_err().number,
        1779
    );
}

#[test]
fn constraints_add_and_drop() {
    let (mut cat, c, o) = sample();
    let ck = cat
        .add_check(
            c,
            CheckDef {
                name: None,
                definition: "(len([name])>(0))".to_string(),
                column: Some("name".to_string()),
                disabled: false,
                not_trusted: false,
            },
        )
        .unwrap();
    let check = cat.table(c).unwrap().checks[0].clone();
    assert_eq!(check.object_id, ck);
    assert_eq!(check.parent_column_id, 2);
    assert!(check.name.starts_with("CK__customers__name__"), "{}", check.name);
    let df = cat
        .add_default(
            c,
            "name",
            DefaultSpec {
                name: Some("DF_name".to_string()),
                definition: "(N'x')".to_string(),
            },
        )
        .unwrap();
    assert_eq!(cat.find_object("dbo", "DF_name", 1).unwrap().object_id, df);
    let again = DefaultSpec {
        name: None,
        definition: "(N'y')".to_string(),
    };
    assert_eq!(cat.add_default(c, "name", again).unwrap_err().number, 1781);
    let e = cat.drop_constraint(c, "nope").unwrap_err();
    assert_eq!(
        (e.number, e.message.as_str()),
        (3728, "'nope' is not a constraint.")
    );
    cat.drop_constraint(c, "df_name").unwrap();
    cat.drop_constraint(c, &check.name).unwrap();
    // The PK is referenced by orders' FK.
    let pk_name = cat.table(c).unwrap().primary_key().unwrap().name.clone();
    assert_eq!(cat.drop_constraint(c, &pk_name).unwrap_err().number, 3725);
    let fk_name = cat.table(o).unwrap().foreign_keys[0].name.clone();
    cat.drop_constraint(o, &fk_name).unwrap();
    cat.drop_constraint(c, &pk_name).unwrap();
    assert!(cat.table(c).unwrap().indexes.is_empty());
    let fk_id = cat.add_foreign_key(o, fk(Some("FK_again"), &["customer_id"], "customers", &["id"]), 1);
    assert_eq!(fk_id.unwrap_err().number, 1776);
}

#[test]
fn identity_sequence() {
    let (mut cat, c, o) = sample();
    assert_eq!(cat.identity_next(o), None);
    assert_eq!(cat.identity_current(c), Some(1));
    assert_eq!(cat.identity_next(c), Some(1));
    assert_eq!(cat.identity_next(c), Some(2));
    assert_eq!(cat.identity_current(c), Some(2));
    cat.identity_observe(c, 10);
    assert_eq!(cat.identity_next(c), Some(11));
    // A lower explicit value does not move it back.
    cat.identity_observe(c, 5);
    assert_eq!(cat.identity_next(c), Some(12));
    cat.identity_reseed(c, Some(100));
    assert_eq!(cat.identity_current(c), Some(100));
    assert_eq!(cat.identity_next(c), Some(101));
    cat.truncate(c);
    assert_eq!(cat.table(c).unwrap().identity.as_ref().unwrap().last, None);
    assert_eq!(cat.identity_current(c), Some(1));
    assert_eq!(cat.identity_next(c), Some(1));
    // After TRUNCATE, a reseed value is used as is.
    cat.truncate(c);
    cat.identity_reseed(c, Some(50));
    assert_eq!(cat.identity_next(c), Some(50));
}

#[test]
fn negative_increment_identity() {
    let mut cat = Catalog::new("db");
    let mut id = col("id", SqlType::BigInt, false);
    id.identity = Some(IdentitySpec {
        seed: -1,
        increment: -5,
    });
    let t = cat.create_table(table("down", vec![id]), 1).unwrap();
    assert_eq!(cat.identity_next(t), Some(-1));
    assert_eq!(cat.identity_next(t), Some(-6));
    cat.identity_observe(t, -100);
    assert_eq!(cat.identity_next(t), Some(-105));
}

#[test]
fn version_and_snapshot_restore() {
    let (mut cat, c, _) = sample();
    let snapshot = cat.clone();
    let v = cat.version();
    cat.identity_next(c);
    assert!(cat.version() > v);
    let t = cat
        .create_table(table("later", vec![col("a", SqlType::Int, true)]), 1)
        .unwrap();
    let v2 = cat.version();
    cat.restore(snapshot);
    assert!(cat.version() > v2);
    assert!(cat.table(t).is_none());
    assert_eq!(cat.identity_next(c), Some(1));
}

#[test]
fn object_ids_wrap_without_collisions() {
    let mut cat = Catalog::new("db");
    let mut seen = std::collections::HashSet::new();
    for i in 0..300 {
        let id = cat
            .create_table(table(&format!("t{i}"), vec![col("a", SqlType::Int, true)]), 1)
            .unwrap();
        assert!(id > 0);
        assert!(seen.insert(id));
    }
}

#[test]
fn system_names_look_like_sql_servers() {
    let n = |t: &str, c: &str| system_name(ObjectKind::Default, t, Some(c), 0x1234_ABCD);
    assert_eq!(n("Employees", "HireDate"), "DF__Employees__HireD__1234ABCD");
    assert_eq!(n("Orders", "OrderDate"), "DF__Orders__OrderDat__1234ABCD");
    assert_eq!(n("t", "c"), "DF__t__c__1234ABCD");
    assert_eq!(n("VeryLongTableName", "Id"), "DF__VeryLongTabl__Id__1234ABCD");
    let pk = system_name(ObjectKind::PrimaryKey, "Customers", None, 0x1234_ABCD);
    assert!(pk.starts_with("PK__Customer__"), "{pk}");
    assert_eq!(pk.len(), "PK__Customer__".len() + 16);
}

#[test]
fn referenced_columns_of_definitions() {
    assert_eq!(
        referenced_columns("([qty]>=(0) AND [Qty]<[max])"),
        vec!["qty", "max"]
    );
}

#[test]
fn renames() {
    let (mut cat, c, o) = sample();
    cat.rename_object(c, "clients", 1).unwrap();
    assert_eq!(cat.find_table("dbo", "CLIENTS", 1).unwrap().object_id, c);
    assert!(cat.find_table("dbo", "customers", 1).is_none());
    assert_eq!(cat.rename_object(c, "orders", 1).unwrap_err().number, 15335);
    let ck = cat.find_object("dbo", "CK_qty", 1).unwrap().object_id;
    cat.rename_object(ck, "CK_quantity", 1).unwrap();
    assert_eq!(cat.object(ck, 1).unwrap().name, "CK_quantity");
    cat.rename_column(o, "QTY", "quantity").unwrap();
    let orders = cat.table(o).unwrap();
    assert_eq!(orders.column_by_id(3).unwrap().name, "quantity");
    assert_eq!(orders.checks[0].definition, "([quantity]>=(0))");
    assert_eq!(cat.rename_column(o, "quantity", "ID").unwrap_err().number, 15335);
    assert_eq!(cat.rename_column(o, "nope", "x").unwrap_err().number, 15248);
    cat.add_index(o, index("IX_a", &["quantity"], false)).unwrap();
    cat.rename_index(o, "ix_a", "IX_b").unwrap();
    assert!(cat.table(o).unwrap().index("IX_b").is_some());
    assert_eq!(
        cat.rename_index(o, "IX_b", "PK_orders").unwrap_err().number,
        15335
    );
}

#[test]
fn table_def_round_trips() {
    let (cat, _, o) = sample();
    let def = cat.table_def(o).unwrap();
    assert_eq!(def.name, "orders");
    assert_eq!(def.schema, "dbo");
    assert_eq!(def.columns.len(), 3);
    assert_eq!(def.indexes[0].name.as_deref(), Some("PK_orders"));
    assert_eq!(def.foreign_keys[0].referenced_table, "customers");
    assert_eq!(def.foreign_keys[0].referenced_columns, vec!["id"]);
    assert_eq!(def.checks[0].definition, "([qty]>=(0))");
    // Recreating it elsewhere gives the same shape.
    let mut copy = def.clone();
    copy.name = "orders2".to_string();
    copy.indexes[0].name = None;
    copy.checks[0].name = None;
    let mut cat2 = cat.clone();
    let id = cat2.create_table(copy, 1).unwrap();
    let again = cat2.table_def(id).unwrap();
    assert_eq!(again.columns, def.columns);
}

#[test]
fn rollback_keeps_other_sessions_temp_tables_and_identity_progress() {
    let (mut cat, c, _) = sample();
    let snapshot = cat.clone();
    // Session 1's transaction: a new table, an identity value, a temp table.
    let t = cat
        .create_table(table("in_tx", vec![col("a", SqlType::Int, true)]), 1)
        .unwrap();
    assert_eq!(cat.identity_next(c), Some(1));
    let mut mine = table("#mine", vec![col("a", SqlType::Int, true)]);
    mine.temporary = true;
    cat.create_table(mine, 1).unwrap();
    // Session 2 creates a temp table meanwhile.
    let mut theirs = table("#theirs", vec![col("a", SqlType::Int, true)]);
    theirs.temporary = true;
    let theirs = cat.create_table(theirs, 2).unwrap();
    let v = cat.version();
    cat.rollback_to(snapshot, 1);
    assert!(cat.version() > v);
    assert!(cat.table(t).is_none());
    assert!(cat.find_table("dbo", "#mine", 1).is_none());
    assert_eq!(
        cat.find_table("dbo", "#theirs", 2).map(|t| t.object_id),
        Some(theirs)
    );
    // Identity values are not reused after a rollback.
    assert_eq!(cat.identity_next(c), Some(2));
    // New ids do not collide with ids handed out inside the rolled-back transaction.
    let again = cat
        .create_table(table("after", vec![col("a", SqlType::Int, true)]), 1)
        .unwrap();
    assert!(again != t);
}
