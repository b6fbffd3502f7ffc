//! GMC: the GC and MM hubs (VM contexts, system aperture, FB location, invalidation
//! engines, protection faults).
//!
//! - Power-on: firmware's frame-buffer location in every hub, so the driver finds VRAM at a
//!   non-zero MC address as on real parts.
//! - Invalidation engine 17 of each hub: `VM_INVALIDATE_ENG17_SEM` reads 1 (acquired) when
//!   free and 0 while held, a write of 0 releases it; a write of `VM_INVALIDATE_ENG17_REQ`
//!   invalidates the vmids of `PER_VMID_INVALIDATE_REQ` and sets their bits in
//!   `VM_INVALIDATE_ENG17_ACK`.
//! - TLB snapshot: an invalidation records the VRAM write generation and marks every table
//!   of the vmid's tree, so a table written later keeps the version the snapshot saw; the
//!   walker reads the tables as of the last invalidation of that hub and vmid, so a mapping
//!   used before its flush faults, the entries beside it keep translating, and a vmid never
//!   invalidated has no translation at all.
//! - Translation ([`Gmc::translate`]) reads the context registers of the hub and walks the
//!   tables with [`crate::walker`]; a fault latches the L2 protection-fault status and
//!   address registers, and the caller posts the IH entry ([`fault_ih_entry`]).
use std::collections::HashMap;

use super::ih::IhEntry;
use super::{Fault, Hw, IpModel, Reg, ResetKind};
use crate::hive::Member;
use crate::profile::RegIp;
use crate::regs::RegId;
use crate::walker::{
    self, Access, Context, FaultKind, PageFault, PhysTarget, PteFormat, XgmiLayout,
};
use am_autogen::hwid::{GC_HWID, MMHUB_HWID};
use am_autogen::ih as ihsrc;
use am_autogen::regs::Field;

/// MC address of VRAM byte 0 as firmware programs it on these dGPUs (512 GiB, the value
/// Linux reports as the start of the "VRAM:" range on Navi and MI300 parts).
pub const FB_BASE: u64 = 0x80_0000_0000;

/// FB location registers of every hub generation: (table, base register, top register).
const FB_LOCATION: &[(RegIp, &str, &str)] = &[
    (
        RegIp::Gc,
        "GCMC_VM_FB_LOCATION_BASE",
        "GCMC_VM_FB_LOCATION_TOP",
    ),
    (RegIp::Gc, "MC_VM_FB_LOCATION_BASE", "MC_VM_FB_LOCATION_TOP"),
    (
        RegIp::Mmhub,
        "MMMC_VM_FB_LOCATION_BASE",
        "MMMC_VM_FB_LOCATION_TOP",
    ),
    (
        RegIp::Mmhub,
        "MC_VM_FB_LOCATION_BASE",
        "MC_VM_FB_LOCATION_TOP",
    ),
];

/// One hub: the GC hub of an XCC or an MMHUB instance.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Hub {
    /// `RegIp::Gc` or `RegIp::Mmhub`.
    pub ip: RegIp,
    /// XCC or MMHUB instance.
    pub instance: u8,
}

impl Hub {
    /// The GC hub of XCC `instance`.
    pub const fn gc(instance: u8) -> Self {
        Hub {
            ip: RegIp::Gc,
            instance,
        }
    }
    /// MMHUB `instance`.
    pub const fn mm(instance: u8) -> Self {
        Hub {
            ip: RegIp::Mmhub,
            instance,
        }
    }
}

#[derive(Debug, Default, Clone)]
struct HubState {
    /// VRAM write generation at the last invalidation of each vmid.
    flushed: [Option<u64>; 16],
    sem_held: bool,
}

/// GMC model state.
#[derive(Debug, Default)]
pub struct Gmc {
    hubs: HashMap<Hub, HubState>,
}

/// The hub-relative name of a register (`GCVM_CONTEXT0_CNTL`, `MMVM_…`, GC 9's `VM_…`
/// → `VM_CONTEXT0_CNTL`; `GCMC_VM_…`/`MMMC_VM_…` → `MC_VM_…`).
fn base_name(name: &str) -> &str {
    for p in ["GCVM_", "MMVM_", "GCMC_", "MMMC_"] {
        if name.starts_with(p) {
            return &name[2..];
        }
    }
    name
}

