//! Fixed-width digit text built on the stack and appended in one copy: dates, times, decimals
//! and GUIDs are formatted per value while a bulk load stores its rows, where `format!` showed.

/// Appends `n` as exactly `width` decimal digits (zero-padded; `n` must fit).
pub(super) fn push_digits(out: &mut String, n: u64, width: usize) {
    let mut buf = [b'0'; 20];
    put_digits(&mut buf[..width], n);
    push_ascii(out, &buf[..width]);
}

/// Fills `buf` with `n` as zero-padded decimal digits (the low digits if `n` is wider).
pub(super) fn put_digits(buf: &mut [u8], mut n: u64) {
    for b in buf.iter_mut().rev() {
        *b = b'0' + (n % 10) as u8;
        n /= 10;
    }
}

/// Appends a buffer of ASCII digits and separators (built on the stack, then appended in one
/// copy: these run for every date and time a bulk load stores).
pub(super) fn push_ascii(out: &mut String, buf: &[u8]) {
    out.push_str(std::str::from_utf8(buf).unwrap_or_default());
}
