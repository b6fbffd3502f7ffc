//! Device profiles: what a mock device is (identity, IP blocks and where their registers sit,
//! shader-array counts, memory and BAR sizes).
//!
//! Base addresses are dword offsets in the MMIO aperture, one list of segments per IP
//! instance, exactly as the discovery table reports them. The SOC21 layout of navi31 is the
//! one AMD shipped for Navi 2x/3x (`sienna_cichlid_ip_offset.h`); the multi-XCC layout of
//! mi300x and mi350x-vf is chosen (see `docs/MOCK.md`), partly anchored on addresses gem5's
//! MI300X model takes from a real discovery file.

use am_autogen::hwid;
pub use am_autogen::regs::{IpVersion, RegIp};

/// One register table of `am-autogen` (`gc` 11.0.0 = the `gc_11_0_0` headers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegTable {
    /// The IP whose tables hold the registers.
    pub ip: RegIp,
    /// Table version (the IP's own version, or the nearest one with tables).
    pub version: IpVersion,
}

/// One instance of an IP block as discovery lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IpInstance {
    /// Discovery hardware id (`GC_HWID` = 11, …).
    pub hw_id: u16,
    /// Instance number within its hardware id.
    pub instance: u8,
    /// Die (AID on multi-die parts) whose discovery entry lists it.
    pub die: u8,
    /// IP version.
    pub version: IpVersion,
    /// Segment bases (dwords).
    pub bases: Vec<u64>,
    /// The register header placed at these bases, if this instance owns one. Blocks that
    /// share another block's aperture (MP1 and MP0, SDMA in GC on SOC21) have none: their
    /// registers are already in the other header.
    pub regs: Option<RegTable>,
}

/// Shader array and GC parameters, written to discovery's `gc_info` table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GcConfig {
    /// `gc_info` major version: 1 (RDNA, counts WGPs) or 2 (GFX9, counts CUs).
    pub info_major: u16,
    /// `gc_info` minor version.
    pub info_minor: u16,
    /// Shader engines per XCC.
    pub num_se: u32,
    /// Shader arrays (SH/SA) per shader engine.
    pub num_sh_per_se: u32,
    /// Compute units per shader array.
    pub num_cu_per_sh: u32,
    /// Render backends per shader engine.
    pub num_rb_per_se: u32,
    /// L2 channels (TCC/GL2C).
    pub num_tccs: u32,
    /// Wave size (32 or 64).
    pub wave_size: u32,
    /// Waves per SIMD.
    pub max_waves_per_simd: u32,
    /// Scratch slots per CU.
    pub max_scratch_slots_per_cu: u32,
    /// LDS size in KiB.
    pub lds_kib: u32,
}

/// Everything that makes a mock device a particular GPU.
#[derive(Clone, Debug)]
pub struct Profile {
    /// Profile name (`navi31`, …).
    pub name: &'static str,
    /// One line for humans.
    pub description: &'static str,
    /// PCI device id.
    pub device_id: u16,
    /// PCI subsystem device id.
    pub subsystem_id: u16,
    /// PCI revision.
    pub revision: u8,
    /// PCI class code (class, subclass, prog-if).
    pub class: [u8; 3],
    /// SR-IOV virtual function (MMIO and VRAM gated by the PF).
    pub is_vf: bool,
    /// VRAM size in bytes.
    pub vram_size: u64,
    /// BAR0 size at power-on.
    pub bar0_size: u64,
    /// Largest BAR0 size the Resizable BAR capability offers.
    pub bar0_max: u64,
    /// BAR2 (doorbells) size.
    pub bar2_size: u64,
    /// BAR5 (registers) size.
    pub bar5_size: u64,
    /// XCCs (GC instances).
    pub num_xcc: u8,
    /// AIDs (dies).
    pub num_aid: u8,
    /// GC parameters.
    pub gc: GcConfig,
    /// Every IP instance discovery lists.
    pub ips: Vec<IpInstance>,
    /// Harvest table entries (hw_id, instance): instances fused off.
    pub harvest: Vec<(u16, u8)>,
    /// Discovery lists 64-bit base addresses (`ip_discovery_header.base_addr_64_bit`).
    pub base_addr_64_bit: bool,
}

