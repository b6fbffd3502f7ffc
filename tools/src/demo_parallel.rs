//! `am demo` on several devices (`--device LIST`): data-parallel training. Every device holds
//! a replica of the MLP (the first device's initial weights, copied); each step's batch is cut
//! into one piece per device, each device computes its share of the loss and its gradients,
//! the gradients are all-reduced (`am_tensor::shard::all_reduce_gradients`), and every
//! device's Adam makes the same update. The same run on the first device alone gives the
//! reference losses, which the parallel ones must match within 1e-5 relative.

use std::time::Instant;

use am_tensor::nn::{Adam, Optimizer};
use am_tensor::shard::all_reduce_gradients;
use am_tensor::{Device, Tensor};
use anyhow::Context;
use serde_json::json;

use crate::demo::{self, Config, Mlp, MlpDemo};
use crate::digits::{CLASSES, PIXELS, Set, SplitMix};

/// Relative difference of a step's loss the parallel run may have from the one-device run.
pub const LOSS_TOLERANCE: f32 = 1e-5;

/// The data-parallel run's figures.
pub struct ParallelRun {
    /// Every step's loss (sum of the devices' shares).
    pub losses: Vec<f32>,
    /// Test images the first replica classifies right at the end.
    pub test_correct: usize,
    /// Wall time.
    pub seconds: f64,
}

struct Replica {
    demo: MlpDemo,
    dev: Device,
}

/// Trains on `devs` with each batch split across them.
pub fn train(
    devs: &[Device],
    train_set: &Set,
    test_set: &Set,
    cfg: &Config,
    mut progress: impl FnMut(usize, f32),
) -> anyhow::Result<ParallelRun> {
    let start = Instant::now();
    let first = Mlp::new(cfg.hidden, cfg.seed, &devs[0])?;
    let mut reps = Vec::new();
    for d in devs {
        let model = Mlp::new(cfg.hidden, cfg.seed, d)?;
        for (p, q) in model.parameters().iter().zip(first.parameters()) {
            p.assign(&q.detach().to(d))?;
            p.realize()?;
        }
        let opt = Adam::new(model.parameters(), cfg.lr)?;
        reps.push(Replica {
            demo: MlpDemo { model, opt },
            dev: d.clone(),
        });
    }
    let n = devs.len();
    let mut rng = SplitMix(u64::from(cfg.seed) ^ 0x00de_4d05);
    let steps = train_set.len() / cfg.batch.max(1);
    let mut losses = Vec::new();
    for e in 0..cfg.epochs {
        let order = rng.permutation(train_set.len());
        for s in 0..steps {
            let idx = &order[s * cfg.batch..(s + 1) * cfg.batch];
            let mut at = 0;
            let mut shares = Vec::new();
            for (i, r) in reps.iter().enumerate() {
                let len = cfg.batch / n + usize::from(i < cfg.batch % n);
                let piece = train_set.select(&idx[at..at + len]);
                at += len;
                if len == 0 {
                    anyhow::bail!(
                        "a batch of {} images leaves {} without any: use a batch of at least {n}",
                        cfg.batch,
                        r.dev
                    );
                }
                let x = Tensor::from_slice(&piece.pixels, &[len, PIXELS], &r.dev)?;
                let y = Tensor::from_slice(&piece.labels, &[len], &r.dev)?;
                let loss = r
                    .demo
                    .model
                    .forward(&x)?
                    .cross_entropy(&y)?
                    .mul(len as f64 / cfg.batch as f64)?;
                loss.backward()?;
                shares.push(loss);
            }
            let replicas: Vec<Vec<Tensor>> =
                reps.iter().map(|r| r.demo.model.parameters()).collect();
            all_reduce_gradients(&replicas)?;
            let mut total = 0.0f64;
            for (r, loss) in reps.iter_mut().zip(&shares) {
                r.demo.opt.step(&[loss])?;
                total += f64::from(loss.item()?);
            }
            losses.push(total as f32);
            progress(e, total as f32);
        }
    }
    let test_correct = demo::correct(&mut reps[0].demo, test_set, &devs[0])?;
    Ok(ParallelRun {
        losses,
        test_correct,
        seconds: start.elapsed().as_secs_f64(),
    })
}

/// The largest relative difference between two runs' losses.
pub fn max_relative_diff(a: &[f32], b: &[f32]) -> f32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| ((x - y) / x.abs().max(f32::MIN_POSITIVE)).abs())
        .fold(0.0, f32::max)
}

/// `am demo --device A,B,…`: the data-parallel run, then the first device alone.
pub fn run(
    names: &[String],
    cfg: &Config,
    train_set: &Set,
    test_set: &Set,
    json: bool,
) -> anyhow::Result<()> {
    let devs = names
        .iter()
        .map(|n| Device::open(n).with_context(|| format!("opening {n}")))
        .collect::<anyhow::Result<Vec<_>>>()?;
    if !json {
        println!(
            "am demo: MLP {PIXELS} → {} → {CLASSES}, Adam lr {}, batch {} split over {} \
             devices ({}), seed {}, gradients all-reduced every step",
            cfg.hidden,
            cfg.lr,
            cfg.batch,
            devs.len(),
            names.join(", "),
            cfg.seed
        );
    }
    let steps = train_set.len() / cfg.batch.max(1);
    let mut sums = vec![0.0f64; cfg.epochs];
    let par = train(&devs, train_set, test_set, cfg, |e, l| {
        sums[e] += f64::from(l);
    })?;
    if !json {
        for (e, s) in sums.iter().enumerate() {
            println!(
                "epoch {:>5}  loss {:.4}",
                format!("{}/{}", e + 1, cfg.epochs),
                s / steps.max(1) as f64
            );
        }
    }
    let one = demo::train::<MlpDemo>(&devs[0], train_set, test_set, cfg, &mut |_| {})?;
    let diff = max_relative_diff(&one.losses, &par.losses);
    let agree = diff <= LOSS_TOLERANCE && one.losses.len() == par.losses.len();
    let acc = par.test_correct as f64 / test_set.len().max(1) as f64;
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "devices": names,
                "batch": cfg.batch,
                "epochs": cfg.epochs,
                "steps": par.losses.len(),
                "test_accuracy": acc,
                "seconds": par.seconds,
                "single_device": devs[0].name(),
                "single_seconds": one.seconds,
                "loss_max_rel_diff": diff,
                "losses_agree": agree,
            }))?
        );
    } else {
        println!(
            "test accuracy: {:.1} % ({}/{}); {:.2} s on {} devices",
            acc * 100.0,
            par.test_correct,
            test_set.len(),
            par.seconds,
            devs.len()
        );
        println!(
            "{} alone: {:.2} s; losses {} (max relative |Δ| {diff:.1e} over {} steps)",
            devs[0].name(),
            one.seconds,
            if agree {
                "agree to 1e-5"
            } else {
                "DIFFER by more than 1e-5"
            },
            par.losses.len()
        );
    }
    anyhow::ensure!(
        agree,
        "the data-parallel losses differ from one device's by {diff:.1e} (relative)"
    );
    Ok(())
}
