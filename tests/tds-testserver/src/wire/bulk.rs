//! BULK_LOAD (packet type 0x07): the client's COLMETADATA, then ROW tokens, with or without a
//! trailing DONE (freebcp sends none). Decoded from a streaming reader row by row.

use tds_testserver_engine::{ColumnMeta, Value};

use super::reader::{DecodeError, Reader};
use super::type_info::WireType;
use super::values;

/// Reads the COLMETADATA token that starts a bulk load.
pub fn read_columns(r: &mut Reader<'_>) -> Result<(Vec<ColumnMeta>, Vec<WireType>), DecodeError> {
    let tok = r.u8("bulk COLMETADATA")?;
    if tok != 0x81 {
        return Err(DecodeError::Invalid(format!(
            "a bulk load must start with COLMETADATA, not 0x{tok:02X}"
        )));
    }
    let count = r.u16("column count")?;
    let mut columns = Vec::with_capacity(usize::from(count));
    let mut types = Vec::with_capacity(usize::from(count));
    for _ in 0..count {
        r.u32("user type")?;
        let flags = r.u16("column flags")?;
        let wire = WireType::read(r)?;
        let mut table_name = Vec::new();
        if matches!(wire, WireType::Lob { .. }) {
            // Unlike server→client metadata, clients send one US_VARCHAR without NumParts.
            let t = r.us_varchar("table name")?;
            if !t.is_empty() {
                table_name.push(t);
            }
        }
        let name = r.b_varchar("column name")?;
        columns.push(ColumnMeta {
            name,
            ty: wire.sql_type(),
            nullable: flags & 0x0001 != 0,
            identity: flags & 0x0010 != 0,
            computed: flags & 0x0020 != 0,
            updateable: flags & 0x000C != 0,
            table_name,
            collation: tds_testserver_engine::DEFAULT_COLLATION,
        });
        types.push(wire);
    }
    Ok((columns, types))
}

/// A bulk row being decoded: its values, and buffers kept from row to row so that decoding
/// allocates nothing for most rows (the values' strings are reused too).
#[derive(Debug, Default)]
pub struct BulkRow {
    pub values: Vec<Value>,
    bitmap: Vec<u8>,
    plp: Vec<u8>,
}

