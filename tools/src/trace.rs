//! `am trace show FILE [--json]` and `am trace diff A B [--json]`: read access traces
//! (docs/TRACE.md), with register names from the discovery table the trace carries.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use am_driver::regs::{RegName, address_names};
use am_driver::trace::{Record, Trace, discovery_of};
use serde::Serialize;
use serde_json::json;

/// `am trace …`
#[derive(clap::Subcommand, Debug)]
pub enum TraceCommand {
    /// Print a trace: one line per record, registers by name where the trace's discovery
    /// table names them.
    Show {
        /// The trace file.
        file: PathBuf,
        /// One JSON object per record instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Compare two traces by phase and IP block: registers written by one side only,
    /// different final values, different order across a wait, different polls.
    Diff {
        /// The first trace.
        a: PathBuf,
        /// The second trace.
        b: PathBuf,
        /// A JSON report instead of text.
        #[arg(long)]
        json: bool,
    },
}

/// Run `am trace`.
pub fn run(cmd: TraceCommand) -> anyhow::Result<std::process::ExitCode> {
    match cmd {
        TraceCommand::Show { file, json } => {
            let trace = Trace::read(&file)?;
            let out = show(&trace, json);
            print!("{out}");
            Ok(std::process::ExitCode::SUCCESS)
        }
        TraceCommand::Diff { a, b, json } => {
            let (ta, tb) = (Trace::read(&a)?, Trace::read(&b)?);
            let diffs = diff(&ta, &tb);
            if json {
                let report = json!({ "a": a, "b": b, "differences": diffs });
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                print!("{}", diff_text(&a, &b, &diffs));
            }
            // Like diff(1): 1 when the traces differ.
            Ok(if diffs.is_empty() {
                std::process::ExitCode::SUCCESS
            } else {
                std::process::ExitCode::from(1)
            })
        }
    }
}

/// Register names of a trace: BAR5 dword addresses resolved with the first discovery
/// table it carries.
pub struct Names(BTreeMap<u64, RegName>);

impl Names {
    /// The names a trace's first discovery record gives (none without one).
    pub fn of(trace: &Trace) -> Self {
        let ips = trace.records.iter().find_map(|r| match r {
            Record::Discovery { ips } => Some(ips),
            _ => None,
        });
        Names(ips.map_or_else(BTreeMap::new, |ips| {
            address_names(&discovery_of(&trace.header.device, ips))
        }))
    }

    /// The register at a byte offset of a BAR, if it is a named BAR5 register.
    pub fn get(&self, bar: u8, offset: u64) -> Option<&RegName> {
        (bar == 5 && offset.is_multiple_of(4))
            .then(|| self.0.get(&(offset / 4)))
            .flatten()
    }

    /// `GC[0] GRBM_STATUS`, or `BAR5+0x1234` for an unnamed place.
    pub fn label(&self, bar: u8, offset: u64) -> String {
        match self.get(bar, offset) {
            Some(n) => format!("{}[{}] {}", n.block, n.instance, n.name),
            None => format!("BAR{bar}+{offset:#x}"),
        }
    }
}

/// The phase each record belongs to: the name of the next phase mark at or after it, or
/// `(after the last mark)`; every record is `(whole run)` in a trace without marks.
pub fn phases(trace: &Trace) -> Vec<String> {
    let mut out = vec![String::new(); trace.records.len()];
    let mut current = if trace
        .records
        .iter()
        .any(|r| matches!(r, Record::Phase { .. }))
    {
        "(after the last mark)".to_string()
    } else {
        "(whole run)".to_string()
    };
    for (i, r) in trace.records.iter().enumerate().rev() {
        if let Record::Phase { name } = r {
            current = name.clone();
        }
        if let Some(slot) = out.get_mut(i) {
            slot.clone_from(&current);
        }
    }
    out
}

/// A 64-bit write to BAR2 rings a doorbell; anything else is a write.
fn write_kind(bar: u8, width: u8) -> &'static str {
    if bar == 2 && width == 8 {
        "doorbell"
    } else {
        "write"
    }
}

fn width_hex(width: u8, v: u64) -> String {
    format!("{v:#0w$x}", w = usize::from(width) * 2 + 2)
}

