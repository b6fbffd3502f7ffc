//! Graphs: a sequence of launches, copies, fills, signals and waits across a device's queues,
//! recorded once and replayed many times.
//!
//! Building a graph encodes each queue's part once into memory the graph owns: PM4 and SDMA
//! parts as indirect buffers, AQL parts as the packets to copy into the ring (their PM4 in
//! indirect buffers). Kernel arguments live in one buffer of the graph. A replay patches what
//! changed in place — argument values ([`GraphExec::set_arg`]), signal and wait values
//! ([`GraphExec::set_signal`], [`GraphExec::set_wait`]) and the replay counter the graph's own
//! cross-queue dependencies ([`Graph::depend`]) use — and then puts one small submission on
//! each queue it uses: one doorbell per queue per replay.
//!
//! A replay first waits for the previous replay of the same graph (its arguments and values
//! are about to be overwritten).

use std::sync::Arc;

use zerocopy::IntoBytes;

use am_isa::sync::lock;

use crate::commands::{AqlItem, ComputeCommands, CopyCommands, Launches, Patch};
use crate::device::Device;
use crate::encode::{Pm4, Sdma, aql_pm4_ib};
use crate::memory::{Buffer, MemKind};
use crate::program::{Arg, Program};
use crate::queue::{Fence, Queue};
use crate::signal::Signal;
use crate::{Error, Result};

/// A recorded launch, to change its arguments in a [`GraphExec`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExecNode(usize);

/// A recorded signal or wait, to change its value in a [`GraphExec`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ValueNode(usize);

/// A value a signal writes or a wait compares with.
#[derive(Clone, Copy, Debug)]
enum Value {
    /// Set by the caller (the recorded value until changed).
    Slot(usize),
    /// The replay's number (1 for the first): the graph's own dependencies.
    Replay,
}

enum Op {
    Exec {
        node: usize,
        grid: [u32; 3],
        block: [u32; 3],
    },
    Copy {
        dst: Buffer,
        src: Buffer,
    },
    Fill {
        dst: Buffer,
        pattern: u32,
    },
    Signal {
        signal: Signal,
        value: Value,
    },
    Wait {
        signal: Signal,
        value: Value,
    },
}

struct ExecRec {
    prog: Program,
    /// Offset of its arguments in the graph's argument buffer.
    at: usize,
}

/// A graph being recorded.
pub struct Graph {
    dev: Device,
    queues: Vec<Queue>,
    ops: Vec<(usize, Op)>,
    execs: Vec<ExecRec>,
    args: Vec<u8>,
    values: Vec<u64>,
    internal: Vec<Signal>,
}

impl Graph {
    /// An empty graph of `dev`.
    pub fn new(dev: &Device) -> Graph {
        Graph {
            dev: dev.clone(),
            queues: Vec::new(),
            ops: Vec::new(),
            execs: Vec::new(),
            args: Vec::new(),
            values: Vec::new(),
            internal: Vec::new(),
        }
    }

    fn queue(&mut self, q: &Queue, compute: bool) -> Result<usize> {
        if !Arc::ptr_eq(&q.dev.0, &self.dev.0) || q.is_compute() != compute {
            return Err(Error::State {
                device: self.dev.name().into(),
                reason: format!(
                    "a graph's {} work recorded on {}",
                    if compute { "compute" } else { "copy" },
                    q.name()
                ),
            });
        }
        if let Some(i) = self
            .queues
            .iter()
            .position(|x| Arc::ptr_eq(&x.cell, &q.cell))
        {
            return Ok(i);
        }
        self.queues.push(q.clone());
        Ok(self.queues.len() - 1)
    }

    /// Launch `prog` on compute queue `queue` (see [`ComputeCommands::exec`]).
    pub fn exec(
        &mut self,
        queue: &Queue,
        prog: &Program,
        args: &[Arg],
        grid: [u32; 3],
        block: [u32; 3],
    ) -> Result<ExecNode> {
        let qi = self.queue(queue, true)?;
        let bytes = prog.encode_args(&self.dev, args, grid, block)?;
        let at = self
            .args
            .len()
            .next_multiple_of(prog.kernarg_align.max(16) as usize);
        self.args.resize(at, 0);
        self.args.extend_from_slice(&bytes);
        // Compiled code may read past its arguments.
        self.args.resize(self.args.len() + 256, 0);
        let node = self.execs.len();
        self.execs.push(ExecRec {
            prog: prog.clone(),
            at,
        });
        self.ops.push((qi, Op::Exec { node, grid, block }));
        Ok(ExecNode(node))
    }

