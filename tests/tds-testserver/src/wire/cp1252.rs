//! Windows-1252, the code page of SQL_Latin1_General_CP1_CI_AS (collation `09 04 D0 00 34`),
//! used for varchar/char/text values on the wire. Mapping as WHATWG (and thus tiberius'
//! encoding_rs) defines it: the five unassigned bytes map to the C1 controls of the same value.

/// Characters for bytes 0x80..=0x9F.
const HIGH: [char; 32] = [
    '\u{20AC}', '\u{0081}', '\u{201A}', '\u{0192}', '\u{201E}', '\u{2026}', '\u{2020}', '\u{2021}',
    '\u{02C6}', '\u{2030}', '\u{0160}', '\u{2039}', '\u{0152}', '\u{008D}', '\u{017D}', '\u{008F}',
    '\u{0090}', '\u{2018}', '\u{2019}', '\u{201C}', '\u{201D}', '\u{2022}', '\u{2013}', '\u{2014}',
    '\u{02DC}', '\u{2122}', '\u{0161}', '\u{203A}', '\u{0153}', '\u{009D}', '\u{017E}', '\u{0178}',
];

fn encode_char(c: char) -> u8 {
    let u = u32::from(c);
    if u < 0x80 || (0xA0..=0xFF).contains(&u) {
        return u as u8;
    }
    match HIGH.iter().position(|&h| h == c) {
        Some(i) => 0x80 + i as u8,
        // SQL Server replaces characters the code page lacks with '?'.
        None => b'?',
    }
}

/// Appends `s` in cp1252; returns the number of bytes written.
pub fn encode_into(out: &mut Vec<u8>, s: &str) -> usize {
    if s.is_ascii() {
        out.extend_from_slice(s.as_bytes());
        return s.len();
    }
    let start = out.len();
    out.extend(s.chars().map(encode_char));
    out.len() - start
}

pub fn decode(b: &[u8]) -> String {
    if b.is_ascii() {
        return b.iter().map(|&c| c as char).collect();
    }
    b.iter()
        .map(|&c| match c {
            0x80..=0x9F => HIGH[usize::from(c - 0x80)],
            _ => char::from(c),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_every_byte() {
        let all: Vec<u8> = (0..=255u8).collect();
        let s = decode(&all);
        let mut back = Vec::new();
        encode_into(&mut back, &s);
        assert_eq!(back, all);
    }

    #[test]
    fn euro_and_unmappable() {
        let mut out = Vec::new();
        assert_eq!(encode_into(&mut out, "€é中😀"), 4);
        assert_eq!(out, vec![0x80, 0xE9, b'?', b'?']);
    }
}
