//! Memory as an engine sees it: GPU addresses of one hub and vmid, resolved through the
//! apertures and page tables ([`HubView`]) with a small TLB, to VRAM, system memory or — in
//! an XGMI hive — another member's VRAM.
//!
//! Another member's memory is reached over the fabric ([`crate::hive::Hive::member`]): its
//! bytes, its write generations (so its TLB snapshots and decoded programs see the writes),
//! its HDP record (an unflushed BAR0 write of *its* CPU is stale to us too) and its blocked
//! queues (woken by our writes). A member that does not exist or has gone answers with a
//! page fault ([`FaultKind::NoMember`]).
//!
//! Every read an engine makes of memory the CPU wrote through BAR0 is checked against the
//! HDP: bytes no flush has covered yet are stale on hardware, so reading them is a
//! contract violation (the read stops with [`MemError::Unflushed`]). Polls (WAIT_REG_MEM,
//! POLL_REGMEM) are not checked: they read again until the value lands, as hardware does.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::device::Shared;
use crate::ip::gmc::{Hub, HubView, Resolved};
use crate::sysmem::{DmaFault, SysPage};
use crate::vram::{Vram, VramFull};
use crate::walker::{Access, FaultKind, PageFault, PhysTarget};

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
        /// The hive region whose VRAM (and BAR0, and HDP) it is, when not this device's.
        peer: Option<u8>,
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
    /// A VRAM write past the mock's cap on the host memory it commits (the mock's own
    /// limit, not the hardware's).
    VramFull {
        /// GPU address of the write.
        addr: u64,
        /// The refusal.
        full: VramFull,
    },
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
            MemError::Unflushed { addr, range, peer } => {
                let whose = match peer {
                    Some(r) => format!("the VRAM of hive region {r}"),
                    None => "VRAM".to_string(),
                };
                write!(
                    f,
                    "read of {addr:#x} reaches {whose} {:#x}..{:#x}, which the CPU wrote \
                     through BAR0 after the last HDP flush: the GPU would read stale bytes",
                    range.0, range.1
                )
            }
            MemError::Dma { addr, reason } => write!(f, "access of {addr:#x}: {reason}"),
            MemError::Cancelled => write!(f, "the queue was stopped"),
            MemError::VramFull { addr, full } => write!(f, "write of {addr:#x}: {full}"),
        }
    }
}

const TLB_ENTRIES: usize = 16;
// `Tlb::after` holds entry indices as bytes.
const _: () = assert!(TLB_ENTRIES <= 256);

/// The translations an engine found during one step: entry `k` covers GPU addresses
/// `[start[k], end[k])` as `res[k]` resolved the first of them (an empty entry covers
/// nothing). Kept as arrays so a look-up compares addresses without copying entries:
/// a wave's loads and stores of several buffers miss the last-used entry in turn.
#[derive(Clone, Copy)]
struct Tlb {
    start: [u64; TLB_ENTRIES],
    end: [u64; TLB_ENTRIES],
    res: [Resolved; TLB_ENTRIES],
    /// `after[k]`: the entry used right after entry `k` the last time `k` was left (a hint
    /// only, any index). A kernel that reads buffers A, B, C and writes D in each wave
    /// goes round the same entries in the same order, so the entry after the last one used
    /// is tried second, before the scan of all of them (the all-reduce's sums read three
    /// hive peers' VRAM and their own: each access missed the last-used entry and scanned).
    after: [u8; TLB_ENTRIES],
}

impl Tlb {
    const EMPTY: Tlb = Tlb {
        start: [1; TLB_ENTRIES],
        end: [0; TLB_ENTRIES],
        res: [Resolved {
            target: PhysTarget::Vram(0),
            span: 0,
            perms: [false; 3],
        }; TLB_ENTRIES],
        after: [0; TLB_ENTRIES],
    };