/// Every profile `mock:NAME` accepts.
pub const PROFILES: &[&str] = &[
    "navi31",
    "navi31-smallbar",
    "navi48",
    "navi44",
    "mi300x",
    "mi350x-vf",
];

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

const fn v(a: u8, b: u8, c: u8) -> IpVersion {
    IpVersion::new(a, b, c)
}

fn table(ip: RegIp, version: IpVersion) -> Option<RegTable> {
    Some(RegTable { ip, version })
}

fn ip(
    hw_id: u16,
    instance: u8,
    die: u8,
    version: IpVersion,
    bases: &[u64],
    regs: Option<RegTable>,
) -> IpInstance {
    IpInstance {
        hw_id,
        instance,
        die,
        version,
        bases: bases.to_vec(),
        regs,
    }
}

impl Profile {
    /// The profile called `name`.
    pub fn by_name(name: &str) -> crate::Result<Profile> {
        match name {
            "navi31" => Ok(navi31(false)),
            "navi31-smallbar" => Ok(navi31(true)),
            "navi48" => Ok(navi4x(Navi4x::Navi48)),
            "navi44" => Ok(navi4x(Navi4x::Navi44)),
            "mi300x" => Ok(mi300x()),
            "mi350x-vf" => Ok(mi350x_vf()),
            _ => Err(crate::Error::UnknownProfile {
                name: name.to_string(),
                known: PROFILES.join(", "),
            }),
        }
    }

    /// The instances of one hardware id, in instance order.
    pub fn instances(&self, hw_id: u16) -> impl Iterator<Item = &IpInstance> {
        self.ips.iter().filter(move |i| i.hw_id == hw_id)
    }

    /// Version of the first instance of a hardware id.
    pub fn version(&self, hw_id: u16) -> Option<IpVersion> {
        self.instances(hw_id).next().map(|i| i.version)
    }

    /// The shader ISA of its GC version (`None` without a GC, or for a version no target
    /// has).
    pub fn gfx_target(&self) -> Option<am_isa::GfxTarget> {
        let v = self.version(am_autogen::hwid::GC_HWID)?;
        am_isa::GfxTarget::from_gc(v.major, v.minor, v.rev).ok()
    }

    /// Compute units per XCC.
    pub fn cu_per_xcc(&self) -> u32 {
        self.gc.num_se * self.gc.num_sh_per_se * self.gc.num_cu_per_sh
    }

    /// VRAM reserved at the top for firmware and discovery.
    pub fn reserved_vram(&self) -> u64 {
        match self.version(hwid::GC_HWID) {
            Some(IpVersion {
                major: 9,
                minor: 4 | 5,
                ..
            }) => 384 * MIB,
            _ => 64 * MIB,
        }
    }
}

/// The SOC21 apertures (sienna_cichlid_ip_offset.h kept these bases), shared by navi31 and
/// the RDNA4 parts.
mod soc21 {
    pub(super) const GC: &[u64] = &[0x1260, 0xA000, 0x1C000, 0x2402C00];
    pub(super) const MMHUB: &[u64] = &[0x1A000, 0x2408800];
    pub(super) const NBIO: &[u64] = &[0x0, 0x14, 0xD20, 0x10400, 0x241B000, 0x4040000];
    pub(super) const MP: &[u64] = &[0x16000, 0xDC0000, 0xE00000, 0xE40000, 0x243FC00];
    pub(super) const HDP: &[u64] = &[0xF20, 0x240A400];
    pub(super) const OSSSYS: &[u64] = &[0x10A0, 0x240A000];
    pub(super) const SMUIO: &[u64] = &[0x16800, 0x16A00, 0x440000, 0x2401000];
    pub(super) const ATHUB: &[u64] = &[0xC00, 0x2408C00];
}

