//! SQL Server's metadata functions (OBJECT_ID, COLUMNPROPERTY, SERVERPROPERTY, ...) as SQLite
//! scalar functions over the shared catalog, and their SQL Server result types.
//!
//! Each function takes the catalog's read lock while it runs: the engine must not hold the
//! write lock while SQLite executes a statement (std's RwLock is not reentrant).

use super::store::{Catalog, Column, ModuleKind, ObjectKind, ObjectRef, Table};
use super::typeinfo;
use crate::types::SqlType;
use rusqlite::functions::{Context, FunctionFlags};
use rusqlite::types::{Value as Stored, ValueRef};
use std::sync::{Arc, RwLock};

/// @@VERSION.
pub const VERSION: &str =
    "Microsoft SQL Server 2022 (RTM) - 16.0.4000.0 (X64) \n\tDeveloper Edition (64-bit) (TDS test server)";
/// SERVERPROPERTY('ProductVersion'): SQL Server 2022 CU.
pub const PRODUCT_VERSION: &str = "16.0.4000.0";
pub const EDITION: &str = "Developer Edition (64-bit)";
/// 3: Enterprise-class engine (Developer, Enterprise, Evaluation).
pub const ENGINE_EDITION: i64 = 3;
/// The id the user database has in DB_ID() (master, tempdb, model and msdb are 1-4).
pub const USER_DATABASE_ID: i64 = 5;
const SYSTEM_DATABASES: &[(&str, i64)] = &[("master", 1), ("tempdb", 2), ("model", 3), ("msdb", 4)];

/// What the functions of one session see.
#[derive(Debug, Clone)]
pub struct FunctionContext {
    pub catalog: Arc<RwLock<Catalog>>,
    pub session_id: u64,
    /// The session's database (DB_NAME()).
    pub database: String,
}

/// A parsed 1-, 2- or 3-part object name (`t`, `dbo.t`, `[db].[dbo].[t]`, `tempdb..#t`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectName {
    pub database: Option<String>,
    /// `None` when omitted (`t`, `db..t`): resolves in dbo.
    pub schema: Option<String>,
    pub name: String,
}

/// Splits a multi-part name on dots outside `[...]`/`"..."`, unquoting each part (`]]` and `""`
/// escape the closing quote). More than three parts, or an empty name, is `None`.
pub fn parse_object_name(text: &str) -> Option<ObjectName> {
    let mut parts: Vec<String> = vec![String::new()];
    let mut chars = text.trim().chars().peekable();
    while let Some(ch) = chars.next() {
        match ch {
            '[' | '"' => {
                let close = if ch == '[' { ']' } else { '"' };
                loop {
                    match chars.next() {
                        Some(c) if c == close => {
                            if chars.peek() == Some(&close) {
                                chars.next();
                                parts.last_mut()?.push(close);
                            } else {
                                break;
                            }
                        }
                        Some(c) => parts.last_mut()?.push(c),
                        None => return None,
                    }
                }
            }
            '.' => parts.push(String::new()),
            c => parts.last_mut()?.push(c),
        }
    }
    let mut parts: Vec<String> = parts.into_iter().map(|p| p.trim().to_string()).collect();
    let name = parts.pop().filter(|n| !n.is_empty())?;
    let non_empty = |s: Option<String>| s.filter(|s| !s.is_empty());
    match parts.len() {
        0 => Some(ObjectName {
            database: None,
            schema: None,
            name,
        }),
        1 => Some(ObjectName {
            database: None,
            schema: non_empty(parts.pop()),
            name,
        }),
        2 => {
            let schema = non_empty(parts.pop());
            let database = non_empty(parts.pop());
            Some(ObjectName {
                database,
                schema,
                name,
            })
        }
        _ => None,
    }
}

impl FunctionContext {
    fn with_catalog<T>(&self, f: impl FnOnce(&Catalog) -> Option<T>) -> Option<T> {
        // A poisoned lock means a writer panicked; the data is still the last consistent state.
        let guard = match self.catalog.read() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        f(&guard)
    }

