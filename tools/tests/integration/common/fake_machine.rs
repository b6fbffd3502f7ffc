//! A fake machine for `am doctor`: a sysfs tree laid out as Linux lays out PCI devices, IOMMU
//! groups, modules and securityfs; a procfs with `cmdline`, `meminfo` and `self/{status,limits}`;
//! a `/dev`; and a firmware directory. Every check reads only these, never this machine.

use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// All capabilities of a root process (`CapEff` as Linux 6.x prints it).
pub const ALL_CAPS: &str = "000001ffffffffff";

/// A fake machine in a scratch directory, removed when dropped.
pub struct FakeMachine {
    root: PathBuf,
}

impl FakeMachine {
    /// A machine without IOMMU, lockdown `none`, 16 free 2 MiB hugepages, unlimited memlock,
    /// a root process with every capability, no PCI device and an empty firmware directory.
    pub fn new(tag: &str) -> Self {
        let root = std::env::temp_dir().join(format!("am-doctor-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let m = FakeMachine { root };
        for d in [
            "sys/bus/pci/devices",
            "sys/bus/pci/drivers",
            "sys/kernel/iommu_groups",
            "sys/class/iommu",
            "sys/module",
            "proc/self",
            "dev",
            "firmware",
        ] {
            std::fs::create_dir_all(m.root.join(d)).unwrap();
        }
        m.write(
            "sys/kernel/security/lockdown",
            "[none] integrity confidentiality\n",
        );
        m.write(
            "proc/cmdline",
            "BOOT_IMAGE=/vmlinuz root=/dev/sda1 ro quiet\n",
        );
        m.set_hugepages(16, 16);
        m.set_memlock("unlimited");
        m.set_status(0, 0, ALL_CAPS);
        m
    }

    pub fn sys(&self) -> PathBuf {
        self.root.join("sys")
    }

    pub fn firmware(&self) -> PathBuf {
        self.root.join("firmware")
    }

    /// Write `text` to `rel` under the root, creating its directory.
    pub fn write(&self, rel: &str, text: &str) {
        let path = self.root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    pub fn remove(&self, rel: &str) {
        std::fs::remove_file(self.root.join(rel)).unwrap();
    }

    /// `/proc/meminfo` with a 2 MiB default hugepage size.
    pub fn set_hugepages(&self, total: u64, free: u64) {
        self.write(
            "proc/meminfo",
            &format!(
                "MemTotal:       65536000 kB\nHugePages_Total:   {total:>5}\nHugePages_Free:    \
                 {free:>5}\nHugePages_Rsvd:        0\nHugePages_Surp:        0\nHugepagesize:       \
                 2048 kB\n"
            ),
        );
    }

    /// `/proc/self/limits` with this soft and hard `Max locked memory`.
    pub fn set_memlock(&self, limit: &str) {
        self.write(
            "proc/self/limits",
            &format!(
                "Limit                     Soft Limit           Hard Limit           Units     \n\
                 Max open files            1024                 524288               files     \n\
                 Max locked memory         {limit:<20} {limit:<20} bytes     \n"
            ),
        );
    }

    /// `/proc/self/status` of a process with this effective uid and gid and `CapEff`.
    pub fn set_status(&self, uid: u32, gid: u32, cap_eff: &str) {
        self.write(
            "proc/self/status",
            &format!(
                "Name:\tam\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\nGid:\t{gid}\t{gid}\t{gid}\t{gid}\n\
                 Groups:\t{gid} \nCapEff:\t{cap_eff}\n"
            ),
        );
    }

    /// A uid and gid that own none of the fake files and are not root: the "other" mode bits
    /// decide what such a process may open, whoever runs the test.
    pub fn stranger(&self) -> (u32, u32) {
        let meta = std::fs::metadata(&self.root).unwrap();
        let pick = |owner: u32| if owner == 4242 { 4343 } else { 4242 };
        (pick(meta.uid()), pick(meta.gid()))
    }

    pub fn device_dir(&self, bdf: &str) -> PathBuf {
        self.sys().join("bus/pci/devices").join(bdf)
    }

    /// A PCI function with the attributes `sysfs::scan` and `am doctor` read; `bars` are
    /// (index, size) pairs of 64-bit memory BARs, the `resourceN` files empty (never mapped).
    pub fn add_function(
        &self,
        bdf: &str,
        vendor: u16,
        device: u16,
        class: u32,
        bars: &[(u8, u64)],
    ) {
        let d = self.device_dir(bdf);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("vendor"), format!("{vendor:#06x}\n")).unwrap();
        std::fs::write(d.join("device"), format!("{device:#06x}\n")).unwrap();
        std::fs::write(d.join("class"), format!("{class:#08x}\n")).unwrap();
        std::fs::write(d.join("config"), [0u8; 256]).unwrap();
        std::fs::write(d.join("enable"), "0\n").unwrap();
        let mut resource = String::new();
        let mut start = 0x60_0000_0000u64;
        for i in 0..13u8 {
            match bars.iter().find(|(index, _)| *index == i) {
                Some(&(_, size)) => {
                    resource.push_str(&format!(
                        "{start:#018x} {:#018x} 0x000000000014220c\n",
                        start + size - 1
                    ));
                    std::fs::write(d.join(format!("resource{i}")), "").unwrap();
                    start += size;
                }
                None => resource.push_str(&format!("{0:#018x} {0:#018x} {0:#018x}\n", 0)),
            }
        }
        std::fs::write(d.join("resource"), resource).unwrap();
        for f in ["config", "enable", "resource0", "resource2", "resource5"] {
            let p = d.join(f);
            if p.exists() {
                std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o666)).unwrap();
            }
        }
    }

