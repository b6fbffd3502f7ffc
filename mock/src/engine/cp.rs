//! The command processor of a compute queue: PM4 type-3 packets on a ring and in indirect
//! buffers (GFX11 `nvd.h` and GFX9 `soc15d.h` encodings: the packets a compute queue runs
//! are laid out alike, except `ACQUIRE_MEM`), and the 64-byte AQL packets of an HSA queue
//! with PM4 vendor packets inside.
//!
//! Packets (header: type 31:30 = 3, count 29:16 = body dwords − 1, opcode 15:8):
//! - `SET_SH_REG` / `SET_UCONFIG_REG`: register offsets from 0x2C00 / 0xC000 (dwords, the
//!   XCC's own view). SH registers (`COMPUTE_*`) are the queue's own state; UCONFIG
//!   registers are written to the device.
//! - `DISPATCH_DIRECT`: runs `am_emu` from the `COMPUTE_*` state (see [`Cp::dispatch`]).
//! - `RELEASE_MEM`: after the work before it, writes nothing / 32 bits / 64 bits / the GPU
//!   clock (`DATA_SEL` 0–3) and with `INT_SEL` 1 or 2 posts the end-of-pipe IH entry
//!   carrying the context id.
//! - `WAIT_REG_MEM`: waits until `(value & mask) FUNC (reference & mask)` for a dword of
//!   memory or a register; operation 1 first writes the reference to one register and then
//!   polls another (the HDP flush request/done pair).
//! - `INDIRECT_BUFFER`: at most two levels below the ring (IB1, IB2), with its size; the
//!   chain bit replaces the current buffer.
//! - `COPY_DATA`, `WRITE_DATA` (registers and memory), `EVENT_WRITE`, `ACQUIRE_MEM` (caches
//!   are coherent in the mock: nothing to do), `NOP`, `PRED_EXEC` (inside IBs: the next
//!   dwords run only on the XCCs its mask selects).
//!
//! Anything else — an unknown opcode, a wrong length, a field value the mock does not
//! model — halts the queue with an error naming the packet, the queue and the GPU address,
//! records a violation, and posts `CP_BAD_OPCODE_ERROR`.

use std::collections::HashMap;

use am_autogen::ih as ihsrc;
use am_autogen::packets::{aql, bits, pm4 as p4, qword};
use am_autogen::pm4::nvd as pm4;

use super::mem::{GpuMem, MemError, ShaderMem};
use super::{QueueConfig, QueueCtl, QueueKind, Runner, Step};
use crate::device::Shared;
use crate::ip::ih::IhEntry;
use crate::regs::RegId;

/// SH registers end here (`SET_SH_REG` space, dwords).
const SH_END: u32 = pm4::PACKET3_SET_SH_REG_END;
/// UCONFIG space: `0xC000..0x10000`. (Linux's `PACKET3_SET_UCONFIG_REG_END` says 0xC400, but
/// drivers set UCONFIG registers above it — thread-trace and perf-counter controls — and
/// hardware takes them.)
const UCONFIG_END: u32 = 0x1_0000;
/// Packets one step executes before the worker looks at its stop flag again.
const STEP_BUDGET: u32 = 512;

/// GC UTCL2 client ids of the CP and the shader's memory paths (`gfxhub_v3_0.c` names
/// them; the values are the mock's choice for the hub's `CID` field).
pub(super) const CID_CPC: u32 = 5;
const CID_TCP: u32 = 8;

/// An indirect buffer being executed.
#[derive(Clone, Copy, Debug)]
pub(super) struct Frame {
    /// GPU address of its first dword.
    base: u64,
    /// Length in dwords.
    len: u64,
    /// Next dword.
    pos: u64,
}

/// Why a packet stopped the queue.
#[derive(Debug)]
pub(super) struct Failure {
    pub(super) message: String,
    /// A contract violation (recorded for tests), as opposed to a fault the program made.
    pub(super) violation: bool,
    /// The interrupt hardware posts.
    pub(super) ih: Option<IhEntry>,
}

/// What a packet did.
pub(super) enum Exec {
    /// Done: go on after it.
    Next,
    /// Its wait does not hold yet: run it again later.
    Blocked,
    /// Done; execute this indirect buffer next, then come back.
    Push(Frame),
    /// Done; continue in this buffer instead of the current one (IB chaining).
    Chain(Frame),
    /// Done; skip this many dwords after it (`PRED_EXEC` for another XCC).
    Skip(u64),
    /// The queue stops.
    Fail(Failure),
}

/// Where a packet was found.
#[derive(Clone, Copy)]
struct At {
    /// GPU address of its header.
    addr: u64,
    /// XCC executing it.
    xcc: u8,
    /// Logical index of that XCC in the queue's partition.
    lane: usize,
    /// IB depth: 0 on the ring.
    depth: usize,
}

/// AQL work that may wait halfway: a PM4 vendor packet runs its IB on each XCC in turn.
struct AqlIb {
    xcc: usize,
    frames: Vec<Frame>,
    /// The packet's IB, as each XCC starts it.
    first: Frame,
    signal: u64,
}

/// A compute queue's command processor.
pub(super) struct Cp {
    kind: QueueKind,
    /// Units consumed (dwords of a PM4 ring, packets of an AQL queue).
    rptr: u64,
    wptr: u64,
    /// PM4: indirect buffers under way above the ring.
    frames: Vec<Frame>,
    /// AQL: the vendor packet under way.
    aql_ib: Option<AqlIb>,
    /// SH registers the queue set, by register (per XCC instance).
    sh_regs: HashMap<RegId, u32>,
    /// `WAIT_REG_MEM` write-then-wait: the write is done, the wait goes on.
    wrote: bool,
    halted: bool,
    packets: u64,
    dispatches: u64,
}

/// Dwords a PM4 packet with this header takes, or why it cannot be parsed.
fn packet_len(h: u32) -> Result<u64, String> {
    match p4::TYPE.get(h) {
        pm4::PACKET_TYPE3 => {
            // A NOP with count 0x3FFF is the one-dword filler (`PACKET3(NOP, 0x3FFF)`).
            if p4::OPCODE.get(h) == pm4::PACKET3_NOP
                && p4::COUNT.get(h) == p4::COUNT.get(p4::NOP_FILLER)
            {
                Ok(1)
            } else {
                Ok(u64::from(p4::COUNT.get(h)) + 2)
            }
        }
        pm4::PACKET_TYPE2 => Ok(1),
        t => Err(format!(
            "type-{t} packet header {h:#010x}: compute queues take type-3 packets"
        )),
    }
}

fn opcode_name(op: u32) -> &'static str {
    p4::name(op).unwrap_or("unknown")
}

/// `WAIT_REG_MEM`/`POLL_REGMEM` compare functions: 0 always, 1 <, 2 ≤, 3 =, 4 ≠, 5 ≥, 6 >.
pub(super) fn compare(func: u32, value: u32, reference: u32) -> Option<bool> {
    Some(match func {
        0 => true,
        1 => value < reference,
        2 => value <= reference,
        3 => value == reference,
        4 => value != reference,
        5 => value >= reference,
        6 => value > reference,
        _ => return None,
    })
}

impl Cp {
    pub(super) fn new(cfg: &QueueConfig) -> Cp {
        Cp {
            kind: cfg.kind,
            rptr: cfg.start.0,
            wptr: cfg.start.1,
            frames: Vec::new(),
            aql_ib: None,
            sh_regs: HashMap::new(),
            wrote: false,
            halted: false,
            packets: 0,
            dispatches: 0,
        }
    }

    /// A failure that is the driver's mistake: violation and bad-opcode interrupt.
    fn bad(&self, cfg: &QueueConfig, at: At, what: impl Into<String>) -> Exec {
        Exec::Fail(Failure {
            message: format!(
                "{} at GPU address {:#x} (XCC {}): {}",
                cfg.name,
                at.addr,
                at.xcc,
                what.into()
            ),
            violation: true,
            ih: Some(cp_entry(
                cfg,
                at.xcc,
                ihsrc::gfx_9_0::GFX_9_0__SRCID__CP_BAD_OPCODE_ERROR as u8,
                0,
            )),
        })
    }

