//! Programs: AMDGPU HSA code objects loaded for a device.
//!
//! `am-isa` reads the code object: the loadable image (every `PT_LOAD` segment at its
//! address), the dynamic relocations (applied here for the address the image is uploaded
//! to), the kernel descriptor (`NAME.kd`, 64 bytes) and the `NT_AMDGPU_METADATA` note
//! (argument layout, segment sizes, wave size, register counts). The image goes to VRAM; a
//! launch needs the descriptor's register state, the entry address and the argument layout.

use am_isa::code_object::{ArgMetadata, CodeObject};

use crate::memory::{Buffer, MemKind};
use crate::{Device, Error, Result};

/// `kernel_code_properties` bits, from `am-isa`.
pub use am_isa::code_object::kcp;

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
    pub args: Vec<ArgMetadata>,
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

/// A code-object error of `am-isa` as the runtime's, naming device and kernel once.
fn isa_error(dev: &Device, kernel: &str, e: am_isa::Error) -> Error {
    let reason = match e {
        am_isa::Error::CodeObject { reason, .. } => reason,
        e => e.to_string(),
    };
    bad(dev, kernel, reason)
}

impl Program {
    /// Load kernel `name` of the code object `bytes` onto `dev`: parse, relocate, upload.
    pub fn load(dev: &Device, bytes: &[u8], name: &str) -> Result<Program> {
        let isa = |e| isa_error(dev, name, e);
        let co = CodeObject::parse(bytes, name).map_err(isa)?;
        // Code for another processor decodes to other instructions (or none) here: refused
        // before anything is allocated, not left to fault on the GPU.
        let device_target = dev.info().target;
        match co.target {
            Some(t) if t == device_target => {}
            Some(t) => {
                return Err(bad(
                    dev,
                    name,
                    format!("the code object is for {t}, the device is {device_target}"),
                ));
            }
            None => {
                return Err(bad(
                    dev,
                    name,
                    format!(
                        "the code object's processor (ELF e_flags) is not one this project \
                         knows; the device is {device_target}"
                    ),
                ));
            }
        }
        if co.metadata.is_empty() {
            return Err(bad(dev, name, "no NT_AMDGPU_METADATA note"));
        }
        let kernel = co.kernel(name).map_err(isa)?;
        let kd = &kernel.descriptor;
        let k = co
            .kernel_metadata(name)
            .ok_or_else(|| bad(dev, name, "not in the metadata's amdhsa.kernels"))?;
        let mut image = co.image().map_err(isa)?;
        // A page of zeros after the image: instruction prefetch past the end of `.text` (what
        // LLVM's `s_code_end` padding is for) stays inside this buffer, and whoever decodes
        // forward from an entry (the mock, `umr`-style tools) finds where the code ends. Without
        // it the mock took the next buffer for code, and every kernel writing that buffer made
        // it decode up to 256 KiB again at the next dispatch.
        let code = dev.alloc(
            (image.len() as u64).next_multiple_of(0x1000) + 0x1000,
            MemKind::Vram,
        )?;
        let base = code.va();
        co.relocate(&mut image, base).map_err(isa)?;
        let mut args = k.args.clone();
        args.sort_by_key(|a| a.offset);
        // The metadata first; the descriptor where the metadata leaves a number out.
        let or_kd = |m: u32, kd: u32| if m != 0 { m } else { kd };
        let program = Program {
            name: name.to_string(),
            descriptor: base + kernel.descriptor_address,
            entry: base.wrapping_add(kernel.entry),
            rsrc: kd.rsrc(),
            properties: kd.kernel_code_properties,
            kernarg_size: or_kd(k.kernarg_segment_size, kd.kernarg_size),
            kernarg_align: k.kernarg_segment_align.max(8),
            lds: or_kd(k.group_segment_fixed_size, kd.group_segment_fixed_size),
            scratch: or_kd(k.private_segment_fixed_size, kd.private_segment_fixed_size),
            wave_size: or_kd(k.wavefront_size, kd.wave_size()),
            registers: (k.sgpr_count, k.vgpr_count),
            workgroup: k.reqd_workgroup_size,
            explicit: (0..args.len()).filter(|&i| !args[i].hidden()).collect(),
            hidden: args
                .iter()
                .filter(|a| a.hidden())
                .map(|a| (a.offset, a.size, hidden_kind(a)))
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
        image.resize(program.code.size() as usize, 0);
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
        let target = info.target;
        if sgprs > target.max_sgprs() {
            return Err(bad(
                dev,
                &self.name,
                format!(
                    "{sgprs} SGPRs; a wave on {target} has {}",
                    target.max_sgprs()
                ),
            ));
        }
        if vgprs > target.max_vgprs() {
            return Err(bad(
                dev,
                &self.name,
                format!(
                    "{vgprs} VGPRs; a wave on {target} has at most {}",
                    target.max_vgprs()
                ),
            ));
        }
        if !target.wave_sizes().contains(&self.wave_size) {
            return Err(bad(
                dev,
                &self.name,
                format!(
                    "wave{} code on {target}, which runs {:?}",
                    self.wave_size,
                    target.wave_sizes()
                ),
            ));
        }
        Ok(())
    }

    /// Write explicit argument `i` (described by `info`) into the kernel-argument bytes `out`.
    fn put_arg(
        &self,
        dev: &Device,
        i: usize,
        info: &ArgMetadata,
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
                    info.value_kind, info.name, info.size
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
    pub fn explicit_args(&self) -> impl Iterator<Item = &ArgMetadata> {
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

/// What the runtime writes into a hidden argument.
fn hidden_kind(a: &ArgMetadata) -> Hidden {
    match a.value_kind.as_str() {
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
