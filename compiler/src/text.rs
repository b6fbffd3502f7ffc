//! The text form of the IR: [`print`] and [`parse`] (documented in `docs/COMPILER.md`).
//!
//! ```text
//! kernel scale(%x: ptr<global, f32> noalias, %n: u32) workgroup(64, 1, 1) {
//!   %2 = global_id x
//!   ...
//! }
//! ```
//!
//! Parameters print by name, other values by the name they had in the text they were parsed
//! from, else as `%N` (their index). Parsing numbers values in order of definition, so
//! `parse(print(k)) == k` for kernels numbered that way (the builder and the parser both do).

use std::fmt::Write;

use crate::Error;
use crate::ir::*;

/// The text form of a kernel.
pub fn print(k: &Kernel) -> String {
    print_with_names(k, true)
}

/// The text form with every value numbered (`%N`) whatever its name: two kernels that differ
/// only in value names print the same (the cache key).
pub fn print_canonical(k: &Kernel) -> String {
    print_with_names(k, false)
}

fn print_with_names(k: &Kernel, names: bool) -> String {
    let unnamed;
    let k = if names || k.names.is_empty() {
        k
    } else {
        unnamed = Kernel {
            names: vec![],
            ..k.clone()
        };
        &unnamed
    };
    let mut s = String::new();
    let params: Vec<String> = k
        .params
        .iter()
        .map(|p| {
            let t = k
                .type_of(p.value)
                .map(|t| t.to_string())
                .unwrap_or_default();
            let na = if p.noalias { " noalias" } else { "" };
            let o32 = if p.offset32 { " offset32" } else { "" };
            format!("%{}: {t}{na}{o32}", p.name)
        })
        .collect();
    let [x, y, z] = k.workgroup;
    let _ = writeln!(
        s,
        "kernel {}({}) workgroup({x}, {y}, {z}) {{",
        k.name,
        params.join(", ")
    );
    print_body(k, &k.body, 1, &mut s);
    s.push_str("}\n");
    s
}

/// One instruction on one line (a range or if prints its header and `{ … }`), as errors show
/// it.
pub fn print_inst(k: &Kernel, i: &Inst) -> String {
    let mut s = String::new();
    print_one(k, i, 0, &mut s, false);
    s.trim_end().to_string()
}

fn name(k: &Kernel, v: Value) -> String {
    match k.params.iter().find(|p| p.value == v) {
        Some(p) => format!("%{}", p.name),
        None => match k.names.get(v.index()).filter(|n| !n.is_empty()) {
            Some(n) => format!("%{n}"),
            None => format!("%{}", v.0),
        },
    }
}

fn print_body(k: &Kernel, body: &[Inst], depth: usize, s: &mut String) {
    for i in body {
        print_one(k, i, depth, s, true);
    }
}

