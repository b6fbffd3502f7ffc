//! `am demo [MODEL]`: the project's main job. A network learns the 8×8 handwritten digits on
//! a device (the mock Navi31 by default) with a captured training step replayed through a
//! runtime graph, then the same run on the CPU confirms the losses. The models: `mlp` (the
//! default, 64 → 128 → 10, here) and `cnn` (`demo_cnn.rs`); each implements
//! [`DigitsModel`], and this module trains, compares, saves and reports them alike. `gpt`
//! (`demo_gpt.rs`) learns addition instead of the digits and runs on its own.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use am_tensor::nn::{self, Adam, Linear, Optimizer};
use am_tensor::{DType, Device, Jit, Tensor, no_grad};
use anyhow::Context;
use clap::builder::RangedU64ValueParser;
use clap::{Args, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::json;

use crate::digits::{self, CLASSES, PIXELS, Set, SplitMix, TRAIN_IMAGES};

/// The demo's models.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ModelKind {
    /// An MLP 64 → `--hidden` → 10 (the main job).
    Mlp,
    /// A small convolutional network: two 3×3 convolutions with batch normalisation, ReLU
    /// and 2×2 max pooling, then a linear layer; AdamW with warm-up and cosine decay.
    Cnn,
    /// A small decoder-only transformer learns multi-digit addition written as text
    /// (`demo_gpt.rs`); it trains and reports on its own, not on the digits.
    Gpt,
}

impl ModelKind {
    fn name(self) -> &'static str {
        match self {
            ModelKind::Mlp => "mlp",
            ModelKind::Cnn => "cnn",
            ModelKind::Gpt => "gpt",
        }
    }
}

/// Options of `am demo`.
#[derive(Args, Debug)]
pub struct DemoArgs {
    /// The model to train.
    #[arg(value_enum, default_value_t = ModelKind::Mlp)]
    model: ModelKind,
    #[command(flatten)]
    gpt: crate::demo_gpt::GptArgs,
    /// Device to train on: `cpu`, `mock:PROFILE`, a PCI BDF or `remote:HOST:PORT`; a
    /// comma-separated list (or a hive profile without an index, `mock:mi300x-hive4`) trains
    /// data-parallel on every device listed (the mlp and the gpt).
    #[arg(long, default_value = "mock:navi31")]
    device: String,
    /// Passes over the training images, 1 to 1000 (default: 6 for mlp, 10 for cnn).
    #[arg(long, value_parser = RangedU64ValueParser::<usize>::new().range(1..=1000))]
    epochs: Option<usize>,
    /// Examples per step, 1 to 1437 (default: 32 images for mlp and cnn, the last partial
    /// batch of an epoch left out; 64 problems for gpt).
    #[arg(long, value_parser = RangedU64ValueParser::<usize>::new().range(1..=TRAIN_IMAGES as u64))]
    batch: Option<usize>,
    /// Hidden units of the MLP, 1 to 4096 (default 128; the cnn's and gpt's sizes are fixed).
    #[arg(long, value_parser = RangedU64ValueParser::<usize>::new().range(1..=4096))]
    hidden: Option<usize>,
    /// The optimizer's (peak) learning rate, above 0 and at most 1 (default: 0.01; 0.003
    /// for gpt).
    #[arg(long, value_parser = learning_rate)]
    lr: Option<f64>,
    /// Seed of the initial weights and of the batch order.
    #[arg(long, default_value_t = 0)]
    seed: u32,
    /// Skip the comparison run on the CPU.
    #[arg(long)]
    no_compare: bool,
    /// Write the trained weights to this safetensors file.
    #[arg(long, value_name = "FILE")]
    save: Option<PathBuf>,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

/// Adam's step is about the learning rate per weight: 0 (or less) learns nothing, more than
/// 1 throws away what the initial weights are, and NaN or infinity poison every weight.
fn learning_rate(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v <= 1.0 => Ok(v),
        _ => Err(format!("`{s}`: give a learning rate above 0 and at most 1")),
    }
}

