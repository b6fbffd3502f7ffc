//! XGMI hives: several devices sharing one memory fabric.
//!
//! Members of a hive see the same XGMI LFB registers (`MMMC_VM_XGMI_LFB_CNTL`
//! `pf_lfb_region`/`pf_max_region`, `MMMC_VM_XGMI_LFB_SIZE`); each member's region id times
//! the segment size is its `paddr_base`. A [`Hive`] is the state the members share; the GMC
//! model of each member will answer those registers from it (SR-IOV/hive work). A device
//! built outside a hive has none, and reads a zero LFB size, which the driver takes for "no
//! hive".

/// State shared by the members of one XGMI hive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hive {
    /// Number of devices (regions) in the hive.
    pub num_devices: u8,
    /// Size of each member's segment of the shared address space, in bytes.
    pub segment_size: u64,
}
