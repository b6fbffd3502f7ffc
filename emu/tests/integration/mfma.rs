//! MFMA on gfx942 and gfx950: one wave computes D = A * B + C through a compiler builtin
//! (`tests/kernels/mfma.cl` loads and stores the fragments by the documented register
//! layout), compared bit for bit with a plain matrix product in the documented accumulation
//! order: D[i][j] starts from C[i][j] and adds A[i][k] * B[k][j] for k = 0, 1, ... in order,
//! one fused multiply-add (rounded to f32, or f64) per step; integers wrap.

use crate::common;
use am_emu::float::{bf16_to_f32, f16_to_f32, f32_to_f16};
use am_emu::{CodeObject, HostMemory, Isa, Program};
use common::*;

const MFMA_CL: &str = include_str!("../kernels/mfma.cl");

fn kernels(isa: Isa) -> &'static (CodeObject, Program) {
    type Cell = std::sync::OnceLock<(CodeObject, Program)>;
    static K: [Cell; 2] = [Cell::new(), Cell::new()];
    K[usize::from(isa == Isa::Gfx950)].get_or_init(|| {
        let (_, bytes) = compile_cl_for(isa, MFMA_CL, &[]);
        let co = CodeObject::parse(&bytes, "mfma.cl").unwrap();
        let prog = Program::new(&co, isa).unwrap();
        (co, prog)
    })
}

/// Element types of the inputs.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum In {
    F16,
    Bf16,
    I8,
    Fp8,
    Bf8,
    F32,
    F64,
}

/// 8-bit floats written from the format definitions (not the emulator's decoder): E4M3 and
/// E5M2, FNUZ on gfx942 (biases 8 and 16, 0x80 is NaN), OCP on gfx950 (biases 7 and 15).
fn f8(x: u8, exp_bits: u32, fnuz: bool) -> f64 {
    let man_bits = 7 - exp_bits;
    let bias = (1i32 << (exp_bits - 1)) - 1 + i32::from(fnuz);
    let e = (x as i32 >> man_bits) & ((1 << exp_bits) - 1);
    let m = (x as i32) & ((1 << man_bits) - 1);
    let mag = if e == 0 {
        m as f64 * 2f64.powi(1 - bias - man_bits as i32)
    } else {
        (1.0 + m as f64 / (1 << man_bits) as f64) * 2f64.powi(e - bias)
    };
    if x & 0x80 != 0 { -mag } else { mag }
}

/// A random input element as raw bytes, avoiding NaN and infinity encodings and values whose
/// products or sums would overflow.
fn random(t: In, r: &mut Rng, isa: Isa) -> Vec<u8> {
    match t {
        In::F16 => f32_to_f16(r.f32(-4.0, 4.0)).to_le_bytes().to_vec(),
        In::Bf16 => ((r.f32(-4.0, 4.0).to_bits() >> 16) as u16)
            .to_le_bytes()
            .to_vec(),
        In::I8 => vec![r.next() as u8],
        In::Fp8 | In::Bf8 => loop {
            let b = r.next() as u8;
            let e = if t == In::Fp8 { 4 } else { 5 };
            let exp = (b >> (7 - e)) & ((1 << e) - 1);
            let nan = if isa == Isa::Gfx942 {
                b == 0x80
            } else if t == In::Fp8 {
                b & 0x7f == 0x7f
            } else {
                exp == (1 << e) - 1
            };
            if !nan && exp < (1 << e) - 2 {
                break vec![b];
            }
        },
        In::F32 => r.f32(-100.0, 100.0).to_le_bytes().to_vec(),
        In::F64 => ((r.f32(-100.0, 100.0) as f64) * 1.000_000_1)
            .to_le_bytes()
            .to_vec(),
    }
}

fn value(t: In, b: &[u8], isa: Isa) -> f64 {
    let fnuz = isa == Isa::Gfx942;
    match t {
        In::F16 => f16_to_f32(u16::from_le_bytes([b[0], b[1]])) as f64,
        In::Bf16 => bf16_to_f32(u16::from_le_bytes([b[0], b[1]])) as f64,
        In::I8 => b[0] as i8 as f64,
        In::Fp8 => f8(b[0], 4, fnuz),
        In::Bf8 => f8(b[0], 5, fnuz),
        In::F32 => f32::from_le_bytes(b[..4].try_into().unwrap()) as f64,
        In::F64 => f64::from_le_bytes(b[..8].try_into().unwrap()),
    }
}

