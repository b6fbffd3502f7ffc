//! `mma`, a wave's 16×16×16 matrix multiply-accumulate of f16 or bf16 operands (and f32 ones
//! on CDNA): one wave computes D = A·B + C on gfx1100 (`v_wmma`, wave32), gfx1201 (`v_wmma`,
//! gfx12 layout) and gfx942 (`v_mfma`, wave64) on the emulator, each work-item loading and
//! storing its elements by the layout the emulator documents (AMD's Matrix Instruction
//! Calculator; `am_emu`'s `interp::wmma` and CDNA MFMA), bit for bit against the product
//! summed with one f32 rounding per step in the emulator's order (increasing k; for f32 on
//! CDNA, four `v_mfma_f32_16x16x4_f32` of k `e`, `4 + e`, `8 + e`, `12 + e` for e = 0..3, or,
//! f32 on CDNA's 32×32×16 layout: eight `v_mfma_f32_32x32x2_f32`, k `e`, `8 + e`); the
//! verifier and the lowering refuse what no target runs.

use crate::common;
use am_compiler::*;
use am_emu::float::{bf16_to_f32, f16_to_f32, f32_to_bf16, f32_to_f16};
use common::*;

/// Where a work-item's elements are, from its lane's group `q` (of 16 lanes, 32 for
/// `Cdna32`) and position `x`: the k of A's (and B's) element `e`, and the row of C/D's
/// element `i` (the column of B and of C/D, and A's row, are `x`).
#[derive(Clone, Copy)]
enum Layout {
    Gfx11,
    Gfx12,
    Cdna,
    /// f32 only: 32×32 tiles, k 16.
    Cdna32,
}

impl Layout {
    fn elems(self) -> (u32, u32) {
        match self {
            Layout::Gfx11 => (16, 8),
            Layout::Gfx12 => (8, 8),
            Layout::Cdna => (4, 4),
            Layout::Cdna32 => (8, 16),
        }
    }
    /// Rows and columns of C and D (A is side × 16, B 16 × side).
    fn side(self) -> u32 {
        match self {
            Layout::Cdna32 => 32,
            _ => 16,
        }
    }
    fn k(self, q: u32, e: u32) -> u32 {
        match self {
            // Every lane holds all of k (lanes 16–31 copy 0–15).
            Layout::Gfx11 => e,
            // Chunks of 4 alternate between the two groups of 16 lanes.
            Layout::Gfx12 => 8 * (e / 4) + 4 * q + e % 4,
            Layout::Cdna => 4 * q + e,
            Layout::Cdna32 => 8 * q + e,
        }
    }
    fn row(self, q: u32, i: u32) -> u32 {
        match self {
            Layout::Gfx11 => 2 * i + q,
            Layout::Gfx12 => 8 * q + i,
            Layout::Cdna => 4 * q + i,
            Layout::Cdna32 => 8 * (i / 4) + 4 * q + i % 4,
        }
    }
}

/// `d[s×s] = a[s×16] · b[16×s] + c[s×s]` (s the layout's side; row-major; a, b of `elem`,
/// c, d f32) by one wave of `wave` work-items. The index arithmetic per element is constants
/// of the host's layout, selected by the work-item's q: one `where` per possible q.
fn kernel(layout: Layout, wave: u32, elem: DType) -> Kernel {
    let (ab, cd) = layout.elems();
    let side = layout.side();
    let mut b = KernelBuilder::new("mma16", [wave, 1, 1]);
    let pa = b.param_ptr("a", elem, true);
    let pb = b.param_ptr("b", elem, true);
    let pc = b.param_ptr("c", DType::F32, true);
    let pd = b.param_ptr("d", DType::F32, true);
    let lane = b.local_id(Dim::X);
    let sixteen = b.const_u32(16);
    let sv = b.const_u32(side);
    let x = b.binary(BinOp::Rem, lane, sv);
    let qv = b.binary(BinOp::Div, lane, sv);
    // f(q) for the work-item's q, as a chain of selects over the wave's groups.
    let by_q = |b: &mut KernelBuilder, f: &dyn Fn(u32) -> u32| -> Value {
        let mut v = b.const_u32(f(0));
        for q in 1..wave / side {
            let qc = b.const_u32(q);
            let is = b.cmp(CmpOp::Eq, qv, qc);
            let here = b.const_u32(f(q));
            v = b.where_(is, here, v);
        }
        v
    };
    let mut av = vec![];
    let mut bv = vec![];
    for e in 0..ab {
        let k = by_q(&mut b, &|q| layout.k(q, e));
        let row = b.mul(x, sixteen);
        let ia = b.add(row, k);
        av.push(b.load_elem(pa, ia));
        let krow = b.mul(k, sv);
        let ib = b.add(krow, x);
        bv.push(b.load_elem(pb, ib));
    }
    let mut cv = vec![];
    let mut at = vec![];
    for i in 0..cd {
        let row = by_q(&mut b, &|q| layout.row(q, i));
        let rs = b.mul(row, sv);
        let idx = b.add(rs, x);
        cv.push(b.load_elem(pc, idx));
        at.push(idx);
    }
    let a = b.vector(&av);
    let bb = b.vector(&bv);
    let c = b.vector(&cv);
    let d = b.mma(a, bb, c);
    for (i, &idx) in at.iter().enumerate() {
        let v = b.extract(d, i as u8);
        b.store_elem(pd, idx, v);
    }
    b.finish().unwrap_or_else(|e| panic!("{e}"))
}

