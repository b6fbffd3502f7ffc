//! Programs: AMDGPU HSA code objects loaded for a device.
//!
//! The ELF (goblin) gives the loadable image (every `PT_LOAD` segment at its address), the
//! dynamic relocations (`R_AMDGPU_RELATIVE64`, `ABS64`, `REL64`, applied for the address the
//! image is uploaded to), the kernel descriptor (`NAME.kd`, 64 bytes) and the
//! `NT_AMDGPU_METADATA` note (MessagePack, `amdhsa.kernels`: argument layout, segment sizes,
//! wave size, register counts). The image goes to VRAM; a launch needs the descriptor's
//! register state, the entry address and the argument layout.

use goblin::elf::Elf;

use crate::memory::{Buffer, MemKind};
use crate::{Device, Error, Result};

/// `EM_AMDGPU`.
const EM_AMDGPU: u16 = 224;
/// `NT_AMDGPU_METADATA`.
const NT_AMDGPU_METADATA: u32 = 32;
/// Dynamic relocation types of AMDGPU (`R_AMDGPU_*`).
const R_AMDGPU_NONE: u32 = 0;
const R_AMDGPU_ABS64: u32 = 3;
const R_AMDGPU_REL64: u32 = 5;
const R_AMDGPU_RELATIVE64: u32 = 13;

/// `kernel_code_properties` bits (AMDGPUUsage, "Kernel Descriptor").
pub mod kcp {
    /// Four SGPRs: the private segment buffer descriptor.
    pub const PRIVATE_SEGMENT_BUFFER: u16 = 1 << 0;
    /// Two SGPRs: the dispatch packet's address.
    pub const DISPATCH_PTR: u16 = 1 << 1;
    /// Two SGPRs: the queue's address.
    pub const QUEUE_PTR: u16 = 1 << 2;
    /// Two SGPRs: the kernel arguments' address.
    pub const KERNARG_SEGMENT_PTR: u16 = 1 << 3;
    /// Two SGPRs: the dispatch id.
    pub const DISPATCH_ID: u16 = 1 << 4;
    /// Two SGPRs: flat scratch init.
    pub const FLAT_SCRATCH_INIT: u16 = 1 << 5;
    /// One SGPR: the private segment size.
    pub const PRIVATE_SEGMENT_SIZE: u16 = 1 << 6;
    /// Waves of 32 lanes.
    pub const WAVEFRONT_SIZE32: u16 = 1 << 10;
}

/// One argument of a kernel, as the metadata describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArgInfo {
    /// Its name, if the metadata gives one.
    pub name: String,
    /// Byte offset in the kernel arguments.
    pub offset: u32,
    /// Size in bytes.
    pub size: u32,
    /// `.value_kind`: `global_buffer`, `by_value`, `hidden_block_count_x`, …
    pub kind: String,
}

impl ArgInfo {
    /// Whether the runtime fills it (a hidden argument of code object v5).
    pub fn hidden(&self) -> bool {
        self.kind.starts_with("hidden_")
    }
}

/// An argument value.
#[derive(Clone, Debug, PartialEq)]
pub enum Arg {
    /// A GPU address (a buffer, or a view of one: `Arg::from(&buffer)`).
    Ptr(u64),
    /// 32-bit unsigned.
    U32(u32),
    /// 32-bit signed.
    I32(i32),
    /// 32-bit float.
    F32(f32),
    /// 64-bit unsigned.
    U64(u64),
    /// 64-bit signed.
    I64(i64),
    /// 64-bit float.
    F64(f64),
    /// Raw bytes (a struct passed by value).
    Bytes(Vec<u8>),
}

impl From<&Buffer> for Arg {
    fn from(b: &Buffer) -> Arg {
        Arg::Ptr(b.va())
    }
}