    /// The entry that covers `addr` and allows the access `need` (0 read, 1 write,
    /// 2 execute): `recent` tried first, then the entry used after it last time
    /// ([`Tlb::after`]), then every entry in order. Which entry answers when several
    /// cover `addr` does not matter: all were filled from the same tables during the step
    /// (an epoch change empties the TLB), so they translate `addr` to the same place.
    #[inline(always)]
    fn find(&self, addr: u64, need: usize, recent: usize) -> Option<usize> {
        let hit = |k: usize| self.start[k] <= addr && addr < self.end[k] && self.res[k].perms[need];
        if recent >= TLB_ENTRIES {
            return (0..TLB_ENTRIES).find(|&k| hit(k));
        }
        if hit(recent) {
            return Some(recent);
        }
        let guess = self.after[recent] as usize;
        if guess < TLB_ENTRIES && hit(guess) {
            return Some(guess);
        }
        (0..TLB_ENTRIES).find(|&k| hit(k))
    }

    /// Notes that entry `k` is used right after entry `recent` (for [`Tlb::find`]).
    #[inline]
    fn follow(&mut self, recent: usize, k: usize) {
        if recent != k
            && let Some(a) = self.after.get_mut(recent)
        {
            *a = k as u8;
        }
    }
}

/// Where resolved bytes live.
enum Place {
    /// This device's VRAM at this offset.
    Local(u64),
    /// Another hive member's VRAM at this offset: the member's index in
    /// [`GpuMem::peers`] (borrowed from there: cloning its handle for every access cost two
    /// atomic operations on a counter the other members' engines touch too), its region.
    Peer(usize, u8, u64),
    /// System memory at this bus address.
    System(u64),
    /// Another mock device's VRAM at this offset, reached through its BAR0 over PCIe: its
    /// index in [`GpuMem::bars`].
    Bar(usize, u64),
}

impl Place {
    /// The VRAM and offset of a VRAM place (`sh`: this device, `peers`: the members
    /// reached, [`GpuMem::peers`]), and the peer's region.
    fn vram<'s>(
        &self,
        sh: &'s Shared,
        peers: &'s [(u8, Arc<Shared>)],
    ) -> Option<(&'s Vram, u64, Option<u8>)> {
        match *self {
            Place::Local(v) => Some((&sh.vram, v, None)),
            Place::Peer(i, r, v) => peers.get(i).map(|(_, p)| (&p.vram, v, Some(r))),
            Place::System(_) | Place::Bar(..) => None,
        }
    }
}

/// GPU memory of one hub and vmid, for one engine, for the length of one step of its work
/// (it borrows the device, so a worker holds no reference to it between steps).
pub struct GpuMem<'a> {
    sh: &'a Shared,
    view: HubView,
    /// The GMC epoch the view was read at: a GMC register write makes it stale.
    epoch: u64,
    tlb: Tlb,
    next: usize,
    /// The entry of the last hit or fill, tried first: a wave's lanes and a kernel's loops
    /// mostly stay in one mapping.
    recent: usize,
    /// The last-level table of the last walk.
    leaf: Option<crate::walker::LeafTable>,
    /// Set when the queue is stopped: accesses fail with [`MemError::Cancelled`].
    cancel: Option<Arc<AtomicBool>>,
    /// Hive members reached during this step, and whether any was written (its blocked
    /// queues are woken when the step ends).
    peers: Vec<(u8, Arc<Shared>)>,
    peer_written: bool,
    /// Devices reached through their BAR0 during this step (PCIe peer-to-peer,
    /// [`crate::bus`]): the BAR's bus address and size as the first access found them.
    bars: Vec<(u64, u64, Arc<Shared>)>,
    /// The system-memory page of the last read that fit in one (a kernel's arguments,
    /// which every wave reads).
    sys_page: Option<SysPage>,
}

