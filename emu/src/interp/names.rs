//! The form's operations by mnemonic and back: [`name`] for an opcode of any encoding of
//! [`Inst`](super::inst::Inst), [`gfx11`] for the gfx11 opcode a front-end lowers a mnemonic to.

use super::inst::{Encoding, Inst, VOPD_DOT2ACC_F32_BF16, VOPD_DOT2ACC_F32_F16};
use super::opcodes;
use std::collections::HashMap;
use std::sync::OnceLock;

/// The mnemonic of `op` in a generated `(opcode, mnemonic)` table sorted by opcode.
pub(crate) fn lookup<'a>(tab: &'a [(u16, &'a str)], op: u16) -> Option<&'a str> {
    tab.binary_search_by_key(&op, |e| e.0)
        .ok()
        .map(|i| tab[i].1)
}

/// Mnemonic of an opcode of the form (without `_e32`/`_e64`/`_dpp` suffix): a gfx11 opcode
/// LLVM knows, a VOPD pseudo opcode, or a CDNA- or gfx12-only operation.
pub fn name(enc: Encoding, op: u16) -> Option<&'static str> {
    use Encoding::*;
    if enc == Vopd && op == VOPD_DOT2ACC_F32_BF16 {
        return Some("v_dot2acc_f32_bf16");
    }
    if enc == Vopd && op == VOPD_DOT2ACC_F32_F16 {
        return Some("v_dot2acc_f32_f16");
    }
    let tab = match enc {
        Sop1 => opcodes::sop1::NAMES,
        Sop2 => opcodes::sop2::NAMES,
        Sopk => opcodes::sopk::NAMES,
        Sopc => opcodes::sopc::NAMES,
        Sopp => opcodes::sopp::NAMES,
        Smem => opcodes::smem::NAMES,
        Vop1 | Vop2 | Vopc | Vop3 | Vop3sd | Vopd => opcodes::valu::NAMES,
        Vop3p => opcodes::vop3p::NAMES,
        Ds => opcodes::ds::NAMES,
        Flat | Global | Scratch => opcodes::flat::NAMES,
        Mubuf => opcodes::mubuf::NAMES,
        Mtbuf => opcodes::mtbuf::NAMES,
        Ext => return super::exec_cdna::ext_name(op),
        Rdna4 => return super::exec_gfx12::op_name(op),
    };
    lookup(tab, op)
}

/// Mnemonic of an instruction of the form, `?` if it has none (`rdna3::decode`'s
/// `Inst::name` also names gfx12's numbering, which never runs).
pub(crate) fn mnemonic(i: &Inst) -> &'static str {
    name(i.enc, i.op).unwrap_or("?")
}

/// gfx11 opcode numbers by mnemonic, per table.
pub(crate) fn gfx11(table: &'static str, name: &str) -> Option<u16> {
    static MAP: OnceLock<HashMap<(&'static str, &'static str), u16>> = OnceLock::new();
    let map = MAP.get_or_init(|| {
        let tables: [(&'static str, &'static [(u16, &'static str)]); 11] = [
            ("sop1", opcodes::sop1::NAMES),
            ("sop2", opcodes::sop2::NAMES),
            ("sopk", opcodes::sopk::NAMES),
            ("sopc", opcodes::sopc::NAMES),
            ("sopp", opcodes::sopp::NAMES),
            ("smem", opcodes::smem::NAMES),
            ("valu", opcodes::valu::NAMES),
            ("vop3p", opcodes::vop3p::NAMES),
            ("ds", opcodes::ds::NAMES),
            ("flat", opcodes::flat::NAMES),
            ("mubuf", opcodes::mubuf::NAMES),
        ];
        let mut m = HashMap::new();
        for (t, names) in tables {
            for &(op, n) in names {
                m.entry((t, n)).or_insert(op);
            }
        }
        m
    });
    map.get(&(table, name)).copied()
}
