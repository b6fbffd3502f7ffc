//! gfx1100 and gfx1200/gfx1201 instruction decoder: raw dwords to a compact [`Inst`].
//!
//! Field positions follow the RDNA3 and RDNA4 ISA references; opcode numbers, mnemonics and
//! operand shapes come from the tables in [`super::opcodes`] (gfx11, the numbering of the
//! interpreter's form, kept in the core) and [`crate::rdna4::opcodes`] (gfx12), which are
//! generated from LLVM 22. gfx12 keeps gfx11's
//! SALU, VALU and DS encodings (with other opcode numbers) and replaces the memory encodings:
//! its SMEM, VFLAT/VGLOBAL/VSCRATCH and VBUFFER words decode into the same [`Inst`] fields.
//! [`Inst`]'s mnemonic ([`Inst::name`]) is the decoder's, in the instruction's generation.

pub use crate::interp::inst::{
    Dpp, EXEC_LO, Encoding, Gen, Inst, LITERAL, M0, NULL, SRC_SCC, VCC_LO, VGPR0,
    VOPD_DOT2ACC_F32_BF16, VOPD_DOT2ACC_F32_F16, VopdY, flag,
};
use crate::interp::names::lookup;
pub use crate::interp::names::name;
use crate::interp::opcodes;
use am_isa::bits;

/// The generated tables of a generation, by their module path.
macro_rules! table {
    ($rdna:expr, $($path:tt)*) => {
        match $rdna {
            Gen::Gfx11 => crate::interp::opcodes::$($path)*,
            Gen::Gfx12 => crate::rdna4::opcodes::$($path)*,
        }
    };
}
pub(crate) use table;

const DPP16: u16 = 0xFA;
const DPP8: u16 = 0xE9;
const DPP8FI: u16 = 0xEA;

/// Why a word sequence is not an instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// No encoding of gfx1100 starts with these bits.
    UnknownEncoding,
    /// The encoding is known but its opcode is not.
    UnknownOpcode(Encoding, u16),
    /// The instruction needs more dwords than are left.
    Truncated(Encoding, u8),
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecodeError::UnknownEncoding => write!(f, "no gfx1100 encoding matches"),
            DecodeError::UnknownOpcode(e, op) => write!(f, "unknown {e:?} opcode {op:#x}"),
            DecodeError::Truncated(e, n) => write!(f, "{e:?} instruction needs {n} dwords"),
        }
    }
}

/// Mnemonic of an opcode of a generation, if LLVM knows it (gfx11's are the form's,
/// [`name`]).
pub fn name_in(rdna: Gen, enc: Encoding, op: u16) -> Option<&'static str> {
    use Encoding::*;
    if rdna == Gen::Gfx11 {
        return name(enc, op);
    }
    if enc == Vopd && op == VOPD_DOT2ACC_F32_BF16 {
        return Some("v_dot2acc_f32_bf16");
    }
    if enc == Vopd && op == VOPD_DOT2ACC_F32_F16 {
        return Some("v_dot2acc_f32_f16");
    }
    let tab = match enc {
        Sop1 => table!(rdna, sop1::NAMES),
        Sop2 => table!(rdna, sop2::NAMES),
        Sopk => table!(rdna, sopk::NAMES),
        Sopc => table!(rdna, sopc::NAMES),
        Sopp => table!(rdna, sopp::NAMES),
        Smem => table!(rdna, smem::NAMES),
        Vop1 | Vop2 | Vopc | Vop3 | Vop3sd | Vopd => table!(rdna, valu::NAMES),
        Vop3p => table!(rdna, vop3p::NAMES),
        Ds => table!(rdna, ds::NAMES),
        Flat | Global | Scratch => table!(rdna, flat::NAMES),
        Mubuf => table!(rdna, mubuf::NAMES),
        Mtbuf => table!(rdna, mtbuf::NAMES),
        Ext | Rdna4 => return name(enc, op),
    };
    lookup(tab, op)
}

/// Operand shape (see [`opcodes::shapes`]) of a gfx11 instruction in the encoding it was
/// written in.
pub fn shape(enc: Encoding, op: u16) -> &'static str {
    shape_in(Gen::Gfx11, enc, op)
}

