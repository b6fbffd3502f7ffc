//! `am demo` on several devices (`--device LIST`): data-parallel training. Every device holds
//! a replica of the MLP (the first device's initial weights, copied); each step's batch is cut
//! into one piece per device, each device computes its share of the loss and its gradients,
//! the gradients are all-reduced (`am_tensor::shard::all_reduce_gradients`), and every
//! device's Adam makes the same update. The same run on the first device alone gives the
//! reference losses, which the parallel ones must match within 1e-5 relative.

use std::time::Instant;

use am_tensor::nn::{Adam, AdamW, Optimizer};
use am_tensor::shard::{all_reduce_gradients, one_hive};
use am_tensor::{Device, Jit, Tensor, no_grad};
use anyhow::Context;
use serde_json::json;

use crate::demo::{self, Config, Mlp, MlpDemo};
use crate::demo_gpt::{self, ACCURACY_TOLERANCE, COMPARED_STEPS, Gpt, GptConfig};
use crate::digits::{CLASSES, PIXELS, Set, SplitMix};

/// Relative difference of a step's loss the parallel run may have from the one-device run.
pub const LOSS_TOLERANCE: f32 = 1e-5;

// The steps whose losses are held to `LOSS_TOLERANCE` and the accuracy tolerance are the
// `cpu` comparison's (`demo_gpt::COMPARED_STEPS`, `ACCURACY_TOLERANCE`), for the same
// reason: the parallel run sums each gradient in another order (each device over its piece,
// then the all-reduce) and so rounds differently in the last bit; training amplifies that
// step by step, as it does any change in the last bits: the default mlp on four hive members
// reaches 1e-5 after about 200 steps, the gpt parts from one device after about 100. The
// losses are compared while that growth is far below the tolerance, the end by the held-out
// accuracy.

/// How a data-parallel run compares with the same run on its first device alone.
struct Agreement {
    /// The largest relative difference of a step's loss over the first [`COMPARED_STEPS`].
    first: f32,
    /// The same over every step.
    all: f32,
    /// Steps compared (fewer when the run is shorter).
    compared: usize,
    /// The difference of held-out accuracy.
    accuracy: f64,
    /// Both runs made the same number of steps.
    same_steps: bool,
}

impl Agreement {
    fn of(par: &[f32], one: &[f32], par_accuracy: f64, one_accuracy: f64) -> Agreement {
        let compared = par.len().min(one.len()).min(COMPARED_STEPS);
        Agreement {
            first: max_relative_diff(&par[..compared], &one[..compared]),
            all: max_relative_diff(par, one),
            compared,
            accuracy: (par_accuracy - one_accuracy).abs(),
            same_steps: par.len() == one.len(),
        }
    }

    fn losses_agree(&self) -> bool {
        self.same_steps && self.first <= LOSS_TOLERANCE
    }

    fn agree(&self) -> bool {
        self.losses_agree() && self.accuracy <= ACCURACY_TOLERANCE
    }

    fn json(&self) -> serde_json::Value {
        json!({
            "compared_steps": self.compared,
            "loss_max_rel_diff": self.first,
            "loss_max_rel_diff_all_steps": self.all,
            "losses_agree": self.losses_agree(),
            "test_accuracy_diff": self.accuracy,
            "agree": self.agree(),
        })
    }

    /// One line for people, after "… alone: … s; ".
    fn text(&self, steps: usize) -> String {
        format!(
            "{} (the first {} steps' losses within 1e-5 relative: max |Δ| {:.1e}; held-out \
             accuracy within 1 point: Δ {:.1}; over all {steps} steps max relative |Δ| {:.1e}, \
             rounding that training amplifies)",
            if self.agree() { "agree" } else { "DIFFER" },
            self.compared,
            self.first,
            self.accuracy * 100.0,
            self.all
        )
    }

    fn check(&self, steps: usize) -> anyhow::Result<()> {
        anyhow::ensure!(
            self.agree(),
            "the data-parallel run differs from one device's: {}",
            self.text(steps)
        );
        Ok(())
    }
}

