//! Kafka's text checkpoint files:
//!
//! ```text
//! <version>
//! <entry count>
//! <entry>          one per line, fields separated by spaces
//! ```
//!
//! Used for `leader-epoch-checkpoint` ("epoch startOffset") and the log
//! manager's `recovery-point-offset-checkpoint`, `replication-offset-checkpoint`
//! and `log-start-offset-checkpoint` ("topic partition offset").
//!
//! Writes are atomic: the new content goes to `<name>.tmp`, which is fsynced
//! and renamed over the old file, and then the directory is fsynced so the
//! rename itself survives a crash. The leader epoch checkpoint may skip the
//! fsyncs (`write_unsynced`) and be synced when its log is flushed; such a
//! write overwrites the file in place when it fits in one page, because ext4
//! writes a renamed-over file's data back at once (its `auto_da_alloc`
//! heuristic), which made a leadership change on 10,000 partitions spend
//! seconds in synchronous I/O.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use parking_lot::Mutex;

use crate::error::{Result, StorageError};

/// Version of the offset checkpoints (and of `leader-epoch-checkpoint`).
pub const OFFSET_CHECKPOINT_VERSION: i32 = 0;
pub const RECOVERY_POINT_CHECKPOINT_FILE: &str = "recovery-point-offset-checkpoint";
pub const REPLICATION_OFFSET_CHECKPOINT_FILE: &str = "replication-offset-checkpoint";
pub const LOG_START_OFFSET_CHECKPOINT_FILE: &str = "log-start-offset-checkpoint";

/// One line of a checkpoint file.
pub trait CheckpointEntry: Sized {
    fn to_line(&self) -> String;
    /// `None` marks the line (and so the file) as malformed.
    fn from_line(line: &str) -> Option<Self>;
}

/// `topic partition offset`, the entry of the log manager's offset checkpoints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicPartitionOffset {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
}

impl CheckpointEntry for TopicPartitionOffset {
    fn to_line(&self) -> String {
        format!("{} {} {}", self.topic, self.partition, self.offset)
    }

    fn from_line(line: &str) -> Option<Self> {
        let mut fields = line.split_whitespace();
        let entry = Self {
            topic: fields.next()?.to_string(),
            partition: fields.next()?.parse().ok()?,
            offset: fields.next()?.parse().ok()?,
        };
        fields.next().is_none().then_some(entry)
    }
}

#[derive(Debug)]
pub struct CheckpointFile {
    path: PathBuf,
    /// Serializes writers: they all go through the same `.tmp` file.
    write_lock: Mutex<()>,
}

impl CheckpointFile {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            write_lock: Mutex::new(()),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Atomically replaces the file with `version`, `lines.len()` and `lines`,
    /// durably (fsynced, as is the rename).
    pub fn write(&self, version: i32, lines: &[String]) -> Result<()> {
        self.replace(version, lines, Durability::Synced)
    }

    /// As [`Self::write`] but not fsynced: the caller makes it durable later
    /// with [`Self::sync`] and must cope with an older, empty or unreadable
    /// file after a power loss. A kill -9 leaves the old or the new file, or,
    /// when the file shrinks, one that [`Self::read`] rejects as corrupt.
    pub fn write_unsynced(&self, version: i32, lines: &[String]) -> Result<()> {
        self.replace(version, lines, Durability::Unsynced)
    }