impl Arg {
    /// Its little-endian bytes (scalars in the array's first 4 or 8 bytes).
    fn le(&self) -> ([u8; 8], usize) {
        let mut b = [0u8; 8];
        let n = match self {
            Arg::Ptr(v) | Arg::U64(v) => {
                b = v.to_le_bytes();
                8
            }
            Arg::I64(v) => {
                b = v.to_le_bytes();
                8
            }
            Arg::F64(v) => {
                b = v.to_le_bytes();
                8
            }
            Arg::U32(v) => {
                b[..4].copy_from_slice(&v.to_le_bytes());
                4
            }
            Arg::I32(v) => {
                b[..4].copy_from_slice(&v.to_le_bytes());
                4
            }
            Arg::F32(v) => {
                b[..4].copy_from_slice(&v.to_le_bytes());
                4
            }
            Arg::Bytes(v) => v.len(),
        };
        (b, n)
    }

    fn bytes(&self) -> &[u8] {
        match self {
            Arg::Bytes(v) => v,
            _ => &[],
        }
    }
}

/// What a hidden argument holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Hidden {
    BlockCount(usize),
    GroupSize(usize),
    GridDims,
    Zero,
}

/// A kernel loaded on a device.
#[derive(Clone, Debug)]
pub struct Program {
    /// Kernel name.
    pub name: String,
    /// The uploaded image (kept alive as long as the program).
    pub code: Buffer,
    /// GPU address of the kernel descriptor.
    pub descriptor: u64,
    /// GPU address of the first instruction.
    pub entry: u64,
    /// `COMPUTE_PGM_RSRC1/2/3` from the descriptor.
    pub rsrc: [u32; 3],
    /// `kernel_code_properties`.
    pub properties: u16,
    /// Bytes of kernel arguments (`kernarg_segment_size`).
    pub kernarg_size: u32,
    /// Their alignment.
    pub kernarg_align: u32,
    /// LDS bytes (`group_segment_fixed_size`).
    pub lds: u32,
    /// Scratch bytes per work-item (`private_segment_fixed_size`).
    pub scratch: u32,
    /// Lanes per wave.
    pub wave_size: u32,
    /// The arguments, explicit and hidden, in offset order.
    pub args: Vec<ArgInfo>,
    /// Register counts from the metadata (SGPRs, VGPRs), where it gives them.
    pub registers: (u32, u32),
    /// The workgroup size the kernel was compiled for (`.reqd_workgroup_size`), if fixed:
    /// launches must use it.
    pub workgroup: Option<[u32; 3]>,
    /// The explicit arguments' indices in `args`.
    explicit: Vec<usize>,
    /// The hidden arguments the runtime fills: offset, size, what.
    hidden: Vec<(u32, u32, Hidden)>,
    /// The name, shared with the command buffers that launch it.
    pub(crate) label: std::sync::Arc<str>,
}

fn bad(dev: &Device, kernel: &str, reason: impl Into<String>) -> Error {
    Error::Program {
        device: dev.name().to_string(),
        kernel: kernel.to_string(),
        reason: reason.into(),
    }
}

/// The kernel entry of the metadata named `name`.
fn metadata<'a>(meta: &'a rmpv::Value, name: &str) -> Option<&'a rmpv::Value> {
    let kernels = map_get(meta, "amdhsa.kernels")?.as_array()?;
    kernels
        .iter()
        .find(|k| map_get(k, ".name").and_then(|v| v.as_str()) == Some(name))
}

fn map_get<'a>(v: &'a rmpv::Value, key: &str) -> Option<&'a rmpv::Value> {
    v.as_map()?
        .iter()
        .find(|(k, _)| k.as_str() == Some(key))
        .map(|(_, v)| v)
}

fn num(v: &rmpv::Value, key: &str) -> Option<u32> {
    map_get(v, key)?
        .as_u64()
        .and_then(|n| u32::try_from(n).ok())
}

