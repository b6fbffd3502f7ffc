//! `am run DEVICE CODE_OBJECT KERNEL --grid X,Y,Z --block X,Y,Z [--arg …]`: run one kernel
//! of a code object through the runtime, with buffers filled from files or patterns, and
//! print or save what it left in them (docs/am-run.md).

use std::path::PathBuf;

use am_runtime::{Arg, Buffer, ComputeCommands, Device, MemKind};
use anyhow::{Context, bail};
use serde::Serialize;

/// Arguments of `am run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Device spec: a PCI BDF, mock:PROFILE[:N], remote:HOST:PORT[:N].
    pub device: String,
    /// An AMDGPU code object (ELF), e.g. from `am compile` or clang.
    pub code_object: PathBuf,
    /// The kernel's name in it.
    pub kernel: String,
    /// Workgroups in x, y, z (`N` or `X,Y` or `X,Y,Z`).
    #[arg(long, value_parser = dims, default_value = "1")]
    pub grid: [u32; 3],
    /// Work-items per workgroup in x, y, z.
    #[arg(long, value_parser = dims, default_value = "64")]
    pub block: [u32; 3],
    /// The kernel's explicit arguments in order (repeat `--arg`): `u32:V`, `i32:V`, `f32:V`,
    /// `u64:V`, `i64:V`, `f64:V`, or a buffer `buf:SIZE` / `buf:@FILE` with options
    /// `:fill=DWORD`, `:iota=u32|i32|f32`, `:rand=SEED`, `:save=FILE`, `:show=u32|i32|f32|hex`.
    #[arg(long = "arg", value_name = "ARG")]
    pub args: Vec<String>,
    /// Launches (the kernel time reported is the median), at least 1.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub repeat: u32,
    /// Values of each shown buffer to print.
    #[arg(long, default_value_t = 16)]
    pub count: usize,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

fn dims(s: &str) -> Result<[u32; 3], String> {
    let parts: Vec<&str> = s.split(',').collect();
    if parts.is_empty() || parts.len() > 3 {
        return Err(format!("`{s}`: give 1 to 3 comma-separated sizes"));
    }
    let mut d = [1u32; 3];
    for (i, p) in parts.iter().enumerate() {
        d[i] = p
            .trim()
            .parse()
            .map_err(|_| format!("`{p}` is not a size"))?;
        if d[i] == 0 {
            return Err(format!("`{s}`: sizes start at 1"));
        }
    }
    Ok(d)
}

/// How to print a buffer's values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
enum Show {
    U32,
    I32,
    F32,
    Hex,
}

impl Show {
    fn parse(s: &str) -> anyhow::Result<Show> {
        Ok(match s {
            "u32" => Show::U32,
            "i32" => Show::I32,
            "f32" => Show::F32,
            "hex" => Show::Hex,
            o => bail!("`{o}`: show as u32, i32, f32 or hex"),
        })
    }

    fn format(self, b: &[u8]) -> Vec<String> {
        b.chunks_exact(4)
            .map(|c| {
                let v = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                match self {
                    Show::U32 => v.to_string(),
                    Show::I32 => (v as i32).to_string(),
                    Show::F32 => format!("{}", f32::from_bits(v)),
                    Show::Hex => format!("{v:#010x}"),
                }
            })
            .collect()
    }
}

/// What a buffer holds before the launch.
#[derive(Debug, Default)]
enum Init {
    #[default]
    Zero,
    /// The bytes of a file (as large as the buffer).
    File(PathBuf),
    /// A repeated dword.
    Fill(u32),
    /// 0, 1, 2, … as u32 (`false`) or f32 (`true`).
    Iota(bool),
    /// Floats in [0, 1) from a generator with this seed.
    Rand(u64),
}

/// A buffer argument, parsed. Nothing of its size is allocated on the host: its contents
/// are made and written a chunk at a time, once the device has taken the size.
#[derive(Debug, Default)]
struct BufSpec {
    size: u64,
    init: Init,
    save: Option<PathBuf>,
    show: Option<Show>,
}

