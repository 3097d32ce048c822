//! The Migration YAML (the `mssql-pg-crds` type users `kubectl apply`) read for local runs and
//! the Jobs, validated the same way the operator does, and converted to engine settings.

use crate::copy::chunk::ChunkLimit;
use crate::mssql::connect::{Encryption, MssqlEndpoint};
use crate::options::{Mode, Options, PartitionOptions, SchemaOptions, VerifyMode};
use crate::pg::connect::{PgEndpoint, SslMode};
use crate::retry::RetryPolicy;
use crate::timeouts::Timeouts;
use mssql_pg_crds::{
    CopyMode, IdentifierCase, Migration, MssqlEncryption, PostgresSslMode, VerifyMode as SpecVerify,
};
use serde::Deserialize;
use std::num::{NonZeroU32, NonZeroU64};
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    #[error("reading {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// The YAML itself, or a field of the Migration (`field` is its path, e.g. `spec.chunkRows`).
    /// The cause is part of the message, not a `source`, so it is printed once.
    #[error("{path}: {field}: {message}")]
    Parse {
        path: String,
        field: String,
        message: String,
    },
    #[error("{path}: unknown field{} {} (kubectl's strict field validation refuses these too)", if .fields.len() == 1 { "" } else { "s" }, .fields.join(", "))]
    UnknownFields { path: String, fields: Vec<String> },
    #[error("invalid Migration: {0}")]
    Invalid(String),
    #[error("{0} is not implemented by this worker yet")]
    Unsupported(String),
    #[error("environment variable{} {} {} not set (the credentials of local runs come from the environment)", if .0.len() == 1 { "" } else { "s" }, .0.join(", "), if .0.len() == 1 { "is" } else { "are" })]
    MissingEnv(Vec<&'static str>),
}

/// Credentials from the environment (Jobs get them through secretKeyRef).
pub struct Credentials {
    pub source_user: String,
    pub source_password: String,
    pub target_user: String,
    pub target_password: String,
}

impl Credentials {
    /// All of them, or an error naming every variable that is missing.
    pub fn from_env() -> Result<Self, SpecError> {
        let mut missing = Vec::new();
        let mut get = |k: &'static str| {
            std::env::var(k).unwrap_or_else(|_| {
                missing.push(k);
                String::new()
            })
        };
        let creds = Credentials {
            source_user: get("SOURCE_USERNAME"),
            source_password: get("SOURCE_PASSWORD"),
            target_user: get("TARGET_USERNAME"),
            // A PostgreSQL target with trust authentication needs none.
            target_password: std::env::var("TARGET_PASSWORD").unwrap_or_default(),
        };
        if missing.is_empty() {
            Ok(creds)
        } else {
            Err(SpecError::MissingEnv(missing))
        }
    }
}

/// Placeholder for `credentialsSecret` in local files: locally the credentials come from the
/// environment, so the field may be left out there.
const LOCAL_CREDENTIALS: &str = "from-environment";

/// Reads the Migration document of a YAML file for a local run, as strictly as the API server's
/// strict field validation: an unknown field is an error, and every error names its field path.
pub fn load(path: &str) -> Result<Migration, SpecError> {
    let text = std::fs::read_to_string(path).map_err(|source| SpecError::Read {
        path: path.into(),
        source,
    })?;
    parse(path, &text)
}

/// [`load`] on text already read; `path` only names it in errors.
pub fn parse(path: &str, text: &str) -> Result<Migration, SpecError> {
    let yaml_err = |e: serde_norway::Error| SpecError::Parse {
        path: path.into(),
        field: e
            .location()
            .map_or_else(|| "YAML".into(), |l| format!("line {}", l.line())),
        message: e.to_string(),
    };
    // The file users apply may also hold their Secrets: take the Migration document.
    let mut found = None;
    for doc in serde_norway::Deserializer::from_str(text) {
        let value = serde_norway::Value::deserialize(doc).map_err(yaml_err)?;
        if value.get("kind").and_then(serde_norway::Value::as_str) == Some("Migration") {
            found = Some(value);
            break;
        }
    }
    let mut value =
        found.ok_or_else(|| SpecError::Invalid(format!("{path} holds no document of kind Migration")))?;
    fill_local_credentials(&mut value);

    let mut unknown = Vec::new();
    let typed: Result<Migration, _> = serde_path_to_error::deserialize(serde_ignored::Deserializer::new(
        value,
        &mut |p: serde_ignored::Path<'_>| unknown.push(p.to_string()),
    ));
    let m = typed.map_err(|e| SpecError::Parse {
        path: path.into(),
        field: e.path().to_string(),
        message: plain_serde_message(&e.inner().to_string()),
    })?;
    // The kube-derived type reads these two itself, past serde.
    unknown.retain(|p| p != "apiVersion" && p != "kind");
    if !unknown.is_empty() {
        return Err(SpecError::UnknownFields {
            path: path.into(),
            fields: unknown,
        });
    }
    m.validate()
        .map_err(|errors| SpecError::Invalid(mssql_pg_crds::validate::describe(&errors)))?;
    Ok(m)
}

