//! Every operation, forward and backward, against a host reference in f64, on the CPU and
//! on the mock Navi31 (gfx1100 code run by the emulator).

use crate::common;

use am_tensor::{DType, Tensor};
use common::{Check, Nd, Rng, assert_close, devices};

type Op<'a> = dyn Fn(&[Tensor]) -> am_tensor::Result<Tensor> + 'a;
type Ref<'a> = dyn Fn(&[Nd]) -> Nd + 'a;

fn check(name: &str, shapes: &[&[usize]], lo: f64, hi: f64, grad: bool, op: &Op<'_>, r: &Ref<'_>) {
    let mut rng = Rng(name.len() as u64 * 31 + 1);
    let inputs = shapes
        .iter()
        .map(|s| (s.to_vec(), rng.values(s.iter().product(), lo, hi)))
        .collect();
    let c = Check {
        name,
        inputs,
        tol: 2e-5,
        grad,
    };
    for dev in devices() {
        c.run(&dev, op, r);
    }
}

/// Values whose magnitude is in [0.25, 2], either sign (away from kinks at 0).
fn signed(rng: &mut Rng, n: usize) -> Vec<f32> {
    (0..n)
        .map(|_| {
            let m = rng.uniform(0.25, 2.0);
            (if rng.uniform(0.0, 1.0) < 0.5 { -m } else { m }) as f32
        })
        .collect()
}

fn check_signed(name: &str, shapes: &[&[usize]], op: &Op<'_>, r: &Ref<'_>) {
    let mut rng = Rng(name.len() as u64 * 17 + 3);
    let inputs = shapes
        .iter()
        .map(|s| (s.to_vec(), signed(&mut rng, s.iter().product())))
        .collect();
    let c = Check {
        name,
        inputs,
        tol: 2e-5,
        grad: true,
    };
    for dev in devices() {
        c.run(&dev, op, r);
    }
}

#[test]
fn binary_arithmetic_broadcasts_and_differentiates() {
    let s: &[&[usize]] = &[&[3, 4], &[4]];
    check("add", s, -2.0, 2.0, true, &|t| t[0].add(&t[1]), &|x| {
        x[0].zip(&x[1], |a, b| a + b)
    });
    check(
        "sub",
        &[&[2, 1, 3], &[4, 1]],
        -2.0,
        2.0,
        true,
        &|t| t[0].sub(&t[1]),
        &|x| x[0].zip(&x[1], |a, b| a - b),
    );
    check("mul", s, -2.0, 2.0, true, &|t| t[0].mul(&t[1]), &|x| {
        x[0].zip(&x[1], |a, b| a * b)
    });
    check("div", s, 0.5, 2.0, true, &|t| t[0].div(&t[1]), &|x| {
        x[0].zip(&x[1], |a, b| a / b)
    });
    check_signed("maximum", &[&[5], &[5]], &|t| t[0].maximum(&t[1]), &|x| {
        x[0].zip(&x[1], f64::max)
    });
    check_signed("minimum", &[&[5], &[5]], &|t| t[0].minimum(&t[1]), &|x| {
        x[0].zip(&x[1], f64::min)
    });
    check(
        "add scalar",
        &[&[3]],
        -2.0,
        2.0,
        true,
        &|t| t[0].add(1.5),
        &|x| x[0].map(|a| a + 1.5),
    );
    check(
        "scalar times",
        &[&[3]],
        -2.0,
        2.0,
        true,
        &|t| t[0].mul(-3.0),
        &|x| x[0].map(|a| -3.0 * a),
    );
}

