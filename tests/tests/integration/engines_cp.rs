//! The mock's command processor run by hand-built PM4 rings on a device the driver booted:
//! every packet's effect in memory, registers and the IH ring, on navi31 (GFX11 encoding)
//! and mi300x (GFX9 encoding).

use std::time::Duration;

use am_driver::irq::IrqEvent;
use am_mock::profile::RegIp;
use am_tests::pm4;
use am_tests::rig::Rig;

const T: Duration = Duration::from_secs(10);

fn clean(r: &Rig) {
    let v = r.gpu.violations();
    assert!(v.is_empty(), "violations: {v:#?}");
    let w = r.gpu.warnings();
    assert!(w.is_empty(), "warnings: {w:#?}");
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

/// A ring of 64 dwords takes 40 packets of 5 dwords: the write pointer wraps three times
/// and packets straddle the end of the ring.
#[test]
fn the_ring_wraps_around() {
    let mut r = Rig::new("navi31");
    let mut q = r.compute_queue(1, false, 256);
    let out = r.vram(0x1000);
    for batch in 0..8u32 {
        let mut p = vec![];
        for i in 0..5u32 {
            let k = batch * 5 + i;
            p.extend(pm4::write_mem(out.va + 4 * u64::from(k), &[k + 100]));
        }
        q.submit(&r, &p);
        r.idle();
    }
    for k in 0..40u32 {
        assert_eq!(r.u32_at(&out, 4 * u64::from(k)), k + 100, "slot {k}");
    }
    assert_eq!(q.put, 200);
    assert_eq!(
        q.rptr(&r) & 0xffff_ffff,
        200 % 64,
        "the read pointer is a ring offset"
    );
    clean(&r);
}

/// Ring → IB1 → IB2, each with its size; PRED_EXEC inside an IB runs the next dwords only
/// on the XCCs its mask names (a single-XCC queue is XCC 0).
#[test]
fn nested_indirect_buffers_and_pred_exec() {
    for profile in ["navi31", "mi300x"] {
        let mut r = Rig::new(profile);
        let mut q = r.compute_queue(2, false, 0x1000);
        let out = r.vram(0x1000);
        let ib2 = r.vram(0x1000);
        let ib1 = r.vram(0x1000);
        let inner = pm4::write_mem(out.va + 8, &[2]);
        r.write_u32s(&ib2, 0, &inner);
        let mut outer = pm4::write_mem(out.va, &[1]);
        let mine = pm4::write_mem(out.va + 16, &[3]);
        let theirs = pm4::write_mem(out.va + 24, &[4]);
        outer.extend(pm4::pred_exec(0b01, mine.len()));
        outer.extend(&mine);
        outer.extend(pm4::pred_exec(0b10, theirs.len()));
        outer.extend(&theirs);
        outer.extend(pm4::indirect(ib2.va, inner.len()));
        outer.extend(pm4::write_mem(out.va + 32, &[5]));
        r.write_u32s(&ib1, 0, &outer);
        let mut p = pm4::indirect(ib1.va, outer.len());
        p.extend(pm4::release_mem(out.va + 40, 6, 1, 0, 0));
        q.submit(&r, &p);
        r.wait_u32(&out, 40, |v| v == 6, T);
        let got: Vec<u32> = (0..5).map(|i| r.u32_at(&out, 8 * i)).collect();
        assert_eq!(
            got,
            [1, 2, 3, 0, 5],
            "{profile}: IB1, IB2, PRED_EXEC for XCC 0 only, back in IB1"
        );
        clean(&r);
    }
}

/// A third level of indirect buffer, PRED_EXEC on the ring, an unknown opcode and a packet
/// of the wrong length each stop the queue with an error naming the packet, the queue and
/// the GPU address; the driver decodes the CP's bad-opcode interrupt.
#[test]
fn bad_packets_halt_the_queue() {
    let third_level = |r: &Rig| {
        let ib3 = r.vram(0x1000);
        r.write_u32s(&ib3, 0, &pm4::nop(1));
        let ib2 = r.vram(0x1000);
        let l2 = pm4::indirect(ib3.va, 2);
        r.write_u32s(&ib2, 0, &l2);
        let ib1 = r.vram(0x1000);
        let l1 = pm4::indirect(ib2.va, l2.len());
        r.write_u32s(&ib1, 0, &l1);
        // The buffers stay mapped (the mapping is not freed when `Buf` goes).
        pm4::indirect(ib1.va, l1.len())
    };
    type Packet = Box<dyn Fn(&Rig) -> Vec<u32>>;
    let cases: Vec<(&str, Packet, &str)> = vec![
        ("third IB level", Box::new(third_level), "two IB levels"),
        (
            "PRED_EXEC on the ring",
            Box::new(|_| pm4::pred_exec(1, 0)),
            "only takes effect inside an indirect buffer",
        ),
        (
            "unknown opcode",
            Box::new(|_| vec![pm4::header(0xee, 2), 0, 0]),
            "unknown PM4 opcode 0xee",
        ),
        (
            "short RELEASE_MEM",
            Box::new(|_| vec![pm4::header(0x49, 6), 0, 0, 0, 0, 0, 0]),
            "RELEASE_MEM with 6 body dwords",
        ),
        (
            "type-0 packet",
            Box::new(|_| vec![0x0000_1234]),
            "type-0 packet",
        ),
    ];
    for (name, packet, expect) in cases {
        let mut r = Rig::new("navi31");
        let mut q = r.compute_queue(0, false, 0x1000);
        let p = packet(&r);
        q.submit(&r, &p);
        let deadline = std::time::Instant::now() + T;
        let halted = loop {
            if let Some(h) = r.gpu.queues()[0].1.halted.clone() {
                break h;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{name}: the queue never stopped"
            );
            std::thread::sleep(Duration::from_micros(200));
        };
        assert!(halted.contains(expect), "{name}: {halted}");
        assert!(
            halted.contains("PM4 compute queue (me 1, pipe 0, queue 0"),
            "{name}: {halted}"
        );
        assert!(halted.contains("GPU address 0x"), "{name}: {halted}");
        let v = r.gpu.take_violations();
        assert_eq!(v.len(), 1, "{name}: {v:#?}");
        assert!(v[0].reason.contains(expect), "{name}: {}", v[0]);
        let err = r.dev.handle_interrupts().unwrap_err().to_string();
        assert!(
            err.contains("CP bad opcode on ring 4 (me 1, pipe 0, queue 0)"),
            "{name}: {err}"
        );
        // A doorbell to the halted queue changes nothing.
        q.submit(&r, &pm4::nop(1));
        std::thread::sleep(Duration::from_millis(5));
        assert!(r.gpu.queues()[0].1.halted.is_some());
    }
}
