//! uniqueidentifier text: the upper-case storage form, parsed and formatted in display byte
//! order.

pub fn format_guid(b: &[u8; 16]) -> String {
    let mut out = String::with_capacity(36);
    push_guid(&mut out, b);
    out
}

pub(super) fn push_guid(out: &mut String, b: &[u8; 16]) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for (i, x) in b.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            out.push('-');
        }
        out.push(char::from(HEX[usize::from(x >> 4)]));
        out.push(char::from(HEX[usize::from(x & 0xF)]));
    }
}

/// `XXXXXXXX-XXXX-XXXX-XXXX-XXXXXXXXXXXX` (optionally in braces, any case) in display byte
/// order. Allocation-free: the GUID collation calls it for every comparison.
pub fn parse_guid(s: &str) -> Option<[u8; 16]> {
    // Stored values are canonical: the table-driven parse takes them without the checks below.
    if let Some(g) = fast_guid(s.as_bytes()) {
        return Some(g);
    }
    let s = s.trim();
    let s = s.strip_prefix('{').and_then(|r| r.strip_suffix('}')).unwrap_or(s);
    let b = s.as_bytes();
    if b.len() != 36 || [8, 13, 18, 23].iter().any(|&i| b[i] != b'-') {
        return None;
    }
    let nibble = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    };
    let mut out = [0u8; 16];
    let mut k = 0;
    let mut i = 0;
    while i < 36 {
        if b[i] == b'-' {
            i += 1;
            continue;
        }
        out[k] = (nibble(b[i])? << 4) | nibble(b[i + 1])?;
        k += 1;
        i += 2;
    }
    Some(out)
}

/// The canonical uniqueidentifier storage form (36 characters, hyphens at 8, 13, 18, 23).
pub(super) fn fast_guid(s: &[u8]) -> Option<[u8; 16]> {
    /// Hex digit values; 0x10 marks a byte that is not one.
    const HEX: [u8; 256] = {
        let mut t = [0x10u8; 256];
        let mut i = 0;
        while i < 10 {
            t[b'0' as usize + i] = i as u8;
            i += 1;
        }
        let mut i = 0;
        while i < 6 {
            t[b'a' as usize + i] = 10 + i as u8;
            t[b'A' as usize + i] = 10 + i as u8;
            i += 1;
        }
        t
    };
    const STARTS: [usize; 16] = [0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34];
    if s.len() != 36 || s[8] != b'-' || s[13] != b'-' || s[18] != b'-' || s[23] != b'-' {
        return None;
    }
    let mut out = [0u8; 16];
    let mut bad = 0u8;
    for (o, &i) in out.iter_mut().zip(STARTS.iter()) {
        let (hi, lo) = (HEX[usize::from(s[i])], HEX[usize::from(s[i + 1])]);
        bad |= hi | lo;
        *o = (hi << 4) | (lo & 0x0F);
    }
    (bad & 0x10 == 0).then_some(out)
}
