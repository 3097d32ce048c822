//! PostgreSQL `COPY ... (FORMAT binary)` encoding of generated rows.
//!
//! Written by hand rather than through `tokio_postgres::binary_copy`, which boxes every cell
//! as a `dyn ToSql` and checks its type per row; the generator's four value kinds map to three
//! fixed wire forms (int4, text, timestamp), so a direct encoder is short and much cheaper.

use bytes::{BufMut, BytesMut};

use crate::stackoverflow::Value;

/// `PGCOPY\n\377\r\n\0`, flags 0, no header extension.
const HEADER: &[u8] = b"PGCOPY\n\xff\r\n\0\0\0\0\0\0\0\0\0";

/// Microseconds between the Unix epoch and PostgreSQL's (2000-01-01).
const PG_EPOCH_OFFSET_US: i64 = 946_684_800_000_000;

pub fn write_header(buf: &mut BytesMut) {
    buf.put_slice(HEADER);
}

pub fn write_trailer(buf: &mut BytesMut) {
    buf.put_i16(-1);
}

/// Appends one tuple. Column types are implied by the values: the table definitions use
/// `integer`, `text`/`varchar` and `timestamp` only, and NULL is typeless on the wire.
pub fn write_row(buf: &mut BytesMut, row: &[Value]) {
    // Tables have at most 20 columns, far below the i16 field count limit.
    buf.put_i16(row.len() as i16);
    for value in row {
        match value {
            Value::Null => buf.put_i32(-1),
            Value::Int(v) => {
                buf.put_i32(4);
                buf.put_i32(*v);
            }
            Value::Text(s) => {
                // nvarchar(max) bodies are far below PostgreSQL's 1 GB field limit.
                buf.put_i32(s.len() as i32);
                buf.put_slice(s.as_bytes());
            }
            Value::DateTime(dt) => {
                buf.put_i32(8);
                buf.put_i64(dt.and_utc().timestamp_micros() - PG_EPOCH_OFFSET_US);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::NaiveDate;

    #[test]
    fn encodes_each_kind() {
        let dt = NaiveDate::from_ymd_opt(2000, 1, 1).and_then(|d| d.and_hms_milli_opt(0, 0, 1, 10));
        let Some(dt) = dt else { panic!("valid date") };
        let mut buf = BytesMut::new();
        write_row(
            &mut buf,
            &[
                Value::Int(-2),
                Value::Null,
                Value::Text("é".into()),
                Value::DateTime(dt),
            ],
        );
        let expected: Vec<u8> = [
            &4i16.to_be_bytes()[..],
            &4i32.to_be_bytes(),
            &(-2i32).to_be_bytes(),
            &(-1i32).to_be_bytes(),
            &2i32.to_be_bytes(),
            "é".as_bytes(),
            &8i32.to_be_bytes(),
            &1_010_000i64.to_be_bytes(),
        ]
        .concat();
        assert_eq!(&buf[..], &expected[..]);
    }
}