/// A hub's register by hub-relative name, whichever prefix its IP version uses.
fn hub_reg(hw: &Hw<'_>, hub: Hub, base: &str) -> Option<RegId> {
    let prefix = match hub.ip {
        RegIp::Gc => "GC",
        _ => "MM",
    };
    hw.map
        .find(hub.ip, &format!("{prefix}{base}"), hub.instance)
        .or_else(|| hw.map.find(hub.ip, base, hub.instance))
}

/// A field of a register of the map, from the generated `sh_mask` of its IP version.
fn field(hw: &Hw<'_>, id: RegId, name: &str) -> Option<Field> {
    let info = hw.map.info(id);
    am_autogen::regs::table(info.table, info.version)?
        .by_name(info.name)?
        .field(name)
}

/// The hub's protection-fault status register: GC 12 and MMHUB 4.1 split it into
/// `VM_L2_PROTECTION_FAULT_STATUS_LO32`/`_HI32` (the fields the model latches are in the low
/// half), earlier hubs have one `VM_L2_PROTECTION_FAULT_STATUS`.
fn fault_status_name(hw: &Hw<'_>, hub: Hub) -> &'static str {
    if hub_reg(hw, hub, "VM_L2_PROTECTION_FAULT_STATUS").is_some() {
        "VM_L2_PROTECTION_FAULT_STATUS"
    } else {
        "VM_L2_PROTECTION_FAULT_STATUS_LO32"
    }
}

fn get_reg(hw: &Hw<'_>, hub: Hub, base: &str) -> Result<(RegId, u32), Fault> {
    let id = hub_reg(hw, hub, base)
        .ok_or_else(|| Fault::new(format!("{hub:?} has no register {base}")))?;
    Ok((id, hw.regs.get(id)))
}

fn get_field(hw: &Hw<'_>, hub: Hub, base: &str, fname: &str) -> Result<u32, Fault> {
    let (id, v) = get_reg(hw, hub, base)?;
    let f = field(hw, id, fname)
        .ok_or_else(|| Fault::new(format!("{base} of {hub:?} has no field {fname}")))?;
    Ok(f.get(v))
}

fn get64(hw: &Hw<'_>, hub: Hub, lo: &str, hi: &str) -> Result<u64, Fault> {
    Ok(u64::from(get_reg(hw, hub, lo)?.1) | u64::from(get_reg(hw, hub, hi)?.1) << 32)
}

/// Where an MC address of `hub` lands without a page walk: VRAM through the FB aperture
/// (`mc − fb_base − paddr_base`), else `None` (the caller walks VM context 0, the GART).
pub fn fb_aperture(hw: &Hw<'_>, hub: Hub, mc: u64) -> Option<u64> {
    let base = u64::from(get_reg(hw, hub, "MC_VM_FB_LOCATION_BASE").ok()?.1) << 24;
    let top = u64::from(get_reg(hw, hub, "MC_VM_FB_LOCATION_TOP").ok()?.1) << 24 | 0xff_ffff;
    if mc < base || mc > top {
        return None;
    }
    // In a hive the aperture spans every member's segment; another member's segment is
    // reached over XGMI by the engines (`HubView`), not by the firmware and IH that use
    // this (the caller walks the GART and faults).
    let local = (mc - base).checked_sub(xgmi_offset(hw, hub))?;
    hw.vram.contains(local, 1).then_some(local)
}

/// Where an MC address of `hub` lands in the AGP aperture: `[AGP_BOT << 24, AGP_TOP << 24 |
/// 0xffffff]` is system bus address `AGP_BASE << 24 + (mc − bot)`. The aperture is disabled
/// (as the driver leaves it) when `AGP_BOT > AGP_TOP`.
pub fn agp_aperture(hw: &Hw<'_>, hub: Hub, mc: u64) -> Option<u64> {
    let bot = u64::from(get_reg(hw, hub, "MC_VM_AGP_BOT").ok()?.1 & 0xff_ffff) << 24;
    let top = u64::from(get_reg(hw, hub, "MC_VM_AGP_TOP").ok()?.1 & 0xff_ffff) << 24 | 0xff_ffff;
    let base = u64::from(get_reg(hw, hub, "MC_VM_AGP_BASE").ok()?.1 & 0xff_ffff) << 24;
    (bot <= top && (bot..=top).contains(&mc)).then(|| base + (mc - bot))
}

/// The XGMI `paddr_base` of this device: `PF_LFB_REGION × (PF_LFB_SIZE << 24)`.
fn xgmi_offset(hw: &Hw<'_>, hub: Hub) -> u64 {
    let region = get_field(hw, hub, "MC_VM_XGMI_LFB_CNTL", "PF_LFB_REGION").unwrap_or(0);
    let size = get_field(hw, hub, "MC_VM_XGMI_LFB_SIZE", "PF_LFB_SIZE").unwrap_or(0);
    u64::from(region) * (u64::from(size) << 24)
}

/// The hive layout a hub's LFB registers hold; `None` outside a hive (no registers, no
/// segment size, or a single region).
fn xgmi_layout(hw: &Hw<'_>, hub: Hub) -> Option<XgmiLayout> {
    let region = get_field(hw, hub, "MC_VM_XGMI_LFB_CNTL", "PF_LFB_REGION").ok()?;
    let max = get_field(hw, hub, "MC_VM_XGMI_LFB_CNTL", "PF_MAX_REGION").ok()?;
    let size = get_field(hw, hub, "MC_VM_XGMI_LFB_SIZE", "PF_LFB_SIZE").ok()?;
    (size > 0 && max > 0).then(|| XgmiLayout {
        region: region as u8,
        regions: max as u8 + 1,
        segment_size: u64::from(size) << 24,
    })
}

/// The IH client and source id of a page fault on `hub` (`gmc_v9_0.c`/`gmc_v11_0.c`
/// register UTCL2 (GC 9) or GFX (GC 11+) source `UTCL2_FAULT` for the GC hub, VMC
/// `VM_FAULT` for the MM hub).
fn fault_source(hw: &Hw<'_>, hub: Hub) -> (u8, u8) {
    let gc_major = hw.profile.version(GC_HWID).map_or(9, |v| v.major);
    match (hub.ip, gc_major >= 10) {
        (RegIp::Gc, true) => (
            ihsrc::SOC21_IH_CLIENTID_GFX as u8,
            ihsrc::gfx_11_0_0::GFX_11_0_0__SRCID__UTCL2_FAULT as u8,
        ),
        (RegIp::Gc, false) => (
            ihsrc::SOC15_IH_CLIENTID_UTCL2 as u8,
            ihsrc::vmc_1_0::UTCL2_1_0__SRCID__FAULT as u8,
        ),
        _ => (
            ihsrc::SOC15_IH_CLIENTID_VMC as u8,
            ihsrc::vmc_1_0::VMC_1_0__SRCID__VM_FAULT as u8,
        ),
    }
}

/// The IH entry of a page fault: context dword 0 = VA bits 43:12, dword 1 bits 3:0 = VA
/// bits 47:44 and bit 5 = write (as `gmc_v9_0_process_interrupt` decodes them); the node id
/// is the hub instance.
pub fn fault_ih_entry(hw: &Hw<'_>, hub: Hub, vmid: u8, f: &PageFault, access: Access) -> IhEntry {
    let (client_id, src_id) = fault_source(hw, hub);
    let write = if access == Access::Write { 0x20 } else { 0 };
    IhEntry {
        client_id,
        src_id,
        ring_id: 0,
        vmid,
        pasid: 0,
        node_id: hub.instance,
        timestamp: 0,
        src_data: [
            (f.va >> 12) as u32,
            ((f.va >> 44) & 0xf) as u32 | write,
            0,
            0,
        ],
    }
}

/// The XGMI layout registers firmware programs and the driver only reads.
const XGMI_LFB: [&str; 2] = ["MC_VM_XGMI_LFB_CNTL", "MC_VM_XGMI_LFB_SIZE"];

impl Gmc {
    /// What firmware leaves in the hubs at power-on (and again after a reset): the FB
    /// location, in 16 MiB units, on every GC and MM hub instance; in a hive also the XGMI
    /// layout (`MC_VM_XGMI_LFB_CNTL`, `MC_VM_XGMI_LFB_SIZE`), and the FB location then spans
    /// the segments of all members.
    pub fn power_on(hw: &mut Hw<'_>, member: Option<&Member>) {
        let aperture = member.map_or(hw.profile.vram_size, |m| m.hive.aperture_size());
        let base = (FB_BASE >> 24) as u32;
        let top = ((FB_BASE + aperture - 1) >> 24) as u32;
        let hubs: Vec<(RegIp, u8)> = hw
            .profile
            .ips
            .iter()
            .filter_map(|i| match i.hw_id {
                GC_HWID => Some((RegIp::Gc, i.instance)),
                MMHUB_HWID => Some((RegIp::Mmhub, i.instance)),
                _ => None,
            })
            .collect();
        for (ip, instance) in hubs {
            for &(table, base_reg, top_reg) in FB_LOCATION.iter().filter(|f| f.0 == ip) {
                if hw.set(table, base_reg, instance, base) {
                    hw.set(table, top_reg, instance, top);
                }
            }
            if let Some(m) = member {
                set_xgmi_layout(hw, Hub { ip, instance }, m);
            }
        }
    }
}

/// Program a hub's XGMI LFB registers with a member's place in its hive (fields from the
/// hub's generated `sh_mask`; a hub without the registers is left alone).
fn set_xgmi_layout(hw: &mut Hw<'_>, hub: Hub, m: &Member) {
    let encode = |hw: &Hw<'_>, id, fields: &[(&str, u32)]| {
        fields.iter().fold(0u32, |v, &(name, value)| {
            field(hw, id, name).map_or(v, |f| f.set(v, value))
        })
    };
    if let Some(id) = hub_reg(hw, hub, XGMI_LFB[0]) {
        let v = encode(
            hw,
            id,
            &[
                ("PF_LFB_REGION", u32::from(m.region)),
                ("PF_MAX_REGION", m.hive.max_region()),
            ],
        );
        hw.regs.set(id, v);
    }
    if let Some(id) = hub_reg(hw, hub, XGMI_LFB[1]) {
        let v = encode(hw, id, &[("PF_LFB_SIZE", m.hive.lfb_size())]);
        hw.regs.set(id, v);
    }
}

