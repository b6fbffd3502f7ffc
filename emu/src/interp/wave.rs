//! Waves, workgroups and the dispatcher: the ISA-independent part of the interpreter.

use crate::code_object::kcp;
use crate::interp::memory::SharedAccess;
use crate::stats::Histogram;
use crate::{Error, Isa, Kernel, Memory, Program, SharedMemory, Stats};

/// VGPR rows per wave: 256 architectural VGPRs, 256 AccVGPRs (CDNA; operand code 512 + n
/// reaches row 256 + n), one row to stage permuted DPP sources, three pairs of rows where
/// scalar and constant sources are broadcast (so the lane loops of vector instructions read
/// every source the same way), and three rows for SDWA's selected sources and result.
pub(crate) const VGPR_ROWS: usize = 522;
/// Most scratch (private segment) a work-item may have: what TMPRING_SIZE.WAVESIZE can
/// describe for a wave of 64, about 8 MiB a wave.
pub const MAX_SCRATCH_PER_LANE: u32 = 128 << 10;
/// First AccVGPR row.
pub(crate) const AGPR_ROW: usize = 256;
/// Row used to stage permuted DPP sources.
pub(crate) const DPP_ROW: usize = 512;
/// First of the rows where uniform sources are broadcast (two rows per source).
pub(crate) const CONST_ROW: usize = 513;
/// First of the SDWA staging rows: selected src0, selected src1, result.
pub(crate) const SDWA_ROW: usize = 519;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WaveState {
    Running,
    Barrier,
    Done,
}

/// Float mode bits a wave runs with (from `COMPUTE_PGM_RSRC1`, changed by `s_denorm_mode`,
/// `s_round_mode`, `s_setreg_b32 hwreg(HW_REG_MODE)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Mode {
    /// FLOAT_ROUND_MODE (two bits f32, two bits f16/f64); only round-to-nearest-even is
    /// modelled, other values are kept for `s_getreg` but do not change results.
    pub round: u8,
    /// FLOAT_DENORM_MODE: bits 0-1 f32, bits 2-3 f16/f64; 3 keeps denormals, 0 flushes.
    pub denorm: u8,
    /// IEEE mode (signalling NaN handling of min/max).
    pub ieee: bool,
    /// DX10 clamp: clamp NaN to 0.
    pub dx10_clamp: bool,
}

impl Mode {
    pub(crate) fn flush32(&self) -> bool {
        self.denorm & 3 != 3
    }
    pub(crate) fn flush16_64(&self) -> bool {
        (self.denorm >> 2) & 3 != 3
    }
}

/// One wave: its registers and where it is.
pub(crate) struct Wave {
    /// SGPRs by operand code: s0-s105, vcc 106-107, ttmp 108-123, null 124, m0 125,
    /// exec 126-127. `null` stays 0 because writes to it are dropped.
    pub s: [u32; 128],
    /// VGPRs, `v[row * 64 + lane]`.
    pub v: Vec<u32>,
    pub scc: bool,
    /// Index of the next instruction.
    pub pc: usize,
    /// 32 or 64.
    pub lanes: u32,
    pub state: WaveState,
    pub mode: Mode,
    /// Private (scratch) bytes per lane.
    pub private_size: usize,
    /// `lanes * private_size` bytes, lane-major.
    pub scratch: Vec<u8>,
    /// Hardware registers written with `s_setreg` (by hwreg id), read back by `s_getreg`.
    pub hwreg: [u32; 64],
    /// The program's ISA (a few semantics differ between RDNA3 and CDNA).
    pub isa: Isa,
    /// CDNA `HW_REG_HW_ID`: the wave's index in its workgroup in WAVE_ID (bits 3:0).
    pub hw_id: u32,
    /// CDNA `HW_REG_XCC_ID`.
    pub xcc_id: u32,
    /// The classification of the address rows the LDS forms used last, one slot per address
    /// register number modulo the slot count (`interp/fast.rs`).
    pub lds_rows: [crate::interp::fast::LdsRows; crate::interp::fast::LDS_ROW_SLOTS],
    /// Whether the memory may hold atomics this wave posted ([`crate::Memory::post_atomic32`]),
    /// which its next wait on memory counters has performed.
    pub posted: bool,
}

impl Wave {
    pub(crate) fn new() -> Wave {
        Wave {
            s: [0; 128],
            v: vec![0; VGPR_ROWS * 64],
            scc: false,
            pc: 0,
            lanes: 32,
            state: WaveState::Done,
            mode: Mode {
                round: 0,
                denorm: 0xf,
                ieee: true,
                dx10_clamp: true,
            },
            private_size: 0,
            scratch: Vec::new(),
            hwreg: [0; 64],
            isa: Isa::Gfx1100,
            hw_id: 0,
            xcc_id: 0,
            lds_rows: [crate::interp::fast::LdsRows::EMPTY; crate::interp::fast::LDS_ROW_SLOTS],
            posted: false,
        }
    }

    /// EXEC as a 64-bit mask (upper half 0 in wave32).
    #[inline]
    pub(crate) fn exec(&self) -> u64 {
        if self.lanes == 32 {
            self.s[126] as u64
        } else {
            self.s[126] as u64 | (self.s[127] as u64) << 32
        }
    }

