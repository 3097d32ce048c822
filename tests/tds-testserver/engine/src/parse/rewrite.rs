//! Token-level rewrites of the T-SQL that sqlparser's MsSqlDialect rejects (§6.1 of the
//! design notes), run over the whole batch before it is parsed.

use super::stmt::Batch;
use super::tokens::{close_paren, is_statement_start, is_word, new_word, next_sig, prev_sig, tok, word};
use sqlparser::keywords::Keyword;
use sqlparser::tokenizer::{Location, Token, TokenWithSpan, Word};

/// `ADD [CONSTRAINT name] DEFAULT <expr> FOR <col>` starting at `add`: the replacement tokens
/// and the index after the column name.
fn add_default_for(toks: &[TokenWithSpan], add: usize) -> Option<(Vec<TokenWithSpan>, usize)> {
    let mut j = next_sig(toks, add + 1);
    let mut name = None;
    if is_word(&toks.get(j)?.token, "CONSTRAINT") {
        j = next_sig(toks, j + 1);
        name = Some(word(&toks.get(j)?.token)?.value.clone());
        j = next_sig(toks, j + 1);
    }
    if !is_word(&toks.get(j)?.token, "DEFAULT") {
        return None;
    }
    let start = j + 1;
    let mut depth = 0i32;
    let mut k = start;
    while k < toks.len() {
        match &toks[k].token {
            Token::LParen => depth += 1,
            Token::RParen => depth -= 1,
            Token::SemiColon | Token::EOF => return None,
            t if depth == 0 && is_word(t, "FOR") => break,
            _ => {}
        }
        k += 1;
    }
    let col_at = next_sig(toks, k + 1);
    let col = toks.get(col_at)?.clone();
    word(&col.token)?;
    let space = || tok(Token::Whitespace(sqlparser::tokenizer::Whitespace::Space));
    let mut out = vec![
        tok(new_word("ALTER")),
        space(),
        tok(new_word("COLUMN")),
        space(),
        col,
        space(),
        tok(new_word("SET")),
        space(),
        tok(new_word("DEFAULT")),
        space(),
    ];
    if let Some(n) = name {
        out.push(tok(new_word("__named_default")));
        out.push(tok(Token::LParen));
        out.push(tok(Token::SingleQuotedString(n)));
        out.push(tok(Token::Comma));
        out.extend(toks[start..k].iter().cloned());
        out.push(tok(Token::RParen));
    } else {
        out.extend(toks[start..k].iter().cloned());
    }
    Some((out, col_at + 1))
}

const INDEX_OPTIONS: &[&str] = &[
    "PAD_INDEX",
    "STATISTICS_NORECOMPUTE",
    "IGNORE_DUP_KEY",
    "ALLOW_ROW_LOCKS",
    "ALLOW_PAGE_LOCKS",
    "FILLFACTOR",
    "OPTIMIZE_FOR_SEQUENTIAL_KEY",
    "DATA_COMPRESSION",
    "SORT_IN_TEMPDB",
    "ONLINE",
    "DROP_EXISTING",
    "MAXDOP",
    "STATISTICS_INCREMENTAL",
];

/// Token-level rewrites of T-SQL that sqlparser's MsSqlDialect rejects; what a rewrite
/// removes but the executor needs (DELETE TOP, ROWGUIDCOL, WITH NOCHECK ADD) goes into
/// `batch` by location.
pub(super) fn rewrite(
    toks: &[TokenWithSpan],
    vars: &dyn Fn(&str) -> Option<String>,
    batch: &mut Batch,
) -> Vec<TokenWithSpan> {
    let mut r = Rewriter {
        toks,
        out: Vec::with_capacity(toks.len()),
        i: 0,
        create_depth: None,
        depth: 0,
        alter_add: false,
        column_start: None,
        vars,
        batch,
    };
    while r.i < toks.len() {
        r.step();
    }
    r.out
}

/// The rewrite's position in the input and what it has seen so far.
struct Rewriter<'a> {
    toks: &'a [TokenWithSpan],
    out: Vec<TokenWithSpan>,
    i: usize,
    /// CREATE TABLE column-list depth tracking, for computed columns.
    create_depth: Option<i32>,
    depth: i32,
    alter_add: bool,
    /// Where the column definition being read starts (its name), for ROWGUIDCOL.
    column_start: Option<Location>,
    vars: &'a dyn Fn(&str) -> Option<String>,
    batch: &'a mut Batch,
}

