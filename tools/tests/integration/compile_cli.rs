//! End-to-end: the built `am compile` on a kernel in the IR's text form, with the compile
//! cache in a temporary directory (never the user's).

use crate::common;

use std::process::Output;

use common::{Dir, SAXPY, am_in, dir};

fn am(d: &Dir, args: &[&str]) -> Output {
    am_in(d, args, &[])
}

#[test]
fn am_compile_writes_a_code_object_that_runs_then_hits_the_cache() {
    let d = dir("co");
    std::fs::write(d.0.join("saxpy.amk"), SAXPY).unwrap();
    let out = am(
        &d,
        &["compile", "saxpy.amk", "--target", "gfx1100", "--json"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["from"], "compiled");
    assert_eq!(v["metadata"]["wavefront_size"], 32);
    assert_eq!(v["metadata"]["kernarg_segment_size"], 24);
    let offsets: Vec<u64> = v["metadata"]["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["offset"].as_u64().unwrap())
        .collect();
    assert_eq!(offsets, [0, 8, 16, 20]);
    // The code object on disk is what the emulator loads and runs.
    let bytes = std::fs::read(d.0.join("saxpy.hsaco")).unwrap();
    let co = am_emu::CodeObject::parse(&bytes, "saxpy.hsaco").unwrap();
    let prog = am_emu::Program::new(&co, am_emu::Isa::Gfx1100).unwrap();
    let k = co.kernel("saxpy").unwrap();
    let mut mem = am_emu::HostMemory::new();
    let n = 100u32;
    let x: Vec<u8> = (0..n).flat_map(|i| (i as f32).to_le_bytes()).collect();
    let y: Vec<u8> = (0..n).flat_map(|_| 1f32.to_le_bytes()).collect();
    let (px, py) = (mem.alloc_bytes(&x), mem.alloc_bytes(&y));
    let mut args = vec![0u8; 128];
    args[0..8].copy_from_slice(&px.to_le_bytes());
    args[8..16].copy_from_slice(&py.to_le_bytes());
    args[16..20].copy_from_slice(&2f32.to_le_bytes());
    args[20..24].copy_from_slice(&n.to_le_bytes());
    let ka = mem.alloc_bytes(&args);
    am_emu::dispatch(
        &prog,
        k,
        &am_emu::Launch::new([128, 1, 1], [64, 1, 1], ka),
        &mut mem,
    )
    .unwrap();
    let got = mem.bytes(py, 4 * n as usize).unwrap();
    for i in 0..n as usize {
        let g = f32::from_le_bytes(got[4 * i..4 * i + 4].try_into().unwrap());
        assert_eq!(g, 2f32.mul_add(i as f32, 1.0), "y[{i}]");
    }
    // A second run finds the program in the cache under XDG_CACHE_HOME.
    let out = am(
        &d,
        &[
            "compile",
            "saxpy.amk",
            "--target",
            "gfx1100",
            "-o",
            "again.hsaco",
            "--json",
        ],
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["from"], "cache");
    assert_eq!(std::fs::read(d.0.join("again.hsaco")).unwrap(), bytes);
    assert!(std::fs::read_dir(d.0.join("cache/am")).unwrap().count() >= 1);
}

#[test]
fn am_compile_emits_llvm_ir_and_assembly() {
    let d = dir("emit");
    std::fs::write(d.0.join("saxpy.amk"), SAXPY).unwrap();
    let out = am(
        &d,
        &[
            "compile",
            "saxpy.amk",
            "--target",
            "gfx942",
            "--emit",
            "llvm",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ll = String::from_utf8(out.stdout).unwrap();
    assert!(
        ll.contains("target datalayout")
            && ll.contains("define amdgpu_kernel void @saxpy(")
            && ll.contains("call float @llvm.fma.f32"),
        "{ll}"
    );
    let out = am(
        &d,
        &[
            "compile",
            "saxpy.amk",
            "--target",
            "gfx1100",
            "--emit",
            "asm",
            "-o",
            "s.s",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let asm = std::fs::read_to_string(d.0.join("s.s")).unwrap();
    assert!(
        asm.contains(".amdgcn_target \"amdgcn-amd-amdhsa--gfx1100\"")
            && asm.contains("v_fma")
            && asm.contains("s_endpgm"),
        "{asm}"
    );
    let out = am(
        &d,
        &["compile", "saxpy.amk", "--target", "cpu", "--no-cache"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(d.0.join("saxpy.cpu").exists());
    assert!(!d.0.join("cache").exists(), "--no-cache wrote a cache");
}

#[test]
fn am_compile_reports_errors_with_file_line_and_column() {
    let d = dir("err");
    std::fs::write(
        d.0.join("bad.amk"),
        SAXPY.replace("%r = fma %a, %xv, %yv", "%r = fma %a, %xv, %n"),
    )
    .unwrap();
    let out = am(&d, &["compile", "bad.amk"]);
    assert!(!out.status.success());
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(
        e.contains("kernel saxpy") && e.contains("fma %a, %xv, %n") && e.contains("three floats"),
        "{e}"
    );
    std::fs::write(
        d.0.join("syntax.amk"),
        "kernel k() workgroup(1, 1, 1) {\n  %x = nope\n}\n",
    )
    .unwrap();
    let out = am(&d, &["compile", "syntax.amk"]);
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && e.contains("syntax.amk:2:8: unknown instruction `nope`"),
        "{e}"
    );
    let out = am(&d, &["compile", "syntax.amk", "--target", "gfx9000"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown target `gfx9000`"));
}

#[test]
fn am_compile_refuses_a_fifo_without_blocking() {
    let d = dir("fifo");
    common::fifo(&d.0.join("k.amk"));
    let out = common::am_in_bounded(&d, &["compile", "k.amk"]);
    let e = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{e}");
    assert!(e.contains("k.amk: not a regular file but a FIFO"), "{e}");
}