/// One record as a line of text.
pub fn describe(names: &Names, r: &Record) -> String {
    match r {
        Record::ConfigRead {
            offset,
            size,
            value,
        } => format!("config read  {offset:#05x}/{size} = {value:#x}"),
        Record::ConfigWrite {
            offset,
            size,
            value,
        } => format!("config write {offset:#05x}/{size} = {value:#x}"),
        Record::Read {
            bar,
            offset,
            width,
            value,
        } => format!(
            "read  {} = {}",
            names.label(*bar, *offset),
            width_hex(*width, *value)
        ),
        Record::Write {
            bar,
            offset,
            width,
            value,
            alloc,
        } => format!(
            "{} {} = {}{}",
            write_kind(*bar, *width),
            names.label(*bar, *offset),
            width_hex(*width, *value),
            if *alloc { " (allocation)" } else { "" }
        ),
        Record::ReadBytes { bar, offset, data } => {
            let hex: String = data.iter().map(|b| format!("{b:02x}")).collect();
            format!("read  BAR{bar}+{offset:#x} {} bytes: {hex}", data.len())
        }
        Record::ReadDigest {
            bar,
            offset,
            len,
            digest,
        } => format!("read  BAR{bar}+{offset:#x} {len} bytes, digest {digest:016x}"),
        Record::WriteBytes { bar, offset, data } => {
            format!("write BAR{bar}+{offset:#x} {} bytes", data.len())
        }
        Record::Refused { access, message } => format!("refused {access}: {message}"),
        Record::SysMap {
            id,
            size,
            contiguous,
            pages,
        } => format!(
            "sysmem map #{id}: {size:#x} bytes{}, first page at {:#x}",
            if *contiguous { " contiguous" } else { "" },
            pages.first().copied().unwrap_or(0)
        ),
        Record::Reset => "function-level reset".into(),
        Record::ResizeBar { bar } => format!("resize BAR{bar}"),
        Record::WaitIrq { timeout_us, fired } => format!(
            "interrupt wait up to {timeout_us} us: {}",
            if *fired { "fired" } else { "timed out" }
        ),
        Record::Phase { name } => format!("── end of phase {name} ──"),
        Record::Poll {
            bar,
            offset,
            mask,
            want,
        } => format!(
            "poll  {} until & {mask:#x} == {want:#x}",
            names.label(*bar, *offset)
        ),
        Record::Mailbox {
            block,
            name,
            message,
            param,
            response,
        } => format!("{block} {name} ({message:#x}, param {param:#x}) -> {response:#x}"),
        Record::Discovery { ips } => format!("discovery: {} IP instances", ips.len()),
        Record::SysWrite { id, offset, data } => {
            format!("write sysmem #{id}+{offset:#x} {} bytes", data.len())
        }
        Record::SysRead { id, offset, data } => {
            let hex: String = data.iter().map(|b| format!("{b:02x}")).collect();
            format!("read  sysmem #{id}+{offset:#x} {} bytes: {hex}", data.len())
        }
        Record::SysReadDigest {
            id,
            offset,
            len,
            digest,
        } => format!("read  sysmem #{id}+{offset:#x} {len} bytes, digest {digest:016x}"),
    }
}

