//! The rows of each system view, built from the catalog.

use super::*;

/// Everything the row builders need.
pub(super) struct Ctx<'a> {
    pub(super) catalog: &'a Catalog,
    pub(super) session_id: u64,
}

impl<'a> Ctx<'a> {
    fn schema(&self, table: &Table) -> String {
        self.catalog
            .schema_name(table.schema_id)
            .unwrap_or("dbo")
            .to_string()
    }

    /// Permanent tables, by object id.
    fn tables(&self) -> impl Iterator<Item = &'a Table> {
        self.catalog.tables()
    }

    /// Permanent tables plus the session's temp tables (views keyed by object id).
    pub(super) fn tables_with_temp(&self) -> Vec<&'a Table> {
        self.catalog
            .tables()
            .chain(self.catalog.session_tables(self.session_id))
            .collect()
    }
}

/// One of a table's constraint objects by id (a per-table search, not a catalog-wide one).
pub(super) fn own_object(table: &Table, object_id: i32) -> Option<ObjectRef> {
    table
        .constraint_objects()
        .into_iter()
        .find(|o| o.object_id == object_id)
}

pub(super) fn object_row(o: &ObjectRef) -> Row {
    vec![
        ("name", text(&o.name)),
        ("object_id", int(o.object_id)),
        ("principal_id", Stored::Null),
        ("schema_id", int(o.schema_id)),
        ("parent_object_id", int(o.parent_object_id)),
        ("type", text(o.kind.type_code())),
        ("type_desc", text(o.kind.type_desc())),
        ("create_date", text(&o.create_date)),
        ("modify_date", text(&o.modify_date)),
    ]
}

/// A column's (system_type_id, user_type_id, max_length): its declared alias type or
/// hierarchyid/geography/geometry (CLR types, system type 240) where it has one.
pub(super) fn column_type_ids(cat: &Catalog, c: &Column) -> (i64, i64, i64) {
    let ty_id = typeinfo::system_type_id(c.ty);
    let plain = (ty_id, ty_id, typeinfo::max_length(c.ty));
    let Some(declared) = &c.user_type else {
        return plain;
    };
    if let Some(t) = typeinfo::SYS_TYPES
        .iter()
        .find(|t| t.is_assembly_type && t.name.eq_ignore_ascii_case(declared))
    {
        return (t.system_type_id, t.user_type_id, t.max_length);
    }
    match cat
        .alias_types()
        .iter()
        .find(|a| a.name.eq_ignore_ascii_case(declared))
    {
        Some(a) => (ty_id, i64::from(a.user_type_id), typeinfo::max_length(c.ty)),
        None => plain,
    }
}

pub(super) fn column_row(cat: &Catalog, table: &Table, c: &Column) -> Row {
    let (precision, scale) = typeinfo::precision_scale(c.ty);
    let (ty_id, user_ty, max_length) = column_type_ids(cat, c);
    vec![
        ("object_id", int(table.object_id)),
        ("name", text(&c.name)),
        ("column_id", int(c.column_id)),
        ("system_type_id", int(ty_id)),
        ("user_type_id", int(user_ty)),
        ("max_length", int(max_length)),
        ("precision", int(precision)),
        ("scale", int(scale)),
        ("collation_name", opt_text(c.collation_name())),
        ("is_nullable", bit(c.nullable)),
        ("is_ansi_padded", bit(typeinfo::is_ansi_padded(c.ty))),
        ("is_rowguidcol", bit(c.rowguidcol)),
        ("is_identity", bit(c.identity.is_some())),
        ("is_computed", bit(c.computed.is_some())),
        ("is_replicated", bit(false)),
        ("is_non_sql_subscribed", bit(false)),
        ("is_merge_published", bit(false)),
        ("is_dts_replicated", bit(false)),
        (
            "default_object_id",
            int(c.default.as_ref().map_or(0, |d| d.object_id)),
        ),
        ("is_sparse", bit(false)),
        ("is_column_set", bit(false)),
        ("generated_always_type", int(0)),
        ("generated_always_type_desc", text("NOT_APPLICABLE")),
        ("is_hidden", bit(false)),
        ("graph_type", Stored::Null),
        ("is_data_deletion_filter_column", bit(false)),
        ("is_dropped_ledger_column", bit(false)),
    ]
}

pub(super) fn referential_desc(a: ReferentialAction) -> (&'static str, &'static str) {
    match a {
        ReferentialAction::NoAction => ("NO_ACTION", "NO ACTION"),
        ReferentialAction::Cascade => ("CASCADE", "CASCADE"),
        ReferentialAction::SetNull => ("SET_NULL", "SET NULL"),
        ReferentialAction::SetDefault => ("SET_DEFAULT", "SET DEFAULT"),
    }
}

/// A stable fake partition/hobt id per (table, index), shaped like SQL Server's.
pub(super) fn partition_id(object_id: i32, index_id: i32) -> i64 {
    72_057_594_037_927_936 + ((i64::from(object_id) & 0xFFFF_FFFF) << 16) + i64::from(index_id)
}

