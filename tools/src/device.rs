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
