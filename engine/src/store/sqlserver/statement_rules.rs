//! Server-free rules over every T-SQL text this store sends (the fixed statements, every
//! shape of the console's dynamic lists, and the procedures of `routines.rs`). There is
//! no SQL Server on the build machines, so these rules are what stands between a statement
//! and the two traps a real server showed (STACK.md): an `OUTPUT … INTO` nobody reads back,
//! and result sets read by position. Each rule reads tokens (`tsql`), not raw text, so a
//! comment or a string can neither satisfy nor break it.

use std::collections::{BTreeMap, BTreeSet};

use super::connection::SchemaName;
use super::job_lists;
use super::migrations::MIGRATIONS;
use super::queries::{self, Class, Reads};
use super::routines::{ROUTINES, RoutineKind};
use super::tsql::{self, Answer, Kind, Stmt, Target, Tok};
use crate::model::FailureReason;

const SCHEMA: &str = "deck";

/// One batch as the server sees it.
struct Batch {
    name: String,
    class: Class,
    reads: Reads,
    stmts: Vec<Stmt>,
    toks: Vec<Tok>,
    /// A procedure body rather than a batch the store sends.
    procedure: bool,
}

fn parse(name: &str, sql: &str) -> (Vec<Tok>, Vec<Stmt>) {
    let rendered = sql.replace("{schema}", SCHEMA);
    let toks = tsql::lex(&rendered).unwrap_or_else(|e| panic!("{name}: {e}"));
    let stmts = tsql::statements(&toks).unwrap_or_else(|e| panic!("{name}: {e}"));
    (toks, stmts)
}

fn procedures() -> Vec<Batch> {
    let mut out = Vec::new();
    for r in ROUTINES.iter().filter(|r| r.kind == RoutineKind::Procedure) {
        // Read the way the migration script runs it: one string of an EXEC.
        let rendered = format!(
            "EXEC(N'{}')",
            r.sql.replace("{schema}", SCHEMA).replace('\'', "''")
        );
        for p in tsql::procedures(&rendered, SCHEMA).unwrap_or_else(|e| panic!("{}: {e}", r.file)) {
            let stmts = tsql::statements(&p.body).unwrap_or_else(|e| panic!("{}: {e}", p.name));
            let decl = queries::PROCEDURES
                .iter()
                .find(|d| d.name == p.name)
                .unwrap_or_else(|| {
                    panic!(
                        "procedure {} has no declaration in queries::PROCEDURES",
                        p.name
                    )
                });
            out.push(Batch {
                name: format!("procedure {}", p.name),
                // A procedure that hands its work to another runs no frame of its own.
                class: if decl.frame {
                    Class::Transition
                } else {
                    Class::Committed
                },
                reads: decl.reads,
                stmts,
                toks: p.body,
                procedure: true,
            });
        }
    }
    out
}

fn batches() -> Vec<Batch> {
    let mut out = Vec::new();
    for s in queries::ALL {
        let (toks, stmts) = parse(s.name, s.sql);
        out.push(Batch {
            name: s.name.to_string(),
            class: s.class,
            reads: s.reads,
            stmts,
            toks,
            procedure: false,
        });
    }
    let schema = SchemaName::parse(SCHEMA).unwrap();
    for (i, (reads, sql)) in job_lists::all_shapes(&schema).into_iter().enumerate() {
        let name = format!("job list shape {i}");
        let (toks, stmts) = parse(&name, &sql);
        out.push(Batch {
            name,
            class: Class::Committed,
            reads,
            stmts,
            toks,
            procedure: false,
        });
    }
    out.extend(procedures());
    out
}

/// Run a rule over every batch and fail once with every problem it found.
fn check(rule: &str, f: impl Fn(&Batch, &mut Vec<String>)) {
    let mut problems = Vec::new();
    for b in batches() {
        let mut found = Vec::new();
        f(&b, &mut found);
        problems.extend(found.into_iter().map(|p| format!("{}: {p}", b.name)));
    }
    assert!(
        problems.is_empty(),
        "rule \"{rule}\" broken {} time(s):\n  - {}",
        problems.len(),
        problems.join("\n  - ")
    );
}

/// The statements that may follow the one whose rows are read: the transaction frame.
fn is_tail(s: &Stmt) -> bool {
    s.in_catch
        || s.starts(&["COMMIT"])
        || s.starts(&["ROLLBACK"])
        || s.starts(&["THROW"])
        || s.starts(&["RETURN"])
        || s.starts(&["SET", "TRANSACTION", "ISOLATION", "LEVEL"])
}

/// What a batch sends to the client, statement by statement (procedures followed).
fn answers(b: &Batch, procs: &[Batch]) -> Vec<(usize, Answer)> {
    b.stmts
        .iter()
        .enumerate()
        .filter(|(_, s)| !s.in_catch)
        .map(|(i, s)| (i, tsql::answer(s, SCHEMA)))
        .filter(|(_, a)| *a != Answer::None)
        .collect::<Vec<_>>()
        .into_iter()
        .map(|(i, a)| match a {
            Answer::Procedure(name) => {
                match procs.iter().find(|p| p.name == format!("procedure {name}")) {
                    Some(p) => match p.reads {
                        Reads::Nothing => (i, Answer::None),
                        Reads::Rows(cols) => (
                            i,
                            Answer::Rows(cols.iter().map(|c| c.to_string()).collect()),
                        ),
                    },
                    None => (
                        i,
                        Answer::Unreadable(format!("EXEC of unknown procedure {name}")),
                    ),
                }
            }
            other => (i, other),
        })
        .filter(|(_, a)| *a != Answer::None)
        .collect()
}

