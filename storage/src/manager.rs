//! The log manager: every partition log in the configured `log.dirs`, the
//! per-directory offset checkpoints, the clean-shutdown marker, and the
//! periodic work (retention, time-based flush, compaction, checkpoints).
//!
//! Layout, as Kafka's: `<log.dir>/<topic>-<partition>/` holds one partition
//! (segments, `leader-epoch-checkpoint`, producer snapshots and a
//! `partition.metadata` file with the topic id); each log dir holds
//! `recovery-point-offset-checkpoint`, `log-start-offset-checkpoint`,
//! `replication-offset-checkpoint` (high watermarks) and, while the broker is
//! stopped after a clean shutdown, `.kafka_cleanshutdown`.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use tracing::{error, info, warn};

use crate::checkpoint::{
    CheckpointFile, TopicPartitionOffset, LOG_START_OFFSET_CHECKPOINT_FILE,
    OFFSET_CHECKPOINT_VERSION, RECOVERY_POINT_CHECKPOINT_FILE, REPLICATION_OFFSET_CHECKPOINT_FILE,
};
use crate::cleaner::CleanerBuffers;
use crate::config::LogConfig;
use crate::dir_lock::DirLocks;
use crate::error::{Result, StorageError};
use crate::io_throttle::IoThrottle;
use crate::log::{LogOpenOptions, PartitionLog};
use crate::log_file::OpenLogFiles;
use crate::parallel::on_threads;

pub const CLEAN_SHUTDOWN_FILE: &str = ".kafka_cleanshutdown";
pub const PARTITION_METADATA_FILE: &str = "partition.metadata";
/// The metadata log lives in a log dir too but belongs to the controller,
/// which opens it itself.
pub const METADATA_TOPIC: &str = "__cluster_metadata";
const DELETE_SUFFIX: &str = "-delete";
/// A log set aside because its topic id is not the metadata's (the topic
/// was deleted and created again while this broker was away), as Kafka
/// names such dirs. Kept for the operator, never loaded.
const STRAY_SUFFIX: &str = "-stray";

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicPartition {
    pub topic: String,
    pub partition: i32,
}

impl TopicPartition {
    pub fn new(topic: impl Into<String>, partition: i32) -> Self {
        Self {
            topic: topic.into(),
            partition,
        }
    }

    /// Parses a `<topic>-<partition>` directory name (topics may contain '-').
    pub fn from_dir_name(name: &str) -> Option<Self> {
        let (topic, partition) = name.rsplit_once('-')?;
        if topic.is_empty()
            || partition.is_empty()
            || !partition.bytes().all(|b| b.is_ascii_digit())
        {
            return None;
        }
        Some(Self::new(topic, partition.parse().ok()?))
    }

    pub fn dir_name(&self) -> String {
        format!("{}-{}", self.topic, self.partition)
    }
}

impl fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

pub type SharedLog = Arc<RwLock<PartitionLog>>;

struct LogEntry {
    log: SharedLog,
    log_dir: usize,
    /// The topic id its `partition.metadata` names; None when the file is
    /// missing or empty (created before the id was known, or cut short).
    topic_id: Option<String>,
}

/// Where the configuration of a partition's log comes from (topic overrides
/// over broker defaults, owned by the broker's metadata).
pub trait LogConfigSource: Send + Sync {
    fn log_config(&self, topic: &str) -> LogConfig;
}

impl LogConfigSource for LogConfig {
    fn log_config(&self, _topic: &str) -> LogConfig {
        self.clone()
    }
}

pub struct LogManager {
    log_dirs: Vec<PathBuf>,
    /// Every log dir's `.lock`, held until a clean shutdown (or while the
    /// manager lives; the broker binary holds its own share to its exit).
    locks: Mutex<Option<Arc<DirLocks>>>,
    logs: RwLock<HashMap<TopicPartition, LogEntry>>,
    offline_dirs: Mutex<Vec<PathBuf>>,
    /// The logs with a finite `flush.ms`: the only ones the time flusher
    /// visits, so that its tick costs nothing per idle partition (the
    /// default, Long.MAX_VALUE, leaves flushing to the OS, as in Kafka).
    timed_flush: Mutex<HashSet<TopicPartition>>,
    /// What the last clean shutdown wrote in every log dir's marker; None
    /// when any dir was not shut down cleanly.
    clean_shutdown_marker: Option<Vec<u8>>,
    open_files: OpenLogFiles,
}

impl LogManager {
    /// Opens every partition log found in `log_dirs`, with
    /// `threads_per_dir` threads in each dir (Kafka's
    /// `num.recovery.threads.per.data.dir`; the dirs load at the same time).
    /// After an unclean shutdown, segments past each log's recovery point
    /// are rescanned. Each dir is locked first: a dir another process holds
    /// is refused with [`StorageError::DirLocked`].
    pub fn open(
        log_dirs: Vec<PathBuf>,
        configs: &dyn LogConfigSource,
        threads_per_dir: usize,
    ) -> Result<Self> {
        let locks = DirLocks::acquire(log_dirs.iter().map(PathBuf::as_path))?;
        let open_files = OpenLogFiles::default();
        Self::open_locked(
            log_dirs,
            Arc::new(locks),
            configs,
            threads_per_dir,
            open_files,
        )
    }

