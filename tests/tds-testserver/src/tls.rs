//! Server-side TLS as SQL Server does it for TDS 7.x: the handshake's records travel as the
//! payload of PRELOGIN packets, after which TLS records go straight over TCP with the TDS
//! packets inside them. TLS 1.2 only, as SQL Server offers TDS 7.x clients (TLS 1.3 is for
//! TDS 8 strict mode); it also means the handshake ends with the server's last flight, so
//! no post-handshake message (a TLS 1.3 ticket) can reach a client that has already turned
//! TLS off after its login packet.

use std::io::{self, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use thiserror::Error;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::{self, ServerConnection};

use crate::wire::packet::{self, TY_PRELOGIN};

/// The certificate chain and private key files (PEM) the server presents.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

#[derive(Debug, Error)]
pub enum TlsError {
    #[error("cannot read the TLS certificate {path}: {reason}")]
    Cert { path: PathBuf, reason: String },
    #[error("{0} holds no certificate")]
    NoCert(PathBuf),
    #[error("cannot read the TLS private key {path}: {reason}")]
    Key { path: PathBuf, reason: String },
    #[error("the TLS certificate and key are not usable together: {0}")]
    Config(rustls::Error),
    #[error("forcing encryption needs a certificate (tls)")]
    ForcedWithoutCert,
}

/// The server's TLS: its rustls configuration, and whether every session must be encrypted.
pub struct ServerTls {
    pub config: Arc<rustls::ServerConfig>,
    pub forced: bool,
}

/// The rustls configuration for `files`; errors name the file at fault.
pub fn server_config(files: &TlsFiles) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let certs = read_certs(&files.cert)?;
    let key = PrivateKeyDer::from_pem_file(&files.key).map_err(|e| TlsError::Key {
        path: files.key.clone(),
        reason: e.to_string(),
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS12])
        .map_err(TlsError::Config)?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(TlsError::Config)?;
    Ok(Arc::new(config))
}

fn read_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let fail = |e: rustls::pki_types::pem::Error| TlsError::Cert {
        path: path.to_path_buf(),
        reason: e.to_string(),
    };
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(fail)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(fail)?;
    if certs.is_empty() {
        return Err(TlsError::NoCert(path.to_path_buf()));
    }
    Ok(certs)
}

/// Why a TLS handshake did not complete.
#[derive(Debug, Error)]
pub enum HandshakeError {
    #[error("{0}")]
    Io(#[from] io::Error),
    #[error("TLS handshake failed: {0}")]
    Tls(rustls::Error),
    #[error("expected a PRELOGIN packet carrying the TLS handshake, got packet type 0x{0:02X}")]
    NotPrelogin(u8),
    #[error("the client closed the connection during the TLS handshake")]
    Closed,
}

/// The size of the PRELOGIN packets the handshake is sent in (the packet size before login).
const HANDSHAKE_PACKET_SIZE: usize = 4096;

/// Runs the handshake whose records come and go in PRELOGIN packets on `stream`.
pub fn handshake(
    stream: &mut TcpStream,
    config: &Arc<rustls::ServerConfig>,
) -> Result<ServerConnection, HandshakeError> {
    let mut conn = ServerConnection::new(Arc::clone(config)).map_err(HandshakeError::Tls)?;
    while conn.is_handshaking() {
        let Some(p) = packet::read_packet(stream)? else {
            return Err(HandshakeError::Closed);
        };
        if p.ty != TY_PRELOGIN {
            return Err(HandshakeError::NotPrelogin(p.ty));
        }
        let mut records = p.payload.as_slice();
        while !records.is_empty() {
            conn.read_tls(&mut records)?;
            if let Err(e) = conn.process_new_packets() {
                // The alert rustls queued tells the client why; it is sent as best we can.
                let _ = send_handshake_records(&mut conn, stream);
                return Err(HandshakeError::Tls(e));
            }
        }
        send_handshake_records(&mut conn, stream)?;
    }
    Ok(conn)
}

fn send_handshake_records(conn: &mut ServerConnection, stream: &mut TcpStream) -> io::Result<()> {
    let mut records = Vec::new();
    while conn.wants_write() {
        conn.write_tls(&mut records)?;
    }
    if !records.is_empty() {
        packet::write_message(stream, TY_PRELOGIN, &records, HANDSHAKE_PACKET_SIZE)?;
    }
    Ok(())
}

/// A TLS session shared by a connection's reader and writer threads. The lock is held only
/// while records are decrypted or encrypted, never across socket I/O.
#[derive(Clone)]
pub struct SharedTls(Arc<Mutex<ServerConnection>>);

impl SharedTls {
    pub fn new(conn: ServerConnection) -> Self {
        SharedTls(Arc::new(Mutex::new(conn)))
    }

