//! Checks of the emulator's vectorised f32 helpers ([`am_emu::float::exp2_f32_row`] and
//! [`am_emu::float::cvt_i32`]) against their definitions: a sample in every `cargo test`, all
//! 2^32 inputs in the `#[ignore]`d tests that `scripts/run-tests` runs.
//!
//! Why a crate of its own: both helpers are `#[inline(always)]` (one also generic), so they are
//! compiled here, at this package's opt-level (3, in the workspace's `Cargo.toml`), where the
//! row code vectorises as it does in a release build. The 2^32 inputs took about four minutes of
//! CI's two cores at the emulator's test opt-level (1) and take about half a minute here,
//! without making the emulator itself slower to compile.

use am_emu::float::{cvt_i32, exp2_f32_row};

/// libm's f64 `exp2` rounded to f32: the emulator's general path for `v_exp_f32`.
pub fn exp2_libm(b: u32) -> u32 {
    ((f32::from_bits(b) as f64).exp2() as f32).to_bits()
}

/// `x as i32` with NaN → 0: what `v_cvt_i32_f32` gives.
pub fn cast_i32(b: u32) -> u32 {
    let x = f32::from_bits(b);
    if x.is_nan() { 0 } else { x as i32 as u32 }
}

/// Compares [`exp2_f32_row`] with [`exp2_libm`] on `inputs`, in rows of 64; the first input
/// that differs, with both results, or the count checked.
pub fn exp2_row_matches_libm(inputs: impl Iterator<Item = u32>) -> Result<u64, String> {
    let mut checked = 0u64;
    let mut row = [0u32; 64];
    let mut n = 0;
    let check = |row: &[u32; 64], n: usize| -> Result<u64, String> {
        let got = exp2_f32_row::<64>(row);
        for l in 0..n {
            let want = exp2_libm(row[l]);
            if got[l] != want {
                return Err(format!(
                    "exp2 of {:#010x} ({}): row gives {:#010x}, libm {want:#010x}",
                    row[l],
                    f32::from_bits(row[l]),
                    got[l]
                ));
            }
        }
        Ok(n as u64)
    };
    for b in inputs {
        row[n] = b;
        n += 1;
        if n == 64 {
            checked += check(&row, n)?;
            n = 0;
        }
    }
    if n > 0 {
        checked += check(&row, n)?;
    }
    Ok(checked)
}

/// Compares [`cvt_i32`] with [`cast_i32`] on `inputs`; the first input that differs or the
/// count checked.
pub fn cvt_i32_matches_the_cast(inputs: impl Iterator<Item = u32>) -> Result<u64, String> {
    let mut checked = 0u64;
    for b in inputs {
        let (got, want) = (cvt_i32(f32::from_bits(b)), cast_i32(b));
        if got != want {
            return Err(format!(
                "v_cvt_i32_f32 of {b:#010x} ({}): {got:#010x}, the cast {want:#010x}",
                f32::from_bits(b)
            ));
        }
        checked += 1;
    }
    Ok(checked)
}

/// Runs `check` over all 2^32 inputs split across the machine's threads; the total checked.
pub fn every_f32(check: fn(std::ops::Range<u64>) -> Result<u64, String>) -> Result<u64, String> {
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get()) as u64;
    let chunk = (1u64 << 32).div_ceil(threads);
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|t| {
                let range = t * chunk..((t + 1) * chunk).min(1 << 32);
                s.spawn(move || check(range))
            })
            .collect();
        hs.into_iter().try_fold(0, |sum, h| {
            let n = h
                .join()
                .map_err(|_| "a checking thread panicked".to_string())??;
            Ok(sum + n)
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXP2_EDGES: [u32; 25] = [
        0,
        0x8000_0000,
        0x3f80_0000,
        0xbf80_0000,
        0x7f80_0000,
        0xff80_0000,
        0x7fc0_0000,
        0x7f80_0001,
        0xffc0_1234,
        0x4300_0000,
        0x42ff_ffff,
        0x4300_0001,
        0xc316_0000,
        0xc315_ffff,
        0xc316_0001,
        0xc2fc_0000,
        0xc2fb_ffff,
        0xc2fc_0001,
        0xc317_0000,
        0x0000_0001,
        0x8000_0001,
        0x7f7f_ffff,
        0xff7f_ffff,
        0x3f00_0000,
        0xbf00_0000,
    ];

    #[test]
    fn exp2_row_equals_libm_on_edges_and_a_sample() {
        assert_eq!(
            exp2_row_matches_libm(EXP2_EDGES.into_iter()),
            Ok(EXP2_EDGES.len() as u64)
        );
        // Every 997th bit pattern, and every f32 in [-1, 1) with a coarse step.
        let sample = exp2_row_matches_libm((0..=u32::MAX).step_by(997));
        assert!(sample.as_ref().is_ok_and(|&n| n > 4_000_000), "{sample:?}");
        let near_zero = (-(1i32 << 23)..(1 << 23))
            .step_by(61)
            .map(|i| (i as f32 / (1 << 23) as f32).to_bits());
        assert!(exp2_row_matches_libm(near_zero).is_ok());
    }

    #[test]
    fn cvt_i32_equals_the_saturating_cast_on_edges_and_a_sample() {
        let edges = [
            0x4f00_0000,
            0x4eff_ffff,
            0xcf00_0000,
            0xcf00_0001,
            0x3f80_0000,
            0x3f7f_ffff,
            0xbf80_0000,
            0x7f80_0000,
            0xff80_0000,
            0x7fc0_0000,
            0xff80_0001,
        ];
        let n = cvt_i32_matches_the_cast((0..=u32::MAX).step_by(251).chain(edges));
        assert_eq!(n, Ok(u64::from(u32::MAX) / 251 + 1 + edges.len() as u64));
    }

    /// All 2^32 inputs (about half a minute on 2 cores): `scripts/run-tests` runs it, or
    /// `cargo test -p am-emu-exhaustive -- --ignored`.
    #[test]
    #[ignore]
    fn exp2_row_equals_libm_for_every_f32() {
        let n = every_f32(|r| exp2_row_matches_libm(r.map(|b| b as u32)));
        assert_eq!(n, Ok(1 << 32));
    }

    /// All 2^32 inputs, as above.
    #[test]
    #[ignore]
    fn cvt_i32_equals_the_saturating_cast_for_every_f32() {
        let n = every_f32(|r| cvt_i32_matches_the_cast(r.map(|b| b as u32)));
        assert_eq!(n, Ok(1 << 32));
    }
}
