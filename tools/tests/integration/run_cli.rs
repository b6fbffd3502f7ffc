//! End-to-end: `am run` runs a kernel `am compile` made, on the in-process mock and through
//! `am serve`; a client killed in the middle of its work leaves the served device usable.

use crate::common;

use std::process::{Command, Output, Stdio};

use common::{Dir, SAXPY, am_in, dir};
use std::time::Duration;

fn am(d: &Dir, args: &[&str]) -> Output {
    am_in(d, args, &[])
}

/// `saxpy` compiled for `target` into `d`; returns the code object's path.
fn saxpy(d: &Dir, target: &str) -> String {
    std::fs::write(d.0.join("saxpy.amk"), SAXPY).unwrap();
    let out = format!("saxpy-{target}.hsaco");
    let o = am(d, &["compile", "saxpy.amk", "--target", target, "-o", &out]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    out
}

fn json(o: &Output) -> serde_json::Value {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

const ARGS: [&str; 8] = [
    "--arg",
    "buf:4096:iota=f32",
    "--arg",
    "buf:4096:fill=0x3f800000:show=f32:save=y.bin",
    "--arg",
    "f32:2",
    "--arg",
    "u32:1000",
];

#[test]
fn runs_a_compiled_kernel_and_shows_and_saves_its_buffers() {
    let d = dir("local");
    for (profile, target) in [("mock:navi31", "gfx1100"), ("mock:mi300x", "gfx942")] {
        let co = saxpy(&d, target);
        let mut args = vec![
            "run", profile, &co, "saxpy", "--grid", "16", "--block", "64", "--json", "--count", "5",
        ];
        args.extend(ARGS);
        let v = json(&am(&d, &args));
        assert_eq!(v["target"], target);
        assert_eq!(v["grid"], serde_json::json!([16, 1, 1]));
        let y = &v["buffers"][1];
        assert_eq!(y["arg"], 1);
        assert_eq!(
            y["values"],
            serde_json::json!(["1", "3", "5", "7", "9"]),
            "{profile}"
        );
        assert!(v["kernel_us_median"].as_f64().unwrap() > 0.0);
        // Saved: all 1024 values, y = 2·i + 1 below n = 1000, 1 above.
        let bytes = std::fs::read(d.0.join("y.bin")).unwrap();
        assert_eq!(bytes.len(), 4096);
        for (i, c) in bytes.chunks(4).enumerate() {
            let want = if i < 1000 { 2.0 * i as f32 + 1.0 } else { 1.0 };
            assert_eq!(
                f32::from_le_bytes(c.try_into().unwrap()),
                want,
                "{profile}: y[{i}]"
            );
        }
    }
    // Text output: the shown values on their own line.
    let co = saxpy(&d, "gfx1100");
    let mut args = vec![
        "run",
        "mock:navi31",
        &co,
        "saxpy",
        "--grid",
        "16",
        "--count",
        "3",
    ];
    args.extend(ARGS);
    let o = am(&d, &args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("saxpy on mock:navi31"), "{text}");
    assert!(text.lines().any(|l| l.trim() == "1 3 5"), "{text}");
}

#[test]
fn wrong_arguments_are_refused_naming_the_parameters() {
    let d = dir("wrong");
    let co = saxpy(&d, "gfx1100");
    let o = am(&d, &["run", "mock:navi31", &co, "saxpy", "--arg", "u32:1"]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("takes 4 arguments, 1 given"), "{err}");
    assert!(
        err.contains("x (8 bytes, global_buffer)") && err.contains("n (4 bytes, by_value)"),
        "{err}"
    );
    for (bad, says) in [
        ("buf:0", "not a size"),
        ("buf:64:iota=f16", "iota of u32, i32 or f32"),
        ("f33:1", "unknown argument type"),
        ("buf:@missing.bin", "missing.bin"),
    ] {
        let o = am(&d, &["run", "mock:navi31", &co, "saxpy", "--arg", bad]);
        assert_eq!(o.status.code(), Some(1), "{bad}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(says), "{bad}: {err}");
    }
    let o = am(&d, &["run", "mock:navi31", &co, "nosuch"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("nosuch"));
    let o = am(&d, &["run", "mock:navi31", &co, "saxpy", "--grid", "0"]);
    assert_ne!(o.status.code(), Some(0));
}

#[test]
fn through_am_serve_and_after_a_client_killed_mid_work() {
    let d = dir("serve");
    let co = saxpy(&d, "gfx1100");
    let server = common::Server::start(&["mock:navi31"], &[]);
    let spec = server.spec(0);
    let run = |extra: &[&str]| {
        let mut args = vec![
            "run",
            spec.as_str(),
            &co,
            "saxpy",
            "--grid",
            "16",
            "--json",
            "--count",
            "4",
        ];
        args.extend(ARGS);
        args.extend(extra);
        am(&d, &args)
    };
    let v = json(&run(&[]));
    assert_eq!(
        v["buffers"][1]["values"],
        serde_json::json!(["1", "3", "5", "7"])
    );

    // A client busy launching, killed without closing anything.
    let mut args = vec![
        "run",
        spec.as_str(),
        &co,
        "saxpy",
        "--grid",
        "16",
        "--repeat",
        "100000",
    ];
    args.extend(ARGS);
    let mut victim = Command::new(env!("CARGO_BIN_EXE_am"))
        .args(&args)
        .current_dir(&d.0)
        .env("XDG_CACHE_HOME", d.0.join("cache"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    assert!(
        victim.try_wait().unwrap().is_none(),
        "the client is still at work when killed"
    );
    victim.kill().unwrap();
    victim.wait().unwrap();

    // The next client boots the device again and its work runs.
    let v = json(&run(&[]));
    assert_eq!(
        v["buffers"][1]["values"],
        serde_json::json!(["1", "3", "5", "7"])
    );
}

/// `am run mock:navi31 CO saxpy` with `extra` arguments; its exit code and stderr.
fn run_saxpy(d: &Dir, co: &str, extra: &[&str]) -> (Option<i32>, String) {
    let mut args = vec!["run", "mock:navi31", co, "saxpy"];
    args.extend(extra);
    let o = am(d, &args);
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn a_buffer_larger_than_vram_is_refused_naming_the_size_and_the_vram() {
    let d = dir("vram");
    let co = saxpy(&d, "gfx1100");
    for (size, bytes) in [
        ("18446744073709551615", "18446744073709551615"),
        ("100GiB", "107374182400"),
        ("107374182400", "107374182400"),
    ] {
        let arg = format!("buf:{size}:iota=f32");
        let (code, err) = run_saxpy(
            &d,
            &co,
            &[
                "--arg", &arg, "--arg", "buf:4096", "--arg", "f32:2", "--arg", "u32:1",
            ],
        );
        assert_eq!(code, Some(1), "{size}: {err}");
        assert!(
            err.contains(&format!("`{arg}`"))
                && err.contains(&format!(
                    "mock:navi31:0: a VRAM buffer of {bytes} bytes is larger than the device's VRAM ("
                )),
            "{size}: {err}"
        );
    }
}

#[test]
fn a_grid_past_the_dispatch_packet_is_refused_at_launch() {
    let d = dir("grid");
    let co = saxpy(&d, "gfx1100");
    // 2^26 workgroups of 64: 2^32 work-items, one more than a dispatch packet's grid holds.
    let (code, err) = run_saxpy(
        &d,
        &co,
        &[
            "--grid", "67108864", "--block", "64", "--arg", "buf:4096", "--arg", "buf:4096",
            "--arg", "f32:2", "--arg", "u32:1",
        ],
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains(
            "mock:navi31:0: kernel saxpy: a grid of 4294967296 work-items in x (67108864 \
             workgroups of 64) is more than a dispatch packet holds (4294967295 a dimension)"
        ),
        "{err}"
    );
}

#[test]
fn a_code_object_for_another_target_is_refused_naming_both() {
    let d = dir("target");
    let co = saxpy(&d, "gfx942");
    let (code, err) = run_saxpy(
        &d,
        &co,
        &[
            "--arg", "buf:4096", "--arg", "buf:4096", "--arg", "f32:2", "--arg", "u32:1",
        ],
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains(
            "mock:navi31:0: kernel saxpy: the code object is for gfx942, the device is gfx1100"
        ),
        "{err}"
    );
}

#[test]
fn repeat_zero_is_refused_with_the_range() {
    let d = dir("repeat");
    let co = saxpy(&d, "gfx1100");
    let (code, err) = run_saxpy(&d, &co, &["--repeat", "0"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("invalid value '0' for '--repeat") && err.contains("0 is not in 1.."),
        "{err}"
    );
}

#[test]
fn a_fifo_is_refused_as_code_object_and_as_buffer_file_without_blocking() {
    let d = dir("fifo");
    let co = saxpy(&d, "gfx1100");
    common::fifo(&d.0.join("pipe"));
    let o = common::am_in_bounded(&d, &["run", "mock:navi31", "pipe", "saxpy"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("pipe: not a regular file but a FIFO"), "{err}");
    let o = common::am_in_bounded(
        &d,
        &[
            "run",
            "mock:navi31",
            &co,
            "saxpy",
            "--arg",
            "buf:@pipe",
            "--arg",
            "buf:4096",
            "--arg",
            "f32:2",
            "--arg",
            "u32:1",
        ],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("`buf:@pipe`: pipe: not a regular file but a FIFO"),
        "{err}"
    );
}
