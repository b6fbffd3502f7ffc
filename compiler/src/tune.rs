//! The seam where the runtime plugs in to time tuning choices on a device.
//!
//! The compiler does not depend on a device to produce code. Choosing among variants of a
//! kernel (tile sizes, workgroup sizes) needs timings from a device: [`DeviceTimer`] times
//! on a runtime device (GPU timestamps around the launch), [`CpuTimer`] on the host through
//! the CPU backend, and [`fastest`] picks by either.

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

/// Times kernels on a runtime device (`am-runtime`): the device's GPU timestamps around
/// each launch, the best of three after a first launch that loads and warms it.
pub struct DeviceTimer {
    dev: am_runtime::Device,
    target: Target,
}

impl DeviceTimer {
    /// A timer on `dev` (its target must be one the compiler generates code for).
    pub fn new(dev: &am_runtime::Device) -> Result<DeviceTimer, Error> {
        let target: Target = dev.info().target.parse()?;
        Ok(DeviceTimer {
            dev: dev.clone(),
            target,
        })
    }
}

impl KernelTimer for DeviceTimer {
    fn target(&self) -> Target {
        self.target
    }
    // SAFETY: the trait's contract (argument pointers valid for the kernel's accesses); the
    // GPU reaches them through the device's page tables, which the runtime built.
    unsafe fn time(
        &self,
        program: &Compiled,
        groups: [u32; 3],
        args: &[u8],
    ) -> Result<Duration, Error> {
        let device = |e: am_runtime::Error| Error::Device {
            kernel: program.kernel.clone(),
            reason: e.to_string(),
        };
        let p = self
            .dev
            .load(&program.bytes, &program.kernel)
            .map_err(device)?;
        let block = p.workgroup.unwrap_or([p.wave_size, 1, 1]);
        let was = self.dev.profiling();
        self.dev.set_profiling(true);
        let run = || -> Result<Duration, am_runtime::Error> {
            let mut c = am_runtime::ComputeCommands::new(&self.dev);
            c.exec_raw(&p, args, groups, block)?;
            let mut best = Duration::MAX;
            for _ in 0..4 {
                c.submit()?.wait()?;
                for e in self.dev.profile()? {
                    if e.kernel == program.kernel {
                        best = best.min(Duration::from_nanos(e.nanos()));
                    }
                }
            }
            Ok(best)
        };
        let r = run();
        self.dev.set_profiling(was);
        r.map_err(device)
    }
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
