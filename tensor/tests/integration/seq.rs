//! Operations of sequence models (`tensor/src/seq.rs`): forward and backward against a host
//! reference in f64 on the CPU and the mock Navi31, gradients of random shapes against finite
//! differences, the device-resident random stream, and fresh random numbers in captured
//! steps.

use crate::common;

use am_tensor::{DType, Device, Jit, Rng, Tensor, rand_at_reference};
use common::{Check, Nd, Rng as HostRng, cpu, devices, navi31};
use proptest::prelude::*;

type Op<'a> = dyn Fn(&[Tensor]) -> am_tensor::Result<Tensor> + 'a;
type Ref<'a> = dyn Fn(&[Nd]) -> Nd + 'a;

fn check(name: &str, shapes: &[&[usize]], tol: f64, op: &Op<'_>, r: &Ref<'_>) {
    let mut rng = HostRng(name.len() as u64 * 29 + 5);
    let inputs = shapes
        .iter()
        .map(|s| (s.to_vec(), rng.values(s.iter().product(), -1.5, 1.5)))
        .collect();
    let c = Check {
        name,
        inputs,
        tol,
        grad: true,
    };
    for dev in devices() {
        c.run(&dev, op, r);
    }
}

/// Rows of the last axis of `x` mapped by `f` (the reference of a per-row operation).
fn per_row(x: &Nd, f: impl Fn(&[f64]) -> Vec<f64>) -> Nd {
    let n = *x.shape.last().unwrap();
    let data = x.data.chunks(n).flat_map(f).collect();
    Nd::new(&x.shape, data)
}

fn layer_norm_ref(row: &[f64], w: &[f64], b: &[f64], eps: f64) -> Vec<f64> {
    let n = row.len() as f64;
    let mean = row.iter().sum::<f64>() / n;
    let var = row.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n;
    let r = 1.0 / (var + eps).sqrt();
    row.iter()
        .enumerate()
        .map(|(i, x)| (x - mean) * r * w[i] + b[i])
        .collect()
}

#[test]
fn layer_norm_normalises_the_last_axis_and_differentiates() {
    check(
        "layer_norm",
        &[&[3, 5], &[5], &[5]],
        1e-4,
        &|t| t[0].layer_norm(Some(&t[1]), Some(&t[2]), 1e-5),
        &|x| per_row(&x[0], |r| layer_norm_ref(r, &x[1].data, &x[2].data, 1e-5)),
    );
    // Without weight and bias: each row has mean 0 and variance 1 (up to eps).
    for dev in devices() {
        let x = Tensor::uniform(&[4, 16], -3.0, 5.0, 3, &dev).unwrap();
        let y = x.layer_norm(None, None, 0.0).unwrap();
        let mean = y.mean(&[-1], false).unwrap().to_vec::<f32>().unwrap();
        let var = y
            .square()
            .mean(&[-1], false)
            .unwrap()
            .to_vec::<f32>()
            .unwrap();
        for (m, v) in mean.iter().zip(&var) {
            assert!(m.abs() < 1e-5, "{}: row mean {m}", dev.name());
            assert!((v - 1.0).abs() < 1e-4, "{}: row variance {v}", dev.name());
        }
    }
}

#[test]
fn rms_norm_divides_by_the_root_mean_square() {
    check(
        "rms_norm",
        &[&[2, 3, 4], &[4]],
        1e-4,
        &|t| t[0].rms_norm(Some(&t[1]), 1e-6),
        &|x| {
            per_row(&x[0], |r| {
                let ms = r.iter().map(|v| v * v).sum::<f64>() / r.len() as f64;
                let k = 1.0 / (ms + 1e-6).sqrt();
                r.iter().zip(&x[1].data).map(|(v, w)| v * k * w).collect()
            })
        },
    );
}

#[test]
fn norms_refuse_parameters_of_another_size() {
    let x = Tensor::zeros(&[2, 4], DType::F32, &cpu());
    let w = Tensor::ones(&[3], DType::F32, &cpu());
    let e = x.layer_norm(Some(&w), None, 1e-5).unwrap_err().to_string();
    assert!(e.contains("layer_norm") && e.contains("[3]"), "{e}");
    let e = x.rms_norm(Some(&w), 1e-5).unwrap_err().to_string();
    assert!(e.contains("rms_norm") && e.contains("[4]"), "{e}");
}

