//! Values on the wire: encoding row values for a result column, and decoding the values a
//! client sends (RPC parameters, bulk-load rows).

use tds_testserver_engine::Value;
use thiserror::Error;

use super::reader::{DecodeError, Reader, utf16_into, utf16_to_string};
use super::type_info::{StrKind, WireType};

/// A value the engine produced does not fit its column's wire type.
#[derive(Debug, Error)]
#[error("value {value} cannot be sent as {ty:?}")]
pub struct EncodeError {
    pub value: String,
    pub ty: WireType,
}

fn mismatch(v: &Value, ty: &WireType) -> EncodeError {
    let mut value = format!("{v:?}");
    value.truncate(80);
    EncodeError {
        value,
        ty: ty.clone(),
    }
}

const PLP_NULL: u64 = u64::MAX;
const PLP_UNKNOWN_LEN: u64 = u64::MAX - 1;

/// Appends UTF-16LE. A leading run of ASCII, the common case, is widened eight bytes at a time
/// (each byte spread into a unit with a zero high byte) in one pass; from the first eight bytes
/// holding a non-ASCII one, the text is encoded unit by unit. Streaming text columns spent 7% of
/// the server's time here when ASCII took a check pass, a zero-fill and a byte loop.
pub fn put_utf16(out: &mut Vec<u8>, s: &str) {
    let bytes = s.as_bytes();
    let start = out.len();
    out.resize(start + bytes.len() * 2, 0);
    let mut ascii = 0;
    for (unit, chunk) in out[start..].chunks_exact_mut(16).zip(bytes.chunks_exact(8)) {
        let mut eight = [0u8; 8];
        eight.copy_from_slice(chunk);
        let x = u64::from_le_bytes(eight);
        if x & 0x8080_8080_8080_8080 != 0 {
            break;
        }
        unit[..8].copy_from_slice(&widen4(x as u32).to_le_bytes());
        unit[8..].copy_from_slice(&widen4((x >> 32) as u32).to_le_bytes());
        ascii += 8;
    }
    out.truncate(start + ascii * 2);
    // Everything before `ascii` is ASCII, so it is a character boundary.
    for u in s[ascii..].encode_utf16() {
        out.extend_from_slice(&u.to_le_bytes());
    }
}

/// Four bytes spread into four little-endian UTF-16 units.
#[inline]
fn widen4(v: u32) -> u64 {
    let t = u64::from(v);
    let t = (t | (t << 16)) & 0x0000_ffff_0000_ffff;
    (t | (t << 8)) & 0x00ff_00ff_00ff_00ff
}

fn int_of(v: &Value) -> Option<i64> {
    Some(match *v {
        Value::TinyInt(x) => i64::from(x),
        Value::SmallInt(x) => i64::from(x),
        Value::Int(x) => i64::from(x),
        Value::BigInt(x) => x,
        Value::Bit(b) => i64::from(b),
        _ => return None,
    })
}

fn pow10(n: u8) -> i128 {
    10i128.pow(u32::from(n))
}

/// Rescales a decimal mantissa (rounding half away from zero when scale shrinks).
fn rescale(m: i128, from: u8, to: u8) -> Option<i128> {
    if to >= from {
        m.checked_mul(pow10(to - from))
    } else {
        let d = pow10(from - to);
        let q = m / d;
        let r = m % d;
        Some(if r.abs() * 2 >= d { q + m.signum() } else { q })
    }
}

fn time_units(t100ns: u64, scale: u8) -> u64 {
    t100ns / 10u64.pow(u32::from(7 - scale.min(7)))
}

fn time_len(scale: u8) -> usize {
    match scale {
        0..=2 => 3,
        3..=4 => 4,
        _ => 5,
    }
}

fn put_time(out: &mut Vec<u8>, t100ns: u64, scale: u8) {
    let units = time_units(t100ns, scale).to_le_bytes();
    out.extend_from_slice(&units[..time_len(scale)]);
}

fn put_date(out: &mut Vec<u8>, days: u32) {
    out.extend_from_slice(&days.to_le_bytes()[..3]);
}

/// RFC 4122 order to SQL Server's mixed-endian order (and back: the swap is its own inverse).
pub fn guid_swap(b: &[u8; 16]) -> [u8; 16] {
    let mut w = *b;
    w[0..4].reverse();
    w[4..6].reverse();
    w[6..8].reverse();
    w
}

/// Appends a u16 length placeholder and returns its position.
fn len16_slot(out: &mut Vec<u8>) -> usize {
    out.extend_from_slice(&[0, 0]);
    out.len() - 2
}

