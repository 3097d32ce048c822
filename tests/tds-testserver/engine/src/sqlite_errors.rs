//! SQLite's messages for statements SQL Server also rejects, reworded as SQL Server's errors.
//! A client must see only what SQL Server would say: SQLite's own text names its functions
//! and can quote the SQL the engine translated to. What has no equivalent here becomes
//! [`no_plan`], and SQLite's text goes to the server log only.

use crate::error::SqlError;

/// SQLite's error to SQL Server's, for errors not tied to a constraint of a known table.
pub fn map_sqlite(e: &rusqlite::Error) -> SqlError {
    if let rusqlite::Error::SqliteFailure(f, _) = e
        && f.extended_code == rusqlite::ffi::SQLITE_BUSY_SNAPSHOT
    {
        return update_conflict();
    }
    let msg = e.to_string();
    if let Some(err) = decode_error(&msg) {
        return err;
    }
    if let Some(rest) = msg.strip_prefix("no such table: ") {
        return SqlError::new(
            208,
            16,
            format!("Invalid object name '{}'.", rest.trim_start_matches("temp.")),
        );
    }
    if let Some(rest) = msg.strip_prefix("no such column: ") {
        return SqlError::new(
            207,
            16,
            format!(
                "Invalid column name '{}'.",
                rest.rsplit('.').next().unwrap_or(rest)
            ),
        );
    }
    if let Some(rest) = msg.strip_prefix("ambiguous column name: ") {
        return SqlError::new(
            209,
            16,
            format!(
                "Ambiguous column name '{}'.",
                rest.rsplit('.').next().unwrap_or(rest)
            ),
        );
    }
    if msg.contains("database is locked") || msg.contains("database table is locked") {
        return SqlError::new(1222, 16, "Lock request time out period exceeded.");
    }
    // SQLite's messages can quote the SQL the engine translated to; a client sees only what
    // SQL Server would say.
    if msg.contains("syntax error") {
        let near = msg
            .split("near \"")
            .nth(1)
            .and_then(|r| r.split('"').next())
            .unwrap_or("");
        return SqlError::new(102, 15, format!("Incorrect syntax near '{near}'."));
    }
    if msg.contains("FOREIGN KEY constraint failed") {
        return SqlError::new(547, 16, "The statement conflicted with a FOREIGN KEY constraint.");
    }
    if msg.contains("interrupted") {
        return SqlError::new(3617, 25, "Query was cancelled.");
    }
    if let Some(e) = map_message(&msg) {
        return e;
    }
    // What SQLite said can quote the translated SQL: it goes to the server log only.
    tracing::warn!(sqlite = %msg, "SQLite error without a SQL Server equivalent");
    no_plan()
}

const PREFIX: &str = "\u{1}MSSQL|";

#[derive(Debug)]
struct UdfError(String);
impl std::fmt::Display for UdfError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for UdfError {}

/// A SQL Server error raised inside a SQLite function (a conversion, a divide by zero),
/// carried through SQLite in its error message; [`map_sqlite`] turns it back.
pub fn encode_error(e: &SqlError) -> rusqlite::Error {
    rusqlite::Error::UserFunctionError(Box::new(UdfError(format!(
        "{PREFIX}{}|{}|{}",
        e.number, e.class, e.message
    ))))
}

/// A SQL Server error that a UDF raised, if this SQLite message carries one.
pub fn decode_error(msg: &str) -> Option<SqlError> {
    let rest = &msg[msg.find(PREFIX)? + PREFIX.len()..];
    let mut it = rest.splitn(3, '|');
    let number = it.next()?.parse().ok()?;
    let class = it.next()?.parse().ok()?;
    Some(SqlError::new(number, class, it.next()?.to_string()))
}

/// SQL Server's error for a statement the engine could not run, without SQLite's words.
pub fn no_plan() -> SqlError {
    SqlError::new(
        8624,
        16,
        "Internal Query Processor Error: The query processor could not produce a query plan. For more information, contact Customer Support Services.",
    )
}

