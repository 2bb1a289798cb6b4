//! A segment's `.log` file under a budget of open descriptors.
//!
//! Every partition keeps its active segment and every client connection is
//! a descriptor: at 10,000 partitions the `.log` files alone take half of
//! a 20,000 open-file limit, and connections beyond the rest fail. Kafka
//! keeps every segment open and asks for a large limit; here the files
//! beyond a budget that nobody used since the last sweep are closed and
//! reopened by path on their next use. A file written since its last fsync
//! is fsynced before it closes, so a write-back error is still seen by the
//! broker (an inode nobody holds open may forget it).
//!
//! Readers take the file as an `Arc<File>`: a sweep only drops the
//! budget's own reference, so a read or `sendfile` in flight keeps its
//! descriptor until it is done.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};

use parking_lot::Mutex;

/// The open-file budget shared by every segment of a broker's logs
/// (cheap to clone).
#[derive(Clone, Debug)]
pub struct OpenLogFiles {
    shared: Arc<Budget>,
}

#[derive(Debug)]
struct Budget {
    /// Changes at runtime (`log.segment.max.open.files` is dynamic); the
    /// next sweep closes down to a lowered budget.
    max_open: AtomicUsize,
    open: AtomicUsize,
    /// Segments alive (their files open or not).
    live: AtomicUsize,
    /// Every segment's file, in creation order, for the sweep's clock hand.
    ring: Mutex<Ring>,
}

#[derive(Debug, Default)]
struct Ring {
    files: Vec<Weak<LogFile>>,
    hand: usize,
}

impl Default for OpenLogFiles {
    fn default() -> Self {
        Self::new(usize::MAX)
    }
}

impl OpenLogFiles {
    /// A budget of `max_open` open `.log` files (`usize::MAX`: no limit, as
    /// in Kafka).
    pub fn new(max_open: usize) -> Self {
        Self {
            shared: Arc::new(Budget {
                max_open: AtomicUsize::new(max_open),
                open: AtomicUsize::new(0),
                live: AtomicUsize::new(0),
                ring: Mutex::new(Ring::default()),
            }),
        }
    }

    pub fn max_open(&self) -> usize {
        self.shared.max_open.load(Ordering::Relaxed)
    }

    /// A new budget, applied from the next sweep on.
    pub fn set_max_open(&self, max_open: usize) {
        self.shared.max_open.store(max_open, Ordering::Relaxed);
    }

    /// `.log` files open now.
    pub fn open(&self) -> usize {
        self.shared.open.load(Ordering::Relaxed)
    }

    /// Opens `path` (creating it empty when `create`) as a segment's file.
    /// A file created counts as written: its first flush fsyncs it.
    pub fn open_file(&self, path: &Path, create: bool) -> io::Result<Arc<LogFile>> {
        let mut options = OpenOptions::new();
        options.read(true).write(true);
        if create {
            options.create(true).truncate(true);
        }
        let file = options.open(path)?;
        self.shared.open.fetch_add(1, Ordering::Relaxed);
        let live = self.shared.live.fetch_add(1, Ordering::Relaxed) + 1;
        let log_file = Arc::new(LogFile {
            path: path.to_path_buf(),
            file: Mutex::new(Some(Arc::new(file))),
            used: AtomicBool::new(true),
            written: AtomicBool::new(create),
            budget: self.shared.clone(),
        });
        let mut ring = self.shared.ring.lock();
        // Deleted segments leave dead entries; dropping them once they
        // outnumber the live ones keeps it O(1) per segment created.
        if ring.files.len() >= 2 * live + 64 {
            ring.files.retain(|f| f.strong_count() > 0);
            ring.hand = 0;
        }
        ring.files.push(Arc::downgrade(&log_file));
        Ok(log_file)
    }

    /// The files to close so that the open ones fit the budget: those not
    /// used since the previous sweep, found by a clock hand that clears
    /// each used file's mark as it passes (so a file must stay idle for a
    /// whole sweep period to be chosen). Costs nothing while the open files
    /// fit; otherwise at most one turn of the ring.
    pub fn idle_beyond_budget(&self) -> Vec<Arc<LogFile>> {
        let budget = &self.shared;
        let excess = budget
            .open
            .load(Ordering::Relaxed)
            .saturating_sub(budget.max_open.load(Ordering::Relaxed));
        let mut idle = Vec::new();
        if excess == 0 {
            return idle;
        }
        let mut ring = budget.ring.lock();
        let Ring { files, hand } = &mut *ring;
        for _ in 0..files.len() {
            if idle.len() == excess {
                break;
            }
            *hand = (*hand + 1) % files.len();
            let Some(file) = files[*hand].upgrade() else {
                continue;
            };
            if file.is_open() && !file.used.swap(false, Ordering::Relaxed) {
                idle.push(file);
            }
        }
        idle
    }
}

