//! LOGIN7: decoding the client's login and encoding the server's reply.

use super::reader::{DecodeError, utf16_to_string};
use super::tokens;
use super::type_info::COLLATION;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Login7 {
    pub tds_version: u32,
    pub packet_size: u32,
    pub host_name: String,
    pub user: String,
    pub password: String,
    pub app_name: String,
    pub database: String,
    /// FeatureExt UTF8_SUPPORT: the client reads `_UTF8` collations' values as UTF-8.
    pub utf8: bool,
}

/// FeatureId of UTF8_SUPPORT in LOGIN7's FeatureExt and in FEATUREEXTACK.
const FEATURE_UTF8_SUPPORT: u8 = 0x0A;
const FEATURE_TERMINATOR: u8 = 0xFF;

/// Whether the FeatureExt block (OptionFlags3 fExtension; ibExtension points at a DWORD
/// offset of the block) asks for UTF-8. Features this server does not know are passed over, as
/// SQL Server passes them.
fn wants_utf8(p: &[u8]) -> Result<bool, DecodeError> {
    const EXTENSION_USED: u8 = 0x10;
    if p[27] & EXTENSION_USED == 0 {
        return Ok(false);
    }
    let entry = &p[56..60];
    let offset = usize::from(u16::from_le_bytes([entry[0], entry[1]]));
    let at = p
        .get(offset..offset + 4)
        .ok_or(DecodeError::Truncated("FeatureExt offset"))?;
    let mut at = u32::from_le_bytes([at[0], at[1], at[2], at[3]]) as usize;
    let mut utf8 = false;
    loop {
        let id = *p.get(at).ok_or(DecodeError::Truncated("FeatureExt"))?;
        if id == FEATURE_TERMINATOR {
            return Ok(utf8);
        }
        let len = p
            .get(at + 1..at + 5)
            .ok_or(DecodeError::Truncated("FeatureExt length"))?;
        let len = u32::from_le_bytes([len[0], len[1], len[2], len[3]]) as usize;
        let data = p
            .get(at + 5..at + 5 + len)
            .ok_or(DecodeError::Truncated("FeatureExt data"))?;
        if id == FEATURE_UTF8_SUPPORT {
            utf8 = data.first().is_some_and(|b| b & 1 != 0);
        }
        at += 5 + len;
    }
}

/// Reads field `index` of the offset/length table at byte 36 (lengths are in characters).
fn field<'p>(p: &'p [u8], index: usize, what: &'static str) -> Result<&'p [u8], DecodeError> {
    let at = 36 + index * 4;
    let entry = p.get(at..at + 4).ok_or(DecodeError::Truncated(what))?;
    let offset = usize::from(u16::from_le_bytes([entry[0], entry[1]]));
    let chars = usize::from(u16::from_le_bytes([entry[2], entry[3]]));
    p.get(offset..offset + chars * 2)
        .ok_or(DecodeError::Truncated(what))
}

fn text(p: &[u8], index: usize, what: &'static str) -> Result<String, DecodeError> {
    utf16_to_string(field(p, index, what)?)
        .ok_or_else(|| DecodeError::Invalid(format!("invalid UTF-16 in {what}")))
}

pub fn decode(p: &[u8]) -> Result<Login7, DecodeError> {
    if p.len() < 94 {
        return Err(DecodeError::Truncated("LOGIN7 header"));
    }
    let u32_at = |at: usize| u32::from_le_bytes([p[at], p[at + 1], p[at + 2], p[at + 3]]);
    // The password is obfuscated: every byte had its nibbles swapped, then was XORed with 0xA5.
    let password_bytes: Vec<u8> = field(p, 2, "password")?
        .iter()
        .map(|b| {
            let x = b ^ 0xA5;
            x.rotate_left(4)
        })
        .collect();
    Ok(Login7 {
        tds_version: u32_at(4),
        packet_size: u32_at(8),
        host_name: text(p, 0, "host name")?,
        user: text(p, 1, "user name")?,
        password: utf16_to_string(&password_bytes)
            .ok_or_else(|| DecodeError::Invalid("invalid UTF-16 in password".into()))?,
        app_name: text(p, 3, "application name")?,
        database: text(p, 8, "database")?,
        utf8: wants_utf8(p)?,
    })
}

