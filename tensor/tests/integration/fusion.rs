//! What the scheduler makes of graphs: how many kernels, and which memory. Each test has a
//! fresh device of its own so the counts are its alone.

use crate::common;

use am_tensor::{DType, Device, Tensor};
use common::compiler;

fn fresh() -> Device {
    Device::cpu_with(compiler())
}

fn kernels_of(dev: &Device, t: &Tensor) -> u64 {
    let before = dev.kernels_launched();
    t.realize().unwrap();
    dev.kernels_launched() - before
}

fn input(dev: &Device, shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    let v: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).sin()).collect();
    Tensor::from_slice(&v, shape, dev).unwrap()
}

#[test]
fn a_chain_of_five_elementwise_ops_is_one_kernel() {
    let dev = fresh();
    let x = input(&dev, &[8, 16]);
    let y = x.mul(2.0).unwrap().add(1.0).unwrap().exp().sqrt().neg();
    assert_eq!(kernels_of(&dev, &y), 1);
    let got = y.to_vec::<f32>().unwrap();
    let want = -(0.37f32 * 3.0).sin().mul_add(2.0, 1.0).exp().sqrt();
    assert!((got[3] - want).abs() < 1e-5, "{} vs {want}", got[3]);
}

#[test]
fn softmax_takes_at_most_three_kernels() {
    let dev = fresh();
    let y = input(&dev, &[8, 10]).softmax(-1).unwrap();
    let k = kernels_of(&dev, &y);
    assert!(k <= 3, "softmax took {k} kernels");
    let log = input(&dev, &[8, 10]).log_softmax(-1).unwrap();
    let k = kernels_of(&dev, &log);
    assert!(k <= 3, "log_softmax took {k} kernels");
}

#[test]
fn views_never_get_kernels_of_their_own() {
    let dev = fresh();
    let x = input(&dev, &[4, 6]);
    // A view chain read by an elementwise op: one kernel, the views are index arithmetic.
    let v = x
        .permute(&[1, 0])
        .unwrap()
        .reshape(&[2, 3, 4])
        .unwrap()
        .flip(&[2])
        .unwrap()
        .pad(&[(0, 0), (1, 0), (0, 0)])
        .unwrap()
        .add(1.0)
        .unwrap();
    assert_eq!(kernels_of(&dev, &v), 1);
    // A reshape of computed memory is that memory.
    let r = x.reshape(&[24]).unwrap();
    assert_eq!(kernels_of(&dev, &r), 0);
    assert_eq!(r.to_vec::<f32>().unwrap(), x.to_vec::<f32>().unwrap());
}

#[test]
fn reductions_fuse_with_their_inputs_and_outputs() {
    let dev = fresh();
    let x = input(&dev, &[16, 8]);
    let w = input(&dev, &[8, 4]);
    let b = input(&dev, &[4]);
    // matmul (a multiply and a sum) + bias + relu: one kernel.
    let h = x.matmul(&w).unwrap().add(&b).unwrap().relu();
    assert_eq!(kernels_of(&dev, &h), 1);
    // A mean of a squared difference: one kernel.
    let m = x.sub(1.0).unwrap().square().mean(&[], false).unwrap();
    assert_eq!(kernels_of(&dev, &m), 1);
    // A reduction read through a broadcast is computed once, not per element.
    let c = x.sub(&x.mean(&[1], true).unwrap()).unwrap();
    assert_eq!(kernels_of(&dev, &c), 2);
}

#[test]
fn a_long_chain_read_by_a_matmul_is_computed_once_into_memory() {
    let dev = fresh();
    let x = input(&dev, &[16, 8]);
    let w = input(&dev, &[8, 4]);
    // Three elementwise operations, each element read by 4 output columns: stored once by a
    // kernel of its own, then read by the product.
    let chain = |x: &Tensor| x.mul(2.0).unwrap().add(1.0).unwrap().exp();
    let y = chain(&x).matmul(&w).unwrap();
    assert_eq!(kernels_of(&dev, &y), 2);
    // The same values as the chain realized by hand first.
    let c = chain(&x);
    c.realize().unwrap();
    let want = c.matmul(&w).unwrap().to_vec::<f32>().unwrap();
    assert_eq!(y.to_vec::<f32>().unwrap(), want);
    // A short chain stays inside the product's loop.
    let z = x.add(1.0).unwrap().matmul(&w).unwrap();
    assert_eq!(kernels_of(&dev, &z), 1);
}

#[test]
fn memory_of_dead_intermediates_is_reused_within_a_schedule() {
    let dev = fresh();
    let x = input(&dev, &[64, 8]);
    // Four kernels: a, b, c ([64, 1] each, read through broadcasts) and the result
    // ([64, 8], another size).
    let a = x.sum(&[1], true).unwrap();
    let b = x.sub(&a).unwrap().max(&[1], true).unwrap();
    let c = x.mul(&b).unwrap().sum(&[1], true).unwrap();
    let d = x.add(&c).unwrap();
    drop((a, b, c));
    let (k0, m0) = (dev.kernels_launched(), dev.allocations());
    d.realize().unwrap();
    assert_eq!(dev.kernels_launched() - k0, 4);
    assert_eq!(
        dev.allocations() - m0,
        3,
        "c takes a's memory once b has read it"
    );
}

