//! Captured steps ([`Jit`]): a function run once normally, captured on its second run, and
//! from then on replayed — the same kernels on the same memory, with the inputs' memory
//! swapped in — without running the function, scheduling or compiling. On an `am` device
//! the replay is a runtime graph (one submission per step, arguments patched in place); on
//! the CPU it is the list of launches.
//!
//! A step may span several `am` devices of one XGMI hive ([`Jit::spanning`]): the captured
//! run records, in the order the host made them, every device's launches and the copies
//! between devices (and within one), and the replay is one runtime graph over every
//! device's queues ([`am_runtime::Graph::spanning`]): each launch on its device's compute
//! queue, each copy on its destination's copy queue, and a command that touches memory an
//! earlier command of another queue touched (a peer mapping counts as the memory it maps)
//! waits for that queue on the GPU. The host submits once per queue and waits at the end.

use std::cell::RefCell;
use std::time::Instant;

use am_runtime::{Arg, ExecNode, GraphExec};

use crate::device::{Buffer, Device, Launch, LaunchArg, Program, Storage};
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
    /// The devices of a step spanning several ([`Jit::spanning`]); empty for one.
    span: Vec<Device>,
    calls: u64,
    captured: Option<Captured>,
}

struct Captured {
    inputs: Vec<(Vec<usize>, DType)>,
    outputs: Vec<(Buffer, Vec<usize>, DType, Device)>,
    kernels: usize,
    replay: Replay,
}

/// What a capture spanning devices records, in the order the host did it.
pub(crate) enum Event {
    /// A kernel started on `dev`.
    Launch { dev: Device, launch: Launch },
    /// `len` bytes of `src` (memory of `from`) copied to `dst` at `dst_at` (memory of `to`)
    /// by `to`'s copy queue.
    Copy {
        to: Device,
        dst: Buffer,
        dst_at: usize,
        from: Device,
        src: Buffer,
        len: usize,
    },
    /// Something done by the host that a graph cannot replay (a copy through host memory).
    Host(String),
}

thread_local! {
    /// The events of the step this thread is capturing across devices, if any.
    static RECORDING: RefCell<Option<Vec<Event>>> = const { RefCell::new(None) };
}

/// Records `event` when this thread is capturing a step across devices.
pub(crate) fn record(event: impl FnOnce() -> Event) {
    RECORDING.with(|r| {
        if let Some(v) = r.borrow_mut().as_mut() {
            v.push(event());
        }
    });
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
    /// One graph over the queues of several devices.
    Spanning {
        exec: Box<GraphExec>,
        /// (launch, argument, input).
        slots: Vec<(ExecNode, usize, usize)>,
        current: Vec<u64>,
        /// Kernels per device of the span.
        kernels: Vec<usize>,
        /// The recorded launches and copies (their memory lives as long as the graph).
        _events: Vec<Event>,
    },
}

impl Jit {
    /// A step for `dev` (its inputs must live there).
    pub fn new(dev: &Device) -> Jit {
        Jit {
            dev: dev.clone(),
            span: Vec::new(),
            calls: 0,
            captured: None,
        }
    }

