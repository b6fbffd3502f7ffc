//! Every WMMA vector (`tests/vectors/wmma_*.txt`, assembled by LLVM) run by the interpreter in
//! wave32 and wave64 on random inputs, against a reference written from AMD's Matrix
//! Instruction Calculator: its per-instruction formulas place A, B and C in the registers,
//! a plain multiply-accumulate in the documented order gives D, and the whole VGPR file
//! after the instruction must be the one before with D written at its places (so halves and
//! registers D does not own must keep their values).

use crate::interp::float::{
    bf8_to_f32, bf16_to_f32, f16_to_f32, f32_to_bf16, f32_to_f16, fp8_to_f32,
};
use crate::interp::wave::{Ctx, Wave, WaveState};
use crate::{Error, HostMemory, Isa, Program};

/// What the reference reads from an instruction's text.
#[derive(Debug)]
struct Spec {
    /// Element types of A, B and D as in the mnemonic (`f16`, `iu4`, `fp8`, `f32`, ...).
    a: &'static str,
    b: &'static str,
    d: &'static str,
    k: u32,
    /// First VGPR of D, A, B, and of C unless C is a constant.
    regs: [u32; 3],
    c: Result<u32, &'static str>,
    neg_lo: [bool; 3],
    neg_hi: [bool; 3],
    op_sel: [bool; 3],
    clamp: bool,
}

fn bits_of(t: &str) -> u32 {
    match t {
        "f16" | "bf16" => 16,
        "iu8" | "fp8" | "bf8" => 8,
        "iu4" => 4,
        _ => 32,
    }
}

fn spec(text: &str) -> Spec {
    let types = ["f16", "bf16", "iu8", "iu4", "fp8", "bf8", "f32", "i32"];
    let ty = |s: &str| *types.iter().find(|t| **t == s).unwrap();
    let (mnemonic, rest) = text.split_once(' ').unwrap();
    let (d, shape) = mnemonic
        .strip_prefix("v_wmma_")
        .unwrap()
        .split_once("_16x16x")
        .unwrap();
    let (k, ab) = shape.split_once('_').unwrap();
    let (a, b) = ab.split_once('_').unwrap_or((ab, ab));
    let list = |key: &str| -> [bool; 3] {
        let mut out = [false; 3];
        if let Some((_, l)) = rest.split_once(key) {
            for (o, x) in out.iter_mut().zip(l[..l.find(']').unwrap()].split(',')) {
                *o = x == "1";
            }
        }
        out
    };
    let ops: Vec<&str> = rest
        .split(", ")
        .map(|o| o.split(' ').next().unwrap())
        .collect();
    let first = |o: &str| -> u32 {
        let r = o.trim_start_matches('v').trim_start_matches('[');
        r.split([':', ']']).next().unwrap().parse().unwrap()
    };
    let c = if ops[3].starts_with('v') {
        Ok(first(ops[3]))
    } else {
        Err(match ops[3] {
            "1.0" => "1.0",
            "-2.0" => "-2.0",
            "0.5" => "0.5",
            "0" => "0",
            "1" => "1",
            "-7" => "-7",
            o => panic!("constant {o} not in the test's list"),
        })
    };
    Spec {
        a: ty(a),
        b: ty(b),
        d: ty(d),
        k: k.parse().unwrap(),
        regs: [first(ops[0]), first(ops[1]), first(ops[2])],
        c,
        neg_lo: list("neg_lo:["),
        neg_hi: list("neg_hi:["),
        op_sel: list(" op_sel:["),
        clamp: rest.ends_with(" clamp"),
    }
}

