//! PSP (MP0): bootloader, ring, firmware loads, spatial partition.
//!
//! The sequence is `am_firmware`'s load plan walked step by step: the sOS components go
//! through the bootloader mailbox (`C2PMSG_35`/`C2PMSG_36`), everything else is a command
//! (`psp_gfx_cmd_resp`) submitted as a 64-byte `psp_gfx_rb_frame` on the kernel-mode ring,
//! completed when the PSP writes the frame's fence value. Every wait is bounded by
//! `ctx.timeouts.psp` and its error names the step.

use super::*;
use std::mem::{offset_of, size_of};

use am_autogen::psp_gfx::*;
use am_firmware::{BootloaderCmd, LoadPlan, Payload, PspStep};
use zerocopy::FromZeros;

use crate::mm::VramAccess;
use crate::regs::alt::*;

/// `PSP_1_MEG`: the bootloader takes a component from a 1 MiB-aligned, 1 MiB buffer.
const PSP_1_MEG: u64 = 1 << 20;
/// Ring size in bytes (64 frames), as amdgpu's `PSP_RING_SIZE`.
const RING_SIZE: u32 = 0x1000;
/// One frame in dwords (the write pointer counts dwords).
const FRAME_DW: u32 = (size_of::<psp_gfx_rb_frame>() / 4) as u32;
/// The largest TMR the driver reserves; a TOC asking for more is refused.
pub const TMR_SIZE: u64 = 0x0130_0000;
/// `PSP_TMR_ALIGNMENT`.
const TMR_ALIGN: u64 = 1 << 20;
/// `PSP_RING_TYPE__KM`.
const RING_TYPE_KM: u32 = 2;
/// `GFX_CTRL_CMD_ID_DESTROY_RINGS`.
const DESTROY_RINGS: u32 = 0x0003_0000;
/// The ready / response flag of `C2PMSG_35` and `C2PMSG_64` (`GFX_FLAG_RESPONSE`).
const RESPONSE: u32 = 0x8000_0000;
/// How long the sOS takes to tear a ring down before it answers (amdgpu sleeps 20 ms).
const DESTROY_SETTLE: Duration = Duration::from_millis(20);

/// VRAM the PSP works with (physical addresses, all from the boot pool).
#[derive(Clone, Copy, Debug)]
struct Buffers {
    /// Component / firmware staging buffer (1 MiB aligned, a whole number of MiB, as large
    /// as the plan's largest payload).
    msg1: u64,
    ring: u64,
    cmd: u64,
    fence: u64,
    /// The TMR, when the plan sets one up.
    tmr: Option<u64>,
}

/// PSP state: the load plan and what was loaded.
#[derive(Debug)]
pub struct Psp {
    /// The load plan and the buffers allocated for it (none on a VF or without firmware).
    plan: Option<(LoadPlan, Buffers)>,
    /// Which name the mailbox registers have in each `alt::C2PMSG_*`: 0 for
    /// `MP0_SMN_C2PMSG_n` (before MP0 14), 1 for `MPASP_SMN_C2PMSG_n`.
    mbox: usize,
    /// Ring write pointer in dwords (modulo the ring), once this instance created the ring.
    wptr: Option<u32>,
    fence_value: u32,
    /// Bytes at the start of the staging buffer that may be non-zero (`None`: unknown, as
    /// VRAM is before the first copy).
    msg1_dirty: Option<u64>,
    /// The TMR size the PSP asked for in its LOAD_TOC answer (else the reserved size).
    tmr_size: u32,
    /// What was loaded, in order: `(step name, bytes)`.
    pub(crate) loaded: Vec<(String, usize)>,
}

impl Psp {
    /// Allocate the buffers for `plan` (1 MiB bootloader buffer, ring, command and fence
    /// buffers, TMR), the plan `AmDevice` built for the whole bring-up.
    pub fn init_sw(ctx: &Ctx, plan: Option<LoadPlan>) -> Result<Self> {
        let alloc = |size, align| ctx.palloc(size, align, Pool::Boot);
        // A VF's PSP belongs to the PF: nothing to plan or allocate.
        let plan = plan.filter(|_| !ctx.is_vf).map(|plan| -> Result<_> {
            let steps = &plan.steps;
            let largest = steps.iter().filter_map(|s| s.payload()).map(|p| p.len());
            let msg1_size = (largest.max().unwrap_or(0) as u64).max(1);
            let bufs = Buffers {
                msg1: alloc(msg1_size.next_multiple_of(PSP_1_MEG), PSP_1_MEG)?,
                ring: alloc(u64::from(RING_SIZE), 0x1000)?,
                cmd: alloc(0x1000, 0x1000)?,
                fence: alloc(0x1000, 0x1000)?,
                tmr: (steps.contains(&PspStep::SetupTmr))
                    .then(|| alloc(TMR_SIZE, TMR_ALIGN))
                    .transpose()?,
            };
            Ok((plan, bufs))
        });
        Ok(Psp {
            plan: plan.transpose()?,
            mbox: usize::from(!ctx.regs.has(mp::MP0_SMN_C2PMSG_35)),
            wptr: None,
            fence_value: 0,
            msg1_dirty: None,
            tmr_size: TMR_SIZE as u32,
            loaded: vec![],
        })
    }