/// `credentialsSecret` is required by the CRD (the Jobs read the Secret) but means nothing locally.
fn fill_local_credentials(doc: &mut serde_norway::Value) {
    for side in ["source", "target"] {
        for engine in ["mssql", "postgres"] {
            if let Some(serde_norway::Value::Mapping(ep)) = doc
                .get_mut("spec")
                .and_then(|s| s.get_mut(side))
                .and_then(|s| s.get_mut(engine))
            {
                let key = serde_norway::Value::from("credentialsSecret");
                if !ep.contains_key(&key) {
                    ep.insert(key, serde_norway::Value::from(LOCAL_CREDENTIALS));
                }
            }
        }
    }
}

/// serde's "invalid type: string \"lots\", expected i32" as "expected an integer, found
/// \"lots\"": the field path comes first, then what was wanted, then what was there.
fn plain_serde_message(msg: &str) -> String {
    let msg = msg.split(" at line ").next().unwrap_or(msg);
    let Some(rest) = msg
        .strip_prefix("invalid type: ")
        .or_else(|| msg.strip_prefix("invalid value: "))
    else {
        return msg.to_string();
    };
    let Some((found, expected)) = rest.split_once(", expected ") else {
        return msg.to_string();
    };
    let expected = match expected {
        "i8" | "i16" | "i32" | "i64" | "u8" | "u16" | "u32" | "u64" => "an integer",
        "f32" | "f64" => "a number",
        "a boolean" | "bool" => "true or false",
        other => other,
    };
    let found = found
        .strip_prefix("string ")
        .or_else(|| found.strip_prefix("integer "))
        .or_else(|| found.strip_prefix("floating point "))
        .unwrap_or(found);
    format!("expected {expected}, found {found}")
}

/// A count the validation ([`Migration::validate`]) required to be at least 1, as a type that
/// says so: the engine uses it as it is, and a spec that skipped the validation is refused here
/// rather than clamped.
fn positive<T: TryFrom<NonZeroU64>>(v: i32, field: &str) -> Result<T, SpecError> {
    u64::try_from(v)
        .ok()
        .and_then(NonZeroU64::new)
        .and_then(|v| T::try_from(v).ok())
        .ok_or_else(|| SpecError::Invalid(format!("{field}: must be at least 1 (got {v})")))
}

/// `spec.timeouts` (validated: at least a second each).
fn timeouts(t: &mssql_pg_crds::Timeouts) -> Result<Timeouts, SpecError> {
    let secs = |v, field| positive::<NonZeroU64>(v, field).map(|s| Duration::from_secs(s.get()));
    Ok(Timeouts {
        connect: secs(t.connect_seconds, "spec.timeouts.connectSeconds")?,
        stall: secs(t.stall_seconds, "spec.timeouts.stallSeconds")?,
        lock: secs(t.lock_seconds, "spec.timeouts.lockSeconds")?,
    })
}

/// `spec.retries` (validated: one attempt at least, waits not negative).
fn retry_policy(r: &mssql_pg_crds::Retries) -> Result<RetryPolicy, SpecError> {
    let secs = |v: i32, field: &str| {
        u64::try_from(v)
            .map(Duration::from_secs)
            .map_err(|_| SpecError::Invalid(format!("{field}: must not be negative (got {v})")))
    };
    Ok(RetryPolicy {
        attempts: positive::<NonZeroU32>(r.attempts, "spec.retries.attempts")?.get(),
        backoff: secs(r.backoff_seconds, "spec.retries.backoffSeconds")?,
        max_backoff: secs(r.max_backoff_seconds, "spec.retries.maxBackoffSeconds")?,
    })
}

/// A TDS packet size (validated: 512 to 32767 bytes).
fn packet_size(p: i32, field: &str) -> Result<u32, SpecError> {
    use mssql_pg_crds::endpoint::MIN_PACKET_SIZE;
    (MIN_PACKET_SIZE..=32767)
        .contains(&p)
        .then(|| u32::try_from(p).ok())
        .flatten()
        .ok_or_else(|| SpecError::Invalid(format!("{field}: must be between 512 and 32767 (got {p})")))
}

