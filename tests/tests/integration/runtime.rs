//! The HCQ runtime end to end on the mock: kernels compiled by LLVM 22 run through command
//! buffers with exact results; buffers, copies and staging; cross-queue waits; graphs
//! replayed with patched arguments and values; hangs and faults reported and recovered from;
//! profiling; several queues and devices; allocations returned.

use std::time::Duration;

use am_runtime::{Arg, ComputeCommands, CopyCommands, Device, Error, Graph, MemKind};
use am_tests::runtime::{Rng, download, kernel, open, upload};

const G1: [u32; 3] = [1, 1, 1];

fn f32s(n: usize, seed: u64, lo: f32, hi: f32) -> Vec<f32> {
    let mut r = Rng(seed);
    (0..n).map(|_| r.f32(lo, hi)).collect()
}

fn emulator_kernels_give_exact_results(profile: &str) {
    let (gpu, dev) = open(profile);
    let (target, aql) = match profile {
        "navi31" => ("gfx1100", false),
        "navi48" => ("gfx1201", false),
        "mi300x" => ("gfx942", true),
        _ => ("gfx950", true),
    };
    assert_eq!(
        (dev.info().target.name(), dev.info().aql),
        (target, aql),
        "{profile}"
    );

    // vadd over 1000 elements: the last workgroup is partly outside.
    let n = 1000usize;
    let (a, b) = (f32s(n, 1, -10.0, 10.0), f32s(n, 2, -10.0, 10.0));
    let (ba, bb) = (upload(&dev, &a), upload(&dev, &b));
    let bc = dev.alloc(4 * 1024, MemKind::Vram).unwrap();
    let vadd = kernel(&dev, "vadd");
    let mut c = ComputeCommands::new(&dev);
    c.exec(
        &vadd,
        &[(&ba).into(), (&bb).into(), (&bc).into(), Arg::U32(n as u32)],
        [4, 1, 1],
        [256, 1, 1],
    )
    .unwrap();
    // saxpy in the same command buffer, after vadd (each launch waits for the one before).
    let alpha = 1.7f32;
    let y = f32s(512, 3, -1.0, 1.0);
    let by = upload(&dev, &y);
    let saxpy = kernel(&dev, "saxpy");
    c.exec(
        &saxpy,
        &[Arg::F32(alpha), (&ba).into(), (&by).into(), Arg::U32(512)],
        [2, 1, 1],
        [256, 1, 1],
    )
    .unwrap();
    // A tiled matmul through LDS with barriers, 2-D launch.
    let m = 32usize;
    let (ma, mb) = (f32s(m * m, 4, -1.0, 1.0), f32s(m * m, 5, -1.0, 1.0));
    let (bma, bmb) = (upload(&dev, &ma), upload(&dev, &mb));
    let bmc = dev.alloc((4 * m * m) as u64, MemKind::Vram).unwrap();
    let matmul = kernel(&dev, "matmul");
    c.exec(
        &matmul,
        &[
            (&bma).into(),
            (&bmb).into(),
            (&bmc).into(),
            Arg::U32(m as u32),
        ],
        [2, 2, 1],
        [16, 16, 1],
    )
    .unwrap();
    assert_eq!(c.dispatches(), 3);
    c.submit().unwrap().wait().unwrap();

    let got: Vec<f32> = download(&dev, &bc, n);
    for k in 0..n {
        assert_eq!(got[k].to_bits(), (a[k] + b[k]).to_bits(), "vadd c[{k}]");
    }
    let got: Vec<f32> = download(&dev, &by, 512);
    for k in 0..512 {
        assert_eq!(
            got[k].to_bits(),
            alpha.mul_add(a[k], y[k]).to_bits(),
            "saxpy y[{k}]"
        );
    }
    let got: Vec<f32> = download(&dev, &bmc, m * m);
    for i in 0..m {
        for j in 0..m {
            let mut acc = 0.0f32;
            for k in 0..m {
                acc = ma[i * m + k].mul_add(mb[k * m + j], acc);
            }
            assert_eq!(got[i * m + j].to_bits(), acc.to_bits(), "C[{i}][{j}]");
        }
    }
    assert!(gpu.violations().is_empty(), "{:#?}", gpu.violations());
}

