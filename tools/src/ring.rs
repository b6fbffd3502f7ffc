//! `am ring DEVICE [QUEUE]`: the live queues — compute HQDs (PM4 or AQL) of every XCC and
//! the SDMA rings — with their pointers, doorbell and VMID, and the packets between the read
//! and the write pointer decoded (following indirect buffers, register names for
//! `SET_*_REG`).
//!
//! HQD registers are banked: each is read after selecting (me 1, pipe, queue) in
//! `GRBM_GFX_CNTL` of its XCC, which is set back to 0 afterwards, as the driver leaves it.
//! The pointers come from memory where the queue reports them (the CP's read-pointer
//! write-back and the write pointer it polls), else from the registers.

use std::collections::HashMap;

use am_autogen::regs::{Reg, RegIp};
use am_driver::HwIp;
use am_driver::regs::gc;
use anyhow::{Context, bail};
use serde::Serialize;

use crate::decode::{self, Env, Packet};
use crate::inspect::Target;
use crate::reg::{ByName, all_names};
use crate::vm;

/// Arguments of `am ring`.
#[derive(Debug, clap::Args)]
pub struct RingArgs {
    /// Device: a PCI BDF, mock:PROFILE[:N] or remote:HOST:PORT[:N].
    pub device: String,
    /// A queue to decode, as the list names it (`compute.x0.p0.q0`, `sdma0`); a prefix
    /// selects every queue it starts (`compute`).
    pub queue: Option<String>,
    /// Decode every queue.
    #[arg(long)]
    pub all: bool,
    /// Decode from the start of the ring instead of the read pointer (what already ran,
    /// while the ring has not wrapped).
    #[arg(long)]
    pub from_start: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// A live queue.
#[derive(Debug, Serialize)]
pub struct QueueInfo {
    /// Name (`compute.x0.p0.q0`, `sdma0`).
    pub id: String,
    /// `pm4`, `aql` or `sdma`.
    pub kind: &'static str,
    /// XCCs the HQD is active on (compute), or the SDMA instance.
    pub xccs: Vec<u8>,
    /// Ring GPU virtual address, hex.
    pub ring: String,
    /// Ring size in bytes.
    pub ring_size: u64,
    /// Read pointer (dwords for PM4, packets for AQL, bytes for SDMA).
    pub rptr: u64,
    /// Write pointer, in the same unit.
    pub wptr: u64,
    /// `dwords`, `packets` or `bytes`.
    pub unit: &'static str,
    /// Where the pointers were read: `memory` (write-back and poll addresses) or
    /// `registers`.
    pub pointers_from: &'static str,
    /// Units between read and write pointer.
    pub pending: u64,
    /// Doorbell index (64-bit slots of BAR2), and whether it is enabled.
    pub doorbell: u64,
    /// Doorbell enabled.
    pub doorbell_enabled: bool,
    /// VMID the queue runs in.
    pub vmid: u32,
    /// The decoded packets (when asked for).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub packets: Option<Vec<Packet>>,
    /// Why the packets could not be decoded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(skip)]
    ring_va: u64,
    #[serde(skip)]
    start: u64,
}

fn pair(t: &Target, lo: &str, hi: &str, fam: RegIp, inst: u8) -> anyhow::Result<u64> {
    let l = t.regs.named(fam, lo)?.read(inst)?;
    let h = t.regs.named(fam, hi)?.read(inst)?;
    Ok(u64::from(h) << 32 | u64::from(l))
}

/// Read `n` bytes of GPU virtual memory of `vmid`, page by page.
fn read_va(t: &Target, vmid: u8, va: u64, n: usize) -> anyhow::Result<Vec<u8>> {
    let mut out = vec![0u8; n];
    let mut done = 0usize;
    while done < n {
        let at = va + done as u64;
        let in_page = ((0x1000 - at % 0x1000) as usize).min(n - done);
        let phys = vm::translate(t, vmid, at)?
            .with_context(|| format!("{}: VA {at:#x} is not mapped in VMID {vmid}", t.name()))?;
        t.phys_read(phys, &mut out[done..done + in_page])?;
        done += in_page;
    }
    Ok(out)
}

fn read_u64_va(t: &Target, vmid: u8, va: u64) -> anyhow::Result<u64> {
    let b = read_va(t, vmid, va, 8)?;
    Ok(u64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
}

fn dwords(bytes: &[u8]) -> Vec<u32> {
    bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// Select an HQD of `xcc` for the banked CP registers.
fn select(t: &Target, xcc: u8, pipe: u8, queue: u8) -> anyhow::Result<()> {
    let v = t.regs.encode(gc::GRBM_GFX_CNTL, |f| {
        f.meid(1).pipeid(pipe.into()).queueid(queue.into()).vmid(0)
    })?;
    t.regs.reg(gc::GRBM_GFX_CNTL)?.write(xcc, v.value)?;
    Ok(())
}

fn compute_queues(t: &Target) -> anyhow::Result<Vec<QueueInfo>> {
    let mut out: Vec<QueueInfo> = vec![];
    let r = |n: Reg, x: u8| -> anyhow::Result<u32> { Ok(t.regs.reg(n)?.read(x)?) };
    let pair = |lo: Reg, hi: Reg, x: u8| -> anyhow::Result<u64> {
        Ok(u64::from(r(hi, x)?) << 32 | u64::from(r(lo, x)?))
    };
    let has_aql = t.regs.has(gc::CP_HQD_AQL_CONTROL);
    let xccs: Vec<u8> = t.regs.instances(HwIp::GC).into_iter().collect();
    let mut scan = || -> anyhow::Result<()> {
        for (xi, &x) in xccs.iter().enumerate() {
            for pipe in 0..4u8 {
                for queue in 0..8u8 {
                    select(t, x, pipe, queue)?;
                    if r(gc::CP_HQD_ACTIVE, x)? & 1 == 0 {
                        continue;
                    }
                    let ring_va = pair(gc::CP_HQD_PQ_BASE, gc::CP_HQD_PQ_BASE_HI, x)? << 8;
                    let control = r(gc::CP_HQD_PQ_CONTROL.untyped(), x)?;
                    let size = t
                        .regs
                        .get(gc::CP_HQD_PQ_CONTROL, control, |f| f.queue_size(0));
                    let ring_size = 4u64 << (size? + 1);
                    let aql = has_aql && r(gc::CP_HQD_AQL_CONTROL, x)? & 1 != 0;
                    let db = gc::CP_HQD_PQ_DOORBELL_CONTROL;
                    let d = r(db.untyped(), x)?;
                    let vmid = r(gc::CP_HQD_VMID, x)? & 0xf;
                    let rptr_addr = pair(
                        gc::CP_HQD_PQ_RPTR_REPORT_ADDR,
                        gc::CP_HQD_PQ_RPTR_REPORT_ADDR_HI,
                        x,
                    )?;
                    let wptr_addr = pair(
                        gc::CP_HQD_PQ_WPTR_POLL_ADDR,
                        gc::CP_HQD_PQ_WPTR_POLL_ADDR_HI,
                        x,
                    )?;
                    let regs_ptrs = (
                        u64::from(r(gc::CP_HQD_PQ_RPTR, x)?),
                        pair(gc::CP_HQD_PQ_WPTR_LO, gc::CP_HQD_PQ_WPTR_HI, x)?,
                    );
                    // A multi-XCC AQL queue is one queue on every XCC: list it once.
                    if let Some(q) = out
                        .iter_mut()
                        .find(|q| q.ring_va == ring_va && q.kind == "aql" && aql)
                    {
                        q.xccs.push(x);
                        continue;
                    }
                    let mem_ptrs = (|| -> anyhow::Result<(u64, u64)> {
                        let v = vmid as u8;
                        Ok((read_u64_va(t, v, rptr_addr)?, read_u64_va(t, v, wptr_addr)?))
                    })();
                    let (kind, unit) = if aql {
                        ("aql", "packets")
                    } else {
                        ("pm4", "dwords")
                    };
                    let (mut rptr, wptr, from) = match mem_ptrs {
                        Ok(p) if rptr_addr != 0 && wptr_addr != 0 => (p.0, p.1, "memory"),
                        _ => (regs_ptrs.0, regs_ptrs.1, "registers"),
                    };
                    let slots = if aql { ring_size / 64 } else { ring_size / 4 };
                    if !aql {
                        // The PM4 read pointer is a dword offset inside the ring (32 bits).
                        rptr &= 0xffff_ffff;
                    }
                    let pending = if aql {
                        wptr.saturating_sub(rptr)
                    } else {
                        (wptr % slots + slots - rptr % slots) % slots
                    };
                    let name = if xccs.len() > 1 {
                        format!("compute.x{xi}.p{pipe}.q{queue}")
                    } else {
                        format!("compute.p{pipe}.q{queue}")
                    };
                    out.push(QueueInfo {
                        id: name,
                        kind,
                        xccs: vec![x],
                        ring: format!("{ring_va:#x}"),
                        ring_size,
                        rptr,
                        wptr,
                        unit,
                        pointers_from: from,
                        pending,
                        doorbell: u64::from(t.regs.get(db, d, |f| f.doorbell_offset(0))?) / 2,
                        doorbell_enabled: t.regs.get(db, d, |f| f.doorbell_en(0))? != 0,
                        vmid,
                        packets: None,
                        error: None,
                        ring_va,
                        start: 0,
                    });
                }
            }
        }
        Ok(())
    };
    let result = scan();
    // Leave the default selection, as the driver does, whatever happened.
    for &x in &xccs {
        let _ = t.regs.reg(gc::GRBM_GFX_CNTL).map(|g| g.write(x, 0));
    }
    result?;
    Ok(out)
}

fn sdma_queues(t: &Target) -> anyhow::Result<Vec<QueueInfo>> {
    // SDMA 5+ sits in the GC block (`SDMAn_QUEUE0_*`); SDMA 4.4 is its own block with one
    // instance per engine (`SDMA_GFX_*`).
    let mut engines: Vec<(String, RegIp, String, u8)> = vec![];
    for e in 0..2u8 {
        if t.regs
            .named(RegIp::Gc, &format!("SDMA{e}_QUEUE0_RB_CNTL"))
            .is_ok()
        {
            engines.push((format!("sdma{e}"), RegIp::Gc, format!("SDMA{e}_QUEUE0_"), 0));
        }
    }
    if engines.is_empty() {
        for i in t.regs.instances(HwIp::SDMA0) {
            engines.push((format!("sdma{i}"), RegIp::Sdma, "SDMA_GFX_".into(), i));
        }
    }
    let mut out = vec![];
    for (id, fam, p, inst) in engines {
        let reg = |n: &str| t.regs.named(fam, &format!("{p}{n}"));
        let cntl = reg("RB_CNTL")?;
        let c = cntl.read(inst)?;
        if cntl.field(c, "RB_ENABLE")? == 0 {
            continue;
        }
        let ring_va = pair(
            t,
            &format!("{p}RB_BASE"),
            &format!("{p}RB_BASE_HI"),
            fam,
            inst,
        )? << 8;
        let ring_size = 4u64 << cntl.field(c, "RB_SIZE")?;
        let vmid = cntl.field(c, "RB_VMID")?;
        let rptr_addr = pair(
            t,
            &format!("{p}RB_RPTR_ADDR_LO"),
            &format!("{p}RB_RPTR_ADDR_HI"),
            fam,
            inst,
        )?;
        let wptr_addr = pair(
            t,
            &format!("{p}RB_WPTR_POLL_ADDR_LO"),
            &format!("{p}RB_WPTR_POLL_ADDR_HI"),
            fam,
            inst,
        )?;
        let mem = (|| -> anyhow::Result<(u64, u64)> {
            let v = vmid as u8;
            Ok((read_u64_va(t, v, rptr_addr)?, read_u64_va(t, v, wptr_addr)?))
        })();
        let (rptr, wptr, from) = match mem {
            Ok(m) if rptr_addr != 0 && wptr_addr != 0 => (m.0, m.1, "memory"),
            _ => (
                pair(
                    t,
                    &format!("{p}RB_RPTR"),
                    &format!("{p}RB_RPTR_HI"),
                    fam,
                    inst,
                )?,
                pair(
                    t,
                    &format!("{p}RB_WPTR"),
                    &format!("{p}RB_WPTR_HI"),
                    fam,
                    inst,
                )?,
                "registers",
            ),
        };
        let db = reg("DOORBELL")?;
        let dbo = reg("DOORBELL_OFFSET")?;
        let off = dbo.field(dbo.read(inst)?, "OFFSET")?;
        out.push(QueueInfo {
            id,
            kind: "sdma",
            xccs: vec![inst],
            ring: format!("{ring_va:#x}"),
            ring_size,
            rptr,
            wptr,
            unit: "bytes",
            pointers_from: from,
            pending: (wptr % ring_size + ring_size - rptr % ring_size) % ring_size,
            doorbell: u64::from(off) / 2,
            doorbell_enabled: db.field(db.read(inst)?, "ENABLE")? != 0,
            vmid,
            packets: None,
            error: None,
            ring_va,
            start: 0,
        });
    }
    Ok(out)
}

/// Every live queue of the device.
pub fn queues(t: &Target) -> anyhow::Result<Vec<QueueInfo>> {
    let mut q = compute_queues(t)?;
    q.extend(sdma_queues(t)?);
    Ok(q)
}

/// GC register names by dword address on the first XCC (for `SET_*_REG`).
fn gc_names(t: &Target) -> HashMap<u64, &'static str> {
    let x0 = t.regs.instances(HwIp::GC).first().copied().unwrap_or(0);
    all_names(&t.regs)
        .into_iter()
        .filter(|n| n.block == "GC")
        .filter_map(|n| {
            let a = t.regs.named(RegIp::Gc, n.name).ok()?.addr(x0).ok()?;
            Some((a, n.name))
        })
        .collect()
}

/// Decode the packets of `q` between its read and write pointers (or from the ring's
/// start with `from_start`).
pub fn decode_queue(
    t: &Target,
    q: &mut QueueInfo,
    from_start: bool,
    names: &HashMap<u64, &'static str>,
) {
    let vmid = q.vmid as u8;
    let unit = match q.kind {
        "aql" => 64,
        "pm4" => 4,
        _ => 1,
    };
    let slots = q.ring_size / unit;
    let w = q.wptr % slots;
    let (start, count) = if from_start {
        if q.wptr >= slots {
            q.error = Some("the ring has wrapped: its start is no longer a packet boundary".into());
            return;
        }
        (0, w)
    } else {
        let r = q.rptr % slots;
        (r, (w + slots - r) % slots)
    };
    q.start = start;
    let read = |va: u64, n: usize| -> anyhow::Result<Vec<u32>> {
        Ok(dwords(&read_va(t, vmid, va, n * 4)?))
    };
    let env = Env {
        read: &read,
        reg_names: names,
        gfx9: t.discovery.version(HwIp::GC).is_some_and(|v| v.major < 10),
        sdma_v5: t.regs.named(RegIp::Gc, "SDMA0_QUEUE0_RB_CNTL").is_ok(),
    };
    // The pending range may wrap: read it as two pieces joined.
    let bytes = (|| -> anyhow::Result<Vec<u8>> {
        let total = count * unit;
        let first = total.min(q.ring_size - start * unit);
        let mut b = read_va(t, vmid, q.ring_va + start * unit, first as usize)?;
        if total > first {
            b.extend(read_va(t, vmid, q.ring_va, (total - first) as usize)?);
        }
        Ok(b)
    })();
    let bytes = match bytes {
        Ok(b) => b,
        Err(e) => {
            q.error = Some(format!("{e:#}"));
            return;
        }
    };
    let words = dwords(&bytes);
    let va = q.ring_va + start * unit;
    q.packets = Some(match q.kind {
        "aql" => decode::aql(&env, va, &words),
        "pm4" => decode::pm4(&env, va, &words, 0),
        _ => decode::sdma(&env, va, &words, 0),
    });
}

fn print_list(t: &Target, qs: &[QueueInfo]) {
    println!("{}  {}: {} live queue(s)", t.name(), t.product(), qs.len());
    println!(
        "  {:<18} {:<5} {:<16} {:>9} {:>10} {:>10} {:>8} {:>9} {:>4}",
        "QUEUE", "KIND", "RING", "SIZE", "RPTR", "WPTR", "PENDING", "DOORBELL", "VMID"
    );
    for q in qs {
        println!(
            "  {:<18} {:<5} {:<16} {:>9} {:>10} {:>10} {:>8} {:>9} {:>4}",
            q.id,
            q.kind,
            q.ring,
            q.ring_size,
            q.rptr,
            q.wptr,
            q.pending,
            if q.doorbell_enabled {
                format!("{:#x}", q.doorbell)
            } else {
                "off".into()
            },
            q.vmid
        );
    }
}

/// Run `am ring`.
pub fn run(args: RingArgs) -> anyhow::Result<()> {
    let t = Target::open(&args.device)?;
    let mut qs = queues(&t)?;
    let selected: Vec<usize> = match (&args.queue, args.all) {
        (_, true) => (0..qs.len()).collect(),
        (Some(name), false) => {
            let s: Vec<usize> = (0..qs.len())
                .filter(|&i| qs[i].id == *name || qs[i].id.starts_with(name.as_str()))
                .collect();
            if s.is_empty() {
                let ids: Vec<&str> = qs.iter().map(|q| q.id.as_str()).collect();
                bail!(
                    "{}: no live queue {name:?} (live: {})",
                    t.name(),
                    if ids.is_empty() {
                        "none".to_string()
                    } else {
                        ids.join(", ")
                    }
                );
            }
            s
        }
        (None, false) => vec![],
    };
    if !selected.is_empty() {
        let names = gc_names(&t);
        for &i in &selected {
            decode_queue(&t, &mut qs[i], args.from_start, &names);
        }
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&qs)?);
        return Ok(());
    }
    print_list(&t, &qs);
    for &i in &selected {
        let q = &qs[i];
        let what = if args.from_start {
            "from the ring's start"
        } else {
            "from the read pointer"
        };
        println!(
            "\n{} ({}): {} {} pending, decoded {what}",
            q.id, q.kind, q.pending, q.unit
        );
        if let Some(e) = &q.error {
            println!("  ! {e}");
        }
        if let Some(p) = &q.packets {
            decode::print(p, 2);
        }
    }
    Ok(())
}
