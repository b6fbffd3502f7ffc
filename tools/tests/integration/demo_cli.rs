//! End-to-end: `am demo` trains the MLP on the digits on the mock Navi31 to at least 95 %
//! test accuracy in a short run, the CPU run agrees, and the weights it saves are a
//! safetensors file of the model.

use crate::common;

use common::{am_in as am, dir};

#[test]
fn the_demo_reaches_95_percent_on_the_mock_and_agrees_with_the_cpu() {
    let d = dir("navi31");
    let out = am(
        &d,
        &[
            "demo",
            "--epochs",
            "2",
            "--json",
            "--save",
            "mlp.safetensors",
        ],
        &[],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["device"], "mock:navi31:0");
    assert_eq!(j["target"], "gfx1100");
    assert_eq!(j["model"], serde_json::json!([64, 128, 10]));
    assert_eq!(
        (j["train_images"].as_u64(), j["test_images"].as_u64()),
        (Some(1437), Some(360))
    );
    let acc = j["test_accuracy"].as_f64().unwrap();
    assert!(acc >= 0.95, "test accuracy {acc} after 2 epochs");
    let epochs = j["epochs"].as_array().unwrap();
    assert_eq!(epochs.len(), 2);
    let first = epochs[0]["loss"].as_f64().unwrap();
    let last = epochs[1]["loss"].as_f64().unwrap();
    assert!(last < first / 2.0, "the loss fell from {first} to {last}");
    let cpu = &j["cpu"];
    let diff = cpu["loss_max_abs_diff"].as_f64().unwrap();
    assert!(diff <= 1e-4, "losses on the cpu differ by {diff}");
    assert_eq!(cpu["losses_agree"], true);
    let k = j["kernels_per_step"].as_u64().unwrap();
    assert!(k > 0 && k <= 20, "{k} kernels per step");
    assert!(j["step_us"].as_f64().unwrap() > 0.0);

    // The saved weights: PyTorch's names and layouts for this model.
    let bytes = std::fs::read(d.0.join("mlp.safetensors")).unwrap();
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    for (name, shape) in [
        ("fc1.weight", serde_json::json!([128, 64])),
        ("fc1.bias", serde_json::json!([128])),
        ("fc2.weight", serde_json::json!([10, 128])),
        ("fc2.bias", serde_json::json!([10])),
    ] {
        assert_eq!(header[name]["dtype"], "F32", "{name}");
        assert_eq!(header[name]["shape"], shape, "{name}");
    }
    assert_eq!(bytes.len(), 8 + n + 4 * (128 * 64 + 128 + 10 * 128 + 10));
}