/// Host memory a buffer is made, written, read and saved through.
const CHUNK: usize = 1 << 20;

/// Writes a buffer's initial contents in order, a chunk at a time.
struct Filler<'a> {
    spec: &'a BufSpec,
    file: Option<std::fs::File>,
    /// The generator's state for `Init::Rand`.
    x: u64,
}

impl<'a> Filler<'a> {
    fn new(spec: &'a BufSpec) -> anyhow::Result<Filler<'a>> {
        let file = match &spec.init {
            Init::File(p) => Some(crate::files::open(p)?),
            _ => None,
        };
        let x = match spec.init {
            Init::Rand(seed) => seed,
            _ => 0,
        };
        Ok(Filler { spec, file, x })
    }

    /// The bytes at `at` (a multiple of 4) onwards, into `out`; called in order.
    fn fill(&mut self, at: u64, out: &mut [u8]) -> anyhow::Result<()> {
        if let (Some(f), Init::File(p)) = (&mut self.file, &self.spec.init) {
            return std::io::Read::read_exact(f, out)
                .with_context(|| format!("reading {} (did it shrink?)", p.display()));
        }
        // Iota and rand make whole dwords; bytes past the last one stay 0.
        let whole = self.spec.size / 4 * 4;
        for (k, c) in out.chunks_mut(4).enumerate() {
            let p = at + 4 * k as u64;
            let dword = p + 4 <= whole;
            let word = match self.spec.init {
                Init::Zero | Init::File(_) => [0; 4],
                Init::Fill(d) => d.to_le_bytes(),
                Init::Iota(false) if dword => ((p / 4) as u32).to_le_bytes(),
                Init::Iota(true) if dword => ((p / 4) as f32).to_le_bytes(),
                Init::Rand(_) if dword => {
                    self.x = self
                        .x
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    // Floats in [0, 1): random bits below 2^24, scaled.
                    (((self.x >> 40) as f32) / (1u64 << 24) as f32).to_le_bytes()
                }
                _ => [0; 4],
            };
            c.copy_from_slice(&word[..c.len()]);
        }
        Ok(())
    }
}

/// An argument, parsed.
#[derive(Debug)]
enum ArgSpec {
    Value(Arg),
    Buf(BufSpec),
}

fn parse_arg(s: &str) -> anyhow::Result<ArgSpec> {
    let (kind, rest) = s
        .split_once(':')
        .with_context(|| format!("`{s}`: an argument is TYPE:VALUE or buf:…"))?;
    let num = |what: &str| format!("`{s}`: `{rest}` is not {what}");
    Ok(ArgSpec::Value(match kind {
        "u32" => Arg::U32(
            parse_int(rest)
                .and_then(|v| u32::try_from(v).ok())
                .with_context(|| num("a u32"))?,
        ),
        "i32" => Arg::I32(rest.parse().with_context(|| num("an i32"))?),
        "u64" => Arg::U64(parse_int(rest).with_context(|| num("a u64"))?),
        "i64" => Arg::I64(rest.parse().with_context(|| num("an i64"))?),
        "f32" => Arg::F32(rest.parse().with_context(|| num("an f32"))?),
        "f64" => Arg::F64(rest.parse().with_context(|| num("an f64"))?),
        "buf" => return parse_buf(s, rest).map(ArgSpec::Buf),
        o => bail!("`{s}`: unknown argument type `{o}` (u32, i32, u64, i64, f32, f64, buf)"),
    }))
}

fn parse_int(s: &str) -> Option<u64> {
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(&h.replace('_', ""), 16).ok(),
        None => s.replace('_', "").parse().ok(),
    }
}

