//! Profiling: per-dispatch GPU timestamps ([`crate::Device::set_profiling`]) and their export
//! as a Chrome trace (the JSON `chrome://tracing` and Perfetto open).
//!
//! With profiling on, every launch a command buffer encodes is bracketed by two
//! end-of-pipe timestamps (`RELEASE_MEM` with the GPU clock): the first is written once the
//! work before it has finished, the second once the launch has. The clock runs at
//! 100 MHz (10 ns a tick) on every supported GPU.

use serde_json::json;

use crate::Result;
use crate::signal::Signal;

/// GPU clock ticks per microsecond.
pub const TICKS_PER_US: u64 = 100;

/// A profiled launch whose timestamps may not be written yet.
#[derive(Clone)]
pub(crate) struct Pending {
    pub(crate) kernel: String,
    pub(crate) queue: String,
    pub(crate) start: Signal,
    pub(crate) end: Signal,
}

/// A finished, profiled launch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// The kernel.
    pub kernel: String,
    /// The queue it ran on.
    pub queue: String,
    /// GPU clock when the work before it had finished.
    pub start: u64,
    /// GPU clock when it had finished.
    pub end: u64,
}

impl Event {
    /// Its duration in nanoseconds.
    pub fn nanos(&self) -> u64 {
        self.end.saturating_sub(self.start) * 1000 / TICKS_PER_US
    }
}

impl Pending {
    /// The event, once both timestamps are written.
    pub(crate) fn finished(&self) -> Result<Option<Event>> {
        let (start, end) = (self.start.timestamp()?, self.end.timestamp()?);
        Ok((start != 0 && end != 0).then(|| Event {
            kernel: self.kernel.clone(),
            queue: self.queue.clone(),
            start,
            end,
        }))
    }
}

/// `events` as a Chrome trace: one complete (`"X"`) event per launch, the device as the
/// process, the queue as the thread, times in microseconds from the first start.
pub fn chrome_trace(device: &str, events: &[Event]) -> String {
    let t0 = events.iter().map(|e| e.start).min().unwrap_or(0);
    let us = |t: u64| (t - t0) as f64 / TICKS_PER_US as f64;
    let list: Vec<_> = events
        .iter()
        .map(|e| {
            json!({
                "name": e.kernel,
                "cat": "kernel",
                "ph": "X",
                "ts": us(e.start),
                "dur": e.end.saturating_sub(e.start) as f64 / TICKS_PER_US as f64,
                "pid": device,
                "tid": e.queue,
            })
        })
        .collect();
    json!({ "traceEvents": list, "displayTimeUnit": "ns" }).to_string()
}
