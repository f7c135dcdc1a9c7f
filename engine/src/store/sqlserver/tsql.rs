//! A small T-SQL reader for the server-free statement tests (`statement_rules`): tokens
//! without comments, top-level statements with the control flow around them, and the few
//! facts the rules need (what a statement returns to the client, which tables it locks, the
//! columns of a `SELECT`). It knows the subset of T-SQL this store writes, not the whole
//! language; what it cannot read it reports, so a rule never passes by misreading.

use std::collections::BTreeSet;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Keyword or plain identifier (text as written).
    Word,
    /// `[bracketed]` or `"quoted"` identifier (text without the quotes).
    Ident,
    /// `@variable` or `@@function` (text with the `@`s, upper-cased).
    Var,
    /// `#temp` table (text with the `#`).
    Temp,
    Num,
    /// String literal, unescaped (`N'it''s'` → `it's`).
    Str,
    Punct,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tok {
    pub kind: Kind,
    pub text: String,
}

impl Tok {
    pub fn kw(&self, word: &str) -> bool {
        self.kind == Kind::Word && self.text.eq_ignore_ascii_case(word)
    }

    pub fn p(&self, punct: &str) -> bool {
        self.kind == Kind::Punct && self.text == punct
    }

    /// A name: a plain word or a bracketed identifier.
    pub fn name(&self) -> Option<&str> {
        match self.kind {
            Kind::Word | Kind::Ident => Some(&self.text),
            _ => None,
        }
    }

    pub fn is_name(&self, name: &str) -> bool {
        self.name().is_some_and(|n| n.eq_ignore_ascii_case(name))
    }
}

