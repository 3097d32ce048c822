//! Token encoders for the server→client token stream (all little-endian).

use tds_testserver_engine::{ColumnMeta, Value};

use super::type_info::WireType;
use super::values::{self, EncodeError, put_utf16};

pub const TOKEN_COLMETADATA: u8 = 0x81;
pub const TOKEN_ROW: u8 = 0xD1;
pub const TOKEN_NBCROW: u8 = 0xD2;
pub const TOKEN_DONE: u8 = 0xFD;
pub const TOKEN_DONEPROC: u8 = 0xFE;
pub const TOKEN_DONEINPROC: u8 = 0xFF;
pub const TOKEN_ERROR: u8 = 0xAA;
pub const TOKEN_INFO: u8 = 0xAB;
pub const TOKEN_LOGINACK: u8 = 0xAD;
pub const TOKEN_FEATUREEXTACK: u8 = 0xAE;
pub const TOKEN_ENVCHANGE: u8 = 0xE3;
pub const TOKEN_RETURNSTATUS: u8 = 0x79;

pub const DONE_MORE: u16 = 0x0001;
pub const DONE_ERROR: u16 = 0x0002;
pub const DONE_INXACT: u16 = 0x0004;
pub const DONE_COUNT: u16 = 0x0010;
pub const DONE_ATTN: u16 = 0x0020;

pub const SERVER_NAME: &str = "tds-testserver";

/// Writes a u16 length placeholder, runs `body`, then patches the length.
fn with_len16(out: &mut Vec<u8>, body: impl FnOnce(&mut Vec<u8>)) {
    let slot = out.len();
    out.extend_from_slice(&[0, 0]);
    body(out);
    let len = u16::try_from(out.len() - slot - 2).unwrap_or(u16::MAX);
    out[slot..slot + 2].copy_from_slice(&len.to_le_bytes());
}

/// B_VARCHAR: u8 character count + UTF-16LE (truncated to 255 code units).
pub fn b_varchar(out: &mut Vec<u8>, s: &str) {
    let units: Vec<u16> = s.encode_utf16().take(255).collect();
    out.push(units.len() as u8);
    units.iter().for_each(|u| out.extend_from_slice(&u.to_le_bytes()));
}

/// US_VARCHAR: u16 character count + UTF-16LE.
pub fn us_varchar(out: &mut Vec<u8>, s: &str) {
    let units: Vec<u16> = s.encode_utf16().take(65535).collect();
    out.extend_from_slice(&(units.len() as u16).to_le_bytes());
    units.iter().for_each(|u| out.extend_from_slice(&u.to_le_bytes()));
}

/// COLMETADATA for a result set; returns each column's wire type for encoding its rows.
/// `utf8`: the client asked for UTF-8 at login.
pub fn colmetadata(out: &mut Vec<u8>, columns: &[ColumnMeta], utf8: bool) -> Vec<WireType> {
    out.push(TOKEN_COLMETADATA);
    out.extend_from_slice(&(columns.len() as u16).to_le_bytes());
    let mut types = Vec::with_capacity(columns.len());
    for c in columns {
        let wt = WireType::for_column_in(c.ty, c.nullable, c.collation.for_client(utf8));
        out.extend_from_slice(&wt.user_type().to_le_bytes());
        let mut flags = 0u16;
        if c.nullable {
            flags |= 0x0001;
        }
        if c.updateable {
            flags |= 0x0008;
        }
        if c.identity {
            flags |= 0x0010;
        }
        if c.computed {
            flags |= 0x0020;
        }
        out.extend_from_slice(&flags.to_le_bytes());
        wt.write(out);
        if matches!(wt, WireType::Lob { .. }) {
            out.push(c.table_name.len() as u8);
            c.table_name.iter().for_each(|p| us_varchar(out, p));
        }
        b_varchar(out, &c.name);
        types.push(wt);
    }
    types
}

/// One row: NBCROW when at least an eighth of the values are NULL (or when a NULL sits in a
/// fixed-length column, which ROW cannot express), else ROW. On error `out` is unchanged.
pub fn row(out: &mut Vec<u8>, types: &[WireType], row: &[Value]) -> Result<(), EncodeError> {
    let start = out.len();
    let result = write_row(out, types, row);
    if result.is_err() {
        out.truncate(start);
    }
    result
}