    /// Resolves a name as OBJECT_ID does: temp names (`#t`, `tempdb..#t`) in the session,
    /// other names in this database (dbo when no schema is given).
    fn resolve(&self, catalog: &Catalog, text: &str) -> Option<ObjectRef> {
        let name = parse_object_name(text)?;
        let temp = name.name.starts_with('#');
        if let Some(db) = &name.database {
            let ok = if temp {
                db.eq_ignore_ascii_case("tempdb")
            } else {
                db.eq_ignore_ascii_case(&self.database)
            };
            if !ok {
                return None;
            }
        }
        let schema = name.schema.as_deref().unwrap_or("dbo");
        catalog.find_object(schema, &name.name, self.session_id)
    }

    fn table_by_name<'c>(&self, catalog: &'c Catalog, text: &str) -> Option<&'c Table> {
        let o = self.resolve(catalog, text)?;
        if o.kind == ObjectKind::Table {
            catalog.table(o.object_id)
        } else {
            None
        }
    }
}

fn arg_text(ctx: &Context<'_>, i: usize) -> Option<String> {
    if i >= ctx.len() {
        return None;
    }
    match ctx.get_raw(i) {
        ValueRef::Text(t) => Some(String::from_utf8_lossy(t).into_owned()),
        ValueRef::Integer(v) => Some(v.to_string()),
        ValueRef::Real(v) => Some(v.to_string()),
        ValueRef::Blob(b) => Some(String::from_utf8_lossy(b).into_owned()),
        ValueRef::Null => None,
    }
}

fn arg_int(ctx: &Context<'_>, i: usize) -> Option<i64> {
    if i >= ctx.len() {
        return None;
    }
    match ctx.get_raw(i) {
        ValueRef::Integer(v) => Some(v),
        ValueRef::Real(v) => Some(v as i64),
        ValueRef::Text(t) => std::str::from_utf8(t).ok()?.trim().parse().ok(),
        _ => None,
    }
}

fn arg_id(ctx: &Context<'_>, i: usize) -> Option<i32> {
    arg_int(ctx, i).and_then(|v| i32::try_from(v).ok())
}

fn flag(b: bool) -> Option<i64> {
    Some(i64::from(b))
}

/// COLUMNPROPERTY's answer for one column.
fn column_property(c: &Column, property: &str) -> Option<i64> {
    let (precision, scale) = typeinfo::precision_scale(c.ty);
    let is_char = typeinfo::char_max_length(c.ty).is_some();
    match property.to_ascii_lowercase().as_str() {
        "isidentity" => flag(c.identity.is_some()),
        "allowsnull" => flag(c.nullable),
        "iscomputed" => flag(c.computed.is_some()),
        "isrowguidcol" => flag(c.rowguidcol),
        "columnid" => Some(i64::from(c.column_id)),
        // Precision is the length in characters for character and binary types.
        "precision" => {
            if is_char {
                typeinfo::char_max_length(c.ty)
            } else {
                Some(precision)
            }
        }
        "scale" => (!is_char).then_some(scale),
        "charmaxlen" => is_char.then(|| typeinfo::max_length(c.ty)),
        _ => None,
    }
}