/// Operand shape of an instruction of a generation in the encoding it was written in.
pub fn shape_in(rdna: Gen, enc: Encoding, op: u16) -> &'static str {
    use Encoding::*;
    let (tab, op) = match enc {
        Sop1 => (table!(rdna, shapes::SOP1), op),
        Sop2 => (table!(rdna, shapes::SOP2), op),
        Sopk => (table!(rdna, shapes::SOPK), op),
        Sopc => (table!(rdna, shapes::SOPC), op),
        Sopp => (table!(rdna, shapes::SOPP), op),
        Smem => (table!(rdna, shapes::SMEM), op),
        Vop1 => (table!(rdna, shapes::VOP1), op.wrapping_sub(0x180)),
        Vop2 => (table!(rdna, shapes::VOP2), op.wrapping_sub(0x100)),
        Vopc => (table!(rdna, shapes::VOPC), op),
        Vop3 | Vop3sd => (table!(rdna, shapes::VOP3), op),
        Vopd => {
            return lookup(table!(rdna, shapes::VOP3), op)
                .or_else(|| lookup(table!(rdna, shapes::VOP2), op.wrapping_sub(0x100)))
                .or_else(|| lookup(table!(rdna, shapes::VOP1), op.wrapping_sub(0x180)))
                .unwrap_or("");
        }
        Vop3p => (table!(rdna, shapes::VOP3P), op),
        Ds => (table!(rdna, shapes::DS), op),
        Flat => (table!(rdna, shapes::FLAT), op),
        Global => (table!(rdna, shapes::GLOBAL), op),
        Scratch => (table!(rdna, shapes::SCRATCH), op),
        Mubuf => (table!(rdna, shapes::MUBUF), op),
        Mtbuf => (table!(rdna, shapes::MTBUF), op),
        Ext | Rdna4 => return "",
    };
    lookup(tab, op).unwrap_or("")
}

/// The shape whose `h` tokens name the 16-bit operands of an e32 (VOP1, VOP2, VOPC)
/// instruction. LLVM 22 disassembles gfx12 in its fake16 spelling (`v_not_b16_e32 v2, v4`),
/// so gfx12's generated shapes have no halves; the hardware still reads VGPR bit 7 of such
/// an operand as the high half (llvm-mc-22 `-mattr=+real-true16` prints `v1.h`), and the
/// gfx11 shape of the same mnemonic (printed true16) tells which operands those are.
pub fn e32_halves_shape(rdna: Gen, enc: Encoding, op: u16) -> &'static str {
    let own = shape_in(rdna, enc, op);
    if rdna == Gen::Gfx11 {
        return own;
    }
    // gfx12's renamed and new 16-bit e32 forms (halves as llvm-mc-22 prints them).
    let n = match name_in(rdna, enc, op) {
        None => return own,
        Some("v_cvt_pk_f32_fp8" | "v_cvt_pk_f32_bf8") => return "2,h",
        Some("v_min_num_f16") => "v_min_f16",
        Some("v_max_num_f16") => "v_max_f16",
        Some(n) => n,
    };
    let gfx11 = crate::interp::opcodes::valu::NAMES
        .iter()
        .find(|e| e.1 == n)
        .map(|e| shape_in(Gen::Gfx11, enc, e.0));
    match gfx11 {
        Some(s) if s.split(',').count() == own.split(',').count() => s,
        _ => own,
    }
}

/// Whether the `i`-th token of a shape is a 16-bit VGPR half.
pub fn shape_is_16(shape: &str, i: usize) -> bool {
    shape.split(',').nth(i) == Some("h")
}

/// Register count of the `i`-th operand of a shape (1 when unknown).
pub fn shape_regs(shape: &str, i: usize) -> u16 {
    shape
        .split(',')
        .nth(i)
        .and_then(|t| t.parse().ok())
        .unwrap_or(1)
}

/// VALU opcodes (VOP3 numbering) written by the VOP3SD encoding.
pub fn is_vop3sd(op: u16) -> bool {
    use opcodes::valu::*;
    matches!(
        op,
        ADD_CO_CI_U32
            | SUB_CO_CI_U32
            | SUBREV_CO_CI_U32
            | DIV_SCALE_F32
            | DIV_SCALE_F64
            | MAD_U64_U32
            | MAD_I64_I32
            | ADD_CO_U32
            | SUB_CO_U32
            | SUBREV_CO_U32
    )
}

