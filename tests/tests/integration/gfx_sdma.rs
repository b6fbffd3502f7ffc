//! GFX and SDMA on the mock: MEC start, compute queues (banked per XCC, AQL on every XCC),
//! dequeue on fini, warm boot and recovery, SDMA rings and doorbells.
//!
//! Every boot loads the real firmware through the PSP, which starts the RLC; the navi31 mock
//! is told the MEC firmware's start address (from the firmware's load plan) so that it
//! checks the program counter against it.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use am_autogen::regs::RegIp;
use am_driver::ip::gfx::{ComputeQueueDesc, MEC_RING0_DOORBELL, QueueId};
use am_driver::ip::sdma::SdmaQueueDesc;
use am_driver::{AmDevice, Bar, BootKind, Error, ErrorKind, Options, PciDevice};
use am_firmware::{FirmwareSet, IpVersions, Locator, PlanOptions, Role};
use am_mock::{DoorbellOwner, MockGpu};
use am_tests::rig::opts;

/// VRAM's MC address on the mock (`FB_LOCATION_BASE` = 0x8000 << 24).
const FB: u64 = 0x80_0000_0000;

fn mec_start() -> u64 {
    let loc = Locator::new(vec![PathBuf::from("/lib/firmware/amdgpu")]);
    FirmwareSet::load(IpVersions::NAVI31, &loc)
        .unwrap()
        .plan(PlanOptions::default())
        .unwrap()
        .ucode_start(Role::Mec)
        .unwrap()
}

/// The mock device `profile:index`, on navi31 with the MEC start address known.
fn rig(profile: &str, index: u32) -> MockGpu {
    let gpu = am_mock::gpu(profile, index).unwrap();
    if profile == "navi31" {
        gpu.set_mec_ucode_start(Some(mec_start()));
    }
    gpu
}

fn open(gpu: &MockGpu) -> AmDevice {
    open_pci(gpu.open())
}

fn open_pci(pci: Arc<dyn PciDevice>) -> AmDevice {
    AmDevice::open_with(pci, short_reg_opts()).unwrap()
}

/// The rig's options with register waits short enough that a wait that never ends fails
/// quickly.
fn short_reg_opts() -> Options {
    let mut o = opts();
    o.timeouts.reg = Duration::from_millis(100);
    o
}

fn compute(pipe: u8, queue: u8, aql: bool) -> ComputeQueueDesc {
    let base = FB + 0x100_0000 + 0x10_0000 * u64::from(queue);
    ComputeQueueDesc {
        ring: base,
        ring_size: 0x1000,
        rptr_addr: base + 0x2000,
        wptr_addr: base + 0x2008,
        eop_addr: base + 0x3000,
        eop_size: 0x1000,
        doorbell: MEC_RING0_DOORBELL + u32::from(queue),
        aql,
        pipe,
        queue,
    }
}

fn sdma(engine: u8) -> SdmaQueueDesc {
    let base = FB + 0x200_0000 + 0x10_0000 * u64::from(engine);
    SdmaQueueDesc {
        engine,
        ring: base,
        ring_size: 0x1000,
        rptr_addr: base + 0x2000,
        wptr_addr: base + 0x2008,
    }
}

fn no_violations(gpu: &MockGpu) {
    let v = gpu.violations();
    assert!(v.is_empty(), "{v:#?}");
    let w = gpu.warnings();
    assert!(w.is_empty(), "warnings: {w:#?}");
}

/// Raw register access behind the driver's back (what another driver instance would do).
struct Raw {
    gpu: MockGpu,
    bar5: Arc<dyn Bar>,
}

impl Raw {
    fn new(gpu: &MockGpu) -> Self {
        Raw {
            gpu: gpu.clone(),
            bar5: gpu.open().bar(5).unwrap(),
        }
    }
    fn addr(&self, name: &str, xcc: u8) -> u64 {
        let map = self.gpu.register_map();
        map.info(map.find(RegIp::Gc, name, xcc).unwrap()).addr * 4
    }
    fn wr(&self, name: &str, xcc: u8, v: u32) {
        self.bar5.write32(self.addr(name, xcc), v).unwrap();
    }
    fn rd(&self, name: &str, xcc: u8) -> u32 {
        self.bar5.read32(self.addr(name, xcc)).unwrap()
    }
}

