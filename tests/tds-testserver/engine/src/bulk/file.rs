//! `BULK INSERT table FROM 'file'`: reads a data file under the server's bulk-insert
//! directory (`--bulk-insert-dir`) and loads it through the same path as a client's bulk copy,
//! so conversions, constraints and identity behave the same way.
//!
//! The file is read as BULK INSERT reads character data: field by field, each column's value
//! ending at the field terminator and the row's last at the row terminator (so a row never
//! spans a different number of fields), an empty field is NULL and a field of one NUL
//! character is an empty value. Binary columns (and `hierarchyid`/`geography`, kept as their
//! binary form) take hexadecimal digits.

use super::load::{self, BulkLoad};
use super::target;
use crate::error::SqlError;
use crate::parse::BulkInsertSpec;
use crate::parse::{BulkColumn, BulkTarget};
use crate::query;
use crate::results::Fail;
use crate::results::ResultSink;
use crate::state::State;
use crate::types::{ColumnMeta, SqlType, Value};
use std::path::{Path, PathBuf};

/// A terminator: its bytes, and for one written with `\n` the `\r\n` form that also ends a row (the
/// CR is not part of the field).
#[derive(Debug, Clone)]
struct Terminator {
    bytes: Vec<u8>,
    /// The `\r\n` form of a terminator written with `\n` (in the file's encoding).
    alt: Option<Vec<u8>>,
}

impl Terminator {
    /// Parses a terminator as written in the WITH clause (`'\t'`, `'&|\n'`, `'0x0a'`).
    fn parse(text: &str) -> Result<Terminator, SqlError> {
        if let Some(hex) = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
            let bytes = decode_hex(hex).ok_or_else(|| bad_option("terminator", text))?;
            return Ok(Terminator { bytes, alt: None });
        }
        let mut bytes = Vec::new();
        let mut newline = false;
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            if c == '\\' {
                match chars.next() {
                    Some('t') => bytes.push(b'\t'),
                    Some('n') => {
                        bytes.push(b'\n');
                        newline = chars.peek().is_none();
                    }
                    Some('r') => bytes.push(b'\r'),
                    Some('0') => bytes.push(0),
                    Some('\\') => bytes.push(b'\\'),
                    Some(other) => {
                        bytes.push(b'\\');
                        let mut buf = [0u8; 4];
                        bytes.extend_from_slice(other.encode_utf8(&mut buf).as_bytes());
                    }
                    None => bytes.push(b'\\'),
                }
            } else {
                let mut buf = [0u8; 4];
                bytes.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
        }
        if bytes.is_empty() {
            return Err(bad_option("terminator", text));
        }
        let alt = newline.then(|| {
            let mut a = bytes[..bytes.len() - 1].to_vec();
            a.extend_from_slice(b"\r\n");
            a
        });
        Ok(Terminator { bytes, alt })
    }

    /// The same terminator in UTF-16LE (DATAFILETYPE 'widechar').
    fn widen(&self) -> Terminator {
        let wide = |b: &[u8]| b.iter().flat_map(|&x| [x, 0]).collect::<Vec<u8>>();
        Terminator {
            bytes: wide(&self.bytes),
            alt: self.alt.as_deref().map(wide),
        }
    }

    /// Where the terminator starts at or after `from`, and its length there.
    fn find(&self, data: &[u8], from: usize) -> Option<(usize, usize)> {
        let needle = &self.bytes;
        let first = [Some(needle[0]), self.alt.as_ref().map(|a| a[0])];
        let mut i = from;
        while i < data.len() {
            let at = data[i..]
                .iter()
                .position(|b| first.contains(&Some(*b)))
                .map(|p| p + i)?;
            if data[at..].starts_with(needle) {
                return Some((at, needle.len()));
            }
            // `...\n` also matches `...\r\n`.
            if let Some(alt) = &self.alt
                && data[at..].starts_with(alt)
            {
                return Some((at, alt.len()));
            }
            i = at + 1;
        }
        None
    }
}

fn decode_hex(hex: &str) -> Option<Vec<u8>> {
    let hex = hex.as_bytes();
    if !hex.len().is_multiple_of(2) {
        return None;
    }
    let digit = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    hex.chunks(2)
        .map(|p| Some(digit(p[0])? << 4 | digit(p[1])?))
        .collect()
}

