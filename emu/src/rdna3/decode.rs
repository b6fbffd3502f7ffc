//! gfx1100 and gfx1200/gfx1201 instruction decoder: raw dwords to a compact [`Inst`].
//!
//! Field positions follow the RDNA3 and RDNA4 ISA references; opcode numbers, mnemonics and
//! operand shapes come from the tables in [`super::opcodes`] (gfx11) and
//! [`crate::rdna4::opcodes`] (gfx12), which are generated from LLVM 22. gfx12 keeps gfx11's
//! SALU, VALU and DS encodings (with other opcode numbers) and replaces the memory encodings:
//! its SMEM, VFLAT/VGLOBAL/VSCRATCH and VBUFFER words decode into the same [`Inst`] fields.

use super::opcodes;
use am_isa::bits;

/// Pseudo VALU opcode of VOPD's `v_dual_dot2acc_f32_bf16`, which has no VOP1/2/3 form.
pub const VOPD_DOT2ACC_F32_BF16: u16 = 0xFFFF;
/// Pseudo VALU opcode of VOPD's `v_dual_dot2acc_f32_f16` on gfx12 (no VOP1/2/3 form there).
pub const VOPD_DOT2ACC_F32_F16: u16 = 0xFFFE;

/// The RDNA generation whose opcode numbers and encodings an [`Inst`] uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Gen {
    /// gfx11 (RDNA3): the interpreter's own numbering.
    #[default]
    Gfx11,
    /// gfx12 (RDNA4): decoded and printed with gfx1200's tables, lowered to gfx11 to run.
    Gfx12,
}

/// The generated tables of a generation, by their module path.
macro_rules! table {
    ($rdna:expr, $($path:tt)*) => {
        match $rdna {
            Gen::Gfx11 => super::opcodes::$($path)*,
            Gen::Gfx12 => crate::rdna4::opcodes::$($path)*,
        }
    };
}
pub(crate) use table;

/// Instruction encodings of gfx1100.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Encoding {
    /// Scalar ALU, one source.
    Sop1,
    /// Scalar ALU, two sources.
    Sop2,
    /// Scalar ALU with a 16-bit immediate.
    Sopk,
    /// Scalar compare.
    Sopc,
    /// Scalar program control (branches, waits, messages).
    Sopp,
    /// Scalar memory.
    Smem,
    /// Vector ALU, one source (32-bit encoding).
    Vop1,
    /// Vector ALU, two sources (32-bit encoding).
    Vop2,
    /// Vector compare (32-bit encoding, writes VCC or EXEC).
    Vopc,
    /// Vector ALU, 64-bit encoding with modifiers (also VOP1/VOP2/VOPC promoted).
    Vop3,
    /// VOP3 with a scalar destination (carry out, division scale).
    Vop3sd,
    /// Packed math.
    Vop3p,
    /// Two VALU operations issued together.
    Vopd,
    /// LDS/GDS.
    Ds,
    /// Flat memory (generic address space).
    Flat,
    /// Global memory.
    Global,
    /// Private (scratch) memory.
    Scratch,
    /// Untyped buffer memory.
    Mubuf,
    /// Typed buffer memory.
    Mtbuf,
    /// Not a gfx1100 encoding: an operation only CDNA has (MFMA, packed f32, ...), produced by
    /// lowering gfx942/gfx950 code; `op` numbers a `cdna3` operation.
    Ext,
    /// Not a gfx1100 encoding: an operation only gfx12 has, produced by lowering gfx1200
    /// code; `op` numbers an `rdna4` operation.
    Rdna4,
}

