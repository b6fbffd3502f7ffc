//! SMU (MP1): messages, features, clocks, power limit, mode1 reset, metrics, ACA banks.

use crate::Result;
use crate::ctx::Ctx;

/// Which DPM level every clock is pinned to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClockLevel {
    /// Lowest level (idle, after `fini`).
    Min,
    /// Highest level (after boot).
    Max,
}

/// SMU state: the driver table in VRAM.
#[derive(Debug)]
pub struct Smu {}

impl Smu {
    /// Allocate the driver table.
    pub fn init_sw(_ctx: &Ctx) -> Result<Self> {
        Ok(Smu {})
    }

    /// Whether the SMU firmware runs (answers GetSmuVersion within `smu_alive`).
    pub fn is_alive(&self, _ctx: &Ctx) -> Result<bool> {
        Ok(false)
    }

    /// Driver table address, features.
    pub fn init_hw(&mut self, _ctx: &Ctx) -> Result<()> {
        Ok(())
    }

    /// Mode1 reset of the ASIC (waits 500 ms unless in a hive).
    pub fn mode1_reset(&mut self, _ctx: &Ctx, _in_hive: bool) -> Result<()> {
        Ok(())
    }

    /// Pin every clock to a level.
    pub fn set_clocks(&mut self, _ctx: &Ctx, _level: ClockLevel) -> Result<()> {
        Ok(())
    }

    /// Set the power limit and leave clocks unpinned.
    pub fn set_power_limit(&mut self, _ctx: &Ctx, _watts: u32) -> Result<()> {
        Ok(())
    }

    /// Read the ACA error banks after a RAS event, as text lines.
    pub fn read_aca_banks(&mut self, _ctx: &Ctx) -> Result<Vec<String>> {
        Ok(vec![])
    }
}