fn port(p: i32, field: &str) -> Result<u16, SpecError> {
    u16::try_from(p).map_err(|_| SpecError::Invalid(format!("{field}: port {p} out of range")))
}

/// Whether the Migration moves PostgreSQL into SQL Server (source.postgres + target.mssql).
pub fn is_pg_to_mssql(m: &Migration) -> bool {
    m.spec.source.postgres.is_some() && m.spec.target.mssql.is_some()
}

/// Which end of the migration an endpoint is: it names the fields (`source.mssql.port`) and the
/// mounted CA's variable (`SOURCE_SSL_ROOT_CERT`).
#[derive(Debug, Clone, Copy)]
enum Side {
    Source,
    Target,
}

impl Side {
    fn field(self, engine: &str, field: &str) -> String {
        match self {
            Side::Source => format!("spec.source.{engine}.{field}"),
            Side::Target => format!("spec.target.{engine}.{field}"),
        }
    }

    /// A CA from the endpoint's `caSecret`, mounted as a file whose path the Job passes.
    fn ca_file(self) -> Option<String> {
        let var = match self {
            Side::Source => "SOURCE_SSL_ROOT_CERT",
            Side::Target => "TARGET_SSL_ROOT_CERT",
        };
        std::env::var(var).ok().filter(|p| !p.is_empty())
    }
}

/// A SQL Server endpoint of the spec, on either side, with its credentials.
fn mssql_endpoint(
    e: &mssql_pg_crds::MssqlEndpoint,
    side: Side,
    (user, password): (String, String),
    timeouts: Timeouts,
) -> Result<MssqlEndpoint, SpecError> {
    Ok(MssqlEndpoint {
        host: e.host.clone(),
        port: port(e.port, &side.field("mssql", "port"))?,
        database: e.database.clone(),
        user,
        password,
        encryption: match e.encryption {
            MssqlEncryption::NotSupported => Encryption::NotSupported,
            MssqlEncryption::Off => Encryption::Off,
            MssqlEncryption::On | MssqlEncryption::Required => Encryption::Required,
        },
        trust_server_certificate: e.trust_server_certificate,
        ca_file: side.ca_file(),
        packet_size: packet_size(e.packet_size, &side.field("mssql", "packetSize"))?,
        timeouts,
    })
}

/// A PostgreSQL endpoint of the spec, on either side, with its credentials.
fn pg_endpoint(
    e: &mssql_pg_crds::PostgresEndpoint,
    side: Side,
    (user, password): (String, String),
    timeouts: Timeouts,
) -> Result<PgEndpoint, SpecError> {
    Ok(PgEndpoint {
        host: e.host.clone(),
        port: port(e.port, &side.field("postgres", "port"))?,
        database: e.database.clone(),
        user,
        password,
        ssl_mode: match e.ssl_mode {
            PostgresSslMode::Disable => SslMode::Disable,
            PostgresSslMode::Prefer => SslMode::Prefer,
            PostgresSslMode::Require => SslMode::Require,
            PostgresSslMode::VerifyCa => SslMode::VerifyCa,
            PostgresSslMode::VerifyFull => SslMode::VerifyFull,
        },
        ssl_root_cert: side.ca_file(),
        timeouts,
    })
}

/// What of the options comes from the endpoints (the rest is the spec's, the same both ways).
struct EndpointOptions {
    source_schema: String,
    source_schemas: Vec<String>,
    target_schema: String,
    schema_map: Vec<mssql_pg_crds::SchemaMapping>,
    /// Only a PostgreSQL target has unlogged tables.
    unlogged: bool,
    drop_dependents: bool,
}