fn space() -> TokenWithSpan {
    tok(Token::Whitespace(sqlparser::tokenizer::Whitespace::Space))
}

impl Rewriter<'_> {
    /// Rewrites or copies the token at `i` and moves on; the rewrites are tried in order, and
    /// the first that applies consumes its tokens.
    fn step(&mut self) {
        self.note_column_start();
        if self.trailing_comma()
            || self.changetable()
            || self.typed_xml()
            || self.money_literal()
            || self.lock_hints()
            || self.bare_return()
            || self.rowguidcol()
            || self.not_for_replication()
            || self.with_check_add()
        {
            return;
        }
        self.track_depth();
        self.end_statement_before_keyword();
        if self.clustered() {
            return;
        }
        self.leave_alter_add();
        if self.at_alias() || self.add_default_for() {
            return;
        }
        self.note_alter_add();
        if self.alter_add_comma()
            || self.alter_column()
            || self.storage_clause()
            || self.index_options()
            || self.computed_column()
            || self.dml_top()
            || self.delete_without_from()
            || self.app_name()
            || self.fetch_variable()
        {
            return;
        }
        self.out.push(self.toks[self.i].clone());
        self.i += 1;
    }

    fn token(&self) -> &Token {
        &self.toks[self.i].token
    }

    /// `CHANGETABLE(CHANGES t, v)`: sqlparser takes no keyword as an argument, so the kind
    /// becomes a string, `CHANGETABLE('CHANGES', t, v)`, which the translator reads back.
    fn changetable(&mut self) -> bool {
        if !is_word(self.token(), "CHANGETABLE") {
            return false;
        }
        let open = next_sig(self.toks, self.i + 1);
        if !matches!(self.toks.get(open).map(|t| &t.token), Some(Token::LParen)) {
            return false;
        }
        let kind_at = next_sig(self.toks, open + 1);
        let Some(kind) = self.toks.get(kind_at).and_then(|t| word(&t.token)) else {
            return false;
        };
        if kind.quote_style.is_some() {
            return false;
        }
        let kind = kind.value.to_ascii_uppercase();
        self.out.extend(self.toks[self.i..=open].iter().cloned());
        self.out.push(tok(Token::SingleQuotedString(kind)));
        self.out.push(tok(Token::Comma));
        self.i = kind_at + 1;
        true
    }

    /// The last significant token written.
    fn prev_out(&self) -> Option<usize> {
        prev_sig(&self.out, self.out.len())
    }

    /// Whether the token at `k` exists and is the keyword `w`.
    fn is_at(&self, k: usize, w: &str) -> bool {
        k < self.toks.len() && is_word(&self.toks[k].token, w)
    }

    fn in_column_list(&self) -> bool {
        self.create_depth == Some(self.depth)
    }

    fn note_column_start(&mut self) {
        if word(self.token()).is_some()
            && self.prev_out().is_some_and(|p| {
                (matches!(self.out[p].token, Token::LParen | Token::Comma) && self.in_column_list())
                    || is_word(&self.out[p].token, "ADD")
            })
        {
            self.column_start = Some(self.toks[self.i].span.start);
        }
    }

    /// CREATE TABLE t (a int, b int,): SQL Server accepts the trailing comma.
    fn trailing_comma(&mut self) -> bool {
        if *self.token() == Token::Comma && self.in_column_list() {
            let n = next_sig(self.toks, self.i + 1);
            if n < self.toks.len() && self.toks[n].token == Token::RParen {
                self.i += 1;
                return true;
            }
        }
        false
    }

    /// xml([CONTENT | DOCUMENT] schema.collection): typed XML is stored as xml.
    fn typed_xml(&mut self) -> bool {
        let toks = self.toks;
        if word(self.token()).is_some_and(|w| w.value.eq_ignore_ascii_case("XML"))
            && (self.in_column_list() || self.alter_add)
            && self
                .prev_out()
                .is_some_and(|p| word(&self.out[p].token).is_some())
        {
            let n = next_sig(toks, self.i + 1);
            if n < toks.len() && toks[n].token == Token::LParen {
                self.out.push(toks[self.i].clone());
                self.i = close_paren(toks, n);
                return true;
            }
        }
        false
    }

    /// Money literals (`$20.00`): money values.
    fn money_literal(&mut self) -> bool {
        let toks = self.toks;
        let Token::Placeholder(p) = &toks[self.i].token else {
            return false;
        };
        let Some(digits) = p.strip_prefix('$') else {
            return false;
        };
        if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit() || c == '.') {
            return false;
        }
        let mut number = digits.to_string();
        let mut next = self.i + 1;
        if let Some(Token::Number(n, _)) = toks.get(next).map(|t| &t.token)
            && n.starts_with('.')
        {
            number.push_str(n);
            next += 1;
        }
        self.out.extend([
            tok(new_word("CAST")),
            tok(Token::LParen),
            tok(Token::Number(number, false)),
            space(),
            tok(new_word("AS")),
            space(),
            tok(new_word("money")),
            tok(Token::RParen),
        ]);
        self.i = next;
        true
    }

    /// Table hints sqlparser does not take everywhere (`MERGE t WITH (TABLOCK) AS x`):
    /// locking changes nothing a client sees here.
    fn lock_hints(&mut self) -> bool {
        const HINTS: &[&str] = &[
            "TABLOCK",
            "TABLOCKX",
            "HOLDLOCK",
            "SERIALIZABLE",
            "ROWLOCK",
            "PAGLOCK",
            "UPDLOCK",
            "XLOCK",
            "NOLOCK",
            "READPAST",
            "READCOMMITTED",
            "READUNCOMMITTED",
            "REPEATABLEREAD",
        ];
        let toks = self.toks;
        if !is_word(self.token(), "WITH") {
            return false;
        }
        let open = next_sig(toks, self.i + 1);
        if open < toks.len() && toks[open].token == Token::LParen {
            let end = close_paren(toks, open);
            let inner: Vec<&Token> = toks[open + 1..end.saturating_sub(1)]
                .iter()
                .map(|t| &t.token)
                .filter(|t| !matches!(t, Token::Whitespace(_) | Token::Comma))
                .collect();
            if !inner.is_empty() && inner.iter().all(|t| HINTS.iter().any(|h| is_word(t, h))) {
                self.i = end;
                return true;
            }
        }
        false
    }

    /// A bare RETURN (ending a batch or block): sqlparser would read the next word as its
    /// value.
    fn bare_return(&mut self) -> bool {
        let toks = self.toks;
        if !is_word(self.token(), "RETURN") {
            return false;
        }
        let n = next_sig(toks, self.i + 1);
        let bare = n >= toks.len()
            || matches!(toks[n].token, Token::SemiColon | Token::EOF)
            || word(&toks[n].token).is_some_and(|w| {
                w.quote_style.is_none()
                    && (w.value.eq_ignore_ascii_case("END")
                        || is_statement_start(&w.value.to_ascii_uppercase()))
            });
        if bare {
            self.out.push(toks[self.i].clone());
            self.out.push(tok(Token::SemiColon));
            self.i += 1;
        }
        bare
    }

    /// ROWGUIDCOL: remembered by the column's location (sqlparser has no such option).
    fn rowguidcol(&mut self) -> bool {
        if !is_word(self.token(), "ROWGUIDCOL") {
            return false;
        }
        if let Some(at) = self.column_start {
            self.batch.rowguidcols.insert((at.line, at.column));
        }
        self.i += 1;
        true
    }

    /// NOT FOR REPLICATION (identity, foreign keys, checks, triggers): no replication here.
    fn not_for_replication(&mut self) -> bool {
        if !is_word(self.token(), "NOT") {
            return false;
        }
        let f = next_sig(self.toks, self.i + 1);
        let r = next_sig(self.toks, f + 1);
        if r < self.toks.len() && self.is_at(f, "FOR") && self.is_at(r, "REPLICATION") {
            self.i = r + 1;
            return true;
        }
        false
    }

    /// ALTER TABLE t WITH CHECK ADD ...: WITH CHECK is the default; WITH NOCHECK ADD: the new
    /// constraints are not checked against the rows.
    fn with_check_add(&mut self) -> bool {
        if !is_word(self.token(), "WITH") {
            return false;
        }
        let c = next_sig(self.toks, self.i + 1);
        let a = next_sig(self.toks, c + 1);
        if a < self.toks.len() && self.is_at(c, "CHECK") && self.is_at(a, "ADD") {
            self.i = c + 1;
            return true;
        }
        if a < self.toks.len() && self.is_at(c, "NOCHECK") && self.is_at(a, "ADD") {
            if let Some(p) = self.prev_out() {
                let at = self.out[p].span.start;
                self.batch.nocheck.insert((at.line, at.column));
            }
            self.i = c + 1;
            return true;
        }
        false
    }

    /// Parenthesis depth, and the depth of a CREATE TABLE's column list.
    fn track_depth(&mut self) {
        match self.token() {
            Token::LParen => self.depth += 1,
            Token::RParen => {
                self.depth -= 1;
                if self.create_depth.is_some_and(|d| self.depth < d) {
                    self.create_depth = None;
                }
            }
            _ => {}
        }
        if is_word(self.token(), "TABLE")
            && let Some(p) = self.prev_out()
            && is_word(&self.out[p].token, "CREATE")
        {
            self.create_depth = Some(self.depth + 1);
        }
    }

    /// Statement keywords that sqlparser would otherwise take as an alias of the previous
    /// statement's last item (`SELECT 1 COMMIT`): end the previous statement explicitly.
    fn end_statement_before_keyword(&mut self) {
        if self.depth != 0 {
            return;
        }
        let toks = self.toks;
        let t = self.token();
        let next_is = |w: &str| self.is_at(next_sig(toks, self.i + 1), w);
        let ends = (is_word(t, "COMMIT") || is_word(t, "ROLLBACK") || is_word(t, "DBCC"))
            || (is_word(t, "SET") && {
                // SET ROWCOUNT n, not UPDATE t SET rowcount = ...
                let n = next_sig(toks, self.i + 1);
                let v = next_sig(toks, n + 1);
                self.is_at(n, "ROWCOUNT")
                    && v < toks.len()
                    && (matches!(toks[v].token, Token::Number(_, _))
                        || word(&toks[v].token).is_some_and(|w| w.value.starts_with('@')))
            })
            || ((is_word(t, "BEGIN") || is_word(t, "SAVE"))
                && (next_is("TRAN") || next_is("TRANSACTION") || next_is("DISTRIBUTED")));
        let after_then = self
            .prev_out()
            .is_some_and(|p| is_word(&self.out[p].token, "THEN") || is_word(&self.out[p].token, "ELSE"));
        if ends && !after_then && !self.out.is_empty() {
            self.out.push(tok(Token::SemiColon));
        }
    }

    /// CLUSTERED / NONCLUSTERED (before INDEX, after PRIMARY KEY / UNIQUE): dropped, SQLite
    /// has no such notion.
    fn clustered(&mut self) -> bool {
        if is_word(self.token(), "CLUSTERED") || is_word(self.token(), "NONCLUSTERED") {
            self.i += 1;
            return true;
        }
        false
    }

    /// A new statement ends an ALTER TABLE ... ADD list.
    fn leave_alter_add(&mut self) {
        if self.depth == 0
            && word(self.token())
                .is_some_and(|w| w.quote_style.is_none() && is_statement_start(&w.value.to_ascii_uppercase()))
            && !is_word(self.token(), "ALTER")
            && !self.prev_out().is_some_and(|p| is_word(&self.out[p].token, "ON"))
        {
            self.alter_add = false;
        }
    }

    /// `at` as a table alias (AdventureWorks' views): sqlparser reads AT as the start of AT
    /// TIME ZONE; anything but that is an identifier.
    fn at_alias(&mut self) -> bool {
        if !is_word(self.token(), "AT") || self.is_at(next_sig(self.toks, self.i + 1), "TIME") {
            return false;
        }
        let mut quoted = self.toks[self.i].clone();
        if let Token::Word(w) = self.token() {
            quoted.token = Token::Word(Word {
                value: w.value.clone(),
                quote_style: Some('['),
                keyword: Keyword::NoKeyword,
            });
        }
        self.out.push(quoted);
        self.i += 1;
        true
    }

    /// ALTER TABLE t ADD [CONSTRAINT name] DEFAULT expr FOR col (T-SQL only) becomes ALTER
    /// COLUMN col SET DEFAULT expr; a constraint name rides along as
    /// `__named_default('name', expr)`, which ALTER TABLE unwraps.
    fn add_default_for(&mut self) -> bool {
        if is_word(self.token(), "ADD")
            && self.depth == 0
            && let Some((rewritten, next)) = add_default_for(self.toks, self.i)
        {
            self.out.extend(rewritten);
            self.i = next;
            return true;
        }
        false
    }

    /// ALTER TABLE t ADD a INT, b INT: sqlparser wants ADD before each column.
    fn note_alter_add(&mut self) {
        if is_word(self.token(), "ADD")
            && self.depth == 0
            && let Some(p) = self.prev_out()
        {
            let pp = prev_sig(&self.out, p);
            self.alter_add = pp.is_some_and(|pp| is_word(&self.out[pp].token, "TABLE"))
                || self.out[p].token == Token::Period
                || word(&self.out[p].token).is_some();
        }
    }

    fn alter_add_comma(&mut self) -> bool {
        if !(self.alter_add && self.depth == 0 && *self.token() == Token::Comma) {
            return false;
        }
        self.out.push(self.toks[self.i].clone());
        let n = next_sig(self.toks, self.i + 1);
        if n < self.toks.len() && !self.is_at(n, "ADD") {
            self.out.push(tok(new_word("ADD")));
            self.out.push(space());
        }
        self.i += 1;
        true
    }

    /// ALTER COLUMN c type [NULL | NOT NULL] becomes the PostgreSQL-style operations
    /// sqlparser knows: SET DATA TYPE, then SET/DROP NOT NULL.
    fn alter_column(&mut self) -> bool {
        let toks = self.toks;
        if !is_word(self.token(), "COLUMN")
            || !self
                .prev_out()
                .is_some_and(|p| is_word(&self.out[p].token, "ALTER"))
        {
            return false;
        }
        let name_at = next_sig(toks, self.i + 1);
        if name_at >= toks.len() {
            return false;
        }
        let type_start = next_sig(toks, name_at + 1);
        let type_end = column_type_end(toks, type_start);
        let name = toks[name_at].clone();
        self.out.push(toks[self.i].clone());
        self.out.push(space());
        self.out.push(name.clone());
        for w in [" ", "SET", " ", "DATA", " ", "TYPE", " "] {
            self.out.push(if w == " " { space() } else { tok(new_word(w)) });
        }
        self.out.extend(toks[type_start..type_end].iter().cloned());
        let mut k = type_end;
        if self.is_at(k, "COLLATE") {
            k = next_sig(toks, next_sig(toks, k + 1) + 1);
        }
        let k = next_sig(toks, k);
        let nullability = if self.is_at(k, "NOT") {
            Some((false, next_sig(toks, k + 1) + 1))
        } else if self.is_at(k, "NULL") {
            Some((true, k + 1))
        } else {
            None
        };
        let Some((nullable, end)) = nullability else {
            self.i = type_end;
            return true;
        };
        self.out.push(tok(Token::Comma));
        for w in ["ALTER", "COLUMN"] {
            self.out.push(space());
            self.out.push(tok(new_word(w)));
        }
        self.out.push(space());
        self.out.push(name);
        let words: &[&str] = if nullable {
            &["DROP", "NOT", "NULL"]
        } else {
            &["SET", "NOT", "NULL"]
        };
        for w in words {
            self.out.push(space());
            self.out.push(tok(new_word(w)));
        }
        self.i = end;
        true
    }

    /// ON [PRIMARY] / TEXTIMAGE_ON [PRIMARY] / ON "default" storage clauses.
    fn storage_clause(&mut self) -> bool {
        let toks = self.toks;
        if !(is_word(self.token(), "ON") || is_word(self.token(), "TEXTIMAGE_ON")) {
            return false;
        }
        let n = next_sig(toks, self.i + 1);
        let Some(w) = toks.get(n).and_then(|t| word(&t.token)) else {
            return false;
        };
        let n2 = next_sig(toks, n + 1);
        let storage = (w.value.eq_ignore_ascii_case("PRIMARY") && !self.is_at(n2, "KEY"))
            || (w.quote_style.is_some() && w.value.eq_ignore_ascii_case("default"));
        let follows_ok = n2 >= toks.len()
            || matches!(
                toks[n2].token,
                Token::RParen | Token::Comma | Token::SemiColon | Token::EOF | Token::Word(_)
            );
        if storage && follows_ok {
            self.i = n + 1;
            return true;
        }
        false
    }

    /// WITH (PAD_INDEX = OFF, ...) index/table options.
    fn index_options(&mut self) -> bool {
        let toks = self.toks;
        if !is_word(self.token(), "WITH") {
            return false;
        }
        let n = next_sig(toks, self.i + 1);
        if n < toks.len() && toks[n].token == Token::LParen {
            let n2 = next_sig(toks, n + 1);
            if n2 < toks.len()
                && word(&toks[n2].token)
                    .is_some_and(|w| INDEX_OPTIONS.iter().any(|o| w.value.eq_ignore_ascii_case(o)))
            {
                self.i = close_paren(toks, n);
                return true;
            }
        }
        false
    }

    /// Computed columns: `[c] AS (expr) [PERSISTED]` in CREATE TABLE / ALTER TABLE ADD become
    /// `__computed GENERATED ALWAYS AS (expr) {STORED | VIRTUAL}`.
    fn computed_column(&mut self) -> bool {
        let toks = self.toks;
        if !is_word(self.token(), "AS") {
            return false;
        }
        let before = self.prev_out().and_then(|p| prev_sig(&self.out, p));
        let n = next_sig(toks, self.i + 1);
        let in_cols = self.in_column_list()
            && before.is_some_and(|b| matches!(self.out[b].token, Token::LParen | Token::Comma));
        let after_add = before.is_some_and(|b| is_word(&self.out[b].token, "ADD"));
        if !(in_cols || after_add) || n >= toks.len() {
            return false;
        }
        for w in ["__computed", " ", "GENERATED", " ", "ALWAYS", " ", "AS", " "] {
            self.out.push(if w == " " { space() } else { tok(new_word(w)) });
        }
        let end = if toks[n].token == Token::LParen {
            let end = close_paren(toks, n);
            self.out.extend(toks[n..end].iter().cloned());
            end
        } else {
            // `AS expr` without parentheses: the expression runs to the next comma or the
            // column list's closing parenthesis.
            let end = bare_expression_end(toks, n);
            self.out.push(tok(Token::LParen));
            self.out.extend(toks[n..end].iter().cloned());
            self.out.push(tok(Token::RParen));
            end
        };
        self.out.push(space());
        let p = next_sig(toks, end);
        if self.is_at(p, "PERSISTED") {
            self.out.push(tok(new_word("STORED")));
            self.i = p + 1;
        } else {
            self.out.push(tok(new_word("VIRTUAL")));
            self.i = end;
        }
        true
    }

    /// DELETE TOP (n) / UPDATE TOP (n): remembered by the statement's location.
    fn dml_top(&mut self) -> bool {
        let toks = self.toks;
        if !(is_word(self.token(), "DELETE") || is_word(self.token(), "UPDATE")) {
            return false;
        }
        let n = next_sig(toks, self.i + 1);
        if !self.is_at(n, "TOP") {
            return false;
        }
        let open = next_sig(toks, n + 1);
        if open < toks.len() && toks[open].token == Token::LParen {
            let end = close_paren(toks, open);
            let text: String = toks[open + 1..end.saturating_sub(1)]
                .iter()
                .map(|t| t.token.to_string())
                .collect();
            let loc = toks[self.i].span.start;
            self.batch.tops.insert((loc.line, loc.column), text);
            let delete = is_word(self.token(), "DELETE");
            self.out.push(toks[self.i].clone());
            self.i = end;
            if delete {
                self.insert_from_after_delete();
            }
            return true;
        }
        false
    }

    /// `DELETE t WHERE ...`: FROM is optional in T-SQL, not to sqlparser.
    fn delete_without_from(&mut self) -> bool {
        if !is_word(self.token(), "DELETE") {
            return false;
        }
        // Only a DELETE statement: not `ON DELETE CASCADE`, MERGE's `THEN DELETE`, a trigger's
        // `AFTER DELETE` or `GRANT DELETE ON`.
        if self.prev_out().is_some_and(|p| {
            let t = &self.out[p].token;
            *t == Token::Comma
                || ["ON", "THEN", "FOR", "AFTER", "OF", "GRANT", "DENY", "REVOKE"]
                    .iter()
                    .any(|w| is_word(t, w))
        }) {
            return false;
        }
        self.out.push(self.toks[self.i].clone());
        self.i += 1;
        self.insert_from_after_delete();
        true
    }

    /// `APP_NAME()`: the session's program name as the login gave it, read where SQL Server
    /// shows it too (sys.dm_exec_sessions).
    fn app_name(&mut self) -> bool {
        if !is_word(self.token(), "APP_NAME") {
            return false;
        }
        let open = next_sig(self.toks, self.i + 1);
        let close = next_sig(self.toks, open + 1);
        if !(close < self.toks.len()
            && self.toks[open].token == Token::LParen
            && self.toks[close].token == Token::RParen)
        {
            return false;
        }
        let dialect = sqlparser::dialect::MsSqlDialect {};
        let Ok(replacement) = sqlparser::tokenizer::Tokenizer::new(
            &dialect,
            "(SELECT program_name FROM sys.dm_exec_sessions WHERE session_id = @@SPID)",
        )
        .tokenize() else {
            return false;
        };
        self.out.extend(replacement.into_iter().map(tok));
        self.i = close + 1;
        true
    }

    /// After DELETE [TOP (n)]: FROM, unless it is there.
    fn insert_from_after_delete(&mut self) {
        let n = next_sig(self.toks, self.i);
        let keyword = ["FROM", "CASCADE", "NO", "SET", "ON", "WHERE", "OUTPUT"]
            .iter()
            .any(|w| self.is_at(n, w));
        if n < self.toks.len() && word(&self.toks[n].token).is_some() && !keyword {
            self.out.push(space());
            self.out.push(tok(new_word("FROM")));
        }
    }

    /// FETCH NEXT @p ROWS: sqlparser wants a literal; inline the parameter's value.
    fn fetch_variable(&mut self) -> bool {
        let toks = self.toks;
        if !is_word(self.token(), "FETCH") {
            return false;
        }
        let mut n = next_sig(toks, self.i + 1);
        if self.is_at(n, "NEXT") || self.is_at(n, "FIRST") {
            n = next_sig(toks, n + 1);
        }
        self.out.extend(toks[self.i..n].iter().cloned());
        let paren = n < toks.len() && toks[n].token == Token::LParen;
        let v = if paren { next_sig(toks, n + 1) } else { n };
        if v < toks.len()
            && let Some(w) = word(&toks[v].token)
            && w.value.starts_with('@')
            && let Some(val) = (self.vars)(&w.value)
        {
            self.out.push(tok(Token::Number(val, false)));
            self.i = if paren { close_paren(toks, n) } else { v + 1 };
            return true;
        }
        self.i = n;
        true
    }
}

