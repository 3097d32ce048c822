//! TLS to PostgreSQL with libpq's `sslmode` meanings: `require` encrypts without checking the
//! certificate, `verify-ca` checks the chain, `verify-full` also the host name. Roots: the system
//! store plus an optional PEM file. tokio-postgres-rustls is the connector; what is written here is
//! the two certificate verifiers rustls does not have (none, and chain without host name).

use std::sync::Arc;
use tokio_postgres_rustls::MakeRustlsConnect;
use tokio_rustls::rustls::client::WebPkiServerVerifier;
use tokio_rustls::rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use tokio_rustls::rustls::crypto::{CryptoProvider, ring, verify_tls12_signature, verify_tls13_signature};
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use tokio_rustls::rustls::{
    ClientConfig, DigitallySignedStruct, Error as TlsError, RootCertStore, SignatureScheme,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verify {
    /// Encrypt only (libpq `require`, and `prefer` when the server offers TLS).
    None,
    /// Chain to a trusted root, any host name.
    Ca,
    /// Chain and host name.
    Full,
}

#[derive(Debug, thiserror::Error)]
pub enum TlsSetupError {
    #[error("reading CA certificates from {path}: {message}")]
    Ca { path: String, message: String },
    #[error("TLS setup: {0}")]
    Rustls(#[from] TlsError),
}

fn provider() -> Arc<CryptoProvider> {
    // Explicit: with several rustls providers compiled in there is no process default.
    CryptoProvider::get_default()
        .cloned()
        .unwrap_or_else(|| Arc::new(ring::default_provider()))
}

/// Accepts any certificate, but still checks the handshake signatures.
#[derive(Debug)]
struct NoVerify(Arc<CryptoProvider>);

impl ServerCertVerifier for NoVerify {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, TlsError> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, TlsError> {
        verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, TlsError> {
        verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// The chain must verify; a name mismatch is accepted (libpq `verify-ca`).
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, TlsError> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, name, ocsp, now)
        {
            Err(TlsError::InvalidCertificate(tokio_rustls::rustls::CertificateError::NotValidForName))
            | Err(TlsError::InvalidCertificate(
                tokio_rustls::rustls::CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, TlsError> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, TlsError> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// A tokio-postgres TLS connector (tokio-postgres-rustls, which also gives SCRAM channel binding)
/// checking the server's certificate as `verify` says.
pub fn connector(verify: Verify, ca_file: Option<&str>) -> Result<MakeRustlsConnect, TlsSetupError> {
    Ok(MakeRustlsConnect::new(client_config(verify, ca_file)?))
}

/// The rustls client settings of every TLS connection to PostgreSQL: the server's certificate
/// checked as `verify` says, against the system roots and `ca_file`.
pub fn client_config(verify: Verify, ca_file: Option<&str>) -> Result<ClientConfig, TlsSetupError> {
    let provider = provider();
    let builder =
        ClientConfig::builder_with_provider(provider.clone()).with_safe_default_protocol_versions()?;
    let config = if verify == Verify::None {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NoVerify(provider)))
            .with_no_client_auth()
    } else {
        let mut roots = RootCertStore::empty();
        for cert in rustls_native_certs::load_native_certs().certs {
            let _ = roots.add(cert);
        }
        if let Some(path) = ca_file {
            let certs = CertificateDer::pem_file_iter(path).map_err(|e| TlsSetupError::Ca {
                path: path.into(),
                message: e.to_string(),
            })?;
            for cert in certs {
                let cert = cert.map_err(|e| TlsSetupError::Ca {
                    path: path.into(),
                    message: e.to_string(),
                })?;
                roots.add(cert)?;
            }
        }
        let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
            .build()
            .map_err(|e| TlsSetupError::Rustls(TlsError::General(e.to_string())))?;
        if verify == Verify::Ca {
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(ChainOnly(webpki)))
                .with_no_client_auth()
        } else {
            builder.with_webpki_verifier(webpki).with_no_client_auth()
        }
    };
    Ok(config)
}