impl Program {
    /// Load kernel `name` of the code object `bytes` onto `dev`: parse, relocate, upload.
    pub fn load(dev: &Device, bytes: &[u8], name: &str) -> Result<Program> {
        let elf = Elf::parse(bytes).map_err(|e| bad(dev, name, format!("not an ELF file: {e}")))?;
        if elf.header.e_machine != EM_AMDGPU {
            return Err(bad(
                dev,
                name,
                format!(
                    "ELF machine {} is not AMDGPU ({EM_AMDGPU})",
                    elf.header.e_machine
                ),
            ));
        }
        // The image: every loadable segment at its address.
        let loads: Vec<_> = elf
            .program_headers
            .iter()
            .filter(|p| p.p_type == goblin::elf::program_header::PT_LOAD)
            .collect();
        let end = loads
            .iter()
            .map(|p| p.p_vaddr.saturating_add(p.p_memsz))
            .max()
            .ok_or_else(|| bad(dev, name, "the code object has no loadable segment"))?;
        if end > 256 << 20 {
            return Err(bad(
                dev,
                name,
                format!("an image of {end} bytes is not a kernel"),
            ));
        }
        let mut image = vec![0u8; end as usize];
        for p in &loads {
            let src = bytes
                .get(p.p_offset as usize..(p.p_offset + p.p_filesz) as usize)
                .ok_or_else(|| bad(dev, name, "a segment lies outside the file"))?;
            image[p.p_vaddr as usize..p.p_vaddr as usize + src.len()].copy_from_slice(src);
        }
        let code = dev.alloc(end.next_multiple_of(0x1000), MemKind::Vram)?;
        let base = code.va();
        // Dynamic relocations for the upload address.
        for r in elf.dynrelas.iter() {
            let at = r.r_offset as usize;
            let addend = r.r_addend.unwrap_or(0);
            let value = match r.r_type {
                R_AMDGPU_NONE => continue,
                R_AMDGPU_RELATIVE64 => base.wrapping_add_signed(addend),
                R_AMDGPU_ABS64 | R_AMDGPU_REL64 => {
                    let sym = elf.dynsyms.get(r.r_sym).ok_or_else(|| {
                        bad(dev, name, format!("relocation of symbol {}", r.r_sym))
                    })?;
                    let s = base.wrapping_add(sym.st_value).wrapping_add_signed(addend);
                    if r.r_type == R_AMDGPU_REL64 {
                        s.wrapping_sub(base + r.r_offset)
                    } else {
                        s
                    }
                }
                t => {
                    return Err(bad(
                        dev,
                        name,
                        format!("relocation type {t} is not supported"),
                    ));
                }
            };
            image
                .get_mut(at..at + 8)
                .ok_or_else(|| {
                    bad(
                        dev,
                        name,
                        format!("relocation at {at:#x} outside the image"),
                    )
                })?
                .copy_from_slice(&value.to_le_bytes());
        }
        // The kernel descriptor.
        let kd_name = format!("{name}.kd");
        let kd_off = elf
            .syms
            .iter()
            .chain(elf.dynsyms.iter())
            .find(|s| {
                elf.strtab.get_at(s.st_name) == Some(kd_name.as_str())
                    || elf.dynstrtab.get_at(s.st_name) == Some(kd_name.as_str())
            })
            .map(|s| s.st_value)
            .ok_or_else(|| {
                bad(
                    dev,
                    name,
                    format!("no symbol {kd_name} (is the kernel in this code object?)"),
                )
            })?;
        let kd: [u8; 64] = image
            .get(kd_off as usize..kd_off as usize + 64)
            .and_then(|b| b.try_into().ok())
            .ok_or_else(|| bad(dev, name, "the kernel descriptor lies outside the image"))?;
        let u32_at = |o: usize| u32::from_le_bytes([kd[o], kd[o + 1], kd[o + 2], kd[o + 3]]);
        let entry_off = i64::from_le_bytes(kd[16..24].try_into().unwrap_or([0; 8]));
        let properties = u16::from_le_bytes([kd[56], kd[57]]);
        // The metadata note.
        let mut meta = None;
        if let Some(notes) = elf.iter_note_headers(bytes) {
            for n in notes.flatten() {
                if n.n_type == NT_AMDGPU_METADATA && n.name == "AMDGPU" {
                    meta = rmpv::decode::read_value(&mut &n.desc[..]).ok();
                }
            }
        }
        let meta = meta.ok_or_else(|| bad(dev, name, "no NT_AMDGPU_METADATA note"))?;
        let k = metadata(&meta, name)
            .ok_or_else(|| bad(dev, name, "not in the metadata's amdhsa.kernels"))?;
        let mut args: Vec<ArgInfo> = map_get(k, ".args")
            .and_then(|a| a.as_array())
            .map(|a| {
                a.iter()
                    .map(|arg| ArgInfo {
                        name: map_get(arg, ".name")
                            .and_then(|v| v.as_str())
                            .unwrap_or("")
                            .into(),
                        offset: num(arg, ".offset").unwrap_or(0),
                        size: num(arg, ".size").unwrap_or(0),
                        kind: map_get(arg, ".value_kind")
                            .and_then(|v| v.as_str())
                            .unwrap_or("by_value")
                            .into(),
                    })
                    .collect()
            })
            .unwrap_or_default();
        args.sort_by_key(|a| a.offset);
        let wave_size =
            num(k, ".wavefront_size").unwrap_or(if properties & kcp::WAVEFRONT_SIZE32 != 0 {
                32
            } else {
                64
            });
        let program = Program {
            name: name.to_string(),
            descriptor: base + kd_off,
            entry: (base + kd_off).wrapping_add_signed(entry_off),
            rsrc: [u32_at(48), u32_at(52), u32_at(44)],
            properties,
            kernarg_size: num(k, ".kernarg_segment_size").unwrap_or(u32_at(8)),
            kernarg_align: num(k, ".kernarg_segment_align").unwrap_or(8).max(8),
            lds: num(k, ".group_segment_fixed_size").unwrap_or(u32_at(0)),
            scratch: num(k, ".private_segment_fixed_size").unwrap_or(u32_at(4)),
            wave_size,
            registers: (
                num(k, ".sgpr_count").unwrap_or(0),
                num(k, ".vgpr_count").unwrap_or(0),
            ),
            workgroup: map_get(k, ".reqd_workgroup_size")
                .and_then(|v| v.as_array())
                .and_then(|a| {
                    let d: Vec<u32> = a
                        .iter()
                        .filter_map(|x| x.as_u64().and_then(|n| u32::try_from(n).ok()))
                        .collect();
                    <[u32; 3]>::try_from(d).ok()
                }),
            explicit: (0..args.len()).filter(|&i| !args[i].hidden()).collect(),
            hidden: args
                .iter()
                .filter(|a| a.hidden())
                .map(|a| (a.offset, a.size, a.hidden_kind()))
                .filter(|h| h.2 != Hidden::Zero)
                .collect(),
            label: name.into(),
            args,
            code,
        };
        program.check_limits(dev)?;
        if !program.entry.is_multiple_of(256) {
            return Err(bad(
                dev,
                name,
                format!("entry {:#x} is not 256-byte aligned", program.entry),
            ));
        }
        dev.write(&program.code, 0, &image)?;
        Ok(program)
    }

