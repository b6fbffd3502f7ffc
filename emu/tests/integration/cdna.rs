//! CDNA-only semantics (gfx942, gfx950): instruction sequences written as inline assembly
//! (compiled by clang-22), run on 64 lanes and compared bit for bit with references written
//! from the CDNA3/CDNA4 ISA descriptions: SDWA (selects, sign extension, preserved bits, the
//! carry-out of VOP2 carry ops), GFX9 DPP (row broadcasts, wave shifts), `v_cmpx` writing its
//! scalar destination, 16-bit results clearing the high half, packed f32, 64-bit moves and
//! shifts, AccVGPRs, and the gfx950 additions the emulator models.

use crate::common;
use am_emu::float::{f16_to_f32, f32_to_bf16, f32_to_f16, f64_to_f16};
use am_emu::{CodeObject, HostMemory, Isa, Program};
use common::*;

/// Reference: inputs a, b, c and the lane; `r` starts as c, so lanes an instruction does not
/// write keep c.
type Ref = fn(&[u32], &[u32], &[u32], usize) -> u32;

fn f(x: u32) -> f32 {
    f32::from_bits(x)
}

fn h(x: u32) -> f64 {
    f16_to_f32(x as u16) as f64
}

/// (name, assembly with %0 = result (starts as c), %1..%3 = a, b, c, reference). Scratch
/// registers: v40-v47, a0, s[0:3], vcc.
const CASES: &[(&str, &str, Ref)] = &[
    (
        "sdwa_add_byte1_word0_to_word1",
        "v_add_u32_sdwa %0, %1, %2 dst_sel:WORD_1 dst_unused:UNUSED_PAD src0_sel:BYTE_1 src1_sel:WORD_0",
        |a, b, _, l| ((a[l] >> 8 & 0xff) + (b[l] & 0xffff)) << 16,
    ),
    (
        "sdwa_preserve",
        "v_add_u32_sdwa %0, %1, %2 dst_sel:BYTE_2 dst_unused:UNUSED_PRESERVE src0_sel:BYTE_0 src1_sel:BYTE_3",
        |a, b, c, l| (c[l] & 0xff00_ffff) | ((a[l] & 0xff) + (b[l] >> 24)) << 16 & 0x00ff_0000,
    ),
    (
        "sdwa_sext_source",
        "v_mov_b32_sdwa %0, sext(%1) dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:BYTE_1",
        |a, _, _, l| (a[l] >> 8) as u8 as i8 as i32 as u32,
    ),
    (
        "sdwa_unused_sext",
        "v_mov_b32_sdwa %0, %1 dst_sel:BYTE_1 dst_unused:UNUSED_SEXT src0_sel:BYTE_0",
        |a, _, _, l| {
            let b = a[l] & 0xff;
            (b << 8) | if b & 0x80 != 0 { 0xffff_0000 } else { 0 }
        },
    ),
    (
        "sdwa_f16_high_halves",
        "v_add_f16_sdwa %0, %1, %2 dst_sel:WORD_1 dst_unused:UNUSED_PRESERVE src0_sel:WORD_1 src1_sel:WORD_1",
        |a, b, c, l| (c[l] & 0xffff) | (f64_to_f16(h(a[l] >> 16) + h(b[l] >> 16)) as u32) << 16,
    ),
    (
        // The carry of a VOP2 carry operation in SDWA form goes to VCC (tinygrad's gfx950 fix).
        "sdwa_carry_out",
        "v_add_co_u32_sdwa v40, vcc, %1, %2 dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:WORD_0 src1_sel:DWORD\n\
         v_cndmask_b32_e64 v41, 0, 1, vcc\n\
         v_lshlrev_b32 v41, 31, v41\n\
         v_xor_b32 %0, v40, v41",
        |a, b, _, l| {
            let (s, carry) = (a[l] & 0xffff).overflowing_add(b[l]);
            s ^ (carry as u32) << 31
        },
    ),
    (
        "dpp_row_bcast15",
        "v_mov_b32_dpp %0, %1 row_bcast:15 row_mask:0xa bank_mask:0xf",
        |a, _, c, l| {
            let row = l / 16;
            if 0xa >> row & 1 != 0 {
                a[16 * row - 1]
            } else {
                c[l]
            }
        },
    ),
    (
        "dpp_row_bcast31",
        "v_mov_b32_dpp %0, %1 row_bcast:31 row_mask:0xc bank_mask:0xf",
        |a, _, c, l| if l >= 32 { a[31] } else { c[l] },
    ),
    (
        "dpp_wave_shr1",
        "v_mov_b32_dpp %0, %1 wave_shr:1 row_mask:0xf bank_mask:0xf",
        |a, _, c, l| if l == 0 { c[l] } else { a[l - 1] },
    ),
    (
        "dpp_wave_ror1_bound_ctrl",
        "v_add_u32_dpp %0, %1, %2 wave_ror:1 row_mask:0xf bank_mask:0xf bound_ctrl:1",
        |a, b, _, l| a[(l + 63) % 64].wrapping_add(b[l]),
    ),
    (
        "dpp_row_newbcast",
        "v_mov_b32_dpp %0, %1 row_newbcast:5 row_mask:0xf bank_mask:0xf",
        |a, _, _, l| a[l / 16 * 16 + 5],
    ),
    (
        "dpp_row_shr_bank_mask",
        "v_mov_b32_dpp %0, %1 row_shr:3 row_mask:0xf bank_mask:0x5",
        |a, _, c, l| {
            let (l16, bank) = (l % 16, l % 16 / 4);
            if 0x5 >> bank & 1 == 0 || l16 < 3 {
                c[l]
            } else {
                a[l - 3]
            }
        },
    ),
    (
        // GFX9 v_cmpx writes EXEC and its scalar destination.
        "cmpx_writes_sdst",
        "s_mov_b64 s[2:3], exec\n\
         v_cmpx_gt_u32_e64 s[0:1], %1, %2\n\
         s_mov_b64 exec, s[2:3]\n\
         v_cndmask_b32_e64 %0, %3, 7, s[0:1]",
        |a, b, c, l| if a[l] > b[l] { 7 } else { c[l] },
    ),
    (
        "cmpx_e32_writes_vcc",
        "s_mov_b64 s[2:3], exec\n\
         v_cmpx_lt_i32 vcc, %1, %2\n\
         s_mov_b64 exec, s[2:3]\n\
         v_cndmask_b32 %0, %3, 9, vcc",
        |a, b, c, l| if (a[l] as i32) < b[l] as i32 { 9 } else { c[l] },
    ),
    (
        // Most 16-bit operations clear the high half of their destination on GFX9 ...
        "f16_add_zeroes_high",
        "v_add_f16 %0, %1, %2",
        |a, b, _, l| f64_to_f16(h(a[l]) + h(b[l])) as u32,
    ),
    (
        "u16_shift_zeroes_high",
        "v_lshlrev_b16 %0, %1, %2",
        |a, b, _, l| ((b[l] as u16) << (a[l] & 15)) as u32,
    ),
    (
        "mad_legacy_u16_zeroes_high",
        "v_mad_legacy_u16 %0, %1, %2, %3",
        |a, b, c, l| {
            (a[l] as u16)
                .wrapping_mul(b[l] as u16)
                .wrapping_add(c[l] as u16) as u32
        },
    ),
    (
        "mad_legacy_i16_zeroes_high",
        "v_mad_legacy_i16 %0, %1, %2, %3",
        |a, b, c, l| {
            (a[l] as i16)
                .wrapping_mul(b[l] as i16)
                .wrapping_add(c[l] as i16) as u16 as u32
        },
    ),
    (
        // ... and a result written to the high half (op_sel) keeps the low half.
        "fma_f16_op_sel_high_keeps_low",
        "v_fma_f16 %0, %1, %2, %3 op_sel:[0,0,0,1]",
        |a, b, c, l| (c[l] & 0xffff) | (f64_to_f16(h(a[l]).mul_add(h(b[l]), h(c[l]))) as u32) << 16,
    ),
    (
        "pk_fma_f32",
        "v_mov_b32 v40, %1\nv_mov_b32 v41, %2\nv_mov_b32 v42, %2\nv_mov_b32 v43, %3\n\
         v_mov_b32 v44, %3\nv_mov_b32 v45, %1\n\
         v_pk_fma_f32 v[46:47], v[40:41], v[42:43], v[44:45]\n\
         v_xor_b32 %0, v46, v47",
        |a, b, c, l| {
            f(a[l]).mul_add(f(b[l]), f(c[l])).to_bits()
                ^ f(b[l]).mul_add(f(c[l]), f(a[l])).to_bits()
        },
    ),
    (
        "pk_mul_f32_op_sel_neg",
        "v_mov_b32 v40, %1\nv_mov_b32 v41, %2\nv_mov_b32 v42, %3\nv_mov_b32 v43, %1\n\
         v_pk_mul_f32 v[46:47], v[40:41], v[42:43] op_sel:[1,0] op_sel_hi:[0,1] neg_lo:[0,1]\n\
         v_xor_b32 %0, v46, v47",
        // lo = S0.hi * -S1.lo = b * -c; hi = S0.lo * S1.hi = a * a.
        |a, b, c, l| (f(b[l]) * -f(c[l])).to_bits() ^ (f(a[l]) * f(a[l])).to_bits(),
    ),
    (
        "pk_add_f32",
        "v_mov_b32 v40, %1\nv_mov_b32 v41, %2\nv_mov_b32 v42, %3\nv_mov_b32 v43, %1\n\
         v_pk_add_f32 v[46:47], v[40:41], v[42:43]\n\
         v_xor_b32 %0, v46, v47",
        |a, b, c, l| (f(a[l]) + f(c[l])).to_bits() ^ (f(b[l]) + f(a[l])).to_bits(),
    ),
    (
        // An inline constant is its 32-bit value in the low half, which LLVM's op_sel_hi
        // 0 feeds to both results (`full(1.0) + x` on gfx942).
        "pk_add_f32_inline_constant",
        "v_mov_b32 v40, %1\nv_mov_b32 v41, %2\n\
         v_pk_add_f32 v[46:47], v[40:41], 1.0 op_sel_hi:[1,0]\n\
         v_xor_b32 %0, v46, v47",
        |a, b, _, l| (f(a[l]) + 1.0).to_bits() ^ (f(b[l]) + 1.0).to_bits(),
    ),
    (
        "pk_fma_f32_inline_constants",
        "v_mov_b32 v40, %1\nv_mov_b32 v41, %2\n\
         v_pk_fma_f32 v[46:47], v[40:41], -4.0, 0.5 op_sel_hi:[1,0,0]\n\
         v_xor_b32 %0, v46, v47",
        |a, b, _, l| f(a[l]).mul_add(-4.0, 0.5).to_bits() ^ f(b[l]).mul_add(-4.0, 0.5).to_bits(),
    ),
    (
        "pk_mov_b32_op_sel",
        "v_mov_b32 v40, %1\nv_mov_b32 v41, %2\nv_mov_b32 v42, %3\nv_mov_b32 v43, 5\n\
         v_pk_mov_b32 v[46:47], v[40:41], v[42:43] op_sel:[1,1]\n\
         v_sub_u32 %0, v46, v47",
        |_, b, _, l| b[l].wrapping_sub(5),
    ),
    (
        "mov_b64_lshl_add_u64",
        "v_mov_b32 v40, %1\nv_mov_b32 v41, %2\nv_mov_b64 v[42:43], v[40:41]\n\
         v_mov_b32 v44, %3\nv_mov_b32 v45, %1\n\
         v_lshl_add_u64 v[46:47], v[42:43], 3, v[44:45]\n\
         v_xor_b32 %0, v46, v47",
        |a, b, c, l| {
            let x = (a[l] as u64 | (b[l] as u64) << 32) << 3;
            let r = x.wrapping_add(c[l] as u64 | (a[l] as u64) << 32);
            r as u32 ^ (r >> 32) as u32
        },
    ),
    (
        "accvgpr_round_trip",
        "v_accvgpr_write_b32 a0, %1\nv_accvgpr_mov_b32 a1, a0\nv_accvgpr_read_b32 %0, a1",
        |a, _, _, l| a[l],
    ),
    (
        "mul_legacy_zero",
        "v_mul_legacy_f32 %0, %1, 0",
        |_, _, _, _| 0,
    ),
];

