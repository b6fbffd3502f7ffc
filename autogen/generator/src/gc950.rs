//! GC 9.5.0 (MI350X, gfx950): Linux 6.12 has no gc_9_5_0 headers, and later kernels drive
//! GC 9.5.0 with `gfx_v9_4_3.c` and the (updated) gc_9_4_3 headers. So the 9.5.0 table is
//! the 6.12 gc_9_4_3 table plus what the updated gc_9_4_3 headers changed, as recorded in
//! tinygrad's register autogen for am (`tinygrad/runtime/autogen/am/regs/gc_9_4_3.py`,
//! generated from a newer amdgpu tree). Each change is listed in the generated table's
//! comments and in docs/AUTOGEN.md.

use crate::regs::{Field, Version};

pub fn patch(v: &mut Version) {
    // The updated headers name the GC hub's VM registers `GCVM_*` (as GC 10+ do) where
    // 6.12's gc_9_4_3 says `VM_*`, at the same offsets with the same fields
    // (tinygrad gc_9_4_3.py: regGCVM_L2_CNTL = 0x820, regGCVM_CONTEXT0_CNTL = 0x860; 6.12:
    // regVM_L2_CNTL = 0x820, regVM_CONTEXT0_CNTL = 0x860). Both names resolve on 9.5.0.
    let vm: Vec<(String, crate::regs::Register)> = v
        .regs
        .iter()
        .filter(|(n, _)| n.starts_with("VM_"))
        .map(|(n, r)| (format!("GC{n}"), r.clone()))
        .collect();
    let added = vm.len();
    for (n, r) in vm {
        v.regs.entry(n).or_insert(r);
    }
    v.notes.push(format!(
        "GC 9.5.0: {added} GCVM_* names added for the VM_* registers (tinygrad gc_9_4_3.py)"
    ));
    // SH_MEM_CONFIG gains PRECISION_MODE at bit 9 (tinygrad gc_9_4_3.py:
    // 'precision_mode': (9, 9)); 6.12 has F8_MODE at bit 8 and nothing at bit 9.
    if let Some(r) = v.regs.get_mut("SH_MEM_CONFIG")
        && !r.fields.iter().any(|f| f.name == "PRECISION_MODE")
    {
        r.fields.push(Field {
            name: "PRECISION_MODE".into(),
            shift: 9,
            mask: 1 << 9,
        });
        v.notes.push(
            "GC 9.5.0: SH_MEM_CONFIG.PRECISION_MODE (bit 9) added (tinygrad gc_9_4_3.py)".into(),
        );
    }
}
