//! IEEE half and bfloat16 conversions (round to nearest even), done by hand so the crate needs
//! no float library.

/// f32 → f16 bits, round to nearest even; NaNs stay quiet NaNs with their top payload bits.
pub fn f32_to_f16(x: f32) -> u16 {
    let b = x.to_bits();
    let sign = ((b >> 16) & 0x8000) as u16;
    let exp = ((b >> 23) & 0xff) as i32;
    let man = b & 0x7f_ffff;
    if exp == 0xff {
        return if man == 0 {
            sign | 0x7c00
        } else {
            sign | 0x7e00 | (man >> 13) as u16
        };
    }
    let e = exp - 127 + 15;
    if e >= 0x1f {
        return sign | 0x7c00;
    }
    if e <= 0 {
        if e < -10 {
            return sign;
        }
        // Subnormal half: shift the full significand and round once.
        let m = man | 0x80_0000;
        let shift = (14 - e) as u32;
        let half = m >> shift;
        let rem = m & ((1 << shift) - 1);
        let mid = 1 << (shift - 1);
        let r = if rem > mid || (rem == mid && half & 1 == 1) {
            half + 1
        } else {
            half
        };
        return sign | r as u16;
    }
    let half = ((e as u32) << 10) | (man >> 13);
    let rem = man & 0x1fff;
    let r = if rem > 0x1000 || (rem == 0x1000 && half & 1 == 1) {
        half + 1
    } else {
        half
    };
    sign | r as u16
}

/// f64 → f16 bits with a single rounding (via the exact f64 value).
pub fn f64_to_f16(x: f64) -> u16 {
    // Round to f32 with round-to-odd first, which makes the second rounding exact.
    let f = x as f32;
    if f.is_finite() && f as f64 != x {
        let b = f.to_bits();
        let odd = if b & 1 == 0 {
            // Move toward x by one ulp only if that makes the last bit odd.
            let toward = if (f as f64) < x {
                f32::from_bits(if f >= 0.0 { b + 1 } else { b - 1 })
            } else {
                f32::from_bits(if f > 0.0 { b - 1 } else { b + 1 })
            };
            if toward.to_bits() & 1 == 1 { toward } else { f }
        } else {
            f
        };
        return f32_to_f16(odd);
    }
    f32_to_f16(f)
}

/// f16 bits → f32 (exact).
pub fn f16_to_f32(h: u16) -> f32 {
    let sign = ((h & 0x8000) as u32) << 16;
    let exp = ((h >> 10) & 0x1f) as u32;
    let man = (h & 0x3ff) as u32;
    let bits = match exp {
        0 if man == 0 => sign,
        0 => {
            // Subnormal: normalise.
            let lz = man.leading_zeros() - 21;
            let m = (man << lz) & 0x3ff;
            sign | ((127 - 15 + 1 - lz) << 23) | (m << 13)
        }
        0x1f => sign | 0x7f80_0000 | (man << 13) | if man != 0 { 0x40_0000 } else { 0 },
        _ => sign | ((exp + 127 - 15) << 23) | (man << 13),
    };
    f32::from_bits(bits)
}

/// bf16 bits → f32 (exact).
pub fn bf16_to_f32(h: u16) -> f32 {
    f32::from_bits((h as u32) << 16)
}

/// f32 → bf16 bits, round to nearest even.
pub fn f32_to_bf16(x: f32) -> u16 {
    let b = x.to_bits();
    if x.is_nan() {
        return ((b >> 16) | 0x40) as u16;
    }
    let r = b + 0x7fff + ((b >> 16) & 1);
    (r >> 16) as u16
}

/// An 8-bit E4M3 float to f32 (exact). `fnuz`: the gfx942 flavour (exponent bias 8, no
/// infinities, 0x80 is the only NaN); otherwise OCP E4M3FN as gfx950 has it (bias 7, no
/// infinities, S.1111.111 is NaN).
pub fn fp8_to_f32(x: u8, fnuz: bool) -> f32 {
    small_float(x, 4, 3, if fnuz { 8 } else { 7 }, fnuz, false)
}

/// An 8-bit E5M2 float to f32 (exact). `fnuz`: gfx942 (bias 16, no infinities, 0x80 is the
/// only NaN); otherwise OCP E5M2 as gfx950 has it (bias 15, IEEE infinities and NaNs).
pub fn bf8_to_f32(x: u8, fnuz: bool) -> f32 {
    small_float(x, 5, 2, if fnuz { 16 } else { 15 }, fnuz, !fnuz)
}