/// Engine settings for the PostgreSQL -> SQL Server direction: (PostgreSQL source, SQL Server
/// target, options). `SOURCE_*` credentials are PostgreSQL's, `TARGET_*` SQL Server's.
pub fn resolve_pg_to_mssql(
    m: &Migration,
    creds: Credentials,
) -> Result<(PgEndpoint, MssqlEndpoint, Options), SpecError> {
    let spec = &m.spec;
    let (Some(src), Some(dst)) = (spec.source.postgres.as_ref(), spec.target.mssql.as_ref()) else {
        return Err(SpecError::Invalid(
            "the postgres -> mssql direction needs source.postgres and target.mssql".into(),
        ));
    };
    let source = pg_endpoint(
        src,
        Side::Source,
        (creds.source_user, creds.source_password),
        timeouts(&spec.timeouts)?,
    )?;
    let target = mssql_endpoint(
        dst,
        Side::Target,
        (creds.target_user, creds.target_password),
        timeouts(&spec.timeouts)?,
    )?;
    let options = options(
        m,
        EndpointOptions {
            source_schema: src.schema.clone(),
            source_schemas: src.schemas.clone(),
            target_schema: dst.schema.clone(),
            schema_map: dst.schema_map.clone(),
            unlogged: false,
            drop_dependents: dst.drop_dependents,
        },
    )?;
    Ok((source, target, options))
}

/// Engine settings for the SQL Server -> PostgreSQL direction.
pub fn resolve(m: &Migration, creds: Credentials) -> Result<(MssqlEndpoint, PgEndpoint, Options), SpecError> {
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
    let source = mssql_endpoint(
        src,
        Side::Source,
        (creds.source_user, creds.source_password),
        timeouts(&spec.timeouts)?,
    )?;
    let target = pg_endpoint(
        dst,
        Side::Target,
        (creds.target_user, creds.target_password),
        timeouts(&spec.timeouts)?,
    )?;
    let options = options(
        m,
        EndpointOptions {
            source_schema: src.schema.clone(),
            source_schemas: src.schemas.clone(),
            target_schema: dst.schema.clone(),
            schema_map: dst.schema_map.clone(),
            unlogged: dst.unlogged,
            drop_dependents: dst.drop_dependents,
        },
    )?;
    Ok((source, target, options))
}

/// What the engine keys a migration by (its checkpoints, its metrics): `namespace/name` from the file's
/// metadata, or the bare name without a namespace.
pub fn migration_key(m: &Migration) -> String {
    let name = m.metadata.name.clone().unwrap_or_else(|| "migration".into());
    match &m.metadata.namespace {
        Some(ns) => format!("{ns}/{name}"),
        None => name,
    }
}

