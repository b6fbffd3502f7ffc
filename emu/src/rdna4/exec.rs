//! Semantics only gfx12 has among the instructions compute kernels use: the sub-dword and
//! 96-bit scalar loads, 64-bit scalar add/sub/multiply, scalar f32 arithmetic, conversions,
//! compares and transcendentals, the OCP fp8/bf8 to f32 conversions, the fp8/bf8 dot products, the
//! NaN-propagating `v_minimum/v_maximum_f32` and wave32 WMMA. Everything else gfx12 runs
//! through `rdna3::exec` after [`super::lower`].

use crate::Error;
use crate::float::{bf8_to_f32, bf16_to_f32, f16_to_f32, f32_to_bf16, f32_to_f16, fp8_to_f32};
use crate::rdna3::decode::{Dpp, Inst, NULL, VGPR0};
use crate::rdna3::exec::{K, Ty, each_lane, fault, fma32, fmax, fmin, prep, unimplemented};
use crate::wave::{Ctx, Wave};

/// gfx12 operations without a gfx11 twin ([`crate::rdna3::Encoding::Rdna4`] opcodes); some
/// share an operation and differ by a parameter kept in [`Inst::imm2`] (written `imm` below).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u16)]
enum Kind {
    /// `s_load_*`/`s_buffer_load_*` of b96, i8, u8, i16, u16: `imm` = bytes | signed << 8
    /// | buffer << 9.
    SLoad,
    /// `s_add_nc_u64`, `s_sub_nc_u64`, `s_mul_u64`: `imm` 0, 1, 2.
    S64,
    /// Scalar f32 with two sources: add, sub, mul, max_num, min_num (`imm` 0-4).
    SF32,
    /// `s_fmac_f32` (`imm` 0), `s_fmamk_f32` (1), `s_fmaak_f32` (2).
    SFma,
    /// Scalar f32 conversions and roundings (`imm` indexes [`S_CVT`]).
    SCvt,
    /// `s_cmp_*_f32`: `imm` indexes [`S_CMP`].
    SCmpF32,
    /// `v_s_{exp,log,rcp,rsq,sqrt}_f32` (`imm` 0-4): the VALU transcendentals on a scalar.
    STrans,
    /// `v_cvt_f32_fp8/bf8` (`imm` bit 0: bf8), byte chosen by `byte_sel` (`imm` bits 5:4).
    CvtF32F8,
    /// `v_cvt_pk_f32_fp8/bf8` (`imm` bit 0: bf8), word chosen by `op_sel[0]`.
    CvtPkF32F8,
    /// `v_dot4_f32_{fp8,bf8}_{fp8,bf8}`: `imm` bit 0 A is bf8, bit 1 B is bf8.
    Dot4F32F8,
    /// `v_maximum_f32` (`imm` 0) and `v_minimum_f32` (1).
    MinMaxF32,
    /// `v_wmma_*_16x16x16_*` in wave32: `imm` = A type | B type << 3 | D type << 6 ([`Elem`]).
    Wmma,
}

/// WMMA element types, in [`Kind::Wmma`]'s `imm` encoding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Elem {
    F16 = 0,
    Bf16 = 1,
    Iu8 = 2,
    Fp8 = 3,
    Bf8 = 4,
    F32 = 5,
    I32 = 6,
}

impl Elem {
    fn of(name: &str) -> Option<Elem> {
        Some(match name {
            "f16" => Elem::F16,
            "bf16" => Elem::Bf16,
            "iu8" => Elem::Iu8,
            "fp8" => Elem::Fp8,
            "bf8" => Elem::Bf8,
            "f32" => Elem::F32,
            "i32" => Elem::I32,
            _ => return None,
        })
    }

    fn from_bits(v: u16) -> Elem {
        [
            Elem::F16,
            Elem::Bf16,
            Elem::Iu8,
            Elem::Fp8,
            Elem::Bf8,
            Elem::F32,
            Elem::I32,
        ][usize::from(v & 7).min(6)]
    }

    /// Bits of one A/B element.
    fn bits(self) -> u32 {
        match self {
            Elem::F16 | Elem::Bf16 => 16,
            _ => 8,
        }
    }
}

