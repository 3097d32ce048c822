//! TDS packet framing: the 8-byte header, reading request packets, and splitting a reply into
//! packets of the negotiated size while it is being encoded.

use std::io::{self, Read, Write};

pub const HEADER_LEN: usize = 8;

pub const TY_BATCH: u8 = 0x01;
pub const TY_RPC: u8 = 0x03;
pub const TY_REPLY: u8 = 0x04;
pub const TY_ATTENTION: u8 = 0x06;
pub const TY_BULK: u8 = 0x07;
pub const TY_TRANSACTION: u8 = 0x0E;
pub const TY_LOGIN7: u8 = 0x10;
pub const TY_PRELOGIN: u8 = 0x12;

const STATUS_EOM: u8 = 0x01;

/// One packet as received.
#[derive(Debug)]
pub struct Packet {
    pub ty: u8,
    pub status: u8,
    pub payload: Vec<u8>,
}

impl Packet {
    /// The last packet of its message. Reset-connection bits (0x08/0x10) are ignored.
    pub fn is_eom(&self) -> bool {
        self.status & STATUS_EOM != 0
    }
}

/// Reads one packet; `Ok(None)` when the peer closed the connection between packets.
pub fn read_packet(r: &mut impl Read) -> io::Result<Option<Packet>> {
    let mut header = [0u8; HEADER_LEN];
    let mut got = 0;
    while got < HEADER_LEN {
        match r.read(&mut header[got..]) {
            Ok(0) if got == 0 => return Ok(None),
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "truncated packet header",
                ));
            }
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    let len = usize::from(u16::from_be_bytes([header[2], header[3]]));
    if len < HEADER_LEN {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("packet length {len} is shorter than its header"),
        ));
    }
    let mut payload = vec![0u8; len - HEADER_LEN];
    r.read_exact(&mut payload)?;
    Ok(Some(Packet {
        ty: header[0],
        status: header[1],
        payload,
    }))
}

/// Writes `payload` as one message of `ty` packets of at most `packet_size` bytes (the TLS
/// handshake's PRELOGIN packets; replies go through [`PacketWriter`]).
pub fn write_message(w: &mut impl Write, ty: u8, payload: &[u8], packet_size: usize) -> io::Result<()> {
    let chunk = packet_size.saturating_sub(HEADER_LEN).max(1);
    let mut chunks = payload.chunks(chunk).peekable();
    let mut id = 1u8;
    let mut frame = Vec::with_capacity(packet_size.min(payload.len() + HEADER_LEN));
    while let Some(part) = chunks.next() {
        let status = if chunks.peek().is_none() { STATUS_EOM } else { 0 };
        let len = u16::try_from(part.len() + HEADER_LEN).unwrap_or(u16::MAX);
        frame.clear();
        frame.extend_from_slice(&[ty, status]);
        frame.extend_from_slice(&len.to_be_bytes());
        frame.extend_from_slice(&[0, 0, id, 0]);
        frame.extend_from_slice(part);
        w.write_all(&frame)?;
        id = id.wrapping_add(1);
    }
    w.flush()
}

/// Builds one reply message in place: token encoders append to [`PacketWriter::buf`] (which
/// starts with room for the packet header), and every full packet is written out as soon as
/// the next byte exists, so a result of any size needs only about one packet of memory.
pub struct PacketWriter<W: Write> {
    out: W,
    buf: Vec<u8>,
    packet_size: usize,
    packet_id: u8,
    spid: u16,
    /// The client asked for UTF-8 (LOGIN7 feature UTF8_SUPPORT): `_UTF8` columns are sent as
    /// UTF-8; otherwise in their locale's code page.
    client_utf8: bool,
}

impl<W: Write> PacketWriter<W> {
    pub fn new(out: W, packet_size: usize, spid: u16) -> Self {
        let mut buf = Vec::with_capacity(packet_size * 2);
        buf.resize(HEADER_LEN, 0);
        PacketWriter {
            out,
            buf,
            packet_size,
            packet_id: 1,
            spid,
            client_utf8: false,
        }
    }

    pub fn client_utf8(&self) -> bool {
        self.client_utf8
    }

    pub fn set_client_utf8(&mut self, on: bool) {
        self.client_utf8 = on;
    }

    /// The message being built; header space included, so `len()` works as a rollback mark.
    pub fn buf(&mut self) -> &mut Vec<u8> {
        &mut self.buf
    }