fn small_float(x: u8, ebits: u32, mbits: u32, bias: i32, fnuz: bool, ieee_special: bool) -> f32 {
    let sign = if x & 0x80 != 0 { -1.0f32 } else { 1.0 };
    let e = ((x as u32) >> mbits) & ((1 << ebits) - 1);
    let m = (x as u32) & ((1 << mbits) - 1);
    let emax = (1 << ebits) - 1;
    if fnuz && x == 0x80 {
        return f32::NAN;
    }
    if ieee_special && e == emax {
        return if m == 0 {
            sign * f32::INFINITY
        } else {
            f32::NAN
        };
    }
    if !fnuz && !ieee_special && e == emax && m == (1 << mbits) - 1 {
        return f32::NAN;
    }
    let frac = m as f32 / (1 << mbits) as f32;
    let v = if e == 0 {
        frac * (2.0f32).powi(1 - bias)
    } else {
        (1.0 + frac) * (2.0f32).powi(e as i32 - bias)
    };
    sign * v
}

/// Taylor coefficients of 2^r = e^(r ln 2): ln2^n / n!, n = 0..=13 (the n = 14 term is below
/// 2^-56 of the result for |r| <= 1/2).
const EXP2_TAYLOR: [f64; 14] = {
    let mut c = [1.0f64; 14];
    let mut n = 1;
    while n < 14 {
        c[n] = c[n - 1] * std::f64::consts::LN_2 / n as f64;
        n += 1;
    }
    c
};

/// f32 → i32 rounding toward zero, saturating, NaN → 0 (what `x as i32` gives, NaN included),
/// from the bits with 32-bit integer operations only: Rust's saturating cast compiled to a
/// scalar conversion and two compares per lane (9 % of the run loop in a gfx942 `fmath`
/// profile), this vectorises. Equal to the cast for every input (the exhaustive check in `am-emu-exhaustive`).
#[inline(always)]
pub fn cvt_i32(x: f32) -> u32 {
    let b = x.to_bits();
    let e = (b >> 23) & 0xff;
    let m = (b & 0x7f_ffff) | 0x80_0000;
    // |x| = m · 2^(e - 150); for e in 127..=157 the result fits in 31 bits.
    let mag = if e >= 150 {
        m.wrapping_shl(e.wrapping_sub(150))
    } else {
        m.wrapping_shr(150u32.wrapping_sub(e))
    };
    let neg = b >> 31 != 0;
    let v = if neg { mag.wrapping_neg() } else { mag };
    let sat = if neg { 0x8000_0000 } else { 0x7fff_ffff };
    let nan = b & 0x7fff_ffff > 0x7f80_0000;
    if e < 127 || nan {
        0
    } else if e >= 158 {
        sat
    } else {
        v
    }
}

/// How close (in f64 units in the last place) the row approximation may come to a point where
/// its f32 rounding changes before it is no longer trusted: its own error (Taylor truncation
/// and the polynomial's roundings, a few units of 2^-53 relative) plus libm's (about half an
/// f64 ulp) is at most a few ulps, far below this, and the exhaustive check in `am-emu-exhaustive`
/// proves the choice for every input.
const EXP2_MARGIN_ULPS: u32 = 128;

