//! Device specifications: how the user names a device on the command line and in the API.
//!
//! - a PCI address, `0000:03:00.0` or `03:00.0` (domain 0): a GPU on this machine, opened
//!   through sysfs, or through VFIO when `VFIO=1` (tinygrad's variable);
//! - `mock:PROFILE[:N]`: the N-th mock device of a profile (opened by the tools crate, since
//!   the driver never depends on the mock);
//! - `remote:HOST:PORT[:N]`: the N-th device exported by `am serve` on HOST:PORT (an IPv6
//!   host is written in brackets, `remote:[::1]:6667:0`).
//!
//! `Display` writes the canonical form (`0000:03:00.0`, `mock:navi31:0`,
//! `remote:127.0.0.1:6667:0`), which parses back to the same value.

use std::fmt;
use std::str::FromStr;

use crate::{Error, ErrorKind, Result};

/// A PCI address: domain, bus, device (slot) and function.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Bdf {
    /// PCI domain (segment).
    pub domain: u32,
    /// Bus number.
    pub bus: u8,
    /// Device (slot) number, 0..=31.
    pub device: u8,
    /// Function number, 0..=7.
    pub function: u8,
}

impl Bdf {
    /// Parse `DDDD:BB:DD.F` or `BB:DD.F` (hexadecimal, as sysfs and lspci write them).
    pub fn parse(s: &str) -> Result<Self> {
        let bad = |reason: &str| {
            Error::from(ErrorKind::BadDeviceSpec {
                spec: s.to_string(),
                reason: reason.to_string(),
            })
        };
        let (rest, function) = s
            .rsplit_once('.')
            .ok_or_else(|| bad("a PCI address ends in .FUNCTION (e.g. 0000:03:00.0)"))?;
        let parts: Vec<&str> = rest.split(':').collect();
        let (domain, bus, device) = match parts.as_slice() {
            [bus, device] => ("0", *bus, *device),
            [domain, bus, device] => (*domain, *bus, *device),
            _ => return Err(bad("a PCI address is [DOMAIN:]BUS:DEVICE.FUNCTION")),
        };
        let hex = |field: &str, text: &str, max_digits: usize| -> Result<u32> {
            if text.is_empty()
                || text.len() > max_digits
                || !text.chars().all(|c| c.is_ascii_hexdigit())
            {
                return Err(bad(&format!(
                    "PCI {field} {text:?} is not a hexadecimal number of at most {max_digits} digits"
                )));
            }
            u32::from_str_radix(text, 16).map_err(|_| bad(&format!("bad PCI {field} {text:?}")))
        };
        let domain = hex("domain", domain, 8)?;
        let bus = hex("bus", bus, 2)?;
        let device = hex("device", device, 2)?;
        if device > 0x1f {
            return Err(bad("PCI device number must be at most 1f"));
        }
        let function = hex("function", function, 1)?;
        if function > 7 {
            return Err(bad("PCI function number must be at most 7"));
        }
        Ok(Self {
            domain,
            bus: bus as u8,
            device: device as u8,
            function: function as u8,
        })
    }

    /// The same slot with another function number (e.g. the GPU's audio function).
    pub fn with_function(self, function: u8) -> Self {
        Self { function, ..self }
    }
}

impl fmt::Display for Bdf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:04x}:{:02x}:{:02x}.{:x}",
            self.domain, self.bus, self.device, self.function
        )
    }
}

impl FromStr for Bdf {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Self::parse(s)
    }
}

/// Which device the user means.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum DeviceSpec {
    /// A PCI function on this machine.
    Pci(Bdf),
    /// A mock device: profile name and index.
    Mock {
        /// Profile (`navi31`, `mi300x`, `mi350x-vf`, …).
        profile: String,
        /// Which device of that profile (devices of a hive differ by index).
        index: u32,
    },
    /// A device exported by `am serve`.
    Remote {
        /// Host name or address (IPv6 without brackets).
        host: String,
        /// TCP port.
        port: u16,
        /// Index of the device on the server (sent as `dev_id`).
        index: u32,
    },
}

