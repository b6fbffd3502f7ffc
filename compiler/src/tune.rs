//! The seam where a device plugs in to time tuning choices.
//!
//! The compiler does not depend on a device to produce code. Choosing among variants of a
//! kernel (tile sizes, workgroup sizes) needs timings from a device: a [`KernelTimer`] gives
//! them — [`CpuTimer`] on the host through the CPU backend here, `am_tensor::tune::DeviceTimer`
//! on a runtime device (the layer that has devices) — and [`fastest`] picks by either.

use std::time::{Duration, Instant};

use crate::ir::Kernel;
use crate::{Compiled, Compiler, CpuProgram, Error, Target};

/// Something that runs a compiled kernel and says how long it took.
pub trait KernelTimer {
    /// The target whose code it runs.
    fn target(&self) -> Target;
    /// Runs `program` over `groups` workgroups with argument bytes `args` and returns the
    /// device time of one run.
    ///
    /// # Safety
    /// The pointers in `args` must be valid for everything the kernel accesses (as for a
    /// launch).
    unsafe fn time(
        &self,
        program: &Compiled,
        groups: [u32; 3],
        args: &[u8],
    ) -> Result<Duration, Error>;
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
    ) -> Result<Duration, Error> {
        let p = CpuProgram::load(&program.bytes)?;
        let mut best = Duration::MAX;
        for _ in 0..3 {
            let t = Instant::now();
            // SAFETY: forwarded from this function's contract.
            unsafe { p.launch(groups, args)? };
            best = best.min(t.elapsed());
        }
        Ok(best)
    }
}

/// Compiles every candidate (a kernel, its grid and arguments) for `timer`'s target, times
/// each, and returns the index of the fastest and its time.
///
/// # Safety
/// As [`KernelTimer::time`], for every candidate's arguments.
pub unsafe fn fastest(
    compiler: &Compiler,
    timer: &dyn KernelTimer,
    candidates: &[(Kernel, [u32; 3], Vec<u8>)],
) -> Result<Option<(usize, Duration)>, Error> {
    let mut best: Option<(usize, Duration)> = None;
    for (i, (k, groups, args)) in candidates.iter().enumerate() {
        let c = compiler.compile(k, timer.target())?;
        // SAFETY: forwarded from this function's contract.
        let t = unsafe { timer.time(&c, *groups, args)? };
        if best.is_none_or(|(_, b)| t < b) {
            best = Some((i, t));
        }
    }
    Ok(best)
}