fn object_property(catalog: &Catalog, o: &ObjectRef, property: &str) -> Option<i64> {
    let table = (o.kind == ObjectKind::Table)
        .then(|| catalog.table(o.object_id))
        .flatten();
    let table_flag = |f: &dyn Fn(&Table) -> bool| Some(i64::from(table.is_some_and(f)));
    match property.to_ascii_lowercase().as_str() {
        "isusertable" | "istable" => flag(o.kind == ObjectKind::Table),
        "tablehasprimarykey" => table_flag(&|t| t.primary_key().is_some()),
        "tablehasidentity" => table_flag(&|t| t.identity.is_some()),
        "tablehasclustindex" => table_flag(&|t| t.clustered_index().is_some()),
        "tablehasindex" => table_flag(&|t| !t.indexes.is_empty()),
        "tablehasforeignkey" => table_flag(&|t| !t.foreign_keys.is_empty()),
        "tablehascheckcnst" => table_flag(&|t| !t.checks.is_empty()),
        "tablehasdefaultcnst" => table_flag(&|t| t.columns.iter().any(|c| c.default.is_some())),
        "tablehasuniquecnst" => table_flag(&|t| t.indexes.iter().any(|i| i.unique_constraint)),
        "isprimarykey" => flag(o.kind == ObjectKind::PrimaryKey),
        "isuniquecnst" => flag(o.kind == ObjectKind::Unique),
        "isforeignkey" => flag(o.kind == ObjectKind::ForeignKey),
        "ischeckcnst" => flag(o.kind == ObjectKind::Check),
        "isdefaultcnst" => flag(o.kind == ObjectKind::Default),
        "isconstraint" => flag(matches!(
            o.kind,
            ObjectKind::PrimaryKey
                | ObjectKind::Unique
                | ObjectKind::ForeignKey
                | ObjectKind::Check
                | ObjectKind::Default
        )),
        "isview" => flag(o.kind == ObjectKind::Module(ModuleKind::View)),
        "isprocedure" => flag(o.kind == ObjectKind::Module(ModuleKind::Procedure)),
        "isscalarfunction" => flag(o.kind == ObjectKind::Module(ModuleKind::ScalarFunction)),
        "istablefunction" => flag(matches!(
            o.kind,
            ObjectKind::Module(ModuleKind::InlineTableFunction | ModuleKind::TableFunction)
        )),
        "isinlinefunction" => flag(o.kind == ObjectKind::Module(ModuleKind::InlineTableFunction)),
        "istrigger" => flag(o.kind == ObjectKind::Module(ModuleKind::Trigger)),
        "isexecuted" => flag(matches!(
            o.kind,
            ObjectKind::Module(
                ModuleKind::Procedure
                    | ModuleKind::ScalarFunction
                    | ModuleKind::InlineTableFunction
                    | ModuleKind::TableFunction
                    | ModuleKind::Trigger
            )
        )),
        "issystemtable" | "ismsshipped" => flag(false),
        "ownerid" | "schemaid" => Some(i64::from(o.schema_id)),
        _ => None,
    }
}

fn index_property(table: &Table, index: &str, property: &str) -> Option<i64> {
    let i = table.index(index)?;
    match property.to_ascii_lowercase().as_str() {
        "isunique" => flag(i.unique),
        "isclustered" => flag(i.clustered),
        "indexid" => Some(i64::from(i.index_id)),
        "isdisabled" | "ispadindex" | "ishypothetical" | "isautostatistics" | "isstatistics" => flag(false),
        "isrowlockdisallowed" | "ispagelockdisallowed" => flag(false),
        "indexfillfactor" => Some(0),
        _ => None,
    }
}

fn server_property(property: &str) -> Option<Stored> {
    let text = |s: &str| Some(Stored::Text(s.to_string()));
    match property.to_ascii_lowercase().as_str() {
        "productversion" => text(PRODUCT_VERSION),
        "productmajorversion" => text("16"),
        "productminorversion" => text("0"),
        "productbuild" => text("4000"),
        "productlevel" => text("RTM"),
        "productupdatelevel" => text("CU1"),
        "edition" => text(EDITION),
        "editionid" => Some(Stored::Integer(-2_117_995_310)),
        "engineedition" => Some(Stored::Integer(ENGINE_EDITION)),
        "collation" => text(typeinfo::DEFAULT_COLLATION),
        "sqlcharset" => Some(Stored::Integer(1)),
        "sqlsortorder" => Some(Stored::Integer(52)),
        "lcid" => Some(Stored::Integer(1033)),
        "machinename" | "servername" | "computernamephysicalnetbios" => text("localhost"),
        "instancename" => None,
        "isclustered" | "isfulltextinstalled" | "ishadrenabled" | "isintegratedsecurityonly" => {
            Some(Stored::Integer(0))
        }
        "issingleuser" => Some(Stored::Integer(0)),
        "processid" => Some(Stored::Integer(i64::from(std::process::id()))),
        "resourceversion" => text(PRODUCT_VERSION),
        "resourcelastupdatedatetime" => text("2022-10-08 06:37:46.310"),
        _ => None,
    }
}

/// The id DB_ID() gives the catalog's own database (`master`'s when the server was started on
/// it): what the DMVs report their tables under.
pub fn catalog_database_id(database: &str) -> i64 {
    db_id(database, database).unwrap_or(USER_DATABASE_ID)
}