/// Navi 31 (RX 7900 XTX): gfx1100, one die, SOC21 register layout.
fn navi31(small_bar: bool) -> Profile {
    use soc21::*;
    let ips = vec![
        ip(
            hwid::GC_HWID,
            0,
            0,
            v(11, 0, 0),
            GC,
            table(RegIp::Gc, v(11, 0, 0)),
        ),
        ip(hwid::SDMA0_HWID, 0, 0, v(6, 0, 0), GC, None),
        ip(hwid::SDMA1_HWID, 0, 0, v(6, 0, 0), GC, None),
        ip(
            hwid::MMHUB_HWID,
            0,
            0,
            v(3, 0, 0),
            MMHUB,
            table(RegIp::Mmhub, v(3, 0, 0)),
        ),
        ip(hwid::ATHUB_HWID, 0, 0, v(3, 0, 0), ATHUB, None),
        ip(
            hwid::NBIF_HWID,
            0,
            0,
            v(4, 3, 0),
            NBIO,
            table(RegIp::Nbio, v(4, 3, 0)),
        ),
        ip(
            hwid::MP0_HWID,
            0,
            0,
            v(13, 0, 0),
            MP,
            table(RegIp::Mp, v(13, 0, 0)),
        ),
        ip(hwid::MP1_HWID, 0, 0, v(13, 0, 0), MP, None),
        ip(
            hwid::HDP_HWID,
            0,
            0,
            v(6, 0, 0),
            HDP,
            table(RegIp::Hdp, v(6, 0, 0)),
        ),
        ip(
            hwid::OSSSYS_HWID,
            0,
            0,
            v(6, 0, 0),
            OSSSYS,
            table(RegIp::Osssys, v(6, 0, 0)),
        ),
        ip(hwid::SMUIO_HWID, 0, 0, v(13, 0, 0), SMUIO, None),
    ];
    Profile {
        name: if small_bar {
            "navi31-smallbar"
        } else {
            "navi31"
        },
        description: if small_bar {
            "Radeon RX 7900 XTX (gfx1100) behind a 256 MiB BAR0 that cannot be resized"
        } else {
            "Radeon RX 7900 XTX (gfx1100), BAR0 resizable to cover all 24 GiB"
        },
        device_id: 0x744c,
        subsystem_id: 0x0e3b,
        revision: 0xc8,
        class: [0x03, 0x00, 0x00],
        is_vf: false,
        vram_size: 24 * GIB,
        bar0_size: 256 * MIB,
        bar0_max: if small_bar { 256 * MIB } else { 32 * GIB },
        bar2_size: 2 * MIB,
        bar5_size: MIB,
        num_xcc: 1,
        num_aid: 1,
        gc: GcConfig {
            info_major: 1,
            info_minor: 0,
            num_se: 6,
            num_sh_per_se: 2,
            num_cu_per_sh: 8,
            num_rb_per_se: 4,
            num_tccs: 24,
            wave_size: 32,
            max_waves_per_simd: 16,
            max_scratch_slots_per_cu: 32,
            lds_kib: 64,
        },
        ips,
        harvest: Vec::new(),
        base_addr_64_bit: false,
    }
}

/// The two RDNA4 dies.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Navi4x {
    /// Navi 48: RX 9070 XT, gfx1201.
    Navi48,
    /// Navi 44: RX 9060 XT, gfx1200.
    Navi44,
}

