//! `Tensor::cat` on every mock GPU (the optimiser on, as `am` runs them): along each axis,
//! of two and three pieces, sizes that fill the optimiser's tiles and sizes that do not,
//! against the pieces joined on the host.

use am_tensor::{Device, Tensor};

use crate::common::{Rng, cpu, mi300x, navi31, navi48};

/// The pieces (row-major, of `shapes`) joined along `axis` on the host.
fn joined(pieces: &[Vec<f32>], shapes: &[Vec<usize>], axis: usize) -> Vec<f32> {
    let outer: usize = shapes[0][..axis].iter().product();
    let mut out = Vec::new();
    for o in 0..outer {
        for (p, s) in pieces.iter().zip(shapes) {
            let row: usize = s[axis..].iter().product();
            out.extend_from_slice(&p[o * row..(o + 1) * row]);
        }
    }
    out
}

/// Shapes of the pieces: `base` with the length along `axis` taken from `lens`.
fn shapes_of(base: &[usize], axis: usize, lens: &[usize]) -> Vec<Vec<usize>> {
    lens.iter()
        .map(|&n| {
            let mut s = base.to_vec();
            s[axis] = n;
            s
        })
        .collect()
}

fn check_cat_on(dev: &Device, base: &[usize], axis: usize, lens: &[usize], rng: &mut Rng) {
    let shapes = shapes_of(base, axis, lens);
    // Values away from 0: a piece padded with zeros and added must keep its bits.
    let pieces: Vec<Vec<f32>> = shapes
        .iter()
        .map(|s| {
            let n: usize = s.iter().product();
            (0..n)
                .map(|_| {
                    let v = rng.uniform(0.5, 2.0) as f32;
                    if rng.uniform(0.0, 1.0) < 0.5 { -v } else { v }
                })
                .collect()
        })
        .collect();
    let tensors: Vec<Tensor> = pieces
        .iter()
        .zip(&shapes)
        .map(|(p, s)| Tensor::from_slice(p, s, dev).unwrap())
        .collect();
    let refs: Vec<&Tensor> = tensors.iter().collect();
    let c = Tensor::cat(&refs, axis as isize).unwrap();
    let got = c
        .to_vec::<f32>()
        .unwrap_or_else(|e| panic!("cat of {shapes:?} along axis {axis} on {}: {e}", dev.name()));
    let want = joined(&pieces, &shapes, axis);
    assert_eq!(got.len(), want.len(), "cat of {shapes:?}: lengths");
    if let Some(i) = (0..got.len()).find(|&i| got[i].to_bits() != want[i].to_bits()) {
        panic!(
            "cat of {shapes:?} along axis {axis} on {}: element {i} is {}, expected {}",
            dev.name(),
            got[i],
            want[i]
        );
    }
}

/// The cases: (shape of the other axes, axis, lengths along it).
fn cases() -> Vec<(Vec<usize>, usize, Vec<usize>)> {
    vec![
        (vec![0], 0, vec![4096, 4096]),
        (vec![0], 0, vec![1000, 24, 3]),
        (vec![0, 64], 0, vec![32, 32]),
        (vec![0, 64], 0, vec![7, 40, 17]),
        (vec![64, 0], 1, vec![32, 32]),
        (vec![48, 0], 1, vec![5, 64, 3]),
        (vec![4, 0, 16], 1, vec![8, 8, 3]),
        (vec![3, 0], 1, vec![4097, 3]),
    ]
}

#[test]
fn cat_joins_pieces_on_every_mock_gpu() {
    for dev in [cpu(), navi31(), navi48(), mi300x()] {
        let mut rng = Rng(37);
        for (base, axis, lens) in cases() {
            check_cat_on(&dev, &base, axis, &lens, &mut rng);
        }
    }
}