fn db_id(name: &str, current: &str) -> Option<i64> {
    SYSTEM_DATABASES
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|&(_, id)| id)
        .or_else(|| name.eq_ignore_ascii_case(current).then_some(USER_DATABASE_ID))
}

fn db_name(id: i64, current: &str) -> Option<String> {
    if id == USER_DATABASE_ID && db_id(current, "").is_none() {
        return Some(current.to_string());
    }
    SYSTEM_DATABASES
        .iter()
        .find(|&&(_, i)| i == id)
        .map(|(n, _)| n.to_string())
}

fn sys_type(name: &str) -> Option<&'static typeinfo::SysType> {
    let name = name.trim().trim_start_matches('[').trim_end_matches(']');
    let name = name.strip_prefix("sys.").unwrap_or(name);
    typeinfo::SYS_TYPES
        .iter()
        .find(|t| t.name.eq_ignore_ascii_case(name))
}

/// The permissions `sys.fn_builtin_permissions` lists per securable class (those a migration tool
/// asks about, and their neighbours); HAS_PERMS_BY_NAME answers NULL for a name not listed.
fn valid_permission(class: &str, permission: &str) -> bool {
    const SERVER: &[&str] = &[
        "ALTER ANY DATABASE",
        "ALTER ANY LOGIN",
        "ALTER SERVER STATE",
        "ALTER SETTINGS",
        "AUTHENTICATE SERVER",
        "CONNECT SQL",
        "CONTROL SERVER",
        "CREATE ANY DATABASE",
        "SHUTDOWN",
        "VIEW ANY DATABASE",
        "VIEW ANY DEFINITION",
        "VIEW SERVER STATE",
    ];
    const DATABASE: &[&str] = &[
        "ALTER",
        "ALTER ANY SCHEMA",
        "ALTER ANY USER",
        "AUTHENTICATE",
        "CONNECT",
        "CONTROL",
        "CREATE FUNCTION",
        "CREATE PROCEDURE",
        "CREATE SCHEMA",
        "CREATE TABLE",
        "CREATE TYPE",
        "CREATE VIEW",
        "DELETE",
        "EXECUTE",
        "INSERT",
        "REFERENCES",
        "SELECT",
        "SHOWPLAN",
        "TAKE OWNERSHIP",
        "UPDATE",
        "VIEW DATABASE STATE",
        "VIEW DEFINITION",
    ];
    const SCHEMA_OR_OBJECT: &[&str] = &[
        "ALTER",
        "CONTROL",
        "DELETE",
        "EXECUTE",
        "INSERT",
        "REFERENCES",
        "SELECT",
        "TAKE OWNERSHIP",
        "UPDATE",
        "VIEW CHANGE TRACKING",
        "VIEW DEFINITION",
    ];
    let permission = permission.trim().to_ascii_uppercase();
    let listed = match class {
        "SERVER" => SERVER,
        "DATABASE" => DATABASE,
        "SCHEMA" | "OBJECT" => SCHEMA_OR_OBJECT,
        _ => return false,
    };
    permission == "ANY" || listed.contains(&permission.as_str())
}

/// HAS_PERMS_BY_NAME(securable, class, permission[, sub_securable, 'COLUMN']) for the test
/// server's one login, a sysadmin: 1 for every valid permission on a securable that exists; NULL,
/// as SQL Server answers, for an unknown class or permission or a securable not found.
fn has_perms_by_name(
    c: &FunctionContext,
    securable: Option<&str>,
    class: Option<&str>,
    permission: &str,
    column: Option<&str>,
) -> Option<i64> {
    // A NULL class with a NULL securable is the server (SQL Server's documented shorthand).
    let class = match (class, securable) {
        (Some(cl), _) => cl.trim().to_ascii_uppercase(),
        (None, None) => "SERVER".to_string(),
        (None, Some(_)) => return None,
    };
    if !valid_permission(&class, permission) {
        return None;
    }
    let exists = match (class.as_str(), securable) {
        ("SERVER", None) => true,
        ("SERVER", Some(_)) => false,
        ("DATABASE", None) => true,
        ("DATABASE", Some(db)) => db_id(db.trim(), &c.database).is_some(),
        ("SCHEMA", Some(name)) => c
            .with_catalog(|cat| cat.schema_id(name.trim()).map(|_| ()))
            .is_some(),
        ("OBJECT", Some(name)) => c
            .with_catalog(|cat| {
                let o = c.resolve(cat, name)?;
                match column {
                    None => Some(()),
                    Some(col) => cat.table(o.object_id)?.column(col).map(|_| ()),
                }
            })
            .is_some(),
        _ => false,
    };
    exists.then_some(1)
}