    /// A Navi 31 with a 256 MiB BAR0 that `resource0_resize` can grow to `resizable_to`
    /// (bit n of the mask = 2^n MiB), or no `resource0_resize` for `None`.
    pub fn add_gpu(&self, bdf: &str, device: u16, resizable_to: Option<u64>) {
        self.add_function(
            bdf,
            0x1002,
            device,
            0x030000,
            &[(0, 256 << 20), (2, 2 << 20), (5, 1 << 20)],
        );
        if let Some(max) = resizable_to {
            let top = (max >> 20).ilog2();
            let mask: u64 = (1u64 << (top + 1)) - (1 << 8); // 256 MiB up to `max`
            std::fs::write(
                self.device_dir(bdf).join("resource0_resize"),
                format!("{mask:016x}\n"),
            )
            .unwrap();
        }
    }

    /// Bind `driver` to `bdf`: `drivers/NAME/unbind` and the device's `driver` link.
    pub fn bind(&self, bdf: &str, driver: &str) {
        let drv = self.sys().join("bus/pci/drivers").join(driver);
        std::fs::create_dir_all(&drv).unwrap();
        let unbind = drv.join("unbind");
        std::fs::write(&unbind, "").unwrap();
        std::fs::set_permissions(&unbind, std::fs::Permissions::from_mode(0o222)).unwrap();
        symlink(&drv, self.device_dir(bdf).join("driver")).unwrap();
    }

    /// Put `bdf` in IOMMU group `group` of default domain `kind` (`identity`, `DMA-FQ`): the
    /// group's `devices/BDF` link and the device's `iommu_group` link.
    pub fn join_group(&self, bdf: &str, group: u32, kind: &str) {
        let g = self
            .sys()
            .join("kernel/iommu_groups")
            .join(group.to_string());
        std::fs::create_dir_all(g.join("devices")).unwrap();
        std::fs::write(g.join("type"), format!("{kind}\n")).unwrap();
        let dev = self.device_dir(bdf);
        let member = g.join("devices").join(bdf);
        if !member.exists() {
            symlink(&dev, member).unwrap();
        }
        symlink(&g, dev.join("iommu_group")).unwrap();
    }

    /// The options that point `am doctor` at this machine.
    pub fn args(&self) -> Vec<String> {
        let r = |p: &str| self.root.join(p).to_str().unwrap().to_string();
        vec![
            "--sysfs-root".into(),
            r("sys"),
            "--proc-root".into(),
            r("proc"),
            "--dev-root".into(),
            r("dev"),
            "--firmware-dir".into(),
            r("firmware"),
        ]
    }

    /// `am doctor EXTRA… --…-root …` with only `env` in its environment.
    pub fn doctor(&self, extra: &[&str], env: &[(&str, &str)]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_am"))
            .arg("doctor")
            .args(extra)
            .args(self.args())
            .env_clear()
            .envs(env.iter().copied())
            .output()
            .unwrap()
    }

    /// `am fw synth --profile PROFILE` into the firmware directory.
    pub fn synth_firmware(&self, profile: &str) {
        let out = Command::new(env!("CARGO_BIN_EXE_am"))
            .args(["fw", "synth", "--profile", profile])
            .arg(self.firmware())
            .env_clear()
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    pub fn root(&self) -> &Path {
        &self.root
    }
}

impl Drop for FakeMachine {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}