/// gfx950-only instructions.
const CASES950: &[(&str, &str, Ref)] = &[
    (
        "bitop3_majority",
        "v_bitop3_b32 %0, %1, %2, %3 bitop3:0xe8",
        |a, b, c, l| (a[l] & b[l]) | (a[l] & c[l]) | (b[l] & c[l]),
    ),
    (
        "cvt_pk_bf16_f32",
        "v_cvt_pk_bf16_f32 %0, %1, %2",
        |a, b, _, l| f32_to_bf16(f(a[l])) as u32 | (f32_to_bf16(f(b[l])) as u32) << 16,
    ),
    (
        "cvt_pk_f16_f32",
        "v_cvt_pk_f16_f32 %0, %1, %2",
        |a, b, _, l| f32_to_f16(f(a[l])) as u32 | (f32_to_f16(f(b[l])) as u32) << 16,
    ),
    (
        "permlane32_swap",
        "v_mov_b32 v40, %1\nv_mov_b32 v41, %2\nv_permlane32_swap_b32 v40, v41\nv_xor_b32 %0, v40, v41",
        // Lanes 32-63 of v40 and lanes 0-31 of v41 trade places.
        |a, b, _, l| {
            if l < 32 {
                a[l] ^ a[l + 32]
            } else {
                b[l - 32] ^ b[l]
            }
        },
    ),
    (
        "minimum3_f32_nan",
        "v_minimum3_f32 %0, %1, %2, %3",
        |a, b, c, l| {
            let (x, y, z) = (f(a[l]), f(b[l]), f(c[l]));
            if x.is_nan() || y.is_nan() || z.is_nan() {
                0x7fc0_0000
            } else {
                x.min(y).min(z).to_bits()
            }
        },
    ),
];

