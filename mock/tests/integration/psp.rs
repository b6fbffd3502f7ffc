//! The PSP model driven through BAR5/BAR0 as a driver would: bootloader, ring, every load of
//! the real firmware's plan, order violations and fault injection.

use std::mem::offset_of;
use std::path::PathBuf;
use std::sync::Arc;

use am_autogen::hwid::MP0_HWID;
use am_autogen::psp_gfx::{
    GFX_CMD_ID_AUTOLOAD_RLC, GFX_CMD_ID_LOAD_IP_FW, GFX_CMD_ID_LOAD_TOC, GFX_CMD_ID_SETUP_TMR,
    psp_gfx_cmd_load_ip_fw, psp_gfx_cmd_load_toc, psp_gfx_cmd_resp, psp_gfx_rb_frame,
};
use am_autogen::regs::{RegIp, table};
use am_driver::{Bar, PciDevice};
use am_firmware::locate::sha256;
use am_firmware::{FirmwareSet, GfxFwType, IpVersions, Locator, PlanOptions, PspStep};
use am_mock::MockGpu;
use am_mock::ip::gmc::FB_BASE;
use am_mock::ip::psp::{BL_BUFFER, PspLoad, TMR_SIZE};

const BL_BUF: u64 = 0x0100_0000;
const RING: u64 = 0x0200_0000;
const RING_SIZE: u32 = 0x1000;
const CMD: u64 = 0x0200_1000;
const FENCE: u64 = 0x0200_2000;
const FW: u64 = 0x0300_0000;
const POLLS: usize = 100;

/// A minimal driver of the PSP mailbox, written from the fact sheet.
struct Drv {
    gpu: MockGpu,
    mmio: Arc<dyn Bar>,
    vram: Arc<dyn Bar>,
    wptr: u32,
    /// Register polls the last `submit` needed before its fence landed.
    last_polls: usize,
}

impl Drv {
    fn new(gpu: &MockGpu) -> Self {
        let dev = gpu.open();
        Self {
            gpu: gpu.clone(),
            mmio: dev.bar(5).unwrap(),
            vram: dev.bar(0).unwrap(),
            wptr: 0,
            last_polls: 0,
        }
    }

    /// BAR5 byte offset from the MP table the profile places at its MP0 bases: `MP0_SMN_`
    /// names before MP0 14, `MPASP_SMN_` from 14 on (MP 14.0.3 is served by 14.0.2's table).
    fn reg(&self, n: u32) -> u64 {
        let i = self.gpu.profile().instances(MP0_HWID).next().unwrap();
        let t = i.regs.unwrap();
        let prefix = if t.version.major >= 14 {
            "MPASP"
        } else {
            "MP0"
        };
        let r = table(t.ip, t.version)
            .unwrap()
            .by_name(&format!("{prefix}_SMN_C2PMSG_{n}"))
            .unwrap();
        (i.bases[usize::from(r.base_idx())] + u64::from(r.offset())) * 4
    }

    fn rd(&self, n: u32) -> am_driver::Result<u32> {
        self.mmio.read32(self.reg(n))
    }

    fn wr(&self, n: u32, v: u32) -> am_driver::Result<()> {
        self.mmio.write32(self.reg(n), v)
    }

    fn wait(&self, n: u32, mask: u32, want: u32) -> Result<u32, String> {
        for _ in 0..POLLS {
            let v = self.rd(n).map_err(|e| e.to_string())?;
            if v & mask == want {
                return Ok(v);
            }
        }
        Err(format!("timeout waiting for C2PMSG_{n}"))
    }

    fn bootloader(&self, cmd: u32, bytes: &[u8], wait_after: bool) -> Result<(), String> {
        self.wait(35, 0x8000_0000, 0x8000_0000)?;
        self.vram
            .write_bytes(BL_BUF, &vec![0u8; BL_BUFFER])
            .unwrap();
        self.vram.write_bytes(BL_BUF, bytes).unwrap();
        self.wr(36, ((FB_BASE + BL_BUF) >> 20) as u32)
            .map_err(|e| e.to_string())?;
        self.wr(35, cmd).map_err(|e| e.to_string())?;
        if wait_after {
            self.wait(35, 0x8000_0000, 0x8000_0000)?;
        }
        Ok(())
    }

