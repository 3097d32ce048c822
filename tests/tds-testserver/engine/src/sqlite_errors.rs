//! SQLite's messages for statements SQL Server also rejects, reworded as SQL Server's errors.
//! A client must see only what SQL Server would say: SQLite's own text names its functions
//! and can quote the SQL the engine translated to. What has no equivalent here becomes
//! [`no_plan`], and SQLite's text goes to the server log only.

use crate::error::SqlError;

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
