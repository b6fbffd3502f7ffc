//! Whole kernels compiled by clang-22 at test time, run on the emulator and compared with a
//! Rust reference: exactly, or within a stated ulp bound for the transcendental functions.

use crate::common;
use am_emu::HostMemory;
use common::*;

fn check_vadd_matches_reference_with_partial_last_workgroup(
    k: &'static (am_emu::CodeObject, am_emu::Program),
) {
    let n = 1000u32; // not a multiple of 256: the last workgroup has 232 work-items
    let mut r = Rng(1);
    let a: Vec<f32> = (0..n).map(|_| r.f32(-10.0, 10.0)).collect();
    let b: Vec<f32> = (0..n).map(|_| r.f32(-10.0, 10.0)).collect();
    let mut mem = HostMemory::new();
    let (pa, pb) = (upload(&mut mem, &a), upload(&mut mem, &b));
    let pc = mem.alloc(4 * n as usize);
    launch(
        k,
        "vadd",
        [n, 1, 1],
        [256, 1, 1],
        Args::default().ptr(pa).ptr(pb).ptr(pc).u32(n),
        &mut mem,
    );
    let c = download_f32(&mut mem, pc, n as usize);
    for k in 0..n as usize {
        assert_eq!(c[k].to_bits(), (a[k] + b[k]).to_bits(), "c[{k}]");
    }
}

fn check_saxpy_matches_reference(k: &'static (am_emu::CodeObject, am_emu::Program)) {
    let n = 512u32;
    let mut r = Rng(2);
    let x: Vec<f32> = (0..n).map(|_| r.f32(-1.0, 1.0)).collect();
    let y: Vec<f32> = (0..n).map(|_| r.f32(-1.0, 1.0)).collect();
    let alpha = 1.7f32;
    let mut mem = HostMemory::new();
    let (px, py) = (upload(&mut mem, &x), upload(&mut mem, &y));
    launch(
        k,
        "saxpy",
        [n, 1, 1],
        [256, 1, 1],
        Args::default().f32(alpha).ptr(px).ptr(py).u32(n),
        &mut mem,
    );
    let out = download_f32(&mut mem, py, n as usize);
    for k in 0..n as usize {
        // LLVM contracts alpha * x + y into one fused multiply-add.
        assert_eq!(
            out[k].to_bits(),
            alpha.mul_add(x[k], y[k]).to_bits(),
            "y[{k}]"
        );
    }
}

fn check_reduce_through_lds_with_barriers_sums_each_workgroup(
    k: &'static (am_emu::CodeObject, am_emu::Program),
) {
    let groups = 4usize;
    let mut r = Rng(3);
    let input: Vec<f32> = (0..256 * groups).map(|_| r.f32(0.0, 1.0)).collect();
    let mut mem = HostMemory::new();
    let pin = upload(&mut mem, &input);
    let pout = mem.alloc(4 * groups);
    let stats = launch(
        k,
        "reduce",
        [256 * groups as u32, 1, 1],
        [256, 1, 1],
        Args::default().ptr(pin).ptr(pout),
        &mut mem,
    );
    let ws = k.0.kernel("reduce").unwrap().descriptor.wave_size() as u64;
    assert_eq!(
        stats.waves,
        256 / ws * groups as u64,
        "256 work-items are 256/{ws} waves"
    );
    let out = download_f32(&mut mem, pout, groups);
    for g in 0..groups {
        // The same tree order as the kernel.
        let mut buf: Vec<f32> = input[256 * g..256 * (g + 1)].to_vec();
        let mut s = 128;
        while s > 0 {
            for t in 0..s {
                buf[t] += buf[t + s];
            }
            s >>= 1;
        }
        assert_eq!(out[g].to_bits(), buf[0].to_bits(), "group {g}");
    }
}

fn check_tiled_matmul_matches_reference(k: &'static (am_emu::CodeObject, am_emu::Program)) {
    let n = 32usize;
    let mut r = Rng(4);
    let a: Vec<f32> = (0..n * n).map(|_| r.f32(-1.0, 1.0)).collect();
    let b: Vec<f32> = (0..n * n).map(|_| r.f32(-1.0, 1.0)).collect();
    let mut mem = HostMemory::new();
    let (pa, pb) = (upload(&mut mem, &a), upload(&mut mem, &b));
    let pc = mem.alloc(4 * n * n);
    launch(
        k,
        "matmul",
        [n as u32, n as u32, 1],
        [16, 16, 1],
        Args::default().ptr(pa).ptr(pb).ptr(pc).u32(n as u32),
        &mut mem,
    );
    let c = download_f32(&mut mem, pc, n * n);
    for i in 0..n {
        for j in 0..n {
            let mut acc = 0.0f32;
            for k in 0..n {
                acc = a[i * n + k].mul_add(b[k * n + j], acc);
            }
            assert_eq!(c[i * n + j].to_bits(), acc.to_bits(), "C[{i}][{j}]");
        }
    }
}