fn rule_nocount_first(b: &Batch, problems: &mut Vec<String>) {
    if !b
        .stmts
        .first()
        .is_some_and(|s| s.starts(&["SET", "NOCOUNT", "ON"]))
    {
        problems.push(format!(
            "starts with {}",
            b.stmts.first().map(Stmt::text).unwrap_or_default()
        ));
    }
}

#[test]
fn every_batch_starts_with_set_nocount_on() {
    check("SET NOCOUNT ON first", rule_nocount_first);
}

/// 1a and 1b: what the caller reads is what the last statement sends, and nothing else
/// comes back — so there is never a second set to mistake for the first.
fn rule_reads(b: &Batch, procs: &[Batch], problems: &mut Vec<String>) {
    let sent = answers(b, procs);
    for (i, a) in &sent {
        if let Answer::Unreadable(why) = a {
            problems.push(format!("{why}: {}", b.stmts[*i].text()));
        }
    }
    match b.reads {
        Reads::Nothing => {
            for (i, a) in &sent {
                if matches!(a, Answer::Rows(_)) {
                    problems.push(format!(
                        "declared to send nothing, but sends rows: {}",
                        b.stmts[*i].text()
                    ));
                }
            }
        }
        Reads::Rows(cols) => {
            let want: Vec<String> = cols.iter().map(|c| c.to_string()).collect();
            match sent.as_slice() {
                [] => problems.push(format!(
                    "the caller reads ({}) but no statement sends a result set \
                         (an OUTPUT … INTO a table variable needs a SELECT from it)",
                    want.join(", ")
                )),
                [(i, a)] => {
                    let s = &b.stmts[*i];
                    if *a != Answer::Rows(want.clone()) {
                        problems.push(format!(
                            "sends {a:?}, the caller reads ({})",
                            want.join(", ")
                        ));
                    }
                    if s.conditional || s.in_loop {
                        problems.push(format!(
                            "the result set comes from a conditional statement: {}",
                            s.text()
                        ));
                    }
                    if let Some(after) = b.stmts[i + 1..].iter().find(|s| !is_tail(s)) {
                        problems.push(format!(
                            "the result set is not the last statement; {} follows",
                            after.text()
                        ));
                    }
                }
                many => problems.push(format!(
                    "{} statements send result sets; a caller would have to read them by \
                         position (send one set, with a discriminator column if need be): {}",
                    many.len(),
                    many.iter()
                        .map(|(i, _)| b.stmts[*i].text())
                        .collect::<Vec<_>>()
                        .join(" | ")
                )),
            }
        }
    }
}

#[test]
fn the_last_statement_sends_exactly_the_declared_columns() {
    let procs = procedures();
    check("reads match the declaration", |b, problems| {
        rule_reads(b, &procs, problems)
    });
}

/// Rows collected with OUTPUT … INTO are read back later: the server sends them nowhere else.
fn rule_output_into_read_back(b: &Batch, problems: &mut Vec<String>) {
    for (i, s) in b.stmts.iter().enumerate() {
        for target in tsql::output_clauses(s).into_iter().flatten() {
            if !matches!(target.kind, Kind::Var | Kind::Temp) {
                continue;
            }
            let reads_it = |other: &Stmt| {
                let t = &other.toks;
                let clearing = other.starts(&["DELETE", "FROM"])
                    && t.get(2).is_some_and(|x| x.text == target.text);
                !clearing
                    && t.windows(2)
                        .any(|w| (w[0].kw("FROM") || w[0].kw("JOIN")) && w[1].text == target.text)
            };
            let later = b.stmts[i + 1..].iter().any(reads_it)
                || (s.in_loop && b.stmts.iter().any(|o| o.in_loop && reads_it(o)));
            if !later {
                problems.push(format!(
                    "OUTPUT … INTO {} is never read back: {}",
                    target.text,
                    s.text()
                ));
            }
        }
    }
}

#[test]
fn output_into_is_read_back() {
    check("OUTPUT INTO is read back", rule_output_into_read_back);
}

fn dirty(toks: &[Tok]) -> bool {
    toks.iter()
        .any(|t| t.kw("NOLOCK") || t.kw("READUNCOMMITTED"))
        || toks
            .windows(2)
            .any(|w| w[0].kw("READ") && w[1].kw("UNCOMMITTED"))
}

fn rule_dirty_reads(b: &Batch, problems: &mut Vec<String>) {
    if b.class != Class::Telemetry && dirty(&b.toks) {
        problems.push(format!("{:?} statement reads uncommitted data", b.class));
    }
}

#[test]
fn dirty_reads_only_in_telemetry() {
    check("NOLOCK only in telemetry", rule_dirty_reads);
    let schema = SchemaName::parse(SCHEMA).unwrap();
    let script = super::migrations::script(&schema);
    assert!(
        !dirty(&tsql::lex(&script).unwrap()),
        "the migration script reads dirty data"
    );
}

/// Columns that filtered indexes filter on with `column = literal`, read from the migrations.
fn filtered_columns() -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for m in MIGRATIONS {
        let toks = tsql::lex(&m.sql.replace("{schema}", SCHEMA)).unwrap();
        for stmt in tsql::statements(&toks).unwrap() {
            if !(stmt.starts(&["CREATE"]) && stmt.toks.iter().any(|t| t.kw("INDEX"))) {
                continue;
            }
            let Some(w) = tsql::top_level(&stmt.toks)
                .into_iter()
                .find(|&i| stmt.toks[i].kw("WHERE"))
            else {
                continue;
            };
            for x in stmt.toks[w..].windows(3) {
                if x[0].kind == Kind::Ident && x[1].p("=") && x[2].kind == Kind::Num {
                    out.insert(x[0].text.to_ascii_lowercase());
                }
            }
        }
    }
    out
}