#[test]
fn navi31_boots_and_runs_a_compute_queue_until_fini() {
    let gpu = rig("navi31", 150);
    let mut dev = open(&gpu);
    assert_eq!(dev.boot_report().kind, BootKind::Cold);
    no_violations(&gpu);
    let desc = compute(0, 2, false);
    let id = dev.create_compute_queue(&desc).unwrap();
    assert_eq!(id, QueueId { pipe: 0, queue: 2 });
    let q = gpu.active_queues();
    assert_eq!(q.len(), 1, "{q:?}");
    let q = q[0];
    assert_eq!((q.xcc, q.me, q.pipe, q.queue, q.vmid), (0, 1, 0, 2, 0));
    assert_eq!(q.pq_base, desc.ring);
    assert_eq!(q.pq_size, desc.ring_size);
    assert_eq!(q.doorbell_offset, desc.doorbell * 2);
    assert!(q.doorbell_enabled);
    // The MQD the CP points at is in VRAM and holds the same ring.
    let mqd = q.mqd_base - FB;
    let lo = gpu.vram().read32(mqd + 0x80 * 4 + 8 * 4);
    assert_eq!(u64::from(lo) << 8, desc.ring, "MQD cp_hqd_pq_base_lo");
    // Its doorbell is owned now: ringing it is recorded, not a violation, and the CP runs
    // what the ring holds (seven one-dword type-2 fillers).
    for i in 0..7 {
        gpu.vram()
            .write32(desc.ring - FB + 4 * i, 0x8000_0000)
            .unwrap();
    }
    let bar2 = gpu.open().bar(2).unwrap();
    bar2.write_bytes(u64::from(desc.doorbell) * 8, &7u64.to_le_bytes())
        .unwrap();
    gpu.wait_queues_idle(Duration::from_secs(10)).unwrap();
    assert_eq!(gpu.queues()[0].1.packets, 7);
    let rings = gpu.doorbell_rings();
    assert_eq!(rings.len(), 1);
    assert_eq!(
        rings[0].owner,
        DoorbellOwner::Compute {
            xcc: 0,
            me: 1,
            pipe: 0,
            queue: 2
        }
    );
    assert_eq!(rings[0].value, 7);
    dev.fini().unwrap();
    assert!(gpu.active_queues().is_empty());
    assert_eq!(gpu.peek(RegIp::Gc, "SCRATCH_REG6", 0), Some(0));
    no_violations(&gpu);
}

#[test]
fn navi31_refuses_queues_it_cannot_run() {
    let gpu = rig("navi31", 151);
    let mut dev = open(&gpu);
    // RS64: only pipe 0's firmware stack is loaded.
    let e = dev.create_compute_queue(&compute(1, 0, false)).unwrap_err();
    assert!(e.to_string().contains("MEC pipe 1"), "{e}");
    let mut odd = compute(0, 0, false);
    odd.ring_size = 0x1800;
    let e = dev.create_compute_queue(&odd).unwrap_err();
    assert!(e.to_string().contains("ring size"), "{e}");
    dev.create_compute_queue(&compute(0, 0, false)).unwrap();
    let e = dev.create_compute_queue(&compute(0, 0, false)).unwrap_err();
    assert!(e.to_string().contains("already started"), "{e}");
    assert_eq!(gpu.active_queues().len(), 1);
    dev.fini().unwrap();
    no_violations(&gpu);
}

