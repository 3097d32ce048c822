//! TYPE_INFO: how a column or parameter type looks on the wire, in both directions.
//!
//! [`WireType`] is the decoded form: it says exactly how values are laid out. Server→client it
//! is derived from a [`SqlType`] the way SQL Server chooses (fixed types for NOT NULL columns,
//! N-types for nullable ones); client→server it is parsed from the bytes the client sent.

use tds_testserver_engine::{Collation, SqlType, WireCollation};

use super::reader::{DecodeError, Reader};

/// SQL_Latin1_General_CP1_CI_AS.
pub const COLLATION: [u8; 5] = [0x09, 0x04, 0xD0, 0x00, 0x34];

/// Max byte length sent for (max) types and used as the PLP marker.
const MAX_LEN: u16 = 0xFFFF;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StrKind {
    /// UTF-16LE (nchar/nvarchar).
    Unicode,
    /// Bytes of a code page (char/varchar/text), with the collation that names it.
    Ansi(WireCollation),
    Binary,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WireType {
    /// tinyint/smallint/int/bigint: `n` = the nullable INTN form with a length byte.
    Int {
        size: u8,
        n: bool,
    },
    Bit {
        n: bool,
    },
    Float {
        size: u8,
        n: bool,
    },
    Money {
        size: u8,
        n: bool,
    },
    /// datetime (size 8) and smalldatetime (size 4).
    DateTime {
        size: u8,
        n: bool,
    },
    Decimal {
        numeric: bool,
        precision: u8,
        scale: u8,
        size: u8,
    },
    Date,
    Time {
        scale: u8,
    },
    DateTime2 {
        scale: u8,
    },
    DateTimeOffset {
        scale: u8,
    },
    Guid,
    /// (n)char/(n)varchar/binary/varbinary with a u16 length; `max_len` is in bytes.
    Sized {
        kind: StrKind,
        fixed: bool,
        max_len: u16,
    },
    /// The (max) forms: values are PLP.
    Plp {
        kind: StrKind,
    },
    Xml,
    /// text/ntext/image: values carry a text pointer.
    Lob {
        kind: StrKind,
    },
    /// rowversion: binary(8) with user type 0x50.
    RowVersion,
    Variant,
    /// NULLTYPE (0x1F), an RPC parameter that is NULL; the type comes from the declaration.
    Null,
}

fn decimal_size(precision: u8) -> u8 {
    match precision {
        0..=9 => 5,
        10..=19 => 9,
        20..=28 => 13,
        _ => 17,
    }
}

fn bytes_len(chars: u16, unit: u16) -> u16 {
    chars.saturating_mul(unit).min(MAX_LEN - 1)
}

impl WireType {
    /// The form SQL Server uses for a result column of type `ty` in the default collation.
    pub fn for_column(ty: SqlType, nullable: bool) -> WireType {
        WireType::for_column_in(ty, nullable, WireCollation::DEFAULT)
    }

    /// The form SQL Server uses for a result column of type `ty`; a character column's values
    /// are in `coll`.
    pub fn for_column_in(ty: SqlType, nullable: bool, coll: WireCollation) -> WireType {
        use StrKind::{Binary, Unicode};
        let ansi = StrKind::Ansi(coll);
        let n = nullable;
        match ty {
            SqlType::Bit => WireType::Bit { n },
            SqlType::TinyInt => WireType::Int { size: 1, n },
            SqlType::SmallInt => WireType::Int { size: 2, n },
            SqlType::Int => WireType::Int { size: 4, n },
            SqlType::BigInt => WireType::Int { size: 8, n },
            SqlType::Real => WireType::Float { size: 4, n },
            SqlType::Float => WireType::Float { size: 8, n },
            SqlType::Money => WireType::Money { size: 8, n },
            SqlType::SmallMoney => WireType::Money { size: 4, n },
            SqlType::DateTime => WireType::DateTime { size: 8, n },
            SqlType::SmallDateTime => WireType::DateTime { size: 4, n },
            SqlType::Decimal { precision, scale } => WireType::Decimal {
                numeric: false,
                precision,
                scale,
                size: decimal_size(precision),
            },
            SqlType::Numeric { precision, scale } => WireType::Decimal {
                numeric: true,
                precision,
                scale,
                size: decimal_size(precision),
            },
            SqlType::Date => WireType::Date,
            SqlType::Time { scale } => WireType::Time { scale: scale.min(7) },
            SqlType::DateTime2 { scale } => WireType::DateTime2 { scale: scale.min(7) },
            SqlType::DateTimeOffset { scale } => WireType::DateTimeOffset { scale: scale.min(7) },
            SqlType::UniqueIdentifier => WireType::Guid,
            SqlType::Char { len } => WireType::Sized {
                kind: ansi,
                fixed: true,
                max_len: bytes_len(len, 1),
            },
            SqlType::NChar { len } => WireType::Sized {
                kind: Unicode,
                fixed: true,
                max_len: bytes_len(len, 2),
            },
            SqlType::Binary { len } => WireType::Sized {
                kind: Binary,
                fixed: true,
                max_len: bytes_len(len, 1),
            },
            SqlType::VarChar { len: Some(len) } => WireType::Sized {
                kind: ansi,
                fixed: false,
                max_len: bytes_len(len, 1),
            },
            SqlType::NVarChar { len: Some(len) } => WireType::Sized {
                kind: Unicode,
                fixed: false,
                max_len: bytes_len(len, 2),
            },
            SqlType::VarBinary { len: Some(len) } => WireType::Sized {
                kind: Binary,
                fixed: false,
                max_len: bytes_len(len, 1),
            },
            SqlType::VarChar { len: None } => WireType::Plp { kind: ansi },
            SqlType::NVarChar { len: None } => WireType::Plp { kind: Unicode },
            SqlType::VarBinary { len: None } => WireType::Plp { kind: Binary },
            SqlType::Xml => WireType::Xml,
            SqlType::Text => WireType::Lob { kind: ansi },
            SqlType::NText => WireType::Lob { kind: Unicode },
            SqlType::Image => WireType::Lob { kind: Binary },
            SqlType::RowVersion => WireType::RowVersion,
            SqlType::SqlVariant => WireType::Variant,
        }
    }

    /// COLMETADATA's UserType field.
    pub fn user_type(&self) -> u32 {
        if *self == WireType::RowVersion { 0x50 } else { 0 }
    }

    /// Appends TYPE_INFO (without the text/ntext/image table name, which only COLMETADATA has).
    pub fn write(&self, out: &mut Vec<u8>) {
        match *self {
            WireType::Int { size, n: true } => out.extend_from_slice(&[0x26, size]),
            WireType::Int { size, n: false } => out.push(match size {
                1 => 0x30,
                2 => 0x34,
                4 => 0x38,
                _ => 0x7F,
            }),
            WireType::Bit { n: true } => out.extend_from_slice(&[0x68, 1]),
            WireType::Bit { n: false } => out.push(0x32),
            WireType::Float { size, n: true } => out.extend_from_slice(&[0x6D, size]),
            WireType::Float { size, n: false } => out.push(if size == 4 { 0x3B } else { 0x3E }),
            WireType::Money { size, n: true } => out.extend_from_slice(&[0x6E, size]),
            WireType::Money { size, n: false } => out.push(if size == 4 { 0x7A } else { 0x3C }),
            WireType::DateTime { size, n: true } => out.extend_from_slice(&[0x6F, size]),
            WireType::DateTime { size, n: false } => out.push(if size == 4 { 0x3A } else { 0x3D }),
            WireType::Decimal {
                numeric,
                precision,
                scale,
                size,
            } => out.extend_from_slice(&[if numeric { 0x6C } else { 0x6A }, size, precision, scale]),
            WireType::Date => out.push(0x28),
            WireType::Time { scale } => out.extend_from_slice(&[0x29, scale]),
            WireType::DateTime2 { scale } => out.extend_from_slice(&[0x2A, scale]),
            WireType::DateTimeOffset { scale } => out.extend_from_slice(&[0x2B, scale]),
            WireType::Guid => out.extend_from_slice(&[0x24, 0x10]),
            WireType::Sized { kind, fixed, max_len } => {
                out.push(sized_token(kind, fixed));
                out.extend_from_slice(&max_len.to_le_bytes());
                kind.write_collation(out);
            }
            WireType::Plp { kind } => {
                out.push(sized_token(kind, false));
                out.extend_from_slice(&MAX_LEN.to_le_bytes());
                kind.write_collation(out);
            }
            WireType::Xml => out.extend_from_slice(&[0xF1, 0x00]),
            WireType::Lob { kind } => {
                let (tok, len): (u8, u32) = match kind {
                    StrKind::Ansi(_) => (0x23, 0x7FFF_FFFF),
                    StrKind::Unicode => (0x63, 0x7FFF_FFFE),
                    StrKind::Binary => (0x22, 0x7FFF_FFFF),
                };
                out.push(tok);
                out.extend_from_slice(&len.to_le_bytes());
                kind.write_collation(out);
            }
            WireType::RowVersion => out.extend_from_slice(&[0xAD, 0x08, 0x00]),
            WireType::Variant => {
                out.push(0x62);
                out.extend_from_slice(&8016u32.to_le_bytes());
            }
            WireType::Null => out.push(0x1F),
        }
    }

    /// Parses a TYPE_INFO sent by a client (RPC parameter or bulk-load COLMETADATA).
    pub fn read(r: &mut Reader<'_>) -> Result<WireType, DecodeError> {
        use StrKind::*;
        const W: &str = "TYPE_INFO";
        let tok = r.u8(W)?;
        let t = match tok {
            0x1F => WireType::Null,
            0x30 => WireType::Int { size: 1, n: false },
            0x34 => WireType::Int { size: 2, n: false },
            0x38 => WireType::Int { size: 4, n: false },
            0x7F => WireType::Int { size: 8, n: false },
            0x32 => WireType::Bit { n: false },
            0x3B => WireType::Float { size: 4, n: false },
            0x3E => WireType::Float { size: 8, n: false },
            0x7A => WireType::Money { size: 4, n: false },
            0x3C => WireType::Money { size: 8, n: false },
            0x3A => WireType::DateTime { size: 4, n: false },
            0x3D => WireType::DateTime { size: 8, n: false },
            0x26 => match r.u8(W)? {
                size @ (1 | 2 | 4 | 8) => WireType::Int { size, n: true },
                s => return Err(invalid(format!("INTN length {s}"))),
            },
            0x68 => {
                r.u8(W)?;
                WireType::Bit { n: true }
            }
            0x6D => match r.u8(W)? {
                size @ (4 | 8) => WireType::Float { size, n: true },
                s => return Err(invalid(format!("FLTN length {s}"))),
            },
            0x6E => match r.u8(W)? {
                size @ (4 | 8) => WireType::Money { size, n: true },
                s => return Err(invalid(format!("MONEYN length {s}"))),
            },
            0x6F => match r.u8(W)? {
                size @ (4 | 8) => WireType::DateTime { size, n: true },
                s => return Err(invalid(format!("DATETIMEN length {s}"))),
            },
            0x6A | 0x6C | 0x37 | 0x3F => {
                let size = r.u8(W)?;
                let precision = r.u8(W)?;
                let scale = r.u8(W)?;
                if !(1..=38).contains(&precision) || scale > precision || !(2..=17).contains(&size) {
                    return Err(invalid(format!(
                        "decimal({precision},{scale}) with length {size}"
                    )));
                }
                WireType::Decimal {
                    numeric: matches!(tok, 0x6C | 0x3F),
                    precision,
                    scale,
                    size,
                }
            }
            0x28 => WireType::Date,
            0x29 => WireType::Time { scale: scale(r)? },
            0x2A => WireType::DateTime2 { scale: scale(r)? },
            0x2B => WireType::DateTimeOffset { scale: scale(r)? },
            0x24 => {
                r.u8(W)?;
                WireType::Guid
            }
            0xE7 | 0xEF | 0xA7 | 0xAF | 0xA5 | 0xAD => {
                let max_len = r.u16(W)?;
                let kind = match tok {
                    0xE7 | 0xEF => {
                        r.skip(5, "collation")?;
                        Unicode
                    }
                    0xA7 | 0xAF => Ansi(read_collation(r)?),
                    _ => Binary,
                };
                if max_len == MAX_LEN {
                    WireType::Plp { kind }
                } else {
                    WireType::Sized {
                        kind,
                        fixed: matches!(tok, 0xEF | 0xAF | 0xAD),
                        max_len,
                    }
                }
            }
            0x23 | 0x63 | 0x22 => {
                r.u32(W)?;
                let kind = match tok {
                    0x23 => Ansi(read_collation(r)?),
                    0x63 => {
                        r.skip(5, "collation")?;
                        Unicode
                    }
                    _ => Binary,
                };
                WireType::Lob { kind }
            }
            0xF1 => {
                // An XML schema collection reference (database, owner, collection) may follow.
                if r.u8(W)? != 0 {
                    r.b_varchar("xml schema database")?;
                    r.b_varchar("xml schema owner")?;
                    r.us_varchar("xml schema collection")?;
                }
                WireType::Xml
            }
            0x62 => {
                r.u32(W)?;
                WireType::Variant
            }
            other => return Err(invalid(format!("unsupported TYPE_INFO type 0x{other:02X}"))),
        };
        Ok(t)
    }

    /// The SQL type a client-declared wire type stands for (bulk-load columns, untyped params).
    pub fn sql_type(&self) -> SqlType {
        use StrKind::*;
        match *self {
            WireType::Int { size: 1, .. } => SqlType::TinyInt,
            WireType::Int { size: 2, .. } => SqlType::SmallInt,
            WireType::Int { size: 4, .. } => SqlType::Int,
            WireType::Int { .. } => SqlType::BigInt,
            WireType::Bit { .. } => SqlType::Bit,
            WireType::Float { size: 4, .. } => SqlType::Real,
            WireType::Float { .. } => SqlType::Float,
            WireType::Money { size: 4, .. } => SqlType::SmallMoney,
            WireType::Money { .. } => SqlType::Money,
            WireType::DateTime { size: 4, .. } => SqlType::SmallDateTime,
            WireType::DateTime { .. } => SqlType::DateTime,
            WireType::Decimal {
                numeric: false,
                precision,
                scale,
                ..
            } => SqlType::Decimal { precision, scale },
            WireType::Decimal { precision, scale, .. } => SqlType::Numeric { precision, scale },
            WireType::Date => SqlType::Date,
            WireType::Time { scale } => SqlType::Time { scale },
            WireType::DateTime2 { scale } => SqlType::DateTime2 { scale },
            WireType::DateTimeOffset { scale } => SqlType::DateTimeOffset { scale },
            WireType::Guid => SqlType::UniqueIdentifier,
            WireType::Sized { kind, fixed, max_len } => match (kind, fixed) {
                (Unicode, true) => SqlType::NChar { len: max_len / 2 },
                (Unicode, false) => SqlType::NVarChar {
                    len: Some(max_len / 2),
                },
                (Ansi(_), true) => SqlType::Char { len: max_len },
                (Ansi(_), false) => SqlType::VarChar { len: Some(max_len) },
                (Binary, true) => SqlType::Binary { len: max_len },
                (Binary, false) => SqlType::VarBinary { len: Some(max_len) },
            },
            WireType::Plp { kind: Unicode } => SqlType::NVarChar { len: None },
            WireType::Plp { kind: Ansi(_) } => SqlType::VarChar { len: None },
            WireType::Plp { kind: Binary } => SqlType::VarBinary { len: None },
            WireType::Xml => SqlType::Xml,
            WireType::Lob { kind: Ansi(_) } => SqlType::Text,
            WireType::Lob { kind: Unicode } => SqlType::NText,
            WireType::Lob { kind: Binary } => SqlType::Image,
            WireType::RowVersion => SqlType::RowVersion,
            WireType::Variant => SqlType::SqlVariant,
            // Only reachable for an undeclared NULL parameter; SQL Server types those as int.
            WireType::Null => SqlType::Int,
        }
    }
}

impl StrKind {
    /// The collation of a character TYPE_INFO (nchar/nvarchar/ntext: the default one).
    fn write_collation(self, out: &mut Vec<u8>) {
        match self {
            StrKind::Ansi(c) => out.extend_from_slice(&c.bytes),
            StrKind::Unicode => out.extend_from_slice(&COLLATION),
            StrKind::Binary => {}
        }
    }
}

/// A collation a client sent for char/varchar/text: its values are read in its code page.
fn read_collation(r: &mut Reader<'_>) -> Result<WireCollation, DecodeError> {
    let b = r.bytes(5, "collation")?;
    let bytes = [b[0], b[1], b[2], b[3], b[4]];
    let c = Collation::from_wire(bytes)
        .ok_or_else(|| DecodeError::Invalid(format!("unsupported collation {bytes:02X?}")))?;
    Ok(WireCollation {
        bytes,
        code_page: c.code_page,
        lossy: false,
    })
}

fn sized_token(kind: StrKind, fixed: bool) -> u8 {
    match (kind, fixed) {
        (StrKind::Unicode, false) => 0xE7,
        (StrKind::Unicode, true) => 0xEF,
        (StrKind::Ansi(_), false) => 0xA7,
        (StrKind::Ansi(_), true) => 0xAF,
        (StrKind::Binary, false) => 0xA5,
        (StrKind::Binary, true) => 0xAD,
    }
}

fn scale(r: &mut Reader<'_>) -> Result<u8, DecodeError> {
    match r.u8("TYPE_INFO scale")? {
        s @ 0..=7 => Ok(s),
        s => Err(invalid(format!("time scale {s}"))),
    }
}

fn invalid(msg: String) -> DecodeError {
    DecodeError::Invalid(msg)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn bytes(ty: SqlType, nullable: bool) -> Vec<u8> {
        let mut out = Vec::new();
        WireType::for_column(ty, nullable).write(&mut out);
        out
    }

    #[test]
    fn golden_type_info_bytes() {
        assert_eq!(bytes(SqlType::Int, false), [0x38]);
        assert_eq!(bytes(SqlType::Int, true), [0x26, 0x04]);
        assert_eq!(bytes(SqlType::BigInt, false), [0x7F]);
        assert_eq!(bytes(SqlType::Bit, true), [0x68, 0x01]);
        assert_eq!(bytes(SqlType::Float, false), [0x3E]);
        assert_eq!(bytes(SqlType::Real, true), [0x6D, 0x04]);
        assert_eq!(bytes(SqlType::SmallMoney, false), [0x7A]);
        assert_eq!(bytes(SqlType::Money, true), [0x6E, 0x08]);
        assert_eq!(bytes(SqlType::SmallDateTime, false), [0x3A]);
        assert_eq!(
            bytes(
                SqlType::Decimal {
                    precision: 18,
                    scale: 2
                },
                true
            ),
            [0x6A, 9, 18, 2]
        );
        assert_eq!(
            bytes(
                SqlType::Numeric {
                    precision: 38,
                    scale: 0
                },
                true
            ),
            [0x6C, 17, 38, 0]
        );
        assert_eq!(bytes(SqlType::Date, true), [0x28]);
        assert_eq!(bytes(SqlType::DateTime2 { scale: 7 }, true), [0x2A, 7]);
        assert_eq!(
            bytes(SqlType::NVarChar { len: Some(50) }, true),
            [0xE7, 100, 0, 9, 4, 0xD0, 0, 0x34]
        );
        assert_eq!(
            bytes(SqlType::NVarChar { len: None }, true),
            [0xE7, 0xFF, 0xFF, 9, 4, 0xD0, 0, 0x34]
        );
        assert_eq!(bytes(SqlType::VarBinary { len: Some(16) }, true), [0xA5, 16, 0]);
        assert_eq!(
            bytes(SqlType::Char { len: 3 }, false),
            [0xAF, 3, 0, 9, 4, 0xD0, 0, 0x34]
        );
        assert_eq!(bytes(SqlType::Xml, true), [0xF1, 0x00]);
        assert_eq!(bytes(SqlType::RowVersion, false), [0xAD, 0x08, 0x00]);
        assert_eq!(bytes(SqlType::Image, true), [0x22, 0xFF, 0xFF, 0xFF, 0x7F]);
        assert_eq!(bytes(SqlType::SqlVariant, true), [0x62, 0x50, 0x1F, 0, 0]);
    }

    #[test]
    fn written_type_info_reads_back_as_the_same_sql_type() {
        let types = [
            SqlType::Bit,
            SqlType::TinyInt,
            SqlType::SmallInt,
            SqlType::Int,
            SqlType::BigInt,
            SqlType::Real,
            SqlType::Float,
            SqlType::Money,
            SqlType::SmallMoney,
            SqlType::DateTime,
            SqlType::SmallDateTime,
            SqlType::Decimal {
                precision: 10,
                scale: 2,
            },
            SqlType::Numeric {
                precision: 5,
                scale: 5,
            },
            SqlType::Date,
            SqlType::Time { scale: 3 },
            SqlType::DateTime2 { scale: 0 },
            SqlType::DateTimeOffset { scale: 7 },
            SqlType::UniqueIdentifier,
            SqlType::Char { len: 10 },
            SqlType::VarChar { len: Some(8000) },
            SqlType::VarChar { len: None },
            SqlType::NChar { len: 4 },
            SqlType::NVarChar { len: Some(4000) },
            SqlType::NVarChar { len: None },
            SqlType::Binary { len: 4 },
            SqlType::VarBinary { len: None },
            SqlType::Text,
            SqlType::NText,
            SqlType::Image,
            SqlType::Xml,
            SqlType::SqlVariant,
        ];
        for ty in types {
            for nullable in [false, true] {
                let mut r = Reader::new(bytes(ty, nullable));
                let back = WireType::read(&mut r).unwrap();
                assert_eq!(back.sql_type(), ty, "{ty:?} nullable={nullable}");
                assert!(r.at_end().unwrap());
            }
        }
    }
}
