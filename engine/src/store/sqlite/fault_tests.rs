//! The store under storage faults, on real files: writes that fail the way they do on a
//! full disk make it unhealthy until one succeeds; a database file deleted or replaced under
//! it makes it refuse all work with an error that says what to do.

use std::path::{Path, PathBuf};

use super::*;

async fn open_at(path: &Path) -> SqliteStore {
    SqliteStore::open(path.to_str().unwrap(), &StoreOptions::default())
        .await
        .unwrap()
}

fn db_path(dir: &tempfile::TempDir) -> PathBuf {
    dir.path().join("deck.db")
}

/// A payload far larger than the few pages the tests let the database grow by.
fn big_job() -> EnqueueRequest {
    let payload = format!(r#"{{"blob":"{}"}}"#, "x".repeat(256 * 1024));
    EnqueueRequest::new("q", "t", payload)
}

fn small_job() -> EnqueueRequest {
    EnqueueRequest::new("q", "t", r#"{"n":1}"#)
}

#[tokio::test]
async fn writes_failing_on_a_full_database_mark_writes_failing_until_one_succeeds() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_at(&db_path(&dir)).await;
    store.enqueue(small_job()).await.unwrap();
    let healthy = store.health();
    assert!(healthy.writes_ok(), "{healthy:?}");
    assert!(healthy.last_write_at.is_some(), "the enqueue was a write");

    store.limit_growth_for_tests(Some(2)).await.unwrap();
    let err = store.enqueue(big_job()).await.unwrap_err();
    assert!(
        matches!(err, StoreError::Storage { .. }),
        "a full database is a storage fault, not a failed request: {err:?}"
    );
    let message = err.to_string();
    assert!(message.contains("database or disk is full"), "{message}");
    assert!(
        message.contains("free space"),
        "the help says what to do: {message}"
    );

    let failing = store.health();
    assert!(!failing.writes_ok());
    let failure = failing.write_failure.expect("the failure is reported");
    assert!(
        failure.error.contains("database or disk is full"),
        "{failure:?}"
    );
    // Reads still answer: the database is there, it just cannot grow.
    store.ping().await.unwrap();
    assert!(!store.health().writes_ok(), "a read does not clear it");

    store.limit_growth_for_tests(None).await.unwrap();
    assert!(
        !store.health().writes_ok(),
        "a write that changed nothing (the limit itself) does not clear it"
    );
    store.enqueue(big_job()).await.unwrap();
    let recovered = store.health();
    assert!(recovered.writes_ok(), "{recovered:?}");
    assert!(recovered.last_write_at >= healthy.last_write_at);
}

#[tokio::test]
async fn a_full_database_fails_the_commands_of_its_group_with_a_storage_fault() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(open_at(&db_path(&dir)).await);
    store.enqueue(small_job()).await.unwrap();
    store.limit_growth_for_tests(Some(2)).await.unwrap();
    // Submitted together, so the writer folds them into one group. On a full disk SQLite may
    // roll back the whole transaction, so the small job may fail with the big one; either
    // way each caller hears a storage fault or success, never a half-applied group.
    let (small, big) = tokio::join!(store.enqueue(small_job()), store.enqueue(big_job()));
    assert!(matches!(big, Err(StoreError::Storage { .. })), "{big:?}");
    match &small {
        Ok(outcome) => assert!(store.get_job(outcome.id).await.unwrap().is_some()),
        Err(e) => assert!(matches!(e, StoreError::Storage { .. }), "{e:?}"),
    }
    assert!(
        !store.health().writes_ok(),
        "a group in which a write hit the full disk counts as failing"
    );
}

#[tokio::test]
async fn a_deleted_database_file_stops_the_store_with_an_error_that_says_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_path(&dir);
    let store = open_at(&path).await;
    let id = store.enqueue(small_job()).await.unwrap().id;

    for suffix in ["", "-wal", "-shm"] {
        let file = PathBuf::from(format!("{}{suffix}", path.display()));
        if file.exists() {
            std::fs::remove_file(&file).unwrap();
        }
    }

    let err = store.enqueue(small_job()).await.unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::FileReplaced {
                change: "deleted",
                ..
            }
        ),
        "{err:?}"
    );
    let message = err.to_string();
    assert!(message.contains(&path.display().to_string()), "{message}");
    assert!(
        message.contains("deleted while deck was running"),
        "{message}"
    );
    assert!(
        message.contains("restart deck to open the current file"),
        "{message}"
    );
    assert!(store.ping().await.is_err(), "readiness fails");
    assert!(
        matches!(
            store.get_job(id).await,
            Err(StoreError::FileReplaced { .. })
        ),
        "reads of the old file are refused too"
    );
    let health = store.health();
    assert!(!health.writes_ok());
    assert!(
        health
            .unusable
            .as_deref()
            .is_some_and(|u| u.contains("restart deck")),
        "{health:?}"
    );
    assert!(
        !path.exists(),
        "no reader created a fresh, empty database at the old path"
    );
}

#[tokio::test]
async fn a_database_file_replaced_under_the_store_stops_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_path(&dir);
    let store = open_at(&path).await;
    store.enqueue(small_job()).await.unwrap();
    // Another valid database, renamed over the path (what a restore from backup does).
    let other_path = dir.path().join("other.db");
    let other = open_at(&other_path).await;
    other.enqueue(small_job()).await.unwrap();
    drop(other);
    std::fs::rename(&other_path, &path).unwrap();

    // Only the ping notices it here: nothing has been written since.
    let err = store.ping().await.unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::FileReplaced {
                change: "replaced by another file",
                ..
            }
        ),
        "{err:?}"
    );
    let err = store.enqueue(small_job()).await.unwrap_err();
    assert!(err.to_string().contains("restart deck"), "{err}");
    assert!(store.health().unusable.is_some());
}

#[tokio::test]
async fn the_writer_notices_a_deleted_file_without_a_ping() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_path(&dir);
    let store = open_at(&path).await;
    std::fs::remove_file(&path).unwrap();
    let err = store.release("w", &[JobId::new()], None).await.unwrap_err();
    assert!(matches!(err, StoreError::FileReplaced { .. }), "{err:?}");
    assert!(store.health().unusable.is_some());
}
