//! Semantics only CDNA has: MFMA with AccVGPRs, packed f32 math, 64-bit moves and shifts,
//! SDWA, and the gfx950 additions the emulator models. Everything else CDNA runs through the
//! shared semantics in [`super::exec`] after `cdna3::lower`.

use crate::Error;
use crate::interp::exec::{
    K, Src, Ty, each_lane, fma32, for_lanes, inline_const, prep, row, set_row, unimplemented, vopc,
    vu64,
};
use crate::interp::float::{bf16_to_f32, f16_to_f32, f32_to_bf16, f32_to_f16};
use crate::interp::inst::{Dpp, Encoding, Inst, VGPR0};
use crate::interp::wave::{Ctx, SDWA_ROW, Wave};

/// CDNA operations without an RDNA3 twin ([`Encoding::Ext`] opcodes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u16)]
pub enum ExtOp {
    /// `v_mov_b64`: D.u64 = S0.u64.
    MovB64,
    /// `v_lshl_add_u64`: D.u64 = (S0.u64 << S1[2:0]) + S2.u64.
    LshlAddU64,
    /// `v_fmac_f64`: D = fma(S0, S1, D).
    FmacF64,
    /// `v_pk_fma_f32`.
    PkFmaF32,
    /// `v_pk_mul_f32`.
    PkMulF32,
    /// `v_pk_add_f32`.
    PkAddF32,
    /// `v_pk_mov_b32`: D.lo = S0[op_sel[0]], D.hi = S1[op_sel[1]].
    PkMovB32,
    /// Dense MFMA (`v_mfma_*`): shape and types packed in [`Inst::literal`] (see
    /// [`mfma_shape`]), CBSZ/ABID/BLGP in [`Inst::imm`].
    Mfma,
    /// gfx950 `v_cvt_f32_bf16`.
    CvtF32Bf16,
    /// gfx950 `v_cvt_pk_bf16_f32`: two f32 to bf16, round to nearest even.
    CvtPkBf16F32,
    /// gfx950 `v_cvt_pk_f16_f32`.
    CvtPkF16F32,
    /// gfx950 `v_bitop3_b32`: any function of three inputs, bit by bit, from an 8-entry table.
    Bitop3B32,
    /// gfx950 `v_bitop3_b16`.
    Bitop3B16,
    /// gfx950 `v_permlane16_swap_b32`.
    Permlane16Swap,
    /// gfx950 `v_permlane32_swap_b32`.
    Permlane32Swap,
    /// gfx950 `v_minimum3_f32` (NaN-propagating minimum).
    Minimum3F32,
    /// gfx950 `v_maximum3_f32`.
    Maximum3F32,
}

const EXT_NAMES: &[(ExtOp, &str)] = &[
    (ExtOp::MovB64, "v_mov_b64"),
    (ExtOp::LshlAddU64, "v_lshl_add_u64"),
    (ExtOp::FmacF64, "v_fmac_f64"),
    (ExtOp::PkFmaF32, "v_pk_fma_f32"),
    (ExtOp::PkMulF32, "v_pk_mul_f32"),
    (ExtOp::PkAddF32, "v_pk_add_f32"),
    (ExtOp::PkMovB32, "v_pk_mov_b32"),
    (ExtOp::Mfma, "v_mfma"),
    (ExtOp::CvtF32Bf16, "v_cvt_f32_bf16"),
    (ExtOp::CvtPkBf16F32, "v_cvt_pk_bf16_f32"),
    (ExtOp::CvtPkF16F32, "v_cvt_pk_f16_f32"),
    (ExtOp::Bitop3B32, "v_bitop3_b32"),
    (ExtOp::Bitop3B16, "v_bitop3_b16"),
    (ExtOp::Permlane16Swap, "v_permlane16_swap_b32"),
    (ExtOp::Permlane32Swap, "v_permlane32_swap_b32"),
    (ExtOp::Minimum3F32, "v_minimum3_f32"),
    (ExtOp::Maximum3F32, "v_maximum3_f32"),
];

impl ExtOp {
    /// The operation a VOP1/VOP2/VOP3 mnemonic lowers to, if it is CDNA-only.
    pub(crate) fn of_valu(name: &str) -> Option<ExtOp> {
        EXT_NAMES
            .iter()
            .find(|(op, n)| *n == name && *op != ExtOp::Mfma)
            .map(|e| e.0)
    }

    pub(crate) fn from_u16(v: u16) -> Option<ExtOp> {
        EXT_NAMES.iter().map(|e| e.0).find(|op| *op as u16 == v)
    }
}

/// Mnemonic of an [`ExtOp`] number.
pub(crate) fn ext_name(op: u16) -> Option<&'static str> {
    EXT_NAMES.iter().find(|e| e.0 as u16 == op).map(|e| e.1)
}

/// Element types of MFMA operands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
enum Elem {
    F32 = 0,
    F16 = 1,
    Bf16 = 2,
    I8 = 3,
    /// 8-bit float, E4M3 (FNUZ on gfx942, OCP on gfx950).
    Fp8 = 4,
    /// 8-bit float, E5M2 (FNUZ on gfx942, OCP on gfx950).
    Bf8 = 5,
    F64 = 6,
}

impl Elem {
    fn bits(self) -> u32 {
        match self {
            Elem::F32 => 32,
            Elem::F16 | Elem::Bf16 => 16,
            Elem::I8 | Elem::Fp8 | Elem::Bf8 => 8,
            Elem::F64 => 64,
        }
    }

    fn of(v: u32) -> Elem {
        match v {
            1 => Elem::F16,
            2 => Elem::Bf16,
            3 => Elem::I8,
            4 => Elem::Fp8,
            5 => Elem::Bf8,
            6 => Elem::F64,
            _ => Elem::F32,
        }
    }
}

