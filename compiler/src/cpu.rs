//! The CPU backend: the same IR compiled for the host and run over a grid — the `cpu` device
//! of the tensor layer and the reference of the tests.
//!
//! A CPU program image is a small header (kernel name, workgroup size, local memory bytes,
//! whether it has barriers, argument bytes) followed by the host object LLVM generated. It
//! is loaded into an LLVM ORC JIT (which relocates it and resolves libm's functions from the
//! process). The argument bytes have the GPU kernel-argument layout ([`Kernel::arg_layout`])
//! with host pointers.
//!
//! Kernels without barriers are called as `void NAME(const u8 *args, Ctx *ctx, u64 first,
//! u64 end, u32 groups_x, u32 groups_y)`, which runs workgroups `first..end`, their
//! work-items one after another in a loop of the compiled code (`lower`): each of the
//! threads — the calling one and up to one per further core from a pool kept for launches —
//! has a block of contiguous workgroups, cut into runs of about an eighth of it; a thread
//! takes the runs of its block, then those left in the others'. Every
//! work-item computes the same operations whatever the number of threads, so results do not
//! depend on it. Kernels with barriers are called as `void NAME(const u8
//! *args, Ctx *ctx)` once per work-item, each work-item of a workgroup on its own thread,
//! meeting at a `std::sync::Barrier` (slower, but exact).

use std::ffi::{CString, c_void};
use std::ptr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Condvar, Mutex, OnceLock};

use llvm_sys::core::LLVMCreateMemoryBufferWithMemoryRangeCopy;
use llvm_sys::orc2::lljit::*;
use llvm_sys::orc2::*;

use crate::codegen::take_error;
use crate::ir::Kernel;
use crate::lower::{CTX_BARRIER_DATA, CTX_BARRIER_FN, CTX_GROUP_ID, CTX_LDS, CTX_LOCAL_ID};
use crate::{Error, Target};

const MAGIC: &[u8; 8] = b"AMCPU\0\0\x02";

/// The work-item context a host kernel reads (offsets in `lower`).
#[repr(C)]
struct Ctx {
    local_id: [u32; 3],
    group_id: [u32; 3],
    lds: *mut u8,
    barrier_fn: extern "C" fn(*const c_void),
    barrier_data: *const c_void,
}

const _: () = {
    assert!(std::mem::offset_of!(Ctx, local_id) == CTX_LOCAL_ID as usize);
    assert!(std::mem::offset_of!(Ctx, group_id) == CTX_GROUP_ID as usize);
    assert!(std::mem::offset_of!(Ctx, lds) == CTX_LDS as usize);
    assert!(std::mem::offset_of!(Ctx, barrier_fn) == CTX_BARRIER_FN as usize);
    assert!(std::mem::offset_of!(Ctx, barrier_data) == CTX_BARRIER_DATA as usize);
};

/// A work-item of a kernel with barriers.
type ItemFn = unsafe extern "C" fn(*const u8, *mut Ctx);
/// The workgroups `first..end` of a kernel without barriers (`groups_x`, `groups_y`).
type GroupsFn = unsafe extern "C" fn(*const u8, *mut Ctx, u64, u64, u32, u32);

/// The entry the JIT resolved, by the kernel's kind.
#[derive(Clone, Copy)]
enum Entry {
    Item(ItemFn),
    Groups(GroupsFn),
}

extern "C" fn barrier_wait(data: *const c_void) {
    // SAFETY: `data` is the `&Barrier` that `launch` put in this work-item's context; the
    // barrier outlives every work-item thread of the workgroup (a thread scope).
    let b = unsafe { &*(data as *const Barrier) };
    b.wait();
}

extern "C" fn no_barrier(_: *const c_void) {}

/// Bytes of the widest vector register host code computes floats in: 32 with AVX (AVX-512
/// is off, `codegen::host_cpu`), else 16 (SSE, NEON). The tensor layer's optimiser gives
/// the `cpu` device's work-items tiles this wide.
pub fn host_vector_bytes() -> u32 {
    static BYTES: OnceLock<u32> = OnceLock::new();
    *BYTES.get_or_init(|| {
        let (_, features) = crate::codegen::host_cpu();
        // The last mention of a feature wins (`-avx512f` is appended).
        let on = |name: &str| {
            features
                .split(',')
                .rev()
                .find(|f| f.get(1..) == Some(name))
                .is_some_and(|f| f.starts_with('+'))
        };
        if on("avx") { 32 } else { 16 }
    })
}