/// Navi 48 (RX 9070 XT, gfx1201 = GC 12.0.1) and Navi 44 (RX 9060 XT, gfx1200 = GC 12.0.0):
/// one die, the SOC21 apertures of navi31 (tinygrad's GC 12.0.0 mock uses the same bases).
///
/// IP versions are those Linux 6.12's discovery code pairs with GC 12.0.x: SDMA 7.0.0/7.0.1,
/// MMHUB and ATHUB 4.1.0, NBIF 6.3.1, MP0/MP1 14.0.2 (Navi 44) or 14.0.3 (Navi 48), HDP and
/// OSSSYS 7.0.0, SMUIO 14.0.2. Tables: GC 12.0.1 and MP 14.0.3 use the 12.0.0 and 14.0.2
/// headers (Linux drives both versions with the same `gfx_v12_0` and `psp_v14_0`/
/// `smu_v14_0_2` code and ships one header each); NBIF 6.3.1 has its own header
/// (`nbif_6_3_1_offset.h`), whose segment offsets on the SOC21 bases put `MM_INDEX`/`MM_DATA`
/// at BAR5 dwords 0/1 as on every part.
fn navi4x(part: Navi4x) -> Profile {
    use soc21::*;
    // The MP 14.0.2 header moved the MP1 mailbox to segment 1 (`MP1_SMN_C2PMSG_66` at
    // 1 + 0x82 where 13.0.0 had 0 + 0x282); segment 1 at 0x16200 keeps it on the SOC21 dword
    // 0x16282 (chosen: no discovery dump of these parts was found).
    const MP1: &[u64] = &[0x16000, 0x16200, 0xE00000, 0xE40000, 0x243FC00];
    let navi48 = part == Navi4x::Navi48;
    let (gc, mp, sdma) = if navi48 {
        (v(12, 0, 1), v(14, 0, 3), v(7, 0, 1))
    } else {
        (v(12, 0, 0), v(14, 0, 2), v(7, 0, 0))
    };
    let ips = vec![
        ip(hwid::GC_HWID, 0, 0, gc, GC, table(RegIp::Gc, v(12, 0, 0))),
        // SDMA 7 registers are in the GC 12 header, as SDMA 6's are in GC 11's.
        ip(hwid::SDMA0_HWID, 0, 0, sdma, GC, None),
        ip(hwid::SDMA1_HWID, 0, 0, sdma, GC, None),
        ip(
            hwid::MMHUB_HWID,
            0,
            0,
            v(4, 1, 0),
            MMHUB,
            table(RegIp::Mmhub, v(4, 1, 0)),
        ),
        ip(hwid::ATHUB_HWID, 0, 0, v(4, 1, 0), ATHUB, None),
        ip(
            hwid::NBIF_HWID,
            0,
            0,
            v(6, 3, 1),
            NBIO,
            table(RegIp::Nbio, v(6, 3, 1)),
        ),
        ip(hwid::MP0_HWID, 0, 0, mp, MP, table(RegIp::Mp, v(14, 0, 2))),
        ip(hwid::MP1_HWID, 0, 0, mp, MP1, None),
        ip(
            hwid::HDP_HWID,
            0,
            0,
            v(7, 0, 0),
            HDP,
            table(RegIp::Hdp, v(7, 0, 0)),
        ),
        ip(
            hwid::OSSSYS_HWID,
            0,
            0,
            v(7, 0, 0),
            OSSSYS,
            table(RegIp::Osssys, v(7, 0, 0)),
        ),
        ip(hwid::SMUIO_HWID, 0, 0, v(14, 0, 2), SMUIO, None),
    ];
    // Navi 48: 4 SEs x 2 SAs x 8 CUs = 64 CUs; Navi 44 is half of it (2 SEs, 32 CUs: the
    // counts of tinygrad's gfx1200 mock). L2 channels: 16 and 8 (chosen, one per 512 KiB of
    // the 8 MiB and 4 MiB L2).
    let (num_se, num_tccs) = if navi48 { (4, 16) } else { (2, 8) };
    let vram = if navi48 { 16 * GIB } else { 8 * GIB };
    Profile {
        name: if navi48 { "navi48" } else { "navi44" },
        description: if navi48 {
            "Radeon RX 9070 XT (gfx1201), 16 GiB, BAR0 resizable to cover it"
        } else {
            "Radeon RX 9060 XT (gfx1200), 8 GiB, BAR0 resizable to cover it"
        },
        device_id: if navi48 { 0x7550 } else { 0x7590 },
        subsystem_id: if navi48 { 0x7550 } else { 0x7590 },
        revision: 0xc0,
        class: [0x03, 0x00, 0x00],
        is_vf: false,
        vram_size: vram,
        bar0_size: 256 * MIB,
        bar0_max: vram,
        bar2_size: 2 * MIB,
        bar5_size: MIB,
        num_xcc: 1,
        num_aid: 1,
        gc: GcConfig {
            info_major: 1,
            info_minor: 0,
            num_se,
            num_sh_per_se: 2,
            num_cu_per_sh: 8,
            num_rb_per_se: 4,
            num_tccs,
            wave_size: 32,
            max_waves_per_simd: 16,
            max_scratch_slots_per_cu: 32,
            lds_kib: 64,
        },
        ips,
        harvest: Vec::new(),
        base_addr_64_bit: false,
    }
}

