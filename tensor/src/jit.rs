//! Captured steps ([`Jit`]): a function run once normally, captured on its second run, and
//! from then on replayed — the same kernels on the same memory, with the inputs' memory
//! swapped in — without running the function, scheduling or compiling. On an `am` device
//! the replay is a runtime graph (one submission per step, arguments patched in place); on
//! the CPU it is the list of launches.

use std::time::Instant;

use am_runtime::{Arg, ExecNode, GraphExec};

use crate::device::{Buffer, Device, Launch, LaunchArg, Program};
use crate::node::Node;
use crate::{DType, Error, Result, Tensor};

/// A step function captured for replay (tinygrad's TinyJit, CUDA graphs).
///
/// The function must take its varying data from the inputs and return the tensors it
/// computes; everything else it touches (parameters, optimizer state) must be updated with
/// [`Tensor::assign`], which writes in place, so a replay updates the same memory. Replays
/// return tensors on the memory the captured run wrote: the next replay overwrites them.
/// Random numbers drawn inside the function repeat on every replay.
pub struct Jit {
    dev: Device,
    calls: u64,
    captured: Option<Captured>,
}

struct Captured {
    inputs: Vec<(Vec<usize>, DType)>,
    outputs: Vec<(Buffer, Vec<usize>, DType)>,
    kernels: usize,
    replay: Replay,
}

enum Replay {
    Cpu {
        launches: Vec<Launch>,
        /// (launch, argument, input).
        slots: Vec<(usize, usize, usize)>,
    },
    Am {
        exec: Box<GraphExec>,
        /// (launch, argument, input).
        slots: Vec<(ExecNode, usize, usize)>,
        /// The address each slot holds now.
        current: Vec<u64>,
        /// The recorded launches (their memory lives as long as the graph).
        _launches: Vec<Launch>,
    },
}

impl Jit {
    /// A step for `dev` (its inputs must live there).
    pub fn new(dev: &Device) -> Jit {
        Jit {
            dev: dev.clone(),
            calls: 0,
            captured: None,
        }
    }

    /// Whether the step has been captured (later calls replay).
    pub fn is_captured(&self) -> bool {
        self.captured.is_some()
    }

    /// Kernels one replay launches (once captured).
    pub fn kernels(&self) -> Option<usize> {
        self.captured.as_ref().map(|c| c.kernels)
    }

    /// Runs the step on `inputs`: calls `f` the first two times (capturing the second),
    /// replays after that. Returns the tensors `f` returned, realized.
    pub fn run(
        &mut self,
        inputs: &[&Tensor],
        f: impl FnOnce(&[Tensor]) -> Result<Vec<Tensor>>,
    ) -> Result<Vec<Tensor>> {
        for t in inputs {
            if t.device() != self.dev {
                return Err(Error::Capture(format!(
                    "an input is on {}, the step on {}",
                    t.device(),
                    self.dev
                )));
            }
        }
        Tensor::realize_all(inputs)?;
        if self.captured.is_some() {
            return self.replay(inputs);
        }
        self.calls += 1;
        let args: Vec<Tensor> = inputs.iter().map(|t| (*t).clone()).collect();
        if self.calls == 1 {
            let out = f(&args)?;
            Tensor::realize_all(&out.iter().collect::<Vec<_>>())?;
            return Ok(out);
        }
        self.dev.begin_capture()?;
        let run = || -> Result<Vec<Tensor>> {
            let out = f(&args)?;
            Tensor::realize_all(&out.iter().collect::<Vec<_>>())?;
            Ok(out)
        };
        let result = run();
        let launches = self.dev.end_capture();
        let out = result?;
        self.capture(inputs, &out, launches)?;
        Ok(out)
    }