    /// A memory access of the CP failed.
    fn mem_failure(&self, sh: &Shared, cfg: &QueueConfig, at: At, what: &str, e: MemError) -> Exec {
        mem_failure(sh, cfg, cfg.hub, at.xcc, at.addr, what, e, CID_CPC)
    }

    /// Stop the queue: record, post, remember.
    fn halt(&mut self, sh: &Shared, ctl: &QueueCtl, f: Failure) -> Step {
        halt(sh, ctl, f);
        self.halted = true;
        Step::Halted
    }

    fn publish(&self, ctl: &QueueCtl) {
        let (rptr, wptr, packets, dispatches) =
            (self.rptr, self.wptr, self.packets, self.dispatches);
        let busy = !self.frames.is_empty() || self.aql_ib.is_some();
        ctl.set_status(|s| {
            s.rptr = rptr;
            s.wptr = s.wptr.max(wptr);
            s.packets = packets;
            s.dispatches = dispatches;
            s.busy = busy;
        });
    }

    /// The write pointer from the doorbell (and the poll address, if the queue polls), in
    /// ring units.
    fn update_wptr(&mut self, mem: &mut GpuMem<'_>, ctl: &QueueCtl, cfg: &QueueConfig) {
        let mut w = self.wptr;
        if let Some(v) = ctl.doorbell() {
            // An AQL doorbell carries the index of the last packet written.
            w = w.max(if self.kind == QueueKind::Aql {
                v.wrapping_add(1)
            } else {
                v
            });
        }
        if let Some(addr) = cfg.wptr_poll
            && let Ok(v) = mem.poll64(addr)
        {
            w = w.max(v);
        }
        self.wptr = w;
    }

    fn write_rptr(&self, mem: &mut GpuMem<'_>, cfg: &QueueConfig) -> Result<(), MemError> {
        let Some(addr) = cfg.rptr_addr else {
            return Ok(());
        };
        match self.kind {
            // The ring offset in dwords, as CP_HQD_PQ_RPTR holds it.
            QueueKind::Pm4 => mem.write32(addr, (self.rptr % (cfg.ring_size / 4)) as u32),
            // The read dispatch id: packets consumed.
            _ => mem.write64(addr, self.rptr),
        }
    }

    /// Read the PM4 packet at `pos` of a buffer of `len` dwords at `base` (a ring wraps).
    fn fetch(
        mem: &mut GpuMem<'_>,
        base: u64,
        len: u64,
        pos: u64,
        avail: u64,
        ring: bool,
    ) -> Result<Option<Vec<u32>>, Result<MemError, String>> {
        let addr = |p: u64| base + (p % len) * 4;
        let mut h = [0u32];
        mem.read_dwords(addr(pos), &mut h).map_err(Ok)?;
        let n = packet_len(h[0]).map_err(Err)?;
        if n > avail {
            return if ring {
                Ok(None)
            } else {
                Err(Err(format!(
                    "packet of {n} dwords runs past the end of its indirect buffer ({avail} dwords left)"
                )))
            };
        }
        let mut dw = vec![0u32; n as usize];
        dw[0] = h[0];
        let mut done = 1u64;
        while done < n {
            let p = (pos + done) % len;
            let k = (n - done).min(len - p);
            mem.read_dwords(base + p * 4, &mut dw[done as usize..(done + k) as usize])
                .map_err(Ok)?;
            done += k;
        }
        Ok(Some(dw))
    }

    /// Run PM4 packets of the indirect buffers in `frames` on one XCC until they are all
    /// done (`Ok(true)`), a wait blocks (`Ok(false)`), or the queue fails.
    #[allow(clippy::too_many_arguments)]
    fn run_frames(
        &mut self,
        sh: &Shared,
        mem: &mut GpuMem<'_>,
        cfg: &QueueConfig,
        frames: &mut Vec<Frame>,
        xcc: u8,
        lane: usize,
        budget: &mut u32,
    ) -> Result<bool, Failure> {
        while let Some(f) = frames.last().copied() {
            if *budget == 0 {
                return Ok(false);
            }
            *budget -= 1;
            if f.pos >= f.len {
                frames.pop();
                continue;
            }
            let at = At {
                addr: f.base + f.pos * 4,
                xcc,
                lane,
                depth: frames.len(),
            };
            let dw = match Self::fetch(mem, f.base, f.len, f.pos, f.len - f.pos, false) {
                Ok(Some(dw)) => dw,
                Ok(None) => {
                    return Err(into_failure(self.bad(
                        cfg,
                        at,
                        "packet runs past its indirect buffer",
                    )));
                }
                Err(Ok(e)) => {
                    return Err(into_failure(self.mem_failure(sh, cfg, at, "IB fetch", e)));
                }
                Err(Err(why)) => return Err(into_failure(self.bad(cfg, at, why))),
            };
            let n = dw.len() as u64;
            match self.exec(sh, mem, cfg, at, &dw) {
                Exec::Next => {
                    if let Some(t) = frames.last_mut() {
                        t.pos += n;
                    }
                }
                Exec::Blocked => return Ok(false),
                Exec::Push(ib) => {
                    if let Some(t) = frames.last_mut() {
                        t.pos += n;
                    }
                    frames.push(ib);
                }
                Exec::Chain(ib) => {
                    if let Some(t) = frames.last_mut() {
                        *t = ib;
                    }
                }
                Exec::Skip(k) => {
                    if let Some(t) = frames.last_mut() {
                        t.pos += n + k;
                    }
                }
                Exec::Fail(f) => return Err(f),
            }
            self.packets += 1;
        }
        Ok(true)
    }

    fn step_pm4(
        &mut self,
        sh: &Shared,
        ctl: &QueueCtl,
        cfg: &QueueConfig,
        mem: &mut GpuMem<'_>,
    ) -> Step {
        let xcc = cfg.xccs.first().copied().unwrap_or(0);
        let ring_dw = cfg.ring_size / 4;
        let mut budget = STEP_BUDGET;
        loop {
            if !self.frames.is_empty() {
                let mut frames = std::mem::take(&mut self.frames);
                let r = self.run_frames(sh, mem, cfg, &mut frames, xcc, 0, &mut budget);
                self.frames = frames;
                match r {
                    Ok(true) => {}
                    Ok(false) => {
                        return if budget == 0 {
                            Step::Progress
                        } else {
                            Step::Blocked
                        };
                    }
                    Err(f) => return self.halt(sh, ctl, f),
                }
                continue;
            }
            if budget == 0 || ctl.config_stale() {
                return Step::Progress;
            }
            self.update_wptr(mem, ctl, cfg);
            let avail = self.wptr.wrapping_sub(self.rptr);
            if avail == 0 {
                return Step::Idle {
                    poll: cfg.wptr_poll.is_some(),
                };
            }
            let at = At {
                addr: cfg.ring + (self.rptr % ring_dw) * 4,
                xcc,
                lane: 0,
                depth: 0,
            };
            if avail > ring_dw {
                let e = self.bad(
                    cfg,
                    at,
                    format!(
                        "the write pointer {} is more than a ring ({ring_dw} dwords) ahead of the read pointer {}",
                        self.wptr, self.rptr
                    ),
                );
                return self.halt(sh, ctl, into_failure(e));
            }
            let dw = match Self::fetch(mem, cfg.ring, ring_dw, self.rptr, avail, true) {
                Ok(Some(dw)) => dw,
                Ok(None) => {
                    return Step::Idle {
                        poll: cfg.wptr_poll.is_some(),
                    };
                }
                Err(Ok(e)) => {
                    let f = into_failure(self.mem_failure(sh, cfg, at, "ring fetch", e));
                    return self.halt(sh, ctl, f);
                }
                Err(Err(why)) => {
                    let f = into_failure(self.bad(cfg, at, why));
                    return self.halt(sh, ctl, f);
                }
            };
            ctl.set_status(|s| s.last_packet = Some((at.addr, describe(&dw))));
            let n = dw.len() as u64;
            budget -= 1;
            let r = self.exec(sh, mem, cfg, at, &dw);
            match r {
                Exec::Blocked => return Step::Blocked,
                Exec::Fail(f) => return self.halt(sh, ctl, f),
                Exec::Push(ib) | Exec::Chain(ib) => self.frames.push(ib),
                Exec::Next => {}
                Exec::Skip(_) => {
                    let f = into_failure(self.bad(
                        cfg,
                        at,
                        "PRED_EXEC on the ring: the predicate only takes effect inside an indirect buffer",
                    ));
                    return self.halt(sh, ctl, f);
                }
            }
            self.rptr = self.rptr.wrapping_add(n);
            self.packets += 1;
            if let Err(e) = self.write_rptr(mem, cfg) {
                let f = into_failure(self.mem_failure(sh, cfg, at, "read-pointer write-back", e));
                return self.halt(sh, ctl, f);
            }
            self.publish(ctl);
        }
    }

