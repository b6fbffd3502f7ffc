//! Register tables from the `*_offset.h`, `*_sh_mask.h` and `*_default.h` files.
//!
//! One file per IP (`regs_gc.rs`, ...), holding: the sorted union of register names over
//! the IP's versions (the typed constants index it), a pool of field names, and per version
//! a table of packed numbers (see `autogen/src/regs.rs` for the encoding).

use anyhow::{Context, Result, bail};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;

/// One IP block's register versions.
pub struct IpSpec {
    /// Module name (`gc`) and the `RegIp` variant (`Gc`).
    module: &'static str,
    variant: &'static str,
    versions: &'static [VersionSpec],
}

pub struct VersionSpec {
    version: (u8, u8, u8),
    /// Path prefix under `include/asic_reg/`, e.g. `gc/gc_11_0_0`.
    prefix: &'static str,
    /// Differences applied on top of the header (GC 9.5.0).
    patch: Option<fn(&mut Version)>,
}

const IPS: &[IpSpec] = &[
    IpSpec {
        module: "gc",
        variant: "Gc",
        versions: &[
            VersionSpec {
                version: (9, 4, 3),
                prefix: "gc/gc_9_4_3",
                patch: None,
            },
            VersionSpec {
                version: (9, 5, 0),
                prefix: "gc/gc_9_4_3",
                patch: Some(crate::gc950::patch),
            },
            VersionSpec {
                version: (11, 0, 0),
                prefix: "gc/gc_11_0_0",
                patch: None,
            },
            VersionSpec {
                version: (12, 0, 0),
                prefix: "gc/gc_12_0_0",
                patch: None,
            },
        ],
    },
    IpSpec {
        module: "mmhub",
        variant: "Mmhub",
        versions: &[
            VersionSpec {
                version: (1, 8, 0),
                prefix: "mmhub/mmhub_1_8_0",
                patch: None,
            },
            VersionSpec {
                version: (3, 0, 0),
                prefix: "mmhub/mmhub_3_0_0",
                patch: None,
            },
            VersionSpec {
                version: (4, 1, 0),
                prefix: "mmhub/mmhub_4_1_0",
                patch: None,
            },
        ],
    },
    IpSpec {
        module: "osssys",
        variant: "Osssys",
        versions: &[
            VersionSpec {
                version: (4, 4, 2),
                prefix: "oss/osssys_4_4_2",
                patch: None,
            },
            VersionSpec {
                version: (6, 0, 0),
                prefix: "oss/osssys_6_0_0",
                patch: None,
            },
            VersionSpec {
                version: (7, 0, 0),
                prefix: "oss/osssys_7_0_0",
                patch: None,
            },
        ],
    },
    IpSpec {
        module: "nbio",
        variant: "Nbio",
        versions: &[
            VersionSpec {
                version: (4, 3, 0),
                prefix: "nbio/nbio_4_3_0",
                patch: None,
            },
            VersionSpec {
                version: (6, 3, 1),
                prefix: "nbif/nbif_6_3_1",
                patch: None,
            },
            VersionSpec {
                version: (7, 9, 0),
                prefix: "nbio/nbio_7_9_0",
                patch: None,
            },
        ],
    },
    IpSpec {
        module: "mp",
        variant: "Mp",
        versions: &[
            VersionSpec {
                version: (13, 0, 0),
                prefix: "mp/mp_13_0_0",
                patch: None,
            },
            VersionSpec {
                version: (13, 0, 6),
                prefix: "mp/mp_13_0_6",
                patch: None,
            },
            VersionSpec {
                version: (14, 0, 2),
                prefix: "mp/mp_14_0_2",
                patch: None,
            },
        ],
    },
    IpSpec {
        module: "hdp",
        variant: "Hdp",
        versions: &[
            VersionSpec {
                version: (4, 4, 2),
                prefix: "hdp/hdp_4_4_2",
                patch: None,
            },
            VersionSpec {
                version: (6, 0, 0),
                prefix: "hdp/hdp_6_0_0",
                patch: None,
            },
            VersionSpec {
                version: (7, 0, 0),
                prefix: "hdp/hdp_7_0_0",
                patch: None,
            },
        ],
    },
    IpSpec {
        module: "smuio",
        variant: "Smuio",
        versions: &[
            VersionSpec {
                version: (13, 0, 6),
                prefix: "smuio/smuio_13_0_6",
                patch: None,
            },
            VersionSpec {
                version: (14, 0, 2),
                prefix: "smuio/smuio_14_0_2",
                patch: None,
            },
        ],
    },
    IpSpec {
        module: "sdma",
        variant: "Sdma",
        versions: &[VersionSpec {
            version: (4, 4, 2),
            prefix: "sdma/sdma_4_4_2",
            patch: None,
        }],
    },
];

