//! Policy tests over particular statements of this store (DESIGN §4); the rules every
//! statement is held to are in `statement_rules`. None needs a server.

use super::queries::{self, Class, MAX_ROWS_PER_STATEMENT};
use crate::model::FailureReason;

#[test]
fn the_telemetry_class_is_the_one_that_reads_dirty() {
    for name in ["summary", "queue_stats", "throughput", "top_errors"] {
        let s = queries::ALL.iter().find(|s| s.name == name).unwrap();
        assert_eq!(s.class, Class::Telemetry);
        assert!(s.sql.contains("NOLOCK"), "{name} should not block workers");
    }
}

/// Item 7: dashboards read the maintained counters; the hot table only through bounded
/// seeks of the due index, never a scan or a GROUP BY of it.
#[test]
fn dashboards_read_counters_not_the_hot_table() {
    for s in [&queries::SUMMARY, &queries::QUEUE_STATS] {
        assert!(s.sql.contains("[queue_counter_slots]"), "{}", s.name);
        for (i, _) in s.sql.match_indices("[jobs_hot]") {
            let before = &s.sql[..i];
            let subquery = &before[before.rfind("SELECT").unwrap_or(0)..];
            assert!(
                subquery.contains("SELECT TOP (100000)"),
                "{} reads jobs_hot without a bound: {subquery}",
                s.name
            );
        }
        assert!(!s.sql.contains("GROUP BY queue\n"), "{}", s.name);
    }
}

#[test]
fn worker_paths_check_ownership() {
    for s in [
        &queries::MARK_PROCESSING,
        &queries::HEARTBEAT,
        &queries::RELEASE,
        &queries::COMPLETE,
    ] {
        assert!(
            s.sql.contains("[{schema}].[jobs_hot].worker_id = @worker"),
            "{} lacks the ownership predicate",
            s.name
        );
    }
    assert!(
        queries::MARK_PROCESSING
            .sql
            .contains("[{schema}].[jobs_hot].status = 1")
    );
    assert!(
        queries::COMPLETE
            .sql
            .contains("[{schema}].[jobs_hot].status = 2")
    );
}

/// Item 2: the worker paths take id lists of any length (5,000 in the conformance suite) and
/// cut them into slices of at most MAX_ROWS_PER_STATEMENT rows per statement.
#[test]
fn id_lists_are_sliced_below_the_escalation_threshold() {
    const { assert!(MAX_ROWS_PER_STATEMENT <= 1_000) };
    let slice = format!("/ {MAX_ROWS_PER_STATEMENT}");
    for s in [
        &queries::MARK_PROCESSING,
        &queries::HEARTBEAT,
        &queries::RELEASE,
        &queries::COMPLETE,
    ] {
        assert!(s.sql.contains(&slice), "{} does not slice its ids", s.name);
        assert!(s.sql.contains("WHILE @slice <= @slices"), "{}", s.name);
        assert!(
            s.sql.contains("slice = @slice"),
            "{} does not touch one slice per statement",
            s.name
        );
    }
    let procedure = super::routines::ROUTINES
        .iter()
        .find(|r| r.name == "enqueue_batch")
        .unwrap()
        .sql;
    assert!(procedure.contains(&format!("i.ord / {MAX_ROWS_PER_STATEMENT}")));
    assert!(procedure.contains("WHERE outcome_id IS NULL AND slice = @slice"));
}

