//! The PSP's names for firmware: sOS component types, bootloader commands and the
//! `GFX_FW_TYPE_*` ids of `GFX_CMD_ID_LOAD_IP_FW`.

use std::fmt;

use am_autogen::ucode;

macro_rules! id_type {
    ($(#[$doc:meta])* $ty:ident, $prefix:literal, { $($(#[$cdoc:meta])* $name:ident = $value:expr),* $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $ty(pub u32);

        #[allow(non_upper_case_globals)]
        impl $ty {
            $($(#[$cdoc])* pub const $name: Self = Self($value);)*

            /// The header's name without its prefix (e.g. `KDB`), or `None` for a value
            /// this table does not know.
            pub fn name(self) -> Option<&'static str> {
                match self.0 {
                    $(v if v == $value => Some(stringify!($name)),)*
                    _ => None,
                }
            }

            /// The header's full name (e.g. `PSP_FW_TYPE_PSP_KDB`).
            pub fn full_name(self) -> String {
                match self.name() {
                    Some(n) => format!("{}{}", $prefix, n),
                    None => format!("{}{:#x}", $prefix, self.0),
                }
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self.name() {
                    Some(n) => f.write_str(n),
                    None => write!(f, "{:#x}", self.0),
                }
            }
        }
    };
}

id_type!(
    /// `enum psp_fw_type` of `amdgpu_ucode.h`: what a `psp_fw_bin_desc` of the sOS file
    /// holds.
    PspFwType, "PSP_FW_TYPE_PSP_", {
        /// Secure OS.
        SOS = ucode::PSP_FW_TYPE_PSP_SOS,
        /// System driver.
        SYS_DRV = ucode::PSP_FW_TYPE_PSP_SYS_DRV,
        /// Key database.
        KDB = ucode::PSP_FW_TYPE_PSP_KDB,
        /// Table of contents of the TMR.
        TOC = ucode::PSP_FW_TYPE_PSP_TOC,
        /// Security patch level table.
        SPL = ucode::PSP_FW_TYPE_PSP_SPL,
        /// Register list (loaded as `GFX_FW_TYPE_REG_LIST` on GC 9).
        RL = ucode::PSP_FW_TYPE_PSP_RL,
        /// SoC driver.
        SOC_DRV = ucode::PSP_FW_TYPE_PSP_SOC_DRV,
        /// Interface driver.
        INTF_DRV = ucode::PSP_FW_TYPE_PSP_INTF_DRV,
        /// Debug driver.
        DBG_DRV = ucode::PSP_FW_TYPE_PSP_DBG_DRV,
        /// RAS driver.
        RAS_DRV = ucode::PSP_FW_TYPE_PSP_RAS_DRV,
        /// IP key manager driver.
        IPKEYMGR_DRV = ucode::PSP_FW_TYPE_PSP_IPKEYMGR_DRV,
    }
);

// `amdgpu_psp.h` is driver-internal and not among the generated headers: values from
// Linux 6.12.
id_type!(
    /// `enum psp_bootloader_cmd` of `amdgpu_psp.h`: the value written to `C2PMSG_35` to
    /// have the PSP bootloader take a component from the 1 MiB buffer.
    BootloaderCmd, "PSP_BL__", {
        /// Load the system driver.
        LOAD_SYSDRV = 0x10000,
        /// Load the secure OS (the last component: the bootloader hands over to it).
        LOAD_SOSDRV = 0x20000,
        /// Load the key database.
        LOAD_KEY_DATABASE = 0x80000,
        /// Load the SoC driver.
        LOAD_SOCDRV = 0xB0000,
        /// Load the debug driver.
        LOAD_DBGDRV = 0xC0000,
        /// Load the interface driver.
        LOAD_INTFDRV = 0xD0000,
        /// Load the RAS driver.
        LOAD_RASDRV = 0xE0000,
        /// Load the IP key manager driver.
        LOAD_IPKEYMGRDRV = 0xF0000,
        /// Load the security patch level table.
        LOAD_TOS_SPL_TABLE = 0x10000000,
    }
);

// Values from `psp_gfx_if.h` (Linux 6.12). TODO(autogen): take them from the generated
// `psp_gfx` module once it lands, so the header stays the one source.
id_type!(
    /// `enum psp_gfx_fw_type` of `psp_gfx_if.h`: the `fw_type` of a
    /// `GFX_CMD_ID_LOAD_IP_FW` command.
    GfxFwType, "GFX_FW_TYPE_", {
        /// CP ME (F32).
        CP_ME = 1,
        /// CP PFP (F32).
        CP_PFP = 2,
        /// CP CE.
        CP_CE = 3,
        /// CP MEC (F32).
        CP_MEC = 4,
        /// CP MEC jump table 1.
        CP_MEC_ME1 = 5,
        /// CP MEC jump table 2.
        CP_MEC_ME2 = 6,
        /// RLC V.
        RLC_V = 7,
        /// RLC G.
        RLC_G = 8,
        /// SDMA engine 0.
        SDMA0 = 9,
        /// SDMA engine 1.
        SDMA1 = 10,
        /// SMU.
        SMU = 18,
        /// RLC save/restore list GPM memory.
        RLC_RESTORE_LIST_GPM_MEM = 20,
        /// RLC save/restore list SRM memory.
        RLC_RESTORE_LIST_SRM_MEM = 21,
        /// RLC save/restore list SRM control.
        RLC_RESTORE_LIST_SRM_CNTL = 22,
        /// TOC.
        TOC = 24,
        /// RLC P.
        RLC_P = 25,
        /// RLC instruction RAM.
        RLC_IRAM = 26,
        /// RLC DRAM boot image.
        RLC_DRAM_BOOT = 48,
        /// SDMA engine 2.
        SDMA2 = 52,
        /// SDMA engine 3.
        SDMA3 = 53,
        /// Register list.
        REG_LIST = 67,
        /// IMU instructions.
        IMU_I = 68,
        /// IMU data.
        IMU_D = 69,
        /// SDMA thread 0 (context).
        SDMA_UCODE_TH0 = 71,
        /// SDMA thread 1 (control).
        SDMA_UCODE_TH1 = 72,
        /// RS64 PFP.
        RS64_PFP = 87,
        /// RS64 ME.
        RS64_ME = 88,
        /// RS64 MEC.
        RS64_MEC = 89,
        /// RS64 PFP stack, pipe 0.
        RS64_PFP_P0_STACK = 90,
        /// RS64 PFP stack, pipe 1.
        RS64_PFP_P1_STACK = 91,
        /// RS64 ME stack, pipe 0.
        RS64_ME_P0_STACK = 92,
        /// RS64 ME stack, pipe 1.
        RS64_ME_P1_STACK = 93,
        /// RS64 MEC stack, pipe 0.
        RS64_MEC_P0_STACK = 94,
        /// RS64 MEC stack, pipe 1.
        RS64_MEC_P1_STACK = 95,
        /// RS64 MEC stack, pipe 2.
        RS64_MEC_P2_STACK = 96,
        /// RS64 MEC stack, pipe 3.
        RS64_MEC_P3_STACK = 97,
        /// SMU P2S table.
        P2S_TABLE = 129,
    }
);