    /// Copy `src` into `dst` on copy queue `queue`.
    pub fn copy(&mut self, queue: &Queue, dst: &Buffer, src: &Buffer) -> Result<()> {
        let qi = self.queue(queue, false)?;
        self.ops.push((
            qi,
            Op::Copy {
                dst: dst.clone(),
                src: src.clone(),
            },
        ));
        Ok(())
    }

    /// Fill `dst` with `pattern` on copy queue `queue`.
    pub fn fill(&mut self, queue: &Queue, dst: &Buffer, pattern: u32) -> Result<()> {
        let qi = self.queue(queue, false)?;
        self.ops.push((
            qi,
            Op::Fill {
                dst: dst.clone(),
                pattern,
            },
        ));
        Ok(())
    }

    fn slot(&mut self, v: u64) -> Value {
        self.values.push(v);
        Value::Slot(self.values.len() - 1)
    }

    /// On `queue`, set `signal` to `value` once the work before on it has finished.
    pub fn signal(&mut self, queue: &Queue, signal: &Signal, value: u64) -> Result<ValueNode> {
        let qi = self.queue(queue, queue.is_compute())?;
        let v = self.slot(value);
        self.ops.push((
            qi,
            Op::Signal {
                signal: signal.clone(),
                value: v,
            },
        ));
        Ok(ValueNode(self.values.len() - 1))
    }

    /// On `queue`, wait until `signal` reaches `value` (low 32 bits, `>=`).
    pub fn wait(&mut self, queue: &Queue, signal: &Signal, value: u64) -> Result<ValueNode> {
        let qi = self.queue(queue, queue.is_compute())?;
        let v = self.slot(value);
        self.ops.push((
            qi,
            Op::Wait {
                signal: signal.clone(),
                value: v,
            },
        ));
        Ok(ValueNode(self.values.len() - 1))
    }

    /// What `after` records from now on waits for what `before` has recorded so far (a
    /// signal of the graph's own, set to the replay's number).
    pub fn depend(&mut self, before: &Queue, after: &Queue) -> Result<()> {
        let b = self.queue(before, before.is_compute())?;
        let a = self.queue(after, after.is_compute())?;
        let s = self.dev.new_signal()?;
        self.ops.push((
            b,
            Op::Signal {
                signal: s.clone(),
                value: Value::Replay,
            },
        ));
        self.ops.push((
            a,
            Op::Wait {
                signal: s.clone(),
                value: Value::Replay,
            },
        ));
        self.internal.push(s);
        Ok(())
    }

    /// Encode the graph for replay.
    pub fn build(self) -> Result<GraphExec> {
        let dev = self.dev.clone();
        let args_buf = dev.alloc(
            self.args.len().max(1) as u64,
            MemKind::System { uncached: true },
        )?;
        dev.write(&args_buf, 0, &self.args)?;
        let mut enc = Encoding {
            dev: &dev,
            places: Vec::new(),
            parts: Vec::with_capacity(self.queues.len()),
            keep: Vec::new(),
            profile: Vec::new(),
            kernels: Vec::with_capacity(self.queues.len()),
        };
        for (qi, queue) in self.queues.iter().enumerate() {
            let ops = self.ops.iter().filter(|(q, _)| *q == qi).map(|(_, op)| op);
            let part = if queue.is_compute() {
                self.encode_compute(&mut enc, queue, ops, &args_buf)?
            } else {
                self.encode_copy(&mut enc, ops)?
            };
            enc.parts.push(part);
        }
        let Encoding {
            places,
            parts,
            mut keep,
            profile,
            kernels,
            ..
        } = enc;
        // Buffers the recorded copies use stay alive as long as the graph.
        for (_, op) in &self.ops {
            match op {
                Op::Copy { dst, src } => keep.extend([dst.clone(), src.clone()]),
                Op::Fill { dst, .. } => keep.push(dst.clone()),
                _ => {}
            }
        }
        let (replay_places, slot_places): (Vec<_>, Vec<_>) =
            places.into_iter().partition(|(s, _)| s.is_none());
        let mut by_slot: Vec<Vec<Place>> = vec![Vec::new(); self.values.len()];
        for (s, p) in slot_places {
            if let Some(s) = s {
                by_slot[s].push(p);
            }
        }
        Ok(GraphExec {
            dev,
            queues: self.queues,
            parts,
            kernels,
            args_buf,
            args: self.args,
            args_dirty: false,
            execs: self.execs,
            values: self.values.iter().map(|&v| (v, false)).collect(),
            by_slot,
            replay_places: replay_places.into_iter().map(|(_, p)| p).collect(),
            replays: 0,
            last: Vec::new(),
            profile,
            _internal: self.internal,
            _keep: keep,
        })
    }

