// mssql-pg-operator patch: raw-rows
//! Rows decoded in place from the connection's read buffer.
//!
//! [`QueryStream`](super::QueryStream) turns every row into a [`Row`](crate::Row): a `Vec` of
//! [`ColumnData`] with one `String` per text value, built by one async read per field. For a
//! caller that only re-encodes each row somewhere else (a COPY into another database) that is
//! most of the work. [`RawRowStream`] instead waits until a whole `ROW`/`NBCROW` token is in the
//! read buffer, records where each value lies, and hands out a [`RawRow`] borrowing those bytes:
//! numbers, dates and binary values come out as [`ColumnData`] (binary borrowed, no copy), text
//! as [`RawText`], the wire bytes, which the caller converts to UTF-8 straight into its own
//! buffer. Values are the same as the ones [`QueryStream`](super::QueryStream) produces.
//!
//! Result sets with a column type outside the in-buffer decoder's list (text/ntext/image,
//! sql_variant, CLR UDTs) are decoded the usual way, row by row, and handed out through
//! the same [`RawRow`] API.

use super::{ReceivedToken, TokenStream};
#[cfg(feature = "tds73")]
use crate::time::{Date, DateTime2, DateTimeOffset, Time};
use crate::{
    numeric::Numeric,
    tds::codec::{TokenColMetaData, TokenRow, MAX_PLP_SIZE},
    time::{DateTime, SmallDateTime},
    ColumnData, Error, FixedLenType, MetaDataColumn, SqlReadBytes, TokenType, TypeInfo, VarLenType,
};
use bytes::BytesMut;
use encoding_rs::Encoding;
use futures_util::io::{AsyncRead, AsyncWrite};
use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::Poll;
use uuid::Uuid;

/// How a column's values are framed in a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Frame {
    /// Always this many bytes.
    Fixed(usize),
    /// A one-byte length, zero meaning NULL.
    U8,
    /// A two-byte length, 0xFFFF meaning NULL.
    U16,
    /// Partially length-prefixed: a u64 total (all ones = NULL), then u32-length chunks.
    Plp,
}

/// What a column's value bytes are, decided once per result set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Null,
    Bit,
    Int1,
    Int2,
    Int4,
    Int8,
    Float4,
    Float8,
    Money,
    DateTimeN,
    Bitn,
    Intn,
    Floatn,
    Guid,
    #[cfg(feature = "tds73")]
    Date,
    #[cfg(feature = "tds73")]
    Time(u8),
    #[cfg(feature = "tds73")]
    DateTime2(u8),
    #[cfg(feature = "tds73")]
    DateTimeOffset(u8),
    Numeric(u8),
    Ansi,
    Utf16,
    /// UTF-16 like `Utf16`, but always strict (as tiberius's xml decoder).
    Xml,
    Binary,
}

/// The in-buffer layout of a column, or `None` when the column's type is decoded the usual way.
fn layout(col: &MetaDataColumn<'_>) -> Option<(Frame, Kind)> {
    use VarLenType as V;
    Some(match &col.base.ty {
        TypeInfo::FixedLen(t) => match t {
            FixedLenType::Null => (Frame::Fixed(0), Kind::Null),
            FixedLenType::Bit => (Frame::Fixed(1), Kind::Bit),
            FixedLenType::Int1 => (Frame::Fixed(1), Kind::Int1),
            FixedLenType::Int2 => (Frame::Fixed(2), Kind::Int2),
            FixedLenType::Int4 => (Frame::Fixed(4), Kind::Int4),
            FixedLenType::Int8 => (Frame::Fixed(8), Kind::Int8),
            FixedLenType::Float4 => (Frame::Fixed(4), Kind::Float4),
            FixedLenType::Float8 => (Frame::Fixed(8), Kind::Float8),
            FixedLenType::Datetime => (Frame::Fixed(8), Kind::DateTimeN),
            FixedLenType::Datetime4 => (Frame::Fixed(4), Kind::DateTimeN),
            FixedLenType::Money4 => (Frame::Fixed(4), Kind::Money),
            FixedLenType::Money => (Frame::Fixed(8), Kind::Money),
        },
        TypeInfo::VarLenSized(cx) => {
            let sized = if cx.len() < 0xffff {
                Frame::U16
            } else {
                Frame::Plp
            };
            match cx.r#type() {
                V::Bitn => (Frame::U8, Kind::Bitn),
                V::Intn => (Frame::U8, Kind::Intn),
                V::Floatn => (Frame::U8, Kind::Floatn),
                V::Guid => (Frame::U8, Kind::Guid),
                V::Money => (Frame::U8, Kind::Money),
                V::Datetimen => (Frame::U8, Kind::DateTimeN),
                #[cfg(feature = "tds73")]
                V::Daten => (Frame::U8, Kind::Date),
                #[cfg(feature = "tds73")]
                V::Timen => (Frame::U8, Kind::Time(cx.len() as u8)),
                #[cfg(feature = "tds73")]
                V::Datetime2 => (Frame::U8, Kind::DateTime2(cx.len() as u8)),
                #[cfg(feature = "tds73")]
                V::DatetimeOffsetn => (Frame::U8, Kind::DateTimeOffset(cx.len() as u8)),
                V::BigChar | V::BigVarChar => (sized, Kind::Ansi),
                V::NChar | V::NVarchar => (sized, Kind::Utf16),
                V::BigBinary | V::BigVarBin => (sized, Kind::Binary),
                _ => return None,
            }
        }
        TypeInfo::VarLenSizedPrecision { ty, scale, .. } => match ty {
            V::Decimaln | V::Numericn => (Frame::U8, Kind::Numeric(*scale)),
            _ => return None,
        },
        TypeInfo::Xml { size, .. } => {
            let frame = if *size < 0xffff {
                Frame::U16
            } else {
                Frame::Plp
            };
            (frame, Kind::Xml)
        }
        TypeInfo::Udt(_) => return None,
    })
}

/// Where one value of the current row lies.
#[derive(Debug, Clone, Copy)]
enum Loc {
    Null,
    /// `len` bytes at `start` in the row's bytes.
    Buf {
        start: usize,
        len: usize,
    },
    /// A PLP value of several chunks: the chunk list starts at `start`; `len` bytes in all.
    Chunked {
        start: usize,
        len: usize,
    },
    /// A chunked value gathered into the stream's scratch buffer.
    Scratch {
        start: usize,
        len: usize,
    },
}

/// Not enough bytes buffered for the whole row yet.
struct Incomplete;

enum ScanError {
    Incomplete,
    Protocol(Error),
}

impl From<Incomplete> for ScanError {
    fn from(_: Incomplete) -> Self {
        ScanError::Incomplete
    }
}

struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    #[inline]
    fn take(&mut self, n: usize) -> Result<&'a [u8], Incomplete> {
        let end = self.pos.checked_add(n).ok_or(Incomplete)?;
        let s = self.buf.get(self.pos..end).ok_or(Incomplete)?;
        self.pos = end;
        Ok(s)
    }

    #[inline]
    fn u8(&mut self) -> Result<u8, Incomplete> {
        Ok(self.take(1)?[0])
    }

    #[inline]
    fn u16(&mut self) -> Result<u16, Incomplete> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    #[inline]
    fn u32(&mut self) -> Result<u32, Incomplete> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    #[inline]
    fn u64(&mut self) -> Result<u64, Incomplete> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }
}