fn inputs(name: &str) -> [Vec<u32>; 3] {
    let mut r = Rng(0xcd_a3 ^ name.len() as u64);
    let edges = [
        0.0f32,
        -0.0,
        1.0,
        -1.5,
        65504.0,
        1e-30,
        3.0e38,
        f32::INFINITY,
        f32::NAN,
        0.5,
        7.0,
    ];
    let mut v: [Vec<u32>; 3] = [vec![], vec![], vec![]];
    for lane in 0..64 {
        for (k, vk) in v.iter_mut().enumerate() {
            let x = if lane < edges.len() && !name.starts_with("sdwa") {
                edges[(lane + 3 * k) % edges.len()].to_bits()
            } else if name.contains("f16") {
                f32_to_f16(r.f32(-100.0, 100.0)) as u32
                    | (f32_to_f16(r.f32(-4.0, 4.0)) as u32) << 16
            } else if lane % 2 == 0 {
                r.next() as u32
            } else {
                r.f32(-1000.0, 1000.0).to_bits()
            };
            vk.push(x);
        }
    }
    if name.starts_with("dpp") {
        v[0] = (0..64).map(|l| 1000 + l).collect();
    }
    v
}

fn build(isa: Isa, cases: &[(&str, &str, Ref)]) -> (CodeObject, Program) {
    let mut src = String::new();
    for (name, asm, _) in cases {
        let asm = asm.replace('\n', "\\n");
        src.push_str(&format!(
            "kernel void t_{name}(global const uint *A, global const uint *B, global const uint *C, global uint *O) {{\n\
             uint i = __builtin_amdgcn_workitem_id_x(); uint a = A[i], b = B[i], c = C[i], r = c;\n\
             __asm__ volatile(\"{asm}\" : \"+v\"(r) : \"v\"(a), \"v\"(b), \"v\"(c) : \"vcc\", \"s0\", \"s1\", \"s2\", \"s3\", \
             \"v40\", \"v41\", \"v42\", \"v43\", \"v44\", \"v45\", \"v46\", \"v47\", \"a0\", \"a1\");\n\
             O[i] = r; }}\n"
        ));
    }
    let (_, bytes) = compile_cl_for(isa, &src, &[]);
    let co = CodeObject::parse(&bytes, "cdna semantics").unwrap();
    let prog = Program::new(&co, isa).unwrap();
    (co, prog)
}

