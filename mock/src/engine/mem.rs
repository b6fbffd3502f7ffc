//! Memory as an engine sees it: GPU addresses of one hub and vmid, resolved through the
//! apertures and page tables ([`HubView`]) with a small TLB, to VRAM or system memory.
//!
//! Every read an engine makes of memory the CPU wrote through BAR0 is checked against the
//! HDP: bytes no flush has covered yet are stale on hardware, so reading them is a
//! contract violation (the read stops with [`MemError::Unflushed`]). Polls (WAIT_REG_MEM,
//! POLL_REGMEM) are not checked: they read again until the value lands, as hardware does.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::device::Shared;
use crate::ip::gmc::{Hub, HubView, Resolved};
use crate::walker::{Access, PageFault, PhysTarget};

/// Why an engine's memory access failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MemError {
    /// The page walk faulted (the engine latches it in the hub and posts the IH entry).
    Fault {
        /// What the walker found.
        fault: PageFault,
        /// The access.
        access: Access,
    },
    /// Bytes the CPU wrote through BAR0 that no HDP flush has covered (VRAM range).
    Unflushed {
        /// GPU address of the read.
        addr: u64,
        /// The unflushed VRAM range `[start, end)`.
        range: (u64, u64),
    },
    /// A system-memory access the bus refused (bus mastering off, no memory there).
    Dma {
        /// GPU address.
        addr: u64,
        /// Why.
        reason: String,
    },
    /// The queue was stopped (dequeued, reset) while the access was under way.
    Cancelled,
}

impl std::fmt::Display for MemError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MemError::Fault { fault, access } => write!(
                f,
                "page fault: {access:?} of {:#x} ({:?} at {})",
                fault.va,
                fault.kind,
                fault.level_name()
            ),
            MemError::Unflushed { addr, range } => write!(
                f,
                "read of {addr:#x} reaches VRAM {:#x}..{:#x}, which the CPU wrote through BAR0 \
                 after the last HDP flush: the GPU would read stale bytes",
                range.0, range.1
            ),
            MemError::Dma { addr, reason } => write!(f, "access of {addr:#x}: {reason}"),
            MemError::Cancelled => write!(f, "the queue was stopped"),
        }
    }
}

#[derive(Clone, Copy)]
struct TlbEntry {
    /// First address the entry covers.
    start: u64,
    /// One past the last.
    end: u64,
    res: Resolved,
}

const TLB_ENTRIES: usize = 16;

/// GPU memory of one hub and vmid, for one engine, for the length of one step of its work
/// (it borrows the device, so a worker holds no reference to it between steps).
pub struct GpuMem<'a> {
    sh: &'a Shared,
    view: HubView,
    /// The GMC epoch the view was read at: a GMC register write makes it stale.
    epoch: u64,
    tlb: [Option<TlbEntry>; TLB_ENTRIES],
    next: usize,
    /// The last-level table of the last walk.
    leaf: Option<crate::walker::LeafTable>,
    /// Set when the queue is stopped: accesses fail with [`MemError::Cancelled`].
    cancel: Option<Arc<AtomicBool>>,
}

impl<'a> GpuMem<'a> {
    /// Memory of `hub`/`vmid` as its registers are now.
    pub(crate) fn new(sh: &'a Shared, hub: Hub, vmid: u8) -> Result<GpuMem<'a>, String> {
        let epoch = sh.engines.vm_epoch();
        let view = sh.hub_view(hub, vmid)?;
        Ok(GpuMem {
            sh,
            view,
            epoch,
            tlb: [None; TLB_ENTRIES],
            next: 0,
            leaf: None,
            cancel: None,
        })
    }

    /// Fail accesses once `flag` is set (the queue was stopped).
    pub fn with_cancel(mut self, flag: Arc<AtomicBool>) -> GpuMem<'a> {
        self.cancel = Some(flag);
        self
    }

    /// The hub.
    pub fn hub(&self) -> Hub {
        self.view.hub
    }

    /// The vmid.
    pub fn vmid(&self) -> u8 {
        self.view.vmid
    }