    #[inline]
    pub(crate) fn set_exec(&mut self, m: u64) {
        self.s[126] = m as u32;
        if self.lanes == 64 {
            self.s[127] = (m >> 32) as u32;
        }
    }

    /// A lane mask read from an SGPR (pair in wave64).
    #[inline]
    pub(crate) fn mask(&self, code: u16) -> u64 {
        let c = code as usize;
        if c >= 128 {
            return 0;
        }
        if self.lanes == 32 {
            self.s[c] as u64
        } else {
            self.s[c] as u64 | (self.s.get(c + 1).copied().unwrap_or(0) as u64) << 32
        }
    }

    #[inline]
    pub(crate) fn set_mask(&mut self, code: u16, m: u64) {
        self.sset(code, m as u32);
        if self.lanes == 64 {
            self.sset(code + 1, (m >> 32) as u32);
        }
    }

    /// Writes an SGPR by operand code; writes to `null` and to non-registers are dropped.
    #[inline]
    pub(crate) fn sset(&mut self, code: u16, v: u32) {
        if (code as usize) < 128 && code != crate::interp::inst::NULL {
            self.s[code as usize] = v;
        }
    }

    #[inline]
    pub(crate) fn sset64(&mut self, code: u16, v: u64) {
        self.sset(code, v as u32);
        self.sset(code + 1, (v >> 32) as u32);
    }
}

/// Everything a dispatch needs besides the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Launch {
    /// Grid size in work-items (as in an AQL packet), per dimension.
    pub grid: [u32; 3],
    /// Workgroup size in work-items, per dimension.
    pub workgroup: [u32; 3],
    /// GPU virtual address of the kernel arguments.
    pub kernarg: u64,
    /// Address given to kernels that enable the dispatch pointer (the AQL packet).
    pub dispatch_ptr: u64,
    /// Address given to kernels that enable the queue pointer.
    pub queue_ptr: u64,
    /// Value given to kernels that enable the dispatch id.
    pub dispatch_id: u64,
    /// LDS bytes added to the kernel's `group_segment_fixed_size` (dynamic LDS).
    pub dynamic_lds: u32,
    /// Scratch bytes per work-item added to `private_segment_fixed_size` (dynamic stack).
    pub dynamic_scratch: u32,
    /// GPU virtual address where `.text` was uploaded (for `s_getpc_b64`); `None` means the
    /// address the code object was linked at.
    pub code_address: Option<u64>,
    /// Stop with [`Error::Stopped`] after this many wave-instructions (a watchdog for hung
    /// shaders); `None` runs until every wave ends.
    pub instruction_limit: Option<u64>,
}

impl Launch {
    /// The 64-byte AQL kernel dispatch packet (`hsa_kernel_dispatch_packet_t`) describing this
    /// launch of `kernel`, for kernels that read it through the dispatch pointer: header
    /// (kernel dispatch type), dimensions, workgroup and grid sizes, segment sizes, kernel
    /// object (the descriptor's address), kernarg address. Store it in memory and set
    /// [`Launch::dispatch_ptr`] to its address.
    pub fn aql_dispatch_packet(&self, kernel: &Kernel) -> [u8; 64] {
        let mut p = [0u8; 64];
        // HSA_PACKET_TYPE_KERNEL_DISPATCH = 2, with system-scope acquire and release fences.
        let header: u16 = 2 | (2 << 9) | (2 << 11);
        let dims = if self.grid[2] > 1 || self.workgroup[2] > 1 {
            3
        } else if self.grid[1] > 1 || self.workgroup[1] > 1 {
            2
        } else {
            1
        };
        p[0..2].copy_from_slice(&header.to_le_bytes());
        p[2..4].copy_from_slice(&(dims as u16).to_le_bytes());
        for d in 0..3 {
            let wg = u16::try_from(self.workgroup[d]).unwrap_or(u16::MAX);
            p[4 + 2 * d..6 + 2 * d].copy_from_slice(&wg.to_le_bytes());
            p[12 + 4 * d..16 + 4 * d].copy_from_slice(&self.grid[d].to_le_bytes());
        }
        let kd = &kernel.descriptor;
        let private = kd
            .private_segment_fixed_size
            .saturating_add(self.dynamic_scratch);
        let group = kd.group_segment_fixed_size.saturating_add(self.dynamic_lds);
        p[24..28].copy_from_slice(&private.to_le_bytes());
        p[28..32].copy_from_slice(&group.to_le_bytes());
        p[32..40].copy_from_slice(&kernel.descriptor_address.to_le_bytes());
        p[40..48].copy_from_slice(&self.kernarg.to_le_bytes());
        p
    }

    /// A launch of `grid` work-items in workgroups of `workgroup`, arguments at `kernarg`.
    pub fn new(grid: [u32; 3], workgroup: [u32; 3], kernarg: u64) -> Launch {
        Launch {
            grid,
            workgroup,
            kernarg,
            dispatch_ptr: 0,
            queue_ptr: 0,
            dispatch_id: 0,
            dynamic_lds: 0,
            dynamic_scratch: 0,
            code_address: None,
            instruction_limit: None,
        }
    }
}

