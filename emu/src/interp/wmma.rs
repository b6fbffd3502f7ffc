//! WMMA (wave matrix multiply-accumulate) of RDNA3 (gfx11) and RDNA4 (gfx12): D = A·B + C on
//! 16×16 tiles spread over the lanes of a wave, in wave32 and wave64.
//!
//! The register layouts are those of AMD's Matrix Instruction Calculator (ROCm
//! `amd_matrix_instruction_calculator`, `--detail-instruction` of each `v_wmma_*`), with A[i][k]
//! (row i), B[k][j] (column j) and C/D[i][j]:
//!
//! - gfx11: lane `x` (0–15) holds row/column `x` of A and B, all of K packed little-endian from
//!   the first source VGPR; lanes 16–63 must hold copies of lanes 0–15, and the emulator reads
//!   lanes 0–15, as the calculator lists them. C/D: with `r` = lanes / 16 rows per VGPR,
//!   element [i][j] is in VGPR `i / r`, lane `16·(i mod r) + j`; 16-bit results use the low
//!   halves, or the high halves with `op_sel[2]`, and leave the other half as it was.
//! - gfx12, wave32: a lane holds half of a row or column of A and B: the row's elements are
//!   cut into chunks of 8 bytes (4 bytes for the 16x16x16 iu4, whose row is only 8 bytes) that
//!   go in turn to lane `x` and lane `x + 16`, each lane packing its chunks from the first VGPR
//!   up. C/D[i][j] is element `i mod 8` of lane `16·(i / 8) + j` (one per VGPR for 32-bit
//!   types, two for 16-bit ones).
//! - gfx12, wave64: the wave32 layout with the upper half of each operand's VGPRs moved to lanes
//!   32–63 (VGPR `v` of `n` becomes VGPR `v mod n/2` of lane `+ 32·(v / (n/2))`); the
//!   16x16x16 iu4 sources, one VGPR in wave32, stay in lanes 0–31.
//!
//! Arithmetic (AMD documents the operation, not its adder, so this is the emulator's
//! definition): each D[i][j] starts from C[i][j] and adds A[i][k]·B[k][j] for k = 0, 1, …,
//! K − 1 in that order, each step one f32 fused multiply-add (products of f16, bf16, fp8 and
//! bf8 values are exact in f32, so a step rounds only the sum), rounded once to f16/bf16 at the
//! end for those results. Integer sums are exact and wrap, or saturate with `clamp`. Modifiers,
//! as the calculator describes them: on float types `neg_lo[0]`/`neg_hi[0]` negate the A
//! elements in the low/high 16 bits of each register (so both negate all of A), likewise
//! `[1]` for B, and `neg_lo[2]` negates C while `neg_hi[2]` takes |C|; on integer types
//! `neg_lo[0]`/`neg_lo[1]` make A/B signed. C may be an inline constant, the same value in
//! every element. EXEC is not consulted: the whole wave computes.
//!
//! Forms whose behaviour no source settles report `Unimplemented`: float `clamp`, `op_sel`
//! other than gfx11's `op_sel[2]` on 16-bit results, negation of 8-bit float A or B (LLVM
//! allows only C's), `neg_lo[2]` or `neg_hi` on integers, a float inline constant for a bf16
//! C, and A, B or D not in VGPRs.

use crate::interp::exec::{Ty, fma32, inline_const};
use crate::interp::float::{
    bf8_to_f32, bf16_to_f32, f16_to_f32, f32_to_bf16, f32_to_f16, fp8_to_f32,
};
use crate::interp::inst::{Inst, VGPR0};
use crate::interp::wave::Wave;

/// Element types of WMMA operands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Elem {
    F16 = 0,
    Bf16 = 1,
    Iu8 = 2,
    Iu4 = 3,
    Fp8 = 4,
    Bf8 = 5,
    F32 = 6,
    I32 = 7,
}

impl Elem {
    const ALL: [Elem; 8] = [
        Elem::F16,
        Elem::Bf16,
        Elem::Iu8,
        Elem::Iu4,
        Elem::Fp8,
        Elem::Bf8,
        Elem::F32,
        Elem::I32,
    ];

    fn of(name: &str) -> Option<Elem> {
        Some(match name {
            "f16" => Elem::F16,
            "bf16" => Elem::Bf16,
            "iu8" => Elem::Iu8,
            "iu4" => Elem::Iu4,
            "fp8" => Elem::Fp8,
            "bf8" => Elem::Bf8,
            "f32" => Elem::F32,
            "i32" => Elem::I32,
            _ => return None,
        })
    }

    fn bits(self) -> u32 {
        match self {
            Elem::F16 | Elem::Bf16 => 16,
            Elem::Iu8 | Elem::Fp8 | Elem::Bf8 => 8,
            Elem::Iu4 => 4,
            Elem::F32 | Elem::I32 => 32,
        }
    }

