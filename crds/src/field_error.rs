//! A problem with one field of a spec, named by its path: what every validation returns.

/// One problem with a spec: the field path (`spec.source.mssql.port`) and what to do about it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct FieldError {
    pub path: String,
    pub message: String,
}

impl FieldError {
    pub(crate) fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            message: message.into(),
        }
    }
}

/// Join errors into one line for a condition message or a CLI error.
pub fn describe(errors: &[FieldError]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

pub(crate) fn in_range(errors: &mut Vec<FieldError>, path: &str, value: i64, min: i64, max: i64) {
    if value < min {
        errors.push(FieldError::new(path, format!("must be at least {min}")));
    } else if value > max {
        errors.push(FieldError::new(path, format!("must be at most {max}")));
    }
}