fn reductions_integer_division_scratch_and_dispatch_packet_kernels_are_exact(profile: &str) {
    let (gpu, dev) = open(profile);
    // Workgroup sums through LDS.
    let x = f32s(1024, 7, -1.0, 1.0);
    let bx = upload(&dev, &x);
    let out = dev.alloc(16, MemKind::Vram).unwrap();
    let mut c = ComputeCommands::new(&dev);
    c.exec(
        &kernel(&dev, "reduce"),
        &[(&bx).into(), (&out).into()],
        [4, 1, 1],
        [256, 1, 1],
    )
    .unwrap();
    // Integer division of every sign combination.
    let n = 128usize;
    let mut r = Rng(9);
    let a: Vec<i32> = (0..n).map(|_| r.bits() as i32).collect();
    let b: Vec<i32> = (0..n)
        .map(|i| {
            let v = (r.bits() % 1000) as i32 + 1;
            if i % 2 == 0 { v } else { -v }
        })
        .collect();
    let (ba, bb) = (upload(&dev, &a), upload(&dev, &b));
    let outs: Vec<_> = (0..4)
        .map(|_| dev.alloc(4 * n as u64, MemKind::Vram).unwrap())
        .collect();
    let mut args = vec![(&ba).into(), (&bb).into()];
    args.extend(outs.iter().map(Arg::from));
    c.exec(&kernel(&dev, "idiv"), &args, [2, 1, 1], [64, 1, 1])
        .unwrap();
    // A private array in scratch.
    let priv_k = kernel(&dev, "priv");
    assert!(priv_k.scratch > 0, "priv uses scratch");
    let idx: Vec<u32> = (0..n as u32).map(|i| i * 37 % 64).collect();
    let bidx = upload(&dev, &idx);
    let pout = dev.alloc(4 * n as u64, MemKind::Vram).unwrap();
    c.exec(
        &priv_k,
        &[(&bidx).into(), (&pout).into()],
        [2, 1, 1],
        [64, 1, 1],
    )
    .unwrap();
    // Sizes read through the dispatch pointer.
    let sout = dev.alloc(4 * 256, MemKind::Vram).unwrap();
    c.exec(
        &kernel(&dev, "sizes"),
        &[(&sout).into()],
        [4, 1, 1],
        [64, 1, 1],
    )
    .unwrap();
    c.submit().unwrap().wait().unwrap();

    let sums: Vec<f32> = download(&dev, &out, 4);
    for g in 0..4 {
        // The kernel's tree order.
        let mut t: Vec<f32> = x[g * 256..(g + 1) * 256].to_vec();
        let mut s = 128;
        while s > 0 {
            for i in 0..s {
                t[i] += t[i + s];
            }
            s >>= 1;
        }
        assert_eq!(sums[g].to_bits(), t[0].to_bits(), "sum of group {g}");
    }
    let got: Vec<Vec<u32>> = outs.iter().map(|o| download(&dev, o, n)).collect();
    for k in 0..n {
        let (x, y) = (a[k], b[k]);
        assert_eq!(got[0][k] as i32, x.wrapping_div(y), "{x} / {y}");
        assert_eq!(got[1][k] as i32, x.wrapping_rem(y), "{x} % {y}");
        assert_eq!(got[2][k], x as u32 / y as u32, "{x} /u {y}");
        assert_eq!(got[3][k], x as u32 % y as u32, "{x} %u {y}");
    }
    let got: Vec<u32> = download(&dev, &pout, n);
    for (i, g) in got.iter().enumerate() {
        assert_eq!(*g, i as u32 * 1000 + idx[i], "priv out[{i}]");
    }
    // The dispatch packet says 64 work-items per group and a grid of 256.
    let got: Vec<u32> = download(&dev, &sout, 256);
    for (i, g) in got.iter().enumerate() {
        assert_eq!(*g, 64 * 100_000 + 256, "sizes out[{i}]");
    }
    assert!(gpu.violations().is_empty(), "{:#?}", gpu.violations());
}