/// Filtered indexes are matched only by literal predicates: `status = 1` can use the
/// fetched-only index, `status IN (1, 2)` or `status = @s` cannot.
fn rule_filtered_literals(b: &Batch, columns: &BTreeSet<String>, problems: &mut Vec<String>) {
    for s in &b.stmts {
        let t = &s.toks;
        // The targets of an UPDATE's SET list are assigned, not compared (`SET x.status = 1`);
        // only the target itself: a subquery in the value is checked like any other.
        let mut targets = BTreeSet::new();
        if let Some((v, at)) = tsql::verb(s)
            && v == "UPDATE"
        {
            let top = tsql::top_level(t);
            if let Some(st) = top.iter().copied().find(|&i| i > at && t[i].kw("SET")) {
                let end = top
                    .iter()
                    .copied()
                    .find(|&i| i > st && (t[i].kw("FROM") || t[i].kw("WHERE") || t[i].kw("OUTPUT")))
                    .unwrap_or(t.len());
                for &i in top.iter().filter(|&&i| i > st && i < end) {
                    if t[i].p("=") {
                        targets.insert(i - 1);
                    }
                }
            }
        }
        for (i, tok) in t.iter().enumerate() {
            let is_column = tok
                .name()
                .is_some_and(|n| columns.contains(&n.to_ascii_lowercase()))
                && !t.get(i + 1).is_some_and(|n| n.p("."));
            if !is_column || targets.contains(&i) {
                continue;
            }
            let Some(op) = t.get(i + 1) else { continue };
            if op.kw("IN") {
                problems.push(format!(
                    "{} IN (…) matches no filtered index: {}",
                    tok.text,
                    s.text()
                ));
            } else if ["=", "<>", "!=", "<", ">", "<=", ">="]
                .iter()
                .any(|o| op.p(o))
                && !t.get(i + 2).is_some_and(|v| v.kind == Kind::Num)
            {
                problems.push(format!(
                    "{} {} {} is not a literal: {}",
                    tok.text,
                    op.text,
                    t.get(i + 2).map(|v| v.text.clone()).unwrap_or_default(),
                    s.text()
                ));
            }
        }
    }
}

#[test]
fn filtered_index_predicates_are_literals() {
    let columns = filtered_columns();
    assert!(
        columns.contains("status") && columns.contains("paused"),
        "{columns:?}"
    );
    check("filtered-index predicates are literals", |b, problems| {
        rule_filtered_literals(b, &columns, problems)
    });
}

const LOCKING_HINTS: &[&str] = &[
    "UPDLOCK",
    "XLOCK",
    "HOLDLOCK",
    "SERIALIZABLE",
    "REPEATABLEREAD",
    "TABLOCK",
    "TABLOCKX",
];

/// A range lock is taken only to insert behind it: HOLDLOCK comes with UPDLOCK (a shared
/// range lock that is later converted is the classic conversion deadlock), and on the hot
/// table it is a seek (FORCESEEK), so it never covers more than the key it guards.
fn rule_range_locks(b: &Batch, problems: &mut Vec<String>) {
    for s in &b.stmts {
        for r in tsql::table_refs(&s.toks, SCHEMA) {
            let range = r.hints.contains("HOLDLOCK") || r.hints.contains("SERIALIZABLE");
            if range && !(r.hints.contains("UPDLOCK") || r.hints.contains("XLOCK")) {
                problems.push(format!(
                    "{} is range-locked without UPDLOCK: {}",
                    r.name,
                    s.text()
                ));
            }
            if range && r.name == "jobs_hot" && !r.hints.contains("FORCESEEK") {
                problems.push(format!(
                    "a range lock on jobs_hot without FORCESEEK: {}",
                    s.text()
                ));
            }
        }
    }
}

#[test]
fn range_locks_are_update_locks_on_seeks() {
    check(
        "HOLDLOCK with UPDLOCK, a seek on jobs_hot",
        rule_range_locks,
    );
}

/// An `UPDATE` or `DELETE` that touches a schema table joins with commas, never `JOIN`:
/// Babelfish (README, SQL Server) drops a target row from `UPDATE … FROM … JOIN` when another
/// session changed it while this one waited for its lock (a heartbeat racing a completion).
/// SQL Server plans both forms alike. Joins inside a derived table or a subquery are reads,
/// and free.
fn rule_writes_join_with_commas(b: &Batch, problems: &mut Vec<String>) {
    for s in &b.stmts {
        if !(s.starts(&["UPDATE"]) || s.starts(&["DELETE"])) {
            continue;
        }
        let mut depth = 0usize;
        let (mut names_schema_table, mut joins) = (false, false);
        for (i, t) in s.toks.iter().enumerate() {
            if t.p("(") {
                depth += 1;
            } else if t.p(")") {
                depth = depth.saturating_sub(1);
            } else if depth == 0 {
                joins |= t.kw("JOIN");
                names_schema_table |= t.kind == Kind::Ident
                    && t.text == SCHEMA
                    && s.toks.get(i + 1).is_some_and(|d| d.p("."));
            }
        }
        if names_schema_table && joins {
            problems.push(format!("writes through a JOIN: {}", s.text()));
        }
    }
}