const BF16: DType = DType::scalar(Scalar::BF16);

/// `n` operand elements of `elem` as the kernel reads them (raw bits) and their values.
fn operand(elem: DType, n: usize, r: &mut Rng) -> (Vec<u8>, Vec<f32>) {
    let mut bytes = Vec::with_capacity(n * 4);
    let mut vals = Vec::with_capacity(n);
    for _ in 0..n {
        let x = r.f32(-2.0, 2.0);
        let v = match elem.scalar {
            Scalar::F16 => {
                let h = f32_to_f16(x);
                bytes.extend(h.to_le_bytes());
                f16_to_f32(h)
            }
            Scalar::BF16 => {
                let h = f32_to_bf16(x);
                bytes.extend(h.to_le_bytes());
                bf16_to_f32(h)
            }
            _ => {
                bytes.extend(x.to_le_bytes());
                x
            }
        };
        vals.push(v);
    }
    (bytes, vals)
}

/// The product on the host: from C, one f32 fused multiply-add per k, in increasing k (for
/// f32 operands, the instructions in turn, each over its k of every lane group: the four
/// `v_mfma_f32_16x16x4_f32` k = e, 4 + e, 8 + e, 12 + e, the eight `v_mfma_f32_32x32x2_f32`
/// k = e, 8 + e).
fn reference(a: &[f32], b: &[f32], c: &[f32], elem: DType, side: usize) -> Vec<f32> {
    let per = if side == 32 { 8 } else { 4 };
    let order: Vec<usize> = if elem == DType::F32 {
        (0..per)
            .flat_map(|e| (0..16 / per).map(move |q| per * q + e))
            .collect()
    } else {
        (0..16).collect()
    };
    let mut d = c.to_vec();
    for i in 0..side {
        for j in 0..side {
            let mut acc = c[i * side + j];
            for &k in &order {
                acc = a[i * 16 + k].mul_add(b[k * side + j], acc);
            }
            d[i * side + j] = acc;
        }
    }
    d
}

fn check(target: GfxTarget, layout: Layout, elem: DType) {
    let mut r = Rng(0x3737 + target as u64);
    let side = layout.side() as usize;
    let (a, av) = operand(elem, side * 16, &mut r);
    let (b, bv) = operand(elem, 16 * side, &mut r);
    let c: Vec<f32> = (0..side * side).map(|_| r.f32(-4.0, 4.0)).collect();
    let k = kernel(layout, target.wave_size(), elem);
    let compiled = compiler()
        .compile(&k, Target::Gpu(target))
        .unwrap_or_else(|e| panic!("{e}"));
    let args = [Arg::Buf(a), Arg::Buf(b), buf(&c), zeros(side * side * 4)];
    let (out, _) = run_code_object_on(target, &compiled.bytes, &k, [1, 1, 1], &args);
    let got: Vec<f32> = from_bytes(&out[3]);
    let want = reference(&av, &bv, &c, elem, side);
    for (n, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(
            g.to_bits(),
            w.to_bits(),
            "{target} {elem}: D[{}][{}] is {g}, expected {w}",
            n / side,
            n % side
        );
    }
}

#[test]
fn mma_is_wmma_on_gfx1100() {
    check(GfxTarget::Gfx1100, Layout::Gfx11, DType::F16);
    check(GfxTarget::Gfx1100, Layout::Gfx11, BF16);
}

#[test]
fn mma_is_wmma_of_the_gfx12_layout_on_gfx1201() {
    check(GfxTarget::Gfx1201, Layout::Gfx12, DType::F16);
    check(GfxTarget::Gfx1201, Layout::Gfx12, BF16);
}

