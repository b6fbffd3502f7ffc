//! `am vm DEVICE VA [--vmid N]`: walk the GPU page tables of a VM context the way the hub
//! does, from its registers (`VM_CONTEXTn_CNTL`, `_PAGE_TABLE_BASE_ADDR`, `_START_ADDR`),
//! printing every level's raw entry and what it says; `am vm DEVICE --faults`: the
//! protection-fault status and address of every hub, and the fault entries pending in the
//! IH ring. Reads registers and VRAM only.

use am_autogen::ih as src;
use am_autogen::regs::RegIp;
use am_driver::HwIp;
use am_driver::ip::ih::IhEntry;
use am_driver::mm::{PtEntry, PteFormat, VmLevel};
use am_driver::regs::{Register, osssys};
use anyhow::{Context, bail};
use serde::Serialize;

use crate::inspect::{Phys, Target, parse_u64};
use crate::reg::ByName;

/// Arguments of `am vm`.
#[derive(Debug, clap::Args)]
pub struct VmArgs {
    /// Device: a PCI BDF, mock:PROFILE[:N] or remote:HOST:PORT[:N].
    pub device: String,
    /// GPU virtual address to translate (decimal or 0x hex).
    pub va: Option<String>,
    /// VM context (VMID) whose page tables to walk.
    #[arg(long, default_value_t = 0)]
    pub vmid: u8,
    /// Hub whose context registers to read: `gc` (an XCC's) or `mm` (an MMHUB's).
    #[arg(long, default_value = "gc")]
    pub hub: String,
    /// Hub instance: the XCC for `gc`, the MMHUB (AID) for `mm` (default: the first).
    #[arg(long)]
    pub inst: Option<u8>,
    /// Show the protection-fault registers of every hub and the IH ring's pending faults.
    #[arg(long)]
    pub faults: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// A hub: its register family and instance.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hub {
    /// The GC hub of an XCC.
    Gc(u8),
    /// An MMHUB instance.
    Mm(u8),
}

impl Hub {
    fn family(self) -> RegIp {
        match self {
            Hub::Gc(_) => RegIp::Gc,
            Hub::Mm(_) => RegIp::Mmhub,
        }
    }
    fn instance(self) -> u8 {
        match self {
            Hub::Gc(i) | Hub::Mm(i) => i,
        }
    }
    fn label(self) -> String {
        match self {
            Hub::Gc(i) => format!("GC hub of XCC{i}"),
            Hub::Mm(i) => format!("MMHUB{i}"),
        }
    }
}

/// A hub register by hub-relative name: `GCVM_…`/`MMVM_…` first, then the plain name (GC
/// 9.4.3 and MMHUB 1.8 name them so in their own tables).
pub fn hub_reg<'a>(t: &'a Target, hub: Hub, name: &str) -> anyhow::Result<Register<'a>> {
    let prefix = match hub {
        Hub::Gc(_) => "GC",
        Hub::Mm(_) => "MM",
    };
    t.regs
        .named(hub.family(), &format!("{prefix}{name}"))
        .or_else(|_| t.regs.named(hub.family(), name))
        .with_context(|| format!("{}: {} has no {name}", t.name(), hub.label()))
}

fn read_pair(t: &Target, hub: Hub, name: &str) -> anyhow::Result<u64> {
    let i = hub.instance();
    let lo = hub_reg(t, hub, &format!("{name}_LO32"))?.read(i)?;
    let hi = hub_reg(t, hub, &format!("{name}_HI32"))?.read(i)?;
    Ok(u64::from(hi) << 32 | u64::from(lo))
}

/// A VM context as its registers describe it.
#[derive(Debug, Serialize)]
pub struct VmContext {
    /// Hub name.
    pub hub: String,
    /// VMID.
    pub vmid: u8,
    /// `ENABLE_CONTEXT`.
    pub enabled: bool,
    /// `PAGE_TABLE_DEPTH`.
    pub depth: u32,
    /// `PAGE_TABLE_BLOCK_SIZE`.
    pub block_size: u32,
    /// `PAGE_TABLE_BASE_ADDR` (a PDE: root address and valid bit), hex.
    pub base: String,
    /// First and last virtual address of the context, hex.
    pub va_start: String,
    /// Last virtual address.
    pub va_end: String,
}

