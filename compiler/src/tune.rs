//! The seam where a device plugs in to time tuning choices.
//!
//! The compiler does not depend on a device to produce code. Choosing among variants of a
//! kernel (tile sizes, workgroup sizes) needs timings from a device: a [`KernelTimer`] gives
//! them — [`CpuTimer`] on the host through the CPU backend here, `am_tensor::tune::DeviceTimer`
//! on a runtime device (the layer that has devices) — and [`fastest`] picks by either. A
//! timer's measure is a [`Cost`]: time, or on an emulated device (the mock) the
//! wave-instructions a run executed, which is deterministic, so a search over it is
//! reproducible.

use std::time::{Duration, Instant};

use crate::ir::Kernel;
use crate::{Compiled, Compiler, CpuProgram, Error, Target};

/// What one run of a kernel cost. A timer gives one kind for every kernel; lower is better.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Cost {
    /// Wave-instructions an emulated device executed (deterministic).
    Instructions(u64),
    /// Device time (GPU timestamps) or wall time (the host).
    Time(Duration),
}

impl std::fmt::Display for Cost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Cost::Instructions(n) => write!(f, "{n} wave-instructions"),
            Cost::Time(t) => write!(f, "{:.1} µs", t.as_secs_f64() * 1e6),
        }
    }
}

/// Something that runs a compiled kernel and says what it cost.
pub trait KernelTimer {
    /// The target whose code it runs.
    fn target(&self) -> Target;
    /// Runs `program` over `groups` workgroups with argument bytes `args` and returns the
    /// cost of one run: executed wave-instructions where the device counts them, else its
    /// time.
    ///
    /// # Safety
    /// The pointers in `args` must be valid for everything the kernel accesses (as for a
    /// launch).
    unsafe fn time(&self, program: &Compiled, groups: [u32; 3], args: &[u8])
    -> Result<Cost, Error>;
}

/// Times kernels on the host through the CPU backend (wall clock, best of three).
pub struct CpuTimer;

impl KernelTimer for CpuTimer {
    fn target(&self) -> Target {
        Target::Cpu
    }
    // SAFETY: the trait's contract, which the launch below relies on.
    unsafe fn time(
        &self,
        program: &Compiled,
        groups: [u32; 3],
        args: &[u8],
    ) -> Result<Cost, Error> {
        let p = CpuProgram::load(&program.bytes)?;
        let mut best = Duration::MAX;
        for _ in 0..3 {
            let t = Instant::now();
            // SAFETY: forwarded from this function's contract.
            unsafe { p.launch(groups, args)? };
            best = best.min(t.elapsed());
        }
        Ok(Cost::Time(best))
    }
}

/// Compiles every candidate (a kernel, its grid and arguments) for `timer`'s target and
/// measures each: their costs, in order.
///
/// # Safety
/// As [`KernelTimer::time`], for every candidate's arguments.
pub unsafe fn measure(
    compiler: &Compiler,
    timer: &dyn KernelTimer,
    candidates: &[(Kernel, [u32; 3], Vec<u8>)],
) -> Result<Vec<Cost>, Error> {
    let mut costs = Vec::with_capacity(candidates.len());
    for (k, groups, args) in candidates {
        let c = compiler.compile(k, timer.target())?;
        // SAFETY: forwarded from this function's contract.
        costs.push(unsafe { timer.time(&c, *groups, args)? });
    }
    Ok(costs)
}

/// Compiles every candidate (a kernel, its grid and arguments) for `timer`'s target, measures
/// each, and returns the index of the cheapest (the first of equals) and its cost.
///
/// # Safety
/// As [`KernelTimer::time`], for every candidate's arguments.
pub unsafe fn fastest(
    compiler: &Compiler,
    timer: &dyn KernelTimer,
    candidates: &[(Kernel, [u32; 3], Vec<u8>)],
) -> Result<Option<(usize, Cost)>, Error> {
    // SAFETY: forwarded from this function's contract.
    let costs = unsafe { measure(compiler, timer, candidates)? };
    let mut best: Option<(usize, Cost)> = None;
    for (i, t) in costs.into_iter().enumerate() {
        if best.is_none_or(|(_, b)| t < b) {
            best = Some((i, t));
        }
    }
    Ok(best)
}
