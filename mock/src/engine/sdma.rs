//! An SDMA ring: SDMA 6 (navi31, `sdma_v6_0_0_pkt_open.h`), SDMA 7 (navi48/navi44: the same
//! packet formats — Linux's `sdma_v7_0.c` builds its packets from the SDMA 6 header and
//! tinygrad drives an RX 9070 with them) and SDMA 4.4 (MI300, `vega10_sdma_pkt_open.h`)
//! packets. Pointers are in bytes: the doorbell carries the
//! write pointer, the read pointer is written back as a 64-bit byte count.
//!
//! Packets (header: op 7:0, sub-op 15:8):
//! - `NOP` (count 29:16 dwords follow), `COPY_LINEAR` (count = bytes − 1; 30 bits on SDMA
//!   6, 22 on 4.4), `WRITE_UNTILED` (count = dwords − 1), `CONSTANT_FILL` (fill size 31:30:
//!   byte, 16-bit or dword pattern; count = bytes − 1), `FENCE` (a dword), `TRAP` (IH entry
//!   with the 28-bit context), `POLL_REGMEM` (memory or register, `(value & mask) FUNC
//!   (reference & mask)`; with `HDP_FLUSH` it writes the reference to the register at
//!   `ADDR_HI` and polls the one at `ADDR_LO`), `TIMESTAMP` (set: ignored; get and get-global:
//!   the 64-bit GPU clock), `GCR_REQ` (SDMA 6 and 7; caches are coherent in the mock),
//!   `INDIRECT` (one level; the packet must end on an 8-dword boundary of the ring, which is
//!   why drivers pad before it).
//! - Header bits that only steer caches or compression are accepted and change nothing: the
//!   mock's memory is coherent and never compressed (`COPY_LINEAR`'s `CPV`, which Linux sets
//!   on SDMA 7, and SDMA 7's `CONSTANT_FILL` `COMPRESS` bit 16). Newer Linux appends an eighth,
//!   compression-control dword to an SDMA 7 `COPY_LINEAR`; the mock decodes the seven-dword
//!   form of Linux 6.12 and tinygrad, and a zero eighth dword then runs as a `NOP`.
//! - Anything else halts the ring with an error naming the opcode, ring and address, and on
//!   SDMA 4.4 posts the interrupt Linux handles illegal instructions on
//!   (`SDMA_SRBMWRITE`).

use am_autogen::ih as ihsrc;
use am_autogen::packets::{qword, sdma as sp};
use am_autogen::sdma_pkt::v6 as op;

use super::cp::{Exec, Failure, compare, halt, mem_failure};
use super::mem::GpuMem;
use super::{QueueConfig, QueueCtl, Runner, Step};
use crate::device::Shared;
use crate::ip::ih::IhEntry;

const STEP_BUDGET: u32 = 512;

/// The hub client id of an SDMA engine (`gfxhub_v3_0.c` lists SDMA0 at 13; chosen for the
/// MM hub as well).
const CID_SDMA0: u32 = 13;

#[derive(Clone, Copy, Debug)]
struct Ib {
    base: u64,
    len: u64,
    pos: u64,
}

pub(super) struct Sdma {
    /// Bytes consumed.
    rptr: u64,
    /// Write pointer in bytes.
    wptr: u64,
    ib: Option<Ib>,
    /// `POLL_REGMEM` with `HDP_FLUSH`: the request is written, the poll goes on.
    wrote: bool,
    halted: bool,
    packets: u64,
}

fn op_name(o: u32, v6: bool) -> &'static str {
    sp::name(o, v6).unwrap_or("unknown")
}

/// Where a packet was found.
#[derive(Clone, Copy)]
struct At {
    addr: u64,
    in_ib: bool,
    /// Ring dword index of the header (ring packets).
    ring_dw: u64,
}