    /// LDS and registers against what the device has.
    fn check_limits(&self, dev: &Device) -> Result<()> {
        let info = dev.info();
        if self.lds > info.lds_bytes {
            return Err(bad(
                dev,
                &self.name,
                format!(
                    "{} bytes of LDS; the device has {} per workgroup",
                    self.lds, info.lds_bytes
                ),
            ));
        }
        let (sgprs, vgprs) = self.registers;
        if sgprs > 106 {
            return Err(bad(
                dev,
                &self.name,
                format!("{sgprs} SGPRs; a wave has 106"),
            ));
        }
        if vgprs > 512 {
            return Err(bad(
                dev,
                &self.name,
                format!("{vgprs} VGPRs; a wave has at most 512"),
            ));
        }
        if self.wave_size == 32 && info.gc_major < 10 {
            return Err(bad(
                dev,
                &self.name,
                format!("wave32 code on {}, which runs wave64", info.target),
            ));
        }
        Ok(())
    }

    /// Write explicit argument `i` (described by `info`) into the kernel-argument bytes `out`.
    fn put_arg(
        &self,
        dev: &Device,
        i: usize,
        info: &ArgInfo,
        a: &Arg,
        out: &mut [u8],
    ) -> Result<()> {
        let (scalar, n) = a.le();
        let b = if matches!(a, Arg::Bytes(_)) {
            a.bytes()
        } else {
            &scalar[..n]
        };
        if n != info.size as usize {
            return Err(Error::Argument {
                device: dev.name().to_string(),
                kernel: self.name.clone(),
                index: i,
                reason: format!(
                    "{a:?} is {n} bytes; {} `{}` takes {}",
                    info.kind, info.name, info.size
                ),
            });
        }
        let at = info.offset as usize;
        out.get_mut(at..at + n)
            .ok_or_else(|| {
                bad(
                    dev,
                    &self.name,
                    format!("argument {i} lies past kernarg_segment_size"),
                )
            })?
            .copy_from_slice(b);
        Ok(())
    }

