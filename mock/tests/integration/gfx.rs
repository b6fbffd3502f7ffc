//! GFX model: RLC autoload status, HQDs banked by `GRBM_GFX_CNTL` and XCC, queue
//! activation/dequeue, the MEC halt check, queue state across handles and resets.

use std::path::PathBuf;
use std::sync::Arc;

use am_autogen::regs::{RegIp, table};
use am_driver::{Bar, PciDevice};
use am_firmware::{FirmwareSet, IpVersions, Locator, PlanOptions, Role};
use am_mock::ip::gfx::ActiveQueue;
use am_mock::{MockDevice, MockGpu};

/// An RS64 start address for tests that do not load firmware.
const MEC_START: u64 = 0x1_2345_6000;

struct Rig {
    gpu: MockGpu,
    dev: Arc<MockDevice>,
    bar5: Arc<dyn Bar>,
}

impl Rig {
    fn new(profile: &str) -> Self {
        let gpu = MockGpu::new(profile).unwrap();
        let dev = gpu.open();
        let bar5 = dev.bar(5).unwrap();
        Rig { gpu, dev, bar5 }
    }

    fn addr(&self, name: &str, xcc: u8) -> u64 {
        let map = self.gpu.register_map();
        let id = map
            .find(RegIp::Gc, name, xcc)
            .unwrap_or_else(|| panic!("{name} instance {xcc}"));
        map.info(id).addr * 4
    }

    fn wr(&self, name: &str, xcc: u8, v: u32) {
        self.bar5.write32(self.addr(name, xcc), v).unwrap();
    }

    fn try_wr(&self, name: &str, xcc: u8, v: u32) -> bool {
        self.bar5.write32(self.addr(name, xcc), v).is_ok()
    }

    fn rd(&self, name: &str, xcc: u8) -> u32 {
        self.bar5.read32(self.addr(name, xcc)).unwrap()
    }

    /// A register value with the named fields set, from the generated sh_mask.
    fn fields(&self, name: &str, fields: &[(&str, u32)]) -> u32 {
        let map = self.gpu.register_map();
        let info = map.info(map.find(RegIp::Gc, name, 0).unwrap());
        let reg = table(RegIp::Gc, info.version)
            .unwrap()
            .by_name(name)
            .unwrap();
        fields.iter().fold(0, |v, (f, x)| {
            reg.field(f)
                .unwrap_or_else(|| panic!("{name}.{f}"))
                .set(v, *x)
        })
    }

    fn select(&self, xcc: u8, me: u32, pipe: u32, queue: u32) {
        let v = self.fields(
            "GRBM_GFX_CNTL",
            &[
                ("MEID", me),
                ("PIPEID", pipe),
                ("QUEUEID", queue),
                ("VMID", 0),
            ],
        );
        self.wr("GRBM_GFX_CNTL", xcc, v);
    }

    fn rs64(&self) -> bool {
        self.gpu
            .register_map()
            .find(RegIp::Gc, "CP_MEC_RS64_CNTL", 0)
            .is_some()
    }

    /// Point the RS64 program counter of MEC1 pipe 0 at `start` (in dwords, split as the
    /// register pair holds it).
    fn set_pc(&self, xcc: u8, start: u64) {
        self.select(xcc, 1, 0, 0);
        self.wr("CP_MEC_RS64_PRGRM_CNTR_START", xcc, (start >> 2) as u32);
        self.wr("CP_MEC_RS64_PRGRM_CNTR_START_HI", xcc, (start >> 34) as u32);
        self.select(xcc, 0, 0, 0);
    }

    /// Run (or halt) the MEC of `xcc` the way the profile's GC generation does it (on RS64
    /// with the program counter at `MEC_START`).
    fn mec(&self, xcc: u8, halted: bool) {
        let h = u32::from(halted);
        if self.rs64() {
            self.set_pc(xcc, MEC_START);
            let v = self.fields("CP_MEC_RS64_CNTL", &[("MEC_HALT", h)]);
            self.wr("CP_MEC_RS64_CNTL", xcc, v);
        } else {
            let v = self.fields("CP_MEC_CNTL", &[("MEC_ME1_HALT", h), ("MEC_ME2_HALT", h)]);
            self.wr("CP_MEC_CNTL", xcc, v);
        }
    }

