//! Graphs: a sequence of launches, copies, fills, signals and waits across the queues of one
//! device or of several members of an XGMI hive, recorded once and replayed many times.
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
//!
//! A graph that spans devices ([`Graph::spanning`]) encodes each queue's part on that queue's
//! device, with kernel arguments in memory of each device. A dependency between queues of
//! two devices ([`Graph::depend`]) is a 64-bit value in VRAM of the waiting device: the
//! waiting queue polls it there (`WAIT_REG_MEM`, `POLL_REGMEM`), and the queue it waits for
//! writes the replay's number into it through the mapping the hive peer keeps of that VRAM
//! ([`Device::peer_view`]) — so a replay is one submission per queue on every device, and the
//! devices order each other on the GPU with no host round trip between them (tinygrad's HCQ
//! graph orders its devices the same way, with signals every device can reach).

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
    /// Write the value at `va`, an address of the queue's device.
    Signal {
        va: u64,
        value: Value,
    },
    /// Wait until the dword at `va` (an address of the queue's device) reaches the value.
    Wait {
        va: u64,
        value: Value,
    },
}

struct ExecRec {
    prog: Program,
    /// The device it runs on (index in the graph's devices).
    dev: usize,
    /// Offset of its arguments in that device's argument buffer.
    at: usize,
}

/// A page of VRAM of device `dev` holding the graph's cross-device dependency values.
struct CrossPage {
    dev: usize,
    page: Buffer,
    used: u64,
}

/// Bytes of one cross-device dependency value (a 64-bit value, aligned as a signal's).
const CROSS_SLOT: u64 = 16;
/// Bytes of a page of cross-device values.
const CROSS_PAGE: u64 = 0x1000;

/// A graph being recorded.
pub struct Graph {
    devs: Vec<Device>,
    /// Each queue with its device's index in `devs`.
    queues: Vec<(usize, Queue)>,
    ops: Vec<(usize, Op)>,
    execs: Vec<ExecRec>,
    /// Kernel arguments, one blob per device.
    args: Vec<Vec<u8>>,
    values: Vec<u64>,
    /// Signals the recorded work writes or waits on (the graph's own and the caller's).
    signals: Vec<Signal>,
    cross: Vec<CrossPage>,
    /// Memory the recorded dependencies reach (cross-device values and their peer views).
    keep: Vec<Buffer>,
}

impl Graph {
    /// An empty graph of `dev`.
    pub fn new(dev: &Device) -> Graph {
        Graph {
            devs: vec![dev.clone()],
            queues: Vec::new(),
            ops: Vec::new(),
            execs: Vec::new(),
            args: vec![Vec::new()],
            values: Vec::new(),
            signals: Vec::new(),
            cross: Vec::new(),
            keep: Vec::new(),
        }
    }

    /// An empty graph whose work runs on the queues of `devices` (each listed once): one
    /// replay submits to every device's queues it uses. Queues of two devices are ordered by
    /// [`Graph::depend`], which needs the two in one XGMI hive. Refused for an empty list.
    pub fn spanning(devices: &[Device]) -> Result<Graph> {
        let Some(first) = devices.first() else {
            return Err(Error::State {
                device: "graph".into(),
                reason: "a graph spanning no device".into(),
            });
        };
        let mut g = Graph::new(first);
        for d in &devices[1..] {
            if !g.devs.iter().any(|x| Arc::ptr_eq(&x.0, &d.0)) {
                g.devs.push(d.clone());
                g.args.push(Vec::new());
            }
        }
        Ok(g)
    }

    /// The devices the graph may record work on.
    pub fn devices(&self) -> &[Device] {
        &self.devs
    }

    fn queue(&mut self, q: &Queue, compute: bool) -> Result<usize> {
        let dev = self.devs.iter().position(|d| Arc::ptr_eq(&q.dev.0, &d.0));
        let Some(dev) = dev.filter(|_| q.is_compute() == compute) else {
            let names: Vec<&str> = self.devs.iter().map(|d| d.name()).collect();
            return Err(Error::State {
                device: self.devs[0].name().into(),
                reason: format!(
                    "a graph's {} work recorded on {} (the graph spans {})",
                    if compute { "compute" } else { "copy" },
                    q.name(),
                    names.join(", ")
                ),
            });
        };
        if let Some(i) = self
            .queues
            .iter()
            .position(|(_, x)| Arc::ptr_eq(&x.cell, &q.cell))
        {
            return Ok(i);
        }
        self.queues.push((dev, q.clone()));
        Ok(self.queues.len() - 1)
    }

