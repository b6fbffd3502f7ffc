//! What every IP block of a device reaches while it boots and runs: BARs, registers,
//! discovery, the memory manager, firmware, options, and the helpers that poll registers
//! and move bytes into VRAM.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use am_isa::sync::lock;

use crate::discovery::{MM_DATA, MM_INDEX, MM_INDEX_HI};
use crate::mm::{MemoryManager, Pool, VramAccess};
use crate::regs::{Fields, Reg, Regs};
use crate::*;

/// How long the driver waits for the firmware and the engines before it gives up. The
/// defaults are the reference driver's; tests shorten them so that a model that never
/// answers fails fast.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeouts {
    /// PSP bootloader, ring and command fences.
    pub psp: Duration,
    /// One SMU message (10 s by default, as amdgpu).
    pub smu: Duration,
    /// "Is the SMU alive" probe of the boot state machine (100 ms).
    pub smu_alive: Duration,
    /// Everything else: RLC autoload, TLB-flush acks, queue (de)activation.
    pub reg: Duration,
    /// How long the ASIC is left alone after a mode1 reset request (500 ms; not waited in
    /// a hive). Tests shorten it: the mock resets before the request's write returns.
    pub mode1_settle: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            psp: Duration::from_secs(10),
            smu: Duration::from_secs(10),
            smu_alive: Duration::from_millis(100),
            reg: Duration::from_secs(2),
            mode1_settle: Duration::from_millis(500),
        }
    }
}

/// A BAR that counts its accesses (register accesses are what the boot benchmark reports).
pub(crate) struct CountingBar {
    inner: Arc<dyn Bar>,
    reads: AtomicU64,
    writes: AtomicU64,
}

impl CountingBar {
    pub(crate) fn new(inner: Arc<dyn Bar>) -> Self {
        let (reads, writes) = Default::default();
        CountingBar {
            inner,
            reads,
            writes,
        }
    }
}

/// `Bar` methods that count one access on `$counter`, then pass it on.
macro_rules! counted {
    ($($method:ident($($arg:ident: $ty:ty),*) -> $ret:ty, $counter:ident;)*) => {$(
        fn $method(&self, $($arg: $ty),*) -> Result<$ret> {
            self.$counter.fetch_add(1, Ordering::Relaxed);
            self.inner.$method($($arg),*)
        }
    )*};
}

impl Bar for CountingBar {
    fn len(&self) -> u64 {
        self.inner.len()
    }
    counted! {
        read32(offset: u64) -> u32, reads;
        write32(offset: u64, value: u32) -> (), writes;
        read8(offset: u64) -> u8, reads;
        write8(offset: u64, value: u8) -> (), writes;
        read_bytes(offset: u64, buf: &mut [u8]) -> (), reads;
        write_bytes(offset: u64, data: &[u8]) -> (), writes;
    }
}

/// VRAM as the memory manager and the blocks reach it: BAR0 where it reaches, the
/// `MM_INDEX`/`MM_DATA` window beyond (small-BAR devices).
#[derive(Clone)]
pub struct Vram {
    device: String,
    bar: Arc<dyn Bar>,
    mmio: Arc<dyn Bar>,
    size: u64,
}

impl Vram {
    /// VRAM of `device` (named in errors): `size` bytes, BAR0 `bar`, the window in BAR5 `mmio`.
    pub fn new(device: &str, bar: Arc<dyn Bar>, mmio: Arc<dyn Bar>, size: u64) -> Self {
        Vram {
            device: device.into(),
            bar,
            mmio,
            size,
        }
    }

    /// Check that `len` bytes at `paddr` are VRAM; whether BAR0 reaches them.
    fn in_bar(&self, offset: u64, len: usize) -> Result<bool> {
        let (size, len) = (len as u64, self.size);
        match offset.checked_add(size).filter(|&end| end <= len) {
            Some(end) => Ok(end <= self.bar.len()),
            None => Err(Error::new(
                &self.device,
                ErrorKind::OutOfRange {
                    what: "VRAM".into(),
                    offset,
                    size,
                    len,
                },
            )),
        }
    }

