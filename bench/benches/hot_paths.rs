#![allow(clippy::unwrap_used)]
//! Micro-benchmarks of the copy hot paths, on generated StackOverflow data:
//! - `utf16_decode`: nvarchar values arriving from SQL Server (UTF-16LE bytes) turned into
//!   Rust strings, pure-ASCII values vs values with non-ASCII text. `tiberius` is the way
//!   tiberius 0.13 does it (`char::decode_utf16` over byte pairs); `from_utf16` collects a
//!   `Vec<u16>` first; `ascii_fast_path` checks for all-ASCII and copies the low bytes.
//! - `utf16_into_copy_buffer`: the same values as they reach the worker's COPY buffer: decoded
//!   to a `String` (the patched tiberius's ASCII fast path), then length + bytes appended (the
//!   worker before its in-place rows), vs `tiberius::write_utf16_as_utf8` writing UTF-8 straight
//!   into the buffer (the worker's hot path since, see RESULTS.md "Worker hot path").
//! - `utf16_encode`: the other direction, as the bulk load encodes strings.
//! - `pg_binary_encode`: rows to PostgreSQL binary COPY format (the bench loader's encoder).
//! - `worker_copy_encode`: the worker's own hot path, `RowEncoder` turning tiberius
//!   `ColumnData` (what a TDS row decodes to) into PostgreSQL binary COPY bytes.
//! - `row_hash`: the checksum's per-row hash over those bytes.
//! - `generate`: the generator itself.
//!
//! Run: `cargo bench -p bench --bench hot_paths` (add `-- utf16` to pick a group).

use std::hint::black_box;

use bench::load::{mssql, pg_binary};
use bench::stackoverflow::{Dataset, SqlType, Table, Value};
use bytes::BytesMut;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

/// Post bodies split by whether they are pure ASCII, as UTF-16LE wire bytes.
fn bodies() -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let ds = Dataset::new(0.01, 1);
    let (mut ascii, mut other) = (Vec::new(), Vec::new());
    for row in ds.rows(Table::Posts) {
        let Value::Text(body) = &row[3] else { continue };
        let wire: Vec<u8> = body.encode_utf16().flat_map(u16::to_le_bytes).collect();
        if body.is_ascii() {
            if ascii.len() < 500 {
                ascii.push(wire);
            }
        } else if other.len() < 500 {
            other.push(wire);
        }
        if ascii.len() == 500 && other.len() == 500 {
            break;
        }
    }
    (ascii, other)
}

fn decode_tiberius(buf: &[u8]) -> String {
    let units = buf.chunks(2).map(|c| u16::from_le_bytes([c[0], c[1]]));
    char::decode_utf16(units).collect::<Result<String, _>>().unwrap()
}

fn decode_from_utf16(buf: &[u8]) -> String {
    let units: Vec<u16> = buf
        .chunks_exact(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]))
        .collect();
    String::from_utf16(&units).unwrap()
}

fn decode_ascii_fast_path(buf: &[u8]) -> String {
    let ascii = buf.chunks_exact(2).all(|c| c[0] < 0x80 && c[1] == 0);
    if ascii {
        let bytes: Vec<u8> = buf.iter().step_by(2).copied().collect();
        // All bytes are < 0x80, so this is valid UTF-8.
        String::from_utf8(bytes).unwrap()
    } else {
        decode_from_utf16(buf)
    }
}

fn utf16_decode(c: &mut Criterion) {
    let (ascii, other) = bodies();
    let mut group = c.benchmark_group("utf16_decode");
    for (name, values) in [("ascii", &ascii), ("non_ascii", &other)] {
        let bytes: usize = values.iter().map(Vec::len).sum();
        group.throughput(Throughput::Bytes(bytes as u64));
        type Decoder = fn(&[u8]) -> String;
        let decoders: [(&str, Decoder); 3] = [
            ("tiberius", decode_tiberius),
            ("from_utf16", decode_from_utf16),
            ("ascii_fast_path", decode_ascii_fast_path),
        ];
        for (how, decode) in decoders {
            group.bench_with_input(BenchmarkId::new(how, name), values, |b, values| {
                b.iter(|| {
                    for v in values {
                        black_box(decode(black_box(v)));
                    }
                })
            });
        }
    }
    group.finish();
}

