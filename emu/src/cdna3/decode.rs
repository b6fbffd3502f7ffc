//! gfx942/gfx950 instruction decoder: raw dwords to a faithful [`Inst`] (the fields as
//! encoded, for the disassembler), which [`super::lower`] turns into the interpreter's form.
//!
//! Field positions follow the GFX9-family encodings (CDNA3 ISA reference) and were checked
//! against `llvm-mc-22`; opcode numbers, mnemonics and operand shapes come from the tables in
//! [`super::opcodes`], generated from LLVM 22.

use super::opcodes::{GFX950_CHANGED, GFX950_REMOVED, gfx942};
use am_isa::bits;

/// The two CDNA targets: their tables differ (gfx950 adds opcodes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Target {
    /// CDNA3, MI300X.
    Gfx942,
    /// CDNA4, MI350X.
    Gfx950,
}

/// Instruction encodings of gfx942/gfx950.
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
    /// Scalar program control.
    Sopp,
    /// Scalar memory.
    Smem,
    /// Vector ALU, one source (32-bit encoding, or SDWA/DPP).
    Vop1,
    /// Vector ALU, two sources (32-bit encoding, or SDWA/DPP).
    Vop2,
    /// Vector compare (32-bit encoding, or SDWA/DPP).
    Vopc,
    /// Vector ALU, 64-bit encoding (VOP3a, and VOP3b with a scalar destination).
    Vop3,
    /// Packed math, MFMA (VOP3P-MAI) and the AccVGPR moves.
    Vop3p,
    /// LDS.
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
}

impl Encoding {
    /// The encoding's key in the generated tables.
    pub fn key(self) -> &'static str {
        use Encoding::*;
        match self {
            Sop1 => "sop1",
            Sop2 => "sop2",
            Sopk => "sopk",
            Sopc => "sopc",
            Sopp => "sopp",
            Smem => "smem",
            Vop1 => "vop1",
            Vop2 => "vop2",
            Vopc => "vopc",
            Vop3 => "vop3",
            Vop3p => "vop3p",
            Ds => "ds",
            Flat => "flat",
            Global => "global",
            Scratch => "scratch",
            Mubuf => "mubuf",
            Mtbuf => "mtbuf",
        }
    }

    fn table(self) -> &'static [(u16, &'static str, &'static str)] {
        use Encoding::*;
        match self {
            Sop1 => gfx942::SOP1,
            Sop2 => gfx942::SOP2,
            Sopk => gfx942::SOPK,
            Sopc => gfx942::SOPC,
            Sopp => gfx942::SOPP,
            Smem => gfx942::SMEM,
            Vop1 => gfx942::VOP1,
            Vop2 => gfx942::VOP2,
            Vopc => gfx942::VOPC,
            Vop3 => gfx942::VOP3,
            Vop3p => gfx942::VOP3P,
            Ds => gfx942::DS,
            Flat => gfx942::FLAT,
            Global => gfx942::GLOBAL,
            Scratch => gfx942::SCRATCH,
            Mubuf => gfx942::MUBUF,
            Mtbuf => gfx942::MTBUF,
        }
    }
}

/// SDWA (sub-dword addressing) selection, as the interpreter's form keeps it.
pub use crate::interp::inst::sel;

/// What a 32-bit VALU encoding carries besides its operands, or the MFMA controls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Extra {
    /// Nothing.
    None,
    /// SDWA: operand sub-dword selects and destination handling.
    Sdwa {
        /// Destination select (byte 0-3, word 0-1, dword).
        dst_sel: u8,
        /// Unused destination bits: 0 pad with zeros, 1 sign-extend, 2 preserve.
        dst_unused: u8,
        /// Source selects.
        src_sel: [u8; 2],
        /// Sign-extend the selected source (integer ops).
        sext: [bool; 2],
    },
    /// GFX9 DPP: a lane permutation of src0 within rows of 16 (or across the wave).
    Dpp {
        /// The 9-bit control.
        ctrl: u16,
        /// Rows written.
        row_mask: u8,
        /// Banks written.
        bank_mask: u8,
        /// Out-of-range source lanes read 0 instead of disabling the write.
        bound_ctrl: bool,
    },
    /// MFMA broadcast controls.
    Mai {
        /// Control broadcast size (log2 of the number of blocks sharing A).
        cbsz: u8,
        /// A-matrix broadcast block id.
        abid: u8,
        /// B-matrix lane group pattern (on some ops, negation of the sources).
        blgp: u8,
    },
}

