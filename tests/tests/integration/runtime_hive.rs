//! Peer access within an XGMI hive through the runtime: a buffer of one member mapped into
//! another (`Device::map_peer`) is a copy target and source for that member's SDMA and a
//! kernel argument of its shaders, with exact results in the owner's memory; devices outside
//! one hive — another product, another hive of the same shape — are refused by name.
//!
//! Each test takes its own process-wide hive (`mock:mi300x-hive2:N`, N from 400 on), so the
//! fabric is the one the registry builds.

use am_runtime::{Arg, ComputeCommands, CopyCommands, Device, Error, MemKind};
use am_tests::runtime::{
    assert_clean, download, graph_across_two_devices_orders_them_on_the_gpu, kernel, open_index,
    upload, words,
};

const HIVE: &str = "mi300x-hive2";

/// Both members of hive `first / 2` (`first` even).
fn pair(first: u32) -> (Device, Device) {
    (open_index(HIVE, first), open_index(HIVE, first + 1))
}

fn clean(indices: &[u32]) {
    let devices: Vec<(&str, u32)> = indices.iter().map(|&i| (HIVE, i)).collect();
    assert_clean(&devices);
}

#[test]
fn an_sdma_copy_moves_vram_between_members_both_ways() {
    let (a, b) = pair(400);
    let data = words(1024, 0x5151);
    let src = upload(&a, &data);
    let dst = b.alloc(4096, MemKind::Vram).unwrap();
    let peer = a.map_peer(&dst).unwrap();
    assert_eq!((peer.kind(), peer.size()), (MemKind::Peer, dst.size()));
    assert!(
        peer.belongs_to(&a),
        "the mapping is at a GPU address of device 0"
    );
    // Device 0's copy queue writes device 1's VRAM...
    let mut c = CopyCommands::new(&a);
    c.copy(&peer, &src).unwrap();
    c.submit().unwrap().wait().unwrap();
    assert_eq!(
        download::<u32>(&b, &dst, 1024),
        data,
        "as device 1 reads it"
    );
    // ...and the CPU reaches it through either handle (device 0 forwards to device 1).
    assert_eq!(download::<u32>(&a, &peer, 1024), data);
    // The other way: device 1 writes its buffer, device 0's copy queue reads it back.
    let back = words(1024, 0x7777);
    a.write(
        &peer,
        0,
        &back
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .collect::<Vec<_>>(),
    )
    .unwrap();
    let mine = a.alloc(4096, MemKind::Vram).unwrap();
    let mut c = CopyCommands::new(&a);
    c.copy(&mine, &peer).unwrap();
    c.submit().unwrap().wait().unwrap();
    assert_eq!(download::<u32>(&a, &mine, 1024), back);
    // A device's own buffer maps to itself; a peer mapping, back on its owner, is the
    // owner's buffer.
    assert_eq!(a.map_peer(&src).unwrap().va(), src.va());
    let home = b.map_peer(&peer).unwrap();
    assert_eq!((home.va(), home.kind()), (dst.va(), MemKind::Vram));
    // A view maps the same bytes.
    let v = a.map_peer(&dst.view(0x100, 0x40).unwrap()).unwrap();
    assert_eq!(download::<u32>(&a, &v, 16), back[0x40..0x50]);
    clean(&[400, 401]);
}