/// (VGPR offset, lane, bit) of A[i][k] (or B[k][i]) per the calculator's formulas.
fn ab_place(gfx12: bool, wave64: bool, bits: u32, kdim: u32, i: u32, k: u32) -> (u32, u32, u32) {
    if !gfx12 {
        // "A[i][k] GPR: floor(k / 2).[16*(k % 2)+15 : 16*(k % 2)]" for 16 bits, floor(k / 4)
        // and floor(k / 8) for 8 and 4; lane i (and its copies).
        let per = 32 / bits;
        return (k / per, i, bits * (k % per));
    }
    match (wave64, bits, kdim) {
        (false, 16, _) => (
            2 * (k / 8) + (k / 2) % 2,
            16 * ((k / 4) % 2) + i,
            16 * (k % 2),
        ),
        (false, 8, _) => ((k / 4) % 2, 16 * (k / 8) + i, 8 * (k % 4)),
        (_, 4, 16) => (0, 16 * (k / 8) + i, 4 * (k % 8)),
        (false, 4, _) => ((k / 8) % 2, 16 * (k / 16) + i, 4 * (k % 8)),
        (true, 16, _) => (
            (k / 2) % 2,
            32 * ((k / 8) % 2) + 16 * ((k / 4) % 2) + i,
            16 * (k % 2),
        ),
        (true, 8, _) => (0, 32 * ((k / 4) % 2) + 16 * ((k / 8) % 2) + i, 8 * (k % 4)),
        _ => (0, 32 * ((k / 8) % 2) + 16 * ((k / 16) % 2) + i, 4 * (k % 8)),
    }
}

/// (VGPR offset, lane, bit) of C/D[i][j]; `hi` is gfx11's `op_sel[2]`.
fn cd_place(gfx12: bool, wave64: bool, bits: u32, hi: bool, i: u32, j: u32) -> (u32, u32, u32) {
    match (gfx12, wave64, bits) {
        (false, false, _) => (i / 2, (16 * i) % 32 + j, if hi { 16 } else { 0 }),
        (false, true, _) => (i / 4, (16 * i) % 64 + j, if hi { 16 } else { 0 }),
        (true, false, 32) => (i % 8, 16 * (i / 8) + j, 0),
        (true, false, _) => ((i / 2) % 4, 16 * (i / 8) + j, 16 * (i % 2)),
        (true, true, 32) => (i % 4, 32 * ((i / 4) % 2) + 16 * (i / 8) + j, 0),
        (true, true, _) => (
            (i / 2) % 2,
            32 * ((i / 4) % 2) + 16 * (i / 8) + j,
            16 * (i % 2),
        ),
    }
}

fn value(t: &str, raw: u32) -> f32 {
    match t {
        "f16" => f16_to_f32(raw as u16),
        "bf16" => bf16_to_f32(raw as u16),
        "fp8" => fp8_to_f32(raw as u8, false),
        "bf8" => bf8_to_f32(raw as u8, false),
        _ => f32::from_bits(raw),
    }
}

/// Random element bits of a type: finite floats of moderate size (so no sum overflows and
/// NaN payloads never decide a comparison), including zeros and f16 subnormals.
fn random(t: &str, next: &mut impl FnMut() -> u64) -> u32 {
    let r = next();
    let sign = (r >> 40 & 1) as u32;
    match t {
        "f16" => sign << 15 | (((r >> 10) % 30) as u32) << 10 | (r & 0x3ff) as u32,
        "bf16" => sign << 15 | ((100 + (r >> 7) % 50) as u32) << 7 | (r & 0x7f) as u32,
        "f32" => sign << 31 | ((100 + (r >> 23) % 50) as u32) << 23 | (r & 0x7f_ffff) as u32,
        // E4M3: 0x7f and 0xff are the NaNs; E5M2: exponent 31 is infinity or NaN.
        "fp8" => (r as u8 & 0x7f).min(0x7e) as u32 | sign << 7,
        "bf8" => (r as u8 & 0x7f).min(0x7b) as u32 | sign << 7,
        "iu8" => r as u32 & 0xff,
        "iu4" => r as u32 & 0xf,
        // i32: a quarter each near the top and the bottom, where sums saturate or wrap.
        _ => match r % 4 {
            0 => (i32::MAX - ((r >> 8) % 1000) as i32) as u32,
            1 => (i32::MIN + ((r >> 8) % 1000) as i32) as u32,
            _ => r as u32,
        },
    }
}

/// The raw element bits of C's inline constant (`Err` for one the emulator refuses).
fn constant(d: &str, c: &str) -> Result<u32, ()> {
    let f: f32 = match c {
        "0" => return Ok(0),
        "1" => return Ok(1),
        "-7" => return Ok(-7i32 as u32 & if bits_of(d) == 16 { 0xffff } else { !0 }),
        c => c.parse().unwrap(),
    };
    match d {
        "f16" => Ok(f32_to_f16(f).into()),
        "bf16" => Err(()),
        _ => Ok(f.to_bits()),
    }
}