/// Finds every value of the row token at the start of `buf` (its type byte included). Returns
/// the token's length, or `Incomplete` when the buffer ends before the row does.
fn scan_row(
    buf: &[u8],
    layouts: &[(Frame, Kind)],
    cells: &mut Vec<Loc>,
) -> Result<usize, ScanError> {
    cells.clear();
    let mut c = Cursor { buf, pos: 1 };
    let nbc = buf.first() == Some(&(TokenType::NbcRow as u8));
    let bitmap = if nbc {
        c.take(layouts.len().div_ceil(8))?
    } else {
        &[]
    };
    for (i, (frame, _)) in layouts.iter().enumerate() {
        if nbc && bitmap[i / 8] & (1 << (i % 8)) != 0 {
            cells.push(Loc::Null);
            continue;
        }
        let loc = match *frame {
            Frame::Fixed(0) => Loc::Null,
            Frame::Fixed(n) => {
                let start = c.pos;
                c.take(n)?;
                Loc::Buf { start, len: n }
            }
            Frame::U8 => match c.u8()? as usize {
                0 => Loc::Null,
                len => {
                    let start = c.pos;
                    c.take(len)?;
                    Loc::Buf { start, len }
                }
            },
            Frame::U16 => match c.u16()? {
                0xffff => Loc::Null,
                len => {
                    let len = len as usize;
                    let start = c.pos;
                    c.take(len)?;
                    Loc::Buf { start, len }
                }
            },
            Frame::Plp => match c.u64()? {
                0xffff_ffff_ffff_ffff => Loc::Null,
                _ => {
                    let start = c.pos;
                    let mut total = 0usize;
                    let mut chunks = 0usize;
                    let mut first = start;
                    loop {
                        let size = c.u32()? as usize;
                        if size == 0 {
                            break;
                        }
                        // Same cap as the usual PLP decoder.
                        if total.saturating_add(size) > MAX_PLP_SIZE {
                            return Err(ScanError::Protocol(Error::Protocol(
                                format!(
                                    "PLP value exceeds the maximum supported size of {} bytes",
                                    MAX_PLP_SIZE
                                )
                                .into(),
                            )));
                        }
                        first = c.pos;
                        c.take(size)?;
                        total += size;
                        chunks += 1;
                    }
                    match chunks {
                        0 => Loc::Buf { start, len: 0 },
                        1 => Loc::Buf {
                            start: first,
                            len: total,
                        },
                        _ => Loc::Chunked { start, len: total },
                    }
                }
            },
        };
        cells.push(loc);
    }
    Ok(c.pos)
}

/// Copies the chunked PLP values of a complete row into `scratch`.
fn gather_chunks(row: &[u8], cells: &mut [Loc], scratch: &mut Vec<u8>) {
    scratch.clear();
    for cell in cells.iter_mut() {
        if let Loc::Chunked { start, len } = *cell {
            let at = scratch.len();
            scratch.reserve(len);
            let mut pos = start;
            // The row was scanned whole, so every chunk header and body is in `row`.
            while let Some(h) = row.get(pos..pos + 4) {
                let size = u32::from_le_bytes([h[0], h[1], h[2], h[3]]) as usize;
                pos += 4;
                if size == 0 {
                    break;
                }
                scratch.extend_from_slice(&row[pos..pos + size]);
                pos += size;
            }
            *cell = Loc::Scratch { start: at, len };
        }
    }
}

/// A text value as sent by the server: UTF-16LE (`nchar`/`nvarchar`) or the bytes of the
/// column's code page (`char`/`varchar`).
#[derive(Debug, Clone, Copy)]
pub struct RawText<'a> {
    bytes: &'a [u8],
    enc: TextEncoding,
}

#[derive(Debug, Clone, Copy)]
enum TextEncoding {
    Utf16 { lossy: bool },
    CodePage(&'static Encoding),
}

impl<'a> RawText<'a> {
    /// The value's bytes as received.
    pub fn wire_bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// True for UTF-16LE (`nchar`/`nvarchar`) values.
    pub fn is_utf16(&self) -> bool {
        matches!(self.enc, TextEncoding::Utf16 { .. })
    }

    /// Appends the value as UTF-8 to `dst`, with the same result (and the same errors) as the
    /// `String` tiberius decodes for it.
    /// Returns whether the text contains U+0000.
    pub fn write_utf8(&self, dst: &mut Vec<u8>) -> crate::Result<bool> {
        match self.enc {
            TextEncoding::Utf16 { lossy } => write_utf16_as_utf8(self.bytes, lossy, dst),
            TextEncoding::CodePage(enc) => {
                let s = enc
                    .decode_without_bom_handling_and_without_replacement(self.bytes)
                    .ok_or_else(|| Error::Encoding("invalid sequence".into()))?;
                dst.extend_from_slice(s.as_bytes());
                Ok(s.as_bytes().contains(&0))
            }
        }
    }

    /// The value as a string (borrowed when the bytes already are its UTF-8).
    pub fn to_str(&self) -> crate::Result<Cow<'a, str>> {
        match self.enc {
            TextEncoding::Utf16 { lossy } => {
                let mut b = Vec::with_capacity(self.bytes.len() / 2);
                write_utf16_as_utf8(self.bytes, lossy, &mut b)?;
                String::from_utf8(b)
                    .map(Cow::Owned)
                    .map_err(|_| Error::Protocol("nvarchar: invalid UTF-16 sequence".into()))
            }
            TextEncoding::CodePage(enc) => enc
                .decode_without_bom_handling_and_without_replacement(self.bytes)
                .ok_or_else(|| Error::Encoding("invalid sequence".into())),
        }
    }
}

/// UTF-16LE to UTF-8, appended to `dst`, with the result of tiberius's string decoder: strict
/// (an unpaired surrogate is an error, `dst` left as it was) unless `lossy` (each unpaired
/// surrogate becomes U+FFFD). Runs of ASCII, the common case, are narrowed eight code units at a
/// time; other code units are encoded one by one. Returns whether the text contains U+0000
/// (which, for one, PostgreSQL's text types cannot store), found on the way.
pub fn write_utf16_as_utf8(src: &[u8], lossy: bool, dst: &mut Vec<u8>) -> crate::Result<bool> {
    if src.len() % 2 != 0 {
        return Err(Error::Protocol("nvarchar: invalid plp length".into()));
    }
    let start = dst.len();
    dst.resize(start + src.len() / 2, 0);
    // Eight code units (16 bytes) at a time while they are all ASCII: each u64 holds four
    // units, [c0, 0, c1, 0, c2, 0, c3, 0]; ASCII means no bit outside the low 7 of each unit.
    let mut ascii = 0;
    let mut zero = 0u64;
    for (out, chunk) in dst[start..].chunks_exact_mut(8).zip(src.chunks_exact(16)) {
        let a = u64::from_le_bytes(le(chunk));
        let b = u64::from_le_bytes(le(&chunk[8..]));
        if (a | b) & 0xff80_ff80_ff80_ff80 != 0 {
            break;
        }
        let packed = u64::from(narrow4(a)) | u64::from(narrow4(b)) << 32;
        // Non-zero iff one of the eight (ASCII) bytes is 0.
        zero |= packed.wrapping_sub(0x0101_0101_0101_0101) & !packed & 0x8080_8080_8080_8080;
        out.copy_from_slice(&packed.to_le_bytes());
        ascii += 8;
    }
    dst.truncate(start + ascii);
    let mut nul = zero != 0;
    let mut i = ascii * 2;
    while i < src.len() {
        let u = u16::from_le_bytes([src[i], src[i + 1]]);
        i += 2;
        match u {
            0..=0x7f => {
                nul |= u == 0;
                dst.push(u as u8)
            }
            0x80..=0x7ff => {
                dst.extend_from_slice(&[0xc0 | (u >> 6) as u8, 0x80 | (u & 0x3f) as u8])
            }
            0xd800..=0xdbff => {
                // A high surrogate pairs with a following low one; otherwise it is unpaired and
                // the next unit is decoded on its own (as `char::decode_utf16` does).
                let low = src.get(i..i + 2).map(|b| u16::from_le_bytes([b[0], b[1]]));
                match low {
                    Some(lo @ 0xdc00..=0xdfff) => {
                        i += 2;
                        let c =
                            0x1_0000 + ((u32::from(u) - 0xd800) << 10) + (u32::from(lo) - 0xdc00);
                        dst.extend_from_slice(&[
                            0xf0 | (c >> 18) as u8,
                            0x80 | ((c >> 12) & 0x3f) as u8,
                            0x80 | ((c >> 6) & 0x3f) as u8,
                            0x80 | (c & 0x3f) as u8,
                        ]);
                    }
                    _ => unpaired(lossy, dst, start)?,
                }
            }
            0xdc00..=0xdfff => unpaired(lossy, dst, start)?,
            _ => dst.extend_from_slice(&[
                0xe0 | (u >> 12) as u8,
                0x80 | ((u >> 6) & 0x3f) as u8,
                0x80 | (u & 0x3f) as u8,
            ]),
        }
    }
    Ok(nul)
}

