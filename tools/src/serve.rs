//! `am serve`: export devices over the remote PCI protocol (tinygrad's `REMOTE=host:port`).

use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::time::Duration;

use am_driver::PciDevice;
use am_driver::pci::remote::{self, Cidr, ServeOptions};
use anyhow::{Context, bail};

use am_driver::trace::TracingDevice;

use crate::device::{open_device, open_traced};

/// A server runs until it is killed, which leaves no chance to write what is buffered:
/// the traces are written out four times a second instead.
fn keep_flushed(traces: Vec<Arc<TracingDevice>>) {
    std::thread::spawn(move || {
        loop {
            std::thread::sleep(Duration::from_millis(250));
            for t in &traces {
                if let Err(e) = t.flush() {
                    tracing::warn!("{e}");
                }
            }
        }
    });
}

/// `am serve [--listen ADDR:PORT] DEVICE...`
#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// Address and port to listen on. Loopback unless told otherwise: the protocol has no
    /// authentication, and whoever reaches it can read and write the devices' memory.
    #[arg(long, default_value = "127.0.0.1:6667", value_name = "ADDR:PORT")]
    pub listen: String,
    /// Largest MMIO or system-memory transfer in one request, in MiB (default 1024).
    #[arg(long, value_name = "MIB")]
    pub max_payload_mib: Option<u64>,
    /// Largest single system-memory allocation, in MiB (default 1024).
    #[arg(long, value_name = "MIB")]
    pub max_sysmem_mib: Option<u64>,
    /// Most system memory one connection may hold, in MiB (default 4096).
    #[arg(long, value_name = "MIB")]
    pub max_sysmem_per_connection_mib: Option<u64>,
    /// Most system memory all connections together may hold, in MiB (default a quarter of
    /// the host's memory, MemTotal in /proc/meminfo).
    #[arg(long, value_name = "MIB")]
    pub max_sysmem_total_mib: Option<u64>,
    /// Most host memory each served mock device may commit for the VRAM clients write, in
    /// MiB (default 4096, or the profile's VRAM if smaller).
    #[arg(long, value_name = "MIB")]
    pub max_mock_vram_mib: Option<u64>,
    /// Most clients served at once (default 16). When all are taken, a newcomer whose first
    /// request is not a PING takes the place of the client without progress for longest,
    /// once that is the idle timeout; otherwise it is told the limit and closed.
    #[arg(long, value_name = "N")]
    pub max_connections: Option<usize>,
    /// Most connections from one IP address at once (default 8, half the slots).
    #[arg(long, value_name = "N")]
    pub max_connections_per_address: Option<usize>,
    /// Seconds a request may take to arrive once begun, and a payload may stall (default 10).
    #[arg(long, value_name = "SECS")]
    pub read_timeout: Option<u64>,
    /// Seconds a client may go without progress (a request other than PING, sent at pace)
    /// before it gives its place to a newcomer when the server is full (default 30).
    #[arg(long, value_name = "SECS")]
    pub idle_timeout: Option<u64>,
    /// Seconds an owner may send nothing before it loses its device to another client that
    /// wants to write (default 300).
    #[arg(long, value_name = "SECS")]
    pub owner_timeout: Option<u64>,
    /// Serve only peers in these address ranges (ADDR or ADDR/PREFIX, e.g. 10.0.0.0/8;
    /// comma-separated or repeated); others are refused, and logged once per address.
    #[arg(long, value_name = "CIDR", value_delimiter = ',')]
    pub allow: Vec<String>,
    /// Serve reads only (config space, BARs, system memory): enough for `am info` and the
    /// read-only parts of `am smi`, `am reg`, `am vm` and `am ring`; writes, allocations,
    /// resets and BAR resizes are refused.
    #[arg(long)]
    pub read_only: bool,
    /// Record what the clients do to each device in an access trace (docs/TRACE.md):
    /// device 0 to FILE, device 1 to FILE.1, …; the file is kept current while serving.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<std::path::PathBuf>,
    /// Devices to export, as index 0, 1, …: a PCI address (0000:03:00.0; through VFIO when
    /// VFIO=1), mock:PROFILE[:N], or remote:HOST:PORT:N to relay another server's device.
    #[arg(required = true, value_name = "DEVICE")]
    pub devices: Vec<String>,
}

