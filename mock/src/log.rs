//! A record the models keep for tests (what the PSP loaded, the SMU messages, the mailbox
//! traffic) that a long-running `am serve mock:…` must not let grow with every boot.

/// The latest entries of a record: at least `cap` (once that many came), at most twice
/// that. Dropping the older half at once keeps a push O(1) on average and the record a
/// slice, which is what tests compare.
#[derive(Clone, Debug)]
pub(crate) struct BoundedLog<T> {
    entries: Vec<T>,
    cap: usize,
}

impl<T> Default for BoundedLog<T> {
    /// 1024 entries: a boot makes a few dozen.
    fn default() -> Self {
        BoundedLog::new(1024)
    }
}

impl<T> BoundedLog<T> {
    pub(crate) fn new(cap: usize) -> Self {
        BoundedLog {
            entries: Vec::new(),
            cap: cap.max(1),
        }
    }

    pub(crate) fn push(&mut self, entry: T) {
        if self.entries.len() >= 2 * self.cap {
            self.entries.drain(..self.cap);
        }
        self.entries.push(entry);
    }

    pub(crate) fn as_slice(&self) -> &[T] {
        &self.entries
    }

    pub(crate) fn take(&mut self) -> Vec<T> {
        std::mem::take(&mut self.entries)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bounded_log_keeps_the_latest_entries_and_counts_the_rest() {
        let mut log = BoundedLog::new(4);
        for i in 0..1000 {
            log.push(i);
        }
        let kept = log.as_slice();
        assert!((4..=8).contains(&kept.len()), "{} kept", kept.len());
        assert_eq!(kept.last(), Some(&999));
        assert_eq!(kept, (1000 - kept.len()..1000).collect::<Vec<_>>());
        assert_eq!(log.take().last(), Some(&999));
        assert!(log.as_slice().is_empty());
    }
}
