//! Command buffers: work encoded on the CPU, submitted once or many times.
//!
//! A [`ComputeCommands`] holds PM4 for the device's compute queue (or, on multi-XCC parts, AQL
//! dispatch packets with the PM4 in between carried by AMD's PM4-IB vendor packets); a
//! [`CopyCommands`] holds SDMA packets. Building is separate from submitting: encoding
//! allocates the kernel arguments and writes them at once, and a submission copies the
//! packets into a queue's ring, adds the queue's timeline signal and rings the doorbell. A
//! command buffer may be submitted many times, to any queue of its kind, as long as its
//! kernel arguments are still in the device's argument ring (16 MiB of later launches
//! overwrite them: submitting then is an error; graphs own their arguments). Each records
//! where its signal and wait values lie (its patch points) for graphs.

use std::sync::Arc;

use zerocopy::IntoBytes;

use am_isa::sync::lock;

use crate::device::{Device, KernargMark};
use crate::encode::{DataSel, Pm4, Sdma, aql_dispatch, aql_pm4_ib};
use crate::memory::Buffer;
use crate::program::{Arg, Program, kcp};
use crate::queue::{Fence, Queue};
use crate::signal::Signal;
use crate::{Error, Result};

/// Where a value that a graph may change lies in an encoded stream: the segment (the
/// PM4 stream of a PM4 or SDMA buffer: 0; on AQL queues the index of the PM4 item) and the
/// dword index in it of the value's low dword (a signal's 64-bit value has its high dword
/// after it; a wait compares the low 32 bits).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Patch {
    pub(crate) segment: usize,
    pub(crate) word: usize,
}

enum Body {
    Pm4(Pm4),
    Aql { items: Vec<AqlItem>, pending: Pm4 },
}

#[derive(Clone)]
pub(crate) enum AqlItem {
    Pm4(Vec<u32>),
    Dispatch([u32; 16]),
}

/// Work for a compute queue.
pub struct ComputeCommands {
    dev: Device,
    body: Body,
    dispatches: usize,
    /// Where the first launch's arguments lie in the device's argument ring.
    kernargs: Option<KernargMark>,
    /// Profiled dispatches: kernel name, start and end timestamps.
    profile: Vec<(String, Signal, Signal)>,
    /// The kernels launched (named in fault reports) and the code they run (kept alive
    /// while a submission may run it).
    launches: Arc<Launches>,
}

/// The launches of a command buffer.
#[derive(Clone, Debug, Default)]
pub(crate) struct Launches {
    /// Kernel names, in order.
    pub(crate) names: Vec<Arc<str>>,
    /// Their programs' code.
    pub(crate) code: Vec<Buffer>,
}

impl ComputeCommands {
    /// An empty command buffer for `dev`'s compute queue.
    pub fn new(dev: &Device) -> ComputeCommands {
        let gfx9 = dev.info().gc_major < 10;
        let body = if dev.info().aql {
            Body::Aql {
                items: Vec::new(),
                pending: Pm4::new(gfx9),
            }
        } else {
            let mut p = Pm4::new(gfx9);
            p.words.reserve(256);
            Body::Pm4(p)
        };
        ComputeCommands {
            dev: dev.clone(),
            body,
            dispatches: 0,
            kernargs: None,
            profile: Vec::new(),
            launches: Arc::new(Launches::default()),
        }
    }

    fn pm4(&mut self) -> &mut Pm4 {
        match &mut self.body {
            Body::Pm4(p) => p,
            Body::Aql { pending, .. } => pending,
        }
    }

    /// Invalidate the shader caches (what the next kernels read is what memory holds).
    pub fn acquire_mem(&mut self) -> &mut Self {
        self.pm4().acquire_mem();
        self
    }

    /// Make the CPU's and the other engines' writes visible: the GPU-side HDP flush, then
    /// the cache invalidation.
    pub fn memory_barrier(&mut self) -> &mut Self {
        if let Some((req, done)) = self.dev.0.hdp {
            self.pm4().write_wait_reg(req, done, 1);
        }
        self.pm4().acquire_mem();
        self
    }

    /// Set `signal` to `value` once everything before has finished.
    pub fn signal(&mut self, signal: &Signal, value: u64) -> &mut Self {
        self.signal_at(signal.va(), value);
        self
    }

    /// Set the 64 bits at GPU address `va` to `value` once everything before has finished;
    /// the patch point of the value.
    pub(crate) fn signal_at(&mut self, va: u64, value: u64) -> Patch {
        let word = self.pm4().release_mem(va, value, DataSel::Data64, false, 0);
        self.patch(word)
    }