/// Shared state of the waves of one workgroup while they run.
pub(crate) struct Ctx<'a> {
    pub mem: &'a mut dyn Memory,
    pub lds: &'a mut [u8],
    pub code_base: u64,
    pub prog: &'a Program,
    pub instructions: u64,
    /// Wave-instructions this workgroup may still execute.
    pub budget: u64,
    /// Staging for whole-wave memory accesses (64 lanes x 16 bytes).
    pub buf: &'a mut [u8],
    /// Executed wave-instructions by instruction index, for a counted dispatch; empty
    /// otherwise (the run loop then counts nothing).
    pub counts: &'a mut [u64],
}

/// A dispatch as the command processor sees it: the register state the driver programmed
/// (`COMPUTE_PGM_LO/HI`, `COMPUTE_PGM_RSRC1/2/3`, `COMPUTE_USER_DATA_*`, the dispatch
/// initiator's wave32 bit) plus the grid. The mock's PM4 `DISPATCH_DIRECT` path fills this
/// from its registers, its AQL path from a kernel dispatch packet; [`dispatch`] fills it from
/// an ELF kernel descriptor.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HwDispatch {
    /// Name used in errors (kernel symbol, or a description of the dispatch).
    pub name: String,
    /// GPU virtual address of the first instruction.
    pub entry: u64,
    /// `COMPUTE_PGM_RSRC1` (float mode).
    pub rsrc1: u32,
    /// `COMPUTE_PGM_RSRC2` (user SGPR count, workgroup id / info / scratch offset enables).
    pub rsrc2: u32,
    /// `COMPUTE_PGM_RSRC3`.
    pub rsrc3: u32,
    /// Values of the user SGPRs s0.. (`COMPUTE_USER_DATA_*`), at most 16 on gfx11.
    pub user_sgprs: Vec<u32>,
    /// Lanes per wave: 32 or 64 (CDNA: always 64).
    pub wave_size: u32,
    /// Grid size in work-items.
    pub grid: [u32; 3],
    /// Workgroup size in work-items.
    pub workgroup: [u32; 3],
    /// LDS bytes per workgroup (at most 64 KiB; 160 KiB on gfx950).
    pub lds_bytes: u32,
    /// Scratch bytes per work-item.
    pub scratch_bytes: u32,
    /// Watchdog, as [`Launch::instruction_limit`].
    pub instruction_limit: Option<u64>,
    /// The share of the grid this dispatch runs, for a grid spread over several XCCs.
    pub partition: Partition,
    /// What `s_getreg_b32 hwreg(HW_REG_XCC_ID)` returns on CDNA: the physical id of the XCC
    /// running this share of the grid. `None` reads [`Partition::index`] (the logical id), which
    /// is the same when the XCCs of a partition are numbered from 0.
    pub xcc_id: Option<u32>,
}

/// Which workgroups of a grid one XCC runs. Multi-XCC parts deal the workgroups of a
/// dispatch out in chunks of `chunk` (`COMPUTE_TG_CHUNK_SIZE`) round-robin over the `count`
/// XCCs of the partition: workgroup `n` (linear, x fastest) runs on XCC
/// `(n / chunk) % count`. The default (`count` 1) is the whole grid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Partition {
    /// This XCC's logical index in the partition (`COMPUTE_CURRENT_LOGIC_XCC_ID`).
    pub index: u32,
    /// XCCs in the partition.
    pub count: u32,
    /// Workgroups per chunk (at least 1).
    pub chunk: u32,
}

impl Default for Partition {
    fn default() -> Self {
        Partition {
            index: 0,
            count: 1,
            chunk: 1,
        }
    }
}

impl Partition {
    /// Whether linear workgroup `n` belongs to this XCC.
    pub fn runs(&self, n: u64) -> bool {
        if self.count <= 1 {
            // The whole grid (no division per workgroup).
            return true;
        }
        let count = u64::from(self.count);
        (n / u64::from(self.chunk.max(1))) % count == u64::from(self.index) % count
    }
}

/// Runs `kernel` of `program` over the whole grid, workgroup after workgroup, and returns
/// when every wave has executed `s_endpgm`. User SGPRs are laid out from the descriptor's
/// `kernel_code_properties` as the runtime would program `COMPUTE_USER_DATA_*`.
pub fn dispatch(
    program: &Program,
    kernel: &Kernel,
    launch: &Launch,
    mem: &mut dyn Memory,
) -> Result<Stats, Error> {
    let (hw, code_base) = hw_of(program, kernel, launch)?;
    dispatch_hw(program, code_base, &hw, mem)
}

/// [`dispatch`] with the workgroups spread over `threads` threads (see
/// [`dispatch_hw_parallel`]).
pub fn dispatch_parallel(
    program: &Program,
    kernel: &Kernel,
    launch: &Launch,
    mem: &dyn SharedMemory,
    threads: usize,
) -> Result<Stats, Error> {
    let (hw, code_base) = hw_of(program, kernel, launch)?;
    dispatch_hw_parallel(program, code_base, &hw, mem, threads)
}