/// Reads the next row into `row`; `false` once the rows end (DONE or end of message).
pub fn next_row(r: &mut Reader<'_>, types: &[WireType], row: &mut BulkRow) -> Result<bool, DecodeError> {
    if r.at_end()? {
        row.values.clear();
        return Ok(false);
    }
    row.values.resize(types.len(), Value::Null);
    match r.u8("bulk token")? {
        0xD1 => {
            for (t, slot) in types.iter().zip(row.values.iter_mut()) {
                values::decode_into(r, t, true, slot, &mut row.plp)?;
            }
        }
        0xD2 => {
            row.bitmap.clear();
            row.bitmap
                .extend_from_slice(r.bytes(types.len().div_ceil(8), "null bitmap")?);
            for (i, (t, slot)) in types.iter().zip(row.values.iter_mut()).enumerate() {
                if row.bitmap[i / 8] & (1 << (i % 8)) != 0 {
                    *slot = Value::Null;
                } else {
                    values::decode_into(r, t, true, slot, &mut row.plp)?;
                }
            }
        }
        0xFD => {
            r.skip(12, "DONE")?;
            row.values.clear();
            return Ok(false);
        }
        other => {
            return Err(DecodeError::Invalid(format!(
                "unexpected token 0x{other:02X} in a bulk load"
            )));
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::wire::tokens::{b_varchar, us_varchar};
    use tds_testserver_engine::SqlType;

    fn metadata() -> Vec<u8> {
        let mut p = vec![0x81, 3, 0];
        // id int NOT NULL (fixed), updateable
        p.extend_from_slice(&[0, 0, 0, 0, 0x08, 0, 0x38]);
        b_varchar(&mut p, "id");
        // name nvarchar(50) NULL
        p.extend_from_slice(&[0, 0, 0, 0, 0x09, 0, 0xE7, 100, 0, 9, 4, 0xD0, 0, 0x34]);
        b_varchar(&mut p, "name");
        // notes text NULL, table name without NumParts
        p.extend_from_slice(&[
            0, 0, 0, 0, 0x09, 0, 0x23, 0xFF, 0xFF, 0xFF, 0x7F, 9, 4, 0xD0, 0, 0x34,
        ]);
        us_varchar(&mut p, "dbo.t");
        b_varchar(&mut p, "notes");
        p
    }

    fn row1() -> Vec<u8> {
        let mut p = vec![0xD1, 5, 0, 0, 0, 2, 0, b'x', 0, 16];
        p.extend_from_slice(&[0; 24]);
        p.extend_from_slice(&[2, 0, 0, 0, b'h', 0xE9]);
        p
    }

    #[test]
    fn rows_with_trailing_done_across_packets() {
        let mut msg = metadata();
        msg.extend(row1());
        msg.extend_from_slice(&[0xD1, 6, 0, 0, 0, 0xFF, 0xFF, 0]);
        msg.extend_from_slice(&[0xFD, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        // Deliver in 7-byte packets.
        let mut chunks: Vec<Vec<u8>> = msg.chunks(7).map(<[u8]>::to_vec).collect();
        let first = chunks.remove(0);
        let mut it = chunks.into_iter();
        let mut refill = move || Ok(it.next());
        let mut r = Reader::streaming(first, &mut refill);
        let (cols, types) = read_columns(&mut r).unwrap();
        assert_eq!(cols[0].ty, SqlType::Int);
        assert!(!cols[0].nullable && cols[0].updateable);
        assert_eq!(cols[1].ty, SqlType::NVarChar { len: Some(50) });
        assert_eq!(cols[2].table_name, vec!["dbo.t".to_string()]);
        let mut row = BulkRow::default();
        assert!(next_row(&mut r, &types, &mut row).unwrap());
        assert_eq!(
            row.values,
            vec![
                Value::Int(5),
                Value::String("x".into()),
                Value::String("hé".into())
            ]
        );
        assert!(next_row(&mut r, &types, &mut row).unwrap());
        assert_eq!(row.values, vec![Value::Int(6), Value::Null, Value::Null]);
        assert!(!next_row(&mut r, &types, &mut row).unwrap());
    }

    /// Decoding reuses each value's string: a short value after a long one, a NULL between
    /// two values, ASCII after non-ASCII and a PLP value split mid-character all come out
    /// exactly as sent.
    #[test]
    fn reused_strings_hold_exactly_each_rows_values() {
        let mut msg = vec![0x81, 2, 0];
        // name nvarchar(50) NULL
        msg.extend_from_slice(&[0, 0, 0, 0, 0x09, 0, 0xE7, 100, 0, 9, 4, 0xD0, 0, 0x34]);
        b_varchar(&mut msg, "name");
        // note nvarchar(max) NULL
        msg.extend_from_slice(&[0, 0, 0, 0, 0x09, 0, 0xE7, 0xFF, 0xFF, 9, 4, 0xD0, 0, 0x34]);
        b_varchar(&mut msg, "note");
        let utf16 = |s: &str| -> Vec<u8> { s.encode_utf16().flat_map(u16::to_le_bytes).collect() };
        let sized = |msg: &mut Vec<u8>, s: Option<&str>| match s {
            Some(s) => {
                let b = utf16(s);
                msg.extend_from_slice(&(b.len() as u16).to_le_bytes());
                msg.extend(b);
            }
            None => msg.extend_from_slice(&[0xFF, 0xFF]),
        };
        let plp = |msg: &mut Vec<u8>, s: Option<&str>| match s {
            Some(s) => {
                let b = utf16(s);
                msg.extend_from_slice(&(b.len() as u64).to_le_bytes());
                // Two chunks, the first ending inside a UTF-16 unit.
                let cut = (b.len() / 2) | 1;
                for part in [&b[..cut], &b[cut..]] {
                    msg.extend_from_slice(&(part.len() as u32).to_le_bytes());
                    msg.extend_from_slice(part);
                }
                msg.extend_from_slice(&[0, 0, 0, 0]);
            }
            None => msg.extend_from_slice(&[0xFF; 8]),
        };
        let rows = [
            (
                Some("Ærø and Łódź, 東京"),
                Some("a long note: smörgåsbord 🎉 done"),
            ),
            (Some("x"), None),
            (None, Some("z")),
            (Some(""), Some("plain ascii")),
        ];
        for (name, note) in rows {
            msg.push(0xD1);
            sized(&mut msg, name);
            plp(&mut msg, note);
        }
        let mut r = Reader::new(msg);
        let (_, types) = read_columns(&mut r).unwrap();
        let mut row = BulkRow::default();
        let value = |s: Option<&str>| s.map_or(Value::Null, |s| Value::String(s.into()));
        for (name, note) in rows {
            assert!(next_row(&mut r, &types, &mut row).unwrap());
            assert_eq!(row.values, vec![value(name), value(note)]);
        }
        assert!(!next_row(&mut r, &types, &mut row).unwrap());
        // A lone surrogate is invalid UTF-16, whatever the reused string held.
        let mut s = String::from("left over");
        assert!(!crate::wire::reader::utf16_into(
            &mut s,
            &[0x00, 0xD8, 0x41, 0x00]
        ));
        assert!(!crate::wire::reader::utf16_into(&mut s, &[0x41]));
    }

    #[test]
    fn rows_without_done_end_at_end_of_message() {
        let mut msg = metadata();
        msg.extend(row1());
        let mut r = Reader::new(msg);
        let (_, types) = read_columns(&mut r).unwrap();
        let mut row = BulkRow::default();
        assert!(next_row(&mut r, &types, &mut row).unwrap());
        assert!(!next_row(&mut r, &types, &mut row).unwrap());
    }

    #[test]
    fn a_truncated_row_is_an_error() {
        let mut msg = metadata();
        msg.extend_from_slice(&[0xD1, 5, 0]);
        let mut r = Reader::new(msg);
        let (_, types) = read_columns(&mut r).unwrap();
        assert!(next_row(&mut r, &types, &mut BulkRow::default()).is_err());
    }
}