    /// Wait until `signal` reaches `value` (the low 32 bits compared, `>=`).
    pub fn wait(&mut self, signal: &Signal, value: u64) -> &mut Self {
        self.wait_at(signal.va(), value);
        self
    }

    /// Wait until the dword at GPU address `va` is `>= value`; the patch point of the value.
    pub(crate) fn wait_at(&mut self, va: u64, value: u64) -> Patch {
        let word = self.pm4().wait_ge(va, value);
        self.patch(word)
    }

    /// The patch point of `word` of the PM4 being encoded.
    fn patch(&self, word: usize) -> Patch {
        let segment = match &self.body {
            Body::Pm4(_) => 0,
            Body::Aql { items, .. } => items.len(),
        };
        Patch { segment, word }
    }

    /// Write the GPU clock to `signal`'s timestamp once everything before has finished.
    pub fn timestamp(&mut self, signal: &Signal) -> &mut Self {
        self.pm4()
            .release_mem(signal.timestamp_va(), 0, DataSel::GpuClock, false, 0);
        self
    }

    /// Launch `prog` over `grid` workgroups of `block` work-items with `args` (checked against
    /// the kernel's metadata). The arguments are written now; a dispatch after this one may
    /// start only when this one has finished (each dispatch ends with a partial flush).
    pub fn exec(
        &mut self,
        prog: &Program,
        args: &[Arg],
        grid: [u32; 3],
        block: [u32; 3],
    ) -> Result<&mut Self> {
        // Arguments are encoded on the stack unless they are large.
        let n = prog.kernarg_size as usize;
        let mut stack = [0u8; 512];
        let mut heap = Vec::new();
        let bytes: &mut [u8] = if n <= stack.len() {
            &mut stack[..n]
        } else {
            heap.resize(n, 0);
            &mut heap
        };
        prog.encode_args_into(&self.dev, args, grid, block, bytes)?;
        let (kernarg, mark) = self.dev.kernarg(bytes, u64::from(prog.kernarg_align))?;
        if self.kernargs.is_none() {
            self.kernargs = Some(mark);
        }
        self.exec_at(prog, kernarg, grid, block)
    }

    /// [`ComputeCommands::exec`] with the kernel-argument bytes already laid out (at least
    /// the kernel's `kernarg_size`; hidden arguments are the caller's).
    pub fn exec_raw(
        &mut self,
        prog: &Program,
        args: &[u8],
        grid: [u32; 3],
        block: [u32; 3],
    ) -> Result<&mut Self> {
        if args.len() < prog.kernarg_size as usize {
            return Err(Error::Program {
                device: self.dev.name().into(),
                kernel: prog.name.clone(),
                reason: format!(
                    "{} bytes of arguments; the kernel takes {}",
                    args.len(),
                    prog.kernarg_size
                ),
            });
        }
        let (kernarg, mark) = self.dev.kernarg(args, u64::from(prog.kernarg_align))?;
        if self.kernargs.is_none() {
            self.kernargs = Some(mark);
        }
        self.exec_at(prog, kernarg, grid, block)
    }