/// The register-level dispatch of a kernel described by its code object descriptor.
fn hw_of(program: &Program, kernel: &Kernel, launch: &Launch) -> Result<(HwDispatch, u64), Error> {
    let kd = &kernel.descriptor;
    let code_base = launch.code_address.unwrap_or(program.text_address);
    let entry = kernel
        .entry
        .checked_sub(program.text_address)
        .map(|off| code_base + off)
        .ok_or(Error::BadPc { pc: kernel.entry })?;
    let private_size = kd
        .private_segment_fixed_size
        .saturating_add(launch.dynamic_scratch);
    let props = kd.kernel_code_properties;
    let mut sgprs: Vec<u32> = Vec::with_capacity(16);
    let push64 = |v: &mut Vec<u32>, x: u64| {
        v.push(x as u32);
        v.push((x >> 32) as u32);
    };
    if props & kcp::ENABLE_SGPR_PRIVATE_SEGMENT_BUFFER != 0 {
        // Scratch is private to the emulator; the buffer descriptor is not used by our
        // scratch_* implementation, so it is left zero.
        sgprs.extend([0, 0, 0, 0]);
    }
    if props & kcp::ENABLE_SGPR_DISPATCH_PTR != 0 {
        push64(&mut sgprs, launch.dispatch_ptr);
    }
    if props & kcp::ENABLE_SGPR_QUEUE_PTR != 0 {
        push64(&mut sgprs, launch.queue_ptr);
    }
    if props & kcp::ENABLE_SGPR_KERNARG_SEGMENT_PTR != 0 {
        push64(&mut sgprs, launch.kernarg);
    }
    if props & kcp::ENABLE_SGPR_DISPATCH_ID != 0 {
        push64(&mut sgprs, launch.dispatch_id);
    }
    if props & kcp::ENABLE_SGPR_FLAT_SCRATCH_INIT != 0 {
        push64(&mut sgprs, 0);
    }
    if props & kcp::ENABLE_SGPR_PRIVATE_SEGMENT_SIZE != 0 {
        sgprs.push(private_size);
    }
    let hw = HwDispatch {
        name: kernel.name.clone(),
        entry,
        rsrc1: kd.compute_pgm_rsrc1,
        rsrc2: kd.compute_pgm_rsrc2,
        rsrc3: kd.compute_pgm_rsrc3,
        user_sgprs: sgprs,
        wave_size: kd.wave_size(),
        grid: launch.grid,
        workgroup: launch.workgroup,
        lds_bytes: kd
            .group_segment_fixed_size
            .saturating_add(launch.dynamic_lds),
        scratch_bytes: private_size,
        instruction_limit: launch.instruction_limit,
        partition: Partition::default(),
        xcc_id: None,
    };
    Ok((hw, code_base))
}

/// What a dispatch needs once it is validated.
struct Plan {
    entry_idx: usize,
    /// Workgroups per dimension.
    groups: [u32; 3],
    mode: Mode,
    /// Waves of a full workgroup.
    waves: usize,
    /// VGPR and AccVGPR rows zeroed in each wave slot at the start of the dispatch.
    rows: (usize, usize),
}

fn plan(program: &Program, code_base: u64, hw: &HwDispatch) -> Result<Plan, Error> {
    let bad = |reason: String| Error::BadLaunch {
        kernel: hw.name.clone(),
        reason,
    };
    if hw.workgroup.contains(&0) || hw.grid.contains(&0) {
        return Err(bad(format!(
            "empty grid {:?} or workgroup {:?}",
            hw.grid, hw.workgroup
        )));
    }
    if hw.wave_size != 32 && hw.wave_size != 64 {
        return Err(bad(format!(
            "wave size {} is neither 32 nor 64",
            hw.wave_size
        )));
    }
    if program.isa.is_cdna() && hw.wave_size != 64 {
        return Err(bad(format!(
            "{} runs wave64 only, not wave{}",
            program.isa.name(),
            hw.wave_size
        )));
    }
    let wg_items: u64 = hw.workgroup.iter().map(|&x| x as u64).product();
    if wg_items > 1024 {
        return Err(bad(format!(
            "workgroup of {wg_items} work-items exceeds 1024"
        )));
    }
    let max_lds = program.isa.max_lds();
    if hw.lds_bytes > max_lds {
        return Err(bad(format!(
            "{} bytes of LDS exceed {max_lds} ({})",
            hw.lds_bytes,
            program.isa.name()
        )));
    }
    // The register and the descriptor field that size scratch are the driver's: hardware
    // caps a wave's scratch through TMPRING_SIZE.WAVESIZE (8 MiB a wave, 128 KiB a lane).
    if hw.scratch_bytes > MAX_SCRATCH_PER_LANE {
        return Err(bad(format!(
            "{} bytes of scratch per work-item exceed {MAX_SCRATCH_PER_LANE}",
            hw.scratch_bytes
        )));
    }
    let user_count = ((hw.rsrc2 >> 1) & 0x1f) as usize;
    if hw.user_sgprs.len() > user_count {
        return Err(bad(format!(
            "{} user SGPR values but COMPUTE_PGM_RSRC2.USER_SGPR is {user_count}",
            hw.user_sgprs.len()
        )));
    }
    let entry_idx = program
        .index_of(code_base, hw.entry)
        .ok_or(Error::BadPc { pc: hw.entry })?;
    let rsrc1 = hw.rsrc1;
    Ok(Plan {
        entry_idx,
        groups: std::array::from_fn(|d| hw.grid[d].div_ceil(hw.workgroup[d])),
        mode: Mode {
            round: ((rsrc1 >> 12) & 0xf) as u8,
            denorm: ((rsrc1 >> 16) & 0xf) as u8,
            // gfx12 has neither bit (RSRC1 bits 21 and 23 mean other things there): its
            // min/max are IEEE 754-2019 maximumNumber/minimumNumber, gfx11's non-IEEE ones.
            ieee: rsrc1 & (1 << 23) != 0 && !program.isa.is_gfx12(),
            dx10_clamp: rsrc1 & (1 << 21) != 0 && !program.isa.is_gfx12(),
        },
        waves: (wg_items as u32).div_ceil(hw.wave_size) as usize,
        rows: register_rows(program, hw),
    })
}

