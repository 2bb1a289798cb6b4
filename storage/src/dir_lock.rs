//! One process per data directory: an exclusive `flock(2)` on `<dir>/.lock`,
//! as Kafka takes on every log dir and on the metadata dir. Two processes
//! on one dir would interleave appends and checkpoints and corrupt both.
//!
//! The lock belongs to the open file, so it lasts as long as the
//! [`DirLock`] (the broker keeps its locks for its whole life) and the
//! kernel drops it when the process dies, however it dies: a `kill -9`
//! leaves a `.lock` file behind but no lock, and the next start takes it.

use std::fs::{self, File, OpenOptions, TryLockError};
use std::io;
use std::path::{Path, PathBuf};

use crate::error::{Result, StorageError};

pub const LOCK_FILE: &str = ".lock";

/// An exclusive lock on one data directory, released on drop.
#[derive(Debug)]
pub struct DirLock {
    dir: PathBuf,
    /// Held only for its lock.
    _file: File,
}

impl DirLock {
    /// Creates `dir` if needed and locks it, without waiting: a dir another
    /// process holds is refused with [`StorageError::DirLocked`].
    pub fn acquire(dir: &Path) -> Result<Self> {
        fs::create_dir_all(dir)?;
        let path = dir.join(LOCK_FILE);
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)?;
        match file.try_lock() {
            Ok(()) => Ok(Self {
                dir: dir.to_path_buf(),
                _file: file,
            }),
            Err(TryLockError::WouldBlock) => Err(StorageError::DirLocked {
                dir: dir.to_path_buf(),
            }),
            Err(TryLockError::Error(e)) => Err(StorageError::Io(io::Error::new(
                e.kind(),
                format!("cannot lock {}: {e}", path.display()),
            ))),
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

/// The locks of a set of directories, each taken once however often or
/// however spelled (`./data` and `data`) it is listed.
#[derive(Debug, Default)]
pub struct DirLocks {
    /// (canonical path, lock).
    locks: Vec<(PathBuf, DirLock)>,
}

impl DirLocks {
    /// Locks every dir in `dirs`, or none: on the first refusal the ones
    /// already taken are released.
    pub fn acquire<'a>(dirs: impl IntoIterator<Item = &'a Path>) -> Result<Self> {
        let mut locks = Self::default();
        for dir in dirs {
            if locks.covers(dir) {
                continue;
            }
            let lock = DirLock::acquire(dir)?;
            let canonical = fs::canonicalize(dir)?;
            locks.locks.push((canonical, lock));
        }
        Ok(locks)
    }

    /// Whether `dir` is one of the locked dirs.
    pub fn covers(&self, dir: &Path) -> bool {
        fs::canonicalize(dir).is_ok_and(|c| self.locks.iter().any(|(held, _)| *held == c))
    }

    /// The locked dirs as they were given.
    pub fn dirs(&self) -> impl Iterator<Item = &Path> {
        self.locks.iter().map(|(_, lock)| lock.dir())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_on_a_dir_is_refused_until_the_first_is_dropped() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("data");
        let first = DirLock::acquire(&dir).unwrap();
        assert!(dir.join(LOCK_FILE).exists());
        // A second open file description conflicts with the first even in
        // the same process, as it would from another process.
        let err = DirLock::acquire(&dir).unwrap_err();
        assert!(matches!(err, StorageError::DirLocked { .. }), "{err}");
        let text = err.to_string();
        assert!(text.contains(&dir.display().to_string()), "{text}");
        assert!(text.contains("another process"), "{text}");
        drop(first);
        DirLock::acquire(&dir).unwrap();
    }

    #[test]
    fn dirs_listed_twice_or_spelled_differently_are_locked_once() {
        let root = tempfile::tempdir().unwrap();
        let a = root.path().join("a");
        let b = root.path().join("b");
        let a_again = root.path().join("b").join("..").join("a");
        fs::create_dir_all(&b).unwrap();
        let locks = DirLocks::acquire([a.as_path(), b.as_path(), a_again.as_path()]).unwrap();
        assert_eq!(locks.dirs().count(), 2);
        assert!(locks.covers(&a_again));
        assert!(!locks.covers(root.path()));
    }

    #[test]
    fn a_refused_set_releases_what_it_had_taken() {
        let root = tempfile::tempdir().unwrap();
        let a = root.path().join("a");
        let b = root.path().join("b");
        let held = DirLock::acquire(&b).unwrap();
        let err = DirLocks::acquire([a.as_path(), b.as_path()]).unwrap_err();
        assert!(err.to_string().contains(&b.display().to_string()), "{err}");
        // `a` was locked and then released with the failed set.
        DirLock::acquire(&a).unwrap();
        drop(held);
    }
}
