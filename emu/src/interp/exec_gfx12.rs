//! Semantics only gfx12 has among the instructions compute kernels use: the sub-dword and
//! 96-bit scalar loads, 64-bit scalar add/sub/multiply, scalar f32 arithmetic, conversions,
//! compares and transcendentals, the OCP fp8/bf8 to f32 conversions, the fp8/bf8 dot products, the
//! NaN-propagating `v_minimum/v_maximum_f32`; WMMA goes to [`super::wmma`]. Everything else
//! gfx12 runs through [`super::exec`] after `rdna4::lower`.

use crate::Error;
use crate::interp::exec::{K, Ty, each_lane, fault, fma32, fmax, fmin, prep, unimplemented};
use crate::interp::float::{bf8_to_f32, fp8_to_f32};
use crate::interp::inst::{Dpp, Inst, NULL, VGPR0};
use crate::interp::wave::{Ctx, Wave};

/// gfx12 operations without a gfx11 twin ([`crate::interp::inst::Encoding::Rdna4`] opcodes); some
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
    /// `v_wmma_*`: `imm` is the packed [`crate::interp::wmma::Form`].
    Wmma,
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
        if let Some(form) = crate::interp::wmma::Form::of(name) {
            return k(Kind::Wmma, form.pack());
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

/// Runs an [`crate::interp::inst::Encoding::Rdna4`] instruction.
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
            // The vector instructions' definitions (`exec.rs`), on one value.
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
        Kind::Wmma => {
            return crate::interp::wmma::run(w, i, crate::interp::wmma::Form::unpack(p), true)
                .map_err(|_| unimplemented(ctx, idx, i));
        }
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