/// The training setup.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// Passes over the training images.
    pub epochs: usize,
    /// Images per step.
    pub batch: usize,
    /// Hidden units.
    pub hidden: usize,
    /// Learning rate.
    pub lr: f64,
    /// Seed.
    pub seed: u32,
}

/// The network: two linear layers with a ReLU between.
pub struct Mlp {
    /// 64 → hidden.
    pub fc1: Linear,
    /// hidden → 10.
    pub fc2: Linear,
}

impl Mlp {
    /// Fresh weights from `seed`.
    pub fn new(hidden: usize, seed: u32, dev: &Device) -> am_tensor::Result<Mlp> {
        Ok(Mlp {
            fc1: Linear::new(PIXELS, hidden, seed.wrapping_mul(4), dev)?,
            fc2: Linear::new(hidden, CLASSES, seed.wrapping_mul(4).wrapping_add(2), dev)?,
        })
    }

    /// Logits of images `x` `[n, 64]`.
    pub fn forward(&self, x: &Tensor) -> am_tensor::Result<Tensor> {
        self.fc2.forward(&self.fc1.forward(x)?.relu())
    }

    /// Parameters, in the order they are saved.
    pub fn parameters(&self) -> Vec<Tensor> {
        let mut p = self.fc1.parameters();
        p.extend(self.fc2.parameters());
        p
    }

    /// Names of the parameters (PyTorch's for this model).
    pub const NAMES: [&'static str; 4] = ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"];
}

/// A model of the 8×8 digits with its optimizer: what `am demo` trains.
pub trait DigitsModel: Sized {
    /// The model as the first line names it.
    fn describe(cfg: &Config) -> String;
    /// The optimizer as the first line names it.
    fn optimizer(cfg: &Config) -> String;
    /// The layers, for `--json`.
    fn layout(cfg: &Config) -> serde_json::Value;
    /// Fresh weights from the seed, and an optimizer for `steps` steps.
    fn new(cfg: &Config, steps: usize, dev: &Device) -> am_tensor::Result<Self>;
    /// The shape `n` images (64 pixels each, row-major) are given in.
    fn input_shape(n: usize) -> Vec<usize>;
    /// One training step on images `x` with labels `y` `[batch]`: forward, cross-entropy,
    /// backward, update, all realized in one schedule. Returns the loss and the number of
    /// images the model classified right before the update.
    fn step(&mut self, x: &Tensor, y: &Tensor) -> am_tensor::Result<Vec<Tensor>>;
    /// Logits of images `x` for evaluation (no gradients, no training statistics).
    fn logits(&mut self, x: &Tensor) -> am_tensor::Result<Tensor>;
    /// The tensors `--save` writes, by PyTorch's names for the model.
    fn named(&self) -> Vec<(String, Tensor)>;
}

/// The images of `y`'s batch whose largest logit is the label's (a tie counts as right).
pub fn hits(logits: &Tensor, y: &Tensor) -> am_tensor::Result<Tensor> {
    no_grad(|| {
        let l = logits.detach();
        let top = l.eq(&l.max(&[-1], true)?)?;
        let label = y.one_hot(CLASSES)?.cast(DType::Bool);
        top.logical_and(&label)?.sum(&[], false)
    })
}

/// The MLP with Adam.
pub struct MlpDemo {
    /// The network.
    pub model: Mlp,
    /// Adam over the network's parameters.
    pub opt: Adam,
}

impl DigitsModel for MlpDemo {
    fn describe(cfg: &Config) -> String {
        format!("MLP {PIXELS} → {} → {CLASSES}", cfg.hidden)
    }

    fn optimizer(cfg: &Config) -> String {
        format!("Adam lr {}", cfg.lr)
    }

    fn layout(cfg: &Config) -> serde_json::Value {
        json!([PIXELS, cfg.hidden, CLASSES])
    }

    fn new(cfg: &Config, _steps: usize, dev: &Device) -> am_tensor::Result<MlpDemo> {
        let model = Mlp::new(cfg.hidden, cfg.seed, dev)?;
        let opt = Adam::new(model.parameters(), cfg.lr)?;
        Ok(MlpDemo { model, opt })
    }

