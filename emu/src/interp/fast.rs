//! Hot instruction forms resolved once per program: each instruction of a predecoded
//! [`crate::Program`] gets a [`Fast`] form, which the run loop matches before anything else.
//! A form names the operation and carries its operands already resolved (register rows,
//! SGPR numbers, inline constants and literals as values, branch targets as instruction
//! indices), so such an instruction costs one jump in the run loop and no re-matching on its
//! encoding, opcode or operand codes. Only instructions whose result does not depend on
//! anything decided at run time beyond EXEC and the float mode get a form; with a partial
//! EXEC (or denormal flushing, for float forms) the run loop takes the general path, which
//! computes the same bits. The lane loops are the general path's own (`dense`, `bits_rows`,
//! `fma_rows_inline`, `carry_rows`), so a form cannot compute anything the general path would not.

use super::exec::{
    CmpInfo, K, Ty, Valu, arr, bits_rows, carry_rows, cmp_dst, cmp_info, compare_rows,
    dwords_to_rows, fma_rows_inline, for_lanes, full_mask, inline_const, pack_bits, row,
    rows_to_dwords, set_row, sopp_is_no_op,
};
use super::inst::{Dpp, Encoding, Inst, LITERAL, NULL, VCC_LO, VGPR0, flag};
use super::names::mnemonic;
use super::opcodes::{sopp, valu};
use crate::Error;
use crate::interp::exec_cdna::ExtOp;
use crate::interp::memory::Atomic32;
use crate::interp::wave::{CONST_ROW, DPP_ROW, Wave};

/// A resolved source operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Opnd {
    /// A register row, as its base index (`row * 64`) in [`Wave::v`].
    Row(u32),
    /// An SGPR (a pair for 64-bit sources), read when the instruction runs.
    Sgpr(u8),
    /// An inline constant or literal, as the instruction's operand type reads it.
    Const(u64),
}

/// The operands of a vector form: up to three sources, their `(and, xor)` sign masks
/// (abs/neg of float sources) and the destination row base.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Vf {
    pub s: [Opnd; 3],
    pub m: [(u32, u32); 3],
    pub d: u32,
    /// Scalar destination (carry out) or lane-mask source, as an operand code.
    pub sd: u16,
}

/// What the run loop does with an instruction (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fast {
    /// The general path.
    Slow,
    /// A no-op (`s_nop`, `s_sleep`, ...).
    Nop,
    /// A wait on the wave's memory operations (`s_waitcnt`, `s_wait_idle`): a no-op unless
    /// the wave posted atomics ([`crate::Memory::post_atomic32`]), which it performs.
    Wait,
    /// `s_branch` to an instruction index.
    Branch(u32),
    CbranchScc0(u32),
    CbranchScc1(u32),
    CbranchVccz(u32),
    CbranchVccnz(u32),
    CbranchExecz(u32),
    CbranchExecnz(u32),
    // 32-bit integer operations (modifiers do not apply to them).
    MovB32(Vf),
    AddU32(Vf),
    SubU32(Vf),
    SubrevU32(Vf),
    AndB32(Vf),
    OrB32(Vf),
    XorB32(Vf),
    LshlrevB32(Vf),
    LshrrevB32(Vf),
    AshrrevI32(Vf),
    MulLoU32(Vf),
    MulHiU32(Vf),
    MulU32U24(Vf),
    Add3U32(Vf),
    LshlOrB32(Vf),
    LshlAddU32(Vf),
    AndOrB32(Vf),
    Or3B32(Vf),
    Xor3B32(Vf),
    CvtF32U32(Vf),
    NotB32(Vf),
    MinI32(Vf),
    MaxI32(Vf),
    MinU32(Vf),
    MaxU32(Vf),
    BfiB32(Vf),
    BfeU32(Vf),
    CvtF32I32(Vf),
    /// f32 to u32 and `v_ldexp_f32` (from the sources' bits).
    CvtU32F32(Vf),
    LdexpF32(Vf),
    // f32 one-source operations without output modifiers.
    RcpF32(Vf),
    SqrtF32(Vf),
    ExpF32(Vf),
    LogF32(Vf),
    FloorF32(Vf),
    TruncF32(Vf),
    RndneF32(Vf),
    FractF32(Vf),
    // f32 operations without output modifiers.
    AddF32(Vf),
    SubF32(Vf),
    SubrevF32(Vf),
    MulF32(Vf),
    /// `v_fma_f32`, `v_fmac_f32`, `v_fmamk_f32`, `v_fmaak_f32`, sources in a * b + c order.
    FmaF32(Vf),
    /// `v_cndmask_b32` (the lane mask in [`Vf::sd`]).
    CndmaskB32(Vf),
    CvtI32F32(Vf),
    // 64-bit integer operations.
    LshlrevB64(Vf),
    LshrrevB64(Vf),
    LshlAddU64(Vf),
    /// `v_mad_u64_u32` (carry out to [`Vf::sd`]).
    MadU64U32(Vf),
    /// A 32-bit add or subtract with a carry-out mask to [`Vf::sd`] (`v_add_co_u32`, ...), and
    /// with a carry-in mask read from the SGPR code given (`v_add_co_ci_u32`, CDNA's
    /// `v_addc_co_u32`, ...; [`NO_CARRY_IN`] for none).
    Carry(Vf, CarryOp, u16),
    /// A 32-bit float or integer comparison (`v_cmp`, `v_cmpx`; not `v_cmp_class`).
    Cmp(Vf, CmpInfo),
    /// `s_endpgm`.
    Endpgm,
    /// A GLOBAL load of 1 to 4 dwords per lane into VGPRs (see [`global_dwords`]).
    GlobalLoad(Gm),
    /// A GLOBAL store of 1 to 4 dwords per lane from VGPRs.
    GlobalStore(Gm),
    /// `s_load_b32` to `s_load_b512` (`s_load_dword*`) into SGPRs (see [`scalar_load`]).
    SLoad(Sm),
    /// A dword LDS load, plain (`ds_load_b32`..`b128`) or two-address (`ds_load_2addr*`).
    DsLoad(Ds),
    /// A dword LDS store, plain or two-address.
    DsStore(Ds),
    /// A GLOBAL 32-bit integer atomic (add, sub, and, or, xor, swap, min, max) of a full
    /// wave (see [`global_atomic`]).
    GlobalAtomic(Ga),
    /// `s_barrier`: the wave waits (`run_workgroup` in `wave.rs` releases it).
    Barrier,
    /// A scalar ALU operation (SOP1, SOP2, SOPK, SOPC) and its operands.
    Salu(Sf, Salu),
    /// CDNA's `v_and_b32_sdwa` with `dst_sel:DWORD`: the sources' byte or word selections
    /// (see [`SdwaSel`]), then the AND.
    SdwaAndB32(Vf, [SdwaSel; 2]),
    /// CDNA's `v_pk_add_f32`, `v_pk_mul_f32` and `v_pk_fma_f32` in their usual form (see
    /// [`Pk`]): the general path's straight loops over the rows without its decoding of
    /// the instruction for each wave (the all-reduce's sums run six a wave).
    PkF32(Pk),
}

/// The operands of a [`Fast::PkF32`] form: the sources' and destination's row bases
/// (`row * 64`; every row pair inside the register file, the third source's row 0 when
/// the operation has two) and the operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Pk {
    pub rows: [u32; 3],
    pub d: u32,
    pub op: ExtOp,
}

/// An SDWA source selection as `exec_cdna::sdwa` applies it to a row: the field at `shift`
/// moved to the top (`up`: 32 less its width) and back, sign- or zero-extending it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SdwaSel {
    pub shift: u8,
    pub up: u8,
    pub sext: bool,
}

impl SdwaSel {
    #[inline(always)]
    pub(crate) fn apply(self, v: u32) -> u32 {
        let (shift, up) = (self.shift as u32, self.up as u32);
        let y = (v >> shift) << up;
        let (s, z) = (((y as i32) >> up) as u32, y >> up);
        if self.sext { s } else { z }
    }
}

/// The operation of a [`Fast::Carry`] form: `a + b + c`, `a - b - c` or `b - a - c`, with
/// `c` the lane's carry-in bit (0 without one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CarryOp {
    Add,
    Sub,
    Subrev,
}

/// The carry-in code of a [`Fast::Carry`] form without a carry-in.
pub(crate) const NO_CARRY_IN: u16 = u16::MAX;

/// The operands of a scalar ALU form: two sources ([`Opnd::Sgpr`], a pair for 64-bit
/// operations, or [`Opnd::Const`]; never a row) and the destination SGPR (the first of a
/// pair), one that the general path's `Wave::sset` writes with a plain store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Sf {
    pub a: Opnd,
    pub b: Opnd,
    pub d: u8,
}

/// A scalar ALU operation (see [`scalar_form`]), 32-bit unless named 64; SCC as the general
/// path sets it. `MovB32` is also `s_movk_i32`, `AddI32` `s_addk_i32`, `MulI32`
/// `s_mulk_i32`, and the 32-bit compares also the `s_cmpk_*` ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Salu {
    MovB32,
    MovB64,
    AddU32,
    SubU32,
    AddI32,
    SubI32,
    AddcU32,
    SubbU32,
    MulI32,
    MulHiU32,
    LshlB32,
    LshrB32,
    AshrI32,
    AndB32,
    OrB32,
    XorB32,
    AndNot1B32,
    OrNot1B32,
    CselectB32,
    AndB64,
    OrB64,
    XorB64,
    AndNot1B64,
    OrNot1B64,
    LshlB64,
    LshrB64,
    CselectB64,
    CmpEq,
    CmpLg,
    CmpGtI32,
    CmpGeI32,
    CmpLtI32,
    CmpLeI32,
    CmpGtU32,
    CmpGeU32,
    CmpLtU32,
    CmpLeU32,
    CmpEqU64,
    CmpLgU64,
    /// `s_*_saveexec_b32` and `_b64`: the operation as `saveexec_kind` numbers it and whether
    /// it is 64-bit.
    Saveexec(u8, bool),
}

/// The operands of a dword LDS access: lane `l` accesses `words` dwords at
/// `v[addr + l] + offs[h]` for each of the `halves` addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Ds {
    /// The address row, as its base index in [`Wave::v`].
    pub addr: u32,
    /// The byte offsets of the (one or two) accesses.
    pub offs: [u32; 2],
    /// 1 (plain) or 2 (two-address).
    pub halves: u8,
    /// Dwords per access (1–4).
    pub words: u8,
    /// Loads: the first destination register row (not its base index).
    pub dst: u32,
    /// Stores: the row bases of the data of each access.
    pub data: [u32; 2],
}

/// The operands of a scalar load: the SGPR pair of the base address, the SGPR of the
/// offset (or [`NO_SOFFSET`]), the instruction offset, the first destination SGPR and the
/// dword count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Sm {
    pub base: u8,
    pub soffset: u8,
    pub dst: u8,
    pub dwords: u8,
    /// The instruction offset, sign-extended.
    pub imm: u64,
}

/// [`Sm::soffset`] of a scalar load without an SGPR offset.
pub(crate) const NO_SOFFSET: u8 = u8::MAX;

/// The operands of a GLOBAL dword load or store: the address row (a VGPR pair without
/// SADDR, a 32-bit offset with it), the data rows, the SGPR pair of SADDR and the offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Gm {
    /// Row base (`row * 64`) of the address (its low dword).
    pub vaddr: u32,
    /// Row base of the first data row (the destination of a load, the source of a store).
    pub data: u32,
    /// The SGPR pair holding the base address, or [`NO_SADDR`].
    pub saddr: u8,
    /// Dwords per lane, 1 to 4.
    pub dwords: u8,
    /// The instruction offset, sign-extended.
    pub imm: u64,
}

/// The operands of a GLOBAL 32-bit atomic: the address row (a VGPR pair without SADDR, a
/// 32-bit offset with it), the data row, the destination row of the old values (with GLC,
/// else [`NO_RETURN`]), the SGPR pair of SADDR, the offset and the operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Ga {
    /// Row base (`row * 64`) of the address (its low dword).
    pub(crate) vaddr: u32,
    /// Row base of the data.
    pub(crate) data: u32,
    /// Row base of the returned old values, or [`NO_RETURN`].
    pub(crate) dst: u32,
    /// The SGPR pair holding the base address, or [`NO_SADDR`].
    pub(crate) saddr: u8,
    pub(crate) op: Atomic32,
    /// The instruction offset, sign-extended.
    pub(crate) imm: u64,
}

/// [`Ga::dst`] of an atomic without GLC (no old values returned).
pub(crate) const NO_RETURN: u32 = u32::MAX;

/// [`Gm::saddr`] of a GLOBAL instruction without SADDR (a 64-bit VGPR address).
pub(crate) const NO_SADDR: u8 = u8::MAX;

/// Source operand `code` read as `ty`, if it resolves without run-time state other than an
/// SGPR (SCC, VCCZ, EXECZ and the apertures take the general path).
fn opnd(code: u16, lit: u32, ty: Ty) -> Option<Opnd> {
    let wide = ty == Ty::I64;
    if code >= VGPR0 {
        let row = (code - VGPR0) as u32;
        // Wide sources need their high row inside the register file too.
        return ((row as usize + wide as usize) < DPP_ROW).then_some(Opnd::Row(row * 64));
    }
    if code < 127 || (code == 127 && !wide) {
        return Some(Opnd::Sgpr(code as u8));
    }
    if code == LITERAL {
        return Some(Opnd::Const(lit as u64));
    }
    inline_const(code, ty).map(Opnd::Const)
}

/// The [`Fast`] form of instruction `idx` of a program (`index` maps dword offsets to
/// instruction indices, `offsets` the reverse).
pub(crate) fn classify(insts: &[Inst], offsets: &[u32], index: &[u32], idx: usize) -> Fast {
    let Some(i) = insts.get(idx) else {
        return Fast::Slow;
    };
    match i.enc {
        _ if matches!(i.dpp, Dpp::Sdwa { .. }) => sdwa_form(i).unwrap_or(Fast::Slow),
        Encoding::Sopp => sopp_form(i, offsets, index, idx),
        Encoding::Vopc | Encoding::Vop3 if i.op < 0x100 => cmp_form(i).unwrap_or(Fast::Slow),
        Encoding::Vop1 | Encoding::Vop2 | Encoding::Vop3 | Encoding::Vop3sd if i.op >= 0x100 => {
            valu_form(i).unwrap_or(Fast::Slow)
        }
        Encoding::Ext if i.op == ExtOp::LshlAddU64 as u16 && i.dpp == Dpp::None => {
            vf(i, [Ty::I64, Ty::B32, Ty::I64], 3, 2, false).map_or(Fast::Slow, Fast::LshlAddU64)
        }
        Encoding::Ext if i.dpp == Dpp::None => pk_f32_form(i).unwrap_or(Fast::Slow),
        Encoding::Global => global_form(i).unwrap_or(Fast::Slow),
        Encoding::Smem => smem_form(i).unwrap_or(Fast::Slow),
        Encoding::Ds => ds_form(i).unwrap_or(Fast::Slow),
        Encoding::Sop1 | Encoding::Sop2 | Encoding::Sopk | Encoding::Sopc => {
            scalar_form(i).unwrap_or(Fast::Slow)
        }
        // The cache invalidations (`buffer_gl0_inv`, `buffer_gl1_inv`, CDNA's `buffer_inv` and
        // `buffer_wbl2`), no-ops in `mubuf_op` of the emulator's coherent memory, which found
        // that out from the mnemonic each time (7 % of a gfx1100 `reduce` profile).
        Encoding::Mubuf if mnemonic(i).starts_with("buffer_gl") => Fast::Nop,
        _ => Fast::Slow,
    }
}

/// The form of a packed f32 add, multiply or FMA that the general path runs as straight
/// loops over VGPR pairs (`exec_cdna::packed_f32_plain`), every pair below the DPP row.
fn pk_f32_form(i: &Inst) -> Option<Fast> {
    let op = ExtOp::from_u16(i.op)?;
    let n = crate::interp::exec_cdna::packed_f32_plain(i, op)?;
    let pair = |code: u16| -> Option<u32> {
        let row = code.checked_sub(VGPR0)? as usize;
        (row + 1 < DPP_ROW).then_some((row * 64) as u32)
    };
    let mut rows = [0u32; 3];
    for (k, r) in rows.iter_mut().enumerate().take(n) {
        *r = pair(i.src[k])?;
    }
    Some(Fast::PkF32(Pk {
        rows,
        d: pair(i.dst)?,
        op,
    }))
}

/// The form of `v_and_b32_sdwa` with `dst_sel:DWORD` (histogram's bin index on CDNA): the
/// general path selects each source into a staging row, then runs `v_and_b32` on those rows,
/// whose result is the whole destination (`dst_unused` does not apply).
fn sdwa_form(i: &Inst) -> Option<Fast> {
    let Dpp::Sdwa {
        dst_sel,
        dst_unused,
        src_sel,
        sext,
    } = i.dpp
    else {
        return None;
    };
    if i.enc != Encoding::Vop2
        || i.op != valu::AND_B32
        || dst_sel != crate::interp::inst::sel::DWORD
        || dst_unused > 2
    {
        return None;
    }
    let mut j = *i;
    j.dpp = Dpp::None;
    let v = vf(&j, [Ty::B32; 3], 2, 1, false)?;
    let sel = |k: usize| {
        let (shift, width) = crate::interp::exec_cdna::sel_field(src_sel[k]);
        SdwaSel {
            shift: shift as u8,
            up: (32 - width) as u8,
            sext: sext[k],
        }
    };
    Some(Fast::SdwaAndB32(v, [sel(0), sel(1)]))
}

