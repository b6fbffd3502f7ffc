//! Discovery hardware ids the profiles use.
pub const MP1: u16 = 1;
pub const SMUIO: u16 = 4;
pub const GC: u16 = 11;
pub const MMHUB: u16 = 34;
pub const ATHUB: u16 = 35;
pub const OSSSYS: u16 = 40;
pub const HDP: u16 = 41;
pub const SDMA0: u16 = 42;
pub const SDMA1: u16 = 43;
pub const NBIO: u16 = 108;
pub const MP0: u16 = 255;
pub const DMU: u16 = 271;