    fn input_shape(n: usize) -> Vec<usize> {
        vec![n, PIXELS]
    }

    fn step(&mut self, x: &Tensor, y: &Tensor) -> am_tensor::Result<Vec<Tensor>> {
        step(&self.model, &mut self.opt, x, y)
    }

    fn logits(&mut self, x: &Tensor) -> am_tensor::Result<Tensor> {
        no_grad(|| self.model.forward(x))
    }

    fn named(&self) -> Vec<(String, Tensor)> {
        Mlp::NAMES
            .iter()
            .map(|n| n.to_string())
            .zip(self.model.parameters())
            .collect()
    }
}

/// One epoch's numbers.
#[derive(Clone, Debug)]
pub struct Epoch {
    /// Mean loss of its steps.
    pub loss: f64,
    /// Share of training images classified right during the epoch's steps.
    pub train_accuracy: f64,
    /// Share of test images classified right after the epoch.
    pub test_accuracy: f64,
    /// Wall time.
    pub seconds: f64,
}

/// A whole run.
pub struct Run<M> {
    /// The device's name.
    pub device: String,
    /// Per epoch.
    pub epochs: Vec<Epoch>,
    /// Every step's loss.
    pub losses: Vec<f32>,
    /// Test images classified right at the end.
    pub test_correct: usize,
    /// Test images.
    pub test_total: usize,
    /// Kernels of the captured step.
    pub kernels_per_step: usize,
    /// Kernels the two steps before capture launched.
    pub kernels_uncaptured: u64,
    /// Median wall time of a replayed step.
    pub step: Duration,
    /// Median host time of a replayed step outside waiting for the device.
    pub step_host: Duration,
    /// Wall time of the second (captured, uncached) step.
    pub step_uncaptured: Duration,
    /// Host time of that step outside waiting for the device.
    pub step_uncaptured_host: Duration,
    /// Wall time of the whole run.
    pub seconds: f64,
    /// The trained model.
    pub model: M,
}

/// What the training loop reports while it runs.
pub enum Progress<'a> {
    /// An epoch starts with this many steps.
    EpochStart(usize, usize),
    /// A step finished with this loss.
    Step(f32),
    /// An epoch ended.
    EpochEnd(usize, &'a Epoch),
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

/// Test images `set` classified right by `model`.
pub fn correct<M: DigitsModel>(model: &mut M, set: &Set, dev: &Device) -> am_tensor::Result<usize> {
    let x = Tensor::from_slice(&set.pixels, &M::input_shape(set.len()), dev)?;
    let logits = model.logits(&x)?;
    let pred = no_grad(|| logits.argmax(-1, false))?.to_vec::<i32>()?;
    Ok(pred.iter().zip(&set.labels).filter(|(p, l)| p == l).count())
}

/// One training step on images `x` `[batch, 64]` with labels `y` `[batch]`: forward,
/// cross-entropy, backward, Adam, all realized in one schedule. Returns the loss and the
/// number of images the model classified right before the update.
pub fn step(model: &Mlp, opt: &mut Adam, x: &Tensor, y: &Tensor) -> am_tensor::Result<Vec<Tensor>> {
    let logits = model.forward(x)?;
    let loss = logits.cross_entropy(y)?;
    let hit = hits(&logits, y)?;
    loss.backward()?;
    opt.step(&[&loss, &hit])?;
    Ok(vec![loss, hit])
}

/// Trains a fresh model on `dev`.
pub fn train<M: DigitsModel>(
    dev: &Device,
    train_set: &Set,
    test_set: &Set,
    cfg: &Config,
    progress: &mut dyn FnMut(Progress<'_>),
) -> am_tensor::Result<Run<M>> {
    let start = Instant::now();
    let steps = train_set.len() / cfg.batch.max(1);
    let mut model = M::new(cfg, steps * cfg.epochs, dev)?;
    let mut jit = Jit::new(dev);
    let mut rng = SplitMix(u64::from(cfg.seed) ^ 0x00de_4d05);
    let (mut losses, mut epochs) = (Vec::new(), Vec::new());
    let (mut walls, mut hosts) = (Vec::new(), Vec::new());
    let (mut step_uncaptured, mut step_uncaptured_host) = (Duration::ZERO, Duration::ZERO);
    let kernels_before = dev.kernels_launched();
    let mut kernels_uncaptured = 0;
    for e in 0..cfg.epochs {
        progress(Progress::EpochStart(e, steps));
        let t_epoch = Instant::now();
        let order = rng.permutation(train_set.len());
        let (mut loss_sum, mut hits) = (0.0f64, 0usize);
        for s in 0..steps {
            let batch = train_set.select(&order[s * cfg.batch..(s + 1) * cfg.batch]);
            let x = Tensor::from_slice(&batch.pixels, &M::input_shape(cfg.batch), dev)?;
            let y = Tensor::from_slice(&batch.labels, &[cfg.batch], dev)?;
            let (t, waited) = (Instant::now(), dev.wait_time());
            let out = jit.run(&[&x, &y], |inp| model.step(&inp[0], &inp[1]))?;
            let wall = t.elapsed();
            let host = wall.saturating_sub(dev.wait_time() - waited);
            if jit.is_captured() && e * steps + s >= 2 {
                walls.push(wall);
                hosts.push(host);
            } else {
                kernels_uncaptured = dev.kernels_launched() - kernels_before;
                (step_uncaptured, step_uncaptured_host) = (wall, host);
            }
            let loss = out[0].item()?;
            hits += out[1].item()? as usize;
            loss_sum += f64::from(loss);
            losses.push(loss);
            progress(Progress::Step(loss));
        }
        let test_ok = correct(&mut model, test_set, dev)?;
        let ep = Epoch {
            loss: loss_sum / steps.max(1) as f64,
            train_accuracy: hits as f64 / (steps * cfg.batch).max(1) as f64,
            test_accuracy: test_ok as f64 / test_set.len().max(1) as f64,
            seconds: t_epoch.elapsed().as_secs_f64(),
        };
        progress(Progress::EpochEnd(e, &ep));
        epochs.push(ep);
    }
    let test_correct = correct(&mut model, test_set, dev)?;
    Ok(Run {
        device: dev.name().to_string(),
        epochs,
        losses,
        test_correct,
        test_total: test_set.len(),
        kernels_per_step: jit.kernels().unwrap_or(0),
        kernels_uncaptured,
        step: median(&mut walls),
        step_host: median(&mut hosts),
        step_uncaptured,
        step_uncaptured_host,
        seconds: start.elapsed().as_secs_f64(),
        model,
    })
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// `am demo`.
pub fn run(args: DemoArgs) -> anyhow::Result<()> {
    am_mock::register();
    if let Some(flag) = args.inapplicable() {
        anyhow::bail!(
            "`{flag}` does not apply to `am demo {}` (see `am demo --help`)",
            args.model.name()
        );
    }
    anyhow::ensure!(
        args.model != ModelKind::Cnn || crate::device::device_list(&args.device).len() < 2,
        "a data-parallel run ({}) trains the mlp and the gpt, not the {}",
        args.device,
        args.model.name()
    );
    match args.model {
        ModelKind::Mlp => run_digits::<MlpDemo>(&args, 6),
        ModelKind::Cnn => run_digits::<crate::demo_cnn::Cnn>(&args, crate::demo_cnn::EPOCHS),
        ModelKind::Gpt => {
            let shared = crate::demo_gpt::Shared {
                device: &args.device,
                seed: args.seed,
                no_compare: args.no_compare,
                save: args.save.as_ref(),
                json: args.json,
                batch: args.batch,
                lr: args.lr,
            };
            crate::demo_gpt::run(&shared, &args.gpt)
        }
    }
}

impl DemoArgs {
    /// The first option given that the chosen model has no use for: a run must not look as
    /// if it honoured an option it ignored.
    fn inapplicable(&self) -> Option<&'static str> {
        match self.model {
            ModelKind::Mlp => self.gpt.given(),
            ModelKind::Cnn => self.gpt.given().or_else(|| self.hidden.map(|_| "--hidden")),
            ModelKind::Gpt => [
                self.epochs.map(|_| "--epochs"),
                self.hidden.map(|_| "--hidden"),
            ]
            .into_iter()
            .flatten()
            .next(),
        }
    }
}

/// Trains a model of the digits as `args` say (`epochs` unless given), compares and reports.
fn run_digits<M: DigitsModel>(args: &DemoArgs, epochs: usize) -> anyhow::Result<()> {
    let cfg = Config {
        epochs: args.epochs.unwrap_or(epochs),
        batch: args.batch.unwrap_or(32),
        hidden: args.hidden.unwrap_or(128),
        lr: args.lr.unwrap_or(0.01),
        seed: args.seed,
    };
    let (train_set, test_set) = digits::split()?;
    let list = crate::device::device_list(&args.device);
    if list.len() > 1 {
        anyhow::ensure!(
            args.save.is_none(),
            "--save is for one device; a data-parallel run ({}) does not save",
            args.device
        );
        return crate::demo_parallel::run(&list, &cfg, &train_set, &test_set, args.json);
    }
    let dev = Device::open(&args.device).with_context(|| format!("opening {}", args.device))?;
    if !args.json {
        println!(
            "am demo: {} on the 8×8 digits ({} training, {} test images), \
             {}, batch {}, seed {}, on {} ({})",
            M::describe(&cfg),
            train_set.len(),
            test_set.len(),
            M::optimizer(&cfg),
            cfg.batch,
            cfg.seed,
            dev.name(),
            dev.target()
        );
    }
    let mut report = progress_printer(args.json, cfg.epochs);
    let run = train::<M>(&dev, &train_set, &test_set, &cfg, &mut report)?;
    let cpu = if args.no_compare || dev.is_cpu() {
        None
    } else {
        let cpu_dev = Device::cpu();
        Some(train::<M>(
            &cpu_dev,
            &train_set,
            &test_set,
            &cfg,
            &mut |_| {},
        )?)
    };
    let diff = cpu.as_ref().map(|c| {
        run.losses
            .iter()
            .zip(&c.losses)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max)
    });
    if let Some(path) = &args.save {
        let tensors = run.model.named();
        let named: Vec<(&str, &Tensor)> = tensors.iter().map(|(n, t)| (n.as_str(), t)).collect();
        nn::save(path, &named).with_context(|| format!("saving {}", path.display()))?;
    }
    let outcome = Outcome {
        kind: args.model,
        cfg: &cfg,
        dev: &dev,
        train_images: train_set.len(),
        test_images: test_set.len(),
        run,
        cpu,
        diff,
        save: args.save.as_ref(),
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&outcome.json())?);
    } else {
        outcome.print_summary();
    }
    Ok(())
}