fn bad_option(what: &str, value: &str) -> SqlError {
    SqlError::new(
        102,
        15,
        format!("Incorrect syntax near '{value}'. (invalid BULK INSERT {what})"),
    )
}

/// How the file's bytes become text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Encoding {
    Utf8,
    /// CODEPAGE 'ACP', 'RAW', '1252': one byte per character, Windows-1252.
    Cp1252,
    /// CODEPAGE '28591'.
    Latin1,
    /// CODEPAGE 'OEM', the default: read as ASCII only (a byte above 0x7F is a conversion
    /// error rather than a guess at the OEM code page).
    Ascii,
    /// DATAFILETYPE 'widechar': UTF-16LE; terminators are matched as UTF-16 too.
    Utf16,
}

/// The options of one BULK INSERT.
struct Options {
    field: Terminator,
    row: Terminator,
    encoding: Encoding,
    keep_identity: bool,
    keep_nulls: bool,
    check_constraints: bool,
    first_row: u64,
    last_row: Option<u64>,
}

fn options(spec: &BulkInsertSpec) -> Result<Options, SqlError> {
    let mut o = Options {
        field: Terminator::parse("\\t")?,
        row: Terminator::parse("\\n")?,
        encoding: Encoding::Ascii,
        keep_identity: false,
        keep_nulls: false,
        check_constraints: false,
        first_row: 1,
        last_row: None,
    };
    let mut widechar = false;
    for (name, value) in &spec.options {
        let v = value.as_deref().unwrap_or("");
        match name.as_str() {
            "FIELDTERMINATOR" => o.field = Terminator::parse(v)?,
            "ROWTERMINATOR" => o.row = Terminator::parse(v)?,
            "CODEPAGE" => {
                o.encoding = match v.to_ascii_uppercase().as_str() {
                    "65001" => Encoding::Utf8,
                    "ACP" | "RAW" | "1252" => Encoding::Cp1252,
                    "28591" => Encoding::Latin1,
                    "OEM" => Encoding::Ascii,
                    _ => {
                        return Err(SqlError::new(
                            2775,
                            16,
                            format!("The code page {v} is not supported by the server."),
                        ));
                    }
                }
            }
            "DATAFILETYPE" => match v.to_ascii_lowercase().as_str() {
                "char" => {}
                "widechar" => widechar = true,
                "native" | "widenative" => {
                    return Err(SqlError::new(
                        102,
                        15,
                        format!(
                            "Incorrect syntax near '{v}'. (the test server reads DATAFILETYPE 'char' and 'widechar' only)"
                        ),
                    ));
                }
                _ => return Err(bad_option("DATAFILETYPE", v)),
            },
            "KEEPIDENTITY" => o.keep_identity = true,
            "KEEPNULLS" => o.keep_nulls = true,
            "CHECK_CONSTRAINTS" => o.check_constraints = true,
            "FIRSTROW" => o.first_row = v.parse().map_err(|_| bad_option("FIRSTROW", v))?,
            "LASTROW" => o.last_row = Some(v.parse().map_err(|_| bad_option("LASTROW", v))?),
            // Locking and batching hints change nothing a client sees here.
            "TABLOCK" | "BATCHSIZE" | "ROWS_PER_BATCH" | "KILOBYTES_PER_BATCH" => {}
            other => {
                return Err(SqlError::new(
                    102,
                    15,
                    format!(
                        "Incorrect syntax near '{other}'. (BULK INSERT option not supported by the test server)"
                    ),
                ));
            }
        }
    }
    if widechar {
        o.encoding = Encoding::Utf16;
        o.field = o.field.widen();
        o.row = o.row.widen();
    }
    Ok(o)
}

