//! `am demo gpt`: a small decoder-only transformer learns multi-digit addition written as
//! text (`"07+35=240"`: the operands zero-padded, the sum's digits from the lowest, so each
//! answer digit needs only the digits at its place and the carry from the one before) from
//! problems generated from the seed, on a device, with a captured training step; then it is
//! scored on held-out problems and answers prompts one token per replay of a captured
//! decoding step that keeps a key-value cache.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use am_tensor::nn::{
    self, AdamW, Embedding, LayerNorm, Linear, LrSchedule, MultiHeadAttention, Optimizer,
};
use am_tensor::{DType, Device, Jit, Tensor, no_grad};
use anyhow::{Context, bail};
use clap::Args;
use clap::builder::RangedU64ValueParser;
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::json;

use crate::digits::SplitMix;

/// Options of `am demo gpt` (the others — `--device`, `--batch`, `--lr`, `--seed`,
/// `--no-compare`, `--save`, `--json` — are the demo's; `mlp` and `cnn` refuse these).
#[derive(Args, Debug)]
pub struct GptArgs {
    /// gpt: digits of each operand, 1 to 4 (default 2).
    #[arg(long, value_parser = RangedU64ValueParser::<usize>::new().range(1..=4))]
    digits: Option<usize>,
    /// gpt: training steps, 1 to 100000 (default 600).
    #[arg(long, value_parser = RangedU64ValueParser::<usize>::new().range(1..=100_000))]
    steps: Option<usize>,
    /// gpt: a problem to answer after training, like `12+34` (repeatable).
    #[arg(long)]
    prompt: Vec<String>,
    /// gpt: weights to use instead of training (a file `--save` wrote).
    #[arg(long, value_name = "FILE")]
    load: Option<PathBuf>,
}

impl GptArgs {
    /// The first of these options given on the command line (for models that have no use
    /// for them).
    pub fn given(&self) -> Option<&'static str> {
        [
            self.digits.map(|_| "--digits"),
            self.steps.map(|_| "--steps"),
            self.prompt.first().map(|_| "--prompt"),
            self.load.as_ref().map(|_| "--load"),
        ]
        .into_iter()
        .flatten()
        .next()
    }
}

/// Steps of the default run.
const DEFAULT_STEPS: usize = 350;
/// Steps of the learning rate's linear warm-up (then a cosine down to [`LR_FLOOR`] of the
/// peak at the last step); a tenth of the run when that is shorter.
const WARMUP: u64 = 20;
/// The learning rate's share of its peak at the last step.
const LR_FLOOR: f64 = 0.1;
/// Adam's β₂: 0.95 rather than 0.999, so the second moment forgets the large gradients of
/// the first steps within a few tens of steps (as small transformers are usually trained).
const BETA2: f64 = 0.95;
/// Share of the first step's problems drawn from the easy family (see [`problems`]),
/// falling linearly to none at the last step.
const EASY: f64 = 0.5;
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
    /// Adam's peak learning rate.
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
            lr: 0.015,
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

/// `x` with each of its `digits` digits kept or made 0 by a coin.
fn sparse(x: u64, digits: usize, rng: &mut SplitMix) -> u64 {
    let (mut out, mut place, mut x) = (0, 1, x);
    for _ in 0..digits {
        let d = x % 10;
        x /= 10;
        if rng.next().is_multiple_of(2) {
            out += d * place;
        }
        place *= 10;
    }
    out
}

/// `count` problems drawn from the training share (or the held-out share); a share `easy`
/// of the draws has each operand digit made 0 by a coin first. Among uniform problems no
/// single operand digit says anything about an answer digit (`(a + b) mod 10` is uniform
/// for every `a`), so the model sits on a plateau for a few hundred steps before its
/// attention finds both digits of a place at once; where one of them is 0 the answer digit
/// is the other, which shows the attention where to look from the first steps. Held-out
/// problems are never drawn, easy or not.
pub(crate) fn problems(
    cfg: &GptConfig,
    rng: &mut SplitMix,
    count: usize,
    test: bool,
    easy: f64,
) -> Vec<(u64, u64)> {
    let m = 10u64.pow(cfg.digits as u32);
    let mut out = Vec::with_capacity(count);
    while out.len() < count {
        let mut p = rng.next() % (m * m);
        // No coin without easy problems: the draws stay those of a uniform run.
        if easy > 0.0 && ((rng.next() % 1000) as f64) < easy * 1000.0 {
            let (a, b) = (p / m, p % m);
            p = sparse(a, cfg.digits, rng) * m + sparse(b, cfg.digits, rng);
        }
        if held_out(p, cfg.seed) == test {
            out.push((p / m, p % m));
        }
    }
    out
}

