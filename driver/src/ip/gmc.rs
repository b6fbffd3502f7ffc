//! GMC: the MM and GC hubs (apertures, L2 and L1 TLB controls, VM context 0), TLB flushes
//! and the protection-fault registers.
//!
//! GMC owns every hub. It programs the MM hubs in `init_hw`; the GC hub of each XCC only
//! works once the RLC runs, so GFX asks for it ([`Gmc::init_hw`] with `gc`) after the RLC
//! autoload. Register names differ by generation: GC 11 calls the GC hub's registers
//! `GCVM_…` / `GCMC_VM_…` and MMHUB 3.0 `MMVM_…` / `MMMC_VM_…`, while GC 9.4.3 and MMHUB 1.8
//! use plain `VM_…` / `MC_VM_…`; each register is an `alt` list of those names, and a hub
//! takes the one of its IP that the device has ([`Hub::reg`]).

use am_autogen::regs::RegIp;

use super::*;
use crate::mm::{MTYPE_UC, PAGE_SIZE};
use crate::regs::alt::*;

/// A GPU memory hub.
#[derive(Clone, Copy, Debug, PartialEq, Eq, derive_more::Display)]
pub enum Hub {
    /// MMHUB instance (one per AID on MI300).
    #[display("MMHUB{_0}")]
    Mm(u8),
    /// GC hub of an XCC.
    #[display("GC hub of XCC{_0}")]
    Gc(u8),
}

impl Hub {
    /// Register instance.
    pub fn instance(self) -> u8 {
        match self {
            Hub::Mm(i) | Hub::Gc(i) => i,
        }
    }

    /// This hub's register among `alts`: its IP's, under the name the device's version uses.
    fn reg<F>(self, ctx: &Ctx, alts: &[Reg<F>]) -> Result<Reg<F>> {
        let ip = match self {
            Hub::Mm(_) => RegIp::Mmhub,
            Hub::Gc(_) => RegIp::Gc,
        };
        ctx.regs
            .first(alts.iter().copied().filter(|r| r.ip() == ip))
    }

    fn addr<F>(self, ctx: &Ctx, alts: &[Reg<F>]) -> Result<u64> {
        ctx.regs.reg(self.reg(ctx, alts)?)?.addr(self.instance())
    }

    /// The L2 protection-fault status register: GC 12 and MMHUB 4.1 split it into
    /// `_LO32`/`_HI32`, and the low half holds the fields of the older single register.
    pub fn fault_status(self, ctx: &Ctx) -> Result<Reg> {
        Ok(if ctx.gc_major() >= 12 {
            self.reg(ctx, &VM_L2_PROTECTION_FAULT_STATUS_LO32)?
                .untyped()
        } else {
            self.reg(ctx, &VM_L2_PROTECTION_FAULT_STATUS)?.untyped()
        })
    }

    /// Write a 64-bit value to a `LO32`/`HI32` (or `LSB`/`MSB`) pair, named by its low half.
    fn wreg64<F>(self, ctx: &Ctx, lo: &[Reg<F>], v: u64) -> Result<()> {
        wreg64(ctx, self.addr(ctx, lo)?, v)
    }
}

/// Write a 64-bit value at `addr` and `addr + 1`: the high half of every hub register pair is
/// the dword after the low half, in every table (`autogen/tests/integration/regs.rs` checks).
fn wreg64(ctx: &Ctx, addr: u64, v: u64) -> Result<()> {
    ctx.regs.wreg(addr, lo32(v))?;
    ctx.regs.wreg(addr + 1, hi32(v))
}

/// A page fault as the L2 protection-fault registers report it.
#[derive(Clone, Debug, PartialEq, Eq, derive_more::Display)]
#[display(
    "page fault at VA {va:#x} on the {hub} (status {status:#x}{})",
    fields.iter().map(|(n, v)| format!(" {n}={v:#x}")).collect::<String>()
)]
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