/// Threads a launch uses at most: `AM_CPU_THREADS` when it is a positive number, else the
/// host's available parallelism.
pub fn host_threads() -> usize {
    static THREADS: OnceLock<usize> = OnceLock::new();
    *THREADS.get_or_init(|| {
        std::env::var("AM_CPU_THREADS")
            .ok()
            .and_then(|v| v.trim().parse::<usize>().ok())
            .filter(|&n| n > 0)
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
    })
}

/// A launch of a kernel without barriers, shared by the threads that run it: its own copy
/// of the argument bytes (the pointers in them stay valid until the launching thread has
/// seen every workgroup done) and, per thread, its block of contiguous workgroups: the next
/// run to take from it and its end.
struct Job {
    func: GroupsFn,
    args: Vec<u8>,
    groups: [u32; 2],
    total: u64,
    step: u64,
    lds_words: usize,
    /// Pool threads that may join the launching one.
    helpers: usize,
    joined: AtomicUsize,
    blocks: Vec<(AtomicU64, u64)>,
    /// Workgroups run so far.
    done: Mutex<u64>,
    finished: Condvar,
}

impl Job {
    /// Takes runs of workgroups until none is left: from the block of thread `me` (0 for the
    /// launching thread) first, then from the others'.
    fn work(&self, me: usize) {
        let mut lds = vec![0u128; self.lds_words];
        let mut ctx = Ctx {
            local_id: [0; 3],
            group_id: [0; 3],
            lds: lds.as_mut_ptr() as *mut u8,
            barrier_fn: no_barrier,
            barrier_data: ptr::null(),
        };
        let mut ran = 0;
        let n = self.blocks.len();
        for (next, block_end) in (0..n).map(|k| &self.blocks[(me + k) % n]) {
            loop {
                let first = next.fetch_add(self.step, Ordering::Relaxed);
                if first >= *block_end {
                    break;
                }
                let end = (first + self.step).min(*block_end);
                // SAFETY: the launching thread's caller guarantees the argument pointers for
                // every workgroup of the grid until the launch returns, which it does only once
                // every workgroup is done (`wait`); a run is taken once, so it is not run after
                // that; ctx and the LDS buffer live across the call, which only reads ctx.
                unsafe {
                    (self.func)(
                        self.args.as_ptr(),
                        &mut ctx,
                        first,
                        end,
                        self.groups[0],
                        self.groups[1],
                    )
                };
                ran += end - first;
            }
        }
        if ran > 0 {
            let mut done = self.done.lock().unwrap_or_else(|e| e.into_inner());
            *done += ran;
            if *done == self.total {
                self.finished.notify_all();
            }
        }
    }