impl Sdma {
    pub(super) fn new(cfg: &QueueConfig) -> Sdma {
        Sdma {
            rptr: cfg.start.0,
            wptr: cfg.start.1,
            ib: None,
            wrote: false,
            halted: false,
            packets: 0,
        }
    }

    fn bad(&self, sh: &Shared, cfg: &QueueConfig, at: At, why: impl Into<String>) -> Exec {
        let (engine, queue, _) = cfg.slot;
        // SDMA 4.4: Linux takes illegal instructions on the SRBMWRITE source.
        let ih = (sh.gc_major() < 10).then(|| IhEntry {
            client_id: sdma4_client(engine),
            src_id: ihsrc::sdma0_4_0::SDMA0_4_0__SRCID__SDMA_SRBMWRITE as u8,
            ring_id: queue,
            node_id: engine / 4,
            ..Default::default()
        });
        Exec::Fail(Failure {
            message: format!("{} at GPU address {:#x}: {}", cfg.name, at.addr, why.into()),
            violation: true,
            ih,
        })
    }

    fn mem_fail(
        &self,
        sh: &Shared,
        cfg: &QueueConfig,
        at: At,
        what: &str,
        e: super::mem::MemError,
    ) -> Exec {
        mem_failure(
            sh,
            cfg,
            cfg.hub,
            0,
            at.addr,
            what,
            e,
            CID_SDMA0 + u32::from(cfg.slot.0 % 4),
        )
    }

    /// Dwords of the packet whose first dwords are `dw` (at least the header; WRITE needs
    /// four to know its length).
    fn packet_len(&self, v6: bool, dw: &[u32]) -> Result<u64, String> {
        let h = dw[0];
        sp::packet_dwords(dw, v6).ok_or_else(|| {
            format!(
                "unknown SDMA opcode {:#x} (sub-op {:#x}, header {h:#010x})",
                sp::OP.get(h),
                sp::SUB_OP.get(h)
            )
        })
    }