    /// fsyncs the file as it is now (a missing file is fine: nothing to sync).
    /// The directory is the caller's to fsync, so that the last rename holds.
    pub fn sync(&self) -> Result<()> {
        let _guard = self.write_lock.lock();
        match File::open(&self.path) {
            Ok(file) => Ok(file.sync_all()?),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    fn replace(&self, version: i32, lines: &[String], durability: Durability) -> Result<()> {
        let mut text = format!("{version}\n{}\n", lines.len());
        for line in lines {
            debug_assert!(!line.contains('\n'), "checkpoint entries are single lines");
            text.push_str(line);
            text.push('\n');
        }
        let _guard = self.write_lock.lock();
        replace_file(&self.path, text.as_bytes(), durability)?;
        Ok(())
    }

    /// The entry lines. A missing or empty file reads as no entries, as Kafka
    /// reads it; a wrong version or an entry count that does not match the
    /// lines is a `CorruptFile` error.
    pub fn read(&self, expected_version: i32) -> Result<Vec<String>> {
        let text = match fs::read(&self.path) {
            Ok(bytes) => String::from_utf8(bytes).map_err(|_| self.corrupt("not UTF-8 text"))?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e.into()),
        };
        let mut lines = text.lines();
        let Some(version) = lines.next() else {
            return Ok(Vec::new());
        };
        let version: i32 = version
            .trim()
            .parse()
            .map_err(|_| self.corrupt(format!("malformed version line {version:?}")))?;
        if version != expected_version {
            return Err(self.corrupt(format!(
                "unrecognised version {version}, expected {expected_version}"
            )));
        }
        let Some(count) = lines.next() else {
            return Ok(Vec::new());
        };
        let count: usize = count
            .trim()
            .parse()
            .map_err(|_| self.corrupt(format!("malformed entry count line {count:?}")))?;
        let entries: Vec<String> = lines.map(str::to_string).collect();
        if entries.len() != count {
            return Err(self.corrupt(format!(
                "expected {count} entries but found {}",
                entries.len()
            )));
        }
        Ok(entries)
    }

    pub fn write_entries<T: CheckpointEntry>(&self, version: i32, entries: &[T]) -> Result<()> {
        let lines: Vec<String> = entries.iter().map(T::to_line).collect();
        self.write(version, &lines)
    }

    pub fn write_entries_unsynced<T: CheckpointEntry>(
        &self,
        version: i32,
        entries: &[T],
    ) -> Result<()> {
        let lines: Vec<String> = entries.iter().map(T::to_line).collect();
        self.write_unsynced(version, &lines)
    }

    pub fn read_entries<T: CheckpointEntry>(&self, expected_version: i32) -> Result<Vec<T>> {
        self.read(expected_version)?
            .iter()
            .map(|line| {
                T::from_line(line).ok_or_else(|| self.corrupt(format!("malformed line {line:?}")))
            })
            .collect()
    }

    fn corrupt(&self, reason: impl Into<String>) -> StorageError {
        StorageError::corrupt_file(&self.path, reason)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Durability {
    Synced,
    Unsynced,
}

/// Writes `<path>.tmp`, fsyncs it, renames it over `path` and fsyncs the
/// directory. A crash leaves either the old or the new file, never a mix.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    replace_file(path, bytes, Durability::Synced)
}

/// Replaces `path` without fsyncing: a kill -9 leaves the old or the new
/// content (or, when a file of up to a page shrinks, an extra tail line); a
/// power loss may leave the old file, an empty one or a mix.
pub fn write_unsynced(path: &Path, bytes: &[u8]) -> io::Result<()> {
    replace_file(path, bytes, Durability::Unsynced)
}

/// Writes `<path>.tmp` and renames it over `path`: a process crash leaves the
/// old or the new file, never a mix. `Unsynced` skips both fsyncs, so after a
/// power loss the file may be the old one, or empty; an unsynced write that
/// fits in one page overwrites the file in place instead.
fn replace_file(path: &Path, bytes: &[u8], durability: Durability) -> io::Result<()> {
    if durability == Durability::Unsynced && bytes.len() <= IN_PLACE_MAX_BYTES {
        return overwrite_in_place(path, bytes);
    }
    let mut tmp_name = path.as_os_str().to_owned();
    tmp_name.push(".tmp");
    let tmp = PathBuf::from(tmp_name);
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&tmp)?;
    file.write_all(bytes)?;
    if durability == Durability::Synced {
        file.sync_all()?;
    }
    drop(file);
    fs::rename(&tmp, path)?;
    if durability == Durability::Synced {
        sync_parent_dir(path)?;
    }
    Ok(())
}

/// The largest write the kernel copies in one step: a kill -9 cannot cut a
/// one-page write at offset 0 in half, it lands whole or not at all.
const IN_PLACE_MAX_BYTES: usize = 4096;

/// Writes `bytes` over the start of `path`, then cuts what is left of a longer
/// old file. A kill -9 between the two leaves the new text followed by the
/// old tail: an extra line, which the reader rejects as a count mismatch (the
/// epoch cache is then rebuilt from the log). Neither step truncates to zero
/// nor renames, so the file is not written back synchronously.
fn overwrite_in_place(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)?;
    file.write_all(bytes)?;
    file.set_len(bytes.len() as u64)
}