    fn ring_create(&self) -> Result<(), String> {
        self.wait(64, 0x8000_0000, 0x8000_0000)?;
        let mc = FB_BASE + RING;
        self.wr(69, mc as u32).unwrap();
        self.wr(70, (mc >> 32) as u32).unwrap();
        self.wr(71, RING_SIZE).unwrap();
        self.wr(64, 2 << 16).map_err(|e| e.to_string())?;
        self.wait(64, 0x8000_ffff, 0x8000_0000).map(|_| ())
    }

    /// Submit one command; Ok(resp.status, resp.tmr_size) once the fence lands.
    fn submit(&mut self, id: u32, cmd: &[u8]) -> Result<(u32, u32), String> {
        let mut buf = vec![0u8; 1024];
        let at = offset_of!(psp_gfx_cmd_resp, cmd_id);
        buf[at..at + 4].copy_from_slice(&id.to_le_bytes());
        let at = offset_of!(psp_gfx_cmd_resp, cmd);
        buf[at..at + cmd.len()].copy_from_slice(cmd);
        self.vram.write_bytes(CMD, &buf).unwrap();
        self.vram.write_bytes(FENCE, &[0u8; 4]).unwrap();
        let fence_value = self.wptr / 16 + 1;
        let mut f = [0u32; 16];
        let cmd_mc = FB_BASE + CMD;
        let fence_mc = FB_BASE + FENCE;
        f[offset_of!(psp_gfx_rb_frame, cmd_buf_addr_lo) / 4] = cmd_mc as u32;
        f[offset_of!(psp_gfx_rb_frame, cmd_buf_addr_hi) / 4] = (cmd_mc >> 32) as u32;
        f[offset_of!(psp_gfx_rb_frame, cmd_buf_size) / 4] = 1024;
        f[offset_of!(psp_gfx_rb_frame, fence_addr_lo) / 4] = fence_mc as u32;
        f[offset_of!(psp_gfx_rb_frame, fence_addr_hi) / 4] = (fence_mc >> 32) as u32;
        f[offset_of!(psp_gfx_rb_frame, fence_value) / 4] = fence_value;
        let bytes: Vec<u8> = f.iter().flat_map(|d| d.to_le_bytes()).collect();
        let slot = u64::from(self.wptr % (RING_SIZE / 4)) * 4;
        self.vram.write_bytes(RING + slot, &bytes).unwrap();
        self.wptr += 16;
        self.wr(67, self.wptr).map_err(|e| e.to_string())?;
        for polls in 0..POLLS {
            if self.vram.read32(FENCE).unwrap() == fence_value {
                self.last_polls = polls;
                let resp = CMD + offset_of!(psp_gfx_cmd_resp, resp) as u64;
                return Ok((
                    self.vram.read32(resp).unwrap(),
                    self.vram.read32(resp + 16).unwrap(),
                ));
            }
            self.rd(67).map_err(|e| e.to_string())?;
        }
        Err(format!("timeout waiting for the fence of command {id:#x}"))
    }

    fn load_ip_fw(&mut self, fw_type: u32, bytes: &[u8]) -> Result<(u32, u32), String> {
        self.vram.write_bytes(FW, bytes).unwrap();
        let mc = FB_BASE + FW;
        let c = psp_gfx_cmd_load_ip_fw {
            fw_phy_addr_lo: mc as u32,
            fw_phy_addr_hi: (mc >> 32) as u32,
            fw_size: bytes.len() as u32,
            fw_type,
        };
        self.submit(GFX_CMD_ID_LOAD_IP_FW, zerocopy::IntoBytes::as_bytes(&c))
    }
}

fn padded_sha(bytes: &[u8]) -> [u8; 32] {
    let mut buf = vec![0u8; BL_BUFFER];
    buf[..bytes.len()].copy_from_slice(bytes);
    sha256(&buf)
}

fn plan(ips: IpVersions) -> am_firmware::LoadPlan {
    let loc = Locator::new(vec![PathBuf::from("/lib/firmware/amdgpu")]);
    let set = FirmwareSet::load(ips, &loc).unwrap();
    set.plan(PlanOptions::default()).unwrap()
}

fn boot_sos(d: &Drv) {
    for (i, cmd) in [0x80000u32, 0x10000, 0x20000].into_iter().enumerate() {
        let bytes = vec![0xa5u8 ^ i as u8; 4096];
        d.bootloader(cmd, &bytes, cmd != 0x20000).unwrap();
    }
}

#[test]
fn navi31_full_load_of_the_debian_firmware_matches_the_plan() {
    full_load("navi31", IpVersions::NAVI31, true);
}