    fn exec(
        &mut self,
        sh: &Shared,
        mem: &mut GpuMem<'_>,
        cfg: &QueueConfig,
        at: At,
        dw: &[u32],
    ) -> Exec {
        let v6 = sh.gc_major() >= 10;
        let h = dw[0];
        let (o, sub) = (sp::OP.get(h), sp::SUB_OP.get(h));
        let not_modelled = |what: &str| {
            format!(
                "{} {what} (header {h:#010x}) is not modelled",
                op_name(o, v6)
            )
        };
        match o {
            op::SDMA_OP_NOP => Exec::Next,
            op::SDMA_OP_COPY => {
                if sub != op::SDMA_SUBOP_COPY_LINEAR {
                    return self.bad(sh, cfg, at, not_modelled(&format!("sub-op {sub:#x}")));
                }
                use sp::copy_linear as c;
                if c::BROADCAST.is_set(h) || (v6 && c::BACKWARDS.is_set(h)) {
                    return self.bad(sh, cfg, at, not_modelled("with broadcast or backwards"));
                }
                let count = u64::from(c::count(v6).at(dw)) + 1;
                let src = qword(dw[c::SRC_LO], dw[c::SRC_LO + 1]);
                let dst = qword(dw[c::DST_LO], dw[c::DST_LO + 1]);
                match mem.copy(src, dst, count) {
                    Ok(()) => Exec::Next,
                    Err(e) => self.mem_fail(sh, cfg, at, "COPY_LINEAR", e),
                }
            }
            op::SDMA_OP_WRITE => {
                if sub != op::SDMA_SUBOP_WRITE_LINEAR {
                    return self.bad(sh, cfg, at, not_modelled(&format!("sub-op {sub:#x}")));
                }
                use sp::write_untiled as wu;
                let dst = qword(dw[wu::DST_LO], dw[wu::DST_LO + 1]);
                if !dst.is_multiple_of(4) {
                    return self.bad(sh, cfg, at, format!("WRITE to unaligned address {dst:#x}"));
                }
                let bytes: Vec<u8> = dw[wu::DATA..]
                    .iter()
                    .flat_map(|v| v.to_le_bytes())
                    .collect();
                match mem.write(dst, &bytes) {
                    Ok(()) => Exec::Next,
                    Err(e) => self.mem_fail(sh, cfg, at, "WRITE", e),
                }
            }
            op::SDMA_OP_CONST_FILL => {
                use sp::constant_fill as f;
                let dst = qword(dw[f::DST_LO], dw[f::DST_LO + 1]);
                let count = u64::from(f::count(v6).at(dw)) + 1;
                let data = dw[f::DATA];
                let pattern = match f::FILLSIZE.get(h) {
                    0 => (data & 0xff) * 0x0101_0101,
                    1 => (data & 0xffff) * 0x0001_0001,
                    f::FILLSIZE_DWORD => data,
                    _ => return self.bad(sh, cfg, at, "CONST_FILL fill size 3 is reserved"),
                };
                match mem.fill(dst, count, pattern) {
                    Ok(()) => Exec::Next,
                    Err(e) => self.mem_fail(sh, cfg, at, "CONST_FILL", e),
                }
            }
            op::SDMA_OP_FENCE => {
                use sp::fence as f;
                let addr = qword(dw[f::ADDR_LO], dw[f::ADDR_LO + 1]);
                if !addr.is_multiple_of(4) {
                    return self.bad(sh, cfg, at, format!("FENCE to unaligned address {addr:#x}"));
                }
                match mem.write32(addr, dw[f::DATA]) {
                    Ok(()) => Exec::Next,
                    Err(e) => self.mem_fail(sh, cfg, at, "FENCE", e),
                }
            }
            op::SDMA_OP_TRAP => {
                sh.post_ih(trap_entry(sh.gc_major(), cfg, sp::trap::INT_CONTEXT.at(dw)));
                Exec::Next
            }
            op::SDMA_OP_POLL_REGMEM => self.poll_regmem(sh, mem, cfg, at, dw),
            op::SDMA_OP_TIMESTAMP => match sub {
                op::SDMA_SUBOP_TIMESTAMP_SET => Exec::Next,
                op::SDMA_SUBOP_TIMESTAMP_GET | op::SDMA_SUBOP_TIMESTAMP_GET_GLOBAL => {
                    let addr = qword(dw[sp::timestamp::ADDR_LO], dw[sp::timestamp::ADDR_LO + 1]);
                    if !addr.is_multiple_of(8) {
                        return self.bad(
                            sh,
                            cfg,
                            at,
                            format!("TIMESTAMP to unaligned address {addr:#x}"),
                        );
                    }
                    match mem.write64(addr, sh.engines.clock.now()) {
                        Ok(()) => Exec::Next,
                        Err(e) => self.mem_fail(sh, cfg, at, "TIMESTAMP", e),
                    }
                }
                _ => self.bad(sh, cfg, at, not_modelled(&format!("sub-op {sub:#x}"))),
            },
            op::SDMA_OP_GCR_REQ => Exec::Next,
            op::SDMA_OP_INDIRECT => {
                if at.in_ib {
                    return self.bad(
                        sh,
                        cfg,
                        at,
                        "INDIRECT inside an indirect buffer: SDMA has one IB level",
                    );
                }
                if !(at.ring_dw + 6).is_multiple_of(8) {
                    return self.bad(
                        sh,
                        cfg,
                        at,
                        format!(
                            "INDIRECT at ring dword {} ends at dword {}, not on an 8-dword boundary (pad with NOPs before it)",
                            at.ring_dw,
                            at.ring_dw + 6
                        ),
                    );
                }
                use sp::indirect as ind;
                let vmid = ind::VMID.get(h) as u8;
                if vmid != cfg.vmid {
                    return self.bad(
                        sh,
                        cfg,
                        at,
                        format!(
                            "INDIRECT for vmid {vmid} on a ring of vmid {}: not modelled",
                            cfg.vmid
                        ),
                    );
                }
                let base = qword(dw[ind::BASE_LO], dw[ind::BASE_LO + 1]);
                let len = u64::from(ind::IB_SIZE.at(dw));
                if !base.is_multiple_of(4) {
                    return self.bad(
                        sh,
                        cfg,
                        at,
                        format!("INDIRECT base {base:#x} is not dword-aligned"),
                    );
                }
                if len > 0 {
                    self.ib = Some(Ib { base, len, pos: 0 });
                }
                Exec::Next
            }
            _ => self.bad(sh, cfg, at, format!("unknown SDMA opcode {o:#x}")),
        }
    }

