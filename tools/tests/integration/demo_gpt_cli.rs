//! End-to-end: `am demo gpt` trains a few steps on the mock Navi31, its losses fall and agree
//! with the same run on the CPU, it answers a prompt through its key-value cache, and the
//! weights it saves load back (on the CPU) to the same answer.

use crate::common;

use common::{am_in as am, dir};

fn json_of(out: &std::process::Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn a_few_steps_lower_the_loss_on_the_mock_and_the_cpu_alike() {
    let d = dir("gpt");
    let args = [
        "demo",
        "gpt",
        "--steps",
        "4",
        "--batch",
        "16",
        "--prompt",
        "12+34",
        "--json",
        "--save",
        "gpt.safetensors",
    ];
    let j = json_of(&am(&d, &args, &[]));
    assert_eq!(j["model"], "gpt");
    assert_eq!(j["device"], "mock:navi31:0");
    let losses: Vec<f64> = j["losses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    assert_eq!(losses.len(), 4);
    assert_eq!(j["batch"], 16, "--batch is the problems per step");
    let first = (losses[0] + losses[1]) / 2.0;
    let last = (losses[2] + losses[3]) / 2.0;
    assert!(last < first, "the loss went from {first} to {last}");
    // The same run on the CPU: every step's loss within 1e-3.
    let diff = j["cpu"]["loss_max_abs_diff"].as_f64().unwrap();
    assert!(diff <= 1e-3, "losses differ by {diff}");
    assert_eq!(j["cpu"]["losses_agree"], true);
    assert!(j["kernels_per_step"].as_u64().unwrap() > 0);
    // The prompt: one token per replay, three answer digits.
    let a = &j["answers"][0];
    assert_eq!(a["prompt"], "12+34");
    assert_eq!(a["tokens"].as_str().unwrap().len(), 3);
    assert!(j["decode_kernels_per_token"].as_u64().unwrap() > 0);

    // The saved weights, loaded on the CPU, give the same answer and score.
    let l = json_of(&am(
        &d,
        &[
            "demo",
            "gpt",
            "--device",
            "cpu",
            "--load",
            "gpt.safetensors",
            "--prompt",
            "12+34",
            "--json",
        ],
        &[],
    ));
    assert_eq!(l["answers"][0]["tokens"], a["tokens"]);
    assert_eq!(l["test_problems"], j["test_problems"]);
    assert_eq!(l["losses"].as_array().unwrap().len(), 0);

    // A prompt that is not an addition is refused by name.
    let bad = am(
        &d,
        &["demo", "gpt", "--prompt", "12*34", "--steps", "1"],
        &[],
    );
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("12*34"));
}

#[test]
fn a_data_parallel_run_on_two_devices_matches_one_device_and_refuses_saving() {
    let d = dir("gpt-parallel");
    let list = "mock:navi31:0,mock:navi31:1";
    // Four steps: the first two run each device's halves normally, the next two replay
    // their captures, so a replay that read stale gradients would part from one device.
    let args = [
        "demo", "gpt", "--device", list, "--steps", "4", "--batch", "8", "--digits", "1", "--json",
    ];
    let j = json_of(&am(&d, &args, &[]));
    assert_eq!(
        j["devices"],
        serde_json::json!(["mock:navi31:0", "mock:navi31:1"])
    );
    assert_eq!(j["single_device"], "mock:navi31:0");
    assert_eq!(j["losses"].as_array().unwrap().len(), 4);
    // Four steps are all compared: every loss within 1e-5 relative of one device's.
    assert_eq!(j["compared_steps"], 4);
    let diff = j["loss_max_rel_diff_all_steps"].as_f64().unwrap();
    assert!(diff <= 1e-5, "the losses differ by {diff} (relative)");
    assert_eq!(j["losses_agree"], true);
    assert_eq!(j["agree"], true);
    assert_eq!(j["test_correct"], j["single_test_correct"], "{j}");
    // Two navi31 boards are no hive: each device's step is captured in two halves.
    assert_eq!(j["step_captured_across_devices"], false);

    let out = am(
        &d,
        &["demo", "gpt", "--device", list, "--save", "gpt.safetensors"],
        &[],
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--save is for one device"), "{err}");
    assert!(!d.0.join("gpt.safetensors").exists());
}

#[test]
fn a_data_parallel_step_on_one_hive_is_captured_whole_and_matches_one_device() {
    let d = dir("gpt-parallel-hive");
    let list = "mock:mi300x-hive4:0,mock:mi300x-hive4:1";
    // The first two steps run uncaptured, steps 3 and 4 replay one graph over both members'
    // queues: a replay missing a dependency across them would part from one device.
    let args = [
        "demo", "gpt", "--device", list, "--steps", "4", "--batch", "8", "--digits", "1", "--json",
    ];
    let j = json_of(&am(&d, &args, &[]));
    assert_eq!(j["step_captured_across_devices"], true, "{j}");
    assert_eq!(j["compared_steps"], 4);
    let diff = j["loss_max_rel_diff_all_steps"].as_f64().unwrap();
    assert!(diff <= 1e-5, "the losses differ by {diff} (relative)");
    assert_eq!(j["agree"], true, "{j}");
}
