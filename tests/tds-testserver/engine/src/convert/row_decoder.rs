//! SQLite's current result row as `Value`s, in one buffer reused from row to row.
//!
//! This is the read path of every streamed SELECT, so it is written for the common cases: integer,
//! bit and float cells are converted inline into their slot, and text cells are copied into the
//! slot's existing `String` (kept aside across NULLs), so a row costs no allocation. A call into
//! [`to_value`] per cell, returning a `Result<Value, _>` through memory, cost about a fifth of the
//! server's time streaming a three-integer table; it stays the path for everything else
//! (decimals, dates, GUIDs, binary, out-of-range values and their errors).

use super::values::to_value;
use crate::error::SqlError;
use crate::types::{SqlType, Value};
use rusqlite::types::ValueRef;

pub(crate) struct RowDecoder {
    types: Vec<SqlType>,
    values: Vec<Value>,
    /// A text column's buffer while its slot holds NULL.
    spare: Vec<String>,
}

impl RowDecoder {
    pub(crate) fn new(types: Vec<SqlType>) -> Self {
        let n = types.len();
        RowDecoder {
            types,
            values: vec![Value::Null; n],
            spare: vec![String::new(); n],
        }
    }

    /// Decodes `row` (which has at least as many columns as there are types).
    pub(crate) fn decode(&mut self, row: &rusqlite::Row<'_>) -> Result<&[Value], DecodeError> {
        for (i, (&ty, slot)) in self.types.iter().zip(self.values.iter_mut()).enumerate() {
            let cell = row.get_ref(i).map_err(DecodeError::Sqlite)?;
            if !set_inline(slot, &mut self.spare[i], cell, ty) {
                *slot = to_value(cell, ty).map_err(DecodeError::Sql)?;
            }
        }
        Ok(&self.values)
    }
}

pub(crate) enum DecodeError {
    Sqlite(rusqlite::Error),
    Sql(SqlError),
}

/// Stores `cell` into `slot` when it is one of the common cases; false leaves it to `to_value`.
#[inline]
fn set_inline(slot: &mut Value, spare: &mut String, cell: ValueRef<'_>, ty: SqlType) -> bool {
    match (ty, cell) {
        (_, ValueRef::Null) => {
            if let Value::String(s) = std::mem::replace(slot, Value::Null) {
                *spare = s;
            }
        }
        (SqlType::Int, ValueRef::Integer(i)) => match i32::try_from(i) {
            Ok(v) => *slot = Value::Int(v),
            Err(_) => return false,
        },
        (SqlType::BigInt, ValueRef::Integer(i)) => *slot = Value::BigInt(i),
        (SqlType::SmallInt, ValueRef::Integer(i)) => match i16::try_from(i) {
            Ok(v) => *slot = Value::SmallInt(v),
            Err(_) => return false,
        },
        (SqlType::TinyInt, ValueRef::Integer(i)) => match u8::try_from(i) {
            Ok(v) => *slot = Value::TinyInt(v),
            Err(_) => return false,
        },
        (SqlType::Bit, ValueRef::Integer(i)) => *slot = Value::Bit(i != 0),
        (SqlType::Float, ValueRef::Real(f)) => *slot = Value::Float(f),
        (
            SqlType::Char { .. }
            | SqlType::VarChar { .. }
            | SqlType::NChar { .. }
            | SqlType::NVarChar { .. }
            | SqlType::Text
            | SqlType::NText
            | SqlType::Xml,
            ValueRef::Text(t),
        ) => {
            // Invalid UTF-8 (a CAST of binary) takes `to_value`'s lossy path.
            let Ok(text) = std::str::from_utf8(t) else {
                return false;
            };
            match slot {
                Value::String(s) => {
                    s.clear();
                    s.push_str(text);
                }
                _ => {
                    let mut s = std::mem::take(spare);
                    s.clear();
                    s.push_str(text);
                    *slot = Value::String(s);
                }
            }
        }
        _ => return false,
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_one(types: Vec<SqlType>, sql: &str) -> Vec<Vec<Value>> {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        let mut stmt = conn.prepare(sql).unwrap();
        let mut rows = stmt.query([]).unwrap();
        let mut decoder = RowDecoder::new(types);
        let mut out = Vec::new();
        while let Some(row) = rows.next().unwrap() {
            match decoder.decode(row) {
                Ok(values) => out.push(values.to_vec()),
                Err(_) => panic!("decode failed"),
            }
        }
        out
    }

    #[test]
    fn inline_cases_match_to_value() {
        let types = vec![
            SqlType::Int,
            SqlType::BigInt,
            SqlType::SmallInt,
            SqlType::TinyInt,
            SqlType::Bit,
            SqlType::Float,
            SqlType::NVarChar { len: Some(10) },
        ];
        let rows = decode_one(
            types.clone(),
            "SELECT -2147483648, 9223372036854775807, -32768, 255, 2, 1.5, 'Zürich' \
             UNION ALL SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL \
             UNION ALL SELECT 7, 8, 9, 0, 0, -0.25, ''",
        );
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        let expected: Vec<Vec<Value>> = [
            "SELECT -2147483648, 9223372036854775807, -32768, 255, 2, 1.5, 'Zürich'",
            "SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL",
            "SELECT 7, 8, 9, 0, 0, -0.25, ''",
        ]
        .iter()
        .map(|sql| {
            conn.query_row(sql, [], |r| {
                Ok(types
                    .iter()
                    .enumerate()
                    .map(|(i, &ty)| to_value(r.get_ref(i).unwrap(), ty).unwrap())
                    .collect::<Vec<_>>())
            })
            .unwrap()
        })
        .collect();
        assert_eq!(rows, expected);
        assert_eq!(rows[0][6], Value::String("Zürich".into()));
        assert_eq!(rows[2][6], Value::String(String::new()));
    }

    #[test]
    fn text_after_null_reuses_the_buffer_and_values_do_not_leak_between_rows() {
        let rows = decode_one(
            vec![SqlType::VarChar { len: None }],
            "SELECT 'a long first value' UNION ALL SELECT NULL UNION ALL SELECT 'b'",
        );
        assert_eq!(
            rows,
            vec![
                vec![Value::String("a long first value".into())],
                vec![Value::Null],
                vec![Value::String("b".into())],
            ]
        );
    }

    #[test]
    fn out_of_range_integers_get_to_value_s_error() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        let mut stmt = conn.prepare("SELECT 2147483648").unwrap();
        let mut rows = stmt.query([]).unwrap();
        let row = rows.next().unwrap().unwrap();
        let mut decoder = RowDecoder::new(vec![SqlType::Int]);
        match decoder.decode(row) {
            Err(DecodeError::Sql(e)) => assert_eq!(e.number, 8115, "{e:?}"),
            _ => panic!("expected an arithmetic overflow"),
        }
    }
}