/// What an engine needs of a hub to resolve its addresses, read from the registers once:
/// the FB and AGP apertures (VM context 0 only) and the VM context of one vmid with the
/// hub's TLB snapshot. An engine keeps a view until the GMC's registers change.
#[derive(Clone, Copy, Debug)]
pub struct HubView {
    /// The hub.
    pub hub: Hub,
    /// The vmid whose context this is.
    pub vmid: u8,
    /// FB aperture `[base, top]` (MC) and the XGMI offset subtracted inside it.
    fb: Option<(u64, u64, u64)>,
    /// AGP aperture `[bot, top]` (MC) and the bus address of `bot`.
    agp: Option<(u64, u64, u64)>,
    /// The hive layout (another member's segment of the FB aperture is its VRAM).
    xgmi: Option<XgmiLayout>,
    /// The VM context, `None` if disabled or never invalidated.
    pub context: Option<Context>,
}

/// Where an address resolved to, and how far the same mapping goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Resolved {
    /// Where the first byte lands.
    pub target: PhysTarget,
    /// Bytes from the address to the end of the page (or aperture) that mapped it.
    pub span: u64,
    /// Read, write, execute allowed.
    pub perms: [bool; 3],
}

impl HubView {
    /// Resolve `addr` as a client of the hub would for `access`: VM context 0 tries the FB
    /// aperture (this device's VRAM, or in a hive another member's segment), then the AGP
    /// aperture, then the page tables (the GART); other vmids walk their tables. A fault is
    /// what the walker found. A peer target is not checked here: the fabric finds whether
    /// that member exists when the access reaches it.
    pub fn resolve(
        &self,
        vram: &crate::vram::Vram,
        addr: u64,
        access: Access,
    ) -> Result<Resolved, PageFault> {
        self.resolve_with(vram, addr, access, &mut None)
    }

