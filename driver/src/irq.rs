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

use am_autogen::bits;
use am_autogen::ih::{gfx_9_0::*, gfx_11_0_0::*, sdma0_4_0::*, vmc_1_0::*, *};

use crate::ip::gmc::{Gmc, Hub, VmFault};
use crate::ip::ih::IhEntry;
use crate::ip::smu::Smu;
use crate::regs::nbio;
use crate::*;

/// What an SQ interrupt reports: its encoding, and for an error its 4-bit type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, derive_more::Display)]
#[display(rename_all = "lowercase")]
pub enum SqKind {
    /// An automatic interrupt (thread trace, performance counters).
    Auto,
    /// A wave's `s_sendmsg` interrupt.
    Wave,
    /// An error: fatal.
    #[display("error")]
    Error(SqError),
    /// Encoding 3, which the hardware does not use.
    Reserved,
}

/// The type of an SQ error interrupt, displayed by its `SQ_INTERRUPT_ERROR_TYPE` name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, derive_more::Display)]
#[display(rename_all = "SCREAMING_SNAKE_CASE")]
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
    #[display("unknown type {_0}")]
    Other(u8),
}

/// A decoded interrupt; its message says what happened and where.
#[derive(Clone, Debug, PartialEq, Eq, derive_more::Display)]
pub enum IrqEvent {
    /// A page fault of a GPU memory hub.
    #[display("{_0}")]
    PageFault(VmFault),
    /// An SQ (shader) interrupt; an error's type follows the node.
    #[display(
        "SQ {kind} interrupt on node {node}{} (context {:#x} {:#x})",
        match kind { SqKind::Error(e) => format!(": {e}"), _ => String::new() },
        data[0],
        data[1]
    )]
    Sq {
        /// XCC/SE node the wave ran on.
        node: u8,
        /// What it reports.
        kind: SqKind,
        /// The context dwords.
        data: [u32; 4],
    },
    /// The CP refused a privileged register access or instruction.
    #[display("CP privileged {what} fault on ring {ring} of node {node}")]
    CpPrivFault {
        /// `register` or `instruction`.
        what: &'static str,
        /// Ring id of the offending queue.
        ring: u8,
        /// Node id.
        node: u8,
    },
    /// End of pipe of a compute queue (a fence/signal).
    #[display("CP end of pipe on ring {ring}")]
    CpEop {
        /// Ring id.
        ring: u8,
    },
    /// The CP met a packet it cannot execute (unknown opcode, malformed packet); the queue
    /// stopped.
    #[display(
        "CP bad opcode on ring {ring} (me {}, pipe {}, queue {}) of node {node}: the queue stopped",
        (ring >> 2) & 3,
        ring & 3,
        ring >> 4 & 7
    )]
    CpBadOpcode {
        /// Ring id of the queue (queue 6:4, me 3:2, pipe 1:0).
        ring: u8,
        /// Node id.
        node: u8,
    },
    /// An SDMA engine met an illegal command; its ring stopped.
    #[display("SDMA illegal command (client {client}, node {node}): the ring stopped")]
    SdmaIllegal {
        /// Client id of the engine.
        client: u8,
        /// Node id (the AID on multi-die parts).
        node: u8,
    },
    /// An SDMA trap (a fence/signal).
    #[display("SDMA trap (client {client})")]
    SdmaTrap {
        /// Client id of the engine.
        client: u8,
    },
    /// A RAS (uncorrectable hardware error) event.
    #[display(
        "RAS fatal hardware error: {}{}",
        sources.join(", "),
        banks.iter().map(|b| format!("; {b}")).collect::<String>()
    )]
    Ras {
        /// Which status bits were set.
        sources: Vec<&'static str>,
        /// ACA bank summaries (empty on a VF: the PF owns the SMU).
        banks: Vec<String>,
    },
    /// An interrupt the driver did not expect.
    #[display(
        "unexpected interrupt: client {} source {:#x} ring {} vmid {} node {} context [{:#x}, {:#x}, {:#x}, {:#x}]",
        _0.client,
        _0.source,
        _0.ring,
        _0.vmid,
        _0.node,
        _0.data[0],
        _0.data[1],
        _0.data[2],
        _0.data[3]
    )]
    Unknown(IhEntry),
}

impl IrqEvent {
    /// Whether the event puts the device in its error state: every event but completion
    /// signals and SQ interrupts other than errors.
    pub fn is_fatal(&self) -> bool {
        match self {
            Self::Sq { kind, .. } => matches!(kind, SqKind::Error(_)),
            Self::CpEop { .. } | Self::SdmaTrap { .. } => false,
            _ => true,
        }
    }
}