/// Open the devices, listen, and serve until killed.
pub fn run(args: ServeArgs) -> anyhow::Result<()> {
    pin_malloc_mmap_threshold();
    let Prepared {
        listener,
        devices,
        options,
        warning,
    } = prepare(&args)?;
    if let Some(w) = warning {
        tracing::warn!("{w}");
    }
    let addr = listener
        .local_addr()
        .context("reading the listening address")?;
    println!("am serve: listening on {addr}");
    for (index, device) in devices.iter().enumerate() {
        let id = match (device.vendor_id(), device.device_id()) {
            (Ok(v), Ok(d)) => format!("{v:04x}:{d:04x}"),
            _ => "id unreadable".to_string(),
        };
        println!("  {index}: {} ({id}, {})", device.name(), device.backend());
    }
    remote::serve(listener, devices, options)?;
    Ok(())
}

/// A server ready to run: bound, with its devices open.
pub struct Prepared {
    /// The bound listener.
    pub listener: TcpListener,
    /// The exported devices, index 0 first.
    pub devices: Vec<Arc<dyn PciDevice>>,
    /// The server's limits.
    pub options: ServeOptions,
    /// What to warn the operator of: a listener beyond loopback open to anyone.
    pub warning: Option<String>,
}

/// Everything `run` does before serving: options, devices (opened now and held until exit,
/// so a device that cannot be opened fails here), and the bound listener.
pub fn prepare(args: &ServeArgs) -> anyhow::Result<Prepared> {
    let options = serve_options(args)?;
    let addr: SocketAddr = args
        .listen
        .parse()
        .with_context(|| format!("--listen {:?} is not ADDR:PORT", args.listen))?;
    let trace = args.trace.clone().or_else(|| {
        std::env::var_os("AM_TRACE")
            .filter(|v| !v.is_empty())
            .map(Into::into)
    });
    let devices = match &trace {
        None => args
            .devices
            .iter()
            .map(|spec| open_device(spec))
            .collect::<anyhow::Result<Vec<_>>>()?,
        Some(path) => {
            let traced = args
                .devices
                .iter()
                .map(|spec| open_traced(spec, path))
                .collect::<anyhow::Result<Vec<_>>>()?;
            keep_flushed(traced.clone());
            traced
                .into_iter()
                .map(|d| d as Arc<dyn PciDevice>)
                .collect()
        }
    };
    if let Some(v) = args.max_mock_vram_mib {
        let bytes = mib_flag("max-mock-vram-mib", v)?;
        for spec in &args.devices {
            if let Ok(am_driver::pci::DeviceSpec::Mock { profile, index }) =
                am_driver::pci::DeviceSpec::parse(spec)
            {
                am_mock::gpu(&profile, index)?.vram().set_limit(bytes);
            }
        }
    }
    let listener = TcpListener::bind(addr).with_context(|| format!("listening on {addr}"))?;
    // The bound address: port 0 has become the port the system picked.
    let bound = listener
        .local_addr()
        .context("reading the listening address")?;
    let warning = exposure_warning(bound, &options);
    Ok(Prepared {
        listener,
        devices,
        options,
        warning,
    })
}

/// The warning for a listener anyone may reach: beyond loopback and without `--allow`.
fn exposure_warning(bound: SocketAddr, options: &ServeOptions) -> Option<String> {
    if bound.ip().is_loopback() || !options.allow.is_empty() {
        return None;
    }
    let can = if options.read_only {
        "read the exported devices' registers, VRAM and config space"
    } else {
        "read and write the exported devices' registers, VRAM and config space, reset them, \
         and program them to DMA to and from this host's memory"
    };
    Some(format!(
        "listening on {bound} without --allow: the remote PCI protocol has no authentication; \
         anyone who reaches this port can {can}. Limit it with --allow CIDR, or listen on \
         127.0.0.1 and tunnel"
    ))
}