    /// Execute one PM4 packet `dw` (header first).
    fn exec(
        &mut self,
        sh: &Shared,
        mem: &mut GpuMem<'_>,
        cfg: &QueueConfig,
        at: At,
        dw: &[u32],
    ) -> Exec {
        let h = dw[0];
        if p4::TYPE.get(h) == pm4::PACKET_TYPE2 {
            return Exec::Next;
        }
        let op = p4::OPCODE.get(h);
        let body = &dw[1..];
        let count = body.len();
        let gfx9 = sh.gc_major() < 10;
        let need = match op {
            pm4::PACKET3_ACQUIRE_MEM => Some(p4::acquire_mem::body(gfx9)),
            pm4::PACKET3_RELEASE_MEM => Some(p4::release_mem::BODY),
            pm4::PACKET3_WAIT_REG_MEM => Some(p4::wait_reg_mem::BODY),
            pm4::PACKET3_INDIRECT_BUFFER => Some(p4::indirect_buffer::BODY),
            pm4::PACKET3_DISPATCH_DIRECT => Some(p4::dispatch_direct::BODY),
            pm4::PACKET3_COPY_DATA => Some(p4::copy_data::BODY),
            pm4::PACKET3_PRED_EXEC => Some(p4::pred_exec::BODY),
            _ => None,
        };
        if let Some(n) = need
            && count != n
        {
            return self.bad(
                cfg,
                at,
                format!(
                    "{} with {count} body dwords (header {h:#010x}); it takes {n}",
                    opcode_name(op)
                ),
            );
        }
        match op {
            pm4::PACKET3_NOP | pm4::PACKET3_ACQUIRE_MEM => Exec::Next,
            pm4::PACKET3_SET_SH_REG | pm4::PACKET3_SET_UCONFIG_REG => {
                match self.set_regs(sh, cfg, at, op, body) {
                    Ok(e) | Err(e) => e,
                }
            }
            pm4::PACKET3_EVENT_WRITE if count == 1 || count == 3 => Exec::Next,
            pm4::PACKET3_EVENT_WRITE => self.bad(
                cfg,
                at,
                format!("EVENT_WRITE with {count} body dwords (1 or 3)"),
            ),
            pm4::PACKET3_RELEASE_MEM => self.release_mem(sh, mem, cfg, at, body),
            pm4::PACKET3_WAIT_REG_MEM => self.wait_reg_mem(sh, mem, cfg, at, body),
            pm4::PACKET3_INDIRECT_BUFFER => self.indirect(cfg, at, body, mem),
            pm4::PACKET3_DISPATCH_DIRECT => self.dispatch_direct(sh, mem, cfg, at, body),
            pm4::PACKET3_COPY_DATA => self.copy_data(sh, mem, cfg, at, body),
            pm4::PACKET3_WRITE_DATA if count >= 4 => self.write_data(sh, mem, cfg, at, body),
            pm4::PACKET3_WRITE_DATA => self.bad(
                cfg,
                at,
                format!("WRITE_DATA with {count} body dwords (at least 4)"),
            ),
            pm4::PACKET3_PRED_EXEC => {
                let exec_count = u64::from(p4::pred_exec::EXEC_COUNT.at(body));
                let select = p4::pred_exec::DEVICE_SELECT.at(body);
                if at.depth > 0 && at.lane < 8 && select & (1 << at.lane) != 0 {
                    Exec::Next
                } else {
                    Exec::Skip(exec_count)
                }
            }
            _ => self.bad(
                cfg,
                at,
                format!("unknown PM4 opcode {op:#04x} (header {h:#010x})"),
            ),
        }
    }

    fn set_regs(
        &mut self,
        sh: &Shared,
        cfg: &QueueConfig,
        at: At,
        op: u32,
        body: &[u32],
    ) -> Result<Exec, Exec> {
        let (start, end, name) = if op == pm4::PACKET3_SET_SH_REG {
            (pm4::PACKET3_SET_SH_REG_START, SH_END, "SET_SH_REG")
        } else {
            (
                pm4::PACKET3_SET_UCONFIG_REG_START,
                UCONFIG_END,
                "SET_UCONFIG_REG",
            )
        };
        if body.len() < 2 {
            return Err(self.bad(cfg, at, format!("{name} without a value")));
        }
        let first = start + p4::set_reg::REG_OFFSET.at(body);
        for (i, &v) in body[1..].iter().enumerate() {
            let dword = first + i as u32;
            if dword >= end {
                return Err(self.bad(
                    cfg,
                    at,
                    format!(
                        "{name} reaches dword {dword:#x}, past its space ({start:#x}..{end:#x})"
                    ),
                ));
            }
            if op == pm4::PACKET3_SET_SH_REG {
                let Some(id) = sh.gc_reg_for_xcc(u64::from(dword), at.xcc) else {
                    return Err(self.bad(
                        cfg,
                        at,
                        format!("SET_SH_REG of dword {dword:#x}: no register of this GC there"),
                    ));
                };
                self.sh_regs.insert(id, v);
            } else if let Err(e) = sh.engine_reg(at.xcc, u64::from(dword), Some(v)) {
                return Err(self.bad(cfg, at, format!("SET_UCONFIG_REG: {e}")));
            }
        }
        Ok(Exec::Next)
    }

    fn release_mem(
        &mut self,
        sh: &Shared,
        mem: &mut GpuMem<'_>,
        cfg: &QueueConfig,
        at: At,
        b: &[u32],
    ) -> Exec {
        use p4::release_mem as rm;
        let data_sel = rm::DATA_SEL.at(b);
        let int_sel = rm::INT_SEL.at(b);
        let dst_sel = rm::DST_SEL.at(b);
        let addr = qword(b[rm::ADDR_LO], b[rm::ADDR_HI]);
        let data = qword(b[rm::DATA_LO], b[rm::DATA_HI]);
        if dst_sel > 1 {
            return self.bad(
                cfg,
                at,
                format!("RELEASE_MEM DST_SEL {dst_sel}: only memory (0, 1) is modelled"),
            );
        }
        let r = match data_sel {
            0 => Ok(()),
            1 if addr.is_multiple_of(4) => mem.write32(addr, data as u32),
            2 | 3 if addr.is_multiple_of(8) => {
                let v = if data_sel == 3 {
                    sh.engines.clock.now()
                } else {
                    data
                };
                mem.write64(addr, v)
            }
            1..=3 => {
                return self.bad(
                    cfg,
                    at,
                    format!("RELEASE_MEM DATA_SEL {data_sel} to unaligned address {addr:#x}"),
                );
            }
            _ => {
                return self.bad(
                    cfg,
                    at,
                    format!("RELEASE_MEM DATA_SEL {data_sel}: only none, 32-bit, 64-bit and the GPU clock are modelled"),
                );
            }
        };
        if let Err(e) = r {
            return self.mem_failure(sh, cfg, at, "RELEASE_MEM write", e);
        }
        match int_sel {
            0 | 3 => {}
            1 | 2 => sh.post_ih(cp_entry(
                cfg,
                at.xcc,
                ihsrc::gfx_9_0::GFX_9_0__SRCID__CP_EOP_INTERRUPT as u8,
                b[rm::INT_CTXID],
            )),
            _ => {
                return self.bad(
                    cfg,
                    at,
                    format!("RELEASE_MEM INT_SEL {int_sel}: only 0–3 are modelled"),
                );
            }
        }
        Exec::Next
    }