/// Tokens of `sql`, comments dropped. Fails on an unterminated string, identifier or comment.
pub fn lex(sql: &str) -> Result<Vec<Tok>, String> {
    let chars: Vec<char> = sql.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let at = |i: usize| chars.get(i).copied().unwrap_or('\0');
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c == '-' && at(i + 1) == '-' {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && at(i + 1) == '*' {
            // Block comments nest in T-SQL.
            let mut depth = 0;
            loop {
                if i >= chars.len() {
                    return Err("unterminated /* comment".into());
                }
                if chars[i] == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if c == '\'' || ((c == 'N' || c == 'n') && at(i + 1) == '\'') {
            i += if c == '\'' { 1 } else { 2 };
            let text = quoted(&chars, &mut i, '\'')
                .map_err(|text| format!("unterminated string starting {text:.40?}"))?;
            out.push(Tok {
                kind: Kind::Str,
                text,
            });
        } else if c == '[' || c == '"' {
            let close = if c == '[' { ']' } else { '"' };
            i += 1;
            let text = quoted(&chars, &mut i, close)
                .map_err(|text| format!("unterminated identifier {text:.40?}"))?;
            out.push(Tok {
                kind: Kind::Ident,
                text,
            });
        } else if c == '@' || c == '#' {
            let start = i;
            while i < chars.len() && (chars[i] == c) {
                i += 1;
            }
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let text: String = chars[start..i].iter().collect();
            out.push(Tok {
                kind: if c == '@' { Kind::Var } else { Kind::Temp },
                text: if c == '@' {
                    text.to_ascii_uppercase()
                } else {
                    text
                },
            });
        } else if c.is_ascii_digit() {
            let start = i;
            if c == '0' && (at(i + 1) == 'x' || at(i + 1) == 'X') {
                i += 2;
                while i < chars.len() && chars[i].is_ascii_hexdigit() {
                    i += 1;
                }
            } else {
                while i < chars.len() && (chars[i].is_ascii_digit() || chars[i] == '.') {
                    i += 1;
                }
            }
            out.push(Tok {
                kind: Kind::Num,
                text: chars[start..i].iter().collect(),
            });
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len()
                && (chars[i].is_alphanumeric() || chars[i] == '_' || chars[i] == '$')
            {
                i += 1;
            }
            out.push(Tok {
                kind: Kind::Word,
                text: chars[start..i].iter().collect(),
            });
        } else {
            let two: String = [c, at(i + 1)].iter().collect();
            let text =
                if ["<=", ">=", "<>", "!=", "+=", "-=", "*=", "/=", "::"].contains(&two.as_str()) {
                    i += 2;
                    two
                } else {
                    i += 1;
                    c.to_string()
                };
            out.push(Tok {
                kind: Kind::Punct,
                text,
            });
        }
    }
    Ok(out)
}

/// The text of tokens, for messages.
/// The text of a quoted string or identifier, read from `*i` (just past its opening quote) to
/// its closing `close`, where a doubled `close` stands for one; `*i` ends past the closing
/// one. When the text ends first, the error holds what was read.
fn quoted(chars: &[char], i: &mut usize, close: char) -> Result<String, String> {
    let mut text = String::new();
    loop {
        match chars.get(*i) {
            None => return Err(text),
            Some(&c) if c == close && chars.get(*i + 1) == Some(&close) => {
                text.push(close);
                *i += 2;
            }
            Some(&c) if c == close => {
                *i += 1;
                return Ok(text);
            }
            Some(&c) => {
                text.push(c);
                *i += 1;
            }
        }
    }
}

pub fn show(toks: &[Tok]) -> String {
    let mut s = String::new();
    for t in toks.iter().take(24) {
        if !s.is_empty() {
            s.push(' ');
        }
        match t.kind {
            Kind::Ident => s.push_str(&format!("[{}]", t.text)),
            Kind::Str => s.push_str(&format!(
                "'{}'",
                t.text.chars().take(20).collect::<String>()
            )),
            _ => s.push_str(&t.text),
        }
    }
    if toks.len() > 24 {
        s.push_str(" …");
    }
    s
}

/// One top-level statement and the control flow it sits in.
#[derive(Debug, Clone)]
pub struct Stmt {
    pub toks: Vec<Tok>,
    /// Runs only on some paths (inside IF / ELSE / WHILE).
    pub conditional: bool,
    /// Inside a WHILE body (may run many times).
    pub in_loop: bool,
    /// Inside BEGIN CATCH … END CATCH.
    pub in_catch: bool,
}

impl Stmt {
    pub fn starts(&self, words: &[&str]) -> bool {
        words.len() <= self.toks.len() && words.iter().zip(&self.toks).all(|(w, t)| t.kw(w))
    }

    pub fn text(&self) -> String {
        show(&self.toks)
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Ctx {
    Try,
    Catch,
    Block { conditional: bool, lp: bool },
}

/// Words that start a statement (and so end an IF / WHILE condition).
const STATEMENT_WORDS: &[&str] = &[
    "BEGIN",
    "SELECT",
    "INSERT",
    "UPDATE",
    "DELETE",
    "SET",
    "DECLARE",
    "THROW",
    "RAISERROR",
    "RETURN",
    "EXEC",
    "EXECUTE",
    "BREAK",
    "CONTINUE",
    "WITH",
    "IF",
    "WHILE",
    "COMMIT",
    "ROLLBACK",
    "PRINT",
    "CREATE",
    "ALTER",
    "DROP",
    "TRUNCATE",
    "SAVE",
];

fn is_statement_word(t: &Tok) -> bool {
    t.kind == Kind::Word && STATEMENT_WORDS.iter().any(|w| t.kw(w))
}

/// Split tokens into top-level statements (on `;` outside parentheses), peeling off the
/// control-flow words around them (BEGIN/END, TRY/CATCH, IF/ELSE/WHILE and their conditions).
pub fn statements(toks: &[Tok]) -> Result<Vec<Stmt>, String> {
    let mut segments: Vec<&[Tok]> = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, t) in toks.iter().enumerate() {
        if t.p("(") {
            depth += 1;
        } else if t.p(")") {
            depth -= 1;
            if depth < 0 {
                return Err(format!("unbalanced ')' near {}", show(&toks[start..=i])));
            }
        } else if t.p(";") && depth == 0 {
            segments.push(&toks[start..i]);
            start = i + 1;
        }
    }
    if depth != 0 {
        return Err("unbalanced '('".into());
    }
    segments.push(&toks[start..]);

    let mut out = Vec::new();
    let mut stack: Vec<Ctx> = Vec::new();
    // A condition was read; the next statement or block is its body.
    let mut pending: Option<bool> = None; // Some(is_loop)
    for seg in segments {
        let mut i = 0;
        while i < seg.len() {
            let t = &seg[i];
            let next = seg.get(i + 1);
            if t.kw("BEGIN") && next.is_some_and(|n| n.kw("TRY")) {
                stack.push(Ctx::Try);
                i += 2;
            } else if t.kw("BEGIN") && next.is_some_and(|n| n.kw("CATCH")) {
                stack.push(Ctx::Catch);
                i += 2;
            } else if t.kw("END") && next.is_some_and(|n| n.kw("TRY") || n.kw("CATCH")) {
                match stack.pop() {
                    Some(Ctx::Try) if next.is_some_and(|n| n.kw("TRY")) => {}
                    Some(Ctx::Catch) if next.is_some_and(|n| n.kw("CATCH")) => {}
                    other => return Err(format!("END {} closes {other:?}", seg[i + 1].text)),
                }
                i += 2;
            } else if t.kw("BEGIN")
                && !next.is_some_and(|n| n.kw("TRAN") || n.kw("TRANSACTION") || n.kw("DISTRIBUTED"))
            {
                stack.push(Ctx::Block {
                    conditional: pending.is_some(),
                    lp: pending == Some(true),
                });
                pending = None;
                i += 1;
            } else if t.kw("END") {
                match stack.pop() {
                    Some(Ctx::Block { .. }) => {}
                    other => return Err(format!("END closes {other:?}")),
                }
                i += 1;
            } else if t.kw("ELSE") {
                pending = Some(false);
                i += 1;
            } else if t.kw("IF") || t.kw("WHILE") {
                let lp = t.kw("WHILE") || pending == Some(true);
                i += 1;
                let mut depth = 0;
                let cond_start = i;
                while i < seg.len() {
                    let c = &seg[i];
                    if c.p("(") {
                        depth += 1;
                    } else if c.p(")") {
                        depth -= 1;
                    } else if depth == 0 && i > cond_start && is_statement_word(c) {
                        break;
                    }
                    i += 1;
                }
                if i == cond_start {
                    return Err("IF/WHILE without a condition".into());
                }
                pending = Some(lp);
            } else {
                let in_block = |f: &dyn Fn(&Ctx) -> bool| stack.iter().any(f);
                out.push(Stmt {
                    toks: seg[i..].to_vec(),
                    conditional: pending.is_some()
                        || in_block(&|c| {
                            matches!(
                                c,
                                Ctx::Block {
                                    conditional: true,
                                    ..
                                }
                            )
                        }),
                    in_loop: pending == Some(true)
                        || in_block(&|c| matches!(c, Ctx::Block { lp: true, .. })),
                    in_catch: in_block(&|c| *c == Ctx::Catch),
                });
                pending = None;
                break;
            }
        }
    }
    if !stack.is_empty() {
        return Err(format!("unclosed blocks: {stack:?}"));
    }
    Ok(out)
}

/// Index of the matching `)` for the `(` at `open`.
pub fn close_paren(toks: &[Tok], open: usize) -> Option<usize> {
    let mut depth = 0;
    for (i, t) in toks.iter().enumerate().skip(open) {
        if t.p("(") {
            depth += 1;
        } else if t.p(")") {
            depth -= 1;
            if depth == 0 {
                return Some(i);
            }
        }
    }
    None
}

/// Positions of tokens at parenthesis depth 0.
pub fn top_level(toks: &[Tok]) -> Vec<usize> {
    let mut depth = 0;
    let mut out = Vec::new();
    for (i, t) in toks.iter().enumerate() {
        if t.p("(") {
            depth += 1;
        } else if t.p(")") {
            depth -= 1;
        } else if depth == 0 {
            out.push(i);
        }
    }
    out
}

/// The verb of a statement, after any `WITH name AS (…)` common table expressions, and its
/// position.
pub fn verb(stmt: &Stmt) -> Option<(String, usize)> {
    let toks = &stmt.toks;
    let first = toks.first()?;
    if !first.kw("WITH") {
        return Some((first.text.to_ascii_uppercase(), 0));
    }
    // i is at WITH, then at each ','; the name follows it.
    let mut i = 0;
    loop {
        // name [ (columns) ] AS ( query ) [ , … ]
        i += 2;
        if toks.get(i)?.p("(") {
            i = close_paren(toks, i)? + 1;
        }
        if !toks.get(i)?.kw("AS") {
            return None;
        }
        i += 1;
        if !toks.get(i)?.p("(") {
            return None;
        }
        i = close_paren(toks, i)? + 1;
        if toks.get(i)?.p(",") {
            continue;
        }
        let t = toks.get(i)?;
        return Some((t.text.to_ascii_uppercase(), i));
    }
}

/// Words that end a select list.
const SELECT_LIST_END: &[&str] = &[
    "FROM",
    "INTO",
    "WHERE",
    "GROUP",
    "HAVING",
    "ORDER",
    "UNION",
    "EXCEPT",
    "INTERSECT",
    "OPTION",
    "FOR",
];

/// Output column names of the SELECT whose keyword is at `at` (`None` for an item without a
/// name, `*`, or an assignment).
pub fn select_columns(toks: &[Tok], at: usize) -> Result<Vec<String>, String> {
    let mut i = at + 1;
    while let Some(t) = toks.get(i) {
        if t.kw("DISTINCT") || t.kw("ALL") {
            i += 1;
        } else if t.kw("TOP") {
            i += 1;
            if toks.get(i).is_some_and(|t| t.p("(")) {
                i = close_paren(toks, i).ok_or("TOP without ')'")? + 1;
            } else {
                i += 1;
            }
            if toks.get(i).is_some_and(|t| t.kw("PERCENT")) {
                i += 1;
            }
            if toks.get(i).is_some_and(|t| t.kw("WITH")) {
                i += 2;
            }
        } else {
            break;
        }
    }
    let mut items: Vec<Vec<Tok>> = vec![Vec::new()];
    let mut depth = 0;
    while let Some(t) = toks.get(i) {
        if depth == 0 && SELECT_LIST_END.iter().any(|w| t.kw(w)) {
            break;
        }
        if t.p("(") {
            depth += 1;
        } else if t.p(")") {
            if depth == 0 {
                break; // the end of a subquery
            }
            depth -= 1;
        }
        if depth == 0 && t.p(",") {
            items.push(Vec::new());
        } else if let Some(last) = items.last_mut() {
            last.push(t.clone());
        }
        i += 1;
    }
    items
        .iter()
        .map(|item| column_name(item).ok_or_else(|| format!("unnamed select item: {}", show(item))))
        .collect()
}

fn column_name(item: &[Tok]) -> Option<String> {
    let n = item.len();
    if n == 0 {
        return None;
    }
    if n >= 2 && item[n - 2].kw("AS") {
        let t = &item[n - 1];
        return match t.kind {
            Kind::Word | Kind::Ident | Kind::Str => Some(t.text.clone()),
            _ => None,
        };
    }
    // T-SQL's `name = expression` alias (not an assignment: those start with @).
    if n >= 3 && item[1].p("=") && matches!(item[0].kind, Kind::Word | Kind::Ident) {
        return Some(item[0].text.clone());
    }
    // A bare column, possibly qualified: `c`, `t.c`.
    let bare = item.iter().enumerate().all(|(k, t)| {
        if k % 2 == 0 {
            t.name().is_some()
        } else {
            t.p(".")
        }
    });
    if bare && n % 2 == 1 {
        return item[n - 1].name().map(str::to_string);
    }
    None
}

/// A schema-qualified table in a statement: `[schema].[name] [AS alias] [WITH (hints)]`.
#[derive(Debug, Clone)]
pub struct TableRef {
    pub name: String,
    pub alias: Option<String>,
    /// Upper-cased table hints (`FORCESEEK`, `UPDLOCK`, …).
    pub hints: BTreeSet<String>,
}

/// Words that cannot be an alias.
const NOT_ALIAS: &[&str] = &[
    "ON", "WHERE", "JOIN", "INNER", "LEFT", "RIGHT", "FULL", "CROSS", "OUTER", "WITH", "SET",
    "OUTPUT", "SELECT", "VALUES", "GROUP", "ORDER", "HAVING", "UNION", "OPTION", "AND", "OR",
    "FROM", "DEFAULT", "EXEC", "EXECUTE",
];

pub fn table_refs(toks: &[Tok], schema: &str) -> Vec<TableRef> {
    let mut out = Vec::new();
    let mut i = 0;
    while i + 2 < toks.len() {
        if toks[i].kind == Kind::Ident
            && toks[i].text == schema
            && toks[i + 1].p(".")
            && let Some(name) = toks[i + 2].name()
            // `[schema].[table].column` names a column, not a table source.
            && !toks.get(i + 3).is_some_and(|t| t.p("."))
        {
            let mut j = i + 3;
            let mut alias = None;
            if toks.get(j).is_some_and(|t| t.kw("AS")) {
                alias = toks.get(j + 1).and_then(|t| t.name()).map(str::to_string);
                j += 2;
            } else if let Some(t) = toks.get(j)
                && matches!(t.kind, Kind::Word | Kind::Ident)
                && !NOT_ALIAS.iter().any(|w| t.kw(w))
            {
                alias = Some(t.text.clone());
                j += 1;
            }
            let mut hints = BTreeSet::new();
            if toks.get(j).is_some_and(|t| t.kw("WITH"))
                && toks.get(j + 1).is_some_and(|t| t.p("("))
                && let Some(end) = close_paren(toks, j + 1)
            {
                let mut depth = 0;
                for t in &toks[j + 2..end] {
                    if t.p("(") {
                        depth += 1;
                    } else if t.p(")") {
                        depth -= 1;
                    } else if depth == 0 && t.kind == Kind::Word {
                        hints.insert(t.text.to_ascii_uppercase());
                    }
                }
            }
            out.push(TableRef {
                name: name.to_string(),
                alias,
                hints,
            });
            i += 3;
        } else {
            i += 1;
        }
    }
    out
}

/// The table an INSERT / UPDATE / DELETE writes (a schema table, a table variable or a temp
/// table), resolving `UPDATE alias … FROM [s].[t] AS alias`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Table(String),
    Variable(String),
    Temp(String),
}

/// Where the written object stands in an INSERT / UPDATE / DELETE: after the verb, its `TOP (n)`
/// and its `INTO` / `FROM`.
pub fn target_position(stmt: &Stmt) -> Option<usize> {
    let (verb, at) = verb(stmt)?;
    let toks = &stmt.toks;
    let mut i = at + 1;
    match verb.as_str() {
        "INSERT" => {
            if toks.get(i).is_some_and(|t| t.kw("INTO")) {
                i += 1;
            }
        }
        "UPDATE" | "DELETE" => {
            if toks.get(i).is_some_and(|t| t.kw("TOP")) {
                i = close_paren(toks, i + 1)? + 1;
            }
            if verb == "DELETE" && toks.get(i).is_some_and(|t| t.kw("FROM")) {
                i += 1;
            }
        }
        _ => return None,
    }
    Some(i)
}

/// The schema table a write names directly as its target (`UPDATE [s].[t] WITH (…)`), with
/// its hints; `None` for a target written as an alias, a variable or a temp table.
pub fn named_target(stmt: &Stmt, schema: &str) -> Option<TableRef> {
    let at = target_position(stmt)?;
    let toks = &stmt.toks[at..];
    if !toks
        .first()
        .is_some_and(|t| t.kind == Kind::Ident && t.text == schema)
    {
        return None;
    }
    table_refs(toks, schema).into_iter().next()
}

pub fn dml_target(stmt: &Stmt, schema: &str) -> Option<Target> {
    let i = target_position(stmt)?;
    let toks = &stmt.toks;
    let t = toks.get(i)?;
    match t.kind {
        Kind::Var => Some(Target::Variable(t.text.clone())),
        Kind::Temp => Some(Target::Temp(t.text.clone())),
        Kind::Ident if t.text == schema => toks.get(i + 2)?.name().map(|n| Target::Table(n.into())),
        Kind::Word | Kind::Ident => {
            // An alias: find the table it names.
            let alias = &t.text;
            if let Some(r) = table_refs(toks, schema).into_iter().find(|r| {
                r.alias
                    .as_deref()
                    .is_some_and(|a| a.eq_ignore_ascii_case(alias))
            }) {
                return Some(Target::Table(r.name));
            }
            // `FROM @var AS alias`
            for k in 0..toks.len().saturating_sub(2) {
                if matches!(toks[k].kind, Kind::Var | Kind::Temp)
                    && toks[k + 1].kw("AS")
                    && toks[k + 2].is_name(alias)
                {
                    return Some(if toks[k].kind == Kind::Var {
                        Target::Variable(toks[k].text.clone())
                    } else {
                        Target::Temp(toks[k].text.clone())
                    });
                }
            }
            None
        }
        _ => None,
    }
}

/// `OUTPUT` clauses at depth 0: for each, the `INTO` target if it has one.
pub fn output_clauses(stmt: &Stmt) -> Vec<Option<Tok>> {
    let toks = &stmt.toks;
    let mut out = Vec::new();
    // In `EXEC proc @p = @v OUTPUT` the keyword marks an output parameter, not a clause.
    if verb(stmt).is_some_and(|(v, _)| v == "EXEC" || v == "EXECUTE") {
        return out;
    }
    for i in top_level(toks) {
        if toks[i].kw("OUTPUT") {
            let mut target = None;
            let mut depth = 0;
            for (k, t) in toks.iter().enumerate().skip(i + 1) {
                if t.p("(") {
                    depth += 1;
                } else if t.p(")") {
                    depth -= 1;
                } else if depth == 0 {
                    if t.kw("INTO") {
                        target = toks.get(k + 1).cloned();
                        break;
                    }
                    if t.kw("FROM") || t.kw("WHERE") || t.kw("SELECT") || t.kw("VALUES") {
                        break;
                    }
                }
            }
            out.push(target);
        }
    }
    out
}

/// Whether a statement sends a result set to the client, and the columns when it does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    None,
    /// A result set with these columns.
    Rows(Vec<String>),
    /// `EXEC` of a procedure: whatever it returns.
    Procedure(String),
    /// A result set the reader cannot name (bare OUTPUT, unnamed columns…), with why.
    Unreadable(String),
}

pub fn answer(stmt: &Stmt, schema: &str) -> Answer {
    let Some((verb, at)) = verb(stmt) else {
        return Answer::Unreadable(format!("cannot read the verb of {}", stmt.text()));
    };
    let toks = &stmt.toks;
    if output_clauses(stmt).iter().any(Option::is_none) {
        return Answer::Unreadable("OUTPUT without INTO sends rows to the client".into());
    }
    match verb.as_str() {
        "SELECT" => {
            // SELECT @v = … assigns; SELECT … INTO creates a table.
            let mut k = at + 1;
            while toks.get(k).is_some_and(|t| t.kw("TOP") || t.kw("DISTINCT")) {
                k += if toks[k].kw("TOP") {
                    close_paren(toks, k + 1).map_or(2, |c| c - k + 1)
                } else {
                    1
                };
            }
            if toks.get(k).is_some_and(|t| t.kind == Kind::Var)
                && toks
                    .get(k + 1)
                    .is_some_and(|t| t.p("=") || t.p("+=") || t.p("-="))
            {
                return Answer::None;
            }
            if top_level(toks)
                .into_iter()
                .take_while(|&i| !toks[i].kw("FROM"))
                .any(|i| toks[i].kw("INTO"))
            {
                return Answer::None;
            }
            match select_columns(toks, at) {
                Ok(cols) => Answer::Rows(cols),
                Err(e) => Answer::Unreadable(e),
            }
        }
        "EXEC" | "EXECUTE" => {
            // EXEC [schema].[proc] …: the procedure's own answer; EXEC(N'…') and system
            // procedures (sp_getapplock) return none here.
            match (toks.get(at + 1), toks.get(at + 2), toks.get(at + 3)) {
                (Some(s), Some(dot), Some(p))
                    if s.kind == Kind::Ident && s.text == schema && dot.p(".") =>
                {
                    Answer::Procedure(p.text.clone())
                }
                _ => Answer::None,
            }
        }
        _ => Answer::None,
    }
}

/// A procedure created by `EXEC(N'CREATE PROCEDURE [schema].[name] … AS …')` or redefined by
/// `EXEC(N'ALTER PROCEDURE …')` in a migration: its name and the tokens of its body.
#[derive(Debug, Clone)]
pub struct Procedure {
    pub name: String,
    pub body: Vec<Tok>,
}

pub fn procedures(migration_sql: &str, schema: &str) -> Result<Vec<Procedure>, String> {
    let toks = lex(migration_sql)?;
    let mut out = Vec::new();
    for w in toks.windows(4) {
        if w[0].kw("EXEC") && w[1].p("(") && w[2].kind == Kind::Str && w[3].p(")") {
            let inner = lex(&w[2].text)?;
            let defines = inner.len() > 4
                && (inner[0].kw("CREATE") || inner[0].kw("ALTER"))
                && (inner[1].kw("PROCEDURE") || inner[1].kw("PROC"));
            if !defines {
                continue;
            }
            let inner = &inner[2..];
            if !(inner.len() > 3
                && inner[0].kind == Kind::Ident
                && inner[0].text == schema
                && inner[1].p("."))
            {
                return Err(format!("procedure not in [{schema}]: {}", show(inner)));
            }
            let name = inner[2].text.clone();
            let as_at = top_level(inner)
                .into_iter()
                .find(|&i| i > 2 && inner[i].kw("AS"))
                .ok_or_else(|| format!("procedure {name} has no AS"))?;
            out.push(Procedure {
                name,
                body: inner[as_at + 1..].to_vec(),
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_and_strings_are_not_code() {
        let toks =
            lex("SELECT 'a -- b' AS x -- NOLOCK\n/* outer /* inner */ NOLOCK */ FROM t;").unwrap();
        assert!(toks.iter().all(|t| !t.kw("NOLOCK")));
        assert_eq!(toks[1].kind, Kind::Str);
        assert_eq!(toks[1].text, "a -- b");
        let toks = lex("SELECT N'it''s', [a]]b] FROM [s].[t];").unwrap();
        assert_eq!(toks[1].text, "it's");
        assert_eq!(toks[3].text, "a]b");
        assert!(lex("SELECT 'open").is_err());
        assert!(lex("/* open").is_err());
    }

    #[test]
    fn statements_carry_their_control_flow() {
        let sql = "SET NOCOUNT ON;
            BEGIN TRY
            BEGIN TRANSACTION;
            IF @@ROWCOUNT = 0 INSERT INTO t (a) VALUES (1);
            WHILE @i < 3
            BEGIN
                UPDATE t SET a = 1;
                SET @i += 1;
            END
            IF EXISTS (SELECT 1 FROM t) BEGIN SELECT a FROM t; END ELSE SELECT b FROM u;
            SELECT a AS x, t.b, c = 1 + 2 FROM t;
            COMMIT TRANSACTION;
            END TRY
            BEGIN CATCH
                IF @@TRANCOUNT > 0 ROLLBACK TRANSACTION;
                THROW;
            END CATCH;";
        let stmts = statements(&lex(sql).unwrap()).unwrap();
        let first: Vec<String> = stmts.iter().map(|s| s.toks[0].text.clone()).collect();
        assert_eq!(
            first,
            [
                "SET", "BEGIN", "INSERT", "UPDATE", "SET", "SELECT", "SELECT", "SELECT", "COMMIT",
                "ROLLBACK", "THROW"
            ]
        );
        assert!(!stmts[1].conditional && stmts[2].conditional);
        assert!(stmts[3].in_loop && stmts[4].in_loop && !stmts[5].in_loop);
        assert!(stmts[5].conditional && stmts[6].conditional && !stmts[7].conditional);
        assert!(stmts[9].in_catch && stmts[10].in_catch && !stmts[8].in_catch);
        assert_eq!(
            answer(&stmts[7], "s"),
            Answer::Rows(vec!["x".into(), "b".into(), "c".into()])
        );
        assert_eq!(answer(&stmts[2], "s"), Answer::None);
    }

    #[test]
    fn assignments_inserts_and_output_into_return_nothing() {
        let stmts = statements(
            &lex("SELECT @a = x FROM t; INSERT INTO @v (a) SELECT a FROM t;
                  UPDATE h SET h.a = 1 OUTPUT inserted.id INTO @ids (id) FROM [s].[t] AS h;
                  UPDATE h SET h.a = 1 OUTPUT inserted.id FROM [s].[t] AS h;
                  WITH c AS (SELECT TOP (1) a FROM t) UPDATE c SET a = 2;
                  EXEC [s].[enqueue] @jobs = @P1;")
            .unwrap(),
        )
        .unwrap();
        assert_eq!(answer(&stmts[0], "s"), Answer::None);
        assert_eq!(answer(&stmts[1], "s"), Answer::None);
        assert_eq!(answer(&stmts[2], "s"), Answer::None);
        assert!(matches!(answer(&stmts[3], "s"), Answer::Unreadable(_)));
        assert_eq!(verb(&stmts[4]).unwrap().0, "UPDATE");
        assert_eq!(answer(&stmts[5], "s"), Answer::Procedure("enqueue".into()));
        assert_eq!(dml_target(&stmts[2], "s"), Some(Target::Table("t".into())));
        assert_eq!(
            dml_target(&stmts[1], "s"),
            Some(Target::Variable("@V".into()))
        );
    }

    #[test]
    fn table_refs_read_aliases_and_hints() {
        let toks = lex(
            "DELETE TOP (@b) h FROM [s].[jobs] AS h WITH (ROWLOCK, READPAST, FORCESEEK)
                        JOIN [s].[queues] q ON q.name = h.queue",
        )
        .unwrap();
        let refs = table_refs(&toks, "s");
        assert_eq!(refs.len(), 2);
        assert_eq!(refs[0].alias.as_deref(), Some("h"));
        assert!(refs[0].hints.contains("FORCESEEK") && refs[0].hints.contains("READPAST"));
        assert_eq!(refs[1].alias.as_deref(), Some("q"));
        assert!(refs[1].hints.is_empty());
        let stmts = statements(&toks).unwrap();
        assert_eq!(
            dml_target(&stmts[0], "s"),
            Some(Target::Table("jobs".into()))
        );
    }
}