#[test]
fn writes_join_with_commas() {
    check(
        "an UPDATE or DELETE of a schema table joins with commas",
        rule_writes_join_with_commas,
    );
}

/// The table hints SQL Server takes on the target of an `UPDATE` or `DELETE`
/// (`<table_hint_limited>`): `FORCESEEK`, `INDEX` and the like belong to a table source.
const TARGET_HINTS: &[&str] = &[
    "HOLDLOCK",
    "NOWAIT",
    "PAGLOCK",
    "READCOMMITTED",
    "READCOMMITTEDLOCK",
    "READPAST",
    "REPEATABLEREAD",
    "ROWLOCK",
    "SERIALIZABLE",
    "TABLOCK",
    "TABLOCKX",
    "UPDLOCK",
    "XLOCK",
];

/// An `UPDATE` or `DELETE` of a schema table with an `OUTPUT` clause names the table as its
/// target — `UPDATE [s].[t] … OUTPUT … FROM <the other sources> WHERE <their link to [s].[t]>`
/// — never an alias of a `FROM` entry. Babelfish (README, SQL Server) runs `UPDATE h … OUTPUT …
/// FROM [s].[t] AS h, …` as a join of the table with itself: the statement reads table × rows
/// (a 1,000-id mark_processing of a 10,000-row table took 9 s), `TOP (n)` counts joined rows
/// and moves fewer than n, and through a `JOIN` a row another session changed meanwhile is
/// dropped. A named target takes only the hints SQL Server allows there.
fn rule_outputs_name_their_table(b: &Batch, problems: &mut Vec<String>) {
    for s in &b.stmts {
        if !(s.starts(&["UPDATE"]) || s.starts(&["DELETE"])) {
            continue;
        }
        if let Some(target) = tsql::named_target(s, SCHEMA) {
            for hint in target
                .hints
                .iter()
                .filter(|h| !TARGET_HINTS.contains(&h.as_str()))
            {
                problems.push(format!(
                    "{hint} on the target {} (SQL Server allows it on a table source only): {}",
                    target.name,
                    s.text()
                ));
            }
        } else if matches!(tsql::dml_target(s, SCHEMA), Some(Target::Table(_)))
            && !tsql::output_clauses(s).is_empty()
        {
            problems.push(format!("writes through an alias with OUTPUT: {}", s.text()));
        }
    }
}

#[test]
fn writes_with_output_name_their_table() {
    check(
        "an UPDATE or DELETE with OUTPUT names its schema table, not an alias",
        rule_outputs_name_their_table,
    );
}

/// The lock order every transition keeps (README, "Deadlocks"): queues, then jobs (hot,
/// archive, DLQ) with the batch rows of moved members, then queue counters, then metric rows,
/// then error groups. A batch row ranks with the jobs: a move locks it after its members, and
/// the only job rows written after it are the callbacks it fires (new rows nobody else holds).
fn lock_rank(table: &str) -> Option<u8> {
    match table {
        "queues" => Some(0),
        "jobs_hot" | "jobs_archive" | "jobs_dlq" | "batches" => Some(1),
        "queue_counters" | "queue_counter_slots" => Some(2),
        "metric_buckets" | "metric_slots" | "run_time_slots" => Some(3),
        "error_groups" | "error_group_slots" | "error_fingerprint_slots" => Some(4),
        _ => None,
    }
}

/// Tables a statement locks: what it writes, and what it reads under a locking hint.
fn locked_tables(s: &Stmt) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(Target::Table(t)) = tsql::dml_target(s, SCHEMA) {
        out.push(t);
    }
    for r in tsql::table_refs(&s.toks, SCHEMA) {
        if LOCKING_HINTS.iter().any(|h| r.hints.contains(*h)) {
            out.push(r.name);
        }
    }
    out
}

fn rule_lock_order(b: &Batch, problems: &mut Vec<String>) {
    let mut highest: Option<(u8, String)> = None;
    let mut loop_ranks: BTreeMap<u8, String> = BTreeMap::new();
    for s in b.stmts.iter().filter(|s| !s.in_catch) {
        if !s.in_loop && loop_ranks.len() > 1 {
            problems.push(format!(
                "one loop locks {:?}; its next pass would lock them out of order",
                loop_ranks.values().collect::<Vec<_>>()
            ));
        }
        if !s.in_loop {
            loop_ranks.clear();
        }
        for table in locked_tables(s) {
            let Some(rank) = lock_rank(&table) else {
                continue;
            };
            if let Some((top, top_table)) = &highest
                && rank < *top
            {
                problems.push(format!("locks {table} after {top_table}: {}", s.text()));
            }
            if highest.as_ref().is_none_or(|(top, _)| rank > *top) {
                highest = Some((rank, table.clone()));
            }
            if s.in_loop {
                loop_ranks.insert(rank, table);
            }
        }
    }
    if loop_ranks.len() > 1 {
        problems.push(format!(
            "one loop locks {:?}",
            loop_ranks.values().collect::<Vec<_>>()
        ));
    }
}

#[test]
fn locks_are_taken_in_one_order() {
    check(
        "lock order queues → jobs → counters → metrics → error groups",
        rule_lock_order,
    );
}