/// Memory and control flag bits of [`Inst::flags`].
pub mod flag {
    /// `sc0` (GLC on atomics: return the old value).
    pub const SC0: u16 = 1;
    /// `sc1`.
    pub const SC1: u16 = 2;
    /// `nt` (non-temporal).
    pub const NT: u16 = 4;
    /// Buffer/global load into LDS.
    pub const LDS: u16 = 8;
    /// MUBUF: VGPR offset.
    pub const OFFEN: u16 = 16;
    /// MUBUF: VGPR index.
    pub const IDXEN: u16 = 32;
    /// Scratch: VGPR address (SVE).
    pub const SVE: u16 = 64;
    /// DS: global data share.
    pub const GDS: u16 = 128;
    /// SMEM: `glc`.
    pub const GLC: u16 = 256;
    /// MFMA: the accumulator (src2) and result are AccVGPRs.
    pub const ACC_CD: u16 = 512;
}

/// Operand code of the literal constant.
pub const LITERAL: u16 = 255;
/// Operand code of the first VGPR.
pub const VGPR0: u16 = 256;
/// Operand code of the first AccVGPR (`a0`): the decoder resolves the ACC bits into it.
pub const AGPR0: u16 = 512;
/// Operand code of `m0` on GFX9.
pub const M0: u16 = 124;
/// Operand code of `vcc_lo`.
pub const VCC_LO: u16 = 106;
/// Operand code used for an absent operand (never a valid GFX9 operand code).
pub const NONE: u16 = 125;
/// The SDWA marker in the src0 field of a 32-bit VALU encoding.
const SDWA: u16 = 0xF9;
/// The DPP marker.
const DPP: u16 = 0xFA;

/// One decoded gfx942/gfx950 instruction, with operand codes as encoded (VGPR 256 + n, and
/// AccVGPRs 512 + n wherever an ACC bit or the opcode says so).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Inst {
    /// Encoding.
    pub enc: Encoding,
    /// Opcode within the encoding's opcode space.
    pub op: u16,
    /// Length in dwords, including a literal, SDWA or DPP dword.
    pub len: u8,
    /// Main destination (VALU `vdst`, SALU `sdst`, memory `vdst`/`sdata`).
    pub dst: u16,
    /// VOP3b, SDWA VOPC: scalar destination.
    pub sdst: u16,
    /// Sources: SALU/VALU operands; SMEM base; DS addr/data0/data1; FLAT addr/data; MUBUF
    /// vaddr.
    pub src: [u16; 3],
    /// The literal constant.
    pub literal: u32,
    /// SOPP/SOPK immediate, memory offset (sign-extended where signed), DS offset0.
    pub imm: i32,
    /// DS `offset1`; MTBUF `dfmt | nfmt << 4`.
    pub imm2: u16,
    /// SMEM `soffset`, FLAT `saddr`, MUBUF `soffset` (operand codes); [`NONE`] when absent.
    pub saddr: u16,
    /// MUBUF/MTBUF resource descriptor SGPR (first of four).
    pub srsrc: u16,
    /// Negate source i (VOP3 `neg`, VOP3P `neg_lo`, SDWA/DPP neg).
    pub neg: u8,
    /// Absolute value of source i (VOP3 `abs`, SDWA/DPP abs); VOP3P `neg_hi`.
    pub abs: u8,
    /// VOP3/VOP3P `op_sel`.
    pub opsel: u8,
    /// VOP3P `op_sel_hi`.
    pub opsel_hi: u8,
    /// Clamp the result.
    pub clamp: bool,
    /// Output modifier (x2, x4, /2).
    pub omod: u8,
    /// [`flag`] bits.
    pub flags: u16,
    /// SDWA, DPP or MFMA controls.
    pub extra: Extra,
    /// Mnemonic, as LLVM spells it (without `_e32`/`_e64`/`_sdwa`/`_dpp`).
    pub name: &'static str,
    /// Operand shape (see [`super::opcodes`]).
    pub shape: &'static str,
}

/// Why a word sequence is not an instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// No encoding starts with these bits (or a graphics-only one: EXP, MIMG, VINTRP).
    UnknownEncoding,
    /// The encoding is known but its opcode is not.
    UnknownOpcode(Encoding, u16),
    /// The instruction needs more dwords than are left.
    Truncated(Encoding, u8),
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecodeError::UnknownEncoding => write!(f, "no gfx942/gfx950 encoding matches"),
            DecodeError::UnknownOpcode(e, op) => write!(f, "unknown {e:?} opcode {op:#x}"),
            DecodeError::Truncated(e, n) => write!(f, "{e:?} instruction needs {n} dwords"),
        }
    }
}

