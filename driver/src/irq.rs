//! Decoding interrupt entries (and the RAS status bits) into what happened and where.
//!
//! - SQ interrupts (`SQ_INTERRUPT_ID`): the encoding says auto, wave or error; an error
//!   carries its kind (EDC_FUE, ILLEGAL_INST, MEMVIOL, EDC_FED) and is fatal. On GC ≥ 11
//!   the encoding is context dword 1 bits 7:6 and the error type dword 0 bits 24:21; on GC 9
//!   the encoding is dword 0 bits 27:26 and the error type bits 23:20 of the value
//!   reassembled from dwords 0 and 1 (`gfx_v9_0`/`gfx_v11_0` SQ interrupt layouts).
//! - UTCL2 page faults (GC hub, client GFX/UTCL2) and VM faults (MM hub, client VMC): the
//!   hub's protection-fault status and address are read, decoded and cleared.
//! - CP privileged register/instruction faults: fatal.
//! - CP end-of-pipe and SDMA traps: normal completion signals.
//! - RAS: `BIF_BX0_BIF_DOORBELL_INT_CNTL` ATHUB/controller status bits, then (PF only) the
//!   SMU's ACA banks; fatal.
//! - Anything else is reported and, as the reference driver does, treated as fatal: an
//!   interrupt nobody asked for means the GPU is somewhere the driver does not know.

use std::fmt;

use am_autogen::ih as src;

use crate::Result;
use crate::ctx::Ctx;
use crate::ip::gmc::{Gmc, Hub, VmFault};
use crate::ip::ih::IhEntry;
use crate::ip::smu::Smu;
use crate::regs::nbio;

/// What an SQ interrupt reports: its encoding, and for an error its 4-bit type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SqKind {
    /// An automatic interrupt (thread trace, performance counters).
    Auto,
    /// A wave's `s_sendmsg` interrupt.
    Wave,
    /// An error: fatal.
    Error(SqError),
    /// Encoding 3, which the hardware does not use.
    Reserved,
}

/// The type of an SQ error interrupt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SqError {
    /// `EDC_FUE`: an uncorrectable ECC error.
    EdcFue,
    /// `ILLEGAL_INST`: the wave ran an illegal instruction.
    IllegalInst,
    /// `MEMVIOL`: a memory violation.
    Memviol,
    /// `EDC_FED`: an ECC error was detected.
    EdcFed,
    /// A type this driver does not know.
    Other(u8),
}

/// The error types in the order of their 4-bit codes.
const SQ_ERRORS: [(SqError, &str); 4] = [
    (SqError::EdcFue, "EDC_FUE"),
    (SqError::IllegalInst, "ILLEGAL_INST"),
    (SqError::Memviol, "MEMVIOL"),
    (SqError::EdcFed, "EDC_FED"),
];

impl fmt::Display for SqError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match SQ_ERRORS.iter().find(|(e, _)| e == self) {
            Some((_, name)) => write!(f, "{name}"),
            None => write!(f, "unknown type {self:?}"),
        }
    }
}

/// A decoded interrupt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IrqEvent {
    /// A page fault of a GPU memory hub.
    PageFault(VmFault),
    /// An SQ (shader) interrupt.
    Sq {
        /// XCC/SE node the wave ran on.
        node: u8,
        /// What it reports.
        kind: SqKind,
        /// The context dwords.
        data: [u32; 4],
    },
    /// The CP refused a privileged register access or instruction.
    CpPrivFault {
        /// `register` or `instruction`.
        what: &'static str,
        /// Ring id of the offending queue.
        ring: u8,
        /// Node id.
        node: u8,
    },
    /// End of pipe of a compute queue (a fence/signal).
    CpEop {
        /// Ring id.
        ring: u8,
    },
    /// The CP met a packet it cannot execute (unknown opcode, malformed packet); the queue
    /// stopped.
    CpBadOpcode {
        /// Ring id of the queue (queue 6:4, me 3:2, pipe 1:0).
        ring: u8,
        /// Node id.
        node: u8,
    },
    /// An SDMA engine met an illegal command; its ring stopped.
    SdmaIllegal {
        /// Client id of the engine.
        client: u8,
        /// Node id (the AID on multi-die parts).
        node: u8,
    },
    /// An SDMA trap (a fence/signal).
    SdmaTrap {
        /// Client id of the engine.
        client: u8,
    },
    /// A RAS (uncorrectable hardware error) event.
    Ras {
        /// Which status bits were set.
        sources: Vec<&'static str>,
        /// ACA bank summaries (empty on a VF: the PF owns the SMU).
        banks: Vec<String>,
    },
    /// An interrupt the driver did not expect.
    Unknown(IhEntry),
}

