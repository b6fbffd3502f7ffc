//! The recorder: a [`PciDevice`] around any other that writes what passes through it.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use am_isa::sync::lock;

use super::{Header, READ_BYTES_KEPT, Record, TraceEvent, TraceWriter, digest};
use crate::pci::{IndexStep, SmuAnswer};
use crate::*;

/// What the device and its BARs share: the file, and the system-memory pages mapped so far.
struct Sink {
    path: PathBuf,
    state: Mutex<SinkState>,
}

struct SinkState {
    writer: Option<TraceWriter<BufWriter<File>>>,
    /// The first write error (later records are dropped; [`TracingDevice::finish`] reports it).
    failed: Option<std::io::Error>,
    /// Low 32 bits of each mapped page → the page's full bus address, for tagging.
    pages: BTreeMap<u64, u64>,
    maps: u32,
}

impl Sink {
    fn record(&self, r: &Record) {
        let mut guard = lock(&self.state);
        let s = &mut *guard;
        if s.failed.is_some() {
            return;
        }
        if let Some(w) = s.writer.as_mut()
            && let Err(e) = w.record(r)
        {
            s.failed = Some(e);
        }
    }

    /// Whether `value` (written `width` bytes wide) lies in a mapped page: a 64-bit value
    /// as a bus address, a 32-bit one as the low half of one.
    fn is_alloc(&self, value: u64, width: u8) -> bool {
        let s = lock(&self.state);
        if s.pages.is_empty() || value == 0 {
            return false;
        }
        let page = value & !0xfff;
        if width == 8 {
            s.pages.get(&(page & 0xffff_ffff)) == Some(&page)
        } else {
            s.pages.contains_key(&page)
        }
    }

    fn flush(&self) -> std::io::Result<()> {
        let mut s = lock(&self.state);
        if let Some(e) = s.failed.take() {
            return Err(e);
        }
        s.writer.as_mut().map_or(Ok(()), TraceWriter::flush)
    }
}

/// A device whose every access (and every driver event) is written to a trace file.
pub struct TracingDevice {
    inner: Arc<dyn PciDevice>,
    sink: Arc<Sink>,
    bars: [OnceLock<Arc<dyn Bar>>; 6],
}

impl TracingDevice {
    /// Record what is done to `inner` into a new file at `path`.
    pub fn create(inner: Arc<dyn PciDevice>, path: &Path, header: &Header) -> Result<Self> {
        let io = |op, source| {
            Error::new(
                inner.name(),
                ErrorKind::Io {
                    op,
                    path: path.into(),
                    source,
                },
            )
        };
        let file = File::create(path).map_err(|e| io("create", e))?;
        let writer = TraceWriter::new(BufWriter::new(file), header).map_err(|e| io("write", e))?;
        Ok(TracingDevice {
            inner,
            sink: Arc::new(Sink {
                path: path.into(),
                state: Mutex::new(SinkState {
                    writer: Some(writer),
                    failed: None,
                    pages: BTreeMap::new(),
                    maps: 0,
                }),
            }),
            bars: Default::default(),
        })
    }

    /// Write out what is buffered; the first write error of the run, naming the file.
    pub fn flush(&self) -> Result<()> {
        self.sink.flush().map_err(|source| {
            Error::new(
                self.inner.name(),
                ErrorKind::Io {
                    op: "write",
                    path: self.sink.path.clone(),
                    source,
                },
            )
        })
    }

    /// Record a driver event (also what [`PciDevice::trace`] does).
    pub fn event(&self, event: TraceEvent<'_>) {
        self.sink.record(&Record::from_event(event));
        // A phase is a natural point for the file to be current: a run that dies later
        // still leaves its completed phases on disk.
        if matches!(event, TraceEvent::Phase(_))
            && let Err(e) = self.flush()
        {
            tracing::warn!("{e}");
        }
    }

    fn refused<T>(&self, access: impl FnOnce() -> String, r: Result<T>) -> Result<T> {
        if let Err(e) = &r {
            self.sink.record(&Record::Refused {
                access: access(),
                message: e.to_string(),
            });
        }
        r
    }
}

