//! The CPU backend's launch: workgroups looped over inside the compiled code and cut into
//! runs per thread give the same results on any number of threads, for grids that do not
//! divide by the workgroup, the vector width or the threads, and for empty grids.

use am_compiler::{BinOp, CmpOp, DType, Dim, Kernel, KernelBuilder};

use crate::common::*;

/// Elements each work-item of [`saxpy_and_sums`] sums (odd: no vector width divides it).
const L: u32 = 37;

/// `y[i] = fma(a, x[i], y[i])` for `i < n`, and `s[i]` the sum of `x[L·i .. L·i + L]` in
/// increasing order (a serial reduction per work-item).
fn saxpy_and_sums(wg: u32) -> Kernel {
    let mut b = KernelBuilder::new("saxpy_sums", [wg, 1, 1]);
    let px = b.param_ptr("x", DType::F32, true);
    let py = b.param_ptr("y", DType::F32, true);
    let ps = b.param_ptr("s", DType::F32, true);
    let a = b.param("a", DType::F32);
    let n = b.param("n", DType::U32);
    let acc = b.private(DType::F32, 1);
    let i = b.global_id(Dim::X);
    let inside = b.cmp(CmpOp::Lt, i, n);
    b.if_(inside, |b| {
        let x = b.load_elem(px, i);
        let y = b.load_elem(py, i);
        let r = b.fma(a, x, y);
        b.store_elem(py, i, r);
        let z = b.const_u32(0);
        let zero = b.const_f32(0.0);
        b.store_elem(acc, z, zero);
        let len = b.const_u32(L);
        let first = b.mul(i, len);
        let end = b.add(first, len);
        b.range(first, end, 1, |b, j| {
            let v = b.load_elem(px, j);
            let z = b.const_u32(0);
            let cur = b.load_elem(acc, z);
            let next = b.binary(BinOp::Add, cur, v);
            b.store_elem(acc, z, next);
        });
        let z = b.const_u32(0);
        let total = b.load_elem(acc, z);
        b.store_elem(ps, i, total);
    });
    b.finish().unwrap()
}

#[test]
fn threads_do_not_change_results_of_odd_grids() {
    let mut rng = Rng(0xc0ffee);
    for (wg, n) in [(64u32, 1003usize), (7, 4099), (1, 9), (256, 1), (3, 64)] {
        let m = L as usize * n;
        let k = saxpy_and_sums(wg);
        let x: Vec<f32> = (0..m).map(|_| rng.f32(-1.0, 1.0)).collect();
        let y: Vec<f32> = (0..n).map(|_| rng.f32(-1.0, 1.0)).collect();
        let a = 0.75f32;
        let groups = [(n as u32).div_ceil(wg), 1, 1];
        let args = [buf(&x), buf(&y), zeros(4 * n), scalar(a), scalar(n as u32)];
        let want_y: Vec<f32> = (0..n).map(|i| a.mul_add(x[i], y[i])).collect();
        let want_s: Vec<f32> = (0..n)
            .map(|i| {
                x[L as usize * i..][..L as usize]
                    .iter()
                    .fold(0.0f32, |s, v| s + v)
            })
            .collect();
        for threads in [1, 2, 3, 5] {
            let out = run_cpu_on(&k, groups, &args, threads);
            let got_y: Vec<f32> = from_bytes(&out[1]);
            let got_s: Vec<f32> = from_bytes(&out[2]);
            let what = format!("workgroup {wg}, n {n}, {threads} threads");
            assert_eq!(got_y.len(), n, "{what}");
            for i in 0..n {
                assert_eq!(got_y[i].to_bits(), want_y[i].to_bits(), "{what}: y[{i}]");
                assert_eq!(got_s[i].to_bits(), want_s[i].to_bits(), "{what}: s[{i}]");
            }
        }
    }
}

/// Launches from several threads at once share the pool of launch threads: each gets its
/// own grid's results, the same as alone on one thread.
#[test]
fn concurrent_launches_keep_their_own_results() {
    let wg = [3u32, 2, 2];
    let shapes = [[5u32, 3, 2], [7, 1, 3], [2, 9, 1], [11, 2, 2]];
    let run = |groups: [u32; 3], threads: usize| {
        let k = ids_kernel(wg, groups);
        let total = (0..3).map(|d| wg[d] * groups[d]).product::<u32>() as usize;
        run_cpu_on(&k, groups, &[zeros(4 * 6 * total)], threads)
    };
    let alone: Vec<_> = shapes.iter().map(|&g| run(g, 1)).collect();
    std::thread::scope(|s| {
        let handles: Vec<_> = shapes
            .iter()
            .map(|&g| s.spawn(move || (0..4).map(|_| run(g, 3)).collect::<Vec<_>>()))
            .collect();
        for (h, want) in handles.into_iter().zip(&alone) {
            for got in h.join().expect("a launching thread panicked") {
                assert_eq!(&got, want, "a launch beside others");
            }
        }
    });
}

#[test]
fn ids_of_a_three_dimensional_grid_on_any_number_of_threads() {
    let wg = [3u32, 2, 2];
    let groups = [5u32, 3, 2];
    let k = ids_kernel(wg, groups);
    let total = (0..3).map(|d| wg[d] * groups[d]).product::<u32>() as usize;
    let one = run_cpu_on(&k, groups, &[zeros(4 * 6 * total)], 1);
    let o: Vec<u32> = from_bytes(&one[0]);
    let w = wg[0] * groups[0];
    let h = wg[1] * groups[1];
    let (x, y, z) = (w - 1, h - 1, wg[2] * groups[2] - 1);
    let last = ((z * h + y) * w + x) as usize;
    assert_eq!(
        o[6 * last..6 * last + 6],
        [2, 4, 1, 2, 1, 1],
        "the last work-item"
    );
    for threads in [2, 4, 7, 64] {
        let out = run_cpu_on(&k, groups, &[zeros(4 * 6 * total)], threads);
        assert_eq!(out, one, "{threads} threads");
    }
}

#[test]
fn empty_grids_run_nothing() {
    let k = saxpy_and_sums(64);
    let y = [1.5f32; 4];
    for groups in [[0u32, 1, 1], [1, 0, 1], [4, 1, 0]] {
        let args = [buf(&y), buf(&y), buf(&y), scalar(2.0f32), scalar(4u32)];
        let out = run_cpu_on(&k, groups, &args, 2);
        for b in &out {
            assert_eq!(from_bytes::<f32>(b), y, "groups {groups:?}");
        }
    }
}
