//! SDMA model: engines halted at power-on (a ring enabled on a halted engine waits), odd
//! rings and registers rewritten under a running ring counted as warnings, GRBM soft reset,
//! rings as doorbell owners; RLC safe mode.

use std::sync::Arc;

use am_autogen::regs::{RegIp, table};
use am_driver::{Bar, PciDevice};
use am_mock::MockGpu;

struct Rig {
    gpu: MockGpu,
    bar5: Arc<dyn Bar>,
    bar2: Arc<dyn Bar>,
    /// Table of the SDMA registers and their name prefix for engine 0's ring.
    ip: RegIp,
    ring: &'static str,
    engine: &'static str,
}

impl Rig {
    fn new(profile: &str) -> Self {
        let gpu = MockGpu::new(profile).unwrap();
        let dev = gpu.open();
        // SOC21 and GC 12 keep SDMA in the GC header (`SDMA0_QUEUE0_*`); SDMA 4.4 has its own.
        let (ip, ring, engine) = if profile.starts_with("navi") {
            (RegIp::Gc, "SDMA0_QUEUE0_", "SDMA0_")
        } else {
            (RegIp::Sdma, "SDMA_GFX_", "SDMA_")
        };
        Rig {
            bar5: dev.bar(5).unwrap(),
            bar2: dev.bar(2).unwrap(),
            gpu,
            ip,
            ring,
            engine,
        }
    }

    fn addr(&self, ip: RegIp, name: &str, inst: u8) -> u64 {
        let map = self.gpu.register_map();
        let id = map
            .find(ip, name, inst)
            .unwrap_or_else(|| panic!("{name} instance {inst}"));
        map.info(id).addr * 4
    }

    fn fields(&self, ip: RegIp, name: &str, fields: &[(&str, u32)]) -> u32 {
        let map = self.gpu.register_map();
        let info = map.info(map.find(ip, name, 0).unwrap());
        let reg = table(ip, info.version).unwrap().by_name(name).unwrap();
        fields.iter().fold(0, |v, (f, x)| {
            reg.field(f)
                .unwrap_or_else(|| panic!("{name}.{f}"))
                .set(v, *x)
        })
    }

    /// Write a ring register of engine 0.
    fn ring_wr(&self, suffix: &str, v: u32) -> bool {
        let name = format!("{}{suffix}", self.ring);
        self.bar5.write32(self.addr(self.ip, &name, 0), v).is_ok()
    }

    fn ring_fields(&self, suffix: &str, f: &[(&str, u32)]) -> u32 {
        self.fields(self.ip, &format!("{}{suffix}", self.ring), f)
    }

    /// Clear the engine's halt: `F32_CNTL` up to SDMA 6, `MCU_CNTL` on SDMA 7.
    fn unhalt(&self) {
        let map = self.gpu.register_map();
        let f32_cntl = format!("{}F32_CNTL", self.engine);
        let name = if map.find(self.ip, &f32_cntl, 0).is_some() {
            f32_cntl
        } else {
            format!("{}MCU_CNTL", self.engine)
        };
        self.bar5.write32(self.addr(self.ip, &name, 0), 0).unwrap();
    }

    fn enable(&self, extra: &[(&str, u32)]) -> bool {
        let mut f = vec![("RB_ENABLE", 1), ("RB_SIZE", 10)];
        f.extend_from_slice(extra);
        let v = self.ring_fields("RB_CNTL", &f);
        self.ring_wr("RB_CNTL", v)
    }

    fn program(&self) {
        assert!(self.ring_wr("RB_BASE", (0x80_0010_0000u64 >> 8) as u32));
        assert!(self.ring_wr("RB_BASE_HI", (0x80_0010_0000u64 >> 40) as u32));
        assert!(self.ring_wr("RB_RPTR_ADDR_LO", 0x2000));
        assert!(self.ring_wr("RB_WPTR_POLL_ADDR_LO", 0x2008));
        let off = self.ring_fields("DOORBELL_OFFSET", &[("OFFSET", 0x200)]);
        assert!(self.ring_wr("DOORBELL_OFFSET", off));
        let en = self.ring_fields("DOORBELL", &[("ENABLE", 1)]);
        assert!(self.ring_wr("DOORBELL", en));
    }
}

