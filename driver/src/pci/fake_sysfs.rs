//! A fake `/sys` tree in a temporary directory, laid out as Linux lays out PCI devices, so
//! the real sysfs and VFIO code paths run in tests: attributes are ordinary files (which
//! memmap2 maps like `resourceN`), `driver` and `iommu_group` are symlinks.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use crate::testutil::TempDir;

/// A fake sysfs root.
pub struct FakeSysfs {
    dir: TempDir,
}

/// One BAR of a fake device: index, bus address, size, 64-bit prefetchable or not.
pub struct FakeBar {
    pub index: u8,
    pub start: u64,
    pub size: u64,
    pub mem64: bool,
}

impl FakeSysfs {
    pub fn new() -> Self {
        let fs = Self {
            dir: TempDir::new(),
        };
        std::fs::create_dir_all(fs.root().join("bus/pci/devices")).unwrap();
        std::fs::create_dir_all(fs.root().join("bus/pci/drivers")).unwrap();
        std::fs::create_dir_all(fs.root().join("kernel/iommu_groups")).unwrap();
        fs
    }

    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    pub fn device_dir(&self, bdf: &str) -> PathBuf {
        self.root().join("bus/pci/devices").join(bdf)
    }

    /// A function with vendor/device/class attributes, a 4 KiB config space and BARs.
    pub fn add_device(&self, bdf: &str, vendor: u16, device: u16, class: u32, bars: &[FakeBar]) {
        let d = self.device_dir(bdf);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("vendor"), format!("{vendor:#06x}\n")).unwrap();
        std::fs::write(d.join("device"), format!("{device:#06x}\n")).unwrap();
        std::fs::write(d.join("class"), format!("{class:#08x}\n")).unwrap();
        let mut config = crate::pci::caps::tests::sample_config();
        config[0..2].copy_from_slice(&vendor.to_le_bytes());
        config[2..4].copy_from_slice(&device.to_le_bytes());
        config[9..12].copy_from_slice(&class.to_le_bytes()[..3]);
        std::fs::write(d.join("config"), config).unwrap();
        for f in ["enable", "remove", "reset", "driver_override"] {
            std::fs::write(d.join(f), "").unwrap();
        }
        let mut resource = String::new();
        for i in 0..13u8 {
            match bars.iter().find(|b| b.index == i) {
                Some(b) => {
                    let flags: u64 = if b.mem64 { 0x0014_220c } else { 0x0004_0200 };
                    resource.push_str(&format!(
                        "{:#018x} {:#018x} {:#018x}\n",
                        b.start,
                        b.start + b.size - 1,
                        flags
                    ));
                    let f = std::fs::File::create(d.join(format!("resource{i}"))).unwrap();
                    f.set_len(b.size).unwrap();
                }
                None => resource.push_str(&format!("{0:#018x} {0:#018x} {0:#018x}\n", 0)),
            }
        }
        std::fs::write(d.join("resource"), resource).unwrap();
    }

    /// Bind a fake driver: `drivers/NAME/{bind,unbind}` and the device's `driver` symlink.
    pub fn bind(&self, bdf: &str, driver: &str) {
        let drv = self.root().join("bus/pci/drivers").join(driver);
        std::fs::create_dir_all(&drv).unwrap();
        for f in ["bind", "unbind"] {
            std::fs::write(drv.join(f), "").unwrap();
        }
        symlink(&drv, self.device_dir(bdf).join("driver")).unwrap();
    }

    /// Put the device in IOMMU group `group`.
    pub fn set_iommu_group(&self, bdf: &str, group: u32) {
        let g = self
            .root()
            .join("kernel/iommu_groups")
            .join(group.to_string());
        std::fs::create_dir_all(&g).unwrap();
        symlink(&g, self.device_dir(bdf).join("iommu_group")).unwrap();
    }

    pub fn read(&self, bdf: &str, attr: &str) -> String {
        std::fs::read_to_string(self.device_dir(bdf).join(attr)).unwrap()
    }

    pub fn write(&self, bdf: &str, attr: &str, text: &str) {
        std::fs::write(self.device_dir(bdf).join(attr), text).unwrap()
    }
}

/// The BARs of a small Navi31: 256 MiB VRAM, 2 MiB doorbells, 1 MiB registers.
pub fn navi31_bars() -> Vec<FakeBar> {
    vec![
        FakeBar {
            index: 0,
            start: 0x60_0000_0000,
            size: 256 << 20,
            mem64: true,
        },
        FakeBar {
            index: 2,
            start: 0x60_1000_0000,
            size: 2 << 20,
            mem64: true,
        },
        FakeBar {
            index: 5,
            start: 0xfcc0_0000,
            size: 1 << 20,
            mem64: false,
        },
    ]
}