    fn is_int(self) -> bool {
        matches!(self, Elem::Iu8 | Elem::Iu4 | Elem::I32)
    }

    /// The value of a float element's raw bits.
    fn to_f32(self, raw: u32) -> f32 {
        match self {
            Elem::F16 => f16_to_f32(raw as u16),
            Elem::Bf16 => bf16_to_f32(raw as u16),
            // gfx12's 8-bit floats are OCP E4M3 and E5M2.
            Elem::Fp8 => fp8_to_f32(raw as u8, false),
            Elem::Bf8 => bf8_to_f32(raw as u8, false),
            _ => f32::from_bits(raw),
        }
    }
}

/// One WMMA instruction's shape: element types of A, B and C/D, and K (16 or 32).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Form {
    pub a: Elem,
    pub b: Elem,
    pub d: Elem,
    pub k: u32,
}

impl Form {
    /// The form of a `v_wmma_<d>_16x16x<k>_<a>[_<b>]` mnemonic.
    pub(crate) fn of(name: &str) -> Option<Form> {
        let (d, rest) = name.strip_prefix("v_wmma_")?.split_once("_16x16x")?;
        let (k, ab) = rest.split_once('_')?;
        let (a, b) = ab.split_once('_').unwrap_or((ab, ab));
        Some(Form {
            a: Elem::of(a)?,
            b: Elem::of(b)?,
            d: Elem::of(d)?,
            k: match k {
                "16" => 16,
                "32" => 32,
                _ => return None,
            },
        })
    }

    /// The form as 10 bits (a lowered instruction's parameter).
    pub(crate) fn pack(self) -> u16 {
        self.a as u16 | (self.b as u16) << 3 | (self.d as u16) << 6 | u16::from(self.k == 32) << 9
    }

    pub(crate) fn unpack(v: u16) -> Form {
        let e = |s: u16| Elem::ALL[usize::from(v >> s & 7)];
        Form {
            a: e(0),
            b: e(3),
            d: e(6),
            k: if v >> 9 & 1 != 0 { 32 } else { 16 },
        }
    }
}

/// Where an element lives: lane, VGPR offset from the operand's first, bit offset.
type Place = (usize, usize, u32);

/// Element `k` of row (A) or column (B) `x` of a source of `bits`-bit elements.
fn ab_place(gfx12: bool, wave64: bool, bits: u32, kdim: u32, x: u32, k: u32) -> Place {
    let per = 32 / bits;
    if !gfx12 {
        return (x as usize, (k / per) as usize, bits * (k % per));
    }
    let half_bytes = kdim * bits / 16;
    let chunk = (8.min(half_bytes) * 8 / bits).max(1);
    let (c, o) = (k / chunk, k % chunk);
    let p = c / 2 * chunk + o;
    let (mut lane, mut vgpr) = (x + 16 * (c % 2), p / per);
    let regs = half_bytes / 4;
    if wave64 && regs >= 2 {
        lane += 32 * (vgpr / (regs / 2));
        vgpr %= regs / 2;
    }
    (lane as usize, vgpr as usize, bits * (p % per))
}

/// C/D[i][j] of `bits`-bit elements; `hi` is gfx11's `op_sel[2]` for 16-bit results.
fn cd_place(gfx12: bool, wave64: bool, bits: u32, hi: bool, i: u32, j: u32) -> Place {
    if !gfx12 {
        let rows = if wave64 { 4 } else { 2 };
        let bit = if bits == 16 && hi { 16 } else { 0 };
        return ((16 * (i % rows) + j) as usize, (i / rows) as usize, bit);
    }
    let per = 32 / bits;
    let p = i % 8;
    let (mut lane, mut vgpr) = (16 * (i / 8) + j, p / per);
    if wave64 {
        let half = 8 / per / 2;
        lane += 32 * (vgpr / half);
        vgpr %= half;
    }
    (lane as usize, vgpr as usize, bits * (p % per))
}

/// Why a WMMA cannot run (the caller reports the instruction as unimplemented).
pub(crate) struct Unsupported;