fn put(v: &mut [u32], row: u32, lane: u32, bit: u32, bits: u32, x: u32) {
    let w = &mut v[row as usize * 64 + lane as usize];
    let mask = if bits == 32 {
        !0
    } else {
        ((1u32 << bits) - 1) << bit
    };
    *w = (*w & !mask) | (x << bit & mask);
}

/// Runs one vector in one wave size on a random VGPR file; panics on a difference.
fn check(isa: Isa, text: &str, words: &[u32], wave64: bool, seed: u64) {
    let gfx12 = isa != Isa::Gfx1100;
    let s = spec(text);
    let mut next = crate::xorshift(seed);
    let mut v: Vec<u32> = (0..crate::interp::wave::VGPR_ROWS * 64)
        .map(|_| next() as u32)
        .collect();
    let lanes = if wave64 { 64 } else { 32 };
    let (ab, bb, db) = (bits_of(s.a), bits_of(s.b), bits_of(s.d));
    let mut a = [[0u32; 32]; 16];
    let mut b = [[0u32; 32]; 16];
    for x in 0..16 {
        for k in 0..s.k as usize {
            a[x][k] = random(s.a, &mut next);
            b[x][k] = random(s.b, &mut next);
        }
    }
    for x in 0..16u32 {
        for k in 0..s.k {
            let (r, l, bit) = ab_place(gfx12, wave64, ab, s.k, x, k);
            let (rb, lb, bitb) = ab_place(gfx12, wave64, bb, s.k, x, k);
            // gfx11's copies in every group of 16 lanes, as the ISA requires.
            let copies = if gfx12 { 1 } else { lanes / 16 };
            for g in 0..copies {
                put(
                    &mut v,
                    s.regs[1] + r,
                    l + 16 * g,
                    bit,
                    ab,
                    a[x as usize][k as usize],
                );
                put(
                    &mut v,
                    s.regs[2] + rb,
                    lb + 16 * g,
                    bitb,
                    bb,
                    b[x as usize][k as usize],
                );
            }
        }
    }
    let hi = s.op_sel[2];
    let mut c = [[0u32; 16]; 16];
    let mut refused = s.op_sel[0] || s.op_sel[1];
    for i in 0..16u32 {
        for j in 0..16u32 {
            c[i as usize][j as usize] = match s.c {
                Ok(rc) => {
                    let x = random(s.d, &mut next);
                    let (r, l, bit) = cd_place(gfx12, wave64, db, hi, i, j);
                    put(&mut v, rc + r, l, bit, db, x);
                    x
                }
                Err(k) => constant(s.d, k).unwrap_or_else(|()| {
                    refused = true;
                    0
                }),
            };
        }
    }
    // D, by the documented arithmetic.
    let mut want = v.clone();
    let int = s.a.starts_with("iu");
    for i in 0..16 {
        for j in 0..16 {
            let d = if int {
                let el = |t: &str, x: u32, signed: bool| -> i64 {
                    let n = bits_of(t);
                    if signed && x >> (n - 1) & 1 != 0 {
                        x as i64 - (1 << n)
                    } else {
                        x as i64
                    }
                };
                let mut acc = c[i][j] as i32 as i64;
                for k in 0..s.k as usize {
                    acc += el(s.a, a[i][k], s.neg_lo[0]) * el(s.b, b[j][k], s.neg_lo[1]);
                }
                if s.clamp {
                    acc.clamp(i32::MIN as i64, i32::MAX as i64) as u32
                } else {
                    acc as u32
                }
            } else {
                // neg_lo negates the elements in the low 16 bits of each register, neg_hi
                // those in the high 16 bits.
                let el = |t: &str, x: u32, src: usize, k: usize| -> f32 {
                    let bit = ab_place(gfx12, wave64, bits_of(t), s.k, 0, k as u32).2;
                    let neg = if bit < 16 {
                        s.neg_lo[src]
                    } else {
                        s.neg_hi[src]
                    };
                    if neg { -value(t, x) } else { value(t, x) }
                };
                let mut acc = value(s.d, c[i][j]);
                if s.neg_hi[2] {
                    acc = acc.abs();
                }
                if s.neg_lo[2] {
                    acc = -acc;
                }
                for k in 0..s.k as usize {
                    acc = el(s.a, a[i][k], 0, k).mul_add(el(s.b, b[j][k], 1, k), acc);
                }
                match s.d {
                    "f16" => f32_to_f16(acc).into(),
                    "bf16" => f32_to_bf16(acc).into(),
                    _ => acc.to_bits(),
                }
            };
            let (r, l, bit) = cd_place(gfx12, wave64, db, hi, i as u32, j as u32);
            put(&mut want, s.regs[0] + r, l, bit, db, d);
        }
    }
    // The interpreter, from the instruction's words.
    let mut code: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    code.extend(0xBFB0_0000u32.to_le_bytes()); // s_endpgm
    let prog = Program::from_bytes(&code, 0, isa).unwrap();
    let mut w = Wave::new();
    w.isa = isa;
    w.lanes = lanes;
    w.set_exec(u64::MAX);
    w.state = WaveState::Running;
    w.v = v.clone();
    let mut mem = HostMemory::new();
    let (mut lds, mut buf) = (vec![], vec![0u8; 1024]);
    let mut ctx = Ctx {
        mem: &mut mem,
        lds: &mut lds,
        code_base: 0,
        prog: &prog,
        instructions: 0,
        budget: 16,
        buf: &mut buf,
        counts: &mut [],
    };
    let r = crate::interp::exec::run(&mut w, &mut ctx);
    let what = format!("{isa:?} wave{lanes} seed {seed:#x}: {text}");
    if refused {
        assert!(
            matches!(r, Err(Error::Unimplemented { .. })),
            "{what}: expected Unimplemented, got {r:?}"
        );
        assert!(w.v == v, "{what}: a refused WMMA wrote registers");
        return;
    }
    assert!(r.is_ok(), "{what}: {r:?}");
    for (n, (got, want)) in w.v.iter().zip(&want).enumerate() {
        assert_eq!(
            got,
            want,
            "{what}: v{} lane {} is {got:#010x}, the reference has {want:#010x}",
            n / 64,
            n % 64
        );
    }
}

