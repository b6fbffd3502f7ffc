//! The kernel optimiser: half-precision matmuls accumulate exact products, and every
//! optimised kernel gives what the unoptimised one and the `cpu` device give, on random
//! shapes, on gfx1100 (and gfx1201 and gfx942 where the tests stay quick).

use am_tensor::{ConvOptions, DType, Device, Tensor};

use crate::common::{Rng, compiler, cpu, devices, mi300x, navi31, navi48};

/// `[a0 a1] · [b0 b1]ᵀ` in `dtype` where `a0·b0` needs more bits than `dtype` has and
/// `a1·b1` cancels all but those bits: exact in f32, 0 when each product is rounded to
/// `dtype` before it is added.
#[test]
fn half_precision_matmul_accumulates_exact_products() {
    // f16: (1 + 2⁻¹⁰)² = 1 + 2⁻⁹ + 2⁻²⁰; bf16: (1 + 2⁻⁷)² = 1 + 2⁻⁶ + 2⁻¹⁴. Both rests are
    // representable in their type (2⁻²⁰ as an f16 subnormal).
    for (dtype, ulp, rest) in [
        (DType::F16, 2f32.powi(-10), 2f32.powi(-20)),
        (DType::BF16, 2f32.powi(-7), 2f32.powi(-14)),
    ] {
        for dev in devices() {
            let a = Tensor::from_slice(&[1.0 + ulp, -(1.0 + 2.0 * ulp)], &[1, 2], &dev)
                .unwrap()
                .cast(dtype);
            let b = Tensor::from_slice(&[1.0 + ulp, 1.0], &[2, 1], &dev)
                .unwrap()
                .cast(dtype);
            let c = a.matmul(&b).unwrap();
            assert_eq!(c.dtype(), dtype);
            assert_eq!(
                c.to_vec_f32().unwrap(),
                vec![rest],
                "{dtype:?} matmul on {}",
                dev.name()
            );
        }
    }
}

/// The binary's Navi31 through two tensor devices of its own, the optimiser on and off
/// (the shared device of the other tests keeps its setting).
fn navi31_on_and_off() -> (Device, Device) {
    on_and_off(&navi31())
}

/// `dev`'s runtime through two tensor devices of its own, the optimiser on and off.
fn on_and_off(dev: &Device) -> (Device, Device) {
    let rt = dev.runtime().cloned().unwrap();
    let on = Device::from_runtime(rt.clone(), compiler()).unwrap();
    let off = Device::from_runtime(rt, compiler()).unwrap();
    on.set_optimize(true);
    off.set_optimize(false);
    (on, off)
}

/// The operations the optimiser changes, on inputs of `shapes`.
type Case = (&'static str, Vec<Vec<usize>>, fn(&[Tensor]) -> Tensor);

/// Random shapes (fixed seed): sizes that are and are not multiples of the tiles, reductions
/// to many and to few outputs, broadcasts, views.
fn cases(rng: &mut Rng, count: usize) -> Vec<Case> {
    let mut dim = |lo: usize, hi: usize| lo + (rng.uniform(0.0, (hi - lo) as f64) as usize);
    let mut out: Vec<Case> = Vec::new();
    for _ in 0..count {
        let (m, k, n) = (dim(1, 70), dim(1, 70), dim(1, 70));
        let (r, c) = (dim(1, 300), dim(1, 300));
        out.push(("matmul", vec![vec![m, k], vec![k, n]], |t| {
            t[0].matmul(&t[1]).unwrap()
        }));
        out.push(
            ("matmul by a transpose", vec![vec![m, k], vec![n, k]], |t| {
                t[0].matmul(&t[1].t().unwrap()).unwrap()
            }),
        );
        out.push(
            ("add with a broadcast row", vec![vec![r, c], vec![c]], |t| {
                t[0].add(&t[1]).unwrap().relu()
            }),
        );
        out.push(("transposed add", vec![vec![r, c], vec![c, r]], |t| {
            t[0].add(&t[1].t().unwrap()).unwrap()
        }));
        out.push(("sum of rows", vec![vec![r, c]], |t| {
            t[0].sum(&[1], false).unwrap()
        }));
        out.push(("sum of columns", vec![vec![r, c]], |t| {
            t[0].sum(&[0], false).unwrap()
        }));
        out.push(("sum of all", vec![vec![r, c]], |t| {
            t[0].sum(&[], false).unwrap()
        }));
        out.push(("max of all", vec![vec![r * 3, c]], |t| {
            t[0].max(&[], false).unwrap()
        }));
        out.push(("softmax", vec![vec![r, c]], |t| t[0].softmax(-1).unwrap()));
    }
    out
}

fn run(dev: &Device, shapes: &[Vec<usize>], f: fn(&[Tensor]) -> Tensor, seed: u64) -> Vec<f32> {
    let mut rng = Rng(seed);
    let inputs: Vec<Tensor> = shapes
        .iter()
        .map(|s| {
            let n: usize = s.iter().product();
            Tensor::from_slice(&rng.values(n, -1.0, 1.0), s, dev).unwrap()
        })
        .collect();
    f(&inputs).to_vec_f32().unwrap()
}

/// `got` against `want`: equal, or within `tol` of it relative to the larger of 1 and the
/// magnitude of the operands' sum `scale`.
fn close(what: &str, got: &[f32], want: &[f32], tol: f32) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tol * w.abs().max(1.0),
            "{what}: element {i}: {g} against {w}"
        );
    }
}

