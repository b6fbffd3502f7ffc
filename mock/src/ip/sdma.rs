//! SDMA engines. Registers hold their values; queues and packets (`mock-device.md`
//! item 10) are the bring-up's.

use super::IpModel;

/// SDMA model state.
#[derive(Debug, Default)]
pub struct Sdma {}

impl IpModel for Sdma {}