    /// The HQD register burst for the selected queue, without `CP_HQD_ACTIVE`.
    fn program_hqd(&self, xcc: u8, pq: u64, queue_size: u32, doorbell: u32, mqd: u64) {
        self.wr("CP_MQD_BASE_ADDR", xcc, mqd as u32);
        self.wr("CP_MQD_BASE_ADDR_HI", xcc, (mqd >> 32) as u32);
        self.wr("CP_HQD_PQ_BASE", xcc, (pq >> 8) as u32);
        self.wr("CP_HQD_PQ_BASE_HI", xcc, (pq >> 40) as u32);
        let c = self.fields("CP_HQD_PQ_CONTROL", &[("QUEUE_SIZE", queue_size)]);
        self.wr("CP_HQD_PQ_CONTROL", xcc, c);
        let d = self.fields(
            "CP_HQD_PQ_DOORBELL_CONTROL",
            &[("DOORBELL_OFFSET", doorbell), ("DOORBELL_EN", 1)],
        );
        self.wr("CP_HQD_PQ_DOORBELL_CONTROL", xcc, d);
    }

    /// Select (me 1, pipe 0, `queue`) on `xcc`, program it and activate it.
    fn activate(&self, xcc: u8, queue: u32) {
        self.select(xcc, 1, 0, queue);
        self.program_hqd(xcc, 0x1_0010_0000, 9, 0x40 + queue, 0x20_0000);
        self.wr("CP_HQD_ACTIVE", xcc, 1);
    }

    fn bootload_complete(&self) -> u32 {
        let f = self.fields("RLC_RLCS_BOOTLOAD_STATUS", &[("BOOTLOAD_COMPLETE", 1)]);
        self.rd("RLC_RLCS_BOOTLOAD_STATUS", 0) & f
    }
}

#[test]
fn navi31_bootload_complete_only_after_autoload_rlc() {
    let r = Rig::new("navi31");
    assert_eq!(r.bootload_complete(), 0, "before the PSP command");
    // A driver polling it keeps reading 0.
    assert_eq!(r.bootload_complete(), 0);
    r.gpu.with_psp(|p| p.mark_rlc_for_test(true, true));
    assert_ne!(r.bootload_complete(), 0, "after AUTOLOAD_RLC");
    // FLR takes the PSP (and the RLC) down.
    r.dev.reset().unwrap();
    assert_eq!(r.bootload_complete(), 0, "after FLR");
    assert!(r.gpu.violations().is_empty(), "{:?}", r.gpu.violations());
}

#[test]
fn mi300x_cp_stat_idle_once_the_rlc_is_loaded() {
    let r = Rig::new("mi300x");
    assert!(
        r.gpu
            .register_map()
            .find(RegIp::Gc, "RLC_RLCS_BOOTLOAD_STATUS", 0)
            .is_none()
    );
    assert_ne!(r.rd("CP_STAT", 0), 0, "busy before the RLC firmware");
    r.gpu.with_psp(|p| p.mark_rlc_for_test(true, false));
    assert_eq!(r.rd("CP_STAT", 0), 0);
    assert_eq!(r.rd("CP_STAT", 5), 0);
}

#[test]
fn navi31_queues_of_one_pipe_do_not_alias() {
    let r = Rig::new("navi31");
    r.select(0, 1, 0, 0);
    r.wr("CP_HQD_PQ_BASE", 0, 0x111);
    r.select(0, 1, 0, 1);
    r.wr("CP_HQD_PQ_BASE", 0, 0x222);
    assert_eq!(r.rd("CP_HQD_PQ_BASE", 0), 0x222);
    r.select(0, 1, 0, 0);
    assert_eq!(r.rd("CP_HQD_PQ_BASE", 0), 0x111);
    // Another pipe has its own copy, at its reset value.
    r.select(0, 1, 1, 0);
    assert_eq!(r.rd("CP_HQD_PQ_BASE", 0), 0);
}

#[test]
fn mi300x_xcc3_and_xcc0_do_not_alias() {
    let r = Rig::new("mi300x");
    r.select(0, 1, 0, 0);
    r.select(3, 1, 0, 0);
    r.wr("CP_HQD_PQ_BASE", 0, 0xaaa);
    r.wr("CP_HQD_PQ_BASE", 3, 0xbbb);
    assert_eq!(r.rd("CP_HQD_PQ_BASE", 0), 0xaaa);
    assert_eq!(r.rd("CP_HQD_PQ_BASE", 3), 0xbbb);
    // XCC 3's selection is its own: switching XCC 0 to queue 1 leaves XCC 3 on queue 0.
    r.select(0, 1, 0, 1);
    assert_eq!(r.rd("CP_HQD_PQ_BASE", 3), 0xbbb);
}

