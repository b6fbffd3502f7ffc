//! Sharded tensors and collectives: pieces and replicas on several devices, operations run
//! per device, all-reduce (ring and tree, sum and max), all-gather, reduce-scatter and
//! broadcast against host references, gradients through them, the transport each pair of
//! devices takes, and a member that faults or hangs mid-collective.
//!
//! Devices: three `cpu` devices (each `Device::cpu_with` is a device of its own: an odd
//! count, so chunks are uneven and the tree is not a power of two) and the four members of
//! the mock hive `mock:mi300x-hive4:40..43`; the fault tests take hives of their own (`:44..47`, `:48..51`).
//!
//! Every collective, joins (`Tensor::cat`: `gather`, `all_gather`, the ring's last step)
//! included, is checked on both sets of devices.

use std::sync::{Mutex, MutexGuard, OnceLock};

use am_tensor::shard::{Algorithm, ReduceOp, all_reduce_gradients};
use am_tensor::{Device, Tensor};

use crate::common::{Rng, compiler};

/// Three distinct cpu devices.
fn cpus() -> Vec<Device> {
    static D: OnceLock<Vec<Device>> = OnceLock::new();
    D.get_or_init(|| (0..3).map(|_| Device::cpu_with(compiler())).collect())
        .clone()
}

/// Held by each test that uses the shared hive: one test at a time drives its four emulated
/// MI300X. Not for correctness (the runtime takes submissions to one device from any thread:
/// `runtime_hive::a_peers_writes_are_flushed_before_a_copy_queue_sees_the_copy` in the am-tests
/// crate; the hangs once blamed on overlapping tests were a late HDP flush): a fault is
/// reported by the device, not by the work that caused it, so a test that faulted a shared
/// member would fail whichever test waited on that member next.
pub fn hive_lock() -> MutexGuard<'static, ()> {
    static L: Mutex<()> = Mutex::new(());
    L.lock().unwrap_or_else(|p| p.into_inner())
}

/// The members of one mock MI300X hive, opened once per test binary.
pub fn hive() -> Vec<Device> {
    static D: OnceLock<Vec<Device>> = OnceLock::new();
    D.get_or_init(|| {
        am_mock::register();
        (40..44)
            .map(|i| Device::open_with(&format!("mock:mi300x-hive4:{i}"), compiler()).unwrap())
            .collect()
    })
    .clone()
}

fn both() -> [Vec<Device>; 2] {
    [cpus(), hive()]
}

fn names(devs: &[Device]) -> String {
    devs.iter().map(|d| d.name()).collect::<Vec<_>>().join(",")
}

/// Each part's f32 elements.
fn part_values(s: &am_tensor::Sharded) -> Vec<Vec<f32>> {
    s.parts().iter().map(|p| p.to_vec_f32().unwrap()).collect()
}

#[test]
fn shard_cuts_along_the_axis_and_gather_joins_the_pieces() {
    let _hive = hive_lock();
    for devs in both() {
        let mut rng = Rng(1);
        let data = rng.values(7 * 5, -2.0, 2.0);
        let x = Tensor::from_slice(&data, &[7, 5], &devs[0]).unwrap();
        let rows = x.shard(&devs[..3], 0).unwrap();
        let lens: Vec<usize> = rows.parts().iter().map(|p| p.shape()[0]).collect();
        assert_eq!(lens, [3, 2, 2], "{}: 7 rows over 3 devices", names(&devs));
        assert_eq!(rows.shape(), [7, 5]);
        for (p, d) in rows.parts().iter().zip(&devs) {
            assert_eq!(&p.device(), d, "each piece lives on its device");
        }
        assert_eq!(rows.parts()[1].to_vec_f32().unwrap(), data[15..25]);
        let cols = x.shard(&devs[..3], 1).unwrap();
        assert_eq!(cols.parts()[0].shape(), [7, 2]);
        for s in [&rows, &cols] {
            let back = s.gather(&devs[2]).unwrap();
            assert_eq!(back.to_vec_f32().unwrap(), data, "{}", names(&devs));
        }
        let r = x.replicate(&devs).unwrap();
        assert_eq!(r.axis(), None);
        assert!(part_values(&r).iter().all(|p| *p == data));
        assert!(x.shard(&devs, 0).is_ok());
        let err = Tensor::from_slice(&data[..2], &[2], &devs[0])
            .unwrap()
            .shard(&devs[..3], 0)
            .unwrap_err()
            .to_string();
        assert!(err.contains("2 elements for 3 devices"), "{err}");
    }
}

