//! The `NT_AMDGPU_METADATA` note of a code object (MessagePack, AMDGPUUsage "Code Object V3+
//! Metadata"): what a runtime needs to launch each kernel.

use goblin::elf::Elf;
use rmpv::Value as Mp;

use crate::Error;

/// Note type of the AMDGPU metadata (owner `AMDGPU`).
pub const NT_AMDGPU_METADATA: u32 = 32;

/// One kernel argument as the metadata describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArgMetadata {
    /// Byte offset in the kernel-argument segment.
    pub offset: u32,
    /// Size in bytes.
    pub size: u32,
    /// `global_buffer`, `by_value`, or a hidden argument kind.
    pub value_kind: String,
}

/// What the metadata says of one kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelMetadata {
    /// Kernel name.
    pub name: String,
    /// Descriptor symbol (`NAME.kd`).
    pub symbol: String,
    /// Bytes of kernel arguments the kernel reads.
    pub kernarg_segment_size: u32,
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
    /// Arguments in order.
    pub args: Vec<ArgMetadata>,
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

/// The kernels described in a code object's metadata note. `what` names it in errors.
pub fn read(code_object: &[u8], what: &str) -> Result<Vec<KernelMetadata>, Error> {
    let bad = |reason: String| Error::CodeObject {
        kernel: what.to_string(),
        reason,
    };
    let elf = Elf::parse(code_object).map_err(|e| bad(format!("not ELF: {e}")))?;
    let notes = elf
        .iter_note_sections(code_object, None)
        .ok_or_else(|| bad("no note section".into()))?;
    for note in notes {
        let note = note.map_err(|e| bad(format!("bad note: {e}")))?;
        if note.n_type != NT_AMDGPU_METADATA || note.name != "AMDGPU" {
            continue;
        }
        let v = rmpv::decode::read_value(&mut &note.desc[..])
            .map_err(|e| bad(format!("metadata is not MessagePack: {e}")))?;
        let kernels = get(&v, "amdhsa.kernels")
            .and_then(|k| k.as_array())
            .ok_or_else(|| bad("metadata has no amdhsa.kernels".into()))?;
        return Ok(kernels
            .iter()
            .map(|k| KernelMetadata {
                name: text(k, ".name"),
                symbol: text(k, ".symbol"),
                kernarg_segment_size: num(k, ".kernarg_segment_size"),
                group_segment_fixed_size: num(k, ".group_segment_fixed_size"),
                private_segment_fixed_size: num(k, ".private_segment_fixed_size"),
                wavefront_size: num(k, ".wavefront_size"),
                sgpr_count: num(k, ".sgpr_count"),
                vgpr_count: num(k, ".vgpr_count"),
                max_flat_workgroup_size: num(k, ".max_flat_workgroup_size"),
                args: get(k, ".args")
                    .and_then(|a| a.as_array())
                    .map(|a| {
                        a.iter()
                            .map(|x| ArgMetadata {
                                offset: num(x, ".offset"),
                                size: num(x, ".size"),
                                value_kind: text(x, ".value_kind"),
                            })
                            .collect()
                    })
                    .unwrap_or_default(),
            })
            .collect());
    }
    Err(bad("no NT_AMDGPU_METADATA note".into()))
}