/// DPP (data-parallel primitives) controls of a VALU instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dpp {
    /// No DPP.
    None,
    /// DPP16: `dpp_ctrl`, row and bank masks.
    Dpp16 {
        /// The 9-bit `dpp_ctrl` field (quad_perm, row_shl, …).
        ctrl: u16,
        /// Rows (groups of 16 lanes) that are written.
        row_mask: u8,
        /// Banks (groups of 4 lanes within a row) that are written.
        bank_mask: u8,
        /// Out-of-range source lanes read 0 instead of disabling the write.
        bound_ctrl: bool,
        /// Fetch inactive lanes.
        fi: bool,
    },
    /// DPP8: a lane selector (3 bits per lane of each group of 8).
    Dpp8 {
        /// Eight 3-bit lane selectors.
        sel: u32,
        /// Fetch inactive lanes.
        fi: bool,
    },
    /// GFX9 (CDNA) DPP: the controls of DPP16 with the GFX9 meanings of `ctrl` (wave shifts
    /// and rotates, row broadcasts, `row_newbcast`), no fetch-inactive.
    Gfx9 {
        /// The 9-bit `dpp_ctrl` field.
        ctrl: u16,
        /// Rows (groups of 16 lanes) that are written.
        row_mask: u8,
        /// Banks (groups of 4 lanes within a row) that are written.
        bank_mask: u8,
        /// Out-of-range source lanes read 0 instead of disabling the write.
        bound_ctrl: bool,
    },
    /// GFX9 (CDNA) SDWA: sub-dword selection of src0/src1 and of the destination.
    Sdwa {
        /// Destination select: 0-3 byte, 4-5 word, 6 dword.
        dst_sel: u8,
        /// Other destination bits: 0 zero, 1 sign-extend, 2 preserve.
        dst_unused: u8,
        /// Source selects, as `dst_sel`.
        src_sel: [u8; 2],
        /// Sign-extend the selected source instead of zero-extending it.
        sext: [bool; 2],
    },
}

/// The second half (`Y`) of a VOPD dual instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VopdY {
    /// VALU opcode in VOP3 numbering.
    pub op: u16,
    /// Destination operand code (VGPR = 256 + n).
    pub dst: u16,
    /// Source operand codes.
    pub src: [u16; 2],
}

/// Memory-instruction flag bits of [`Inst::flags`].
pub mod flag {
    /// Globally coherent.
    pub const GLC: u8 = 1;
    /// System level coherent.
    pub const SLC: u8 = 2;
    /// Device level coherent.
    pub const DLC: u8 = 4;
    /// DS: global data share instead of LDS.
    pub const GDS: u8 = 8;
    /// MUBUF: VGPR offset enabled.
    pub const OFFEN: u8 = 16;
    /// MUBUF: VGPR index enabled.
    pub const IDXEN: u8 = 32;
    /// Scratch: VGPR address enabled (SVE).
    pub const SVE: u8 = 64;
    /// VALU (CDNA only): a 16-bit result written to the low half zeroes the high half, as
    /// GFX9 does for most 16-bit operations (RDNA3 preserves it).
    pub const ZERO_HI: u8 = 128;
}

/// Operand code of the literal constant (the dword following the instruction).
pub const LITERAL: u16 = 255;
/// Operand code of the first VGPR.
pub const VGPR0: u16 = 256;
/// Operand code of `null` (reads 0, writes are dropped); gfx11 swapped it with `m0`.
pub const NULL: u16 = 124;
/// Operand code of `vcc_lo`.
pub const VCC_LO: u16 = 106;
/// Operand code of `exec_lo`.
pub const EXEC_LO: u16 = 126;
/// Operand code of `m0`.
pub const M0: u16 = 125;
/// Operand code of `scc` as a source.
pub const SRC_SCC: u16 = 253;
const DPP16: u16 = 0xFA;
const DPP8: u16 = 0xE9;
const DPP8FI: u16 = 0xEA;

