//! The convolutional layers (`Conv2d`, `BatchNorm`), AdamW, gradient clipping and
//! learning-rate schedules, each against its defining formula, on the CPU and the mock
//! Navi31.

use crate::common;

use am_tensor::nn::{AdamW, BatchNorm, Conv2d, LrSchedule, Optimizer, clip_grad_norm};
use am_tensor::{ConvOptions, Jit, Tensor};
use common::{Rng, assert_close, devices};

#[test]
fn conv2d_layer_convolves_with_its_own_weight_and_bias() {
    for dev in devices() {
        let o = ConvOptions::default().padding(1).groups(2);
        let l = Conv2d::new(4, 6, 3, o, 9, &dev).unwrap();
        assert_eq!(l.weight.shape(), [6, 2, 3, 3]);
        assert_eq!(l.bias.shape(), [6]);
        // fan_in = 4 / 2 · 3 · 3 = 18.
        let bound = 1.0 / 18f32.sqrt();
        let w = l.weight.to_vec::<f32>().unwrap();
        let b = l.bias.to_vec::<f32>().unwrap();
        assert!(
            w.iter().chain(&b).all(|v| v.abs() <= bound),
            "init within ±1/√18"
        );
        assert!(l.weight.requires_grad() && l.bias.requires_grad());
        let mut rng = Rng(4);
        let x =
            Tensor::from_slice(&rng.values(2 * 4 * 5 * 5, -1.0, 1.0), &[2, 4, 5, 5], &dev).unwrap();
        let y = l.forward(&x).unwrap();
        let want = x.conv2d(&l.weight, Some(&l.bias), o).unwrap();
        assert_eq!(y.shape(), [2, 6, 5, 5]);
        assert_eq!(y.to_vec::<f32>().unwrap(), want.to_vec::<f32>().unwrap());
        y.sum(&[], false).unwrap().backward().unwrap();
        for p in l.parameters() {
            assert!(p.grad().is_some(), "{:?} gets a gradient", p.shape());
        }
    }
}

#[test]
fn batch_norm_layer_normalises_by_the_batch_in_training_and_by_running_averages_after() {
    for dev in devices() {
        let bn = BatchNorm::new(2, &dev).unwrap();
        let mut rng = Rng(11);
        let data: Vec<f32> = rng.values(4 * 2 * 3 * 3, -2.0, 5.0);
        let x = Tensor::from_slice(&data, &[4, 2, 3, 3], &dev).unwrap();
        let y = bn.forward(&x).unwrap();
        let mut all = vec![&y];
        let bufs = bn.buffers();
        all.extend(bufs.iter());
        Tensor::realize_all(&all).unwrap();
        let yv = y.to_vec::<f32>().unwrap();
        // Host statistics per channel.
        let per = |c: usize| -> Vec<f64> {
            (0..data.len())
                .filter(|i| (i / 9) % 2 == c)
                .map(|i| f64::from(data[i]))
                .collect()
        };
        let (mut mean, mut var) = ([0.0; 2], [0.0; 2]);
        for c in 0..2 {
            let v = per(c);
            let n = v.len() as f64;
            mean[c] = v.iter().sum::<f64>() / n;
            var[c] = v.iter().map(|a| (a - mean[c]).powi(2)).sum::<f64>() / (n - 1.0);
            // The output of the channel: mean 0, (biased) variance 1 up to ε.
            let out: Vec<f64> = (0..yv.len())
                .filter(|i| (i / 9) % 2 == c)
                .map(|i| f64::from(yv[i]))
                .collect();
            let om = out.iter().sum::<f64>() / n;
            let ov = out.iter().map(|a| (a - om).powi(2)).sum::<f64>() / n;
            assert!(om.abs() < 1e-5, "channel {c} mean {om} on {}", dev.name());
            assert!(
                (ov - 1.0).abs() < 1e-4,
                "channel {c} variance {ov} on {}",
                dev.name()
            );
        }
        let rm: Vec<f64> = mean.iter().map(|m| 0.1 * m).collect();
        let rv: Vec<f64> = var.iter().map(|v| 0.9 + 0.1 * v).collect();
        let what = format!("running averages on {}", dev.name());
        assert_close(&what, &bn.running_mean.to_vec::<f32>().unwrap(), &rm, 1e-5);
        assert_close(&what, &bn.running_var.to_vec::<f32>().unwrap(), &rv, 1e-5);

        let eval = BatchNorm {
            training: false,
            ..bn
        };
        let z = eval.forward(&x).unwrap().to_vec::<f32>().unwrap();
        let want: Vec<f64> = data
            .iter()
            .enumerate()
            .map(|(i, &v)| {
                let c = (i / 9) % 2;
                (f64::from(v) - rm[c]) / (rv[c] + 1e-5).sqrt()
            })
            .collect();
        assert_close(&format!("inference on {}", dev.name()), &z, &want, 1e-5);
    }
}

#[test]
fn adamw_decays_a_weight_without_gradient_by_one_minus_lr_times_decay() {
    for dev in devices() {
        let init = [1.5f32, -0.75, 3.0];
        let p = Tensor::from_slice(&init, &[3], &dev).unwrap();
        p.set_requires_grad(true);
        let (lr, wd) = (0.05, 0.1);
        let mut opt = AdamW::new(vec![p.clone()], lr, wd).unwrap();
        let factor = (1.0 - lr * wd) as f32;
        let mut want = init.to_vec();
        for step in 0..3 {
            // The gradient is exactly 0: only the decoupled decay moves the weight.
            p.mul(0.0)
                .unwrap()
                .sum(&[], false)
                .unwrap()
                .backward()
                .unwrap();
            opt.step(&[]).unwrap();
            for w in &mut want {
                *w *= factor;
            }
            assert_eq!(
                p.to_vec::<f32>().unwrap(),
                want,
                "step {step} on {}",
                dev.name()
            );
        }
    }
}

