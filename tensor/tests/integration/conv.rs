//! The operations of convolutional networks (`conv2d`, `conv_transpose2d`, `max_pool2d`,
//! `avg_pool2d`, `batch_norm`, `silu`, `idiv`, `rem`): forward against direct f64 loops,
//! gradients against central differences of those loops (property tests over random small
//! shapes and options, on the CPU), and the mock Navi31 against the CPU.

use crate::common;

use am_tensor::{ConvOptions, DType, Device, Tensor};
use common::{Check, Nd, Rng, assert_close, cpu, navi31};
use proptest::prelude::*;

type Op<'a> = dyn Fn(&[Tensor]) -> am_tensor::Result<Tensor> + 'a;
type Ref<'a> = dyn Fn(&[Nd]) -> Nd + 'a;
/// An operation's name, input shapes and the operation.
type Case<'a> = (&'a str, Vec<Vec<usize>>, Box<Op<'a>>);

fn at4(x: &Nd, i: [usize; 4]) -> f64 {
    let s = &x.shape;
    x.data[((i[0] * s[1] + i[1]) * s[2] + i[2]) * s[3] + i[3]]
}

/// Output size along one axis (`None` when the kernel does not fit).
fn out_len(len: usize, pad: usize, k: usize, s: usize, d: usize) -> Option<usize> {
    let span = d * (k - 1) + 1;
    (len + 2 * pad >= span).then(|| (len + 2 * pad - span) / s + 1)
}

/// The convolution by its definition: every output a sum over its window.
fn conv2d_ref(x: &Nd, w: &Nd, b: Option<&Nd>, o: ConvOptions) -> Nd {
    let [n, _, h, wd] = [x.shape[0], x.shape[1], x.shape[2], x.shape[3]];
    let [cout, cig, kh, kw] = [w.shape[0], w.shape[1], w.shape[2], w.shape[3]];
    let cog = cout / o.groups;
    let oh = out_len(h, o.padding[0], kh, o.stride[0], o.dilation[0]).unwrap();
    let ow = out_len(wd, o.padding[1], kw, o.stride[1], o.dilation[1]).unwrap();
    let mut out = Vec::with_capacity(n * cout * oh * ow);
    for ni in 0..n {
        for co in 0..cout {
            let g = co / cog;
            for y in 0..oh {
                for xx in 0..ow {
                    let mut acc = b.map_or(0.0, |b| b.data[co]);
                    for ci in 0..cig {
                        for ky in 0..kh {
                            for kx in 0..kw {
                                let iy = (y * o.stride[0] + ky * o.dilation[0]) as i64
                                    - o.padding[0] as i64;
                                let ix = (xx * o.stride[1] + kx * o.dilation[1]) as i64
                                    - o.padding[1] as i64;
                                if iy < 0 || ix < 0 || iy >= h as i64 || ix >= wd as i64 {
                                    continue;
                                }
                                acc += at4(x, [ni, g * cig + ci, iy as usize, ix as usize])
                                    * at4(w, [co, ci, ky, kx]);
                            }
                        }
                    }
                    out.push(acc);
                }
            }
        }
    }
    Nd::new(&[n, cout, oh, ow], out)
}

