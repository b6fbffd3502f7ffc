//! The mock device: a shared device model ([`MockGpu`]) and the driver-side handles on it
//! ([`MockDevice`], implementing the driver's [`PciDevice`]).
//!
//! A handle is a driver instance's view: dropping it and opening another leaves registers,
//! firmware state and VRAM as they were, as on hardware. Locking: `state` (config space,
//! register values, models, doorbells) is one mutex taken per access; VRAM and system memory
//! carry their own locks, always taken after `state` when both are needed, so a future
//! engine thread can move memory while the CPU holds neither; `violations` is taken last.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::{Arc, Mutex, Weak};

use am_driver::pci::remote::ratelimit::{RateLimit, Verdict};
use am_driver::{Bar, BarInfo, Error as DrvError, PciDevice, SysMem};
use am_isa::sync::lock;

use crate::config::ConfigSpace;
use crate::discovery;
use crate::engine::{Engines, QueueKey, QueueStatus, Wake};
use crate::hive::{Hive, Member};
use crate::ip::{Fault, Hw, Models, Reg, ResetKind};
use crate::profile::{Profile, RegIp};
use crate::regs::{Block, RegValues, RegisterMap};
use crate::sysmem::{DmaFault, SysArena};
use crate::vram::Vram;
use crate::walker::Access;

/// Where a violating access went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Space {
    /// PCI config space.
    Config,
    /// A BAR.
    Bar(u8),
    /// Device DMA to system memory.
    Dma,
}

/// One breach of the hardware contract, as the test sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// Where the access went.
    pub space: Space,
    /// Offset in that space (BAR5: byte offset; the dword is `offset / 4`).
    pub offset: u64,
    /// Read or write.
    pub access: Access,
    /// Access size in bytes.
    pub size: u64,
    /// The value written.
    pub value: Option<u64>,
    /// Register name and instance where the offset is a known register.
    pub register: Option<String>,
    /// What is wrong.
    pub reason: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let space = match self.space {
            Space::Config => "config space".to_string(),
            Space::Bar(b) => format!("BAR{b}"),
            Space::Dma => "DMA".to_string(),
        };
        let dir = match self.access {
            Access::Read => "read",
            Access::Write => "write",
            Access::Execute => "fetch",
        };
        write!(
            f,
            "contract violation: {}-byte {dir} of {space} offset {:#x}",
            self.size, self.offset
        )?;
        if self.space == Space::Bar(5) {
            write!(f, " (dword {:#x})", self.offset / 4)?;
        }
        if let Some(r) = &self.register {
            write!(f, " [{r}]")?;
        }
        if let Some(v) = self.value {
            write!(f, " value {v:#x}")?;
        }
        write!(f, ": {}", self.reason)
    }
}

/// How the device treats accesses outside the contract.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// A violation is recorded and returned to the driver as an error (the default).
    Strict,
    /// For exploration: a violation is recorded, unknown registers read 0 / keep what was
    /// written, and the driver gets no error.
    Lenient,
}

struct State {
    config: ConfigSpace,
    regs: RegValues,
    models: Models,
    /// Registers outside the map, in lenient mode only.
    unknown: HashMap<u64, u32>,
    doorbells: HashMap<u64, u64>,
    /// Rings of doorbells that a running queue owns, in order (the last
    /// [`DOORBELL_RECORD`]).
    doorbell_rings: VecDeque<DoorbellRing>,
    /// Access granted by the test hook rather than through the mailbox.
    vf_access_hook: bool,
}

/// The queue a doorbell belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DoorbellOwner {
    /// An active compute HQD (`CP_HQD_PQ_DOORBELL_CONTROL`).
    Compute {
        /// XCC instance.
        xcc: u8,
        /// MEC.
        me: u8,
        /// Pipe.
        pipe: u8,
        /// Queue.
        queue: u8,
    },
    /// A running SDMA ring (`DOORBELL_OFFSET`).
    Sdma {
        /// Engine.
        engine: u8,
        /// Ring of the engine.
        queue: u8,
    },
}

/// Doorbell rings kept for tests (the oldest are dropped beyond this).
pub const DOORBELL_RECORD: usize = 4096;

/// A doorbell write that reached a running queue (its engine takes the value as the write
/// pointer); the last [`DOORBELL_RECORD`] are kept for tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DoorbellRing {
    /// Byte offset in BAR2.
    pub offset: u64,
    /// Value written (zero-extended for a 32-bit write).
    pub value: u64,
    /// Who owns the doorbell.
    pub owner: DoorbellOwner,
}

impl State {
    /// Whether a VF may reach its MMIO and VRAM.
    fn vf_access(&self) -> bool {
        self.vf_access_hook || self.models.mailbox.access_granted()
    }
}

/// Most violations a device keeps (the latest); the count of all of them is kept apart. A
/// served mock refuses whatever a client sends wrongly, for as long as it runs: the list
/// must not grow with it.
pub const MAX_VIOLATIONS: usize = 1024;

/// The violations a device keeps: the latest [`MAX_VIOLATIONS`] and how many there were.
#[derive(Default)]
struct Violations {
    kept: VecDeque<Violation>,
    total: u64,
}

pub(crate) struct Shared {
    /// This device, for the engine threads (which must not keep it alive).
    me: Weak<Shared>,
    name: String,
    profile: Profile,
    map: RegisterMap,
    mode: Mode,
    pub(crate) vram: Vram,
    pub(crate) sysmem: SysArena,
    /// The CP and SDMA engines.
    pub(crate) engines: Engines,
    state: Mutex<State>,
    violations: Mutex<Violations>,
    /// Accesses the mock accepts but no source says hardware requires: counted, never the
    /// driver's error (docs/MOCK.md, "Refusal rules and their sources").
    warnings: Mutex<Violations>,
    /// Violation warnings: a client can trigger them at will.
    log_limit: RateLimit,
    member: Option<Member>,
    /// Per GC instance, the dwords `CP_MQD_BASE_ADDR ..= CP_HQD_PQ_WPTR_HI`: the window a
    /// driver may write the MQD image over, whose reserved dwords hardware ignores.
    hqd_windows: Vec<(u64, u64)>,
    /// Hub views read at the current GMC epoch ([`Shared::hub_view`]).
    views: Mutex<Vec<CachedView>>,
}

/// A hub view and the GMC epoch read before its registers were: it holds for as long as
/// the epoch has not moved (every GMC register write and every reset moves it).
#[derive(Clone, Copy)]
struct CachedView {
    epoch: u64,
    view: crate::ip::gmc::HubView,
}

/// Register values firmware leaves behind at power-on, on top of the reset defaults (the FB
/// location and, in a hive, the XGMI layout).
fn power_on(
    profile: &Profile,
    map: &RegisterMap,
    st: &mut State,
    vram: &Vram,
    sysmem: &SysArena,
    member: Option<&Member>,
) {
    let mut hw = Hw {
        profile,
        map,
        regs: &mut st.regs,
        config: &st.config,
        vram,
        sysmem,
        warnings: Vec::new(),
    };
    crate::ip::gmc::Gmc::power_on(&mut hw, member);
    crate::ip::nbio::Nbio::power_on(&mut hw);
    crate::ip::sdma::Sdma::power_on(&mut hw);
    if profile.is_vf {
        // A VF is handed out by a host whose PSP has already loaded the SDMA firmware, so
        // its SDMA 4.x engines run; the VF's driver never un-halts them (Linux
        // `sdma_v4_4_2_inst_enable` returns before its halt loop under PSP loading).
        crate::ip::sdma::Sdma::firmware_loaded(&mut hw);
    }
}