fn run_cases(isa: Isa, cases: &[(&str, &str, Ref)]) {
    let k = build(isa, cases);
    let mut failures = vec![];
    for (name, asm, reference) in cases {
        let inp = inputs(name);
        let [a, b, c] = &inp;
        let out = run_abc(&k, &format!("t_{name}"), 64, &inp);
        for lane in 0..64 {
            let (got, want) = (out[lane], reference(a, b, c, lane));
            if got != want {
                failures.push(format!(
                    "{isa:?} {name} ({}) lane {lane}: inputs {:#x} {:#x} {:#x}: got {got:#x}, want {want:#x}",
                    asm.lines().next().unwrap_or(""),
                    a[lane],
                    b[lane],
                    c[lane]
                ));
            }
        }
    }
    for x in failures.iter().take(40) {
        eprintln!("{x}");
    }
    assert!(failures.is_empty(), "{} lanes differ", failures.len());
}

#[test]
fn cdna_instructions_match_isa_reference_on_gfx942() {
    run_cases(Isa::Gfx942, CASES);
}

#[test]
fn cdna_instructions_match_isa_reference_on_gfx950() {
    let all: Vec<_> = CASES.iter().chain(CASES950).copied().collect();
    run_cases(Isa::Gfx950, &all);
}

/// Kernels of the dispatch tests: hardware ids through `s_getreg`, and (gfx950) a workgroup
/// using more LDS than gfx942 has.
const DISPATCH_CL: &str = r#"
kernel void ids(global uint *out) {
  uint t = __builtin_amdgcn_workitem_id_x();
  uint i = __builtin_amdgcn_workgroup_id_x() * 256 + t;
  // hwreg(HW_REG_XCC_ID, 0, 32) and hwreg(HW_REG_HW_ID, 0, 4): WAVE_ID.
  uint xcc = __builtin_amdgcn_s_getreg(20 | (31 << 11));
  uint wave = __builtin_amdgcn_s_getreg(4 | (3 << 11));
  out[i] = xcc << 8 | wave;
}
#ifdef __gfx950__
// 96 KiB of LDS: each of 256 work-items fills 96 words, then reads another item's words.
kernel void big_lds(global uint *out) {
  local uint buf[24576];
  uint t = __builtin_amdgcn_workitem_id_x();
  for (uint k = 0; k < 96; k++) buf[k * 256 + t] = t * 1000 + k;
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  __builtin_amdgcn_s_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
  uint s = 0;
  for (uint k = 0; k < 96; k++) s += buf[k * 256 + (255 - t)];
  out[t] = s;
}
#endif
"#;

