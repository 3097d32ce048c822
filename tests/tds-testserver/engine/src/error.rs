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
    /// Messages SQL Server sends right after this one for the same statement (1505 is
    /// followed by 1750 when a constraint's index cannot be built); same line.
    pub followed_by: Vec<SqlError>,
}

impl SqlError {
    pub fn new(number: i32, class: u8, message: impl Into<String>) -> Self {
        SqlError {
            number,
            state: 1,
            class,
            message: message.into(),
            line: 1,
            followed_by: Vec::new(),
        }
    }

    /// The same error with `next` sent after it.
    pub fn then(mut self, next: SqlError) -> Self {
        self.followed_by.push(next);
        self
    }

    /// Sets the line of this message and of those that follow it.
    pub fn at_line(&mut self, line: u32) {
        self.line = line;
        for f in &mut self.followed_by {
            f.at_line(line);
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

/// Error 208, an object that does not exist (or a view of a name the test server lacks).
pub fn invalid_object(name: &str) -> SqlError {
    SqlError::new(208, 16, format!("Invalid object name '{name}'."))
}

/// Error 102, T-SQL the parser (or the test server) does not take, near `near`.
pub fn syntax_error(near: &str) -> SqlError {
    SqlError::new(102, 15, format!("Incorrect syntax near '{near}'."))
}