/// A mock GPU: the device model that outlives driver instances.
#[derive(Clone)]
pub struct MockGpu {
    shared: Arc<Shared>,
}

impl fmt::Debug for MockGpu {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MockGpu")
            .field("name", &self.shared.name)
            .finish_non_exhaustive()
    }
}

impl MockGpu {
    /// A fresh strict device of profile `profile`, index 0.
    pub fn new(profile: &str) -> crate::Result<Self> {
        Self::build(Profile::by_name(profile)?, 0, Mode::Strict, None)
    }

    /// A fresh device with explicit index and mode.
    pub fn with_mode(profile: &str, index: u32, mode: Mode) -> crate::Result<Self> {
        Self::build(Profile::by_name(profile)?, index, mode, None)
    }

    pub(crate) fn build(
        profile: Profile,
        index: u32,
        mode: Mode,
        member: Option<Member>,
    ) -> crate::Result<Self> {
        let map = RegisterMap::build(&profile);
        let name = match &member {
            Some(m) => {
                let hive_name = m.hive.spec_profile();
                let bad = |reason: String| crate::Error::BadHive {
                    name: hive_name.clone(),
                    reason,
                };
                if profile.is_vf {
                    return Err(bad(
                        "hive members are PFs; a VF's hive belongs to its host".into()
                    ));
                }
                if map.find(RegIp::Mmhub, "MC_VM_XGMI_LFB_CNTL", 0).is_none() {
                    return Err(bad(format!(
                        "profile {} has no XGMI (its MMHUB has no MC_VM_XGMI_LFB_CNTL)",
                        profile.name
                    )));
                }
                format!("mock:{hive_name}:{index}")
            }
            None => format!("mock:{}:{index}", profile.name),
        };
        let vram = Vram::new(profile.vram_size);
        let table = discovery::build(&profile)?;
        vram.write(discovery::offset(&profile), &table)
            .map_err(|e| crate::Error::BadProfile {
                profile: profile.name,
                reason: format!("the discovery table does not fit: {e}"),
            })?;
        let bar0 = crate::bus::reserve(&name, profile.bar0_max).ok_or_else(|| {
            crate::Error::BadProfile {
                profile: profile.name,
                reason: format!(
                    "no room on the mock's PCI bus for another {} GiB BAR0",
                    profile.bar0_max >> 30
                ),
            }
        })?;
        let mut state = State {
            config: ConfigSpace::new(&profile, index, bar0),
            regs: map.defaults(),
            models: Models::new(&profile),
            unknown: HashMap::new(),
            doorbells: HashMap::new(),
            doorbell_rings: VecDeque::new(),
            vf_access_hook: false,
        };
        let wake = Arc::new(Wake::default());
        let sysmem = SysArena::new(wake.clone());
        power_on(&profile, &map, &mut state, &vram, &sysmem, member.as_ref());
        let hqd_windows = (0..=u8::MAX)
            .map_while(|xcc| {
                let lo = map.find(RegIp::Gc, "CP_MQD_BASE_ADDR", xcc)?;
                let hi = map.find(RegIp::Gc, "CP_HQD_PQ_WPTR_HI", xcc)?;
                Some((map.info(lo).addr, map.info(hi).addr))
            })
            .collect();
        let bus_master = state.config.bus_master();
        let shared = Arc::new_cyclic(|me| {
            crate::bus::attach(bar0, me.clone());
            Shared {
                me: me.clone(),
                engines: Engines::new(wake),
                name,
                profile,
                map,
                mode,
                vram,
                sysmem,
                state: Mutex::new(state),
                violations: Mutex::new(Violations::default()),
                warnings: Mutex::new(Violations::default()),
                log_limit: RateLimit::default_for_refusals(),
                member,
                hqd_windows,
                views: Mutex::new(Vec::new()),
            }
        });
        shared.engines.set_bus_master(bus_master);
        if let Some(m) = &shared.member {
            m.hive.join(m.region, &shared)?;
        }
        Ok(Self { shared })
    }

    /// A driver-side handle (one "driver instance").
    pub fn open(&self) -> Arc<MockDevice> {
        Arc::new(MockDevice {
            shared: self.shared.clone(),
            bars: Mutex::new(Default::default()),
        })
    }

    /// Device name (`mock:navi31:0`).
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// The profile.
    pub fn profile(&self) -> &Profile {
        &self.shared.profile
    }

    /// The register map.
    pub fn register_map(&self) -> &RegisterMap {
        &self.shared.map
    }

    /// The violations so far (the latest [`MAX_VIOLATIONS`]).
    pub fn violations(&self) -> Vec<Violation> {
        lock(&self.shared.violations).kept.iter().cloned().collect()
    }

    /// How many violations there were, including those no longer kept.
    pub fn violation_count(&self) -> u64 {
        lock(&self.shared.violations).total
    }

    /// The violations so far (the latest [`MAX_VIOLATIONS`]), clearing the list and count.
    pub fn take_violations(&self) -> Vec<Violation> {
        let v = std::mem::take(&mut *lock(&self.shared.violations));
        v.kept.into()
    }

    /// The warnings so far (the latest [`MAX_VIOLATIONS`]): accesses the mock takes as
    /// hardware would but no proven driver makes — a ring at address 0, a write to a
    /// read-only register, a doorbell nobody owns. Never returned to the driver.
    pub fn warnings(&self) -> Vec<Violation> {
        lock(&self.shared.warnings).kept.iter().cloned().collect()
    }

    /// How many warnings there were, including those no longer kept.
    pub fn warning_count(&self) -> u64 {
        lock(&self.shared.warnings).total
    }

    /// The warnings so far, clearing the list and count.
    pub fn take_warnings(&self) -> Vec<Violation> {
        let v = std::mem::take(&mut *lock(&self.shared.warnings));
        v.kept.into()
    }

    /// Device memory.
    pub fn vram(&self) -> &Vram {
        &self.shared.vram
    }

    /// The hive this device belongs to.
    pub fn hive(&self) -> Option<&Arc<Hive>> {
        self.shared.member.as_ref().map(|m| &m.hive)
    }

    /// This device's place in its hive (hive and region id), if it is a member.
    pub fn hive_member(&self) -> Option<&Member> {
        self.shared.member.as_ref()
    }