fn put_str_data(out: &mut Vec<u8>, kind: StrKind, v: &Value, ty: &WireType) -> Result<(), EncodeError> {
    match (kind, v) {
        (StrKind::Unicode, Value::String(s)) => put_utf16(out, s),
        (StrKind::Ansi(c), Value::String(s)) => {
            if c.lossy {
                c.code_page.encode_into(out, s);
            } else {
                // A stored varchar value always fits its column's code page; one that does not
                // is an expression whose collation this server did not follow: an error, not
                // a silent '?'.
                let start = out.len();
                if !c.code_page.encode_into(out, s) {
                    out.truncate(start);
                    return Err(EncodeError {
                        value: format!(
                            "text not in code page {} (collation of the expression not tracked)",
                            c.code_page.number()
                        ),
                        ty: ty.clone(),
                    });
                }
            }
        }
        (StrKind::Binary, Value::Binary(b)) => out.extend_from_slice(b),
        _ => return Err(mismatch(v, ty)),
    }
    Ok(())
}

/// Appends one value of a result column (ROW token encoding). A NULL for a fixed-length
/// (NOT NULL) type cannot be encoded in a ROW; callers use NBCROW for rows with NULLs in such
/// columns.
pub fn encode(out: &mut Vec<u8>, ty: &WireType, v: &Value) -> Result<(), EncodeError> {
    let null = v.is_null();
    match *ty {
        WireType::Int { size, n } => {
            if null {
                return fixed_null(out, n, v, ty);
            }
            let x = int_of(v).ok_or_else(|| mismatch(v, ty))?;
            let fits = match size {
                1 => (0..=255).contains(&x),
                2 => i16::try_from(x).is_ok(),
                4 => i32::try_from(x).is_ok(),
                _ => true,
            };
            if !fits {
                return Err(mismatch(v, ty));
            }
            if n {
                out.push(size);
            }
            out.extend_from_slice(&x.to_le_bytes()[..usize::from(size)]);
        }
        WireType::Bit { n } => {
            if null {
                return fixed_null(out, n, v, ty);
            }
            let b = match *v {
                Value::Bit(b) => b,
                _ => int_of(v).ok_or_else(|| mismatch(v, ty))? != 0,
            };
            if n {
                out.push(1);
            }
            out.push(u8::from(b));
        }
        WireType::Float { size, n } => {
            if null {
                return fixed_null(out, n, v, ty);
            }
            let f = match *v {
                Value::Float(f) => f,
                Value::Real(f) => f64::from(f),
                _ => int_of(v).ok_or_else(|| mismatch(v, ty))? as f64,
            };
            if n {
                out.push(size);
            }
            if size == 4 {
                out.extend_from_slice(&(f as f32).to_le_bytes());
            } else {
                out.extend_from_slice(&f.to_le_bytes());
            }
        }
        WireType::Money { size, n } => {
            if null {
                return fixed_null(out, n, v, ty);
            }
            let m = match *v {
                Value::Money(m) => m,
                Value::Decimal { mantissa, scale } => rescale(mantissa, scale, 4)
                    .and_then(|m| i64::try_from(m).ok())
                    .ok_or_else(|| mismatch(v, ty))?,
                _ => return Err(mismatch(v, ty)),
            };
            if n {
                out.push(size);
            }
            if size == 4 {
                let m = i32::try_from(m).map_err(|_| mismatch(v, ty))?;
                out.extend_from_slice(&m.to_le_bytes());
            } else {
                out.extend_from_slice(&((m >> 32) as i32).to_le_bytes());
                out.extend_from_slice(&(m as u32).to_le_bytes());
            }
        }
        WireType::DateTime { size, n } => {
            if null {
                return fixed_null(out, n, v, ty);
            }
            if n {
                out.push(size);
            }
            match (v, size) {
                (&Value::DateTime { days, ticks }, 8) => {
                    out.extend_from_slice(&days.to_le_bytes());
                    out.extend_from_slice(&ticks.to_le_bytes());
                }
                (&Value::SmallDateTime { days, minutes }, 4) => {
                    out.extend_from_slice(&days.to_le_bytes());
                    out.extend_from_slice(&minutes.to_le_bytes());
                }
                _ => return Err(mismatch(v, ty)),
            }
        }
        WireType::Decimal {
            precision,
            scale,
            size,
            ..
        } => {
            if null {
                out.push(0);
                return Ok(());
            }
            let m = match *v {
                Value::Decimal { mantissa, scale: s } => rescale(mantissa, s, scale),
                Value::Money(m) => rescale(i128::from(m), 4, scale),
                _ => int_of(v).and_then(|x| rescale(i128::from(x), 0, scale)),
            }
            .ok_or_else(|| mismatch(v, ty))?;
            if m.unsigned_abs() >= pow10(precision).unsigned_abs() {
                return Err(mismatch(v, ty));
            }
            out.push(size);
            out.push(u8::from(m >= 0));
            out.extend_from_slice(&m.unsigned_abs().to_le_bytes()[..usize::from(size - 1)]);
        }
        WireType::Date => match *v {
            Value::Null => out.push(0),
            Value::Date(days) => {
                out.push(3);
                put_date(out, days);
            }
            _ => return Err(mismatch(v, ty)),
        },
        WireType::Time { scale } => match *v {
            Value::Null => out.push(0),
            Value::Time(t) => {
                out.push(time_len(scale) as u8);
                put_time(out, t, scale);
            }
            _ => return Err(mismatch(v, ty)),
        },
        WireType::DateTime2 { scale } => match *v {
            Value::Null => out.push(0),
            Value::DateTime2 { days, time } => {
                out.push(time_len(scale) as u8 + 3);
                put_time(out, time, scale);
                put_date(out, days);
            }
            Value::Date(days) => {
                out.push(time_len(scale) as u8 + 3);
                put_time(out, 0, scale);
                put_date(out, days);
            }
            _ => return Err(mismatch(v, ty)),
        },
        WireType::DateTimeOffset { scale } => match *v {
            Value::Null => out.push(0),
            Value::DateTimeOffset {
                days,
                time,
                offset_minutes,
            } => {
                out.push(time_len(scale) as u8 + 5);
                put_time(out, time, scale);
                put_date(out, days);
                out.extend_from_slice(&offset_minutes.to_le_bytes());
            }
            _ => return Err(mismatch(v, ty)),
        },
        WireType::Guid => match v {
            Value::Null => out.push(0),
            Value::Guid(g) => {
                out.push(16);
                out.extend_from_slice(&guid_swap(g));
            }
            _ => return Err(mismatch(v, ty)),
        },
        WireType::Sized { kind, fixed, max_len } => {
            if null {
                out.extend_from_slice(&[0xFF, 0xFF]);
                return Ok(());
            }
            let slot = len16_slot(out);
            put_str_data(out, kind, v, ty)?;
            let mut len = out.len() - slot - 2;
            if fixed && len < usize::from(max_len) {
                // char/nchar/binary values are padded to the declared length, as SQL Server stores them.
                let pad = usize::from(max_len) - len;
                match kind {
                    StrKind::Unicode => (0..pad / 2).for_each(|_| out.extend_from_slice(&[0x20, 0])),
                    StrKind::Ansi(_) => out.resize(out.len() + pad, 0x20),
                    StrKind::Binary => out.resize(out.len() + pad, 0),
                }
                len = out.len() - slot - 2;
            }
            let len = u16::try_from(len)
                .ok()
                .filter(|&l| l != 0xFFFF)
                .ok_or_else(|| mismatch(v, ty))?;
            out[slot..slot + 2].copy_from_slice(&len.to_le_bytes());
        }
        WireType::Plp { kind } => {
            if null {
                out.extend_from_slice(&PLP_NULL.to_le_bytes());
                return Ok(());
            }
            put_plp(out, |out| put_str_data(out, kind, v, ty))?;
        }
        WireType::Xml => match v {
            Value::Null => out.extend_from_slice(&PLP_NULL.to_le_bytes()),
            Value::String(s) => put_plp(out, |out| {
                put_utf16(out, s);
                Ok(())
            })?,
            _ => return Err(mismatch(v, ty)),
        },
        WireType::Lob { kind } => {
            if null {
                out.push(0);
                return Ok(());
            }
            // A text pointer and timestamp precede the data; clients only check their lengths.
            out.push(16);
            out.extend_from_slice(&[0xAB; 16]);
            out.extend_from_slice(&[0; 8]);
            let slot = out.len();
            out.extend_from_slice(&[0; 4]);
            put_str_data(out, kind, v, ty)?;
            let len = (out.len() - slot - 4) as u32;
            out[slot..slot + 4].copy_from_slice(&len.to_le_bytes());
        }
        WireType::RowVersion => match v {
            Value::Null => out.extend_from_slice(&[0xFF, 0xFF]),
            Value::Binary(b) if b.len() == 8 => {
                out.extend_from_slice(&[8, 0]);
                out.extend_from_slice(b);
            }
            _ => return Err(mismatch(v, ty)),
        },
        WireType::Variant => encode_variant(out, v).ok_or_else(|| mismatch(v, ty))?,
        WireType::Null => return Err(mismatch(v, ty)),
    }
    Ok(())
}

