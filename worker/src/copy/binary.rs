//! PostgreSQL binary COPY encoding straight from tiberius values: the row bytes are written into
//! one `BytesMut` with no per-cell value objects in between. `encode_raw_row` takes rows that
//! tiberius decoded in place (`RawRow`), so text goes from the TDS bytes (UTF-16) to UTF-8 in the
//! COPY buffer without a `String` per value.
//!
//! Format (PostgreSQL docs, "COPY ... Binary Format"): an 11-byte signature, flags, header
//! extension length; per row an i16 field count, then per field an i32 length (-1 = NULL) and the
//! type's `*_send` representation; an i16 -1 trailer.

use crate::schema::mssql_to_pg_types::PgType;
use bytes::{BufMut, BytesMut};
use tiberius::{ColumnData, RawRow, RawText, RawValue};

const SIGNATURE: &[u8; 11] = b"PGCOPY\n\xff\r\n\0";

/// Microseconds per day.
const DAY_US: i64 = 86_400_000_000;
/// Days from 0001-01-01 (the `date`/`datetime2` epoch) to 2000-01-01 (PostgreSQL's epoch).
const DAYS_0001_TO_2000: i64 = 730_119;
/// Days from 1900-01-01 (the `datetime`/`smalldatetime` epoch) to 2000-01-01.
const DAYS_1900_TO_2000: i64 = 36_524;

pub fn write_header(buf: &mut BytesMut) {
    buf.put_slice(SIGNATURE);
    buf.put_i32(0); // flags: no OIDs
    buf.put_i32(0); // no header extension
}