    /// Whether a pool thread may still join, and then its number (counting it in).
    fn join(&self) -> Option<usize> {
        if !self
            .blocks
            .iter()
            .any(|(next, end)| next.load(Ordering::Relaxed) < *end)
        {
            return None;
        }
        self.joined
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |j| {
                (j < self.helpers).then_some(j + 1)
            })
            .ok()
            .map(|j| j + 1)
    }

    /// Blocks until every workgroup is done.
    fn wait(&self) {
        let mut done = self.done.lock().unwrap_or_else(|e| e.into_inner());
        while *done < self.total {
            done = self.finished.wait(done).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// Threads kept for launches (started on first need, as many as the widest launch wants
/// beside its own thread, at most 63), so a launch does not pay for starting threads: they
/// wait for jobs, join those with runs left and fewer helpers than allowed.
struct Pool {
    jobs: Mutex<Vec<Arc<Job>>>,
    posted: Condvar,
    /// Jobs posted so far: what an idle pool thread watches before it sleeps.
    generation: AtomicU64,
    threads: Mutex<usize>,
}

/// How long an idle pool thread watches for the next job before it sleeps (OpenBLAS's
/// threads wait actively too).
const IDLE_WATCH: std::time::Duration = std::time::Duration::from_millis(2);

fn pool() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    POOL.get_or_init(|| Pool {
        jobs: Mutex::new(Vec::new()),
        posted: Condvar::new(),
        generation: AtomicU64::new(0),
        threads: Mutex::new(0),
    })
}

impl Pool {
    /// Offers `job` to the pool's threads, starting more if it allows more helpers than
    /// there are.
    fn post(&'static self, job: &Arc<Job>) -> std::io::Result<()> {
        {
            let mut n = self.threads.lock().unwrap_or_else(|e| e.into_inner());
            while *n < job.helpers.min(63) {
                std::thread::Builder::new()
                    .name("am-cpu".into())
                    .spawn(move || self.serve())?;
                *n += 1;
            }
        }
        self.jobs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(job.clone());
        self.generation.fetch_add(1, Ordering::Release);
        self.posted.notify_all();
        Ok(())
    }

    /// Withdraws a finished job.
    fn remove(&self, job: &Arc<Job>) {
        self.jobs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|j| !Arc::ptr_eq(j, job));
    }

    /// A pool thread: joins posted jobs for ever. With none to join it first watches for
    /// the next one a while ([`IDLE_WATCH`]: a realize launches its kernels back to back,
    /// and waking a sleeping thread takes about as long as a small kernel), then sleeps.
    fn serve(&self) {
        let mut jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
        let mut watched = false;
        loop {
            if let Some((job, me)) = jobs.iter().find_map(|j| Some((j.clone(), j.join()?))) {
                drop(jobs);
                job.work(me);
                drop(job);
                watched = false;
                jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
            } else if !watched {
                let seen = self.generation.load(Ordering::Acquire);
                drop(jobs);
                let start = std::time::Instant::now();
                while self.generation.load(Ordering::Acquire) == seen
                    && start.elapsed() < IDLE_WATCH
                {
                    std::hint::spin_loop();
                }
                watched = true;
                jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
            } else {
                // The list was looked at under this lock, which `post` holds to push: a job
                // posted after the look notifies this wait.
                watched = false;
                jobs = self.posted.wait(jobs).unwrap_or_else(|e| e.into_inner());
            }
        }
    }
}

/// Builds a CPU program image from a kernel and its host object.
pub(crate) fn package(k: &Kernel, obj: &[u8]) -> Vec<u8> {
    let mut v = MAGIC.to_vec();
    for x in k.workgroup {
        v.extend(x.to_le_bytes());
    }
    v.extend(k.local_layout().1.to_le_bytes());
    v.extend(u32::from(k.has_barrier()).to_le_bytes());
    v.extend(k.args_size().to_le_bytes());
    v.extend((k.name.len() as u32).to_le_bytes());
    v.extend(k.name.as_bytes());
    v.extend(obj);
    v
}

/// A kernel loaded for the host.
pub struct CpuProgram {
    jit: LLVMOrcLLJITRef,
    entry: Entry,
    name: String,
    workgroup: [u32; 3],
    lds_bytes: u32,
    args_size: u32,
}

// SAFETY: the JIT is only touched by `load` (before the value exists) and `drop` (with
// exclusive access); launches only call the compiled function, which has no state of its own.
unsafe impl Send for CpuProgram {}
// SAFETY: as above: shared use only calls the function, whose code is immutable.
unsafe impl Sync for CpuProgram {}

impl Drop for CpuProgram {
    fn drop(&mut self) {
        // SAFETY: `jit` was created by LLVMOrcCreateLLJIT and is disposed once, here; the
        // returned error (if any) is consumed.
        unsafe {
            let e = LLVMOrcDisposeLLJIT(self.jit);
            if !e.is_null() {
                tracing::warn!("disposing the JIT of {}: {}", self.name, take_error(e));
            }
        }
    }
}

fn u32_at(b: &[u8], o: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(o..o + 4)?.try_into().ok()?))
}

