//! A mock device booted by the driver, with buffers in VRAM or system memory mapped into
//! VM context 0, and compute (PM4 or AQL) and SDMA queues fed by hand-built packets the way
//! a runtime feeds them: packets written through BAR0, an HDP flush, the write pointer in
//! memory, then the doorbell.

use std::sync::Arc;
use std::time::{Duration, Instant};

use am_driver::ip::gfx::{ComputeQueueDesc, MEC_RING0_DOORBELL, QueueId};
use am_driver::ip::sdma::{SdmaQueueDesc, SdmaQueueId};
use am_driver::mm::VirtMapping;
use am_driver::{AmDevice, Options, SysMem};
use am_mock::MockGpu;

/// Driver options for tests: no reset, no power limit, short register waits.
pub fn opts() -> Options {
    let mut o = Options::from_env("test").unwrap();
    o.force_reset = false;
    o.power_limit_w = None;
    o.timeouts.mode1_settle = Duration::ZERO;
    o
}

/// Where a buffer's bytes live.
pub enum Backing {
    /// VRAM at this physical address (contiguous).
    Vram(u64),
    /// System memory.
    Sys(Arc<dyn SysMem>),
}

/// A buffer mapped into the GPU's VM context 0.
pub struct Buf {
    /// GPU virtual address.
    pub va: u64,
    /// Size in bytes.
    pub size: u64,
    /// Its memory.
    pub backing: Backing,
    /// The mapping.
    pub mapping: VirtMapping,
}

/// A booted device.
pub struct Rig {
    /// The mock device.
    pub gpu: MockGpu,
    /// The driver.
    pub dev: AmDevice,
}

impl Rig {
    /// A fresh device of `profile`, booted.
    pub fn new(profile: &str) -> Rig {
        let gpu = MockGpu::new(profile).unwrap();
        let dev = AmDevice::open_with(gpu.open(), opts()).unwrap();
        Rig { gpu, dev }
    }

    /// Whether the GC is GFX9 (MI300).
    pub fn gfx9(&self) -> bool {
        self.dev.ctx().gc_major() < 10
    }

    /// `size` bytes of contiguous VRAM.
    pub fn vram(&self, size: u64) -> Buf {
        let m = self.dev.valloc(size, true).unwrap();
        Buf {
            va: m.va,
            size: m.size,
            backing: Backing::Vram(m.paddrs[0].0),
            mapping: m,
        }
    }

    /// `size` bytes of system memory.
    pub fn sysmem(&self, size: u64) -> Buf {
        let mem = self
            .dev
            .ctx()
            .pci
            .alloc_sysmem(size as usize, false)
            .unwrap();
        let m = self.dev.map_sysmem(&*mem, true).unwrap();
        Buf {
            va: m.va,
            size: m.size,
            backing: Backing::Sys(mem),
            mapping: m,
        }
    }

    /// Write bytes as the CPU does (BAR0 for VRAM) without an HDP flush.
    pub fn write_noflush(&self, b: &Buf, off: u64, data: &[u8]) {
        match &b.backing {
            Backing::Vram(p) => self.dev.ctx().vram.write(p + off, data).unwrap(),
            Backing::Sys(m) => m.write_bytes(off, data).unwrap(),
        }
    }

    /// Write bytes as the CPU does, then flush the HDP.
    pub fn write(&self, b: &Buf, off: u64, data: &[u8]) {
        self.write_noflush(b, off, data);
        self.dev.hdp_flush().unwrap();
    }

    /// Write dwords (then flush).
    pub fn write_u32s(&self, b: &Buf, off: u64, data: &[u32]) {
        let bytes: Vec<u8> = data.iter().flat_map(|d| d.to_le_bytes()).collect();
        self.write(b, off, &bytes);
    }

    /// Read bytes as the CPU does.
    pub fn read(&self, b: &Buf, off: u64, len: usize) -> Vec<u8> {
        let mut v = vec![0u8; len];
        match &b.backing {
            Backing::Vram(p) => self.dev.ctx().vram.read(p + off, &mut v).unwrap(),
            Backing::Sys(m) => m.read_bytes(off, &mut v).unwrap(),
        }
        v
    }

    /// A dword.
    pub fn u32_at(&self, b: &Buf, off: u64) -> u32 {
        u32::from_le_bytes(self.read(b, off, 4).try_into().unwrap())
    }