#[test]
fn moves_delete_first_and_keep_the_books_in_the_same_transaction() {
    for s in [
        &queries::COMPLETE,
        &queries::CANCEL,
        &queries::RESCUE_ZOMBIES,
        &queries::RESCUE_EXPIRED,
    ] {
        let delete = s
            .sql
            .find("INTO @moved")
            .unwrap_or_else(|| panic!("{}: no OUTPUT INTO", s.name));
        assert!(
            s.sql[delete..].contains("INSERT INTO [{schema}].[jobs_"),
            "{}: no insert into the target",
            s.name
        );
        for book in [
            "[queue_counter_slots]",
            "[metric_slots]",
            "[error_fingerprint_slots]",
        ] {
            assert!(s.sql.contains(book), "{} does not update {book}", s.name);
        }
        let commit = s.sql.rfind("COMMIT TRANSACTION").unwrap();
        assert!(
            s.sql.rfind("[queue_counter_slots]").unwrap() < commit,
            "{}",
            s.name
        );
        assert!(
            s.sql.contains("JSON_VALUE(f.continuation, '$.trigger')"),
            "{} enqueues continuations",
            s.name
        );
    }
    // Every hot-state change moves the counters dashboards read.
    for s in [
        &queries::CLAIM,
        &queries::MARK_PROCESSING,
        &queries::RELEASE,
        &queries::PURGE_HOT,
        &queries::RESCUE_FETCHED,
        &queries::RESURRECT,
        &queries::EDIT_JOB,
    ] {
        assert!(s.sql.contains("[queue_counter_slots]"), "{}", s.name);
    }
    // Counter rows are striped per session: one hot row per queue no longer serialises every
    // completer of that queue.
    assert!(queries::COMPLETE.sql.contains("@@SPID % 16"));
    assert!(queries::COMPLETE.sql.contains("c.slot = @slot"));
}

#[test]
fn continuation_reason_names_match_the_model() {
    for reason in FailureReason::ALL {
        let arm = format!("WHEN {} THEN N'{}'", reason.code(), reason.as_str());
        assert!(queries::COMPLETE.sql.contains(&arm), "missing {arm}");
    }
}

