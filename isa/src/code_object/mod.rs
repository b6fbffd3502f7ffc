//! AMDGPU HSA code objects (AMDGPUUsage, "ELF Code Object"): the kernel descriptor, reading a
//! code object, and writing one from LLVM's relocatable object ([`link`]).
//!
//! A code object is an `ET_DYN` ELF for `EM_AMDGPU`: loadable segments with `.text` and the
//! kernel descriptors (`NAME.kd`, 64 bytes each), dynamic relocations a loader applies for the
//! address it uploads the image to, and an `NT_AMDGPU_METADATA` note (MessagePack,
//! `amdhsa.kernels`: argument layout, segment sizes, wave size, register counts).

mod link;
mod metadata;

use goblin::elf::Elf;

pub use link::link;
pub use metadata::{ArgMetadata, KernelMetadata, NT_AMDGPU_METADATA, read_metadata};

use crate::{Error, GfxTarget};

/// `EM_AMDGPU`.
pub const EM_AMDGPU: u16 = goblin::elf::header::EM_AMDGPU;

/// AMDGPU relocation types (AMDGPUUsage, "Relocation Records").
pub mod reloc {
    /// No relocation.
    pub const R_AMDGPU_NONE: u32 = 0;
    /// S + A, 64 bits (a dynamic relocation against a symbol).
    pub const R_AMDGPU_ABS64: u32 = 3;
    /// S + A - P, 32 bits.
    pub const R_AMDGPU_REL32: u32 = 4;
    /// S + A - P, 64 bits.
    pub const R_AMDGPU_REL64: u32 = 5;
    /// S + A - P, low 32 bits.
    pub const R_AMDGPU_REL32_LO: u32 = 10;
    /// S + A - P, high 32 bits.
    pub const R_AMDGPU_REL32_HI: u32 = 11;
    /// B + A, 64 bits: the load base plus the addend.
    pub const R_AMDGPU_RELATIVE64: u32 = 13;
    /// ((S + A - P) - 4) / 4, 16 bits: a branch offset in dwords.
    pub const R_AMDGPU_REL16: u32 = 14;
}

/// Bits of the descriptor's `kernel_code_properties` (AMDGPUUsage, "Kernel Descriptor"): which
/// user SGPRs the dispatch fills, in this order, and the wave size.
pub mod kcp {
    /// Four SGPRs with the private segment buffer descriptor.
    pub const ENABLE_SGPR_PRIVATE_SEGMENT_BUFFER: u16 = 1 << 0;
    /// Two SGPRs with the dispatch packet's address.
    pub const ENABLE_SGPR_DISPATCH_PTR: u16 = 1 << 1;
    /// Two SGPRs with the queue's address.
    pub const ENABLE_SGPR_QUEUE_PTR: u16 = 1 << 2;
    /// Two SGPRs with the kernel arguments' address.
    pub const ENABLE_SGPR_KERNARG_SEGMENT_PTR: u16 = 1 << 3;
    /// Two SGPRs with the dispatch id.
    pub const ENABLE_SGPR_DISPATCH_ID: u16 = 1 << 4;
    /// Two SGPRs with flat scratch base and size.
    pub const ENABLE_SGPR_FLAT_SCRATCH_INIT: u16 = 1 << 5;
    /// One SGPR with the private segment size.
    pub const ENABLE_SGPR_PRIVATE_SEGMENT_SIZE: u16 = 1 << 6;
    /// Waves of 32 lanes (gfx10 and later); otherwise 64.
    pub const ENABLE_WAVEFRONT_SIZE32: u16 = 1 << 10;
}

/// The 64-byte kernel descriptor (AMDGPUUsage, "Kernel Descriptor"): what a dispatch
/// programs into the `COMPUTE_*` registers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelDescriptor {
    /// LDS bytes the kernel declares (`group_segment_fixed_size`).
    pub group_segment_fixed_size: u32,
    /// Scratch bytes per work-item (`private_segment_fixed_size`).
    pub private_segment_fixed_size: u32,
    /// Size of the kernel arguments (`kernarg_size`).
    pub kernarg_size: u32,
    /// Entry offset from the descriptor's own address.
    pub kernel_code_entry_byte_offset: i64,
    /// `COMPUTE_PGM_RSRC3`.
    pub compute_pgm_rsrc3: u32,
    /// `COMPUTE_PGM_RSRC1` (register counts, float modes).
    pub compute_pgm_rsrc1: u32,
    /// `COMPUTE_PGM_RSRC2` (user SGPR count, system SGPR/VGPR enables).
    pub compute_pgm_rsrc2: u32,
    /// `kernel_code_properties`: the [`kcp`] bits.
    pub kernel_code_properties: u16,
}

