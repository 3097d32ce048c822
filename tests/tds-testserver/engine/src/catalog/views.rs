//! The system views (`sys.*`, `INFORMATION_SCHEMA.*`): their SQL Server column types, and their
//! materialisation as tables in a session connection's `temp` schema under the flattened,
//! quoted name (`temp."sys.tables"`).
//!
//! Storage follows the engine's conventions: ints and bits INTEGER, strings TEXT, datetime TEXT
//! `YYYY-MM-DD HH:MM:SS.fff`. `sys.identity_columns.seed_value/increment_value/last_value` are
//! sql_variant in SQL Server; here they are declared [`SqlType::SqlVariant`] and always hold
//! bigint values (SQL Server's base type would be the column's own type, e.g. int). Tools that
//! `CAST(... AS bigint)` them see the same result either way.
//!
//! What is listed: permanent tables and their constraints. A session's `#temp` tables appear
//! only in the views keyed by object id (sys.columns, sys.all_columns, sys.identity_columns,
//! sys.computed_columns, sys.indexes, sys.index_columns), so `tempdb.sys.columns` lookups by
//! `OBJECT_ID('tempdb..#t')` work; sys.all_columns lists user columns only.

use super::ReferentialAction;
use super::store::{Catalog, Column, ObjectRef, Table};
use super::typeinfo;
use crate::types::SqlType;
use rusqlite::types::Value as Stored;
use std::sync::OnceLock;

/// One column of a system view, with the type SQL Server declares for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ViewColumn {
    pub name: &'static str,
    pub ty: SqlType,
    pub nullable: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ViewDef {
    /// Canonical name, e.g. `sys.tables`, `INFORMATION_SCHEMA.COLUMNS`.
    pub name: &'static str,
    pub columns: Vec<ViewColumn>,
}

impl ViewDef {
    /// The SQLite table the view is materialised as: `temp."sys.tables"`.
    pub fn sqlite_name(&self) -> String {
        format!("temp.\"{}\"", self.name)
    }
}

const INT: SqlType = SqlType::Int;
const BIT: SqlType = SqlType::Bit;
const TINYINT: SqlType = SqlType::TinyInt;
const SMALLINT: SqlType = SqlType::SmallInt;
const BIGINT: SqlType = SqlType::BigInt;
const DATETIME: SqlType = SqlType::DateTime;
const SYSNAME: SqlType = SqlType::NVarChar { len: Some(128) };
const NVMAX: SqlType = SqlType::NVarChar { len: None };
const VARIANT: SqlType = SqlType::SqlVariant;

const fn nv(len: u16) -> SqlType {
    SqlType::NVarChar { len: Some(len) }
}

const fn vc(len: u16) -> SqlType {
    SqlType::VarChar { len: Some(len) }
}