fn rule_transaction_frame(b: &Batch, problems: &mut Vec<String>) {
    if b.toks.iter().any(|t| t.kw("MERGE")) {
        problems.push("uses MERGE".into());
    }
    if b.toks
        .iter()
        .any(|t| t.kw("GETDATE") || t.kw("GETUTCDATE") || t.kw("CURRENT_TIMESTAMP"))
    {
        problems.push("reads a clock other than SYSUTCDATETIME()".into());
    }
    // A batch that hands its work to a procedure: the procedure runs the frame.
    let delegates = b
        .stmts
        .iter()
        .any(|s| matches!(tsql::answer(s, SCHEMA), Answer::Procedure(_)));
    if b.class != Class::Transition || delegates {
        return;
    }
    let has = |words: &[&str]| b.stmts.iter().any(|s| s.starts(words));
    if !has(&["SET", "XACT_ABORT", "ON"]) {
        problems.push("no SET XACT_ABORT ON".into());
    }
    if !has(&["BEGIN", "TRANSACTION"]) {
        problems.push("no BEGIN TRANSACTION".into());
    }
    if !b
        .stmts
        .iter()
        .any(|s| s.in_catch && s.starts(&["ROLLBACK"]))
    {
        problems.push("the CATCH block does not roll back".into());
    }
    if !b
        .stmts
        .iter()
        .any(|s| s.in_catch && s.toks.len() == 1 && s.starts(&["THROW"]))
    {
        problems.push("the CATCH block does not re-throw the original error (THROW;)".into());
    }
    if b.procedure {
        // Inside a caller's transaction a procedure never commits or rolls back: it
        // begins, commits and rolls back only a transaction it opened itself.
        for s in &b.stmts {
            if (s.starts(&["COMMIT"])
                || s.starts(&["ROLLBACK"])
                || s.starts(&["BEGIN", "TRANSACTION"]))
                && !s.conditional
            {
                problems.push(format!("unconditional {} in a procedure", s.text()));
            }
        }
        if !b
            .toks
            .iter()
            .any(|t| t.kind == Kind::Var && t.text == "@@TRANCOUNT")
        {
            problems.push("never looks at @@TRANCOUNT".into());
        }
    }
}

#[test]
fn transitions_are_explicit_transactions_and_never_merge() {
    check("transaction frame, no MERGE", rule_transaction_frame);
}

fn rule_schema_qualified(b: &Batch, problems: &mut Vec<String>) {
    for (i, t) in b.toks.iter().enumerate() {
        if t.kind == Kind::Ident
            && b.toks.get(i + 1).is_some_and(|d| d.p("."))
            && b.toks.get(i + 2).is_some_and(|n| n.kind == Kind::Ident)
            && t.text != SCHEMA
            && !(i > 0 && b.toks[i - 1].p("."))
        {
            problems.push(format!("names [{}].[{}]", t.text, b.toks[i + 2].text));
        }
    }
}

#[test]
fn every_object_is_schema_qualified() {
    check("objects in the configured schema", rule_schema_qualified);
}

/// Every variable a batch uses is declared, and once: T-SQL refuses the whole batch otherwise
/// (error 137 "must declare the scalar variable", error 134 "already declared"), and the
/// fragments shared between statements make both easy to get wrong. Procedure bodies are
/// left out (their parameters are declared in the header); `@Pn` are the bound parameters, and
/// `@name =` after an EXEC names a procedure's parameter.
fn rule_variables_declared_once(b: &Batch, problems: &mut Vec<String>) {
    if b.procedure {
        return;
    }
    let mut declared: BTreeMap<String, usize> = BTreeMap::new();
    let mut used: BTreeSet<String> = BTreeSet::new();
    for s in &b.stmts {
        let t = &s.toks;
        if s.starts(&["DECLARE"]) {
            for i in tsql::top_level(t) {
                if t[i].kind == Kind::Var && (i == 1 || t[i - 1].p(",")) {
                    *declared.entry(t[i].text.clone()).or_default() += 1;
                }
            }
        }
        let exec_at = t.iter().position(|x| x.kw("EXEC") || x.kw("EXECUTE"));
        for (i, x) in t.iter().enumerate() {
            let parameter_name =
                exec_at.is_some_and(|e| i > e) && t.get(i + 1).is_some_and(|n| n.p("="));
            let bound = x
                .text
                .strip_prefix("@P")
                .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
            if x.kind == Kind::Var && !x.text.starts_with("@@") && !bound && !parameter_name {
                used.insert(x.text.clone());
            }
        }
    }
    for (name, times) in &declared {
        if *times > 1 {
            problems.push(format!("declares {name} {times} times"));
        }
    }
    for name in used.iter().filter(|n| !declared.contains_key(*n)) {
        problems.push(format!("uses {name} without declaring it"));
    }
}

#[test]
fn variables_are_declared_once_before_use() {
    check("variables declared once", rule_variables_declared_once);
}

fn rule_parameters(b: &Batch, problems: &mut Vec<String>) {
    if b.procedure {
        return;
    }
    let seen: BTreeSet<u32> = b
        .toks
        .iter()
        .filter(|t| t.kind == Kind::Var)
        .filter_map(|t| t.text.strip_prefix("@P").and_then(|n| n.parse().ok()))
        .collect();
    let expected: BTreeSet<u32> = (1..=seen.len() as u32).collect();
    if seen != expected {
        problems.push(format!("parameters {seen:?}"));
    }
}

#[test]
fn parameters_are_numbered_without_gaps() {
    check("@P1 … @Pn", rule_parameters);
}