/// One level of a walk.
#[derive(Debug, Serialize)]
pub struct Level {
    /// `PDB2`, `PDB1`, `PDB0`, `PTB`.
    pub level: &'static str,
    /// Index of the entry in its table.
    pub index: u64,
    /// VRAM address of the entry, hex.
    pub entry_addr: String,
    /// Raw entry, hex.
    pub raw: String,
    /// `table`, `page` or `invalid`.
    pub kind: &'static str,
    /// Address the entry holds (table or page), hex; absent when invalid.
    pub addr: Option<String>,
    /// Flags the entry carries, by name.
    pub flags: Vec<&'static str>,
    /// `FRAG` of a page.
    pub frag: Option<u8>,
    /// `MTYPE` of a page.
    pub mtype: Option<u8>,
}

/// The outcome of a walk.
#[derive(Debug, Serialize)]
pub struct Walk {
    /// Device name.
    pub device: String,
    /// The address translated, hex.
    pub va: String,
    /// The context walked.
    pub context: VmContext,
    /// Every level visited.
    pub levels: Vec<Level>,
    /// Whether a valid page maps the address.
    pub mapped: bool,
    /// `vram`, `system` or `peer` (another XGMI hive member's VRAM) when mapped.
    pub memory: Option<&'static str>,
    /// VRAM physical address (of this device, or of the member `peer_region`) or system bus
    /// address of the byte, hex.
    pub phys: Option<String>,
    /// The hive region whose VRAM the page is, when it is another member's.
    pub peer_region: Option<u64>,
    /// Size of the page that maps it.
    pub page_size: Option<u64>,
    /// Why the walk stopped, when it did not reach a page.
    pub stopped: Option<String>,
}

fn level_name(l: VmLevel) -> &'static str {
    match l {
        VmLevel::Pdb2 => "PDB2",
        VmLevel::Pdb1 => "PDB1",
        VmLevel::Pdb0 => "PDB0",
        VmLevel::Ptb => "PTB",
    }
}

/// Names of the bits an entry carries (`amdgpu_vm.h`).
fn entry_flags(format: PteFormat, raw: u64) -> Vec<&'static str> {
    use am_autogen::vm::*;
    let mut f = vec![];
    for (bit, name) in [
        (AMDGPU_PTE_VALID, "VALID"),
        (AMDGPU_PTE_SYSTEM, "SYSTEM"),
        (AMDGPU_PTE_SNOOPED, "SNOOPED"),
        (AMDGPU_PTE_EXECUTABLE, "EXECUTABLE"),
        (AMDGPU_PTE_READABLE, "READABLE"),
        (AMDGPU_PTE_WRITEABLE, "WRITEABLE"),
    ] {
        if raw & bit != 0 {
            f.push(name);
        }
    }
    match format {
        PteFormat::Gfx9 => {
            if raw & AMDGPU_PTE_TF != 0 {
                f.push("TF");
            }
            if raw & AMDGPU_PDE_PTE != 0 {
                f.push("PDE_PTE");
            }
            if raw >> 59 != 0 {
                f.push("PDE_BFS");
            }
        }
        PteFormat::Gfx10 => {
            if raw & AMDGPU_PDE_PTE != 0 {
                f.push("PDE_PTE");
            }
        }
        PteFormat::Gfx12 => {
            if raw & AMDGPU_PDE_PTE_GFX12 != 0 {
                f.push("PTE_IS_PTE/PDE_PTE");
            }
        }
    }
    f
}