/// Where the type of an ALTER COLUMN that starts at `start` ends: at NULL, NOT, COLLATE, the
/// statement's end or the next statement.
fn column_type_end(toks: &[TokenWithSpan], start: usize) -> usize {
    let mut j = start;
    let mut d = 0;
    while j < toks.len() {
        let tj = &toks[j].token;
        match tj {
            Token::LParen => d += 1,
            Token::RParen => d -= 1,
            _ => {}
        }
        if d == 0
            && (is_word(tj, "NULL")
                || is_word(tj, "NOT")
                || is_word(tj, "COLLATE")
                || *tj == Token::SemiColon
                || *tj == Token::EOF
                || word(tj).is_some_and(|w| {
                    w.quote_style.is_none() && j > start && is_statement_start(&w.value.to_ascii_uppercase())
                }))
        {
            break;
        }
        if d < 0 {
            break;
        }
        j += 1;
    }
    j
}

/// Where a computed column's expression written without parentheses, starting at `start`,
/// ends: at the next comma, PERSISTED or the column list's closing parenthesis.
fn bare_expression_end(toks: &[TokenWithSpan], start: usize) -> usize {
    let mut d = 0i32;
    let mut k = start;
    while k < toks.len() {
        match toks[k].token {
            Token::LParen => d += 1,
            Token::RParen if d == 0 => break,
            Token::RParen => d -= 1,
            Token::Comma | Token::SemiColon | Token::EOF if d == 0 => break,
            _ => {}
        }
        if d == 0 && is_word(&toks[k].token, "PERSISTED") {
            break;
        }
        k += 1;
    }
    k
}