/// Index ids of a table as sys.partitions lists them: the heap (0) or clustered index (1),
/// then the nonclustered ones.
pub(super) fn partition_indexes(table: &Table) -> Vec<i32> {
    let mut ids: Vec<i32> = table.indexes.iter().map(|i| i.index_id).collect();
    if table.clustered_index().is_none() {
        ids.insert(0, 0);
    }
    ids
}

pub(super) fn build_rows(ctx: &Ctx<'_>, view: &str, sizes: &dyn super::TableSizes) -> Vec<Row> {
    let mut rows: Vec<Row> = Vec::new();
    match view {
        "sys.schemas" => sys_schemas(ctx, &mut rows),
        "sys.objects" => sys_objects(ctx, &mut rows),
        "sys.tables" => sys_tables(ctx, &mut rows),
        "sys.columns" => sys_columns(ctx, &mut rows),
        "sys.computed_columns" => sys_computed_columns(ctx, &mut rows),
        "sys.identity_columns" => sys_identity_columns(ctx, &mut rows),
        "sys.types" => sys_types(ctx, &mut rows),
        "sys.indexes" => sys_indexes(ctx, &mut rows),
        "sys.index_columns" => sys_index_columns(ctx, &mut rows),
        "sys.key_constraints" => sys_key_constraints(ctx, &mut rows),
        "sys.foreign_keys" => sys_foreign_keys(ctx, &mut rows),
        "sys.foreign_key_columns" => sys_foreign_key_columns(ctx, &mut rows),
        "sys.check_constraints" => sys_check_constraints(ctx, &mut rows),
        "sys.default_constraints" => sys_default_constraints(ctx, &mut rows),
        "sys.partitions" => sys_partitions(ctx, &mut rows, sizes),
        "sys.allocation_units" => sys_allocation_units(ctx, &mut rows, sizes),
        "sys.dm_db_partition_stats" => sys_dm_db_partition_stats(ctx, &mut rows, sizes),
        "sys.dm_db_index_usage_stats" => sys_dm_db_index_usage_stats(ctx, &mut rows),
        "sys.dm_db_index_operational_stats" => sys_dm_db_index_operational_stats(ctx, &mut rows),
        "INFORMATION_SCHEMA.TABLES" => information_schema_tables(ctx, &mut rows),
        "INFORMATION_SCHEMA.COLUMNS" => information_schema_columns(ctx, &mut rows),
        "INFORMATION_SCHEMA.TABLE_CONSTRAINTS" => information_schema_table_constraints(ctx, &mut rows),
        "INFORMATION_SCHEMA.KEY_COLUMN_USAGE" | "INFORMATION_SCHEMA.CONSTRAINT_COLUMN_USAGE" => {
            information_schema_key_column_usage(ctx, &mut rows, view)
        }
        "INFORMATION_SCHEMA.REFERENTIAL_CONSTRAINTS" => {
            information_schema_referential_constraints(ctx, &mut rows)
        }
        "INFORMATION_SCHEMA.CHECK_CONSTRAINTS" => information_schema_check_constraints(ctx, &mut rows),
        "INFORMATION_SCHEMA.SCHEMATA" => information_schema_schemata(ctx, &mut rows),
        "sys.databases" => sys_databases(ctx, &mut rows),
        "sys.change_tracking_databases" => sys_change_tracking_databases(ctx, &mut rows),
        "sys.change_tracking_tables" => sys_change_tracking_tables(ctx, &mut rows),
        "sys.dm_exec_connections" => sys_dm_exec_connections(ctx, &mut rows),
        "sys.dm_exec_sessions" => sys_dm_exec_sessions(ctx, &mut rows),
        // Sequences are not supported: always empty.
        other => {
            super::module_rows::build(ctx, other, &mut rows, sizes);
        }
    }
    rows
}

/// The rows of sys.schemas.
fn sys_schemas(ctx: &Ctx<'_>, rows: &mut Vec<Row>) {
    for s in ctx.catalog.schemas() {
        // Fixed schemas are owned by the principal of the same id; CREATE SCHEMA's by dbo.
        let principal = if (5..16384).contains(&s.schema_id) {
            1
        } else {
            s.schema_id
        };
        rows.push(vec![
            ("name", text(&s.name)),
            ("schema_id", int(s.schema_id)),
            ("principal_id", int(principal)),
        ]);
    }
}

/// The rows of sys.objects.
fn sys_objects(ctx: &Ctx<'_>, rows: &mut Vec<Row>) {
    rows.extend(ctx.catalog.objects().iter().map(object_row));
}