/// Read a hub's VM context `vmid`.
pub fn context(t: &Target, hub: Hub, vmid: u8) -> anyhow::Result<(VmContext, u64, u64)> {
    let i = hub.instance();
    let cntl = hub_reg(t, hub, &format!("VM_CONTEXT{vmid}_CNTL"))?;
    let c = cntl.read(i)?;
    let field = |n: &str| cntl.field(c, n).unwrap_or(0);
    let base = read_pair(t, hub, &format!("VM_CONTEXT{vmid}_PAGE_TABLE_BASE_ADDR"))?;
    let start = read_pair(t, hub, &format!("VM_CONTEXT{vmid}_PAGE_TABLE_START_ADDR"))? << 12;
    let end = read_pair(t, hub, &format!("VM_CONTEXT{vmid}_PAGE_TABLE_END_ADDR"))? << 12 | 0xfff;
    Ok((
        VmContext {
            hub: hub.label(),
            vmid,
            enabled: field("ENABLE_CONTEXT") != 0,
            depth: field("PAGE_TABLE_DEPTH"),
            block_size: field("PAGE_TABLE_BLOCK_SIZE"),
            base: format!("{base:#x}"),
            va_start: format!("{start:#x}"),
            va_end: format!("{end:#x}"),
        },
        base,
        start,
    ))
}

/// The page-table format of the device's GC.
pub fn format_of(t: &Target) -> PteFormat {
    PteFormat::for_gc(t.discovery.version(HwIp::GC).map_or(0, |v| v.major))
}

/// Translate `va` through `hub`'s context `vmid`.
pub fn walk(t: &Target, hub: Hub, vmid: u8, va: u64) -> anyhow::Result<Walk> {
    let (ctx, base, start) = context(t, hub, vmid)?;
    let format = format_of(t);
    let off = t.mc.xgmi_paddr_base;
    let mut w = Walk {
        device: t.name().to_string(),
        va: format!("{va:#x}"),
        context: ctx,
        levels: vec![],
        mapped: false,
        memory: None,
        phys: None,
        peer_region: None,
        page_size: None,
        stopped: None,
    };
    if !w.context.enabled {
        w.stopped = Some(format!(
            "VM context {vmid} of the {} is not enabled",
            hub.label()
        ));
        return Ok(w);
    }
    if base & 1 == 0 {
        w.stopped = Some("the context's page-table base is not valid (bit 0 clear)".into());
        return Ok(w);
    }
    let Some(rel) = va
        .checked_sub(start)
        .filter(|r| *r < 1 << am_driver::mm::VA_BITS)
    else {
        w.stopped = Some(format!(
            "{va:#x} is outside the context (it starts at {start:#x})"
        ));
        return Ok(w);
    };
    let to_vram = |addr: u64, what: &str| {
        addr.checked_sub(off).with_context(|| {
            format!(
                "{}: {what} address {addr:#x} is below the XGMI offset {off:#x}",
                t.name()
            )
        })
    };
    let mut table = to_vram(base & am_driver::mm::PDE_ADDR_MASK, "root table")?;
    let mut level = VmLevel::Pdb2;
    loop {
        let index = (rel >> level.shift()) & 511;
        let at = table + index * 8;
        let raw = t.vram_u64(at)?;
        let decoded = format.decode(level, raw);
        let mut l = Level {
            level: level_name(level),
            index,
            entry_addr: format!("{at:#x}"),
            raw: format!("{raw:#018x}"),
            kind: "invalid",
            addr: None,
            flags: entry_flags(format, raw),
            frag: None,
            mtype: None,
        };
        match decoded {
            PtEntry::Invalid => {
                w.levels.push(l);
                w.stopped = Some(format!(
                    "the {} entry is not valid: an access faults",
                    level_name(level)
                ));
                return Ok(w);
            }
            PtEntry::Table { addr } => {
                l.kind = "table";
                l.addr = Some(format!("{addr:#x}"));
                w.levels.push(l);
                let Some(child) = level.child() else {
                    bail!("{}: a PTB entry at {at:#x} reads as a table", t.name());
                };
                table = to_vram(addr, "table")?;
                level = child;
            }
            PtEntry::Page(p) => {
                l.kind = "page";
                l.addr = Some(format!("{:#x}", p.addr));
                l.frag = Some(p.frag);
                l.mtype = Some(p.mtype);
                w.levels.push(l);
                let size = level.entry_size();
                let seg = t.mc.xgmi_seg_size;
                // A VRAM-style entry outside this device's hive segment holds another
                // member's hive physical address (how a peer's buffer is mapped).
                let peer =
                    !p.flags.system && seg > 0 && p.addr.checked_sub(off).is_none_or(|a| a >= seg);
                let (mem, a) = if p.flags.system {
                    ("system", p.addr)
                } else if peer {
                    w.peer_region = Some(p.addr / seg);
                    ("peer", p.addr % seg)
                } else {
                    ("vram", to_vram(p.addr, "page")?)
                };
                let a = a + rel % size;
                w.mapped = true;
                w.page_size = Some(size);
                w.memory = Some(mem);
                w.phys = Some(format!("{a:#x}"));
                return Ok(w);
            }
        }
    }
}

