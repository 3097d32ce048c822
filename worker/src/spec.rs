//! The Migration YAML (the `mssql-pg-crds` type users `kubectl apply`) read for local runs and
//! the Jobs, validated the same way the operator does, and converted to engine settings.

use crate::mssql::connect::{Encryption, MssqlSource};
use crate::options::{Mode, Options, PartitionOptions, SchemaOptions, VerifyMode};
use crate::pg::connect::{PgTarget, SslMode};
use crate::retry::RetryPolicy;
use crate::timeouts::Timeouts;
use mssql_pg_crds::{
    CopyMode, IdentifierCase, Migration, MssqlEncryption, PostgresSslMode, VerifyMode as SpecVerify,
};
use serde::Deserialize;

#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    #[error("reading {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("parsing {path} as a Migration: {source}")]
    Parse {
        path: String,
        #[source]
        source: serde_yaml::Error,
    },
    #[error("invalid Migration: {0}")]
    Invalid(String),
    #[error("{0} is not implemented by this worker yet")]
    Unsupported(String),
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

pub fn load(path: &str) -> Result<Migration, SpecError> {
    let text = std::fs::read_to_string(path).map_err(|source| SpecError::Read {
        path: path.into(),
        source,
    })?;
    // The file users apply may also hold their Secrets: take the Migration document.
    let mut found = None;
    for doc in serde_yaml::Deserializer::from_str(&text) {
        let value = serde_yaml::Value::deserialize(doc).map_err(|source| SpecError::Parse {
            path: path.into(),
            source,
        })?;
        if value.get("kind").and_then(serde_yaml::Value::as_str) == Some("Migration") {
            found = Some(value);
            break;
        }
    }
    let value =
        found.ok_or_else(|| SpecError::Invalid(format!("{path} holds no document of kind Migration")))?;
    let m: Migration = serde_yaml::from_value(value).map_err(|source| SpecError::Parse {
        path: path.into(),
        source,
    })?;
    m.validate()
        .map_err(|errors| SpecError::Invalid(mssql_pg_crds::validate::describe(&errors)))?;
    Ok(m)
}

fn port(p: i32, field: &str) -> Result<u16, SpecError> {
    u16::try_from(p).map_err(|_| SpecError::Invalid(format!("{field}: port {p} out of range")))
}

/// Whether the Migration moves PostgreSQL into SQL Server (source.postgres + target.mssql).
pub fn is_pg_to_mssql(m: &Migration) -> bool {
    m.spec.source.postgres.is_some() && m.spec.target.mssql.is_some()
}

/// Engine settings for the PostgreSQL -> SQL Server direction: (PostgreSQL source, SQL Server
/// target, options). `SOURCE_*` credentials are PostgreSQL's, `TARGET_*` SQL Server's.
pub fn resolve_pg_to_mssql(
    m: &Migration,
    creds: Credentials,
) -> Result<(PgTarget, MssqlSource, Options), SpecError> {
    let spec = &m.spec;
    let (Some(src), Some(dst)) = (spec.source.postgres.as_ref(), spec.target.mssql.as_ref()) else {
        return Err(SpecError::Invalid(
            "the postgres -> mssql direction needs source.postgres and target.mssql".into(),
        ));
    };
    let source = PgTarget {
        host: src.host.clone(),
        port: port(src.port, "source.postgres.port")?,
        database: src.database.clone(),
        user: creds.source_user,
        password: creds.source_password,
        ssl_mode: match src.ssl_mode {
            PostgresSslMode::Disable => SslMode::Disable,
            PostgresSslMode::Prefer => SslMode::Prefer,
            PostgresSslMode::Require => SslMode::Require,
            PostgresSslMode::VerifyCa => SslMode::VerifyCa,
            PostgresSslMode::VerifyFull => SslMode::VerifyFull,
        },
        ssl_root_cert: std::env::var("SOURCE_SSL_ROOT_CERT")
            .ok()
            .filter(|p| !p.is_empty()),
        timeouts: Timeouts::from_spec(&spec.timeouts),
    };
    let target = MssqlSource {
        host: dst.host.clone(),
        port: port(dst.port, "target.mssql.port")?,
        database: dst.database.clone(),
        user: creds.target_user,
        password: creds.target_password,
        encryption: match dst.encryption {
            MssqlEncryption::NotSupported => Encryption::NotSupported,
            MssqlEncryption::Off => Encryption::Off,
            MssqlEncryption::On | MssqlEncryption::Required => Encryption::Required,
        },
        trust_server_certificate: dst.trust_server_certificate,
        ca_file: std::env::var("TARGET_SSL_ROOT_CERT")
            .ok()
            .filter(|p| !p.is_empty()),
        packet_size: u32::try_from(dst.packet_size.clamp(512, 32767)).unwrap_or(32767),
        timeouts: Timeouts::from_spec(&spec.timeouts),
    };
    // The option mapping is the same as the other direction's; only the endpoints differ.
    let mut mirrored = m.clone();
    mirrored.spec.source = mssql_pg_crds::Endpoint {
        mssql: Some(dst.clone()),
        postgres: None,
    };
    mirrored.spec.target = mssql_pg_crds::Endpoint {
        mssql: None,
        postgres: Some(src.clone()),
    };
    let (_, _, mut options) = resolve(
        &mirrored,
        Credentials {
            source_user: String::new(),
            source_password: String::new(),
            target_user: String::new(),
            target_password: String::new(),
        },
    )?;
    options.source_schema = src.schema.clone();
    options.target_schema = dst.schema.clone();
    Ok((source, target, options))
}