impl CpuProgram {
    /// Loads a CPU program image (what [`crate::Compiler::compile`] returns for
    /// [`Target::Cpu`]).
    pub fn load(image: &[u8]) -> Result<CpuProgram, Error> {
        let bad = |reason: String| Error::CodeObject {
            kernel: "(cpu program)".into(),
            reason,
        };
        if image.get(..8) != Some(&MAGIC[..]) {
            return Err(bad("not a CPU program image".into()));
        }
        let h = |o| u32_at(image, o).ok_or_else(|| bad("truncated header".into()));
        let workgroup = [h(8)?, h(12)?, h(16)?];
        let (lds_bytes, has_barrier, args_size, name_len) = (h(20)?, h(24)? != 0, h(28)?, h(32)?);
        let name_end = 36 + name_len as usize;
        let name = image
            .get(36..name_end)
            .and_then(|n| std::str::from_utf8(n).ok())
            .ok_or_else(|| bad("bad kernel name".into()))?
            .to_string();
        let obj = &image[name_end.min(image.len())..];
        let err = |message: String| Error::Llvm {
            kernel: name.clone(),
            target: Target::Cpu,
            message,
        };
        let cname = CString::new(crate::lower::host_symbol(&name))
            .map_err(|_| bad("NUL in name".into()))?;
        crate::codegen::init();
        // SAFETY: the JIT, generator and buffer are created and handed to each other as the
        // ORC C API documents (AddGenerator and AddObjectFile take ownership); every error is
        // consumed; on failure the JIT is disposed before returning. The address looked up is
        // the entry of the function `lower` emitted as `void (ptr, ptr)` for kernels with
        // barriers (`ItemFn`) and `void (ptr, ptr, i64, i64, i32, i32)` for the others
        // (`GroupsFn`), which the header's flag says; its code lives as long as the JIT,
        // which the returned `CpuProgram` owns.
        unsafe {
            let mut jit: LLVMOrcLLJITRef = ptr::null_mut();
            let e = LLVMOrcCreateLLJIT(&mut jit, ptr::null_mut());
            if !e.is_null() {
                return Err(err(take_error(e)));
            }
            let fail = |jit: LLVMOrcLLJITRef, msg: String| {
                let e = LLVMOrcDisposeLLJIT(jit);
                if !e.is_null() {
                    take_error(e);
                }
                Err(err(msg))
            };
            let jd = LLVMOrcLLJITGetMainJITDylib(jit);
            let mut generator: LLVMOrcDefinitionGeneratorRef = ptr::null_mut();
            let e = LLVMOrcCreateDynamicLibrarySearchGeneratorForProcess(
                &mut generator,
                LLVMOrcLLJITGetGlobalPrefix(jit),
                None,
                ptr::null_mut(),
            );
            if !e.is_null() {
                return fail(jit, take_error(e));
            }
            LLVMOrcJITDylibAddGenerator(jd, generator);
            let buf = LLVMCreateMemoryBufferWithMemoryRangeCopy(
                obj.as_ptr() as *const _,
                obj.len(),
                cname.as_ptr(),
            );
            let e = LLVMOrcLLJITAddObjectFile(jit, jd, buf);
            if !e.is_null() {
                return fail(jit, take_error(e));
            }
            let mut addr: LLVMOrcExecutorAddress = 0;
            let e = LLVMOrcLLJITLookup(jit, &mut addr, cname.as_ptr());
            if !e.is_null() {
                return fail(jit, take_error(e));
            }
            if addr == 0 {
                return fail(jit, format!("symbol {name} has address 0"));
            }
            let entry = if has_barrier {
                Entry::Item(std::mem::transmute::<usize, ItemFn>(addr as usize))
            } else {
                Entry::Groups(std::mem::transmute::<usize, GroupsFn>(addr as usize))
            };
            Ok(CpuProgram {
                jit,
                entry,
                name,
                workgroup,
                lds_bytes,
                args_size,
            })
        }
    }

    /// Kernel name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Work-items per workgroup the kernel was compiled for.
    pub fn workgroup(&self) -> [u32; 3] {
        self.workgroup
    }

    /// Bytes of kernel arguments the kernel reads.
    pub fn args_size(&self) -> u32 {
        self.args_size
    }

    /// Runs the kernel over `groups` workgroups with argument bytes `args` (layout of
    /// [`Kernel::arg_layout`]).
    ///
    /// # Safety
    /// Every pointer in `args` must be valid for all the reads and writes the kernel makes
    /// through it for this grid (as for a GPU dispatch, nothing checks the indices), and no
    /// other thread may access that memory during the launch except through atomics.
    pub unsafe fn launch(&self, groups: [u32; 3], args: &[u8]) -> Result<(), Error> {
        // SAFETY: the caller's guarantees, passed on.
        unsafe { self.launch_on(groups, args, host_threads()) }
    }