/// `relu(x · w + b)` with `x` sharded by rows and `w`, `b` replicated, then reductions
/// along and across the sharded axis: the same as on one device.
#[test]
fn operations_on_sharded_tensors_run_per_device_and_match_one_device() {
    let _hive = hive_lock();
    // Joins pieces to compare (see the module's comment): the cpu devices.
    for devs in [cpus()] {
        let one = &devs[0];
        let mut rng = Rng(2);
        let (xd, wd, bd) = (
            rng.values(9 * 6, -1.0, 1.0),
            rng.values(6 * 4, -1.0, 1.0),
            rng.values(4, -0.5, 0.5),
        );
        let x = Tensor::from_slice(&xd, &[9, 6], one).unwrap();
        let w = Tensor::from_slice(&wd, &[6, 4], one).unwrap();
        let b = Tensor::from_slice(&bd, &[4], one).unwrap();
        let single = x.matmul(&w).unwrap().add(&b).unwrap().relu();

        let xs = x.shard(&devs, 0).unwrap();
        let (ws, bs) = (w.replicate(&devs).unwrap(), b.replicate(&devs).unwrap());
        let y = xs
            .matmul(&ws)
            .unwrap()
            .add(&bs)
            .unwrap()
            .map(|t| Ok(t.relu()))
            .unwrap();
        assert_eq!(y.axis(), Some(0), "row-sharded stays row-sharded");
        let expect = single.to_vec_f32().unwrap();
        assert_eq!(y.to_vec_f32().unwrap(), expect, "{}", names(&devs));

        // Along the rows of each piece: per device, still sharded.
        let rowsum = y.sum(&[1], false).unwrap();
        assert_eq!(rowsum.axis(), Some(0));
        assert_eq!(
            rowsum.to_vec_f32().unwrap(),
            single.sum(&[1], false).unwrap().to_vec_f32().unwrap()
        );
        // Across the sharded axis: an all-reduce, replicated.
        let total = y.sum(&[], false).unwrap();
        assert_eq!(total.axis(), None);
        let want = single.sum(&[], false).unwrap().item().unwrap();
        for v in part_values(&total) {
            assert!(
                (v[0] - want).abs() <= 1e-5 * want.abs().max(1.0),
                "{v:?} {want}"
            );
        }
        let top = y.max(&[0], false).unwrap();
        let want = single.max(&[0], false).unwrap().to_vec_f32().unwrap();
        for v in part_values(&top) {
            assert_eq!(v, want, "a maximum is exact in any order");
        }

        // Columns of w sharded: the product is sharded along its last axis.
        let wc = w.shard(&devs, 1).unwrap();
        let xr = x.replicate(&devs).unwrap();
        let yc = xr.matmul(&wc).unwrap();
        assert_eq!(yc.axis(), Some(1));
        assert_eq!(
            yc.to_vec_f32().unwrap(),
            x.matmul(&w).unwrap().to_vec_f32().unwrap()
        );
        // The summed axis sharded on both sides: partial products all-reduced.
        let xk = x.shard(&devs, 1).unwrap();
        let wk = w.shard(&devs, 0).unwrap();
        let yk = xk.matmul(&wk).unwrap();
        assert_eq!(yk.axis(), None);
        let want = x.matmul(&w).unwrap().to_vec_f32().unwrap();
        for v in part_values(&yk) {
            for (a, e) in v.iter().zip(&want) {
                assert!((a - e).abs() <= 1e-5, "{a} against {e}");
            }
        }
        // Layouts with no per-device product are refused by name.
        let err = xs.matmul(&wk).unwrap_err().to_string();
        assert!(err.contains("no per-device product"), "{err}");
        let err = xs
            .add(&x.replicate(&devs).unwrap())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("length 1 along the other's sharded axis"),
            "{err}"
        );
    }
}