/// NULL in an N-type is a zero length byte; the fixed (NOT NULL) forms cannot express it.
fn fixed_null(out: &mut Vec<u8>, n: bool, v: &Value, ty: &WireType) -> Result<(), EncodeError> {
    if n {
        out.push(0);
        Ok(())
    } else {
        Err(mismatch(v, ty))
    }
}

/// PLP with a known total length: one chunk, then the zero terminator.
fn put_plp(
    out: &mut Vec<u8>,
    data: impl FnOnce(&mut Vec<u8>) -> Result<(), EncodeError>,
) -> Result<(), EncodeError> {
    let slot = out.len();
    out.extend_from_slice(&[0; 12]);
    data(out)?;
    let len = out.len() - slot - 12;
    if len == 0 {
        // The total length is 0 and there are no chunks: just the terminator.
        out.truncate(slot + 8);
    } else {
        out[slot..slot + 8].copy_from_slice(&(len as u64).to_le_bytes());
        out[slot + 8..slot + 12].copy_from_slice(&(len as u32).to_le_bytes());
    }
    out.extend_from_slice(&[0; 4]);
    Ok(())
}

/// sql_variant: `u32 len, u8 base type, u8 prop bytes, props, value`; NULL is length 0.
fn encode_variant(out: &mut Vec<u8>, v: &Value) -> Option<()> {
    let slot = out.len();
    out.extend_from_slice(&[0; 4]);
    match v {
        Value::Null => {
            return Some(());
        }
        Value::TinyInt(x) => out.extend_from_slice(&[0x30, 0, *x]),
        Value::SmallInt(x) => {
            out.extend_from_slice(&[0x34, 0]);
            out.extend_from_slice(&x.to_le_bytes());
        }
        Value::Int(x) => {
            out.extend_from_slice(&[0x38, 0]);
            out.extend_from_slice(&x.to_le_bytes());
        }
        Value::BigInt(x) => {
            out.extend_from_slice(&[0x7F, 0]);
            out.extend_from_slice(&x.to_le_bytes());
        }
        Value::Bit(b) => out.extend_from_slice(&[0x32, 0, u8::from(*b)]),
        Value::Real(f) => {
            out.extend_from_slice(&[0x3B, 0]);
            out.extend_from_slice(&f.to_le_bytes());
        }
        Value::Float(f) => {
            out.extend_from_slice(&[0x3E, 0]);
            out.extend_from_slice(&f.to_le_bytes());
        }
        Value::Decimal { mantissa, scale } => {
            out.extend_from_slice(&[0x6C, 2, 38, *scale, u8::from(*mantissa >= 0)]);
            out.extend_from_slice(&mantissa.unsigned_abs().to_le_bytes());
        }
        Value::Guid(g) => {
            out.extend_from_slice(&[0x24, 0]);
            out.extend_from_slice(&guid_swap(g));
        }
        Value::Money(m) => {
            out.extend_from_slice(&[0x3C, 0]);
            out.extend_from_slice(&((*m >> 32) as i32).to_le_bytes());
            out.extend_from_slice(&(*m as u32).to_le_bytes());
        }
        Value::DateTime { days, ticks } => {
            out.extend_from_slice(&[0x3D, 0]);
            out.extend_from_slice(&days.to_le_bytes());
            out.extend_from_slice(&ticks.to_le_bytes());
        }
        Value::SmallDateTime { days, minutes } => {
            out.extend_from_slice(&[0x3A, 0]);
            out.extend_from_slice(&days.to_le_bytes());
            out.extend_from_slice(&minutes.to_le_bytes());
        }
        Value::Time(t) => {
            out.extend_from_slice(&[0x29, 1, 7]);
            put_time(out, *t, 7);
        }
        Value::DateTimeOffset {
            days,
            time,
            offset_minutes,
        } => {
            out.extend_from_slice(&[0x2B, 1, 7]);
            put_time(out, *time, 7);
            put_date(out, *days);
            out.extend_from_slice(&offset_minutes.to_le_bytes());
        }
        Value::Date(d) => {
            out.extend_from_slice(&[0x28, 0]);
            put_date(out, *d);
        }
        Value::DateTime2 { days, time } => {
            out.extend_from_slice(&[0x2A, 1, 7]);
            put_time(out, *time, 7);
            put_date(out, *days);
        }
        Value::String(s) => {
            // tiberius reads the collation before the max length.
            out.extend_from_slice(&[0xE7, 7]);
            out.extend_from_slice(&super::type_info::COLLATION);
            out.extend_from_slice(&8000u16.to_le_bytes());
            put_utf16(out, s);
        }
        Value::Binary(b) => {
            out.extend_from_slice(&[0xA5, 2]);
            out.extend_from_slice(&8000u16.to_le_bytes());
            out.extend_from_slice(b);
        }
    }
    let len = (out.len() - slot - 4) as u32;
    out[slot..slot + 4].copy_from_slice(&len.to_le_bytes());
    Some(())
}

