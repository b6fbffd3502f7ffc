//! Which firmware files the driver loads for a set of IP versions.

use std::fmt;

use crate::error::{FirmwareError, Result};

/// An IP block version as IP discovery reports it (one type with the register tables' and
/// the driver's).
pub use am_autogen::regs::IpVersion;

/// The IP versions that decide which firmware the driver loads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IpVersions {
    /// Graphics core (GC_HWIP).
    pub gc: IpVersion,
    /// PSP (MP0_HWIP).
    pub mp0: IpVersion,
    /// SMU (MP1_HWIP).
    pub mp1: IpVersion,
    /// SDMA (SDMA0_HWIP).
    pub sdma: IpVersion,
}

impl IpVersions {
    /// Radeon RX 7900 XTX (gfx1100).
    pub const NAVI31: Self = Self {
        gc: IpVersion::new(11, 0, 0),
        mp0: IpVersion::new(13, 0, 0),
        mp1: IpVersion::new(13, 0, 0),
        sdma: IpVersion::new(6, 0, 0),
    };
    /// Instinct MI300X (gfx942).
    pub const MI300X: Self = Self {
        gc: IpVersion::new(9, 4, 3),
        mp0: IpVersion::new(13, 0, 6),
        mp1: IpVersion::new(13, 0, 6),
        sdma: IpVersion::new(4, 4, 2),
    };
    /// Instinct MI350X (gfx950).
    pub const MI350X: Self = Self {
        gc: IpVersion::new(9, 5, 0),
        mp0: IpVersion::new(13, 0, 14),
        mp1: IpVersion::new(13, 0, 14),
        sdma: IpVersion::new(4, 4, 5),
    };
    /// Radeon RX 9070 XT (Navi 48, gfx1201).
    pub const NAVI48: Self = Self {
        gc: IpVersion::new(12, 0, 1),
        mp0: IpVersion::new(14, 0, 3),
        mp1: IpVersion::new(14, 0, 3),
        sdma: IpVersion::new(7, 0, 1),
    };
    /// Navi 44 (gfx1200).
    pub const NAVI44: Self = Self {
        gc: IpVersion::new(12, 0, 0),
        mp0: IpVersion::new(14, 0, 2),
        mp1: IpVersion::new(14, 0, 2),
        sdma: IpVersion::new(7, 0, 0),
    };

    /// The named profiles, in the order tools list them.
    pub const PROFILES: [(&'static str, Self); 5] = [
        ("navi31", Self::NAVI31),
        ("navi48", Self::NAVI48),
        ("navi44", Self::NAVI44),
        ("mi300x", Self::MI300X),
        ("mi350x", Self::MI350X),
    ];

    /// The IP versions of a named profile. The mock's `mi350x-vf` profile has the same
    /// IP versions as `mi350x`.
    pub fn by_name(name: &str) -> Result<Self> {
        let base = name.strip_suffix("-vf").unwrap_or(name);
        Self::PROFILES
            .iter()
            .find(|(n, _)| *n == base)
            .map(|(_, v)| *v)
            .ok_or_else(|| FirmwareError::UnknownProfile(name.to_string()))
    }

    /// The firmware files the driver loads, in the order it loads them.
    ///
    /// This is the list of tinygrad's AM driver (`AMFirmware`): the PSP sOS, the SMU
    /// (except on MP1 13.0.12, whose firmware is in the IFWI), SDMA, the CP microcode (MEC;
    /// PFP and ME too from GC 12 on — compute-only bring-up never starts the graphics
    /// rings before that), the IMU (GC ≥ 11) and the RLC.
    pub fn files(&self) -> Vec<FileSpec> {
        let mut files = vec![FileSpec::new(
            Role::Sos,
            format!("psp_{}_sos.bin", self.mp0.file_tag()),
        )];
        if self.loads_smu_firmware() {
            files.push(FileSpec::new(
                Role::Smu,
                format!("smu_{}.bin", self.mp1.file_tag()),
            ));
        }
        files.push(FileSpec::new(
            Role::Sdma,
            format!("sdma_{}.bin", self.sdma.file_tag()),
        ));
        let gc = self.gc.file_tag();
        if self.gc >= IpVersion::new(12, 0, 0) {
            files.push(FileSpec::new(Role::Pfp, format!("gc_{gc}_pfp.bin")));
            files.push(FileSpec::new(Role::Me, format!("gc_{gc}_me.bin")));
        }
        files.push(FileSpec::new(Role::Mec, format!("gc_{gc}_mec.bin")));
        if self.gc >= IpVersion::new(11, 0, 0) {
            files.push(FileSpec::new(Role::Imu, format!("gc_{gc}_imu.bin")));
        }
        files.push(FileSpec::new(Role::Rlc, format!("gc_{gc}_rlc.bin")));
        files
    }

    /// MP1 13.0.12 boots its SMU firmware from the IFWI; everything else gets it from the
    /// driver (through PSP on GC ≥ 11, as P2S tables before that).
    pub fn loads_smu_firmware(&self) -> bool {
        self.mp1 != IpVersion::new(13, 0, 12)
    }
}

impl fmt::Display for IpVersions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "GC {}, MP0 {}, MP1 {}, SDMA {}",
            self.gc, self.mp0, self.mp1, self.sdma
        )
    }
}

/// The part a file plays in the bring-up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    /// PSP secure OS and its bootloader components (`psp_*_sos.bin`).
    Sos,
    /// SMU firmware (`smu_*.bin`).
    Smu,
    /// SDMA engine microcode (`sdma_*.bin`).
    Sdma,
    /// CP pre-fetch parser (`gc_*_pfp.bin`).
    Pfp,
    /// CP micro engine (`gc_*_me.bin`).
    Me,
    /// CP compute micro engine (`gc_*_mec.bin`).
    Mec,
    /// Integrated management unit (`gc_*_imu.bin`).
    Imu,
    /// Run list controller (`gc_*_rlc.bin`).
    Rlc,
}

impl Role {
    /// Short upper-case name, as the driver logs it.
    pub fn name(self) -> &'static str {
        match self {
            Role::Sos => "SOS",
            Role::Smu => "SMU",
            Role::Sdma => "SDMA",
            Role::Pfp => "PFP",
            Role::Me => "ME",
            Role::Mec => "MEC",
            Role::Imu => "IMU",
            Role::Rlc => "RLC",
        }
    }
}

/// One file the driver loads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileSpec {
    /// What it is for.
    pub role: Role,
    /// File name under the firmware directory.
    pub name: String,
}

impl FileSpec {
    fn new(role: Role, name: String) -> Self {
        Self { role, name }
    }
}