    fn wait_reg_mem(
        &mut self,
        sh: &Shared,
        mem: &mut GpuMem<'_>,
        cfg: &QueueConfig,
        at: At,
        b: &[u32],
    ) -> Exec {
        use p4::wait_reg_mem as w;
        let func = w::FUNCTION.at(b);
        let mem_space = w::MEM_SPACE.at(b);
        let operation = w::OPERATION.at(b);
        let (reference, mask) = (b[w::REFERENCE], b[w::MASK]);
        let value = match (mem_space, operation) {
            (w::SPACE_MEMORY, w::OP_WAIT) => {
                let addr = qword(b[w::ADDR_LO], b[w::ADDR_HI]);
                if !addr.is_multiple_of(4) {
                    return self.bad(
                        cfg,
                        at,
                        format!("WAIT_REG_MEM of unaligned address {addr:#x}"),
                    );
                }
                match mem.poll32(addr) {
                    Ok(v) => v,
                    Err(e) => return self.mem_failure(sh, cfg, at, "WAIT_REG_MEM read", e),
                }
            }
            (w::SPACE_REGISTER, w::OP_WAIT | w::OP_WRITE_WAIT) => {
                if operation == w::OP_WRITE_WAIT && !self.wrote {
                    if let Err(e) =
                        sh.engine_reg(at.xcc, u64::from(b[w::ADDR_LO] & 0x3ffff), Some(reference))
                    {
                        return self.bad(cfg, at, format!("WAIT_REG_MEM write: {e}"));
                    }
                    self.wrote = true;
                }
                let poll = if operation == w::OP_WRITE_WAIT {
                    b[w::ADDR_HI]
                } else {
                    b[w::ADDR_LO]
                };
                match sh.engine_reg(at.xcc, u64::from(poll & 0x3ffff), None) {
                    Ok(v) => v,
                    Err(e) => return self.bad(cfg, at, format!("WAIT_REG_MEM poll: {e}")),
                }
            }
            _ => {
                return self.bad(
                    cfg,
                    at,
                    format!(
                        "WAIT_REG_MEM mem_space {mem_space} operation {operation}: not modelled"
                    ),
                );
            }
        };
        match compare(func, value & mask, reference & mask) {
            None => self.bad(cfg, at, "WAIT_REG_MEM function 7 is reserved"),
            Some(true) => {
                self.wrote = false;
                Exec::Next
            }
            Some(false) => Exec::Blocked,
        }
    }

    fn indirect(&mut self, cfg: &QueueConfig, at: At, b: &[u32], mem: &GpuMem<'_>) -> Exec {
        use p4::indirect_buffer as ib;
        if b[ib::BASE_LO] & 3 != 0 {
            return self.bad(
                cfg,
                at,
                format!(
                    "INDIRECT_BUFFER base {:#x} is not dword-aligned",
                    b[ib::BASE_LO]
                ),
            );
        }
        let base = qword(b[ib::BASE_LO], ib::BASE_HI.at(b));
        let size = u64::from(ib::IB_SIZE.at(b));
        let chain = ib::CHAIN.at(b) != 0;
        let vmid = ib::VMID.at(b) as u8;
        if ib::VALID.at(b) == 0 || size == 0 {
            return Exec::Next;
        }
        if vmid != mem.vmid() {
            return self.bad(
                cfg,
                at,
                format!(
                    "INDIRECT_BUFFER for vmid {vmid} on a queue of vmid {}: not modelled",
                    mem.vmid()
                ),
            );
        }
        let frame = Frame {
            base,
            len: size,
            pos: 0,
        };
        if chain && at.depth > 0 {
            return Exec::Chain(frame);
        }
        if at.depth >= 2 {
            return self.bad(
                cfg,
                at,
                "INDIRECT_BUFFER inside a second-level buffer: the CP has two IB levels",
            );
        }
        Exec::Push(frame)
    }

    fn copy_data(
        &mut self,
        sh: &Shared,
        mem: &mut GpuMem<'_>,
        cfg: &QueueConfig,
        at: At,
        b: &[u32],
    ) -> Exec {
        use p4::copy_data as c;
        let src_sel = c::SRC_SEL.at(b);
        let dst_sel = c::DST_SEL.at(b);
        let wide = c::COUNT_SEL.at(b) != 0;
        let n = if wide { 8 } else { 4 };
        let src_addr = qword(b[c::SRC_LO], b[c::SRC_HI]);
        let reg = |dword: u32, i: u32| -> Result<u32, String> {
            sh.engine_reg(at.xcc, u64::from((dword & 0x3ffff) + i), None)
        };
        let value: u64 = match src_sel {
            0 | 4 => {
                let lo = match reg(b[c::SRC_LO], 0) {
                    Ok(v) => v,
                    Err(e) => return self.bad(cfg, at, format!("COPY_DATA source: {e}")),
                };
                let hi = if wide {
                    match reg(b[c::SRC_LO], 1) {
                        Ok(v) => v,
                        Err(e) => return self.bad(cfg, at, format!("COPY_DATA source: {e}")),
                    }
                } else {
                    0
                };
                qword(lo, hi)
            }
            1 | 2 => {
                if !src_addr.is_multiple_of(n) {
                    return self.bad(
                        cfg,
                        at,
                        format!("COPY_DATA from unaligned address {src_addr:#x}"),
                    );
                }
                let mut buf = [0u8; 8];
                if let Err(e) = mem.read(src_addr, &mut buf[..n as usize]) {
                    return self.mem_failure(sh, cfg, at, "COPY_DATA read", e);
                }
                u64::from_le_bytes(buf)
            }
            5 => src_addr,
            9 => sh.engines.clock.now(),
            _ => {
                return self.bad(
                    cfg,
                    at,
                    format!("COPY_DATA SRC_SEL {src_sel}: not modelled"),
                );
            }
        };
        let dst = qword(b[c::DST_LO], b[c::DST_HI]);
        match dst_sel {
            0 => {
                let words: &[u32] = if wide {
                    &[value as u32, (value >> 32) as u32]
                } else {
                    &[value as u32]
                };
                for (i, &w) in words.iter().enumerate() {
                    if let Err(e) = sh.engine_reg(
                        at.xcc,
                        u64::from((b[c::DST_LO] & 0x3ffff) + i as u32),
                        Some(w),
                    ) {
                        return self.bad(cfg, at, format!("COPY_DATA destination: {e}"));
                    }
                }
                Exec::Next
            }
            1 | 2 | 5 => {
                if !dst.is_multiple_of(n) {
                    return self.bad(cfg, at, format!("COPY_DATA to unaligned address {dst:#x}"));
                }
                let r = if wide {
                    mem.write64(dst, value)
                } else {
                    mem.write32(dst, value as u32)
                };
                match r {
                    Ok(()) => Exec::Next,
                    Err(e) => self.mem_failure(sh, cfg, at, "COPY_DATA write", e),
                }
            }
            _ => self.bad(
                cfg,
                at,
                format!("COPY_DATA DST_SEL {dst_sel}: not modelled"),
            ),
        }
    }

