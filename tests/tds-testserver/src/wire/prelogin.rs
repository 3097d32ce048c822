//! PRELOGIN: the server's fixed answer (no TLS, MARS option present so FreeTDS keeps TDS 7.4).

/// VERSION 16.0.4000.0, ENCRYPTION = NOT_SUP (2), INSTOPT valid, THREADID empty, MARS off.
pub const PRELOGIN_REPLY: [u8; 35] = [
    0x00, 0x00, 0x1A, 0x00, 0x06, //
    0x01, 0x00, 0x20, 0x00, 0x01, //
    0x02, 0x00, 0x21, 0x00, 0x01, //
    0x03, 0x00, 0x22, 0x00, 0x00, //
    0x04, 0x00, 0x22, 0x00, 0x01, //
    0xFF, //
    0x10, 0x00, 0x0F, 0xA0, 0x00, 0x00, //
    0x02, //
    0x00, //
    0x00,
];

/// The ENCRYPTION option the client sent, if any (2 = not supported, 1/3 = required).
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reply_offsets_point_at_their_data() {
        // The option table is 5 entries of 5 bytes + 0xFF = 26 = 0x1A, where VERSION starts.
        assert_eq!(PRELOGIN_REPLY[26..32], [0x10, 0x00, 0x0F, 0xA0, 0x00, 0x00]);
        assert_eq!(client_encryption(&PRELOGIN_REPLY), Some(2));
    }
}
