//! The verifier rejects each kind of malformed kernel with an error naming the instruction;
//! the text form round-trips and its parser reports errors with line and column (and never
//! panics on any input); the code object is a loadable HSA code object; the cache survives
//! corrupt entries.

use crate::common;
use am_compiler::*;
use common::*;
use proptest::prelude::*;

/// A valid header and body wrapped around `body` (which may use %p: ptr<global, f32>,
/// %q: ptr<global, i32>, %n: u32).
fn kernel_text(body: &str) -> String {
    format!(
        "kernel k(%p: ptr<global, f32>, %q: ptr<global, i32>, %n: u32) workgroup(64, 1, 1) {{\n  %i = local_id x\n  %f = const f32 1.5\n  %c = const i32 3\n{body}\n}}\n"
    )
}

#[test]
fn verifier_rejects_each_malformed_kind_naming_the_instruction() {
    // (body, a fragment of the offending instruction, a fragment of the reason)
    let cases = [
        ("  %x = add %f, %c", "add %", "operand types differ"),
        ("  %x = rem %f, %f", "rem %", "does not apply to f32"),
        ("  %x = shl %f, %f", "shl %", "does not apply"),
        ("  %x = not %f", "not %", "does not apply"),
        ("  %x = sqrt %c", "sqrt %", "does not apply to i32"),
        (
            "  %d = const f64 2.0\n  %x = exp2 %d",
            "exp2 %",
            "device libraries",
        ),
        ("  %x = fma %c, %c, %c", "fma", "three floats"),
        (
            "  %b = const bool true\n  %x = lt %b, %b",
            "lt %",
            "bools compare only",
        ),
        ("  %x = where %f, %f, %f", "where", "condition must be bool"),
        ("  %x = bitcast %c : f64", "bitcast", "between sizes"),
        (
            "  %b = const bool true\n  %x = bitcast %b : u8",
            "bitcast",
            "bool has no bit layout",
        ),
        ("  %x = cast %f : f32x4", "cast", "lane count"),
        ("  %x = extract %f, 0", "extract", "lane 0 of f32"),
        ("  %x = vector %f, %c", "vector", "is i32, not f32"),
        ("  %x = load %n[%i] : f32", "load", "is not a pointer"),
        (
            "  %x = load %p[%f] : f32",
            "load",
            "index must be an integer",
        ),
        (
            "  %x = load %p[%i] : i32",
            "load",
            "does not match the pointer",
        ),
        ("  %x = load %p[%i] : f32 align 3", "load", "power of two"),
        ("  store %p[%i], %c", "store", "does not match"),
        ("  %x = atomic add %p[%i], %c", "atomic", "does not match"),
        (
            "  %l = private i32 x 4\n  %x = atomic add %l[%i], %c",
            "atomic add",
            "global or local",
        ),
        (
            "  %x = atomic min %p[%i], %f",
            "atomic min",
            "does not apply to f32",
        ),
        (
            "  %b = const bool true\n  if %b {\n    %l = local f32 x 4\n  }",
            "local f32",
            "top level",
        ),
        (
            "  %l = local f32 x 0",
            "local f32 x 0",
            "at least one element",
        ),
        (
            "  %l = local f32 x 20000",
            "(kernel header)",
            "more than 65536",
        ),
        ("  %l = private f32 x 10000", "private", "more than 16384"),
        (
            "  %z = const u32 0\n  range %j = %z to %f {\n  }",
            "range",
            "one integer type",
        ),
        (
            "  %z = const u32 0\n  range %j = %z to %n step 0 {\n  }",
            "range",
            "step 0",
        ),
        ("  if %c {\n  }", "if %", "condition must be bool"),
        ("  %x = const i8 300", "", "not a constant of type i8"),
    ];
    for (body, inst, reason) in cases {
        let src = kernel_text(body);
        let e = text::parse(&src, "t.amk").expect_err(body).to_string();
        assert!(
            e.contains(inst) && e.contains(reason),
            "for {body:?}: error {e:?} should name {inst:?} and say {reason:?}"
        );
    }
}