/// The VGPR and AccVGPR rows a dispatch zeroes in each of its wave slots before the first
/// wave: those the program names, no more than the kernel allocates (`COMPUTE_PGM_RSRC1.VGPRS`,
/// in granules of 8 registers, or 4 for gfx11 and gfx12 wave64; on CDNA the count covers VGPRs
/// and AccVGPRs together). Later waves in a slot, and registers past the allocation, keep what
/// the previous wave left there, which only a program reading registers it never wrote (their
/// values are undefined on hardware) could notice.
fn register_rows(program: &Program, hw: &HwDispatch) -> (usize, usize) {
    let granule = if !program.isa.is_cdna() && hw.wave_size == 64 {
        4
    } else {
        8
    };
    let allocated = ((hw.rsrc1 & 0x3f) as usize + 1) * granule;
    (
        program.vgpr_rows.min(allocated),
        program.agpr_rows.min(allocated),
    )
}

/// The workgroups this dispatch runs (its partition's share), as linear indices in order.
fn my_groups(plan: &Plan, hw: &HwDispatch) -> impl Iterator<Item = u64> {
    let total: u64 = plan.groups.iter().map(|&g| u64::from(g)).product();
    let part = hw.partition;
    (0..total).filter(move |&n| part.runs(n))
}

/// A workgroup's waves and LDS, reused from one workgroup to the next.
struct Core {
    waves: Vec<Wave>,
    lds: Vec<u8>,
    buf: Vec<u8>,
    /// Executed wave-instructions by instruction index (a counted dispatch), else empty.
    counts: Vec<u64>,
}

/// Waves kept from one dispatch to the next, so a dispatch reuses their register files
/// (133 KB each) instead of allocating and page-faulting fresh ones. One pool for the process,
/// not one per thread: a parallel dispatch's threads live only as long as the dispatch, and
/// with a pool per thread each of them started with fresh waves.
static SPARE_WAVES: std::sync::Mutex<Vec<Wave>> = std::sync::Mutex::new(Vec::new());

/// Most waves the pool keeps (8.5 MB: a workgroup of 1024 work-items in wave32 on two
/// threads, or one of 256 in wave64 on sixteen).
const MAX_SPARE_WAVES: usize = 64;

fn spare_waves() -> std::sync::MutexGuard<'static, Vec<Wave>> {
    // A thread that panicked while holding the pool left whole waves in it (`Vec` pushes and
    // splits do not leave half-made elements), so the pool stays usable.
    am_isa::sync::lock(&SPARE_WAVES)
}

impl Core {
    fn new(plan: &Plan, hw: &HwDispatch, counted: Option<&Program>) -> Core {
        let mut waves = {
            let mut p = spare_waves();
            let keep = p.len().saturating_sub(plan.waves);
            p.split_off(keep)
        };
        waves.resize_with(plan.waves, Wave::new);
        // The rows the kernel can reach start at zero once per dispatch (a wave from the pool
        // holds what an earlier dispatch left); see `init_wave` for the waves after the first.
        for w in &mut waves {
            w.v[..plan.rows.0 * 64].fill(0);
            w.v[AGPR_ROW * 64..(AGPR_ROW + plan.rows.1) * 64].fill(0);
        }
        Core {
            waves,
            lds: vec![0u8; hw.lds_bytes as usize],
            buf: vec![0u8; 64 * 16],
            counts: counted.map_or_else(Vec::new, |p| vec![0; p.insts.len()]),
        }
    }

