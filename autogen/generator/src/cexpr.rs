//! A small reader for the `#define` lines of the amdgpu headers: object-like macros are
//! evaluated to integers, function-like macros over integers are translated to Rust
//! `const fn`s. Anything it cannot read faithfully (token pasting, `adev->`, comparisons,
//! `sizeof`, strings) is skipped and listed, never guessed.

use std::collections::BTreeMap;
use std::fmt::Write as _;

/// One `#define` line (continuations joined, comments removed).
#[derive(Clone, Debug)]
pub struct Define {
    pub name: String,
    pub params: Option<Vec<String>>,
    pub body: String,
}

/// Removes `/* */` and `//` comments, keeping line structure for the rest.
pub fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'/' && i + 1 < b.len() && b[i + 1] == b'*' {
            i += 2;
            while i + 1 < b.len() && !(b[i] == b'*' && b[i + 1] == b'/') {
                if b[i] == b'\n' {
                    out.push('\n');
                }
                i += 1;
            }
            i += 2;
            out.push(' ');
        } else if b[i] == b'/' && i + 1 < b.len() && b[i + 1] == b'/' {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else {
            // Multi-byte UTF-8 is copied through as whole characters.
            let ch = text[i..].chars().next().unwrap_or(' ');
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

/// All `#define`s of a header, in file order.
pub fn parse_defines(text: &str) -> Vec<Define> {
    let text = strip_comments(text);
    let mut joined: Vec<String> = Vec::new();
    let mut cur = String::new();
    for line in text.lines() {
        if let Some(stripped) = line.strip_suffix('\\') {
            cur.push_str(stripped);
            cur.push(' ');
            continue;
        }
        cur.push_str(line);
        joined.push(std::mem::take(&mut cur));
    }
    let mut defs = Vec::new();
    for line in joined {
        let t = line.trim_start();
        let Some(rest) = t.strip_prefix('#') else {
            continue;
        };
        let rest = rest.trim_start();
        let Some(rest) = rest.strip_prefix("define") else {
            continue;
        };
        if !rest.starts_with([' ', '\t']) {
            continue;
        }
        let rest = rest.trim_start();
        let name_end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        let name = rest[..name_end].to_string();
        let after = &rest[name_end..];
        let (params, body) = if let Some(p) = after.strip_prefix('(') {
            let Some(close) = p.find(')') else { continue };
            let params: Vec<String> = p[..close]
                .split(',')
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect();
            (Some(params), p[close + 1..].trim().to_string())
        } else {
            (None, after.trim().to_string())
        };
        defs.push(Define { name, params, body });
    }
    defs
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Num(u64, bool),
    Ident(String),
    Op(&'static str),
}

const OPS: [&str; 20] = [
    "<<", ">>", "&&", "||", "==", "!=", "<=", ">=", "(", ")", "~", "!", "&", "|", "^", "+", "-",
    "*", "/", ",",
];

fn tokenize(s: &str) -> Option<Vec<Tok>> {
    let b = s.as_bytes();
    let mut i = 0;
    let mut out = Vec::new();
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c.is_ascii_digit() {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric()) {
                i += 1;
            }
            let lit = &s[start..i];
            let digits = lit.trim_end_matches(['u', 'U', 'l', 'L']);
            let suffix = &lit[digits.len()..];
            let wide = suffix.contains(['l', 'L']);
            let v = if let Some(h) = digits.strip_prefix("0x").or(digits.strip_prefix("0X")) {
                u64::from_str_radix(h, 16).ok()?
            } else if digits.len() > 1 && digits.starts_with('0') {
                u64::from_str_radix(&digits[1..], 8).ok()?
            } else {
                digits.parse().ok()?
            };
            out.push(Tok::Num(v, wide || v > u32::MAX as u64));
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            out.push(Tok::Ident(s[start..i].to_string()));
        } else {
            let op = OPS.iter().find(|op| s[i..].starts_with(**op))?;
            // Comparisons and logic have different precedence in Rust; such macros are
            // predicates, not values, so they are skipped.
            if matches!(*op, "&&" | "||" | "==" | "!=" | "<=" | ">=") {
                return None;
            }
            i += op.len();
            out.push(Tok::Op(op));
        }
    }
    Some(out)
}

/// Parsed expression.
#[derive(Clone, Debug)]
enum Expr {
    Num(u64, bool),
    Param(usize),
    Const(String),
    Call(String, Vec<Expr>),
    Not(Box<Expr>),
    Bin(&'static str, Box<Expr>, Box<Expr>),
    /// A cast to an integer type: `true` when the type is 64 bits wide.
    Cast(bool, Box<Expr>),
}

const CAST_TYPES: [(&str, bool); 14] = [
    ("uint64_t", true),
    ("u64", true),
    ("__u64", true),
    ("uint32_t", false),
    ("u32", false),
    ("__u32", false),
    ("uint16_t", false),
    ("u16", false),
    ("uint8_t", false),
    ("u8", false),
    ("unsigned", false),
    ("int", false),
    ("int32_t", false),
    ("long", true),
];

struct Parser<'a> {
    toks: &'a [Tok],
    pos: usize,
    params: &'a [String],
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos)
    }
    fn eat(&mut self, op: &str) -> bool {
        if matches!(self.peek(), Some(Tok::Op(o)) if *o == op) {
            self.pos += 1;
            true
        } else {
            false
        }
    }
    fn binary(&mut self, level: usize) -> Option<Expr> {
        // C precedence, lowest first (comparisons are rejected by the tokenizer).
        const LEVELS: [&[&str]; 6] = [
            &["|"],
            &["^"],
            &["&"],
            &["<<", ">>"],
            &["+", "-"],
            &["*", "/"],
        ];
        if level == LEVELS.len() {
            return self.unary();
        }
        let mut lhs = self.binary(level + 1)?;
        loop {
            let op = match self.peek() {
                Some(Tok::Op(o)) if LEVELS[level].contains(o) => *o,
                _ => break,
            };
            self.pos += 1;
            let rhs = self.binary(level + 1)?;
            lhs = Expr::Bin(op, Box::new(lhs), Box::new(rhs));
        }
        Some(lhs)
    }
    fn unary(&mut self) -> Option<Expr> {
        if self.eat("~") {
            return Some(Expr::Not(Box::new(self.unary()?)));
        }
        if self.eat("(") {
            if let Some(Tok::Ident(id)) = self.peek() {
                let id = id.clone();
                let cast = CAST_TYPES.iter().find(|(n, _)| *n == id).map(|(_, w)| *w);
                if let Some(mut wide) = cast {
                    self.pos += 1;
                    // `unsigned long long`, `unsigned int` and the like.
                    while let Some(Tok::Ident(more)) = self.peek() {
                        if more == "long" {
                            wide = true;
                        } else if more != "int" {
                            return None;
                        }
                        self.pos += 1;
                    }
                    if !self.eat(")") {
                        return None;
                    }
                    return Some(Expr::Cast(wide, Box::new(self.unary()?)));
                }
            }
            let e = self.binary(0)?;
            if !self.eat(")") {
                return None;
            }
            return Some(e);
        }
        match self.peek()?.clone() {
            Tok::Num(v, w) => {
                self.pos += 1;
                Some(Expr::Num(v, w))
            }
            Tok::Ident(id) => {
                self.pos += 1;
                if let Some(i) = self.params.iter().position(|p| *p == id) {
                    return Some(Expr::Param(i));
                }
                if self.eat("(") {
                    let mut args = Vec::new();
                    if !self.eat(")") {
                        loop {
                            args.push(self.binary(0)?);
                            if self.eat(")") {
                                break;
                            }
                            if !self.eat(",") {
                                return None;
                            }
                        }
                    }
                    return Some(Expr::Call(id, args));
                }
                Some(Expr::Const(id))
            }
            Tok::Op(_) => None,
        }
    }
}