#[test]
fn mi300x_aql_queue_is_set_on_every_xcc_and_pm4_on_one() {
    let gpu = rig("mi300x", 152);
    let mut dev = open(&gpu);
    assert_eq!(dev.boot_report().kind, BootKind::Cold);
    no_violations(&gpu);
    for xcc in 0..8u8 {
        let peek = |name| gpu.peek(RegIp::Gc, name, xcc).unwrap();
        // Per-XCC doorbell range, golden GB_ADDR_CONFIG, clock gating left on (the mock
        // refuses CG writes outside RLC safe mode, so these went through it).
        assert_eq!(peek("CP_MEC_DOORBELL_RANGE_LOWER"), 0x100 * u32::from(xcc));
        assert_eq!(
            peek("CP_MEC_DOORBELL_RANGE_UPPER"),
            0x100 * u32::from(xcc) + 0xf8
        );
        assert_eq!(peek("GB_ADDR_CONFIG"), 0x2a11_4042);
        assert_eq!(peek("RLC_CGCG_CGLS_CTRL") & 0x3, 0x3, "CGCG_EN, CGLS_EN");
        assert_eq!(peek("RLC_SAFE_MODE") & 0x1f, 0, "safe mode left");
    }
    let aql = compute(0, 0, true);
    dev.create_compute_queue(&aql).unwrap();
    let q = gpu.active_queues();
    assert_eq!(
        q.iter().map(|q| q.xcc).collect::<Vec<_>>(),
        (0..8).collect::<Vec<_>>()
    );
    assert!(q.iter().all(|q| (q.me, q.pipe, q.queue) == (1, 0, 0)));
    assert!(q.iter().all(|q| q.pq_base == aql.ring));
    // One MQD per XCC, one stride apart (the CP finds XCC n's at base + n × stride).
    for w in q.windows(2) {
        assert_eq!(w[1].mqd_base - w[0].mqd_base, 0x1000);
    }
    // A PM4 queue on another pipe lives on the first XCC only (GC 9 runs every MEC1 pipe).
    dev.create_compute_queue(&compute(2, 1, false)).unwrap();
    let q = gpu.active_queues();
    assert_eq!(q.len(), 9);
    let pm4: Vec<_> = q.iter().filter(|q| q.pipe == 2).collect();
    assert_eq!(pm4.len(), 1);
    assert_eq!((pm4[0].xcc, pm4[0].queue), (0, 1));
    dev.fini().unwrap();
    assert!(gpu.active_queues().is_empty());
    no_violations(&gpu);
}

#[test]
fn warm_boot_only_resets_the_mec() {
    let gpu = rig("navi31", 153);
    let dev = open(&gpu);
    dev.fini().unwrap();
    let raw = Raw::new(&gpu);
    // Marks the full init would overwrite: a golden register, and a queue some other
    // user left active on pipe 0 queue 5.
    raw.wr("RLC_SPM_MC_CNTL", 0, 0x3);
    let stale = compute(0, 5, false);
    raw.wr("GRBM_GFX_CNTL", 0, 0x4 | 5 << 8); // MEID 1, QUEUEID 5
    raw.wr("CP_HQD_PQ_BASE", 0, (stale.ring >> 8) as u32);
    raw.wr("CP_HQD_PQ_BASE_HI", 0, (stale.ring >> 40) as u32);
    raw.wr("CP_HQD_PQ_CONTROL", 0, 9);
    let mec = raw.rd("CP_MEC_RS64_CNTL", 0);
    raw.wr("CP_MEC_RS64_CNTL", 0, mec & !(1 << 30));
    raw.wr("CP_HQD_ACTIVE", 0, 1);
    raw.wr("GRBM_GFX_CNTL", 0, 0);
    assert_eq!(gpu.active_queues().len(), 1);

    let mut dev = open(&gpu);
    assert_eq!(dev.boot_report().kind, BootKind::Warm);
    let phases: Vec<_> = dev.boot_report().phases.iter().map(|p| p.name).collect();
    assert!(
        !phases.contains(&"psp") && phases.contains(&"gfx"),
        "{phases:?}"
    );
    assert!(gpu.active_queues().is_empty(), "the MEC reset dequeues");
    assert_eq!(
        raw.rd("RLC_SPM_MC_CNTL", 0),
        0x3,
        "a warm boot does not redo the golden registers"
    );
    // The MEC runs again from the firmware's start address.
    dev.create_compute_queue(&compute(0, 0, false)).unwrap();
    assert_eq!(gpu.active_queues().len(), 1);
    dev.fini().unwrap();
    no_violations(&gpu);
}

