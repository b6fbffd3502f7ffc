//! GMC: the MM and GC hubs (apertures, L2 and L1 TLB controls, VM context 0), TLB flushes
//! and the protection-fault registers.
//!
//! Register names differ by generation: GC 11 calls the GC hub's registers `GCVM_…` /
//! `GCMC_VM_…` and MMHUB 3.0 `MMVM_…` / `MMMC_VM_…`, while GC 9.4.3 and MMHUB 1.8 use
//! plain `VM_…` / `MC_VM_…` in each block's own table. Registers are therefore named here
//! by their hub-relative name and resolved with the hub's prefix first.

use std::sync::atomic::{AtomicBool, Ordering};

use am_autogen::regs::RegIp;

use crate::Result;
use crate::ctx::Ctx;
use crate::hwip::HwIp;
use crate::ip::soc::Soc;
use crate::mm::{MTYPE_UC, PAGE_SIZE, Pool, PteFormat};
use crate::regs::{Reg, Register};

/// Last GPU virtual address of VM context 0 (47-bit canonical user range).
const VM_END: u64 = 0x7fff_ffff_ffff;

/// A GPU memory hub.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hub {
    /// MMHUB instance (one per AID on MI300).
    Mm(u8),
    /// GC hub of an XCC.
    Gc(u8),
}

impl Hub {
    fn family(self) -> RegIp {
        match self {
            Hub::Mm(_) => RegIp::Mmhub,
            Hub::Gc(_) => RegIp::Gc,
        }
    }
    fn prefix(self) -> &'static str {
        match self {
            Hub::Mm(_) => "MM",
            Hub::Gc(_) => "GC",
        }
    }
    /// Register instance.
    pub fn instance(self) -> u8 {
        match self {
            Hub::Mm(i) | Hub::Gc(i) => i,
        }
    }
}

impl std::fmt::Display for Hub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Hub::Mm(i) => write!(f, "MMHUB{i}"),
            Hub::Gc(i) => write!(f, "GC hub of XCC{i}"),
        }
    }
}

/// A page fault as the L2 protection-fault registers report it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VmFault {
    /// The hub that faulted.
    pub hub: Hub,
    /// Faulting virtual address (page-aligned).
    pub va: u64,
    /// Raw `L2_PROTECTION_FAULT_STATUS`.
    pub status: u32,
    /// Its non-zero fields by name (`VMID`, `RW`, `PERMISSION_FAULTS`, `CID`, …).
    pub fields: Vec<(&'static str, u32)>,
}

impl std::fmt::Display for VmFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "page fault at VA {:#x} on the {} (status {:#x}",
            self.va, self.hub, self.status
        )?;
        for (n, v) in &self.fields {
            write!(f, " {n}={v:#x}")?;
        }
        write!(f, ")")
    }
}

/// GMC state: the pages the hubs point at, and which hubs are programmed.
#[derive(Debug)]
pub struct Gmc {
    /// Physical address of the page the system aperture's default address points at.
    memscratch: u64,
    /// Physical address of the page faulting accesses are redirected to.
    dummy_page: u64,
    /// MM hubs stay valid across a warm boot (SOC/GMC are not re-initialised then).
    gc_ready: AtomicBool,
    mm_instances: Vec<u8>,
    /// Invalidation engine 17 of every hub, MM hubs first, resolved once: a TLB flush
    /// follows every mapping change.
    engines: Vec<InvalidationEngine>,
}

/// The registers of one hub's invalidation engine 17, and its request without the vmid.
#[derive(Debug)]
struct InvalidationEngine {
    hub: Hub,
    sem: Reg,
    req: Reg,
    ack: Reg,
    /// `VM_L2_BANK_SELECT_RESERVED_CID2` of an MM hub on GC ≥ 11 (private invalidation).
    cid2: Option<Reg>,
    /// Every invalidate bit, `PER_VMID_INVALIDATE_REQ` clear.
    req_flags: u32,
    /// `PER_VMID_INVALIDATE_REQ` for vmid 0 (shifted left by the vmid).
    req_vmid0: u32,
}

