//! `check`: before a run, connect to both sides and report what a DBA needs to know: the server
//! versions, TLS, collations, and for the Migration's direction and mode the rights the worker's
//! login has and lacks, each missing one with the statement that grants it.
//!
//! The rights are those `docs/dba.md` lists per side, direction and mode ("SQL Server as the
//! source", "PostgreSQL as the target", "PostgreSQL as the source", "SQL Server as the target";
//! online needs from the README's "Online migration"). The two must stay in step: a right added
//! to one belongs in the other.

use crate::mssql::connect::{Encryption, MssqlEndpoint, TdsClient};
use crate::options::Mode;
use crate::pg::connect::PgEndpoint;
use crate::schema::mssql_to_pg_types::{quote_mssql, quote_pg};
use serde::Serialize;
use tiberius::ColumnData;

/// Which end of the migration a database is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Source,
    Target,
}

impl Role {
    fn as_str(self) -> &'static str {
        match self {
            Role::Source => "source",
            Role::Target => "target",
        }
    }
}

/// What the Migration asks of one side.
#[derive(Debug, Clone, Default)]
pub struct Needs {
    pub mode: Mode,
    /// `spec.dryRun`: the target's catalog is read, nothing written.
    pub dry_run: bool,
    /// `online.enabled`: the source's changes are captured (Change Tracking or logical
    /// replication) and applied to the target.
    pub online: bool,
    /// `online.enableChangeTracking`: the worker turns Change Tracking on itself.
    pub enable_change_tracking: bool,
    /// The schemas read from (source) or written to (target).
    pub schemas: Vec<String>,
    /// Tables of this side the run reads (source) or finds already there (target), as (schema,
    /// name): from the dry run, empty when it could not be made.
    pub tables: Vec<(String, String)>,
}

/// One right the run needs.
#[derive(Debug, Clone, Serialize)]
pub struct Right {
    /// The right and what it is on (`CREATE on database sales`).
    pub right: String,
    /// What the worker does with it.
    pub why: String,
    pub present: bool,
    /// False for a right whose absence only loses a detail (a figure in the log).
    pub required: bool,
    /// The statement that grants it, to run as an administrator (missing rights only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

/// What `check` found on one side.
#[derive(Debug, Clone, Serialize)]
pub struct SideReport {
    pub side: Role,
    pub engine: &'static str,
    /// `host:port` (never the password).
    pub address: String,
    pub database: String,
    pub user: String,
    pub reachable: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub collation: Option<String>,
    /// PostgreSQL only: the database's encoding.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub encoding: Option<String>,
    pub rights: Vec<Right>,
}

impl SideReport {
    fn new(side: Role, engine: &'static str, host: &str, port: u16, database: &str, user: &str) -> Self {
        SideReport {
            side,
            engine,
            address: format!("{host}:{port}"),
            database: database.to_string(),
            user: user.to_string(),
            reachable: false,
            error: None,
            version: None,
            tls: None,
            collation: None,
            encoding: None,
            rights: Vec::new(),
        }
    }

    /// Reached, and every required right present.
    pub fn ok(&self) -> bool {
        self.reachable && self.error.is_none() && self.rights.iter().all(|r| r.present || !r.required)
    }

    fn need(&mut self, right: String, why: &str, present: bool, fix: String) {
        self.rights.push(Right {
            right,
            why: why.to_string(),
            present,
            required: true,
            fix: (!present).then_some(fix),
        });
    }
}

/// The whole check: both sides, and what the dry run could not tell.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub event: &'static str,
    pub ok: bool,
    pub direction: &'static str,
    pub mode: Mode,
    pub dry_run: bool,
    pub online: bool,
    pub sides: Vec<SideReport>,
    /// Facts that do not fail the check (why the existing tables could not be listed, tables
    /// the plan refuses).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

impl Report {
    pub fn new(direction: &'static str, needs: &Needs, sides: Vec<SideReport>, notes: Vec<String>) -> Self {
        Report {
            event: "check",
            ok: sides.iter().all(SideReport::ok),
            direction,
            mode: needs.mode,
            dry_run: needs.dry_run,
            online: needs.online,
            sides,
            notes,
        }
    }