/// The shape and types of a dense MFMA mnemonic, packed for [`Inst::literal`]: M, N, K, blocks
/// in bytes 0-3 of the low 32 bits is not enough room, so: bits 0-5 log2(M), 6-11 log2(N),
/// 12-19 K, 20-23 log2(blocks), 24-26 A type, 27-29 B type (the same for A and B but fp8/bf8
/// mixes), bit 30 integer result, bit 31 f64 result. `None` for shapes the emulator does not
/// model (xf32, f8f6f4, sparse, the 4x4x4 f64 blocks).
pub(crate) fn mfma_shape(name: &str) -> Option<u32> {
    let rest = name.strip_prefix("v_mfma_")?;
    let (out, rest) = rest.split_once('_')?;
    let (dims, types) = rest.split_once('_')?;
    let d: Vec<u32> = dims
        .split('x')
        .map(|t| t.parse().ok())
        .collect::<Option<_>>()?;
    let [m, n, k] = d[..] else { return None };
    let (blocks, types) = match types.split_once('_') {
        Some((b, t)) if b.ends_with('b') && b[..b.len() - 1].parse::<u32>().is_ok() => {
            (b[..b.len() - 1].parse::<u32>().ok()?, t)
        }
        _ => (1, types),
    };
    let ty = |t: &str| -> Option<Elem> {
        Some(match t {
            "f32" => Elem::F32,
            "f16" => Elem::F16,
            "bf16" => Elem::Bf16,
            "i8" => Elem::I8,
            "fp8" => Elem::Fp8,
            "bf8" => Elem::Bf8,
            "f64" => Elem::F64,
            _ => return None,
        })
    };
    let (a, b) = match types.split_once('_') {
        Some((x, y)) => (ty(x)?, ty(y)?),
        None => (ty(types)?, ty(types)?),
    };
    if !m.is_power_of_two() || !n.is_power_of_two() || !blocks.is_power_of_two() || m != n {
        return None;
    }
    // Lanes split into groups of M; with one block the groups share the K dimension, with
    // several each group is its own block (the 4x4x4 f64 layout with 4 blocks is neither).
    let groups = 64 / m;
    if blocks != 1 && blocks != groups {
        return None;
    }
    if k > 255 || (blocks == 1 && k % groups != 0) {
        return None;
    }
    let (int, f64out) = (out == "i32", out == "f64");
    if !(out == "f32" || int || f64out) {
        return None;
    }
    Some(
        m.trailing_zeros()
            | n.trailing_zeros() << 6
            | k << 12
            | blocks.trailing_zeros() << 20
            | (a as u32) << 24
            | (b as u32) << 27
            | u32::from(int) << 30
            | u32::from(f64out) << 31,
    )
}

/// Runs an [`Encoding::Ext`] instruction.
pub(crate) fn ext(w: &mut Wave, i: &Inst, idx: usize, ctx: &Ctx<'_>) -> Result<(), Error> {
    let Some(op) = ExtOp::from_u16(i.op) else {
        return Err(unimplemented(ctx, idx, i));
    };
    if i.dpp != Dpp::None && !matches!(op, ExtOp::MovB64 | ExtOp::CvtF32Bf16) {
        return Err(unimplemented(ctx, idx, i));
    }
    match op {
        ExtOp::MovB64 => {
            if i.dpp != Dpp::None {
                return Err(unimplemented(ctx, idx, i));
            }
            vu64(w, i, [K::I64; 3], |[a]| a);
        }
        ExtOp::LshlAddU64 => {
            vu64(w, i, [K::I64, K::I32, K::I64], |[a, b, c]| {
                (a << (b & 7)).wrapping_add(c)
            });
        }
        ExtOp::FmacF64 => {
            let v = prep(w, i, [K::F64; 3]);
            let d = (i.dst - VGPR0) as usize * 64;
            each_lane(v.exec, w.lanes, |l| {
                let c = f64::from_bits(
                    w.v[d + l] as u64 | (w.v.get(d + 64 + l).copied().unwrap_or(0) as u64) << 32,
                );
                let r = v.f64(w, 0, l).mul_add(v.f64(w, 1, l), c);
                w.wr64(i.dst, l, r.to_bits());
            });
        }
        ExtOp::PkFmaF32 | ExtOp::PkMulF32 | ExtOp::PkAddF32 | ExtOp::PkMovB32 => {
            packed_f32(w, i, op)
        }
        ExtOp::Mfma => return mfma(w, i, idx, ctx),
        ExtOp::CvtF32Bf16 => {
            if i.dpp != Dpp::None {
                return Err(unimplemented(ctx, idx, i));
            }
            let v = prep(w, i, [K::I32; 3]);
            each_lane(v.exec, w.lanes, |l| {
                let x = bf16_to_f32(v.u32(w, 0, l) as u16);
                w.wr(i.dst, l, x.to_bits());
            });
        }
        ExtOp::CvtPkBf16F32 | ExtOp::CvtPkF16F32 => {
            let v = prep(w, i, [K::F32; 3]);
            each_lane(v.exec, w.lanes, |l| {
                let cv = |x: f32| {
                    if op == ExtOp::CvtPkBf16F32 {
                        f32_to_bf16(x)
                    } else {
                        f32_to_f16(x)
                    }
                };
                let r = cv(v.f32(w, 0, l)) as u32 | (cv(v.f32(w, 1, l)) as u32) << 16;
                w.wr(i.dst, l, r);
            });
        }
        ExtOp::Bitop3B32 | ExtOp::Bitop3B16 => {
            let table = i.imm as u32 & 0xff;
            let v = prep(w, i, [K::I32; 3]);
            each_lane(v.exec, w.lanes, |l| {
                let (a, b, c) = (v.u32(w, 0, l), v.u32(w, 1, l), v.u32(w, 2, l));
                let mut r = 0u32;
                for e in 0..8u32 {
                    if table >> e & 1 != 0 {
                        let pick = |x: u32, bit: u32| if e >> bit & 1 != 0 { x } else { !x };
                        r |= pick(a, 2) & pick(b, 1) & pick(c, 0);
                    }
                }
                if op == ExtOp::Bitop3B16 {
                    w.wr16v(i, l, i.opsel & 8 != 0, r as u16);
                } else {
                    w.wr(i.dst, l, r);
                }
            });
        }
        ExtOp::Permlane16Swap | ExtOp::Permlane32Swap => {
            // Swaps the upper half of each 32-lane group of vdst (16) or the upper 32 lanes of
            // the wave (32) with the lower half of src0; both registers are written.
            let (a, b) = (
                (i.dst - VGPR0) as usize * 64,
                (i.src[0].wrapping_sub(VGPR0)) as usize * 64,
            );
            if b >= crate::interp::wave::DPP_ROW * 64 {
                return Err(unimplemented(ctx, idx, i));
            }
            let pairs: Vec<(usize, usize)> = if op == ExtOp::Permlane32Swap {
                (0..32).map(|l| (l, l + 32)).collect()
            } else {
                [0, 32]
                    .iter()
                    .flat_map(|&p| (0..16).map(move |l| (p + l, p + l + 16)))
                    .collect()
            };
            for (lo, hi) in pairs {
                w.v.swap(b + lo, a + hi);
            }
        }
        ExtOp::Minimum3F32 | ExtOp::Maximum3F32 => {
            let max = op == ExtOp::Maximum3F32;
            let m = move |x: f32, y: f32| -> f32 {
                if x.is_nan() || y.is_nan() {
                    f32::NAN
                } else if x == y {
                    // -0 < +0.
                    if (x.is_sign_negative()) == max { y } else { x }
                } else if (x > y) == max {
                    x
                } else {
                    y
                }
            };
            crate::interp::exec::vf32(w, i, |[a, b, c]| m(m(a, b), c));
        }
    }
    Ok(())
}