/// The packet size granted for a login's request.
pub fn grant_packet_size(requested: u32, max: u32) -> u32 {
    let requested = if requested == 0 { 4096 } else { requested };
    requested.min(max).clamp(512, 32767)
}

/// The successful login reply (the order SQL Server uses); `utf8`: acknowledge UTF8_SUPPORT
/// (only for a client that asked).
pub fn write_success(out: &mut Vec<u8>, database: &str, packet_size: u32, utf8: bool) {
    tokens::env_string(out, 1, database, "master");
    tokens::message(
        out,
        tokens::TOKEN_INFO,
        5701,
        2,
        0,
        &format!("Changed database context to '{database}'."),
        1,
    );
    tokens::env_bytes(out, 7, &COLLATION, &[]);
    tokens::env_string(out, 2, "us_english", "");
    tokens::message(
        out,
        tokens::TOKEN_INFO,
        5703,
        1,
        0,
        "Changed language setting to us_english.",
        1,
    );
    tokens::loginack(out);
    if utf8 {
        out.extend_from_slice(&[tokens::TOKEN_FEATUREEXTACK, FEATURE_UTF8_SUPPORT, 1, 0, 0, 0, 1]);
        out.push(FEATURE_TERMINATOR);
    }
    tokens::env_string(out, 4, &packet_size.to_string(), "4096");
    tokens::done(out, tokens::TOKEN_DONE, 0, 0, 0);
}

/// A failed login: the errors, then DONE(ERROR). The caller closes the connection.
pub fn write_failure(out: &mut Vec<u8>, errors: &[(i32, u8, u8, String)]) {
    for (number, state, class, text) in errors {
        tokens::message(out, tokens::TOKEN_ERROR, *number, *state, *class, text, 1);
    }
    tokens::done(out, tokens::TOKEN_DONE, tokens::DONE_ERROR, 0, 0);
}

#[cfg(test)]
pub(crate) mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// Builds a LOGIN7 payload the way clients do (used by the server's own tests too).
    pub fn build_login7(user: &str, password: &str, database: &str, packet_size: u32) -> Vec<u8> {
        let enc = |s: &str| -> Vec<u8> { s.encode_utf16().flat_map(|u| u.to_le_bytes()).collect() };
        let pw: Vec<u8> = enc(password).iter().map(|b| b.rotate_left(4) ^ 0xA5).collect();
        let fields: Vec<Vec<u8>> = vec![
            enc("host"),
            enc(user),
            pw,
            enc("app"),
            enc("server"),
            Vec::new(),
            enc("lib"),
            Vec::new(),
            enc(database),
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

    #[test]
    fn decodes_user_password_database_and_packet_size() {
        let l = decode(&build_login7("sa", "Pä$$w0rd", "shop", 8192)).unwrap();
        assert_eq!(l.user, "sa");
        assert_eq!(l.password, "Pä$$w0rd");
        assert_eq!(l.database, "shop");
        assert_eq!(l.packet_size, 8192);
        assert_eq!(l.tds_version, 0x7400_0004);
        assert_eq!(l.app_name, "app");
        assert!(!l.utf8);
    }

    #[test]
    fn reads_the_utf8_support_feature() {
        let mut p = build_login7("sa", "x", "shop", 4096);
        // fExtension, ibExtension -> a DWORD offset -> [FEDAUTH-like unknown 0x7E len 2] [UTF8 len 1 = 1] FF.
        p[27] |= 0x10;
        let ext_at = p.len();
        p[56..58].copy_from_slice(&(ext_at as u16).to_le_bytes());
        p[58..60].copy_from_slice(&4u16.to_le_bytes());
        let block = ext_at + 4;
        p.extend_from_slice(&(block as u32).to_le_bytes());
        p.extend_from_slice(&[0x7E, 2, 0, 0, 0, 9, 9, 0x0A, 1, 0, 0, 0, 1, 0xFF]);
        assert!(decode(&p).unwrap().utf8);
        let n = p.len();
        p[n - 2] = 0;
        assert!(!decode(&p).unwrap().utf8);
    }

    #[test]
    fn packet_size_grant() {
        assert_eq!(grant_packet_size(4096, 32767), 4096);
        assert_eq!(grant_packet_size(32767, 16384), 16384);
        assert_eq!(grant_packet_size(100, 32767), 512);
        assert_eq!(grant_packet_size(0, 32767), 4096);
        assert_eq!(grant_packet_size(65535, 100_000), 32767);
    }
}
