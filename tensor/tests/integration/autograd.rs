//! Gradients against finite differences of the forward computation itself, on random shapes
//! and values (property tests on the CPU).

use crate::common;

use am_tensor::Tensor;
use common::cpu;
use proptest::prelude::*;

/// A smooth scalar function of one tensor of shape `[r, c]`, chosen by `which`.
fn f(which: u8, x: &Tensor, w: &Tensor) -> am_tensor::Result<Tensor> {
    let y = match which % 8 {
        0 => x.mul(w)?.tanh().sum(&[], false)?,
        1 => x.softmax(-1)?.mul(w)?.sum(&[], false)?,
        2 => x.log_softmax(0)?.mul(w)?.mean(&[], false)?,
        3 => x.t()?.matmul(&w.sigmoid())?.square().sum(&[], false)?,
        4 => x
            .exp()
            .add(1.0)?
            .log()
            .div(&w.square().add(1.0)?)?
            .sum(&[1], false)?
            .sum(&[], false)?,
        5 => x
            .flip(&[1])?
            .pad(&[(1, 0), (0, 2)])?
            .gelu()
            .sum(&[], false)?,
        6 => {
            let c = Tensor::cat(&[x, &x.mul(w)?], 0)?;
            c.max(&[0], false)?.sum(&[], false)?
        }
        _ => x
            .mul(w)?
            .sum(&[0], true)?
            .expand(&x.shape())?
            .mul(x)?
            .sqrt()
            .sum(&[], false)?,
    };
    Ok(y)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn gradients_match_finite_differences(
        which in 0u8..8,
        r in 1usize..4,
        c in 1usize..4,
        seed in 0u32..1000,
    ) {
        let dev = cpu();
        let n = r * c;
        // Positive values away from 0: sqrt and the kinks of max stay smooth.
        let xs: Vec<f32> = Tensor::uniform(&[n], 0.5, 1.5, seed, &dev).unwrap().to_vec().unwrap();
        let ws: Vec<f32> = Tensor::uniform(&[n], 0.5, 1.5, seed + 7, &dev).unwrap().to_vec().unwrap();
        if which % 8 == 6 {
            // The maximum has a kink where two candidates of a column tie: a finite difference
            // across it measures neither side's slope. Keep the top two apart by more than
            // the step.
            for col in 0..c {
                let mut cand: Vec<f32> = (0..r)
                    .flat_map(|row| [xs[row * c + col], xs[row * c + col] * ws[row * c + col]])
                    .collect();
                cand.sort_by(|a, b| b.total_cmp(a));
                prop_assume!(cand.len() < 2 || cand[0] - cand[1] > 0.05);
            }
        }
        let w = Tensor::from_slice(&ws, &[r, c], &dev).unwrap();
        let x = Tensor::from_slice(&xs, &[r, c], &dev).unwrap();
        x.set_requires_grad(true);
        f(which, &x, &w).unwrap().backward().unwrap();
        let g = x.grad().unwrap().to_vec::<f32>().unwrap();
        let eval = |v: &[f32]| -> f64 {
            let t = Tensor::from_slice(v, &[r, c], &dev).unwrap();
            f64::from(f(which, &t, &w).unwrap().item().unwrap())
        };
        let h = 1e-2f32;
        for i in 0..n {
            let (mut up, mut down) = (xs.clone(), xs.clone());
            up[i] += h;
            down[i] -= h;
            let fd = (eval(&up) - eval(&down)) / (2.0 * f64::from(h));
            let got = f64::from(g[i]);
            prop_assert!(
                (got - fd).abs() <= 2e-2 * fd.abs().max(1.0),
                "function {which}, x[{i}] of [{r}, {c}]: backward {got}, finite difference {fd}"
            );
        }
    }
}