#[test]
fn a_kernel_on_one_member_writes_anothers_buffer() {
    let (a, b) = pair(402);
    let n = 200usize;
    let x: Vec<f32> = (0..n).map(|i| i as f32 * 0.5 - 7.0).collect();
    let y: Vec<f32> = (0..n).map(|i| 3.0 - i as f32 * 0.25).collect();
    let (bx, by) = (upload(&a, &x), upload(&a, &y));
    let out = b.alloc(4 * n as u64, MemKind::Vram).unwrap();
    b.write(&out, 0, &vec![0xff; 4 * n]).unwrap();
    let peer_out = a.map_peer(&out).unwrap();
    let vadd = kernel(&a, "vadd");
    let mut c = ComputeCommands::new(&a);
    c.exec(
        &vadd,
        &[
            (&bx).into(),
            (&by).into(),
            (&peer_out).into(),
            Arg::U32(n as u32),
        ],
        [1, 1, 1],
        [256, 1, 1],
    )
    .unwrap();
    c.submit().unwrap().wait().unwrap();
    let want: Vec<f32> = x.iter().zip(&y).map(|(p, q)| p + q).collect();
    assert_eq!(
        download::<f32>(&b, &out, n),
        want,
        "device 1's VRAM holds the sums"
    );
    // The kernel also reads a peer's buffer: x from device 1.
    let bx1 = upload(&b, &x);
    let peer_x = a.map_peer(&bx1).unwrap();
    let sums = a.alloc(4 * n as u64, MemKind::Vram).unwrap();
    let mut c = ComputeCommands::new(&a);
    c.exec(
        &vadd,
        &[
            (&peer_x).into(),
            (&by).into(),
            (&sums).into(),
            Arg::U32(n as u32),
        ],
        [1, 1, 1],
        [256, 1, 1],
    )
    .unwrap();
    c.submit().unwrap().wait().unwrap();
    assert_eq!(download::<f32>(&a, &sums, n), want);
    clean(&[402, 403]);
}

#[test]
fn a_peer_mapping_keeps_the_memory_and_returns_it_when_dropped() {
    let (a, b) = pair(404);
    let free = |d: &Device| d.with_driver(|d| Ok(d.ctx().mm().free_lists())).unwrap();
    let b0 = free(&b);
    let dst = b.alloc(0x2000, MemKind::Vram).unwrap();
    // The first mapping checks the fabric once (with a probe buffer on each side, returned
    // after the check).
    drop(a.map_peer(&dst).unwrap());
    let a0 = free(&a);
    let peer = a.map_peer(&dst).unwrap();
    drop(dst);
    assert_ne!(
        free(&b),
        b0,
        "device 1's memory is still held by the mapping"
    );
    let src = upload(&a, &words(0x800, 3));
    let mut c = CopyCommands::new(&a);
    c.copy(&peer, &src).unwrap();
    c.submit().unwrap().wait().unwrap();
    assert_eq!(download::<u32>(&a, &peer, 0x800), words(0x800, 3));
    drop((peer, src));
    assert_eq!(free(&b), b0, "device 1's memory went back once unmapped");
    assert_eq!(
        free(&a),
        a0,
        "device 0's virtual range and tables went back"
    );
    clean(&[404, 405]);
}

#[test]
fn copy_between_members_goes_over_the_fabric() {
    let (a, b) = pair(406);
    let data = words(512, 0xabc);
    let src = upload(&b, &data);
    let dst = a.alloc(2048, MemKind::Vram).unwrap();
    a.copy_between(&dst, &b, &src, 2048).unwrap();
    assert_eq!(download::<u32>(&a, &dst, 512), data);
    clean(&[406, 407]);
}

#[test]
fn copy_between_maps_a_source_once_and_unmaps_it_when_the_source_is_freed() {
    let (a, b) = pair(422);
    let free = |d: &Device| d.with_driver(|d| Ok(d.ctx().mm().free_lists())).unwrap();
    let writes = |d: &Device| d.with_driver(|d| Ok(d.ctx().reg_accesses().1)).unwrap();
    let dst = a.alloc(0x2000, MemKind::Vram).unwrap();
    // The pair's fabric check maps (and unmaps) probes of its own; keep it out of the count.
    assert_eq!(a.link_to(&b).unwrap(), am_runtime::Link::Xgmi);
    let a0 = free(&a);
    let src = upload(&b, &words(0x800, 1));
    let first = writes(&a);
    a.copy_between(&dst, &b, &src, 0x2000).unwrap();
    let first = writes(&a) - first;
    assert_eq!(download::<u32>(&a, &dst, 0x800), words(0x800, 1));
    let a1 = free(&a);
    assert_ne!(a1, a0, "the mapping of the source stays after the copy");
    for seed in 2..5 {
        let bytes: Vec<u8> = words(0x800, seed)
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .collect();
        b.write(&src, 0, &bytes).unwrap();
        let before = writes(&a);
        // A view of the source goes through the same mapping, at its offset.
        a.copy_between(&dst, &b, &src.view(0, 0x2000).unwrap(), 0x2000)
            .unwrap();
        assert!(
            writes(&a) - before < first,
            "a later copy writes fewer registers than the one that mapped (no TLB flush)"
        );
        assert_eq!(download::<u32>(&a, &dst, 0x800), words(0x800, seed));
        assert_eq!(free(&a), a1, "no second mapping of the same source");
    }
    drop(src);
    assert_eq!(free(&a), a0, "the mapping went with the source's memory");
    // Memory handed out again is reached through a mapping of its own.
    let again = upload(&b, &words(0x800, 9));
    a.copy_between(&dst, &b, &again, 0x2000).unwrap();
    assert_eq!(download::<u32>(&a, &dst, 0x800), words(0x800, 9));
    drop(again);
    assert_eq!(free(&a), a0);
    clean(&[422, 423]);
}