#[test]
fn unary_math_matches_the_reference() {
    let s: &[&[usize]] = &[&[2, 5]];
    check("neg", s, -2.0, 2.0, true, &|t| Ok(t[0].neg()), &|x| {
        x[0].map(|a| -a)
    });
    check_signed("abs", s, &|t| Ok(t[0].abs()), &|x| x[0].map(f64::abs));
    check("exp", s, -2.0, 2.0, true, &|t| Ok(t[0].exp()), &|x| {
        x[0].map(f64::exp)
    });
    check("exp2", s, -2.0, 2.0, true, &|t| Ok(t[0].exp2()), &|x| {
        x[0].map(f64::exp2)
    });
    check("log", s, 0.2, 3.0, true, &|t| Ok(t[0].log()), &|x| {
        x[0].map(f64::ln)
    });
    check("log2", s, 0.2, 3.0, true, &|t| Ok(t[0].log2()), &|x| {
        x[0].map(f64::log2)
    });
    check("sqrt", s, 0.2, 3.0, true, &|t| Ok(t[0].sqrt()), &|x| {
        x[0].map(f64::sqrt)
    });
    check("rsqrt", s, 0.2, 3.0, true, &|t| Ok(t[0].rsqrt()), &|x| {
        x[0].map(|a| 1.0 / a.sqrt())
    });
    check("recip", s, 0.2, 3.0, true, &|t| Ok(t[0].recip()), &|x| {
        x[0].map(|a| 1.0 / a)
    });
    check("sin", s, -3.0, 3.0, true, &|t| Ok(t[0].sin()), &|x| {
        x[0].map(f64::sin)
    });
    check("cos", s, -3.0, 3.0, true, &|t| Ok(t[0].cos()), &|x| {
        x[0].map(f64::cos)
    });
    check("square", s, -2.0, 2.0, true, &|t| Ok(t[0].square()), &|x| {
        x[0].map(|a| a * a)
    });
}

#[test]
fn activations_match_the_reference() {
    let s: &[&[usize]] = &[&[3, 4]];
    check_signed("relu", s, &|t| Ok(t[0].relu()), &|x| {
        x[0].map(|a| a.max(0.0))
    });
    check(
        "sigmoid",
        s,
        -4.0,
        4.0,
        true,
        &|t| Ok(t[0].sigmoid()),
        &|x| x[0].map(|a| 1.0 / (1.0 + (-a).exp())),
    );
    check("tanh", s, -3.0, 3.0, true, &|t| Ok(t[0].tanh()), &|x| {
        x[0].map(f64::tanh)
    });
    check("gelu", s, -3.0, 3.0, true, &|t| Ok(t[0].gelu()), &|x| {
        let k = (2.0 / std::f64::consts::PI).sqrt();
        x[0].map(|a| 0.5 * a * (1.0 + (k * (a + 0.044715 * a * a * a)).tanh()))
    });
    check_signed("clamp", s, &|t| t[0].clamp(-1.0, 1.0), &|x| {
        x[0].map(|a| a.clamp(-1.0, 1.0))
    });
}

#[test]
fn comparisons_and_where_select_elementwise() {
    for dev in devices() {
        let a = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[4], &dev).unwrap();
        let b = Tensor::from_slice(&[4.0f32, 2.0, 1.0, 5.0], &[4], &dev).unwrap();
        let cases: [(&str, Tensor, [bool; 4]); 6] = [
            ("lt", a.lt(&b).unwrap(), [true, false, false, true]),
            ("le", a.le(&b).unwrap(), [true, true, false, true]),
            ("gt", a.gt(&b).unwrap(), [false, false, true, false]),
            ("ge", a.ge(&b).unwrap(), [false, true, true, false]),
            ("eq", a.eq(&b).unwrap(), [false, true, false, false]),
            ("ne", a.ne(&b).unwrap(), [true, false, true, true]),
        ];
        for (name, t, want) in cases {
            assert_eq!(t.dtype(), DType::Bool, "{name}");
            assert_eq!(
                t.to_vec::<bool>().unwrap(),
                want,
                "{name} on {}",
                dev.name()
            );
        }
        let c = a.lt(&b).unwrap();
        let and = c.logical_and(&a.gt(1.5).unwrap()).unwrap();
        assert_eq!(and.to_vec::<bool>().unwrap(), [false, false, false, true]);
        let or = c.logical_or(&a.eq(3.0).unwrap()).unwrap();
        assert_eq!(or.to_vec::<bool>().unwrap(), [true, false, true, true]);
        assert_eq!(
            c.logical_not().to_vec::<bool>().unwrap(),
            [false, true, true, false]
        );
    }
    // where: gradients flow to the branch chosen.
    let mut rng = Rng(5);
    let cond: Vec<f32> = (0..12)
        .map(|i| if i % 3 == 0 { 1.0 } else { -1.0 })
        .collect();
    let c = Check {
        name: "where",
        inputs: vec![
            (vec![3, 4], rng.values(12, -2.0, 2.0)),
            (vec![4], rng.values(4, -2.0, 2.0)),
        ],
        tol: 1e-6,
        grad: true,
    };
    for dev in devices() {
        let ct = Tensor::from_slice(&cond, &[3, 4], &dev).unwrap();
        c.run(&dev, &|t| ct.gt(0.0)?.where_(&t[0], &t[1]), &|x| {
            let d = (0..12)
                .map(|k| {
                    if cond[k] > 0.0 {
                        x[0].data[k]
                    } else {
                        x[1].data[k % 4]
                    }
                })
                .collect();
            Nd::new(&[3, 4], d)
        });
    }
}