#[test]
fn mma_is_mfma_on_gfx942() {
    check(GfxTarget::Gfx942, Layout::Cdna, DType::F16);
    check(GfxTarget::Gfx942, Layout::Cdna, BF16);
    check(GfxTarget::Gfx942, Layout::Cdna, DType::F32);
    check(GfxTarget::Gfx942, Layout::Cdna32, DType::F32);
}

/// The text form prints and parses `mma`; the lowering calls each target's intrinsic (bf16
/// operands as the i16 vectors LLVM declares them with).
#[test]
fn mma_round_trips_through_text_and_lowers_to_each_targets_intrinsic() {
    for (target, layout, elem, call) in [
        (
            GfxTarget::Gfx1100,
            Layout::Gfx11,
            DType::F16,
            "@llvm.amdgcn.wmma.f32.16x16x16.f16.v8f32.v16f16(",
        ),
        (
            GfxTarget::Gfx1100,
            Layout::Gfx11,
            BF16,
            "@llvm.amdgcn.wmma.f32.16x16x16.bf16.v8f32.v16i16(",
        ),
        (
            GfxTarget::Gfx1201,
            Layout::Gfx12,
            DType::F16,
            "@llvm.amdgcn.wmma.f32.16x16x16.f16.v8f32.v8f16(",
        ),
        (
            GfxTarget::Gfx1201,
            Layout::Gfx12,
            BF16,
            "@llvm.amdgcn.wmma.f32.16x16x16.bf16.v8f32.v8i16(",
        ),
        (
            GfxTarget::Gfx942,
            Layout::Cdna,
            DType::F16,
            "@llvm.amdgcn.mfma.f32.16x16x16f16(",
        ),
        (
            GfxTarget::Gfx942,
            Layout::Cdna,
            BF16,
            "@llvm.amdgcn.mfma.f32.16x16x16bf16.1k(",
        ),
        (
            GfxTarget::Gfx942,
            Layout::Cdna,
            DType::F32,
            "@llvm.amdgcn.mfma.f32.16x16x4f32(",
        ),
        (
            GfxTarget::Gfx942,
            Layout::Cdna32,
            DType::F32,
            "@llvm.amdgcn.mfma.f32.32x32x2f32(",
        ),
    ] {
        let k = kernel(layout, target.wave_size(), elem);
        let text = text::print(&k);
        assert!(text.contains(" = mma %"), "{text}");
        let back = text::parse(&text, "mma.am").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(text::print(&back), text);
        let ll = lower::lower(&k, Target::Gpu(target)).unwrap_or_else(|e| panic!("{e}"));
        assert!(ll.contains("call <") && ll.contains(call), "{target}: {ll}");
    }
}

/// Operand types no target has, an `mma` under an `if`, and a layout for another target
/// (or the CPU) are refused, naming the instruction.
#[test]
fn mma_of_wrong_types_under_an_if_or_for_another_target_is_refused() {
    let head = "kernel k(%p: ptr<global, f16>) workgroup(32, 1, 1) {\n  %z = const u32 0\n";
    let cases = [
        (
            "  %a = const f32x16 1.0\n  %c = const f32x8 0.0\n  %d = mma %a, %a, %c\n",
            "f16 or bf16 x4, x8 or x16, or f32 x4 or x8",
        ),
        (
            "  %a = const f16x16 1.0\n  %c = const f16x8 0.0\n  %d = mma %a, %a, %c\n",
            "C of f32x4, f32x8 or f32x16",
        ),
        (
            "  %a = const f16x16 1.0\n  %c = const f32x8 0.0\n  %t = const bool true\n  if %t {\n    %d = mma %a, %a, %c\n  }\n",
            "inside an `if`",
        ),
    ];
    for (body, reason) in cases {
        let src = format!("{head}{body}}}\n");
        let err = text::parse(&src, "bad.am").err().map(|e| e.to_string());
        let err = err.unwrap_or_else(|| panic!("accepted:\n{src}"));
        assert!(err.contains("mma %") && err.contains(reason), "{err}");
    }
    // The gfx11 layout on gfx1201 and on the CPU; f32 operands on gfx11 (no f32 WMMA).
    let gfx11 = kernel(Layout::Gfx11, 32, DType::F16);
    let f32x4 = kernel(Layout::Cdna, 32, DType::F32);
    for (k, target) in [
        (&gfx11, Target::Gpu(GfxTarget::Gfx1201)),
        (&gfx11, Target::Cpu),
        (&f32x4, Target::Gpu(GfxTarget::Gfx1100)),
    ] {
        let err = lower::lower(k, target).err().map(|e| e.to_string());
        let err = err.unwrap_or_else(|| panic!("lowered for {target}"));
        assert!(
            err.contains("mma %") && err.contains("no 16x16x16 matrix instruction"),
            "{target}: {err}"
        );
    }
}