#[test]
fn embedding_picks_rows_and_scatters_gradients() {
    // Index 1 twice: its row's gradient is the sum of both picks'.
    let idx = [1i32, 3, 1, 0, 2, 1];
    check(
        "embedding",
        &[&[4, 3]],
        1e-5,
        &|t| {
            let i = Tensor::from_slice(&idx, &[2, 3], &t[0].device())?;
            t[0].embedding(&i)
        },
        &|x| {
            let data = idx
                .iter()
                .flat_map(|&i| x[0].data[i as usize * 3..i as usize * 3 + 3].to_vec())
                .collect();
            Nd::new(&[2, 3, 3], data)
        },
    );
    // An index outside the table picks zeros; a float index is refused.
    let dev = cpu();
    let table = Tensor::ones(&[2, 2], DType::F32, &dev);
    let i = Tensor::from_slice(&[5i32, -1], &[2], &dev).unwrap();
    assert_eq!(
        table.embedding(&i).unwrap().to_vec::<f32>().unwrap(),
        [0.0; 4]
    );
    let e = table
        .embedding(&i.cast(DType::F32))
        .unwrap_err()
        .to_string();
    assert!(e.contains("embedding") && e.contains("i32"), "{e}");
}

#[test]
fn tril_and_triu_keep_their_triangles() {
    for k in [-1i64, 0, 2] {
        let band = move |x: &Nd, lower: bool| {
            let (r, c) = (x.shape[x.shape.len() - 2], x.shape[x.shape.len() - 1]);
            let data = x
                .data
                .iter()
                .enumerate()
                .map(|(i, &v)| {
                    let d = (i % c) as i64 - ((i / c) % r) as i64;
                    if (lower && d <= k) || (!lower && d >= k) {
                        v
                    } else {
                        0.0
                    }
                })
                .collect();
            Nd::new(&x.shape, data)
        };
        check("tril", &[&[2, 3, 4]], 1e-6, &|t| t[0].tril(k), &|x| {
            band(&x[0], true)
        });
        check("triu", &[&[4, 3]], 1e-6, &|t| t[0].triu(k), &|x| {
            band(&x[0], false)
        });
    }
    let e = Tensor::zeros(&[3], DType::F32, &cpu())
        .tril(0)
        .unwrap_err()
        .to_string();
    assert!(e.contains("tril") && e.contains("two axes"), "{e}");
}

#[test]
fn cumsum_runs_along_any_axis() {
    for a in [0isize, 1, -1] {
        check("cumsum", &[&[3, 4, 2]], 1e-5, &|t| t[0].cumsum(a), &|x| {
            let x = &x[0];
            let ax = if a < 0 { 2 } else { a as usize };
            let s = common::strides(&x.shape);
            let mut out = x.data.clone();
            for i in 0..out.len() {
                let pos = (i / s[ax]) % x.shape[ax];
                if pos > 0 {
                    out[i] += out[i - s[ax]];
                }
            }
            Nd::new(&x.shape, out)
        });
    }
    // Bools count.
    for dev in devices() {
        let b = Tensor::from_slice(&[true, false, true, true], &[4], &dev).unwrap();
        let c = b.cumsum(0).unwrap();
        assert_eq!(c.dtype(), DType::I32);
        assert_eq!(c.to_vec::<i32>().unwrap(), [1, 1, 2, 3], "{}", dev.name());
    }
}

/// softmax(q·kᵀ/√e + mask)·v on the host; `mask[l][s]` is added (−∞ hides).
fn attention_ref(q: &Nd, k: &Nd, v: &Nd, mask: &dyn Fn(usize, usize) -> f64) -> Nd {
    let (b, l, e) = (q.shape[0], q.shape[1], q.shape[2]);
    let (s, ev) = (k.shape[1], v.shape[2]);
    let mut out = vec![0.0; b * l * ev];
    for bi in 0..b {
        for i in 0..l {
            let mut sc: Vec<f64> = (0..s)
                .map(|j| {
                    let dot: f64 = (0..e)
                        .map(|x| q.data[(bi * l + i) * e + x] * k.data[(bi * s + j) * e + x])
                        .sum();
                    dot / (e as f64).sqrt() + mask(i, j)
                })
                .collect();
            let m = sc.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let z: f64 = sc.iter().map(|x| (x - m).exp()).sum();
            for x in &mut sc {
                *x = (*x - m).exp() / z;
            }
            for y in 0..ev {
                out[(bi * l + i) * ev + y] =
                    (0..s).map(|j| sc[j] * v.data[(bi * s + j) * ev + y]).sum();
            }
        }
    }
    Nd::new(&[b, l, ev], out)
}