#[test]
fn wrong_arguments_and_launch_sizes_are_refused_naming_the_kernel() {
    let (_gpu, dev) = open("navi31");
    let vadd = kernel(&dev, "vadd");
    let b = dev.alloc(64, MemKind::Vram).unwrap();
    let mut c = ComputeCommands::new(&dev);
    let e = c.exec(&vadd, &[(&b).into()], G1, [64, 1, 1]).err().unwrap();
    assert!(matches!(e, Error::Argument { .. }), "{e}");
    assert!(
        e.to_string().contains("vadd") && e.to_string().contains("takes 4"),
        "{e}"
    );
    let e = c
        .exec(
            &vadd,
            &[(&b).into(), (&b).into(), (&b).into(), Arg::U64(3)],
            G1,
            [64, 1, 1],
        )
        .err()
        .unwrap();
    assert!(e.to_string().contains("argument 3"), "{e}");
    let args = [(&b).into(), (&b).into(), (&b).into(), Arg::U32(1)];
    let e = c.exec(&vadd, &args, G1, [2048, 1, 1]).err().unwrap();
    assert!(
        e.to_string().contains("vadd") && e.to_string().contains("1024"),
        "{e}"
    );
    let e = dev
        .load(
            am_tests::runtime::code_object(am_isa::GfxTarget::Gfx1100),
            "nosuch",
        )
        .err()
        .unwrap();
    assert!(e.to_string().contains("nosuch"), "{e}");
    assert_eq!(c.dispatches(), 0);
}

#[test]
fn buffers_views_copies_fills_and_staged_transfers() {
    let (gpu, dev) = open("navi31");
    let data: Vec<u8> = (0..100_000u32).map(|i| (i * 7 + 3) as u8).collect();
    for kind in [
        MemKind::Vram,
        MemKind::System { uncached: false },
        MemKind::System { uncached: true },
    ] {
        let b = dev.alloc(data.len() as u64, kind).unwrap();
        dev.write(&b, 0, &data).unwrap();
        let mut back = vec![0u8; data.len()];
        dev.read(&b, 0, &mut back).unwrap();
        assert_eq!(back, data, "{kind:?}");
        // A view reads the same bytes at its offset.
        let v = b.view(4096 + 5, 1000).unwrap();
        assert_eq!(v.va(), b.va() + 4096 + 5);
        let mut part = vec![0u8; 1000];
        dev.read(&v, 0, &mut part).unwrap();
        assert_eq!(part, data[4101..5101]);
        assert!(
            b.view(data.len() as u64 - 10, 11).is_err(),
            "a view past the end"
        );
        let e = dev.read(&v, 990, &mut [0u8; 11]).err().unwrap();
        assert!(matches!(e, Error::Buffer { .. }), "{e}");
    }
    // Staged through SDMA (what a device with a small BAR does), 9 MiB: three pieces.
    let big: Vec<u8> = (0..9u32 << 20).map(|i| (i ^ (i >> 9)) as u8).collect();
    let v = dev.alloc(big.len() as u64, MemKind::Vram).unwrap();
    dev.copy_in(&v, 0, &big).unwrap();
    let mut back = vec![0u8; big.len()];
    dev.read(&v, 0, &mut back).unwrap();
    assert!(back == big, "copy_in");
    let mut back2 = vec![0u8; big.len() - 3];
    dev.copy_out(&v, 3, &mut back2).unwrap();
    assert!(back2[..] == big[3..], "copy_out");
    // Copy and fill on the copy queue, sysmem → VRAM → VRAM.
    let src = dev
        .alloc(1 << 20, MemKind::System { uncached: false })
        .unwrap();
    dev.write(&src, 0, &big[..1 << 20]).unwrap();
    let (d1, d2) = (
        dev.alloc(1 << 20, MemKind::Vram).unwrap(),
        dev.alloc(1 << 20, MemKind::Vram).unwrap(),
    );
    let mut c = CopyCommands::new(&dev);
    c.copy(&d1, &src).unwrap().copy(&d2, &d1).unwrap();
    c.fill(&d1.view(4096, 8192).unwrap(), 0xdead_beef).unwrap();
    c.submit().unwrap().wait().unwrap();
    let got: Vec<u32> = download(&dev, &d1, 1 << 18);
    let want: Vec<u32> = big[..1 << 20]
        .chunks(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        let fill = (1024..3072).contains(&i);
        assert_eq!(*g, if fill { 0xdead_beef } else { *w }, "d1 dword {i}");
    }
    assert_eq!(download::<u32>(&dev, &d2, 1 << 18), want, "d2");
    assert!(gpu.violations().is_empty(), "{:#?}", gpu.violations());
}

