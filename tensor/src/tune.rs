//! Timing kernels on a runtime device, for the compiler's tuning ([`am_compiler::tune`]) and
//! the tensor layer's kernel search (`AM_BEAM`): the compiler produces code without a device,
//! and this layer has the devices.

use std::time::Duration;

use am_compiler::tune::{Cost, KernelTimer};
use am_compiler::{Compiled, Error, Target};

/// Measures kernels on a runtime device. Where the device counts what its shaders execute
/// (the mock's emulator, [`am_runtime::Device::executed`]), one launch and its executed
/// wave-instructions: deterministic, so a search over them is reproducible. Elsewhere the
/// device's GPU timestamps around each launch, the best of three after a first launch that
/// loads and warms it.
pub struct DeviceTimer {
    dev: am_runtime::Device,
}

impl DeviceTimer {
    /// A timer on `dev`.
    pub fn new(dev: &am_runtime::Device) -> DeviceTimer {
        DeviceTimer { dev: dev.clone() }
    }
}

impl KernelTimer for DeviceTimer {
    fn target(&self) -> Target {
        Target::Gpu(self.dev.info().target)
    }
    // SAFETY: the trait's contract (argument pointers valid for the kernel's accesses); the
    // GPU reaches them through the device's page tables, which the runtime built.
    unsafe fn time(
        &self,
        program: &Compiled,
        groups: [u32; 3],
        args: &[u8],
    ) -> Result<Cost, Error> {
        let device = |e: am_runtime::Error| Error::Device {
            kernel: program.kernel.clone(),
            reason: e.to_string(),
        };
        let p = self
            .dev
            .load(&program.bytes, &program.kernel)
            .map_err(device)?;
        let block = p.workgroup.unwrap_or([p.wave_size, 1, 1]);
        if let Some(before) = self.dev.executed(&p).map_err(device)? {
            let mut c = am_runtime::ComputeCommands::new(&self.dev);
            c.exec_raw(&p, args, groups, block).map_err(device)?;
            c.submit().and_then(|f| f.wait()).map_err(device)?;
            let after = self.dev.executed(&p).map_err(device)?.unwrap_or_default();
            if after.dispatches <= before.dispatches {
                return Err(Error::Device {
                    kernel: program.kernel.clone(),
                    reason: format!(
                        "{}: the launch finished but the device counted no dispatch of it",
                        self.dev.name()
                    ),
                });
            }
            return Ok(Cost::Instructions(
                after.wave_instructions - before.wave_instructions,
            ));
        }
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
        r.map(Cost::Time).map_err(device)
    }
}
