//! What the parser hands the executor: a batch of statements, each either sqlparser's AST
//! or one of the T-SQL forms parsed here.

use crate::error::SqlError;
use sqlparser::ast::Statement;
use std::collections::HashMap;

#[derive(Debug)]
pub enum Stmt {
    Sql(Box<Statement>),
    InsertBulk(BulkTarget),
    BeginTran,
    CommitTran,
    RollbackTran(Option<String>),
    SaveTran(String),
    CheckIdent {
        table: String,
        reseed: Option<Option<i64>>,
    },
    /// `RAISERROR (msg, severity, state [, args])` or `THROW number, message, state`: the
    /// arguments as written (constants or variables), evaluated when the statement runs.
    /// A bare `THROW` (rethrow) has no arguments.
    Raise {
        throw: bool,
        args: Vec<sqlparser::ast::Expr>,
    },
    Unsupported(String),
    /// CREATE [OR ALTER] VIEW/PROCEDURE/FUNCTION/TRIGGER: stored with its definition.
    CreateModule {
        schema: String,
        name: String,
        module: crate::catalog::NewModule,
    },
    /// `CREATE TYPE s.n FROM base [NOT] NULL`.
    AliasType {
        schema: String,
        name: String,
        base: String,
        nullable: Option<bool>,
    },
    XmlCollection {
        schema: String,
        name: String,
        content: String,
        add: bool,
    },
    BulkInsert(BulkInsertSpec),
    Database {
        action: DbAction,
        name: String,
    },
    /// `ALTER DATABASE name SET CHANGE_TRACKING ...` / `SET ALLOW_SNAPSHOT_ISOLATION ...`.
    DatabaseSet {
        name: String,
        option: DbSetOption,
    },
    /// `ALTER TABLE t {ENABLE | DISABLE} CHANGE_TRACKING [WITH (TRACK_COLUMNS_UPDATED = ...)]`.
    TableTracking {
        table: Vec<String>,
        enable: bool,
        track_columns: bool,
    },
    /// `{ENABLE | DISABLE} TRIGGER {ALL | names} ON {table | DATABASE}` and
    /// `ALTER TABLE t {ENABLE | DISABLE} TRIGGER {ALL | names}`.
    EnableTrigger {
        /// Each trigger's name parts; `None`: ALL.
        triggers: Option<Vec<Vec<String>>>,
        /// The table's name parts; `None`: ON DATABASE.
        table: Option<Vec<String>>,
        disable: bool,
        /// Written as ALTER TABLE (which names its errors differently).
        alter_table: bool,
    },
    /// A statement SQL Server would refuse here, with its error (full-text without the
    /// full-text service).
    Refused(SqlError),
    /// `CREATE [PRIMARY] XML INDEX ... ON table`: XML indexes only speed up SQL Server's xml
    /// queries, so there is nothing to build; the table must exist.
    XmlIndex(Vec<String>),
    /// `DROP {PROCEDURE | FUNCTION | TRIGGER | TYPE | SCHEMA} [IF EXISTS] name, ...`
    /// (`kind` upper-case; a trigger may be `ON DATABASE`).
    DropObject {
        kind: String,
        if_exists: bool,
        names: Vec<Vec<String>>,
        on_database: bool,
    },
    /// `EXEC sp_addextendedproperty`/`sp_addtype` with named arguments (`@name = value`),
    /// which sqlparser does not take: the arguments in order, with their names.
    SystemProc {
        name: String,
        args: Vec<(Option<String>, sqlparser::ast::Expr)>,
    },
    /// `UPDATE STATISTICS table [...]`: the table must exist; there are no statistics here.
    UpdateStatistics(Vec<String>),
    /// `SET ROWCOUNT n`: 0 lifts the limit.
    SetRowcount(sqlparser::ast::Expr),
    /// `IF cond ... [ELSE ...]`: each branch a list of statements (one, or a BEGIN...END block).
    If {
        cond: Box<sqlparser::ast::Expr>,
        then: Vec<Parsed>,
        otherwise: Vec<Parsed>,
    },
    /// `ALTER TABLE t [WITH CHECK | WITH NOCHECK] {CHECK | NOCHECK} CONSTRAINT {ALL | names}`.
    ConstraintState {
        table: Vec<String>,
        enable: bool,
        /// WITH CHECK: re-check the rows (the constraints become trusted).
        validate: bool,
        /// `None`: ALL.
        names: Option<Vec<String>>,
    },
}

#[derive(Debug)]
pub struct Parsed {
    pub stmt: Stmt,
    pub line: u32,
}

#[derive(Debug, Default)]
pub struct Batch {
    pub stmts: Vec<Parsed>,
    /// `DELETE TOP (n)` / `UPDATE TOP (n)`: the TOP expression's text by the statement
    /// keyword's location (line, column).
    pub tops: HashMap<(u64, u64), String>,
    /// Columns declared ROWGUIDCOL, by the location (line, column) of their name.
    pub rowguidcols: std::collections::HashSet<(u64, u64)>,
    /// `ALTER TABLE t WITH NOCHECK ADD ...`, by the location of the table name's last part.
    pub nocheck: std::collections::HashSet<(u64, u64)>,
}

#[derive(Debug, Clone)]
pub struct BulkColumn {
    /// Only the name matters: the BULK_LOAD COLMETADATA decides value types.
    pub name: String,
}

/// The parsed `INSERT BULK` statement.
#[derive(Debug, Clone)]
pub struct BulkTarget {
    pub name: Vec<String>,
    pub columns: Vec<BulkColumn>,
    /// Upper-case option words (KEEP_NULLS, CHECK_CONSTRAINTS, TABLOCK, ...).
    pub options: Vec<String>,
}

/// `BULK INSERT table FROM 'file' WITH (...)`.
#[derive(Debug, Clone)]
pub struct BulkInsertSpec {
    pub table: Vec<String>,
    pub file: String,
    /// Upper-case option names with their values as written (strings unquoted).
    pub options: Vec<(String, Option<String>)>,
}

/// An `ALTER DATABASE ... SET` option the test server acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DbSetOption {
    /// `CHANGE_TRACKING = ON [(...)]` (`on: Some(true)`), `= OFF`, or `(...)` alone (`None`:
    /// change the settings of tracking that is on).
    ChangeTracking {
        on: Option<bool>,
        retention: Option<(i64, crate::catalog::RetentionUnit)>,
        auto_cleanup: Option<bool>,
    },
    AllowSnapshotIsolation(bool),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DbAction {
    Create,
    Drop,
    Alter,
}
