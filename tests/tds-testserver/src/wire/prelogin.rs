//! PRELOGIN: the server's answer, and the encryption it negotiates from the client's ENCRYPTION
//! option and whether the server has a certificate, as SQL Server does ([MS-TDS] 2.2.6.5).

/// The client's and the server's ENCRYPTION values.
pub const ENCRYPT_OFF: u8 = 0;
pub const ENCRYPT_ON: u8 = 1;
pub const ENCRYPT_NOT_SUP: u8 = 2;
pub const ENCRYPT_REQ: u8 = 3;
/// Set on top of the others by a client that authenticates with a certificate (TDS 8).
const ENCRYPT_CLIENT_CERT: u8 = 0x80;

/// VERSION 16.0.4000.0, ENCRYPTION (byte [`ENCRYPTION_AT`], filled in per client), INSTOPT
/// valid, THREADID empty, MARS off (the option is present so FreeTDS keeps TDS 7.4).
const PRELOGIN_REPLY: [u8; 35] = [
    0x00,
    0x00,
    0x1A,
    0x00,
    0x06, //
    0x01,
    0x00,
    0x20,
    0x00,
    0x01, //
    0x02,
    0x00,
    0x21,
    0x00,
    0x01, //
    0x03,
    0x00,
    0x22,
    0x00,
    0x00, //
    0x04,
    0x00,
    0x22,
    0x00,
    0x01, //
    0xFF, //
    0x10,
    0x00,
    0x0F,
    0xA0,
    0x00,
    0x00,            //
    ENCRYPT_NOT_SUP, //
    0x00,            //
    0x00,
];
const ENCRYPTION_AT: usize = 0x20;

/// The PRELOGIN reply announcing `encryption`.
pub fn reply(encryption: u8) -> [u8; 35] {
    let mut r = PRELOGIN_REPLY;
    r[ENCRYPTION_AT] = encryption;
    r
}

/// The ENCRYPTION option the client sent, if any.
pub fn client_encryption(payload: &[u8]) -> Option<u8> {
    let mut i = 0;
    while i + 5 <= payload.len() && payload[i] != 0xFF {
        let token = payload[i];
        let offset = usize::from(u16::from_be_bytes([payload[i + 1], payload[i + 2]]));
        if token == 1 {
            return payload.get(offset).copied();
        }
        i += 5;
    }
    None
}

/// What the connection does after the PRELOGIN reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encryption {
    /// Nothing is encrypted.
    None,
    /// A TLS handshake, the LOGIN7 message encrypted, everything after it in the clear.
    LoginOnly,
    /// A TLS handshake, then every packet encrypted.
    Full,
    /// One side requires encryption the other cannot do: the reply says so and the connection
    /// ends (SQL Server's "connection terminated" cases).
    Refused,
}

/// What the server can do, as SQL Server's configuration says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerEncryption {
    /// No certificate: cannot encrypt at all.
    None,
    /// A certificate, "Force Encryption" off: encrypts what the client asks for.
    Supported,
    /// A certificate, "Force Encryption" on: every session is encrypted.
    Forced,
}

/// The reply's ENCRYPTION value and what follows, for the client's value (`None`: the client
/// sent no ENCRYPTION option, which only clients without TLS do) and the server's setting.
pub fn negotiate(client: Option<u8>, server: ServerEncryption) -> Result<(u8, Encryption), String> {
    let client = client.unwrap_or(ENCRYPT_NOT_SUP);
    if client & ENCRYPT_CLIENT_CERT != 0 {
        return Err(format!(
            "the client asks for certificate authentication (ENCRYPTION 0x{client:02X}), which this server does not support"
        ));
    }
    use ServerEncryption::{Forced, None as NoTls, Supported};
    Ok(match (client, server) {
        (ENCRYPT_OFF, Supported) => (ENCRYPT_OFF, Encryption::LoginOnly),
        (ENCRYPT_OFF, Forced) => (ENCRYPT_REQ, Encryption::Full),
        (ENCRYPT_ON | ENCRYPT_REQ, Supported | Forced) => (ENCRYPT_ON, Encryption::Full),
        (ENCRYPT_NOT_SUP, Supported | NoTls) | (ENCRYPT_OFF, NoTls) => (ENCRYPT_NOT_SUP, Encryption::None),
        (ENCRYPT_NOT_SUP, Forced) => (ENCRYPT_REQ, Encryption::Refused),
        (ENCRYPT_ON | ENCRYPT_REQ, NoTls) => (ENCRYPT_NOT_SUP, Encryption::Refused),
        (other, _) => return Err(format!("unknown ENCRYPTION value 0x{other:02X} in PRELOGIN")),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn reply_offsets_point_at_their_data() {
        // The option table is 5 entries of 5 bytes + 0xFF = 26 = 0x1A, where VERSION starts.
        assert_eq!(PRELOGIN_REPLY[26..32], [0x10, 0x00, 0x0F, 0xA0, 0x00, 0x00]);
        for value in [ENCRYPT_OFF, ENCRYPT_ON, ENCRYPT_NOT_SUP] {
            assert_eq!(client_encryption(&reply(value)), Some(value));
        }
    }

    #[test]
    fn negotiation_follows_sql_server_for_each_client_setting() {
        let with_cert = |c| negotiate(Some(c), ServerEncryption::Supported).unwrap();
        assert_eq!(with_cert(ENCRYPT_OFF), (ENCRYPT_OFF, Encryption::LoginOnly));
        assert_eq!(with_cert(ENCRYPT_ON), (ENCRYPT_ON, Encryption::Full));
        assert_eq!(with_cert(ENCRYPT_REQ), (ENCRYPT_ON, Encryption::Full));
        assert_eq!(with_cert(ENCRYPT_NOT_SUP), (ENCRYPT_NOT_SUP, Encryption::None));

        let forced = |c| negotiate(Some(c), ServerEncryption::Forced).unwrap();
        assert_eq!(forced(ENCRYPT_OFF), (ENCRYPT_REQ, Encryption::Full));
        assert_eq!(forced(ENCRYPT_ON), (ENCRYPT_ON, Encryption::Full));
        assert_eq!(forced(ENCRYPT_REQ), (ENCRYPT_ON, Encryption::Full));
        assert_eq!(forced(ENCRYPT_NOT_SUP), (ENCRYPT_REQ, Encryption::Refused));

        let without = |c| negotiate(Some(c), ServerEncryption::None).unwrap();
        assert_eq!(without(ENCRYPT_OFF), (ENCRYPT_NOT_SUP, Encryption::None));
        assert_eq!(without(ENCRYPT_NOT_SUP), (ENCRYPT_NOT_SUP, Encryption::None));
        assert_eq!(without(ENCRYPT_ON), (ENCRYPT_NOT_SUP, Encryption::Refused));
        assert_eq!(without(ENCRYPT_REQ), (ENCRYPT_NOT_SUP, Encryption::Refused));

        assert_eq!(
            negotiate(None, ServerEncryption::Supported).unwrap(),
            (ENCRYPT_NOT_SUP, Encryption::None)
        );
        assert!(negotiate(Some(0x81), ServerEncryption::Supported).is_err());
        assert!(negotiate(Some(7), ServerEncryption::Supported).is_err());
    }
}
