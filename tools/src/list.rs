//! `am list [--json] [--remote HOST:PORT]...`: the AMD GPUs on this machine's PCI bus and on
//! remote PCI servers.

use std::path::{Path, PathBuf};

use am_driver::PciDevice;
use am_driver::pci::DeviceSpec;
use am_driver::pci::ids::known_gpu;
use am_driver::pci::remote::{self, RemoteOptions, RemotePciDevice};
use am_driver::pci::sysfs::{self, PciGpu};
use anyhow::{Context, bail};
use serde_json::{Value, json};

/// `am list`
#[derive(clap::Args, Debug)]
pub struct ListArgs {
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Also list the GPUs a remote PCI server (`am serve`) exports; may be repeated.
    #[arg(long, value_name = "HOST:PORT")]
    pub remote: Vec<String>,
    /// Where sysfs is mounted (tests point this at a fake tree).
    #[arg(long, default_value = sysfs::SYSFS_ROOT, hide = true)]
    pub sysfs_root: PathBuf,
}

/// A GPU a remote server exports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemoteGpu {
    /// The spec that opens it (`remote:HOST:PORT:N`).
    pub spec: String,
    /// What the server calls it (a BDF or a mock spec).
    pub server_name: String,
    /// PCI device id, when config space could be read.
    pub device_id: Option<u16>,
}

/// What one `--remote` server answered.
#[derive(Debug)]
pub struct RemoteServer {
    /// `HOST:PORT` as given.
    pub server: String,
    /// Its GPUs, or why they could not be listed.
    pub gpus: Result<Vec<RemoteGpu>, String>,
}

/// Everything `am list` found.
#[derive(Debug)]
pub struct Listing {
    /// GPUs on this machine's bus.
    pub local: Vec<PciGpu>,
    /// Each `--remote` server.
    pub remote: Vec<RemoteServer>,
}

/// List the local bus and every remote server; a failing server is reported, not fatal,
/// until the end (exit status 1 if any failed).
pub fn run(args: ListArgs) -> anyhow::Result<()> {
    let listing = Listing {
        local: scan_local(&args.sysfs_root)?,
        remote: args.remote.iter().map(|s| scan_remote(s)).collect(),
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&to_json(&listing))?);
    } else {
        print!("{}", render(&listing));
    }
    let failed: Vec<&str> = listing
        .remote
        .iter()
        .filter(|r| r.gpus.is_err())
        .map(|r| r.server.as_str())
        .collect();
    if !failed.is_empty() {
        bail!("could not list remote server(s) {}", failed.join(", "));
    }
    Ok(())
}

/// The AMD GPUs under a sysfs root.
pub fn scan_local(root: &Path) -> anyhow::Result<Vec<PciGpu>> {
    sysfs::scan(root).with_context(|| format!("scanning the PCI bus under {}", root.display()))
}

/// The AMD GPUs a server at `HOST:PORT` exports, with their device ids.
pub fn scan_remote(server: &str) -> RemoteServer {
    let gpus = (|| -> anyhow::Result<Vec<RemoteGpu>> {
        let DeviceSpec::Remote { host, port, .. } = DeviceSpec::parse(&format!("remote:{server}"))
            .with_context(|| format!("--remote {server:?} is not HOST:PORT"))?
        else {
            bail!("--remote {server:?} is not HOST:PORT");
        };
        let options = RemoteOptions::default();
        let entries = remote::probe_amd(&host, port, &options)?;
        Ok(entries
            .into_iter()
            .map(|e| {
                let spec = DeviceSpec::Remote {
                    host: host.clone(),
                    port,
                    index: e.index,
                };
                // A second connection per device: the probe alone does not carry ids.
                let device_id = RemotePciDevice::connect(&host, port, e.index, &options)
                    .and_then(|d| d.device_id())
                    .ok();
                RemoteGpu {
                    spec: spec.to_string(),
                    server_name: e.name,
                    device_id,
                }
            })
            .collect())
    })();
    RemoteServer {
        server: server.to_string(),
        gpus: gpus.map_err(|e| format!("{e:#}")),
    }
}

fn name_of(device_id: u16) -> &'static str {
    known_gpu(device_id).map_or("unknown AMD GPU", |g| g.name)
}

fn size_text(bytes: u64) -> String {
    match bytes {
        0 => "-".to_string(),
        b if b >= 1 << 30 && b % (1 << 30) == 0 => format!("{} GiB", b >> 30),
        b => format!("{} MiB", b >> 20),
    }
}