#[test]
fn all_reduce_gives_every_device_the_reduction_in_the_same_bits() {
    let _hive = hive_lock();
    for devs in both() {
        let n = devs.len();
        for numel in [1usize, 5, 1000] {
            let mut rng = Rng(numel as u64);
            let data: Vec<Vec<f32>> = (0..n).map(|_| rng.values(numel, -3.0, 3.0)).collect();
            let parts: Vec<Tensor> = data
                .iter()
                .zip(&devs)
                .map(|(v, d)| Tensor::from_slice(v, &[numel], d).unwrap())
                .collect();
            let s = am_tensor::Sharded::from_parts(parts, None).unwrap();
            let algos = [
                Algorithm::Ring,
                Algorithm::Tree,
                Algorithm::Direct,
                Algorithm::Auto,
            ];
            for algo in algos {
                for op in [ReduceOp::Sum, ReduceOp::Max] {
                    let r = s.all_reduce_with(op, algo).unwrap();
                    r.realize().unwrap();
                    let got = part_values(&r);
                    for (i, g) in got.iter().enumerate() {
                        assert_eq!(
                            g.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                            got[0].iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                            "{}: device {i} differs from device 0 ({algo:?}, {op:?}, {numel})",
                            names(&devs)
                        );
                    }
                    for (e, g) in got[0].iter().enumerate() {
                        let want = match op {
                            ReduceOp::Sum => data.iter().map(|v| f64::from(v[e])).sum::<f64>(),
                            ReduceOp::Max => data
                                .iter()
                                .map(|v| f64::from(v[e]))
                                .fold(f64::MIN, f64::max),
                        };
                        assert!(
                            (f64::from(*g) - want).abs() <= 1e-5,
                            "{algo:?} {op:?} element {e}: {g} against {want}"
                        );
                    }
                }
            }
        }
        let odd = am_tensor::Sharded::from_parts(
            devs.iter()
                .enumerate()
                .map(|(i, d)| Tensor::zeros(&[i + 1], am_tensor::DType::F32, d))
                .collect(),
            Some(0),
        )
        .unwrap();
        let err = odd.all_reduce(ReduceOp::Sum).unwrap_err().to_string();
        assert!(err.contains("different shapes"), "{err}");
    }
}

#[test]
fn the_rings_all_reduce_joins_its_chunks_without_a_kernel() {
    let _hive = hive_lock();
    for devs in both() {
        let n = devs.len();
        let mut rng = Rng(11);
        let data: Vec<Vec<f32>> = (0..n).map(|_| rng.values(1000, -3.0, 3.0)).collect();
        let parts = || -> am_tensor::Sharded {
            let p = data
                .iter()
                .zip(&devs)
                .map(|(v, d)| Tensor::from_slice(v, &[10, 100], d).unwrap())
                .collect();
            am_tensor::Sharded::from_parts(p, None).unwrap()
        };
        let launched = || -> Vec<u64> { devs.iter().map(Device::kernels_launched).collect() };
        // The reduce-scatter alone: the kernels the all-reduce needs (the sums, and each
        // chunk cut out of its part).
        let before = launched();
        let flat = am_tensor::Sharded::from_parts(
            parts()
                .parts()
                .iter()
                .map(|p| p.reshape(&[-1]).unwrap())
                .collect(),
            None,
        )
        .unwrap();
        flat.reduce_scatter(ReduceOp::Sum, 0)
            .unwrap()
            .realize()
            .unwrap();
        let scatter: Vec<u64> = launched().iter().zip(&before).map(|(a, b)| a - b).collect();
        let before = launched();
        let r = parts()
            .all_reduce_with(ReduceOp::Sum, Algorithm::Ring)
            .unwrap();
        r.realize().unwrap();
        let ring: Vec<u64> = launched().iter().zip(&before).map(|(a, b)| a - b).collect();
        assert_eq!(
            ring,
            scatter,
            "{}: the all-gather and the join launch no kernel",
            names(&devs)
        );
        let got = part_values(&r);
        for (e, g) in got[0].iter().enumerate() {
            let want: f64 = data.iter().map(|v| f64::from(v[e])).sum();
            assert!(
                (f64::from(*g) - want).abs() <= 1e-5,
                "element {e}: {g} against {want}"
            );
        }
        assert_eq!(r.parts()[0].shape(), vec![10, 100]);
    }
}