fn cross_queue_waits_order_copy_then_compute_then_copy(profile: &str) {
    let (gpu, dev) = open(profile);
    let n = 512usize;
    let (a, b) = (f32s(n, 11, -4.0, 4.0), f32s(n, 12, -4.0, 4.0));
    let host_a = dev
        .alloc(4 * n as u64, MemKind::System { uncached: false })
        .unwrap();
    dev.write(
        &host_a,
        0,
        &a.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<_>>(),
    )
    .unwrap();
    let va = dev.alloc(4 * n as u64, MemKind::Vram).unwrap();
    let vb = upload(&dev, &b);
    let vc = dev.alloc(4 * n as u64, MemKind::Vram).unwrap();
    let host_c = dev
        .alloc(4 * n as u64, MemKind::System { uncached: false })
        .unwrap();
    let s = dev.new_signal().unwrap();
    let vadd = kernel(&dev, "vadd");

    // Submitted in reverse order of execution: only the waits order them.
    let mut out = CopyCommands::new(&dev);
    out.wait(&s, 2).copy(&host_c, &vc).unwrap();
    let mut comp = ComputeCommands::new(&dev);
    comp.wait(&s, 1)
        .exec(
            &vadd,
            &[(&va).into(), (&vb).into(), (&vc).into(), Arg::U32(n as u32)],
            [2, 1, 1],
            [256, 1, 1],
        )
        .unwrap()
        .signal(&s, 2);
    let copy2 = dev.new_copy_queue();
    // navi31 has a second SDMA engine: the first copy runs there.
    let copy2 = copy2.unwrap();
    let mut inp = CopyCommands::new(&dev);
    inp.copy(&va, &host_a).unwrap().signal(&s, 1);
    let f_out = out.submit().unwrap();
    let f_comp = comp.submit().unwrap();
    std::thread::sleep(Duration::from_millis(20));
    assert!(
        !f_out.done().unwrap() && !f_comp.done().unwrap(),
        "nothing may run before the input copy"
    );
    inp.submit_to(&copy2).unwrap().wait().unwrap();
    f_out.wait().unwrap();
    // The compute queue released `s = 2` before its own fence: the output copy can finish
    // between the two (engines run on their own), so its fence is waited for, not polled.
    // The order itself shows in the output: it holds the sums.
    f_comp.wait().unwrap();
    assert_eq!(s.value().unwrap(), 2);
    let got: Vec<f32> = download(&dev, &host_c, n);
    for k in 0..n {
        assert_eq!(got[k].to_bits(), (a[k] + b[k]).to_bits(), "c[{k}]");
    }
    assert!(gpu.violations().is_empty(), "{:#?}", gpu.violations());
}

