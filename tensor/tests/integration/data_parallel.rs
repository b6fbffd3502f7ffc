//! Data-parallel training: a two-layer MLP trained on one device, and with each batch split
//! over several devices (each holding a replica of the parameters, computing its share of
//! the loss, its gradients all-reduced before every device's Adam steps), gives the same
//! losses within 1e-5 relative, and the replicas stay bit-identical.

use am_tensor::nn::{Adam, Linear, Optimizer};
use am_tensor::shard::all_reduce_gradients;
use am_tensor::{DType, Device, Tensor};

use crate::common::{Rng, compiler};
use crate::shard::{hive, hive_lock};

const BATCH: usize = 12;
const INPUTS: usize = 8;
const HIDDEN: usize = 16;
const CLASSES: usize = 4;
const STEPS: usize = 4;

struct Replica {
    fc1: Linear,
    fc2: Linear,
    opt: Adam,
}

impl Replica {
    /// Layers initialised on `dev` from the same seed, then given `from`'s exact values
    /// (so every replica starts from the same bits whatever the device computes).
    fn new(dev: &Device, from: Option<&Replica>) -> Replica {
        let fc1 = Linear::new(INPUTS, HIDDEN, 5, dev).unwrap();
        let fc2 = Linear::new(HIDDEN, CLASSES, 9, dev).unwrap();
        if let Some(f) = from {
            for (p, q) in params(&fc1, &fc2).iter().zip(f.params()) {
                p.assign(&q.detach().to(dev)).unwrap();
                p.realize().unwrap();
            }
        }
        let opt = Adam::new(params(&fc1, &fc2), 0.05).unwrap();
        Replica { fc1, fc2, opt }
    }

    fn params(&self) -> Vec<Tensor> {
        params(&self.fc1, &self.fc2)
    }

    /// `weight ×` the mean cross-entropy of the batch `x`, `y`.
    fn loss(&self, x: &Tensor, y: &Tensor, weight: f64) -> Tensor {
        let h = self.fc1.forward(x).unwrap().relu();
        let logits = self.fc2.forward(&h).unwrap();
        logits.cross_entropy(y).unwrap().mul(weight).unwrap()
    }
}

fn params(a: &Linear, b: &Linear) -> Vec<Tensor> {
    let mut v = a.parameters();
    v.extend(b.parameters());
    v
}

fn batches() -> Vec<(Vec<f32>, Vec<i32>)> {
    let mut rng = Rng(99);
    (0..STEPS)
        .map(|_| {
            let x = rng.values(BATCH * INPUTS, -1.0, 1.0);
            let y = (0..BATCH)
                .map(|_| (rng.uniform(0.0, CLASSES as f64) as i32).min(CLASSES as i32 - 1))
                .collect();
            (x, y)
        })
        .collect()
}

fn train_one(dev: &Device) -> (Vec<f32>, Replica) {
    let mut r = Replica::new(dev, None);
    let mut losses = Vec::new();
    for (x, y) in batches() {
        let x = Tensor::from_slice(&x, &[BATCH, INPUTS], dev).unwrap();
        let y = Tensor::from_slice(&y, &[BATCH], dev).unwrap();
        let loss = r.loss(&x, &y, 1.0);
        loss.backward().unwrap();
        r.opt.step(&[&loss]).unwrap();
        losses.push(loss.item().unwrap());
    }
    (losses, r)
}

fn train_parallel(devs: &[Device], reference: &Replica) -> (Vec<f32>, Vec<Replica>) {
    let mut reps: Vec<Replica> = Vec::new();
    for d in devs {
        let r = Replica::new(d, Some(reference));
        reps.push(r);
    }
    let mut losses = Vec::new();
    for (x, y) in batches() {
        let x = Tensor::from_slice(&x, &[BATCH, INPUTS], &devs[0]).unwrap();
        let y = Tensor::from_slice(&y, &[BATCH], &devs[0]).unwrap();
        let (xs, ys) = (x.shard(devs, 0).unwrap(), y.shard(devs, 0).unwrap());
        let mut parts = Vec::new();
        for ((r, xp), yp) in reps.iter().zip(xs.parts()).zip(ys.parts()) {
            let share = xp.shape()[0] as f64 / BATCH as f64;
            let loss = r.loss(xp, yp, share);
            loss.backward().unwrap();
            parts.push(loss);
        }
        let replicas: Vec<Vec<Tensor>> = reps.iter().map(Replica::params).collect();
        all_reduce_gradients(&replicas).unwrap();
        let mut total = 0.0f64;
        for (r, loss) in reps.iter_mut().zip(&parts) {
            r.opt.step(&[loss]).unwrap();
            total += f64::from(loss.item().unwrap());
        }
        losses.push(total as f32);
    }
    (losses, reps)
}

