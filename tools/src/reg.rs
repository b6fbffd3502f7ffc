//! `am reg DEVICE PATTERN [--write VALUE | --set FIELD=V…] [--inst N] [--xcc N] [--aid N]`:
//! registers by name or glob, every field decoded; whole-value writes and read-modify-write
//! of fields; every live instance (XCCs, AIDs) unless one is chosen; registers past BAR5
//! through the RSMU window and other AIDs' copies through PCIE INDEX2, as the driver reaches
//! them.

use std::collections::BTreeSet;

use am_autogen::regs::RegIp;
use am_driver::HwIp;
use am_driver::regs::{Field, Register, Regs, select_table};
use anyhow::{Context, anyhow, bail};
use serde::Serialize;

use crate::inspect::{Target, parse_u64};

/// Arguments of `am reg`.
#[derive(Debug, clap::Args)]
pub struct RegArgs {
    /// Device: a PCI BDF, mock:PROFILE[:N] or remote:HOST:PORT[:N].
    pub device: String,
    /// Register name or glob, optionally with its IP: `GC:CP_HQD_*`, `'*RB_CNTL'`,
    /// `SCRATCH_REG7` (IPs: GC, MMHUB, OSSSYS, NBIO, MP0, MP1, HDP, SMUIO, SDMA).
    pub pattern: String,
    /// Write this whole value (one register only).
    #[arg(long, conflicts_with = "set")]
    pub write: Option<String>,
    /// Set a field (read-modify-write; repeat for several fields of one register).
    #[arg(long, value_name = "FIELD=VALUE")]
    pub set: Vec<String>,
    /// Only this instance of the register's block.
    #[arg(long)]
    pub inst: Option<u8>,
    /// Only this XCC (a GC instance).
    #[arg(long, conflicts_with = "inst")]
    pub xcc: Option<u8>,
    /// Reach the copy on this AID through PCIE INDEX2 (NBIO 7.9, MI300/MI350).
    #[arg(long)]
    pub aid: Option<u8>,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// The blocks with register tables and their table families (as the driver's `Regs`).
const BLOCKS: &[(HwIp, RegIp, &str)] = &[
    (HwIp::GC, RegIp::Gc, "GC"),
    (HwIp::MMHUB, RegIp::Mmhub, "MMHUB"),
    (HwIp::OSSSYS, RegIp::Osssys, "OSSSYS"),
    (HwIp::NBIO, RegIp::Nbio, "NBIO"),
    (HwIp::MP0, RegIp::Mp, "MP0"),
    (HwIp::MP1, RegIp::Mp, "MP1"),
    (HwIp::HDP, RegIp::Hdp, "HDP"),
    (HwIp::SMUIO, RegIp::Smuio, "SMUIO"),
    (HwIp::SDMA0, RegIp::Sdma, "SDMA"),
];

/// A register name of the device, with the block whose instances it has.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct RegName {
    /// Block label (`GC`, `MP1`, …).
    pub block: &'static str,
    /// Register name.
    pub name: &'static str,
    ip: HwIp,
    family: RegIp,
}

/// Every register name the device's discovered IP versions have. The shared `mp` tables
/// list MP0 and MP1 registers together: `MP1_*` belong to MP1, the rest to MP0.
pub fn all_names(regs: &Regs) -> Vec<RegName> {
    let mut out = vec![];
    for &(ip, family, block) in BLOCKS {
        let Some(version) = regs.version(ip) else {
            continue;
        };
        let Some(table) = select_table(family, version) else {
            continue;
        };
        for r in table.iter() {
            let name = r.name();
            let owner = match family {
                RegIp::Mp if name.starts_with("MP1") => HwIp::MP1,
                RegIp::Mp => HwIp::MP0,
                _ => ip,
            };
            if owner == ip {
                out.push(RegName {
                    block,
                    name,
                    ip,
                    family,
                });
            }
        }
    }
    out
}