impl InvalidationEngine {
    fn new(ctx: &Ctx, hub: Hub) -> Result<Self> {
        let reg = |name| hub_reg(ctx, hub, name).map(|r| r.def().reg());
        let req = hub_reg(ctx, hub, "VM_INVALIDATE_ENG17_REQ")?;
        let cid2 = (matches!(hub, Hub::Mm(_)) && ctx.gc_major() >= 11)
            .then(|| reg("VM_L2_BANK_SELECT_RESERVED_CID2"))
            .transpose()?;
        Ok(InvalidationEngine {
            hub,
            sem: reg("VM_INVALIDATE_ENG17_SEM")?,
            req: req.def().reg(),
            ack: reg("VM_INVALIDATE_ENG17_ACK")?,
            cid2,
            req_flags: req.encode(&[
                ("FLUSH_TYPE", 0),
                ("INVALIDATE_L2_PTES", 1),
                ("INVALIDATE_L2_PDE0", 1),
                ("INVALIDATE_L2_PDE1", 1),
                ("INVALIDATE_L2_PDE2", 1),
                ("INVALIDATE_L1_PTES", 1),
                ("CLEAR_PROTECTION_FAULT_STATUS_ADDR", 0),
            ])?,
            req_vmid0: req.encode(&[("PER_VMID_INVALIDATE_REQ", 1)])?,
        })
    }
}

/// A hub register by hub-relative name (`VM_L2_CNTL`, `MC_VM_AGP_BASE`): the prefixed
/// name first (`GCVM_L2_CNTL`), then the plain one.
pub fn hub_reg<'a>(ctx: &'a Ctx, hub: Hub, name: &str) -> Result<Register<'a>> {
    let prefixed = format!("{}{name}", hub.prefix());
    ctx.regs
        .named(hub.family(), &prefixed)
        .or_else(|_| ctx.regs.named(hub.family(), name))
}

/// Write a 64-bit value to a `<name><lo>`/`<name><hi>` register pair.
fn write_pair(ctx: &Ctx, hub: Hub, name: &str, sfx: (&str, &str), value: u64) -> Result<()> {
    let i = hub.instance();
    hub_reg(ctx, hub, &format!("{name}{}", sfx.0))?.write(i, value as u32)?;
    hub_reg(ctx, hub, &format!("{name}{}", sfx.1))?.write(i, (value >> 32) as u32)
}

const LO_HI: (&str, &str) = ("_LO32", "_HI32");

impl Gmc {
    /// Allocate the scratch and dummy pages (boot pool: a warm boot finds them again).
    pub fn init_sw(ctx: &Ctx) -> Result<Self> {
        let mm_instances: Vec<u8> = ctx.regs.instances(HwIp::MMHUB).into_iter().collect();
        let hubs = mm_instances
            .iter()
            .map(|&i| Hub::Mm(i))
            .chain(ctx.xccs().into_iter().map(Hub::Gc));
        Ok(Gmc {
            memscratch: ctx.palloc(PAGE_SIZE, PAGE_SIZE, Pool::Boot)?,
            dummy_page: ctx.palloc(PAGE_SIZE, PAGE_SIZE, Pool::Boot)?,
            gc_ready: AtomicBool::new(false),
            engines: hubs
                .map(|h| InvalidationEngine::new(ctx, h))
                .collect::<Result<_>>()?,
            mm_instances,
        })
    }

    /// Program every MM hub instance.
    pub fn init_hw(&mut self, ctx: &Ctx, _soc: &Soc) -> Result<()> {
        for &i in &self.mm_instances {
            self.init_hub(ctx, Hub::Mm(i))?;
        }
        Ok(())
    }

    /// Program the GC hub of every XCC (called by GFX).
    pub fn init_gc_hubs(&self, ctx: &Ctx) -> Result<()> {
        for x in ctx.xccs() {
            self.init_hub(ctx, Hub::Gc(x))?;
        }
        self.gc_ready.store(true, Ordering::Release);
        Ok(())
    }