#[test]
fn attention_with_causal_additive_and_bool_masks() {
    let shapes: [&[usize]; 3] = [&[2, 3, 4], &[2, 3, 4], &[2, 3, 2]];
    check(
        "attention",
        &shapes,
        1e-4,
        &|t| t[0].scaled_dot_product_attention(&t[1], &t[2], None, false),
        &|x| attention_ref(&x[0], &x[1], &x[2], &|_, _| 0.0),
    );
    check(
        "attention causal",
        &shapes,
        1e-4,
        &|t| t[0].scaled_dot_product_attention(&t[1], &t[2], None, true),
        &|x| {
            attention_ref(&x[0], &x[1], &x[2], &|i, j| {
                if j <= i { 0.0 } else { f64::NEG_INFINITY }
            })
        },
    );
    // Fewer queries than keys (a decoding step): an additive mask over the keys.
    let add = [0.5f32, -1.0, 0.0, 2.0, -0.25];
    check(
        "attention additive mask",
        &[&[1, 2, 4], &[1, 5, 4], &[1, 5, 3]],
        1e-4,
        &|t| {
            let m = Tensor::from_slice(&add, &[5], &t[0].device())?;
            t[0].scaled_dot_product_attention(&t[1], &t[2], Some(&m), false)
        },
        &|x| attention_ref(&x[0], &x[1], &x[2], &|_, j| f64::from(add[j])),
    );
    let keep = [true, false, true, true, false];
    check(
        "attention bool mask",
        &[&[1, 2, 4], &[1, 5, 4], &[1, 5, 3]],
        1e-4,
        &|t| {
            let m = Tensor::from_slice(&keep, &[5], &t[0].device())?;
            t[0].scaled_dot_product_attention(&t[1], &t[2], Some(&m), false)
        },
        &|x| {
            attention_ref(&x[0], &x[1], &x[2], &|_, j| {
                if keep[j] { 0.0 } else { f64::NEG_INFINITY }
            })
        },
    );
    let z = Tensor::zeros(&[2, 4], DType::F32, &cpu());
    let e = z
        .scaled_dot_product_attention(&Tensor::zeros(&[2, 3], DType::F32, &cpu()), &z, None, true)
        .unwrap_err()
        .to_string();
    assert!(e.contains("scaled_dot_product_attention"), "{e}");
}

#[test]
fn rng_draws_follow_the_reference_and_advance_the_counter() {
    for dev in devices() {
        let rng = Rng::new(11, &dev).unwrap();
        let a = rng.rand(&[3, 5]).unwrap();
        let b = rng.rand(&[7]).unwrap();
        // Realized together: one schedule, two increments, two different streams.
        Tensor::realize_all(&[&a, &b]).unwrap();
        assert_eq!(rng.counter().unwrap(), 2, "{}", dev.name());
        let (a, b) = (a.to_vec::<f32>().unwrap(), b.to_vec::<f32>().unwrap());
        for (x, &v) in a.iter().enumerate() {
            assert_eq!(
                v,
                rand_at_reference(x as u32, 11, 1),
                "{}: a[{x}]",
                dev.name()
            );
        }
        for (x, &v) in b.iter().enumerate() {
            assert_eq!(
                v,
                rand_at_reference(x as u32, 11, 2),
                "{}: b[{x}]",
                dev.name()
            );
        }
        let c = rng.rand(&[7]).unwrap().to_vec::<f32>().unwrap();
        assert_ne!(b, c, "{}: the third draw repeats the second", dev.name());
        assert_eq!(rng.counter().unwrap(), 3);
    }
}