fn check_exp_log_sqrt_division_within_ulp_bounds(
    k: &'static (am_emu::CodeObject, am_emu::Program),
) {
    let n = 256usize;
    let mut r = Rng(5);
    let mut x: Vec<f32> = (0..n).map(|_| r.f32(0.01, 80.0)).collect();
    x[0] = 1.0;
    x[1] = 1e-30;
    x[2] = 88.0;
    x[3] = 2.0;
    let mut mem = HostMemory::new();
    let px = upload(&mut mem, &x);
    let outs: Vec<u64> = (0..4).map(|_| mem.alloc(4 * n)).collect();
    launch(
        k,
        "transc",
        [n as u32, 1, 1],
        [64, 1, 1],
        Args::default()
            .ptr(px)
            .ptr(outs[0])
            .ptr(outs[1])
            .ptr(outs[2])
            .ptr(outs[3]),
        &mut mem,
    );
    let e = download_f32(&mut mem, outs[0], n);
    let l = download_f32(&mut mem, outs[1], n);
    let s = download_f32(&mut mem, outs[2], n);
    let d = download_f32(&mut mem, outs[3], n);
    for k in 0..n {
        let v = x[k];
        // OpenCL allows 3 ulp for exp/log (LLVM's expansion plus the hardware's 1 ulp), and
        // sqrt is correctly rounded here; 1/v + v/3 is two 2.5-ulp divisions and an add.
        assert!(
            ulps(e[k], (v as f64).exp() as f32) <= 3,
            "exp({v}) = {} vs {}",
            e[k],
            (v as f64).exp()
        );
        assert!(
            ulps(l[k], (v as f64).ln() as f32) <= 3,
            "log({v}) = {} vs {}",
            l[k],
            (v as f64).ln()
        );
        assert_eq!(s[k].to_bits(), v.sqrt().to_bits(), "sqrt({v})");
        let want = (1.0 / v as f64 + v as f64 / 3.0) as f32;
        assert!(ulps(d[k], want) <= 4, "1/{v} + {v}/3 = {} vs {want}", d[k]);
    }
}

fn check_integer_division_and_modulo_are_exact(k: &'static (am_emu::CodeObject, am_emu::Program)) {
    let n = 256usize;
    let mut r = Rng(6);
    let mut a: Vec<i32> = (0..n).map(|_| r.next() as i32).collect();
    let mut b: Vec<i32> = (0..n)
        .map(|k| {
            let v = (r.next() >> (k % 31)) as i32;
            if v == 0 { 7 } else { v }
        })
        .collect();
    a[0] = i32::MIN;
    b[0] = 1;
    a[1] = 5;
    b[1] = -3;
    a[2] = -7;
    b[2] = 2;
    a[3] = u32::MAX as i32;
    b[3] = 3;
    let mut mem = HostMemory::new();
    let (pa, pb) = (upload(&mut mem, &a), upload(&mut mem, &b));
    let o: Vec<u64> = (0..4).map(|_| mem.alloc(4 * n)).collect();
    launch(
        k,
        "idiv",
        [n as u32, 1, 1],
        [64, 1, 1],
        Args::default()
            .ptr(pa)
            .ptr(pb)
            .ptr(o[0])
            .ptr(o[1])
            .ptr(o[2])
            .ptr(o[3]),
        &mut mem,
    );
    let q = download_u32(&mut mem, o[0], n);
    let rm = download_u32(&mut mem, o[1], n);
    let uq = download_u32(&mut mem, o[2], n);
    let ur = download_u32(&mut mem, o[3], n);
    for k in 0..n {
        let (x, y) = (a[k], b[k]);
        assert_eq!(q[k] as i32, x.wrapping_div(y), "{x} / {y}");
        assert_eq!(rm[k] as i32, x.wrapping_rem(y), "{x} % {y}");
        assert_eq!(uq[k], x as u32 / y as u32, "{x} /u {y}");
        assert_eq!(ur[k], x as u32 % y as u32, "{x} %u {y}");
    }
}

fn check_sixty_four_bit_address_arithmetic_is_exact(
    k: &'static (am_emu::CodeObject, am_emu::Program),
) {
    let n = 128usize;
    let mut r = Rng(7);
    let p: Vec<u64> = (0..n).map(|_| r.next()).collect();
    let stride = 0x1_0000_0003u64;
    let mut mem = HostMemory::new();
    let pp = upload(&mut mem, &p);
    let po = mem.alloc(8 * n);
    launch(
        k,
        "addr64",
        [n as u32, 1, 1],
        [64, 1, 1],
        Args::default().ptr(pp).u64(stride).ptr(po),
        &mut mem,
    );
    let out = download_u64(&mut mem, po, n);
    for k in 0..n {
        let a = (k as u64).wrapping_mul(stride).wrapping_add(0x1_0000_0000);
        let want = p[k]
            .wrapping_mul(3)
            .wrapping_add(a)
            .wrapping_add(a >> 7)
            .wrapping_add(p[k] / 7);
        assert_eq!(out[k], want, "out[{k}]");
    }
}

