//! `am serve` exports a mock whose engines run: a client across the remote PCI protocol
//! boots the device, submits work that executes, and what the work left outlives the
//! connection (a second client finds it, warm boots, and runs more).

use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;

use am_driver::pci::remote::{RemoteOptions, RemotePciDevice, ServeOptions, serve};
use am_driver::{AmDevice, BootKind, PciDevice};
use am_mock::MockGpu;
use am_tests::pm4;
use am_tests::rig::{Rig, opts};

#[test]
fn work_submitted_over_the_remote_protocol_runs_and_outlives_the_connection() {
    let gpu = MockGpu::new("navi31").unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let exported: Vec<Arc<dyn PciDevice>> = vec![gpu.open()];
    std::thread::spawn(move || serve(listener, exported, ServeOptions::default()));
    let connect = || -> Arc<dyn PciDevice> {
        Arc::new(RemotePciDevice::connect("127.0.0.1", port, 0, &RemoteOptions::default()).unwrap())
    };
    let dev = AmDevice::open_with(connect(), opts()).unwrap();
    assert_eq!(dev.boot_report().kind, BootKind::Cold);
    let mut r = Rig {
        gpu: gpu.clone(),
        dev,
    };
    let out = r.vram(0x1000);
    let paddr = out.mapping.paddrs[0].0;
    let mut q = r.compute_queue(0, false, 0x1000);
    let mut p = pm4::write_mem(out.va, &[0xfeed]);
    p.extend(pm4::release_mem(out.va + 8, 1, 1, 0, 0));
    q.submit(&r, &p);
    r.wait_u32(&out, 8, |v| v == 1, Duration::from_secs(20));
    assert_eq!(r.u32_at(&out, 0), 0xfeed);
    let Rig { dev, .. } = r;
    dev.fini().unwrap();

    // A second client: the memory the first one's queue wrote is still there.
    let dev = AmDevice::open_with(connect(), opts()).unwrap();
    assert_eq!(dev.boot_report().kind, BootKind::Warm);
    let mut v = [0u8; 4];
    dev.ctx().vram.read(paddr, &mut v).unwrap();
    assert_eq!(u32::from_le_bytes(v), 0xfeed);
    let mut r = Rig {
        gpu: gpu.clone(),
        dev,
    };
    let out = r.vram(0x1000);
    let mut q = r.compute_queue(0, false, 0x1000);
    q.submit(&r, &pm4::release_mem(out.va, 2, 1, 0, 0));
    r.wait_u32(&out, 0, |v| v == 2, Duration::from_secs(20));
    assert!(gpu.violations().is_empty(), "{:#?}", gpu.violations());
}
