//! Rust-side validation of a Migration: everything admission checks (so `mssql-pg-worker run -f` without a
//! cluster rejects the same specs) plus what CEL cannot express (glob syntax, name lengths).

use crate::endpoint::{Endpoint, EndpointRef, MIN_PACKET_SIZE, MssqlEndpoint, PostgresEndpoint};
use crate::migration::{Migration, MigrationSpec};
use crate::names::{MAX_MIGRATION_NAME_LEN, is_dns1123_label};
use crate::quantity::parse_bytes;

pub(crate) use crate::field_error::in_range;
pub use crate::field_error::{FieldError, describe};

impl Migration {
    /// All problems with this Migration; `Ok` when the worker can run it.
    pub fn validate(&self) -> Result<(), Vec<FieldError>> {
        let mut errors = Vec::new();
        if let Some(name) = self.metadata.name.as_deref()
            && !is_dns1123_label(name, MAX_MIGRATION_NAME_LEN)
        {
            errors.push(FieldError::new(
                "metadata.name",
                format!(
                    "must be a DNS label of at most {MAX_MIGRATION_NAME_LEN} characters (lower-case letters, \
                     digits, '-'): Job and task names are derived from it"
                ),
            ));
        }
        self.spec.collect_errors(&mut errors);
        if errors.is_empty() { Ok(()) } else { Err(errors) }
    }
}

impl MigrationSpec {
    /// All problems with this spec; `Ok` when the worker can run it.
    pub fn validate(&self) -> Result<(), Vec<FieldError>> {
        let mut errors = Vec::new();
        self.collect_errors(&mut errors);
        if errors.is_empty() { Ok(()) } else { Err(errors) }
    }

    fn collect_errors(&self, errors: &mut Vec<FieldError>) {
        let source = endpoint(&self.source, "spec.source", errors);
        // UNLOGGED is a property of the tables the load creates: a source has none.
        if self.source.postgres.as_ref().is_some_and(|p| p.unlogged) {
            errors.push(FieldError::new(
                "spec.source.postgres.unlogged",
                "applies to the PostgreSQL target only (it creates the target tables UNLOGGED for the load); \
                 remove it from the source",
            ));
        }
        let schemas_on_target = [
            (
                "mssql",
                self.target.mssql.as_ref().is_some_and(|m| !m.schemas.is_empty()),
            ),
            (
                "postgres",
                self.target
                    .postgres
                    .as_ref()
                    .is_some_and(|p| !p.schemas.is_empty()),
            ),
        ];
        for (engine, set) in schemas_on_target {
            if set {
                errors.push(FieldError::new(
                    format!("spec.target.{engine}.schemas"),
                    "applies to the source only (the target's schemas follow the source's: `schema` receives \
                     the source's `schema`, `schemaMap` names where others go); remove it from the target",
                ));
            }
        }
        schema_map_errors(self, errors);
        let drops_on_source = [
            (
                "mssql",
                self.source.mssql.as_ref().is_some_and(|m| m.drop_dependents),
            ),
            (
                "postgres",
                self.source.postgres.as_ref().is_some_and(|p| p.drop_dependents),
            ),
        ];
        for (engine, set) in drops_on_source {
            if set {
                errors.push(FieldError::new(
                    format!("spec.source.{engine}.dropDependents"),
                    "applies to the target only (what a drop of a target table may take along); remove it \
                     from the source",
                ));
            }
        }
        let target = endpoint(&self.target, "spec.target", errors);
        if let (Some(s), Some(t)) = (source, target)
            && s.engine() == t.engine()
        {
            errors.push(FieldError::new(
                "spec.target",
                format!(
                    "source and target are both {}: one side must be mssql, the other postgres",
                    s.engine()
                ),
            ));
        }

        if self.tables.include.is_empty() {
            errors.push(FieldError::new(
                "spec.tables.include",
                "must list at least one pattern, e.g. \"*\"",
            ));
        }
        if let Err(bad) = self.tables.compile() {
            for (field, e) in bad {
                errors.push(FieldError::new(
                    format!("spec.tables.{field}"),
                    format!("bad pattern: {e}"),
                ));
            }
        }

        let p = &self.partitioning;
        in_range(errors, "spec.parallelism", i64::from(self.parallelism), 1, 256);
        in_range(
            errors,
            "spec.copyJobs.maxTasks",
            i64::from(self.copy_jobs.max_tasks),
            1,
            256,
        );
        in_range(
            errors,
            "spec.copyJobs.maxRows",
            self.copy_jobs.max_rows,
            1,
            i64::MAX,
        );
        if let Some(rows) = self.chunk_rows {
            in_range(errors, "spec.chunkRows", i64::from(rows), 1, 10_000_000);
        }
        if let Err(e) = self.chunk_bytes() {
            errors.push(e);
        }
        in_range(
            errors,
            "spec.partitioning.minRowsToSplit",
            p.min_rows_to_split,
            1,
            i64::MAX,
        );
        in_range(
            errors,
            "spec.partitioning.rowsPerPartition",
            p.rows_per_partition,
            1,
            i64::MAX,
        );
        in_range(
            errors,
            "spec.partitioning.maxPartitionsPerTable",
            i64::from(p.max_partitions_per_table),
            1,
            1024,
        );
        in_range(
            errors,
            "spec.worker.backoffLimit",
            i64::from(self.worker.backoff_limit),
            0,
            100,
        );
        fault_errors(
            &self.timeouts,
            &self.retries,
            self.worker.active_deadline_seconds,
            errors,
        );
        self.online.collect_errors(self.source.mssql.is_some(), errors);
        self.cutover.collect_errors(self.online.enabled, errors);
        if let Some(image) = &self.worker.image
            && (image.is_empty() || image.chars().any(char::is_whitespace))
        {
            errors.push(FieldError::new(
                "spec.worker.image",
                "must be an image reference without spaces",
            ));
        }
        if let Some(sa) = &self.worker.service_account_name
            && !is_dns1123_subdomain(sa)
        {
            errors.push(FieldError::new(
                "spec.worker.serviceAccountName",
                "must be a DNS subdomain name",
            ));
        }
    }
}