fn invalid(msg: String) -> DecodeError {
    DecodeError::Invalid(msg)
}

fn le_uint(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a[..b.len()].copy_from_slice(b);
    u64::from_le_bytes(a)
}

fn str_value(kind: StrKind, bytes: &[u8]) -> Result<Value, DecodeError> {
    Ok(match kind {
        StrKind::Unicode => Value::String(
            utf16_to_string(bytes).ok_or_else(|| invalid("invalid UTF-16 string value".into()))?,
        ),
        StrKind::Ansi(c) => Value::String(c.code_page.decode(bytes)),
        StrKind::Binary => Value::Binary(bytes.to_vec()),
    })
}

/// Reads a PLP body (after its u64 length) into one buffer.
fn read_plp_chunks(r: &mut Reader<'_>, total: u64) -> Result<Vec<u8>, DecodeError> {
    let mut data = Vec::new();
    read_plp_into(r, total, &mut data)?;
    Ok(data)
}

/// Reads a PLP body (after its u64 length) into `data`, replacing its contents.
fn read_plp_into(r: &mut Reader<'_>, total: u64, data: &mut Vec<u8>) -> Result<(), DecodeError> {
    data.clear();
    if total != PLP_UNKNOWN_LEN {
        data.reserve(total.min(1 << 24) as usize);
    }
    loop {
        let chunk = r.u32("PLP chunk length")? as usize;
        if chunk == 0 {
            break;
        }
        data.extend_from_slice(r.bytes(chunk, "PLP chunk")?);
    }
    Ok(())
}

