//! Collations as SQL Server keeps them for `char`/`varchar`/`text`: the code page a value is
//! stored in (a character the code page lacks is stored as `?`), and the five bytes a TDS
//! TYPE_INFO carries (LCID, comparison flags, version, sort id) from which a client picks the code
//! page to decode with.
//!
//! Not reproduced: Windows' "best fit" mappings (SQL Server turns some characters a code page
//! lacks into a look-alike, e.g. `ā` into `a` under 1252, through `WideCharToMultiByte`); here
//! every character a code page lacks becomes `?`.

use crate::error::SqlError;
use std::borrow::Cow;

/// A code page of `char`/`varchar`/`text` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CodePage {
    Cp874,
    Cp932,
    Cp936,
    Cp949,
    Cp950,
    Cp1250,
    Cp1251,
    Cp1252,
    Cp1253,
    Cp1254,
    Cp1255,
    Cp1256,
    Cp1257,
    Cp1258,
    Utf8,
}

const ALL: [CodePage; 15] = [
    CodePage::Cp874,
    CodePage::Cp932,
    CodePage::Cp936,
    CodePage::Cp949,
    CodePage::Cp950,
    CodePage::Cp1250,
    CodePage::Cp1251,
    CodePage::Cp1252,
    CodePage::Cp1253,
    CodePage::Cp1254,
    CodePage::Cp1255,
    CodePage::Cp1256,
    CodePage::Cp1257,
    CodePage::Cp1258,
    CodePage::Utf8,
];

impl CodePage {
    /// COLLATIONPROPERTY(name, 'CodePage').
    pub fn number(self) -> u32 {
        match self {
            CodePage::Cp874 => 874,
            CodePage::Cp932 => 932,
            CodePage::Cp936 => 936,
            CodePage::Cp949 => 949,
            CodePage::Cp950 => 950,
            CodePage::Cp1250 => 1250,
            CodePage::Cp1251 => 1251,
            CodePage::Cp1252 => 1252,
            CodePage::Cp1253 => 1253,
            CodePage::Cp1254 => 1254,
            CodePage::Cp1255 => 1255,
            CodePage::Cp1256 => 1256,
            CodePage::Cp1257 => 1257,
            CodePage::Cp1258 => 1258,
            CodePage::Utf8 => 65001,
        }
    }

    /// The code page numbered `n` ([`CodePage::number`]).
    pub fn from_number(n: i64) -> Option<CodePage> {
        ALL.iter().copied().find(|c| i64::from(c.number()) == n)
    }

