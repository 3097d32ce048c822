//! An error and its causes as one line, each cause once; and the same without row values, for
//! what the cluster shows.
//!
//! Many of our errors put their cause in their own message ("reading X: {source}") and also return
//! it from `source()`, so printing the whole chain (anyhow's `{:#}`) repeated every cause.
//!
//! A task's `status.lastError`, the termination message and the Events made of it are readable by
//! anyone with the cluster's `view` role, who may not read the databases: [`status_text`] leaves
//! out the keys and values of rows ([`RowKey`], and the parts of the databases' own messages that
//! quote them). The worker's log keeps them, for who must find the row.

use std::cell::Cell;
use std::error::Error;
use std::fmt;

thread_local! {
    /// Set while [`status_text`] formats an error on this thread.
    static WITHHOLD: Cell<bool> = const { Cell::new(false) };
}

/// A row's key in an error message: shown in logs, left out by [`status_text`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowKey(pub String);

impl RowKey {
    /// A checkpoint's key (`42`, or `a|2024-01-01` for a composite key).
    pub fn of(key: &[crate::copy::checkpoint::KeyValue]) -> Self {
        use crate::copy::checkpoint::KeyValue;
        RowKey(
            key.iter()
                .map(|k| match k {
                    KeyValue::Int(i) => i.to_string(),
                    KeyValue::Str(s) | KeyValue::Uuid(s) | KeyValue::Date(s) | KeyValue::DateTime(s) => {
                        s.clone()
                    }
                    KeyValue::Decimal(unscaled, scale) => format!("{unscaled}e-{scale}"),
                })
                .collect::<Vec<_>>()
                .join("|"),
        )
    }
}

impl fmt::Display for RowKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if WITHHOLD.with(Cell::get) {
            f.write_str("(withheld: see the worker's log)")
        } else {
            f.write_str(&self.0)
        }
    }
}

