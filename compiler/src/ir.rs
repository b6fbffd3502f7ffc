//! The kernel IR: typed SSA values, structured control flow (ranges and ifs), three memory
//! spaces, work-item ids, barriers, atomics, vector accesses.
//!
//! A [`Kernel`] is a list of [`Inst`]s; [`Op::Range`] and [`Op::If`] hold nested lists. A value
//! is visible from its definition to the end of the list that defines it (nested lists
//! included). Every value has a [`Type`] in [`Kernel::types`]. Values carried across loop
//! iterations live in private memory ([`Op::Private`]); LLVM promotes them to registers.

use std::fmt;

/// Scalar element types.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scalar {
    /// 1-bit truth value (stored as one byte in memory).
    Bool,
    /// Signed 8-bit integer.
    I8,
    /// Signed 16-bit integer.
    I16,
    /// Signed 32-bit integer.
    I32,
    /// Signed 64-bit integer.
    I64,
    /// Unsigned 8-bit integer.
    U8,
    /// Unsigned 16-bit integer.
    U16,
    /// Unsigned 32-bit integer.
    U32,
    /// Unsigned 64-bit integer.
    U64,
    /// IEEE half precision.
    F16,
    /// bfloat16 (8-bit exponent, 7-bit mantissa).
    BF16,
    /// IEEE single precision.
    F32,
    /// IEEE double precision.
    F64,
}

impl Scalar {
    /// Every scalar type, in printing order.
    pub const ALL: [Scalar; 13] = [
        Scalar::Bool,
        Scalar::I8,
        Scalar::I16,
        Scalar::I32,
        Scalar::I64,
        Scalar::U8,
        Scalar::U16,
        Scalar::U32,
        Scalar::U64,
        Scalar::F16,
        Scalar::BF16,
        Scalar::F32,
        Scalar::F64,
    ];

    /// The name in the text form (`f32`, `u8`, …).
    pub fn name(self) -> &'static str {
        match self {
            Scalar::Bool => "bool",
            Scalar::I8 => "i8",
            Scalar::I16 => "i16",
            Scalar::I32 => "i32",
            Scalar::I64 => "i64",
            Scalar::U8 => "u8",
            Scalar::U16 => "u16",
            Scalar::U32 => "u32",
            Scalar::U64 => "u64",
            Scalar::F16 => "f16",
            Scalar::BF16 => "bf16",
            Scalar::F32 => "f32",
            Scalar::F64 => "f64",
        }
    }

    /// Bits of the value (1 for bool).
    pub fn bits(self) -> u32 {
        match self {
            Scalar::Bool => 1,
            Scalar::I8 | Scalar::U8 => 8,
            Scalar::I16 | Scalar::U16 | Scalar::F16 | Scalar::BF16 => 16,
            Scalar::I32 | Scalar::U32 | Scalar::F32 => 32,
            Scalar::I64 | Scalar::U64 | Scalar::F64 => 64,
        }
    }

    /// Bytes in memory (a bool takes one byte).
    pub fn bytes(self) -> u32 {
        self.bits().div_ceil(8)
    }

    /// Floating point?
    pub fn is_float(self) -> bool {
        matches!(self, Scalar::F16 | Scalar::BF16 | Scalar::F32 | Scalar::F64)
    }

    /// Integer (signed or unsigned, not bool)?
    pub fn is_int(self) -> bool {
        !self.is_float() && self != Scalar::Bool
    }

    /// Signed integer?
    pub fn is_signed(self) -> bool {
        matches!(self, Scalar::I8 | Scalar::I16 | Scalar::I32 | Scalar::I64)
    }
}

/// A value type: a scalar or a short vector of scalars.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DType {
    /// Element type.
    pub scalar: Scalar,
    /// Lanes: 1 for a scalar; 2, 3, 4, 8 or 16 for vectors.
    pub lanes: u8,
}

impl DType {
    /// A scalar type.
    pub const fn scalar(s: Scalar) -> DType {
        DType {
            scalar: s,
            lanes: 1,
        }
    }
    /// A vector type.
    pub const fn vec(s: Scalar, lanes: u8) -> DType {
        DType { scalar: s, lanes }
    }
    /// `bool`.
    pub const BOOL: DType = DType::scalar(Scalar::Bool);
    /// `i32`.
    pub const I32: DType = DType::scalar(Scalar::I32);
    /// `i64`.
    pub const I64: DType = DType::scalar(Scalar::I64);
    /// `u32`.
    pub const U32: DType = DType::scalar(Scalar::U32);
    /// `f16`.
    pub const F16: DType = DType::scalar(Scalar::F16);
    /// `f32`.
    pub const F32: DType = DType::scalar(Scalar::F32);
    /// `f64`.
    pub const F64: DType = DType::scalar(Scalar::F64);

