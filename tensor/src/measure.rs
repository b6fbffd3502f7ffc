//! Test-only measurement of the kernels a realize launches: the scheduler records each
//! launch on the recording thread, and [`instructions`] replays them on the emulator for the
//! device's ISA and counts the executed wave-instructions per kernel (`am_emu::Stats`).
//!
//! The replay runs on zeroed memory: the tensor layer's kernels branch only on indices, so
//! their instruction counts do not depend on the data.

use std::cell::RefCell;
use std::collections::HashMap;

use am_compiler::{Kernel, Target, Type};
use am_emu::{CodeObject, HostMemory, Launch, Program};

use crate::Device;
use crate::device::LaunchArg;

/// One recorded launch.
struct Recorded {
    kernel: Kernel,
    groups: u32,
    /// Buffers as (address on the device, bytes); scalars as their value.
    args: Vec<Result<(u64, usize), u32>>,
}

thread_local! {
    static RECORD: RefCell<Option<Vec<Recorded>>> = const { RefCell::new(None) };
}

/// Called by the scheduler for each launch.
pub(crate) fn record(kernel: &Kernel, groups: u32, args: &[LaunchArg]) {
    RECORD.with(|r| {
        if let Some(list) = r.borrow_mut().as_mut() {
            list.push(Recorded {
                kernel: kernel.clone(),
                groups,
                args: args
                    .iter()
                    .map(|a| match a {
                        LaunchArg::Buf(b) => Ok((b.va(), b.size())),
                        LaunchArg::U32(x) => Err(*x),
                    })
                    .collect(),
            });
        }
    });
}

/// Runs `f` (which realizes tensors on `dev`, an am device) and returns the name and the
/// executed wave-instructions of each kernel it launched, replayed on the emulator.
pub(crate) fn instructions(dev: &Device, f: impl FnOnce()) -> Vec<(String, u64)> {
    RECORD.with(|r| *r.borrow_mut() = Some(Vec::new()));
    f();
    let list = RECORD.with(|r| r.borrow_mut().take()).unwrap_or_default();
    let Target::Gpu(isa) = dev.target() else {
        panic!("instructions are counted on GPU targets");
    };
    let mut mem = HostMemory::new();
    let mut host: HashMap<u64, u64> = HashMap::new();
    let mut out = Vec::new();
    for rec in list {
        let k = &rec.kernel;
        let c = dev.0.compiler.compile(k, dev.target()).expect("compiles");
        let co = CodeObject::parse(&c.bytes, &k.name).expect("code object");
        let prog = Program::new(&co, isa).expect("program");
        let kern = co.kernel(&k.name).expect("kernel");
        let mut ka = vec![0u8; (k.args_size() as usize).max(8)];
        for ((arg, (off, size)), p) in rec.args.iter().zip(k.arg_layout()).zip(&k.params) {
            let off = off as usize;
            match (arg, k.types[p.value.index()]) {
                (Ok((va, bytes)), Type::Ptr { .. }) => {
                    let a = *host.entry(*va).or_insert_with(|| mem.alloc(*bytes));
                    ka[off..off + 8].copy_from_slice(&a.to_le_bytes());
                }
                (Err(x), Type::Val(_)) => {
                    ka[off..off + size as usize].copy_from_slice(&x.to_le_bytes()[..size as usize])
                }
                _ => panic!("argument of {} does not match its parameter", k.name),
            }
        }
        ka.resize(
            ka.len()
                .max(kern.descriptor.kernarg_size as usize)
                .next_multiple_of(64)
                + 64,
            0,
        );
        let ka_addr = mem.alloc_bytes(&ka);
        let grid = [rec.groups * k.workgroup[0], k.workgroup[1], k.workgroup[2]];
        let stats = am_emu::dispatch(
            &prog,
            kern,
            &Launch::new(grid, k.workgroup, ka_addr),
            &mut mem,
        )
        .unwrap_or_else(|e| panic!("{}: {e}", k.name));
        out.push((k.name.clone(), stats.instructions));
    }
    out
}

mod tests {
    use super::*;
    use crate::{DType, Tensor};

    fn open(spec: &str) -> Device {
        am_mock::register();
        let c = am_compiler::Compiler::with_cache(am_compiler::Cache::new(None));
        Device::open_with(spec, std::sync::Arc::new(c)).expect("mock device")
    }

    fn total(v: &[(String, u64)]) -> u64 {
        v.iter().map(|x| x.1).sum()
    }

    /// The table: wave-instructions per element (per multiply-add for matmuls) of
    /// the tensor layer's kernels. `cargo test -p am-tensor --lib kernel_counts --
    /// --ignored --nocapture`; `AM_MEASURE_DEV` picks the mock (navi31 by default).
    #[test]
    #[ignore]
    fn kernel_counts() {
        let spec = std::env::var("AM_MEASURE_DEV").unwrap_or_else(|_| "mock:navi31".into());
        let dev = open(&spec);
        let r = |shape: &[usize], dtype: DType, seed: u32| {
            let t = Tensor::rand(shape, seed, &dev).cast(dtype);
            t.realize().expect("realize");
            t
        };
        let m = 1 << 20;
        let (a, b) = (r(&[m], DType::F32, 1), r(&[m], DType::F32, 2));
        let add = instructions(&dev, || {
            a.add(&b).expect("add").realize().expect("realize");
        });
        let sum = instructions(&dev, || {
            a.sum(&[0], false).expect("sum").realize().expect("realize");
        });
        let s = r(&[512, 512], DType::F32, 3);
        let softmax = instructions(&dev, || {
            s.softmax(1).expect("softmax").realize().expect("realize");
        });
        let mut rows = vec![
            ("add 1M f32 /elem", total(&add) as f64 / m as f64, add),
            ("sum 1M f32 /elem", total(&sum) as f64 / m as f64, sum),
            (
                "softmax 512² /elem",
                total(&softmax) as f64 / (512.0 * 512.0),
                softmax,
            ),
        ];
        for dtype in [DType::F32, DType::F16] {
            let (x, y) = (r(&[256, 256], dtype, 4), r(&[256, 256], dtype, 5));
            let mm = instructions(&dev, || {
                x.matmul(&y).expect("matmul").realize().expect("realize");
            });
            let name = if dtype == DType::F32 {
                "matmul f32 256³ /MAC"
            } else {
                "matmul f16 256³ /MAC"
            };
            rows.push((name, total(&mm) as f64 / (256f64 * 256.0 * 256.0), mm));
        }
        for (name, per, kernels) in rows {
            println!("{spec} {name:<24} {per:>8.4}  {kernels:?}");
        }
    }
}
