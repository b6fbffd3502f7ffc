//! Typed fields for the registers listed in `autogen/typed-regs.txt` (see its header): one
//! unit type per field set, with a setter per field on `Fields<Type>`, and the `alt` lists of
//! registers that share a field type. Everything else stays an untyped `Reg`.

use anyhow::{Context, Result, bail};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;

use crate::regs::Version;

const LIST: &str = include_str!("../../typed-regs.txt");

/// The field types and which registers carry them.
pub struct Typed {
    /// Type name -> (members as (module, register), union of field names).
    types: BTreeMap<String, (Vec<(String, String)>, BTreeSet<String>)>,
    /// Type names that are `alt` lists, in their file order of members.
    alts: BTreeSet<String>,
    /// (module, register) -> type name.
    by_reg: BTreeMap<(String, String), String>,
}

impl Typed {
    /// Reads the list and checks every register against the loaded versions.
    pub fn new(ips: &[(&str, Vec<&Version>)]) -> Result<Self> {
        let exists = |m: &str, r: &str| {
            ips.iter()
                .any(|(ip, vs)| *ip == m && vs.iter().any(|v| v.regs.contains_key(r)))
        };
        let mut t = Typed {
            types: BTreeMap::new(),
            alts: BTreeSet::new(),
            by_reg: BTreeMap::new(),
        };
        for (n, line) in LIST.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            let words: Vec<&str> = line.split_whitespace().collect();
            let at = || format!("typed-regs.txt:{}", n + 1);
            let (ty, members): (String, Vec<(String, String)>) = match words.as_slice() {
                [] => continue,
                ["hub", name] => {
                    let m: Vec<(String, String)> = [
                        ("gc", format!("GC{name}")),
                        ("gc", name.to_string()),
                        ("mmhub", format!("MM{name}")),
                        ("mmhub", name.to_string()),
                    ]
                    .into_iter()
                    .filter(|(ip, r)| exists(ip, r))
                    .map(|(ip, r)| (ip.to_string(), r))
                    .collect();
                    for ip in ["gc", "mmhub"] {
                        if !m.iter().any(|(i, _)| i == ip) {
                            bail!("{}: no {ip} version has hub register {name}", at());
                        }
                    }
                    t.alts.insert(name.to_string());
                    (name.to_string(), m)
                }
                [name, "=", rest @ ..] => {
                    let mut m = Vec::new();
                    for w in rest {
                        let (ip, r) = w
                            .split_once(':')
                            .with_context(|| format!("{}: `{w}` is not ip:REGISTER", at()))?;
                        m.push((ip.to_string(), r.to_string()));
                    }
                    t.alts.insert(name.to_string());
                    (name.to_string(), m)
                }
                [ip, regs @ ..] => {
                    for r in regs {
                        t.add(r, vec![(ip.to_string(), r.to_string())], ips, &at)?;
                    }
                    continue;
                }
            };
            t.add(&ty, members, ips, &at)?;
        }
        Ok(t)
    }

    fn add(
        &mut self,
        ty: &str,
        members: Vec<(String, String)>,
        ips: &[(&str, Vec<&Version>)],
        at: &dyn Fn() -> String,
    ) -> Result<()> {
        let entry = self.types.entry(ty.to_string()).or_default();
        for (ip, r) in members {
            let Some((_, vs)) = ips.iter().find(|(m, _)| *m == ip) else {
                bail!("{}: no register IP `{ip}`", at());
            };
            let mut found = false;
            for v in vs {
                if let Some(reg) = v.regs.get(&r) {
                    found = true;
                    entry.1.extend(reg.fields.iter().map(|f| f.name.clone()));
                }
            }
            if !found {
                bail!("{}: no {ip} version has register {r}", at());
            }
            let key = (ip.clone(), r.clone());
            if let Some(other) = self.by_reg.insert(key, ty.to_string())
                && other != ty
            {
                bail!("{}: {ip}:{r} is listed with types {other} and {ty}", at());
            }
            entry.0.push((ip, r));
        }
        Ok(())
    }

    /// The field type of a register, if it is listed.
    pub fn type_of(&self, module: &str, reg: &str) -> Option<&str> {
        self.by_reg
            .get(&(module.to_string(), reg.to_string()))
            .map(String::as_str)
    }

    /// Writes `regs_fields.rs`.
    pub fn write(&self, out_dir: &Path, header: &dyn Fn(&[&str], &str) -> String) -> Result<()> {
        let mut s = header(
            &[],
            "Field types of the registers listed in `autogen/typed-regs.txt`: a setter per field\n\
             (resolved at run time for the IP version), and `alt`: registers sharing a field type.",
        );
        s.push_str("use crate::regs::Fields;\n");
        for (ty, (members, fields)) in &self.types {
            let names: Vec<String> = members.iter().map(|(i, r)| format!("`{i}::{r}`")).collect();
            writeln!(s, "\n/// Fields of {}.", names.join(", "))?;
            writeln!(s, "#[derive(Clone, Copy, Debug)]\npub struct {ty};")?;
            writeln!(s, "#[rustfmt::skip]\nimpl Fields<{ty}> {{")?;
            for f in fields {
                let m = method(f)?;
                writeln!(s, "    pub fn {m}(self, v: u32) -> Self {{ self.set(\"{f}\", v) }}")?;
            }
            s.push_str("}\n");
        }
        s.push_str("\n/// Registers that share a field type, in the order the list gives them.\npub mod alt {\n");
        s.push_str("    use super::*;\n    use crate::regs::*;\n");
        for ty in &self.alts {
            let (members, _) = &self.types[ty];
            let regs: Vec<String> = members.iter().map(|(i, r)| format!("{i}::{r}")).collect();
            writeln!(
                s,
                "    pub const {ty}: [Reg<{ty}>; {}] = [{}];",
                regs.len(),
                regs.join(", ")
            )?;
        }
        s.push_str("}\n");
        let p = out_dir.join("regs_fields.rs");
        std::fs::write(&p, s).with_context(|| format!("write {}", p.display()))?;
        Ok(())
    }
}

/// The setter's name: the field name in lower case, made a valid identifier.
fn method(field: &str) -> Result<String> {
    let m = field.to_ascii_lowercase();
    if !m.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        bail!("field {field} is not an identifier");
    }
    Ok(match m.as_str() {
        "type" | "match" | "loop" | "move" | "ref" | "mod" | "use" | "fn" | "in" | "as"
        | "enum" | "struct" | "static" | "const" | "trait" | "impl" | "where" | "while"
        | "for" | "if" | "else" | "let" | "mut" | "pub" | "return" | "break" | "continue"
        | "true" | "false" | "unsafe" | "extern" | "dyn" | "box" | "yield" | "async"
        | "await" | "try" | "macro" | "virtual" | "final" | "override" | "priv"
        | "typeof" | "unsized" | "do" | "abstract" | "become" | "gen" => format!("r#{m}"),
        "set" | "self" | "super" | "crate" => format!("{m}_"),
        _ if m.starts_with(|c: char| c.is_ascii_digit()) => format!("f_{m}"),
        _ => m,
    })
}