#[test]
fn casts_round_trip_through_every_dtype() {
    for dev in devices() {
        let x = Tensor::from_slice(&[1.5f32, -2.25, 0.0, 3.0e4, -7.9], &[5], &dev).unwrap();
        let i = x.cast(DType::I32).to_vec::<i32>().unwrap();
        assert_eq!(
            i,
            [1, -2, 0, 30000, -7],
            "f32 → i32 truncates on {}",
            dev.name()
        );
        let b = x.cast(DType::Bool).to_vec::<bool>().unwrap();
        assert_eq!(b, [true, true, false, true, true]);
        let h = x.cast(DType::F16).to_vec_f32().unwrap();
        assert_eq!(
            h,
            [1.5, -2.25, 0.0, 30000.0, -7.8984375],
            "f16 rounds to nearest"
        );
        let bf = x.cast(DType::BF16).to_vec_f32().unwrap();
        assert_eq!(
            bf,
            [1.5, -2.25, 0.0, 29952.0, -7.90625],
            "bf16 rounds to nearest"
        );
        // Arithmetic in half precision, reductions accumulate in f32.
        let hs = x
            .cast(DType::F16)
            .mul(2.0)
            .unwrap()
            .sum(&[], false)
            .unwrap();
        assert_eq!(hs.dtype(), DType::F16);
        // 59982.703125 in f32, rounded to f16 (spacing 32).
        assert_eq!(hs.to_vec_f32().unwrap(), [59968.0]);
        let back = Tensor::from_slice(&[1i32, -3, 7], &[3], &dev)
            .unwrap()
            .cast(DType::F32);
        assert_eq!(back.to_vec::<f32>().unwrap(), [1.0, -3.0, 7.0]);
    }
    // Gradients pass through float casts (rounded to f16 on the way: the tolerance is f16's).
    let c = Check {
        name: "cast f16",
        inputs: vec![(vec![4], Rng(2).values(4, -2.0, 2.0))],
        tol: 1e-3,
        grad: true,
    };
    for dev in devices() {
        c.run(
            &dev,
            &|t| Ok(t[0].cast(DType::F16).cast(DType::F32)),
            &|x| x[0].clone(),
        );
    }
}

#[test]
fn reductions_over_axes_with_and_without_keepdim() {
    let s: &[&[usize]] = &[&[2, 3, 4]];
    check(
        "sum axis 1",
        s,
        -2.0,
        2.0,
        true,
        &|t| t[0].sum(&[1], false),
        &|x| x[0].sum(&[1]).reshape(&[2, 4]),
    );
    check(
        "sum keepdim",
        s,
        -2.0,
        2.0,
        true,
        &|t| t[0].sum(&[0, 2], true),
        &|x| x[0].sum(&[0, 2]),
    );
    check(
        "sum all",
        s,
        -2.0,
        2.0,
        true,
        &|t| t[0].sum(&[], false),
        &|x| x[0].sum(&[0, 1, 2]).reshape(&[]),
    );
    check(
        "max axis -1",
        s,
        -2.0,
        2.0,
        true,
        &|t| t[0].max(&[-1], false),
        &|x| x[0].max(&[2]).reshape(&[2, 3]),
    );
    check(
        "min axis 0",
        s,
        -2.0,
        2.0,
        true,
        &|t| t[0].min(&[0], true),
        &|x| x[0].map(|a| -a).max(&[0]).map(|a| -a),
    );
    check(
        "mean",
        s,
        -2.0,
        2.0,
        true,
        &|t| t[0].mean(&[1, 2], false),
        &|x| x[0].sum(&[1, 2]).map(|a| a / 12.0).reshape(&[2]),
    );
    for dev in devices() {
        let x = Tensor::from_slice(&[3.0f32, 9.0, 9.0, 1.0, -1.0, -5.0], &[2, 3], &dev).unwrap();
        assert_eq!(
            x.argmax(1, false).unwrap().to_vec::<i32>().unwrap(),
            [1, 0],
            "first maximum"
        );
        assert_eq!(
            x.argmax(0, true).unwrap().to_vec::<i32>().unwrap(),
            [0, 0, 0]
        );
        assert_eq!(x.argmax(0, true).unwrap().shape(), [1, 3]);
        let b = x.gt(0.0).unwrap().sum(&[], false).unwrap();
        assert_eq!(
            (b.dtype(), b.to_vec::<i32>().unwrap()),
            (DType::I32, vec![4]),
            "bool sums count"
        );
        let i = Tensor::from_slice(&[4i32, -2, 9], &[3], &dev).unwrap();
        assert_eq!(i.max(&[], false).unwrap().to_vec::<i32>().unwrap(), [9]);
        assert_eq!(i.sum(&[], false).unwrap().to_vec::<i32>().unwrap(), [11]);
    }
}