    fn encoding(self) -> &'static encoding_rs::Encoding {
        match self {
            CodePage::Cp874 => encoding_rs::WINDOWS_874,
            CodePage::Cp932 => encoding_rs::SHIFT_JIS,
            CodePage::Cp936 => encoding_rs::GBK,
            CodePage::Cp949 => encoding_rs::EUC_KR,
            CodePage::Cp950 => encoding_rs::BIG5,
            CodePage::Cp1250 => encoding_rs::WINDOWS_1250,
            CodePage::Cp1251 => encoding_rs::WINDOWS_1251,
            CodePage::Cp1252 => encoding_rs::WINDOWS_1252,
            CodePage::Cp1253 => encoding_rs::WINDOWS_1253,
            CodePage::Cp1254 => encoding_rs::WINDOWS_1254,
            CodePage::Cp1255 => encoding_rs::WINDOWS_1255,
            CodePage::Cp1256 => encoding_rs::WINDOWS_1256,
            CodePage::Cp1257 => encoding_rs::WINDOWS_1257,
            CodePage::Cp1258 => encoding_rs::WINDOWS_1258,
            CodePage::Utf8 => encoding_rs::UTF_8,
        }
    }

    /// Appends `s` in this code page, each character it lacks as `?`; false when one was
    /// replaced.
    pub fn encode_into(self, out: &mut Vec<u8>, s: &str) -> bool {
        // Every code page here is an ASCII superset.
        if s.is_ascii() || self == CodePage::Utf8 {
            out.extend_from_slice(s.as_bytes());
            return true;
        }
        let mut enc = self.encoding().new_encoder();
        let mut rest = s;
        let mut exact = true;
        loop {
            let room = enc
                .max_buffer_length_from_utf8_without_replacement(rest.len())
                .unwrap_or(rest.len() * 4 + 16);
            out.reserve(room);
            let (res, read) = enc.encode_from_utf8_to_vec_without_replacement(rest, out, true);
            rest = &rest[read..];
            match res {
                encoding_rs::EncoderResult::InputEmpty => return exact,
                encoding_rs::EncoderResult::OutputFull => {}
                encoding_rs::EncoderResult::Unmappable(_) => {
                    out.push(b'?');
                    exact = false;
                }
            }
        }
    }

    /// `s` in this code page, or None when it holds a character the code page lacks.
    pub fn encode_exact(self, s: &str) -> Option<Cow<'_, [u8]>> {
        if s.is_ascii() || self == CodePage::Utf8 {
            return Some(Cow::Borrowed(s.as_bytes()));
        }
        let mut out = Vec::with_capacity(s.len());
        self.encode_into(&mut out, s).then_some(Cow::Owned(out))
    }

    /// Bytes in this code page to text. A byte sequence the code page does not define decodes
    /// to U+FFFD.
    pub fn decode(self, b: &[u8]) -> String {
        if b.is_ascii() {
            // ASCII is valid UTF-8.
            return String::from_utf8_lossy(b).into_owned();
        }
        self.encoding().decode_without_bom_handling(b).0.into_owned()
    }

    /// `s` as this code page can hold it: each character it lacks becomes `?` (what SQL Server
    /// stores when Unicode text is converted to `varchar`).
    pub fn reduce(self, s: &str) -> Cow<'_, str> {
        if s.is_ascii() || self == CodePage::Utf8 {
            return Cow::Borrowed(s);
        }
        let mut out = Vec::with_capacity(s.len());
        if self.encode_into(&mut out, s) {
            return Cow::Borrowed(s);
        }
        Cow::Owned(self.decode(&out))
    }

    /// The length of `s` in bytes of this code page (a `varchar(n)` length counts these).
    pub fn byte_len(self, s: &str) -> usize {
        if s.is_ascii() || self == CodePage::Utf8 {
            return s.len();
        }
        let mut out = Vec::with_capacity(s.len());
        self.encode_into(&mut out, s);
        out.len()
    }
}

const IGNORE_CASE: u8 = 0x01;
const IGNORE_ACCENT: u8 = 0x02;
const IGNORE_KANA: u8 = 0x04;
const IGNORE_WIDTH: u8 = 0x08;
const BINARY: u8 = 0x10;
const BINARY2: u8 = 0x20;
const UTF8: u8 = 0x40;

/// A collation: what its code page is and how a TDS TYPE_INFO names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Collation {
    /// The Windows locale (20 bits).
    pub lcid: u32,
    /// fIgnoreCase, fIgnoreAccent, fIgnoreKana, fIgnoreWidth, fBinary, fBinary2, fUTF8.
    pub flags: u8,
    /// 0 for 80 collations, 1 for _90, 2 for _100, 3 for _140.
    pub version: u8,
    /// Non-zero for SQL collations (`SQL_...`), which a client maps to a code page by it.
    pub sort_id: u8,
    pub code_page: CodePage,
}

/// The default of the database and the server: SQL_Latin1_General_CP1_CI_AS.
pub const DEFAULT_COLLATION: Collation = Collation {
    lcid: 0x0409,
    flags: IGNORE_CASE | IGNORE_KANA | IGNORE_WIDTH,
    version: 0,
    sort_id: 52,
    code_page: CodePage::Cp1252,
};

