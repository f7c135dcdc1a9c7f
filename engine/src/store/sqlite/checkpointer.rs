//! Checkpoints on their own thread and connection.
//!
//! SQLite's automatic checkpoint runs inside the commit that crosses the threshold, on the
//! writer thread: it copied ~8,000 pages into the database file and fsynced it while every
//! transition waited (about 6 % of the writer's time when draining). Here the writer's
//! commit hook wakes a checkpoint thread, which runs a PASSIVE checkpoint on its own
//! connection beside the writer (WAL allows one checkpointer next to one writer).
//!
//! The WAL only starts over from its beginning once every frame in it has been copied, and
//! under constant writes the checkpoint thread is always a little behind the writer. So
//! once that thread has copied all but `catch_up_pages` of the WAL, the writer checkpoints
//! the rest itself after its commit (short: a few hundred pages), and the WAL starts over
//! with the next transaction. Should the thread fall behind anyway (a slow disk), the
//! writer checkpoints itself at `writer_pages`, so the WAL stays bounded.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::mpsc;
use std::thread;

use rusqlite::Connection;
use rusqlite::hooks::Wal;
use rusqlite::wal::CheckpointMode;

/// WAL sizes (in pages) at which checkpoints run.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Thresholds {
    /// Wake the checkpoint thread (SQLite's own default would be 1,000).
    pub background_pages: i32,
    /// The writer finishes a checkpoint once at most this many pages are left to copy.
    pub catch_up_pages: i32,
    /// The writer checkpoints whatever is left, so the WAL cannot grow without bound.
    pub writer_pages: i32,
}

impl Default for Thresholds {
    fn default() -> Self {
        // A checkpoint writes each changed page once however often it changed, and the hot
        // table's pages change on every transition: letting ~8,000 pages (~32 MB) gather
        // does the same work for many more jobs.
        Thresholds {
            background_pages: 8_000,
            catch_up_pages: 1_000,
            writer_pages: 32_000,
        }
    }
}

impl Thresholds {
    /// Whether the writer checkpoints after a commit that left `pages` in the WAL, with
    /// `left` of them not yet copied by the checkpoint thread (`None`: not known), when its
    /// own last checkpoint was at `last` pages (0: none since the WAL started over).
    ///
    /// A checkpoint that copied everything does not always let the WAL start over: a reader
    /// still reading older frames at that moment keeps it growing. The writer then waits
    /// for `catch_up_pages` more before trying again; without that pause it would
    /// checkpoint, fsync included, after every commit until the WAL started over.
    fn writer_checkpoints(&self, pages: i32, left: Option<i32>, last: i32) -> bool {
        let caught_up = matches!(left, Some(left) if left <= self.catch_up_pages);
        let due = pages >= self.writer_pages || (pages >= self.background_pages && caught_up);
        let started_over = pages < last;
        due && (started_over || pages >= last.saturating_add(self.catch_up_pages.max(1)))
    }
}

/// Hand `writer`'s checkpoints to a new thread checkpointing through `checkpoint_conn` (a
/// second connection to the same file). The thread ends when the writer connection closes.
pub(crate) fn install(
    writer: &mut Connection,
    checkpoint_conn: Connection,
    thresholds: Thresholds,
) -> std::io::Result<()> {
    // One pending wake-up is enough: the checkpoint that runs copies everything committed
    // so far.
    let (wake, woken) = mpsc::sync_channel::<()>(1);
    let progress = Arc::new(Progress::default());
    let published = Arc::clone(&progress);
    thread::Builder::new()
        .name("deck-sqlite-checkpoint".into())
        .spawn(move || {
            while woken.recv().is_ok() {
                if let Some((wal_pages, copied)) = checkpoint(&checkpoint_conn) {
                    published.record(wal_pages, copied);
                }
            }
        })?;
    let mut last_writer_checkpoint = 0;
    let hook = move |wal: &mut Wal, pages: i32| {
        let left = progress.left_to_copy(pages);
        if thresholds.writer_checkpoints(pages, left, last_writer_checkpoint) {
            // The commit has happened whatever this returns: an error here would only make
            // SQLite report a committed transaction as failed. BUSY (the checkpoint thread
            // holds the lock) is retried after the next commit.
            match wal.checkpoint_v2(CheckpointMode::PASSIVE) {
                Ok(_) => {
                    progress.reset();
                    last_writer_checkpoint = pages;
                }
                Err(err) => tracing::debug!(error = %err, pages, "writer checkpoint skipped"),
            }
        } else if pages >= thresholds.background_pages {
            let _ = wake.try_send(());
        }
        Ok(())
    };
    writer
        .wal_hook(Some(hook))
        .map_err(|e| std::io::Error::other(e.to_string()))
}