/// Four ASCII UTF-16LE code units (one per 16 bits of `x`) as four bytes.
#[inline]
fn narrow4(x: u64) -> u32 {
    let x = (x | (x >> 8)) & 0x0000_ffff_0000_ffff;
    (x | (x >> 16)) as u32
}

/// An unpaired surrogate: U+FFFD when lossy, else an error with `dst` restored.
#[inline]
fn unpaired(lossy: bool, dst: &mut Vec<u8>, start: usize) -> crate::Result<()> {
    if lossy {
        dst.extend_from_slice("\u{fffd}".as_bytes());
        Ok(())
    } else {
        dst.truncate(start);
        Err(Error::Protocol("nvarchar: invalid UTF-16 sequence".into()))
    }
}

/// One value of a [`RawRow`].
#[derive(Debug, Clone)]
pub enum RawValue<'a> {
    /// Anything but a non-NULL text value, as tiberius decodes it (binary borrows the row).
    Data(ColumnData<'a>),
    /// A non-NULL `char`/`varchar`/`nchar`/`nvarchar`/`xml` value, to be converted by the caller
    /// (an xml value is its document text, without the schema reference `ColumnData::Xml`
    /// carries).
    Text(RawText<'a>),
}

/// A borrowed view of an owned value.
fn borrow_data<'a>(c: &'a ColumnData<'static>) -> ColumnData<'a> {
    match c {
        ColumnData::String(Some(s)) => ColumnData::String(Some(Cow::Borrowed(s.as_ref()))),
        ColumnData::Binary(Some(b)) => ColumnData::Binary(Some(Cow::Borrowed(b.as_ref()))),
        ColumnData::Xml(Some(x)) => ColumnData::Xml(Some(Cow::Borrowed(x.as_ref()))),
        other => other.clone(),
    }
}

#[derive(Debug)]
enum RowRef<'a> {
    InBuffer {
        bytes: &'a [u8],
        scratch: &'a [u8],
        cells: &'a [Loc],
        layouts: &'a [(Frame, Kind)],
        lossy: bool,
    },
    Decoded(&'a TokenRow<'static>),
}

/// One row of a [`RawRowStream`], valid until the next call to
/// [`RawRowStream::next_row`].
#[derive(Debug)]
pub struct RawRow<'a> {
    columns: &'a [MetaDataColumn<'static>],
    row: RowRef<'a>,
}

impl<'a> RawRow<'a> {
    /// The number of values.
    pub fn len(&self) -> usize {
        match &self.row {
            RowRef::InBuffer { cells, .. } => cells.len(),
            RowRef::Decoded(r) => r.len(),
        }
    }

    /// True for a row without values.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The name of the `i`th column.
    pub fn column_name(&self, i: usize) -> Option<&'a str> {
        self.columns.get(i).map(|c| c.col_name.as_ref())
    }

    /// The `i`th value; `None` past the end. (The values were checked when the row was read;
    /// the `Result` is for API stability and is always `Ok`.)
    pub fn get(&self, i: usize) -> Option<crate::Result<RawValue<'a>>> {
        Some(
            self.value(i)
                .ok_or_else(|| Error::Protocol("invalid value".into())),
        )
        .filter(|_| i < self.len())
    }

    /// The `i`th value; `None` past the end. Values are checked when the row is read
    /// ([`RawRowStream::next_row`] returns the error), so this cannot fail otherwise.
    #[inline]
    pub fn value(&self, i: usize) -> Option<RawValue<'a>> {
        match &self.row {
            RowRef::Decoded(r) => r.get(i).map(|c| RawValue::Data(borrow_data(c))),
            RowRef::InBuffer {
                bytes,
                scratch,
                cells,
                layouts,
                lossy,
            } => {
                let loc = *cells.get(i)?;
                let col = self.columns.get(i)?;
                let (_, kind) = *layouts.get(i)?;
                match wire_bytes(loc, bytes, scratch)? {
                    None => Some(RawValue::Data(col.base.null_value())),
                    Some(value) => decode_value(col, kind, value, *lossy),
                }
            }
        }
    }

    /// The values in column order.
    pub fn values(&self) -> impl Iterator<Item = crate::Result<RawValue<'a>>> + '_ {
        (0..self.len()).filter_map(move |i| self.get(i))
    }

    /// Copies the wire bytes of the columns `cols` into `kept` (replacing what it held), to be
    /// decoded after this row is gone by [`RawRowStream::kept_value`]. Costs a copy of a few
    /// bytes instead of decoding, for callers that need a value of whichever row turns out to be
    /// the last (a keyset cursor's key). False, with `kept` empty, for a row that was decoded
    /// the usual way (its values are not in the buffer) or a column index past the end: decode
    /// those with [`RawRow::value`] instead.
    #[inline]
    pub fn keep(&self, cols: &[usize], kept: &mut KeptValues) -> bool {
        kept.bytes.clear();
        kept.cells.clear();
        let RowRef::InBuffer {
            bytes,
            scratch,
            cells,
            lossy,
            ..
        } = &self.row
        else {
            return false;
        };
        kept.lossy = *lossy;
        for &i in cols {
            let Some(value) = cells
                .get(i)
                .and_then(|&loc| wire_bytes(loc, bytes, scratch))
            else {
                kept.cells.clear();
                return false;
            };
            let cell = value.map(|v| {
                let start = kept.bytes.len();
                kept.bytes.extend_from_slice(v);
                (start, v.len())
            });
            kept.cells.push((i, cell));
        }
        true
    }
}

/// A value's wire bytes in the row (`Some(None)` for NULL); `None` for a chunked value (gathered
/// into the scratch buffer before the row is handed out) or a location outside the row.
#[inline]
fn wire_bytes<'b>(loc: Loc, bytes: &'b [u8], scratch: &'b [u8]) -> Option<Option<&'b [u8]>> {
    match loc {
        Loc::Null => Some(None),
        Loc::Buf { start, len } => bytes.get(start..start + len).map(Some),
        Loc::Scratch { start, len } => scratch.get(start..start + len).map(Some),
        Loc::Chunked { .. } => None,
    }
}

