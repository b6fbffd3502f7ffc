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
        "8",
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
    assert_eq!(losses.len(), 8);
    let first = (losses[0] + losses[1]) / 2.0;
    let last = (losses[6] + losses[7]) / 2.0;
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
