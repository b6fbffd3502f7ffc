//! The mock's command processor run by hand-built PM4 rings on a device the driver booted:
//! every packet's effect in memory, registers and the IH ring, on navi31 (GFX11 encoding)
//! and mi300x (GFX9 encoding).
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use am_driver::irq::IrqEvent;
use am_mock::profile::RegIp;
use am_tests::pm4;
use am_tests::rig::Rig;

const T: Duration = Duration::from_secs(10);

fn clean(r: &Rig) {
    let v = r.gpu.violations();
    assert!(v.is_empty(), "violations: {v:#?}");
}

/// WRITE_DATA, COPY_DATA, RELEASE_MEM (every data_sel, an interrupt with its context id),
/// WAIT_REG_MEM on memory, ACQUIRE_MEM, EVENT_WRITE, NOP (and the one-dword filler) and
/// SET_UCONFIG_REG, each checked by what it leaves behind.
fn every_packet(profile: &str) {
    let mut r = Rig::new(profile);
    let gfx9 = r.gfx9();
    let mut q = r.compute_queue(0, false, 0x1000);
    let out = r.vram(0x1000);
    let scratch0 = r.reg(RegIp::Gc, "SCRATCH_REG0");
    let grbm_index = r.reg(RegIp::Gc, "GRBM_GFX_INDEX");
    r.write_u32s(&out, 0x100, &[0x1234_5678, 0x9abc_def0]);
    let mut p = vec![];
    p.extend(pm4::nop(3));
    p.push(pm4::NOP_FILLER);
    p.extend(pm4::acquire_mem(gfx9));
    p.extend(pm4::write_mem(out.va, &[0xa1, 0xa2, 0xa3]));
    p.extend(pm4::write_reg(scratch0, &[0x5ca1_ab1e]));
    // Register → memory, memory → memory (64-bit), immediate → memory, clock → memory.
    p.extend(pm4::copy_data(
        0,
        u64::from(scratch0),
        5,
        out.va + 0x10,
        false,
    ));
    p.extend(pm4::copy_data(1, out.va + 0x100, 5, out.va + 0x18, true));
    p.extend(pm4::copy_data(5, 0x77, 5, out.va + 0x20, false));
    p.extend(pm4::copy_data(9, 0, 5, out.va + 0x28, true));
    p.extend(pm4::wait_mem(out.va, 0xa1, 0xff, 3));
    p.extend(pm4::cs_partial_flush());
    p.extend(pm4::set_uconfig(grbm_index - 0xc000, &[0xe000_0000]));
    p.extend(pm4::release_mem(
        out.va + 0x40,
        0x1111_2222_3333_4444,
        1,
        0,
        0,
    ));
    p.extend(pm4::release_mem(
        out.va + 0x48,
        0x5555_6666_7777_8888,
        2,
        0,
        0,
    ));
    p.extend(pm4::release_mem(out.va + 0x50, 0, 3, 0, 0));
    p.extend(pm4::release_mem(out.va + 0x58, 9, 1, 2, 0xc0ffee));
    q.submit(&r, &p);
    r.wait_u32(&out, 0x58, |v| v == 9, T);
    r.idle();
    assert_eq!(
        r.read(&out, 0, 12),
        [0xa1u32, 0xa2, 0xa3]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect::<Vec<_>>()
    );
    assert_eq!(r.gpu.peek(RegIp::Gc, "SCRATCH_REG0", 0), Some(0x5ca1_ab1e));
    assert_eq!(
        r.u32_at(&out, 0x10),
        0x5ca1_ab1e,
        "COPY_DATA register → memory"
    );
    assert_eq!(
        r.u64_at(&out, 0x18),
        0x9abc_def0_1234_5678,
        "COPY_DATA 64-bit memory → memory"
    );
    assert_eq!(r.u32_at(&out, 0x20), 0x77, "COPY_DATA immediate");
    assert_eq!(
        r.gpu.peek(RegIp::Gc, "GRBM_GFX_INDEX", 0),
        Some(0xe000_0000)
    );
    assert_eq!(
        r.u64_at(&out, 0x40),
        0x3333_4444,
        "RELEASE_MEM 32-bit writes the low half only"
    );
    assert_eq!(r.u64_at(&out, 0x48), 0x5555_6666_7777_8888);
    let (c, t) = (r.u64_at(&out, 0x28), r.u64_at(&out, 0x50));
    assert!(
        c > 0 && t > c,
        "GPU clock via COPY_DATA {c} then RELEASE_MEM {t}"
    );
    let ring_dw = p.len() as u64;
    assert_eq!(
        q.rptr(&r) & 0xffff_ffff,
        ring_dw,
        "read pointer written back"
    );
    let events = r.dev.handle_interrupts().unwrap();
    assert_eq!(
        events,
        vec![IrqEvent::CpEop { ring: 1 << 2 }],
        "EOP of me 1, pipe 0, queue 0"
    );
    let entry = r.gpu.queues();
    assert_eq!(entry[0].1.packets, 16);
    clean(&r);
}

#[test]
fn navi31_every_pm4_packet() {
    every_packet("navi31");
}

#[test]
fn mi300x_every_pm4_packet() {
    every_packet("mi300x");
}