    /// [`CpuProgram::launch`] on at most `threads` threads (at least one). The results do
    /// not depend on the number (tests compare them).
    ///
    /// # Safety
    /// As for [`CpuProgram::launch`].
    pub unsafe fn launch_on(
        &self,
        groups: [u32; 3],
        args: &[u8],
        threads: usize,
    ) -> Result<(), Error> {
        let fail = |reason: String| Error::Launch {
            kernel: self.name.clone(),
            reason,
        };
        if args.len() < self.args_size as usize {
            return Err(fail(format!(
                "{} argument bytes given, the kernel reads {}",
                args.len(),
                self.args_size
            )));
        }
        let total = groups.iter().map(|&g| u64::from(g)).product::<u64>();
        if total == 0 {
            return Ok(());
        }
        let group_at = |g: u64| {
            let x = (g % u64::from(groups[0])) as u32;
            let y = ((g / u64::from(groups[0])) % u64::from(groups[1])) as u32;
            let z = (g / (u64::from(groups[0]) * u64::from(groups[1]))) as u32;
            [x, y, z]
        };
        let lds_words = (self.lds_bytes as usize).div_ceil(16).max(1);
        let func = match self.entry {
            Entry::Groups(f) => f,
            Entry::Item(f) => {
                // SAFETY: the caller's guarantees, and the entry is this program's.
                return unsafe { self.launch_with_barriers(f, total, group_at, args) };
            }
        };
        let threads = (threads.clamp(1, 64) as u64).min(total);
        // A block of contiguous workgroups per thread (neighbouring workgroups share the
        // rows or columns they read), cut into runs of about an eighth of it taken in turn:
        // a thread that is done takes the runs left in the others' blocks, so one the host
        // preempts leaves its share to the others. A workgroup computes the same whichever
        // thread runs it.
        let block = total.div_ceil(threads);
        let step = block.div_ceil(8).max(1);
        let blocks = (0..threads)
            .map(|t| (AtomicU64::new(t * block), ((t + 1) * block).min(total)))
            .collect();
        let job = Arc::new(Job {
            func,
            args: args.to_vec(),
            groups: [groups[0], groups[1]],
            total,
            step,
            lds_words,
            helpers: threads as usize - 1,
            joined: AtomicUsize::new(0),
            blocks,
            done: Mutex::new(0),
            finished: Condvar::new(),
        });
        if threads > 1 {
            pool()
                .post(&job)
                .map_err(|e| fail(format!("cannot start a thread: {e}")))?;
        }
        job.work(0);
        job.wait();
        if threads > 1 {
            pool().remove(&job);
        }
        Ok(())
    }

    /// Each work-item of a workgroup on its own thread, one workgroup after another.
    ///
    /// # Safety
    /// As for [`CpuProgram::launch`]; `func` is this program's entry.
    unsafe fn launch_with_barriers(
        &self,
        func: ItemFn,
        total: u64,
        group_at: impl Fn(u64) -> [u32; 3],
        args: &[u8],
    ) -> Result<(), Error> {
        let fail = |reason: String| Error::Launch {
            kernel: self.name.clone(),
            reason,
        };
        let lds_words = (self.lds_bytes as usize).div_ceil(16).max(1);
        let [wx, wy, wz] = self.workgroup;
        let n = (wx * wy * wz) as usize;
        for g in 0..total {
            let group_id = group_at(g);
            let mut lds = vec![0u128; lds_words];
            let lds_addr = lds.as_mut_ptr() as usize;
            let barrier = Barrier::new(n);
            std::thread::scope(|s| {
                let mut handles = vec![];
                for i in 0..n as u32 {
                    let local_id = [i % wx, (i / wx) % wy, i / (wx * wy)];
                    let barrier = &barrier;
                    let h = std::thread::Builder::new()
                        .stack_size(256 << 10)
                        .spawn_scoped(s, move || {
                            let mut ctx = Ctx {
                                local_id,
                                group_id,
                                lds: lds_addr as *mut u8,
                                barrier_fn: barrier_wait,
                                barrier_data: barrier as *const Barrier as *const c_void,
                            };
                            // SAFETY: the caller guarantees the argument pointers; the LDS
                            // buffer and the barrier outlive this scope.
                            unsafe { func(args.as_ptr(), &mut ctx) };
                        })
                        .map_err(|e| fail(format!("cannot start a work-item thread: {e}")))?;
                    handles.push(h);
                }
                for h in handles {
                    h.join()
                        .map_err(|_| fail("a work-item thread panicked".into()))?;
                }
                Ok::<(), Error>(())
            })?;
            drop(lds);
        }
        Ok(())
    }
}