fn utf16_into_copy_buffer(c: &mut Criterion) {
    use bytes::BufMut;
    let (ascii, other) = bodies();
    let mut group = c.benchmark_group("utf16_into_copy_buffer");
    for (name, values) in [("ascii", &ascii), ("non_ascii", &other)] {
        let bytes: usize = values.iter().map(Vec::len).sum();
        group.throughput(Throughput::Bytes(bytes as u64));
        let mut buf = BytesMut::with_capacity(4 << 20);
        group.bench_with_input(BenchmarkId::new("string_then_copy", name), values, |b, values| {
            b.iter(|| {
                buf.clear();
                for v in values {
                    let s = decode_ascii_fast_path(black_box(v));
                    buf.put_i32(s.len() as i32);
                    buf.put_slice(s.as_bytes());
                }
                black_box(buf.len())
            })
        });
        let mut out: Vec<u8> = Vec::with_capacity(4 << 20);
        group.bench_with_input(BenchmarkId::new("in_place", name), values, |b, values| {
            b.iter(|| {
                out.clear();
                for v in values {
                    let at = out.len();
                    out.put_i32(0);
                    let nul = tiberius::write_utf16_as_utf8(black_box(v), false, &mut out).unwrap();
                    black_box(nul);
                    let len = (out.len() - at - 4) as i32;
                    out[at..at + 4].copy_from_slice(&len.to_be_bytes());
                }
                black_box(out.len())
            })
        });
    }
    group.finish();
}

fn utf16_encode(c: &mut Criterion) {
    let (ascii, other) = bodies();
    let mut group = c.benchmark_group("utf16_encode");
    for (name, values) in [("ascii", &ascii), ("non_ascii", &other)] {
        let strings: Vec<String> = values.iter().map(|v| decode_tiberius(v)).collect();
        let bytes: usize = strings.iter().map(String::len).sum();
        group.throughput(Throughput::Bytes(bytes as u64));
        group.bench_with_input(BenchmarkId::new("encode_utf16", name), &strings, |b, strings| {
            let mut buf = BytesMut::with_capacity(bytes * 2);
            b.iter(|| {
                buf.clear();
                for s in strings {
                    for u in s.encode_utf16() {
                        buf.extend_from_slice(&u.to_le_bytes());
                    }
                }
                black_box(buf.len())
            })
        });
    }
    group.finish();
}

fn pg_binary_encode(c: &mut Criterion) {
    let ds = Dataset::new(0.01, 1);
    let mut group = c.benchmark_group("pg_binary_encode");
    for table in [Table::Votes, Table::Posts, Table::Users] {
        let rows: Vec<_> = ds.rows(table).take(10_000).collect();
        group.throughput(Throughput::Elements(rows.len() as u64));
        group.bench_with_input(BenchmarkId::from_parameter(table.name()), &rows, |b, rows| {
            let mut buf = BytesMut::with_capacity(1 << 24);
            b.iter(|| {
                buf.clear();
                for row in rows {
                    pg_binary::write_row(&mut buf, row);
                }
                black_box(buf.len())
            })
        });
    }
    group.finish();
}

/// The PostgreSQL types a migration gives the StackOverflow columns.
fn pg_types(
    columns: &[bench::stackoverflow::Column],
) -> Vec<mssql_pg_worker::schema::mssql_to_pg_types::PgType> {
    use mssql_pg_worker::schema::mssql_to_pg_types::PgType;
    columns
        .iter()
        .map(|c| match c.ty {
            SqlType::Int => PgType::Int4,
            SqlType::NVarChar(n) => PgType::Varchar { length: u32::from(n) },
            SqlType::NVarCharMax => PgType::Text,
            SqlType::DateTime => PgType::Timestamp { precision: 3 },
        })
        .collect()
}

fn worker_copy_encode(c: &mut Criterion) {
    use mssql_pg_worker::copy::binary::RowEncoder;
    let ds = Dataset::new(0.01, 1);
    let mut group = c.benchmark_group("worker_copy_encode");
    for table in [Table::Votes, Table::Posts, Table::Users] {
        let columns = table.columns();
        let encoder = RowEncoder::new(pg_types(columns));
        let rows: Vec<_> = ds
            .rows(table)
            .take(10_000)
            .map(|r| mssql::token_row(r, columns))
            .collect();
        group.throughput(Throughput::Elements(rows.len() as u64));
        group.bench_with_input(BenchmarkId::from_parameter(table.name()), &rows, |b, rows| {
            let mut buf = BytesMut::with_capacity(1 << 24);
            b.iter(|| {
                buf.clear();
                for row in rows {
                    encoder.encode_row(&mut buf, row.iter()).unwrap();
                }
                black_box(buf.len())
            })
        });
    }
    group.finish();
}