/// Values of a [`RawRow`] kept past it by [`RawRow::keep`]: their wire bytes, undecoded.
#[derive(Debug, Default, Clone)]
pub struct KeptValues {
    bytes: Vec<u8>,
    /// Per kept value: its column and where its bytes lie in `bytes` (`None` for NULL).
    cells: Vec<(usize, Option<(usize, usize)>)>,
    lossy: bool,
}

impl KeptValues {
    /// The number of values kept.
    pub fn len(&self) -> usize {
        self.cells.len()
    }

    /// True when nothing is kept.
    pub fn is_empty(&self) -> bool {
        self.cells.is_empty()
    }
}

#[inline]
fn le<const N: usize>(v: &[u8]) -> [u8; N] {
    let mut a = [0u8; N];
    a.copy_from_slice(&v[..N]);
    a
}

fn bad_len(what: &str, len: usize) -> Error {
    Error::Protocol(format!("{what}: length of {len} is invalid").into())
}

#[cfg(feature = "tds73")]
fn time_of(v: &[u8], scale: u8) -> crate::Result<Time> {
    // As `Time::decode`: the byte width follows from the scale.
    let increments = match (scale, v.len()) {
        (0..=2, 3) => u64::from(u16::from_le_bytes(le(v))) | u64::from(v[2]) << 16,
        (3..=4, 4) => u64::from(u32::from_le_bytes(le(v))),
        (5..=7, 5) => u64::from(u32::from_le_bytes(le(v))) | u64::from(v[4]) << 32,
        _ => {
            return Err(Error::Protocol(
                format!("timen: invalid length {}", scale).into(),
            ))
        }
    };
    Ok(Time::new(increments, scale))
}

#[cfg(feature = "tds73")]
fn date_of(v: &[u8]) -> Date {
    Date::new(u32::from_le_bytes([v[0], v[1], v[2], 0]))
}

#[cfg(feature = "tds73")]
fn datetime2_of(v: &[u8], scale: u8) -> crate::Result<DateTime2> {
    let time_len = v.len().checked_sub(3).ok_or_else(|| {
        Error::Protocol(format!("datetime2: invalid value length {}", v.len()).into())
    })?;
    let time = time_of(&v[..time_len], scale)?;
    Ok(DateTime2::new(date_of(&v[time_len..]), time))
}

fn money_of(v: &[u8]) -> crate::Result<f64> {
    // As `money::decode`.
    Ok(match v.len() {
        4 => i32::from_le_bytes(le(v)) as f64 / 1e4,
        8 => {
            let high = i32::from_le_bytes(le(v)) as i64;
            let low = u32::from_le_bytes(le(&v[4..])) as f64;
            ((high << 32) as f64 + low) / 1e4
        }
        n => return Err(bad_len("money", n)),
    })
}

fn numeric_of(v: &[u8], scale: u8) -> crate::Result<Numeric> {
    // As `Numeric::decode`: a sign byte, then a 4, 8, 12 or 16-byte little-endian magnitude.
    let sign = match v[0] {
        0 => -1i128,
        1 => 1i128,
        _ => return Err(Error::Protocol("decimal: invalid sign".into())),
    };
    let m = &v[1..];
    let value = match m.len() {
        4 => i128::from(u32::from_le_bytes(le(m))) * sign,
        8 => i128::from(u64::from_le_bytes(le(m))) * sign,
        12 => {
            let magnitude = u128::from(u64::from_le_bytes(le(m)))
                | u128::from(u32::from_le_bytes(le(&m[8..]))) << 64;
            magnitude as i128 * sign
        }
        16 => {
            let magnitude = u128::from_le_bytes(le(m));
            if magnitude > i128::MAX as u128 {
                return Err(Error::Protocol(
                    "decimal/numeric: magnitude exceeds the representable range".into(),
                ));
            }
            magnitude as i128 * sign
        }
        _ => {
            return Err(Error::Protocol(
                format!("decimal/numeric: invalid length of {} received", v.len()).into(),
            ))
        }
    };
    Ok(Numeric::new_with_scale(value, scale))
}

/// The errors the usual decoder reports for a value's bytes (length prefix and PLP framing
/// removed). Every value of a row is checked before the row is handed out, so reading its values
/// cannot fail and a malformed value is an error of `next_row`, as of the usual row decoder.
fn check_value(col: &MetaDataColumn<'static>, kind: Kind, v: &[u8]) -> crate::Result<()> {
    let n = v.len();
    let ok = |valid: bool, what: &str| if valid { Ok(()) } else { Err(bad_len(what, n)) };
    match kind {
        Kind::Null
        | Kind::Bit
        | Kind::Int1
        | Kind::Int2
        | Kind::Int4
        | Kind::Int8
        | Kind::Float4
        | Kind::Float8
        | Kind::Binary => Ok(()),
        Kind::Money => ok(n == 4 || n == 8, "money"),
        Kind::DateTimeN => ok(n == 4 || n == 8, "datetimen"),
        Kind::Bitn => ok(n == 1, "bitn"),
        Kind::Intn => ok(matches!(n, 1 | 2 | 4 | 8), "intn"),
        Kind::Floatn => ok(n == 4 || n == 8, "floatn"),
        Kind::Guid => ok(n == 16, "guid"),
        #[cfg(feature = "tds73")]
        Kind::Date => ok(n == 3, "daten"),
        #[cfg(feature = "tds73")]
        Kind::Time(scale) => match n {
            3..=5 => time_of(v, scale).map(drop),
            _ => Err(Error::Protocol(
                format!("timen: invalid value length {n}").into(),
            )),
        },
        #[cfg(feature = "tds73")]
        Kind::DateTime2(scale) => match n {
            0..=2 => Err(Error::Protocol(
                format!("datetime2: invalid value length {n}").into(),
            )),
            _ => datetime2_of(v, scale).map(drop),
        },
        #[cfg(feature = "tds73")]
        Kind::DateTimeOffset(scale) => match n {
            0..=4 => Err(Error::Protocol(
                format!("datetimeoffset: invalid value length {n}").into(),
            )),
            _ => datetime2_of(&v[..n - 2], scale).map(drop),
        },
        Kind::Numeric(scale) => numeric_of(v, scale).map(drop),
        Kind::Utf16 | Kind::Xml => match n % 2 {
            0 => Ok(()),
            _ => Err(Error::Protocol("nvarchar: invalid plp length".into())),
        },
        Kind::Ansi => ansi_encoding(col).map(drop),
    }
}