/// Whether `name` matches the glob `pat` (`*` any run, `?` one character; any case).
pub fn glob(pat: &str, name: &str) -> bool {
    let (p, n): (Vec<char>, Vec<char>) = (
        pat.to_ascii_uppercase().chars().collect(),
        name.to_ascii_uppercase().chars().collect(),
    );
    let (mut pi, mut ni, mut star, mut mark) = (0, 0, None, 0);
    while ni < n.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == n[ni]) {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ni;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ni = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

fn levenshtein(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, &cb) in b.iter().enumerate() {
            let cost = usize::from(!ca.eq_ignore_ascii_case(&cb));
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// The names closest to `want` (glob characters dropped): by edit distance, ties by name.
pub fn nearest(names: &[RegName], want: &str, n: usize) -> Vec<String> {
    let want: String = want.chars().filter(|c| !matches!(c, '*' | '?')).collect();
    let mut scored: Vec<(usize, String)> = names
        .iter()
        .map(|r| {
            (
                levenshtein(&want, r.name),
                format!("{}:{}", r.block, r.name),
            )
        })
        .collect();
    scored.sort();
    scored.dedup();
    scored.into_iter().take(n).map(|(_, s)| s).collect()
}

/// Split `IP:GLOB` into the block label (if any) and the glob.
fn split_pattern(p: &str) -> anyhow::Result<(Option<&'static str>, &str)> {
    match p.split_once(':') {
        Some((ip, rest)) => {
            let up = ip.to_ascii_uppercase();
            let block = match up.as_str() {
                "MP" => "MP0",
                other => BLOCKS
                    .iter()
                    .map(|b| b.2)
                    .find(|&b| b == other)
                    .with_context(|| {
                        let known: Vec<&str> = BLOCKS.iter().map(|b| b.2).collect();
                        format!("{ip:?} is not an IP with registers ({})", known.join(", "))
                    })?,
            };
            Ok((Some(block), rest))
        }
        None => Ok((None, p)),
    }
}

/// One field of a register value.
#[derive(Debug, Serialize)]
pub struct FieldValue {
    /// Field name.
    pub name: &'static str,
    /// Lowest bit.
    pub shift: u8,
    /// Width in bits.
    pub width: u32,
    /// Its value.
    pub value: u32,
}

/// One register of one instance, read (and maybe written).
#[derive(Debug, Serialize)]
pub struct RegValue {
    /// `IP:NAME`.
    pub register: String,
    /// Block and version (`GC 11.0.0`).
    pub ip: String,
    /// Instance of the block (the XCC for GC, the AID for MMHUB on MI300).
    pub instance: u8,
    /// AID reached through PCIE INDEX2, if any.
    pub aid: Option<u8>,
    /// Dword address, hex.
    pub address: String,
    /// `direct` (BAR5), `RSMU` or `PCIE INDEX2`.
    pub access: &'static str,
    /// The value (after the write, when one was made), hex.
    pub value: String,
    /// The value before the write, hex.
    pub before: Option<String>,
    /// Every field of the value.
    pub fields: Vec<FieldValue>,
}

/// Fields by name, for registers whose names the tools take from the user (`am reg`) or
/// build at run time (`am ring`'s SDMA engines, `am vm`'s VM contexts); the driver names its
/// fields through the generated typed setters. Names as in `*_sh_mask.h`, any case.
pub trait ByName {
    /// The named field, or an error naming register, field and version.
    fn field_def(&self, name: &str) -> anyhow::Result<Field>;

    /// One field of a value.
    fn field(&self, value: u32, name: &str) -> anyhow::Result<u32> {
        Ok(self.field_def(name)?.get(value))
    }

    /// The bits the named fields cover.
    fn fields_mask(&self, names: &[&str]) -> anyhow::Result<u32> {
        names
            .iter()
            .try_fold(0, |m, n| Ok(m | self.field_def(n)?.mask))
    }

    /// The value with the named fields set, every other bit 0; a value wider than its field
    /// is an error.
    fn encode(&self, fields: &[(&str, u64)]) -> anyhow::Result<u32>;
}

impl ByName for Register<'_> {
    fn field_def(&self, name: &str) -> anyhow::Result<Field> {
        let def = self.def();
        let mut fields = def.fields();
        fields
            .find(|f| f.name.eq_ignore_ascii_case(name))
            .ok_or_else(|| {
                anyhow!(
                    "register {} on {} has no field {name}",
                    self.name(),
                    self.ip_label()
                )
            })
    }

    fn encode(&self, fields: &[(&str, u64)]) -> anyhow::Result<u32> {
        fields.iter().try_fold(0, |value, &(name, v)| {
            let f = self.field_def(name)?;
            // A value fits when it survives a trip through the field.
            match u32::try_from(v).ok().filter(|&v| f.get(f.set(0, v)) == v) {
                Some(v) => Ok(f.set(value, v)),
                None => bail!(
                    "value {v:#x} does not fit field {}.{} ({} bits) on {}",
                    self.name(),
                    f.name,
                    f.mask.count_ones(),
                    self.ip_label()
                ),
            }
        })
    }
}

fn fields_of(r: &Register<'_>, v: u32) -> Vec<FieldValue> {
    r.def()
        .fields()
        .map(|f| FieldValue {
            name: f.name,
            shift: f.shift,
            width: f.mask.count_ones(),
            value: f.get(v),
        })
        .collect()
}

/// What a write asks for.
enum Write {
    Value(u32),
    Fields(Vec<(String, u64)>),
}

fn parse_write(args: &RegArgs) -> anyhow::Result<Option<Write>> {
    if let Some(v) = &args.write {
        let v = parse_u64(v)?;
        let v =
            u32::try_from(v).with_context(|| format!("--write {v:#x} is wider than 32 bits"))?;
        return Ok(Some(Write::Value(v)));
    }
    if args.set.is_empty() {
        return Ok(None);
    }
    let fields = args
        .set
        .iter()
        .map(|s| {
            let (f, v) = s
                .split_once('=')
                .with_context(|| format!("--set {s:?}: write FIELD=VALUE"))?;
            Ok((f.trim().to_string(), parse_u64(v)?))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(Some(Write::Fields(fields)))
}

/// Read (and write) every register the arguments select.
pub fn access(t: &Target, args: &RegArgs) -> anyhow::Result<Vec<RegValue>> {
    let write = parse_write(args)?;
    let names = all_names(&t.regs);
    let (block, pat) = split_pattern(&args.pattern)?;
    let exact: Vec<&RegName> = names
        .iter()
        .filter(|r| block.is_none_or(|b| b == r.block) && r.name.eq_ignore_ascii_case(pat))
        .collect();
    let matched: Vec<&RegName> = if exact.is_empty() {
        names
            .iter()
            .filter(|r| block.is_none_or(|b| b == r.block) && glob(pat, r.name))
            .collect()
    } else {
        exact
    };
    if matched.is_empty() {
        let pool: Vec<RegName> = names
            .iter()
            .filter(|r| block.is_none_or(|b| b == r.block))
            .cloned()
            .collect();
        bail!(
            "{}: no register matches {:?}; nearest: {}",
            t.name(),
            args.pattern,
            nearest(&pool, pat, 5).join(", ")
        );
    }
    let distinct: BTreeSet<(&str, &str)> = matched.iter().map(|r| (r.block, r.name)).collect();
    if write.is_some() && distinct.len() > 1 {
        bail!(
            "{}: {:?} matches {} registers; a write names exactly one",
            t.name(),
            args.pattern,
            distinct.len()
        );
    }
    if args.xcc.is_some() && matched.iter().any(|r| r.ip != HwIp::GC) {
        bail!(
            "--xcc selects a GC instance; {:?} is not a GC register",
            args.pattern
        );
    }
    let pick = args.inst.or(args.xcc);
    let mut out = vec![];
    for rn in matched {
        if t.is_vf && matches!(rn.ip, HwIp::MP0 | HwIp::MP1) {
            bail!(
                "{}: {}:{} belongs to the PF: a VF may not touch the PSP and SMU (MP0/MP1) registers",
                t.name(),
                rn.block,
                rn.name
            );
        }
        let r = t.regs.named(rn.family, rn.name)?;
        let live = t.regs.instances(rn.ip);
        let instances: Vec<u8> = match pick {
            Some(i) if live.contains(&i) => vec![i],
            Some(i) => bail!(
                "{}: {} has no live instance {i} (live: {:?})",
                t.name(),
                r.ip_label(),
                live
            ),
            None => live.into_iter().collect(),
        };
        for inst in instances {
            out.push(one(t, &r, rn, inst, args.aid, write.as_ref())?);
        }
    }
    Ok(out)
}

fn one(
    t: &Target,
    r: &Register<'_>,
    rn: &RegName,
    inst: u8,
    aid: Option<u8>,
    write: Option<&Write>,
) -> anyhow::Result<RegValue> {
    let addr = r.addr(inst)?;
    let bar5_dwords = t.pci.bar_info(5)?.size / 4;
    let access = match aid {
        Some(_) => "PCIE INDEX2",
        None if addr >= bar5_dwords => "RSMU",
        None => "direct",
    };
    if t.is_vf && access != "direct" {
        bail!(
            "{}: {}:{} needs the {access} window, which belongs to the PF",
            t.name(),
            rn.block,
            rn.name
        );
    }
    if let Some(a) = aid
        && u64::from(a) >= t.discovery.aid_count().max(1) as u64
    {
        bail!(
            "{}: --aid {a}: the device has {} AID(s)",
            t.name(),
            t.discovery.aid_count().max(1)
        );
    }
    let read = || -> anyhow::Result<u32> {
        Ok(match aid {
            Some(a) => t.regs.rreg_pcie(addr, a)?,
            None => t.regs.rreg(addr)?,
        })
    };
    let store = |v: u32| -> anyhow::Result<()> {
        match aid {
            Some(a) => t.regs.wreg_pcie(addr, a, v)?,
            None => t.regs.wreg(addr, v)?,
        }
        Ok(())
    };
    let label = format!("{}:{}", rn.block, rn.name);
    let value = read().with_context(|| format!("reading {label} instance {inst}"))?;
    let (before, value) = match write {
        None => (None, value),
        Some(w) => {
            let new = match w {
                Write::Value(v) => *v,
                Write::Fields(fs) => {
                    let pairs: Vec<(&str, u64)> =
                        fs.iter().map(|(n, v)| (n.as_str(), *v)).collect();
                    let names: Vec<&str> = pairs.iter().map(|p| p.0).collect();
                    (value & !r.fields_mask(&names)?) | r.encode(&pairs)?
                }
            };
            store(new).with_context(|| format!("writing {label} instance {inst}"))?;
            (Some(format!("{value:#010x}")), read()?)
        }
    };
    Ok(RegValue {
        register: label,
        ip: r.ip_label(),
        instance: inst,
        aid,
        address: format!("{addr:#x}"),
        access,
        value: format!("{value:#010x}"),
        before,
        fields: fields_of(r, value),
    })
}

fn print(values: &[RegValue]) {
    for v in values {
        let via = match (v.access, v.aid) {
            ("direct", _) => String::new(),
            (a, Some(aid)) => format!(" via {a} (AID {aid})"),
            (a, None) => format!(" via {a}"),
        };
        let before = v
            .before
            .as_deref()
            .map(|b| format!(" (was {b})"))
            .unwrap_or_default();
        println!(
            "{} [{} inst {}] @ {}{via} = {}{before}",
            v.register, v.ip, v.instance, v.address, v.value
        );
        for f in &v.fields {
            let bits = if f.width == 1 {
                format!("{}", f.shift)
            } else {
                format!("{}:{}", u32::from(f.shift) + f.width - 1, f.shift)
            };
            println!("    {:<40} [{bits:>5}] {:#x}", f.name, f.value);
        }
    }
}

/// Run `am reg`.
pub fn run(args: RegArgs) -> anyhow::Result<()> {
    let t = Target::open(&args.device)?;
    let values = access(&t, &args)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&values)?);
    } else {
        print(&values);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_as_shells_do_in_any_case() {
        assert!(glob("CP_HQD_*", "CP_HQD_ACTIVE"));
        assert!(glob("*rb_cntl", "SDMA0_QUEUE0_RB_CNTL"));
        assert!(glob("SCRATCH_REG?", "SCRATCH_REG7"));
        assert!(!glob("SCRATCH_REG?", "SCRATCH_REG10"));
        assert!(!glob("CP_HQD_*", "CP_MQD_BASE_ADDR"));
        assert!(glob("*", "ANYTHING"));
    }

    #[test]
    fn fields_by_name_encode_read_and_refuse_as_the_tables_say() {
        let dev = am_mock::open("navi31", 0).unwrap();
        let d = am_driver::Discovery::read(&*dev).unwrap();
        let regs = Regs::new(&*dev, &d).unwrap();
        let r = regs.reg(am_driver::regs::gc::GRBM_GFX_CNTL).unwrap();
        let v = r
            .encode(&[("meid", 1), ("PIPEID", 2), ("QUEUEID", 3)])
            .unwrap();
        assert_eq!(v, (1 << 2) | 2 | (3 << 8));
        assert_eq!(r.field(v, "queueid").unwrap(), 3);
        assert_eq!(r.fields_mask(&["PIPEID", "VMID"]).unwrap(), 0xf3);
        let err = r.encode(&[("NOPE", 1)]).unwrap_err().to_string();
        assert_eq!(err, "register GRBM_GFX_CNTL on GC 11.0.0 has no field NOPE");
        let err = r.encode(&[("PIPEID", 4)]).unwrap_err().to_string();
        assert!(
            err.contains("does not fit field GRBM_GFX_CNTL.PIPEID (2 bits)"),
            "{err}"
        );
    }

    #[test]
    fn edit_distance_counts_single_changes() {
        assert_eq!(levenshtein("CP_HQD_ACTIV", "CP_HQD_ACTIVE"), 1);
        assert_eq!(levenshtein("scratch_reg7", "SCRATCH_REG7"), 0);
        assert_eq!(levenshtein("ABC", "XBCD"), 2);
    }
}