fn dispatch_kernels(isa: Isa) -> (CodeObject, Program) {
    let (_, bytes) = compile_cl_for(isa, DISPATCH_CL, &[]);
    let co = CodeObject::parse(&bytes, "dispatch").unwrap();
    let prog = Program::new(&co, isa).unwrap();
    (co, prog)
}

/// `s_getreg` of HW_REG_XCC_ID reads the dispatch's XCC id (by default its partition index),
/// and HW_REG_HW_ID's WAVE_ID the wave's index in its workgroup.
#[test]
fn getreg_reads_the_xcc_id_and_wave_id_of_the_dispatch() {
    let (co, prog) = dispatch_kernels(Isa::Gfx942);
    let k = co.kernel("ids").unwrap();
    for (xcc, part, want_xcc) in [(None, 1u32, 1u32), (Some(6), 1, 6)] {
        let mut mem = HostMemory::new();
        let out = mem.alloc(4 * 512);
        let mut a = Args::default().ptr(out).0;
        a.resize(k.descriptor.kernarg_size.max(64) as usize, 0);
        let kernarg = mem.alloc_bytes(&a);
        let hw = am_emu::HwDispatch {
            name: "ids".into(),
            entry: k.entry,
            rsrc1: k.descriptor.compute_pgm_rsrc1,
            rsrc2: k.descriptor.compute_pgm_rsrc2,
            rsrc3: k.descriptor.compute_pgm_rsrc3,
            user_sgprs: vec![kernarg as u32, (kernarg >> 32) as u32],
            wave_size: 64,
            grid: [512, 1, 1],
            workgroup: [256, 1, 1],
            partition: am_emu::Partition {
                index: part,
                count: 2,
                chunk: 1,
            },
            xcc_id: xcc,
            ..Default::default()
        };
        let stats = am_emu::dispatch_hw(&prog, co.text_address, &hw, &mut mem).unwrap();
        assert_eq!(stats.workgroups, 1, "XCC {part} of 2 runs workgroup {part}");
        let got = download_u32(&mut mem, out, 512);
        for (i, &g) in got.iter().enumerate() {
            let want = if i / 256 == part as usize {
                want_xcc << 8 | (i % 256 / 64) as u32
            } else {
                0
            };
            assert_eq!(g, want, "xcc_id {xcc:?}, out[{i}]");
        }
    }
}

/// gfx950 workgroups may use 160 KiB of LDS; the same request is refused on gfx942 (64 KiB).
#[test]
fn gfx950_has_160_kib_of_lds_and_gfx942_64() {
    let (co, prog) = dispatch_kernels(Isa::Gfx950);
    let k = co.kernel("big_lds").unwrap();
    assert!(k.descriptor.group_segment_fixed_size > 64 * 1024);
    let mut mem = HostMemory::new();
    let out = mem.alloc(4 * 256);
    launch(
        &(co.clone(), prog),
        "big_lds",
        [256, 1, 1],
        [256, 1, 1],
        Args::default().ptr(out),
        &mut mem,
    );
    let got = download_u32(&mut mem, out, 256);
    for (t, &g) in got.iter().enumerate() {
        let want: u32 = (0..96).map(|k| (255 - t as u32) * 1000 + k).sum();
        assert_eq!(g, want, "out[{t}]");
    }
    // The same code object as gfx942 code would need more LDS than a gfx942 workgroup has.
    let prog942 = Program::new(&co, Isa::Gfx942).unwrap();
    let kernarg = mem.alloc(64);
    let l = am_emu::Launch::new([256, 1, 1], [256, 1, 1], kernarg);
    let err = am_emu::dispatch(&prog942, k, &l, &mut mem).unwrap_err();
    assert!(err.to_string().contains("65536"), "{err}");
}