impl Drop for TracingDevice {
    fn drop(&mut self) {
        if let Err(e) = self.flush() {
            tracing::warn!("{e}");
        }
    }
}

impl PciDevice for TracingDevice {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn backend(&self) -> &'static str {
        self.inner.backend()
    }
    fn config_read(&self, offset: u16, size: u8) -> Result<u32> {
        let r = self.inner.config_read(offset, size);
        if let Ok(value) = r {
            self.sink.record(&Record::ConfigRead {
                offset,
                size,
                value,
            });
        }
        self.refused(|| format!("config read {offset:#x}/{size}"), r)
    }
    fn config_write(&self, offset: u16, size: u8, value: u32) -> Result<()> {
        self.sink.record(&Record::ConfigWrite {
            offset,
            size,
            value,
        });
        let r = self.inner.config_write(offset, size, value);
        self.refused(|| format!("config write {offset:#x}/{size}"), r)
    }
    fn bar_info(&self, index: u8) -> Result<BarInfo> {
        self.inner.bar_info(index)
    }
    fn peer_bar(&self, peer: &dyn PciDevice, bar: u8) -> Result<crate::pci::PeerBar> {
        self.inner.peer_bar(peer, bar)
    }
    fn bar(&self, index: u8) -> Result<Arc<dyn Bar>> {
        let slot = self.bars.get(usize::from(index));
        if let Some(bar) = slot.and_then(OnceLock::get) {
            return Ok(bar.clone());
        }
        let inner = self.inner.bar(index)?;
        let traced: Arc<dyn Bar> = Arc::new(TracingBar {
            inner,
            index,
            sink: self.sink.clone(),
        });
        Ok(match slot {
            Some(s) => s.get_or_init(|| traced).clone(),
            None => traced,
        })
    }
    fn resize_bar(&self, index: u8) -> Result<()> {
        self.sink.record(&Record::ResizeBar { bar: index });
        self.inner.resize_bar(index)
    }
    fn executed_code(&self, entry: u64) -> Result<Option<crate::pci::ExecutedCode>> {
        // A question to the model, not an access of the device: nothing to record.
        self.inner.executed_code(entry)
    }
    fn alloc_sysmem(&self, size: usize, contiguous: bool) -> Result<Arc<dyn SysMem>> {
        let mem = self.inner.alloc_sysmem(size, contiguous)?;
        let id = {
            let mut s = lock(&self.sink.state);
            for &p in mem.bus_addrs() {
                s.pages.insert(p & 0xffff_ffff, p);
            }
            s.maps += 1;
            s.maps - 1
        };
        self.sink.record(&Record::SysMap {
            id,
            size: mem.len() as u64,
            contiguous,
            pages: mem.bus_addrs().to_vec(),
        });
        Ok(Arc::new(TracingSysMem {
            inner: mem,
            id,
            sink: self.sink.clone(),
        }))
    }
    fn reset(&self) -> Result<()> {
        self.sink.record(&Record::Reset);
        self.inner.reset()
    }
    fn wait_irq(&self, timeout: Duration) -> Result<bool> {
        let fired = self.inner.wait_irq(timeout)?;
        self.sink.record(&Record::WaitIrq {
            timeout_us: timeout.as_micros() as u64,
            fired,
        });
        Ok(fired)
    }
    fn dma_read(&self, bus: u64, buf: &mut [u8]) -> Result<()> {
        self.inner.dma_read(bus, buf)
    }
    fn ownership(&self) -> Result<Option<Ownership>> {
        self.inner.ownership()
    }
    fn smu_query(&self, message: u32, param: u32, timeout: Duration) -> Result<Option<SmuAnswer>> {
        self.inner.smu_query(message, param, timeout)
    }
    fn trace(&self, event: TraceEvent<'_>) {
        self.event(event);
    }
}

/// A BAR whose accesses go to the trace.
struct TracingBar {
    inner: Arc<dyn Bar>,
    index: u8,
    sink: Arc<Sink>,
}