    /// [`HubView::resolve`] with the last-level table of an earlier walk (`leaf`, updated):
    /// a page of the same table translates with one entry read, as the UTCL2's page-directory
    /// cache does.
    pub fn resolve_with(
        &self,
        vram: &crate::vram::Vram,
        addr: u64,
        access: Access,
        leaf: &mut Option<walker::LeafTable>,
    ) -> Result<Resolved, PageFault> {
        if self.vmid == 0 {
            if let Some((base, top, xgmi)) = self.fb
                && (base..=top).contains(&addr)
                && let Some(local) = (addr - base).checked_sub(xgmi)
                && vram.contains(local, 1)
            {
                return Ok(Resolved {
                    target: PhysTarget::Vram(local),
                    span: (top - addr + 1).min(vram.size() - local),
                    perms: [true; 3],
                });
            }
            if let Some((base, top, _)) = self.fb
                && (base..=top).contains(&addr)
                && let Some(x) = self.xgmi
                && let Some(target @ PhysTarget::Peer { offset, .. }) = x.peer(addr - base)
            {
                return Ok(Resolved {
                    target,
                    span: (top - addr + 1).min(x.segment_size - offset),
                    perms: [true; 3],
                });
            }
            if let Some((bot, top, bus)) = self.agp
                && (bot..=top).contains(&addr)
            {
                return Ok(Resolved {
                    target: PhysTarget::System(bus + (addr - bot)),
                    span: top - addr + 1,
                    perms: [true; 3],
                });
            }
        }
        let Some(ctx) = &self.context else {
            return Err(PageFault {
                va: addr,
                kind: FaultKind::Invalid,
                shift: 39,
                entry: 0,
            });
        };
        let t = match leaf {
            Some(lt) if (lt.first_va..=lt.last_va).contains(&addr) => {
                walker::translate_in(ctx, vram, lt, addr, access)?
            }
            _ => walker::translate(ctx, vram, addr, access)?,
        };
        *leaf = t.leaf_table;
        // The 4 KiB pages after this one that its table maps on contiguously go into the
        // same span (a wave's buffers are mapped with 4 KiB entries: one walk per 64 KiB
        // instead of per page).
        let run = walker::run_after(ctx, vram, &t, addr, RUN_PAGES);
        let span = t.page_size - (addr & (t.page_size - 1)) + run;
        Ok(Resolved {
            target: t.target,
            span,
            perms: t.perms(),
        })
    }
}