/// The rows of sys.tables.
fn sys_tables(ctx: &Ctx<'_>, rows: &mut Vec<Row>) {
    for t in ctx.tables() {
        let mut row = object_row(&ObjectRef {
            object_id: t.object_id,
            name: t.name.clone(),
            schema_id: t.schema_id,
            parent_object_id: 0,
            kind: crate::catalog::ObjectKind::Table,
            create_date: t.create_date.clone(),
            modify_date: t.modify_date.clone(),
        });
        // (max) types and xml are stored off-row.
        let has_lob = t.columns.iter().any(|c| crate::types::names::is_max(c.ty));
        row.extend([
            ("lob_data_space_id", int(i64::from(has_lob))),
            ("max_column_id_used", int(t.max_column_id_used)),
            ("uses_ansi_nulls", bit(true)),
            ("is_replicated", bit(false)),
            ("has_replication_filter", bit(false)),
            ("is_merge_published", bit(false)),
            ("is_sync_tran_subscribed", bit(false)),
            ("text_in_row_limit", int(0)),
            ("large_value_types_out_of_row", bit(false)),
            ("is_tracked_by_cdc", bit(false)),
            ("lock_escalation", int(0)),
            ("lock_escalation_desc", text("TABLE")),
            ("is_filetable", bit(false)),
            ("is_memory_optimized", bit(false)),
            ("durability", int(0)),
            ("durability_desc", text("SCHEMA_AND_DATA")),
            ("temporal_type", int(0)),
            ("temporal_type_desc", text("NON_TEMPORAL_TABLE")),
            ("is_remote_data_archive_enabled", bit(false)),
            ("is_node", bit(false)),
            ("is_edge", bit(false)),
            ("ledger_type", int(0)),
            ("ledger_type_desc", text("NON_LEDGER_TABLE")),
            ("is_dropped_ledger_table", bit(false)),
        ]);
        rows.push(row);
    }
}

/// The rows of sys.columns.
fn sys_columns(ctx: &Ctx<'_>, rows: &mut Vec<Row>) {
    for t in ctx.tables_with_temp() {
        rows.extend(t.columns.iter().map(|c| column_row(ctx.catalog, t, c)));
    }
}

/// The rows of sys.computed_columns.
fn sys_computed_columns(ctx: &Ctx<'_>, rows: &mut Vec<Row>) {
    for t in ctx.tables_with_temp() {
        for c in &t.columns {
            if let Some(spec) = &c.computed {
                let mut row = column_row(ctx.catalog, t, c);
                row.extend([
                    ("definition", text(&spec.definition)),
                    ("uses_database_collation", bit(true)),
                    ("is_persisted", bit(spec.persisted)),
                ]);
                rows.push(row);
            }
        }
    }
}

/// The rows of sys.identity_columns.
fn sys_identity_columns(ctx: &Ctx<'_>, rows: &mut Vec<Row>) {
    for t in ctx.tables_with_temp() {
        let (Some(c), Some(state)) = (t.identity_column(), t.identity.as_ref()) else {
            continue;
        };
        let mut row = column_row(ctx.catalog, t, c);
        row.extend([
            ("seed_value", int(state.seed)),
            ("increment_value", int(state.increment)),
            ("last_value", opt_int(state.last)),
            ("is_not_for_replication", bit(false)),
        ]);
        rows.push(row);
    }
}

/// The rows of sys.types.
fn sys_types(ctx: &Ctx<'_>, rows: &mut Vec<Row>) {
    for a in ctx.catalog.alias_types() {
        let (precision, scale) = typeinfo::precision_scale(a.base);
        rows.push(vec![
            ("name", text(&a.name)),
            ("system_type_id", int(typeinfo::system_type_id(a.base))),
            ("user_type_id", int(a.user_type_id)),
            ("schema_id", int(a.schema_id)),
            ("max_length", int(typeinfo::max_length(a.base))),
            ("precision", int(precision)),
            ("scale", int(scale)),
            (
                "collation_name",
                opt_text(typeinfo::has_collation(a.base).then_some(typeinfo::DEFAULT_COLLATION)),
            ),
            ("is_nullable", bit(a.nullable)),
            ("is_user_defined", bit(true)),
            ("is_assembly_type", bit(false)),
            ("default_object_id", int(0)),
            ("rule_object_id", int(0)),
            ("is_table_type", bit(false)),
        ]);
    }
    for ty in typeinfo::SYS_TYPES {
        rows.push(vec![
            ("name", text(ty.name)),
            ("system_type_id", int(ty.system_type_id)),
            ("user_type_id", int(ty.user_type_id)),
            ("schema_id", int(crate::catalog::SCHEMA_SYS)),
            ("max_length", int(ty.max_length)),
            ("precision", int(ty.precision)),
            ("scale", int(ty.scale)),
            (
                "collation_name",
                opt_text(ty.collated.then_some(typeinfo::DEFAULT_COLLATION)),
            ),
            ("is_nullable", bit(ty.is_nullable)),
            ("is_user_defined", bit(false)),
            ("is_assembly_type", bit(ty.is_assembly_type)),
        ]);
    }
}

