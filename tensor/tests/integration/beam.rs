//! The kernel search (`AM_BEAM`): on the mock it picks kernels that execute no more
//! wave-instructions than the heuristics' and compute the same results, and a second run
//! with the same width finds its choices in the compiler's disk cache without measuring.

use std::sync::Arc;

use am_compiler::{Cache, Compiler};
use am_tensor::{Device, Tensor};

use crate::common::{Rng, compiler, navi31};

/// The operations searched, on small shapes: name, input shapes, the operation, and whether
/// the search may change the order of operations (a full sum's grouped tree: another
/// workgroup size adds in another order).
type Case = (&'static str, Vec<Vec<usize>>, fn(&[Tensor]) -> Tensor, bool);

fn cases() -> Vec<Case> {
    vec![
        // 2304 outputs: the heuristics leave one per work-item (4 would leave fewer than
        // 1024 work-items); the search may take 2.
        (
            "matmul 48³",
            vec![vec![48, 48], vec![48, 48]],
            |t| t[0].matmul(&t[1]).unwrap(),
            false,
        ),
        (
            "argmax 32×32",
            vec![vec![32, 32]],
            |t| t[0].argmax(-1, false).unwrap(),
            false,
        ),
        (
            "sum 8192",
            vec![vec![8192]],
            |t| t[0].sum(&[0], false).unwrap(),
            true,
        ),
    ]
}

fn inputs(shapes: &[Vec<usize>], dev: &Device) -> Vec<Tensor> {
    let mut rng = Rng(37);
    shapes
        .iter()
        .map(|s| {
            let n = s.iter().product();
            Tensor::from_slice(&rng.values(n, -1.0, 1.0), s, dev).unwrap()
        })
        .collect()
}

/// `f` on `dev`: its result and the wave-instructions its kernels executed (counted by the
/// mock `gpu`, which only this test uses).
fn counted(
    gpu: &am_mock::MockGpu,
    dev: &Device,
    shapes: &[Vec<usize>],
    f: fn(&[Tensor]) -> Tensor,
) -> (Vec<f32>, u64) {
    let t = inputs(shapes, dev);
    for x in &t {
        x.realize().unwrap();
    }
    let s0 = gpu.shader_statistics().instructions;
    let out = f(&t);
    out.realize().unwrap();
    let n = gpu.shader_statistics().instructions - s0;
    (out.to_vec_f32().unwrap(), n)
}

#[test]
fn the_search_executes_no_more_than_the_heuristics_and_keeps_their_results() {
    am_mock::register();
    // A Navi31 of this test's own: its shader statistics count this test's kernels only.
    let rt = Device::open_with("mock:navi31:39", compiler())
        .unwrap()
        .runtime()
        .cloned()
        .unwrap();
    let gpu = am_mock::gpu("navi31", 39).unwrap();
    gpu.set_shader_statistics(true);
    let heuristic = Device::from_runtime(rt.clone(), compiler()).unwrap();
    heuristic.set_beam(0);
    let searched = Device::from_runtime(rt, compiler()).unwrap();
    searched.set_beam(2);
    let mut better = 0;
    for (name, shapes, f, reordered) in cases() {
        let (want, h) = counted(&gpu, &heuristic, &shapes, f);
        // The first run searches (its candidates' launches count too); the second runs the
        // kernel chosen.
        let before = searched.kernels_searched();
        counted(&gpu, &searched, &shapes, f);
        assert!(searched.kernels_searched() > before, "{name}: searched");
        let (got, b) = counted(&gpu, &searched, &shapes, f);
        assert!(
            b <= h,
            "{name}: {b} wave-instructions chosen, {h} by the heuristics"
        );
        better += usize::from(b < h);
        if reordered {
            let big = want.iter().fold(0f32, |m, x| m.max(x.abs()));
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                assert!(
                    (g - w).abs() <= 1e-4 * big.max(1.0),
                    "{name}[{i}]: {g} vs {w}"
                );
            }
        } else {
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<u32>>();
            assert_eq!(bits(&got), bits(&want), "{name}: the heuristics' bits");
        }
    }
    assert!(better > 0, "the search improved on no operation");
    gpu.set_shader_statistics(false);
    assert!(gpu.violations().is_empty(), "{:#?}", gpu.violations());
}

#[test]
fn a_second_run_finds_the_choice_in_the_disk_cache() {
    let dir = std::env::temp_dir().join(format!("am-tensor-beam-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let rt = navi31().runtime().cloned().unwrap();
    let fresh = || Arc::new(Compiler::with_cache(Cache::new(Some(dir.clone()))));
    let run = |c: Arc<Compiler>, width: u32| {
        let dev = Device::from_runtime(rt.clone(), c).unwrap();
        dev.set_beam(width);
        let t = inputs(&[vec![32, 48], vec![48, 64]], &dev);
        let out = t[0].matmul(&t[1]).unwrap().to_vec_f32().unwrap();
        (dev, out)
    };
    let first = fresh();
    let (d1, want) = run(first.clone(), 2);
    assert!(d1.kernels_searched() >= 1 && d1.candidates_measured() > 1);
    // Another process, in effect: a compiler with nothing in memory, the same directory.
    let second = fresh();
    let (d2, got) = run(second.clone(), 2);
    assert_eq!(d2.kernels_searched(), 0, "the second run searched");
    assert_eq!(d2.candidates_measured(), 0);
    assert!(d2.searches_recalled() >= 1);
    assert_eq!(second.cache().stats().misses, 0, "the second run compiled");
    assert_eq!(got, want);
    // Another width is another key: searched again.
    let (d3, _) = run(fresh(), 1);
    assert!(d3.kernels_searched() >= 1);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_cpu_search_keeps_the_heuristics_bits() {
    // On the host the candidates are upcasts and unrolls, which keep the order of
    // operations: whatever wall time picks, the bits are the heuristics'.
    let c = || Arc::new(Compiler::with_cache(Cache::new(None)));
    let heuristic = Device::cpu_with(c());
    heuristic.set_beam(0);
    let searched = Device::cpu_with(c());
    searched.set_beam(1);
    let shapes = [vec![24, 40], vec![40, 32]];
    let run = |dev: &Device| {
        let t = inputs(&shapes, dev);
        t[0].matmul(&t[1]).unwrap().to_vec_f32().unwrap()
    };
    let want = run(&heuristic);
    let got = run(&searched);
    assert!(searched.kernels_searched() >= 1);
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<u32>>();
    assert_eq!(bits(&got), bits(&want));
}