fn check_loops_with_divergent_lanes_count_collatz_steps(
    k: &'static (am_emu::CodeObject, am_emu::Program),
) {
    let n = 192usize;
    let input: Vec<u32> = (0..n as u32).map(|k| k * 7 + 1).collect();
    let mut mem = HostMemory::new();
    let pi = upload(&mut mem, &input);
    let po = mem.alloc(4 * n);
    launch(
        k,
        "divloop",
        [n as u32, 1, 1],
        [64, 1, 1],
        Args::default().ptr(pi).ptr(po),
        &mut mem,
    );
    let out = download_u32(&mut mem, po, n);
    for k in 0..n {
        let (mut c, mut acc) = (input[k], 0u32);
        while c != 1 && acc < 1000 {
            c = if c & 1 == 1 { 3 * c + 1 } else { c / 2 };
            acc += 1;
        }
        assert_eq!(out[k], acc, "steps({})", input[k]);
    }
}

fn check_f16_fma_matches_reference(k: &'static (am_emu::CodeObject, am_emu::Program)) {
    use am_emu::float::{f16_to_f32, f64_to_f16};
    let n = 128usize;
    let mut r = Rng(8);
    let a: Vec<u16> = (0..n)
        .map(|_| am_emu::float::f32_to_f16(r.f32(-8.0, 8.0)))
        .collect();
    let b: Vec<u16> = (0..n)
        .map(|_| am_emu::float::f32_to_f16(r.f32(-8.0, 8.0)))
        .collect();
    let mut mem = HostMemory::new();
    let (pa, pb) = (upload(&mut mem, &a), upload(&mut mem, &b));
    let pc = mem.alloc(2 * n);
    launch(
        k,
        "f16k",
        [n as u32, 1, 1],
        [64, 1, 1],
        Args::default().ptr(pa).ptr(pb).ptr(pc),
        &mut mem,
    );
    let c = download_u16(&mut mem, pc, n);
    for k in 0..n {
        let (x, y) = (f16_to_f32(a[k]) as f64, f16_to_f32(b[k]) as f64);
        // Contracted to v_fmac_f16: one rounding of the exact x * y + x.
        assert_eq!(c[k], f64_to_f16(x.mul_add(y, x)), "{x} * {y} + {x}");
    }
}

#[test]
fn wave64_kernel_runs_with_64_lane_exec() {
    let (_, bytes) = compile_cl(KERNELS, &["-mwavefrontsize64"]);
    let co = am_emu::CodeObject::parse(&bytes, "kernels.cl wave64").unwrap();
    let k = co.kernel("vadd").unwrap();
    assert_eq!(k.descriptor.wave_size(), 64);
    let prog = am_emu::Program::new(&co, am_emu::Isa::Gfx1100).unwrap();
    let both = (co.clone(), prog);
    let n = 300u32;
    let a: Vec<f32> = (0..n).map(|k| k as f32 * 0.5).collect();
    let b: Vec<f32> = (0..n).map(|k| 1.0 / (k as f32 + 1.0)).collect();
    let mut mem = HostMemory::new();
    let (pa, pb) = (upload(&mut mem, &a), upload(&mut mem, &b));
    let pc = mem.alloc(4 * n as usize);
    let st = launch(
        &both,
        "vadd",
        [n, 1, 1],
        [256, 1, 1],
        Args::default().ptr(pa).ptr(pb).ptr(pc).u32(n),
        &mut mem,
    );
    assert_eq!(
        st.waves,
        4 + 1,
        "256 items = 4 waves of 64, then 44 items = 1 wave"
    );
    let c = download_f32(&mut mem, pc, n as usize);
    for k in 0..n as usize {
        assert_eq!(c[k].to_bits(), (a[k] + b[k]).to_bits(), "c[{k}]");
    }
}