#[test]
fn movement_ops_are_views_with_gradients() {
    let s: &[&[usize]] = &[&[2, 3, 4]];
    check(
        "reshape",
        s,
        -2.0,
        2.0,
        true,
        &|t| t[0].reshape(&[4, -1]),
        &|x| x[0].reshape(&[4, 6]),
    );
    check(
        "permute",
        s,
        -2.0,
        2.0,
        true,
        &|t| t[0].permute(&[2, 0, 1]),
        &|x| x[0].permute(&[2, 0, 1]),
    );
    check(
        "transpose",
        s,
        -2.0,
        2.0,
        true,
        &|t| t[0].transpose(0, 2),
        &|x| x[0].permute(&[2, 1, 0]),
    );
    check(
        "expand",
        &[&[3, 1]],
        -2.0,
        2.0,
        true,
        &|t| t[0].expand(&[2, 3, 4]),
        &|x| x[0].expand(&[2, 3, 4]),
    );
    let p = [(1, 0), (0, 2), (2, 1)];
    check("pad", s, -2.0, 2.0, true, &|t| t[0].pad(&p), &|x| {
        x[0].pad(&p)
    });
    let r = [(1, 2), (0, 2), (1, 4)];
    check("shrink", s, -2.0, 2.0, true, &|t| t[0].shrink(&r), &|x| {
        x[0].shrink(&r)
    });
    check("flip", s, -2.0, 2.0, true, &|t| t[0].flip(&[0, 2]), &|x| {
        x[0].flip(&[0, 2])
    });
    check(
        "unsqueeze and squeeze",
        &[&[3, 4]],
        -2.0,
        2.0,
        true,
        &|t| {
            t[0].unsqueeze(1)?
                .expand(&[3, 2, 4])?
                .unsqueeze(0)?
                .squeeze(0)
        },
        &|x| x[0].reshape(&[3, 1, 4]).expand(&[3, 2, 4]),
    );
    check(
        "cat",
        &[&[2, 3], &[2, 1], &[2, 2]],
        -2.0,
        2.0,
        true,
        &|t| Tensor::cat(&[&t[0], &t[1], &t[2]], 1),
        &|x| {
            let (a, b, c) = (&x[0], &x[1], &x[2]);
            let mut d = vec![];
            for i in 0..2 {
                d.extend_from_slice(&a.data[i * 3..i * 3 + 3]);
                d.push(b.data[i]);
                d.extend_from_slice(&c.data[i * 2..i * 2 + 2]);
            }
            Nd::new(&[2, 6], d)
        },
    );
    // A chain of views over a pad inside a reduction.
    check(
        "views then sum",
        s,
        -2.0,
        2.0,
        true,
        &|t| {
            t[0].permute(&[1, 0, 2])?
                .pad(&[(1, 1), (0, 0), (0, 0)])?
                .flip(&[2])?
                .sum(&[0], false)
        },
        &|x| {
            x[0].permute(&[1, 0, 2])
                .pad(&[(1, 1), (0, 0), (0, 0)])
                .flip(&[2])
                .sum(&[0])
                .reshape(&[2, 4])
        },
    );
}

