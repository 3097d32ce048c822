//! One client connection: a reader thread that turns the socket into packets (and flags
//! attentions at once, even while a reply is being written), and the connection thread that
//! logs in, then dispatches each request message to the backend.

use std::io::{self, Read};
use std::net::{Shutdown, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::thread;

use tds_testserver_engine::catalog::ConnectionInfo;
use tds_testserver_engine::{Done, Interrupt, ResultSink, SqlError, StatementKind};
use tracing::{debug, info, warn};

use crate::ServerConfig;
use crate::backend::{Backend, Connector};
use crate::handshake::{self, OpenError, Transport};
use crate::sink::{ReplyKind, WireSink};
use crate::tls::{ReplyStream, ServerTls, TlsWriter};
use crate::wire::packet::{self, Packet, PacketWriter};
use crate::wire::reader::{DecodeError, Reader, utf16_to_string};
use crate::wire::transaction::TmRequest;
use crate::wire::{bulk, login, rpc, tokens, transaction};

/// What the reader thread forwards.
enum Incoming {
    Packet(Packet),
    /// An attention packet arrived (the flag is already set).
    Attention,
    Closed,
}

/// Packets in flight between the reader and the connection thread; bounded so a fast bulk
/// load cannot queue unboundedly ahead of the engine.
const QUEUE_DEPTH: usize = 64;

fn spawn_reader(
    mut stream: impl Read + Send + 'static,
    tx: SyncSender<Incoming>,
    cancel: Arc<AtomicBool>,
) -> io::Result<()> {
    thread::Builder::new().name("tds-reader".into()).spawn(move || {
        loop {
            match packet::read_packet(&mut stream) {
                Ok(Some(p)) if p.ty == packet::TY_ATTENTION => {
                    cancel.store(true, Ordering::Release);
                    if tx.send(Incoming::Attention).is_err() {
                        break;
                    }
                }
                Ok(Some(p)) => {
                    if tx.send(Incoming::Packet(p)).is_err() {
                        break;
                    }
                }
                Ok(None) | Err(_) => {
                    let _ = tx.send(Incoming::Closed);
                    break;
                }
            }
        }
    })?;
    Ok(())
}

struct Conn {
    rx: Receiver<Incoming>,
    cancel: Arc<AtomicBool>,
    w: PacketWriter<ReplyStream>,
    spid: u16,
    peer: Option<std::net::SocketAddr>,
}

/// Why the connection ends.
#[derive(Debug)]
enum End {
    Closed,
    Io(io::Error),
    Protocol(String),
    LoginFailed,
    /// Encryption could not be agreed or set up; logged where it happened.
    Encryption(String),
}

impl From<OpenError> for End {
    fn from(e: OpenError) -> Self {
        match e {
            OpenError::Closed => End::Closed,
            OpenError::Io(e) => End::Io(e),
            OpenError::Protocol(msg) => End::Protocol(msg),
            OpenError::Refused => End::Encryption("the two sides disagree on encryption".into()),
            OpenError::Tls(msg) => End::Encryption(msg),
        }
    }
}

impl From<io::Error> for End {
    fn from(e: io::Error) -> Self {
        End::Io(e)
    }
}

impl Conn {
    /// The next packet, answering attentions that arrive between requests.
    fn next_packet(&mut self) -> Result<Packet, End> {
        loop {
            match self.rx.recv() {
                Ok(Incoming::Packet(p)) => return Ok(p),
                Ok(Incoming::Attention) => {
                    // If a reply already acknowledged it, the flag is clear and nothing is owed;
                    // otherwise the request had finished: acknowledge with a reply of its own.
                    if self.cancel.swap(false, Ordering::AcqRel) {
                        tokens::done(self.w.buf(), tokens::TOKEN_DONE, tokens::DONE_ATTN, 0, 0);
                        self.w.finish()?;
                    }
                }
                Ok(Incoming::Closed) | Err(_) => return Err(End::Closed),
            }
        }
    }

    /// The rest of a message whose first packet is `first`, concatenated.
    fn whole_message(&mut self, first: Packet) -> Result<Vec<u8>, End> {
        let mut eom = first.is_eom();
        let mut payload = first.payload;
        while !eom {
            let p = self.next_packet()?;
            eom = p.is_eom();
            payload.extend_from_slice(&p.payload);
        }
        Ok(payload)
    }

    fn reply(&mut self, write: impl FnOnce(&mut Vec<u8>)) -> Result<(), End> {
        write(self.w.buf());
        self.w.finish()?;
        Ok(())
    }

    /// Answers the LOGIN7 message `payload` (read by [`handshake::open`]).
    fn login(
        &mut self,
        config: &ServerConfig,
        connector: &dyn Connector,
        payload: &[u8],
    ) -> Result<Box<dyn Backend>, End> {
        let login = login::decode(payload).map_err(|e| End::Protocol(format!("bad LOGIN7: {e}")))?;
        let fail = |extra: Option<&SqlError>| {
            let mut errors: Vec<(i32, u8, u8, String)> = Vec::new();
            if let Some(e) = extra {
                errors.push((e.number, e.state, e.class, e.message.clone()));
            }
            errors.push((18456, 1, 14, format!("Login failed for user '{}'.", login.user)));
            errors
        };
        if !login.user.eq_ignore_ascii_case(&config.user) || login.password != config.password {
            info!(spid = self.spid, user = %login.user, "login failed: wrong user name or password");
            let errors = fail(None);
            self.reply(|b| login::write_failure(b, &errors))?;
            return Err(End::LoginFailed);
        }
        let database = Some(login.database.as_str()).filter(|d| !d.is_empty());
        let backend = match connector.connect(database) {
            Ok(b) => b,
            Err(e) => {
                info!(spid = self.spid, error = %e, "login failed: cannot open the database");
                let errors = fail(Some(&e));
                self.reply(|b| login::write_failure(b, &errors))?;
                return Err(End::LoginFailed);
            }
        };
        let size = login::grant_packet_size(login.packet_size, config.max_packet_size);
        let mut backend = backend;
        backend.register_connection(ConnectionInfo {
            net_packet_size: i32::try_from(size).unwrap_or(i32::MAX),
            // The version field is sent little-endian, as the number 0x74000004 for TDS 7.4.
            protocol_version: login.tds_version as i32,
            client_net_address: self.peer.map(|a| a.ip().to_string()).unwrap_or_default(),
            client_tcp_port: self.peer.map(|a| i32::from(a.port())),
            login_name: login.user.clone(),
            host_name: login.host_name.clone(),
            program_name: login.app_name.clone(),
            connect_time: String::new(),
        });
        let db = backend.database().to_string();
        self.reply(|b| login::write_success(b, &db, size, login.utf8))?;
        self.w.set_packet_size(size as usize);
        self.w.set_client_utf8(login.utf8);
        debug!(spid = self.spid, user = %login.user, app = %login.app_name, database = %db, packet_size = size, "logged in");
        Ok(backend)
    }

    fn run_batch(&mut self, backend: &mut dyn Backend, payload: Vec<u8>) -> Result<(), End> {
        let sql = match batch_text(payload) {
            Ok(sql) => sql,
            Err(e) => return self.protocol_error(ReplyKind::Batch, 8009, &e),
        };
        debug!(spid = self.spid, %sql, "batch");
        let mut sink = WireSink::new(&mut self.w, &self.cancel, ReplyKind::Batch);
        let outcome = backend.execute_batch(&sql, &mut sink);
        sink.finish(outcome)?;
        Ok(())
    }

    fn run_rpc(&mut self, backend: &mut dyn Backend, payload: Vec<u8>) -> Result<(), End> {
        let request = match rpc::decode(payload) {
            Ok(r) => r,
            Err(e) => return self.protocol_error(ReplyKind::Rpc, 8009, &e),
        };
        let mut sink = WireSink::new(&mut self.w, &self.cancel, ReplyKind::Rpc);
        let outcome = match request {
            rpc::RpcRequest::ExecuteSql { sql, params } => {
                debug!(spid = self.spid, %sql, params = params.len(), "rpc");
                backend.execute_rpc(&sql, &params, &mut sink)
            }
            rpc::RpcRequest::Other { name } => {
                let e = SqlError::new(2812, 16, format!("Could not find stored procedure '{name}'."));
                fail_statement(&mut sink, &e)
            }
        };
        sink.finish(outcome)?;
        Ok(())
    }

    fn run_transaction(&mut self, backend: &mut dyn Backend, payload: Vec<u8>) -> Result<(), End> {
        let request = match transaction::decode(payload) {
            Ok(r) => r,
            Err(e) => return self.protocol_error(ReplyKind::Batch, 8009, &e),
        };
        debug!(spid = self.spid, ?request, "transaction manager request");
        let mut sink = WireSink::new(&mut self.w, &self.cancel, ReplyKind::Batch);
        let outcome = match request {
            TmRequest::Engine(r) => backend.transaction(r, &mut sink),
            TmRequest::Sql(sql) => backend.execute_batch(&sql, &mut sink),
        };
        sink.finish(outcome)?;
        Ok(())
    }

    fn run_bulk(&mut self, backend: &mut dyn Backend, first: Packet) -> Result<(), End> {
        let mut eom = first.is_eom();
        let rx = &self.rx;
        let mut refill = || -> Result<Option<Vec<u8>>, DecodeError> {
            while !eom {
                match rx.recv() {
                    Ok(Incoming::Packet(p)) => {
                        eom = p.is_eom();
                        return Ok(Some(p.payload));
                    }
                    // Kept in the flag; answered once the load's reply is written.
                    Ok(Incoming::Attention) => {}
                    Ok(Incoming::Closed) | Err(_) => {
                        return Err(DecodeError::Closed("during a bulk load".into()));
                    }
                }
            }
            Ok(None)
        };
        let result = {
            let mut r = Reader::streaming(first.payload, &mut refill);
            load_rows(&mut r, backend)
        };
        let failure = match result {
            Ok(rows) => {
                debug!(spid = self.spid, rows, "bulk load received");
                None
            }
            Err(BulkFailure::Decode(DecodeError::Closed(what))) => {
                backend.bulk_abort();
                return Err(End::Protocol(format!("connection lost {what}")));
            }
            Err(f) => {
                backend.bulk_abort();
                // Consume the rest of the message so the next request starts cleanly.
                while refill().map_err(|e| End::Protocol(e.to_string()))?.is_some() {}
                Some(f)
            }
        };
        let mut sink = WireSink::new(&mut self.w, &self.cancel, ReplyKind::Batch);
        let outcome = match failure {
            None => backend.bulk_finish(&mut sink),
            Some(BulkFailure::Start(e)) => fail_statement(&mut sink, &e),
            Some(BulkFailure::Decode(e)) => {
                let e = SqlError::new(
                    4815,
                    16,
                    format!("Received invalid data from the bulk load client: {e}"),
                );
                fail_statement(&mut sink, &e)
            }
        };
        sink.finish(outcome)?;
        Ok(())
    }

    fn protocol_error(&mut self, kind: ReplyKind, number: i32, e: &DecodeError) -> Result<(), End> {
        warn!(spid = self.spid, error = %e, "malformed request");
        let err = SqlError::new(
            number,
            16,
            format!("The incoming tabular data stream (TDS) protocol stream is incorrect: {e}."),
        );
        let mut sink = WireSink::new(&mut self.w, &self.cancel, kind);
        let outcome = fail_statement(&mut sink, &err);
        sink.finish(outcome)?;
        Ok(())
    }
}

enum BulkFailure {
    Start(SqlError),
    Decode(DecodeError),
}

fn load_rows(r: &mut Reader<'_>, backend: &mut dyn Backend) -> Result<u64, BulkFailure> {
    let (columns, types) = bulk::read_columns(r).map_err(BulkFailure::Decode)?;
    backend.bulk_start(&columns).map_err(BulkFailure::Start)?;
    let mut row = bulk::BulkRow::default();
    let mut n = 0;
    while bulk::next_row(r, &types, &mut row).map_err(BulkFailure::Decode)? {
        backend.bulk_row(&row.values);
        n += 1;
    }
    Ok(n)
}

fn fail_statement(sink: &mut dyn ResultSink, e: &SqlError) -> Result<(), Interrupt> {
    sink.error(e)?;
    sink.done(Done {
        kind: StatementKind::Other,
        rows: None,
        error: true,
        in_transaction: false,
    })
}

/// A SQL batch: ALL_HEADERS, then UTF-16LE text. Tolerates a missing ALL_HEADERS (pre-7.2).
fn batch_text(payload: Vec<u8>) -> Result<String, DecodeError> {
    let total = payload
        .get(..4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize);
    let skip = match total {
        Some(t) if (4..=payload.len()).contains(&t) && payload.get(4..8).is_some() => t,
        _ => 0,
    };
    let text = &payload[skip..];
    utf16_to_string(text).ok_or_else(|| DecodeError::Invalid("the batch text is not valid UTF-16".into()))
}

/// Serves one connection until the client leaves or the server stops.
pub fn serve(
    stream: TcpStream,
    config: Arc<ServerConfig>,
    tls: Option<Arc<ServerTls>>,
    connector: Arc<dyn Connector>,
    spid: u16,
) {
    let peer = stream.peer_addr().ok();
    match run(stream, &config, tls.as_ref(), connector.as_ref(), spid) {
        Ok(()) | Err(End::Closed) | Err(End::LoginFailed) => debug!(spid, ?peer, "connection closed"),
        Err(End::Encryption(msg)) => info!(spid, ?peer, %msg, "closing the connection"),
        Err(End::Io(e)) => debug!(spid, ?peer, error = %e, "connection lost"),
        Err(End::Protocol(msg)) => warn!(spid, ?peer, %msg, "protocol error; closing the connection"),
    }
}

fn run(
    stream: TcpStream,
    config: &ServerConfig,
    tls: Option<&Arc<ServerTls>>,
    connector: &dyn Connector,
    spid: u16,
) -> Result<(), End> {
    let _closes = ShutdownOnDrop(&stream);
    start(&stream, config, tls, connector, spid)
}

/// Shuts the socket down when a session ends, by return or by a panic in the engine: the server
/// keeps a clone of every connection's stream (to close it on stop) and the reader thread another,
/// so merely dropping ours would leave the client waiting for an answer forever.
struct ShutdownOnDrop<'a>(&'a TcpStream);

