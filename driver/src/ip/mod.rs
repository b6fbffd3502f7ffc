//! The IP blocks of the bring-up, each with `init_sw` (allocations; no register writes),
//! `init_hw` (program the block) and, where the block has running state, `fini_hw`.
//!
//! Blocks reach the device through [`Ctx`](crate::ctx::Ctx) and call each other only through
//! the references `init_hw` is given (GFX gets GMC and SOC for the GC hub and HDP flushes).

pub mod gfx;
pub mod gmc;
pub mod ih;
pub mod psp;
pub mod sdma;
pub mod smu;
pub mod soc;

// What the blocks name in common; each takes it with `use super::*`.
use crate::mm::Pool;
use crate::regs::{Fields, Reg, alt, fields, gc, hdp, mmhub, mp, nbio};
use crate::*;
use gmc::Gmc;
use soc::Soc;
use std::time::Duration;
use zerocopy::IntoBytes;
