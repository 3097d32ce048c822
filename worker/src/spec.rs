//! The Migration YAML (`kubectl apply`-able) read for local runs, converted to engine settings.
//! Field names follow the `mssql-pg-crds` Migration spec; only what the worker needs is read,
//! unknown fields are ignored.

use crate::mssql::connect::{Encryption, MssqlSource, REQUESTED_PACKET_SIZE};
use crate::options::{Mode, Options, PartitionOptions, SchemaOptions, VerifyMode};
use crate::pg::connect::PgTarget;
use serde::Deserialize;

#[derive(Debug, Deserialize)]
pub struct MigrationDoc {
    #[serde(default)]
    pub kind: Option<String>,
    pub metadata: Metadata,
    pub spec: Spec,
}

#[derive(Debug, Deserialize)]
pub struct Metadata {
    pub name: String,
    #[serde(default)]
    pub namespace: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Spec {
    pub source: Endpoint,
    pub target: Endpoint,
    #[serde(default)]
    pub tables: Tables,
    #[serde(default)]
    pub mode: Option<String>,
    #[serde(default)]
    pub schema: SchemaSpec,
    #[serde(default)]
    pub partitioning: PartitioningSpec,
    #[serde(default)]
    pub parallelism: Option<i64>,
    #[serde(default)]
    pub chunk_rows: Option<i64>,
    #[serde(default)]
    pub verify: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct Endpoint {
    #[serde(default)]
    pub mssql: Option<MssqlEndpoint>,
    #[serde(default)]
    pub postgres: Option<PostgresEndpoint>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MssqlEndpoint {
    pub host: String,
    #[serde(default)]
    pub port: Option<u16>,
    pub database: String,
    #[serde(default)]
    pub schema: Option<String>,
    #[serde(default)]
    pub encryption: Option<String>,
    #[serde(default)]
    pub trust_server_certificate: bool,
    #[serde(default)]
    pub packet_size: Option<u32>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PostgresEndpoint {
    pub host: String,
    #[serde(default)]
    pub port: Option<u16>,
    pub database: String,
    #[serde(default)]
    pub schema: Option<String>,
    #[serde(default)]
    pub ssl_mode: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct Tables {
    #[serde(default = "star")]
    pub include: Vec<String>,
    #[serde(default)]
    pub exclude: Vec<String>,
}

fn star() -> Vec<String> {
    vec!["*".into()]
}

impl Default for Tables {
    fn default() -> Self {
        Tables {
            include: star(),
            exclude: Vec::new(),
        }
    }
}

#[derive(Debug, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct SchemaSpec {
    pub indexes: Option<bool>,
    pub foreign_keys: Option<bool>,
    pub check_constraints: Option<bool>,
    pub defaults: Option<bool>,
    pub identity: Option<bool>,
    pub identifier_case: Option<String>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct PartitioningSpec {
    pub min_rows_to_split: Option<i64>,
    pub rows_per_partition: Option<i64>,
    pub max_partitions_per_table: Option<u32>,
}

#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    #[error("reading {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("parsing {path}: {source}")]
    Parse {
        path: String,
        #[source]
        source: serde_yaml::Error,
    },
    #[error("spec.{0}: {1}")]
    Invalid(&'static str, String),
    #[error("environment variable {0} is not set")]
    MissingEnv(&'static str),
}

/// Credentials from the environment (Jobs get them through secretKeyRef).
pub struct Credentials {
    pub source_user: String,
    pub source_password: String,
    pub target_user: String,
    pub target_password: String,
}

impl Credentials {
    pub fn from_env() -> Result<Self, SpecError> {
        let get = |k: &'static str| std::env::var(k).map_err(|_| SpecError::MissingEnv(k));
        Ok(Credentials {
            source_user: get("SOURCE_USERNAME")?,
            source_password: get("SOURCE_PASSWORD")?,
            target_user: get("TARGET_USERNAME")?,
            // PostgreSQL with trust authentication needs none.
            target_password: std::env::var("TARGET_PASSWORD").unwrap_or_default(),
        })
    }
}

pub fn load(path: &str) -> Result<MigrationDoc, SpecError> {
    let text = std::fs::read_to_string(path).map_err(|source| SpecError::Read {
        path: path.into(),
        source,
    })?;
    serde_yaml::from_str(&text).map_err(|source| SpecError::Parse {
        path: path.into(),
        source,
    })
}

/// Engine settings for the SQL Server -> PostgreSQL direction.
pub fn resolve(
    doc: &MigrationDoc,
    creds: Credentials,
) -> Result<(MssqlSource, PgTarget, Options), SpecError> {
    let spec = &doc.spec;
    let src = spec.source.mssql.as_ref().ok_or_else(|| {
        SpecError::Invalid(
            "source",
            "only source.mssql (-> target.postgres) is implemented".into(),
        )
    })?;
    let dst = spec
        .target
        .postgres
        .as_ref()
        .ok_or_else(|| SpecError::Invalid("target", "only target.postgres is implemented".into()))?;
    let encryption = match src.encryption.as_deref().unwrap_or("Required") {
        "NotSupported" => Encryption::NotSupported,
        "Off" => Encryption::Off,
        "On" | "Required" => Encryption::Required,
        other => {
            return Err(SpecError::Invalid(
                "source.mssql.encryption",
                format!("unknown value {other}"),
            ));
        }
    };
    match dst.ssl_mode.as_deref().unwrap_or("prefer") {
        "disable" | "prefer" | "allow" => {}
        other => {
            return Err(SpecError::Invalid(
                "target.postgres.sslMode",
                format!("{other} is not supported by this worker yet (TLS to PostgreSQL is not built in)"),
            ));
        }
    }
    let source = MssqlSource {
        host: src.host.clone(),
        port: src.port.unwrap_or(1433),
        database: src.database.clone(),
        user: creds.source_user,
        password: creds.source_password,
        encryption,
        trust_server_certificate: src.trust_server_certificate,
        packet_size: src.packet_size.unwrap_or(REQUESTED_PACKET_SIZE),
    };
    let target = PgTarget {
        host: dst.host.clone(),
        port: dst.port.unwrap_or(5432),
        database: dst.database.clone(),
        user: creds.target_user,
        password: creds.target_password,
    };
    let mode = match spec.mode.as_deref().unwrap_or("dropRecreate") {
        "dropRecreate" => Mode::DropRecreate,
        "truncate" => Mode::Truncate,
        "upsert" => Mode::Upsert,
        other => {
            return Err(SpecError::Invalid(
                "mode",
                format!("{other} is not implemented by this worker yet"),
            ));
        }
    };
    let verify = match spec.verify.as_deref().unwrap_or("checksum") {
        "checksum" => VerifyMode::Checksum,
        "count" => VerifyMode::Count,
        "none" => VerifyMode::None,
        other => return Err(SpecError::Invalid("verify", format!("unknown value {other}"))),
    };
    let d = SchemaOptions::default();
    let s = &spec.schema;
    let pd = PartitionOptions::default();
    let p = &spec.partitioning;
    let options = Options {
        migration: match &doc.metadata.namespace {
            Some(ns) => format!("{ns}/{}", doc.metadata.name),
            None => doc.metadata.name.clone(),
        },
        source_schema: src.schema.clone().unwrap_or_else(|| "dbo".into()),
        target_schema: dst.schema.clone().unwrap_or_else(|| "public".into()),
        include: spec.tables.include.clone(),
        exclude: spec.tables.exclude.clone(),
        mode,
        schema: SchemaOptions {
            indexes: s.indexes.unwrap_or(d.indexes),
            foreign_keys: s.foreign_keys.unwrap_or(d.foreign_keys),
            check_constraints: s.check_constraints.unwrap_or(d.check_constraints),
            defaults: s.defaults.unwrap_or(d.defaults),
            identity: s.identity.unwrap_or(d.identity),
        },
        partitioning: PartitionOptions {
            min_rows_to_split: p.min_rows_to_split.unwrap_or(pd.min_rows_to_split),
            rows_per_partition: p.rows_per_partition.unwrap_or(pd.rows_per_partition),
            max_partitions_per_table: p.max_partitions_per_table.unwrap_or(pd.max_partitions_per_table),
        },
        parallelism: spec.parallelism.unwrap_or(4).clamp(1, 256) as usize,
        chunk_rows: spec.chunk_rows.unwrap_or(50_000).max(1) as u64,
        verify,
        lowercase_identifiers: matches!(s.identifier_case.as_deref(), Some("lower")),
    };
    Ok((source, target, options))
}