impl IrqEvent {
    /// Whether the event puts the device in its error state.
    pub fn is_fatal(&self) -> bool {
        match self {
            IrqEvent::Sq { kind, .. } => matches!(kind, SqKind::Error(_)),
            IrqEvent::CpEop { .. } | IrqEvent::SdmaTrap { .. } => false,
            IrqEvent::PageFault(_)
            | IrqEvent::CpPrivFault { .. }
            | IrqEvent::CpBadOpcode { .. }
            | IrqEvent::SdmaIllegal { .. }
            | IrqEvent::Ras { .. }
            | IrqEvent::Unknown(_) => true,
        }
    }
}

impl fmt::Display for IrqEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IrqEvent::PageFault(p) => write!(f, "{p}"),
            IrqEvent::Sq { node, kind, data } => {
                let (name, error) = match kind {
                    SqKind::Auto => ("auto", None),
                    SqKind::Wave => ("wave", None),
                    SqKind::Error(e) => ("error", Some(e)),
                    SqKind::Reserved => ("reserved", None),
                };
                write!(f, "SQ {name} interrupt on node {node}")?;
                if let Some(e) = error {
                    write!(f, ": {e}")?;
                }
                write!(f, " (context {:#x} {:#x})", data[0], data[1])
            }
            IrqEvent::CpPrivFault { what, ring, node } => {
                write!(
                    f,
                    "CP privileged {what} fault on ring {ring} of node {node}"
                )
            }
            IrqEvent::CpEop { ring } => write!(f, "CP end of pipe on ring {ring}"),
            IrqEvent::CpBadOpcode { ring, node } => write!(
                f,
                "CP bad opcode on ring {ring} (me {}, pipe {}, queue {}) of node {node}: the queue stopped",
                (ring >> 2) & 3,
                ring & 3,
                (ring >> 4) & 7
            ),
            IrqEvent::SdmaIllegal { client, node } => write!(
                f,
                "SDMA illegal command (client {client}, node {node}): the ring stopped"
            ),
            IrqEvent::SdmaTrap { client } => write!(f, "SDMA trap (client {client})"),
            IrqEvent::Ras { sources, banks } => {
                write!(f, "RAS fatal hardware error: {}", sources.join(", "))?;
                for b in banks {
                    write!(f, "; {b}")?;
                }
                Ok(())
            }
            IrqEvent::Unknown(e) => write!(
                f,
                "unexpected interrupt: client {} source {:#x} ring {} vmid {} node {} context [{:#x}, {:#x}, {:#x}, {:#x}]",
                e.client,
                e.source,
                e.ring,
                e.vmid,
                e.node,
                e.data[0],
                e.data[1],
                e.data[2],
                e.data[3]
            ),
        }
    }
}

fn bits(v: u32, lo: u32, hi: u32) -> u32 {
    (v >> lo) & ((1 << (hi - lo + 1)) - 1)
}

fn sq_event(gc_major: u8, e: &IhEntry) -> IrqEvent {
    let [c0, c1, ..] = e.data;
    let (enc, err) = if gc_major >= 11 {
        (bits(c1, 6, 7), bits(c0, 21, 24))
    } else {
        let packed = (c0 & 0xfff) | ((c0 >> 16) & 0xf000) | ((c1 << 16) & 0xff_0000);
        (bits(c0, 26, 27), bits(packed, 20, 23))
    };
    let kind = match enc {
        0 => SqKind::Auto,
        1 => SqKind::Wave,
        2 => SqKind::Error(
            SQ_ERRORS
                .get(err as usize)
                .map_or(SqError::Other(err as u8), |e| e.0),
        ),
        _ => SqKind::Reserved,
    };
    IrqEvent::Sq {
        node: e.node,
        kind,
        data: e.data,
    }
}