impl Drop for GpuMem<'_> {
    fn drop(&mut self) {
        if self.peer_written {
            for (_, p) in &self.peers {
                p.engines.memory_changed();
            }
            for (_, _, p) in &self.bars {
                p.engines.memory_changed();
            }
        }
    }
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
            tlb: Tlb::EMPTY,
            next: 0,
            recent: 0,
            leaf: None,
            cancel: None,
            peers: Vec::new(),
            peer_written: false,
            bars: Vec::new(),
            sys_page: None,
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
            self.tlb = Tlb::EMPTY;
            self.leaf = None;
        }
        Ok(())
    }

    /// Resolve `addr` for `access`, through the TLB. Inlined into its callers up to the
    /// TLB's answer (a call returning a whole `Result<Resolved, MemError>` cost as much as
    /// the look-up); a miss walks the tables out of line ([`GpuMem::walk`]).
    #[inline(always)]
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
        if let Some(k) = self.tlb.find(addr, need, self.recent) {
            self.tlb.follow(self.recent, k);
            self.recent = k;
            let e = &self.tlb.res[k];
            return Ok(Resolved {
                target: e.target.offset_by(addr - self.tlb.start[k]),
                span: self.tlb.end[k] - addr,
                perms: e.perms,
            });
        }
        self.walk(addr, access)
    }

    /// [`GpuMem::resolve`] of an address the TLB misses: a walk of the tables, whose
    /// translation fills the next entry.
    #[inline(never)]
    fn walk(&mut self, addr: u64, access: Access) -> Result<Resolved, MemError> {
        let res = self
            .view
            .resolve_with(&self.sh.vram, addr, access, &mut self.leaf)
            .map_err(|fault| MemError::Fault { fault, access })?;
        self.tlb.start[self.next] = addr;
        self.tlb.end[self.next] = addr.saturating_add(res.span);
        self.tlb.res[self.next] = res;
        self.tlb.follow(self.recent, self.next);
        self.recent = self.next;
        self.next = (self.next + 1) % TLB_ENTRIES;
        Ok(res)
    }

    /// Where `addr` lands for `access`.
    pub fn resolve_for(&mut self, addr: u64, access: Access) -> Result<PhysTarget, MemError> {
        self.resolve(addr, access).map(|r| r.target)
    }

    /// The place of `len` bytes at `target` (GPU address `addr`, for a fault): another
    /// member's VRAM is looked up on the fabric and must hold the bytes.
    /// Inlined: its callers pass the place on at once, and a call returning a whole
    /// `Result<Place, MemError>` cost more than the look-up (a wave's peer and argument reads).
    #[inline(always)]
    fn place(
        &mut self,
        addr: u64,
        target: PhysTarget,
        len: u64,
        access: Access,
    ) -> Result<Place, MemError> {
        let fault = |kind| MemError::Fault {
            fault: PageFault {
                va: addr,
                kind,
                shift: 12,
                entry: 0,
            },
            access,
        };
        Ok(match target {
            PhysTarget::Vram(v) => Place::Local(v),
            PhysTarget::System(bus) if crate::bus::in_bar_space(bus) => {
                match self.bar_place(addr, bus, len, access)? {
                    Some(place) => place,
                    None => Place::System(bus),
                }
            }
            PhysTarget::System(bus) => Place::System(bus),
            PhysTarget::Peer { region, offset } => {
                let i = match self.peers.iter().position(|(r, _)| *r == region) {
                    Some(i) => i,
                    None => {
                        let p = self
                            .sh
                            .hive_peer(region)
                            .ok_or_else(|| fault(FaultKind::NoMember))?;
                        self.peers.push((region, p));
                        self.peers.len() - 1
                    }
                };
                if !self.peers[i].1.vram.contains(offset, len) {
                    return Err(fault(FaultKind::BadAddress));
                }
                if access == Access::Write {
                    self.peer_written = true;
                }
                Place::Peer(i, region, offset)
            }
        })
    }

    /// The place of `len` bytes at bus address `bus` when another device's BAR0 holds them
    /// (`None`: no BAR there, system memory). Refused as the DMA to nowhere is (rule 4) when
    /// the device does not decode them, or when bus mastering is off (rule 3).
    fn bar_place(
        &mut self,
        addr: u64,
        bus: u64,
        len: u64,
        access: Access,
    ) -> Result<Option<Place>, MemError> {
        let dma = |reason: String| MemError::Dma { addr, reason };
        let cached = self.bars.iter().position(|&(base, size, _)| {
            bus.checked_sub(base)
                .is_some_and(|o| o.saturating_add(len) <= size)
        });
        let i = match cached {
            Some(i) => {
                let (base, _, dev) = &self.bars[i];
                dev.peer_bar0(*base, bus - base, len).map_err(dma)?;
                i
            }
            None => match crate::bus::reach(bus, len).map_err(dma)? {
                Some((dev, base, size)) => {
                    self.bars.push((base, size, dev));
                    self.bars.len() - 1
                }
                None => return Ok(None),
            },
        };
        if !self.sh.engines.bus_master() {
            return Err(dma(format!(
                "DMA {} of bus address {bus:#x} (BAR0 of {}) while bus mastering is off",
                if access == Access::Write {
                    "write"
                } else {
                    "read"
                },
                self.bars[i].2.name()
            )));
        }
        if access == Access::Write {
            self.peer_written = true;
        }
        Ok(Some(Place::Bar(i, bus - self.bars[i].0)))
    }

    /// Read `buf.len()` bytes at a resolved `target` (as an earlier access found it; `addr`
    /// names it in a fault), not HDP-checked: what is there now.
    pub fn read_target(
        &mut self,
        addr: u64,
        target: PhysTarget,
        buf: &mut [u8],
    ) -> Result<(), MemError> {
        match self.place(addr, target, buf.len() as u64, Access::Read)? {
            Place::System(bus) => self.sys_read(addr, bus, buf),
            Place::Bar(i, v) => {
                self.bars[i].2.vram.read(v, buf);
                Ok(())
            }
            place => {
                if let Some((vram, v, _)) = place.vram(self.sh, &self.peers) {
                    vram.read(v, buf);
                }
                Ok(())
            }
        }
    }

    /// Read `buf.len()` bytes at `addr`. With `hdp`, bytes the CPU wrote through BAR0 and
    /// has not flushed are refused.
    /// Inlined (into [`GpuMem::read`] and through it a shader's reads), as [`GpuMem::resolve`].
    #[inline(always)]
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
            // This device's VRAM (almost every access): no place to look up.
            if let PhysTarget::Vram(v) = r.target {
                if hdp && let Some(range) = self.sh.vram.unflushed(v, n as u64) {
                    return Err(MemError::Unflushed {
                        addr: at,
                        range,
                        peer: None,
                    });
                }
                self.sh.vram.read(v, &mut buf[done..done + n]);
                done += n;
                continue;
            }
            let part = &mut buf[done..done + n];
            let place = self.place(at, r.target, n as u64, access)?;
            match place.vram(self.sh, &self.peers) {
                Some((vram, v, peer)) => {
                    if hdp && let Some(range) = vram.unflushed(v, n as u64) {
                        return Err(MemError::Unflushed {
                            addr: at,
                            range,
                            peer,
                        });
                    }
                    vram.read(v, part);
                }
                None => match place {
                    Place::System(bus) => self.sys_read(at, bus, part)?,
                    // Through the other device's BAR0 and HDP, as its CPU reads: what
                    // VRAM holds (the HDP keeps no stale view from a BAR reader).
                    Place::Bar(i, v) => self.bars[i].2.vram.read(v, part),
                    _ => {}
                },
            }
            done += n;
        }
        Ok(())
    }

    /// Read `n` bytes (HDP-checked) at `addrs[l]` of every lane `l` set in `exec` into
    /// `out[l * n..]`, each lane's bytes in one mapping of this device's VRAM, translated
    /// through the last mapping a lane used (a wave's lanes mostly share one). False when
    /// any lane's read would fail, or would take the general path (another member's VRAM,
    /// system memory, a page boundary): nothing is recorded and `out` is meaningless, and
    /// the caller reads lane by lane, which finds the fault or unflushed byte with the
    /// result it has always had.
    pub fn read_lanes(&mut self, addrs: &[u64], exec: u64, n: usize, out: &mut [u8]) -> bool {
        if n == 0 || addrs.len() > 64 || out.len() < addrs.len() * n {
            return false;
        }
        // A broadcast (every lane one address, as a loop's operand shared by a wave):
        // one read, copied to the lanes.
        let mut lanes = addrs
            .iter()
            .enumerate()
            .filter(|&(l, _)| exec >> l & 1 != 0);
        if let Some((l0, &a0)) = lanes.next()
            && lanes.all(|(_, &a)| a == a0)
        {
            let (head, rest) = out.split_at_mut((l0 + 1) * n);
            let first = &mut head[l0 * n..];
            if self.read(a0, first).is_err() {
                return false;
            }
            let others = addrs.len() - l0 - 1;
            for (k, b) in rest.chunks_exact_mut(n).take(others).enumerate() {
                if exec >> (l0 + 1 + k) & 1 != 0 {
                    b.copy_from_slice(first);
                }
            }
            return true;
        }
        // The mapping in use: GPU addresses `[start, end)` from VRAM offset `vram`.
        let (mut start, mut end, mut vram) = (1u64, 0u64, 0u64);
        let mut offsets = [0u64; 64];
        for (l, &a) in addrs.iter().enumerate() {
            if exec >> l & 1 == 0 {
                continue;
            }
            if !(start..end).contains(&a) {
                let Ok(r) = self.resolve(a, Access::Read) else {
                    return false;
                };
                let PhysTarget::Vram(v) = r.target else {
                    return false;
                };
                (start, end, vram) = (a, a.saturating_add(r.span), v);
            }
            if end - a < n as u64 {
                return false;
            }
            let v = vram + (a - start);
            if self.sh.vram.unflushed(v, n as u64).is_some() {
                return false;
            }
            offsets[l] = v;
        }
        for (l, b) in out.chunks_exact_mut(n).take(addrs.len()).enumerate() {
            if exec >> l & 1 != 0 {
                self.sh.vram.read(offsets[l], b);
            }
        }
        true
    }

    /// Read data (HDP-checked). Inlined as [`GpuMem::read_as`].
    #[inline(always)]
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
        self.write_quiet(addr, data)?;
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

    fn sys_read(&mut self, addr: u64, bus: u64, buf: &mut [u8]) -> Result<(), MemError> {
        if !self.sh.engines.bus_master() {
            return Err(MemError::Dma {
                addr,
                reason: format!("DMA read of bus address {bus:#x} while bus mastering is off"),
            });
        }
        let dma = |e: DmaFault| MemError::Dma {
            addr,
            reason: e.to_string(),
        };
        if !self
            .sys_page
            .as_ref()
            .is_some_and(|p| p.holds(bus, buf.len()))
        {
            let page = self.sh.sysmem.page(bus).map_err(dma)?;
            if !page.holds(bus, buf.len()) {
                return self.sh.sysmem.read(bus, buf).map_err(dma);
            }
            self.sys_page = Some(page);
        }
        match &self.sys_page {
            Some(p) => p.read(bus, buf).map_err(dma),
            None => self.sh.sysmem.read(bus, buf).map_err(dma),
        }
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

    /// Moves up to `n` bytes (at most [`COPY_BOUNCE`]) from `src` to `dst` through `buf`
    /// by the general read and write paths; returns how many it moved.
    fn copy_bounced(
        &mut self,
        src: u64,
        dst: u64,
        n: u64,
        buf: &mut Vec<u8>,
    ) -> Result<u64, MemError> {
        let n = n.min(COPY_BOUNCE);
        buf.resize(n as usize, 0);
        self.read(src, buf)?;
        self.write_quiet(dst, buf)?;
        Ok(n)
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
            let bar =
                |t: PhysTarget| matches!(t, PhysTarget::System(b) if crate::bus::in_bar_space(b));
            match (s.target, d.target) {
                // Through another device's BAR0 (or to no memory at all): the general path.
                (s, d) if bar(s) || bar(d) => {
                    done += self.copy_bounced(src + done, dst + done, n, &mut bounce)?;
                    continue;
                }
                (PhysTarget::Vram(sv), PhysTarget::Vram(dv)) => {
                    if let Some(range) = self.sh.vram.unflushed(sv, n) {
                        return Err(MemError::Unflushed {
                            addr: src + done,
                            range,
                            peer: None,
                        });
                    }
                    self.sh
                        .vram
                        .copy_within(sv, dv, n)
                        .map_err(|full| MemError::VramFull {
                            addr: dst + done,
                            full,
                        })?;
                }
                (PhysTarget::System(sb), PhysTarget::Vram(dv)) => {
                    if !self.sh.engines.bus_master() {
                        return Err(MemError::Dma {
                            addr: src + done,
                            reason: "DMA read while bus mastering is off".into(),
                        });
                    }
                    let vram = &self.sh.vram;
                    let mut refused = None;
                    self.sh
                        .sysmem
                        .with_pages(sb, n as usize, |at, bytes| {
                            if refused.is_none() {
                                refused = vram.write(dv + at as u64, bytes).err();
                            }
                        })
                        .map_err(|e| MemError::Dma {
                            addr: src + done,
                            reason: e.to_string(),
                        })?;
                    if let Some(full) = refused {
                        return Err(MemError::VramFull {
                            addr: dst + done,
                            full,
                        });
                    }
                }
                (PhysTarget::Peer { .. }, _) | (_, PhysTarget::Peer { .. })
                    if !matches!(
                        (s.target, d.target),
                        (PhysTarget::System(_), _) | (_, PhysTarget::System(_))
                    ) =>
                {
                    // VRAM to VRAM across the fabric: straight from one device's memory into
                    // the other's, HDP-checked on the source's side as a read is.
                    let from = self.place(src + done, s.target, n, Access::Read)?;
                    let to = self.place(dst + done, d.target, n, Access::Write)?;
                    if let (Some((sv, so, peer)), Some((dv, dof, _))) = (
                        from.vram(self.sh, &self.peers),
                        to.vram(self.sh, &self.peers),
                    ) {
                        if let Some(range) = sv.unflushed(so, n) {
                            return Err(MemError::Unflushed {
                                addr: src + done,
                                range,
                                peer,
                            });
                        }
                        dv.copy_from(sv, so, dof, n)
                            .map_err(|full| MemError::VramFull {
                                addr: dst + done,
                                full,
                            })?;
                    }
                }
                _ => {
                    // Across devices or kinds of memory: through a bounce buffer (a page
                    // of a mapping, or up to the end of an aperture segment, at a time).
                    done += self.copy_bounced(src + done, dst + done, n, &mut bounce)?;
                    continue;
                }
            }
            done += n;
        }
        self.sh.engines.memory_changed();
        Ok(())
    }

    /// Write bytes at `addr` without waking this device's blocked queues (a shader's store;
    /// the dispatch wakes them when it ends).
    /// Inlined (into a shader's stores), as [`GpuMem::read_as`].
    #[inline(always)]
    fn write_quiet(&mut self, addr: u64, data: &[u8]) -> Result<(), MemError> {
        let mut done = 0usize;
        while done < data.len() {
            let at = addr.wrapping_add(done as u64);
            let r = self.resolve(at, Access::Write)?;
            let n = ((data.len() - done) as u64).min(r.span) as usize;
            let part = &data[done..done + n];
            match self.place(at, r.target, n as u64, Access::Write)? {
                Place::System(bus) => self.sys_write(at, bus, part)?,
                // Through the other device's BAR0: its HDP holds the bytes from its own
                // engines until it is flushed, as for its CPU's writes.
                Place::Bar(i, v) => self.bars[i]
                    .2
                    .vram
                    .cpu_write(v, part)
                    .map_err(|full| MemError::VramFull { addr: at, full })?,
                place => {
                    if let Some((vram, v, _)) = place.vram(self.sh, &self.peers) {
                        vram.write(v, part)
                            .map_err(|full| MemError::VramFull { addr: at, full })?;
                    }
                }
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
            let n = (len - done).min(d.span).min(FILL_STEP);
            let full = |full: VramFull| MemError::VramFull {
                addr: dst + done,
                full,
            };
            match self.place(dst + done, d.target, n, Access::Write)? {
                Place::Local(v) => self.sh.vram.fill(v, n, pattern).map_err(full)?,
                Place::Peer(i, _, v) => self.peers[i].1.vram.fill(v, n, pattern).map_err(full)?,
                Place::Bar(..) => {
                    let n = n.min(COPY_BOUNCE);
                    let bytes = pattern_bytes(pattern, n);
                    self.write_quiet(dst + done, &bytes)?;
                    done += n;
                    continue;
                }
                Place::System(bus) => {
                    self.sys_write(dst + done, bus, &pattern_bytes(pattern, n))?;
                }
            }
            done += n;
        }
        self.sh.engines.memory_changed();
        Ok(())
    }
}