fn check_atomics_and_lane_shuffles_are_consistent(
    k: &'static (am_emu::CodeObject, am_emu::Program),
) {
    let n = 128usize;
    let mut mem = HostMemory::new();
    let counter = upload(&mut mem, &[0u32]);
    let old = mem.alloc(4 * n);
    let lds_old = mem.alloc(4 * n);
    let shuf = mem.alloc(4 * n);
    let xperm = mem.alloc(4 * n);
    let mx = upload(&mut mem, &[i32::MIN]);
    launch(
        k,
        "atomics",
        [n as u32, 1, 1],
        [64, 1, 1],
        Args::default()
            .ptr(counter)
            .ptr(old)
            .ptr(lds_old)
            .ptr(shuf)
            .ptr(xperm)
            .ptr(mx),
        &mut mem,
    );
    let inc = |i: usize| 1 + (i as u32 & 3);
    let total: u32 = (0..n).map(inc).sum();
    assert_eq!(download_u32(&mut mem, counter, 1)[0], total, "counter");
    // The returned old values are the prefix sums of some order of the increments.
    let olds = download_u32(&mut mem, old, n);
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&i| olds[i]);
    let mut acc = 0;
    for &i in &order {
        assert_eq!(olds[i], acc, "old value of lane {i}");
        acc += inc(i);
    }
    // LDS: per workgroup, starting at 100.
    let lo = download_u32(&mut mem, lds_old, n);
    for g in 0..n / 64 {
        let mut ids: Vec<usize> = (64 * g..64 * (g + 1)).collect();
        ids.sort_by_key(|&i| lo[i]);
        let mut acc = 100;
        for &i in &ids {
            assert_eq!(lo[i], acc, "LDS old value of lane {i}");
            acc += i as u32;
        }
    }
    let want_max = (0..n as u32)
        .map(|i| (i * 7919 % 1000) as i32 - 500)
        .max()
        .unwrap();
    assert_eq!(
        download_u32(&mut mem, mx, 1)[0] as i32,
        want_max,
        "atomic max"
    );
    let sh = download_u32(&mut mem, shuf, n);
    let xp = download_u32(&mut mem, xperm, n);
    for i in 0..n {
        let t = i % 64;
        // ds_bpermute reads lane (t ^ 5) of the same wave.
        let ws = k.0.kernel("atomics").unwrap().descriptor.wave_size() as usize;
        let src = i - t % ws + ((t ^ 5) % ws);
        assert_eq!(sh[i], src as u32 * 3, "bpermute lane {i}");
        if k.1.isa().is_cdna() {
            // wave_rol:1 reads the next lane of the wave64, the last lane the first.
            assert_eq!(xp[i], (i - t + (t + 1) % 64) as u32, "wave_rol:1 lane {i}");
        } else {
            // permlanex16 with identity selectors reads the same lane of the other row.
            assert_eq!(xp[i], (i ^ 16) as u32, "permlanex16 lane {i}");
        }
    }
}

#[test]
fn vadd_matches_reference_with_partial_last_workgroup() {
    check_vadd_matches_reference_with_partial_last_workgroup(kernels());
}

#[test]
fn saxpy_matches_reference() {
    check_saxpy_matches_reference(kernels());
}

#[test]
fn reduce_through_lds_with_barriers_sums_each_workgroup() {
    check_reduce_through_lds_with_barriers_sums_each_workgroup(kernels());
}

#[test]
fn tiled_matmul_matches_reference() {
    check_tiled_matmul_matches_reference(kernels());
}

#[test]
fn exp_log_sqrt_division_within_ulp_bounds() {
    check_exp_log_sqrt_division_within_ulp_bounds(kernels());
}

#[test]
fn integer_division_and_modulo_are_exact() {
    check_integer_division_and_modulo_are_exact(kernels());
}

#[test]
fn sixty_four_bit_address_arithmetic_is_exact() {
    check_sixty_four_bit_address_arithmetic_is_exact(kernels());
}

#[test]
fn loops_with_divergent_lanes_count_collatz_steps() {
    check_loops_with_divergent_lanes_count_collatz_steps(kernels());
}

#[test]
fn f16_fma_matches_reference() {
    check_f16_fma_matches_reference(kernels());
}

#[test]
fn atomics_and_lane_shuffles_are_consistent() {
    check_atomics_and_lane_shuffles_are_consistent(kernels());
}

/// The same kernels compiled for wave64 (`-mwavefrontsize64`): 64-lane EXEC and VCC, SGPR
/// pairs for lane masks.
#[test]
fn all_kernels_match_reference_in_wave64() {
    all_kernels_match_reference_in_wave64_on(am_emu::Isa::Gfx1100);
}

fn all_kernels_match_reference_in_wave64_on(isa: am_emu::Isa) {
    let (_, bytes) = compile_cl_for(isa, KERNELS, &["-mwavefrontsize64"]);
    let co = am_emu::CodeObject::parse(&bytes, "kernels.cl wave64").unwrap();
    assert_eq!(co.kernel("reduce").unwrap().descriptor.wave_size(), 64);
    let prog = am_emu::Program::new(&co, isa).unwrap();
    // The checks take a 'static code object, as the once-compiled suites are.
    let k: &'static _ = Box::leak(Box::new((co, prog)));
    check_reduce_through_lds_with_barriers_sums_each_workgroup(k);
    check_vadd_matches_reference_with_partial_last_workgroup(k);
    check_saxpy_matches_reference(k);
    check_tiled_matmul_matches_reference(k);
    check_exp_log_sqrt_division_within_ulp_bounds(k);
    check_integer_division_and_modulo_are_exact(k);
    check_sixty_four_bit_address_arithmetic_is_exact(k);
    check_loops_with_divergent_lanes_count_collatz_steps(k);
    check_f16_fma_matches_reference(k);
    check_atomics_and_lane_shuffles_are_consistent(k);
}