    /// [`LogManager::open`] with the dirs' locks already taken, for a
    /// process that locks its dirs before anything else reads them (the
    /// broker locks its metadata dir and log dirs at start-up). The logs'
    /// segments share `open_files`, their budget of open `.log` files.
    pub fn open_locked(
        log_dirs: Vec<PathBuf>,
        locks: Arc<DirLocks>,
        configs: &dyn LogConfigSource,
        threads_per_dir: usize,
        open_files: OpenLogFiles,
    ) -> Result<Self> {
        if let Some(dir) = log_dirs.iter().find(|dir| !locks.covers(dir)) {
            return Err(StorageError::Io(std::io::Error::other(format!(
                "log dir {} was not locked before opening it",
                dir.display()
            ))));
        }
        let threads = threads_per_dir.max(1);
        let loaded: Vec<Result<LoadedDir>> = std::thread::scope(|scope| {
            let loading: Vec<_> = log_dirs
                .iter()
                .enumerate()
                .map(|(index, dir)| {
                    let open_files = &open_files;
                    scope.spawn(move || load_dir(index, dir, configs, threads, open_files))
                })
                .collect();
            loading
                .into_iter()
                .map(|dir| dir.join().expect("a log dir loader panicked"))
                .collect()
        });
        let mut logs = HashMap::new();
        let mut markers = Vec::with_capacity(loaded.len());
        for dir in loaded {
            let dir = dir?;
            logs.extend(dir.logs);
            markers.push(dir.clean_shutdown_marker);
        }
        let clean_shutdown_marker = match markers.split_first() {
            Some((first, rest)) if rest.iter().all(|m| m == first) => first.clone(),
            _ => None,
        };
        let timed_flush = logs
            .iter()
            .filter(|(_, e)| flushes_by_time(e.log.read().config()))
            .map(|(tp, _)| tp.clone())
            .collect();
        Ok(Self {
            log_dirs,
            locks: Mutex::new(Some(locks)),
            logs: RwLock::new(logs),
            offline_dirs: Mutex::new(Vec::new()),
            timed_flush: Mutex::new(timed_flush),
            clean_shutdown_marker,
            open_files,
        })
    }

    /// What the last clean shutdown wrote in the marker of every log dir
    /// (see [`LogManager::shutdown`]), or None when any log dir was not shut
    /// down cleanly, or the dirs disagree.
    pub fn clean_shutdown_marker(&self) -> Option<&[u8]> {
        self.clean_shutdown_marker.as_deref()
    }

    /// Gives a partition's log a new configuration.
    pub fn configure(&self, tp: &TopicPartition, config: LogConfig) {
        let Some(log) = self.get(tp) else {
            return;
        };
        self.note_flush_policy(tp, &config);
        log.write().set_config(config);
    }

    fn note_flush_policy(&self, tp: &TopicPartition, config: &LogConfig) {
        let mut timed = self.timed_flush.lock();
        if flushes_by_time(config) {
            timed.insert(tp.clone());
        } else {
            timed.remove(tp);
        }
    }

    pub fn log_dirs(&self) -> &[PathBuf] {
        &self.log_dirs
    }

    pub fn offline_dirs(&self) -> Vec<PathBuf> {
        self.offline_dirs.lock().clone()
    }

    pub fn get(&self, tp: &TopicPartition) -> Option<SharedLog> {
        self.logs.read().get(tp).map(|e| e.log.clone())
    }

    pub fn partitions(&self) -> Vec<TopicPartition> {
        self.logs.read().keys().cloned().collect()
    }

    /// The log dir holding a partition.
    pub fn log_dir_of(&self, tp: &TopicPartition) -> Option<PathBuf> {
        self.logs
            .read()
            .get(tp)
            .map(|e| self.log_dirs[e.log_dir].clone())
    }

    /// Returns the partition's log, creating it (in the least-loaded log
    /// dir) if needed. `topic_id` is recorded in `partition.metadata`. A log
    /// whose `partition.metadata` names another topic id belongs to a topic
    /// of the same name that was deleted: it is set aside as stray and a
    /// new log is created, so records of the old topic are never served as
    /// the new one's.
    pub fn get_or_create(
        &self,
        tp: &TopicPartition,
        topic_id: &str,
        config: LogConfig,
    ) -> Result<SharedLog> {
        let current = |e: &LogEntry| e.topic_id.as_deref().is_none_or(|id| id == topic_id);
        if let Some(e) = self.logs.read().get(tp).filter(|e| current(e)) {
            return Ok(e.log.clone());
        }
        let mut logs = self.logs.write();
        match logs.get(tp) {
            Some(e) if current(e) => return Ok(e.log.clone()),
            Some(_) => {
                let stray = logs.remove(tp).expect("present");
                set_aside_stray(tp, &stray, topic_id)?;
            }
            None => {}
        }
        let index = self.least_loaded_dir(&logs)?;
        let dir = self.log_dirs[index].join(tp.dir_name());
        fs::create_dir_all(&dir)?;
        write_partition_metadata(&dir, topic_id)?;
        self.note_flush_policy(tp, &config);
        let opts = LogOpenOptions {
            open_files: self.open_files.clone(),
            ..LogOpenOptions::default()
        };
        let log = PartitionLog::open(&dir, config, opts)?;
        let shared = Arc::new(RwLock::new(log));
        logs.insert(
            tp.clone(),
            LogEntry {
                log: shared.clone(),
                log_dir: index,
                topic_id: Some(topic_id.to_string()),
            },
        );
        info!(partition = %tp, dir = %dir.display(), "created log");
        Ok(shared)
    }

