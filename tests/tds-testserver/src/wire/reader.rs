//! A little-endian byte reader over one request message. In-memory messages are read from a
//! slice; a bulk load pulls further packets on demand so that it is decoded while it arrives.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum DecodeError {
    #[error("the message ended early while reading {0}")]
    Truncated(&'static str),
    #[error("{0}")]
    Invalid(String),
    #[error("the connection was lost: {0}")]
    Closed(String),
}

pub type Refill<'a> = dyn FnMut() -> Result<Option<Vec<u8>>, DecodeError> + 'a;

pub struct Reader<'a> {
    buf: Vec<u8>,
    pos: usize,
    refill: Option<&'a mut Refill<'a>>,
}

impl<'a> Reader<'a> {
    pub fn new(bytes: Vec<u8>) -> Self {
        Reader {
            buf: bytes,
            pos: 0,
            refill: None,
        }
    }

    /// A reader that calls `refill` for the next packet's payload (`None` at end of message).
    pub fn streaming(first: Vec<u8>, refill: &'a mut Refill<'a>) -> Self {
        Reader {
            buf: first,
            pos: 0,
            refill: Some(refill),
        }
    }

    fn ensure(&mut self, n: usize, what: &'static str) -> Result<(), DecodeError> {
        while self.buf.len() - self.pos < n {
            let Some(refill) = self.refill.as_mut() else {
                return Err(DecodeError::Truncated(what));
            };
            let Some(more) = refill()? else {
                return Err(DecodeError::Truncated(what));
            };
            if self.pos == self.buf.len() {
                self.buf = more;
            } else {
                self.buf.drain(..self.pos);
                self.buf.extend_from_slice(&more);
            }
            self.pos = 0;
        }
        Ok(())
    }

    /// True when the message has no more bytes (pulling the next packet if needed).
    pub fn at_end(&mut self) -> Result<bool, DecodeError> {
        match self.ensure(1, "") {
            Ok(()) => Ok(false),
            Err(DecodeError::Truncated(_)) => Ok(true),
            Err(e) => Err(e),
        }
    }

    pub fn bytes(&mut self, n: usize, what: &'static str) -> Result<&[u8], DecodeError> {
        self.ensure(n, what)?;
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    pub fn skip(&mut self, n: usize, what: &'static str) -> Result<(), DecodeError> {
        self.bytes(n, what).map(|_| ())
    }

    pub fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], DecodeError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.bytes(N, what)?);
        Ok(a)
    }

    pub fn u8(&mut self, what: &'static str) -> Result<u8, DecodeError> {
        Ok(self.array::<1>(what)?[0])
    }

    pub fn peek_u8(&mut self, what: &'static str) -> Result<u8, DecodeError> {
        self.ensure(1, what)?;
        Ok(self.buf[self.pos])
    }

    pub fn u16(&mut self, what: &'static str) -> Result<u16, DecodeError> {
        Ok(u16::from_le_bytes(self.array(what)?))
    }

    pub fn u32(&mut self, what: &'static str) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    pub fn u64(&mut self, what: &'static str) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    /// UTF-16LE text of `chars` code units.
    pub fn utf16(&mut self, chars: usize, what: &'static str) -> Result<String, DecodeError> {
        let b = self.bytes(chars * 2, what)?;
        utf16_to_string(b).ok_or_else(|| DecodeError::Invalid(format!("invalid UTF-16 in {what}")))
    }

    /// B_VARCHAR: u8 length in characters, then UTF-16LE.
    pub fn b_varchar(&mut self, what: &'static str) -> Result<String, DecodeError> {
        let n = self.u8(what)?;
        self.utf16(usize::from(n), what)
    }

    /// US_VARCHAR: u16 length in characters, then UTF-16LE.
    pub fn us_varchar(&mut self, what: &'static str) -> Result<String, DecodeError> {
        let n = self.u16(what)?;
        self.utf16(usize::from(n), what)
    }
}

/// Decodes UTF-16LE into `out` (replacing its contents, keeping its memory); `false` when `b`
/// is not valid UTF-16 (`out` is then unspecified).
pub fn utf16_into(out: &mut String, b: &[u8]) -> bool {
    out.clear();
    if !b.len().is_multiple_of(2) {
        return false;
    }
    // Most text is ASCII: narrow every unit in one pass (no per-character encoding), noting
    // whether any unit was not ASCII; only then decode properly.
    let mut bytes = std::mem::take(out).into_bytes();
    let mut wide = 0u8;
    bytes.extend(b.chunks_exact(2).map(|u| {
        wide |= u[1] | (u[0] & 0x80);
        u[0]
    }));
    if wide == 0 {
        return match String::from_utf8(bytes) {
            Ok(s) => {
                *out = s;
                true
            }
            Err(_) => false,
        };
    }
    bytes.clear();
    *out = String::from_utf8(bytes).unwrap_or_default();
    let units = b.chunks_exact(2).map(|u| u16::from_le_bytes([u[0], u[1]]));
    for c in char::decode_utf16(units) {
        match c {
            Ok(c) => out.push(c),
            Err(_) => return false,
        }
    }
    true
}

/// Decodes UTF-16LE into a new string ([`utf16_into`]); `None` when it is not valid UTF-16.
pub fn utf16_to_string(b: &[u8]) -> Option<String> {
    let mut s = String::new();
    utf16_into(&mut s, b).then_some(s)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn streaming_reader_crosses_packet_boundaries() {
        let mut packets = vec![vec![3u8, 0], vec![0, 0, 0x41], vec![0, 0x42, 0]].into_iter();
        let mut refill = move || Ok(packets.next());
        let mut r = Reader::streaming(vec![0x34, 0x12], &mut refill);
        assert_eq!(r.u16("a").unwrap(), 0x1234);
        assert_eq!(r.u32("b").unwrap(), 3);
        assert_eq!(r.utf16(2, "c").unwrap(), "AB");
        assert!(r.at_end().unwrap());
    }

    #[test]
    fn truncated_message_is_an_error() {
        let mut r = Reader::new(vec![1, 2, 3]);
        assert!(matches!(r.u32("x"), Err(DecodeError::Truncated("x"))));
    }

    #[test]
    fn utf16_decodes_non_ascii() {
        let s = "añ€😀";
        let b: Vec<u8> = s.encode_utf16().flat_map(|u| u.to_le_bytes()).collect();
        assert_eq!(utf16_to_string(&b).unwrap(), s);
        assert!(utf16_to_string(&[0x00, 0xD8]).is_none());
    }
}
