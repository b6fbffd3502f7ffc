//! Kernels compiled by LLVM 22 dispatched through the mock's command processor: exact
//! results from DISPATCH_DIRECT, page faults of a dispatch and of a copy decoded by the
//! driver, a hung kernel stopped by the watchdog and the queue recovered, and AQL queues on
//! the eight XCCs of mi300x; loads whose lanes read scattered addresses (one translation
//! for the wave) with the faults and stale reads of lane-by-lane loads; a load of a wave's
//! consecutive words that meets a hole or a stale word partway.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use am_driver::irq::IrqEvent;
use am_driver::mm::VramAccess;
use am_driver::{AmDevice, Error, ErrorKind};
use am_tests::kernels::{Loaded, compile_cl, dispatch};
use am_tests::rig::{Rig, aql_barrier, aql_dispatch, aql_pm4_ib};
use am_tests::{pm4, sdma};

const T: Duration = Duration::from_secs(20);

const SRC: &str = r#"
kernel void axpy(global const float *x, global float *y, uint n) {
  uint i = __builtin_amdgcn_workgroup_id_x() * 64 + __builtin_amdgcn_workitem_id_x();
  if (i < n) y[i] = 2.5f * x[i] + y[i];
}
kernel void ids(global uint *out) {
  uint g = __builtin_amdgcn_workgroup_id_x() + 4 * __builtin_amdgcn_workgroup_id_y();
  out[g * 32 + __builtin_amdgcn_workitem_id_x()] = g * 1000 + __builtin_amdgcn_workitem_id_x();
}
kernel void wild(global uint *p) {
  p[((ulong)__builtin_amdgcn_workitem_id_x() + 1) << 34] = 1;
}
kernel void gather(global const uint *src, global const uint *idx, global uint *out) {
  uint i = __builtin_amdgcn_workitem_id_x();
  out[i] = src[idx[i]];
}
kernel void window(global const uint *src, global uint *out, uint off) {
  uint i = __builtin_amdgcn_workitem_id_x();
  out[i] = src[i + off];
}
kernel void spin(global volatile uint *p) {
  while (p[0] == 0) { }
}
"#;

fn gfx1100() -> &'static [u8] {
    static B: OnceLock<Vec<u8>> = OnceLock::new();
    B.get_or_init(|| compile_cl(SRC, "gfx1100"))
}

fn until(what: &str, f: impl Fn() -> bool) {
    let deadline = Instant::now() + T;
    while !f() {
        assert!(Instant::now() < deadline, "{what} never happened");
        std::thread::sleep(Duration::from_micros(200));
    }
}

fn halted(r: &Rig) -> String {
    until("a queue stops", || {
        r.gpu.queues().iter().any(|q| q.1.halted.is_some())
    });
    r.gpu
        .queues()
        .iter()
        .find_map(|q| q.1.halted.clone())
        .unwrap()
}

fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// `y = 2.5·x + y` over 1000 elements (16 workgroups of 64, the last partial) and a 2-D grid
/// of workgroup ids, dispatched by PM4 DISPATCH_DIRECT: every value exact.
#[test]
fn a_compiled_kernel_runs_through_dispatch_direct() {
    let mut r = Rig::new("navi31");
    let mut q = r.compute_queue(0, false, 0x4000);
    let l = Loaded::new(&r, gfx1100());
    let n = 1000u32;
    let x: Vec<f32> = (0..n).map(|i| i as f32 * 0.25 - 7.0).collect();
    let y: Vec<f32> = (0..n).map(|i| (i % 13) as f32).collect();
    let bx = r.vram(4 * 1024);
    let by = r.vram(4 * 1024);
    r.write(&bx, 0, &f32s(&x));
    r.write(&by, 0, &f32s(&y));
    let args = r.vram(0x1000);
    let mut a = bx.va.to_le_bytes().to_vec();
    a.extend(by.va.to_le_bytes());
    a.extend(n.to_le_bytes());
    r.write(&args, 0, &a);
    let done = r.vram(0x1000);
    let axpy = l.kernel("axpy");
    let mut p = dispatch(&r, &l, axpy, args.va, [n.div_ceil(64), 1, 1], [64, 1, 1]);
    p.extend(pm4::release_mem(done.va, 1, 1, 0, 0));
    // A 4 × 3 grid of workgroups of 32.
    let out = r.vram(0x4000);
    r.write(&args, 0x100, &out.va.to_le_bytes());
    let ids = l.kernel("ids");
    p.extend(dispatch(
        &r,
        &l,
        ids,
        args.va + 0x100,
        [4, 3, 1],
        [32, 1, 1],
    ));
    p.extend(pm4::release_mem(done.va + 8, 1, 1, 0, 0));
    q.submit(&r, &p);
    r.wait_u32(&done, 8, |v| v == 1, T);
    let got = r.read(&by, 0, 4 * n as usize);
    for i in 0..n as usize {
        let v = f32::from_le_bytes(got[4 * i..4 * i + 4].try_into().unwrap());
        assert_eq!(v.to_bits(), (2.5f32 * x[i] + y[i]).to_bits(), "y[{i}]");
    }
    for g in 0..12u32 {
        for t in 0..32u32 {
            assert_eq!(r.u32_at(&out, 4 * u64::from(g * 32 + t)), g * 1000 + t);
        }
    }
    assert_eq!(r.gpu.queues()[0].1.dispatches, 2);
    assert!(r.gpu.violations().is_empty(), "{:#?}", r.gpu.violations());
}