    /// A fresh hive of `members` strict devices of `profile` (regions 0..members, device
    /// indices 0..members, hive id 0), not shared with the process-wide registry. The
    /// segment size is the profile's VRAM rounded up to 16 MiB (chosen: each member's VRAM
    /// fills its segment).
    pub fn new_hive(profile: &str, members: u8) -> crate::Result<Vec<Self>> {
        let hive = Arc::new(Hive::new(profile, members, 0)?);
        (0..members)
            .map(|region| {
                Self::build(
                    Profile::by_name(profile)?,
                    hive.device_index(region),
                    Mode::Strict,
                    Some(Member {
                        hive: hive.clone(),
                        region,
                    }),
                )
            })
            .collect()
    }

    /// Test hook: the device as `amdgpu` leaves it when it is unbound — the PSP's sOS runs
    /// (`C2PMSG_81` non-zero, ring answer flag in `C2PMSG_64`) and the SMU firmware runs and
    /// answers with its features enabled — while this driver's scratch registers say nothing
    /// of it. A PF only (on a VF the PSP and SMU belong to the host).
    pub fn run_foreign_firmware(&self) {
        if self.shared.profile.is_vf {
            return;
        }
        self.with_models(|m, hw| {
            m.psp.run_foreign_sos(hw);
            m.smu.run_foreign_firmware();
        });
    }

    /// Test hook standing in for the PF: grant (or take back) a VF's access to its MMIO and
    /// VRAM without the mailbox. Access granted through the mailbox is not affected.
    pub fn grant_vf_access(&self, granted: bool) {
        lock(&self.shared.state).vf_access_hook = granted;
    }

    /// Work on the PF side of a VF's mailbox (fault injection, the message record, a stale
    /// event); `None` on a PF profile.
    pub fn with_vf_pf<R>(&self, f: impl FnOnce(&mut crate::vf_pf::VfPf) -> R) -> Option<R> {
        lock(&self.shared.state).models.mailbox.pf.as_mut().map(f)
    }

    /// Work on the PSP model (fault injection, the load log, firmware state).
    pub fn with_psp<R>(&self, f: impl FnOnce(&mut crate::ip::psp::Psp) -> R) -> R {
        f(&mut lock(&self.shared.state).models.psp)
    }

    /// Work on the SMU model (fault injection, the message log, DPM state).
    pub fn with_smu<R>(&self, f: impl FnOnce(&mut crate::ip::smu::Smu) -> R) -> R {
        f(&mut lock(&self.shared.state).models.smu)
    }

    /// Value of a register by table, name and instance, read behind the driver's back (no
    /// model side effects, no violation). `None` if the profile has no such register.
    pub fn peek(&self, ip: RegIp, name: &str, instance: u8) -> Option<u32> {
        let id = self.shared.map.find(ip, name, instance)?;
        Some(lock(&self.shared.state).regs.get(id))
    }

    /// Test hook: a fatal hardware error latches the RAS status bits of
    /// `BIF_BX0_BIF_DOORBELL_INT_CNTL` (ATHUB error event and/or RAS controller), as the
    /// BIF does before it interrupts. Returns whether the profile has the register.
    pub fn raise_ras(&self, athub: bool, cntlr: bool) -> bool {
        let Some(id) = self
            .shared
            .map
            .find(RegIp::Nbio, "BIF_BX0_BIF_DOORBELL_INT_CNTL", 0)
        else {
            return false;
        };
        let info = self.shared.map.info(id);
        let Some(def) =
            am_autogen::regs::table(info.table, info.version).and_then(|t| t.by_name(info.name))
        else {
            return false;
        };
        let mut st = lock(&self.shared.state);
        let mut v = st.regs.get(id);
        for ((status, _), on) in crate::ip::nbio::RAS_BITS.iter().zip([athub, cntlr]) {
            if let (true, Some(f)) = (on, def.field(status)) {
                v = f.set(v, 1);
            }
        }
        st.regs.set(id, v);
        true
    }

    /// HDP flushes so far (through the CPU's flush register or an engine's request).
    pub fn hdp_flushes(&self) -> u64 {
        lock(&self.shared.state).models.nbio.hdp_flushes()
    }

    /// The compute queues the CP holds active (`CP_HQD_ACTIVE`), by (xcc, me, pipe, queue).
    pub fn active_queues(&self) -> Vec<crate::ip::gfx::ActiveQueue> {
        lock(&self.shared.state).models.gfx.active_queues()
    }

    /// The SDMA rings the engines hold enabled, by (engine, queue).
    pub fn active_sdma_queues(&self) -> Vec<crate::ip::sdma::SdmaQueue> {
        lock(&self.shared.state).models.sdma.active_queues()
    }

    /// Doorbell writes that reached a running queue, in order (kept across resets; the
    /// last [`DOORBELL_RECORD`]).
    pub fn doorbell_rings(&self) -> Vec<DoorbellRing> {
        lock(&self.shared.state)
            .doorbell_rings
            .iter()
            .copied()
            .collect()
    }

    /// The queues the engines run, with what each is doing.
    pub fn queues(&self) -> Vec<(QueueKey, QueueStatus)> {
        self.shared.engines.status()
    }

