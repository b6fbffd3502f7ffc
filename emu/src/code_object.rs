//! AMDGPU HSA code objects: `.text` and the 64-byte kernel descriptors (`NAME.kd`).

use crate::Error;
use goblin::elf::Elf;

/// Kernel descriptor fields (AMDGPUUsage, "Kernel Descriptor").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelDescriptor {
    /// LDS bytes the kernel declares (`group_segment_fixed_size`).
    pub group_segment_fixed_size: u32,
    /// Scratch bytes per work-item (`private_segment_fixed_size`).
    pub private_segment_fixed_size: u32,
    /// Size of the kernel arguments.
    pub kernarg_size: u32,
    /// Entry offset from the descriptor's own address.
    pub kernel_code_entry_byte_offset: i64,
    /// `COMPUTE_PGM_RSRC3`.
    pub compute_pgm_rsrc3: u32,
    /// `COMPUTE_PGM_RSRC1` (register counts, float modes).
    pub compute_pgm_rsrc1: u32,
    /// `COMPUTE_PGM_RSRC2` (user SGPR count, system SGPR/VGPR enables).
    pub compute_pgm_rsrc2: u32,
    /// `kernel_code_properties` (user SGPR enables, wave32).
    pub kernel_code_properties: u16,
}

/// Bits of `kernel_code_properties`.
pub mod kcp {
    /// Four SGPRs with the private segment buffer descriptor.
    pub const ENABLE_SGPR_PRIVATE_SEGMENT_BUFFER: u16 = 1 << 0;
    /// Two SGPRs with the dispatch packet address.
    pub const ENABLE_SGPR_DISPATCH_PTR: u16 = 1 << 1;
    /// Two SGPRs with the queue address.
    pub const ENABLE_SGPR_QUEUE_PTR: u16 = 1 << 2;
    /// Two SGPRs with the kernel argument address.
    pub const ENABLE_SGPR_KERNARG_SEGMENT_PTR: u16 = 1 << 3;
    /// Two SGPRs with the dispatch id.
    pub const ENABLE_SGPR_DISPATCH_ID: u16 = 1 << 4;
    /// Two SGPRs with flat scratch base/size.
    pub const ENABLE_SGPR_FLAT_SCRATCH_INIT: u16 = 1 << 5;
    /// One SGPR with the private segment size.
    pub const ENABLE_SGPR_PRIVATE_SEGMENT_SIZE: u16 = 1 << 6;
    /// Waves of 32 lanes (gfx10+); otherwise 64.
    pub const ENABLE_WAVEFRONT_SIZE32: u16 = 1 << 10;
}

impl KernelDescriptor {
    /// Parses the 64 descriptor bytes.
    pub fn parse(b: &[u8; 64]) -> KernelDescriptor {
        let u32_at = |o: usize| u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
        let mut e = [0u8; 8];
        e.copy_from_slice(&b[16..24]);
        KernelDescriptor {
            group_segment_fixed_size: u32_at(0),
            private_segment_fixed_size: u32_at(4),
            kernarg_size: u32_at(8),
            kernel_code_entry_byte_offset: i64::from_le_bytes(e),
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

/// A loaded code object: its code and its kernels.
#[derive(Clone, Debug)]
pub struct CodeObject {
    /// Virtual address of `.text` in the code object.
    pub text_address: u64,
    /// The `.text` bytes.
    pub text: Vec<u8>,
    /// Kernels found through their `NAME.kd` symbols.
    pub kernels: Vec<Kernel>,
    /// Loadable segments.
    pub segments: Vec<Segment>,
}

impl CodeObject {
    /// Parses an ELF code object. `what` names it in errors (a path or a kernel name).
    pub fn parse(bytes: &[u8], what: &str) -> Result<CodeObject, Error> {
        let bad = |reason: String| Error::CodeObject {
            what: what.to_string(),
            reason,
        };
        let elf = Elf::parse(bytes).map_err(|e| bad(format!("not an ELF file: {e}")))?;
        if elf.header.e_machine != goblin::elf::header::EM_AMDGPU {
            return Err(bad(format!(
                "machine {} is not AMDGPU (224)",
                elf.header.e_machine
            )));
        }
        let section_bytes = |idx: usize| -> Result<(u64, &[u8]), Error> {
            let sh = elf
                .section_headers
                .get(idx)
                .ok_or_else(|| bad(format!("no section {idx}")))?;
            let r = sh
                .file_range()
                .ok_or_else(|| bad(format!("section {idx} has no file bytes")))?;
            let b = bytes
                .get(r.clone())
                .ok_or_else(|| bad(format!("section {idx} at {r:?} is beyond the file")))?;
            Ok((sh.sh_addr, b))
        };
        let text_idx = elf
            .section_headers
            .iter()
            .position(|s| elf.shdr_strtab.get_at(s.sh_name) == Some(".text"))
            .ok_or_else(|| bad("no .text section".into()))?;
        let (text_address, text) = section_bytes(text_idx)?;
        let mut kernels = vec![];
        for sym in elf.syms.iter().chain(elf.dynsyms.iter()) {
            let name = elf
                .strtab
                .get_at(sym.st_name)
                .or_else(|| elf.dynstrtab.get_at(sym.st_name));
            let Some(kname) = name.and_then(|n| n.strip_suffix(".kd")) else {
                continue;
            };
            if kernels.iter().any(|k: &Kernel| k.name == kname) {
                continue;
            }
            let (addr, b) = section_bytes(sym.st_shndx)?;
            let off = sym
                .st_value
                .checked_sub(addr)
                .ok_or_else(|| bad(format!("{kname}.kd outside its section")))?;
            let kd: &[u8; 64] = usize::try_from(off)
                .ok()
                .and_then(|o| b.get(o..o + 64))
                .and_then(|s| s.try_into().ok())
                .ok_or_else(|| bad(format!("{kname}.kd at {:#x} is truncated", sym.st_value)))?;
            let descriptor = KernelDescriptor::parse(kd);
            let entry = sym
                .st_value
                .wrapping_add(descriptor.kernel_code_entry_byte_offset as u64);
            kernels.push(Kernel {
                name: kname.to_string(),
                descriptor_address: sym.st_value,
                descriptor,
                entry,
            });
        }
        let mut segments = vec![];
        for ph in &elf.program_headers {
            if ph.p_type != goblin::elf::program_header::PT_LOAD {
                continue;
            }
            let r = ph.file_range();
            let file = bytes
                .get(r.clone())
                .ok_or_else(|| bad(format!("segment at {r:?} is beyond the file")))?;
            let memsz = usize::try_from(ph.p_memsz)
                .ok()
                .filter(|&m| m >= file.len() && m <= 1 << 30)
                .ok_or_else(|| bad(format!("segment memory size {:#x} is invalid", ph.p_memsz)))?;
            let mut img = file.to_vec();
            img.resize(memsz, 0);
            segments.push(Segment {
                vaddr: ph.p_vaddr,
                bytes: img,
            });
        }
        Ok(CodeObject {
            text_address,
            text: text.to_vec(),
            kernels,
            segments,
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
}
