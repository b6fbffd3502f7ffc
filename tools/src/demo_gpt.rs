//! `am demo gpt`: a small decoder-only transformer learns multi-digit addition written as
//! text (`"07+35=240"`: the operands zero-padded, the sum's digits from the lowest, so each
//! answer digit needs only the digits at its place and the carry from the one before) from
//! problems generated from the seed, on a device, with a captured training step; then it is
//! scored on held-out problems and answers prompts one token per replay of a captured
//! decoding step that keeps a key-value cache.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use am_tensor::nn::{self, Adam, Embedding, LayerNorm, Linear, MultiHeadAttention, Optimizer};
use am_tensor::{DType, Device, Jit, Tensor, no_grad};
use anyhow::{Context, bail};
use clap::Args;
use clap::builder::RangedU64ValueParser;
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::json;

use crate::digits::SplitMix;

/// Options of `am demo gpt` (the others — `--device`, `--seed`, `--no-compare`, `--save`,
/// `--json` — are the demo's).
#[derive(Args, Debug)]
pub struct GptArgs {
    /// gpt: digits of each operand, 1 to 4.
    #[arg(long, default_value_t = 2, value_parser = RangedU64ValueParser::<usize>::new().range(1..=4))]
    digits: usize,
    /// gpt: training steps, 1 to 100000.
    #[arg(long, default_value_t = DEFAULT_STEPS, value_parser = RangedU64ValueParser::<usize>::new().range(1..=100_000))]
    steps: usize,
    /// gpt: a problem to answer after training, like `12+34` (repeatable).
    #[arg(long)]
    prompt: Vec<String>,
    /// gpt: weights to use instead of training (a file `--save` wrote).
    #[arg(long, value_name = "FILE")]
    load: Option<PathBuf>,
}

/// Steps of the default run.
const DEFAULT_STEPS: usize = 600;
/// Tokens: the digits, `+` and `=`.
pub const VOCAB: usize = 12;
const PLUS: i32 = 10;
const EQUALS: i32 = 11;
/// Held-out problems scored at the end (all of them when there are fewer).
const HELD_OUT: usize = 1000;

/// The model's size and the training setup.
#[derive(Clone, Copy, Debug)]
pub struct GptConfig {
    /// Digits of each operand.
    pub digits: usize,
    /// Features per token.
    pub dim: usize,
    /// Attention heads.
    pub heads: usize,
    /// Transformer blocks.
    pub layers: usize,
    /// Problems per step.
    pub batch: usize,
    /// Adam's learning rate.
    pub lr: f64,
    /// Training steps.
    pub steps: usize,
    /// Seed of the weights and the problems.
    pub seed: u32,
}

impl GptConfig {
    /// The demo's model for `digits`-digit operands.
    pub fn new(digits: usize, steps: usize, seed: u32) -> GptConfig {
        GptConfig {
            digits,
            dim: 32,
            heads: 4,
            layers: 1,
            batch: 64,
            lr: 3e-3,
            steps,
            seed,
        }
    }

    /// Tokens of a whole problem: operands, `+`, `=`, and the sum's digits + 1.
    pub fn len(&self) -> usize {
        3 * self.digits + 3
    }

    /// Tokens the model reads (all but the last).
    pub fn context(&self) -> usize {
        self.len() - 1
    }

    /// Digits of an answer.
    pub fn answer(&self) -> usize {
        self.digits + 1
    }

    /// The position that predicts the first answer digit (`=`).
    fn first_answer_pos(&self) -> usize {
        2 * self.digits + 1
    }
}

/// Problem `(a, b)` as tokens.
pub fn encode(cfg: &GptConfig, a: u64, b: u64) -> Vec<i32> {
    let n = cfg.digits;
    let digits_of = |mut x: u64, k: usize| -> Vec<i32> {
        let mut d = vec![0; k];
        for slot in d.iter_mut() {
            *slot = (x % 10) as i32;
            x /= 10;
        }
        d
    };
    let mut t: Vec<i32> = digits_of(a, n).into_iter().rev().collect();
    t.push(PLUS);
    t.extend(digits_of(b, n).into_iter().rev());
    t.push(EQUALS);
    t.extend(digits_of(a + b, n + 1));
    t
}

/// Whether problem number `p` (`a·10ⁿ + b`) is held out of training, by a hash of it and
/// the seed: a tenth of the problems.
fn held_out(p: u64, seed: u32) -> bool {
    SplitMix(p ^ (u64::from(seed) << 32) ^ 0x6a09_e667)
        .next()
        .is_multiple_of(10)
}