    pub fn packet_size(&self) -> usize {
        self.packet_size
    }

    /// Applies to packets written from now on (after the login's packet-size ENVCHANGE).
    pub fn set_packet_size(&mut self, size: usize) {
        self.packet_size = size.max(HEADER_LEN + 1);
    }

    /// Whether no token has been added to the current message.
    pub fn is_empty(&self) -> bool {
        self.buf.len() == HEADER_LEN
    }

    fn write_header(&mut self, at: usize, status: u8, len: usize) {
        let len = u16::try_from(len).unwrap_or(u16::MAX);
        let h = &mut self.buf[at..at + HEADER_LEN];
        h[0] = TY_REPLY;
        h[1] = status;
        h[2..4].copy_from_slice(&len.to_be_bytes());
        h[4..6].copy_from_slice(&self.spid.to_be_bytes());
        h[6] = self.packet_id;
        h[7] = 0;
        self.packet_id = self.packet_id.wrapping_add(1);
    }

    /// Writes every full packet that is followed by at least one more byte (so the final
    /// packet, status EOM, is never empty).
    pub fn flush_full(&mut self) -> io::Result<()> {
        let ps = self.packet_size;
        if self.buf.len() <= ps {
            return Ok(());
        }
        let payload = ps - HEADER_LEN;
        // Each packet's header overwrites the tail of the previous packet, which is already
        // on the wire; this keeps splitting a large value linear in its size.
        let mut start = 0;
        while self.buf.len() - start > ps {
            self.write_header(start, 0x00, ps);
            self.out.write_all(&self.buf[start..start + ps])?;
            start += payload;
        }
        let rest = self.buf.len() - start - HEADER_LEN;
        self.buf.copy_within(start + HEADER_LEN.., HEADER_LEN);
        self.buf.truncate(HEADER_LEN + rest);
        Ok(())
    }

    /// The underlying writer (tests inspect what was written).
    pub fn into_inner(self) -> W {
        self.out
    }

    /// Ends the message: the remaining bytes go out with status EOM.
    pub fn finish(&mut self) -> io::Result<()> {
        self.flush_full()?;
        let len = self.buf.len();
        self.write_header(0, STATUS_EOM, len);
        self.out.write_all(&self.buf)?;
        self.out.flush()?;
        self.buf.truncate(HEADER_LEN);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn split(bytes: &[u8]) -> Vec<(u8, Vec<u8>)> {
        let mut r = bytes;
        let mut out = Vec::new();
        while let Some(p) = read_packet(&mut r).unwrap() {
            assert_eq!(p.ty, TY_REPLY);
            out.push((p.status, p.payload));
        }
        out
    }

    #[test]
    fn splits_at_packet_size_with_eom_only_on_last() {
        let mut w = PacketWriter::new(Vec::new(), 512, 7);
        let data: Vec<u8> = (0..2000u32).map(|i| (i % 251) as u8).collect();
        w.buf().extend_from_slice(&data[..700]);
        w.flush_full().unwrap();
        w.buf().extend_from_slice(&data[700..]);
        w.finish().unwrap();
        let packets = split(&w.out);
        assert_eq!(packets.len(), 4);
        for (status, payload) in &packets[..3] {
            assert_eq!(*status, 0);
            assert_eq!(payload.len(), 504);
        }
        assert_eq!(packets[3].0, 1);
        assert_eq!(packets[3].1.len(), 2000 - 3 * 504);
        let joined: Vec<u8> = packets.into_iter().flat_map(|p| p.1).collect();
        assert_eq!(joined, data);
    }

    #[test]
    fn exact_multiple_keeps_a_nonempty_last_packet() {
        let mut w = PacketWriter::new(Vec::new(), 512, 0);
        w.buf().extend_from_slice(&[9u8; 504 * 2]);
        w.finish().unwrap();
        let packets = split(&w.out);
        assert_eq!(packets.len(), 2);
        assert_eq!((packets[0].0, packets[0].1.len()), (0, 504));
        assert_eq!((packets[1].0, packets[1].1.len()), (1, 504));
    }

    #[test]
    fn empty_message_is_one_header_only_packet() {
        let mut w = PacketWriter::new(Vec::new(), 4096, 0);
        w.finish().unwrap();
        assert_eq!(w.out, vec![0x04, 0x01, 0x00, 0x08, 0x00, 0x00, 0x01, 0x00]);
    }
}