/// A size in bytes: a number (`0x…` too) with an optional `KiB`, `MiB`, `GiB` or `TiB`.
fn parse_size(s: &str) -> Option<u64> {
    let units = [("KiB", 10), ("MiB", 20), ("GiB", 30), ("TiB", 40)];
    match units
        .iter()
        .find_map(|&(u, shift)| Some((s.strip_suffix(u)?, shift)))
    {
        Some((n, shift)) => parse_int(n)?.checked_mul(1 << shift),
        None => parse_int(s),
    }
}

fn parse_buf(whole: &str, rest: &str) -> anyhow::Result<BufSpec> {
    let mut parts = rest.split(':');
    let first = parts.next().unwrap_or_default();
    let mut b = BufSpec::default();
    if let Some(path) = first.strip_prefix('@') {
        // Only its size now: the device judges it before anything is read.
        b.size = crate::files::regular_size(std::path::Path::new(path))
            .with_context(|| format!("`{whole}`"))?;
        b.init = Init::File(PathBuf::from(path));
    } else {
        b.size = parse_size(first).filter(|&n| n > 0).with_context(|| {
            format!("`{whole}`: `{first}` is not a size in bytes (N, NKiB … NTiB, or @FILE)")
        })?;
    }
    for opt in parts {
        let (k, v) = opt
            .split_once('=')
            .with_context(|| format!("`{whole}`: option `{opt}` is KEY=VALUE"))?;
        match k {
            "fill" => {
                let d = parse_int(v)
                    .and_then(|x| u32::try_from(x).ok())
                    .with_context(|| format!("`{whole}`: fill `{v}` is not a dword"))?;
                b.init = Init::Fill(d);
            }
            "iota" => {
                b.init = match v {
                    "u32" | "i32" => Init::Iota(false),
                    "f32" => Init::Iota(true),
                    o => bail!("`{whole}`: iota of u32, i32 or f32, not `{o}`"),
                };
            }
            "rand" => {
                let seed = parse_int(v)
                    .with_context(|| format!("`{whole}`: seed `{v}` is not a number"))?;
                b.init = Init::Rand(seed);
            }
            "save" => b.save = Some(PathBuf::from(v)),
            "show" => b.show = Some(Show::parse(v)?),
            o => bail!("`{whole}`: unknown buffer option `{o}` (fill, iota, rand, save, show)"),
        }
    }
    Ok(b)
}

/// Write `spec`'s initial contents into `buf`, a chunk at a time.
fn fill(dev: &Device, buf: &Buffer, spec: &BufSpec) -> anyhow::Result<()> {
    let mut filler = Filler::new(spec)?;
    let mut chunk = vec![0u8; CHUNK.min(spec.size as usize)];
    let mut at = 0u64;
    while at < spec.size {
        let n = (spec.size - at).min(CHUNK as u64) as usize;
        filler.fill(at, &mut chunk[..n])?;
        dev.write(buf, at, &chunk[..n])?;
        at += n as u64;
    }
    Ok(())
}

/// Save `buf` into `path`, a chunk at a time.
fn save(dev: &Device, buf: &Buffer, size: u64, path: &std::path::Path) -> anyhow::Result<()> {
    use std::io::Write;
    let writing = || format!("writing {}", path.display());
    let mut f = std::fs::File::create(path).with_context(writing)?;
    let mut chunk = vec![0u8; CHUNK.min(size as usize)];
    let mut at = 0u64;
    while at < size {
        let n = (size - at).min(CHUNK as u64) as usize;
        dev.read(buf, at, &mut chunk[..n])?;
        f.write_all(&chunk[..n]).with_context(writing)?;
        at += n as u64;
    }
    Ok(())
}

/// One buffer in the JSON output.
#[derive(Debug, Serialize)]
struct BufOut {
    arg: usize,
    va: String,
    bytes: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    saved: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    show: Option<Show>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    values: Vec<String>,
}

/// What `am run --json` prints.
#[derive(Debug, Serialize)]
struct RunOut {
    device: String,
    target: String,
    kernel: String,
    grid: [u32; 3],
    block: [u32; 3],
    launches: u32,
    kernel_us_median: f64,
    buffers: Vec<BufOut>,
}