fn parse_expr(body: &str, params: &[String]) -> Option<Expr> {
    let toks = tokenize(body)?;
    if toks.is_empty() {
        return None;
    }
    let mut p = Parser {
        toks: &toks,
        pos: 0,
        params,
    };
    let e = p.binary(0)?;
    (p.pos == toks.len()).then_some(e)
}

/// The macros of one or more headers, evaluated and translated on demand.
pub struct Macros {
    defs: BTreeMap<String, Define>,
}

/// A value: the number and whether C computes it in 64 bits.
type Val = (u64, bool);

fn width_mask(wide: bool) -> u64 {
    if wide { u64::MAX } else { u32::MAX as u64 }
}

impl Macros {
    pub fn new(defs: &[Define]) -> Self {
        let mut map = BTreeMap::new();
        for d in defs {
            map.insert(d.name.clone(), d.clone());
        }
        Macros { defs: map }
    }

    /// Evaluates an object-like macro to an integer, or `None` when it is not one.
    pub fn eval(&self, name: &str) -> Option<Val> {
        self.eval_name(name, 0)
    }

    fn eval_name(&self, name: &str, depth: usize) -> Option<Val> {
        let d = self.defs.get(name)?;
        if d.params.is_some() || depth > 32 {
            return None;
        }
        let e = parse_expr(&d.body, &[])?;
        self.eval_expr(&e, &[], depth + 1)
    }