    /// Copy `data` to VRAM at physical address `paddr`.
    pub fn write(&self, paddr: u64, data: &[u8]) -> Result<()> {
        if self.in_bar(paddr, data.len())? {
            return self.bar.write_bytes(paddr, data);
        }
        // Beyond BAR0: dword by dword through MM_INDEX/MM_DATA, read-modify-write where the
        // data covers a dword only in part.
        for (at, bytes, within) in dwords(paddr, data.len()) {
            let mut word = if within.len() < 4 {
                self.window(at, None)?
            } else {
                0
            }
            .to_le_bytes();
            word[within].copy_from_slice(&data[bytes]);
            self.window(at, Some(u32::from_le_bytes(word)))?;
        }
        Ok(())
    }

    /// Copy VRAM at `paddr` into `buf`.
    pub fn read(&self, paddr: u64, buf: &mut [u8]) -> Result<()> {
        if self.in_bar(paddr, buf.len())? {
            return self.bar.read_bytes(paddr, buf);
        }
        for (at, bytes, within) in dwords(paddr, buf.len()) {
            buf[bytes].copy_from_slice(&self.window(at, None)?.to_le_bytes()[within]);
        }
        Ok(())
    }

    /// The dword of VRAM at `at` (a multiple of 4) through the `MM_INDEX`/`MM_DATA` window:
    /// read it, or write `write` and return it. One [`Bar::indexed`] access, so that on a
    /// served device no other client's window lands between the aim and the data.
    fn window(&self, at: u64, write: Option<u32>) -> Result<u32> {
        let data = MM_DATA * 4;
        let steps = [
            IndexStep::Aim {
                offset: MM_INDEX_HI * 4,
                value: (at >> 31) as u32,
            },
            IndexStep::Aim {
                offset: MM_INDEX * 4,
                value: (at as u32 & 0x7fff_ffff) | 0x8000_0000,
            },
            match write {
                Some(value) => IndexStep::Write {
                    offset: data,
                    value,
                },
                None => IndexStep::Read { offset: data },
            },
        ];
        let read = self.mmio.indexed(&steps)?;
        Ok(write.unwrap_or(read))
    }

    /// Read a little-endian dword.
    pub fn read32(&self, paddr: u64) -> Result<u32> {
        let mut b = [0u8; 4];
        self.read(paddr, &mut b).map(|()| u32::from_le_bytes(b))
    }

    /// Write a little-endian dword.
    pub fn write32(&self, paddr: u64, value: u32) -> Result<()> {
        self.write(paddr, &value.to_le_bytes())
    }
}

impl VramAccess for Vram {
    fn read64(&self, paddr: u64) -> Result<u64> {
        let mut b = [0u8; 8];
        self.read(paddr, &mut b).map(|()| u64::from_le_bytes(b))
    }
    fn write64(&self, paddr: u64, value: u64) -> Result<()> {
        self.write(paddr, &value.to_le_bytes())
    }
    fn zero(&self, paddr: u64, len: u64) -> Result<()> {
        let page = [0u8; 4096];
        (0..len)
            .step_by(4096)
            .try_for_each(|off| self.write(paddr + off, &page[..(len - off).min(4096) as usize]))
    }
}

/// The dwords `len` bytes at `paddr` touch: each dword's address, the range of the bytes it
/// holds, and where those bytes sit within it (a start or end off a dword covers part of one).
fn dwords(
    paddr: u64,
    len: usize,
) -> impl Iterator<Item = (u64, std::ops::Range<usize>, std::ops::Range<usize>)> {
    let end = paddr + len as u64;
    (paddr & !3..end).step_by(4).map(move |at| {
        let (lo, hi) = (paddr.max(at), end.min(at + 4));
        let bytes = (lo - paddr) as usize..(hi - paddr) as usize;
        (at, bytes, (lo - at) as usize..(hi - at) as usize)
    })
}