/// The PSP 14 handshake of a GC 12 driver (`MPASP_SMN_C2PMSG_*`): Debian's
/// `psp_14_0_3`/`gc_12_0_1` (navi48) and `psp_14_0_2`/`gc_12_0_0` (navi44) firmware, each step
/// of the plan logged as the plan says, RLC autoload ending it.
#[test]
fn navi48_full_load_of_the_debian_firmware_matches_the_plan() {
    full_load("navi48", navi4x_ips("navi48"), true);
}

#[test]
fn navi44_full_load_of_the_debian_firmware_matches_the_plan() {
    full_load("navi44", navi4x_ips("navi44"), true);
}

/// The firmware-deciding IP versions of a profile, as discovery gives them to the driver.
fn navi4x_ips(profile: &str) -> IpVersions {
    let p = am_mock::Profile::by_name(profile).unwrap();
    let v = |hw| p.version(hw).unwrap();
    IpVersions {
        gc: v(am_autogen::hwid::GC_HWID),
        mp0: v(MP0_HWID),
        mp1: v(am_autogen::hwid::MP1_HWID),
        sdma: v(am_autogen::hwid::SDMA0_HWID),
    }
}

#[test]
fn mi300x_full_load_of_the_debian_firmware_matches_the_plan() {
    full_load("mi300x", IpVersions::MI300X, false);
}

/// The GFX model's RLC status as a driver polls it: GC 11
/// `RLC_RLCS_BOOTLOAD_STATUS.BOOTLOAD_COMPLETE`, else `CP_STAT == 0`.
fn gfx_rlc_ready(gpu: &MockGpu, d: &Drv) -> Option<bool> {
    let map = gpu.register_map();
    let rd = |name| {
        let id = map.find(RegIp::Gc, name, 0)?;
        Some((
            map.info(id).version,
            d.mmio.read32(map.info(id).addr * 4).unwrap(),
        ))
    };
    match rd("RLC_RLCS_BOOTLOAD_STATUS") {
        Some((ver, v)) => {
            let reg = table(RegIp::Gc, ver)?.by_name("RLC_RLCS_BOOTLOAD_STATUS")?;
            Some(reg.field("BOOTLOAD_COMPLETE")?.get(v) == 1)
        }
        None => rd("CP_STAT").map(|(_, v)| v == 0),
    }
}

fn full_load(profile: &str, ips: IpVersions, autoload: bool) {
    let plan = plan(ips);
    let gpu = MockGpu::new(profile).unwrap();
    let mut d = Drv::new(&gpu);
    let mut want = Vec::new();
    let mut ring = false;
    assert_eq!(gfx_rlc_ready(&gpu, &d), Some(false), "GFX before the load");
    for step in &plan.steps {
        if !matches!(step, PspStep::Bootloader { .. }) && !ring {
            assert_ne!(d.rd(81).unwrap(), 0, "sOS alive after SOS");
            d.ring_create().unwrap();
            ring = true;
        }
        match step {
            PspStep::Bootloader {
                command, payload, ..
            } => {
                let bytes = payload.bytes();
                d.bootloader(command.0, bytes, command.name() != Some("LOAD_SOSDRV"))
                    .unwrap();
                want.push(PspLoad::Bootloader {
                    command: *command,
                    size: bytes.iter().rposition(|&b| b != 0).unwrap() + 1,
                    sha256: padded_sha(bytes),
                });
            }
            PspStep::LoadToc { payload } => {
                let bytes = payload.bytes();
                d.vram.write_bytes(FW, bytes).unwrap();
                let mc = FB_BASE + FW;
                let c = psp_gfx_cmd_load_toc {
                    toc_phy_addr_lo: mc as u32,
                    toc_phy_addr_hi: (mc >> 32) as u32,
                    toc_size: bytes.len() as u32,
                };
                let (status, tmr) = d
                    .submit(GFX_CMD_ID_LOAD_TOC, zerocopy::IntoBytes::as_bytes(&c))
                    .unwrap();
                assert_eq!((status, tmr), (0, TMR_SIZE));
                want.push(PspLoad::LoadToc {
                    size: bytes.len() as u32,
                    sha256: sha256(bytes),
                });
            }
            PspStep::SetupTmr => {
                assert_eq!(d.submit(GFX_CMD_ID_SETUP_TMR, &[]).unwrap().0, 0);
                want.push(PspLoad::SetupTmr);
            }
            PspStep::LoadIpFw { fw_type, payload } => {
                assert_eq!(d.load_ip_fw(fw_type.0, payload.bytes()).unwrap().0, 0);
                want.push(PspLoad::LoadIpFw {
                    fw_type: *fw_type,
                    size: payload.len() as u32,
                    sha256: sha256(payload.bytes()),
                });
            }
            PspStep::AutoloadRlc => {
                assert_eq!(
                    gfx_rlc_ready(&gpu, &d),
                    Some(false),
                    "GFX before AUTOLOAD_RLC"
                );
                assert_eq!(d.submit(GFX_CMD_ID_AUTOLOAD_RLC, &[]).unwrap().0, 0);
                want.push(PspLoad::AutoloadRlc);
            }
        }
    }
    assert!(gpu.violations().is_empty(), "{:?}", gpu.violations());
    assert!(want.len() > 10, "the plan loads every firmware");
    assert_eq!(gpu.with_psp(|p| p.log().to_vec()), want);
    assert_eq!(gpu.with_psp(|p| p.rlc_autoload_requested()), autoload);
    // What the GFX model shows of it: GC 11's bootload status, GC 9.4.3's CP_STAT.
    assert_eq!(gfx_rlc_ready(&gpu, &d), Some(true));
    // The sOS and its ring outlive the driver instance.
    drop(d);
    let d2 = Drv::new(&gpu);
    assert_ne!(d2.rd(81).unwrap(), 0);
    assert!(gpu.with_psp(|p| p.ring_exists()));
}

