//! The interpreter's instruction form: one [`Inst`] per instruction, in gfx11's encodings and
//! opcode numbering ([`super::opcodes`]), with operands as 9-bit operand codes. The RDNA
//! decoder produces it directly; the CDNA and gfx12 front-ends lower their instructions onto
//! it, what gfx11 lacks becoming operations of the [`Encoding::Ext`] and [`Encoding::Rdna4`]
//! encodings. The RDNA front-end names and prints it (`rdna3::decode`, `rdna3::print`): it
//! knows both RDNA generations' tables.

/// Pseudo VALU opcode of VOPD's `v_dual_dot2acc_f32_bf16`, which has no VOP1/2/3 form.
pub const VOPD_DOT2ACC_F32_BF16: u16 = 0xFFFF;
/// Pseudo VALU opcode of VOPD's `v_dual_dot2acc_f32_f16` on gfx12 (no VOP1/2/3 form there).
pub const VOPD_DOT2ACC_F32_F16: u16 = 0xFFFE;

/// The RDNA generation whose opcode numbers an [`Inst`] uses. The interpreter runs only
/// [`Gen::Gfx11`]; an instruction in gfx12's numbering is the RDNA decoder's output before
/// the gfx12 front-end lowers it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Gen {
    /// gfx11 (RDNA3): the interpreter's own numbering.
    #[default]
    Gfx11,
    /// gfx12 (RDNA4): decoded and printed with gfx1200's tables, lowered to gfx11 to run.
    Gfx12,
}

/// Instruction encodings of gfx1100, and two that carry the operations other families add.
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
    /// lowering gfx942/gfx950 code; `op` numbers an `exec_cdna::ExtOp`.
    Ext,
    /// Not a gfx1100 encoding: an operation only gfx12 has, produced by lowering gfx1200
    /// code; `op` numbers an `exec_gfx12` operation.
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

/// SDWA (sub-dword addressing) selection: byte 0-3, word 0-1, whole dword.
pub mod sel {
    /// Word 0 (bits 15:0).
    pub const WORD_0: u8 = 4;
    /// Word 1 (bits 31:16).
    pub const WORD_1: u8 = 5;
    /// The whole dword.
    pub const DWORD: u8 = 6;
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

/// Opcode marking an undecodable slot (never a real SOPP opcode).
pub(crate) const INVALID_OP: u16 = u16::MAX;
/// Opcode marking a valid instruction whose semantics the interpreter lacks.
pub(crate) const UNIMPL_OP: u16 = u16::MAX - 1;

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

    /// gfx12 memory cache policy: `th` in bits 2:0, `scope` in bits 4:3 (SMEM: `th` in 1:0),
    /// bit 5 SMEM `nv`, bit 6 SMEM `scale_offset`. Kept in [`Inst::imm2`] so the instruction
    /// stays as small as gfx11's, which the interpreter's instruction array is made of.
    pub fn cpol(&self) -> u8 {
        (self.imm2 >> 8) as u8 & 0x7f
    }

    pub(crate) fn set_cpol(&mut self, v: u32) {
        self.imm2 = (self.imm2 & 0xff) | ((v & 0x7f) as u16) << 8;
    }
}