pub fn write_trailer(buf: &mut BytesMut) {
    buf.put_i16(-1);
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EncodeErrorKind {
    #[error("contains a NUL character (0x00), which PostgreSQL text types cannot store")]
    Nul,
    #[error("source value of type {got} cannot be written as {expected}")]
    Mismatch { expected: PgType, got: &'static str },
    #[error("value out of range for {0}")]
    OutOfRange(PgType),
    #[error("row has {got} values, expected {expected}")]
    Arity { expected: usize, got: usize },
}

/// An encoding failure; `column` is the index into the encoder's column list.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("column #{column}: {kind}")]
pub struct EncodeError {
    pub column: usize,
    pub kind: EncodeErrorKind,
}

/// A failure encoding a row decoded in place: a value the encoder refuses, or TDS bytes that are
/// not a valid value of the column's type.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RawRowError {
    #[error(transparent)]
    Encode(#[from] EncodeError),
    #[error("column #{column}: {source}")]
    Decode {
        column: usize,
        #[source]
        source: tiberius::error::Error,
    },
}

impl RawRowError {
    /// The index of the column at fault.
    pub fn column(&self) -> usize {
        match self {
            RawRowError::Encode(e) => e.column,
            RawRowError::Decode { column, .. } => *column,
        }
    }
}

/// Encodes rows for a fixed list of target column types.
#[derive(Debug, Clone)]
pub struct RowEncoder {
    types: Vec<PgType>,
}

impl RowEncoder {
    pub fn new(types: Vec<PgType>) -> Self {
        RowEncoder { types }
    }

    pub fn types(&self) -> &[PgType] {
        &self.types
    }

    /// Appends one row. On error the buffer is left exactly as it was before the call.
    pub fn encode_row<'a, I>(&self, buf: &mut BytesMut, cells: I) -> Result<(), EncodeError>
    where
        I: IntoIterator<Item = &'a ColumnData<'static>>,
    {
        let start = buf.len();
        let result = self.encode_row_inner(buf, cells);
        if result.is_err() {
            buf.truncate(start);
        }
        result
    }

    /// Appends one row that tiberius decoded in place. On error the buffer is left exactly as it
    /// was before the call.
    pub fn encode_raw_row(&self, buf: &mut Vec<u8>, row: &RawRow<'_>) -> Result<(), RawRowError> {
        let start = buf.len();
        let result = self.encode_raw_row_inner(buf, row, false);
        if result.is_err() {
            buf.truncate(start);
        }
        result
    }

    /// [`Self::encode_raw_row`] of the row's leading values, one per type; the values after
    /// them (a change's operation, beside its row image) are the caller's.
    pub fn encode_raw_row_leading(&self, buf: &mut Vec<u8>, row: &RawRow<'_>) -> Result<(), RawRowError> {
        let start = buf.len();
        let result = self.encode_raw_row_inner(buf, row, true);
        if result.is_err() {
            buf.truncate(start);
        }
        result
    }

    fn encode_raw_row_inner(
        &self,
        buf: &mut Vec<u8>,
        row: &RawRow<'_>,
        leading: bool,
    ) -> Result<(), RawRowError> {
        let n = self.types.len();
        let got = row.len();
        if got != n && !(leading && got > n) {
            return Err(EncodeError {
                column: n.min(got),
                kind: EncodeErrorKind::Arity { expected: n, got },
            }
            .into());
        }
        // A row never has more than 1600 columns in PostgreSQL, so the count fits an i16.
        buf.put_i16(n as i16);
        for (i, ty) in self.types.iter().enumerate() {
            // Values were checked when tiberius read the row; `None` only past the end.
            let value = match row.value(i) {
                Some(v) => v,
                None => {
                    return Err(EncodeError {
                        column: i,
                        kind: EncodeErrorKind::Arity { expected: n, got: i },
                    }
                    .into());
                }
            };
            match value {
                RawValue::Data(cell) => {
                    encode_cell(buf, *ty, &cell).map_err(|kind| EncodeError { column: i, kind })?
                }
                RawValue::Text(text) => encode_text(buf, *ty, &text, i)?,
            }
        }
        Ok(())
    }

    fn encode_row_inner<'a, I>(&self, buf: &mut BytesMut, cells: I) -> Result<(), EncodeError>
    where
        I: IntoIterator<Item = &'a ColumnData<'static>>,
    {
        let n = self.types.len();
        // A row never has more than 1600 columns in PostgreSQL, so the count fits an i16.
        buf.put_i16(n as i16);
        let mut count = 0usize;
        for (i, cell) in cells.into_iter().enumerate() {
            let Some(ty) = self.types.get(i) else {
                return Err(EncodeError {
                    column: i,
                    kind: EncodeErrorKind::Arity {
                        expected: n,
                        got: i + 1,
                    },
                });
            };
            encode_cell(buf, *ty, cell).map_err(|kind| EncodeError { column: i, kind })?;
            count += 1;
        }
        if count != n {
            return Err(EncodeError {
                column: count,
                kind: EncodeErrorKind::Arity {
                    expected: n,
                    got: count,
                },
            });
        }
        Ok(())
    }
}

/// A text value written as UTF-8 straight from its TDS bytes: the field length is written after
/// the text, in the four bytes reserved for it.
fn encode_text(buf: &mut Vec<u8>, ty: PgType, text: &RawText<'_>, column: usize) -> Result<(), RawRowError> {
    let err = |kind| RawRowError::Encode(EncodeError { column, kind });
    match ty {
        PgType::Varchar { .. } | PgType::Char { .. } | PgType::Text | PgType::Xml => {
            let len_at = buf.len();
            buf.put_i32(0);
            let nul = text
                .write_utf8(buf)
                .map_err(|source| RawRowError::Decode { column, source })?;
            if nul {
                return Err(err(EncodeErrorKind::Nul));
            }
            // PostgreSQL caps a field at 1 GB, SQL Server allows 2 GB: refuse rather than wrap.
            let len =
                i32::try_from(buf.len() - len_at - 4).map_err(|_| err(EncodeErrorKind::OutOfRange(ty)))?;
            buf[len_at..len_at + 4].copy_from_slice(&len.to_be_bytes());
            Ok(())
        }
        _ => Err(err(EncodeErrorKind::Mismatch {
            expected: ty,
            got: "string",
        })),
    }
}

fn variant_name(cell: &ColumnData<'_>) -> &'static str {
    match cell {
        ColumnData::U8(_) => "tinyint",
        ColumnData::I16(_) => "smallint",
        ColumnData::I32(_) => "int",
        ColumnData::I64(_) => "bigint",
        ColumnData::F32(_) => "real",
        ColumnData::F64(_) => "float",
        ColumnData::Bit(_) => "bit",
        ColumnData::String(_) => "string",
        ColumnData::Guid(_) => "uniqueidentifier",
        ColumnData::Binary(_) => "binary",
        ColumnData::Numeric(_) => "numeric",
        ColumnData::Xml(_) => "xml",
        ColumnData::DateTime(_) => "datetime",
        ColumnData::SmallDateTime(_) => "smalldatetime",
        ColumnData::Time(_) => "time",
        ColumnData::Date(_) => "date",
        ColumnData::DateTime2(_) => "datetime2",
        ColumnData::DateTimeOffset(_) => "datetimeoffset",
    }
}

#[inline]
fn null<B: BufMut>(buf: &mut B) -> Result<(), EncodeErrorKind> {
    buf.put_i32(-1);
    Ok(())
}

/// Writes one field: its length and its bytes.
fn encode_cell<B: BufMut>(buf: &mut B, ty: PgType, cell: &ColumnData<'_>) -> Result<(), EncodeErrorKind> {
    let mismatch = || EncodeErrorKind::Mismatch {
        expected: ty,
        got: variant_name(cell),
    };
    match (ty, cell) {
        (PgType::Bool, ColumnData::Bit(v)) => match v {
            Some(b) => {
                buf.put_i32(1);
                buf.put_u8(u8::from(*b));
                Ok(())
            }
            None => null(buf),
        },
        (PgType::Int2, ColumnData::U8(v)) => fixed(buf, v.map(|x| i16::from(x).to_be_bytes())),
        (PgType::Int2, ColumnData::I16(v)) => fixed(buf, v.map(i16::to_be_bytes)),
        (PgType::Int4, ColumnData::I32(v)) => fixed(buf, v.map(i32::to_be_bytes)),
        (PgType::Int8, ColumnData::I64(v)) => fixed(buf, v.map(i64::to_be_bytes)),
        (PgType::Float4, ColumnData::F32(v)) => fixed(buf, v.map(f32::to_be_bytes)),
        (PgType::Float8, ColumnData::F64(v)) => fixed(buf, v.map(f64::to_be_bytes)),
        // Widening is exact.
        (PgType::Float8, ColumnData::F32(v)) => fixed(buf, v.map(|x| f64::from(x).to_be_bytes())),
        (PgType::Numeric { .. }, ColumnData::Numeric(v)) => match v {
            Some(n) => {
                put_numeric(buf, n.value(), n.scale());
                Ok(())
            }
            None => null(buf),
        },
        (PgType::Uuid, ColumnData::Guid(v)) => fixed(buf, v.map(|u| *u.as_bytes())),
        (PgType::Varchar { .. } | PgType::Char { .. } | PgType::Text, ColumnData::String(v)) => match v {
            Some(s) => put_text(buf, s.as_bytes()),
            None => null(buf),
        },
        (PgType::Xml, ColumnData::Xml(v)) => match v {
            Some(x) => put_text(buf, x.as_ref().as_ref().as_bytes()),
            None => null(buf),
        },
        (PgType::Xml, ColumnData::String(v)) => match v {
            Some(s) => put_text(buf, s.as_bytes()),
            None => null(buf),
        },
        (PgType::Bytea, ColumnData::Binary(v)) => match v {
            Some(b) => put_bytes(buf, b),
            None => null(buf),
        },
        (PgType::Date, ColumnData::Date(v)) => match v {
            Some(d) => {
                let days = i64::from(d.days()) - DAYS_0001_TO_2000;
                fixed(buf, Some((days as i32).to_be_bytes()))
            }
            None => null(buf),
        },
        (PgType::Time { precision }, ColumnData::Time(v)) => match v {
            Some(t) => {
                let us = truncate_us(increments_to_us(t.increments(), t.scale()), precision);
                fixed(buf, Some(us.to_be_bytes()))
            }
            None => null(buf),
        },
        (PgType::Timestamp { precision }, ColumnData::DateTime2(v)) => match v {
            Some(dt) => fixed(buf, Some(datetime2_us(dt, precision).to_be_bytes())),
            None => null(buf),
        },
        (PgType::Timestamptz { precision }, ColumnData::DateTimeOffset(v)) => match v {
            // The datetime2 part of a datetimeoffset is UTC on the wire (MS-TDS 2.2.5.4.2).
            Some(dto) => fixed(buf, Some(datetime2_us(&dto.datetime2(), precision).to_be_bytes())),
            None => null(buf),
        },
        (PgType::Timestamp { precision }, ColumnData::DateTime(v)) => match v {
            Some(dt) => {
                // 1/300 s ticks, rounded to the millisecond the way SQL Server displays them
                // (.000/.003/.007); 299 ticks round to .997, never into the next second.
                let ms = (i64::from(dt.seconds_fragments()) * 1000 + 150) / 300;
                let us = truncate_us(ms * 1000, precision);
                let days = i64::from(dt.days()) - DAYS_1900_TO_2000;
                fixed(buf, Some((days * DAY_US + us).to_be_bytes()))
            }
            None => null(buf),
        },
        (PgType::Timestamp { .. }, ColumnData::SmallDateTime(v)) => match v {
            Some(dt) => {
                let days = i64::from(dt.days()) - DAYS_1900_TO_2000;
                let us = i64::from(dt.seconds_fragments()) * 60_000_000;
                fixed(buf, Some((days * DAY_US + us).to_be_bytes()))
            }
            None => null(buf),
        },
        // A NULL of any variant is a NULL of the target type.
        (_, c) if is_null(c) => null(buf),
        _ => Err(mismatch()),
    }
}

fn is_null(cell: &ColumnData<'_>) -> bool {
    match cell {
        ColumnData::U8(v) => v.is_none(),
        ColumnData::I16(v) => v.is_none(),
        ColumnData::I32(v) => v.is_none(),
        ColumnData::I64(v) => v.is_none(),
        ColumnData::F32(v) => v.is_none(),
        ColumnData::F64(v) => v.is_none(),
        ColumnData::Bit(v) => v.is_none(),
        ColumnData::String(v) => v.is_none(),
        ColumnData::Guid(v) => v.is_none(),
        ColumnData::Binary(v) => v.is_none(),
        ColumnData::Numeric(v) => v.is_none(),
        ColumnData::Xml(v) => v.is_none(),
        ColumnData::DateTime(v) => v.is_none(),
        ColumnData::SmallDateTime(v) => v.is_none(),
        ColumnData::Time(v) => v.is_none(),
        ColumnData::Date(v) => v.is_none(),
        ColumnData::DateTime2(v) => v.is_none(),
        ColumnData::DateTimeOffset(v) => v.is_none(),
    }
}

#[inline]
fn fixed<B: BufMut, const N: usize>(buf: &mut B, v: Option<[u8; N]>) -> Result<(), EncodeErrorKind> {
    match v {
        Some(bytes) => {
            buf.put_i32(N as i32);
            buf.put_slice(&bytes);
            Ok(())
        }
        None => null(buf),
    }
}

#[inline]
fn put_text<B: BufMut>(buf: &mut B, s: &[u8]) -> Result<(), EncodeErrorKind> {
    if s.contains(&0) {
        return Err(EncodeErrorKind::Nul);
    }
    put_bytes(buf, s)
}

#[inline]
fn put_bytes<B: BufMut>(buf: &mut B, b: &[u8]) -> Result<(), EncodeErrorKind> {
    // PostgreSQL caps a field at 1 GB, SQL Server allows 2 GB: refuse rather than wrap the length.
    let len = i32::try_from(b.len()).map_err(|_| EncodeErrorKind::OutOfRange(PgType::Bytea))?;
    buf.put_i32(len);
    buf.put_slice(b);
    Ok(())
}

/// Increments of 10^-scale seconds to microseconds, truncating sub-microsecond digits.
#[inline]
fn increments_to_us(increments: u64, scale: u8) -> i64 {
    let inc = increments as i64;
    match scale {
        0..=6 => inc * 10i64.pow(6 - u32::from(scale)),
        7..=9 => inc / 10i64.pow(u32::from(scale) - 6),
        // A scale above 9 is not a valid SQL Server value; tiberius rejects it before we see it.
        _ => inc,
    }
}

/// Drops digits beyond `precision` fractional digits of a non-negative time of day.
#[inline]
fn truncate_us(us: i64, precision: u8) -> i64 {
    if precision >= 6 {
        us
    } else {
        let unit = 10i64.pow(6 - u32::from(precision));
        us - us % unit
    }
}

#[inline]
fn datetime2_us(dt: &tiberius::time::DateTime2, precision: u8) -> i64 {
    let days = i64::from(dt.date().days()) - DAYS_0001_TO_2000;
    let time = truncate_us(
        increments_to_us(dt.time().increments(), dt.time().scale()),
        precision,
    );
    days * DAY_US + time
}

/// PostgreSQL `numeric_send`: ndigits, weight, sign, dscale, then base-10000 digits, with leading
/// and trailing zero digits stripped (that is how PostgreSQL stores and sends it).
fn put_numeric<B: BufMut>(buf: &mut B, value: i128, scale: u8) {
    let negative = value < 0;
    let abs = value.unsigned_abs();
    let pow = 10u128.pow(u32::from(scale));
    let mut int_part = abs / pow;
    let frac = abs % pow;

    // Base-10000 digits of the integer part, least significant first.
    let mut int_digits: [i16; 10] = [0; 10];
    let mut n_int = 0usize;
    while int_part > 0 {
        int_digits[n_int] = (int_part % 10_000) as i16;
        int_part /= 10_000;
        n_int += 1;
    }
    // Fraction padded to a multiple of 4 digits, most significant group first.
    let frac_groups = usize::from(scale).div_ceil(4);
    // Padding by multiplication could overflow u128 at scale 38, so the partial last group is
    // split off first.
    let mut frac_digits: [i16; 10] = [0; 10];
    let mut rest = frac;
    let partial = u32::from(scale) % 4;
    let mut i = frac_groups;
    if partial != 0 {
        let m = 10u128.pow(partial);
        i -= 1;
        frac_digits[i] = ((rest % m) * 10u128.pow(4 - partial)) as i16;
        rest /= m;
    }
    while i > 0 {
        i -= 1;
        frac_digits[i] = (rest % 10_000) as i16;
        rest /= 10_000;
    }

    let mut digits: [i16; 20] = [0; 20];
    let mut nd = 0usize;
    for i in (0..n_int).rev() {
        digits[nd] = int_digits[i];
        nd += 1;
    }
    digits[nd..nd + frac_groups].copy_from_slice(&frac_digits[..frac_groups]);
    nd += frac_groups;
    let mut weight = n_int as i16 - 1;
    let mut first = 0usize;
    while first < nd && digits[first] == 0 {
        first += 1;
        weight -= 1;
    }
    while nd > first && digits[nd - 1] == 0 {
        nd -= 1;
    }
    let ndigits = nd - first;
    if ndigits == 0 {
        weight = 0;
    }
    let sign: u16 = if negative && ndigits > 0 { 0x4000 } else { 0x0000 };

    buf.put_i32(8 + 2 * ndigits as i32);
    buf.put_i16(ndigits as i16);
    buf.put_i16(weight);
    buf.put_u16(sign);
    buf.put_u16(u16::from(scale));
    for d in &digits[first..nd] {
        buf.put_i16(*d);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn numeric_bytes(value: i128, scale: u8) -> Vec<u8> {
        let mut b = BytesMut::new();
        put_numeric(&mut b, value, scale);
        b.to_vec()
    }

    #[test]
    fn numeric_layout() {
        // 12345.678 (scale 3): digits 1, 2345, 6780; weight 1; dscale 3.
        assert_eq!(
            numeric_bytes(12_345_678, 3),
            vec![0, 0, 0, 14, 0, 3, 0, 1, 0, 0, 0, 3, 0, 1, 0x09, 0x29, 0x1a, 0x7c]
        );
        // 0.0001 (scale 4): digit 1, weight -1.
        assert_eq!(
            numeric_bytes(1, 4),
            vec![0, 0, 0, 10, 0, 1, 0xff, 0xff, 0, 0, 0, 4, 0, 1]
        );
        // zero keeps its dscale.
        assert_eq!(numeric_bytes(0, 2), vec![0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 2]);
        // -10000 (scale 0): digit 1, weight 1, negative.
        assert_eq!(
            numeric_bytes(-10_000, 0),
            vec![0, 0, 0, 10, 0, 1, 0, 1, 0x40, 0, 0, 0, 0, 1]
        );
    }

    #[test]
    fn time_truncates_never_rounds() {
        assert_eq!(increments_to_us(9_999_999, 7), 999_999);
        assert_eq!(increments_to_us(5, 1), 500_000);
        assert_eq!(truncate_us(123_456, 3), 123_000);
    }

    #[test]
    fn nul_is_rejected_and_buffer_restored() {
        let enc = RowEncoder::new(vec![PgType::Int4, PgType::Text]);
        let mut buf = BytesMut::new();
        let row = [ColumnData::I32(Some(1)), ColumnData::String(Some("a\0b".into()))];
        let err = enc.encode_row(&mut buf, row.iter()).unwrap_err();
        assert_eq!(
            err,
            EncodeError {
                column: 1,
                kind: EncodeErrorKind::Nul
            }
        );
        assert!(buf.is_empty());
    }

    #[test]
    fn mismatch_is_an_error() {
        let enc = RowEncoder::new(vec![PgType::Int4]);
        let mut buf = BytesMut::new();
        let row = [ColumnData::I64(Some(1))];
        assert!(matches!(
            enc.encode_row(&mut buf, row.iter()),
            Err(EncodeError {
                column: 0,
                kind: EncodeErrorKind::Mismatch { .. }
            })
        ));
    }
}