/// Workgroups spread over threads give the same results and statistics as one thread.
#[test]
fn parallel_dispatch_matches_sequential_dispatch() {
    use am_emu::{SharedHostMemory, SharedMemory};
    for isa in [Isa::Gfx942, Isa::Gfx1100] {
        let k = kernels_for(isa);
        let (n, groups) = (32usize, 4usize);
        let mut r = Rng(5);
        let a: Vec<f32> = (0..n * n).map(|_| r.f32(-1.0, 1.0)).collect();
        let b: Vec<f32> = (0..n * n).map(|_| r.f32(-1.0, 1.0)).collect();
        let red: Vec<f32> = (0..256 * groups).map(|_| r.f32(0.0, 1.0)).collect();
        let bytes = |v: &[f32]| -> Vec<u8> { v.iter().flat_map(|x| x.to_le_bytes()).collect() };
        // Sequential, on HostMemory.
        let mut mem = HostMemory::new();
        let (pa, pb) = (upload(&mut mem, &a), upload(&mut mem, &b));
        let pc = mem.alloc(4 * n * n);
        let s1 = launch(
            k,
            "matmul",
            [n as u32, n as u32, 1],
            [16, 16, 1],
            Args::default().ptr(pa).ptr(pb).ptr(pc).u32(n as u32),
            &mut mem,
        );
        let pin = upload(&mut mem, &red);
        let pout = mem.alloc(4 * groups);
        launch(
            k,
            "reduce",
            [256 * groups as u32, 1, 1],
            [256, 1, 1],
            Args::default().ptr(pin).ptr(pout),
            &mut mem,
        );
        let seq_c = mem.bytes(pc, 4 * n * n).unwrap();
        let seq_r = mem.bytes(pout, 4 * groups).unwrap();
        // Parallel, on SharedHostMemory with 3 threads.
        let mut sm = SharedHostMemory::new();
        let (qa, qb) = (sm.alloc_bytes(&bytes(&a)), sm.alloc_bytes(&bytes(&b)));
        let qc = sm.alloc(4 * n * n);
        let qin = sm.alloc_bytes(&bytes(&red));
        let qout = sm.alloc(4 * groups);
        let run =
            |sm: &mut SharedHostMemory, name: &str, grid: [u32; 3], wg: [u32; 3], args: Args| {
                let kd = k.0.kernel(name).unwrap();
                let mut a = args.0;
                a.resize(kd.descriptor.kernarg_size as usize + 64, 0);
                let kernarg = sm.alloc_bytes(&a);
                let mem: &dyn SharedMemory = sm;
                am_emu::dispatch_parallel(&k.1, kd, &am_emu::Launch::new(grid, wg, kernarg), mem, 3)
                    .unwrap()
            };
        let s2 = run(
            &mut sm,
            "matmul",
            [n as u32, n as u32, 1],
            [16, 16, 1],
            Args::default().ptr(qa).ptr(qb).ptr(qc).u32(n as u32),
        );
        run(
            &mut sm,
            "reduce",
            [256 * groups as u32, 1, 1],
            [256, 1, 1],
            Args::default().ptr(qin).ptr(qout),
        );
        assert_eq!(s1, s2, "{isa:?}: same statistics");
        assert_eq!(sm.bytes(qc, 4 * n * n).unwrap(), seq_c, "{isa:?}: matmul");
        assert_eq!(
            sm.bytes(qout, 4 * groups).unwrap(),
            seq_r,
            "{isa:?}: reduce"
        );
    }
}