/// Prints each epoch's progress bar and result line (nothing when `quiet`).
fn progress_printer(quiet: bool, epochs: usize) -> impl FnMut(Progress<'_>) {
    let mut bar: Option<ProgressBar> = None;
    move |p: Progress<'_>| match p {
        Progress::EpochStart(e, steps) => {
            if quiet {
                return;
            }
            let b = ProgressBar::new(steps as u64);
            b.set_style(
                ProgressStyle::with_template(
                    "epoch {prefix:>5} [{bar:30}] {pos:>3}/{len:3} {msg} ({elapsed})",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
            );
            b.set_prefix(format!("{}/{epochs}", e + 1));
            bar = Some(b);
        }
        Progress::Step(loss) => {
            if let Some(b) = &bar {
                b.set_message(format!("loss {loss:.4}"));
                b.inc(1);
            }
        }
        Progress::EpochEnd(e, ep) => {
            if let Some(b) = bar.take() {
                b.finish_and_clear();
            }
            if !quiet {
                println!(
                    "epoch {:>5}  loss {:.4}  train {:5.1} %  test {:5.1} %  {:.2} s",
                    format!("{}/{epochs}", e + 1),
                    ep.loss,
                    ep.train_accuracy * 100.0,
                    ep.test_accuracy * 100.0,
                    ep.seconds
                );
            }
        }
    }
}

