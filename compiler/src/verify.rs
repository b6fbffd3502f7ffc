//! The verifier: every rule a kernel must follow before it is lowered. Errors name the kernel
//! and the first offending instruction in its text form.

use crate::Error;
use crate::ir::*;
use crate::text::print_inst;

/// Largest workgroup (work-items) on every target.
pub const MAX_WORKGROUP: u32 = 1024;
/// Largest private array per work-item in bytes (scratch is per lane; keep it small).
pub const MAX_PRIVATE_BYTES: u32 = 16384;
/// Largest local memory per workgroup in bytes (LDS of gfx11 and gfx942).
pub const MAX_LOCAL_BYTES: u32 = 65536;

fn ident_ok(s: &str) -> bool {
    s.chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

struct V<'k> {
    k: &'k Kernel,
    defined: Vec<bool>,
    scopes: Vec<Vec<Value>>,
    /// `if` bodies the instruction being checked is inside.
    ifs: u32,
}

impl V<'_> {
    fn fail<T>(&self, i: &Inst, reason: impl Into<String>) -> Result<T, Error> {
        Err(Error::Verify {
            kernel: self.k.name.clone(),
            inst: print_inst(self.k, i),
            reason: reason.into(),
        })
    }
    fn kernel_fail<T>(&self, reason: impl Into<String>) -> Result<T, Error> {
        Err(Error::Verify {
            kernel: self.k.name.clone(),
            inst: "(kernel header)".into(),
            reason: reason.into(),
        })
    }

    fn visible(&self, v: Value) -> bool {
        self.scopes.iter().any(|s| s.contains(&v))
    }

    fn define(&mut self, i: &Inst, v: Value) -> Result<(), Error> {
        match self.defined.get_mut(v.index()) {
            None => self.fail(i, format!("defines %{} which has no type", v.0)),
            Some(true) => self.fail(i, format!("defines %{} a second time", v.0)),
            Some(d) => {
                *d = true;
                if let Some(s) = self.scopes.last_mut() {
                    s.push(v);
                }
                Ok(())
            }
        }
    }

    /// The type of an operand that must be defined and in scope.
    fn operand(&self, i: &Inst, v: Value) -> Result<Type, Error> {
        if !self.visible(v) {
            return self.fail(
                i,
                format!(
                    "uses %{} which is not defined before it in an enclosing body",
                    v.0
                ),
            );
        }
        match self.k.type_of(v) {
            Some(t) => Ok(t),
            None => self.fail(i, format!("uses %{} which has no type", v.0)),
        }
    }

    fn val(&self, i: &Inst, v: Value) -> Result<DType, Error> {
        match self.operand(i, v)? {
            Type::Val(d) => Ok(d),
            t => self.fail(
                i,
                format!("operand %{} is a pointer ({t}), not a value", v.0),
            ),
        }
    }

    fn body(&mut self, body: &[Inst], top: bool) -> Result<(), Error> {
        self.scopes.push(vec![]);
        for i in body {
            self.inst(i, top)?;
        }
        self.scopes.pop();
        Ok(())
    }

    fn inst(&mut self, i: &Inst, top: bool) -> Result<(), Error> {
        let defines = !matches!(
            i.op,
            Op::Store { .. } | Op::Barrier | Op::Range { .. } | Op::If { .. }
        );
        let rt = match (i.result, defines) {
            (Some(r), true) => match self.k.type_of(r) {
                Some(t) => t,
                None => return self.fail(i, format!("defines %{} which has no type", r.0)),
            },
            (None, false) => Type::Val(DType::BOOL),
            (Some(_), false) => return self.fail(i, "defines a value but the operation has none"),
            (None, true) => return self.fail(i, "the operation's value is not given a name"),
        };
        let rd = rt.dtype();
        let need_rd = || -> Result<DType, Error> {
            match rd {
                Some(d) => Ok(d),
                None => self.fail(i, format!("the result type {rt} is a pointer")),
            }
        };
        if let Some(d) = rd
            && !DType::valid_lanes(d.lanes)
        {
            return self.fail(
                i,
                format!("{} lanes: vectors have 2, 3, 4, 8 or 16", d.lanes),
            );
        }
        match &i.op {
            Op::Const(bits) => {
                let d = need_rd()?;
                let b = d.scalar.bits();
                if b < 64 && *bits >> b != 0 {
                    return self.fail(i, format!("constant bits {bits:#x} do not fit {d}"));
                }
            }
            Op::LocalId(_) | Op::GroupId(_) => {
                if rt != Type::Val(DType::U32) {
                    return self.fail(i, format!("ids are u32, not {rt}"));
                }
            }
            Op::Unary(op, a) => {
                let d = self.val(i, *a)?;
                let s = d.scalar;
                let ok = match op {
                    UnOp::Neg | UnOp::Abs => s.is_int() || s.is_float(),
                    UnOp::Not => !s.is_float(),
                    UnOp::Sqrt | UnOp::Rcp | UnOp::Trunc => s.is_float(),
                    UnOp::Exp2 | UnOp::Log2 | UnOp::Sin => {
                        if s == Scalar::F64 {
                            return self.fail(
                                i,
                                format!(
                                    "{} of f64 needs device libraries on AMDGPU: use f32",
                                    op.name()
                                ),
                            );
                        }
                        s.is_float()
                    }
                };
                if !ok {
                    return self.fail(i, format!("{} does not apply to {d}", op.name()));
                }
                if need_rd()? != d {
                    return self.fail(i, format!("result type {rt} is not the operand's {d}"));
                }
            }
            Op::Binary(op, a, b) => {
                let (da, db) = (self.val(i, *a)?, self.val(i, *b)?);
                if da != db {
                    return self.fail(i, format!("operand types differ: {da} and {db}"));
                }
                let s = da.scalar;
                let ok = match op {
                    BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div | BinOp::Min | BinOp::Max => {
                        s.is_int() || s.is_float()
                    }
                    BinOp::Rem | BinOp::Shl | BinOp::Shr => s.is_int(),
                    BinOp::And | BinOp::Or | BinOp::Xor => !s.is_float(),
                };
                if !ok {
                    return self.fail(i, format!("{} does not apply to {da}", op.name()));
                }
                if need_rd()? != da {
                    return self.fail(i, format!("result type {rt} is not the operands' {da}"));
                }
            }
            Op::Fma(a, b, c) => {
                let d = self.val(i, *a)?;
                if self.val(i, *b)? != d || self.val(i, *c)? != d || !d.scalar.is_float() {
                    return self.fail(i, "fma needs three floats of one type");
                }
                if need_rd()? != d {
                    return self.fail(i, format!("result type {rt} is not {d}"));
                }
            }
            Op::Mma(a, b, c) => {
                let (da, db, dc) = (self.val(i, *a)?, self.val(i, *b)?, self.val(i, *c)?);
                let half = matches!(da.scalar, Scalar::F16 | Scalar::BF16);
                if da != db
                    || !((half && matches!(da.lanes, 4 | 8 | 16))
                        || (da.scalar == Scalar::F32 && matches!(da.lanes, 4 | 8)))
                {
                    return self.fail(
                        i,
                        "mma needs A and B of one type: f16 or bf16 x4, x8 or x16, or f32 x4 or x8",
                    );
                }
                if dc.scalar != Scalar::F32 || !matches!(dc.lanes, 4 | 8 | 16) {
                    return self.fail(i, "mma needs C of f32x4, f32x8 or f32x16");
                }
                if need_rd()? != dc {
                    return self.fail(i, format!("result type {rt} is not C's {dc}"));
                }
                // The whole wave computes one product: a work-item that skips it would leave
                // its part of A and B out of the others' results.
                if self.ifs > 0 {
                    return self.fail(i, "mma inside an `if`: every work-item must reach it");
                }
            }
            Op::Cmp(op, a, b) => {
                let (da, db) = (self.val(i, *a)?, self.val(i, *b)?);
                if da != db {
                    return self.fail(i, format!("operand types differ: {da} and {db}"));
                }
                if da.scalar == Scalar::Bool && !matches!(op, CmpOp::Eq | CmpOp::Ne) {
                    return self.fail(i, "bools compare only with eq and ne");
                }
                if need_rd()? != da.with_scalar(Scalar::Bool) {
                    return self.fail(
                        i,
                        format!("a comparison of {da} gives bool lanes, not {rt}"),
                    );
                }
            }
            Op::Where(c, a, b) => {
                let dc = self.val(i, *c)?;
                let (da, db) = (self.val(i, *a)?, self.val(i, *b)?);
                if dc.scalar != Scalar::Bool || (dc.lanes != 1 && dc.lanes != da.lanes) {
                    return self.fail(
                        i,
                        format!(
                            "the condition must be bool (or bool lanes of the operands), not {dc}"
                        ),
                    );
                }
                if da != db || need_rd()? != da {
                    return self.fail(
                        i,
                        format!("operand and result types differ: {da}, {db}, {rt}"),
                    );
                }
            }
            Op::Cast(a) => {
                let d = self.val(i, *a)?;
                let r = need_rd()?;
                if d.lanes != r.lanes {
                    return self.fail(i, format!("cast changes the lane count: {d} to {r}"));
                }
            }
            Op::Bitcast(a) => {
                let d = self.val(i, *a)?;
                let r = need_rd()?;
                if d.scalar == Scalar::Bool || r.scalar == Scalar::Bool {
                    return self.fail(i, "bool has no bit layout to reinterpret");
                }
                if d.bytes() != r.bytes() {
                    return self.fail(
                        i,
                        format!(
                            "bitcast between sizes: {d} ({} bytes) to {r} ({} bytes)",
                            d.bytes(),
                            r.bytes()
                        ),
                    );
                }
            }
            Op::Vector(vs) => {
                let r = need_rd()?;
                if vs.len() < 2 || vs.len() != usize::from(r.lanes) {
                    return self.fail(i, format!("{} operands for a {r}", vs.len()));
                }
                for &v in vs {
                    let d = self.val(i, v)?;
                    if d != DType::scalar(r.scalar) {
                        return self
                            .fail(i, format!("lane %{} is {d}, not {}", v.0, r.scalar.name()));
                    }
                }
            }
            Op::Extract(v, l) => {
                let d = self.val(i, *v)?;
                if d.lanes < 2 || *l >= d.lanes {
                    return self.fail(i, format!("lane {l} of {d}"));
                }
                if need_rd()? != DType::scalar(d.scalar) {
                    return self.fail(i, format!("result {rt} is not {}", d.scalar.name()));
                }
            }
            Op::Load { ptr, index, align } => {
                let r = need_rd()?;
                self.access(i, *ptr, *index, r, *align)?;
            }
            Op::Store {
                ptr,
                index,
                value,
                align,
            } => {
                let d = self.val(i, *value)?;
                self.access(i, *ptr, *index, d, *align)?;
            }
            Op::Atomic {
                op,
                ptr,
                index,
                value,
            } => {
                let d = self.val(i, *value)?;
                let (space, elem) = self.access(i, *ptr, *index, d, d.bytes())?;
                if space == Space::Private {
                    return self.fail(i, "atomics work on global or local memory");
                }
                let s = elem.scalar;
                let int = s.is_int() && s.bits() >= 32;
                let ok = int || (s == Scalar::F32 && matches!(op, AtomicOp::Add | AtomicOp::Xchg));
                if !ok || elem.lanes != 1 || d != elem {
                    return self.fail(i, format!("atomic {} does not apply to {d} (32/64-bit integers; f32 add and xchg)", op.name()));
                }
                if need_rd()? != d {
                    return self.fail(i, format!("result {rt} is not {d}"));
                }
            }
            Op::Local { len } | Op::Private { len } => {
                if !top {
                    return self.fail(
                        i,
                        "local and private arrays are declared at the kernel's top level",
                    );
                }
                let Type::Ptr { elem, .. } = rt else {
                    return self.fail(i, "the result must be a pointer");
                };
                if *len == 0 {
                    return self.fail(i, "an array needs at least one element");
                }
                if elem.scalar == Scalar::Bool && elem.lanes > 1 {
                    return self.fail(i, "bool vectors have no memory layout");
                }
                if matches!(i.op, Op::Private { .. })
                    && u64::from(elem.bytes()) * u64::from(*len) > u64::from(MAX_PRIVATE_BYTES)
                {
                    return self.fail(
                        i,
                        format!("a private array of more than {MAX_PRIVATE_BYTES} bytes"),
                    );
                }
            }
            Op::Barrier => {}
            Op::Range {
                var,
                start,
                end,
                step,
                body,
            } => {
                let (ds, de) = (self.val(i, *start)?, self.val(i, *end)?);
                if !ds.scalar.is_int() || ds.lanes != 1 || ds != de {
                    return self.fail(
                        i,
                        format!("range bounds must be one integer type, not {ds} and {de}"),
                    );
                }
                if self.k.type_of(*var) != Some(Type::Val(ds)) {
                    return self.fail(i, format!("the loop variable must be {ds}"));
                }
                if *step == 0 {
                    return self.fail(i, "step 0 never ends");
                }
                self.scopes.push(vec![]);
                self.define(i, *var)?;
                self.body(body, false)?;
                self.scopes.pop();
            }
            Op::If { cond, body } => {
                if self.val(i, *cond)? != DType::BOOL {
                    return self.fail(i, "the condition must be bool");
                }
                self.ifs += 1;
                let r = self.body(body, false);
                self.ifs -= 1;
                r?;
            }
        }
        if let (Some(r), true) = (i.result, defines) {
            self.define(i, r)?;
        }
        Ok(())
    }

    fn access(
        &self,
        i: &Inst,
        ptr: Value,
        index: Value,
        d: DType,
        align: u32,
    ) -> Result<(Space, DType), Error> {
        let Type::Ptr { space, elem } = self.operand(i, ptr)? else {
            return self.fail(i, format!("%{} is not a pointer", ptr.0));
        };
        let di = self.val(i, index)?;
        if !di.scalar.is_int() || di.lanes != 1 {
            return self.fail(i, format!("the index must be an integer, not {di}"));
        }
        let fits = d == elem || (elem.lanes == 1 && d.scalar == elem.scalar);
        if !fits {
            return self.fail(
                i,
                format!("{d} does not match the pointer's elements ({elem})"),
            );
        }
        if d.scalar == Scalar::Bool && d.lanes > 1 {
            return self.fail(i, "bool vectors have no memory layout");
        }
        if !align.is_power_of_two() || align > 256 {
            return self.fail(i, format!("align {align} is not a power of two up to 256"));
        }
        Ok((space, elem))
    }
}