fn vectors(src: &str) -> Vec<(&str, Vec<u32>)> {
    src.lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let (text, enc) = l.split_once(" ; encoding: [").unwrap();
            let bytes: Vec<u8> = enc
                .trim_end_matches(']')
                .split(',')
                .map(|b| u8::from_str_radix(b.trim_start_matches("0x"), 16).unwrap())
                .collect();
            let words = bytes
                .chunks(4)
                .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
            (text, words)
        })
        .collect()
}

fn check_all(isa: Isa, src: &str) {
    let vs = vectors(src);
    assert!(vs.len() >= 60, "only {} vectors", vs.len());
    for (n, (text, words)) in vs.iter().enumerate() {
        for wave64 in [false, true] {
            for seed in 1..=3u64 {
                check(isa, text, words, wave64, seed << 32 | n as u64);
            }
        }
    }
}

#[test]
fn gfx11_wmma_matches_the_documented_layouts_in_wave32_and_wave64() {
    check_all(
        Isa::Gfx1100,
        include_str!("../../../tests/vectors/wmma_gfx1100.txt"),
    );
}

#[test]
fn gfx12_wmma_matches_the_documented_layouts_in_wave32_and_wave64() {
    check_all(
        Isa::Gfx1201,
        include_str!("../../../tests/vectors/wmma_gfx1201.txt"),
    );
}

#[test]
fn forms_parse_from_mnemonics_and_pack_round_trip() {
    use super::{Elem, Form};
    let f = Form::of("v_wmma_f32_16x16x16_fp8_bf8").unwrap();
    assert_eq!((f.a, f.b, f.d, f.k), (Elem::Fp8, Elem::Bf8, Elem::F32, 16));
    let f = Form::of("v_wmma_i32_16x16x32_iu4").unwrap();
    assert_eq!((f.a, f.b, f.d, f.k), (Elem::Iu4, Elem::Iu4, Elem::I32, 32));
    assert_eq!(Form::unpack(f.pack()), f);
    let f = Form::of("v_wmma_bf16_16x16x16_bf16").unwrap();
    assert_eq!(Form::unpack(f.pack()), f);
    assert!(
        Form::of("v_swmmac_f32_16x16x32_f16").is_none(),
        "sparse is not WMMA"
    );
    assert!(Form::of("v_wmma_f32_16x16x16_xf32").is_none());
}