/// Every optimised kernel against the unoptimised one and the `cpu` device, on gfx1100:
/// elementwise kernels and matmuls (tiles, unrolled loops, vector accesses keep each
/// output's order of operations) give the same bits; reductions that combine partial
/// results through local memory or in two kernels differ by rounding only.
#[test]
fn optimised_kernels_match_the_unoptimised_and_the_cpu_on_gfx1100() {
    let (on, off) = navi31_on_and_off();
    let mut rng = Rng(0x0b7_1337);
    for (i, (name, shapes, f)) in cases(&mut rng, 4).into_iter().enumerate() {
        let what = format!("{name} {shapes:?}");
        let seed = 1000 + i as u64;
        let got = run(&on, &shapes, f, seed);
        let plain = run(&off, &shapes, f, seed);
        let host = run(&cpu(), &shapes, f, seed);
        // Sums in another order: within a few roundings of a sum of up to 90,000 elements.
        let tol = if name.starts_with("sum") { 5e-4 } else { 1e-5 };
        if name.starts_with("sum") || name == "softmax" {
            close(&format!("{what} against unoptimised"), &got, &plain, tol);
        } else {
            assert_eq!(got, plain, "{what} against unoptimised");
        }
        close(&format!("{what} against cpu"), &got, &host, tol);
    }
}

/// The same on an RDNA4 (gfx1201) and a CDNA3 (gfx942, waves of 64) device, fewer shapes.
#[test]
fn optimised_kernels_match_the_cpu_on_gfx1201_and_gfx942() {
    for dev in [navi48(), mi300x()] {
        let spec = dev.name().to_string();
        let mut rng = Rng(0x0b7_4242);
        for (i, (name, shapes, f)) in cases(&mut rng, 1).into_iter().enumerate() {
            let seed = 2000 + i as u64;
            let got = run(&dev, &shapes, f, seed);
            let host = run(&cpu(), &shapes, f, seed);
            let tol = if name.starts_with("sum") { 5e-4 } else { 1e-5 };
            close(&format!("{spec} {name} {shapes:?}"), &got, &host, tol);
        }
    }
}

/// Shapes the heuristics tile (multiples of 4, enough outputs) with exact comparisons:
/// the random shapes above rarely are.
#[test]
fn tiled_matmul_and_vectorised_elementwise_give_the_unoptimised_bits() {
    let (on, off) = navi31_on_and_off();
    let ops: [Case; 3] = [
        ("matmul", vec![vec![128, 36], vec![36, 132]], |t| {
            t[0].matmul(&t[1]).unwrap()
        }),
        (
            "matmul by a transpose",
            vec![vec![64, 20], vec![128, 20]],
            |t| t[0].matmul(&t[1].t().unwrap()).unwrap(),
        ),
        ("broadcast add", vec![vec![96, 128], vec![128]], |t| {
            t[0].add(&t[1]).unwrap().exp()
        }),
    ];
    for (i, (name, shapes, f)) in ops.into_iter().enumerate() {
        let got = run(&on, &shapes, f, 3000 + i as u64);
        let plain = run(&off, &shapes, f, 3000 + i as u64);
        assert_eq!(got, plain, "{name} {shapes:?}");
    }
}