fn check(single: &Device, devs: &[Device]) {
    // The initial values every replica copies come from a separate model on the first device.
    let start = Replica::new(single, None);
    let (one, trained) = train_one(single);
    let (many, reps) = train_parallel(devs, &start);
    for (s, (a, b)) in one.iter().zip(&many).enumerate() {
        assert!(
            ((a - b) / a).abs() <= 1e-5,
            "step {s}: one device {a}, {} devices {b}",
            devs.len()
        );
    }
    let first = bits(&reps[0]);
    for (i, r) in reps.iter().enumerate() {
        let mine = bits(r);
        assert_eq!(mine, first, "replica {i} drifted from replica 0");
    }
    for (p, q) in trained.params().iter().zip(reps[0].params()) {
        for (a, b) in p.to_vec_f32().unwrap().iter().zip(q.to_vec_f32().unwrap()) {
            assert!(
                (a - b).abs() <= 1e-4,
                "parameters: one device {a}, sharded {b}"
            );
        }
    }
    assert_eq!(start.params()[0].dtype(), DType::F32);
}

#[test]
fn data_parallel_training_on_three_cpus_matches_one() {
    let devs: Vec<Device> = (0..3).map(|_| Device::cpu_with(compiler())).collect();
    check(&devs[0], &devs);
}

#[test]
fn data_parallel_training_on_a_hive_matches_one_member() {
    let _hive = hive_lock();
    let devs = hive();
    check(&devs[0], &devs);
}

/// One data-parallel step on `reps` (one per device) from each device's piece of the batch
/// (`inputs`: x then y of every device): each device's share of the loss and its backward
/// pass, the gradients' all-reduce, every device's Adam step. Returns each device's share.
fn parallel_step(reps: &mut [Replica], inputs: &[Tensor]) -> am_tensor::Result<Vec<Tensor>> {
    let mut parts = Vec::new();
    for (d, r) in reps.iter().enumerate() {
        let (x, y) = (&inputs[2 * d], &inputs[2 * d + 1]);
        let loss = r.loss(x, y, x.shape()[0] as f64 / BATCH as f64);
        loss.backward()?;
        parts.push(loss);
    }
    let replicas: Vec<Vec<Tensor>> = reps.iter().map(Replica::params).collect();
    all_reduce_gradients(&replicas)?;
    for (r, loss) in reps.iter_mut().zip(&parts) {
        r.opt.step(&[loss])?;
    }
    Ok(parts)
}

/// Per device, the submissions and host waits of one replay.
type Counts = Vec<(u64, u64)>;

