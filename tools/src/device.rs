//! Opening a device from its spec: a PCI BDF (sysfs, or VFIO when `VFIO=1`),
//! `mock:PROFILE[:N]`, or `remote:HOST:PORT[:N]`.

use std::sync::Arc;

use am_driver::PciDevice;

/// Open the device a spec names, with the backend the spec selects (the mock backend is
/// registered first, so `mock:` specs open too).
pub fn open_device(spec: &str) -> anyhow::Result<Arc<dyn PciDevice>> {
    am_mock::register();
    match am_driver::pci::open_spec(spec) {
        Ok(d) => Ok(d),
        Err(
            e @ am_driver::Error {
                kind: am_driver::ErrorKind::NoDevice { .. },
                ..
            },
        ) => {
            anyhow::bail!("{e}; `am list` shows the AMD GPUs on this machine")
        }
        Err(e) => Err(e.into()),
    }
}