    /// The device of recorded queue `qi`.
    fn dev_of(&self, qi: usize) -> &Device {
        &self.devs[self.queues[qi].0]
    }

    /// A signal recorded on queue `qi` must be memory of its device.
    fn check_signal(&self, qi: usize, signal: &Signal) -> Result<()> {
        let dev = self.dev_of(qi);
        if signal.belongs_to(dev) {
            return Ok(());
        }
        Err(Error::State {
            device: dev.name().into(),
            reason: format!(
                "{signal:?} is another device's memory: {} cannot reach it (order queues of \
                 two devices with Graph::depend)",
                self.queues[qi].1.name()
            ),
        })
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
        let di = self.queues[qi].0;
        let dev = &self.devs[di];
        if !prog.code.belongs_to(dev) {
            return Err(Error::Program {
                device: dev.name().into(),
                kernel: prog.name.clone(),
                reason: format!(
                    "the program was loaded on another device, not for {}",
                    queue.name()
                ),
            });
        }
        let bytes = prog.encode_args(dev, args, grid, block)?;
        let blob = &mut self.args[di];
        let at = blob
            .len()
            .next_multiple_of(prog.kernarg_align.max(16) as usize);
        blob.resize(at, 0);
        blob.extend_from_slice(&bytes);
        // Compiled code may read past its arguments.
        blob.resize(blob.len() + 256, 0);
        let node = self.execs.len();
        self.execs.push(ExecRec {
            prog: prog.clone(),
            dev: di,
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
        self.check_signal(qi, signal)?;
        let v = self.slot(value);
        self.ops.push((
            qi,
            Op::Signal {
                va: signal.va(),
                value: v,
            },
        ));
        self.signals.push(signal.clone());
        Ok(ValueNode(self.values.len() - 1))
    }

    /// On `queue`, wait until `signal` reaches `value` (low 32 bits, `>=`).
    pub fn wait(&mut self, queue: &Queue, signal: &Signal, value: u64) -> Result<ValueNode> {
        let qi = self.queue(queue, queue.is_compute())?;
        self.check_signal(qi, signal)?;
        let v = self.slot(value);
        self.ops.push((
            qi,
            Op::Wait {
                va: signal.va(),
                value: v,
            },
        ));
        self.signals.push(signal.clone());
        Ok(ValueNode(self.values.len() - 1))
    }

    /// What `after` records from now on waits for what `before` has recorded so far: a
    /// value of the graph's own, set to the replay's number by `before`'s queue and waited
    /// for by `after`'s. On one device it is a signal of that device; across devices it lies
    /// in VRAM of `after`'s device, which `before`'s device writes through its peer mapping
    /// (over XGMI, or over PCIe through the other's BAR0, where the write passes that
    /// device's HDP: the mock's polls do not check it, hardware's is untried), so
    /// `before`'s device must reach that VRAM (else refused as `map_peer` refuses,
    /// `NotInOneHive`). Tested across hive members and across two PCIe peers
    /// (`runtime_pcie::a_graph_across_two_pcie_peers_orders_them_on_the_gpu`).
    pub fn depend(&mut self, before: &Queue, after: &Queue) -> Result<()> {
        let b = self.queue(before, before.is_compute())?;
        let a = self.queue(after, after.is_compute())?;
        let (bd, ad) = (self.queues[b].0, self.queues[a].0);
        let (signal_va, wait_va) = if bd == ad {
            let s = self.devs[ad].new_signal()?;
            let va = s.va();
            self.signals.push(s);
            (va, va)
        } else {
            let slot = self.cross_slot(ad)?;
            let remote = self.devs[bd].peer_view(&slot)?;
            let r = (remote.va(), slot.va());
            self.keep.extend([slot, remote]);
            r
        };
        self.ops.push((
            b,
            Op::Signal {
                va: signal_va,
                value: Value::Replay,
            },
        ));
        self.ops.push((
            a,
            Op::Wait {
                va: wait_va,
                value: Value::Replay,
            },
        ));
        Ok(())
    }

    /// A fresh cross-device value (0) in VRAM of device `di`: the next slot of a page of
    /// the graph's own.
    fn cross_slot(&mut self, di: usize) -> Result<Buffer> {
        let at = self
            .cross
            .iter()
            .position(|p| p.dev == di && p.used + CROSS_SLOT <= CROSS_PAGE);
        let at = match at {
            Some(i) => i,
            None => {
                let dev = &self.devs[di];
                let page = dev.alloc(CROSS_PAGE, MemKind::Vram)?;
                dev.write(&page, 0, &[0u8; CROSS_PAGE as usize])?;
                self.cross.push(CrossPage {
                    dev: di,
                    page,
                    used: 0,
                });
                self.cross.len() - 1
            }
        };
        let p = &mut self.cross[at];
        let slot = p.page.view(p.used, CROSS_SLOT)?;
        p.used += CROSS_SLOT;
        Ok(slot)
    }

    /// Encode the graph for replay.
    pub fn build(self) -> Result<GraphExec> {
        // Each device's arguments in uncached system memory of its own.
        let mut args_bufs = Vec::with_capacity(self.devs.len());
        for (dev, blob) in self.devs.iter().zip(&self.args) {
            let b = dev.alloc(blob.len().max(1) as u64, MemKind::System { uncached: true })?;
            dev.write(&b, 0, blob)?;
            args_bufs.push(b);
        }
        let mut enc = Encoding {
            places: Vec::new(),
            parts: Vec::with_capacity(self.queues.len()),
            keep: Vec::new(),
            profile: Vec::new(),
            kernels: Vec::with_capacity(self.queues.len()),
        };
        for (qi, (di, queue)) in self.queues.iter().enumerate() {
            let ops = self.ops.iter().filter(|(q, _)| *q == qi).map(|(_, op)| op);
            let dev = &self.devs[*di];
            let part = if queue.is_compute() {
                self.encode_compute(&mut enc, *di, queue, ops, &args_bufs[*di])?
            } else {
                self.encode_copy(&mut enc, *di, ops)?
            };
            enc.parts.push((*di, dev.info().gc_major < 10, part));
        }
        let Encoding {
            places,
            parts,
            mut keep,
            profile,
            kernels,
        } = enc;
        // Buffers the recorded copies use stay alive as long as the graph.
        for (_, op) in &self.ops {
            match op {
                Op::Copy { dst, src } => keep.extend([dst.clone(), src.clone()]),
                Op::Fill { dst, .. } => keep.push(dst.clone()),
                _ => {}
            }
        }
        keep.extend(self.keep);
        keep.extend(self.cross.into_iter().map(|p| p.page));
        let (replay_places, slot_places): (Vec<_>, Vec<_>) =
            places.into_iter().partition(|(s, _)| s.is_none());
        let mut by_slot: Vec<Vec<Place>> = vec![Vec::new(); self.values.len()];
        for (s, p) in slot_places {
            if let Some(s) = s {
                by_slot[s].push(p);
            }
        }
        let dirty = vec![false; self.devs.len()];
        Ok(GraphExec {
            devs: self.devs,
            queues: self.queues.into_iter().map(|(_, q)| q).collect(),
            parts,
            kernels,
            args_bufs,
            args: self.args,
            args_dirty: dirty,
            execs: self.execs,
            values: self.values.iter().map(|&v| (v, false)).collect(),
            by_slot,
            replay_places: replay_places.into_iter().map(|(_, p)| p).collect(),
            replays: 0,
            last: Vec::new(),
            profile,
            _signals: self.signals,
            _keep: keep,
        })
    }

    /// A compute queue's operations: PM4 in an IB, or AQL packets for its ring.
    fn encode_compute<'o>(
        &self,
        enc: &mut Encoding,
        di: usize,
        queue: &Queue,
        ops: impl Iterator<Item = &'o Op>,
        args_buf: &Buffer,
    ) -> Result<Part> {
        let dev = &self.devs[di];
        let mut found: Vec<(Value, Patch, bool)> = Vec::new();
        let mut c = ComputeCommands::new(dev);
        for op in ops {
            match op {
                Op::Exec { node, grid, block } => {
                    let e = &self.execs[*node];
                    c.exec_at(&e.prog, args_buf.va() + e.at as u64, *grid, *block)?;
                }
                Op::Signal { va, value } => {
                    found.push((*value, c.signal_at(*va, self.initial(*value)), true));
                }
                Op::Wait { va, value } => {
                    found.push((*value, c.wait_at(*va, self.initial(*value)), false));
                }
                Op::Copy { .. } | Op::Fill { .. } => unreachable!("checked when recorded"),
            }
        }
        enc.kernels.push(c.launches().clone());
        let name = queue.name();
        enc.profile
            .extend(c.take_profile().into_iter().map(|(kernel, start, end)| {
                (
                    di,
                    crate::trace::Pending {
                        kernel,
                        queue: name.clone(),
                        start,
                        end,
                    },
                )
            }));
        match c.pm4_words() {
            Some(words) => {
                let ib = upload(dev, words)?;
                let p = Part::Pm4 {
                    ib: ib.va(),
                    dwords: words.len(),
                };
                enc.place(di, found, &ib);
                enc.keep.push(ib);
                Ok(p)
            }
            None => enc.aql(dev, di, &c.aql_items().unwrap_or_default(), found),
        }
    }

    /// A copy queue's operations as SDMA packets in an IB.
    fn encode_copy<'o>(
        &self,
        enc: &mut Encoding,
        di: usize,
        ops: impl Iterator<Item = &'o Op>,
    ) -> Result<Part> {
        let dev = &self.devs[di];
        let mut found: Vec<(Value, Patch, bool)> = Vec::new();
        let mut c = CopyCommands::new(dev);
        for op in ops {
            match op {
                Op::Copy { dst, src } => {
                    c.copy(dst, src)?;
                }
                Op::Fill { dst, pattern } => {
                    c.fill(dst, *pattern)?;
                }
                Op::Signal { va, value } => {
                    found.push((*value, c.signal_at(*va, self.initial(*value)), true));
                }
                Op::Wait { va, value } => {
                    found.push((*value, c.wait_at(*va, self.initial(*value)), false));
                }
                Op::Exec { .. } => unreachable!("checked when recorded"),
            }
        }
        enc.kernels.push(Arc::new(Launches::default()));
        let ib = upload(dev, c.words())?;
        enc.place(di, found, &ib);
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
struct Encoding {
    /// Where each signal's and wait's value lies, by value slot (`None`: the replay count).
    places: Vec<(Option<usize>, Place)>,
    /// Each queue's part with its device and whether that device is GC 9.
    parts: Vec<(usize, bool, Part)>,
    /// The IBs the parts run.
    keep: Vec<Buffer>,
    /// Profiled launches with their device.
    profile: Vec<(usize, crate::trace::Pending)>,
    kernels: Vec<Arc<Launches>>,
}

impl Encoding {
    /// The values a queue's commands hold in `ib`, memory of device `di`.
    fn place(&mut self, di: usize, found: Vec<(Value, Patch, bool)>, ib: &Buffer) {
        for (v, patch, sig) in found {
            self.places
                .push((slot_of(v), Place::new(di, ib, patch.word, sig)));
        }
    }

    /// AQL packets for the ring; the PM4 between them goes to IBs of its own.
    fn aql(
        &mut self,
        dev: &Device,
        di: usize,
        items: &[AqlItem],
        found: Vec<(Value, Patch, bool)>,
    ) -> Result<Part> {
        let mut packets = Vec::with_capacity(items.len() * 64);
        let mut ibs: Vec<Option<Buffer>> = Vec::with_capacity(items.len());
        for it in items {
            match it {
                AqlItem::Dispatch(p) => {
                    packets.extend_from_slice(p.as_bytes());
                    ibs.push(None);
                }
                AqlItem::Pm4(words) => {
                    let ib = upload(dev, words)?;
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
                    device: dev.name().into(),
                    reason: "a graph value outside its PM4".into(),
                })?;
            self.places
                .push((slot_of(v), Place::new(di, ib, patch.word, sig)));
        }
        self.keep.extend(ibs.into_iter().flatten());
        Ok(Part::Aql { packets })
    }
}

/// Where a value lies in a graph's memory.
#[derive(Clone)]
struct Place {
    /// The device whose memory holds it.
    dev: usize,
    buf: Buffer,
    offset: u64,
    /// A signal's 64-bit value (else a wait's 32-bit reference).
    wide: bool,
}

impl Place {
    fn new(dev: usize, buf: &Buffer, word: usize, wide: bool) -> Place {
        Place {
            dev,
            buf: buf.clone(),
            offset: word as u64 * 4,
            wide,
        }
    }

    fn write(&self, devs: &[Device], v: u64) -> Result<()> {
        let dev = &devs[self.dev];
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
    devs: Vec<Device>,
    queues: Vec<Queue>,
    /// Each queue's part, with its device and whether that device is GC 9.
    parts: Vec<(usize, bool, Part)>,
    /// Each queue's launches (named in fault reports).
    kernels: Vec<Arc<Launches>>,
    /// Each device's kernel arguments, in its memory and as the host holds them.
    args_bufs: Vec<Buffer>,
    args: Vec<Vec<u8>>,
    args_dirty: Vec<bool>,
    execs: Vec<ExecRec>,
    /// Each caller-set value and whether it changed since the last replay.
    values: Vec<(u64, bool)>,
    by_slot: Vec<Vec<Place>>,
    replay_places: Vec<Place>,
    replays: u64,
    last: Vec<Fence>,
    profile: Vec<(usize, crate::trace::Pending)>,
    _signals: Vec<Signal>,
    _keep: Vec<Buffer>,
}

impl GraphExec {
    fn error(&self, reason: String) -> Error {
        Error::State {
            device: self.devs[0].name().into(),
            reason,
        }
    }

    /// Change explicit argument `index` of launch `node` for the next replays.
    pub fn set_arg(&mut self, node: ExecNode, index: usize, arg: &Arg) -> Result<()> {
        let e = self
            .execs
            .get(node.0)
            .ok_or_else(|| self.error(format!("the graph has no launch {}", node.0)))?;
        let end = e.at + e.prog.kernarg_size as usize;
        e.prog.set_arg(
            &self.devs[e.dev],
            &mut self.args[e.dev][e.at..end],
            index,
            arg,
        )?;
        self.args_dirty[e.dev] = true;
        Ok(())
    }

    /// Change the value a recorded signal writes, or a recorded wait compares with.
    pub fn set_value(&mut self, node: ValueNode, value: u64) -> Result<()> {
        let n = self.values.len();
        let v = self.values.get_mut(node.0).ok_or_else(|| Error::State {
            device: self.devs[0].name().into(),
            reason: format!("the graph has no signal or wait {} (of {n})", node.0),
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

    /// The devices the graph runs on.
    pub fn devices(&self) -> &[Device] {
        &self.devs
    }

    /// Replay: wait for the previous replay, patch what changed, submit each queue's part
    /// (every device's, one after the other, with no wait between them: the queues order
    /// each other on the GPU). Returns one fence per queue the graph uses.
    pub fn launch(&mut self) -> Result<&[Fence]> {
        for f in &self.last {
            f.wait()?;
        }
        self.replays += 1;
        for (di, dirty) in self.args_dirty.iter_mut().enumerate() {
            if std::mem::take(dirty) {
                self.devs[di].write(&self.args_bufs[di], 0, &self.args[di])?;
            }
        }
        for (i, (v, changed)) in self.values.iter_mut().enumerate() {
            if std::mem::take(changed) {
                for p in &self.by_slot[i] {
                    p.write(&self.devs, *v)?;
                }
            }
        }
        if self.replays > 1 {
            for p in &self.replay_places {
                p.write(&self.devs, self.replays)?;
            }
        }
        for (di, p) in &self.profile {
            p.start.clear_timestamp()?;
            p.end.clear_timestamp()?;
            lock(&self.devs[*di].0.trace).push(p.clone());
        }
        self.last.clear();
        for ((queue, (_, gfx9, part)), kernels) in
            self.queues.iter().zip(&self.parts).zip(&self.kernels)
        {
            let gfx9 = *gfx9;
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
