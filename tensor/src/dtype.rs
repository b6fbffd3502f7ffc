//! Element types of tensors and the host values that go in and out of them.

use std::fmt;

use am_compiler::{Scalar, float};

/// The element type of a tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    /// Truth values (one byte each in memory).
    Bool,
    /// 32-bit signed integers.
    I32,
    /// bfloat16.
    BF16,
    /// IEEE half precision.
    F16,
    /// IEEE single precision.
    F32,
}

impl DType {
    /// Every dtype.
    pub const ALL: [DType; 5] = [DType::Bool, DType::I32, DType::BF16, DType::F16, DType::F32];

    /// The compiler's scalar type.
    pub fn scalar(self) -> Scalar {
        match self {
            DType::Bool => Scalar::Bool,
            DType::I32 => Scalar::I32,
            DType::BF16 => Scalar::BF16,
            DType::F16 => Scalar::F16,
            DType::F32 => Scalar::F32,
        }
    }

    /// Bytes per element in memory.
    pub fn size(self) -> usize {
        match self {
            DType::Bool => 1,
            DType::F16 | DType::BF16 => 2,
            DType::I32 | DType::F32 => 4,
        }
    }

    /// A floating-point type?
    pub fn is_float(self) -> bool {
        matches!(self, DType::F16 | DType::BF16 | DType::F32)
    }

    /// The name (`f32`, `bf16`, …).
    pub fn name(self) -> &'static str {
        self.scalar().name()
    }

    /// The dtype name safetensors uses.
    pub fn safetensors_name(self) -> &'static str {
        match self {
            DType::Bool => "BOOL",
            DType::I32 => "I32",
            DType::BF16 => "BF16",
            DType::F16 => "F16",
            DType::F32 => "F32",
        }
    }

    /// The dtype of a safetensors name.
    pub fn from_safetensors_name(s: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.safetensors_name() == s)
    }

    /// The type both operands of a binary operation become: the wider of the two, with
    /// f16 and bf16 together giving f32.
    pub fn promote(a: DType, b: DType) -> DType {
        match (a, b) {
            (DType::F16, DType::BF16) | (DType::BF16, DType::F16) => DType::F32,
            _ => a.max(b),
        }
    }

    /// The float type an operation that needs floats computes in (`f32` for integers and bool).
    pub fn to_float(self) -> DType {
        if self.is_float() { self } else { DType::F32 }
    }

    /// The bits of `x` as a constant of this type (floats rounded to nearest, integers
    /// truncated toward zero and saturated, bool: `x != 0`).
    pub(crate) fn const_bits(self, x: f64) -> u64 {
        match self {
            DType::Bool => u64::from(x != 0.0),
            DType::I32 => u64::from((x as i32) as u32),
            DType::F32 | DType::F16 | DType::BF16 => float::from_f64(self.scalar(), x),
        }
    }

    /// Element `i` of `bytes` (this dtype's encoding) as an f64.
    pub(crate) fn read_f64(self, bytes: &[u8], i: usize) -> f64 {
        let s = self.size();
        let b = &bytes[i * s..(i + 1) * s];
        match self {
            DType::Bool => f64::from(u8::from(b[0] != 0)),
            DType::I32 => f64::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]])),
            DType::F32 => f64::from(f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
            DType::F16 => f64::from(float::f16_to_f32(u16::from_le_bytes([b[0], b[1]]))),
            DType::BF16 => f64::from(float::bf16_to_f32(u16::from_le_bytes([b[0], b[1]]))),
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Host element types that tensors are made from and read into.
pub trait Element: Copy + Send + Sync + 'static {
    /// The tensor dtype holding this type.
    const DTYPE: DType;
    /// Appends the little-endian encoding.
    fn put(self, out: &mut Vec<u8>);
    /// Reads one from its encoding.
    fn get(b: &[u8]) -> Self;
}

impl Element for f32 {
    const DTYPE: DType = DType::F32;
    fn put(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
    fn get(b: &[u8]) -> f32 {
        f32::from_le_bytes([b[0], b[1], b[2], b[3]])
    }
}

impl Element for i32 {
    const DTYPE: DType = DType::I32;
    fn put(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
    fn get(b: &[u8]) -> i32 {
        i32::from_le_bytes([b[0], b[1], b[2], b[3]])
    }
}

impl Element for bool {
    const DTYPE: DType = DType::Bool;
    fn put(self, out: &mut Vec<u8>) {
        out.push(u8::from(self));
    }
    fn get(b: &[u8]) -> bool {
        b[0] != 0
    }
}
