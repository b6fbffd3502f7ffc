//! Lowering of decoded gfx12 instructions onto the interpreter's (gfx11) instruction form.
//!
//! gfx12 keeps most of gfx11's operations under the same or a new name and another number
//! (`s_add_co_u32` is gfx11's `s_add_u32`, `v_max_num_f32` is `v_max_f32`, `v_mad_co_u64_u32`
//! is `v_mad_u64_u32`): those become the gfx11 opcode, found by mnemonic, so one set of
//! semantics serves both. The memory encodings gfx12 replaced decode into the same fields, so
//! only their cache policy needs translating (`th:TH_ATOMIC_RETURN` is gfx11's `glc` on an
//! atomic). The split `s_wait_*` counters and the split barrier become gfx11's waits (no-ops
//! here: memory completes in order) and `s_barrier`. Operations only gfx12 has become
//! [`Encoding::Rdna4`] operations run by the core's `exec_gfx12`.

use crate::interp::exec_gfx12::Op;
use crate::interp::inst::{self as form, Encoding, Gen, Inst, flag};
use crate::interp::names::gfx11;
use crate::rdna3::decode as r3;

/// gfx12 mnemonics whose gfx11 twin has another name (same operands and semantics).
const RENAMES: &[(&str, &str)] = &[
    ("s_add_co_u32", "s_add_u32"),
    ("s_sub_co_u32", "s_sub_u32"),
    ("s_add_co_i32", "s_add_i32"),
    ("s_sub_co_i32", "s_sub_i32"),
    ("s_add_co_ci_u32", "s_addc_u32"),
    ("s_sub_co_ci_u32", "s_subb_u32"),
    ("s_addk_co_i32", "s_addk_i32"),
    ("v_mad_co_u64_u32", "v_mad_u64_u32"),
    ("v_mad_co_i64_i32", "v_mad_i64_i32"),
    ("s_wait_loadcnt", "s_waitcnt"),
    ("s_wait_storecnt", "s_waitcnt"),
    ("s_wait_samplecnt", "s_waitcnt"),
    ("s_wait_bvhcnt", "s_waitcnt"),
    ("s_wait_expcnt", "s_waitcnt"),
    ("s_wait_dscnt", "s_waitcnt"),
    ("s_wait_kmcnt", "s_waitcnt"),
    ("s_wait_loadcnt_dscnt", "s_waitcnt"),
    ("s_wait_storecnt_dscnt", "s_waitcnt"),
    ("s_wait_alu", "s_waitcnt_depctr"),
    // The split barrier: every wave signals, then waits for all; for a workgroup barrier
    // (`-1`, the only form compilers emit for compute) that is gfx11's s_barrier at the wait.
    ("s_barrier_wait", "s_barrier"),
];

/// gfx12 instructions that become a gfx11 `s_nop`: the barrier signal (its wait carries the
/// barrier), the cache write-back/invalidate of the emulator's coherent memory, and the
/// prefetches (hints with no architectural effect).
const NOPS: &[&str] = &[
    "s_barrier_signal",
    "inv",
    "wb",
    "wbinv",
    "s_prefetch_inst",
    "s_prefetch_inst_pc_rel",
    "s_prefetch_data",
    "s_prefetch_data_pc_rel",
    "s_buffer_prefetch_data",
];

/// The gfx11 name of a gfx12 mnemonic: a listed rename, or the `_num` IEEE-2019 min/max
/// spelling of gfx11's min/max (`v_max_num_f32`, `v_pk_min_num_f16`, `ds_max_num_rtn_f32`,
/// `atomic_min_num_f32`: the same maximumNumber/minimumNumber semantics as gfx11's
/// `v_max_f32` outside IEEE mode, which gfx12 no longer has).
fn gfx11_name(name: &str) -> String {
    if let Some((_, n)) = RENAMES.iter().find(|(a, _)| *a == name) {
        return (*n).to_string();
    }
    name.replace("_num_", "_")
}

/// The table of gfx11 opcode numbers an encoding's mnemonics live in.
fn table(enc: Encoding) -> Option<&'static str> {
    use Encoding::*;
    Some(match enc {
        Sop1 => "sop1",
        Sop2 => "sop2",
        Sopk => "sopk",
        Sopc => "sopc",
        Sopp => "sopp",
        Smem => "smem",
        Vop1 | Vop2 | Vopc | Vop3 | Vop3sd | Vopd => "valu",
        Vop3p => "vop3p",
        Ds => "ds",
        Flat | Global | Scratch => "flat",
        Mubuf => "mubuf",
        Mtbuf | Ext | Rdna4 => return None,
    })
}

/// The gfx11 VALU opcode of a gfx12 VALU opcode (also VOPD's pseudo opcodes).
fn valu_op(op: u16) -> Option<u16> {
    match op {
        form::VOPD_DOT2ACC_F32_BF16 => Some(form::VOPD_DOT2ACC_F32_BF16),
        form::VOPD_DOT2ACC_F32_F16 => gfx11("valu", "v_dot2acc_f32_f16"),
        _ => {
            let n = r3::name_in(Gen::Gfx12, Encoding::Vop3, op)?;
            gfx11("valu", &gfx11_name(n))
        }
    }
}

/// Lowers a decoded gfx12 instruction; the error says why it has no semantics here.
pub fn lower(i: &Inst) -> Result<Inst, String> {
    let name = i.name();
    let none = || Err(format!("{name} has no semantics in the emulator"));
    let mut o = *i;
    o.rdna = Gen::Gfx11;
    if let Some(op) = Op::of(name) {
        o.enc = Encoding::Rdna4;
        o.op = op.0;
        o.imm2 = op.1;
        if name.starts_with("v_cvt_f32_") && i.enc == Encoding::Vop3 {
            // byte_sel is op_sel[0] (bit 1 of the byte index) and op_sel[1] (bit 0).
            o.imm2 |= u16::from((i.opsel & 1) << 1 | (i.opsel >> 1) & 1) << 4;
        }
        return Ok(o);
    }
    if NOPS.contains(&name) {
        o = Inst::new(Encoding::Sopp, gfx11("sopp", "s_nop").ok_or("no s_nop")?);
        o.len = i.len;
        return Ok(o);
    }
    let Some(t) = table(i.enc) else {
        return none();
    };
    if i.enc == Encoding::Vopd {
        let (Some(x), Some(y)) = (valu_op(i.op), valu_op(i.y.op)) else {
            return none();
        };
        o.op = x;
        o.y.op = y;
        return Ok(o);
    }
    let Some(op) = gfx11(t, &gfx11_name(name)) else {
        return none();
    };
    o.op = op;
    match i.enc {
        Encoding::Vop3 | Encoding::Vop3sd => {
            o.enc = if r3::is_vop3sd(op) {
                Encoding::Vop3sd
            } else {
                Encoding::Vop3
            };
        }
        Encoding::Flat | Encoding::Global | Encoding::Scratch | Encoding::Mubuf
            if name.contains("atomic") && i.cpol() & 1 != 0 =>
        {
            o.flags |= flag::GLC;
        }
        _ => {}
    }
    Ok(o)
}