#[test]
fn bootloader_component_after_sos_is_a_violation() {
    let gpu = MockGpu::new("navi31").unwrap();
    let d = Drv::new(&gpu);
    boot_sos(&d);
    let err = d.bootloader(0xB0000, &[1; 64], false);
    // The ready bit is gone once the sOS runs; writing anyway is refused.
    assert!(err.is_err());
    assert!(d.wr(35, 0xB0000).is_err());
    let v = gpu.violations();
    assert!(
        v.last()
            .unwrap()
            .reason
            .contains("PSP_BL__LOAD_SOCDRV after the sOS"),
        "{v:?}"
    );
}

/// Linux and tinygrad load each bootloader component once and only read `C2PMSG_81`; no
/// source says the PSP refuses either, so both are taken and counted as warnings.
#[test]
fn a_component_loaded_twice_and_a_write_of_the_alive_register_are_warnings() {
    let gpu = MockGpu::new("navi31").unwrap();
    let d = Drv::new(&gpu);
    d.bootloader(0x80000, &[1; 64], true).unwrap();
    d.bootloader(0x80000, &[2; 64], true).unwrap();
    assert!(gpu.violations().is_empty(), "{:?}", gpu.violations());
    assert_eq!(gpu.with_psp(|p| p.log().len()), 2, "both copies were read");
    let w = gpu.take_warnings();
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].reason.contains("loaded twice"), "{}", w[0].reason);
    d.wr(81, 5).unwrap();
    assert_eq!(
        d.rd(81).unwrap(),
        5,
        "a mailbox register holds what is written"
    );
    let w = gpu.take_warnings();
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].reason.contains("alive register"), "{}", w[0].reason);
    assert!(gpu.violations().is_empty(), "{:?}", gpu.violations());
}

/// No source says the bootloader refuses an empty component buffer (it would fail the
/// component's signature check, which the mock does not model): taken and counted.
#[test]
fn an_empty_bootloader_component_is_a_warning() {
    let gpu = MockGpu::new("navi31").unwrap();
    let d = Drv::new(&gpu);
    d.bootloader(0x80000, &[0; 64], true).unwrap();
    assert!(gpu.violations().is_empty(), "{:?}", gpu.violations());
    let w = gpu.take_warnings();
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].reason.contains("is empty"), "{}", w[0].reason);
}

#[test]
fn ring_command_before_the_ring_is_a_violation() {
    let gpu = MockGpu::new("navi31").unwrap();
    let mut d = Drv::new(&gpu);
    boot_sos(&d);
    let err = d
        .load_ip_fw(am_firmware::GfxFwType::SMU.0, &[1; 256])
        .unwrap_err();
    assert!(err.contains("before the ring exists"), "{err}");
}