/// The file `path` names, when it lies under `dir`.
fn allowed_path(dir: Option<&Path>, path: &str) -> Result<PathBuf, SqlError> {
    let denied = || {
        SqlError::new(
            4861,
            16,
            format!(
                "Cannot bulk load because the file \"{path}\" could not be opened. Operating system error code 5(Access is denied.)."
            ),
        )
    };
    let missing = || {
        SqlError::new(
            4860,
            16,
            format!(
                "Cannot bulk load. The file \"{path}\" does not exist or you don't have file access rights."
            ),
        )
    };
    let dir = dir.ok_or_else(denied)?;
    let dir = dir.canonicalize().map_err(|_| denied())?;
    let p = Path::new(path);
    if !p.is_absolute() {
        return Err(denied());
    }
    // A file that does not exist: still refuse paths outside the directory with 4861.
    let resolved = match p.canonicalize() {
        Ok(r) => r,
        Err(_) => {
            let parent = p.parent().and_then(|d| d.canonicalize().ok());
            return Err(match parent {
                Some(d) if d.starts_with(&dir) => missing(),
                _ => denied(),
            });
        }
    };
    if !resolved.starts_with(&dir) || !resolved.is_file() {
        return Err(denied());
    }
    Ok(resolved)
}

/// Whether a column's file field is hexadecimal digits.
fn is_binary(ty: SqlType) -> bool {
    matches!(
        ty,
        SqlType::Binary { .. } | SqlType::VarBinary { .. } | SqlType::Image | SqlType::RowVersion
    )
}

pub(crate) fn bulk_insert_file(
    cx: &mut State,
    spec: BulkInsertSpec,
    sink: &mut dyn ResultSink,
) -> Result<(), Fail> {
    let opts = options(&spec)?;
    let path = allowed_path(cx.db.engine.config.bulk_insert_dir.as_deref(), &spec.file)?;
    let data = std::fs::read(&path).map_err(|e| {
        SqlError::new(
            4861,
            16,
            format!(
                "Cannot bulk load because the file \"{}\" could not be opened. ({e})",
                spec.file
            ),
        )
    })?;
    let meta = {
        let tables = cx.db.engine.tables();
        let vt = std::collections::HashMap::new();
        let ctx = query::translator(cx, &tables, &vt);
        ctx.lookup(&spec.table)
            .cloned()
            .ok_or_else(|| crate::error::invalid_object(&spec.table.join(".")))?
    };
    // Every table column has a field in the file; computed columns' fields (and an
    // identity's without KEEPIDENTITY) are read and ignored.
    let columns = &meta.def.columns;
    let loaded: Vec<usize> = (0..columns.len())
        .filter(|&i| {
            columns[i].computed.is_none()
                && (opts.keep_identity || columns[i].identity.is_none())
                && columns[i].ty != SqlType::RowVersion
        })
        .collect();
    let mut options = Vec::new();
    if opts.keep_nulls {
        options.push("KEEP_NULLS".to_string());
    }
    if opts.check_constraints {
        options.push("CHECK_CONSTRAINTS".to_string());
    }
    let pending = target::prepare(
        &cx.db.engine.tables(),
        &cx.db.temp,
        BulkTarget {
            name: spec.table.clone(),
            columns: loaded
                .iter()
                .map(|&i| BulkColumn {
                    name: columns[i].name.clone(),
                })
                .collect(),
            options,
        },
    )?;
    let metas: Vec<ColumnMeta> = loaded
        .iter()
        .map(|&i| ColumnMeta {
            name: columns[i].name.clone(),
            ty: SqlType::NVarChar { len: None },
            nullable: true,
            identity: false,
            computed: false,
            updateable: true,
            table_name: Vec::new(),
            collation: crate::types::collation::DEFAULT_COLLATION,
        })
        .collect();
    let mut load = BulkLoad::default();
    load::bulk_begin(&cx.db, &mut load, Some(pending), &metas)?;
    let types: Vec<SqlType> = columns.iter().map(|c| c.ty).collect();
    let result = read_rows(&data, &opts, columns.len(), |row_no, fields| {
        let mut row = Vec::with_capacity(loaded.len());
        for &i in &loaded {
            let raw = fields[i];
            row.push(field_value(raw, types[i], opts.encoding).ok_or_else(|| {
                SqlError::new(
                    4864,
                    16,
                    format!(
                        "Bulk load data conversion error (type mismatch or invalid character for the specified codepage) for row {row_no}, column {} ({}).",
                        i + 1,
                        columns[i].name
                    ),
                )
            })?);
        }
        load::bulk_add(&cx.db, &cx.tran, &mut load, &row);
        Ok(())
    });
    match result {
        Ok(()) => {
            let mut watch = ErrorWatch {
                inner: sink,
                failed: false,
            };
            load::bulk_end(cx, &mut load, &mut watch)?;
            // Without CHECK_CONSTRAINTS SQL Server skips the table's checks and foreign
            // keys during the load and marks them all not trusted afterwards.
            if !watch.failed && !opts.check_constraints {
                let oid = meta.object_id;
                let names: Vec<String> = meta
                    .fk_names
                    .iter()
                    .chain(meta.check_names.iter())
                    .cloned()
                    .collect();
                let disabled: Vec<bool> = meta
                    .def
                    .foreign_keys
                    .iter()
                    .map(|f| f.disabled)
                    .chain(meta.def.checks.iter().map(|c| c.disabled))
                    .collect();
                cx.db.engine.with_catalog(|c| {
                    for (name, disabled) in names.iter().zip(disabled) {
                        c.set_constraint_state(oid, name, disabled, true);
                    }
                });
                cx.db.engine.update_tables(|t| {
                    if let Some(m) = t.get_mut(&meta.def.schema, &meta.def.name) {
                        m.def.foreign_keys.iter_mut().for_each(|f| f.not_trusted = true);
                        m.def.checks.iter_mut().for_each(|c| c.not_trusted = true);
                    }
                });
            }
            Ok(())
        }
        Err(e) => {
            load::bulk_cancel(&cx.db, &mut load);
            cx.pending_bulk = None;
            Err(e.into())
        }
    }
}