    /// [`ComputeCommands::exec`] with the kernel arguments already in GPU memory at `kernarg`.
    pub fn exec_at(
        &mut self,
        prog: &Program,
        kernarg: u64,
        grid: [u32; 3],
        block: [u32; 3],
    ) -> Result<&mut Self> {
        if let Some(w) = prog.workgroup
            && w != block
        {
            return Err(Error::Program {
                device: self.dev.name().into(),
                kernel: prog.name.clone(),
                reason: format!("compiled for workgroups of {w:?}, launched with {block:?}"),
            });
        }
        let items = u64::from(block[0]) * u64::from(block[1]) * u64::from(block[2]);
        if items == 0 || items > 1024 || grid.contains(&0) {
            return Err(Error::Program {
                device: self.dev.name().into(),
                kernel: prog.name.clone(),
                reason: format!(
                    "launch of {grid:?} workgroups of {block:?} (1 to 1024 work-items, no empty dimension)"
                ),
            });
        }
        // The dispatch packet (AQL's, and the one a PM4 kernel reads through its dispatch
        // pointer) holds the grid in work-items, 32 bits a dimension.
        for (d, axis) in ["x", "y", "z"].into_iter().enumerate() {
            let work_items = u64::from(grid[d]) * u64::from(block[d]);
            if work_items > u64::from(u32::MAX) {
                return Err(Error::Limit {
                    device: self.dev.name().into(),
                    value: work_items,
                    limit: u32::MAX.into(),
                    reason: format!(
                        "kernel {}: a grid of {work_items} work-items in {axis} ({} workgroups \
                         of {}) is more than a dispatch packet holds ({} a dimension)",
                        prog.name,
                        grid[d],
                        block[d],
                        u32::MAX
                    ),
                });
            }
        }
        let scratch = self.dev.scratch(prog.scratch)?;
        self.dispatches += 1;
        let l = Arc::make_mut(&mut self.launches);
        l.names.push(prog.label.clone());
        if !l.code.iter().any(|c| c.va() == prog.code.va()) {
            l.code.push(prog.code.clone());
        }
        let profile = if self
            .dev
            .0
            .profiling
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            let (start, end) = (self.dev.new_signal()?, self.dev.new_signal()?);
            self.timestamp(&start);
            Some((start, end))
        } else {
            None
        };
        self.encode_dispatch(prog, kernarg, grid, block, scratch)?;
        if let Some((start, end)) = profile {
            self.timestamp(&end);
            self.profile.push((prog.name.clone(), start, end));
        }
        Ok(self)
    }

    fn encode_dispatch(
        &mut self,
        prog: &Program,
        kernarg: u64,
        grid: [u32; 3],
        block: [u32; 3],
        scratch: Option<(u64, u32)>,
    ) -> Result<()> {
        match &mut self.body {
            Body::Aql {
                items: list,
                pending,
            } => {
                if !pending.words.is_empty() {
                    list.push(AqlItem::Pm4(std::mem::take(&mut pending.words)));
                }
                let grid_items: [u32; 3] =
                    std::array::from_fn(|d| grid[d].saturating_mul(block[d]));
                list.push(AqlItem::Dispatch(aql_dispatch(
                    block,
                    grid_items,
                    prog.scratch,
                    prog.lds,
                    prog.descriptor,
                    kernarg,
                    0,
                )));
                Ok(())
            }
            Body::Pm4(_) => self.pm4_dispatch(prog, kernarg, grid, block, scratch),
        }
    }

    fn pm4_dispatch(
        &mut self,
        prog: &Program,
        kernarg: u64,
        grid: [u32; 3],
        block: [u32; 3],
        scratch: Option<(u64, u32)>,
    ) -> Result<()> {
        let sh = self.dev.0.sh.clone();
        let dev = self.dev.clone();
        // Kernels that read their launch through the dispatch pointer get an AQL packet
        // describing it, next to their arguments.
        let dispatch_ptr = if prog.properties & kcp::ENABLE_SGPR_DISPATCH_PTR != 0 {
            let grid_items: [u32; 3] = std::array::from_fn(|d| grid[d].saturating_mul(block[d]));
            let p = aql_dispatch(
                block,
                grid_items,
                prog.scratch,
                prog.lds,
                prog.descriptor,
                kernarg,
                0,
            );
            let bytes: Vec<u8> = p.iter().flat_map(|d| d.to_le_bytes()).collect();
            dev.kernarg(&bytes, 64)?.0
        } else {
            0
        };
        let mut user = Vec::with_capacity(16);
        let push64 = |v: &mut Vec<u32>, x: u64| {
            v.push(x as u32);
            v.push((x >> 32) as u32);
        };
        if prog.properties & kcp::ENABLE_SGPR_PRIVATE_SEGMENT_BUFFER != 0 {
            // A buffer descriptor of the scratch area (swizzled), as the hardware expects.
            let base = scratch.map_or(0, |s| s.0);
            user.extend([
                base as u32,
                (base >> 32) as u32 | 1 << 31,
                u32::MAX,
                0x20c1_4000,
            ]);
        }
        if prog.properties & kcp::ENABLE_SGPR_DISPATCH_PTR != 0 {
            push64(&mut user, dispatch_ptr);
        }
        if prog.properties & kcp::ENABLE_SGPR_QUEUE_PTR != 0 {
            push64(&mut user, 0);
        }
        if prog.properties & kcp::ENABLE_SGPR_KERNARG_SEGMENT_PTR != 0 {
            push64(&mut user, kernarg);
        }
        if prog.properties & kcp::ENABLE_SGPR_DISPATCH_ID != 0 {
            push64(&mut user, 0);
        }
        if prog.properties & kcp::ENABLE_SGPR_FLAT_SCRATCH_INIT != 0 {
            push64(&mut user, 0);
        }
        if prog.properties & kcp::ENABLE_SGPR_PRIVATE_SEGMENT_SIZE != 0 {
            user.push(prog.scratch);
        }
        let count = ((prog.rsrc[1] >> 1) & 0x1f) as usize;
        if user.len() > count || count > 16 {
            return Err(Error::Program {
                device: dev.name().into(),
                kernel: prog.name.clone(),
                reason: format!(
                    "its descriptor enables {} user SGPRs of values but RSRC2.USER_SGPR is {count}",
                    user.len()
                ),
            });
        }
        user.resize(count, 0);
        let lds_granules = prog.lds.div_ceil(512) & 0x1ff;
        let wave32 = prog.wave_size == 32;
        let p = self.pm4();
        p.acquire_mem();
        p.set_sh(
            sh.pgm_lo,
            &[(prog.entry >> 8) as u32, (prog.entry >> 40) as u32],
        );
        p.set_sh(sh.rsrc1, &[prog.rsrc[0], prog.rsrc[1] | lds_granules << 15]);
        p.set_sh(sh.rsrc3, &[prog.rsrc[2]]);
        match scratch {
            Some((va, tmpring)) => {
                p.set_sh(sh.tmpring, &[tmpring]);
                if let Some(base) = sh.scratch_base {
                    p.set_sh(base, &[(va >> 8) as u32, (va >> 40) as u32]);
                }
            }
            None => {
                p.set_sh(sh.tmpring, &[0]);
            }
        }
        if !user.is_empty() {
            p.set_sh(sh.user_data, &user);
        }
        if sh.num_thread_x == sh.start_x + 3 {
            p.set_sh(sh.start_x, &[0, 0, 0, block[0], block[1], block[2]]);
        } else {
            p.set_sh(sh.start_x, &[0, 0, 0]);
            p.set_sh(sh.num_thread_x, &block);
        }
        p.dispatch(grid, wave32);
        p.cs_partial_flush();
        Ok(())
    }

    /// Dispatches encoded so far.
    pub fn dispatches(&self) -> usize {
        self.dispatches
    }

    /// The PM4 dwords (PM4 queues; `None` on AQL queues).
    pub fn pm4_words(&self) -> Option<&[u32]> {
        match &self.body {
            Body::Pm4(p) => Some(&p.words),
            Body::Aql { .. } => None,
        }
    }

    /// The profiled launches encoded (kernel, start and end timestamps), taken out.
    pub(crate) fn take_profile(&mut self) -> Vec<(String, Signal, Signal)> {
        std::mem::take(&mut self.profile)
    }

    /// The kernels launched and their code.
    pub(crate) fn launches(&self) -> &Arc<Launches> {
        &self.launches
    }

    /// The AQL items with the PM4 still pending as the last (AQL queues).
    pub(crate) fn aql_items(&self) -> Option<Vec<AqlItem>> {
        match &self.body {
            Body::Pm4(_) => None,
            Body::Aql { items, pending } => {
                let mut v = items.clone();
                if !pending.words.is_empty() {
                    v.push(AqlItem::Pm4(pending.words.clone()));
                }
                Some(v)
            }
        }
    }

    /// Check that the arguments are still where they were written.
    fn check_kernargs(&self) -> Result<()> {
        if let Some(mark) = self.kernargs
            && !self.dev.kernarg_valid(mark)
        {
            return Err(Error::State {
                device: self.dev.name().into(),
                reason:
                    "this command buffer's kernel arguments were overwritten by later launches \
                         (the argument ring went round): encode it again, or record a graph"
                        .into(),
            });
        }
        Ok(())
    }

    /// Submit to the device's default compute queue ([`ComputeCommands::submit_to`]).
    pub fn submit(&self) -> Result<Fence> {
        self.submit_to(&self.dev.compute_queue())
    }

    /// Submit to `queue` (a compute queue of the same device), followed by the queue's
    /// timeline signal. Returns the fence that marks its end.
    pub fn submit_to(&self, queue: &Queue) -> Result<Fence> {
        if !queue.is_compute() || !std::sync::Arc::ptr_eq(&queue.dev.0, &self.dev.0) {
            return Err(Error::State {
                device: self.dev.name().into(),
                reason: format!("compute commands submitted to {}", queue.name()),
            });
        }
        self.check_kernargs()?;
        let fence = match &self.body {
            Body::Pm4(p) => queue.submit_bytes(p.words.as_bytes(), Some(&self.launches))?,
            Body::Aql { items, pending } => queue.submit_with(Some(&self.launches), |q| {
                let mut bytes = Vec::with_capacity((items.len() + 1) * 64);
                let pending = AqlItem::Pm4(pending.words.clone());
                for it in items.iter().chain([&pending]) {
                    match it {
                        AqlItem::Dispatch(p) => bytes.extend_from_slice(p.as_bytes()),
                        AqlItem::Pm4(words) if words.is_empty() => {}
                        AqlItem::Pm4(words) => {
                            let ib = q.ib(words)?;
                            bytes.extend_from_slice(aql_pm4_ib(ib, words.len()).as_bytes());
                        }
                    }
                }
                Ok(bytes)
            })?,
        };
        if !self.profile.is_empty() {
            let name = queue.name();
            let mut t = lock(&self.dev.0.trace);
            for (kernel, start, end) in &self.profile {
                t.push(crate::trace::Pending {
                    kernel: kernel.clone(),
                    queue: name.clone(),
                    start: start.clone(),
                    end: end.clone(),
                });
            }
        }
        Ok(fence)
    }
}

