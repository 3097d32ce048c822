//! Certificates for tests and benchmarks that run the server with TLS: a CA, and a server
//! certificate it signed for `localhost` and `127.0.0.1`, written as PEM files to a temporary
//! directory that lives as long as the [`TestCerts`].

use std::io;
use std::path::{Path, PathBuf};

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};

use crate::TlsFiles;

pub struct TestCerts {
    dir: tempfile::TempDir,
}

impl TestCerts {
    /// A new CA named `ca_name` (clients look a certificate's issuer up by name, so two sets
    /// with different names do not trust each other's certificates) and a server certificate.
    pub fn generate(ca_name: &str) -> io::Result<TestCerts> {
        let dir = tempfile::tempdir()?;
        let ca_key = KeyPair::generate().map_err(io::Error::other)?;
        let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(io::Error::other)?;
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name.push(DnType::CommonName, ca_name);
        ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca_cert = ca.self_signed(&ca_key).map_err(io::Error::other)?;
        let issuer = Issuer::new(ca, ca_key);
        let key = KeyPair::generate().map_err(io::Error::other)?;
        let mut leaf = CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])
            .map_err(io::Error::other)?;
        leaf.distinguished_name.push(DnType::CommonName, "localhost");
        let cert = leaf.signed_by(&key, &issuer).map_err(io::Error::other)?;
        std::fs::write(dir.path().join("ca.crt"), ca_cert.pem())?;
        std::fs::write(dir.path().join("server.crt"), cert.pem())?;
        std::fs::write(dir.path().join("server.key"), key.serialize_pem())?;
        Ok(TestCerts { dir })
    }

    /// The CA certificate (PEM), what a client is told to trust.
    pub fn ca(&self) -> PathBuf {
        self.dir.path().join("ca.crt")
    }

    /// The server's certificate and key, for [`crate::ServerConfig::tls`].
    pub fn server(&self) -> TlsFiles {
        TlsFiles {
            cert: self.dir.path().join("server.crt"),
            key: self.dir.path().join("server.key"),
        }
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}