    /// Wait until every running queue is idle (its read pointer at its write pointer, no
    /// indirect buffer or wait under way) or halted. `Err` names the queues still busy
    /// after `timeout`.
    pub fn wait_queues_idle(&self, timeout: std::time::Duration) -> Result<(), String> {
        let until = std::time::Instant::now() + timeout;
        loop {
            let busy: Vec<String> = self
                .queues()
                .into_iter()
                .filter(|(_, s)| s.halted.is_none() && (s.rptr != s.wptr || s.waiting || s.busy))
                .map(|(_, s)| s.name)
                .collect();
            if busy.is_empty() {
                return Ok(());
            }
            if std::time::Instant::now() >= until {
                return Err(format!("still busy after {timeout:?}: {}", busy.join(", ")));
            }
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
    }

    /// Set the watchdog: the wave-instructions one dispatch may execute before its queue is
    /// taken for hung (default [`crate::engine::DEFAULT_WATCHDOG`]).
    pub fn set_watchdog(&self, instructions: u64) {
        self.shared.engines.set_watchdog(instructions);
    }

    /// Turns the shader statistics on or off: while on, every dispatch counts its executed
    /// wave-instructions by class and mnemonic into [`MockGpu::shader_statistics`] (the
    /// emulator's counting run loop; off, dispatches count nothing).
    pub fn set_shader_statistics(&self, on: bool) {
        self.shared.engines.set_counting(on);
    }

    /// What the dispatches run while statistics were on executed, since the device was made
    /// or [`MockGpu::reset_shader_statistics`].
    pub fn shader_statistics(&self) -> crate::engine::ShaderStatistics {
        self.shared.engines.statistics()
    }

    /// Starts the shader statistics from zero.
    pub fn reset_shader_statistics(&self) {
        self.shared.engines.reset_statistics();
    }

    /// Writes the shader statistics as JSON ([`crate::engine::ShaderStatistics::to_json`])
    /// to `path` after every counted dispatch, before the dispatch can be seen to complete
    /// (`None` stops writing).
    pub fn write_shader_statistics_to(&self, path: Option<std::path::PathBuf>) {
        self.shared.engines.write_statistics_to(path);
    }

    /// The GPU clock now (100 MHz ticks), as a timestamp packet would write it.
    pub fn gpu_clock(&self) -> u64 {
        self.shared.engines.clock.now()
    }

    /// Tell the GFX model the MEC firmware's RS64 start address (see
    /// [`crate::ip::gfx::Gfx::set_mec_ucode_start`]).
    pub fn set_mec_ucode_start(&self, addr: Option<u64>) {
        lock(&self.shared.state)
            .models
            .gfx
            .set_mec_ucode_start(addr);
    }

    /// Run `f` on the models with a [`Hw`] view of the device, as one of its engines acts
    /// (the register-file lock is held throughout). The GMC and IH test hooks use it.
    pub(crate) fn with_models<R>(&self, f: impl FnOnce(&mut Models, &mut Hw<'_>) -> R) -> R {
        let mut guard = lock(&self.shared.state);
        let st = &mut *guard;
        let mut hw = Hw {
            profile: &self.shared.profile,
            map: &self.shared.map,
            regs: &mut st.regs,
            config: &st.config,
            vram: &self.shared.vram,
            sysmem: &self.shared.sysmem,
            warnings: Vec::new(),
        };
        f(&mut st.models, &mut hw)
    }

    /// Record what an engine of the device could not do because of how the driver
    /// programmed it (an IH ring in unmapped memory, …) as a DMA violation.
    pub(crate) fn record_engine_fault(&self, engine: &str, fault: &Fault) {
        self.shared.record(Violation {
            space: Space::Dma,
            offset: 0,
            access: Access::Write,
            size: 0,
            value: None,
            register: None,
            reason: format!("{engine}: {}", fault.0),
        });
    }

    /// Device DMA read from system memory, as the engines will do it: refused (and
    /// recorded) while bus mastering is off.
    pub fn dma_read(&self, bus: u64, buf: &mut [u8]) -> am_driver::Result<()> {
        self.shared
            .dma(bus, buf.len(), Access::Read, |s| s.read(bus, buf))
    }

    /// Device DMA write to system memory.
    pub fn dma_write(&self, bus: u64, data: &[u8]) -> am_driver::Result<()> {
        self.shared
            .dma(bus, data.len(), Access::Write, |s| s.write(bus, data))
    }

    /// Test hook standing in for an engine behind `hub` (SDMA, the CP): read GPU address
    /// `addr` of `vmid` as the engines do — FB and AGP apertures for vmid 0, the page tables
    /// with the hub's TLB snapshot, another hive member's VRAM over the fabric, system memory
    /// by DMA — HDP-checked. A fault is returned, not latched in the hub.
    pub fn engine_read(
        &self,
        hub: crate::ip::gmc::Hub,
        vmid: u8,
        addr: u64,
        buf: &mut [u8],
    ) -> Result<(), crate::engine::mem::MemError> {
        self.engine_mem(hub, vmid, addr)?.read(addr, buf)
    }

    /// Test hook: write as an engine behind `hub` does (see [`MockGpu::engine_read`]).
    pub fn engine_write(
        &self,
        hub: crate::ip::gmc::Hub,
        vmid: u8,
        addr: u64,
        data: &[u8],
    ) -> Result<(), crate::engine::mem::MemError> {
        self.engine_mem(hub, vmid, addr)?.write(addr, data)
    }

    fn engine_mem(
        &self,
        hub: crate::ip::gmc::Hub,
        vmid: u8,
        addr: u64,
    ) -> Result<crate::engine::mem::GpuMem<'_>, crate::engine::mem::MemError> {
        crate::engine::mem::GpuMem::new(&self.shared, hub, vmid)
            .map_err(|reason| crate::engine::mem::MemError::Dma { addr, reason })
    }
}

impl Shared {
    fn record(&self, v: Violation) -> DrvError {
        let verdict = self.log_limit.check();
        if verdict != Verdict::Suppress {
            tracing::warn!(device = %self.name, "{v}{}", verdict.suffix());
        }
        let message = v.to_string();
        let mut list = lock(&self.violations);
        if list.kept.len() >= MAX_VIOLATIONS {
            list.kept.pop_front();
        }
        list.kept.push_back(v);
        list.total += 1;
        DrvError::new(&self.name, am_driver::ErrorKind::Backend { message })
    }

    /// Count an access the mock accepts without a source that hardware needs it otherwise.
    fn warn(&self, v: Violation) {
        if self.log_limit.check() != Verdict::Suppress {
            let register = v.register.as_deref().unwrap_or("-");
            tracing::info!(device = %self.name, register, "accepted without a source: {}", v.reason);
        }
        let mut list = lock(&self.warnings);
        if list.kept.len() >= MAX_VIOLATIONS {
            list.kept.pop_front();
        }
        list.kept.push_back(v);
        list.total += 1;
    }

    /// Record a violation; in strict mode it is also the driver's error.
    fn violate(&self, v: Violation) -> am_driver::Result<()> {
        let err = self.record(v);
        match self.mode {
            Mode::Strict => Err(err),
            Mode::Lenient => Ok(()),
        }
    }

    fn reg_label(&self, id: usize) -> String {
        let i = self.map.info(id);
        format!(
            "{} ({} {} instance {})",
            i.name,
            i.table.name(),
            i.version,
            i.instance
        )
    }

    fn dma(
        &self,
        bus: u64,
        len: usize,
        access: Access,
        op: impl FnOnce(&SysArena) -> Result<(), DmaFault>,
    ) -> am_driver::Result<()> {
        let master = lock(&self.state).config.bus_master();
        let fault = if !master {
            Some("DMA while PCI_COMMAND bus mastering is off".to_string())
        } else {
            op(&self.sysmem).err().map(|f| f.to_string())
        };
        match fault {
            None => Ok(()),
            Some(reason) => Err(self.record(Violation {
                space: Space::Dma,
                offset: bus,
                access,
                size: len as u64,
                value: None,
                register: None,
                reason,
            })),
        }
    }

    fn bar_len(&self, bar: u8) -> u64 {
        lock(&self.state).config.bar_size(bar)
    }

    /// A BAR access must lie inside the BAR (the state lock is held: no locking here).
    fn check_bar(&self, st: &State, bar: u8, offset: u64, size: usize) -> am_driver::Result<()> {
        let len = st.config.bar_size(bar);
        if offset.checked_add(size as u64).is_none_or(|e| e > len) {
            return Err(DrvError::new(
                &self.name,
                am_driver::ErrorKind::OutOfRange {
                    what: format!("BAR{bar}"),
                    offset,
                    size: size as u64,
                    len,
                },
            ));
        }
        Ok(())
    }

    fn bar_violation(
        &self,
        bar: u8,
        offset: u64,
        access: Access,
        size: usize,
        value: Option<u64>,
        reason: String,
    ) -> Violation {
        Violation {
            space: Space::Bar(bar),
            offset,
            access,
            size: size as u64,
            value,
            register: None,
            reason,
        }
    }

    // ---- BAR0: VRAM window ----

