//! Runtime devices on the mock, the emulator's test kernels compiled once per target, and
//! typed buffer helpers.

use std::sync::OnceLock;

use am_isa::GfxTarget;
use am_mock::MockGpu;
use am_runtime::{Buffer, Device, MemKind, Program};

use crate::kernels::compile_cl;
use crate::rig::opts;

/// The emulator's OpenCL test kernels.
pub const KERNELS_CL: &str = include_str!("../../emu/tests/kernels/kernels.cl");

/// The test kernels' code object for `target` (compiled by clang-22 once per process).
pub fn code_object(target: GfxTarget) -> &'static [u8] {
    type Cell = OnceLock<Vec<u8>>;
    static CODE: [Cell; GfxTarget::ALL.len()] = [const { Cell::new() }; GfxTarget::ALL.len()];
    let slot = GfxTarget::ALL.iter().position(|&t| t == target).unwrap();
    CODE[slot].get_or_init(|| compile_cl(KERNELS_CL, target.name()))
}

/// A fresh mock of `profile` and a runtime device on it.
pub fn open(profile: &str) -> (MockGpu, Device) {
    let gpu = MockGpu::new(profile).unwrap();
    let dev = Device::open_with(gpu.open(), opts()).unwrap();
    (gpu, dev)
}

/// Test kernel `name` loaded on `dev`.
pub fn kernel(dev: &Device, name: &str) -> Program {
    let co = code_object(dev.info().target);
    dev.load(co, name).unwrap()
}

/// A VRAM buffer holding `data`.
pub fn upload<T: Copy + ToBytes>(dev: &Device, data: &[T]) -> Buffer {
    let bytes: Vec<u8> = data.iter().flat_map(|v| v.to_bytes()).collect();
    let b = dev.alloc(bytes.len().max(4) as u64, MemKind::Vram).unwrap();
    dev.write(&b, 0, &bytes).unwrap();
    b
}

/// `n` values of `T` from `b`.
pub fn download<T: ToBytes>(dev: &Device, b: &Buffer, n: usize) -> Vec<T> {
    let mut bytes = vec![0u8; n * T::SIZE];
    dev.read(b, 0, &mut bytes).unwrap();
    bytes.chunks(T::SIZE).map(T::from_bytes).collect()
}

/// Little-endian plain values.
pub trait ToBytes: Sized {
    /// Bytes per value.
    const SIZE: usize;
    /// The value's bytes.
    fn to_bytes(self) -> Vec<u8>;
    /// The value of `b` (`SIZE` bytes).
    fn from_bytes(b: &[u8]) -> Self;
}

macro_rules! to_bytes {
    ($($t:ty),*) => {$(
        impl ToBytes for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            fn to_bytes(self) -> Vec<u8> {
                self.to_le_bytes().to_vec()
            }
            fn from_bytes(b: &[u8]) -> Self {
                <$t>::from_le_bytes(b.try_into().unwrap())
            }
        }
    )*};
}
to_bytes!(u32, i32, f32, u64);

/// A small deterministic generator.
pub struct Rng(pub u64);

impl Rng {
    /// The next 32 random bits.
    pub fn bits(&mut self) -> u32 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) as u32
    }

    /// A float in `[lo, hi)`.
    pub fn f32(&mut self, lo: f32, hi: f32) -> f32 {
        lo + (hi - lo) * (self.bits() as f32 / (1u64 << 31) as f32)
    }
}