    /// Bytes in memory.
    pub fn bytes(self) -> u32 {
        self.scalar.bytes() * u32::from(self.lanes)
    }

    /// The same shape with another element type.
    pub fn with_scalar(self, s: Scalar) -> DType {
        DType {
            scalar: s,
            lanes: self.lanes,
        }
    }

    /// Lane counts the IR accepts.
    pub fn valid_lanes(lanes: u8) -> bool {
        matches!(lanes, 1 | 2 | 3 | 4 | 8 | 16)
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.lanes == 1 {
            f.write_str(self.scalar.name())
        } else {
            write!(f, "{}x{}", self.scalar.name(), self.lanes)
        }
    }
}

/// Memory spaces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Space {
    /// Device memory (kernel arguments point here).
    Global,
    /// Memory shared by a workgroup (LDS on AMD GPUs).
    Local,
    /// Memory of one work-item (registers or scratch).
    Private,
}

impl Space {
    /// The name in the text form.
    pub fn name(self) -> &'static str {
        match self {
            Space::Global => "global",
            Space::Local => "local",
            Space::Private => "private",
        }
    }
}

/// The type of an SSA value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Type {
    /// A number, truth value or vector of them.
    Val(DType),
    /// A pointer to elements of `elem` in `space`.
    Ptr {
        /// Memory space.
        space: Space,
        /// Element type (indices count these).
        elem: DType,
    },
}

impl Type {
    /// The value type, if this is not a pointer.
    pub fn dtype(self) -> Option<DType> {
        match self {
            Type::Val(d) => Some(d),
            Type::Ptr { .. } => None,
        }
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Type::Val(d) => d.fmt(f),
            Type::Ptr { space, elem } => write!(f, "ptr<{}, {elem}>", space.name()),
        }
    }
}

/// An SSA value: an index into [`Kernel::types`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Value(pub u32);

impl Value {
    /// Index into [`Kernel::types`].
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// A kernel parameter.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Param {
    /// Name (letters, digits, `_`; not starting with a digit).
    pub name: String,
    /// Its value.
    pub value: Value,
    /// The caller promises that no other pointer parameter reaches the same memory.
    pub noalias: bool,
    /// The caller promises that every element the kernel reaches through this pointer is
    /// less than 4 GiB past it, so an address is the pointer plus a 32-bit byte offset (on
    /// AMD GPUs: a scalar base and a 32-bit vector offset, no 64-bit arithmetic per
    /// address).
    pub offset32: bool,
}

/// Dimension of a work-item or workgroup id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dim {
    /// x.
    X,
    /// y.
    Y,
    /// z.
    Z,
}

impl Dim {
    /// 0, 1 or 2.
    pub fn index(self) -> usize {
        match self {
            Dim::X => 0,
            Dim::Y => 1,
            Dim::Z => 2,
        }
    }
    /// `x`, `y` or `z`.
    pub fn name(self) -> &'static str {
        ["x", "y", "z"][self.index()]
    }
}

/// Operations of one operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnOp {
    /// Negation (integers wrap).
    Neg,
    /// Bitwise or logical not (integers, bool).
    Not,
    /// Absolute value (floats; integers wrap at the minimum).
    Abs,
    /// 2^x (floats).
    Exp2,
    /// log2 x (floats).
    Log2,
    /// Square root (floats; correctly rounded).
    Sqrt,
    /// sin x, x in radians (floats).
    Sin,
    /// 1/x (floats; correctly rounded division).
    Rcp,
    /// Round toward zero (floats).
    Trunc,
}

/// Operations of two operands of one type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinOp {
    /// a + b (integers wrap).
    Add,
    /// a − b (integers wrap).
    Sub,
    /// a × b (integers wrap).
    Mul,
    /// a / b. Integers: toward zero, x / 0 = 0, MIN / −1 = MIN. Floats: IEEE.
    Div,
    /// Remainder with the sign of a (integers; x % 0 = 0).
    Rem,
    /// Minimum. Floats: IEEE minimumNumber (a NaN operand yields the other; −0 < +0).
    Min,
    /// Maximum, like `Min`.
    Max,
    /// Bitwise and (integers, bool).
    And,
    /// Bitwise or (integers, bool).
    Or,
    /// Bitwise xor (integers, bool).
    Xor,
    /// Shift left by b mod bit width (integers).
    Shl,
    /// Shift right (arithmetic for signed types) by b mod bit width.
    Shr,
}

