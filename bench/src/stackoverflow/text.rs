//! Text that looks like StackOverflow's: HTML bodies, titles, tags, comments, names. About 4%
//! of texts are non-ASCII: in those, one word in ten comes from a list of Latin-accented,
//! Cyrillic, CJK, Arabic and emoji words, a third of them outside the Basic Multilingual Plane,
//! so UTF-16 surrogate pairs and multi-byte UTF-8 show up in every large table while most
//! values stay pure ASCII (the case fast paths are built for).

use super::rng::Rng;

const WORDS: &[&str] = &[
    "the",
    "a",
    "to",
    "is",
    "in",
    "of",
    "and",
    "I",
    "it",
    "this",
    "that",
    "for",
    "you",
    "with",
    "on",
    "have",
    "not",
    "be",
    "can",
    "but",
    "if",
    "an",
    "are",
    "my",
    "how",
    "what",
    "when",
    "use",
    "using",
    "do",
    "does",
    "get",
    "set",
    "from",
    "as",
    "or",
    "at",
    "by",
    "so",
    "there",
    "any",
    "which",
    "would",
    "should",
    "function",
    "method",
    "class",
    "object",
    "string",
    "array",
    "list",
    "value",
    "values",
    "variable",
    "return",
    "returns",
    "error",
    "exception",
    "null",
    "query",
    "table",
    "database",
    "server",
    "client",
    "file",
    "files",
    "code",
    "example",
    "problem",
    "question",
    "answer",
    "way",
    "work",
    "works",
    "working",
    "need",
    "want",
    "trying",
    "tried",
    "like",
    "just",
    "also",
    "same",
    "different",
    "new",
    "other",
    "some",
    "all",
    "one",
    "two",
    "first",
    "time",
    "data",
    "type",
    "types",
    "page",
    "form",
    "button",
    "click",
    "event",
    "window",
    "application",
    "project",
    "build",
    "compile",
    "compiler",
    "library",
    "framework",
    "version",
    "install",
    "windows",
    "linux",
    "mac",
    "browser",
    "request",
    "response",
    "memory",
    "thread",
    "loop",
    "index",
    "key",
    "map",
    "element",
    "node",
    "parameter",
    "argument",
    "property",
    "instance",
    "interface",
    "generic",
    "static",
    "public",
    "private",
    "void",
    "int",
    "char",
    "bool",
    "true",
    "false",
    "SQL",
    "C#",
    "Java",
    "Python",
    "PHP",
    "JavaScript",
    "jQuery",
    "ASP.NET",
    "HTML",
    "CSS",
    "XML",
    "JSON",
    "regex",
    "iPhone",
    "Android",
    "Visual",
    "Studio",
    "Eclipse",
    "git",
    "svn",
    "performance",
    "faster",
    "slow",
    "better",
    "simple",
    "easy",
    "hard",
    "because",
    "since",
    "then",
    "than",
    "here",
    "where",
    "why",
    "still",
    "only",
    "into",
    "out",
    "up",
    "after",
    "before",
    "each",
    "every",
    "without",
    "between",
    "inside",
    "correct",
    "wrong",
    "result",
    "results",
    "output",
    "input",
    "line",
    "lines",
    "call",
    "called",
];

/// Non-ASCII words; the last ones are outside the BMP (surrogate pairs in UTF-16).
const UNICODE_WORDS: &[&str] = &[
    "café",
    "naïve",
    "Größe",
    "Straße",
    "façade",
    "señor",
    "Zürich",
    "São",
    "Paulo",
    "Kraków",
    "Øresund",
    "déjà",
    "vu",
    "Привет",
    "мир",
    "данные",
    "Ошибка",
    "日本語",
    "文字化け",
    "中文",
    "数据库",
    "한국어",
    "שלום",
    "مرحبا",
    "Ελληνικά",
    "ñandú",
    "€",
    "—",
    "…",
    "“quoted”",
    "½",
    "™",
    "😀",
    "🚀",
    "👍",
    "🎉",
    "𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
    "𠜎𠜱",
    "🐍",
    "🦀",
    "𝄞",
];