/// Decode one entry; page faults read (and clear) the hub's fault registers.
pub fn decode(ctx: &Ctx, gmc: &Gmc, e: &IhEntry) -> Result<IrqEvent> {
    let gc = ctx.gc_major();
    let client = u32::from(e.client);
    let source = u32::from(e.source);
    let (gfx_clients, sq, eop, priv_reg, priv_instr, bad_op): (&[u32], u32, u32, u32, u32, u32) =
        if gc >= 11 {
            use src::gfx_11_0_0::*;
            (
                &[src::SOC21_IH_CLIENTID_GRBM_CP, src::SOC21_IH_CLIENTID_GFX],
                GFX_11_0_0__SRCID__SQ_INTERRUPT_ID,
                GFX_11_0_0__SRCID__CP_EOP_INTERRUPT,
                GFX_11_0_0__SRCID__CP_PRIV_REG_FAULT,
                GFX_11_0_0__SRCID__CP_PRIV_INSTR_FAULT,
                GFX_11_0_0__SRCID__CP_BAD_OPCODE_ERROR,
            )
        } else {
            use src::gfx_9_0::*;
            (
                &[
                    src::SOC15_IH_CLIENTID_GRBM_CP,
                    src::SOC15_IH_CLIENTID_SE0SH,
                    src::SOC15_IH_CLIENTID_SE1SH,
                    src::SOC15_IH_CLIENTID_SE2SH,
                    src::SOC15_IH_CLIENTID_SE3SH,
                ],
                GFX_9_0__SRCID__SQ_INTERRUPT_ID,
                GFX_9_0__SRCID__CP_EOP_INTERRUPT,
                GFX_9_0__SRCID__CP_PRIV_REG_FAULT,
                GFX_9_0__SRCID__CP_PRIV_INSTR_FAULT,
                GFX_9_0__SRCID__CP_BAD_OPCODE_ERROR,
            )
        };
    let gc_fault = if gc >= 11 {
        client == src::SOC21_IH_CLIENTID_GFX
            && source == src::gfx_11_0_0::GFX_11_0_0__SRCID__UTCL2_FAULT
    } else {
        client == src::SOC15_IH_CLIENTID_UTCL2
    };
    let mm_fault =
        client == src::SOC15_IH_CLIENTID_VMC && source == src::vmc_1_0::VMC_1_0__SRCID__VM_FAULT;
    if gc_fault || mm_fault {
        let hub = if gc_fault {
            Hub::Gc(e.node)
        } else {
            Hub::Mm(e.node)
        };
        let fault = match gmc.take_fault(ctx, hub)? {
            Some(f) => f,
            // Status already cleared (a second entry for one latched fault): the entry
            // still carries the address.
            None => VmFault {
                hub,
                va: (u64::from(e.data[0]) << 12) | (u64::from(e.data[1] & 0xf) << 44),
                status: 0,
                fields: vec![],
            },
        };
        return Ok(IrqEvent::PageFault(fault));
    }
    use src::sdma0_4_0::{SDMA0_4_0__SRCID__SDMA_SRBMWRITE, SDMA0_4_0__SRCID__SDMA_TRAP};
    let sdma4 = gc < 11
        && [
            src::SOC15_IH_CLIENTID_SDMA0,
            src::SOC15_IH_CLIENTID_SDMA1,
            src::SOC15_IH_CLIENTID_SDMA2,
            src::SOC15_IH_CLIENTID_SDMA3,
        ]
        .contains(&client);
    let sdma_trap = (gc >= 11
        && client == src::SOC21_IH_CLIENTID_GFX
        && source == src::gfx_11_0_0::GFX_11_0_0__SRCID__SDMA_TRAP)
        || (sdma4 && source == SDMA0_4_0__SRCID__SDMA_TRAP);
    if sdma_trap {
        return Ok(IrqEvent::SdmaTrap { client: e.client });
    }
    // Linux takes SDMA 4.x illegal instructions on the SRBMWRITE source
    // (`sdma_v4_0`/`sdma_v4_4_2` `illegal_inst_irq`).
    if sdma4 && source == SDMA0_4_0__SRCID__SDMA_SRBMWRITE {
        return Ok(IrqEvent::SdmaIllegal {
            client: e.client,
            node: e.node,
        });
    }
    if gfx_clients.contains(&client) {
        if source == sq {
            return Ok(sq_event(gc, e));
        }
        if source == eop {
            return Ok(IrqEvent::CpEop { ring: e.ring });
        }
        if source == bad_op {
            return Ok(IrqEvent::CpBadOpcode {
                ring: e.ring,
                node: e.node,
            });
        }
        if source == priv_reg || source == priv_instr {
            return Ok(IrqEvent::CpPrivFault {
                what: if source == priv_reg {
                    "register"
                } else {
                    "instruction"
                },
                ring: e.ring,
                node: e.node,
            });
        }
    }
    Ok(IrqEvent::Unknown(*e))
}

/// The RAS status bits of the BIF: a fatal error somewhere in the ASIC. Reads the ACA
/// banks through the SMU (PF only), clears the bits, and returns the event.
pub fn check_ras(ctx: &Ctx, smu: &mut Smu) -> Result<Option<IrqEvent>> {
    if !ctx.regs.has(nbio::BIF_BX0_BIF_DOORBELL_INT_CNTL) {
        return Ok(None);
    }
    let reg = nbio::BIF_BX0_BIF_DOORBELL_INT_CNTL;
    let v = ctx.rreg(reg, 0)?;
    // Both status fields are one bit: setting each to 1 gives its mask.
    let athub = v & ctx.encode(reg, |f| f.ras_athub_err_event_interrupt_status(1))? != 0;
    let cntlr = v & ctx.encode(reg, |f| f.ras_cntlr_interrupt_status(1))? != 0;
    if !athub && !cntlr {
        return Ok(None);
    }
    let mut sources = vec![];
    if athub {
        sources.push("RAS_ATHUB_ERR_EVENT");
    }
    if cntlr {
        sources.push("RAS_CNTLR");
    }
    let banks = if ctx.is_vf {
        vec![]
    } else {
        smu.read_aca_banks(ctx)?
    };
    ctx.write(reg, 0, |f| {
        f.ras_cntlr_interrupt_clear(cntlr.into())
            .ras_athub_err_event_interrupt_clear(athub.into())
    })?;
    Ok(Some(IrqEvent::Ras { sources, banks }))
}
