//! Devices tensors live on: the host CPU (kernels compiled by the compiler's CPU backend) or
//! any `am` device (a GPU booted by the driver, the mock included), behind one interface.
//!
//! A device owns a pool of buffers (a buffer whose last handle goes returns to the pool and
//! is handed out again for the same size), the programs it has loaded (by kernel text), the
//! count of kernels it has launched, and, while a step is being captured, the list of
//! launches that a replay repeats.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use am_compiler::{Compiler, CpuProgram, Kernel, Target};
use am_isa::sync::lock;
use am_runtime::{Arg, ComputeCommands, MemKind};

use crate::{Error, Result};

/// Pooled bytes kept for reuse at most (more are freed).
const POOL_LIMIT: usize = 512 << 20;

/// A device: `cpu` or an `am` device. Cloning shares it.
#[derive(Clone)]
pub struct Device(pub(crate) Arc<DeviceInner>);

pub(crate) struct DeviceInner {
    name: String,
    backend: Backend,
    target: Target,
    compute_units: u32,
    pub(crate) compiler: Arc<Compiler>,
    programs: Mutex<HashMap<String, Arc<CompiledKernel>>>,
    /// Kernels the scheduler planned, with their programs, by what they compute
    /// (`schedule::plan_key`).
    plans: Mutex<HashMap<String, Arc<CachedPlan>>>,
    pool: Mutex<Pool>,
    kernels: AtomicU64,
    compiles: AtomicU64,
    allocations: AtomicU64,
    schedules: AtomicU64,
    copies: AtomicU64,
    debug: AtomicU32,
    optimize: AtomicBool,
    /// The thread capturing a step and the launches it made so far.
    capture: Mutex<Option<(std::thread::ThreadId, Vec<Launch>)>>,
    wait_nanos: AtomicU64,
    exec: Mutex<()>,
    /// The kernel search's width (`AM_BEAM`; 0: none), or the bad value it was given.
    beam: Mutex<Result<u32>>,
    /// Kernels searched, kernels whose choice came from the cache, candidates measured,
    /// and the searches' time.
    searched: AtomicU64,
    recalled: AtomicU64,
    measured: AtomicU64,
    search_nanos: AtomicU64,
}

enum Backend {
    Cpu,
    Am(am_runtime::Device),
}

#[derive(Default)]
struct Pool {
    free: HashMap<usize, Vec<Storage>>,
    bytes: usize,
}

impl fmt::Debug for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Device({})", self.0.name)
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.name)
    }
}