fn print_one(k: &Kernel, i: &Inst, depth: usize, s: &mut String, nested: bool) {
    let pad = "  ".repeat(depth);
    let n = |v: Value| name(k, v);
    let rt = i.result.and_then(|r| k.type_of(r));
    let rd = rt.and_then(|t| t.dtype());
    let _ = write!(s, "{pad}");
    if let Some(r) = i.result {
        let _ = write!(s, "{} = ", n(r));
    }
    let _ = match &i.op {
        Op::Const(bits) => match rd {
            Some(d) => write!(s, "const {d} {}", const_text(d.scalar, *bits)),
            None => write!(s, "const ? {bits}"),
        },
        Op::LocalId(d) => write!(s, "local_id {}", d.name()),
        Op::GroupId(d) => write!(s, "group_id {}", d.name()),
        Op::Unary(op, a) => write!(s, "{} {}", op.name(), n(*a)),
        Op::Binary(op, a, b) => write!(s, "{} {}, {}", op.name(), n(*a), n(*b)),
        Op::Fma(a, b, c) => write!(s, "fma {}, {}, {}", n(*a), n(*b), n(*c)),
        Op::Mma(a, b, c) => write!(s, "mma {}, {}, {}", n(*a), n(*b), n(*c)),
        Op::Cmp(op, a, b) => write!(s, "{} {}, {}", op.name(), n(*a), n(*b)),
        Op::Where(c, a, b) => write!(s, "where {}, {}, {}", n(*c), n(*a), n(*b)),
        Op::Cast(a) => write!(s, "cast {} : {}", n(*a), type_text(rt)),
        Op::Bitcast(a) => write!(s, "bitcast {} : {}", n(*a), type_text(rt)),
        Op::Vector(vs) => {
            let l: Vec<String> = vs.iter().map(|&v| n(v)).collect();
            write!(s, "vector {}", l.join(", "))
        }
        Op::Extract(v, l) => write!(s, "extract {}, {l}", n(*v)),
        Op::Load { ptr, index, align } => write!(
            s,
            "load {}[{}] : {} align {align}",
            n(*ptr),
            n(*index),
            type_text(rt)
        ),
        Op::Store {
            ptr,
            index,
            value,
            align,
        } => write!(
            s,
            "store {}[{}], {} align {align}",
            n(*ptr),
            n(*index),
            n(*value)
        ),
        Op::Atomic {
            op,
            ptr,
            index,
            value,
        } => write!(
            s,
            "atomic {} {}[{}], {}",
            op.name(),
            n(*ptr),
            n(*index),
            n(*value)
        ),
        Op::Local { len } | Op::Private { len } => {
            let kw = if matches!(i.op, Op::Local { .. }) {
                "local"
            } else {
                "private"
            };
            let elem = match rt {
                Some(Type::Ptr { elem, .. }) => elem.to_string(),
                _ => "?".into(),
            };
            write!(s, "{kw} {elem} x {len}")
        }
        Op::Barrier => write!(s, "barrier"),
        Op::Range {
            var,
            start,
            end,
            step,
            body,
        } => {
            let _ = write!(s, "range {} = {} to {}", n(*var), n(*start), n(*end));
            if *step != 1 {
                let _ = write!(s, " step {step}");
            }
            if nested {
                let _ = writeln!(s, " {{");
                print_body(k, body, depth + 1, s);
                write!(s, "{pad}}}")
            } else {
                write!(s, " {{ … }}")
            }
        }
        Op::If { cond, body } => {
            let _ = write!(s, "if {}", n(*cond));
            if nested {
                let _ = writeln!(s, " {{");
                print_body(k, body, depth + 1, s);
                write!(s, "{pad}}}")
            } else {
                write!(s, " {{ … }}")
            }
        }
    };
    s.push('\n');
}

fn type_text(t: Option<Type>) -> String {
    t.map(|t| t.to_string()).unwrap_or_else(|| "?".into())
}

/// The canonical quiet NaN of each float type.
fn canonical_nan(s: Scalar) -> u64 {
    match s {
        Scalar::F16 => 0x7e00,
        Scalar::BF16 => 0x7fc0,
        Scalar::F32 => 0x7fc0_0000,
        _ => 0x7ff8_0000_0000_0000,
    }
}

/// A constant's bits as text in the type `s`.
pub fn const_text(s: Scalar, bits: u64) -> String {
    match s {
        Scalar::Bool => (if bits & 1 != 0 { "true" } else { "false" }).into(),
        Scalar::I8 => (bits as i8).to_string(),
        Scalar::I16 => (bits as i16).to_string(),
        Scalar::I32 => (bits as i32).to_string(),
        Scalar::I64 => (bits as i64).to_string(),
        Scalar::U8 | Scalar::U16 | Scalar::U32 | Scalar::U64 => bits.to_string(),
        Scalar::F16 | Scalar::BF16 | Scalar::F32 | Scalar::F64 => {
            let x = crate::float::to_f64(s, bits);
            if x.is_nan() {
                if bits == canonical_nan(s) {
                    "nan".into()
                } else {
                    format!("nan.{bits:#x}")
                }
            } else if x.is_infinite() {
                (if x < 0.0 { "-inf" } else { "inf" }).into()
            } else if s == Scalar::F64 {
                format!("{x:?}")
            } else {
                // f32 (and the halves, exactly representable in f32) print their shortest
                // round-tripping decimal.
                format!("{:?}", x as f32)
            }
        }
    }
}