/// The data-parallel run's figures.
pub struct ParallelRun {
    /// Every step's loss (sum of the devices' shares).
    pub losses: Vec<f32>,
    /// Test images the first replica classifies right at the end.
    pub test_correct: usize,
    /// Wall time.
    pub seconds: f64,
    /// The whole step was captured across the devices (one hive), not per device.
    pub across: bool,
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
    let mut halves: Vec<Halves> = devs.iter().map(Halves::new).collect();
    // On one hive the whole step — every device's share and backward, the all-reduce, every
    // device's update — is captured as one graph over all the devices' queues.
    let mut whole = if one_hive(devs)? {
        Some(Jit::spanning(devs)?)
    } else {
        None
    };
    let mut rng = SplitMix(u64::from(cfg.seed) ^ 0x00de_4d05);
    let steps = train_set.len() / cfg.batch.max(1);
    let mut losses = Vec::new();
    for e in 0..cfg.epochs {
        let order = rng.permutation(train_set.len());
        for s in 0..steps {
            let idx = &order[s * cfg.batch..(s + 1) * cfg.batch];
            let mut at = 0;
            if let Some(jit) = whole.as_mut() {
                let mut inputs = Vec::with_capacity(2 * n);
                for (i, r) in reps.iter().enumerate() {
                    let len = cfg.batch / n + usize::from(i < cfg.batch % n);
                    if len == 0 {
                        anyhow::bail!(
                            "a batch of {} images leaves {} without any: use a batch of at least {n}",
                            cfg.batch,
                            r.dev
                        );
                    }
                    let piece = train_set.select(&idx[at..at + len]);
                    at += len;
                    inputs.push(Tensor::from_slice(&piece.pixels, &[len, PIXELS], &r.dev)?);
                    inputs.push(Tensor::from_slice(&piece.labels, &[len], &r.dev)?);
                }
                let batch = cfg.batch;
                let shares = jit.run(&inputs.iter().collect::<Vec<_>>(), |i| {
                    whole_step(&mut reps, i, batch)
                })?;
                let mut total = 0.0f64;
                for share in &shares {
                    total += f64::from(share.item()?);
                }
                losses.push(total as f32);
                progress(e, total as f32);
                continue;
            }
            let mut shares = Vec::new();
            for (i, (r, h)) in reps.iter().zip(&mut halves).enumerate() {
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
                let scale = len as f64 / cfg.batch as f64;
                let model = &r.demo.model;
                shares.push(h.backward(&model.parameters(), &[&x, &y], |i| {
                    Ok(vec![
                        model.forward(&i[0])?.cross_entropy(&i[1])?.mul(scale)?,
                    ])
                })?);
            }
            let replicas: Vec<Vec<Tensor>> =
                reps.iter().map(|r| r.demo.model.parameters()).collect();
            all_reduce_gradients(&replicas)?;
            let mut total = 0.0f64;
            for ((r, h), share) in reps.iter_mut().zip(&mut halves).zip(&shares) {
                h.update(&mut r.demo.opt)?;
                total += f64::from(share[0].item()?);
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
        across: whole.is_some(),
    })
}

/// The data-parallel step on `reps` from each device's piece of the batch (`inputs`: the
/// pixels then the labels of every device), captured across the devices of one hive: each
/// device's share of the loss (its piece's mean scaled by its share of `batch`) and its
/// backward pass, the gradients' all-reduce, every device's Adam update. Returns each
/// device's share of the loss.
fn whole_step(
    reps: &mut [Replica],
    inputs: &[Tensor],
    batch: usize,
) -> am_tensor::Result<Vec<Tensor>> {
    let mut shares = Vec::with_capacity(reps.len());
    for (d, r) in reps.iter().enumerate() {
        let (x, y) = (&inputs[2 * d], &inputs[2 * d + 1]);
        let scale = x.shape()[0] as f64 / batch as f64;
        let loss = r.demo.model.forward(x)?.cross_entropy(y)?.mul(scale)?;
        loss.backward()?;
        shares.push(loss);
    }
    let replicas: Vec<Vec<Tensor>> = reps.iter().map(|r| r.demo.model.parameters()).collect();
    realize_with_gradients(&shares, &replicas)?;
    all_reduce_gradients(&replicas)?;
    for (r, loss) in reps.iter_mut().zip(&shares) {
        r.demo.opt.step(&[loss])?;
    }
    Ok(shares)
}

/// The data-parallel gpt step captured across the devices of one hive (`inputs`: the
/// tokens then the targets of every device's problems): each device's share of the loss
/// and its exactly answered problems, its backward pass, the gradients' all-reduce, every
/// device's AdamW update. Returns each device's loss share and answers, in device order.
fn whole_gpt_step(
    reps: &mut [(Gpt, AdamW, Device)],
    cfg: &GptConfig,
    inputs: &[Tensor],
) -> am_tensor::Result<Vec<Tensor>> {
    let mut out = Vec::with_capacity(2 * reps.len());
    for (d, (model, _, _)) in reps.iter().enumerate() {
        let (toks, tgts) = (&inputs[2 * d], &inputs[2 * d + 1]);
        let scale = toks.shape()[0] as f64 / cfg.batch as f64;
        let logits = model.answer_logits(toks)?;
        let loss = logits.cross_entropy(tgts)?.mul(scale)?;
        let right = no_grad(|| demo_gpt::exact_answers(cfg, &logits, tgts))?;
        loss.backward()?;
        out.push(loss);
        out.push(right);
    }
    let replicas: Vec<Vec<Tensor>> = reps.iter().map(|r| r.0.parameters()).collect();
    realize_with_gradients(&out, &replicas)?;
    all_reduce_gradients(&replicas)?;
    for (r, share) in reps.iter_mut().zip(out.chunks(2)) {
        r.1.step(&[&share[0]])?;
    }
    Ok(out)
}

/// Computes `outs` and every replica's gradients in one realize, so the forward and
/// backward work they share is done once: the all-reduce realizes only the gradients, and
/// what `outs` needs of the forward pass would otherwise be computed again after it.
fn realize_with_gradients(outs: &[Tensor], replicas: &[Vec<Tensor>]) -> am_tensor::Result<()> {
    let grads: Vec<Tensor> = replicas.iter().flatten().filter_map(Tensor::grad).collect();
    let all: Vec<&Tensor> = outs.iter().chain(&grads).collect();
    Tensor::realize_all(&all)
}

/// One device's training step as two captured steps ([`Jit`]) around the all-reduce of the
/// gradients, which crosses devices and is not captured: its share of the loss with its
/// gradients, then its optimizer's update from the summed gradients. Uncaptured, every step
/// would schedule and compile its kernels again (seconds a step for the gpt).
struct Halves {
    grads: Jit,
    step: Jit,
}

impl Halves {
    fn new(dev: &Device) -> Halves {
        Halves {
            grads: Jit::new(dev),
            step: Jit::new(dev),
        }
    }