/// One decoded instruction. Operands are 9-bit operand codes (SGPRs 0–105, `vcc_lo` 106,
/// …, inline constants 128–248, literal 255, VGPRs 256 + n); VALU opcodes of every
/// encoding use the VOP3 numbering (VOPC op, VOP2 op + 0x100, VOP1 op + 0x180).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Inst {
    /// Encoding.
    pub enc: Encoding,
    /// Opcode within the encoding's opcode space.
    pub op: u16,
    /// Length in dwords, including a literal or DPP dword.
    pub len: u8,
    /// Main destination (SOP/SMEM/VALU/DS/FLAT `vdst`/`sdata`).
    pub dst: u16,
    /// VOP3SD scalar destination (carry out).
    pub sdst: u16,
    /// Sources: SOP/VALU operands; SMEM base; DS addr/data0/data1; FLAT addr/data.
    pub src: [u16; 3],
    /// The literal constant, when some source is [`LITERAL`].
    pub literal: u32,
    /// SOPP/SOPK immediate, SMEM/FLAT/DS/MUBUF offset (sign-extended where signed).
    pub imm: i32,
    /// DS `offset1`; MTBUF format (bits 6:0); gfx12 SMEM, VFLAT and VBUFFER cache policy in
    /// bits 14:8 (see [`Inst::cpol`]).
    pub imm2: u16,
    /// SMEM `soffset`, FLAT `saddr`, MUBUF `soffset` (operand codes); [`NULL`] when absent.
    pub saddr: u16,
    /// MUBUF/MTBUF resource descriptor SGPR (first of four).
    pub srsrc: u16,
    /// Input modifiers: bit i negates source i (VOP3/VOP3P `neg`, DPP neg).
    pub neg: u8,
    /// Input modifiers: bit i takes |source i|; VOP3P `neg_hi`.
    pub abs: u8,
    /// Half selection: bit i (0..=2) reads the high half of 16-bit source i, bit 3 writes the
    /// high half of a 16-bit destination (VOP3 `op_sel`, or bit 7 of a true16 VGPR field).
    pub opsel: u8,
    /// VOP3P `op_sel_hi`.
    pub opsel_hi: u8,
    /// Clamp the result.
    pub clamp: bool,
    /// Output modifier (×2, ×4, ÷2).
    pub omod: u8,
    /// Memory flags ([`flag`]).
    pub flags: u8,
    /// DPP controls.
    pub dpp: Dpp,
    /// Second half of a VOPD instruction.
    pub y: VopdY,
    /// The generation whose opcode numbers `op` uses.
    pub rdna: Gen,
}

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

fn lookup<'a>(tab: &'a [(u16, &'a str)], op: u16) -> Option<&'a str> {
    tab.binary_search_by_key(&op, |e| e.0)
        .ok()
        .map(|i| tab[i].1)
}

/// Mnemonic of a gfx11 opcode (without `_e32`/`_e64`/`_dpp` suffix), if LLVM knows it.
pub fn name(enc: Encoding, op: u16) -> Option<&'static str> {
    name_in(Gen::Gfx11, enc, op)
}

/// Mnemonic of an opcode of a generation, if LLVM knows it.
pub fn name_in(rdna: Gen, enc: Encoding, op: u16) -> Option<&'static str> {
    use Encoding::*;
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
        Ext => return crate::cdna3::exec::ext_name(op),
        Rdna4 => return crate::rdna4::exec::op_name(op),
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
    pub(crate) fn new(enc: Encoding, op: u16) -> Inst {
        Inst {
            enc,
            op,
            len: 1,
            dst: NULL,
            sdst: NULL,
            src: [NULL; 3],
            literal: 0,
            imm: 0,
            imm2: 0,
            saddr: NULL,
            srsrc: 0,
            neg: 0,
            abs: 0,
            opsel: 0,
            opsel_hi: 0,
            clamp: false,
            omod: 0,
            flags: 0,
            dpp: Dpp::None,
            y: VopdY {
                op: 0,
                dst: NULL,
                src: [NULL; 2],
            },
            rdna: Gen::Gfx11,
        }
    }

    /// Mnemonic without encoding suffix.
    pub fn name(&self) -> &'static str {
        name_in(self.rdna, self.enc, self.op).unwrap_or("?")
    }

    /// gfx12 memory cache policy: `th` in bits 2:0, `scope` in bits 4:3 (SMEM: `th` in 1:0),
    /// bit 5 SMEM `nv`, bit 6 SMEM `scale_offset`. Kept in [`Inst::imm2`] so the instruction
    /// stays as small as gfx11's, which the interpreter's instruction array is made of.
    pub fn cpol(&self) -> u8 {
        (self.imm2 >> 8) as u8 & 0x7f
    }

    fn set_cpol(&mut self, v: u32) {
        self.imm2 = (self.imm2 & 0xff) | ((v & 0x7f) as u16) << 8;
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
        true16_e32_halves(&mut i, shp);
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
    let first_src = usize::from(has_dst);
    if has_dst && shape_is_16(shp, 0) && i.dst >= VGPR0 + 128 {
        i.dst -= 128;
        i.opsel |= 8;
    }
    for s in 0..2 {
        if shape_is_16(shp, first_src + s) && i.src[s] >= VGPR0 + 128 {
            i.src[s] -= 128;
            i.opsel |= 1 << s;
        }
    }
}