/// Parses a constant of type `s` from its text; `None` if it does not denote one.
pub fn parse_const(s: Scalar, t: &str) -> Option<u64> {
    let mask = if s.bits() == 64 {
        u64::MAX
    } else {
        (1u64 << s.bits()) - 1
    };
    match s {
        Scalar::Bool => match t {
            "true" | "1" => Some(1),
            "false" | "0" => Some(0),
            _ => None,
        },
        _ if s.is_int() => {
            let (neg, body) = match t.strip_prefix('-') {
                Some(b) => (true, b),
                None => (false, t),
            };
            let mag = match body.strip_prefix("0x") {
                Some(h) => u64::from_str_radix(h, 16).ok()?,
                None => body.parse::<u64>().ok()?,
            };
            let bits = if neg {
                if !s.is_signed() || mag > 1u64 << (s.bits() - 1) {
                    return None;
                }
                mag.wrapping_neg() & mask
            } else {
                let max = if s.is_signed() { mask >> 1 } else { mask };
                if mag > max && !body.starts_with("0x") {
                    return None;
                }
                if mag > mask {
                    return None;
                }
                mag
            };
            Some(bits)
        }
        _ => {
            if let Some(h) = t.strip_prefix("nan.0x") {
                let b = u64::from_str_radix(h, 16).ok()?;
                return (b <= mask && crate::float::to_f64(s, b).is_nan()).then_some(b);
            }
            let x = match t {
                "nan" => return Some(canonical_nan(s)),
                "inf" => f64::INFINITY,
                "-inf" => f64::NEG_INFINITY,
                _ => {
                    if !t.starts_with(|c: char| c.is_ascii_digit() || c == '-' || c == '.') {
                        return None;
                    }
                    if s == Scalar::F64 {
                        t.parse::<f64>().ok()?
                    } else {
                        f64::from(t.parse::<f32>().ok()?)
                    }
                }
            };
            Some(crate::float::from_f64(s, x))
        }
    }
}

// ---- parser ----

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Word(String),
    Var(String),
    Punct(char),
}

struct Lexer {
    toks: Vec<(Tok, usize, usize)>,
    pos: usize,
    file: String,
    end: (usize, usize),
}

fn lex(src: &str, file: &str) -> Result<Lexer, Error> {
    let mut toks = vec![];
    let (mut line, mut col) = (1usize, 1usize);
    let chars: Vec<char> = src.chars().collect();
    let mut i = 0;
    let word_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | '+');
    while i < chars.len() {
        let c = chars[i];
        let (l0, c0) = (line, col);
        if c == '\n' {
            line += 1;
            col = 1;
            i += 1;
            continue;
        }
        if c.is_whitespace() {
            i += 1;
            col += 1;
            continue;
        }
        if c == '/' && chars.get(i + 1) == Some(&'/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
            continue;
        }
        if c == '%' {
            let mut j = i + 1;
            while j < chars.len() && (chars[j].is_ascii_alphanumeric() || chars[j] == '_') {
                j += 1;
            }
            if j == i + 1 {
                return Err(Error::Parse {
                    file: file.into(),
                    line,
                    col,
                    reason: "`%` must be followed by a value name".into(),
                });
            }
            toks.push((Tok::Var(chars[i + 1..j].iter().collect()), l0, c0));
            col += j - i;
            i = j;
            continue;
        }
        if "(){}[]<>,:=".contains(c) {
            toks.push((Tok::Punct(c), l0, c0));
            i += 1;
            col += 1;
            continue;
        }
        if word_char(c) {
            let mut j = i;
            while j < chars.len() && word_char(chars[j]) {
                j += 1;
            }
            toks.push((Tok::Word(chars[i..j].iter().collect()), l0, c0));
            col += j - i;
            i = j;
            continue;
        }
        return Err(Error::Parse {
            file: file.into(),
            line,
            col,
            reason: format!("unexpected character {c:?}"),
        });
    }
    Ok(Lexer {
        toks,
        pos: 0,
        file: file.into(),
        end: (line, col),
    })
}

