//! `am replay FILE --device mock:PROFILE [--json]`: do a trace's writes again on a fresh
//! mock device and compare every read with what the traced device answered; the first place
//! the mock answers differently (a value, a refusal, a poll that never ends) is reported
//! with its record, phase and register. How a user with hardware helps calibrate the mock.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use am_driver::pci::DeviceSpec;
use am_driver::trace::{Record, Trace, digest};
use am_driver::{Bar, PciDevice, SysMem};
use anyhow::bail;
use serde::Serialize;

use crate::trace::{Names, phases};

/// How long a poll of the trace may take on the mock before it is a timeout: longer than
/// any wait of the mock's firmware models (the PSP's and SMU's take milliseconds).
const POLL_LIMIT: Duration = Duration::from_secs(5);

/// Arguments of `am replay`.
#[derive(Debug, clap::Args)]
pub struct ReplayArgs {
    /// The trace to replay (from `AM_TRACE=FILE` or `am serve --trace FILE`).
    pub file: PathBuf,
    /// The mock to replay it on: mock:PROFILE[:N] (replaying writes on real hardware is
    /// refused).
    #[arg(long)]
    pub device: String,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// How a replay ended.
#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct Outcome {
    /// Records replayed (up to and including a divergence).
    pub records: usize,
    /// Reads whose value was compared.
    pub reads_compared: usize,
    /// The first divergence, if any.
    pub divergence: Option<Divergence>,
}

/// The first place the device answered differently from the traced one.
#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct Divergence {
    /// Index of the record in the trace (as `am trace show` numbers them).
    pub record: usize,
    /// The phase it belongs to.
    pub phase: String,
    /// The register or BAR place.
    pub register: String,
    /// What differed.
    pub what: String,
}

/// Run `am replay`.
pub fn run(args: ReplayArgs) -> anyhow::Result<std::process::ExitCode> {
    if !matches!(DeviceSpec::parse(&args.device)?, DeviceSpec::Mock { .. }) {
        bail!(
            "{}: am replay writes a trace's writes again, which only a mock may take; use --device mock:PROFILE",
            args.device
        );
    }
    let trace = Trace::read(&args.file)?;
    let dev = crate::device::open_untraced(&args.device)?;
    let outcome = replay(&trace, &*dev)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&outcome)?);
    } else {
        match &outcome.divergence {
            None => println!(
                "{}: {} records replayed on {}, {} reads compared: no divergence",
                args.file.display(),
                outcome.records,
                dev.name(),
                outcome.reads_compared
            ),
            Some(d) => println!(
                "{}: first divergence at record {} (phase {}), {}: {}",
                args.file.display(),
                d.record,
                d.phase,
                d.register,
                d.what
            ),
        }
    }
    Ok(if outcome.divergence.is_none() {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::from(1)
    })
}

/// Where a read looks: config space, or a BAR at an offset and width (bytes reads by
/// length).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    Config(u16, u8),
    Bar(u8, u64, u64),
    /// System memory: allocation, offset, length.
    Sys(u32, u64, u64),
}

fn place(r: &Record) -> Option<Place> {
    match r {
        Record::ConfigRead { offset, size, .. } => Some(Place::Config(*offset, *size)),
        Record::Read {
            bar, offset, width, ..
        } => Some(Place::Bar(*bar, *offset, u64::from(*width))),
        Record::ReadBytes { bar, offset, data } => {
            Some(Place::Bar(*bar, *offset, data.len() as u64))
        }
        Record::ReadDigest {
            bar, offset, len, ..
        } => Some(Place::Bar(*bar, *offset, *len)),
        Record::SysRead { id, offset, data } => Some(Place::Sys(*id, *offset, data.len() as u64)),
        Record::SysReadDigest {
            id, offset, len, ..
        } => Some(Place::Sys(*id, *offset, *len)),
        _ => None,
    }
}

/// A poll in the trace: the reads from `start` on repeat with a period of at most four
/// places (a status register, or a fence and the pointer read between looks). Its length
/// in records, or `None` for a plain read. Config space is no poll: it answers at once, and
/// a driver reading the ids twice is comparing them, not waiting.
fn poll_at(records: &[Record], start: usize) -> Option<(usize, usize)> {
    let places: Vec<Place> = records
        .get(start..)?
        .iter()
        .map_while(|r| place(r).filter(|p| !matches!(p, Place::Config(..))))
        .take(1 << 20)
        .collect();
    (1..=4usize)
        .filter_map(|period| {
            let repeat = (period..places.len())
                .take_while(|&k| places.get(k) == places.get(k - period))
                .count();
            (repeat >= 1).then_some((period, period + repeat))
        })
        .max_by_key(|&(period, len)| (len, std::cmp::Reverse(period)))
}