/// Work for a copy (SDMA) queue.
pub struct CopyCommands {
    dev: Device,
    sdma: Sdma,
}

impl CopyCommands {
    /// An empty command buffer for `dev`'s copy queues.
    pub fn new(dev: &Device) -> CopyCommands {
        CopyCommands {
            dev: dev.clone(),
            sdma: Sdma::new(dev.info().gc_major >= 10),
        }
    }

    /// Copy `src` into `dst` (the smaller size), split at the engine's largest copy.
    pub fn copy(&mut self, dst: &Buffer, src: &Buffer) -> Result<&mut Self> {
        self.check_device(dst)?;
        self.check_device(src)?;
        let n = dst.size().min(src.size());
        self.sdma.copy(src.va(), dst.va(), n);
        Ok(self)
    }

    /// Copy `dst.size()` bytes from `va`, an address of this device mapping another hive
    /// member's VRAM that the caller keeps mapped until the copy has finished
    /// ([`Device::copy_between`](crate::Device::copy_between)'s kept mappings).
    pub(crate) fn copy_from_peer(&mut self, dst: &Buffer, va: u64) -> Result<&mut Self> {
        self.check_device(dst)?;
        self.sdma.copy(va, dst.va(), dst.size());
        Ok(self)
    }

    /// Fill `dst` with the dword `pattern` (its size rounded down to whole dwords).
    pub fn fill(&mut self, dst: &Buffer, pattern: u32) -> Result<&mut Self> {
        self.check_device(dst)?;
        self.sdma.fill(dst.va(), pattern, dst.size() & !3);
        Ok(self)
    }