/// The failure reasons' names, where T-SQL spells them (a continuation's payload carries its
/// parent's reason by name): every `CASE <x>.reason WHEN <code> THEN N'<name>' … END` must
/// map exactly `FailureReason::ALL`'s codes to their names, so the Rust enum stays the one
/// place a reason is defined.
fn rule_reason_names(b: &Batch, problems: &mut Vec<String>) {
    let expected: BTreeMap<i64, String> = FailureReason::ALL
        .iter()
        .map(|r| (r.code(), r.as_str().to_string()))
        .collect();
    let toks = &b.toks;
    for at in 0..toks.len() {
        let is_reason_case = toks[at].kw("CASE")
            && toks.get(at + 2).is_some_and(|t| t.p("."))
            && toks.get(at + 3).is_some_and(|t| t.kw("reason"));
        if !is_reason_case {
            continue;
        }
        let mut found = BTreeMap::new();
        let mut i = at + 4;
        while let [when, code, then, name, ..] = &toks[i..] {
            if !(when.kw("WHEN") && code.kind == Kind::Num && then.kw("THEN")) {
                break;
            }
            let Ok(code) = code.text.parse::<i64>() else {
                problems.push(format!("reason code {} is not a number", code.text));
                break;
            };
            if name.kind != Kind::Str {
                problems.push(format!(
                    "reason {code} is named by {:?}, not a literal",
                    name.text
                ));
                break;
            }
            found.insert(code, name.text.clone());
            i += 4;
        }
        if found != expected {
            problems.push(format!(
                "reason names {found:?} differ from FailureReason::ALL {expected:?}"
            ));
        }
    }
}

#[test]
fn reason_names_match_the_failure_reasons() {
    check("reason names as FailureReason", rule_reason_names);
    // The rule reads something: the continuation statements spell the names.
    let spelled = batches()
        .iter()
        .filter(|b| {
            b.toks
                .windows(4)
                .any(|w| w[0].kw("CASE") && w[2].p(".") && w[3].kw("reason"))
        })
        .count();
    assert!(spelled > 0, "no statement spells the reason names any more");
}

fn statement(name: &str) -> Batch {
    batches()
        .into_iter()
        .find(|b| b.name == name)
        .unwrap_or_else(|| panic!("no statement {name}"))
}

/// DESIGN §4: the claim skips rows other claimers hold, and (item 4) each of its reads of
/// the hot table is a seek, so future rows are never read.
#[test]
fn the_claim_skips_locked_rows_and_seeks() {
    let claim = statement("claim");
    let mut locked_read = false;
    for s in &claim.stmts {
        // The write names its target: rows the pick chose, by their clustered key.
        let reads_from = tsql::named_target(s, SCHEMA)
            .and_then(|_| tsql::target_position(s))
            .map_or(0, |at| at + 3);
        for r in tsql::table_refs(&s.toks[reads_from..], SCHEMA)
            .into_iter()
            .filter(|r| r.name == "jobs_hot")
        {
            assert!(
                r.hints.contains("FORCESEEK"),
                "claim reads jobs_hot without FORCESEEK: {}",
                s.text()
            );
            if r.hints.contains("UPDLOCK") {
                assert!(
                    r.hints.contains("READPAST") && r.hints.contains("ROWLOCK"),
                    "{}",
                    s.text()
                );
                locked_read = true;
            }
        }
    }
    assert!(
        locked_read,
        "the claim takes no UPDLOCK, READPAST read of jobs_hot"
    );
}

#[test]
fn the_rules_see_every_statement_shape_and_procedure() {
    let all = batches();
    let procs: Vec<&Batch> = all.iter().filter(|b| b.procedure).collect();
    let names: Vec<&str> = procs.iter().map(|b| b.name.as_str()).collect();
    // Each procedure is defined once, in migrations/sqlserver/routines/.
    assert_eq!(names, ["procedure enqueue_batch", "procedure enqueue"]);
    assert!(
        procs[0].stmts.len() > 30,
        "the enqueue_batch body was read whole"
    );
    assert!(procs[1].stmts.len() > 5, "the enqueue body was read whole");
    assert!(
        all.iter()
            .filter(|b| b.name.starts_with("job list"))
            .count()
            > 100
    );
    assert_eq!(
        all.iter()
            .filter(|b| !b.procedure && !b.name.starts_with("job list"))
            .count(),
        queries::ALL.len()
    );
    // The store's enqueue is answered by the procedure.
    let procs = procedures();
    let enqueue = statement("enqueue");
    let sent = answers(&enqueue, &procs);
    assert_eq!(sent.len(), 1);
    assert_eq!(
        sent[0].1,
        Answer::Rows(
            queries::ENQUEUE_COLUMNS
                .iter()
                .map(|c| c.to_string())
                .collect()
        )
    );
}

/// A batch the way the store sends one, for the fixtures below.
fn fixture(name: &str, class: Class, reads: Reads, sql: &str) -> Batch {
    let (toks, stmts) = parse(name, sql);
    Batch {
        name: name.to_string(),
        class,
        reads,
        stmts,
        toks,
        procedure: false,
    }
}

fn problems_of(rule: impl Fn(&Batch, &mut Vec<String>), b: &Batch) -> Vec<String> {
    let mut out = Vec::new();
    rule(b, &mut out);
    out
}