#[test]
fn matmul_of_matrices_batches_and_vectors() {
    check(
        "matmul",
        &[&[3, 5], &[5, 4]],
        -1.0,
        1.0,
        true,
        &|t| t[0].matmul(&t[1]),
        &|x| x[0].matmul(&x[1]),
    );
    check(
        "matmul by a transpose",
        &[&[3, 5], &[4, 5]],
        -1.0,
        1.0,
        true,
        &|t| t[0].matmul(&t[1].t()?),
        &|x| x[0].matmul(&x[1].permute(&[1, 0])),
    );
    check(
        "batched matmul",
        &[&[2, 3, 4], &[4, 2]],
        -1.0,
        1.0,
        true,
        &|t| t[0].matmul(&t[1]),
        &|x| {
            let a = &x[0];
            let mut d = vec![];
            for b in 0..2 {
                let m = Nd::new(&[3, 4], a.data[b * 12..(b + 1) * 12].to_vec());
                d.extend(m.matmul(&x[1]).data);
            }
            Nd::new(&[2, 3, 2], d)
        },
    );
    check(
        "matrix times vector",
        &[&[3, 4], &[4]],
        -1.0,
        1.0,
        true,
        &|t| t[0].matmul(&t[1]),
        &|x| x[0].matmul(&x[1].reshape(&[4, 1])).reshape(&[3]),
    );
}

fn log_softmax_ref(x: &Nd) -> Nd {
    let m = x.max(&[1]);
    let s = x.zip(&m, |a, b| (a - b).exp()).sum(&[1]);
    x.zip(&m, |a, b| a - b).zip(&s, |a, b| a - b.ln())
}

#[test]
fn softmax_log_softmax_and_cross_entropy() {
    let s: &[&[usize]] = &[&[4, 6]];
    check("softmax", s, -3.0, 3.0, true, &|t| t[0].softmax(-1), &|x| {
        log_softmax_ref(&x[0]).map(f64::exp)
    });
    check(
        "log_softmax",
        s,
        -3.0,
        3.0,
        true,
        &|t| t[0].log_softmax(1),
        &|x| log_softmax_ref(&x[0]),
    );
    let labels = [2i32, 0, 5, 3];
    for dev in devices() {
        let l = Tensor::from_slice(&labels, &[4], &dev).unwrap();
        let c = Check {
            name: "cross_entropy",
            inputs: vec![(vec![4, 6], Rng(11).values(24, -3.0, 3.0))],
            tol: 2e-5,
            grad: true,
        };
        c.run(&dev, &|t| t[0].cross_entropy(&l), &|x| {
            let lp = log_softmax_ref(&x[0]);
            let s: f64 = labels
                .iter()
                .enumerate()
                .map(|(i, &c)| lp.data[i * 6 + c as usize])
                .sum();
            Nd::new(&[], vec![-s / 4.0])
        });
    }
}

#[test]
fn gather_and_one_hot_pick_by_index() {
    let idx = [2i32, 0, 1, 1, 3, 0];
    for dev in devices() {
        let i = Tensor::from_slice(&idx, &[3, 2], &dev).unwrap();
        let c = Check {
            name: "gather",
            inputs: vec![(vec![3, 4], Rng(3).values(12, -2.0, 2.0))],
            tol: 1e-6,
            grad: true,
        };
        c.run(&dev, &|t| t[0].gather(1, &i), &|x| {
            let d = (0..6)
                .map(|k| x[0].data[(k / 2) * 4 + idx[k] as usize])
                .collect();
            Nd::new(&[3, 2], d)
        });
        let oh = Tensor::from_slice(&[1i32, 0, 3], &[3], &dev)
            .unwrap()
            .one_hot(4)
            .unwrap();
        assert_eq!(
            oh.to_vec::<i32>().unwrap(),
            [0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1],
            "one_hot on {}",
            dev.name()
        );
    }
}