/// The record as JSON: its kind and fields, the register name where known.
fn record_json(names: &Names, index: usize, phase: &str, r: &Record) -> serde_json::Value {
    let reg = |bar: u8, offset: u64| {
        names
            .get(bar, offset)
            .map(|n| json!({ "name": n.name, "ip": n.ip, "instance": n.instance }))
    };
    let mut v = match r {
        Record::ConfigRead {
            offset,
            size,
            value,
        } => json!({"kind": "config_read", "offset": offset, "size": size, "value": value}),
        Record::ConfigWrite {
            offset,
            size,
            value,
        } => json!({"kind": "config_write", "offset": offset, "size": size, "value": value}),
        Record::Read {
            bar,
            offset,
            width,
            value,
        } => json!({"kind": "read", "bar": bar, "offset": offset, "width": width,
                    "value": value, "register": reg(*bar, *offset)}),
        Record::Write {
            bar,
            offset,
            width,
            value,
            alloc,
        } => json!({"kind": write_kind(*bar, *width),
                    "bar": bar, "offset": offset, "width": width, "value": value,
                    "allocation_dependent": alloc, "register": reg(*bar, *offset)}),
        Record::ReadBytes { bar, offset, data } => {
            json!({"kind": "read_bytes", "bar": bar, "offset": offset, "data": data})
        }
        Record::ReadDigest {
            bar,
            offset,
            len,
            digest,
        } => json!({"kind": "read_digest", "bar": bar, "offset": offset, "len": len,
                    "digest": format!("{digest:016x}")}),
        Record::WriteBytes { bar, offset, data } => {
            json!({"kind": "write_bytes", "bar": bar, "offset": offset, "len": data.len()})
        }
        Record::Refused { access, message } => {
            json!({"kind": "refused", "access": access, "message": message})
        }
        Record::SysMap {
            id,
            size,
            contiguous,
            pages,
        } => json!({"kind": "sysmem_map", "id": id, "size": size, "contiguous": contiguous,
                    "pages": pages}),
        Record::Reset => json!({"kind": "reset"}),
        Record::ResizeBar { bar } => json!({"kind": "resize_bar", "bar": bar}),
        Record::WaitIrq { timeout_us, fired } => {
            json!({"kind": "wait_irq", "timeout_us": timeout_us, "fired": fired})
        }
        Record::Phase { name } => json!({"kind": "phase_end", "name": name}),
        Record::Poll {
            bar,
            offset,
            mask,
            want,
        } => json!({"kind": "poll", "bar": bar, "offset": offset, "mask": mask, "want": want,
                    "register": reg(*bar, *offset)}),
        Record::Mailbox {
            block,
            name,
            message,
            param,
            response,
        } => json!({"kind": "mailbox", "block": block, "name": name, "message": message,
                    "param": param, "response": response}),
        Record::Discovery { ips } => {
            let ips: Vec<serde_json::Value> = ips
                .iter()
                .map(|ip| {
                    let (major, minor, rev) = ip.version;
                    json!({"hw_id": ip.hw_id, "instance": ip.instance,
                           "version": format!("{major}.{minor}.{rev}"), "bases": ip.bases})
                })
                .collect();
            json!({"kind": "discovery", "ips": ips})
        }
        Record::SysWrite { id, offset, data } => {
            json!({"kind": "sysmem_write", "id": id, "offset": offset, "len": data.len()})
        }
        Record::SysRead { id, offset, data } => {
            json!({"kind": "sysmem_read", "id": id, "offset": offset, "data": data})
        }
        Record::SysReadDigest {
            id,
            offset,
            len,
            digest,
        } => json!({"kind": "sysmem_read_digest", "id": id, "offset": offset, "len": len,
                    "digest": format!("{digest:016x}")}),
    };
    if let Some(o) = v.as_object_mut() {
        o.insert("index".into(), json!(index));
        o.insert("phase".into(), json!(phase));
    }
    v
}

/// `am trace show`: the header, then one line (or JSON object) per record.
pub fn show(trace: &Trace, as_json: bool) -> String {
    let names = Names::of(trace);
    let phase = phases(trace);
    let h = &trace.header;
    if as_json {
        let records: Vec<_> = trace
            .records
            .iter()
            .enumerate()
            .map(|(i, r)| record_json(&names, i, phase.get(i).map_or("", |p| p), r))
            .collect();
        let doc = json!({
            "device": h.device, "backend": h.backend, "profile": h.profile,
            "command": h.command, "records": records,
        });
        return serde_json::to_string_pretty(&doc).unwrap_or_default() + "\n";
    }
    let mut out = format!(
        "trace of {} ({} backend{}), recorded by `{}`: {} records\n",
        h.device,
        h.backend,
        if h.profile.is_empty() {
            String::new()
        } else {
            format!(", profile {}", h.profile)
        },
        h.command,
        trace.records.len()
    );
    for (i, r) in trace.records.iter().enumerate() {
        out += &format!("{i:>7}  {}\n", describe(&names, r));
    }
    out
}