/// The packed f32 operations: each source is a 64-bit pair; `op_sel` picks the half of each
/// source feeding the low result, `op_sel_hi` the high result; `neg_lo`/`neg_hi` negate.
fn packed_f32(w: &mut Wave, i: &Inst, op: ExtOp) {
    if packed_f32_rows(w, i, op) {
        return;
    }
    let exec = w.exec();
    // An inline constant is the 32-bit one (1.0 is 0x3f80_0000, as the assembler folds
    // that literal to it) in the low half and 0 in the high half; LLVM points both results
    // at the low half (op_sel_hi 0). Read as a 64-bit operand, 1.0 would be the f64's bits,
    // whose low half is 0: `x + 1.0` would give x.
    let srcs: [Src; 3] = std::array::from_fn(|k| match i.src[k] {
        c @ (128..=208 | 240..=248) => Src::K(inline_const(c, Ty::B32).unwrap_or(0)),
        c => w.src(c, i.literal, Ty::I64),
    });
    let half = |w: &Wave, k: usize, l: usize, sel: u8| -> u32 {
        match srcs[k] {
            Src::V(b) => w.v.get(b + 64 * sel as usize + l).copied().unwrap_or(0),
            Src::K(c) => (c >> (32 * sel as u32)) as u32,
        }
    };
    for_lanes(exec, |l| {
        let mut out = [0u32; 2];
        for (h, o) in out.iter_mut().enumerate() {
            let sel = |k: usize| {
                if h == 0 {
                    i.opsel >> k & 1
                } else {
                    i.opsel_hi >> k & 1
                }
            };
            let neg = |k: usize| {
                if h == 0 {
                    i.neg >> k & 1
                } else {
                    i.abs >> k & 1
                }
            };
            let f = |k: usize| {
                let x = f32::from_bits(half(w, k, l, sel(k)));
                if neg(k) != 0 { -x } else { x }
            };
            // The clamp bit (VOP3P `CLMP`; llvm-mc-22 assembles `v_pk_fma_f32 … clamp` for
            // gfx942) saturates each f32 result to [0, 1], NaN to 0, as VOP3's does.
            let c = |x: f32| {
                if i.clamp {
                    crate::interp::exec::unit(x as f64) as f32
                } else {
                    x
                }
            };
            *o = match op {
                ExtOp::PkFmaF32 => c(fma32(f(0), f(1), f(2))).to_bits(),
                ExtOp::PkMulF32 => c(f(0) * f(1)).to_bits(),
                ExtOp::PkAddF32 => c(f(0) + f(1)).to_bits(),
                // v_pk_mov_b32 moves bits: S0 feeds the low half, S1 the high half.
                _ => half(w, h, l, i.opsel >> h & 1),
            };
        }
        w.wr64(i.dst, l, out[0] as u64 | (out[1] as u64) << 32);
    });
}

/// [`packed_f32`]'s add, multiply and FMA in their usual form — every source a VGPR pair,
/// the low result from the low halves and the high from the high ones, no modifiers — as
/// straight loops over the register rows: the general form's per-lane half selection was
/// the largest single cost of an all-reduce's sums on gfx942. Returns false, having done
/// nothing, for any other form (or rows past the register file), which the general form
/// then runs; where both apply they compute the same bits.
fn packed_f32_rows(w: &mut Wave, i: &Inst, op: ExtOp) -> bool {
    let Some(n) = packed_f32_plain(i, op) else {
        return false;
    };
    let lanes = w.lanes as usize;
    let end = |row: usize| row + 64 + lanes;
    let mut rows = [0usize; 3];
    for (k, r) in rows.iter_mut().enumerate().take(n) {
        match i.src[k].checked_sub(VGPR0) {
            Some(v) if end(v as usize * 64) <= w.v.len() => *r = v as usize * 64,
            _ => return false,
        }
    }
    let d = match i.dst.checked_sub(VGPR0) {
        Some(v) if end(v as usize * 64) <= w.v.len() => v as usize * 64,
        _ => return false,
    };
    packed_f32_on_rows(w, op, rows, d)
}