/// The checks of `target.*.schema` and `target.*.schemaMap` admission cannot make: identifiers the
/// target engine accepts (not the worker's own `_mssqlpg`), one entry per source schema (compared
/// as the source engine compares names), and no entry for the source's `schema`, which
/// `target.*.schema` already places.
fn schema_map_errors(spec: &MigrationSpec, errors: &mut Vec<FieldError>) {
    for (engine, ep) in [
        ("mssql", spec.source.mssql.as_ref().map(|m| &m.schema_map)),
        ("postgres", spec.source.postgres.as_ref().map(|p| &p.schema_map)),
    ] {
        if ep.is_some_and(|m| !m.is_empty()) {
            errors.push(FieldError::new(
                format!("spec.source.{engine}.schemaMap"),
                "applies to the target only (where source schemas go); remove it from the source",
            ));
        }
    }
    let Some(target) = spec.target.get() else {
        return;
    };
    // The endpoint's own checks cover the rest of the name's rules.
    if target.schema().to_lowercase() == "_mssqlpg"
        && let Some(why) = bad_target_schema(target.engine(), target.schema())
    {
        errors.push(FieldError::new(
            format!("spec.target.{}.schema", target.engine()),
            why,
        ));
    }
    let path = format!("spec.target.{}.schemaMap", target.engine());
    // SQL Server's catalog compares schema names case-insensitively, PostgreSQL's exactly.
    let (source_schema, source_ci) = match spec.source.get() {
        Some(EndpointRef::Mssql(m)) => (m.schema.as_str(), true),
        Some(EndpointRef::Postgres(p)) => (p.schema.as_str(), false),
        None => ("", false),
    };
    let same = |a: &str, b: &str| {
        if source_ci {
            a.to_lowercase() == b.to_lowercase()
        } else {
            a == b
        }
    };
    let target_schema_field = format!("spec.target.{}.schema", target.engine());
    for (i, entry) in target.schema_map().iter().enumerate() {
        let from = format!("{path}[{i}].from");
        if entry.from.trim().is_empty() {
            errors.push(FieldError::new(&from, "must name a source schema"));
        } else if let Some(j) = target.schema_map()[..i]
            .iter()
            .position(|e| same(&e.from, &entry.from))
        {
            errors.push(FieldError::new(
                &from,
                format!(
                    "source schema {:?} is already mapped by {path}[{j}]; list each source schema once",
                    entry.from
                ),
            ));
        } else if same(&entry.from, source_schema) {
            errors.push(FieldError::new(
                &from,
                format!(
                    "{:?} is the source's `schema`, whose tables go to {target_schema_field}; set that \
                     instead of mapping it here",
                    entry.from
                ),
            ));
        }
        if let Some(why) = bad_target_schema(target.engine(), &entry.to) {
            errors.push(FieldError::new(format!("{path}[{i}].to"), why));
        }
    }
}

