//! Lowering of the kernel IR to LLVM IR text, for `amdgcn-amd-amdhsa` or for the host.
//!
//! GPU kernels are `amdgpu_kernel` functions whose parameters are the IR's parameters (LLVM
//! lays them out as [`Kernel::arg_layout`] says and describes them in the code object's
//! metadata). Host kernels are `void NAME(ptr args, ptr ctx, i64 first, i64 end, i32
//! groups_x, i32 groups_y)`, looping over the work-items of workgroups `first..end`, or,
//! with barriers, `void NAME(ptr args, ptr ctx)` for one work-item: `args` holds the same
//! argument bytes, `ctx` a [`crate::cpu`] work-item context. On the host, f16 and bf16 are kept as
//! `i16` and computed in f32 through helper functions written here, so that no compiler-rt
//! routine has to be found at load time.
//!
//! Semantics that LLVM leaves undefined are made defined here: integer division by zero
//! gives 0 (and `MIN / -1` wraps), shift amounts are taken modulo the bit width, float to
//! integer conversions saturate (`llvm.fpto[su]i.sat`).

use std::collections::BTreeSet;
use std::fmt::Write;

use crate::ir::*;
use crate::{Error, Target};
use am_isa::Family;

/// Byte offsets in the CPU work-item context (see `cpu::Ctx`).
pub(crate) const CTX_LOCAL_ID: u32 = 0;
pub(crate) const CTX_GROUP_ID: u32 = 12;
pub(crate) const CTX_LDS: u32 = 24;
pub(crate) const CTX_BARRIER_FN: u32 = 32;
pub(crate) const CTX_BARRIER_DATA: u32 = 40;

/// The host symbol of a kernel: prefixed, so that a kernel called like a libm function
/// (`sinf`) does not stand in for it.
pub(crate) fn host_symbol(kernel: &str) -> String {
    format!("am.kernel.{kernel}")
}

/// FMAs in one loop body from which a kernel is scheduled for dual issue (a register tile's
/// step: 4 × 4 and more).
const FMA_TILE: usize = 16;

/// The most FMAs directly in the body of one loop of `body` (`in_loop`: `body` is one).
fn most_fmas_in_a_loop(body: &[Inst], in_loop: bool) -> usize {
    let here = if in_loop {
        body.iter().filter(|i| matches!(i.op, Op::Fma(..))).count()
    } else {
        0
    };
    body.iter()
        .map(|i| match &i.op {
            Op::Range { body, .. } => most_fmas_in_a_loop(body, true),
            Op::If { body, .. } => most_fmas_in_a_loop(body, in_loop),
            _ => 0,
        })
        .fold(here, usize::max)
}

/// The LLVM IR of `k` for `target` (the kernel is verified first). The text has no
/// `target datalayout` line: [`crate::codegen`] adds the target machine's.
pub fn lower(k: &Kernel, target: Target) -> Result<String, Error> {
    crate::verify::verify(k)?;
    let mut l = L {
        k,
        target,
        gpu: target.is_gpu(),
        ops: vec![String::new(); k.types.len()],
        entry: String::new(),
        out: String::new(),
        globals: String::new(),
        decls: BTreeSet::new(),
        n: 0,
    };
    l.kernel()?;
    let mut s = String::new();
    let triple = if l.gpu {
        "amdgcn-amd-amdhsa".to_string()
    } else {
        crate::codegen::host_triple()
    };
    let _ = writeln!(s, "; kernel {} for {}", k.name, target.name());
    let _ = writeln!(s, "target triple = \"{triple}\"\n");
    s.push_str(&l.globals);
    s.push_str(&l.out);
    for d in &l.decls {
        let _ = writeln!(s, "{d}");
    }
    if !l.gpu {
        s.push_str(HOST_HELPERS);
    }
    Ok(s)
}

struct L<'k> {
    k: &'k Kernel,
    target: Target,
    gpu: bool,
    /// Operand text of each value (`%vN` or a constant).
    ops: Vec<String>,
    entry: String,
    out: String,
    globals: String,
    decls: BTreeSet<String>,
    n: usize,
}

fn int_ty(bits: u32) -> String {
    format!("i{bits}")
}