    fn write_data(
        &mut self,
        sh: &Shared,
        mem: &mut GpuMem<'_>,
        cfg: &QueueConfig,
        at: At,
        b: &[u32],
    ) -> Exec {
        use p4::write_data as wd;
        let dst_sel = wd::DST_SEL.at(b);
        let one_addr = wd::WR_ONE_ADDR.at(b) != 0;
        let addr = qword(b[wd::ADDR_LO], b[wd::ADDR_HI]);
        let data = &b[wd::DATA..];
        match dst_sel {
            0 => {
                for (i, &v) in data.iter().enumerate() {
                    let off = if one_addr { 0 } else { i as u32 };
                    if let Err(e) =
                        sh.engine_reg(at.xcc, u64::from((b[wd::ADDR_LO] & 0x3ffff) + off), Some(v))
                    {
                        return self.bad(cfg, at, format!("WRITE_DATA: {e}"));
                    }
                }
                Exec::Next
            }
            1 | 2 | 5 => {
                if !addr.is_multiple_of(4) {
                    return self.bad(
                        cfg,
                        at,
                        format!("WRITE_DATA to unaligned address {addr:#x}"),
                    );
                }
                let r = if one_addr {
                    data.iter().try_for_each(|&v| mem.write32(addr, v))
                } else {
                    let bytes: Vec<u8> = data.iter().flat_map(|v| v.to_le_bytes()).collect();
                    mem.write(addr, &bytes)
                };
                match r {
                    Ok(()) => Exec::Next,
                    Err(e) => self.mem_failure(sh, cfg, at, "WRITE_DATA", e),
                }
            }
            _ => self.bad(
                cfg,
                at,
                format!("WRITE_DATA DST_SEL {dst_sel}: not modelled"),
            ),
        }
    }

    /// An SH register of the queue: what it set, else the device's value.
    fn sh_reg(&self, sh: &Shared, xcc: u8, name: &str) -> Result<u32, String> {
        let id = sh
            .gc_reg(name, xcc)
            .ok_or_else(|| format!("the profile has no {name} on XCC {xcc}"))?;
        Ok(match self.sh_regs.get(&id) {
            Some(&v) => v,
            None => sh.peek_reg(id),
        })
    }

    fn dispatch_direct(
        &mut self,
        sh: &Shared,
        mem: &mut GpuMem<'_>,
        cfg: &QueueConfig,
        at: At,
        b: &[u32],
    ) -> Exec {
        use p4::dispatch_direct as d;
        let dims = [b[d::DIM_X], b[d::DIM_X + 1], b[d::DIM_X + 2]];
        match self.dispatch(sh, mem, cfg, at, dims, b[d::INITIATOR]) {
            Ok(e) => e,
            Err(why) => self.bad(cfg, at, format!("DISPATCH_DIRECT: {why}")),
        }
    }

    /// `DISPATCH_DIRECT`: the `COMPUTE_*` state of the queue on `at.xcc` becomes an
    /// `am_emu` dispatch — program at `COMPUTE_PGM_LO/HI << 8`, `COMPUTE_PGM_RSRC1/2/3`,
    /// `COMPUTE_USER_DATA_0..` (as many as `RSRC2.USER_SGPR`), workgroup size from
    /// `COMPUTE_NUM_THREAD_X/Y/Z`, LDS from `RSRC2.LDS_SIZE` (512-byte units), scratch per
    /// work-item from `COMPUTE_TMPRING_SIZE.WAVESIZE` (256-byte units per 64 lanes on GC ≥ 10,
    /// 1 KiB on GC 9) when `RSRC2.SCRATCH_EN`, wave32 from the initiator's `CS_W32_EN`
    /// (GC ≥ 10; GC 9 is wave64). The grid is `dims` workgroups, or work-items with
    /// `USE_THREAD_DIMENSIONS`; `COMPUTE_START_*` must be 0 unless `FORCE_START_AT_000`.
    fn dispatch(
        &mut self,
        sh: &Shared,
        mem: &mut GpuMem<'_>,
        cfg: &QueueConfig,
        at: At,
        dims: [u32; 3],
        initiator: u32,
    ) -> Result<Exec, String> {
        let xcc = at.xcc;
        let gc10 = sh.gc_major() >= 10;
        let r = |name: &str| self.sh_reg(sh, xcc, name);
        let f = |reg: &str, field: &str, v: u32| sh.field_of(reg, field).map(|fl| fl.get(v));
        use p4::dispatch_direct as d;
        if !d::COMPUTE_SHADER_EN.is_set(initiator) {
            return Err("the initiator's COMPUTE_SHADER_EN is clear".into());
        }
        let force_start = d::FORCE_START_AT_000.is_set(initiator);
        let thread_dims = d::USE_THREAD_DIMENSIONS.is_set(initiator);
        let start = [
            r("COMPUTE_START_X")?,
            r("COMPUTE_START_Y")?,
            r("COMPUTE_START_Z")?,
        ];
        if !force_start && start != [0; 3] {
            return Err(format!(
                "COMPUTE_START {start:?} without FORCE_START_AT_000: not modelled"
            ));
        }
        let wg = [
            f(
                "COMPUTE_NUM_THREAD_X",
                "NUM_THREAD_FULL",
                r("COMPUTE_NUM_THREAD_X")?,
            )?,
            f(
                "COMPUTE_NUM_THREAD_Y",
                "NUM_THREAD_FULL",
                r("COMPUTE_NUM_THREAD_Y")?,
            )?,
            f(
                "COMPUTE_NUM_THREAD_Z",
                "NUM_THREAD_FULL",
                r("COMPUTE_NUM_THREAD_Z")?,
            )?,
        ];
        if wg.contains(&0) || dims.contains(&0) {
            // An empty dispatch launches nothing.
            return Ok(Exec::Next);
        }
        let grid: [u32; 3] = if thread_dims {
            dims
        } else {
            let mut g = [0u32; 3];
            for d in 0..3 {
                g[d] = dims[d]
                    .checked_mul(wg[d])
                    .ok_or_else(|| format!("grid {dims:?} × workgroup {wg:?} overflows"))?;
            }
            g
        };
        let entry = qword(r("COMPUTE_PGM_LO")?, r("COMPUTE_PGM_HI")?) << 8;
        if entry == 0 {
            return Err("COMPUTE_PGM_LO/HI are 0".into());
        }
        let rsrc1 = r("COMPUTE_PGM_RSRC1")?;
        let rsrc2 = r("COMPUTE_PGM_RSRC2")?;
        let rsrc3 = r("COMPUTE_PGM_RSRC3").unwrap_or(0);
        let user = bits(rsrc2, 1, 5).min(16);
        let user_sgprs = (0..user)
            .map(|i| r(&format!("COMPUTE_USER_DATA_{i}")))
            .collect::<Result<Vec<u32>, String>>()?;
        let lds_bytes = f("COMPUTE_PGM_RSRC2", "LDS_SIZE", rsrc2)? * 512;
        let scratch_bytes = if rsrc2 & 1 != 0 {
            let tmpring = r("COMPUTE_TMPRING_SIZE")?;
            let unit = if gc10 { 256 } else { 1024 };
            f("COMPUTE_TMPRING_SIZE", "WAVESIZE", tmpring)? * unit / 64
        } else {
            0
        };
        let wave_size = if gc10 && d::CS_W32_EN.is_set(initiator) {
            32
        } else {
            64
        };
        let partition = am_emu::Partition {
            index: at.lane as u32,
            count: cfg.xccs.len().max(1) as u32,
            chunk: cfg.tg_chunk,
        };
        let hw = am_emu::HwDispatch {
            name: format!("dispatch of the program at {entry:#x}"),
            entry,
            rsrc1,
            rsrc2,
            rsrc3,
            user_sgprs,
            wave_size,
            grid,
            workgroup: wg,
            lds_bytes,
            scratch_bytes,
            instruction_limit: Some(sh.engines.watchdog()),
            partition,
            xcc_id: Some(u32::from(at.xcc)),
        };
        Ok(self.run_shader(sh, mem, cfg, at, &hw))
    }