#[test]
fn verifier_rejects_scope_and_definition_errors_built_in_rust() {
    // A value used outside the body that defines it.
    let mut b = KernelBuilder::new("scope", [1, 1, 1]);
    let p = b.param_ptr("p", DType::U32, false);
    let t = b.const_bool(true);
    let mut inner = None;
    b.if_(t, |b| inner = Some(b.const_u32(7)));
    let z = b.const_u32(0);
    b.store_elem(p, z, inner.unwrap());
    let e = b.finish().unwrap_err().to_string();
    assert!(
        e.contains("store %p[%3], %2") && e.contains("not defined before it"),
        "{e}"
    );
    // A value the builder never made.
    let mut b = KernelBuilder::new("ghost", [1, 1, 1]);
    let p = b.param_ptr("p", DType::U32, false);
    let z = b.const_u32(0);
    b.store_elem(p, z, Value(99));
    let e = b.finish().unwrap_err().to_string();
    assert!(e.contains("%99"), "{e}");
    // Kernel header rules.
    for (wg, name, why) in [
        ([0, 1, 1], "k", "workgroup"),
        ([64, 32, 1], "k", "at most 1024"),
        ([1, 1, 1], "9k", "kernel name"),
    ] {
        let e = KernelBuilder::new(name, wg)
            .finish()
            .unwrap_err()
            .to_string();
        assert!(e.contains(why), "{e}");
    }
    let mut b = KernelBuilder::new("params", [1, 1, 1]);
    b.param("x", DType::vec(Scalar::F32, 4));
    let e = b.finish().unwrap_err().to_string();
    assert!(
        e.contains("parameters are scalars or global pointers"),
        "{e}"
    );
    let mut b = KernelBuilder::new("dup", [1, 1, 1]);
    b.param("x", DType::F32);
    b.param("x", DType::F32);
    assert!(b.finish().unwrap_err().to_string().contains("repeated"));
}

#[test]
fn parser_errors_carry_line_and_column() {
    let cases = [
        (
            "kernel k() workgroup(1, 1, 1) {\n  %x = frobnicate %y\n}",
            2,
            8,
            "unknown instruction `frobnicate`",
        ),
        (
            "kernel k() workgroup(1, 1, 1) {\n  %x = add %y, %y\n}",
            2,
            12,
            "%y is not defined",
        ),
        (
            "kernel k() workgroup(1, 1, 1) {\n  %x = const f32 1.0\n  %x = const f32 2.0\n}",
            3,
            3,
            "defined twice",
        ),
        (
            "kernel k(%a: ptr<shared, f32>) workgroup(1, 1, 1) {}",
            1,
            18,
            "unknown memory space",
        ),
        (
            "kernel k() workgroup(1, 1, 1) {\n  barrier\n",
            3,
            1,
            "missing `}`",
        ),
        ("kernel k() workgroup(1, 1) {}", 1, 26, "expected `,`"),
        (
            "kernel k() workgroup(1, 1, 1) {\n  %x = const f17 1\n}",
            2,
            14,
            "unknown type `f17`",
        ),
        (
            "kernel k() workgroup(1, 1, 1) {\n  store %x\n}",
            2,
            9,
            "not defined",
        ),
        (
            "kernel k() workgroup(1, 1, 1) {} trailing",
            1,
            34,
            "after the kernel",
        ),
        (
            "kernel k() workgroup(1, 1, 1) { $ }",
            1,
            33,
            "unexpected character",
        ),
    ];
    for (src, line, col, what) in cases {
        match text::parse(src, "bad.amk") {
            Err(Error::Parse {
                file,
                line: l,
                col: c,
                reason,
            }) => {
                assert_eq!(file, "bad.amk");
                assert!(
                    reason.contains(what),
                    "{src:?}: reason {reason:?} should contain {what:?}"
                );
                assert_eq!((l, c), (line, col), "{src:?}: position of {reason:?}");
            }
            other => panic!("{src:?}: expected a parse error, got {other:?}"),
        }
    }
}