/// Per-XCC and per-AID apertures of the multi-die parts. Each XCC gets a 0x10000-dword
/// window (GC segment 0 at +0x2000, segment 1 at +0xA000); each AID holds its SDMA engines
/// at +0x1260, +0x1860, +0x19400, +0x19800 of its first XCC window (gem5's MI300X SDMA
/// addresses) and its MMHUB at +0x4000; the single-instance blocks sit in AID 0 at their
/// Aldebaran bases.
/// IP versions of a multi-die part (and the table versions that serve them).
struct MultiDie {
    num_xcc: u8,
    num_aid: u8,
    gc: IpVersion,
    gc_regs: IpVersion,
    sdma: IpVersion,
    mmhub: IpVersion,
    nbio: IpVersion,
    mp: IpVersion,
    mp_regs: IpVersion,
    hdp: IpVersion,
    osssys: IpVersion,
}

fn multi_die_ips(m: &MultiDie) -> Vec<IpInstance> {
    let xcc_per_aid = m.num_xcc / m.num_aid;
    let aid_window = u64::from(xcc_per_aid) * 0x10000;
    let mut ips = Vec::new();
    for aid in 0..m.num_aid {
        let w = u64::from(aid) * aid_window;
        for j in 0..xcc_per_aid {
            let x = aid * xcc_per_aid + j;
            let xw = w + u64::from(j) * 0x10000;
            ips.push(ip(
                hwid::GC_HWID,
                x,
                aid,
                m.gc,
                &[xw + 0x2000, xw + 0xA000],
                table(RegIp::Gc, m.gc_regs),
            ));
        }
        for (k, off) in [0x1260u64, 0x1860, 0x19400, 0x19800]
            .into_iter()
            .enumerate()
        {
            let inst = aid * 4 + k as u8;
            ips.push(ip(
                hwid::SDMA0_HWID,
                inst,
                aid,
                m.sdma,
                &[w + off],
                table(RegIp::Sdma, v(4, 4, 2)),
            ));
        }
        ips.push(ip(
            hwid::MMHUB_HWID,
            aid,
            aid,
            m.mmhub,
            &[w + 0x4000],
            table(RegIp::Mmhub, v(1, 8, 0)),
        ));
    }
    // NBIO 7.9 indexes nine segments; 5..8 are SMN-only (beyond BAR5), reached indirectly.
    let nbio_bases = [
        0x0, 0x14, 0xD20, 0x10400, 0x241B000, 0x4040000, 0x4080000, 0x40C0000, 0x4100000,
    ];
    ips.push(ip(
        hwid::NBIF_HWID,
        0,
        0,
        m.nbio,
        &nbio_bases,
        table(RegIp::Nbio, v(7, 9, 0)),
    ));
    let mp_bases = [0x16000, 0xDC0000, 0xE00000, 0xE40000, 0x243FC00];
    ips.push(ip(
        hwid::MP0_HWID,
        0,
        0,
        m.mp,
        &mp_bases,
        table(RegIp::Mp, m.mp_regs),
    ));
    ips.push(ip(hwid::MP1_HWID, 0, 0, m.mp, &mp_bases, None));
    ips.push(ip(
        hwid::HDP_HWID,
        0,
        0,
        m.hdp,
        &[0xF20, 0x240A400],
        table(RegIp::Hdp, v(4, 4, 2)),
    ));
    ips.push(ip(
        hwid::OSSSYS_HWID,
        0,
        0,
        m.osssys,
        &[0x10A0, 0x240A000],
        table(RegIp::Osssys, v(4, 4, 2)),
    ));
    ips
}