/// IS_ROLEMEMBER(role[, principal]) for the test server's login, which enters every database
/// as `dbo`: `dbo` is a member of `db_owner` (and of `public`, as everyone), of no other fixed
/// database role; NULL for a role that does not exist or a principal other than `dbo`.
fn is_rolemember(role: &str, principal: Option<&str>) -> Option<i64> {
    const FIXED: &[&str] = &[
        "db_accessadmin",
        "db_backupoperator",
        "db_datareader",
        "db_datawriter",
        "db_ddladmin",
        "db_denydatareader",
        "db_denydatawriter",
        "db_securityadmin",
    ];
    if principal.is_some_and(|p| !p.trim().eq_ignore_ascii_case("dbo")) {
        return None;
    }
    let role = role.trim().to_ascii_lowercase();
    match role.as_str() {
        "db_owner" | "public" => Some(1),
        r if FIXED.contains(&r) => Some(0),
        _ => None,
    }
}

/// Registers the metadata functions on a session's connection.
pub fn register(conn: &rusqlite::Connection, ctx: FunctionContext) -> rusqlite::Result<()> {
    // Results change with DDL, so none of these may be treated as deterministic.
    let flags = FunctionFlags::SQLITE_UTF8;
    let ctx = Arc::new(ctx);
    register_names(conn, flags, &ctx)?;
    register_properties(conn, flags, &ctx)
}

