//! Learns the TDS packet size the server granted. tiberius keeps it private, and the DMV that
//! shows it (sys.dm_exec_connections) needs VIEW SERVER STATE, so the login response is watched
//! on its way in for the ENVCHANGE packet-size token:
//! `E3 len:u16 04 newlen:u8 new:UTF-16 oldlen:u8 old:UTF-16` (MS-TDS 2.2.7.9).

use futures_util::io::{AsyncRead, AsyncWrite};
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::task::{Context, Poll};

/// Only the login response is scanned; after this many bytes the tap is a plain pass-through.
const SCAN_LIMIT: usize = 16 * 1024;

pub struct PacketTap<S> {
    inner: S,
    seen: Vec<u8>,
    granted: Arc<AtomicU32>,
    done: bool,
}

impl<S> PacketTap<S> {
    pub fn new(inner: S) -> (Self, Arc<AtomicU32>) {
        let granted = Arc::new(AtomicU32::new(0));
        (
            PacketTap {
                inner,
                seen: Vec::new(),
                granted: granted.clone(),
                done: false,
            },
            granted,
        )
    }

    fn scan(&mut self, new: &[u8]) {
        if self.done {
            return;
        }
        self.seen.extend_from_slice(new);
        if let Some(size) = find_packet_size(&self.seen) {
            self.granted.store(size, Ordering::Relaxed);
            self.done = true;
        }
        if self.seen.len() > SCAN_LIMIT {
            self.done = true;
        }
        if self.done {
            self.seen = Vec::new();
        }
    }
}

/// Finds `E3 lo hi 04 n <n UTF-16 digits> m <m UTF-16 digits>` and returns the new size.
pub fn find_packet_size(b: &[u8]) -> Option<u32> {
    let mut i = 0;
    while i + 5 <= b.len() {
        if b[i] == 0xE3 && b[i + 3] == 0x04 {
            let total = usize::from(u16::from_le_bytes([b[i + 1], b[i + 2]]));
            let n = usize::from(b[i + 4]);
            let digits = b.get(i + 5..i + 5 + 2 * n);
            if let Some(d) = digits
                && n > 0
                && n <= 5
                && total >= 2 + 2 * n
            {
                let text: Option<String> = d
                    .chunks(2)
                    .map(|c| (c[1] == 0 && c[0].is_ascii_digit()).then_some(c[0] as char))
                    .collect();
                if let Some(size) = text.and_then(|t| t.parse::<u32>().ok())
                    && (512..=32767).contains(&size)
                {
                    return Some(size);
                }
            }
        }
        i += 1;
    }
    None
}

impl<S: AsyncRead + Unpin> AsyncRead for PacketTap<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let r = Pin::new(&mut this.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(n)) = &r
            && !this.done
        {
            let n = *n;
            this.scan(&buf[..n]);
        }
        r
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for PacketTap<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_close(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_close(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::find_packet_size;

    fn envchange(new: &str, old: &str) -> Vec<u8> {
        let utf16 = |s: &str| s.encode_utf16().flat_map(u16::to_le_bytes).collect::<Vec<u8>>();
        let body: Vec<u8> = [
            vec![4u8, new.len() as u8],
            utf16(new),
            vec![old.len() as u8],
            utf16(old),
        ]
        .concat();
        [vec![0xE3], (body.len() as u16).to_le_bytes().to_vec(), body].concat()
    }

    #[test]
    fn finds_the_granted_size() {
        let mut b = vec![0x04, 0x01, 0x00, 0x50, 0, 0, 1, 0, 0xAD, 0x10];
        b.extend(envchange("32767", "4096"));
        assert_eq!(find_packet_size(&b), Some(32767));
        assert_eq!(find_packet_size(&envchange("8000", "4096")), Some(8000));
        assert_eq!(find_packet_size(&envchange("99", "4096")), None);
        assert_eq!(find_packet_size(&[0xE3, 0x10]), None);
    }
}