/// A 2 MiB page entry whose address is aligned to 4 KiB only, as tinygrad's AM maps its
/// kernel-argument buffer (VRAM 0x2034000 with 2 MiB entries) and runs kernels with it on real
/// Navi 31: the CP's COPY_DATA, an SDMA copy, and a kernel's scalar (kernel-argument) and
/// vector loads all read the byte at the entry's address plus the offset in the page.
#[test]
fn a_huge_page_at_an_address_not_aligned_to_its_size_reads_from_that_address() {
    const SHIFT: u64 = 0x3_4000;
    let mut r = Rig::new("navi31");
    let mut cq = r.compute_queue(0, false, 0x4000);
    let mut sq = r.sdma_queue(0, 0x4000);
    let l = Loaded::new(&r, gfx1100());
    // 4 MiB of contiguous VRAM: the driver maps it with two 2 MiB entries.
    let big = r.vram(4 << 20);
    let words: Vec<u32> = (0..1u32 << 20).collect();
    r.write_u32s(&big, 0, &words);
    // Kernel arguments and inputs where the moved page puts them: offset SHIFT + off.
    let n = 64u32;
    let x: Vec<f32> = (0..n).map(|i| i as f32 * 0.5 - 3.0).collect();
    r.write(&big, SHIFT + 0x3000, &f32s(&x));
    let y = r.vram(0x1000);
    r.write(&y, 0, &[0; 0x1000]);
    let out = r.vram(0x1000);
    let mut a = (big.va + 0x3000).to_le_bytes().to_vec();
    a.extend(y.va.to_le_bytes());
    a.extend(n.to_le_bytes());
    r.write(&big, SHIFT + 0x2000, &a);
    // Move the first 2 MiB entry SHIFT bytes further (its address field holds bits 47:12).
    let ctx = r.dev.ctx();
    let t = ctx.mm().tables.walk(&ctx.vram, big.va).unwrap().unwrap();
    assert_eq!(t.page_size, 2 << 20, "the driver mapped a 2 MiB page");
    ctx.vram.write64(t.entry_addr, t.entry + SHIFT).unwrap();
    // Any mapping flushes the TLBs; this one also gives the SDMA copy its destination.
    let sdma_out = r.vram(0x1000);
    let mut p = pm4::copy_data(1, big.va + 0x100, 5, out.va, false);
    p.extend(dispatch(
        &r,
        &l,
        l.kernel("axpy"),
        big.va + 0x2000,
        [1, 1, 1],
        [64, 1, 1],
    ));
    p.extend(pm4::release_mem(out.va + 8, 1, 1, 0, 0));
    cq.submit(&r, &p);
    let mut c = sdma::copy(big.va + 0x1000, sdma_out.va, 64);
    c.extend(sdma::fence(sdma_out.va + 0x100, 1));
    sq.submit(&r, &c);
    r.wait_u32(&out, 8, |v| v == 1, T);
    r.wait_u32(&sdma_out, 0x100, |v| v == 1, T);
    let at = |off: u64| ((SHIFT + off) / 4) as u32;
    assert_eq!(
        r.u32_at(&out, 0),
        at(0x100),
        "COPY_DATA read through the page"
    );
    for i in 0..16u64 {
        assert_eq!(
            r.u32_at(&sdma_out, 4 * i),
            at(0x1000 + 4 * i),
            "SDMA dword {i}"
        );
    }
    let got = r.read(&y, 0, 4 * n as usize);
    for i in 0..n as usize {
        let v = f32::from_le_bytes(got[4 * i..4 * i + 4].try_into().unwrap());
        assert_eq!(
            v.to_bits(),
            (2.5f32 * x[i]).to_bits(),
            "y[{i}]: kernel arguments and x read through the page"
        );
    }
    assert!(r.gpu.violations().is_empty(), "{:#?}", r.gpu.violations());
}