    fn check_device(&self, b: &Buffer) -> Result<()> {
        if b.belongs_to(&self.dev) {
            Ok(())
        } else {
            Err(Error::Buffer {
                device: self.dev.name().into(),
                va: b.va(),
                size: b.size(),
                reason: "the buffer belongs to another device (copy through the host: \
                         Device::copy_between)"
                    .into(),
            })
        }
    }

    /// Set `signal` to `value` after the copies before.
    pub fn signal(&mut self, signal: &Signal, value: u64) -> &mut Self {
        self.signal_at(signal.va(), value);
        self
    }

    /// Write the 64 bits at GPU address `va` after the copies before; the patch point.
    pub(crate) fn signal_at(&mut self, va: u64, value: u64) -> Patch {
        let word = self.sdma.write64(va, value);
        Patch { segment: 0, word }
    }

    /// Wait until `signal` reaches `value` (low 32 bits, `>=`).
    pub fn wait(&mut self, signal: &Signal, value: u64) -> &mut Self {
        self.wait_at(signal.va(), value);
        self
    }

    /// Poll until the dword at GPU address `va` is `>= value`; the patch point.
    pub(crate) fn wait_at(&mut self, va: u64, value: u64) -> Patch {
        let word = self.sdma.wait_ge(va, value);
        Patch { segment: 0, word }
    }

    /// The GPU clock into `signal`'s timestamp.
    pub fn timestamp(&mut self, signal: &Signal) -> &mut Self {
        self.sdma.timestamp(signal.timestamp_va());
        self
    }

    /// The SDMA dwords.
    pub fn words(&self) -> &[u32] {
        &self.sdma.words
    }

    /// Submit to the device's default copy queue ([`CopyCommands::submit_to`]).
    pub fn submit(&self) -> Result<Fence> {
        self.submit_to(&self.dev.copy_queue())
    }

    /// Submit to `queue` (a copy queue of the same device), followed by the queue's timeline
    /// signal. Returns the fence that marks its end.
    pub fn submit_to(&self, queue: &Queue) -> Result<Fence> {
        if queue.is_compute() || !std::sync::Arc::ptr_eq(&queue.dev.0, &self.dev.0) {
            return Err(Error::State {
                device: self.dev.name().into(),
                reason: format!("copy commands submitted to {}", queue.name()),
            });
        }
        queue.submit_bytes(self.sdma.words.as_bytes(), None)
    }
}
