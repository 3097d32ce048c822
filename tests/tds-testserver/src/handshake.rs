//! A connection's opening, up to the LOGIN7 message: the PRELOGIN exchange, the TLS handshake
//! it negotiates, and LOGIN7 itself (encrypted when TLS was negotiated). Done on the
//! connection's thread before its reader thread starts, because what that thread reads from
//! (the socket or a TLS session) is only known once the PRELOGIN has been answered.

use std::io;
use std::net::TcpStream;
use std::sync::Arc;

use tracing::{debug, warn};

use crate::tls::{self, HandshakeError, ServerTls, SharedTls, TlsReader};
use crate::wire::packet::{self, Packet, PacketWriter};
use crate::wire::prelogin::{self, Encryption, ServerEncryption};

/// How the connection goes on after LOGIN7.
pub enum Transport {
    /// In the clear (no encryption, or encryption of the login packet only).
    Plain,
    /// Every packet in the TLS session; the reader holds anything already received.
    Tls(SharedTls, TlsReader),
}

pub struct Opened {
    pub transport: Transport,
    /// The LOGIN7 message's payload, all packets joined.
    pub login7: Vec<u8>,
}

#[derive(Debug)]
pub enum OpenError {
    Closed,
    Io(io::Error),
    Protocol(String),
    /// One side requires encryption the other cannot do.
    Refused,
    /// The TLS handshake failed (the client rejected the certificate, or the reverse).
    Tls(String),
}

impl From<io::Error> for OpenError {
    fn from(e: io::Error) -> Self {
        OpenError::Io(e)
    }
}

impl From<HandshakeError> for OpenError {
    fn from(e: HandshakeError) -> Self {
        match e {
            HandshakeError::Io(e) => OpenError::Io(e),
            HandshakeError::Closed => OpenError::Closed,
            HandshakeError::Tls(_) => OpenError::Tls(e.to_string()),
            HandshakeError::NotPrelogin(_) => OpenError::Protocol(e.to_string()),
        }
    }
}

fn next(r: &mut impl io::Read) -> Result<Packet, OpenError> {
    packet::read_packet(r)?.ok_or(OpenError::Closed)
}

/// The message that starts with `first`, which must be LOGIN7.
fn login7(r: &mut impl io::Read, first: Packet) -> Result<Vec<u8>, OpenError> {
    if first.ty != packet::TY_LOGIN7 {
        return Err(OpenError::Protocol(format!(
            "expected LOGIN7, got packet type 0x{:02X}",
            first.ty
        )));
    }
    whole_message(r, first)
}

fn whole_message(r: &mut impl io::Read, first: Packet) -> Result<Vec<u8>, OpenError> {
    let mut eom = first.is_eom();
    let mut payload = first.payload;
    while !eom {
        let p = next(r)?;
        eom = p.is_eom();
        payload.extend_from_slice(&p.payload);
    }
    Ok(payload)
}

/// Answers the PRELOGIN (if the client sends one), runs the TLS handshake it negotiated, and
/// returns the LOGIN7 message and the transport for the rest of the connection.
pub fn open(stream: &TcpStream, tls: Option<&Arc<ServerTls>>, spid: u16) -> Result<Opened, OpenError> {
    let mut sock = stream.try_clone()?;
    let first = next(&mut sock)?;
    if first.ty != packet::TY_PRELOGIN {
        // A client without PRELOGIN (before TDS 7.1) cannot negotiate encryption.
        let login7 = login7(&mut sock, first)?;
        return Ok(Opened {
            transport: Transport::Plain,
            login7,
        });
    }
    let payload = whole_message(&mut sock, first)?;
    let client = prelogin::client_encryption(&payload);
    let server = match tls {
        None => ServerEncryption::None,
        Some(t) if t.forced => ServerEncryption::Forced,
        Some(_) => ServerEncryption::Supported,
    };
    let (answer, encryption) = prelogin::negotiate(client, server).map_err(OpenError::Protocol)?;
    debug!(spid, ?client, answer, ?encryption, "PRELOGIN");
    {
        let mut w = PacketWriter::new(&mut sock, 4096, spid);
        w.buf().extend_from_slice(&prelogin::reply(answer));
        w.finish()?;
    }
    let config = match (encryption, tls) {
        (Encryption::None, _) => {
            let first = next(&mut sock)?;
            let login7 = login7(&mut sock, first)?;
            return Ok(Opened {
                transport: Transport::Plain,
                login7,
            });
        }
        (Encryption::Refused, _) => {
            if server == ServerEncryption::Forced {
                warn!(
                    spid,
                    "the client does not support encryption, which this server forces"
                );
            } else {
                warn!(
                    spid,
                    "the client requires encryption and this server has no certificate (--tls-cert)"
                );
            }
            return Err(OpenError::Refused);
        }
        (Encryption::LoginOnly | Encryption::Full, Some(t)) => &t.config,
        (Encryption::LoginOnly | Encryption::Full, None) => {
            return Err(OpenError::Protocol(
                "encryption negotiated without a certificate".into(),
            ));
        }
    };
    let conn = tls::handshake(&mut sock, config)?;
    let shared = SharedTls::new(conn);
    let mut reader = TlsReader::new(shared.clone(), sock.try_clone()?);
    let first = next(&mut reader)?;
    let login7 = login7(&mut reader, first)?;
    let transport = match encryption {
        Encryption::Full => Transport::Tls(shared, reader),
        _ => {
            // The client turns TLS off once LOGIN7 is sent and waits for the reply in the
            // clear; anything more in the TLS session would be lost with it.
            if reader.has_pending() {
                return Err(OpenError::Protocol(
                    "the client sent more than LOGIN7 before the login reply, with encryption for the login only"
                        .into(),
                ));
            }
            Transport::Plain
        }
    };
    Ok(Opened { transport, login7 })
}