struct Parser {
    lx: Lexer,
    types: Vec<Type>,
    names: Vec<String>,
    scopes: Vec<Vec<(String, Value)>>,
}

impl Parser {
    fn err<T>(&self, reason: impl Into<String>) -> Result<T, Error> {
        let (line, col) = self
            .lx
            .toks
            .get(self.lx.pos)
            .map(|t| (t.1, t.2))
            .unwrap_or(self.lx.end);
        Err(Error::Parse {
            file: self.lx.file.clone(),
            line,
            col,
            reason: reason.into(),
        })
    }
    fn peek(&self) -> Option<&Tok> {
        self.lx.toks.get(self.lx.pos).map(|t| &t.0)
    }
    fn next(&mut self) -> Option<Tok> {
        let t = self.peek().cloned();
        self.lx.pos += 1;
        t
    }
    fn punct(&mut self, c: char) -> Result<(), Error> {
        match self.peek() {
            Some(Tok::Punct(p)) if *p == c => {
                self.lx.pos += 1;
                Ok(())
            }
            other => {
                let got = describe(other);
                self.err(format!("expected `{c}`, found {got}"))
            }
        }
    }
    fn is_punct(&self, c: char) -> bool {
        matches!(self.peek(), Some(Tok::Punct(p)) if *p == c)
    }
    fn word(&mut self) -> Result<String, Error> {
        match self.peek().cloned() {
            Some(Tok::Word(w)) => {
                self.lx.pos += 1;
                Ok(w)
            }
            other => self.err(format!(
                "expected a word, found {}",
                describe(other.as_ref())
            )),
        }
    }
    fn keyword(&mut self, kw: &str) -> Result<(), Error> {
        match self.peek() {
            Some(Tok::Word(w)) if w == kw => {
                self.lx.pos += 1;
                Ok(())
            }
            other => {
                let got = describe(other);
                self.err(format!("expected `{kw}`, found {got}"))
            }
        }
    }
    fn uint(&mut self) -> Result<u32, Error> {
        let w = self.word()?;
        match w.parse::<u32>() {
            Ok(n) => Ok(n),
            Err(_) => {
                self.lx.pos -= 1;
                self.err(format!("expected an unsigned number, found `{w}`"))
            }
        }
    }
    fn new_value(&mut self, name: String, t: Type) -> Result<Value, Error> {
        if self.scopes.iter().flatten().any(|(n, _)| *n == name) {
            self.lx.pos -= 1;
            return self.err(format!("value %{name} is defined twice"));
        }
        self.types.push(t);
        // Numbers are what the printer gives unnamed values: keep only real names.
        let keep = !name.chars().all(|c| c.is_ascii_digit());
        self.names
            .push(if keep { name.clone() } else { String::new() });
        let v = Value(self.types.len() as u32 - 1);
        if let Some(s) = self.scopes.last_mut() {
            s.push((name, v));
        }
        Ok(v)
    }
    fn use_value(&mut self) -> Result<Value, Error> {
        match self.next() {
            Some(Tok::Var(n)) => match self.scopes.iter().rev().flatten().find(|(m, _)| *m == n) {
                Some(&(_, v)) => Ok(v),
                None => {
                    self.lx.pos -= 1;
                    self.err(format!("value %{n} is not defined here"))
                }
            },
            other => {
                self.lx.pos -= 1;
                self.err(format!(
                    "expected a value, found {}",
                    describe(other.as_ref())
                ))
            }
        }
    }
    fn vt(&self, v: Value) -> Type {
        self.types[v.index()]
    }
    fn dtype(&mut self) -> Result<DType, Error> {
        let w = self.word()?;
        match parse_dtype(&w) {
            Some(d) => Ok(d),
            None => {
                self.lx.pos -= 1;
                self.err(format!("unknown type `{w}`"))
            }
        }
    }
    fn ty(&mut self) -> Result<Type, Error> {
        if matches!(self.peek(), Some(Tok::Word(w)) if w == "ptr") {
            self.lx.pos += 1;
            self.punct('<')?;
            let sp = self.word()?;
            let space = match sp.as_str() {
                "global" => Space::Global,
                "local" => Space::Local,
                "private" => Space::Private,
                _ => {
                    self.lx.pos -= 1;
                    return self.err(format!("unknown memory space `{sp}`"));
                }
            };
            self.punct(',')?;
            let elem = self.dtype()?;
            self.punct('>')?;
            Ok(Type::Ptr { space, elem })
        } else {
            Ok(Type::Val(self.dtype()?))
        }
    }
    fn dim(&mut self) -> Result<Dim, Error> {
        let w = self.word()?;
        match w.as_str() {
            "x" => Ok(Dim::X),
            "y" => Ok(Dim::Y),
            "z" => Ok(Dim::Z),
            _ => {
                self.lx.pos -= 1;
                self.err(format!("expected x, y or z, found `{w}`"))
            }
        }
    }
    fn operands(&mut self, n: usize) -> Result<Vec<Value>, Error> {
        let mut v = vec![self.use_value()?];
        for _ in 1..n {
            self.punct(',')?;
            v.push(self.use_value()?);
        }
        Ok(v)
    }
    fn dtype_of(&self, v: Value) -> DType {
        self.vt(v).dtype().unwrap_or(DType::BOOL)
    }