/// Checks every rule of the IR; the error names the first offending instruction.
pub fn verify(k: &Kernel) -> Result<(), Error> {
    let mut v = V {
        k,
        defined: vec![false; k.types.len()],
        scopes: vec![vec![]],
        ifs: 0,
    };
    if !ident_ok(&k.name) {
        return v.kernel_fail(format!("`{}` is not a valid kernel name", k.name));
    }
    if k.workgroup.contains(&0)
        || k.workgroup.iter().map(|&x| u64::from(x)).product::<u64>() > u64::from(MAX_WORKGROUP)
    {
        return v.kernel_fail(format!(
            "workgroup {:?}: each size ≥ 1, at most {MAX_WORKGROUP} work-items",
            k.workgroup
        ));
    }
    for (n, p) in k.params.iter().enumerate() {
        if !ident_ok(&p.name) || k.params[..n].iter().any(|q| q.name == p.name) {
            return v.kernel_fail(format!(
                "parameter name `{}` is invalid or repeated",
                p.name
            ));
        }
        match k.type_of(p.value) {
            Some(Type::Val(d)) if d.lanes == 1 => {}
            Some(Type::Ptr {
                space: Space::Global,
                elem,
            }) if !(elem.scalar == Scalar::Bool && elem.lanes > 1) => {}
            t => {
                return v.kernel_fail(format!(
                    "parameter %{} has type {}: parameters are scalars or global pointers",
                    p.name,
                    t.map(|t| t.to_string()).unwrap_or_else(|| "none".into())
                ));
            }
        }
        if p.noalias && !matches!(k.type_of(p.value), Some(Type::Ptr { .. })) {
            return v.kernel_fail(format!(
                "parameter %{} is noalias but not a pointer",
                p.name
            ));
        }
        if p.offset32 && !matches!(k.type_of(p.value), Some(Type::Ptr { .. })) {
            return v.kernel_fail(format!(
                "parameter %{} is offset32 but not a pointer",
                p.name
            ));
        }
        match v.defined.get_mut(p.value.index()) {
            Some(d) if !*d => *d = true,
            _ => {
                return v.kernel_fail(format!("parameter %{} has a bad or repeated value", p.name));
            }
        }
        v.scopes[0].push(p.value);
    }
    v.body(&k.body, true)?;
    let (_, lds) = k.local_layout();
    if lds > MAX_LOCAL_BYTES {
        return v.kernel_fail(format!(
            "local arrays take {lds} bytes, more than {MAX_LOCAL_BYTES}"
        ));
    }
    Ok(())
}