    /// The device.
    pub(crate) fn shared(&self) -> &'a Shared {
        self.sh
    }

    fn refresh(&mut self) -> Result<(), MemError> {
        let epoch = self.sh.engines.vm_epoch();
        if epoch != self.epoch {
            self.view = self
                .sh
                .hub_view(self.view.hub, self.view.vmid)
                .map_err(|reason| MemError::Dma { addr: 0, reason })?;
            self.epoch = epoch;
            self.tlb = [None; TLB_ENTRIES];
            self.leaf = None;
        }
        Ok(())
    }

    /// Resolve `addr` for `access`, through the TLB.
    fn resolve(&mut self, addr: u64, access: Access) -> Result<Resolved, MemError> {
        if let Some(c) = &self.cancel
            && c.load(Ordering::Relaxed)
        {
            return Err(MemError::Cancelled);
        }
        self.refresh()?;
        let need = match access {
            Access::Read => 0,
            Access::Write => 1,
            Access::Execute => 2,
        };
        for e in self.tlb.iter().flatten() {
            if (e.start..e.end).contains(&addr) && e.res.perms[need] {
                let off = addr - e.start;
                let target = match e.res.target {
                    PhysTarget::Vram(v) => PhysTarget::Vram(v + off),
                    PhysTarget::System(b) => PhysTarget::System(b + off),
                };
                return Ok(Resolved {
                    target,
                    span: e.end - addr,
                    perms: e.res.perms,
                });
            }
        }
        let res = self
            .view
            .resolve_with(&self.sh.vram, addr, access, &mut self.leaf)
            .map_err(|fault| MemError::Fault { fault, access })?;
        self.tlb[self.next] = Some(TlbEntry {
            start: addr,
            end: addr.saturating_add(res.span),
            res,
        });
        self.next = (self.next + 1) % TLB_ENTRIES;
        Ok(res)
    }

    /// Where `addr` lands for `access`.
    pub fn resolve_for(&mut self, addr: u64, access: Access) -> Result<PhysTarget, MemError> {
        self.resolve(addr, access).map(|r| r.target)
    }

    /// Read `buf.len()` bytes at `addr`. With `hdp`, bytes the CPU wrote through BAR0 and
    /// has not flushed are refused.
    pub fn read_as(
        &mut self,
        addr: u64,
        buf: &mut [u8],
        access: Access,
        hdp: bool,
    ) -> Result<(), MemError> {
        let mut done = 0usize;
        while done < buf.len() {
            let at = addr.wrapping_add(done as u64);
            let r = self.resolve(at, access)?;
            let n = ((buf.len() - done) as u64).min(r.span) as usize;
            let part = &mut buf[done..done + n];
            match r.target {
                PhysTarget::Vram(v) => {
                    if hdp && let Some(range) = self.sh.vram.unflushed(v, n as u64) {
                        return Err(MemError::Unflushed { addr: at, range });
                    }
                    self.sh.vram.read(v, part);
                }
                PhysTarget::System(bus) => self.sys_read(at, bus, part)?,
            }
            done += n;
        }
        Ok(())
    }

    /// Read data (HDP-checked).
    pub fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), MemError> {
        self.read_as(addr, buf, Access::Read, true)
    }

    /// Read a dword that is polled (not HDP-checked).
    pub fn poll32(&mut self, addr: u64) -> Result<u32, MemError> {
        let mut b = [0u8; 4];
        self.read_as(addr, &mut b, Access::Read, false)?;
        Ok(u32::from_le_bytes(b))
    }

    /// Read a qword that is polled (not HDP-checked).
    pub fn poll64(&mut self, addr: u64) -> Result<u64, MemError> {
        let mut b = [0u8; 8];
        self.read_as(addr, &mut b, Access::Read, false)?;
        Ok(u64::from_le_bytes(b))
    }

    /// Read dwords (HDP-checked), e.g. packets.
    pub fn read_dwords(&mut self, addr: u64, out: &mut [u32]) -> Result<(), MemError> {
        let mut b = vec![0u8; out.len() * 4];
        self.read(addr, &mut b)?;
        for (o, c) in out.iter_mut().zip(b.chunks_exact(4)) {
            *o = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        }
        Ok(())
    }

    /// Write bytes at `addr`.
    pub fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), MemError> {
        let mut done = 0usize;
        while done < data.len() {
            let at = addr.wrapping_add(done as u64);
            let r = self.resolve(at, Access::Write)?;
            let n = ((data.len() - done) as u64).min(r.span) as usize;
            let part = &data[done..done + n];
            match r.target {
                PhysTarget::Vram(v) => self.sh.vram.write(v, part),
                PhysTarget::System(bus) => self.sys_write(at, bus, part)?,
            }
            done += n;
        }
        self.sh.engines.memory_changed();
        Ok(())
    }

    /// Write a dword.
    pub fn write32(&mut self, addr: u64, v: u32) -> Result<(), MemError> {
        self.write(addr, &v.to_le_bytes())
    }

    /// Write a qword.
    pub fn write64(&mut self, addr: u64, v: u64) -> Result<(), MemError> {
        self.write(addr, &v.to_le_bytes())
    }

    fn sys_read(&self, addr: u64, bus: u64, buf: &mut [u8]) -> Result<(), MemError> {
        if !self.sh.engines.bus_master() {
            return Err(MemError::Dma {
                addr,
                reason: format!("DMA read of bus address {bus:#x} while bus mastering is off"),
            });
        }
        self.sh.sysmem.read(bus, buf).map_err(|e| MemError::Dma {
            addr,
            reason: e.to_string(),
        })
    }

    fn sys_write(&self, addr: u64, bus: u64, data: &[u8]) -> Result<(), MemError> {
        if !self.sh.engines.bus_master() {
            return Err(MemError::Dma {
                addr,
                reason: format!("DMA write of bus address {bus:#x} while bus mastering is off"),
            });
        }
        self.sh.sysmem.write(bus, data).map_err(|e| MemError::Dma {
            addr,
            reason: e.to_string(),
        })
    }

    /// Copy `len` bytes from `src` to `dst` (both GPU addresses of this view), reading the
    /// source HDP-checked. VRAM to VRAM goes chunk by chunk without a bounce buffer.
    pub fn copy(&mut self, src: u64, dst: u64, len: u64) -> Result<(), MemError> {
        let mut done = 0u64;
        let mut bounce = Vec::new();
        while done < len {
            let s = self.resolve(src + done, Access::Read)?;
            let d = self.resolve(dst + done, Access::Write)?;
            // A copy's length is the packet's and a span can be a huge page: a MiB at a
            // time bounds the bounce buffer.
            let n = (len - done).min(s.span).min(d.span).min(1 << 20);
            match (s.target, d.target) {
                (PhysTarget::Vram(sv), PhysTarget::Vram(dv)) => {
                    if let Some(range) = self.sh.vram.unflushed(sv, n) {
                        return Err(MemError::Unflushed {
                            addr: src + done,
                            range,
                        });
                    }
                    self.sh.vram.copy_within(sv, dv, n);
                }
                (PhysTarget::System(sb), PhysTarget::Vram(dv)) => {
                    if !self.sh.engines.bus_master() {
                        return Err(MemError::Dma {
                            addr: src + done,
                            reason: "DMA read while bus mastering is off".into(),
                        });
                    }
                    let vram = &self.sh.vram;
                    self.sh
                        .sysmem
                        .with_pages(sb, n as usize, |at, bytes| {
                            vram.write(dv + at as u64, bytes)
                        })
                        .map_err(|e| MemError::Dma {
                            addr: src + done,
                            reason: e.to_string(),
                        })?;
                }
                _ => {
                    bounce.resize(n as usize, 0);
                    self.read(src + done, &mut bounce)?;
                    let b = std::mem::take(&mut bounce);
                    let r = self.write_quiet(dst + done, &b);
                    bounce = b;
                    r?;
                }
            }
            done += n;
        }
        self.sh.engines.memory_changed();
        Ok(())
    }

    fn write_quiet(&mut self, addr: u64, data: &[u8]) -> Result<(), MemError> {
        let mut done = 0usize;
        while done < data.len() {
            let at = addr + done as u64;
            let r = self.resolve(at, Access::Write)?;
            let n = ((data.len() - done) as u64).min(r.span) as usize;
            match r.target {
                PhysTarget::Vram(v) => self.sh.vram.write(v, &data[done..done + n]),
                PhysTarget::System(bus) => self.sys_write(at, bus, &data[done..done + n])?,
            }
            done += n;
        }
        Ok(())
    }

    /// Fill `len` bytes at `dst` with the dword `pattern`.
    pub fn fill(&mut self, dst: u64, len: u64, pattern: u32) -> Result<(), MemError> {
        let mut done = 0u64;
        while done < len {
            let d = self.resolve(dst + done, Access::Write)?;
            let n = (len - done).min(d.span);
            match d.target {
                PhysTarget::Vram(v) => self.sh.vram.fill(v, n, pattern),
                PhysTarget::System(bus) => {
                    let bytes: Vec<u8> = pattern
                        .to_le_bytes()
                        .iter()
                        .copied()
                        .cycle()
                        .take(n as usize)
                        .collect();
                    self.sys_write(dst + done, bus, &bytes)?;
                }
            }
            done += n;
        }
        self.sh.engines.memory_changed();
        Ok(())
    }
}

/// A shader's view of memory for `am_emu`: reads and writes of one dispatch, the first
/// failure kept for the engine to report.
pub struct ShaderMem<'a, 'b> {
    /// The memory.
    pub mem: &'a mut GpuMem<'b>,
    /// The first failure, as the engine will report it.
    pub error: Option<MemError>,
}

impl am_emu::Memory for ShaderMem<'_, '_> {
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), am_emu::Fault> {
        self.mem.read(addr, buf).map_err(|e| {
            let f = am_emu::Fault {
                addr,
                write: false,
                reason: e.to_string(),
            };
            self.error.get_or_insert(e);
            f
        })
    }

    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), am_emu::Fault> {
        self.mem.write_quiet(addr, data).map_err(|e| {
            let f = am_emu::Fault {
                addr,
                write: true,
                reason: e.to_string(),
            };
            self.error.get_or_insert(e);
            f
        })
    }
}