    /// Runs `loss` (its first tensor the loss, the others anything else wanted) and the
    /// backward pass; returns what `loss` returned and leaves each parameter's gradient set.
    fn backward(
        &mut self,
        params: &[Tensor],
        inputs: &[&Tensor],
        loss: impl FnOnce(&[Tensor]) -> am_tensor::Result<Vec<Tensor>>,
    ) -> am_tensor::Result<Vec<Tensor>> {
        let mut out = self.grads.run(inputs, |i| {
            let mut out = loss(i)?;
            out.first()
                .ok_or_else(|| am_tensor::Error::Autograd("the step returned no loss".into()))?
                .backward()?;
            for p in params {
                out.push(p.grad().ok_or_else(|| {
                    am_tensor::Error::Autograd("a parameter got no gradient".into())
                })?);
            }
            Ok(out)
        })?;
        // A replay does not run the closure: the head is what precedes the gradients.
        let head = out.len() - params.len();
        for (p, g) in params.iter().zip(&out[head..]) {
            p.set_grad(g)?;
        }
        out.truncate(head);
        Ok(out)
    }

    /// The optimizer's update from the parameters' gradients as they are now (summed).
    fn update(&mut self, opt: &mut impl Optimizer) -> am_tensor::Result<()> {
        let params = opt.parameters().to_vec();
        let grads = params
            .iter()
            .map(|p| {
                p.grad().ok_or_else(|| {
                    am_tensor::Error::Autograd("the all-reduce left no gradient".into())
                })
            })
            .collect::<am_tensor::Result<Vec<_>>>()?;
        self.step.run(&grads.iter().collect::<Vec<_>>(), |g| {
            for (p, g) in params.iter().zip(g) {
                p.set_grad(g)?;
            }
            opt.step(&[])?;
            Ok(vec![])
        })?;
        Ok(())
    }
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
    let devs = open_all(names)?;
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
    let share = |right: usize| right as f64 / test_set.len().max(1) as f64;
    let acc = share(par.test_correct);
    let cmp = Agreement::of(&par.losses, &one.losses, acc, share(one.test_correct));
    if json {
        let mut report = json!({
            "devices": names,
            "batch": cfg.batch,
            "epochs": cfg.epochs,
            "steps": par.losses.len(),
            "losses": par.losses,
            "test_accuracy": acc,
            "seconds": par.seconds,
            "single_device": devs[0].name(),
            "single_seconds": one.seconds,
            "single_losses": one.losses,
            "single_test_accuracy": share(one.test_correct),
            "step_captured_across_devices": par.across,
        });
        merge(&mut report, cmp.json());
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "test accuracy: {:.1} % ({}/{}); {:.2} s on {} devices ({})",
            acc * 100.0,
            par.test_correct,
            test_set.len(),
            par.seconds,
            devs.len(),
            captured_how(par.across)
        );
        println!(
            "{} alone: {:.2} s, test accuracy {:.1} %; {}",
            devs[0].name(),
            one.seconds,
            share(one.test_correct) * 100.0,
            cmp.text(par.losses.len())
        );
    }
    cmp.check(par.losses.len())
}