    fn eval_expr(&self, e: &Expr, args: &[Val], depth: usize) -> Option<Val> {
        Some(match e {
            Expr::Num(v, w) => (*v, *w),
            Expr::Param(i) => *args.get(*i)?,
            Expr::Const(n) => self.eval_name(n, depth + 1)?,
            Expr::Call(n, a) => {
                let d = self.defs.get(n)?;
                let params = d.params.as_ref()?;
                if params.len() != a.len() || depth > 32 {
                    return None;
                }
                let vals: Option<Vec<Val>> = a
                    .iter()
                    .map(|x| self.eval_expr(x, args, depth + 1))
                    .collect();
                let body = parse_expr(&d.body, params)?;
                self.eval_expr(&body, &vals?, depth + 1)?
            }
            Expr::Not(x) => {
                let (v, w) = self.eval_expr(x, args, depth)?;
                (!v & width_mask(w), w)
            }
            Expr::Cast(w, x) => {
                let (v, _) = self.eval_expr(x, args, depth)?;
                (v & width_mask(*w), *w)
            }
            Expr::Bin(op, l, r) => {
                let (a, wa) = self.eval_expr(l, args, depth)?;
                let (b, wb) = self.eval_expr(r, args, depth)?;
                // C shifts take the type of the left operand.
                let w = if matches!(*op, "<<" | ">>") {
                    wa
                } else {
                    wa || wb
                };
                let v = match *op {
                    "|" => a | b,
                    "^" => a ^ b,
                    "&" => a & b,
                    "<<" => a.checked_shl(u32::try_from(b).ok()?)?,
                    ">>" => a.checked_shr(u32::try_from(b).ok()?)?,
                    "+" => a.wrapping_add(b),
                    "-" => a.wrapping_sub(b),
                    "*" => a.wrapping_mul(b),
                    "/" => a.checked_div(b)?,
                    _ => return None,
                };
                (v & width_mask(w), w)
            }
        })
    }

    /// Translates a function-like macro into the body of a Rust `const fn` over `ty`
    /// (`u32` or `u64`). `known_consts` are the constants emitted in the same module,
    /// `known_fns` the functions; other names are inlined when they evaluate.
    pub fn translate_fn(
        &self,
        name: &str,
        ty: &str,
        known_consts: &dyn Fn(&str) -> bool,
        known_fns: &dyn Fn(&str) -> bool,
    ) -> Option<(Vec<String>, String)> {
        let d = self.defs.get(name)?;
        let params = d.params.as_ref()?;
        if params.is_empty() {
            return None;
        }
        let e = parse_expr(&d.body, params)?;
        let mut out = String::new();
        self.rust_expr(&e, params, ty, known_consts, known_fns, &mut out)?;
        let names = params.iter().map(|p| rust_param(p)).collect();
        Some((names, out))
    }

    fn rust_expr(
        &self,
        e: &Expr,
        params: &[String],
        ty: &str,
        kc: &dyn Fn(&str) -> bool,
        kf: &dyn Fn(&str) -> bool,
        out: &mut String,
    ) -> Option<()> {
        let max = if ty == "u32" {
            u32::MAX as u64
        } else {
            u64::MAX
        };
        match e {
            Expr::Num(v, _) => {
                if *v > max {
                    return None;
                }
                // Shift counts and small numbers read better in decimal.
                if *v <= 64 {
                    write!(out, "{v}").ok()?;
                } else {
                    write!(out, "{v:#x}").ok()?;
                }
            }
            Expr::Param(i) => out.push_str(&rust_param(&params[*i])),
            Expr::Const(n) => {
                if kc(n) {
                    out.push_str(n);
                } else {
                    let (v, _) = self.eval(n)?;
                    if v > max {
                        return None;
                    }
                    write!(out, "{v:#x}").ok()?;
                }
            }
            Expr::Call(n, a) => {
                if !kf(n) {
                    return None;
                }
                out.push_str(n);
                out.push('(');
                for (i, x) in a.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    self.rust_expr(x, params, ty, kc, kf, out)?;
                }
                out.push(')');
            }
            Expr::Not(x) => {
                out.push_str("!(");
                self.rust_expr(x, params, ty, kc, kf, out)?;
                out.push(')');
            }
            Expr::Cast(wide, x) => {
                // One integer type per module: a cast only matters when it narrows.
                if !*wide && ty == "u64" {
                    out.push_str("((");
                    self.rust_expr(x, params, ty, kc, kf, out)?;
                    out.push_str(") & 0xffff_ffff)");
                } else {
                    out.push('(');
                    self.rust_expr(x, params, ty, kc, kf, out)?;
                    out.push(')');
                }
            }
            Expr::Bin(op, l, r) => {
                out.push('(');
                self.rust_expr(l, params, ty, kc, kf, out)?;
                write!(out, " {op} ").ok()?;
                self.rust_expr(r, params, ty, kc, kf, out)?;
                out.push(')');
            }
        }
        Some(())
    }

    pub fn is_fn(&self, name: &str) -> bool {
        self.defs.get(name).is_some_and(|d| d.params.is_some())
    }
}