/// Engines start halted; a ring may be enabled on a halted engine (Linux's
/// `sdma_v4_4_2_inst_start` and `sdma_v5_0_start` do so under SR-IOV, un-halting after), and
/// the engine fetches nothing from it until it is un-halted.
#[test]
fn a_ring_enabled_on_a_halted_engine_runs_once_the_engine_is_unhalted() {
    for profile in ["navi31", "navi48", "mi300x"] {
        let r = Rig::new(profile);
        r.program();
        assert!(
            r.enable(&[]),
            "{profile}: enabling while halted is accepted"
        );
        let q = r.gpu.active_sdma_queues();
        assert_eq!(q.len(), 1, "{profile}");
        assert_eq!(q[0].rb_base, 0x80_0010_0000);
        assert_eq!(q[0].rb_size, 4 << 10);
        assert_eq!(q[0].doorbell_offset, 0x200);
        assert!(
            r.gpu.queues().is_empty(),
            "{profile}: a halted engine runs no ring"
        );
        r.unhalt();
        assert_eq!(
            r.gpu.queues().len(),
            1,
            "{profile}: the ring runs once its engine is un-halted"
        );
        assert!(
            r.gpu.violations().is_empty(),
            "{profile}: {:?}",
            r.gpu.violations()
        );
    }
}

/// No source says the engine refuses an odd ring (a base or write-back address of 0, a ring
/// under 256 bytes): it starts, and each oddity is a counted warning, not an error.
#[test]
fn an_odd_ring_starts_and_each_oddity_is_a_warning() {
    let r = Rig::new("navi31");
    r.unhalt();
    assert!(r.enable(&[]), "a ring at base 0 starts");
    assert_eq!(r.gpu.active_sdma_queues()[0].rb_base, 0);
    let w = r.gpu.take_warnings();
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].reason.contains("ring base 0"), "{}", w[0].reason);
    assert!(r.ring_wr("RB_CNTL", 0));
    r.program();
    assert!(
        r.gpu.warnings().is_empty(),
        "a stopped ring is programmed freely"
    );
    let small = r.ring_fields("RB_CNTL", &[("RB_ENABLE", 1), ("RB_SIZE", 5)]);
    assert!(r.ring_wr("RB_CNTL", small));
    assert_eq!(r.gpu.active_sdma_queues()[0].rb_size, 128);
    assert!(r.gpu.take_warnings()[0].reason.contains("128 bytes"));
    assert!(r.ring_wr("RB_CNTL", 0));
    assert!(r.ring_wr("RB_RPTR_ADDR_LO", 0));
    assert!(r.enable(&[("RPTR_WRITEBACK_ENABLE", 1)]));
    assert_eq!(r.gpu.active_sdma_queues()[0].rptr_addr, Some(0));
    assert!(
        r.gpu.take_warnings()[0]
            .reason
            .contains("write-back to address 0")
    );
    assert!(r.ring_wr("RB_CNTL", 0));
    // The low registers keep only ADDR (bits 31:2): the engine never sees bits 1:0.
    assert!(r.ring_wr("RB_RPTR_ADDR_LO", 0x2003));
    assert!(r.ring_wr("RB_WPTR_POLL_ADDR_LO", 0x2008));
    assert!(r.enable(&[("RPTR_WRITEBACK_ENABLE", 1), ("F32_WPTR_POLL_ENABLE", 1)]));
    let q = r.gpu.active_sdma_queues()[0];
    assert_eq!(
        (q.rptr_addr, q.wptr_poll_addr),
        (Some(0x2000), Some(0x2008))
    );
    assert!(r.gpu.warnings().is_empty(), "{:?}", r.gpu.warnings());
    assert!(r.gpu.violations().is_empty());
}