/// Scalar conversions, in [`Kind::SCvt`]'s `imm` order.
const S_CVT: &[&str] = &[
    "s_cvt_f32_i32",
    "s_cvt_f32_u32",
    "s_cvt_i32_f32",
    "s_cvt_u32_f32",
    "s_ceil_f32",
    "s_floor_f32",
    "s_trunc_f32",
    "s_rndne_f32",
];

/// Scalar f32 compares, in [`Kind::SCmpF32`]'s `imm` order.
const S_CMP: &[&str] = &[
    "lt", "eq", "le", "gt", "lg", "ge", "o", "u", "nge", "nlg", "ngt", "nle", "neq", "nlt",
];

/// The operation and its parameter a gfx12 mnemonic lowers to, if gfx11 has no twin.
pub(crate) struct Op(pub u16, pub u16);

impl Op {
    pub(crate) fn of(name: &str) -> Option<Op> {
        let k = |k: Kind, p: u16| Some(Op(k as u16, p));
        if let Some(ty) = name
            .strip_prefix("s_load_")
            .map(|t| (t, 0))
            .or_else(|| name.strip_prefix("s_buffer_load_").map(|t| (t, 1 << 9)))
        {
            let bytes = match ty.0 {
                "b96" => 12,
                "i8" => 1 | 1 << 8,
                "u8" => 1,
                "i16" => 2 | 1 << 8,
                "u16" => 2,
                _ => return None,
            };
            return k(Kind::SLoad, bytes | ty.1);
        }
        if let Some(c) = name
            .strip_prefix("s_cmp_")
            .and_then(|c| c.strip_suffix("_f32"))
        {
            return k(Kind::SCmpF32, S_CMP.iter().position(|x| *x == c)? as u16);
        }
        if let Some(p) = S_CVT.iter().position(|x| *x == name) {
            return k(Kind::SCvt, p as u16);
        }
        let f8 = |s: &str| match s {
            "fp8" => Some(0),
            "bf8" => Some(1),
            _ => None,
        };
        if let Some(t) = name.strip_prefix("v_cvt_f32_") {
            return k(Kind::CvtF32F8, f8(t)?);
        }
        if let Some(t) = name.strip_prefix("v_cvt_pk_f32_") {
            return k(Kind::CvtPkF32F8, f8(t)?);
        }
        if let Some((a, b)) = name
            .strip_prefix("v_dot4_f32_")
            .and_then(|t| t.split_once('_'))
        {
            return k(Kind::Dot4F32F8, f8(a)? | f8(b)? << 1);
        }
        if let Some((d, ab)) = name
            .strip_prefix("v_wmma_")
            .and_then(|t| t.split_once("_16x16x16_"))
        {
            let (a, b) = ab.split_once('_').unwrap_or((ab, ab));
            let (a, b, d) = (Elem::of(a)?, Elem::of(b)?, Elem::of(d)?);
            return k(Kind::Wmma, a as u16 | (b as u16) << 3 | (d as u16) << 6);
        }
        match name {
            "s_add_nc_u64" => k(Kind::S64, 0),
            "s_sub_nc_u64" => k(Kind::S64, 1),
            "s_mul_u64" => k(Kind::S64, 2),
            "s_add_f32" => k(Kind::SF32, 0),
            "s_sub_f32" => k(Kind::SF32, 1),
            "s_mul_f32" => k(Kind::SF32, 2),
            "s_max_num_f32" => k(Kind::SF32, 3),
            "s_min_num_f32" => k(Kind::SF32, 4),
            "s_fmac_f32" => k(Kind::SFma, 0),
            "s_fmamk_f32" => k(Kind::SFma, 1),
            "s_fmaak_f32" => k(Kind::SFma, 2),
            "v_s_exp_f32" => k(Kind::STrans, 0),
            "v_s_log_f32" => k(Kind::STrans, 1),
            "v_s_rcp_f32" => k(Kind::STrans, 2),
            "v_s_rsq_f32" => k(Kind::STrans, 3),
            "v_s_sqrt_f32" => k(Kind::STrans, 4),
            "v_maximum_f32" => k(Kind::MinMaxF32, 0),
            "v_minimum_f32" => k(Kind::MinMaxF32, 1),
            _ => None,
        }
    }
}