/// The listing as a table for people.
pub fn render(listing: &Listing) -> String {
    let mut out = String::new();
    if listing.local.is_empty() {
        out.push_str("no AMD GPU found on this machine's PCI bus\n");
    } else {
        let rows: Vec<[String; 6]> = listing
            .local
            .iter()
            .map(|g| {
                let kind = if g.is_vf { " (VF)" } else { "" };
                [
                    g.bdf.to_string(),
                    format!("{:04x}:{:04x}", g.vendor_id, g.device_id),
                    format!("{}{kind}", name_of(g.device_id)),
                    size_text(g.bar0_size),
                    g.driver.clone().unwrap_or_else(|| "-".to_string()),
                    g.iommu_group.map_or("-".to_string(), |n| n.to_string()),
                ]
            })
            .collect();
        let header = ["BDF", "ID", "NAME", "BAR0", "DRIVER", "IOMMU GROUP"].map(String::from);
        let mut widths = [0usize; 6];
        for row in std::iter::once(&header).chain(&rows) {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.len());
            }
        }
        for row in std::iter::once(&header).chain(&rows) {
            let line: Vec<String> = row
                .iter()
                .zip(widths)
                .map(|(cell, w)| format!("{cell:w$}"))
                .collect();
            out.push_str(line.join("  ").trim_end());
            out.push('\n');
        }
    }
    for server in &listing.remote {
        match &server.gpus {
            Err(e) => out.push_str(&format!("remote {}: error: {e}\n", server.server)),
            Ok(gpus) if gpus.is_empty() => {
                out.push_str(&format!("remote {}: no AMD GPU exported\n", server.server));
            }
            Ok(gpus) => {
                out.push_str(&format!("remote {}:\n", server.server));
                for g in gpus {
                    let (id, name) = match g.device_id {
                        Some(d) => (format!("1002:{d:04x}"), name_of(d)),
                        None => ("????:????".to_string(), "config space unreadable"),
                    };
                    out.push_str(&format!(
                        "  {}  {id}  {name}  (server: {})\n",
                        g.spec, g.server_name
                    ));
                }
            }
        }
    }
    out
}

