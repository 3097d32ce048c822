//! An error and its causes as one line, each cause once.
//!
//! Many of our errors put their cause in their own message ("reading X: {source}") and also return
//! it from `source()`, so printing the whole chain (anyhow's `{:#}`) repeated every cause.

use std::error::Error;

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
    out
}

#[cfg(test)]
mod tests {
    use super::*;

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
