//! What sqlcmd does to a script before the server sees it: `:setvar` lines set variables
//! (unless given on the command line, `-v`), `$(name)` is replaced by its value, and the
//! script is cut into batches at lines holding only `GO`.
#![allow(dead_code, clippy::unwrap_used)]

use std::collections::HashMap;

/// One batch: its first line in the script (1-based) and its text.
#[derive(Debug, Clone)]
pub struct ScriptBatch {
    pub line: usize,
    pub sql: String,
}

/// Splits `script` as sqlcmd does. `vars` are the command line's `-v` values, which win over
/// the script's own `:setvar` lines.
pub fn batches(script: &str, vars: &[(&str, &str)]) -> Vec<ScriptBatch> {
    let script = script.strip_prefix('\u{feff}').unwrap_or(script);
    let fixed: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_ascii_lowercase(), v.to_string()))
        .collect();
    let mut values = fixed.clone();
    let mut out = Vec::new();
    let mut current = String::new();
    let mut start = 1;
    for (i, raw) in script.split('\n').enumerate() {
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        let trimmed = line.trim();
        if let Some(rest) = trimmed.strip_prefix(":setvar") {
            let rest = rest.trim();
            let (name, value) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
            let value = value.trim().trim_matches('"').to_string();
            if !fixed.contains_key(&name.to_ascii_lowercase()) {
                values.insert(name.to_ascii_lowercase(), value);
            }
            current.push('\n');
            continue;
        }
        if trimmed.eq_ignore_ascii_case("GO") {
            if !current.trim().is_empty() {
                out.push(ScriptBatch {
                    line: start,
                    sql: std::mem::take(&mut current),
                });
            }
            current.clear();
            start = i + 2;
            continue;
        }
        current.push_str(&substitute(line, &values));
        current.push('\n');
    }
    if !current.trim().is_empty() {
        out.push(ScriptBatch {
            line: start,
            sql: current,
        });
    }
    out
}

fn substitute(line: &str, values: &HashMap<String, String>) -> String {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(at) = rest.find("$(") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 2..];
        match after.find(')') {
            Some(end) if values.contains_key(&after[..end].to_ascii_lowercase()) => {
                out.push_str(&values[&after[..end].to_ascii_lowercase()]);
                rest = &after[end + 1..];
            }
            _ => {
                out.push_str("$(");
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

#[test]
fn splits_at_go_and_substitutes() {
    let b = batches(
        "\u{feff}:setvar A \"x\"\r\nSELECT '$(A)'\r\ngo\r\nSELECT '$(B)' -- $(C)\r\n GO \r\n",
        &[("B", "y/")],
    );
    assert_eq!(b.len(), 2);
    assert_eq!(b[0].sql.trim(), "SELECT 'x'");
    assert_eq!(b[1].line, 4);
    assert_eq!(b[1].sql.trim(), "SELECT 'y/' -- $(C)");
}