    fn vram_access(
        &self,
        offset: u64,
        buf: &mut [u8],
        write: Option<&[u8]>,
    ) -> am_driver::Result<()> {
        let st = lock(&self.state);
        let size = write.map_or(buf.len(), <[u8]>::len);
        self.check_bar(&st, 0, offset, size)?;
        let access = if write.is_some() {
            Access::Write
        } else {
            Access::Read
        };
        if !st.config.memory_enabled() {
            drop(st);
            buf.fill(0xff);
            return self.violate(self.bar_violation(
                0,
                offset,
                access,
                size,
                None,
                "BAR0 access with memory decoding off".into(),
            ));
        }
        if self.profile.is_vf && !st.vf_access() {
            drop(st);
            return match write {
                // The PF drops the VF's writes and answers reads with all-ones.
                None => {
                    buf.fill(0xff);
                    Ok(())
                }
                Some(_) => self.violate(self.bar_violation(
                    0,
                    offset,
                    access,
                    size,
                    None,
                    "VRAM write while the PF gates VF access (no INIT_ACCESS granted)".into(),
                )),
            };
        }
        drop(st);
        if !self.vram.contains(offset, size as u64) {
            buf.fill(0);
            return self.violate(self.bar_violation(
                0,
                offset,
                access,
                size,
                None,
                format!(
                    "beyond VRAM ({:#x} bytes) inside the larger BAR0",
                    self.vram.size()
                ),
            ));
        }
        match write {
            Some(data) => {
                let landed = self.vram.cpu_write(offset, data);
                self.engines.memory_changed();
                if let Err(full) = landed {
                    return self.violate(self.bar_violation(
                        0,
                        offset,
                        access,
                        size,
                        None,
                        full.to_string(),
                    ));
                }
            }
            None => self.vram.read(offset, buf),
        }
        Ok(())
    }

    // ---- BAR2: doorbells ----

    fn doorbell_access(
        &self,
        offset: u64,
        buf: &mut [u8],
        write: Option<&[u8]>,
    ) -> am_driver::Result<()> {
        let mut st = lock(&self.state);
        let size = write.map_or(buf.len(), <[u8]>::len);
        self.check_bar(&st, 2, offset, size)?;
        let access = if write.is_some() {
            Access::Write
        } else {
            Access::Read
        };
        if !matches!(size, 4 | 8) || !offset.is_multiple_of(size as u64) {
            drop(st);
            return self.violate(self.bar_violation(
                2,
                offset,
                access,
                size,
                None,
                "doorbells take aligned 32- or 64-bit accesses".into(),
            ));
        }
        match write {
            None => {
                let v = st.doorbells.get(&offset).copied().unwrap_or(0);
                buf.copy_from_slice(&v.to_le_bytes()[..size]);
                Ok(())
            }
            Some(data) => {
                let mut b = [0u8; 8];
                b[..size].copy_from_slice(data);
                let value = u64::from_le_bytes(b);
                if let Some(owner) = self.engines.ring((offset / 4) as u32, value) {
                    st.doorbells.insert(offset, value);
                    if st.doorbell_rings.len() >= DOORBELL_RECORD {
                        st.doorbell_rings.pop_front();
                    }
                    st.doorbell_rings.push_back(DoorbellRing {
                        offset,
                        value,
                        owner,
                    });
                    return Ok(());
                }
                // Hardware drops a doorbell no queue (no doorbell range) takes; no source
                // says the write is refused. The value is kept, as the BAR reads it back.
                st.doorbells.insert(offset, value);
                drop(st);
                self.warn(self.bar_violation(
                    2,
                    offset,
                    access,
                    size,
                    Some(value),
                    format!(
                        "doorbell index {:#x} (8-byte units) is owned by no queue: dropped",
                        offset / 8
                    ),
                ));
                Ok(())
            }
        }
    }

    // ---- BAR5: registers ----

    fn mmio_read(&self, offset: u64, size: usize) -> am_driver::Result<u32> {
        self.mmio(offset, size, None)
    }

    fn mmio_write(&self, offset: u64, size: usize, value: u32) -> am_driver::Result<()> {
        self.mmio(offset, size, Some(value)).map(|_| ())
    }

    /// One BAR5 access of 4 bytes (dword registers) or 1 byte (byte-wide registers).
    fn mmio(&self, offset: u64, size: usize, write: Option<u32>) -> am_driver::Result<u32> {
        let mut guard = lock(&self.state);
        self.check_bar(&guard, 5, offset, size)?;
        let access = if write.is_some() {
            Access::Write
        } else {
            Access::Read
        };
        let value = write.map(u64::from);
        let all_ones = if size == 1 { 0xff } else { u32::MAX };
        let fail = |v: Violation| -> am_driver::Result<u32> { self.violate(v).map(|()| all_ones) };
        if !guard.config.memory_enabled() {
            drop(guard);
            return fail(self.bar_violation(
                5,
                offset,
                access,
                size,
                value,
                "BAR5 access with memory decoding off".into(),
            ));
        }
        if !(size == 4 && offset.is_multiple_of(4)) && size != 1 {
            drop(guard);
            return fail(self.bar_violation(
                5,
                offset,
                access,
                size,
                value,
                "registers take aligned 32-bit accesses".into(),
            ));
        }
        let dword = offset / 4;
        if self.map.at(dword).is_none()
            && size == 4
            && self
                .hqd_windows
                .iter()
                .any(|&(lo, hi)| (lo..=hi).contains(&dword))
        {
            // A reserved dword between the HQD registers: hardware ignores the write (a
            // driver may write the whole MQD image over the window) and reads 0.
            return Ok(0);
        }
        let Some(id) = self.map.at(dword) else {
            let reason = match self.map.segment_of(dword) {
                Some((hw, inst, seg, within)) => format!(
                    "no register of this profile at dword {dword:#x} (hw_id {hw} instance {inst} segment {seg} + {within:#x})"
                ),
                None => format!("dword {dword:#x} is in no IP segment of this profile"),
            };
            if self.mode == Mode::Lenient {
                let st = &mut *guard;
                let v = match write {
                    Some(w) => {
                        st.unknown.insert(dword, w);
                        w
                    }
                    None => st.unknown.get(&dword).copied().unwrap_or(0),
                };
                drop(guard);
                self.record(self.bar_violation(5, offset, access, size, value, reason));
                return Ok(v);
            }
            drop(guard);
            return fail(self.bar_violation(5, offset, access, size, value, reason));
        };
        let info = self.map.info(id);
        let st = &mut *guard;
        if self.profile.is_vf
            && !st.vf_access()
            && info.block != Block::Mailbox
            && info.name != "RCC_DEV0_EPF0_RCC_IOV_FUNC_IDENTIFIER"
        {
            drop(guard);
            return match write {
                None => Ok(all_ones),
                Some(_) => fail(Violation {
                    register: Some(self.reg_label(id)),
                    ..self.bar_violation(
                        5,
                        offset,
                        access,
                        size,
                        value,
                        "register write while the PF gates VF access (no INIT_ACCESS granted)"
                            .into(),
                    )
                }),
            };
        }
        let result = self.model_access(st, id, (offset % 4) as u8, size, write);
        drop(guard);
        match result {
            Ok(v) => Ok(v),
            Err(Fault(reason)) => fail(Violation {
                register: Some(self.reg_label(id)),
                ..self.bar_violation(
                    5,
                    offset,
                    access,
                    size,
                    value,
                    format!("{} model: {reason}", info.block.name()),
                )
            }),
        }
    }