/// A kernel that writes far outside any mapping faults: the hub latches it, the IH entry
/// reaches the driver, which names the VA; the queue stops and says which dispatch. An
/// SDMA copy into unmapped memory is decoded the same way.
#[test]
fn faulting_dispatch_and_copy_are_decoded_by_the_driver() {
    let mut r = Rig::new("navi31");
    let mut q = r.compute_queue(0, false, 0x1000);
    let l = Loaded::new(&r, gfx1100());
    let buf = r.vram(0x1000);
    let args = r.vram(0x1000);
    r.write(&args, 0, &buf.va.to_le_bytes());
    let wild = l.kernel("wild");
    q.submit(&r, &dispatch(&r, &l, wild, args.va, [1, 1, 1], [32, 1, 1]));
    let h = halted(&r);
    assert!(
        h.contains("page fault") && h.contains(&format!("{:#x}", l.entry(wild))),
        "{h}"
    );
    let detail = page_fault(&mut r.dev);
    let va = buf.va + (1 << 36);
    assert!(
        detail.contains(&format!("{:#x}", va >> 12 << 12)),
        "the faulting page in {detail}"
    );
    r.dev.recover().unwrap();
    assert!(r.gpu.violations().is_empty(), "{:#?}", r.gpu.violations());

    let mut r = Rig::new("mi300x");
    let mut d = r.sdma_queue(0, 0x1000);
    let src = r.vram(0x1000);
    d.submit(&r, &sdma::copy(src.va, 0x7000_0000_0000, 0x100));
    let h = halted(&r);
    assert!(h.contains("COPY_LINEAR") && h.contains("page fault"), "{h}");
    let err = r.dev.handle_interrupts().unwrap_err().to_string();
    assert!(err.contains("0x700000000000"), "{err}");
    assert!(r.gpu.violations().is_empty(), "{:#?}", r.gpu.violations());
}

/// Runs `gather` over 64 lanes with indices `idx` into `src` (256 KiB, `src[k] = 3k + 1`);
/// `stale` (a word index) is written again through BAR0 after the last HDP flush. Returns the
/// rig, the output buffer, `src`'s address and whether the dispatch completed.
fn run_gather(idx: &[u32; 64], stale: Option<u64>) -> (Rig, am_tests::rig::Buf, u64, bool) {
    let mut r = Rig::new("navi31");
    let mut q = r.compute_queue(0, false, 0x4000);
    let l = Loaded::new(&r, gfx1100());
    let src = r.vram(256 << 10);
    let words: Vec<u32> = (0..64u32 << 10).map(|k| 3 * k + 1).collect();
    r.write_u32s(&src, 0, &words);
    let ib = r.vram(0x1000);
    r.write_u32s(&ib, 0, idx);
    let out = r.vram(0x1000);
    r.write(&out, 0, &[0; 0x1000]);
    let args = r.vram(0x1000);
    let mut a = src.va.to_le_bytes().to_vec();
    a.extend(ib.va.to_le_bytes());
    a.extend(out.va.to_le_bytes());
    r.write(&args, 0, &a);
    let done = r.vram(0x1000);
    let mut p = dispatch(&r, &l, l.kernel("gather"), args.va, [1, 1, 1], [64, 1, 1]);
    p.extend(pm4::release_mem(done.va, 1, 1, 0, 0));
    // The packets flushed, then the stale word: the kernel's load is the first to meet it.
    q.write(&r, &p, true);
    if let Some(w) = stale {
        r.write_noflush(&src, 4 * w, &(3 * w as u32 + 1).to_le_bytes());
    }
    q.ring_doorbell(&r);
    let finished = finished_or_stopped(&r, &done, "the gather");
    (r, out, src.va, finished)
}