/// 1b: no caller reads result sets by position. Reading an answer is `reader`'s job alone:
/// it walks the stream's metadata and holds it to the statement's declaration. The pool's
/// session setup and liveness probe drain answers they do not read.
#[test]
fn only_the_reader_reads_answers() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/src/store/sqlserver");
    let mut offenders = Vec::new();
    let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    for path in files
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
    {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if [
            "reader.rs",
            "pool.rs",
            "tests.rs",
            "tsql.rs",
            "statement_rules.rs",
        ]
        .contains(&name.as_str())
        {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.trim_start();
            if code.starts_with("//") {
                continue;
            }
            for call in [
                "into_results(",
                "into_first_result(",
                "into_row(",
                "into_row_stream(",
            ] {
                if code.contains(call) {
                    offenders.push(format!("{name}:{}: {}", n + 1, code));
                }
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "answers read outside reader.rs:\n{}",
        offenders.join("\n")
    );
}

#[test]
#[ignore = "prints every statement for review: cargo test -p deck-engine print_every_statement -- --ignored --nocapture"]
fn print_every_statement() {
    for s in queries::ALL {
        println!(
            "-- ==== {} ({:?}, reads {:?})\n{}\n",
            s.name,
            s.class,
            s.reads,
            s.sql.replace("{schema}", "deck")
        );
    }
}

/// Every statement that writes a dead letter stamps its fingerprint and counts it into its
/// group by that fingerprint; every statement that removes one counts it out by the row's.
#[test]
fn dead_letters_carry_their_fingerprint_into_and_out_of_the_groups() {
    for s in [
        &queries::COMPLETE,
        &queries::CANCEL,
        &queries::RESCUE_ZOMBIES,
        &queries::RESCUE_EXPIRED,
    ] {
        let insert = s.sql.find("INSERT INTO [{schema}].[jobs_dlq]").unwrap();
        assert!(
            s.sql[insert..].contains("duration_ms, fingerprint)"),
            "{}: the DLQ row gets a fingerprint",
            s.name
        );
        assert!(
            s.sql.contains("FROM [{schema}].[fingerprint]("),
            "{}: finished in SQL like FingerprintHead::for_job_type",
            s.name
        );
        assert!(s.sql.contains("[error_fingerprint_slots]"), "{}", s.name);
    }
    for s in [
        &queries::RESURRECT,
        &queries::PURGE_DLQ,
        &queries::PRUNE_DLQ,
    ] {
        assert!(
            s.sql.contains("deleted.fingerprint"),
            "{}: counts out by the row's fingerprint",
            s.name
        );
        assert!(s.sql.contains("[error_fingerprint_slots]"), "{}", s.name);
    }
    for s in queries::ALL {
        assert!(
            !s.sql.contains("message_prefix") && !s.sql.contains("[error_group_slots]"),
            "{} still groups by prefix",
            s.name
        );
    }
}

/// Every final move of a batch member counts it into its batch in the move's transaction,
/// after the jobs and before the books (lock order), and a move of jobs that are no batch's
/// members skips the batch table (`IF EXISTS` over the move's own OUTPUT rows).
#[test]
fn final_moves_count_batch_members_in_their_transaction() {
    for s in [
        &queries::COMPLETE,
        &queries::CANCEL,
        &queries::RESCUE_ZOMBIES,
        &queries::RESCUE_EXPIRED,
        &queries::RESURRECT,
        &queries::PURGE_HOT,
    ] {
        let filled = s
            .sql
            .find("INSERT INTO @batch_delta")
            .unwrap_or_else(|| panic!("{}: no batch deltas", s.name));
        let guard = s
            .sql
            .find("IF EXISTS (SELECT 1 FROM @batch_delta)")
            .unwrap_or_else(|| panic!("{}: batches are touched unconditionally", s.name));
        let batches = s.sql.find("[{schema}].[batches]").unwrap();
        let books = s.sql.find("[queue_counter_slots]").unwrap();
        assert!(
            filled < guard && guard < batches && batches < books,
            "{}",
            s.name
        );
        assert!(
            s.sql[batches..books].contains("IS NULL;"),
            "{}: each callback's job id is set under an IS NULL guard",
            s.name
        );
    }
    // Retention and purges of finished rows leave the counts as they are (as on SQLite).
    for s in [
        &queries::PURGE_ARCHIVE,
        &queries::PURGE_DLQ,
        &queries::PRUNE_ARCHIVE,
        &queries::PRUNE_DLQ,
    ] {
        assert!(!s.sql.contains("[batches]"), "{}", s.name);
    }
}

/// Every write of a job into a pillar carries its batch and trace context along.
#[test]
fn moves_carry_the_batch_and_the_trace_context() {
    let mut writes = 0;
    for s in queries::ALL {
        for table in ["[jobs_archive]", "[jobs_dlq]"] {
            let insert = format!("INSERT INTO [{{schema}}].{table}");
            for (at, _) in s.sql.match_indices(&insert) {
                let columns = s.sql[at..at + s.sql[at..].find(')').unwrap()]
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" ");
                assert!(
                    columns.contains("batch_id, trace_context"),
                    "{}: {columns}",
                    s.name
                );
                writes += 1;
            }
        }
    }
    // Archive and DLQ from complete, the DLQ from the store-written deaths.
    assert_eq!(writes, 5);
    let resurrect = queries::RESURRECT.sql;
    let insert = resurrect.find("INSERT INTO [{schema}].[jobs_hot]").unwrap();
    assert!(resurrect[insert..].contains("original_payload, batch_id, trace_context)"));
    assert!(resurrect[insert..].contains("m.batch_id, m.trace_context"));
}

/// Writes every fixed statement, rendered for schema `deck`, to `$DECK_DUMP_SQL/<name>.sql`,
/// to run one by hand against a server (`cargo test -p deck-engine --lib dump_statements --
/// --ignored`). Line numbers in a server's error message are lines of these files.
#[test]
#[ignore = "a tool: set DECK_DUMP_SQL to a directory"]
fn dump_statements() {
    let Some(dir) = std::env::var_os("DECK_DUMP_SQL") else {
        return;
    };
    let dir = std::path::PathBuf::from(dir);
    std::fs::create_dir_all(&dir).unwrap();
    for s in queries::ALL {
        std::fs::write(
            dir.join(format!("{}.sql", s.name)),
            s.sql.replace("{schema}", "deck"),
        )
        .unwrap();
    }
}