    /// One register access through its model, with what follows it: the GRBM's soft reset
    /// of the SDMA engines in GC, a mode1 reset the SMU took, the engines following the
    /// queue registers, hub views going stale after a GMC write, blocked queues looking
    /// again after any write. The state lock is held.
    fn model_access(
        &self,
        st: &mut State,
        id: usize,
        byte: u8,
        size: usize,
        write: Option<u32>,
    ) -> Result<u32, Fault> {
        let info = self.map.info(id);
        let reg = Reg { id, info };
        // A mode1 reset the SMU took and answered goes ahead once the driver has read the
        // answer; an access outside MP1 (the mailbox exchange) finds the ASIC already reset.
        let reads_mode1_answer = st.models.smu.mode1_pending().is_some_and(|n| {
            write.is_none()
                && info.block == Block::Smu
                && info.name.strip_prefix("MP1_SMN_C2PMSG_") == Some(&n.to_string())
        });
        if st.models.smu.mode1_pending().is_some() && info.block != Block::Smu {
            self.reset_locked(st, ResetKind::Mode1);
        }
        if info.block == Block::Gfx {
            // RLC bring-up status follows what the PSP did.
            let crate::ip::Models { gfx, psp, .. } = &mut st.models;
            gfx.observe_psp(psp);
        }
        let model = st.models.model(info.block);
        let mut hw = Hw {
            profile: &self.profile,
            map: &self.map,
            regs: &mut st.regs,
            config: &st.config,
            vram: &self.vram,
            sysmem: &self.sysmem,
            warnings: Vec::new(),
        };
        let result: Result<u32, Fault> = match (write, size) {
            (None, 4) => model.read(&mut hw, reg),
            (Some(v), 4) => model.write(&mut hw, reg, v).map(|()| v),
            (None, _) => model.read8(&mut hw, reg, byte).map(u32::from),
            (Some(v), _) => model.write8(&mut hw, reg, byte, v as u8).map(|()| v),
        };
        for reason in std::mem::take(&mut hw.warnings) {
            self.warn(Violation {
                register: Some(self.reg_label(id)),
                reason: format!("{} model: {reason}", info.block.name()),
                ..self.bar_violation(
                    5,
                    info.addr * 4 + u64::from(byte),
                    if write.is_some() {
                        Access::Write
                    } else {
                        Access::Read
                    },
                    size,
                    write.map(u64::from),
                    String::new(),
                )
            });
        }
        if reads_mode1_answer {
            self.reset_locked(st, ResetKind::Mode1);
            return result;
        }
        let Some(v) = write else {
            return result;
        };
        if let (Block::Gfx, "GRBM_SOFT_RESET") = (info.block, info.name) {
            // The SOC21 GRBM also resets the SDMA engines that live in GC.
            st.models
                .sdma
                .grbm_soft_reset(&self.map, &mut st.regs, id, v);
        }
        match info.block {
            Block::Gfx | Block::Sdma => self.sync_engines(st),
            Block::Gmc => self.engines.vm_changed(),
            _ => {}
        }
        self.engines.memory_changed();
        result
    }

    /// Start and stop queue workers to match the queues the models hold active.
    fn sync_engines(&self, st: &State) {
        self.engines.sync(
            &self.me,
            &self.profile,
            &st.models.gfx.active_queues(),
            &st.models.sdma.running_queues(),
            &self.name,
        );
    }

    /// Function-level reset: registers back to their defaults except the scratch registers
    /// hardware keeps, models drop their state, doorbells clear, a VF loses its access.
    /// Config space is kept (the OS saves and restores it around the reset) and VRAM keeps
    /// its contents (memory is not cleared by a reset).
    fn flr(&self) {
        let mut st = lock(&self.state);
        self.reset_locked(&mut st, ResetKind::Flr);
    }

    /// A reset of `kind` with the state lock held: registers to defaults except the scratch
    /// registers, models drop what the reset clears (mode1 also kills PSP and SMU firmware).
    fn reset_locked(&self, st: &mut State, kind: ResetKind) {
        let mut regs = self.map.defaults();
        for id in 0..self.map.len() {
            if self.map.info(id).name.contains("SCRATCH_REG") {
                regs.set(id, st.regs.get(id));
            }
        }
        st.regs = regs;
        st.models.reset(kind);
        power_on(
            &self.profile,
            &self.map,
            st,
            &self.vram,
            &self.sysmem,
            self.member.as_ref(),
        );
        st.doorbells.clear();
        st.vf_access_hook = false;
        self.engines.stop_all();
        self.engines.vm_changed();
    }

    // ---- what the engines reach ----

    /// The device name.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// GC major version of the profile.
    pub(crate) fn gc_major(&self) -> u8 {
        self.profile
            .version(am_autogen::hwid::GC_HWID)
            .map_or(9, |v| v.major)
    }

    /// The shader ISA of the profile, or why its code cannot run.
    pub(crate) fn isa(&self) -> Result<am_emu::Isa, String> {
        match self.profile.version(am_autogen::hwid::GC_HWID) {
            Some(v) => am_isa::GfxTarget::from_gc(v.major, v.minor, v.rev)
                .map_err(|e| format!("{e}: its code cannot run on the mock")),
            None => Err("the profile has no GC".into()),
        }
    }

    /// Whether this device's BAR0, at bus address `base`, decodes a peer's access of `len`
    /// bytes at `offset` (PCIe peer-to-peer, [`crate::bus::reach`]); the refusal names the
    /// device, the address and what stops it. Answers the BAR's size.
    pub(crate) fn peer_bar0(&self, base: u64, offset: u64, len: u64) -> Result<u64, String> {
        let st = lock(&self.state);
        let at = base + offset;
        let name = &self.name;
        if st.config.bar_addr(0) != base {
            return Err(format!(
                "bus address {at:#x}: {name} moved its BAR0 to {:#x}: nothing answers there",
                st.config.bar_addr(0)
            ));
        }
        if !st.config.memory_enabled() {
            return Err(format!(
                "bus address {at:#x} is BAR0 of {name}, whose memory decoding is off"
            ));
        }
        if self.profile.is_vf && !st.vf_access() {
            return Err(format!(
                "bus address {at:#x} is BAR0 of {name}, a VF its PF has not granted access"
            ));
        }
        let size = st.config.bar_size(0);
        if offset.saturating_add(len) > size {
            return Err(format!(
                "bus address {at:#x}+{len:#x} is beyond the {} MiB BAR0 of {name} (offset \
                 {offset:#x}): the BAR decodes only its size{}",
                size >> 20,
                if size <= 256 << 20 {
                    ", and a small BAR shows only the first 256 MiB of VRAM"
                } else {
                    ""
                }
            ));
        }
        if !self.vram.contains(offset, len) {
            return Err(format!(
                "bus address {at:#x}+{len:#x} is inside the BAR0 of {name} but beyond its \
                 VRAM ({:#x} bytes)",
                self.vram.size()
            ));
        }
        Ok(size)
    }