/// Lanes at scattered addresses — a broadcast, a stride of a page, a reversed run — read
/// exactly what each lane addresses; a stale word no lane reads stops nothing.
#[test]
fn a_scattered_load_reads_each_lanes_address() {
    let mut idx = [0u32; 64];
    for (l, x) in idx.iter_mut().enumerate() {
        let l = l as u32;
        // The first wave of 32 a broadcast; the second a page stride, then a reversed run.
        *x = match l {
            0..32 => 7,
            32..48 => 1024 * (l - 32) + l,
            _ => 2 * (63 - l) + 5,
        };
    }
    // Word 8 lies between lanes' words (7 and 9): the range the second wave spans holds it.
    let (r, out, _, finished) = run_gather(&idx, Some(8));
    assert!(finished, "{:?}", r.gpu.queues()[0].1.halted);
    for (l, &k) in idx.iter().enumerate() {
        assert_eq!(
            r.u32_at(&out, 4 * l as u64),
            3 * k + 1,
            "lane {l} read src[{k}]"
        );
    }
    assert!(r.gpu.violations().is_empty(), "{:#?}", r.gpu.violations());
}

/// A scattered load with one lane outside any mapping faults at that lane's page; one with
/// a lane reading a word the CPU wrote after the last HDP flush stops as a stale read.
#[test]
fn a_scattered_load_faults_and_refuses_stale_bytes_per_lane() {
    let mut idx: [u32; 64] = std::array::from_fn(|l| 1024 * (l as u32 % 60));
    idx[37] = 0xf000_0000;
    let (mut r, _, src, finished) = run_gather(&idx, None);
    assert!(!finished);
    let h = halted(&r);
    // Lane 37 is lane 5 of the second wave of 32.
    assert!(h.contains("page fault") && h.contains("lane 5:"), "{h}");
    let detail = page_fault(&mut r.dev);
    let va = src + 4 * 0xf000_0000;
    assert!(
        detail.contains(&format!("{:#x}", va >> 12 << 12)),
        "lane 37's page in {detail}"
    );

    let idx: [u32; 64] = std::array::from_fn(|l| 1024 * (l as u32 % 60) + 3);
    let (r, out, _, finished) = run_gather(&idx, Some(1024 * 21 + 3));
    assert!(!finished);
    let h = halted(&r);
    assert!(
        h.contains("after the last HDP flush") && h.contains("lane 21:"),
        "{h}"
    );
    assert_eq!(r.u32_at(&out, 0), 0, "no lane's value was stored");
}

/// Runs `window` over one wave of 32 lanes on navi31: lane `l` copies `src[off + l]` (a
/// contiguous wave, one range for the coalescer) from `src`, 4 KiB written `src[k] = 5k + 2`
/// and allocated last, so the page after it is mapped to nothing; `stale` (a word index) is
/// written again through BAR0 after the last HDP flush. Returns the rig, the output, `src`'s
/// address and whether the dispatch completed.
fn run_window(off: u32, stale: Option<u64>) -> (Rig, am_tests::rig::Buf, u64, bool) {
    let mut r = Rig::new("navi31");
    let mut q = r.compute_queue(0, false, 0x4000);
    let l = Loaded::new(&r, gfx1100());
    let out = r.vram(0x1000);
    r.write(&out, 0, &[0; 0x1000]);
    let args = r.vram(0x1000);
    let done = r.vram(0x1000);
    let src = r.vram(0x1000);
    let words: Vec<u32> = (0..1024u32).map(|k| 5 * k + 2).collect();
    r.write_u32s(&src, 0, &words);
    let mut a = src.va.to_le_bytes().to_vec();
    a.extend(out.va.to_le_bytes());
    a.extend(off.to_le_bytes());
    r.write(&args, 0, &a);
    let mut p = dispatch(&r, &l, l.kernel("window"), args.va, [1, 1, 1], [32, 1, 1]);
    p.extend(pm4::release_mem(done.va, 1, 1, 0, 0));
    q.write(&r, &p, true);
    if let Some(w) = stale {
        r.write_noflush(&src, 4 * w, &(5 * w as u32 + 2).to_le_bytes());
    }
    q.ring_doorbell(&r);
    let finished = finished_or_stopped(&r, &done, "the window copy");
    (r, out, src.va, finished)
}