/// Result type.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Out {
    F32,
    I32,
    F64,
}

/// Runs kernel `name` on random A (`ta`), B (`tb`) and C and checks D against the reference,
/// for `blocks` independent M x N x K problems.
#[allow(clippy::too_many_arguments)]
fn check(isa: Isa, name: &str, m: usize, k: usize, blocks: usize, ta: In, tb: In, out: Out) {
    let n = m;
    let mut r = Rng(0x3f3 ^ (m * 131 + k) as u64 ^ name.len() as u64);
    let make = |t: In, count: usize, r: &mut Rng| -> Vec<Vec<u8>> {
        (0..count).map(|_| random(t, r, isa)).collect()
    };
    let a = make(ta, blocks * m * k, &mut r);
    let b = make(tb, blocks * k * n, &mut r);
    let c: Vec<u64> = (0..blocks * m * n)
        .map(|_| match out {
            Out::F32 => r.f32(-50.0, 50.0).to_bits() as u64,
            Out::I32 => r.next() as u32 as u64,
            Out::F64 => (r.f32(-50.0, 50.0) as f64 * 1.000_000_3).to_bits(),
        })
        .collect();
    let osize = if out == Out::F64 { 8 } else { 4 };
    let mut mem = HostMemory::new();
    let pa = mem.alloc_bytes(&a.concat());
    let pb = mem.alloc_bytes(&b.concat());
    let cb: Vec<u8> = c
        .iter()
        .flat_map(|x| x.to_le_bytes()[..osize].to_vec())
        .collect();
    let pc = mem.alloc_bytes(&cb);
    let pd = mem.alloc(cb.len());
    launch(
        kernels(isa),
        name,
        [64, 1, 1],
        [64, 1, 1],
        Args::default().ptr(pa).ptr(pb).ptr(pc).ptr(pd),
        &mut mem,
    );
    let got = mem.bytes(pd, cb.len()).unwrap();
    let mut bad = vec![];
    for blk in 0..blocks {
        for i in 0..m {
            for j in 0..n {
                let at = (blk * m + i) * n + j;
                let av = |kk: usize| value(ta, &a[(blk * m + i) * k + kk], isa);
                let bv = |kk: usize| value(tb, &b[(blk * k + kk) * n + j], isa);
                let (want, have) = match out {
                    Out::F32 => {
                        let mut acc = f32::from_bits(c[at] as u32);
                        for kk in 0..k {
                            acc = (av(kk) as f32).mul_add(bv(kk) as f32, acc);
                        }
                        let g = u32::from_le_bytes(got[4 * at..4 * at + 4].try_into().unwrap());
                        (acc.to_bits() as u64, g as u64)
                    }
                    Out::I32 => {
                        let mut acc = c[at] as u32 as i32;
                        for kk in 0..k {
                            acc = acc.wrapping_add((av(kk) as i32).wrapping_mul(bv(kk) as i32));
                        }
                        let g = u32::from_le_bytes(got[4 * at..4 * at + 4].try_into().unwrap());
                        (acc as u32 as u64, g as u64)
                    }
                    Out::F64 => {
                        let mut acc = f64::from_bits(c[at]);
                        for kk in 0..k {
                            acc = av(kk).mul_add(bv(kk), acc);
                        }
                        let g = u64::from_le_bytes(got[8 * at..8 * at + 8].try_into().unwrap());
                        (acc.to_bits(), g)
                    }
                };
                if want != have {
                    bad.push(format!(
                        "{name} block {blk} D[{i}][{j}]: got {have:#x}, want {want:#x}"
                    ));
                }
            }
        }
    }
    for x in bad.iter().take(10) {
        eprintln!("{x}");
    }
    assert!(
        bad.is_empty(),
        "{isa:?} {name}: {} of {} results differ",
        bad.len(),
        blocks * m * n
    );
}