/// [`is_vop3sd`] for a generation (gfx12 renamed the 64-bit multiply-adds `v_mad_co_*`).
pub fn is_vop3sd_in(rdna: Gen, op: u16) -> bool {
    match rdna {
        Gen::Gfx11 => is_vop3sd(op),
        Gen::Gfx12 => {
            use crate::rdna4::opcodes::valu::*;
            matches!(
                op,
                ADD_CO_CI_U32
                    | SUB_CO_CI_U32
                    | SUBREV_CO_CI_U32
                    | DIV_SCALE_F32
                    | DIV_SCALE_F64
                    | MAD_CO_U64_U32
                    | MAD_CO_I64_I32
                    | ADD_CO_U32
                    | SUB_CO_U32
                    | SUBREV_CO_U32
            )
        }
    }
}

/// Number of destination operands LLVM prints for a gfx11 VALU op in the VOP3 encoding.
pub fn valu_dst_count(op: u16) -> usize {
    valu_dst_count_in(Gen::Gfx11, op)
}

/// [`valu_dst_count`] for a generation.
pub fn valu_dst_count_in(rdna: Gen, op: u16) -> usize {
    let n = name_in(rdna, Encoding::Vop3, op).unwrap_or("");
    if n.starts_with("v_cmpx_") || n == "v_nop" || n == "v_pipeflush" {
        0
    } else if is_vop3sd_in(rdna, op) {
        2
    } else {
        1
    }
}

fn sext(v: u32, n: u32) -> i32 {
    ((v << (32 - n)) as i32) >> (32 - n)
}

impl Inst {
    /// Mnemonic without encoding suffix, in the instruction's generation ([`name_in`]).
    pub fn name(&self) -> &'static str {
        name_in(self.rdna, self.enc, self.op).unwrap_or("?")
    }
}

/// Classifies the first dword of a gfx11 instruction.
pub fn classify(w: u32) -> Option<(Encoding, u16)> {
    classify_in(Gen::Gfx11, w)
}

/// Classifies the first dword of an instruction of a generation.
pub fn classify_in(rdna: Gen, w: u32) -> Option<(Encoding, u16)> {
    use Encoding::*;
    if rdna == Gen::Gfx12 {
        // The memory encodings gfx12 replaced; the rest are gfx11's.
        let r = match w {
            _ if w >> 26 == 0x3D => (Smem, bits(w, 13, 6)),
            _ if w >> 26 == 0x3B => match bits(w, 24, 2) {
                0 => (Flat, bits(w, 14, 8)),
                1 => (Scratch, bits(w, 14, 8)),
                2 => (Global, bits(w, 14, 8)),
                _ => return None,
            },
            _ if w >> 26 == 0x31 && bits(w, 18, 4) == 8 && bits(w, 21, 1) == 1 => {
                (Mtbuf, bits(w, 14, 4))
            }
            _ if w >> 26 == 0x31 => (Mubuf, bits(w, 14, 8)),
            _ if matches!(w >> 26, 0x37 | 0x38 | 0x3A) => return None,
            _ => {
                return classify_in(Gen::Gfx11, w).map(|(e, op)| match e {
                    Vop3 | Vop3sd if is_vop3sd_in(rdna, op) => (Vop3sd, op),
                    Vop3 | Vop3sd => (Vop3, op),
                    _ => (e, op),
                });
            }
        };
        return Some((r.0, r.1 as u16));
    }
    let r = match w {
        _ if w >> 23 == 0x17D => (Sop1, bits(w, 8, 8)),
        _ if w >> 23 == 0x17E => (Sopc, bits(w, 16, 7)),
        _ if w >> 23 == 0x17F => (Sopp, bits(w, 16, 7)),
        _ if w >> 28 == 0xB => (Sopk, bits(w, 23, 5)),
        _ if w >> 30 == 2 => (Sop2, bits(w, 23, 7)),
        _ if w >> 25 == 0x3F => (Vop1, 0x180 + bits(w, 9, 8)),
        _ if w >> 25 == 0x3E => (Vopc, bits(w, 17, 8)),
        _ if w >> 31 == 0 => (Vop2, 0x100 + bits(w, 25, 6)),
        _ if w >> 26 == 0x35 => {
            let op = bits(w, 16, 10) as u16;
            return Some((if is_vop3sd(op) { Vop3sd } else { Vop3 }, op));
        }
        _ if w >> 24 == 0xCC => (Vop3p, bits(w, 16, 7)),
        _ if w >> 26 == 0x32 => (Vopd, 0),
        _ if w >> 26 == 0x3D => (Smem, bits(w, 18, 8)),
        _ if w >> 26 == 0x36 => (Ds, bits(w, 18, 8)),
        _ if w >> 26 == 0x37 => match bits(w, 16, 2) {
            0 => (Flat, bits(w, 18, 7)),
            1 => (Scratch, bits(w, 18, 7)),
            2 => (Global, bits(w, 18, 7)),
            _ => return None,
        },
        _ if w >> 26 == 0x38 => (Mubuf, bits(w, 18, 8)),
        _ if w >> 26 == 0x3A => (Mtbuf, bits(w, 15, 4)),
        _ => return None,
    };
    Some((r.0, r.1 as u16))
}