    fn body(&mut self) -> Result<Vec<Inst>, Error> {
        self.punct('{')?;
        self.scopes.push(vec![]);
        let mut out = vec![];
        while !self.is_punct('}') {
            if self.peek().is_none() {
                return self.err("unexpected end of input: missing `}`");
            }
            out.push(self.inst()?);
        }
        self.punct('}')?;
        self.scopes.pop();
        Ok(out)
    }

    fn inst(&mut self) -> Result<Inst, Error> {
        let result_name = if let Some(Tok::Var(n)) = self.peek().cloned() {
            self.lx.pos += 1;
            self.punct('=')?;
            Some(n)
        } else {
            None
        };
        let op_word = self.word()?;
        let op_pos = self.lx.pos - 1;
        // (operation, result type) for value-defining instructions.
        let (op, rt): (Op, Option<Type>) = match op_word.as_str() {
            "const" => {
                let d = self.dtype()?;
                let t = self.word()?;
                match parse_const(d.scalar, &t) {
                    Some(bits) => (Op::Const(bits), Some(Type::Val(d))),
                    None => {
                        self.lx.pos -= 1;
                        return self.err(format!("`{t}` is not a constant of type {d}"));
                    }
                }
            }
            "local_id" => (Op::LocalId(self.dim()?), Some(Type::Val(DType::U32))),
            "group_id" => (Op::GroupId(self.dim()?), Some(Type::Val(DType::U32))),
            "fma" | "mma" | "where" => {
                let v = self.operands(3)?;
                if op_word == "fma" {
                    (Op::Fma(v[0], v[1], v[2]), Some(self.vt(v[0])))
                } else if op_word == "mma" {
                    (Op::Mma(v[0], v[1], v[2]), Some(self.vt(v[2])))
                } else {
                    (Op::Where(v[0], v[1], v[2]), Some(self.vt(v[1])))
                }
            }
            "cast" | "bitcast" => {
                let a = self.use_value()?;
                self.punct(':')?;
                let d = self.dtype()?;
                let op = if op_word == "cast" {
                    Op::Cast(a)
                } else {
                    Op::Bitcast(a)
                };
                (op, Some(Type::Val(d)))
            }
            "vector" => {
                let mut vs = vec![self.use_value()?];
                while self.is_punct(',') {
                    self.lx.pos += 1;
                    vs.push(self.use_value()?);
                }
                let d = DType::vec(
                    self.dtype_of(vs[0]).scalar,
                    u8::try_from(vs.len()).unwrap_or(0),
                );
                (Op::Vector(vs), Some(Type::Val(d)))
            }
            "extract" => {
                let v = self.use_value()?;
                self.punct(',')?;
                let l = self.uint()?;
                let Ok(l) = u8::try_from(l) else {
                    self.lx.pos -= 1;
                    return self.err(format!("lane {l} is too large"));
                };
                let d = DType::scalar(self.dtype_of(v).scalar);
                (Op::Extract(v, l), Some(Type::Val(d)))
            }
            "load" => {
                let (ptr, index) = self.access()?;
                self.punct(':')?;
                let d = self.dtype()?;
                let align = self.align(d)?;
                (Op::Load { ptr, index, align }, Some(Type::Val(d)))
            }
            "store" => {
                let (ptr, index) = self.access()?;
                self.punct(',')?;
                let value = self.use_value()?;
                let align = self.align(self.dtype_of(value))?;
                (
                    Op::Store {
                        ptr,
                        index,
                        value,
                        align,
                    },
                    None,
                )
            }
            "atomic" => {
                let w = self.word()?;
                let Some(&op) = AtomicOp::ALL.iter().find(|o| o.name() == w) else {
                    self.lx.pos -= 1;
                    return self.err(format!("unknown atomic operation `{w}`"));
                };
                let (ptr, index) = self.access()?;
                self.punct(',')?;
                let value = self.use_value()?;
                (
                    Op::Atomic {
                        op,
                        ptr,
                        index,
                        value,
                    },
                    Some(self.vt(value)),
                )
            }
            "local" | "private" => {
                let elem = self.dtype()?;
                self.keyword("x")?;
                let len = self.uint()?;
                if op_word == "local" {
                    (
                        Op::Local { len },
                        Some(Type::Ptr {
                            space: Space::Local,
                            elem,
                        }),
                    )
                } else {
                    (
                        Op::Private { len },
                        Some(Type::Ptr {
                            space: Space::Private,
                            elem,
                        }),
                    )
                }
            }
            "barrier" => (Op::Barrier, None),
            "range" => {
                let Some(Tok::Var(var_name)) = self.next() else {
                    self.lx.pos -= 1;
                    return self.err("expected the loop variable after `range`");
                };
                self.punct('=')?;
                let start = self.use_value()?;
                self.keyword("to")?;
                let end = self.use_value()?;
                let step = if matches!(self.peek(), Some(Tok::Word(w)) if w == "step") {
                    self.lx.pos += 1;
                    self.uint()?
                } else {
                    1
                };
                self.scopes.push(vec![]);
                let t = self.vt(start);
                let var = self.new_value(var_name, t)?;
                let body = self.body();
                self.scopes.pop();
                (
                    Op::Range {
                        var,
                        start,
                        end,
                        step,
                        body: body?,
                    },
                    None,
                )
            }
            "if" => {
                let cond = self.use_value()?;
                let body = self.body()?;
                (Op::If { cond, body }, None)
            }
            w => {
                if let Some(&u) = UnOp::ALL.iter().find(|o| o.name() == w) {
                    let a = self.use_value()?;
                    (Op::Unary(u, a), Some(self.vt(a)))
                } else if let Some(&b) = BinOp::ALL.iter().find(|o| o.name() == w) {
                    let v = self.operands(2)?;
                    (Op::Binary(b, v[0], v[1]), Some(self.vt(v[0])))
                } else if let Some(&c) = CmpOp::ALL.iter().find(|o| o.name() == w) {
                    let v = self.operands(2)?;
                    let d = self.dtype_of(v[0]).with_scalar(Scalar::Bool);
                    (Op::Cmp(c, v[0], v[1]), Some(Type::Val(d)))
                } else {
                    self.lx.pos = op_pos;
                    return self.err(format!("unknown instruction `{w}`"));
                }
            }
        };
        let result = match (result_name, rt) {
            (Some(n), Some(t)) => Some(self.new_value_named(n, t, op_pos)?),
            (None, None) => None,
            (Some(n), None) => {
                self.lx.pos = op_pos;
                return self.err(format!("`{op_word}` defines no value, but %{n} = is given"));
            }
            (None, Some(_)) => {
                self.lx.pos = op_pos;
                return self.err(format!(
                    "`{op_word}` defines a value: write `%name = {op_word} …`"
                ));
            }
        };
        Ok(Inst { result, op })
    }