/// Windows collation designators: the locale and its ANSI code page.
const DESIGNATORS: &[(&str, u32, CodePage)] = &[
    ("Albanian", 0x041C, CodePage::Cp1250),
    ("Arabic", 0x0401, CodePage::Cp1256),
    ("Bosnian_Latin", 0x141A, CodePage::Cp1250),
    ("Chinese_PRC", 0x0804, CodePage::Cp936),
    ("Chinese_Simplified_Pinyin", 0x0804, CodePage::Cp936),
    ("Chinese_Taiwan_Stroke", 0x0404, CodePage::Cp950),
    ("Chinese_Traditional_Stroke_Count", 0x0404, CodePage::Cp950),
    ("Croatian", 0x041A, CodePage::Cp1250),
    ("Cyrillic_General", 0x0419, CodePage::Cp1251),
    ("Czech", 0x0405, CodePage::Cp1250),
    ("Danish_Norwegian", 0x0406, CodePage::Cp1252),
    ("Estonian", 0x0425, CodePage::Cp1257),
    ("Finnish_Swedish", 0x040B, CodePage::Cp1252),
    ("French", 0x040C, CodePage::Cp1252),
    ("German_PhoneBook", 0x10407, CodePage::Cp1252),
    ("Greek", 0x0408, CodePage::Cp1253),
    ("Hebrew", 0x040D, CodePage::Cp1255),
    ("Hungarian", 0x040E, CodePage::Cp1250),
    ("Hungarian_Technical", 0x1040E, CodePage::Cp1250),
    ("Icelandic", 0x040F, CodePage::Cp1252),
    ("Japanese", 0x0411, CodePage::Cp932),
    ("Japanese_Bushu_Kakusu", 0x40411, CodePage::Cp932),
    ("Japanese_XJIS", 0x0411, CodePage::Cp932),
    ("Kazakh", 0x043F, CodePage::Cp1251),
    ("Korean_Wansung", 0x0412, CodePage::Cp949),
    ("Latin1_General", 0x0409, CodePage::Cp1252),
    ("Latvian", 0x0426, CodePage::Cp1257),
    ("Lithuanian", 0x0427, CodePage::Cp1257),
    ("Macedonian_FYROM", 0x042F, CodePage::Cp1251),
    ("Modern_Spanish", 0x0C0A, CodePage::Cp1252),
    ("Polish", 0x0415, CodePage::Cp1250),
    ("Romanian", 0x0418, CodePage::Cp1250),
    ("Serbian_Cyrillic", 0x0C1A, CodePage::Cp1251),
    ("Serbian_Latin", 0x081A, CodePage::Cp1250),
    ("Slovak", 0x041B, CodePage::Cp1250),
    ("Slovenian", 0x0424, CodePage::Cp1250),
    ("Thai", 0x041E, CodePage::Cp874),
    ("Traditional_Spanish", 0x040A, CodePage::Cp1252),
    ("Turkish", 0x041F, CodePage::Cp1254),
    ("Ukrainian", 0x0422, CodePage::Cp1251),
    ("Vietnamese", 0x042A, CodePage::Cp1258),
];

/// SQL collations known here: name, sort id (what a client maps to the code page), flags, code
/// page.
const SQL_COLLATIONS: &[(&str, u8, u8, CodePage)] = &[
    (
        "SQL_Latin1_General_CP1_CS_AS",
        51,
        IGNORE_KANA | IGNORE_WIDTH,
        CodePage::Cp1252,
    ),
    (
        "SQL_Latin1_General_CP1_CI_AS",
        52,
        IGNORE_CASE | IGNORE_KANA | IGNORE_WIDTH,
        CodePage::Cp1252,
    ),
    (
        "SQL_Latin1_General_CP1_CI_AI",
        54,
        IGNORE_CASE | IGNORE_ACCENT | IGNORE_KANA | IGNORE_WIDTH,
        CodePage::Cp1252,
    ),
    (
        "SQL_Latin1_General_CP1250_CS_AS",
        81,
        IGNORE_KANA | IGNORE_WIDTH,
        CodePage::Cp1250,
    ),
    (
        "SQL_Latin1_General_CP1250_CI_AS",
        82,
        IGNORE_CASE | IGNORE_KANA | IGNORE_WIDTH,
        CodePage::Cp1250,
    ),
    (
        "SQL_Latin1_General_CP1251_CS_AS",
        105,
        IGNORE_KANA | IGNORE_WIDTH,
        CodePage::Cp1251,
    ),
    (
        "SQL_Latin1_General_CP1251_CI_AS",
        106,
        IGNORE_CASE | IGNORE_KANA | IGNORE_WIDTH,
        CodePage::Cp1251,
    ),
];