fn common_shapes(isa: Isa) {
    check(
        isa,
        "mfma_f32_32x32x8_f16",
        32,
        8,
        1,
        In::F16,
        In::F16,
        Out::F32,
    );
    check(
        isa,
        "mfma_f32_16x16x16_f16",
        16,
        16,
        1,
        In::F16,
        In::F16,
        Out::F32,
    );
    check(
        isa,
        "mfma_f32_32x32x8_bf16",
        32,
        8,
        1,
        In::Bf16,
        In::Bf16,
        Out::F32,
    );
    check(
        isa,
        "mfma_f32_16x16x16_bf16",
        16,
        16,
        1,
        In::Bf16,
        In::Bf16,
        Out::F32,
    );
    check(
        isa,
        "mfma_i32_32x32x16_i8",
        32,
        16,
        1,
        In::I8,
        In::I8,
        Out::I32,
    );
    check(
        isa,
        "mfma_i32_16x16x32_i8",
        16,
        32,
        1,
        In::I8,
        In::I8,
        Out::I32,
    );
    check(
        isa,
        "mfma_f32_16x16x32_fp8_fp8",
        16,
        32,
        1,
        In::Fp8,
        In::Fp8,
        Out::F32,
    );
    check(
        isa,
        "mfma_f32_32x32x16_bf8_fp8",
        32,
        16,
        1,
        In::Bf8,
        In::Fp8,
        Out::F32,
    );
    check(
        isa,
        "mfma_f32_32x32x2_f32",
        32,
        2,
        1,
        In::F32,
        In::F32,
        Out::F32,
    );
    // The tensor layer's f32 matrix product on CDNA.
    check(
        isa,
        "mfma_f32_16x16x4_f32",
        16,
        4,
        1,
        In::F32,
        In::F32,
        Out::F32,
    );
    check(
        isa,
        "mfma_f32_4x4x1_16b_f32",
        4,
        1,
        16,
        In::F32,
        In::F32,
        Out::F32,
    );
    check(
        isa,
        "mfma_f64_16x16x4_f64",
        16,
        4,
        1,
        In::F64,
        In::F64,
        Out::F64,
    );
}

#[test]
fn mfma_tiles_match_reference_on_gfx942() {
    common_shapes(Isa::Gfx942);
}

#[test]
fn mfma_tiles_match_reference_on_gfx950_including_its_new_shapes() {
    common_shapes(Isa::Gfx950);
    check(
        Isa::Gfx950,
        "mfma_f32_16x16x32_f16",
        16,
        32,
        1,
        In::F16,
        In::F16,
        Out::F32,
    );
    check(
        Isa::Gfx950,
        "mfma_f32_32x32x16_bf16",
        32,
        16,
        1,
        In::Bf16,
        In::Bf16,
        Out::F32,
    );
    check(
        Isa::Gfx950,
        "mfma_i32_16x16x64_i8",
        16,
        64,
        1,
        In::I8,
        In::I8,
        Out::I32,
    );
}

/// The accumulator and result in AccVGPRs, accumulated twice in place: D = A*B + (A*B + C).
#[test]
fn mfma_accumulates_in_accvgprs() {
    let isa = Isa::Gfx942;
    let (m, k) = (32usize, 8usize);
    let mut r = Rng(77);
    let a: Vec<u16> = (0..m * k).map(|_| f32_to_f16(r.f32(-2.0, 2.0))).collect();
    let b: Vec<u16> = (0..k * m).map(|_| f32_to_f16(r.f32(-2.0, 2.0))).collect();
    let c: Vec<f32> = (0..m * m).map(|_| r.f32(-10.0, 10.0)).collect();
    let mut mem = HostMemory::new();
    let (pa, pb, pc) = (
        upload(&mut mem, &a),
        upload(&mut mem, &b),
        upload(&mut mem, &c),
    );
    let pd = mem.alloc(4 * m * m);
    let k0 = kernels(isa);
    let text: String = k0.1.disassemble().into_iter().map(|l| l.1 + "\n").collect();
    assert!(
        text.contains("v_mfma_f32_32x32x8_f16 a["),
        "the kernel must use AccVGPRs"
    );
    launch(
        k0,
        "mfma_acc_agpr_32x32x8_f16",
        [64, 1, 1],
        [64, 1, 1],
        Args::default().ptr(pa).ptr(pb).ptr(pc).ptr(pd),
        &mut mem,
    );
    let d = download_f32(&mut mem, pd, m * m);
    for i in 0..m {
        for j in 0..m {
            let mut acc = c[i * m + j];
            for _ in 0..2 {
                for kk in 0..k {
                    let x = f16_to_f32(a[i * k + kk]);
                    let y = f16_to_f32(b[kk * m + j]);
                    acc = x.mul_add(y, acc);
                }
            }
            assert_eq!(d[i * m + j].to_bits(), acc.to_bits(), "D[{i}][{j}]");
        }
    }
}
