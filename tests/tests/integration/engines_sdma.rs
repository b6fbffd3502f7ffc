//! The mock's SDMA engines run by hand-built rings: every packet of SDMA 6 (navi31) and
//! SDMA 4.4 (mi300x), with its effect in memory and the IH ring.

use std::time::Duration;

use am_driver::irq::IrqEvent;
use am_tests::rig::Rig;
use am_tests::sdma;

const T: Duration = Duration::from_secs(10);

fn clean(r: &Rig) {
    let v = r.gpu.violations();
    assert!(v.is_empty(), "violations: {v:#?}");
    let w = r.gpu.warnings();
    assert!(w.is_empty(), "warnings: {w:#?}");
}

fn halted(r: &Rig) -> String {
    let deadline = std::time::Instant::now() + T;
    loop {
        if let Some(h) = r.gpu.queues().iter().find_map(|q| q.1.halted.clone()) {
            return h;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "nothing stopped: {:#?}",
            r.gpu.queues()
        );
        std::thread::sleep(Duration::from_micros(200));
    }
}

fn every_packet(profile: &str) {
    let mut r = Rig::new(profile);
    let v6 = !r.gfx9();
    let mut q = r.sdma_queue(0, 0x1000);
    let src = r.vram(0x4000);
    let dst = r.vram(0x4000);
    let sys = r.sysmem(0x2000);
    let out = r.vram(0x1000);
    let pattern: Vec<u8> = (0..0x3000u32).map(|i| (i * 7 + 3) as u8).collect();
    r.write(&src, 0, &pattern);
    r.write(&sys, 0, &pattern[..0x2000]);
    r.write(&out, 0x200, &5u32.to_le_bytes());
    let mut p = vec![];
    p.extend(sdma::nop(2));
    // VRAM → VRAM across pages, system → VRAM, VRAM → system.
    p.extend(sdma::copy(src.va + 3, dst.va + 5, 0x2ff0));
    p.extend(sdma::copy(sys.va, out.va + 0x400, 0x100));
    p.extend(sdma::copy(src.va, sys.va + 0x1000, 0x10));
    p.extend(sdma::write(out.va, &[0x11, 0x22, 0x33]));
    p.extend(sdma::fill(out.va + 0x100, 0xabcd_ef01, 0x40));
    p.extend(sdma::poll_mem(out.va + 0x200, 5, 0xffff, 3));
    p.extend(sdma::timestamp(out.va + 0x208));
    if v6 {
        p.extend(sdma::gcr());
    }
    p.extend(sdma::trap(0x0abc_dead));
    p.extend(sdma::fence(out.va + 0x210, 0xf00d));
    q.submit(&r, &p);
    r.wait_u32(&out, 0x210, |v| v == 0xf00d, T);
    r.idle();
    assert_eq!(r.read(&dst, 5, 0x2ff0), pattern[3..0x2ff3], "VRAM → VRAM");
    assert_eq!(
        r.read(&out, 0x400, 0x100),
        pattern[..0x100],
        "system → VRAM"
    );
    assert_eq!(r.read(&sys, 0x1000, 0x10), pattern[..0x10], "VRAM → system");
    assert_eq!(
        r.read(&out, 0, 12),
        [0x11u32, 0x22, 0x33]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect::<Vec<_>>()
    );
    assert!(
        r.read(&out, 0x100, 0x40)
            .chunks(4)
            .all(|c| c == 0xabcd_ef01u32.to_le_bytes()),
        "CONST_FILL"
    );
    assert_eq!(r.u32_at(&out, 0x140), 0, "CONST_FILL stops at its count");
    assert!(r.u64_at(&out, 0x208) > 0, "TIMESTAMP");
    assert_eq!(
        q.rptr(&r),
        p.len() as u64 * 4,
        "read pointer written back in bytes"
    );
    let events = r.dev.handle_interrupts().unwrap();
    assert_eq!(events.len(), 1, "{events:?}");
    assert!(matches!(events[0], IrqEvent::SdmaTrap { .. }), "{events:?}");
    clean(&r);
}

#[test]
fn navi31_every_sdma_packet() {
    every_packet("navi31");
}

#[test]
fn mi300x_every_sdma_packet() {
    every_packet("mi300x");
}

/// An INDIRECT buffer runs where its packet ends on an 8-dword boundary of the ring (drivers
/// pad with NOPs before it); elsewhere the ring stops with an error saying so.
#[test]
fn indirect_buffers_end_on_an_eight_dword_boundary() {
    let mut r = Rig::new("navi31");
    let mut q = r.sdma_queue(0, 0x1000);
    let out = r.vram(0x1000);
    let ib = r.vram(0x1000);
    let body = sdma::write(out.va, &[0x1b]);
    let mut padded = body.clone();
    padded.extend(sdma::nop(8 - body.len() % 8 - 1));
    r.write_u32s(&ib, 0, &padded);
    // 2 dwords of NOP, then the 6-dword INDIRECT ends at dword 8.
    let mut p = sdma::nop(1);
    p.extend(sdma::indirect(ib.va, padded.len()));
    p.extend(sdma::fence(out.va + 8, 1));
    q.submit(&r, &p);
    r.wait_u32(&out, 8, |v| v == 1, T);
    assert_eq!(r.u32_at(&out, 0), 0x1b);
    clean(&r);
    // Misplaced: starts at dword 16 + 0, ends at 22.
    q.submit(&r, &sdma::indirect(ib.va, padded.len()));
    let h = halted(&r);
    assert!(h.contains("not on an 8-dword boundary"), "{h}");
    assert_eq!(r.gpu.take_violations().len(), 1);
}

/// An opcode SDMA does not have stops the ring with an error naming it; on SDMA 4.4 the
/// engine posts the interrupt Linux takes illegal commands on, which the driver decodes.
#[test]
fn a_bad_sdma_packet_halts_the_ring() {
    for profile in ["navi31", "mi300x"] {
        let mut r = Rig::new(profile);
        let mut q = r.sdma_queue(0, 0x1000);
        q.submit(&r, &[0x3f, 0, 0, 0]);
        let h = halted(&r);
        assert!(h.contains("unknown SDMA opcode 0x3f"), "{profile}: {h}");
        assert!(h.contains("SDMA0 queue 0"), "{profile}: {h}");
        assert_eq!(r.gpu.take_violations().len(), 1, "{profile}");
        let irq = r.dev.handle_interrupts();
        if profile == "mi300x" {
            let e = irq.unwrap_err().to_string();
            assert!(e.contains("SDMA illegal command"), "{e}");
        } else {
            assert_eq!(irq.unwrap(), vec![]);
        }
    }
}