/// The form of a scalar ALU instruction (the operations compilers emit most) whose sources
/// resolve to an SGPR (pair) or a value as `Wave::sread`/`sread64` read them, and whose
/// destination is an SGPR `Wave::sset` writes (not `null`): EXEC, VCC and M0 are plain SGPRs
/// there, and nothing else holds state derived from them (the vector forms check EXEC when
/// they run; the LDS row classifications are keyed by it). SCC, VCCZ, EXECZ and the apertures
/// as sources stay general.
fn scalar_form(i: &Inst) -> Option<Fast> {
    use super::opcodes::{sop1, sop2, sopc, sopk};
    let src = |code: u16, ty: Ty| match opnd(code, i.literal, ty)? {
        Opnd::Row(_) => None,
        o => Some(o),
    };
    // A destination of `dwords` SGPRs.
    let dst = |dwords: u16| -> Option<u8> {
        (0..dwords)
            .all(|k| i.dst + k < 128 && i.dst + k != NULL)
            .then_some(i.dst as u8)
    };
    let sf = |wide: bool, dwords: u16| -> Option<Sf> {
        let ty = if wide { Ty::I64 } else { Ty::B32 };
        Some(Sf {
            a: src(i.src[0], ty)?,
            b: src(i.src[1], ty)?,
            d: dst(dwords)?,
        })
    };
    // SOPK: the destination is also the first source, the immediate the second.
    let k = |signed: bool, writes: bool| -> Option<Sf> {
        let imm = if signed {
            i.imm as u16 as i16 as i32 as u32
        } else {
            i.imm as u32
        };
        Some(Sf {
            a: src(i.dst, Ty::B32)?,
            b: Opnd::Const(imm as u64),
            d: if writes { dst(1)? } else { 0 },
        })
    };
    // SOP1 and SOPC have no second source or no destination: their `null` fields.
    let one = |wide: bool| -> Option<Sf> {
        let ty = if wide { Ty::I64 } else { Ty::B32 };
        Some(Sf {
            a: src(i.src[0], ty)?,
            b: Opnd::Const(0),
            d: dst(1 + wide as u16)?,
        })
    };
    let cmp = |wide: bool| -> Option<Sf> {
        let ty = if wide { Ty::I64 } else { Ty::B32 };
        Some(Sf {
            a: src(i.src[0], ty)?,
            b: src(i.src[1], ty)?,
            d: 0,
        })
    };
    Some(match (i.enc, i.op) {
        (Encoding::Sop1, sop1::MOV_B32) => Fast::Salu(one(false)?, Salu::MovB32),
        (Encoding::Sop1, sop1::MOV_B64) => Fast::Salu(one(true)?, Salu::MovB64),
        (Encoding::Sop1, op @ sop1::AND_SAVEEXEC_B32..=sop1::OR_NOT1_SAVEEXEC_B64) => {
            let (wide, kind) = super::exec::saveexec_kind(op)?;
            Fast::Salu(one(wide)?, Salu::Saveexec(kind, wide))
        }
        (Encoding::Sop2, op) => match op {
            sop2::ADD_U32 => Fast::Salu(sf(false, 1)?, Salu::AddU32),
            sop2::SUB_U32 => Fast::Salu(sf(false, 1)?, Salu::SubU32),
            sop2::ADD_I32 => Fast::Salu(sf(false, 1)?, Salu::AddI32),
            sop2::SUB_I32 => Fast::Salu(sf(false, 1)?, Salu::SubI32),
            sop2::ADDC_U32 => Fast::Salu(sf(false, 1)?, Salu::AddcU32),
            sop2::SUBB_U32 => Fast::Salu(sf(false, 1)?, Salu::SubbU32),
            sop2::MUL_I32 => Fast::Salu(sf(false, 1)?, Salu::MulI32),
            sop2::MUL_HI_U32 => Fast::Salu(sf(false, 1)?, Salu::MulHiU32),
            sop2::LSHL_B32 => Fast::Salu(sf(false, 1)?, Salu::LshlB32),
            sop2::LSHR_B32 => Fast::Salu(sf(false, 1)?, Salu::LshrB32),
            sop2::ASHR_I32 => Fast::Salu(sf(false, 1)?, Salu::AshrI32),
            sop2::AND_B32 => Fast::Salu(sf(false, 1)?, Salu::AndB32),
            sop2::OR_B32 => Fast::Salu(sf(false, 1)?, Salu::OrB32),
            sop2::XOR_B32 => Fast::Salu(sf(false, 1)?, Salu::XorB32),
            sop2::AND_NOT1_B32 => Fast::Salu(sf(false, 1)?, Salu::AndNot1B32),
            sop2::OR_NOT1_B32 => Fast::Salu(sf(false, 1)?, Salu::OrNot1B32),
            sop2::CSELECT_B32 => Fast::Salu(sf(false, 1)?, Salu::CselectB32),
            // The general path reads both sources of these as 64 bits (the shift amount too).
            sop2::AND_B64 => Fast::Salu(sf(true, 2)?, Salu::AndB64),
            sop2::OR_B64 => Fast::Salu(sf(true, 2)?, Salu::OrB64),
            sop2::XOR_B64 => Fast::Salu(sf(true, 2)?, Salu::XorB64),
            sop2::AND_NOT1_B64 => Fast::Salu(sf(true, 2)?, Salu::AndNot1B64),
            sop2::OR_NOT1_B64 => Fast::Salu(sf(true, 2)?, Salu::OrNot1B64),
            sop2::LSHL_B64 => Fast::Salu(sf(true, 2)?, Salu::LshlB64),
            sop2::LSHR_B64 => Fast::Salu(sf(true, 2)?, Salu::LshrB64),
            sop2::CSELECT_B64 => Fast::Salu(sf(true, 2)?, Salu::CselectB64),
            _ => return None,
        },
        (Encoding::Sopc, op) => match op {
            sopc::CMP_EQ_I32 | sopc::CMP_EQ_U32 => Fast::Salu(cmp(false)?, Salu::CmpEq),
            sopc::CMP_LG_I32 | sopc::CMP_LG_U32 => Fast::Salu(cmp(false)?, Salu::CmpLg),
            sopc::CMP_GT_I32 => Fast::Salu(cmp(false)?, Salu::CmpGtI32),
            sopc::CMP_GE_I32 => Fast::Salu(cmp(false)?, Salu::CmpGeI32),
            sopc::CMP_LT_I32 => Fast::Salu(cmp(false)?, Salu::CmpLtI32),
            sopc::CMP_LE_I32 => Fast::Salu(cmp(false)?, Salu::CmpLeI32),
            sopc::CMP_GT_U32 => Fast::Salu(cmp(false)?, Salu::CmpGtU32),
            sopc::CMP_GE_U32 => Fast::Salu(cmp(false)?, Salu::CmpGeU32),
            sopc::CMP_LT_U32 => Fast::Salu(cmp(false)?, Salu::CmpLtU32),
            sopc::CMP_LE_U32 => Fast::Salu(cmp(false)?, Salu::CmpLeU32),
            sopc::CMP_EQ_U64 => Fast::Salu(cmp(true)?, Salu::CmpEqU64),
            sopc::CMP_LG_U64 => Fast::Salu(cmp(true)?, Salu::CmpLgU64),
            _ => return None,
        },
        (Encoding::Sopk, op) => match op {
            sopk::MOVK_I32 => Fast::Salu(
                Sf {
                    a: Opnd::Const(i.imm as u16 as i16 as i32 as u32 as u64),
                    b: Opnd::Const(0),
                    d: dst(1)?,
                },
                Salu::MovB32,
            ),
            sopk::ADDK_I32 => Fast::Salu(k(true, true)?, Salu::AddI32),
            sopk::MULK_I32 => Fast::Salu(k(true, true)?, Salu::MulI32),
            sopk::CMPK_EQ_I32 => Fast::Salu(k(true, false)?, Salu::CmpEq),
            sopk::CMPK_LG_I32 => Fast::Salu(k(true, false)?, Salu::CmpLg),
            sopk::CMPK_GT_I32 => Fast::Salu(k(true, false)?, Salu::CmpGtI32),
            sopk::CMPK_GE_I32 => Fast::Salu(k(true, false)?, Salu::CmpGeI32),
            sopk::CMPK_LT_I32 => Fast::Salu(k(true, false)?, Salu::CmpLtI32),
            sopk::CMPK_LE_I32 => Fast::Salu(k(true, false)?, Salu::CmpLeI32),
            sopk::CMPK_EQ_U32 => Fast::Salu(k(false, false)?, Salu::CmpEq),
            sopk::CMPK_LG_U32 => Fast::Salu(k(false, false)?, Salu::CmpLg),
            sopk::CMPK_GT_U32 => Fast::Salu(k(false, false)?, Salu::CmpGtU32),
            sopk::CMPK_GE_U32 => Fast::Salu(k(false, false)?, Salu::CmpGeU32),
            sopk::CMPK_LT_U32 => Fast::Salu(k(false, false)?, Salu::CmpLtU32),
            sopk::CMPK_LE_U32 => Fast::Salu(k(false, false)?, Salu::CmpLeU32),
            _ => return None,
        },
        _ => return None,
    })
}

fn sopp_form(i: &Inst, offsets: &[u32], index: &[u32], idx: usize) -> Fast {
    let target = || -> Option<u32> {
        let next = *offsets.get(idx + 1)? as i64;
        let at = usize::try_from(next + i.imm as u16 as i16 as i64).ok()?;
        index.get(at).copied().filter(|&t| t != u32::MAX)
    };
    let branch = |f: fn(u32) -> Fast| target().map_or(Fast::Slow, f);
    match i.op {
        sopp::WAITCNT | sopp::WAIT_IDLE => Fast::Wait,
        op if sopp_is_no_op(op) => Fast::Nop,
        sopp::ENDPGM => Fast::Endpgm,
        sopp::BRANCH => branch(Fast::Branch),
        sopp::CBRANCH_SCC0 => branch(Fast::CbranchScc0),
        sopp::CBRANCH_SCC1 => branch(Fast::CbranchScc1),
        sopp::CBRANCH_VCCZ => branch(Fast::CbranchVccz),
        sopp::CBRANCH_VCCNZ => branch(Fast::CbranchVccnz),
        sopp::CBRANCH_EXECZ => branch(Fast::CbranchExecz),
        sopp::CBRANCH_EXECNZ => branch(Fast::CbranchExecnz),
        sopp::BARRIER => Fast::Barrier,
        _ => Fast::Slow,
    }
}

/// Resolves the first `n` sources of `i` as `tys` and its destination (`rows` wide); float
/// sources (`float`) get their abs/neg masks, integer ones none.
fn vf(i: &Inst, tys: [Ty; 3], n: usize, rows: usize, float: bool) -> Option<Vf> {
    if i.dst < VGPR0 || (i.dst - VGPR0) as usize + rows > DPP_ROW {
        return None;
    }
    let mut v = vf_srcs(i, tys, n, float)?;
    v.d = (i.dst - VGPR0) as u32 * 64;
    Some(v)
}

/// The sources of [`vf`], without a destination.
fn vf_srcs(i: &Inst, tys: [Ty; 3], n: usize, float: bool) -> Option<Vf> {
    if i.dpp != Dpp::None {
        return None;
    }
    let mut s = [Opnd::Const(0); 3];
    let mut m = [(u32::MAX, 0u32); 3];
    for k in 0..n {
        s[k] = opnd(i.src[k], i.literal, tys[k])?;
        if float {
            if i.abs >> k & 1 != 0 && i.enc != Encoding::Vop3sd {
                m[k].0 = !(1 << 31);
            }
            if i.neg >> k & 1 != 0 {
                m[k].1 = 1 << 31;
            }
        }
    }
    Some(Vf {
        s,
        m,
        d: 0,
        sd: i.sdst,
    })
}

fn cmp_form(i: &Inst) -> Option<Fast> {
    let c = cmp_info(i.op)?;
    // f32, i32 and u32 comparisons, `v_cmpx` among them (which `finish_compare` writes to
    // EXEC, as in the general path).
    if c.class || !matches!(c.ty, 1 | 4 | 7) {
        return None;
    }
    let mut v = vf_srcs(i, [Ty::B32; 3], 2, c.ty == 1)?;
    v.sd = cmp_dst(i);
    Some(Fast::Cmp(v, c))
}

fn valu_form(i: &Inst) -> Option<Fast> {
    use valu::*;
    const B: [Ty; 3] = [Ty::B32; 3];
    // An integer op's clamp bit saturates its result (LLVM's `usub.sat` and kin): the
    // general path's.
    let int = |n: usize| if i.clamp { None } else { vf(i, B, n, 1, false) };
    let plain = i.omod == 0 && !i.clamp;
    let float = |n: usize| if plain { vf(i, B, n, 1, true) } else { None };
    Some(match i.op {
        MOV_B32 => Fast::MovB32(int(1)?),
        ADD_NC_U32 => Fast::AddU32(int(2)?),
        SUB_NC_U32 => Fast::SubU32(int(2)?),
        SUBREV_NC_U32 => Fast::SubrevU32(int(2)?),
        AND_B32 => Fast::AndB32(int(2)?),
        OR_B32 => Fast::OrB32(int(2)?),
        XOR_B32 => Fast::XorB32(int(2)?),
        LSHLREV_B32 => Fast::LshlrevB32(int(2)?),
        LSHRREV_B32 => Fast::LshrrevB32(int(2)?),
        ASHRREV_I32 => Fast::AshrrevI32(int(2)?),
        MUL_LO_U32 => Fast::MulLoU32(int(2)?),
        MUL_HI_U32 => Fast::MulHiU32(int(2)?),
        MUL_U32_U24 => Fast::MulU32U24(int(2)?),
        ADD3_U32 => Fast::Add3U32(int(3)?),
        LSHL_OR_B32 => Fast::LshlOrB32(int(3)?),
        LSHL_ADD_U32 => Fast::LshlAddU32(int(3)?),
        AND_OR_B32 => Fast::AndOrB32(int(3)?),
        OR3_B32 => Fast::Or3B32(int(3)?),
        XOR3_B32 => Fast::Xor3B32(int(3)?),
        CVT_F32_U32 => Fast::CvtF32U32(int(1)?),
        NOT_B32 => Fast::NotB32(int(1)?),
        MIN_I32 => Fast::MinI32(int(2)?),
        MAX_I32 => Fast::MaxI32(int(2)?),
        MIN_U32 => Fast::MinU32(int(2)?),
        MAX_U32 => Fast::MaxU32(int(2)?),
        BFI_B32 => Fast::BfiB32(int(3)?),
        BFE_U32 => Fast::BfeU32(int(3)?),
        CVT_F32_I32 => Fast::CvtF32I32(int(1)?),
        // The general path ignores output modifiers here; so does the form.
        CVT_U32_F32 => Fast::CvtU32F32(vf(i, B, 1, 1, true)?),
        LDEXP_F32 if plain => {
            let mut v = vf(i, B, 2, 1, true)?;
            // The exponent is an integer source: no sign modifiers.
            v.m[1] = (u32::MAX, 0);
            Fast::LdexpF32(v)
        }
        RCP_F32 | RCP_IFLAG_F32 => Fast::RcpF32(float(1)?),
        SQRT_F32 => Fast::SqrtF32(float(1)?),
        EXP_F32 => Fast::ExpF32(float(1)?),
        LOG_F32 => Fast::LogF32(float(1)?),
        FLOOR_F32 => Fast::FloorF32(float(1)?),
        TRUNC_F32 => Fast::TruncF32(float(1)?),
        RNDNE_F32 => Fast::RndneF32(float(1)?),
        FRACT_F32 => Fast::FractF32(float(1)?),
        ADD_F32 => Fast::AddF32(float(2)?),
        SUB_F32 => Fast::SubF32(float(2)?),
        SUBREV_F32 => Fast::SubrevF32(float(2)?),
        MUL_F32 => Fast::MulF32(float(2)?),
        FMA_F32 => Fast::FmaF32(float(3)?),
        FMAC_F32 => {
            // c is the destination; its modifiers are not those of a third source.
            let mut j = *i;
            j.src[2] = i.dst;
            j.neg &= 3;
            j.abs &= 3;
            Fast::FmaF32(if plain { vf(&j, B, 3, 1, true)? } else { None? })
        }
        FMAMK_F32 | FMAAK_F32 => {
            let mut v = float(2)?;
            let k = Opnd::Const(i.literal as u64);
            if i.op == FMAMK_F32 {
                v.s = [v.s[0], k, v.s[1]];
                v.m = [v.m[0], (u32::MAX, 0), v.m[1]];
            } else {
                v.s[2] = k;
                v.m[2] = (u32::MAX, 0);
            }
            Fast::FmaF32(v)
        }
        CNDMASK_B32 => {
            let mut v = vf(i, [Ty::B32; 3], 2, 1, true)?;
            // The lane mask: VCC in the 32-bit encoding, else the third operand (an SGPR).
            v.sd = if i.enc == Encoding::Vop2 {
                VCC_LO
            } else {
                i.src[2]
            };
            if v.sd >= 127 {
                return None;
            }
            Fast::CndmaskB32(v)
        }
        CVT_I32_F32 => Fast::CvtI32F32(vf(i, B, 1, 1, true)?),
        LSHLREV_B64 => Fast::LshlrevB64(vf(i, [Ty::B32, Ty::I64, Ty::B32], 2, 2, false)?),
        LSHRREV_B64 => Fast::LshrrevB64(vf(i, [Ty::B32, Ty::I64, Ty::B32], 2, 2, false)?),
        MAD_U64_U32 => Fast::MadU64U32(vf(i, [Ty::B32, Ty::B32, Ty::I64], 3, 2, false)?),
        ADD_CO_U32 | SUB_CO_U32 | SUBREV_CO_U32 | ADD_CO_CI_U32 | SUB_CO_CI_U32
        | SUBREV_CO_CI_U32 => {
            // As `valu_op`: the 32-bit encoding's carry-out and carry-in are VCC, the
            // 64-bit one's are its SDST and third source.
            let mut v = int(2)?;
            let vop2 = i.enc == Encoding::Vop2;
            v.sd = if vop2 { VCC_LO } else { i.sdst };
            let cin = match i.op {
                ADD_CO_U32 | SUB_CO_U32 | SUBREV_CO_U32 => NO_CARRY_IN,
                _ if vop2 => VCC_LO,
                _ if i.src[2] < 127 => i.src[2],
                _ => return None,
            };
            let op = match i.op {
                ADD_CO_U32 | ADD_CO_CI_U32 => CarryOp::Add,
                SUB_CO_U32 | SUB_CO_CI_U32 => CarryOp::Sub,
                _ => CarryOp::Subrev,
            };
            Fast::Carry(v, op, cin)
        }
        _ => return None,
    })
}

/// The form of a GLOBAL load or store of whole dwords whose registers all lie in the
/// register file (as the general path's row copies need).
fn global_form(i: &Inst) -> Option<Fast> {
    use super::opcodes::flat;
    let (dwords, load) = match i.op {
        flat::LOAD_B32 => (1, true),
        flat::LOAD_B64 => (2, true),
        flat::LOAD_B96 => (3, true),
        flat::LOAD_B128 => (4, true),
        flat::STORE_B32 => (1, false),
        flat::STORE_B64 => (2, false),
        flat::STORE_B96 => (3, false),
        flat::STORE_B128 => (4, false),
        _ => return global_atomic_form(i),
    };
    let saddr = match i.saddr {
        NULL => NO_SADDR,
        c if c < 106 => c as u8,
        _ => return None,
    };
    let vrow = (i.src[0].checked_sub(VGPR0)?) as usize;
    if vrow + usize::from(saddr == NO_SADDR) >= DPP_ROW {
        return None;
    }
    let data = if load { i.dst } else { i.src[1] };
    let drow = (data.checked_sub(VGPR0)?) as usize;
    if drow + dwords > DPP_ROW {
        return None;
    }
    let g = Gm {
        vaddr: (vrow * 64) as u32,
        data: (drow * 64) as u32,
        saddr,
        dwords: dwords as u8,
        imm: i.imm as i64 as u64,
    };
    Some(if load {
        Fast::GlobalLoad(g)
    } else {
        Fast::GlobalStore(g)
    })
}

/// The form of a scalar load (not a buffer load) whose base, offset and destination are
/// ordinary SGPRs (s0-s105), so its writes are plain stores into them.
fn smem_form(i: &Inst) -> Option<Fast> {
    use super::opcodes::smem;
    let dwords = match i.op {
        smem::LOAD_B32 => 1,
        smem::LOAD_B64 => 2,
        smem::LOAD_B128 => 4,
        smem::LOAD_B256 => 8,
        smem::LOAD_B512 => 16,
        _ => return None,
    };
    let soffset = match i.saddr {
        NULL => NO_SOFFSET,
        c if c < 106 => c as u8,
        _ => return None,
    };
    if i.src[0] >= 105 || i.dst as usize + dwords > 106 {
        return None;
    }
    Some(Fast::SLoad(Sm {
        base: i.src[0] as u8,
        soffset,
        dst: i.dst as u8,
        dwords: dwords as u8,
        imm: i.imm as i64 as u64,
    }))
}