/// `count` problems drawn from the training share (or the held-out share).
fn problems(cfg: &GptConfig, rng: &mut SplitMix, count: usize, test: bool) -> Vec<(u64, u64)> {
    let m = 10u64.pow(cfg.digits as u32);
    let mut out = Vec::with_capacity(count);
    while out.len() < count {
        let p = rng.next() % (m * m);
        if held_out(p, cfg.seed) == test {
            out.push((p / m, p % m));
        }
    }
    out
}

/// The held-out problems scored: every one when there are at most [`HELD_OUT`], else
/// [`HELD_OUT`] of them (fixed by the seed).
fn held_out_set(cfg: &GptConfig) -> Vec<(u64, u64)> {
    let m = 10u64.pow(cfg.digits as u32);
    let all: Vec<(u64, u64)> = (0..m * m)
        .filter(|&p| held_out(p, cfg.seed))
        .map(|p| (p / m, p % m))
        .collect();
    if all.len() <= HELD_OUT {
        return all;
    }
    let mut rng = SplitMix(u64::from(cfg.seed) ^ 0x7e57);
    problems(cfg, &mut rng, HELD_OUT, true)
}

/// One pre-norm transformer block.
pub struct Block {
    ln1: LayerNorm,
    attn: MultiHeadAttention,
    ln2: LayerNorm,
    fc1: Linear,
    fc2: Linear,
}

/// The decoder-only transformer.
pub struct Gpt {
    cfg: GptConfig,
    tok: Embedding,
    pos: Embedding,
    blocks: Vec<Block>,
    ln_f: LayerNorm,
    head: Linear,
}

impl Gpt {
    /// Fresh weights from the seed.
    pub fn new(cfg: &GptConfig, dev: &Device) -> am_tensor::Result<Gpt> {
        let d = cfg.dim;
        let s = cfg.seed.wrapping_mul(64);
        let mut blocks = Vec::new();
        for l in 0..cfg.layers {
            let b = s.wrapping_add(8 + 16 * l as u32);
            blocks.push(Block {
                ln1: LayerNorm::new(d, dev)?,
                attn: MultiHeadAttention::new(d, cfg.heads, b, dev)?,
                ln2: LayerNorm::new(d, dev)?,
                fc1: Linear::new(d, 4 * d, b.wrapping_add(4), dev)?,
                fc2: Linear::new(4 * d, d, b.wrapping_add(6), dev)?,
            });
        }
        Ok(Gpt {
            cfg: *cfg,
            tok: Embedding::with_scale(VOCAB, d, 0.5, s, dev)?,
            pos: Embedding::with_scale(cfg.context(), d, 0.5, s.wrapping_add(1), dev)?,
            blocks,
            ln_f: LayerNorm::new(d, dev)?,
            head: Linear::new(d, VOCAB, s.wrapping_add(2), dev)?,
        })
    }

    fn mlp(b: &Block, x: &Tensor) -> am_tensor::Result<Tensor> {
        b.fc2.forward(&b.fc1.forward(&b.ln2.forward(x)?)?.relu())
    }

    /// Logits `[batch, seq, VOCAB]` of tokens `[batch, seq]` (i32), each position seeing
    /// itself and the positions before.
    pub fn forward(&self, tokens: &Tensor) -> am_tensor::Result<Tensor> {
        let t = tokens.shape()[1];
        let at = Tensor::arange(0, t as i32, 1, &tokens.device())?;
        let mut x = self.tok.forward(tokens)?.add(&self.pos.forward(&at)?)?;
        for b in &self.blocks {
            x = x.add(&b.attn.forward(&b.ln1.forward(&x)?, None, true)?)?;
            x = x.add(&Gpt::mlp(b, &x)?)?;
        }
        self.head.forward(&self.ln_f.forward(&x)?)
    }

    /// Logits of the answer positions, `[batch · answer, VOCAB]`.
    fn answer_logits(&self, tokens: &Tensor) -> am_tensor::Result<Tensor> {
        let c = &self.cfg;
        self.forward(tokens)?
            .narrow(1, c.first_answer_pos(), c.answer())?
            .reshape(&[-1, VOCAB as isize])
    }

