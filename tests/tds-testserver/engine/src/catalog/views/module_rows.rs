//! Rows of the views over stored modules, alias types, XML schema collections and extended
//! properties, and of the SQL Server 2000 compatibility views (sysobjects, syscolumns,
//! sysindexes).

use super::*;
use crate::catalog::store::{Module, ModuleKind};

fn module_object(m: &Module) -> Row {
    vec![
        ("name", text(&m.name)),
        ("object_id", int(m.object_id)),
        ("principal_id", Stored::Null),
        ("schema_id", int(m.schema_id)),
        ("parent_object_id", int(m.parent_object_id)),
        ("type", text(m.kind.type_code())),
        ("type_desc", text(m.kind.type_desc())),
        ("create_date", text(&m.create_date)),
        ("modify_date", text(&m.modify_date)),
        ("is_ms_shipped", bit(false)),
        ("is_published", bit(false)),
        ("is_schema_published", bit(false)),
    ]
}

/// The rows of `view` when it is one of these; `false` otherwise.
pub(super) fn build(ctx: &Ctx<'_>, view: &str, rows: &mut Vec<Row>, sizes: &dyn super::TableSizes) -> bool {
    match view {
        "sys.views" => sys_views(ctx, rows),
        "sys.procedures" => sys_procedures(ctx, rows),
        "sys.triggers" => sys_triggers(ctx, rows),
        "sys.sql_modules" => sys_sql_modules(ctx, rows),
        "INFORMATION_SCHEMA.VIEWS" => information_schema_views(ctx, rows),
        "INFORMATION_SCHEMA.ROUTINES" => information_schema_routines(ctx, rows),
        "sys.sql_expression_dependencies" => sys_sql_expression_dependencies(ctx, rows),
        "INFORMATION_SCHEMA.VIEW_TABLE_USAGE" => information_schema_view_table_usage(ctx, rows),
        "sys.extended_properties" => sys_extended_properties(ctx, rows),
        "sys.xml_schema_collections" => sys_xml_schema_collections(ctx, rows),
        "sys.sysobjects" => sys_sysobjects(ctx, rows),
        "sys.syscolumns" => sys_syscolumns(ctx, rows),
        "sys.sysindexes" => sys_sysindexes(ctx, rows, sizes),
        _ => return false,
    }
    true
}

/// A scalar function's RETURNS type name (`varchar`), for INFORMATION_SCHEMA.ROUTINES.
fn returns_type(definition: &str) -> String {
    let lower = definition.to_ascii_lowercase();
    lower
        .find("returns")
        .map(|p| {
            lower[p + 7..]
                .trim_start()
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '[' || *c == ']')
                .filter(|c| *c != '[' && *c != ']')
                .collect()
        })
        .unwrap_or_default()
}

/// The rows of sys.views.
fn sys_views(ctx: &Ctx<'_>, rows: &mut Vec<Row>) {
    let cat = ctx.catalog;
    let plain = || cat.modules().filter(|m| !m.database_trigger);
    for m in plain().filter(|m| m.kind == ModuleKind::View) {
        let mut row = module_object(m);
        row.extend([
            ("is_replicated", bit(false)),
            ("has_replication_filter", bit(false)),
            ("has_opaque_metadata", bit(false)),
            ("has_unchecked_assembly_data", bit(false)),
            ("with_check_option", bit(false)),
            ("is_date_correlation_view", bit(false)),
            ("is_tracked_by_cdc", bit(false)),
            ("has_snapshot", bit(false)),
        ]);
        rows.push(row);
    }
}

/// The rows of sys.procedures.
fn sys_procedures(ctx: &Ctx<'_>, rows: &mut Vec<Row>) {
    let cat = ctx.catalog;
    let plain = || cat.modules().filter(|m| !m.database_trigger);
    for m in plain().filter(|m| m.kind == ModuleKind::Procedure) {
        let mut row = module_object(m);
        row.extend([
            ("is_auto_executed", bit(false)),
            ("is_execution_replicated", bit(false)),
            ("is_repl_serializable_only", bit(false)),
            ("skips_repl_constraints", bit(false)),
        ]);
        rows.push(row);
    }
}