fn command_buffers_resubmit_to_several_queues_of_their_kind(profile: &str) {
    let (gpu, dev) = open(profile);
    let counter = dev.alloc(4096, MemKind::Vram).unwrap();
    dev.write(&counter, 0, &[0u8; 4]).unwrap();
    let atomics = kernel(&dev, "atomics");
    let scratch: Vec<_> = (0..5)
        .map(|_| dev.alloc(4 * 64, MemKind::Vram).unwrap())
        .collect();
    let mut c = ComputeCommands::new(&dev);
    let mut args = vec![Arg::from(&counter)];
    args.extend(scratch.iter().map(Arg::from));
    c.exec(&atomics, &args, G1, [64, 1, 1]).unwrap();
    let q2 = dev.new_compute_queue().unwrap();
    assert_ne!(q2.name(), dev.compute_queue().name());
    let per_run: u32 = (0..64u32).map(|i| 1 + (i & 3)).sum();
    for round in 1..=3u32 {
        c.submit().unwrap().wait().unwrap();
        c.submit_to(&q2).unwrap().wait().unwrap();
        assert_eq!(
            download::<u32>(&dev, &counter, 1)[0],
            2 * round * per_run,
            "round {round}"
        );
    }
    // A compute buffer on a copy queue is refused.
    let e = c.submit_to(&dev.copy_queue()).err().unwrap();
    assert!(e.to_string().contains("SDMA0"), "{e}");
    assert!(gpu.violations().is_empty(), "{:#?}", gpu.violations());
}

fn a_graph_replayed_a_thousand_times_with_changed_arguments_and_values(profile: &str) {
    let (gpu, dev) = open(profile);
    let n = 256usize;
    // Integers as floats: every sum below is exact.
    let x: Vec<f32> = (0..n).map(|k| (k % 8) as f32).collect();
    let y0: Vec<f32> = (0..n).map(|k| k as f32).collect();
    let bx = upload(&dev, &x);
    let ys = [upload(&dev, &y0), upload(&dev, &y0)];
    let snap = dev
        .alloc(4 * n as u64, MemKind::System { uncached: false })
        .unwrap();
    let done = dev.new_signal().unwrap();
    let saxpy = kernel(&dev, "saxpy");
    let (cq, xq) = (dev.compute_queue(), dev.copy_queue());

    let mut g = Graph::new(&dev);
    let node = g
        .exec(
            &cq,
            &saxpy,
            &[
                Arg::F32(0.0),
                (&bx).into(),
                (&ys[0]).into(),
                Arg::U32(n as u32),
            ],
            [1, 1, 1],
            [256, 1, 1],
        )
        .unwrap();
    g.depend(&cq, &xq).unwrap();
    g.copy(&xq, &snap, &ys[1]).unwrap();
    let sig = g.signal(&xq, &done, 0).unwrap();
    let mut exec = g.build().unwrap();
    assert_eq!(exec.kernels(), 1);

    let mut sums = [0f32; 2];
    for i in 1..=1000u32 {
        let which = (i % 2) as usize;
        exec.set_arg(node, 0, &Arg::F32(i as f32)).unwrap();
        exec.set_arg(node, 2, &(&ys[which]).into()).unwrap();
        exec.set_signal(sig, u64::from(i)).unwrap();
        let fences = exec.launch().unwrap();
        assert_eq!(fences.len(), 2, "one submission per queue");
        sums[which] += i as f32;
        if i.is_multiple_of(250) {
            exec.wait().unwrap();
            assert_eq!(done.value().unwrap(), u64::from(i), "signal value patched");
            // The copy ran after the kernel of the same replay (its dependency).
            let got: Vec<f32> = download(&dev, &snap, n);
            for k in 0..n {
                assert_eq!(got[k], y0[k] + x[k] * sums[1], "replay {i}: snapshot[{k}]");
            }
        }
    }
    exec.wait().unwrap();
    assert_eq!(exec.replays(), 1000);
    for (w, y) in ys.iter().enumerate() {
        let got: Vec<f32> = download(&dev, y, n);
        for k in 0..n {
            assert_eq!(got[k], y0[k] + x[k] * sums[w], "y{w}[{k}]");
        }
    }
    let e = exec.set_arg(node, 4, &Arg::U32(0)).err().unwrap();
    assert!(e.to_string().contains("saxpy"), "{e}");
    assert!(gpu.violations().is_empty(), "{:#?}", gpu.violations());
}