    /// Replace explicit argument `index` in kernel-argument bytes made by
    /// [`Program::encode_args`] (graphs change arguments this way).
    pub fn set_arg(&self, dev: &Device, out: &mut [u8], index: usize, a: &Arg) -> Result<()> {
        let info = self
            .explicit
            .get(index)
            .map(|&k| &self.args[k])
            .ok_or_else(|| Error::Argument {
                device: dev.name().to_string(),
                kernel: self.name.clone(),
                index,
                reason: format!(
                    "the kernel takes {} arguments",
                    self.explicit_args().count()
                ),
            })?;
        self.put_arg(dev, index, info, a, out)
    }

    /// The explicit arguments (those the caller passes).
    pub fn explicit_args(&self) -> impl Iterator<Item = &ArgInfo> {
        self.args.iter().filter(|a| !a.hidden())
    }

    /// The kernel-argument bytes for `args` and a launch of `grid` workgroups of `block`:
    /// explicit arguments at their offsets (checked against the metadata), hidden ones filled
    /// (block counts, group sizes, grid dimensions; the rest 0).
    pub fn encode_args(
        &self,
        dev: &Device,
        args: &[Arg],
        grid: [u32; 3],
        block: [u32; 3],
    ) -> Result<Vec<u8>> {
        let mut out = vec![0u8; self.kernarg_size as usize];
        self.encode_args_into(dev, args, grid, block, &mut out)?;
        Ok(out)
    }

    /// [`Program::encode_args`] into `out` (`kernarg_size` zeroed bytes).
    pub(crate) fn encode_args_into(
        &self,
        dev: &Device,
        args: &[Arg],
        grid: [u32; 3],
        block: [u32; 3],
        out: &mut [u8],
    ) -> Result<()> {
        if self.explicit.len() != args.len() {
            return Err(Error::Argument {
                device: dev.name().to_string(),
                kernel: self.name.clone(),
                index: args.len().min(self.explicit.len()),
                reason: format!(
                    "{} arguments given, the kernel takes {}",
                    args.len(),
                    self.explicit.len()
                ),
            });
        }
        for (i, (a, &k)) in args.iter().zip(&self.explicit).enumerate() {
            self.put_arg(dev, i, &self.args[k], a, out)?;
        }
        let dims = if grid[2] > 1 || block[2] > 1 {
            3u64
        } else if grid[1] > 1 || block[1] > 1 {
            2
        } else {
            1
        };
        for &(offset, size, what) in &self.hidden {
            let v: u64 = match what {
                Hidden::BlockCount(d) => grid[d].into(),
                Hidden::GroupSize(d) => block[d].into(),
                Hidden::GridDims => dims,
                Hidden::Zero => continue,
            };
            let at = offset as usize;
            let n = (size as usize).min(8);
            if let Some(slot) = out.get_mut(at..at + n) {
                slot.copy_from_slice(&v.to_le_bytes()[..n]);
            }
        }
        Ok(())
    }
}

impl ArgInfo {
    fn hidden_kind(&self) -> Hidden {
        match self.kind.as_str() {
            "hidden_block_count_x" => Hidden::BlockCount(0),
            "hidden_block_count_y" => Hidden::BlockCount(1),
            "hidden_block_count_z" => Hidden::BlockCount(2),
            "hidden_group_size_x" => Hidden::GroupSize(0),
            "hidden_group_size_y" => Hidden::GroupSize(1),
            "hidden_group_size_z" => Hidden::GroupSize(2),
            "hidden_grid_dims" => Hidden::GridDims,
            _ => Hidden::Zero,
        }
    }
}