    /// Parameters with their names, in the order they are saved.
    pub fn named_parameters(&self) -> Vec<(String, Tensor)> {
        let mut v = vec![
            ("tok.weight".to_string(), self.tok.weight.clone()),
            ("pos.weight".to_string(), self.pos.weight.clone()),
        ];
        for (l, b) in self.blocks.iter().enumerate() {
            let p = format!("blocks.{l}");
            v.push((format!("{p}.ln1.weight"), b.ln1.weight.clone()));
            v.push((format!("{p}.ln1.bias"), b.ln1.bias.clone()));
            v.push((
                format!("{p}.attn.in_proj.weight"),
                b.attn.in_proj.weight.clone(),
            ));
            v.push((
                format!("{p}.attn.in_proj.bias"),
                b.attn.in_proj.bias.clone(),
            ));
            v.push((
                format!("{p}.attn.out_proj.weight"),
                b.attn.out_proj.weight.clone(),
            ));
            v.push((
                format!("{p}.attn.out_proj.bias"),
                b.attn.out_proj.bias.clone(),
            ));
            v.push((format!("{p}.ln2.weight"), b.ln2.weight.clone()));
            v.push((format!("{p}.ln2.bias"), b.ln2.bias.clone()));
            v.push((format!("{p}.fc1.weight"), b.fc1.weight.clone()));
            v.push((format!("{p}.fc1.bias"), b.fc1.bias.clone()));
            v.push((format!("{p}.fc2.weight"), b.fc2.weight.clone()));
            v.push((format!("{p}.fc2.bias"), b.fc2.bias.clone()));
        }
        v.push(("ln_f.weight".into(), self.ln_f.weight.clone()));
        v.push(("ln_f.bias".into(), self.ln_f.bias.clone()));
        v.push(("head.weight".into(), self.head.weight.clone()));
        v.push(("head.bias".into(), self.head.bias.clone()));
        v
    }

    /// The parameters.
    pub fn parameters(&self) -> Vec<Tensor> {
        self.named_parameters()
            .into_iter()
            .map(|(_, t)| t)
            .collect()
    }
}

/// One training step on problems `tokens` `[batch, context]` with answer digits `targets`
/// `[batch · answer]`: returns the loss and which problems of the batch the model answered
/// exactly before the update.
pub fn step(
    model: &Gpt,
    opt: &mut Adam,
    tokens: &Tensor,
    targets: &Tensor,
) -> am_tensor::Result<Vec<Tensor>> {
    let logits = model.answer_logits(tokens)?;
    let loss = logits.cross_entropy(targets)?;
    let exact = no_grad(|| exact_answers(&model.cfg, &logits, targets))?;
    loss.backward()?;
    opt.step(&[&loss, &exact])?;
    Ok(vec![loss, exact])
}

/// Per problem: whether every answer digit's logit is above every other digit's (what
/// greedy decoding picks). Counted on the host: one more reduction in the same kernel
/// needs more scalar registers than a wave has.
fn exact_answers(cfg: &GptConfig, logits: &Tensor, targets: &Tensor) -> am_tensor::Result<Tensor> {
    let l = logits.detach();
    let pick = targets.one_hot(VOCAB)?.cast(DType::Bool);
    let target = pick.where_(&l, 0.0)?.sum(&[-1], false)?;
    let others = pick.where_(f64::NEG_INFINITY, &l)?.max(&[-1], false)?;
    target
        .gt(&others)?
        .reshape(&[-1, cfg.answer() as isize])?
        .sum(&[-1], false)?
        .eq(cfg.answer() as i32)
}

/// Tokens and answer digits of a batch of problems.
fn batch_tensors(
    cfg: &GptConfig,
    probs: &[(u64, u64)],
    dev: &Device,
) -> am_tensor::Result<(Tensor, Tensor)> {
    let (mut toks, mut tgts) = (Vec::new(), Vec::new());
    for &(a, b) in probs {
        let t = encode(cfg, a, b);
        toks.extend_from_slice(&t[..cfg.context()]);
        tgts.extend_from_slice(&t[cfg.first_answer_pos() + 1..]);
    }
    Ok((
        Tensor::from_slice(&toks, &[probs.len(), cfg.context()], dev)?,
        Tensor::from_slice(&tgts, &[probs.len() * cfg.answer()], dev)?,
    ))
}