/// Runs a WMMA of `form` on gfx11 or gfx12 register layouts.
pub(crate) fn run(w: &mut Wave, i: &Inst, form: Form, gfx12: bool) -> Result<(), Unsupported> {
    let vreg = |c: u16| c.checked_sub(VGPR0).map(usize::from);
    let (Some(ra), Some(rb), Some(rd)) = (vreg(i.src[0]), vreg(i.src[1]), vreg(i.dst)) else {
        return Err(Unsupported);
    };
    let wave64 = w.lanes == 64;
    let int = form.a.is_int();
    let (neg, neg_hi) = (i.neg & 7, i.abs & 7);
    let hi = !gfx12 && form.d.bits() == 16 && i.opsel & 4 != 0;
    let refused = i.dpp != crate::interp::inst::Dpp::None
        || (i.clamp && !int)
        || i.opsel & if gfx12 || form.d.bits() != 16 { 7 } else { 3 } != 0
        || (int && (neg & 4 != 0 || neg_hi != 0))
        || (form.a.bits() == 8 && !int && (neg | neg_hi) & 3 != 0);
    if refused {
        return Err(Unsupported);
    }
    let dbits = form.d.bits();
    // C as raw element bits: a VGPR operand, or one inline constant for every element.
    let c_const = match vreg(i.src[2]) {
        Some(_) => None,
        None => {
            let ty = if dbits == 16 { Ty::B16 } else { Ty::B32 };
            let v = inline_const(i.src[2], ty).ok_or(Unsupported)?;
            if form.d == Elem::Bf16 && i.src[2] >= 240 {
                return Err(Unsupported);
            }
            Some(v as u32)
        }
    };
    let rc = vreg(i.src[2]).unwrap_or(0);
    let word = |base: usize, (lane, vgpr, _): Place| -> u32 {
        w.v.get((base + vgpr) * 64 + lane).copied().unwrap_or(0)
    };
    let field = |base: usize, p: Place, bits: u32| -> u32 {
        let raw = word(base, p) >> p.2;
        if bits == 32 {
            raw
        } else {
            raw & ((1 << bits) - 1)
        }
    };
    let kdim = form.k;
    let mut out = [[0u32; 16]; 16];
    if int {
        let value = |e: Elem, signed: bool, raw: u32| -> i64 {
            let bits = e.bits();
            if signed {
                ((raw << (32 - bits)) as i32 >> (32 - bits)) as i64
            } else {
                raw as i64
            }
        };
        let mut a = [[0i64; 32]; 16];
        let mut b = [[0i64; 32]; 16];
        for x in 0..16 {
            for k in 0..kdim {
                let pa = ab_place(gfx12, wave64, form.a.bits(), kdim, x, k);
                let pb = ab_place(gfx12, wave64, form.b.bits(), kdim, x, k);
                a[x as usize][k as usize] =
                    value(form.a, neg & 1 != 0, field(ra, pa, form.a.bits()));
                b[x as usize][k as usize] =
                    value(form.b, neg & 2 != 0, field(rb, pb, form.b.bits()));
            }
        }
        for (m, row) in out.iter_mut().enumerate() {
            for (n, o) in row.iter_mut().enumerate() {
                let p = cd_place(gfx12, wave64, 32, false, m as u32, n as u32);
                let c = c_const.unwrap_or_else(|| word(rc, p));
                let mut acc = c as i32 as i64;
                for k in 0..kdim as usize {
                    acc += a[m][k] * b[n][k];
                }
                *o = if i.clamp {
                    acc.clamp(i32::MIN.into(), i32::MAX.into()) as i32 as u32
                } else {
                    acc as i32 as u32
                };
            }
        }
    } else {
        let value = |e: Elem, p: Place, raw: u32, src: u8| -> f32 {
            let x = e.to_f32(raw);
            let negated = if p.2 < 16 { neg } else { neg_hi } >> src & 1 != 0;
            if negated { -x } else { x }
        };
        let mut a = [[0f32; 32]; 16];
        let mut b = [[0f32; 32]; 16];
        for x in 0..16 {
            for k in 0..kdim {
                let pa = ab_place(gfx12, wave64, form.a.bits(), kdim, x, k);
                let pb = ab_place(gfx12, wave64, form.b.bits(), kdim, x, k);
                a[x as usize][k as usize] = value(form.a, pa, field(ra, pa, form.a.bits()), 0);
                b[x as usize][k as usize] = value(form.b, pb, field(rb, pb, form.b.bits()), 1);
            }
        }
        for (m, row) in out.iter_mut().enumerate() {
            for (n, o) in row.iter_mut().enumerate() {
                let p = cd_place(gfx12, wave64, dbits, hi, m as u32, n as u32);
                let raw = c_const.unwrap_or_else(|| field(rc, p, dbits));
                let mut c = form.d.to_f32(raw);
                if neg_hi & 4 != 0 {
                    c = c.abs();
                }
                if neg & 4 != 0 {
                    c = -c;
                }
                let mut acc = c;
                for k in 0..kdim as usize {
                    acc = fma32(a[m][k], b[n][k], acc);
                }
                *o = match form.d {
                    Elem::F16 => f32_to_f16(acc).into(),
                    Elem::Bf16 => f32_to_bf16(acc).into(),
                    _ => acc.to_bits(),
                };
            }
        }
    }
    for (m, row) in out.iter().enumerate() {
        for (n, &o) in row.iter().enumerate() {
            let (lane, vgpr, bit) = cd_place(gfx12, wave64, dbits, hi, m as u32, n as u32);
            let dst = VGPR0 + (rd + vgpr) as u16;
            if dbits == 16 {
                w.wr16(dst, lane, bit == 16, o as u16);
            } else {
                w.wr(dst, lane, o);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