/// The transposed convolution by its definition: every input element scatters its kernel.
fn conv_transpose2d_ref(x: &Nd, w: &Nd, b: Option<&Nd>, o: ConvOptions) -> Nd {
    let [n, cin, h, wd] = [x.shape[0], x.shape[1], x.shape[2], x.shape[3]];
    let [_, cog, kh, kw] = [w.shape[0], w.shape[1], w.shape[2], w.shape[3]];
    let cig = cin / o.groups;
    let cout = cog * o.groups;
    let oh = (h - 1) * o.stride[0] + o.dilation[0] * (kh - 1) + o.output_padding[0] + 1
        - 2 * o.padding[0];
    let ow = (wd - 1) * o.stride[1] + o.dilation[1] * (kw - 1) + o.output_padding[1] + 1
        - 2 * o.padding[1];
    let mut out = vec![0.0; n * cout * oh * ow];
    for ni in 0..n {
        for ci in 0..cin {
            let g = ci / cig;
            for y in 0..h {
                for xx in 0..wd {
                    for co in 0..cog {
                        for ky in 0..kh {
                            for kx in 0..kw {
                                let oy = (y * o.stride[0] + ky * o.dilation[0]) as i64
                                    - o.padding[0] as i64;
                                let ox = (xx * o.stride[1] + kx * o.dilation[1]) as i64
                                    - o.padding[1] as i64;
                                if oy < 0 || ox < 0 || oy >= oh as i64 || ox >= ow as i64 {
                                    continue;
                                }
                                let c = g * cog + co;
                                out[((ni * cout + c) * oh + oy as usize) * ow + ox as usize] +=
                                    at4(x, [ni, ci, y, xx]) * at4(w, [ci, co, ky, kx]);
                            }
                        }
                    }
                }
            }
        }
    }
    if let Some(b) = b {
        for (i, v) in out.iter_mut().enumerate() {
            *v += b.data[(i / (oh * ow)) % cout];
        }
    }
    Nd::new(&[n, cout, oh, ow], out)
}

/// Pooling by its definition: `f` over each window's elements (padding included as `pad`).
fn pool_ref(
    x: &Nd,
    k: [usize; 2],
    s: [usize; 2],
    p: [usize; 2],
    pad: f64,
    f: &dyn Fn(&[f64]) -> f64,
) -> Nd {
    let [n, c, h, w] = [x.shape[0], x.shape[1], x.shape[2], x.shape[3]];
    let oh = out_len(h, p[0], k[0], s[0], 1).unwrap();
    let ow = out_len(w, p[1], k[1], s[1], 1).unwrap();
    let mut out = Vec::new();
    for ni in 0..n {
        for ci in 0..c {
            for y in 0..oh {
                for xx in 0..ow {
                    let mut win = Vec::new();
                    for ky in 0..k[0] {
                        for kx in 0..k[1] {
                            let iy = (y * s[0] + ky) as i64 - p[0] as i64;
                            let ix = (xx * s[1] + kx) as i64 - p[1] as i64;
                            let inside = iy >= 0 && ix >= 0 && iy < h as i64 && ix < w as i64;
                            win.push(if inside {
                                at4(x, [ni, ci, iy as usize, ix as usize])
                            } else {
                                pad
                            });
                        }
                    }
                    out.push(f(&win));
                }
            }
        }
    }
    Nd::new(&[n, c, oh, ow], out)
}

/// Batch normalisation with the batch's statistics, by its definition.
fn batch_norm_ref(x: &Nd, w: &Nd, b: &Nd, eps: f64) -> Nd {
    let c = x.shape[1];
    let inner: usize = x.shape[2..].iter().product();
    let count = x.data.len() / c;
    let ch = |i: usize| (i / inner) % c;
    let mut mean = vec![0.0; c];
    for (i, v) in x.data.iter().enumerate() {
        mean[ch(i)] += v / count as f64;
    }
    let mut var = vec![0.0; c];
    for (i, v) in x.data.iter().enumerate() {
        var[ch(i)] += (v - mean[ch(i)]).powi(2) / count as f64;
    }
    let data = x
        .data
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let k = ch(i);
            (v - mean[k]) / (var[k] + eps).sqrt() * w.data[k] + b.data[k]
        })
        .collect();
    Nd::new(&x.shape, data)
}

fn inputs(rng: &mut Rng, shapes: &[Vec<usize>]) -> Vec<(Vec<usize>, Vec<f32>)> {
    shapes
        .iter()
        .map(|s| (s.clone(), rng.values(s.iter().product(), -1.0, 1.0)))
        .collect()
}

fn check_on(dev: &Device, name: &str, ins: Vec<(Vec<usize>, Vec<f32>)>, op: &Op<'_>, r: &Ref<'_>) {
    let c = Check {
        name,
        inputs: ins,
        tol: 1e-5,
        grad: true,
    };
    c.run(dev, op, r);
}