#[test]
fn recover_resets_the_mec_and_clears_its_queues() {
    let gpu = rig("mi300x", 154);
    let mut dev = open(&gpu);
    dev.create_compute_queue(&compute(0, 0, true)).unwrap();
    dev.create_compute_queue(&compute(1, 3, false)).unwrap();
    assert_eq!(gpu.active_queues().len(), 9);
    dev.recover().unwrap();
    assert!(gpu.active_queues().is_empty());
    assert_eq!(dev.error_state(), None);
    // The driver forgot them too: the same queue can be made again.
    dev.create_compute_queue(&compute(0, 0, true)).unwrap();
    assert_eq!(gpu.active_queues().len(), 8);
    dev.fini().unwrap();
    assert!(gpu.active_queues().is_empty());
    no_violations(&gpu);
}

#[test]
fn a_reset_since_the_last_instance_makes_the_next_open_a_full_boot() {
    // A clean previous instance, then an FLR: the scratch registers survive but the firmware
    // does not, so the state machine must not warm boot over it.
    for (profile, index) in [("navi31", 155), ("mi300x", 156)] {
        let gpu = rig(profile, index);
        open(&gpu).fini().unwrap();
        let pci = gpu.open();
        pci.reset().unwrap();
        let dev = open_pci(pci);
        assert_eq!(dev.boot_report().kind, BootKind::Cold, "{profile}");
        let why = dev.boot_report().reason.clone().unwrap();
        assert!(why.contains("PSP sOS is not running"), "{profile}: {why}");
        dev.fini().unwrap();
        no_violations(&gpu);
    }
}

#[test]
fn a_warm_boot_whose_rlc_never_comes_up_names_the_register_it_waited_on() {
    // The sOS runs but the RLC has lost its firmware: the RLC wait times out and says where.
    for (profile, index, register) in [
        ("navi31", 161, "RLC_RLCS_BOOTLOAD_STATUS"),
        ("mi300x", 162, "CP_STAT"),
    ] {
        let gpu = rig(profile, index);
        open(&gpu).fini().unwrap();
        gpu.with_psp(|p| p.drop_rlc_for_test());
        let e = AmDevice::open_with(gpu.open(), short_reg_opts()).unwrap_err();
        match &e {
            Error {
                kind: ErrorKind::Timeout { what, .. },
                ..
            } => {
                assert!(what.contains("RLC") && what.contains(register), "{what}");
            }
            other => panic!("{profile}: {other}"),
        }
    }
}

#[test]
fn navi31_sdma_rings_start_ring_their_doorbells_and_stop() {
    let gpu = rig("navi31", 157);
    let mut dev = open(&gpu);
    assert!(gpu.active_sdma_queues().is_empty());
    let a = dev.create_sdma_queue(&sdma(0)).unwrap();
    let b = dev.create_sdma_queue(&sdma(1)).unwrap();
    assert_eq!((a.doorbell, b.doorbell), (0x100, 0x10a));
    let q = gpu.active_sdma_queues();
    assert_eq!(q.len(), 2, "{q:?}");
    for (q, e) in q.iter().zip([0u8, 1]) {
        let d = sdma(e);
        assert_eq!((q.engine, q.queue), (e, 0));
        assert_eq!(q.rb_base, d.ring);
        assert_eq!(q.rb_size, d.ring_size);
        assert_eq!(q.rptr_addr, Some(d.rptr_addr));
        assert_eq!(q.wptr_poll_addr, Some(d.wptr_addr));
        assert!(q.doorbell_enabled && q.privileged && q.ib_enabled);
    }
    assert_eq!(q[1].doorbell_offset, 0x10a * 2);
    let bar2 = gpu.open().bar(2).unwrap();
    // 16 dwords of zeros: SDMA NOPs.
    bar2.write_bytes(0x10a * 8, &0x40u64.to_le_bytes()).unwrap();
    gpu.wait_queues_idle(Duration::from_secs(10)).unwrap();
    assert_eq!(
        gpu.queues().iter().map(|q| q.1.packets).sum::<u64>(),
        16,
        "the ring's zeros run as NOPs"
    );
    assert_eq!(
        gpu.doorbell_rings().last().unwrap().owner,
        DoorbellOwner::Sdma {
            engine: 1,
            queue: 0
        }
    );
    dev.remove_sdma_queue(a).unwrap();
    assert_eq!(gpu.active_sdma_queues().len(), 1);
    // A stopped ring's doorbell is nobody's again: the write goes nowhere, counted.
    let rang = gpu.doorbell_rings().len();
    bar2.write_bytes(0x100 * 8, &1u64.to_le_bytes()).unwrap();
    assert_eq!(gpu.doorbell_rings().len(), rang, "no queue took it");
    let w = gpu.take_warnings();
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].reason.contains("owned by no queue"), "{}", w[0].reason);
    dev.fini().unwrap();
    assert!(gpu.active_sdma_queues().is_empty());
    no_violations(&gpu);
}

