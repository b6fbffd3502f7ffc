//! `am compile FILE --target T [-o OUT] [--emit llvm|asm] [--json] [--no-cache]`: compile a
//! kernel written in the IR's text form (docs/am-compile.md).

use std::path::{Path, PathBuf};

use am_compiler::{Cache, Compiler, Target, codegen, lower, read_metadata, text};
use anyhow::Context;

/// What to write instead of the program.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Emit {
    /// The LLVM IR the kernel lowers to (before LLVM's optimisation), with the target's data
    /// layout.
    Llvm,
    /// The assembly LLVM generates (after optimisation).
    Asm,
}

/// Arguments of `am compile`.
#[derive(Debug, clap::Args)]
pub struct CompileArgs {
    /// The kernel in the IR's text form.
    pub file: PathBuf,
    /// A GPU target (gfx1100, gfx942, gfx950, gfx1200, …) or cpu.
    #[arg(long, default_value = "gfx1100")]
    pub target: String,
    /// Output file (default: FILE with the extension .hsaco, or .cpu for the cpu target;
    /// standard output for --emit).
    #[arg(short = 'o', long)]
    pub output: Option<PathBuf>,
    /// Write LLVM IR or assembly instead of the program.
    #[arg(long, value_enum)]
    pub emit: Option<Emit>,
    /// Print a JSON summary instead of text.
    #[arg(long)]
    pub json: bool,
    /// Neither read nor write the compile cache ($XDG_CACHE_HOME/am).
    #[arg(long)]
    pub no_cache: bool,
}

/// Run `am compile`.
pub fn run(args: CompileArgs) -> anyhow::Result<()> {
    let target: Target = args.target.parse()?;
    let what = args.file.display().to_string();
    let src = crate::files::read_to_string(&args.file)?;
    let kernel = text::parse(&src, &what)?;
    if let Some(emit) = args.emit {
        let out = match emit {
            Emit::Llvm => {
                let ir = lower::lower(&kernel, target)?;
                format!(
                    "target datalayout = \"{}\"\n{ir}",
                    codegen::datalayout(target)?
                )
            }
            Emit::Asm => {
                let ir = lower::lower(&kernel, target)?;
                let asm =
                    codegen::compile_ir(&ir, target, &kernel.name, codegen::Output::Assembly)?;
                String::from_utf8_lossy(&asm).into_owned()
            }
        };
        return match &args.output {
            Some(p) => std::fs::write(p, out).with_context(|| format!("writing {}", p.display())),
            None => {
                print!("{out}");
                Ok(())
            }
        };
    }
    let cache = if args.no_cache {
        Cache::new(None)
    } else {
        Cache::new(Cache::default_dir())
    };
    let compiler = Compiler::with_cache(cache);
    let t = std::time::Instant::now();
    let program = compiler.compile(&kernel, target)?;
    let ms = t.elapsed().as_secs_f64() * 1e3;
    let stats = compiler.cache().stats();
    let source = if stats.memory_hits + stats.disk_hits > 0 {
        "cache"
    } else {
        "compiled"
    };
    let out = args
        .output
        .clone()
        .unwrap_or_else(|| default_output(&args.file, target));
    std::fs::write(&out, &program.bytes).with_context(|| format!("writing {}", out.display()))?;
    let md = if target.is_gpu() {
        read_metadata(&program.bytes, &kernel.name)?
            .into_iter()
            .next()
    } else {
        None
    };
    if args.json {
        let mut v = serde_json::json!({
            "kernel": kernel.name, "target": target.name(), "output": out.display().to_string(),
            "bytes": program.bytes.len(), "milliseconds": ms, "from": source,
            "workgroup": kernel.workgroup,
        });
        if let Some(m) = &md {
            v["metadata"] = serde_json::json!({
                "kernarg_segment_size": m.kernarg_segment_size,
                "group_segment_fixed_size": m.group_segment_fixed_size,
                "private_segment_fixed_size": m.private_segment_fixed_size,
                "wavefront_size": m.wavefront_size,
                "sgpr_count": m.sgpr_count, "vgpr_count": m.vgpr_count,
                "args": m.args.iter().map(|a| serde_json::json!({
                    "offset": a.offset, "size": a.size, "value_kind": a.value_kind,
                })).collect::<Vec<_>>(),
            });
        }
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        println!(
            "{}: kernel {} for {target}: {} bytes ({source}, {ms:.2} ms)",
            out.display(),
            kernel.name,
            program.bytes.len()
        );
        if let Some(m) = &md {
            println!(
                "  wave{} | kernargs {} B | LDS {} B | scratch {} B/lane | {} SGPRs, {} VGPRs",
                m.wavefront_size,
                m.kernarg_segment_size,
                m.group_segment_fixed_size,
                m.private_segment_fixed_size,
                m.sgpr_count,
                m.vgpr_count
            );
        }
    }
    Ok(())
}

fn default_output(file: &Path, target: Target) -> PathBuf {
    file.with_extension(if target.is_gpu() { "hsaco" } else { "cpu" })
}