/// Chunks that start on a buffer's alignment (256 bytes) are copied from where they lie in
/// their part, so the ring's only kernels are its sums (`n − 1` per device); and pieces along
/// the first axis are gathered by copies, with no `cat` kernel.
#[test]
fn aligned_chunks_are_copied_in_place_and_all_gather_launches_no_kernel() {
    let _hive = hive_lock();
    let devs = hive();
    let n = devs.len();
    let mut rng = Rng(5);
    // 64 rows of 64 f32 per part: chunks of 16 rows, 4 KiB each.
    let data: Vec<Vec<f32>> = (0..n).map(|_| rng.values(64 * 64, -2.0, 2.0)).collect();
    let parts: Vec<Tensor> = data
        .iter()
        .zip(&devs)
        .map(|(v, d)| Tensor::from_slice(v, &[64, 64], d).unwrap())
        .collect();
    let s = am_tensor::Sharded::from_parts(parts, None).unwrap();
    s.realize().unwrap();
    let launched = || -> Vec<u64> { devs.iter().map(Device::kernels_launched).collect() };
    let before = launched();
    let r = s.all_reduce_with(ReduceOp::Sum, Algorithm::Ring).unwrap();
    r.realize().unwrap();
    let ring: Vec<u64> = launched().iter().zip(&before).map(|(a, b)| a - b).collect();
    assert_eq!(
        ring,
        vec![n as u64 - 1; n],
        "only the sums launch kernels (no chunk is cut out by a kernel)"
    );
    for (d, got) in part_values(&r).iter().enumerate() {
        for (e, g) in got.iter().enumerate() {
            let want: f64 = data.iter().map(|v| f64::from(v[e])).sum();
            assert!(
                (f64::from(*g) - want).abs() <= 1e-5,
                "device {d}, element {e}: {g} against {want}"
            );
        }
    }
    let pieces = s.parts()[0].shard(&devs, 0).unwrap();
    pieces.realize().unwrap();
    let before = launched();
    let all = pieces.all_gather().unwrap();
    all.realize().unwrap();
    let gathered: Vec<u64> = launched().iter().zip(&before).map(|(a, b)| a - b).collect();
    assert_eq!(gathered, vec![0; n], "all_gather joins by copies");
    for v in part_values(&all) {
        assert_eq!(v, data[0], "every device has the whole tensor");
    }
}

#[test]
fn reduce_scatter_all_gather_and_broadcast() {
    let _hive = hive_lock();
    for devs in both() {
        let n = devs.len();
        let mut rng = Rng(7);
        let data: Vec<Vec<f32>> = (0..n).map(|_| rng.values(10 * 3, -1.0, 1.0)).collect();
        let parts: Vec<Tensor> = data
            .iter()
            .zip(&devs)
            .map(|(v, d)| Tensor::from_slice(v, &[10, 3], d).unwrap())
            .collect();
        let s = am_tensor::Sharded::from_parts(parts, None).unwrap();
        let rs = s.reduce_scatter(ReduceOp::Sum, 0).unwrap();
        assert_eq!(rs.axis(), Some(0));
        let sum: Vec<f64> = (0..30)
            .map(|e| data.iter().map(|v| f64::from(v[e])).sum())
            .collect();
        let mut row = 0;
        for (i, p) in rs.parts().iter().enumerate() {
            assert_eq!(p.device(), devs[i], "piece {i} on device {i}");
            let rows = p.shape()[0];
            let got = p.to_vec_f32().unwrap();
            for (k, g) in got.iter().enumerate() {
                assert!((f64::from(*g) - sum[row * 3 + k]).abs() <= 1e-5);
            }
            row += rows;
        }
        assert_eq!(row, 10, "the pieces cover every row");
        let all = rs.all_gather().unwrap();
        assert_eq!(all.axis(), None);
        let whole = rs.gather(&devs[0]).unwrap().to_vec_f32().unwrap();
        for v in part_values(&all) {
            assert_eq!(v, whole, "every device has every piece");
        }
        let b = Tensor::from_slice(&data[0], &[10, 3], &devs[n - 1])
            .unwrap()
            .replicate(&devs)
            .unwrap();
        for v in part_values(&b) {
            assert_eq!(v, data[0], "broadcast from the last device");
        }
    }
}