/// Instinct MI300X: gfx942, 8 XCCs on 4 AIDs.
fn mi300x() -> Profile {
    let ips = multi_die_ips(&MultiDie {
        num_xcc: 8,
        num_aid: 4,
        gc: v(9, 4, 3),
        gc_regs: v(9, 4, 3),
        sdma: v(4, 4, 2),
        mmhub: v(1, 8, 0),
        nbio: v(7, 9, 0),
        mp: v(13, 0, 6),
        mp_regs: v(13, 0, 6),
        hdp: v(4, 4, 2),
        osssys: v(4, 4, 2),
    });
    Profile {
        name: "mi300x",
        description: "Instinct MI300X (gfx942), 8 XCCs on 4 AIDs, 192 GiB HBM3",
        device_id: 0x74a1,
        subsystem_id: 0x74a1,
        revision: 0x00,
        class: [0x03, 0x80, 0x00],
        is_vf: false,
        vram_size: 192 * GIB,
        bar0_size: 256 * GIB,
        bar0_max: 256 * GIB,
        bar2_size: 2 * MIB,
        bar5_size: 8 * MIB,
        num_xcc: 8,
        num_aid: 4,
        gc: GcConfig {
            info_major: 2,
            info_minor: 1,
            num_se: 4,
            num_sh_per_se: 1,
            num_cu_per_sh: 10,
            num_rb_per_se: 2,
            num_tccs: 16,
            wave_size: 64,
            max_waves_per_simd: 8,
            max_scratch_slots_per_cu: 32,
            lds_kib: 64,
        },
        ips,
        // A data-centre part has no display engine: discovery reports DMU as harvested.
        harvest: vec![(hwid::DMU_HWID, 0)],
        base_addr_64_bit: false,
    }
}

/// Instinct MI350X as an SR-IOV VF in a cloud VM: gfx950, 8 XCCs on 2 IODs.
fn mi350x_vf() -> Profile {
    // Linux 6.12 ships no headers for the MI350X blocks: am-autogen derives GC 9.5.0 from
    // 9.4.3 and serves MP 13.0.14 with 13.0.6; the other blocks use the MI300X tables.
    let ips = multi_die_ips(&MultiDie {
        num_xcc: 8,
        num_aid: 2,
        gc: v(9, 5, 0),
        gc_regs: v(9, 5, 0),
        sdma: v(4, 4, 5),
        mmhub: v(1, 8, 1),
        nbio: v(7, 9, 1),
        mp: v(13, 0, 14),
        mp_regs: v(13, 0, 14),
        hdp: v(4, 4, 5),
        osssys: v(4, 4, 5),
    });
    Profile {
        name: "mi350x-vf",
        description: "Instinct MI350X SR-IOV VF (gfx950), MMIO and VRAM gated by the PF",
        device_id: 0x75b0,
        subsystem_id: 0x75a0,
        revision: 0x00,
        class: [0x03, 0x80, 0x00],
        is_vf: true,
        vram_size: 288 * GIB,
        bar0_size: 512 * GIB,
        bar0_max: 512 * GIB,
        bar2_size: 2 * MIB,
        bar5_size: 8 * MIB,
        num_xcc: 8,
        num_aid: 2,
        gc: GcConfig {
            info_major: 2,
            info_minor: 1,
            num_se: 4,
            num_sh_per_se: 1,
            num_cu_per_sh: 8,
            num_rb_per_se: 2,
            num_tccs: 16,
            wave_size: 64,
            max_waves_per_simd: 8,
            max_scratch_slots_per_cu: 32,
            lds_kib: 160,
        },
        ips,
        harvest: vec![(hwid::DMU_HWID, 0)],
        // Exercises the driver's 64-bit base-address path of ip_v4.
        base_addr_64_bit: true,
    }
}