impl L<'_> {
    fn tmp(&mut self) -> String {
        self.n += 1;
        format!("%t{}", self.n)
    }
    fn label(&mut self, what: &str) -> String {
        self.n += 1;
        format!("{what}{}", self.n)
    }
    fn emit(&mut self, line: String) {
        self.out.push_str("  ");
        self.out.push_str(&line);
        self.out.push('\n');
    }
    fn declare(&mut self, d: String) {
        self.decls.insert(d);
    }
    fn host_half(&self, s: Scalar) -> bool {
        !self.gpu && matches!(s, Scalar::F16 | Scalar::BF16)
    }

    /// LLVM type of one scalar as a value.
    fn sty(&self, s: Scalar) -> String {
        match s {
            Scalar::Bool => "i1".into(),
            Scalar::F16 if self.gpu => "half".into(),
            Scalar::BF16 if self.gpu => "bfloat".into(),
            Scalar::F32 => "float".into(),
            Scalar::F64 => "double".into(),
            s => int_ty(s.bits()),
        }
    }
    /// LLVM type of a value.
    fn ty(&self, d: DType) -> String {
        if d.lanes == 1 {
            self.sty(d.scalar)
        } else {
            format!("<{} x {}>", d.lanes, self.sty(d.scalar))
        }
    }
    /// LLVM type of a value in memory (bool is a byte).
    fn mty(&self, d: DType) -> String {
        if d.scalar == Scalar::Bool {
            "i8".into()
        } else {
            self.ty(d)
        }
    }
    fn aspace(&self, s: Space) -> &'static str {
        match (self.gpu, s) {
            (false, _) => "",
            (true, Space::Global) => " addrspace(1)",
            (true, Space::Local) => " addrspace(3)",
            (true, Space::Private) => " addrspace(5)",
        }
    }
    fn dt(&self, v: Value) -> DType {
        self.k.types[v.index()].dtype().unwrap_or(DType::BOOL)
    }
    fn op(&self, v: Value) -> String {
        self.ops[v.index()].clone()
    }
    /// `type operand`.
    fn top(&self, v: Value) -> String {
        format!("{} {}", self.ty(self.dt(v)), self.op(v))
    }
    fn name(v: Value) -> String {
        format!("%v{}", v.0)
    }

    /// A scalar constant's LLVM literal.
    fn scalar_lit(&self, s: Scalar, bits: u64) -> String {
        match s {
            Scalar::Bool => (if bits & 1 != 0 { "true" } else { "false" }).into(),
            Scalar::F16 if self.gpu => format!("0xH{:04X}", bits as u16),
            Scalar::BF16 if self.gpu => format!("0xR{:04X}", bits as u16),
            Scalar::F32 => {
                let b = bits as u32;
                let f = f32::from_bits(b);
                let d = if f.is_nan() || f.is_infinite() {
                    (u64::from(b >> 31) << 63) | (0x7ff << 52) | (u64::from(b & 0x7f_ffff) << 29)
                } else {
                    f64::from(f).to_bits()
                };
                format!("0x{d:016X}")
            }
            Scalar::F64 => format!("0x{bits:016X}"),
            s => {
                let sh = 64 - s.bits();
                (((bits << sh) as i64) >> sh).to_string()
            }
        }
    }
    fn lit(&self, d: DType, bits: u64) -> String {
        let s = self.scalar_lit(d.scalar, bits);
        if d.lanes == 1 {
            s
        } else {
            format!("splat ({} {s})", self.sty(d.scalar))
        }
    }
    /// A constant of type `d` whose value is the float `x` or integer `x`.
    fn num(&self, d: DType, x: f64) -> String {
        let bits = if d.scalar.is_float() && !self.host_half(d.scalar) {
            crate::float::from_f64(d.scalar, x)
        } else if self.host_half(d.scalar) {
            // Host halves are computed in f32.
            u64::from((x as f32).to_bits())
        } else {
            x as i64 as u64
        };
        let d = if self.host_half(d.scalar) {
            d.with_scalar(Scalar::F32)
        } else {
            d
        };
        self.lit(d, bits)
    }

    /// Calls `f` on every lane of `x` (type `d` in LLVM terms `in_ty`), producing `out_s`
    /// lanes; scalars call it once.
    fn lanes(
        &mut self,
        x: &str,
        lanes: u8,
        in_s: &str,
        out_s: &str,
        f: &dyn Fn(&mut Self, String) -> String,
    ) -> String {
        if lanes == 1 {
            return f(self, x.to_string());
        }
        let mut acc = "poison".to_string();
        for i in 0..lanes {
            let e = self.tmp();
            self.emit(format!(
                "{e} = extractelement <{lanes} x {in_s}> {x}, i32 {i}"
            ));
            let r = f(self, e);
            let n = self.tmp();
            self.emit(format!(
                "{n} = insertelement <{lanes} x {out_s}> {acc}, {out_s} {r}, i32 {i}"
            ));
            acc = n;
        }
        acc
    }

    /// The value of `v` ready for arithmetic: host halves widened to f32.
    fn arith(&mut self, v: Value) -> (String, DType) {
        let d = self.dt(v);
        let x = self.op(v);
        if !self.host_half(d.scalar) {
            return (x, d);
        }
        let f = if d.scalar == Scalar::F16 {
            "@am.h2f"
        } else {
            "@am.b2f"
        };
        let r = self.lanes(&x, d.lanes, "i16", "float", &|l, e| {
            let t = l.tmp();
            l.emit(format!("{t} = call float {f}(i16 {e})"));
            t
        });
        (r, d.with_scalar(Scalar::F32))
    }
    /// Rounds an f32 arithmetic result back to a host half of type `d`.
    fn unarith(&mut self, x: String, d: DType) -> String {
        if !self.host_half(d.scalar) {
            return x;
        }
        let f = if d.scalar == Scalar::F16 {
            "@am.f2h"
        } else {
            "@am.f2b"
        };
        self.lanes(&x, d.lanes, "float", "i16", &|l, e| {
            let t = l.tmp();
            l.emit(format!("{t} = call i16 {f}(float {e})"));
            t
        })
    }

    fn intrinsic(&mut self, name: &str, d: DType, args: &[&str], extra: &str) -> String {
        let t = self.ty(d);
        let suffix = if d.lanes == 1 {
            self.sty(d.scalar)
                .replace("half", "f16")
                .replace("bfloat", "bf16")
        } else {
            format!("v{}{}", d.lanes, self.sty(d.scalar))
                .replace("half", "f16")
                .replace("bfloat", "bf16")
        };
        let suffix = suffix.replace("float", "f32").replace("double", "f64");
        let params: Vec<String> = args.iter().map(|_| t.clone()).collect();
        let extra_ty = if extra.is_empty() { "" } else { ", i1" };
        self.declare(format!(
            "declare {t} @llvm.{name}.{suffix}({}{extra_ty})",
            params.join(", ")
        ));
        let r = self.tmp();
        let a: Vec<String> = args.iter().map(|x| format!("{t} {x}")).collect();
        let extra = if extra.is_empty() {
            String::new()
        } else {
            format!(", i1 {extra}")
        };
        self.emit(format!(
            "{r} = call {t} @llvm.{name}.{suffix}({}{extra})",
            a.join(", ")
        ));
        r
    }

    /// The target's 16×16×16 matrix multiply-accumulate: its operand types are the target's
    /// register layout (16 or 8 halves of A and B per lane on gfx11 and gfx12, 4 on CDNA's
    /// wave64), so an `mma` of other types has no instruction here. bf16 operands go to
    /// LLVM's intrinsics as i16 vectors (the types LLVM 22 declares them with); f32 operands
    /// on CDNA (4 per lane) are four `v_mfma_f32_16x16x4_f32`, element `e` of every lane's A
    /// and B in the `e`-th; f32x8 ones with an f32x16 C eight `v_mfma_f32_32x32x2_f32`.
    fn mma(&mut self, i: &Inst, a: Value, b: Value, c: Value) -> Result<String, Error> {
        let (da, dc) = (self.dt(a), self.dt(c));
        let family = self.target.gpu().map(|g| g.family());
        let cdna = matches!(family, Some(Family::Cdna3 | Family::Cdna4));
        // CBSZ, ABID, BLGP of the MFMAs: no broadcast of A blocks, no swizzle of B.
        const MFMA_MODS: &str = ", i32 0, i32 0, i32 0";
        const MFMA_IMMS: &str = ", i32 immarg, i32 immarg, i32 immarg";
        let tc = self.ty(dc);
        let f32_call = match (da.lanes, dc.lanes) {
            (4, 4) => Some("llvm.amdgcn.mfma.f32.16x16x4f32"),
            (8, 16) => Some("llvm.amdgcn.mfma.f32.32x32x2f32"),
            _ => None,
        };
        if let (true, Scalar::F32, Some(call)) = (cdna, da.scalar, f32_call) {
            self.declare(format!(
                "declare {tc} @{call}(float, float, {tc}{MFMA_IMMS})"
            ));
            let ta = self.ty(da);
            let mut acc = self.op(c);
            for e in 0..da.lanes {
                let x = self.tmp();
                self.emit(format!("{x} = extractelement {ta} {}, i32 {e}", self.op(a)));
                let y = self.tmp();
                self.emit(format!("{y} = extractelement {ta} {}, i32 {e}", self.op(b)));
                let r = self.tmp();
                self.emit(format!(
                    "{r} = call {tc} @{call}(float {x}, float {y}, {tc} {acc}{MFMA_MODS})"
                ));
                acc = r;
            }
            return Ok(acc);
        }
        let bf16 = da.scalar == Scalar::BF16;
        let (call, extra) = match (family, da.scalar, da.lanes, dc.lanes) {
            (Some(Family::Rdna3), Scalar::F16, 16, 8) => {
                ("llvm.amdgcn.wmma.f32.16x16x16.f16.v8f32.v16f16", "")
            }
            (Some(Family::Rdna3), Scalar::BF16, 16, 8) => {
                ("llvm.amdgcn.wmma.f32.16x16x16.bf16.v8f32.v16i16", "")
            }
            (Some(Family::Rdna4), Scalar::F16, 8, 8) => {
                ("llvm.amdgcn.wmma.f32.16x16x16.f16.v8f32.v8f16", "")
            }
            (Some(Family::Rdna4), Scalar::BF16, 8, 8) => {
                ("llvm.amdgcn.wmma.f32.16x16x16.bf16.v8f32.v8i16", "")
            }
            (Some(Family::Cdna3 | Family::Cdna4), Scalar::F16, 4, 4) => {
                ("llvm.amdgcn.mfma.f32.16x16x16f16", MFMA_MODS)
            }
            // CDNA3 names it `v_mfma_f32_16x16x16_bf16`; LLVM keeps CDNA2's `_1k` name.
            (Some(Family::Cdna3 | Family::Cdna4), Scalar::BF16, 4, 4) => {
                ("llvm.amdgcn.mfma.f32.16x16x16bf16.1k", MFMA_MODS)
            }
            _ => {
                return Err(Error::Verify {
                    kernel: self.k.name.clone(),
                    inst: crate::text::print_inst(self.k, i),
                    reason: format!(
                        "{} has no 16x16x16 matrix instruction with A {da} and C {dc}",
                        self.target.name()
                    ),
                });
            }
        };
        let ta = if bf16 {
            format!("<{} x i16>", da.lanes)
        } else {
            self.ty(da)
        };
        // Operands as the intrinsic takes them: bf16 vectors reinterpreted as i16 ones.
        let arg = |this: &mut Self, v: Value| {
            if bf16 {
                let r = this.tmp();
                this.emit(format!(
                    "{r} = bitcast {} {} to {ta}",
                    this.ty(da),
                    this.op(v)
                ));
                r
            } else {
                this.op(v)
            }
        };
        let (xa, xb) = (arg(self, a), arg(self, b));
        let imm = if extra.is_empty() { "" } else { MFMA_IMMS };
        self.declare(format!("declare {tc} @{call}({ta}, {ta}, {tc}{imm})"));
        let r = self.tmp();
        self.emit(format!(
            "{r} = call {tc} @{call}({ta} {xa}, {ta} {xb}, {tc} {}{extra})",
            self.op(c)
        ));
        Ok(r)
    }

    fn kernel(&mut self) -> Result<(), Error> {
        let k = self.k;
        let mut params = vec![];
        for (i, p) in k.params.iter().enumerate() {
            // GPU kernels name their arguments after the parameters (the code object's
            // metadata carries the names), unless a name could clash with the lowering's own.
            let name = if self.gpu && param_name_usable(&p.name, k) {
                format!("%{}", p.name)
            } else {
                Self::name(p.value)
            };
            self.ops[p.value.index()] = name.clone();
            if self.gpu {
                let t = match k.types[p.value.index()] {
                    Type::Ptr { space, .. } => format!("ptr{}", self.aspace(space)),
                    Type::Val(d) => self.ty(d),
                };
                let na = if p.noalias { " noalias" } else { "" };
                params.push(format!("{t}{na} {name}"));
            } else {
                let off = k.arg_layout()[i].0;
                let (t, load_t) = match k.types[p.value.index()] {
                    Type::Ptr { .. } => ("ptr".to_string(), "ptr".to_string()),
                    Type::Val(d) => (self.ty(d), self.mty(d)),
                };
                let a = self.tmp();
                let _ = writeln!(self.entry, "  {a} = getelementptr i8, ptr %args, i64 {off}");
                if t == "i1" {
                    let b = self.tmp();
                    let _ = writeln!(self.entry, "  {b} = load i8, ptr {a}, align 1");
                    let _ = writeln!(self.entry, "  {name} = icmp ne i8 {b}, 0");
                } else {
                    let _ = writeln!(self.entry, "  {name} = load {load_t}, ptr {a}, align 1");
                }
            }
        }
        let body = std::mem::take(&mut self.out);
        self.body(&k.body)?;
        let insts = std::mem::replace(&mut self.out, body);
        let [x, y, z] = k.workgroup;
        if self.gpu {
            let _ = writeln!(
                self.out,
                "define amdgpu_kernel void @{}({}) #0 !reqd_work_group_size !0 {{\nentry:",
                k.name,
                params.join(", ")
            );
        } else if k.has_barrier() {
            let _ = writeln!(
                self.out,
                "define void @{}(ptr %args, ptr %ctx) #0 {{\nentry:",
                host_symbol(&k.name)
            );
        } else {
            // The work-item's code, inlined into the loop over work-items below.
            let _ = writeln!(
                self.out,
                "define internal void @am.item(ptr noalias %args, ptr noalias %ctx) #0 {{\nentry:"
            );
        }
        self.out.push_str(&self.entry.clone());
        self.out.push_str(&insts);
        self.out.push_str("  ret void\n}\n\n");
        if !self.gpu && !k.has_barrier() {
            self.declare("declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)".into());
            self.out
                .push_str(&host_items_loop(&host_symbol(&k.name), k.workgroup));
        }
        if self.gpu {
            // gfx11 and gfx12 issue two VALU instructions as one VOPD (`v_dual_*`) only when
            // they sit next to each other after register allocation. LLVM's post-RA scheduler
            // ties such pairs together, but that tie steers only a bottom-up schedule: top-down
            // (its default) left a matrix product's 8x4 tile with 3 pairs of 128 FMAs,
            // bottom-up with 42. Only for loops of many FMAs (a register tile): elsewhere
            // bottom-up gained nothing and cost a few instructions (an argmax, a WMMA loop).
            let vopd = matches!(
                self.target.gpu().map(|g| g.family()),
                Some(Family::Rdna3 | Family::Rdna4)
            );
            let post_ra = if vopd && most_fmas_in_a_loop(&k.body, false) >= FMA_TILE {
                " \"amdgpu-post-ra-direction\"=\"bottomup\""
            } else {
                ""
            };
            let _ = writeln!(
                self.out,
                "attributes #0 = {{ \"amdgpu-flat-work-group-size\"=\"1,{}\" \"uniform-work-group-size\"=\"true\" \"amdgpu-no-implicitarg-ptr\"{post_ra} }}",
                k.workgroup_len()
            );
            let _ = writeln!(self.out, "!0 = !{{i32 {x}, i32 {y}, i32 {z}}}\n");
        } else {
            let inline = if k.has_barrier() { "" } else { " alwaysinline" };
            let _ = writeln!(self.out, "attributes #0 = {{ nounwind{inline} }}\n");
        }
        Ok(())
    }

    fn body(&mut self, body: &[Inst]) -> Result<(), Error> {
        for i in body {
            self.inst(i)?;
        }
        Ok(())
    }

    fn ctx_u32(&mut self, off: u32) -> String {
        let p = self.tmp();
        self.emit(format!("{p} = getelementptr i8, ptr %ctx, i64 {off}"));
        let r = self.tmp();
        self.emit(format!("{r} = load i32, ptr {p}, align 4"));
        r
    }

    /// Address of `ptr[index]` for an access of `d`.
    fn address(&mut self, ptr: Value, index: Value) -> (String, Space) {
        let Type::Ptr { space, elem } = self.k.types[ptr.index()] else {
            return ("null".into(), Space::Global);
        };
        let di = self.dt(index);
        let offset32 = self.gpu
            && di.scalar == Scalar::U32
            && di.lanes == 1
            && self.k.params.iter().any(|p| p.value == ptr && p.offset32);
        if offset32 {
            // The byte offset in 32 bits (wrapping is exact: the parameter promises offsets
            // below 4 GiB), extended once: the target takes it as a vector offset from the
            // pointer in scalar registers.
            let b = self.tmp();
            let size = elem.bytes();
            self.emit(format!("{b} = mul i32 {}, {size}", self.op(index)));
            let z = self.tmp();
            self.emit(format!("{z} = zext i32 {b} to i64"));
            let a = self.tmp();
            self.emit(format!(
                "{a} = getelementptr inbounds i8, ptr{} {}, i64 {z}",
                self.aspace(space),
                self.op(ptr)
            ));
            return (a, space);
        }
        let idx = if di.scalar.bits() == 64 {
            self.op(index)
        } else {
            let t = self.tmp();
            let ext = if di.scalar.is_signed() {
                "sext"
            } else {
                "zext"
            };
            self.emit(format!("{t} = {ext} {} to i64", self.top(index)));
            t
        };
        let a = self.tmp();
        let et = self.mty(elem);
        self.emit(format!(
            "{a} = getelementptr inbounds {et}, ptr{} {}, i64 {idx}",
            self.aspace(space),
            self.op(ptr)
        ));
        (a, space)
    }

    fn inst(&mut self, i: &Inst) -> Result<(), Error> {
        let r = i.result.map(Self::name).unwrap_or_default();
        let rd = i.result.and_then(|v| self.k.types[v.index()].dtype());
        let rdt = rd.unwrap_or(DType::BOOL);
        let set = |l: &mut Self, text: String| {
            if let Some(v) = i.result {
                l.ops[v.index()] = text;
            }
        };
        match &i.op {
            Op::Const(bits) => {
                let lit = self.lit(rdt, *bits);
                set(self, lit);
            }
            Op::LocalId(d) | Op::GroupId(d) => {
                let local = matches!(i.op, Op::LocalId(_));
                let x = if self.gpu {
                    let f = if local {
                        format!("llvm.amdgcn.workitem.id.{}", d.name())
                    } else {
                        format!("llvm.amdgcn.workgroup.id.{}", d.name())
                    };
                    self.declare(format!("declare i32 @{f}()"));
                    let t = self.tmp();
                    self.emit(format!("{t} = call i32 @{f}()"));
                    t
                } else {
                    let base = if local { CTX_LOCAL_ID } else { CTX_GROUP_ID };
                    self.ctx_u32(base + 4 * d.index() as u32)
                };
                set(self, x);
            }
            Op::Unary(op, a) => {
                let x = self.unary(*op, *a);
                set(self, x);
            }
            Op::Binary(op, a, b) => {
                let x = self.binary(*op, *a, *b);
                set(self, x);
            }
            Op::Fma(a, b, c) => {
                let d = self.dt(*a);
                let x = if self.host_half(d.scalar) {
                    // f16/bf16 on the host: the exact product and the sum in f64, one rounding
                    // there and one to the half type.
                    let dd = d.with_scalar(Scalar::F64);
                    let mut ws = vec![];
                    for v in [a, b, c] {
                        let (x, fd) = self.arith(*v);
                        let t = self.tmp();
                        self.emit(format!(
                            "{t} = fpext {} {x} to {}",
                            self.ty(fd),
                            self.ty(dd)
                        ));
                        ws.push(t);
                    }
                    let s = self.intrinsic("fma", dd, &[&ws[0], &ws[1], &ws[2]], "");
                    let f = self.tmp();
                    self.emit(format!(
                        "{f} = fptrunc {} {s} to {}",
                        self.ty(dd),
                        self.ty(d.with_scalar(Scalar::F32))
                    ));
                    self.unarith(f, d)
                } else {
                    let (x, y, z) = (self.op(*a), self.op(*b), self.op(*c));
                    self.intrinsic("fma", d, &[&x, &y, &z], "")
                };
                set(self, x);
            }
            Op::Mma(a, b, c) => {
                let x = self.mma(i, *a, *b, *c)?;
                set(self, x);
            }
            Op::Cmp(op, a, b) => {
                let d = self.dt(*a);
                let (x, fd) = self.arith(*a);
                let (y, _) = self.arith(*b);
                let pred = if d.scalar.is_float() {
                    match op {
                        CmpOp::Lt => "fcmp olt",
                        CmpOp::Le => "fcmp ole",
                        CmpOp::Gt => "fcmp ogt",
                        CmpOp::Ge => "fcmp oge",
                        CmpOp::Eq => "fcmp oeq",
                        CmpOp::Ne => "fcmp une",
                    }
                } else {
                    let s = d.scalar.is_signed();
                    match (op, s) {
                        (CmpOp::Lt, true) => "icmp slt",
                        (CmpOp::Lt, false) => "icmp ult",
                        (CmpOp::Le, true) => "icmp sle",
                        (CmpOp::Le, false) => "icmp ule",
                        (CmpOp::Gt, true) => "icmp sgt",
                        (CmpOp::Gt, false) => "icmp ugt",
                        (CmpOp::Ge, true) => "icmp sge",
                        (CmpOp::Ge, false) => "icmp uge",
                        (CmpOp::Eq, _) => "icmp eq",
                        (CmpOp::Ne, _) => "icmp ne",
                    }
                };
                self.emit(format!("{r} = {pred} {} {x}, {y}", self.ty(fd)));
                set(self, r.clone());
            }
            Op::Where(c, a, b) => {
                self.emit(format!(
                    "{r} = select {}, {}, {}",
                    self.top(*c),
                    self.top(*a),
                    self.top(*b)
                ));
                set(self, r.clone());
            }
            Op::Cast(a) => {
                let x = self.cast(*a, rdt);
                set(self, x);
            }
            Op::Bitcast(a) => {
                let d = self.dt(*a);
                let x = if self.ty(d) == self.ty(rdt) {
                    self.op(*a)
                } else {
                    self.emit(format!(
                        "{r} = bitcast {} to {}",
                        self.top(*a),
                        self.ty(rdt)
                    ));
                    r.clone()
                };
                set(self, x);
            }
            Op::Vector(vs) => {
                let mut acc = "poison".to_string();
                let t = self.ty(rdt);
                for (n, &v) in vs.iter().enumerate() {
                    let x = if n + 1 == vs.len() {
                        r.clone()
                    } else {
                        self.tmp()
                    };
                    self.emit(format!(
                        "{x} = insertelement {t} {acc}, {}, i32 {n}",
                        self.top(v)
                    ));
                    acc = x;
                }
                set(self, r.clone());
            }
            Op::Extract(v, lane) => {
                self.emit(format!("{r} = extractelement {}, i32 {lane}", self.top(*v)));
                set(self, r.clone());
            }
            Op::Load { ptr, index, align } => {
                let (a, space) = self.address(*ptr, *index);
                let align = self.align(rdt, *align);
                let mt = self.mty(rdt);
                if rdt.scalar == Scalar::Bool {
                    let t = self.tmp();
                    self.emit(format!(
                        "{t} = load i8, ptr{} {a}, align 1",
                        self.aspace(space)
                    ));
                    self.emit(format!("{r} = icmp ne i8 {t}, 0"));
                } else {
                    self.emit(format!(
                        "{r} = load {mt}, ptr{} {a}, align {align}",
                        self.aspace(space)
                    ));
                }
                set(self, r.clone());
            }
            Op::Store {
                ptr,
                index,
                value,
                align,
            } => {
                let d = self.dt(*value);
                let (a, space) = self.address(*ptr, *index);
                let align = self.align(d, *align);
                let mut x = self.op(*value);
                if d.scalar == Scalar::Bool {
                    let t = self.tmp();
                    self.emit(format!("{t} = zext i1 {x} to i8"));
                    x = t;
                }
                self.emit(format!(
                    "store {} {x}, ptr{} {a}, align {align}",
                    self.mty(d),
                    self.aspace(space)
                ));
            }
            Op::Atomic {
                op,
                ptr,
                index,
                value,
            } => {
                let d = self.dt(*value);
                let (a, space) = self.address(*ptr, *index);
                let s = d.scalar.is_signed();
                let name = match (op, d.scalar.is_float()) {
                    (AtomicOp::Add, true) => "fadd",
                    (AtomicOp::Add, false) => "add",
                    (AtomicOp::Sub, _) => "sub",
                    (AtomicOp::Min, _) => {
                        if s {
                            "min"
                        } else {
                            "umin"
                        }
                    }
                    (AtomicOp::Max, _) => {
                        if s {
                            "max"
                        } else {
                            "umax"
                        }
                    }
                    (AtomicOp::And, _) => "and",
                    (AtomicOp::Or, _) => "or",
                    (AtomicOp::Xor, _) => "xor",
                    (AtomicOp::Xchg, _) => "xchg",
                };
                let scope = match (self.gpu, space) {
                    (false, _) => "",
                    (true, Space::Local) => " syncscope(\"workgroup\")",
                    (true, _) => " syncscope(\"agent\")",
                };
                self.emit(format!(
                    "{r} = atomicrmw {name} ptr{} {a}, {}{scope} monotonic, align {}",
                    self.aspace(space),
                    self.top(*value),
                    d.bytes()
                ));
                set(self, r.clone());
            }
            Op::Local { len } => {
                let Some(v) = i.result else { return Ok(()) };
                let Type::Ptr { elem, .. } = self.k.types[v.index()] else {
                    return Ok(());
                };
                if self.gpu {
                    let g = format!("@lds.{}", v.0);
                    let _ = writeln!(
                        self.globals,
                        "{g} = internal addrspace(3) global [{len} x {}] poison, align 16",
                        self.mty(elem)
                    );
                    set(self, g);
                } else {
                    let (layout, _) = self.k.local_layout();
                    let off = layout
                        .iter()
                        .find(|(x, _)| *x == v)
                        .map(|x| x.1)
                        .unwrap_or(0);
                    let p = self.tmp();
                    let t = self.tmp();
                    let _ = writeln!(
                        self.entry,
                        "  {p} = getelementptr i8, ptr %ctx, i64 {CTX_LDS}"
                    );
                    let _ = writeln!(self.entry, "  {t} = load ptr, ptr {p}, align 8");
                    let _ = writeln!(self.entry, "  {r} = getelementptr i8, ptr {t}, i64 {off}");
                    set(self, r.clone());
                }
            }
            Op::Private { len } => {
                let Some(v) = i.result else { return Ok(()) };
                let Type::Ptr { elem, .. } = self.k.types[v.index()] else {
                    return Ok(());
                };
                let aspace = if self.gpu { ", addrspace(5)" } else { "" };
                let _ = writeln!(
                    self.entry,
                    "  {r} = alloca [{len} x {}], align 16{aspace}",
                    self.mty(elem)
                );
                set(self, r.clone());
            }
            Op::Barrier => {
                if self.gpu {
                    self.declare("declare void @llvm.amdgcn.s.barrier()".into());
                    self.emit("fence syncscope(\"workgroup\") release".into());
                    self.emit("call void @llvm.amdgcn.s.barrier()".into());
                    self.emit("fence syncscope(\"workgroup\") acquire".into());
                } else {
                    let (p, f, q, d) = (self.tmp(), self.tmp(), self.tmp(), self.tmp());
                    self.emit(format!(
                        "{p} = getelementptr i8, ptr %ctx, i64 {CTX_BARRIER_FN}"
                    ));
                    self.emit(format!("{f} = load ptr, ptr {p}, align 8"));
                    self.emit(format!(
                        "{q} = getelementptr i8, ptr %ctx, i64 {CTX_BARRIER_DATA}"
                    ));
                    self.emit(format!("{d} = load ptr, ptr {q}, align 8"));
                    self.emit(format!("call void {f}(ptr {d})"));
                }
            }
            Op::Range {
                var,
                start,
                end,
                step,
                body,
            } => {
                let d = self.dt(*start);
                let t = self.ty(d);
                let (pre, hdr, bb, latch, exit) = (
                    self.label("pre"),
                    self.label("hdr"),
                    self.label("body"),
                    self.label("latch"),
                    self.label("exit"),
                );
                let iv = Self::name(*var);
                self.ops[var.index()] = iv.clone();
                let next = self.tmp();
                let c = self.tmp();
                let cmp = if d.scalar.is_signed() { "slt" } else { "ult" };
                self.emit(format!("br label %{pre}"));
                let _ = writeln!(self.out, "{pre}:\n  br label %{hdr}\n{hdr}:");
                self.emit(format!(
                    "{iv} = phi {t} [ {}, %{pre} ], [ {next}, %{latch} ]",
                    self.op(*start)
                ));
                self.emit(format!("{c} = icmp {cmp} {t} {iv}, {}", self.op(*end)));
                self.emit(format!("br i1 {c}, label %{bb}, label %{exit}"));
                let _ = writeln!(self.out, "{bb}:");
                self.body(body)?;
                self.emit(format!("br label %{latch}"));
                let _ = writeln!(self.out, "{latch}:");
                self.emit(format!("{next} = add {t} {iv}, {step}"));
                self.emit(format!("br label %{hdr}"));
                let _ = writeln!(self.out, "{exit}:");
            }
            Op::If { cond, body } => {
                let (then, end) = (self.label("then"), self.label("endif"));
                self.emit(format!(
                    "br i1 {}, label %{then}, label %{end}",
                    self.op(*cond)
                ));
                let _ = writeln!(self.out, "{then}:");
                self.body(body)?;
                self.emit(format!("br label %{end}"));
                let _ = writeln!(self.out, "{end}:");
            }
        }
        Ok(())
    }

    fn align(&self, d: DType, align: u32) -> u32 {
        let natural = if d.scalar == Scalar::Bool {
            1
        } else {
            d.scalar.bytes()
        };
        if self.gpu {
            align.max(natural)
        } else {
            // Host buffers promise only element alignment; unaligned vector moves are cheap.
            natural
        }
    }

    fn unary(&mut self, op: UnOp, a: Value) -> String {
        let d = self.dt(a);
        let s = d.scalar;
        let t = self.ty(d);
        if s.is_float() {
            let (x, fd) = self.arith(a);
            let ft = self.ty(fd);
            let y = match op {
                UnOp::Neg => {
                    let r = self.tmp();
                    self.emit(format!("{r} = fneg {ft} {x}"));
                    r
                }
                UnOp::Abs => self.intrinsic("fabs", fd, &[&x], ""),
                UnOp::Exp2 => self.intrinsic("exp2", fd, &[&x], ""),
                UnOp::Log2 => self.intrinsic("log2", fd, &[&x], ""),
                UnOp::Sqrt => self.intrinsic("sqrt", fd, &[&x], ""),
                UnOp::Sin => self.intrinsic("sin", fd, &[&x], ""),
                UnOp::Trunc => self.intrinsic("trunc", fd, &[&x], ""),
                UnOp::Rcp => {
                    let one = self.num(fd, 1.0);
                    let r = self.tmp();
                    self.emit(format!("{r} = fdiv {ft} {one}, {x}"));
                    r
                }
                UnOp::Not => x,
            };
            return self.unarith(y, d);
        }
        let x = self.op(a);
        let r = self.tmp();
        match op {
            UnOp::Neg => self.emit(format!("{r} = sub {t} {}, {x}", self.num(d, 0.0))),
            UnOp::Not => {
                let ones = if s == Scalar::Bool {
                    self.lit(d, 1)
                } else {
                    self.lit(d, u64::MAX >> (64 - s.bits()))
                };
                self.emit(format!("{r} = xor {t} {x}, {ones}"));
            }
            UnOp::Abs if s.is_signed() => return self.intrinsic("abs", d, &[&x], "false"),
            _ => return x,
        }
        r
    }

    fn binary(&mut self, op: BinOp, a: Value, b: Value) -> String {
        let d = self.dt(a);
        let s = d.scalar;
        let t = self.ty(d);
        if s.is_float() {
            let (x, fd) = self.arith(a);
            let (y, _) = self.arith(b);
            let ft = self.ty(fd);
            let r = match op {
                BinOp::Min => self.intrinsic("minimumnum", fd, &[&x, &y], ""),
                BinOp::Max => self.intrinsic("maximumnum", fd, &[&x, &y], ""),
                _ => {
                    let name = match op {
                        BinOp::Add => "fadd",
                        BinOp::Sub => "fsub",
                        BinOp::Mul => "fmul",
                        _ => "fdiv",
                    };
                    let r = self.tmp();
                    self.emit(format!("{r} = {name} {ft} {x}, {y}"));
                    r
                }
            };
            return self.unarith(r, d);
        }
        let (x, y) = (self.op(a), self.op(b));
        let sg = s.is_signed();
        let r = self.tmp();
        match op {
            BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::And | BinOp::Or | BinOp::Xor => {
                let name = match op {
                    BinOp::Add => "add",
                    BinOp::Sub => "sub",
                    BinOp::Mul => "mul",
                    BinOp::And => "and",
                    BinOp::Or => "or",
                    _ => "xor",
                };
                self.emit(format!("{r} = {name} {t} {x}, {y}"));
            }
            BinOp::Min | BinOp::Max => {
                let name = match (op, sg) {
                    (BinOp::Min, true) => "smin",
                    (BinOp::Min, false) => "umin",
                    (_, true) => "smax",
                    _ => "umax",
                };
                return self.intrinsic(name, d, &[&x, &y], "");
            }
            BinOp::Shl | BinOp::Shr => {
                let m = self.tmp();
                self.emit(format!(
                    "{m} = and {t} {y}, {}",
                    self.num(d, f64::from(s.bits() - 1))
                ));
                let name = match (op, sg) {
                    (BinOp::Shl, _) => "shl",
                    (_, true) => "ashr",
                    _ => "lshr",
                };
                self.emit(format!("{r} = {name} {t} {x}, {m}"));
            }
            BinOp::Div | BinOp::Rem => {
                // Divisor 0 (and MIN / -1 for signed types) divides by 1 instead; a zero
                // divisor then yields 0.
                let bt = self.ty(d.with_scalar(Scalar::Bool));
                let zero = self.num(d, 0.0);
                let one = self.num(d, 1.0);
                let z = self.tmp();
                self.emit(format!("{z} = icmp eq {t} {y}, {zero}"));
                let mut bad = z.clone();
                if sg {
                    let min = self.lit(d, 1u64 << (s.bits() - 1));
                    let ones = self.lit(d, u64::MAX >> (64 - s.bits()));
                    let (c1, c2, c3, c4) = (self.tmp(), self.tmp(), self.tmp(), self.tmp());
                    self.emit(format!("{c1} = icmp eq {t} {x}, {min}"));
                    self.emit(format!("{c2} = icmp eq {t} {y}, {ones}"));
                    self.emit(format!("{c3} = and {bt} {c1}, {c2}"));
                    self.emit(format!("{c4} = or {bt} {c3}, {z}"));
                    bad = c4;
                }
                let safe = self.tmp();
                self.emit(format!("{safe} = select {bt} {bad}, {t} {one}, {t} {y}"));
                let name = match (op, sg) {
                    (BinOp::Div, true) => "sdiv",
                    (BinOp::Div, false) => "udiv",
                    (_, true) => "srem",
                    _ => "urem",
                };
                let q = self.tmp();
                self.emit(format!("{q} = {name} {t} {x}, {safe}"));
                self.emit(format!("{r} = select {bt} {z}, {t} {zero}, {t} {q}"));
            }
        }
        r
    }

    fn cast(&mut self, a: Value, to: DType) -> String {
        let from = self.dt(a);
        let (fs, ts) = (from.scalar, to.scalar);
        let x = self.op(a);
        let ft = self.ty(from);
        let tt = self.ty(to);
        if fs == ts {
            return x;
        }
        let r = self.tmp();
        if ts == Scalar::Bool {
            if fs.is_float() {
                let (y, fd) = self.arith(a);
                let zero = self.num(fd, 0.0);
                self.emit(format!("{r} = fcmp une {} {y}, {zero}", self.ty(fd)));
            } else {
                self.emit(format!("{r} = icmp ne {ft} {x}, {}", self.num(from, 0.0)));
            }
            return r;
        }
        if fs == Scalar::Bool {
            if ts.is_float() {
                let f32d = to.with_scalar(Scalar::F32);
                let fd = if self.host_half(ts) { f32d } else { to };
                self.emit(format!("{r} = uitofp {ft} {x} to {}", self.ty(fd)));
                return self.unarith(r, to);
            }
            self.emit(format!("{r} = zext {ft} {x} to {tt}"));
            return r;
        }
        if fs.is_int() && ts.is_int() {
            let (fb, tb) = (fs.bits(), ts.bits());
            if fb == tb {
                return x;
            }
            let name = if tb < fb {
                "trunc"
            } else if fs.is_signed() {
                "sext"
            } else {
                "zext"
            };
            self.emit(format!("{r} = {name} {ft} {x} to {tt}"));
            return r;
        }
        if fs.is_int() {
            // Integer to float. Host halves: through f64 (exact for these magnitudes), then
            // one rounding to the half.
            let name = if fs.is_signed() { "sitofp" } else { "uitofp" };
            if self.host_half(ts) {
                let dd = to.with_scalar(Scalar::F64);
                self.emit(format!("{r} = {name} {ft} {x} to {}", self.ty(dd)));
                return self.round_f64_to_host_half(r, to);
            }
            self.emit(format!("{r} = {name} {ft} {x} to {tt}"));
            return r;
        }
        if ts.is_int() {
            let (y, fd) = self.arith(a);
            let name = if ts.is_signed() {
                "fptosi.sat"
            } else {
                "fptoui.sat"
            };
            let (src, dst) = (self.ty(fd), tt.clone());
            let sfx = |l: &Self, d: DType| {
                let base = match l.sty(d.scalar).as_str() {
                    "float" => "f32".to_string(),
                    "double" => "f64".to_string(),
                    "half" => "f16".to_string(),
                    "bfloat" => "bf16".to_string(),
                    o => o.to_string(),
                };
                if d.lanes == 1 {
                    base
                } else {
                    format!("v{}{base}", d.lanes)
                }
            };
            let f = format!("llvm.{name}.{}.{}", sfx(self, to), sfx(self, fd));
            self.declare(format!("declare {dst} @{f}({src})"));
            self.emit(format!("{r} = call {dst} @{f}({src} {y})"));
            return r;
        }
        // Float to float.
        if self.host_half(ts) || self.host_half(fs) {
            let (y, fd) = self.arith(a);
            if ts == Scalar::F16 {
                let dd = to.with_scalar(Scalar::F64);
                let w = if fd.scalar == Scalar::F64 {
                    y
                } else {
                    self.emit(format!(
                        "{r} = fpext {} {y} to {}",
                        self.ty(fd),
                        self.ty(dd)
                    ));
                    r
                };
                return self.round_f64_to_host_half(w, to);
            }
            let f32d = to.with_scalar(Scalar::F32);
            let w = match fd.scalar {
                Scalar::F32 => y,
                Scalar::F64 => {
                    self.emit(format!(
                        "{r} = fptrunc {} {y} to {}",
                        self.ty(fd),
                        self.ty(f32d)
                    ));
                    r
                }
                _ => y,
            };
            if self.host_half(ts) {
                return self.unarith(w, to);
            }
            if ts == Scalar::F64 {
                let e = self.tmp();
                self.emit(format!("{e} = fpext {} {w} to {tt}", self.ty(f32d)));
                return e;
            }
            return w;
        }
        // GPU (or host f32/f64). bf16 from f64 and f16 <-> bf16 round through f32.
        let through_f32 = (ts == Scalar::BF16 && fs == Scalar::F64)
            || (matches!(ts, Scalar::BF16 | Scalar::F16)
                && matches!(fs, Scalar::BF16 | Scalar::F16));
        if through_f32 {
            let f32d = to.with_scalar(Scalar::F32);
            let m = self.tmp();
            let op1 = if fs == Scalar::F64 {
                "fptrunc"
            } else {
                "fpext"
            };
            self.emit(format!("{m} = {op1} {ft} {x} to {}", self.ty(f32d)));
            self.emit(format!("{r} = fptrunc {} {m} to {tt}", self.ty(f32d)));
            return r;
        }
        let name = if ts.bits() > fs.bits() {
            "fpext"
        } else {
            "fptrunc"
        };
        self.emit(format!("{r} = {name} {ft} {x} to {tt}"));
        r
    }

    /// f64 lanes to a host half type.
    fn round_f64_to_host_half(&mut self, x: String, to: DType) -> String {
        if to.scalar == Scalar::F16 {
            self.lanes(&x, to.lanes, "double", "i16", &|l, e| {
                let t = l.tmp();
                l.emit(format!("{t} = call i16 @am.d2h(double {e})"));
                t
            })
        } else {
            let f = self.tmp();
            let dd = to.with_scalar(Scalar::F64);
            let fd = to.with_scalar(Scalar::F32);
            self.emit(format!(
                "{f} = fptrunc {} {x} to {}",
                self.ty(dd),
                self.ty(fd)
            ));
            self.unarith(f, to)
        }
    }
}