/// What the checkpoint thread's last checkpoint saw: the WAL's size and how much of it had
/// been copied, both in pages, packed into one atomic so they are read together.
#[derive(Default)]
struct Progress(AtomicI64);

impl Progress {
    fn record(&self, wal_pages: i32, copied: i32) {
        let packed = (i64::from(wal_pages) << 32) | i64::from(copied.max(0));
        self.0.store(packed, Ordering::Release);
    }

    /// Forget it: the WAL is about to start over, and old numbers would mislead. (A thread
    /// checkpoint finishing just after may still record numbers about the old WAL; that
    /// costs at most one extra checkpoint on the writer.)
    fn reset(&self) {
        self.0.store(0, Ordering::Release);
    }

    /// Pages the writer would still have to copy with a WAL of `pages` now; `None` when the
    /// numbers are not about this WAL (nothing recorded since it started over).
    fn left_to_copy(&self, pages: i32) -> Option<i32> {
        let packed = self.0.load(Ordering::Acquire);
        let (wal_pages, copied) = ((packed >> 32) as i32, (packed & 0xffff_ffff) as i32);
        (copied > 0 && wal_pages <= pages).then(|| pages - copied)
    }
}

/// A PASSIVE checkpoint: `(pages in the WAL, pages copied)`, or `None` when it could not run.
fn checkpoint(conn: &Connection) -> Option<(i32, i32)> {
    match conn.wal_checkpoint_v2(None::<&str>, CheckpointMode::PASSIVE) {
        Ok(done) => Some(done),
        // The writer is checkpointing itself, or another process is: nothing to do.
        Err(err) if err.sqlite_error_code() == Some(rusqlite::ErrorCode::DatabaseBusy) => None,
        Err(err) => {
            tracing::warn!(error = %err, "background WAL checkpoint failed");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;
    use std::time::{Duration, Instant};

    fn open(path: &Path) -> Connection {
        let conn = Connection::open(path).unwrap();
        conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get::<_, String>(0))
            .unwrap();
        conn.execute_batch("PRAGMA synchronous = NORMAL").unwrap();
        conn
    }

    /// Pages of the main database file: only a checkpoint copies WAL pages into it.
    fn db_pages(path: &Path) -> u64 {
        std::fs::metadata(path).unwrap().len() / 4096
    }

    fn write_pages(conn: &Connection, commits: usize) {
        for _ in 0..commits {
            conn.execute(
                "INSERT INTO t (x) VALUES (randomblob(4000)), (randomblob(4000))",
                [],
            )
            .unwrap();
        }
    }

    fn setup(dir: &tempfile::TempDir, thresholds: Thresholds) -> (Connection, std::path::PathBuf) {
        let path = dir.path().join("c.db");
        let mut writer = open(&path);
        writer.execute_batch("CREATE TABLE t (x BLOB)").unwrap();
        install(&mut writer, open(&path), thresholds).unwrap();
        (writer, path)
    }

    #[test]
    fn the_writer_checkpoints_only_to_finish_the_threads_work_or_at_its_limit() {
        let t = Thresholds {
            background_pages: 100,
            catch_up_pages: 10,
            writer_pages: 1_000,
        };
        assert!(
            !t.writer_checkpoints(99, Some(0), 0),
            "below the background threshold"
        );
        assert!(
            !t.writer_checkpoints(500, None, 0),
            "the thread has not reported"
        );
        assert!(
            !t.writer_checkpoints(500, Some(11), 0),
            "the thread is still behind"
        );
        assert!(
            t.writer_checkpoints(500, Some(10), 0),
            "little left: finish it"
        );
        assert!(t.writer_checkpoints(1_000, None, 0), "the limit");
    }

    #[test]
    fn a_wal_that_did_not_start_over_is_checkpointed_again_only_after_it_grew() {
        let t = Thresholds {
            background_pages: 100,
            catch_up_pages: 10,
            writer_pages: 1_000,
        };
        assert!(!t.writer_checkpoints(1_005, None, 1_000));
        assert!(!t.writer_checkpoints(505, Some(0), 500));
        assert!(t.writer_checkpoints(1_010, None, 1_000));
        assert!(t.writer_checkpoints(510, Some(0), 500));
        assert!(
            t.writer_checkpoints(200, Some(0), 500),
            "smaller than at the last checkpoint: the WAL started over"
        );
    }

    #[test]
    fn progress_is_only_about_the_current_wal() {
        let p = Progress::default();
        assert_eq!(p.left_to_copy(500), None, "nothing recorded");
        p.record(400, 390);
        assert_eq!(p.left_to_copy(500), Some(110));
        assert_eq!(
            p.left_to_copy(300),
            None,
            "a WAL smaller than recorded has started over"
        );
        p.reset();
        assert_eq!(p.left_to_copy(500), None);
    }

    #[test]
    fn the_checkpoint_thread_copies_the_wal_into_the_database() {
        let dir = tempfile::tempdir().unwrap();
        let (writer, path) = setup(
            &dir,
            Thresholds {
                background_pages: 20,
                // Never: only the checkpoint thread copies.
                catch_up_pages: -1,
                writer_pages: i32::MAX,
            },
        );
        let before = db_pages(&path);
        write_pages(&writer, 40);
        // The checkpoint thread works beside the writer: wait for its effect.
        let deadline = Instant::now() + Duration::from_secs(10);
        while db_pages(&path) < before + 60 {
            assert!(
                Instant::now() < deadline,
                "no background checkpoint: {} pages",
                db_pages(&path)
            );
            thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn the_writer_checkpoints_itself_when_the_wal_grows_past_its_limit() {
        let dir = tempfile::tempdir().unwrap();
        let (writer, path) = setup(
            &dir,
            Thresholds {
                background_pages: i32::MAX,
                catch_up_pages: -1,
                writer_pages: 20,
            },
        );
        let before = db_pages(&path);
        write_pages(&writer, 40);
        // Synchronous: the commit that crossed the limit checkpointed before returning.
        assert!(db_pages(&path) >= before + 60, "{} pages", db_pages(&path));
    }

    /// WAL header bytes 12..16: the checkpoint sequence number, which goes up each time the
    /// WAL starts over from its beginning.
    fn wal_generation(path: &Path) -> u32 {
        let wal = std::fs::read(path.with_extension("db-wal")).unwrap();
        u32::from_be_bytes([wal[12], wal[13], wal[14], wal[15]])
    }

    #[test]
    fn the_wal_starts_over_while_writes_go_on() {
        let dir = tempfile::tempdir().unwrap();
        let (writer, path) = setup(
            &dir,
            Thresholds {
                background_pages: 100,
                catch_up_pages: 50,
                writer_pages: i32::MAX,
            },
        );
        write_pages(&writer, 1);
        let first = wal_generation(&path);
        let deadline = Instant::now() + Duration::from_secs(20);
        while wal_generation(&path) == first {
            assert!(Instant::now() < deadline, "the WAL never started over");
            write_pages(&writer, 10);
        }
    }

    #[test]
    fn sqlites_own_checkpoint_no_longer_runs_on_the_writer() {
        let dir = tempfile::tempdir().unwrap();
        let (writer, path) = setup(&dir, Thresholds::default());
        let before = db_pages(&path);
        // ~1,200 WAL pages: past SQLite's default automatic checkpoint (1,000 pages), below
        // both of ours.
        write_pages(&writer, 600);
        assert_eq!(db_pages(&path), before);
    }
}