/// Translate `va` to a physical address through the context `vmid` of the first GC hub
/// (what the CP uses for rings and IBs); `None` when not mapped.
pub fn translate(t: &Target, vmid: u8, va: u64) -> anyhow::Result<Option<Phys>> {
    let xcc = t.regs.instances(HwIp::GC).first().copied().unwrap_or(0);
    let w = walk(t, Hub::Gc(xcc), vmid, va)?;
    let phys = w.phys.as_deref().map(parse_u64).transpose()?;
    Ok(match (w.memory, phys) {
        (Some("vram"), Some(p)) => Some(Phys::Vram(p)),
        (Some("peer"), Some(p)) => bail!(
            "{}: {va:#x} is VRAM of another XGMI hive member (region {}, address {p:#x}): read it on that device",
            t.name(),
            w.peer_region.unwrap_or_default()
        ),
        (Some(_), Some(p)) => Some(Phys::System(p)),
        _ => None,
    })
}

/// One hub's protection-fault registers.
#[derive(Debug, Serialize)]
pub struct HubFault {
    /// Hub name.
    pub hub: String,
    /// Raw `L2_PROTECTION_FAULT_STATUS`, hex.
    pub status: String,
    /// Its non-zero fields.
    pub fields: Vec<(String, u32)>,
    /// `L2_PROTECTION_FAULT_ADDR` as a virtual address, hex.
    pub va: String,
}

/// A pending IH entry.
#[derive(Debug, Serialize)]
pub struct PendingIrq {
    /// Byte offset of the entry in the ring.
    pub offset: u64,
    /// `gc-fault`, `mm-fault` or `other`.
    pub kind: &'static str,
    /// Client id.
    pub client: u8,
    /// Source id.
    pub source: u8,
    /// Ring id.
    pub ring: u8,
    /// VMID.
    pub vmid: u8,
    /// Node (XCC/AID).
    pub node: u8,
    /// Faulting VA for faults, hex.
    pub va: Option<String>,
}

/// What `--faults` reports.
#[derive(Debug, Serialize)]
pub struct Faults {
    /// Device name.
    pub device: String,
    /// Every hub, faulted or not.
    pub hubs: Vec<HubFault>,
    /// IH ring 0 read and write pointers (byte offsets).
    pub ih_rptr: u64,
    /// IH write pointer.
    pub ih_wptr: u64,
    /// Entries between them.
    pub pending: Vec<PendingIrq>,
}

/// Every hub of the device: MMHUBs, then the GC hub of each XCC.
pub fn hubs(t: &Target) -> Vec<Hub> {
    let mm = t.regs.instances(HwIp::MMHUB).into_iter().map(Hub::Mm);
    mm.chain(t.regs.instances(HwIp::GC).into_iter().map(Hub::Gc))
        .collect()
}