/// Matrix products with enough outputs for 8 × 8 tiles per work-item (at least 65,536
/// outputs, both axes multiples of 8: `opt::choose`'s test has the rule), whose lanes 2 and 3
/// of every 4 along the columns take the product's operands the other way round (for the
/// dual-issue pairing), on gfx1100, gfx1201 and gfx942: the unoptimised kernels' bits and
/// the `cpu` device's values. Random inner dimensions (fixed seed), plain, by a transpose
/// and batched.
#[test]
fn matmul_tiles_of_8_by_8_give_the_unoptimised_bits_on_every_gpu() {
    let mut rng = Rng(0x88_1100);
    for dev in [navi31(), navi48(), mi300x()] {
        let (on, off) = on_and_off(&dev);
        let mut dim = |lo: usize, hi: usize| lo + (rng.uniform(0.0, (hi - lo) as f64) as usize);
        let (m, n) = ([256, 264, 320][dim(0, 3)], [256, 272][dim(0, 2)]);
        let (k, kt, kb) = (dim(1, 41), dim(1, 41), dim(1, 41));
        let ops: [Case; 3] = [
            ("matmul", vec![vec![m, k], vec![k, n]], |t| {
                t[0].matmul(&t[1]).unwrap()
            }),
            (
                "matmul by a transpose",
                vec![vec![m, kt], vec![n, kt]],
                |t| t[0].matmul(&t[1].t().unwrap()).unwrap(),
            ),
            (
                "batched matmul",
                vec![vec![2, 128, kb], vec![2, kb, 256]],
                |t| t[0].matmul(&t[1]).unwrap(),
            ),
        ];
        for (i, (name, shapes, f)) in ops.into_iter().enumerate() {
            let what = format!("{} {name} {shapes:?}", dev.name());
            let seed = 4000 + i as u64;
            let got = run(&on, &shapes, f, seed);
            let plain = run(&off, &shapes, f, seed);
            same_bits(&format!("{what} against unoptimised"), &got, &plain);
            close(
                &format!("{what} against cpu"),
                &got,
                &run(&cpu(), &shapes, f, seed),
                1e-5,
            );
        }
    }
}

/// `got` equals `want` element for element (the first difference named).
fn same_bits(what: &str, got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    if let Some((i, (g, w))) = got
        .iter()
        .zip(want)
        .enumerate()
        .find(|(_, (g, w))| g.to_bits() != w.to_bits())
    {
        panic!("{what}: element {i} is {g}, expected {w}");
    }
}

/// A constant operand of an elementwise kernel survives on gfx942: `full([4096], 1) + x`
/// is `x + 1`, on the constant's either side and of tile-filling and ragged lengths.
#[test]
fn constant_operands_survive_on_gfx942() {
    let dev = mi300x();
    let mut rng = Rng(942);
    for n in [4096, 4100, 33, 1] {
        let xs = rng.values(n, -1.0, 1.0);
        let x = Tensor::from_slice(&xs, &[n], &dev).unwrap();
        let ones = Tensor::full(&[n], 1.0, DType::F32, &dev);
        let want: Vec<f32> = xs.iter().map(|v| v + 1.0).collect();
        let left = ones.add(&x).unwrap().to_vec_f32().unwrap();
        same_bits(
            &format!("full([{n}], 1) + x on {}", dev.name()),
            &left,
            &want,
        );
        let right = x.add(&ones).unwrap().to_vec_f32().unwrap();
        same_bits(
            &format!("x + full([{n}], 1) on {}", dev.name()),
            &right,
            &want,
        );
    }
}