/// GMC state: the pages the hubs point at, and which hubs are programmed.
#[derive(Debug)]
pub struct Gmc {
    /// Physical address of the page the system aperture's default address points at.
    memscratch: u64,
    /// Physical address of the page faulting accesses are redirected to.
    dummy_page: u64,
    /// Whether the GC hubs are programmed (TLB flushes skip them until then).
    gc_ready: bool,
    /// Invalidation engine 17 of every hub, MM hubs first, resolved once: a TLB flush
    /// follows every mapping change.
    engines: Vec<InvalidationEngine>,
}

/// The registers of one hub's invalidation engine 17, and its request.
#[derive(Debug)]
struct InvalidationEngine {
    hub: Hub,
    sem: Reg<fields::VM_INVALIDATE_ENG17_SEM>,
    req: Reg<fields::VM_INVALIDATE_ENG17_REQ>,
    ack: Reg<fields::VM_INVALIDATE_ENG17_ACK>,
    /// `VM_L2_BANK_SELECT_RESERVED_CID2` of an MM hub on GC ≥ 11 (private invalidation).
    cid2: Option<Reg<fields::VM_L2_BANK_SELECT_RESERVED_CID2>>,
    /// Every invalidate bit, for VM context 0 (the only one this driver programs).
    request: u32,
}

impl Gmc {
    /// Allocate the scratch and dummy pages (boot pool: a warm boot finds them again).
    pub fn init_sw(ctx: &Ctx) -> Result<Self> {
        Ok(Gmc {
            memscratch: ctx.palloc(PAGE_SIZE, PAGE_SIZE, Pool::Boot)?,
            dummy_page: ctx.palloc(PAGE_SIZE, PAGE_SIZE, Pool::Boot)?,
            gc_ready: false,
            engines: (ctx.regs.instances(HwIp::MMHUB).into_iter().map(Hub::Mm))
                .chain(ctx.xccs().into_iter().map(Hub::Gc))
                .map(|hub| {
                    let req = hub.reg(ctx, &VM_INVALIDATE_ENG17_REQ)?;
                    Ok(InvalidationEngine {
                        hub,
                        sem: hub.reg(ctx, &VM_INVALIDATE_ENG17_SEM)?,
                        req,
                        ack: hub.reg(ctx, &VM_INVALIDATE_ENG17_ACK)?,
                        cid2: (matches!(hub, Hub::Mm(_)) && ctx.gc_major() >= 11)
                            .then(|| hub.reg(ctx, &VM_L2_BANK_SELECT_RESERVED_CID2))
                            .transpose()?,
                        request: ctx.encode(req, |f| {
                            f.per_vmid_invalidate_req(1)
                                .flush_type(0)
                                .invalidate_l2_ptes(1)
                                .invalidate_l2_pde0(1)
                                .invalidate_l2_pde1(1)
                                .invalidate_l2_pde2(1)
                                .invalidate_l1_ptes(1)
                                .clear_protection_fault_status_addr(0)
                        })?,
                    })
                })
                .collect::<Result<_>>()?,
        })
    }

    /// Program every MM hub instance, or with `gc` the GC hub of every XCC (GFX asks for
    /// these once the RLC runs); TLB flushes include the GC hubs from then on.
    pub fn init_hw(&mut self, ctx: &Ctx, gc: bool) -> Result<()> {
        for e in &self.engines {
            if matches!(e.hub, Hub::Gc(_)) == gc {
                self.init_hub(ctx, e.hub)?;
            }
        }
        self.gc_ready |= gc;
        Ok(())
    }

