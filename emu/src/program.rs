//! A predecoded program: every instruction of `.text` decoded once into [`Inst`]s, plus a map
//! from dword offset to instruction index for branches and `s_setpc_b64`.

use crate::rdna3::{Inst, decode};
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
    /// Decode failures, by instruction index, so executing one reports it.
    pub(crate) invalid: Vec<(u32, String)>,
    pub(crate) words: Vec<u32>,
    /// Virtual address of `.text` (the code object's; the dispatch may move it).
    pub(crate) text_address: u64,
}

/// Opcode marking an undecodable slot (never a real SOPP opcode).
pub(crate) const INVALID_OP: u16 = u16::MAX;

impl Program {
    /// Decodes all of `.text` of a code object for `isa`.
    pub fn new(code: &CodeObject, isa: Isa) -> Result<Program, Error> {
        Program::from_bytes(&code.text, code.text_address, isa)
    }

    /// Decodes raw code bytes that live at GPU virtual address `address` (for a dispatch whose
    /// code the mock read from GPU memory). Words that do not decode become slots that fail
    /// with [`Error::InvalidInstruction`] only if executed.
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
            words: words.clone(),
            text_address: address,
        };
        let mut at = 0usize;
        while at < words.len() {
            let idx = p.insts.len() as u32;
            p.index[at] = idx;
            p.offsets.push(at as u32);
            match decode(&words[at..]) {
                Ok(i) => {
                    at += i.len as usize;
                    p.insts.push(i);
                }
                Err(e) => {
                    p.invalid.push((idx, e.to_string()));
                    let mut bad = decode(&[0xBF80_0000]).map_err(|e| Error::CodeObject {
                        what: "predecode".into(),
                        reason: e.to_string(),
                    })?;
                    bad.op = INVALID_OP;
                    p.insts.push(bad);
                    at += 1;
                }
            }
        }
        // A final slot past the end, so falling off the code is an error, not a panic.
        p.index[words.len()] = p.insts.len() as u32;
        p.offsets.push(words.len() as u32);
        let mut end = decode(&[0xBF80_0000]).map_err(|e| Error::CodeObject {
            what: "predecode".into(),
            reason: e.to_string(),
        })?;
        end.op = INVALID_OP;
        p.invalid
            .push((p.insts.len() as u32, "end of .text".into()));
        p.insts.push(end);
        Ok(p)
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

    /// Why instruction `idx` could not be decoded.
    pub(crate) fn invalid_reason(&self, idx: usize) -> String {
        self.invalid
            .iter()
            .find(|e| e.0 as usize == idx)
            .map(|e| e.1.clone())
            .unwrap_or_default()
    }

    /// Disassembly of the whole program, one `offset: text` line per instruction.
    pub fn disassemble(&self) -> Vec<(u64, String)> {
        self.insts
            .iter()
            .zip(&self.offsets)
            .enumerate()
            .filter(|(idx, _)| !self.invalid.iter().any(|e| e.0 as usize == *idx))
            .map(|(_, (i, &o))| (self.text_address + 4 * o as u64, i.to_string()))
            .collect()
    }
}
