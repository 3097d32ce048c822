#![allow(clippy::unwrap_used)]
//! `*.mssql.caSecret`: a Secret name, and not together with `trustServerCertificate`.

use mssql_pg_crds::*;

fn with_ca(ca: &str, trust_server_certificate: bool) -> Migration {
    let mut source = MssqlEndpoint::new("sql.example", "Orders", "mssql-creds");
    source.ca_secret = Some(ca.into());
    source.trust_server_certificate = trust_server_certificate;
    let mut m = Migration::new(
        "orders",
        MigrationSpec::new(
            Endpoint::mssql(source),
            Endpoint::postgres(PostgresEndpoint::new("pg.example", "orders", "pg-creds")),
        ),
    );
    m.metadata.namespace = Some("data".into());
    m
}

#[test]
fn a_ca_secret_is_accepted() {
    assert_eq!(with_ca("sql-ca", false).validate(), Ok(()));
}

#[test]
fn a_ca_secret_must_be_a_secret_name() {
    let err = with_ca("Not A Name", false).validate().unwrap_err();
    assert_eq!(err.len(), 1, "{err:?}");
    assert_eq!(err[0].path, "spec.source.mssql.caSecret");
}

#[test]
fn a_ca_secret_with_trust_server_certificate_is_refused() {
    let err = with_ca("sql-ca", true).validate().unwrap_err();
    assert_eq!(err.len(), 1, "{err:?}");
    assert_eq!(err[0].path, "spec.source.mssql.caSecret");
    assert!(err[0].message.contains("trustServerCertificate"), "{err:?}");
}

#[test]
fn the_ca_secret_round_trips_and_is_omitted_when_unset() {
    let m = with_ca("sql-ca", false);
    let yaml = serde_norway::to_string(&m.spec.source).unwrap();
    assert!(yaml.contains("caSecret: sql-ca"), "{yaml}");
    let back: Endpoint = serde_norway::from_str(&yaml).unwrap();
    assert_eq!(back, m.spec.source);
    let plain = Endpoint::mssql(MssqlEndpoint::new("h", "d", "s"));
    assert!(!serde_norway::to_string(&plain).unwrap().contains("caSecret"));
}