#[test]
fn unknown_command_and_fw_type_are_named() {
    let gpu = MockGpu::new("navi31").unwrap();
    let mut d = Drv::new(&gpu);
    boot_sos(&d);
    d.ring_create().unwrap();
    let err = d.submit(0x7f, &[]).unwrap_err();
    assert!(err.contains("command id 0x7f"), "{err}");
    d.submit(GFX_CMD_ID_SETUP_TMR, &[]).unwrap();
    let err = d.load_ip_fw(0xdead, &[1; 256]).unwrap_err();
    assert!(
        err.contains("GFX_CMD_ID_LOAD_IP_FW: unknown fw_type 0xdead"),
        "{err}"
    );
}

#[test]
fn ip_firmware_before_setup_tmr_is_a_violation() {
    let gpu = MockGpu::new("navi31").unwrap();
    let mut d = Drv::new(&gpu);
    boot_sos(&d);
    d.ring_create().unwrap();
    // The SMU firmware may precede the TMR; the others may not.
    assert_eq!(
        d.load_ip_fw(am_firmware::GfxFwType::SMU.0, &[1; 256])
            .unwrap()
            .0,
        0
    );
    let err = d
        .load_ip_fw(am_firmware::GfxFwType::RS64_MEC.0, &[1; 256])
        .unwrap_err();
    assert!(
        err.contains("GFX_FW_TYPE_RS64_MEC before GFX_CMD_ID_SETUP_TMR"),
        "{err}"
    );
    let err = d.submit(GFX_CMD_ID_AUTOLOAD_RLC, &[]).unwrap_err();
    assert!(
        err.contains("AUTOLOAD_RLC before GFX_CMD_ID_SETUP_TMR"),
        "{err}"
    );
    d.submit(GFX_CMD_ID_SETUP_TMR, &[]).unwrap();
    let err = d.submit(GFX_CMD_ID_LOAD_TOC, &[0; 12]).unwrap_err();
    assert!(err.contains("LOAD_TOC after GFX_CMD_ID_SETUP_TMR"), "{err}");
    // Refused frames were consumed: only the good commands ran, once each.
    let log = gpu.with_psp(|p| p.log().to_vec());
    let ring: Vec<_> = log
        .iter()
        .filter(|l| !matches!(l, PspLoad::Bootloader { .. }))
        .collect();
    assert_eq!(ring.len(), 2, "{ring:?}");
    assert!(matches!(ring[0], PspLoad::LoadIpFw { size: 256, .. }));
    assert_eq!(ring[1], &PspLoad::SetupTmr);
}

#[test]
fn address_outside_vram_and_sysmem_is_refused() {
    let gpu = MockGpu::new("navi31").unwrap();
    let d = Drv::new(&gpu);
    d.wait(35, 0x8000_0000, 0x8000_0000).unwrap();
    // VRAM offset used as if it were an MC address (FB base forgotten).
    d.wr(36, (BL_BUF >> 20) as u32).unwrap();
    assert!(d.wr(35, 0x80000).is_err());
    let v = gpu.violations();
    assert!(
        v[0].reason.contains("neither in VRAM's MC range") || v[0].reason.contains("bus mastering"),
        "{v:?}"
    );
}

#[test]
fn never_answering_psp_leaves_the_ready_bit_clear() {
    let gpu = MockGpu::new("navi31").unwrap();
    gpu.with_psp(|p| p.faults.no_answer = true);
    let d = Drv::new(&gpu);
    assert!(
        d.bootloader(0x80000, &[1; 64], true)
            .unwrap_err()
            .contains("timeout")
    );
}

#[test]
fn never_answering_psp_never_writes_the_fence() {
    let gpu = MockGpu::new("navi31").unwrap();
    let mut d = Drv::new(&gpu);
    boot_sos(&d);
    d.ring_create().unwrap();
    gpu.with_psp(|p| p.faults.no_answer = true);
    let err = d.submit(GFX_CMD_ID_SETUP_TMR, &[]).unwrap_err();
    assert!(err.contains("timeout waiting for the fence"), "{err}");
}

#[test]
fn error_status_reaches_the_response() {
    let gpu = MockGpu::new("navi31").unwrap();
    let mut d = Drv::new(&gpu);
    boot_sos(&d);
    d.ring_create().unwrap();
    gpu.with_psp(|p| p.faults.error_status = Some(0xffff_000a));
    assert_eq!(d.submit(GFX_CMD_ID_SETUP_TMR, &[]).unwrap().0, 0xffff_000a);
    // The ring answer carries the low bits too.
    d.wr(64, 0x0003_0000).unwrap();
    assert_eq!(d.rd(64).unwrap(), 0x8000_000a);
}