/// The rows of sys.indexes.
fn sys_indexes(ctx: &Ctx<'_>, rows: &mut Vec<Row>) {
    for t in ctx.tables_with_temp() {
        let common = |row: &mut Row| {
            row.extend([
                ("data_space_id", int(1)),
                ("ignore_dup_key", bit(false)),
                ("fill_factor", int(0)),
                ("is_padded", bit(false)),
                ("is_disabled", bit(false)),
                ("is_hypothetical", bit(false)),
                ("is_ignored_in_optimization", bit(false)),
                ("allow_row_locks", bit(true)),
                ("allow_page_locks", bit(true)),
                ("suppress_dup_key_messages", bit(false)),
                ("auto_created", bit(false)),
                ("optimize_for_sequential_key", bit(false)),
            ]);
        };
        if t.clustered_index().is_none() {
            let mut row: Row = vec![
                ("object_id", int(t.object_id)),
                ("name", Stored::Null),
                ("index_id", int(0)),
                ("type", int(0)),
                ("type_desc", text("HEAP")),
                ("is_unique", bit(false)),
                ("is_primary_key", bit(false)),
                ("is_unique_constraint", bit(false)),
                ("has_filter", bit(false)),
            ];
            common(&mut row);
            rows.push(row);
        }
        for i in &t.indexes {
            let (ty, desc) = if i.clustered {
                (1, "CLUSTERED")
            } else {
                (2, "NONCLUSTERED")
            };
            let mut row: Row = vec![
                ("object_id", int(t.object_id)),
                ("name", text(&i.name)),
                ("index_id", int(i.index_id)),
                ("type", int(ty)),
                ("type_desc", text(desc)),
                ("is_unique", bit(i.unique)),
                ("is_primary_key", bit(i.primary_key)),
                ("is_unique_constraint", bit(i.unique_constraint)),
                ("has_filter", bit(i.filter.is_some())),
                ("filter_definition", opt_text(i.filter.as_deref())),
                ("compression_delay", Stored::Null),
            ];
            common(&mut row);
            rows.push(row);
        }
    }
}

/// The rows of sys.index_columns.
fn sys_index_columns(ctx: &Ctx<'_>, rows: &mut Vec<Row>) {
    for t in ctx.tables_with_temp() {
        for i in &t.indexes {
            let mut n = 0;
            for (ordinal, k) in i.keys.iter().enumerate() {
                n += 1;
                rows.push(vec![
                    ("object_id", int(t.object_id)),
                    ("index_id", int(i.index_id)),
                    ("index_column_id", int(n)),
                    ("column_id", int(k.column_id)),
                    ("key_ordinal", int(ordinal as i64 + 1)),
                    ("is_descending_key", bit(k.descending)),
                    ("is_included_column", bit(false)),
                ]);
            }
            for &c in &i.included {
                n += 1;
                rows.push(vec![
                    ("object_id", int(t.object_id)),
                    ("index_id", int(i.index_id)),
                    ("index_column_id", int(n)),
                    ("column_id", int(c)),
                    ("key_ordinal", int(0)),
                    ("is_descending_key", bit(false)),
                    ("is_included_column", bit(true)),
                ]);
            }
        }
    }
}

/// The rows of sys.key_constraints.
fn sys_key_constraints(ctx: &Ctx<'_>, rows: &mut Vec<Row>) {
    for t in ctx.tables() {
        for i in t.indexes.iter().filter(|i| i.constraint_object_id.is_some()) {
            let Some(o) = t
                .constraint_objects()
                .into_iter()
                .find(|o| Some(o.object_id) == i.constraint_object_id)
            else {
                continue;
            };
            let mut row = object_row(&o);
            row.extend([
                ("unique_index_id", int(i.index_id)),
                ("is_system_named", bit(i.system_named)),
                ("is_enforced", Stored::Null),
            ]);
            rows.push(row);
        }
    }
}

/// The rows of sys.foreign_keys.
fn sys_foreign_keys(ctx: &Ctx<'_>, rows: &mut Vec<Row>) {
    for t in ctx.tables() {
        for f in &t.foreign_keys {
            let Some(o) = own_object(t, f.object_id) else {
                continue;
            };
            let mut row = object_row(&o);
            row.extend([
                ("referenced_object_id", int(f.referenced_object_id)),
                ("key_index_id", int(f.key_index_id)),
                ("delete_referential_action", int(f.on_delete as i64)),
                (
                    "delete_referential_action_desc",
                    text(referential_desc(f.on_delete).0),
                ),
                ("update_referential_action", int(f.on_update as i64)),
                (
                    "update_referential_action_desc",
                    text(referential_desc(f.on_update).0),
                ),
                ("is_system_named", bit(f.system_named)),
                ("is_disabled", bit(f.is_disabled)),
                ("is_not_trusted", bit(f.is_not_trusted)),
                ("is_not_for_replication", bit(false)),
            ]);
            rows.push(row);
        }
    }
}

/// The rows of sys.foreign_key_columns.
fn sys_foreign_key_columns(ctx: &Ctx<'_>, rows: &mut Vec<Row>) {
    for t in ctx.tables() {
        for f in &t.foreign_keys {
            for (n, (c, r)) in f.columns.iter().zip(&f.referenced_columns).enumerate() {
                rows.push(vec![
                    ("constraint_object_id", int(f.object_id)),
                    ("constraint_column_id", int(n as i64 + 1)),
                    ("parent_object_id", int(t.object_id)),
                    ("parent_column_id", int(*c)),
                    ("referenced_object_id", int(f.referenced_object_id)),
                    ("referenced_column_id", int(*r)),
                ]);
            }
        }
    }
}

/// The rows of sys.check_constraints.
fn sys_check_constraints(ctx: &Ctx<'_>, rows: &mut Vec<Row>) {
    for t in ctx.tables() {
        for c in &t.checks {
            let Some(o) = own_object(t, c.object_id) else {
                continue;
            };
            let mut row = object_row(&o);
            row.extend([
                ("parent_column_id", int(c.parent_column_id)),
                ("definition", text(&c.definition)),
                ("uses_database_collation", bit(true)),
                ("is_system_named", bit(c.system_named)),
                ("is_disabled", bit(c.is_disabled)),
                ("is_not_trusted", bit(c.is_not_trusted)),
                ("is_not_for_replication", bit(false)),
            ]);
            rows.push(row);
        }
    }
}