    /// The online log dir holding the fewest partitions; with one log dir
    /// there is nothing to count (a 10,000-partition topic used to count
    /// every log for every log it created).
    fn least_loaded_dir(&self, logs: &HashMap<TopicPartition, LogEntry>) -> Result<usize> {
        let offline = self.offline_dirs.lock();
        let online: Vec<usize> = (0..self.log_dirs.len())
            .filter(|&i| !offline.contains(&self.log_dirs[i]))
            .collect();
        match online.as_slice() {
            [] => Err(StorageError::Offline {
                dir: self.log_dirs.first().cloned().unwrap_or_default(),
                source: std::io::Error::other("every log dir is offline"),
            }),
            [only] => Ok(*only),
            [first, ..] => {
                let mut counts = vec![0usize; self.log_dirs.len()];
                logs.values().for_each(|e| counts[e.log_dir] += 1);
                Ok(online
                    .iter()
                    .copied()
                    .min_by_key(|&i| counts[i])
                    .unwrap_or(*first))
            }
        }
    }

    /// Deletes a partition's log. The directory is renamed first so that a
    /// crash mid-delete never resurrects a half-deleted partition.
    pub fn delete(&self, tp: &TopicPartition) -> Result<bool> {
        let Some(entry) = self.logs.write().remove(tp) else {
            return Ok(false);
        };
        self.timed_flush.lock().remove(tp);
        let dir = entry.log.read().dir().to_path_buf();
        let doomed = dir.with_file_name(format!(
            "{}.{}{}",
            tp.dir_name(),
            std::process::id(),
            DELETE_SUFFIX
        ));
        fs::rename(&dir, &doomed)?;
        fs::remove_dir_all(&doomed)?;
        info!(partition = %tp, "deleted log");
        Ok(true)
    }

    /// Writes the per-dir recovery point, log start and high watermark
    /// checkpoints.
    pub fn checkpoint(&self) -> Result<()> {
        let logs = self.logs.read();
        for (index, dir) in self.log_dirs.iter().enumerate() {
            let mut recovery = Vec::new();
            let mut starts = Vec::new();
            let mut hws = Vec::new();
            for (tp, e) in logs.iter().filter(|(_, e)| e.log_dir == index) {
                let log = e.log.read();
                let entry = |offset| TopicPartitionOffset {
                    topic: tp.topic.clone(),
                    partition: tp.partition,
                    offset,
                };
                recovery.push(entry(log.recovery_point()));
                starts.push(entry(log.log_start_offset()));
                hws.push(entry(log.high_watermark()));
            }
            for (file, entries) in [
                (RECOVERY_POINT_CHECKPOINT_FILE, recovery),
                (LOG_START_OFFSET_CHECKPOINT_FILE, starts),
                (REPLICATION_OFFSET_CHECKPOINT_FILE, hws),
            ] {
                CheckpointFile::new(dir.join(file))
                    .write_entries(OFFSET_CHECKPOINT_VERSION, &entries)?;
            }
        }
        Ok(())
    }

    /// Applies retention to every log; returns the number of deleted segments.
    pub fn run_retention(&self, now_ms: i64) -> usize {
        self.for_each_log("retention", |log| log.apply_retention(now_ms))
            .into_iter()
            .sum()
    }

    /// Forgets, in every log, producers idle for `expiration_ms`; returns
    /// how many were removed.
    pub fn expire_producers(&self, now_ms: i64, expiration_ms: i64) -> usize {
        self.for_each_log("producer expiration", |log| {
            Ok(log.expire_producers(now_ms, expiration_ms))
        })
        .into_iter()
        .sum()
    }

    /// The budget of open `.log` files the logs' segments share.
    pub fn open_files(&self) -> &OpenLogFiles {
        &self.open_files
    }

    /// Closes the `.log` files beyond the open-file budget that nobody used
    /// since the last call (see [`OpenLogFiles`]). A file whose fsync fails
    /// takes its log offline, as any failed flush does. Returns how many
    /// closed.
    pub fn close_idle_files(&self) -> usize {
        let mut closed = 0;
        for file in self.open_files.idle_beyond_budget() {
            match file.close_if_idle() {
                Ok(done) => closed += usize::from(done),
                Err(e) => self.fail_log_of(file.path(), e),
            }
        }
        closed
    }

    /// Takes offline the log that holds `segment`, after an I/O error.
    fn fail_log_of(&self, segment: &Path, error: std::io::Error) {
        let dir = segment.parent();
        let log = dir
            .and_then(|dir| dir.file_name()?.to_str())
            .and_then(TopicPartition::from_dir_name)
            .and_then(|tp| self.get(&tp))
            .filter(|log| Some(log.read().dir()) == dir);
        match log {
            Some(log) => log.write().fail(error),
            None => {
                error!(segment = %segment.display(), %error, "fsync failed before closing the file of a segment no longer hosted")
            }
        }
    }