/// No source says what the engine does with its base rewritten under it: the write lands,
/// the running ring keeps what it started with, and the write is a counted warning.
#[test]
fn a_running_ring_keeps_its_base_until_stopped() {
    let r = Rig::new("mi300x");
    r.unhalt();
    r.program();
    assert!(r.enable(&[]));
    assert!(r.ring_wr("RB_BASE", 0x1234));
    assert!(r.ring_wr("DOORBELL_OFFSET", 0));
    assert_eq!(r.gpu.active_sdma_queues()[0].rb_base, 0x80_0010_0000);
    assert_eq!(r.gpu.active_sdma_queues()[0].doorbell_offset, 0x200);
    let w = r.gpu.take_warnings();
    assert_eq!(w.len(), 2, "{w:?}");
    assert!(w[0].reason.contains("while SDMA ring"), "{}", w[0].reason);
    assert!(r.gpu.violations().is_empty());
    assert!(r.ring_wr("RB_CNTL", 0));
    assert!(r.gpu.active_sdma_queues().is_empty());
    assert!(r.ring_wr("RB_BASE", 0x1234));
    assert!(
        r.gpu.warnings().is_empty(),
        "a stopped ring's base is the driver's"
    );
}

#[test]
fn a_running_ring_owns_its_doorbell() {
    let r = Rig::new("navi31");
    // Nobody owns dword 0x200 yet: hardware drops the write, the mock counts it.
    r.bar2.write32(0x200 * 4, 1).unwrap();
    assert!(r.gpu.violations().is_empty());
    let w = r.gpu.take_warnings();
    assert_eq!(w.len(), 1);
    assert!(w[0].reason.contains("owned by no queue"), "{}", w[0].reason);
    assert!(r.gpu.doorbell_rings().is_empty());
    r.unhalt();
    r.program();
    assert!(r.enable(&[]));
    // Two dwords of the (zeroed) ring: two NOPs the running engine may execute at any
    // time (a write pointer that is not a dword count would be a violation it records
    // whenever its thread gets to it).
    r.bar2.write_bytes(0x200 * 4, &8u64.to_le_bytes()).unwrap();
    let rings = r.gpu.doorbell_rings();
    assert_eq!(rings.len(), 1);
    assert_eq!(rings[0].value, 8);
    assert!(matches!(
        rings[0].owner,
        am_mock::DoorbellOwner::Sdma {
            engine: 0,
            queue: 0
        }
    ));
    assert!(r.gpu.violations().is_empty(), "{:?}", r.gpu.violations());
}

#[test]
fn grbm_soft_reset_of_an_engine_stops_its_rings() {
    let r = Rig::new("navi31");
    r.unhalt();
    r.program();
    assert!(r.enable(&[]));
    let sdma1 = r.fields(RegIp::Gc, "GRBM_SOFT_RESET", &[("SOFT_RESET_SDMA1", 1)]);
    let grbm = r.addr(RegIp::Gc, "GRBM_SOFT_RESET", 0);
    r.bar5.write32(grbm, sdma1).unwrap();
    assert_eq!(
        r.gpu.active_sdma_queues().len(),
        1,
        "another engine's reset"
    );
    let sdma0 = r.fields(RegIp::Gc, "GRBM_SOFT_RESET", &[("SOFT_RESET_SDMA0", 1)]);
    r.bar5.write32(grbm, sdma0).unwrap();
    r.bar5.write32(grbm, 0).unwrap();
    assert!(r.gpu.active_sdma_queues().is_empty());
    let cntl = r.addr(RegIp::Gc, "SDMA0_QUEUE0_RB_CNTL", 0);
    assert_eq!(r.bar5.read32(cntl).unwrap() & 1, 0, "RB_ENABLE reads 0");
}

