//! Database endpoints: where a Migration reads from and writes to.
//!
//! An [`Endpoint`] is a struct with two optional members rather than a Rust enum with data, because
//! Kubernetes requires structural schemas and a data-carrying enum does not produce one. CEL rules make
//! "exactly one of" hold at admission; [`Endpoint::engine`] gives Rust code the enum view.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One side of a migration. Exactly one of `mssql` or `postgres` must be set.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "has(self.mssql) != has(self.postgres)",
        "message": "exactly one of mssql or postgres must be set"
    }
]))]
pub struct Endpoint {
    /// A Microsoft SQL Server database (SQL Server 2017 or later, Azure SQL).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mssql: Option<MssqlEndpoint>,
    /// A PostgreSQL database (12 or later).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub postgres: Option<PostgresEndpoint>,
}

/// Which database engine an endpoint speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Engine {
    Mssql,
    Postgres,
}

impl Engine {
    pub fn as_str(self) -> &'static str {
        match self {
            Engine::Mssql => "mssql",
            Engine::Postgres => "postgres",
        }
    }
}

impl std::fmt::Display for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Borrowed enum view of an [`Endpoint`] that has exactly one engine set.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum EndpointRef<'a> {
    Mssql(&'a MssqlEndpoint),
    Postgres(&'a PostgresEndpoint),
}

impl EndpointRef<'_> {
    pub fn engine(&self) -> Engine {
        match self {
            EndpointRef::Mssql(_) => Engine::Mssql,
            EndpointRef::Postgres(_) => Engine::Postgres,
        }
    }

    pub fn host(&self) -> &str {
        match self {
            EndpointRef::Mssql(m) => &m.host,
            EndpointRef::Postgres(p) => &p.host,
        }
    }

    pub fn port(&self) -> i32 {
        match self {
            EndpointRef::Mssql(m) => m.port,
            EndpointRef::Postgres(p) => p.port,
        }
    }

    pub fn database(&self) -> &str {
        match self {
            EndpointRef::Mssql(m) => &m.database,
            EndpointRef::Postgres(p) => &p.database,
        }
    }

    /// The schema tables are read from (source) or created in (target).
    pub fn schema(&self) -> &str {
        match self {
            EndpointRef::Mssql(m) => &m.schema,
            EndpointRef::Postgres(p) => &p.schema,
        }
    }

    /// Target only: source schema -> target schema, besides `schema`.
    pub fn schema_map(&self) -> &[SchemaMapping] {
        match self {
            EndpointRef::Mssql(m) => &m.schema_map,
            EndpointRef::Postgres(p) => &p.schema_map,
        }
    }

    /// Name of the Secret (same namespace) holding keys `username` and `password`.
    pub fn credentials_secret(&self) -> &str {
        match self {
            EndpointRef::Mssql(m) => &m.credentials_secret,
            EndpointRef::Postgres(p) => &p.credentials_secret,
        }
    }
}

impl Endpoint {
    pub fn mssql(endpoint: MssqlEndpoint) -> Self {
        Self {
            mssql: Some(endpoint),
            postgres: None,
        }
    }

    pub fn postgres(endpoint: PostgresEndpoint) -> Self {
        Self {
            mssql: None,
            postgres: Some(endpoint),
        }
    }

    /// The configured engine, or `None` unless exactly one of `mssql`/`postgres` is set.
    pub fn get(&self) -> Option<EndpointRef<'_>> {
        match (&self.mssql, &self.postgres) {
            (Some(m), None) => Some(EndpointRef::Mssql(m)),
            (None, Some(p)) => Some(EndpointRef::Postgres(p)),
            _ => None,
        }
    }

    pub fn engine(&self) -> Option<Engine> {
        self.get().map(|e| e.engine())
    }
}

