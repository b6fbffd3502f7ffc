//! The `NT_AMDGPU_METADATA` note (MessagePack, AMDGPUUsage "Code Object V3+ Metadata"): what a
//! runtime needs to launch each kernel.

use goblin::elf::Elf;
use rmpv::Value as Mp;

use super::bad;
use crate::Error;

/// Note type of the AMDGPU metadata (owner `AMDGPU`).
pub const NT_AMDGPU_METADATA: u32 = 32;

/// One kernel argument as the metadata describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArgMetadata {
    /// Its name (`.name`), empty if the metadata gives none.
    pub name: String,
    /// Byte offset in the kernel-argument segment.
    pub offset: u32,
    /// Size in bytes.
    pub size: u32,
    /// `.value_kind`: `global_buffer`, `by_value`, `hidden_block_count_x`, …
    pub value_kind: String,
}

impl ArgMetadata {
    /// Whether the runtime fills it (a hidden argument of code object v5).
    pub fn hidden(&self) -> bool {
        self.value_kind.starts_with("hidden_")
    }
}

/// What the metadata says of one kernel. Numbers the note leaves out read as 0.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelMetadata {
    /// Kernel name.
    pub name: String,
    /// Descriptor symbol (`NAME.kd`).
    pub symbol: String,
    /// Bytes of kernel arguments the kernel reads.
    pub kernarg_segment_size: u32,
    /// Their alignment.
    pub kernarg_segment_align: u32,
    /// LDS bytes.
    pub group_segment_fixed_size: u32,
    /// Scratch bytes per work-item.
    pub private_segment_fixed_size: u32,
    /// Lanes per wave.
    pub wavefront_size: u32,
    /// Scalar registers.
    pub sgpr_count: u32,
    /// Vector registers.
    pub vgpr_count: u32,
    /// Largest workgroup the kernel accepts.
    pub max_flat_workgroup_size: u32,
    /// The workgroup size the kernel was compiled for (`.reqd_workgroup_size`), if fixed.
    pub reqd_workgroup_size: Option<[u32; 3]>,
    /// Arguments in order.
    pub args: Vec<ArgMetadata>,
}

/// The kernels a code object's metadata note describes. `what` names it in errors; a code
/// object without the note is an error.
pub fn read_metadata(code_object: &[u8], what: &str) -> Result<Vec<KernelMetadata>, Error> {
    let elf = Elf::parse(code_object).map_err(|e| bad(what, format!("not ELF: {e}")))?;
    from_elf(&elf, code_object, what)?.ok_or_else(|| bad(what, "no NT_AMDGPU_METADATA note".into()))
}

/// The note's kernels, `None` without a note. Note sections are read where the file has
/// them (LLVM's relocatable objects have no program headers), else the `PT_NOTE` segment.
pub(super) fn from_elf(
    elf: &Elf,
    bytes: &[u8],
    what: &str,
) -> Result<Option<Vec<KernelMetadata>>, Error> {
    let notes = elf
        .iter_note_sections(bytes, None)
        .or_else(|| elf.iter_note_headers(bytes));
    let Some(notes) = notes else {
        return Ok(None);
    };
    for note in notes {
        let note = note.map_err(|e| bad(what, format!("bad note: {e}")))?;
        if note.n_type != NT_AMDGPU_METADATA || note.name != "AMDGPU" {
            continue;
        }
        let v = rmpv::decode::read_value(&mut &note.desc[..])
            .map_err(|e| bad(what, format!("metadata is not MessagePack: {e}")))?;
        let kernels = get(&v, "amdhsa.kernels")
            .and_then(|k| k.as_array())
            .ok_or_else(|| bad(what, "metadata has no amdhsa.kernels".into()))?;
        return Ok(Some(kernels.iter().map(kernel).collect()));
    }
    Ok(None)
}

fn kernel(k: &Mp) -> KernelMetadata {
    KernelMetadata {
        name: text(k, ".name"),
        symbol: text(k, ".symbol"),
        kernarg_segment_size: num(k, ".kernarg_segment_size"),
        kernarg_segment_align: num(k, ".kernarg_segment_align"),
        group_segment_fixed_size: num(k, ".group_segment_fixed_size"),
        private_segment_fixed_size: num(k, ".private_segment_fixed_size"),
        wavefront_size: num(k, ".wavefront_size"),
        sgpr_count: num(k, ".sgpr_count"),
        vgpr_count: num(k, ".vgpr_count"),
        max_flat_workgroup_size: num(k, ".max_flat_workgroup_size"),
        reqd_workgroup_size: get(k, ".reqd_workgroup_size")
            .and_then(|v| v.as_array())
            .and_then(|a| {
                let d: Vec<u32> = a
                    .iter()
                    .filter_map(|x| x.as_u64().and_then(|n| u32::try_from(n).ok()))
                    .collect();
                <[u32; 3]>::try_from(d).ok()
            }),
        args: get(k, ".args")
            .and_then(|a| a.as_array())
            .map(|a| {
                a.iter()
                    .map(|x| ArgMetadata {
                        name: text(x, ".name"),
                        offset: num(x, ".offset"),
                        size: num(x, ".size"),
                        value_kind: get(x, ".value_kind")
                            .and_then(|v| v.as_str())
                            .unwrap_or("by_value")
                            .to_string(),
                    })
                    .collect()
            })
            .unwrap_or_default(),
    }
}

fn get<'a>(m: &'a Mp, key: &str) -> Option<&'a Mp> {
    m.as_map()?
        .iter()
        .find(|(k, _)| k.as_str() == Some(key))
        .map(|(_, v)| v)
}

fn num(m: &Mp, key: &str) -> u32 {
    get(m, key)
        .and_then(|v| v.as_u64())
        .and_then(|v| u32::try_from(v).ok())
        .unwrap_or(0)
}

fn text(m: &Mp, key: &str) -> String {
    get(m, key)
        .and_then(|v| v.as_str())
        .unwrap_or("")
        .to_string()
}