    /// Flushes logs whose `flush.ms` has passed.
    pub fn run_time_flush(&self, now_ms: i64) {
        let due: Vec<(TopicPartition, SharedLog)> = {
            let timed = self.timed_flush.lock();
            if timed.is_empty() {
                return;
            }
            let logs = self.logs.read();
            timed
                .iter()
                .filter_map(|tp| Some((tp.clone(), logs.get(tp)?.log.clone())))
                .collect()
        };
        for_each_of("flush", due, |log| log.maybe_flush_by_time(now_ms));
    }

    /// One compaction pass over every log that is due, by
    /// `cleaner.threads` cleaner threads (0 cleans nothing) that take the
    /// logs one at a time, share one I/O throttle and have a key map each
    /// (their share of the dedupe buffer). Each log is locked only to take
    /// its input and to swap in the result; the reading, cleaning and
    /// throttling happen with the log free.
    pub fn run_compaction(&self, now_ms: i64, cleaner: &CleanerConfig) {
        let threads = cleaner.threads;
        let throttle = IoThrottle::new(cleaner.io_max_bytes_per_second);
        let buffers = CleanerBuffers::for_threads(
            cleaner.dedupe_buffer_size,
            cleaner.io_buffer_load_factor,
            cleaner.io_buffer_size,
            threads,
        );
        on_threads(&self.all_logs(), threads, |(tp, log)| {
            if let Err(e) = compact_one(log, now_ms, &throttle, &buffers) {
                error!(partition = %tp, error = %e, "compaction failed");
            }
        });
    }

    fn all_logs(&self) -> Vec<(TopicPartition, SharedLog)> {
        self.logs
            .read()
            .iter()
            .map(|(tp, e)| (tp.clone(), e.log.clone()))
            .collect()
    }

    fn for_each_log<T>(&self, what: &str, f: impl FnMut(&mut PartitionLog) -> Result<T>) -> Vec<T> {
        for_each_of(what, self.all_logs(), f)
    }

    /// Clean shutdown: flush and snapshot every log, with `threads_per_dir`
    /// threads for each log dir (`num.recovery.threads.per.data.dir`, which
    /// Kafka closes logs with too), write the checkpoints, then leave the
    /// marker that lets the next start skip recovery, holding `marker` (the
    /// broker writes its incarnation, as Kafka its broker epoch).
    pub fn shutdown(&self, threads_per_dir: usize, marker: &[u8]) -> Result<()> {
        let started = std::time::Instant::now();
        let logs = self.all_logs();
        let threads = threads_per_dir.max(1) * self.log_dirs.len();
        let failed = AtomicUsize::new(0);
        on_threads(&logs, threads, |(tp, log)| {
            if let Err(e) = log.write().close() {
                error!(partition = %tp, error = %e, "could not close log cleanly");
                failed.fetch_add(1, Ordering::Relaxed);
            }
        });
        info!(
            logs = logs.len(),
            threads_per_dir,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "closed the logs"
        );
        self.checkpoint()?;
        if failed.into_inner() == 0 {
            for dir in &self.log_dirs {
                fs::write(dir.join(CLEAN_SHUTDOWN_FILE), marker)?;
                crate::log::fsync_dir(dir)?;
            }
        }
        // Closed: the dirs are free for the next manager (within a process,
        // as a restart in tests; the binary keeps its own locks).
        self.locks.lock().take();
        Ok(())
    }
}

/// Renames the dir of `stray`, a log of `tp` under another topic id than
/// the metadata's `topic_id`, to `<tp>.<the time in ns>-stray`.
/// Runs `f` on each online log of `logs`, logging failures; returns what
/// the successful runs returned.
fn for_each_of<T>(
    what: &str,
    logs: Vec<(TopicPartition, SharedLog)>,
    mut f: impl FnMut(&mut PartitionLog) -> Result<T>,
) -> Vec<T> {
    let mut out = Vec::new();
    for (tp, log) in logs {
        let mut log = log.write();
        if log.is_offline() {
            continue;
        }
        match f(&mut log) {
            Ok(v) => out.push(v),
            Err(e) => error!(partition = %tp, error = %e, "{what} failed"),
        }
    }
    out
}

/// Whether a log with `config` is flushed by time (`flush.ms`).
fn flushes_by_time(config: &LogConfig) -> bool {
    config.flush_ms < i64::MAX
}

