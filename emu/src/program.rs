//! A predecoded program: every instruction of `.text` decoded once into the interpreter's
//! [`Inst`] form (CDNA code is decoded by its own decoder and lowered, gfx12 code by the gfx12
//! generation of the RDNA decoder and lowered), plus a map from dword offset to instruction
//! index for branches and `s_setpc_b64`.
//!
//! The front-end dispatcher: the one module that knows every family front-end. It picks the
//! one of the program's ISA to decode (and lower) the code and to print an instruction; the
//! interpreter core (`interp/`) runs the result and knows no front-end.

use crate::interp::exec::{Atom, atomic_kind};
use crate::interp::fast::{Fast, classify};
use crate::interp::inst::{INVALID_OP, Inst, UNIMPL_OP};
use crate::rdna3::decode::{Gen, decode, decode_in, shape_in};
use crate::{CodeObject, Error, Isa};

/// Decoded code of a code object, ready to run.
#[derive(Clone, Debug)]
pub struct Program {
    pub(crate) isa: Isa,
    pub(crate) insts: Vec<Inst>,
    /// Dword offset of each instruction.
    pub(crate) offsets: Vec<u32>,
    /// Instruction index of each dword offset (`u32::MAX` inside an instruction).
    pub(crate) index: Vec<u32>,
    /// Decode failures and instructions without semantics, by instruction index, so
    /// executing one reports it.
    pub(crate) invalid: Vec<(u32, String)>,
    pub(crate) words: Vec<u32>,
    /// Virtual address of `.text` (the code object's; the dispatch may move it).
    pub(crate) text_address: u64,
    /// VGPR rows (from v0) any instruction can reach: zeroed at each wave start.
    pub(crate) vgpr_rows: usize,
    /// AccVGPR rows (from a0) any instruction can reach.
    pub(crate) agpr_rows: usize,
    /// The atomic operation of each FLAT, GLOBAL and MUBUF atomic, by instruction index,
    /// resolved from its mnemonic once here instead of at every execution.
    atoms: Vec<Option<Atom>>,
    /// The hot form of each instruction, by instruction index (`interp/fast.rs`).
    pub(crate) fast: Vec<Fast>,
}

/// The widest operand of an instruction, from its LLVM operand shape (registers).
fn widest(shape: &str) -> usize {
    shape
        .split(',')
        .filter_map(|t| t.parse::<usize>().ok())
        .max()
        .unwrap_or(1)
}

impl Program {
    /// Decodes all of `.text` of a code object for `isa`.
    pub fn new(code: &CodeObject, isa: Isa) -> Result<Program, Error> {
        Program::from_bytes(&code.text, code.text_address, isa)
    }

    /// Decodes raw code bytes that live at GPU virtual address `address` (for a dispatch whose
    /// code the mock read from GPU memory). Words that do not decode become slots that fail
    /// with [`Error::InvalidInstruction`] only if executed; valid instructions the interpreter
    /// cannot run fail with [`Error::Unimplemented`] only if executed.
    pub fn from_bytes(text: &[u8], address: u64, isa: Isa) -> Result<Program, Error> {
        let words: Vec<u32> = text
            .chunks(4)
            .map(|c| {
                let mut b = [0u8; 4];
                b[..c.len()].copy_from_slice(c);
                u32::from_le_bytes(b)
            })
            .collect();
        let mut p = Program {
            isa,
            insts: Vec::new(),
            offsets: Vec::new(),
            index: vec![u32::MAX; words.len() + 1],
            invalid: Vec::new(),
            words: Vec::new(),
            text_address: address,
            vgpr_rows: 1,
            agpr_rows: 0,
            atoms: Vec::new(),
            fast: Vec::new(),
        };
        let marker = |op: u16, len: u8| -> Result<Inst, Error> {
            let mut m = decode(&[0xBF80_0000]).map_err(|e| Error::CodeObject {
                what: "predecode".into(),
                reason: e.to_string(),
            })?;
            m.op = op;
            m.len = len;
            Ok(m)
        };
        let mut widths: Vec<usize> = Vec::new();
        let mut at = 0usize;
        while at < words.len() {
            let idx = p.insts.len() as u32;
            p.index[at] = idx;
            p.offsets.push(at as u32);
            let mut width = 1;
            let decoded: Result<Inst, (String, u16, u8)> = match crate::cdna3::target(isa) {
                None if isa.is_gfx12() => match decode_in(Gen::Gfx12, &words[at..]) {
                    Ok(raw) => {
                        width = widest(shape_in(Gen::Gfx12, raw.enc, raw.op));
                        crate::rdna4::lower(&raw).map_err(|why| (why, UNIMPL_OP, raw.len))
                    }
                    Err(e) => Err((e.to_string(), INVALID_OP, 1)),
                },
                None => decode(&words[at..])
                    .inspect(|i| width = widest(crate::rdna3::decode::shape(i.enc, i.op)))
                    .map_err(|e| (e.to_string(), INVALID_OP, 1)),
                Some(t) => match crate::cdna3::decode(t, &words[at..]) {
                    Ok(raw) => {
                        width = widest(raw.shape);
                        crate::cdna3::lower(&raw).map_err(|why| (why, UNIMPL_OP, raw.len))
                    }
                    Err(e) => Err((e.to_string(), INVALID_OP, 1)),
                },
            };
            widths.push(width);
            match decoded {
                Ok(i) => {
                    at += i.len as usize;
                    p.insts.push(i);
                }
                Err((why, op, len)) => {
                    p.invalid.push((idx, why));
                    p.insts.push(marker(op, len)?);
                    at += len as usize;
                }
            }
        }
        // A final slot past the end, so falling off the code is an error, not a panic.
        p.index[words.len()] = p.insts.len() as u32;
        p.offsets.push(words.len() as u32);
        p.invalid
            .push((p.insts.len() as u32, "end of .text".into()));
        p.insts.push(marker(INVALID_OP, 1)?);
        widths.push(1);
        p.words = words;
        p.count_rows(&widths);
        p.atoms = p.insts.iter().map(atomic_kind).collect();
        p.fast = (0..p.insts.len())
            .map(|idx| classify(&p.insts, &p.offsets, &p.index, idx))
            .collect();
        Ok(p)
    }