/// The code page of a `char`/`varchar` column, or the usual decoder's error.
fn ansi_encoding(col: &MetaDataColumn<'static>) -> crate::Result<&'static Encoding> {
    let collation = match &col.base.ty {
        TypeInfo::VarLenSized(cx) => cx.collation(),
        _ => None,
    };
    collation
        .as_ref()
        .ok_or_else(|| Error::Protocol("string column missing collation".into()))?
        .encoding()
}

/// One non-NULL value from its bytes (length prefix and PLP framing removed); `None` only for
/// bytes `check_value` rejects.
#[inline]
fn decode_value<'a>(
    col: &MetaDataColumn<'static>,
    kind: Kind,
    v: &'a [u8],
    lossy: bool,
) -> Option<RawValue<'a>> {
    let n = v.len();
    let data = match kind {
        Kind::Null => col.base.null_value(),
        Kind::Bit => ColumnData::Bit(Some(v[0] != 0)),
        Kind::Int1 => ColumnData::U8(Some(v[0])),
        Kind::Int2 => ColumnData::I16(Some(i16::from_le_bytes(le(v)))),
        Kind::Int4 => ColumnData::I32(Some(i32::from_le_bytes(le(v)))),
        Kind::Int8 => ColumnData::I64(Some(i64::from_le_bytes(le(v)))),
        Kind::Float4 => ColumnData::F32(Some(f32::from_le_bytes(le(v)))),
        Kind::Float8 => ColumnData::F64(Some(f64::from_le_bytes(le(v)))),
        Kind::Money => ColumnData::F64(Some(money_of(v).ok()?)),
        Kind::DateTimeN => match n {
            4 => ColumnData::SmallDateTime(Some(SmallDateTime::new(
                u16::from_le_bytes(le(v)),
                u16::from_le_bytes(le(&v[2..])),
            ))),
            8 => ColumnData::DateTime(Some(DateTime::new(
                i32::from_le_bytes(le(v)),
                u32::from_le_bytes(le(&v[4..])),
            ))),
            _ => return None,
        },
        Kind::Bitn => match n {
            1 => ColumnData::Bit(Some(v[0] > 0)),
            _ => return None,
        },
        Kind::Intn => match n {
            1 => ColumnData::U8(Some(v[0])),
            2 => ColumnData::I16(Some(i16::from_le_bytes(le(v)))),
            4 => ColumnData::I32(Some(i32::from_le_bytes(le(v)))),
            8 => ColumnData::I64(Some(i64::from_le_bytes(le(v)))),
            _ => return None,
        },
        Kind::Floatn => match n {
            4 => ColumnData::F32(Some(f32::from_le_bytes(le(v)))),
            8 => ColumnData::F64(Some(f64::from_le_bytes(le(v)))),
            _ => return None,
        },
        Kind::Guid => match n {
            16 => {
                let mut b: [u8; 16] = le(v);
                // As `guid::reorder_bytes`: the first three groups are little-endian on the wire.
                b.swap(0, 3);
                b.swap(1, 2);
                b.swap(4, 5);
                b.swap(6, 7);
                ColumnData::Guid(Some(Uuid::from_bytes(b)))
            }
            _ => return None,
        },
        #[cfg(feature = "tds73")]
        Kind::Date => match n {
            3 => ColumnData::Date(Some(date_of(v))),
            _ => return None,
        },
        #[cfg(feature = "tds73")]
        Kind::Time(scale) => ColumnData::Time(Some(time_of(v, scale).ok()?)),
        #[cfg(feature = "tds73")]
        Kind::DateTime2(scale) => ColumnData::DateTime2(Some(datetime2_of(v, scale).ok()?)),
        #[cfg(feature = "tds73")]
        Kind::DateTimeOffset(scale) => {
            let dt2 = datetime2_of(v.get(..n.checked_sub(2)?)?, scale).ok()?;
            let offset = i16::from_le_bytes(le(&v[n - 2..]));
            ColumnData::DateTimeOffset(Some(DateTimeOffset::new(dt2, offset)))
        }
        Kind::Numeric(scale) => ColumnData::Numeric(Some(numeric_of(v, scale).ok()?)),
        Kind::Binary => ColumnData::Binary(Some(Cow::Borrowed(v))),
        Kind::Utf16 => {
            return Some(RawValue::Text(RawText {
                bytes: v,
                enc: TextEncoding::Utf16 { lossy },
            }))
        }
        Kind::Xml => {
            return Some(RawValue::Text(RawText {
                bytes: v,
                enc: TextEncoding::Utf16 { lossy: false },
            }))
        }
        Kind::Ansi => {
            return Some(RawValue::Text(RawText {
                bytes: v,
                enc: TextEncoding::CodePage(ansi_encoding(col).ok()?),
            }))
        }
    };
    Some(RawValue::Data(data))
}

/// What `next_row` found.
enum Next {
    InBuffer,
    Decoded,
    End,
}

/// Rows of a query, decoded in place; see the module documentation. Created by
/// [`Query::query_raw`](crate::Query::query_raw).
///
/// Like [`QueryStream`](super::QueryStream), it must be read to the end before the connection
/// is used for the next request.
pub struct RawRowStream<'a, S>
where
    S: AsyncRead + AsyncWrite + Unpin + Send,
{
    ts: TokenStream<'a, S>,
    meta: Option<Arc<TokenColMetaData<'static>>>,
    /// Per column of `meta`, when every column can be decoded in the buffer.
    layouts: Option<Vec<(Frame, Kind)>>,
    cells: Vec<Loc>,
    scratch: Vec<u8>,
    /// Bytes of the row last handed out, dropped from the buffer at the next call.
    pending: usize,
    decoded: Option<TokenRow<'static>>,
    timeout: Option<std::time::Duration>,
}

impl<S> std::fmt::Debug for RawRowStream<'_, S>
where
    S: AsyncRead + AsyncWrite + Unpin + Send,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RawRowStream")
            .field("columns", &self.columns().len())
            .field("in_buffer", &self.layouts.is_some())
            .finish()
    }
}