    fn new_value_named(&mut self, n: String, t: Type, pos: usize) -> Result<Value, Error> {
        let save = self.lx.pos;
        // Just after the result's name: an error points at the name.
        self.lx.pos = pos.saturating_sub(1);
        let r = self.new_value(n, t);
        if r.is_ok() {
            self.lx.pos = save;
        }
        r
    }

    fn access(&mut self) -> Result<(Value, Value), Error> {
        let ptr = self.use_value()?;
        self.punct('[')?;
        let index = self.use_value()?;
        self.punct(']')?;
        Ok((ptr, index))
    }

    fn align(&mut self, d: DType) -> Result<u32, Error> {
        if matches!(self.peek(), Some(Tok::Word(w)) if w == "align") {
            self.lx.pos += 1;
            self.uint()
        } else {
            Ok(d.scalar.bytes())
        }
    }
}

fn describe(t: Option<&Tok>) -> String {
    match t {
        None => "the end of the input".into(),
        Some(Tok::Word(w)) => format!("`{w}`"),
        Some(Tok::Var(v)) => format!("`%{v}`"),
        Some(Tok::Punct(c)) => format!("`{c}`"),
    }
}

/// Parses a value type name (`f32`, `u8x16`, …).
pub fn parse_dtype(w: &str) -> Option<DType> {
    let (s, lanes) = match w.split_once('x') {
        Some((s, l)) => (s, l.parse::<u8>().ok()?),
        None => (w, 1),
    };
    let s = Scalar::ALL.iter().copied().find(|x| x.name() == s)?;
    DType::valid_lanes(lanes).then_some(DType::vec(s, lanes))
}