/// Decodes the gfx11 instruction at the start of `words`.
pub fn decode(words: &[u32]) -> Result<Inst, DecodeError> {
    decode_in(Gen::Gfx11, words)
}

/// Decodes the instruction of a generation at the start of `words`.
pub fn decode_in(rdna: Gen, words: &[u32]) -> Result<Inst, DecodeError> {
    use Encoding::*;
    let w0 = *words.first().ok_or(DecodeError::Truncated(Sopp, 1))?;
    let (enc, op) = classify_in(rdna, w0).ok_or(DecodeError::UnknownEncoding)?;
    let known = match enc {
        Vopd => true,
        Flat => table!(rdna, FLAT_OPS).contains(&op),
        Global => table!(rdna, GLOBAL_OPS).contains(&op),
        Scratch => table!(rdna, SCRATCH_OPS).contains(&op),
        _ => name_in(rdna, enc, op).is_some(),
    };
    if !known {
        return Err(DecodeError::UnknownOpcode(enc, op));
    }
    let mut i = Inst::new(enc, op);
    i.rdna = rdna;
    let valu = |c: &str| name_in(rdna, Vop3, op) == Some(c);
    let word = |n: usize| {
        words
            .get(n)
            .copied()
            .ok_or(DecodeError::Truncated(enc, n as u8 + 1))
    };
    let shp = shape_in(rdna, enc, op);
    let nops = if shp.is_empty() {
        0
    } else {
        shp.split(',').count()
    };
    match enc {
        // classify() never yields it.
        Ext | Rdna4 => {}
        Sop1 => {
            i.dst = bits(w0, 16, 7) as u16;
            i.src[0] = bits(w0, 0, 8) as u16;
        }
        Sop2 => {
            i.dst = bits(w0, 16, 7) as u16;
            i.src[0] = bits(w0, 0, 8) as u16;
            i.src[1] = bits(w0, 8, 8) as u16;
        }
        Sopc => {
            i.src[0] = bits(w0, 0, 8) as u16;
            i.src[1] = bits(w0, 8, 8) as u16;
        }
        Sopk => {
            i.dst = bits(w0, 16, 7) as u16;
            i.imm = bits(w0, 0, 16) as i32;
            if i.name() == "s_setreg_imm32_b32" {
                i.literal = word(1)?;
                i.len = 2;
            }
        }
        Sopp => {
            i.imm = bits(w0, 0, 16) as i32;
        }
        Smem if rdna == Gen::Gfx12 => {
            let w1 = word(1)?;
            i.len = 2;
            i.src[0] = (bits(w0, 0, 6) << 1) as u16;
            i.dst = bits(w0, 6, 7) as u16;
            i.set_cpol(
                bits(w0, 23, 2)
                    | bits(w0, 21, 2) << 3
                    | bits(w0, 20, 1) << 5
                    | bits(w1, 24, 1) << 6,
            );
            i.imm = sext(bits(w1, 0, 24), 24);
            i.saddr = bits(w1, 25, 7) as u16;
        }
        Smem => {
            let w1 = word(1)?;
            i.len = 2;
            i.src[0] = (bits(w0, 0, 6) << 1) as u16;
            i.dst = bits(w0, 6, 7) as u16;
            i.flags = (bits(w0, 14, 1) as u8 * flag::GLC) | (bits(w0, 13, 1) as u8 * flag::DLC);
            i.imm = sext(bits(w1, 0, 21), 21);
            i.saddr = bits(w1, 25, 7) as u16;
        }
        Vop1 => {
            i.dst = bits(w0, 17, 8) as u16;
            if !valu("v_readfirstlane_b32") {
                i.dst += VGPR0;
            }
            i.src[0] = bits(w0, 0, 9) as u16;
        }
        Vop2 => {
            i.dst = VGPR0 + bits(w0, 17, 8) as u16;
            i.src[0] = bits(w0, 0, 9) as u16;
            i.src[1] = VGPR0 + bits(w0, 9, 8) as u16;
            if valu("v_fmamk_f32")
                || valu("v_fmaak_f32")
                || valu("v_fmamk_f16")
                || valu("v_fmaak_f16")
            {
                i.literal = word(1)?;
                i.len = 2;
            }
        }
        Vopc => {
            i.dst = VCC_LO;
            i.src[0] = bits(w0, 0, 9) as u16;
            i.src[1] = VGPR0 + bits(w0, 9, 8) as u16;
        }
        Vop3 | Vop3sd => {
            let w1 = word(1)?;
            i.len = 2;
            i.dst = bits(w0, 0, 8) as u16;
            if valu_name_is_vector_dst(rdna, op) {
                i.dst += VGPR0;
            }
            if enc == Vop3sd {
                i.sdst = bits(w0, 8, 7) as u16;
            } else {
                i.abs = bits(w0, 8, 3) as u8;
                i.opsel = bits(w0, 11, 4) as u8;
            }
            i.clamp = bits(w0, 15, 1) != 0;
            i.src = [
                bits(w1, 0, 9) as u16,
                bits(w1, 9, 9) as u16,
                bits(w1, 18, 9) as u16,
            ];
            i.omod = bits(w1, 27, 2) as u8;
            i.neg = bits(w1, 29, 3) as u8;
        }
        Vop3p => {
            let w1 = word(1)?;
            i.len = 2;
            i.dst = VGPR0 + bits(w0, 0, 8) as u16;
            i.abs = bits(w0, 8, 3) as u8; // neg_hi
            i.opsel = bits(w0, 11, 3) as u8;
            i.opsel_hi = (bits(w1, 27, 2) | (bits(w0, 14, 1) << 2)) as u8;
            i.clamp = bits(w0, 15, 1) != 0;
            i.src = [
                bits(w1, 0, 9) as u16,
                bits(w1, 9, 9) as u16,
                bits(w1, 18, 9) as u16,
            ];
            i.neg = bits(w1, 29, 3) as u8;
        }
        Vopd => {
            let w1 = word(1)?;
            i.len = 2;
            let opx = bits(w0, 22, 4) as u8;
            let opy = bits(w0, 17, 5) as u8;
            let vx = table!(rdna, VOPD_X)
                .iter()
                .find(|e| e.0 == opx)
                .map(|e| e.1);
            let vy = table!(rdna, VOPD_Y)
                .iter()
                .find(|e| e.0 == opy)
                .map(|e| e.1);
            let (Some(vx), Some(vy)) = (vx, vy) else {
                return Err(DecodeError::UnknownOpcode(
                    enc,
                    (opx as u16) << 5 | opy as u16,
                ));
            };
            i.op = vx;
            i.src[0] = bits(w0, 0, 9) as u16;
            i.src[1] = VGPR0 + bits(w0, 9, 8) as u16;
            let dstx = bits(w1, 24, 8);
            i.dst = VGPR0 + dstx as u16;
            i.y = VopdY {
                op: vy,
                dst: VGPR0 + ((bits(w1, 17, 7) << 1) | ((dstx & 1) ^ 1)) as u16,
                src: [bits(w1, 0, 9) as u16, VGPR0 + bits(w1, 9, 8) as u16],
            };
            let k =
                |op: u16| matches!(name_in(rdna, Vop3, op), Some("v_fmamk_f32" | "v_fmaak_f32"));
            if i.src[0] == LITERAL || i.y.src[0] == LITERAL || k(vx) || k(vy) {
                i.literal = word(2)?;
                i.len = 3;
            }
        }
        Ds => {
            let w1 = word(1)?;
            i.len = 2;
            i.imm = bits(w0, 0, 8) as i32;
            i.imm2 = bits(w0, 8, 8) as u16;
            i.flags = bits(w0, 17, 1) as u8 * flag::GDS;
            i.src = [
                VGPR0 + bits(w1, 0, 8) as u16,
                VGPR0 + bits(w1, 8, 8) as u16,
                VGPR0 + bits(w1, 16, 8) as u16,
            ];
            i.dst = VGPR0 + bits(w1, 24, 8) as u16;
        }
        Flat | Global | Scratch if rdna == Gen::Gfx12 => {
            let (w1, w2) = (word(1)?, word(2)?);
            i.len = 3;
            i.imm = sext(bits(w2, 8, 24), 24);
            i.flags = bits(w1, 17, 1) as u8 * flag::SVE;
            i.set_cpol(bits(w1, 20, 3) | bits(w1, 18, 2) << 3);
            i.src = [
                VGPR0 + bits(w2, 0, 8) as u16,
                VGPR0 + bits(w1, 23, 8) as u16,
                NULL,
            ];
            i.saddr = bits(w0, 0, 7) as u16;
            i.dst = VGPR0 + bits(w1, 0, 8) as u16;
        }
        Mubuf | Mtbuf if rdna == Gen::Gfx12 => {
            let (w1, w2) = (word(1)?, word(2)?);
            i.len = 3;
            i.imm = bits(w2, 8, 24) as i32;
            i.flags = (bits(w1, 30, 1) as u8 * flag::OFFEN) | (bits(w1, 31, 1) as u8 * flag::IDXEN);
            i.imm2 = bits(w1, 23, 7) as u16;
            i.set_cpol(bits(w1, 20, 3) | bits(w1, 18, 2) << 3);
            i.src[0] = VGPR0 + bits(w2, 0, 8) as u16;
            i.dst = VGPR0 + bits(w1, 0, 8) as u16;
            i.srsrc = bits(w1, 9, 9) as u16;
            i.saddr = bits(w0, 0, 7) as u16;
        }
        Flat | Global | Scratch => {
            let w1 = word(1)?;
            i.len = 2;
            i.imm = if enc == Flat {
                bits(w0, 0, 12) as i32
            } else {
                sext(bits(w0, 0, 13), 13)
            };
            i.flags = (bits(w0, 14, 1) as u8 * flag::GLC)
                | (bits(w0, 15, 1) as u8 * flag::SLC)
                | (bits(w0, 13, 1) as u8 * flag::DLC)
                | (bits(w1, 23, 1) as u8 * flag::SVE);
            i.src = [
                VGPR0 + bits(w1, 0, 8) as u16,
                VGPR0 + bits(w1, 8, 8) as u16,
                NULL,
            ];
            i.saddr = bits(w1, 16, 7) as u16;
            i.dst = VGPR0 + bits(w1, 24, 8) as u16;
        }
        Mubuf | Mtbuf => {
            let w1 = word(1)?;
            i.len = 2;
            i.imm = bits(w0, 0, 12) as i32;
            i.flags = (bits(w0, 14, 1) as u8 * flag::GLC)
                | (bits(w0, 12, 1) as u8 * flag::SLC)
                | (bits(w0, 13, 1) as u8 * flag::DLC)
                | (bits(w1, 22, 1) as u8 * flag::OFFEN)
                | (bits(w1, 23, 1) as u8 * flag::IDXEN);
            if enc == Mtbuf {
                i.imm2 = bits(w0, 19, 7) as u16;
            }
            i.src[0] = VGPR0 + bits(w1, 0, 8) as u16;
            i.dst = VGPR0 + bits(w1, 8, 8) as u16;
            i.srsrc = (bits(w1, 16, 5) << 2) as u16;
            i.saddr = bits(w1, 24, 8) as u16;
        }
    }
    // Literal constants and DPP dwords of the SALU/VALU encodings.
    let nsrc = match enc {
        Sop1 => nops.saturating_sub(if shp.starts_with('x') || nops < 2 {
            0
        } else {
            1
        }),
        Sop2 => 2,
        Sopc => 2,
        Vop1 | Vop2 | Vopc => 1,
        Vop3 | Vop3sd => nops.saturating_sub(valu_dst_count_in(rdna, op)).min(3),
        Vop3p => nops.saturating_sub(1).min(3),
        _ => 0,
    };
    if matches!(enc, Sop1) && nops == 1 {
        // s_getpc_b64 (dst only) vs s_setpc_b64 (src only): the shape cannot tell, the name can.
        let n = i.name();
        if n.starts_with("s_setpc")
            || n.starts_with("s_rfe")
            || n.starts_with("s_sendmsg")
            || SOP1_SOURCE_ONLY.contains(&n)
        {
            i.dst = NULL;
        } else {
            i.src[0] = NULL;
        }
    }
    if matches!(enc, Sop1) && i.name().starts_with("s_sendmsg_rtn") {
        // The source field holds the message id, not an operand.
        i.imm = i.src[0] as i32;
        i.src[0] = NULL;
    }
    let nsrc = if matches!(enc, Sop1) && (nops == 1 || i.name().starts_with("s_sendmsg_rtn")) {
        usize::from(i.src[0] != NULL)
    } else {
        nsrc
    };
    let mut extra = i.len as usize;
    if matches!(enc, Vop1 | Vop2 | Vopc | Vop3 | Vop3sd)
        && matches!(i.src[0], DPP16 | DPP8 | DPP8FI)
    {
        let d = word(extra)?;
        extra += 1;
        let s0 = VGPR0 + bits(d, 0, 8) as u16;
        if i.src[0] == DPP16 {
            i.dpp = Dpp::Dpp16 {
                ctrl: bits(d, 8, 9) as u16,
                fi: bits(d, 18, 1) != 0,
                bound_ctrl: bits(d, 19, 1) != 0,
                row_mask: bits(d, 28, 4) as u8,
                bank_mask: bits(d, 24, 4) as u8,
            };
            if matches!(enc, Vop1 | Vop2 | Vopc) {
                i.neg |= (bits(d, 20, 1) | (bits(d, 22, 1) << 1)) as u8;
                i.abs |= (bits(d, 21, 1) | (bits(d, 23, 1) << 1)) as u8;
            }
        } else {
            i.dpp = Dpp::Dpp8 {
                sel: bits(d, 8, 24),
                fi: i.src[0] == DPP8FI,
            };
        }
        i.src[0] = s0;
    } else if matches!(enc, Sop2) && matches!(i.name(), "s_fmamk_f32" | "s_fmaak_f32")
        || i.src.iter().take(nsrc).any(|&s| s == LITERAL) && !(enc == Vop2 && i.len == 2)
    {
        // s_fmamk/s_fmaak always carry their constant; a VOP2 fmamk/fmaak whose src0 is the
        // literal shares the constant that the instruction already has.
        i.literal = word(extra)?;
        extra += 1;
    }
    i.len = extra as u8;
    if matches!(enc, Vop1 | Vop2 | Vopc) {
        true16_e32_halves(&mut i, e32_halves_shape(rdna, enc, op));
    }
    Ok(i)
}