impl<'a, S> RawRowStream<'a, S>
where
    S: AsyncRead + AsyncWrite + Unpin + Send,
{
    pub(crate) fn new(ts: TokenStream<'a, S>) -> Self {
        let mut ts = ts;
        let timeout = ts.conn_mut().context().command_timeout();
        Self {
            ts,
            meta: None,
            layouts: None,
            cells: Vec::new(),
            scratch: Vec::new(),
            pending: 0,
            decoded: None,
            timeout,
        }
    }

    /// The columns of the current result set (empty before the first one arrived).
    pub fn columns(&self) -> &[MetaDataColumn<'static>] {
        self.meta.as_ref().map_or(&[], |m| m.columns.as_slice())
    }

    /// The `j`th value kept by [`RawRow::keep`] from a row of the current result set, decoded
    /// as [`RawRow::value`] would have decoded it; `None` past the end.
    pub fn kept_value<'k>(&self, kept: &'k KeptValues, j: usize) -> Option<RawValue<'k>> {
        let (i, cell) = *kept.cells.get(j)?;
        let col = self.columns().get(i)?;
        let (_, kind) = *self.layouts.as_deref()?.get(i)?;
        match cell {
            None => Some(RawValue::Data(col.base.null_value())),
            Some((start, len)) => {
                decode_value(col, kind, kept.bytes.get(start..start + len)?, kept.lossy)
            }
        }
    }

    /// Appends the next packet to the read buffer, bounded by `Config::command_timeout` as the
    /// token stream is.
    async fn fill(&mut self) -> crate::Result<()> {
        let timeout = self.timeout;
        let conn = self.ts.conn_mut();
        let poison = conn.command_desync_flag();
        let mut delay: Option<futures_timer::Delay> = None;
        std::future::poll_fn(|cx| match conn.poll_fill(cx) {
            Poll::Ready(r) => Poll::Ready(r),
            Poll::Pending => {
                let Some(timeout) = timeout else {
                    return Poll::Pending;
                };
                let d = delay.get_or_insert_with(|| futures_timer::Delay::new(timeout));
                match Pin::new(d).poll(cx) {
                    Poll::Ready(()) => {
                        poison.store(true, Ordering::Release);
                        Poll::Ready(Err(Error::Io {
                            kind: std::io::ErrorKind::TimedOut,
                            message: format!(
                                "the server did not send the next part of the command result \
                                 within {timeout:?}; the connection is now out of sync and must \
                                 be dropped"
                            ),
                        }))
                    }
                    Poll::Pending => Poll::Pending,
                }
            }
        })
        .await
    }

    /// The next row of any result set; `None` at the end of the response. A server error
    /// reported in the response is returned once the response is read.
    pub async fn next_row(&mut self) -> crate::Result<Option<RawRow<'_>>> {
        if self.pending > 0 {
            self.ts.conn_mut().consume(self.pending);
            self.pending = 0;
        }
        self.decoded = None;
        let next = loop {
            let conn = self.ts.conn_mut();
            if conn.is_eof() {
                // Lets the token stream report a recorded server error.
                match self.ts.next_token().await? {
                    None => break Next::End,
                    Some(_) => continue,
                }
            }
            let Some(&ty) = conn.buffered().first() else {
                self.fill().await?;
                continue;
            };
            if (ty == TokenType::Row as u8 || ty == TokenType::NbcRow as u8)
                && self.layouts.is_some()
            {
                let layouts = self.layouts.as_deref().unwrap_or(&[]);
                let scanned = scan_row(self.ts.conn_mut().buffered(), layouts, &mut self.cells);
                match scanned {
                    Ok(len) => {
                        let conn = self.ts.conn_mut();
                        let row = &conn.buffered()[..len];
                        gather_chunks(row, &mut self.cells, &mut self.scratch);
                        // The row's bytes are consumed whatever the outcome, as the usual
                        // decoder consumes a row it fails on.
                        self.pending = len;
                        let columns = self.meta.as_ref().map_or(&[][..], |m| m.columns.as_slice());
                        for (i, loc) in self.cells.iter().enumerate() {
                            let v = match *loc {
                                Loc::Buf { start, len } => &row[start..start + len],
                                Loc::Scratch { start, len } => &self.scratch[start..start + len],
                                Loc::Null | Loc::Chunked { .. } => continue,
                            };
                            if let (Some(col), Some((_, kind))) = (columns.get(i), layouts.get(i)) {
                                check_value(col, *kind, v)?;
                            }
                        }
                        break Next::InBuffer;
                    }
                    Err(ScanError::Incomplete) => {
                        self.fill().await?;
                        continue;
                    }
                    Err(ScanError::Protocol(e)) => return Err(e),
                }
            }
            match self.ts.next_token().await? {
                Some(ReceivedToken::NewResultset(meta)) => {
                    self.layouts = meta.columns.iter().map(layout).collect();
                    self.meta = Some(meta);
                }
                Some(ReceivedToken::Row(row)) => {
                    self.decoded = Some(row);
                    break Next::Decoded;
                }
                Some(_) => {}
                None => break Next::End,
            }
        };
        let columns = match &self.meta {
            Some(m) => m.columns.as_slice(),
            None if matches!(next, Next::End) => &[],
            None => {
                return Err(Error::Protocol(
                    "ROW token arrived before any COLMETADATA".into(),
                ))
            }
        };
        let row = match next {
            Next::End => return Ok(None),
            Next::Decoded => match &self.decoded {
                Some(r) => RowRef::Decoded(r),
                None => return Ok(None),
            },
            Next::InBuffer => {
                let (buf, ctx) = self.ts.conn_mut().buffered_and_context();
                RowRef::InBuffer {
                    bytes: &buf[..self.pending],
                    scratch: &self.scratch,
                    cells: &self.cells,
                    layouts: self.layouts.as_deref().unwrap_or(&[]),
                    lossy: ctx.lossy_utf16(),
                }
            }
        };
        Ok(Some(RawRow { columns, row }))
    }
}

/// Test support: the in-buffer decoder checked against the usual decoder on crafted values,
/// including PLP values in several chunks (a code unit split across two) and every truncated
/// prefix of each row. This crate's own tests cannot run inside the workspace that vendors it
/// (its dev-dependencies are not there), so the workspace calls this instead; returns the number
/// of values checked, or what differed.
#[doc(hidden)]
pub fn raw_row_self_check() -> Result<usize, String> {
    self_check::run()
}

mod self_check {
    use super::*;
    use crate::tds::codec::{BaseMetaDataColumn, Encode, VarLenContext};
    use crate::tds::Context;
    use crate::SqlReadBytes;
    use futures_util::FutureExt;

    /// The usual decoder's input: the bytes, and a context.
    struct Reader {
        buf: BytesMut,
        ctx: Context,
    }

    impl AsyncRead for Reader {
        fn poll_read(
            self: Pin<&mut Self>,
            _cx: &mut std::task::Context<'_>,
            buf: &mut [u8],
        ) -> Poll<std::io::Result<usize>> {
            let this = self.get_mut();
            if this.buf.len() < buf.len() {
                return Poll::Ready(Err(std::io::ErrorKind::UnexpectedEof.into()));
            }
            buf.copy_from_slice(&this.buf.split_to(buf.len()));
            Poll::Ready(Ok(buf.len()))
        }
    }

    impl SqlReadBytes for Reader {
        fn debug_buffer(&self) {}
        fn context(&self) -> &Context {
            &self.ctx
        }
        fn context_mut(&mut self) -> &mut Context {
            &mut self.ctx
        }
    }