/// The entry of a host kernel without barriers: `void NAME(ptr args, ptr ctx, i64 first,
/// i64 end, i32 groups_x, i32 groups_y)` runs workgroups `first..end` (numbered x fastest),
/// each work-item in turn (x fastest), in one call. The work-item's code is inlined with its
/// context in a local copy, so its ids become loop counters, the argument loads leave the
/// loop (`args` is not written by the kernel) and LLVM can vectorise across work-items.
fn host_items_loop(symbol: &str, [wx, wy, wz]: [u32; 3]) -> String {
    let items = u64::from(wx) * u64::from(wy) * u64::from(wz);
    format!(
        r#"define void @{symbol}(ptr noalias readonly %args, ptr %ctx0, i64 %first, i64 %end, i32 %gxn, i32 %gyn) #1 {{
entry:
  %ctx = alloca [48 x i8], align 8
  call void @llvm.memcpy.p0.p0.i64(ptr align 8 %ctx, ptr align 8 %ctx0, i64 48, i1 false)
  %gx64 = zext i32 %gxn to i64
  %gy64 = zext i32 %gyn to i64
  %lid.y.p = getelementptr i8, ptr %ctx, i64 {ly}
  %lid.z.p = getelementptr i8, ptr %ctx, i64 {lz}
  %gid.x.p = getelementptr i8, ptr %ctx, i64 {gx}
  %gid.y.p = getelementptr i8, ptr %ctx, i64 {gy}
  %gid.z.p = getelementptr i8, ptr %ctx, i64 {gz}
  %any = icmp ult i64 %first, %end
  br i1 %any, label %group, label %done
group:
  %g = phi i64 [ %first, %entry ], [ %g.next, %group.end ]
  %g.x = urem i64 %g, %gx64
  %g.yz = udiv i64 %g, %gx64
  %g.y = urem i64 %g.yz, %gy64
  %g.z = udiv i64 %g.yz, %gy64
  %g.x32 = trunc i64 %g.x to i32
  %g.y32 = trunc i64 %g.y to i32
  %g.z32 = trunc i64 %g.z to i32
  store i32 %g.x32, ptr %gid.x.p, align 4
  store i32 %g.y32, ptr %gid.y.p, align 4
  store i32 %g.z32, ptr %gid.z.p, align 4
  br label %item
item:
  %i = phi i64 [ 0, %group ], [ %i.next, %item ]
  %l.x = urem i64 %i, {wx}
  %l.yz = udiv i64 %i, {wx}
  %l.y = urem i64 %l.yz, {wy}
  %l.z = udiv i64 %l.yz, {wy}
  %l.x32 = trunc i64 %l.x to i32
  %l.y32 = trunc i64 %l.y to i32
  %l.z32 = trunc i64 %l.z to i32
  store i32 %l.x32, ptr %ctx, align 4
  store i32 %l.y32, ptr %lid.y.p, align 4
  store i32 %l.z32, ptr %lid.z.p, align 4
  call void @am.item(ptr %args, ptr %ctx)
  %i.next = add nuw i64 %i, 1
  %i.more = icmp ult i64 %i.next, {items}
  br i1 %i.more, label %item, label %group.end
group.end:
  %g.next = add nuw i64 %g, 1
  %g.more = icmp ult i64 %g.next, %end
  br i1 %g.more, label %group, label %done
done:
  ret void
}}