/// [`decode`] into `slot`, reusing the string it holds for Unicode text (the common string
/// values of a bulk load; a `String` per value was a tenth of the bulk-load profile). `plp`
/// is scratch space for values sent in chunks.
pub fn decode_into(
    r: &mut Reader<'_>,
    ty: &WireType,
    bulk: bool,
    slot: &mut Value,
    plp: &mut Vec<u8>,
) -> Result<(), DecodeError> {
    const W: &str = "value";
    let bytes: &[u8] = match *ty {
        WireType::Sized {
            kind: StrKind::Unicode,
            ..
        } => {
            let len = r.u16(W)?;
            if len == 0xFFFF {
                *slot = Value::Null;
                return Ok(());
            }
            r.bytes(usize::from(len), W)?
        }
        WireType::Plp {
            kind: StrKind::Unicode,
        } => {
            let total = r.u64(W)?;
            if total == PLP_NULL {
                *slot = Value::Null;
                return Ok(());
            }
            read_plp_into(r, total, plp)?;
            plp
        }
        _ => {
            *slot = decode(r, ty, bulk)?;
            return Ok(());
        }
    };
    if !matches!(slot, Value::String(_)) {
        *slot = Value::String(String::new());
    }
    if let Value::String(s) = slot
        && !utf16_into(s, bytes)
    {
        return Err(invalid("invalid UTF-16 string value".into()));
    }
    Ok(())
}