/// The rows of sys.triggers.
fn sys_triggers(ctx: &Ctx<'_>, rows: &mut Vec<Row>) {
    let cat = ctx.catalog;
    for m in cat.modules().filter(|m| m.kind == ModuleKind::Trigger) {
        rows.push(vec![
            ("name", text(&m.name)),
            ("object_id", int(m.object_id)),
            ("parent_class", int(if m.database_trigger { 0 } else { 1 })),
            (
                "parent_class_desc",
                text(if m.database_trigger {
                    "DATABASE"
                } else {
                    "OBJECT_OR_COLUMN"
                }),
            ),
            ("parent_id", int(m.parent_object_id)),
            ("type", text("TR")),
            ("type_desc", text("SQL_TRIGGER")),
            ("create_date", text(&m.create_date)),
            ("modify_date", text(&m.modify_date)),
            ("is_ms_shipped", bit(false)),
            ("is_disabled", bit(m.is_disabled)),
            (
                "is_not_for_replication",
                bit(m.definition.to_ascii_uppercase().contains("NOT FOR REPLICATION")),
            ),
            ("is_instead_of_trigger", bit(m.instead_of)),
        ]);
    }
}

/// The rows of sys.sql_modules.
fn sys_sql_modules(ctx: &Ctx<'_>, rows: &mut Vec<Row>) {
    let cat = ctx.catalog;
    for m in cat.modules() {
        rows.push(vec![
            ("object_id", int(m.object_id)),
            ("definition", text(&m.definition)),
            ("uses_ansi_nulls", bit(true)),
            ("uses_quoted_identifier", bit(true)),
            (
                "is_schema_bound",
                bit(m.definition.to_ascii_uppercase().contains("SCHEMABINDING")),
            ),
            ("uses_database_collation", bit(false)),
            ("is_recompiled", bit(false)),
            ("null_on_null_input", bit(false)),
            ("execute_as_principal_id", Stored::Null),
            ("uses_native_compilation", bit(false)),
        ]);
    }
}

/// The rows of INFORMATION_SCHEMA.VIEWS.
fn information_schema_views(ctx: &Ctx<'_>, rows: &mut Vec<Row>) {
    let cat = ctx.catalog;
    let db = cat.database();
    let schema_name = |id: i32| cat.schema_name(id).unwrap_or("dbo").to_string();
    let plain = || cat.modules().filter(|m| !m.database_trigger);
    for m in plain().filter(|m| m.kind == ModuleKind::View) {
        let def: String = m.definition.chars().take(4000).collect();
        rows.push(vec![
            ("TABLE_CATALOG", text(db)),
            ("TABLE_SCHEMA", text(schema_name(m.schema_id))),
            ("TABLE_NAME", text(&m.name)),
            ("VIEW_DEFINITION", text(def)),
            ("CHECK_OPTION", text("NONE")),
            ("IS_UPDATABLE", text("NO")),
        ]);
    }
}

/// The rows of INFORMATION_SCHEMA.ROUTINES.
fn information_schema_routines(ctx: &Ctx<'_>, rows: &mut Vec<Row>) {
    let cat = ctx.catalog;
    let db = cat.database();
    let schema_name = |id: i32| cat.schema_name(id).unwrap_or("dbo").to_string();
    let plain = || cat.modules().filter(|m| !m.database_trigger);
    for m in plain().filter(|m| !matches!(m.kind, ModuleKind::View | ModuleKind::Trigger)) {
        let def: String = m.definition.chars().take(4000).collect();
        let (kind, data_type) = match m.kind {
            ModuleKind::Procedure => ("PROCEDURE", None),
            ModuleKind::ScalarFunction => ("FUNCTION", Some(returns_type(&m.definition))),
            _ => ("FUNCTION", Some("TABLE".to_string())),
        };
        rows.push(vec![
            ("SPECIFIC_CATALOG", text(db)),
            ("SPECIFIC_SCHEMA", text(schema_name(m.schema_id))),
            ("SPECIFIC_NAME", text(&m.name)),
            ("ROUTINE_CATALOG", text(db)),
            ("ROUTINE_SCHEMA", text(schema_name(m.schema_id))),
            ("ROUTINE_NAME", text(&m.name)),
            ("ROUTINE_TYPE", text(kind)),
            ("DATA_TYPE", data_type.map(text).unwrap_or(Stored::Null)),
            ("ROUTINE_BODY", text("SQL")),
            ("ROUTINE_DEFINITION", text(def)),
            ("IS_DETERMINISTIC", text("NO")),
            ("SQL_DATA_ACCESS", text("MODIFIES")),
            ("CREATED", text(&m.create_date)),
            ("LAST_ALTERED", text(&m.modify_date)),
        ]);
    }
}

