//! Helpers shared by the firmware tests.
#![allow(dead_code, clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use am_firmware::parse::{Body, Gfx, Image, Region, Sdma};

/// A directory under the system temp dir, removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> Self {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("am-fw-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Every region a parsed image names.
pub fn regions(image: &Image) -> Vec<Region> {
    let mut out = vec![image.ucode];
    match &image.body {
        Body::PspSos(s) => out.extend(s.components.iter().map(|c| c.region)),
        Body::Smc(s) => out.extend(s.pptables.iter().map(|t| t.region)),
        Body::Sdma(Sdma::V1 { jt, .. }) => out.push(*jt),
        Body::Sdma(Sdma::V2 { ctx, ctl, .. }) => out.extend([*ctx, *ctl]),
        Body::Sdma(Sdma::V3 { ucode, .. }) => out.push(*ucode),
        Body::Gfx(Gfx::V1 { code, jt, .. }) => out.extend([*code, *jt]),
        Body::Gfx(Gfx::V2 { ucode, data, .. }) => out.extend([*ucode, *data]),
        Body::Imu(i) => out.extend([i.iram, i.dram]),
        Body::Rlc(r) => {
            out.extend([r.reg_list_format, r.reg_list]);
            if let Some(l) = r.restore_lists {
                out.extend([l.cntl, l.gpm, l.srm]);
            }
            if let Some((a, b)) = r.iram_dram {
                out.extend([a, b]);
            }
            if let Some((a, b)) = r.rlcp_rlcv {
                out.extend([a, b]);
            }
        }
        Body::Mes(m) => out.extend([m.ucode, m.data]),
        Body::Ta(t) => out.extend(t.bins.iter().map(|b| b.region)),
        Body::Other => {}
    }
    out
}

/// The names of a plan's steps, in order.
pub fn step_names(plan: &am_firmware::LoadPlan) -> Vec<String> {
    plan.steps.iter().map(|s| s.name()).collect()
}

pub const NAVI31_ORDER: &[&str] = &[
    "PSP_BL__LOAD_KEY_DATABASE",
    "PSP_BL__LOAD_TOS_SPL_TABLE",
    "PSP_BL__LOAD_SYSDRV",
    "PSP_BL__LOAD_SOSDRV",
    "GFX_CMD_ID_LOAD_TOC",
    "GFX_FW_TYPE_SMU",
    "GFX_CMD_ID_SETUP_TMR",
    "GFX_FW_TYPE_SDMA_UCODE_TH1",
    "GFX_FW_TYPE_SDMA_UCODE_TH0",
    "GFX_FW_TYPE_RS64_MEC",
    "GFX_FW_TYPE_RS64_MEC_P0_STACK",
    "GFX_FW_TYPE_IMU_I",
    "GFX_FW_TYPE_IMU_D",
    "GFX_FW_TYPE_RLC_IRAM",
    "GFX_FW_TYPE_RLC_DRAM_BOOT",
    "GFX_FW_TYPE_RLC_P",
    "GFX_FW_TYPE_RLC_V",
    "GFX_FW_TYPE_RLC_G",
    "GFX_CMD_ID_AUTOLOAD_RLC",
];

/// MI300X and MI350X: same sequence (GC 9.4.3 / 9.5.0, MP0 13.0.6 / 13.0.14).
pub const MI300_ORDER: &[&str] = &[
    "PSP_BL__LOAD_KEY_DATABASE",
    "PSP_BL__LOAD_TOS_SPL_TABLE",
    "PSP_BL__LOAD_SYSDRV",
    "PSP_BL__LOAD_SOCDRV",
    "PSP_BL__LOAD_INTFDRV",
    "PSP_BL__LOAD_DBGDRV",
    "PSP_BL__LOAD_RASDRV",
    "PSP_BL__LOAD_SOSDRV",
    "GFX_CMD_ID_SETUP_TMR",
    "GFX_FW_TYPE_P2S_TABLE",
    "GFX_FW_TYPE_SDMA0",
    "GFX_FW_TYPE_SDMA1",
    "GFX_FW_TYPE_SDMA2",
    "GFX_FW_TYPE_SDMA3",
    "GFX_FW_TYPE_CP_MEC",
    "GFX_FW_TYPE_CP_MEC_ME1",
    "GFX_FW_TYPE_RLC_RESTORE_LIST_SRM_CNTL",
    "GFX_FW_TYPE_RLC_RESTORE_LIST_GPM_MEM",
    "GFX_FW_TYPE_RLC_RESTORE_LIST_SRM_MEM",
    "GFX_FW_TYPE_RLC_G",
    "GFX_FW_TYPE_REG_LIST",
];