const KINDS: &[(Kind, &str)] = &[
    (Kind::SLoad, "s_load (gfx12)"),
    (Kind::S64, "s_*_u64 (gfx12)"),
    (Kind::SF32, "s_*_f32 (gfx12)"),
    (Kind::SFma, "s_fma*_f32 (gfx12)"),
    (Kind::SCvt, "s_cvt_* (gfx12)"),
    (Kind::SCmpF32, "s_cmp_*_f32 (gfx12)"),
    (Kind::STrans, "v_s_*_f32"),
    (Kind::CvtF32F8, "v_cvt_f32_fp8/bf8"),
    (Kind::CvtPkF32F8, "v_cvt_pk_f32_fp8/bf8"),
    (Kind::Dot4F32F8, "v_dot4_f32_fp8/bf8"),
    (Kind::MinMaxF32, "v_maximum/minimum_f32"),
    (Kind::Wmma, "v_wmma (gfx12)"),
];

fn kind(op: u16) -> Option<Kind> {
    KINDS.iter().map(|e| e.0).find(|k| *k as u16 == op)
}

/// Name of an operation (lowered instructions print through the gfx12 decoder instead).
pub(crate) fn op_name(op: u16) -> Option<&'static str> {
    KINDS.iter().find(|e| e.0 as u16 == op).map(|e| e.1)
}

/// Flushes an f32 denormal to a signed zero when the mode says so.
fn ftz(w: &Wave, x: f32) -> f32 {
    if w.mode.flush32() && x.is_subnormal() {
        f32::from_bits(x.to_bits() & 0x8000_0000)
    } else {
        x
    }
}

/// An 8-bit float (OCP E4M3 or E5M2, as gfx12 uses) as f32.
fn f8(x: u8, bf8: bool) -> f32 {
    if bf8 {
        bf8_to_f32(x, false)
    } else {
        fp8_to_f32(x, false)
    }
}