    /// A qword.
    pub fn u64_at(&self, b: &Buf, off: u64) -> u64 {
        u64::from_le_bytes(self.read(b, off, 8).try_into().unwrap())
    }

    /// Poll a dword until `pred` holds (or panic after `timeout`, naming the queues).
    pub fn wait_u32(
        &self,
        b: &Buf,
        off: u64,
        pred: impl Fn(u32) -> bool,
        timeout: Duration,
    ) -> u32 {
        let until = Instant::now() + timeout;
        loop {
            let v = self.u32_at(b, off);
            if pred(v) {
                return v;
            }
            assert!(
                Instant::now() < until,
                "value {v:#x} at {:#x}+{off:#x} never came; queues: {:#?}; violations: {:#?}",
                b.va,
                self.gpu.queues(),
                self.gpu.violations()
            );
            std::thread::sleep(Duration::from_micros(100));
        }
    }

    /// Wait until every queue is idle; panic with the queues' state otherwise.
    pub fn idle(&self) {
        if let Err(e) = self.gpu.wait_queues_idle(Duration::from_secs(20)) {
            panic!("{e}: {:#?}", self.gpu.queues());
        }
    }

    /// A compute queue on MEC1 pipe 0, queue `queue`: PM4, or AQL (on every XCC).
    pub fn compute_queue(&mut self, queue: u8, aql: bool, ring_size: u64) -> Queue {
        let ring = self.vram(ring_size);
        let gart = self.vram(0x1000);
        let eop = self.vram(0x1000);
        let doorbell = MEC_RING0_DOORBELL + u32::from(queue);
        let desc = ComputeQueueDesc {
            ring: ring.va,
            ring_size,
            // The read pointer lands where an `amd_queue_t` has `read_dispatch_id`.
            rptr_addr: gart.va + 0x80,
            wptr_addr: gart.va + 0x38,
            eop_addr: eop.va,
            eop_size: 0x1000,
            doorbell,
            aql,
            pipe: 0,
            queue,
        };
        let id = self.dev.create_compute_queue(&desc).unwrap();
        Queue {
            kind: if aql { Kind::Aql } else { Kind::Pm4 },
            ring,
            ring_size,
            gart,
            _eop: Some(eop),
            doorbell,
            put: 0,
            id: Id::Compute(id),
        }
    }

    /// The ring of SDMA engine `engine`.
    pub fn sdma_queue(&mut self, engine: u8, ring_size: u64) -> Queue {
        let ring = self.vram(ring_size);
        let gart = self.vram(0x1000);
        let desc = SdmaQueueDesc {
            engine,
            ring: ring.va,
            ring_size,
            rptr_addr: gart.va,
            wptr_addr: gart.va + 8,
        };
        let id = self.dev.create_sdma_queue(&desc).unwrap();
        Queue {
            kind: Kind::Sdma,
            ring,
            ring_size,
            gart,
            _eop: None,
            doorbell: id.doorbell,
            put: 0,
            id: Id::Sdma(id),
        }
    }

    /// The dword address of a register of XCC 0 (for packets that name registers).
    pub fn reg(&self, ip: am_mock::profile::RegIp, name: &str) -> u32 {
        let map = self.gpu.register_map();
        map.info(map.find(ip, name, 0).unwrap()).addr as u32
    }
}

/// Packets of a queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// PM4 dwords, write pointer in dwords.
    Pm4,
    /// 64-byte AQL packets; the doorbell carries the last packet's index.
    Aql,
    /// SDMA dwords, write pointer in bytes.
    Sdma,
}

/// The driver's handle on a queue.
pub enum Id {
    /// A compute queue.
    Compute(QueueId),
    /// An SDMA ring.
    Sdma(SdmaQueueId),
}

/// A queue fed by hand.
pub struct Queue {
    /// Packets.
    pub kind: Kind,
    /// The ring.
    pub ring: Buf,
    /// Its size in bytes (the buffer may be larger).
    pub ring_size: u64,
    /// Read pointer at +0x80 (compute) or +0 (SDMA); write pointer at +0x38 or +8.
    pub gart: Buf,
    _eop: Option<Buf>,
    /// Doorbell slot (64-bit units).
    pub doorbell: u32,
    /// Units written so far (dwords, packets or bytes).
    pub put: u64,
    /// The driver's id.
    pub id: Id,
}