/// `(name, type, nullable)` triples to columns.
fn cols(list: &[(&'static str, SqlType, bool)]) -> Vec<ViewColumn> {
    list.iter()
        .map(|&(name, ty, nullable)| ViewColumn { name, ty, nullable })
        .collect()
}

fn objects_columns() -> Vec<ViewColumn> {
    cols(&[
        ("name", SYSNAME, false),
        ("object_id", INT, false),
        ("principal_id", INT, true),
        ("schema_id", INT, false),
        ("parent_object_id", INT, false),
        ("type", SqlType::Char { len: 2 }, true),
        ("type_desc", nv(60), true),
        ("create_date", DATETIME, false),
        ("modify_date", DATETIME, false),
        ("is_ms_shipped", BIT, false),
        ("is_published", BIT, false),
        ("is_schema_published", BIT, false),
    ])
}

fn columns_columns() -> Vec<ViewColumn> {
    cols(&[
        ("object_id", INT, false),
        ("name", SYSNAME, true),
        ("column_id", INT, false),
        ("system_type_id", TINYINT, false),
        ("user_type_id", INT, false),
        ("max_length", SMALLINT, false),
        ("precision", TINYINT, false),
        ("scale", TINYINT, false),
        ("collation_name", SYSNAME, true),
        ("is_nullable", BIT, true),
        ("is_ansi_padded", BIT, false),
        ("is_rowguidcol", BIT, false),
        ("is_identity", BIT, false),
        ("is_computed", BIT, false),
        ("is_filestream", BIT, false),
        ("is_replicated", BIT, true),
        ("is_non_sql_subscribed", BIT, true),
        ("is_merge_published", BIT, true),
        ("is_dts_replicated", BIT, true),
        ("is_xml_document", BIT, false),
        ("xml_collection_id", INT, false),
        ("default_object_id", INT, false),
        ("rule_object_id", INT, false),
        ("is_sparse", BIT, true),
        ("is_column_set", BIT, true),
        ("generated_always_type", TINYINT, true),
        ("generated_always_type_desc", nv(60), true),
        ("encryption_type", INT, true),
        ("encryption_type_desc", nv(64), true),
        ("encryption_algorithm_name", SYSNAME, true),
        ("column_encryption_key_id", INT, true),
        ("column_encryption_key_database_name", SYSNAME, true),
        ("is_hidden", BIT, true),
        ("is_masked", BIT, false),
        ("graph_type", INT, true),
        ("graph_type_desc", nv(60), true),
        ("is_data_deletion_filter_column", BIT, true),
        ("ledger_view_column_type", INT, true),
        ("ledger_view_column_type_desc", nv(60), true),
        ("is_dropped_ledger_column", BIT, true),
    ])
}

fn with(mut base: Vec<ViewColumn>, extra: &[(&'static str, SqlType, bool)]) -> Vec<ViewColumn> {
    base.extend(cols(extra));
    base
}

fn build_registry() -> Vec<ViewDef> {
    let v = |name: &'static str, columns: Vec<ViewColumn>| ViewDef { name, columns };
    let ic = |name: &'static str| (name, nv(128), true);
    vec![
        v(
            "sys.schemas",
            cols(&[
                ("name", SYSNAME, false),
                ("schema_id", INT, false),
                ("principal_id", INT, true),
            ]),
        ),
        v("sys.objects", objects_columns()),
        v("sys.all_objects", objects_columns()),
        v(
            "sys.tables",
            with(
                objects_columns(),
                &[
                    ("lob_data_space_id", INT, false),
                    ("filestream_data_space_id", INT, true),
                    ("max_column_id_used", INT, false),
                    ("lock_on_bulk_load", BIT, false),
                    ("uses_ansi_nulls", BIT, true),
                    ("is_replicated", BIT, true),
                    ("has_replication_filter", BIT, true),
                    ("is_merge_published", BIT, true),
                    ("is_sync_tran_subscribed", BIT, true),
                    ("has_unchecked_assembly_data", BIT, false),
                    ("text_in_row_limit", INT, true),
                    ("large_value_types_out_of_row", BIT, true),
                    ("is_tracked_by_cdc", BIT, true),
                    ("lock_escalation", TINYINT, true),
                    ("lock_escalation_desc", nv(60), true),
                    ("is_filetable", BIT, true),
                    ("is_memory_optimized", BIT, true),
                    ("durability", TINYINT, true),
                    ("durability_desc", nv(60), true),
                    ("temporal_type", TINYINT, true),
                    ("temporal_type_desc", nv(60), true),
                    ("history_table_id", INT, true),
                    ("is_remote_data_archive_enabled", BIT, true),
                    ("is_external", BIT, false),
                    ("history_retention_period", INT, true),
                    ("history_retention_period_unit", INT, true),
                    ("history_retention_period_unit_desc", nv(10), true),
                    ("is_node", BIT, true),
                    ("is_edge", BIT, true),
                    ("data_retention_period", INT, true),
                    ("data_retention_period_unit", INT, true),
                    ("data_retention_period_unit_desc", nv(10), true),
                    ("ledger_type", TINYINT, true),
                    ("ledger_type_desc", nv(60), true),
                    ("ledger_view_id", INT, true),
                    ("is_dropped_ledger_table", BIT, true),
                ],
            ),
        ),
        v(
            "sys.views",
            with(
                objects_columns(),
                &[
                    ("is_replicated", BIT, true),
                    ("has_replication_filter", BIT, true),
                    ("has_opaque_metadata", BIT, false),
                    ("has_unchecked_assembly_data", BIT, false),
                    ("with_check_option", BIT, false),
                    ("is_date_correlation_view", BIT, false),
                    ("is_tracked_by_cdc", BIT, true),
                    ("has_snapshot", BIT, true),
                    ("ledger_view_type", TINYINT, true),
                    ("ledger_view_type_desc", nv(60), true),
                    ("is_dropped_ledger_view", BIT, true),
                ],
            ),
        ),
        v("sys.columns", columns_columns()),
        v("sys.all_columns", columns_columns()),
        v(
            "sys.types",
            cols(&[
                ("name", SYSNAME, false),
                ("system_type_id", TINYINT, false),
                ("user_type_id", INT, false),
                ("schema_id", INT, false),
                ("principal_id", INT, true),
                ("max_length", SMALLINT, false),
                ("precision", TINYINT, false),
                ("scale", TINYINT, false),
                ("collation_name", SYSNAME, true),
                ("is_nullable", BIT, true),
                ("is_user_defined", BIT, false),
                ("is_assembly_type", BIT, false),
                ("default_object_id", INT, false),
                ("rule_object_id", INT, false),
                ("is_table_type", BIT, false),
            ]),
        ),
        v(
            "sys.indexes",
            cols(&[
                ("object_id", INT, false),
                ("name", SYSNAME, true),
                ("index_id", INT, false),
                ("type", TINYINT, false),
                ("type_desc", nv(60), true),
                ("is_unique", BIT, true),
                ("data_space_id", INT, true),
                ("ignore_dup_key", BIT, true),
                ("is_primary_key", BIT, true),
                ("is_unique_constraint", BIT, true),
                ("fill_factor", TINYINT, false),
                ("is_padded", BIT, true),
                ("is_disabled", BIT, true),
                ("is_hypothetical", BIT, true),
                ("is_ignored_in_optimization", BIT, true),
                ("allow_row_locks", BIT, true),
                ("allow_page_locks", BIT, true),
                ("has_filter", BIT, true),
                ("filter_definition", NVMAX, true),
                ("compression_delay", INT, true),
                ("suppress_dup_key_messages", BIT, true),
                ("auto_created", BIT, true),
                ("optimize_for_sequential_key", BIT, true),
            ]),
        ),
        v(
            "sys.index_columns",
            cols(&[
                ("object_id", INT, false),
                ("index_id", INT, false),
                ("index_column_id", INT, false),
                ("column_id", INT, false),
                ("key_ordinal", TINYINT, false),
                ("partition_ordinal", TINYINT, false),
                ("is_descending_key", BIT, true),
                ("is_included_column", BIT, true),
                ("column_store_order_ordinal", TINYINT, false),
            ]),
        ),
        v(
            "sys.key_constraints",
            with(
                objects_columns(),
                &[
                    ("unique_index_id", INT, true),
                    ("is_system_named", BIT, false),
                    ("is_enforced", BIT, true),
                ],
            ),
        ),
        v(
            "sys.foreign_keys",
            with(
                objects_columns(),
                &[
                    ("referenced_object_id", INT, true),
                    ("key_index_id", INT, true),
                    ("is_disabled", BIT, false),
                    ("is_not_for_replication", BIT, false),
                    ("is_not_trusted", BIT, false),
                    ("delete_referential_action", TINYINT, true),
                    ("delete_referential_action_desc", nv(60), true),
                    ("update_referential_action", TINYINT, true),
                    ("update_referential_action_desc", nv(60), true),
                    ("is_system_named", BIT, false),
                ],
            ),
        ),
        v(
            "sys.foreign_key_columns",
            cols(&[
                ("constraint_object_id", INT, false),
                ("constraint_column_id", INT, false),
                ("parent_object_id", INT, false),
                ("parent_column_id", INT, false),
                ("referenced_object_id", INT, false),
                ("referenced_column_id", INT, false),
            ]),
        ),
        v(
            "sys.check_constraints",
            with(
                objects_columns(),
                &[
                    ("is_disabled", BIT, false),
                    ("is_not_for_replication", BIT, false),
                    ("is_not_trusted", BIT, false),
                    ("parent_column_id", INT, false),
                    ("definition", NVMAX, true),
                    ("uses_database_collation", BIT, true),
                    ("is_system_named", BIT, false),
                ],
            ),
        ),
        v(
            "sys.default_constraints",
            with(
                objects_columns(),
                &[
                    ("parent_column_id", INT, false),
                    ("definition", NVMAX, true),
                    ("is_system_named", BIT, false),
                ],
            ),
        ),
        v(
            "sys.computed_columns",
            with(
                columns_columns(),
                &[
                    ("definition", NVMAX, true),
                    ("uses_database_collation", BIT, false),
                    ("is_persisted", BIT, false),
                ],
            ),
        ),
        v(
            "sys.identity_columns",
            with(
                columns_columns(),
                &[
                    ("seed_value", VARIANT, true),
                    ("increment_value", VARIANT, true),
                    ("last_value", VARIANT, true),
                    ("is_not_for_replication", BIT, true),
                ],
            ),
        ),
        v(
            "sys.partitions",
            cols(&[
                ("partition_id", BIGINT, false),
                ("object_id", INT, false),
                ("index_id", INT, false),
                ("partition_number", INT, false),
                ("hobt_id", BIGINT, false),
                ("rows", BIGINT, true),
                ("filestream_filegroup_id", SMALLINT, false),
                ("data_compression", TINYINT, false),
                ("data_compression_desc", nv(60), true),
                ("xml_compression", BIT, true),
                ("xml_compression_desc", vc(3), true),
            ]),
        ),
        v(
            "sys.dm_db_partition_stats",
            cols(&[
                ("partition_id", BIGINT, false),
                ("object_id", INT, true),
                ("index_id", INT, true),
                ("partition_number", INT, true),
                ("in_row_data_page_count", BIGINT, true),
                ("in_row_used_page_count", BIGINT, true),
                ("in_row_reserved_page_count", BIGINT, true),
                ("lob_used_page_count", BIGINT, true),
                ("lob_reserved_page_count", BIGINT, true),
                ("row_overflow_used_page_count", BIGINT, true),
                ("row_overflow_reserved_page_count", BIGINT, true),
                ("used_page_count", BIGINT, true),
                ("reserved_page_count", BIGINT, true),
                ("row_count", BIGINT, true),
            ]),
        ),
        v(
            "INFORMATION_SCHEMA.TABLES",
            cols(&[
                ic("TABLE_CATALOG"),
                ic("TABLE_SCHEMA"),
                ("TABLE_NAME", SYSNAME, false),
                ("TABLE_TYPE", vc(10), true),
            ]),
        ),
        v(
            "INFORMATION_SCHEMA.COLUMNS",
            cols(&[
                ic("TABLE_CATALOG"),
                ic("TABLE_SCHEMA"),
                ("TABLE_NAME", SYSNAME, false),
                ("COLUMN_NAME", SYSNAME, true),
                ("ORDINAL_POSITION", INT, true),
                ("COLUMN_DEFAULT", nv(4000), true),
                ("IS_NULLABLE", vc(3), true),
                ("DATA_TYPE", nv(128), true),
                ("CHARACTER_MAXIMUM_LENGTH", INT, true),
                ("CHARACTER_OCTET_LENGTH", INT, true),
                ("NUMERIC_PRECISION", TINYINT, true),
                ("NUMERIC_PRECISION_RADIX", SMALLINT, true),
                ("NUMERIC_SCALE", INT, true),
                ("DATETIME_PRECISION", SMALLINT, true),
                ("CHARACTER_SET_CATALOG", SYSNAME, true),
                ("CHARACTER_SET_SCHEMA", SYSNAME, true),
                ("CHARACTER_SET_NAME", SYSNAME, true),
                ("COLLATION_CATALOG", SYSNAME, true),
                ("COLLATION_SCHEMA", SYSNAME, true),
                ("COLLATION_NAME", SYSNAME, true),
                ("DOMAIN_CATALOG", SYSNAME, true),
                ("DOMAIN_SCHEMA", SYSNAME, true),
                ("DOMAIN_NAME", SYSNAME, true),
            ]),
        ),
        v(
            "INFORMATION_SCHEMA.TABLE_CONSTRAINTS",
            cols(&[
                ic("CONSTRAINT_CATALOG"),
                ic("CONSTRAINT_SCHEMA"),
                ("CONSTRAINT_NAME", SYSNAME, false),
                ic("TABLE_CATALOG"),
                ic("TABLE_SCHEMA"),
                ("TABLE_NAME", SYSNAME, false),
                ("CONSTRAINT_TYPE", vc(11), true),
                ("IS_DEFERRABLE", vc(2), false),
                ("INITIALLY_DEFERRED", vc(2), false),
            ]),
        ),
        v(
            "INFORMATION_SCHEMA.KEY_COLUMN_USAGE",
            cols(&[
                ic("CONSTRAINT_CATALOG"),
                ic("CONSTRAINT_SCHEMA"),
                ("CONSTRAINT_NAME", SYSNAME, false),
                ic("TABLE_CATALOG"),
                ic("TABLE_SCHEMA"),
                ("TABLE_NAME", SYSNAME, false),
                ic("COLUMN_NAME"),
                ("ORDINAL_POSITION", INT, false),
            ]),
        ),
        v(
            "INFORMATION_SCHEMA.REFERENTIAL_CONSTRAINTS",
            cols(&[
                ic("CONSTRAINT_CATALOG"),
                ic("CONSTRAINT_SCHEMA"),
                ("CONSTRAINT_NAME", SYSNAME, false),
                ic("UNIQUE_CONSTRAINT_CATALOG"),
                ic("UNIQUE_CONSTRAINT_SCHEMA"),
                ("UNIQUE_CONSTRAINT_NAME", SYSNAME, true),
                ("MATCH_OPTION", vc(7), true),
                ("UPDATE_RULE", vc(11), true),
                ("DELETE_RULE", vc(11), true),
            ]),
        ),
        v(
            "INFORMATION_SCHEMA.CHECK_CONSTRAINTS",
            cols(&[
                ic("CONSTRAINT_CATALOG"),
                ic("CONSTRAINT_SCHEMA"),
                ("CONSTRAINT_NAME", SYSNAME, false),
                ("CHECK_CLAUSE", nv(4000), true),
            ]),
        ),
        v(
            "INFORMATION_SCHEMA.CONSTRAINT_COLUMN_USAGE",
            cols(&[
                ic("TABLE_CATALOG"),
                ic("TABLE_SCHEMA"),
                ("TABLE_NAME", SYSNAME, false),
                ic("COLUMN_NAME"),
                ic("CONSTRAINT_CATALOG"),
                ic("CONSTRAINT_SCHEMA"),
                ("CONSTRAINT_NAME", SYSNAME, false),
            ]),
        ),
        v(
            "INFORMATION_SCHEMA.SCHEMATA",
            cols(&[
                ic("CATALOG_NAME"),
                ("SCHEMA_NAME", SYSNAME, false),
                ic("SCHEMA_OWNER"),
                (
                    "DEFAULT_CHARACTER_SET_CATALOG",
                    SqlType::VarChar { len: Some(6) },
                    true,
                ),
                (
                    "DEFAULT_CHARACTER_SET_SCHEMA",
                    SqlType::VarChar { len: Some(3) },
                    true,
                ),
                ("DEFAULT_CHARACTER_SET_NAME", SYSNAME, true),
            ]),
        ),
        v(
            "INFORMATION_SCHEMA.VIEWS",
            cols(&[
                ic("TABLE_CATALOG"),
                ic("TABLE_SCHEMA"),
                ("TABLE_NAME", SYSNAME, false),
                ("VIEW_DEFINITION", nv(4000), true),
                ("CHECK_OPTION", vc(7), true),
                ("IS_UPDATABLE", vc(2), true),
            ]),
        ),
        v(
            "sys.databases",
            cols(&[
                ("name", SYSNAME, false),
                ("database_id", INT, false),
                ("source_database_id", INT, true),
                ("owner_sid", SqlType::VarBinary { len: Some(85) }, true),
                ("create_date", DATETIME, false),
                ("compatibility_level", TINYINT, false),
                ("collation_name", SYSNAME, true),
                ("user_access", TINYINT, true),
                ("user_access_desc", nv(60), true),
                ("is_read_only", BIT, true),
                ("is_auto_close_on", BIT, false),
                ("is_auto_shrink_on", BIT, true),
                ("state", TINYINT, true),
                ("state_desc", nv(60), true),
                ("is_in_standby", BIT, true),
                ("snapshot_isolation_state", TINYINT, true),
                ("snapshot_isolation_state_desc", nv(60), true),
                ("is_read_committed_snapshot_on", BIT, true),
                ("recovery_model", TINYINT, true),
                ("recovery_model_desc", nv(60), true),
                ("page_verify_option", TINYINT, true),
                ("page_verify_option_desc", nv(60), true),
                ("is_ansi_nulls_on", BIT, true),
                ("is_ansi_padding_on", BIT, true),
                ("is_quoted_identifier_on", BIT, true),
                ("is_encrypted", BIT, true),
            ]),
        ),
        v(
            "sys.procedures",
            with(
                objects_columns(),
                &[
                    ("is_auto_executed", BIT, false),
                    ("is_execution_replicated", BIT, true),
                    ("is_repl_serializable_only", BIT, true),
                    ("skips_repl_constraints", BIT, true),
                ],
            ),
        ),
        v(
            "sys.triggers",
            cols(&[
                ("name", SYSNAME, false),
                ("object_id", INT, false),
                ("parent_class", TINYINT, false),
                ("parent_class_desc", nv(60), true),
                ("parent_id", INT, false),
                ("type", SqlType::Char { len: 2 }, false),
                ("type_desc", nv(60), true),
                ("create_date", DATETIME, false),
                ("modify_date", DATETIME, false),
                ("is_ms_shipped", BIT, false),
                ("is_disabled", BIT, false),
                ("is_not_for_replication", BIT, false),
                ("is_instead_of_trigger", BIT, false),
            ]),
        ),
        v(
            "sys.sql_modules",
            cols(&[
                ("object_id", INT, false),
                ("definition", NVMAX, true),
                ("uses_ansi_nulls", BIT, true),
                ("uses_quoted_identifier", BIT, true),
                ("is_schema_bound", BIT, true),
                ("uses_database_collation", BIT, true),
                ("is_recompiled", BIT, true),
                ("null_on_null_input", BIT, true),
                ("execute_as_principal_id", INT, true),
                ("uses_native_compilation", BIT, true),
            ]),
        ),
        v(
            "sys.dm_exec_connections",
            cols(&[
                ("session_id", INT, true),
                ("most_recent_session_id", INT, true),
                ("connect_time", DATETIME, false),
                ("net_transport", nv(40), false),
                ("protocol_type", nv(40), true),
                ("protocol_version", INT, true),
                ("endpoint_id", INT, true),
                ("encrypt_option", nv(40), false),
                ("auth_scheme", nv(40), false),
                ("node_affinity", SMALLINT, false),
                ("num_reads", INT, true),
                ("num_writes", INT, true),
                ("last_read", DATETIME, true),
                ("last_write", DATETIME, true),
                ("net_packet_size", INT, true),
                ("client_net_address", vc(48), true),
                ("client_tcp_port", INT, true),
                ("local_net_address", vc(48), true),
                ("local_tcp_port", INT, true),
                ("connection_id", SqlType::UniqueIdentifier, false),
                ("parent_connection_id", SqlType::UniqueIdentifier, true),
                (
                    "most_recent_sql_handle",
                    SqlType::VarBinary { len: Some(64) },
                    true,
                ),
            ]),
        ),
        v(
            "sys.dm_exec_sessions",
            cols(&[
                ("session_id", SMALLINT, false),
                ("login_time", DATETIME, false),
                ("host_name", nv(128), true),
                ("program_name", nv(128), true),
                ("host_process_id", INT, true),
                ("client_version", INT, true),
                ("client_interface_name", nv(32), true),
                ("login_name", nv(128), false),
                ("nt_domain", nv(128), true),
                ("nt_user_name", nv(128), true),
                ("original_login_name", nv(128), false),
                ("status", nv(30), false),
                ("database_id", SMALLINT, true),
                ("is_user_process", BIT, false),
                ("transaction_isolation_level", SMALLINT, false),
                ("open_transaction_count", INT, false),
            ]),
        ),
        v(
            "sys.sequences",
            with(
                objects_columns(),
                &[
                    ("start_value", VARIANT, false),
                    ("increment", VARIANT, false),
                    ("minimum_value", VARIANT, true),
                    ("maximum_value", VARIANT, true),
                    ("is_cycling", BIT, true),
                    ("is_cached", BIT, true),
                    ("cache_size", INT, true),
                    ("system_type_id", TINYINT, false),
                    ("user_type_id", INT, false),
                    ("precision", TINYINT, false),
                    ("scale", TINYINT, false),
                    ("current_value", VARIANT, false),
                    ("is_exhausted", BIT, false),
                    ("last_used_value", VARIANT, true),
                ],
            ),
        ),
    ]
}

fn registry() -> &'static [ViewDef] {
    static REGISTRY: OnceLock<Vec<ViewDef>> = OnceLock::new();
    REGISTRY.get_or_init(build_registry)
}

/// Every system view, in a fixed order.
pub fn all_views() -> &'static [ViewDef] {
    registry()
}

/// A system view by name, case-insensitively (`sys.Tables`, `information_schema.columns`).
/// A `dbo.`/database prefix is the caller's to strip.
pub fn view(name: &str) -> Option<&'static ViewDef> {
    registry().iter().find(|v| v.name.eq_ignore_ascii_case(name))
}

/// A system view by its name parts as written (`["sys", "tables"]`, `["tempdb", "sys",
/// "columns"]`, `["db", "INFORMATION_SCHEMA", "COLUMNS"]`), brackets already removed. The
/// database part, if any, is ignored: every database shows this catalog (and `tempdb`'s views
/// show the session's temp tables).
pub fn view_by_parts<S: AsRef<str>>(parts: &[S]) -> Option<&'static ViewDef> {
    match parts {
        [.., schema, name] if parts.len() <= 3 => view(&format!("{}.{}", schema.as_ref(), name.as_ref())),
        _ => None,
    }
}