/// One segment's `.log` file, open or closed.
#[derive(Debug)]
pub struct LogFile {
    path: PathBuf,
    file: Mutex<Option<Arc<File>>>,
    /// Used since the last sweep passed it.
    used: AtomicBool,
    /// Written since its last fsync.
    written: AtomicBool,
    budget: Arc<Budget>,
}

impl LogFile {
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The open file, reopened by path if a sweep closed it.
    pub fn handle(&self) -> io::Result<Arc<File>> {
        if !self.used.load(Ordering::Relaxed) {
            self.used.store(true, Ordering::Relaxed);
        }
        let mut slot = self.file.lock();
        if let Some(file) = &*slot {
            return Ok(file.clone());
        }
        let file = Arc::new(OpenOptions::new().read(true).write(true).open(&self.path)?);
        self.budget.open.fetch_add(1, Ordering::Relaxed);
        *slot = Some(file.clone());
        Ok(file)
    }

    pub fn write_all_at(&self, data: &[u8], position: u64) -> io::Result<()> {
        self.mark_written();
        std::os::unix::fs::FileExt::write_all_at(&*self.handle()?, data, position)
    }

    pub fn set_len(&self, len: u64) -> io::Result<()> {
        self.mark_written();
        self.handle()?.set_len(len)
    }

    /// fsyncs the file's data. A closed file was fsynced when it closed.
    pub fn sync_data(&self) -> io::Result<()> {
        if !self.written.swap(false, Ordering::Relaxed) {
            return Ok(());
        }
        let file = self.file.lock().clone();
        let synced = match file {
            Some(file) => file.sync_data(),
            None => self.handle()?.sync_data(),
        };
        if synced.is_err() {
            self.mark_written();
        }
        synced
    }

    /// Closes the file if nobody used it since the sweep chose it, fsyncing
    /// it first if it was written. Returns whether it closed; an fsync
    /// error leaves it open and is the caller's to report.
    pub fn close_if_idle(&self) -> io::Result<bool> {
        self.sync_data()?;
        let mut slot = self.file.lock();
        if self.used.load(Ordering::Relaxed) || self.written.load(Ordering::Relaxed) {
            return Ok(false);
        }
        let closed = slot.take().is_some();
        if closed {
            self.budget.open.fetch_sub(1, Ordering::Relaxed);
        }
        Ok(closed)
    }

    /// Closes the file now if the open files exceed the budget and it was
    /// not written (a sealed segment just loaded).
    pub fn close_if_over_budget(&self) -> io::Result<()> {
        let budget = &self.budget;
        if budget.open.load(Ordering::Relaxed) > budget.max_open.load(Ordering::Relaxed) {
            self.used.store(false, Ordering::Relaxed);
            self.close_if_idle()?;
        }
        Ok(())
    }

    fn is_open(&self) -> bool {
        self.file.lock().is_some()
    }

    /// Counts the file as written since its last fsync (a segment being
    /// recovered may hold what the previous process never flushed).
    pub(crate) fn mark_written(&self) {
        if !self.written.load(Ordering::Relaxed) {
            self.written.store(true, Ordering::Relaxed);
        }
    }
}