/// Random elementwise expressions of two inputs and constants (tensors of one value and
/// numbers, on either side) give the `cpu` device's bits on gfx942: 40 expressions of up
/// to 6 operations, fixed seed.
#[test]
fn elementwise_expressions_with_constants_match_the_cpu_on_gfx942() {
    let mut rng = Rng(0x6f_0942);
    for case in 0..40 {
        let n = [4096, 1024, 300, 4][case % 4];
        let xs = rng.values(n, -2.0, 2.0);
        let ys = rng.values(n, 0.5, 2.0);
        let ops: Vec<(u8, f64)> = (0..1 + (rng.uniform(0.0, 6.0) as usize))
            .map(|_| {
                let c = [1.0, 0.0, -1.0, 0.5, 2.0, 3.25, -0.125][rng.uniform(0.0, 7.0) as usize];
                (rng.uniform(0.0, 9.0) as u8, c)
            })
            .collect();
        let eval = |dev: &Device| -> Vec<f32> {
            let x = Tensor::from_slice(&xs, &[n], dev).unwrap();
            let y = Tensor::from_slice(&ys, &[n], dev).unwrap();
            let mut e = x.clone();
            for &(op, c) in &ops {
                let k = Tensor::full(&[n], c, DType::F32, dev);
                e = match op {
                    0 => k.add(&e),
                    1 => e.add(c),
                    2 => k.mul(&e),
                    3 => e.sub(&k),
                    4 => k.sub(&e),
                    5 => e.maximum(&k),
                    6 => k.minimum(&e).and_then(|v| v.add(&y)),
                    7 => e.mul(&y).and_then(|v| v.add(&k)),
                    _ => e.gt(c).and_then(|m| m.where_(&k, &y)),
                }
                .unwrap();
            }
            e.to_vec_f32().unwrap()
        };
        let (got, want) = (eval(&mi300x()), eval(&cpu()));
        same_bits(&format!("case {case}: ops {ops:?} on [{n}]"), &got, &want);
    }
}

/// A convolution of random shape and options: input and weight shapes, the options.
type ConvCase = (Vec<usize>, Vec<usize>, ConvOptions);

/// Random convolutions (fixed seed) with strides, paddings, dilations and groups, sized so
/// that the optimiser tiles them (outputs of 16 to 33 pixels a side, 4 to 16 output
/// channels, up to 32,768 outputs: tiles over output channels and pixels, the taps
/// unrolled, the pad's conditions on the input) or does not (odd widths, few outputs).
fn conv_cases(rng: &mut Rng, count: usize) -> Vec<ConvCase> {
    let mut pick = |v: &[usize]| v[rng.uniform(0.0, v.len() as f64) as usize];
    (0..count)
        .map(|_| {
            let (n, groups) = (pick(&[1, 2]), pick(&[1, 1, 2]));
            let (cig, cog) = (pick(&[1, 2, 3, 4]), pick(&[2, 4, 8]));
            let (kh, kw) = (pick(&[1, 2, 3, 3, 5]), pick(&[1, 3, 3, 4]));
            let (stride, padding, dilation) = (pick(&[1, 1, 2]), pick(&[0, 1, 2]), pick(&[1, 2]));
            let (oh, ow) = (pick(&[16, 20, 32, 33]), pick(&[16, 32, 32, 18]));
            // The input that gives oh × ow outputs (plus a remainder the stride drops).
            let extra = pick(&[0, 1]) % stride;
            let len = |o: usize, k: usize| {
                ((o - 1) * stride + dilation * (k - 1) + 1 + extra).saturating_sub(2 * padding)
            };
            let (h, w) = (len(oh, kh).max(1), len(ow, kw).max(1));
            let opts = ConvOptions::default()
                .stride(stride)
                .padding(padding)
                .dilation(dilation)
                .groups(groups);
            (
                vec![n, cig * groups, h, w],
                vec![cog * groups, cig, kh, kw],
                opts,
            )
        })
        .filter(|(x, wt, o)| {
            // Kernels that fit the padded input.
            let fits = |len: usize, k: usize, p: usize, d: usize| len + 2 * p > d * (k - 1);
            fits(x[2], wt[2], o.padding[0], o.dilation[0])
                && fits(x[3], wt[3], o.padding[1], o.dilation[1])
        })
        .collect()
}

/// A convolution's output and its input's and weight's gradients (of the sum of the
/// output times a fixed pattern) on `dev`.
fn conv_run(dev: &Device, case: &ConvCase, seed: u64) -> [Vec<f32>; 3] {
    let (xs, ws, opts) = case;
    let mut rng = Rng(seed);
    let mut input = |shape: &[usize]| {
        let n: usize = shape.iter().product();
        let t = Tensor::from_slice(&rng.values(n, -1.0, 1.0), shape, dev).unwrap();
        t.set_requires_grad(true);
        t
    };
    let (x, w) = (input(xs), input(ws));
    let y = x.conv2d(&w, None, *opts).unwrap();
    let pattern = Tensor::from_slice(&rng.values(y.numel(), -1.0, 1.0), &y.shape(), dev).unwrap();
    y.mul(&pattern)
        .unwrap()
        .sum(&[], false)
        .unwrap()
        .backward()
        .unwrap();
    [
        y.to_vec_f32().unwrap(),
        x.grad().unwrap().to_vec_f32().unwrap(),
        w.grad().unwrap().to_vec_f32().unwrap(),
    ]
}

