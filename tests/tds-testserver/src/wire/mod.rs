//! The TDS 7.4 wire protocol: framing, tokens, types and request decoding. No I/O policy here
//! beyond reading and writing packets; the connection loop lives in `session`.

pub mod bulk;
pub mod decl;
pub mod login;
pub mod packet;
pub mod prelogin;
pub mod reader;
pub mod rpc;
pub mod tokens;
pub mod transaction;
pub mod type_info;
pub mod values;