const FIRST_NAMES: &[&str] = &[
    "Jeff", "Joel", "Jon", "Marc", "Jarrod", "Geoff", "Kevin", "Mark", "David", "Michael", "Chris", "John",
    "Robert", "Daniel", "Matt", "Anna", "Maria", "Sarah", "Laura", "Emma", "Peter", "Paul", "Tom", "Alex",
    "Andrew", "James", "Brian", "Steve", "Rob", "Greg", "Sam", "Nick", "Lars", "Ivan", "Hiro", "Wei",
    "Priya", "Ahmed", "Olga", "Pierre",
];
const LAST_NAMES: &[&str] = &[
    "Atwood", "Spolsky", "Skeet", "Gravell", "Dixon", "Dalgas", "Smith", "Johnson", "Brown", "Miller",
    "Davis", "Garcia", "Wilson", "Taylor", "Anderson", "Thomas", "Moore", "Martin", "Lee", "Walker", "Hall",
    "Young", "King", "Wright", "Lopez", "Hill", "Green", "Baker", "Nelson", "Carter",
];
const UNICODE_NAMES: &[&str] = &[
    "José Álvarez",
    "Björn Ødegård",
    "Łukasz Żółć",
    "Дмитрий",
    "田中太郎",
    "李明",
    "김민준",
    "محمد",
    "Zoë 🦀",
    "Renée 🚀",
    "𝓙𝓪𝓷𝓮",
];
const LOCATIONS: &[&str] = &[
    "Seattle, WA",
    "New York, NY",
    "San Francisco, CA",
    "London, United Kingdom",
    "Berlin, Germany",
    "Bangalore, India",
    "Toronto, Canada",
    "Sydney, Australia",
    "Paris, France",
    "Stockholm, Sweden",
    "Amsterdam, Netherlands",
    "Chicago, IL",
    "Austin, TX",
    "Boston, MA",
    "Reading, United Kingdom",
    "Zürich, Switzerland",
    "São Paulo, Brazil",
    "Kraków, Poland",
    "Москва, Россия",
    "東京, 日本",
    "United States",
    "India",
    "Germany",
    "Earth",
];
pub const TAGS: &[&str] = &[
    "c#",
    ".net",
    "java",
    "javascript",
    "php",
    "python",
    "jquery",
    "asp.net",
    "c++",
    "sql",
    "sql-server",
    "mysql",
    "html",
    "css",
    "iphone",
    "objective-c",
    "ruby-on-rails",
    "ruby",
    "android",
    "linux",
    "windows",
    "wpf",
    "xml",
    "ajax",
    "regex",
    "database",
    "visual-studio",
    "django",
    "performance",
    "silverlight",
    "winforms",
    "linq",
    "tsql",
    "svn",
    "git",
    "algorithm",
    "string",
    "multithreading",
    "security",
    "unit-testing",
    "cocoa",
    "arrays",
    "json",
    "oracle",
    "web-services",
    "flash",
    "perl",
];

pub const BADGE_NAMES: &[&str] = &[
    "Student",
    "Teacher",
    "Editor",
    "Supporter",
    "Autobiographer",
    "Scholar",
    "Commentator",
    "Critic",
    "Popular Question",
    "Notable Question",
    "Famous Question",
    "Nice Answer",
    "Good Answer",
    "Great Answer",
    "Nice Question",
    "Good Question",
    "Great Question",
    "Necromancer",
    "Enlightened",
    "Guru",
    "Yearling",
    "Organizer",
    "Cleanup",
    "Citizen Patrol",
    "Civic Duty",
    "Disciplined",
    "Peer Pressure",
    "Tumbleweed",
    "Self-Learner",
    "Revival",
    "Mortarboard",
    "Epic",
    "Legendary",
    "Fanatic",
    "Enthusiast",
    "Favorite Question",
    "Stellar Question",
    "Taxonomist",
    "Tag Editor",
    "Strunk & White",
];

/// Per-mille share of non-ASCII words in one text: 100 for 4% of texts, else none.
fn unicode_rate(rng: &mut Rng) -> u64 {
    if rng.chance(40) { 100 } else { 0 }
}

fn push_word(rng: &mut Rng, out: &mut String, unicode: u64) {
    if unicode > 0 && rng.chance(unicode) {
        out.push_str(rng.pick(UNICODE_WORDS));
    } else {
        out.push_str(rng.pick(WORDS));
    }
}

/// Words separated by spaces until `out` has grown by at least `chars` bytes.
fn words(rng: &mut Rng, out: &mut String, chars: usize, unicode: u64) {
    let end = out.len() + chars;
    let mut first = true;
    while out.len() < end {
        if !first {
            out.push(' ');
        }
        first = false;
        push_word(rng, out, unicode);
    }
}

fn sentences(rng: &mut Rng, out: &mut String, chars: usize, unicode: u64) {
    let end = out.len() + chars;
    while out.len() < end {
        let len = rng.range(20, 120);
        let start = out.len();
        words(rng, out, len, unicode);
        // A sentence starting with a non-ASCII word stays as it is.
        if let Some(first) = out.get_mut(start..start + 1) {
            first.make_ascii_uppercase();
        }
        out.push_str(if rng.chance(150) { "? " } else { ". " });
    }
}