/// A scalar load from a piece of `mem` that holds its dwords in one slice
/// ([`crate::Memory::contiguous`]), straight into the SGPRs, or from a memory whose failed
/// reads may be made again ([`crate::Memory::repeatable`]); false, having done nothing, otherwise or when the read faults (the
/// general path then reads, or reports the fault).
#[inline(always)]
pub(crate) fn scalar_load(w: &mut Wave, m: &Sm, mem: &mut dyn crate::Memory) -> bool {
    let b = m.base as usize;
    let soff = if m.soffset == NO_SOFFSET {
        0
    } else {
        w.s[m.soffset as usize] as u64
    };
    let base = w.s[b] as u64 | (w.s[b + 1] as u64) << 32;
    let addr = base.wrapping_add(m.imm).wrapping_add(soff) & !3;
    let n = m.dwords as usize;
    let d = m.dst as usize;
    if let Some(bytes) = mem.contiguous(addr, 4 * n) {
        for (s, c) in w.s[d..d + n].iter_mut().zip(bytes.chunks_exact(4)) {
            *s = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        }
        return true;
    }
    // A memory without slices whose failed reads may be made again (the threads' shared
    // memory, the mock's): one `read` through a staging buffer, the read the general path
    // makes; a fault goes to the general path, which reads again and reports it.
    let mut staged = [0u8; 64];
    let Some(b) = staged.get_mut(..4 * n) else {
        return false;
    };
    if !mem.repeatable() || mem.read(addr, b).is_err() {
        return false;
    }
    for (s, c) in w.s[d..d + n].iter_mut().zip(b.chunks_exact(4)) {
        *s = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
    }
    true
}

/// A GLOBAL dword load or store of a full wave whose lanes address consecutive
/// `4 * dwords`-byte elements in one piece of `mem` ([`crate::Memory::contiguous`]): the
/// bytes move between memory and the register rows directly, as the general path's
/// coalescer does for such a wave. Returns false, having done nothing, for any other wave
/// (the general path then runs the instruction). The lanes' addresses are checked on
/// their 32-bit halves, eight lanes per AVX2 operation: consecutive low dwords that do not
/// carry into the high dword, and one high dword (or the SADDR base) for all. Over a memory
/// without slices the bytes go through `staging` (the core's buffer, 1 KiB: a wave of 64
/// lanes of 16 bytes).
#[inline(always)]
pub(crate) fn global_dwords(
    w: &mut Wave,
    g: &Gm,
    mem: &mut dyn crate::Memory,
    staging: &mut [u8],
    load: bool,
) -> bool {
    if w.lanes == 64 {
        global_lanes::<64>(w, g, mem, staging, load)
    } else {
        global_lanes::<32>(w, g, mem, staging, load)
    }
}

#[inline(always)]
fn global_lanes<const L: usize>(
    w: &mut Wave,
    g: &Gm,
    mem: &mut dyn crate::Memory,
    staging: &mut [u8],
    load: bool,
) -> bool {
    let n = 4 * g.dwords as usize;
    let lo = row::<L>(&w.v, g.vaddr as usize);
    let lo0 = lo[0];
    if lo0 as usize + (L - 1) * n > u32::MAX as usize {
        return global_runs::<L>(w, g, mem, staging, load);
    }
    let mut off = 0u32;
    for (l, &a) in lo.iter().enumerate() {
        off |= a ^ lo0.wrapping_add((l * n) as u32);
    }
    let base = if g.saddr == NO_SADDR {
        let hi = row::<L>(&w.v, g.vaddr as usize + 64);
        let hi0 = hi[0];
        for &h in hi {
            off |= h ^ hi0;
        }
        lo0 as u64 | (hi0 as u64) << 32
    } else {
        let c = g.saddr as usize;
        (w.s[c] as u64 | (w.s[c + 1] as u64) << 32).wrapping_add(lo0 as u64)
    };
    if off != 0 {
        return global_runs::<L>(w, g, mem, staging, load);
    }
    let addr = base.wrapping_add(g.imm);
    let d = g.data as usize;
    if let Some(m) = mem.contiguous(addr, L * n) {
        if load {
            dwords_to_rows(&mut w.v, d / 64, 0, L, n, m);
        } else {
            rows_to_dwords(&w.v, d, 0, L, n, m);
        }
        return true;
    }
    // A memory without slices whose failed accesses may be made again
    // ([`crate::Memory::repeatable`]): one `read` or `write` of the wave's bytes through the
    // staging buffer (the core's, which is not cleared for each access as a local array
    // would be: every byte used is written first). That is the general path's first access
    // for this wave (its coalescer's one run), which it makes again after a failure here.
    if !mem.repeatable() {
        return false;
    }
    let Some(b) = staging.get_mut(..L * n) else {
        return false;
    };
    if load {
        if mem.read(addr, b).is_err() {
            return false;
        }
        dwords_to_rows(&mut w.v, d / 64, 0, L, n, b);
    } else {
        rows_to_dwords(&w.v, d, 0, L, n, b);
        if mem.write(addr, b).is_err() {
            return false;
        }
    }
    true
}

/// Lanes per run of [`global_runs`]: a row of a 16-wide tile.
const RUN: usize = 16;

/// [`global_lanes`] for a wave whose lanes form runs of [`RUN`] lanes, each run at
/// consecutive elements (rows of a tile), all runs inside one piece of `mem`: each run's
/// bytes move between memory and its lanes' register rows directly, in lane order (so
/// stores to overlapping runs leave what the general path leaves). The lanes' low address
/// dwords must not carry into the high dword within a run, and all lanes share one high
/// dword (or the SADDR base). Returns false, having done nothing, for any other wave.
#[inline(always)]
fn global_runs<const L: usize>(
    w: &mut Wave,
    g: &Gm,
    mem: &mut dyn crate::Memory,
    staging: &mut [u8],
    load: bool,
) -> bool {
    let n = 4 * g.dwords as usize;
    let lo = row::<L>(&w.v, g.vaddr as usize);
    // The low dword of each run's first lane (at most 64 / RUN runs).
    let mut starts = [0u32; 64 / RUN];
    let mut off = 0u32;
    for (r, run) in lo.chunks_exact(RUN).enumerate() {
        let s = run[0];
        starts[r] = s;
        for (k, &a) in run.iter().enumerate() {
            off |= a ^ s.wrapping_add((k * n) as u32);
        }
    }
    let starts = &starts[..L / RUN];
    let (mut first, mut last) = (u32::MAX, 0u32);
    for &s in starts {
        first = first.min(s);
        last = last.max(s);
    }
    if last as usize + (RUN - 1) * n > u32::MAX as usize {
        return false;
    }
    // Lane l's address is `base + lo[l]` (wrapping), as the general path computes it.
    let base = if g.saddr == NO_SADDR {
        let hi = row::<L>(&w.v, g.vaddr as usize + 64);
        let hi0 = hi[0];
        for &h in hi {
            off |= h ^ hi0;
        }
        ((hi0 as u64) << 32).wrapping_add(g.imm)
    } else {
        let c = g.saddr as usize;
        (w.s[c] as u64 | (w.s[c + 1] as u64) << 32).wrapping_add(g.imm)
    };
    if off != 0 {
        return false;
    }
    // The span from the lowest run to the end of the highest, not wrapping around.
    let lowest = base.wrapping_add(first as u64);
    let span = (last - first) as usize + RUN * n;
    if lowest.checked_add(span as u64).is_none() {
        return false;
    }
    let d = g.data as usize;
    let Some(m) = mem.contiguous(lowest, span) else {
        return load && staged_runs::<L>(w, d, starts, base, n, mem, staging);
    };
    for (r, &s) in starts.iter().enumerate() {
        let o = (s - first) as usize;
        let Some(b) = m.get_mut(o..o + RUN * n) else {
            return false;
        };
        if load {
            dwords_to_rows(&mut w.v, d / 64, r * RUN, (r + 1) * RUN, n, b);
        } else {
            rows_to_dwords(&w.v, d, r * RUN, (r + 1) * RUN, n, b);
        }
    }
    true
}

/// [`global_runs`]' load from a memory without slices whose accesses are all or nothing
/// ([`crate::Memory::all_or_nothing`]): each run's bytes are read into a staging buffer
/// (one `read` per run), and only when every read succeeded do they go to the registers.
/// Returns false, having changed nothing, otherwise.
#[inline(always)]
fn staged_runs<const L: usize>(
    w: &mut Wave,
    d: usize,
    starts: &[u32],
    base: u64,
    n: usize,
    mem: &mut dyn crate::Memory,
    staging: &mut [u8],
) -> bool {
    if !mem.all_or_nothing() {
        return false;
    }
    let Some(b) = staging.get_mut(..L * n) else {
        return false;
    };
    for (run, &s) in b.chunks_exact_mut(RUN * n).zip(starts) {
        if mem.read(base.wrapping_add(s as u64), run).is_err() {
            return false;
        }
    }
    for (r, run) in b.chunks_exact(RUN * n).enumerate() {
        dwords_to_rows(&mut w.v, d / 64, r * RUN, (r + 1) * RUN, n, run);
    }
    true
}

/// The form of a GLOBAL 32-bit integer atomic whose registers all lie in the register file.
fn global_atomic_form(i: &Inst) -> Option<Fast> {
    let atom = super::exec::atomic_kind(i)?;
    let op = match atom.names() {
        ("add", "u32") => Atomic32::Add,
        ("sub", "u32") => Atomic32::Sub,
        ("and", "b32") => Atomic32::And,
        ("or", "b32") => Atomic32::Or,
        ("xor", "b32") => Atomic32::Xor,
        ("swap", "b32") => Atomic32::Swap,
        ("min", "u32") => Atomic32::MinU,
        ("max", "u32") => Atomic32::MaxU,
        ("min", "i32") => Atomic32::MinI,
        ("max", "i32") => Atomic32::MaxI,
        _ => return None,
    };
    let saddr = match i.saddr {
        NULL => NO_SADDR,
        c if c < 106 => c as u8,
        _ => return None,
    };
    let vrow = (i.src[0].checked_sub(VGPR0)?) as usize;
    if vrow + usize::from(saddr == NO_SADDR) >= DPP_ROW {
        return None;
    }
    let drow = (i.src[1].checked_sub(VGPR0)?) as usize;
    if drow >= DPP_ROW {
        return None;
    }
    let dst = if i.flags & flag::GLC != 0 {
        let r = (i.dst.checked_sub(VGPR0)?) as usize;
        if r >= DPP_ROW {
            return None;
        }
        (r * 64) as u32
    } else {
        NO_RETURN
    };
    Some(Fast::GlobalAtomic(Ga {
        vaddr: (vrow * 64) as u32,
        data: (drow * 64) as u32,
        dst,
        saddr,
        op,
        imm: i.imm as i64 as u64,
    }))
}

/// A GLOBAL 32-bit integer atomic of a full wave whose lanes' values all lie in one piece of
/// `mem` ([`crate::Memory::contiguous`]), or that `mem` takes as one
/// [`crate::Memory::atomic32_lanes`]: the values are replaced in lane order, as
/// `atomic_rmw_batch` replaces them, and with GLC the old values go to the destination row.
/// Returns false, having done nothing, when neither applies (the general path then runs the
/// atomics, or reports the fault). Out of line: a wave's atomics cost far more than a call,
/// and inlined into the run loop they changed how the loop's other forms compiled (3.5 more
/// host instructions per wave-instruction on gfx942 `fmath`, which has no atomics). Built for
/// AVX2 too, as the run loop is (the baseline build took 50 more per wave-instruction on
/// gfx942 `histogram`).
#[cfg_attr(not(test), multiversion::multiversion(targets("x86_64+avx2+fma")))]
pub(crate) fn global_atomic(w: &mut Wave, a: &Ga, mem: &mut dyn crate::Memory) -> bool {
    if w.lanes == 64 {
        atomic_lanes::<64>(w, a, mem)
    } else {
        atomic_lanes::<32>(w, a, mem)
    }
}

#[inline(always)]
fn atomic_lanes<const L: usize>(w: &mut Wave, a: &Ga, mem: &mut dyn crate::Memory) -> bool {
    let lo = row::<L>(&w.v, a.vaddr as usize);
    let mut addrs = [0u64; L];
    if a.saddr == NO_SADDR {
        let hi = row::<L>(&w.v, a.vaddr as usize + 64);
        for ((x, &l), &h) in addrs.iter_mut().zip(lo).zip(hi) {
            *x = (l as u64 | (h as u64) << 32).wrapping_add(a.imm);
        }
    } else {
        let c = a.saddr as usize;
        let base = (w.s[c] as u64 | (w.s[c + 1] as u64) << 32).wrapping_add(a.imm);
        for (x, &l) in addrs.iter_mut().zip(lo) {
            *x = base.wrapping_add(l as u64);
        }
    }
    let (first, last) = crate::interp::memory::address_bounds(&addrs);
    let Some(span) = usize::try_from(last - first)
        .ok()
        .and_then(|s| s.checked_add(4))
    else {
        return false;
    };
    if first.checked_add(span as u64).is_none() {
        return false;
    }
    let xs = row::<L>(&w.v, a.data as usize);
    let mut olds = [0u32; L];
    match mem.contiguous(first, span) {
        // One loop per operation, each with its operation inlined.
        Some(m) => {
            macro_rules! by_op {
                ($($op:ident),*) => {
                    match a.op {
                        $(Atomic32::$op => rmw_lanes(m, first, &addrs, xs, &mut olds, |o, x| {
                            Atomic32::$op.apply(o, x)
                        }),)*
                    }
                };
            }
            by_op!(Add, Sub, And, Or, Xor, Swap, MinU, MaxU, MinI, MaxI);
        }
        // A memory without slices (the threads' shared memory) may hold atomics without
        // return until the wave waits for them, or take the wave at once.
        None => {
            if a.dst == NO_RETURN && mem.post_atomic32(a.op, &addrs, xs) {
                w.posted = true;
                return true;
            }
            if !mem.atomic32_lanes(a.op, &addrs, xs, &mut olds) {
                return false;
            }
        }
    }
    if a.dst != NO_RETURN {
        set_row::<L>(&mut w.v, a.dst as usize, &olds);
    }
    true
}

/// Lane by lane in order, the 4-byte value at `addrs[l]` (inside `m`, which starts at
/// address `first`) becomes `f(old, xs[l])`, and `olds[l]` receives `old`.
#[inline(always)]
fn rmw_lanes<const L: usize>(
    m: &mut [u8],
    first: u64,
    addrs: &[u64; L],
    xs: &[u32; L],
    olds: &mut [u32; L],
    f: impl Fn(u32, u32) -> u32,
) {
    // Aligned values (the usual case): the lanes' offsets as 32-bit numbers, computed and
    // checked in vector operations, then one dword index per lane.
    if first.is_multiple_of(4) && m.len() <= u32::MAX as usize {
        let mut rel = [0u32; L];
        let mut misaligned = 0;
        for (r, &a) in rel.iter_mut().zip(addrs) {
            *r = a.wrapping_sub(first) as u32;
            misaligned |= *r;
        }
        if misaligned % 4 == 0 {
            let (words, _) = m.as_chunks_mut::<4>();
            for ((&r, &x), old) in rel.iter().zip(xs).zip(olds.iter_mut()) {
                if let Some(v) = words.get_mut((r / 4) as usize) {
                    let prev = u32::from_le_bytes(*v);
                    *v = f(prev, x).to_le_bytes();
                    *old = prev;
                }
            }
            return;
        }
    }
    for ((&a, &x), old) in addrs.iter().zip(xs).zip(olds.iter_mut()) {
        let o = (a - first) as usize;
        if let Some(v) = m.get_mut(o..).and_then(|s| s.first_chunk_mut::<4>()) {
            let prev = u32::from_le_bytes(*v);
            *v = f(prev, x).to_le_bytes();
            *old = prev;
        }
    }
}

/// The form of a dword LDS load or store (not GDS) whose registers are all inside the
/// register file; the offsets as `ds_op` computes them.
fn ds_form(i: &Inst) -> Option<Fast> {
    use super::opcodes::ds;
    if i.flags & flag::GDS != 0 {
        return None;
    }
    let reg = |code: u16| code.checked_sub(VGPR0).map(u32::from);
    let off = i.imm as u32 | (i.imm2 as u32) << 8;
    // (load, dwords per access, two-address stride in accesses: 0 for the plain forms)
    let (load, words, stride) = match i.op {
        ds::LOAD_B32 => (true, 1, 0),
        ds::LOAD_B64 => (true, 2, 0),
        ds::LOAD_B96 => (true, 3, 0),
        ds::LOAD_B128 => (true, 4, 0),
        ds::STORE_B32 => (false, 1, 0),
        ds::STORE_B64 => (false, 2, 0),
        ds::STORE_B96 => (false, 3, 0),
        ds::STORE_B128 => (false, 4, 0),
        ds::LOAD_2ADDR_B32 => (true, 1, 1),
        ds::LOAD_2ADDR_STRIDE64_B32 => (true, 1, 64),
        ds::LOAD_2ADDR_B64 => (true, 2, 1),
        ds::LOAD_2ADDR_STRIDE64_B64 => (true, 2, 64),
        ds::STORE_2ADDR_B32 => (false, 1, 1),
        ds::STORE_2ADDR_STRIDE64_B32 => (false, 1, 64),
        ds::STORE_2ADDR_B64 => (false, 2, 1),
        ds::STORE_2ADDR_STRIDE64_B64 => (false, 2, 64),
        _ => return None,
    };
    let halves = if stride == 0 { 1 } else { 2 };
    let offs = if stride == 0 {
        [off; 2]
    } else {
        let size = 4 * words * stride;
        [i.imm as u32 * size, i.imm2 as u32 * size]
    };
    let addr = reg(i.src[0]).filter(|&r| (r as usize) < DPP_ROW)?;
    let rows = DPP_ROW as u32;
    let mut d = Ds {
        addr: addr * 64,
        offs,
        halves,
        words: words as u8,
        dst: 0,
        data: [0; 2],
    };
    if load {
        d.dst = reg(i.dst).filter(|&r| r + halves as u32 * words <= rows)?;
        return Some(Fast::DsLoad(d));
    }
    for h in 0..halves as usize {
        let r = reg(i.src[1 + h]).filter(|&r| r + words <= rows)?;
        d.data[h] = r * 64;
    }
    if halves == 1 {
        d.data[1] = d.data[0];
    }
    Some(Fast::DsStore(d))
}