    /// Run one dispatch on the emulator and turn what went wrong into the queue's failure
    /// (page fault: latched and posted by the hub; illegal instruction or a fault outside
    /// memory: an SQ error interrupt; the watchdog: a hang that never signals).
    fn run_shader(
        &mut self,
        sh: &Shared,
        mem: &mut GpuMem<'_>,
        cfg: &QueueConfig,
        at: At,
        hw: &am_emu::HwDispatch,
    ) -> Exec {
        let isa = match sh.isa() {
            Ok(i) => i,
            Err(why) => {
                return Exec::Fail(Failure {
                    message: format!("{} at {:#x}: {why}", cfg.name, at.addr),
                    violation: false,
                    ih: None,
                });
            }
        };
        let code = match sh.engines.programs.get(mem, hw.entry, isa) {
            Ok(c) => c,
            Err(e) => {
                return mem_failure(
                    sh,
                    cfg,
                    mem.hub(),
                    at.xcc,
                    at.addr,
                    "instruction fetch",
                    e,
                    CID_CPC,
                );
            }
        };
        self.dispatches += 1;
        let mut smem = ShaderMem { mem, error: None };
        let result = if sh.engines.counting() {
            let mut h = am_emu::Histogram::default();
            let r = am_emu::dispatch_hw_counted(&code.program, hw.entry, hw, &mut smem, &mut h);
            sh.engines.add_dispatch(r.as_ref().ok().copied(), &h);
            r
        } else {
            am_emu::dispatch_hw(&code.program, hw.entry, hw, &mut smem)
        };
        if let Ok(stats) = &result {
            sh.engines.add_executed(hw.entry, stats);
        }
        let mem_error = smem.error.take();
        sh.engines.memory_changed();
        let err = match result {
            Ok(_) => return Exec::Next,
            Err(e) => e,
        };
        if let Some(e) = mem_error {
            let what = format!("{} ({err})", hw.name);
            return mem_failure(sh, cfg, mem.hub(), at.xcc, at.addr, &what, e, CID_TCP);
        }
        let past_code = |pc: u64| pc >= hw.entry + code.len;
        let (kind, detail) = match &err {
            am_emu::Error::Stopped { reason, .. } if reason.contains("limit") => {
                return Exec::Fail(Failure {
                    message: format!(
                        "{}: {} hung: {err} (the watchdog stopped it; the queue never signals)",
                        cfg.name, hw.name
                    ),
                    violation: false,
                    ih: None,
                });
            }
            am_emu::Error::InvalidInstruction { pc, .. } | am_emu::Error::BadPc { pc }
                if past_code(*pc) && code.cut.is_some() =>
            {
                (
                    1,
                    format!(
                        "{err}; the code could not be read further: {}",
                        code.cut.clone().unwrap_or_default()
                    ),
                )
            }
            am_emu::Error::MemoryFault { .. } => (2, err.to_string()),
            _ => (1, err.to_string()),
        };
        Exec::Fail(Failure {
            message: format!("{}: {}: {detail}", cfg.name, hw.name),
            violation: false,
            ih: Some(sq_error(sh.gc_major(), at.xcc, cfg.vmid, kind)),
        })
    }

    // ---- AQL ----

    fn step_aql(
        &mut self,
        sh: &Shared,
        ctl: &QueueCtl,
        cfg: &QueueConfig,
        mem: &mut GpuMem<'_>,
    ) -> Step {
        let slots = (cfg.ring_size / 64).max(1);
        let mut budget = STEP_BUDGET;
        loop {
            if let Some(mut work) = self.aql_ib.take() {
                while work.xcc < cfg.xccs.len() {
                    let xcc = cfg.xccs[work.xcc];
                    let mut frames = std::mem::take(&mut work.frames);
                    let r = self.run_frames(sh, mem, cfg, &mut frames, xcc, work.xcc, &mut budget);
                    work.frames = frames;
                    match r {
                        Ok(true) => {
                            work.xcc += 1;
                            work.frames = vec![work.first];
                        }
                        Ok(false) => {
                            let blocked = budget > 0;
                            self.aql_ib = Some(work);
                            return if blocked {
                                Step::Blocked
                            } else {
                                Step::Progress
                            };
                        }
                        Err(f) => return self.halt(sh, ctl, f),
                    }
                }
                let at = self.aql_at(cfg, slots);
                if let Err(f) = self.complete(sh, mem, cfg, at, work.signal) {
                    return self.halt(sh, ctl, f);
                }
                if let Some(s) = self.finish_packet(sh, ctl, cfg, mem, at) {
                    return s;
                }
                continue;
            }
            if budget == 0 || ctl.config_stale() {
                return Step::Progress;
            }
            budget -= 1;
            self.update_wptr(mem, ctl, cfg);
            let avail = self.wptr.wrapping_sub(self.rptr);
            if avail == 0 {
                return Step::Idle {
                    poll: cfg.wptr_poll.is_some(),
                };
            }
            let at = self.aql_at(cfg, slots);
            if avail > slots {
                let f = into_failure(self.bad(
                    cfg,
                    at,
                    format!(
                        "the doorbell's write index {} is more than a queue ({slots} packets) ahead of the read index {}",
                        self.wptr, self.rptr
                    ),
                ));
                return self.halt(sh, ctl, f);
            }
            let mut p = [0u8; 64];
            if let Err(e) = mem.read(at.addr, &mut p) {
                let f = into_failure(self.mem_failure(sh, cfg, at, "AQL packet fetch", e));
                return self.halt(sh, ctl, f);
            }
            let header = u32::from_le_bytes([p[0], p[1], p[2], p[3]]);
            ctl.set_status(|s| {
                s.last_packet = Some((
                    at.addr,
                    format!("AQL packet type {}", aql::TYPE.get(header)),
                ))
            });
            match self.aql_packet(sh, mem, cfg, at, &p) {
                Exec::Next => {
                    if let Some(s) = self.finish_packet(sh, ctl, cfg, mem, at) {
                        return s;
                    }
                }
                Exec::Blocked => return Step::Blocked,
                Exec::Fail(f) => return self.halt(sh, ctl, f),
                Exec::Push(_) | Exec::Chain(_) | Exec::Skip(_) => {
                    // A PM4 vendor packet: its IB runs from the next step, XCC by XCC.
                }
            }
        }
    }

    fn aql_at(&self, cfg: &QueueConfig, slots: u64) -> At {
        At {
            addr: cfg.ring + (self.rptr % slots) * 64,
            xcc: cfg.xccs.first().copied().unwrap_or(0),
            lane: 0,
            depth: 0,
        }
    }

    /// The packet at the read index is done: move on and write the read index back.
    fn finish_packet(
        &mut self,
        sh: &Shared,
        ctl: &QueueCtl,
        cfg: &QueueConfig,
        mem: &mut GpuMem<'_>,
        at: At,
    ) -> Option<Step> {
        self.rptr += 1;
        self.packets += 1;
        if let Err(e) = self.write_rptr(mem, cfg) {
            let f = into_failure(self.mem_failure(sh, cfg, at, "read index write-back", e));
            return Some(self.halt(sh, ctl, f));
        }
        self.publish(ctl);
        None
    }

