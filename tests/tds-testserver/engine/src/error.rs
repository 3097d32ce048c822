//! SQL Server errors as the engine raises them: number, state, severity class and message, as
//! sent in an ERROR token.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqlError {
    /// SQL Server's error number (102 syntax, 208 invalid object, 2627 duplicate key, ...).
    pub number: i32,
    pub state: u8,
    /// Severity: 10 and below are informational, 11-16 user errors, 20+ fatal.
    pub class: u8,
    pub message: String,
    /// 1-based line of the batch the error refers to.
    pub line: u32,
}

impl SqlError {
    pub fn new(number: i32, class: u8, message: impl Into<String>) -> Self {
        SqlError {
            number,
            state: 1,
            class,
            message: message.into(),
            line: 1,
        }
    }
}

impl fmt::Display for SqlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Msg {}, Level {}, State {}, Line {}: {}",
            self.number, self.class, self.state, self.line, self.message
        )
    }
}

impl std::error::Error for SqlError {}