/// The engine's options of either direction: the spec's own, plus the endpoints' part.
fn options(m: &Migration, ends: EndpointOptions) -> Result<Options, SpecError> {
    let spec = &m.spec;
    let s = &spec.schema;
    let p = &spec.partitioning;
    Ok(Options {
        migration: migration_key(m),
        source_schema: ends.source_schema,
        source_schemas: ends.source_schemas,
        target_schema: ends.target_schema,
        schema_map: ends.schema_map,
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
            max_partitions_per_table: positive::<NonZeroU32>(
                p.max_partitions_per_table,
                "spec.partitioning.maxPartitionsPerTable",
            )?
            .get(),
        },
        parallelism: positive(spec.parallelism, "spec.parallelism")?,
        chunk: ChunkLimit {
            rows: match spec.chunk_rows {
                Some(r) => positive::<NonZeroU64>(r, "spec.chunkRows")?.get(),
                None => u64::MAX,
            },
            bytes: spec
                .chunk_bytes()
                .map_err(|e| SpecError::Invalid(e.to_string()))?,
        },
        verify: match spec.verify {
            SpecVerify::Count => VerifyMode::Count,
            SpecVerify::Checksum => VerifyMode::Checksum,
            SpecVerify::Full => VerifyMode::Full,
            SpecVerify::None => VerifyMode::None,
        },
        lowercase_identifiers: s.identifier_case == IdentifierCase::Lower,
        unlogged: ends.unlogged,
        retry: retry_policy(&spec.retries)?,
        drop_dependents: ends.drop_dependents,
        dry_run: spec.dry_run,
        run_id: m.metadata.uid.clone(),
        online: spec.online.enabled,
        reverse: spec.online.enabled && spec.cutover.reverse,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = "apiVersion: mssqlpg.dev/v1alpha1
kind: Migration
metadata: {name: m}
spec:
  source:
    mssql: {host: h, database: d, encryption: NotSupported}
  target:
    postgres: {host: p, database: d}
";

    fn err(extra: &str) -> String {
        match parse("m.yaml", &format!("{BASE}{extra}")) {
            Ok(_) => panic!("accepted: {extra}"),
            Err(e) => crate::error_text::error_text(&e),
        }
    }

    #[test]
    fn credentials_secret_may_be_left_out_locally() {
        let m = parse("m.yaml", BASE).expect("valid");
        assert_eq!(
            m.spec.source.mssql.map(|s| s.credentials_secret),
            Some(LOCAL_CREDENTIALS.to_string())
        );
    }

    #[test]
    fn an_unknown_field_is_refused_by_its_path() {
        let e = err("  modee: upsert\n");
        assert_eq!(
            e,
            "m.yaml: unknown field spec.modee (kubectl's strict field validation refuses these too)"
        );
        let e = err("  partitioning: {rowsPerPartiton: 5}\n");
        assert!(e.contains("spec.partitioning.rowsPerPartiton"), "{e}");
    }

    #[test]
    fn a_type_error_names_the_field_what_was_expected_and_found_once() {
        assert_eq!(
            err("  partitioning: {rowsPerPartition: lots}\n"),
            "m.yaml: spec.partitioning.rowsPerPartition: expected an integer, found \"lots\""
        );
        assert_eq!(
            err("  chunkRows: \"lots\"\n"),
            "m.yaml: spec.chunkRows: expected an integer, found \"lots\""
        );
    }

    #[test]
    fn chunk_bytes_and_chunk_rows_reach_the_options() {
        let creds = || Credentials {
            source_user: "u".into(),
            source_password: String::new(),
            target_user: "u".into(),
            target_password: String::new(),
        };
        let m = parse("m.yaml", BASE).expect("valid");
        let (_, _, options) = resolve(&m, creds()).expect("resolves");
        assert_eq!(options.chunk, ChunkLimit::default());
        let m = parse("m.yaml", &format!("{BASE}  chunkBytes: 8Mi\n  chunkRows: 1000\n")).expect("valid");
        let (_, _, options) = resolve(&m, creds()).expect("resolves");
        assert_eq!(
            options.chunk,
            ChunkLimit {
                rows: 1000,
                bytes: 8 << 20
            }
        );
        let m = parse("m.yaml", &format!("{BASE}  chunkBytes: 1048576\n")).expect("valid");
        let (_, _, options) = resolve(&m, creds()).expect("resolves");
        assert_eq!(options.chunk, ChunkLimit::bytes(1 << 20));
        assert_eq!(
            err("  chunkBytes: 64MB\n"),
            "invalid Migration: spec.chunkBytes: \"64MB\" is not a byte size: write an integer or a quantity such as \
             64Mi or 100M"
        );
    }

    #[test]
    fn counts_reach_the_options_as_validated_and_are_never_clamped() {
        let creds = || Credentials {
            source_user: "u".into(),
            source_password: String::new(),
            target_user: "u".into(),
            target_password: String::new(),
        };
        let m = parse("m.yaml", &format!("{BASE}  parallelism: 7\n")).expect("valid");
        let (_, _, options) = resolve(&m, creds()).expect("resolves");
        assert_eq!(options.parallelism.get(), 7);
        // A Migration that skipped the validation is refused, not quietly clamped to 1.
        let mut unvalidated = m.clone();
        unvalidated.spec.parallelism = 0;
        let e = resolve(&unvalidated, creds()).err().map(|e| e.to_string());
        assert_eq!(
            e.as_deref(),
            Some("invalid Migration: spec.parallelism: must be at least 1 (got 0)")
        );
        let mut unvalidated = m;
        unvalidated.spec.retries.attempts = -1;
        let e = resolve(&unvalidated, creds()).err().map(|e| e.to_string());
        assert_eq!(
            e.as_deref(),
            Some("invalid Migration: spec.retries.attempts: must be at least 1 (got -1)")
        );
    }

    #[test]
    fn schema_map_reaches_the_options_in_both_directions() {
        let creds = || Credentials {
            source_user: "u".into(),
            source_password: String::new(),
            target_user: "u".into(),
            target_password: String::new(),
        };
        let fwd = "apiVersion: mssqlpg.dev/v1alpha1
kind: Migration
metadata: {name: m}
spec:
  source:
    mssql: {host: h, database: d, encryption: NotSupported, schemas: [\"*\"]}
  target:
    postgres:
      host: p
      database: d
      schemaMap:
        - {from: Sales, to: sales}
        - {from: HR, to: people}
";
        let m = parse("m.yaml", fwd).expect("valid");
        let (_, _, options) = resolve(&m, creds()).expect("resolves");
        let pairs: Vec<(&str, &str)> = options
            .schema_map
            .iter()
            .map(|e| (e.from.as_str(), e.to.as_str()))
            .collect();
        assert_eq!(pairs, [("Sales", "sales"), ("HR", "people")]);

        let rev = "apiVersion: mssqlpg.dev/v1alpha1
kind: Migration
metadata: {name: m}
spec:
  source:
    postgres: {host: p, database: d, schemas: [public, sales]}
  target:
    mssql:
      host: h
      database: d
      encryption: NotSupported
      schemaMap: [{from: sales, to: Sales}]
";
        let m = parse("m.yaml", rev).expect("valid");
        let (_, _, options) = resolve_pg_to_mssql(&m, creds()).expect("resolves");
        assert_eq!(
            options.schema_map,
            [mssql_pg_crds::SchemaMapping::new("sales", "Sales")]
        );
        assert_eq!(
            (options.source_schema.as_str(), options.target_schema.as_str()),
            ("public", "dbo")
        );
    }

    /// Each endpoint is read by its own kind's resolver on its own side: a SQL Server target's
    /// settings and field names are the target's, and a PostgreSQL source's `unlogged` (a
    /// PostgreSQL target's option) does not leak into the options.
    #[test]
    fn each_endpoint_is_resolved_from_its_own_side() {
        let creds = Credentials {
            source_user: "su".into(),
            source_password: "sp".into(),
            target_user: "tu".into(),
            target_password: "tp".into(),
        };
        let rev = "apiVersion: mssqlpg.dev/v1alpha1
kind: Migration
metadata: {name: m}
spec:
  source:
    postgres: {host: p, port: 5433, database: pd, sslMode: require}
  target:
    mssql: {host: h, port: 1434, database: md, encryption: NotSupported, packetSize: 16384}
";
        let mut m = parse("m.yaml", rev).expect("valid");
        // Validation refuses it on a source; the resolver must not read it from there either.
        if let Some(s) = m.spec.source.postgres.as_mut() {
            s.unlogged = true;
        }
        let (source, target, options) = resolve_pg_to_mssql(&m, creds).expect("resolves");
        assert_eq!(
            (
                source.host.as_str(),
                source.port,
                source.database.as_str(),
                source.user.as_str()
            ),
            ("p", 5433, "pd", "su")
        );
        assert_eq!(source.ssl_mode, SslMode::Require);
        assert_eq!(
            (
                target.host.as_str(),
                target.port,
                target.database.as_str(),
                target.user.as_str()
            ),
            ("h", 1434, "md", "tu")
        );
        assert_eq!(target.packet_size, 16384);
        assert!(!options.unlogged, "unlogged is a PostgreSQL target's option");

        let mut bad = m.clone();
        if let Some(t) = bad.spec.target.mssql.as_mut() {
            t.port = 70000;
        }
        let none = Credentials {
            source_user: String::new(),
            source_password: String::new(),
            target_user: String::new(),
            target_password: String::new(),
        };
        let e = resolve_pg_to_mssql(&bad, none).expect_err("port out of range");
        assert!(e.to_string().contains("spec.target.mssql.port"), "{e}");
    }

    #[test]
    fn a_bad_schema_map_entry_is_named_by_its_path_before_anything_runs() {
        let text = match parse(
            "m.yaml",
            "apiVersion: mssqlpg.dev/v1alpha1
kind: Migration
metadata: {name: m}
spec:
  source:
    mssql: {host: h, database: d, encryption: NotSupported}
  target:
    postgres:
      host: p
      database: d
      schemaMap: [{from: Sales, to: sales}, {from: HR, to: pg_hr}]
",
        ) {
            Ok(_) => panic!("accepted"),
            Err(e) => crate::error_text::error_text(&e),
        };
        assert!(
            text.starts_with("invalid Migration: spec.target.postgres.schemaMap[1].to: \"pg_hr\""),
            "{text}"
        );
        let text = match parse(
            "m.yaml",
            &BASE.replace(
                "{host: p, database: d}",
                "{host: p, database: d, schemaMap: [{from: S}]}",
            ),
        ) {
            Ok(_) => panic!("accepted"),
            Err(e) => crate::error_text::error_text(&e),
        };
        assert!(text.contains("spec.target.postgres.schemaMap[0]"), "{text}");
        assert!(text.contains("to"), "{text}");
    }

    #[test]
    fn a_missing_field_says_which_side() {
        let e = match parse(
            "m.yaml",
            "kind: Migration
metadata: {name: m}
spec:
  source: {mssql: {database: d}}
  target: {postgres: {host: p, database: d}}
",
        ) {
            Ok(_) => panic!("accepted"),
            Err(e) => e.to_string(),
        };
        assert!(e.contains("spec.source.mssql"), "{e}");
        assert!(e.contains("host"), "{e}");
    }
}