/// Whether an IH entry is a VM fault of a GC hub or an MMHUB (the sources the driver takes
/// them on, `irq::decode`).
fn fault_kind(gc_major: u8, e: &IhEntry) -> &'static str {
    let (client, source) = (u32::from(e.client), u32::from(e.source));
    let gc_fault = if gc_major >= 11 {
        client == src::SOC21_IH_CLIENTID_GFX
            && source == src::gfx_11_0_0::GFX_11_0_0__SRCID__UTCL2_FAULT
    } else {
        client == src::SOC15_IH_CLIENTID_UTCL2
    };
    if gc_fault {
        "gc-fault"
    } else if client == src::SOC15_IH_CLIENTID_VMC
        && source == src::vmc_1_0::VMC_1_0__SRCID__VM_FAULT
    {
        "mm-fault"
    } else {
        "other"
    }
}

/// Read the fault registers of every hub and the pending IH entries, clearing nothing.
pub fn faults(t: &Target) -> anyhow::Result<Faults> {
    let gc_major = t.discovery.version(HwIp::GC).map_or(0, |v| v.major);
    let status_name = if gc_major >= 12 {
        "VM_L2_PROTECTION_FAULT_STATUS_LO32"
    } else {
        "VM_L2_PROTECTION_FAULT_STATUS"
    };
    let mut hubs_out = vec![];
    for hub in hubs(t) {
        let i = hub.instance();
        let st = hub_reg(t, hub, status_name)?;
        let status = st.read(i)?;
        let va = read_pair(t, hub, "VM_L2_PROTECTION_FAULT_ADDR")? << 12;
        hubs_out.push(HubFault {
            hub: hub.label(),
            status: format!("{status:#010x}"),
            fields: st
                .decode(status)
                .into_iter()
                .filter(|(_, v)| *v != 0)
                .map(|(n, v)| (n.to_string(), v))
                .collect(),
            va: format!("{va:#x}"),
        });
    }
    let wptr_reg = t.regs.reg(osssys::IH_RB_WPTR)?;
    let mask = t.regs.encode(osssys::IH_RB_WPTR, |f| f.offset(0))?.mask;
    let c = t.regs.reg(osssys::IH_RB_CNTL)?.read(0)?;
    let ring_size = 4u64 << t.regs.get(osssys::IH_RB_CNTL, c, |f| f.rb_size(0))?;
    let w = u64::from(wptr_reg.read(0)? & mask) % ring_size;
    let mut r = u64::from(t.regs.reg(osssys::IH_RB_RPTR)?.read(0)? & mask) % ring_size;
    let base_mc = (u64::from(t.regs.reg(osssys::IH_RB_BASE_HI)?.read(0)?) << 32
        | u64::from(t.regs.reg(osssys::IH_RB_BASE)?.read(0)?))
        << 8;
    let mut out = Faults {
        device: t.name().to_string(),
        hubs: hubs_out,
        ih_rptr: r,
        ih_wptr: w,
        pending: vec![],
    };
    // A ring that was never programmed has nothing pending.
    let Some(base) = t.mc_to_paddr(base_mc).filter(|_| base_mc != 0) else {
        return Ok(out);
    };
    while r != w {
        let mut b = [0u8; 32];
        t.vram_read(base + r, &mut b)?;
        let mut dw = [0u32; 8];
        for (d, c) in dw.iter_mut().zip(b.chunks_exact(4)) {
            *d = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        }
        let e = IhEntry::from_dwords(dw);
        let kind = fault_kind(gc_major, &e);
        out.pending.push(PendingIrq {
            offset: r,
            kind,
            client: e.client,
            source: e.source,
            ring: e.ring,
            vmid: e.vmid,
            node: e.node,
            va: (kind != "other").then(|| {
                let va = (u64::from(e.data[0]) << 12) | (u64::from(e.data[1] & 0xf) << 44);
                format!("{va:#x}")
            }),
        });
        r = (r + 32) % ring_size;
    }
    Ok(out)
}

