//! Register values read by hand from the Linux 6.12 `asic_reg` headers.

#![allow(clippy::unwrap_used)]

use am_autogen::regs::{self, IpVersion, RegIp, gc, mp, nbio, osssys};

fn gc11() -> &'static regs::RegTable {
    regs::table(RegIp::Gc, IpVersion::new(11, 0, 0)).unwrap()
}

fn gc943() -> &'static regs::RegTable {
    regs::table(RegIp::Gc, IpVersion::new(9, 4, 3)).unwrap()
}

#[test]
fn gc11_register_offset_base_and_field() {
    // gc_11_0_0_offset.h: regCP_HQD_PQ_CONTROL 0x1fba, _BASE_IDX 0.
    let r = gc11().get(gc::CP_HQD_PQ_CONTROL).unwrap();
    assert_eq!(r.name(), "CP_HQD_PQ_CONTROL");
    assert_eq!(r.offset(), 0x1fba);
    assert_eq!(r.base_idx(), 0);
    // gc_11_0_0_sh_mask.h: RPTR_BLOCK_SIZE shift 8, mask 0x3f00.
    let f = r.field("RPTR_BLOCK_SIZE").unwrap();
    assert_eq!((f.shift, f.mask), (8, 0x3f00));
    assert_eq!(r.field("QUEUE_SIZE").unwrap().mask, 0x3f);
    assert!(r.field("NO_SUCH_FIELD").is_none());
    // gc_11_0_0_default.h: regCP_HQD_PQ_CONTROL_DEFAULT 0x00308509.
    assert_eq!(r.reset_default(), Some(0x0030_8509));
    // regCP_MEC_RS64_CNTL 0x2904 at base index 1.
    let rs64 = gc11().get(gc::CP_MEC_RS64_CNTL).unwrap();
    assert_eq!((rs64.offset(), rs64.base_idx()), (0x2904, 1));
}

#[test]
fn gc943_register_and_fields() {
    // gc_9_4_3_offset.h: regCP_HQD_ACTIVE 0x1247 (GC 11: 0x1fab); regGRBM_GFX_INDEX 0x2200 base 1.
    assert_eq!(gc943().get(gc::CP_HQD_ACTIVE).unwrap().offset(), 0x1247);
    assert_eq!(gc11().get(gc::CP_HQD_ACTIVE).unwrap().offset(), 0x1fab);
    let g = gc943().get(gc::GRBM_GFX_INDEX).unwrap();
    assert_eq!((g.offset(), g.base_idx()), (0x2200, 1));
    let names: Vec<&str> = g.fields().map(|f| f.name).collect();
    assert_eq!(
        names,
        [
            "INSTANCE_INDEX",
            "SH_INDEX",
            "SE_INDEX",
            "SH_BROADCAST_WRITES",
            "INSTANCE_BROADCAST_WRITES",
            "SE_BROADCAST_WRITES"
        ]
    );
    let se = g.field("SE_INDEX").unwrap();
    assert_eq!((se.shift, se.mask), (16, 0x00ff_0000));
    assert_eq!(se.set(0, 3), 0x0003_0000);
    assert_eq!(se.get(0xff12_3456), 0x12);
    // No gc_9_4_3_default.h exists.
    assert_eq!(g.reset_default(), None);
}

#[test]
fn name_absent_in_a_version_resolves_to_none() {
    // RS64 MEC control exists on GC 11 only.
    assert!(gc11().get(gc::CP_MEC_RS64_CNTL).is_some());
    assert!(gc943().get(gc::CP_MEC_RS64_CNTL).is_none());
    assert!(gc943().by_name("CP_MEC_RS64_CNTL").is_none());
    // A name of another IP never resolves in a GC table.
    assert!(gc11().get(osssys::IH_RB_CNTL).is_none());
}

#[test]
fn lookup_by_name_agrees_with_typed_names() {
    let t = gc11();
    let r = t.by_name("CP_HQD_ACTIVE").unwrap();
    assert_eq!(r.reg(), gc::CP_HQD_ACTIVE);
    assert_eq!(gc::CP_HQD_ACTIVE.name(), "CP_HQD_ACTIVE");
    assert_eq!(gc::CP_HQD_ACTIVE.ip(), RegIp::Gc);
    assert!(t.by_name("CP_HQD_ACTIVEX").is_none());
}

#[test]
fn iteration_covers_every_register_once_in_order() {
    for t in regs::tables() {
        let names: Vec<&str> = t.iter().map(|r| r.name()).collect();
        assert_eq!(names.len(), t.len(), "{t:?}");
        assert!(names.windows(2).all(|w| w[0] < w[1]), "{t:?} not sorted");
        for r in t.iter() {
            assert_eq!(t.get(r.reg()).map(|x| x.name()), Some(r.name()));
        }
    }
}

#[test]
fn every_target_version_has_a_table() {
    let want = [
        (RegIp::Gc, (9, 4, 3)),
        (RegIp::Gc, (9, 5, 0)),
        (RegIp::Gc, (11, 0, 0)),
        (RegIp::Mmhub, (1, 8, 0)),
        (RegIp::Mmhub, (3, 0, 0)),
        (RegIp::Osssys, (4, 4, 2)),
        (RegIp::Osssys, (6, 0, 0)),
        (RegIp::Nbio, (4, 3, 0)),
        (RegIp::Nbio, (7, 9, 0)),
        (RegIp::Mp, (13, 0, 0)),
        (RegIp::Mp, (13, 0, 6)),
        (RegIp::Mp, (13, 0, 14)),
        (RegIp::Hdp, (6, 0, 0)),
        (RegIp::Smuio, (13, 0, 6)),
        (RegIp::Sdma, (4, 4, 2)),
    ];
    for (ip, (a, b, c)) in want {
        let v = IpVersion::new(a, b, c);
        assert!(regs::table(ip, v).is_some(), "no table for {ip} {v}");
    }
    // MP 13.0.14 is served by the 13.0.6 tables.
    let mp14 = regs::table(RegIp::Mp, IpVersion::new(13, 0, 14)).unwrap();
    assert_eq!(mp14.version(), IpVersion::new(13, 0, 6));
}

#[test]
fn other_ips_resolve() {
    // mp_13_0_0_offset.h: regMP1_SMN_C2PMSG_66 0x0282, base 0.
    let mp13 = regs::table(RegIp::Mp, IpVersion::new(13, 0, 0)).unwrap();
    let r = mp13.get(mp::MP1_SMN_C2PMSG_66).unwrap();
    assert_eq!((r.offset(), r.base_idx()), (0x0282, 0));
    // osssys_6_0_0_offset.h: regIH_RB_CNTL 0x0080, base 0.
    let oss = regs::table(RegIp::Osssys, IpVersion::new(6, 0, 0)).unwrap();
    assert_eq!(oss.get(osssys::IH_RB_CNTL).unwrap().offset(), 0x0080);
    let nb = regs::table(RegIp::Nbio, IpVersion::new(4, 3, 0)).unwrap();
    assert!(nb.get(nbio::RCC_DEV0_EPF0_RCC_CONFIG_MEMSIZE).is_some());
}
