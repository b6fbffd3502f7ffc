//! `am bench kernels --quick --json`: every operation of the suite runs on the mock at small
//! shapes, is checked against the cpu device, and reports kernels, wave-instructions and their
//! classes (a structure test; the numbers are for docs/BENCHMARKS.md, not asserted); with
//! `--beam` the kernel search's counts and its cache.

use std::process::Command;

#[test]
fn bench_kernels_reports_every_operation_with_its_instruction_classes() {
    let out = Command::new(env!("CARGO_BIN_EXE_am"))
        .args(["bench", "kernels", "--quick", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "am bench kernels failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["isa"], "gfx1100");
    assert_eq!(j["device"], "mock:navi31");
    let ops = j["ops"].as_array().unwrap();
    let names: Vec<&str> = ops.iter().map(|o| o["op"].as_str().unwrap()).collect();
    for want in [
        "add",
        "sum",
        "softmax",
        "matmul_f32_256",
        "matmul_f32_512",
        "matmul_f16",
        "matmul_bf16",
        "conv3x3",
        "matmul_batched",
        "matmul_transposed",
        "layernorm",
        "argmax",
        "add_odd",
        "sum_odd",
        "matmul_odd",
    ] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
    for o in ops {
        let name = o["op"].as_str().unwrap();
        let kernels = o["kernels"].as_u64().unwrap();
        let total = o["wave_instructions"].as_u64().unwrap();
        assert!(kernels >= 1, "{name}: no kernel launched");
        assert!(total > 0, "{name}: no wave-instructions counted");
        // The classes partition the total.
        let classes = o["classes"].as_object().unwrap();
        let sum: u64 = classes.values().map(|v| v.as_u64().unwrap()).sum();
        assert_eq!(sum, total, "{name}: classes {classes:?}");
        for c in ["valu", "salu", "vmem", "smem", "lds", "wait", "other"] {
            assert!(classes.contains_key(c), "{name}: class {c} missing");
        }
        // Every operation reads memory (a one-lane loop may read it through scalar loads).
        let reads = classes["vmem"].as_u64().unwrap() + classes["smem"].as_u64().unwrap();
        assert!(reads > 0, "{name}");
        let units = o["units"].as_u64().unwrap();
        let per = o["per_unit"].as_f64().unwrap();
        assert!(
            (per - total as f64 / units as f64).abs() < 1e-9 * per,
            "{name}"
        );
        assert!(o["ideal_per_unit"].as_f64().unwrap() > 0.0, "{name}");
        assert!(o["cpu_us"].as_f64().unwrap() > 0.0, "{name}");
        // Without --tinygrad the anchor is issue 37's figure where it has one.
        let anchor = &o["anchor"];
        if !anchor.is_null() {
            assert_eq!(anchor["source"], "issue 37", "{name}");
            let ratio = o["ratio"].as_f64().unwrap();
            assert!((ratio - per / anchor["per_unit"].as_f64().unwrap()).abs() < 1e-9 * ratio);
        }
    }
    let anchored = ops.iter().filter(|o| !o["anchor"].is_null()).count();
    assert_eq!(anchored, 7, "the issue's table has seven operations");
}

/// `--beam 1`: the searched kernels' counts beside the heuristics', never more; a second
/// process over the same cache directory finds every choice there and measures nothing.
#[test]
fn bench_kernels_beam_reports_the_search_and_a_second_run_recalls_it() {
    let cache = std::env::temp_dir().join(format!("am-bench-beam-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&cache);
    let run = || {
        let out = Command::new(env!("CARGO_BIN_EXE_am"))
            .args(["bench", "kernels", "--quick", "--json", "--beam", "1"])
            .args(["--op", "argmax", "--op", "add_odd"])
            .env("XDG_CACHE_HOME", &cache)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "am bench kernels --beam 1 failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(j["beam"], 1);
        j["ops"].as_array().unwrap().clone()
    };
    let first = run();
    assert_eq!(first.len(), 2);
    for o in &first {
        let name = o["op"].as_str().unwrap();
        let b = &o["beam"];
        let searched = b["wave_instructions"].as_u64().unwrap();
        assert!(
            searched <= o["wave_instructions"].as_u64().unwrap(),
            "{name}"
        );
        assert!(b["kernels_searched"].as_u64().unwrap() >= 1, "{name}");
        assert!(b["candidates"].as_u64().unwrap() >= 1, "{name}");
    }
    let second = run();
    for (o, p) in second.iter().zip(&first) {
        let name = o["op"].as_str().unwrap();
        let b = &o["beam"];
        assert_eq!(b["kernels_searched"], 0, "{name}: searched again");
        assert_eq!(b["candidates"], 0, "{name}");
        assert!(b["kernels_recalled"].as_u64().unwrap() >= 1, "{name}");
        assert_eq!(
            b["wave_instructions"], p["beam"]["wave_instructions"],
            "{name}"
        );
    }
    let _ = std::fs::remove_dir_all(&cache);
}