    /// A step whose inputs live on any of `devices` and whose work runs on them all: `am`
    /// devices of one XGMI hive (each listed once), between which the step's copies go over
    /// the fabric. Captured as one runtime graph over every device's queues (see the module
    /// documentation); a capture that finds something a graph cannot replay — a `cpu`
    /// device, a copy through host memory, an input a copy reads — fails with
    /// [`Error::Capture`] saying what.
    pub fn spanning(devices: &[Device]) -> Result<Jit> {
        let Some(first) = devices.first() else {
            return Err(Error::Capture("a step spanning no device".into()));
        };
        let mut span: Vec<Device> = Vec::with_capacity(devices.len());
        for d in devices {
            if !span.contains(d) {
                span.push(d.clone());
            }
        }
        Ok(Jit {
            dev: first.clone(),
            span,
            calls: 0,
            captured: None,
        })
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
            let dev = t.device();
            if dev != self.dev && !self.span.contains(&dev) {
                return Err(Error::Capture(format!(
                    "an input is on {dev}, the step on {}",
                    self.devices()
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
        let run = || -> Result<Vec<Tensor>> {
            let out = f(&args)?;
            Tensor::realize_all(&out.iter().collect::<Vec<_>>())?;
            Ok(out)
        };
        if !self.span.is_empty() {
            let busy = RECORDING.with(|r| {
                let mut r = r.borrow_mut();
                let busy = r.is_some();
                if !busy {
                    *r = Some(Vec::new());
                }
                busy
            });
            if busy {
                return Err(Error::Capture(
                    "this thread is already capturing a step across devices".into(),
                ));
            }
            let result = run();
            let events = RECORDING
                .with(|r| r.borrow_mut().take())
                .unwrap_or_default();
            let out = result?;
            self.capture_spanning(inputs, &out, events)?;
            return Ok(out);
        }
        self.dev.begin_capture()?;
        let result = run();
        let launches = self.dev.end_capture();
        let out = result?;
        self.capture(inputs, &out, launches)?;
        Ok(out)
    }

    /// The devices, for messages.
    fn devices(&self) -> String {
        if self.span.is_empty() {
            return self.dev.to_string();
        }
        let names: Vec<String> = self.span.iter().map(|d| d.to_string()).collect();
        names.join(", ")
    }

    fn capture_spanning(
        &mut self,
        inputs: &[&Tensor],
        out: &[Tensor],
        events: Vec<Event>,
    ) -> Result<()> {
        let mut in_bufs: Vec<Buffer> = Vec::with_capacity(inputs.len());
        for t in inputs {
            in_bufs.push(memory_of(t)?);
        }
        let mut rts = Vec::with_capacity(self.span.len());
        for d in &self.span {
            rts.push(
                d.runtime()
                    .ok_or_else(|| {
                        Error::Capture(format!(
                            "{d} is not an am device: a step spanning devices replays as a \
                             runtime graph"
                        ))
                    })?
                    .clone(),
            );
        }
        let index = |d: &Device| -> Result<usize> {
            self.span.iter().position(|x| x == d).ok_or_else(|| {
                Error::Capture(format!(
                    "the step ran work on {d}, which it does not span ({})",
                    self.devices()
                ))
            })
        };
        let rt_of = |b: &Buffer, d: &Device| -> Result<am_runtime::Buffer> {
            match b.storage() {
                Storage::Am(r) => Ok(r.clone()),
                Storage::Host(_) => Err(Error::Capture(format!(
                    "host memory in a step across devices ({d})"
                ))),
            }
        };
        let map = |e: am_runtime::Error| Error::Capture(format!("building the graph: {e}"));
        let queues: Vec<[am_runtime::Queue; 2]> = rts
            .iter()
            .map(|r| [r.compute_queue(), r.copy_queue()])
            .collect();
        let queue = |q: usize| &queues[q / 2][q % 2];
        let nq = 2 * rts.len();
        let mut g = am_runtime::Graph::spanning(&rts).map_err(map)?;
        // Commands so far per queue; per queue, how many of each other queue's it waits for.
        let mut count = vec![0usize; nq];
        let mut waited = vec![vec![0usize; nq]; nq];
        // Each command's queue, its number there, and the memory it touches.
        let mut history: Vec<(usize, usize, Vec<am_runtime::Buffer>)> = Vec::new();
        let mut nodes: Vec<Option<ExecNode>> = Vec::with_capacity(events.len());
        let mut kernels = vec![0usize; rts.len()];
        let mut slots = Vec::new();
        for (ei, e) in events.iter().enumerate() {
            let (q, touched) = match e {
                Event::Launch { dev, launch } => {
                    let di = index(dev)?;
                    let mut touched = Vec::new();
                    for a in &launch.args {
                        if let LaunchArg::Buf(b) = a {
                            touched.push(rt_of(b, dev)?);
                        }
                    }
                    (2 * di, touched)
                }
                Event::Copy {
                    to,
                    dst,
                    dst_at,
                    from,
                    src,
                    len,
                } => {
                    if let Some(i) = in_bufs.iter().position(|x| x.same(src) || x.same(dst)) {
                        return Err(Error::Capture(format!(
                            "input {i} is copied between devices in the step: a replay \
                             cannot swap its memory"
                        )));
                    }
                    let ti = index(to)?;
                    index(from)?;
                    let d = rt_of(dst, to)?
                        .view(*dst_at as u64, *len as u64)
                        .map_err(map)?;
                    let s = rt_of(src, from)?.view(0, *len as u64).map_err(map)?;
                    (2 * ti + 1, vec![d, s])
                }
                Event::Host(why) => {
                    return Err(Error::Capture(format!(
                        "the step did something a graph cannot replay: {why}"
                    )));
                }
            };
            // Wait for the last command of each other queue that touched this memory.
            let mut need = vec![0usize; nq];
            for (p, seq, mem) in history.iter().rev() {
                if *p != q
                    && *seq > need[*p]
                    && *seq > waited[q][*p]
                    && mem.iter().any(|m| touched.iter().any(|t| t.overlaps(m)))
                {
                    need[*p] = *seq;
                }
            }
            for (p, &n) in need.iter().enumerate() {
                if n > 0 {
                    g.depend(queue(p), queue(q)).map_err(map)?;
                    waited[q][p] = count[p];
                }
            }
            match e {
                Event::Launch { launch, .. } => {
                    let Program::Am(p) = &launch.kernel.program else {
                        return Err(Error::Capture("a CPU program in a GPU step".into()));
                    };
                    let node = g
                        .exec(
                            queue(q),
                            p,
                            &launch.gpu_args(),
                            [launch.groups, 1, 1],
                            [launch.kernel.workgroup, 1, 1],
                        )
                        .map_err(map)?;
                    for (ai, a) in launch.args.iter().enumerate() {
                        if let LaunchArg::Buf(b) = a
                            && let Some(ii) = in_bufs.iter().position(|x| x.same(b))
                        {
                            slots.push((node, ai, ii));
                        }
                    }
                    kernels[q / 2] += 1;
                    nodes.push(Some(node));
                }
                Event::Copy { from, to, .. } => {
                    let (d, s) = (&touched[0], &touched[1]);
                    let seen = if from == to {
                        s.clone()
                    } else {
                        rts[q / 2].peer_view(s).map_err(map)?
                    };
                    g.copy(queue(q), d, &seen).map_err(map)?;
                    nodes.push(None);
                }
                Event::Host(_) => unreachable!("refused above"),
            }
            debug_assert_eq!(nodes.len(), ei + 1);
            count[q] += 1;
            history.push((q, count[q], touched));
        }
        let exec = g.build().map_err(map)?;
        let mut outputs = Vec::with_capacity(out.len());
        for t in out {
            outputs.push((memory_of(t)?, t.shape(), t.dtype(), t.device()));
        }
        let current = slots.iter().map(|&(_, _, i)| in_bufs[i].va()).collect();
        self.captured = Some(Captured {
            inputs: inputs.iter().map(|t| (t.shape(), t.dtype())).collect(),
            outputs,
            kernels: kernels.iter().sum(),
            replay: Replay::Spanning {
                exec: Box::new(exec),
                slots,
                current,
                kernels,
                _events: events,
            },
        });
        Ok(())
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
            outputs.push((memory_of(t)?, t.shape(), t.dtype(), t.device()));
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
        let span = self.span.clone();
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
                patch_inputs(exec, slots, current, &bufs, &dev)?;
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
            Replay::Spanning {
                exec,
                slots,
                current,
                kernels,
                ..
            } => {
                patch_inputs(exec, slots, current, &bufs, &dev)?;
                for (d, &n) in span.iter().zip(kernels.iter()) {
                    d.count_kernels(n);
                }
                exec.launch().map_err(|e| dev.runtime_error(e))?;
                let t = Instant::now();
                let r = exec.wait();
                dev.add_wait(t.elapsed());
                r.map_err(|e| dev.runtime_error(e))?;
            }
        }
        Ok(c.outputs
            .iter()
            .map(|(b, shape, dtype, d)| {
                Tensor::from_node(Node::leaf(
                    b.clone(),
                    shape.clone(),
                    *dtype,
                    d.clone(),
                    None,
                ))
            })
            .collect())
    }
}

/// Point every input slot of a captured graph at this call's input buffer, where it moved.
fn patch_inputs(
    exec: &mut GraphExec,
    slots: &[(ExecNode, usize, usize)],
    current: &mut [u64],
    bufs: &[Buffer],
    dev: &Device,
) -> Result<()> {
    for (k, &(node, a, i)) in slots.iter().enumerate() {
        let va = bufs[i].va();
        if current[k] != va {
            exec.set_arg(node, a, &Arg::Ptr(va))
                .map_err(|e| dev.runtime_error(e))?;
            current[k] = va;
        }
    }
    Ok(())
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
