//! Building kernels from Rust: [`KernelBuilder`].
//!
//! The builder never panics: it records what it is asked to and [`KernelBuilder::finish`] runs
//! the verifier, whose error names the first malformed instruction.

use crate::Error;
use crate::ir::*;

/// Builds a [`Kernel`] instruction by instruction. Nested bodies (ranges, ifs) are built by
/// closures.
pub struct KernelBuilder {
    name: String,
    params: Vec<Param>,
    workgroup: [u32; 3],
    types: Vec<Type>,
    stack: Vec<Vec<Inst>>,
}

impl KernelBuilder {
    /// A kernel called `name` with `workgroup` work-items per workgroup.
    pub fn new(name: &str, workgroup: [u32; 3]) -> KernelBuilder {
        KernelBuilder {
            name: name.to_string(),
            params: vec![],
            workgroup,
            types: vec![],
            stack: vec![vec![]],
        }
    }

    fn value(&mut self, t: Type) -> Value {
        self.types.push(t);
        Value(self.types.len() as u32 - 1)
    }

    fn push(&mut self, result: Option<Value>, op: Op) {
        if let Some(body) = self.stack.last_mut() {
            body.push(Inst { result, op });
        }
    }

    fn def(&mut self, t: Type, op: Op) -> Value {
        let v = self.value(t);
        self.push(Some(v), op);
        v
    }

    /// The type of `v`; a value the builder did not make gets `bool`, which the verifier
    /// then reports where it is used.
    pub fn type_of(&self, v: Value) -> Type {
        self.types
            .get(v.index())
            .copied()
            .unwrap_or(Type::Val(DType::BOOL))
    }

    fn dtype_of(&self, v: Value) -> DType {
        self.type_of(v).dtype().unwrap_or(DType::BOOL)
    }

    /// A global-memory pointer parameter to elements of `elem`.
    pub fn param_ptr(&mut self, name: &str, elem: DType, noalias: bool) -> Value {
        let v = self.value(Type::Ptr {
            space: Space::Global,
            elem,
        });
        self.params.push(Param {
            name: name.to_string(),
            value: v,
            noalias,
            offset32: false,
        });
        v
    }

    /// Marks pointer parameter `p` as reaching less than 4 GiB ([`crate::Param::offset32`]).
    pub fn set_offset32(&mut self, p: Value) {
        if let Some(param) = self.params.iter_mut().find(|q| q.value == p) {
            param.offset32 = true;
        }
    }

    /// A scalar parameter.
    pub fn param(&mut self, name: &str, dtype: DType) -> Value {
        let v = self.value(Type::Val(dtype));
        self.params.push(Param {
            name: name.to_string(),
            value: v,
            noalias: false,
            offset32: false,
        });
        v
    }

    /// A constant from its bits (see [`Op::Const`]).
    pub fn constant(&mut self, dtype: DType, bits: u64) -> Value {
        self.def(Type::Val(dtype), Op::Const(bits))
    }
    /// An `i32` constant.
    pub fn const_i32(&mut self, x: i32) -> Value {
        self.constant(DType::I32, u64::from(x as u32))
    }
    /// A `u32` constant.
    pub fn const_u32(&mut self, x: u32) -> Value {
        self.constant(DType::U32, u64::from(x))
    }
    /// An `f32` constant.
    pub fn const_f32(&mut self, x: f32) -> Value {
        self.constant(DType::F32, u64::from(x.to_bits()))
    }
    /// An `f64` constant.
    pub fn const_f64(&mut self, x: f64) -> Value {
        self.constant(DType::F64, x.to_bits())
    }
    /// A `bool` constant.
    pub fn const_bool(&mut self, x: bool) -> Value {
        self.constant(DType::BOOL, u64::from(x))
    }

    /// This work-item's index in its workgroup along `d` (`u32`).
    pub fn local_id(&mut self, d: Dim) -> Value {
        self.def(Type::Val(DType::U32), Op::LocalId(d))
    }
    /// This workgroup's index along `d` (`u32`).
    pub fn group_id(&mut self, d: Dim) -> Value {
        self.def(Type::Val(DType::U32), Op::GroupId(d))
    }
    /// `group_id(d) * workgroup[d] + local_id(d)`, the global index along `d` (`u32`).
    pub fn global_id(&mut self, d: Dim) -> Value {
        let g = self.group_id(d);
        let l = self.local_id(d);
        let size = self.const_u32(self.workgroup[d.index()]);
        let base = self.binary(BinOp::Mul, g, size);
        self.binary(BinOp::Add, base, l)
    }