#[test]
fn every_constant_prints_and_parses_back_exactly() {
    let mut b = KernelBuilder::new("consts", [1, 1, 1]);
    let vals: [(DType, u64); 16] = [
        (DType::F32, 0x7f80_0001),           // signalling NaN
        (DType::F32, 0x8000_0000),           // -0
        (DType::F32, 1),                     // smallest subnormal
        (DType::F32, 0xff80_0000),           // -inf
        (DType::F32, 0x3eaa_aaab),           // 1/3
        (DType::F64, 0x3fd5_5555_5555_5555), // 1/3
        (DType::F64, 0x7ff8_0000_0000_0000), // NaN
        (DType::F16, 0x3555),                // 1/3
        (DType::F16, 0x0001),
        (DType::scalar(Scalar::BF16), 0x3eab),
        (DType::I64, i64::MIN as u64),
        (DType::scalar(Scalar::U64), u64::MAX),
        (DType::scalar(Scalar::I8), 0x80),
        (DType::BOOL, 1),
        (DType::vec(Scalar::F32, 4), 0x4049_0fdb),
        (DType::vec(Scalar::U16, 8), 0xffff),
    ];
    for (d, bits) in vals {
        b.constant(d, bits);
    }
    let k = b.finish().unwrap();
    let t = text::print(&k);
    assert_eq!(text::parse(&t, "consts").unwrap(), k, "{t}");
}