/// What two traces do differently (one finding of `am trace diff`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Difference {
    /// A phase one trace has and the other has not.
    PhaseOnlyIn {
        /// `a` or `b`.
        side: &'static str,
        /// The phase.
        phase: String,
    },
    /// A register one side writes in a phase and the other does not.
    WrittenByOneSide {
        /// The phase.
        phase: String,
        /// `a` or `b`: who writes it.
        side: &'static str,
        /// The register.
        register: String,
        /// The last value that side writes.
        value: u64,
    },
    /// Both write a register, last with different values.
    FinalValue {
        /// The phase.
        phase: String,
        /// The register.
        register: String,
        /// A's last value.
        a: u64,
        /// B's last value.
        b: u64,
    },
    /// A register is written on different sides of a wait (poll) in the two traces.
    OrderAcrossWait {
        /// The phase.
        phase: String,
        /// The register written.
        register: String,
        /// The wait A writes it after (`start` before any).
        a_after: String,
        /// The wait B writes it after.
        b_after: String,
    },
    /// Both poll a register, for different conditions.
    PollCondition {
        /// The phase.
        phase: String,
        /// The register polled.
        register: String,
        /// A's condition.
        a: String,
        /// B's condition.
        b: String,
    },
    /// A register only one side polls in a phase.
    PolledByOneSide {
        /// The phase.
        phase: String,
        /// `a` or `b`.
        side: &'static str,
        /// The register.
        register: String,
    },
}

/// A register access reduced to what the comparison needs.
#[derive(Clone, Debug)]
enum Access {
    Write {
        reg: String,
        value: u64,
        alloc: bool,
    },
    Read {
        reg: String,
        value: u64,
    },
    Poll {
        reg: String,
        mask: u32,
        want: u32,
    },
}

/// One poll as a comparison sees it: the register and its condition (mask and wanted
/// value where the driver said so, else the value the last read found).
#[derive(Clone, Debug, PartialEq, Eq)]
struct PollSeen {
    reg: String,
    mask: Option<u32>,
    want: u64,
}

impl PollSeen {
    fn text(&self) -> String {
        match self.mask {
            Some(m) => format!("& {m:#x} == {:#x}", self.want),
            None => format!("until it reads {:#x}", self.want),
        }
    }
}

/// What one trace does in one phase.
#[derive(Default, Debug)]
struct PhaseSummary {
    /// Register → (last value written or None if allocation-dependent, the wait it is first
    /// written after).
    writes: BTreeMap<String, (Option<u64>, String)>,
    polls: BTreeMap<String, Vec<PollSeen>>,
}

/// The register (BAR5) accesses of a trace, by phase (in order of first appearance): VRAM
/// through BAR0 is each driver's own layout, and doorbells carry ring positions.
fn by_phase(trace: &Trace) -> Vec<(String, Vec<Access>)> {
    let names = Names::of(trace);
    let phase = phases(trace);
    let mut out: Vec<(String, Vec<Access>)> = vec![];
    for (i, r) in trace.records.iter().enumerate() {
        let p = phase.get(i).cloned().unwrap_or_default();
        if out.last().is_none_or(|(name, _)| *name != p) {
            out.push((p, vec![]));
        }
        let access = match r {
            Record::Read {
                bar, offset, value, ..
            } if *bar == 5 => Access::Read {
                reg: names.label(*bar, *offset),
                value: *value,
            },
            Record::Write {
                bar,
                offset,
                value,
                alloc,
                ..
            } if *bar == 5 => Access::Write {
                reg: names.label(*bar, *offset),
                value: *value,
                alloc: *alloc,
            },
            Record::Poll {
                bar,
                offset,
                mask,
                want,
            } => Access::Poll {
                reg: names.label(*bar, *offset),
                mask: *mask,
                want: *want,
            },
            _ => continue,
        };
        if let Some((_, list)) = out.last_mut() {
            list.push(access);
        }
    }
    out
}

