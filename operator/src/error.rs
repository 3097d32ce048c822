//! Reconcile errors.

/// Why a reconcile did not complete; every variant names the object it concerns.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{kind} {name}: {source}")]
    Kube {
        kind: &'static str,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("Migration {0} lacks metadata.{1}; it cannot own Jobs")]
    MissingObjectKey(String, &'static str),
    #[error("finalizer of Migration {name}: {message}")]
    Finalizer { name: String, message: String },
    #[error("Migration {name}: {refusal}")]
    NotAllowed {
        name: String,
        refusal: crate::tenancy::Refusal,
    },
    /// Not an error: the finalizer waits for a Job that cleans up after the Migration.
    #[error("Migration {name}: waiting for {what}")]
    Waiting { name: String, what: String },
    #[error("serializing {what}: {source}")]
    Serialize {
        what: String,
        #[source]
        source: serde_json::Error,
    },
}

impl Error {
    /// Short label for the reconcile-errors metric.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::Kube { .. } => "kube",
            Error::MissingObjectKey(..) => "missing_key",
            Error::Finalizer { .. } => "finalizer",
            Error::Serialize { .. } => "serialize",
            Error::NotAllowed { .. } => "not_allowed",
            Error::Waiting { .. } => "waiting",
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