    fn init_hub(&self, ctx: &Ctx, hub: Hub) -> Result<()> {
        let (gc9, i) = (ctx.gc_major() < 10, hub.instance());
        let tables = ctx.mm().tables;
        let xgmi = |paddr: u64| paddr + ctx.mc.xgmi_paddr_base;

        // AGP off (bottom: the last 16 MiB unit of the 48-bit space, above top), system
        // aperture = the FB range.
        ctx.wreg(hub.reg(ctx, &MC_VM_AGP_BASE)?, i, 0)?;
        ctx.wreg(hub.reg(ctx, &MC_VM_AGP_BOT)?, i, 0xff_ffff)?;
        ctx.wreg(hub.reg(ctx, &MC_VM_AGP_TOP)?, i, 0)?;
        ctx.wreg(
            hub.reg(ctx, &MC_VM_SYSTEM_APERTURE_LOW_ADDR)?,
            i,
            (ctx.mc.fb_base >> 18) as u32,
        )?;
        ctx.wreg(
            hub.reg(ctx, &MC_VM_SYSTEM_APERTURE_HIGH_ADDR)?,
            i,
            (ctx.mc.fb_top >> 18) as u32,
        )?;
        hub.wreg64(
            ctx,
            &MC_VM_SYSTEM_APERTURE_DEFAULT_ADDR_LSB,
            xgmi(self.memscratch) >> 12,
        )?;
        hub.wreg64(
            ctx,
            &VM_L2_PROTECTION_FAULT_DEFAULT_ADDR_LO32,
            xgmi(self.dummy_page) >> 12,
        )?;
        ctx.update(hub.reg(ctx, &VM_L2_PROTECTION_FAULT_CNTL2)?, i, |f| {
            f.active_page_migration_pte_read_retry(1)
        })?;

        // L1 TLB and L2 cache.
        ctx.update(hub.reg(ctx, &MC_VM_MX_L1_TLB_CNTL)?, i, |f| {
            f.enable_l1_tlb(1)
                .system_access_mode(3)
                .enable_advanced_driver_model(1)
                .system_aperture_unmapped_access(0)
                .mtype(MTYPE_UC.into())
        })?;
        ctx.update(hub.reg(ctx, &VM_L2_CNTL)?, i, |f| {
            f.enable_l2_cache(1)
                .enable_default_page_out_to_system_memory(1)
                .l2_pde0_cache_tag_generation_mode(0)
                .pde_fault_classification(0)
                .context1_identity_access_mode(1)
                .identity_mode_fragment_size(0)
                .enable_l2_fragment_processing(gc9.into())
        })?;
        ctx.update(hub.reg(ctx, &VM_L2_CNTL2)?, i, |f| {
            f.invalidate_all_l1_tlbs(1).invalidate_l2_cache(1)
        })?;
        ctx.write(hub.reg(ctx, &VM_L2_CNTL3)?, i, |f| {
            f.l2_cache_4k_associativity(1)
                .l2_cache_bigk_associativity(1)
                .bank_select(if gc9 { 12 } else { 9 })
                .l2_cache_bigk_fragment_size(if gc9 { 9 } else { 6 })
        })?;
        ctx.write(hub.reg(ctx, &VM_L2_CNTL4)?, i, |f| {
            f.l2_cache_4k_partition_count(1)
        })?;
        if !gc9 {
            ctx.write(hub.reg(ctx, &VM_L2_CNTL5)?, i, |f| {
                f.walker_priority_client_id(0x1ff)
            })?;
        }

        // VM context 0: the driver's page tables.
        hub.wreg64(
            ctx,
            &VM_CONTEXT0_PAGE_TABLE_START_ADDR_LO32,
            tables.va_base >> 12,
        )?;
        // The last page of the 47-bit canonical user range.
        hub.wreg64(ctx, &VM_CONTEXT0_PAGE_TABLE_END_ADDR_LO32, 0x7_ffff_ffff)?;
        hub.wreg64(
            ctx,
            &VM_CONTEXT0_PAGE_TABLE_BASE_ADDR_LO32,
            xgmi(tables.root) | 1,
        )?;
        let cntl = hub.reg(ctx, &VM_CONTEXT0_CNTL)?;
        let faults = ctx.encode(cntl, |f| {
            f.enable_context(1)
                .page_table_depth(tables.format.page_table_depth())
                .page_table_block_size(tables.format.page_table_block_size())
                .pde0_protection_fault_enable_interrupt(1)
                .pde0_protection_fault_enable_default(1)
                .dummy_page_protection_fault_enable_interrupt(1)
                .dummy_page_protection_fault_enable_default(1)
                .range_protection_fault_enable_interrupt(1)
                .range_protection_fault_enable_default(1)
                .valid_protection_fault_enable_interrupt(1)
                .valid_protection_fault_enable_default(1)
                .read_protection_fault_enable_interrupt(1)
                .read_protection_fault_enable_default(1)
                .write_protection_fault_enable_interrupt(1)
                .write_protection_fault_enable_default(1)
                .execute_protection_fault_enable_interrupt(1)
                .execute_protection_fault_enable_default(1)
        })?;
        ctx.wreg(cntl, i, 0x0180_0000 | faults)?;

        // Identity aperture off, every invalidation engine covering the whole range.
        hub.wreg64(
            ctx,
            &VM_L2_CONTEXT1_IDENTITY_APERTURE_LOW_ADDR_LO32,
            0xf_ffff_ffff,
        )?;
        hub.wreg64(ctx, &VM_L2_CONTEXT1_IDENTITY_APERTURE_HIGH_ADDR_LO32, 0)?;
        hub.wreg64(ctx, &VM_L2_CONTEXT_IDENTITY_PHYSICAL_OFFSET_LO32, 0)?;
        // The 18 engines' range registers are an array (engine n at ENG0 + 2n dwords).
        let eng0 = hub.addr(ctx, &VM_INVALIDATE_ENG0_ADDR_RANGE_LO32)?;
        for eng in 0..18 {
            wreg64(ctx, eng0 + 2 * eng, 0x1f_ffff_ffff)?;
        }
        Ok(())
    }