/// A field of a register: shift and mask as the header gives them.
#[derive(Clone, Debug, PartialEq)]
pub struct Field {
    pub name: String,
    pub shift: u32,
    pub mask: u32,
}

/// A register of one version.
#[derive(Clone, Debug, PartialEq)]
pub struct Register {
    pub offset: u32,
    pub base_idx: u32,
    pub fields: Vec<Field>,
    pub default: Option<u32>,
}

/// All registers of one (IP, version), by name.
#[derive(Default)]
pub struct Version {
    pub regs: BTreeMap<String, Register>,
    /// Register names the patch touched, with the source of each change.
    pub notes: Vec<String>,
}

fn parse_num(s: &str) -> Option<u64> {
    let s = s.trim().trim_end_matches(['u', 'U', 'l', 'L']);
    if let Some(h) = s.strip_prefix("0x").or(s.strip_prefix("0X")) {
        u64::from_str_radix(h, 16).ok()
    } else {
        s.parse().ok()
    }
}

/// `#define NAME VALUE` lines with a plain number as value.
fn numeric_defines(text: &str) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    for line in text.lines() {
        let Some(rest) = line.trim_start().strip_prefix("#define") else {
            continue;
        };
        let mut it = rest.split_whitespace();
        let (Some(name), Some(val)) = (it.next(), it.next()) else {
            continue;
        };
        if let Some(v) = parse_num(val) {
            out.push((name.to_string(), v));
        }
    }
    out
}