impl TracingBar {
    fn read(&self, offset: u64, width: u8, r: Result<u64>) -> Result<u64> {
        match &r {
            Ok(value) => self.sink.record(&Record::Read {
                bar: self.index,
                offset,
                width,
                value: *value,
            }),
            Err(e) => self.refuse("read", offset, width, e),
        }
        r
    }

    fn write(&self, offset: u64, width: u8, value: u64) {
        let alloc = self.sink.is_alloc(value, width);
        self.sink.record(&Record::Write {
            bar: self.index,
            offset,
            width,
            value,
            alloc,
        });
    }

    fn refuse(&self, op: &str, offset: u64, width: impl std::fmt::Display, e: &Error) {
        self.sink.record(&Record::Refused {
            access: format!("{op} {width} bytes at BAR{}+{offset:#x}", self.index),
            message: e.to_string(),
        });
    }

    fn written(&self, offset: u64, width: u8, r: Result<()>) -> Result<()> {
        if let Err(e) = &r {
            self.refuse("write", offset, width, e);
        }
        r
    }
}

impl Bar for TracingBar {
    fn len(&self) -> u64 {
        self.inner.len()
    }
    fn read32(&self, offset: u64) -> Result<u32> {
        let r = self.inner.read32(offset).map(u64::from);
        self.read(offset, 4, r).map(|v| v as u32)
    }
    fn write32(&self, offset: u64, value: u32) -> Result<()> {
        self.write(offset, 4, u64::from(value));
        self.written(offset, 4, self.inner.write32(offset, value))
    }
    fn read64(&self, offset: u64) -> Result<u64> {
        let r = self.inner.read64(offset);
        self.read(offset, 8, r)
    }
    fn write64(&self, offset: u64, value: u64) -> Result<()> {
        self.write(offset, 8, value);
        self.written(offset, 8, self.inner.write64(offset, value))
    }
    fn read8(&self, offset: u64) -> Result<u8> {
        let r = self.inner.read8(offset).map(u64::from);
        self.read(offset, 1, r).map(|v| v as u8)
    }
    fn write8(&self, offset: u64, value: u8) -> Result<()> {
        self.write(offset, 1, u64::from(value));
        self.written(offset, 1, self.inner.write8(offset, value))
    }
    fn read_bytes(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let r = self.inner.read_bytes(offset, buf);
        match &r {
            Ok(()) if buf.len() <= READ_BYTES_KEPT => self.sink.record(&Record::ReadBytes {
                bar: self.index,
                offset,
                data: buf.to_vec(),
            }),
            Ok(()) => self.sink.record(&Record::ReadDigest {
                bar: self.index,
                offset,
                len: buf.len() as u64,
                digest: digest(buf),
            }),
            Err(e) => self.refuse("read", offset, buf.len(), e),
        }
        r
    }
    fn write_bytes(&self, offset: u64, data: &[u8]) -> Result<()> {
        self.sink.record(&Record::WriteBytes {
            bar: self.index,
            offset,
            data: data.to_vec(),
        });
        let r = self.inner.write_bytes(offset, data);
        if let Err(e) = &r {
            self.refuse("write", offset, data.len(), e);
        }
        r
    }
    fn indexed(&self, steps: &[IndexStep]) -> Result<u32> {
        self.record_indexed(steps, false)
    }
    fn shared_indexed(&self, steps: &[IndexStep]) -> Result<u32> {
        self.record_indexed(steps, true)
    }
}