fn write_row(out: &mut Vec<u8>, types: &[WireType], row: &[Value]) -> Result<(), EncodeError> {
    if row.len() != types.len() {
        return Err(EncodeError {
            value: format!("a row of {} values", row.len()),
            ty: types.first().cloned().unwrap_or(WireType::Null),
        });
    }
    let nulls = row.iter().filter(|v| v.is_null()).count();
    if nulls > 0 && (nulls * 8 >= row.len() || has_fixed_null(types, row)) {
        out.push(TOKEN_NBCROW);
        let bitmap_at = out.len();
        out.resize(bitmap_at + row.len().div_ceil(8), 0);
        for (i, (ty, v)) in types.iter().zip(row).enumerate() {
            if v.is_null() {
                out[bitmap_at + i / 8] |= 1 << (i % 8);
            } else {
                values::encode(out, ty, v)?;
            }
        }
    } else {
        out.push(TOKEN_ROW);
        for (ty, v) in types.iter().zip(row) {
            values::encode(out, ty, v)?;
        }
    }
    Ok(())
}

fn has_fixed_null(types: &[WireType], row: &[Value]) -> bool {
    types.iter().zip(row).any(|(t, v)| {
        v.is_null()
            && matches!(
                t,
                WireType::Int { n: false, .. }
                    | WireType::Bit { n: false }
                    | WireType::Float { n: false, .. }
                    | WireType::Money { n: false, .. }
                    | WireType::DateTime { n: false, .. }
            )
    })
}

/// DONE / DONEPROC / DONEINPROC.
pub fn done(out: &mut Vec<u8>, token: u8, status: u16, curcmd: u16, rows: u64) {
    out.push(token);
    out.extend_from_slice(&status.to_le_bytes());
    out.extend_from_slice(&curcmd.to_le_bytes());
    out.extend_from_slice(&rows.to_le_bytes());
}

/// ERROR (0xAA) or INFO (0xAB).
#[allow(clippy::too_many_arguments)]
pub fn message(out: &mut Vec<u8>, token: u8, number: i32, state: u8, class: u8, text: &str, line: u32) {
    out.push(token);
    with_len16(out, |out| {
        out.extend_from_slice(&number.to_le_bytes());
        out.push(state);
        out.push(class);
        us_varchar(out, text);
        b_varchar(out, SERVER_NAME);
        b_varchar(out, "");
        out.extend_from_slice(&line.to_le_bytes());
    });
}

/// ENVCHANGE with B_VARCHAR new/old values (database 1, language 2, packet size 4).
pub fn env_string(out: &mut Vec<u8>, ty: u8, new: &str, old: &str) {
    out.push(TOKEN_ENVCHANGE);
    with_len16(out, |out| {
        out.push(ty);
        b_varchar(out, new);
        b_varchar(out, old);
    });
}

/// ENVCHANGE with B_VARBYTE new/old values (collation 7, transactions 8/9/10).
pub fn env_bytes(out: &mut Vec<u8>, ty: u8, new: &[u8], old: &[u8]) {
    out.push(TOKEN_ENVCHANGE);
    with_len16(out, |out| {
        out.push(ty);
        out.push(new.len() as u8);
        out.extend_from_slice(new);
        out.push(old.len() as u8);
        out.extend_from_slice(old);
    });
}

/// LOGINACK: TDS 7.4, "Microsoft SQL Server" 16.0.4000.
pub fn loginack(out: &mut Vec<u8>) {
    out.push(TOKEN_LOGINACK);
    with_len16(out, |out| {
        out.push(1);
        out.extend_from_slice(&[0x74, 0x00, 0x00, 0x04]);
        b_varchar(out, "Microsoft SQL Server");
        out.extend_from_slice(&[0x10, 0x00, 0x0F, 0xA0]);
    });
}

pub fn return_status(out: &mut Vec<u8>, status: i32) {
    out.push(TOKEN_RETURNSTATUS);
    out.extend_from_slice(&status.to_le_bytes());
}

