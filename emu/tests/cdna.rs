//! CDNA-only semantics (gfx942, gfx950): instruction sequences written as inline assembly
//! (compiled by clang-22), run on 64 lanes and compared bit for bit with references written
//! from the CDNA3/CDNA4 ISA descriptions: SDWA (selects, sign extension, preserved bits, the
//! carry-out of VOP2 carry ops), GFX9 DPP (row broadcasts, wave shifts), `v_cmpx` writing its
//! scalar destination, 16-bit results clearing the high half, packed f32, 64-bit moves and
//! shifts, AccVGPRs, and the gfx950 additions the emulator models.

#![allow(clippy::unwrap_used)] // unwrap is fine in tests

mod common;
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
        let [a, b, c] = inputs(name);
        let mut mem = HostMemory::new();
        let (pa, pb, pc) = (
            upload(&mut mem, &a),
            upload(&mut mem, &b),
            upload(&mut mem, &c),
        );
        let po = mem.alloc(4 * 64);
        launch(
            &k,
            &format!("t_{name}"),
            [64, 1, 1],
            [64, 1, 1],
            Args::default().ptr(pa).ptr(pb).ptr(pc).ptr(po),
            &mut mem,
        );
        let out = download_u32(&mut mem, po, 64);
        for lane in 0..64 {
            let (got, want) = (out[lane], reference(&a, &b, &c, lane));
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