/// The same kernels compiled for CDNA3 (gfx942) and CDNA4 (gfx950): wave64, the GFX9
/// encodings, lowered onto the shared semantics; or for RDNA4 (gfx1200, gfx1201): wave32,
/// the gfx12 encodings, lowered likewise.
fn all_kernels_match_reference_on(isa: am_emu::Isa) {
    let k = kernels_for(isa);
    let wave = if isa.is_cdna() { 64 } else { 32 };
    assert_eq!(k.0.kernel("reduce").unwrap().descriptor.wave_size(), wave);
    check_reduce_through_lds_with_barriers_sums_each_workgroup(k);
    check_vadd_matches_reference_with_partial_last_workgroup(k);
    check_saxpy_matches_reference(k);
    check_tiled_matmul_matches_reference(k);
    check_exp_log_sqrt_division_within_ulp_bounds(k);
    check_integer_division_and_modulo_are_exact(k);
    check_sixty_four_bit_address_arithmetic_is_exact(k);
    check_loops_with_divergent_lanes_count_collatz_steps(k);
    check_f16_fma_matches_reference(k);
    check_atomics_and_lane_shuffles_are_consistent(k);
    check_constant_tables_are_read_pc_relative_from_loaded_segments(k);
    check_generic_pointers_reach_lds_global_and_private_through_calls(k);
    check_f16_division_sqrt_exp_log_max_match_reference(k);
    check_halves_round_trip_through_lds(k);
    check_kernels_read_sizes_from_the_dispatch_packet(k);
}

#[test]
fn all_kernels_match_reference_on_gfx942() {
    all_kernels_match_reference_on(am_emu::Isa::Gfx942);
}

#[test]
fn all_kernels_match_reference_on_gfx950() {
    all_kernels_match_reference_on(am_emu::Isa::Gfx950);
}

#[test]
fn all_kernels_match_reference_on_gfx1200() {
    all_kernels_match_reference_on(am_emu::Isa::Gfx1200);
}

#[test]
fn all_kernels_match_reference_on_gfx1201() {
    all_kernels_match_reference_on(am_emu::Isa::Gfx1201);
}

#[test]
fn all_kernels_match_reference_on_gfx1200_in_wave64() {
    all_kernels_match_reference_in_wave64_on(am_emu::Isa::Gfx1200);
}

#[test]
fn all_kernels_match_reference_on_gfx1201_in_wave64() {
    all_kernels_match_reference_in_wave64_on(am_emu::Isa::Gfx1201);
}

/// The register-level entry point the mock's PM4 path uses: code read from (another) GPU
/// address, user SGPRs given as `COMPUTE_USER_DATA_*` values.
#[test]
fn hardware_level_dispatch_runs_code_uploaded_elsewhere() {
    use am_emu::code_object::kcp;
    let (co, _) = kernels();
    let k = co.kernel("vadd").unwrap();
    let props = k.descriptor.kernel_code_properties;
    assert_eq!(
        props & !(kcp::ENABLE_WAVEFRONT_SIZE32),
        kcp::ENABLE_SGPR_KERNARG_SEGMENT_PTR,
        "vadd takes only the kernarg pointer in its user SGPRs"
    );
    let upload_at = 0x7f00_0000_0000u64;
    let prog = am_emu::Program::from_bytes(&co.text, upload_at, am_emu::Isa::Gfx1100).unwrap();
    let n = 300u32;
    let a: Vec<f32> = (0..n).map(|k| k as f32).collect();
    let b: Vec<f32> = (0..n).map(|k| 2.0 * k as f32).collect();
    let mut mem = HostMemory::new();
    let (pa, pb) = (upload(&mut mem, &a), upload(&mut mem, &b));
    let pc = mem.alloc(4 * n as usize);
    let mut args = Args::default().ptr(pa).ptr(pb).ptr(pc).u32(n).0;
    args.resize(k.descriptor.kernarg_size as usize, 0);
    let kernarg = mem.alloc_bytes(&args);
    let mut hw = am_emu::HwDispatch {
        name: "vadd (pm4)".into(),
        entry: upload_at + (k.entry - co.text_address),
        rsrc1: k.descriptor.compute_pgm_rsrc1,
        rsrc2: k.descriptor.compute_pgm_rsrc2,
        rsrc3: k.descriptor.compute_pgm_rsrc3,
        user_sgprs: vec![kernarg as u32, (kernarg >> 32) as u32],
        wave_size: 32,
        grid: [n, 1, 1],
        workgroup: [256, 1, 1],
        lds_bytes: 0,
        scratch_bytes: 0,
        instruction_limit: None,
        ..Default::default()
    };
    am_emu::dispatch_hw(&prog, upload_at, &hw, &mut mem).unwrap();
    let c = download_f32(&mut mem, pc, n as usize);
    for i in 0..n as usize {
        assert_eq!(c[i], a[i] + b[i], "c[{i}]");
    }
    hw.user_sgprs = vec![0; 17];
    let err = am_emu::dispatch_hw(&prog, upload_at, &hw, &mut mem).unwrap_err();
    assert!(err.to_string().contains("USER_SGPR"), "{err}");
    // A driver-written scratch size is checked before it sizes any wave's scratch (4 GiB a
    // lane would be 256 GiB a wave).
    hw.user_sgprs = vec![kernarg as u32, (kernarg >> 32) as u32];
    hw.scratch_bytes = u32::MAX;
    let err = am_emu::dispatch_hw(&prog, upload_at, &hw, &mut mem).unwrap_err();
    assert!(
        err.to_string()
            .contains("4294967295 bytes of scratch per work-item exceed 131072"),
        "{err}"
    );
}