/// Comparisons; the result is `bool` with the operands' lane count. Float comparisons are
/// false for NaN operands, except `Ne`, which is true.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CmpOp {
    /// a < b.
    Lt,
    /// a ≤ b.
    Le,
    /// a > b.
    Gt,
    /// a ≥ b.
    Ge,
    /// a = b.
    Eq,
    /// a ≠ b.
    Ne,
}

/// Read-modify-write atomic operations (relaxed ordering; device scope in global memory,
/// workgroup scope in local memory). The result is the old value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AtomicOp {
    /// Add (integers wrap; f32 too).
    Add,
    /// Subtract (integers).
    Sub,
    /// Minimum (integers).
    Min,
    /// Maximum (integers).
    Max,
    /// Bitwise and (integers).
    And,
    /// Bitwise or (integers).
    Or,
    /// Bitwise xor (integers).
    Xor,
    /// Exchange (integers, f32).
    Xchg,
}

macro_rules! names {
    ($t:ty { $($v:ident = $s:literal),* $(,)? }) => {
        impl $t {
            /// Every variant.
            pub const ALL: &'static [$t] = &[$(<$t>::$v),*];
            /// The name in the text form.
            pub fn name(self) -> &'static str {
                match self { $(<$t>::$v => $s),* }
            }
        }
    };
}
names!(UnOp { Neg = "neg", Not = "not", Abs = "abs", Exp2 = "exp2", Log2 = "log2",
    Sqrt = "sqrt", Sin = "sin", Rcp = "rcp", Trunc = "trunc" });
names!(BinOp { Add = "add", Sub = "sub", Mul = "mul", Div = "div", Rem = "rem", Min = "min",
    Max = "max", And = "and", Or = "or", Xor = "xor", Shl = "shl", Shr = "shr" });
names!(CmpOp { Lt = "lt", Le = "le", Gt = "gt", Ge = "ge", Eq = "eq", Ne = "ne" });
names!(AtomicOp { Add = "add", Sub = "sub", Min = "min", Max = "max", And = "and", Or = "or",
    Xor = "xor", Xchg = "xchg" });

/// What an instruction does.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// A constant: the value's bits, zero-extended (floats as their IEEE bits, bool 0/1).
    /// Vector constants repeat the value in every lane.
    Const(u64),
    /// Index of this work-item in its workgroup (`u32`).
    LocalId(Dim),
    /// Index of this workgroup in the grid (`u32`).
    GroupId(Dim),
    /// One-operand arithmetic.
    Unary(UnOp, Value),
    /// Two-operand arithmetic.
    Binary(BinOp, Value, Value),
    /// a × b + c with one rounding (floats).
    Fma(Value, Value, Value),
    /// A wave's 16×16×16 matrix multiply-accumulate `D = A·B + C` (GPUs only): f16 or bf16
    /// vectors `a` and `b` hold this work-item's part of A and B, the f32 vector `c` its part
    /// of C (and the result of D), in the target's register layout — gfx11 `v_wmma`
    /// (f16x16/bf16x16, f32x8), gfx12 `v_wmma` (f16x8/bf16x8, f32x8), CDNA `v_mfma` (f16x4/bf16x4,
    /// f32x4). On CDNA f32x4 operands are four `v_mfma_f32_16x16x4_f32`, element `e` of each
    /// lane's A and B in the `e`-th (the same lane layout: lane group `q` holds k `4q + e`);
    /// f32x8 operands with an f32x16 C are a 32×32×16 product, eight
    /// `v_mfma_f32_32x32x2_f32` (lane `32q + x` holds k `8q + e` of row/column `x`). Every
    /// work-item of the wave must reach it together.
    Mma(Value, Value, Value),
    /// Comparison.
    Cmp(CmpOp, Value, Value),
    /// `cond ? a : b` (per lane when `cond` is a vector).
    Where(Value, Value, Value),
    /// Value conversion to the result type (floats to integers saturate, NaN gives 0;
    /// to bool: `x != 0`).
    Cast(Value),
    /// Reinterpretation of the bits as the result type (same size).
    Bitcast(Value),
    /// A vector of the operands (all of the result's scalar type).
    Vector(Vec<Value>),
    /// Lane of a vector.
    Extract(Value, u8),
    /// Loads the result type from `ptr[index]` (index in elements of the pointer's element
    /// type; a vector result reads consecutive elements). `align` in bytes.
    Load {
        /// Pointer.
        ptr: Value,
        /// Element index (integer).
        index: Value,
        /// Known alignment of the address in bytes.
        align: u32,
    },
    /// Stores `value` at `ptr[index]`.
    Store {
        /// Pointer.
        ptr: Value,
        /// Element index.
        index: Value,
        /// What to store.
        value: Value,
        /// Known alignment in bytes.
        align: u32,
    },
    /// Atomic read-modify-write of `ptr[index]`; the result is the old value.
    Atomic {
        /// Operation.
        op: AtomicOp,
        /// Pointer (global or local).
        ptr: Value,
        /// Element index.
        index: Value,
        /// Operand.
        value: Value,
    },
    /// A workgroup-shared array of `len` elements (top level of the kernel only). The result
    /// is a local pointer.
    Local {
        /// Elements.
        len: u32,
    },
    /// A per-work-item array of `len` elements (top level only). The result is a private
    /// pointer.
    Private {
        /// Elements.
        len: u32,
    },
    /// Workgroup barrier: every work-item's earlier local and global accesses are visible to
    /// the workgroup after it. Must be reached by all work-items of the group.
    Barrier,
    /// `for var in start..end step step { body }` (integers; `var` is defined by the range).
    Range {
        /// The loop variable (same type as `start` and `end`).
        var: Value,
        /// First value.
        start: Value,
        /// Bound (exclusive).
        end: Value,
        /// Increment (> 0).
        step: u32,
        /// Loop body.
        body: Vec<Inst>,
    },
    /// `if cond { body }`.
    If {
        /// A `bool`.
        cond: Value,
        /// Conditional body.
        body: Vec<Inst>,
    },
}

