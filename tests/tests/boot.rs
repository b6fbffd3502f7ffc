#![allow(clippy::unwrap_used)]
//! The boot state machine on the mock: cold, warm, malformed, foreign firmware, hive.

use am_driver::{AmDevice, BootKind, Options};

fn opts() -> Options {
    let mut o = Options::from_env("test").unwrap();
    o.force_reset = false;
    o.power_limit_w = None;
    o
}

#[test]
fn navi31_cold_then_warm() {
    let pci = am_mock::open("navi31", 40).unwrap();
    let dev = AmDevice::open_with(pci.clone(), opts()).unwrap();
    assert_eq!(dev.boot_report().kind, BootKind::Cold);
    dev.fini().unwrap();
    let dev = AmDevice::open_with(pci, opts()).unwrap();
    assert_eq!(dev.boot_report().kind, BootKind::Warm);
}