/// Most 4 KiB pages past a translated one that [`HubView::resolve_with`] takes into its
/// span when the table maps them on contiguously ([`walker::run_after`]).
const RUN_PAGES: u64 = 15;

impl Gmc {
    /// A [`HubView`] of `hub` for `vmid`, as the registers and TLB snapshot are now.
    pub fn view(&self, hw: &Hw<'_>, hub: Hub, vmid: u8) -> Result<HubView, Fault> {
        let reg = |name: &str| get_reg(hw, hub, name).map(|r| u64::from(r.1)).ok();
        let fb = match (reg("MC_VM_FB_LOCATION_BASE"), reg("MC_VM_FB_LOCATION_TOP")) {
            (Some(b), Some(t)) => Some((b << 24, t << 24 | 0xff_ffff, xgmi_offset(hw, hub))),
            _ => None,
        };
        let agp = match (
            reg("MC_VM_AGP_BOT"),
            reg("MC_VM_AGP_TOP"),
            reg("MC_VM_AGP_BASE"),
        ) {
            (Some(b), Some(t), Some(base)) if b & 0xff_ffff <= t & 0xff_ffff => Some((
                (b & 0xff_ffff) << 24,
                (t & 0xff_ffff) << 24 | 0xff_ffff,
                (base & 0xff_ffff) << 24,
            )),
            _ => None,
        };
        Ok(HubView {
            hub,
            vmid,
            fb,
            agp,
            xgmi: xgmi_layout(hw, hub),
            context: self.context(hw, hub, vmid)?,
        })
    }

    /// An engine's access faulted: latch the hub's fault registers and, if the context
    /// enables that fault's interrupt, post the page-fault IH entry to ring 0.
    pub fn report_fault(
        models: &mut super::Models,
        hw: &mut Hw<'_>,
        hub: Hub,
        vmid: u8,
        f: &PageFault,
        access: Access,
        client: u32,
    ) -> Result<(), Fault> {
        let super::Models { gmc, ih, .. } = models;
        Self::latch_fault(hw, hub, vmid, f, access, client)?;
        if Self::fault_interrupt_enabled(hw, hub, vmid, f, access) {
            let entry = fault_ih_entry(hw, hub, vmid, f, access);
            ih.post(hw, gmc, 0, entry)?;
        }
        Ok(())
    }

