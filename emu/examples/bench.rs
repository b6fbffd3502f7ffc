//! Interpreter throughput: wave-instructions per second on a compute-bound kernel, one core.
//!
//! Compiles the `spin` kernel of `tests/kernels/kernels.cl` with clang-22 (run
//! `scripts/setup` first), then times dispatches of it:
//!
//! ```text
//! cargo run --release -p am-emu --example bench [ITERS] [WORKGROUPS]
//! ```

use am_emu::{CodeObject, HostMemory, Isa, Launch, Program};
use std::process::Command;
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let iters: u32 = args.next().map(|a| a.parse()).transpose()?.unwrap_or(2000);
    let groups: u32 = args.next().map(|a| a.parse()).transpose()?.unwrap_or(8);
    let dir = std::env::temp_dir().join(format!("am-emu-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let cl = dir.join("k.cl");
    std::fs::write(&cl, include_str!("../tests/kernels/kernels.cl"))?;
    let status = Command::new("clang-22")
        .args([
            "-x",
            "cl",
            "-cl-std=CL2.0",
            "--target=amdgcn-amd-amdhsa",
            "-mcpu=gfx1100",
        ])
        .args(["-nogpulib", "-O3", "-c"])
        .arg(&cl)
        .arg("-o")
        .arg(dir.join("k.o"))
        .status()
        .map_err(|e| format!("clang-22: {e} (run scripts/setup)"))?;
    if !status.success() {
        return Err("clang-22 failed".into());
    }
    let status = Command::new("ld.lld-22")
        .arg("-shared")
        .arg(dir.join("k.o"))
        .arg("-o")
        .arg(dir.join("k.hsaco"))
        .status()?;
    if !status.success() {
        return Err("ld.lld-22 failed".into());
    }
    let bytes = std::fs::read(dir.join("k.hsaco"))?;
    let _ = std::fs::remove_dir_all(&dir);
    let co = CodeObject::parse(&bytes, "kernels.cl")?;
    let prog = Program::new(&co, Isa::Gfx1100)?;
    let k = co.kernel("spin")?;

    let mut mem = HostMemory::new();
    let out = mem.alloc(4 * 256 * groups as usize);
    let mut kernarg = vec![0u8; k.descriptor.kernarg_size.max(16) as usize];
    kernarg[..8].copy_from_slice(&out.to_le_bytes());
    kernarg[8..12].copy_from_slice(&iters.to_le_bytes());
    let ka = mem.alloc_bytes(&kernarg);
    let launch = Launch::new([256 * groups, 1, 1], [256, 1, 1], ka);

    // One warm-up dispatch, then the best of three. On a shared machine the wall clock
    // counts time other processes held the core, so the CPU time of this thread (from
    // /proc/thread-self/schedstat, in ns) is reported too; it is the one-core figure.
    am_emu::dispatch(&prog, k, &launch, &mut mem)?;
    let (mut best_wall, mut best_cpu) = (f64::INFINITY, f64::INFINITY);
    let mut stats = None;
    for _ in 0..3 {
        let (t, c) = (Instant::now(), cpu_ns());
        let s = am_emu::dispatch(&prog, k, &launch, &mut mem)?;
        best_wall = best_wall.min(t.elapsed().as_secs_f64());
        if let (Some(a), Some(b)) = (c, cpu_ns()) {
            best_cpu = best_cpu.min((b - a) as f64 / 1e9);
        }
        stats = Some(s);
    }
    let s = stats.ok_or("no run")?;
    let n = s.instructions as f64;
    println!(
        "spin: {groups} workgroups x 256 work-items (wave{}), {iters} iterations: {} wave-instructions",
        k.descriptor.wave_size(),
        s.instructions
    );
    println!(
        "  wall: {best_wall:.3} s = {:.1} M wave-instructions/s",
        n / best_wall / 1e6
    );
    if best_cpu.is_finite() {
        println!(
            "  cpu:  {best_cpu:.3} s = {:.1} M wave-instructions/s (one core)",
            n / best_cpu / 1e6
        );
    }
    Ok(())
}

/// CPU time of this thread in nanoseconds (Linux schedstat), if available.
fn cpu_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}