/// Passes results on and notes whether an error went by.
struct ErrorWatch<'a> {
    inner: &'a mut dyn ResultSink,
    failed: bool,
}

impl ResultSink for ErrorWatch<'_> {
    fn columns(&mut self, columns: &[ColumnMeta]) -> Result<(), crate::results::Interrupt> {
        self.inner.columns(columns)
    }
    fn row(&mut self, row: &[Value]) -> Result<(), crate::results::Interrupt> {
        self.inner.row(row)
    }
    fn done(&mut self, done: crate::results::Done) -> Result<(), crate::results::Interrupt> {
        self.inner.done(done)
    }
    fn error(&mut self, error: &SqlError) -> Result<(), crate::results::Interrupt> {
        self.failed = true;
        self.inner.error(error)
    }
    fn info(&mut self, number: i32, message: &str) -> Result<(), crate::results::Interrupt> {
        self.inner.info(number, message)
    }
    fn env_change(&mut self, change: crate::results::EnvChange) -> Result<(), crate::results::Interrupt> {
        self.inner.env_change(change)
    }
}

/// Cuts `data` into rows of `width` fields and calls `each` with the 1-based row number and
/// the fields (raw bytes) of every row from FIRSTROW to LASTROW.
fn read_rows(
    data: &[u8],
    opts: &Options,
    width: usize,
    mut each: impl FnMut(u64, &[&[u8]]) -> Result<(), SqlError>,
) -> Result<(), SqlError> {
    let data = match opts.encoding {
        Encoding::Utf8 => data.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(data),
        Encoding::Utf16 => data.strip_prefix(b"\xFF\xFE").unwrap_or(data),
        Encoding::Latin1 | Encoding::Cp1252 | Encoding::Ascii => data,
    };
    let eof = || {
        SqlError::new(
            4832,
            16,
            "Bulk load: An unexpected end of file was encountered in the data file.",
        )
    };
    let mut pos = 0;
    let mut row_no = 0u64;
    let mut fields: Vec<&[u8]> = Vec::with_capacity(width);
    while pos < data.len() {
        fields.clear();
        for k in 0..width {
            let term = if k + 1 == width { &opts.row } else { &opts.field };
            match term.find(data, pos) {
                Some((at, len)) => {
                    fields.push(&data[pos..at]);
                    pos = at + len;
                }
                // The last row may end at the end of the file without its terminator.
                None if k + 1 == width => {
                    fields.push(&data[pos..]);
                    pos = data.len();
                }
                None => return Err(eof()),
            }
        }
        row_no += 1;
        if row_no < opts.first_row {
            continue;
        }
        if opts.last_row.is_some_and(|l| l > 0 && row_no > l) {
            break;
        }
        each(row_no, &fields)?;
    }
    Ok(())
}