impl Drop for LogFile {
    fn drop(&mut self) {
        if self.file.get_mut().is_some() {
            self.budget.open.fetch_sub(1, Ordering::Relaxed);
        }
        self.budget.live.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileExt;

    fn files_in(dir: &Path, budget: &OpenLogFiles, n: usize) -> Vec<Arc<LogFile>> {
        (0..n)
            .map(|i| {
                let file = budget
                    .open_file(&dir.join(format!("{i}.log")), true)
                    .unwrap();
                file.write_all_at(format!("segment {i}").as_bytes(), 0)
                    .unwrap();
                file
            })
            .collect()
    }

    fn close_idle(budget: &OpenLogFiles) -> usize {
        let idle = budget.idle_beyond_budget();
        idle.iter().filter(|f| f.close_if_idle().unwrap()).count()
    }

    #[test]
    fn files_idle_for_a_whole_sweep_close_down_to_the_budget_and_reopen_on_use() {
        let dir = tempfile::tempdir().unwrap();
        let budget = OpenLogFiles::new(3);
        let files = files_in(dir.path(), &budget, 10);
        assert_eq!(budget.open(), 10);
        // Every file was used since it opened: the first sweep only clears
        // the marks.
        assert_eq!(close_idle(&budget), 0);
        files[0].handle().unwrap();
        assert_eq!(close_idle(&budget), 7);
        assert_eq!(budget.open(), 3);
        assert!(
            files[0].is_open(),
            "a file used since the last sweep stays open"
        );
        // Within the budget a sweep costs nothing and closes nothing.
        assert!(budget.idle_beyond_budget().is_empty());
        for (i, file) in files.iter().enumerate() {
            let mut buf = vec![0; format!("segment {i}").len()];
            file.handle().unwrap().read_exact_at(&mut buf, 0).unwrap();
            assert_eq!(buf, format!("segment {i}").as_bytes());
        }
        assert_eq!(budget.open(), 10);
        drop(files);
        assert_eq!(budget.open(), 0);
        assert_eq!(budget.shared.live.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn a_budget_lowered_at_runtime_is_met_by_the_next_sweeps() {
        let dir = tempfile::tempdir().unwrap();
        let budget = OpenLogFiles::new(usize::MAX);
        let _files = files_in(dir.path(), &budget, 10);
        assert_eq!(close_idle(&budget), 0, "no budget: nothing closes");
        budget.set_max_open(4);
        assert_eq!(budget.max_open(), 4);
        // The files were used before the budget fell: one sweep to clear
        // their marks, then the idle ones close.
        assert_eq!(close_idle(&budget), 0);
        assert_eq!(close_idle(&budget), 6);
        assert_eq!(budget.open(), 4);
        budget.set_max_open(usize::MAX);
        assert!(budget.idle_beyond_budget().is_empty());
    }

    #[test]
    fn a_written_file_is_fsynced_before_it_closes_and_a_read_in_flight_keeps_its_descriptor() {
        let dir = tempfile::tempdir().unwrap();
        let budget = OpenLogFiles::new(1);
        let files = files_in(dir.path(), &budget, 2);
        assert!(files.iter().all(|f| f.written.load(Ordering::Relaxed)));
        let in_flight: Vec<Arc<File>> = files.iter().map(|f| f.handle().unwrap()).collect();
        close_idle(&budget);
        assert_eq!(close_idle(&budget), 1);
        let closed = files.iter().position(|f| !f.is_open()).unwrap();
        assert!(
            !files[closed].written.load(Ordering::Relaxed),
            "fsynced as it closed"
        );
        // A read that took the file before it closed still reads it, even
        // once the segment is deleted.
        std::fs::remove_file(files[closed].path()).unwrap();
        let mut buf = [0; 9];
        in_flight[closed].read_exact_at(&mut buf, 0).unwrap();
        assert_eq!(buf, format!("segment {closed}").as_bytes());
    }

    #[test]
    fn a_file_used_after_the_sweep_chose_it_stays_open() {
        let dir = tempfile::tempdir().unwrap();
        let budget = OpenLogFiles::new(1);
        let files = files_in(dir.path(), &budget, 2);
        close_idle(&budget);
        let idle = budget.idle_beyond_budget();
        assert_eq!(idle.len(), 1);
        idle[0].handle().unwrap();
        assert!(!idle[0].close_if_idle().unwrap());
        assert_eq!(budget.open(), 2);
        drop(files);
    }

    #[test]
    fn dead_entries_do_not_pile_up_in_the_ring() {
        let dir = tempfile::tempdir().unwrap();
        let budget = OpenLogFiles::default();
        let kept = files_in(dir.path(), &budget, 1);
        for _ in 0..1_000 {
            drop(
                budget
                    .open_file(&dir.path().join("churn.log"), true)
                    .unwrap(),
            );
        }
        assert!(budget.shared.ring.lock().files.len() <= 2 + 64 + 1);
        drop(kept);
    }
}