/// The listing as JSON for scripts.
pub fn to_json(listing: &Listing) -> Value {
    let local: Vec<Value> = listing
        .local
        .iter()
        .map(|g| {
            let known = known_gpu(g.device_id);
            json!({
                "bdf": g.bdf.to_string(),
                "vendor_id": format!("{:#06x}", g.vendor_id),
                "device_id": format!("{:#06x}", g.device_id),
                "class": format!("{:#08x}", g.class),
                "name": known.map(|k| k.name),
                "gfx_target": known.map(|k| k.gfx_target.name()),
                "driver": g.driver,
                "iommu_group": g.iommu_group,
                "is_vf": g.is_vf,
                "bar0_size": g.bar0_size,
            })
        })
        .collect();
    let remote: Vec<Value> = listing
        .remote
        .iter()
        .map(|r| match &r.gpus {
            Ok(gpus) => json!({
                "server": r.server,
                "gpus": gpus.iter().map(|g| json!({
                    "spec": g.spec,
                    "server_name": g.server_name,
                    "device_id": g.device_id.map(|d| format!("{d:#06x}")),
                    "name": g.device_id.and_then(known_gpu).map(|k| k.name),
                })).collect::<Vec<_>>(),
            }),
            Err(e) => json!({ "server": r.server, "error": e }),
        })
        .collect();
    json!({ "local": local, "remote": remote })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;
    use std::os::unix::fs::symlink;
    use std::sync::Arc;

    /// A fake sysfs tree with the files `sysfs::scan` reads.
    struct FakeTree(PathBuf);

    impl FakeTree {
        fn new(tag: &str) -> Self {
            let root = std::env::temp_dir().join(format!("am-list-{tag}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&root);
            std::fs::create_dir_all(root.join("bus/pci/devices")).unwrap();
            Self(root)
        }

        fn add(&self, bdf: &str, vendor: u16, device: u16, class: u32, bar0: u64) {
            let d = self.0.join("bus/pci/devices").join(bdf);
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("vendor"), format!("{vendor:#06x}\n")).unwrap();
            std::fs::write(d.join("device"), format!("{device:#06x}\n")).unwrap();
            std::fs::write(d.join("class"), format!("{class:#08x}\n")).unwrap();
            let line0 = if bar0 == 0 {
                "0x0 0x0 0x0\n".to_string()
            } else {
                format!("0x6000000000 {:#x} 0x14220c\n", 0x60_0000_0000 + bar0 - 1)
            };
            std::fs::write(d.join("resource"), line0).unwrap();
        }

        fn link(&self, bdf: &str, name: &str, target: &str) {
            let t = self.0.join(target);
            std::fs::create_dir_all(&t).unwrap();
            symlink(t, self.0.join("bus/pci/devices").join(bdf).join(name)).unwrap();
        }
    }

    impl Drop for FakeTree {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn empty_bus_is_a_normal_answer() {
        let tree = FakeTree::new("empty");
        let listing = Listing {
            local: scan_local(&tree.0).unwrap(),
            remote: vec![],
        };
        assert_eq!(
            render(&listing),
            "no AMD GPU found on this machine's PCI bus\n"
        );
        assert_eq!(to_json(&listing), json!({ "local": [], "remote": [] }));
    }

    #[test]
    fn lists_amd_gpus_with_name_driver_and_group() {
        let tree = FakeTree::new("gpus");
        tree.add("0000:03:00.0", 0x1002, 0x744c, 0x030000, 32 << 30);
        tree.link("0000:03:00.0", "driver", "bus/pci/drivers/amdgpu");
        tree.link("0000:03:00.0", "iommu_group", "kernel/iommu_groups/14");
        tree.add("0000:03:00.1", 0x1002, 0xab30, 0x040300, 0);
        tree.add("0000:00:02.0", 0x8086, 0x0d57, 0x030000, 256 << 20);
        tree.add("0000:83:00.0", 0x1002, 0x1234, 0x038000, 256 << 20);
        let listing = Listing {
            local: scan_local(&tree.0).unwrap(),
            remote: vec![],
        };
        let text = render(&listing);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert!(
            lines[0].starts_with("BDF") && lines[0].ends_with("IOMMU GROUP"),
            "{text}"
        );
        for cell in [
            "0000:03:00.0",
            "1002:744c",
            "Navi 31",
            "32 GiB",
            "amdgpu",
            "14",
        ] {
            assert!(
                lines[1].contains(cell),
                "{cell} missing from {:?}",
                lines[1]
            );
        }
        assert!(
            lines[2].contains("unknown AMD GPU") && lines[2].contains("256 MiB"),
            "{text}"
        );

        let j = to_json(&listing);
        assert_eq!(j["local"].as_array().unwrap().len(), 2);
        assert_eq!(j["local"][0]["bdf"], "0000:03:00.0");
        assert_eq!(j["local"][0]["device_id"], "0x744c");
        assert_eq!(j["local"][0]["gfx_target"], "gfx1100");
        assert_eq!(j["local"][0]["driver"], "amdgpu");
        assert_eq!(j["local"][0]["iommu_group"], 14);
        assert_eq!(j["local"][1]["name"], Value::Null);
        assert_eq!(j["local"][1]["driver"], Value::Null);
    }

    /// Just enough of a GPU for PROBE and a config-space read.
    struct ConfigOnly;

    impl PciDevice for ConfigOnly {
        fn name(&self) -> &str {
            "0000:03:00.0"
        }
        fn backend(&self) -> &'static str {
            "test"
        }
        fn config_read(&self, offset: u16, _size: u8) -> am_driver::Result<u32> {
            Ok(match offset {
                0 => 0x1002,
                2 => 0x744c,
                _ => 0,
            })
        }
        fn config_write(&self, _: u16, _: u8, _: u32) -> am_driver::Result<()> {
            Ok(())
        }
        fn bar_info(&self, index: u8) -> am_driver::Result<am_driver::BarInfo> {
            Err(am_driver::Error::new(
                self.name(),
                am_driver::ErrorKind::NoBar {
                    bar: index,
                    reason: "test device".into(),
                },
            ))
        }
        fn bar(&self, index: u8) -> am_driver::Result<Arc<dyn am_driver::Bar>> {
            Err(am_driver::Error::new(
                self.name(),
                am_driver::ErrorKind::NoBar {
                    bar: index,
                    reason: "test device".into(),
                },
            ))
        }
        fn resize_bar(&self, _: u8) -> am_driver::Result<()> {
            Ok(())
        }
        fn alloc_sysmem(&self, _: usize, _: bool) -> am_driver::Result<Arc<dyn am_driver::SysMem>> {
            Err(am_driver::Error::new(
                self.name(),
                am_driver::ErrorKind::Unsupported {
                    op: "alloc_sysmem",
                    backend: "test",
                },
            ))
        }
        fn reset(&self) -> am_driver::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn lists_what_a_remote_server_exports() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let devices: Vec<Arc<dyn PciDevice>> = vec![Arc::new(ConfigOnly)];
        std::thread::spawn(move || remote::serve(listener, devices, Default::default()));
        let server = scan_remote(&addr.to_string());
        let gpus = server.gpus.unwrap();
        assert_eq!(
            gpus,
            vec![RemoteGpu {
                spec: format!("remote:{addr}:0"),
                server_name: "0000:03:00.0".into(),
                device_id: Some(0x744c),
            }]
        );
        let listing = Listing {
            local: vec![],
            remote: vec![RemoteServer {
                server: addr.to_string(),
                gpus: Ok(gpus),
            }],
        };
        let text = render(&listing);
        assert!(
            text.contains(&format!("remote:{addr}:0  1002:744c  Navi 31")),
            "{text}"
        );
        assert_eq!(
            to_json(&listing)["remote"][0]["gpus"][0]["device_id"],
            "0x744c"
        );
    }

    #[test]
    fn an_unreachable_or_malformed_server_is_reported_by_name() {
        // Bind and drop to find a port nobody listens on.
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let down = scan_remote(&format!("127.0.0.1:{port}"));
        assert!(down.gpus.is_err());
        let bad = scan_remote("no-port-here");
        assert!(bad.gpus.unwrap_err().contains("no-port-here"));
        let listing = Listing {
            local: vec![],
            remote: vec![down],
        };
        let text = render(&listing);
        assert!(
            text.contains(&format!("remote 127.0.0.1:{port}: error:")),
            "{text}"
        );
        assert!(to_json(&listing)["remote"][0]["error"].is_string());
    }
}