/// `v_exp_f32` of a row of lanes (f32 bits in, f32 bits out): for every input exactly
/// `(a as f64).exp2() as f32`, libm's f64 `exp2` rounded to f32, which is what the general path
/// computes lane by lane. Every lane is computed by the same straight-line f64 code (split
/// off the nearest integer, a polynomial evaluated with short dependency chains, a power-of-two
/// scale), which the compiler vectorises, and its rounding to f32 is trusted when the 29 bits
/// that rounding drops are not within [`EXP2_MARGIN_ULPS`] of the halfway point. Inputs below
/// -150 give +0 (2^a is below half the smallest f32 denormal) and inputs above 129 count as
/// 129 (+∞ either way). A lane that is not certain — about one in 2·10^6, and every NaN or
/// input in [-150, -126) (results at or below the f32 denormal range, whose rounding drops
/// more bits) — makes the whole row be redone with libm.
#[inline(always)]
pub fn exp2_f32_row<const L: usize>(x: &[u32; L]) -> [u32; L] {
    // Adding 1.5·2^52 rounds an f64 of magnitude below 2^51 to an integer in the low bits.
    const ROUND: f64 = 6_755_399_441_055_744.0;
    let c = &EXP2_TAYLOR;
    let mut out = [0u32; L];
    let mut unsure = 0u32;
    for (o, &b) in out.iter_mut().zip(x) {
        let a = f32::from_bits(b);
        let zero = a < -150.0;
        // Not (yet) certain: NaN, and results that are f32 denormals or at their edge.
        let edge = ((a < -126.0) | a.is_nan()) & !zero;
        let a = (if zero {
            0.0
        } else if a > 129.0 {
            129.0
        } else {
            a
        }) as f64;
        let t = a + ROUND;
        let k = t - ROUND;
        // Exact: a has at most 24 significant bits and k is the integer nearest to it.
        let r = a - k;
        // Estrin's scheme: a chain of 5 multiply-adds instead of Horner's 13.
        let (r2, q): (f64, [f64; 7]) =
            (r * r, std::array::from_fn(|j| c[2 * j] + c[2 * j + 1] * r));
        let r4 = r2 * r2;
        let s = [q[0] + q[1] * r2, q[2] + q[3] * r2, q[4] + q[5] * r2];
        let p = (s[0] + s[1] * r4) + (s[2] + q[6] * r4) * (r4 * r4);
        // 2^k from the integer in t's low bits (k + 1023 is in 873..=1152).
        let y = p * f64::from_bits(t.to_bits().wrapping_add(1023) << 52);
        // The 29 bits below an f32 significand, offset so that the halfway point's
        // neighbourhood is 0..2 * EXP2_MARGIN_ULPS (32-bit lanes, like the other flags).
        let low = (y.to_bits() as u32 & 0x1fff_ffff).wrapping_sub(0x1000_0000 - EXP2_MARGIN_ULPS);
        unsure |= ((low < 2 * EXP2_MARGIN_ULPS) | edge) as u32;
        *o = if zero { 0 } else { (y as f32).to_bits() };
    }
    if unsure != 0 {
        for (o, &b) in out.iter_mut().zip(x) {
            *o = ((f32::from_bits(b) as f64).exp2() as f32).to_bits();
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f16_round_trip_is_exact_for_every_half() {
        for h in 0..=u16::MAX {
            let f = f16_to_f32(h);
            if f.is_nan() {
                assert!(f16_to_f32(f32_to_f16(f)).is_nan());
            } else {
                assert_eq!(f32_to_f16(f), h, "{h:#x} -> {f}");
            }
        }
    }

    #[test]
    fn f16_to_f32_decodes_known_values() {
        assert_eq!(f16_to_f32(0x0001), f32::powi(2.0, -24));
        assert_eq!(f16_to_f32(0x03ff), 1023.0 * f32::powi(2.0, -24));
        assert_eq!(f16_to_f32(0x0400), f32::powi(2.0, -14));
        assert_eq!(f16_to_f32(0x3c00), 1.0);
        assert_eq!(f16_to_f32(0xc000), -2.0);
        assert_eq!(f16_to_f32(0x7bff), 65504.0);
        assert_eq!(f16_to_f32(0x7c00), f32::INFINITY);
        assert!(f16_to_f32(0x7e00).is_nan());
    }

    #[test]
    fn f32_to_f16_rounds_ties_to_even() {
        // 1 + 2^-11 is halfway between 1.0 and the next half; ties go to even (1.0).
        assert_eq!(f32_to_f16(1.0 + f32::powi(2.0, -11)), 0x3c00);
        assert_eq!(f32_to_f16(1.0 + 3.0 * f32::powi(2.0, -11)), 0x3c02);
        assert_eq!(f32_to_f16(65520.0), 0x7c00);
        assert_eq!(f32_to_f16(65519.0), 0x7bff);
        assert_eq!(f32_to_f16(f32::powi(2.0, -25)), 0);
        assert_eq!(f32_to_f16(f32::powi(2.0, -25) * 1.5), 1);
    }

    #[test]
    fn f64_to_f16_rounds_once() {
        // Just above the tie between 1.0 and 1+2^-10: f32 would round to the tie, then to even.
        let x = 1.0 + f64::powi(2.0, -11) + f64::powi(2.0, -40);
        assert_eq!(f64_to_f16(x), 0x3c01);
    }
}