/// Emits the integer macros of `defs` (those `keep` accepts) as Rust items of type `ty`
/// into `out`: object-like ones as constants, function-like ones as `const fn`s. Returns
/// the names it skipped.
pub fn emit_macros(
    defs: &[Define],
    macros: &Macros,
    ty: &str,
    keep: &dyn Fn(&Define) -> bool,
    out: &mut String,
) -> Vec<String> {
    let mut skipped = Vec::new();
    let mut consts: BTreeMap<String, ()> = BTreeMap::new();
    let mut fns: BTreeMap<String, ()> = BTreeMap::new();
    let mut seen: BTreeMap<String, ()> = BTreeMap::new();
    // Two passes so that functions may call functions defined later in the header.
    for d in defs.iter().filter(|d| keep(d)) {
        if d.params.is_some() {
            fns.insert(d.name.clone(), ());
        }
    }
    for d in defs.iter().filter(|d| keep(d)) {
        if seen.insert(d.name.clone(), ()).is_some() {
            continue;
        }
        if d.params.is_none() {
            match macros.eval(&d.name) {
                Some((v, wide)) => {
                    let t = if ty == "u32" && (wide || v > u32::MAX as u64) {
                        "u64"
                    } else {
                        ty
                    };
                    if t == ty {
                        consts.insert(d.name.clone(), ());
                    }
                    let _ = writeln!(out, "pub const {}: {t} = {v:#x};", d.name);
                }
                None => skipped.push(d.name.clone()),
            }
        }
    }
    // Drop functions that cannot be translated until the set is stable, so that no
    // function calls one that was skipped.
    loop {
        let failed: Vec<String> = fns
            .keys()
            .filter(|n| {
                let kc = |c: &str| consts.contains_key(c);
                let kf = |f: &str| fns.contains_key(f) && macros.is_fn(f);
                macros.translate_fn(n, ty, &kc, &kf).is_none()
            })
            .cloned()
            .collect();
        if failed.is_empty() {
            break;
        }
        for n in failed {
            fns.remove(&n);
            skipped.push(n);
        }
    }
    let mut done: BTreeMap<String, ()> = BTreeMap::new();
    for d in defs.iter().filter(|d| keep(d) && fns.contains_key(&d.name)) {
        if done.insert(d.name.clone(), ()).is_some() {
            continue;
        }
        let kc = |n: &str| consts.contains_key(n);
        let kf = |n: &str| fns.contains_key(n) && macros.is_fn(n);
        if let Some((params, body)) = macros.translate_fn(&d.name, ty, &kc, &kf) {
            let args: Vec<String> = params
                .iter()
                .map(|p| {
                    let used = body
                        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                        .any(|w| w == p);
                    format!("{}{p}: {ty}", if used { "" } else { "_" })
                })
                .collect();
            let _ = writeln!(
                out,
                "pub const fn {}({}) -> {ty} {{ {body} }}",
                d.name,
                args.join(", ")
            );
        }
    }
    skipped.sort();
    skipped.dedup();
    skipped
}

/// A C macro parameter as a Rust parameter name: lower case, clear of keywords.
fn rust_param(p: &str) -> String {
    let l = p.to_ascii_lowercase();
    match l.as_str() {
        "type" | "fn" | "match" | "ref" | "mod" | "use" | "loop" | "move" | "in" | "as"
        | "self" | "impl" | "dyn" | "box" | "where" | "async" | "await" | "const" | "static"
        | "struct" | "enum" | "trait" | "let" | "mut" | "pub" | "crate" | "super" | "extern"
        | "gen" => {
            format!("{l}_")
        }
        _ => l,
    }
}
