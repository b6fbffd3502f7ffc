//! AMD hardware tables generated from the Linux 6.12 `amdgpu` headers.
//!
//! Everything under `generated/` is written by `scripts/autogen` and never edited by hand
//! (see `docs/AUTOGEN.md`). The modules keep the C names of the headers, so a name found in
//! Linux or tinygrad is the name to type here. C structs are `#[repr(C)]` (packed where C
//! packs them) with zerocopy derives where their layout allows, and each carries compile-time
//! size and alignment assertions against the sizes clang computed for the C type.
//!
//! ```
//! use am_autogen::regs::{self, IpVersion, RegIp, gc};
//! use zerocopy::FromBytes;
//!
//! // Resolve a typed register name for one IP version (a typo fails to compile).
//! let gc11 = regs::require_table(RegIp::Gc, IpVersion::new(11, 0, 0))?;
//! let hqd_active = gc11.resolve(gc::CP_HQD_ACTIVE)?;
//! assert_eq!((hqd_active.offset(), hqd_active.base_idx()), (0x1fab, 0));
//!
//! // Fields by name: shift and mask.
//! let f = gc11.resolve(gc::CP_HQD_PQ_CONTROL)?.field("RPTR_BLOCK_SIZE").ok_or("no field")?;
//! assert_eq!((f.shift, f.mask, f.set(0, 5)), (8, 0x3f00, 5 << 8));
//!
//! // Every register of a version (what the mock builds its register file from).
//! assert!(gc11.iter().any(|r| r.name() == "GRBM_STATUS"));
//!
//! // A firmware header from bytes.
//! let bytes = [0u8; 64];
//! let (hdr, _rest) = am_autogen::ucode::common_firmware_header::read_from_prefix(&bytes)
//!     .map_err(|_| "short file")?;
//! assert_eq!(hdr.header_version_major, 0);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod generated {
    pub mod discovery;
    pub mod doorbell;
    pub mod hwid;
    pub mod ih;
    pub mod mqd;
    pub mod pm4;
    pub mod psp_gfx;
    pub mod regs_fields;
    pub mod regs_gc;
    pub mod regs_hdp;
    pub mod regs_mmhub;
    pub mod regs_mp;
    pub mod regs_nbio;
    pub mod regs_osssys;
    pub mod regs_sdma;
    pub mod regs_smuio;
    pub mod sdma_pkt;
    pub mod smu;
    pub mod ucode;
    pub mod vm;
}

pub mod packets;
pub mod regs;

pub use packets::bits;

/// Firmware file headers of `amdgpu_ucode.h` (all header versions) and the firmware type enums.
pub use generated::ucode;

/// The IP discovery binary of `discovery.h`: headers, IP entries, harvest and GC info tables.
pub use generated::discovery;

/// Hardware ids (`soc15_hw_ip.h`), the driver's IP block types and the map between them.
pub use generated::hwid;

/// PTE/PDE flags of `amdgpu_vm.h` for the GFX9, GFX10/11 and GFX12 page table formats.
pub use generated::vm;

/// PSP GFX interface of `psp_gfx_if.h`: ring frame, command/response structs, command ids.
pub use generated::psp_gfx;

/// Compute MQDs: `mqd::v9` (GFX9), `mqd::v11` (GFX11), `mqd::v12` (GFX12).
pub use generated::mqd;

/// Doorbell assignments of `amdgpu_doorbell.h` (NAVI10 and SOC15/Vega layouts).
pub use generated::doorbell;

/// PM4 opcodes and field helpers: `pm4::nvd` (GFX10+) and `pm4::soc15d` (GFX9).
pub use generated::pm4;

/// SDMA packet opcodes and fields: `sdma_pkt::v6` (SDMA 6.0) and `sdma_pkt::v4` (SDMA 4.x).
pub use generated::sdma_pkt;

/// IH client ids and per-client source ids.
pub use generated::ih;

/// SMU message ids, clock enums and metrics tables: `smu::v13_0_0`, `smu::v13_0_6`, `smu::v14_0_2`.
pub use generated::smu;
