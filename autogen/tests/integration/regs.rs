//! Register values read by hand from the Linux 6.12 `asic_reg` headers.

use am_autogen::regs::{self, IpVersion, RegIp, gc, mmhub, mp, nbio, osssys};

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

#[test]
fn gc950_is_gc943_plus_listed_differences() {
    let t950 = regs::table(RegIp::Gc, IpVersion::new(9, 5, 0)).unwrap();
    // Every 9.4.3 register is on 9.5.0 at the same place.
    for r in gc943().iter() {
        let s = t950.get(r.reg()).unwrap();
        assert_eq!(
            (s.offset(), s.base_idx()),
            (r.offset(), r.base_idx()),
            "{}",
            r.name()
        );
    }
    // The updated headers' GCVM_* names resolve on 9.5.0 only, to the VM_* registers.
    let l2 = t950.get(gc::GCVM_L2_CNTL).unwrap();
    assert_eq!(l2.offset(), 0x820);
    assert_eq!(l2.offset(), t950.get(gc::VM_L2_CNTL).unwrap().offset());
    assert!(gc943().get(gc::GCVM_L2_CNTL).is_none());
    // SH_MEM_CONFIG.PRECISION_MODE at bit 9 exists on 9.5.0, not in the 6.12 9.4.3 header.
    let f = t950
        .get(gc::SH_MEM_CONFIG)
        .unwrap()
        .field("PRECISION_MODE")
        .unwrap();
    assert_eq!((f.shift, f.mask), (9, 0x200));
    assert!(
        gc943()
            .get(gc::SH_MEM_CONFIG)
            .unwrap()
            .field("PRECISION_MODE")
            .is_none()
    );
}

#[test]
fn missing_register_error_names_register_and_version() {
    let e = gc943().resolve(gc::CP_MEC_RS64_CNTL).unwrap_err();
    assert_eq!(
        e.to_string(),
        "register CP_MEC_RS64_CNTL does not exist on GC 9.4.3"
    );
    let e = regs::require_table(RegIp::Gc, IpVersion::new(9, 4, 2)).unwrap_err();
    assert_eq!(e.to_string(), "no register table for GC 9.4.2");
    assert_eq!(gc11().resolve(gc::CP_HQD_ACTIVE).unwrap().offset(), 0x1fab);
}

#[test]
fn typed_fields_resolve_per_version() {
    use regs::{FieldError, Fields};
    // SH_MEM_CONFIG.ALIGNMENT_MODE: bits 3:2 on GC 11, 4:3 on GC 9.4.3 (their sh_mask headers).
    let build = |t: &'static regs::RegTable| {
        Fields::<regs::fields::SH_MEM_CONFIG>::new(t.get(gc::SH_MEM_CONFIG).unwrap())
            .alignment_mode(3)
            .finish()
    };
    let e = build(gc11()).unwrap();
    assert_eq!((e.value, e.mask), (3 << 2, 3 << 2));
    assert_eq!(build(gc943()).unwrap().value, 3 << 3);
    // INITIAL_INST_PREFETCH exists from GC 10 on: a run-time error naming all three parts.
    let f = |t: &'static regs::RegTable| {
        Fields::<regs::fields::SH_MEM_CONFIG>::new(t.get(gc::SH_MEM_CONFIG).unwrap())
            .initial_inst_prefetch(3)
            .finish()
    };
    assert!(f(gc11()).is_ok());
    let err = f(gc943()).unwrap_err();
    assert!(matches!(err, FieldError::Missing { .. }));
    assert_eq!(
        err.to_string(),
        "register SH_MEM_CONFIG has no field INITIAL_INST_PREFETCH on GC 9.4.3"
    );
    // A value wider than its field is refused, not truncated.
    let wide = Fields::<regs::fields::GRBM_GFX_CNTL>::new(gc11().get(gc::GRBM_GFX_CNTL).unwrap())
        .pipeid(4)
        .finish()
        .unwrap_err();
    assert!(
        matches!(
            wide,
            FieldError::Overflow {
                value: 4,
                width: 2,
                ..
            }
        ),
        "{wide}"
    );
}

#[test]
fn typed_and_untyped_names_are_the_same_register() {
    assert_eq!(gc::GRBM_CNTL.untyped(), gc::GRBM_CNTL);
    assert_eq!(gc11().by_name("GRBM_CNTL").unwrap().reg(), gc::GRBM_CNTL);
    // An alt list holds one field type over the names versions give a register.
    assert_eq!(regs::alt::VM_L2_CNTL[0], gc::GCVM_L2_CNTL);
    assert!(regs::alt::VM_L2_CNTL.contains(&mmhub::VM_L2_CNTL));
}