/// The sources [`packed_f32_rows`] reads (2 or 3) when `i` is `op` in its usual form — no
/// `op_sel`, every `op_sel_hi`, no negation, clamp or output modifier — else `None`. What
/// the instruction says, not the wave: `fast::classify` makes a form of it too.
pub(crate) fn packed_f32_plain(i: &Inst, op: ExtOp) -> Option<usize> {
    let n = match op {
        ExtOp::PkAddF32 | ExtOp::PkMulF32 => 2,
        ExtOp::PkFmaF32 => 3,
        _ => return None,
    };
    let used = (1u8 << n) - 1;
    if i.opsel & used != 0
        || i.opsel_hi & used != used
        || (i.neg | i.abs) & used != 0
        || i.clamp
        || i.omod != 0
    {
        return None;
    }
    Some(n)
}

/// [`packed_f32_rows`] once its rows are known: sources at row bases `rows` (the unused
/// third any row), destination at row base `d`. The general path and the run loop's form
/// ([`crate::interp::fast::Fast::PkF32`]) both end here, so they compute the same bits.
/// False, having done nothing, when a row lies past the register file.
#[inline]
pub(crate) fn packed_f32_on_rows(w: &mut Wave, op: ExtOp, rows: [usize; 3], d: usize) -> bool {
    let lanes = w.lanes as usize;
    // A whole wave64 whose destination pair is each source pair or clear of it: computed
    // straight into the destination rows, each lane's sources read before its result is
    // written, with no staging row to clear and copy back (the all-reduce's sums spent as
    // much on those as on the adds). A pair overlapping a source by one row goes below.
    let used = if op == ExtOp::PkFmaF32 { 3 } else { 2 };
    if lanes == 64
        && w.exec() == u64::MAX
        && d.checked_add(128).is_some_and(|end| end <= w.v.len())
        && rows[..used].iter().all(|&r| r == d || r.abs_diff(d) >= 128)
    {
        let (below, rest) = w.v.split_at_mut(d);
        let (dst, above) = rest.split_at_mut(128);
        let pair = |k: usize| -> Option<Pair<'_>> {
            let r = rows[k];
            if k >= used || r == d {
                return Some(Pair::Dst);
            }
            let s = if r < d {
                below.get(r..r + 128)
            } else {
                above.get(r - d - 128..r - d)
            }?;
            s.try_into().ok().map(Pair::Row)
        };
        if let (Some(x), Some(y), Some(z), Ok(dst)) =
            (pair(0), pair(1), pair(2), <&mut [u32; 128]>::try_from(dst))
        {
            packed_f32_into(op, dst, [x, y, z]);
            return true;
        }
    }
    // Every lane of the rows is computed (lanes off in EXEC too: float arithmetic has no
    // side effects), then the lanes in EXEC are written: fixed-size rows, so the loops have
    // no bounds checks and vectorise. Reading everything before writing keeps a destination
    // that overlaps a source right.
    let rows_at = |r: usize| -> Option<&[u32; 128]> { w.v.get(r..r + 128)?.try_into().ok() };
    let (Some(x), Some(y), Some(z)) = (rows_at(rows[0]), rows_at(rows[1]), rows_at(rows[2])) else {
        return false;
    };
    let mut out = [0u32; 128];
    packed_f32_lanes(op, x, y, z, &mut out);
    let exec = w.exec();
    let Some(dst) = w.v.get_mut(d..d + 128) else {
        return false;
    };
    if exec == u64::MAX >> (64 - lanes) {
        dst[..lanes].copy_from_slice(&out[..lanes]);
        dst[64..64 + lanes].copy_from_slice(&out[64..64 + lanes]);
    } else {
        for_lanes(exec, |l| {
            dst[l] = out[l];
            dst[64 + l] = out[64 + l];
        });
    }
    true
}

/// A source pair of [`packed_f32_on_rows`]' whole-wave path: the destination pair itself,
/// or a pair clear of it.
#[derive(Clone, Copy)]
enum Pair<'a> {
    Dst,
    Row(&'a [u32; 128]),
}

/// The value a [`Pair::Dst`] source stands for in [`packed_f32_into`]'s loops (never read).
static NO_ROWS: [u32; 128] = [0; 128];