/// The devices of a data-parallel run.
fn open_all(names: &[String]) -> anyhow::Result<Vec<Device>> {
    names
        .iter()
        .map(|n| Device::open(n).with_context(|| format!("opening {n}")))
        .collect()
}

/// Adds `extra`'s fields to the object `report`.
fn merge(report: &mut serde_json::Value, extra: serde_json::Value) {
    if let (Some(r), serde_json::Value::Object(e)) = (report.as_object_mut(), extra) {
        r.extend(e);
    }
}

/// How a data-parallel run captured its steps, for the text report.
fn captured_how(across: bool) -> &'static str {
    if across {
        "the step captured across them: one graph over every device's queues"
    } else {
        "each device's step captured in two halves around the all-reduce"
    }
}

/// The data-parallel gpt run's figures.
pub struct GptParallelRun {
    /// Every step's loss (sum of the devices' shares).
    pub losses: Vec<f32>,
    /// Every step's exactly answered problems of the batch, over all devices.
    pub exact: Vec<usize>,
    /// Held-out problems the first replica answers exactly at the end.
    pub test_correct: usize,
    /// Held-out problems scored.
    pub test_total: usize,
    /// Wall time of training and scoring.
    pub seconds: f64,
    /// The whole step was captured across the devices (one hive), not per device.
    pub across: bool,
}

/// Trains the gpt on `devs` with each step's problems split across them: every device holds
/// a replica (the first device's initial weights, copied), computes its share of the loss
/// (its mean scaled by its share of the batch) and its gradients; the gradients are
/// all-reduced and every device's AdamW makes the same update.
pub fn train_gpt(
    devs: &[Device],
    cfg: &GptConfig,
    progress: &mut dyn FnMut(usize, f32),
) -> anyhow::Result<GptParallelRun> {
    let start = Instant::now();
    let n = devs.len();
    anyhow::ensure!(
        cfg.batch >= n,
        "a batch of {} problems leaves a device without any: use a batch of at least {n}",
        cfg.batch
    );
    let first = Gpt::new(cfg, &devs[0])?;
    let mut reps = Vec::new();
    for d in devs {
        let model = Gpt::new(cfg, d)?;
        for (p, q) in model.parameters().iter().zip(first.parameters()) {
            p.assign(&q.detach().to(d))?;
            p.realize()?;
        }
        let opt = demo_gpt::optimizer(&model, cfg)?;
        reps.push((model, opt, d.clone()));
    }
    let mut halves: Vec<Halves> = devs.iter().map(Halves::new).collect();
    // On one hive the whole step is captured as one graph over every device's queues, as
    // for the mlp.
    let mut whole = if one_hive(devs)? {
        Some(Jit::spanning(devs)?)
    } else {
        None
    };
    let mut rng = demo_gpt::training_rng(cfg);
    let (mut losses, mut exact) = (Vec::new(), Vec::new());
    for s in 0..cfg.steps {
        let probs = demo_gpt::training_problems(cfg, &mut rng, s);
        let mut at = 0;
        if let Some(jit) = whole.as_mut() {
            let mut inputs = Vec::with_capacity(2 * n);
            for (i, (_, _, dev)) in reps.iter().enumerate() {
                let len = cfg.batch / n + usize::from(i < cfg.batch % n);
                let (toks, tgts) = demo_gpt::batch_tensors(cfg, &probs[at..at + len], dev)?;
                at += len;
                inputs.push(toks);
                inputs.push(tgts);
            }
            let out = jit.run(&inputs.iter().collect::<Vec<_>>(), |i| {
                whole_gpt_step(&mut reps, cfg, i)
            })?;
            let (mut total, mut right_all) = (0.0f64, 0);
            for share in out.chunks(2) {
                total += f64::from(share[0].item()?);
                right_all += share[1].to_vec::<bool>()?.iter().filter(|&&b| b).count();
            }
            losses.push(total as f32);
            exact.push(right_all);
            progress(s, total as f32);
            continue;
        }
        let mut shares = Vec::new();
        for (i, ((model, _, dev), h)) in reps.iter().zip(&mut halves).enumerate() {
            let len = cfg.batch / n + usize::from(i < cfg.batch % n);
            let (toks, tgts) = demo_gpt::batch_tensors(cfg, &probs[at..at + len], dev)?;
            at += len;
            let scale = len as f64 / cfg.batch as f64;
            shares.push(h.backward(&model.parameters(), &[&toks, &tgts], |i| {
                let logits = model.answer_logits(&i[0])?;
                let loss = logits.cross_entropy(&i[1])?.mul(scale)?;
                let right = no_grad(|| demo_gpt::exact_answers(cfg, &logits, &i[1]))?;
                Ok(vec![loss, right])
            })?);
        }
        let replicas: Vec<Vec<Tensor>> = reps.iter().map(|r| r.0.parameters()).collect();
        all_reduce_gradients(&replicas)?;
        let (mut total, mut right_all) = (0.0f64, 0);
        for (((_, opt, _), h), share) in reps.iter_mut().zip(&mut halves).zip(&shares) {
            h.update(opt)?;
            total += f64::from(share[0].item()?);
            right_all += share[1].to_vec::<bool>()?.iter().filter(|&&b| b).count();
        }
        losses.push(total as f32);
        exact.push(right_all);
        progress(s, total as f32);
    }
    let test = demo_gpt::held_out_set(cfg);
    let test_correct = demo_gpt::score(&reps[0].0, &test, &devs[0])?;
    Ok(GptParallelRun {
        losses,
        exact,
        test_correct,
        test_total: test.len(),
        seconds: start.elapsed().as_secs_f64(),
        across: whole.is_some(),
    })
}

