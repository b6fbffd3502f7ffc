//! Runtime devices on the mock, the emulator's test kernels compiled once per target, and
//! typed buffer helpers.

use std::sync::OnceLock;

use am_isa::GfxTarget;
use am_mock::MockGpu;
use am_runtime::{Arg, Buffer, Device, Graph, MemKind, Program};

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

/// The runtime device of the process-wide mock `mock:PROFILE:index`.
pub fn open_index(profile: &str, index: u32) -> Device {
    Device::open_with(am_mock::open(profile, index).unwrap(), opts()).unwrap()
}

/// Fails unless every process-wide mock `(profile, index)` recorded no violation.
pub fn assert_clean(devices: &[(&str, u32)]) {
    for &(p, i) in devices {
        let g = am_mock::gpu(p, i).unwrap();
        assert!(
            g.violations().is_empty(),
            "{}: {:?}",
            g.name(),
            g.violations()
        );
    }
}

/// `n` scrambled words, different for each `seed`.
pub fn words(n: u32, seed: u32) -> Vec<u32> {
    (0..n).map(|i| i.wrapping_mul(0x9e37_79b9) ^ seed).collect()
}

/// One graph spanning `a` and `b`, devices that reach each other's VRAM (hive members over
/// XGMI, or PCIe peers through BAR0): `a` sums x and y, `b`'s copy queue reads the sums
/// in place once `a`'s kernel is done, `b` adds its own z, and `a`'s copy queue reads the
/// result back once `b`'s kernel is done — each step ordered by a wait on the GPU for a
/// value the other device writes. A replay submits once to each queue of both devices and
/// the host waits for nothing until the end: `a`'s first packet waits for a gate signal the
/// host opens only after `launch` has returned, so nothing can run before every submission
/// is in, and a cross-device wait that did not hold would copy the previous replay's values
/// (the final check fails). Each replay patches `a`'s input and the gate's value, as a
/// one-device graph's arguments are patched.
pub fn graph_across_two_devices_orders_them_on_the_gpu(a: &Device, b: &Device) {
    let n = 192usize;
    let xs: Vec<Vec<f32>> = (0..3)
        .map(|r| {
            (0..n)
                .map(|i| (i as f32) * 0.5 + r as f32 * 100.0)
                .collect()
        })
        .collect();
    let y: Vec<f32> = (0..n).map(|i| 3.0 - i as f32 * 0.25).collect();
    let z: Vec<f32> = (0..n).map(|i| (i % 7) as f32).collect();
    let bxs: Vec<_> = xs.iter().map(|x| upload(a, x)).collect();
    let by = upload(a, &y);
    let sums = a.alloc(4 * n as u64, MemKind::Vram).unwrap();
    let back = a.alloc(4 * n as u64, MemKind::Vram).unwrap();
    let bz = upload(b, &z);
    let landed = b.alloc(4 * n as u64, MemKind::Vram).unwrap();
    let out = b.alloc(4 * n as u64, MemKind::Vram).unwrap();
    let (va, vb) = (kernel(a, "vadd"), kernel(b, "vadd"));
    let gate = a.new_signal().unwrap();
    let (ac, ax, bc, bx) = (
        a.compute_queue(),
        a.copy_queue(),
        b.compute_queue(),
        b.copy_queue(),
    );

    let mut g = Graph::spanning(&[a.clone(), b.clone()]).unwrap();
    let opened = g.wait(&ac, &gate, 1).unwrap();
    let first = g
        .exec(
            &ac,
            &va,
            &[
                (&bxs[0]).into(),
                (&by).into(),
                (&sums).into(),
                Arg::U32(n as u32),
            ],
            [1, 1, 1],
            [256, 1, 1],
        )
        .unwrap();
    g.depend(&ac, &bx).unwrap();
    g.copy(&bx, &landed, &b.peer_view(&sums).unwrap()).unwrap();
    g.depend(&bx, &bc).unwrap();
    g.exec(
        &bc,
        &vb,
        &[
            (&landed).into(),
            (&bz).into(),
            (&out).into(),
            Arg::U32(n as u32),
        ],
        [1, 1, 1],
        [256, 1, 1],
    )
    .unwrap();
    g.depend(&bc, &ax).unwrap();
    g.copy(&ax, &back, &a.peer_view(&out).unwrap()).unwrap();
    // Work of a device the graph does not span, or a signal the queue's device cannot
    // reach, is refused by name.
    let e = g.signal(&bc, &gate, 1).unwrap_err();
    assert!(e.to_string().contains("another device's memory"), "{e}");
    let mut exec = g.build().unwrap();
    assert_eq!(exec.kernels(), 2);

    for replay in 1..=6u64 {
        let r = (replay % 3) as usize;
        exec.set_arg(first, 0, &(&bxs[r]).into()).unwrap();
        exec.set_wait(opened, replay).unwrap();
        let counts = |d: &Device| (d.submissions(), d.host_waits());
        let (a0, b0) = (counts(a), counts(b));
        let fences = exec.launch().unwrap().to_vec();
        assert_eq!(fences.len(), 4, "one submission per queue");
        let (a1, b1) = (counts(a), counts(b));
        assert_eq!(
            (a1.0 - a0.0, b1.0 - b0.0),
            (2, 2),
            "replay {replay}: one submission to each of the two queues of each device"
        );
        assert_eq!(
            (a1.1, b1.1),
            (a0.1, b0.1),
            "replay {replay}: the host waited for nothing while submitting to both devices"
        );
        for f in &fences {
            assert!(
                !f.done().unwrap(),
                "replay {replay}: work ran before the gate opened"
            );
        }
        gate.set(replay).unwrap();
        exec.wait().unwrap();
        let want: Vec<f32> = (0..n).map(|i| xs[r][i] + y[i] + z[i]).collect();
        assert_eq!(
            download::<f32>(b, &out, n),
            want,
            "replay {replay}: device 1"
        );
        assert_eq!(
            download::<f32>(a, &back, n),
            want,
            "replay {replay}: back on device 0"
        );
    }
    assert_eq!(exec.replays(), 6);
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
