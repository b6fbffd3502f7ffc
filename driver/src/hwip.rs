//! IP blocks as the driver names them (`amd_hw_ip_block_type` of `amdgpu.h`, generated as
//! [`HwIp`]); their discovery hardware ids (`soc15_hw_ip.h`) are mapped by [`HwIp::hw_id`].

pub use am_autogen::hwid::HwIp;

/// The block's short name as Linux prints it (`GC`, `MMHUB`, …).
pub fn name(ip: HwIp) -> &'static str {
    ip.name().trim_end_matches("_HWIP")
}