/// The rows of sys.default_constraints.
fn sys_default_constraints(ctx: &Ctx<'_>, rows: &mut Vec<Row>) {
    for t in ctx.tables() {
        for c in &t.columns {
            let Some(d) = &c.default else { continue };
            let Some(o) = own_object(t, d.object_id) else {
                continue;
            };
            let mut row = object_row(&o);
            row.extend([
                ("parent_column_id", int(c.column_id)),
                ("definition", text(&d.definition)),
                ("is_system_named", bit(d.system_named)),
            ]);
            rows.push(row);
        }
    }
}

/// The rows of sys.partitions.
fn sys_partitions(ctx: &Ctx<'_>, rows: &mut Vec<Row>, sizes: &dyn super::TableSizes) {
    for t in ctx.tables() {
        let count = sizes.rows(t);
        for index_id in partition_indexes(t) {
            let id = partition_id(t.object_id, index_id);
            rows.push(vec![
                ("partition_id", int(id)),
                ("object_id", int(t.object_id)),
                ("index_id", int(index_id)),
                ("partition_number", int(1)),
                ("hobt_id", int(id)),
                ("rows", int(count)),
                ("data_compression", int(0)),
                ("data_compression_desc", text("NONE")),
                ("xml_compression", bit(false)),
                ("xml_compression_desc", text("OFF")),
            ]);
        }
    }
}

/// The rows of sys.allocation_units.
fn sys_allocation_units(ctx: &Ctx<'_>, rows: &mut Vec<Row>, sizes: &dyn super::TableSizes) {
    // One IN_ROW_DATA unit per partition, holding all its pages: SQLite keeps long values
    // in the row's own b-tree (overflow pages), so there is no LOB_DATA unit to tell apart.
    for t in ctx.tables() {
        for index_id in partition_indexes(t) {
            let id = partition_id(t.object_id, index_id);
            let used = (sizes.bytes(t, index_id) + 8191) / 8192;
            rows.push(vec![
                ("allocation_unit_id", int(id)),
                ("type", int(1)),
                ("type_desc", text("IN_ROW_DATA")),
                ("container_id", int(id)),
                ("data_space_id", int(1)),
                ("total_pages", int((used + 7) / 8 * 8)),
                ("used_pages", int(used)),
                ("data_pages", int(used)),
            ]);
        }
    }
}

/// The rows of sys.dm_db_partition_stats.
fn sys_dm_db_partition_stats(ctx: &Ctx<'_>, rows: &mut Vec<Row>, sizes: &dyn super::TableSizes) {
    for t in ctx.tables() {
        let count = sizes.rows(t);
        for index_id in partition_indexes(t) {
            // A plausible size: ~100 rows per 8 KB page, allocated in 8-page extents.
            let data_pages = if count > 0 { (count + 99) / 100 } else { 0 };
            let used = if count > 0 { data_pages + 1 } else { 0 };
            let reserved = (used + 7) / 8 * 8;
            rows.push(vec![
                ("partition_id", int(partition_id(t.object_id, index_id))),
                ("object_id", int(t.object_id)),
                ("index_id", int(index_id)),
                ("partition_number", int(1)),
                ("in_row_data_page_count", int(data_pages)),
                ("in_row_used_page_count", int(used)),
                ("in_row_reserved_page_count", int(reserved)),
                ("lob_used_page_count", int(0)),
                ("lob_reserved_page_count", int(0)),
                ("row_overflow_used_page_count", int(0)),
                ("row_overflow_reserved_page_count", int(0)),
                ("used_page_count", int(used)),
                ("reserved_page_count", int(reserved)),
                ("row_count", int(count)),
            ]);
        }
    }
}

/// The rows of sys.dm_db_index_usage_stats: one per table a statement has used, for its base
/// index.
fn sys_dm_db_index_usage_stats(ctx: &Ctx<'_>, rows: &mut Vec<Row>) {
    let own_db = crate::catalog::functions::catalog_database_id(ctx.catalog.database());
    for t in ctx.tables() {
        let Some(u) = ctx.catalog.usage().get(t.object_id) else {
            continue;
        };
        let base = if t.clustered_index().is_some() { 1 } else { 0 };
        rows.push(vec![
            ("database_id", int(own_db)),
            ("object_id", int(t.object_id)),
            ("index_id", int(base)),
            ("user_scans", int(u.user_scans)),
            ("user_updates", int(u.user_updates)),
            ("last_user_scan", opt_text(u.last_user_scan.as_deref())),
            ("last_user_update", opt_text(u.last_user_update.as_deref())),
        ]);
    }
}

