//! Bad input is an error that names the operation, the shapes or dtypes, and the device,
//! never a panic.

use crate::common;

use am_tensor::{DType, Tensor};
use common::{cpu, navi31};

fn err<T: std::fmt::Debug>(r: am_tensor::Result<T>) -> String {
    r.unwrap_err().to_string()
}

#[test]
fn shape_errors_name_the_operation_and_shapes() {
    let dev = cpu();
    let a = Tensor::zeros(&[2, 3], DType::F32, &dev);
    let b = Tensor::zeros(&[4], DType::F32, &dev);
    let e = err(a.add(&b));
    assert!(
        e.contains("add") && e.contains("[2, 3]") && e.contains("[4]"),
        "{e}"
    );
    let e = err(a.matmul(&a));
    assert!(
        e.contains("matmul") && e.contains("inner dimensions"),
        "{e}"
    );
    let e = err(a.reshape(&[5, -1]));
    assert!(e.contains("reshape") && e.contains("6 elements"), "{e}");
    let e = err(a.sum(&[2], false));
    assert!(e.contains("sum") && e.contains("axis 2"), "{e}");
    let e = err(a.permute(&[0, 0]));
    assert!(e.contains("permute") && e.contains("repeats"), "{e}");
    let e = err(a.expand(&[3, 3]));
    assert!(e.contains("expand"), "{e}");
    let e = err(a.shrink(&[(0, 3), (0, 1)]));
    assert!(e.contains("shrink"), "{e}");
    let e = err(Tensor::from_slice(&[1.0f32, 2.0], &[3], &dev));
    assert!(e.contains("2 values") && e.contains("[3]"), "{e}");
    let e = err(a.assign(&b));
    assert!(e.contains("assign") && e.contains("[4]"), "{e}");
    let e = err(a.cross_entropy(&b));
    assert!(e.contains("cross_entropy"), "{e}");
    let e = err(a.gather(1, &Tensor::zeros(&[2, 1], DType::F32, &dev)));
    assert!(e.contains("gather") && e.contains("i32"), "{e}");
    let e = err(Tensor::cat(&[], 0));
    assert!(e.contains("cat"), "{e}");
}

#[test]
fn dtype_device_and_gradient_errors_are_reported() {
    let dev = cpu();
    let a = Tensor::zeros(&[2], DType::F32, &dev);
    let e = err(a.to_vec::<i32>());
    assert!(
        e.contains("to_vec") && e.contains("f32") && e.contains("i32"),
        "{e}"
    );
    let e = err(a.one_hot(3));
    assert!(e.contains("one_hot") && e.contains("i32"), "{e}");
    let g = Tensor::zeros(&[2], DType::F32, &navi31());
    let e = err(a.add(&g));
    assert!(e.contains("cpu") && e.contains("mock:navi31"), "{e}");
    let e = err(a.sum(&[], false).unwrap().backward());
    assert!(e.contains("does not depend"), "{e}");
    a.set_requires_grad(true);
    let e = err(a.mul(2.0).unwrap().backward());
    assert!(e.contains("[2]"), "{e}");
}