struct Replayer<'a> {
    dev: &'a dyn PciDevice,
    bars: BTreeMap<u8, Arc<dyn Bar>>,
    /// Low 32 bits of each traced page → the mock's page for it.
    pages: BTreeMap<u64, u64>,
    /// The mock's system memory for each allocation of the trace, by its number.
    mem: BTreeMap<u32, Arc<dyn SysMem>>,
}

/// What a read found: the same as the trace, or how it differs.
enum Seen {
    Same,
    Differs(String),
}

impl Replayer<'_> {
    fn bar(&mut self, index: u8) -> am_driver::Result<Arc<dyn Bar>> {
        if let Some(b) = self.bars.get(&index) {
            return Ok(b.clone());
        }
        let b = self.dev.bar(index)?;
        self.bars.insert(index, b.clone());
        Ok(b)
    }

    /// The mock's allocation for a traced one.
    fn sysmem(&self, id: u32) -> am_driver::Result<Arc<dyn SysMem>> {
        self.mem.get(&id).cloned().ok_or_else(|| {
            am_driver::Error::new(
                self.dev.name().to_string(),
                am_driver::ErrorKind::BadAllocation {
                    pool: "system memory".into(),
                    reason: format!("the trace uses allocation #{id} before mapping it"),
                },
            )
        })
    }

    /// The mock's counterpart of an allocation-dependent value.
    fn translate(&self, value: u64, width: u8) -> u64 {
        let within = value & 0xfff;
        match self.pages.get(&((value & !0xfff) & 0xffff_ffff)) {
            Some(&new) if width == 8 => new | within,
            Some(&new) => (new & 0xffff_ffff) | within,
            None => value,
        }
    }

    /// Read what `r` read, and compare.
    fn read(&mut self, r: &Record) -> am_driver::Result<Seen> {
        let differs = |want: String, got: String| {
            Ok(Seen::Differs(format!(
                "the trace read {want}, the mock answers {got}"
            )))
        };
        match r {
            Record::ConfigRead {
                offset,
                size,
                value,
            } => {
                let got = self.dev.config_read(*offset, *size)?;
                if got != *value {
                    return differs(format!("{value:#x}"), format!("{got:#x}"));
                }
            }
            Record::Read {
                bar,
                offset,
                width,
                value,
            } => {
                let b = self.bar(*bar)?;
                let got = match width {
                    1 => u64::from(b.read8(*offset)?),
                    8 => b.read64(*offset)?,
                    _ => u64::from(b.read32(*offset)?),
                };
                if got != *value {
                    return differs(format!("{value:#x}"), format!("{got:#x}"));
                }
            }
            Record::ReadBytes { bar, offset, data } => {
                let mut buf = vec![0; data.len()];
                self.bar(*bar)?.read_bytes(*offset, &mut buf)?;
                if buf != *data {
                    let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
                    return differs(hex(data), hex(&buf));
                }
            }
            Record::ReadDigest {
                bar,
                offset,
                len,
                digest: want,
            } => {
                let n = usize::try_from(*len).unwrap_or(usize::MAX);
                let b = self.bar(*bar)?;
                if n as u64 > b.len() {
                    return differs(format!("{len} bytes"), "a shorter BAR".into());
                }
                let mut buf = vec![0; n];
                b.read_bytes(*offset, &mut buf)?;
                let got = digest(&buf);
                if got != *want {
                    return differs(format!("digest {want:016x}"), format!("digest {got:016x}"));
                }
            }
            Record::SysRead { id, offset, data } => {
                let mut buf = vec![0; data.len()];
                self.sysmem(*id)?.read_bytes(*offset, &mut buf)?;
                if buf != *data {
                    let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
                    return differs(hex(data), hex(&buf));
                }
            }
            Record::SysReadDigest {
                id,
                offset,
                len,
                digest: want,
            } => {
                let mem = self.sysmem(*id)?;
                let n = usize::try_from(*len).unwrap_or(usize::MAX);
                if offset.saturating_add(*len) > mem.len() as u64 {
                    return differs(format!("{len} bytes"), "a shorter allocation".into());
                }
                let mut buf = vec![0; n];
                mem.read_bytes(*offset, &mut buf)?;
                let got = digest(&buf);
                if got != *want {
                    return differs(format!("digest {want:016x}"), format!("digest {got:016x}"));
                }
            }
            _ => {}
        }
        Ok(Seen::Same)
    }

    /// Do what a non-read record did.
    fn apply(&mut self, r: &Record) -> am_driver::Result<()> {
        match r {
            Record::ConfigWrite {
                offset,
                size,
                value,
            } => self.dev.config_write(*offset, *size, *value),
            Record::Write {
                bar,
                offset,
                width,
                value,
                alloc,
            } => {
                let v = if *alloc {
                    self.translate(*value, *width)
                } else {
                    *value
                };
                let b = self.bar(*bar)?;
                match width {
                    1 => b.write8(*offset, v as u8),
                    8 => b.write64(*offset, v),
                    _ => b.write32(*offset, v as u32),
                }
            }
            Record::WriteBytes { bar, offset, data } => self.bar(*bar)?.write_bytes(*offset, data),
            Record::SysMap {
                id,
                size,
                contiguous,
                pages,
            } => {
                let mem = self
                    .dev
                    .alloc_sysmem(usize::try_from(*size).unwrap_or(usize::MAX), *contiguous)?;
                for (old, new) in pages.iter().zip(mem.bus_addrs()) {
                    self.pages.insert(old & 0xffff_ffff, *new);
                }
                self.mem.insert(*id, mem);
                Ok(())
            }
            Record::SysWrite { id, offset, data } => self.sysmem(*id)?.write_bytes(*offset, data),
            Record::Reset => self.dev.reset(),
            Record::ResizeBar { bar } => self.dev.resize_bar(*bar),
            // Interrupts, phase marks, polls announced, mailbox events and discovery say
            // what happened; there is nothing to do again.
            _ => Ok(()),
        }
    }
}

