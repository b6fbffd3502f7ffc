//! AMD hardware tables generated from the Linux 6.12 `amdgpu` headers.
//!
//! Everything under `generated/` is written by `scripts/autogen` and never edited by hand
//! (see `docs/AUTOGEN.md`). The modules keep the C names of the headers, so a name found in
//! Linux or tinygrad is the name to type here. C structs are `#[repr(C)]` (packed where C
//! packs them) with zerocopy derives where their layout allows, and each carries compile-time
//! size and alignment assertions against the sizes clang computed for the C type.

mod generated {
    pub mod discovery;
    pub mod hwid;
    pub mod regs_gc;
    pub mod regs_hdp;
    pub mod regs_mmhub;
    pub mod regs_mp;
    pub mod regs_nbio;
    pub mod regs_osssys;
    pub mod regs_sdma;
    pub mod regs_smuio;
    pub mod ucode;
    pub mod vm;
}

pub mod regs;

/// Firmware file headers of `amdgpu_ucode.h` (all header versions) and the firmware type enums.
pub use generated::ucode;

/// The IP discovery binary of `discovery.h`: headers, IP entries, harvest and GC info tables.
pub use generated::discovery;

/// Hardware ids (`soc15_hw_ip.h`), the driver's IP block types and the map between them.
pub use generated::hwid;

/// PTE/PDE flags of `amdgpu_vm.h` for the GFX9, GFX10/11 and GFX12 page table formats.
pub use generated::vm;