    fn lock(&self) -> io::Result<MutexGuard<'_, ServerConnection>> {
        self.0
            .lock()
            .map_err(|_| io::Error::other("the TLS session's lock was poisoned"))
    }
}

/// The largest TLS record accepted: 2^14 bytes of plaintext plus the most expansion allowed.
const MAX_RECORD: usize = 5 + (1 << 14) + 2048;

/// The decrypted byte stream of a TLS connection. Reads one whole record at a time from the
/// socket, so it never takes bytes from the socket past the last record it needed.
pub struct TlsReader {
    tls: SharedTls,
    sock: BufReader<TcpStream>,
    record: Vec<u8>,
    plain: Vec<u8>,
    pos: usize,
    closed: bool,
}

impl TlsReader {
    pub fn new(tls: SharedTls, sock: TcpStream) -> Self {
        TlsReader {
            tls,
            sock: BufReader::with_capacity(MAX_RECORD, sock),
            record: Vec::with_capacity(MAX_RECORD),
            plain: Vec::with_capacity(1 << 14),
            pos: 0,
            closed: false,
        }
    }

    /// Whether bytes are waiting that were received but not yet read, encrypted or not.
    pub fn has_pending(&self) -> bool {
        !self.sock.buffer().is_empty() || self.pos < self.plain.len()
    }

    /// Decrypts the next record into `plain`; `false` at the end of the stream.
    fn fill(&mut self) -> io::Result<bool> {
        if self.closed {
            return Ok(false);
        }
        self.record.resize(5, 0);
        let mut got = 0;
        while got < 5 {
            match self.sock.read(&mut self.record[got..5]) {
                Ok(0) if got == 0 => return Ok(false),
                Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        let len = 5 + usize::from(u16::from_be_bytes([self.record[3], self.record[4]]));
        if len > MAX_RECORD {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("a TLS record of {len} bytes is longer than TLS allows"),
            ));
        }
        self.record.resize(len, 0);
        self.sock.read_exact(&mut self.record[5..])?;
        self.plain.clear();
        self.pos = 0;
        let mut conn = self.tls.lock()?;
        let mut rd = self.record.as_slice();
        while !rd.is_empty() {
            conn.read_tls(&mut rd)?;
            conn.process_new_packets().map_err(io::Error::other)?;
        }
        match conn.reader().read_to_end(&mut self.plain) {
            // The client's close_notify.
            Ok(_) => self.closed = true,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
        Ok(true)
    }
}

impl Read for TlsReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.pos == self.plain.len() {
            if !self.fill()? {
                return Ok(0);
            }
        }
        let n = buf.len().min(self.plain.len() - self.pos);
        buf[..n].copy_from_slice(&self.plain[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

/// Encrypts what is written and sends the records. One writer per connection, so records
/// reach the socket in the order they were made.
pub struct TlsWriter {
    tls: SharedTls,
    sock: TcpStream,
    records: Vec<u8>,
}

impl TlsWriter {
    pub fn new(tls: SharedTls, sock: TcpStream) -> Self {
        TlsWriter {
            tls,
            sock,
            records: Vec::new(),
        }
    }
}

impl Write for TlsWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = {
            let mut conn = self.tls.lock()?;
            let n = conn.writer().write(buf)?;
            while conn.wants_write() {
                conn.write_tls(&mut self.records)?;
            }
            n
        };
        let sent = self.sock.write_all(&self.records);
        self.records.clear();
        sent.map(|()| n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.sock.flush()
    }
}

/// Where a connection's replies go: the socket, or a TLS session over it.
pub enum ReplyStream {
    Plain(TcpStream),
    Tls(TlsWriter),
}

impl Write for ReplyStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            ReplyStream::Plain(s) => s.write(buf),
            ReplyStream::Tls(s) => s.write(buf),
        }
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        match self {
            ReplyStream::Plain(s) => s.write_all(buf),
            ReplyStream::Tls(s) => s.write_all(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            ReplyStream::Plain(s) => s.flush(),
            ReplyStream::Tls(s) => s.flush(),
        }
    }
}
