//! SDMA engines: a strict register model of the ring state (`mock-device.md` item 10, the
//! queue registers; no packets are executed yet).
//!
//! Register layouts: on SDMA ≥ 5 the engines live in the GC block (`SDMA<e>_*`, engine-wide
//! registers, and `SDMA<e>_QUEUE<q>_*`, the rings); on SDMA 4.x each engine is its own
//! instance of the SDMA table (`SDMA_*`, rings `SDMA_GFX_*` = queue 0, `SDMA_PAGE_*` = 1,
//! `SDMA_RLC<n>_*` = 2 + n).
//!
//! - **Halt.** Every engine is halted at power-on (`F32_CNTL.HALT`/`MCU_CNTL.HALT` = 1, the
//!   GC 11 reset value; set by [`Sdma::power_on`] where the table has no default) until the
//!   driver un-halts it, or on SDMA 4.x until the PSP loads its firmware
//!   ([`Sdma::firmware_loaded`]). A ring may be enabled while its engine is halted — Linux
//!   does so (`sdma_v4_4_2_inst_start` and `sdma_v5_0_start` under SR-IOV program and enable
//!   the rings, then un-halt) — and the engine fetches nothing from it until un-halted.
//! - **Enable.** `RB_CNTL` written with `RB_ENABLE` starts the ring and records it
//!   ([`SdmaQueue`]). Violations (the ring does not start): no ring base
//!   (`RB_BASE`/`_HI` zero); a ring smaller than 256 bytes (`RB_SIZE` < 6, size = 4 << RB_SIZE
//!   bytes); `RPTR_WRITEBACK_ENABLE` with a zero or misaligned `RB_RPTR_ADDR`; write-pointer
//!   polling (`F32_WPTR_POLL_ENABLE`/`MCU_WPTR_POLL_ENABLE`) with a zero or misaligned
//!   `RB_WPTR_POLL_ADDR`. `RB_CNTL` without `RB_ENABLE` stops it.
//! - **Running ring.** Writing its base, size-bearing registers, pointer addresses or
//!   doorbell offset while it runs is a violation (the engine would keep the old values).
//! - **Lifetime.** Rings are device state (they outlive driver handles); FLR, mode1 and, on
//!   SDMA ≥ 5, `GRBM_SOFT_RESET.SOFT_RESET_SDMA<e>` stop them.
//! - **Doorbells.** A running ring with `DOORBELL.ENABLE` owns the doorbell dword
//!   `DOORBELL_OFFSET.OFFSET`; the device records rings of it (no packet engine yet).

use std::collections::BTreeMap;

use super::{Fault, Hw, IpModel, Reg, ResetKind};
use crate::profile::RegIp;
use crate::regs::{RegId, RegValues, RegisterMap};

/// An SDMA ring the engine holds enabled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SdmaQueue {
    /// Engine (`SDMA<e>` on SDMA ≥ 5, the SDMA instance on 4.x).
    pub engine: u8,
    /// Ring of the engine (`QUEUE<q>`; on 4.x GFX = 0, PAGE = 1, RLC<n> = 2 + n).
    pub queue: u8,
    /// Ring base (`RB_BASE`/`_HI`, 256-byte units) as an address.
    pub rb_base: u64,
    /// Ring size in bytes (`4 << RB_SIZE`).
    pub rb_size: u64,
    /// Read-pointer write-back address, when `RPTR_WRITEBACK_ENABLE` is set.
    pub rptr_addr: Option<u64>,
    /// Write-pointer poll address, when polling is enabled (SDMA ≥ 5; 4.x rings record the
    /// address whenever it is non-zero).
    pub wptr_poll_addr: Option<u64>,
    /// `DOORBELL_OFFSET.OFFSET` (dword index in the doorbell BAR).
    pub doorbell_offset: u32,
    /// `DOORBELL.ENABLE`.
    pub doorbell_enabled: bool,
    /// `RB_VMID`.
    pub vmid: u8,
    /// `RB_PRIV`.
    pub privileged: bool,
    /// `IB_CNTL.IB_ENABLE` (as last written).
    pub ib_enabled: bool,
    /// `RB_RPTR`/`_HI` at enable (bytes).
    pub rptr: u64,
    /// `RB_WPTR`/`_HI` at enable (bytes).
    pub wptr: u64,
}

/// SDMA model state.
#[derive(Debug, Default)]
pub struct Sdma {
    /// Running rings by (engine, queue).
    active: BTreeMap<(u8, u8), SdmaQueue>,
    /// Rings enabled while their engine was halted, with the register table and instance
    /// of that engine: the engine has fetched nothing from them yet.
    held: BTreeMap<(u8, u8), (RegIp, u8)>,
    /// What the last ring start accepted without a source (handed to [`Hw::warn`]).
    warnings: Vec<String>,
}