/// Convolutions the optimiser tiles against the unoptimised kernels and the `cpu` device
/// on gfx1100, gfx1201 and gfx942: the outputs give the unoptimised bits (each output's
/// products are added in the plain loop's order), the gradients — reductions over the
/// batch and the pixels, which grouped reductions add in another order — agree to rounding.
#[test]
fn tiled_convolutions_match_the_unoptimised_and_the_cpu() {
    let mut rng = Rng(0xc0_4711);
    let cases = conv_cases(&mut rng, 10);
    assert!(cases.len() >= 6, "too few cases fit: {cases:?}");
    for (d, dev) in [navi31(), navi48(), mi300x()].iter().enumerate() {
        let (on, off) = on_and_off(dev);
        // Every case on gfx1100, a third of them on the others.
        for (i, case) in cases
            .iter()
            .enumerate()
            .filter(|(i, _)| d == 0 || i % 3 == d - 1)
        {
            let what = format!("{} conv2d {case:?}", dev.name());
            let seed = 4000 + i as u64;
            let got = conv_run(&on, case, seed);
            let plain = conv_run(&off, case, seed);
            let host = conv_run(&cpu(), case, seed);
            same_bits(
                &format!("{what}: output against unoptimised"),
                &got[0],
                &plain[0],
            );
            for (k, part) in ["output", "input gradient", "weight gradient"]
                .iter()
                .enumerate()
            {
                close(
                    &format!("{what}: {part} against unoptimised"),
                    &got[k],
                    &plain[k],
                    1e-4,
                );
                close(
                    &format!("{what}: {part} against cpu"),
                    &got[k],
                    &host[k],
                    1e-4,
                );
            }
        }
    }
}

/// The `cpu` device's optimised kernels (tiles as wide as the host's vector registers, the
/// full reduction in two kernels) against its plain ones: the same bits wherever each
/// output's order of operations is kept — everything but full sums of many elements, which
/// stay within rounding — and the same bits from one run to the next; shapes that the
/// tiles and the threads do not divide, and empty tensors.
#[test]
fn cpu_tiles_keep_the_plain_kernels_bits() {
    let on = Device::cpu_with(compiler());
    let off = Device::cpu_with(compiler());
    on.set_optimize(true);
    off.set_optimize(false);
    let mut rng = Rng(0x0c9_0042);
    let mut all = cases(&mut rng, 3);
    let more: [Case; 8] = [
        ("matmul", vec![vec![256, 256], vec![256, 256]], |t| {
            t[0].matmul(&t[1]).unwrap()
        }),
        ("matmul", vec![vec![200, 300], vec![300, 170]], |t| {
            t[0].matmul(&t[1]).unwrap()
        }),
        (
            "matmul by a transpose",
            vec![vec![72, 20], vec![136, 20]],
            |t| t[0].matmul(&t[1].t().unwrap()).unwrap(),
        ),
        (
            "batched matmul",
            vec![vec![3, 40, 24], vec![3, 24, 48]],
            |t| t[0].matmul(&t[1]).unwrap(),
        ),
        ("add", vec![vec![1000, 999], vec![1000, 999]], |t| {
            t[0].add(&t[1]).unwrap()
        }),
        ("sum of all", vec![vec![1 << 20]], |t| {
            t[0].sum(&[], false).unwrap()
        }),
        ("max of all", vec![vec![1 << 17]], |t| {
            t[0].max(&[], false).unwrap()
        }),
        ("softmax", vec![vec![64, 520]], |t| {
            t[0].softmax(-1).unwrap()
        }),
    ];
    all.extend(more);
    for (i, (name, shapes, f)) in all.into_iter().enumerate() {
        let what = format!("{name} {shapes:?}");
        let seed = 4000 + i as u64;
        let got = run(&on, &shapes, f, seed);
        let again = run(&on, &shapes, f, seed);
        let plain = run(&off, &shapes, f, seed);
        same_bits(&format!("{what} run twice"), &again, &got);
        if name == "sum of all" {
            close(&format!("{what} against unoptimised"), &got, &plain, 5e-4);
        } else {
            same_bits(&format!("{what} against unoptimised"), &got, &plain);
        }
    }
    // A full sum of 2^20 elements is two kernels when optimised.
    let x = Tensor::from_slice(&vec![1.0f32; 1 << 20], &[1 << 20], &on).unwrap();
    let k0 = on.kernels_launched();
    assert_eq!(
        x.sum(&[], false).unwrap().to_vec_f32().unwrap(),
        [1048576.0]
    );
    assert_eq!(on.kernels_launched() - k0, 2);
    // Empty tensors (outputs of no elements: no work-item runs).
    for dev in [&on, &off] {
        let e = Tensor::from_slice(&[] as &[f32], &[0, 16], dev).unwrap();
        assert!(e.add(&e).unwrap().to_vec_f32().unwrap().is_empty());
        let b = Tensor::from_slice(&[1.0f32; 16 * 8], &[16, 8], dev).unwrap();
        assert!(e.matmul(&b).unwrap().to_vec_f32().unwrap().is_empty());
        assert!(e.sum(&[1], false).unwrap().to_vec_f32().unwrap().is_empty());
    }
}