/// A grid spread over XCCs: each XCC runs the chunks of workgroups dealt to it
/// (`(n / chunk) % count == index`), and nothing else.
#[test]
fn a_partition_runs_only_its_share_of_the_workgroups() {
    let (co, _) = kernels();
    let k = co.kernel("vadd").unwrap();
    let prog = am_emu::Program::new(co, am_emu::Isa::Gfx1100).unwrap();
    // vadd indexes with a fixed workgroup size of 256.
    let (wg, groups) = (256u32, 12u32);
    let n = wg * groups;
    let a: Vec<f32> = (0..n).map(|k| k as f32 + 1.0).collect();
    let mut mem = HostMemory::new();
    let (pa, pb) = (upload(&mut mem, &a), upload(&mut mem, &a));
    let pc = mem.alloc(4 * n as usize);
    let mut args = Args::default().ptr(pa).ptr(pb).ptr(pc).u32(n).0;
    args.resize(k.descriptor.kernarg_size as usize, 0);
    let kernarg = mem.alloc_bytes(&args);
    let hw = am_emu::HwDispatch {
        name: "vadd (xcc 1 of 3)".into(),
        entry: k.entry,
        rsrc1: k.descriptor.compute_pgm_rsrc1,
        rsrc2: k.descriptor.compute_pgm_rsrc2,
        user_sgprs: vec![kernarg as u32, (kernarg >> 32) as u32],
        wave_size: 32,
        grid: [n, 1, 1],
        workgroup: [wg, 1, 1],
        partition: am_emu::Partition {
            index: 1,
            count: 3,
            chunk: 2,
        },
        ..Default::default()
    };
    let stats = am_emu::dispatch_hw(&prog, co.text_address, &hw, &mut mem).unwrap();
    // Chunks of two: workgroups 2, 3 and 8, 9 belong to XCC 1 of 3.
    assert_eq!(stats.workgroups, 4);
    let c = download_f32(&mut mem, pc, n as usize);
    for g in 0..groups {
        let mine = matches!(g, 2 | 3 | 8 | 9);
        for i in g * wg..(g + 1) * wg {
            let want = if mine { 2.0 * a[i as usize] } else { 0.0 };
            assert_eq!(c[i as usize], want, "c[{i}] of workgroup {g}");
        }
    }
}

/// `-cl-denorms-are-zero` sets FLOAT_DENORM_MODE_32 = 0 in COMPUTE_PGM_RSRC1: f32 denormal
/// inputs and results are flushed to zero; the default build keeps them.
#[test]
fn f32_denormals_flush_only_when_the_descriptor_says_so() {
    let (_, bytes) = compile_cl(KERNELS, &["-cl-denorms-are-zero"]);
    let co = am_emu::CodeObject::parse(&bytes, "kernels.cl daz").unwrap();
    let prog = am_emu::Program::new(&co, am_emu::Isa::Gfx1100).unwrap();
    let daz: &'static _ = Box::leak(Box::new((co, prog)));
    let mode = |k: &(am_emu::CodeObject, am_emu::Program)| {
        (k.0.kernel("vadd").unwrap().descriptor.compute_pgm_rsrc1 >> 16) & 3
    };
    assert_eq!(mode(daz), 0, "flush f32 denormals");
    assert_eq!(mode(kernels()), 3, "keep f32 denormals");
    let n = 64u32;
    let tiny = f32::from_bits(0x0000_0100); // a denormal
    let a = vec![tiny; n as usize];
    let b: Vec<f32> = (0..n)
        .map(|k| if k % 2 == 0 { tiny } else { 1.0 })
        .collect();
    for (k, flush) in [(kernels(), false), (daz as &_, true)] {
        let mut mem = HostMemory::new();
        let (pa, pb) = (upload(&mut mem, &a), upload(&mut mem, &b));
        let pc = mem.alloc(4 * n as usize);
        launch(
            k,
            "vadd",
            [n, 1, 1],
            [64, 1, 1],
            Args::default().ptr(pa).ptr(pb).ptr(pc).u32(n),
            &mut mem,
        );
        let c = download_f32(&mut mem, pc, n as usize);
        for (i, ci) in c.iter().enumerate() {
            let want = if i % 2 == 1 {
                1.0
            } else if flush {
                0.0
            } else {
                tiny + tiny
            };
            assert_eq!(ci.to_bits(), want.to_bits(), "flush={flush} c[{i}]");
        }
    }
}