/// Reads one value a client sent. `bulk`: a bulk-load row (text/ntext/image values carry a
/// text pointer there; RPC parameters do not).
pub fn decode(r: &mut Reader<'_>, ty: &WireType, bulk: bool) -> Result<Value, DecodeError> {
    const W: &str = "value";
    Ok(match *ty {
        WireType::Null => Value::Null,
        WireType::Int { size, n } => {
            let len = if n { r.u8(W)? } else { size };
            let b = r.bytes(usize::from(len), W)?;
            match len {
                0 => Value::Null,
                1 => Value::TinyInt(b[0]),
                2 => Value::SmallInt(i16::from_le_bytes([b[0], b[1]])),
                4 => Value::Int(i32::from_le_bytes([b[0], b[1], b[2], b[3]])),
                8 => Value::BigInt(le_uint(b) as i64),
                l => return Err(invalid(format!("integer value of length {l}"))),
            }
        }
        WireType::Bit { n } => {
            let len = if n { r.u8(W)? } else { 1 };
            match len {
                0 => Value::Null,
                1 => Value::Bit(r.u8(W)? != 0),
                l => return Err(invalid(format!("bit value of length {l}"))),
            }
        }
        WireType::Float { size, n } => {
            let len = if n { r.u8(W)? } else { size };
            match len {
                0 => Value::Null,
                4 => Value::Real(f32::from_le_bytes(r.array(W)?)),
                8 => Value::Float(f64::from_le_bytes(r.array(W)?)),
                l => return Err(invalid(format!("float value of length {l}"))),
            }
        }
        WireType::Money { size, n } => {
            let len = if n { r.u8(W)? } else { size };
            match len {
                0 => Value::Null,
                4 => Value::Money(i64::from(i32::from_le_bytes(r.array(W)?))),
                8 => {
                    let hi = i32::from_le_bytes(r.array(W)?);
                    let lo = u32::from_le_bytes(r.array(W)?);
                    Value::Money((i64::from(hi) << 32) | i64::from(lo))
                }
                l => return Err(invalid(format!("money value of length {l}"))),
            }
        }
        WireType::DateTime { size, n } => {
            let len = if n { r.u8(W)? } else { size };
            match len {
                0 => Value::Null,
                4 => Value::SmallDateTime {
                    days: r.u16(W)?,
                    minutes: r.u16(W)?,
                },
                8 => Value::DateTime {
                    days: r.u32(W)? as i32,
                    ticks: r.u32(W)?,
                },
                l => return Err(invalid(format!("datetime value of length {l}"))),
            }
        }
        WireType::Decimal { scale, .. } => {
            let len = usize::from(r.u8(W)?);
            if len == 0 {
                Value::Null
            } else if !(2..=17).contains(&len) {
                return Err(invalid(format!("decimal value of length {len}")));
            } else {
                let b = r.bytes(len, W)?;
                let mut mag = [0u8; 16];
                mag[..len - 1].copy_from_slice(&b[1..]);
                let m = u128::from_le_bytes(mag);
                let m = i128::try_from(m).map_err(|_| invalid("decimal value out of range".into()))?;
                Value::Decimal {
                    mantissa: if b[0] == 0 { -m } else { m },
                    scale,
                }
            }
        }
        WireType::Date => match r.u8(W)? {
            0 => Value::Null,
            3 => Value::Date(le_uint(r.bytes(3, W)?) as u32),
            l => return Err(invalid(format!("date value of length {l}"))),
        },
        WireType::Time { scale } => match r.u8(W)? {
            0 => Value::Null,
            l @ 3..=5 => Value::Time(read_time(r, usize::from(l), scale)?),
            l => return Err(invalid(format!("time value of length {l}"))),
        },
        WireType::DateTime2 { scale } => match r.u8(W)? {
            0 => Value::Null,
            l @ 6..=8 => {
                let time = read_time(r, usize::from(l) - 3, scale)?;
                Value::DateTime2 {
                    time,
                    days: le_uint(r.bytes(3, W)?) as u32,
                }
            }
            l => return Err(invalid(format!("datetime2 value of length {l}"))),
        },
        WireType::DateTimeOffset { scale } => match r.u8(W)? {
            0 => Value::Null,
            l @ 8..=10 => {
                let time = read_time(r, usize::from(l) - 5, scale)?;
                let days = le_uint(r.bytes(3, W)?) as u32;
                let offset_minutes = r.u16(W)? as i16;
                Value::DateTimeOffset {
                    days,
                    time,
                    offset_minutes,
                }
            }
            l => return Err(invalid(format!("datetimeoffset value of length {l}"))),
        },
        WireType::Guid => match r.u8(W)? {
            0 => Value::Null,
            16 => Value::Guid(guid_swap(&r.array(W)?)),
            l => return Err(invalid(format!("uniqueidentifier value of length {l}"))),
        },
        WireType::Sized { kind, .. } => {
            let len = r.u16(W)?;
            if len == 0xFFFF {
                Value::Null
            } else {
                str_value(kind, r.bytes(usize::from(len), W)?)?
            }
        }
        WireType::RowVersion => {
            let len = r.u16(W)?;
            if len == 0xFFFF {
                Value::Null
            } else {
                Value::Binary(r.bytes(usize::from(len), W)?.to_vec())
            }
        }
        WireType::Plp { kind } => {
            let total = r.u64(W)?;
            if total == PLP_NULL {
                Value::Null
            } else {
                str_value(kind, &read_plp_chunks(r, total)?)?
            }
        }
        WireType::Xml => {
            let total = r.u64(W)?;
            if total == PLP_NULL {
                Value::Null
            } else {
                let data = read_plp_chunks(r, total)?;
                // XML may come with a UTF-16 byte-order mark.
                let data = data.strip_prefix(&[0xFF, 0xFE]).unwrap_or(&data);
                str_value(StrKind::Unicode, data)?
            }
        }
        WireType::Lob { kind } => {
            if bulk {
                let ptr = r.u8(W)?;
                if ptr == 0 {
                    return Ok(Value::Null);
                }
                r.skip(usize::from(ptr) + 8, "text pointer")?;
            }
            let len = r.u32(W)?;
            if len == u32::MAX {
                Value::Null
            } else {
                str_value(kind, r.bytes(len as usize, W)?)?
            }
        }
        WireType::Variant => {
            return Err(invalid(
                "sql_variant values from clients are not supported".into(),
            ));
        }
    })
}

