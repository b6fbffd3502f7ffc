//! Two emulated Navi 31 outside any hive (`mock:navi31:70`, `:71`): they link over PCIe
//! (each large BAR), and an all-reduce across them gives exact sums with nothing staged in
//! host memory — the direct algorithm reading each other's chunks in place through the
//! other's BAR0, the ring copying them with the destination's SDMA.

use am_runtime::Link;
use am_tensor::shard::{Algorithm, ReduceOp};
use am_tensor::{Device, Sharded, Tensor};

use crate::common::{Rng, compiler};

#[test]
fn an_all_reduce_over_two_navi31_goes_over_pcie_with_exact_sums() {
    am_mock::register();
    let devs: Vec<Device> = (70..72)
        .map(|i| Device::open_with(&format!("mock:navi31:{i}"), compiler()).unwrap())
        .collect();
    let rt = |d: &Device| d.runtime().unwrap().clone();
    let (a, b) = (rt(&devs[0]), rt(&devs[1]));
    assert_eq!(a.link_to(&b).unwrap(), Link::PciePeer { generation: 4 });
    assert_eq!(b.link_to(&a).unwrap(), Link::PciePeer { generation: 4 });
    let staged = || a.host_staged_bytes() + b.host_staged_bytes();
    let before = staged();
    let mut rng = Rng(70);
    let n = 1000;
    let data: Vec<Vec<f32>> = (0..2).map(|_| rng.values(n, -4.0, 4.0)).collect();
    let want: Vec<u32> = (0..n)
        .map(|i| (data[0][i] + data[1][i]).to_bits())
        .collect();
    for algo in [Algorithm::Direct, Algorithm::Ring] {
        let parts = devs
            .iter()
            .zip(&data)
            .map(|(d, v)| Tensor::from_slice(v, &[n], d).unwrap())
            .collect();
        let sum = Sharded::from_parts(parts, None)
            .unwrap()
            .all_reduce_with(ReduceOp::Sum, algo)
            .unwrap();
        for p in sum.parts() {
            let got: Vec<u32> = p
                .to_vec_f32()
                .unwrap()
                .iter()
                .map(|x| x.to_bits())
                .collect();
            assert_eq!(got, want, "{algo:?} on {}", p.device().name());
        }
    }
    assert_eq!(staged(), before, "nothing went through host memory");
    for i in 70..72 {
        let g = am_mock::gpu("navi31", i).unwrap();
        assert!(
            g.violations().is_empty(),
            "{}: {:?}",
            g.name(),
            g.violations()
        );
    }
}
