//! Opening a device from its spec: a PCI BDF (sysfs, or VFIO when `VFIO=1`),
//! `mock:PROFILE[:N]`, or `remote:HOST:PORT[:N]` — recorded to an access trace when
//! `AM_TRACE=FILE` is set (docs/TRACE.md).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use am_driver::PciDevice;
use am_driver::pci::DeviceSpec;
use am_driver::trace::{Header, TracingDevice};

/// Open the device a spec names, with the backend the spec selects (the mock backend is
/// registered first, so `mock:` specs open too); traced to `$AM_TRACE` when it is set.
pub fn open_device(spec: &str) -> anyhow::Result<Arc<dyn PciDevice>> {
    let trace = std::env::var_os("AM_TRACE").filter(|v| !v.is_empty());
    Ok(match trace {
        Some(path) => open_traced(spec, Path::new(&path))? as Arc<dyn PciDevice>,
        None => open_untraced(spec)?,
    })
}

/// Open a device without recording it.
pub fn open_untraced(spec: &str) -> anyhow::Result<Arc<dyn PciDevice>> {
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

/// Open a device and record everything done to it in a trace at `path` (the second device
/// a command opens goes to `path.1`, the third to `path.2`, …: one device per file).
pub fn open_traced(spec: &str, path: &Path) -> anyhow::Result<Arc<TracingDevice>> {
    static OPENED: AtomicU32 = AtomicU32::new(0);
    let inner = open_untraced(spec)?;
    let n = OPENED.fetch_add(1, Ordering::Relaxed);
    let path = match n {
        0 => path.to_path_buf(),
        n => PathBuf::from(format!("{}.{n}", path.display())),
    };
    let profile = match DeviceSpec::parse(spec) {
        Ok(DeviceSpec::Mock { profile, .. }) => profile,
        _ => String::new(),
    };
    let header = Header {
        device: inner.name().to_string(),
        backend: inner.backend().to_string(),
        profile,
        command: std::env::args().collect::<Vec<_>>().join(" "),
    };
    // The discovery table names the registers of the trace. It is read here, before the
    // run and unrecorded, so that a trace of a client that never reads it (or reads it
    // in pieces) still shows names; a device whose registers are gated has none to give.
    let discovery = am_driver::Discovery::read(&*inner);
    let traced = TracingDevice::create(inner, &path, &header)?;
    match discovery {
        Ok(d) => traced.event(am_driver::trace::TraceEvent::Discovery(&d)),
        Err(e) => tracing::debug!("{path:?}: no discovery table for register names: {e}"),
    }
    Ok(Arc::new(traced))
}

/// The device specs a `--device` list names: comma-separated specs, where a hive profile
/// without an index (`mock:mi300x-hive4`) stands for every member of its first hive
/// (`mock:mi300x-hive4:0` to `:3`).
pub fn device_list(spec: &str) -> Vec<String> {
    let mut out = Vec::new();
    for s in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let members = s
            .strip_prefix("mock:")
            .filter(|p| !p.contains(':'))
            .and_then(|p| p.rsplit_once("-hive"))
            .and_then(|(_, n)| n.parse::<u32>().ok());
        match members {
            Some(m) if m >= 2 => out.extend((0..m).map(|i| format!("{s}:{i}"))),
            _ => out.push(s.to_string()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::device_list;

    #[test]
    fn a_hive_profile_without_index_is_every_member_of_its_first_hive() {
        assert_eq!(
            device_list("mock:mi300x-hive4"),
            [
                "mock:mi300x-hive4:0",
                "mock:mi300x-hive4:1",
                "mock:mi300x-hive4:2",
                "mock:mi300x-hive4:3"
            ]
        );
        assert_eq!(
            device_list("mock:navi31:0, mock:navi31:1"),
            ["mock:navi31:0", "mock:navi31:1"]
        );
        assert_eq!(
            device_list("mock:mi300x-hive2:5,cpu"),
            ["mock:mi300x-hive2:5", "cpu"]
        );
        assert_eq!(device_list("mock:navi31"), ["mock:navi31"]);
    }
}
