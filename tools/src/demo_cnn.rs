//! `am demo cnn`: a small convolutional network on the 8×8 digits — two 3×3 convolutions,
//! each followed by batch normalisation, ReLU and 2×2 max pooling, then a linear layer —
//! trained with AdamW (decoupled weight decay, learning rate warmed up then decayed by a
//! cosine) and gradients clipped to a global norm. `demo.rs` trains and reports it.

use am_tensor::nn::{AdamW, BatchNorm, Conv2d, Linear, LrSchedule, Optimizer, clip_grad_norm};
use am_tensor::{ConvOptions, Device, Tensor, no_grad};
use serde_json::json;

use crate::demo::{Config, DigitsModel, hits};
use crate::digits::CLASSES;

/// Passes over the training images unless `--epochs` says otherwise.
pub const EPOCHS: usize = 10;
/// Channels of the first and second convolutions.
const C1: usize = 8;
const C2: usize = 16;
/// Side of the images.
const SIDE: usize = 8;
/// AdamW's weight decay.
const WEIGHT_DECAY: f64 = 1e-4;
/// The global norm gradients are clipped to.
const CLIP: f64 = 5.0;
/// Steps of the learning rate's linear warm-up.
const WARMUP: u64 = 20;

/// The network and its optimizer.
pub struct Cnn {
    conv1: Conv2d,
    bn1: BatchNorm,
    conv2: Conv2d,
    bn2: BatchNorm,
    fc: Linear,
    opt: AdamW,
}

impl Cnn {
    /// Logits of images `x` `[n, 1, 8, 8]`.
    pub fn forward(&self, x: &Tensor) -> am_tensor::Result<Tensor> {
        let n = x.shape()[0] as isize;
        let h = self
            .bn1
            .forward(&self.conv1.forward(x)?)?
            .relu()
            .max_pool2d([2, 2], [2, 2], [0, 0])?;
        let h = self
            .bn2
            .forward(&self.conv2.forward(&h)?)?
            .relu()
            .max_pool2d([2, 2], [2, 2], [0, 0])?;
        self.fc.forward(&h.reshape(&[n, -1])?)
    }

    fn set_training(&mut self, on: bool) {
        self.bn1.training = on;
        self.bn2.training = on;
    }

    fn parameters(&self) -> Vec<Tensor> {
        let mut p = self.conv1.parameters();
        p.extend(self.bn1.parameters());
        p.extend(self.conv2.parameters());
        p.extend(self.bn2.parameters());
        p.extend(self.fc.parameters());
        p
    }
}

impl DigitsModel for Cnn {
    fn describe(_cfg: &Config) -> String {
        format!(
            "CNN (conv 3×3 1→{C1}, batch norm, ReLU, max pool 2×2; conv 3×3 {C1}→{C2}, batch \
             norm, ReLU, max pool 2×2; linear {} → {CLASSES})",
            C2 * 4
        )
    }

    fn optimizer(cfg: &Config) -> String {
        format!(
            "AdamW lr {} (warm-up {WARMUP} steps, cosine decay), weight decay {WEIGHT_DECAY}, \
             gradients clipped to norm {CLIP}",
            cfg.lr
        )
    }

    fn layout(_cfg: &Config) -> serde_json::Value {
        json!([
            format!("conv3x3 1->{C1}"),
            "batchnorm",
            "relu",
            "maxpool2x2",
            format!("conv3x3 {C1}->{C2}"),
            "batchnorm",
            "relu",
            "maxpool2x2",
            format!("linear {}->{CLASSES}", C2 * 4),
        ])
    }

    fn new(cfg: &Config, steps: usize, dev: &Device) -> am_tensor::Result<Cnn> {
        let same = ConvOptions::default().padding(1);
        let seed = cfg.seed.wrapping_mul(8);
        let conv1 = Conv2d::new(1, C1, 3, same, seed, dev)?;
        let conv2 = Conv2d::new(C1, C2, 3, same, seed.wrapping_add(2), dev)?;
        let fc = Linear::new(C2 * 4, CLASSES, seed.wrapping_add(4), dev)?;
        let (bn1, bn2) = (BatchNorm::new(C1, dev)?, BatchNorm::new(C2, dev)?);
        let mut params = conv1.parameters();
        params.extend(bn1.parameters());
        params.extend(conv2.parameters());
        params.extend(bn2.parameters());
        params.extend(fc.parameters());
        let schedule = LrSchedule::WarmupCosine {
            warmup: WARMUP,
            total: steps as u64,
            min_ratio: 0.0,
        };
        let opt = AdamW::new(params, cfg.lr, WEIGHT_DECAY)?.with_schedule(schedule);
        Ok(Cnn {
            conv1,
            bn1,
            conv2,
            bn2,
            fc,
            opt,
        })
    }

    fn input_shape(n: usize) -> Vec<usize> {
        vec![n, 1, SIDE, SIDE]
    }