    /// The device of region `region` of this device's hive, over the XGMI fabric: `None`
    /// outside a hive, or when no device holds that region (it was never made, or it went).
    pub(crate) fn hive_peer(&self, region: u8) -> Option<Arc<Shared>> {
        self.member.as_ref()?.hive.member(region)
    }

    /// A hub's view for an engine.
    pub(crate) fn hub_view(
        &self,
        hub: crate::ip::gmc::Hub,
        vmid: u8,
    ) -> Result<crate::ip::gmc::HubView, String> {
        // Every change a view reads (the hub's registers, its TLB invalidations, a reset)
        // moves the GMC epoch after it lands, under the state lock: a view read at an epoch
        // read first holds until the epoch moves, as an engine's own copy of it does
        // (`GpuMem::refresh`). Engines take a view at every step, and reading one costs
        // some twenty register look-ups by name.
        let epoch = self.engines.vm_epoch();
        if let Some(c) = lock(&self.views)
            .iter()
            .find(|c| c.epoch == epoch && c.view.hub == hub && c.view.vmid == vmid)
        {
            return Ok(c.view);
        }
        let mut guard = lock(&self.state);
        let st = &mut *guard;
        let hw = Hw {
            profile: &self.profile,
            map: &self.map,
            regs: &mut st.regs,
            config: &st.config,
            vram: &self.vram,
            sysmem: &self.sysmem,
            warnings: Vec::new(),
        };
        let view = st.models.gmc.view(&hw, hub, vmid).map_err(|f| f.0)?;
        drop(guard);
        let mut views = lock(&self.views);
        views.retain(|c| c.epoch == epoch && (c.view.hub, c.view.vmid) != (hub, vmid));
        views.push(CachedView { epoch, view });
        Ok(view)
    }

    /// The register at `dword` as the CP of `xcc` sees it: a GC register of another XCC's
    /// instance is this XCC's copy (each XCC's CP addresses its own registers at the
    /// offsets of XCC 0).
    pub(crate) fn gc_reg_for_xcc(&self, dword: u64, xcc: u8) -> Option<usize> {
        let id = self.map.at(dword)?;
        let info = self.map.info(id);
        if info.table == RegIp::Gc && info.instance != xcc {
            return self.map.find(RegIp::Gc, info.name, xcc);
        }
        Some(id)
    }

    /// A GC register of `xcc` by name.
    pub(crate) fn gc_reg(&self, name: &str, xcc: u8) -> Option<usize> {
        self.map.find(RegIp::Gc, name, xcc)
    }

    /// A register's value without side effects.
    pub(crate) fn peek_reg(&self, id: usize) -> u32 {
        lock(&self.state).regs.get(id)
    }

    /// A field of a GC register, from the generated `sh_mask`.
    pub(crate) fn field_of(
        &self,
        reg: &str,
        field: &str,
    ) -> Result<am_autogen::regs::Field, String> {
        let id = self
            .map
            .find(RegIp::Gc, reg, 0)
            .ok_or_else(|| format!("the profile has no {reg}"))?;
        let info = self.map.info(id);
        am_autogen::regs::table(info.table, info.version)
            .and_then(|t| t.by_name(info.name))
            .and_then(|r| r.field(field))
            .ok_or_else(|| format!("{reg} has no field {field}"))
    }

    /// A register access by an engine (the CP of `xcc`, or SDMA): through the register's
    /// model as a driver's access would be. A refused access is recorded as a violation.
    pub(crate) fn engine_reg(
        &self,
        xcc: u8,
        dword: u64,
        write: Option<u32>,
    ) -> Result<u32, String> {
        let Some(id) = self.gc_reg_for_xcc(dword, xcc) else {
            return Err(format!("no register at dword {dword:#x}"));
        };
        let mut guard = lock(&self.state);
        let r = self.model_access(&mut guard, id, 0, 4, write);
        drop(guard);
        r.map_err(|Fault(reason)| {
            let label = self.reg_label(id);
            let message = format!("{label}: {reason}");
            self.record(Violation {
                space: Space::Bar(5),
                offset: self.map.info(id).addr * 4,
                access: if write.is_some() {
                    Access::Write
                } else {
                    Access::Read
                },
                size: 4,
                value: write.map(u64::from),
                register: Some(label),
                reason: format!("engine access: {reason}"),
            });
            message
        })
    }

    /// An engine's access faulted: latch it in the hub, post the IH entry if enabled.
    pub(crate) fn report_fault(
        &self,
        hub: crate::ip::gmc::Hub,
        vmid: u8,
        f: &crate::walker::PageFault,
        access: crate::walker::Access,
        client: u32,
    ) {
        let mut guard = lock(&self.state);
        let st = &mut *guard;
        let mut hw = Hw {
            profile: &self.profile,
            map: &self.map,
            regs: &mut st.regs,
            config: &st.config,
            vram: &self.vram,
            sysmem: &self.sysmem,
            warnings: Vec::new(),
        };
        let r = crate::ip::gmc::Gmc::report_fault(
            &mut st.models,
            &mut hw,
            hub,
            vmid,
            f,
            access,
            client,
        );
        drop(guard);
        if let Err(fault) = r {
            self.engine_violation(&format!("GMC: {}", fault.0));
        }
    }

    /// Post an interrupt from an engine to IH ring 0.
    pub(crate) fn post_ih(&self, entry: crate::ip::ih::IhEntry) {
        let mut guard = lock(&self.state);
        let st = &mut *guard;
        let mut hw = Hw {
            profile: &self.profile,
            map: &self.map,
            regs: &mut st.regs,
            config: &st.config,
            vram: &self.vram,
            sysmem: &self.sysmem,
            warnings: Vec::new(),
        };
        let crate::ip::Models { gmc, ih, .. } = &mut st.models;
        let r = ih.post(&mut hw, gmc, 0, entry);
        drop(guard);
        if let Err(fault) = r {
            self.engine_violation(&format!("IH: {}", fault.0));
        }
    }

    /// Record what an engine found wrong in how the driver programmed it.
    pub(crate) fn engine_violation(&self, reason: &str) {
        self.record(Violation {
            space: Space::Dma,
            offset: 0,
            access: Access::Read,
            size: 0,
            value: None,
            register: None,
            reason: reason.to_string(),
        });
    }
}

/// A driver instance's handle on a [`MockGpu`].
pub struct MockDevice {
    shared: Arc<Shared>,
    bars: Mutex<[Option<Arc<MockBar>>; 6]>,
}

impl fmt::Debug for MockDevice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MockDevice")
            .field("name", &self.shared.name)
            .finish_non_exhaustive()
    }
}

impl MockDevice {
    /// The device model behind this handle.
    pub fn gpu(&self) -> MockGpu {
        MockGpu {
            shared: self.shared.clone(),
        }
    }

    /// The violations so far (of the device, not just this handle; the latest
    /// [`MAX_VIOLATIONS`]).
    pub fn violations(&self) -> Vec<Violation> {
        lock(&self.shared.violations).kept.iter().cloned().collect()
    }