/// The columns of a system view, with SQL Server's declared types.
pub fn view_columns(name: &str) -> Option<&'static [ViewColumn]> {
    view(name).map(|v| v.columns.as_slice())
}

/// Views whose row counts come from the `row_counts` closure (refresh them before statements
/// that read them; see [`refresh_row_counts`]).
pub const ROW_COUNT_VIEWS: &[&str] = &["sys.partitions", "sys.dm_db_partition_stats"];

// ---- materialisation ----

type Row = Vec<(&'static str, Stored)>;

fn int(v: impl Into<i64>) -> Stored {
    Stored::Integer(v.into())
}

fn bit(b: bool) -> Stored {
    Stored::Integer(i64::from(b))
}

fn text(s: impl Into<String>) -> Stored {
    Stored::Text(s.into())
}

fn opt_text(s: Option<&str>) -> Stored {
    s.map_or(Stored::Null, |s| Stored::Text(s.to_string()))
}

fn opt_int(v: Option<i64>) -> Stored {
    v.map_or(Stored::Null, Stored::Integer)
}

/// What went wrong while materialising (a bug in a row builder, or SQLite refusing).
#[derive(Debug, thiserror::Error)]
pub enum RefreshError {
    #[error("catalog view {view}: row sets unknown column {column}")]
    UnknownColumn {
        view: &'static str,
        column: &'static str,
    },
    #[error("catalog view {view}: non-nullable column {column} has no value")]
    MissingValue {
        view: &'static str,
        column: &'static str,
    },
    #[error("catalog view {view}: {source}")]
    Sqlite {
        view: &'static str,
        #[source]
        source: rusqlite::Error,
    },
}

fn is_numeric(ty: SqlType) -> bool {
    matches!(
        ty,
        SqlType::Bit | SqlType::TinyInt | SqlType::SmallInt | SqlType::Int | SqlType::BigInt
    )
}

/// SQLite declared type of a view column: ints INTEGER, sql_variant none (holds what is put
/// in), strings TEXT compared as SQL Server's default collation would: case-insensitively
/// (`name = 'Orders'`), and for char(n) ignoring the blank padding (`type = 'U'` matches `U `).
fn sqlite_decl(ty: SqlType) -> &'static str {
    if is_numeric(ty) {
        "INTEGER"
    } else if ty == SqlType::SqlVariant {
        ""
    } else if matches!(ty, SqlType::Char { .. }) {
        "TEXT COLLATE RTRIM"
    } else {
        "TEXT COLLATE NOCASE"
    }
}

fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// Views whose rows are exactly another view's here (we list no system objects or columns),
/// materialised as SQLite views over it.
const ALIASES: &[(&str, &str)] = &[
    ("sys.all_columns", "sys.columns"),
    ("sys.all_objects", "sys.objects"),
];

/// (Re)fills one view's table with `rows`. Columns a row leaves out are NULL, or 0 for a
/// non-nullable numeric column (the many `is_*` flags).
fn fill(conn: &rusqlite::Connection, view: &'static ViewDef, rows: Vec<Row>) -> Result<(), RefreshError> {
    let sqlite = |source| RefreshError::Sqlite {
        view: view.name,
        source,
    };
    if let Some(&(_, base)) = ALIASES.iter().find(|(alias, _)| *alias == view.name) {
        // Same rows as its base view: a SQLite view over it instead of a second copy.
        return conn
            .execute_batch(&format!(
                "CREATE VIEW IF NOT EXISTS {} AS SELECT * FROM temp.{}",
                view.sqlite_name(),
                quote_ident(base)
            ))
            .map_err(sqlite);
    }
    let decls: Vec<String> = view
        .columns
        .iter()
        .map(|c| format!("{} {}", quote_ident(c.name), sqlite_decl(c.ty)))
        .collect();
    conn.execute_batch(&format!(
        "CREATE TABLE IF NOT EXISTS {} ({}); DELETE FROM {};",
        view.sqlite_name(),
        decls.join(", "),
        view.sqlite_name()
    ))
    .map_err(sqlite)?;
    if rows.is_empty() {
        return Ok(());
    }
    let placeholders: Vec<String> = (1..=view.columns.len()).map(|i| format!("?{i}")).collect();
    let mut stmt = conn
        .prepare_cached(&format!(
            "INSERT INTO {} VALUES ({})",
            view.sqlite_name(),
            placeholders.join(", ")
        ))
        .map_err(sqlite)?;
    let n = view.columns.len();
    for row in rows {
        let mut values: Vec<Option<Stored>> = vec![None; n];
        // Row builders list columns mostly in view order: search from just after the last hit.
        let mut next = 0;
        for (name, value) in row {
            let Some(i) = (0..n)
                .map(|k| (next + k) % n)
                .find(|&i| view.columns[i].name == name)
            else {
                return Err(RefreshError::UnknownColumn {
                    view: view.name,
                    column: name,
                });
            };
            values[i] = Some(value);
            next = i + 1;
        }
        let mut params = Vec::with_capacity(values.len());
        for (col, value) in view.columns.iter().zip(values) {
            params.push(match value {
                Some(v) => v,
                None if col.nullable => Stored::Null,
                None if is_numeric(col.ty) => Stored::Integer(0),
                None => {
                    return Err(RefreshError::MissingValue {
                        view: view.name,
                        column: col.name,
                    });
                }
            });
        }
        stmt.execute(rusqlite::params_from_iter(params)).map_err(sqlite)?;
    }
    Ok(())
}

