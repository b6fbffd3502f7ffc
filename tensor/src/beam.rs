//! The opt-in kernel search, `AM_BEAM=N` (tinygrad's `BEAM`): for each kernel the scheduler
//! plans, candidates around the heuristics' choice ([`opt::neighbours`]) are generated,
//! compiled, run on the device and measured, and the cheapest is kept.
//!
//! - **Measure**: the device's [`KernelTimer`] — on the mock the wave-instructions the
//!   emulator executed for the launch (deterministic, so the search is reproducible), on
//!   hardware its GPU timestamps, on the `cpu` device wall time ([`am_compiler::tune`]).
//! - **Beam**: the heuristics' choice starts the beam; each round measures the unmeasured
//!   neighbours of every member (at most [`PER_ROUND`]) and keeps the `N` cheapest; the
//!   search stops after [`ROUNDS`] rounds or a round that found nothing cheaper. Ties keep
//!   the earlier candidate, the heuristics' first.
//! - **Inputs**: scratch buffers of the parameters' sizes, never the tensors': inputs filled
//!   with fixed pseudo-random values of their dtype. The heuristics' kernel runs first; a
//!   candidate whose outputs differ from its outputs is dropped (bit for bit, except where
//!   either groups a reduction, which then adds in another order: within a relative 10⁻³ of
//!   the largest magnitude).
//! - **Cache**: the winner's choices are a record of the compiler's cache
//!   ([`am_compiler::Cache::record`]) under the heuristics' kernel text, the target and `N`
//!   (and the compiler's version and a hash of this crate's sources, made by `build.rs`): a
//!   later process realizing the same kernel with the same
//!   `N` regenerates the winner from the record and its program comes from the compile
//!   cache, without measuring anything.

use std::collections::HashMap;
use std::time::Instant;

use am_compiler::tune::{Cost, CpuTimer, KernelTimer};
use am_compiler::{Cache, Kernel};

use crate::codegen::{ParamSrc, Plan};
use crate::device::{Buffer, Device, Storage};
use crate::opt::{self, Opts};
use crate::{DType, Error, Result};

/// The environment variable.
pub(crate) const ENV: &str = "AM_BEAM";

/// Rounds of the search at most.
pub(crate) const ROUNDS: usize = 3;

/// Candidates measured per round at most.
pub(crate) const PER_ROUND: usize = 16;

/// The width `AM_BEAM` asks for: 0 (no search) when unset, empty or `0`; a bad value is an
/// error naming the variable.
pub(crate) fn parse(value: Option<&str>) -> Result<u32> {
    let Some(v) = value.map(str::trim).filter(|v| !v.is_empty()) else {
        return Ok(0);
    };
    v.parse::<u32>().map_err(|_| Error::Env {
        var: ENV,
        value: v.to_string(),
        reason: "the width of the kernel search is a whole number (0: no search)".into(),
    })
}

/// `AM_BEAM` of the environment, as [`parse`] reads it (a value that is not text is bad).
pub(crate) fn from_env() -> Result<u32> {
    match std::env::var(ENV) {
        Ok(v) => parse(Some(&v)),
        Err(std::env::VarError::NotPresent) => Ok(0),
        Err(std::env::VarError::NotUnicode(v)) => Err(Error::Env {
            var: ENV,
            value: v.to_string_lossy().into_owned(),
            reason: "not text".into(),
        }),
    }
}

/// The key of the search's record for a kernel whose heuristics' kernel is `k`.
fn record_key(dev: &Device, k: &Kernel, width: u32) -> [u8; 32] {
    let text = am_compiler::text::print_canonical(k);
    Cache::record_key(
        "beam",
        &[
            dev.target().name().as_bytes(),
            &width.to_le_bytes(),
            env!("AM_TENSOR_SOURCE").as_bytes(),
            text.as_bytes(),
        ],
    )
}

/// What a parameter is: its bytes and element type (`None` for a seed).
pub(crate) type ParamInfo<'a> = dyn Fn(&ParamSrc) -> Option<(usize, DType)> + 'a;