/// Code that reads its own `__constant` data needs the code object's segments in memory at
/// the load address; `s_getpc_b64` returns addresses relative to `Launch::code_address`.
fn check_constant_tables_are_read_pc_relative_from_loaded_segments(
    k: &'static (am_emu::CodeObject, am_emu::Program),
) {
    let (co, prog) = k;
    let k = co.kernel("ctab").unwrap();
    let base = 0x10_0000_0000u64;
    let mut mem = HostMemory::new();
    for seg in &co.segments {
        mem.map(base + seg.vaddr, &seg.bytes).unwrap();
    }
    let n = 64usize;
    let idx: Vec<u32> = (0..n as u32).map(|i| i * 5 + 3).collect();
    let pi = upload(&mut mem, &idx);
    let po = mem.alloc(4 * n);
    let mut a = Args::default().ptr(pi).ptr(po).0;
    a.resize(k.descriptor.kernarg_size as usize, 0);
    let kernarg = mem.alloc_bytes(&a);
    let mut l = am_emu::Launch::new([n as u32, 1, 1], [64, 1, 1], kernarg);
    l.code_address = Some(base + co.text_address);
    am_emu::dispatch(prog, k, &l, &mut mem).unwrap();
    let table = [1.5f32, 2.5, -3.0, 4.25, 8.0, 0.125, 6.0, 7.75];
    let out = download_f32(&mut mem, po, n);
    for (i, o) in out.iter().enumerate() {
        assert_eq!(*o, table[(idx[i] & 7) as usize] * 2.0, "out[{i}]");
    }
}

fn check_generic_pointers_reach_lds_global_and_private_through_calls(
    k: &'static (am_emu::CodeObject, am_emu::Program),
) {
    let n = 64usize;
    let mut mem = HostMemory::new();
    let init: Vec<f32> = (0..n).map(|i| 100.0 * i as f32).collect();
    let out = upload(&mut mem, &init);
    let sel: Vec<u32> = (0..n as u32).map(|i| i * 3 + 1).collect();
    let ps = upload(&mut mem, &sel);
    launch(
        k,
        "genptr",
        [n as u32, 1, 1],
        [64, 1, 1],
        Args::default().ptr(out).ptr(ps),
        &mut mem,
    );
    let got = download_f32(&mut mem, out, n);
    for t in 0..n {
        let want = init[t]
            + 2.0
            + (t as f32 + 1.0)
            + ([10.0, 20.0, 30.0, 40.0][(sel[t] & 3) as usize] + 0.5);
        assert_eq!(got[t], want, "out[{t}]");
    }
}