fn serve_options(args: &ServeArgs) -> anyhow::Result<ServeOptions> {
    let defaults = ServeOptions::default();
    let secs = |flag: &str, v: Option<u64>, default: Duration| -> anyhow::Result<Duration> {
        match v {
            None => Ok(default),
            Some(0) => bail!("--{flag} must be at least 1 second"),
            Some(v) => Ok(Duration::from_secs(v)),
        }
    };
    let mib = |flag: &str, v: Option<u64>, default: u64| -> anyhow::Result<u64> {
        v.map_or(Ok(default), |v| mib_flag(flag, v))
    };
    Ok(ServeOptions {
        max_payload: mib(
            "max-payload-mib",
            args.max_payload_mib,
            defaults.max_payload,
        )?,
        max_sysmem_alloc: mib(
            "max-sysmem-mib",
            args.max_sysmem_mib,
            defaults.max_sysmem_alloc,
        )?,
        max_sysmem_per_connection: mib(
            "max-sysmem-per-connection-mib",
            args.max_sysmem_per_connection_mib,
            defaults.max_sysmem_per_connection,
        )?,
        max_sysmem_total: mib(
            "max-sysmem-total-mib",
            args.max_sysmem_total_mib,
            defaults.max_sysmem_total,
        )?,
        max_connections: match args.max_connections {
            Some(0) => bail!("--max-connections must be at least 1"),
            Some(n) => n,
            None => defaults.max_connections,
        },
        max_connections_per_address: match args.max_connections_per_address {
            Some(0) => bail!("--max-connections-per-address must be at least 1"),
            Some(n) => n,
            None => defaults.max_connections_per_address,
        },
        read_timeout: secs("read-timeout", args.read_timeout, defaults.read_timeout)?,
        idle_timeout: secs("idle-timeout", args.idle_timeout, defaults.idle_timeout)?,
        owner_timeout: secs("owner-timeout", args.owner_timeout, defaults.owner_timeout)?,
        allow: args
            .allow
            .iter()
            .map(|c| c.parse::<Cidr>().with_context(|| format!("--allow {c}")))
            .collect::<anyhow::Result<_>>()?,
        read_only: args.read_only,
        ..defaults
    })
}

/// A `--…-mib` flag's value in bytes.
fn mib_flag(flag: &str, v: u64) -> anyhow::Result<u64> {
    if v == 0 {
        bail!("--{flag} must be at least 1");
    }
    v.checked_mul(1 << 20)
        .with_context(|| format!("--{flag} {v} is too large"))
}

/// The size from which glibc's malloc serves an allocation by `mmap`, for this server when
/// the environment does not choose: glibc's own starting figure, 128 KiB.
pub const MALLOC_MMAP_THRESHOLD: &str = "131072";

/// glibc serves an allocation of 128 KiB or more by `mmap` and gives it back to the system on
/// `free`, but each such free raises that threshold to the freed size (up to 32 MiB), so the
/// next buffers of that size come from a malloc arena instead, and an arena keeps what is
/// freed into it. A server whose connection threads and mock engines move multi-MiB buffers
/// at the same time, each thread in an arena of its own (up to eight per core), then grows by
/// fragmented arenas: the soak in docs/RELIABILITY.md grew 217 MiB in ten minutes on two
/// cores while its VRAM committed 8 MiB. With the threshold pinned (which also turns off the
/// raising) large buffers go back on `free` and the soak is flat. glibc reads it only at
/// start-up, so the server sets `MALLOC_MMAP_THRESHOLD_` and executes itself again — same
/// process, same arguments — unless the environment already chose one. If that fails it
/// serves anyway, and says so.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn pin_malloc_mmap_threshold() {
    use std::os::unix::process::CommandExt;
    const VAR: &str = "MALLOC_MMAP_THRESHOLD_";
    if std::env::var_os(VAR).is_some() {
        return;
    }
    let err = match std::env::current_exe() {
        Ok(exe) => {
            let mut args = std::env::args_os();
            let arg0 = args.next().unwrap_or_else(|| exe.clone().into_os_string());
            let err = std::process::Command::new(&exe)
                .arg0(arg0)
                .args(args)
                .env(VAR, MALLOC_MMAP_THRESHOLD)
                .exec();
            format!("executing {} again: {err}", exe.display())
        }
        Err(err) => format!("finding the am binary: {err}"),
    };
    tracing::warn!(
        "serving without {VAR}={MALLOC_MMAP_THRESHOLD} ({err}): under concurrent clients \
         the server's memory may grow by glibc's malloc arenas; set {VAR} to bound it"
    );
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn pin_malloc_mmap_threshold() {}

