//! Strings to `hierarchyid` and `geography`, as SQL Server converts them (implicitly on a write
//! to such a column, and by CAST/CONVERT): `hierarchyid::Parse` of the path text and
//! `geography::Parse` (well-known text, SRID 4326), giving SQL Server's binary form, which is
//! what the test server stores. A string SQL Server refuses gets its error: 6522 with the .NET
//! exception SQL Server prints. What this encoder does not cover (geography shapes other than a
//! point, hierarchyid labels beyond -4168..5199) is refused with 6522 saying so, never stored
//! differently.

use crate::error::SqlError;

/// Which CLR type a column or CAST target is, from its declared name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClrType {
    HierarchyId,
    Geography,
}

impl ClrType {
    /// `hierarchyid`, `[geography]`, `sys.hierarchyid` (case-insensitive).
    pub fn from_name(name: &str) -> Option<Self> {
        let name = name.trim();
        let name = name
            .strip_prefix("sys.")
            .or_else(|| name.strip_prefix("[sys]."))
            .unwrap_or(name);
        match name
            .trim_matches(|c| c == '[' || c == ']')
            .to_ascii_lowercase()
            .as_str()
        {
            "hierarchyid" => Some(Self::HierarchyId),
            "geography" => Some(Self::Geography),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::HierarchyId => "hierarchyid",
            Self::Geography => "geography",
        }
    }

    /// The binary form of `text`, or SQL Server's error for it.
    pub fn parse(self, text: &str) -> Result<Vec<u8>, SqlError> {
        match self {
            Self::HierarchyId => parse_hierarchyid(text),
            Self::Geography => parse_geography(text),
        }
    }
}

fn dotnet_error(udt: &str, detail: &str) -> SqlError {
    SqlError::new(
        6522,
        16,
        format!(
            "A .NET Framework error occurred during execution of user-defined routine or aggregate \"{udt}\": \n{detail}"
        ),
    )
}

fn hierarchyid_parse_error(text: &str) -> SqlError {
    dotnet_error(
        "hierarchyid",
        &format!(
            "Microsoft.SqlServer.Types.HierarchyIdException: 24001: SqlHierarchyId.Parse failed because the input string '{text}' is not a valid string representation of a SqlHierarchyId node.\nMicrosoft.SqlServer.Types.HierarchyIdException: \n   at Microsoft.SqlServer.Types.SqlHierarchyId.Parse(SqlString input)\n."
        ),
    )
}

/// The label ranges of the encoding (as in [`hierarchyid_levels`]): prefix bits,
/// the layout of value bits ('x') and fixed bits, and the lowest label.
pub(crate) const HIERARCHYID_RANGES: &[(&str, &str, i64)] = &[
    ("01", "xx", 0),
    ("100", "xx", 4),
    ("101", "xxx", 8),
    ("110", "xx0x1xxx", 16),
    ("1110", "xxx0xxx0x1xxx", 80),
    ("11110", "xxxxx0xxx0x1xxx", 1104),
    ("00111", "xxx", -8),
    ("0010", "xx0x1xxx", -72),
    ("000110", "xxxxx0xxx0x1xxx", -4168),
];

/// hierarchyid::Parse: `/`, or levels each ending in `/`, a level being integers joined by
/// dots, written without leading zeros.
pub fn parse_hierarchyid(text: &str) -> Result<Vec<u8>, SqlError> {
    let bad = || hierarchyid_parse_error(text);
    let body = text.strip_prefix('/').ok_or_else(bad)?;
    let mut levels: Vec<Vec<i64>> = Vec::new();
    if !body.is_empty() {
        let body = body.strip_suffix('/').ok_or_else(bad)?;
        for level in body.split('/') {
            let labels = level.split('.').map(parse_label).collect::<Option<Vec<i64>>>();
            levels.push(labels.ok_or_else(bad)?);
        }
    }
    encode_hierarchyid(&levels)
}

/// An integer label: optional minus, digits, no leading zeros.
fn parse_label(s: &str) -> Option<i64> {
    let digits = s.strip_prefix('-').unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if digits.len() > 1 && digits.starts_with('0') {
        return None;
    }
    s.parse().ok()
}

