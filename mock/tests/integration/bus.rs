//! PCIe peer-to-peer on the process's bus: every device's BAR0 has its own bus address, and
//! an engine's system page entry that points into another device's BAR0 reaches that
//! device's VRAM — within what its BAR decodes, while it lives.

use am_driver::PciDevice;
use am_driver::mm::{MapFlags, PteFormat};
use am_driver::pci::{PCI_COMMAND, PCI_COMMAND_MASTER, PCI_COMMAND_MEMORY};
use am_mock::MockGpu;
use am_mock::engine::mem::MemError;
use am_mock::ip::gmc::Hub;

use crate::gmc::{Rig, VA};

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// A navi31 whose GC hub maps `VA` onto bus address `bus` (a system page entry), with bus
/// mastering on.
fn initiator(bus: u64, len: u64) -> Rig {
    let mut r = Rig::new("navi31", PteFormat::Gfx10);
    r._dev
        .config_write(
            PCI_COMMAND,
            2,
            u32::from(PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER),
        )
        .unwrap();
    r.program_context0(Hub::gc(0));
    r.map(VA, bus, len, MapFlags::SYSTEM);
    r.flush(Hub::gc(0));
    r
}

fn refusal(r: Result<(), MemError>) -> String {
    match r {
        Err(MemError::Dma { reason, .. }) => reason,
        other => panic!("expected a refused DMA, got {other:?}"),
    }
}

#[test]
fn each_device_has_its_own_bar0_on_the_bus() {
    let gpus: Vec<MockGpu> = ["navi31", "navi31", "mi300x", "navi31-smallbar"]
        .iter()
        .map(|p| MockGpu::new(p).unwrap())
        .collect();
    let bars: Vec<(u64, u64)> = gpus
        .iter()
        .map(|g| {
            let d = g.open();
            let max = g.profile().bar0_max;
            (d.bar_info(0).unwrap().bus_addr, max)
        })
        .collect();
    for (i, &(a, n)) in bars.iter().enumerate() {
        assert_eq!(a % n, 0, "BAR0 {a:#x} is aligned to its largest size");
        if n < 256 * GIB {
            assert!(
                a + n <= am_mock::sysmem::SYSMEM_BUS_BASE,
                "{a:#x}: below system memory"
            );
        } else {
            assert!(
                a >= am_mock::bus::HIGH_BASE,
                "{a:#x}: a 256 GiB BAR0 sits past 44 bits"
            );
        }
        for &(b, m) in &bars[i + 1..] {
            assert!(a + n <= b || b + m <= a, "{a:#x} and {b:#x} overlap");
        }
    }
}

#[test]
fn a_system_page_entry_into_a_peers_bar0_reaches_its_vram() {
    let peer = MockGpu::new("navi31").unwrap();
    let pdev = peer.open();
    pdev.resize_bar(0).unwrap();
    let bar = pdev.bar_info(0).unwrap();
    assert_eq!(bar.size, 32 * GIB);
    let at = 0x30_0000;
    let r = initiator(bar.bus_addr + at, 0x2000);
    assert_ne!(r._dev.bar_info(0).unwrap().bus_addr, bar.bus_addr);
    let data: Vec<u8> = (0..0x1800u32).map(|i| (i * 7) as u8).collect();
    // The initiator's engine writes through the peer's BAR0...
    r.gpu
        .engine_write(Hub::gc(0), 0, VA + 0x100, &data)
        .unwrap();
    let mut got = vec![0u8; data.len()];
    peer.vram().read(at + 0x100, &mut got);
    assert_eq!(
        got, data,
        "the peer's VRAM holds what the initiator's engine wrote"
    );
    r.gpu.vram().read(at + 0x100, &mut got);
    assert!(
        got.iter().all(|&b| b == 0),
        "the initiator's own VRAM is untouched"
    );
    // ...and reads it back the same way.
    let mut back = vec![0u8; data.len()];
    r.gpu
        .engine_read(Hub::gc(0), 0, VA + 0x100, &mut back)
        .unwrap();
    assert_eq!(back, data);
    // The write passed the peer's HDP, as its CPU's would: the peer's own engines read it
    // only after the peer's HDP flush.
    assert_eq!(
        peer.vram().unflushed(at, 0x2000),
        Some((at + 0x100, at + 0x100 + data.len() as u64))
    );
    peer.vram().hdp_flush();
    assert_eq!(peer.vram().unflushed(at, 0x2000), None);
    assert!(r.gpu.violations().is_empty(), "{:?}", r.gpu.violations());
    assert!(peer.violations().is_empty(), "{:?}", peer.violations());
}

#[test]
fn what_a_peers_bar0_does_not_decode_is_refused_naming_it() {
    // A BAR left at its power-on 256 MiB (small BAR): the first 256 MiB answer, the rest not.
    let small = MockGpu::new("navi31-smallbar").unwrap();
    let sdev = small.open();
    let s = sdev.bar_info(0).unwrap();
    assert_eq!(s.size, 256 * MIB);
    let r = initiator(s.bus_addr + 256 * MIB - 0x1000, 0x2000);
    let mut buf = [0u8; 16];
    r.gpu.engine_read(Hub::gc(0), 0, VA, &mut buf).unwrap();
    let e = refusal(r.gpu.engine_read(Hub::gc(0), 0, VA + 0x1000, &mut buf));
    assert!(
        e.contains(small.name())
            && e.contains("beyond the 256 MiB BAR0")
            && e.contains("small BAR"),
        "{e}"
    );
    assert!(e.contains(&format!("{:#x}", s.bus_addr + 256 * MIB)), "{e}");

    // Inside a resized BAR (32 GiB) but past VRAM (24 GiB).
    let big = MockGpu::new("navi31").unwrap();
    let bdev = big.open();
    bdev.resize_bar(0).unwrap();
    let b = bdev.bar_info(0).unwrap().bus_addr;
    let r = initiator(b + 24 * GIB, 0x1000);
    let e = refusal(r.gpu.engine_write(Hub::gc(0), 0, VA, &[1; 8]));
    assert!(
        e.contains(big.name()) && e.contains("beyond its VRAM"),
        "{e}"
    );

    // Memory decoding off: the BAR answers nothing.
    let r = initiator(b + 0x1000, 0x1000);
    bdev.config_write(PCI_COMMAND, 2, 0).unwrap();
    let e = refusal(r.gpu.engine_read(Hub::gc(0), 0, VA, &mut buf));
    assert!(
        e.contains(big.name()) && e.contains("memory decoding is off"),
        "{e}"
    );
    bdev.config_write(PCI_COMMAND, 2, u32::from(PCI_COMMAND_MEMORY))
        .unwrap();
    r.gpu.engine_read(Hub::gc(0), 0, VA, &mut buf).unwrap();

    // The initiator without bus mastering reaches nothing.
    r._dev
        .config_write(PCI_COMMAND, 2, u32::from(PCI_COMMAND_MEMORY))
        .unwrap();
    let e = refusal(r.gpu.engine_read(Hub::gc(0), 0, VA, &mut buf));
    assert!(e.contains("bus mastering is off"), "{e}");
    r._dev
        .config_write(
            PCI_COMMAND,
            2,
            u32::from(PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER),
        )
        .unwrap();

    // The peer gone (its last handle dropped): nothing answers at its BAR any more.
    let name = big.name().to_string();
    drop((big, bdev));
    let e = refusal(r.gpu.engine_read(Hub::gc(0), 0, VA, &mut buf));
    assert!(e.contains(&name) && e.contains("gone"), "{e}");
    assert!(e.contains(&format!("{:#x}", b + 0x1000)), "{e}");
}