/// The refusal `a.map_peer(buf)` gives, as text, after checking it is the driver's
/// `NotInOneHive` naming both devices.
fn refusal(a: &Device, b: &Device, size: u64) -> String {
    let buf = b.alloc(size, MemKind::Vram).unwrap();
    let e = a.map_peer(&buf).unwrap_err();
    assert!(
        matches!(
            &e,
            Error::Driver(am_driver::Error {
                kind: am_driver::ErrorKind::NotInOneHive { .. },
                ..
            })
        ),
        "{e}"
    );
    let msg = e.to_string();
    for name in [a.name(), b.name()] {
        assert!(msg.contains(name), "{name} not named: {msg}");
    }
    msg
}

#[test]
fn devices_outside_one_hive_are_refused_by_name() {
    // Two navi31, the source small BAR: no hive at all, and no PCIe peer access to a small
    // BAR. Their copies still go through the host.
    let (a, b) = (
        open_index("navi31", 410),
        open_index("navi31-smallbar", 411),
    );
    let msg = refusal(&a, &b, 64);
    assert!(msg.contains("is in no XGMI hive"), "{msg}");
    assert!(msg.contains("small BAR"), "{msg}");
    let src = upload(&b, &words(64, 9));
    let dst = a.alloc(256, MemKind::Vram).unwrap();
    a.copy_between(&dst, &b, &src, 256).unwrap();
    assert_eq!(download::<u32>(&a, &dst, 64), words(64, 9));
    // System memory of a member is not VRAM to map.
    let (m0, m1) = pair(412);
    let sys = m1.alloc(64, MemKind::System { uncached: false }).unwrap();
    let e = m0.map_peer(&sys).unwrap_err();
    assert!(e.to_string().contains("only VRAM"), "{e}");
    assert!(matches!(
        m0.alloc(64, MemKind::Peer),
        Err(Error::State { .. })
    ));
}

#[test]
fn another_hive_of_the_same_shape_is_refused_after_a_look() {
    // Region 0 of hive 208 and region 1 of hive 209: the registers look like one hive.
    let a = open_index(HIVE, 416);
    let stranger = open_index(HIVE, 419);
    // Region 1 of a's own hive does not exist yet: device 0's probe faults, and the device
    // recovers from it.
    let msg = refusal(&a, &stranger, 64);
    assert!(msg.contains("faulted"), "{msg}");
    let after = upload(&a, &words(16, 1));
    assert_eq!(
        download::<u32>(&a, &after, 16),
        words(16, 1),
        "usable after the refusal"
    );
    // Once region 1 of a's hive exists, the probe reads its memory, not the stranger's.
    let neighbour = open_index(HIVE, 417);
    let msg = refusal(&a, &stranger, 64);
    assert!(msg.contains("different hives"), "{msg}");
    // The real neighbour passes.
    let theirs = upload(&neighbour, &words(16, 2));
    let peer = a.map_peer(&theirs).unwrap();
    assert_eq!(download::<u32>(&a, &peer, 16), words(16, 2));
    clean(&[416, 417, 419]);
}

