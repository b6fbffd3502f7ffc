//! Per-IP models behind the register file.
//!
//! Every register the map knows belongs to one [`Block`]; an access is handed to that
//! block's model with a [`Hw`] view of the rest of the device. A model that does nothing
//! special stores the value (the trait's default); models override the registers that have
//! behaviour (ready bits, doorbells, the PSP ring, …). A model may refuse an access with a
//! [`Fault`], which the device records as a violation and returns to the driver.

pub mod gfx;
pub mod gmc;
pub mod ih;
pub mod mailbox;
pub mod nbio;
pub mod psp;
pub mod sdma;
pub mod smu;

use crate::config::ConfigSpace;
use crate::profile::{Profile, RegIp};
use crate::regs::{Block, RegId, RegInfo, RegValues, RegisterMap};
use crate::sysmem::SysArena;
use crate::vram::Vram;

/// A contract violation found by a model: what the driver did wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fault(pub String);

impl Fault {
    /// A fault with a message.
    pub fn new(msg: impl Into<String>) -> Self {
        Fault(msg.into())
    }
}

/// The kind of reset a model goes through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResetKind {
    /// PCI function-level reset.
    Flr,
    /// SMU mode1 reset of the whole ASIC.
    Mode1,
}

/// One register access as a model sees it.
#[derive(Clone, Copy, Debug)]
pub struct Reg<'a> {
    /// Index in the map (for [`RegValues`]).
    pub id: RegId,
    /// Name, instance, address, default.
    pub info: &'a RegInfo,
}

impl Reg<'_> {
    /// Register name.
    pub fn name(&self) -> &'static str {
        self.info.name
    }
}

/// What a model can reach of the device while it handles an access. The register-file lock
/// is held; VRAM and system memory have their own locks (taken after it, never before), so
/// an engine thread that only moves memory does not wait for MMIO.
pub struct Hw<'a> {
    /// The profile.
    pub profile: &'a Profile,
    /// The register map.
    pub map: &'a RegisterMap,
    /// Register values.
    pub regs: &'a mut RegValues,
    /// Config space (bus mastering gates DMA).
    pub config: &'a ConfigSpace,
    /// Device memory.
    pub vram: &'a Vram,
    /// System memory reachable by DMA.
    pub sysmem: &'a SysArena,
    /// What the model accepted although no proven driver does it (the device counts each as
    /// a warning, not a violation: no source says hardware refuses it).
    pub warnings: Vec<String>,
}

impl Hw<'_> {
    /// Value of a register by table, name and instance (0 if the profile lacks it).
    pub fn get(&self, ip: RegIp, name: &str, instance: u8) -> u32 {
        self.map
            .find(ip, name, instance)
            .map_or(0, |id| self.regs.get(id))
    }

    /// Accept the access but count it: see [`Hw::warnings`].
    pub fn warn(&mut self, what: impl Into<String>) {
        self.warnings.push(what.into());
    }

    /// Set a register by table, name and instance; returns whether it exists.
    pub fn set(&mut self, ip: RegIp, name: &str, instance: u8, value: u32) -> bool {
        match self.map.find(ip, name, instance) {
            Some(id) => {
                self.regs.set(id, value);
                true
            }
            None => false,
        }
    }
}

/// The behaviour of one IP block's registers.
pub trait IpModel: Send {
    /// A read of one of this block's registers.
    fn read(&mut self, hw: &mut Hw<'_>, reg: Reg<'_>) -> Result<u32, Fault> {
        Ok(hw.regs.get(reg.id))
    }

    /// A write of one of this block's registers.
    fn write(&mut self, hw: &mut Hw<'_>, reg: Reg<'_>, value: u32) -> Result<(), Fault> {
        hw.regs.set(reg.id, value);
        Ok(())
    }

    /// A single-byte read at byte `byte` (0..=3) of a register. Registers are dword-wide;
    /// only the few the hardware documents as byte-addressed accept it.
    fn read8(&mut self, hw: &mut Hw<'_>, reg: Reg<'_>, byte: u8) -> Result<u8, Fault> {
        let _ = (hw, byte);
        Err(Fault::new(format!(
            "byte-wide read of {}: the register is dword-wide",
            reg.name()
        )))
    }

    /// A single-byte write at byte `byte` (0..=3) of a register.
    fn write8(&mut self, hw: &mut Hw<'_>, reg: Reg<'_>, byte: u8, value: u8) -> Result<(), Fault> {
        let _ = (hw, byte, value);
        Err(Fault::new(format!(
            "byte-wide write of {}: the register is dword-wide",
            reg.name()
        )))
    }

    /// The block goes through a reset (register values are reset by the device; this drops
    /// the model's own state that the reset clears).
    fn reset(&mut self, kind: ResetKind) {
        let _ = kind;
    }
}

/// All models of a device.
pub struct Models {
    /// NBIO/BIF/HDP.
    pub nbio: nbio::Nbio,
    /// GC and MM hubs.
    pub gmc: gmc::Gmc,
    /// Interrupt handler.
    pub ih: ih::Ih,
    /// PSP.
    pub psp: psp::Psp,
    /// SMU.
    pub smu: smu::Smu,
    /// GFX.
    pub gfx: gfx::Gfx,
    /// SDMA.
    pub sdma: sdma::Sdma,
    /// VF mailbox (PF side).
    pub mailbox: mailbox::Mailbox,
}

impl Models {
    /// Fresh models for a profile (firmware not running).
    pub fn new(profile: &Profile) -> Self {
        Self {
            nbio: nbio::Nbio::new(profile),
            gmc: gmc::Gmc::default(),
            ih: ih::Ih::default(),
            psp: psp::Psp::new(profile),
            smu: smu::Smu::new(profile),
            gfx: gfx::Gfx::default(),
            sdma: sdma::Sdma::default(),
            mailbox: mailbox::Mailbox::new(profile),
        }
    }

    /// The model answering for a block.
    pub fn model(&mut self, block: Block) -> &mut dyn IpModel {
        match block {
            Block::Nbio => &mut self.nbio,
            Block::Gmc => &mut self.gmc,
            Block::Ih => &mut self.ih,
            Block::Psp => &mut self.psp,
            Block::Smu => &mut self.smu,
            Block::Gfx => &mut self.gfx,
            Block::Sdma => &mut self.sdma,
            Block::Mailbox => &mut self.mailbox,
        }
    }

    /// Reset every model.
    pub fn reset(&mut self, kind: ResetKind) {
        for b in [
            Block::Nbio,
            Block::Gmc,
            Block::Ih,
            Block::Psp,
            Block::Smu,
            Block::Gfx,
            Block::Sdma,
            Block::Mailbox,
        ] {
            self.model(b).reset(kind);
        }
    }
}
