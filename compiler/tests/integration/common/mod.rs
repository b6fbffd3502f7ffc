//! Shared helpers of the compiler tests: run one kernel on the emulated gfx1100 (through
//! `am_emu`, the path of the mock navi31 until the runtime exists) and on the CPU backend,
//! with the same arguments, and return the buffers.
#![allow(dead_code)]

use std::sync::OnceLock;

use am_compiler::{Cache, Compiler, CpuProgram, GfxTarget, Kernel, Target, Type};
use am_emu::{CodeObject, HostMemory, Isa, Launch, Program};

/// A kernel argument: a buffer (bytes in, bytes out) or a scalar's bytes.
#[derive(Clone, Debug)]
pub enum Arg {
    Buf(Vec<u8>),
    Scalar(Vec<u8>),
}

pub fn buf<T: Copy>(data: &[T]) -> Arg {
    Arg::Buf(bytes_of(data))
}
pub fn zeros(n: usize) -> Arg {
    Arg::Buf(vec![0; n])
}
pub fn scalar<T: Copy>(x: T) -> Arg {
    Arg::Scalar(bytes_of(&[x]))
}

pub fn bytes_of<T: Copy>(data: &[T]) -> Vec<u8> {
    // SAFETY: T is a plain number type in these tests; viewing it as bytes is sound.
    unsafe { std::slice::from_raw_parts(data.as_ptr() as *const u8, std::mem::size_of_val(data)) }
        .to_vec()
}

pub fn from_bytes<T: Copy + Default>(b: &[u8]) -> Vec<T> {
    let n = b.len() / std::mem::size_of::<T>();
    let mut v = vec![T::default(); n];
    // SAFETY: v has room for n values of T; T is a plain number type.
    unsafe {
        std::ptr::copy_nonoverlapping(
            b.as_ptr(),
            v.as_mut_ptr() as *mut u8,
            n * std::mem::size_of::<T>(),
        )
    };
    v
}

/// One compiler for the whole test binary, caching in memory only (never the user's disk).
pub fn compiler() -> &'static Compiler {
    static C: OnceLock<Compiler> = OnceLock::new();
    C.get_or_init(|| Compiler::with_cache(Cache::new(None)))
}

fn kernarg(k: &Kernel, ptrs: &[u64], args: &[Arg]) -> Vec<u8> {
    let layout = k.arg_layout();
    let mut a = vec![0u8; (k.args_size() as usize).max(8)];
    for (i, (arg, (off, size))) in args.iter().zip(layout).enumerate() {
        let off = off as usize;
        match (arg, k.types[k.params[i].value.index()]) {
            (Arg::Buf(_), Type::Ptr { .. }) => {
                a[off..off + 8].copy_from_slice(&ptrs[i].to_le_bytes())
            }
            (Arg::Scalar(b), Type::Val(_)) => {
                a[off..off + size as usize].copy_from_slice(&b[..size as usize])
            }
            _ => panic!("argument {i} of {} does not match its parameter", k.name),
        }
    }
    a
}

/// Runs `k` on the emulated gfx1100 over `groups` workgroups; returns the buffers after.
pub fn run_gpu(k: &Kernel, groups: [u32; 3], args: &[Arg]) -> Vec<Vec<u8>> {
    let c = compiler()
        .compile(k, Target::Gpu(GfxTarget::Gfx1100))
        .unwrap_or_else(|e| panic!("{e}"));
    run_code_object(&c.bytes, k, groups, args).0
}

/// Runs `k` compiled for an RDNA4 `target` (gfx1200 or gfx1201) on the emulator.
pub fn run_gpu_on(target: Target, k: &Kernel, groups: [u32; 3], args: &[Arg]) -> Vec<Vec<u8>> {
    let isa: Isa = match target {
        Target::Gpu(g) if g.is_gfx12() => g,
        t => panic!("run_gpu_on takes an RDNA4 target, not {t}"),
    };
    let c = compiler()
        .compile(k, target)
        .unwrap_or_else(|e| panic!("{e}"));
    run_code_object_on(isa, &c.bytes, k, groups, args).0
}

/// Runs a code object's kernel on the emulated gfx1100; returns the buffers and the
/// wave-instructions.
pub fn run_code_object(
    bytes: &[u8],
    k: &Kernel,
    groups: [u32; 3],
    args: &[Arg],
) -> (Vec<Vec<u8>>, u64) {
    run_code_object_on(Isa::Gfx1100, bytes, k, groups, args)
}

/// Runs a code object's kernel on the emulator for `isa`.
pub fn run_code_object_on(
    isa: Isa,
    bytes: &[u8],
    k: &Kernel,
    groups: [u32; 3],
    args: &[Arg],
) -> (Vec<Vec<u8>>, u64) {
    let co = CodeObject::parse(bytes, &k.name).unwrap_or_else(|e| panic!("{e}"));
    let prog = Program::new(&co, isa).unwrap_or_else(|e| panic!("{e}"));
    let kern = co.kernel(&k.name).unwrap_or_else(|e| panic!("{e}"));
    let mut mem = HostMemory::new();
    let ptrs: Vec<u64> = args
        .iter()
        .map(|a| match a {
            Arg::Buf(b) => mem.alloc_bytes(b),
            Arg::Scalar(_) => 0,
        })
        .collect();
    let mut ka = kernarg(k, &ptrs, args);
    // Compiled code loads kernel arguments in blocks past their end, as on hardware.
    ka.resize(
        (ka.len().max(kern.descriptor.kernarg_size as usize)).next_multiple_of(64) + 64,
        0,
    );
    let ka_addr = mem.alloc_bytes(&ka);
    let grid = [0, 1, 2].map(|d| groups[d] * k.workgroup[d]);
    let stats = am_emu::dispatch(
        &prog,
        kern,
        &Launch::new(grid, k.workgroup, ka_addr),
        &mut mem,
    )
    .unwrap_or_else(|e| panic!("{}: {e}", k.name));
    let out = args
        .iter()
        .zip(&ptrs)
        .filter_map(|(a, &p)| match a {
            Arg::Buf(b) => Some(mem.bytes(p, b.len()).unwrap_or_default()),
            Arg::Scalar(_) => None,
        })
        .collect();
    (out, stats.instructions)
}

