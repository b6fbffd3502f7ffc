//! Shared helpers of the emulator tests: compiling OpenCL C kernels with LLVM 22 and building
//! kernel arguments.
#![allow(dead_code)]

use am_emu::{CodeObject, HostMemory, Isa, Launch, Memory, Program, Stats};
use std::path::PathBuf;
use std::process::Command;

pub const KERNELS: &str = include_str!("../../kernels/kernels.cl");

/// A fresh temporary directory for one compilation.
fn temp_dir(tag: &str) -> PathBuf {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let d = std::env::temp_dir().join(format!(
        "am-emu-{}-{}-{}",
        tag,
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn run_tool(cmd: &mut Command) {
    let name = cmd.get_program().to_string_lossy().to_string();
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {name} ({e}): install LLVM 22 with scripts/setup"));
    assert!(
        out.status.success(),
        "{name} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A compiled code object on disk; its temporary directory is removed when this is dropped.
pub struct TempHsaco {
    dir: PathBuf,
    file: PathBuf,
}

impl std::ops::Deref for TempHsaco {
    type Target = std::path::Path;
    fn deref(&self) -> &std::path::Path {
        &self.file
    }
}

impl Drop for TempHsaco {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Compiles OpenCL C for gfx1100 (`extra`: more clang flags) and links a code object.
pub fn compile_cl(src: &str, extra: &[&str]) -> (TempHsaco, Vec<u8>) {
    compile_cl_for(Isa::Gfx1100, src, extra)
}

/// Compiles OpenCL C for `isa` and links a code object.
pub fn compile_cl_for(isa: Isa, src: &str, extra: &[&str]) -> (TempHsaco, Vec<u8>) {
    let d = temp_dir("cl");
    let cl = d.join("k.cl");
    let obj = d.join("k.o");
    let hsaco = d.join("k.hsaco");
    std::fs::write(&cl, src).unwrap();
    run_tool(
        Command::new("clang-22")
            .args(["-x", "cl", "-cl-std=CL2.0", "--target=amdgcn-amd-amdhsa"])
            .arg(format!("-mcpu={}", isa.name()))
            .args(["-nogpulib", "-O3", "-c"])
            .args(extra)
            .arg(&cl)
            .arg("-o")
            .arg(&obj),
    );
    run_tool(
        Command::new("ld.lld-22")
            .arg("-shared")
            .arg(&obj)
            .arg("-o")
            .arg(&hsaco),
    );
    let bytes = std::fs::read(&hsaco).unwrap();
    (
        TempHsaco {
            dir: d,
            file: hsaco,
        },
        bytes,
    )
}

/// Compiles LLVM IR for gfx1100 with llc-22 and links it.
pub fn compile_ll(src: &str) -> Vec<u8> {
    let d = temp_dir("ll");
    let ll = d.join("k.ll");
    let obj = d.join("k.o");
    let hsaco = d.join("k.hsaco");
    std::fs::write(&ll, src).unwrap();
    run_tool(
        Command::new("llc-22")
            .args([
                "-mtriple=amdgcn-amd-amdhsa",
                "-mcpu=gfx1100",
                "-O3",
                "-filetype=obj",
            ])
            .arg(&ll)
            .arg("-o")
            .arg(&obj),
    );
    run_tool(
        Command::new("ld.lld-22")
            .arg("-shared")
            .arg(&obj)
            .arg("-o")
            .arg(&hsaco),
    );
    let bytes = std::fs::read(&hsaco).unwrap();
    let _ = std::fs::remove_dir_all(&d);
    bytes
}

/// The test kernels, compiled once per test binary.
pub fn kernels() -> &'static (CodeObject, Program) {
    kernels_for(Isa::Gfx1100)
}

/// The test kernels compiled for `isa`, once per test binary and ISA.
pub fn kernels_for(isa: Isa) -> &'static (CodeObject, Program) {
    type Cell = std::sync::OnceLock<(CodeObject, Program)>;
    static K: [Cell; Isa::ALL.len()] = [const { Cell::new() }; Isa::ALL.len()];
    let slot = Isa::ALL.iter().position(|&t| t == isa).unwrap();
    K[slot].get_or_init(|| {
        let (_, bytes) = compile_cl_for(isa, KERNELS, &[]);
        let co = CodeObject::parse(&bytes, &format!("kernels.cl ({})", isa.name())).unwrap();
        let prog = Program::new(&co, isa).unwrap();
        (co, prog)
    })
}

/// Kernel arguments laid out with natural alignment, as OpenCL does.
#[derive(Default)]
pub struct Args(pub Vec<u8>);

impl Args {
    fn align(&mut self, a: usize) {
        while !self.0.len().is_multiple_of(a) {
            self.0.push(0);
        }
    }
    pub fn ptr(mut self, p: u64) -> Args {
        self.align(8);
        self.0.extend(p.to_le_bytes());
        self
    }
    pub fn u32(mut self, v: u32) -> Args {
        self.align(4);
        self.0.extend(v.to_le_bytes());
        self
    }
    pub fn u64(mut self, v: u64) -> Args {
        self.align(8);
        self.0.extend(v.to_le_bytes());
        self
    }
    pub fn f32(self, v: f32) -> Args {
        self.u32(v.to_bits())
    }
}

/// Runs kernel `name` of `co` with `args` (padded to the descriptor's kernarg size).
pub fn launch(
    (co, prog): &(CodeObject, Program),
    name: &str,
    grid: [u32; 3],
    wg: [u32; 3],
    args: Args,
    mem: &mut HostMemory,
) -> Stats {
    let k = co.kernel(name).unwrap();
    // Code reads its own constant data PC-relative: load the segments at the link address
    // (below the 4 GiB where HostMemory allocates), once per memory.
    for seg in &co.segments {
        if !seg.bytes.is_empty() && mem.bytes(seg.vaddr, 1).is_none() {
            mem.map(seg.vaddr, &seg.bytes).unwrap();
        }
    }
    let mut a = args.0;
    // Scalar loads may fetch past the last argument (s_load_b256 of the tail), as on
    // hardware; runtimes allocate the kernarg segment with room to spare, so do we.
    a.resize(
        a.len()
            .max(k.descriptor.kernarg_size as usize)
            .next_multiple_of(64)
            + 64,
        0,
    );
    let kernarg = mem.alloc_bytes(&a);
    am_emu::dispatch(prog, k, &Launch::new(grid, wg, kernarg), mem)
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Runs kernel `name(a, b, c, out)` over 64 lanes in workgroups of `wg` lanes, on fresh
/// memory holding the three 64-dword inputs, and returns the 64 output dwords.
pub fn run_abc(
    k: &(CodeObject, Program),
    name: &str,
    wg: u32,
    [a, b, c]: &[Vec<u32>; 3],
) -> Vec<u32> {
    let mut mem = HostMemory::new();
    let (pa, pb, pc) = (
        upload(&mut mem, a),
        upload(&mut mem, b),
        upload(&mut mem, c),
    );
    let po = mem.alloc(4 * 64);
    let args = Args::default().ptr(pa).ptr(pb).ptr(pc).ptr(po);
    launch(k, name, [64, 1, 1], [wg, 1, 1], args, &mut mem);
    download_u32(&mut mem, po, 64)
}

pub fn upload<T: Copy>(mem: &mut HostMemory, data: &[T]) -> u64 {
    // SAFETY: T is a plain numeric type in these tests; viewing it as bytes is sound.
    let bytes = unsafe {
        std::slice::from_raw_parts(data.as_ptr() as *const u8, std::mem::size_of_val(data))
    };
    mem.alloc_bytes(bytes)
}

pub fn download_u32(mem: &mut HostMemory, addr: u64, n: usize) -> Vec<u32> {
    let b = mem.bytes(addr, 4 * n).unwrap();
    b.chunks(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

pub fn download_f32(mem: &mut HostMemory, addr: u64, n: usize) -> Vec<f32> {
    download_u32(mem, addr, n)
        .into_iter()
        .map(f32::from_bits)
        .collect()
}

pub fn download_u64(mem: &mut HostMemory, addr: u64, n: usize) -> Vec<u64> {
    let b = mem.bytes(addr, 8 * n).unwrap();
    b.chunks(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

pub fn download_u16(mem: &mut HostMemory, addr: u64, n: usize) -> Vec<u16> {
    let b = mem.bytes(addr, 2 * n).unwrap();
    b.chunks(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]))
        .collect()
}

/// A small deterministic generator (xorshift64*), so tests need no RNG crate.
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

/// Distance in units in the last place between two finite f32 of the same sign.
pub fn ulps(a: f32, b: f32) -> u32 {
    if a == b {
        return 0;
    }
    let key = |x: f32| {
        let i = x.to_bits() as i32;
        if i < 0 { i32::MIN - i } else { i }
    };
    (key(a) as i64 - key(b) as i64).unsigned_abs() as u32
}

pub fn unused(_: &mut dyn Memory) {}