/// gfx12 SOP1 instructions whose one operand is a source.
const SOP1_SOURCE_ONLY: &[&str] = &[
    "s_alloc_vgpr",
    "s_sleep_var",
    "s_barrier_signal",
    "s_barrier_signal_isfirst",
    "s_barrier_init",
    "s_barrier_join",
];

/// VALU ops whose VOP3 `vdst` field names an SGPR (compares, lane reads, gfx12's `v_s_*`
/// transcendentals).
fn valu_name_is_vector_dst(rdna: Gen, op: u16) -> bool {
    let n = name_in(rdna, Encoding::Vop3, op).unwrap_or("");
    !(op < 0x100 || n == "v_readlane_b32" || n == "v_readfirstlane_b32" || n.starts_with("v_s_"))
}

/// In the 32-bit encodings, a 16-bit operand names the high half of `v(n - 128)` when its
/// VGPR number has bit 7 set (true16); fold that into `opsel` like VOP3 does.
fn true16_e32_halves(i: &mut Inst, shp: &str) {
    let has_dst = i.enc != Encoding::Vopc;
    // A compare's shape names its two sources last: `v_cmp_*` lists the VCC it writes
    // first, `v_cmpx_*` (which writes EXEC) does not.
    let first_src = if has_dst {
        1
    } else {
        shp.split(',').count().saturating_sub(2)
    };
    if has_dst && shape_is_16(shp, 0) && i.dst >= VGPR0 + 128 {
        i.dst -= 128;
        i.opsel |= 8;
    }
    // `v_fmamk_f16` and `v_fmaak_f16` read two f16 registers around their constant, which
    // the shape places between (`h,h,x,h`) or spells as 32-bit (`h,1,h,x`): LLVM's
    // real-true16 assembler takes `.h` on both sources.
    let fmak16 = matches!(i.name(), "v_fmamk_f16" | "v_fmaak_f16");
    for s in 0..2 {
        if (fmak16 || shape_is_16(shp, first_src + s)) && i.src[s] >= VGPR0 + 128 {
            i.src[s] -= 128;
            i.opsel |= 1 << s;
        }
    }
}