/// Runs `k` on the CPU backend; returns the buffers after.
pub fn run_cpu(k: &Kernel, groups: [u32; 3], args: &[Arg]) -> Vec<Vec<u8>> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    run_cpu_on(k, groups, args, threads)
}

/// [`run_cpu`] on at most `threads` threads.
pub fn run_cpu_on(k: &Kernel, groups: [u32; 3], args: &[Arg], threads: usize) -> Vec<Vec<u8>> {
    let c = compiler()
        .compile(k, Target::Cpu)
        .unwrap_or_else(|e| panic!("{e}"));
    let p = CpuProgram::load(&c.bytes).unwrap_or_else(|e| panic!("{e}"));
    // 16-byte aligned copies of the buffers (vector accesses).
    let mut bufs: Vec<Vec<u128>> = args
        .iter()
        .map(|a| match a {
            Arg::Buf(b) => {
                let mut v = vec![0u128; b.len().div_ceil(16) + 1];
                // SAFETY: v has at least b.len() bytes.
                unsafe {
                    std::ptr::copy_nonoverlapping(b.as_ptr(), v.as_mut_ptr() as *mut u8, b.len())
                };
                v
            }
            Arg::Scalar(_) => vec![],
        })
        .collect();
    let ptrs: Vec<u64> = bufs.iter_mut().map(|v| v.as_mut_ptr() as u64).collect();
    let ka = kernarg(k, &ptrs, args);
    // SAFETY: every pointer argument points at a buffer as large as the test's data, which the
    // kernels index within.
    unsafe { p.launch_on(groups, &ka, threads) }.unwrap_or_else(|e| panic!("{e}"));
    args.iter()
        .zip(&bufs)
        .filter_map(|(a, v)| match a {
            Arg::Buf(b) => Some(
                // SAFETY: v holds at least b.len() bytes.
                unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, b.len()) }.to_vec(),
            ),
            Arg::Scalar(_) => None,
        })
        .collect()
}

/// Runs on both; asserts the buffers are byte-identical and returns them.
pub fn run_both(k: &Kernel, groups: [u32; 3], args: &[Arg]) -> Vec<Vec<u8>> {
    let g = run_gpu(k, groups, args);
    let c = run_cpu(k, groups, args);
    for (i, (a, b)) in g.iter().zip(&c).enumerate() {
        assert!(
            a == b,
            "{}: buffer {i} differs between the emulated gfx1100 and the cpu",
            k.name
        );
    }
    g
}

/// A small deterministic generator (xorshift64*).
pub struct Rng(pub u64);
impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn f32(&mut self, lo: f32, hi: f32) -> f32 {
        lo + (hi - lo) * ((self.next() >> 40) as f32 / (1u64 << 24) as f32)
    }
}

/// Distance in units in the last place between two f32 (finite, or equal).
pub fn ulps(a: f32, b: f32) -> u64 {
    if a == b || (a.is_nan() && b.is_nan()) {
        return 0;
    }
    let key = |x: f32| {
        let i = x.to_bits() as i32;
        if i < 0 {
            i64::from(i32::MIN) - i64::from(i)
        } else {
            i64::from(i)
        }
    };
    (key(a) - key(b)).unsigned_abs()
}

/// A kernel writing, per work-item at `6 × linear global id`, its local and group id in x, y
/// and z (`o[6n..6n+6] = [lx, gx, ly, gy, lz, gz]`), for a grid of `groups` workgroups of `wg`.
pub fn ids_kernel(wg: [u32; 3], groups: [u32; 3]) -> Kernel {
    use am_compiler::{DType, Dim, KernelBuilder, Value};
    let mut b = KernelBuilder::new("ids", wg);
    let po = b.param_ptr("o", DType::U32, true);
    let ids: Vec<Value> = [Dim::X, Dim::Y, Dim::Z]
        .iter()
        .flat_map(|&d| [b.local_id(d), b.group_id(d)])
        .collect();
    let gx = b.global_id(Dim::X);
    let gy = b.global_id(Dim::Y);
    let gz = b.global_id(Dim::Z);
    let w = b.const_u32(wg[0] * groups[0]);
    let h = b.const_u32(wg[1] * groups[1]);
    let zy = b.mul(gz, h);
    let zy = b.add(zy, gy);
    let lin = b.mul(zy, w);
    let lin = b.add(lin, gx);
    let six = b.const_u32(6);
    let base = b.mul(lin, six);
    for (n, &v) in ids.iter().enumerate() {
        let off = b.const_u32(n as u32);
        let at = b.add(base, off);
        b.store_elem(po, at, v);
    }
    b.finish().unwrap()
}