impl PartialEq for Device {
    fn eq(&self, other: &Device) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for Device {}

/// `AM_NOOPT=1`: kernels without the optimiser's choices (tinygrad's `NOOPT`).
fn noopt_from_env() -> bool {
    std::env::var("AM_NOOPT").is_ok_and(|v| v != "0" && !v.is_empty())
}

/// The level of `AM_DEBUG` (0 when unset or not a number).
fn debug_from_env() -> u32 {
    std::env::var("AM_DEBUG")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

impl Device {
    /// The host CPU, with a compiler caching on disk (`$XDG_CACHE_HOME/am`).
    pub fn cpu() -> Device {
        Device::cpu_with(Arc::new(Compiler::new()))
    }

    /// The host CPU with the given compiler (tests pass one that caches in memory only).
    pub fn cpu_with(compiler: Arc<Compiler>) -> Device {
        let cores = am_compiler::host_threads() as u32;
        Device::new("cpu".into(), Backend::Cpu, Target::Cpu, cores, compiler)
    }

    /// Opens the device `spec` names: `cpu`, or an `am` device spec (a PCI BDF,
    /// `mock:PROFILE[:N]` once the mock backend is registered, `remote:HOST:PORT[:N]`).
    pub fn open(spec: &str) -> Result<Device> {
        Device::open_with(spec, Arc::new(Compiler::new()))
    }

    /// [`Device::open`] with the given compiler.
    pub fn open_with(spec: &str, compiler: Arc<Compiler>) -> Result<Device> {
        crate::beam::from_env()?;
        if spec == "cpu" {
            return Ok(Device::cpu_with(compiler));
        }
        let dev = am_runtime::Device::open(spec).map_err(|source| Error::Runtime {
            device: spec.to_string(),
            source: Box::new(source),
        })?;
        Device::from_runtime(dev, compiler)
    }

    /// A tensor device on a runtime device that is already open.
    pub fn from_runtime(dev: am_runtime::Device, compiler: Arc<Compiler>) -> Result<Device> {
        let info = dev.info().clone();
        let target = Target::Gpu(info.target);
        let d = Device::new(
            info.name.clone(),
            Backend::Am(dev),
            target,
            info.cus.max(1),
            compiler,
        );
        d.apply_debug();
        Ok(d)
    }

    fn new(
        name: String,
        backend: Backend,
        target: Target,
        compute_units: u32,
        compiler: Arc<Compiler>,
    ) -> Device {
        Device(Arc::new(DeviceInner {
            name,
            backend,
            target,
            compute_units,
            compiler,
            programs: Mutex::new(HashMap::new()),
            plans: Mutex::new(HashMap::new()),
            pool: Mutex::new(Pool::default()),
            kernels: AtomicU64::new(0),
            compiles: AtomicU64::new(0),
            allocations: AtomicU64::new(0),
            schedules: AtomicU64::new(0),
            copies: AtomicU64::new(0),
            debug: AtomicU32::new(debug_from_env()),
            optimize: AtomicBool::new(!noopt_from_env()),
            capture: Mutex::new(None),
            wait_nanos: AtomicU64::new(0),
            exec: Mutex::new(()),
            beam: Mutex::new(crate::beam::from_env()),
            searched: AtomicU64::new(0),
            recalled: AtomicU64::new(0),
            measured: AtomicU64::new(0),
            search_nanos: AtomicU64::new(0),
        }))
    }

    /// The width of the kernel search (tinygrad's `BEAM`): 0 uses the optimiser's
    /// heuristics as they are; `N` ≥ 1 searches around their choice for each new kernel,
    /// measuring candidates on the device (on the mock by executed wave-instructions), and
    /// keeps the winner in the compiler's cache. Set from `AM_BEAM`; a value that is not a
    /// whole number is this error, naming the variable. Only while the optimiser is on
    /// ([`Device::set_optimize`]).
    pub fn beam(&self) -> Result<u32> {
        match &*lock(&self.0.beam) {
            Ok(n) => Ok(*n),
            Err(Error::Env { var, value, reason }) => Err(Error::Env {
                var,
                value: value.clone(),
                reason: reason.clone(),
            }),
            Err(e) => Err(Error::Device {
                device: self.0.name.clone(),
                reason: e.to_string(),
            }),
        }
    }

    /// Sets the width of the kernel search ([`Device::beam`]) for the kernels planned from
    /// now on (plans of another width are not reused).
    pub fn set_beam(&self, width: u32) {
        *lock(&self.0.beam) = Ok(width);
    }

    /// Kernels the search measured candidates for, so far.
    pub fn kernels_searched(&self) -> u64 {
        self.0.searched.load(Ordering::Relaxed)
    }

    /// Kernels whose searched choice came from the compiler's cache, so far.
    pub fn searches_recalled(&self) -> u64 {
        self.0.recalled.load(Ordering::Relaxed)
    }

    /// Candidate kernels the search measured, so far (the heuristics' own included).
    pub fn candidates_measured(&self) -> u64 {
        self.0.measured.load(Ordering::Relaxed)
    }

    /// Time spent searching (generating, compiling and measuring candidates), so far.
    pub fn search_time(&self) -> Duration {
        Duration::from_nanos(self.0.search_nanos.load(Ordering::Relaxed))
    }

    /// Counts a search (`searched`: measured; else recalled from the cache).
    pub(crate) fn count_search(&self, searched: bool, measured: u64, t: Duration) {
        if searched {
            self.0.searched.fetch_add(1, Ordering::Relaxed);
        } else {
            self.0.recalled.fetch_add(1, Ordering::Relaxed);
        }
        self.0.measured.fetch_add(measured, Ordering::Relaxed);
        self.0
            .search_nanos
            .fetch_add(t.as_nanos() as u64, Ordering::Relaxed);
    }

    /// The device's name (`cpu` or the `am` device's spec).
    pub fn name(&self) -> &str {
        &self.0.name
    }

    /// What the compiler generates code for on this device.
    pub fn target(&self) -> Target {
        self.0.target
    }

    /// Whether this is the host CPU.
    pub fn is_cpu(&self) -> bool {
        matches!(self.0.backend, Backend::Cpu)
    }

    /// The runtime device under an `am` device.
    pub fn runtime(&self) -> Option<&am_runtime::Device> {
        match &self.0.backend {
            Backend::Am(d) => Some(d),
            Backend::Cpu => None,
        }
    }

    /// Kernels launched so far (replays of captured steps included).
    pub fn kernels_launched(&self) -> u64 {
        self.0.kernels.load(Ordering::Relaxed)
    }

    /// Programs this device has compiled or loaded so far.
    pub fn programs_built(&self) -> u64 {
        self.0.compiles.load(Ordering::Relaxed)
    }

    /// Fresh memory allocations so far (memory from the pool not counted).
    pub fn allocations(&self) -> u64 {
        self.0.allocations.load(Ordering::Relaxed)
    }

    /// Schedules made so far (each realize of work on this device makes one).
    pub fn schedules(&self) -> u64 {
        self.0.schedules.load(Ordering::Relaxed)
    }

    pub(crate) fn count_schedule(&self) {
        self.0.schedules.fetch_add(1, Ordering::Relaxed);
    }

    /// Copies into this device's memory started so far, by the runtime or the host:
    /// between devices (counted at the destination) and within the device (a join placing
    /// a part). Reads in place through a peer mapping move nothing and are not counted,
    /// nor are kernels (an assignment's copy back) or a captured step's replays.
    pub fn copies_started(&self) -> u64 {
        self.0.copies.load(Ordering::Relaxed)
    }

    pub(crate) fn count_copy(&self) {
        self.0.copies.fetch_add(1, Ordering::Relaxed);
    }

    /// Time spent waiting for the GPU to finish submitted work so far (0 on the CPU, where
    /// kernels run on the calling thread).
    pub fn wait_time(&self) -> Duration {
        Duration::from_nanos(self.0.wait_nanos.load(Ordering::Relaxed))
    }

    /// The kernel log level (`AM_DEBUG` at creation): 2 prints every kernel with its shape
    /// and time, 4 also its IR.
    pub fn debug(&self) -> u32 {
        self.0.debug.load(Ordering::Relaxed)
    }

    /// Changes the kernel log level.
    pub fn set_debug(&self, level: u32) {
        self.0.debug.store(level, Ordering::Relaxed);
        self.apply_debug();
    }

    fn apply_debug(&self) {
        if let Backend::Am(d) = &self.0.backend {
            d.set_profiling(self.debug() >= 2);
        }
    }

    /// Whether kernels are generated with the optimiser's choices (tiles of outputs per
    /// work-item, vector accesses, unrolled and grouped reductions); on unless `AM_NOOPT=1`
    /// was set at creation. On the CPU only the choices that keep each output's order of
    /// operations, and the two-kernel full reduction ([`crate::opt`]).
    pub fn optimize(&self) -> bool {
        self.0.optimize.load(Ordering::Relaxed)
    }

    /// Switches the kernel optimiser on or off for the kernels scheduled from now on.
    pub fn set_optimize(&self, on: bool) {
        self.0.optimize.store(on, Ordering::Relaxed);
    }

    pub(crate) fn compute_units(&self) -> u32 {
        self.0.compute_units
    }

    pub(crate) fn runtime_error(&self, source: am_runtime::Error) -> Error {
        Error::Runtime {
            device: self.0.name.clone(),
            source: Box::new(source),
        }
    }

    /// A buffer of at least `bytes` bytes (contents unspecified), from the pool if one fits.
    pub(crate) fn alloc(&self, bytes: usize) -> Result<Buffer> {
        let size = bytes.max(1).next_multiple_of(256);
        let reused = {
            let mut p = lock(&self.0.pool);
            let s = p.free.get_mut(&size).and_then(|v| v.pop());
            if s.is_some() {
                p.bytes -= size;
            }
            s
        };
        let storage = match reused {
            Some(s) => s,
            None => {
                self.0.allocations.fetch_add(1, Ordering::Relaxed);
                match &self.0.backend {
                    Backend::Cpu => Storage::Host(Mutex::new(vec![0u128; size / 16])),
                    Backend::Am(d) => Storage::Am(
                        d.alloc(size as u64, MemKind::Vram)
                            .map_err(|e| self.runtime_error(e))?,
                    ),
                }
            }
        };
        Ok(Buffer(Arc::new(BufferInner {
            dev: self.clone(),
            size,
            storage: Some(storage),
            parent: None,
        })))
    }

    fn release(&self, size: usize, s: Storage) {
        let mut p = lock(&self.0.pool);
        if p.bytes + size <= POOL_LIMIT {
            p.bytes += size;
            p.free.entry(size).or_default().push(s);
        }
    }

    /// Writes `data` at the start of `buf`.
    pub(crate) fn write(&self, buf: &Buffer, data: &[u8]) -> Result<()> {
        match buf.storage() {
            Storage::Host(m) => {
                let mut words = lock(m);
                for (w, chunk) in words.iter_mut().zip(data.chunks(16)) {
                    let mut b = w.to_le_bytes();
                    b[..chunk.len()].copy_from_slice(chunk);
                    *w = u128::from_le_bytes(b);
                }
                Ok(())
            }
            Storage::Am(b) => {
                let d = self.runtime().ok_or_else(|| self.not_am())?;
                d.write(b, 0, data).map_err(|e| self.runtime_error(e))
            }
        }
    }

    /// `src`, memory of `from`, as memory of this device that reads it in place: a view
    /// through a peer mapping when both are `am` devices that reach each other (one XGMI
    /// hive, or PCIe through `from`'s BAR0) and `src` is VRAM
    /// (`am_runtime::Device::peer_view`); `None` otherwise, and when the runtime refuses
    /// the mapping (`NotInOneHive`: no peer path; the caller copies instead). The view
    /// holds `src`.
    pub(crate) fn peer_view(&self, from: &Device, src: &Buffer) -> Result<Option<Buffer>> {
        let (Some(me), Some(_)) = (self.runtime(), from.runtime()) else {
            return Ok(None);
        };
        let Storage::Am(s) = src.storage() else {
            return Ok(None);
        };
        if s.kind() != MemKind::Vram || self == from {
            return Ok(None);
        }
        match me.peer_view(s) {
            Ok(v) => Ok(Some(Buffer(Arc::new(BufferInner {
                dev: self.clone(),
                size: src.size(),
                storage: Some(Storage::Am(v)),
                // Holds the source's memory (and keeps the view out of this device's pool).
                parent: Some((src.clone(), 0)),
            })))),
            Err(e) if e.is_not_in_one_hive() => Ok(None),
            Err(e) => Err(self.runtime_error(e)),
        }
    }

    /// Reads the first `out.len()` bytes of `buf`.
    pub(crate) fn read(&self, buf: &Buffer, out: &mut [u8]) -> Result<()> {
        match buf.storage() {
            Storage::Host(m) => {
                let words = lock(m);
                for (w, chunk) in words.iter().zip(out.chunks_mut(16)) {
                    chunk.copy_from_slice(&w.to_le_bytes()[..chunk.len()]);
                }
                Ok(())
            }
            Storage::Am(b) => {
                let d = self.runtime().ok_or_else(|| self.not_am())?;
                d.read(b, 0, out).map_err(|e| self.runtime_error(e))
            }
        }
    }

    /// Starts copying the first `len` bytes of `src` to `dst` at byte `at`, both memory of
    /// this device (with its copy queue on an `am` device): the fence to wait for (`None`
    /// when the copy is done already). Both buffers must be held until the fence has passed.
    pub(crate) fn copy_into_start(
        &self,
        src: &Buffer,
        dst: &Buffer,
        at: usize,
        len: usize,
    ) -> Result<Option<am_runtime::Fence>> {
        if len == 0 {
            return Ok(None);
        }
        self.count_copy();
        match (src.storage(), dst.storage()) {
            (Storage::Am(s), Storage::Am(d)) => {
                let rt = self.runtime().ok_or_else(|| self.not_am())?;
                let run = || {
                    let mut c = am_runtime::CopyCommands::new(rt);
                    c.copy(&d.view(at as u64, len as u64)?, &s.view(0, len as u64)?)?;
                    c.submit()
                };
                let fence = run().map(Some).map_err(|e| self.runtime_error(e))?;
                crate::jit::record(|| crate::jit::Event::Copy {
                    to: self.clone(),
                    dst: dst.clone(),
                    dst_at: at,
                    from: self.clone(),
                    src: src.clone(),
                    len,
                });
                Ok(fence)
            }
            (Storage::Host(_), Storage::Host(d)) => {
                let mut bytes = vec![0u8; len];
                self.read(src, &mut bytes)?;
                let mut words = lock(d);
                for (i, &b) in bytes.iter().enumerate() {
                    let p = at + i;
                    if let Some(w) = words.get_mut(p / 16) {
                        let mut x = w.to_le_bytes();
                        x[p % 16] = b;
                        *w = u128::from_le_bytes(x);
                    }
                }
                Ok(None)
            }
            _ => Err(Error::Device {
                device: self.0.name.clone(),
                reason: "a copy between host and GPU memory of one device".into(),
            }),
        }
    }

    fn not_am(&self) -> Error {
        Error::Device {
            device: self.0.name.clone(),
            reason: "a GPU buffer on a device that is not an am device".into(),
        }
    }

    /// The program of `kernel` on this device: compiled (through the compiler's cache) and
    /// loaded once, then found by its text.
    pub(crate) fn program(&self, kernel: &Kernel) -> Result<Arc<CompiledKernel>> {
        let key = am_compiler::text::print_canonical(kernel);
        if let Some(p) = lock(&self.0.programs).get(&key) {
            return Ok(p.clone());
        }
        let compile_err = |source| Error::Compile {
            device: self.0.name.clone(),
            kernel: kernel.name.clone(),
            source: Box::new(source),
        };
        let compiled = self
            .0
            .compiler
            .compile(kernel, self.0.target)
            .map_err(compile_err)?;
        let program = match &self.0.backend {
            Backend::Cpu => Program::Cpu(CpuProgram::load(&compiled.bytes).map_err(compile_err)?),
            Backend::Am(d) => Program::Am(
                d.load(&compiled.bytes, &kernel.name)
                    .map_err(|e| self.runtime_error(e))?,
            ),
        };
        self.0.compiles.fetch_add(1, Ordering::Relaxed);
        let ck = Arc::new(CompiledKernel {
            name: kernel.name.clone(),
            workgroup: kernel.workgroup[0],
            layout: kernel.arg_layout(),
            args_size: kernel.args_size() as usize,
            loops: has_loop(&kernel.body),
            program,
            text: if self.debug() >= 4 {
                am_compiler::text::print(kernel)
            } else {
                String::new()
            },
        });
        lock(&self.0.programs).insert(key, ck.clone());
        Ok(ck)
    }

    /// The plan cached under `key`, if any.
    pub(crate) fn cached_plan(&self, key: &str) -> Option<Arc<CachedPlan>> {
        lock(&self.0.plans).get(key).cloned()
    }

    /// Keeps a plan for the schedules to come (all are dropped once there are
    /// [`PLAN_LIMIT`]: shapes that keep changing do not grow the map without end).
    pub(crate) fn cache_plan(&self, key: String, plan: Arc<CachedPlan>) {
        let mut plans = lock(&self.0.plans);
        if plans.len() >= PLAN_LIMIT {
            plans.clear();
        }
        plans.insert(key, plan);
    }

    /// Starts recording the launches this thread makes (a step being captured).
    pub(crate) fn begin_capture(&self) -> Result<()> {
        let mut c = lock(&self.0.capture);
        if c.is_some() {
            return Err(Error::Capture(format!(
                "device {} is already capturing a step",
                self.0.name
            )));
        }
        *c = Some((std::thread::current().id(), Vec::new()));
        Ok(())
    }

    /// Stops recording and returns the launches recorded.
    pub(crate) fn end_capture(&self) -> Vec<Launch> {
        lock(&self.0.capture)
            .take()
            .map(|(_, l)| l)
            .unwrap_or_default()
    }

    /// Starts `launches` in order (recording them while a capture is on) without waiting
    /// for the GPU: what is left to wait for (`None` when nothing is, as on the `cpu`,
    /// which runs the launches here). Launches started on
    /// several devices before waiting on any run at once, each on its device's queue.
    pub(crate) fn start(&self, launches: &[Launch]) -> Result<Option<Running>> {
        if launches.is_empty() {
            return Ok(None);
        }
        let _serial = lock(&self.0.exec);
        if let Some((thread, c)) = lock(&self.0.capture).as_mut()
            && *thread == std::thread::current().id()
        {
            c.extend(launches.iter().cloned());
        }
        for l in launches {
            crate::jit::record(|| crate::jit::Event::Launch {
                dev: self.clone(),
                launch: l.clone(),
            });
        }
        self.0
            .kernels
            .fetch_add(launches.len() as u64, Ordering::Relaxed);
        let debug = self.debug();
        match &self.0.backend {
            Backend::Cpu => {
                let first = self.kernels_launched() - launches.len() as u64;
                for (k, l) in launches.iter().enumerate() {
                    let t = Instant::now();
                    self.launch_cpu(l)?;
                    if debug >= 2 {
                        self.log(first + k as u64 + 1, l, t.elapsed());
                    }
                }
                Ok(None)
            }
            Backend::Am(d) => {
                let mut c = ComputeCommands::new(d);
                for l in launches {
                    let Program::Am(p) = &l.kernel.program else {
                        return Err(self.not_am());
                    };
                    c.exec(
                        p,
                        &l.gpu_args(),
                        [l.groups, 1, 1],
                        [l.kernel.workgroup, 1, 1],
                    )
                    .map_err(|e| self.runtime_error(e))?;
                }
                let fence = c.submit().map_err(|e| self.runtime_error(e))?;
                let first = self.kernels_launched() - launches.len() as u64;
                let logged = (debug >= 2).then(|| (first, launches.to_vec()));
                Ok(Some(Running {
                    dev: self.clone(),
                    fence,
                    logged,
                }))
            }
        }
    }

    /// Adds time spent waiting for the GPU (graph replays measure their own waits).
    pub(crate) fn add_wait(&self, d: Duration) {
        self.0
            .wait_nanos
            .fetch_add(d.as_nanos() as u64, Ordering::Relaxed);
    }

    pub(crate) fn count_kernels(&self, n: usize) {
        self.0.kernels.fetch_add(n as u64, Ordering::Relaxed);
    }

    /// One line of the kernel log: device, kernel number, name, shape, time.
    pub(crate) fn log(&self, n: u64, l: &Launch, t: Duration) {
        eprintln!(
            "{:<12} {:>6} {:<28} {:<40} {:>10.1} µs",
            self.0.name,
            n,
            l.kernel.name,
            l.info,
            t.as_secs_f64() * 1e6
        );
        if self.debug() >= 4 && !l.kernel.text.is_empty() {
            eprintln!("{}", l.kernel.text);
        }
    }

    /// Runs one launch on the host.
    pub(crate) fn launch_cpu(&self, l: &Launch) -> Result<()> {
        let Program::Cpu(p) = &l.kernel.program else {
            return Err(Error::Device {
                device: self.0.name.clone(),
                reason: "a GPU program launched on the cpu".into(),
            });
        };
        // Each distinct buffer is locked once for the launch; the kernel gets pointers into
        // the locked memory.
        let mut distinct: Vec<&Buffer> = Vec::new();
        for a in &l.args {
            if let LaunchArg::Buf(b) = a
                && !distinct.iter().any(|d| Arc::ptr_eq(&d.0, &b.0))
            {
                distinct.push(b);
            }
        }
        let mut guards = Vec::with_capacity(distinct.len());
        for b in &distinct {
            match b.storage() {
                Storage::Host(m) => guards.push(lock(m)),
                Storage::Am(_) => {
                    return Err(Error::Device {
                        device: self.0.name.clone(),
                        reason: "a GPU buffer passed to a cpu kernel".into(),
                    });
                }
            }
        }
        let ptrs: Vec<u64> = guards
            .iter_mut()
            .map(|g| g.as_mut_ptr() as usize as u64)
            .collect();
        let mut bytes = vec![0u8; l.kernel.args_size + 16];
        for (a, &(off, size)) in l.args.iter().zip(&l.kernel.layout) {
            let v: u64 = match a {
                LaunchArg::Buf(b) => {
                    let i = distinct
                        .iter()
                        .position(|d| Arc::ptr_eq(&d.0, &b.0))
                        .unwrap_or(0);
                    ptrs[i]
                }
                LaunchArg::U32(x) => u64::from(*x),
            };
            let off = off as usize;
            bytes[off..off + size as usize].copy_from_slice(&v.to_le_bytes()[..size as usize]);
        }
        let items = u64::from(l.groups) * u64::from(l.kernel.workgroup);
        let threads = if !l.kernel.loops && items <= ONE_THREAD_ITEMS {
            1
        } else {
            am_compiler::host_threads()
        };
        // SAFETY: every pointer argument points into a buffer locked above for the whole
        // launch, and the scheduler generated the kernel to access only elements inside the
        // shapes those buffers were allocated for (indices of padded regions are clamped to
        // 0 before loading).
        unsafe { p.launch_on([l.groups, 1, 1], &bytes, threads) }.map_err(|source| {
            Error::Compile {
                device: self.0.name.clone(),
                kernel: l.kernel.name.clone(),
                source: Box::new(source),
            }
        })?;
        drop(guards);
        Ok(())
    }
}

/// A kernel the scheduler planned (its parameters by place, `schedule::plan_key`) and its
/// program.
pub(crate) type CachedPlan = (crate::codegen::Plan, Arc<CompiledKernel>);

/// Plans a device keeps at most.
const PLAN_LIMIT: usize = 4096;

/// A kernel ready to launch on a device.
pub(crate) struct CompiledKernel {
    pub(crate) name: String,
    pub(crate) workgroup: u32,
    layout: Vec<(u32, u32)>,
    args_size: usize,
    /// Whether the kernel has a loop (else a work-item's work is its few instructions).
    loops: bool,
    pub(crate) program: Program,
    text: String,
}

/// Work-items of a kernel without loops that the `cpu` device runs on one thread: a copy of
/// this many elements (the packing of a matrix product's operand, a shrink) takes tens of
/// microseconds, about what waking a pool thread and handing it work costs.
const ONE_THREAD_ITEMS: u64 = 1 << 16;

fn has_loop(body: &[am_compiler::Inst]) -> bool {
    body.iter().any(|i| match &i.op {
        am_compiler::Op::Range { .. } => true,
        am_compiler::Op::If { body, .. } => has_loop(body),
        _ => false,
    })
}

pub(crate) enum Program {
    Cpu(CpuProgram),
    Am(am_runtime::Program),
}

/// An argument of a launch.
#[derive(Clone)]
pub(crate) enum LaunchArg {
    Buf(Buffer),
    U32(u32),
}

/// One kernel launch: the program, its arguments, the number of workgroups.
#[derive(Clone)]
pub(crate) struct Launch {
    pub(crate) kernel: Arc<CompiledKernel>,
    pub(crate) args: Vec<LaunchArg>,
    pub(crate) groups: u32,
    /// Output shape and the reduction sizes, for the log.
    pub(crate) info: String,
}

impl Launch {
    pub(crate) fn gpu_args(&self) -> Vec<Arg> {
        self.args
            .iter()
            .map(|a| match a {
                LaunchArg::Buf(b) => Arg::Ptr(b.va()),
                LaunchArg::U32(x) => Arg::U32(*x),
            })
            .collect()
    }
}

/// Launches submitted to an `am` device and not yet waited for ([`Device::start`]).
pub(crate) struct Running {
    dev: Device,
    fence: am_runtime::Fence,
    /// The number of the first launch and the launches, kept to log them once they are
    /// done (`AM_DEBUG=2`).
    logged: Option<(u64, Vec<Launch>)>,
}

impl Running {
    /// Waits until the launches have finished (and logs them at `AM_DEBUG=2`).
    pub(crate) fn wait(self) -> Result<()> {
        let dev = &self.dev;
        let t = Instant::now();
        let r = self.fence.wait();
        dev.0
            .wait_nanos
            .fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
        r.map_err(|e| dev.runtime_error(e))?;
        if let (Some((first, launches)), Some(d)) = (&self.logged, dev.runtime()) {
            let events = d.profile().map_err(|e| dev.runtime_error(e))?;
            let recent = events.iter().rev().take(launches.len()).rev();
            for (k, (l, e)) in launches.iter().zip(recent).enumerate() {
                dev.log(*first + k as u64 + 1, l, Duration::from_nanos(e.nanos()));
            }
        }
        Ok(())
    }
}

pub(crate) enum Storage {
    Host(Mutex<Vec<u128>>),
    Am(am_runtime::Buffer),
}

/// Device memory holding a tensor's elements. Cloning shares it; the last handle returns
/// the memory to its device's pool.
#[derive(Clone)]
pub(crate) struct Buffer(pub(crate) Arc<BufferInner>);

pub(crate) struct BufferInner {
    dev: Device,
    size: usize,
    storage: Option<Storage>,
    /// For a view ([`Buffer::view`]): the buffer it looks into and the byte where it starts.
    /// Held so that memory goes back to the pool only once no view of it is left.
    parent: Option<(Buffer, usize)>,
}

impl Drop for BufferInner {
    fn drop(&mut self) {
        if let Some(s) = self.storage.take()
            && self.parent.is_none()
        {
            self.dev.release(self.size, s);
        }
    }
}

impl Buffer {
    pub(crate) fn storage(&self) -> &Storage {
        // Present until the drop.
        match &self.0.storage {
            Some(s) => s,
            None => unreachable!("a buffer's storage is taken only when it is dropped"),
        }
    }

    /// Bytes.
    pub(crate) fn size(&self) -> usize {
        self.0.size
    }

    /// The GPU address (0 for host memory).
    pub(crate) fn va(&self) -> u64 {
        match self.storage() {
            Storage::Am(b) => b.va(),
            Storage::Host(_) => 0,
        }
    }

    /// Whether two handles share memory.
    pub(crate) fn same(&self, other: &Buffer) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// Bytes `[at, at + len)` of this buffer as a buffer of their own (GPU memory only: `None`
    /// for host memory or a range past the end). A copy can then land in, or read from, part
    /// of a larger buffer; the larger one stays out of the pool while the view lives. `at` is
    /// a multiple of 256, as every buffer's start is (kernels may assume that alignment).
    pub(crate) fn view(&self, at: usize, len: usize) -> Option<Buffer> {
        if !at.is_multiple_of(256) || at.checked_add(len)? > self.size() {
            return None;
        }
        let Storage::Am(b) = self.storage() else {
            return None;
        };
        let storage = Storage::Am(b.view(at as u64, len as u64).ok()?);
        Some(Buffer(Arc::new(BufferInner {
            dev: self.0.dev.clone(),
            size: len,
            storage: Some(storage),
            parent: Some((self.clone(), at)),
        })))
    }

    /// Whether this is the view of `other` that starts at byte `at`.
    pub(crate) fn is_view_of(&self, other: &Buffer, at: usize) -> bool {
        matches!(&self.0.parent, Some((p, a)) if p.same(other) && *a == at)
    }
}