    /// HDP flush, then invalidate VM context 0 with engine 17 on every MM hub and (once GFX has
    /// had them programmed) every GC hub.
    pub fn flush_tlb(&self, ctx: &Ctx, soc: &Soc) -> Result<()> {
        soc.hdp_flush(ctx)?;
        let to = ctx.timeouts.reg;
        for e in &self.engines {
            let (hub, i) = (e.hub, e.hub.instance());
            let is_mm = matches!(hub, Hub::Mm(_));
            if !is_mm && !self.gc_ready {
                continue;
            }
            if is_mm {
                ctx.wait_reg(
                    e.sem,
                    i,
                    1,
                    1,
                    to,
                    format_args!("the TLB invalidation semaphore of the {hub}"),
                )?;
            }
            ctx.wreg(e.req, i, e.request)?;
            ctx.wait_reg(
                e.ack,
                i,
                1,
                1,
                to,
                format_args!("the TLB invalidation ack of VM context 0 on the {hub}"),
            )?;
            if is_mm {
                ctx.wreg(e.sem, i, 0)?;
                if let Some(cid2) = e.cid2 {
                    ctx.update(cid2, i, |f| f.reserved_cache_private_invalidation(1))?;
                    // The read-back makes sure the invalidation has landed.
                    ctx.rreg(cid2, i)?;
                }
            }
        }
        Ok(())
    }

    /// Read the protection-fault status of a hub; if a fault is latched, decode it and
    /// clear it.
    pub fn take_fault(&self, ctx: &Ctx, hub: Hub) -> Result<Option<VmFault>> {
        let i = hub.instance();
        let st = ctx.regs.reg(hub.fault_status(ctx)?)?;
        let status = st.read(i)?;
        if status == 0 {
            return Ok(None);
        }
        let addr = hub.addr(ctx, &VM_L2_PROTECTION_FAULT_ADDR_LO32)?;
        let (lo, hi) = (ctx.regs.rreg(addr)?, ctx.regs.rreg(addr + 1)?);
        ctx.update(hub.reg(ctx, &VM_L2_PROTECTION_FAULT_CNTL)?, i, |f| {
            f.clear_protection_fault_status_addr(1)
        })?;
        Ok(Some(VmFault {
            hub,
            va: u64::from(hi) << 44 | u64::from(lo) << 12,
            status,
            fields: (st.decode(status).into_iter())
                .filter(|f| f.1 != 0)
                .collect(),
        }))
    }
}