    fn poll_regmem(
        &mut self,
        sh: &Shared,
        mem: &mut GpuMem<'_>,
        cfg: &QueueConfig,
        at: At,
        dw: &[u32],
    ) -> Exec {
        use sp::poll_regmem as r;
        let h = dw[0];
        let func = r::FUNC.get(h);
        let mem_poll = r::MEM_POLL.is_set(h);
        let hdp_flush = r::HDP_FLUSH.is_set(h);
        let (reference, mask) = (dw[r::VALUE], dw[r::MASK]);
        let value = if mem_poll {
            let addr = qword(dw[r::ADDR_LO], dw[r::ADDR_HI]);
            if !addr.is_multiple_of(4) {
                return self.bad(
                    sh,
                    cfg,
                    at,
                    format!("POLL_REGMEM of unaligned address {addr:#x}"),
                );
            }
            match mem.poll32(addr) {
                Ok(v) => v,
                Err(e) => return self.mem_fail(sh, cfg, at, "POLL_REGMEM read", e),
            }
        } else {
            if hdp_flush && !self.wrote {
                if let Err(e) = sh.engine_reg(0, u64::from(dw[r::ADDR_HI] >> 2), Some(reference)) {
                    return self.bad(sh, cfg, at, format!("POLL_REGMEM HDP flush request: {e}"));
                }
                self.wrote = true;
            }
            match sh.engine_reg(0, u64::from(dw[r::ADDR_LO] >> 2), None) {
                Ok(v) => v,
                Err(e) => return self.bad(sh, cfg, at, format!("POLL_REGMEM register: {e}")),
            }
        };
        match compare(func, value & mask, reference & mask) {
            None => self.bad(sh, cfg, at, "POLL_REGMEM function 7 is reserved"),
            Some(true) => {
                self.wrote = false;
                Exec::Next
            }
            Some(false) => Exec::Blocked,
        }
    }

    /// Read the packet at dword `pos` of a buffer of `len` dwords (a ring wraps); `None`
    /// when it is not all there yet.
    fn fetch(
        &self,
        v6: bool,
        mem: &mut GpuMem<'_>,
        base: u64,
        len: u64,
        pos: u64,
        avail: u64,
    ) -> Result<Option<Vec<u32>>, Result<super::mem::MemError, String>> {
        let read = |mem: &mut GpuMem<'_>,
                    from: u64,
                    out: &mut [u32]|
         -> Result<(), super::mem::MemError> {
            let mut done = 0u64;
            while done < out.len() as u64 {
                let p = (from + done) % len;
                let k = (out.len() as u64 - done).min(len - p);
                mem.read_dwords(base + p * 4, &mut out[done as usize..(done + k) as usize])?;
                done += k;
            }
            Ok(())
        };
        let head = avail.min(4) as usize;
        let mut first = vec![0u32; head];
        read(mem, pos, &mut first).map_err(Ok)?;
        let n = match self.packet_len(v6, &first) {
            Ok(n) => n,
            // WRITE's length is in its fourth dword: wait for it.
            Err(_) if sp::OP.get(first[0]) == op::SDMA_OP_WRITE && head < 4 => return Ok(None),
            Err(e) => return Err(Err(e)),
        };
        if sp::OP.get(first[0]) == op::SDMA_OP_WRITE && head < 4 {
            return Ok(None);
        }
        if n > avail {
            return Ok(None);
        }
        let mut dw = vec![0u32; n as usize];
        read(mem, pos, &mut dw).map_err(Ok)?;
        Ok(Some(dw))
    }

