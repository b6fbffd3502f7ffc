//! A captured training step replays with the results of running the step each time, without
//! scheduling or compiling, on the CPU and on the mock Navi31 (one runtime graph per step).

use crate::common;

use am_tensor::nn::{Adam, Linear, Optimizer};
use am_tensor::{Device, Jit, Tensor};
use common::{Rng, cpu};

struct Model {
    l1: Linear,
    l2: Linear,
    opt: Adam,
}

fn model(dev: &Device) -> Model {
    let l1 = Linear::new(6, 8, 10, dev).unwrap();
    let l2 = Linear::new(8, 3, 20, dev).unwrap();
    let mut p = l1.parameters();
    p.extend(l2.parameters());
    let opt = Adam::new(p, 0.05).unwrap();
    Model { l1, l2, opt }
}

fn step(m: &mut Model, x: &Tensor, y: &Tensor) -> am_tensor::Result<Vec<Tensor>> {
    let logits = m.l2.forward(&m.l1.forward(x)?.gelu())?;
    let loss = logits.cross_entropy(y)?;
    loss.backward()?;
    m.opt.step(&[&loss])?;
    Ok(vec![loss])
}

fn batches(dev: &Device) -> Vec<(Tensor, Tensor)> {
    let mut rng = Rng(99);
    (0..6)
        .map(|_| {
            let x = Tensor::from_slice(&rng.values(4 * 6, -1.0, 1.0), &[4, 6], dev).unwrap();
            let labels: Vec<i32> = (0..4).map(|_| rng.uniform(0.0, 3.0) as i32).collect();
            (x, Tensor::from_slice(&labels, &[4], dev).unwrap())
        })
        .collect()
}

fn params(m: &Model) -> Vec<Vec<f32>> {
    m.opt
        .parameters()
        .iter()
        .map(|p| p.to_vec::<f32>().unwrap())
        .collect()
}

fn captured_step_equals_uncaptured_steps(dev: &Device) {
    let data = batches(dev);
    // Run every step.
    let mut plain = model(dev);
    let mut want = Vec::new();
    for (x, y) in &data {
        want.push(step(&mut plain, x, y).unwrap()[0].item().unwrap());
    }
    // Capture on the second call, replay after.
    let mut m = model(dev);
    let mut jit = Jit::new(dev);
    let mut got = Vec::new();
    for (i, (x, y)) in data.iter().enumerate() {
        let (schedules, programs) = (dev.schedules(), dev.programs_built());
        let kernels = dev.kernels_launched();
        let out = jit
            .run(&[x, y], |inp| step(&mut m, &inp[0], &inp[1]))
            .unwrap();
        if i >= 2 {
            assert_eq!(dev.schedules(), schedules, "replay {i} scheduled");
            assert_eq!(dev.programs_built(), programs, "replay {i} compiled");
            assert_eq!(
                dev.kernels_launched() - kernels,
                jit.kernels().unwrap() as u64,
                "replay {i} launches the captured kernels"
            );
        }
        got.push(out[0].item().unwrap());
    }
    assert!(jit.is_captured());
    assert_eq!(got, want, "losses on {}", dev.name());
    assert_eq!(params(&m), params(&plain), "parameters on {}", dev.name());
    assert!(want[5] < want[0], "the loss went down: {want:?}");
}

// Each test has a device of its own: the counts it checks are its alone. (The binary's
// shared devices, `common::navi31()` and the like, count what other tests running at the
// same time compile and launch: a replay once "compiled" another test's kernel.)

/// A mock device of its own (an index no other test of the binary opens).
fn own(spec: &str) -> Device {
    am_mock::register();
    Device::open_with(spec, common::compiler()).unwrap()
}

#[test]
fn captured_step_replays_like_running_it_on_the_cpu() {
    captured_step_equals_uncaptured_steps(&Device::cpu_with(common::compiler()));
}

#[test]
fn captured_step_replays_like_running_it_on_navi31() {
    captured_step_equals_uncaptured_steps(&own("mock:navi31:43"));
}

/// The CDNA parts: AQL queues across 8 XCCs (MI300X) and a virtual function (MI350X).
#[test]
fn captured_step_replays_like_running_it_on_mi300x_and_mi350x() {
    captured_step_equals_uncaptured_steps(&own("mock:mi300x:43"));
    captured_step_equals_uncaptured_steps(&own("mock:mi350x-vf"));
}

/// RDNA4: PM4 queues on gfx1201 (navi48) and gfx1200 (navi44).
#[test]
fn captured_step_replays_like_running_it_on_navi48_and_navi44() {
    captured_step_equals_uncaptured_steps(&own("mock:navi48:43"));
    captured_step_equals_uncaptured_steps(&own("mock:navi44"));
}

#[test]
fn a_replay_refuses_inputs_of_another_shape() {
    let dev = cpu();
    let mut jit = Jit::new(&dev);
    let f = |inp: &[Tensor]| Ok(vec![inp[0].mul(2.0)?]);
    for _ in 0..2 {
        let x = Tensor::from_slice(&[1.0f32, 2.0], &[2], &dev).unwrap();
        jit.run(&[&x], f).unwrap();
    }
    let x = Tensor::from_slice(&[5.0f32, 6.0], &[2], &dev).unwrap();
    assert_eq!(
        jit.run(&[&x], f).unwrap()[0].to_vec::<f32>().unwrap(),
        [10.0, 12.0]
    );
    let bad = Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[3], &dev).unwrap();
    let e = jit.run(&[&bad], f).unwrap_err().to_string();
    assert!(
        e.contains("input 0") && e.contains("[3]") && e.contains("[2]"),
        "{e}"
    );
}