fn sq_kind(gc_major: u8, [c0, c1, ..]: [u32; 4]) -> SqKind {
    use {SqError::*, SqKind::*};
    // GC 9 spreads the context id over both dwords (Linux reassembles it); the error type
    // is its bits 20-23, which are bits 4-7 of the second.
    let (encoding, error) = if gc_major >= 11 {
        (bits(c1, 6, 2), bits(c0, 21, 4))
    } else {
        (bits(c0, 26, 2), bits(c1, 4, 4))
    };
    match (encoding, error) {
        (0, _) => Auto,
        (1, _) => Wave,
        // Types 0-3, in `SQ_INTERRUPT_ERROR_TYPE` order.
        (2, t) => Error(
            *[EdcFue, IllegalInst, Memviol, EdcFed]
                .get(t as usize)
                .unwrap_or(&Other(t as u8)),
        ),
        _ => Reserved,
    }
}

/// Decode one entry; page faults read (and clear) the hub's fault registers.
///
/// GC 9 and GC 11 number the CP and SQ sources alike (the `gfx_9_0` names serve both; a
/// test pins it); their clients differ (SOC15: GRBM_CP and the SE shader clients; SOC21:
/// GRBM_CP and GFX).
pub fn decode(ctx: &Ctx, gmc: &Gmc, e: &IhEntry) -> Result<IrqEvent> {
    use IrqEvent::*;
    let gc11 = ctx.gc_major() >= 11;
    let (client, source) = (u32::from(e.client), u32::from(e.source));
    let hub = match (gc11, client, source) {
        (true, SOC21_IH_CLIENTID_GFX, GFX_11_0_0__SRCID__UTCL2_FAULT)
        | (false, SOC15_IH_CLIENTID_UTCL2, _) => Some(Hub::Gc(e.node)),
        (_, SOC15_IH_CLIENTID_VMC, VMC_1_0__SRCID__VM_FAULT) => Some(Hub::Mm(e.node)),
        _ => None,
    };
    if let Some(hub) = hub {
        // Status already cleared (a second entry for one latched fault): the entry still
        // carries the address.
        return Ok(PageFault(gmc.take_fault(ctx, hub)?.unwrap_or_else(|| {
            VmFault {
                hub,
                va: (u64::from(e.data[0]) << 12) | (u64::from(e.data[1] & 0xf) << 44),
                status: 0,
                fields: vec![],
            }
        })));
    }
    let sdma4 = !gc11
        && matches!(
            client,
            SOC15_IH_CLIENTID_SDMA0
                | SOC15_IH_CLIENTID_SDMA1
                | SOC15_IH_CLIENTID_SDMA2
                | SOC15_IH_CLIENTID_SDMA3
        );
    let gfx = if gc11 {
        matches!(client, SOC21_IH_CLIENTID_GRBM_CP | SOC21_IH_CLIENTID_GFX)
    } else {
        matches!(
            client,
            SOC15_IH_CLIENTID_GRBM_CP | SOC15_IH_CLIENTID_SE0SH..=SOC15_IH_CLIENTID_SE3SH
        )
    };
    let (ring, node) = (e.ring, e.node);
    Ok(match source {
        GFX_11_0_0__SRCID__SDMA_TRAP if gc11 && client == SOC21_IH_CLIENTID_GFX => {
            SdmaTrap { client: e.client }
        }
        SDMA0_4_0__SRCID__SDMA_TRAP if sdma4 => SdmaTrap { client: e.client },
        // Linux takes SDMA 4.x illegal instructions on the SRBMWRITE source
        // (`sdma_v4_0`/`sdma_v4_4_2` `illegal_inst_irq`).
        SDMA0_4_0__SRCID__SDMA_SRBMWRITE if sdma4 => SdmaIllegal {
            client: e.client,
            node,
        },
        GFX_9_0__SRCID__SQ_INTERRUPT_ID if gfx => Sq {
            node,
            kind: sq_kind(ctx.gc_major(), e.data),
            data: e.data,
        },
        GFX_9_0__SRCID__CP_EOP_INTERRUPT if gfx => CpEop { ring },
        GFX_9_0__SRCID__CP_BAD_OPCODE_ERROR if gfx => CpBadOpcode { ring, node },
        GFX_9_0__SRCID__CP_PRIV_REG_FAULT if gfx => CpPrivFault {
            what: "register",
            ring,
            node,
        },
        GFX_9_0__SRCID__CP_PRIV_INSTR_FAULT if gfx => CpPrivFault {
            what: "instruction",
            ring,
            node,
        },
        _ => Unknown(*e),
    })
}