    fn column(ty: TypeInfo) -> MetaDataColumn<'static> {
        MetaDataColumn {
            base: BaseMetaDataColumn {
                flags: enumflags2::BitFlags::empty(),
                ty,
                table_name: None,
            },
            col_name: "c".into(),
        }
    }

    fn var(ty: VarLenType, len: usize) -> TypeInfo {
        TypeInfo::VarLenSized(VarLenContext::new(ty, len, None))
    }

    fn usual(
        col: &MetaDataColumn<'static>,
        bytes: &[u8],
        lossy: bool,
    ) -> Result<ColumnData<'static>, String> {
        let mut ctx = Context::new();
        ctx.set_lossy_utf16(lossy);
        let mut r = Reader {
            buf: BytesMut::from(bytes),
            ctx,
        };
        match ColumnData::decode(&mut r, &col.base.ty).now_or_never() {
            Some(Ok(v)) => Ok(v),
            Some(Err(e)) => Err(format!("usual decoder failed: {e}")),
            None => Err("usual decoder did not finish".into()),
        }
    }

    /// One value both ways (text compared as UTF-8); `Ok(false)` when both reject it.
    fn same(ty: TypeInfo, bytes: &[u8], lossy: bool) -> Result<bool, String> {
        let col = column(ty);
        let expected = usual(&col, bytes, lossy);
        let layouts = vec![layout(&col).ok_or("not an in-buffer type")?];
        let mut row = vec![TokenType::Row as u8];
        row.extend_from_slice(bytes);
        let mut cells = Vec::new();
        for cut in 1..row.len() {
            if !matches!(
                scan_row(&row[..cut], &layouts, &mut cells),
                Err(ScanError::Incomplete)
            ) {
                return Err(format!("{bytes:?}: a {cut}-byte prefix is not incomplete"));
            }
        }
        let len = match scan_row(&row, &layouts, &mut cells) {
            Ok(len) => len,
            Err(_) => return Err(format!("{bytes:?}: scan failed")),
        };
        if len != row.len() {
            return Err(format!("{bytes:?}: scanned {len} of {} bytes", row.len()));
        }
        let mut scratch = Vec::new();
        gather_chunks(&row, &mut cells, &mut scratch);
        let raw = RawRow {
            columns: std::slice::from_ref(&col),
            row: RowRef::InBuffer {
                bytes: &row,
                scratch: &scratch,
                cells: &cells,
                layouts: &layouts,
                lossy,
            },
        };
        // As `next_row`: the value is checked first, then read.
        let checked = match cells[0] {
            Loc::Buf { start, len } => check_value(&col, layouts[0].1, &row[start..start + len]),
            Loc::Scratch { start, len } => {
                check_value(&col, layouts[0].1, &scratch[start..start + len])
            }
            Loc::Null | Loc::Chunked { .. } => Ok(()),
        };
        if checked.is_ok() && raw.value(0).is_none() {
            return Err(format!("{bytes:?}: checked, yet not readable"));
        }
        let got = checked.and_then(|()| raw.get(0).ok_or(Error::Protocol("no value".into()))?);
        let got = got.and_then(|v| match v {
            RawValue::Data(d) => Ok(d.into_owned_data()),
            RawValue::Text(t) => {
                let mut out = Vec::new();
                let nul = t.write_utf8(&mut out)?;
                let s = String::from_utf8(out).map_err(|_| Error::Encoding("utf8".into()))?;
                if nul != s.contains('\0') {
                    return Err(Error::Protocol("wrong U+0000 report".into()));
                }
                Ok(match &col.base.ty {
                    TypeInfo::Xml { .. } => {
                        ColumnData::Xml(Some(Cow::Owned(crate::xml::XmlData::new(s))))
                    }
                    _ => ColumnData::String(Some(s.into())),
                })
            }
        });
        match (got, expected) {
            (Ok(g), Ok(e)) if g == e => Ok(true),
            (Err(_), Err(_)) => Ok(false),
            (g, e) => Err(format!("{bytes:?}: in place {g:?}, usual {e:?}")),
        }
    }

    fn encoded<T: Encode<BytesMut>>(v: T) -> Vec<u8> {
        let mut b = BytesMut::new();
        // Only values the encoder accepts are used below.
        let _ = v.encode(&mut b);
        b.to_vec()
    }

    fn prefixed(mut b: Vec<u8>) -> Vec<u8> {
        b.insert(0, b.len() as u8);
        b
    }

    fn utf16(s: &str) -> Vec<u8> {
        s.encode_utf16().flat_map(u16::to_le_bytes).collect()
    }

    pub(super) fn run() -> Result<usize, String> {
        use FixedLenType as F;
        let mut cases: Vec<(TypeInfo, Vec<u8>, bool)> = vec![
            (
                TypeInfo::FixedLen(F::Int4),
                (-7i32).to_le_bytes().to_vec(),
                true,
            ),
            (
                TypeInfo::FixedLen(F::Int8),
                i64::MIN.to_le_bytes().to_vec(),
                true,
            ),
            (
                TypeInfo::FixedLen(F::Int2),
                (-2i16).to_le_bytes().to_vec(),
                true,
            ),
            (TypeInfo::FixedLen(F::Int1), vec![255], true),
            (TypeInfo::FixedLen(F::Bit), vec![2], true),
            (
                TypeInfo::FixedLen(F::Float8),
                1.5f64.to_le_bytes().to_vec(),
                true,
            ),
            (
                TypeInfo::FixedLen(F::Float4),
                (-0.25f32).to_le_bytes().to_vec(),
                true,
            ),
            (
                TypeInfo::FixedLen(F::Datetime),
                vec![1, 2, 3, 4, 5, 6, 7, 0],
                true,
            ),
            (TypeInfo::FixedLen(F::Datetime4), vec![1, 2, 3, 4], true),
            (
                TypeInfo::FixedLen(F::Money),
                vec![0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4],
                true,
            ),
            (
                TypeInfo::FixedLen(F::Money4),
                (-123_456i32).to_le_bytes().to_vec(),
                true,
            ),
            (var(VarLenType::Intn, 1), vec![1, 9], true),
            (var(VarLenType::Intn, 2), vec![2, 1, 0x80], true),
            (var(VarLenType::Intn, 4), vec![4, 1, 2, 3, 0x80], true),
            (
                var(VarLenType::Intn, 8),
                vec![8, 1, 2, 3, 4, 5, 6, 7, 0x80],
                true,
            ),
            (var(VarLenType::Intn, 4), vec![0], true),
            (var(VarLenType::Intn, 4), vec![3, 1, 2, 3], false),
            (var(VarLenType::Bitn, 1), vec![1, 1], true),
            (var(VarLenType::Bitn, 1), vec![0], true),
            (
                var(VarLenType::Floatn, 8),
                vec![8, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f],
                true,
            ),
            (var(VarLenType::Floatn, 4), vec![4, 0, 0, 0x80, 0x3f], true),
            (
                var(VarLenType::Money, 8),
                vec![8, 0xfe, 0xff, 0xff, 0xff, 9, 8, 7, 6],
                true,
            ),
            (var(VarLenType::Money, 4), vec![4, 1, 2, 3, 4], true),
            (
                var(VarLenType::Datetimen, 8),
                vec![8, 1, 2, 3, 0, 5, 6, 7, 0],
                true,
            ),
            (var(VarLenType::Datetimen, 4), vec![4, 1, 2, 3, 4], true),
            (
                var(VarLenType::Guid, 16),
                [vec![16u8], (0u8..16).collect()].concat(),
                true,
            ),
            (var(VarLenType::Guid, 16), vec![0], true),
            (var(VarLenType::Guid, 16), vec![4, 1, 2, 3, 4], false),
            (
                TypeInfo::VarLenSizedPrecision {
                    ty: VarLenType::Decimaln,
                    size: 17,
                    precision: 18,
                    scale: 4,
                },
                vec![0],
                true,
            ),
        ];
        #[cfg(feature = "tds73")]
        {
            cases.push((var(VarLenType::Daten, 3), vec![3, 0x11, 0x40, 0x0b], true));
            cases.push((var(VarLenType::Datetime2, 7), vec![0], true));
            cases.push((var(VarLenType::Datetime2, 7), vec![2, 1, 2], false));
            for scale in 0u8..=7 {
                let t = Time::new(86_399 * 10u64.pow(u32::from(scale)) + 3, scale);
                let d = DateTime2::new(Date::new(3_652_058), t);
                let s = scale as usize;
                cases.push((var(VarLenType::Datetime2, s), prefixed(encoded(d)), true));
                cases.push((var(VarLenType::Timen, s), prefixed(encoded(t)), true));
                let dto = DateTimeOffset::new(d, -840);
                cases.push((
                    var(VarLenType::DatetimeOffsetn, s),
                    prefixed(encoded(dto)),
                    true,
                ));
            }
        }
        for (v, scale) in [
            (0i128, 0u8),
            (-1, 2),
            (123_456_789_012, 4),
            (-99_999_999_999_999_999_999_999_999, 10),
            (99_999_999_999_999_999_999_999_999_999_999_999_999, 38),
        ] {
            let ty = TypeInfo::VarLenSizedPrecision {
                ty: VarLenType::Numericn,
                size: 17,
                precision: 38,
                scale,
            };
            cases.push((ty, encoded(Numeric::new_with_scale(v, scale)), true));
        }
        for s in [
            "",
            "plain ascii",
            "café Zürich 東京 😀",
            "\u{7f}\u{80}",
            "a\0b",
            "abcdefgh\0ijklmnop",
            "\0bcdefghijklmnopqrstuvwxyz",
            "abcdefghijklmnop\0",
            "é\0",
            "abcdefgh",
            "0123456789abcdefé",
            "abcdefghijklmnop😀xyz\u{7ff}\u{800}\u{ffff}\u{10ffff}",
        ] {
            let w = utf16(s);
            let sized = [(w.len() as u16).to_le_bytes().to_vec(), w.clone()].concat();
            cases.push((var(VarLenType::NVarchar, 200), sized, true));
            // PLP in one chunk, in chunks of 3 and 1 bytes (code units split across chunks), with
            // a known and an unknown total length.
            for chunk in [w.len().max(1), 3, 1] {
                for total in [w.len() as u64, 0xffff_ffff_ffff_fffe] {
                    let mut b = total.to_le_bytes().to_vec();
                    for c in w.chunks(chunk) {
                        b.extend_from_slice(&(c.len() as u32).to_le_bytes());
                        b.extend_from_slice(c);
                    }
                    b.extend_from_slice(&0u32.to_le_bytes());
                    cases.push((var(VarLenType::NVarchar, 0xffff), b.clone(), true));
                    let xml = TypeInfo::Xml {
                        schema: None,
                        size: 0xffff_ffff_ffff_fffe,
                    };
                    cases.push((xml, b, true));
                }
            }
        }
        // An unpaired surrogate: rejected, or replaced when lossy.
        // A high surrogate before an ASCII unit, a lone low one, one at the end of a long value.
        for units in [
            vec![0xd800u16, 0x61],
            vec![0xdc00],
            [vec![0x61u16; 16], vec![0xdbff]].concat(),
            vec![0xd83d, 0xde00, 0xde00],
        ] {
            let w: Vec<u8> = units.iter().flat_map(|u| u.to_le_bytes()).collect();
            let b = [(w.len() as u16).to_le_bytes().to_vec(), w].concat();
            cases.push((var(VarLenType::NVarchar, 200), b, false));
        }
        let lone = [2u8, 0, 0x00, 0xd8].to_vec();
        cases.push((var(VarLenType::NVarchar, 200), lone.clone(), false));
        cases.push((var(VarLenType::NChar, 200), lone, false));
        cases.push((var(VarLenType::NVarchar, 200), vec![0xff, 0xff], true));
        cases.push((var(VarLenType::NVarchar, 200), vec![1, 0, b'a'], false));
        cases.push((var(VarLenType::NVarchar, 0xffff), vec![0xff; 8], true));
        cases.push((var(VarLenType::BigVarBin, 100), vec![3, 0, 1, 2, 3], true));
        cases.push((
            var(VarLenType::BigVarBin, 0xffff),
            vec![
                2, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 7, 1, 0, 0, 0, 8, 0, 0, 0, 0,
            ],
            true,
        ));
        // varchar in code page 1252 (LCID 0x0409, sort id 52): 0xE9 is "é"; in Shift_JIS (LCID
        // 0x0411) a lone lead byte 0x81 is invalid.
        let ansi = TypeInfo::VarLenSized(VarLenContext::new(
            VarLenType::BigVarChar,
            50,
            Some(crate::tds::Collation::new(0x0409, 52)),
        ));
        cases.push((ansi.clone(), vec![4, 0, b'c', b'a', b'f', 0xe9], true));
        cases.push((ansi.clone(), vec![2, 0, b'o', b'k'], true));
        cases.push((ansi, vec![1, 0, 0x81], true));
        let sjis = TypeInfo::VarLenSized(VarLenContext::new(
            VarLenType::BigVarChar,
            50,
            Some(crate::tds::Collation::new(0x0411, 0)),
        ));
        cases.push((sjis.clone(), vec![4, 0, b'a', 0x82, 0xa0, b'z'], true));
        cases.push((sjis, vec![1, 0, 0x81], false));
        cases.push((var(VarLenType::BigVarChar, 50), vec![1, 0, b'a'], false));

        let mut checked = 0;
        for (ty, bytes, valid) in cases {
            for lossy in [false, true] {
                let decoded = same(ty.clone(), &bytes, lossy)?;
                if valid && !decoded {
                    return Err(format!("{bytes:?}: rejected by both decoders"));
                }
                // Lossy decoding may accept what strict decoding rejects, nothing else may.
                if !valid && decoded && !lossy {
                    return Err(format!("{bytes:?}: accepted by both decoders"));
                }
                checked += 1;
            }
        }
        nbc_row()?;
        Ok(checked + 1)
    }

    /// NBCROW: a NULL in the bitmap has no bytes in the row.
    fn nbc_row() -> Result<(), String> {
        let cols = [
            column(TypeInfo::FixedLen(FixedLenType::Int4)),
            column(var(VarLenType::NVarchar, 20)),
            column(var(VarLenType::Intn, 8)),
        ];
        let layouts: Vec<_> = cols.iter().filter_map(layout).collect();
        let mut row = vec![TokenType::NbcRow as u8, 0b010];
        row.extend_from_slice(&5i32.to_le_bytes());
        row.push(8);
        row.extend_from_slice(&9i64.to_le_bytes());
        let mut cells = Vec::new();
        let len = scan_row(&row, &layouts, &mut cells).map_err(|_| "nbc scan failed")?;
        if len != row.len() {
            return Err("nbc row length".into());
        }
        let raw = RawRow {
            columns: &cols,
            row: RowRef::InBuffer {
                bytes: &row,
                scratch: &[],
                cells: &cells,
                layouts: &layouts,
                lossy: false,
            },
        };
        let got: Vec<_> = raw
            .values()
            .map(|v| match v {
                Ok(RawValue::Data(d)) => Ok(d.into_owned_data()),
                other => Err(format!("{other:?}")),
            })
            .collect::<Result<_, _>>()?;
        let want = vec![
            ColumnData::I32(Some(5)),
            ColumnData::String(None),
            ColumnData::I64(Some(9)),
        ];
        if got != want {
            return Err(format!("nbc row: {got:?}"));
        }
        Ok(())
    }

    trait IntoOwnedData {
        fn into_owned_data(self) -> ColumnData<'static>;
    }

    impl IntoOwnedData for ColumnData<'_> {
        fn into_owned_data(self) -> ColumnData<'static> {
            match self {
                ColumnData::String(s) => ColumnData::String(s.map(|s| Cow::Owned(s.into_owned()))),
                ColumnData::Binary(b) => ColumnData::Binary(b.map(|b| Cow::Owned(b.into_owned()))),
                ColumnData::Xml(x) => ColumnData::Xml(x.map(|x| Cow::Owned(x.into_owned()))),
                ColumnData::U8(v) => ColumnData::U8(v),
                ColumnData::I16(v) => ColumnData::I16(v),
                ColumnData::I32(v) => ColumnData::I32(v),
                ColumnData::I64(v) => ColumnData::I64(v),
                ColumnData::F32(v) => ColumnData::F32(v),
                ColumnData::F64(v) => ColumnData::F64(v),
                ColumnData::Bit(v) => ColumnData::Bit(v),
                ColumnData::Guid(v) => ColumnData::Guid(v),
                ColumnData::Numeric(v) => ColumnData::Numeric(v),
                ColumnData::DateTime(v) => ColumnData::DateTime(v),
                ColumnData::SmallDateTime(v) => ColumnData::SmallDateTime(v),
                #[cfg(feature = "tds73")]
                ColumnData::Time(v) => ColumnData::Time(v),
                #[cfg(feature = "tds73")]
                ColumnData::Date(v) => ColumnData::Date(v),
                #[cfg(feature = "tds73")]
                ColumnData::DateTime2(v) => ColumnData::DateTime2(v),
                #[cfg(feature = "tds73")]
                ColumnData::DateTimeOffset(v) => ColumnData::DateTimeOffset(v),
            }
        }
    }
}
