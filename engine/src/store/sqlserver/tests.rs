//! Policy tests over every statement of this store (DESIGN §4): they need no server.

use super::connection::SchemaName;
use super::job_lists;
use super::queries::{self, Class};
use crate::model::FailureReason;

fn words(sql: &str) -> String {
    sql.to_ascii_uppercase()
}

fn dirty_read(sql: &str) -> bool {
    let upper = words(sql);
    upper.contains("NOLOCK")
        || upper.contains("READ UNCOMMITTED")
        || upper.contains("READUNCOMMITTED")
}

#[test]
fn dirty_reads_only_in_telemetry() {
    for s in queries::ALL {
        if s.class != Class::Telemetry {
            assert!(
                !dirty_read(s.sql),
                "{} ({:?}) reads uncommitted data",
                s.name,
                s.class
            );
        }
    }
    let schema = SchemaName::parse("deck").unwrap();
    for sql in job_lists::all_shapes(&schema) {
        assert!(
            !dirty_read(&sql),
            "a job list reads uncommitted data:\n{sql}"
        );
    }
    assert!(!dirty_read(&super::migrations::script(&schema)));
    // And the telemetry class really is the one that uses them.
    for name in ["summary", "queue_stats", "throughput", "top_errors"] {
        let s = queries::ALL.iter().find(|s| s.name == name).unwrap();
        assert_eq!(s.class, Class::Telemetry);
        assert!(dirty_read(s.sql), "{name} should not block workers");
    }
}

#[test]
fn the_claim_skips_locked_rows_and_returns_what_it_claimed() {
    let claim = words(queries::CLAIM);
    for needle in [
        "UPDLOCK",
        "READPAST",
        "ROWLOCK",
        "OUTPUT INSERTED.",
        "SET XACT_ABORT ON",
    ] {
        assert!(claim.contains(needle), "claim lacks {needle}");
    }
    // Paused queues, future schedules and expired jobs are never claimed.
    assert!(claim.contains("Q.PAUSED = 0"));
    assert!(claim.contains("H.SCHEDULED_AT <= @NOW"));
    assert!(claim.contains("H.EXPIRES_AT > @NOW"));
    assert!(
        claim.contains("H.STATUS IN (1, 2)"),
        "counts fetched + processing"
    );
    assert!(claim.contains("SYSUTCDATETIME()"));
}

#[test]
fn transitions_are_explicit_transactions_and_never_merge() {
    for s in queries::ALL {
        let upper = words(s.sql);
        let merges = upper
            .split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
            .any(|w| w == "MERGE");
        assert!(!merges, "{} uses MERGE", s.name);
        if s.class == Class::Transition {
            assert!(upper.contains("SET XACT_ABORT ON"), "{}", s.name);
            assert!(upper.contains("BEGIN TRANSACTION"), "{}", s.name);
            assert!(upper.contains("ROLLBACK TRANSACTION"), "{}", s.name);
            assert!(
                upper.contains("THROW;"),
                "{} must re-raise the original error",
                s.name
            );
            assert!(
                !upper.contains("GETDATE()") && !upper.contains("GETUTCDATE()"),
                "{}",
                s.name
            );
        }
    }
}

#[test]
fn worker_paths_check_ownership() {
    for (name, sql) in [
        ("mark_processing", queries::MARK_PROCESSING),
        ("heartbeat", queries::HEARTBEAT),
        ("release", queries::RELEASE),
        ("complete", queries::COMPLETE),
    ] {
        assert!(
            sql.contains("worker_id = @worker"),
            "{name} lacks the ownership predicate"
        );
    }
    assert!(queries::MARK_PROCESSING.contains("h.status = 1"));
    assert!(queries::COMPLETE.contains("h.status = 2"));
}

#[test]
fn moves_delete_first_and_keep_the_books_in_the_same_transaction() {
    for (name, sql) in [
        ("complete", queries::COMPLETE),
        ("cancel", queries::CANCEL),
        ("resurrect", queries::RESURRECT),
        ("rescue_zombies", queries::RESCUE_ZOMBIES),
        ("rescue_expired", queries::RESCUE_EXPIRED),
    ] {
        let delete = sql
            .find("INTO @moved")
            .unwrap_or_else(|| panic!("{name}: no OUTPUT INTO"));
        let insert = sql[delete..]
            .find("INSERT INTO [{schema}].[jobs_")
            .unwrap_or_else(|| panic!("{name}: no insert into the target"));
        assert!(insert > 0);
        for book in ["[queue_counters]", "[metric_buckets]", "[error_groups]"] {
            assert!(sql.contains(book), "{name} does not update {book}");
        }
        assert!(sql.contains("UPDLOCK, HOLDLOCK"), "{name}");
        let commit = sql.rfind("COMMIT TRANSACTION").unwrap();
        assert!(sql.rfind("[queue_counters]").unwrap() < commit, "{name}");
    }
    for (name, sql) in [
        ("complete", queries::COMPLETE),
        ("cancel", queries::CANCEL),
        ("rescue_zombies", queries::RESCUE_ZOMBIES),
        ("rescue_expired", queries::RESCUE_EXPIRED),
    ] {
        assert!(
            sql.contains("JSON_VALUE(f.continuation, '$.trigger')"),
            "{name} enqueues continuations"
        );
    }
}

#[test]
fn output_always_goes_into_a_table_variable() {
    // A bare OUTPUT (to the client) fails with error 334 once the table has a trigger.
    for s in queries::ALL {
        let upper = words(s.sql);
        for (i, _) in upper.match_indices("OUTPUT ") {
            let clause: String = upper[i..].chars().take_while(|c| *c != ';').collect();
            let next_from = clause.find("\nFROM").unwrap_or(clause.len());
            assert!(
                clause[..next_from].contains(" INTO @"),
                "{}: OUTPUT without INTO: {}",
                s.name,
                &clause[..next_from.min(120)]
            );
        }
    }
}

#[test]
fn every_object_is_schema_qualified() {
    for s in queries::ALL {
        let qualified = s.sql.matches("[{schema}].[").count();
        let any = s.sql.matches("].[").count();
        assert_eq!(
            qualified, any,
            "{} names an object outside the configured schema",
            s.name
        );
        let rendered = s.sql.replace("{schema}", "deck");
        assert!(!rendered.contains("{schema}"));
    }
}

#[test]
fn continuation_reason_names_match_the_model() {
    for reason in FailureReason::ALL {
        let arm = format!("WHEN {} THEN N'{}'", reason.code(), reason.as_str());
        assert!(queries::COMPLETE.contains(&arm), "missing {arm}");
    }
}

#[test]
fn parameters_are_numbered_without_gaps() {
    for s in queries::ALL {
        let mut seen = std::collections::BTreeSet::new();
        let bytes = s.sql.as_bytes();
        for (i, _) in s.sql.match_indices("@P") {
            let digits: String = bytes[i + 2..]
                .iter()
                .take_while(|b| b.is_ascii_digit())
                .map(|b| *b as char)
                .collect();
            if let Ok(n) = digits.parse::<u32>() {
                seen.insert(n);
            }
        }
        let expected: std::collections::BTreeSet<u32> = (1..=seen.len() as u32).collect();
        assert_eq!(seen, expected, "{} has gaps in its parameters", s.name);
    }
}

#[test]
#[ignore = "prints every statement for review: cargo test -p deck-engine print_every_statement -- --ignored --nocapture"]
fn print_every_statement() {
    for s in queries::ALL {
        println!(
            "-- ==== {} ({:?})\n{}\n",
            s.name,
            s.class,
            s.sql.replace("{schema}", "deck")
        );
    }
}