/// The data-parallel step of [`parallel_step`] on `devs`, `steps` times, run as it is or
/// captured across the devices (`am_tensor::Jit::spanning`): each step's losses, the
/// trained replicas, and for steps 3 on (the captured step's replays) the submissions and
/// host waits each device saw.
fn train_steps(
    devs: &[Device],
    start: &Replica,
    steps: usize,
    captured: bool,
) -> (Vec<Vec<u32>>, Vec<Replica>, Vec<Counts>) {
    let mut reps: Vec<Replica> = devs.iter().map(|d| Replica::new(d, Some(start))).collect();
    let mut jit = am_tensor::Jit::spanning(devs).unwrap();
    let mut rng = Rng(7);
    let (mut losses, mut counts) = (Vec::new(), Vec::new());
    for s in 0..steps {
        let x = Tensor::from_slice(
            &rng.values(BATCH * INPUTS, -1.0, 1.0),
            &[BATCH, INPUTS],
            &devs[0],
        )
        .unwrap();
        let labels: Vec<i32> = (0..BATCH).map(|i| ((i * 7 + s) % CLASSES) as i32).collect();
        let y = Tensor::from_slice(&labels, &[BATCH], &devs[0]).unwrap();
        let (xs, ys) = (x.shard(devs, 0).unwrap(), y.shard(devs, 0).unwrap());
        let mut inputs = Vec::new();
        for (xp, yp) in xs.parts().iter().zip(ys.parts()) {
            inputs.extend([xp.clone(), yp.clone()]);
        }
        Tensor::realize_all(&inputs.iter().collect::<Vec<_>>()).unwrap();
        let seen = |d: &Device| {
            let rt = d.runtime().unwrap();
            (rt.submissions(), rt.host_waits())
        };
        let before: Vec<(u64, u64)> = devs.iter().map(seen).collect();
        let replay = !captured || jit.is_captured();
        let parts = if captured {
            jit.run(&inputs.iter().collect::<Vec<_>>(), |i| {
                parallel_step(&mut reps, i)
            })
            .unwrap()
        } else {
            parallel_step(&mut reps, &inputs).unwrap()
        };
        if replay && s >= 2 {
            counts.push(
                devs.iter()
                    .zip(&before)
                    .map(|(d, b)| {
                        let a = seen(d);
                        (a.0 - b.0, a.1 - b.1)
                    })
                    .collect(),
            );
        }
        losses.push(parts.iter().map(|p| p.item().unwrap().to_bits()).collect());
    }
    (losses, reps, counts)
}

/// The data-parallel step captured across two hive members (one runtime graph over both
/// devices' queues, the all-reduce's copies and sums included) replays to the same bits as
/// the same step run uncaptured — every device's loss at every step and every parameter at
/// the end — with the batch in fresh memory each step (the graph's input arguments
/// patched), and a replay submits at most once to each of a device's two queues and waits
/// on the host only for their ends — fewer submissions than the same step uncaptured (there
/// 9 per device and step, replayed 2; host waits, counted only when the work is not done
/// yet, depend on the mock's speed and are held to the submissions). The devices are a hive of their own
/// (`mock:mi300x-hive4:64..65`): the counts are theirs alone.
#[test]
fn a_data_parallel_step_captured_across_a_hive_replays_the_uncaptured_bits() {
    am_mock::register();
    let devs: Vec<Device> = (64..66)
        .map(|i| Device::open_with(&format!("mock:mi300x-hive4:{i}"), compiler()).unwrap())
        .collect();
    let start = Replica::new(&devs[0], None);
    let (plain, plain_reps, plain_counts) = train_steps(&devs, &start, 5, false);
    let (replayed, reps, counts) = train_steps(&devs, &start, 5, true);
    assert_eq!(counts.len(), 3, "steps 3 to 5 are replays");
    assert_eq!(
        replayed, plain,
        "every device's loss at every step, bit for bit"
    );
    for (d, (a, b)) in reps.iter().zip(&plain_reps).enumerate() {
        assert_eq!(bits(a), bits(b), "device {d}: the trained parameters");
    }
    for (r, per_device) in counts.iter().enumerate() {
        for (d, &(submissions, waits)) in per_device.iter().enumerate() {
            assert!(
                (1..=2).contains(&submissions) && waits <= submissions,
                "replay {r}, device {d}: {submissions} submissions and {waits} host waits \
                 (one submission per queue, waits only for their ends)"
            );
            // Host waits are only counted when the work was not done yet, so the uncaptured
            // step's depend on how fast the mock's queues ran: only submissions compare.
            let (s0, _) = plain_counts[r][d];
            assert!(
                submissions < s0,
                "replay {r}, device {d}: {submissions} submissions, the uncaptured step {s0}"
            );
        }
    }
}

/// The bits of every parameter of a replica.
fn bits(r: &Replica) -> Vec<Vec<u32>> {
    r.params()
        .iter()
        .map(|p| {
            p.to_vec_f32()
                .unwrap()
                .iter()
                .map(|v| v.to_bits())
                .collect()
        })
        .collect()
}
