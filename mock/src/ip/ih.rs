//! IH (OSSSYS): interrupt rings. Registers hold their values; ring writes, write-pointer
//! write-back and overflow (`mock-device.md` item 7) are the bring-up's.

use super::IpModel;

/// IH model state.
#[derive(Debug, Default)]
pub struct Ih {}

impl IpModel for Ih {}
