//! `am bench emu`: the kernel suite runs on each ISA it is given and reports every kernel's
//! wave-instructions and throughput (one core, all cores, and the independent runs that
//! anchor all cores), and their geometric mean (a structure test; the numbers
//! themselves are for docs/BENCHMARKS.md, not asserted).

use std::process::Command;

#[test]
fn bench_emu_reports_each_kernel_and_the_geometric_mean_per_isa() {
    let out = Command::new(env!("CARGO_BIN_EXE_am"))
        .args(["bench", "emu", "--isa", "gfx942", "--isa", "gfx1100"])
        .args([
            "--kernel",
            "copy",
            "--kernel",
            "reduce",
            "--scale",
            "1",
            "--threads",
            "2",
            // Short rounds: the structure is under test, not the figures.
            "--round",
            "0.02",
        ])
        .arg("--json")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "am bench emu failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let isas = j["emu"].as_array().unwrap();
    assert_eq!(isas.len(), 2);
    for (run, (isa, wave)) in isas.iter().zip([("gfx942", 64), ("gfx1100", 32)]) {
        assert_eq!(run["isa"], isa);
        assert_eq!(run["threads"], 2);
        let kernels = run["kernels"].as_array().unwrap();
        let names: Vec<&str> = kernels
            .iter()
            .map(|k| k["kernel"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["copy", "reduce"], "{isa}");
        for k in kernels {
            assert_eq!(k["wave_size"], wave, "{isa} {k}");
            assert!(k["wave_instructions"].as_u64().unwrap() > 0, "{isa} {k}");
            assert!(k["one_core_mips"].as_f64().is_some(), "{isa} {k}");
            assert!(k["all_cores_mips"].as_f64().is_some(), "{isa} {k}");
            assert!(k["independent_mips"].as_f64().unwrap() > 0.0, "{isa} {k}");
        }
        assert!(run["geomean_one_core_mips"].as_f64().is_some(), "{isa}");
        assert!(run["geomean_all_cores_mips"].as_f64().is_some(), "{isa}");
        assert!(run["geomean_independent_mips"].as_f64().is_some(), "{isa}");
    }
}

#[test]
fn bench_emu_refuses_an_unknown_isa_or_kernel() {
    for args in [
        ["--isa", "gfx906"],
        ["--kernel", "nope"],
        ["--round", "NaN"],
        ["--round", "0"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_am"))
            .args(["bench", "emu"])
            .args(args)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?} should fail");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(args[1]), "{args:?}: {err}");
    }
}

#[test]
fn bench_emu_threads_zero_skips_the_all_cores_and_independent_runs() {
    let out = Command::new(env!("CARGO_BIN_EXE_am"))
        .args(["bench", "emu", "--isa", "gfx942", "--kernel", "copy"])
        .args([
            "--scale",
            "1",
            "--threads",
            "0",
            "--round",
            "0.02",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "am bench emu --threads 0 failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let run = &j["emu"][0];
    assert_eq!(run["threads"], 0);
    let k = &run["kernels"][0];
    assert!(k["one_core_mips"].as_f64().unwrap() > 0.0, "{k}");
    assert!(k["all_cores_mips"].is_null(), "{k}");
    assert!(k["all_cores_wall_seconds"].is_null(), "{k}");
    assert!(run["geomean_all_cores_mips"].is_null(), "{run}");
    assert!(k["independent_mips"].is_null(), "{k}");
    assert!(run["geomean_independent_mips"].is_null(), "{run}");
    assert!(
        run["geomean_one_core_mips"].as_f64().unwrap() > 0.0,
        "{run}"
    );
}