    /// The VM context `vmid` of `hub` as its registers and the last invalidation set it.
    pub fn context(&self, hw: &Hw<'_>, hub: Hub, vmid: u8) -> Result<Option<Context>, Fault> {
        let cntl = format!("VM_CONTEXT{vmid}_CNTL");
        if get_field(hw, hub, &cntl, "ENABLE_CONTEXT")? == 0 {
            return Ok(None);
        }
        let Some(flush_generation) = self
            .hubs
            .get(&hub)
            .and_then(|h| h.flushed.get(usize::from(vmid)).copied().flatten())
        else {
            return Ok(None);
        };
        let p = |s: &str| format!("VM_CONTEXT{vmid}_PAGE_TABLE_{s}");
        let gc_major = hw.profile.version(GC_HWID).map_or(9, |v| v.major);
        Ok(Some(Context {
            format: PteFormat::for_gc(gc_major),
            root: get64(hw, hub, &p("BASE_ADDR_LO32"), &p("BASE_ADDR_HI32"))?,
            depth: get_field(hw, hub, &cntl, "PAGE_TABLE_DEPTH")?,
            block_size: get_field(hw, hub, &cntl, "PAGE_TABLE_BLOCK_SIZE")?,
            start_page: get64(hw, hub, &p("START_ADDR_LO32"), &p("START_ADDR_HI32"))?,
            end_page: get64(hw, hub, &p("END_ADDR_LO32"), &p("END_ADDR_HI32"))?,
            vram_offset: xgmi_offset(hw, hub),
            xgmi: xgmi_layout(hw, hub),
            flush_generation,
        }))
    }

    /// Translate `va` of `vmid` on `hub` as a client of that hub would. A context that is
    /// disabled or was never invalidated faults at the root (`FaultKind::Invalid`). On a
    /// fault the L2 protection-fault registers are latched (see [`Gmc::latch_fault`]); the
    /// caller posts the IH entry.
    pub fn translate(
        &self,
        hw: &mut Hw<'_>,
        hub: Hub,
        vmid: u8,
        va: u64,
        access: Access,
        client: u32,
    ) -> Result<Result<walker::Translation, PageFault>, Fault> {
        let result = match self.context(hw, hub, vmid)? {
            Some(ctx) => walker::translate(&ctx, hw.vram, va, access),
            None => Err(PageFault {
                va,
                kind: FaultKind::Invalid,
                shift: 39,
                entry: 0,
            }),
        };
        if let Err(f) = &result {
            Self::latch_fault(hw, hub, vmid, f, access, client)?;
        }
        Ok(result)
    }

    /// Latch a fault in `VM_L2_PROTECTION_FAULT_STATUS` and `…_ADDR_LO32/HI32` (page
    /// address >> 12). The first fault stays until the driver clears the status
    /// (`VM_L2_PROTECTION_FAULT_CNTL.CLEAR_PROTECTION_FAULT_STATUS_ADDR` or a write of 0);
    /// later ones only set `MORE_FAULTS`. `PERMISSION_FAULTS` has bit 0 for a missing
    /// `VALID`, bits 1/2/3 for missing read/write/execute; `MAPPING_ERROR` is set for an
    /// invalid entry, a VA outside the context or a table not yet invalidated;
    /// `WALKER_ERROR` for an entry pointing outside VRAM or to a hive member that is not
    /// there.
    pub fn latch_fault(
        hw: &mut Hw<'_>,
        hub: Hub,
        vmid: u8,
        f: &PageFault,
        access: Access,
        client: u32,
    ) -> Result<(), Fault> {
        let (id, old) = get_reg(hw, hub, fault_status_name(hw, hub))?;
        let set = |v: u32, name: &str, val: u32| match field(hw, id, name) {
            Some(fl) => fl.set(v, val),
            None => v,
        };
        if old != 0 {
            let v = set(old, "MORE_FAULTS", 1);
            hw.regs.set(id, v);
            return Ok(());
        }
        let perm = match (f.kind, access) {
            (FaultKind::Invalid, _) => 1,
            (FaultKind::Permission, Access::Read) => 2,
            (FaultKind::Permission, Access::Write) => 4,
            (FaultKind::Permission, Access::Execute) => 8,
            _ => 0,
        };
        let mapping = matches!(
            f.kind,
            FaultKind::Invalid | FaultKind::OutOfRange | FaultKind::Stale
        );
        let mut v = set(0, "PERMISSION_FAULTS", perm);
        v = set(v, "MAPPING_ERROR", u32::from(mapping));
        v = set(
            v,
            "WALKER_ERROR",
            u32::from(matches!(
                f.kind,
                FaultKind::BadAddress | FaultKind::NoMember
            )),
        );
        v = set(v, "RW", u32::from(access == Access::Write));
        v = set(v, "VMID", u32::from(vmid));
        v = set(v, "CID", client);
        hw.regs.set(id, v);
        let (lo, _) = get_reg(hw, hub, "VM_L2_PROTECTION_FAULT_ADDR_LO32")?;
        hw.regs.set(lo, (f.va >> 12) as u32);
        let (hi, _) = get_reg(hw, hub, "VM_L2_PROTECTION_FAULT_ADDR_HI32")?;
        hw.regs.set(hi, ((f.va >> 44) & 0xf) as u32);
        Ok(())
    }