/// A ring register: (engine, queue, name prefix of the ring, register suffix).
type RingTarget<'a> = (u8, u8, String, &'a str);

/// Decode the engine and ring a ring register belongs to (`None` for engine-wide ones).
fn target(table: RegIp, name: &str, instance: u8) -> Option<RingTarget<'_>> {
    if table == RegIp::Sdma {
        let rest = name.strip_prefix("SDMA_")?;
        if let Some(r) = rest.strip_prefix("GFX_") {
            return Some((instance, 0, "SDMA_GFX_".into(), r));
        }
        if let Some(r) = rest.strip_prefix("PAGE_") {
            return Some((instance, 1, "SDMA_PAGE_".into(), r));
        }
        if let Some(r) = rest.strip_prefix("RLC") {
            let (n, r) = r.split_once('_')?;
            let n: u8 = n.parse().ok()?;
            return Some((instance, 2 + n, format!("SDMA_RLC{n}_"), r));
        }
        return None;
    }
    let rest = name.strip_prefix("SDMA")?;
    let (e, rest) = rest.split_once('_')?;
    let engine: u8 = e.parse().ok()?;
    if let Some(q) = rest.strip_prefix("QUEUE")
        && let Some((q, r)) = q.split_once('_')
        && let Ok(queue) = q.parse::<u8>()
    {
        return Some((engine, queue, format!("SDMA{engine}_QUEUE{queue}_"), r));
    }
    None
}

fn field_of(map: &RegisterMap, id: RegId, name: &str) -> Option<am_autogen::regs::Field> {
    let info = map.info(id);
    am_autogen::regs::table(info.table, info.version)
        .and_then(|t| t.by_name(info.name))
        .and_then(|r| r.field(name))
}

fn field(hw: &Hw<'_>, id: RegId, name: &str) -> Result<am_autogen::regs::Field, Fault> {
    field_of(hw.map, id, name)
        .ok_or_else(|| Fault::new(format!("{} has no field {name}", hw.map.info(id).name)))
}

/// Registers of a running ring that no proven driver changes under it: a write is taken
/// (the running ring keeps the values it started with) and counted as a warning, since no
/// source says what the engine does with it.
const FROZEN: &[&str] = &[
    "RB_BASE",
    "RB_BASE_HI",
    "RB_RPTR_ADDR_LO",
    "RB_RPTR_ADDR_HI",
    "RB_WPTR_POLL_ADDR_LO",
    "RB_WPTR_POLL_ADDR_HI",
    "DOORBELL_OFFSET",
];

impl Sdma {
    /// Power-on state: every engine halted (tables without reset values leave `HALT` 0).
    pub fn power_on(hw: &mut Hw<'_>) {
        let mut ids = Vec::new();
        for inst in 0..=u8::MAX {
            if let Some(id) = hw.map.find(RegIp::Sdma, "SDMA_F32_CNTL", inst) {
                ids.push(id);
            }
        }
        for e in 0..8 {
            for name in [format!("SDMA{e}_F32_CNTL"), format!("SDMA{e}_MCU_CNTL")] {
                if let Some(id) = hw.map.find(RegIp::Gc, &name, 0) {
                    ids.push(id);
                }
            }
        }
        for id in ids {
            if let Some(f) = field_of(hw.map, id, "HALT") {
                let v = hw.regs.get(id);
                hw.regs.set(id, f.set(v, 1));
            }
        }
    }

    /// The enabled rings, ordered by (engine, queue), whether or not their engine runs.
    pub fn active_queues(&self) -> Vec<SdmaQueue> {
        self.active.values().copied().collect()
    }

    /// The enabled rings whose engine fetches from them: not held by a halt at enable.
    pub fn running_queues(&self) -> Vec<SdmaQueue> {
        self.active
            .iter()
            .filter(|(k, _)| !self.held.contains_key(k))
            .map(|(_, q)| *q)
            .collect()
    }

    /// The PSP loaded SDMA firmware. On SDMA 4.x the engines then run: tinygrad's AM never
    /// writes `SDMA_F32_CNTL` on SDMA 4.4.2 and its copies run on real MI300X.
    pub fn firmware_loaded(hw: &mut Hw<'_>) {
        for inst in 0..=u8::MAX {
            let Some(id) = hw.map.find(RegIp::Sdma, "SDMA_F32_CNTL", inst) else {
                continue;
            };
            if let Some(f) = field_of(hw.map, id, "HALT") {
                let v = hw.regs.get(id);
                hw.regs.set(id, f.set(v, 0));
            }
        }
    }