/// `am demo gpt --device A,B,…`: the data-parallel run, then (unless `no_compare`) the
/// first device alone, whose losses the parallel ones must match.
pub fn run_gpt(
    names: &[String],
    cfg: &GptConfig,
    no_compare: bool,
    json: bool,
) -> anyhow::Result<()> {
    let devs = open_all(names)?;
    if !json {
        println!(
            "am demo gpt: a transformer ({} features, {} heads) learns {}-digit addition, \
             AdamW lr {}, batch {} split over {} devices ({}), {} steps, seed {}, gradients \
             all-reduced every step",
            cfg.dim,
            cfg.heads,
            cfg.digits,
            cfg.lr,
            cfg.batch,
            devs.len(),
            names.join(", "),
            cfg.steps,
            cfg.seed
        );
    }
    let par = train_gpt(&devs, cfg, &mut |s, loss| {
        if !json && (s + 1) % 50 == 0 {
            println!("step {:>5}  loss {loss:.4}", s + 1);
        }
    })?;
    let one = if no_compare {
        None
    } else {
        Some(demo_gpt::train(&devs[0], cfg, &mut |_, _| {})?)
    };
    let share = |right: usize, total: usize| right as f64 / total.max(1) as f64;
    let acc = share(par.test_correct, par.test_total);
    let cmp = one.as_ref().map(|o| {
        Agreement::of(
            &par.losses,
            &o.losses,
            acc,
            share(o.test_correct, o.test_total),
        )
    });
    if json {
        let mut report = json!({
            "model": "gpt",
            "devices": names,
            "batch": cfg.batch,
            "steps": par.losses.len(),
            "losses": par.losses,
            "train_exact": par.exact,
            "test_accuracy": acc,
            "test_correct": par.test_correct,
            "test_problems": par.test_total,
            "seconds": par.seconds,
            "single_device": one.as_ref().map(|_| devs[0].name()),
            "single_seconds": one.as_ref().map(|o| o.seconds),
            "single_losses": one.as_ref().map(|o| &o.losses),
            "single_test_correct": one.as_ref().map(|o| o.test_correct),
            "step_captured_across_devices": par.across,
        });
        if let Some(c) = &cmp {
            merge(&mut report, c.json());
        }
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "held-out problems answered exactly: {:.1} % ({}/{}); {:.1} s on {} devices ({})",
            acc * 100.0,
            par.test_correct,
            par.test_total,
            par.seconds,
            devs.len(),
            captured_how(par.across)
        );
        if let (Some(o), Some(c)) = (&one, &cmp) {
            println!(
                "{} alone: {:.1} s, held-out {}/{}; {}",
                devs[0].name(),
                o.seconds,
                o.test_correct,
                o.test_total,
                c.text(par.losses.len())
            );
        }
    }
    cmp.map_or(Ok(()), |c| c.check(par.losses.len()))
}