/// Held-out problems answered exactly: every answer digit right given the digits before
/// (what greedy decoding gives: it goes wrong exactly where one of these is wrong).
pub fn score(model: &Gpt, probs: &[(u64, u64)], dev: &Device) -> am_tensor::Result<usize> {
    let mut right = 0;
    for chunk in probs.chunks(250) {
        let (toks, tgts) = batch_tensors(&model.cfg, chunk, dev)?;
        let n = no_grad(|| exact_answers(&model.cfg, &model.answer_logits(&toks)?, &tgts))?;
        right += n.to_vec::<bool>()?.iter().filter(|&&b| b).count();
    }
    Ok(right)
}

/// A whole training run.
pub struct GptRun {
    /// The device's name.
    pub device: String,
    /// Every step's loss.
    pub losses: Vec<f32>,
    /// Every step's exactly answered problems of the batch.
    pub exact: Vec<usize>,
    /// Held-out problems answered exactly at the end.
    pub test_correct: usize,
    /// Held-out problems scored.
    pub test_total: usize,
    /// Kernels of the captured step.
    pub kernels_per_step: usize,
    /// Median wall time of a replayed step.
    pub step: Duration,
    /// Median host time of a replayed step outside waiting for the device.
    pub step_host: Duration,
    /// Wall time of training and scoring.
    pub seconds: f64,
    /// The trained model.
    pub model: Gpt,
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

/// Trains a fresh model on `dev`; `progress` hears each step's number and loss.
pub fn train(
    dev: &Device,
    cfg: &GptConfig,
    progress: &mut dyn FnMut(usize, f32),
) -> am_tensor::Result<GptRun> {
    let start = Instant::now();
    let model = Gpt::new(cfg, dev)?;
    let mut opt = Adam::new(model.parameters(), cfg.lr)?;
    let mut jit = Jit::new(dev);
    let mut rng = SplitMix(u64::from(cfg.seed) ^ 0x00ad_d000);
    let (mut losses, mut exact) = (Vec::new(), Vec::new());
    let (mut walls, mut hosts) = (Vec::new(), Vec::new());
    for s in 0..cfg.steps {
        let probs = problems(cfg, &mut rng, cfg.batch, false);
        let (toks, tgts) = batch_tensors(cfg, &probs, dev)?;
        let (t, waited) = (Instant::now(), dev.wait_time());
        let out = jit.run(&[&toks, &tgts], |i| step(&model, &mut opt, &i[0], &i[1]))?;
        let wall = t.elapsed();
        if s >= 2 {
            walls.push(wall);
            hosts.push(wall.saturating_sub(dev.wait_time() - waited));
        }
        let loss = out[0].item()?;
        losses.push(loss);
        exact.push(out[1].to_vec::<bool>()?.iter().filter(|&&b| b).count());
        progress(s, loss);
    }
    let test = held_out_set(cfg);
    let test_correct = score(&model, &test, dev)?;
    Ok(GptRun {
        device: dev.name().to_string(),
        losses,
        exact,
        test_correct,
        test_total: test.len(),
        kernels_per_step: jit.kernels().unwrap_or(0),
        step: median(&mut walls),
        step_host: median(&mut hosts),
        seconds: start.elapsed().as_secs_f64(),
        model,
    })
}

/// Greedy answers with a key-value cache: a captured step reads one token at one position,
/// stores its keys and values in the cache, attends over the cache up to that position and
/// returns the most likely next token — each token after the first two one replay.
pub struct Decoder<'a> {
    model: &'a Gpt,
    jit: Jit,
    /// Per block: keys and values `[1, heads, context, dim / heads]`.
    cache: Vec<(Tensor, Tensor)>,
    dev: Device,
}