/// Polls and writes of one phase. A poll is a driver poll mark, or a register read twice
/// or more in a row (what a client that marks nothing does when it waits). In a trace
/// without poll marks, a single read that finds what `other` (the other side's polls of the
/// phase) waits for on that register counts as a wait too: a wait satisfied at its first
/// read leaves one read, which nothing else tells from a plain read.
fn summarise(accesses: &[Access], other: Option<&BTreeMap<String, Vec<PollSeen>>>) -> PhaseSummary {
    let mut s = PhaseSummary::default();
    let mut after = "start".to_string();
    let mut i = 0;
    while i < accesses.len() {
        match &accesses[i] {
            Access::Write { reg, value, alloc } => {
                let entry = s.writes.entry(reg.clone()).or_insert((None, after.clone()));
                entry.0 = (!alloc).then_some(*value);
                i += 1;
            }
            Access::Poll { reg, mask, want } => {
                // The reads that follow are the poll's; the condition is the driver's.
                let mut j = i + 1;
                while matches!(accesses.get(j), Some(Access::Read { reg: r, .. }) if r == reg) {
                    j += 1;
                }
                s.polls.entry(reg.clone()).or_default().push(PollSeen {
                    reg: reg.clone(),
                    mask: Some(*mask),
                    want: u64::from(*want),
                });
                after = format!("wait on {reg}");
                i = j;
            }
            Access::Read { reg, value } => {
                let mut j = i + 1;
                let mut last = *value;
                while let Some(Access::Read { reg: r, value: v }) = accesses.get(j) {
                    if r != reg {
                        break;
                    }
                    last = *v;
                    j += 1;
                }
                let seen = PollSeen {
                    reg: reg.clone(),
                    mask: None,
                    want: last,
                };
                let waited_for = || {
                    other
                        .and_then(|o| o.get(reg))
                        .is_some_and(|polls| polls.iter().any(|p| same_poll(p, &seen)))
                };
                if j - i >= 2 || waited_for() {
                    s.polls.entry(reg.clone()).or_default().push(seen);
                    after = format!("wait on {reg}");
                }
                i = j;
            }
        }
    }
    s
}

/// Whether a trace carries driver poll marks (then every wait of its driver has one).
fn announces_polls(trace: &Trace) -> bool {
    trace
        .records
        .iter()
        .any(|r| matches!(r, Record::Poll { .. }))
}

/// Whether two polls of the same register wait for the same thing: equal conditions, or
/// the value one side ended on meets the other's mask and wanted value.
fn same_poll(a: &PollSeen, b: &PollSeen) -> bool {
    match (a.mask, b.mask) {
        (Some(ma), Some(mb)) => ma == mb && a.want == b.want,
        (Some(m), None) => b.want & u64::from(m) == a.want,
        (None, Some(m)) => a.want & u64::from(m) == b.want,
        (None, None) => a.want == b.want,
    }
}

/// `am trace diff`: the differences that matter between two traces.
pub fn diff(a: &Trace, b: &Trace) -> Vec<Difference> {
    let (pa, pb) = (by_phase(a), by_phase(b));
    let marked = |p: &[(String, Vec<Access>)]| p.iter().any(|(n, _)| n != "(whole run)");
    // Phases align by name when both sides mark them; otherwise each side is one run.
    let flatten = |p: Vec<(String, Vec<Access>)>| {
        vec![(
            "(whole run)".to_string(),
            p.into_iter().flat_map(|(_, l)| l).collect::<Vec<_>>(),
        )]
    };
    let (pa, pb) = if marked(&pa) && marked(&pb) {
        (pa, pb)
    } else {
        (flatten(pa), flatten(pb))
    };
    let mut out = vec![];
    let names_b: BTreeSet<&String> = pb.iter().map(|(n, _)| n).collect();
    let names_a: BTreeSet<&String> = pa.iter().map(|(n, _)| n).collect();
    for (n, _) in &pa {
        if !names_b.contains(n) {
            out.push(Difference::PhaseOnlyIn {
                side: "a",
                phase: n.clone(),
            });
        }
    }
    for (n, _) in &pb {
        if !names_a.contains(n) {
            out.push(Difference::PhaseOnlyIn {
                side: "b",
                phase: n.clone(),
            });
        }
    }
    for (phase, la) in &pa {
        let Some((_, lb)) = pb.iter().find(|(n, _)| n == phase) else {
            continue;
        };
        // A side that marks its polls has announced every wait; one that marks none may
        // have waits that ended at their first read, seen through the other side's polls.
        let (mut sa, mut sb) = (summarise(la, None), summarise(lb, None));
        if !announces_polls(a) {
            sa = summarise(la, Some(&sb.polls));
        }
        if !announces_polls(b) {
            sb = summarise(lb, Some(&sa.polls));
        }
        compare_phase(phase, &sa, &sb, &mut out);
    }
    out
}

