//! RPC requests (packet type 0x03): sp_executesql by ProcID 10 or by name.

use tds_testserver_engine::{Param, Value};

use super::decl::{Declared, parse_declarations};
use super::reader::{DecodeError, Reader};
use super::type_info::WireType;
use super::values;

const SP_EXECUTESQL: u16 = 10;

/// A decoded RPC request.
#[derive(Debug, Clone, PartialEq)]
pub enum RpcRequest {
    ExecuteSql {
        sql: String,
        params: Vec<Param>,
    },
    /// Any other procedure; the server answers that it does not exist.
    Other {
        name: String,
    },
}

struct RawParam {
    name: String,
    wire: WireType,
    value: Value,
}

/// Skips ALL_HEADERS (a u32 total length that includes itself).
pub fn skip_all_headers(r: &mut Reader<'_>) -> Result<(), DecodeError> {
    let total = r.u32("ALL_HEADERS length")? as usize;
    if total < 4 {
        return Err(DecodeError::Invalid(format!("ALL_HEADERS length {total}")));
    }
    r.skip(total - 4, "ALL_HEADERS")
}

fn is_executesql_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase().replace(['[', ']'], "");
    let last = lower.rsplit('.').next().unwrap_or("");
    last == "sp_executesql"
}

fn proc_name(id: u16) -> String {
    match id {
        1 => "sp_cursor",
        2 => "sp_cursoropen",
        11 => "sp_prepare",
        12 => "sp_execute",
        13 => "sp_prepexec",
        15 => "sp_unprepare",
        _ => "",
    }
    .to_string()
}

pub fn decode(payload: Vec<u8>) -> Result<RpcRequest, DecodeError> {
    let mut r = Reader::new(payload);
    skip_all_headers(&mut r)?;
    let name_len = r.u16("procedure name length")?;
    let (executesql, name) = if name_len == 0xFFFF {
        let id = r.u16("procedure id")?;
        (
            id == SP_EXECUTESQL,
            if id == SP_EXECUTESQL {
                "sp_executesql".into()
            } else {
                proc_name(id)
            },
        )
    } else {
        let name = r.utf16(usize::from(name_len), "procedure name")?;
        (is_executesql_name(&name), name)
    };
    r.u16("option flags")?;
    if !executesql {
        return Ok(RpcRequest::Other { name });
    }
    let mut raw = Vec::new();
    while !r.at_end()? {
        // 0x80/0xFF separate batched RPCs; only one RPC per message is supported.
        if matches!(r.peek_u8("parameter")?, 0x80 | 0xFF) {
            return Err(DecodeError::Invalid(
                "batched RPC requests are not supported".into(),
            ));
        }
        let name = r.b_varchar("parameter name")?;
        r.u8("parameter status")?;
        let wire = WireType::read(&mut r)?;
        let value = values::decode(&mut r, &wire, false)?;
        raw.push(RawParam { name, wire, value });
    }
    // stmt and params are positional, whatever the client names them (pytds sends "").
    let mut raw = raw.into_iter();
    let sql = match raw.next().map(|p| p.value) {
        Some(Value::String(s)) => s,
        _ => {
            return Err(DecodeError::Invalid(
                "sp_executesql needs the statement as its first parameter".into(),
            ));
        }
    };
    let decls = match raw.next().map(|p| p.value) {
        Some(Value::String(s)) => parse_declarations(&s)
            .map_err(|bad| DecodeError::Invalid(format!("cannot parse the parameter declaration '{bad}'")))?,
        Some(Value::Null) | None => Vec::new(),
        Some(_) => {
            return Err(DecodeError::Invalid(
                "sp_executesql's declarations must be a string".into(),
            ));
        }
    };
    let params = raw
        .enumerate()
        .map(|(i, p)| bind(i, p, &decls))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(RpcRequest::ExecuteSql { sql, params })
}