attributes #1 = {{ nounwind }}

"#,
        ly = CTX_LOCAL_ID + 4,
        lz = CTX_LOCAL_ID + 8,
        gx = CTX_GROUP_ID,
        gy = CTX_GROUP_ID + 4,
        gz = CTX_GROUP_ID + 8,
    )
}

/// Conversions between the halves and f32/f64 for host code (bit manipulation, round to
/// nearest even), so host kernels need no compiler-rt routines.
const HOST_HELPERS: &str = r#"
define internal float @am.h2f(i16 %h) alwaysinline {
  %hx = zext i16 %h to i32
  %sign = and i32 %hx, 32768
  %s32 = shl i32 %sign, 16
  %e = lshr i32 %hx, 10
  %exp = and i32 %e, 31
  %man = and i32 %hx, 1023
  %e2 = add i32 %exp, 112
  %e3 = shl i32 %e2, 23
  %m3 = shl i32 %man, 13
  %nb = or i32 %e3, %m3
  %ib = or i32 2139095040, %m3
  %isinf = icmp eq i32 %exp, 31
  %b1 = select i1 %isinf, i32 %ib, i32 %nb
  %r1 = or i32 %b1, %s32
  %f1 = bitcast i32 %r1 to float
  %mf = uitofp i32 %man to float
  %sf = fmul float %mf, 0x3E70000000000000
  %neg = fneg float %sf
  %isneg = icmp ne i32 %sign, 0
  %sub = select i1 %isneg, float %neg, float %sf
  %issub = icmp eq i32 %exp, 0
  %r = select i1 %issub, float %sub, float %f1
  ret float %r
}