/// Why `name` cannot be a schema the worker creates tables in on `engine`, if it cannot.
pub fn bad_target_schema(engine: crate::endpoint::Engine, name: &str) -> Option<String> {
    use crate::endpoint::Engine;
    if name.trim().is_empty() {
        return Some("must name a target schema".into());
    }
    if name.contains('\0') {
        return Some("must not contain a NUL character".into());
    }
    let folded = name.to_lowercase();
    if folded == "_mssqlpg" {
        return Some(
            "_mssqlpg is the worker's own schema (its checkpoints and run state, compared case-insensitively); \
             choose another schema"
                .into(),
        );
    }
    match engine {
        Engine::Postgres => {
            if name.len() > 63 {
                Some(format!(
                    "{name:?} is longer than PostgreSQL's 63-byte limit: it would be truncated"
                ))
            } else if name.starts_with("pg_") {
                Some(format!(
                    "{name:?}: PostgreSQL reserves names starting with pg_ for system schemas"
                ))
            } else if name == "information_schema" {
                Some("information_schema is PostgreSQL's catalog schema".into())
            } else {
                None
            }
        }
        Engine::Mssql => {
            if name.chars().count() > 128 {
                Some(format!(
                    "{name:?} is longer than SQL Server's 128-character limit"
                ))
            } else if folded == "sys" || folded == "information_schema" {
                Some(format!("{name} is a SQL Server system schema"))
            } else {
                None
            }
        }
    }
}

fn endpoint<'a>(ep: &'a Endpoint, path: &str, errors: &mut Vec<FieldError>) -> Option<EndpointRef<'a>> {
    match (&ep.mssql, &ep.postgres) {
        (Some(m), None) => mssql(m, &format!("{path}.mssql"), errors),
        (None, Some(p)) => postgres(p, &format!("{path}.postgres"), errors),
        (Some(_), Some(_)) => {
            errors.push(FieldError::new(
                path,
                "set exactly one of mssql or postgres, not both",
            ));
            return None;
        }
        (None, None) => {
            errors.push(FieldError::new(path, "set exactly one of mssql or postgres"));
            return None;
        }
    }
    ep.get()
}

fn mssql(m: &MssqlEndpoint, path: &str, errors: &mut Vec<FieldError>) {
    common(
        path,
        &m.host,
        m.port,
        &m.database,
        &m.schema,
        &m.credentials_secret,
        errors,
    );
    if !(MIN_PACKET_SIZE..=32767).contains(&m.packet_size) {
        errors.push(FieldError::new(
            format!("{path}.packetSize"),
            "must be between 512 and 32767",
        ));
    }
    if let Some(ca) = &m.ca_secret {
        if !is_dns1123_subdomain(ca) {
            errors.push(FieldError::new(
                format!("{path}.caSecret"),
                "must be a Secret name (DNS subdomain)",
            ));
        }
        // One validates the certificate against the CA, the other skips validation: which was meant?
        if m.trust_server_certificate {
            errors.push(FieldError::new(
                format!("{path}.caSecret"),
                "cannot be combined with trustServerCertificate: true (which skips certificate validation)",
            ));
        }
    }
}