/// `n` bytes of the dword `pattern`, repeated.
fn pattern_bytes(pattern: u32, n: u64) -> Vec<u8> {
    pattern
        .to_le_bytes()
        .iter()
        .copied()
        .cycle()
        .take(n as usize)
        .collect()
}

/// Bytes a copy between different memories moves at a time.
const COPY_BOUNCE: u64 = 1 << 20;

/// Bytes a fill resolves at a time (a peer's segment is one span of 192 GiB).
const FILL_STEP: u64 = 1 << 30;

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

    fn read_lanes(&mut self, addrs: &[u64], exec: u64, n: usize, out: &mut [u8]) -> bool {
        self.mem.read_lanes(addrs, exec, n, out)
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

    /// A failed read or write made again does nothing the first try did not: a read
    /// changes no memory (a TLB entry it filled translates the same), a write that failed
    /// partway wrote the bytes before its fault and writes the same ones again, and only
    /// the first failure of the dispatch is kept (`error`), so the engine reports the same
    /// one. The emulator's hot forms then move a whole wave's bytes in one access, the one
    /// its general path makes first, instead of computing the lanes' addresses for that
    /// path; a failure still goes lane by lane there, to the lane that faults.
    fn repeatable(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::{PhysTarget, Resolved, TLB_ENTRIES, Tlb};

    /// A TLB of entries over random, possibly overlapping ranges with random permissions.
    fn random_tlb(next: &mut impl FnMut() -> u64) -> Tlb {
        let mut t = Tlb::EMPTY;
        for k in 0..TLB_ENTRIES {
            let start = next() % 64 * 0x1000;
            t.start[k] = start;
            t.end[k] = start + (1 + next() % 4) * 0x1000;
            let p = next();
            t.res[k] = Resolved {
                target: PhysTarget::Vram(start),
                span: 0,
                perms: [p & 1 != 0, p & 2 != 0, p & 4 != 0],
            };
            t.after[k] = (next() % 20) as u8;
        }
        t
    }

    /// `find`'s two guesses (the last entry used, the entry used after it last time) never
    /// change whether an access hits: it answers an entry that covers the address with the
    /// permission whenever the plain scan of every entry finds one, and misses (the walk,
    /// and its fault) exactly when the scan does. Hints out of range are only skipped.
    #[test]
    fn tlb_guesses_answer_as_the_scan() {
        let mut s = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        let (mut hits, mut misses) = (0, 0);
        for _ in 0..200 {
            let t = random_tlb(&mut next);
            for _ in 0..50 {
                let addr = next() % (70 * 0x1000);
                let need = (next() % 3) as usize;
                let recent = (next() % 18) as usize;
                let scan = (0..TLB_ENTRIES)
                    .find(|&k| t.start[k] <= addr && addr < t.end[k] && t.res[k].perms[need]);
                match (t.find(addr, need, recent), scan) {
                    (Some(k), Some(_)) => {
                        hits += 1;
                        assert!(t.start[k] <= addr && addr < t.end[k] && t.res[k].perms[need]);
                    }
                    (None, None) => misses += 1,
                    (got, want) => panic!("{addr:#x} need {need}: {got:?} against {want:?}"),
                }
            }
        }
        assert!(hits > 1000 && misses > 1000, "{hits} hits, {misses} misses");
    }

    /// Going round four buffers in one order (a wave's three loads and a store), `follow`
    /// records each entry's successor, which `find` then tries second.
    #[test]
    fn tlb_learns_the_order_of_a_round() {
        let mut t = Tlb::EMPTY;
        for k in 0..4 {
            t.start[k] = k as u64 * 0x10_0000;
            t.end[k] = t.start[k] + 0x1000;
            t.res[k].perms = [true, true, false];
        }
        let mut recent = 0;
        for round in 0..2 {
            for k in [1, 3, 2, 0] {
                let got = t.find(t.start[k] + 8, 0, recent);
                assert_eq!(got, Some(k), "round {round}");
                t.follow(recent, k);
                recent = k;
            }
        }
        assert_eq!(t.after[..4], [1, 3, 0, 2]);
    }
}