/// Run `am run`.
pub fn run(a: RunArgs) -> anyhow::Result<()> {
    let specs: Vec<ArgSpec> = a
        .args
        .iter()
        .map(|s| parse_arg(s))
        .collect::<anyhow::Result<_>>()?;
    let co = crate::files::read(&a.code_object)?;
    am_mock::register();
    let dev = Device::open(&a.device).with_context(|| format!("opening {}", a.device))?;
    let prog = dev.load(&co, &a.kernel)?;
    let takes = prog.explicit_args().count();
    if takes != specs.len() {
        let list: Vec<String> = prog
            .explicit_args()
            .map(|x| format!("{} ({} bytes, {})", x.name, x.size, x.value_kind))
            .collect();
        bail!(
            "kernel {} takes {takes} arguments, {} given: {}",
            a.kernel,
            specs.len(),
            list.join(", ")
        );
    }
    // Sizes and the launch go to the device first: what it refuses is refused before a
    // buffer is filled.
    let mut args = Vec::with_capacity(specs.len());
    let mut bufs: Vec<(usize, &BufSpec, Buffer)> = Vec::new();
    for (i, s) in specs.iter().enumerate() {
        match s {
            ArgSpec::Value(v) => args.push(v.clone()),
            ArgSpec::Buf(b) => {
                let buf = dev
                    .alloc(b.size, MemKind::Vram)
                    .with_context(|| format!("`{}`", a.args[i]))?;
                args.push(Arg::from(&buf));
                bufs.push((i, b, buf));
            }
        }
    }
    dev.set_profiling(true);
    let mut c = ComputeCommands::new(&dev);
    c.exec(&prog, &args, a.grid, a.block)?;
    for (i, spec, buf) in &bufs {
        fill(&dev, buf, spec).with_context(|| format!("`{}`", a.args[*i]))?;
    }
    let mut times = Vec::new();
    for _ in 0..a.repeat {
        c.submit()?.wait()?;
        times.extend(dev.profile()?.iter().map(|e| e.nanos() as f64 / 1000.0));
    }
    times.sort_by(f64::total_cmp);
    let median = times.get(times.len() / 2).copied().unwrap_or(0.0);
    let mut out = Vec::new();
    for (i, spec, buf) in &bufs {
        let saved = match &spec.save {
            Some(p) => {
                save(&dev, buf, spec.size, p)?;
                Some(p.display().to_string())
            }
            None => None,
        };
        let values = match spec.show {
            Some(s) => {
                let n = a.count.min((spec.size / 4) as usize);
                let mut bytes = vec![0u8; 4 * n];
                dev.read(buf, 0, &mut bytes)?;
                Some(s.format(&bytes))
            }
            None => None,
        };
        out.push(BufOut {
            arg: *i,
            va: format!("{:#x}", buf.va()),
            bytes: spec.size,
            saved,
            show: spec.show,
            values: values.unwrap_or_default(),
        });
    }
    let r = RunOut {
        device: dev.name().into(),
        target: dev.info().target.to_string(),
        kernel: a.kernel.clone(),
        grid: a.grid,
        block: a.block,
        launches: a.repeat,
        kernel_us_median: median,
        buffers: out,
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        println!(
            "{} on {} ({}): grid {:?} × block {:?}, {} launch{}, kernel {:.1} µs (median, GPU clock)",
            r.kernel,
            r.device,
            r.target,
            r.grid,
            r.block,
            r.launches,
            if r.launches == 1 { "" } else { "es" },
            r.kernel_us_median
        );
        for b in &r.buffers {
            let mut line = format!("  arg {}: {} bytes at {}", b.arg, b.bytes, b.va);
            if let Some(p) = &b.saved {
                line += &format!(", saved to {p}");
            }
            println!("{line}");
            if !b.values.is_empty() {
                println!("    {}", b.values.join(" "));
            }
        }
    }
    dev.close()?;
    Ok(())
}