#[test]
fn dropout_zeroes_about_p_and_scales_the_rest() {
    let n = 4000;
    let mut masks = vec![];
    for dev in devices() {
        let rng = Rng::new(5, &dev).unwrap();
        let x = Tensor::ones(&[n], DType::F32, &dev);
        x.set_requires_grad(true);
        let y = x.dropout(0.25, &rng).unwrap();
        y.sum(&[], false).unwrap().backward().unwrap();
        let (yv, g) = (
            y.to_vec::<f32>().unwrap(),
            x.grad().unwrap().to_vec::<f32>().unwrap(),
        );
        let zeros = yv.iter().filter(|&&v| v == 0.0).count();
        // 1000 expected, standard deviation 27.
        assert!(
            (880..1120).contains(&zeros),
            "{}: {zeros} zeros",
            dev.name()
        );
        for (i, (&v, &gv)) in yv.iter().zip(&g).enumerate() {
            assert!(
                v == 0.0 || (v - 4.0 / 3.0).abs() < 1e-6,
                "{}: y[{i}] {v}",
                dev.name()
            );
            assert_eq!(gv, v, "{}: the gradient is the mask over 1 − p", dev.name());
        }
        masks.push(yv);
    }
    assert_eq!(
        masks[0], masks[1],
        "the same seed gives the same mask on both devices"
    );
    let x = Tensor::ones(&[3], DType::F32, &cpu());
    let rng = Rng::new(0, &cpu()).unwrap();
    assert_eq!(
        x.dropout(0.0, &rng).unwrap().to_vec::<f32>().unwrap(),
        [1.0; 3]
    );
    assert_eq!(
        x.dropout(1.0, &rng).unwrap().to_vec::<f32>().unwrap(),
        [0.0; 3]
    );
    assert!(x.dropout(1.5, &rng).is_err());
}

#[test]
fn multinomial_draws_in_proportion_to_the_weights() {
    let rows = 2000;
    let mut draws = vec![];
    for dev in devices() {
        let rng = Rng::new(9, &dev).unwrap();
        // Row pattern: weights 1 and 3 (index 1 three times as likely), and a row that can
        // only give index 1.
        let mut w = vec![];
        for _ in 0..rows {
            w.extend_from_slice(&[1.0f32, 3.0, 0.0, 0.0, 0.0, 2.0, 0.0, 0.0]);
        }
        let t = Tensor::from_slice(&w, &[rows, 2, 4], &dev).unwrap();
        let s = t.multinomial(&rng).unwrap();
        assert_eq!(s.shape(), [rows, 2]);
        let s = s.to_vec::<i32>().unwrap();
        let ones = s.chunks(2).filter(|r| r[0] == 1).count();
        assert!(
            s.chunks(2).all(|r| r[0] == 0 || r[0] == 1),
            "{}",
            dev.name()
        );
        assert!(s.chunks(2).all(|r| r[1] == 1), "{}", dev.name());
        // 1500 expected, standard deviation 19.
        assert!(
            (1400..1600).contains(&ones),
            "{}: {ones} draws of index 1",
            dev.name()
        );
        draws.push(s);
    }
    assert_eq!(
        draws[0], draws[1],
        "the same seed draws the same on both devices"
    );
}

/// A captured step whose output is a fresh dropout mask of `x`: returns the masks of
/// `steps` steps (the first two run `f`, the others replay it).
fn dropout_masks(dev: &Device, seed: u32, steps: usize) -> Vec<Vec<f32>> {
    let rng = Rng::new(seed, dev).unwrap();
    let mut jit = Jit::new(dev);
    let x = Tensor::from_slice(&[1.0f32; 64], &[64], dev).unwrap();
    let mut out = vec![];
    for _ in 0..steps {
        let y = jit
            .run(&[&x], |i| Ok(vec![i[0].dropout(0.5, &rng)?]))
            .unwrap();
        out.push(y[0].to_vec::<f32>().unwrap());
    }
    assert!(jit.is_captured());
    assert_eq!(rng.counter().unwrap(), steps as i32, "{}", dev.name());
    out
}

#[test]
fn captured_steps_draw_fresh_numbers_on_every_replay() {
    for dev in devices() {
        let a = dropout_masks(&dev, 21, 5);
        // Steps 3, 4 and 5 are replays of the captured second step.
        for i in 1..a.len() {
            for j in 0..i {
                assert_ne!(
                    a[i],
                    a[j],
                    "{}: steps {j} and {i} drew the same mask",
                    dev.name()
                );
            }
        }
        let b = dropout_masks(&dev, 21, 5);
        assert_eq!(a, b, "{}: the same seed repeats the whole run", dev.name());
        let c = dropout_masks(&dev, 22, 5);
        assert_ne!(a, c, "{}: another seed draws the same", dev.name());
    }
    assert_eq!(
        dropout_masks(&cpu(), 21, 4),
        dropout_masks(&navi31(), 21, 4),
        "the CPU and the mock draw the same"
    );
}