/// Runs an [`crate::rdna3::Encoding::Rdna4`] instruction.
pub(crate) fn run(w: &mut Wave, i: &Inst, idx: usize, ctx: &mut Ctx<'_>) -> Result<(), Error> {
    let Some(op) = kind(i.op) else {
        return Err(unimplemented(ctx, idx, i));
    };
    let p = i.imm2;
    let lit = i.literal;
    match op {
        Kind::SLoad => {
            let bytes = (p & 0xff) as usize;
            let buffer = p & 1 << 9 != 0;
            let base = w.sread64(i.src[0], 0, Ty::I64);
            let base = if buffer {
                base & 0xffff_ffff_ffff
            } else {
                base
            };
            let soff = if i.saddr == NULL {
                0
            } else {
                w.sread(i.saddr, 0) as u64
            };
            let addr = base.wrapping_add(i.imm as i64 as u64).wrapping_add(soff);
            // Dword loads ignore the low two address bits; sub-dword loads are aligned to
            // their size.
            let addr = if bytes >= 4 {
                addr & !3
            } else {
                addr & !(bytes as u64 - 1)
            };
            let mut buf = [0u8; 12];
            ctx.mem
                .read(addr, &mut buf[..bytes])
                .map_err(|f| fault(ctx, idx, i, 0, f))?;
            if bytes == 12 {
                for k in 0..3 {
                    let v = u32::from_le_bytes([
                        buf[4 * k],
                        buf[4 * k + 1],
                        buf[4 * k + 2],
                        buf[4 * k + 3],
                    ]);
                    w.sset(i.dst + k as u16, v);
                }
            } else {
                let raw = u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]);
                let signed = p & 1 << 8 != 0;
                let v = match (bytes, signed) {
                    (1, true) => raw as u8 as i8 as i32 as u32,
                    (1, false) => raw & 0xff,
                    (_, true) => raw as u16 as i16 as i32 as u32,
                    _ => raw & 0xffff,
                };
                w.sset(i.dst, v);
            }
        }
        Kind::S64 => {
            let a = w.sread64(i.src[0], lit, Ty::I64);
            let b = w.sread64(i.src[1], lit, Ty::I64);
            let r = match p {
                0 => a.wrapping_add(b),
                1 => a.wrapping_sub(b),
                _ => a.wrapping_mul(b),
            };
            w.sset64(i.dst, r);
        }
        Kind::SF32 => {
            let a = ftz(w, f32::from_bits(w.sread(i.src[0], lit)));
            let b = ftz(w, f32::from_bits(w.sread(i.src[1], lit)));
            let r = match p {
                0 => a + b,
                1 => a - b,
                2 => a * b,
                3 => fmax(a, b),
                _ => fmin(a, b),
            };
            w.sset(i.dst, ftz(w, r).to_bits());
        }
        Kind::SFma => {
            let a = ftz(w, f32::from_bits(w.sread(i.src[0], lit)));
            let b = ftz(w, f32::from_bits(w.sread(i.src[1], lit)));
            let k = ftz(w, f32::from_bits(lit));
            let d = ftz(w, f32::from_bits(w.sread(i.dst, lit)));
            let r = match p {
                0 => fma32(a, b, d),
                1 => fma32(a, k, b),
                _ => fma32(a, b, k),
            };
            w.sset(i.dst, ftz(w, r).to_bits());
        }
        Kind::SCvt => {
            let x = w.sread(i.src[0], lit);
            let f = ftz(w, f32::from_bits(x));
            // Float to integer saturates and takes NaN to 0, as Rust's `as` does.
            let r = match p {
                0 => (x as i32 as f32).to_bits(),
                1 => (x as f32).to_bits(),
                2 => f as i32 as u32,
                3 => f as u32,
                4 => f.ceil().to_bits(),
                5 => f.floor().to_bits(),
                6 => f.trunc().to_bits(),
                _ => f.round_ties_even().to_bits(),
            };
            w.sset(i.dst, r);
        }
        Kind::SCmpF32 => {
            let a = ftz(w, f32::from_bits(w.sread(i.src[0], lit)));
            let b = ftz(w, f32::from_bits(w.sread(i.src[1], lit)));
            use std::cmp::Ordering::{Equal, Greater, Less};
            // Unordered (a NaN) makes every ordered compare false and every `n` one true.
            let o = a.partial_cmp(&b);
            w.scc = match S_CMP.get(p as usize).copied().unwrap_or("") {
                "lt" => o == Some(Less),
                "eq" => o == Some(Equal),
                "le" => matches!(o, Some(Less | Equal)),
                "gt" => o == Some(Greater),
                "lg" => matches!(o, Some(Less | Greater)),
                "ge" => matches!(o, Some(Greater | Equal)),
                "o" => o.is_some(),
                "u" => o.is_none(),
                "nge" => !matches!(o, Some(Greater | Equal)),
                "nlg" => !matches!(o, Some(Less | Greater)),
                "ngt" => o != Some(Greater),
                "nle" => !matches!(o, Some(Less | Equal)),
                "neq" => o != Some(Equal),
                _ => o != Some(Less),
            };
        }
        Kind::STrans => {
            if i.omod != 0 || i.clamp {
                return Err(unimplemented(ctx, idx, i));
            }
            let mut x = f32::from_bits(w.sread(i.src[0], lit));
            if i.abs & 1 != 0 {
                x = x.abs();
            }
            if i.neg & 1 != 0 {
                x = -x;
            }
            // The vector instructions' definitions (`rdna3::exec`), on one value.
            let x = ftz(w, x) as f64;
            let r = match p {
                0 => x.exp2(),
                1 => x.log2(),
                2 => 1.0 / x,
                3 => 1.0 / x.sqrt(),
                _ => x.sqrt(),
            };
            w.sset(i.dst, ftz(w, r as f32).to_bits());
        }
        Kind::CvtF32F8 | Kind::CvtPkF32F8 => {
            if i.dpp != Dpp::None || i.omod != 0 || i.clamp {
                return Err(unimplemented(ctx, idx, i));
            }
            let bf = p & 1 != 0;
            let v = prep(w, i, [K::I32; 3]);
            let d = i.dst.wrapping_sub(VGPR0);
            each_lane(v.exec, w.lanes, |l| {
                let x = v.u32(w, 0, l);
                if op == Kind::CvtF32F8 {
                    let b = (x >> (8 * u32::from(p >> 4 & 3))) as u8;
                    w.wr(VGPR0 + d, l, f8(b, bf).to_bits());
                } else {
                    let h = x >> (16 * u32::from(i.opsel & 1));
                    w.wr(VGPR0 + d, l, f8(h as u8, bf).to_bits());
                    w.wr(VGPR0 + d + 1, l, f8((h >> 8) as u8, bf).to_bits());
                }
            });
        }
        Kind::Dot4F32F8 => {
            // D = C + sum of the four products, each step one fused multiply-add in order
            // (products of 8-bit floats are exact in f32). AMD documents the operation, not
            // the order of its adder: this is the emulator's definition.
            if i.dpp != Dpp::None || i.neg & 3 != 0 {
                return Err(unimplemented(ctx, idx, i));
            }
            let v = prep(w, i, [K::I32, K::I32, K::F32]);
            let d = (i.dst - VGPR0) as usize * 64;
            each_lane(v.exec, w.lanes, |l| {
                let (a, b) = (v.u32(w, 0, l), v.u32(w, 1, l));
                let mut acc = v.f32(w, 2, l);
                for e in 0..4 {
                    let x = f8((a >> (8 * e)) as u8, p & 1 != 0);
                    let y = f8((b >> (8 * e)) as u8, p & 2 != 0);
                    acc = fma32(x, y, acc);
                }
                w.v[d + l] = acc.to_bits();
            });
        }
        Kind::Wmma => return wmma(w, i, idx, ctx),
        Kind::MinMaxF32 => {
            if i.dpp != Dpp::None || i.omod != 0 || i.clamp {
                return Err(unimplemented(ctx, idx, i));
            }
            let v = prep(w, i, [K::F32; 3]);
            let d = (i.dst - VGPR0) as usize * 64;
            each_lane(v.exec, w.lanes, |l| {
                let (a, b) = (v.f32(w, 0, l), v.f32(w, 1, l));
                // IEEE 754-2019 maximum/minimum: NaN in, quiet NaN out; -0 < +0.
                let r = if a.is_nan() || b.is_nan() {
                    f32::NAN
                } else if p == 0 {
                    fmax(a, b)
                } else {
                    fmin(a, b)
                };
                w.v[d + l] = r.to_bits();
            });
        }
    }
    Ok(())
}

