//! The PSP's names for firmware: sOS component types, bootloader commands and the
//! `GFX_FW_TYPE_*` ids of `GFX_CMD_ID_LOAD_IP_FW`.

use std::fmt;

use am_autogen::{psp_gfx, ucode};

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

id_type!(
    /// `enum psp_gfx_fw_type` of `psp_gfx_if.h`: the `fw_type` of a
    /// `GFX_CMD_ID_LOAD_IP_FW` command.
    GfxFwType, "GFX_FW_TYPE_", {
        /// CP ME (F32).
        CP_ME = psp_gfx::GFX_FW_TYPE_CP_ME,
        /// CP PFP (F32).
        CP_PFP = psp_gfx::GFX_FW_TYPE_CP_PFP,
        /// CP CE.
        CP_CE = psp_gfx::GFX_FW_TYPE_CP_CE,
        /// CP MEC (F32).
        CP_MEC = psp_gfx::GFX_FW_TYPE_CP_MEC,
        /// CP MEC jump table 1.
        CP_MEC_ME1 = psp_gfx::GFX_FW_TYPE_CP_MEC_ME1,
        /// CP MEC jump table 2.
        CP_MEC_ME2 = psp_gfx::GFX_FW_TYPE_CP_MEC_ME2,
        /// RLC V.
        RLC_V = psp_gfx::GFX_FW_TYPE_RLC_V,
        /// RLC G.
        RLC_G = psp_gfx::GFX_FW_TYPE_RLC_G,
        /// SDMA engine 0.
        SDMA0 = psp_gfx::GFX_FW_TYPE_SDMA0,
        /// SDMA engine 1.
        SDMA1 = psp_gfx::GFX_FW_TYPE_SDMA1,
        /// SMU.
        SMU = psp_gfx::GFX_FW_TYPE_SMU,
        /// RLC save/restore list GPM memory.
        RLC_RESTORE_LIST_GPM_MEM = psp_gfx::GFX_FW_TYPE_RLC_RESTORE_LIST_GPM_MEM,
        /// RLC save/restore list SRM memory.
        RLC_RESTORE_LIST_SRM_MEM = psp_gfx::GFX_FW_TYPE_RLC_RESTORE_LIST_SRM_MEM,
        /// RLC save/restore list SRM control.
        RLC_RESTORE_LIST_SRM_CNTL = psp_gfx::GFX_FW_TYPE_RLC_RESTORE_LIST_SRM_CNTL,
        /// TOC.
        TOC = psp_gfx::GFX_FW_TYPE_TOC,
        /// RLC P.
        RLC_P = psp_gfx::GFX_FW_TYPE_RLC_P,
        /// RLC instruction RAM.
        RLC_IRAM = psp_gfx::GFX_FW_TYPE_RLC_IRAM,
        /// RLC DRAM boot image.
        RLC_DRAM_BOOT = psp_gfx::GFX_FW_TYPE_RLC_DRAM_BOOT,
        /// SDMA engine 2.
        SDMA2 = psp_gfx::GFX_FW_TYPE_SDMA2,
        /// SDMA engine 3.
        SDMA3 = psp_gfx::GFX_FW_TYPE_SDMA3,
        /// Register list.
        REG_LIST = psp_gfx::GFX_FW_TYPE_REG_LIST,
        /// IMU instructions.
        IMU_I = psp_gfx::GFX_FW_TYPE_IMU_I,
        /// IMU data.
        IMU_D = psp_gfx::GFX_FW_TYPE_IMU_D,
        /// SDMA thread 0 (context).
        SDMA_UCODE_TH0 = psp_gfx::GFX_FW_TYPE_SDMA_UCODE_TH0,
        /// SDMA thread 1 (control).
        SDMA_UCODE_TH1 = psp_gfx::GFX_FW_TYPE_SDMA_UCODE_TH1,
        /// RS64 PFP.
        RS64_PFP = psp_gfx::GFX_FW_TYPE_RS64_PFP,
        /// RS64 ME.
        RS64_ME = psp_gfx::GFX_FW_TYPE_RS64_ME,
        /// RS64 MEC.
        RS64_MEC = psp_gfx::GFX_FW_TYPE_RS64_MEC,
        /// RS64 PFP stack, pipe 0.
        RS64_PFP_P0_STACK = psp_gfx::GFX_FW_TYPE_RS64_PFP_P0_STACK,
        /// RS64 PFP stack, pipe 1.
        RS64_PFP_P1_STACK = psp_gfx::GFX_FW_TYPE_RS64_PFP_P1_STACK,
        /// RS64 ME stack, pipe 0.
        RS64_ME_P0_STACK = psp_gfx::GFX_FW_TYPE_RS64_ME_P0_STACK,
        /// RS64 ME stack, pipe 1.
        RS64_ME_P1_STACK = psp_gfx::GFX_FW_TYPE_RS64_ME_P1_STACK,
        /// RS64 MEC stack, pipe 0.
        RS64_MEC_P0_STACK = psp_gfx::GFX_FW_TYPE_RS64_MEC_P0_STACK,
        /// RS64 MEC stack, pipe 1.
        RS64_MEC_P1_STACK = psp_gfx::GFX_FW_TYPE_RS64_MEC_P1_STACK,
        /// RS64 MEC stack, pipe 2.
        RS64_MEC_P2_STACK = psp_gfx::GFX_FW_TYPE_RS64_MEC_P2_STACK,
        /// RS64 MEC stack, pipe 3.
        RS64_MEC_P3_STACK = psp_gfx::GFX_FW_TYPE_RS64_MEC_P3_STACK,
        /// SMU P2S table.
        P2S_TABLE = psp_gfx::GFX_FW_TYPE_P2S_TABLE,
    }
);