fn expected(xcc: u8, queue: u8) -> ActiveQueue {
    ActiveQueue {
        xcc,
        me: 1,
        pipe: 0,
        queue,
        vmid: 0,
        pq_base: 0x1_0010_0000,
        // QUEUE_SIZE 9: 2^10 dwords.
        pq_size: 4096,
        doorbell_offset: 0x40 + u32::from(queue),
        doorbell_enabled: true,
        mqd_base: 0x20_0000,
        rptr_report_addr: 0,
        wptr_poll_addr: 0,
        wptr_poll_enabled: false,
        aql: false,
        rptr: 0,
        wptr: 0,
        tg_chunk: 0,
    }
}

/// GC 11 and GC 12 (navi48: the same RS64 MEC and HQD registers) alike.
#[test]
fn navi31_activation_records_the_queue_and_dequeue_ends_it() {
    for profile in ["navi31", "navi48"] {
        let r = Rig::new(profile);
        r.mec(0, false);
        r.activate(0, 2);
        assert_eq!(r.gpu.active_queues(), vec![expected(0, 2)], "{profile}");
        assert_eq!(r.rd("CP_HQD_ACTIVE", 0), 1);
        r.wr("SPI_COMPUTE_QUEUE_RESET", 0, 1);
        r.wr("CP_HQD_DEQUEUE_REQUEST", 0, 2);
        assert_eq!(r.rd("CP_HQD_ACTIVE", 0), 0);
        assert!(r.gpu.active_queues().is_empty());
        assert!(r.gpu.violations().is_empty(), "{:?}", r.gpu.violations());
    }
}

#[test]
fn mi300x_activation_on_xcc3() {
    let r = Rig::new("mi300x");
    r.mec(3, false);
    r.activate(3, 1);
    assert_eq!(r.gpu.active_queues(), vec![expected(3, 1)]);
    // The same queue on XCC 0 is not active.
    r.select(0, 1, 0, 1);
    assert_eq!(r.rd("CP_HQD_ACTIVE", 0), 0);
    assert_eq!(r.rd("CP_HQD_ACTIVE", 3), 1);
    assert!(r.gpu.violations().is_empty(), "{:?}", r.gpu.violations());
}

/// Hardware takes an activation while the MEC is halted (Linux's `gfx_v11_0_cp_resume`
/// activates the KIQ before it unhalts the MEC when `amdgpu_async_gfx_ring` is 0); the mock
/// does not model the halt, so it runs the queue at once and counts a warning.
#[test]
fn activation_with_a_halted_mec_is_taken_and_counted() {
    for (profile, xcc) in [("navi31", 0), ("mi300x", 2)] {
        let r = Rig::new(profile);
        r.mec(xcc, true);
        r.select(xcc, 1, 0, 0);
        r.program_hqd(xcc, 0x10_0000, 9, 0x40, 0x20_0000);
        assert!(r.try_wr("CP_HQD_ACTIVE", xcc, 1), "{profile}");
        assert!(
            r.gpu.violations().is_empty(),
            "{profile}: {:?}",
            r.gpu.violations()
        );
        let w = r.gpu.take_warnings();
        assert_eq!(w.len(), 1, "{profile}: {w:?}");
        assert!(w[0].reason.contains("MEC is halted"), "{profile}: {w:?}");
        assert_eq!(r.gpu.active_queues().len(), 1, "{profile}");
    }
}

#[test]
fn queues_survive_reopening_and_vanish_after_flr() {
    let r = Rig::new("navi31");
    r.mec(0, false);
    r.activate(0, 0);
    let Rig { gpu, dev, bar5 } = r;
    drop(bar5);
    drop(dev);
    let r = Rig {
        dev: gpu.open(),
        bar5: gpu.open().bar(5).unwrap(),
        gpu,
    };
    assert_eq!(r.gpu.active_queues(), vec![expected(0, 0)]);
    r.select(0, 1, 0, 0);
    assert_eq!(r.rd("CP_HQD_ACTIVE", 0), 1);
    r.dev.reset().unwrap();
    assert!(r.gpu.active_queues().is_empty());
    r.select(0, 1, 0, 0);
    assert_eq!(r.rd("CP_HQD_ACTIVE", 0), 0);
}

#[test]
fn grbm_soft_reset_of_cp_clears_that_xccs_queues() {
    let r = Rig::new("mi300x");
    r.mec(0, false);
    r.mec(1, false);
    r.activate(0, 0);
    r.activate(1, 0);
    let v = r.fields("GRBM_SOFT_RESET", &[("SOFT_RESET_CP", 1)]);
    r.wr("GRBM_SOFT_RESET", 1, v);
    r.wr("GRBM_SOFT_RESET", 1, 0);
    assert_eq!(r.gpu.active_queues(), vec![expected(0, 0)]);
}