define internal i16 @am.d2h(double %x) alwaysinline {
  %b = bitcast double %x to i64
  %s64 = lshr i64 %b, 48
  %sign = and i64 %s64, 32768
  %a = and i64 %b, 9223372036854775807
  %isnan = icmp ugt i64 %a, 9218868437227405312
  %pl = lshr i64 %a, 42
  %pl9 = and i64 %pl, 511
  %nanb = or i64 %pl9, 32256
  %ax = bitcast i64 %a to double
  %isinf = fcmp oge double %ax, 0x40EFFE0000000000
  %issub = fcmp olt double %ax, 0x3F10000000000000
  %sc = fmul double %ax, 0x4170000000000000
  %rs = call double @llvm.roundeven.f64(double %sc)
  %subb = fptoui double %rs to i64
  %rest = and i64 %a, 4398046511103
  %gt = icmp ugt i64 %rest, 2199023255552
  %eq = icmp eq i64 %rest, 2199023255552
  %odd = trunc i64 %pl to i1
  %tie = and i1 %eq, %odd
  %up = or i1 %gt, %tie
  %upi = zext i1 %up to i64
  %m2 = add i64 %pl, %upi
  %normb = sub i64 %m2, 1032192
  %r1 = select i1 %issub, i64 %subb, i64 %normb
  %r2 = select i1 %isinf, i64 31744, i64 %r1
  %r3 = select i1 %isnan, i64 %nanb, i64 %r2
  %r4 = or i64 %r3, %sign
  %r = trunc i64 %r4 to i16
  ret i16 %r
}

