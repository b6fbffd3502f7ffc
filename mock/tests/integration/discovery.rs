//! The discovery binary each profile leaves at `VRAM - 64 KiB`, read back through the BARs
//! and parsed with the generated `discovery.h` structs.

use std::mem::{offset_of, size_of};

use am_autogen::discovery::{
    BINARY_SIGNATURE, DISCOVERY_TABLE_SIGNATURE, GC, GC_TABLE_ID, HARVEST_INFO,
    HARVEST_TABLE_SIGNATURE, IP_DISCOVERY, binary_header, die_header, gc_info_v1_0, gc_info_v2_1,
    gpu_info_header, harvest_table, ip_discovery_header, ip_v3,
};
use am_autogen::hwid::{DMU_HWID, GC_HWID, MMHUB_HWID, MP0_HWID, NBIF_HWID, SDMA0_HWID};
use am_driver::PciDevice;
use am_mock::MockGpu;
use zerocopy::FromBytes;

#[derive(Debug, PartialEq)]
struct Ip {
    die: u16,
    hw_id: u16,
    instance: u8,
    version: (u8, u8, u8),
    bases: Vec<u64>,
}

#[derive(Debug)]
struct Parsed {
    ips: Vec<Ip>,
    harvest: Vec<(u16, u8)>,
    gc_version: (u16, u16),
    num_se: u32,
    sh_per_se: u32,
    cu_per_sh: u32,
    wave_size: u32,
    lds: u32,
}

fn sum(b: &[u8]) -> u16 {
    b.iter().fold(0u16, |s, &x| s.wrapping_add(u16::from(x)))
}

fn parse(bin: &[u8]) -> Parsed {
    let (bh, _) = binary_header::read_from_prefix(bin).unwrap();
    assert_eq!({ bh.binary_signature }, BINARY_SIGNATURE);
    let after = offset_of!(binary_header, binary_checksum) + 2;
    assert_eq!(sum(&bin[after..usize::from(bh.binary_size)]), {
        bh.binary_checksum
    });
    let table = |t: u32| {
        let ti = bh.table_list[t as usize];
        let (off, size) = (usize::from(ti.offset), usize::from(ti.size));
        assert_eq!(
            sum(&bin[off..off + size]),
            { ti.checksum },
            "checksum of table {t}"
        );
        off
    };

    let ip_off = table(IP_DISCOVERY);
    let (ih, _) = ip_discovery_header::read_from_prefix(&bin[ip_off..]).unwrap();
    assert_eq!({ ih.signature }, DISCOVERY_TABLE_SIGNATURE, "\"IPDS\"");
    assert_eq!({ ih.version }, 4);
    let wide = bin[ip_off + offset_of!(ip_discovery_header, __bindgen_anon_1)] & 1 == 1;
    let mut ips = Vec::new();
    for d in 0..usize::from(ih.num_dies) {
        let di = ih.die_info[d];
        let mut at = usize::from(di.die_offset);
        let (dh, _) = die_header::read_from_prefix(&bin[at..]).unwrap();
        at += size_of::<die_header>();
        for _ in 0..dh.num_ips {
            let (e, _) = ip_v3::read_from_prefix(&bin[at..]).unwrap();
            at += 8;
            let mut bases = Vec::new();
            for _ in 0..e.num_base_address {
                if wide {
                    bases.push(u64::from_le_bytes(bin[at..at + 8].try_into().unwrap()));
                    at += 8;
                } else {
                    bases.push(u64::from(u32::from_le_bytes(
                        bin[at..at + 4].try_into().unwrap(),
                    )));
                    at += 4;
                }
            }
            ips.push(Ip {
                die: dh.die_id,
                hw_id: e.hw_id,
                instance: e.instance_number,
                version: (e.major, e.minor, e.revision),
                bases,
            });
        }
    }

    let hv_off = table(HARVEST_INFO);
    let (hv, _) = harvest_table::read_from_prefix(&bin[hv_off..]).unwrap();
    assert_eq!({ hv.header.signature }, HARVEST_TABLE_SIGNATURE);
    let harvest = hv
        .list
        .iter()
        .filter(|h| h.hw_id != 0)
        .map(|h| (h.hw_id, h.number_instance))
        .collect();

    let gc_off = table(GC);
    let (gh, _) = gpu_info_header::read_from_prefix(&bin[gc_off..]).unwrap();
    assert_eq!({ gh.table_id }, GC_TABLE_ID);
    let gc_version = (gh.version_major, gh.version_minor);
    let (num_se, sh_per_se, cu_per_sh, wave_size, lds) = match gh.version_major {
        1 => {
            let (g, _) = gc_info_v1_0::read_from_prefix(&bin[gc_off..]).unwrap();
            // RDNA: two CUs per WGP (amdgpu_discovery_get_gfx_info).
            let cu = 2 * (g.gc_num_wgp0_per_sa + g.gc_num_wgp1_per_sa);
            (
                g.gc_num_se,
                g.gc_num_sa_per_se,
                cu,
                g.gc_wave_size,
                g.gc_lds_size,
            )
        }
        _ => {
            let (g, _) = gc_info_v2_1::read_from_prefix(&bin[gc_off..]).unwrap();
            (
                g.gc_num_se,
                g.gc_num_sh_per_se,
                g.gc_num_cu_per_sh,
                g.gc_wave_size,
                g.gc_lds_size,
            )
        }
    };
    Parsed {
        ips,
        harvest,
        gc_version,
        num_se,
        sh_per_se,
        cu_per_sh,
        wave_size,
        lds,
    }
}