/// [`error_text`] without the keys and values of rows: [`RowKey`]s are withheld, and so are the
/// parts of PostgreSQL's and SQL Server's messages that quote a row.
pub fn status_text(e: &(dyn Error + 'static)) -> String {
    struct Reset(bool);
    impl Drop for Reset {
        fn drop(&mut self) {
            WITHHOLD.with(|w| w.set(self.0));
        }
    }
    let _reset = Reset(WITHHOLD.with(|w| w.replace(true)));
    error_text(e)
}

/// `text` with the database errors of `e`'s chain as they print without row values. Done by each
/// [`error_text`] while [`status_text`] runs, so that an error that prints its cause's text rather
/// than returning it as a source (a task's failure) is covered too.
fn without_row_values(e: &(dyn Error + 'static), mut text: String) -> String {
    let mut next = Some(e);
    while let Some(cause) = next {
        if let Some((said, kept)) = server_text(cause)
            && said != kept
        {
            text = text.replace(&said, &kept);
        }
        next = cause.source();
    }
    text
}

/// A database's error as it prints, and as it prints without row values; `None` for others.
fn server_text(e: &(dyn Error + 'static)) -> Option<(String, String)> {
    if let Some(db) = e.downcast_ref::<tokio_postgres::error::DbError>() {
        return Some((db.to_string(), pg_without_values(db)));
    }
    let tds = e
        .downcast_ref::<tiberius::error::Error>()
        .or_else(|| e.downcast_ref::<Box<tiberius::error::Error>>().map(|b| &**b));
    match tds {
        Some(tiberius::error::Error::Server(t)) => {
            let said = t.message().to_string();
            let kept = mssql_without_values(t.code(), &said);
            Some((said, kept))
        }
        _ => None,
    }
}

/// PostgreSQL's DETAIL quotes the row ("Key (id)=(42) already exists", "Failing row contains
/// (...)"), and a data exception's message the value ("invalid input syntax for type integer:
/// \"x\""): those are left out; the condition, constraint, table and column stay.
fn pg_without_values(db: &tokio_postgres::error::DbError) -> String {
    let code = db.code().code();
    let mut out = format!("{}: ", db.severity());
    if code.starts_with("22") {
        // The message ends with the value after its last ": ".
        match db.message().rsplit_once(": ") {
            Some((head, _)) => out.push_str(&format!("{head}: (value withheld)")),
            None => out.push_str(db.message()),
        }
    } else {
        out.push_str(db.message());
    }
    if db.detail().is_some() {
        out.push_str("\nDETAIL: (withheld: it may quote a row; see the worker's log)");
    }
    if let Some(hint) = db.hint() {
        out.push_str(&format!("\nHINT: {hint}"));
    }
    out
}

/// SQL Server's messages that quote a row: the duplicate key (2627, 2601), a truncated value
/// (2628), a value that failed to convert (245, 241, 242).
fn mssql_without_values(code: u32, message: &str) -> String {
    let cut = |marker: &str| {
        message
            .find(marker)
            .map(|i| format!("{}{marker} (withheld: see the worker's log).", &message[..i]))
    };
    let kept = match code {
        2627 | 2601 => cut("The duplicate key value is"),
        2628 | 8152 => cut("Truncated value:"),
        245 | 241 | 242 => message.find(" value '").and_then(|i| {
            let rest = &message[i + " value '".len()..];
            rest.rfind("' to ")
                .map(|j| format!("{} value (withheld){}", &message[..i], &rest[j + 1..]))
        }),
        _ => None,
    };
    kept.unwrap_or_else(|| message.to_string())
}

/// `error: cause: deeper cause`, leaving out a cause whose text is already in the line.
pub fn error_text(e: &(dyn Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut next = e.source();
    while let Some(cause) = next {
        let text = cause.to_string();
        if !text.is_empty() && !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        next = cause.source();
    }
    if WITHHOLD.with(Cell::get) {
        out = without_row_values(e, out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("table dbo.T, row with key {key}, column c: too long")]
    struct RowError {
        key: RowKey,
    }

    #[test]
    fn status_text_withholds_a_row_key_that_the_log_keeps() {
        let e = anyhow::Error::new(RowError {
            key: RowKey("Id=4711".into()),
        })
        .context("copy task dbo.T");
        assert_eq!(
            error_text(e.as_ref()),
            "copy task dbo.T: table dbo.T, row with key Id=4711, column c: too long"
        );
        let shown = status_text(e.as_ref());
        assert!(!shown.contains("4711"), "{shown}");
        assert!(
            shown.contains("row with key (withheld: see the worker's log)"),
            "{shown}"
        );
        // Formatting afterwards shows the key again.
        assert!(error_text(e.as_ref()).contains("4711"));
    }

    #[test]
    fn a_checkpoint_key_as_text() {
        use crate::copy::checkpoint::KeyValue;
        assert_eq!(
            RowKey::of(&[KeyValue::Str("a".into()), KeyValue::Date("2024-01-02".into())]).0,
            "a|2024-01-02"
        );
        assert_eq!(RowKey::of(&[KeyValue::Decimal("12345".into(), 2)]).0, "12345e-2");
    }

    #[test]
    fn sql_server_messages_lose_the_values_they_quote() {
        assert_eq!(
            mssql_without_values(
                2627,
                "Violation of PRIMARY KEY constraint 'PK_T'. Cannot insert duplicate key in object 'dbo.T'. \
                 The duplicate key value is (4711)."
            ),
            "Violation of PRIMARY KEY constraint 'PK_T'. Cannot insert duplicate key in object 'dbo.T'. \
             The duplicate key value is (withheld: see the worker's log)."
        );
        assert_eq!(
            mssql_without_values(
                245,
                "Conversion failed when converting the nvarchar value 'secret' to data type int."
            ),
            "Conversion failed when converting the nvarchar value (withheld) to data type int."
        );
        assert_eq!(
            mssql_without_values(
                2628,
                "String or binary data would be truncated in table 'db.dbo.T', column 'c'. Truncated value: 'secr'."
            ),
            "String or binary data would be truncated in table 'db.dbo.T', column 'c'. \
             Truncated value: (withheld: see the worker's log)."
        );
        let plain = "Invalid object name 'dbo.X'.";
        assert_eq!(mssql_without_values(208, plain), plain);
    }

    #[derive(Debug, thiserror::Error)]
    #[error("reading t: {source}")]
    struct Outer {
        #[source]
        source: std::io::Error,
    }

    #[test]
    fn a_cause_in_the_message_is_not_repeated() {
        let e = Outer {
            source: std::io::Error::other("connection reset"),
        };
        assert_eq!(error_text(&e), "reading t: connection reset");
        let any = anyhow::Error::new(e).context("copy task dbo.T");
        assert_eq!(
            error_text(any.as_ref()),
            "copy task dbo.T: reading t: connection reset"
        );
    }
}
