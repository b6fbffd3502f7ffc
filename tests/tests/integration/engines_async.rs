//! Queues run beside the CPU: a wait on memory is released by a CPU write from another
//! thread, queues release each other through memory (copy → compute → copy), a blocked
//! queue holds up no other, timestamps only move forward, a CPU write the HDP still holds
//! is caught where the GPU reads it, and a hung queue is recovered and reused.

use std::time::{Duration, Instant};

use am_mock::profile::RegIp;
use am_tests::rig::{Queue, Rig};
use am_tests::{pm4, sdma};

const T: Duration = Duration::from_secs(10);

fn clean(r: &Rig) {
    let v = r.gpu.violations();
    assert!(v.is_empty(), "violations: {v:#?}");
    let w = r.gpu.warnings();
    assert!(w.is_empty(), "warnings: {w:#?}");
}

fn waiting(r: &Rig) -> usize {
    r.gpu.queues().iter().filter(|q| q.1.waiting).count()
}

fn until(what: &str, f: impl Fn() -> bool) {
    let deadline = Instant::now() + T;
    while !f() {
        assert!(Instant::now() < deadline, "{what} never happened");
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// WAIT_REG_MEM on VRAM and on system memory, each released by a write another CPU thread
/// makes while the queue waits.
#[test]
fn a_cpu_write_from_another_thread_releases_a_waiting_queue() {
    let mut r = Rig::new("navi31");
    let mut q = r.compute_queue(0, false, 0x1000);
    let flag_v = r.vram(0x1000);
    let flag_s = r.sysmem(0x1000);
    let out = r.vram(0x1000);
    let mut p = pm4::wait_mem(flag_v.va, 5, u32::MAX, 5);
    p.extend(pm4::write_mem(out.va, &[1]));
    p.extend(pm4::wait_mem(flag_s.va + 8, 0x10, 0x10, 3));
    p.extend(pm4::write_mem(out.va + 4, &[2]));
    q.submit(&r, &p);
    until("the queue blocks", || waiting(&r) == 1);
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(r.u32_at(&out, 0), 0, "nothing past the wait yet");
    std::thread::scope(|s| {
        s.spawn(|| r.write(&flag_v, 0, &4u32.to_le_bytes()));
    });
    std::thread::sleep(Duration::from_millis(10));
    assert_eq!(r.u32_at(&out, 0), 0, "4 is not >= 5");
    std::thread::scope(|s| {
        s.spawn(|| r.write(&flag_v, 0, &7u32.to_le_bytes()));
    });
    r.wait_u32(&out, 0, |v| v == 1, T);
    assert_eq!(r.u32_at(&out, 4), 0, "the second wait holds");
    std::thread::scope(|s| {
        s.spawn(|| r.write(&flag_s, 8, &0xff_u32.to_le_bytes()));
    });
    r.wait_u32(&out, 4, |v| v == 2, T);
    clean(&r);
}

/// WAIT_REG_MEM on a register is released by the driver's MMIO write; the write-then-wait
/// form (the HDP flush request/done pair a memory barrier uses) completes at once and counts
/// as an HDP flush.
#[test]
fn register_waits_and_the_hdp_flush_pair() {
    for profile in ["navi31", "mi300x"] {
        let mut r = Rig::new(profile);
        let mut q = r.compute_queue(0, false, 0x1000);
        let out = r.vram(0x1000);
        let scratch = r.reg(RegIp::Gc, "SCRATCH_REG1");
        let req = r.reg(RegIp::Nbio, "BIF_BX_PF0_GPU_HDP_FLUSH_REQ");
        let done = r.reg(RegIp::Nbio, "BIF_BX_PF0_GPU_HDP_FLUSH_DONE");
        let flushes = r.gpu.hdp_flushes();
        let mut p = pm4::write_wait_reg(req, done, 0x1, 0x1);
        p.extend(pm4::wait_reg(scratch, 7, 0xff, 3));
        p.extend(pm4::write_mem(out.va, &[9]));
        q.submit(&r, &p);
        until("the queue blocks", || waiting(&r) == 1);
        assert!(
            r.gpu.hdp_flushes() >= flushes + 2,
            "{profile}: the CPU's and the CP's flush"
        );
        assert_eq!(r.u32_at(&out, 0), 0);
        r.dev
            .ctx()
            .wreg(am_driver::regs::gc::SCRATCH_REG1, 0, 0x107)
            .unwrap();
        r.wait_u32(&out, 0, |v| v == 9, T);
        clean(&r);
    }
}

fn fence_value(r: &Rig, q: &mut Queue, packets: &[u32]) {
    q.submit(r, packets);
}

/// A copy queue releases a compute queue, which releases the copy queue in turn, through
/// memory only; while the compute queue waits, the copy queue keeps running other work.
#[test]
fn copy_and_compute_queues_release_each_other() {
    for profile in ["navi31", "mi300x"] {
        let mut r = Rig::new(profile);
        let mut cq = r.compute_queue(0, false, 0x1000);
        let mut dq = r.sdma_queue(0, 0x1000);
        let sig = r.vram(0x1000);
        // compute: wait A ≥ 1, then B = 1; SDMA: wait B == 1, then C = 1.
        let mut c = pm4::wait_mem(sig.va, 1, u32::MAX, 5);
        c.extend(pm4::release_mem(sig.va + 8, 1, 1, 0, 0));
        fence_value(&r, &mut cq, &c);
        let mut d = sdma::poll_mem(sig.va + 8, 1, u32::MAX, 3);
        d.extend(sdma::fence(sig.va + 16, 1));
        fence_value(&r, &mut dq, &d);
        until("both queues block", || waiting(&r) == 2);
        // Another SDMA ring is not held up by the blocked ones.
        let mut other = r.sdma_queue(1, 0x1000);
        other.submit(&r, &sdma::fence(sig.va + 24, 0x77));
        r.wait_u32(&sig, 24, |v| v == 0x77, T);
        // A copy releases the compute queue: SDMA1 writes A.
        other.submit(&r, &sdma::fence(sig.va, 1));
        r.wait_u32(&sig, 16, |v| v == 1, T);
        assert_eq!(r.u32_at(&sig, 8), 1, "{profile}");
        // And back: the compute queue releases a copy.
        let mut d2 = sdma::poll_mem(sig.va + 32, 2, u32::MAX, 3);
        d2.extend(sdma::fence(sig.va + 40, 3));
        dq.submit(&r, &d2);
        cq.submit(&r, &pm4::write_mem(sig.va + 32, &[2]));
        r.wait_u32(&sig, 40, |v| v == 3, T);
        clean(&r);
    }
}

/// The GPU clock only moves forward: RELEASE_MEM and SDMA timestamps taken in turn are
/// strictly increasing, and work between two of them makes the gap larger than none does.
#[test]
fn timestamps_are_monotonic() {
    let mut r = Rig::new("navi31");
    let mut cq = r.compute_queue(0, false, 0x4000);
    let mut dq = r.sdma_queue(0, 0x4000);
    let ts = r.vram(0x1000);
    let big = r.vram(8 << 20);
    for i in 0..16u64 {
        if i % 2 == 0 {
            cq.submit(&r, &pm4::release_mem(ts.va + 8 * i, 0, 3, 0, 0));
        } else {
            dq.submit(&r, &sdma::timestamp(ts.va + 8 * i));
        }
        r.idle();
    }
    let t: Vec<u64> = (0..16).map(|i| r.u64_at(&ts, 8 * i)).collect();
    assert!(t.windows(2).all(|w| w[0] < w[1]), "{t:?}");
    let mut p = sdma::timestamp(ts.va + 0x100);
    p.extend(sdma::timestamp(ts.va + 0x108));
    p.extend(sdma::timestamp(ts.va + 0x110));
    p.extend(sdma::copy(big.va, big.va + (4 << 20), 4 << 20));
    p.extend(sdma::timestamp(ts.va + 0x118));
    dq.submit(&r, &p);
    r.idle();
    let [a, b, c, d] = [0x100, 0x108, 0x110, 0x118].map(|o| r.u64_at(&ts, o));
    // Strictly increasing across a copy. How much longer the copy's gap is than the others
    // is host time on a shared machine, not a property to assert (it failed under load).
    assert!(a < b && b < c && c < d, "{a} {b} {c} {d}");
    clean(&r);
}

/// Packets written through BAR0 and rung without an HDP flush are stale for the GPU: the
/// ring fetch is a violation naming the unflushed range, and the queue stops. The same
/// through an IB the CPU did not flush.
#[test]
fn an_unflushed_bar0_write_is_caught_at_the_fetch() {
    let mut r = Rig::new("navi31");
    let mut q = r.compute_queue(0, false, 0x1000);
    let out = r.vram(0x1000);
    q.write(&r, &pm4::write_mem(out.va, &[1]), false);
    q.ring_doorbell(&r);
    until("the queue stops", || r.gpu.queues()[0].1.halted.is_some());
    let h = r.gpu.queues()[0].1.halted.clone().unwrap();
    assert!(
        h.contains("ring fetch") && h.contains("after the last HDP flush"),
        "{h}"
    );
    let v = r.gpu.take_violations();
    assert_eq!(v.len(), 1, "{v:#?}");
    assert_eq!(r.u32_at(&out, 0), 0, "the stale packet did not run");
    // An IB written without a flush, behind a flushed ring.
    let mut r = Rig::new("navi31");
    let mut q = r.compute_queue(0, false, 0x1000);
    let out = r.vram(0x1000);
    let ib = r.vram(0x1000);
    let body = pm4::write_mem(out.va, &[1]);
    let bytes: Vec<u8> = body.iter().flat_map(|d| d.to_le_bytes()).collect();
    r.write_noflush(&ib, 0, &bytes);
    q.write(&r, &pm4::indirect(ib.va, body.len()), false);
    // A flush covers the ring (and the IB as written so far); the IB written again after
    // it is what the CP must not read.
    r.dev.hdp_flush().unwrap();
    r.write_noflush(&ib, 0, &bytes);
    q.ring_doorbell(&r);
    until("the queue stops", || r.gpu.queues()[0].1.halted.is_some());
    let h = r.gpu.queues()[0].1.halted.clone().unwrap();
    assert!(h.contains("IB fetch") && h.contains("HDP"), "{h}");
    assert_eq!(r.gpu.take_violations().len(), 1);
}

/// A wait that never ends is a hang: nothing signals, the driver recovers (the MEC is reset,
/// the HQDs go), and a queue created again on the same ring runs new work.
#[test]
fn a_hung_queue_is_recovered_and_reused() {
    for profile in ["navi31", "mi300x"] {
        let mut r = Rig::new(profile);
        let mut q = r.compute_queue(0, false, 0x1000);
        let sig = r.vram(0x1000);
        let mut p = pm4::wait_mem(sig.va, 1, u32::MAX, 3);
        p.extend(pm4::release_mem(sig.va + 8, 1, 1, 0, 0));
        q.submit(&r, &p);
        until("the queue blocks", || waiting(&r) == 1);
        std::thread::sleep(Duration::from_millis(30));
        assert_eq!(r.u32_at(&sig, 8), 0, "{profile}: hung: no signal");
        r.dev.recover().unwrap();
        until("the hung queue goes away", || r.gpu.queues().is_empty());
        let mut q = r.compute_queue(0, false, 0x1000);
        q.submit(&r, &pm4::release_mem(sig.va + 8, 2, 1, 0, 0));
        r.wait_u32(&sig, 8, |v| v == 2, T);
        clean(&r);
    }
}