/// [`packed_f32_lanes`] into the destination rows `dst` themselves, each source the
/// destination or a pair clear of it (AVX2 where the host has it, the same IEEE results).
#[cfg_attr(not(test), multiversion::multiversion(targets("x86_64+avx2+fma")))]
fn packed_f32_into(op: ExtOp, dst: &mut [u32; 128], srcs: [Pair<'_>; 3]) {
    match op {
        ExtOp::PkAddF32 => pairs_into(dst, srcs, |a, b, _| a + b),
        ExtOp::PkMulF32 => pairs_into(dst, srcs, |a, b, _| a * b),
        _ => pairs_into(dst, srcs, fma32),
    }
}

/// [`packed_f32_into`] of one operation `f`: one straight loop for each way the sources
/// can be the destination, so that each vectorises.
#[inline(always)]
fn pairs_into(dst: &mut [u32; 128], srcs: [Pair<'_>; 3], f: impl Fn(f32, f32, f32) -> f32) {
    use Pair::{Dst, Row};
    let n = &NO_ROWS;
    match srcs {
        [Row(x), Row(y), Row(z)] => lanes_into::<false, false, false>(dst, [x, y, z], f),
        [Dst, Row(y), Row(z)] => lanes_into::<true, false, false>(dst, [n, y, z], f),
        [Row(x), Dst, Row(z)] => lanes_into::<false, true, false>(dst, [x, n, z], f),
        [Dst, Dst, Row(z)] => lanes_into::<true, true, false>(dst, [n, n, z], f),
        [Row(x), Row(y), Dst] => lanes_into::<false, false, true>(dst, [x, y, n], f),
        [Dst, Row(y), Dst] => lanes_into::<true, false, true>(dst, [n, y, n], f),
        [Row(x), Dst, Dst] => lanes_into::<false, true, true>(dst, [x, n, n], f),
        [Dst, Dst, Dst] => lanes_into::<true, true, true>(dst, [n, n, n], f),
    }
}

/// `dst[k] = f(x[k], y[k], z[k])` for the 128 dwords of a pair of rows, a source given as
/// the destination (`X`, `Y`, `Z`) read from `dst` before its element is written.
#[inline(always)]
fn lanes_into<const X: bool, const Y: bool, const Z: bool>(
    dst: &mut [u32; 128],
    [x, y, z]: [&[u32; 128]; 3],
    f: impl Fn(f32, f32, f32) -> f32,
) {
    for k in 0..128 {
        let a = f32::from_bits(if X { dst[k] } else { x[k] });
        let b = f32::from_bits(if Y { dst[k] } else { y[k] });
        let c = f32::from_bits(if Z { dst[k] } else { z[k] });
        dst[k] = f(a, b, c).to_bits();
    }
}

/// The arithmetic of [`packed_f32_rows`] over two rows of every lane (AVX2 where the host
/// has it: eight lanes an instruction instead of four, the same IEEE results).
#[cfg_attr(not(test), multiversion::multiversion(targets("x86_64+avx2+fma")))]
fn packed_f32_lanes(
    op: ExtOp,
    x: &[u32; 128],
    y: &[u32; 128],
    z: &[u32; 128],
    out: &mut [u32; 128],
) {
    let f = f32::from_bits;
    match op {
        ExtOp::PkAddF32 => {
            for k in 0..128 {
                out[k] = (f(x[k]) + f(y[k])).to_bits();
            }
        }
        ExtOp::PkMulF32 => {
            for k in 0..128 {
                out[k] = (f(x[k]) * f(y[k])).to_bits();
            }
        }
        _ => {
            for k in 0..128 {
                out[k] = fma32(f(x[k]), f(y[k]), f(z[k])).to_bits();
            }
        }
    }
}

/// Value of element `e` of type `t` packed little-endian in a lane's registers `regs`.
fn element(regs: &[u32], t: Elem, e: usize, gfx950: bool) -> f64 {
    let bits = t.bits() as usize;
    let at = e * bits;
    let (r, sh) = (at / 32, at % 32);
    let word = regs.get(r).copied().unwrap_or(0);
    match t {
        Elem::F32 => f32::from_bits(word) as f64,
        Elem::F64 => {
            f64::from_bits(word as u64 | (regs.get(r + 1).copied().unwrap_or(0) as u64) << 32)
        }
        Elem::F16 => f16_to_f32((word >> sh) as u16) as f64,
        Elem::Bf16 => bf16_to_f32((word >> sh) as u16) as f64,
        Elem::I8 => (word >> sh) as u8 as i8 as f64,
        Elem::Fp8 => crate::interp::float::fp8_to_f32((word >> sh) as u8, !gfx950) as f64,
        Elem::Bf8 => crate::interp::float::bf8_to_f32((word >> sh) as u8, !gfx950) as f64,
    }
}

/// Dense MFMA: D = A * B + C per block, wave64.
///
/// Register layout (as the CDNA3 matrix cores lay operands out; the same rules cover every
/// shape): lanes form 64 / M groups of M lanes. With one block the groups split K: lane
/// `g * M + i` holds A[i][g * k + e] (and B[g * k + e][i]) as its element `e`, k = K / groups
/// elements packed little-endian in consecutive registers. With one block per group, lane
/// `b * M + i` holds A_b[i][e] and B_b[e][i] for all K. Results: a 4x4 block `b` has D[i][j]
/// in register `i` of lane `4 * b + j`; otherwise, with L = 64 / N lane groups and G = 4 rows
/// per group (1 for f64), D_b[i][j] is in lane `((i / G) % L) * N + j`, register
/// `b * M * N / 64 + (i / (L * G)) * G + i % G`.
///
/// Arithmetic: each D[i][j] starts from C[i][j] and adds the products for k = 0, 1, ...,
/// K - 1 in that order, each step one fused multiply-add rounded to f32 (f64 for the f64
/// MFMA; products of f16, bf16 and fp8 values are exact in f32, so each step rounds only the
/// sum); integers wrap. CBSZ/ABID broadcast block `(b >> cbsz << cbsz) + abid`'s A to block b;
/// BLGP patterns other than 0 (and the f64 negate bits) are reported unimplemented.
fn mfma(w: &mut Wave, i: &Inst, idx: usize, ctx: &Ctx<'_>) -> Result<(), Error> {
    let s = i.literal;
    let m = 1usize << (s & 63);
    let n = 1usize << (s >> 6 & 63);
    let k = (s >> 12 & 0xff) as usize;
    let blocks = 1usize << (s >> 20 & 15);
    let (ta, tb) = (Elem::of(s >> 24 & 7), Elem::of(s >> 27 & 7));
    let (int, f64out) = (s >> 30 & 1 != 0, s >> 31 != 0);
    let (cbsz, abid, blgp) = (
        (i.imm & 7) as usize,
        (i.imm >> 4 & 15) as usize,
        i.imm >> 8 & 7,
    );
    if blgp != 0 || w.lanes != 64 {
        return Err(unimplemented(ctx, idx, i));
    }
    let gfx950 = w.isa == crate::Isa::Gfx950;
    let groups = 64 / m;
    let per_lane = if blocks == 1 { k / groups } else { k };
    // Registers each lane holds for A and B.
    let regs_of = |t: Elem| (per_lane * t.bits() as usize).div_ceil(32);
    let (ra, rb) = (regs_of(ta), regs_of(tb));
    let read_regs = |w: &Wave, code: u16, nregs: usize, lane: usize| -> [u32; 16] {
        let mut r = [0u32; 16];
        for (q, x) in r.iter_mut().enumerate().take(nregs) {
            *x = if code >= VGPR0 {
                let row = (code - VGPR0) as usize + q;
                w.v.get(row * 64 + lane).copied().unwrap_or(0)
            } else {
                w.sread(code, 0)
            };
        }
        r
    };
    // Unpack A and B: a[b][i][kk], bm[b][kk][j] as f64 (exact for every input type).
    let mut a = vec![0f64; blocks * m * k];
    let mut bm = vec![0f64; blocks * k * n];
    for lane in 0..64 {
        let (g, r) = (lane / m, lane % m);
        let av = read_regs(w, i.src[0], ra, lane);
        let bv = read_regs(w, i.src[1], rb, lane);
        for e in 0..per_lane {
            let (blk, kk) = if blocks == 1 {
                (0, g * per_lane + e)
            } else {
                (g, e)
            };
            a[(blk * m + r) * k + kk] = element(&av, ta, e, gfx950);
            bm[(blk * k + kk) * n + r] = element(&bv, tb, e, gfx950);
        }
    }
    let out_regs = blocks * m * n / 64 * if f64out { 2 } else { 1 };
    // Read C (a register block or a broadcast constant) before D is written: they may overlap.
    let mut c = vec![0u32; out_regs * 64];
    let uniform = |q: usize| -> u32 {
        if f64out {
            let v = w.sread64(i.src[2], 0, Ty::F64);
            if q.is_multiple_of(2) {
                v as u32
            } else {
                (v >> 32) as u32
            }
        } else {
            w.sread(i.src[2], 0)
        }
    };
    for q in 0..out_regs {
        for lane in 0..64 {
            c[q * 64 + lane] = if i.src[2] >= VGPR0 {
                let row = (i.src[2] - VGPR0) as usize + q;
                w.v.get(row * 64 + lane).copied().unwrap_or(0)
            } else {
                uniform(q)
            };
        }
    }
    let exec = w.exec();
    let dst = (i.dst - VGPR0) as usize;
    let (l_groups, g_rows) = (64 / n, if f64out { 1 } else { 4 });
    let per_block = m * n / 64;
    for b in 0..blocks {
        let ab = if cbsz > 0 {
            (b >> cbsz << cbsz) + abid
        } else {
            b
        };
        let ab = ab.min(blocks - 1);
        for r in 0..m {
            for j in 0..n {
                let (lane, reg) = if m == 4 {
                    (4 * b + j, r)
                } else {
                    (
                        ((r / g_rows) % l_groups) * n + j,
                        b * per_block + (r / (l_groups * g_rows)) * g_rows + r % g_rows,
                    )
                };
                if exec >> lane & 1 == 0 {
                    continue;
                }
                let row = |kk: usize| a[(ab * m + r) * k + kk];
                let col = |kk: usize| bm[(b * k + kk) * n + j];
                if f64out {
                    let (lo, hi) = (c[2 * reg * 64 + lane], c[(2 * reg + 1) * 64 + lane]);
                    let mut acc = f64::from_bits(lo as u64 | (hi as u64) << 32);
                    for kk in 0..k {
                        acc = row(kk).mul_add(col(kk), acc);
                    }
                    let bits = acc.to_bits();
                    w.wr((VGPR0 as usize + dst + 2 * reg) as u16, lane, bits as u32);
                    w.wr(
                        (VGPR0 as usize + dst + 2 * reg + 1) as u16,
                        lane,
                        (bits >> 32) as u32,
                    );
                } else if int {
                    let mut acc = c[reg * 64 + lane] as i32;
                    for kk in 0..k {
                        acc = acc.wrapping_add((row(kk) as i32).wrapping_mul(col(kk) as i32));
                    }
                    w.wr((VGPR0 as usize + dst + reg) as u16, lane, acc as u32);
                } else {
                    let mut acc = f32::from_bits(c[reg * 64 + lane]);
                    for kk in 0..k {
                        acc = fma32(row(kk) as f32, col(kk) as f32, acc);
                    }
                    w.wr((VGPR0 as usize + dst + reg) as u16, lane, acc.to_bits());
                }
            }
        }
    }
    Ok(())
}

/// SDWA: the selected bytes or words of src0 (and src1) go through the operation, and its
/// result is written to the selected part of the destination (the rest zeroed, sign-extended
/// or preserved). Sources are staged in rows of their own, so any VALU operation works.
pub(crate) fn sdwa(w: &mut Wave, i: &Inst, idx: usize, ctx: &Ctx<'_>) -> Result<(), Error> {
    let Dpp::Sdwa {
        dst_sel,
        dst_unused,
        src_sel,
        sext,
    } = i.dpp
    else {
        return Err(unimplemented(ctx, idx, i));
    };
    if dst_sel > super::inst::sel::DWORD || dst_unused > 2 {
        // Reserved encodings.
        return Err(unimplemented(ctx, idx, i));
    }
    let lanes = w.lanes as usize;
    let nsrc = if i.enc == Encoding::Vop1 { 1 } else { 2 };
    let mut j = *i;
    j.dpp = Dpp::None;
    for k in 0..nsrc {
        let s = w.src(i.src[k], i.literal, Ty::B32);
        // Whole rows, the selection resolved once: a straight loop over the lanes.
        let (shift, width) = sel_field(src_sel[k]);
        let up = 32 - width;
        let mut out = [0u32; 64];
        match s {
            Src::V(b) => {
                let src = row::<64>(&w.v, b);
                if sext[k] {
                    for (o, &v) in out.iter_mut().zip(src) {
                        *o = (((v >> shift) << up) as i32 >> up) as u32;
                    }
                } else {
                    for (o, &v) in out.iter_mut().zip(src) {
                        *o = ((v >> shift) << up) >> up;
                    }
                }
            }
            Src::K(c) => out = [select(c as u32, src_sel[k], sext[k]); 64],
        }
        set_row(&mut w.v, (SDWA_ROW + k) * 64, &out);
        j.src[k] = VGPR0 + (SDWA_ROW + k) as u16;
    }
    let vopc_like = i.enc == Encoding::Vopc || (i.enc == Encoding::Vop3 && i.op < 0x100);
    if vopc_like {
        return vopc(w, &j, idx, ctx);
    }
    if dst_sel == super::inst::sel::DWORD {
        return crate::interp::exec::valu_op(w, &j, j.op, idx, ctx);
    }
    // The result goes to a staging row that starts as the destination (operations such as
    // v_mac read it), then its selected part is merged into the destination.
    let res = (SDWA_ROW + 2) * 64;
    let d = (i.dst.wrapping_sub(VGPR0)) as usize * 64;
    if d + lanes > crate::interp::wave::DPP_ROW * 64 {
        return Err(unimplemented(ctx, idx, i));
    }
    w.v.copy_within(d..d + lanes, res);
    j.dst = VGPR0 + (SDWA_ROW + 2) as u16;
    let exec = w.exec();
    crate::interp::exec::valu_op(w, &j, j.op, idx, ctx)?;
    let (shift, width) = match dst_sel {
        0..=3 => (8 * dst_sel as u32, 8),
        _ => (16 * (dst_sel as u32 - 4), 16),
    };
    let mask = ((1u64 << width) - 1) as u32;
    for_lanes(exec, |l| {
        let v = w.v[res + l] & mask;
        let old = w.v[d + l];
        let placed = v << shift;
        let field = mask << shift;
        w.v[d + l] = match dst_unused {
            // Preserve the other bits of the destination.
            2 => (old & !field) | placed,
            // Sign-extend the field into the bits above it; below stays zero.
            1 if v >> (width - 1) & 1 != 0 => placed | (u64::MAX << (shift + width)) as u32,
            _ => placed,
        };
    });
    Ok(())
}

/// The (shift, width) of an SDWA selection: byte 0-3, word 0-1, or the dword.
pub(crate) fn sel_field(sel: u8) -> (u32, u32) {
    match sel {
        0..=3 => (8 * sel as u32, 8),
        4 | 5 => (16 * (sel as u32 - 4), 16),
        _ => (0, 32),
    }
}

/// SDWA source selection: byte 0-3 or word 0-1, zero- or sign-extended, or the dword.
fn select(v: u32, sel: u8, sext: bool) -> u32 {
    match sel {
        0..=3 => {
            let b = (v >> (8 * sel)) & 0xff;
            if sext { b as u8 as i8 as i32 as u32 } else { b }
        }
        4 | 5 => {
            let h = (v >> (16 * (sel - 4))) & 0xffff;
            if sext {
                h as u16 as i16 as i32 as u32
            } else {
                h
            }
        }
        _ => v,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sdwa_row_selection_is_select_lane_by_lane() {
        let vals = [
            0u32,
            0x8070_6050,
            0xffff_ffff,
            0x1234_80ff,
            0x7fff_8000,
            0x0080_7f01,
        ];
        let mut w = Wave::new();
        w.lanes = 64;
        w.set_exec(u64::MAX);
        for l in 0..64 {
            w.v[l] = vals[l % vals.len()].rotate_left(l as u32);
        }
        for sel in 0..=6u8 {
            for sext in [false, true] {
                // v_mov_b32_sdwa v1, v0 with this source selection (gfx11's v_mov_b32 v1, v0,
                // predecoded as gfx1100 code, with GFX9's SDWA controls).
                let words = 0x7E02_0300u32.to_le_bytes();
                let mut i = crate::Program::from_bytes(&words, 0, crate::Isa::Gfx1100)
                    .unwrap()
                    .insts[0];
                i.dpp = Dpp::Sdwa {
                    dst_sel: crate::interp::inst::sel::DWORD,
                    dst_unused: 0,
                    src_sel: [sel, 6],
                    sext: [sext, false],
                };
                let prog = crate::Program::from_bytes(&[0; 4], 0, crate::Isa::Gfx942).unwrap();
                let mut mem = crate::HostMemory::new();
                let (mut lds, mut buf) = (vec![], vec![0u8; 1024]);
                let ctx = Ctx {
                    mem: &mut mem,
                    lds: &mut lds,
                    code_base: 0,
                    prog: &prog,
                    instructions: 0,
                    budget: u64::MAX,
                    buf: &mut buf,
                    counts: &mut [],
                };
                sdwa(&mut w, &i, 0, &ctx).unwrap();
                for l in 0..64 {
                    assert_eq!(
                        w.v[64 + l],
                        select(w.v[l], sel, sext),
                        "sel {sel} sext {sext} lane {l}"
                    );
                }
            }
        }
    }

    /// The packed f32 add, multiply and FMA of a whole wave64 in their usual form and with a
    /// partial EXEC, the destination pair clear of the sources or equal to some of them
    /// (straight into the destination rows with a full EXEC), or overlapping one by a row
    /// (`v[11:12]` from `v[10:11]`: through staging rows): every lane on has the operation
    /// of the source pairs as they were before the instruction, bit for bit, and no other
    /// register changes.
    #[test]
    fn packed_f32_of_a_wave_with_every_overlap() {
        let mut next = crate::xorshift(0x5851_f42d_4c95_7f2d);
        let specials = [
            0,
            0x8000_0000,
            0x3f80_0000,
            0x7f80_0000,
            0x7fc0_0000,
            1,
            0x0080_0000,
        ];
        for op in [ExtOp::PkAddF32, ExtOp::PkMulF32, ExtOp::PkFmaF32] {
            for (srcs, d) in [
                ([10, 20, 30], 40),
                ([10, 20, 30], 10),
                ([10, 20, 30], 20),
                ([10, 20, 30], 30),
                ([10, 20, 30], 11),
                ([10, 20, 30], 9),
                ([10, 10, 10], 10),
            ] {
                for exec in [u64::MAX, 0xffff_0fff_ffff_fff7] {
                    let mut w = Wave::new();
                    w.lanes = 64;
                    w.set_exec(exec);
                    for r in w.v.iter_mut().take(64 * 64) {
                        *r = match next() % 3 {
                            0 => specials[(next() % specials.len() as u64) as usize],
                            _ => next() as u32 & 0xbfff_ffff,
                        };
                    }
                    let before = w.v.clone();
                    let rows = srcs.map(|r: usize| r * 64);
                    assert!(packed_f32_on_rows(&mut w, op, rows, d * 64));
                    let mut want = before.clone();
                    for l in (0..64).filter(|l| exec >> l & 1 != 0) {
                        for h in 0..2 {
                            let x = |k: usize| f32::from_bits(before[(srcs[k] + h) * 64 + l]);
                            let r = match op {
                                ExtOp::PkAddF32 => x(0) + x(1),
                                ExtOp::PkMulF32 => x(0) * x(1),
                                _ => fma32(x(0), x(1), x(2)),
                            };
                            want[(d + h) * 64 + l] = r.to_bits();
                        }
                    }
                    if let Some(k) = (0..want.len()).find(|&k| w.v[k] != want[k]) {
                        panic!(
                            "{op:?} of v{srcs:?} into v{d}, exec {exec:#x}: v{} lane {} is \
                             {:#x}, not {:#x}",
                            k / 64,
                            k % 64,
                            w.v[k],
                            want[k]
                        );
                    }
                }
            }
        }
    }

    /// `v_pk_add_f32` in its usual form (the straight-loop path) adds the low halves and the
    /// high halves lane by lane, leaves lanes off in EXEC alone, and gives a destination that
    /// is also a source the sums of the old values; with `op_sel_hi:[1,0]` (the general
    /// path) the high result takes the second source's low half.
    #[test]
    fn packed_f32_add_in_both_forms() {
        let run = |bytes: &[u8], dst_is_src: bool| -> Wave {
            let mut i = crate::Program::from_bytes(bytes, 0, crate::Isa::Gfx942)
                .unwrap()
                .insts[0];
            if dst_is_src {
                i.dst = i.src[0];
            }
            let mut w = Wave::new();
            w.lanes = 64;
            w.set_exec(0xffff_ffff_0000_fff0);
            for l in 0..64 {
                for (row, base) in [
                    (2, 100.0),
                    (3, 200.0),
                    (4, 1.5),
                    (5, 2.5),
                    (6, 0.25),
                    (7, 8.0),
                ] {
                    w.v[row * 64 + l] = (base + l as f32).to_bits();
                }
            }
            let prog = crate::Program::from_bytes(&[0; 4], 0, crate::Isa::Gfx942).unwrap();
            let mut mem = crate::HostMemory::new();
            let (mut lds, mut buf) = (vec![], vec![0u8; 1024]);
            let ctx = Ctx {
                mem: &mut mem,
                lds: &mut lds,
                code_base: 0,
                prog: &prog,
                instructions: 0,
                budget: u64::MAX,
                buf: &mut buf,
                counts: &mut [],
            };
            ext(&mut w, &i, 0, &ctx).unwrap();
            w
        };
        let f = |w: &Wave, row: usize, l: usize| f32::from_bits(w.v[row * 64 + l]);
        // v_pk_add_f32 v[2:3], v[4:5], v[6:7]
        let usual = [0x02, 0x40, 0xb2, 0xd3, 0x04, 0x0d, 0x02, 0x18];
        // the same with op_sel_hi:[1,0]
        let hi_from_lo = [0x02, 0x40, 0xb2, 0xd3, 0x04, 0x0d, 0x02, 0x08];
        for (bytes, dst_is_src) in [(usual, false), (usual, true), (hi_from_lo, false)] {
            let w = run(&bytes, dst_is_src);
            let d = if dst_is_src { 4 } else { 2 };
            for l in 0..64 {
                let l32 = l as f32;
                let on = (0xffff_ffff_0000_fff0u64 >> l) & 1 != 0;
                let (lo, hi) = if !on {
                    let old = |b: f32| b + l32;
                    if dst_is_src {
                        (old(1.5), old(2.5))
                    } else {
                        (old(100.0), old(200.0))
                    }
                } else if bytes == hi_from_lo {
                    ((1.5 + l32) + (0.25 + l32), (2.5 + l32) + (0.25 + l32))
                } else {
                    ((1.5 + l32) + (0.25 + l32), (2.5 + l32) + (8.0 + l32))
                };
                assert_eq!(
                    (f(&w, d, l), f(&w, d + 1, l)),
                    (lo, hi),
                    "{bytes:x?} lane {l}"
                );
            }
        }
    }

    #[test]
    fn mfma_shapes_parse_from_mnemonics() {
        let s = mfma_shape("v_mfma_f32_32x32x8_f16").unwrap();
        assert_eq!(
            (1 << (s & 63), 1 << (s >> 6 & 63), s >> 12 & 0xff),
            (32, 32, 8)
        );
        assert_eq!(s >> 20 & 15, 0, "one block");
        let s = mfma_shape("v_mfma_f32_4x4x1_16b_f32").unwrap();
        assert_eq!(1 << (s >> 20 & 15), 16, "16 blocks");
        let s = mfma_shape("v_mfma_f32_16x16x32_fp8_bf8").unwrap();
        assert_eq!(
            (Elem::of(s >> 24 & 7), Elem::of(s >> 27 & 7)),
            (Elem::Fp8, Elem::Bf8)
        );
        assert!(mfma_shape("v_mfma_i32_16x16x32_i8").unwrap() >> 30 & 1 == 1);
        assert!(
            mfma_shape("v_mfma_f32_16x16x8_xf32").is_none(),
            "xf32 is not modelled"
        );
        assert!(mfma_shape("v_mfma_f64_4x4x4_4b_f64").is_none());
        assert!(mfma_shape("v_mfma_f32_16x16x128_f8f6f4").is_none());
    }

    #[test]
    fn sdwa_selects_bytes_and_words_with_and_without_sign() {
        assert_eq!(select(0x8899_aabb, 1, false), 0xaa);
        assert_eq!(select(0x8899_aabb, 1, true), 0xffff_ffaa);
        assert_eq!(select(0x8899_aabb, 5, true), 0xffff_8899);
        assert_eq!(select(0x1234_5678, 4, true), 0x5678);
        assert_eq!(select(0x1234_5678, 6, true), 0x1234_5678);
    }
}