    fn init_hub(&self, ctx: &Ctx, hub: Hub) -> Result<()> {
        let i = hub.instance();
        let r = |name: &str| hub_reg(ctx, hub, name);
        let gc9 = ctx.gc_major() < 10;
        let format = PteFormat::for_gc(ctx.gc_major());
        let xgmi = |paddr: u64| paddr + ctx.mc.xgmi_paddr_base;

        // AGP off (bottom above top), system aperture = the FB range.
        r("MC_VM_AGP_BASE")?.write(i, 0)?;
        r("MC_VM_AGP_BOT")?.write(i, (0xffff_ffff_ffff_u64 >> 24) as u32)?;
        r("MC_VM_AGP_TOP")?.write(i, 0)?;
        r("MC_VM_SYSTEM_APERTURE_LOW_ADDR")?.write(i, (ctx.mc.fb_base >> 18) as u32)?;
        r("MC_VM_SYSTEM_APERTURE_HIGH_ADDR")?.write(i, (ctx.mc.fb_top >> 18) as u32)?;
        write_pair(
            ctx,
            hub,
            "MC_VM_SYSTEM_APERTURE_DEFAULT_ADDR",
            ("_LSB", "_MSB"),
            xgmi(self.memscratch) >> 12,
        )?;
        write_pair(
            ctx,
            hub,
            "VM_L2_PROTECTION_FAULT_DEFAULT_ADDR",
            LO_HI,
            xgmi(self.dummy_page) >> 12,
        )?;
        r("VM_L2_PROTECTION_FAULT_CNTL2")?
            .update(i, &[("ACTIVE_PAGE_MIGRATION_PTE_READ_RETRY", 1)])?;

        // L1 TLB and L2 cache.
        r("MC_VM_MX_L1_TLB_CNTL")?.update(
            i,
            &[
                ("ENABLE_L1_TLB", 1),
                ("SYSTEM_ACCESS_MODE", 3),
                ("ENABLE_ADVANCED_DRIVER_MODEL", 1),
                ("SYSTEM_APERTURE_UNMAPPED_ACCESS", 0),
                ("MTYPE", u64::from(MTYPE_UC)),
            ],
        )?;
        r("VM_L2_CNTL")?.update(
            i,
            &[
                ("ENABLE_L2_CACHE", 1),
                ("ENABLE_DEFAULT_PAGE_OUT_TO_SYSTEM_MEMORY", 1),
                ("L2_PDE0_CACHE_TAG_GENERATION_MODE", 0),
                ("PDE_FAULT_CLASSIFICATION", 0),
                ("CONTEXT1_IDENTITY_ACCESS_MODE", 1),
                ("IDENTITY_MODE_FRAGMENT_SIZE", 0),
                ("ENABLE_L2_FRAGMENT_PROCESSING", u64::from(gc9)),
            ],
        )?;
        r("VM_L2_CNTL2")?.update(
            i,
            &[("INVALIDATE_ALL_L1_TLBS", 1), ("INVALIDATE_L2_CACHE", 1)],
        )?;
        r("VM_L2_CNTL3")?.write_fields(
            i,
            &[
                ("L2_CACHE_4K_ASSOCIATIVITY", 1),
                ("L2_CACHE_BIGK_ASSOCIATIVITY", 1),
                ("BANK_SELECT", if gc9 { 12 } else { 9 }),
                ("L2_CACHE_BIGK_FRAGMENT_SIZE", if gc9 { 9 } else { 6 }),
            ],
        )?;
        r("VM_L2_CNTL4")?.write_fields(i, &[("L2_CACHE_4K_PARTITION_COUNT", 1)])?;
        if !gc9 {
            r("VM_L2_CNTL5")?.write_fields(i, &[("WALKER_PRIORITY_CLIENT_ID", 0x1ff)])?;
        }

        // VM context 0: the driver's page tables.
        let (root, va_base) = {
            let mm = ctx.mm();
            (mm.tables.root, mm.tables.va_base)
        };
        write_pair(
            ctx,
            hub,
            "VM_CONTEXT0_PAGE_TABLE_START_ADDR",
            LO_HI,
            va_base >> 12,
        )?;
        write_pair(
            ctx,
            hub,
            "VM_CONTEXT0_PAGE_TABLE_END_ADDR",
            LO_HI,
            VM_END >> 12,
        )?;
        write_pair(
            ctx,
            hub,
            "VM_CONTEXT0_PAGE_TABLE_BASE_ADDR",
            LO_HI,
            xgmi(root) | 1,
        )?;
        let cntl = r("VM_CONTEXT0_CNTL")?;
        let mut fields: Vec<(String, u64)> = [
            "PDE0",
            "DUMMY_PAGE",
            "RANGE",
            "VALID",
            "READ",
            "WRITE",
            "EXECUTE",
        ]
        .iter()
        .flat_map(|k| {
            [
                (format!("{k}_PROTECTION_FAULT_ENABLE_INTERRUPT"), 1),
                (format!("{k}_PROTECTION_FAULT_ENABLE_DEFAULT"), 1),
            ]
        })
        .collect();
        fields.push(("ENABLE_CONTEXT".into(), 1));
        fields.push((
            "PAGE_TABLE_DEPTH".into(),
            u64::from(format.page_table_depth()),
        ));
        fields.push((
            "PAGE_TABLE_BLOCK_SIZE".into(),
            u64::from(format.page_table_block_size()),
        ));
        let fields: Vec<(&str, u64)> = fields.iter().map(|(n, v)| (n.as_str(), *v)).collect();
        cntl.write(i, 0x0180_0000 | cntl.encode(&fields)?)?;

        // Identity aperture off, every invalidation engine covering the whole range.
        write_pair(
            ctx,
            hub,
            "VM_L2_CONTEXT1_IDENTITY_APERTURE_LOW_ADDR",
            LO_HI,
            0xf_ffff_ffff,
        )?;
        write_pair(
            ctx,
            hub,
            "VM_L2_CONTEXT1_IDENTITY_APERTURE_HIGH_ADDR",
            LO_HI,
            0,
        )?;
        write_pair(ctx, hub, "VM_L2_CONTEXT_IDENTITY_PHYSICAL_OFFSET", LO_HI, 0)?;
        for eng in 0..18 {
            write_pair(
                ctx,
                hub,
                &format!("VM_INVALIDATE_ENG{eng}_ADDR_RANGE"),
                LO_HI,
                0x1f_ffff_ffff,
            )?;
        }
        Ok(())
    }