    fn halt_with(&mut self, sh: &Shared, ctl: &QueueCtl, e: Exec) -> Step {
        if let Exec::Fail(f) = e {
            halt(sh, ctl, f);
        }
        self.halted = true;
        Step::Halted
    }

    fn publish(&self, ctl: &QueueCtl) {
        let (r, w, p, busy) = (self.rptr, self.wptr, self.packets, self.ib.is_some());
        ctl.set_status(|s| {
            s.rptr = r;
            s.wptr = s.wptr.max(w);
            s.packets = p;
            s.busy = busy;
        });
    }
}

impl Runner for Sdma {
    fn step(&mut self, sh: &Shared, ctl: &QueueCtl, cfg: &QueueConfig) -> Step {
        if self.halted {
            return Step::Halted;
        }
        let v6 = sh.gc_major() >= 10;
        let mut mem = match GpuMem::new(sh, cfg.hub, cfg.vmid) {
            Ok(m) => m.with_cancel(ctl.stop.clone()),
            Err(e) => {
                let f = Exec::Fail(Failure {
                    message: format!("{}: its hub cannot be read: {e}", cfg.name),
                    violation: true,
                    ih: None,
                });
                return self.halt_with(sh, ctl, f);
            }
        };
        let ring_dw = cfg.ring_size / 4;
        for _ in 0..STEP_BUDGET {
            if let Some(ib) = self.ib {
                if ib.pos >= ib.len {
                    self.ib = None;
                    continue;
                }
                let at = At {
                    addr: ib.base + ib.pos * 4,
                    in_ib: true,
                    ring_dw: 0,
                };
                let dw = match self.fetch(v6, &mut mem, ib.base, ib.len, ib.pos, ib.len - ib.pos) {
                    Ok(Some(dw)) => dw,
                    Ok(None) => {
                        let e = self.bad(
                            sh,
                            cfg,
                            at,
                            "packet runs past the end of its indirect buffer",
                        );
                        return self.halt_with(sh, ctl, e);
                    }
                    Err(Ok(e)) => {
                        let e = self.mem_fail(sh, cfg, at, "IB fetch", e);
                        return self.halt_with(sh, ctl, e);
                    }
                    Err(Err(why)) => {
                        let e = self.bad(sh, cfg, at, why);
                        return self.halt_with(sh, ctl, e);
                    }
                };
                match self.exec(sh, &mut mem, cfg, at, &dw) {
                    Exec::Next => {
                        if let Some(i) = self.ib.as_mut() {
                            i.pos += dw.len() as u64;
                        }
                        self.packets += 1;
                    }
                    Exec::Blocked => {
                        self.publish(ctl);
                        return Step::Blocked;
                    }
                    e => return self.halt_with(sh, ctl, e),
                }
                continue;
            }
            if ctl.config_stale() {
                self.publish(ctl);
                return Step::Progress;
            }
            let mut w = self.wptr;
            if let Some(v) = ctl.doorbell() {
                w = w.max(v);
            }
            if let Some(addr) = cfg.wptr_poll
                && let Ok(v) = mem.poll64(addr)
            {
                w = w.max(v);
            }
            self.wptr = w;
            let avail = self.wptr.wrapping_sub(self.rptr) / 4;
            let pos = (self.rptr / 4) % ring_dw;
            let at = At {
                addr: cfg.ring + pos * 4,
                in_ib: false,
                ring_dw: pos,
            };
            if avail == 0 {
                self.publish(ctl);
                return Step::Idle {
                    poll: cfg.wptr_poll.is_some(),
                };
            }
            if avail > ring_dw || !self.wptr.is_multiple_of(4) {
                let e = self.bad(
                    sh,
                    cfg,
                    at,
                    format!(
                        "write pointer {:#x} (bytes) is not a dword count within a ring ({:#x} bytes) of the read pointer {:#x}",
                        self.wptr, cfg.ring_size, self.rptr
                    ),
                );
                return self.halt_with(sh, ctl, e);
            }
            let dw = match self.fetch(v6, &mut mem, cfg.ring, ring_dw, pos, avail) {
                Ok(Some(dw)) => dw,
                Ok(None) => {
                    self.publish(ctl);
                    return Step::Idle {
                        poll: cfg.wptr_poll.is_some(),
                    };
                }
                Err(Ok(e)) => {
                    let e = self.mem_fail(sh, cfg, at, "ring fetch", e);
                    return self.halt_with(sh, ctl, e);
                }
                Err(Err(why)) => {
                    let e = self.bad(sh, cfg, at, why);
                    return self.halt_with(sh, ctl, e);
                }
            };
            ctl.set_status(|s| {
                s.last_packet = Some((
                    at.addr,
                    format!(
                        "{} (header {:#010x})",
                        op_name(sp::OP.get(dw[0]), v6),
                        dw[0]
                    ),
                ))
            });
            match self.exec(sh, &mut mem, cfg, at, &dw) {
                Exec::Next => {}
                Exec::Blocked => {
                    self.publish(ctl);
                    return Step::Blocked;
                }
                e => return self.halt_with(sh, ctl, e),
            }
            self.rptr = self.rptr.wrapping_add(dw.len() as u64 * 4);
            self.packets += 1;
            if let Some(addr) = cfg.rptr_addr
                && let Err(e) = mem.write64(addr, self.rptr)
            {
                let e = self.mem_fail(sh, cfg, at, "read-pointer write-back", e);
                return self.halt_with(sh, ctl, e);
            }
        }
        self.publish(ctl);
        Step::Progress
    }
}