    fn capture(&mut self, inputs: &[&Tensor], out: &[Tensor], launches: Vec<Launch>) -> Result<()> {
        let mut in_bufs: Vec<Buffer> = Vec::with_capacity(inputs.len());
        for t in inputs {
            in_bufs.push(memory_of(t)?);
        }
        let mut slots = Vec::new();
        for (li, l) in launches.iter().enumerate() {
            for (ai, a) in l.args.iter().enumerate() {
                if let LaunchArg::Buf(b) = a
                    && let Some(ii) = in_bufs.iter().position(|x| x.same(b))
                {
                    slots.push((li, ai, ii));
                }
            }
        }
        let mut outputs = Vec::with_capacity(out.len());
        for t in out {
            outputs.push((memory_of(t)?, t.shape(), t.dtype()));
        }
        let kernels = launches.len();
        let replay = match self.dev.runtime() {
            None => Replay::Cpu { launches, slots },
            Some(rt) => {
                let q = rt.compute_queue();
                let mut g = am_runtime::Graph::new(rt);
                let mut nodes = Vec::with_capacity(launches.len());
                for l in &launches {
                    let Program::Am(p) = &l.kernel.program else {
                        return Err(Error::Capture("a CPU program in a GPU step".into()));
                    };
                    let node = g
                        .exec(
                            &q,
                            p,
                            &l.gpu_args(),
                            [l.groups, 1, 1],
                            [l.kernel.workgroup, 1, 1],
                        )
                        .map_err(|e| self.dev.runtime_error(e))?;
                    nodes.push(node);
                }
                let exec = g.build().map_err(|e| self.dev.runtime_error(e))?;
                let current = slots.iter().map(|&(_, _, i)| in_bufs[i].va()).collect();
                Replay::Am {
                    exec: Box::new(exec),
                    slots: slots.iter().map(|&(l, a, i)| (nodes[l], a, i)).collect(),
                    current,
                    _launches: launches,
                }
            }
        };
        self.captured = Some(Captured {
            inputs: inputs.iter().map(|t| (t.shape(), t.dtype())).collect(),
            outputs,
            kernels,
            replay,
        });
        Ok(())
    }

    fn replay(&mut self, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        let dev = self.dev.clone();
        let Some(c) = self.captured.as_mut() else {
            return Err(Error::Capture("replay before capture".into()));
        };
        if inputs.len() != c.inputs.len() {
            return Err(Error::Capture(format!(
                "{} inputs given, the step was captured with {}",
                inputs.len(),
                c.inputs.len()
            )));
        }
        let mut bufs = Vec::with_capacity(inputs.len());
        for (i, (t, (shape, dtype))) in inputs.iter().zip(&c.inputs).enumerate() {
            if &t.shape() != shape || t.dtype() != *dtype {
                return Err(Error::Capture(format!(
                    "input {i} is {:?} {}, the step was captured with {shape:?} {dtype}",
                    t.shape(),
                    t.dtype()
                )));
            }
            bufs.push(memory_of(t)?);
        }
        match &mut c.replay {
            Replay::Cpu { launches, slots } => {
                for &(l, a, i) in slots.iter() {
                    launches[l].args[a] = LaunchArg::Buf(bufs[i].clone());
                }
                dev.count_kernels(launches.len());
                let first = dev.kernels_launched() - launches.len() as u64;
                for (k, l) in launches.iter().enumerate() {
                    let t = Instant::now();
                    dev.launch_cpu(l)?;
                    if dev.debug() >= 2 {
                        dev.log(first + k as u64 + 1, l, t.elapsed());
                    }
                }
            }
            Replay::Am {
                exec,
                slots,
                current,
                ..
            } => {
                for (k, &(node, a, i)) in slots.iter().enumerate() {
                    let va = bufs[i].va();
                    if current[k] != va {
                        exec.set_arg(node, a, &Arg::Ptr(va))
                            .map_err(|e| dev.runtime_error(e))?;
                        current[k] = va;
                    }
                }
                dev.count_kernels(c.kernels);
                let start = Instant::now();
                exec.launch().map_err(|e| dev.runtime_error(e))?;
                let t = Instant::now();
                let r = exec.wait();
                dev.add_wait(t.elapsed());
                r.map_err(|e| dev.runtime_error(e))?;
                if dev.debug() >= 2 {
                    eprintln!(
                        "{:<12} {:>6} replay of {} kernels (one graph) {:>31.1} µs",
                        dev.name(),
                        dev.kernels_launched(),
                        c.kernels,
                        start.elapsed().as_secs_f64() * 1e6
                    );
                }
            }
        }
        Ok(c.outputs
            .iter()
            .map(|(b, shape, dtype)| {
                Tensor::from_node(Node::leaf(
                    b.clone(),
                    shape.clone(),
                    *dtype,
                    dev.clone(),
                    None,
                ))
            })
            .collect())
    }
}

fn memory_of(t: &Tensor) -> Result<Buffer> {
    let n = t.node();
    n.buffer().ok_or_else(|| {
        Error::Capture(format!(
            "a tensor of shape {:?} has no memory after being realized",
            n.shape
        ))
    })
}