    /// Runs linear workgroup `n`; returns the wave-instructions and waves it ran.
    #[allow(clippy::too_many_arguments)]
    fn run_group(
        &mut self,
        program: &Program,
        code_base: u64,
        hw: &HwDispatch,
        plan: &Plan,
        n: u64,
        budget: u64,
        mem: &mut dyn Memory,
    ) -> Result<(u64, u64), Error> {
        let g = plan.groups;
        // A one-dimensional grid (the common case) needs no divisions.
        let gid = if g[1] == 1 && g[2] == 1 {
            [n as u32, 0, 0]
        } else {
            [
                (n % u64::from(g[0])) as u32,
                (n / u64::from(g[0]) % u64::from(g[1])) as u32,
                (n / (u64::from(g[0]) * u64::from(g[1]))) as u32,
            ]
        };
        // Work-items of this (possibly partial) workgroup.
        let size: [u32; 3] =
            std::array::from_fn(|d| (hw.grid[d] - gid[d] * hw.workgroup[d]).min(hw.workgroup[d]));
        let items = size[0] * size[1] * size[2];
        let n_waves = items.div_ceil(hw.wave_size) as usize;
        self.lds.fill(0);
        for (w_idx, w) in self.waves.iter_mut().enumerate().take(n_waves) {
            init_wave(w, w_idx as u32, size, gid, hw, plan, program);
            w.pc = plan.entry_idx;
        }
        let mut ctx = Ctx {
            mem,
            lds: &mut self.lds,
            code_base,
            prog: program,
            instructions: 0,
            budget,
            buf: &mut self.buf,
            counts: &mut self.counts,
        };
        run_workgroup(&mut self.waves[..n_waves], &mut ctx)?;
        Ok((ctx.instructions, n_waves as u64))
    }
}

impl Drop for Core {
    fn drop(&mut self) {
        let waves = std::mem::take(&mut self.waves);
        let mut p = spare_waves();
        let room = MAX_SPARE_WAVES.saturating_sub(p.len());
        p.extend(waves.into_iter().take(room));
    }
}

/// Runs a dispatch given as register state. `code_base` is the GPU virtual address where the
/// program's first byte lives (see [`Program::from_bytes`]).
pub fn dispatch_hw(
    program: &Program,
    code_base: u64,
    hw: &HwDispatch,
    mem: &mut dyn Memory,
) -> Result<Stats, Error> {
    dispatch_hw_in(program, code_base, hw, mem, None)
}

/// [`dispatch_hw`] that also adds the wave-instructions it executed, by class and mnemonic,
/// to `histogram`: those of the workgroups that ran, a failed dispatch's too. Only a
/// dispatch that asks pays for counting (see [`crate::stats`]).
pub fn dispatch_hw_counted(
    program: &Program,
    code_base: u64,
    hw: &HwDispatch,
    mem: &mut dyn Memory,
    histogram: &mut Histogram,
) -> Result<Stats, Error> {
    dispatch_hw_in(program, code_base, hw, mem, Some(histogram))
}

/// [`dispatch`] that counts as [`dispatch_hw_counted`] does.
pub fn dispatch_counted(
    program: &Program,
    kernel: &Kernel,
    launch: &Launch,
    mem: &mut dyn Memory,
    histogram: &mut Histogram,
) -> Result<Stats, Error> {
    let (hw, code_base) = hw_of(program, kernel, launch)?;
    dispatch_hw_in(program, code_base, &hw, mem, Some(histogram))
}

fn dispatch_hw_in(
    program: &Program,
    code_base: u64,
    hw: &HwDispatch,
    mem: &mut dyn Memory,
    histogram: Option<&mut Histogram>,
) -> Result<Stats, Error> {
    let plan = plan(program, code_base, hw)?;
    let mut core = Core::new(&plan, hw, histogram.is_some().then_some(program));
    let r = run_groups(&mut core, program, code_base, hw, &plan, mem);
    if let Some(h) = histogram {
        h.fold(program, &core.counts);
    }
    r
}

fn run_groups(
    core: &mut Core,
    program: &Program,
    code_base: u64,
    hw: &HwDispatch,
    plan: &Plan,
    mem: &mut dyn Memory,
) -> Result<Stats, Error> {
    let mut stats = Stats::default();
    for n in my_groups(plan, hw) {
        let budget = hw
            .instruction_limit
            .map_or(u64::MAX, |l| l.saturating_sub(stats.instructions));
        let (instructions, waves) =
            core.run_group(program, code_base, hw, plan, n, budget, &mut *mem)?;
        stats.instructions += instructions;
        stats.waves += waves;
        stats.workgroups += 1;
    }
    Ok(stats)
}