/// A wave's load of 32 consecutive words (one range) reads them all; one whose range runs
/// off its mapping faults at the first lane past it, and the page fault names the first
/// page the range could not reach; one whose range holds a word the CPU wrote after the
/// last HDP flush stops at the lane that reads it, the refusal naming the range's read
/// (the whole wave's access, as the coalescer made it) and the stale word.
#[test]
fn a_contiguous_load_faults_and_refuses_stale_bytes_at_the_lane_that_meets_them() {
    let (r, out, _, finished) = run_window(100, None);
    assert!(finished, "{:?}", r.gpu.queues()[0].1.halted);
    for l in 0..32u32 {
        assert_eq!(r.u32_at(&out, 4 * l as u64), 5 * (100 + l) + 2, "lane {l}");
    }

    // Lanes 0-9 read the buffer's last ten words, lanes 10-31 the unmapped page after it.
    let (mut r, out, src, finished) = run_window(1014, None);
    assert!(!finished);
    let h = halted(&r);
    assert!(h.contains("page fault") && h.contains("lane 10:"), "{h}");
    let detail = page_fault(&mut r.dev);
    assert!(
        detail.contains(&format!("{:#x}", src + 0x1000)),
        "the page after the buffer in {detail}"
    );
    assert_eq!(r.u32_at(&out, 0), 0, "no lane's value was stored");

    let (r, out, src, finished) = run_window(200, Some(221));
    assert!(!finished);
    let h = halted(&r);
    let stale = src + 4 * 221;
    assert!(
        h.contains("after the last HDP flush")
            && h.contains("lane 21:")
            && h.contains(&format!("read of {:#x} reaches VRAM", src + 4 * 200))
            && h.contains(&format!("of {stale:#x}")),
        "{h}"
    );
    assert_eq!(r.u32_at(&out, 0), 0, "no lane's value was stored");
}

/// A kernel that never ends runs into the watchdog: its queue stops, nothing signals; the
/// driver recovers and a new queue runs the next kernel.
#[test]
fn a_hung_kernel_is_stopped_and_the_device_recovers() {
    let mut r = Rig::new("navi31");
    r.gpu.set_watchdog(200_000);
    let mut q = r.compute_queue(0, false, 0x1000);
    let l = Loaded::new(&r, gfx1100());
    let flag = r.vram(0x1000);
    let args = r.vram(0x1000);
    r.write(&args, 0, &flag.va.to_le_bytes());
    let done = r.vram(0x1000);
    let mut p = dispatch(&r, &l, l.kernel("spin"), args.va, [1, 1, 1], [32, 1, 1]);
    p.extend(pm4::release_mem(done.va, 1, 1, 0, 0));
    q.submit(&r, &p);
    let h = halted(&r);
    assert!(h.contains("hung") && h.contains("watchdog"), "{h}");
    assert_eq!(r.u32_at(&done, 0), 0, "a hung queue never signals");
    r.dev.recover().unwrap();
    until("the queue goes", || r.gpu.queues().is_empty());
    let mut q = r.compute_queue(0, false, 0x1000);
    r.write(&flag, 0, &1u32.to_le_bytes());
    let mut p = dispatch(&r, &l, l.kernel("spin"), args.va, [1, 1, 1], [32, 1, 1]);
    p.extend(pm4::release_mem(done.va, 2, 1, 0, 0));
    q.submit(&r, &p);
    r.wait_u32(&done, 0, |v| v == 2, T);
    assert!(r.gpu.violations().is_empty(), "{:#?}", r.gpu.violations());
}

/// An AQL queue on all eight XCCs: a PM4-IB vendor packet runs its IB on every XCC
/// (PRED_EXEC picks XCC 3 alone for one write), a barrier-AND waits for a signal the CPU
/// releases, completion signals count down, and the read index is written back. Then a
/// kernel compiled for the part's ISA, dispatched by an AQL packet, runs its workgroups
/// spread over the XCCs with exact results.
#[test]
fn mi300x_aql_queue_runs_vendor_and_barrier_packets() {
    aql_queue("mi300x");
}

/// The same on the MI350X VF (the PF owns PSP and SMU; the queues are the VF's).
#[test]
fn mi350x_vf_aql_queue_runs_vendor_and_barrier_packets() {
    aql_queue("mi350x-vf");
}

