//! Keeping the state file up to date. While it is small the state is written on every change,
//! under the emulator's lock, as it always was. Once a write is larger than
//! [`WRITE_BEHIND_BYTES`] (a 30,000-resource state is about 25 MB of JSON, which a debug build
//! takes about a second to write) it is written behind the changes by a background task: a
//! snapshot cloned under the lock, written on a blocking thread, at most once per
//! [`WRITE_BEHIND_MIN_INTERVAL`] and only after a pause of [`WRITE_BEHIND_PAUSE_FACTOR`] times
//! the previous write's duration, so that writing takes at most about a sixth of one core however
//! fast the state changes. Pending changes are written on [`super::Emulator::flush`] and when the
//! emulator is dropped; a killed process loses at most the changes of that pause.
//!
//! Writes are serialized, and a write never replaces the file with an older state than the one
//! it holds (each change has a generation number).

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use super::state::State;

/// A state file larger than this is written behind the changes.
pub const WRITE_BEHIND_BYTES: usize = 1 << 20;

/// The shortest pause between two written-behind saves.
pub const WRITE_BEHIND_MIN_INTERVAL: Duration = Duration::from_secs(1);

/// A written-behind save waits at least this many times as long as the previous save took.
pub const WRITE_BEHIND_PAUSE_FACTOR: u32 = 5;

/// The state file's writer.
#[derive(Debug)]
pub struct Persister {
    path: PathBuf,
    book: Mutex<Book>,
    /// The generation last written; held while writing.
    written: Arc<Mutex<Option<u64>>>,
    /// Woken when a change is to be written behind.
    pub wake: Notify,
}

#[derive(Debug, Default)]
struct Book {
    /// Whether changes are written behind.
    behind: bool,
    /// Bumped on every change.
    generation: u64,
    /// The generation of the last state written or being written.
    saved: u64,
    /// When the last write ended, and how long it took.
    last: Option<(Instant, Duration)>,
}

impl Book {
    fn dirty(&self) -> bool {
        self.generation > self.saved
    }
}

/// Writes `state` unless a state at least as new as `generation` was written already; the size
/// written, `None` when skipped.
fn write(
    written: &Mutex<Option<u64>>,
    path: &std::path::Path,
    state: &State,
    generation: u64,
) -> Result<Option<usize>, std::io::Error> {
    let mut last = written.lock().unwrap_or_else(|e| e.into_inner());
    if last.is_some_and(|w| w >= generation) {
        return Ok(None);
    }
    let size = state.save(path)?;
    *last = Some(generation);
    Ok(Some(size))
}

impl Persister {
    /// A writer for `path`; a file already larger than [`WRITE_BEHIND_BYTES`] is written behind
    /// from the start.
    pub fn new(path: PathBuf) -> Self {
        let behind = std::fs::metadata(&path)
            .is_ok_and(|m| m.len() > u64::try_from(WRITE_BEHIND_BYTES).unwrap_or(u64::MAX));
        Self {
            path,
            book: Mutex::new(Book {
                behind,
                ..Book::default()
            }),
            written: Arc::new(Mutex::new(None)),
            wake: Notify::new(),
        }
    }

    fn book(&self) -> MutexGuard<'_, Book> {
        self.book.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// After a change to `state` (the caller holds the emulator's lock): writes it now, or marks
    /// it to be written behind when the file is large and `background` (the task calling
    /// [`Self::write_behind`]) runs.
    pub fn changed(&self, state: &State, background: bool) {
        let (behind, generation) = {
            let mut book = self.book();
            book.generation += 1;
            (book.behind && background, book.generation)
        };
        if behind {
            self.wake.notify_one();
        } else {
            self.save_now(state, generation);
        }
    }

    /// Writes `state` now if changes are pending (the caller holds the emulator's lock).
    pub fn flush(&self, state: &State) {
        let generation = {
            let book = self.book();
            if !book.dirty() {
                return;
            }
            book.generation
        };
        self.save_now(state, generation);
    }

    fn save_now(&self, state: &State, generation: u64) {
        let started = Instant::now();
        let written = write(&self.written, &self.path, state, generation);
        let mut book = self.book();
        book.last = Some((Instant::now(), started.elapsed()));
        match written {
            Ok(Some(size)) => {
                book.saved = book.saved.max(generation);
                if size > WRITE_BEHIND_BYTES && !book.behind {
                    book.behind = true;
                    tracing::info!(
                        bytes = size,
                        "the sandbox state is large: writing it behind the changes from now on"
                    );
                }
            }
            Ok(None) => book.saved = book.saved.max(generation),
            Err(error) => {
                tracing::warn!(path = %self.path.display(), %error, "cannot persist sandbox state");
            }
        }
    }

    /// How long until the next written-behind save is due; `None` when nothing is pending.
    pub fn due(&self, now: Instant) -> Option<Duration> {
        let book = self.book();
        if !book.dirty() {
            return None;
        }
        Some(match book.last {
            None => Duration::ZERO,
            Some((end, took)) => {
                let pause = took
                    .saturating_mul(WRITE_BEHIND_PAUSE_FACTOR)
                    .max(WRITE_BEHIND_MIN_INTERVAL);
                (end + pause).saturating_duration_since(now)
            }
        })
    }

    /// The generation of the state about to be snapshotted (the caller holds the emulator's
    /// lock), now counted as saved.
    pub fn snapshot_taken(&self) -> u64 {
        let mut book = self.book();
        book.saved = book.generation;
        book.generation
    }

    /// Writes a snapshot of `generation` on a blocking thread; back to writing on every change
    /// once the file is small again.
    pub async fn write_behind(&self, snapshot: State, generation: u64) {
        let started = Instant::now();
        let (written, path) = (self.written.clone(), self.path.clone());
        let result =
            tokio::task::spawn_blocking(move || write(&written, &path, &snapshot, generation))
                .await
                .map_err(std::io::Error::other)
                .and_then(|written| written);
        let mut book = self.book();
        book.last = Some((Instant::now(), started.elapsed()));
        match result {
            Ok(Some(size)) => {
                if size <= WRITE_BEHIND_BYTES && !book.dirty() {
                    book.behind = false;
                }
            }
            Ok(None) => {}
            Err(error) => {
                // Pending again: retried after the pause.
                book.saved = book.saved.min(generation.saturating_sub(1));
                tracing::warn!(path = %self.path.display(), %error, "cannot persist sandbox state");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_older_state_never_replaces_a_newer_one() {
        let dir = std::env::temp_dir().join(format!("nodewright-persist-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("state.json");
        let written = Mutex::new(None);
        assert!(
            write(&written, &path, &State::default(), 2)
                .unwrap()
                .is_some()
        );
        assert!(
            write(&written, &path, &State::default(), 1)
                .unwrap()
                .is_none()
        );
        assert!(
            write(&written, &path, &State::default(), 3)
                .unwrap()
                .is_some()
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_pending_change_is_due_after_the_pause() {
        let persister = Persister::new(std::env::temp_dir().join("nodewright-persist-none.json"));
        assert_eq!(persister.due(Instant::now()), None);
        {
            let mut book = persister.book();
            book.generation = 1;
            book.last = Some((Instant::now(), Duration::from_secs(2)));
        }
        let due = persister.due(Instant::now()).unwrap();
        assert!(due > Duration::from_secs(9) && due <= Duration::from_secs(10));
        persister.snapshot_taken();
        assert_eq!(persister.due(Instant::now()), None);
    }
}