/// The rows of sys.dm_db_index_operational_stats: one per index (and heap) of every table.
fn sys_dm_db_index_operational_stats(ctx: &Ctx<'_>, rows: &mut Vec<Row>) {
    let own_db = crate::catalog::functions::catalog_database_id(ctx.catalog.database());
    for t in ctx.tables() {
        let base = if t.clustered_index().is_some() {
            None
        } else {
            Some(0)
        };
        let ids = base.into_iter().chain(t.indexes.iter().map(|i| i.index_id));
        for index_id in ids {
            let c = ctx.catalog.operations().get(t.object_id, index_id);
            rows.push(vec![
                ("database_id", int(own_db)),
                ("object_id", int(t.object_id)),
                ("index_id", int(index_id)),
                ("partition_number", int(1)),
                ("leaf_insert_count", int(c.insert)),
                ("leaf_delete_count", int(c.delete)),
                ("leaf_update_count", int(c.update)),
                ("leaf_ghost_count", int(c.ghost)),
            ]);
        }
    }
}

/// The rows of INFORMATION_SCHEMA.TABLES.
fn information_schema_tables(ctx: &Ctx<'_>, rows: &mut Vec<Row>) {
    let db = ctx.catalog.database();
    for t in ctx.tables() {
        rows.push(vec![
            ("TABLE_CATALOG", text(db)),
            ("TABLE_SCHEMA", text(ctx.schema(t))),
            ("TABLE_NAME", text(&t.name)),
            ("TABLE_TYPE", text("BASE TABLE")),
        ]);
    }
}

/// The rows of INFORMATION_SCHEMA.COLUMNS.
fn information_schema_columns(ctx: &Ctx<'_>, rows: &mut Vec<Row>) {
    let db = ctx.catalog.database();
    for t in ctx.tables() {
        for (ordinal, c) in t.columns.iter().enumerate() {
            let (precision, radix, scale) = typeinfo::numeric_info(c.ty);
            let charset = if !typeinfo::has_collation(c.ty) {
                None
            } else if crate::types::names::is_unicode(c.ty) {
                Some("UNICODE")
            } else {
                Some("iso_1")
            };
            let alias = c.user_type.as_deref().and_then(|u| {
                ctx.catalog
                    .alias_types()
                    .iter()
                    .find(|a| a.name.eq_ignore_ascii_case(u))
            });
            let clr = c.user_type.as_deref().filter(|_| alias.is_none());
            rows.push(vec![
                ("DOMAIN_CATALOG", opt_text(alias.map(|_| db))),
                (
                    "DOMAIN_SCHEMA",
                    opt_text(alias.and_then(|a| ctx.catalog.schema_name(a.schema_id))),
                ),
                ("DOMAIN_NAME", opt_text(alias.map(|a| a.name.as_str()))),
                ("TABLE_CATALOG", text(db)),
                ("TABLE_SCHEMA", text(ctx.schema(t))),
                ("TABLE_NAME", text(&t.name)),
                ("COLUMN_NAME", text(&c.name)),
                ("ORDINAL_POSITION", int(ordinal as i64 + 1)),
                (
                    "COLUMN_DEFAULT",
                    opt_text(c.default.as_ref().map(|d| d.definition.as_str())),
                ),
                ("IS_NULLABLE", text(if c.nullable { "YES" } else { "NO" })),
                (
                    "DATA_TYPE",
                    text(clr.unwrap_or(crate::types::names::base_name(c.ty))),
                ),
                (
                    "CHARACTER_MAXIMUM_LENGTH",
                    opt_int(typeinfo::char_max_length(c.ty)),
                ),
                (
                    "CHARACTER_OCTET_LENGTH",
                    opt_int(typeinfo::char_octet_length(c.ty)),
                ),
                ("NUMERIC_PRECISION", opt_int(precision)),
                ("NUMERIC_PRECISION_RADIX", opt_int(radix)),
                ("NUMERIC_SCALE", opt_int(scale)),
                ("DATETIME_PRECISION", opt_int(typeinfo::datetime_precision(c.ty))),
                ("CHARACTER_SET_NAME", opt_text(charset)),
                ("COLLATION_NAME", opt_text(c.collation_name())),
            ]);
        }
    }
}

/// The rows of INFORMATION_SCHEMA.TABLE_CONSTRAINTS.
fn information_schema_table_constraints(ctx: &Ctx<'_>, rows: &mut Vec<Row>) {
    let db = ctx.catalog.database();
    for t in ctx.tables() {
        for o in t.constraint_objects() {
            let kind = match o.kind {
                crate::catalog::ObjectKind::PrimaryKey => "PRIMARY KEY",
                crate::catalog::ObjectKind::Unique => "UNIQUE",
                crate::catalog::ObjectKind::ForeignKey => "FOREIGN KEY",
                crate::catalog::ObjectKind::Check => "CHECK",
                _ => continue,
            };
            rows.push(vec![
                ("CONSTRAINT_CATALOG", text(db)),
                ("CONSTRAINT_SCHEMA", text(ctx.schema(t))),
                ("CONSTRAINT_NAME", text(&o.name)),
                ("TABLE_CATALOG", text(db)),
                ("TABLE_SCHEMA", text(ctx.schema(t))),
                ("TABLE_NAME", text(&t.name)),
                ("CONSTRAINT_TYPE", text(kind)),
                ("IS_DEFERRABLE", text("NO")),
                ("INITIALLY_DEFERRED", text("NO")),
            ]);
        }
    }
}