/// Mnemonic and operand shape of an opcode on `target`, if LLVM knows it.
pub fn lookup(target: Target, enc: Encoding, op: u16) -> Option<(&'static str, &'static str)> {
    if target == Target::Gfx950 {
        let key = enc.key();
        if let Some(e) = GFX950_CHANGED.iter().find(|e| e.0 == key && e.1 == op) {
            return Some((e.2, e.3));
        }
        if GFX950_REMOVED.iter().any(|e| e.0 == key && e.1 == op) {
            return None;
        }
    }
    let t = enc.table();
    t.binary_search_by_key(&op, |e| e.0)
        .ok()
        .map(|i| (t[i].1, t[i].2))
}

/// Register count of the `i`-th operand of a shape (1 when unknown).
pub fn shape_regs(shape: &str, i: usize) -> u16 {
    shape
        .split(',')
        .nth(i)
        .and_then(|t| t.parse().ok())
        .unwrap_or(1)
}

/// Number of operands of a shape.
pub fn shape_len(shape: &str) -> usize {
    if shape.is_empty() {
        0
    } else {
        shape.split(',').count()
    }
}

fn sext(v: u32, n: u32) -> i32 {
    ((v << (32 - n)) as i32) >> (32 - n)
}

/// Classifies the first dword of an instruction.
pub fn classify(w: u32) -> Option<(Encoding, u16)> {
    use Encoding::*;
    let r = match w {
        _ if w >> 23 == 0x17D => (Sop1, bits(w, 8, 8)),
        _ if w >> 23 == 0x17E => (Sopc, bits(w, 16, 7)),
        _ if w >> 23 == 0x17F => (Sopp, bits(w, 16, 7)),
        _ if w >> 28 == 0xB => (Sopk, bits(w, 23, 5)),
        _ if w >> 30 == 2 => (Sop2, bits(w, 23, 7)),
        _ if w >> 25 == 0x3F => (Vop1, bits(w, 9, 8)),
        _ if w >> 25 == 0x3E => (Vopc, bits(w, 17, 8)),
        _ if w >> 31 == 0 => (Vop2, bits(w, 25, 6)),
        _ if w >> 23 == 0x1A7 => (Vop3p, bits(w, 16, 7)),
        _ if w >> 26 == 0x34 => (Vop3, bits(w, 16, 10)),
        _ if w >> 26 == 0x30 => (Smem, bits(w, 18, 8)),
        _ if w >> 26 == 0x36 => (Ds, bits(w, 17, 8)),
        _ if w >> 26 == 0x37 => match bits(w, 14, 2) {
            0 => (Flat, bits(w, 18, 7)),
            1 => (Scratch, bits(w, 18, 7)),
            2 => (Global, bits(w, 18, 7)),
            _ => return None,
        },
        _ if w >> 26 == 0x38 => (Mubuf, bits(w, 18, 7)),
        _ if w >> 26 == 0x3A => (Mtbuf, bits(w, 15, 4)),
        _ => return None,
    };
    Some((r.0, r.1 as u16))
}

/// VALU mnemonics whose VOP3 form has a scalar destination besides `vdst` (VOP3b).
pub fn is_vop3b(name: &str) -> bool {
    matches!(
        name,
        "v_add_co_u32"
            | "v_sub_co_u32"
            | "v_subrev_co_u32"
            | "v_addc_co_u32"
            | "v_subb_co_u32"
            | "v_subbrev_co_u32"
            | "v_div_scale_f32"
            | "v_div_scale_f64"
            | "v_mad_u64_u32"
            | "v_mad_i64_i32"
    )
}

/// Whether a VOP3P mnemonic is a matrix instruction (VOP3P-MAI encoding).
pub fn is_mai(name: &str) -> bool {
    (name.starts_with("v_mfma") && !name.starts_with("v_mfma_ld_scale"))
        || name.starts_with("v_smfmac")
}

/// Memory mnemonics that take no data or destination register (cache control).
fn is_cache_op(name: &str) -> bool {
    matches!(
        name,
        "buffer_wbl2" | "buffer_inv" | "buffer_wbinvl1" | "buffer_wbinvl1_vol"
    )
}