/// A scalar function of `x` (shape `[a, b, c]`) through one of the new operations.
fn f(which: u8, x: &Tensor, w: &Tensor) -> am_tensor::Result<Tensor> {
    let c = *x.shape().last().unwrap();
    let y = match which % 6 {
        0 => {
            // A ramp along the row whose steps (2.5) exceed the spread of `x` (2) keeps
            // neighbours apart and the variance away from 0, where the normalisation is too
            // steep for a finite difference of step 1e-2 (a ramp of 0.7 let two entries of
            // a row of 2 meet: backward 0.465, finite difference 0.505).
            let ramp = Tensor::arange(0, c as i32, 1, &x.device())?
                .cast(DType::F32)
                .mul(2.5)?;
            let g = Tensor::uniform(&[c], 0.5, 1.5, 1, &x.device())?;
            x.add(&ramp)?.layer_norm(Some(&g), None, 1e-5)?.mul(w)?
        }
        1 => x.add(1.5)?.rms_norm(None, 1e-6)?.mul(w)?,
        2 => x.cumsum(1)?.mul(w)?,
        3 => x.tril(0)?.add(&x.triu(1)?.mul(2.0)?)?.mul(w)?,
        4 => x.scaled_dot_product_attention(w, x, None, true)?,
        _ => {
            let idx: Vec<i32> = (0..5).map(|i| (i * 7 % x.shape()[0]) as i32).collect();
            let i = Tensor::from_slice(&idx, &[5], &x.device())?;
            x.reshape(&[x.shape()[0] as isize, -1])?
                .embedding(&i)?
                .tanh()
        }
    };
    y.square().sum(&[], false)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn gradients_match_finite_differences(
        which in 0u8..6,
        a in 1usize..3,
        b in 1usize..4,
        c in 2usize..5,
        seed in 0u32..1000,
    ) {
        let dev = cpu();
        let shape = [a, b, c];
        let n = a * b * c;
        let xs: Vec<f32> = Tensor::uniform(&[n], -1.0, 1.0, seed, &dev).unwrap().to_vec().unwrap();
        let w = Tensor::uniform(&shape, -1.0, 1.0, seed + 3, &dev).unwrap();
        let x = Tensor::from_slice(&xs, &shape, &dev).unwrap();
        x.set_requires_grad(true);
        f(which, &x, &w).unwrap().backward().unwrap();
        let g = x.grad().unwrap().to_vec::<f32>().unwrap();
        let eval = |v: &[f32]| -> f64 {
            let t = Tensor::from_slice(v, &shape, &dev).unwrap();
            f64::from(f(which, &t, &w).unwrap().item().unwrap())
        };
        let h = 1e-2f32;
        for i in 0..n {
            let (mut up, mut down) = (xs.clone(), xs.clone());
            up[i] += h;
            down[i] -= h;
            let fd = (eval(&up) - eval(&down)) / (2.0 * f64::from(h));
            let got = f64::from(g[i]);
            prop_assert!(
                (got - fd).abs() <= 3e-2 * fd.abs().max(1.0),
                "function {which}, x[{i}] of {shape:?}: backward {got}, finite difference {fd}"
            );
        }
    }
}

// ---- nn pieces -------------------------------------------------------------------------

use am_tensor::nn::{Embedding, LayerNorm, MultiHeadAttention};