    /// Whether the sOS runs (`C2PMSG_81 != 0`).
    pub fn is_sos_alive(&self, ctx: &Ctx) -> Result<bool> {
        Ok(ctx.rreg(C2PMSG_81[self.mbox], 0)? != 0)
    }

    /// Bootloader, ring, TOC/TMR, every IP firmware, RLC autoload or REG_LIST. `soc`
    /// flushes HDP so that what the CPU wrote through BAR0 reaches VRAM before the PSP
    /// reads it.
    pub fn init_hw(&mut self, ctx: &Ctx, soc: &Soc) -> Result<()> {
        // A clone (the payloads are shared, not copied) leaves `self` free to change.
        let (plan, bufs) = (self.plan.clone()).ok_or_else(|| {
            ctx.bad("PSP init_hw without a firmware load plan (no firmware was found)")
        })?;
        self.loaded.clear();
        // A live sOS (it survived the last driver instance) already took its components.
        let sos_alive = self.is_sos_alive(ctx)?;
        let mut ring = false;
        for step in &plan.steps {
            if let PspStep::Bootloader {
                command, payload, ..
            } = step
            {
                if sos_alive {
                    continue;
                }
                self.bootloader(ctx, soc, &bufs, *command, payload.bytes())?;
            } else {
                if !ring {
                    self.ring_create(ctx, &bufs)?;
                    ring = true;
                }
                self.ring_step(ctx, soc, &bufs, step)?;
            }
            self.loaded
                .push((step.name(), step.payload().map_or(0, |p| p.len())));
        }
        Ok(())
    }

    /// Wait for the response bit (31) of the mailbox register `reg`: the bootloader's
    /// `C2PMSG_35` or the sOS's `C2PMSG_64`; a status in its low 16 bits is an error naming
    /// `what` the driver was about to do.
    fn wait_response<F>(&self, ctx: &Ctx, reg: [Reg<F>; 2], what: &str) -> Result<()> {
        let awaited = format_args!("PSP response (bit 31) for {what}");
        let v = ctx.wait_reg(
            reg[self.mbox],
            0,
            RESPONSE,
            RESPONSE,
            ctx.timeouts.psp,
            awaited,
        )?;
        check(ctx, what, v & 0xffff)
    }

    fn bootloader(
        &mut self,
        ctx: &Ctx,
        soc: &Soc,
        bufs: &Buffers,
        command: BootloaderCmd,
        bytes: &[u8],
    ) -> Result<()> {
        let name = command.full_name();
        self.wait_response(ctx, C2PMSG_35, &name)?;
        let len = bytes.len() as u64;
        if len > PSP_1_MEG {
            return Err(ctx.bad(format!(
                "{name}: component of {len:#x} bytes does not fit the 1 MiB bootloader buffer"
            )));
        }
        // The bootloader reads the whole MiB: what lies beyond the component must be zero.
        // Only the part an earlier copy (or whatever VRAM held) may have dirtied is cleared.
        ctx.vram.write(bufs.msg1, bytes)?;
        let dirty = self.msg1_dirty.unwrap_or(PSP_1_MEG).min(PSP_1_MEG);
        if dirty > len {
            ctx.vram.zero(bufs.msg1 + len, dirty - len)?;
        }
        self.msg1_dirty = Some(len);
        soc.hdp_flush(ctx)?;
        ctx.wreg(C2PMSG_36[self.mbox], 0, (ctx.mc.mc(bufs.msg1) >> 20) as u32)?;
        ctx.wreg(C2PMSG_35[self.mbox], 0, command.0)?;
        // After the sOS the bootloader hands over: C2PMSG_81 says when it runs.
        if command != BootloaderCmd::LOAD_SOSDRV {
            self.wait_response(ctx, C2PMSG_35, &name)?;
        }
        Ok(())
    }