#[cfg(test)]
mod tests {
    use super::*;
    use am_driver::pci::remote::{RemoteOptions, RemotePciDevice};
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        serve: ServeArgs,
    }

    fn args(line: &[&str]) -> ServeArgs {
        Cli::try_parse_from(std::iter::once("serve").chain(line.iter().copied()))
            .unwrap()
            .serve
    }

    #[test]
    fn listens_on_loopback_port_6667_by_default() {
        let a = args(&["0000:03:00.0"]);
        assert_eq!(a.listen, "127.0.0.1:6667");
        assert_eq!(a.devices, ["0000:03:00.0"]);
    }

    #[test]
    fn limits_default_to_the_servers_and_scale_by_mib() {
        let d = ServeOptions::default();
        let o = serve_options(&args(&["x"])).unwrap();
        assert_eq!(
            (
                o.max_payload,
                o.max_sysmem_alloc,
                o.max_sysmem_per_connection,
                o.max_sysmem_total
            ),
            (
                d.max_payload,
                d.max_sysmem_alloc,
                d.max_sysmem_per_connection,
                d.max_sysmem_total
            )
        );
        let o = serve_options(&args(&[
            "--max-payload-mib",
            "32",
            "--max-sysmem-mib",
            "2",
            "--max-sysmem-per-connection-mib",
            "3",
            "--max-sysmem-total-mib",
            "5",
            "x",
        ]))
        .unwrap();
        assert_eq!(
            (
                o.max_payload,
                o.max_sysmem_alloc,
                o.max_sysmem_per_connection,
                o.max_sysmem_total
            ),
            (32 << 20, 2 << 20, 3 << 20, 5 << 20)
        );
        let e = serve_options(&args(&["--max-sysmem-mib", "0", "x"])).unwrap_err();
        assert!(
            e.to_string()
                .contains("--max-sysmem-mib must be at least 1")
        );
    }

    #[test]
    fn max_mock_vram_caps_what_a_served_mock_commits() {
        // Index 310: a mock of this test's own.
        prepare(&args(&[
            "--listen",
            "127.0.0.1:0",
            "--max-mock-vram-mib",
            "64",
            "mock:navi31:310",
        ]))
        .unwrap();
        assert_eq!(
            am_mock::gpu("navi31", 310).unwrap().vram().limit(),
            64 << 20
        );
        let Err(e) = prepare(&args(&["--max-mock-vram-mib", "0", "mock:navi31:310"])) else {
            panic!("--max-mock-vram-mib 0 was taken");
        };
        assert!(
            e.to_string()
                .contains("--max-mock-vram-mib must be at least 1"),
            "{e}"
        );
    }

    #[test]
    fn a_served_mock_reads_the_same_through_the_wire_as_in_process() {
        // Index 7: a mock of this test's own, apart from any other in the process.
        let ready = prepare(&args(&["--listen", "127.0.0.1:0", "mock:navi31:7"])).unwrap();
        let port = ready.listener.local_addr().unwrap().port();
        std::thread::spawn(move || remote::serve(ready.listener, ready.devices, ready.options));
        let gpu = am_mock::gpu("navi31", 7).unwrap();
        let local = gpu.open();
        let dev =
            RemotePciDevice::connect("127.0.0.1", port, 0, &RemoteOptions::default()).unwrap();
        assert_eq!(dev.remote_name(), "mock:navi31:7");
        for offset in (0..0x100).step_by(4) {
            assert_eq!(
                dev.config_read(offset, 4).unwrap(),
                local.config_read(offset, 4).unwrap(),
                "config dword {offset:#x}"
            );
        }
        for bar in [0, 2, 5] {
            assert_eq!(
                dev.bar_info(bar).unwrap(),
                local.bar_info(bar).unwrap(),
                "BAR{bar}"
            );
        }
        // RCC_CONFIG_MEMSIZE: 24 GiB in MiB.
        assert_eq!(dev.bar(5).unwrap().read32(0xde3 * 4).unwrap(), 24 * 1024);

        let vram = dev.bar(0).unwrap();
        vram.write_bytes(0x1000, &[1, 2, 3, 4, 5]).unwrap();
        assert_eq!(vram.read64(0x1000).unwrap(), 0x05_0403_0201);
        assert_eq!(gpu.vram().read32(0x1000), 0x0403_0201);

        dev.set_bus_master(true).unwrap();
        let mem = dev.alloc_sysmem(8192, false).unwrap();
        mem.write32(4096 + 8, 0x1122_3344).unwrap();
        // The write is pipelined; PING answers once the server has applied it.
        dev.ping().unwrap();
        let mut b = [0u8; 4];
        gpu.dma_read(mem.bus_addrs()[1] + 8, &mut b).unwrap();
        assert_eq!(
            u32::from_le_bytes(b),
            0x1122_3344,
            "the mock's DMA sees the remote write"
        );
        assert!(gpu.violations().is_empty(), "{:?}", gpu.violations());

        // The mock's strictness crosses the wire: an unknown register is refused, named.
        let err = dev.bar(5).unwrap().read32(0x3ffff * 4).unwrap_err();
        assert!(err.to_string().contains("0x3ffff"), "{err}");
        assert_eq!(gpu.take_violations().len(), 1);
        dev.ping().unwrap();
    }

    #[test]
    fn asking_for_bar_info_leaves_the_bar_resizable() {
        let ready = prepare(&args(&["--listen", "127.0.0.1:0", "mock:navi31:8"])).unwrap();
        let port = ready.listener.local_addr().unwrap().port();
        std::thread::spawn(move || remote::serve(ready.listener, ready.devices, ready.options));
        let dev =
            RemotePciDevice::connect("127.0.0.1", port, 0, &RemoteOptions::default()).unwrap();
        assert_eq!(dev.bar_info(0).unwrap().size, 256 << 20);
        dev.resize_bar(0).unwrap();
        assert_eq!(dev.bar_info(0).unwrap().size, 32 << 30);
        assert_eq!(dev.bar(0).unwrap().len(), 32 << 30);
    }

    #[test]
    fn the_warning_beyond_loopback_names_the_bound_port_and_what_anyone_can_do() {
        let ready = prepare(&args(&["--listen", "0.0.0.0:0", "mock:navi31:9"])).unwrap();
        let port = ready.listener.local_addr().unwrap().port();
        let w = ready
            .warning
            .expect("a warning for 0.0.0.0 without --allow");
        assert!(
            w.contains(&format!("0.0.0.0:{port} without --allow")),
            "{w}"
        );
        assert!(!w.contains(":0 "), "the port is the bound one, not 0: {w}");
        assert!(w.contains("DMA to and from this host's memory"), "{w}");
        let limited = prepare(&args(&[
            "--listen",
            "0.0.0.0:0",
            "--allow",
            "10.0.0.0/8",
            "mock:navi31:9",
        ]))
        .unwrap();
        assert_eq!(limited.warning, None, "--allow limits who may connect");
        assert_eq!(limited.options.allow.len(), 1);
        let local = prepare(&args(&["--listen", "127.0.0.1:0", "mock:navi31:9"])).unwrap();
        assert_eq!(local.warning, None);
    }

    #[test]
    fn allow_read_only_and_timeouts_reach_the_options() {
        let o = serve_options(&args(&[
            "--allow",
            "10.0.0.0/8,192.168.1.7",
            "--read-only",
            "--read-timeout",
            "3",
            "--idle-timeout",
            "60",
            "--owner-timeout",
            "90",
            "--max-connections-per-address",
            "3",
            "x",
        ]))
        .unwrap();
        assert_eq!(
            o.allow.iter().map(|c| c.to_string()).collect::<Vec<_>>(),
            ["10.0.0.0/8", "192.168.1.7/32"]
        );
        assert!(o.read_only);
        assert_eq!(o.read_timeout, Duration::from_secs(3));
        assert_eq!(o.idle_timeout, Duration::from_secs(60));
        assert_eq!(o.owner_timeout, Duration::from_secs(90));
        assert_eq!(o.max_connections_per_address, 3);
        let e = serve_options(&args(&["--max-connections-per-address", "0", "x"])).unwrap_err();
        assert!(format!("{e:#}").contains("must be at least 1"), "{e:#}");
        let e = serve_options(&args(&["--allow", "10.0.0.0/40", "x"])).unwrap_err();
        assert!(
            format!("{e:#}").contains("the prefix must be 0 to 32"),
            "{e:#}"
        );
    }

    #[test]
    fn a_bad_listen_address_or_device_fails_before_serving() {
        let e = prepare(&args(&["--listen", "localhost", "0000:03:00.0"]))
            .err()
            .unwrap();
        assert!(
            e.to_string()
                .contains("--listen \"localhost\" is not ADDR:PORT"),
            "{e}"
        );
        let e = prepare(&args(&["--listen", "127.0.0.1:0", "gpu0"]))
            .err()
            .unwrap();
        assert!(e.to_string().contains("bad device \"gpu0\""), "{e}");
    }
}