#[test]
fn the_demo_prints_epochs_and_logs_kernels_with_am_debug() {
    let d = dir("cpu");
    let out = am(
        &d,
        &["demo", "--device", "cpu", "--epochs", "1"],
        &[("AM_DEBUG", "2")],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    for line in [
        "on cpu",
        "epoch   1/1",
        "test accuracy:",
        "kernels per step:",
        "time per step:",
    ] {
        assert!(text.contains(line), "no `{line}` in:\n{text}");
    }
    // Every kernel: device, number, name with its shape, shape and dtype, time.
    let log = String::from_utf8_lossy(&out.stderr);
    let first_layer = log
        .lines()
        .find(|l| l.contains("R_32_128__64"))
        .unwrap_or_else(|| panic!("no kernel of the first layer in the log:\n{log}"));
    assert!(
        first_layer.starts_with("cpu") && first_layer.contains("[32, 128] f32"),
        "{first_layer}"
    );
    assert!(first_layer.trim_end().ends_with("µs"), "{first_layer}");
}

#[test]
fn a_device_that_does_not_exist_is_a_clear_error() {
    let d = dir("bad");
    let out = am(&d, &["demo", "--device", "mock:nosuchgpu"], &[]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("mock:nosuchgpu"), "{err}");
    let bad = am(&d, &["demo", "--device", "nonsense"], &[]);
    let err = String::from_utf8_lossy(&bad.stderr);
    assert_eq!(
        err.matches("expected a PCI address").count(),
        1,
        "said once: {err}"
    );
}

#[test]
fn settings_that_make_no_sense_are_refused_with_the_valid_range() {
    let d = dir("settings");
    for (flag, value, says) in [
        ("--batch", "0", "0 is not in 1..=1437"),
        ("--batch", "1438", "1438 is not in 1..=1437"),
        ("--hidden", "0", "0 is not in 1..=4096"),
        ("--epochs", "0", "0 is not in 1..=1000"),
        ("--lr", "nan", "give a learning rate above 0 and at most 1"),
        ("--lr", "0", "give a learning rate above 0 and at most 1"),
        ("--lr", "inf", "give a learning rate above 0 and at most 1"),
    ] {
        let out = am(&d, &["demo", "--no-compare", flag, value], &[]);
        // Refused while the command line is read (clap's usage error), before any training.
        assert_eq!(out.status.code(), Some(2), "{flag} {value}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!("invalid value '{value}' for '{flag}")) && err.contains(says),
            "{flag} {value}: {err}"
        );
        assert!(out.stdout.is_empty(), "{flag} {value}: nothing trained");
    }
}

/// An option the chosen model has no use for is refused by name before anything is opened
/// or trained, rather than ignored.
#[test]
fn options_of_another_model_are_refused_by_name() {
    let d = dir("inapplicable");
    for args in [
        &["demo", "--steps", "5"][..],
        &["demo", "mlp", "--prompt", "1+2"],
        &["demo", "cnn", "--hidden", "64"],
        &["demo", "cnn", "--digits", "3"],
        &["demo", "gpt", "--epochs", "2"],
        &["demo", "gpt", "--hidden", "64"],
    ] {
        let out = am(&d, args, &[]);
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        let flag = args[args.len() - 2];
        assert!(
            err.contains(&format!("`{flag}` does not apply to `am demo")),
            "{args:?}: {err}"
        );
        assert!(out.stdout.is_empty(), "{args:?}: nothing trained");
    }
}

/// `am demo cnn` on the CPU for one epoch: it names its model and layers, its loss falls, it
/// evaluates the test images, and `--save` writes every weight and running average by
/// PyTorch's names.
#[test]
fn the_cnn_demo_trains_and_saves_its_weights_and_running_averages() {
    let d = dir("cnn");
    let out = am(
        &d,
        &[
            "demo",
            "cnn",
            "--device",
            "cpu",
            "--epochs",
            "1",
            "--json",
            "--save",
            "cnn.safetensors",
        ],
        &[],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["model_name"], "cnn");
    assert_eq!(j["model"][0], "conv3x3 1->8");
    assert_eq!(j["model"][8], "linear 64->10");
    assert_eq!(j["epochs"].as_array().unwrap().len(), 1);
    assert_eq!(
        j["cpu"],
        serde_json::Value::Null,
        "no comparison of the cpu with itself"
    );
    let acc = j["test_accuracy"].as_f64().unwrap();
    assert!(acc >= 0.8, "test accuracy {acc} after one epoch");
    let bytes = std::fs::read(d.0.join("cnn.safetensors")).unwrap();
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    for (name, shape) in [
        ("conv1.weight", serde_json::json!([8, 1, 3, 3])),
        ("bn1.running_var", serde_json::json!([8])),
        ("conv2.weight", serde_json::json!([16, 8, 3, 3])),
        ("bn2.running_mean", serde_json::json!([16])),
        ("fc.weight", serde_json::json!([10, 64])),
        ("fc.bias", serde_json::json!([10])),
    ] {
        assert_eq!(header[name]["shape"], shape, "{name}");
    }
    assert_eq!(header.as_object().unwrap().len(), 14);
}

/// `am demo --device DEVICES` for five data-parallel steps of a small MLP (`--epochs 1
/// --batch 256 --hidden 16`): its JSON, once the run succeeded and every step's loss
/// agreed with the first device's alone within 1e-5 relative.
fn five_agreeing_steps(name: &str, devices: &str) -> serde_json::Value {
    let d = dir(name);
    let args = [
        "demo", "--device", devices, "--epochs", "1", "--batch", "256", "--hidden", "16", "--json",
    ];
    let out = am(&d, &args, &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["steps"], 5, "{j}");
    let diff = j["loss_max_rel_diff_all_steps"].as_f64().unwrap();
    assert!(diff <= 1e-5, "the losses differ by {diff} (relative)");
    assert_eq!(j["agree"], true, "{j}");
    j
}

#[test]
fn a_data_parallel_mlp_on_a_hive_matches_one_member_step_by_step() {
    // Five steps: the whole step across the four members runs normally twice, then replays
    // as one graph over every member's queues.
    let j = five_agreeing_steps("mlp-parallel", "mock:mi300x-hive4");
    assert_eq!(j["devices"].as_array().unwrap().len(), 4, "{j}");
    assert_eq!(j["single_device"], "mock:mi300x-hive4:0");
    assert_eq!(j["step_captured_across_devices"], true, "{j}");
    assert_eq!(j["compared_steps"], 5);
    let (a, b) = (
        j["losses"].as_array().unwrap(),
        j["single_losses"].as_array().unwrap(),
    );
    assert_eq!(a.len(), b.len());
}

/// Two `am serve` processes on loopback stand in for two hosts: the data-parallel MLP splits
/// each batch over their devices, the gradients go between them through host memory over the
/// remote protocol, and the losses match the first device trained alone.
#[test]
fn a_data_parallel_mlp_over_two_served_hosts_matches_one_device() {
    let (a, b) = (
        common::Server::start(&["mock:navi31:31"], &[]),
        common::Server::start(&["mock:navi31:32"], &[]),
    );
    let j = five_agreeing_steps("mlp-remote", &format!("{},{}", a.spec(0), b.spec(0)));
    let listed: Vec<&str> = j["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(listed, [a.spec(0), b.spec(0)], "{j}");
    assert_eq!(j["single_device"], a.spec(0).as_str());
}
