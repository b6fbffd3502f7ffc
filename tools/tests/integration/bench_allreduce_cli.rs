//! `am bench allreduce` on the mock hive reports, for every size, the wall and CPU time of
//! the all-reduce beside its two memcpy anchors (the numbers themselves are for
//! docs/BENCHMARKS.md, never asserted).

use std::process::Command;

fn am(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_am"))
        .args(args)
        .env(
            "XDG_CACHE_HOME",
            std::env::temp_dir().join(format!("am-bench-ar-{}", std::process::id())),
        )
        .output()
        .unwrap()
}

/// The direct algorithm runs on the hive (the bench checks every device's sum and fails on a
/// wrong one), every size from 1 KiB to 1 MiB has its times, and an unknown algorithm is
/// refused with the list of those there are.
#[test]
fn allreduce_reports_wall_and_cpu_time_for_each_size() {
    let o = am(&[
        "bench",
        "allreduce",
        "--mib",
        "1",
        "--repeat",
        "1",
        "--algo",
        "direct",
        "--json",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let d: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(d["algorithm"], "direct");
    let sizes = d["sizes"].as_array().unwrap();
    let bytes: Vec<u64> = sizes.iter().map(|s| s["bytes"].as_u64().unwrap()).collect();
    assert_eq!(
        bytes,
        [1 << 10, 4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20]
    );
    for s in sizes {
        for key in [
            "seconds",
            "cpu_seconds",
            "memcpy_seconds",
            "link_memcpy_seconds",
        ] {
            let x = s[key]
                .as_f64()
                .unwrap_or_else(|| panic!("{key} missing: {s}"));
            assert!(x > 0.0 && x.is_finite(), "{key} = {x}");
        }
        let c = s["link_memcpy_cpu_seconds"].as_f64().unwrap();
        assert!(c >= 0.0 && c.is_finite(), "link_memcpy_cpu_seconds = {c}");
    }
    assert!(d["anchors"]["cpu_seconds"].is_string(), "{}", d["anchors"]);
    // Each pair's link says why it is what it is.
    let why = d["links"][0]["why"].as_str().unwrap_or_default();
    assert!(why.contains("XGMI hive"), "{}", d["links"]);
    let o = am(&["bench", "allreduce", "--mib", "1", "--algo", "star"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("auto, direct, ring and tree"), "{err}");
}