/// Matches a value to its declaration: by name when the client named it, else by position.
fn bind(i: usize, p: RawParam, decls: &[Declared]) -> Result<Param, DecodeError> {
    let decl = if p.name.is_empty() {
        decls.get(i)
    } else {
        decls
            .iter()
            .find(|d| d.name.eq_ignore_ascii_case(&p.name))
            .or_else(|| decls.get(i))
    };
    match decl {
        Some(d) => Ok(Param {
            name: d.name.clone(),
            ty: d.ty,
            value: p.value,
        }),
        None if p.wire == WireType::Null => Err(DecodeError::Invalid(format!(
            "parameter {} is NULL and has no declared type",
            p.name
        ))),
        None => Ok(Param {
            name: if p.name.is_empty() {
                format!("@P{}", i + 1)
            } else {
                p.name
            },
            ty: p.wire.sql_type(),
            value: p.value,
        }),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::wire::tokens::{b_varchar, utf16};
    use tds_testserver_engine::SqlType;

    pub fn all_headers() -> Vec<u8> {
        let mut v = vec![22, 0, 0, 0, 18, 0, 0, 0, 2, 0];
        v.extend_from_slice(&[0; 8]);
        v.extend_from_slice(&[1, 0, 0, 0]);
        v
    }

    fn nvarchar_param(out: &mut Vec<u8>, name: &str, text: &str) {
        b_varchar(out, name);
        out.push(0);
        out.extend_from_slice(&[0xE7, 0x40, 0x1F, 0, 0, 0, 0, 0]);
        let b = utf16(text);
        out.extend_from_slice(&(b.len() as u16).to_le_bytes());
        out.extend_from_slice(&b);
    }

    /// The bytes tiberius sends for `query("SELECT @P1, ...", &[&123.45 numeric, &None::<&str>, &7i32])`.
    #[test]
    fn decodes_tiberius_sp_executesql() {
        let mut p = all_headers();
        p.extend_from_slice(&[0xFF, 0xFF, 10, 0, 0, 0]);
        nvarchar_param(&mut p, "stmt", "SELECT @P1, @P2, @P3");
        nvarchar_param(&mut p, "params", "@P1 numeric(5,2),@P2 nvarchar(4000),@P3 int");
        b_varchar(&mut p, "@P1");
        p.extend_from_slice(&[0, 0x6C, 0x05, 0x05, 0x02, 0x05, 0x01, 0x39, 0x30, 0x00, 0x00]);
        b_varchar(&mut p, "@P2");
        p.extend_from_slice(&[0, 0x1F]);
        b_varchar(&mut p, "@P3");
        p.extend_from_slice(&[0, 0x26, 4, 4, 7, 0, 0, 0]);
        let RpcRequest::ExecuteSql { sql, params } = decode(p).unwrap() else {
            panic!()
        };
        assert_eq!(sql, "SELECT @P1, @P2, @P3");
        assert_eq!(
            params,
            vec![
                Param {
                    name: "@P1".into(),
                    ty: SqlType::Numeric {
                        precision: 5,
                        scale: 2
                    },
                    value: Value::Decimal {
                        mantissa: 12345,
                        scale: 2
                    }
                },
                Param {
                    name: "@P2".into(),
                    ty: SqlType::NVarChar { len: Some(4000) },
                    value: Value::Null
                },
                Param {
                    name: "@P3".into(),
                    ty: SqlType::Int,
                    value: Value::Int(7)
                },
            ]
        );
    }

    /// pytds: proc by name, unnamed stmt/params, upper-case declarations, PLP strings.
    #[test]
    fn decodes_pytds_style_by_name_with_plp() {
        let mut p = all_headers();
        let name = utf16("sp_executesql");
        p.extend_from_slice(&((name.len() / 2) as u16).to_le_bytes());
        p.extend_from_slice(&name);
        p.extend_from_slice(&[0, 0]);
        nvarchar_param(&mut p, "", "SELECT @P1");
        nvarchar_param(&mut p, "", "@P1 NVARCHAR(MAX)");
        b_varchar(&mut p, "@P1");
        p.extend_from_slice(&[0, 0xE7, 0xFF, 0xFF, 9, 4, 0xD0, 0, 0x34]);
        p.extend_from_slice(&u64::MAX.wrapping_sub(1).to_le_bytes());
        p.extend_from_slice(&[2, 0, 0, 0, b'h', 0, 2, 0, 0, 0, b'i', 0, 0, 0, 0, 0]);
        let RpcRequest::ExecuteSql { params, .. } = decode(p).unwrap() else {
            panic!()
        };
        assert_eq!(params[0].ty, SqlType::NVarChar { len: None });
        assert_eq!(params[0].value, Value::String("hi".into()));
    }

    #[test]
    fn other_procedures_and_bad_declarations() {
        let mut p = all_headers();
        p.extend_from_slice(&[0xFF, 0xFF, 11, 0, 0, 0]);
        assert_eq!(
            decode(p).unwrap(),
            RpcRequest::Other {
                name: "sp_prepare".into()
            }
        );
        let mut p = all_headers();
        p.extend_from_slice(&[0xFF, 0xFF, 10, 0, 0, 0]);
        nvarchar_param(&mut p, "stmt", "SELECT @P1");
        nvarchar_param(&mut p, "params", "@P1 blob");
        assert!(decode(p).is_err());
    }
}