/// The argument counts of built-in functions (min, max), for error 174/189.
fn arity(name: &str) -> Option<(u8, u8)> {
    Some(match name {
        "abs" | "ascii" | "ceiling" | "char" | "datalength" | "day" | "exp" | "floor" | "isnumeric"
        | "len" | "lower" | "ltrim" | "month" | "nchar" | "reverse" | "rtrim" | "sign" | "space" | "sqrt"
        | "square" | "unicode" | "upper" | "year" | "sin" | "cos" | "tan" | "radians" | "degrees"
        | "quotename" => (1, 1),
        "isnull" | "nullif" | "left" | "right" | "power" | "replicate" | "datepart" | "datename" | "atn2"
        | "difference" => (2, 2),
        "dateadd" | "datediff" | "replace" | "substring" | "datediff_big" => (3, 3),
        "stuff" => (4, 4),
        "round" | "charindex" | "log" => (2, 3),
        "getdate" | "getutcdate" | "sysdatetime" | "newid" | "pi" | "rand" => (0, 0),
        _ => return None,
    })
}

pub fn map_message(msg: &str) -> Option<SqlError> {
    if msg.contains("do not have the same number of result columns") {
        return Some(SqlError::new(
            205,
            16,
            "All queries combined using a UNION, INTERSECT or EXCEPT operator must have an equal number of expressions in their target lists.",
        ));
    }
    if msg.starts_with("sub-select returns") || msg.contains("row value misused") {
        return Some(SqlError::new(
            116,
            16,
            "Only one expression can be specified in the select list when the subquery is not introduced with EXISTS.",
        ));
    }
    if msg.contains("integer overflow") {
        return Some(SqlError::new(
            8115,
            16,
            "Arithmetic overflow error converting expression to data type bigint.",
        ));
    }
    if let Some(rest) = msg.strip_prefix("wrong number of arguments to function ") {
        let name = rest.split('(').next().unwrap_or("").to_ascii_lowercase();
        let (min, max) = arity(&name)?;
        return Some(if min == max {
            SqlError::new(
                174,
                15,
                format!("The {name} function requires {min} argument(s)."),
            )
        } else {
            SqlError::new(
                189,
                15,
                format!("The {name} function requires {min} to {max} arguments."),
            )
        });
    }
    if msg.contains("too many levels of trigger recursion") || msg.contains("Expression tree is too large") {
        return Some(SqlError::new(
            191,
            15,
            "Some part of your SQL statement is nested too deeply. Rewrite the query or break it up into smaller queries.",
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::map_message;

    #[test]
    fn sqlite_words_become_sql_server_errors() {
        let n = |m: &str| map_message(m).map(|e| (e.number, e.message));
        assert_eq!(
            n("wrong number of arguments to function ABS()"),
            Some((174, "The abs function requires 1 argument(s).".to_string()))
        );
        assert_eq!(
            n("wrong number of arguments to function round()").map(|e| e.0),
            Some(189)
        );
        assert_eq!(n("wrong number of arguments to function tsql_cast()"), None);
        assert_eq!(
            n("SELECTs to the left and right of UNION do not have the same number of result columns")
                .map(|e| e.0),
            Some(205)
        );
        assert_eq!(
            n("sub-select returns 2 columns - expected 1").map(|e| e.0),
            Some(116)
        );
    }
}

/// Error 3960: a SNAPSHOT transaction wrote after another transaction committed since its
/// snapshot began. SQLite's snapshot is the whole database, so the test server cannot tell
/// which row (or table) changed: it refuses the write whenever anything was committed since,
/// where SQL Server refuses only when the same row changed.
pub fn update_conflict() -> SqlError {
    let mut e = SqlError::new(
        3960,
        16,
        "Snapshot isolation transaction aborted due to update conflict. You cannot use snapshot isolation to access a table directly or indirectly in this database to update, delete, or insert a row that may have been modified or deleted by another transaction (the test server cannot tell which row changed since the snapshot began). Retry the transaction or change the isolation level for the update/delete statement.",
    );
    e.state = 2;
    e
}