/// Engine settings for the SQL Server -> PostgreSQL direction.
pub fn resolve(m: &Migration, creds: Credentials) -> Result<(MssqlSource, PgTarget, Options), SpecError> {
    let spec = &m.spec;
    let src = spec
        .source
        .mssql
        .as_ref()
        .ok_or_else(|| SpecError::Unsupported("the postgres -> mssql direction".into()))?;
    let dst = spec
        .target
        .postgres
        .as_ref()
        .ok_or_else(|| SpecError::Invalid("target.postgres is required".into()))?;
    let encryption = match src.encryption {
        MssqlEncryption::NotSupported => Encryption::NotSupported,
        MssqlEncryption::Off => Encryption::Off,
        MssqlEncryption::On | MssqlEncryption::Required => Encryption::Required,
    };
    let source = MssqlSource {
        host: src.host.clone(),
        port: port(src.port, "source.mssql.port")?,
        database: src.database.clone(),
        user: creds.source_user,
        password: creds.source_password,
        encryption,
        trust_server_certificate: src.trust_server_certificate,
        // A CA from the caSecret arrives as a mounted file, as PostgreSQL's does.
        ca_file: std::env::var("SOURCE_SSL_ROOT_CERT")
            .ok()
            .filter(|p| !p.is_empty()),
        packet_size: u32::try_from(src.packet_size.clamp(512, 32767)).unwrap_or(32767),
        timeouts: Timeouts::from_spec(&spec.timeouts),
    };
    let target = PgTarget {
        host: dst.host.clone(),
        port: port(dst.port, "target.postgres.port")?,
        database: dst.database.clone(),
        user: creds.target_user,
        password: creds.target_password,
        ssl_mode: match dst.ssl_mode {
            PostgresSslMode::Disable => SslMode::Disable,
            PostgresSslMode::Prefer => SslMode::Prefer,
            PostgresSslMode::Require => SslMode::Require,
            PostgresSslMode::VerifyCa => SslMode::VerifyCa,
            PostgresSslMode::VerifyFull => SslMode::VerifyFull,
        },
        // A CA from a Secret arrives as a mounted file.
        ssl_root_cert: std::env::var("TARGET_SSL_ROOT_CERT")
            .ok()
            .filter(|p| !p.is_empty()),
        timeouts: Timeouts::from_spec(&spec.timeouts),
    };
    let s = &spec.schema;
    let p = &spec.partitioning;
    let name = m.metadata.name.clone().unwrap_or_else(|| "migration".into());
    let options = Options {
        migration: match &m.metadata.namespace {
            Some(ns) => format!("{ns}/{name}"),
            None => name,
        },
        source_schema: src.schema.clone(),
        target_schema: dst.schema.clone(),
        include: spec.tables.include.clone(),
        exclude: spec.tables.exclude.clone(),
        mode: match spec.mode {
            CopyMode::DropRecreate => Mode::DropRecreate,
            CopyMode::Truncate => Mode::Truncate,
            CopyMode::Upsert => Mode::Upsert,
        },
        schema: SchemaOptions {
            indexes: s.indexes,
            foreign_keys: s.foreign_keys,
            check_constraints: s.check_constraints,
            defaults: s.defaults,
            identity: s.identity,
        },
        partitioning: PartitionOptions {
            min_rows_to_split: p.min_rows_to_split,
            rows_per_partition: p.rows_per_partition,
            max_partitions_per_table: u32::try_from(p.max_partitions_per_table.max(1)).unwrap_or(1),
        },
        parallelism: usize::try_from(spec.parallelism.max(1)).unwrap_or(1),
        chunk_rows: u64::try_from(spec.chunk_rows.max(1)).unwrap_or(1),
        verify: match spec.verify {
            SpecVerify::Count => VerifyMode::Count,
            SpecVerify::Checksum => VerifyMode::Checksum,
            SpecVerify::None => VerifyMode::None,
        },
        lowercase_identifiers: s.identifier_case == IdentifierCase::Lower,
        unlogged: dst.unlogged,
        retry: RetryPolicy::from_spec(&spec.retries),
    };
    Ok((source, target, options))
}
