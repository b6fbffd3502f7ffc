//! PCIe peer-to-peer through the runtime: two devices outside one hive, the source large
//! BAR, link as `PciePeer`; a copy between them is the destination's SDMA reading the
//! source's VRAM through its BAR0 (nothing staged in host memory), and a peer view reads it
//! in place. A small-BAR source keeps host staging, with the reason said.
//!
//! Devices: `mock:navi31:470..473`, `:476..478`, `mock:navi31-smallbar:474`, `mock:mi300x:475`.

use am_runtime::{Arg, ComputeCommands, CopyCommands, Link, MemKind};
use am_tests::runtime::{
    assert_clean as clean, download, graph_across_two_devices_orders_them_on_the_gpu, kernel,
    open_index, upload, words,
};

#[test]
fn large_bar_devices_outside_a_hive_copy_over_pcie_by_sdma_with_nothing_staged() {
    let (a, b) = (open_index("navi31", 470), open_index("navi31", 471));
    assert_eq!(a.link_to(&b).unwrap(), Link::PciePeer { generation: 4 });
    let (_, why) = a.link_with_reason(&b).unwrap();
    assert!(why.contains("BAR0") && why.contains(b.name()), "{why}");
    let n = 0x3000u32;
    let src = upload(&b, &words(n, 7));
    let dst = a.alloc(u64::from(n) * 4, MemKind::Vram).unwrap();
    let (subs, staged) = (a.submissions(), a.host_staged_bytes());
    a.copy_between(&dst, &b, &src, u64::from(n) * 4).unwrap();
    assert_eq!(download::<u32>(&a, &dst, n as usize), words(n, 7));
    assert_eq!(
        a.host_staged_bytes(),
        staged,
        "nothing went through host memory"
    );
    assert!(
        a.submissions() > subs,
        "the destination's copy queue did the copy"
    );
    // A peer view: the destination's own copy command reads the source in place.
    let view = a.peer_view(&src.view(0x400, 0x800).unwrap()).unwrap();
    let back = a.alloc(0x800, MemKind::Vram).unwrap();
    let mut c = CopyCommands::new(&a);
    c.copy(&back, &view).unwrap();
    c.submit().unwrap().wait().unwrap();
    assert_eq!(download::<u32>(&a, &back, 0x200), words(n, 7)[0x100..0x300]);
    // An MI300X (PCIe 5.0) reads a Navi 31's (4.0) VRAM over PCIe, at the slower part's
    // generation; its SDMA does the copy.
    let m = open_index("mi300x", 475);
    assert_eq!(m.link_to(&a).unwrap(), Link::PciePeer { generation: 4 });
    let there = m.alloc(u64::from(n) * 4, MemKind::Vram).unwrap();
    m.copy_between(&there, &a, &dst, u64::from(n) * 4).unwrap();
    assert_eq!(download::<u32>(&m, &there, n as usize), words(n, 7));
    assert_eq!(m.host_staged_bytes(), 0);
    // The MI300X's 256 GiB BAR0 sits past the 44 bits a Navi 31's DMA reaches: that way
    // goes through the host, and says so.
    let (link, why) = a.link_with_reason(&m).unwrap();
    assert_eq!(link, Link::Host);
    assert!(why.contains("44-bit DMA mask"), "{why}");
    let here = a.alloc(1024, MemKind::Vram).unwrap();
    a.copy_between(&here, &m, &there, 1024).unwrap();
    assert_eq!(download::<u32>(&a, &here, 256), words(n, 7)[..256]);
    assert_eq!(a.host_staged_bytes() - staged, 1024);
    clean(&[("navi31", 470), ("navi31", 471), ("mi300x", 475)]);
}