impl Queue {
    /// Write `dwords` at the write pointer (wrapping around the ring) without telling the
    /// GPU.
    pub fn write(&mut self, rig: &Rig, dwords: &[u32], flush: bool) {
        let ring_dw = self.ring_size / 4;
        let unit = match self.kind {
            Kind::Pm4 => 1,
            Kind::Aql => 16,
            Kind::Sdma => 1,
        };
        let pos = match self.kind {
            Kind::Sdma => self.put / 4,
            _ => self.put * unit,
        };
        // Up to the end of the ring, then from its start.
        let at = pos % ring_dw;
        let first = dwords.len().min((ring_dw - at) as usize);
        for (part, off) in [(&dwords[..first], at), (&dwords[first..], 0)] {
            if !part.is_empty() {
                let bytes: Vec<u8> = part.iter().flat_map(|d| d.to_le_bytes()).collect();
                rig.write_noflush(&self.ring, off * 4, &bytes);
            }
        }
        if flush {
            rig.dev.hdp_flush().unwrap();
        }
        self.put += match self.kind {
            Kind::Sdma => dwords.len() as u64 * 4,
            Kind::Pm4 => dwords.len() as u64,
            Kind::Aql => dwords.len() as u64 / 16,
        };
    }

    /// Ring the doorbell for everything written so far (the write pointer in memory is
    /// written first, without an HDP flush of its own).
    pub fn ring_doorbell(&self, rig: &Rig) {
        let wptr_off = if self.kind == Kind::Sdma { 8 } else { 0x38 };
        rig.write_noflush(&self.gart, wptr_off, &self.put.to_le_bytes());
        let value = match self.kind {
            Kind::Aql => self.put - 1,
            _ => self.put,
        };
        rig.dev
            .ctx()
            .doorbells
            .write_bytes(u64::from(self.doorbell) * 8, &value.to_le_bytes())
            .unwrap();
    }

    /// Write `dwords` (flushed) and ring the doorbell.
    pub fn submit(&mut self, rig: &Rig, dwords: &[u32]) {
        self.write(rig, dwords, true);
        self.ring_doorbell(rig);
    }

    /// The read pointer the engine wrote back.
    pub fn rptr(&self, rig: &Rig) -> u64 {
        let off = if self.kind == Kind::Sdma { 0 } else { 0x80 };
        rig.u64_at(&self.gart, off)
    }
}

/// An AQL packet header: `type` with barrier and system-scope acquire/release fences.
pub fn aql_header(kind: u16) -> u16 {
    kind | 1 << 8 | 2 << 9 | 2 << 11
}

/// The 16 dwords of an AQL PM4-IB vendor packet running `dwords` at `ib`.
pub fn aql_pm4_ib(ib: u64, dwords: usize, signal: u64) -> Vec<u32> {
    let mut p = vec![0u32; 16];
    p[0] = u32::from(aql_header(0)) | 1 << 16;
    let jump = crate::pm4::indirect(ib, dwords);
    p[1..5].copy_from_slice(&jump);
    p[5] = 10;
    p[14] = signal as u32;
    p[15] = (signal >> 32) as u32;
    p
}

/// The 16 dwords of an AQL barrier-AND (`and`) or barrier-OR packet on up to five signals.
pub fn aql_barrier(and: bool, deps: &[u64], signal: u64) -> Vec<u32> {
    let mut p = vec![0u32; 16];
    p[0] = u32::from(aql_header(if and { 3 } else { 5 }));
    for (i, d) in deps.iter().enumerate() {
        p[2 + 2 * i] = *d as u32;
        p[3 + 2 * i] = (*d >> 32) as u32;
    }
    p[14] = signal as u32;
    p[15] = (signal >> 32) as u32;
    p
}

/// The 16 dwords of an AQL kernel-dispatch packet.
pub fn aql_dispatch(
    wg: [u16; 3],
    grid: [u32; 3],
    kernel_object: u64,
    kernarg: u64,
    signal: u64,
) -> Vec<u32> {
    let mut p = vec![0u32; 16];
    p[0] = u32::from(aql_header(2)) | 3 << 16;
    p[1] = u32::from(wg[0]) | u32::from(wg[1]) << 16;
    p[2] = u32::from(wg[2]);
    p[3] = grid[0];
    p[4] = grid[1];
    p[5] = grid[2];
    p[8] = kernel_object as u32;
    p[9] = (kernel_object >> 32) as u32;
    p[10] = kernarg as u32;
    p[11] = (kernarg >> 32) as u32;
    p[14] = signal as u32;
    p[15] = (signal >> 32) as u32;
    p
}