/// Offsets of `name(n)` for n in `ns`, in a table, relative to `name(0)`; `None` if a name
/// is missing.
fn stride(
    t: &'static regs::RegTable,
    name: &dyn Fn(u32) -> String,
    ns: std::ops::Range<u32>,
) -> Option<Vec<u32>> {
    let base = t.by_name(&name(0))?;
    ns.map(|n| {
        let r = t.by_name(&name(n))?;
        // Same segment, and the same field layout as entry 0.
        let same = r.base_idx() == base.base_idx()
            && r.fields()
                .map(|f| (f.shift, f.mask))
                .eq(base.fields().map(|f| (f.shift, f.mask)));
        same.then(|| r.offset() - base.offset())
    })
    .collect()
}

/// A register array: the name of entry n, the entries, the stride in dwords.
type RegArray = (&'static dyn Fn(u32) -> String, std::ops::Range<u32>, u32);

#[test]
fn register_arrays_the_driver_indexes_have_one_stride_and_layout() {
    // The driver writes entry/engine n at entry 0's address + n × stride with entry 0's
    // fields (ip/soc.rs, ip/sdma.rs, ip/gmc.rs); every table that has them must agree.
    let mut checked = 0;
    for t in regs::tables() {
        let arrays: [RegArray; 5] = [
            (&|n| format!("S2A_DOORBELL_ENTRY_{n}_CTRL"), 0..16, 1),
            (&|n| format!("DOORBELL0_CTRL_ENTRY_{n}"), 0..17, 1),
            (
                &|n| format!("VM_INVALIDATE_ENG{n}_ADDR_RANGE_LO32"),
                0..18,
                2,
            ),
            (
                &|n| format!("GCVM_INVALIDATE_ENG{n}_ADDR_RANGE_LO32"),
                0..18,
                2,
            ),
            (
                &|n| format!("MMVM_INVALIDATE_ENG{n}_ADDR_RANGE_LO32"),
                0..18,
                2,
            ),
        ];
        for (name, ns, step) in arrays {
            if t.by_name(&name(0)).is_none() {
                continue;
            }
            let want: Vec<u32> = ns.clone().map(|n| n * step).collect();
            assert_eq!(
                stride(t, name, ns),
                Some(want),
                "{} {}: {}",
                t.ip(),
                t.version(),
                name(0)
            );
            checked += 1;
        }
        // HI32 follows its LO32 in every invalidation engine.
        for p in ["", "GC", "MM"] {
            for n in 0..18 {
                let lo = t.by_name(&format!("{p}VM_INVALIDATE_ENG{n}_ADDR_RANGE_LO32"));
                let hi = t.by_name(&format!("{p}VM_INVALIDATE_ENG{n}_ADDR_RANGE_HI32"));
                if let (Some(lo), Some(hi)) = (lo, hi) {
                    assert_eq!(hi.offset(), lo.offset() + 1, "{} {}", t.ip(), t.version());
                }
            }
        }
    }
    assert!(checked >= 8, "only {checked} arrays found");
}

#[test]
fn hub_register_pairs_are_adjacent() {
    // The driver writes a hub's 64-bit pairs (ip/gmc.rs `wreg64`) as the LO32/LSB register
    // and the dword after it; every GC and MMHUB table must place the high half there.
    let mut checked = 0;
    for t in regs::tables().filter(|t| matches!(t.ip(), RegIp::Gc | RegIp::Mmhub)) {
        for lo in t.iter().filter(|r| r.name().contains("VM_")) {
            let hi = match lo.name() {
                n if n.ends_with("_LO32") => n.replace("_LO32", "_HI32"),
                n if n.ends_with("_LSB") => format!("{}_MSB", &n[..n.len() - 4]),
                _ => continue,
            };
            let Some(hi) = t.by_name(&hi) else { continue };
            assert_eq!(
                (hi.base_idx(), hi.offset()),
                (lo.base_idx(), lo.offset() + 1),
                "{} {}: {} and {}",
                t.ip(),
                t.version(),
                lo.name(),
                hi.name()
            );
            checked += 1;
        }
    }
    assert!(checked > 100, "only {checked} pairs found");
}