/// A scalar ALU form: the general path's `sop2_op`, `sop1_op`, `sopc_op` and `sopk_op`
/// semantics with the operands resolved (SCC from the closures; `None` leaves it). Not inlined
/// into the run loop: its forty small arms there made LLVM compile the run loop's vector forms
/// worse (gfx1100's `int64` 13 % slower), and a call costs little beside the general path.
#[inline(never)]
pub(crate) fn salu(w: &mut Wave, s: &Sf, op: Salu) -> Result<(), Error> {
    match op {
        Salu::MovB32 => s32(w, s, |a, _| (a, None)),
        Salu::MovB64 => s64(w, s, |a, _| (a, None)),
        Salu::AddU32 => s32(w, s, |a, b| {
            let (r, c) = a.overflowing_add(b);
            (r, Some(c))
        }),
        Salu::SubU32 => s32(w, s, |a, b| {
            let (r, c) = a.overflowing_sub(b);
            (r, Some(c))
        }),
        Salu::AddI32 => s32(w, s, |a, b| {
            let (r, o) = (a as i32).overflowing_add(b as i32);
            (r as u32, Some(o))
        }),
        Salu::SubI32 => s32(w, s, |a, b| {
            let (r, o) = (a as i32).overflowing_sub(b as i32);
            (r as u32, Some(o))
        }),
        Salu::AddcU32 => {
            let c = w.scc as u64;
            s32(w, s, |a, b| {
                let x = a as u64 + b as u64 + c;
                (x as u32, Some(x >> 32 != 0))
            })
        }
        Salu::SubbU32 => {
            let c = w.scc as u64;
            s32(w, s, |a, b| {
                let x = (a as u64).wrapping_sub(b as u64).wrapping_sub(c);
                (x as u32, Some(b as u64 + c > a as u64))
            })
        }
        Salu::MulI32 => s32(w, s, |a, b| {
            ((a as i32).wrapping_mul(b as i32) as u32, None)
        }),
        Salu::MulHiU32 => s32(w, s, |a, b| (((a as u64 * b as u64) >> 32) as u32, None)),
        Salu::LshlB32 => s32(w, s, |a, b| nz32(a << (b & 31))),
        Salu::LshrB32 => s32(w, s, |a, b| nz32(a >> (b & 31))),
        Salu::AshrI32 => s32(w, s, |a, b| nz32(((a as i32) >> (b & 31)) as u32)),
        Salu::AndB32 => s32(w, s, |a, b| nz32(a & b)),
        Salu::OrB32 => s32(w, s, |a, b| nz32(a | b)),
        Salu::XorB32 => s32(w, s, |a, b| nz32(a ^ b)),
        Salu::AndNot1B32 => s32(w, s, |a, b| nz32(a & !b)),
        Salu::OrNot1B32 => s32(w, s, |a, b| nz32(a | !b)),
        Salu::CselectB32 => {
            let c = w.scc;
            s32(w, s, |a, b| (if c { a } else { b }, None))
        }
        Salu::AndB64 => s64(w, s, |a, b| nz64(a & b)),
        Salu::OrB64 => s64(w, s, |a, b| nz64(a | b)),
        Salu::XorB64 => s64(w, s, |a, b| nz64(a ^ b)),
        Salu::AndNot1B64 => s64(w, s, |a, b| nz64(a & !b)),
        Salu::OrNot1B64 => s64(w, s, |a, b| nz64(a | !b)),
        Salu::LshlB64 => s64(w, s, |a, b| nz64(a << (b & 63))),
        Salu::LshrB64 => s64(w, s, |a, b| nz64(a >> (b & 63))),
        Salu::CselectB64 => {
            let c = w.scc;
            s64(w, s, |a, b| (if c { a } else { b }, Some(c)))
        }
        Salu::CmpEq => scmp(w, s, false, |a, b| a == b),
        Salu::CmpLg => scmp(w, s, false, |a, b| a != b),
        Salu::CmpGtI32 => scmp(w, s, false, |a, b| a as i32 > b as i32),
        Salu::CmpGeI32 => scmp(w, s, false, |a, b| a as i32 >= b as i32),
        Salu::CmpLtI32 => scmp(w, s, false, |a, b| (a as i32) < b as i32),
        Salu::CmpLeI32 => scmp(w, s, false, |a, b| a as i32 <= b as i32),
        Salu::CmpGtU32 => scmp(w, s, false, |a, b| a > b),
        Salu::CmpGeU32 => scmp(w, s, false, |a, b| a >= b),
        Salu::CmpLtU32 => scmp(w, s, false, |a, b| a < b),
        Salu::CmpLeU32 => scmp(w, s, false, |a, b| a <= b),
        Salu::CmpEqU64 => scmp(w, s, true, |a, b| a == b),
        Salu::CmpLgU64 => scmp(w, s, true, |a, b| a != b),
        Salu::Saveexec(kind, wide) => saveexec(w, s, kind, wide),
    }
}

/// A 32-bit scalar result and SCC set to "result is non-zero".
#[inline(always)]
fn nz32(r: u32) -> (u32, Option<bool>) {
    (r, Some(r != 0))
}

/// A 64-bit scalar result and SCC set to "result is non-zero".
#[inline(always)]
fn nz64(r: u64) -> (u64, Option<bool>) {
    (r, Some(r != 0))
}

/// A scalar form's source as 32 bits.
#[inline(always)]
fn sv(w: &Wave, o: Opnd) -> u32 {
    uniform(w, o, false).unwrap_or(0) as u32
}

/// A scalar form's source as 64 bits (an SGPR pair).
#[inline(always)]
fn sv64(w: &Wave, o: Opnd) -> u64 {
    uniform(w, o, true).unwrap_or(0)
}

/// A 32-bit scalar form: `f` of the two sources gives the result and SCC (`None`: unchanged).
#[inline(always)]
pub(crate) fn s32(
    w: &mut Wave,
    s: &Sf,
    f: impl Fn(u32, u32) -> (u32, Option<bool>),
) -> Result<(), Error> {
    let (r, scc) = f(sv(w, s.a), sv(w, s.b));
    w.s[s.d as usize & 127] = r;
    if let Some(c) = scc {
        w.scc = c;
    }
    Ok(())
}

/// A 64-bit scalar form: `f` of the two sources (pairs) gives the result and SCC.
#[inline(always)]
pub(crate) fn s64(
    w: &mut Wave,
    s: &Sf,
    f: impl Fn(u64, u64) -> (u64, Option<bool>),
) -> Result<(), Error> {
    let (r, scc) = f(sv64(w, s.a), sv64(w, s.b));
    let d = s.d as usize;
    w.s[d & 127] = r as u32;
    w.s[(d + 1) & 127] = (r >> 32) as u32;
    if let Some(c) = scc {
        w.scc = c;
    }
    Ok(())
}

/// A scalar comparison of two 32-bit sources (`wide`: 64-bit) into SCC.
#[inline(always)]
pub(crate) fn scmp(
    w: &mut Wave,
    s: &Sf,
    wide: bool,
    f: impl Fn(u64, u64) -> bool,
) -> Result<(), Error> {
    w.scc = if wide {
        f(sv64(w, s.a), sv64(w, s.b))
    } else {
        f(sv(w, s.a) as u64, sv(w, s.b) as u64)
    };
    Ok(())
}

/// `s_*_saveexec_*` through the general path's own [`super::exec::saveexec`].
#[inline(always)]
pub(crate) fn saveexec(w: &mut Wave, s: &Sf, kind: u8, wide: bool) -> Result<(), Error> {
    let x = if wide {
        sv64(w, s.a)
    } else {
        sv(w, s.a) as u64
    };
    super::exec::saveexec(w, x, s.d as u16, kind, wide);
    Ok(())
}

/// The value of a uniform source (`None` for a register row).
#[inline(always)]
fn uniform(w: &Wave, s: Opnd, wide: bool) -> Option<u64> {
    match s {
        Opnd::Row(_) => None,
        Opnd::Sgpr(c) => {
            let c = c as usize;
            Some(if wide {
                w.s[c] as u64 | (w.s[(c + 1) & 127] as u64) << 32
            } else {
                w.s[c] as u64
            })
        }
        Opnd::Const(c) => Some(c),
    }
}

/// The row bases of the first `N` sources of `v`, uniform ones broadcast into the staging
/// rows (two per source, the high half of 64-bit ones in the second) as the general path does.
#[inline(always)]
fn stage<const N: usize>(w: &mut Wave, v: &Vf, wide: [bool; 3]) -> [usize; 3] {
    let mut r = [0usize; 3];
    for k in 0..N {
        let Some(c) = uniform(w, v.s[k], wide[k]) else {
            if let Opnd::Row(b) = v.s[k] {
                r[k] = b as usize;
            }
            continue;
        };
        let row = (CONST_ROW + 2 * k) * 64;
        set_row::<64>(&mut w.v, row, &[c as u32; 64]);
        if wide[k] {
            set_row::<64>(&mut w.v, row + 64, &[(c >> 32) as u32; 64]);
        }
        r[k] = row;
    }
    r
}

/// All `L` lanes of a two-source 32-bit operation into row base `d`; a source whose `U*` is
/// set is the uniform `k*` (no broadcast row), otherwise the row at `r*`.
#[inline(always)]
fn lanes2<const L: usize, const UA: bool, const UB: bool>(
    w: &mut Wave,
    (ra, ka): (usize, u32),
    (rb, kb): (usize, u32),
    d: usize,
    f: &impl Fn([u32; 2]) -> u32,
) {
    let mut out = [0u32; L];
    {
        let (a, b) = (row::<L>(&w.v, ra), row::<L>(&w.v, rb));
        for (l, o) in out.iter_mut().enumerate() {
            *o = f([if UA { ka } else { a[l] }, if UB { kb } else { b[l] }]);
        }
    }
    set_row(&mut w.v, d, &out);
}

/// All `L` lanes of an `N`-source 32-bit operation over rows `r` into row base `d`.
#[inline(always)]
fn lanes<const N: usize, const L: usize>(
    w: &mut Wave,
    r: &[usize; 3],
    d: usize,
    f: &impl Fn([u32; N]) -> u32,
) {
    let mut out = [0u32; L];
    {
        let srcs: [&[u32; L]; N] = std::array::from_fn(|k| row::<L>(&w.v, r[k]));
        for (l, o) in out.iter_mut().enumerate() {
            *o = f(arr(|k| srcs[k][l]));
        }
    }
    set_row(&mut w.v, d, &out);
}

/// A 32-bit form over all `L` lanes: two-source forms read a uniform source as a value,
/// others broadcast it into a staging row.
#[inline(always)]
fn u32_lanes<const N: usize, const L: usize>(w: &mut Wave, v: &Vf, f: &impl Fn([u32; N]) -> u32) {
    let d = v.d as usize;
    if N == 2 {
        let g = |x: [u32; 2]| f(arr(|k| x[k]));
        let (ua, ub) = (uniform(w, v.s[0], false), uniform(w, v.s[1], false));
        let row_of = |s: Opnd| if let Opnd::Row(b) = s { b as usize } else { 0 };
        let a = (row_of(v.s[0]), ua.unwrap_or(0) as u32);
        let b = (row_of(v.s[1]), ub.unwrap_or(0) as u32);
        match (ua.is_some(), ub.is_some()) {
            (false, false) => lanes2::<L, false, false>(w, a, b, d, &g),
            (true, false) => lanes2::<L, true, false>(w, a, b, d, &g),
            (false, true) => lanes2::<L, false, true>(w, a, b, d, &g),
            (true, true) => lanes2::<L, true, true>(w, a, b, d, &g),
        }
        return;
    }
    let r = stage::<N>(w, v, [false; 3]);
    lanes::<N, L>(w, &r, d, f);
}

/// A 32-bit integer form over all lanes.
#[inline(always)]
pub(crate) fn u32_op<const N: usize>(
    w: &mut Wave,
    v: &Vf,
    f: impl Fn([u32; N]) -> u32,
) -> Result<(), Error> {
    if w.lanes == 64 {
        u32_lanes::<N, 64>(w, v, &f);
    } else {
        u32_lanes::<N, 32>(w, v, &f);
    }
    Ok(())
}

/// An f32 form over all lanes (sign masks applied to the sources).
#[inline(always)]
pub(crate) fn f32_op<const N: usize>(
    w: &mut Wave,
    v: &Vf,
    f: impl Fn([f32; N]) -> f32,
) -> Result<(), Error> {
    if plain::<N>(v) {
        return u32_op::<N>(w, v, |x| f(arr(|k| f32::from_bits(x[k]))).to_bits());
    }
    let m = v.m;
    u32_op::<N>(w, v, |x| {
        f(arr(|k| f32::from_bits((x[k] & m[k].0) ^ m[k].1))).to_bits()
    })
}

/// No sign mask on the first `N` sources (no abs or neg modifier).
const PLAIN: (u32, u32) = (u32::MAX, 0);

/// Whether the first `N` sources of `v` have no sign modifier, so that a form can run its
/// loop with the masks known to do nothing (compiled out) instead of applying them per lane.
#[inline(always)]
fn plain<const N: usize>(v: &Vf) -> bool {
    v.m[..N].iter().all(|&m| m == PLAIN)
}

/// `v_exp_f32` over all lanes: the sign masks applied, then [`crate::interp::float::exp2_f32_row`],
/// which gives libm's bits as the general path does, a whole row at a time.
#[inline(always)]
pub(crate) fn exp_op(w: &mut Wave, v: &Vf) -> Result<(), Error> {
    let r = stage::<1>(w, v, [false; 3]);
    if w.lanes == 64 {
        exp_lanes::<64>(w, r[0], v.m[0], v.d as usize);
    } else {
        exp_lanes::<32>(w, r[0], v.m[0], v.d as usize);
    }
    Ok(())
}

#[inline(always)]
fn exp_lanes<const L: usize>(w: &mut Wave, src: usize, (and, xor): (u32, u32), d: usize) {
    let mut x = *row::<L>(&w.v, src);
    for b in x.iter_mut() {
        *b = (*b & and) ^ xor;
    }
    let out = crate::interp::float::exp2_f32_row(&x);
    set_row(&mut w.v, d, &out);
}

/// The f32 fused multiply-add over all lanes, one hardware FMA per lane (call only when
/// the CPU has FMA).
#[inline(always)]
pub(crate) fn fma_op(w: &mut Wave, v: &Vf) -> Result<(), Error> {
    let r = stage::<3>(w, v, [false; 3]);
    let d = v.d as usize;
    match (w.lanes == 64, plain::<3>(v)) {
        (true, true) => fma_rows_inline::<64>(w, r, [PLAIN; 3], d),
        (true, false) => fma_rows_inline::<64>(w, r, v.m, d),
        (false, true) => fma_rows_inline::<32>(w, r, [PLAIN; 3], d),
        (false, false) => fma_rows_inline::<32>(w, r, v.m, d),
    }
    Ok(())
}

/// A form computing from the sources' bits (sign masks applied) and the lane index.
#[inline(always)]
pub(crate) fn bits_op<const N: usize>(
    w: &mut Wave,
    v: &Vf,
    f: impl Fn(usize, [u32; N]) -> u32,
) -> Result<(), Error> {
    let r = stage::<N>(w, v, [false; 3]);
    let d = v.d as usize;
    match (w.lanes == 64, plain::<N>(v)) {
        (true, true) => bits_rows::<N, 64>(w, &r, [PLAIN; N], d, &f),
        (true, false) => bits_rows::<N, 64>(w, &r, std::array::from_fn(|k| v.m[k]), d, &f),
        (false, true) => bits_rows::<N, 32>(w, &r, [PLAIN; N], d, &f),
        (false, false) => bits_rows::<N, 32>(w, &r, std::array::from_fn(|k| v.m[k]), d, &f),
    }
    Ok(())
}

/// A 64-bit integer form (sources `wide` are 64-bit, the others zero-extended) with a 64-bit
/// result; returns the carry mask.
#[inline(always)]
pub(crate) fn u64_op<const N: usize>(
    w: &mut Wave,
    v: &Vf,
    wide: [bool; 3],
    f: impl Fn([u64; N]) -> (u64, bool),
) -> u64 {
    let r = stage::<N>(w, v, wide);
    if w.lanes == 64 {
        carry_rows::<N, 64>(w, &r, wide, v.d as usize, true, &f)
    } else {
        carry_rows::<N, 32>(w, &r, wide, v.d as usize, true, &f)
    }
}

/// `v_lshlrev_b64` (`LEFT`) or `v_lshrrev_b64` with a full EXEC: by a uniform shift through
/// [`u64_halves`], else [`u64_op`].
#[inline(always)]
pub(crate) fn shift_b64<const LEFT: bool>(w: &mut Wave, v: &Vf) {
    let (Some(a), Opnd::Row(src)) = (uniform(w, v.s[0], false), v.s[1]) else {
        u64_op(w, v, [false, true, false], |[a, b]| {
            (if LEFT { b << (a & 63) } else { b >> (a & 63) }, false)
        });
        return;
    };
    // A 32-bit source: the general path reads its low dword. The shift is done on the
    // dword halves (32-bit lane operations, which vectorize without widening), one loop per
    // case of the uniform shift.
    let sh = a as u32 & 63;
    let (src, d) = (src as usize, v.d as usize);
    macro_rules! halves {
        ($f:expr) => {
            if w.lanes == 64 {
                u64_halves::<64>(w, src, d, $f)
            } else {
                u64_halves::<32>(w, src, d, $f)
            }
        };
    }
    match (LEFT, sh) {
        (_, 0) => halves!(|lo, hi| (lo, hi)),
        (true, 1..32) => halves!(|lo, hi| (lo << sh, hi << sh | lo >> (32 - sh))),
        (true, _) => halves!(|lo, _| (0, lo << (sh - 32))),
        (false, 1..32) => halves!(|lo, hi| (lo >> sh | hi << (32 - sh), hi >> sh)),
        (false, _) => halves!(|_, hi| (hi >> (sh - 32), 0)),
    }
}

/// A 64-bit form whose one register source is the pair at row base `src` and whose other
/// sources are uniform (the address computations compilers emit: a 64-bit shift by a
/// constant, a pair plus an SGPR-pair base), computed on the dword halves of each lane:
/// `f(low, high)` gives the result's halves, as 32-bit lane operations that vectorise without
/// widening. Only the register pair is read per lane and nothing is broadcast into staging
/// rows; the lanes get the bits [`u64_op`] gives them.
#[inline(always)]
fn u64_halves<const L: usize>(
    w: &mut Wave,
    src: usize,
    d: usize,
    f: impl Fn(u32, u32) -> (u32, u32),
) {
    let (mut lo, mut hi) = ([0u32; L], [0u32; L]);
    {
        let (a, b) = (row::<L>(&w.v, src), row::<L>(&w.v, src + 64));
        for l in 0..L {
            (lo[l], hi[l]) = f(a[l], b[l]);
        }
    }
    set_row(&mut w.v, d, &lo);
    set_row(&mut w.v, d + 64, &hi);
}

/// `v_mad_u64_u32` with a full EXEC; returns the carry mask. With a uniform addend and one
/// uniform factor (the 32x32-to-64-bit multiplies compilers emit, `v_mad_u64_u32 v[2:3],
/// s[8:9], v2, s3, 0`) only the other factor's row is read per lane, and an addend of zero
/// has no carry to compute; any other shape goes through [`u64_op`].
#[inline(always)]
pub(crate) fn mad_u64_u32(w: &mut Wave, v: &Vf) -> u64 {
    // The factor read per lane and the uniform one, in either order.
    let (fa, fb) = match (v.s[0], v.s[1]) {
        (a @ Opnd::Row(_), b) => (a, b),
        (a, b) => (b, a),
    };
    let (Some(c), Opnd::Row(src), Some(k)) = (uniform(w, v.s[2], true), fa, uniform(w, fb, false))
    else {
        return u64_op(w, v, [false, false, true], |[a, b, c]| {
            (a * b).overflowing_add(c)
        });
    };
    // 32-bit factors: the general path reads their low dwords.
    let k = k & 0xffff_ffff;
    let (src, d) = (src as usize, v.d as usize);
    if c == 0 {
        let f = |lo: u32, _| {
            let x = lo as u64 * k;
            (x as u32, (x >> 32) as u32)
        };
        if w.lanes == 64 {
            u64_halves::<64>(w, src, d, f);
        } else {
            u64_halves::<32>(w, src, d, f);
        }
        return 0;
    }
    if w.lanes == 64 {
        mad_carry::<64>(w, src, d, k, c)
    } else {
        mad_carry::<32>(w, src, d, k, c)
    }
}