define internal i16 @am.f2h(float %x) alwaysinline {
  %d = fpext float %x to double
  %r = call i16 @am.d2h(double %d)
  ret i16 %r
}

define internal float @am.b2f(i16 %h) alwaysinline {
  %w = zext i16 %h to i32
  %s = shl i32 %w, 16
  %f = bitcast i32 %s to float
  ret float %f
}

define internal i16 @am.f2b(float %x) alwaysinline {
  %b = bitcast float %x to i32
  %isnan = fcmp uno float %x, 0.0
  %hi = lshr i32 %b, 16
  %q = or i32 %hi, 64
  %lsb = and i32 %hi, 1
  %bias = add i32 %lsb, 32767
  %r0 = add i32 %b, %bias
  %r1 = lshr i32 %r0, 16
  %r = select i1 %isnan, i32 %q, i32 %r1
  %t = trunc i32 %r to i16
  ret i16 %t
}

declare double @llvm.roundeven.f64(double)
"#;

/// Whether a parameter's name can be its LLVM argument's name: an identifier that is not
/// one of the lowering's value (`vN`) or temporary (`tN`) names, unique among the kernel's
/// parameters.
fn param_name_usable(name: &str, k: &Kernel) -> bool {
    let mut chars = name.chars();
    let ident = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    let ours = name.len() > 1
        && (name.starts_with('v') || name.starts_with('t'))
        && name[1..].bytes().all(|b| b.is_ascii_digit());
    let unique = k.params.iter().filter(|p| p.name == name).count() == 1;
    ident && !ours && unique
}