/// Linux and tinygrad write the clock-gating controls inside RLC safe mode; no source says a
/// write outside it is refused, so it lands and is counted as a warning.
#[test]
fn rlc_safe_mode_is_acknowledged_and_clock_gating_outside_it_is_counted() {
    let r = Rig::new("navi31");
    let safe = r.addr(RegIp::Gc, "RLC_SAFE_MODE", 0);
    let cgcg = r.addr(RegIp::Gc, "RLC_CGCG_CGLS_CTRL", 0);
    let enter = r.fields(RegIp::Gc, "RLC_SAFE_MODE", &[("CMD", 1), ("MESSAGE", 1)]);
    // No RLC running: nothing acknowledges.
    r.bar5.write32(safe, enter).unwrap();
    assert_eq!(r.bar5.read32(safe).unwrap() & 1, 1);
    r.bar5.write32(cgcg, 1).unwrap();
    let w = r.gpu.take_warnings();
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].reason.contains("outside RLC safe mode"),
        "{}",
        w[0].reason
    );
    r.gpu.with_psp(|p| p.mark_rlc_for_test(true, true));
    r.bar5.write32(safe, enter).unwrap();
    assert_eq!(r.bar5.read32(safe).unwrap() & 1, 0, "CMD acknowledged");
    r.bar5.write32(cgcg, 1).unwrap();
    assert!(
        r.gpu.warnings().is_empty(),
        "inside safe mode: {:?}",
        r.gpu.warnings()
    );
    let exit = r.fields(RegIp::Gc, "RLC_SAFE_MODE", &[("CMD", 1)]);
    r.bar5.write32(safe, exit).unwrap();
    r.bar5.write32(cgcg, 0).unwrap();
    assert_eq!(r.gpu.take_warnings().len(), 1);
    assert_eq!(r.bar5.read32(cgcg).unwrap(), 0, "the write landed");
    assert!(r.gpu.violations().is_empty(), "{:?}", r.gpu.violations());
}

/// SDMA 7 (navi48) runs the SDMA 6 packet formats, as Linux's `sdma_v7_0.c` (built on
/// `sdma_v6_0_0_pkt_open.h`) and tinygrad on an RX 9070 use them: a `COPY_LINEAR` with the
/// `CPV` bit Linux sets, a `CONSTANT_FILL` with SDMA 7's compress bit and a `FENCE`.
#[test]
fn navi48_sdma7_runs_the_sdma6_packet_formats() {
    let r = Rig::new("navi48");
    let bar0 = r.gpu.open().bar(0).unwrap();
    // VRAM offset → MC address (the frame buffer starts at MC 0x80_0000_0000).
    let mc = |vram: u64| 0x80_0000_0000 + vram;
    let (src, dst, fill, fence) = (0x20_0000u64, 0x20_1000u64, 0x20_2000u64, 0x20_3000u64);
    let data: Vec<u8> = (0..256u32).map(|i| (i * 7 + 3) as u8).collect();
    bar0.write_bytes(src, &data).unwrap();
    let lo = |a: u64| a as u32;
    let hi = |a: u64| (a >> 32) as u32;
    let copy = 1 | (1 << 19); // COPY, sub-op COPY_LINEAR, CPV
    let const_fill = 11 | (2 << 30) | (1 << 16); // dword pattern, COMPRESS
    let packets = [
        copy,
        255,
        0,
        lo(mc(src)),
        hi(mc(src)),
        lo(mc(dst)),
        hi(mc(dst)),
        const_fill,
        lo(mc(fill)),
        hi(mc(fill)),
        0xdead_beef,
        63,
        5 | (3 << 16), // FENCE, MTYPE UC
        lo(mc(fence)),
        hi(mc(fence)),
        0x1234_5678,
    ];
    let ring: Vec<u8> = packets.iter().flat_map(|d| d.to_le_bytes()).collect();
    bar0.write_bytes(0x10_0000, &ring).unwrap();
    r.gpu.vram().hdp_flush(); // what the driver's HDP flush does before the doorbell
    r.unhalt();
    r.program();
    assert!(r.enable(&[]));
    let wptr = ring.len() as u64;
    r.bar2.write_bytes(0x200 * 4, &wptr.to_le_bytes()).unwrap();
    r.gpu
        .wait_queues_idle(std::time::Duration::from_secs(10))
        .unwrap();
    assert!(r.gpu.violations().is_empty(), "{:?}", r.gpu.violations());
    let mut out = vec![0u8; 256];
    bar0.read_bytes(dst, &mut out).unwrap();
    assert_eq!(out, data, "COPY_LINEAR");
    let mut filled = vec![0u8; 64];
    bar0.read_bytes(fill, &mut filled).unwrap();
    assert!(
        filled.chunks(4).all(|c| c == 0xdead_beefu32.to_le_bytes()),
        "CONSTANT_FILL"
    );
    assert_eq!(bar0.read32(fence).unwrap(), 0x1234_5678, "FENCE");
}
