//! Layers, optimizers and safetensors files.

use crate::common;

use am_tensor::nn::{self, Adam, Linear, Optimizer, Sgd};
use am_tensor::{DType, Tensor};
use common::{Nd, assert_close, cpu, devices};

#[test]
fn linear_computes_x_times_w_transposed_plus_b() {
    for dev in devices() {
        let l = Linear::new(3, 2, 5, &dev).unwrap();
        let w = l.weight.to_vec::<f32>().unwrap();
        let b = l.bias.to_vec::<f32>().unwrap();
        let bound = 1.0 / 3f32.sqrt();
        assert!(
            w.iter().chain(&b).all(|v| v.abs() <= bound),
            "init within ±1/√3"
        );
        let x = Tensor::from_slice(&[1.0f32, 2.0, 3.0, -1.0, 0.5, 2.0], &[2, 3], &dev).unwrap();
        let y = l.forward(&x).unwrap().to_vec::<f32>().unwrap();
        let xn = Nd::from_f32(&[2, 3], &x.to_vec::<f32>().unwrap());
        let want = xn
            .matmul(&Nd::from_f32(&[2, 3], &w).permute(&[1, 0]))
            .zip(&Nd::from_f32(&[2], &b), |a, c| a + c);
        assert_close(&format!("linear on {}", dev.name()), &y, &want.data, 1e-6);
    }
}

/// `p = [1, -2]`, loss `Σ p²`: gradient `2p`.
/// One step of Adam (β 0.9 and 0.999, ε 1e-8; with decoupled weight decay `wd`, AdamW) on
/// the host in f64, for the gradient of the sum of squares at `host`, step `t` from 1.
pub(crate) fn adam_on_host(
    host: &mut [f64; 2],
    (m, v): (&mut [f64; 2], &mut [f64; 2]),
    t: i32,
    lr: f64,
    wd: f64,
) {
    for k in 0..2 {
        let g = 2.0 * host[k];
        m[k] = 0.9 * m[k] + 0.1 * g;
        v[k] = 0.999 * v[k] + 0.001 * g * g;
        let mh = m[k] / (1.0 - 0.9f64.powi(t));
        let vh = v[k] / (1.0 - 0.999f64.powi(t));
        host[k] = host[k] * (1.0 - lr * wd) - lr * mh / (vh.sqrt() + 1e-8);
    }
}

fn quadratic(dev: &am_tensor::Device) -> Tensor {
    let p = Tensor::from_slice(&[1.0f32, -2.0], &[2], dev).unwrap();
    p.set_requires_grad(true);
    p
}

#[test]
fn sgd_and_adam_steps_follow_their_formulas() {
    for dev in devices() {
        let p = quadratic(&dev);
        let mut sgd = Sgd::with_momentum(vec![p.clone()], 0.1, 0.9);
        for _ in 0..2 {
            p.square().sum(&[], false).unwrap().backward().unwrap();
            sgd.step(&[]).unwrap();
        }
        // v1 = g0 = 2p0; p1 = p0 − 0.1·v1 = 0.8·p0; v2 = 0.9·v1 + 2p1; p2 = p1 − 0.1·v2.
        let want: Vec<f64> = [1.0f64, -2.0]
            .iter()
            .map(|&p0| {
                let p1 = 0.8 * p0;
                let v2 = 0.9 * 2.0 * p0 + 2.0 * p1;
                p1 - 0.1 * v2
            })
            .collect();
        assert_close(
            &format!("sgd on {}", dev.name()),
            &p.to_vec::<f32>().unwrap(),
            &want,
            1e-6,
        );
        assert!(p.grad().is_none(), "step forgets the gradients");

        let p = quadratic(&dev);
        let mut adam = Adam::new(vec![p.clone()], 0.1).unwrap();
        let mut host = [1.0f64, -2.0];
        let (mut m, mut v) = ([0.0f64; 2], [0.0f64; 2]);
        for t in 1..=3 {
            p.square().sum(&[], false).unwrap().backward().unwrap();
            adam.step(&[]).unwrap();
            adam_on_host(&mut host, (&mut m, &mut v), t, 0.1, 0.0);
        }
        assert_close(
            &format!("adam on {}", dev.name()),
            &p.to_vec::<f32>().unwrap(),
            &host,
            1e-5,
        );
    }
}

#[test]
fn safetensors_files_round_trip() {
    let dev = cpu();
    let dir = std::env::temp_dir().join(format!("am-tensor-nn-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("model.safetensors");
    let a = Tensor::from_slice(&[1.5f32, -2.0, 3.25, 4.0, 5.0, 6.0], &[2, 3], &dev).unwrap();
    let b = Tensor::from_slice(&[7i32, -8], &[2], &dev).unwrap();
    let h = a.cast(DType::BF16);
    nn::save(&path, &[("a", &a), ("b", &b), ("h", &h)]).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    assert_eq!((8 + n) % 8, 0, "data starts 8-byte aligned");
    let header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    assert_eq!(header["a"]["dtype"], "F32");
    assert_eq!(header["a"]["shape"], serde_json::json!([2, 3]));
    assert_eq!(header["b"]["data_offsets"], serde_json::json!([24, 32]));
    assert_eq!(header["h"]["dtype"], "BF16");
    let loaded = nn::load(&path, &dev).unwrap();
    let names: Vec<&str> = loaded.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["a", "b", "h"]);
    assert_eq!(
        loaded[0].1.to_vec::<f32>().unwrap(),
        a.to_vec::<f32>().unwrap()
    );
    assert_eq!(loaded[1].1.to_vec::<i32>().unwrap(), [7, -8]);
    assert_eq!(loaded[2].1.dtype(), DType::BF16);
    // Into existing tensors, by name.
    let target = Tensor::zeros(&[2, 3], DType::F32, &dev);
    target.realize().unwrap();
    nn::load_into(&path, &[("a", &target)]).unwrap();
    assert_eq!(target.to_vec::<f32>().unwrap(), a.to_vec::<f32>().unwrap());
    let wrong = Tensor::zeros(&[3, 2], DType::F32, &dev);
    let e = nn::load_into(&path, &[("a", &wrong)])
        .unwrap_err()
        .to_string();
    assert!(e.contains("tensor a") && e.contains("[2, 3]"), "{e}");
    // Damaged files are errors naming the file.
    std::fs::write(&path, &bytes[..bytes.len() - 3]).unwrap();
    let e = nn::load(&path, &dev).unwrap_err().to_string();
    assert!(
        e.contains("model.safetensors") && e.contains("tensor h"),
        "{e}"
    );
    std::fs::write(&path, [200u8, 0, 0, 0, 0, 0, 0, 0, b'{']).unwrap();
    let e = nn::load(&path, &dev).unwrap_err().to_string();
    assert!(e.contains("past the end"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}