#[test]
fn layer_norm_layer_scales_and_shifts_the_normalised_rows() {
    for dev in devices() {
        let ln = LayerNorm::new(4, &dev).unwrap();
        let x = Tensor::from_slice(&[1.0f32, 2.0, 4.0, 9.0, -1.0, 0.0, 3.0, 2.0], &[2, 4], &dev)
            .unwrap();
        let plain = x
            .layer_norm(None, None, 1e-5)
            .unwrap()
            .to_vec::<f32>()
            .unwrap();
        // Fresh: weight 1, bias 0, the plain normalisation.
        assert_eq!(ln.forward(&x).unwrap().to_vec::<f32>().unwrap(), plain);
        let w = [2.0f32, -1.0, 0.5, 3.0];
        let b = [0.25f32, 1.0, -2.0, 0.0];
        ln.weight
            .assign(&Tensor::from_slice(&w, &[4], &dev).unwrap())
            .unwrap();
        ln.bias
            .assign(&Tensor::from_slice(&b, &[4], &dev).unwrap())
            .unwrap();
        let y = ln.forward(&x).unwrap().to_vec::<f32>().unwrap();
        for i in 0..8 {
            let want = plain[i] * w[i % 4] + b[i % 4];
            assert!(
                (y[i] - want).abs() < 1e-5,
                "{}: y[{i}] {} want {want}",
                dev.name(),
                y[i]
            );
        }
        // The bias's gradient of Σ y is the number of rows.
        ln.forward(&x)
            .unwrap()
            .sum(&[], false)
            .unwrap()
            .backward()
            .unwrap();
        let g = ln.bias.grad().unwrap().to_vec::<f32>().unwrap();
        assert_eq!(g, [2.0; 4], "{}", dev.name());
        assert_eq!(ln.parameters().len(), 2);
    }
}

#[test]
fn embedding_layer_looks_up_rows_and_counts_them_in_its_gradient() {
    for dev in devices() {
        let e = Embedding::new(5, 3, 4, &dev).unwrap();
        let table = e.weight.to_vec::<f32>().unwrap();
        // Standard normal values: not all alike, not all zero.
        assert!(table.iter().any(|&v| v.abs() > 0.1) && table.iter().any(|&v| v != table[0]));
        let idx = Tensor::from_slice(&[4i32, 0, 4, 2], &[2, 2], &dev).unwrap();
        let y = e.forward(&idx).unwrap();
        assert_eq!(y.shape(), [2, 2, 3]);
        let got = y.to_vec::<f32>().unwrap();
        for (k, &row) in [4usize, 0, 4, 2].iter().enumerate() {
            assert_eq!(
                got[k * 3..k * 3 + 3],
                table[row * 3..row * 3 + 3],
                "{}",
                dev.name()
            );
        }
        y.sum(&[], false).unwrap().backward().unwrap();
        let g = e.weight.grad().unwrap().to_vec::<f32>().unwrap();
        let counts = [1.0f32, 0.0, 1.0, 0.0, 2.0];
        for r in 0..5 {
            assert_eq!(
                g[r * 3..r * 3 + 3],
                [counts[r]; 3],
                "{}: row {r}",
                dev.name()
            );
        }
    }
}

/// Multi-head attention of `x` `[b, t, d]` on the host from the layer's weights.
fn mha_ref(
    m: &MultiHeadAttention,
    x: &[f32],
    b: usize,
    t: usize,
    d: usize,
    causal: bool,
) -> Vec<f64> {
    let f = |t: &Tensor| -> Vec<f64> {
        t.to_vec::<f32>()
            .unwrap()
            .iter()
            .map(|&v| f64::from(v))
            .collect()
    };
    let (wi, bi) = (f(&m.in_proj.weight), f(&m.in_proj.bias));
    let (wo, bo) = (f(&m.out_proj.weight), f(&m.out_proj.bias));
    let h = m.heads;
    let hd = d / h;
    let lin = |inp: &[f64], w: &[f64], bias: &[f64], outs: usize| -> Vec<f64> {
        (0..outs)
            .map(|o| bias[o] + (0..d).map(|i| inp[i] * w[o * d + i]).sum::<f64>())
            .collect()
    };
    let mut out = vec![];
    for bb in 0..b {
        let qkv: Vec<Vec<f64>> = (0..t)
            .map(|p| {
                let row: Vec<f64> = x[(bb * t + p) * d..(bb * t + p + 1) * d]
                    .iter()
                    .map(|&v| f64::from(v))
                    .collect();
                lin(&row, &wi, &bi, 3 * d)
            })
            .collect();
        let mut heads_out = vec![vec![0.0; d]; t];
        for hh in 0..h {
            for i in 0..t {
                let q = &qkv[i][hh * hd..(hh + 1) * hd];
                let visible = if causal { i + 1 } else { t };
                let sc: Vec<f64> = (0..visible)
                    .map(|j| {
                        let k = &qkv[j][d + hh * hd..d + (hh + 1) * hd];
                        q.iter().zip(k).map(|(a, c)| a * c).sum::<f64>() / (hd as f64).sqrt()
                    })
                    .collect();
                let mx = sc.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let z: f64 = sc.iter().map(|s| (s - mx).exp()).sum();
                for (j, s) in sc.iter().enumerate() {
                    let p = (s - mx).exp() / z;
                    for e in 0..hd {
                        heads_out[i][hh * hd + e] += p * qkv[j][2 * d + hh * hd + e];
                    }
                }
            }
        }
        for row in &heads_out {
            out.extend(lin(row, &wo, &bo, d));
        }
    }
    out
}