impl TracingBar {
    /// [`Bar::indexed`] or [`Bar::shared_indexed`] of the backend, recorded.
    fn record_indexed(&self, steps: &[IndexStep], shared: bool) -> Result<u32> {
        // The steps stay one access of the backend (a server keeps other clients out of
        // the window); the trace shows them one by one. Only the last read's value is
        // known, so several reads in one access are recorded as separate accesses instead.
        let reads = steps
            .iter()
            .filter(|s| matches!(s, IndexStep::Read { .. }))
            .count();
        if reads > 1 {
            return if shared {
                crate::pci::restoring_index_steps(self, steps)
            } else {
                crate::pci::plain_index_steps(self, steps)
            };
        }
        // What a shared access puts back is in the trace too, as a read before and a
        // write after, so that a replay leaves the window where the device had it.
        let mut saved: Vec<(u64, u32)> = Vec::new();
        if shared {
            for step in steps {
                if let IndexStep::Aim { offset, .. } = *step
                    && !saved.iter().any(|&(o, _)| o == offset)
                {
                    saved.push((offset, self.read32(offset)?));
                }
            }
        }
        let r = if shared {
            self.inner.shared_indexed(steps)
        } else {
            self.inner.indexed(steps)
        };
        match &r {
            Ok(read) => {
                for step in steps {
                    match *step {
                        IndexStep::Aim { offset, value } | IndexStep::Write { offset, value } => {
                            self.write(offset, 4, u64::from(value))
                        }
                        IndexStep::Read { offset } => self.sink.record(&Record::Read {
                            bar: self.index,
                            offset,
                            width: 4,
                            value: u64::from(*read),
                        }),
                    }
                }
            }
            Err(e) => {
                let first = steps.first().map_or(0, |s| match *s {
                    IndexStep::Aim { offset, .. }
                    | IndexStep::Write { offset, .. }
                    | IndexStep::Read { offset } => offset,
                });
                self.refuse("index/data access", first, 4, e);
            }
        }
        for &(at, value) in saved.iter().rev() {
            self.write(at, 4, u64::from(value));
        }
        r
    }
}

/// System memory whose CPU accesses go to the trace: what the CPU writes there (rings,
/// packets, fences) is what a device reads by DMA, and a replay needs it to see the same
/// commands; what it reads back (signals the device wrote) is how it waited.
struct TracingSysMem {
    inner: Arc<dyn SysMem>,
    id: u32,
    sink: Arc<Sink>,
}

impl TracingSysMem {
    fn read(&self, offset: u64, buf: &[u8]) {
        self.sink.record(&if buf.len() <= READ_BYTES_KEPT {
            Record::SysRead {
                id: self.id,
                offset,
                data: buf.to_vec(),
            }
        } else {
            Record::SysReadDigest {
                id: self.id,
                offset,
                len: buf.len() as u64,
                digest: digest(buf),
            }
        });
    }

    fn write(&self, offset: u64, data: &[u8]) {
        self.sink.record(&Record::SysWrite {
            id: self.id,
            offset,
            data: data.to_vec(),
        });
    }
}

// Reads are recorded once they succeed and writes once they are done: system memory is
// the CPU's own, and an access out of its range is the caller's error, not the device's.
impl SysMem for TracingSysMem {
    fn len(&self) -> usize {
        self.inner.len()
    }
    fn bus_addrs(&self) -> &[u64] {
        self.inner.bus_addrs()
    }
    fn read_bytes(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.inner.read_bytes(offset, buf)?;
        self.read(offset, buf);
        Ok(())
    }
    fn write_bytes(&self, offset: u64, data: &[u8]) -> Result<()> {
        self.inner.write_bytes(offset, data)?;
        self.write(offset, data);
        Ok(())
    }
    fn read32(&self, offset: u64) -> Result<u32> {
        let v = self.inner.read32(offset)?;
        self.read(offset, &v.to_le_bytes());
        Ok(v)
    }
    fn write32(&self, offset: u64, value: u32) -> Result<()> {
        self.inner.write32(offset, value)?;
        self.write(offset, &value.to_le_bytes());
        Ok(())
    }
    fn read64(&self, offset: u64) -> Result<u64> {
        let v = self.inner.read64(offset)?;
        self.read(offset, &v.to_le_bytes());
        Ok(v)
    }
    fn write64(&self, offset: u64, value: u64) -> Result<()> {
        self.inner.write64(offset, value)?;
        self.write(offset, &value.to_le_bytes());
        Ok(())
    }
}