/// The rows of sys.sql_expression_dependencies.
fn sys_sql_expression_dependencies(ctx: &Ctx<'_>, rows: &mut Vec<Row>) {
    let cat = ctx.catalog;
    let plain = || cat.modules().filter(|m| !m.database_trigger);
    for m in plain().filter(|m| m.kind == ModuleKind::View) {
        for (schema, entity) in &m.references {
            let schema_or_dbo = schema.as_deref().unwrap_or("dbo");
            let referenced = cat.find_object(schema_or_dbo, entity, 0).map(|o| o.object_id);
            rows.push(vec![
                ("referencing_id", int(m.object_id)),
                ("referencing_minor_id", int(0)),
                ("referencing_class", int(1)),
                ("referencing_class_desc", text("OBJECT_OR_COLUMN")),
                (
                    "is_schema_bound_reference",
                    bit(m.definition.to_ascii_uppercase().contains("SCHEMABINDING")),
                ),
                ("referenced_class", int(1)),
                ("referenced_class_desc", text("OBJECT_OR_COLUMN")),
                ("referenced_server_name", Stored::Null),
                ("referenced_database_name", Stored::Null),
                ("referenced_schema_name", opt_text(schema.as_deref())),
                ("referenced_entity_name", text(entity)),
                ("referenced_id", referenced.map_or(Stored::Null, int)),
                ("referenced_minor_id", int(0)),
                ("is_caller_dependent", bit(schema.is_none())),
                ("is_ambiguous", bit(false)),
            ]);
        }
    }
}

/// The rows of INFORMATION_SCHEMA.VIEW_TABLE_USAGE.
fn information_schema_view_table_usage(ctx: &Ctx<'_>, rows: &mut Vec<Row>) {
    let cat = ctx.catalog;
    let db = cat.database();
    let schema_name = |id: i32| cat.schema_name(id).unwrap_or("dbo").to_string();
    let plain = || cat.modules().filter(|m| !m.database_trigger);
    for m in plain().filter(|m| m.kind == ModuleKind::View) {
        for (schema, entity) in &m.references {
            let schema = schema.as_deref().unwrap_or("dbo");
            let Some(o) = cat.find_object(schema, entity, 0) else {
                continue;
            };
            rows.push(vec![
                ("VIEW_CATALOG", text(db)),
                ("VIEW_SCHEMA", text(schema_name(m.schema_id))),
                ("VIEW_NAME", text(&m.name)),
                ("TABLE_CATALOG", text(db)),
                ("TABLE_SCHEMA", text(schema_name(o.schema_id))),
                ("TABLE_NAME", text(&o.name)),
            ]);
        }
    }
}

/// The rows of sys.extended_properties.
fn sys_extended_properties(ctx: &Ctx<'_>, rows: &mut Vec<Row>) {
    let cat = ctx.catalog;
    for p in cat.extended_properties() {
        rows.push(vec![
            ("class", int(p.class)),
            (
                "class_desc",
                text(match p.class {
                    0 => "DATABASE",
                    1 => "OBJECT_OR_COLUMN",
                    3 => "SCHEMA",
                    7 => "INDEX",
                    20 => "DATASPACE",
                    _ => "OBJECT_OR_COLUMN",
                }),
            ),
            ("major_id", int(p.major_id)),
            ("minor_id", int(p.minor_id)),
            ("name", text(&p.name)),
            ("value", text(&p.value)),
        ]);
    }
}

