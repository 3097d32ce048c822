//! T-SQL's LIKE: `%`, `_`, `[abc]`, `[a-z]`, `[^...]` and an ESCAPE character, compared as the
//! default collation does (case-insensitively), or case-sensitively under a `_CS`/`_BIN` collation. SQLite's own LIKE knows only `%` and `_`, so
//! `[0-9]` would be a literal there: a CHECK such as pubs' `au_id LIKE '[0-9][0-9][0-9]-...'`
//! would reject every valid row.

/// One pattern element.
#[derive(Debug, Clone, PartialEq)]
enum Part {
    /// `%`
    Any,
    /// `_`
    One,
    Literal(char),
    /// `[...]`: ranges (a single character is a range of one); `negated` for `[^...]`.
    Class {
        ranges: Vec<(char, char)>,
        negated: bool,
    },
}

fn fold(c: char) -> char {
    c.to_lowercase().next().unwrap_or(c)
}

fn same(c: char) -> char {
    c
}

fn compile(pattern: &str, escape: Option<char>, fold: fn(char) -> char) -> Vec<Part> {
    let chars: Vec<char> = pattern.chars().collect();
    let mut parts = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if Some(c) == escape && i + 1 < chars.len() {
            parts.push(Part::Literal(fold(chars[i + 1])));
            i += 2;
            continue;
        }
        match c {
            '%' => {
                if parts.last() != Some(&Part::Any) {
                    parts.push(Part::Any);
                }
            }
            '_' => parts.push(Part::One),
            '[' => {
                // A class runs to the next `]`; without one, `[` is a literal.
                let Some(close) = chars[i + 1..].iter().position(|&x| x == ']').map(|p| p + i + 1) else {
                    parts.push(Part::Literal('['));
                    i += 1;
                    continue;
                };
                let mut body = &chars[i + 1..close];
                // `[]...]` cannot be written; an empty class matches nothing.
                let negated = body.first() == Some(&'^') && body.len() > 1;
                if negated {
                    body = &body[1..];
                }
                let mut ranges = Vec::new();
                let mut k = 0;
                while k < body.len() {
                    if k + 2 < body.len() && body[k + 1] == '-' {
                        ranges.push((fold(body[k]), fold(body[k + 2])));
                        k += 3;
                    } else {
                        ranges.push((fold(body[k]), fold(body[k])));
                        k += 1;
                    }
                }
                parts.push(Part::Class { ranges, negated });
                i = close;
            }
            other => parts.push(Part::Literal(fold(other))),
        }
        i += 1;
    }
    parts
}

fn matches_at(parts: &[Part], text: &[char]) -> bool {
    // Iterative matching with backtracking to the last `%`.
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        let ok = match parts.get(p) {
            Some(Part::Any) => {
                star = Some((p, t));
                p += 1;
                continue;
            }
            Some(Part::One) => true,
            Some(Part::Literal(c)) => *c == text[t],
            Some(Part::Class { ranges, negated }) => {
                let c = text[t];
                ranges.iter().any(|(lo, hi)| *lo <= c && c <= *hi) != *negated
            }
            None => false,
        };
        if ok {
            p += 1;
            t += 1;
        } else if let Some((sp, st)) = star {
            p = sp + 1;
            t = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    parts[p..].iter().all(|x| *x == Part::Any)
}

/// Whether `text` matches `pattern` as non-Unicode (char/varchar) LIKE does: trailing blanks
/// of the text are ignored, any number of them, while every blank of the pattern counts
/// (`'a ' LIKE 'a'` and `'a  ' LIKE 'a '` hold, `'a' LIKE 'a '` does not).
pub fn like(text: &str, pattern: &str, escape: Option<char>) -> bool {
    like_folded(text, pattern, escape, fold, Blanks::Ignored)
}

/// [`like`] under a case-sensitive collation (`COLLATE Latin1_General_100_BIN2`, `..._CS_AS`).
pub fn like_case_sensitive(text: &str, pattern: &str, escape: Option<char>) -> bool {
    like_folded(text, pattern, escape, same, Blanks::Ignored)
}

/// Unicode LIKE (any operand nchar/nvarchar): trailing blanks of the text count too, so a
/// padded `nchar(30)` value does not match `'% King'` (ISO behaviour, unlike [`like`]).
pub fn nlike(text: &str, pattern: &str, escape: Option<char>) -> bool {
    like_folded(text, pattern, escape, fold, Blanks::Significant)
}

/// [`nlike`] under a case-sensitive collation.
pub fn nlike_case_sensitive(text: &str, pattern: &str, escape: Option<char>) -> bool {
    like_folded(text, pattern, escape, same, Blanks::Significant)
}

/// Whether trailing blanks of the matched text may be dropped.
#[derive(Clone, Copy, PartialEq)]
enum Blanks {
    Ignored,
    Significant,
}

fn like_folded(
    text: &str,
    pattern: &str,
    escape: Option<char>,
    fold: fn(char) -> char,
    blanks: Blanks,
) -> bool {
    let parts = compile(pattern, escape, fold);
    let folded: Vec<char> = text.chars().map(fold).collect();
    if matches_at(&parts, &folded) {
        return true;
    }
    if blanks == Blanks::Significant {
        return false;
    }
    // Any number of the text's trailing blanks may go: try each shorter end.
    let trimmed = folded.len() - folded.iter().rev().take_while(|c| **c == ' ').count();
    (trimmed..folded.len())
        .rev()
        .any(|end| matches_at(&parts, &folded[..end]))
}

#[cfg(test)]
mod tests {
    use super::{like, nlike};

    #[test]
    fn classes_ranges_and_escape() {
        let ssn = "[0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9][0-9][0-9]";
        assert!(like("172-32-1176", ssn, None));
        assert!(!like("17a-32-1176", ssn, None));
        assert!(like("B", "[A-Za-z]", None));
        assert!(!like("1", "[A-Za-z]", None));
        assert!(like("x", "[^a]", None));
        assert!(!like("A", "[^a]", None));
        assert!(like("a_c", "a[_]c", None));
        assert!(!like("abc", "a[_]c", None));
        assert!(like("50%", "50!%", Some('!')));
        assert!(!like("500", "50!%", Some('!')));
        assert!(like("Hello", "h%O", None));
        assert!(like("abc  ", "abc", None));
        assert!(like("a[b", "a[b", None));
    }

    #[test]
    fn trailing_blanks_of_text_count_only_in_unicode() {
        // non-Unicode: the text's trailing blanks go, the pattern's stay.
        assert!(like("space ", "space", None));
        assert!(like("space ", "space ", None));
        assert!(!like("space ", "space    ", None));
        assert!(like("a   ", "a ", None));
        assert!(!like("a", "a ", None));
        assert!(like("Robert King                   ", "% King", None));
        // Unicode: both count.
        assert!(!nlike("nspace ", "nspace", None));
        assert!(nlike("nspace ", "nspace ", None));
        assert!(!nlike("nspace ", "nspace    ", None));
        assert!(!nlike("Robert King                   ", "% King", None));
        assert!(nlike("Robert King                   ", "% King%", None));
        assert!(!nlike("a", "a ", None));
    }
}
