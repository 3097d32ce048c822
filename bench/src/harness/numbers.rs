//! Numbers as the reports print them (thousands separated by commas); a leaf, so that the run
//! configuration can print its own chunk limit without importing the report.

pub fn fmt_rate(r: f64) -> String {
    if r <= 0.0 {
        return "–".into();
    }
    let n = r.round() as u64;
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

pub fn fmt_int(n: u64) -> String {
    fmt_rate(n as f64).replace('–', "0")
}