#[test]
fn late_answer_comes_after_the_polls() {
    let gpu = MockGpu::new("navi31").unwrap();
    gpu.with_psp(|p| p.faults.late_polls = 5);
    let d = Drv::new(&gpu);
    d.bootloader(0x80000, &[1; 64], false).unwrap();
    let mut polls = 0;
    while d.rd(35).unwrap() & 0x8000_0000 == 0 {
        polls += 1;
        assert!(polls < POLLS);
    }
    assert_eq!(polls, 4, "ready on the fifth poll");
}

#[test]
fn late_fence_is_written_after_the_polls() {
    let gpu = MockGpu::new("navi31").unwrap();
    let mut d = Drv::new(&gpu);
    boot_sos(&d);
    d.ring_create().unwrap();
    gpu.with_psp(|p| p.faults.late_polls = 3);
    d.vram.write_bytes(FENCE, &[0u8; 4]).unwrap();
    d.submit(GFX_CMD_ID_SETUP_TMR, &[]).unwrap();
    // `submit` polls C2PMSG_67 between fence reads: the fence came on the third poll.
    assert_eq!(d.last_polls, 3);
    gpu.with_psp(|p| p.faults.late_polls = 0);
    d.submit(GFX_CMD_ID_SETUP_TMR, &[]).unwrap();
    assert_eq!(d.last_polls, 0);
    gpu.with_psp(|p| p.faults.late_polls = 1000);
    let err = d.submit(GFX_CMD_ID_SETUP_TMR, &[]).unwrap_err();
    assert!(err.contains("timeout waiting for the fence"), "{err}");
}

#[test]
fn component_in_system_memory_is_read_by_dma() {
    let gpu = MockGpu::new("navi31").unwrap();
    let dev = gpu.open();
    let d = Drv::new(&gpu);
    let mem = dev.alloc_sysmem(BL_BUFFER, true).unwrap();
    mem.write_bytes(0, &[0x3c; 100]).unwrap();
    // Bus mastering off: the PSP cannot reach system memory.
    d.wr(36, (mem.bus_addrs()[0] >> 20) as u32).unwrap();
    assert!(d.wr(35, 0x80000).is_err());
    assert!(
        gpu.take_violations()[0]
            .reason
            .contains("bus mastering is off")
    );
    let cmd = dev.config_read(4, 2).unwrap();
    dev.config_write(4, 2, cmd | 4).unwrap();
    d.wr(35, 0x80000).unwrap();
    match gpu.with_psp(|p| p.log().to_vec()).as_slice() {
        [PspLoad::Bootloader { size, .. }] => assert_eq!(*size, 100),
        other => panic!("{other:?}"),
    }
}

#[test]
fn mi300x_boot_and_spatial_partition() {
    let gpu = MockGpu::new("mi300x").unwrap();
    let mut d = Drv::new(&gpu);
    boot_sos(&d);
    d.ring_create().unwrap();
    let mode = 1u32.to_le_bytes();
    assert_eq!(d.submit(0x27, &mode).unwrap().0, 0);
    assert_eq!(
        gpu.with_psp(|p| p.log().last().cloned()),
        Some(PspLoad::SpatialPartition { mode: 1 })
    );
    assert!(gpu.violations().is_empty(), "{:?}", gpu.violations());
}

/// PSP 14 sets the TMR up when the sOS starts: firmware goes in without SETUP_TMR. A
/// SETUP_TMR (what a PSP 13 driver would send) is taken — no source says the sOS refuses it
/// — and counted as a warning naming the MP0 version.
#[test]
fn navi48_psp14_has_a_boot_time_tmr_and_counts_a_setup_tmr() {
    let gpu = MockGpu::new("navi48").unwrap();
    let mut d = Drv::new(&gpu);
    boot_sos(&d);
    d.ring_create().unwrap();
    assert_eq!(
        d.load_ip_fw(GfxFwType::SDMA_UCODE_TH0.0, &[7; 256])
            .unwrap()
            .0,
        0
    );
    assert!(gpu.warnings().is_empty(), "{:?}", gpu.warnings());
    assert_eq!(d.submit(GFX_CMD_ID_SETUP_TMR, &[]).unwrap().0, 0);
    let w = gpu.take_warnings();
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].reason.contains("on MP0 14.0.3"), "{}", w[0].reason);
    assert!(w[0].reason.contains("without SETUP_TMR"), "{}", w[0].reason);
    assert!(gpu.violations().is_empty(), "{:?}", gpu.violations());
}