/// The bit form: each label but a level's last is written as label + 1 followed by a 0 bit
/// (a dot follows), the last as itself followed by a 1 bit; zero bits pad to a byte.
pub fn encode_hierarchyid(levels: &[Vec<i64>]) -> Result<Vec<u8>, SqlError> {
    let mut bits: Vec<u8> = Vec::new();
    for level in levels {
        for (k, &label) in level.iter().enumerate() {
            let last = k + 1 == level.len();
            let value = if last { label } else { label.saturating_add(1) };
            let (prefix, layout, low) = HIERARCHYID_RANGES
                .iter()
                .find(|(_, layout, low)| {
                    let width = layout.bytes().filter(|b| *b == b'x').count() as u32;
                    value >= *low && value < low + (1i64 << width)
                })
                .ok_or_else(|| {
                    dotnet_error(
                        "hierarchyid",
                        "the test server encodes hierarchyid labels in -4168..5199 only.",
                    )
                })?;
            bits.extend(prefix.bytes().map(|b| b - b'0'));
            let width = layout.bytes().filter(|b| *b == b'x').count();
            let offset = value - low;
            let mut next = width;
            for b in layout.bytes() {
                if b == b'x' {
                    next -= 1;
                    bits.push(((offset >> next) & 1) as u8);
                } else {
                    bits.push(b - b'0');
                }
            }
            bits.push(u8::from(last));
        }
    }
    Ok(bits
        .chunks(8)
        .map(|c| c.iter().enumerate().fold(0u8, |acc, (i, b)| acc | (b << (7 - i))))
        .collect())
}

const WKT_LABELS: &[&str] = &[
    "POINT",
    "LINESTRING",
    "POLYGON",
    "MULTIPOINT",
    "MULTILINESTRING",
    "MULTIPOLYGON",
    "GEOMETRYCOLLECTION",
    "CIRCULARSTRING",
    "COMPOUNDCURVE",
    "CURVEPOLYGON",
    "FULLGLOBE",
];

fn format_error(detail: &str) -> SqlError {
    dotnet_error(
        "geography",
        &format!(
            "System.FormatException: {detail}\nSystem.FormatException: \n   at Microsoft.SqlServer.Types.WellKnownTextReader.ParseText(String text)\n."
        ),
    )
}

/// geography::Parse of well-known text with SRID 4326. Points (`POINT (long lat [z [m]])`) are
/// encoded; any other shape is refused as beyond the test server.
pub fn parse_geography(text: &str) -> Result<Vec<u8>, SqlError> {
    let t = text.trim_start();
    let label_len = t.find(|c: char| !c.is_ascii_alphabetic()).unwrap_or(t.len());
    let label = t[..label_len].to_ascii_uppercase();
    if !WKT_LABELS.contains(&label.as_str()) {
        return Err(format_error(&format!(
            "24114: The label {} in the input well-known text (WKT) is not valid. Valid labels are POINT, LINESTRING, POLYGON, MULTIPOINT, MULTILINESTRING, MULTIPOLYGON, GEOMETRYCOLLECTION, CIRCULARSTRING, COMPOUNDCURVE, CURVEPOLYGON and FULLGLOBE (geography Data Type only).",
            t.split_whitespace().next().unwrap_or("")
        )));
    }
    let rest = t[label_len..].trim();
    if label != "POINT" || rest.eq_ignore_ascii_case("EMPTY") {
        return Err(dotnet_error(
            "geography",
            "the test server converts well-known text of a single point (not EMPTY) to geography only.",
        ));
    }
    let inner = rest
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| {
            format_error(
                "24141: A number is expected at position 1 of the input. The input has no coordinates.",
            )
        })?;
    let coords = inner
        .split_whitespace()
        .map(|n| n.parse::<f64>().ok().filter(|v| v.is_finite()))
        .collect::<Option<Vec<f64>>>()
        .filter(|c| (2..=4).contains(&c.len()))
        .ok_or_else(|| {
            format_error(&format!(
                "24141: A number is expected at position {} of the input. The input has {inner}.",
                text.len() - inner.len()
            ))
        })?;
    let (long, lat) = (coords[0], coords[1]);
    if !(-90.0..=90.0).contains(&lat) {
        return Err(dotnet_error(
            "geography",
            "System.FormatException: 24201: Latitude values must be between -90 and 90 degrees.\nSystem.FormatException: \n   at Microsoft.SqlServer.Types.GeographyValidator.ValidatePoint(Double x, Double y, Nullable`1 z, Nullable`1 m)\n.",
        ));
    }
    if !(-15069.0..=15069.0).contains(&long) {
        return Err(dotnet_error(
            "geography",
            "System.FormatException: 24202: Longitude values must be between -15069 and 15069 degrees.\nSystem.FormatException: \n   at Microsoft.SqlServer.Types.GeographyValidator.ValidatePoint(Double x, Double y, Nullable`1 z, Nullable`1 m)\n.",
        ));
    }
    // SRID, version 1, flags: valid (0x04) and a single point (0x08), Z 0x01, M 0x02.
    let mut flags = 0x0C;
    if coords.len() >= 3 {
        flags |= 0x01;
    }
    if coords.len() == 4 {
        flags |= 0x02;
    }
    let mut out = Vec::with_capacity(38);
    out.extend_from_slice(&4326i32.to_le_bytes());
    out.push(1);
    out.push(flags);
    out.extend_from_slice(&lat.to_le_bytes());
    out.extend_from_slice(&long.to_le_bytes());
    for v in &coords[2..] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    Ok(out)
}