fn check_f16_division_sqrt_exp_log_max_match_reference(
    k: &'static (am_emu::CodeObject, am_emu::Program),
) {
    use am_emu::float::{f16_to_f32, f32_to_f16, f64_to_f16};
    let n = 256usize;
    let mut r = Rng(12);
    let mut a: Vec<u16> = (0..n).map(|_| f32_to_f16(r.f32(0.001, 500.0))).collect();
    let mut b: Vec<u16> = (0..n).map(|_| f32_to_f16(r.f32(-8.0, 8.0))).collect();
    // Edge cases: subnormal halves, zero, infinity, the largest half.
    for (k, (x, y)) in [
        (0x0001, 0x3c00),
        (0x7bff, 0x0400),
        (0x3c00, 0x0000),
        (0x0000, 0x0000),
        (0x7c00, 0x4000),
        (0x03ff, 0xbc00),
    ]
    .iter()
    .enumerate()
    {
        a[k] = *x;
        b[k] = *y;
    }
    let mut mem = HostMemory::new();
    let (pa, pb) = (upload(&mut mem, &a), upload(&mut mem, &b));
    let outs: Vec<u64> = (0..5).map(|_| mem.alloc(2 * n)).collect();
    launch(
        k,
        "hmath",
        [n as u32, 1, 1],
        [64, 1, 1],
        Args::default()
            .ptr(pa)
            .ptr(pb)
            .ptr(outs[0])
            .ptr(outs[1])
            .ptr(outs[2])
            .ptr(outs[3])
            .ptr(outs[4]),
        &mut mem,
    );
    let got: Vec<Vec<u16>> = outs.iter().map(|&p| download_u16(&mut mem, p, n)).collect();
    let h = |x: u16| f16_to_f32(x) as f64;
    let close = |g: u16, w: u16, ulps: i32| {
        let (gf, wf) = (f16_to_f32(g), f16_to_f32(w));
        (gf.is_nan() && wf.is_nan())
            || (g as i16 as i32 - w as i16 as i32).abs() <= ulps && gf.signum() == wf.signum()
            || g == w
    };
    for k in 0..n {
        let (x, y) = (h(a[k]), h(b[k]));
        assert!(
            close(got[0][k], f64_to_f16(x / y), 0),
            "{x} / {y} = {:#x}, want {:#x}",
            got[0][k],
            f64_to_f16(x / y)
        );
        assert!(close(got[1][k], f64_to_f16(x.sqrt()), 0), "sqrt({x})");
        assert!(
            close(got[2][k], f64_to_f16(y.exp()), 1),
            "exp({y}) = {} want {}",
            f16_to_f32(got[2][k]),
            y.exp()
        );
        assert!(
            close(got[3][k], f64_to_f16(x.ln()), 1),
            "log({x}) = {} want {}",
            f16_to_f32(got[3][k]),
            x.ln()
        );
        assert!(close(got[4][k], f64_to_f16(x.max(y)), 0), "max({x}, {y})");
    }
}

fn check_halves_round_trip_through_lds(k: &'static (am_emu::CodeObject, am_emu::Program)) {
    use am_emu::float::{f16_to_f32, f32_to_f16, f64_to_f16};
    let n = 128usize;
    let mut r = Rng(13);
    let input: Vec<u16> = (0..n).map(|_| f32_to_f16(r.f32(-4.0, 4.0))).collect();
    let mut mem = HostMemory::new();
    let pi = upload(&mut mem, &input);
    let po = mem.alloc(2 * n);
    launch(
        k,
        "hlds",
        [n as u32, 1, 1],
        [64, 1, 1],
        Args::default().ptr(pi).ptr(po),
        &mut mem,
    );
    let out = download_u16(&mut mem, po, n);
    for (i, &o) in out.iter().enumerate() {
        let (g, t) = (i / 64 * 64, i % 64);
        let h = |k: usize| f16_to_f32(input[g + k]) as f64;
        // x * y + z on halves, contracted to one f16 FMA (exact in f64 for these magnitudes).
        let want = f64_to_f16(h(63 - t) * h(t ^ 7) + h(t));
        assert_eq!(o, want, "out[{i}]");
    }
}

fn check_kernels_read_sizes_from_the_dispatch_packet(
    k: &'static (am_emu::CodeObject, am_emu::Program),
) {
    let (co, prog) = k;
    let k = co.kernel("sizes").unwrap();
    assert!(
        k.descriptor.kernel_code_properties & am_emu::code_object::kcp::ENABLE_SGPR_DISPATCH_PTR
            != 0
    );
    let n = 200u32;
    let mut mem = HostMemory::new();
    let out = mem.alloc(4 * 256);
    let mut a = Args::default().ptr(out).0;
    a.resize(256, 0);
    let kernarg = mem.alloc_bytes(&a);
    let mut l = am_emu::Launch::new([n, 1, 1], [64, 1, 1], kernarg);
    let packet = l.aql_dispatch_packet(k);
    l.dispatch_ptr = mem.alloc_bytes(&packet);
    am_emu::dispatch(prog, k, &l, &mut mem).unwrap();
    let got = download_u32(&mut mem, out, 256);
    for (i, &g) in got.iter().enumerate() {
        let want = if (i as u32) < n { 64 * 100_000 + n } else { 0 };
        assert_eq!(g, want, "out[{i}]");
    }
}

#[test]
fn constant_tables_are_read_pc_relative_from_loaded_segments() {
    check_constant_tables_are_read_pc_relative_from_loaded_segments(kernels());
}

#[test]
fn generic_pointers_reach_lds_global_and_private_through_calls() {
    check_generic_pointers_reach_lds_global_and_private_through_calls(kernels());
}

#[test]
fn f16_division_sqrt_exp_log_max_match_reference() {
    check_f16_division_sqrt_exp_log_max_match_reference(kernels());
}

#[test]
fn halves_round_trip_through_lds() {
    check_halves_round_trip_through_lds(kernels());
}

#[test]
fn kernels_read_sizes_from_the_dispatch_packet() {
    check_kernels_read_sizes_from_the_dispatch_packet(kernels());
}