/// A finished demo: what its JSON and its summary say.
struct Outcome<'a, M> {
    kind: ModelKind,
    cfg: &'a Config,
    dev: &'a Device,
    train_images: usize,
    test_images: usize,
    run: Run<M>,
    /// The same run on the CPU, unless skipped.
    cpu: Option<Run<M>>,
    /// The largest difference of a step's loss between the two runs.
    diff: Option<f32>,
    save: Option<&'a PathBuf>,
}

impl<M: DigitsModel> Outcome<'_, M> {
    fn accuracy(&self) -> f64 {
        self.run.test_correct as f64 / self.run.test_total.max(1) as f64
    }

    fn json(&self) -> serde_json::Value {
        let epochs: Vec<_> = self
            .run
            .epochs
            .iter()
            .enumerate()
            .map(|(i, e)| {
                json!({
                    "epoch": i + 1, "loss": e.loss, "train_accuracy": e.train_accuracy,
                    "test_accuracy": e.test_accuracy, "seconds": e.seconds,
                })
            })
            .collect();
        let cpu_json = self.cpu.as_ref().map(|c| {
            json!({
                "test_accuracy": c.test_correct as f64 / c.test_total.max(1) as f64,
                "seconds": c.seconds,
                "step_us": micros(c.step),
                "loss_max_abs_diff": self.diff,
                "losses_agree": self.diff.is_some_and(|d| d <= 1e-4),
            })
        });
        json!({
            "device": self.run.device,
            "target": self.dev.target().name(),
            "model_name": self.kind.name(),
            "model": M::layout(self.cfg),
            "train_images": self.train_images,
            "test_images": self.test_images,
            "batch": self.cfg.batch,
            "lr": self.cfg.lr,
            "seed": self.cfg.seed,
            "epochs": epochs,
            "test_accuracy": self.accuracy(),
            "test_correct": self.run.test_correct,
            "kernels_per_step": self.run.kernels_per_step,
            "kernels_first_two_steps": self.run.kernels_uncaptured,
            "step_us": micros(self.run.step),
            "step_host_us": micros(self.run.step_host),
            "uncaptured_step_us": micros(self.run.step_uncaptured),
            "uncaptured_step_host_us": micros(self.run.step_uncaptured_host),
            "seconds": self.run.seconds,
            "cpu": cpu_json,
            "saved": self.save.map(|p| p.display().to_string()),
        })
    }

    fn print_summary(&self) {
        println!(
            "test accuracy: {:.1} % ({}/{})",
            self.accuracy() * 100.0,
            self.run.test_correct,
            self.run.test_total
        );
        println!(
            "kernels per step: {} (the captured step, replayed as one runtime graph; {} in the first two steps)",
            self.run.kernels_per_step, self.run.kernels_uncaptured
        );
        println!(
            "time per step: {:.2} ms, of which {:.0} µs on the host outside GPU execution (uncaptured: {:.2} ms, host {:.0} µs)",
            self.run.step.as_secs_f64() * 1e3,
            micros(self.run.step_host),
            self.run.step_uncaptured.as_secs_f64() * 1e3,
            micros(self.run.step_uncaptured_host),
        );
        if let (Some(c), Some(d)) = (&self.cpu, self.diff) {
            println!(
                "cpu: the same run in {:.2} s ({:.2} ms per step, test accuracy {:.1} %): losses {} (max |Δ| {d:.1e} over {} steps)",
                c.seconds,
                c.step.as_secs_f64() * 1e3,
                c.test_correct as f64 / c.test_total.max(1) as f64 * 100.0,
                if d <= 1e-4 {
                    "agree to 1e-4"
                } else {
                    "DIFFER by more than 1e-4"
                },
                self.run.losses.len()
            );
        }
        if let Some(p) = self.save {
            let names: Vec<String> = self.run.model.named().into_iter().map(|(n, _)| n).collect();
            println!("saved: {} ({})", p.display(), names.join(", "));
        }
    }
}