/// A trace whose system-memory accesses name an allocation it has not mapped is corrupt,
/// not a device that answers differently.
fn check_allocations(trace: &Trace) -> anyhow::Result<()> {
    let mut mapped = std::collections::BTreeSet::new();
    for (i, r) in trace.records.iter().enumerate() {
        match r {
            Record::SysMap { id, .. } => {
                mapped.insert(*id);
            }
            Record::SysWrite { id, .. }
            | Record::SysRead { id, .. }
            | Record::SysReadDigest { id, .. }
                if !mapped.contains(id) =>
            {
                bail!("record {i} uses system-memory allocation #{id} before any map of it")
            }
            _ => {}
        }
    }
    Ok(())
}

/// Replay `trace` on `dev` (a fresh device): the first divergence, or none.
pub fn replay(trace: &Trace, dev: &dyn PciDevice) -> anyhow::Result<Outcome> {
    check_allocations(trace)?;
    let names = Names::of(trace);
    let phase = phases(trace);
    let mut rp = Replayer {
        dev,
        bars: BTreeMap::new(),
        pages: BTreeMap::new(),
        mem: BTreeMap::new(),
    };
    let mut compared = 0;
    let records = &trace.records;
    let diverge = |i: usize, what: String| {
        let register = match records.get(i) {
            Some(
                Record::Read { bar, offset, .. }
                | Record::Write { bar, offset, .. }
                | Record::ReadBytes { bar, offset, .. }
                | Record::ReadDigest { bar, offset, .. }
                | Record::WriteBytes { bar, offset, .. },
            ) => names.label(*bar, *offset),
            Some(Record::ConfigRead { offset, .. } | Record::ConfigWrite { offset, .. }) => {
                format!("config {offset:#x}")
            }
            Some(Record::Refused { access, .. }) => access.clone(),
            Some(
                Record::SysWrite { id, offset, .. }
                | Record::SysRead { id, offset, .. }
                | Record::SysReadDigest { id, offset, .. },
            ) => format!("sysmem #{id}+{offset:#x}"),
            _ => String::new(),
        };
        Divergence {
            record: i,
            phase: phase.get(i).cloned().unwrap_or_default(),
            register,
            what,
        }
    };
    let done = |i: usize, compared: usize, d: Option<Divergence>| Outcome {
        records: i,
        reads_compared: compared,
        divergence: d,
    };
    let mut i = 0;
    while let Some(r) = records.get(i) {
        let refused_next = matches!(records.get(i + 1), Some(Record::Refused { .. }));
        if let Record::Refused { message, .. } = r {
            // A refused write is recorded before its refusal, and went through on the mock
            // (had it failed, both records were skipped). A refused read left no record of
            // its own to do again.
            let wrote = matches!(
                i.checked_sub(1).and_then(|p| records.get(p)),
                Some(Record::Write { .. } | Record::WriteBytes { .. } | Record::ConfigWrite { .. })
            );
            if wrote {
                let what =
                    format!("the traced device refused this access ({message}); the mock took it");
                return Ok(done(i + 1, compared, Some(diverge(i, what))));
            }
            i += 1;
            continue;
        }
        if place(r).is_some() {
            // A read the driver announced as a poll is one even when it was satisfied at
            // once: the mock may take longer than the traced device did.
            // A read of system memory is one too: only the device's DMA changes it between
            // the CPU's own writes (replayed in order), so a value not there yet is the
            // device's pace — a client that marks nothing may have found a fence already
            // signalled where the mock is still working.
            let announced = match (i.checked_sub(1).and_then(|p| records.get(p)), place(r)) {
                (Some(Record::Poll { bar, offset, .. }), Some(Place::Bar(b, o, 4))) => {
                    *bar == b && *offset == o
                }
                (_, Some(Place::Sys(..))) => true,
                _ => false,
            };
            let (len, last) = match poll_at(records, i).or(announced.then_some((1, 1))) {
                Some((period, len)) => (len, Some(period)),
                None => (1, None),
            };
            let result = match last {
                None => rp.read(r),
                Some(period) => {
                    // Look until the last read of the poll finds what the trace's did; the
                    // reads on the way are the device's timing, not its answers.
                    let final_index = i + len - 1;
                    let final_rec = records.get(final_index).unwrap_or(r);
                    let final_place = place(final_rec);
                    let start = Instant::now();
                    let mut k = 0;
                    loop {
                        let rec = records.get(i + (k % period)).unwrap_or(r);
                        k += 1;
                        if place(rec) != final_place {
                            // Read for the device's sake (it may move on when looked at);
                            // what it answers is timing.
                            if let Err(e) = rp.read(rec) {
                                break Err(e);
                            }
                            continue;
                        }
                        match rp.read(final_rec) {
                            Ok(Seen::Same) => break Ok(Seen::Same),
                            Err(e) => break Err(e),
                            Ok(Seen::Differs(what)) if start.elapsed() > POLL_LIMIT => {
                                let what = format!(
                                    "timeout: the poll did not end within {POLL_LIMIT:?}: {what}"
                                );
                                let d = diverge(final_index, what);
                                return Ok(done(final_index + 1, compared, Some(d)));
                            }
                            Ok(Seen::Differs(_)) => {}
                        }
                    }
                }
            };
            match result {
                Ok(Seen::Same) => compared += 1,
                Ok(Seen::Differs(what)) => {
                    return Ok(done(i + 1, compared, Some(diverge(i + len - 1, what))));
                }
                Err(_) if refused_next => {
                    i += 2;
                    continue;
                }
                Err(e) => {
                    return Ok(done(
                        i + 1,
                        compared,
                        Some(diverge(i, format!("refused: {e}"))),
                    ));
                }
            }
            i += len;
            continue;
        }
        match rp.apply(r) {
            Ok(()) => i += 1,
            Err(_) if refused_next => i += 2,
            Err(e) => {
                return Ok(done(
                    i + 1,
                    compared,
                    Some(diverge(i, format!("refused: {e}"))),
                ));
            }
        }
    }
    Ok(done(records.len(), compared, None))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // unwrap is how a test says "this must work"

    use std::path::Path;

    use am_driver::trace::{Header, TracingDevice};
    use am_driver::{AmDevice, BarInfo, Options, Result};
    use am_mock::MockGpu;

    use super::*;

    /// A driver boot of a fresh `mock:navi31`, recorded to `path`.
    fn record_boot(path: &Path) -> Trace {
        let gpu = MockGpu::new("navi31").unwrap();
        let header = Header {
            device: gpu.name().to_string(),
            backend: "mock".into(),
            profile: "navi31".into(),
            command: "replay test".into(),
        };
        let traced = Arc::new(TracingDevice::create(gpu.open(), path, &header).unwrap());
        let mut opts = Options::from_env("test").unwrap();
        opts.force_reset = false;
        opts.power_limit_w = None;
        opts.timeouts.mode1_settle = Duration::ZERO;
        let dev = AmDevice::open_with(traced.clone(), opts).unwrap();
        dev.fini().unwrap();
        traced.flush().unwrap();
        Trace::read(path).unwrap()
    }

    /// A mock whose BAR5 answers `offset` with one bit flipped: the device changed on
    /// purpose.
    struct Altered {
        inner: Arc<dyn PciDevice>,
        offset: u64,
    }

    struct AlteredBar {
        inner: Arc<dyn Bar>,
        offset: u64,
    }

    impl Bar for AlteredBar {
        fn len(&self) -> u64 {
            self.inner.len()
        }
        fn read32(&self, offset: u64) -> Result<u32> {
            let v = self.inner.read32(offset)?;
            Ok(if offset == self.offset { v ^ 1 } else { v })
        }
        fn write32(&self, offset: u64, value: u32) -> Result<()> {
            self.inner.write32(offset, value)
        }
        fn read_bytes(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
            self.inner.read_bytes(offset, buf)
        }
        fn write_bytes(&self, offset: u64, data: &[u8]) -> Result<()> {
            self.inner.write_bytes(offset, data)
        }
        fn indexed(&self, steps: &[am_driver::IndexStep]) -> Result<u32> {
            am_driver::pci::plain_index_steps(self, steps)
        }
    }

    impl PciDevice for Altered {
        fn name(&self) -> &str {
            self.inner.name()
        }
        fn backend(&self) -> &'static str {
            "mock"
        }
        fn config_read(&self, offset: u16, size: u8) -> Result<u32> {
            self.inner.config_read(offset, size)
        }
        fn config_write(&self, offset: u16, size: u8, value: u32) -> Result<()> {
            self.inner.config_write(offset, size, value)
        }
        fn bar_info(&self, index: u8) -> Result<BarInfo> {
            self.inner.bar_info(index)
        }
        fn bar(&self, index: u8) -> Result<Arc<dyn Bar>> {
            let bar = self.inner.bar(index)?;
            Ok(if index == 5 {
                Arc::new(AlteredBar {
                    inner: bar,
                    offset: self.offset,
                })
            } else {
                bar
            })
        }
        fn resize_bar(&self, index: u8) -> Result<()> {
            self.inner.resize_bar(index)
        }
        fn alloc_sysmem(&self, size: usize, contiguous: bool) -> Result<Arc<dyn SysMem>> {
            self.inner.alloc_sysmem(size, contiguous)
        }
        fn reset(&self) -> Result<()> {
            self.inner.reset()
        }
    }

    #[test]
    fn a_recorded_boot_replays_on_the_same_mock_and_a_changed_register_is_found() {
        let path = std::env::temp_dir().join(format!("am-replay-{}.amtrace", std::process::id()));
        let trace = record_boot(&path);
        let _ = std::fs::remove_file(&path);
        let kinds = |f: fn(&Record) -> bool| trace.records.iter().filter(|r| f(r)).count();
        assert!(
            kinds(|r| matches!(r, Record::Phase { .. })) >= 8,
            "phase marks"
        );
        assert!(
            kinds(|r| matches!(r, Record::Discovery { .. })) == 1,
            "discovery"
        );
        assert!(
            kinds(|r| matches!(r, Record::Mailbox { .. })) > 0,
            "mailbox events"
        );
        assert!(
            kinds(|r| matches!(r, Record::Poll { .. })) > 0,
            "poll marks"
        );

        let fresh = MockGpu::new("navi31").unwrap();
        let same = replay(&trace, &*fresh.open()).unwrap();
        assert_eq!(same.divergence, None, "the same mock answers the same");
        assert_eq!(same.records, trace.records.len());

        // The first plain read of BAR5 in the GMC phase: a register whose first read in the
        // whole trace is a plain read (not a poll, where a changed bit would be a timeout).
        let phase = phases(&trace);
        let first_read = |offset: u64| {
            trace
                .records
                .iter()
                .position(|r| matches!(r, Record::Read { bar: 5, offset: o, .. } if *o == offset))
        };
        let (offset, expected) = (0..trace.records.len())
            .filter(|&i| phase[i] == "gmc")
            .find_map(|i| match &trace.records[i] {
                Record::Read {
                    bar: 5,
                    offset,
                    width: 4,
                    ..
                } => {
                    let first = first_read(*offset)?;
                    poll_at(&trace.records, first)
                        .is_none()
                        .then_some((*offset, first))
                }
                _ => None,
            })
            .expect("the GMC phase reads a register");
        let altered = Altered {
            inner: MockGpu::new("navi31").unwrap().open(),
            offset,
        };
        let out = replay(&trace, &altered).unwrap();
        let d = out.divergence.expect("the altered register is found");
        assert_eq!(d.record, expected);
        assert_eq!(d.phase, phase[expected]);
        assert_eq!(d.register, Names::of(&trace).label(5, offset));
        assert!(d.what.starts_with("the trace read"), "{}", d.what);
    }

    /// tinygrad 0.14.0's run on `mock:navi31` (boot, one kernel, teardown), recorded with
    /// `am serve --trace` (tests/traces/README.md).
    fn tinygrad_trace() -> Trace {
        let path =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/traces/tinygrad-navi31.amtrace.zst");
        Trace::read(&path).unwrap()
    }

    #[test]
    fn a_wrong_register_answer_is_the_first_divergence_of_tinygrads_run() {
        let trace = tinygrad_trace();
        let names = Names::of(&trace);
        // The first register tinygrad reads at a plain read (not a poll, where a changed
        // bit would be a timeout): the mock answers it with bit 0 flipped.
        let (expected, offset) = (0..trace.records.len())
            .find_map(|i| match &trace.records[i] {
                Record::Read {
                    bar: 5,
                    offset,
                    width: 4,
                    ..
                } if names.get(5, *offset).is_some() && poll_at(&trace.records, i).is_none() => {
                    Some((i, *offset))
                }
                _ => None,
            })
            .expect("tinygrad reads a named register");
        let altered = Altered {
            inner: MockGpu::new("navi31").unwrap().open(),
            offset,
        };
        let out = replay(&trace, &altered).unwrap();
        let d = out.divergence.expect("the altered register is found");
        assert_eq!(d.record, expected, "{d:?}");
        assert_eq!(d.register, names.label(5, offset));
        assert!(!d.register.starts_with("BAR"), "named: {}", d.register);
        assert!(d.what.starts_with("the trace read"), "{}", d.what);
        assert_eq!(out.records, expected + 1, "replayed up to the divergence");
    }

    /// A trace of a fresh mock's boot-time accesses, with `records` after its first.
    fn trace_of(records: Vec<Record>) -> Trace {
        Trace {
            header: Header {
                device: "mock:navi31:0".into(),
                backend: "mock".into(),
                profile: "navi31".into(),
                command: "hand-made".into(),
            },
            records,
        }
    }

    #[test]
    fn refusals_agree_or_are_the_divergence() {
        let gpu = MockGpu::new("navi31").unwrap();
        let bar5 = gpu.open().bar(5).unwrap().len();
        // Past the end of BAR5: the mock refuses a write there, as the traced device did.
        let outside = Record::Write {
            bar: 5,
            offset: bar5,
            width: 4,
            value: 1,
            alloc: false,
        };
        let refused = |what: &str| Record::Refused {
            access: format!("{what} 4 bytes at BAR5+{bar5:#x}"),
            message: "out of range".into(),
        };
        let both = trace_of(vec![outside.clone(), refused("write")]);
        let out = replay(&both, &*MockGpu::new("navi31").unwrap().open()).unwrap();
        assert_eq!(out.divergence, None, "both refuse: {out:?}");
        assert_eq!(out.records, 2);

        // A read the traced device refused left no record of its own: nothing to compare.
        let read_refused = trace_of(vec![refused("read")]);
        let out = replay(&read_refused, &*MockGpu::new("navi31").unwrap().open()).unwrap();
        assert_eq!(out.divergence, None, "{out:?}");

        // The traced device refused a write the mock takes.
        let taken = trace_of(vec![
            Record::Write {
                bar: 0,
                offset: 0x1000,
                width: 4,
                value: 1,
                alloc: false,
            },
            Record::Refused {
                access: "write 4 bytes at BAR0+0x1000".into(),
                message: "the device is gone".into(),
            },
        ]);
        let out = replay(&taken, &*MockGpu::new("navi31").unwrap().open()).unwrap();
        let d = out
            .divergence
            .expect("the mock took what the traced device refused");
        assert_eq!(d.record, 1);
        assert_eq!(d.register, "write 4 bytes at BAR0+0x1000");
        assert_eq!(
            d.what,
            "the traced device refused this access (the device is gone); the mock took it"
        );

        // The mock refuses a read the traced device answered.
        let answered = trace_of(vec![Record::Read {
            bar: 5,
            offset: bar5,
            width: 4,
            value: 0,
        }]);
        let out = replay(&answered, &*MockGpu::new("navi31").unwrap().open()).unwrap();
        let d = out
            .divergence
            .expect("the mock refused what the traced device answered");
        assert_eq!(d.record, 0);
        assert_eq!(d.register, format!("BAR5+{bar5:#x}"));
        assert!(d.what.starts_with("refused: "), "{}", d.what);
    }
}