    /// A compute queue's operations: PM4 in an IB, or AQL packets for its ring.
    fn encode_compute<'o>(
        &self,
        enc: &mut Encoding<'_>,
        queue: &Queue,
        ops: impl Iterator<Item = &'o Op>,
        args_buf: &Buffer,
    ) -> Result<Part> {
        let mut found: Vec<(Value, Patch, bool)> = Vec::new();
        let mut c = ComputeCommands::new(enc.dev);
        for op in ops {
            match op {
                Op::Exec { node, grid, block } => {
                    let e = &self.execs[*node];
                    c.exec_at(&e.prog, args_buf.va() + e.at as u64, *grid, *block)?;
                }
                Op::Signal { signal, value } => {
                    found.push((*value, c.signal_at(signal, self.initial(*value)), true));
                }
                Op::Wait { signal, value } => {
                    found.push((*value, c.wait_at(signal, self.initial(*value)), false));
                }
                Op::Copy { .. } | Op::Fill { .. } => unreachable!("checked when recorded"),
            }
        }
        enc.kernels.push(c.launches().clone());
        let name = queue.name();
        enc.profile
            .extend(c.take_profile().into_iter().map(|(kernel, start, end)| {
                crate::trace::Pending {
                    kernel,
                    queue: name.clone(),
                    start,
                    end,
                }
            }));
        match c.pm4_words() {
            Some(words) => {
                let ib = upload(enc.dev, words)?;
                let p = Part::Pm4 {
                    ib: ib.va(),
                    dwords: words.len(),
                };
                enc.place(found, &ib);
                enc.keep.push(ib);
                Ok(p)
            }
            None => enc.aql(&c.aql_items().unwrap_or_default(), found),
        }
    }

    /// A copy queue's operations as SDMA packets in an IB.
    fn encode_copy<'o>(
        &self,
        enc: &mut Encoding<'_>,
        ops: impl Iterator<Item = &'o Op>,
    ) -> Result<Part> {
        let mut found: Vec<(Value, Patch, bool)> = Vec::new();
        let mut c = CopyCommands::new(enc.dev);
        for op in ops {
            match op {
                Op::Copy { dst, src } => {
                    c.copy(dst, src)?;
                }
                Op::Fill { dst, pattern } => {
                    c.fill(dst, *pattern)?;
                }
                Op::Signal { signal, value } => {
                    found.push((*value, c.signal_at(signal, self.initial(*value)), true));
                }
                Op::Wait { signal, value } => {
                    found.push((*value, c.wait_at(signal, self.initial(*value)), false));
                }
                Op::Exec { .. } => unreachable!("checked when recorded"),
            }
        }
        enc.kernels.push(Arc::new(Launches::default()));
        let ib = upload(enc.dev, c.words())?;
        enc.place(found, &ib);
        let p = Part::Sdma {
            ib: ib.va(),
            dwords: c.words().len(),
        };
        enc.keep.push(ib);
        Ok(p)
    }

    fn initial(&self, v: Value) -> u64 {
        match v {
            Value::Slot(i) => self.values[i],
            Value::Replay => 1,
        }
    }
}