/// One instruction: an operation and the value it defines, if any.
#[derive(Clone, Debug, PartialEq)]
pub struct Inst {
    /// The value defined (`None` for stores, barriers, ranges and ifs).
    pub result: Option<Value>,
    /// The operation.
    pub op: Op,
}

/// A kernel: parameters, workgroup size, body.
#[derive(Clone, Debug, PartialEq)]
pub struct Kernel {
    /// Symbol name (letters, digits, `_`).
    pub name: String,
    /// Parameters in kernel-argument order.
    pub params: Vec<Param>,
    /// Work-items per workgroup in x, y, z (fixed at compile time, as tinygrad does; launches
    /// must use it).
    pub workgroup: [u32; 3],
    /// The body.
    pub body: Vec<Inst>,
    /// The type of every value, indexed by [`Value`].
    pub types: Vec<Type>,
    /// Names of values from the text form (empty: printed as `%N`), indexed by [`Value`];
    /// may be shorter than `types`. Parameters are named by [`Param::name`].
    pub names: Vec<String>,
}

impl Kernel {
    /// Type of a value (`None` if the value does not exist).
    pub fn type_of(&self, v: Value) -> Option<Type> {
        self.types.get(v.index()).copied()
    }

    /// Work-items per workgroup.
    pub fn workgroup_len(&self) -> u32 {
        self.workgroup.iter().product()
    }

    /// Byte offset and size of each parameter in the kernel-argument buffer: natural
    /// alignment (pointers take 8 bytes), the layout LLVM gives `amdgpu_kernel` arguments and
    /// the one the CPU backend reads. Parameters are pointers or scalars (the verifier checks).
    pub fn arg_layout(&self) -> Vec<(u32, u32)> {
        let mut off = 0u32;
        let mut out = Vec::with_capacity(self.params.len());
        for p in &self.params {
            let size = match self.types.get(p.value.index()) {
                Some(Type::Val(d)) => d.bytes(),
                _ => 8,
            };
            off = off.next_multiple_of(size.next_power_of_two());
            out.push((off, size));
            off += size;
        }
        out
    }

    /// Bytes of explicit kernel arguments (the end of the last one; the code object's
    /// `kernarg_segment_size`).
    pub fn args_size(&self) -> u32 {
        self.arg_layout().last().map(|&(o, s)| o + s).unwrap_or(0)
    }

    /// Whether the kernel has a barrier anywhere.
    pub fn has_barrier(&self) -> bool {
        fn walk(b: &[Inst]) -> bool {
            b.iter().any(|i| match &i.op {
                Op::Barrier => true,
                Op::Range { body, .. } | Op::If { body, .. } => walk(body),
                _ => false,
            })
        }
        walk(&self.body)
    }

    /// Local arrays with their byte offsets in the workgroup's local memory (each aligned to
    /// 16 bytes) and the total size.
    pub fn local_layout(&self) -> (Vec<(Value, u32)>, u32) {
        let mut off = 0u32;
        let mut out = vec![];
        for i in &self.body {
            if let (Op::Local { len }, Some(r)) = (&i.op, i.result)
                && let Type::Ptr { elem, .. } = self.types[r.index()]
            {
                off = off.next_multiple_of(16);
                out.push((r, off));
                off = off.saturating_add(elem.bytes().saturating_mul(*len));
            }
        }
        (out, off)
    }
}