    /// The VGPR and AccVGPR rows the instructions name, each operand taken as wide as the
    /// instruction's widest (plus two rows to spare), so a wave start clears what the program
    /// can reach instead of the whole register file.
    fn count_rows(&mut self, widths: &[usize]) {
        let (mut v, mut a) = (0usize, 0usize);
        for (i, &wd) in self.insts.iter().zip(widths) {
            let codes = [
                i.dst, i.sdst, i.src[0], i.src[1], i.src[2], i.y.dst, i.y.src[0], i.y.src[1],
            ];
            for c in codes {
                let c = c as usize;
                if (256..512).contains(&c) {
                    v = v.max(c - 256 + wd);
                } else if (512..768).contains(&c) {
                    a = a.max(c - 512 + wd);
                }
            }
        }
        self.vgpr_rows = (v + 2).min(256);
        self.agpr_rows = if a == 0 { 0 } else { (a + 2).min(256) };
    }

    /// The atomic operation of instruction `idx`, if it is a FLAT, GLOBAL or MUBUF atomic.
    #[inline]
    pub(crate) fn atom(&self, idx: usize) -> Option<Atom> {
        self.atoms.get(idx).copied().flatten()
    }

    /// The ISA the program was decoded for.
    pub fn isa(&self) -> Isa {
        self.isa
    }

    /// Instruction index at a code virtual address, given where the code lives.
    pub(crate) fn index_of(&self, code_base: u64, addr: u64) -> Option<usize> {
        let off = addr.checked_sub(code_base)?;
        if off % 4 != 0 {
            return None;
        }
        let i = *self.index.get(usize::try_from(off / 4).ok()?)?;
        (i != u32::MAX).then_some(i as usize)
    }

    /// Raw dwords of instruction `idx`.
    pub(crate) fn dwords(&self, idx: usize) -> Vec<u32> {
        let at = self.offsets.get(idx).copied().unwrap_or(0) as usize;
        let len = self.insts.get(idx).map(|i| i.len as usize).unwrap_or(1);
        self.words.iter().skip(at).take(len).copied().collect()
    }

    /// Why instruction `idx` could not be decoded or run.
    pub(crate) fn invalid_reason(&self, idx: usize) -> String {
        self.invalid
            .iter()
            .find(|e| e.0 as usize == idx)
            .map(|e| e.1.clone())
            .unwrap_or_default()
    }

    /// Disassembly of instruction `idx` in its ISA's syntax (for errors).
    pub(crate) fn text(&self, idx: usize) -> String {
        let Some(i) = self.insts.get(idx) else {
            return "?".into();
        };
        match crate::cdna3::target(self.isa) {
            None if self.isa.is_gfx12() => {
                let at = self.offsets.get(idx).copied().unwrap_or(0) as usize;
                match decode_in(Gen::Gfx12, self.words.get(at..).unwrap_or(&[])) {
                    Ok(raw) => raw.to_string(),
                    Err(e) => format!("<{e}>"),
                }
            }
            None => i.to_string(),
            Some(t) => {
                let at = self.offsets.get(idx).copied().unwrap_or(0) as usize;
                match crate::cdna3::decode(t, self.words.get(at..).unwrap_or(&[])) {
                    Ok(raw) => raw.to_string(),
                    Err(e) => format!("<{e}>"),
                }
            }
        }
    }

    /// Disassembly of the whole program, one `offset: text` line per instruction.
    pub fn disassemble(&self) -> Vec<(u64, String)> {
        (0..self.insts.len())
            .filter(|idx| {
                !self
                    .invalid
                    .iter()
                    .any(|e| e.0 as usize == *idx && self.insts[*idx].op == INVALID_OP)
            })
            .map(|idx| {
                let o = self.offsets[idx];
                (self.text_address + 4 * o as u64, self.text(idx))
            })
            .collect()
    }
}