fn slot_of(v: Value) -> Option<usize> {
    match v {
        Value::Slot(i) => Some(i),
        Value::Replay => None,
    }
}

/// Copy `words` into fresh graph memory (uncached system memory the engines read as IBs).
fn upload(dev: &Device, words: &[u32]) -> Result<Buffer> {
    let b = dev.alloc(
        (words.len() as u64 * 4).max(4),
        MemKind::System { uncached: true },
    )?;
    dev.write(&b, 0, words.as_bytes())?;
    Ok(b)
}

/// What encoding a graph's queues gathers besides their parts.
struct Encoding<'d> {
    dev: &'d Device,
    /// Where each signal's and wait's value lies, by value slot (`None`: the replay count).
    places: Vec<(Option<usize>, Place)>,
    parts: Vec<Part>,
    /// The IBs the parts run.
    keep: Vec<Buffer>,
    profile: Vec<crate::trace::Pending>,
    kernels: Vec<Arc<Launches>>,
}

impl Encoding<'_> {
    /// The values a queue's commands hold in `ib`.
    fn place(&mut self, found: Vec<(Value, Patch, bool)>, ib: &Buffer) {
        for (v, patch, sig) in found {
            self.places
                .push((slot_of(v), Place::new(ib, patch.word, sig)));
        }
    }

    /// AQL packets for the ring; the PM4 between them goes to IBs of its own.
    fn aql(&mut self, items: &[AqlItem], found: Vec<(Value, Patch, bool)>) -> Result<Part> {
        let mut packets = Vec::with_capacity(items.len() * 64);
        let mut ibs: Vec<Option<Buffer>> = Vec::with_capacity(items.len());
        for it in items {
            match it {
                AqlItem::Dispatch(p) => {
                    packets.extend_from_slice(p.as_bytes());
                    ibs.push(None);
                }
                AqlItem::Pm4(words) => {
                    let ib = upload(self.dev, words)?;
                    packets.extend_from_slice(aql_pm4_ib(ib.va(), words.len()).as_bytes());
                    ibs.push(Some(ib));
                }
            }
        }
        for (v, patch, sig) in found {
            let ib = ibs
                .get(patch.segment)
                .and_then(|b| b.as_ref())
                .ok_or_else(|| Error::State {
                    device: self.dev.name().into(),
                    reason: "a graph value outside its PM4".into(),
                })?;
            self.places
                .push((slot_of(v), Place::new(ib, patch.word, sig)));
        }
        self.keep.extend(ibs.into_iter().flatten());
        Ok(Part::Aql { packets })
    }
}

/// Where a value lies in a graph's memory.
#[derive(Clone)]
struct Place {
    buf: Buffer,
    offset: u64,
    /// A signal's 64-bit value (else a wait's 32-bit reference).
    wide: bool,
}

impl Place {
    fn new(buf: &Buffer, word: usize, wide: bool) -> Place {
        Place {
            buf: buf.clone(),
            offset: word as u64 * 4,
            wide,
        }
    }

    fn write(&self, dev: &Device, v: u64) -> Result<()> {
        if self.wide {
            dev.write(&self.buf, self.offset, &v.to_le_bytes())
        } else {
            dev.write(&self.buf, self.offset, &(v as u32).to_le_bytes())
        }
    }
}

/// One queue's part of a built graph.
enum Part {
    /// PM4 in an IB: the ring gets an `INDIRECT_BUFFER`.
    Pm4 { ib: u64, dwords: usize },
    /// SDMA packets in an IB: the ring gets an `INDIRECT`.
    Sdma { ib: u64, dwords: usize },
    /// AQL packets copied into the ring.
    Aql { packets: Vec<u8> },
}