/// [`mad_u64_u32`] with a non-zero uniform addend `c`: the products of row `src` by `k`,
/// plus `c`, into the pair at `d`; returns the carry mask.
#[inline(always)]
fn mad_carry<const L: usize>(w: &mut Wave, src: usize, d: usize, k: u64, c: u64) -> u64 {
    let (mut lo, mut hi, mut carry) = ([0u32; L], [0u32; L], 0u64);
    {
        let a = row::<L>(&w.v, src);
        for l in 0..L {
            let (x, o) = (a[l] as u64 * k).overflowing_add(c);
            lo[l] = x as u32;
            hi[l] = (x >> 32) as u32;
            carry |= (o as u64) << l;
        }
    }
    set_row(&mut w.v, d, &lo);
    set_row(&mut w.v, d + 64, &hi);
    carry
}

/// `v_lshl_add_u64` of the register pair at row base `a` shifted left by `sh` (0 to 7), plus
/// the register pair at row base `c` or, with `CU`, the uniform `k`, into row base `d`; on
/// dword halves, as [`u64_halves`].
#[inline(always)]
fn shift_add_lanes<const L: usize, const CU: bool>(
    w: &mut Wave,
    a: usize,
    sh: u32,
    c: usize,
    k: u64,
    d: usize,
) {
    let (kl, kh) = (k as u32, (k >> 32) as u32);
    let (mut lo, mut hi) = ([0u32; L], [0u32; L]);
    {
        let (al, ah) = (row::<L>(&w.v, a), row::<L>(&w.v, a + 64));
        let (cl, ch) = (row::<L>(&w.v, c), row::<L>(&w.v, c + 64));
        for l in 0..L {
            // `(x >> 1) >> (31 - sh)` is `x >> (32 - sh)`, and 0 for a shift of 0.
            let (sl, shi) = (al[l] << sh, ah[l] << sh | (al[l] >> 1) >> (31 - sh));
            let (bl, bh) = if CU { (kl, kh) } else { (cl[l], ch[l]) };
            let x = sl.wrapping_add(bl);
            lo[l] = x;
            hi[l] = shi.wrapping_add(bh).wrapping_add((x < bl) as u32);
        }
    }
    set_row(&mut w.v, d, &lo);
    set_row(&mut w.v, d + 64, &hi);
}

/// A [`Fast::Carry`] form over all lanes: the results to the destination row, the carry-out
/// mask returned (each lane's carry, or borrow, as the general path computes it).
#[inline(always)]
pub(crate) fn carry_op(w: &mut Wave, v: &Vf, op: CarryOp, cin: u16) -> u64 {
    let ci = if cin == NO_CARRY_IN { 0 } else { w.mask(cin) };
    let r = stage::<2>(w, v, [false; 3]);
    let d = v.d as usize;
    // In 32-bit lane operations: the carry of `a + b + c` is that of either add, the borrow
    // of `a - b - c` is `b > a`, or `a - b` below `c`.
    macro_rules! go {
        ($l:literal) => {
            match op {
                CarryOp::Add => carry_lanes::<$l>(w, r, d, ci, |a, b, c| {
                    let s = a.wrapping_add(b);
                    let x = s.wrapping_add(c);
                    (x, (s < a) | (x < s))
                }),
                CarryOp::Sub => carry_lanes::<$l>(w, r, d, ci, |a, b, c| {
                    let s = a.wrapping_sub(b);
                    (s.wrapping_sub(c), (a < b) | (s < c))
                }),
                CarryOp::Subrev => carry_lanes::<$l>(w, r, d, ci, |a, b, c| {
                    let s = b.wrapping_sub(a);
                    (s.wrapping_sub(c), (b < a) | (s < c))
                }),
            }
        };
    }
    if w.lanes == 64 { go!(64) } else { go!(32) }
}

/// [`carry_op`]'s lanes: `f(a, b, carry_in)` gives a lane's result and carry.
#[inline(always)]
fn carry_lanes<const L: usize>(
    w: &mut Wave,
    r: [usize; 3],
    d: usize,
    ci: u64,
    f: impl Fn(u32, u32, u32) -> (u32, bool),
) -> u64 {
    let mut out = [0u32; L];
    let mut carry = [0u8; L];
    {
        let (a, b) = (row::<L>(&w.v, r[0]), row::<L>(&w.v, r[1]));
        for l in 0..L {
            let (x, c) = f(a[l], b[l], (ci >> l) as u32 & 1);
            out[l] = x;
            carry[l] = c as u8;
        }
    }
    set_row(&mut w.v, d, &out);
    pack_bits(&carry)
}

/// `v_lshl_add_u64` with a full EXEC: with a uniform shift and a register pair among the
/// sources, on dword halves ([`shift_add_lanes`], [`u64_halves`]), else [`u64_op`].
#[inline(always)]
pub(crate) fn lshl_add_u64(w: &mut Wave, v: &Vf) {
    if let (Opnd::Row(a), Some(b)) = (v.s[0], uniform(w, v.s[1], false)) {
        // A register pair shifted by a uniform amount, plus a register pair or a uniform.
        let (a, sh, d) = (a as usize, b as u32 & 7, v.d as usize);
        let (c, k) = match (v.s[2], uniform(w, v.s[2], true)) {
            (Opnd::Row(c), _) => (Some(c as usize), 0),
            (_, k) => (None, k.unwrap_or(0)),
        };
        match (w.lanes == 64, c) {
            (true, Some(c)) => shift_add_lanes::<64, false>(w, a, sh, c, 0, d),
            (true, None) => shift_add_lanes::<64, true>(w, a, sh, 0, k, d),
            (false, Some(c)) => shift_add_lanes::<32, false>(w, a, sh, c, 0, d),
            (false, None) => shift_add_lanes::<32, true>(w, a, sh, 0, k, d),
        }
        return;
    }
    let (Some(a), Some(b), Opnd::Row(src)) =
        (uniform(w, v.s[0], true), uniform(w, v.s[1], false), v.s[2])
    else {
        u64_op(w, v, [true, false, true], |[a, b, c]| {
            ((a << (b & 7)).wrapping_add(c), false)
        });
        return;
    };
    // A uniform base already shifted, added to a register pair: no shift per lane (the
    // `copy` kernels' addresses; through `shift_add_lanes` with a shift of 0 they cost 6 %
    // more host instructions).
    let base = a << (b as u32 & 7);
    let (src, d) = (src as usize, v.d as usize);
    let (bl, bh) = (base as u32, (base >> 32) as u32);
    let f = |lo: u32, hi: u32| {
        let l = lo.wrapping_add(bl);
        (l, hi.wrapping_add(bh).wrapping_add((l < bl) as u32))
    };
    if w.lanes == 64 {
        u64_halves::<64>(w, src, d, f);
    } else {
        u64_halves::<32>(w, src, d, f);
    }
}

/// A 32-bit comparison over all lanes; returns the lane mask.
#[inline(always)]
pub(crate) fn compare(w: &mut Wave, v: &Vf, c: CmpInfo) -> u64 {
    let r = stage::<2>(w, v, [false; 3]);
    let valu = Valu {
        r,
        m: v.m.map(|(a, x)| (a as u64, x as u64)),
        sh: [0; 3],
        exec: w.exec(),
    };
    let kind = if c.ty == 1 { K::F32 } else { K::I32 };
    compare_rows(w, &valu, kind, c)
}

/// How the lanes of one LDS address row fall into rows of 16 lanes (see `lds_dwords` in
/// `exec.rs`), kept per wave ([`Wave::lds_rows`]) so that an address row read by several LDS
/// instructions is classified once: gfx942's `matmul` reads each of its two address rows
/// with eight `ds_read2_b32` per loop iteration. An entry is keyed by the row's contents, the
/// EXEC and the wave size (not by the register), so a write to the row by any path simply
/// misses and nothing has to invalidate it; the register only picks the slot.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LdsRows {
    /// The address row's 64 lanes.
    pub addrs: [u32; 64],
    pub exec: u64,
    /// The wave size (0: an empty entry, which matches nothing).
    pub lanes: u32,
    /// The highest address of an active lane (0 with none).
    pub max: u32,
    /// Per row of 16 lanes: all active and at consecutive dwords (a row-major tile).
    pub seq: [bool; 4],
    /// Per row of 16 lanes: all active and at one address (a broadcast).
    pub same: [bool; 4],
}

/// Slots of [`Wave::lds_rows`], chosen by the address register's number.
pub(crate) const LDS_ROW_SLOTS: usize = 4;

impl LdsRows {
    pub(crate) const EMPTY: LdsRows = LdsRows {
        addrs: [0; 64],
        exec: 0,
        lanes: 0,
        max: 0,
        seq: [false; 4],
        same: [false; 4],
    };

    /// Classifies the address row `addrs` of a wave of `lanes` lanes under `exec`.
    #[inline(always)]
    pub(crate) fn new(addrs: &[u32; 64], exec: u64, lanes: u32) -> LdsRows {
        let n = lanes as usize;
        let max = if exec == full_mask(lanes) {
            addrs[..n].iter().fold(0, |m, &a| m.max(a))
        } else {
            let mut m = 0;
            for_lanes(exec, |l| m = m.max(addrs[l]));
            m
        };
        let (mut seq, mut same) = ([false; 4], [false; 4]);
        for g in 0..n / 16 {
            let row = &addrs[16 * g..16 * g + 16];
            // Each lane's difference from the expected address OR-ed together (a straight
            // loop that vectorises, where a chain of `&&` compares does not).
            let (mut s, mut u) = (0u32, 0u32);
            for (k, &a) in row.iter().enumerate() {
                s |= a ^ row[0].wrapping_add(4 * k as u32);
                u |= a ^ row[0];
            }
            let active = (exec >> (16 * g)) & 0xffff == 0xffff;
            seq[g] = active && s == 0;
            same[g] = active && u == 0;
        }
        LdsRows {
            addrs: *addrs,
            exec,
            lanes,
            max,
            seq,
            same,
        }
    }

    /// Whether this entry describes `addrs` under `exec` in a wave of `lanes` lanes.
    #[inline(always)]
    pub(crate) fn holds(&self, addrs: &[u32; 64], exec: u64, lanes: u32) -> bool {
        let d = self
            .addrs
            .iter()
            .zip(addrs)
            .fold(0, |m, (a, b)| m | (a ^ b));
        d == 0 && self.exec == exec && self.lanes == lanes
    }
}

#[cfg(test)]
mod tests {
    use super::{CarryOp, Fast, NO_CARRY_IN};
    use crate::interp::wave::{Ctx, Mode, Wave, WaveState};
    use crate::{HostMemory, Isa, Program};

    /// The program of `words` followed by `endpgm`, and the same program with every form
    /// turned off (the general path's reference).
    fn with_and_without_forms(words: &[u32], endpgm: u32, isa: Isa) -> (Program, Program) {
        let bytes: Vec<u8> = words
            .iter()
            .chain([&endpgm])
            .flat_map(|d| d.to_le_bytes())
            .collect();
        let fast = Program::from_bytes(&bytes, 0, isa).expect("program");
        let mut slow = fast.clone();
        slow.fast = vec![Fast::Slow; slow.fast.len()];
        (fast, slow)
    }

    /// Up to 60 random instructions (in at most `tries` draws) whose first dword has the
    /// encoding bits 31:26 of `encoding` and random other bits, and whose form `pick` takes:
    /// each as its dwords and what `pick` returned.
    fn random_with_form<T>(
        isa: Isa,
        encoding: u32,
        tries: usize,
        next: &mut impl FnMut() -> u64,
        pick: impl Fn(&Fast) -> Option<T>,
    ) -> Vec<(Vec<u32>, T)> {
        let mut found = vec![];
        for _ in 0..tries {
            if found.len() == 60 {
                break;
            }
            let w = [(next() as u32 & 0x03ff_ffff) | encoding, next() as u32, 0];
            let bytes: Vec<u8> = w.iter().flat_map(|d| d.to_le_bytes()).collect();
            let Ok(p) = Program::from_bytes(&bytes, 0, isa) else {
                continue;
            };
            if let (Some(t), Some(i)) = (p.fast.first().and_then(&pick), p.insts.first()) {
                found.push((w[..i.len as usize].to_vec(), t));
            }
        }
        found
    }

    /// A wave of `lanes` lanes with random VGPRs and random SGPRs s0 to s123.
    fn random_wave(isa: Isa, lanes: u32, next: &mut impl FnMut() -> u64) -> Wave {
        let mut w = Wave::new();
        (w.lanes, w.isa, w.state) = (lanes, isa, WaveState::Running);
        for r in w.v.iter_mut() {
            *r = next() as u32;
        }
        for s in w.s.iter_mut().take(124) {
            *s = next() as u32;
        }
        w
    }

    /// Sets up a GLOBAL instruction's addresses (address row, SADDR pair, offset) so that
    /// lane `l` reaches `at(l)`: the address row holds the 64-bit address less the offset,
    /// or with an SADDR pair the pair holds `base` and the row the 32-bit rest.
    fn set_addresses(
        w: &mut Wave,
        (vaddr, saddr, imm): (u32, u8, u64),
        base: u64,
        mut at: impl FnMut(u64) -> u64,
    ) {
        let vaddr = vaddr as usize;
        for l in 0..w.lanes as u64 {
            let at = at(l).wrapping_sub(imm);
            let v = if saddr == super::NO_SADDR {
                at
            } else {
                at - base
            };
            w.v[vaddr + l as usize] = v as u32;
            if saddr == super::NO_SADDR {
                w.v[vaddr + 64 + l as usize] = (v >> 32) as u32;
            }
        }
        if saddr != super::NO_SADDR {
            w.sset64(saddr as u16, base);
        }
    }

    /// Run `prog` on a copy of `w0` (registers, lanes, ISA, state, float mode) over `mem` and
    /// `lds` for at most `budget` wave-instructions: the wave afterwards and the outcome.
    fn run_copy(
        w0: &Wave,
        prog: &Program,
        mem: &mut dyn crate::Memory,
        lds: &mut [u8],
        budget: u64,
    ) -> (Wave, Result<(), crate::Error>) {
        let mut w = Wave::new();
        w.v.copy_from_slice(&w0.v);
        w.s = w0.s;
        (w.lanes, w.isa, w.state, w.mode, w.scc) = (w0.lanes, w0.isa, w0.state, w0.mode, w0.scc);
        let mut buf = vec![0u8; 1024];
        let mut ctx = Ctx {
            mem,
            lds,
            code_base: 0,
            prog,
            instructions: 0,
            budget,
            buf: &mut buf,
            counts: &mut [],
        };
        let r = super::super::exec::run(&mut w, &mut ctx);
        (w, r)
    }

    /// Random instructions that have a hot form (other than branches), each run with its form
    /// and again with every form turned off, from the same random registers: the registers,
    /// SCC and EXEC must come out the same, with a full and a partial EXEC, in wave32 and
    /// wave64, with and without f32 denormal flushing.
    fn forms_match_the_general_path(isa: Isa, endpgm: u32, lanes: u32, seed: u64) {
        forms_match(isa, endpgm, lanes, seed, false, &|w| w);
    }

    /// `forms_match_the_general_path` for the LDS forms: random DS instructions over 72 KiB of
    /// LDS, with address registers that are tiles (consecutive dwords per
    /// lane), broadcasts, random in-range dwords or random bits; the LDS must come out the
    /// same too.
    fn lds_forms_match_the_general_path(isa: Isa, endpgm: u32, lanes: u32, seed: u64) {
        forms_match(isa, endpgm, lanes, seed, true, &|w| w);
    }

    /// `forms_match` with the random words turned into instructions by `shape` first.
    fn forms_match(
        isa: Isa,
        endpgm: u32,
        lanes: u32,
        seed: u64,
        lds_forms: bool,
        shape: &dyn Fn([u32; 3]) -> [u32; 3],
    ) -> Vec<Fast> {
        let mut next = crate::xorshift(seed);
        let mut words: Vec<u32> = vec![];
        let mut drawn = vec![];
        let mut forms = 0;
        let mut tries = 0;
        while forms < 400 && tries < 2_000_000 {
            tries += 1;
            let mut w = shape([next() as u32, next() as u32, next() as u32]);
            if lds_forms {
                // The DS encoding (bits 31:26 are 0b110110 on gfx9 and gfx11+).
                // Dword-aligned offsets of at most 15 (times the size and stride of two-address
                // forms; plain forms: offset0 + 256 * offset1), so that most accesses stay
                // inside the LDS and the program runs on.
                w[0] = (w[0] & 0x03ff_0f0c) | 0xd800_0000;
            }
            let bytes: Vec<u8> = w.iter().flat_map(|d| d.to_le_bytes()).collect();
            let Ok(p) = Program::from_bytes(&bytes, 0, isa) else {
                continue;
            };
            let (Some(f), Some(i)) = (p.fast.first(), p.insts.first()) else {
                continue;
            };
            let branch = matches!(
                f,
                Fast::Branch(_)
                    | Fast::CbranchScc0(_)
                    | Fast::CbranchScc1(_)
                    | Fast::CbranchVccz(_)
                    | Fast::CbranchVccnz(_)
                    | Fast::CbranchExecz(_)
                    | Fast::CbranchExecnz(_)
                    // Memory forms have their own tests (below); the end stops the program.
                    | Fast::Endpgm
                    | Fast::GlobalLoad(_)
                    | Fast::GlobalStore(_)
                    | Fast::SLoad(_)
                    | Fast::Barrier
            );
            let ds = matches!(f, Fast::DsLoad(_) | Fast::DsStore(_));
            if *f == Fast::Slow || branch || ds != lds_forms {
                continue;
            }
            words.extend_from_slice(&w[..i.len as usize]);
            drawn.push(*f);
            forms += 1;
        }
        assert!(
            forms >= 400,
            "{isa:?}: only {forms} random instructions with a form"
        );
        let (fast, slow) = with_and_without_forms(&words, endpgm, isa);
        for case in 0..8 {
            let mut w0 = Wave::new();
            w0.lanes = lanes;
            w0.isa = isa;
            w0.state = WaveState::Running;
            w0.mode = Mode {
                round: 0,
                denorm: if case % 4 == 3 { 0 } else { 0xf },
                ieee: true,
                dx10_clamp: true,
            };
            for r in w0.v.iter_mut() {
                // Small integers, f32 specials and random bits.
                *r = match next() % 4 {
                    0 => (next() % 64) as u32,
                    1 => [0, 0x8000_0000, 0x3f80_0000, 0x7f80_0000, 0x7fc0_0000, 1]
                        [(next() % 6) as usize],
                    _ => next() as u32,
                };
            }
            if lds_forms {
                for row in w0.v.chunks_mut(64) {
                    let base = (next() % 0xff00) as u32 & !3;
                    // Random bits (an access outside the LDS, which ends the run) only in the
                    // last two cases.
                    let kind = next() % if case >= 6 { 8 } else { 7 };
                    for (l, r) in row.iter_mut().enumerate() {
                        *r = match kind {
                            0..=2 => base.wrapping_add(4 * l as u32),
                            3 | 4 => base,
                            5 | 6 => (next() % 0xff00) as u32 & !3,
                            _ => next() as u32,
                        };
                    }
                }
            }
            let lds0: Vec<u8> = if lds_forms {
                // Dwords that are addresses inside it, as the registers loaded from it become
                // addresses of later instructions.
                (0..0x1_2000 / 4)
                    .flat_map(|_| ((next() % 0xff00) as u32 & !3).to_le_bytes())
                    .collect()
            } else {
                vec![]
            };
            for s in w0.s.iter_mut().take(124) {
                *s = next() as u32;
            }
            let exec = if case % 2 == 0 { u64::MAX } else { next() };
            w0.set_exec(exec);
            let run = |prog: &Program| -> (Wave, Vec<u8>, Option<String>) {
                let mut lds = lds0.clone();
                // Errors (an unimplemented corner) must be the same too: compared below.
                let (mut w, r) = run_copy(&w0, prog, &mut HostMemory::new(), &mut lds, 100_000);
                w.hwreg[0] = r.is_ok() as u32;
                (w, lds, r.err().map(|e| e.to_string()))
            };
            let ((a, lds_a, err), (b, lds_b, _)) = (run(&fast), run(&slow));
            if let Some(at) = (0..lds_a.len()).find(|&k| lds_a[k] != lds_b[k]) {
                panic!("{isa:?} case {case}: LDS byte {at:#x} differs");
            }
            assert_eq!(a.hwreg[0], b.hwreg[0], "{isa:?} case {case}: outcome");
            if lds_forms && case < 6 {
                // Every access inside the LDS: the whole program ran.
                assert_eq!(a.hwreg[0], 1, "{isa:?} case {case}: {err:?}");
            }
            assert_eq!(a.s, b.s, "{isa:?} case {case}: SGPRs");
            assert_eq!(a.scc, b.scc, "{isa:?} case {case}: SCC");
            // The staging rows past the register file differ by design.
            let regs = crate::interp::wave::DPP_ROW * 64;
            if let Some(l) = (0..regs).find(|&l| a.v[l] != b.v[l]) {
                panic!(
                    "{isa:?} case {case}: v{} lane {} is {:#x} with the forms, {:#x} without",
                    l / 64,
                    l % 64,
                    a.v[l],
                    b.v[l]
                );
            }
        }
        drawn
    }