/// `loss = Σ w ⊙ all_reduce(c_i ⊙ x_i)` read from one replica: `∂loss/∂x_i = c_i ⊙ w`; and
/// through shard → all-gather, `∂Σ (g ⊙ v)/∂x = v`; a maximum's gradient goes to the
/// device holding it.
#[test]
fn gradients_flow_through_collectives() {
    let _hive = hive_lock();
    for devs in both() {
        let n = devs.len();
        let mut rng = Rng(11);
        let w = rng.values(6, -1.0, 1.0);
        let xs: Vec<Tensor> = devs
            .iter()
            .map(|d| {
                let t = Tensor::from_slice(&rng.values(6, -1.0, 1.0), &[6], d).unwrap();
                t.set_requires_grad(true);
                t
            })
            .collect();
        let algos = [Algorithm::Ring, Algorithm::Tree];
        for algo in algos {
            for x in &xs {
                x.zero_grad();
            }
            let contrib: Vec<Tensor> = xs
                .iter()
                .enumerate()
                .map(|(i, x)| x.mul((i + 1) as f64).unwrap())
                .collect();
            let r = am_tensor::Sharded::from_parts(contrib, None)
                .unwrap()
                .all_reduce_with(ReduceOp::Sum, algo)
                .unwrap();
            let wr = Tensor::from_slice(&w, &[6], &devs[0])
                .unwrap()
                .replicate(&devs)
                .unwrap();
            let loss = r.mul(&wr).unwrap().sum(&[], false).unwrap();
            loss.backward().unwrap();
            for (i, x) in xs.iter().enumerate() {
                let g = x.grad().unwrap().to_vec_f32().unwrap();
                let want: Vec<f32> = w.iter().map(|v| v * (i + 1) as f32).collect();
                for (a, e) in g.iter().zip(&want) {
                    assert!((a - e).abs() <= 1e-6, "{algo:?} device {i}: {g:?} {want:?}");
                }
                assert_eq!(
                    x.grad().unwrap().device(),
                    devs[i],
                    "the gradient stays home"
                );
            }
        }

        let v = rng.values(4 * n, -1.0, 1.0);
        let x = Tensor::from_slice(&rng.values(4 * n, -1.0, 1.0), &[4 * n], &devs[0]).unwrap();
        x.set_requires_grad(true);
        let g = x.shard(&devs, 0).unwrap().all_gather().unwrap();
        let vr = Tensor::from_slice(&v, &[4 * n], &devs[1])
            .unwrap()
            .replicate(&devs)
            .unwrap();
        g.mul(&vr)
            .unwrap()
            .sum(&[], false)
            .unwrap()
            .backward()
            .unwrap();
        let got = x.grad().unwrap().to_vec_f32().unwrap();
        for (a, e) in got.iter().zip(&v) {
            assert!((a - e).abs() <= 1e-6, "{got:?} {v:?}");
        }

        // Device i holds [i, −i]: element 0's maximum is on the last device, element 1's on
        // the first.
        let ms: Vec<Tensor> = devs
            .iter()
            .enumerate()
            .map(|(i, d)| {
                let t = Tensor::from_slice(&[i as f32, -(i as f32)], &[2], d).unwrap();
                t.set_requires_grad(true);
                t
            })
            .collect();
        let m = am_tensor::Sharded::from_parts(ms.clone(), None)
            .unwrap()
            .all_reduce(ReduceOp::Max)
            .unwrap();
        m.sum(&[], false).unwrap().backward().unwrap();
        for (i, t) in ms.iter().enumerate() {
            let g = t.grad().unwrap().to_vec_f32().unwrap();
            let want = [
                if i == n - 1 { 1.0 } else { 0.0 },
                if i == 0 { 1.0 } else { 0.0 },
            ];
            assert_eq!(
                g, want,
                "device {i}: the maximum's gradient goes where it was"
            );
        }
    }
}