/// The plan to use instead of `heuristic` (the heuristics' plan of a kernel), searched with
/// beam width `width` or found in the compiler's cache. `regen` makes the plan of other
/// choices (`None` where the code generator refuses them); `param` says what a parameter
/// is. Errors of the device are returned; a candidate that fails to generate, compile or
/// run, or computes other outputs, is skipped.
pub(crate) fn search(
    dev: &Device,
    heuristic: Plan,
    width: u32,
    regen: &dyn Fn(&Opts) -> Option<Plan>,
    param: &ParamInfo<'_>,
) -> Result<Plan> {
    let key = record_key(dev, &heuristic.kernel, width);
    let cache = dev.0.compiler.cache();
    if let Some(rec) = cache.record(&key)
        && let Some(o) = std::str::from_utf8(&rec)
            .ok()
            .and_then(|t| t.lines().next())
            .and_then(Opts::parse)
    {
        if o == heuristic.opts {
            dev.count_search(false, 0, std::time::Duration::ZERO);
            return Ok(heuristic);
        }
        if let Some(p) = regen(&o) {
            dev.count_search(false, 0, std::time::Duration::ZERO);
            return Ok(p);
        }
    }
    let t0 = Instant::now();
    let mut bench = Bench::new(dev, param)?;
    let Some(base) = bench.reference(&heuristic)? else {
        // The heuristics' own kernel cannot be measured here: nothing to compare with.
        return Ok(heuristic);
    };
    let mut measured = 1usize;
    let space = heuristic.space.clone();
    let info = am_compiler::shapes::DeviceInfo {
        target: dev.target(),
        compute_units: dev.compute_units(),
    };
    // Every candidate measured: (cost, order measured, plan).
    let mut pool: Vec<(Cost, usize, Plan)> = vec![(base, 0, heuristic)];
    let mut tried: Vec<Opts> = vec![pool[0].2.opts.clone()];
    let mut beam: Vec<usize> = vec![0];
    for _ in 0..ROUNDS {
        let best = pool.iter().map(|p| p.0).min().unwrap_or(base);
        let mut fresh: Vec<Opts> = Vec::new();
        for &b in &beam {
            for o in opt::neighbours(&info, &space.shape(), &pool[b].2.opts) {
                if fresh.len() < PER_ROUND && !tried.contains(&o) {
                    tried.push(o.clone());
                    fresh.push(o);
                }
            }
        }
        if fresh.is_empty() {
            break;
        }
        for o in fresh {
            let Some(plan) = regen(&o) else { continue };
            // The generator may settle on choices already measured (a factor it ignores).
            if pool.iter().any(|p| p.2.opts == plan.opts) {
                continue;
            }
            measured += 1;
            if let Some(c) = bench.candidate(&plan)? {
                pool.push((c, pool.len(), plan));
            }
        }
        let mut order: Vec<usize> = (0..pool.len()).collect();
        order.sort_by_key(|&i| (pool[i].0, pool[i].1));
        beam = order.into_iter().take(width.max(1) as usize).collect();
        if pool[beam[0]].0 >= best {
            break;
        }
    }
    let win = pool
        .iter()
        .enumerate()
        .min_by_key(|(_, p)| (p.0, p.1))
        .map_or(0, |(i, _)| i);
    let (cost, _, plan) = pool.swap_remove(win);
    let rec = format!(
        "{}\n{} {cost}; the heuristics' {base}; {measured} candidates measured\n",
        plan.opts.text(),
        plan.kernel.name
    );
    if let Err(e) = cache.put_record(&key, rec.as_bytes()) {
        note(dev, &format!("{e}"));
    }
    if dev.debug() >= 1 {
        eprintln!(
            "{:<12} beam {width}: {} {} ({cost}; the heuristics' {base}; {measured} measured in {:.2} s)",
            dev.name(),
            plan.kernel.name,
            plan.opts.text(),
            t0.elapsed().as_secs_f64()
        );
    }
    dev.count_search(true, measured as u64, t0.elapsed());
    Ok(plan)
}

/// Scratch memory and the reference outputs a search measures candidates with.
struct Bench<'a> {
    dev: &'a Device,
    param: &'a ParamInfo<'a>,
    timer: Box<dyn KernelTimer>,
    /// Scratch buffers by parameter.
    bufs: HashMap<ParamSrc, (Buffer, DType)>,
    /// The heuristics' outputs, by output.
    reference: HashMap<usize, Vec<u8>>,
    /// Whether the heuristics' kernel groups a reduction.
    grouped: bool,
}

