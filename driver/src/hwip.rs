//! IP blocks as the driver names them (`amd_hw_ip_block_type` of `amdgpu.h`, generated as
//! [`HwIp`]) and their discovery hardware ids (`soc15_hw_ip.h`, mapped by `hw_id_map`).

use am_autogen::hwid as ids;

pub use am_autogen::hwid::HwIp;

/// The block's short name as Linux prints it (`GC`, `MMHUB`, …).
pub fn name(ip: HwIp) -> &'static str {
    ip.name().trim_end_matches("_HWIP")
}

/// Names of the hardware ids the driver and `am info` meet; others print as numbers.
const HW_ID_NAMES: &[(u16, &str)] = &[
    (ids::MP1_HWID, "MP1"),
    (ids::MP2_HWID, "MP2"),
    (ids::THM_HWID, "THM"),
    (ids::SMUIO_HWID, "SMUIO"),
    (ids::FUSE_HWID, "FUSE"),
    (ids::CLKA_HWID, "CLKA"),
    (ids::PWR_HWID, "PWR"),
    (ids::GC_HWID, "GC"),
    (ids::UVD_HWID, "VCN"),
    (ids::DCI_HWID, "DCI"),
    (ids::DMU_HWID, "DMU"),
    (ids::DCO_HWID, "DCO"),
    (ids::DIO_HWID, "DIO"),
    (ids::VPE_HWID, "VPE"),
    (ids::IOHC_HWID, "IOHC"),
    (ids::MMHUB_HWID, "MMHUB"),
    (ids::ATHUB_HWID, "ATHUB"),
    (ids::OSSSYS_HWID, "OSSSYS"),
    (ids::HDP_HWID, "HDP"),
    (ids::SDMA0_HWID, "SDMA0"),
    (ids::SDMA1_HWID, "SDMA1"),
    (ids::SDMA2_HWID, "SDMA2"),
    (ids::SDMA3_HWID, "SDMA3"),
    (ids::ISP_HWID, "ISP"),
    (ids::DF_HWID, "DF"),
    (ids::CLKB_HWID, "CLKB"),
    (ids::FCH_HWID, "FCH"),
    (ids::PCIE_HWID, "PCIE"),
    (ids::LSDMA_HWID, "LSDMA"),
    (ids::IOAGR_HWID, "IOAGR"),
    (ids::NBIF_HWID, "NBIF"),
    (ids::IOAPIC_HWID, "IOAPIC"),
    (ids::SYSTEMHUB_HWID, "SYSTEMHUB"),
    (ids::UMC_HWID, "UMC"),
    (ids::XGMI_HWID, "XGMI"),
    (ids::MP0_HWID, "MP0"),
];

/// Name of a discovery hardware id, when it is one the table above knows.
pub fn hw_id_name(hw_id: u16) -> Option<&'static str> {
    HW_ID_NAMES
        .iter()
        .find(|(id, _)| *id == hw_id)
        .map(|(_, n)| *n)
}