#[test]
fn creation_on_the_device() {
    for dev in devices() {
        let d = dev.name().to_string();
        assert_eq!(
            Tensor::zeros(&[2, 2], DType::F32, &dev)
                .to_vec::<f32>()
                .unwrap(),
            [0.0; 4]
        );
        assert_eq!(
            Tensor::ones(&[3], DType::I32, &dev)
                .to_vec::<i32>()
                .unwrap(),
            [1; 3]
        );
        assert_eq!(
            Tensor::full(&[2], 2.5, DType::F32, &dev)
                .to_vec::<f32>()
                .unwrap(),
            [2.5; 2]
        );
        assert_eq!(
            Tensor::arange(0, 5, 1, &dev)
                .unwrap()
                .to_vec::<i32>()
                .unwrap(),
            [0, 1, 2, 3, 4]
        );
        assert_eq!(
            Tensor::arange(10, 1, -3, &dev)
                .unwrap()
                .to_vec::<i32>()
                .unwrap(),
            [10, 7, 4],
            "{d}"
        );
        let eye = Tensor::eye(3, DType::F32, &dev)
            .unwrap()
            .to_vec::<f32>()
            .unwrap();
        assert_eq!(eye, [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]);
        // Seeded random numbers: the documented mix of index and seed, on every device.
        let r = Tensor::rand(&[2, 50], 1234, &dev).to_vec::<f32>().unwrap();
        let want: Vec<f64> = (0..100)
            .map(|i| f64::from(am_tensor::rand_reference(i, 1234)))
            .collect();
        assert_close(&format!("rand on {d}"), &r, &want, 0.0);
        let other = Tensor::rand(&[100], 1235, &dev).to_vec::<f32>().unwrap();
        assert_ne!(r, other, "another seed gives other numbers");
        let u = Tensor::uniform(&[1000], -2.0, 3.0, 9, &dev)
            .unwrap()
            .to_vec::<f32>()
            .unwrap();
        assert!(
            u.iter().all(|&v| (-2.0..3.0).contains(&v)),
            "uniform in range on {d}"
        );
        let mean: f32 = u.iter().sum::<f32>() / 1000.0;
        assert!((mean - 0.5).abs() < 0.15, "uniform mean {mean} on {d}");
        let n = Tensor::randn(&[2000], 5, &dev)
            .unwrap()
            .to_vec::<f32>()
            .unwrap();
        let m: f32 = n.iter().sum::<f32>() / 2000.0;
        let v: f32 = n.iter().map(|x| (x - m) * (x - m)).sum::<f32>() / 2000.0;
        assert!(
            m.abs() < 0.1 && (v - 1.0).abs() < 0.15,
            "randn mean {m} variance {v} on {d}"
        );
    }
}

#[test]
fn to_moves_between_devices_and_gradients_follow() {
    let [cpu, gpu] = devices();
    let x = Tensor::from_slice(&[1.0f32, -2.0, 3.0], &[3], &cpu).unwrap();
    x.set_requires_grad(true);
    let y = x.to(&gpu).mul(2.0).unwrap().to(&cpu).square();
    assert_eq!(y.device(), cpu);
    assert_eq!(y.to_vec::<f32>().unwrap(), [4.0, 16.0, 36.0]);
    y.sum(&[], false).unwrap().backward().unwrap();
    assert_eq!(
        x.grad().unwrap().to_vec::<f32>().unwrap(),
        [8.0, -16.0, 24.0]
    );
}

#[test]
fn reductions_over_an_axis_of_size_0_sum_to_0_and_refuse_a_maximum() {
    for dev in devices() {
        let e = Tensor::from_slice(&[] as &[f32], &[0, 16], &dev).unwrap();
        // The full sum and the sum over the empty axis: zeros, whatever memory was reused.
        assert_eq!(
            e.sum(&[], false).unwrap().to_vec_f32().unwrap(),
            [0.0],
            "{dev}"
        );
        assert_eq!(
            e.sum(&[0], false).unwrap().to_vec_f32().unwrap(),
            vec![0.0; 16],
            "{dev}"
        );
        assert_eq!(e.sum(&[0], true).unwrap().shape(), [1, 16], "{dev}");
        let b = Tensor::from_slice(&[] as &[bool], &[3, 0], &dev).unwrap();
        assert_eq!(
            b.sum(&[1], false).unwrap().to_vec::<i32>().unwrap(),
            [0, 0, 0]
        );
        // Over no elements the mean is 0 / 0.
        let m = e.mean(&[0], false).unwrap().to_vec_f32().unwrap();
        assert!(
            m.len() == 16 && m.iter().all(|v| v.is_nan()),
            "{dev}: {m:?}"
        );
        // A maximum of nothing has no value: refused, naming the axis.
        for err in [
            e.max(&[0], false).unwrap_err().to_string(),
            e.min(&[], false).unwrap_err().to_string(),
            e.argmax(0, false).unwrap_err().to_string(),
        ] {
            assert!(err.contains("axis 0 has size 0"), "{dev}: {err}");
        }
        // Over the other axis nothing is reduced away: an empty result, as before.
        assert!(e.sum(&[1], false).unwrap().to_vec_f32().unwrap().is_empty());
    }
}