/// Atomics from workgroups on several threads at once: the counter sees every increment.
#[test]
fn parallel_atomics_see_every_increment() {
    use am_emu::{SharedHostMemory, SharedMemory};
    let k = kernels_for(Isa::Gfx942);
    let n = 64 * 16;
    let mut sm = SharedHostMemory::new();
    let counter = sm.alloc(4);
    let bufs: Vec<u64> = (0..4).map(|_| sm.alloc(4 * n)).collect();
    let mx = sm.alloc_bytes(&i32::MIN.to_le_bytes());
    let kd = k.0.kernel("atomics").unwrap();
    let mut a = Args::default()
        .ptr(counter)
        .ptr(bufs[0])
        .ptr(bufs[1])
        .ptr(bufs[2])
        .ptr(bufs[3])
        .ptr(mx)
        .0;
    a.resize(kd.descriptor.kernarg_size as usize + 64, 0);
    let kernarg = sm.alloc_bytes(&a);
    let mem: &dyn SharedMemory = &sm;
    am_emu::dispatch_parallel(
        &k.1,
        kd,
        &am_emu::Launch::new([n as u32, 1, 1], [64, 1, 1], kernarg),
        mem,
        4,
    )
    .unwrap();
    let total: u32 = (0..n as u32).map(|i| 1 + (i & 3)).sum();
    let got = u32::from_le_bytes(sm.bytes(counter, 4).unwrap().try_into().unwrap());
    assert_eq!(got, total, "every atomic add counted once");
}

/// A parallel dispatch whose later workgroups fault returns the fault of the lowest-numbered
/// failing workgroup, the one the one-thread dispatch returns, whatever the thread count
/// (the threads claim several workgroups at a time); with an instruction limit it stops.
#[test]
fn parallel_dispatch_reports_the_first_failing_workgroup() {
    use am_emu::{Error, Launch, Memory, SharedHostMemory, SharedMemory};
    let k = kernels_for(Isa::Gfx942);
    let kd = k.0.kernel("vadd").unwrap();
    let groups = 300;
    let n = 256 * groups;
    // The output holds the first `good` workgroups' results; it is the last region, so every
    // later workgroup's store is unmapped.
    let good = 137;
    let input: Vec<u8> = (0..n).flat_map(|i| (i as f32).to_le_bytes()).collect();
    let kernarg_len = kd.descriptor.kernarg_size as usize + 64;
    let kernarg = |a: u64, b: u64, c: u64| {
        let mut v = Args::default().ptr(a).ptr(b).ptr(c).u32(n as u32).0;
        v.resize(kernarg_len, 0);
        v
    };
    let launch = |at: u64| Launch::new([n as u32, 1, 1], [256, 1, 1], at);
    let mut hm = HostMemory::new();
    let (a, b) = (hm.alloc_bytes(&input), hm.alloc_bytes(&input));
    let ka = hm.alloc(kernarg_len);
    let c = hm.alloc(4 * 256 * good);
    Memory::write(&mut hm, ka, &kernarg(a, b, c)).unwrap();
    let want = am_emu::dispatch(&k.1, kd, &launch(ka), &mut hm).unwrap_err();
    let first_bad = c + 4 * 256 * good as u64;
    assert!(
        matches!(&want, Error::MemoryFault { fault, lane: 0, .. } if fault.addr == first_bad),
        "{want}"
    );
    for threads in [2, 3, 8] {
        let mut sm = SharedHostMemory::new();
        let (sa, sb) = (sm.alloc_bytes(&input), sm.alloc_bytes(&input));
        let ska = sm.alloc(kernarg_len);
        let sc = sm.alloc(4 * 256 * good);
        assert_eq!((sa, sb, ska, sc), (a, b, ka, c), "same allocations");
        SharedMemory::write(&sm, ska, &kernarg(a, b, c)).unwrap();
        let mem: &dyn SharedMemory = &sm;
        let got = am_emu::dispatch_parallel(&k.1, kd, &launch(ska), mem, threads).unwrap_err();
        assert_eq!(got.to_string(), want.to_string(), "{threads} threads");
        // The workgroups before the first failing one all stored their sums.
        let out = sm.bytes(sc, 4 * 256 * good).unwrap();
        for (i, w) in out.chunks_exact(4).enumerate() {
            let sum = f32::from_le_bytes([w[0], w[1], w[2], w[3]]);
            assert_eq!(sum, 2.0 * i as f32, "{threads} threads: c[{i}]");
        }
        // With a limit far below the dispatch's instructions, it stops.
        let mut l = launch(ska);
        l.instruction_limit = Some(1000);
        let err = am_emu::dispatch_parallel(&k.1, kd, &l, mem, threads).unwrap_err();
        assert!(
            matches!(err, Error::Stopped { ref reason, .. } if reason.contains("limit")),
            "{threads} threads: {err}"
        );
    }
}

