//! Signals: a 64-bit value and a 64-bit GPU timestamp in system memory both the CPU and the
//! engines reach. Engines write them at the end of work (`RELEASE_MEM`, SDMA `WRITE`) and wait
//! on them (`WAIT_REG_MEM`, `POLL_REGMEM`: the low 32 bits, `>=`); the CPU reads and waits
//! ([`crate::Device::wait`]).

use std::sync::{Arc, Mutex, Weak};

use am_isa::sync::lock;

use crate::Result;
use crate::memory::Buffer;

/// Bytes of one signal: value, timestamp.
pub(crate) const SIGNAL_SIZE: u64 = 16;

/// Signals in one buffer, handed out and taken back.
pub(crate) struct SignalPool {
    buf: Buffer,
    free: Mutex<Vec<u64>>,
}

impl SignalPool {
    pub(crate) fn new(buf: Buffer) -> Arc<SignalPool> {
        let n = buf.size() / SIGNAL_SIZE;
        Arc::new(SignalPool {
            buf,
            free: Mutex::new((0..n).rev().map(|i| i * SIGNAL_SIZE).collect()),
        })
    }

    pub(crate) fn take(self: &Arc<Self>) -> Option<Signal> {
        let off = lock(&self.free).pop()?;
        let s = Signal {
            slot: Arc::new(Slot {
                pool: Arc::downgrade(self),
                buf: self.buf.view(off, SIGNAL_SIZE).ok()?,
                off,
            }),
        };
        // A signal starts at 0 with no timestamp.
        s.set(0).ok()?;
        s.write(8, 0).ok()?;
        Some(s)
    }

    /// Signals not handed out.
    pub(crate) fn available(&self) -> usize {
        lock(&self.free).len()
    }
}

struct Slot {
    pool: Weak<SignalPool>,
    buf: Buffer,
    off: u64,
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some(p) = self.pool.upgrade() {
            lock(&p.free).push(self.off);
        }
    }
}

/// A 64-bit timeline value with a GPU timestamp, in memory the GPU writes.
#[derive(Clone)]
pub struct Signal {
    slot: Arc<Slot>,
}

impl std::fmt::Debug for Signal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Signal({:#x})", self.va())
    }
}

impl Signal {
    /// GPU address of the value.
    pub fn va(&self) -> u64 {
        self.slot.buf.va()
    }

    /// Whether the signal's memory is mapped in `dev` (the engines of another device cannot
    /// reach it at this address).
    pub fn belongs_to(&self, dev: &crate::Device) -> bool {
        self.slot.buf.belongs_to(dev)
    }

    /// GPU address of the timestamp.
    pub fn timestamp_va(&self) -> u64 {
        self.slot.buf.va() + 8
    }

    fn read(&self, off: u64) -> Result<u64> {
        let (mem, base) = self.slot.buf.sysmem().ok_or_else(|| crate::Error::State {
            device: "signal".into(),
            reason: "signal memory is not system memory".into(),
        })?;
        let mut b = [0u8; 8];
        mem.read_bytes(base + off, &mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    fn write(&self, off: u64, v: u64) -> Result<()> {
        let (mem, base) = self.slot.buf.sysmem().ok_or_else(|| crate::Error::State {
            device: "signal".into(),
            reason: "signal memory is not system memory".into(),
        })?;
        mem.write_bytes(base + off, &v.to_le_bytes())?;
        Ok(())
    }

    /// The value now.
    pub fn value(&self) -> Result<u64> {
        self.read(0)
    }

    /// Set the value from the CPU (releases engines waiting for it).
    pub fn set(&self, v: u64) -> Result<()> {
        self.write(0, v)
    }

    /// Forget the timestamp (0: none written).
    pub(crate) fn clear_timestamp(&self) -> Result<()> {
        self.write(8, 0)
    }

    /// The last GPU timestamp written to it (100 MHz ticks).
    pub fn timestamp(&self) -> Result<u64> {
        self.read(8)
    }
}