/// hierarchyid's binary form: the levels of the path, each a list of labels (more than one
/// when a level is written with dots, `/1.2/`). `None` for a value this decoder does not
/// handle (labels beyond -4168..5199).
pub fn hierarchyid_levels(bytes: &[u8]) -> Option<Vec<Vec<i64>>> {
    let bit = |i: usize| -> u8 { (bytes[i / 8] >> (7 - i % 8)) & 1 };
    let total = bytes.len() * 8;
    let mut pos = 0;
    let mut levels = Vec::new();
    let mut level = Vec::new();
    'outer: while pos < total {
        if (pos..total).all(|i| bit(i) == 0) {
            break;
        }
        for (prefix, layout, low) in crate::convert::clr::HIERARCHYID_RANGES {
            let matches = prefix
                .bytes()
                .enumerate()
                .all(|(k, b)| pos + k < total && bit(pos + k) == b - b'0');
            if !matches {
                continue;
            }
            let mut p = pos + prefix.len();
            let mut value = 0i64;
            for b in layout.bytes() {
                if p >= total {
                    return None;
                }
                match b {
                    b'x' => value = value << 1 | i64::from(bit(p)),
                    fixed => {
                        if bit(p) != fixed - b'0' {
                            return None;
                        }
                    }
                }
                p += 1;
            }
            if p >= total {
                return None;
            }
            // The last bit: 1 ends the level; 0 continues it with a dot, the label then
            // being written one higher than it is.
            if bit(p) == 1 {
                level.push(low + value);
                levels.push(std::mem::take(&mut level));
            } else {
                level.push(low + value - 1);
            }
            pos = p + 1;
            continue 'outer;
        }
        return None;
    }
    level.is_empty().then_some(levels)
}

/// A hierarchyid's text as ToString() gives it: `/`, `/1/`, `/1/2.5/`.
pub fn hierarchyid_text(levels: &[Vec<i64>]) -> String {
    let mut s = String::from("/");
    for level in levels {
        let labels: Vec<String> = level.iter().map(i64::to_string).collect();
        s.push_str(&labels.join("."));
        s.push('/');
    }
    s
}

/// A geography point's well-known text as SQL Server prints it (`POINT (long lat)`, 15
/// significant digits); `None` for anything but a single point.
pub fn geography_point_text(b: &[u8]) -> Option<String> {
    // SRID (4 bytes), version (1 or 2), flags: 0x08 a single point, 0x01 Z, 0x02 M.
    if b.len() < 22 || !matches!(b[4], 1 | 2) || b[5] & 0x08 == 0 {
        return None;
    }
    let f = |at: usize| -> Option<f64> { Some(f64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?)) };
    let (lat, long) = (f(6)?, f(14)?);
    let mut parts = vec![number(long), number(lat)];
    if b[5] & 0x01 != 0 {
        parts.push(number(f(22)?));
    }
    Some(format!("POINT ({})", parts.join(" ")))
}