    /// Whether `VM_CONTEXTn_CNTL` asks for an interrupt on this fault: `RANGE_` for a VA
    /// outside the context, `VALID_` for an invalid PTE (or a stale table), `PDE0_` for an
    /// invalid or bad directory entry, `READ_`/`WRITE_`/`EXECUTE_` for a permission fault
    /// (`…_PROTECTION_FAULT_ENABLE_INTERRUPT`).
    pub fn fault_interrupt_enabled(
        hw: &Hw<'_>,
        hub: Hub,
        vmid: u8,
        f: &PageFault,
        access: Access,
    ) -> bool {
        let kind = match (f.kind, access) {
            (FaultKind::OutOfRange, _) => "RANGE",
            (FaultKind::Invalid | FaultKind::Stale, _) if f.shift == 12 => "VALID",
            (
                FaultKind::Invalid | FaultKind::Stale | FaultKind::BadAddress | FaultKind::NoMember,
                _,
            ) => "PDE0",
            (FaultKind::Permission, Access::Read) => "READ",
            (FaultKind::Permission, Access::Write) => "WRITE",
            (FaultKind::Permission, Access::Execute) => "EXECUTE",
        };
        get_field(
            hw,
            hub,
            &format!("VM_CONTEXT{vmid}_CNTL"),
            &format!("{kind}_PROTECTION_FAULT_ENABLE_INTERRUPT"),
        )
        .is_ok_and(|v| v != 0)
    }

    /// Resolve an MC address of `hub` for an engine: the FB aperture, the AGP aperture, else
    /// VM context 0 (the GART).
    pub fn resolve_mc(
        &self,
        hw: &mut Hw<'_>,
        hub: Hub,
        mc: u64,
        access: Access,
    ) -> Result<PhysTarget, Fault> {
        if let Some(v) = fb_aperture(hw, hub, mc) {
            return Ok(PhysTarget::Vram(v));
        }
        if let Some(bus) = agp_aperture(hw, hub, mc) {
            return Ok(PhysTarget::System(bus));
        }
        match self.translate(hw, hub, 0, mc, access, 0)? {
            Ok(t) => Ok(t.target),
            Err(f) => Err(Fault::new(format!(
                "MC address {mc:#x} is outside the FB aperture and faults in VM context 0 of {hub:?} ({:?} at {})",
                f.kind,
                f.level_name()
            ))),
        }
    }

    fn hub_of(reg: &Reg<'_>) -> Hub {
        Hub {
            ip: reg.info.table,
            instance: reg.info.instance,
        }
    }
}

impl IpModel for Gmc {
    fn read(&mut self, hw: &mut Hw<'_>, reg: Reg<'_>) -> Result<u32, Fault> {
        if base_name(reg.name()) == "VM_INVALIDATE_ENG17_SEM" {
            let st = self.hubs.entry(Self::hub_of(&reg)).or_default();
            let got = !st.sem_held;
            st.sem_held = true;
            let v = u32::from(got);
            hw.regs.set(reg.id, v);
            return Ok(v);
        }
        Ok(hw.regs.get(reg.id))
    }