impl Drop for ShutdownOnDrop<'_> {
    fn drop(&mut self) {
        let _ = self.0.shutdown(Shutdown::Both);
    }
}

fn start(
    stream: &TcpStream,
    config: &ServerConfig,
    tls: Option<&Arc<ServerTls>>,
    connector: &dyn Connector,
    spid: u16,
) -> Result<(), End> {
    stream.set_nodelay(true)?;
    let opened = handshake::open(stream, tls, spid)?;
    let (tx, rx) = mpsc::sync_channel(QUEUE_DEPTH);
    let cancel = Arc::new(AtomicBool::new(false));
    let writer = match opened.transport {
        Transport::Plain => {
            spawn_reader(stream.try_clone()?, tx, Arc::clone(&cancel))?;
            ReplyStream::Plain(stream.try_clone()?)
        }
        Transport::Tls(session, reader) => {
            spawn_reader(reader, tx, Arc::clone(&cancel))?;
            ReplyStream::Tls(TlsWriter::new(session, stream.try_clone()?))
        }
    };
    let mut conn = Conn {
        rx,
        cancel,
        w: PacketWriter::new(writer, 4096, spid),
        spid,
        peer: stream.peer_addr().ok(),
    };
    serve_requests(&mut conn, config, connector, &opened.login7)
}