/// A member's CPU writes through BAR0 are flushed out of its HDP before another member's
/// copy queue can see work that reads them, whatever other threads do with the two devices
/// meanwhile. The copy queue polls its write pointer in memory, so the work is visible from
/// the moment the write pointer is published, not from the doorbell: here a second thread
/// holds the owner's driver (as another thread's submission or register access does) while
/// the copy is submitted, so the owner's flush waits, and a submission that published the
/// write pointer before flushing would let the SDMA engine read the bytes the HDP still held
/// (the mock halts the queue on such a read, and the copy never finishes).
#[test]
fn a_peers_writes_are_flushed_before_a_copy_queue_sees_the_copy() {
    use std::sync::Barrier;
    use std::time::Duration;
    let (a, b) = pair(420);
    let scratch = b.alloc(4096, MemKind::Vram).unwrap();
    // The fabric check done beforehand: the copy below is the only work on a's queue.
    a.map_peer(&scratch).unwrap();
    for round in 0..3u32 {
        let data = words(1024, 0x600d + round);
        let src = upload(&b, &data);
        let peer = a.map_peer(&src).unwrap();
        let dst = a.alloc(4096, MemKind::Vram).unwrap();
        let held = Barrier::new(2);
        std::thread::scope(|s| {
            s.spawn(|| {
                b.with_driver(|_| {
                    held.wait();
                    // Long enough for the copy queue to poll its write pointer many times.
                    std::thread::sleep(Duration::from_millis(200));
                    Ok(())
                })
                .unwrap();
            });
            held.wait();
            let mut c = CopyCommands::new(&a);
            c.copy(&dst, &peer).unwrap();
            c.submit().unwrap().wait().unwrap();
        });
        assert_eq!(download::<u32>(&a, &dst, 1024), data, "round {round}");
    }
    clean(&[420, 421]);
}

/// `peer_view` hands a member's buffer to another member's engines to read where it lies:
/// through the mapping `copy_between` keeps (made once: a second view maps nothing), so it
/// sees the bytes the owner holds at the time of the read, not a copy; the views hold the
/// memory, and the mapping goes with the memory once the views and the source are gone. A
/// buffer of a device outside the hive is refused as outside it.
#[test]
fn a_peer_view_reads_in_place_through_the_kept_mapping() {
    let (a, b) = pair(430);
    let free = |d: &Device| d.with_driver(|d| Ok(d.ctx().mm().free_lists())).unwrap();
    // The pair's fabric check maps (and unmaps) probes of its own; keep it out of the count.
    assert_eq!(a.link_to(&b).unwrap(), am_runtime::Link::Xgmi);
    let dst = a.alloc(0x1000, MemKind::Vram).unwrap();
    let a0 = free(&a);
    let src = upload(&b, &words(0x400, 3));
    let whole = a.peer_view(&src).unwrap();
    assert_eq!(whole.kind(), MemKind::Peer);
    let a1 = free(&a);
    assert_ne!(a1, a0, "the view maps the source's allocation");
    let half = a.peer_view(&src.view(0x800, 0x800).unwrap()).unwrap();
    assert_eq!(free(&a), a1, "a second view goes through the same mapping");
    assert_eq!(half.va(), whole.va() + 0x800);
    let read = |from: &am_runtime::Buffer, len: u64| {
        let mut c = CopyCommands::new(&a);
        c.copy(&dst.view(0, len).unwrap(), from).unwrap();
        c.submit().unwrap().wait().unwrap();
    };
    read(&whole, 0x1000);
    assert_eq!(download::<u32>(&a, &dst, 0x400), words(0x400, 3));
    let bytes: Vec<u8> = words(0x400, 4)
        .iter()
        .flat_map(|w| w.to_le_bytes())
        .collect();
    b.write(&src, 0, &bytes).unwrap();
    read(&half, 0x800);
    assert_eq!(
        download::<u32>(&a, &dst, 0x200),
        words(0x400, 4)[0x200..],
        "the view reads the owner's memory as it is now"
    );
    drop(src);
    drop(whole);
    assert_eq!(
        free(&a),
        a1,
        "a view still holds the memory and its mapping"
    );
    drop(half);
    assert_eq!(free(&a), a0, "the mapping went with the memory");
    let far = open_index("navi31-smallbar", 432);
    let theirs = upload(&far, &words(64, 5));
    let e = a.peer_view(&theirs).unwrap_err();
    assert!(e.is_not_in_one_hive(), "{e}");
    clean(&[430, 431]);
}

/// One graph spanning two hive members orders them on the GPU, over XGMI
/// (`graph_across_two_devices_orders_them_on_the_gpu` says how).
#[test]
fn a_graph_spanning_two_members_orders_them_on_the_gpu_with_no_host_wait_between() {
    let (a, b) = pair(440);
    graph_across_two_devices_orders_them_on_the_gpu(&a, &b);
    clean(&[440, 441]);
}