impl KernelDescriptor {
    /// Bytes of a descriptor.
    pub const SIZE: usize = 64;

    /// Reads the 64 descriptor bytes.
    pub fn parse(b: &[u8; 64]) -> KernelDescriptor {
        let u32_at = |o: usize| u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
        let mut entry = [0u8; 8];
        entry.copy_from_slice(&b[16..24]);
        KernelDescriptor {
            group_segment_fixed_size: u32_at(0),
            private_segment_fixed_size: u32_at(4),
            kernarg_size: u32_at(8),
            kernel_code_entry_byte_offset: i64::from_le_bytes(entry),
            compute_pgm_rsrc3: u32_at(44),
            compute_pgm_rsrc1: u32_at(48),
            compute_pgm_rsrc2: u32_at(52),
            kernel_code_properties: u16::from_le_bytes([b[56], b[57]]),
        }
    }

    /// Lanes per wave this kernel was compiled for.
    pub fn wave_size(&self) -> u32 {
        if self.kernel_code_properties & kcp::ENABLE_WAVEFRONT_SIZE32 != 0 {
            32
        } else {
            64
        }
    }

    /// `USER_SGPR_COUNT` of rsrc2.
    pub fn user_sgpr_count(&self) -> u32 {
        (self.compute_pgm_rsrc2 >> 1) & 0x1f
    }

    /// `COMPUTE_PGM_RSRC1`, `RSRC2`, `RSRC3` in register order.
    pub fn rsrc(&self) -> [u32; 3] {
        [
            self.compute_pgm_rsrc1,
            self.compute_pgm_rsrc2,
            self.compute_pgm_rsrc3,
        ]
    }
}

/// One kernel of a code object.
#[derive(Clone, Debug)]
pub struct Kernel {
    /// Symbol name (without `.kd`).
    pub name: String,
    /// Virtual address of the kernel descriptor in the code object.
    pub descriptor_address: u64,
    /// The descriptor.
    pub descriptor: KernelDescriptor,
    /// Virtual address of the first instruction.
    pub entry: u64,
}

/// A loadable segment (`PT_LOAD`): what must be in GPU memory at `load base + vaddr` for code
/// that addresses its own data (`s_getpc_b64` plus a PC-relative offset, e.g. `__constant`
/// tables).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Segment {
    /// Virtual address in the code object.
    pub vaddr: u64,
    /// The segment's memory image (file bytes, then zeros up to its memory size).
    pub bytes: Vec<u8>,
}

/// A dynamic relocation (`.rela.dyn`) a loader applies for the image's load address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DynamicRelocation {
    /// Virtual address of the 64-bit word to write.
    pub offset: u64,
    /// `R_AMDGPU_*` ([`reloc`]).
    pub kind: u32,
    /// The addend.
    pub addend: i64,
    /// The value of the symbol it names (relative to the load base), if it names one.
    pub symbol: Option<u64>,
}

/// The largest image a loader accepts: kernels are kilobytes, so more is a broken file.
pub const MAX_IMAGE: u64 = 256 << 20;

/// A code object: its code, kernels, loadable segments, dynamic relocations and metadata.
#[derive(Clone, Debug)]
pub struct CodeObject {
    /// The processor of `e_flags`, if it is a target this project knows.
    pub target: Option<GfxTarget>,
    /// Virtual address of `.text`.
    pub text_address: u64,
    /// The `.text` bytes.
    pub text: Vec<u8>,
    /// Kernels found through their `NAME.kd` symbols.
    pub kernels: Vec<Kernel>,
    /// Loadable segments.
    pub segments: Vec<Segment>,
    /// Dynamic relocations.
    pub relocations: Vec<DynamicRelocation>,
    /// The metadata note's kernels (empty without a note).
    pub metadata: Vec<KernelMetadata>,
    /// What the caller called it, for errors.
    what: String,
}