fn postgres(p: &PostgresEndpoint, path: &str, errors: &mut Vec<FieldError>) {
    common(
        path,
        &p.host,
        p.port,
        &p.database,
        &p.schema,
        &p.credentials_secret,
        errors,
    );
    // PostgreSQL truncates identifiers to 63 bytes; a longer name would silently address another object.
    for (field, value) in [("database", &p.database), ("schema", &p.schema)] {
        if value.len() > 63 {
            errors.push(FieldError::new(
                format!("{path}.{field}"),
                "longer than PostgreSQL's 63-byte limit",
            ));
        }
    }
    if let Some(ca) = &p.ca_secret
        && !is_dns1123_subdomain(ca)
    {
        errors.push(FieldError::new(
            format!("{path}.caSecret"),
            "must be a Secret name (DNS subdomain)",
        ));
    }
}

fn common(
    path: &str,
    host: &str,
    port: i32,
    database: &str,
    schema: &str,
    secret: &str,
    errors: &mut Vec<FieldError>,
) {
    if host.trim().is_empty() {
        errors.push(FieldError::new(format!("{path}.host"), "must not be empty"));
    } else if host.chars().any(|c| c.is_whitespace() || c == '/') {
        errors.push(FieldError::new(
            format!("{path}.host"),
            "must be a host name or IP address",
        ));
    }
    if !(1..=65535).contains(&port) {
        errors.push(FieldError::new(
            format!("{path}.port"),
            "must be between 1 and 65535",
        ));
    }
    if database.trim().is_empty() {
        errors.push(FieldError::new(format!("{path}.database"), "must not be empty"));
    }
    if schema.trim().is_empty() {
        errors.push(FieldError::new(format!("{path}.schema"), "must not be empty"));
    }
    if secret.is_empty() {
        errors.push(FieldError::new(
            format!("{path}.credentialsSecret"),
            "must name a Secret",
        ));
    } else if !is_dns1123_subdomain(secret) {
        errors.push(FieldError::new(
            format!("{path}.credentialsSecret"),
            "must be a Secret name (lower-case DNS subdomain)",
        ));
    }
}

/// The ranges admission checks, for local runs.
fn fault_errors(
    timeouts: &crate::faults::Timeouts,
    retries: &crate::faults::Retries,
    active_deadline_seconds: Option<i64>,
    errors: &mut Vec<FieldError>,
) {
    let t = timeouts;
    in_range(
        errors,
        "spec.timeouts.connectSeconds",
        i64::from(t.connect_seconds),
        1,
        3600,
    );
    in_range(
        errors,
        "spec.timeouts.stallSeconds",
        i64::from(t.stall_seconds),
        1,
        86400,
    );
    in_range(
        errors,
        "spec.timeouts.lockSeconds",
        i64::from(t.lock_seconds),
        1,
        86400,
    );
    let r = retries;
    in_range(errors, "spec.retries.attempts", i64::from(r.attempts), 1, 100);
    in_range(
        errors,
        "spec.retries.backoffSeconds",
        i64::from(r.backoff_seconds),
        0,
        3600,
    );
    in_range(
        errors,
        "spec.retries.maxBackoffSeconds",
        i64::from(r.max_backoff_seconds),
        0,
        3600,
    );
    if let Some(d) = active_deadline_seconds {
        in_range(errors, "spec.worker.activeDeadlineSeconds", d, 1, i64::MAX);
    }
}

/// `spec.chunkBytes` may not exceed this: a larger chunk only delays the commit that makes a
/// copy resumable, it makes nothing faster (bench/RESULTS.md, issue 18).
pub const MAX_CHUNK_BYTES: u64 = 1 << 40;

impl MigrationSpec {
    /// `spec.chunkBytes` in bytes, or the error naming the field.
    pub fn chunk_bytes(&self) -> Result<u64, FieldError> {
        let path = "spec.chunkBytes";
        let bytes = parse_bytes(&self.chunk_bytes.0).map_err(|e| FieldError::new(path, e))?;
        if bytes == 0 {
            Err(FieldError::new(path, "must be at least 1 byte"))
        } else if bytes > MAX_CHUNK_BYTES {
            Err(FieldError::new(path, "must be at most 1Ti"))
        } else {
            Ok(bytes)
        }
    }
}

fn is_dns1123_subdomain(name: &str) -> bool {
    name.len() <= 253 && name.split('.').all(|label| is_dns1123_label(label, 63))
}