/// Where VRAM sits in the GPU's (MC) address space.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct McLayout {
    /// `MC_VM_FB_LOCATION_BASE << 24`.
    pub fb_base: u64,
    /// `MC_VM_FB_LOCATION_TOP << 24 | 0xffffff`.
    pub fb_top: u64,
    /// This device's segment of an XGMI hive (`pf_lfb_region * segment size`), else 0.
    pub xgmi_paddr_base: u64,
    /// Segment size of the hive (`pf_lfb_size << 24`), 0 outside a hive.
    pub xgmi_seg_size: u64,
    /// Number of regions (devices) of the hive (`pf_max_region + 1`), 0 outside a hive.
    pub xgmi_regions: u32,
}

impl McLayout {
    /// The MC address the GPU uses for VRAM physical address `paddr`.
    pub fn mc(&self, paddr: u64) -> u64 {
        self.fb_base + self.xgmi_paddr_base + paddr
    }

    /// Whether the device is a member of an XGMI hive.
    pub fn is_hive(&self) -> bool {
        self.xgmi_seg_size > 0 && self.xgmi_regions > 1
    }

    /// This device's region id in its hive (`PF_LFB_REGION`), `None` outside a hive.
    pub fn xgmi_region(&self) -> Option<u32> {
        self.is_hive()
            .then(|| (self.xgmi_paddr_base / self.xgmi_seg_size) as u32)
    }
}

/// The shared context of one device: handed by reference to every IP block.
pub struct Ctx {
    /// Device name (every error starts with it).
    pub name: String,
    /// The PCI function.
    pub pci: Arc<dyn PciDevice>,
    /// BAR5, counted.
    pub(crate) mmio: Arc<CountingBar>,
    /// VRAM (BAR0 or the indirect window).
    pub vram: Vram,
    /// BAR2: 64-bit doorbell slots.
    pub doorbells: Arc<dyn Bar>,
    /// Discovery.
    pub discovery: Discovery,
    /// Registers by name.
    pub regs: Regs,
    /// VRAM pools, VA space and page tables.
    pub mm: Mutex<MemoryManager>,
    /// Where VRAM is in MC space.
    pub mc: McLayout,
    /// Whether the function is an SR-IOV VF.
    pub is_vf: bool,
    /// Timeouts for every wait.
    pub timeouts: Timeouts,
}

impl std::fmt::Debug for Ctx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut ctx = f.debug_struct("Ctx");
        ctx.field("name", &self.name)
            .field("mc", &self.mc)
            .field("is_vf", &self.is_vf);
        ctx.finish_non_exhaustive()
    }
}

impl Ctx {
    /// The discovered version of a block, or an error naming it.
    pub fn version(&self, ip: HwIp) -> Result<IpVersion> {
        self.discovery.require_version(ip)
    }

    /// A [`crate::ErrorKind::BadState`] of this device.
    pub(crate) fn bad(&self, reason: impl Into<String>) -> Error {
        self.err(ErrorKind::BadState {
            reason: reason.into(),
        })
    }

    /// The GC major version (9, 11, 12).
    pub fn gc_major(&self) -> u8 {
        self.discovery.version(HwIp::GC).map_or(0, |v| v.major)
    }

    /// XCC instances (harvested ones excluded).
    pub fn xccs(&self) -> Vec<u8> {
        self.regs.instances(HwIp::GC).into_iter().collect()
    }

    /// Read a register of instance `inst`.
    pub fn rreg<F>(&self, reg: Reg<F>, inst: u8) -> Result<u32> {
        self.regs.reg(reg)?.read(inst)
    }

    /// Write a register of instance `inst`.
    pub fn wreg<F>(&self, reg: Reg<F>, inst: u8, value: u32) -> Result<()> {
        self.regs.reg(reg)?.write(inst, value)
    }