    fn write(&mut self, hw: &mut Hw<'_>, reg: Reg<'_>, value: u32) -> Result<(), Fault> {
        let hub = Self::hub_of(&reg);
        let name = base_name(reg.name());
        if XGMI_LFB.contains(&name) {
            // Linux (gfxhub_v1_1_get_xgmi_info) and tinygrad only read the layout; no source
            // says what a write does, so it does not land.
            hw.warn(format!(
                "{}: firmware programs the XGMI hive layout; the write is dropped",
                reg.name()
            ));
            return Ok(());
        }
        match name {
            "VM_INVALIDATE_ENG17_SEM" => {
                if value & 1 == 0 {
                    self.hubs.entry(hub).or_default().sem_held = false;
                }
                hw.regs.set(reg.id, value);
            }
            "VM_INVALIDATE_ENG17_REQ" => {
                hw.regs.set(reg.id, value);
                let req = field(hw, reg.id, "PER_VMID_INVALIDATE_REQ")
                    .ok_or_else(|| Fault::new("no PER_VMID_INVALIDATE_REQ field"))?;
                let vmids = req.get(value);
                let generation = hw.vram.snapshot();
                let st = self.hubs.entry(hub).or_default();
                for (vmid, slot) in st.flushed.iter_mut().enumerate() {
                    if vmids & (1 << vmid) != 0 {
                        *slot = Some(generation);
                    }
                }
                // The new snapshot's tables keep their version from now on, read or not.
                for vmid in (0..16u8).filter(|v| vmids & (1 << v) != 0) {
                    if let Ok(Some(ctx)) = self.context(hw, hub, vmid) {
                        walker::watch_tables(&ctx, hw.vram);
                    }
                }
                let (ack, old) = get_reg(hw, hub, "VM_INVALIDATE_ENG17_ACK")?;
                let f = field(hw, ack, "PER_VMID_INVALIDATE_ACK")
                    .ok_or_else(|| Fault::new("no PER_VMID_INVALIDATE_ACK field"))?;
                hw.regs.set(ack, f.set(old, f.get(old) | vmids));
            }
            "VM_L2_PROTECTION_FAULT_CNTL" => {
                hw.regs.set(reg.id, value);
                if field(hw, reg.id, "CLEAR_PROTECTION_FAULT_STATUS_ADDR")
                    .is_some_and(|f| f.get(value) != 0)
                {
                    let (st, _) = get_reg(hw, hub, fault_status_name(hw, hub))?;
                    hw.regs.set(st, 0);
                }
            }
            _ => hw.regs.set(reg.id, value),
        }
        Ok(())
    }

    fn reset(&mut self, _kind: ResetKind) {
        self.hubs.clear();
    }
}

impl crate::MockGpu {
    /// Test hook standing in for a client of `hub` (a shader, the CP, SDMA): access `va`
    /// of `vmid`. A fault latches the hub's L2 protection-fault registers and, if the
    /// context enables the interrupt of that fault kind, posts the page-fault IH entry to
    /// ring 0 (client `client` goes in the status `CID` field).
    /// The outer error is a model failure (registers missing, the IH ring unreachable),
    /// also recorded as a violation.
    pub fn gpu_access(
        &self,
        hub: Hub,
        vmid: u8,
        va: u64,
        access: Access,
        client: u32,
    ) -> Result<Result<walker::Translation, PageFault>, Fault> {
        let r = self.with_models(|m, hw| {
            let r = match m.gmc.view(hw, hub, vmid)?.context {
                Some(ctx) => walker::translate(&ctx, hw.vram, va, access),
                None => Err(PageFault {
                    va,
                    kind: FaultKind::Invalid,
                    shift: 39,
                    entry: 0,
                }),
            };
            if let Err(f) = &r {
                Gmc::report_fault(m, hw, hub, vmid, f, access, client)?;
            }
            Ok(r)
        });
        if let Err(f) = &r {
            self.record_engine_fault("GMC", f);
        }
        r
    }

    /// Test hook: a page fault at `va` on `hub` without a walk (as if the walker had found
    /// an invalid PTE): latch the status registers and post the IH entry, whatever the
    /// context's interrupt enables say.
    pub fn inject_page_fault(
        &self,
        hub: Hub,
        vmid: u8,
        va: u64,
        access: Access,
    ) -> Result<(), Fault> {
        let f = PageFault {
            va,
            kind: FaultKind::Invalid,
            shift: 12,
            entry: 0,
        };
        let r = self.with_models(|m, hw| {
            let super::Models { gmc, ih, .. } = m;
            Gmc::latch_fault(hw, hub, vmid, &f, access, 0)?;
            let entry = fault_ih_entry(hw, hub, vmid, &f, access);
            ih.post(hw, gmc, 0, entry).map(|_| ())
        });
        if let Err(f) = &r {
            self.record_engine_fault("GMC", f);
        }
        r
    }
}