/// [`dispatch_hw`] with the workgroups spread over `threads` threads (at least 1), each
/// claiming the next workgroups not yet started (a few at a time). Memory is a
/// [`SharedMemory`] the threads use at once. The calling thread is one of them; the others
/// are threads of a pool kept for the process (one pool for each thread count asked for).
/// A panic on any of them reaches the caller once all have ended.
///
/// Contract: every workgroup runs exactly as [`dispatch_hw`] runs it, so results are the same
/// whenever workgroups do not race on memory (no workgroup reads what another writes, except
/// through atomics, whose returned old values then come in another order, as on hardware).
/// A thread may hold its waves' atomics without return and perform them later
/// ([`crate::Memory::post_atomic32`]): by the posting wave's next wait on memory counters,
/// before the thread touches their bytes again, within a bounded number of reads, and before
/// this function returns. `Stats` are the same. On an error the dispatch stops taking
/// workgroups and returns the error of the lowest-numbered workgroup that failed, the one [`dispatch_hw`] returns: every
/// workgroup numbered below it runs; some above it, already started or claimed on other
/// threads, may run too, so memory may hold their effects. The instruction
/// limit counts the wave-instructions of all threads together, checked when each workgroup
/// starts.
pub fn dispatch_hw_parallel(
    program: &Program,
    code_base: u64,
    hw: &HwDispatch,
    mem: &dyn SharedMemory,
    threads: usize,
) -> Result<Stats, Error> {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
    let plan = plan(program, code_base, hw)?;
    let groups: Vec<u64> = my_groups(&plan, hw).collect();
    let threads = threads.clamp(1, groups.len().max(1));
    // Workgroups are claimed a few at a time: a short workgroup runs in a microsecond or two,
    // about what moving the counter's cache line between cores costs, and at least 16 claims
    // per thread keep the threads' shares even. The counter has a cache line of its own, so
    // the flags the threads only read do not move with it.
    let chunk = (groups.len() / (threads * 16)).clamp(1, 8);
    let next = Aligned(AtomicUsize::new(0));
    // The lowest index (in `groups`) of a workgroup that failed so far, `usize::MAX` for none.
    // Claims go up in order, so every workgroup below a failed one has been claimed; a thread
    // skips only the workgroups of its claim above the lowest failure, and so every workgroup
    // below the first failing one runs, as in the one-thread dispatch.
    let failed = AtomicUsize::new(usize::MAX);
    // All threads' wave-instructions so far, kept only when there is a limit to check.
    let executed = AtomicU64::new(0);
    let first_error: Mutex<Option<(usize, Error)>> = Mutex::new(None);
    let total = Mutex::new(Stats::default());
    // One thread's part: workgroups claimed until none is left or one failed.
    let work = || {
        let mut core = Core::new(&plan, hw, None);
        // Dropped when the thread's part ends, on a panic too, which performs the atomics it
        // still holds before the dispatch returns.
        let mut mem = SharedAccess::new(mem);
        let mut stats = Stats::default();
        'claims: while failed.load(Ordering::Relaxed) == usize::MAX {
            let start = next.0.fetch_add(chunk, Ordering::Relaxed);
            for k in start..start + chunk {
                if k > failed.load(Ordering::Relaxed) {
                    break 'claims;
                }
                let Some(&n) = groups.get(k) else {
                    break 'claims;
                };
                let budget = hw.instruction_limit.map_or(u64::MAX, |l| {
                    l.saturating_sub(executed.load(Ordering::Relaxed))
                });
                match core.run_group(program, code_base, hw, &plan, n, budget, &mut mem) {
                    Ok((instructions, waves)) => {
                        if hw.instruction_limit.is_some() {
                            executed.fetch_add(instructions, Ordering::Relaxed);
                        }
                        stats.instructions += instructions;
                        stats.waves += waves;
                        stats.workgroups += 1;
                    }
                    Err(e) => {
                        failed.fetch_min(k, Ordering::Relaxed);
                        let mut slot = am_isa::sync::lock(&first_error);
                        if slot.as_ref().is_none_or(|(k0, _)| k < *k0) {
                            *slot = Some((k, e));
                        }
                        break 'claims;
                    }
                }
            }
        }
        let mut t = am_isa::sync::lock(&total);
        t.instructions += stats.instructions;
        t.waves += stats.waves;
        t.workgroups += stats.workgroups;
    };
    // The calling thread is one of the threads; the others are jobs on a pool of exactly
    // that many threads, which outlive the dispatch (starting and joining two threads took
    // about 140 µs on a 2-core VM, a third of a `--scale 1` `copy` dispatch on one core). A
    // pool with more threads than jobs would have its idle threads spin for work on the
    // cores the dispatch runs on. The scope returns when all jobs have ended, and re-raises
    // a panic of any of them. Without a pool, the caller runs every workgroup.
    let pool = if threads > 1 {
        helper_pool(threads - 1)
    } else {
        None
    };
    match pool {
        Some(pool) => pool.in_place_scope(|s| {
            for _ in 1..threads {
                s.spawn(|_| work());
            }
            work();
        }),
        None => work(),
    }
    if let Some((_, e)) = first_error.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(e);
    }
    let stats = total.into_inner().unwrap_or_else(|p| p.into_inner());
    Ok(stats)
}

/// The pool of `n` threads that helps the parallel dispatches asking for `n + 1` threads,
/// made on first use and kept for the process; `None` when the threads cannot be started.
fn helper_pool(n: usize) -> Option<std::sync::Arc<rayon::ThreadPool>> {
    type Pools = Vec<(usize, std::sync::Arc<rayon::ThreadPool>)>;
    static POOLS: std::sync::Mutex<Pools> = std::sync::Mutex::new(Vec::new());
    let mut pools = am_isa::sync::lock(&POOLS);
    if let Some((_, p)) = pools.iter().find(|(k, _)| *k == n) {
        return Some(p.clone());
    }
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(n)
        .thread_name(|i| format!("am-emu-{i}"))
        .build()
        .ok()?;
    let pool = std::sync::Arc::new(pool);
    pools.push((n, pool.clone()));
    Some(pool)
}

/// A value on a cache line of its own (two lines: some cores fetch lines in pairs).
#[repr(align(128))]
struct Aligned<T>(T);