fn serve_requests(
    conn: &mut Conn,
    config: &ServerConfig,
    connector: &dyn Connector,
    login7: &[u8],
) -> Result<(), End> {
    let mut backend = conn.login(config, connector, login7)?;
    loop {
        let first = conn.next_packet()?;
        match first.ty {
            packet::TY_BATCH => {
                let payload = conn.whole_message(first)?;
                conn.run_batch(backend.as_mut(), payload)?;
            }
            packet::TY_RPC => {
                let payload = conn.whole_message(first)?;
                conn.run_rpc(backend.as_mut(), payload)?;
            }
            packet::TY_TRANSACTION => {
                let payload = conn.whole_message(first)?;
                conn.run_transaction(backend.as_mut(), payload)?;
            }
            packet::TY_BULK => conn.run_bulk(backend.as_mut(), first)?,
            other => return Err(End::Protocol(format!("unexpected packet type 0x{other:02X}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn batch_text_with_and_without_all_headers() {
        let text: Vec<u8> = "SELECT 1".encode_utf16().flat_map(|u| u.to_le_bytes()).collect();
        let mut with = crate::wire::rpc::tests::all_headers();
        with.extend_from_slice(&text);
        assert_eq!(batch_text(with).unwrap(), "SELECT 1");
        assert_eq!(batch_text(text).unwrap(), "SELECT 1");
    }
}