impl<'a> Decoder<'a> {
    /// An empty cache for `model` on `dev`.
    pub fn new(model: &'a Gpt, dev: &Device) -> am_tensor::Result<Decoder<'a>> {
        let c = &model.cfg;
        let shape = [1, c.heads, c.context(), c.dim / c.heads];
        let zeros = vec![0.0f32; shape.iter().product()];
        let mut cache = Vec::new();
        for _ in 0..c.layers {
            cache.push((
                Tensor::from_slice(&zeros, &shape, dev)?,
                Tensor::from_slice(&zeros, &shape, dev)?,
            ));
        }
        Ok(Decoder {
            model,
            jit: Jit::new(dev),
            cache,
            dev: dev.clone(),
        })
    }

    fn token_step(
        model: &Gpt,
        cache: &[(Tensor, Tensor)],
        token: &Tensor,
        pos: &Tensor,
    ) -> am_tensor::Result<Vec<Tensor>> {
        no_grad(|| {
            let c = &model.cfg;
            let ctx = c.context();
            let x0 = model.tok.forward(token)?.add(&model.pos.forward(pos)?)?;
            let mut x = x0.reshape(&[1, 1, c.dim as isize])?;
            // Position `pos` of the cache, and the positions up to it.
            let at = pos
                .one_hot(ctx)?
                .cast(DType::Bool)
                .reshape(&[1, 1, ctx as isize, 1])?;
            let seen = Tensor::arange(0, ctx as i32, 1, &token.device())?.le(pos)?;
            for (b, (kc, vc)) in model.blocks.iter().zip(cache) {
                let (q, k, v) = b.attn.project(&b.ln1.forward(&x)?)?;
                kc.assign(&at.where_(&k, kc)?)?;
                vc.assign(&at.where_(&v, vc)?)?;
                let o = q.scaled_dot_product_attention(kc, vc, Some(&seen), false)?;
                x = x.add(&b.attn.merge(&o)?)?;
                x = x.add(&Gpt::mlp(b, &x)?)?;
            }
            let logits = model.head.forward(&model.ln_f.forward(&x)?)?;
            Ok(vec![logits.reshape(&[VOCAB as isize])?.argmax(-1, false)?])
        })
    }

    /// Reads `token` at `pos` and returns the next token.
    pub fn next(&mut self, token: i32, pos: usize) -> am_tensor::Result<i32> {
        let t = Tensor::from_slice(&[token], &[1], &self.dev)?;
        let p = Tensor::from_slice(&[pos as i32], &[1], &self.dev)?;
        let (model, cache) = (self.model, &self.cache);
        let out = self.jit.run(&[&t, &p], |i| {
            Decoder::token_step(model, cache, &i[0], &i[1])
        })?;
        Ok(out[0].to_vec::<i32>()?[0])
    }

    /// Replays so far (once captured).
    pub fn kernels(&self) -> Option<usize> {
        self.jit.kernels()
    }

    /// The model's answer to `a + b`: the prompt read one token at a time, then the sum's
    /// digits generated one at a time (lowest first), returned as a number.
    pub fn answer(&mut self, a: u64, b: u64) -> am_tensor::Result<(u64, String)> {
        let c = self.model.cfg;
        let toks = encode(&c, a, b);
        let prompt = &toks[..=c.first_answer_pos()];
        let mut next = 0;
        for (p, &t) in prompt.iter().enumerate() {
            next = self.next(t, p)?;
        }
        let mut digits = vec![next];
        for p in prompt.len()..c.context() {
            next = self.next(next, p)?;
            digits.push(next);
        }
        let text: String = digits
            .iter()
            .map(|&d| match d {
                0..=9 => char::from(b'0' + d as u8),
                PLUS => '+',
                _ => '=',
            })
            .collect();
        let value = digits.iter().rev().try_fold(0u64, |acc, &d| {
            (0..=9).contains(&d).then(|| acc * 10 + d as u64)
        });
        Ok((value.unwrap_or(u64::MAX), text))
    }
}

/// `a+b` of at most `digits` digits each.
fn parse_prompt(s: &str, digits: usize) -> anyhow::Result<(u64, u64)> {
    let bad = || {
        anyhow::anyhow!(
            "prompt `{s}`: give two numbers of at most {digits} digits joined by `+`, like `12+34`"
        )
    };
    let (a, b) = s
        .trim()
        .trim_end_matches('=')
        .split_once('+')
        .ok_or_else(bad)?;
    let num = |x: &str| -> anyhow::Result<u64> {
        let x = x.trim();
        if x.is_empty() || x.len() > digits || !x.bytes().all(|c| c.is_ascii_digit()) {
            return Err(bad());
        }
        x.parse().map_err(|_| bad())
    };
    Ok((num(a)?, num(b)?))
}

/// The largest difference of a step's loss between the device's and the CPU's runs under
/// which they agree.
pub const LOSS_TOLERANCE: f32 = 1e-3;

/// The demo's options `am demo gpt` shares.
#[derive(Clone, Copy)]
pub struct Shared<'a> {
    /// `--device`.
    pub device: &'a str,
    /// `--seed`.
    pub seed: u32,
    /// `--no-compare`.
    pub no_compare: bool,
    /// `--save`.
    pub save: Option<&'a PathBuf>,
    /// `--json`.
    pub json: bool,
}