/// A built graph: replay it with [`GraphExec::launch`].
pub struct GraphExec {
    dev: Device,
    queues: Vec<Queue>,
    parts: Vec<Part>,
    /// Each queue's launches (named in fault reports).
    kernels: Vec<Arc<Launches>>,
    args_buf: Buffer,
    args: Vec<u8>,
    args_dirty: bool,
    execs: Vec<ExecRec>,
    /// Each caller-set value and whether it changed since the last replay.
    values: Vec<(u64, bool)>,
    by_slot: Vec<Vec<Place>>,
    replay_places: Vec<Place>,
    replays: u64,
    last: Vec<Fence>,
    profile: Vec<crate::trace::Pending>,
    _internal: Vec<Signal>,
    _keep: Vec<Buffer>,
}

impl GraphExec {
    /// Change explicit argument `index` of launch `node` for the next replays.
    pub fn set_arg(&mut self, node: ExecNode, index: usize, arg: &Arg) -> Result<()> {
        let e = self.execs.get(node.0).ok_or_else(|| Error::State {
            device: self.dev.name().into(),
            reason: format!("the graph has no launch {}", node.0),
        })?;
        let end = e.at + e.prog.kernarg_size as usize;
        e.prog
            .set_arg(&self.dev, &mut self.args[e.at..end], index, arg)?;
        self.args_dirty = true;
        Ok(())
    }

    /// Change the value a recorded signal writes, or a recorded wait compares with.
    pub fn set_value(&mut self, node: ValueNode, value: u64) -> Result<()> {
        let v = self.values.get_mut(node.0).ok_or_else(|| Error::State {
            device: self.dev.name().into(),
            reason: format!("the graph has no signal or wait {}", node.0),
        })?;
        *v = (value, true);
        Ok(())
    }

    /// Same as [`GraphExec::set_value`] (for a recorded signal).
    pub fn set_signal(&mut self, node: ValueNode, value: u64) -> Result<()> {
        self.set_value(node, value)
    }

    /// Same as [`GraphExec::set_value`] (for a recorded wait).
    pub fn set_wait(&mut self, node: ValueNode, value: u64) -> Result<()> {
        self.set_value(node, value)
    }

    /// Launches the graph holds.
    pub fn kernels(&self) -> usize {
        self.execs.len()
    }

    /// Replays so far.
    pub fn replays(&self) -> u64 {
        self.replays
    }

    /// Replay: wait for the previous replay, patch what changed, submit each queue's part.
    /// Returns one fence per queue the graph uses.
    pub fn launch(&mut self) -> Result<&[Fence]> {
        for f in &self.last {
            f.wait()?;
        }
        self.replays += 1;
        if self.args_dirty {
            self.dev.write(&self.args_buf, 0, &self.args)?;
            self.args_dirty = false;
        }
        for (i, (v, changed)) in self.values.iter_mut().enumerate() {
            if std::mem::take(changed) {
                for p in &self.by_slot[i] {
                    p.write(&self.dev, *v)?;
                }
            }
        }
        if self.replays > 1 {
            for p in &self.replay_places {
                p.write(&self.dev, self.replays)?;
            }
        }
        if !self.profile.is_empty() {
            let mut t = lock(&self.dev.0.trace);
            for p in &self.profile {
                p.start.clear_timestamp()?;
                p.end.clear_timestamp()?;
                t.push(p.clone());
            }
        }
        let gfx9 = self.dev.info().gc_major < 10;
        self.last.clear();
        for ((queue, part), kernels) in self.queues.iter().zip(&self.parts).zip(&self.kernels) {
            let fence = match part {
                Part::Pm4 { ib, dwords } => {
                    let mut p = Pm4::new(gfx9);
                    p.indirect(*ib, *dwords);
                    queue.submit_bytes(p.words.as_bytes(), Some(kernels))?
                }
                Part::Sdma { ib, dwords } => queue.submit_with(None, |q| {
                    let mut s = Sdma::new(!gfx9);
                    s.indirect(q.put / 4, *ib, *dwords);
                    Ok(s.words.as_bytes().to_vec())
                })?,
                Part::Aql { packets } => queue.submit_bytes(packets, Some(kernels))?,
            };
            self.last.push(fence);
        }
        Ok(&self.last)
    }

    /// Wait until the last replay has finished.
    pub fn wait(&self) -> Result<()> {
        for f in &self.last {
            f.wait()?;
        }
        Ok(())
    }
}
