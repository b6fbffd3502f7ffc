//! Opening a device from its spec: `mock:PROFILE[:N]`, a PCI BDF, or `remote:HOST:PORT[:N]`.

use std::sync::Arc;

use am_driver::PciDevice;
use am_driver::pci::remote::RemotePciDevice;
use anyhow::{Context, bail};

/// Open the device a spec names, with the backend the spec selects.
pub fn open_device(spec: &str) -> anyhow::Result<Arc<dyn PciDevice>> {
    if spec.starts_with("remote:") {
        let dev = RemotePciDevice::open(spec).with_context(|| format!("opening {spec}"))?;
        return Ok(Arc::new(dev));
    }
    if spec.starts_with("mock:") {
        bail!("{spec}: the mock backend is not wired into this build yet");
    }
    bail!("{spec}: PCI (sysfs/VFIO) devices are not wired into this build yet")
}
