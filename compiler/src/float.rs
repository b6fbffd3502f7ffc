//! Half-precision conversions (f16, bf16) for constants and for the tests' references.
//! Rounding is to nearest, ties to even.

use crate::ir::Scalar;

/// f16 bits → f32 (exact).
pub fn f16_to_f32(h: u16) -> f32 {
    let sign = if h & 0x8000 != 0 { -1.0f32 } else { 1.0 };
    let exp = (h >> 10) & 0x1f;
    let man = f32::from(h & 0x3ff);
    match exp {
        0 => sign * man * 2f32.powi(-24),
        31 if man == 0.0 => sign * f32::INFINITY,
        31 => f32::from_bits(
            0x7f80_0000 | (u32::from(h & 0x8000) << 16) | (u32::from(h & 0x3ff) << 13),
        ),
        e => sign * (1024.0 + man) * 2f32.powi(i32::from(e) - 25),
    }
}

/// f64 → f16 bits, correctly rounded.
pub fn f64_to_f16(x: f64) -> u16 {
    let b = x.to_bits();
    let sign = ((b >> 48) & 0x8000) as u16;
    let a = b & 0x7fff_ffff_ffff_ffff;
    if a > 0x7ff0_0000_0000_0000 {
        // NaN: keep the top payload bits, quiet.
        return sign | 0x7e00 | ((a >> 42) & 0x1ff) as u16;
    }
    let ax = f64::from_bits(a);
    if ax >= 65520.0 {
        return sign | 0x7c00;
    }
    if ax < 2f64.powi(-14) {
        // Subnormal (or zero): the integer nearest to ax·2^24, ties to even; 1024 becomes
        // the smallest normal, which is the right encoding.
        return sign | round_even(ax * 2f64.powi(24)) as u16;
    }
    let m = a >> 42;
    let rest = a & ((1 << 42) - 1);
    let half = 1u64 << 41;
    let up = u64::from(rest > half || (rest == half && m & 1 == 1));
    sign | ((m + up) - (1008 << 10)) as u16
}

fn round_even(x: f64) -> f64 {
    let r = x.round();
    if (r - x).abs() == 0.5 && r % 2.0 != 0.0 {
        r - x.signum()
    } else {
        r
    }
}

/// f32 → f16 bits, correctly rounded.
pub fn f32_to_f16(x: f32) -> u16 {
    if x.is_nan() {
        let b = x.to_bits();
        return ((b >> 16) & 0x8000) as u16 | 0x7e00 | ((b >> 13) & 0x1ff) as u16;
    }
    f64_to_f16(f64::from(x))
}

/// bf16 bits → f32 (exact).
pub fn bf16_to_f32(h: u16) -> f32 {
    f32::from_bits(u32::from(h) << 16)
}

/// f32 → bf16 bits, correctly rounded (NaN stays NaN, quiet).
pub fn f32_to_bf16(x: f32) -> u16 {
    let b = x.to_bits();
    if x.is_nan() {
        return ((b >> 16) | 0x40) as u16;
    }
    ((b + 0x7fff + ((b >> 16) & 1)) >> 16) as u16
}

/// The value of a float constant's bits (for printing and references).
pub fn to_f64(s: Scalar, bits: u64) -> f64 {
    match s {
        Scalar::F16 => f64::from(f16_to_f32(bits as u16)),
        Scalar::BF16 => f64::from(bf16_to_f32(bits as u16)),
        Scalar::F32 => f64::from(f32::from_bits(bits as u32)),
        _ => f64::from_bits(bits),
    }
}

/// The bits of `x` rounded to the float type `s` (f64 → bf16 rounds through f32, as the
/// kernels' casts do).
pub fn from_f64(s: Scalar, x: f64) -> u64 {
    match s {
        Scalar::F16 => u64::from(f64_to_f16(x)),
        Scalar::BF16 => u64::from(f32_to_bf16(x as f32)),
        Scalar::F32 => u64::from((x as f32).to_bits()),
        _ => x.to_bits(),
    }
}