    /// Wait for the sOS, then (re)create the kernel-mode ring.
    fn ring_create(&mut self, ctx: &Ctx, bufs: &Buffers) -> Result<()> {
        let r = ctx.regs.reg(C2PMSG_81[self.mbox])?;
        let what = "PSP sOS alive (C2PMSG_81 != 0) after PSP_BL__LOAD_SOSDRV";
        ctx.poll(ctx.timeouts.psp, what, || r.read(0).map(|v| (v != 0, v)))?;
        if ctx.rreg(C2PMSG_71[self.mbox], 0)? != 0 {
            ctx.wreg(C2PMSG_64[self.mbox], 0, DESTROY_RINGS)?;
            std::thread::sleep(DESTROY_SETTLE.min(ctx.timeouts.psp));
            self.wait_response(ctx, C2PMSG_64, "GFX_CTRL_CMD_ID_DESTROY_RINGS")?;
        }
        self.wait_response(ctx, C2PMSG_64, "ring create (sOS ready)")?;
        ctx.vram.write(bufs.ring, &[0u8; RING_SIZE as usize])?;
        let mc = ctx.mc.mc(bufs.ring);
        ctx.wreg(C2PMSG_69[self.mbox], 0, lo32(mc))?;
        ctx.wreg(C2PMSG_70[self.mbox], 0, hi32(mc))?;
        ctx.wreg(C2PMSG_71[self.mbox], 0, RING_SIZE)?;
        ctx.wreg(C2PMSG_64[self.mbox], 0, RING_TYPE_KM << 16)?;
        self.wait_response(ctx, C2PMSG_64, "ring create (PSP_RING_TYPE__KM)")?;
        self.wptr = Some(0);
        Ok(())
    }

    fn ring_step(&mut self, ctx: &Ctx, soc: &Soc, bufs: &Buffers, step: &PspStep) -> Result<()> {
        let mut name = step.name();
        // Each command body as its dwords.
        let (id, body) = match step {
            PspStep::Bootloader { .. } => return Ok(()),
            PspStep::LoadToc { payload } => (GFX_CMD_ID_LOAD_TOC, self.stage(ctx, bufs, payload)?),
            PspStep::SetupTmr => {
                let tmr = bufs
                    .tmr
                    .ok_or_else(|| ctx.bad("GFX_CMD_ID_SETUP_TMR without a TMR allocated"))?;
                // `psp_gfx_cmd_setup_tmr` as amdgpu fills it: the TMR's MC address and size,
                // `tmr_flags` bit 1 (`virt_phy_addr`: the system address that follows is
                // meaningful), its physical address.
                let mc = ctx.mc.mc(tmr);
                let c = [
                    lo32(mc),
                    hi32(mc),
                    self.tmr_size,
                    1 << 1,
                    lo32(tmr),
                    hi32(tmr),
                ];
                (GFX_CMD_ID_SETUP_TMR, c.into())
            }
            PspStep::LoadIpFw { fw_type, payload } => {
                name = format!("GFX_CMD_ID_LOAD_IP_FW({name})");
                let mut c = self.stage(ctx, bufs, payload)?;
                c.push(fw_type.0);
                (GFX_CMD_ID_LOAD_IP_FW, c)
            }
            PspStep::AutoloadRlc => (GFX_CMD_ID_AUTOLOAD_RLC, vec![]),
        };
        let tmr_size = self.submit(ctx, soc, bufs, id, &body, &name)?.resp.tmr_size;
        if let (PspStep::LoadToc { .. }, 1..) = (step, tmr_size) {
            if u64::from(tmr_size) > TMR_SIZE {
                return Err(ctx.bad(format!(
                    "{name}: the PSP asks for a TMR of {tmr_size:#x} bytes, more than the {TMR_SIZE:#x} the driver reserves"
                )));
            }
            self.tmr_size = tmr_size;
        }
        Ok(())
    }

    /// Copy a firmware image of the plan to the staging buffer (sized for the plan's largest
    /// payload in `init_sw`): its MC address and size, as the dwords `psp_gfx_cmd_load_toc`
    /// is and `psp_gfx_cmd_load_ip_fw` begins with.
    fn stage(&mut self, ctx: &Ctx, bufs: &Buffers, payload: &Payload) -> Result<Vec<u32>> {
        ctx.vram.write(bufs.msg1, payload.bytes())?;
        self.msg1_dirty = self.msg1_dirty.map(|d| d.max(payload.len() as u64));
        let mc = ctx.mc.mc(bufs.msg1);
        Ok(vec![lo32(mc), hi32(mc), payload.len() as u32])
    }