    /// One-operand arithmetic.
    pub fn unary(&mut self, op: UnOp, a: Value) -> Value {
        let t = self.type_of(a);
        self.def(t, Op::Unary(op, a))
    }
    /// Two-operand arithmetic (the result has `a`'s type).
    pub fn binary(&mut self, op: BinOp, a: Value, b: Value) -> Value {
        let t = self.type_of(a);
        self.def(t, Op::Binary(op, a, b))
    }
    /// `a + b`.
    pub fn add(&mut self, a: Value, b: Value) -> Value {
        self.binary(BinOp::Add, a, b)
    }
    /// `a - b`.
    pub fn sub(&mut self, a: Value, b: Value) -> Value {
        self.binary(BinOp::Sub, a, b)
    }
    /// `a * b`.
    pub fn mul(&mut self, a: Value, b: Value) -> Value {
        self.binary(BinOp::Mul, a, b)
    }
    /// `a * b + c`, one rounding.
    pub fn fma(&mut self, a: Value, b: Value, c: Value) -> Value {
        let t = self.type_of(a);
        self.def(t, Op::Fma(a, b, c))
    }
    /// A wave's matrix multiply-accumulate `a·b + c` ([`Op::Mma`]); the result has `c`'s type.
    pub fn mma(&mut self, a: Value, b: Value, c: Value) -> Value {
        let t = self.type_of(c);
        self.def(t, Op::Mma(a, b, c))
    }
    /// A comparison (`bool` result with `a`'s lanes).
    pub fn cmp(&mut self, op: CmpOp, a: Value, b: Value) -> Value {
        let d = self.dtype_of(a).with_scalar(Scalar::Bool);
        self.def(Type::Val(d), Op::Cmp(op, a, b))
    }
    /// `cond ? a : b`.
    pub fn where_(&mut self, cond: Value, a: Value, b: Value) -> Value {
        let t = self.type_of(a);
        self.def(t, Op::Where(cond, a, b))
    }
    /// Value conversion to `to`.
    pub fn cast(&mut self, a: Value, to: DType) -> Value {
        self.def(Type::Val(to), Op::Cast(a))
    }
    /// Bit reinterpretation as `to`.
    pub fn bitcast(&mut self, a: Value, to: DType) -> Value {
        self.def(Type::Val(to), Op::Bitcast(a))
    }
    /// A vector of scalars of one type.
    pub fn vector(&mut self, lanes: &[Value]) -> Value {
        let s = lanes
            .first()
            .map(|&v| self.dtype_of(v).scalar)
            .unwrap_or(Scalar::F32);
        let d = DType::vec(s, u8::try_from(lanes.len()).unwrap_or(0));
        self.def(Type::Val(d), Op::Vector(lanes.to_vec()))
    }
    /// Lane `lane` of vector `v`.
    pub fn extract(&mut self, v: Value, lane: u8) -> Value {
        let d = DType::scalar(self.dtype_of(v).scalar);
        self.def(Type::Val(d), Op::Extract(v, lane))
    }

    /// Loads a `dtype` from `ptr[index]`; `align` is the known byte alignment of the address.
    pub fn load(&mut self, ptr: Value, index: Value, dtype: DType, align: u32) -> Value {
        self.def(Type::Val(dtype), Op::Load { ptr, index, align })
    }
    /// Loads one element of `ptr`'s element type from `ptr[index]` at natural alignment.
    pub fn load_elem(&mut self, ptr: Value, index: Value) -> Value {
        let elem = match self.type_of(ptr) {
            Type::Ptr { elem, .. } => elem,
            Type::Val(d) => d,
        };
        self.load(ptr, index, elem, elem.scalar.bytes())
    }
    /// Stores `value` at `ptr[index]`.
    pub fn store(&mut self, ptr: Value, index: Value, value: Value, align: u32) {
        self.push(
            None,
            Op::Store {
                ptr,
                index,
                value,
                align,
            },
        );
    }
    /// Stores `value` at `ptr[index]` at natural alignment of its scalar type.
    pub fn store_elem(&mut self, ptr: Value, index: Value, value: Value) {
        let align = self.dtype_of(value).scalar.bytes();
        self.store(ptr, index, value, align);
    }
    /// Atomic read-modify-write; returns the old value.
    pub fn atomic(&mut self, op: AtomicOp, ptr: Value, index: Value, value: Value) -> Value {
        let t = self.type_of(value);
        self.def(
            t,
            Op::Atomic {
                op,
                ptr,
                index,
                value,
            },
        )
    }
    /// A workgroup-shared array (LDS) of `len` elements.
    pub fn local(&mut self, elem: DType, len: u32) -> Value {
        self.def(
            Type::Ptr {
                space: Space::Local,
                elem,
            },
            Op::Local { len },
        )
    }
    /// A per-work-item array of `len` elements.
    pub fn private(&mut self, elem: DType, len: u32) -> Value {
        self.def(
            Type::Ptr {
                space: Space::Private,
                elem,
            },
            Op::Private { len },
        )
    }
    /// A workgroup barrier.
    pub fn barrier(&mut self) {
        self.push(None, Op::Barrier);
    }

    /// `for i in start..end (step step) { body(i) }`; `i` has `start`'s type.
    pub fn range(
        &mut self,
        start: Value,
        end: Value,
        step: u32,
        body: impl FnOnce(&mut KernelBuilder, Value),
    ) {
        let t = self.type_of(start);
        let var = self.value(t);
        self.stack.push(vec![]);
        body(self, var);
        let body = self.stack.pop().unwrap_or_default();
        self.push(
            None,
            Op::Range {
                var,
                start,
                end,
                step,
                body,
            },
        );
    }

    /// `if cond { body }`.
    pub fn if_(&mut self, cond: Value, body: impl FnOnce(&mut KernelBuilder)) {
        self.stack.push(vec![]);
        body(self);
        let body = self.stack.pop().unwrap_or_default();
        self.push(None, Op::If { cond, body });
    }

    /// The kernel, verified.
    pub fn finish(mut self) -> Result<Kernel, Error> {
        let body = self.stack.pop().unwrap_or_default();
        let k = Kernel {
            name: self.name,
            params: self.params,
            workgroup: self.workgroup,
            body,
            types: self.types,
            names: vec![],
        };
        crate::verify::verify(&k)?;
        Ok(k)
    }

    /// The kernel without verification (for testing the verifier).
    pub fn finish_unverified(mut self) -> Kernel {
        let body = self.stack.pop().unwrap_or_default();
        Kernel {
            name: self.name,
            params: self.params,
            workgroup: self.workgroup,
            body,
            types: self.types,
            names: vec![],
        }
    }
}