    fn aql_packet(
        &mut self,
        sh: &Shared,
        mem: &mut GpuMem<'_>,
        cfg: &QueueConfig,
        at: At,
        p: &[u8; 64],
    ) -> Exec {
        let w = aql_dwords(p);
        let header = aql::HEADER.at(&w);
        let signal = qword(w[aql::COMPLETION_SIGNAL], w[aql::COMPLETION_SIGNAL + 1]);
        match aql::TYPE.at(&w) {
            // HSA_PACKET_TYPE_VENDOR_SPECIFIC with AMD's PM4-IB format.
            aql::VENDOR_SPECIFIC => {
                let format = aql::vendor::AMD_FORMAT.at(&w);
                if format != aql::vendor::FORMAT_PM4_IB {
                    return self.bad(
                        cfg,
                        at,
                        format!("AQL vendor packet of AMD format {format}: only 1 (PM4 IB) exists"),
                    );
                }
                let cmd = aql::vendor::PM4;
                let ib_header = w[cmd];
                if p4::OPCODE.get(ib_header) != pm4::PACKET3_INDIRECT_BUFFER
                    || p4::TYPE.get(ib_header) != pm4::PACKET_TYPE3
                {
                    return self.bad(cfg, at, format!("AQL PM4-IB packet whose command {ib_header:#010x} is not INDIRECT_BUFFER"));
                }
                let b = &w[cmd + 1..cmd + 1 + p4::indirect_buffer::BODY];
                match self.indirect(cfg, At { depth: 0, ..at }, b, mem) {
                    Exec::Push(frame) => {
                        self.aql_ib = Some(AqlIb {
                            xcc: 0,
                            frames: vec![frame],
                            first: frame,
                            signal,
                        });
                        Exec::Push(frame)
                    }
                    // An invalid or empty IB: the packet only signals.
                    Exec::Next => match self.complete(sh, mem, cfg, at, signal) {
                        Ok(()) => Exec::Next,
                        Err(f) => Exec::Fail(f),
                    },
                    other => other,
                }
            }
            // HSA_PACKET_TYPE_INVALID: the producer has not finished writing the slot.
            aql::INVALID => Exec::Blocked,
            aql::KERNEL_DISPATCH => {
                let r = self.aql_dispatch(sh, mem, cfg, at, &w);
                if !matches!(r, Exec::Next) {
                    return r;
                }
                match self.complete(sh, mem, cfg, at, signal) {
                    Ok(()) => Exec::Next,
                    Err(f) => Exec::Fail(f),
                }
            }
            kind @ (aql::BARRIER_AND | aql::BARRIER_OR) => {
                use aql::barrier as br;
                let deps: Vec<u64> = (0..br::DEP_SIGNALS)
                    .map(|i| qword(w[br::DEP_SIGNAL + 2 * i], w[br::DEP_SIGNAL + 2 * i + 1]))
                    .filter(|&h| h != 0)
                    .collect();
                let mut zero = Vec::with_capacity(deps.len());
                for d in &deps {
                    match mem.poll64(d + 8) {
                        Ok(v) => zero.push(v == 0),
                        Err(e) => {
                            return self.mem_failure(sh, cfg, at, "barrier dependency read", e);
                        }
                    }
                }
                let done = if kind == aql::BARRIER_AND {
                    zero.iter().all(|&z| z)
                } else {
                    zero.is_empty() || zero.iter().any(|&z| z)
                };
                if !done {
                    return Exec::Blocked;
                }
                match self.complete(sh, mem, cfg, at, signal) {
                    Ok(()) => Exec::Next,
                    Err(f) => Exec::Fail(f),
                }
            }
            t => self.bad(
                cfg,
                at,
                format!("AQL packet type {t} (header {header:#06x}) is not modelled"),
            ),
        }
    }

    /// An AQL kernel-dispatch packet: the kernel descriptor at `kernel_object` gives the
    /// program and its register state; the user SGPRs are laid out as the hardware does for
    /// the descriptor's `kernel_code_properties` (private segment buffer 4, dispatch ptr 2 =
    /// the packet, queue ptr 2 = the `amd_queue_t` whose `read_dispatch_id` the read index
    /// is written to, kernarg ptr 2, dispatch id 2, flat scratch init 2, private segment
    /// size 1). Each XCC of the queue runs its share of the workgroups.
    fn aql_dispatch(
        &mut self,
        sh: &Shared,
        mem: &mut GpuMem<'_>,
        cfg: &QueueConfig,
        at: At,
        w: &[u32; aql::DWORDS],
    ) -> Exec {
        use am_isa::code_object::kcp;
        use aql::dispatch as d;
        let wg = [
            d::WORKGROUP_X.at(w),
            d::WORKGROUP_Y.at(w),
            d::WORKGROUP_Z.at(w),
        ];
        let grid = [w[d::GRID_X], w[d::GRID_X + 1], w[d::GRID_X + 2]];
        let private = w[d::PRIVATE_SEGMENT_SIZE];
        let group = w[d::GROUP_SEGMENT_SIZE];
        let kernel_object = qword(w[d::KERNEL_OBJECT], w[d::KERNEL_OBJECT + 1]);
        let kernarg = qword(w[d::KERNARG], w[d::KERNARG + 1]);
        let mut kd_bytes = [0u8; 64];
        if let Err(e) = mem.read(kernel_object, &mut kd_bytes) {
            return self.mem_failure(sh, cfg, at, "kernel descriptor read", e);
        }
        let kd = am_isa::KernelDescriptor::parse(&kd_bytes);
        let Some(entry) = kernel_object.checked_add_signed(kd.kernel_code_entry_byte_offset) else {
            return self.bad(
                cfg,
                at,
                "the kernel descriptor's entry offset leaves the address space",
            );
        };
        let props = kd.kernel_code_properties;
        let mut sgprs = Vec::with_capacity(16);
        let push64 = |v: &mut Vec<u32>, x: u64| {
            v.push(x as u32);
            v.push((x >> 32) as u32);
        };
        if props & kcp::ENABLE_SGPR_PRIVATE_SEGMENT_BUFFER != 0 {
            sgprs.extend([0; 4]);
        }
        if props & kcp::ENABLE_SGPR_DISPATCH_PTR != 0 {
            push64(&mut sgprs, at.addr);
        }
        if props & kcp::ENABLE_SGPR_QUEUE_PTR != 0 {
            push64(
                &mut sgprs,
                cfg.rptr_addr
                    .map_or(0, |a| a.saturating_sub(AMD_QUEUE_READ_DISPATCH_ID)),
            );
        }
        if props & kcp::ENABLE_SGPR_KERNARG_SEGMENT_PTR != 0 {
            push64(&mut sgprs, kernarg);
        }
        if props & kcp::ENABLE_SGPR_DISPATCH_ID != 0 {
            push64(&mut sgprs, self.rptr);
        }
        if props & kcp::ENABLE_SGPR_FLAT_SCRATCH_INIT != 0 {
            push64(&mut sgprs, 0);
        }
        if props & kcp::ENABLE_SGPR_PRIVATE_SEGMENT_SIZE != 0 {
            sgprs.push(private);
        }
        if wg.contains(&0) || grid.contains(&0) {
            return Exec::Next;
        }
        for (lane, &xcc) in cfg.xccs.iter().enumerate() {
            let hw = am_emu::HwDispatch {
                name: format!("AQL dispatch of the kernel at {kernel_object:#x}"),
                entry,
                rsrc1: kd.compute_pgm_rsrc1,
                rsrc2: kd.compute_pgm_rsrc2,
                rsrc3: kd.compute_pgm_rsrc3,
                user_sgprs: sgprs.clone(),
                wave_size: if sh.gc_major() >= 10 {
                    kd.wave_size()
                } else {
                    64
                },
                grid,
                workgroup: wg,
                lds_bytes: group.max(kd.group_segment_fixed_size),
                scratch_bytes: private.max(kd.private_segment_fixed_size),
                instruction_limit: Some(sh.engines.watchdog()),
                partition: am_emu::Partition {
                    index: lane as u32,
                    count: cfg.xccs.len() as u32,
                    chunk: cfg.tg_chunk,
                },
                xcc_id: Some(u32::from(xcc)),
            };
            let r = self.run_shader(sh, mem, cfg, At { xcc, lane, ..at }, &hw);
            if !matches!(r, Exec::Next) {
                return r;
            }
        }
        Exec::Next
    }