impl CodeObject {
    /// Reads an ELF code object. `what` names it in errors (a path or a kernel name).
    pub fn parse(bytes: &[u8], what: &str) -> Result<CodeObject, Error> {
        let bad = |reason: String| bad(what, reason);
        let elf = Elf::parse(bytes).map_err(|e| bad(format!("not an ELF file: {e}")))?;
        if elf.header.e_machine != EM_AMDGPU {
            return Err(bad(format!(
                "machine {} is not AMDGPU ({EM_AMDGPU})",
                elf.header.e_machine
            )));
        }
        let text_idx = elf
            .section_headers
            .iter()
            .position(|s| elf.shdr_strtab.get_at(s.sh_name) == Some(".text"))
            .ok_or_else(|| bad("no .text section".into()))?;
        let (text_address, text) = section_bytes(&elf, bytes, text_idx, what)?;
        Ok(CodeObject {
            target: GfxTarget::from_elf_flags(elf.header.e_flags),
            text_address,
            text: text.to_vec(),
            kernels: kernels(&elf, bytes, what)?,
            segments: segments(&elf, bytes, what)?,
            relocations: dynamic_relocations(&elf, what)?,
            metadata: metadata::from_elf(&elf, bytes, what)?.unwrap_or_default(),
            what: what.to_string(),
        })
    }