fn invalid(name: &str) -> SqlError {
    SqlError::new(448, 16, format!("Invalid collation '{name}'."))
}

impl Collation {
    /// The collation named `name` (case-insensitive, brackets allowed); error 448 for a name
    /// SQL Server does not have, or one this server does not know.
    pub fn lookup(name: &str) -> Result<Collation, SqlError> {
        let n = name.trim().trim_start_matches('[').trim_end_matches(']');
        if n.eq_ignore_ascii_case("database_default") {
            return Ok(DEFAULT_COLLATION);
        }
        if let Some(&(_, sort_id, flags, code_page)) = SQL_COLLATIONS
            .iter()
            .find(|(s, _, _, _)| s.eq_ignore_ascii_case(n))
        {
            return Ok(Collation {
                lcid: 0x0409,
                flags,
                version: 0,
                sort_id,
                code_page,
            });
        }
        // The longest designator that prefixes the name (`Latin1_General` before `Latin1`).
        let (designator, lcid, code_page) = DESIGNATORS
            .iter()
            .filter(|(d, _, _)| {
                n.len() > d.len() && n[..d.len()].eq_ignore_ascii_case(d) && n.as_bytes()[d.len()] == b'_'
            })
            .max_by_key(|(d, _, _)| d.len())
            .copied()
            .ok_or_else(|| invalid(name))?;
        let mut parts = n[designator.len() + 1..]
            .split('_')
            .map(|p| p.to_ascii_uppercase())
            .peekable();
        let version = match parts.peek().map(String::as_str) {
            Some("90") => 1,
            Some("100") => 2,
            Some("140") => 3,
            _ => 0,
        };
        if version != 0 {
            parts.next();
        }
        let rest: Vec<String> = parts.collect();
        let mut c = Collation {
            lcid,
            flags: 0,
            version,
            sort_id: 0,
            code_page,
        };
        match rest.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
            ["BIN"] => c.flags = BINARY,
            ["BIN2"] => c.flags = BINARY2,
            ["BIN2", "UTF8"] if version >= 2 => {
                c.flags = BINARY2 | UTF8;
                c.code_page = CodePage::Utf8;
            }
            [case, accent, options @ ..] => {
                c.flags = match *case {
                    "CI" => IGNORE_CASE,
                    "CS" => 0,
                    _ => return Err(invalid(name)),
                };
                c.flags |= match *accent {
                    "AI" => IGNORE_ACCENT,
                    "AS" => 0,
                    _ => return Err(invalid(name)),
                };
                let (mut ks, mut ws) = (false, false);
                for o in options {
                    match *o {
                        "KS" => ks = true,
                        "WS" => ws = true,
                        "VSS" | "SC" => {}
                        "UTF8" if version >= 2 => {
                            c.flags |= UTF8;
                            c.code_page = CodePage::Utf8;
                        }
                        _ => return Err(invalid(name)),
                    }
                }
                if !ks {
                    c.flags |= IGNORE_KANA;
                }
                if !ws {
                    c.flags |= IGNORE_WIDTH;
                }
            }
            _ => return Err(invalid(name)),
        }
        Ok(c)
    }

    /// The collation of a column declared with `name` (None: the database default).
    pub fn of_column(name: Option<&str>) -> Collation {
        name.and_then(|n| Collation::lookup(n).ok())
            .unwrap_or(DEFAULT_COLLATION)
    }

    /// COLLATIONPROPERTY(name, property): CodePage, LCID, ComparisonStyle (the Windows
    /// comparison flags: 1 ignore case, 2 ignore accents, 65536 ignore kana, 131072 ignore
    /// width; 0 for binary ones), Version; None for another property.
    pub fn property(&self, property: &str) -> Option<i64> {
        match property.to_ascii_lowercase().as_str() {
            "codepage" => Some(i64::from(self.code_page.number())),
            "lcid" => Some(i64::from(self.lcid)),
            "comparisonstyle" => Some(if self.flags & (BINARY | BINARY2) != 0 {
                0
            } else {
                i64::from(self.flags & IGNORE_CASE)
                    | (i64::from(self.flags & IGNORE_ACCENT))
                    | if self.flags & IGNORE_KANA != 0 { 65536 } else { 0 }
                    | if self.flags & IGNORE_WIDTH != 0 { 131072 } else { 0 }
            }),
            "version" => Some(i64::from(self.version)),
            _ => None,
        }
    }

    /// Whether `_UTF8`.
    pub fn is_utf8(&self) -> bool {
        self.flags & UTF8 != 0
    }

    /// Reads the five TYPE_INFO bytes a client sent.
    pub fn from_wire(b: [u8; 5]) -> Option<Collation> {
        let info = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        let lcid = info & 0x000F_FFFF;
        let flags = ((info >> 20) & 0xFF) as u8;
        let version = (info >> 28) as u8;
        let sort_id = b[4];
        let code_page = if flags & UTF8 != 0 {
            CodePage::Utf8
        } else if sort_id != 0 {
            SQL_COLLATIONS
                .iter()
                .find(|(_, s, _, _)| *s == sort_id)
                .map(|(_, _, _, cp)| *cp)?
        } else {
            DESIGNATORS
                .iter()
                .find(|(_, l, _)| *l == lcid)
                .map(|(_, _, cp)| *cp)
                .or(if lcid == 0 { Some(CodePage::Cp1252) } else { None })?
        };
        Some(Collation {
            lcid,
            flags,
            version,
            sort_id,
            code_page,
        })
    }

    /// How this collation is sent to a client, and the code page its values are sent in. A
    /// client that did not ask for UTF-8 (LOGIN7 feature UTF8_SUPPORT) gets a `_UTF8` column's
    /// values in its locale's ANSI code page, as SQL Server sends them to such a client.
    pub fn for_client(&self, utf8_client: bool) -> WireCollation {
        let (flags, code_page) = if self.is_utf8() && !utf8_client {
            let ansi = DESIGNATORS
                .iter()
                .find(|(_, l, _)| *l == self.lcid)
                .map_or(CodePage::Cp1252, |(_, _, cp)| *cp);
            (self.flags & !UTF8, ansi)
        } else {
            (self.flags, self.code_page)
        };
        let info = self.lcid | (u32::from(flags) << 20) | (u32::from(self.version) << 28);
        let w = info.to_le_bytes();
        WireCollation {
            bytes: [w[0], w[1], w[2], w[3], self.sort_id],
            code_page,
            lossy: code_page != self.code_page,
        }
    }
}