/// Parses the text form of one kernel (`file` names the source in errors) and verifies it.
pub fn parse(src: &str, file: &str) -> Result<Kernel, Error> {
    let k = parse_unverified(src, file)?;
    crate::verify::verify(&k)?;
    Ok(k)
}

/// Parses without running the verifier (the syntax is checked, the types are not).
pub fn parse_unverified(src: &str, file: &str) -> Result<Kernel, Error> {
    let mut p = Parser {
        lx: lex(src, file)?,
        types: vec![],
        names: vec![],
        scopes: vec![vec![]],
    };
    p.keyword("kernel")?;
    let name = p.word()?;
    p.punct('(')?;
    let mut params = vec![];
    while !p.is_punct(')') {
        if !params.is_empty() {
            p.punct(',')?;
        }
        let Some(Tok::Var(pname)) = p.next() else {
            p.lx.pos -= 1;
            return p.err("expected a parameter `%name: type`");
        };
        p.punct(':')?;
        let t = p.ty()?;
        let noalias = matches!(p.peek(), Some(Tok::Word(w)) if w == "noalias");
        if noalias {
            p.lx.pos += 1;
        }
        let offset32 = matches!(p.peek(), Some(Tok::Word(w)) if w == "offset32");
        if offset32 {
            p.lx.pos += 1;
        }
        let value = p.new_value(pname.clone(), t)?;
        if let Some(n) = p.names.last_mut() {
            n.clear();
        }
        params.push(Param {
            name: pname,
            value,
            noalias,
            offset32,
        });
    }
    p.punct(')')?;
    p.keyword("workgroup")?;
    p.punct('(')?;
    let x = p.uint()?;
    p.punct(',')?;
    let y = p.uint()?;
    p.punct(',')?;
    let z = p.uint()?;
    p.punct(')')?;
    let body = p.body()?;
    if p.peek().is_some() {
        return p.err("unexpected text after the kernel's closing `}`");
    }
    Ok(Kernel {
        name,
        params,
        workgroup: [x, y, z],
        body,
        types: p.types,
        names: if p.names.iter().all(|n| n.is_empty()) {
            vec![]
        } else {
            p.names
        },
    })
}