/// The IH client of SDMA 4.4 engine `e` (four per AID: SDMA0..3 of `soc15_ih_clientid`;
/// the node id says which AID).
fn sdma4_client(engine: u8) -> u8 {
    [
        ihsrc::SOC15_IH_CLIENTID_SDMA0,
        ihsrc::SOC15_IH_CLIENTID_SDMA1,
        ihsrc::SOC15_IH_CLIENTID_SDMA2,
        ihsrc::SOC15_IH_CLIENTID_SDMA3,
    ][usize::from(engine % 4)] as u8
}

/// A `TRAP`'s interrupt: SDMA 6 (in GC) posts as client GFX source `SDMA_TRAP` with ring id
/// `engine << 4 | queue` (`sdma_v6_0_process_trap_irq`); SDMA 4.4 as its own client
/// (`sdma4_client`) with source `SDMA_TRAP`, ring id = the queue, node id = the AID.
fn trap_entry(gc_major: u8, cfg: &QueueConfig, context: u32) -> IhEntry {
    let (engine, queue, _) = cfg.slot;
    if gc_major >= 10 {
        IhEntry {
            client_id: ihsrc::SOC21_IH_CLIENTID_GFX as u8,
            src_id: ihsrc::gfx_11_0_0::GFX_11_0_0__SRCID__SDMA_TRAP as u8,
            ring_id: engine << 4 | queue,
            vmid: cfg.vmid,
            src_data: [context, 0, 0, 0],
            ..Default::default()
        }
    } else {
        IhEntry {
            client_id: sdma4_client(engine),
            src_id: ihsrc::sdma0_4_0::SDMA0_4_0__SRCID__SDMA_TRAP as u8,
            ring_id: queue,
            vmid: cfg.vmid,
            node_id: engine / 4,
            src_data: [context, 0, 0, 0],
            ..Default::default()
        }
    }
}