#[test]
fn all_reduce_gradients_sums_every_devices_gradient_into_each() {
    let _hive = hive_lock();
    for devs in both() {
        let params: Vec<Vec<Tensor>> = devs
            .iter()
            .enumerate()
            .map(|(i, d)| {
                let p = Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[3], d).unwrap();
                p.set_requires_grad(true);
                p.mul((i + 1) as f64)
                    .unwrap()
                    .sum(&[], false)
                    .unwrap()
                    .backward()
                    .unwrap();
                vec![p]
            })
            .collect();
        all_reduce_gradients(&params).unwrap();
        let n = devs.len() as f32;
        let want = n * (n + 1.0) / 2.0;
        for r in &params {
            assert_eq!(r[0].grad().unwrap().to_vec_f32().unwrap(), [want; 3]);
        }
        let missing: Vec<Vec<Tensor>> = devs
            .iter()
            .map(|d| {
                let p = Tensor::zeros(&[2], am_tensor::DType::F32, d);
                p.set_requires_grad(true);
                vec![p]
            })
            .collect();
        let err = all_reduce_gradients(&missing).unwrap_err().to_string();
        assert!(err.contains("has no gradient"), "{err}");
    }
}

#[test]
fn each_pair_of_devices_takes_its_link() {
    let _hive = hive_lock();
    use am_runtime::Link;
    let h = hive();
    let rt = |d: &Device| d.runtime().unwrap().clone();
    assert_eq!(rt(&h[0]).link_to(&rt(&h[0])).unwrap(), Link::Local);
    assert_eq!(rt(&h[0]).link_to(&rt(&h[3])).unwrap(), Link::Xgmi);
    assert_eq!(rt(&h[2]).link_to(&rt(&h[1])).unwrap(), Link::Xgmi);
    am_mock::register();
    let lone = Device::open_with("mock:navi31:40", compiler()).unwrap();
    // Outside the hive: the MI300X reads the Navi 31's VRAM over PCIe (at Navi 31's PCIe
    // 4.0); the Navi 31's 44-bit DMA mask does not reach the MI300X's BAR0, so that way is
    // staged through the host.
    let pcie = Link::PciePeer { generation: 4 };
    assert_eq!(rt(&h[1]).link_to(&rt(&lone)).unwrap(), pcie);
    assert_eq!(rt(&lone).link_to(&rt(&h[1])).unwrap(), Link::Host);
    // A tensor crosses either link with its bytes intact.
    let data: Vec<f32> = (0..3000).map(|i| i as f32 * 0.5).collect();
    let t = Tensor::from_slice(&data, &[3000], &h[0]).unwrap();
    let there = t.to(&lone).to(&h[2]);
    assert_eq!(there.to_vec_f32().unwrap(), data);
}

/// The four members of the mock hive whose first index is `first`, opened for a test that
/// must have them to itself.
fn own_hive(first: u32) -> Vec<Device> {
    (first..first + 4)
        .map(|i| Device::open_with(&format!("mock:mi300x-hive4:{i}"), compiler()).unwrap())
        .collect()
}

/// Every part of `r` holds 4096 copies of `want`.
fn assert_parts(r: &am_tensor::Sharded, want: f32, what: &str) {
    for v in part_values(r) {
        assert_eq!(v, vec![want; 4096], "{what}");
    }
}

/// 4096 copies of `v` on each of `devs`, one part per device.
fn filled(devs: &[Device], v: f32) -> am_tensor::Sharded {
    am_tensor::Sharded::from_parts(
        devs.iter()
            .map(|d| Tensor::from_slice(&[v; 4096], &[4096], d).unwrap())
            .collect(),
        None,
    )
    .unwrap()
}