fn read_time(r: &mut Reader<'_>, len: usize, scale: u8) -> Result<u64, DecodeError> {
    let units = le_uint(r.bytes(len, "time")?);
    Ok(units * 10u64.pow(u32::from(7 - scale.min(7))))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use tds_testserver_engine::SqlType;

    #[test]
    fn put_utf16_matches_encode_utf16_wherever_the_non_ascii_falls() {
        let mut texts: Vec<String> = vec![
            String::new(),
            "a".into(),
            "1234567".into(),
            "12345678".into(),
            "123456789".into(),
            "0123456789abcdef".into(),
            "\u{7f}\u{0}\u{1}~".repeat(5),
            "東京".into(),
            "emoji 😀 pair".into(),
        ];
        // One non-ASCII character at every position of a 20-byte ASCII text.
        for at in 0..20 {
            let mut t: String = "abcdefghijklmnopqrst".into();
            t.insert(at, 'é');
            texts.push(t);
        }
        for t in texts {
            let mut out = vec![0xAA];
            put_utf16(&mut out, &t);
            let mut expected = vec![0xAA];
            for u in t.encode_utf16() {
                expected.extend_from_slice(&u.to_le_bytes());
            }
            assert_eq!(out, expected, "{t:?}");
        }
    }

    fn enc(ty: SqlType, nullable: bool, v: &Value) -> Vec<u8> {
        let mut out = Vec::new();
        encode(&mut out, &WireType::for_column(ty, nullable), v).unwrap();
        out
    }

    #[test]
    fn golden_value_bytes() {
        assert_eq!(
            enc(SqlType::Int, false, &Value::Int(-2)),
            [0xFE, 0xFF, 0xFF, 0xFF]
        );
        assert_eq!(enc(SqlType::Int, true, &Value::Int(1)), [4, 1, 0, 0, 0]);
        assert_eq!(enc(SqlType::Int, true, &Value::Null), [0]);
        assert_eq!(
            enc(
                SqlType::Decimal {
                    precision: 5,
                    scale: 2
                },
                true,
                &Value::Decimal {
                    mantissa: 12345,
                    scale: 2
                }
            ),
            [5, 1, 0x39, 0x30, 0, 0]
        );
        assert_eq!(
            enc(
                SqlType::Decimal {
                    precision: 5,
                    scale: 2
                },
                true,
                &Value::Decimal {
                    mantissa: -5,
                    scale: 1
                }
            ),
            [5, 0, 50, 0, 0, 0]
        );
        assert_eq!(
            enc(
                SqlType::NVarChar { len: Some(10) },
                true,
                &Value::String("hi".into())
            ),
            [4, 0, b'h', 0, b'i', 0]
        );
        assert_eq!(
            enc(SqlType::NVarChar { len: Some(10) }, true, &Value::Null),
            [0xFF, 0xFF]
        );
        assert_eq!(
            enc(
                SqlType::VarChar { len: Some(10) },
                true,
                &Value::String("é€".into())
            ),
            [2, 0, 0xE9, 0x80]
        );
        assert_eq!(
            enc(SqlType::Char { len: 3 }, false, &Value::String("a".into())),
            [3, 0, b'a', b' ', b' ']
        );
        assert_eq!(
            enc(SqlType::NVarChar { len: None }, true, &Value::String("ab".into())),
            [4, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, b'a', 0, b'b', 0, 0, 0, 0, 0]
        );
        assert_eq!(
            enc(SqlType::VarBinary { len: None }, true, &Value::Binary(vec![])),
            [0; 12]
        );
        assert_eq!(
            enc(SqlType::VarBinary { len: None }, true, &Value::Null),
            [0xFF; 8]
        );
        // money 1.0001 = 10001 ten-thousandths: hi 0 then lo.
        assert_eq!(
            enc(SqlType::Money, false, &Value::Money(10001)),
            [0, 0, 0, 0, 0x11, 0x27, 0, 0]
        );
        assert_eq!(
            enc(SqlType::Money, true, &Value::Money(-1)),
            [8, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]
        );
        assert_eq!(enc(SqlType::Date, true, &Value::Date(0x010203)), [3, 3, 2, 1]);
        // 12:00:00.5 at scale 1 = 432005 tenths; length 3.
        assert_eq!(
            enc(SqlType::Time { scale: 1 }, true, &Value::Time(432_005_000_000)),
            [3, 0x85, 0x97, 0x06]
        );
        let g = [
            0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 9, 10, 11, 12, 13, 14, 15, 16,
        ];
        assert_eq!(
            enc(SqlType::UniqueIdentifier, true, &Value::Guid(g)),
            [16, 4, 3, 2, 1, 6, 5, 8, 7, 9, 10, 11, 12, 13, 14, 15, 16]
        );
        assert_eq!(
            enc(SqlType::SqlVariant, true, &Value::Int(7)),
            [6, 0, 0, 0, 0x38, 0, 7, 0, 0, 0]
        );
        assert_eq!(enc(SqlType::SqlVariant, true, &Value::Null), [0, 0, 0, 0]);
    }

    #[test]
    fn out_of_range_values_are_refused() {
        let mut out = Vec::new();
        let tiny = WireType::for_column(SqlType::TinyInt, true);
        assert!(encode(&mut out, &tiny, &Value::Int(256)).is_err());
        let dec = WireType::for_column(
            SqlType::Decimal {
                precision: 3,
                scale: 0,
            },
            true,
        );
        assert!(encode(&mut out, &dec, &Value::Int(1000)).is_err());
        let int = WireType::for_column(SqlType::Int, false);
        assert!(encode(&mut out, &int, &Value::Null).is_err());
        assert!(encode(&mut out, &int, &Value::String("1".into())).is_err());
    }

    #[test]
    fn every_type_round_trips_through_decode() {
        let cases: Vec<(SqlType, Value)> = vec![
            (SqlType::Bit, Value::Bit(true)),
            (SqlType::TinyInt, Value::TinyInt(255)),
            (SqlType::SmallInt, Value::SmallInt(i16::MIN)),
            (SqlType::Int, Value::Int(i32::MAX)),
            (SqlType::BigInt, Value::BigInt(i64::MIN)),
            (SqlType::Real, Value::Real(1.5)),
            (SqlType::Float, Value::Float(-2.25e300)),
            (SqlType::Money, Value::Money(i64::MIN)),
            (SqlType::SmallMoney, Value::Money(-2_147_483_648)),
            (
                SqlType::DateTime,
                Value::DateTime {
                    days: -53690,
                    ticks: 25_919_999,
                },
            ),
            (
                SqlType::SmallDateTime,
                Value::SmallDateTime {
                    days: 65535,
                    minutes: 1439,
                },
            ),
            (
                SqlType::Decimal {
                    precision: 38,
                    scale: 10,
                },
                Value::Decimal {
                    mantissa: -(10i128.pow(38) - 1),
                    scale: 10,
                },
            ),
            (
                SqlType::Numeric {
                    precision: 9,
                    scale: 0,
                },
                Value::Decimal {
                    mantissa: 999_999_999,
                    scale: 0,
                },
            ),
            (SqlType::Date, Value::Date(3_652_058)),
            (SqlType::Time { scale: 7 }, Value::Time(863_999_999_999)),
            (
                SqlType::DateTime2 { scale: 3 },
                Value::DateTime2 {
                    days: 1,
                    time: 10_000,
                },
            ),
            (
                SqlType::DateTimeOffset { scale: 7 },
                Value::DateTimeOffset {
                    days: 738_000,
                    time: 1,
                    offset_minutes: -840,
                },
            ),
            (SqlType::UniqueIdentifier, Value::Guid([7; 16])),
            (
                SqlType::NVarChar { len: Some(4000) },
                Value::String("ünïcödé 😀".into()),
            ),
            (SqlType::VarChar { len: Some(10) }, Value::String("café".into())),
            (SqlType::NVarChar { len: None }, Value::String("x".repeat(9000))),
            (SqlType::VarChar { len: None }, Value::String(String::new())),
            (SqlType::VarBinary { len: Some(3) }, Value::Binary(vec![0, 1, 2])),
            (
                SqlType::VarBinary { len: None },
                Value::Binary(vec![0xAA; 10_000]),
            ),
            (SqlType::Xml, Value::String("<a/>".into())),
            (SqlType::RowVersion, Value::Binary(vec![1, 2, 3, 4, 5, 6, 7, 8])),
        ];
        for (ty, v) in cases {
            for nullable in [false, true] {
                let wt = WireType::for_column(ty, nullable);
                let mut out = Vec::new();
                encode(&mut out, &wt, &v).unwrap();
                let mut r = Reader::new(out);
                assert_eq!(decode(&mut r, &wt, false).unwrap(), v, "{ty:?}");
                assert!(r.at_end().unwrap());
                if nullable || !matches!(wt, WireType::Int { .. } | WireType::Float { .. }) {
                    let mut out = Vec::new();
                    if encode(&mut out, &wt, &Value::Null).is_ok() {
                        let mut r = Reader::new(out);
                        assert_eq!(decode(&mut r, &wt, false).unwrap(), Value::Null, "{ty:?} NULL");
                    }
                }
            }
        }
    }

    #[test]
    fn bulk_text_values_skip_the_text_pointer() {
        let wt = WireType::for_column(SqlType::NText, true);
        let mut out = Vec::new();
        encode(&mut out, &wt, &Value::String("hé".into())).unwrap();
        let mut r = Reader::new(out);
        assert_eq!(decode(&mut r, &wt, true).unwrap(), Value::String("hé".into()));
        let mut r = Reader::new(vec![0]);
        assert_eq!(decode(&mut r, &wt, true).unwrap(), Value::Null);
    }
}
