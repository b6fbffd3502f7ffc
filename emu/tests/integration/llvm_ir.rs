//! Kernels written in LLVM IR and compiled by llc-22: correctly rounded f32 and f64 division
//! (the v_div_scale / v_div_fmas / v_div_fixup sequence), f64 sqrt, 64-bit integer division,
//! and bf16 arithmetic (which gfx1100 does in integer and f32 instructions).

use crate::common;
use am_emu::{CodeObject, HostMemory, Isa, Program};
use common::*;

const IR: &str = r#"
target triple = "amdgcn-amd-amdhsa"

declare i32 @llvm.amdgcn.workitem.id.x()
declare i32 @llvm.amdgcn.workgroup.id.x()
declare double @llvm.sqrt.f64(double)

define amdgpu_kernel void @divs(ptr addrspace(1) %a, ptr addrspace(1) %b, ptr addrspace(1) %q,
                                ptr addrspace(1) %qd, ptr addrspace(1) %u, ptr addrspace(1) %bf) {
  %t = call i32 @llvm.amdgcn.workitem.id.x()
  %g = call i32 @llvm.amdgcn.workgroup.id.x()
  %g64 = shl i32 %g, 6
  %i = add i32 %g64, %t
  %i64 = zext i32 %i to i64
  %pa = getelementptr float, ptr addrspace(1) %a, i64 %i64
  %pb = getelementptr float, ptr addrspace(1) %b, i64 %i64
  %x = load float, ptr addrspace(1) %pa
  %y = load float, ptr addrspace(1) %pb
  %r = fdiv float %x, %y
  %pq = getelementptr float, ptr addrspace(1) %q, i64 %i64
  store float %r, ptr addrspace(1) %pq
  %xd = fpext float %x to double
  %yd = fpext float %y to double
  %rd = fdiv double %xd, %yd
  %ad = call double @llvm.fabs.f64(double %rd)
  %sq = call double @llvm.sqrt.f64(double %ad)
  %pqd = getelementptr double, ptr addrspace(1) %qd, i64 %i64
  store double %rd, ptr addrspace(1) %pqd
  %pqs = getelementptr double, ptr addrspace(1) %pqd, i64 4096
  store double %sq, ptr addrspace(1) %pqs
  %xi = bitcast double %xd to i64
  %yi = bitcast double %yd to i64
  %ys = lshr i64 %yi, 17
  %yi1 = or i64 %ys, 1
  %ud = udiv i64 %xi, %yi1
  %ur = srem i64 %xi, %yi1
  %us = xor i64 %ud, %ur
  %pu = getelementptr i64, ptr addrspace(1) %u, i64 %i64
  store i64 %us, ptr addrspace(1) %pu
  %xb = fptrunc float %x to bfloat
  %yb = fptrunc float %y to bfloat
  %sb = fadd bfloat %xb, %yb
  %mb = fmul bfloat %sb, %yb
  %pbf = getelementptr bfloat, ptr addrspace(1) %bf, i64 %i64
  store bfloat %mb, ptr addrspace(1) %pbf
  ret void
}
declare double @llvm.fabs.f64(double)
"#;

fn bf16(x: f32) -> f32 {
    am_emu::float::bf16_to_f32(am_emu::float::f32_to_bf16(x))
}