fn read_lossy(p: &Path) -> Result<String> {
    let bytes = std::fs::read(p).with_context(|| format!("read {}", p.display()))?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// Reads one version's register set from its headers.
pub fn load(amd: &Path, prefix: &str) -> Result<Version> {
    let dir = amd.join("include/asic_reg");
    let offsets = numeric_defines(&read_lossy(&dir.join(format!("{prefix}_offset.h")))?);
    let mut regs: BTreeMap<String, Register> = BTreeMap::new();
    let mut base: BTreeMap<String, u32> = BTreeMap::new();
    for (name, v) in &offsets {
        // Only MMIO registers (`reg*`): `cfg*` are PCI config space, `ix*` indirect.
        let Some(n) = name.strip_prefix("reg") else {
            continue;
        };
        if let Some(r) = n.strip_suffix("_BASE_IDX") {
            base.insert(r.to_string(), u32::try_from(*v)?);
        } else {
            let offset = u32::try_from(*v).with_context(|| format!("{prefix}: offset of {n}"))?;
            regs.insert(
                n.to_string(),
                Register {
                    offset,
                    base_idx: 0,
                    fields: vec![],
                    default: None,
                },
            );
        }
    }
    // A few registers lack a `_BASE_IDX` line and cannot be addressed: left out, listed.
    let mut notes = Vec::new();
    let missing: Vec<String> = regs
        .keys()
        .filter(|n| !base.contains_key(*n))
        .cloned()
        .collect();
    if !missing.is_empty() {
        notes.push(format!(
            "Left out for lack of a _BASE_IDX: {}",
            missing.join(", ")
        ));
    }
    for n in &missing {
        regs.remove(n);
    }
    for (name, r) in regs.iter_mut() {
        r.base_idx = base[name];
    }
    let masks = numeric_defines(&read_lossy(&dir.join(format!("{prefix}_sh_mask.h")))?);
    let mut shifts: BTreeMap<(String, String), u32> = BTreeMap::new();
    let mut field_masks: Vec<(String, String, u32)> = Vec::new();
    let split = |s: &str| -> Option<(String, String)> {
        // The register part is the longest prefix before `__` that names a register.
        let mut best = None;
        for (i, _) in s.match_indices("__") {
            if regs.contains_key(&s[..i]) {
                best = Some((s[..i].to_string(), s[i + 2..].to_string()));
            }
        }
        best
    };
    for (name, v) in &masks {
        if let Some(n) = name.strip_suffix("__SHIFT") {
            if let Some((r, f)) = split(n) {
                shifts.insert((r, f), u32::try_from(*v)?);
            }
        } else if let Some(n) = name.strip_suffix("_MASK")
            && let Some((r, f)) = split(n)
        {
            field_masks.push((
                r,
                f,
                u32::try_from(*v).with_context(|| format!("{prefix}: mask {name}"))?,
            ));
        }
    }
    for (r, f, mask) in field_masks {
        // A handful of fields have a _MASK line but no __SHIFT (nbio_4_3_0): the mask says it.
        let shift = shifts
            .get(&(r.clone(), f.clone()))
            .copied()
            .unwrap_or(mask.trailing_zeros());
        if let Some(reg) = regs.get_mut(&r) {
            if reg.fields.iter().any(|x| x.name == f) {
                continue;
            }
            reg.fields.push(Field {
                name: f,
                shift,
                mask,
            });
        }
    }
    let default_path = dir.join(format!("{prefix}_default.h"));
    if default_path.exists() {
        for (name, v) in numeric_defines(&read_lossy(&default_path)?) {
            let Some(n) = name
                .strip_prefix("reg")
                .and_then(|n| n.strip_suffix("_DEFAULT"))
            else {
                continue;
            };
            if let Some(r) = regs.get_mut(n) {
                r.default = Some(u32::try_from(v)?);
            }
        }
    }
    Ok(Version { regs, notes })
}

/// Encodes a field as `name index << 10 | (width - 1) << 5 | shift`; masks that are not
/// one run of bits go to the exception list.
fn encode_field(name_idx: usize, f: &Field) -> (u32, Option<u32>) {
    let shift = f.shift;
    let run = if f.mask == 0 {
        0
    } else {
        f.mask >> f.mask.trailing_zeros()
    };
    let contiguous =
        f.mask != 0 && f.mask.trailing_zeros() == shift && (run & run.wrapping_add(1)) == 0;
    let width = if contiguous {
        32 - run.leading_zeros()
    } else {
        1
    };
    let packed = ((name_idx as u32) << 10) | ((width - 1) << 5) | shift;
    (packed, (!contiguous).then_some(f.mask))
}

fn write_numbers(out: &mut String, nums: impl IntoIterator<Item = u64>) {
    let mut line = String::from("    ");
    for n in nums {
        let s = format!("{n},");
        if line.len() + s.len() > 99 {
            out.push_str(line.trim_end());
            out.push('\n');
            line = String::from("    ");
        }
        line.push_str(&s);
        line.push(' ');
    }
    if !line.trim().is_empty() {
        out.push_str(line.trim_end());
        out.push('\n');
    }
}

/// Writes the names as one string literal, split over lines (`\` continuations).
fn write_blob(out: &mut String, names: &[&str]) {
    out.push('"');
    let mut col = 0;
    for n in names {
        if col + n.len() > 90 {
            out.push_str("\\\n");
            col = 0;
        }
        out.push_str(n);
        col += n.len();
    }
    out.push('"');
}

fn offsets_of(names: &[&str]) -> Vec<u64> {
    let mut offs = Vec::with_capacity(names.len() + 1);
    let mut at = 0u64;
    offs.push(0);
    for n in names {
        at += n.len() as u64;
        offs.push(at);
    }
    offs
}

/// Per version: (version, registers, fields).
pub type VersionStats = Vec<((u8, u8, u8), usize, usize)>;

/// Per IP: (module, distinct names, versions), printed by the generator.
pub struct Stats {
    pub ips: Vec<(String, usize, VersionStats)>,
}

pub fn generate(
    amd: &Path,
    out_dir: &Path,
    header: &dyn Fn(&[&str], &str) -> String,
) -> Result<Stats> {
    let mut stats = Stats { ips: vec![] };
    let mut loaded = Vec::new();
    for ip in IPS {
        let mut versions = Vec::new();
        for v in ip.versions {
            let mut ver = load(amd, v.prefix)?;
            if let Some(p) = v.patch {
                p(&mut ver);
            }
            versions.push((v, ver));
        }
        loaded.push((ip, versions));
    }
    let typed = crate::typed::Typed::new(
        &loaded
            .iter()
            .map(|(ip, vs)| (ip.module, vs.iter().map(|(_, v)| v).collect()))
            .collect::<Vec<_>>(),
    )?;
    typed.write(out_dir, header)?;
    for (ip, versions) in &loaded {
        let union: BTreeSet<&str> = versions
            .iter()
            .flat_map(|(_, v)| v.regs.keys().map(String::as_str))
            .collect();
        let union: Vec<&str> = union.into_iter().collect();
        if union.len() >= u16::MAX as usize {
            bail!(
                "{}: {} registers do not fit u16 ids",
                ip.module,
                union.len()
            );
        }
        let union_idx: BTreeMap<&str, usize> =
            union.iter().enumerate().map(|(i, n)| (*n, i)).collect();
        let fnames: BTreeSet<&str> = versions
            .iter()
            .flat_map(|(_, v)| {
                v.regs
                    .values()
                    .flat_map(|r| r.fields.iter().map(|f| f.name.as_str()))
            })
            .collect();
        let fnames: Vec<&str> = fnames.into_iter().collect();
        let fname_idx: BTreeMap<&str, usize> =
            fnames.iter().enumerate().map(|(i, n)| (*n, i)).collect();

        let sources: Vec<String> = ip
            .versions
            .iter()
            .map(|v| format!("include/asic_reg/{}_{{offset,sh_mask,default}}.h", v.prefix))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let src_refs: Vec<&str> = sources.iter().map(String::as_str).collect();
        let vers: Vec<String> = ip
            .versions
            .iter()
            .map(|v| format!("{}.{}.{}", v.version.0, v.version.1, v.version.2))
            .collect();
        let mut s = header(
            &src_refs,
            &format!(
                "{} registers of versions {}: one constant per register name over all\n\
                 versions (resolve it with a version's `RegTable`), and the tables.",
                ip.module.to_uppercase(),
                vers.join(", ")
            ),
        );
        let any_typed = union.iter().any(|n| typed.type_of(ip.module, n).is_some());
        let _ = writeln!(
            s,
            "use crate::regs::{{Reg, RegIp{}}};\n\n\
             const fn r<F>(i: u16) -> Reg<F> {{\n    Reg::new(RegIp::{}, i)\n}}\n",
            if any_typed { ", fields" } else { "" },
            ip.variant
        );
        for (i, n) in union.iter().enumerate() {
            match typed.type_of(ip.module, n) {
                Some(t) => writeln!(s, "pub const {n}: Reg<fields::{t}> = r({i});"),
                None => writeln!(s, "pub const {n}: Reg = r({i});"),
            }?;
        }
        s.push_str(
            "\n/// The tables and name pools behind the constants above.\npub(crate) mod data {\n",
        );
        s.push_str("    use crate::regs::{IpVersion, RegIp, RegTable};\n\n");
        s.push_str("    /// Register names of all versions, sorted and concatenated.\n    #[rustfmt::skip]\n    pub(crate) static NAMES: &str = ");
        write_blob(&mut s, &union);
        s.push_str(";\n    #[rustfmt::skip]\n    pub(crate) static NAME_OFFS: &[u32] = &[\n");
        write_numbers(&mut s, offsets_of(&union));
        s.push_str("];\n    /// Field names of all versions, sorted and concatenated.\n    #[rustfmt::skip]\n    pub(crate) static FIELD_NAMES: &str = ");
        write_blob(&mut s, &fnames);
        s.push_str(";\n    #[rustfmt::skip]\n    pub(crate) static FIELD_NAME_OFFS: &[u32] = &[\n");
        write_numbers(&mut s, offsets_of(&fnames));
        s.push_str("];\n");

        let mut ip_stats = Vec::new();
        let mut table_names = Vec::new();
        for (spec, ver) in versions.iter() {
            let (a, b, c) = spec.version;
            let tname = format!("V{a}_{b}_{c}");
            table_names.push(tname.clone());
            let mut ids = Vec::new();
            let mut regs = Vec::new();
            let mut bases = Vec::new();
            let mut starts = vec![0u64];
            let mut fields = Vec::new();
            let mut odd_masks = Vec::new();
            let mut defaults = Vec::new();
            let mut by_union = vec![u16::MAX as u64; union.len()];
            for (i, (name, r)) in ver.regs.iter().enumerate() {
                ids.push(union_idx[name.as_str()] as u64);
                by_union[union_idx[name.as_str()]] = i as u64;
                if r.base_idx > u8::MAX as u32 {
                    bail!(
                        "{}: {name} base index {} out of range",
                        spec.prefix,
                        r.base_idx
                    );
                }
                regs.push(r.offset as u64);
                bases.push(r.base_idx as u64);
                let mut fs: Vec<&Field> = r.fields.iter().collect();
                fs.sort_by_key(|f| (f.shift, f.name.clone()));
                for f in fs {
                    let (packed, odd) = encode_field(fname_idx[f.name.as_str()], f);
                    if let Some(m) = odd {
                        odd_masks.push((fields.len() as u64, m as u64));
                    }
                    fields.push(packed as u64);
                }
                starts.push(fields.len() as u64);
                if let Some(d) = r.default {
                    defaults.push((i as u64, d as u64));
                }
            }
            ip_stats.push((spec.version, ver.regs.len(), fields.len()));
            let _ = writeln!(
                s,
                "\n    /// {} {a}.{b}.{c} from `{}`{}.",
                ip.module.to_uppercase(),
                spec.prefix,
                if spec.patch.is_some() {
                    " with the differences listed in docs/AUTOGEN.md"
                } else {
                    ""
                }
            );
            for n in &ver.notes {
                let _ = writeln!(s, "    // {n}");
            }
            let _ = writeln!(s, "    pub(crate) static {tname}: RegTable = RegTable {{");
            let _ = writeln!(s, "        ip: RegIp::{},", ip.variant);
            let _ = writeln!(s, "        version: IpVersion::new({a}, {b}, {c}),");
            let _ = writeln!(
                s,
                "        source: \"{}\",",
                spec.prefix.rsplit('/').next().unwrap_or(spec.prefix)
            );
            s.push_str("        names: NAMES,\n        name_offs: NAME_OFFS,\n        field_names: FIELD_NAMES,\n        field_name_offs: FIELD_NAME_OFFS,\n");
            for (label, nums) in [
                ("ids", &ids),
                ("offsets", &regs),
                ("base_idx", &bases),
                ("field_starts", &starts),
                ("fields", &fields),
                ("by_id", &by_union),
            ] {
                let ty = match label {
                    "ids" | "by_id" => "u16",
                    "base_idx" => "u8",
                    _ => "u32",
                };
                let _ = writeln!(
                    s,
                    "        {label}: {{\n            #[rustfmt::skip]\n            static D: &[{ty}] = &["
                );
                write_numbers(&mut s, nums.iter().copied());
                s.push_str("];\n            D\n        },\n");
            }
            s.push_str("        odd_masks: &[");
            for (i, m) in &odd_masks {
                let _ = write!(s, "({i}, {m:#x}), ");
            }
            s.push_str("],\n        defaults: {\n            #[rustfmt::skip]\n            static D: &[(u32, u32)] = &[\n");
            let mut line = String::from("    ");
            for (i, d) in &defaults {
                let item = format!("({i}, {d:#x}),");
                if line.len() + item.len() > 99 {
                    s.push_str(line.trim_end());
                    s.push('\n');
                    line = String::from("    ");
                }
                line.push_str(&item);
                line.push(' ');
            }
            if !line.trim().is_empty() {
                s.push_str(line.trim_end());
                s.push('\n');
            }
            s.push_str("];\n            D\n        },\n    };\n");
        }
        let _ = writeln!(
            s,
            "\n    /// Every {} table, in version order.",
            ip.module.to_uppercase()
        );
        let _ = writeln!(
            s,
            "    pub(crate) static TABLES: &[&RegTable] = &[{}];",
            table_names
                .iter()
                .map(|t| format!("&{t}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        s.push_str("}\n");
        let p = out_dir.join(format!("regs_{}.rs", ip.module));
        std::fs::write(&p, s).with_context(|| format!("write {}", p.display()))?;
        stats
            .ips
            .push((ip.module.to_string(), union.len(), ip_stats));
    }
    Ok(stats)
}