    /// The kernel called `name`.
    pub fn kernel(&self, name: &str) -> Result<&Kernel, Error> {
        self.kernels
            .iter()
            .find(|k| k.name == name)
            .ok_or_else(|| Error::NoKernel {
                name: name.to_string(),
                available: self
                    .kernels
                    .iter()
                    .map(|k| k.name.clone())
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }

    /// What the metadata note says of kernel `name`.
    pub fn kernel_metadata(&self, name: &str) -> Option<&KernelMetadata> {
        self.metadata.iter().find(|k| k.name == name)
    }

    /// The memory image from address 0: every loadable segment at its address, zeros
    /// between. Refused above [`MAX_IMAGE`].
    pub fn image(&self) -> Result<Vec<u8>, Error> {
        let end = self
            .segments
            .iter()
            .map(|s| s.vaddr.saturating_add(s.bytes.len() as u64))
            .max()
            .ok_or_else(|| bad(&self.what, "the code object has no loadable segment".into()))?;
        if end > MAX_IMAGE {
            return Err(bad(
                &self.what,
                format!("an image of {end} bytes is not a kernel"),
            ));
        }
        let mut image = vec![0u8; end as usize];
        for s in &self.segments {
            let at = s.vaddr as usize;
            image[at..at + s.bytes.len()].copy_from_slice(&s.bytes);
        }
        Ok(image)
    }

    /// Applies the dynamic relocations to `image` (from [`CodeObject::image`]) loaded at GPU
    /// address `base`.
    pub fn relocate(&self, image: &mut [u8], base: u64) -> Result<(), Error> {
        use reloc::*;
        for r in &self.relocations {
            let value = match r.kind {
                R_AMDGPU_NONE => continue,
                R_AMDGPU_RELATIVE64 => base.wrapping_add_signed(r.addend),
                R_AMDGPU_ABS64 | R_AMDGPU_REL64 => {
                    let sym = r.symbol.ok_or_else(|| {
                        bad(
                            &self.what,
                            format!("relocation at {:#x} names no symbol", r.offset),
                        )
                    })?;
                    let s = base.wrapping_add(sym).wrapping_add_signed(r.addend);
                    if r.kind == R_AMDGPU_REL64 {
                        s.wrapping_sub(base.wrapping_add(r.offset))
                    } else {
                        s
                    }
                }
                t => {
                    return Err(bad(
                        &self.what,
                        format!("relocation type {t} is not supported"),
                    ));
                }
            };
            usize::try_from(r.offset)
                .ok()
                .and_then(|at| image.get_mut(at..at.checked_add(8)?))
                .ok_or_else(|| {
                    bad(
                        &self.what,
                        format!("relocation at {:#x} outside the image", r.offset),
                    )
                })?
                .copy_from_slice(&value.to_le_bytes());
        }
        Ok(())
    }
}

pub(crate) fn bad(what: &str, reason: String) -> Error {
    Error::CodeObject {
        what: what.to_string(),
        reason,
    }
}

/// The address and file bytes of section `idx`.
fn section_bytes<'a>(
    elf: &Elf,
    bytes: &'a [u8],
    idx: usize,
    what: &str,
) -> Result<(u64, &'a [u8]), Error> {
    let sh = elf
        .section_headers
        .get(idx)
        .ok_or_else(|| bad(what, format!("no section {idx}")))?;
    let r = sh
        .file_range()
        .ok_or_else(|| bad(what, format!("section {idx} has no file bytes")))?;
    let b = bytes
        .get(r.clone())
        .ok_or_else(|| bad(what, format!("section {idx} at {r:?} is beyond the file")))?;
    Ok((sh.sh_addr, b))
}

/// The kernels of the `NAME.kd` symbols, each once (a symbol may be in both tables).
fn kernels(elf: &Elf, bytes: &[u8], what: &str) -> Result<Vec<Kernel>, Error> {
    let mut kernels: Vec<Kernel> = vec![];
    for sym in elf.syms.iter().chain(elf.dynsyms.iter()) {
        let name = elf
            .strtab
            .get_at(sym.st_name)
            .or_else(|| elf.dynstrtab.get_at(sym.st_name));
        let Some(kname) = name.and_then(|n| n.strip_suffix(".kd")) else {
            continue;
        };
        if kernels.iter().any(|k| k.name == kname) {
            continue;
        }
        let (addr, b) = section_bytes(elf, bytes, sym.st_shndx, what)?;
        let off = sym
            .st_value
            .checked_sub(addr)
            .ok_or_else(|| bad(what, format!("{kname}.kd outside its section")))?;
        let kd: &[u8; 64] = usize::try_from(off)
            .ok()
            .and_then(|o| b.get(o..o.checked_add(KernelDescriptor::SIZE)?))
            .and_then(|s| s.try_into().ok())
            .ok_or_else(|| {
                bad(
                    what,
                    format!("{kname}.kd at {:#x} is truncated", sym.st_value),
                )
            })?;
        let descriptor = KernelDescriptor::parse(kd);
        kernels.push(Kernel {
            name: kname.to_string(),
            descriptor_address: sym.st_value,
            entry: sym
                .st_value
                .wrapping_add_signed(descriptor.kernel_code_entry_byte_offset),
            descriptor,
        });
    }
    Ok(kernels)
}

/// The `PT_LOAD` segments' memory images.
fn segments(elf: &Elf, bytes: &[u8], what: &str) -> Result<Vec<Segment>, Error> {
    let mut segments = vec![];
    for ph in &elf.program_headers {
        if ph.p_type != goblin::elf::program_header::PT_LOAD {
            continue;
        }
        let r = ph.file_range();
        let file = bytes
            .get(r.clone())
            .ok_or_else(|| bad(what, format!("segment at {r:?} is beyond the file")))?;
        let memsz = usize::try_from(ph.p_memsz)
            .ok()
            .filter(|&m| m >= file.len() && m as u64 <= MAX_IMAGE)
            .ok_or_else(|| {
                bad(
                    what,
                    format!("segment memory size {:#x} is invalid", ph.p_memsz),
                )
            })?;
        let mut img = file.to_vec();
        img.resize(memsz, 0);
        segments.push(Segment {
            vaddr: ph.p_vaddr,
            bytes: img,
        });
    }
    Ok(segments)
}

/// The `.rela.dyn` entries with their symbols' values.
fn dynamic_relocations(elf: &Elf, what: &str) -> Result<Vec<DynamicRelocation>, Error> {
    elf.dynrelas
        .iter()
        .map(|r| {
            let symbol = if r.r_sym == 0 {
                None
            } else {
                let s = elf.dynsyms.get(r.r_sym).ok_or_else(|| {
                    bad(
                        what,
                        format!("relocation at {:#x} names symbol {}", r.r_offset, r.r_sym),
                    )
                })?;
                Some(s.st_value)
            };
            Ok(DynamicRelocation {
                offset: r.r_offset,
                kind: r.r_type,
                addend: r.r_addend.unwrap_or(0),
                symbol,
            })
        })
        .collect()
}
