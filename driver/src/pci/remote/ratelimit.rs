//! Rate limiting of log lines a remote peer can trigger at will (refused requests, mock
//! contract violations): a burst is logged, the rest of the window is counted, and the next
//! line that gets through says how many were suppressed.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use am_isa::sync::lock;

/// A token-window limiter: at most `burst` lines per `window`.
#[derive(Debug)]
pub struct RateLimit {
    burst: u32,
    window: Duration,
    state: Mutex<Window>,
}

#[derive(Debug)]
struct Window {
    start: Option<Instant>,
    passed: u32,
    suppressed: u64,
}

/// What a caller may do with one line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Log it; `suppressed` lines were dropped since the last one logged.
    Log {
        /// Lines suppressed before this one.
        suppressed: u64,
    },
    /// Drop it (it is counted).
    Suppress,
}

impl RateLimit {
    /// At most `burst` lines per `window`.
    pub const fn new(burst: u32, window: Duration) -> RateLimit {
        RateLimit {
            burst,
            window,
            state: Mutex::new(Window {
                start: None,
                passed: 0,
                suppressed: 0,
            }),
        }
    }

    /// Ten lines a second: enough to see what a misbehaving client does, small enough that a
    /// million refusals cost kilobytes of log, not hundreds of megabytes.
    pub const fn default_for_refusals() -> RateLimit {
        RateLimit::new(10, Duration::from_secs(1))
    }

    /// Whether the line may be logged now.
    pub fn check(&self) -> Verdict {
        self.check_at(Instant::now())
    }

    fn check_at(&self, now: Instant) -> Verdict {
        let mut w = lock(&self.state);
        if w.start.is_none_or(|s| now.duration_since(s) >= self.window) {
            w.start = Some(now);
            w.passed = 0;
        }
        if w.passed < self.burst {
            w.passed += 1;
            let suppressed = std::mem::take(&mut w.suppressed);
            Verdict::Log { suppressed }
        } else {
            w.suppressed += 1;
            Verdict::Suppress
        }
    }
}

impl Verdict {
    /// `" (N similar lines suppressed)"` when some were, else empty: appended to the line
    /// that is logged.
    pub fn suffix(self) -> String {
        match self {
            Verdict::Log { suppressed: 0 } | Verdict::Suppress => String::new(),
            Verdict::Log { suppressed } => {
                format!(" ({suppressed} similar lines suppressed before this one)")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_passes_the_rest_is_counted_and_reported_with_the_next_window() {
        let limit = RateLimit::new(3, Duration::from_secs(1));
        let t0 = Instant::now();
        let first: Vec<Verdict> = (0..1000).map(|_| limit.check_at(t0)).collect();
        assert_eq!(
            first[..3],
            [Verdict::Log { suppressed: 0 }; 3],
            "the first three pass"
        );
        assert!(
            first[3..].iter().all(|v| *v == Verdict::Suppress),
            "the rest of the window is suppressed"
        );
        let next = limit.check_at(t0 + Duration::from_millis(1500));
        assert_eq!(next, Verdict::Log { suppressed: 997 });
        assert_eq!(
            next.suffix(),
            " (997 similar lines suppressed before this one)"
        );
        assert_eq!(
            limit.check_at(t0 + Duration::from_millis(1600)),
            Verdict::Log { suppressed: 0 },
            "the count is reported once"
        );
    }
}