/// fsyncs the directory holding `path`, making a create, rename or delete in it durable.
pub fn sync_parent_dir(path: &Path) -> io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tpo(topic: &str, partition: i32, offset: i64) -> TopicPartitionOffset {
        TopicPartitionOffset {
            topic: topic.into(),
            partition,
            offset,
        }
    }

    #[test]
    fn write_then_read_round_trips_in_kafka_layout() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(RECOVERY_POINT_CHECKPOINT_FILE);
        let cp = CheckpointFile::new(&path);
        let entries = vec![tpo("orders", 0, 42), tpo("my.topic-x", 12, 0)];
        cp.write_entries(OFFSET_CHECKPOINT_VERSION, &entries)
            .unwrap();
        assert_eq!(
            fs::read_to_string(&path).unwrap(),
            "0\n2\norders 0 42\nmy.topic-x 12 0\n"
        );
        assert_eq!(cp.read_entries::<TopicPartitionOffset>(0).unwrap(), entries);
        assert!(!dir
            .path()
            .join(format!("{RECOVERY_POINT_CHECKPOINT_FILE}.tmp"))
            .exists());
    }

    #[test]
    fn rewrite_replaces_content() {
        let dir = tempfile::tempdir().unwrap();
        let cp = CheckpointFile::new(dir.path().join("cp"));
        cp.write(0, &["a 1 1".into(), "b 2 2".into()]).unwrap();
        cp.write(0, &[]).unwrap();
        assert_eq!(cp.read(0).unwrap(), Vec::<String>::new());
        assert_eq!(fs::read_to_string(cp.path()).unwrap(), "0\n0\n");
    }

    #[test]
    fn missing_empty_or_header_only_files_read_as_empty() {
        let dir = tempfile::tempdir().unwrap();
        let cp = CheckpointFile::new(dir.path().join("cp"));
        assert!(cp.read(0).unwrap().is_empty());
        for content in ["", "0\n", "0"] {
            fs::write(cp.path(), content).unwrap();
            assert!(cp.read(0).unwrap().is_empty(), "{content:?}");
        }
    }

    #[test]
    fn accepts_crlf_line_endings() {
        let dir = tempfile::tempdir().unwrap();
        let cp = CheckpointFile::new(dir.path().join("cp"));
        fs::write(cp.path(), "0\r\n1\r\nt 0 5\r\n").unwrap();
        assert_eq!(
            cp.read_entries::<TopicPartitionOffset>(0).unwrap(),
            vec![tpo("t", 0, 5)]
        );
    }

    #[test]
    fn malformed_files_are_corrupt_and_name_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let cp = CheckpointFile::new(dir.path().join("cp"));
        for content in [
            "1\n0\n",               // wrong version
            "x\n0\n",               // version not a number
            "0\nmany\n",            // count not a number
            "0\n2\nt 0 1\n",        // fewer entries than announced
            "0\n1\nt 0 1\nt 1 2\n", // more entries than announced
            "0\n-1\n",              // negative count
        ] {
            fs::write(cp.path(), content).unwrap();
            match cp.read(0) {
                Err(StorageError::CorruptFile { path, .. }) => assert_eq!(path, cp.path()),
                other => panic!("{content:?}: {other:?}"),
            }
        }
        for content in [
            "0\n1\nt 0\n",
            "0\n1\nt x 1\n",
            "0\n1\nt 0 1 9\n",
            "0\n1\n\n",
        ] {
            fs::write(cp.path(), content).unwrap();
            assert!(
                matches!(
                    cp.read_entries::<TopicPartitionOffset>(0),
                    Err(StorageError::CorruptFile { .. })
                ),
                "{content:?}"
            );
        }
    }

    #[test]
    fn stale_tmp_file_does_not_matter() {
        let dir = tempfile::tempdir().unwrap();
        let cp = CheckpointFile::new(dir.path().join("cp"));
        fs::write(dir.path().join("cp.tmp"), "garbage from a crash").unwrap();
        cp.write(0, &["t 0 1".into()]).unwrap();
        assert_eq!(cp.read(0).unwrap(), vec!["t 0 1".to_string()]);
    }

    #[test]
    fn unsynced_writes_overwrite_in_place_and_shrink() {
        let dir = tempfile::tempdir().unwrap();
        let cp = CheckpointFile::new(dir.path().join("cp"));
        let lines = |n: usize| {
            (0..n)
                .map(|i| format!("{i} {}", i * 100))
                .collect::<Vec<_>>()
        };
        for n in [3, 40, 1, 0, 7] {
            cp.write_unsynced(0, &lines(n)).unwrap();
            assert_eq!(cp.read(0).unwrap(), lines(n), "{n} entries");
        }
        assert!(!dir.path().join("cp.tmp").exists());
        // Past a page the write goes through a renamed tmp file again.
        cp.write_unsynced(0, &lines(600)).unwrap();
        assert_eq!(cp.read(0).unwrap(), lines(600));
    }

    /// A kill -9 between the overwrite and the cut leaves the new text
    /// followed by the old file's tail: it must never read as valid.
    #[test]
    fn a_shrinking_overwrite_cut_short_reads_as_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let cp = CheckpointFile::new(dir.path().join("cp"));
        let text = |entries: &[&str]| {
            let mut t = format!("0\n{}\n", entries.len());
            entries.iter().for_each(|e| t.push_str(&format!("{e}\n")));
            t
        };
        let olds = [
            vec!["0 0", "2 10", "5 30"],
            vec!["0 0", "12 1000"],
            vec!["3 7"],
        ];
        let news = [vec![], vec!["0 0"], vec!["0 0", "2 10"], vec!["1 1"]];
        for old in &olds {
            for new in &news {
                let (old, new) = (text(old), text(new));
                if new.len() >= old.len() {
                    continue;
                }
                let torn = format!("{new}{}", &old[new.len()..]);
                fs::write(cp.path(), &torn).unwrap();
                assert!(
                    matches!(
                        cp.read_entries::<crate::epoch_cache::EpochEntry>(0),
                        Err(StorageError::CorruptFile { .. })
                    ),
                    "{torn:?} read as valid"
                );
            }
        }
    }
}