    /// Write a 64-bit value to a register pair (low dword, then high).
    pub fn wreg64<A, B>(&self, lo: Reg<A>, hi: Reg<B>, inst: u8, value: u64) -> Result<()> {
        self.wreg(lo, inst, lo32(value))?;
        self.wreg(hi, inst, hi32(value))
    }

    /// The value of the fields `set` names, every other bit 0.
    pub fn encode<F>(&self, reg: Reg<F>, set: impl FnOnce(Fields<F>) -> Fields<F>) -> Result<u32> {
        Ok(self.regs.encode(reg, set)?.value)
    }

    /// Write the fields `set` names, every other bit 0.
    pub fn write<F>(
        &self,
        reg: Reg<F>,
        inst: u8,
        set: impl FnOnce(Fields<F>) -> Fields<F>,
    ) -> Result<()> {
        self.wreg(reg, inst, self.encode(reg, set)?)
    }

    /// Read, change the fields `set` names, write back; the value written.
    pub fn update<F>(
        &self,
        reg: Reg<F>,
        inst: u8,
        set: impl FnOnce(Fields<F>) -> Fields<F>,
    ) -> Result<u32> {
        let e = self.regs.encode(reg, set)?;
        let v = self.rreg(reg, inst)? & !e.mask | e.value;
        self.wreg(reg, inst, v).map(|()| v)
    }

    /// Poll `reg` of `inst` until `value & mask == want`, for at most `timeout`. The error
    /// names `what` the driver waited for and the register's last value.
    pub fn wait_reg<F>(
        &self,
        reg: Reg<F>,
        inst: u8,
        mask: u32,
        want: u32,
        timeout: Duration,
        what: impl std::fmt::Display,
    ) -> Result<u32> {
        let r = self.regs.reg(reg)?;
        self.pci.trace(crate::trace::TraceEvent::Poll {
            bar: 5,
            offset: r.addr(inst)? * 4,
            mask,
            want,
        });
        let probe = || r.read(inst).map(|v| (v & mask == want, v));
        self.poll(timeout, what, probe).map_err(|mut e| {
            if let ErrorKind::Timeout { what, last, .. } = &mut e.kind {
                *what = format!("{what} ({} = {last:#x})", reg.name());
            }
            e
        })
    }

    /// Poll `probe` (which says whether it is done, and the value it saw) until it is done
    /// or `timeout` passes. Spins briefly, then sleeps between polls.
    pub fn poll(
        &self,
        timeout: Duration,
        what: impl std::fmt::Display,
        mut probe: impl FnMut() -> Result<(bool, u32)>,
    ) -> Result<u32> {
        let start = Instant::now();
        let mut n = 0u32;
        loop {
            let (done, v) = probe()?;
            if done {
                return Ok(v);
            }
            if start.elapsed() >= timeout {
                return Err(self.err(ErrorKind::Timeout {
                    what: what.to_string(),
                    waited: timeout,
                    last: v,
                }));
            }
            n += 1;
            if n > 64 {
                std::thread::sleep(Duration::from_micros(100));
            } else {
                std::hint::spin_loop();
            }
        }
    }

    /// The memory manager (a poisoned lock is taken over: its state is consistent between
    /// calls).
    pub fn mm(&self) -> MutexGuard<'_, MemoryManager> {
        lock(&self.mm)
    }

    /// Allocate `size` bytes of VRAM (physical) from `pool`.
    pub fn palloc(&self, size: u64, align: u64, pool: Pool) -> Result<u64> {
        self.mm().palloc(size, align, pool)
    }

    /// Register accesses so far: `(reads, writes)`.
    pub fn reg_accesses(&self) -> (u64, u64) {
        let count = |c: &AtomicU64| c.load(Ordering::Relaxed);
        (count(&self.mmio.reads), count(&self.mmio.writes))
    }
}