/// The RAS status bits of the BIF: a fatal error somewhere in the ASIC. Reads the ACA
/// banks through the SMU (PF only), clears the bits, and returns the event.
pub fn check_ras(ctx: &Ctx, smu: &mut Smu) -> Result<Option<IrqEvent>> {
    let reg = nbio::BIF_BX0_BIF_DOORBELL_INT_CNTL;
    if !ctx.regs.has(reg) {
        return Ok(None);
    }
    let v = ctx.rreg(reg, 0)?;
    // Both status fields are one bit: setting each to 1 gives its mask.
    let athub = v & ctx.encode(reg, |f| f.ras_athub_err_event_interrupt_status(1))? != 0;
    let cntlr = v & ctx.encode(reg, |f| f.ras_cntlr_interrupt_status(1))? != 0;
    if !athub && !cntlr {
        return Ok(None);
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
    Ok(Some(IrqEvent::Ras {
        sources: [(athub, "RAS_ATHUB_ERR_EVENT"), (cntlr, "RAS_CNTLR")]
            .iter()
            .filter(|s| s.0)
            .map(|s| s.1)
            .collect(),
        banks,
    }))
}

#[cfg(test)]
mod tests {
    use am_autogen::ih::{gfx_9_0 as gc9, gfx_11_0_0 as gc11};

    use super::*;

    #[test]
    fn every_event_says_what_happened_and_where() {
        let sq = |kind| IrqEvent::Sq {
            node: 3,
            kind,
            data: [0x10, 0x20, 0, 0],
        };
        let entry = IhEntry {
            client: 10,
            source: 0x1f,
            ring: 2,
            vmid: 1,
            pasid: 0,
            node: 4,
            data: [1, 0xa, 0xff, 0],
        };
        let ras = IrqEvent::Ras {
            sources: vec!["RAS_ATHUB_ERR_EVENT", "RAS_CNTLR"],
            banks: vec!["bank 0".into(), "bank 1".into()],
        };
        let cases = [
            (
                sq(SqKind::Auto),
                "SQ auto interrupt on node 3 (context 0x10 0x20)",
            ),
            (
                sq(SqKind::Wave),
                "SQ wave interrupt on node 3 (context 0x10 0x20)",
            ),
            (
                sq(SqKind::Reserved),
                "SQ reserved interrupt on node 3 (context 0x10 0x20)",
            ),
            (
                sq(SqKind::Error(SqError::EdcFue)),
                "SQ error interrupt on node 3: EDC_FUE (context 0x10 0x20)",
            ),
            (
                sq(SqKind::Error(SqError::Other(9))),
                "SQ error interrupt on node 3: unknown type 9 (context 0x10 0x20)",
            ),
            (
                IrqEvent::CpPrivFault {
                    what: "register",
                    ring: 5,
                    node: 1,
                },
                "CP privileged register fault on ring 5 of node 1",
            ),
            (IrqEvent::CpEop { ring: 4 }, "CP end of pipe on ring 4"),
            (
                IrqEvent::CpBadOpcode {
                    ring: 0x26,
                    node: 2,
                },
                "CP bad opcode on ring 38 (me 1, pipe 2, queue 2) of node 2: the queue stopped",
            ),
            (
                IrqEvent::SdmaIllegal { client: 8, node: 1 },
                "SDMA illegal command (client 8, node 1): the ring stopped",
            ),
            (IrqEvent::SdmaTrap { client: 9 }, "SDMA trap (client 9)"),
            (
                ras,
                "RAS fatal hardware error: RAS_ATHUB_ERR_EVENT, RAS_CNTLR; bank 0; bank 1",
            ),
            (
                IrqEvent::Unknown(entry),
                "unexpected interrupt: client 10 source 0x1f ring 2 vmid 1 node 4 context [0x1, 0xa, 0xff, 0x0]",
            ),
        ];
        for (event, message) in cases {
            assert_eq!(event.to_string(), message, "{event:?}");
        }
        let names =
            [SqError::IllegalInst, SqError::Memviol, SqError::EdcFed].map(|e| e.to_string());
        assert_eq!(names, ["ILLEGAL_INST", "MEMVIOL", "EDC_FED"]);
    }

    #[test]
    fn gc9_and_gc11_number_the_cp_and_sq_sources_alike() {
        let pairs = [
            (
                gc9::GFX_9_0__SRCID__SQ_INTERRUPT_ID,
                gc11::GFX_11_0_0__SRCID__SQ_INTERRUPT_ID,
            ),
            (
                gc9::GFX_9_0__SRCID__CP_EOP_INTERRUPT,
                gc11::GFX_11_0_0__SRCID__CP_EOP_INTERRUPT,
            ),
            (
                gc9::GFX_9_0__SRCID__CP_BAD_OPCODE_ERROR,
                gc11::GFX_11_0_0__SRCID__CP_BAD_OPCODE_ERROR,
            ),
            (
                gc9::GFX_9_0__SRCID__CP_PRIV_REG_FAULT,
                gc11::GFX_11_0_0__SRCID__CP_PRIV_REG_FAULT,
            ),
            (
                gc9::GFX_9_0__SRCID__CP_PRIV_INSTR_FAULT,
                gc11::GFX_11_0_0__SRCID__CP_PRIV_INSTR_FAULT,
            ),
        ];
        for (gc9, gc11) in pairs {
            assert_eq!(
                gc9, gc11,
                "a CP/SQ source id differs between GC 9 and GC 11"
            );
        }
    }
}