/// The held-out problems scored: every one when there are at most [`HELD_OUT`], else
/// [`HELD_OUT`] of them (fixed by the seed).
pub(crate) fn held_out_set(cfg: &GptConfig) -> Vec<(u64, u64)> {
    let m = 10u64.pow(cfg.digits as u32);
    let all: Vec<(u64, u64)> = (0..m * m)
        .filter(|&p| held_out(p, cfg.seed))
        .map(|p| (p / m, p % m))
        .collect();
    if all.len() <= HELD_OUT {
        return all;
    }
    let mut rng = SplitMix(u64::from(cfg.seed) ^ 0x7e57);
    problems(cfg, &mut rng, HELD_OUT, true, 0.0)
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
    pub(crate) fn answer_logits(&self, tokens: &Tensor) -> am_tensor::Result<Tensor> {
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
    opt: &mut AdamW,
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
/// greedy decoding picks); the host counts them.
pub(crate) fn exact_answers(
    cfg: &GptConfig,
    logits: &Tensor,
    targets: &Tensor,
) -> am_tensor::Result<Tensor> {
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

/// The training batch of step `s` (of `cfg.steps`): tokens and answer digits.
pub fn training_batch(
    cfg: &GptConfig,
    rng: &mut SplitMix,
    s: usize,
    dev: &Device,
) -> am_tensor::Result<(Tensor, Tensor)> {
    batch_tensors(cfg, &training_problems(cfg, rng, s), dev)
}

/// The problems of step `s`'s training batch.
pub(crate) fn training_problems(cfg: &GptConfig, rng: &mut SplitMix, s: usize) -> Vec<(u64, u64)> {
    let easy = EASY * (1.0 - s as f64 / cfg.steps.max(1) as f64).max(0.0);
    problems(cfg, rng, cfg.batch, false, easy)
}

/// The generator of the training problems of a run with `cfg`'s seed.
pub fn training_rng(cfg: &GptConfig) -> SplitMix {
    SplitMix(u64::from(cfg.seed) ^ 0x00ad_d000)
}

/// Tokens and answer digits of a batch of problems.
pub(crate) fn batch_tensors(
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

/// Steps of the warm-up of a run of `steps`.
fn warmup(steps: usize) -> u64 {
    WARMUP.min(steps as u64 / 10)
}

/// Adam without weight decay (AdamW's decay 0), β = (0.9, [`BETA2`]), the learning rate
/// warmed up for [`WARMUP`] steps then decayed by a cosine to [`LR_FLOOR`] of its peak at
/// the last step.
pub fn optimizer(model: &Gpt, cfg: &GptConfig) -> am_tensor::Result<AdamW> {
    Ok(AdamW::new(model.parameters(), cfg.lr, 0.0)?
        .with_betas((0.9, BETA2), 1e-8)
        .with_schedule(LrSchedule::WarmupCosine {
            warmup: warmup(cfg.steps),
            total: cfg.steps as u64,
            min_ratio: LR_FLOOR,
        }))
}

/// Trains a fresh model on `dev`; `progress` hears each step's number and loss.
pub fn train(
    dev: &Device,
    cfg: &GptConfig,
    progress: &mut dyn FnMut(usize, f32),
) -> am_tensor::Result<GptRun> {
    let start = Instant::now();
    let model = Gpt::new(cfg, dev)?;
    let mut opt = optimizer(&model, cfg)?;
    let mut jit = Jit::new(dev);
    let mut rng = training_rng(cfg);
    let (mut losses, mut exact) = (Vec::new(), Vec::new());
    let (mut walls, mut hosts) = (Vec::new(), Vec::new());
    for s in 0..cfg.steps {
        let (toks, tgts) = training_batch(cfg, &mut rng, s, dev)?;
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

/// The largest difference of a step's loss, over the first [`COMPARED_STEPS`], between the
/// device's and the CPU's runs under which they agree.
pub const LOSS_TOLERANCE: f32 = 1e-3;

/// Steps whose losses the comparison holds to [`LOSS_TOLERANCE`]. The two runs' kernels
/// round differently in the last bits (the GPU's exp2, log2 and reciprocal, its grouped
/// sums' order), and training amplifies any such difference step by step, as it amplifies
/// a change of the learning rate in its seventh digit on one device (docs/am-demo.md):
/// after a few hundred steps the runs are two different trainings of the same recipe. So
/// the losses are compared while that growth is still far below the tolerance, and the end
/// by its held-out accuracy ([`ACCURACY_TOLERANCE`]).
pub const COMPARED_STEPS: usize = 20;

/// The largest difference of held-out accuracy (a share) between the two runs under which
/// they agree.
pub const ACCURACY_TOLERANCE: f64 = 0.01;

/// How the CPU's run compares with the device's.
struct Comparison {
    /// The largest difference of a step's loss over the first [`COMPARED_STEPS`].
    first: f32,
    /// The same over every step.
    all: f32,
    /// The difference of held-out accuracy.
    accuracy: f64,
}

impl Comparison {
    fn of(run: &GptRun, cpu: &GptRun) -> Comparison {
        let diffs: Vec<f32> = run
            .losses
            .iter()
            .zip(&cpu.losses)
            .map(|(a, b)| (a - b).abs())
            .collect();
        let max = |v: &[f32]| v.iter().copied().fold(0.0f32, f32::max);
        Comparison {
            first: max(&diffs[..diffs.len().min(COMPARED_STEPS)]),
            all: max(&diffs),
            accuracy: (accuracy(run) - accuracy(cpu)).abs(),
        }
    }

    fn losses_agree(&self) -> bool {
        self.first <= LOSS_TOLERANCE
    }

    fn agree(&self) -> bool {
        self.losses_agree() && self.accuracy <= ACCURACY_TOLERANCE
    }
}

/// Held-out problems answered exactly, as a share.
fn accuracy(run: &GptRun) -> f64 {
    run.test_correct as f64 / run.test_total.max(1) as f64
}

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
    /// `--batch`: problems per step.
    pub batch: Option<usize>,
    /// `--lr`.
    pub lr: Option<f64>,
}

/// `am demo gpt`.
pub fn run(shared: &Shared<'_>, args: &GptArgs) -> anyhow::Result<()> {
    let Shared {
        device,
        seed,
        no_compare,
        save,
        json: json_out,
        batch,
        lr,
    } = *shared;
    let mut cfg = GptConfig::new(
        args.digits.unwrap_or(2),
        args.steps.unwrap_or(DEFAULT_STEPS),
        seed,
    );
    cfg.batch = batch.unwrap_or(cfg.batch);
    cfg.lr = lr.unwrap_or(cfg.lr);
    let prompts: Vec<(u64, u64)> = args
        .prompt
        .iter()
        .map(|p| parse_prompt(p, cfg.digits))
        .collect::<anyhow::Result<_>>()?;
    let list = crate::device::device_list(device);
    if list.len() > 1 {
        let one_device = [
            args.load.as_ref().map(|_| "--load"),
            save.map(|_| "--save"),
            args.prompt.first().map(|_| "--prompt"),
        ];
        if let Some(flag) = one_device.into_iter().flatten().next() {
            bail!(
                "{flag} is for one device; a data-parallel run ({device}) trains and scores only"
            );
        }
        return crate::demo_parallel::run_gpt(&list, &cfg, no_compare, json_out);
    }
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
                    "Adam lr {} (warm-up {} steps, cosine to {LR_FLOOR}×), β₂ {BETA2}, batch {}, {} steps ({:.0} % easy problems at first)",
                    cfg.lr,
                    warmup(cfg.steps),
                    cfg.batch,
                    cfg.steps,
                    EASY * 100.0
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
    let cmp = cpu.as_ref().map(|c| Comparison::of(&run, c));
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
            "lr_schedule": {"warmup": warmup(cfg.steps), "cosine_to": LR_FLOOR},
            "beta2": BETA2,
            "easy_share": EASY,
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
            "cpu": cpu.as_ref().zip(cmp.as_ref()).map(|(c, m)| json!({
                "seconds": c.seconds,
                "step_us": c.step.as_secs_f64() * 1e6,
                "test_accuracy": c.test_correct as f64 / c.test_total.max(1) as f64,
                "losses": c.losses,
                "compared_steps": c.losses.len().min(COMPARED_STEPS),
                "loss_max_abs_diff": m.first,
                "loss_max_abs_diff_all_steps": m.all,
                "losses_agree": m.losses_agree(),
                "test_accuracy_diff": m.accuracy,
                "agree": m.agree(),
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
    if let (Some(c), Some(m)) = (&cpu, &cmp) {
        println!(
            "cpu: the same run in {:.2} s ({:.2} ms per step, held-out {:.1} %): {} (the first {} steps' losses within 1e-3: max |Δ| {:.1e}; held-out accuracy within 1 point: Δ {:.1}; over all {} steps max |Δ| {:.1e}, rounding that training amplifies)",
            c.seconds,
            c.step.as_secs_f64() * 1e3,
            c.test_correct as f64 / c.test_total.max(1) as f64 * 100.0,
            if m.agree() { "agree" } else { "DIFFER" },
            c.losses.len().min(COMPARED_STEPS),
            m.first,
            m.accuracy * 100.0,
            run.losses.len(),
            m.all
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Easy problems come from the training share only, and about half of their operand
    /// digits are 0 (a tenth of uniform problems' are).
    #[test]
    fn easy_problems_are_training_problems_with_digits_made_zero() {
        let cfg = GptConfig::new(2, 10, 3);
        let mut rng = training_rng(&cfg);
        let easy = problems(&cfg, &mut rng, 2000, false, 1.0);
        let m = 10u64.pow(cfg.digits as u32);
        assert!(easy.iter().all(|&(a, b)| !held_out(a * m + b, cfg.seed)));
        let zeros = |v: &[(u64, u64)]| {
            v.iter()
                .flat_map(|&(a, b)| [a % 10, a / 10, b % 10, b / 10])
                .filter(|&d| d == 0)
                .count() as f64
                / (4 * v.len()) as f64
        };
        let z = zeros(&easy);
        assert!((0.5..0.6).contains(&z), "share of zero digits {z}");
        let uniform = problems(&cfg, &mut rng, 2000, false, 0.0);
        let u = zeros(&uniform);
        assert!((0.07..0.13).contains(&u), "share of zero digits {u}");
    }
}