    fn config_violation(
        &self,
        offset: u16,
        size: u8,
        access: Access,
        value: Option<u64>,
    ) -> DrvError {
        self.shared.record(Violation {
            space: Space::Config,
            offset: u64::from(offset),
            access,
            size: u64::from(size),
            value,
            register: None,
            reason: "config access must be 1, 2 or 4 bytes, naturally aligned, inside 4 KiB".into(),
        })
    }
}

impl PciDevice for MockDevice {
    fn name(&self) -> &str {
        &self.shared.name
    }

    fn dma_read(&self, bus: u64, buf: &mut [u8]) -> am_driver::Result<()> {
        // The CPU reading host memory, not a DMA of the device: no bus-master check, and a
        // miss is an error for the reader, not a violation of the device.
        self.shared.sysmem.read(bus, buf).map_err(|f| {
            DrvError::new(
                &self.shared.name,
                am_driver::ErrorKind::Backend {
                    message: f.to_string(),
                },
            )
        })
    }

    fn backend(&self) -> &'static str {
        "mock"
    }

    fn executed_code(&self, entry: u64) -> am_driver::Result<Option<am_driver::ExecutedCode>> {
        Ok(Some(
            self.shared.engines.executed(entry).unwrap_or_default(),
        ))
    }

    fn config_read(&self, offset: u16, size: u8) -> am_driver::Result<u32> {
        let r = lock(&self.shared.state).config.read(offset, size);
        r.ok_or_else(|| self.config_violation(offset, size, Access::Read, None))
    }

    fn config_write(&self, offset: u16, size: u8, value: u32) -> am_driver::Result<()> {
        let mut st = lock(&self.shared.state);
        let r = st.config.write(offset, size, value);
        self.shared.engines.set_bus_master(st.config.bus_master());
        drop(st);
        r.ok_or_else(|| self.config_violation(offset, size, Access::Write, Some(u64::from(value))))
    }

    fn bar_info(&self, index: u8) -> am_driver::Result<BarInfo> {
        let st = lock(&self.shared.state);
        match st.config.bar_size(index) {
            0 => Err(DrvError::new(
                &self.shared.name,
                am_driver::ErrorKind::NoBar {
                    bar: index,
                    reason: "the device has no such BAR (AMD GPUs decode BAR0, BAR2 and BAR5)"
                        .into(),
                },
            )),
            size => Ok(BarInfo {
                index,
                bus_addr: st.config.bar_addr(index),
                size,
            }),
        }
    }

    /// Another mock device of this process, on the bus they share ([`crate::bus`]): its
    /// BAR0 is reached at its bus address (no IOMMU between them).
    fn peer_bar(
        &self,
        peer: &dyn PciDevice,
        bar: u8,
    ) -> am_driver::Result<am_driver::pci::PeerBar> {
        let refuse = |reason: String| {
            DrvError::new(
                &self.shared.name,
                am_driver::ErrorKind::NoPeerAccess {
                    peer: peer.name().to_string(),
                    reason,
                },
            )
        };
        if peer.backend() != "mock" {
            return Err(refuse(format!(
                "it is a {} device; a mock device reaches only the mock devices of its own \
                 process, on the bus they share",
                peer.backend()
            )));
        }
        if bar != 0 {
            return Err(refuse(format!("BAR{bar}: peers reach VRAM, which is BAR0")));
        }
        let info = peer.bar_info(0)?;
        if crate::bus::holder(info.bus_addr).as_deref() != Some(peer.name()) {
            return Err(refuse(format!(
                "its BAR0 at {:#x} is not on this process's bus (a device served from \
                 another process)",
                info.bus_addr
            )));
        }
        Ok(am_driver::pci::PeerBar {
            peer: peer.name().to_string(),
            index: 0,
            dma_addr: info.bus_addr,
            size: info.size,
            keep: None,
        })
    }

    fn bar(&self, index: u8) -> am_driver::Result<Arc<dyn Bar>> {
        self.bar_info(index)?;
        let mut bars = lock(&self.bars);
        let slot = &mut bars[usize::from(index)];
        let bar = slot.get_or_insert_with(|| {
            Arc::new(MockBar {
                shared: self.shared.clone(),
                index,
            })
        });
        Ok(bar.clone())
    }

    fn resize_bar(&self, index: u8) -> am_driver::Result<()> {
        if index != 0 {
            return Ok(());
        }
        if lock(&self.bars)[0].is_some() {
            return Err(DrvError::new(
                &self.shared.name,
                am_driver::ErrorKind::Backend {
                    message: "BAR0 cannot be resized while it is mapped".into(),
                },
            ));
        }
        lock(&self.shared.state).config.resize_bar0_to_max();
        Ok(())
    }

    fn alloc_sysmem(&self, size: usize, contiguous: bool) -> am_driver::Result<Arc<dyn SysMem>> {
        let mem: Arc<dyn SysMem> = self
            .shared
            .sysmem
            .alloc(&self.shared.name, size, contiguous);
        Ok(mem)
    }

    fn reset(&self) -> am_driver::Result<()> {
        self.shared.flr();
        Ok(())
    }
}

/// A mapped BAR of a mock device.
pub struct MockBar {
    shared: Arc<Shared>,
    index: u8,
}

impl Bar for MockBar {
    fn len(&self) -> u64 {
        self.shared.bar_len(self.index)
    }

    fn read32(&self, offset: u64) -> am_driver::Result<u32> {
        if self.index == 5 {
            return self.shared.mmio_read(offset, 4);
        }
        let mut b = [0u8; 4];
        self.read_bytes(offset, &mut b)?;
        Ok(u32::from_le_bytes(b))
    }

    fn write32(&self, offset: u64, value: u32) -> am_driver::Result<()> {
        if self.index == 5 {
            return self.shared.mmio_write(offset, 4, value);
        }
        self.write_bytes(offset, &value.to_le_bytes())
    }

    fn read_bytes(&self, offset: u64, buf: &mut [u8]) -> am_driver::Result<()> {
        match self.index {
            0 => self.shared.vram_access(offset, buf, None),
            2 => self.shared.doorbell_access(offset, buf, None),
            _ => match buf.len() {
                4 => {
                    let v = self.shared.mmio_read(offset, 4)?;
                    buf.copy_from_slice(&v.to_le_bytes());
                    Ok(())
                }
                n => {
                    let v = self.shared.mmio_read(offset, n)?;
                    buf.fill(0);
                    if let Some(b) = buf.first_mut() {
                        *b = v as u8;
                    }
                    Ok(())
                }
            },
        }
    }

    fn write_bytes(&self, offset: u64, data: &[u8]) -> am_driver::Result<()> {
        match self.index {
            0 => self.shared.vram_access(offset, &mut [], Some(data)),
            2 => self.shared.doorbell_access(offset, &mut [], Some(data)),
            _ => match *data {
                [a, b, c, d] => self
                    .shared
                    .mmio_write(offset, 4, u32::from_le_bytes([a, b, c, d])),
                [a] => self.shared.mmio_write(offset, 1, u32::from(a)),
                _ => self.shared.mmio_write(offset, data.len(), 0),
            },
        }
    }
}