/// Connection settings for SQL Server.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MssqlEndpoint {
    /// Host name or IP address of the server.
    #[schemars(length(min = 1, max = 253))]
    pub host: String,
    /// TCP port of the server.
    #[serde(default = "default_mssql_port")]
    #[schemars(range(min = 1, max = 65535))]
    pub port: i32,
    /// Database name.
    #[schemars(length(min = 1, max = 128))]
    pub database: String,
    /// Schema the tables are read from (source) or created in (target).
    #[serde(default = "default_mssql_schema")]
    #[schemars(length(min = 1, max = 128))]
    pub schema: String,
    /// Source only: several schemas, as globs (`["*"]` for every schema holding user tables). The
    /// default is `[schema]`. Tables of `schema` go to the target's `schema`, others to the target
    /// schema the target's `schemaMap` names, or else to one of the same name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 256))]
    pub schemas: Vec<String>,
    /// Target only: where the tables (and views, alias types) of other source schemas go, one
    /// entry per source schema; a schema not listed keeps its name. The source's `schema` is not
    /// listed: it goes to this endpoint's `schema`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 256))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["from"]))]
    pub schema_map: Vec<SchemaMapping>,
    /// Name of a Secret in the Migration's namespace with keys `username` and `password`.
    #[schemars(length(min = 1, max = 253))]
    pub credentials_secret: String,
    /// TLS for the TDS connection. Quote "On" and "Off" in YAML: kubectl reads them unquoted as booleans.
    #[serde(default)]
    pub encryption: MssqlEncryption,
    /// Accept the server certificate without validating it (for self-signed test servers only).
    #[serde(default)]
    pub trust_server_certificate: bool,
    /// Name of a Secret with key `ca.crt`: the CA bundle (PEM) that signed the server certificate,
    /// trusted in addition to the system's roots. Not together with `trustServerCertificate`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub ca_secret: Option<String>,
    /// TDS packet size to request; the server may negotiate a smaller one.
    #[serde(default = "default_packet_size")]
    #[schemars(range(min = 512, max = 32767))]
    pub packet_size: i32,
    /// Target only: allow dropping or emptying an existing table that foreign keys of tables
    /// outside the migration reference; those foreign keys are dropped and recreated after the load.
    #[serde(default)]
    pub drop_dependents: bool,
}

/// One entry of a target's `schemaMap`: the source schema `from` goes to the target schema `to`.
/// Several entries may share a `to` (schemas merged) when their tables' names do not collide there,
/// which the plan checks before anything is written.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "self.to.lowerAscii() != '_mssqlpg'",
        "message": "_mssqlpg is the worker's own schema (checkpoints); map to another schema"
    }
]))]
pub struct SchemaMapping {
    /// A source schema, by its exact name (SQL Server compares it case-insensitively, as its
    /// catalog does).
    #[schemars(length(min = 1, max = 128))]
    pub from: String,
    /// The target schema, written exactly as given (`identifierCase` does not fold it); created
    /// when missing.
    #[schemars(length(min = 1, max = 128))]
    pub to: String,
}

impl SchemaMapping {
    pub fn new(from: &str, to: &str) -> Self {
        Self {
            from: from.to_string(),
            to: to.to_string(),
        }
    }
}

/// TDS encryption level, as SQL Server clients name it.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum MssqlEncryption {
    /// TLS for the whole session; fail if the server cannot do it.
    #[default]
    Required,
    /// The same as `Required`: in TDS, a client sending ON requires encryption.
    On,
    /// TLS for the login packet only where the server can encrypt (for the whole session where
    /// it forces encryption); none at all where it cannot, which the worker's log warns about.
    Off,
    /// No TLS at all; a server that forces encryption refuses the connection.
    NotSupported,
}