/// A collation as one connection sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WireCollation {
    /// The TYPE_INFO bytes.
    pub bytes: [u8; 5],
    /// The code page values are sent in.
    pub code_page: CodePage,
    /// Characters the code page lacks are sent as `?` (a `_UTF8` column to a client without
    /// UTF-8); otherwise a value the code page cannot hold is an error of this server, never a
    /// silent `?`.
    pub lossy: bool,
}

impl WireCollation {
    /// SQL_Latin1_General_CP1_CI_AS.
    pub const DEFAULT: WireCollation = WireCollation {
        bytes: [0x09, 0x04, 0xD0, 0x00, 0x34],
        code_page: CodePage::Cp1252,
        lossy: false,
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_sql_latin1_on_the_wire() {
        assert_eq!(DEFAULT_COLLATION.for_client(false), WireCollation::DEFAULT);
        assert_eq!(
            Collation::lookup("SQL_Latin1_General_CP1_CI_AS").map(|c| c.for_client(true).bytes),
            Ok(WireCollation::DEFAULT.bytes)
        );
    }

    #[test]
    fn code_pages_by_name() {
        let cp = |n: &str| Collation::lookup(n).map(|c| c.code_page.number());
        assert_eq!(cp("Latin1_General_CI_AS"), Ok(1252));
        assert_eq!(cp("SQL_Latin1_General_CP1250_CI_AS"), Ok(1250));
        assert_eq!(cp("SQL_Latin1_General_CP1251_CS_AS"), Ok(1251));
        assert!(cp("SQL_Latin1_General_CP437_CI_AS").is_err());
        assert_eq!(cp("Latin1_General_100_BIN2"), Ok(1252));
        assert_eq!(cp("Cyrillic_General_CI_AS"), Ok(1251));
        assert_eq!(cp("Czech_CI_AS"), Ok(1250));
        assert_eq!(cp("Polish_100_CS_AS_KS_WS"), Ok(1250));
        assert_eq!(cp("Croatian_CI_AI"), Ok(1250));
        assert_eq!(cp("Hungarian_Technical_CI_AS"), Ok(1250));
        assert_eq!(cp("Japanese_CI_AS"), Ok(932));
        assert_eq!(cp("Latin1_General_100_CI_AS_SC_UTF8"), Ok(65001));
        assert_eq!(cp("Japanese_XJIS_140_CI_AS_UTF8"), Ok(65001));
        assert_eq!(cp("Japanese_XJIS_140_CI_AS"), Ok(932));
        assert_eq!(cp("Klingon_Case_Maybe").map_err(|e| e.number), Err(448));
        // UTF-8 needs a _100 or later version.
        assert!(cp("Latin1_General_CI_AS_UTF8").is_err());
    }

    #[test]
    fn collation_properties() {
        let c = Collation::lookup("Cyrillic_General_CI_AS").unwrap_or(DEFAULT_COLLATION);
        assert_eq!(c.property("CodePage"), Some(1251));
        assert_eq!(c.property("LCID"), Some(1049));
        assert_eq!(c.property("ComparisonStyle"), Some(196609));
        assert_eq!(DEFAULT_COLLATION.property("ComparisonStyle"), Some(196609));
        let b = Collation::lookup("Latin1_General_100_BIN2").unwrap_or(DEFAULT_COLLATION);
        assert_eq!(
            (b.property("ComparisonStyle"), b.property("Version")),
            (Some(0), Some(2))
        );
        assert_eq!(b.property("nonsense"), None);
    }

    #[test]
    fn windows_collation_bytes() {
        let c = Collation::lookup("Cyrillic_General_CI_AS").unwrap_or(DEFAULT_COLLATION);
        // LCID 0x0419, CI + KI + WI, version 0, no sort id.
        assert_eq!(c.for_client(false).bytes, [0x19, 0x04, 0xD0, 0x00, 0x00]);
        let u = Collation::lookup("Latin1_General_100_CI_AS_SC_UTF8").unwrap_or(DEFAULT_COLLATION);
        assert_eq!(u.for_client(true).bytes, [0x09, 0x04, 0xD0, 0x24, 0x00]);
        assert_eq!(u.for_client(true).code_page, CodePage::Utf8);
        // Without UTF-8 support the client gets 1252 and no UTF-8 flag.
        assert_eq!(u.for_client(false).bytes, [0x09, 0x04, 0xD0, 0x20, 0x00]);
        assert!(u.for_client(false).lossy);
        assert_eq!(Collation::from_wire(u.for_client(true).bytes), Some(u));
    }

    #[test]
    fn characters_the_code_page_lacks_become_question_marks() {
        assert_eq!(CodePage::Cp1252.reduce("Ж€é"), "?€é");
        assert_eq!(CodePage::Cp1251.reduce("Жé"), "Ж?");
        assert_eq!(CodePage::Cp1250.reduce("Łódź Ж"), "Łódź ?");
        assert_eq!(CodePage::Cp932.reduce("日本Ж€"), "日本Ж?");
        assert_eq!(CodePage::Utf8.reduce("日本Ж€😀"), "日本Ж€😀");
        assert_eq!(CodePage::Cp932.byte_len("日本a"), 5);
        assert_eq!(CodePage::Utf8.byte_len("日本a"), 7);
        assert_eq!(CodePage::Cp1251.decode(&[0xC6]), "Ж");
        assert!(CodePage::Cp1252.encode_exact("Ж").is_none());
    }
}