/// The rows of INFORMATION_SCHEMA.KEY_COLUMN_USAGE and INFORMATION_SCHEMA.CONSTRAINT_COLUMN_USAGE.
fn information_schema_key_column_usage(ctx: &Ctx<'_>, rows: &mut Vec<Row>, view: &str) {
    let db = ctx.catalog.database();
    let key_usage = view == "INFORMATION_SCHEMA.KEY_COLUMN_USAGE";
    for t in ctx.tables() {
        let schema = ctx.schema(t);
        let mut push = |constraint: &str, columns: Vec<String>| {
            for (n, column) in columns.into_iter().enumerate() {
                let mut row: Row = vec![
                    ("CONSTRAINT_CATALOG", text(db)),
                    ("CONSTRAINT_SCHEMA", text(&schema)),
                    ("CONSTRAINT_NAME", text(constraint)),
                    ("TABLE_CATALOG", text(db)),
                    ("TABLE_SCHEMA", text(&schema)),
                    ("TABLE_NAME", text(&t.name)),
                    ("COLUMN_NAME", text(column)),
                ];
                if key_usage {
                    row.push(("ORDINAL_POSITION", int(n as i64 + 1)));
                }
                rows.push(row);
            }
        };
        let names = |ids: &mut dyn Iterator<Item = i32>| -> Vec<String> {
            ids.filter_map(|id| t.column_by_id(id).map(|c| c.name.clone()))
                .collect()
        };
        for i in t.indexes.iter().filter(|i| i.constraint_object_id.is_some()) {
            push(&i.name, names(&mut i.keys.iter().map(|k| k.column_id)));
        }
        for f in &t.foreign_keys {
            push(&f.name, names(&mut f.columns.iter().copied()));
        }
        if !key_usage {
            for c in &t.checks {
                let cols: Vec<String> = if c.parent_column_id != 0 {
                    names(&mut std::iter::once(c.parent_column_id))
                } else {
                    crate::catalog::store::referenced_columns(&c.definition)
                        .into_iter()
                        .filter_map(|n| t.column(&n).map(|c| c.name.clone()))
                        .collect()
                };
                push(&c.name, cols);
            }
        }
    }
}

/// The rows of INFORMATION_SCHEMA.REFERENTIAL_CONSTRAINTS.
fn information_schema_referential_constraints(ctx: &Ctx<'_>, rows: &mut Vec<Row>) {
    let db = ctx.catalog.database();
    for t in ctx.tables() {
        for f in &t.foreign_keys {
            let target = ctx.catalog.table(f.referenced_object_id);
            let unique_name = target
                .and_then(|r| r.index_by_id(f.key_index_id))
                .map(|i| i.name.as_str());
            let target_schema = target.map(|r| ctx.schema(r));
            rows.push(vec![
                ("CONSTRAINT_CATALOG", text(db)),
                ("CONSTRAINT_SCHEMA", text(ctx.schema(t))),
                ("CONSTRAINT_NAME", text(&f.name)),
                ("UNIQUE_CONSTRAINT_CATALOG", text(db)),
                ("UNIQUE_CONSTRAINT_SCHEMA", opt_text(target_schema.as_deref())),
                ("UNIQUE_CONSTRAINT_NAME", opt_text(unique_name)),
                ("MATCH_OPTION", text("SIMPLE")),
                ("UPDATE_RULE", text(referential_desc(f.on_update).1)),
                ("DELETE_RULE", text(referential_desc(f.on_delete).1)),
            ]);
        }
    }
}

/// The rows of INFORMATION_SCHEMA.CHECK_CONSTRAINTS.
fn information_schema_check_constraints(ctx: &Ctx<'_>, rows: &mut Vec<Row>) {
    let db = ctx.catalog.database();
    for t in ctx.tables() {
        for c in &t.checks {
            rows.push(vec![
                ("CONSTRAINT_CATALOG", text(db)),
                ("CONSTRAINT_SCHEMA", text(ctx.schema(t))),
                ("CONSTRAINT_NAME", text(&c.name)),
                ("CHECK_CLAUSE", text(&c.definition)),
            ]);
        }
    }
}

/// The rows of INFORMATION_SCHEMA.SCHEMATA.
fn information_schema_schemata(ctx: &Ctx<'_>, rows: &mut Vec<Row>) {
    let db = ctx.catalog.database();
    for sc in ctx.catalog.schemas() {
        // Fixed schemas are owned by the principal of the same name; CREATE SCHEMA's by dbo.
        let owner = if (5..16384).contains(&sc.schema_id) {
            "dbo"
        } else {
            sc.name.as_str()
        };
        rows.push(vec![
            ("CATALOG_NAME", text(db)),
            ("SCHEMA_NAME", text(&sc.name)),
            ("SCHEMA_OWNER", text(owner)),
            ("DEFAULT_CHARACTER_SET_NAME", text("iso_1")),
        ]);
    }
}

/// The rows of sys.change_tracking_databases: the user database while tracking is on.
fn sys_change_tracking_databases(ctx: &Ctx<'_>, rows: &mut Vec<Row>) {
    let ct = ctx.catalog.change_tracking();
    let Some(db) = ct.database else { return };
    let cleaned = ct.tables.values().map(|t| t.cleanup_version).max().unwrap_or(0);
    rows.push(vec![
        ("database_id", int(crate::catalog::functions::USER_DATABASE_ID)),
        ("is_auto_cleanup_on", bit(db.auto_cleanup)),
        ("retention_period", int(db.retention)),
        ("retention_period_units", int(db.unit as i64)),
        ("retention_period_units_desc", text(db.unit.desc())),
        ("max_cleanup_version", int(cleaned)),
    ]);
}