/// Connection settings for PostgreSQL.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PostgresEndpoint {
    /// Host name or IP address of the server.
    #[schemars(length(min = 1, max = 253))]
    pub host: String,
    /// TCP port of the server.
    #[serde(default = "default_pg_port")]
    #[schemars(range(min = 1, max = 65535))]
    pub port: i32,
    /// Database name.
    #[schemars(length(min = 1, max = 63))]
    pub database: String,
    /// Schema the tables are read from (source) or created in (target).
    #[serde(default = "default_pg_schema")]
    #[schemars(length(min = 1, max = 63))]
    pub schema: String,
    /// Source only: several schemas, as globs (`["*"]` for every schema holding user tables). The
    /// default is `[schema]`. Tables of `schema` go to the target's `schema`, others to the target
    /// schema the target's `schemaMap` names, or else to one of the same name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 256))]
    pub schemas: Vec<String>,
    /// Target only: where the tables (and views, alias types) of other source schemas go, one
    /// entry per source schema; a schema not listed keeps its name. The source's `schema` is not
    /// listed: it goes to this endpoint's `schema`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 256))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["from"]))]
    pub schema_map: Vec<SchemaMapping>,
    /// Name of a Secret in the Migration's namespace with keys `username` and `password`.
    #[schemars(length(min = 1, max = 253))]
    pub credentials_secret: String,
    /// libpq-style TLS mode.
    #[serde(default)]
    pub ssl_mode: PostgresSslMode,
    /// Name of a Secret with key `ca.crt`: the CA that signed the server certificate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub ca_secret: Option<String>,
    /// Create the target tables UNLOGGED for the load and switch them to LOGGED before the
    /// migration succeeds; PostgreSQL target only, faster, but a crash of PostgreSQL during the
    /// load loses the loaded rows.
    #[serde(default)]
    pub unlogged: bool,
    /// Target only: allow dropping or emptying an existing table that views or foreign keys of
    /// tables outside the migration depend on. Views are dropped (their definitions are listed in
    /// the plan warnings), foreign keys are dropped and recreated after the load.
    #[serde(default)]
    pub drop_dependents: bool,
}

/// libpq `sslmode` values supported by the worker.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum PostgresSslMode {
    Disable,
    #[default]
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl PostgresSslMode {
    pub fn as_str(self) -> &'static str {
        match self {
            PostgresSslMode::Disable => "disable",
            PostgresSslMode::Prefer => "prefer",
            PostgresSslMode::Require => "require",
            PostgresSslMode::VerifyCa => "verify-ca",
            PostgresSslMode::VerifyFull => "verify-full",
        }
    }
}

pub const DEFAULT_MSSQL_PORT: i32 = 1433;
pub const DEFAULT_PG_PORT: i32 = 5432;
pub const DEFAULT_PACKET_SIZE: i32 = 32767;
pub const MIN_PACKET_SIZE: i32 = 512;

fn default_mssql_port() -> i32 {
    DEFAULT_MSSQL_PORT
}

fn default_pg_port() -> i32 {
    DEFAULT_PG_PORT
}

fn default_mssql_schema() -> String {
    "dbo".to_string()
}

fn default_pg_schema() -> String {
    "public".to_string()
}

fn default_packet_size() -> i32 {
    DEFAULT_PACKET_SIZE
}

impl MssqlEndpoint {
    /// An endpoint with every optional field at its default.
    pub fn new(host: &str, database: &str, credentials_secret: &str) -> Self {
        Self {
            host: host.to_string(),
            port: DEFAULT_MSSQL_PORT,
            database: database.to_string(),
            schema: default_mssql_schema(),
            schemas: Vec::new(),
            schema_map: Vec::new(),
            credentials_secret: credentials_secret.to_string(),
            encryption: MssqlEncryption::default(),
            trust_server_certificate: false,
            ca_secret: None,
            packet_size: DEFAULT_PACKET_SIZE,
            drop_dependents: false,
        }
    }
}

impl PostgresEndpoint {
    /// An endpoint with every optional field at its default.
    pub fn new(host: &str, database: &str, credentials_secret: &str) -> Self {
        Self {
            host: host.to_string(),
            port: DEFAULT_PG_PORT,
            database: database.to_string(),
            schema: default_pg_schema(),
            schemas: Vec::new(),
            schema_map: Vec::new(),
            credentials_secret: credentials_secret.to_string(),
            ssl_mode: PostgresSslMode::default(),
            ca_secret: None,
            unlogged: false,
            drop_dependents: false,
        }
    }
}