    /// `GRBM_SOFT_RESET` written (SDMA ≥ 5, engines in GC): the engines whose
    /// `SOFT_RESET_SDMA<e>` bit is set lose their rings.
    pub fn grbm_soft_reset(
        &mut self,
        map: &RegisterMap,
        regs: &mut RegValues,
        id: RegId,
        value: u32,
    ) {
        for e in 0..8u8 {
            let Some(f) = field_of(map, id, &format!("SOFT_RESET_SDMA{e}")) else {
                continue;
            };
            if f.get(value) == 0 {
                continue;
            }
            let queues: Vec<u8> = self
                .active
                .keys()
                .filter(|k| k.0 == e)
                .map(|k| k.1)
                .collect();
            for q in queues {
                self.active.remove(&(e, q));
                self.held.remove(&(e, q));
                if let Some(cntl) = map.find(RegIp::Gc, &format!("SDMA{e}_QUEUE{q}_RB_CNTL"), 0)
                    && let Some(en) = field_of(map, cntl, "RB_ENABLE")
                {
                    let v = regs.get(cntl);
                    regs.set(cntl, en.set(v, 0));
                }
            }
        }
    }

    /// Why the engine cannot run a ring (halted), if it cannot.
    fn halted(hw: &Hw<'_>, table: RegIp, engine: u8, instance: u8) -> Option<String> {
        let names: Vec<String> = if table == RegIp::Sdma {
            vec!["SDMA_F32_CNTL".into()]
        } else {
            vec![
                format!("SDMA{engine}_F32_CNTL"),
                format!("SDMA{engine}_MCU_CNTL"),
            ]
        };
        for n in names {
            let Some(id) = hw.map.find(table, &n, instance) else {
                continue;
            };
            let f = field_of(hw.map, id, "HALT")?;
            if f.get(hw.regs.get(id)) != 0 {
                return Some(format!("{n}.HALT is set"));
            }
        }
        None
    }

    /// `RB_CNTL` with `RB_ENABLE`: check the ring and record it.
    #[allow(clippy::too_many_arguments)]
    fn start(
        &mut self,
        hw: &Hw<'_>,
        reg: Reg<'_>,
        value: u32,
        engine: u8,
        queue: u8,
        prefix: &str,
    ) -> Result<(), Fault> {
        let table = reg.info.table;
        let inst = reg.info.instance;
        let label = format!("SDMA ring (engine {engine}, queue {queue})");
        let get = |suffix: &str| -> u32 {
            hw.map
                .find(table, &format!("{prefix}{suffix}"), inst)
                .map_or(0, |id| hw.regs.get(id))
        };
        let pair = |lo: &str, hi: &str| u64::from(get(hi)) << 32 | u64::from(get(lo));
        let f = |name: &str| field(hw, reg.id, name).map(|f| f.get(value));
        // No source says the engine refuses an odd ring: a base of 0 or a tiny ring starts
        // (and faults or wraps as the addresses say); no proven driver programs one.
        let rb_base = pair("RB_BASE", "RB_BASE_HI") << 8;
        if rb_base == 0 {
            self.warnings.push(format!(
                "{label} enabled with ring base 0 ({prefix}RB_BASE/_HI)"
            ));
        }
        let rb_size_log = f("RB_SIZE")?;
        if rb_size_log < 6 {
            self.warnings.push(format!(
                "{label} enabled with RB_SIZE {rb_size_log}: a ring of {} bytes",
                4u64 << rb_size_log
            ));
        }
        // The low address registers keep only their ADDR field (bits 31:2): the engine
        // cannot see an unaligned address.
        let addr_lo = |name: &str| -> Result<u64, Fault> {
            let id = hw
                .map
                .find(table, &format!("{prefix}{name}"), inst)
                .ok_or_else(|| Fault::new(format!("the profile has no {prefix}{name}")))?;
            Ok(u64::from(field(hw, id, "ADDR")?.mask & hw.regs.get(id)))
        };
        let rptr = u64::from(get("RB_RPTR_ADDR_HI")) << 32 | addr_lo("RB_RPTR_ADDR_LO")?;
        let rptr_addr = if f("RPTR_WRITEBACK_ENABLE")? != 0 {
            if rptr == 0 {
                self.warnings.push(format!(
                    "{label}: read-pointer write-back to address 0 ({prefix}RB_RPTR_ADDR)"
                ));
            }
            Some(rptr)
        } else {
            None
        };
        let poll = u64::from(get("RB_WPTR_POLL_ADDR_HI")) << 32 | addr_lo("RB_WPTR_POLL_ADDR_LO")?;
        let poll_field = ["F32_WPTR_POLL_ENABLE", "MCU_WPTR_POLL_ENABLE"]
            .into_iter()
            .find_map(|n| field_of(hw.map, reg.id, n));
        let wptr_poll_addr = match poll_field {
            Some(pf) if pf.get(value) != 0 => {
                if poll == 0 {
                    self.warnings.push(format!(
                        "{label}: write-pointer polling of address 0 ({prefix}RB_WPTR_POLL_ADDR)"
                    ));
                }
                Some(poll)
            }
            Some(_) => None,
            None => (poll != 0).then_some(poll),
        };
        let doorbell = |suffix: &str, fld: &str| -> Result<u32, Fault> {
            match hw.map.find(table, &format!("{prefix}{suffix}"), inst) {
                Some(id) => Ok(field(hw, id, fld)?.get(hw.regs.get(id))),
                None => Ok(0),
            }
        };
        let q = SdmaQueue {
            engine,
            queue,
            rb_base,
            rb_size: 4u64 << rb_size_log,
            rptr_addr,
            wptr_poll_addr,
            doorbell_offset: doorbell("DOORBELL_OFFSET", "OFFSET")?,
            doorbell_enabled: doorbell("DOORBELL", "ENABLE")? != 0,
            vmid: f("RB_VMID")? as u8,
            privileged: f("RB_PRIV")? != 0,
            ib_enabled: doorbell("IB_CNTL", "IB_ENABLE")? != 0,
            rptr: pair("RB_RPTR", "RB_RPTR_HI"),
            wptr: pair("RB_WPTR", "RB_WPTR_HI"),
        };
        self.active.insert((engine, queue), q);
        if Self::halted(hw, table, engine, inst).is_some() {
            self.held.insert((engine, queue), (table, inst));
        } else {
            self.held.remove(&(engine, queue));
        }
        Ok(())
    }