    fn step(&mut self, x: &Tensor, y: &Tensor) -> am_tensor::Result<Vec<Tensor>> {
        self.set_training(true);
        let logits = self.forward(x)?;
        let loss = logits.cross_entropy(y)?;
        let hit = hits(&logits, y)?;
        loss.backward()?;
        clip_grad_norm(&self.parameters(), CLIP)?;
        // The running averages are assignments of this step: realized with it.
        let mut also = vec![&loss, &hit];
        let bufs: Vec<Tensor> = self
            .bn1
            .buffers()
            .into_iter()
            .chain(self.bn2.buffers())
            .collect();
        also.extend(bufs.iter());
        self.opt.step(&also)?;
        Ok(vec![loss, hit])
    }

    fn logits(&mut self, x: &Tensor) -> am_tensor::Result<Tensor> {
        self.set_training(false);
        no_grad(|| self.forward(x))
    }

    fn named(&self) -> Vec<(String, Tensor)> {
        let mut v = Vec::new();
        let mut add = |prefix: &str, names: &[&str], ts: Vec<Tensor>| {
            for (n, t) in names.iter().zip(ts) {
                v.push((format!("{prefix}.{n}"), t));
            }
        };
        add("conv1", &["weight", "bias"], self.conv1.parameters());
        let bn = ["weight", "bias", "running_mean", "running_var"];
        let both = |b: &BatchNorm| [b.parameters(), b.buffers()].concat();
        add("bn1", &bn, both(&self.bn1));
        add("conv2", &["weight", "bias"], self.conv2.parameters());
        add("bn2", &bn, both(&self.bn2));
        add("fc", &["weight", "bias"], self.fc.parameters());
        v
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::demo::train;
    use crate::digits::{self, Set};

    fn first(set: &Set, n: usize) -> Set {
        set.select(&(0..n).collect::<Vec<_>>())
    }

    fn config(epochs: usize, seed: u32) -> Config {
        Config {
            epochs,
            batch: 32,
            hidden: 0,
            lr: 0.01,
            seed,
        }
    }

    /// Sixteen steps (two passes over 256 images) on the CPU and on the mock Navi31: the
    /// loss falls, and both devices compute the same losses to 1e-4 (the GPU's exp2, log2
    /// and reciprocal square root differ from the CPU's in the last bits, and its grouped
    /// reductions add in another order; a step's loss is about 1).
    #[test]
    fn a_few_steps_lower_the_loss_alike_on_the_cpu_and_navi31() {
        am_mock::register();
        let (train_set, test_set) = digits::split().unwrap();
        let (small, test) = (first(&train_set, 256), first(&test_set, 64));
        let cfg = config(2, 0);
        let cpu = train::<Cnn>(&Device::cpu(), &small, &test, &cfg, &mut |_| {}).unwrap();
        let navi31 = Device::open("mock:navi31").unwrap();
        let gpu = train::<Cnn>(&navi31, &small, &test, &cfg, &mut |_| {}).unwrap();
        assert_eq!(cpu.losses.len(), 16);
        assert_eq!(gpu.losses.len(), 16);
        let mean = |l: &[f32]| l.iter().sum::<f32>() / l.len() as f32;
        let (early, late) = (mean(&cpu.losses[..4]), mean(&cpu.losses[12..]));
        assert!(
            late < early * 0.75,
            "the loss fell from {early} to {late}: {:?}",
            cpu.losses
        );
        for (i, (c, g)) in cpu.losses.iter().zip(&gpu.losses).enumerate() {
            assert!(
                (c - g).abs() <= 1e-4,
                "step {i}: cpu {c}, navi31 {g}\ncpu {:?}\nnavi31 {:?}",
                cpu.losses,
                gpu.losses
            );
        }
        assert_eq!(cpu.test_correct, gpu.test_correct);
        assert!(gpu.kernels_per_step > 0);
    }

    /// The saved weights and running averages, loaded into a model of other initial weights,
    /// classify exactly as the trained model does.
    #[test]
    fn saved_weights_load_into_a_fresh_model() {
        let dev = Device::cpu();
        let (train_set, test_set) = digits::split().unwrap();
        let (small, test) = (first(&train_set, 128), first(&test_set, 64));
        let mut run = train::<Cnn>(&dev, &small, &test, &config(1, 3), &mut |_| {}).unwrap();
        let path =
            std::env::temp_dir().join(format!("am-demo-cnn-{}.safetensors", std::process::id()));
        let tensors = run.model.named();
        let named: Vec<(&str, &Tensor)> = tensors.iter().map(|(n, t)| (n.as_str(), t)).collect();
        am_tensor::nn::save(&path, &named).unwrap();

        let mut fresh = Cnn::new(&config(1, 9), 4, &dev).unwrap();
        let x = Tensor::from_slice(&test.pixels, &Cnn::input_shape(test.len()), &dev).unwrap();
        let before = fresh.logits(&x).unwrap().to_vec::<f32>().unwrap();
        let want = run.model.logits(&x).unwrap().to_vec::<f32>().unwrap();
        assert_ne!(before, want, "another seed, other weights");
        let fresh_tensors = fresh.named();
        let targets: Vec<(&str, &Tensor)> =
            fresh_tensors.iter().map(|(n, t)| (n.as_str(), t)).collect();
        am_tensor::nn::load_into(&path, &targets).unwrap();
        std::fs::remove_file(&path).ok();
        assert_eq!(fresh.logits(&x).unwrap().to_vec::<f32>().unwrap(), want);
    }
}