/// The 10 KiB discovery binary, read through a resized (large) BAR0.
fn read_via_bar0(gpu: &MockGpu) -> Vec<u8> {
    let d = gpu.open();
    d.resize_bar(0).unwrap();
    let bar = d.bar(0).unwrap();
    let mut bin = vec![0u8; 10 << 10];
    bar.read_bytes(gpu.profile().vram_size - (64 << 10), &mut bin)
        .unwrap();
    bin
}

fn instances(p: &Parsed, hw_id: u16) -> Vec<&Ip> {
    p.ips.iter().filter(|i| i.hw_id == hw_id).collect()
}

#[test]
fn navi31_discovery_lists_gc_11_and_96_cus() {
    let gpu = MockGpu::new("navi31").unwrap();
    let p = parse(&read_via_bar0(&gpu));
    let gc = instances(&p, GC_HWID);
    assert_eq!(gc.len(), 1);
    assert_eq!(gc[0].version, (11, 0, 0));
    assert_eq!(gc[0].bases, vec![0x1260, 0xA000, 0x1C000, 0x2402C00]);
    assert_eq!(instances(&p, MMHUB_HWID)[0].version, (3, 0, 0));
    assert_eq!(instances(&p, NBIF_HWID)[0].version, (4, 3, 0));
    assert_eq!(instances(&p, MP0_HWID)[0].version, (13, 0, 0));
    assert_eq!(instances(&p, SDMA0_HWID)[0].version, (6, 0, 0));
    assert_eq!(p.gc_version.0, 1);
    assert_eq!((p.num_se, p.sh_per_se, p.cu_per_sh), (6, 2, 8));
    assert_eq!(p.num_se * p.sh_per_se * p.cu_per_sh, 96);
    assert_eq!((p.wave_size, p.lds), (32, 64));
    assert!(p.harvest.is_empty());
}

#[test]
fn mi300x_discovery_has_8_xccs_on_4_aids_and_a_harvest_table() {
    let gpu = MockGpu::new("mi300x").unwrap();
    let p = parse(&read_via_bar0(&gpu));
    let gc = instances(&p, GC_HWID);
    assert_eq!(gc.len(), 8);
    assert_eq!(
        gc.iter().map(|g| g.instance).collect::<Vec<_>>(),
        (0..8).collect::<Vec<_>>()
    );
    assert!(gc.iter().all(|g| g.version == (9, 4, 3)));
    for aid in 0..4u16 {
        assert_eq!(
            gc.iter().filter(|g| g.die == aid).count(),
            2,
            "two XCCs on AID {aid}"
        );
    }
    let mmhub = instances(&p, MMHUB_HWID);
    assert_eq!(mmhub.len(), 4, "one MMHUB per AID");
    assert!(mmhub.iter().all(|m| m.version == (1, 8, 0)));
    assert_eq!(
        mmhub.iter().map(|m| m.die).collect::<Vec<_>>(),
        vec![0, 1, 2, 3]
    );
    assert_eq!(instances(&p, SDMA0_HWID).len(), 16);
    assert_eq!(instances(&p, NBIF_HWID)[0].version, (7, 9, 0));
    assert_eq!(instances(&p, MP0_HWID)[0].version, (13, 0, 6));
    let mut bases: Vec<u64> = gc.iter().map(|g| g.bases[0]).collect();
    bases.dedup();
    assert_eq!(bases.len(), 8, "each XCC has its own aperture");
    assert_eq!(p.harvest, vec![(DMU_HWID, 0)]);
    assert_eq!(p.gc_version, (2, 1));
    assert_eq!(
        (p.num_se, p.sh_per_se, p.cu_per_sh, p.wave_size),
        (4, 1, 10, 64)
    );
}

#[test]
fn mi350x_vf_discovery_uses_64_bit_bases() {
    let gpu = MockGpu::new("mi350x-vf").unwrap();
    gpu.grant_vf_access(true);
    let p = parse(&read_via_bar0(&gpu));
    let gc = instances(&p, GC_HWID);
    assert_eq!(gc.len(), 8);
    assert!(gc.iter().all(|g| g.version == (9, 5, 0)));
    let expect: Vec<Vec<u64>> = gpu
        .profile()
        .instances(GC_HWID)
        .map(|i| i.bases.clone())
        .collect();
    assert_eq!(
        gc.iter().map(|g| g.bases.clone()).collect::<Vec<_>>(),
        expect
    );
    assert_eq!(p.lds, 160);
}

#[test]
fn smallbar_reads_discovery_through_mm_index() {
    let gpu = MockGpu::new("navi31-smallbar").unwrap();
    let d = gpu.open();
    let mmio = d.bar(5).unwrap();
    let vram_size = u64::from(mmio.read32(0xde3 * 4).unwrap()) << 20;
    assert!(
        d.bar(0).unwrap().len() < vram_size,
        "the discovery table is beyond BAR0"
    );
    let read = |addr: u64| {
        mmio.write32(0x06 * 4, (addr >> 31) as u32).unwrap();
        mmio.write32(0, (addr as u32 & 0x7fff_ffff) | 0x8000_0000)
            .unwrap();
        mmio.read32(4).unwrap()
    };
    let base = vram_size - (64 << 10);
    let bin: Vec<u8> = (0..(10u64 << 10) / 4)
        .flat_map(|i| read(base + 4 * i).to_le_bytes())
        .collect();
    let p = parse(&bin);
    assert_eq!(instances(&p, GC_HWID)[0].version, (11, 0, 0));
    assert!(gpu.violations().is_empty());
}

#[test]
fn every_profile_builds_a_table_within_10_kib() {
    for name in am_mock::PROFILES {
        let profile = am_mock::Profile::by_name(name).unwrap();
        let bin = am_mock::discovery::build(&profile).unwrap();
        assert!(bin.len() <= 10 << 10, "{name}: {} bytes", bin.len());
        assert_eq!(parse(&bin).ips.len(), profile.ips.len(), "{name}");
    }
}