#[test]
fn mi300x_sdma_ring_uses_the_engine_instance() {
    let gpu = rig("mi300x", 158);
    let mut dev = open(&gpu);
    // Instance 5 = second engine of AID 1.
    let id = dev.create_sdma_queue(&sdma(5)).unwrap();
    assert_eq!(id.doorbell, 0x100 + 5 * 0xa);
    let q = gpu.active_sdma_queues();
    assert_eq!(q.len(), 1);
    assert_eq!((q[0].engine, q[0].queue), (5, 0));
    assert_eq!(q[0].rb_base, sdma(5).ring);
    assert_eq!(q[0].doorbell_offset, id.doorbell * 2);
    let e = dev.create_sdma_queue(&sdma(16)).unwrap_err();
    assert!(e.to_string().contains("engine 16"), "{e}");
    dev.fini().unwrap();
    assert!(gpu.active_sdma_queues().is_empty());
    no_violations(&gpu);
}

#[test]
fn queues_left_by_an_unfinished_instance_are_replaced_cleanly() {
    let gpu = rig("navi31", 160);
    let mut dev = open(&gpu);
    dev.create_compute_queue(&compute(0, 1, false)).unwrap();
    dev.create_sdma_queue(&sdma(0)).unwrap();
    // The instance dies without fini: its queues stay, SCRATCH_REG6 says "not clean".
    std::mem::forget(dev);
    let mut dev = open(&gpu);
    assert_ne!(dev.boot_report().kind, BootKind::Warm);
    let mut moved = compute(0, 1, false);
    moved.ring += 0x10000;
    dev.create_compute_queue(&moved).unwrap();
    let mut moved_sdma = sdma(0);
    moved_sdma.ring += 0x10000;
    dev.create_sdma_queue(&moved_sdma).unwrap();
    let q = gpu.active_queues();
    assert_eq!(q.len(), 1);
    assert_eq!(q[0].pq_base, moved.ring);
    let s = gpu.active_sdma_queues();
    assert_eq!(s.len(), 1);
    assert_eq!(s[0].rb_base, moved_sdma.ring);
    dev.fini().unwrap();
    no_violations(&gpu);
}

#[test]
fn an_open_that_fails_part_way_makes_the_next_one_a_full_boot() {
    let gpu = rig("navi31", 163);
    open(&gpu).fini().unwrap();
    // A warm boot that dies in GFX: the RLC lost its firmware.
    gpu.with_psp(|p| p.drop_rlc_for_test());
    assert!(AmDevice::open_with(gpu.open(), short_reg_opts()).is_err());
    assert_eq!(gpu.peek(RegIp::Gc, "SCRATCH_REG6", 0), Some(1));
    // The next open does not build on it: a full boot (the firmware still runs, so it is
    // reset first) that loads the RLC again and succeeds.
    let dev = AmDevice::open_with(gpu.open(), short_reg_opts()).unwrap();
    assert_eq!(dev.boot_report().kind, BootKind::AfterMode1Reset);
    let why = dev.boot_report().reason.clone().unwrap();
    assert!(why.contains("SCRATCH_REG6 = 0x1"), "{why}");
    dev.fini().unwrap();
    no_violations(&gpu);
}