    /// The report to read: per side its facts and rights, then the verdict.
    pub fn text(&self) -> String {
        let mode = match self.mode {
            Mode::DropRecreate => "dropRecreate",
            Mode::Truncate => "truncate",
            Mode::Upsert => "upsert",
        };
        let run = match (self.dry_run, self.online) {
            (true, _) => "dryRun".to_string(),
            (false, true) => format!("mode {mode}, online"),
            (false, false) => format!("mode {mode}"),
        };
        let mut text = format!("check {} ({run})\n", self.direction);
        for s in &self.sides {
            text.push_str(&format!(
                "{} {}: {} at {}, database {}, user {}\n",
                s.side.as_str(),
                if s.ok() { "ok" } else { "FAILED" },
                s.engine,
                s.address,
                s.database,
                s.user
            ));
            if let Some(e) = &s.error {
                text.push_str(&format!("  error: {e}\n"));
            }
            let facts = [
                ("version", &s.version),
                ("TLS", &s.tls),
                ("collation", &s.collation),
                ("encoding", &s.encoding),
            ];
            for (name, value) in facts {
                if let Some(v) = value {
                    text.push_str(&format!("  {name:<10} {v}\n"));
                }
            }
            for r in &s.rights {
                let state = match (r.present, r.required) {
                    (true, _) => "ok     ",
                    (false, true) => "MISSING",
                    (false, false) => "absent ",
                };
                text.push_str(&format!("  {state} {} ({})\n", r.right, r.why));
                if let Some(fix) = &r.fix {
                    text.push_str(&format!("          run: {fix}\n"));
                }
            }
        }
        for n in &self.notes {
            text.push_str(&format!("note: {n}\n"));
        }
        let missing: usize = self
            .sides
            .iter()
            .map(|s| s.rights.iter().filter(|r| r.required && !r.present).count())
            .sum();
        let unreachable: Vec<String> = self
            .sides
            .iter()
            .filter(|s| !s.reachable || s.error.is_some())
            .map(|s| format!("{} ({})", s.side.as_str(), s.address))
            .collect();
        if self.ok {
            text.push_str("check passed: both sides reached, every right the run needs is present\n");
        } else {
            let mut why = Vec::new();
            if !unreachable.is_empty() {
                why.push(format!("not checked: {}", unreachable.join(", ")));
            }
            if missing > 0 {
                why.push(format!(
                    "{missing} missing (run the statements above as an administrator)"
                ));
            }
            text.push_str(&format!("check FAILED: {}\n", why.join("; ")));
        }
        text
    }
}

/// The SQL Server side: version, TLS, collation and rights.
pub async fn check_mssql(e: &MssqlEndpoint, role: Role, needs: &Needs) -> SideReport {
    let mut report = SideReport::new(role, "SQL Server", &e.host, e.port, &e.database, &e.user);
    report.tls = Some(
        match e.encryption {
            Encryption::Required => "on: the whole session is encrypted (encryption: Required)",
            Encryption::Off => "the login only, unless the server forces encryption (encryption: \"Off\")",
            Encryption::NotSupported => "off: nothing is encrypted (encryption: NotSupported)",
        }
        .to_string(),
    );
    let mut client = match e.connect().await {
        Ok(c) => c,
        Err(err) => {
            report.error = Some(crate::error_text::error_text(&err));
            return report;
        }
    };
    report.reachable = true;
    if let Err(err) = mssql_rights(&mut client, e, role, needs, &mut report).await {
        report.error = Some(format!(
            "reading the server's settings and rights: {}",
            crate::error_text::error_text(&err)
        ));
    }
    report
}

/// The first row's cells as text (`None` for NULL).
async fn ms_row(c: &mut TdsClient, sql: &str) -> Result<Vec<Option<String>>, tiberius::error::Error> {
    let row = c.simple_query(sql).await?.into_row().await?;
    Ok(row
        .map(|r| {
            r.cells()
                .map(|(_, cell)| match cell {
                    ColumnData::String(s) => s.as_ref().map(|s| s.to_string()),
                    other => crate::mssql::introspect::cell_int(other).map(|v| v.to_string()),
                })
                .collect()
        })
        .unwrap_or_default())
}

/// An N'...' literal.
fn ms_literal(s: &str) -> String {
    format!("N'{}'", s.replace('\'', "''"))
}

/// Whether `HAS_PERMS_BY_NAME(securable, class, permission)` is 1 (NULL, for a securable that
/// does not exist, is not).
async fn ms_has(
    c: &mut TdsClient,
    securable: Option<&str>,
    class: &str,
    permission: &str,
) -> Result<bool, tiberius::error::Error> {
    let securable = securable.map_or_else(|| "NULL".to_string(), ms_literal);
    let row = ms_row(
        c,
        &format!("SELECT HAS_PERMS_BY_NAME({securable}, N'{class}', N'{permission}')"),
    )
    .await?;
    Ok(row.first().cloned().flatten().as_deref() == Some("1"))
}

async fn mssql_rights(
    c: &mut TdsClient,
    e: &MssqlEndpoint,
    role: Role,
    needs: &Needs,
    report: &mut SideReport,
) -> Result<(), tiberius::error::Error> {
    let info = ms_row(
        c,
        "SELECT CAST(SERVERPROPERTY('ProductVersion') AS nvarchar(128)), \
         CAST(SERVERPROPERTY('Edition') AS nvarchar(128)), \
         (SELECT collation_name FROM sys.databases WHERE database_id = DB_ID()), USER_NAME(), DB_NAME()",
    )
    .await?;
    let cell = |i: usize| info.get(i).cloned().flatten().unwrap_or_default();
    report.version = Some(format!("SQL Server {} {}", cell(0), cell(1)).trim().to_string());
    report.collation = Some(cell(2));
    let user = quote_mssql(&cell(3));
    let db = quote_mssql(&cell(4));
    match role {
        // docs/dba.md, "SQL Server as the source (SQL Server → PostgreSQL)".
        Role::Source => {
            for s in &needs.schemas {
                let on = quote_mssql(s);
                let select = ms_has(c, Some(s), "SCHEMA", "SELECT").await?;
                report.need(
                    format!("SELECT on schema {on}"),
                    "reads the tables",
                    select,
                    format!("USE {db}; GRANT SELECT ON SCHEMA::{on} TO {user};"),
                );
                let definition = ms_has(c, Some(s), "SCHEMA", "VIEW DEFINITION").await?;
                report.need(
                    format!("VIEW DEFINITION on schema {on}"),
                    "reads defaults, CHECKs, computed columns and views; without it they are left out",
                    definition,
                    format!("USE {db}; GRANT VIEW DEFINITION ON SCHEMA::{on} TO {user};"),
                );
            }
            let state = ms_has(c, None, "SERVER", "VIEW SERVER STATE").await?;
            report.rights.push(Right {
                right: "VIEW SERVER STATE".into(),
                why: "optional: the negotiated TDS packet size of an encrypted login, for the log".into(),
                present: state,
                required: false,
                fix: (!state).then(|| {
                    format!(
                        "USE [master]; GRANT VIEW SERVER STATE TO {};",
                        quote_mssql(&e.user)
                    )
                }),
            });
            if needs.online {
                mssql_online_source(c, needs, &db, &user, report).await?;
            }
        }
        // docs/dba.md, "SQL Server as the target (PostgreSQL → SQL Server)".
        Role::Target => {
            let definition = ms_has(c, None, "DATABASE", "VIEW DEFINITION").await?;
            report.need(
                format!("VIEW DEFINITION on database {db}"),
                "reads existing tables and what depends on them",
                definition,
                format!("USE {db}; GRANT VIEW DEFINITION TO {user};"),
            );
            if needs.dry_run {
                return Ok(());
            }
            let ddladmin = format!("USE {db}; ALTER ROLE [db_ddladmin] ADD MEMBER {user};");
            for (permission, why) in [
                ("CREATE SCHEMA", "creates _mssqlpg and missing target schemas"),
                ("CREATE TABLE", "creates the target tables and _mssqlpg's"),
                ("CREATE TYPE", "creates alias types for PostgreSQL domains"),
                ("CREATE VIEW", "creates the translated views"),
            ] {
                let present = ms_has(c, None, "DATABASE", permission).await?;
                report.need(
                    format!("{permission} on database {db}"),
                    why,
                    present,
                    ddladmin.clone(),
                );
            }
            let checkident = ms_row(
                c,
                "SELECT CASE WHEN IS_ROLEMEMBER('db_ddladmin') = 1 OR IS_ROLEMEMBER('db_owner') = 1 \
                 THEN 1 ELSE 0 END",
            )
            .await?;
            report.need(
                "membership of db_ddladmin (or db_owner)".into(),
                "DBCC CHECKIDENT sets identity values, which SQL Server allows only to these roles and \
                 the schema's owner",
                checkident.first().cloned().flatten().as_deref() == Some("1"),
                ddladmin.clone(),
            );
            let mut schemas = needs.schemas.clone();
            schemas.push(crate::copy::checkpoint::SCHEMA.to_string());
            for s in &schemas {
                let exists = ms_row(c, &format!("SELECT SCHEMA_ID({})", ms_literal(s))).await?;
                if exists.first().cloned().flatten().is_none() {
                    // Created by the run, with CREATE SCHEMA: the login owns it then.
                    continue;
                }
                let on = quote_mssql(s);
                for (permission, why, fix) in [
                    (
                        "ALTER",
                        "creates, drops and empties tables, loads with TABLOCK",
                        ddladmin.clone(),
                    ),
                    (
                        "INSERT",
                        "bulk loads and MERGE",
                        format!("USE {db}; ALTER ROLE [db_datawriter] ADD MEMBER {user};"),
                    ),
                    (
                        "UPDATE",
                        "MERGE's updates",
                        format!("USE {db}; ALTER ROLE [db_datawriter] ADD MEMBER {user};"),
                    ),
                    (
                        "DELETE",
                        "checkpoints and staging",
                        format!("USE {db}; ALTER ROLE [db_datawriter] ADD MEMBER {user};"),
                    ),
                    (
                        "SELECT",
                        "verification and MERGE's reads",
                        format!("USE {db}; ALTER ROLE [db_datareader] ADD MEMBER {user};"),
                    ),
                ] {
                    let present = ms_has(c, Some(s), "SCHEMA", permission).await?;
                    report.need(format!("{permission} on schema {on}"), why, present, fix);
                }
            }
            for (s, t) in &needs.tables {
                let table = format!("{}.{}", quote_mssql(s), quote_mssql(t));
                let present = ms_has(c, Some(&table), "OBJECT", "ALTER").await?;
                report.need(
                    format!("ALTER on existing table {table}"),
                    match needs.mode {
                        Mode::DropRecreate => "drops and recreates it",
                        Mode::Truncate => "empties it, then adds keys and constraints",
                        Mode::Upsert => "adds keys and constraints, merges rows",
                    },
                    present,
                    format!("USE {db}; GRANT ALTER ON {table} TO {user};"),
                );
            }
        }
    }
    Ok(())
}

/// Change Tracking on a SQL Server source (README, "Online migration": SQL Server → PostgreSQL).
async fn mssql_online_source(
    c: &mut TdsClient,
    needs: &Needs,
    db: &str,
    user: &str,
    report: &mut SideReport,
) -> Result<(), tiberius::error::Error> {
    for s in &needs.schemas {
        let on = quote_mssql(s);
        let present = ms_has(c, Some(s), "SCHEMA", "VIEW CHANGE TRACKING").await?;
        report.need(
            format!("VIEW CHANGE TRACKING on schema {on}"),
            "reads the changes with CHANGETABLE",
            present,
            format!("USE {db}; GRANT VIEW CHANGE TRACKING ON SCHEMA::{on} TO {user};"),
        );
    }
    let setup = match crate::online::capture_mssql::missing_setup(c, &[]).await {
        Ok(steps) => steps,
        Err(e) => {
            report.error = Some(format!(
                "reading the database's Change Tracking settings: {}",
                crate::error_text::error_text(&e)
            ));
            return Ok(());
        }
    };
    let mut untracked = Vec::new();
    for (s, t) in &needs.tables {
        let table = format!("{}.{}", quote_mssql(s), quote_mssql(t));
        let found = ms_row(
            c,
            &format!(
                "SELECT COUNT(*) FROM sys.change_tracking_tables WHERE object_id = OBJECT_ID({})",
                ms_literal(&table)
            ),
        )
        .await?;
        if found.first().cloned().flatten().as_deref() == Some("0") {
            untracked.push(format!("ALTER TABLE {table} ENABLE CHANGE_TRACKING"));
        }
    }
    let statements: Vec<String> = setup.into_iter().map(|s| s.sql).chain(untracked).collect();
    if needs.enable_change_tracking {
        // The worker runs the statements itself: it needs the rights they take.
        if !statements.is_empty() {
            let alter = ms_has(c, None, "DATABASE", "ALTER").await?;
            report.need(
                format!("ALTER on database {db}"),
                "online.enableChangeTracking: turns Change Tracking on for the database and tables",
                alter,
                format!("USE {db}; GRANT ALTER TO {user};"),
            );
            let create = ms_has(c, None, "DATABASE", "CREATE TABLE").await?;
            report.need(
                format!("CREATE TABLE on database {db}"),
                "online.enableChangeTracking: creates _mssqlpg.heartbeat",
                create,
                format!("USE {db}; GRANT CREATE TABLE TO {user};"),
            );
        }
    } else {
        for sql in statements {
            report.need(
                change_tracking_step(&sql),
                "the online copy streams tracked changes (or set online.enableChangeTracking)",
                false,
                format!("USE {db}; {sql};"),
            );
        }
    }
    let heartbeat = crate::online::capture_mssql::heartbeat_table();
    let exists = ms_row(c, &format!("SELECT OBJECT_ID({})", ms_literal(&heartbeat))).await?;
    if exists.first().cloned().flatten().is_some() {
        for permission in ["INSERT", "UPDATE"] {
            let present = ms_has(c, Some(&heartbeat), "OBJECT", permission).await?;
            report.need(
                format!("{permission} on {heartbeat}"),
                "the capture's heartbeat row",
                present,
                format!("USE {db}; GRANT INSERT, UPDATE ON {heartbeat} TO {user};"),
            );
        }
    }
    Ok(())
}

/// What a Change Tracking statement sets up, to name it in the report.
fn change_tracking_step(sql: &str) -> String {
    if let Some(table) = sql
        .strip_prefix("ALTER TABLE ")
        .and_then(|rest| rest.strip_suffix(" ENABLE CHANGE_TRACKING"))
    {
        format!("Change Tracking on table {table}")
    } else if sql.contains("ALLOW_SNAPSHOT_ISOLATION") {
        "snapshot isolation allowed in the database".to_string()
    } else if sql.contains("SET CHANGE_TRACKING") {
        "Change Tracking on the database".to_string()
    } else if sql.starts_with("CREATE SCHEMA") {
        format!("schema [{}]", crate::copy::checkpoint::SCHEMA)
    } else {
        format!(
            "the heartbeat table {}",
            crate::online::capture_mssql::heartbeat_table()
        )
    }
}

/// The PostgreSQL side: version, TLS, encoding, collation and rights.
pub async fn check_pg(e: &PgEndpoint, role: Role, needs: &Needs) -> SideReport {
    let mut report = SideReport::new(role, "PostgreSQL", &e.host, e.port, &e.database, &e.user);
    let client = match e.connect().await {
        Ok(c) => c,
        Err(err) => {
            report.error = Some(crate::error_text::error_text(&err));
            return report;
        }
    };
    report.reachable = true;
    if let Err(err) = pg_rights(&client, role, needs, &mut report).await {
        report.error = Some(format!(
            "reading the server's settings and rights: {}",
            crate::error_text::error_text(&err)
        ));
    }
    report
}

async fn pg_rights(
    c: &tokio_postgres::Client,
    role: Role,
    needs: &Needs,
    report: &mut SideReport,
) -> Result<(), tokio_postgres::Error> {
    let row = c
        .query_one(
            "SELECT current_setting('server_version'), pg_encoding_to_char(d.encoding)::text, \
             d.datcollate::text, d.datctype::text, current_user::text, current_database()::text, \
             coalesce((SELECT s.ssl FROM pg_stat_ssl s WHERE s.pid = pg_backend_pid()), false), \
             (SELECT s.version FROM pg_stat_ssl s WHERE s.pid = pg_backend_pid()), \
             has_database_privilege(current_database(), 'CONNECT'), \
             has_database_privilege(current_database(), 'TEMPORARY'), \
             has_database_privilege(current_database(), 'CREATE') \
             FROM pg_database d WHERE d.datname = current_database()",
            &[],
        )
        .await?;
    let version: String = row.get(0);
    let encoding: String = row.get(1);
    let (collate, ctype): (String, String) = (row.get(2), row.get(3));
    let (user, database): (String, String) = (row.get(4), row.get(5));
    let (ssl, tls_version): (bool, Option<String>) = (row.get(6), row.get(7));
    let (connect, temporary, create): (bool, bool, bool) = (row.get(8), row.get(9), row.get(10));
    report.version = Some(format!("PostgreSQL {version}"));
    report.encoding = Some(encoding);
    report.collation = Some(if collate == ctype {
        collate
    } else {
        format!("{collate} (ctype {ctype})")
    });
    report.tls = Some(if ssl {
        format!("on ({})", tls_version.unwrap_or_default())
    } else {
        "off: the connection is not encrypted".to_string()
    });
    let (role_q, db_q) = (quote_pg(&user), quote_pg(&database));
    report.need(
        format!("CONNECT on database {db_q}"),
        "connects",
        connect,
        format!("GRANT CONNECT ON DATABASE {db_q} TO {role_q};"),
    );
    match role {
        // docs/dba.md, "PostgreSQL as the source (PostgreSQL → SQL Server)".
        Role::Source => {
            for s in &needs.schemas {
                pg_source_schema(c, s, &role_q, report).await?;
            }
            if needs.online {
                pg_online_source(c, needs, create, &db_q, &role_q, report).await?;
            }
        }
        // docs/dba.md, "PostgreSQL as the target (SQL Server → PostgreSQL)".
        Role::Target => {
            let grant = if needs.dry_run {
                format!("GRANT CONNECT, TEMPORARY ON DATABASE {db_q} TO {role_q};")
            } else {
                format!("GRANT CONNECT, TEMPORARY, CREATE ON DATABASE {db_q} TO {role_q};")
            };
            report.need(
                format!("TEMPORARY on database {db_q}"),
                "upsert's and the stream's staging tables",
                temporary,
                grant.clone(),
            );
            if needs.dry_run {
                // The dry run reads an existing table's catalog rows by name, which PostgreSQL
                // resolves only with USAGE on its schema.
                for s in &needs.schemas {
                    let usage = c
                        .query_opt(
                            "SELECT has_schema_privilege(oid, 'USAGE') FROM pg_namespace WHERE nspname = $1",
                            &[s],
                        )
                        .await?;
                    if let Some(usage) = usage {
                        let schema = quote_pg(s);
                        report.need(
                            format!("USAGE on schema {schema}"),
                            "reads its existing tables",
                            usage.get(0),
                            format!("GRANT USAGE ON SCHEMA {schema} TO {role_q};"),
                        );
                    }
                }
                return Ok(());
            }
            report.need(
                format!("CREATE on database {db_q}"),
                "CREATE SCHEMA IF NOT EXISTS for _mssqlpg and the target schemas",
                create,
                grant,
            );
            let mut schemas = needs.schemas.clone();
            schemas.push(crate::copy::checkpoint::SCHEMA.to_string());
            for s in &schemas {
                let row = c
                    .query_opt(
                        "SELECT has_schema_privilege(oid, 'USAGE'), has_schema_privilege(oid, 'CREATE') \
                         FROM pg_namespace WHERE nspname = $1",
                        &[s],
                    )
                    .await?;
                // A schema that does not exist is created by the run, and owned by the role.
                let Some(row) = row else { continue };
                let (usage, create): (bool, bool) = (row.get(0), row.get(1));
                let schema = quote_pg(s);
                report.need(
                    format!("USAGE and CREATE on schema {schema}"),
                    "creates tables in it",
                    usage && create,
                    format!("GRANT USAGE, CREATE ON SCHEMA {schema} TO {role_q};"),
                );
            }
            for (s, t) in &needs.tables {
                let row = c
                    .query_opt(
                        "SELECT pg_get_userbyid(c.relowner)::text, pg_has_role(c.relowner, 'USAGE') \
                         FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
                         WHERE n.nspname = $1 AND c.relname = $2",
                        &[s, t],
                    )
                    .await?;
                let Some(row) = row else { continue };
                let (owner, owns): (String, bool) = (row.get(0), row.get(1));
                let table = format!("{}.{}", quote_pg(s), quote_pg(t));
                report.need(
                    format!("ownership of existing table {table} (owner {owner})"),
                    match needs.mode {
                        Mode::DropRecreate => "DROP TABLE is for its owner only",
                        Mode::Truncate => "TRUNCATE, then keys and constraints: its owner's rights",
                        Mode::Upsert => "a missing primary key, indexes and constraints: its owner's rights",
                    },
                    owns,
                    format!("GRANT {} TO {role_q};", quote_pg(&owner)),
                );
            }
        }
    }
    Ok(())
}

/// Whether the run copies table `t` of schema `s`: every table of the schema when the dry run
/// could not say which.
fn migrated(needs: &Needs, s: &str, t: &str) -> bool {
    needs.tables.is_empty() || needs.tables.iter().any(|(a, b)| a == s && b == t)
}

/// USAGE on a source schema and SELECT on its tables and sequences.
async fn pg_source_schema(
    c: &tokio_postgres::Client,
    s: &str,
    role_q: &str,
    report: &mut SideReport,
) -> Result<(), tokio_postgres::Error> {
    let schema = quote_pg(s);
    let usage = c
        .query_opt(
            "SELECT has_schema_privilege(oid, 'USAGE') FROM pg_namespace WHERE nspname = $1",
            &[&s],
        )
        .await?;
    let Some(usage) = usage else {
        report.need(
            format!("schema {schema}"),
            "the source schema the Migration names",
            false,
            format!("-- no schema {schema} in this database: check spec.source.postgres.schema"),
        );
        return Ok(());
    };
    report.need(
        format!("USAGE on schema {schema}"),
        "reads its tables",
        usage.get(0),
        format!("GRANT USAGE ON SCHEMA {schema} TO {role_q};"),
    );
    for (kinds, privilege, what, why) in [
        (
            "'r', 'p'",
            "has_table_privilege",
            "TABLES",
            "COPY ... TO STDOUT reads the rows",
        ),
        (
            "'S'",
            "has_sequence_privilege",
            "SEQUENCES",
            "identity values continue past the sequences' last values",
        ),
    ] {
        let rows = c
            .query(
                &format!(
                    // The CASE keeps the privilege function to relations of its kind: the
                    // conditions of a WHERE may be tested in any order.
                    "SELECT c.relname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
                     WHERE n.nspname = $1 \
                     AND CASE WHEN c.relkind IN ({kinds}) THEN NOT {privilege}(c.oid, 'SELECT') ELSE false END \
                     ORDER BY 1"
                ),
                &[&s],
            )
            .await?;
        // Every table of the schema, excluded ones too: introspection reads each one's row
        // count before the Migration's filters apply.
        let lacking: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
        let kind = what.to_ascii_lowercase();
        report.need(
            if lacking.is_empty() {
                format!("SELECT on the {kind} of schema {schema}")
            } else {
                format!(
                    "SELECT on the {kind} of schema {schema} ({} without: {})",
                    lacking.len(),
                    sample(&lacking)
                )
            },
            why,
            lacking.is_empty(),
            format!("GRANT SELECT ON ALL {what} IN SCHEMA {schema} TO {role_q};"),
        );
    }
    Ok(())
}

/// Logical replication on a PostgreSQL source (README, "Online migration": PostgreSQL → SQL
/// Server): wal_level, a free slot, the REPLICATION attribute, CREATE for the publication, and
/// ownership of the published tables.
async fn pg_online_source(
    c: &tokio_postgres::Client,
    needs: &Needs,
    create: bool,
    db_q: &str,
    role_q: &str,
    report: &mut SideReport,
) -> Result<(), tokio_postgres::Error> {
    let row = c
        .query_one(
            "SELECT current_setting('wal_level'), current_setting('max_replication_slots')::int, \
             (SELECT count(*)::int FROM pg_replication_slots), \
             (SELECT rolreplication OR rolsuper FROM pg_roles WHERE rolname = current_user), \
             current_setting('max_wal_senders')::int, \
             (SELECT count(*)::int FROM pg_stat_activity WHERE backend_type = 'walsender')",
            &[],
        )
        .await?;
    let (wal_level, max_slots, used, replication): (String, i32, i32, Option<bool>) =
        (row.get(0), row.get(1), row.get(2), row.get(3));
    let (max_senders, senders): (i32, i32) = (row.get(4), row.get(5));
    report.need(
        format!("wal_level = logical (is {wal_level})"),
        "the changes are read from a logical replication slot",
        wal_level == "logical",
        "ALTER SYSTEM SET wal_level = logical; -- then restart PostgreSQL".into(),
    );
    report.need(
        format!("a free replication slot ({used} of max_replication_slots {max_slots} used)"),
        "the stream's slot",
        used < max_slots,
        format!(
            "ALTER SYSTEM SET max_replication_slots = {}; -- then restart PostgreSQL",
            max_slots.max(used) + 1
        ),
    );
    report.need(
        format!("a free walsender ({senders} of max_wal_senders {max_senders} used)"),
        "the stream reads the slot over a replication connection",
        senders < max_senders,
        format!(
            "ALTER SYSTEM SET max_wal_senders = {}; -- then restart PostgreSQL",
            max_senders.max(senders) + 1
        ),
    );
    report.need(
        "the REPLICATION attribute".into(),
        "creates the replication slot and opens the replication connection that reads it",
        replication.unwrap_or(false),
        format!("ALTER ROLE {role_q} REPLICATION;"),
    );
    report.need(
        format!("CREATE on database {db_q}"),
        "CREATE PUBLICATION",
        create,
        format!("GRANT CREATE ON DATABASE {db_q} TO {role_q};"),
    );
    let mut owners: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for s in &needs.schemas {
        let rows = c
            .query(
                "SELECT c.relname::text, pg_get_userbyid(c.relowner)::text FROM pg_class c \
                 JOIN pg_namespace n ON n.oid = c.relnamespace \
                 WHERE n.nspname = $1 AND c.relkind IN ('r', 'p') AND NOT pg_has_role(c.relowner, 'USAGE') \
                 ORDER BY 1",
                &[s],
            )
            .await?;
        for r in rows {
            let (t, owner): (String, String) = (r.get(0), r.get(1));
            if !migrated(needs, s, &t) {
                continue;
            }
            owners
                .entry(owner)
                .or_default()
                .push(format!("{}.{}", quote_pg(s), quote_pg(&t)));
        }
    }
    if owners.is_empty() {
        report.need(
            "ownership of the published tables".into(),
            "CREATE PUBLICATION ... FOR TABLE is for their owner",
            true,
            String::new(),
        );
    }
    for (owner, tables) in owners {
        report.need(
            format!(
                "ownership of {} table{} owned by {owner} ({})",
                tables.len(),
                if tables.len() == 1 { "" } else { "s" },
                sample(&tables)
            ),
            "CREATE PUBLICATION ... FOR TABLE is for their owner",
            false,
            format!("GRANT {} TO {role_q};", quote_pg(&owner)),
        );
    }
    Ok(())
}

/// The first few names of a list, and how many more.
fn sample(names: &[String]) -> String {
    const SHOWN: usize = 5;
    let mut text = names.iter().take(SHOWN).cloned().collect::<Vec<_>>().join(", ");
    if names.len() > SHOWN {
        text.push_str(&format!(" and {} more", names.len() - SHOWN));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn side(rights: Vec<Right>, reachable: bool) -> SideReport {
        SideReport {
            reachable,
            error: (!reachable).then(|| "connecting to PostgreSQL at db:5432: refused".to_string()),
            rights,
            ..SideReport::new(Role::Target, "PostgreSQL", "db", 5432, "sales", "migrator")
        }
    }

    fn right(present: bool, required: bool) -> Right {
        Right {
            right: "CREATE on database \"sales\"".into(),
            why: "creates schemas".into(),
            present,
            required,
            fix: (!present).then(|| "GRANT CREATE ON DATABASE \"sales\" TO \"migrator\";".to_string()),
        }
    }

    #[test]
    fn a_missing_required_right_fails_with_its_grant_an_optional_one_does_not() {
        let needs = Needs::default();
        let failed = Report::new(
            "mssql-to-postgres",
            &needs,
            vec![side(vec![right(false, true)], true)],
            vec![],
        );
        assert!(!failed.ok);
        let text = failed.text();
        assert!(text.contains("MISSING CREATE on database \"sales\""), "{text}");
        assert!(
            text.contains("run: GRANT CREATE ON DATABASE \"sales\" TO \"migrator\";"),
            "{text}"
        );
        assert!(
            text.ends_with("check FAILED: 1 missing (run the statements above as an administrator)\n"),
            "{text}"
        );

        let optional = Report::new(
            "mssql-to-postgres",
            &needs,
            vec![side(vec![right(false, false)], true)],
            vec![],
        );
        assert!(optional.ok, "{}", optional.text());
    }

    #[test]
    fn an_unreachable_side_is_named_with_its_address() {
        let report = Report::new(
            "mssql-to-postgres",
            &Needs::default(),
            vec![side(vec![], false)],
            vec![],
        );
        assert!(!report.ok);
        assert!(
            report
                .text()
                .contains("check FAILED: not checked: target (db:5432)"),
            "{}",
            report.text()
        );
    }
}