fn print_walk(w: &Walk) {
    let c = &w.context;
    println!(
        "{}  VA {}  VMID {} on the {}",
        w.device, w.va, c.vmid, c.hub
    );
    println!(
        "  context  {} depth {} block size {}  base {}  VA {}..{}",
        if c.enabled { "enabled" } else { "disabled" },
        c.depth,
        c.block_size,
        c.base,
        c.va_start,
        c.va_end
    );
    for l in &w.levels {
        let what = match (l.kind, &l.addr) {
            ("table", Some(a)) => format!("table at {a}"),
            ("page", Some(a)) => format!(
                "page at {a} FRAG {} MTYPE {}",
                l.frag.unwrap_or(0),
                l.mtype.unwrap_or(0)
            ),
            _ => "invalid".to_string(),
        };
        println!(
            "  {:<4} [{:>3}] @ {:<12} = {}  {}  {}",
            l.level,
            l.index,
            l.entry_addr,
            l.raw,
            what,
            l.flags.join(" ")
        );
    }
    match (&w.phys, w.memory, w.page_size) {
        (Some(p), Some(m), Some(s)) => println!(
            "  => {} {p} ({} page)",
            match (m, w.peer_region) {
                ("vram", _) => "VRAM".to_string(),
                ("peer", Some(r)) => format!("VRAM of hive region {r} (another member)"),
                _ => "system memory, bus address".to_string(),
            },
            size_name(s)
        ),
        _ => println!(
            "  => not mapped: {}",
            w.stopped.as_deref().unwrap_or("no page")
        ),
    }
}

fn size_name(s: u64) -> String {
    match s {
        s if s >= 1 << 30 => format!("{} GiB", s >> 30),
        s if s >= 1 << 20 => format!("{} MiB", s >> 20),
        s => format!("{} KiB", s >> 10),
    }
}

fn print_faults(f: &Faults) {
    println!("{}  protection faults", f.device);
    for h in &f.hubs {
        if h.fields.is_empty() && h.status == "0x00000000" {
            println!("  {:<16} none", h.hub);
        } else {
            let fields: Vec<String> = h
                .fields
                .iter()
                .map(|(n, v)| format!("{n}={v:#x}"))
                .collect();
            println!(
                "  {:<16} status {} at VA {}  {}",
                h.hub,
                h.status,
                h.va,
                fields.join(" ")
            );
        }
    }
    println!(
        "  IH ring 0  rptr {:#x} wptr {:#x}: {} pending",
        f.ih_rptr,
        f.ih_wptr,
        f.pending.len()
    );
    for p in &f.pending {
        println!(
            "    @{:#07x} {:<8} client {} source {:#x} ring {} vmid {} node {}{}",
            p.offset,
            p.kind,
            p.client,
            p.source,
            p.ring,
            p.vmid,
            p.node,
            p.va.as_deref()
                .map(|v| format!(" VA {v}"))
                .unwrap_or_default()
        );
    }
}

/// Run `am vm`.
pub fn run(args: VmArgs) -> anyhow::Result<()> {
    let t = Target::open(&args.device)?;
    if args.faults {
        let f = faults(&t)?;
        if args.json {
            println!("{}", serde_json::to_string_pretty(&f)?);
        } else {
            print_faults(&f);
        }
        return Ok(());
    }
    let Some(va) = args.va.as_deref() else {
        bail!("{}: give a virtual address, or --faults", args.device);
    };
    let va = parse_u64(va)?;
    let hub = match args.hub.as_str() {
        "gc" => Hub::Gc(match args.inst {
            Some(i) => i,
            None => t.regs.instances(HwIp::GC).first().copied().unwrap_or(0),
        }),
        "mm" => Hub::Mm(args.inst.unwrap_or(0)),
        other => bail!("--hub {other:?}: the hubs are gc and mm"),
    };
    let inst_ok = match hub {
        Hub::Gc(i) => t.regs.instances(HwIp::GC).contains(&i),
        Hub::Mm(i) => t.regs.instances(HwIp::MMHUB).contains(&i),
    };
    if !inst_ok {
        bail!("{}: there is no {}", t.name(), hub.label());
    }
    if args.vmid > 15 {
        bail!("--vmid {}: VMIDs are 0 to 15", args.vmid);
    }
    let w = walk(&t, hub, args.vmid, va)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&w)?);
    } else {
        print_walk(&w);
    }
    Ok(())
}