#[test]
fn multi_head_attention_matches_per_head_attention_and_hides_the_future() {
    let (b, t, d) = (2, 4, 8);
    let mut rng = HostRng(77);
    let xs = rng.values(b * t * d, -1.0, 1.0);
    for dev in devices() {
        let m = MultiHeadAttention::new(d, 2, 3, &dev).unwrap();
        let x = Tensor::from_slice(&xs, &[b, t, d], &dev).unwrap();
        for causal in [false, true] {
            let y = m.forward(&x, None, causal).unwrap();
            assert_eq!(y.shape(), [b, t, d]);
            let want = mha_ref(&m, &xs, b, t, d, causal);
            common::assert_close(
                &format!("attention on {} (causal {causal})", dev.name()),
                &y.to_vec::<f32>().unwrap(),
                &want,
                1e-4,
            );
        }
        // Causal: changing the last position changes no earlier output.
        let mut xs2 = xs.clone();
        for v in &mut xs2[(t - 1) * d..t * d] {
            *v += 0.5;
        }
        let y1 = m.forward(&x, None, true).unwrap().to_vec::<f32>().unwrap();
        let x2 = Tensor::from_slice(&xs2, &[b, t, d], &dev).unwrap();
        let y2 = m.forward(&x2, None, true).unwrap().to_vec::<f32>().unwrap();
        assert_eq!(y1[..(t - 1) * d], y2[..(t - 1) * d], "{}", dev.name());
        assert_ne!(
            y1[(t - 1) * d..t * d],
            y2[(t - 1) * d..t * d],
            "{}",
            dev.name()
        );
        assert_eq!(m.parameters().len(), 4);
    }
    let e = MultiHeadAttention::new(10, 3, 0, &cpu())
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("heads"), "{e}");
}

/// A bool mask realized on its own and then read through an expand, into a sum (a `where_`
/// of the mask) and a reduction of the mask itself, on every GPU family against the host:
/// sides not multiples of 4 (the bytes of several elements share a dword). The mock Navi31
/// once stored `tril`'s mask all true: the emulator read the first source of a true16
/// `v_cmp_*_u16_e32` (LLVM's code for the triangle's comparison) from the wrong register.
#[test]
fn realized_bool_masks_read_through_expands() {
    for n in [3usize, 5, 6] {
        let tril: Vec<bool> = (0..n * n).map(|k| k % n <= k / n).collect();
        let rows: Vec<f32> = (0..n).map(|r| (r + 1) as f32).collect();
        for dev in [cpu(), navi31(), common::mi300x()] {
            let mask = Tensor::ones(&[n, n], DType::Bool, &dev).tril(0).unwrap();
            mask.realize().unwrap();
            let who = format!("{} n={n}", dev.name());
            assert_eq!(mask.to_vec::<bool>().unwrap(), tril, "{who}");
            let x = Tensor::ones(&[7, 1, n], DType::F32, &dev);
            let kept = mask.where_(&x, 0.0f32).unwrap().sum(&[-1], false).unwrap();
            assert_eq!(kept.to_vec::<f32>().unwrap(), rows.repeat(7), "{who}");
            let counted = mask
                .expand(&[5, n, n])
                .unwrap()
                .cast(DType::I32)
                .sum(&[0, 2], false)
                .unwrap();
            let want: Vec<i32> = (0..n).map(|r| 5 * (r as i32 + 1)).collect();
            assert_eq!(counted.to_vec::<i32>().unwrap(), want, "{who}");
        }
    }
}