fn compare_phase(phase: &str, sa: &PhaseSummary, sb: &PhaseSummary, out: &mut Vec<Difference>) {
    let phase = phase.to_string();
    for (side, one, other) in [("a", sa, sb), ("b", sb, sa)] {
        for (reg, (value, _)) in &one.writes {
            if !other.writes.contains_key(reg) {
                out.push(Difference::WrittenByOneSide {
                    phase: phase.clone(),
                    side,
                    register: reg.clone(),
                    value: value.unwrap_or(0),
                });
            }
        }
        for reg in one.polls.keys() {
            if !other.polls.contains_key(reg) {
                out.push(Difference::PolledByOneSide {
                    phase: phase.clone(),
                    side,
                    register: reg.clone(),
                });
            }
        }
    }
    // Waits both sides make: a register written after different ones is written in another
    // order; waits only one side makes say nothing about order.
    let common_waits: BTreeSet<String> = sa
        .polls
        .keys()
        .filter(|r| sb.polls.contains_key(*r))
        .map(|r| format!("wait on {r}"))
        .chain(["start".to_string()])
        .collect();
    for (reg, (va, after_a)) in &sa.writes {
        let Some((vb, after_b)) = sb.writes.get(reg) else {
            continue;
        };
        if let (Some(va), Some(vb)) = (va, vb)
            && va != vb
        {
            out.push(Difference::FinalValue {
                phase: phase.clone(),
                register: reg.clone(),
                a: *va,
                b: *vb,
            });
        }
        if after_a != after_b && common_waits.contains(after_a) && common_waits.contains(after_b) {
            out.push(Difference::OrderAcrossWait {
                phase: phase.clone(),
                register: reg.clone(),
                a_after: after_a.clone(),
                b_after: after_b.clone(),
            });
        }
    }
    for (reg, polls_a) in &sa.polls {
        let Some(polls_b) = sb.polls.get(reg) else {
            continue;
        };
        // Each condition of one side must be met by some poll of the other.
        let unmatched_a = polls_a
            .iter()
            .find(|p| !polls_b.iter().any(|q| same_poll(p, q)));
        let unmatched_b = polls_b
            .iter()
            .find(|q| !polls_a.iter().any(|p| same_poll(p, q)));
        if let (Some(p), _) | (_, Some(p)) = (unmatched_a, unmatched_b) {
            let (pa, pb) = match unmatched_a {
                Some(_) => (p, polls_b.first().unwrap_or(p)),
                None => (polls_a.first().unwrap_or(p), p),
            };
            out.push(Difference::PollCondition {
                phase: phase.clone(),
                register: reg.clone(),
                a: pa.text(),
                b: pb.text(),
            });
        }
    }
}

/// The differences as text, one per line.
pub fn diff_text(a: &Path, b: &Path, diffs: &[Difference]) -> String {
    let mut out = format!("a: {}\nb: {}\n", a.display(), b.display());
    if diffs.is_empty() {
        out += "no differences that matter\n";
    }
    for d in diffs {
        out += &match d {
            Difference::PhaseOnlyIn { side, phase } => format!("phase {phase}: only in {side}"),
            Difference::WrittenByOneSide {
                phase,
                side,
                register,
                value,
            } => format!("[{phase}] {register}: written only by {side} (last {value:#x})"),
            Difference::FinalValue {
                phase,
                register,
                a,
                b,
            } => format!("[{phase}] {register}: final value a {a:#x}, b {b:#x}"),
            Difference::OrderAcrossWait {
                phase,
                register,
                a_after,
                b_after,
            } => {
                format!("[{phase}] {register}: written after {a_after} in a, after {b_after} in b")
            }
            Difference::PollCondition {
                phase,
                register,
                a,
                b,
            } => format!("[{phase}] poll of {register}: a waits {a}, b waits {b}"),
            Difference::PolledByOneSide {
                phase,
                side,
                register,
            } => format!("[{phase}] {register}: polled only by {side}"),
        };
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests;