/// The checksum's row hash (`RowHasher::hash`) over rows in binary COPY form, as the forward copy
/// hashes every row it encodes and verify hashes every row it reads back.
fn row_hash(c: &mut Criterion) {
    use mssql_pg_worker::copy::binary::RowEncoder;
    use mssql_pg_worker::copy::row_hash::RowHasher;
    let ds = Dataset::new(0.01, 1);
    let mut group = c.benchmark_group("row_hash");
    for table in [Table::Votes, Table::Posts, Table::Users] {
        let columns = table.columns();
        let types = pg_types(columns);
        let encoder = RowEncoder::new(types.clone());
        let rows: Vec<Vec<u8>> = ds
            .rows(table)
            .take(10_000)
            .map(|r| {
                let mut buf = BytesMut::new();
                encoder
                    .encode_row(&mut buf, mssql::token_row(r, columns).iter())
                    .unwrap();
                buf.to_vec()
            })
            .collect();
        let bytes: usize = rows.iter().map(Vec::len).sum();
        group.throughput(Throughput::Bytes(bytes as u64));
        group.bench_with_input(BenchmarkId::from_parameter(table.name()), &rows, |b, rows| {
            let mut hasher = RowHasher::for_types(types.iter().copied());
            b.iter(|| rows.iter().fold(0u64, |sum, r| sum.wrapping_add(hasher.hash(r))))
        });
    }
    group.finish();
}

/// The PostgreSQL -> SQL Server hot path: a binary COPY stream (as `COPY ... TO STDOUT (FORMAT
/// binary)` sends it) split into rows and decoded into the values tiberius bulk-loads.
fn pg_copy_decode(c: &mut Criterion) {
    use mssql_pg_worker::copy::binary::{RowEncoder, write_header, write_trailer};
    use mssql_pg_worker::pg::read::{CopyParser, decode_field};
    use mssql_pg_worker::schema::mssql_to_pg_types::PgType;
    use mssql_pg_worker::schema::pg_to_mssql_types::Decode;
    let ds = Dataset::new(0.01, 1);
    let mut group = c.benchmark_group("pg_copy_decode");
    for table in [Table::Votes, Table::Posts, Table::Users] {
        let columns = table.columns();
        let (types, decodes): (Vec<PgType>, Vec<Decode>) = columns
            .iter()
            .map(|c| match c.ty {
                SqlType::Int => (PgType::Int4, Decode::Int4),
                SqlType::NVarChar(n) => (
                    PgType::Varchar { length: u32::from(n) },
                    Decode::Text {
                        max_units: Some(u32::from(n)),
                    },
                ),
                SqlType::NVarCharMax => (PgType::Text, Decode::Text { max_units: None }),
                SqlType::DateTime => (PgType::Timestamp { precision: 3 }, Decode::Timestamp { scale: 3 }),
            })
            .unzip();
        let encoder = RowEncoder::new(types);
        let mut stream = BytesMut::new();
        write_header(&mut stream);
        let mut rows = 0u64;
        for r in ds.rows(table).take(10_000) {
            let row = mssql::token_row(r, columns);
            encoder.encode_row(&mut stream, row.iter()).unwrap();
            rows += 1;
        }
        write_trailer(&mut stream);
        group.throughput(Throughput::Elements(rows));
        group.bench_with_input(BenchmarkId::from_parameter(table.name()), &stream, |b, stream| {
            b.iter(|| {
                let mut parser = CopyParser::new();
                // PostgreSQL sends CopyData messages of up to 64 KiB.
                let mut decoded = 0usize;
                for piece in stream.chunks(65_536) {
                    parser.push(piece);
                    parser
                        .rows(
                            |fields, _| {
                                for (d, f) in decodes.iter().zip(fields) {
                                    black_box(decode_field(*d, *f)?);
                                }
                                decoded += 1;
                                Ok::<(), String>(())
                            },
                            || "malformed".to_string(),
                        )
                        .unwrap();
                }
                black_box(decoded)
            })
        });
    }
    group.finish();
}

fn generate(c: &mut Criterion) {
    let ds = Dataset::new(0.01, 1);
    let mut group = c.benchmark_group("generate");
    for table in [Table::Votes, Table::Comments, Table::Posts] {
        group.throughput(Throughput::Elements(1_000));
        group.bench_function(table.name(), |b| b.iter(|| ds.rows_in(table, 1..=1_000).count()));
    }
    group.finish();
}

// No HTML plots: the bench crate's plotters is built with ab_glyph text (for the harness charts),
// and criterion's plots would then need a registered font.
criterion_group! {
    name = benches;
    config = Criterion::default().without_plots().sample_size(20).warm_up_time(std::time::Duration::from_millis(500)).measurement_time(std::time::Duration::from_secs(2));
    targets = utf16_decode, utf16_into_copy_buffer, utf16_encode, pg_binary_encode, worker_copy_encode, row_hash, pg_copy_decode, generate
}
criterion_main!(benches);
