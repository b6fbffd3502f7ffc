//! Opening a device from its spec: a PCI BDF (sysfs, or VFIO when `VFIO=1`),
//! `mock:PROFILE[:N]`, or `remote:HOST:PORT[:N]`.

use std::sync::Arc;

use am_driver::PciDevice;
use am_driver::pci::remote::{RemoteOptions, RemotePciDevice};
use am_driver::pci::{DeviceSpec, open_pci};

/// Open the device a spec names, with the backend the spec selects.
pub fn open_device(spec: &str) -> anyhow::Result<Arc<dyn PciDevice>> {
    Ok(match DeviceSpec::parse(spec)? {
        DeviceSpec::Pci(bdf) => open_pci(bdf)?,
        DeviceSpec::Remote { host, port, index } => Arc::new(RemotePciDevice::connect(
            &host,
            port,
            index,
            &RemoteOptions::default(),
        )?),
        DeviceSpec::Mock { profile, index } => am_mock::open(&profile, index)?,
    })
}