#[test]
fn division_sqrt_i64_division_and_bf16_match_reference() {
    let bytes = compile_ll(IR);
    let co = CodeObject::parse(&bytes, "divs.ll").unwrap();
    let prog = Program::new(&co, Isa::Gfx1100).unwrap();
    let k = (co, prog);
    let n = 1024usize;
    let mut r = Rng(11);
    let mut a: Vec<f32> = (0..n)
        .map(|_| f32::from_bits(r.next() as u32 & 0x7fff_ffff | (r.next() as u32 & 0x8000_0000)))
        .collect();
    let mut b: Vec<f32> = (0..n).map(|_| r.f32(-1000.0, 1000.0)).collect();
    // Edge cases of the division sequence: huge/tiny quotients, denormals, zeros, infinities.
    let edges = [
        (1.0, 3.0),
        (1e38, 1e-38),
        (1e-38, 1e38),
        (3e38, 0.5),
        (1e-45, 3.0),
        (1e-40, 1e-40),
        (7.0, 0.0),
        (0.0, 0.0),
        (f32::INFINITY, 2.0),
        (2.0, f32::INFINITY),
        (f32::NAN, 1.0),
        (-5.0, 1e-39),
        (f32::MIN_POSITIVE, 3.0),
        (16777215.0, 16777216.0),
        (-0.0, 5.0),
        (1e30, 1e-10),
    ];
    for (k, (x, y)) in edges.iter().enumerate() {
        a[k] = *x;
        b[k] = *y;
    }
    // Every region of the division sequence's scaling: exponents from subnormal to huge.
    let exps: Vec<i32> = (-149..=127).step_by(13).collect();
    let mut lane = 64;
    for &ea in &exps {
        for &eb in &exps {
            a[lane] = 1.3 * 2f32.powi(ea.max(-126)) * 2f32.powi((ea + 126).min(0));
            b[lane] = -1.7 * 2f32.powi(eb.max(-126)) * 2f32.powi((eb + 126).min(0));
            lane += 1;
        }
    }
    for v in a.iter_mut().chain(b.iter_mut()) {
        if v.is_nan() && v.to_bits() != f32::NAN.to_bits() {
            *v = 1.5;
        }
    }
    let mut mem = HostMemory::new();
    let (pa, pb) = (upload(&mut mem, &a), upload(&mut mem, &b));
    let pq = mem.alloc(4 * n);
    let pqd = mem.alloc(8 * 4096 + 8 * n);
    assert!(n <= 4096);
    let pu = mem.alloc(8 * n);
    let pbf = mem.alloc(2 * n);
    launch(
        &k,
        "divs",
        [n as u32, 1, 1],
        [64, 1, 1],
        Args::default()
            .ptr(pa)
            .ptr(pb)
            .ptr(pq)
            .ptr(pqd)
            .ptr(pu)
            .ptr(pbf),
        &mut mem,
    );
    let q = download_f32(&mut mem, pq, n);
    let qd = download_u64(&mut mem, pqd, n);
    let sq = download_u64(&mut mem, pqd + 8 * 4096, n);
    let u = download_u64(&mut mem, pu, n);
    let bf = download_u16(&mut mem, pbf, n);
    for i in 0..n {
        let (x, y) = (a[i], b[i]);
        let want = x / y;
        assert!(
            q[i].to_bits() == want.to_bits() || (q[i].is_nan() && want.is_nan()),
            "{x} / {y} = {} want {want}",
            q[i]
        );
        let wd = x as f64 / y as f64;
        let got = f64::from_bits(qd[i]);
        assert!(
            got.to_bits() == wd.to_bits() || (got.is_nan() && wd.is_nan()),
            "f64 {x} / {y} = {got} want {wd}"
        );
        let ws = wd.abs().sqrt();
        let gs = f64::from_bits(sq[i]);
        assert!(
            gs.to_bits() == ws.to_bits() || (gs.is_nan() && ws.is_nan()),
            "sqrt(|{wd}|) = {gs} want {ws}"
        );
        let xi = (x as f64).to_bits();
        let yi = ((y as f64).to_bits() >> 17) | 1;
        assert_eq!(
            u[i],
            (xi / yi) ^ ((xi as i64).wrapping_rem(yi as i64) as u64),
            "i64 div/rem of {xi:#x}, {yi:#x}"
        );
        let wb = am_emu::float::f32_to_bf16(bf16(bf16(x) + bf16(y)) * bf16(y));
        let gb = bf[i];
        let both_nan =
            am_emu::float::bf16_to_f32(gb).is_nan() && am_emu::float::bf16_to_f32(wb).is_nan();
        assert!(
            gb == wb || both_nan,
            "bf16 ({x} + {y}) * {y} = {gb:#x} want {wb:#x}"
        );
    }
}