/// gfx12 WMMA, D = A·B + C on 16×16 matrices, wave32. The register layout (not that of gfx11):
/// A\[i\]\[k\] is in lane `i + 16·k[2]`, element `k[1:0] | k[3] << 2` of the lane's packed
/// elements (two 16-bit or four 8-bit per VGPR, from the first source VGPR up); B\[k\]\[j\]
/// likewise with lane `j + 16·k[2]`; C and D\[m\]\[n\] are in lane `n + 16·(m / 8)`, VGPR
/// `m mod 8` (f32, i32) or the `m mod 2` half of VGPR `(m mod 8) / 2` (f16, bf16). This is the
/// layout tinygrad's RDNA4 tensor-core support and emulator use; AMD's RDNA4 reference was not
/// at hand to check it. Each D\[m\]\[n\] starts from C and adds A\[m\]\[k\]·B\[k\]\[n\] for
/// k = 0..15 in order, each step one f32 fused multiply-add (products of 16- and 8-bit floats
/// are exact in f32), rounded to f16/bf16 at the end for those outputs; integers wrap, or
/// saturate with `clamp`. `neg_lo` negates A, B and C of float types and makes A and B signed
/// for `iu8`. The emulator's definition: the hardware's adder order is not documented.
fn wmma(w: &mut Wave, i: &Inst, idx: usize, ctx: &Ctx<'_>) -> Result<(), Error> {
    let p = i.imm2;
    let (ta, tb, td) = (
        Elem::from_bits(p),
        Elem::from_bits(p >> 3),
        Elem::from_bits(p >> 6),
    );
    let float_in = ta != Elem::Iu8;
    let vreg = |c: u16| c.checked_sub(VGPR0).map(usize::from);
    let (Some(ra), Some(rb)) = (vreg(i.src[0]), vreg(i.src[1])) else {
        return Err(unimplemented(ctx, idx, i));
    };
    let rc = vreg(i.src[2]);
    let rd = vreg(i.dst);
    let zero_c = i.src[2] == 128;
    if w.lanes != 32
        || i.dpp != Dpp::None
        || rd.is_none()
        || (rc.is_none() && !zero_c)
        || (float_in && i.clamp)
        || i.opsel != 0
        || i.abs != 0
    {
        return Err(unimplemented(ctx, idx, i));
    }
    let rd = rd.unwrap_or(0);
    let v = |row: usize, lane: usize| w.v.get(row * 64 + lane).copied().unwrap_or(0);
    // The raw bits of element k of row/column `x` of a source at `base`.
    let elem = |base: usize, t: Elem, x: usize, k: usize| -> u32 {
        let lane = x + 16 * (k >> 2 & 1);
        let e = (k & 3) | (k >> 1 & 4);
        let per = (32 / t.bits()) as usize;
        let word = v(base + e / per, lane);
        (word >> (t.bits() as usize * (e % per))) & ((1u32 << t.bits()) - 1)
    };
    let as_f32 = |t: Elem, bits: u32| -> f32 {
        match t {
            Elem::F16 => f16_to_f32(bits as u16),
            Elem::Bf16 => bf16_to_f32(bits as u16),
            Elem::Fp8 => f8(bits as u8, false),
            _ => f8(bits as u8, true),
        }
    };
    let c_at = |m: usize, n: usize| -> u32 {
        let Some(rc) = rc else { return 0 };
        let lane = n + 16 * (m / 8);
        match td {
            Elem::F16 | Elem::Bf16 => v(rc + (m % 8) / 2, lane) >> (16 * (m % 2)) & 0xffff,
            _ => v(rc + m % 8, lane),
        }
    };
    let mut out = [[0u32; 16]; 16];
    for (m, row) in out.iter_mut().enumerate() {
        for (n, o) in row.iter_mut().enumerate() {
            if float_in {
                let neg = |b: u8, x: f32| if i.neg >> b & 1 != 0 { -x } else { x };
                let c = c_at(m, n);
                let mut acc = neg(
                    2,
                    match td {
                        Elem::F16 => f16_to_f32(c as u16),
                        Elem::Bf16 => bf16_to_f32(c as u16),
                        _ => f32::from_bits(c),
                    },
                );
                for k in 0..16 {
                    let a = neg(0, as_f32(ta, elem(ra, ta, m, k)));
                    let b = neg(1, as_f32(tb, elem(rb, tb, n, k)));
                    acc = fma32(a, b, acc);
                }
                *o = match td {
                    Elem::F16 => f32_to_f16(acc) as u32,
                    Elem::Bf16 => f32_to_bf16(acc) as u32,
                    _ => acc.to_bits(),
                };
            } else {
                let ext = |b: u8, x: u32| -> i64 {
                    if i.neg >> b & 1 != 0 {
                        x as u8 as i8 as i64
                    } else {
                        x as i64
                    }
                };
                let mut acc = c_at(m, n) as i32 as i64;
                for k in 0..16 {
                    acc += ext(0, elem(ra, ta, m, k)) * ext(1, elem(rb, tb, n, k));
                }
                *o = if i.clamp {
                    acc.clamp(i32::MIN as i64, i32::MAX as i64) as i32 as u32
                } else {
                    acc as i32 as u32
                };
            }
        }
    }
    for (m, row) in out.iter().enumerate() {
        for (n, &o) in row.iter().enumerate() {
            let lane = n + 16 * (m / 8);
            match td {
                Elem::F16 | Elem::Bf16 => w.wr16(
                    VGPR0 + (rd + (m % 8) / 2) as u16,
                    lane,
                    m % 2 == 1,
                    o as u16,
                ),
                _ => w.wr(VGPR0 + (rd + m % 8) as u16, lane, o),
            }
        }
    }
    Ok(())
}