impl DeviceSpec {
    /// Parse a device specification (see the module documentation for the forms).
    pub fn parse(s: &str) -> Result<Self> {
        let bad = |reason: String| {
            Error::from(ErrorKind::BadDeviceSpec {
                spec: s.to_string(),
                reason,
            })
        };
        let index = |text: &str| -> Result<u32> {
            text.parse::<u32>()
                .map_err(|_| bad(format!("device index {text:?} is not a number")))
        };
        if let Some(rest) = s.strip_prefix("mock:") {
            let (profile, idx) = match rest.split_once(':') {
                Some((p, i)) => (p, index(i)?),
                None => (rest, 0),
            };
            if profile.is_empty()
                || !profile
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            {
                return Err(bad(format!(
                    "mock profile {profile:?} must be a non-empty name such as navi31"
                )));
            }
            return Ok(Self::Mock {
                profile: profile.to_string(),
                index: idx,
            });
        }
        if let Some(rest) = s.strip_prefix("remote:") {
            let (host, after) = if let Some(v6) = rest.strip_prefix('[') {
                let (host, after) = v6
                    .split_once(']')
                    .ok_or_else(|| bad("IPv6 host misses its closing ']'".to_string()))?;
                let after = after
                    .strip_prefix(':')
                    .ok_or_else(|| bad("expected :PORT after the host".to_string()))?;
                (host, after)
            } else {
                rest.split_once(':')
                    .ok_or_else(|| bad("expected remote:HOST:PORT[:N]".to_string()))?
            };
            if host.is_empty() {
                return Err(bad("remote host is empty".to_string()));
            }
            if host.contains(':') && !rest.starts_with('[') {
                return Err(bad(
                    "write an IPv6 host in brackets: remote:[::1]:6667".to_string()
                ));
            }
            let (port, idx) = match after.split_once(':') {
                Some((p, i)) => (p, index(i)?),
                None => (after, 0),
            };
            let port = port
                .parse::<u16>()
                .ok()
                .filter(|p| *p != 0)
                .ok_or_else(|| bad(format!("port {port:?} is not a number in 1..=65535")))?;
            return Ok(Self::Remote {
                host: host.to_string(),
                port,
                index: idx,
            });
        }
        if s.contains('.') {
            return Bdf::parse(s).map(Self::Pci);
        }
        Err(bad(
            "expected a PCI address (0000:03:00.0), mock:PROFILE[:N] or remote:HOST:PORT[:N]"
                .to_string(),
        ))
    }

    /// `HOST:PORT` of a remote device, in the form `std::net` resolves.
    pub fn remote_addr(&self) -> Option<String> {
        match self {
            Self::Remote { host, port, .. } if host.contains(':') => {
                Some(format!("[{host}]:{port}"))
            }
            Self::Remote { host, port, .. } => Some(format!("{host}:{port}")),
            _ => None,
        }
    }
}

impl fmt::Display for DeviceSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Pci(bdf) => write!(f, "{bdf}"),
            Self::Mock { profile, index } => write!(f, "mock:{profile}:{index}"),
            Self::Remote { index, .. } => {
                // `remote_addr` is `Some` for every remote spec.
                write!(
                    f,
                    "remote:{}:{index}",
                    self.remote_addr().unwrap_or_default()
                )
            }
        }
    }
}

impl FromStr for DeviceSpec {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Self::parse(s)
    }
}

/// Whether a value of the `VFIO` environment variable asks for the VFIO backend.
pub fn vfio_requested(value: Option<&str>) -> bool {
    value.is_some_and(|v| !matches!(v.trim(), "" | "0"))
}

/// Open a PCI function of this machine: through VFIO when `VFIO` is set to a value other than
/// `0` (tinygrad's variable), through sysfs otherwise.
pub fn open_pci(bdf: Bdf) -> Result<std::sync::Arc<dyn super::PciDevice>> {
    if vfio_requested(std::env::var("VFIO").ok().as_deref()) {
        Ok(std::sync::Arc::new(super::vfio::VfioPci::open(bdf)?))
    } else {
        Ok(std::sync::Arc::new(super::sysfs::SysfsPci::open(bdf)?))
    }
}

/// How `mock:` specs are opened: the mock crate registers its opener
/// (`am_mock::register()`), since the driver never depends on the mock.
pub type MockOpener = fn(&str, u32) -> Result<std::sync::Arc<dyn super::PciDevice>>;

static MOCK_OPENER: std::sync::OnceLock<MockOpener> = std::sync::OnceLock::new();

/// Register the opener of `mock:PROFILE[:N]` specs (the first registration wins).
pub fn register_mock(opener: MockOpener) {
    let _ = MOCK_OPENER.set(opener);
}