fn aql_queue(profile: &str) {
    let mut r = Rig::new(profile);
    let mut q = r.compute_queue(0, true, 0x1000);
    assert_eq!(r.gpu.active_queues().len(), 8, "one HQD per XCC");
    let out = r.vram(0x1000);
    let sig = r.vram(0x1000);
    // amd_signal_t values at +8: the completion signal starts at 2, the dependency at 1.
    r.write(&sig, 8, &2u64.to_le_bytes());
    r.write(&sig, 0x48, &1u64.to_le_bytes());
    let ib = r.vram(0x1000);
    let mut body = pm4::write_mem(out.va, &[0x11]);
    let only3 = pm4::write_mem(out.va + 4, &[0x33]);
    body.extend(pm4::pred_exec(1 << 3, only3.len()));
    body.extend(&only3);
    let count = pm4::copy_data(1, out.va + 0x10, 5, out.va + 0x14, false);
    body.extend(&count);
    r.write_u32s(&ib, 0, &body);
    let mut p = aql_pm4_ib(ib.va, body.len(), sig.va);
    p.extend(aql_barrier(true, &[sig.va + 0x40], sig.va));
    p.extend(aql_pm4_ib(ib.va, pm4::write_mem(0, &[0]).len(), 0));
    q.submit(&r, &p);
    // Waiting alone is not enough: a packet processor also waits on a header it finds not
    // yet valid. The first packet's completion signal says it has run on every XCC.
    until("the barrier blocks", || {
        r.u64_at(&sig, 8) == 1 && r.gpu.queues()[0].1.waiting
    });
    assert_eq!(r.u32_at(&out, 0), 0x11);
    assert_eq!(r.u32_at(&out, 4), 0x33, "PRED_EXEC ran on XCC 3");
    assert_eq!(r.u64_at(&sig, 8), 1, "the first packet's completion signal");
    r.write(&sig, 0x48, &0u64.to_le_bytes());
    until("the queue drains", || r.gpu.queues()[0].1.rptr == 3);
    assert_eq!(r.u64_at(&sig, 8), 0, "the barrier's completion signal");
    assert_eq!(q.rptr(&r), 3, "read dispatch id written back");
    assert!(r.gpu.violations().is_empty(), "{:#?}", r.gpu.violations());

    // A kernel for the part's ISA: y = 2.5·x + y over 1000 elements, 16 workgroups of 64
    // spread over the eight XCCs.
    let mcpu = if profile.starts_with("mi350") {
        "gfx950"
    } else {
        "gfx942"
    };
    let l = Loaded::new(&r, &compile_cl(SRC, mcpu));
    let k = l.kernel("axpy");
    let n = 1000usize;
    let x: Vec<f32> = (0..n).map(|i| i as f32 * 0.25).collect();
    let y: Vec<f32> = (0..n).map(|i| 1.0 - i as f32).collect();
    let (bx, by) = (r.vram(4 * n as u64), r.vram(4 * n as u64));
    r.write(&bx, 0, &f32s(&x));
    r.write(&by, 0, &f32s(&y));
    let args = r.vram(0x1000);
    let mut a = bx.va.to_le_bytes().to_vec();
    a.extend(by.va.to_le_bytes());
    a.extend((n as u32).to_le_bytes());
    r.write(&args, 0, &a);
    r.write(&sig, 8, &1u64.to_le_bytes());
    q.submit(
        &r,
        &aql_dispatch([64, 1, 1], [1024, 1, 1], l.descriptor(k), args.va, sig.va),
    );
    until("the dispatch completes", || r.u64_at(&sig, 8) == 0);
    let got = r.read(&by, 0, 4 * n);
    for i in 0..n {
        let g = f32::from_le_bytes(got[4 * i..4 * i + 4].try_into().unwrap());
        assert_eq!(
            g.to_bits(),
            2.5f32.mul_add(x[i], y[i]).to_bits(),
            "{profile}: y[{i}]"
        );
    }
    assert!(r.gpu.violations().is_empty(), "{:#?}", r.gpu.violations());
}

/// The page fault the device's interrupts report next, printed.
fn page_fault(dev: &mut AmDevice) -> String {
    let err = dev.handle_interrupts().unwrap_err();
    let Error {
        kind: ErrorKind::GpuFault(fault @ IrqEvent::PageFault(_)),
        ..
    } = &err
    else {
        panic!("not a page fault: {err}")
    };
    fault.to_string()
}

/// Waits until the dispatch's `RELEASE_MEM` writes 1 at `done` (true) or a queue stops
/// (false); `what` names the work if neither happens in time.
fn finished_or_stopped(r: &Rig, done: &am_tests::rig::Buf, what: &str) -> bool {
    let deadline = Instant::now() + T;
    loop {
        if r.u32_at(done, 0) == 1 {
            return true;
        }
        if r.gpu.queues().iter().any(|q| q.1.halted.is_some()) {
            return false;
        }
        assert!(
            Instant::now() < deadline,
            "{what} neither finished nor stopped"
        );
        std::thread::sleep(Duration::from_micros(200));
    }
}