#[test]
fn navi31_activation_needs_the_mec_firmwares_start_address() {
    let loc = Locator::new(vec![PathBuf::from("/lib/firmware/amdgpu")]);
    let plan = FirmwareSet::load(IpVersions::NAVI31, &loc)
        .unwrap()
        .plan(PlanOptions::default())
        .unwrap();
    let start = plan.ucode_start(Role::Mec).unwrap();
    let r = Rig::new("navi31");
    r.gpu.set_mec_ucode_start(Some(start));
    // `mec` points the program counter at MEC_START, not the firmware's address.
    r.mec(0, false);
    r.select(0, 1, 0, 0);
    r.program_hqd(0, 0x10_0000, 9, 0x40, 0x20_0000);
    assert!(!r.try_wr("CP_HQD_ACTIVE", 0, 1));
    let v = r.gpu.take_violations();
    assert_eq!(v.len(), 1, "{v:?}");
    assert!(v[0].reason.contains("start address"), "{v:?}");
    assert!(r.gpu.active_queues().is_empty());
    r.set_pc(0, start);
    r.activate(0, 0);
    assert_eq!(r.gpu.active_queues(), vec![expected(0, 0)]);
    assert!(r.gpu.violations().is_empty(), "{:?}", r.gpu.violations());
}

#[test]
fn navi31_activation_with_an_unwritten_program_counter_is_a_violation() {
    let r = Rig::new("navi31");
    let v = r.fields("CP_MEC_RS64_CNTL", &[("MEC_HALT", 0)]);
    r.wr("CP_MEC_RS64_CNTL", 0, v);
    r.select(0, 1, 0, 0);
    r.program_hqd(0, 0x10_0000, 9, 0x40, 0x20_0000);
    assert!(!r.try_wr("CP_HQD_ACTIVE", 0, 1));
    let v = r.gpu.violations();
    assert!(v[0].reason.contains("never written"), "{v:?}");
    assert!(r.gpu.active_queues().is_empty());
}

/// Activating an HQD reads its registers, not the MQD in memory: an MQD the CPU wrote
/// through BAR0 and has not flushed yet is no obstacle (the reference driver flushes the HDP
/// after `CP_HQD_ACTIVE`).
#[test]
fn activation_does_not_read_the_mqd() {
    let r = Rig::new("navi31");
    r.mec(0, false);
    let mqd_vram = 0x30_0000;
    let mqd = am_mock::ip::gmc::FB_BASE + mqd_vram;
    let bar0 = r.dev.bar(0).unwrap();
    bar0.write_bytes(mqd_vram, &[0x5a; 64]).unwrap();
    assert!(r.gpu.vram().unflushed(mqd_vram, 64).is_some());
    r.select(0, 1, 0, 4);
    r.program_hqd(0, 0x1_0010_0000, 9, 0x44, mqd);
    r.wr("CP_HQD_ACTIVE", 0, 1);
    assert_eq!(r.gpu.active_queues().len(), 1);
    assert!(r.gpu.violations().is_empty(), "{:?}", r.gpu.violations());
}

/// A driver may copy the MQD image dword by dword over `CP_MQD_BASE_ADDR ..=
/// CP_HQD_PQ_WPTR_HI`, reserved dwords included: hardware ignores those writes (and reads
/// them as 0), on every XCC.
#[test]
fn reserved_dwords_of_the_hqd_window_ignore_writes() {
    for profile in ["navi31", "mi300x"] {
        let r = Rig::new(profile);
        let map = r.gpu.register_map();
        let xccs = if profile == "mi300x" { 8 } else { 1 };
        for xcc in 0..xccs {
            let lo = r.addr("CP_MQD_BASE_ADDR", xcc) / 4;
            let hi = r.addr("CP_HQD_PQ_WPTR_HI", xcc) / 4;
            let holes: Vec<u64> = (lo..=hi).filter(|&d| map.at(d).is_none()).collect();
            assert!(
                !holes.is_empty(),
                "{profile}: the window has reserved dwords"
            );
            for d in holes {
                r.bar5.write32(d * 4, 0xdead_beef).unwrap();
                assert_eq!(r.bar5.read32(d * 4).unwrap(), 0, "{profile} dword {d:#x}");
            }
        }
        // Just past the window it is an unknown register again.
        let past = r.addr("CP_HQD_PQ_WPTR_HI", 0) / 4 + 1;
        if map.at(past).is_none() {
            assert!(r.bar5.write32(past * 4, 1).is_err());
            r.gpu.take_violations();
        }
        assert!(r.gpu.violations().is_empty(), "{:?}", r.gpu.violations());
    }
}
