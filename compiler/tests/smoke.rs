#![allow(clippy::unwrap_used)]
mod common;
use am_compiler::*;
use common::*;

#[test]
fn vadd_runs_on_gpu_and_cpu() {
    let mut b = KernelBuilder::new("vadd", [64, 1, 1]);
    let x = b.param_ptr("x", DType::F32, true);
    let y = b.param_ptr("y", DType::F32, true);
    let z = b.param_ptr("z", DType::F32, true);
    let n = b.param("n", DType::U32);
    let i = b.global_id(Dim::X);
    let c = b.cmp(CmpOp::Lt, i, n);
    b.if_(c, |b| {
        let a = b.load_elem(x, i);
        let bb = b.load_elem(y, i);
        let s = b.add(a, bb);
        b.store_elem(z, i, s);
    });
    let k = b.finish().unwrap();
    println!("{}", text::print(&k));
    println!("{}", lower::lower(&k, Target::Gfx1100).unwrap());
    let n = 200usize;
    let xs: Vec<f32> = (0..n).map(|i| i as f32 * 0.5).collect();
    let ys: Vec<f32> = (0..n).map(|i| 1.0 / (i as f32 + 1.0)).collect();
    let out = run_both(&k, [4, 1, 1], &[buf(&xs), buf(&ys), zeros(4 * n), scalar(n as u32)]);
    let z: Vec<f32> = from_bytes(&out[2]);
    for i in 0..n {
        assert_eq!(z[i].to_bits(), (xs[i] + ys[i]).to_bits());
    }
}