/// A fixed pseudo-random sequence (a 64-bit LCG's top bits).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

impl<'a> Bench<'a> {
    fn new(dev: &'a Device, param: &'a ParamInfo<'a>) -> Result<Bench<'a>> {
        let timer: Box<dyn KernelTimer> = match dev.runtime() {
            Some(rt) => Box::new(crate::tune::DeviceTimer::new(rt)),
            None => Box::new(CpuTimer),
        };
        Ok(Bench {
            dev,
            param,
            timer,
            bufs: HashMap::new(),
            reference: HashMap::new(),
            grouped: false,
        })
    }

    /// The scratch buffer of `p`: inputs hold values of their dtype in [-1, 1) (integers
    /// in 0..4, truth values either), outputs whatever the last candidate left.
    fn buffer(&mut self, p: &ParamSrc) -> Result<Option<Buffer>> {
        if let Some((b, _)) = self.bufs.get(p) {
            return Ok(Some(b.clone()));
        }
        let Some((bytes, dtype)) = (self.param)(p) else {
            return Ok(None);
        };
        let b = self.dev.alloc(bytes.max(1))?;
        if let ParamSrc::Input(j) = p {
            let mut rng = Lcg(0x5eed ^ (*j as u64).wrapping_mul(0x9e37_79b9));
            let n = bytes / dtype.size();
            let mut data = Vec::with_capacity(bytes);
            for _ in 0..n {
                let x = match dtype {
                    DType::Bool => (rng.next() < 0.5) as u8 as f64,
                    DType::I32 => (rng.next() * 4.0).floor(),
                    _ => rng.next() * 2.0 - 1.0,
                };
                let bits = dtype.const_bits(x).to_le_bytes();
                data.extend_from_slice(&bits[..dtype.size()]);
            }
            self.dev.write(&b, &data)?;
        }
        self.bufs.insert(p.clone(), (b.clone(), dtype));
        Ok(Some(b))
    }

    /// Runs `plan`'s kernel on the scratch memory: its cost, or `None` when it does not
    /// compile or run (logged).
    fn run(&mut self, plan: &Plan) -> Result<Option<Cost>> {
        let k = &plan.kernel;
        let mut bufs: Vec<Option<Buffer>> = Vec::with_capacity(plan.params.len());
        for p in &plan.params {
            bufs.push(self.buffer(p)?);
        }
        let compiled = match self.dev.0.compiler.compile(k, self.dev.target()) {
            Ok(c) => c,
            Err(e) => {
                note(self.dev, &format!("{} ({}): {e}", k.name, plan.opts.text()));
                return Ok(None);
            }
        };
        // Host memory is locked for the run; the kernel gets pointers into it.
        let mut guards = Vec::new();
        let mut locked: HashMap<&ParamSrc, u64> = HashMap::new();
        let mut ptrs: Vec<u64> = Vec::with_capacity(bufs.len());
        for (b, p) in bufs.iter().zip(&plan.params) {
            ptrs.push(match (b, p) {
                (Some(b), _) => match b.storage() {
                    Storage::Am(m) => m.va(),
                    Storage::Host(_) if locked.contains_key(p) => locked[p],
                    Storage::Host(m) => {
                        let mut g = am_isa::sync::lock(m);
                        let ptr = g.as_mut_ptr() as usize as u64;
                        guards.push(g);
                        locked.insert(p, ptr);
                        ptr
                    }
                },
                (None, ParamSrc::Seed(s)) => u64::from(*s),
                (None, _) => 0,
            });
        }
        let layout = k.arg_layout();
        let mut args = vec![0u8; k.args_size() as usize + 16];
        for (v, &(off, size)) in ptrs.iter().zip(&layout) {
            let off = off as usize;
            args[off..off + size as usize].copy_from_slice(&v.to_le_bytes()[..size as usize]);
        }
        // SAFETY: every pointer argument is the address of a scratch buffer allocated above
        // for the parameter's whole size (GPU memory through the device's page tables, host
        // memory locked until the run ends), and the generator makes kernels that access
        // only elements inside their parameters' shapes.
        let r = unsafe { self.timer.time(&compiled, [plan.groups, 1, 1], &args) };
        drop(guards);
        match r {
            Ok(c) => Ok(Some(c)),
            Err(e) => {
                note(self.dev, &format!("{} ({}): {e}", k.name, plan.opts.text()));
                Ok(None)
            }
        }
    }

    /// The outputs of the last run, by output.
    fn outputs(&self, plan: &Plan) -> Result<HashMap<usize, Vec<u8>>> {
        let mut out = HashMap::new();
        for p in &plan.params {
            if let ParamSrc::Output(o) = p
                && let (Some((b, _)), Some((bytes, _))) = (self.bufs.get(p), (self.param)(p))
            {
                let mut v = vec![0u8; bytes];
                self.dev.read(b, &mut v)?;
                out.insert(*o, v);
            }
        }
        Ok(out)
    }

    /// Runs the heuristics' kernel and keeps its outputs: its cost.
    fn reference(&mut self, plan: &Plan) -> Result<Option<Cost>> {
        let c = self.run(plan)?;
        if c.is_some() {
            self.reference = self.outputs(plan)?;
            self.grouped = plan.opts.group.is_some();
        }
        Ok(c)
    }

    /// Runs a candidate: its cost, or `None` when it fails or its outputs differ from the
    /// heuristics' kernel's.
    fn candidate(&mut self, plan: &Plan) -> Result<Option<Cost>> {
        let Some(c) = self.run(plan)? else {
            return Ok(None);
        };
        let got = self.outputs(plan)?;
        for (o, want) in &self.reference {
            let Some(g) = got.get(o) else {
                return Ok(None);
            };
            let dtype = self
                .bufs
                .get(&ParamSrc::Output(*o))
                .map_or(DType::F32, |b| b.1);
            let reordered = self.grouped || plan.opts.group.is_some();
            if !same(g, want, dtype, reordered) {
                note(
                    self.dev,
                    &format!(
                        "{} ({}) computes other outputs; dropped",
                        plan.kernel.name,
                        plan.opts.text()
                    ),
                );
                return Ok(None);
            }
        }
        Ok(Some(c))
    }
}

/// A candidate skipped or a record not kept: said at `AM_DEBUG=1` and above (the search
/// goes on without it).
fn note(dev: &Device, what: &str) {
    if dev.debug() >= 1 {
        eprintln!("{:<12} kernel search: {what}", dev.name());
    }
}

/// Whether `got` is `want`: bit for bit, or (`reordered`, a float sum in another order)
/// within 10⁻³ of the largest magnitude.
fn same(got: &[u8], want: &[u8], dtype: DType, reordered: bool) -> bool {
    if got == want {
        return true;
    }
    if !reordered || !dtype.is_float() || got.len() != want.len() {
        return false;
    }
    let n = want.len() / dtype.size();
    let big = (0..n)
        .map(|i| dtype.read_f64(want, i).abs())
        .fold(0.0f64, f64::max);
    (0..n).all(|i| {
        let (g, w) = (dtype.read_f64(got, i), dtype.read_f64(want, i));
        (g - w).abs() <= 1e-3 * big.max(1e-30) || (g.is_nan() && w.is_nan())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_width_is_an_error_naming_the_variable() {
        assert_eq!(parse(None).unwrap(), 0);
        assert_eq!(parse(Some("")).unwrap(), 0);
        assert_eq!(parse(Some("0")).unwrap(), 0);
        assert_eq!(parse(Some(" 4 ")).unwrap(), 4);
        for bad in ["x", "-1", "2.5", "4k"] {
            let e = parse(Some(bad)).unwrap_err().to_string();
            assert!(e.contains("AM_BEAM") && e.contains(bad), "{e}");
        }
    }

    #[test]
    fn choices_survive_their_text() {
        for o in [
            Opts {
                upcast: vec![(1, 8), (0, 8)],
                unroll: 4,
                unroll_full: 16,
                group: None,
                mma: None,
            },
            Opts {
                upcast: vec![],
                unroll: 1,
                unroll_full: 0,
                group: Some(128),
                mma: Some(crate::opt::Mma {
                    tiles: (4, 1),
                    side: 32,
                }),
            },
        ] {
            assert_eq!(Opts::parse(&o.text()), Some(o.clone()), "{}", o.text());
        }
        assert_eq!(Opts::parse("up=- unroll=4"), None);
        assert_eq!(Opts::parse("up=x unroll=4 full=0 group=- mma=-"), None);
    }
}