#[test]
fn adamw_follows_adam_with_decoupled_decay() {
    for dev in devices() {
        let p = Tensor::from_slice(&[1.0f32, -2.0], &[2], &dev).unwrap();
        p.set_requires_grad(true);
        let (lr, wd) = (0.1, 0.01);
        let mut opt = AdamW::new(vec![p.clone()], lr, wd).unwrap();
        let mut host = [1.0f64, -2.0];
        let (mut m, mut v) = ([0.0f64; 2], [0.0f64; 2]);
        for t in 1..=3 {
            p.square().sum(&[], false).unwrap().backward().unwrap();
            opt.step(&[]).unwrap();
            crate::nn::adam_on_host(&mut host, (&mut m, &mut v), t, lr, wd);
        }
        let what = format!("adamw on {}", dev.name());
        assert_close(&what, &p.to_vec::<f32>().unwrap(), &host, 1e-5);
    }
}

#[test]
fn warmup_cosine_schedule_rises_linearly_then_falls_by_half_a_cosine() {
    let s = LrSchedule::WarmupCosine {
        warmup: 4,
        total: 12,
        min_ratio: 0.1,
    };
    assert_eq!(s.factor(1), 0.25);
    assert_eq!(s.factor(2), 0.5);
    assert_eq!(s.factor(4), 1.0);
    // Halfway through the cosine: halfway between 1 and the minimum.
    assert!((s.factor(8) - 0.55).abs() < 1e-12, "{}", s.factor(8));
    assert!((s.factor(12) - 0.1).abs() < 1e-12);
    assert!((s.factor(30) - 0.1).abs() < 1e-12, "constant after the end");
    for t in 4..12 {
        assert!(
            s.factor(t + 1) < s.factor(t),
            "falls after the warm-up at {t}"
        );
    }
    assert_eq!(LrSchedule::Constant.factor(7), 1.0);
    // The device computes the same factors.
    for dev in devices() {
        let steps: Vec<f32> = (0..16).map(|t| t as f32).collect();
        let t = Tensor::from_slice(&steps, &[16], &dev).unwrap();
        let got = s.factor_on(&t).unwrap().to_vec::<f32>().unwrap();
        let want: Vec<f64> = (0..16).map(|t| s.factor(t)).collect();
        assert_close(&format!("factors on {}", dev.name()), &got, &want, 1e-6);
    }
}

/// The schedule follows the optimizer's step count on the device: a captured step's
/// replays decay a weight without gradient by each step's own `1 − lr·factor(t)·wd`.
#[test]
fn a_captured_adamw_step_follows_its_schedule_on_every_replay() {
    let s = LrSchedule::WarmupCosine {
        warmup: 2,
        total: 6,
        min_ratio: 0.0,
    };
    for dev in devices() {
        let p = Tensor::from_slice(&[2.0f32], &[1], &dev).unwrap();
        p.set_requires_grad(true);
        let (lr, wd) = (0.5, 0.2);
        let mut opt = AdamW::new(vec![p.clone()], lr, wd)
            .unwrap()
            .with_schedule(s);
        let mut jit = Jit::new(&dev);
        let x = Tensor::from_slice(&[0.0f32], &[1], &dev).unwrap();
        let mut want = 2.0f64;
        for t in 1..=8 {
            jit.run(&[&x], |i| {
                p.mul(&i[0])?.sum(&[], false)?.backward()?;
                opt.step(&[])?;
                Ok(vec![])
            })
            .unwrap();
            want *= 1.0 - lr * s.factor(t) * wd;
            let got = p.to_vec::<f32>().unwrap();
            assert_close(&format!("step {t} on {}", dev.name()), &got, &[want], 1e-6);
        }
        assert!(jit.is_captured());
    }
}

#[test]
fn clipping_scales_gradients_to_the_global_norm() {
    for dev in devices() {
        let a = Tensor::from_slice(&[1.0f32, 1.0], &[2], &dev).unwrap();
        let b = Tensor::from_slice(&[1.0f32], &[1], &dev).unwrap();
        a.set_requires_grad(true);
        b.set_requires_grad(true);
        let ca = Tensor::from_slice(&[3.0f32, 4.0], &[2], &dev).unwrap();
        let cb = Tensor::from_slice(&[12.0f32], &[1], &dev).unwrap();
        let grads = |max: f64| {
            a.zero_grad();
            b.zero_grad();
            let loss = a.mul(&ca).unwrap().sum(&[], false).unwrap();
            let loss = loss
                .add(&b.mul(&cb).unwrap().sum(&[], false).unwrap())
                .unwrap();
            loss.backward().unwrap();
            let norm = clip_grad_norm(&[a.clone(), b.clone()], max).unwrap();
            (
                norm.item().unwrap(),
                a.grad().unwrap().to_vec::<f32>().unwrap(),
                b.grad().unwrap().to_vec::<f32>().unwrap(),
            )
        };
        // ‖(3, 4, 12)‖ = 13: clipped to 6.5, every gradient halves (up to the 1e-6 PyTorch
        // adds to the norm).
        let (norm, ga, gb) = grads(6.5);
        assert_eq!(norm, 13.0, "on {}", dev.name());
        assert_close(
            &format!("clipped on {}", dev.name()),
            &ga,
            &[1.5, 2.0],
            1e-6,
        );
        assert_close(&format!("clipped on {}", dev.name()), &gb, &[6.0], 1e-6);
        // Below the limit nothing changes.
        let (_, ga, gb) = grads(100.0);
        assert_eq!((ga, gb), (vec![3.0, 4.0], vec![12.0]), "on {}", dev.name());
    }
}