/// `am demo gpt`.
pub fn run(shared: &Shared<'_>, args: &GptArgs) -> anyhow::Result<()> {
    let Shared {
        device,
        seed,
        no_compare,
        save,
        json: json_out,
    } = *shared;
    let cfg = GptConfig::new(args.digits, args.steps, seed);
    let prompts: Vec<(u64, u64)> = args
        .prompt
        .iter()
        .map(|p| parse_prompt(p, cfg.digits))
        .collect::<anyhow::Result<_>>()?;
    let dev = Device::open(device).with_context(|| format!("opening {device}"))?;
    let start = Instant::now();
    if !json_out {
        println!(
            "am demo gpt: a transformer ({} block{}, {} features, {} heads) learns {}-digit addition \
             (\"{}\"), {}, seed {}, on {} ({})",
            cfg.layers,
            if cfg.layers == 1 { "" } else { "s" },
            cfg.dim,
            cfg.heads,
            cfg.digits,
            example(&cfg),
            match &args.load {
                Some(p) => format!("weights from {}", p.display()),
                None => format!(
                    "Adam lr {}, batch {}, {} steps",
                    cfg.lr, cfg.batch, cfg.steps
                ),
            },
            cfg.seed,
            dev.name(),
            dev.target()
        );
    }
    let (run, loaded) = match &args.load {
        Some(path) => {
            let model = Gpt::new(&cfg, &dev)?;
            let named = model.named_parameters();
            let refs: Vec<(&str, &Tensor)> = named.iter().map(|(n, t)| (n.as_str(), t)).collect();
            nn::load_into(path, &refs).with_context(|| format!("loading {}", path.display()))?;
            let t = Instant::now();
            let test = held_out_set(&cfg);
            let test_correct = score(&model, &test, &dev)?;
            let run = GptRun {
                device: dev.name().to_string(),
                losses: vec![],
                exact: vec![],
                test_correct,
                test_total: test.len(),
                kernels_per_step: 0,
                step: Duration::ZERO,
                step_host: Duration::ZERO,
                seconds: t.elapsed().as_secs_f64(),
                model,
            };
            (run, true)
        }
        None => {
            let bar = (!json_out).then(|| {
                let b = ProgressBar::new(cfg.steps as u64);
                b.set_style(
                    ProgressStyle::with_template(
                        "train [{bar:30}] {pos:>5}/{len:5} {msg} ({elapsed})",
                    )
                    .unwrap_or_else(|_| ProgressStyle::default_bar())
                    .progress_chars("=> "),
                );
                b
            });
            let run = train(&dev, &cfg, &mut |_, loss| {
                if let Some(b) = &bar {
                    b.set_message(format!("loss {loss:.4}"));
                    b.inc(1);
                }
            })?;
            if let Some(b) = bar {
                b.finish_and_clear();
            }
            (run, false)
        }
    };
    let cpu = if no_compare || dev.is_cpu() || loaded {
        None
    } else {
        Some(train(&Device::cpu(), &cfg, &mut |_, _| {})?)
    };
    let diff = cpu.as_ref().map(|c| {
        run.losses
            .iter()
            .zip(&c.losses)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max)
    });
    if let Some(path) = save {
        let named = run.model.named_parameters();
        let refs: Vec<(&str, &Tensor)> = named.iter().map(|(n, t)| (n.as_str(), t)).collect();
        nn::save(path, &refs).with_context(|| format!("saving {}", path.display()))?;
    }
    let mut answers = Vec::new();
    let mut decoder = Decoder::new(&run.model, &dev)?;
    for &(a, b) in &prompts {
        let t = Instant::now();
        let (value, text) = decoder.answer(a, b)?;
        answers.push((a, b, value, text, t.elapsed()));
    }
    let accuracy = run.test_correct as f64 / run.test_total.max(1) as f64;
    let seconds = start.elapsed().as_secs_f64();
    if json_out {
        let report = json!({
            "model": "gpt",
            "device": run.device,
            "target": dev.target().name(),
            "digits": cfg.digits,
            "dim": cfg.dim,
            "heads": cfg.heads,
            "layers": cfg.layers,
            "parameters": run.model.parameters().iter().map(Tensor::numel).sum::<usize>(),
            "batch": cfg.batch,
            "lr": cfg.lr,
            "steps": run.losses.len(),
            "seed": cfg.seed,
            "loaded": args.load.as_ref().map(|p| p.display().to_string()),
            "losses": run.losses,
            "train_exact": run.exact,
            "test_accuracy": accuracy,
            "test_correct": run.test_correct,
            "test_problems": run.test_total,
            "kernels_per_step": run.kernels_per_step,
            "step_us": run.step.as_secs_f64() * 1e6,
            "step_host_us": run.step_host.as_secs_f64() * 1e6,
            "train_seconds": run.seconds,
            "seconds": seconds,
            "answers": answers.iter().map(|(a, b, v, text, t)| json!({
                "prompt": format!("{a}+{b}"), "answer": v, "correct": *v == a + b,
                "tokens": text, "ms": t.as_secs_f64() * 1e3,
            })).collect::<Vec<_>>(),
            "decode_kernels_per_token": decoder.kernels(),
            "cpu": cpu.as_ref().map(|c| json!({
                "seconds": c.seconds,
                "step_us": c.step.as_secs_f64() * 1e6,
                "test_accuracy": c.test_correct as f64 / c.test_total.max(1) as f64,
                "loss_max_abs_diff": diff,
                "losses_agree": diff.is_some_and(|d| d <= LOSS_TOLERANCE),
            })),
            "saved": save.map(|p| p.display().to_string()),
        });
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    if !run.losses.is_empty() {
        let n = run.losses.len();
        let tail = (n / 2).clamp(1, 50);
        let mean = |v: &[f32]| v.iter().map(|&x| f64::from(x)).sum::<f64>() / v.len().max(1) as f64;
        let exact_tail: usize = run.exact[n - tail..].iter().sum();
        println!(
            "trained: loss {:.4} → {:.4} (mean of the first and last {tail} steps), last {tail} batches {:.1} % exact, {:.1} s",
            mean(&run.losses[..tail]),
            mean(&run.losses[n - tail..]),
            exact_tail as f64 / (tail * cfg.batch) as f64 * 100.0,
            run.seconds
        );
        println!(
            "kernels per step: {} (the captured step, replayed as one runtime graph); time per step {:.2} ms, of which {:.0} µs on the host outside GPU execution",
            run.kernels_per_step,
            run.step.as_secs_f64() * 1e3,
            run.step_host.as_secs_f64() * 1e6
        );
    }
    println!(
        "held-out problems answered exactly: {:.1} % ({}/{}){}",
        accuracy * 100.0,
        run.test_correct,
        run.test_total,
        if loaded { " (loaded weights)" } else { "" }
    );
    for (a, b, v, text, t) in &answers {
        println!(
            "{a}+{b}= {} (tokens \"{text}\", lowest digit first; {}; {:.1} ms)",
            if *v == u64::MAX {
                "?".to_string()
            } else {
                v.to_string()
            },
            if *v == a + b { "right" } else { "WRONG" },
            t.as_secs_f64() * 1e3
        );
    }
    if let Some(k) = decoder.kernels() {
        println!(
            "decoding: one replay of a captured {k}-kernel step per token, with a key-value cache"
        );
    }
    if let (Some(c), Some(d)) = (&cpu, diff) {
        println!(
            "cpu: the same run in {:.2} s ({:.2} ms per step, held-out {:.1} %): losses {} (max |Δ| {d:.1e} over {} steps)",
            c.seconds,
            c.step.as_secs_f64() * 1e3,
            c.test_correct as f64 / c.test_total.max(1) as f64 * 100.0,
            if d <= LOSS_TOLERANCE {
                "agree to 1e-3"
            } else {
                "DIFFER by more than 1e-3"
            },
            run.losses.len()
        );
    }
    if let Some(p) = save {
        println!(
            "saved: {} ({} tensors)",
            p.display(),
            run.model.named_parameters().len()
        );
    }
    println!("total {seconds:.1} s");
    if run.test_total == 0 {
        bail!("no held-out problems to score");
    }
    Ok(())
}

fn example(cfg: &GptConfig) -> String {
    let m = 10u64.pow(cfg.digits as u32);
    let (a, b) = (m / 10 * 7 % m, m - 1 - m / 3);
    encode(cfg, a, b)
        .iter()
        .map(|&d| match d {
            0..=9 => char::from(b'0' + d as u8),
            PLUS => '+',
            _ => '=',
        })
        .collect()
}