fn a_hang_names_the_queue_and_packet_and_recover_makes_the_device_usable(profile: &str) {
    let (gpu, dev) = open(profile);
    let never = dev.new_signal().unwrap();
    let mut c = ComputeCommands::new(&dev);
    c.wait(&never, 1);
    let f = c.submit().unwrap();
    let e = f.wait_timeout(Duration::from_millis(200)).err().unwrap();
    match &e {
        Error::Hang {
            queue,
            awaited,
            last_packet,
            ..
        } => {
            assert!(queue.contains("compute"), "{e}");
            assert_eq!(*awaited, f.value());
            assert!(last_packet.contains("WAIT_REG_MEM"), "{e}");
        }
        other => panic!("not a hang: {other}"),
    }
    dev.recover().unwrap();
    assert!(
        f.done().unwrap(),
        "work dropped by the recovery reads as done"
    );
    // New work runs.
    let n = 256usize;
    let (a, b) = (f32s(n, 21, -1.0, 1.0), f32s(n, 22, -1.0, 1.0));
    let (ba, bb) = (upload(&dev, &a), upload(&dev, &b));
    let bc = dev.alloc(4 * n as u64, MemKind::Vram).unwrap();
    let mut c = ComputeCommands::new(&dev);
    c.exec(
        &kernel(&dev, "vadd"),
        &[(&ba).into(), (&bb).into(), (&bc).into(), Arg::U32(n as u32)],
        G1,
        [256, 1, 1],
    )
    .unwrap();
    c.submit().unwrap().wait().unwrap();
    let got: Vec<f32> = download(&dev, &bc, n);
    assert_eq!(got[17], a[17] + b[17]);
    let mut k = CopyCommands::new(&dev);
    k.fill(&bc, 7).unwrap();
    k.submit().unwrap().wait().unwrap();
    assert_eq!(download::<u32>(&dev, &bc, 1)[0], 7);
    assert!(gpu.violations().is_empty(), "{:#?}", gpu.violations());
}

fn a_page_fault_names_the_address_and_the_kernel(profile: &str) {
    let (_gpu, dev) = open(profile);
    let n = 256usize;
    let (ba, bb) = (upload(&dev, &vec![1f32; n]), upload(&dev, &vec![2f32; n]));
    let unmapped = 0x7f00_0000_0000u64;
    let mut c = ComputeCommands::new(&dev);
    c.exec(
        &kernel(&dev, "vadd"),
        &[
            (&ba).into(),
            (&bb).into(),
            Arg::Ptr(unmapped),
            Arg::U32(n as u32),
        ],
        G1,
        [256, 1, 1],
    )
    .unwrap();
    let e = c
        .submit()
        .unwrap()
        .wait_timeout(Duration::from_secs(20))
        .err()
        .unwrap();
    let msg = e.to_string();
    assert!(matches!(e, Error::GpuFault { .. }), "{msg}");
    assert!(
        msg.contains("0x7f0000000000") || msg.contains("0x7f00_0000_0000"),
        "{msg}"
    );
    assert!(msg.contains("vadd"), "{msg}");
    dev.recover().unwrap();
    let bc = dev.alloc(4 * n as u64, MemKind::Vram).unwrap();
    let mut c = ComputeCommands::new(&dev);
    c.exec(
        &kernel(&dev, "vadd"),
        &[(&ba).into(), (&bb).into(), (&bc).into(), Arg::U32(n as u32)],
        G1,
        [256, 1, 1],
    )
    .unwrap();
    c.submit().unwrap().wait().unwrap();
    assert_eq!(download::<f32>(&dev, &bc, n)[n - 1], 3.0);
}

