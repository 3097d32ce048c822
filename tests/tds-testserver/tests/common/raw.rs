//! A minimal raw TDS client for what tiberius cannot show (connection closed after a failed
//! login, an attention that arrives after the reply finished).
#![allow(clippy::unwrap_used, dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};

use super::utf16;

pub struct RawClient {
    pub stream: TcpStream,
}

pub fn login7(user: &str, password: &str, database: &str, packet_size: u32) -> Vec<u8> {
    let pw: Vec<u8> = utf16(password).iter().map(|b| b.rotate_left(4) ^ 0xA5).collect();
    let fields: Vec<Vec<u8>> = vec![
        utf16("host"),
        utf16(user),
        pw,
        utf16("raw"),
        utf16("srv"),
        vec![],
        utf16("lib"),
        vec![],
        utf16(database),
    ];
    let mut p = vec![0u8; 94];
    p[4..8].copy_from_slice(&0x7400_0004u32.to_le_bytes());
    p[8..12].copy_from_slice(&packet_size.to_le_bytes());
    for (i, f) in fields.iter().enumerate() {
        let at = 36 + i * 4;
        let offset = p.len() as u16;
        p[at..at + 2].copy_from_slice(&offset.to_le_bytes());
        p[at + 2..at + 4].copy_from_slice(&((f.len() / 2) as u16).to_le_bytes());
        p.extend_from_slice(f);
    }
    let len = p.len() as u32;
    p[0..4].copy_from_slice(&len.to_le_bytes());
    p
}

pub fn all_headers() -> Vec<u8> {
    let mut v = vec![22, 0, 0, 0, 18, 0, 0, 0, 2, 0];
    v.extend_from_slice(&[0; 8]);
    v.extend_from_slice(&[1, 0, 0, 0]);
    v
}

impl RawClient {
    pub fn connect(addr: SocketAddr) -> RawClient {
        RawClient {
            stream: TcpStream::connect(addr).unwrap(),
        }
    }

    pub fn send(&mut self, ty: u8, payload: &[u8]) {
        let len = (payload.len() + 8) as u16;
        let mut p = vec![ty, 1];
        p.extend_from_slice(&len.to_be_bytes());
        p.extend_from_slice(&[0, 0, 1, 0]);
        p.extend_from_slice(payload);
        self.stream.write_all(&p).unwrap();
    }

    /// One whole reply message's payload; `None` if the server closed the connection.
    pub fn read_message(&mut self) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        loop {
            let mut h = [0u8; 8];
            if self.stream.read_exact(&mut h).is_err() {
                return None;
            }
            let len = usize::from(u16::from_be_bytes([h[2], h[3]]));
            let mut p = vec![0u8; len - 8];
            self.stream.read_exact(&mut p).unwrap();
            out.extend(p);
            if h[1] & 1 != 0 {
                return Some(out);
            }
        }
    }

    pub fn login(addr: SocketAddr, password: &str) -> (RawClient, Vec<u8>) {
        let mut c = RawClient::connect(addr);
        c.send(0x12, &[0xFF]);
        c.read_message().unwrap();
        c.send(0x10, &login7("sa", password, "", 4096));
        let reply = c.read_message().unwrap();
        (c, reply)
    }

    pub fn batch(&mut self, sql: &str) -> Vec<u8> {
        let mut p = all_headers();
        p.extend(utf16(sql));
        self.send(0x01, &p);
        self.read_message().unwrap()
    }

    /// True once the server has closed the connection.
    pub fn closed(&mut self) -> bool {
        let mut b = [0u8; 1];
        matches!(self.stream.read(&mut b), Ok(0) | Err(_))
    }
}