/// One field as the value the bulk path converts to the column's type.
fn field_value(raw: &[u8], ty: SqlType, encoding: Encoding) -> Option<Value> {
    let text = match encoding {
        Encoding::Utf8 => String::from_utf8(raw.to_vec()).ok()?,
        Encoding::Latin1 => raw.iter().map(|&b| b as char).collect(),
        Encoding::Cp1252 => {
            raw.iter()
                .map(|&b| match b {
                    0x80..=0x9F => char::from_u32(u32::from(crate::sqlfn::CP1252_80[usize::from(b - 0x80)]))
                        .unwrap_or('?'),
                    _ => b as char,
                })
                .collect()
        }
        Encoding::Ascii => {
            if !raw.is_ascii() {
                return None;
            }
            raw.iter().map(|&b| b as char).collect()
        }
        Encoding::Utf16 => {
            if !raw.len().is_multiple_of(2) {
                return None;
            }
            let units: Vec<u16> = raw.chunks(2).map(|c| u16::from_le_bytes([c[0], c[1]])).collect();
            String::from_utf16(&units).ok()?
        }
    };
    if text.is_empty() {
        return Some(Value::Null);
    }
    let empty = text == "\0";
    if is_binary(ty) {
        if empty {
            return Some(Value::Binary(Vec::new()));
        }
        let hex = text.strip_prefix("0x").unwrap_or(&text);
        return decode_hex(hex).map(Value::Binary);
    }
    Some(Value::String(if empty { String::new() } else { text }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(field: &str, row: &str) -> Options {
        let spec = BulkInsertSpec {
            table: vec!["t".into()],
            file: String::new(),
            options: vec![
                ("FIELDTERMINATOR".into(), Some(field.into())),
                ("ROWTERMINATOR".into(), Some(row.into())),
            ],
        };
        options(&spec).unwrap_or_else(|e| panic!("{e}"))
    }

    fn rows(data: &[u8], o: &Options, width: usize) -> Vec<Vec<String>> {
        let mut out = Vec::new();
        read_rows(data, o, width, |_, f| {
            out.push(
                f.iter()
                    .map(|x| String::from_utf8_lossy(x).into_owned())
                    .collect(),
            );
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{e}"));
        out
    }

    #[test]
    fn terminators_as_bulk_insert_reads_them() {
        let o = opts("+|", "&|\\n");
        assert_eq!(
            rows(b"1+|a\nb&|\r\n2+|c&|\n", &o, 2),
            vec![
                vec!["1".to_string(), "a\nb".to_string()],
                vec!["2".to_string(), "c".to_string()]
            ]
        );
        let o = opts("\\t", "0x0a");
        assert_eq!(rows(b"1\t\t\n", &o, 3).len(), 1);
        let r = read_rows(b"1\t\t\n2\tx", &o, 3, |_, _| Ok(()));
        assert_eq!(r.err().map(|e| e.number), Some(4832), "row 2 lacks a field");
    }

    #[test]
    fn empty_is_null_and_nul_is_empty() {
        assert_eq!(field_value(b"", SqlType::Int, Encoding::Utf8), Some(Value::Null));
        let text = SqlType::NVarChar { len: None };
        assert_eq!(
            field_value(b"\x80\xe9", text, Encoding::Cp1252),
            Some(Value::String("\u{20ac}\u{e9}".into()))
        );
        assert_eq!(
            field_value(b"\x80\xe9", text, Encoding::Latin1),
            Some(Value::String("\u{80}\u{e9}".into()))
        );
        // The default OEM code page is read as ASCII only: no guessing.
        assert_eq!(field_value(b"\xe9", text, Encoding::Ascii), None);
        assert_eq!(
            field_value(b"\0", SqlType::NVarChar { len: None }, Encoding::Utf8),
            Some(Value::String(String::new()))
        );
        assert_eq!(
            field_value(b"5AC0", SqlType::VarBinary { len: Some(892) }, Encoding::Utf8),
            Some(Value::Binary(vec![0x5A, 0xC0]))
        );
        assert_eq!(
            field_value(b"5AC", SqlType::VarBinary { len: None }, Encoding::Utf8),
            None
        );
    }
}
