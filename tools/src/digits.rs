//! The 8×8 handwritten digits (scikit-learn's copy of the UCI set, `data/`), with a fixed
//! split into training and test images.

use anyhow::bail;

/// The packed data set: per image, 64 pixel bytes (0–16) and the label byte.
const PACKED: &[u8] = include_bytes!("../data/digits.bin.zst");

/// Images in the set.
pub const IMAGES: usize = 1797;
/// Images of the training split (80 %).
pub const TRAIN_IMAGES: usize = IMAGES * 4 / 5;
/// Pixels per image.
pub const PIXELS: usize = 64;
/// Classes.
pub const CLASSES: usize = 10;

/// Images (pixels scaled to [0, 1]) and labels.
#[derive(Clone, Debug, Default)]
pub struct Set {
    /// `len × 64` pixels, row-major.
    pub pixels: Vec<f32>,
    /// Labels 0–9.
    pub labels: Vec<i32>,
}

impl Set {
    /// Images in the set.
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    /// The images at `idx`, in that order.
    pub fn select(&self, idx: &[usize]) -> Set {
        let mut s = Set::default();
        for &i in idx {
            s.pixels
                .extend_from_slice(&self.pixels[i * PIXELS..(i + 1) * PIXELS]);
            s.labels.push(self.labels[i]);
        }
        s
    }
}

/// SplitMix64: the host's fixed-seed generator for the split and the batch order.
pub struct SplitMix(pub u64);

impl SplitMix {
    /// The next 64 random bits.
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// `0..n` shuffled (Fisher–Yates).
    pub fn permutation(&mut self, n: usize) -> Vec<usize> {
        let mut v: Vec<usize> = (0..n).collect();
        for i in (1..n).rev() {
            let j = (self.next() % (i as u64 + 1)) as usize;
            v.swap(i, j);
        }
        v
    }
}

/// The whole set, in the file's order.
pub fn load() -> anyhow::Result<Set> {
    let raw = am_firmware::locate::decompress_zstd(PACKED, (IMAGES * (PIXELS + 1)) as u64)
        .map_err(|reason| anyhow::anyhow!("unpacking the digits data set: {reason}"))?;
    if raw.len() != IMAGES * (PIXELS + 1) {
        bail!(
            "the digits data set has {} bytes, not {}",
            raw.len(),
            IMAGES * (PIXELS + 1)
        );
    }
    let mut s = Set::default();
    for rec in raw.chunks(PIXELS + 1) {
        s.pixels
            .extend(rec[..PIXELS].iter().map(|&p| f32::from(p) / 16.0));
        s.labels.push(i32::from(rec[PIXELS]));
    }
    Ok(s)
}

/// The fixed split: the images shuffled with seed 0, the first 80 % (1,437) for training,
/// the rest (360) for testing; every pixel standardised with the training images' mean and
/// standard deviation (pixels that never vary stay 0).
pub fn split() -> anyhow::Result<(Set, Set)> {
    let all = load()?;
    let order = SplitMix(0).permutation(all.len());
    let n_train = TRAIN_IMAGES;
    let (mut train, mut test) = (all.select(&order[..n_train]), all.select(&order[n_train..]));
    let n = train.len() as f64;
    for p in 0..PIXELS {
        let col = || {
            train
                .pixels
                .iter()
                .skip(p)
                .step_by(PIXELS)
                .map(|&v| f64::from(v))
        };
        let mean = col().sum::<f64>() / n;
        let var = col().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
        let scale = if var > 0.0 { 1.0 / var.sqrt() } else { 0.0 };
        for set in [&mut train, &mut test] {
            for v in set.pixels.iter_mut().skip(p).step_by(PIXELS) {
                *v = ((f64::from(*v) - mean) * scale) as f32;
            }
        }
    }
    Ok((train, test))
}