fn run_workgroup(waves: &mut [Wave], ctx: &mut Ctx<'_>) -> Result<(), Error> {
    loop {
        for w in waves.iter_mut() {
            if w.state == WaveState::Running {
                if ctx.counts.is_empty() {
                    crate::interp::exec::run(w, ctx)?;
                } else {
                    crate::interp::exec::run_counted(w, ctx)?;
                }
            }
        }
        if waves.iter().all(|w| w.state == WaveState::Done) {
            return Ok(());
        }
        // Every live wave waits at the barrier (finished waves do not take part): release.
        for w in waves.iter_mut() {
            if w.state == WaveState::Barrier {
                w.state = WaveState::Running;
            }
        }
    }
}

/// 0 to 63: lane numbers to add to a wave's first work-item id (the loop over this table
/// takes 49 host instructions a wave, the loop counting lanes took 64).
const LANE_IDS: [u32; 64] = {
    let mut ids = [0u32; 64];
    let mut l = 0;
    while l < 64 {
        ids[l] = l as u32;
        l += 1;
    }
    ids
};

/// Sets up a wave's registers as the hardware does from the dispatch state: user SGPRs,
/// then system SGPRs (workgroup ids, workgroup info, private segment wave offset), work-item
/// ids in v0 (gfx11 and gfx90a+ pack x, y, z into bits 0-9, 10-19, 20-29), EXEC for the live
/// lanes. Other VGPRs and AccVGPRs are not cleared (see [`register_rows`]).
fn init_wave(
    w: &mut Wave,
    w_idx: u32,
    size: [u32; 3],
    gid: [u32; 3],
    hw: &HwDispatch,
    plan: &Plan,
    prog: &Program,
) {
    let lanes = hw.wave_size;
    let private_size = hw.scratch_bytes as usize;
    let mode = plan.mode;
    // VGPRs other than the work-item ids are undefined at a wave start (AMDGPUUsage, "Initial
    // Kernel Execution State"): a wave keeps what the previous wave in its slot left there
    // (zeros for the first, see `Core::new`) instead of clearing its rows, which for short
    // waves cost as much as their instructions.
    w.s = [0; 128];
    w.scc = false;
    w.lanes = lanes;
    w.state = WaveState::Running;
    w.posted = false;
    w.mode = mode;
    w.hwreg = [0; 64];
    w.isa = prog.isa;
    w.hw_id = w_idx & 0xf;
    w.xcc_id = hw.xcc_id.unwrap_or(hw.partition.index);
    w.private_size = private_size;
    w.scratch.clear();
    w.scratch.resize(private_size * lanes as usize, 0);
    // One copy (the loop over an iterator took 80 host instructions a wave).
    let user = &hw.user_sgprs[..hw.user_sgprs.len().min(106)];
    w.s[..user.len()].copy_from_slice(user);
    let rsrc2 = hw.rsrc2;
    let mut next = ((rsrc2 >> 1) & 0x1f) as usize;
    for (d, &g) in gid.iter().enumerate() {
        if rsrc2 & (1 << (7 + d)) != 0 && next < 106 {
            w.s[next] = g;
            next += 1;
        }
    }
    if rsrc2 & (1 << 10) != 0 && next < 106 {
        // WORKGROUP_INFO: the LDS size in its upper bits is not modelled; 0.
        w.s[next] = 0;
        next += 1;
    }
    if rsrc2 & 1 != 0 && next < 106 {
        // Private segment wave offset: scratch is per wave in the emulator, so 0.
        w.s[next] = 0;
    }
    if prog.isa.is_gfx12() {
        // gfx12's architected SGPRs (AMDGPUUsage): workgroup id x in TTMP9, y and z in the low
        // and high halves of TTMP7, whatever the descriptor enables.
        w.s[108 + 9] = gid[0];
        w.s[108 + 7] = (gid[1] & 0xffff) | gid[2] << 16;
    }
    let items = size[0] * size[1] * size[2];
    // Work-item ids counted up from the wave's first (no divisions per lane, and none at all
    // for a one-dimensional workgroup).
    let first = w_idx * lanes;
    let live = items.saturating_sub(first).min(lanes);
    if size[1] == 1 && size[2] == 1 {
        // A one-dimensional workgroup: x counts up from the wave's first work-item; a full
        // wave of 64 through a fixed-size row (no bounds checks, whole vectors: 36 host
        // instructions a wave fewer than the loop over `live` lanes).
        match w.v.first_chunk_mut::<64>() {
            Some(v0) if live == 64 => {
                for (v, &lane) in v0.iter_mut().zip(&LANE_IDS) {
                    *v = first + lane;
                }
            }
            _ => {
                for (v, &lane) in w.v[..live as usize].iter_mut().zip(&LANE_IDS) {
                    *v = first + lane;
                }
            }
        }
    } else {
        let mut x = first % size[0];
        let mut y = (first / size[0]) % size[1];
        let mut z = first / (size[0] * size[1]);
        for v in &mut w.v[..live as usize] {
            *v = x | (y << 10) | (z << 20);
            x += 1;
            if x == size[0] {
                x = 0;
                y += 1;
                if y == size[1] {
                    y = 0;
                    z += 1;
                }
            }
        }
    }
    let exec = if live >= 64 {
        u64::MAX
    } else {
        (1u64 << live) - 1
    };
    w.set_exec(exec);
}
