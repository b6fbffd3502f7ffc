//! IP blocks as the driver names them (`amd_hw_ip_block_type` of `amdgpu.h`) and their
//! discovery hardware ids (`soc15_hw_ip.h`, mapped as `hw_id_map` of `amdgpu_discovery.c`).

use std::fmt;

/// An IP block kind. Several kinds can share one hardware id (NBIO and NBIF).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum HwIp {
    /// Graphics and compute (one instance per XCC).
    Gc,
    /// Host data path.
    Hdp,
    /// System DMA engine 0 (all engines on GFX9 parts).
    Sdma0,
    /// System DMA engine 1.
    Sdma1,
    /// System DMA engine 2.
    Sdma2,
    /// System DMA engine 3.
    Sdma3,
    /// Memory hub (one instance per AID on multi-die parts).
    Mmhub,
    /// Northbridge I/O.
    Nbio,
    /// PSP.
    Mp0,
    /// SMU.
    Mp1,
    /// Interrupt handler.
    Osssys,
    /// SMU I/O.
    Smuio,
    /// Video codec.
    Vcn,
    /// Data fabric.
    Df,
    /// Memory controllers.
    Umc,
    /// ATC hub.
    Athub,
    /// XGMI links.
    Xgmi,
}

impl HwIp {
    /// Every kind, in `amd_hw_ip_block_type` order.
    pub const ALL: [HwIp; 17] = [
        HwIp::Gc,
        HwIp::Hdp,
        HwIp::Sdma0,
        HwIp::Sdma1,
        HwIp::Sdma2,
        HwIp::Sdma3,
        HwIp::Mmhub,
        HwIp::Nbio,
        HwIp::Mp0,
        HwIp::Mp1,
        HwIp::Osssys,
        HwIp::Smuio,
        HwIp::Vcn,
        HwIp::Df,
        HwIp::Umc,
        HwIp::Athub,
        HwIp::Xgmi,
    ];
}

/// Discovery hardware id of an IP block.
pub fn hw_id(ip: HwIp) -> Option<u16> {
    use crate::discovery_layout as ids;
    Some(match ip {
        HwIp::Gc => ids::GC_HWID,
        HwIp::Hdp => ids::HDP_HWID,
        HwIp::Sdma0 => ids::SDMA0_HWID,
        HwIp::Sdma1 => ids::SDMA1_HWID,
        HwIp::Sdma2 => ids::SDMA2_HWID,
        HwIp::Sdma3 => ids::SDMA3_HWID,
        HwIp::Mmhub => ids::MMHUB_HWID,
        HwIp::Nbio => ids::NBIF_HWID,
        HwIp::Mp0 => ids::MP0_HWID,
        HwIp::Mp1 => ids::MP1_HWID,
        HwIp::Osssys => ids::OSSSYS_HWID,
        HwIp::Smuio => ids::SMUIO_HWID,
        HwIp::Vcn => ids::UVD_HWID,
        HwIp::Df => ids::DF_HWID,
        HwIp::Umc => ids::UMC_HWID,
        HwIp::Athub => ids::ATHUB_HWID,
        HwIp::Xgmi => ids::XGMI_HWID,
    })
}

/// The block's name as Linux prints it (`GC`, `MMHUB`, …).
pub fn name(ip: HwIp) -> &'static str {
    match ip {
        HwIp::Gc => "GC",
        HwIp::Hdp => "HDP",
        HwIp::Sdma0 => "SDMA0",
        HwIp::Sdma1 => "SDMA1",
        HwIp::Sdma2 => "SDMA2",
        HwIp::Sdma3 => "SDMA3",
        HwIp::Mmhub => "MMHUB",
        HwIp::Nbio => "NBIO",
        HwIp::Mp0 => "MP0",
        HwIp::Mp1 => "MP1",
        HwIp::Osssys => "OSSSYS",
        HwIp::Smuio => "SMUIO",
        HwIp::Vcn => "VCN",
        HwIp::Df => "DF",
        HwIp::Umc => "UMC",
        HwIp::Athub => "ATHUB",
        HwIp::Xgmi => "XGMI",
    }
}

impl fmt::Display for HwIp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(name(*self))
    }
}

/// Name of a discovery hardware id (`hw_id_names` of Linux), for ids no [`HwIp`] covers too.
pub fn hw_id_name(hw_id: u16) -> Option<&'static str> {
    crate::discovery_layout::HW_ID_NAMES
        .iter()
        .find(|(id, _)| *id == hw_id)
        .map(|(_, n)| *n)
}