    /// Put command `id` with `body` (a `psp_gfx_commands` member) on the ring and wait for
    /// its fence; the command buffer as the PSP left it (status checked).
    fn submit(
        &mut self,
        ctx: &Ctx,
        soc: &Soc,
        bufs: &Buffers,
        id: u32,
        body: &[u32],
        name: &str,
    ) -> Result<psp_gfx_cmd_resp> {
        let wptr = self.wptr.ok_or_else(|| {
            ctx.bad(format!(
                "{name}: the PSP ring was not created by this driver instance"
            ))
        })?;
        const CMD_SIZE: usize = size_of::<psp_gfx_cmd_resp>();
        // `buf_size`, `buf_version`, `cmd_id`, the response fields zero, then `cmd`.
        let mut buf = [CMD_SIZE as u32, 0, id].as_bytes().to_vec();
        buf.resize(offset_of!(psp_gfx_cmd_resp, cmd), 0);
        buf.extend_from_slice(body.as_bytes());
        buf.resize(CMD_SIZE, 0);
        ctx.vram.write(bufs.cmd, &buf)?;
        ctx.vram.write32(bufs.fence, 0)?;

        self.fence_value = self.fence_value.wrapping_add(1).max(1);
        let fence_value = self.fence_value;
        let (cmd_mc, fence_mc) = (ctx.mc.mc(bufs.cmd), ctx.mc.mc(bufs.fence));
        let frame = psp_gfx_rb_frame {
            cmd_buf_addr_lo: lo32(cmd_mc),
            cmd_buf_addr_hi: hi32(cmd_mc),
            cmd_buf_size: CMD_SIZE as u32,
            fence_addr_lo: lo32(fence_mc),
            fence_addr_hi: hi32(fence_mc),
            fence_value,
            ..FromZeros::new_zeroed()
        };
        ctx.vram
            .write(bufs.ring + u64::from(wptr) * 4, frame.as_bytes())?;
        soc.hdp_flush(ctx)?;
        let next = (wptr + FRAME_DW) % (RING_SIZE / 4);
        self.wptr = Some(next);
        let c67 = ctx.regs.reg(C2PMSG_67[self.mbox])?;
        c67.write(0, next)?;

        // The fence is in memory; reading the write pointer between looks lets the PSP
        // (and the mock's clock) move on.
        ctx.poll(
            ctx.timeouts.psp,
            format_args!("PSP fence of {name} (value {fence_value})"),
            || {
                let v = ctx.vram.read32(bufs.fence)?;
                if v != fence_value {
                    c67.read(0)?;
                }
                Ok((v == fence_value, v))
            },
        )?;
        let mut out = [0u8; CMD_SIZE];
        ctx.vram.read(bufs.cmd, &mut out)?;
        let resp: psp_gfx_cmd_resp = zerocopy::transmute!(out);
        ctx.pci.trace(crate::trace::TraceEvent::Mailbox {
            block: "psp",
            name: format_args!("{name}"),
            message: id,
            param: fence_value,
            response: resp.resp.status,
        });
        check(ctx, name, resp.resp.status).map(|()| resp)
    }

    /// `SRIOV_SPATIAL_PART` with `mode` (1 = SPX).
    pub fn spatial_partition(&mut self, ctx: &Ctx, soc: &Soc, mode: u32) -> Result<()> {
        let Some((_, bufs)) = self.plan else {
            return Err(ctx
                .bad("GFX_CMD_ID_SRIOV_SPATIAL_PART: the PSP has no buffers (VF or no firmware)"));
        };
        // `psp_gfx_cmd_sriov_spatial_part` begins with `mode`; no override follows.
        let name = format!("GFX_CMD_ID_SRIOV_SPATIAL_PART(mode {mode})");
        let id = GFX_CMD_ID_SRIOV_SPATIAL_PART;
        self.submit(ctx, soc, &bufs, id, &[mode], &name).map(drop)
    }
}

// The command bodies written as dwords have the layout of their structs.
const _: () = assert!(size_of::<psp_gfx_cmd_setup_tmr>() == 6 * 4);
const _: () = assert!(size_of::<psp_gfx_cmd_load_toc>() == 3 * 4);
const _: () = assert!(offset_of!(psp_gfx_cmd_load_ip_fw, fw_type) == 3 * 4);
const _: () = assert!(offset_of!(psp_gfx_cmd_sriov_spatial_part, mode) == 0);

/// Whether a PSP `status` of `command` is success (0); any other value is its error.
fn check(ctx: &Ctx, command: &str, status: u32) -> Result<()> {
    match status {
        0 => Ok(()),
        _ => Err(ctx.err(ErrorKind::PspCommand {
            command: command.into(),
            status,
        })),
    }
}