/// Everything the row builders need.
struct Ctx<'a> {
    catalog: &'a Catalog,
    session_id: u64,
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
    fn tables_with_temp(&self) -> Vec<&'a Table> {
        self.catalog
            .tables()
            .chain(self.catalog.session_tables(self.session_id))
            .collect()
    }
}

/// One of a table's constraint objects by id (a per-table search, not a catalog-wide one).
fn own_object(table: &Table, object_id: i32) -> Option<ObjectRef> {
    table
        .constraint_objects()
        .into_iter()
        .find(|o| o.object_id == object_id)
}

fn object_row(o: &ObjectRef) -> Row {
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

fn column_row(table: &Table, c: &Column) -> Row {
    let (precision, scale) = typeinfo::precision_scale(c.ty);
    let ty_id = typeinfo::system_type_id(c.ty);
    vec![
        ("object_id", int(table.object_id)),
        ("name", text(&c.name)),
        ("column_id", int(c.column_id)),
        ("system_type_id", int(ty_id)),
        ("user_type_id", int(ty_id)),
        ("max_length", int(typeinfo::max_length(c.ty))),
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

fn referential_desc(a: ReferentialAction) -> (&'static str, &'static str) {
    match a {
        ReferentialAction::NoAction => ("NO_ACTION", "NO ACTION"),
        ReferentialAction::Cascade => ("CASCADE", "CASCADE"),
        ReferentialAction::SetNull => ("SET_NULL", "SET NULL"),
        ReferentialAction::SetDefault => ("SET_DEFAULT", "SET DEFAULT"),
    }
}

/// A stable fake partition/hobt id per (table, index), shaped like SQL Server's.
fn partition_id(object_id: i32, index_id: i32) -> i64 {
    72_057_594_037_927_936 + ((i64::from(object_id) & 0xFFFF_FFFF) << 16) + i64::from(index_id)
}

/// Index ids of a table as sys.partitions lists them: the heap (0) or clustered index (1),
/// then the nonclustered ones.
fn partition_indexes(table: &Table) -> Vec<i32> {
    let mut ids: Vec<i32> = table.indexes.iter().map(|i| i.index_id).collect();
    if table.clustered_index().is_none() {
        ids.insert(0, 0);
    }
    ids
}

fn build_rows(ctx: &Ctx<'_>, view: &str, row_counts: &dyn Fn(&Table) -> i64) -> Vec<Row> {
    let db = ctx.catalog.database();
    let mut rows: Vec<Row> = Vec::new();
    match view {
        "sys.schemas" => {
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
        "sys.objects" => {
            rows.extend(ctx.catalog.objects().iter().map(object_row));
        }
        "sys.tables" => {
            for t in ctx.tables() {
                let mut row = object_row(&ObjectRef {
                    object_id: t.object_id,
                    name: t.name.clone(),
                    schema_id: t.schema_id,
                    parent_object_id: 0,
                    kind: super::ObjectKind::Table,
                    create_date: t.create_date.clone(),
                    modify_date: t.modify_date.clone(),
                });
                let has_lob = t.columns.iter().any(|c| typeinfo::is_lob(c.ty));
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
        "sys.columns" => {
            for t in ctx.tables_with_temp() {
                rows.extend(t.columns.iter().map(|c| column_row(t, c)));
            }
        }
        "sys.computed_columns" => {
            for t in ctx.tables_with_temp() {
                for c in &t.columns {
                    if let Some(spec) = &c.computed {
                        let mut row = column_row(t, c);
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
        "sys.identity_columns" => {
            for t in ctx.tables_with_temp() {
                let (Some(c), Some(state)) = (t.identity_column(), t.identity.as_ref()) else {
                    continue;
                };
                let mut row = column_row(t, c);
                row.extend([
                    ("seed_value", int(state.seed)),
                    ("increment_value", int(state.increment)),
                    ("last_value", opt_int(state.last)),
                    ("is_not_for_replication", bit(false)),
                ]);
                rows.push(row);
            }
        }
        "sys.types" => {
            for ty in typeinfo::SYS_TYPES {
                rows.push(vec![
                    ("name", text(ty.name)),
                    ("system_type_id", int(ty.system_type_id)),
                    ("user_type_id", int(ty.user_type_id)),
                    ("schema_id", int(super::SCHEMA_SYS)),
                    ("max_length", int(ty.max_length)),
                    ("precision", int(ty.precision)),
                    ("scale", int(ty.scale)),
                    (
                        "collation_name",
                        opt_text(ty.collated.then_some(typeinfo::DEFAULT_COLLATION)),
                    ),
                    ("is_nullable", bit(ty.is_nullable)),
                    ("is_assembly_type", bit(ty.is_assembly_type)),
                ]);
            }
        }
        "sys.indexes" => {
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
        "sys.index_columns" => {
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
        "sys.key_constraints" => {
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
        "sys.foreign_keys" => {
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
                    ]);
                    rows.push(row);
                }
            }
        }
        "sys.foreign_key_columns" => {
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
        "sys.check_constraints" => {
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
                    ]);
                    rows.push(row);
                }
            }
        }
        "sys.default_constraints" => {
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
        "sys.partitions" => {
            for t in ctx.tables() {
                let count = row_counts(t);
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
        "sys.dm_db_partition_stats" => {
            for t in ctx.tables() {
                let count = row_counts(t);
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
        "INFORMATION_SCHEMA.TABLES" => {
            for t in ctx.tables() {
                rows.push(vec![
                    ("TABLE_CATALOG", text(db)),
                    ("TABLE_SCHEMA", text(ctx.schema(t))),
                    ("TABLE_NAME", text(&t.name)),
                    ("TABLE_TYPE", text("BASE TABLE")),
                ]);
            }
        }
        "INFORMATION_SCHEMA.COLUMNS" => {
            for t in ctx.tables() {
                for (ordinal, c) in t.columns.iter().enumerate() {
                    let (precision, radix, scale) = typeinfo::numeric_info(c.ty);
                    let charset = if !typeinfo::has_collation(c.ty) {
                        None
                    } else if typeinfo::is_unicode(c.ty) {
                        Some("UNICODE")
                    } else {
                        Some("iso_1")
                    };
                    rows.push(vec![
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
                        ("DATA_TYPE", text(typeinfo::type_name(c.ty))),
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
        "INFORMATION_SCHEMA.TABLE_CONSTRAINTS" => {
            for t in ctx.tables() {
                for o in t.constraint_objects() {
                    let kind = match o.kind {
                        super::ObjectKind::PrimaryKey => "PRIMARY KEY",
                        super::ObjectKind::Unique => "UNIQUE",
                        super::ObjectKind::ForeignKey => "FOREIGN KEY",
                        super::ObjectKind::Check => "CHECK",
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
        "INFORMATION_SCHEMA.KEY_COLUMN_USAGE" | "INFORMATION_SCHEMA.CONSTRAINT_COLUMN_USAGE" => {
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
                            super::store::referenced_columns(&c.definition)
                                .into_iter()
                                .filter_map(|n| t.column(&n).map(|c| c.name.clone()))
                                .collect()
                        };
                        push(&c.name, cols);
                    }
                }
            }
        }
        "INFORMATION_SCHEMA.REFERENTIAL_CONSTRAINTS" => {
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
        "INFORMATION_SCHEMA.CHECK_CONSTRAINTS" => {
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
        "INFORMATION_SCHEMA.SCHEMATA" => {
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
        "sys.databases" => {
            let created = ctx.tables().map(|t| t.create_date.clone()).min();
            let created = created.unwrap_or_else(|| "2003-04-08 09:13:36.390".to_string());
            let mut dbs: Vec<(&str, i64)> = vec![("master", 1), ("tempdb", 2), ("model", 3), ("msdb", 4)];
            if !dbs.iter().any(|(n, _)| n.eq_ignore_ascii_case(db)) {
                dbs.push((db, super::functions::USER_DATABASE_ID));
            }
            for (name, id) in dbs {
                let user_db = id >= super::functions::USER_DATABASE_ID;
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
                    ("snapshot_isolation_state", int(0)),
                    ("snapshot_isolation_state_desc", text("OFF")),
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
        "sys.dm_exec_connections" => {
            for (session_id, c) in ctx.catalog.connections() {
                rows.push(vec![
                    ("session_id", int(session_id as i64)),
                    ("most_recent_session_id", int(session_id as i64)),
                    ("connect_time", text(&c.connect_time)),
                    ("net_transport", text("TCP")),
                    ("protocol_type", text("TSQL")),
                    // TDS 7.4
                    ("protocol_version", int(0x7400_0004_i64)),
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
        "sys.dm_exec_sessions" => {
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
                    ("database_id", int(super::functions::USER_DATABASE_ID)),
                    ("is_user_process", bit(true)),
                    // READ COMMITTED
                    ("transaction_isolation_level", int(2)),
                ]);
            }
        }
        // Views, procedures, triggers, modules and sequences are not supported: always empty.
        _ => {}
    }
    rows
}

/// Runs `f` inside a savepoint, so a refresh is atomic and works in or out of a transaction.
fn in_savepoint(
    conn: &rusqlite::Connection,
    f: impl FnOnce() -> Result<(), RefreshError>,
) -> Result<(), RefreshError> {
    let sqlite = |source| RefreshError::Sqlite {
        view: "(savepoint)",
        source,
    };
    conn.execute_batch("SAVEPOINT catalog_refresh").map_err(sqlite)?;
    match f() {
        Ok(()) => conn.execute_batch("RELEASE catalog_refresh").map_err(sqlite),
        Err(e) => {
            // The refresh error is what matters; a failed rollback leaves nothing worse.
            let _ = conn.execute_batch("ROLLBACK TO catalog_refresh; RELEASE catalog_refresh");
            Err(e)
        }
    }
}

/// (Re)creates every system view in `conn`'s temp schema from the catalog. `row_counts`
/// gives a table's current row count (sys.partitions, sys.dm_db_partition_stats).
pub fn refresh(
    conn: &rusqlite::Connection,
    catalog: &Catalog,
    session_id: u64,
    row_counts: impl Fn(&Table) -> i64,
) -> Result<(), RefreshError> {
    let ctx = Ctx { catalog, session_id };
    in_savepoint(conn, || {
        for view in registry() {
            fill(conn, view, build_rows(&ctx, view.name, &row_counts))?;
            record_version(conn, view.name, catalog.version())?;
        }
        Ok(())
    })
}

/// Where each connection records the catalog version each view was last built from. It lives
/// in the temp schema with the views, so a rolled-back transaction rolls both back together.
const VERSIONS_TABLE: &str = "temp.\"catalog.view_versions\"";

fn record_version(conn: &rusqlite::Connection, view: &'static str, version: u64) -> Result<(), RefreshError> {
    let sqlite = |source| RefreshError::Sqlite { view, source };
    conn.execute_batch(&format!(
        "CREATE TABLE IF NOT EXISTS {VERSIONS_TABLE} (view TEXT PRIMARY KEY, version INTEGER NOT NULL)"
    ))
    .map_err(sqlite)?;
    conn.prepare_cached(&format!(
        "INSERT OR REPLACE INTO {VERSIONS_TABLE} (view, version) VALUES (?1, ?2)"
    ))
    .and_then(|mut st| st.execute(rusqlite::params![view, version as i64]))
    .map_err(sqlite)?;
    Ok(())
}

fn built_version(conn: &rusqlite::Connection, view: &'static str) -> Option<u64> {
    conn.query_row(
        &format!("SELECT version FROM {VERSIONS_TABLE} WHERE view = ?1"),
        [view],
        |r| r.get::<_, i64>(0),
    )
    .ok()
    .map(|v| v as u64)
}

/// Brings the named views (any case; unknown names are ignored) up to date for one statement:
/// each is rebuilt only when the catalog changed since it was last built on this connection,
/// and the row-count views always. Cheaper than [`refresh`] when a statement reads a few views.
pub fn refresh_views(
    conn: &rusqlite::Connection,
    catalog: &Catalog,
    session_id: u64,
    names: &[&str],
    row_counts: impl Fn(&Table) -> i64,
) -> Result<(), RefreshError> {
    let ctx = Ctx { catalog, session_id };
    let version = catalog.version();
    in_savepoint(conn, || {
        for name in names {
            let Some(v) = view(name) else { continue };
            // An alias reads its base view: that is the one to build.
            let targets: Vec<&'static ViewDef> = match ALIASES.iter().find(|(alias, _)| *alias == v.name) {
                Some(&(_, base)) => [view(base), Some(v)].into_iter().flatten().collect(),
                None => vec![v],
            };
            for v in targets {
                let counts = ROW_COUNT_VIEWS.contains(&v.name);
                if counts || built_version(conn, v.name) != Some(version) {
                    fill(conn, v, build_rows(&ctx, v.name, &row_counts))?;
                    record_version(conn, v.name, version)?;
                }
            }
        }
        Ok(())
    })
}

/// Refreshes only the row-count views, before a statement that reads them.
pub fn refresh_row_counts(
    conn: &rusqlite::Connection,
    catalog: &Catalog,
    session_id: u64,
    row_counts: impl Fn(&Table) -> i64,
) -> Result<(), RefreshError> {
    let ctx = Ctx { catalog, session_id };
    in_savepoint(conn, || {
        for name in ROW_COUNT_VIEWS {
            if let Some(view) = view(name) {
                fill(conn, view, build_rows(&ctx, view.name, &row_counts))?;
            }
        }
        Ok(())
    })
}

#[cfg(test)]
#[path = "views_tests.rs"]
mod tests;