const CODE_LINES: &[&str] = &[
    "var result = items.Where(x =&gt; x.Id &gt; 0).ToList();",
    "for (int i = 0; i &lt; list.Count; i++) {",
    "    Console.WriteLine(list[i]);",
    "}",
    "SELECT Id, Title FROM Posts WHERE OwnerUserId = @id ORDER BY CreationDate DESC",
    "$('#button').click(function() { alert('clicked'); });",
    "public static void Main(string[] args)",
    "def parse(line):\n    return line.split(',')",
    "String s = \"hello world\";",
    "if (obj == null) throw new ArgumentNullException(\"obj\");",
    "&lt;div class=\"header\"&gt;&lt;/div&gt;",
    "echo htmlspecialchars($row['name']);",
];

/// An HTML post body of roughly `chars` bytes: paragraphs, sometimes a code block or a link.
pub fn html_body(rng: &mut Rng, chars: usize) -> String {
    let unicode = unicode_rate(rng);
    let mut out = String::with_capacity(chars + 64);
    while out.len() < chars {
        let remaining = chars - out.len();
        if remaining > 120 && rng.chance(200) {
            out.push_str("<pre><code>");
            for _ in 0..rng.range(1, 6) {
                out.push_str(rng.pick(CODE_LINES));
                out.push('\n');
            }
            out.push_str("</code></pre>\n\n");
        } else {
            out.push_str("<p>");
            let len = remaining.clamp(20, 400);
            let len = rng.range(len / 2, len);
            sentences(rng, &mut out, len, unicode);
            if rng.chance(60) {
                out.push_str("See <a href=\"http://stackoverflow.com/questions/");
                out.push_str(&rng.range(1, 4_000_000).to_string());
                out.push_str("\" rel=\"nofollow\">this question</a>.");
            }
            out.push_str("</p>\n\n");
        }
    }
    out
}

pub fn plain_text(rng: &mut Rng, chars: usize) -> String {
    let unicode = unicode_rate(rng);
    let mut out = String::with_capacity(chars + 16);
    sentences(rng, &mut out, chars, unicode);
    out.truncate(out.trim_end().len());
    out
}

pub fn title(rng: &mut Rng) -> String {
    let mut out = String::with_capacity(96);
    out.push_str(rng.pick(&[
        "How do I",
        "How to",
        "Why does",
        "What is the best way to",
        "Is it possible to",
        "Can I",
        "Best practice for",
        "Problem with",
    ]));
    out.push(' ');
    let len = rng.range(15, 100);
    let unicode = unicode_rate(rng);
    words(rng, &mut out, len, unicode);
    out.push('?');
    out
}

pub fn tags(rng: &mut Rng) -> String {
    let n = rng.range(1, 5);
    let mut out = String::with_capacity(64);
    for _ in 0..n {
        out.push('<');
        out.push_str(rng.pick(TAGS));
        out.push('>');
    }
    out
}

pub fn display_name(rng: &mut Rng, id: u64) -> String {
    match rng.below(100) {
        0..=4 => rng.pick(UNICODE_NAMES).to_owned(),
        5..=39 => format!("user{id}"),
        40..=79 => format!("{} {}", rng.pick(FIRST_NAMES), rng.pick(LAST_NAMES)),
        _ => format!(
            "{}{}",
            rng.pick(FIRST_NAMES).to_ascii_lowercase(),
            rng.below(10_000)
        ),
    }
}

pub fn location(rng: &mut Rng) -> String {
    rng.pick(LOCATIONS).to_owned()
}

pub fn website(rng: &mut Rng, id: u64) -> String {
    match rng.below(3) {
        0 => format!(
            "http://www.{}{}.com",
            rng.pick(LAST_NAMES).to_ascii_lowercase(),
            id % 1000
        ),
        1 => format!(
            "http://{}.blogspot.com/",
            rng.pick(FIRST_NAMES).to_ascii_lowercase()
        ),
        _ => format!("https://github.com/user{id}"),
    }
}

pub fn hex(rng: &mut Rng, digits: usize) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    (0..digits).map(|_| HEX[rng.below(16) as usize] as char).collect()
}

/// Cuts `s` to at most `units` UTF-16 code units (the unit `nvarchar(n)` counts), on a
/// character boundary.
pub fn truncate_utf16(s: &mut String, units: usize) {
    let mut used = 0;
    for (i, c) in s.char_indices() {
        used += c.len_utf16();
        if used > units {
            s.truncate(i);
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncate_counts_surrogate_pairs() {
        let mut s = "ab😀c".to_owned();
        truncate_utf16(&mut s, 3);
        assert_eq!(s, "ab");
        let mut s = "ab😀c".to_owned();
        truncate_utf16(&mut s, 4);
        assert_eq!(s, "ab😀");
        let mut s = "abc".to_owned();
        truncate_utf16(&mut s, 10);
        assert_eq!(s, "abc");
    }
}