    /// Random GLOBAL dword loads and stores that have a form (FLAT-encoded words with random
    /// fields), each run with its form and again with every form turned off, from the same
    /// random registers and memory, with the lanes' addresses set up as: consecutive elements
    /// (what the form takes), the same with a partial EXEC, consecutive elements in reverse
    /// lane order, consecutive elements running past the end of the memory (a fault), and
    /// runs of 16 lanes at consecutive elements from random starts (taken too), with the last
    /// run past the end (a fault) or each run's lanes reversed. The registers, the memory and
    /// the outcome (the error too) must be the same.
    fn global_forms_match_the_general_path(
        isa: Isa,
        endpgm: u32,
        lanes: u32,
        seed: u64,
        memory: Mem,
    ) {
        use super::Gm;
        let mut next = crate::xorshift(seed);
        // The FLAT encoding (bits 31:26 = 110111 on gfx9 and gfx11), other fields random.
        let found: Vec<(Vec<u32>, (Gm, bool))> =
            random_with_form(isa, 0xdc00_0000, 200_000, &mut next, |f| match *f {
                Fast::GlobalLoad(g) => Some((g, true)),
                Fast::GlobalStore(g) => Some((g, false)),
                _ => None,
            });
        assert!(
            found.len() >= 60 && found.iter().any(|f| f.1.1) && found.iter().any(|f| !f.1.1),
            "{isa:?}: only {} random GLOBAL loads and stores with a form",
            found.len()
        );
        let size = 1usize << 16;
        for (k, (words, (g, load))) in found.iter().enumerate() {
            let (fast, slow) = with_and_without_forms(words, endpgm, isa);
            let n = 4 * g.dwords as u64;
            for case in 0..7 {
                let mem0: Vec<u8> = (0..size).map(|_| next() as u8).collect();
                let mut w0 = random_wave(isa, lanes, &mut next);
                // HostMemory's first region starts at 4 GiB.
                let a = 1u64 << 32;
                let start = if case == 3 {
                    a + size as u64 - n * lanes as u64 / 2
                } else {
                    a + (size as u64) / 4
                };
                // Cases 4-6: runs of 16 lanes at consecutive elements (rows of a tile), each
                // run at its own start: random bytes in the memory (runs may overlap or
                // coincide), the last run past the end of the memory (a fault), and the
                // lanes of each run in reverse order.
                let run_len = 16 * n;
                let starts: Vec<u64> = (0..4)
                    .map(|r| match (case, r, next() % 4) {
                        (5, r, _) if r + 1 == lanes as usize / 16 => a + size as u64 - run_len / 2,
                        // Above the lowest 8 KiB, so that a negative offset stays inside.
                        (_, 1.., 0) => a + 8192,
                        _ => a + 8192 + next() % (size as u64 - 8192 - run_len),
                    })
                    .collect();
                set_addresses(&mut w0, (g.vaddr, g.saddr, g.imm), a, |l| {
                    let e = if case == 2 { lanes as u64 - 1 - l } else { l };
                    match case {
                        4 | 5 => starts[l as usize / 16] + n * (l % 16),
                        6 => starts[l as usize / 16] + n * (15 - l % 16),
                        _ => start + n * e,
                    }
                });
                let exec = if case == 1 { next() } else { u64::MAX };
                w0.set_exec(exec);
                let run = |prog: &Program| -> (Wave, Vec<u8>, String) {
                    let (w, r, bytes) = match memory {
                        Mem::Shared => {
                            let mut mem = crate::SharedHostMemory::new();
                            assert_eq!(mem.alloc_bytes(&mem0), a);
                            let mut access = crate::interp::memory::SharedAccess::new(&mem);
                            let (w, r) = run_copy(&w0, prog, &mut access, &mut [], 100);
                            (w, format!("{r:?}"), mem.bytes(a, size))
                        }
                        Mem::Host => {
                            let mut mem = HostMemory::new();
                            assert_eq!(mem.alloc_bytes(&mem0), a);
                            let (w, r) = run_copy(&w0, prog, &mut mem, &mut [], 100);
                            (w, format!("{r:?}"), mem.bytes(a, size))
                        }
                        Mem::FirstFault => {
                            let mut mem = FirstFault::new(&mem0, a);
                            let (w, r) = run_copy(&w0, prog, &mut mem, &mut [], 100);
                            let r = format!("{r:?}, first fault kept {:?}", mem.first);
                            (w, r, mem.mem.bytes(a, size))
                        }
                    };
                    (w, bytes.expect("memory"), r)
                };
                let ((wa, ma, ra), (wb, mb, rb)) = (run(&fast), run(&slow));
                let what = format!("{isa:?} instruction {k} ({}) case {case}", fast.text(0));
                assert_eq!(ra, rb, "{what}: outcome");
                assert!(ma == mb, "{what}: memory differs");
                let regs = crate::interp::wave::DPP_ROW * 64;
                if let Some(l) = (0..regs).find(|&l| wa.v[l] != wb.v[l]) {
                    panic!(
                        "{what}: v{} lane {} is {:#x} with the forms, {:#x} without",
                        l / 64,
                        l % 64,
                        wa.v[l],
                        wb.v[l]
                    );
                }
                assert_eq!(wa.s, wb.s, "{what}: SGPRs");
                if case == 0 || case == 4 {
                    assert!(ra.starts_with("Ok"), "{what}: {ra}");
                    let moved = if *load {
                        wa.v[..] != w0.v[..]
                    } else {
                        ma != mem0
                    };
                    assert!(moved, "{what}: nothing moved");
                }
            }
        }
    }

    /// Random GLOBAL 32-bit integer atomics that have a form (FLAT-encoded words with random
    /// fields), each run with its form and again with every form turned off, from the same
    /// random registers and memory, with the lanes' addresses set up as: dwords among 64 bins
    /// (many lanes on one value, as in a histogram), the same with a partial EXEC, random
    /// bytes anywhere in the memory (unaligned, overlapping), and one lane past the end of the
    /// memory (a fault), over `HostMemory` and over `SharedHostMemory` (no slices: the form
    /// goes through `atomic32_lanes`). The registers, the memory and the outcome (the error
    /// too) must be the same; for the bins, the same over both memories.
    fn global_atomic_forms_match_the_general_path(isa: Isa, endpgm: u32, lanes: u32, seed: u64) {
        use super::NO_RETURN;
        let mut next = crate::xorshift(seed);
        let found = random_with_form(isa, 0xdc00_0000, 400_000, &mut next, |f| match *f {
            Fast::GlobalAtomic(g) => Some(g),
            _ => None,
        });
        assert!(
            found.len() >= 60
                && found.iter().any(|f| f.1.dst == NO_RETURN)
                && found.iter().any(|f| f.1.dst != NO_RETURN),
            "{isa:?}: only {} random GLOBAL atomics with a form",
            found.len()
        );
        let size = 1usize << 14;
        for (k, (words, g)) in found.iter().enumerate() {
            let (fast, slow) = with_and_without_forms(words, endpgm, isa);
            for case in 0..4 {
                let mem0: Vec<u8> = (0..size).map(|_| next() as u8).collect();
                let mut w0 = random_wave(isa, lanes, &mut next);
                let a = 1u64 << 32;
                // Above the lowest 8 KiB, so that a negative offset stays inside.
                let bins = a + 8192 + next() % 1024 * 4;
                let bad = next() % lanes as u64;
                set_addresses(&mut w0, (g.vaddr, g.saddr, g.imm), a, |l| match case {
                    2 => a + 8192 + next() % (size as u64 - 8192 - 3),
                    3 if l == bad => a + size as u64 - 2,
                    _ => bins + next() % 64 * 4,
                });
                let exec = if case == 1 { next() } else { u64::MAX };
                w0.set_exec(exec);
                let run = |prog: &Program| -> (Wave, Vec<u8>, String) {
                    let mut mem = HostMemory::new();
                    assert_eq!(mem.alloc_bytes(&mem0), a);
                    let (w, r) = run_copy(&w0, prog, &mut mem, &mut [], 100);
                    let bytes = mem.bytes(a, size).expect("memory");
                    (w, bytes, format!("{r:?}"))
                };
                // The threads' shared memory, which has no slices: the form takes the wave
                // through `atomic32_lanes` there, or posts it when it returns nothing. Also
                // whether the memory was still as it started when the wave ended (the
                // atomics held), before the access ends as a dispatch's thread does.
                let run_shared = |prog: &Program| -> (Wave, Vec<u8>, String, bool) {
                    let mut mem = crate::SharedHostMemory::new();
                    assert_eq!(mem.alloc_bytes(&mem0), a);
                    let mut access = crate::interp::memory::SharedAccess::new(&mem);
                    let (w, r) = run_copy(&w0, prog, &mut access, &mut [], 100);
                    let held = mem.bytes(a, size).expect("memory") == mem0;
                    drop(access);
                    let bytes = mem.bytes(a, size).expect("memory");
                    (w, bytes, format!("{r:?}"), held)
                };
                let ((wa, ma, ra), (wb, mb, rb)) = (run(&fast), run(&slow));
                let what = format!("{isa:?} instruction {k} ({}) case {case}", fast.text(0));
                assert_eq!(ra, rb, "{what}: outcome");
                assert!(ma == mb, "{what}: memory differs");
                let regs = crate::interp::wave::DPP_ROW * 64;
                let ((wc, mc, rc, held), (wd, md, rd, held_slow)) =
                    (run_shared(&fast), run_shared(&slow));
                // A full wave's atomics without return on the bins are posted by the form;
                // the general path, and the form with a partial EXEC, perform them at once.
                if case < 2 {
                    assert_eq!(
                        held,
                        case == 0 && g.dst == NO_RETURN && g.op != crate::Atomic32::Swap,
                        "{what}: the form held the atomics"
                    );
                    assert!(!held_slow, "{what}: the general path held the atomics");
                }
                assert_eq!(rc, rd, "{what}: outcome over shared memory");
                assert!(mc == md, "{what}: shared memory differs");
                if let Some(l) = (0..regs).find(|&l| wc.v[l] != wd.v[l]) {
                    panic!(
                        "{what}: over shared memory v{} lane {} is {:#x} with the forms, {:#x} \
                         without",
                        l / 64,
                        l % 64,
                        wc.v[l],
                        wd.v[l]
                    );
                }
                assert_eq!(wc.s, wd.s, "{what}: SGPRs over shared memory");
                if case < 2 {
                    assert!(mc == ma, "{what}: shared memory differs from host memory");
                    assert!(
                        wc.v[..regs] == wa.v[..regs],
                        "{what}: registers differ between the memories"
                    );
                }
                if let Some(l) = (0..regs).find(|&l| wa.v[l] != wb.v[l]) {
                    panic!(
                        "{what}: v{} lane {} is {:#x} with the forms, {:#x} without",
                        l / 64,
                        l % 64,
                        wa.v[l],
                        wb.v[l]
                    );
                }
                assert_eq!(wa.s, wb.s, "{what}: SGPRs");
                match case {
                    0 | 2 => assert!(ra.starts_with("Ok"), "{what}: {ra}"),
                    3 => assert!(ra.starts_with("Err(MemoryFault"), "{what}: {ra}"),
                    _ => {}
                }
            }
        }
    }

    #[test]
    fn global_atomic_forms_match_the_general_path_on_every_address_pattern() {
        global_atomic_forms_match_the_general_path(Isa::Gfx942, 0xbf81_0000, 64, 0x1f83_d9ab_fb41);
        global_atomic_forms_match_the_general_path(Isa::Gfx950, 0xbf81_0000, 64, 0x5be0_cd19_137e);
        global_atomic_forms_match_the_general_path(Isa::Gfx1100, 0xbfb0_0000, 32, 0xcbbb_9d5d_c105);
        global_atomic_forms_match_the_general_path(Isa::Gfx1100, 0xbfb0_0000, 64, 0x629a_292a_367c);
    }

    /// Random scalar loads that have a form (SMEM-encoded words with random fields), each run
    /// with its form and with every form turned off, from the same random registers and
    /// memory, reading inside the memory and running past its end (a fault): the registers,
    /// SCC and the outcome must be the same.
    fn scalar_forms_match_the_general_path(isa: Isa, smem: u32, endpgm: u32, seed: u64) {
        use super::NO_SOFFSET;
        let mut next = crate::xorshift(seed);
        let found = random_with_form(isa, smem, 200_000, &mut next, |f| match *f {
            // An offset SGPR inside the base pair could not be set apart from it here.
            Fast::SLoad(m) if m.soffset != m.base && m.soffset != m.base + 1 => Some(m),
            _ => None,
        });
        assert!(
            found.len() >= 60,
            "{isa:?}: only {} random scalar loads with a form",
            found.len()
        );
        let size = 1usize << 12;
        for (k, (words, m)) in found.iter().enumerate() {
            let (fast, slow) = with_and_without_forms(words, endpgm, isa);
            for case in 0..2 {
                let mem0: Vec<u8> = (0..size).map(|_| next() as u8).collect();
                let mut w0 = Wave::new();
                (w0.lanes, w0.isa, w0.state) = (64, isa, WaveState::Running);
                for s in w0.s.iter_mut().take(124) {
                    *s = next() as u32;
                }
                let a = 1u64 << 32;
                let at = if case == 0 {
                    a + 64 + next() % 1024
                } else {
                    // The last dword one past the end.
                    a + size as u64 + 4 - 4 * m.dwords as u64
                };
                let soff = if m.soffset == NO_SOFFSET {
                    0
                } else {
                    let o = next() % 512;
                    w0.s[m.soffset as usize] = o as u32;
                    o
                };
                w0.sset64(m.base as u16, at.wrapping_sub(m.imm).wrapping_sub(soff));
                let run = |prog: &Program| -> (Wave, String) {
                    let mut mem = HostMemory::new();
                    assert_eq!(mem.alloc_bytes(&mem0), a);
                    let (w, r) = run_copy(&w0, prog, &mut mem, &mut [], 100);
                    (w, format!("{r:?}"))
                };
                // The threads' shared memory, which has no slices: the form reads through a
                // staging buffer there.
                let run_shared = |prog: &Program| -> (Wave, String) {
                    let mut mem = crate::SharedHostMemory::new();
                    assert_eq!(mem.alloc_bytes(&mem0), a);
                    let mut access = crate::interp::memory::SharedAccess::new(&mem);
                    let (w, r) = run_copy(&w0, prog, &mut access, &mut [], 100);
                    (w, format!("{r:?}"))
                };
                // A memory without slices that keeps its first fault and may repeat a failed
                // read (as the mock's): the form reads through a staging buffer there too.
                let run_first = |prog: &Program| -> (Wave, String) {
                    let mut mem = FirstFault::new(&mem0, a);
                    let (w, r) = run_copy(&w0, prog, &mut mem, &mut [], 100);
                    (w, format!("{r:?}, first fault kept {:?}", mem.first))
                };
                let ((wa, ra), (wb, rb)) = (run(&fast), run(&slow));
                let what = format!("{isa:?} instruction {k} ({}) case {case}", fast.text(0));
                assert_eq!(ra, rb, "{what}: outcome");
                assert_eq!(wa.s, wb.s, "{what}: SGPRs");
                assert_eq!(wa.scc, wb.scc, "{what}: SCC");
                for (wc, rc) in [run_shared(&fast), run_shared(&slow)] {
                    assert_eq!(rc, ra, "{what}: outcome over shared memory");
                    assert_eq!(wc.s, wa.s, "{what}: SGPRs over shared memory");
                }
                let ((wc, rc), (wd, rd)) = (run_first(&fast), run_first(&slow));
                assert_eq!(
                    rc, rd,
                    "{what}: outcome and first fault over a repeatable memory"
                );
                assert!(rc.starts_with(&ra), "{what}: {rc} against {ra}");
                assert_eq!(wc.s, wd.s, "{what}: SGPRs over a repeatable memory");
                assert_eq!(wc.s, wa.s, "{what}: SGPRs over a repeatable memory");
                if case == 0 {
                    assert!(ra.starts_with("Ok") && wa.s != w0.s, "{what}: {ra}");
                } else {
                    assert!(ra.starts_with("Err(MemoryFault"), "{what}: {ra}");
                }
            }
        }
    }

    #[test]
    fn scalar_forms_match_the_general_path_in_and_past_memory() {
        scalar_forms_match_the_general_path(Isa::Gfx942, 0xc000_0000, 0xbf81_0000, 0x510e_527f);
        scalar_forms_match_the_general_path(Isa::Gfx1100, 0xf400_0000, 0xbfb0_0000, 0x9b05_688c);
    }

    /// The memories [`global_forms_match_the_general_path`] runs over.
    #[derive(Clone, Copy)]
    enum Mem {
        /// [`HostMemory`]: slices.
        Host,
        /// [`crate::SharedHostMemory`] through a thread's access: no slices, all or nothing.
        Shared,
        /// [`FirstFault`]: no slices, not all or nothing, repeatable.
        FirstFault,
    }

    /// A memory as the mock's shader view is one: no slices, and it keeps the first fault
    /// of any access for its own report (so it is not all or nothing), but a failed access
    /// made again records nothing new ([`crate::Memory::repeatable`]).
    struct FirstFault {
        mem: HostMemory,
        first: Option<crate::Fault>,
    }

    impl FirstFault {
        /// `bytes` at `at` (the first region of a [`HostMemory`]).
        fn new(bytes: &[u8], at: u64) -> FirstFault {
            let mut mem = HostMemory::new();
            assert_eq!(mem.alloc_bytes(bytes), at);
            FirstFault { mem, first: None }
        }
    }

    impl crate::Memory for FirstFault {
        fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), crate::Fault> {
            let r = self.mem.read(addr, buf);
            if let Err(f) = &r {
                self.first.get_or_insert_with(|| f.clone());
            }
            r
        }

        fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), crate::Fault> {
            let r = self.mem.write(addr, data);
            if let Err(f) = &r {
                self.first.get_or_insert_with(|| f.clone());
            }
            r
        }

        fn repeatable(&self) -> bool {
            true
        }
    }

    #[test]
    fn global_forms_match_the_general_path_on_every_address_pattern() {
        global_forms_match_the_general_path(
            Isa::Gfx942,
            0xbf81_0000,
            64,
            0x6a09_e667_f3bc_c908,
            Mem::Host,
        );
        global_forms_match_the_general_path(
            Isa::Gfx1100,
            0xbfb0_0000,
            32,
            0xbb67_ae85_84ca_a73b,
            Mem::Host,
        );
        global_forms_match_the_general_path(
            Isa::Gfx1100,
            0xbfb0_0000,
            64,
            0x3c6e_f372_fe94_f82b,
            Mem::Host,
        );
    }

    /// The same over a [`crate::SharedHostMemory`] (the all-cores path), which has no slices
    /// but whose accesses are all or nothing, so the forms move the bytes through a staging
    /// buffer.
    #[test]
    fn global_forms_match_the_general_path_over_shared_memory() {
        global_forms_match_the_general_path(
            Isa::Gfx942,
            0xbf81_0000,
            64,
            0x510e_527f_ade6_82d1,
            Mem::Shared,
        );
        global_forms_match_the_general_path(
            Isa::Gfx1100,
            0xbfb0_0000,
            32,
            0x9b05_688c_2b3e_6c1f,
            Mem::Shared,
        );
    }

    /// The same over a [`FirstFault`] memory (as the mock's shader view: no slices, the first
    /// fault kept, failed accesses repeatable): a whole wave's form moves its bytes through
    /// a staging buffer, and a fault (case 3) leaves the same fault kept and the same error.
    #[test]
    fn global_forms_match_the_general_path_over_a_repeatable_memory() {
        global_forms_match_the_general_path(
            Isa::Gfx942,
            0xbf81_0000,
            64,
            0x1f83_d9ab_5be0_cd19,
            Mem::FirstFault,
        );
        global_forms_match_the_general_path(
            Isa::Gfx1100,
            0xbfb0_0000,
            32,
            0x137e_2179_6a09_e667,
            Mem::FirstFault,
        );
    }

    /// Random CDNA VOP3P words of `v_pk_fma_f32`, `v_pk_mul_f32` and `v_pk_add_f32`, three in
    /// four in their usual form (no `op_sel`, neg or clamp, every `op_sel_hi`: a
    /// [`Fast::PkF32`] form when the rows allow) and one in four with random modifier
    /// bits, half and half with random words, with and without the forms: the registers
    /// must come out the same (f32 specials among the inputs, both denormal modes).
    fn pk_f32_forms_match_the_general_path(isa: Isa, seed: u64) {
        let shape = |w: [u32; 3]| {
            if w[2] & 1 == 0 {
                return w;
            }
            let r = w[2] >> 1;
            let op = 0x30 + r % 3;
            let plain = (r >> 2) & 3 != 0;
            let mods0 = if plain { 0x4000 } else { w[0] & 0xff00 };
            let word0 = 0xd380_0000 | op << 16 | mods0 | (w[0] & 0xff);
            let src = |x: u32| 256 + x % 256;
            let srcs = src(w[1]) | src(w[1] >> 8) << 9 | src(w[1] >> 16) << 18;
            let mods1 = if plain { 3 << 27 } else { w[2] & 0xf800_0000 };
            [word0, srcs | mods1, w[2]]
        };
        let drawn = forms_match(isa, 0xbf81_0000, 64, seed, false, &shape);
        let n = drawn
            .iter()
            .filter(|f| matches!(f, Fast::PkF32(..)))
            .count();
        assert!(n >= 50, "{isa:?}: {n} packed f32 forms");
    }

    #[test]
    fn pk_f32_forms_match_the_general_path_on_cdna() {
        pk_f32_forms_match_the_general_path(Isa::Gfx942, 0xa54f_f53a_5f1d_36f1);
        pk_f32_forms_match_the_general_path(Isa::Gfx950, 0x9b05_688c_2b3e_6c1f);
    }

    /// The 64-bit integer forms that take uniform sources as values: the address
    /// computations compilers emit (`v_lshlrev_b64`, and on CDNA `v_lshl_add_u64`), and
    /// `v_lshrrev_b64` and `v_mad_u64_u32` (the 64-bit multiplies); random VOP3 words of them
    /// with each source an SGPR (pair), an inline constant or a VGPR (pair), so that the
    /// uniform shapes (`v_lshlrev_b64 v[0:1], 4, v[0:1]`, `v_lshl_add_u64 v[2:3], s[4:5], 0,
    /// v[0:1]`, `v_mad_u64_u32 v[2:3], s[8:9], v2, s3, 0`, with a zero or a non-zero
    /// addend) and the others (through the staging rows) come in every combination.
    fn address_forms_match_the_general_path(isa: Isa, endpgm: u32, lanes: u32, seed: u64) {
        let cdna = matches!(isa, Isa::Gfx942 | Isa::Gfx950);
        let shape = move |w: [u32; 3]| -> [u32; 3] {
            let src = |r: u32| match r % 3 {
                0 => 2 * (r / 3 % 50),
                1 => [128 + r / 3 % 65, 193 + r / 3 % 16][(r / 7 % 2) as usize],
                _ => 256 + r / 3 % 200,
            };
            let (a, b, c) = (src(w[1]), src(w[1] >> 11), src(w[2]));
            let vdst = (w[0] >> 8) % 200;
            // The carry-out of `v_mad_u64_u32`: an SGPR (pair) or VCC.
            let sdst = [2 * (w[0] >> 20) % 100, 106][(w[0] >> 30) as usize % 2] << 8;
            let (op, word1) = match (cdna, w[0] % 4) {
                (true, 0) => (0xd208_0000, a | b << 9 | c << 18),
                (true, 1) => (0xd28f_0000, a | b << 9),
                (true, 2) => (0xd290_0000, a | b << 9),
                (true, _) => (0xd1e8_0000 | sdst, a | b << 9 | c << 18),
                (false, 0 | 1) => (0xd73c_0000, a | b << 9),
                (false, 2) => (0xd73d_0000, a | b << 9),
                (false, _) => (0xd6fe_0000 | sdst, a | b << 9 | c << 18),
            };
            [op | vdst, word1, endpgm]
        };
        forms_match(isa, endpgm, lanes, seed, false, &shape);
    }

    /// The float forms with and without sign modifiers (abs and neg, which a form either applies
    /// per lane or, when a source has none, leaves out of its loop): random VOP3 words of
    /// `v_cndmask_b32`, `v_cvt_i32_f32`, `v_cvt_u32_f32`, `v_ldexp_f32`, `v_fma_f32` and
    /// `v_sqrt_f32` with random abs and neg bits and VGPR, SGPR or constant sources.
    /// (`v_add_f32` and `v_mul_f32` are left out: with a NaN in both sources, which NaN the
    /// result carries depends on the order the Rust compiler gives the x86 operands, and the
    /// forms and the general path can differ there; see `docs/EMU.md`.)
    /// A random source operand code: an even SGPR, an inline constant or a VGPR.
    fn draw_src(r: u32) -> u32 {
        match r % 4 {
            0 => 2 * (r / 4 % 50),
            1 => 128 + r / 4 % 81,
            _ => 256 + r / 4 % 200,
        }
    }

    /// Runs a form test on gfx942 and gfx950 (wave64) and gfx1100 (wave32 and wave64), each
    /// with its `s_endpgm` word and one of `seeds`.
    fn on_all_isas(test: fn(Isa, u32, u32, u64), seeds: [u64; 4]) {
        let configs = [
            (Isa::Gfx942, 0xbf81_0000, 64),
            (Isa::Gfx950, 0xbf81_0000, 64),
            (Isa::Gfx1100, 0xbfb0_0000, 32),
            (Isa::Gfx1100, 0xbfb0_0000, 64),
        ];
        for ((isa, endpgm, lanes), seed) in configs.into_iter().zip(seeds) {
            test(isa, endpgm, lanes, seed);
        }
    }

    /// The carry forms: `v_add_co_u32`, `v_sub_co_u32`, `v_subrev_co_u32` and their
    /// carry-in versions, in the 64-bit encoding (carry-out to an SGPR (pair), VCC or null,
    /// carry-in from an SGPR (pair) or VCC) and in the 32-bit one (VCC).
    fn carry_forms_match_the_general_path(isa: Isa, endpgm: u32, lanes: u32, seed: u64) {
        let cdna = matches!(isa, Isa::Gfx942 | Isa::Gfx950);
        // VOP3 opcode words (bits 31:16) and VOP2 opcodes (bits 30:25), in the order add,
        // sub, subrev, then the carry-in three.
        let (vop3, vop2): ([u32; 6], [u32; 6]) = if cdna {
            (
                [0xd119, 0xd11a, 0xd11b, 0xd11c, 0xd11d, 0xd11e],
                [0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e],
            )
        } else {
            // gfx11 has no 32-bit encoding of the three without a carry-in.
            (
                [0xd700, 0xd701, 0xd702, 0xd520, 0xd521, 0xd522],
                [0x20, 0x21, 0x22, 0x20, 0x21, 0x22],
            )
        };
        let shape = move |w: [u32; 3]| -> [u32; 3] {
            let k = (w[0] % 6) as usize;
            let mask = |r: u32| [2 * (r % 50), 106, 124][(r >> 8) as usize % 3];
            let vdst = (w[0] >> 8) % 200;
            if w[0] >> 28 & 1 == 0 {
                let word0 = vop3[k] << 16 | mask(w[0] >> 12) << 8 | vdst;
                let word1 = draw_src(w[1]) | draw_src(w[1] >> 11) << 9 | mask(w[2]) << 18;
                [word0, word1, endpgm]
            } else {
                let word = vop2[k] << 25 | vdst << 17 | ((w[1] >> 3) % 200) << 9 | draw_src(w[1]);
                [word, endpgm, endpgm]
            }
        };
        let drawn = forms_match(isa, endpgm, lanes, seed, false, &shape);
        for (op, ci) in [
            (CarryOp::Add, false),
            (CarryOp::Sub, true),
            (CarryOp::Subrev, true),
        ] {
            assert!(
                drawn.iter().any(|f| matches!(f, Fast::Carry(_, o, c)
                    if *o == op && (*c != NO_CARRY_IN) == ci)),
                "{isa:?}: no {op:?} form (carry-in {ci}) drawn"
            );
        }
    }

    /// The compare forms of `v_cmp` and `v_cmpx` (f32, i32, u32, every condition), in the
    /// 32-bit encoding (VCC) and the 64-bit one (its scalar destination: an SGPR (pair), VCC
    /// or `null`). `v_cmpx` writes EXEC (and, on CDNA, the destination too): the instructions
    /// after one run with the EXEC it left.
    fn compare_forms_match_the_general_path(isa: Isa, endpgm: u32, lanes: u32, seed: u64) {
        let cdna = matches!(isa, Isa::Gfx942 | Isa::Gfx950);
        // The first opcode of each group and its conditions: `v_cmp` f32, i32, u32, then
        // `v_cmpx` f32, i32, u32; and the VOP3 encoding's bits 31:26.
        let (groups, vop3): ([(u32, u32); 6], u32) = if cdna {
            (
                [
                    (0x40, 16),
                    (0xc0, 8),
                    (0xc8, 8),
                    (0x50, 16),
                    (0xd0, 8),
                    (0xd8, 8),
                ],
                0xd000_0000,
            )
        } else {
            (
                [
                    (0x10, 16),
                    (0x40, 8),
                    (0x48, 8),
                    (0x90, 16),
                    (0xc0, 8),
                    (0xc8, 8),
                ],
                0xd400_0000,
            )
        };
        let shape = move |w: [u32; 3]| -> [u32; 3] {
            let (first, conds) = groups[(w[0] % 6) as usize];
            let op = first + (w[0] >> 4) % conds;
            if w[0] >> 28 & 1 == 0 {
                let word = 0x7c00_0000 | op << 17 | ((w[1] >> 3) % 200) << 9 | draw_src(w[1]);
                [word, endpgm, endpgm]
            } else {
                let sdst = [2 * (w[2] % 50), 106, 124][(w[2] >> 8) as usize % 3];
                let word1 = draw_src(w[1]) | draw_src(w[1] >> 11) << 9;
                [vop3 | op << 16 | sdst, word1, endpgm]
            }
        };
        let drawn = forms_match(isa, endpgm, lanes, seed, false, &shape);
        for x in [false, true] {
            assert!(
                drawn
                    .iter()
                    .any(|f| matches!(f, Fast::Cmp(v, c) if c.x == x && v.sd < 106)),
                "{isa:?}: no compare form (v_cmpx {x}) with an SGPR destination drawn"
            );
        }
    }

    #[test]
    fn compare_forms_match_the_general_path_all_isas() {
        on_all_isas(
            compare_forms_match_the_general_path,
            [
                0x1f83_d9ab_fb41,
                0x5be0_cd19_8f1c,
                0x6a09_e667_f3bc,
                0xbb67_ae85_84ca,
            ],
        );
    }

    #[test]
    fn carry_forms_match_the_general_path_all_isas() {
        on_all_isas(
            carry_forms_match_the_general_path,
            [
                0x3c6e_f372_fe94,
                0xa54f_f53a_5f1d,
                0x510e_527f_ade6,
                0x9b05_688c_2b3e,
            ],
        );
    }

    fn modifier_forms_match_the_general_path(isa: Isa, endpgm: u32, lanes: u32, seed: u64) {
        let cdna = matches!(isa, Isa::Gfx942 | Isa::Gfx950);
        // The VOP3 opcode words (bits 31:16) of the six, in that order.
        let ops: [u32; 6] = if cdna {
            [0xd100, 0xd148, 0xd147, 0xd288, 0xd1cb, 0xd167]
        } else {
            [0xd501, 0xd588, 0xd587, 0xd71c, 0xd613, 0xd5b3]
        };
        let shape = move |w: [u32; 3]| -> [u32; 3] {
            let k = (w[0] % 6) as usize;
            // The lane mask of `v_cndmask_b32`: an SGPR (pair) or VCC.
            let c = if k == 0 {
                [2 * (w[2] % 50), 106][(w[2] >> 8) as usize % 2]
            } else {
                draw_src(w[2])
            };
            let (abs, neg) = ((w[0] >> 3) & 7, w[0] >> 6 & 7);
            let word0 = ops[k] << 16 | abs << 8 | ((w[0] >> 9) % 200);
            let word1 = draw_src(w[1]) | draw_src(w[1] >> 11) << 9 | c << 18 | neg << 29;
            [word0, word1, endpgm]
        };
        forms_match(isa, endpgm, lanes, seed, false, &shape);
    }

    #[test]
    fn modifier_forms_match_the_general_path_all_isas() {
        on_all_isas(
            modifier_forms_match_the_general_path,
            [
                0x71f3_2a9c_04be,
                0x5be0_cd19_137e,
                0x2b3e_6c1f_9b05,
                0x6a09_e667_bb67,
            ],
        );
    }

    #[test]
    fn address_forms_match_the_general_path_all_isas() {
        on_all_isas(
            address_forms_match_the_general_path,
            [
                0x3c6e_f372_fe94,
                0xa54f_f53a_5f1d,
                0x510e_527f_ade6,
                0x1f83_d9ab_fb42,
            ],
        );
    }

    /// A random scalar ALU word (SOP1, SOP2, SOPK or SOPC, with a random opcode, so that the
    /// forms of every ISA's numbering come up; `w[1]` is its literal) whose operands are drawn
    /// from the codes that matter to them: low SGPRs, VCC and EXEC (both halves), M0, `null`,
    /// inline integers and floats, a literal, SCC, VCCZ and EXECZ.
    fn salu_word(w: [u32; 3]) -> [u32; 3] {
        const SPECIAL: [u32; 16] = [
            0, 1, 2, 3, 4, 5, 106, 107, 124, 125, 126, 127, 251, 252, 253, 255,
        ];
        let src = |x: u32| match x % 4 {
            0 => SPECIAL[(x >> 2) as usize % 16],
            1 => 128 + (x >> 2) % 81,
            2 => 240 + (x >> 2) % 9,
            _ => (x >> 2) % 106,
        };
        let dst = |x: u32| {
            [
                106,
                107,
                124,
                125,
                126,
                127,
                2 * (x >> 3 & 3),
                (x >> 3) % 106,
            ][(x & 7) as usize]
        };
        let r = w[2];
        let (a, b, d) = (src(r >> 3), src(r >> 12), dst(r >> 21));
        let op = w[0];
        let word = match (r >> 1) % 4 {
            0 => 0x8000_0000 | (op % 0x40) << 23 | d << 16 | b << 8 | a,
            1 => 0xbe80_0000 | d << 16 | (op % 0x40) << 8 | a,
            2 => 0xbf00_0000 | (op % 0x14) << 16 | b << 8 | a,
            // SOPK: opcodes above 0x1b would be SOP1, SOPC or SOPP words.
            _ => 0xb000_0000 | (op % 0x1c) << 23 | d << 16 | (w[1] & 0xffff),
        };
        [word, w[1], w[2]]
    }

    /// Random scalar ALU instructions with a form ([`salu_word`]), half and half with random
    /// words, so that vector forms run after scalar forms changed EXEC, VCC and SCC, in one
    /// program; with and without the forms, the registers, SGPRs (EXEC, VCC and M0 among
    /// them) and SCC must come out the same.
    fn salu_forms_match_the_general_path(isa: Isa, endpgm: u32, lanes: u32, seed: u64) {
        let shape = |w: [u32; 3]| if w[2] & 1 == 0 { w } else { salu_word(w) };
        let drawn = forms_match(isa, endpgm, lanes, seed, false, &shape);
        let scalar: Vec<super::Sf> = drawn.iter().filter_map(scalar_operands).collect();
        let saveexec = drawn
            .iter()
            .filter(|f| matches!(f, Fast::Salu(_, super::Salu::Saveexec(..))))
            .count();
        let exec = scalar.iter().filter(|s| s.d >= 126).count();
        assert!(
            scalar.len() >= 100 && saveexec >= 3 && exec >= 3,
            "{isa:?}: {} scalar forms, {saveexec} saveexec, {exec} writing EXEC",
            scalar.len()
        );
    }

    /// Each of 300 random scalar ALU instructions with a form ([`salu_word`]) alone, with its
    /// form and without, from random waves with SCC clear and set, a full and a partial EXEC,
    /// and SGPRs s0-s7 random or among 0, 1 and 2 (so that compares come out both ways):
    /// SGPRs (EXEC, VCC, M0 among them) and SCC must be the same after it (a program of many
    /// would overwrite most SCC results before they could differ).
    fn salu_each_matches_the_general_path(isa: Isa, endpgm: u32, lanes: u32, seed: u64) {
        let mut next = crate::xorshift(seed);
        let mut kinds = std::collections::BTreeSet::new();
        let mut n = 0;
        for _ in 0..200_000 {
            let w = salu_word([next() as u32, next() as u32, next() as u32]);
            let bytes: Vec<u8> = w.iter().flat_map(|d| d.to_le_bytes()).collect();
            let Ok(p) = Program::from_bytes(&bytes, 0, isa) else {
                continue;
            };
            let (Some(f), Some(i)) = (p.fast.first(), p.insts.first()) else {
                continue;
            };
            let Fast::Salu(_, op) = *f else {
                continue;
            };
            kinds.insert(format!("{op:?}").split('(').next().map(str::to_string));
            let (fast, slow) = with_and_without_forms(&w[..i.len as usize], endpgm, isa);
            for case in 0..8 {
                let mut w0 = random_wave(isa, lanes, &mut next);
                w0.scc = case & 1 != 0;
                if case & 2 != 0 {
                    for s in w0.s.iter_mut().take(8) {
                        *s = (next() % 3) as u32;
                    }
                }
                w0.set_exec(if case & 4 != 0 { u64::MAX } else { next() });
                let (a, ra) = run_copy(&w0, &fast, &mut HostMemory::new(), &mut [], 10);
                let (b, rb) = run_copy(&w0, &slow, &mut HostMemory::new(), &mut [], 10);
                let what = format!("{isa:?} {} case {case}", fast.text(0));
                assert_eq!(format!("{ra:?}"), format!("{rb:?}"), "{what}: outcome");
                assert_eq!(a.s, b.s, "{what}: SGPRs");
                assert_eq!(a.scc, b.scc, "{what}: SCC");
            }
            n += 1;
            if n == 300 {
                break;
            }
        }
        assert!(
            n == 300 && kinds.len() >= 30,
            "{isa:?}: {n} scalar instructions with a form, {} kinds",
            kinds.len()
        );
    }

    /// The operands of a scalar ALU form.
    fn scalar_operands(f: &Fast) -> Option<super::Sf> {
        match *f {
            Fast::Salu(s, _) => Some(s),
            _ => None,
        }
    }

    #[test]
    fn salu_forms_match_the_general_path_all_isas() {
        salu_forms_match_the_general_path(Isa::Gfx1100, 0xbfb0_0000, 32, 0x6c62_272e_07bb_0142);
        salu_forms_match_the_general_path(Isa::Gfx1100, 0xbfb0_0000, 64, 0x62b8_2175_6d28_b80d);
        salu_forms_match_the_general_path(Isa::Gfx942, 0xbf81_0000, 64, 0x1bd1_1bda_a9fc_1a22);
        salu_forms_match_the_general_path(Isa::Gfx950, 0xbf81_0000, 64, 0x4a24_1e0f_2c2d_0e35);
        salu_forms_match_the_general_path(Isa::Gfx1200, 0xbfb0_0000, 32, 0x9c2f_7c1e_5d4b_a0f3);
    }

    /// Random CDNA `v_and_b32_sdwa` words (random rows or SGPRs, byte, word and dword
    /// selections, sign extension, neg, abs, clamp and omod bits, mostly `dst_sel:DWORD`), half
    /// and half with random words,
    /// with and without the forms: registers, SGPRs and SCC must come out the same.
    fn sdwa_forms_match_the_general_path(isa: Isa, seed: u64) {
        let shape = |w: [u32; 3]| {
            if w[2] & 1 == 0 {
                return w;
            }
            let r = w[2] >> 1;
            let dst_sel = if r & 3 != 0 { 6 } else { r >> 2 & 7 };
            let word0 = 0x2600_00f9 | (w[0] % 200) << 17 | (w[0] >> 8 & 0xff) << 9;
            let word1 = (w[1] & 0xbfbf_e0ff) | dst_sel << 8 | (r >> 5 & 3) << 11;
            [word0, word1, w[2]]
        };
        let drawn = forms_match(isa, 0xbf81_0000, 64, seed, false, &shape);
        let n = drawn
            .iter()
            .filter(|f| matches!(f, Fast::SdwaAndB32(..)))
            .count();
        assert!(n >= 50, "{isa:?}: {n} SDWA forms");
    }

    #[test]
    fn sdwa_forms_match_the_general_path_on_cdna() {
        sdwa_forms_match_the_general_path(Isa::Gfx942, 0x7137_4491_b5c0_fbcf);
        sdwa_forms_match_the_general_path(Isa::Gfx950, 0xe9b5_dba5_3956_c25b);
    }

    #[test]
    fn each_salu_form_matches_the_general_path_all_isas() {
        salu_each_matches_the_general_path(Isa::Gfx1100, 0xbfb0_0000, 32, 0x3243_f6a8_885a_308d);
        salu_each_matches_the_general_path(Isa::Gfx1100, 0xbfb0_0000, 64, 0x1319_8a2e_0370_7344);
        salu_each_matches_the_general_path(Isa::Gfx942, 0xbf81_0000, 64, 0xa409_3822_299f_31d0);
        salu_each_matches_the_general_path(Isa::Gfx950, 0xbf81_0000, 64, 0x082e_fa98_ec4e_6c89);
        salu_each_matches_the_general_path(Isa::Gfx1200, 0xbfb0_0000, 32, 0x4528_21e6_38d0_1377);
    }

    #[test]
    fn rdna3_forms_match_the_general_path() {
        forms_match_the_general_path(Isa::Gfx1100, 0xbfb0_0000, 32, 0x9e37_79b9_7f4a_7c15);
        forms_match_the_general_path(Isa::Gfx1100, 0xbfb0_0000, 64, 0x2545_f491_4f6c_dd1d);
    }

    #[test]
    fn cdna3_forms_match_the_general_path() {
        forms_match_the_general_path(Isa::Gfx942, 0xbf81_0000, 64, 0xbf58_476d_1ce4_e5b9);
        forms_match_the_general_path(Isa::Gfx950, 0xbf81_0000, 64, 0x94d0_49bb_1331_11eb);
    }

    #[test]
    fn rdna4_forms_match_the_general_path() {
        forms_match_the_general_path(Isa::Gfx1200, 0xbfb0_0000, 32, 0x0123_4567_89ab_cdef);
    }

    #[test]
    fn lds_forms_match_the_general_path_all_isas() {
        lds_forms_match_the_general_path(Isa::Gfx1100, 0xbfb0_0000, 32, 0x5851_f42d_4c95_7f2d);
        lds_forms_match_the_general_path(Isa::Gfx1100, 0xbfb0_0000, 64, 0x1405_7b7e_f767_814f);
        lds_forms_match_the_general_path(Isa::Gfx942, 0xbf81_0000, 64, 0x2127_599b_f432_5c37);
        lds_forms_match_the_general_path(Isa::Gfx950, 0xbf81_0000, 64, 0x9fb2_1c65_1e98_df25);
        lds_forms_match_the_general_path(Isa::Gfx1200, 0xbfb0_0000, 32, 0x7e37_79b9_7f4a_7c15);
    }

    /// Gfx942 programs of LDS instructions that reuse four address rows (v1-v4), mixed with
    /// instructions that change those rows between them (adds and xors, by the forms with a
    /// full EXEC and by the general path with a partial one; moves of one address row into
    /// another; LDS loads into an address row) and with EXEC changes, each run with the forms
    /// and again with every form turned off: registers, SGPRs, LDS and the outcome (error text
    /// included) must come out the same, so a classification kept for an address row
    /// ([`super::LdsRows`]) is never used for a row or EXEC it does not describe.
    #[test]
    fn lds_row_classification_follows_every_change_of_the_row() {
        let mut next = crate::xorshift(0x6a09_e667_f3bc_c908u64);
        const LDS: usize = 0x1_0000;
        let mut kept = 0;
        for case in 0..12 {
            let mut words: Vec<u32> = vec![];
            for _ in 0..300 {
                let a = 1 + (next() % 4) as u32;
                let b = 1 + (next() % 4) as u32;
                let dst = 10 + (next() % 8) as u32;
                // DS: offsets in bits 15:0, the opcode in 24:17; address, data0, data1 and
                // destination registers in the second dword.
                let ds = |off: u32, op: u32, data: [u32; 2], vdst: u32| {
                    [
                        off | op << 17 | 0xd800_0000,
                        a | data[0] << 8 | data[1] << 16 | vdst << 24,
                    ]
                };
                // Dword-aligned byte offsets for the plain forms (offset0 | offset1 << 8).
                let off = ((next() % 64) as u32 * 4) | ((next() % 32) as u32) << 8;
                match next() % 12 {
                    // ds_read2_b32, ds_read_b32, ds_read_b128, ds_write_b32, ds_write2st64_b32
                    0..=2 => words.extend(ds(off, 0x37, [0; 2], dst)),
                    3 => words.extend(ds(off, 0x36, [0; 2], dst)),
                    4 => words.extend(ds(off & 0xfff0, 0xff, [0; 2], dst)),
                    5 => words.extend(ds(off, 0x0d, [20, 0], 0)),
                    6 => words.extend(ds(off & 0x0304, 0x0f, [20, 21], 0)),
                    // ds_read_b32 into an address row
                    7 => words.extend(ds(off, 0x36, [0; 2], b)),
                    // v_add_u32 vA, 0|4|64, vA; v_xor_b32 vA, 64, vA; v_mov_b32 vA, vB
                    8 => words
                        .push(0x6800_0000 | a << 17 | a << 9 | [0x80, 0x84, 0xc0][a as usize % 3]),
                    9 => words.push(0x2a00_00c0 | a << 17 | a << 9),
                    10 => words.push(0x7e00_0200 | a << 17 | (0x100 + b)),
                    // s_mov_b64 exec, s[10:11] (random) or -1
                    _ => words.push(if next() & 1 == 0 {
                        0xbefe_010a
                    } else {
                        0xbefe_01c1
                    }),
                }
            }
            let (fast, slow) = with_and_without_forms(&words, 0xbf81_0000, Isa::Gfx942);
            let mut w0 = Wave::new();
            w0.lanes = 64;
            w0.isa = Isa::Gfx942;
            w0.state = WaveState::Running;
            for r in w0.v.iter_mut().take(64 * 32) {
                *r = next() as u32;
            }
            // Stored data (v20, v21) are addresses inside the LDS too, as stored dwords may be
            // loaded into an address row.
            for r in w0.v.iter_mut().skip(64 * 20).take(128) {
                *r = (next() % 0x8000) as u32 & !3;
            }
            for row in w0.v.chunks_mut(64).take(5).skip(1) {
                let base = (next() % 0x8000) as u32 & !3;
                let kind = next() % 4;
                for (l, r) in row.iter_mut().enumerate() {
                    *r = match kind {
                        0 => base + 4 * l as u32,
                        1 => base + 4 * (l as u32 % 16),
                        2 => base + 64 * (l as u32 / 16),
                        // Random dwords, or random bits (a fault) in the last case.
                        _ if case == 11 => next() as u32,
                        _ => (next() % 0x8000) as u32 & !3,
                    };
                }
            }
            // LDS dwords are tile rows' addresses, so that loaded address rows are tiles too.
            let lds0: Vec<u8> = (0..LDS / 4)
                .flat_map(|k| ((k as u32 % 0x2000) * 4).to_le_bytes())
                .collect();
            w0.s[10] = next() as u32;
            w0.s[11] = if case % 3 == 0 {
                u32::MAX
            } else {
                next() as u32
            };
            w0.set_exec(if case % 2 == 0 { u64::MAX } else { next() });
            let run = |prog: &Program| {
                let mut lds = lds0.clone();
                let (w, r) = run_copy(&w0, prog, &mut HostMemory::new(), &mut lds, 100_000);
                (w, lds, r.err().map(|e| e.to_string()))
            };
            let ((a, lds_a, err_a), (b, lds_b, err_b)) = (run(&fast), run(&slow));
            assert_eq!(err_a, err_b, "case {case}: outcome");
            if case < 11 {
                assert_eq!(err_a, None, "case {case}: every access is inside the LDS");
            }
            if let Some(at) = (0..LDS).find(|&k| lds_a[k] != lds_b[k]) {
                panic!("case {case}: LDS byte {at:#x} differs");
            }
            assert_eq!(a.s, b.s, "case {case}: SGPRs");
            let regs = crate::interp::wave::DPP_ROW * 64;
            if let Some(l) = (0..regs).find(|&l| a.v[l] != b.v[l]) {
                panic!(
                    "case {case}: v{} lane {} is {:#x} with the forms, {:#x} without",
                    l / 64,
                    l % 64,
                    a.v[l],
                    b.v[l]
                );
            }
            kept += a.lds_rows.iter().filter(|r| r.lanes != 0).count();
        }
        assert!(kept > 0, "the LDS forms kept no classification");
    }

    /// A full wave's GLOBAL atomic add without return over the threads' shared memory is
    /// held, and performed by the wave's next wait on memory counters (`s_waitcnt` as a form
    /// and through the general path; RDNA3's `s_waitcnt_vscnt`, which only the general path
    /// runs), or when the access ends, as a dispatch's thread does, if no wait follows.
    #[test]
    fn posted_atomics_are_performed_by_the_waves_wait() {
        // global_atomic_add(_u32) v1, v2, s[0:1]; the waits; s_endpgm.
        let gfx942_add = [0xdd08_8000u32, 0x0000_0201];
        let gfx1100_add = [0xdcd6_0000u32, 0x0000_0201];
        for (isa, endpgm, add, wait) in [
            (
                Isa::Gfx942,
                0xbf81_0000u32,
                gfx942_add,
                Some(0xbf8c_0f70u32),
            ),
            (Isa::Gfx942, 0xbf81_0000, gfx942_add, None),
            (Isa::Gfx1100, 0xbfb0_0000, gfx1100_add, Some(0xbf89_03f7)),
            (Isa::Gfx1100, 0xbfb0_0000, gfx1100_add, Some(0xbc7c_0000)),
            (Isa::Gfx1100, 0xbfb0_0000, gfx1100_add, None),
        ] {
            let words: Vec<u32> = add.iter().copied().chain(wait).collect();
            let (fast, slow) = with_and_without_forms(&words, endpgm, isa);
            assert!(matches!(fast.fast[0], Fast::GlobalAtomic(_)), "{isa:?}");
            // The atomic's form, with the wait (and `s_endpgm`) through the general path.
            let mut mixed = fast.clone();
            mixed.fast[1..].fill(Fast::Slow);
            let lanes = if isa == Isa::Gfx942 { 64 } else { 32 };
            let mut mem = crate::SharedHostMemory::new();
            let a = mem.alloc(256);
            let mut w0 = Wave::new();
            (w0.lanes, w0.isa, w0.state) = (lanes, isa, WaveState::Running);
            w0.set_exec(u64::MAX >> (64 - lanes));
            (w0.s[0], w0.s[1]) = (a as u32, (a >> 32) as u32);
            for l in 0..lanes as usize {
                // Lanes l and l + 16 (and so on) on one of 16 bins, adding 1 to 4.
                (w0.v[64 + l], w0.v[128 + l]) = (4 * (l as u32 % 16), 1 + l as u32 % 4);
            }
            let expected: Vec<u8> = (0..64u32)
                .flat_map(|b| {
                    let n = if b < 16 { lanes / 16 * (1 + b % 4) } else { 0 };
                    n.to_le_bytes()
                })
                .collect();
            for (prog, form, name) in [
                (&fast, true, "forms"),
                (&mixed, true, "the atomic's form only"),
                (&slow, false, "no forms"),
            ] {
                let what = format!("{isa:?} wait {wait:x?}, {name}");
                let before = mem.bytes(a, 256).expect("memory");
                let mut access = crate::interp::memory::SharedAccess::new(&mem);
                let (w, r) = run_copy(&w0, prog, &mut access, &mut [], 10);
                assert!(r.is_ok(), "{what}: {r:?}");
                let mid = mem.bytes(a, 256).expect("memory");
                drop(access);
                let after = mem.bytes(a, 256).expect("memory");
                let add = |m: &[u8]| -> Vec<u8> {
                    m.chunks(4)
                        .zip(expected.chunks(4))
                        .flat_map(|(x, e)| {
                            let v = u32::from_le_bytes(x.try_into().expect("4"));
                            let d = u32::from_le_bytes(e.try_into().expect("4"));
                            v.wrapping_add(d).to_le_bytes()
                        })
                        .collect()
                };
                assert_eq!(
                    after,
                    add(&before),
                    "{what}: the bins after the access ended"
                );
                let held = form && wait.is_none();
                let mid_expected = if held { before.clone() } else { add(&before) };
                assert_eq!(mid, mid_expected, "{what}: the bins when the wave ended");
                assert_eq!(w.posted, held, "{what}: the wave's posted flag");
            }
        }
    }

    /// The cache invalidations compilers put around barriers (`buffer_gl0_inv`,
    /// `buffer_gl1_inv`; CDNA's `buffer_inv` and `buffer_wbl2`) have the no-op form, and run
    /// to the end as the general path runs them.
    #[test]
    fn cache_invalidations_are_no_op_forms() {
        for (isa, endpgm, word) in [
            (Isa::Gfx1100, 0xbfb0_0000u32, 0xe0ac_0000u32),
            (Isa::Gfx1100, 0xbfb0_0000, 0xe0b0_0000),
            (Isa::Gfx942, 0xbf81_0000, 0xe0a4_8000),
            (Isa::Gfx942, 0xbf81_0000, 0xe0a0_8000),
        ] {
            let (fast, slow) = with_and_without_forms(&[word, 0], endpgm, isa);
            assert_eq!(fast.fast[0], Fast::Nop, "{isa:?} {}", fast.text(0));
            let mut w0 = Wave::new();
            (w0.lanes, w0.isa, w0.state) = (64, isa, WaveState::Running);
            for prog in [&fast, &slow] {
                let (w, r) = run_copy(&w0, prog, &mut HostMemory::new(), &mut [], 10);
                assert!(r.is_ok(), "{isa:?} {}: {r:?}", fast.text(0));
                assert_eq!(w.state, WaveState::Done, "{isa:?} {}", fast.text(0));
            }
        }
    }

    /// `s_barrier` in its form stops the wave where the general path does: waiting at the
    /// barrier, the next instruction after it, the instruction counted; resumed, it runs on
    /// to the end.
    #[test]
    fn barrier_form_waits_as_the_general_path_does() {
        // s_nop, s_barrier, s_nop, s_endpgm
        for (isa, endpgm, barrier) in [
            (Isa::Gfx942, 0xbf81_0000u32, 0xbf8a_0000u32),
            (Isa::Gfx1100, 0xbfb0_0000, 0xbfbd_0000),
        ] {
            let words = [0xbf80_0000, barrier, 0xbf80_0000, endpgm];
            let bytes: Vec<u8> = words.iter().flat_map(|d| d.to_le_bytes()).collect();
            let fast = Program::from_bytes(&bytes, 0, isa).expect("program");
            assert_eq!(
                fast.fast[1],
                Fast::Barrier,
                "{isa:?}: s_barrier has its form"
            );
            let mut slow = fast.clone();
            slow.fast = vec![Fast::Slow; slow.fast.len()];
            let mut w0 = Wave::new();
            (w0.lanes, w0.isa, w0.state) = (64, isa, WaveState::Running);
            for prog in [&fast, &slow] {
                let (mut w, r) = run_copy(&w0, prog, &mut HostMemory::new(), &mut [], 100);
                assert!(r.is_ok(), "{isa:?}: {r:?}");
                assert_eq!((w.state, w.pc), (WaveState::Barrier, 2), "{isa:?}: waits");
                w.state = WaveState::Running;
                let mut buf = vec![0u8; 16];
                let mut ctx = Ctx {
                    mem: &mut HostMemory::new(),
                    lds: &mut [],
                    code_base: 0,
                    prog,
                    instructions: 0,
                    budget: 100,
                    buf: &mut buf,
                    counts: &mut [],
                };
                let r = super::super::exec::run(&mut w, &mut ctx);
                assert!(r.is_ok(), "{isa:?}: {r:?}");
                assert_eq!((w.state, ctx.instructions), (WaveState::Done, 2), "{isa:?}");
            }
        }
    }
}
