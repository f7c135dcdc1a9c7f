//! Noticing that the database file was deleted or replaced under the running store.
//!
//! An open SQLite connection keeps writing to the file it opened, also after that file was
//! unlinked or another file was renamed over its path: every commit still succeeds, into a
//! file nobody will open again, and all of it is gone at the next start. So the store
//! remembers the file's device and inode when it opens it and compares them with the path's
//! before each write group (one `stat`, about a microsecond) and on every ping. Once they
//! differ the store refuses all work for good; only a restart opens the current file.

use std::path::PathBuf;
use std::sync::OnceLock;

use crate::error::{StoreError, StoreResult};

#[derive(Default)]
pub(crate) struct FileIdentity {
    /// `None`: nothing on disk to watch (an in-memory or temporary database).
    watched: Option<Watched>,
    /// What happened to the file, once noticed.
    lost: OnceLock<&'static str>,
}

struct Watched {
    path: PathBuf,
    id: (u64, u64),
}

impl FileIdentity {
    /// Remember the file now at `path` (the connection's own, absolute file name).
    pub(crate) fn capture(path: Option<&str>) -> FileIdentity {
        let watched = path.filter(|p| !p.is_empty()).and_then(|p| {
            let path = PathBuf::from(p);
            let id = file_id(&path).ok()?;
            Some(Watched { path, id })
        });
        FileIdentity {
            watched,
            lost: OnceLock::new(),
        }
    }

    /// Fails once the file was found deleted or replaced (no file system call).
    pub(crate) fn ensure(&self) -> StoreResult<()> {
        match (self.lost.get(), &self.watched) {
            (Some(change), Some(w)) => Err(StoreError::FileReplaced {
                path: w.path.display().to_string(),
                change,
            }),
            _ => Ok(()),
        }
    }

    /// Compare the path's file with the one the store opened.
    pub(crate) fn check(&self) -> StoreResult<()> {
        self.ensure()?;
        let Some(w) = &self.watched else {
            return Ok(());
        };
        let change = match file_id(&w.path) {
            Ok(id) if id == w.id => return Ok(()),
            Ok(_) => "replaced by another file",
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => "deleted",
            // Anything else (a directory turned unreadable) says nothing about which file is
            // there; the writes themselves will tell.
            Err(_) => return Ok(()),
        };
        if self.lost.set(change).is_ok() {
            tracing::error!(db = %w.path.display(), change,
                "the database file was {change} while deck was running; refusing all work \
                 until deck restarts");
        }
        self.ensure()
    }

    /// Why the store stopped accepting work, once it has.
    pub(crate) fn lost(&self) -> Option<String> {
        self.ensure().err().map(|e| e.to_string())
    }
}

#[cfg(unix)]
fn file_id(path: &std::path::Path) -> std::io::Result<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path)?;
    Ok((m.dev(), m.ino()))
}

/// Elsewhere SQLite's open file cannot be deleted or renamed over; only check that it is there.
#[cfg(not(unix))]
fn file_id(path: &std::path::Path) -> std::io::Result<(u64, u64)> {
    std::fs::metadata(path).map(|_| (0, 0))
}