/// A convolution's configuration drawn by the property tests.
fn conv_case() -> impl Strategy<Value = (usize, usize, usize, usize, [usize; 2], ConvOptions, bool)>
{
    (
        1usize..3,
        1usize..3,
        1usize..3,
        1usize..3,
        (1usize..4, 1usize..4),
        (1usize..3, 0usize..2, 1usize..3, 0usize..3),
        any::<bool>(),
    )
        .prop_map(|(n, groups, cig, cog, (kh, kw), (s, p, d, extra), bias)| {
            let o = ConvOptions::default()
                .stride(s)
                .padding(p)
                .dilation(d)
                .groups(groups);
            // Inputs just large enough for the dilated kernel, plus up to two more.
            let hw = [d * (kh - 1) + 1 + extra, d * (kw - 1) + 1 + extra % 2];
            (n, groups * cig, groups * cog, kh * 10 + kw, hw, o, bias)
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    #[test]
    fn conv2d_matches_its_definition_and_finite_differences(
        (n, cin, cout, k, hw, o, bias) in conv_case(),
        seed in 0u64..1000,
    ) {
        let (kh, kw) = (k / 10, k % 10);
        let mut rng = Rng(seed);
        let mut shapes = vec![vec![n, cin, hw[0], hw[1]], vec![cout, cin / o.groups, kh, kw]];
        if bias {
            shapes.push(vec![cout]);
        }
        check_on(
            &cpu(),
            &format!("conv2d {shapes:?} {o:?}"),
            inputs(&mut rng, &shapes),
            &|t| t[0].conv2d(&t[1], t.get(2), o),
            &|x| conv2d_ref(&x[0], &x[1], x.get(2), o),
        );
    }

    #[test]
    fn conv_transpose2d_matches_its_definition_and_finite_differences(
        (n, cin, cout, k, hw, o, bias) in conv_case(),
        op in 0usize..2,
        seed in 0u64..1000,
    ) {
        let (kh, kw) = (k / 10, k % 10);
        // Output padding below the stride or the dilation, padding that leaves an output.
        let mut o = o;
        o.output_padding = [op.min(o.stride[0].max(o.dilation[0]) - 1); 2];
        o.padding = [o.padding[0].min(o.dilation[0] * (kh - 1) / 2),
                     o.padding[1].min(o.dilation[1] * (kw - 1) / 2)];
        let mut rng = Rng(seed);
        let (h, w) = (hw[0].min(3), hw[1].min(3));
        let mut shapes = vec![vec![n, cin, h, w], vec![cin, cout / o.groups, kh, kw]];
        if bias {
            shapes.push(vec![cout]);
        }
        check_on(
            &cpu(),
            &format!("conv_transpose2d {shapes:?} {o:?}"),
            inputs(&mut rng, &shapes),
            &|t| t[0].conv_transpose2d(&t[1], t.get(2), o),
            &|x| conv_transpose2d_ref(&x[0], &x[1], x.get(2), o),
        );
    }

    #[test]
    fn pooling_matches_its_definition_and_finite_differences(
        n in 1usize..3,
        c in 1usize..3,
        (kh, kw) in (1usize..4, 1usize..4),
        (sh, sw) in (1usize..4, 1usize..4),
        pad in 0usize..2,
        extra in 0usize..4,
        seed in 0u64..1000,
    ) {
        let k = [kh, kw];
        let p = [pad.min(kh / 2), pad.min(kw / 2)];
        let s = [sh, sw];
        let shape = vec![n, c, kh + extra, kw + (extra + 1) % 3];
        let mut rng = Rng(seed);
        // Distinct values: a maximum's finite difference needs no near-tie within the step
        // (uniform draws gave one in about 1 seed in 500 at these shapes).
        let ins = vec![(shape.clone(), rng.distinct(shape.iter().product(), -1.0, 1.0))];
        check_on(
            &cpu(),
            &format!("max_pool2d {shape:?} k {k:?} s {s:?} p {p:?}"),
            ins.clone(),
            &|t| t[0].max_pool2d(k, s, p),
            &|x| pool_ref(&x[0], k, s, p, f64::NEG_INFINITY, &|w: &[f64]| {
                w.iter().copied().fold(f64::NEG_INFINITY, f64::max)
            }),
        );
        check_on(
            &cpu(),
            &format!("avg_pool2d {shape:?} k {k:?} s {s:?} p {p:?}"),
            ins,
            &|t| t[0].avg_pool2d(k, s, p),
            &|x| pool_ref(&x[0], k, s, p, 0.0, &|w: &[f64]| w.iter().sum::<f64>() / w.len() as f64),
        );
    }

    #[test]
    fn batch_norm_and_silu_match_their_definitions_and_finite_differences(
        n in 1usize..4,
        c in 1usize..4,
        hw in 1usize..4,
        seed in 0u64..1000,
    ) {
        // Statistics over one element make the variance 0: normalisation needs two.
        prop_assume!(n * hw * hw >= 2);
        let mut rng = Rng(seed);
        let shapes = vec![vec![n, c, hw, hw], vec![c], vec![c]];
        check_on(
            &cpu(),
            &format!("batch_norm {shapes:?}"),
            inputs(&mut rng, &shapes),
            &|t| t[0].batch_norm(Some(&t[1]), Some(&t[2]), None, 0.1, 1e-5),
            &|x| batch_norm_ref(&x[0], &x[1], &x[2], 1e-5),
        );
        check_on(
            &cpu(),
            &format!("silu {:?}", shapes[0]),
            inputs(&mut rng, &shapes[..1]),
            &|t| Ok(t[0].silu()),
            &|x| x[0].map(|v| v / (1.0 + (-v).exp())),
        );
    }
}

/// One fixed case of each operation on the mock Navi31: its values, and its gradients,
/// agree with the CPU's.
#[test]
fn navi31_agrees_with_the_cpu_on_every_operation() {
    let ops: Vec<Case<'_>> = vec![
        (
            "conv2d",
            vec![vec![2, 4, 5, 6], vec![6, 2, 3, 2], vec![6]],
            Box::new(|t: &[Tensor]| {
                let o = ConvOptions {
                    stride: [2, 1],
                    padding: [1, 0],
                    dilation: [1, 2],
                    groups: 2,
                    ..ConvOptions::default()
                };
                t[0].conv2d(&t[1], Some(&t[2]), o)
            }),
        ),
        (
            "conv_transpose2d",
            vec![vec![1, 4, 3, 3], vec![4, 3, 3, 2], vec![6]],
            Box::new(|t: &[Tensor]| {
                let o = ConvOptions::default()
                    .stride(2)
                    .padding(1)
                    .groups(2)
                    .output_padding(1);
                t[0].conv_transpose2d(&t[1], Some(&t[2]), o)
            }),
        ),
        (
            "max_pool2d",
            vec![vec![2, 3, 5, 5]],
            Box::new(|t: &[Tensor]| t[0].max_pool2d([3, 3], [2, 2], [1, 1])),
        ),
        (
            "avg_pool2d",
            vec![vec![2, 3, 4, 6]],
            Box::new(|t: &[Tensor]| t[0].avg_pool2d([2, 2], [2, 2], [0, 0])),
        ),
        (
            "batch_norm",
            vec![vec![4, 3, 2, 2], vec![3], vec![3]],
            Box::new(|t: &[Tensor]| t[0].batch_norm(Some(&t[1]), Some(&t[2]), None, 0.1, 1e-5)),
        ),
        (
            "silu",
            vec![vec![3, 7]],
            Box::new(|t: &[Tensor]| Ok(t[0].silu())),
        ),
    ];
    for (name, shapes, op) in &ops {
        let mut rng = Rng(name.len() as u64);
        let ins = inputs(&mut rng, shapes);
        let run = |dev: &Device| -> (Vec<f32>, Vec<Vec<f32>>) {
            let ts: Vec<Tensor> = ins
                .iter()
                .map(|(s, v)| Tensor::from_slice(v, s, dev).unwrap())
                .collect();
            for t in &ts {
                t.set_requires_grad(true);
            }
            let out = op(&ts).unwrap();
            let w = Tensor::rand(&out.shape(), 3, dev);
            out.mul(&w)
                .unwrap()
                .sum(&[], false)
                .unwrap()
                .backward()
                .unwrap();
            let grads = ts
                .iter()
                .map(|t| t.grad().unwrap().to_vec_f32().unwrap())
                .collect();
            (out.to_vec_f32().unwrap(), grads)
        };
        let (want, want_g) = run(&cpu());
        let (got, got_g) = run(&navi31());
        let want64: Vec<f64> = want.iter().map(|&v| f64::from(v)).collect();
        // Sums add in the same order on both; the GPU's exp2 and reciprocal square root
        // differ from the CPU's in the last bits.
        assert_close(&format!("{name}: navi31 against cpu"), &got, &want64, 1e-5);
        for (k, (g, w)) in got_g.iter().zip(&want_g).enumerate() {
            let w64: Vec<f64> = w.iter().map(|&v| f64::from(v)).collect();
            assert_close(
                &format!("{name}: gradient {k}, navi31 against cpu"),
                g,
                &w64,
                1e-5,
            );
        }
    }
}

/// Training mode assigns the running statistics (the variance unbiased), and inference
/// normalises by the statistics it is given, on both devices.
#[test]
fn batch_norm_updates_running_statistics_and_infers_with_them() {
    for dev in [cpu(), navi31()] {
        // Channel 0 holds 1, 2, 3, 4 (mean 2.5, biased variance 1.25, unbiased 5/3);
        // channel 1 holds 10 four times.
        let x = Tensor::from_slice(
            &[1.0f32, 2.0, 10.0, 10.0, 3.0, 4.0, 10.0, 10.0],
            &[2, 2, 2],
            &dev,
        )
        .unwrap();
        let rm = Tensor::from_slice(&[1.0f32, 0.0], &[2], &dev).unwrap();
        let rv = Tensor::from_slice(&[1.0f32, 2.0], &[2], &dev).unwrap();
        let y = x
            .batch_norm(None, None, Some((&rm, &rv)), 0.25, 1e-3)
            .unwrap();
        Tensor::realize_all(&[&y, &rm, &rv]).unwrap();
        let mean = [0.75 * 1.0 + 0.25 * 2.5, 0.75 * 0.0 + 0.25 * 10.0];
        let var = [0.75 * 1.0 + 0.25 * (5.0 / 3.0), 0.75 * 2.0 + 0.25 * 0.0];
        let what = format!("running mean on {}", dev.name());
        assert_close(&what, &rm.to_vec_f32().unwrap(), &mean, 1e-6);
        let what = format!("running variance on {}", dev.name());
        assert_close(&what, &rv.to_vec_f32().unwrap(), &var, 1e-6);
        // Channel 1 is constant: its deviations are 0 whatever ε.
        let s = (1.25f64 + 1e-3).sqrt();
        let want = [-1.5 / s, -0.5 / s, 0.0, 0.0, 0.5 / s, 1.5 / s, 0.0, 0.0];
        let what = format!("batch_norm on {}", dev.name());
        assert_close(&what, &y.to_vec_f32().unwrap(), &want, 1e-5);

        let w = Tensor::from_slice(&[2.0f32, 1.0], &[2], &dev).unwrap();
        let b = Tensor::from_slice(&[0.5f32, -1.0], &[2], &dev).unwrap();
        let z = x
            .batch_norm_inference(Some(&w), Some(&b), &rm, &rv, 1e-5)
            .unwrap()
            .to_vec_f32()
            .unwrap();
        let want: Vec<f64> = [1.0, 2.0, 10.0, 10.0, 3.0, 4.0, 10.0, 10.0]
            .iter()
            .enumerate()
            .map(|(i, &v)| {
                let c = (i / 2) % 2;
                let (wc, bc) = ([2.0, 1.0][c], [0.5, -1.0][c]);
                (v - mean[c]) / (var[c] + 1e-5).sqrt() * wc + bc
            })
            .collect();
        let what = format!("batch_norm_inference on {}", dev.name());
        assert_close(&what, &z, &want, 1e-5);
    }
}

/// Integer division truncates toward zero and the remainder takes the dividend's sign, as in
/// C; a zero divisor gives 0 and leaves the dividend as the remainder, and `i32::MIN / -1`
/// wraps — the same on both devices.
#[test]
fn integer_division_truncates_toward_zero() {
    let a = [7, -7, 7, -7, 0, 5, -5, i32::MIN, i32::MIN, i32::MAX, 9, -1];
    let b = [2, 2, -2, -2, 3, 0, 0, -1, 1, 7, 3, 5];
    for dev in [cpu(), navi31()] {
        let x = Tensor::from_slice(&a, &[12], &dev).unwrap();
        let y = Tensor::from_slice(&b, &[12], &dev).unwrap();
        let q = x.idiv(&y).unwrap();
        let r = x.rem(&y).unwrap();
        assert_eq!(q.dtype(), DType::I32);
        let q = q.to_vec::<i32>().unwrap();
        let r = r.to_vec::<i32>().unwrap();
        for i in 0..a.len() {
            let (wq, wr) = if b[i] == 0 {
                (0, a[i])
            } else {
                (a[i].wrapping_div(b[i]), a[i].wrapping_rem(b[i]))
            };
            assert_eq!(
                (q[i], r[i]),
                (wq, wr),
                "{} idiv/rem {} on {}",
                a[i],
                b[i],
                dev.name()
            );
        }
        // A number on the right broadcasts; a row against a column too.
        let by3 = x.idiv(3).unwrap().to_vec::<i32>().unwrap();
        let want: Vec<i32> = a.iter().map(|v| v / 3).collect();
        assert_eq!(by3, want, "idiv by 3 on {}", dev.name());
        let col = Tensor::from_slice(&[10, -10], &[2, 1], &dev).unwrap();
        let row = Tensor::from_slice(&[3, -4, 6], &[3], &dev).unwrap();
        let m = col.rem(&row).unwrap();
        assert_eq!(m.shape(), [2, 3]);
        assert_eq!(m.to_vec::<i32>().unwrap(), [1, 2, 4, -1, -2, -4]);
    }
}

/// Integer division refuses floats (which `div` divides), naming the operation.
#[test]
fn integer_division_refuses_floats() {
    let dev = cpu();
    let f = Tensor::full(&[2], 1.5, DType::F32, &dev);
    let i = Tensor::full(&[2], 3.0, DType::I32, &dev);
    let e = f.idiv(&i).unwrap_err().to_string();
    assert!(e.contains("idiv") && e.contains("f32"), "{e}");
    let e = i.rem(2.5).unwrap_err().to_string();
    assert!(e.contains("rem") && e.contains("float"), "{e}");
}

/// Shapes that do not fit are errors naming the operation and what does not fit.
#[test]
fn convolution_shapes_are_checked() {
    let dev = cpu();
    let x = Tensor::zeros(&[1, 4, 5, 5], DType::F32, &dev);
    let e = x
        .conv2d(
            &Tensor::zeros(&[2, 3, 3, 3], DType::F32, &dev),
            None,
            ConvOptions::default(),
        )
        .unwrap_err()
        .to_string();
    assert!(e.contains("conv2d") && e.contains("groups"), "{e}");
    let e = x
        .conv2d(
            &Tensor::zeros(&[2, 4, 7, 3], DType::F32, &dev),
            None,
            ConvOptions::default(),
        )
        .unwrap_err()
        .to_string();
    assert!(e.contains("conv2d") && e.contains("does not fit"), "{e}");
    let e = x
        .max_pool2d([2, 2], [2, 2], [2, 2])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("max_pool2d") && e.contains("half the kernel"),
        "{e}"
    );
    let e = Tensor::zeros(&[4, 5], DType::F32, &dev)
        .avg_pool2d([2, 2], [2, 2], [0, 0])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("avg_pool2d") && e.contains("[batch, channels"),
        "{e}"
    );
}
