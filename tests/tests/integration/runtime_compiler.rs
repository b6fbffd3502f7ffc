//! Kernels from `am-compiler` (its IR through LLVM 22 and its own linker) load and run
//! through the runtime on the mock with the results the CPU backend gives.

use am_compiler::{Compiler, DType, GfxTarget, Target, shapes};
use am_runtime::{Arg, ComputeCommands, MemKind};
use am_tests::runtime::{download, open, upload};

#[test]
fn compiled_elementwise_and_reduction_kernels_run_on_navi31() {
    let (gpu, dev) = open("navi31");
    let compiler = Compiler::with_cache(am_compiler::Cache::new(None));
    let n = 1000u32;
    let a: Vec<f32> = (0..n).map(|i| i as f32 * 0.5).collect();
    let b: Vec<f32> = (0..n).map(|i| 3.0 - i as f32).collect();
    let (ba, bb) = (upload(&dev, &a), upload(&dev, &b));
    let bc = dev.alloc(4 * u64::from(n), MemKind::Vram).unwrap();

    let add = shapes::elementwise_add(DType::F32, 64);
    let code = compiler
        .compile(&add, Target::Gpu(GfxTarget::Gfx1100))
        .unwrap();
    let prog = dev.load(&code.bytes, &add.name).unwrap();
    // The metadata names the arguments after the IR's parameters.
    let names: Vec<&str> = prog.explicit_args().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["a", "b", "c", "n"]);
    let mut c = ComputeCommands::new(&dev);
    c.exec(
        &prog,
        &[(&ba).into(), (&bb).into(), (&bc).into(), Arg::U32(n)],
        [n.div_ceil(64), 1, 1],
        [64, 1, 1],
    )
    .unwrap();

    let sum = shapes::reduce_sum(256);
    let code = compiler
        .compile(&sum, Target::Gpu(GfxTarget::Gfx1100))
        .unwrap();
    let prog = dev.load(&code.bytes, &sum.name).unwrap();
    let out = dev.alloc(16, MemKind::Vram).unwrap();
    let groups = n.div_ceil(256);
    let names: Vec<&str> = prog.explicit_args().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["x", "out", "n"]);
    let args = [(&ba).into(), (&out).into(), Arg::U32(n)];
    c.exec(&prog, &args, [groups, 1, 1], [256, 1, 1]).unwrap();
    c.submit().unwrap().wait().unwrap();

    let got: Vec<f32> = download(&dev, &bc, n as usize);
    for i in 0..n as usize {
        assert_eq!(got[i], a[i] + b[i], "c[{i}]");
    }
    let sums: Vec<f32> = download(&dev, &out, groups as usize);
    for g in 0..groups as usize {
        let want: f32 = a[g * 256..((g + 1) * 256).min(n as usize)].iter().sum();
        assert!(
            (sums[g] - want).abs() <= want.abs() * 1e-5,
            "group {g}: {} vs {want}",
            sums[g]
        );
    }
    assert!(gpu.violations().is_empty(), "{:#?}", gpu.violations());
}

#[test]
fn the_device_timer_measures_launches_on_the_mock_and_picks_among_variants() {
    use am_compiler::tune::{KernelTimer, fastest, measure};
    use am_tensor::tune::DeviceTimer;
    let (gpu, dev) = open("navi31");
    let compiler = Compiler::with_cache(am_compiler::Cache::new(None));
    let timer = DeviceTimer::new(&dev);
    assert_eq!(timer.target(), Target::Gpu(GfxTarget::Gfx1100));
    let n = 512u32;
    let a: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let (ba, bb) = (upload(&dev, &a), upload(&dev, &a));
    let bc = dev.alloc(4 * u64::from(n), MemKind::Vram).unwrap();
    let mut args = Vec::new();
    for b in [&ba, &bb, &bc] {
        args.extend(b.va().to_le_bytes());
    }
    args.extend(n.to_le_bytes());
    let candidates: Vec<_> = [32u32, 64, 128]
        .iter()
        .map(|&w| {
            (
                shapes::elementwise_add(DType::F32, w),
                [n.div_ceil(w), 1, 1],
                args.clone(),
            )
        })
        .collect();
    // SAFETY: the arguments are three live buffers of n floats and n.
    let (best, t) = unsafe { fastest(&compiler, &timer, &candidates) }
        .unwrap()
        .unwrap();
    // The mock counts what its emulator executes: the measure is wave-instructions, the
    // same on every run.
    assert!(best < 3 && matches!(t, am_compiler::tune::Cost::Instructions(n) if n > 0));
    // SAFETY: as above.
    let (once, twice) = unsafe {
        (
            measure(&compiler, &timer, &candidates).unwrap(),
            measure(&compiler, &timer, &candidates).unwrap(),
        )
    };
    assert_eq!(once, twice);
    assert_eq!(once[best], t);
    // Each variant ran: the output holds a + b.
    let got: Vec<f32> = download(&dev, &bc, n as usize);
    for i in 0..n as usize {
        assert_eq!(got[i], 2.0 * a[i], "c[{i}]");
    }
    assert!(
        !dev.profiling(),
        "the timer leaves profiling as it found it"
    );
    // A workgroup other than the compiled one is refused, naming the kernel.
    let code = compiler
        .compile(&candidates[0].0, Target::Gpu(GfxTarget::Gfx1100))
        .unwrap();
    let prog = dev.load(&code.bytes, "add").unwrap();
    assert_eq!(prog.workgroup, Some([32, 1, 1]));
    let mut c = ComputeCommands::new(&dev);
    let e = c
        .exec_raw(&prog, &args, [1, 1, 1], [64, 1, 1])
        .err()
        .unwrap();
    assert!(
        e.to_string().contains("add") && e.to_string().contains("[32, 1, 1]"),
        "{e}"
    );
    assert!(gpu.violations().is_empty(), "{:#?}", gpu.violations());
}