/// A [`am_emu::SharedMemory`] that notes which threads touch it and panics on a read of one
/// address (a fault of the host, not of the kernel).
struct Watched<'a> {
    mem: &'a am_emu::SharedHostMemory,
    /// The threads that touched the memory, with their names.
    threads: std::sync::Mutex<std::collections::HashMap<std::thread::ThreadId, String>>,
    panic_at: Option<u64>,
}

impl Watched<'_> {
    fn note(&self) {
        let me = std::thread::current();
        let name = me.name().unwrap_or("(unnamed)");
        self.threads
            .lock()
            .unwrap()
            .entry(me.id())
            .or_insert_with(|| name.to_string());
    }
}

impl am_emu::SharedMemory for Watched<'_> {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), am_emu::Fault> {
        self.note();
        if self
            .panic_at
            .is_some_and(|p| (addr..addr + buf.len() as u64).contains(&p))
        {
            panic!("host fault reading {addr:#x}");
        }
        self.mem.read(addr, buf)
    }
    fn write(&self, addr: u64, data: &[u8]) -> Result<(), am_emu::Fault> {
        self.note();
        self.mem.write(addr, data)
    }
    fn atomic_rmw(
        &self,
        addr: u64,
        len: usize,
        f: &mut dyn FnMut(u64) -> u64,
    ) -> Result<u64, am_emu::Fault> {
        self.note();
        self.mem.atomic_rmw(addr, len, f)
    }
    fn all_or_nothing(&self) -> bool {
        true
    }
}

/// The dispatching thread is one of a parallel dispatch's threads (one thread is the caller
/// alone), the others are the emulator's pool threads, no more threads than asked touch
/// memory, and a panic on any thread reaches the caller instead of leaving that thread's
/// workgroups out of the statistics.
#[test]
fn parallel_dispatch_runs_on_the_caller_and_re_raises_panics() {
    use am_emu::{Launch, SharedHostMemory, SharedMemory};
    let k = kernels_for(Isa::Gfx942);
    let kd = k.0.kernel("vadd").unwrap();
    let groups = 64;
    let n = 256 * groups;
    let input: Vec<u8> = (0..n).flat_map(|i| (i as f32).to_le_bytes()).collect();
    let mut sm = SharedHostMemory::new();
    let (a, b) = (sm.alloc_bytes(&input), sm.alloc_bytes(&input));
    let c = sm.alloc(4 * n);
    let mut args = Args::default().ptr(a).ptr(b).ptr(c).u32(n as u32).0;
    args.resize(kd.descriptor.kernarg_size as usize + 64, 0);
    let ka = sm.alloc_bytes(&args);
    let launch = Launch::new([n as u32, 1, 1], [256, 1, 1], ka);
    let caller = std::thread::current().id();
    let watched = |panic_at| Watched {
        mem: &sm,
        threads: Default::default(),
        panic_at,
    };
    for threads in [1, 2, 3] {
        let w = watched(None);
        let mem: &dyn SharedMemory = &w;
        let stats = am_emu::dispatch_parallel(&k.1, kd, &launch, mem, threads).unwrap();
        assert_eq!(stats.workgroups, groups as u64, "{threads} threads");
        let seen = w.threads.into_inner().unwrap();
        assert!(
            seen.len() <= threads,
            "{threads} threads: {} touched memory",
            seen.len()
        );
        assert!(
            seen.iter()
                .all(|(id, name)| *id == caller || name.starts_with("am-emu-")),
            "{threads} threads: others are pool threads: {seen:?}"
        );
        if threads == 1 {
            let ids: Vec<_> = seen.keys().collect();
            assert_eq!(ids, [&caller], "one thread is the caller");
        }
        let out = sm.bytes(c, 4 * n).unwrap();
        for (i, v) in out.chunks_exact(4).enumerate() {
            let sum = f32::from_le_bytes([v[0], v[1], v[2], v[3]]);
            assert_eq!(sum, 2.0 * i as f32, "{threads} threads: c[{i}]");
        }
    }
    // A read of the last workgroup's input panics, on whichever thread runs it.
    let last = a + 4 * 256 * (groups as u64 - 1);
    for threads in [1, 2, 3] {
        let w = watched(Some(last));
        let mem: &dyn SharedMemory = &w;
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            am_emu::dispatch_parallel(&k.1, kd, &launch, mem, threads)
        }));
        assert!(
            r.is_err(),
            "{threads} threads: the panic reaches the caller, got {r:?}"
        );
    }
}