    /// An engine-wide control register was written: rings held by a halt whose engine is
    /// now un-halted start.
    fn release_held(&mut self, hw: &Hw<'_>) {
        self.held.retain(|&(engine, _), &mut (table, inst)| {
            Self::halted(hw, table, engine, inst).is_some()
        });
    }
}

impl IpModel for Sdma {
    fn write(&mut self, hw: &mut Hw<'_>, reg: Reg<'_>, value: u32) -> Result<(), Fault> {
        let info = reg.info;
        if let Some((engine, queue, prefix, suffix)) = target(info.table, info.name, info.instance)
        {
            let running = self.active.contains_key(&(engine, queue));
            match suffix {
                "RB_CNTL" => {
                    if field(hw, reg.id, "RB_ENABLE")?.get(value) != 0 {
                        // Checked against the registers as they are, before this write.
                        hw.regs.set(reg.id, value);
                        let started = self.start(hw, reg, value, engine, queue, &prefix);
                        for w in self.warnings.drain(..) {
                            hw.warn(w);
                        }
                        if let Err(e) = started {
                            let en = field(hw, reg.id, "RB_ENABLE")?;
                            hw.regs.set(reg.id, en.set(value, 0));
                            return Err(e);
                        }
                        return Ok(());
                    }
                    self.active.remove(&(engine, queue));
                    self.held.remove(&(engine, queue));
                }
                s if running && FROZEN.contains(&s) => {
                    hw.warn(format!(
                        "{} written while SDMA ring (engine {engine}, queue {queue}) runs",
                        info.name
                    ));
                }
                "DOORBELL" => {
                    let en = field(hw, reg.id, "ENABLE")?.get(value) != 0;
                    if let Some(q) = self.active.get_mut(&(engine, queue)) {
                        q.doorbell_enabled = en;
                    }
                }
                "IB_CNTL" => {
                    let en = field(hw, reg.id, "IB_ENABLE")?.get(value) != 0;
                    if let Some(q) = self.active.get_mut(&(engine, queue)) {
                        q.ib_enabled = en;
                    }
                }
                _ => {}
            }
        }
        hw.regs.set(reg.id, value);
        if !self.held.is_empty()
            && (info.name.ends_with("F32_CNTL") || info.name.ends_with("MCU_CNTL"))
        {
            self.release_held(hw);
        }
        Ok(())
    }

    fn reset(&mut self, _kind: ResetKind) {
        self.active.clear();
        self.held.clear();
    }
}