/// A coordinate with 15 significant digits, trailing zeros dropped.
fn number(v: f64) -> String {
    if v == 0.0 {
        return "0".to_string();
    }
    let digits = 15 - 1 - v.abs().log10().floor() as i32;
    let s = format!("{:.*}", digits.max(0) as usize, v);
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hierarchyid_examples_of_the_format() {
        assert_eq!(parse_hierarchyid("/").ok(), Some(vec![]));
        assert_eq!(parse_hierarchyid("/1/").ok(), Some(vec![0x58]));
        assert_eq!(parse_hierarchyid("/1/1/").ok(), Some(vec![0x5A, 0xC0]));
        // The format's own example: /1/-2.18/.
        assert_eq!(
            parse_hierarchyid("/1/-2.18/").ok(),
            Some(vec![0x59, 0xFB, 0x05, 0x40])
        );
        for bad in ["1/", "/1", "/01/", "/1//", "/a/", "/1.-/", " /1/", "/+1/"] {
            assert_eq!(parse_hierarchyid(bad).map_err(|e| e.number), Err(6522), "{bad:?}");
        }
    }

    #[test]
    fn hierarchyid_round_trips_through_the_decoder() {
        for text in [
            "/5199/",
            "/-4168/",
            "/80/1103/1104/",
            "/1/2.5/",
            "/0.1/0.2/",
            "/-9.-73/79/",
        ] {
            let bytes = parse_hierarchyid(text).unwrap_or_default();
            let levels = hierarchyid_levels(&bytes);
            assert_eq!(levels.map(|l| hierarchyid_text(&l)).as_deref(), Some(text));
        }
        assert_eq!(parse_hierarchyid("/5200/").map_err(|e| e.number), Err(6522));
    }

    #[test]
    fn geography_points() {
        let b = parse_geography("POINT(-122.164644615406 47.7869921906598)").unwrap_or_default();
        assert_eq!(&b[..6], &[0xE6, 0x10, 0, 0, 1, 0x0C]);
        assert_eq!(
            geography_point_text(&b).as_deref(),
            Some("POINT (-122.164644615406 47.7869921906598)")
        );
        assert_eq!(parse_geography("point (1 2 3)").map(|b| b[5]).ok(), Some(0x0D));
        assert_eq!(parse_geography("POINT (1 91)").map_err(|e| e.number), Err(6522));
        assert!(parse_geography("POINTX (1 2)").is_err_and(|e| e.message.contains("24114")));
        assert!(parse_geography("LINESTRING (1 2, 3 4)").is_err_and(|e| e.message.contains("test server")));
        assert!(parse_geography("POINT (1 x)").is_err_and(|e| e.message.contains("24141")));
    }

    #[test]
    fn geography_point_text_of_the_binary_form() {
        let b: Vec<u8> = (0..22)
            .map(|i| {
                u8::from_str_radix(
                    &"E6100000010CAE8BFC28BCE4474067A89189898A5EC0"[i * 2..i * 2 + 2],
                    16,
                )
                .unwrap_or(0)
            })
            .collect();
        assert_eq!(
            geography_point_text(&b).as_deref(),
            Some("POINT (-122.164644615406 47.7869921906598)")
        );
    }

    #[test]
    fn hierarchyid_paths() {
        assert_eq!(hierarchyid_levels(&[]), Some(vec![]));
        assert_eq!(hierarchyid_levels(&[0x58]), Some(vec![vec![1]]));
        assert_eq!(hierarchyid_levels(&[0x5A, 0xC0]), Some(vec![vec![1], vec![1]]));
        // /1/-2.18/, the example of SQL Server's format description.
        assert_eq!(
            hierarchyid_levels(&[0x59, 0xFB, 0x05, 0x40]),
            Some(vec![vec![1], vec![-2, 18]])
        );
    }
}