#[test]
fn a_small_bar_source_is_staged_through_the_host_with_the_reason_said() {
    let a = open_index("navi31", 472);
    let small = open_index("navi31-smallbar", 474);
    let (link, why) = a.link_with_reason(&small).unwrap();
    assert_eq!(link, Link::Host);
    assert!(
        why.contains("small BAR") && why.contains(small.name()),
        "{why}"
    );
    // The other way the source is large BAR: PCIe.
    assert_eq!(small.link_to(&a).unwrap(), Link::PciePeer { generation: 4 });
    let src = upload(&small, &words(512, 5));
    let dst = a.alloc(2048, MemKind::Vram).unwrap();
    let staged = a.host_staged_bytes();
    a.copy_between(&dst, &small, &src, 2048).unwrap();
    assert_eq!(download::<u32>(&a, &dst, 512), words(512, 5));
    assert_eq!(a.host_staged_bytes() - staged, 2048);
    let e = a.peer_view(&src).unwrap_err();
    assert!(
        e.is_not_in_one_hive() && e.to_string().contains("small BAR"),
        "{e}"
    );
    clean(&[("navi31", 472), ("navi31-smallbar", 474)]);
}

/// A kernel of one device reads another's buffer in place over PCIe (its loads go through
/// the other's BAR0) and stores into another of its buffers the same way; the owner's own
/// copy queue then reads what arrived, which passed the owner's HDP: the owner flushes it
/// before that submission, or the mock would refuse the read as stale.
#[test]
fn a_kernel_reads_and_writes_a_peers_vram_over_pcie() {
    let (a, b) = (open_index("navi31", 473), open_index("navi31", 476));
    let n = 200usize;
    let x: Vec<f32> = (0..n).map(|i| i as f32 * 0.5 - 7.0).collect();
    let y: Vec<f32> = (0..n).map(|i| 3.0 - i as f32 * 0.25).collect();
    let bx = upload(&b, &x);
    let ay = upload(&a, &y);
    let out = b.alloc(4 * n as u64, MemKind::Vram).unwrap();
    let copy = b.alloc(4 * n as u64, MemKind::Vram).unwrap();
    // b's own submission flushes what its CPU wrote: from here on only a's stores are
    // pending in b's HDP.
    let mut c = CopyCommands::new(&b);
    c.copy(&copy, &bx).unwrap();
    c.submit().unwrap().wait().unwrap();
    let (peer_x, peer_out) = (a.peer_view(&bx).unwrap(), a.map_peer(&out).unwrap());
    let vadd = kernel(&a, "vadd");
    let mut c = ComputeCommands::new(&a);
    c.exec(
        &vadd,
        &[
            (&peer_x).into(),
            (&ay).into(),
            (&peer_out).into(),
            Arg::U32(n as u32),
        ],
        [1, 1, 1],
        [256, 1, 1],
    )
    .unwrap();
    c.submit().unwrap().wait().unwrap();
    let want: Vec<f32> = x.iter().zip(&y).map(|(p, q)| p + q).collect();
    let mut c = CopyCommands::new(&b);
    c.copy(&copy, &out).unwrap();
    c.submit().unwrap().wait().unwrap();
    assert_eq!(
        download::<f32>(&b, &copy, n),
        want,
        "b's own engine read a's sums"
    );
    clean(&[("navi31", 473), ("navi31", 476)]);
}

/// One graph spanning two Navi 31 outside a hive orders them on the GPU over PCIe: each
/// device's cross-device values are written through the other's BAR0 and each copy reads
/// the other's VRAM in place (`graph_across_two_devices_orders_them_on_the_gpu` says how),
/// with nothing staged in host memory.
#[test]
fn a_graph_across_two_pcie_peers_orders_them_on_the_gpu() {
    let (a, b) = (open_index("navi31", 477), open_index("navi31", 478));
    graph_across_two_devices_orders_them_on_the_gpu(&a, &b);
    assert_eq!((a.host_staged_bytes(), b.host_staged_bytes()), (0, 0));
    clean(&[("navi31", 477), ("navi31", 478)]);
}