#[test]
fn kernels_from_the_builder_round_trip_through_text() {
    for k in [
        shapes::elementwise_add(DType::F32, 256),
        shapes::reduce_sum(256),
        shapes::matmul_tiled(16),
        shapes::matmul_naive(16),
    ] {
        let t = text::print(&k);
        let back = text::parse(&t, &k.name).unwrap_or_else(|e| panic!("{e}\n{t}"));
        assert_eq!(back, k, "{t}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, .. ProptestConfig::default() })]
    /// Random edits of a valid kernel's text: the parser and verifier return errors, never panic.
    #[test]
    fn parser_and_verifier_never_panic(cut in 0usize..400, junk in "[ -~\n]{0,12}", drop in 0usize..40) {
        let src = text::print(&shapes::reduce_sum(64));
        let cut = cut.min(src.len());
        let mut s: String = src.chars().take(cut).collect();
        s.push_str(&junk);
        s.extend(src.chars().skip(cut + drop));
        let _ = text::parse(&s, "fuzz");
    }
}

#[test]
fn code_objects_are_hsa_shared_objects_with_metadata() {
    let k = shapes::reduce_sum(256);
    for target in [
        Target::Gpu(GfxTarget::Gfx1100),
        Target::Gpu(GfxTarget::Gfx942),
        Target::Gpu(GfxTarget::Gfx950),
    ] {
        let c = compiler().compile(&k, target).unwrap();
        let elf = goblin_check(&c.bytes);
        assert_eq!(elf, (3, 224, 64), "{target}: ET_DYN, EM_AMDGPU, OS/ABI HSA");
        let md = read_metadata(&c.bytes, "reduce").unwrap();
        assert_eq!(md.len(), 1);
        let m = &md[0];
        assert_eq!(m.name, k.name);
        assert_eq!(m.symbol, format!("{}.kd", k.name));
        assert_eq!(m.wavefront_size, target.wave_size(), "{target}");
        assert_eq!(
            m.group_segment_fixed_size,
            256 * 4,
            "{target}: the LDS array"
        );
        assert_eq!(m.max_flat_workgroup_size, 256);
        // The explicit arguments at the offsets the IR's layout gives, and no hidden ones.
        let layout = k.arg_layout();
        let explicit: Vec<(u32, u32)> = m.args.iter().map(|a| (a.offset, a.size)).collect();
        assert_eq!(explicit, layout, "{target}: argument layout");
        assert_eq!(m.kernarg_segment_size, k.args_size(), "{target}");
        assert_eq!(m.args[0].value_kind, "global_buffer");
    }
    // The emulator's loader reads the descriptor the linker relocated.
    let c = compiler()
        .compile(&k, Target::Gpu(GfxTarget::Gfx1100))
        .unwrap();
    let co = am_emu::CodeObject::parse(&c.bytes, "reduce").unwrap();
    let kern = co.kernel(&k.name).unwrap();
    assert_eq!(kern.descriptor.wave_size(), 32);
    assert!(kern.entry >= co.text_address && kern.entry < co.text_address + co.text.len() as u64);
}

#[test]
fn every_gpu_target_compiles_for_its_own_processor_and_wave_size() {
    let k = shapes::elementwise_add(DType::F32, 64);
    for g in GfxTarget::ALL {
        let c = compiler().compile(&k, Target::Gpu(g)).unwrap();
        let co = am_isa::CodeObject::parse(&c.bytes, &k.name).unwrap();
        assert_eq!(co.target, Some(g), "e_flags of the {g} code object");
        let kd = co.kernel(&k.name).unwrap().descriptor;
        assert_eq!(kd.wave_size(), g.wave_size(), "{g}");
    }
    assert_eq!(
        "gfx1101".parse::<Target>().unwrap(),
        Target::Gpu(GfxTarget::Gfx1101)
    );
    assert_eq!("cpu".parse::<Target>().unwrap(), Target::Cpu);
    let e = "gfx9000".parse::<Target>().unwrap_err().to_string();
    assert!(
        e.contains("unknown target `gfx9000`") && e.ends_with("gfx1201, cpu)"),
        "{e}"
    );
}

/// (e_type, e_machine, OS/ABI) of an ELF file.
fn goblin_check(b: &[u8]) -> (u16, u16, u8) {
    (
        u16::from_le_bytes([b[16], b[17]]),
        u16::from_le_bytes([b[18], b[19]]),
        b[7],
    )
}

#[test]
fn cdna_code_agrees_with_llvm_objdump() {
    // The emulator cannot run gfx942/gfx950 yet: check that LLVM's own disassembler reads
    // our linked code objects as wave64 CDNA code with the kernel and its descriptor.
    let k = shapes::reduce_sum(256);
    let dir = tempdir("objdump");
    for target in [
        Target::Gpu(GfxTarget::Gfx942),
        Target::Gpu(GfxTarget::Gfx950),
    ] {
        let c = compiler().compile(&k, target).unwrap();
        let path = dir.join(format!("{target}.hsaco"));
        std::fs::write(&path, &c.bytes).unwrap();
        let out = std::process::Command::new("llvm-objdump-22")
            .args(["-d", "-t", &format!("--mcpu={target}")])
            .arg(&path)
            .output()
            .expect("llvm-objdump-22 (scripts/setup installs it)");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("file format elf64-amdgpu"), "{text}");
        assert!(
            text.contains(&format!("<{}>:", k.name)),
            "{target}: no kernel symbol in\n{text}"
        );
        assert!(
            text.contains(&format!("{}.kd", k.name)),
            "{target}: no descriptor symbol"
        );
        assert!(
            text.contains("s_barrier") && (text.contains("ds_write") || text.contains("ds_store")),
            "{target}: no LDS/barrier code in\n{text}"
        );
        assert!(text.contains("s_endpgm"), "{target}");
        assert!(
            !text.contains("<unknown>"),
            "{target}: undecodable words in\n{text}"
        );
        // wave64: exec is a 64-bit mask, so the code never uses exec_lo alone.
        assert!(
            !text.contains("exec_lo"),
            "{target}: wave32 code in\n{text}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn tempdir(tag: &str) -> std::path::PathBuf {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let d = std::env::temp_dir().join(format!(
        "am-compiler-{tag}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn cache_records_survive_on_disk_and_corrupt_ones_are_not_trusted() {
    let dir = tempdir("records");
    let key = Cache::record_key("test", &[b"gfx1100", b"kernel text"]);
    // Parts are separated: moving a byte from one to the next is another key.
    assert_ne!(
        key,
        Cache::record_key("test", &[b"gfx110", b"0kernel text"])
    );
    assert_ne!(
        key,
        Cache::record_key("other", &[b"gfx1100", b"kernel text"])
    );
    let c1 = Cache::new(Some(dir.clone()));
    assert_eq!(c1.record(&key), None);
    c1.put_record(&key, b"up=1:8 unroll=4").unwrap();
    assert_eq!(c1.record(&key).as_deref(), Some(&b"up=1:8 unroll=4"[..]));
    // Another process, in effect: found on disk.
    let c2 = Cache::new(Some(dir.clone()));
    assert_eq!(c2.record(&key).as_deref(), Some(&b"up=1:8 unroll=4"[..]));
    // A flipped bit: ignored and counted.
    let path = c2.entry_path(&key).unwrap();
    let mut w = std::fs::read(&path).unwrap();
    let l = w.len();
    w[l - 1] ^= 1;
    std::fs::write(&path, &w).unwrap();
    let c3 = Cache::new(Some(dir.clone()));
    assert_eq!(c3.record(&key), None);
    assert_eq!(c3.stats().rejected, 1);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn cache_hits_in_memory_and_on_disk_and_rebuilds_corrupt_entries() {
    let dir = tempdir("cache");
    let k = shapes::elementwise_add(DType::F32, 64);
    let c1 = Compiler::with_cache(Cache::new(Some(dir.clone())));
    let a = c1.compile(&k, Target::Gpu(GfxTarget::Gfx1100)).unwrap();
    let a2 = c1.compile(&k, Target::Gpu(GfxTarget::Gfx1100)).unwrap();
    assert!(std::sync::Arc::ptr_eq(&a, &a2));
    assert_eq!(
        (c1.cache().stats().misses, c1.cache().stats().memory_hits),
        (1, 1)
    );
    // Another compiler (another process, say) finds it on disk.
    let c2 = Compiler::with_cache(Cache::new(Some(dir.clone())));
    let b = c2.compile(&k, Target::Gpu(GfxTarget::Gfx1100)).unwrap();
    assert_eq!(b.bytes, a.bytes);
    assert_eq!(
        (c2.cache().stats().disk_hits, c2.cache().stats().misses),
        (1, 0)
    );
    // Targets have separate keys.
    assert_ne!(
        Cache::key(&k, Target::Gpu(GfxTarget::Gfx1100)),
        Cache::key(&k, Target::Gpu(GfxTarget::Gfx942))
    );
    // A truncated entry, then a flipped bit: ignored, rebuilt, rewritten whole.
    let path = c2
        .cache()
        .entry_path(&Cache::key(&k, Target::Gpu(GfxTarget::Gfx1100)))
        .unwrap();
    let whole = std::fs::read(&path).unwrap();
    for (n, corrupt) in [
        whole[..whole.len() / 2].to_vec(),
        {
            let mut w = whole.clone();
            let l = w.len();
            w[l - 10] ^= 1;
            w
        },
        vec![],
    ]
    .into_iter()
    .enumerate()
    {
        std::fs::write(&path, &corrupt).unwrap();
        let c3 = Compiler::with_cache(Cache::new(Some(dir.clone())));
        let r = c3.compile(&k, Target::Gpu(GfxTarget::Gfx1100)).unwrap();
        assert_eq!(
            r.bytes, a.bytes,
            "corruption {n}: rebuilt the same code object"
        );
        let s = c3.cache().stats();
        assert_eq!(
            (s.disk_hits, s.misses),
            (0, 1),
            "corruption {n}: not trusted"
        );
        assert_eq!(
            std::fs::read(&path).unwrap(),
            whole,
            "corruption {n}: entry rewritten"
        );
    }
    // The rebuilt code object runs.
    let n = 64usize;
    let x: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let out = run_code_object(
        &a.bytes,
        &k,
        [1, 1, 1],
        &[buf(&x), buf(&x), zeros(4 * n), scalar(n as u32)],
    )
    .0;
    let z: Vec<f32> = from_bytes(&out[2]);
    assert_eq!(z, x.iter().map(|v| v + v).collect::<Vec<_>>());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn default_cache_dir_follows_xdg() {
    // Only reads the environment of this process: no directory is created.
    let d = Cache::default_dir();
    match std::env::var_os("XDG_CACHE_HOME").filter(|s| !s.is_empty()) {
        Some(x) => assert_eq!(d, Some(std::path::PathBuf::from(x).join("am"))),
        None => {
            if let Some(h) = std::env::var_os("HOME") {
                assert_eq!(d, Some(std::path::PathBuf::from(h).join(".cache/am")));
            }
        }
    }
}