/// The `cpu` device's matrix products of at least 64 rows and 2^20 multiply-adds read
/// their right operand from panels a kernel of their own packs (columns padded to the
/// tile, rows padded when the tile does not divide them, the padded product shrunk back):
/// the plain kernel's bits for a row-major, a transposed and a batched right operand and
/// for rows and columns that the tile does not divide, gradients included; the packing
/// kernels are there.
#[test]
fn cpu_packed_matmul_operands_keep_the_plain_kernels_bits() {
    let on = Device::cpu_with(compiler());
    let off = Device::cpu_with(compiler());
    on.set_optimize(true);
    off.set_optimize(false);
    let cases: [Case; 4] = [
        ("matmul", vec![vec![64, 128], vec![128, 128]], |t| {
            t[0].matmul(&t[1]).unwrap()
        }),
        ("matmul", vec![vec![66, 130], vec![130, 123]], |t| {
            t[0].matmul(&t[1]).unwrap()
        }),
        (
            "matmul by a transpose",
            vec![vec![100, 120], vec![90, 120]],
            |t| t[0].matmul(&t[1].t().unwrap()).unwrap(),
        ),
        (
            "batched matmul",
            vec![vec![2, 65, 128], vec![2, 128, 130]],
            |t| t[0].matmul(&t[1]).unwrap(),
        ),
    ];
    for (i, (name, shapes, f)) in cases.into_iter().enumerate() {
        let what = format!("{name} {shapes:?}");
        let seed = 4100 + i as u64;
        same_bits(
            &what,
            &run(&on, &shapes, f, seed),
            &run(&off, &shapes, f, seed),
        );
    }
    // Kernels: B's panels and the product; with rows and columns off the tile also A's
    // padded rows and the shrink back.
    let mut rng = Rng(0x0c9_0043);
    for ((m, k, n), kernels) in [((64, 128, 128), 2), ((66, 130, 123), 4)] {
        let a = Tensor::from_slice(&rng.values(m * k, -1.0, 1.0), &[m, k], &on).unwrap();
        let b = Tensor::from_slice(&rng.values(k * n, -1.0, 1.0), &[k, n], &on).unwrap();
        let k0 = on.kernels_launched();
        a.matmul(&b).unwrap().realize().unwrap();
        assert_eq!(
            on.kernels_launched() - k0,
            kernels,
            "[{m}, {k}] · [{k}, {n}]"
        );
    }
    // Gradients flow through the packing: those of both operands of Σ (A · B)².
    let grads = |dev: &Device| {
        let mut rng = Rng(0x0c9_0044);
        let a = Tensor::from_slice(&rng.values(66 * 130, -1.0, 1.0), &[66, 130], dev).unwrap();
        let b = Tensor::from_slice(&rng.values(130 * 123, -1.0, 1.0), &[130, 123], dev).unwrap();
        a.set_requires_grad(true);
        b.set_requires_grad(true);
        a.matmul(&b)
            .unwrap()
            .square()
            .sum(&[], false)
            .unwrap()
            .backward()
            .unwrap();
        [a.grad().unwrap(), b.grad().unwrap()].map(|g| g.to_vec_f32().unwrap())
    };
    let (got, want) = (grads(&on), grads(&off));
    same_bits("gradient of A", &got[0], &want[0]);
    same_bits("gradient of B", &got[1], &want[1]);
}