impl Inst {
    fn new(enc: Encoding, op: u16) -> Inst {
        Inst {
            enc,
            op,
            len: 1,
            dst: NONE,
            sdst: NONE,
            src: [NONE; 3],
            literal: 0,
            imm: 0,
            imm2: 0,
            saddr: NONE,
            srsrc: 0,
            neg: 0,
            abs: 0,
            opsel: 0,
            opsel_hi: 0,
            clamp: false,
            omod: 0,
            flags: 0,
            extra: Extra::None,
            name: "",
            shape: "",
        }
    }
}

/// Decodes the instruction at the start of `words` for `target`.
pub fn decode(target: Target, words: &[u32]) -> Result<Inst, DecodeError> {
    use Encoding::*;
    let w0 = *words.first().ok_or(DecodeError::Truncated(Sopp, 1))?;
    let (enc, op) = classify(w0).ok_or(DecodeError::UnknownEncoding)?;
    let (name, shp) = lookup(target, enc, op).ok_or(DecodeError::UnknownOpcode(enc, op))?;
    let word = |n: usize| {
        words
            .get(n)
            .copied()
            .ok_or(DecodeError::Truncated(enc, n as u8 + 1))
    };
    let mut i = Inst::new(enc, op);
    let nops = shape_len(shp);
    // Source operands that may hold a literal (SALU and 32-bit VALU encodings).
    let mut lit_srcs = 0usize;
    match enc {
        Sop1 => {
            i.dst = bits(w0, 16, 7) as u16;
            i.src[0] = bits(w0, 0, 8) as u16;
            if nops == 1 {
                // s_getpc_b64 has only a destination, s_setpc_b64 and friends only a source.
                if name == "s_getpc_b64" {
                    i.src[0] = NONE;
                } else {
                    i.dst = NONE;
                }
            }
            lit_srcs = usize::from(i.src[0] != NONE);
        }
        Sop2 => {
            i.dst = bits(w0, 16, 7) as u16;
            i.src = [bits(w0, 0, 8) as u16, bits(w0, 8, 8) as u16, NONE];
            lit_srcs = 2;
        }
        Sopc => {
            i.src = [bits(w0, 0, 8) as u16, bits(w0, 8, 8) as u16, NONE];
            lit_srcs = 2;
        }
        Sopk => {
            i.dst = bits(w0, 16, 7) as u16;
            i.imm = bits(w0, 0, 16) as i32;
            if name == "s_setreg_imm32_b32" {
                i.literal = word(1)?;
                i.len = 2;
            }
        }
        Sopp => i.imm = bits(w0, 0, 16) as i32,
        Smem => {
            let w1 = word(1)?;
            i.len = 2;
            i.src[0] = (bits(w0, 0, 6) << 1) as u16;
            i.dst = bits(w0, 6, 7) as u16;
            if bits(w0, 16, 1) != 0 {
                i.flags |= flag::GLC;
            }
            let (imm, soe) = (bits(w0, 17, 1) != 0, bits(w0, 14, 1) != 0);
            match (imm, soe) {
                (true, false) => i.imm = sext(bits(w1, 0, 21), 21),
                (false, false) => i.saddr = bits(w1, 0, 8) as u16,
                (true, true) => {
                    i.imm = sext(bits(w1, 0, 21), 21);
                    i.saddr = bits(w1, 25, 7) as u16;
                }
                (false, true) => i.saddr = bits(w1, 25, 7) as u16,
            }
        }
        Vop1 => {
            i.dst = VGPR0 + bits(w0, 17, 8) as u16;
            if name == "v_readfirstlane_b32" {
                i.dst -= VGPR0;
            }
            i.src[0] = bits(w0, 0, 9) as u16;
            if nops == 0 {
                i.dst = NONE;
                i.src[0] = NONE;
            }
            lit_srcs = 1;
        }
        Vop2 => {
            i.dst = VGPR0 + bits(w0, 17, 8) as u16;
            i.src = [bits(w0, 0, 9) as u16, VGPR0 + bits(w0, 9, 8) as u16, NONE];
            lit_srcs = 1;
            if matches!(
                name,
                "v_fmamk_f32"
                    | "v_fmaak_f32"
                    | "v_madmk_f16"
                    | "v_madak_f16"
                    | "v_madmk_f32"
                    | "v_madak_f32"
            ) {
                i.literal = word(1)?;
                i.len = 2;
                lit_srcs = 0;
            }
        }
        Vopc => {
            i.dst = VCC_LO;
            i.src = [bits(w0, 0, 9) as u16, VGPR0 + bits(w0, 9, 8) as u16, NONE];
            lit_srcs = 1;
        }
        Vop3 => {
            let w1 = word(1)?;
            i.len = 2;
            i.dst = bits(w0, 0, 8) as u16;
            if is_vop3b(name) {
                i.sdst = bits(w0, 8, 7) as u16;
            } else {
                i.abs = bits(w0, 8, 3) as u8;
                i.opsel = bits(w0, 11, 4) as u8;
            }
            // Compares and lane reads write SGPRs; everything else a VGPR.
            if !(op < 0x100 || name == "v_readlane_b32" || name == "v_readfirstlane_b32") {
                i.dst += VGPR0;
            }
            i.clamp = bits(w0, 15, 1) != 0;
            i.src = [
                bits(w1, 0, 9) as u16,
                bits(w1, 9, 9) as u16,
                bits(w1, 18, 9) as u16,
            ];
            i.omod = bits(w1, 27, 2) as u8;
            i.neg = bits(w1, 29, 3) as u8;
            if name.starts_with("v_bitop3") {
                // The 8-bit truth table lives in the neg, abs and omod fields.
                i.imm = (i.neg | i.abs << 3 | i.omod << 6) as i32;
                (i.neg, i.abs, i.omod) = (0, 0, 0);
            }
        }
        Vop3p => {
            let w1 = word(1)?;
            i.len = 2;
            i.dst = VGPR0 + bits(w0, 0, 8) as u16;
            i.src = [
                bits(w1, 0, 9) as u16,
                bits(w1, 9, 9) as u16,
                bits(w1, 18, 9) as u16,
            ];
            i.clamp = bits(w0, 15, 1) != 0;
            if is_mai(name) {
                i.extra = Extra::Mai {
                    cbsz: bits(w0, 8, 3) as u8,
                    abid: bits(w0, 11, 4) as u8,
                    blgp: bits(w1, 29, 3) as u8,
                };
                i.clamp = false;
                // ACC_CD: the result and the accumulator are AccVGPRs; ACC (the op_sel_hi
                // bits): sources A and B are.
                let acc_cd = bits(w0, 15, 1) != 0;
                if acc_cd {
                    i.flags |= flag::ACC_CD;
                    i.dst += AGPR0 - VGPR0;
                    if i.src[2] >= VGPR0 && !name.starts_with("v_smfmac") {
                        i.src[2] += AGPR0 - VGPR0;
                    }
                }
                for k in 0..2 {
                    if bits(w1, 27 + k, 1) != 0 && i.src[k as usize] >= VGPR0 {
                        i.src[k as usize] += AGPR0 - VGPR0;
                    }
                }
            } else {
                i.abs = bits(w0, 8, 3) as u8; // neg_hi
                i.opsel = bits(w0, 11, 3) as u8;
                i.opsel_hi = (bits(w1, 27, 2) | (bits(w0, 14, 1) << 2)) as u8;
                i.neg = bits(w1, 29, 3) as u8;
                match name {
                    "v_accvgpr_read_b32" if i.src[0] >= VGPR0 => i.src[0] += AGPR0 - VGPR0,
                    "v_accvgpr_write_b32" => i.dst += AGPR0 - VGPR0,
                    _ => {}
                }
            }
        }
        Ds => {
            let w1 = word(1)?;
            i.len = 2;
            i.imm = bits(w0, 0, 8) as i32;
            i.imm2 = bits(w0, 8, 8) as u16;
            if bits(w0, 16, 1) != 0 {
                i.flags |= flag::GDS;
            }
            let acc = if bits(w0, 25, 1) != 0 { AGPR0 } else { VGPR0 };
            i.src = [
                VGPR0 + bits(w1, 0, 8) as u16,
                acc + bits(w1, 8, 8) as u16,
                acc + bits(w1, 16, 8) as u16,
            ];
            i.dst = acc + bits(w1, 24, 8) as u16;
        }
        Flat | Global | Scratch => {
            let w1 = word(1)?;
            i.len = 2;
            i.imm = if enc == Flat {
                bits(w0, 0, 12) as i32
            } else {
                sext(bits(w0, 0, 13), 13)
            };
            for (b, f) in [
                (16, flag::SC0),
                (17, flag::NT),
                (25, flag::SC1),
                (13, flag::LDS),
            ] {
                if bits(w0, b, 1) != 0 {
                    i.flags |= f;
                }
            }
            if enc == Scratch && i.flags & flag::LDS != 0 {
                // Bit 13 of a scratch instruction is SVE (a VGPR address), not LDS.
                i.flags = (i.flags & !flag::LDS) | flag::SVE;
            }
            let acc = if bits(w1, 23, 1) != 0 { AGPR0 } else { VGPR0 };
            i.src = [
                VGPR0 + bits(w1, 0, 8) as u16,
                acc + bits(w1, 8, 8) as u16,
                NONE,
            ];
            let saddr = bits(w1, 16, 7) as u16;
            i.saddr = if saddr == 0x7F || enc == Flat {
                NONE
            } else {
                saddr
            };
            i.dst = acc + bits(w1, 24, 8) as u16;
        }
        Mubuf | Mtbuf => {
            let w1 = word(1)?;
            i.len = 2;
            i.imm = bits(w0, 0, 12) as i32;
            for (b, f) in [(12, flag::OFFEN), (13, flag::IDXEN), (14, flag::SC0)] {
                if bits(w0, b, 1) != 0 {
                    i.flags |= f;
                }
            }
            if enc == Mubuf {
                for (b, f) in [(15, flag::SC1), (16, flag::LDS), (17, flag::NT)] {
                    if bits(w0, b, 1) != 0 {
                        i.flags |= f;
                    }
                }
            } else {
                i.imm2 = bits(w0, 19, 7) as u16;
                for (b, f) in [(15, flag::SC1), (22, flag::NT)] {
                    if bits(w1, b, 1) != 0 {
                        i.flags |= f;
                    }
                }
            }
            let acc = if bits(w1, 23, 1) != 0 { AGPR0 } else { VGPR0 };
            i.src[0] = VGPR0 + bits(w1, 0, 8) as u16;
            i.dst = acc + bits(w1, 8, 8) as u16;
            i.srsrc = (bits(w1, 16, 5) << 2) as u16;
            i.saddr = bits(w1, 24, 8) as u16;
            if is_cache_op(name) {
                i.dst = NONE;
            }
        }
    }
    // SDWA and DPP dwords of the 32-bit VALU encodings, and literal constants.
    let mut len = i.len as usize;
    if matches!(enc, Vop1 | Vop2 | Vopc) && matches!(i.src[0], SDWA | DPP) && nops > 0 {
        let d = word(len)?;
        len += 1;
        if i.src[0] == SDWA {
            let s0_sgpr = bits(d, 23, 1) != 0;
            i.src[0] = bits(d, 0, 8) as u16 + if s0_sgpr { 0 } else { VGPR0 };
            if enc != Vop1 && bits(d, 31, 1) != 0 {
                i.src[1] -= VGPR0;
            }
            i.neg = (bits(d, 20, 1) | bits(d, 28, 1) << 1) as u8;
            i.abs = (bits(d, 21, 1) | bits(d, 29, 1) << 1) as u8;
            let src_sel = [bits(d, 16, 3) as u8, bits(d, 24, 3) as u8];
            let sext = [bits(d, 19, 1) != 0, bits(d, 27, 1) != 0];
            if enc == Vopc {
                if bits(d, 15, 1) != 0 {
                    i.dst = bits(d, 8, 7) as u16;
                }
                i.extra = Extra::Sdwa {
                    dst_sel: sel::DWORD,
                    dst_unused: 0,
                    src_sel,
                    sext,
                };
            } else {
                i.clamp = bits(d, 13, 1) != 0;
                i.omod = bits(d, 14, 2) as u8;
                i.extra = Extra::Sdwa {
                    dst_sel: bits(d, 8, 3) as u8,
                    dst_unused: bits(d, 11, 2) as u8,
                    src_sel,
                    sext,
                };
            }
        } else {
            i.src[0] = VGPR0 + bits(d, 0, 8) as u16;
            i.neg = (bits(d, 20, 1) | bits(d, 22, 1) << 1) as u8;
            i.abs = (bits(d, 21, 1) | bits(d, 23, 1) << 1) as u8;
            i.extra = Extra::Dpp {
                ctrl: bits(d, 8, 9) as u16,
                bound_ctrl: bits(d, 19, 1) != 0,
                bank_mask: bits(d, 24, 4) as u8,
                row_mask: bits(d, 28, 4) as u8,
            };
        }
    } else if i.src.iter().take(lit_srcs).any(|&s| s == LITERAL) {
        i.literal = word(len)?;
        len += 1;
    }
    if name == "v_accvgpr_mov_b32" {
        for c in [&mut i.dst, &mut i.src[0]] {
            if (VGPR0..AGPR0).contains(c) {
                *c += AGPR0 - VGPR0;
            }
        }
    }
    i.len = len as u8;
    i.name = name;
    i.shape = shp;
    Ok(i)
}
