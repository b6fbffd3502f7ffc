//! Locking shared by every crate that holds device state behind a mutex.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Lock `m`, taking the data even if a thread panicked while holding it.
///
/// The guarded state (queues, memory maps, caches) stays consistent at every point a panic can
/// unwind from, so one panicking thread (a failed test, a caller's bug) must not turn every
/// later access into a second panic.
pub fn lock<T: ?Sized>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