#[test]
fn results_held_by_tensors_are_kept_and_not_recomputed() {
    let dev = fresh();
    let x = input(&dev, &[4, 8]);
    let s = x.sum(&[1], true).unwrap();
    let y = x.div(&s).unwrap();
    Tensor::realize_all(&[&s, &y]).unwrap();
    assert!(s.is_realized() && y.is_realized());
    let z = y.add(&s).unwrap();
    assert_eq!(
        kernels_of(&dev, &z),
        1,
        "s and y are read, not computed again"
    );
    let i = Tensor::ones(&[3], DType::I32, &dev);
    assert_eq!(i.to_vec::<i32>().unwrap(), [1, 1, 1]);
}

#[test]
fn assignments_write_in_place() {
    let dev = fresh();
    let p = input(&dev, &[4, 8]);
    let before = p.to_vec::<f32>().unwrap();
    let q = p.clone();
    let m0 = dev.allocations();
    p.assign(&p.mul(2.0).unwrap()).unwrap();
    assert_eq!(kernels_of(&dev, &p), 1);
    assert_eq!(dev.allocations(), m0, "no new memory: the kernel wrote p's");
    let after = q.to_vec::<f32>().unwrap();
    for (a, b) in after.iter().zip(&before) {
        assert_eq!(*a, b * 2.0);
    }
    // An assignment that reads its target elsewhere than in place (a transpose) goes
    // through fresh memory and a copy back.
    let s = input(&dev, &[4, 4]);
    let st = s.t().unwrap().to_vec::<f32>().unwrap();
    s.assign(&s.t().unwrap()).unwrap();
    assert_eq!(kernels_of(&dev, &s), 2);
    assert_eq!(s.to_vec::<f32>().unwrap(), st);
}

#[test]
fn a_long_unrealized_chain_is_dropped_without_overflowing_the_stack() {
    let dev = fresh();
    let mut x = input(&dev, &[2]);
    for _ in 0..200_000 {
        x = x.add(1.0).unwrap();
    }
    drop(x);
}

/// Reductions nested in a reduction, fused into one kernel (the gpt demo's count of exactly
/// answered problems: per problem, whether each answer digit's logit beats the others'),
/// compile and load on the mock gfx1100. LLVM gives such a kernel up to every addressable
/// SGPR plus VCC (107 here), which the runtime refused as more than a wave has.
#[test]
fn nested_small_reductions_in_one_kernel_load_on_gfx1100() {
    let gpu = common::navi31();
    let cpu = common::cpu();
    let vocab = 12;
    for (batch, answer) in [(16, 2), (32, 4), (64, 2)] {
        // Logits in [-1, 1], the target's raised to 2 in two problems of three.
        let rows = batch * answer;
        let t: Vec<i32> = (0..rows).map(|r| (r * 5 % vocab) as i32).collect();
        let mut v: Vec<f32> = (0..rows * vocab).map(|i| (i as f32 * 1.47).sin()).collect();
        for r in (0..rows).filter(|r| r / answer % 3 != 0) {
            v[r * vocab + t[r] as usize] = 2.0;
        }
        let beats = |r: usize| {
            let row = &v[r * vocab..(r + 1) * vocab];
            let target = row[t[r] as usize];
            (0..vocab).all(|j| j == t[r] as usize || row[j] < target)
        };
        let want = (0..batch)
            .filter(|p| (0..answer).all(|d| beats(p * answer + d)))
            .count() as i32;
        let count = |dev: &Device| -> i32 {
            let logits = Tensor::from_slice(&v, &[rows, vocab], dev).unwrap();
            let targets = Tensor::from_slice(&t, &[rows], dev).unwrap();
            let pick = targets.one_hot(vocab).unwrap().cast(DType::Bool);
            let target = pick
                .where_(&logits, 0.0)
                .unwrap()
                .sum(&[-1], false)
                .unwrap();
            let others = pick
                .where_(f64::NEG_INFINITY, &logits)
                .unwrap()
                .max(&[-1], false)
                .unwrap();
            let exact = target
                .gt(&others)
                .unwrap()
                .reshape(&[-1, answer as isize])
                .unwrap()
                .sum(&[-1], false)
                .unwrap()
                .eq(answer as i32)
                .unwrap();
            let c = exact.cast(DType::I32).sum(&[], false).unwrap();
            c.to_vec::<i32>()
                .unwrap_or_else(|e| panic!("batch {batch}, {answer} digits on {}: {e}", dev.name()))
                [0]
        };
        for dev in [&cpu, &gpu] {
            assert_eq!(
                count(dev),
                want,
                "batch {batch}, {answer} digits: exactly answered problems on {}",
                dev.name()
            );
        }
    }
}