/// The rows of sys.xml_schema_collections.
fn sys_xml_schema_collections(ctx: &Ctx<'_>, rows: &mut Vec<Row>) {
    let cat = ctx.catalog;
    for x in cat.xml_schema_collections() {
        rows.push(vec![
            ("xml_collection_id", int(x.xml_collection_id)),
            ("schema_id", int(x.schema_id)),
            ("principal_id", Stored::Null),
            ("name", text(&x.name)),
            ("create_date", text(&x.create_date)),
            ("modify_date", text(&x.create_date)),
        ]);
    }
}

/// The rows of sys.sysobjects.
fn sys_sysobjects(ctx: &Ctx<'_>, rows: &mut Vec<Row>) {
    let cat = ctx.catalog;
    for o in cat.objects() {
        let code = o.kind.type_code();
        rows.push(vec![
            ("name", text(&o.name)),
            ("id", int(o.object_id)),
            ("xtype", text(code)),
            ("uid", int(o.schema_id)),
            ("info", int(0)),
            ("status", int(0)),
            ("base_schema_ver", int(0)),
            ("replinfo", int(0)),
            ("parent_obj", int(o.parent_object_id)),
            ("crdate", text(&o.create_date)),
            ("ftcatid", int(0)),
            ("schema_ver", int(0)),
            ("stats_schema_ver", int(0)),
            ("type", text(code)),
            ("userstat", int(i64::from(code == "U "))),
            ("sysstat", int(0)),
            ("indexdel", int(0)),
            ("refdate", text(&o.create_date)),
            ("version", int(0)),
            ("deltrig", int(0)),
            ("instrig", int(0)),
            ("updtrig", int(0)),
            ("seltrig", int(0)),
            ("category", int(0)),
            ("cache", int(0)),
        ]);
    }
}

/// The rows of sys.syscolumns.
fn sys_syscolumns(ctx: &Ctx<'_>, rows: &mut Vec<Row>) {
    for t in ctx.tables_with_temp() {
        for c in &t.columns {
            let (precision, scale) = typeinfo::precision_scale(c.ty);
            let ty = typeinfo::system_type_id(c.ty);
            rows.push(vec![
                ("name", text(&c.name)),
                ("id", int(t.object_id)),
                ("xtype", int(ty)),
                ("typestat", int(0)),
                ("xusertype", int(ty)),
                ("length", int(typeinfo::max_length(c.ty))),
                ("xprec", int(precision)),
                ("xscale", int(scale)),
                ("colid", int(c.column_id)),
                ("colorder", int(c.column_id)),
                ("cdefault", int(c.default.as_ref().map_or(0, |d| d.object_id))),
                ("domain", int(0)),
                ("number", int(0)),
                ("colstat", int(0)),
                ("iscomputed", int(i64::from(c.computed.is_some()))),
                ("isoutparam", int(0)),
                ("isnullable", int(i64::from(c.nullable))),
                ("collation", opt_text(c.collation_name())),
                ("prec", int(precision)),
                ("scale", int(scale)),
                ("status", int(if c.nullable { 8 } else { 0 })),
                ("type", int(ty)),
                ("usertype", int(0)),
            ]);
        }
    }
}

/// The rows of sys.sysindexes.
fn sys_sysindexes(ctx: &Ctx<'_>, rows: &mut Vec<Row>, sizes: &dyn super::TableSizes) {
    let cat = ctx.catalog;
    for t in cat.tables() {
        let count = sizes.rows(t);
        if t.clustered_index().is_none() {
            rows.push(vec![
                ("id", int(t.object_id)),
                ("status", int(0)),
                ("indid", int(0)),
                ("name", Stored::Null),
                ("keycnt", int(0)),
                ("groupid", int(1)),
                ("rowcnt", int(count)),
                ("rows", int(count)),
                ("OrigFillFactor", int(0)),
            ]);
        }
        for i in &t.indexes {
            rows.push(vec![
                ("id", int(t.object_id)),
                ("status", int(if i.unique { 2 } else { 0 })),
                ("indid", int(i.index_id)),
                ("name", text(&i.name)),
                ("keycnt", int(i.keys.len() as i64)),
                ("groupid", int(1)),
                ("rowcnt", int(count)),
                ("rows", int(count)),
                ("OrigFillFactor", int(0)),
            ]);
        }
    }
}