/// Used by tests and the UTF-16 helpers' callers.
pub fn utf16(s: &str) -> Vec<u8> {
    let mut v = Vec::new();
    put_utf16(&mut v, s);
    v
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use tds_testserver_engine::SqlType;

    #[test]
    fn golden_done_and_returnstatus() {
        let mut out = Vec::new();
        done(&mut out, TOKEN_DONEINPROC, DONE_MORE | DONE_COUNT, 0xC1, 3);
        return_status(&mut out, 0);
        done(&mut out, TOKEN_DONEPROC, 0, 0xE0, 0);
        assert_eq!(
            out,
            [
                0xFF, 0x11, 0, 0xC1, 0, 3, 0, 0, 0, 0, 0, 0, 0, //
                0x79, 0, 0, 0, 0, //
                0xFE, 0, 0, 0xE0, 0, 0, 0, 0, 0, 0, 0, 0, 0
            ]
        );
    }

    #[test]
    fn golden_envchange_and_loginack() {
        let mut out = Vec::new();
        env_string(&mut out, 4, "4096", "4096");
        assert_eq!(
            out,
            [
                0xE3, 0x13, 0, 4, 4, b'4', 0, b'0', 0, b'9', 0, b'6', 0, 4, b'4', 0, b'0', 0, b'9', 0, b'6',
                0
            ]
        );
        out.clear();
        env_bytes(&mut out, 7, &[9, 4, 0xD0, 0, 0x34], &[]);
        assert_eq!(out, [0xE3, 8, 0, 7, 5, 9, 4, 0xD0, 0, 0x34, 0]);
        out.clear();
        env_bytes(&mut out, 8, &1u64.to_le_bytes(), &[]);
        assert_eq!(out, [0xE3, 11, 0, 8, 8, 1, 0, 0, 0, 0, 0, 0, 0, 0]);
        out.clear();
        loginack(&mut out);
        assert_eq!(&out[..8], [0xAD, 0x32, 0x00, 0x01, 0x74, 0x00, 0x00, 0x04]);
        assert_eq!(out[8], 20);
        assert_eq!(&out[out.len() - 4..], [0x10, 0x00, 0x0F, 0xA0]);
        // pytds computes the program name length as len - 10.
        assert_eq!(usize::from(u16::from_le_bytes([out[1], out[2]])) - 10, 40);
    }

    #[test]
    fn golden_error_token() {
        let mut out = Vec::new();
        message(&mut out, TOKEN_ERROR, 208, 1, 16, "x", 1);
        let mut want = vec![0xAA, 0, 0, 0xD0, 0, 0, 0, 1, 16, 1, 0, b'x', 0, 14];
        want.extend(utf16(SERVER_NAME));
        want.extend([0, 1, 0, 0, 0]);
        let len = (want.len() - 3) as u16;
        want[1..3].copy_from_slice(&len.to_le_bytes());
        assert_eq!(out, want);
    }

    #[test]
    fn colmetadata_flags_and_nbcrow_choice() {
        let mut id = ColumnMeta::expr("id", SqlType::Int);
        id.nullable = false;
        id.identity = true;
        let mut name = ColumnMeta::expr("n", SqlType::NVarChar { len: Some(5) });
        name.updateable = true;
        let mut out = Vec::new();
        let types = colmetadata(&mut out, &[id, name], false);
        assert_eq!(
            out,
            [
                0x81, 2, 0, //
                0, 0, 0, 0, 0x10, 0, 0x38, 2, b'i', 0, b'd', 0, //
                0, 0, 0, 0, 0x09, 0, 0xE7, 10, 0, 9, 4, 0xD0, 0, 0x34, 1, b'n', 0
            ]
        );
        out.clear();
        row(&mut out, &types, &[Value::Int(1), Value::String("a".into())]).unwrap();
        assert_eq!(out, [0xD1, 1, 0, 0, 0, 2, 0, b'a', 0]);
        out.clear();
        row(&mut out, &types, &[Value::Int(1), Value::Null]).unwrap();
        assert_eq!(out, [0xD2, 0b10, 1, 0, 0, 0]);
        out.clear();
        assert!(row(&mut out, &types, &[Value::Int(1), Value::Int(2)]).is_err());
        assert!(out.is_empty());
    }

    #[test]
    fn text_columns_carry_table_name_parts() {
        let mut c = ColumnMeta::expr("t", SqlType::Text);
        c.table_name = vec!["dbo".into(), "x".into()];
        let mut out = Vec::new();
        colmetadata(&mut out, &[c], false);
        let tail = [2, 3, 0, b'd', 0, b'b', 0, b'o', 0, 1, 0, b'x', 0, 1, b't', 0];
        assert_eq!(&out[out.len() - tail.len()..], tail);
    }
}