/// OBJECT_ID, OBJECT_NAME, SCHEMA_NAME and the other functions that turn names into ids and
/// back.
fn register_names(
    conn: &rusqlite::Connection,
    flags: FunctionFlags,
    ctx: &Arc<FunctionContext>,
) -> rusqlite::Result<()> {
    for n_arg in [1, 2] {
        let c = Arc::clone(ctx);
        conn.create_scalar_function("object_id", n_arg, flags, move |f| {
            let Some(name) = arg_text(f, 0) else {
                return Ok(None);
            };
            let wanted = arg_text(f, 1);
            Ok(c.with_catalog(|cat| {
                let o = c.resolve(cat, &name)?;
                match &wanted {
                    Some(ty) if !ty.trim().eq_ignore_ascii_case(o.kind.type_code().trim()) => None,
                    _ => Some(i64::from(o.object_id)),
                }
            }))
        })?;
        let c = Arc::clone(ctx);
        conn.create_scalar_function("object_name", n_arg, flags, move |f| {
            let Some(id) = arg_id(f, 0) else { return Ok(None) };
            Ok(c.with_catalog(|cat| cat.object(id, c.session_id).map(|o| o.name)))
        })?;
        let c = Arc::clone(ctx);
        conn.create_scalar_function("object_schema_name", n_arg, flags, move |f| {
            let Some(id) = arg_id(f, 0) else { return Ok(None) };
            Ok(c.with_catalog(|cat| {
                let o = cat.object(id, c.session_id)?;
                cat.schema_name(o.schema_id).map(str::to_string)
            }))
        })?;
    }

    for n_arg in [0, 1] {
        let c = Arc::clone(ctx);
        conn.create_scalar_function("schema_name", n_arg, flags, move |f| {
            let id = if f.is_empty() {
                Some(i64::from(super::SCHEMA_DBO))
            } else {
                arg_int(f, 0)
            };
            let Some(id) = id.and_then(|v| i32::try_from(v).ok()) else {
                return Ok(None);
            };
            Ok(c.with_catalog(|cat| cat.schema_name(id).map(str::to_string)))
        })?;
        let c = Arc::clone(ctx);
        conn.create_scalar_function("schema_id", n_arg, flags, move |f| {
            if f.is_empty() {
                return Ok(Some(i64::from(super::SCHEMA_DBO)));
            }
            let Some(name) = arg_text(f, 0) else {
                return Ok(None);
            };
            Ok(c.with_catalog(|cat| cat.schema_id(&name).map(i64::from)))
        })?;
        let c = Arc::clone(ctx);
        conn.create_scalar_function("db_name", n_arg, flags, move |f| {
            if f.is_empty() {
                return Ok(Some(c.database.clone()));
            }
            Ok(arg_int(f, 0).and_then(|id| db_name(id, &c.database)))
        })?;
        let c = Arc::clone(ctx);
        conn.create_scalar_function("db_id", n_arg, flags, move |f| {
            if f.is_empty() {
                return Ok(db_id(&c.database, &c.database));
            }
            Ok(arg_text(f, 0).and_then(|name| db_id(&name, &c.database)))
        })?;
    }

    let c = Arc::clone(ctx);
    conn.create_scalar_function("type_name", 1, flags, move |f| {
        let Some(id) = arg_int(f, 0) else { return Ok(None) };
        if let Some(t) = typeinfo::SYS_TYPES.iter().find(|t| t.user_type_id == id) {
            return Ok(Some(t.name.to_string()));
        }
        Ok(c.with_catalog(|cat| {
            cat.alias_types()
                .iter()
                .find(|a| i64::from(a.user_type_id) == id)
                .map(|a| a.name.clone())
        }))
    })?;
    conn.create_scalar_function("type_id", 1, flags, |f| {
        Ok(arg_text(f, 0).and_then(|n| sys_type(&n)).map(|t| t.user_type_id))
    })?;

    let c = Arc::clone(ctx);
    conn.create_scalar_function("col_name", 2, flags, move |f| {
        let (Some(id), Some(column_id)) = (arg_id(f, 0), arg_int(f, 1)) else {
            return Ok(None);
        };
        Ok(c.with_catalog(|cat| {
            let table = cat.table(id)?;
            if table.session.is_some_and(|s| s != c.session_id) {
                return None;
            }
            table
                .columns
                .iter()
                .find(|col| i64::from(col.column_id) == column_id)
                .map(|col| col.name.clone())
        }))
    })?;
    Ok(())
}

