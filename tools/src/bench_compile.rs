//! `am bench compile`: compile latency of an elementwise kernel and a tiled matmul (cold,
//! cache hit in memory and on disk, per stage, against running `llc-22` + `ld.lld-22`), the
//! CPU backend's load time, and the tiled matmul's wave-instructions per output against the
//! naive loop on the emulated gfx1100. Numbers go to docs/BENCHMARKS.md.

use std::process::Command;
use std::time::{Duration, Instant};

use am_compiler::{
    Cache, Compiler, CpuProgram, DType, GfxTarget, Kernel, Target, cache, codegen, lower, shapes,
};
use am_emu::{CodeObject, HostMemory, Isa, Launch, Program};
use anyhow::{Context, bail};

/// (min, median) of `n` runs of `f`, in microseconds.
fn measure(n: u32, mut f: impl FnMut() -> anyhow::Result<()>) -> anyhow::Result<(f64, f64)> {
    let mut t = Vec::with_capacity(n as usize);
    for _ in 0..n.max(1) {
        let s = Instant::now();
        f()?;
        t.push(s.elapsed());
    }
    t.sort();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    Ok((us(t[0]), us(t[t.len() / 2])))
}

/// Run the benchmark.
pub fn run(iterations: u32, json: bool) -> anyhow::Result<()> {
    let kernels: [(&str, Kernel); 2] = [
        (
            "elementwise add (f32, 256 work-items/group)",
            shapes::elementwise_add(DType::F32, 256),
        ),
        (
            "tiled matmul (16x16 tiles in LDS)",
            shapes::matmul_tiled(16),
        ),
    ];
    let dir = std::env::temp_dir().join(format!("am-bench-compile-{}", std::process::id()));
    let mut rows = vec![];
    // LLVM's one-time set-up (target registration) is not part of a compile.
    cache::compile(&kernels[0].1, Target::Gpu(GfxTarget::Gfx1100))?;
    for (label, k) in &kernels {
        for target in [
            Target::Gpu(GfxTarget::Gfx1100),
            Target::Gpu(GfxTarget::Gfx942),
            Target::Cpu,
        ] {
            let cold = measure(iterations, || Ok(cache::compile(k, target).map(drop)?))?;
            let ir = lower::lower(k, target)?;
            let lowering = measure(iterations, || Ok(lower::lower(k, target).map(drop)?))?;
            let llvm = measure(iterations, || {
                Ok(codegen::compile_ir(&ir, target, &k.name, codegen::Output::Object).map(drop)?)
            })?;
            let obj = codegen::compile_ir(&ir, target, &k.name, codegen::Output::Object)?;
            let linking = if target.is_gpu() {
                Some(measure(iterations, || {
                    Ok(am_isa::code_object::link(&obj, &k.name).map(drop)?)
                })?)
            } else {
                None
            };
            // Cache hits: in memory (the key is SHA-256 of the kernel's text form), and on
            // disk with the memory forgotten each time.
            let c = Compiler::with_cache(Cache::new(Some(dir.clone())));
            let program = c.compile(k, target)?;
            let memory_hit = measure(iterations.max(1000), || {
                Ok(c.compile(k, target).map(drop)?)
            })?;
            let disk_hit = measure(iterations, || {
                c.cache().clear_memory();
                Ok(c.compile(k, target).map(drop)?)
            })?;
            let cpu_load = if target == Target::Cpu {
                Some(measure(iterations, || {
                    Ok(CpuProgram::load(&program.bytes).map(drop)?)
                })?)
            } else {
                None
            };
            let subprocess = if target == Target::Gpu(GfxTarget::Gfx1100) {
                Some(measure(iterations.min(10), || {
                    subprocess_compile(&ir, target, &dir).map(drop)
                })?)
            } else {
                None
            };
            rows.push(serde_json::json!({
                "kernel": label, "target": target.name(),
                "cold_us": {"min": cold.0, "median": cold.1},
                "lower_us": {"min": lowering.0, "median": lowering.1},
                "llvm_us": {"min": llvm.0, "median": llvm.1},
                "link_us": linking.map(|l| serde_json::json!({"min": l.0, "median": l.1})),
                "memory_hit_us": {"min": memory_hit.0, "median": memory_hit.1},
                "disk_hit_us": {"min": disk_hit.0, "median": disk_hit.1},
                "cpu_load_us": cpu_load.map(|l| serde_json::json!({"min": l.0, "median": l.1})),
                "llc_lld_subprocess_us": subprocess.map(|l| serde_json::json!({"min": l.0, "median": l.1})),
                "bytes": program.bytes.len(),
            }));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    let matmul = matmul_instructions()?;
    if json {
        let v = serde_json::json!({"iterations": iterations, "compile": rows, "matmul": matmul});
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    println!("compile latency, {iterations} iterations each: min / median in µs");
    for r in &rows {
        let f = |k: &str| match (&r[k]["min"], &r[k]["median"]) {
            (serde_json::Value::Number(a), serde_json::Value::Number(b)) => format!(
                "{:.1} / {:.1}",
                a.as_f64().unwrap_or(0.0),
                b.as_f64().unwrap_or(0.0)
            ),
            _ => "-".into(),
        };
        println!(
            "{} for {}:",
            r["kernel"].as_str().unwrap_or(""),
            r["target"].as_str().unwrap_or("")
        );
        println!(
            "  cold {} (lower {}, LLVM {}, link {}) | cache hit: memory {}, disk {}",
            f("cold_us"),
            f("lower_us"),
            f("llvm_us"),
            f("link_us"),
            f("memory_hit_us"),
            f("disk_hit_us")
        );
        if r["cpu_load_us"].is_object() {
            println!("  cpu program load (ORC JIT) {}", f("cpu_load_us"));
        }
        if r["llc_lld_subprocess_us"].is_object() {
            println!(
                "  for comparison, llc-22 + ld.lld-22 as processes: {}",
                f("llc_lld_subprocess_us")
            );
        }
    }
    println!(
        "matmul {n}x{n} on the emulated gfx1100: wave-instructions per output: tiled {:.1}, naive {:.1}",
        matmul["tiled_per_output"].as_f64().unwrap_or(0.0),
        matmul["naive_per_output"].as_f64().unwrap_or(0.0),
        n = matmul["n"]
    );
    Ok(())
}

/// The other way to compile: LLVM IR to a file, `llc-22`, `ld.lld-22`.
fn subprocess_compile(ir: &str, target: Target, dir: &std::path::Path) -> anyhow::Result<Vec<u8>> {
    std::fs::create_dir_all(dir)?;
    let (ll, o, hsaco) = (dir.join("k.ll"), dir.join("k.o"), dir.join("k.hsaco"));
    std::fs::write(&ll, ir)?;
    let llc = Command::new("llc-22")
        .args([
            "-mtriple=amdgcn-amd-amdhsa",
            &format!("-mcpu={target}"),
            "-O3",
            "-filetype=obj",
        ])
        .arg(&ll)
        .arg("-o")
        .arg(&o)
        .status()
        .context("running llc-22 (scripts/setup installs it)")?;
    let lld = Command::new("ld.lld-22")
        .arg("-shared")
        .arg(&o)
        .arg("-o")
        .arg(&hsaco)
        .status()?;
    if !llc.success() || !lld.success() {
        bail!("llc-22 or ld.lld-22 failed");
    }
    Ok(std::fs::read(&hsaco)?)
}

/// Wave-instructions per output of the tiled and the naive matmul (n = 64, 16×16 groups).
fn matmul_instructions() -> anyhow::Result<serde_json::Value> {
    let (n, t) = (64u32, 16u32);
    let mut per_output = vec![];
    for k in [shapes::matmul_tiled(t), shapes::matmul_naive(t)] {
        let bytes = cache::compile(&k, Target::Gpu(GfxTarget::Gfx1100))?;
        let co = CodeObject::parse(&bytes, &k.name)?;
        let prog = Program::new(&co, Isa::Gfx1100)?;
        let kern = co.kernel(&k.name)?;
        let mut mem = HostMemory::new();
        let len = (n * n) as usize * 4;
        let a = mem.alloc_bytes(&vec![0x3f; len]);
        let b = mem.alloc_bytes(&vec![0x3e; len]);
        let c = mem.alloc(len);
        let mut args = vec![0u8; 128];
        for (i, p) in [a, b, c].iter().enumerate() {
            args[8 * i..8 * i + 8].copy_from_slice(&p.to_le_bytes());
        }
        args[24..28].copy_from_slice(&n.to_le_bytes());
        let ka = mem.alloc_bytes(&args);
        let stats = am_emu::dispatch(
            &prog,
            kern,
            &Launch::new([n, n, 1], [t, t, 1], ka),
            &mut mem,
        )?;
        per_output.push(stats.instructions as f64 / f64::from(n * n));
    }
    Ok(
        serde_json::json!({"n": n, "tile": t, "tiled_per_output": per_output[0], "naive_per_output": per_output[1]}),
    )
}
