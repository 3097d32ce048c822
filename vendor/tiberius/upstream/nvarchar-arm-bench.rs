// The vendored tiberius' nvarchar bulk-encode arm before (a placeholder, the UTF-16LE written,
// then measured) and after (the length counted, the limit checked, then written) it was split
// into upstream/04 and upstream/05, as plain functions over a Vec, on texts shaped like
// `bench shapes`' (1-100 and 1-400 chars, every 20th row non-ASCII). Both must give the same
// bytes. Instructions per encoder (PATCHES.md, 04):
//   rustc -C opt-level=3 -C codegen-units=1 -o /tmp/nvarchar-arm nvarchar-arm-bench.rs
//   for w in old new; do valgrind --tool=callgrind --callgrind-out-file=/dev/null /tmp/nvarchar-arm $w 100000; done
use std::hint::black_box;

fn put_utf16_le(out: &mut Vec<u8>, s: &str) {
    let bytes = s.as_bytes();
    if bytes.is_ascii() {
        let start = out.len();
        out.resize(start + 2 * bytes.len(), 0);
        let o = &mut out[start..];
        let mut src = bytes.chunks_exact(8);
        let mut dst = o.chunks_exact_mut(16);
        for (i, o) in (&mut src).zip(&mut dst) {
            let mut x = u128::from(u64::from_le_bytes([i[0], i[1], i[2], i[3], i[4], i[5], i[6], i[7]]));
            x = (x | (x << 32)) & 0x0000_0000_ffff_ffff_0000_0000_ffff_ffff;
            x = (x | (x << 16)) & 0x0000_ffff_0000_ffff_0000_ffff_0000_ffff;
            x = (x | (x << 8)) & 0x00ff_00ff_00ff_00ff_00ff_00ff_00ff_00ff;
            o.copy_from_slice(&x.to_le_bytes());
        }
        for (b, o) in src.remainder().iter().zip(dst.into_remainder().chunks_exact_mut(2)) {
            o[0] = *b;
        }
    } else {
        out.reserve(2 * bytes.len());
        for unit in s.encode_utf16() {
            out.extend_from_slice(&unit.to_le_bytes());
        }
    }
}

fn utf16le_len(s: &str) -> usize {
    if s.is_ascii() {
        2 * s.len()
    } else {
        // u8 counters over chunks of 127 bytes (at most 2 a byte... at most 254 a chunk) vectorize.
        2 * s.as_bytes().chunks(127).map(|c| usize::from(c.iter().fold(0u8, |n, &b| n + u8::from((b as i8) >= -0x40) + u8::from(b >= 0xf0)))).sum::<usize>()
    }
}
fn put_utf16_le_n(out: &mut Vec<u8>, s: &str, len: usize) {
    let bytes = s.as_bytes();
    if len == 2 * bytes.len() {
        let start = out.len();
        out.resize(start + 2 * bytes.len(), 0);
        let o = &mut out[start..];
        let mut src = bytes.chunks_exact(8);
        let mut dst = o.chunks_exact_mut(16);
        for (i, o) in (&mut src).zip(&mut dst) {
            let mut x = u128::from(u64::from_le_bytes([i[0], i[1], i[2], i[3], i[4], i[5], i[6], i[7]]));
            x = (x | (x << 32)) & 0x0000_0000_ffff_ffff_0000_0000_ffff_ffff;
            x = (x | (x << 16)) & 0x0000_ffff_0000_ffff_0000_ffff_0000_ffff;
            x = (x | (x << 8)) & 0x00ff_00ff_00ff_00ff_00ff_00ff_00ff_00ff;
            o.copy_from_slice(&x.to_le_bytes());
        }
        for (b, o) in src.remainder().iter().zip(dst.into_remainder().chunks_exact_mut(2)) {
            o[0] = *b;
        }
    } else {
        out.reserve(len);
        for unit in s.encode_utf16() {
            out.extend_from_slice(&unit.to_le_bytes());
        }
    }
}

#[inline(never)]
fn old(dst: &mut Vec<u8>, s: &str, limit: usize) -> Result<(), ()> {
    let plp = limit >= 0xffff;
    let start = dst.len();
    if plp { dst.extend_from_slice(&0xfffffffffffffffe_u64.to_le_bytes()); dst.extend_from_slice(&0u32.to_le_bytes()); } else { dst.extend_from_slice(&0u16.to_le_bytes()); }
    let payload = dst.len();
    put_utf16_le(dst, s);
    let length = dst.len() - payload;
    if !plp && length > limit { dst.truncate(start); return Err(()); }
    if plp {
        dst[payload - 4..payload].copy_from_slice(&(length as u32).to_le_bytes());
        if length > 0 { dst.extend_from_slice(&0u32.to_le_bytes()); }
    } else {
        dst[start..payload].copy_from_slice(&(length as u16).to_le_bytes());
    }
    Ok(())
}

#[inline(never)]
fn new(dst: &mut Vec<u8>, s: &str, limit: usize) -> Result<(), ()> {
    let length = utf16le_len(s);
    if limit < 0xffff && length > limit { return Err(()); }
    if limit < 0xffff {
        dst.extend_from_slice(&(length as u16).to_le_bytes());
        put_utf16_le_n(dst, s, length);
    } else {
        dst.extend_from_slice(&0xfffffffffffffffe_u64.to_le_bytes());
        dst.extend_from_slice(&(length as u32).to_le_bytes());
        put_utf16_le_n(dst, s, length);
        if length > 0 { dst.extend_from_slice(&0u32.to_le_bytes()); }
    }
    Ok(())
}

fn main() {
    let which = std::env::args().nth(1).unwrap();
    let rows: usize = std::env::args().nth(2).unwrap().parse().unwrap();
    let plain = "order customer invoice shipment return payment account balance ledger north south east west priority standard express pending closed open review ".repeat(4);
    let mixed = "order café customer Müller invoice Ærø shipment naïve return Zürich payment 東京 account Łódź balance smörgåsbord ".repeat(6);
    // name varchar(100) -> nvarchar(100): 1..100 chars; note text -> nvarchar(max): 1..400 chars; 5% non-ASCII rows.
    let mut texts = Vec::new();
    let mut seed = 12345u64;
    for g in 0..1000usize {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let w = if g % 20 == 0 { &mixed } else { &plain };
        let cut = |n: usize| -> String { w.chars().skip(g % 89).take(n).collect() };
        texts.push((cut(1 + (seed >> 33) as usize % 100), 200usize));
        texts.push((cut(1 + (seed >> 40) as usize % 400), 0xffff));
    }
    let f = if which == "old" { old } else { new };
    let mut dst = Vec::with_capacity(1 << 20);
    let mut total = 0usize;
    for r in 0..rows {
        let (s, limit) = &texts[(2 * r) % texts.len()];
        f(&mut dst, black_box(s), *limit).unwrap();
        let (s, limit) = &texts[(2 * r + 1) % texts.len()];
        f(&mut dst, black_box(s), *limit).unwrap();
        if dst.len() > (1 << 19) { total += dst.len(); dst.clear(); }
    }
    // Both encoders must give the same bytes.
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for (s, l) in &texts { old(&mut a, s, *l).unwrap(); new(&mut b, s, *l).unwrap(); }
    assert_eq!(a, b);
    println!("{which}: {} bytes", total + dst.len());
}
