//! `am bench dispatch|graph|copy|tensor` run on the in-process mock and report what they measured
//! (the numbers themselves are for docs/BENCHMARKS.md, never asserted).

use std::process::Command;

fn bench(args: &[&str]) -> serde_json::Value {
    let o = Command::new(env!("CARGO_BIN_EXE_am"))
        .arg("bench")
        .args(args)
        .arg("--json")
        .env(
            "XDG_CACHE_HOME",
            std::env::temp_dir().join(format!("am-bench-rt-{}", std::process::id())),
        )
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

fn positive(v: &serde_json::Value, key: &str) {
    let x = v[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} missing: {v}"));
    assert!(x > 0.0 && x.is_finite(), "{key} = {x}");
}

#[test]
fn dispatch_graph_and_copy_benchmarks_report_their_measurements() {
    let d = bench(&["dispatch", "--launches", "500", "--samples", "5"]);
    assert_eq!(d["device"], "mock:navi31:0");
    assert_eq!(d["launches"], 500);
    for k in [
        "encode_submit_ns",
        "encode_ns",
        "submit_ns",
        "latency_us_median",
        "latency_us_p99",
    ] {
        positive(&d, k);
    }
    let g = bench(&[
        "graph",
        "--kernels",
        "4",
        "--replays",
        "10",
        "--device",
        "mock:mi300x",
    ]);
    assert_eq!(g["device"], "mock:mi300x:0");
    assert_eq!(g["kernels"], 4);
    assert_eq!(g["replays"], 10);
    for k in [
        "replay_ns_per_kernel",
        "replay_patched_ns_per_kernel",
        "commands_ns_per_kernel",
    ] {
        positive(&g, k);
    }
    let c = bench(&["copy", "--mib", "2", "--repeat", "1"]);
    assert_eq!(c["bytes"], 2 << 20);
    for k in ["memcpy_gbps", "vram_to_vram_gbps", "sys_to_vram_gbps"] {
        positive(&c, k);
    }
}

/// `am bench tensor` on a mock reports, beside its timings, the wave-instructions one captured
/// step of each demo model executed (the emulator's count, with the optimiser on).
#[test]
fn bench_tensor_counts_each_captured_step_s_wave_instructions_on_a_mock() {
    let j = bench(&["tensor", "--device", "mock:navi31:44", "--steps", "1"]);
    assert_eq!(j["device"], "mock:navi31:44");
    assert_eq!(j["optimized"], true, "{j}");
    for row in [&j["captured"], &j["cnn"]["captured"], &j["gpt"]["captured"]] {
        positive(row, "wave_instructions");
        positive(row, "kernels");
        // Every kernel of the step runs at least one wave of a few instructions.
        let (n, k) = (row["wave_instructions"].as_f64(), row["kernels"].as_f64());
        assert!(n.unwrap() > k.unwrap(), "{row}");
    }
}