/// Open the device a spec names with the backend the spec selects: a PCI BDF ([`open_pci`]:
/// sysfs, or VFIO when `VFIO` is set), `remote:HOST:PORT[:N]` (the remote PCI client), or
/// `mock:PROFILE[:N]` (through the opener the mock registered).
pub fn open_spec(spec: &str) -> Result<std::sync::Arc<dyn super::PciDevice>> {
    Ok(match DeviceSpec::parse(spec)? {
        DeviceSpec::Pci(bdf) => open_pci(bdf)?,
        DeviceSpec::Remote { host, port, index } => {
            std::sync::Arc::new(super::remote::RemotePciDevice::connect(
                &host,
                port,
                index,
                &super::remote::RemoteOptions::default(),
            )?)
        }
        DeviceSpec::Mock { profile, index } => match MOCK_OPENER.get() {
            Some(open) => open(&profile, index)?,
            None => {
                return Err(Error::from(ErrorKind::BadDeviceSpec {
                    spec: spec.to_string(),
                    reason: "mock devices need the mock backend: call am_mock::register() first"
                        .into(),
                }));
            }
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bdf(domain: u32, bus: u8, device: u8, function: u8) -> DeviceSpec {
        DeviceSpec::Pci(Bdf {
            domain,
            bus,
            device,
            function,
        })
    }

    #[test]
    fn parses_every_documented_form() {
        assert_eq!(DeviceSpec::parse("0000:03:00.0").unwrap(), bdf(0, 3, 0, 0));
        assert_eq!(DeviceSpec::parse("03:00.0").unwrap(), bdf(0, 3, 0, 0));
        assert_eq!(
            DeviceSpec::parse("0001:c1:1f.7").unwrap(),
            bdf(1, 0xc1, 0x1f, 7)
        );
        assert_eq!(
            DeviceSpec::parse("mock:navi31").unwrap(),
            DeviceSpec::Mock {
                profile: "navi31".into(),
                index: 0
            }
        );
        assert_eq!(
            DeviceSpec::parse("mock:mi300x:2").unwrap(),
            DeviceSpec::Mock {
                profile: "mi300x".into(),
                index: 2
            }
        );
        assert_eq!(
            DeviceSpec::parse("remote:127.0.0.1:6667").unwrap(),
            DeviceSpec::Remote {
                host: "127.0.0.1".into(),
                port: 6667,
                index: 0
            }
        );
        assert_eq!(
            DeviceSpec::parse("remote:127.0.0.1:6667:1").unwrap(),
            DeviceSpec::Remote {
                host: "127.0.0.1".into(),
                port: 6667,
                index: 1
            }
        );
        assert_eq!(
            DeviceSpec::parse("remote:[::1]:6667:3").unwrap(),
            DeviceSpec::Remote {
                host: "::1".into(),
                port: 6667,
                index: 3
            }
        );
    }

    #[test]
    fn display_is_canonical_and_round_trips() {
        for (input, canonical) in [
            ("03:00.0", "0000:03:00.0"),
            ("0000:c1:00.1", "0000:c1:00.1"),
            ("mock:navi31", "mock:navi31:0"),
            ("mock:mi350x-vf:1", "mock:mi350x-vf:1"),
            ("remote:127.0.0.1:6667", "remote:127.0.0.1:6667:0"),
            ("remote:gpu-box:7000:2", "remote:gpu-box:7000:2"),
            ("remote:[::1]:6667", "remote:[::1]:6667:0"),
        ] {
            let spec = DeviceSpec::parse(input).unwrap();
            assert_eq!(spec.to_string(), canonical, "display of {input}");
            assert_eq!(
                DeviceSpec::parse(canonical).unwrap(),
                spec,
                "round trip of {input}"
            );
        }
    }

    #[test]
    fn malformed_specs_are_errors_that_quote_the_input() {
        for input in [
            "",
            "navi31",
            "mock:",
            "mock:navi31:x",
            "mock:na vi",
            "remote:",
            "remote:host",
            "remote::6667",
            "remote:host:0",
            "remote:host:70000",
            "remote:host:6667:-1",
            "remote:::1:6667",
            "remote:[::1:6667",
            "03:00",
            "03:20.0",
            "03:00.8",
            "0000:003:00.0",
            "zz:00.0",
            "1:2:3:4.0",
        ] {
            match DeviceSpec::parse(input) {
                Err(Error {
                    kind: ErrorKind::BadDeviceSpec { spec, reason },
                    ..
                }) => {
                    assert_eq!(spec, input);
                    assert!(!reason.is_empty());
                }
                other => panic!("{input:?} should be a BadDeviceSpec, got {other:?}"),
            }
        }
    }

    #[test]
    fn vfio_variable_follows_tinygrad() {
        assert!(!vfio_requested(None));
        assert!(!vfio_requested(Some("0")));
        assert!(!vfio_requested(Some("")));
        assert!(vfio_requested(Some("1")));
    }

    #[test]
    fn with_function_keeps_the_slot() {
        let gpu = Bdf::parse("0000:03:00.0").unwrap();
        assert_eq!(gpu.with_function(1).to_string(), "0000:03:00.1");
    }
}
