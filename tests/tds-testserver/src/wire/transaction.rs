//! Transaction-manager requests (packet type 0x0E).

use tds_testserver_engine::TransactionRequest;

use super::reader::{DecodeError, Reader};
use super::rpc::skip_all_headers;

/// A decoded request. A named rollback (to a savepoint) has no TM form in the engine's API, so
/// it is returned as the equivalent T-SQL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TmRequest {
    Engine(TransactionRequest),
    Sql(String),
}

fn quote(name: &str) -> String {
    format!("[{}]", name.replace(']', "]]"))
}

pub fn decode(payload: Vec<u8>) -> Result<TmRequest, DecodeError> {
    let mut r = Reader::new(payload);
    skip_all_headers(&mut r)?;
    let ty = r.u16("request type")?;
    let req = match ty {
        5 => {
            r.u8("isolation level")?;
            let name = r.b_varchar("transaction name")?;
            TransactionRequest::Begin {
                name: Some(name).filter(|n| !n.is_empty()),
            }
        }
        7 | 8 => {
            let name = r.b_varchar("transaction name")?;
            let begin_new = !r.at_end()? && r.u8("flags")? & 0x01 != 0;
            if ty == 8 && !name.is_empty() {
                return Ok(TmRequest::Sql(format!("ROLLBACK TRANSACTION {}", quote(&name))));
            }
            if ty == 7 {
                TransactionRequest::Commit { begin_new }
            } else {
                TransactionRequest::Rollback { begin_new }
            }
        }
        9 => TransactionRequest::Save {
            name: r.b_varchar("savepoint name")?,
        },
        other => {
            return Err(DecodeError::Invalid(format!(
                "unsupported transaction manager request {other}"
            )));
        }
    };
    Ok(TmRequest::Engine(req))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::wire::rpc::tests::all_headers;
    use crate::wire::tokens::b_varchar;

    fn req(body: &[u8]) -> TmRequest {
        let mut p = all_headers();
        p.extend_from_slice(body);
        decode(p).unwrap()
    }

    #[test]
    fn decodes_every_request() {
        assert_eq!(
            req(&[5, 0, 0, 0]),
            TmRequest::Engine(TransactionRequest::Begin { name: None })
        );
        assert_eq!(
            req(&[7, 0, 0, 0]),
            TmRequest::Engine(TransactionRequest::Commit { begin_new: false })
        );
        // pytds: commit and begin a new transaction.
        assert_eq!(
            req(&[7, 0, 0, 1]),
            TmRequest::Engine(TransactionRequest::Commit { begin_new: true })
        );
        assert_eq!(
            req(&[8, 0, 0, 0]),
            TmRequest::Engine(TransactionRequest::Rollback { begin_new: false })
        );
        let mut save = vec![9, 0];
        b_varchar(&mut save, "sp1");
        assert_eq!(
            req(&save),
            TmRequest::Engine(TransactionRequest::Save { name: "sp1".into() })
        );
        let mut rb = vec![8, 0];
        b_varchar(&mut rb, "sp1");
        rb.push(0);
        assert_eq!(req(&rb), TmRequest::Sql("ROLLBACK TRANSACTION [sp1]".into()));
    }
}