    /// An AQL packet finished: decrement its completion signal (`amd_signal_t.value` at
    /// +8) and, if the signal has an event mailbox (+16), write the event id (+24) there and
    /// post the end-of-pipe interrupt carrying it.
    fn complete(
        &mut self,
        sh: &Shared,
        mem: &mut GpuMem<'_>,
        cfg: &QueueConfig,
        at: At,
        signal: u64,
    ) -> Result<(), Failure> {
        if signal == 0 {
            return Ok(());
        }
        let fail =
            |this: &Self, e| into_failure(this.mem_failure(sh, cfg, at, "completion signal", e));
        let v = mem.poll64(signal + 8).map_err(|e| fail(self, e))?;
        mem.write64(signal + 8, v.wrapping_sub(1))
            .map_err(|e| fail(self, e))?;
        let mailbox = mem.poll64(signal + 16).map_err(|e| fail(self, e))?;
        if mailbox != 0 {
            let event = mem.poll32(signal + 24).map_err(|e| fail(self, e))?;
            mem.write32(mailbox, event).map_err(|e| fail(self, e))?;
            sh.post_ih(cp_entry(
                cfg,
                at.xcc,
                ihsrc::gfx_9_0::GFX_9_0__SRCID__CP_EOP_INTERRUPT as u8,
                event,
            ));
        }
        Ok(())
    }
}

/// Offset of `read_dispatch_id` in ROCr's `amd_queue_t` (after the 40-byte `hsa_queue_t`,
/// the capability and write-dispatch-id words and reserved space): the queue pointer a
/// kernel gets is the read-index write-back address minus this.
const AMD_QUEUE_READ_DISPATCH_ID: u64 = 128;

impl Runner for Cp {
    fn step(&mut self, sh: &Shared, ctl: &QueueCtl, cfg: &QueueConfig) -> Step {
        if self.halted {
            return Step::Halted;
        }
        let mut mem = match GpuMem::new(sh, cfg.hub, cfg.vmid) {
            Ok(m) => m.with_cancel(ctl.stop.clone()),
            Err(e) => {
                let f = Failure {
                    message: format!("{}: its hub cannot be read: {e}", cfg.name),
                    violation: true,
                    ih: None,
                };
                return self.halt(sh, ctl, f);
            }
        };
        let step = match self.kind {
            QueueKind::Aql => self.step_aql(sh, ctl, cfg, &mut mem),
            _ => self.step_pm4(sh, ctl, cfg, &mut mem),
        };
        self.publish(ctl);
        step
    }
}

fn into_failure(e: Exec) -> Failure {
    match e {
        Exec::Fail(f) => f,
        _ => Failure {
            message: "internal: a failure was expected".into(),
            violation: false,
            ih: None,
        },
    }
}

/// The 16 dwords of a 64-byte AQL packet.
fn aql_dwords(p: &[u8; 64]) -> [u32; aql::DWORDS] {
    let mut w = [0u32; aql::DWORDS];
    for (d, b) in w.iter_mut().zip(p.chunks_exact(4)) {
        *d = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    }
    w
}

/// Describe a PM4 packet for the status: opcode name and header.
fn describe(dw: &[u32]) -> String {
    let h = dw.first().copied().unwrap_or(0);
    if p4::TYPE.get(h) == pm4::PACKET_TYPE3 {
        format!("{} (header {h:#010x})", opcode_name(p4::OPCODE.get(h)))
    } else {
        format!("header {h:#010x}")
    }
}

/// A CP interrupt of this queue: client GRBM_CP, ring id = queue 6:4 | me 3:2 | pipe 1:0
/// (`gfx_v9_0_eop_irq`/`gfx_v11_0_eop_irq` decode it so), node id = the XCC.
fn cp_entry(cfg: &QueueConfig, xcc: u8, src_id: u8, context: u32) -> IhEntry {
    let (me, pipe, queue) = cfg.slot;
    IhEntry {
        client_id: ihsrc::SOC15_IH_CLIENTID_GRBM_CP as u8,
        src_id,
        ring_id: (queue & 7) << 4 | (me & 3) << 2 | (pipe & 3),
        vmid: cfg.vmid,
        node_id: xcc,
        src_data: [context, 0, 0, 0],
        ..Default::default()
    }
}

/// An SQ error interrupt (`kind` 1 = ILLEGAL_INST, 2 = MEMVIOL) in the layout of the GC
/// generation: GC ≥ 11 has the encoding in context dword 1 bits 7:6 and the error type in
/// dword 0 bits 24:21; GC 9 the encoding in dword 0 bits 27:26 and the type in dword 1
/// bits 7:4 (`gfx_v9_0`/`gfx_v11_0` SQ interrupt layouts).
fn sq_error(gc_major: u8, xcc: u8, vmid: u8, kind: u32) -> IhEntry {
    let src_data = if gc_major >= 11 {
        [kind << 21, 2 << 6, 0, 0]
    } else {
        [2 << 26, kind << 4, 0, 0]
    };
    IhEntry {
        client_id: ihsrc::SOC15_IH_CLIENTID_GRBM_CP as u8,
        src_id: ihsrc::gfx_9_0::GFX_9_0__SRCID__SQ_INTERRUPT_ID as u8,
        vmid,
        node_id: xcc,
        src_data,
        ..Default::default()
    }
}

/// A memory access of an engine failed: a page fault is latched in the hub and posted by
/// it; an unflushed read or a refused DMA is a violation; a stop is quiet.
#[allow(clippy::too_many_arguments)]
pub(super) fn mem_failure(
    sh: &Shared,
    cfg: &QueueConfig,
    hub: crate::ip::gmc::Hub,
    xcc: u8,
    addr: u64,
    what: &str,
    e: MemError,
    client: u32,
) -> Exec {
    let message = format!(
        "{} at GPU address {addr:#x} (XCC {xcc}): {what}: {e}",
        cfg.name
    );
    match e {
        MemError::Fault { fault, access } => {
            sh.report_fault(hub, cfg.vmid, &fault, access, client);
            Exec::Fail(Failure {
                message,
                violation: false,
                ih: None,
            })
        }
        MemError::Cancelled => Exec::Fail(Failure {
            message,
            violation: false,
            ih: None,
        }),
        MemError::Unflushed { .. } | MemError::Dma { .. } | MemError::VramFull { .. } => {
            Exec::Fail(Failure {
                message,
                violation: true,
                ih: None,
            })
        }
    }
}

/// Record a queue's failure: the status says why; a violation is recorded for tests; the
/// interrupt is posted.
pub(super) fn halt(sh: &Shared, ctl: &QueueCtl, f: Failure) {
    tracing::debug!(device = %sh.name(), "{}", f.message);
    if f.violation {
        sh.engine_violation(&f.message);
    }
    if let Some(e) = f.ih {
        sh.post_ih(e);
    }
    ctl.set_status(|s| s.halted = Some(f.message));
}

#[cfg(test)]
mod tests {
    use super::{compare, packet_len};

    /// The seven compare functions of WAIT_REG_MEM/POLL_REGMEM (7 is reserved).
    #[test]
    fn wait_functions() {
        let table = [
            (0, [true, true, true]),
            (1, [true, false, false]),
            (2, [true, true, false]),
            (3, [false, true, false]),
            (4, [true, false, true]),
            (5, [false, true, true]),
            (6, [false, false, true]),
        ];
        for (func, want) in table {
            // value < reference, value == reference, value > reference
            let got = [4, 5, 6].map(|v| compare(func, v, 5).unwrap());
            assert_eq!(got, want, "function {func}");
        }
        assert_eq!(compare(7, 0, 0), None);
    }

    /// Packet lengths from headers: count + 2 dwords, the one-dword NOP filler, type 2.
    #[test]
    fn packet_lengths() {
        assert_eq!(packet_len(0xc003_3700), Ok(5), "WRITE_DATA, count 3");
        assert_eq!(packet_len(0xffff_1000), Ok(1), "PACKET3(NOP, 0x3FFF)");
        assert_eq!(
            packet_len(0xfffe_1000),
            Ok(0x4000),
            "the longest NOP, count 0x3FFE"
        );
        assert_eq!(packet_len(0x8000_0000), Ok(1), "type-2 filler");
        assert!(packet_len(0x4000_0000).unwrap_err().contains("type-1"));
    }
}