/// A member whose GPU reports a page fault while an all-reduce runs fails the step with an
/// error naming it; the other members go on with collectives among themselves at once, and
/// the faulted one joins again after its recovery.
#[test]
fn a_member_that_faults_mid_collective_fails_the_step_and_the_others_go_on() {
    let _hive = hive_lock();
    use am_mock::ip::gmc::Hub;
    use am_mock::walker::Access;
    am_mock::register();
    let devs = own_hive(44);
    let ok = filled(&devs, 1.0).all_reduce(ReduceOp::Sum).unwrap();
    assert_eq!(part_values(&ok)[3][0], 4.0);

    let bad = am_mock::gpu("mi300x-hive4", 46).unwrap();
    bad.inject_page_fault(Hub::gc(0), 0, 0x7_0000_0000, Access::Read)
        .unwrap();
    let step = filled(&devs, 2.0).all_reduce(ReduceOp::Sum).unwrap();
    let err = step.realize().unwrap_err().to_string();
    assert!(
        err.contains("mock:mi300x-hive4:46") && err.to_lowercase().contains("fault"),
        "the error names the member that faulted: {err}"
    );

    let others = [devs[0].clone(), devs[1].clone(), devs[3].clone()];
    let r = filled(&others, 3.0).all_reduce(ReduceOp::Sum).unwrap();
    assert_parts(&r, 9.0, "the other members go on without the faulted one");
    devs[2].runtime().unwrap().recover().unwrap();
    let r = filled(&devs, 0.5)
        .all_reduce_with(ReduceOp::Sum, Algorithm::Tree)
        .unwrap();
    assert_parts(&r, 2.0, "after its recovery the member takes part again");

    // The direct algorithm, whose kernels read the other members' memory in place and
    // whose steps run on every member at once, fails the same way and recovers the same.
    bad.inject_page_fault(Hub::gc(0), 0, 0x7_0000_0000, Access::Read)
        .unwrap();
    let step = filled(&devs, 2.0)
        .all_reduce_with(ReduceOp::Sum, Algorithm::Direct)
        .unwrap();
    let err = step.realize().unwrap_err().to_string();
    assert!(
        err.contains("mock:mi300x-hive4:46") && err.to_lowercase().contains("fault"),
        "the direct all-reduce's error names the member that faulted: {err}"
    );
    devs[2].runtime().unwrap().recover().unwrap();
    let r = filled(&devs, 0.25)
        .all_reduce_with(ReduceOp::Sum, Algorithm::Direct)
        .unwrap();
    assert_parts(&r, 1.0, "after its recovery the member takes part again");
}

/// A member that hangs while an all-reduce runs (its kernel never ends: the mock's watchdog
/// stops it and its queue never signals) fails the step, once the wait for it times out,
/// with an error naming it and its queue; the other members go on at once, and the hung one
/// takes part again after its recovery.
#[test]
fn a_member_that_hangs_mid_collective_fails_the_step_naming_it_and_the_others_go_on() {
    let _hive = hive_lock();
    am_mock::register();
    let devs = own_hive(48);
    let r = filled(&devs, 1.0)
        .all_reduce_with(ReduceOp::Sum, Algorithm::Direct)
        .unwrap();
    assert_eq!(part_values(&r)[2][0], 4.0);

    let stuck = am_mock::gpu("mi300x-hive4", 50).unwrap();
    let rt = devs[2].runtime().unwrap();
    rt.set_wait_timeout(std::time::Duration::from_secs(2));
    // One wave-instruction: every dispatch of the member runs past it.
    stuck.set_watchdog(1);
    let step = filled(&devs, 2.0)
        .all_reduce_with(ReduceOp::Sum, Algorithm::Direct)
        .unwrap();
    let err = step.realize().unwrap_err().to_string();
    assert!(
        err.starts_with("mock:mi300x-hive4:50 ") && err.contains(" hung: waited "),
        "the error names the member that hung, once the wait timed out: {err}"
    );

    let others = [devs[0].clone(), devs[1].clone(), devs[3].clone()];
    let r = filled(&others, 3.0).all_reduce(ReduceOp::Sum).unwrap();
    assert_parts(&r, 9.0, "the other members go on without the hung one");
    stuck.set_watchdog(am_mock::engine::DEFAULT_WATCHDOG);
    rt.recover().unwrap();
    rt.set_wait_timeout(am_runtime::DEFAULT_TIMEOUT);
    let r = filled(&devs, 0.5)
        .all_reduce_with(ReduceOp::Sum, Algorithm::Direct)
        .unwrap();
    assert_parts(&r, 2.0, "after its recovery the member takes part again");
}