/// The rows of sys.change_tracking_tables.
fn sys_change_tracking_tables(ctx: &Ctx<'_>, rows: &mut Vec<Row>) {
    for (id, t) in &ctx.catalog.change_tracking().tables {
        rows.push(vec![
            ("object_id", int(*id)),
            ("is_track_columns_updated_on", bit(t.track_columns_updated)),
            ("min_valid_version", int(t.min_valid_version)),
            ("begin_version", int(t.begin_version)),
            ("cleanup_version", int(t.cleanup_version)),
        ]);
    }
}

/// The rows of sys.databases.
fn sys_databases(ctx: &Ctx<'_>, rows: &mut Vec<Row>) {
    let db = ctx.catalog.database();
    let created = ctx.tables().map(|t| t.create_date.clone()).min();
    let created = created.unwrap_or_else(|| "2003-04-08 09:13:36.390".to_string());
    let mut dbs: Vec<(&str, i64)> = vec![("master", 1), ("tempdb", 2), ("model", 3), ("msdb", 4)];
    if !dbs.iter().any(|(n, _)| n.eq_ignore_ascii_case(db)) {
        dbs.push((db, crate::catalog::functions::USER_DATABASE_ID));
    }
    for (name, id) in dbs {
        let user_db = id >= crate::catalog::functions::USER_DATABASE_ID;
        // master and msdb allow snapshot isolation, as on SQL Server.
        let snapshot = if user_db {
            ctx.catalog.change_tracking().allow_snapshot_isolation
        } else {
            matches!(name, "master" | "msdb")
        };
        rows.push(vec![
            ("name", text(name)),
            ("database_id", int(id)),
            ("owner_sid", Stored::Blob(vec![1])),
            ("create_date", text(created.clone())),
            ("compatibility_level", int(160)),
            ("collation_name", text(typeinfo::DEFAULT_COLLATION)),
            ("user_access", int(0)),
            ("user_access_desc", text("MULTI_USER")),
            ("is_read_only", bit(false)),
            ("is_auto_shrink_on", bit(false)),
            ("state", int(0)),
            ("state_desc", text("ONLINE")),
            ("is_in_standby", bit(false)),
            ("snapshot_isolation_state", int(i64::from(snapshot))),
            (
                "snapshot_isolation_state_desc",
                text(if snapshot { "ON" } else { "OFF" }),
            ),
            ("is_read_committed_snapshot_on", bit(false)),
            ("recovery_model", int(if user_db { 1 } else { 3 })),
            (
                "recovery_model_desc",
                text(if user_db { "FULL" } else { "SIMPLE" }),
            ),
            ("page_verify_option", int(2)),
            ("page_verify_option_desc", text("CHECKSUM")),
            ("is_ansi_nulls_on", bit(false)),
            ("is_ansi_padding_on", bit(false)),
            ("is_quoted_identifier_on", bit(false)),
            ("is_encrypted", bit(false)),
        ]);
    }
}

/// The rows of sys.dm_exec_connections.
fn sys_dm_exec_connections(ctx: &Ctx<'_>, rows: &mut Vec<Row>) {
    for (session_id, c) in ctx.catalog.connections() {
        rows.push(vec![
            ("session_id", int(session_id as i64)),
            ("most_recent_session_id", int(session_id as i64)),
            ("connect_time", text(&c.connect_time)),
            ("net_transport", text("TCP")),
            ("protocol_type", text("TSQL")),
            ("protocol_version", int(i64::from(c.protocol_version))),
            ("endpoint_id", int(4)),
            ("encrypt_option", text("FALSE")),
            ("auth_scheme", text("SQL")),
            ("net_packet_size", int(c.net_packet_size)),
            ("client_net_address", text(&c.client_net_address)),
            ("client_tcp_port", opt_int(c.client_tcp_port.map(i64::from))),
            ("local_net_address", text("127.0.0.1")),
            (
                "connection_id",
                text(format!("00000000-0000-0000-0000-{session_id:012X}")),
            ),
        ]);
    }
}

/// The rows of sys.dm_exec_sessions.
fn sys_dm_exec_sessions(ctx: &Ctx<'_>, rows: &mut Vec<Row>) {
    for (session_id, c) in ctx.catalog.connections() {
        rows.push(vec![
            ("session_id", int(session_id as i64)),
            ("login_time", text(&c.connect_time)),
            ("host_name", text(&c.host_name)),
            ("program_name", text(&c.program_name)),
            ("client_interface_name", text("TDS")),
            ("login_name", text(&c.login_name)),
            ("original_login_name", text(&c.login_name)),
            ("status", text("sleeping")),
            ("database_id", int(crate::catalog::functions::USER_DATABASE_ID)),
            ("is_user_process", bit(true)),
            // READ COMMITTED
            ("transaction_isolation_level", int(2)),
        ]);
    }
}