/// COLUMNPROPERTY, OBJECTPROPERTY, INDEXPROPERTY, OBJECT_DEFINITION, the IDENT_* functions and
/// SERVERPROPERTY.
fn register_properties(
    conn: &rusqlite::Connection,
    flags: FunctionFlags,
    ctx: &Arc<FunctionContext>,
) -> rusqlite::Result<()> {
    let c = Arc::clone(ctx);
    conn.create_scalar_function("columnproperty", 3, flags, move |f| {
        let (Some(id), Some(column), Some(property)) = (arg_id(f, 0), arg_text(f, 1), arg_text(f, 2)) else {
            return Ok(None);
        };
        Ok(c.with_catalog(|cat| {
            let table = cat.table(id)?;
            if table.session.is_some_and(|s| s != c.session_id) {
                return None;
            }
            column_property(table.column(&column)?, &property)
        }))
    })?;

    let c = Arc::clone(ctx);
    conn.create_scalar_function("objectproperty", 2, flags, move |f| {
        let (Some(id), Some(property)) = (arg_id(f, 0), arg_text(f, 1)) else {
            return Ok(None);
        };
        Ok(c.with_catalog(|cat| {
            let o = cat.object(id, c.session_id)?;
            object_property(cat, &o, &property)
        }))
    })?;
    // OBJECT_DEFINITION(id): a module's text, or a check's or default's normal form.
    let c = Arc::clone(ctx);
    conn.create_scalar_function("object_definition", 1, flags, move |f| {
        let Some(id) = arg_id(f, 0) else { return Ok(None) };
        Ok(c.with_catalog(|cat| {
            if let Some(m) = cat.modules().find(|m| m.object_id == id) {
                return Some(m.definition.clone());
            }
            cat.tables().find_map(|t| {
                t.checks
                    .iter()
                    .find(|k| k.object_id == id)
                    .map(|k| k.definition.clone())
                    .or_else(|| {
                        t.columns
                            .iter()
                            .filter_map(|col| col.default.as_ref())
                            .find(|d| d.object_id == id)
                            .map(|d| d.definition.clone())
                    })
            })
        }))
    })?;

    let c = Arc::clone(ctx);
    conn.create_scalar_function("indexproperty", 3, flags, move |f| {
        let (Some(id), Some(index), Some(property)) = (arg_id(f, 0), arg_text(f, 1), arg_text(f, 2)) else {
            return Ok(None);
        };
        Ok(c.with_catalog(|cat| {
            let table = cat.table(id)?;
            if table.session.is_some_and(|s| s != c.session_id) {
                return None;
            }
            index_property(table, &index, &property)
        }))
    })?;

    type IdentFn = fn(&Catalog, &Table) -> Option<i64>;
    let ident: [(&str, IdentFn); 3] = [
        ("ident_seed", |_, t| t.identity.as_ref().map(|i| i.seed)),
        ("ident_incr", |_, t| t.identity.as_ref().map(|i| i.increment)),
        ("ident_current", |cat, t| cat.identity_current(t.object_id)),
    ];
    for (name, get) in ident {
        let c = Arc::clone(ctx);
        conn.create_scalar_function(name, 1, flags, move |f| {
            let Some(table) = arg_text(f, 0) else {
                return Ok(None);
            };
            Ok(c.with_catalog(|cat| get(cat, c.table_by_name(cat, &table)?)))
        })?;
    }

    // NULL unless change tracking is on for the database and the table.
    let c = Arc::clone(ctx);
    conn.create_scalar_function("change_tracking_min_valid_version", 1, flags, move |f| {
        let Some(id) = arg_id(f, 0) else { return Ok(None) };
        Ok(c.with_catalog(|cat| {
            cat.change_tracking().database?;
            cat.table_tracking(id).map(|t| t.min_valid_version)
        }))
    })?;

    conn.create_scalar_function("serverproperty", 1, flags, |f| {
        Ok(arg_text(f, 0).and_then(|p| server_property(&p)))
    })?;

    for n_arg in [3, 5] {
        let c = Arc::clone(ctx);
        conn.create_scalar_function("has_perms_by_name", n_arg, flags, move |f| {
            let Some(permission) = arg_text(f, 2) else {
                return Ok(None);
            };
            let column = arg_text(f, 3);
            if column.is_some() && !arg_text(f, 4).is_some_and(|k| k.trim().eq_ignore_ascii_case("COLUMN")) {
                return Ok(None);
            }
            Ok(has_perms_by_name(
                &c,
                arg_text(f, 0).as_deref(),
                arg_text(f, 1).as_deref(),
                &permission,
                column.as_deref(),
            ))
        })?;
    }
    for n_arg in [1, 2] {
        conn.create_scalar_function("is_rolemember", n_arg, flags, |f| {
            let Some(role) = arg_text(f, 0) else {
                return Ok(None);
            };
            Ok(is_rolemember(&role, arg_text(f, 1).as_deref()))
        })?;
    }
    Ok(())
}

/// SQL Server's result type of a metadata function (name case-insensitive), for COLMETADATA.
pub fn return_type(name: &str) -> Option<SqlType> {
    const SYSNAME: SqlType = SqlType::NVarChar { len: Some(128) };
    Some(match name.to_ascii_lowercase().as_str() {
        "object_id" | "schema_id" | "type_id" | "db_id" | "columnproperty" | "objectproperty"
        | "indexproperty" | "has_perms_by_name" | "is_rolemember" => SqlType::Int,
        "object_name" | "object_schema_name" | "schema_name" | "type_name" | "db_name" | "col_name" => {
            SYSNAME
        }
        "ident_seed" | "ident_incr" | "ident_current" => SqlType::Numeric {
            precision: 38,
            scale: 0,
        },
        "serverproperty" => SqlType::SqlVariant,
        "change_tracking_min_valid_version" => SqlType::BigInt,
        "object_definition" => SqlType::NVarChar { len: None },
        _ => return None,
    })
}

#[cfg(test)]
#[path = "functions_tests.rs"]
mod tests;