fn profiling_timestamps_each_launch_and_exports_a_chrome_trace(profile: &str) {
    let (_gpu, dev) = open(profile);
    dev.set_profiling(true);
    let out = dev.alloc(4 * 256, MemKind::Vram).unwrap();
    let spin = kernel(&dev, "spin");
    let mut c = ComputeCommands::new(&dev);
    c.exec(&spin, &[(&out).into(), Arg::U32(10)], G1, [256, 1, 1])
        .unwrap();
    c.exec(&spin, &[(&out).into(), Arg::U32(1_000)], G1, [256, 1, 1])
        .unwrap();
    c.submit().unwrap().wait().unwrap();
    let ev = dev.profile().unwrap();
    assert_eq!(ev.len(), 2);
    assert!(
        ev.iter()
            .all(|e| e.kernel == "spin" && e.queue.contains("compute"))
    );
    assert!(
        ev[0].start < ev[0].end && ev[0].end <= ev[1].start && ev[1].start < ev[1].end,
        "{ev:?}"
    );
    // Which of the two took longer is not asserted: the mock's clock is host time, so a
    // preempted emulator thread (a loaded CI machine) can make the short loop the longer one
    // (once 98 ms against 41 ms). Durations are a benchmark's business.
    let trace = am_runtime::trace::chrome_trace(dev.name(), &ev);
    let v: serde_json::Value = serde_json::from_str(&trace).unwrap();
    let list = v["traceEvents"].as_array().unwrap();
    assert_eq!(list.len(), 2);
    assert_eq!(list[0]["name"], "spin");
    assert_eq!(list[0]["ph"], "X");
    assert!(list[1]["dur"].as_f64().unwrap() > 0.0);
    assert!(dev.profile().unwrap().is_empty(), "events are taken once");
}

#[test]
fn ten_thousand_allocations_and_frees_leave_the_allocators_as_they_were() {
    let (_gpu, dev) = open("navi31");
    let state = || dev.with_driver(|d| Ok(d.ctx().mm().free_lists())).unwrap();
    // One round first: signal pools and page tables made on first use stay.
    let round = |i: u64| {
        let v = dev.alloc(4096 * (1 + i % 7), MemKind::Vram).unwrap();
        let s = dev
            .alloc(
                4096 * (1 + i % 3),
                MemKind::System {
                    uncached: i.is_multiple_of(2),
                },
            )
            .unwrap();
        let _sig = dev.new_signal().unwrap();
        let _view = v.view(0, 16).unwrap();
        drop((v, s));
    };
    round(0);
    let before = state();
    let signals = dev.signals_in_use();
    for i in 0..10_000 {
        round(i);
    }
    assert_eq!(state(), before);
    assert_eq!(dev.signals_in_use(), signals);
}

#[test]
fn two_devices_in_one_process_copy_through_the_host() {
    // The source small BAR: no PCIe peer access to it (see `runtime_pcie`).
    let (g0, d0) = open("navi31-smallbar");
    let (g1, d1) = open("navi31");
    let data: Vec<u32> = (0..300_000).collect();
    let a = upload(&d0, &data);
    let b = d1.alloc(a.size(), MemKind::Vram).unwrap();
    d1.copy_between(&b, &d0, &a, a.size()).unwrap();
    assert_eq!(download::<u32>(&d1, &b, data.len()), data);
    // A buffer of one device in another's command buffer is refused.
    let mut c = CopyCommands::new(&d1);
    let e = c.copy(&b, &a).err().unwrap();
    assert!(e.to_string().contains("another device"), "{e}");
    assert!(g0.violations().is_empty() && g1.violations().is_empty());
}