fn set_aside_stray(tp: &TopicPartition, stray: &LogEntry, topic_id: &str) -> Result<()> {
    let dir = stray.log.read().dir().to_path_buf();
    let aside = dir.with_file_name(format!(
        "{}.{}{}",
        tp.dir_name(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
        STRAY_SUFFIX
    ));
    fs::rename(&dir, &aside)?;
    if let Some(parent) = aside.parent() {
        crate::log::fsync_dir(parent)?;
    }
    warn!(
        partition = %tp,
        log_topic_id = stray.topic_id.as_deref().unwrap_or("-"),
        topic_id,
        dir = %aside.display(),
        "this log belongs to a deleted topic of the same name: set aside as stray; delete the dir once it is not needed"
    );
    Ok(())
}

/// One log dir's logs, and its clean-shutdown marker when it had one.
struct LoadedDir {
    logs: Vec<(TopicPartition, LogEntry)>,
    clean_shutdown_marker: Option<Vec<u8>>,
}

/// Opens the partition logs of log dir number `index`, `threads` at a time.
fn load_dir(
    index: usize,
    dir: &Path,
    configs: &dyn LogConfigSource,
    threads: usize,
    open_files: &OpenLogFiles,
) -> Result<LoadedDir> {
    fs::create_dir_all(dir)?;
    let marker = dir.join(CLEAN_SHUTDOWN_FILE);
    let clean_shutdown_marker = match fs::read(&marker) {
        Ok(content) => Some(content),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(e.into()),
    };
    let clean = clean_shutdown_marker.is_some();
    let recovery = read_offsets(dir, RECOVERY_POINT_CHECKPOINT_FILE)?;
    let starts = read_offsets(dir, LOG_START_OFFSET_CHECKPOINT_FILE)?;
    let hws = read_offsets(dir, REPLICATION_OFFSET_CHECKPOINT_FILE)?;
    let started = std::time::Instant::now();
    let mut partitions = Vec::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        if !entry.file_type()?.is_dir() {
            continue;
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(DELETE_SUFFIX) {
            // A deletion interrupted by a crash: finish it.
            fs::remove_dir_all(entry.path())?;
            continue;
        }
        if name.ends_with(STRAY_SUFFIX) {
            continue;
        }
        let Some(tp) = TopicPartition::from_dir_name(&name) else {
            warn!(dir = %entry.path().display(), "ignoring a directory that is not a partition");
            continue;
        };
        if tp.topic != METADATA_TOPIC {
            partitions.push((tp, entry.path()));
        }
    }
    let opened = Mutex::new(Vec::with_capacity(partitions.len()));
    on_threads(&partitions, threads, |(tp, path)| {
        let opts = LogOpenOptions {
            recovery_point: recovery.get(tp).copied().unwrap_or(0),
            log_start_offset: starts.get(tp).copied().unwrap_or(0),
            high_watermark: hws.get(tp).copied().unwrap_or(0),
            clean_shutdown: clean,
            open_files: open_files.clone(),
        };
        let log = PartitionLog::open(path, configs.log_config(&tp.topic), opts);
        let topic_id = read_partition_metadata(path).unwrap_or_else(|e| {
            warn!(partition = %tp, error = %e, "unreadable partition.metadata: the log is kept whatever the topic id");
            None
        });
        opened.lock().push((tp.clone(), log, topic_id));
    });
    let mut logs = Vec::with_capacity(partitions.len());
    for (tp, log, topic_id) in opened.into_inner() {
        let entry = LogEntry {
            log: Arc::new(RwLock::new(log?)),
            log_dir: index,
            topic_id,
        };
        logs.push((tp, entry));
    }
    // From now on a crash is an unclean shutdown.
    if clean {
        fs::remove_file(&marker)?;
    }
    info!(
        dir = %dir.display(),
        clean_shutdown = clean,
        logs = logs.len(),
        threads,
        elapsed_ms = started.elapsed().as_millis() as u64,
        "loaded log dir"
    );
    Ok(LoadedDir {
        logs,
        clean_shutdown_marker,
    })
}

fn read_offsets(dir: &Path, file: &str) -> Result<HashMap<TopicPartition, i64>> {
    let file = CheckpointFile::new(dir.join(file));
    let entries = match file.read_entries::<TopicPartitionOffset>(OFFSET_CHECKPOINT_VERSION) {
        Ok(e) => e,
        Err(StorageError::CorruptFile { path, reason }) => {
            // Losing a checkpoint only costs a longer recovery.
            warn!(path = %path.display(), %reason, "ignoring a corrupt checkpoint");
            Vec::new()
        }
        Err(e) => return Err(e),
    };
    Ok(entries
        .into_iter()
        .map(|e| (TopicPartition::new(e.topic, e.partition), e.offset))
        .collect())
}

/// Writes Kafka's `partition.metadata` ("version: 0", "topic_id: <id>").
/// Not fsynced, as Kafka flushes it off the request path: creating a
/// 10,000-partition topic spent most of its time in these two fsyncs a
/// partition. A power loss may leave the file empty, which reads as unknown.
pub fn write_partition_metadata(dir: &Path, topic_id: &str) -> Result<()> {
    let body = format!("version: 0\ntopic_id: {topic_id}\n");
    crate::checkpoint::write_unsynced(&dir.join(PARTITION_METADATA_FILE), body.as_bytes())?;
    Ok(())
}

/// Reads the topic id from `partition.metadata`, if present.
pub fn read_partition_metadata(dir: &Path) -> Result<Option<String>> {
    let path = dir.join(PARTITION_METADATA_FILE);
    let text = match fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    if text.is_empty() {
        return Ok(None);
    }
    let id = text
        .lines()
        .find_map(|l| l.strip_prefix("topic_id:"))
        .map(|v| v.trim().to_string())
        .ok_or_else(|| StorageError::corrupt_file(&path, "no topic_id line"))?;
    Ok(Some(id))
}

/// The cleaner's broker settings (Kafka's `log.cleaner.*`), read before
/// each round so that they can change at runtime.
#[derive(Debug, Clone)]
pub struct CleanerConfig {
    /// `log.cleaner.threads`.
    pub threads: usize,
    /// `log.cleaner.io.max.bytes.per.second`, for all threads together.
    pub io_max_bytes_per_second: f64,
    /// `log.cleaner.dedupe.buffer.size`, shared by the threads' key maps.
    pub dedupe_buffer_size: u64,
    /// `log.cleaner.io.buffer.load.factor`: how full a key map may get.
    pub io_buffer_load_factor: f64,
    /// `log.cleaner.io.buffer.size`, shared by the threads.
    pub io_buffer_size: usize,
}

/// One log's compaction pass, if it is due.
fn compact_one(
    log: &SharedLog,
    now_ms: i64,
    throttle: &IoThrottle,
    buffers: &CleanerBuffers,
) -> Result<()> {
    let input = {
        let mut log = log.write();
        if log.is_offline() {
            return Ok(());
        }
        log.compaction_input(now_ms)?
    };
    let Some(input) = input else { return Ok(()) };
    let cleaned = input.clean(throttle, buffers)?;
    log.write().install_cleaned(cleaned).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::producer_state::AppendOrigin;
    use ottla_protocol::batch::{BatchBuilder, SimpleRecord};

    fn batch() -> Vec<u8> {
        BatchBuilder::default().build(&[SimpleRecord {
            timestamp: 1,
            key: None,
            value: Some(b"v".to_vec()),
            headers: vec![],
        }])
    }

    fn cleaner(threads: usize) -> CleanerConfig {
        CleanerConfig {
            threads,
            io_max_bytes_per_second: f64::INFINITY,
            dedupe_buffer_size: 1 << 20,
            io_buffer_load_factor: 0.9,
            io_buffer_size: 1 << 16,
        }
    }

    #[test]
    fn partition_metadata_round_trips_and_an_empty_file_is_unknown() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read_partition_metadata(dir.path()).unwrap(), None);
        write_partition_metadata(dir.path(), "AAAAAAAAAAAAAAAAAAAAAA").unwrap();
        assert_eq!(
            read_partition_metadata(dir.path()).unwrap().as_deref(),
            Some("AAAAAAAAAAAAAAAAAAAAAA")
        );
        // What a power loss can leave of a file that was never fsynced.
        fs::write(dir.path().join(PARTITION_METADATA_FILE), "").unwrap();
        assert_eq!(read_partition_metadata(dir.path()).unwrap(), None);
        fs::write(dir.path().join(PARTITION_METADATA_FILE), "version: 0\n").unwrap();
        assert!(read_partition_metadata(dir.path()).is_err());
    }

    /// The time flusher visits only logs with a finite `flush.ms`, as
    /// configured at creation or later; deleting a log forgets it.
    #[test]
    fn only_logs_with_a_finite_flush_ms_are_flushed_by_time() {
        let root = tempfile::tempdir().unwrap();
        let defaults = LogConfig::default();
        let m = LogManager::open(vec![root.path().to_path_buf()], &defaults, 1).unwrap();
        let timed = LogConfig {
            flush_ms: 0,
            ..defaults.clone()
        };
        let (a, b) = (TopicPartition::new("t", 0), TopicPartition::new("t", 1));
        m.get_or_create(&a, "AAAAAAAAAAAAAAAAAAAAAA", timed.clone())
            .unwrap();
        m.get_or_create(&b, "AAAAAAAAAAAAAAAAAAAAAA", defaults.clone())
            .unwrap();
        let append_and_flush = |m: &LogManager| -> Vec<i64> {
            for tp in [&a, &b] {
                let log = m.get(tp).unwrap();
                let mut log = log.write();
                log.append_as_leader(&mut batch(), 0, AppendOrigin::Client, 1)
                    .unwrap();
            }
            m.run_time_flush(i64::MAX / 2);
            [&a, &b]
                .iter()
                .map(|tp| m.get(tp).unwrap().read().recovery_point())
                .collect()
        };
        assert_eq!(append_and_flush(&m), vec![1, 0]);
        m.configure(&b, timed);
        m.configure(&a, defaults);
        assert_eq!(append_and_flush(&m), vec![1, 2]);
        assert!(m.delete(&b).unwrap());
        assert!(m.timed_flush.lock().is_empty());
    }

    #[test]
    fn cleaner_threads_share_the_due_logs_and_zero_stops_them() {
        let root = tempfile::tempdir().unwrap();
        let mut cfg = LogConfig::default();
        cfg.cleanup_policy.delete = false;
        cfg.cleanup_policy.compact = true;
        let m = LogManager::open(vec![root.path().to_path_buf()], &cfg, 1).unwrap();
        let sizes = |m: &LogManager| -> Vec<u64> {
            (0..5)
                .map(|p| {
                    let tp = TopicPartition::new("keyed", p);
                    m.get(&tp).unwrap().read().size_bytes()
                })
                .collect()
        };
        for p in 0..5 {
            let tp = TopicPartition::new("keyed", p);
            let log = m
                .get_or_create(&tp, "AAAAAAAAAAAAAAAAAAAAAA", cfg.clone())
                .unwrap();
            let mut log = log.write();
            for i in 0..50u8 {
                let mut b = BatchBuilder::default().build(&[SimpleRecord {
                    timestamp: 1,
                    key: Some(vec![i % 5]),
                    value: Some(vec![i; 30]),
                    headers: vec![],
                }]);
                log.append_as_leader(&mut b, 0, AppendOrigin::Client, 1)
                    .unwrap();
            }
            log.roll(1).unwrap();
            let end = log.log_end_offset();
            log.set_high_watermark(end);
        }
        let before = sizes(&m);
        m.run_compaction(2, &cleaner(0));
        assert_eq!(sizes(&m), before, "no cleaner thread, no cleaning");
        m.run_compaction(2, &cleaner(3));
        let after = sizes(&m);
        assert!(
            after.iter().zip(&before).all(|(a, b)| a < b),
            "every log compacted: {before:?} -> {after:?}"
        );
    }

    /// A config source that records how many logs open at once, each
    /// waiting (up to 5 s) until `wanted` have been opening together.
    struct ConcurrentOpens {
        wanted: usize,
        opening: std::sync::Mutex<usize>,
        changed: std::sync::Condvar,
        most: AtomicUsize,
    }

    impl LogConfigSource for ConcurrentOpens {
        fn log_config(&self, _topic: &str) -> LogConfig {
            let mut now = self.opening.lock().unwrap();
            *now += 1;
            self.most.fetch_max(*now, Ordering::Relaxed);
            self.changed.notify_all();
            let (mut now, _) = self
                .changed
                .wait_timeout_while(now, std::time::Duration::from_secs(5), |_| {
                    self.most.load(Ordering::Relaxed) < self.wanted
                })
                .unwrap();
            *now -= 1;
            LogConfig::default()
        }
    }

    #[test]
    fn logs_load_with_the_recovery_threads_of_each_dir() {
        let root = tempfile::tempdir().unwrap();
        let dirs = vec![root.path().join("a")];
        let cfg = LogConfig::default();
        let m = LogManager::open(dirs.clone(), &cfg, 1).unwrap();
        for p in 0..8 {
            let tp = TopicPartition::new("many", p);
            m.get_or_create(&tp, "AAAAAAAAAAAAAAAAAAAAAA", cfg.clone())
                .unwrap();
        }
        m.shutdown(3, b"").unwrap();
        drop(m);
        let source = ConcurrentOpens {
            wanted: 3,
            opening: std::sync::Mutex::new(0),
            changed: std::sync::Condvar::new(),
            most: AtomicUsize::new(0),
        };
        let m = LogManager::open(dirs, &source, 3).unwrap();
        assert_eq!(m.partitions().len(), 8);
        assert_eq!(source.most.into_inner(), 3, "three logs opened at once");
    }

    #[test]
    fn the_clean_shutdown_marker_says_what_the_last_shutdown_wrote_in_every_dir() {
        let root = tempfile::tempdir().unwrap();
        let dirs = vec![root.path().join("a"), root.path().join("b")];
        let cfg = LogConfig::default();
        let m = LogManager::open(dirs.clone(), &cfg, 1).unwrap();
        assert_eq!(
            m.clean_shutdown_marker(),
            None,
            "a new dir was never shut down"
        );
        m.shutdown(1, b"incarnation-1").unwrap();
        drop(m);
        let m = LogManager::open(dirs.clone(), &cfg, 1).unwrap();
        assert_eq!(m.clean_shutdown_marker(), Some(&b"incarnation-1"[..]));
        // The marker is gone while the manager runs: a crash now is unclean.
        drop(m);
        let m = LogManager::open(dirs.clone(), &cfg, 1).unwrap();
        assert_eq!(m.clean_shutdown_marker(), None);
        m.shutdown(1, b"incarnation-2").unwrap();
        drop(m);
        std::fs::remove_file(dirs[1].join(CLEAN_SHUTDOWN_FILE)).unwrap();
        let m = LogManager::open(dirs, &cfg, 1).unwrap();
        assert_eq!(
            m.clean_shutdown_marker(),
            None,
            "dir b was not shut down cleanly"
        );
    }

    #[test]
    fn a_second_manager_on_a_locked_dir_is_refused() {
        let root = tempfile::tempdir().unwrap();
        let dirs = vec![root.path().join("a"), root.path().join("b")];
        let cfg = LogConfig::default();
        let first = LogManager::open(dirs.clone(), &cfg, 1).unwrap();
        // Sharing only the second dir is refused too, naming that dir.
        let other = vec![root.path().join("c"), dirs[1].clone()];
        let err = LogManager::open(other, &cfg, 1)
            .err()
            .expect("dir b is locked");
        assert!(matches!(err, StorageError::DirLocked { .. }), "{err}");
        let text = err.to_string();
        assert!(text.contains(&dirs[1].display().to_string()), "{text}");
        assert!(text.contains("another process"), "{text}");
        // Dirs not locked by this manager cannot be opened through its locks.
        let locks = Arc::new(DirLocks::acquire([root.path().join("c").as_path()]).unwrap());
        assert!(
            LogManager::open_locked(dirs.clone(), locks, &cfg, 1, OpenLogFiles::default()).is_err()
        );
        drop(first);
        let second = LogManager::open(dirs.clone(), &cfg, 1).expect("the first manager is gone");
        second.shutdown(1, b"").unwrap();
        LogManager::open(dirs, &cfg, 1).expect("a manager lets go of its dirs once shut down");
    }

    /// A topic deleted and created again under the same name while this
    /// broker was down: its old log must not be served as the new topic's.
    #[test]
    fn a_log_of_another_topic_id_is_set_aside_as_stray() {
        let root = tempfile::tempdir().unwrap();
        let dirs = vec![root.path().to_path_buf()];
        let cfg = LogConfig::default();
        let (old_id, new_id) = ("AAAAAAAAAAAAAAAAAAAAAA", "BBBBBBBBBBBBBBBBBBBBBB");
        let tp = TopicPartition::new("orders", 0);
        let m = LogManager::open(dirs.clone(), &cfg, 1).unwrap();
        let log = m.get_or_create(&tp, old_id, cfg.clone()).unwrap();
        log.write()
            .append_as_leader(&mut batch(), 0, AppendOrigin::Client, 1)
            .unwrap();
        m.shutdown(1, b"").unwrap();
        drop((m, log));

        let m = LogManager::open(dirs.clone(), &cfg, 1).unwrap();
        // The same topic id keeps its records.
        let same = m.get_or_create(&tp, old_id, cfg.clone()).unwrap();
        assert_eq!(same.read().log_end_offset(), 1);
        drop(same);
        // Another id gets a new, empty log; the old one is kept aside.
        let fresh = m.get_or_create(&tp, new_id, cfg.clone()).unwrap();
        assert_eq!(fresh.read().log_end_offset(), 0);
        let dir = fresh.read().dir().to_path_buf();
        assert_eq!(
            read_partition_metadata(&dir).unwrap().as_deref(),
            Some(new_id)
        );
        let strays: Vec<PathBuf> = fs::read_dir(root.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.to_string_lossy().ends_with(STRAY_SUFFIX))
            .collect();
        assert_eq!(strays.len(), 1, "{strays:?}");
        assert_eq!(
            read_partition_metadata(&strays[0]).unwrap().as_deref(),
            Some(old_id)
        );
        m.shutdown(1, b"").unwrap();
        drop((m, fresh));

        // A restart loads the new log only and leaves the stray dir alone.
        let m = LogManager::open(dirs, &cfg, 1).unwrap();
        assert_eq!(m.partitions(), vec![tp.clone()]);
        let log = m.get_or_create(&tp, new_id, cfg).unwrap();
        assert_eq!(log.read().log_end_offset(), 0);
        assert!(strays[0].exists());
    }

    #[test]
    fn dir_names_round_trip() {
        let tp = TopicPartition::from_dir_name("my-topic-12").unwrap();
        assert_eq!(tp, TopicPartition::new("my-topic", 12));
        assert_eq!(tp.dir_name(), "my-topic-12");
        assert!(TopicPartition::from_dir_name("nodash").is_none());
        assert!(TopicPartition::from_dir_name("t-x1").is_none());
    }

    #[test]
    fn logs_and_offsets_survive_a_clean_restart() {
        let root = tempfile::tempdir().unwrap();
        let dirs = vec![root.path().join("a"), root.path().join("b")];
        let cfg = LogConfig::default();
        let m = LogManager::open(dirs.clone(), &cfg, 2).unwrap();
        for p in 0..4 {
            let tp = TopicPartition::new("orders", p);
            let log = m
                .get_or_create(&tp, "AAAAAAAAAAAAAAAAAAAAAA", cfg.clone())
                .unwrap();
            let mut log = log.write();
            for _ in 0..3 {
                log.append_as_leader(&mut batch(), 0, AppendOrigin::Client, 1)
                    .unwrap();
            }
            log.set_high_watermark(2);
        }
        // Spread across both dirs.
        assert!(
            m.log_dir_of(&TopicPartition::new("orders", 0))
                != m.log_dir_of(&TopicPartition::new("orders", 1))
        );
        m.shutdown(2, b"").unwrap();
        assert!(dirs[0].join(CLEAN_SHUTDOWN_FILE).exists());
        drop(m);
        let m = LogManager::open(dirs.clone(), &cfg, 2).unwrap();
        assert!(
            !dirs[0].join(CLEAN_SHUTDOWN_FILE).exists(),
            "marker removed once running"
        );
        assert_eq!(m.partitions().len(), 4);
        let log = m.get(&TopicPartition::new("orders", 3)).unwrap();
        assert_eq!(log.read().log_end_offset(), 3);
        assert_eq!(log.read().high_watermark(), 2);
        let pdir = log.read().dir().to_path_buf();
        assert_eq!(
            read_partition_metadata(&pdir).unwrap().as_deref(),
            Some("AAAAAAAAAAAAAAAAAAAAAA")
        );
        assert!(m.delete(&TopicPartition::new("orders", 3)).unwrap());
        assert!(!pdir.exists());
        assert!(m.get(&TopicPartition::new("orders", 3)).is_none());
    }
}