/// Each rule, on the T-SQL it exists to catch: the statements as they were when SQL Server
/// ran no job (issue 12), reduced to the lines that matter.
#[test]
fn each_rule_catches_the_trap_it_is_for() {
    let procs = procedures();
    let reads = |b: &Batch| problems_of(|b, p| rule_reads(b, &procs, p), b);

    // 1a: OUTPUT … INTO a table variable, never selected.
    let mark = fixture(
        "old mark_processing",
        Class::Transition,
        Reads::Rows(&["id"]),
        "SET NOCOUNT ON;
         SET XACT_ABORT ON;
         BEGIN TRY
         BEGIN TRANSACTION;
         DECLARE @started TABLE (id BINARY(16) NOT NULL PRIMARY KEY);
         UPDATE h SET h.status = 2, h.attempt = h.attempt + 1
         OUTPUT inserted.id INTO @started (id)
         FROM [deck].[jobs_hot] AS h WITH (ROWLOCK)
         JOIN (SELECT DISTINCT CONVERT(BINARY(16), [value], 2) AS id FROM OPENJSON(@P2)) AS i ON i.id = h.id
         WHERE h.status = 1 AND h.worker_id = @P1;
         COMMIT TRANSACTION;
         END TRY
         BEGIN CATCH
             IF @@TRANCOUNT > 0 ROLLBACK TRANSACTION;
             THROW;
         END CATCH;",
    );
    let found = reads(&mark);
    assert!(
        found
            .iter()
            .any(|p| p.contains("no statement sends a result set")),
        "{found:?}"
    );
    let found = problems_of(rule_output_into_read_back, &mark);
    assert!(
        found
            .iter()
            .any(|p| p.contains("@STARTED is never read back")),
        "{found:?}"
    );

    // 1b: one set per pillar, read by position.
    let get_job = fixture(
        "old get_job",
        Class::Committed,
        Reads::Rows(queries::ANY_JOB_COLUMNS),
        "SET NOCOUNT ON;
         DECLARE @id BINARY(16) = CONVERT(BINARY(16), @P1, 2);
         SELECT id, status FROM [deck].[jobs_hot] WHERE id = @id;
         SELECT id, result FROM [deck].[jobs_archive] WHERE id = @id;
         SELECT id, reason FROM [deck].[jobs_dlq] WHERE id = @id;",
    );
    let found = reads(&get_job);
    assert!(
        found
            .iter()
            .any(|p| p.contains("3 statements send result sets")),
        "{found:?}"
    );

    // 1b: a conditional set, and columns in another order than the caller reads.
    let versions = fixture(
        "old schema_versions",
        Class::Schema,
        Reads::Rows(&["version"]),
        "SET NOCOUNT ON;
         IF OBJECT_ID(N'[deck].[schema_version]', N'U') IS NULL
         BEGIN SELECT CAST(NULL AS INT) AS version WHERE 1 = 0; END
         ELSE
         BEGIN SELECT version FROM [deck].[schema_version] ORDER BY version; END",
    );
    assert!(
        reads(&versions).iter().any(|p| p.contains("2 statements")),
        "{:?}",
        reads(&versions)
    );
    let swapped = fixture(
        "swapped",
        Class::Committed,
        Reads::Rows(&["id", "created"]),
        "SET NOCOUNT ON; SELECT created, id FROM [deck].[t];",
    );
    assert!(
        reads(&swapped)
            .iter()
            .any(|p| p.contains("the caller reads (id, created)"))
    );
    let after = fixture(
        "rows then more work",
        Class::Committed,
        Reads::Rows(&["id"]),
        "SET NOCOUNT ON; SELECT id FROM [deck].[t]; UPDATE [deck].[t] SET a = 1;",
    );
    assert!(
        reads(&after)
            .iter()
            .any(|p| p.contains("not the last statement"))
    );
    let bare = fixture(
        "bare output",
        Class::Transition,
        Reads::Rows(&["id"]),
        "SET NOCOUNT ON; UPDATE [deck].[t] SET a = 1 OUTPUT inserted.id WHERE b = 2;",
    );
    assert!(
        reads(&bare)
            .iter()
            .any(|p| p.contains("OUTPUT without INTO"))
    );

    let no_nocount = fixture(
        "no nocount",
        Class::Committed,
        Reads::Nothing,
        "SELECT 1 AS x;",
    );
    assert_eq!(problems_of(rule_nocount_first, &no_nocount).len(), 1);

    // Item 3: the bulkhead's IN list, and a parameter where a literal must be.
    let columns = filtered_columns();
    let bulkhead = fixture(
        "old bulkhead",
        Class::Transition,
        Reads::Nothing,
        "SET NOCOUNT ON;
         UPDATE l SET l.slots = l.max_workers - (SELECT COUNT_BIG(*) FROM [deck].[jobs_hot] AS h
                                                 WHERE h.queue = l.queue AND h.status IN (1, 2))
         FROM @lanes AS l;
         SELECT COUNT_BIG(*) AS n FROM [deck].[jobs_hot] WHERE status = @P1;",
    );
    let found = problems_of(|b, p| rule_filtered_literals(b, &columns, p), &bulkhead);
    assert_eq!(found.len(), 2, "{found:?}");

    // Items 8 and 9: an idempotency range lock that may scan, and queues locked after jobs.
    let enqueue = fixture(
        "old enqueue",
        Class::Transition,
        Reads::Nothing,
        "SET NOCOUNT ON;
         UPDATE j SET j.outcome_id = h.id FROM @jobs AS j
         JOIN [deck].[jobs_hot] AS h WITH (UPDLOCK, HOLDLOCK) ON h.idempotency_key = j.idempotency_key;
         INSERT INTO [deck].[jobs_hot] (id) SELECT id FROM @jobs;
         INSERT INTO [deck].[queues] (name) SELECT name FROM @missing;
         SELECT 1 FROM [deck].[queues] AS q WITH (HOLDLOCK) WHERE q.name = N'x';",
    );
    let found = problems_of(rule_range_locks, &enqueue);
    assert!(
        found
            .iter()
            .any(|p| p.contains("jobs_hot without FORCESEEK")),
        "{found:?}"
    );
    assert!(
        found
            .iter()
            .any(|p| p.contains("queues is range-locked without UPDLOCK")),
        "{found:?}"
    );
    let found = problems_of(rule_lock_order, &enqueue);
    assert!(
        found
            .iter()
            .any(|p| p.contains("locks queues after jobs_hot")),
        "{found:?}"
    );
    let looped = fixture(
        "loop out of order",
        Class::Transition,
        Reads::Nothing,
        "SET NOCOUNT ON;
         WHILE @i < 2
         BEGIN
             UPDATE [deck].[jobs_hot] SET a = 1;
             UPDATE [deck].[queue_counter_slots] SET b = 1;
             SET @i += 1;
         END",
    );
    assert!(!problems_of(rule_lock_order, &looped).is_empty());

    let dirty = fixture(
        "dirty list",
        Class::Committed,
        Reads::Nothing,
        "SET NOCOUNT ON; SELECT a FROM [deck].[t] WITH (NOLOCK) -- NOLOCK in a comment is fine",
    );
    assert_eq!(problems_of(rule_dirty_reads, &dirty).len(), 1);
    let commented = fixture(
        "commented",
        Class::Committed,
        Reads::Nothing,
        "SET NOCOUNT ON; -- WITH (NOLOCK)\n/* READ UNCOMMITTED */ DECLARE @x INT = 1;",
    );
    assert!(problems_of(rule_dirty_reads, &commented).is_empty());

    let frameless = fixture(
        "frameless",
        Class::Transition,
        Reads::Nothing,
        "SET NOCOUNT ON; UPDATE [deck].[t] SET a = GETDATE();",
    );
    let found = problems_of(rule_transaction_frame, &frameless);
    assert!(found.len() >= 4, "{found:?}");
    let outside = fixture(
        "outside",
        Class::Committed,
        Reads::Nothing,
        "SET NOCOUNT ON; SELECT a FROM [dbo].[t];",
    );
    assert_eq!(problems_of(rule_schema_qualified, &outside).len(), 1);
    let gap = fixture(
        "gap",
        Class::Committed,
        Reads::Nothing,
        "SET NOCOUNT ON; DECLARE @a INT = @P1, @b INT = @P3;",
    );
    assert_eq!(problems_of(rule_parameters, &gap).len(), 1);
    // A write through a JOIN (the old mark_processing above) is found; the comma form, a join
    // inside a derived table and a write of a table variable are not.
    assert_eq!(problems_of(rule_writes_join_with_commas, &mark).len(), 1);
    let commas = fixture(
        "commas",
        Class::Committed,
        Reads::Nothing,
        "SET NOCOUNT ON;
         UPDATE h SET h.status = 2
         FROM [deck].[jobs_hot] AS h WITH (ROWLOCK),
              (SELECT m.id FROM @m AS m JOIN @c AS c ON c.id = m.id) AS i
         WHERE i.id = h.id;
         UPDATE l SET l.slots = 0 FROM @lanes AS l JOIN @limits AS m ON m.queue = l.queue;",
    );
    assert_eq!(
        problems_of(rule_writes_join_with_commas, &commas),
        Vec::<String>::new()
    );
    // The alias form with OUTPUT (the old mark_processing) is found, and so is a hint SQL
    // Server refuses on a named target; the named form and an alias write without OUTPUT
    // are not.
    assert_eq!(problems_of(rule_outputs_name_their_table, &mark).len(), 1);
    let named = fixture(
        "named",
        Class::Committed,
        Reads::Nothing,
        "SET NOCOUNT ON;
         UPDATE [deck].[jobs_hot] WITH (ROWLOCK) SET status = 2
         OUTPUT inserted.id INTO @m (id)
         FROM @ids AS i WHERE i.id = [deck].[jobs_hot].id;
         DELETE TOP (5) FROM [deck].[jobs_hot] WITH (ROWLOCK, READPAST)
         OUTPUT deleted.id INTO @m (id) WHERE status = 0;
         UPDATE q SET q.paused = 1 FROM [deck].[queues] AS q, @n AS n WHERE n.name = q.name;",
    );
    assert_eq!(
        problems_of(rule_outputs_name_their_table, &named),
        Vec::<String>::new()
    );
    let seek_on_target = fixture(
        "seek on target",
        Class::Committed,
        Reads::Nothing,
        "SET NOCOUNT ON;
         DELETE TOP (5) FROM [deck].[jobs_hot] WITH (ROWLOCK, READPAST, FORCESEEK)
         WHERE status = 0;",
    );
    assert_eq!(
        problems_of(rule_outputs_name_their_table, &seek_on_target).len(),
        1
    );
    let variables = fixture(
        "variables",
        Class::Committed,
        Reads::Nothing,
        "SET NOCOUNT ON;
         DECLARE @a INT = @P1, @t TABLE (x INT, y INT);
         DECLARE @a INT = 2;
         INSERT INTO @t (x, y) EXEC [deck].[p] @jobs = @a;
         SELECT @missing = x FROM @t WHERE y = @@ROWCOUNT;",
    );
    let found = problems_of(rule_variables_declared_once, &variables);
    assert_eq!(
        found,
        ["declares @A 2 times", "uses @MISSING without declaring it"],
        "{found:?}"
    );
}