#[test]
fn closing_removes_the_queues_and_a_new_open_warm_boots() {
    let gpu = am_mock::MockGpu::new("navi31").unwrap();
    let dev = Device::open_with(gpu.open(), am_tests::rig::opts()).unwrap();
    let b = dev.alloc(4096, MemKind::Vram).unwrap();
    dev.write(&b, 0, &[1, 2, 3, 4]).unwrap();
    drop(b);
    dev.close().unwrap();
    let dev = Device::open_with(gpu.open(), am_tests::rig::opts()).unwrap();
    let mut c = CopyCommands::new(&dev);
    let x = dev.alloc(4096, MemKind::Vram).unwrap();
    c.fill(&x, 5).unwrap();
    c.submit().unwrap().wait().unwrap();
    assert_eq!(download::<u32>(&dev, &x, 1)[0], 5);
    assert!(gpu.violations().is_empty(), "{:#?}", gpu.violations());
}

/// The tests above on each kind of part: PM4 on navi31 (GFX11) and navi48 (GFX12), AQL on
/// the eight XCCs of mi300x (gfx942) and on the MI350X VF (gfx950).
macro_rules! on_every_part {
    ($($f:ident),* $(,)?) => {
        mod navi31 {
            $( #[test] fn $f() { super::$f("navi31") } )*
        }
        mod mi300x {
            $( #[test] fn $f() { super::$f("mi300x") } )*
        }
        mod mi350x_vf {
            $( #[test] fn $f() { super::$f("mi350x-vf") } )*
        }
        mod navi48 {
            $( #[test] fn $f() { super::$f("navi48") } )*
        }
    };
}

on_every_part!(
    emulator_kernels_give_exact_results,
    reductions_integer_division_scratch_and_dispatch_packet_kernels_are_exact,
    cross_queue_waits_order_copy_then_compute_then_copy,
    command_buffers_resubmit_to_several_queues_of_their_kind,
    a_graph_replayed_a_thousand_times_with_changed_arguments_and_values,
    a_hang_names_the_queue_and_packet_and_recover_makes_the_device_usable,
    a_page_fault_names_the_address_and_the_kernel,
    profiling_timestamps_each_launch_and_exports_a_chrome_trace,
);

#[test]
fn a_small_bar_stages_vram_access_through_the_copy_queue() {
    let (gpu, dev) = open("navi31-smallbar");
    assert!(!dev.info().large_bar);
    // 300 MiB of VRAM is past what a 256 MiB BAR0 could reach; the runtime never asks.
    let big = dev.alloc(300 << 20, MemKind::Vram).unwrap();
    let tail: Vec<u8> = (0..8192u32).map(|i| (i * 13) as u8).collect();
    dev.write(&big, (300 << 20) - 8192, &tail).unwrap();
    let mut back = vec![0u8; 8192];
    dev.read(&big, (300 << 20) - 8192, &mut back).unwrap();
    assert_eq!(back, tail);
    // Code, arguments and data all reach the kernel.
    let n = 256usize;
    let (a, b) = (f32s(n, 31, -1.0, 1.0), f32s(n, 32, -1.0, 1.0));
    let (ba, bb) = (upload(&dev, &a), upload(&dev, &b));
    let bc = dev.alloc(4 * n as u64, MemKind::Vram).unwrap();
    let vadd = kernel(&dev, "vadd");
    let mut c = ComputeCommands::new(&dev);
    c.exec(
        &vadd,
        &[(&ba).into(), (&bb).into(), (&bc).into(), Arg::U32(n as u32)],
        G1,
        [256, 1, 1],
    )
    .unwrap();
    c.submit().unwrap().wait().unwrap();
    let got: Vec<f32> = download(&dev, &bc, n);
    for k in 0..n {
        assert_eq!(got[k].to_bits(), (a[k] + b[k]).to_bits(), "c[{k}]");
    }
    assert!(gpu.violations().is_empty(), "{:#?}", gpu.violations());
}