    /// HDP flush, then invalidate `vmid` with engine 17 on every MM hub and (once GFX has
    /// programmed them) every GC hub.
    pub fn flush_tlb(&self, ctx: &Ctx, soc: &Soc, vmid: u8) -> Result<()> {
        soc.hdp_flush(ctx)?;
        let gc_ready = self.gc_ready.load(Ordering::Acquire);
        for e in &self.engines {
            if matches!(e.hub, Hub::Mm(_)) || gc_ready {
                self.invalidate(ctx, e, vmid)?;
            }
        }
        Ok(())
    }

    fn invalidate(&self, ctx: &Ctx, e: &InvalidationEngine, vmid: u8) -> Result<()> {
        let (hub, i) = (e.hub, e.hub.instance());
        let to = ctx.timeouts.reg;
        let is_mm = matches!(hub, Hub::Mm(_));
        let sem = ctx.regs.reg(e.sem)?;
        if is_mm {
            ctx.poll(
                to,
                format_args!("the TLB invalidation semaphore of the {hub}"),
                || {
                    let v = sem.read(i)?;
                    Ok((v & 1 == 1, v))
                },
            )?;
        }
        ctx.regs
            .reg(e.req)?
            .write(i, e.req_flags | e.req_vmid0 << vmid)?;
        let ack = ctx.regs.reg(e.ack)?;
        let bit = 1u32 << vmid;
        ctx.poll(
            to,
            format_args!("the TLB invalidation ack of vmid {vmid} on the {hub}"),
            || {
                let v = ack.read(i)?;
                Ok((v & bit == bit, v))
            },
        )?;
        if is_mm {
            sem.write(i, 0)?;
            if let Some(cid2) = e.cid2 {
                let r = ctx.regs.reg(cid2)?;
                r.update(i, &[("RESERVED_CACHE_PRIVATE_INVALIDATION", 1)])?;
                // The read-back makes sure the invalidation has landed.
                r.read(i)?;
            }
        }
        Ok(())
    }

    /// Read the protection-fault status of a hub; if a fault is latched, decode it and
    /// clear it.
    pub fn take_fault(&self, ctx: &Ctx, hub: Hub) -> Result<Option<VmFault>> {
        let i = hub.instance();
        let name = if ctx.gc_major() >= 12 {
            "VM_L2_PROTECTION_FAULT_STATUS_LO32"
        } else {
            "VM_L2_PROTECTION_FAULT_STATUS"
        };
        let st = hub_reg(ctx, hub, name)?;
        let status = st.read(i)?;
        if status == 0 {
            return Ok(None);
        }
        let lo = hub_reg(ctx, hub, "VM_L2_PROTECTION_FAULT_ADDR_LO32")?.read(i)?;
        let hi = hub_reg(ctx, hub, "VM_L2_PROTECTION_FAULT_ADDR_HI32")?.read(i)?;
        let va = ((u64::from(hi) << 32) | u64::from(lo)) << 12;
        hub_reg(ctx, hub, "VM_L2_PROTECTION_FAULT_CNTL")?
            .update(i, &[("CLEAR_PROTECTION_FAULT_STATUS_ADDR", 1)])?;
        let fields = st
            .decode(status)
            .into_iter()
            .filter(|(_, v)| *v != 0)
            .collect();
        Ok(Some(VmFault {
            hub,
            va,
            status,
            fields,
        }))
    }
}
