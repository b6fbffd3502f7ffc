//! Opt-in statistics of executed wave-instructions: by class and by mnemonic.
//!
//! A counted dispatch ([`crate::dispatch_hw_counted`]) runs a second instance of the
//! interpreter's run loop that adds one to a counter per instruction index; the plain run loop
//! has no such step, so a dispatch that does not ask pays nothing. After the dispatch the
//! counters are folded into a [`Histogram`] by the mnemonic and class of each instruction
//! executed, which costs a disassembly per distinct instruction, not per execution.

use std::collections::BTreeMap;

use crate::Program;
use crate::interp::inst::Encoding;

/// What an instruction keeps busy, in the terms of the ISA guides' instruction types.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Class {
    /// Vector ALU (VOP1, VOP2, VOPC, VOP3, VOP3P, VOPD; WMMA and MFMA).
    Valu,
    /// Scalar ALU (SOP1, SOP2, SOPK, SOPC).
    Salu,
    /// Vector memory: global, flat, scratch and buffer loads, stores and atomics.
    VectorMemory,
    /// Scalar memory (SMEM loads).
    ScalarMemory,
    /// LDS (DS instructions).
    Lds,
    /// Waits on memory counters (`s_waitcnt*`, gfx12's `s_wait_*`).
    Wait,
    /// Program control and everything else: branches, `s_endpgm`, `s_barrier`, `s_nop`,
    /// `s_delay_alu`, messages.
    Other,
}

impl Class {
    /// Every class, in the order of [`Histogram::classes`].
    pub const ALL: [Class; 7] = [
        Class::Valu,
        Class::Salu,
        Class::VectorMemory,
        Class::ScalarMemory,
        Class::Lds,
        Class::Wait,
        Class::Other,
    ];

    /// A short name for tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Class::Valu => "valu",
            Class::Salu => "salu",
            Class::VectorMemory => "vmem",
            Class::ScalarMemory => "smem",
            Class::Lds => "lds",
            Class::Wait => "wait",
            Class::Other => "other",
        }
    }

    /// The class of an instruction of the interpreter's form, whose mnemonic in its ISA's
    /// syntax is `mnemonic` (the operations only CDNA or gfx12 has are known by it).
    pub(crate) fn of(enc: Encoding, mnemonic: &str) -> Class {
        use Encoding::*;
        match enc {
            Sop1 | Sop2 | Sopk | Sopc => Class::Salu,
            Sopp if mnemonic.starts_with("s_wait") => Class::Wait,
            Sopp => Class::Other,
            Smem => Class::ScalarMemory,
            Vop1 | Vop2 | Vopc | Vop3 | Vop3sd | Vop3p | Vopd => Class::Valu,
            Ds => Class::Lds,
            Flat | Global | Scratch | Mubuf | Mtbuf => Class::VectorMemory,
            Ext | Rdna4 => Class::of_mnemonic(mnemonic),
        }
    }

    /// The class of an instruction known only by its mnemonic.
    fn of_mnemonic(m: &str) -> Class {
        const VMEM: [&str; 5] = ["global_", "flat_", "scratch_", "buffer_", "tbuffer_"];
        if m.starts_with("s_wait") {
            Class::Wait
        } else if m.starts_with("v_") {
            Class::Valu
        } else if m.starts_with("ds_") {
            Class::Lds
        } else if VMEM.iter().any(|p| m.starts_with(p)) {
            Class::VectorMemory
        } else if m.starts_with("s_load") || m.starts_with("s_buffer_load") {
            Class::ScalarMemory
        } else if m.starts_with("s_") {
            Class::Salu
        } else {
            Class::Other
        }
    }
}

/// Executed wave-instructions (one per instruction per wave, whatever EXEC is, as
/// [`crate::Stats::instructions`] counts them) by class and by mnemonic.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Histogram {
    /// By class, indexed as [`Class::ALL`].
    pub classes: [u64; 7],
    /// By mnemonic in the ISA's syntax (`v_fmac_f32_e32`, `global_load_b128`, ...).
    pub mnemonics: BTreeMap<String, u64>,
}

impl Histogram {
    /// All wave-instructions counted.
    pub fn total(&self) -> u64 {
        self.classes.iter().sum()
    }

    /// Wave-instructions of class `c`.
    pub fn class(&self, c: Class) -> u64 {
        self.classes[c as usize]
    }

    /// Adds another histogram's counts to this one.
    pub fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.classes.iter_mut().zip(other.classes) {
            *a += b;
        }
        for (m, n) in &other.mnemonics {
            *self.mnemonics.entry(m.clone()).or_default() += n;
        }
    }

    /// Folds per-instruction-index counts of a dispatch of `program` into this histogram.
    pub(crate) fn fold(&mut self, program: &Program, counts: &[u64]) {
        for (idx, &n) in counts.iter().enumerate() {
            if n == 0 {
                continue;
            }
            let Some(i) = program.insts.get(idx) else {
                continue;
            };
            let text = program.text(idx);
            let mnemonic = text.split_whitespace().next().unwrap_or("?");
            self.classes[Class::of(i.enc, mnemonic) as usize] += n;
            match self.mnemonics.get_mut(mnemonic) {
                Some(c) => *c += n,
                None => {
                    self.mnemonics.insert(mnemonic.to_string(), n);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{HostMemory, HwDispatch, Isa, Memory, dispatch_hw, dispatch_hw_counted};

    /// A gfx1100 kernel of every class, with a loop of three turns: it doubles 64 floats in
    /// place through the buffer whose address is at `s[0:1]`, also storing them to LDS.
    const KERNEL: [u32; 17] = [
        0xf404_0000,
        0xf800_0000, // s_load_b64 s[0:1], s[0:1], 0x0
        0xbf89_fc07, // s_waitcnt lgkmcnt(0)
        0x3002_0082, // v_lshlrev_b32_e32 v1, 2, v0
        0xdc52_0000,
        0x0200_0001, // global_load_b32 v2, v1, s[0:1]
        0xbf89_03f7, // s_waitcnt vmcnt(0)
        0x0604_0502, // v_add_f32_e32 v2, v2, v2
        0xbe82_0083, // s_mov_b32 s2, 3
        0x8082_8102, // loop: s_sub_u32 s2, s2, 1
        0xbf07_8002, // s_cmp_lg_u32 s2, 0
        0xbfa2_fffd, // s_cbranch_scc1 loop
        0xd834_0000,
        0x0000_0201, // ds_store_b32 v1, v2
        0xdc6a_0000,
        0x0000_0201, // global_store_b32 v1, v2, s[0:1]
        0xbfb0_0000, // s_endpgm
    ];

    fn setup() -> (crate::Program, HwDispatch, HostMemory, u64) {
        let code: Vec<u8> = KERNEL.iter().flat_map(|w| w.to_le_bytes()).collect();
        let prog = crate::Program::from_bytes(&code, 0x1000, Isa::Gfx1100).unwrap();
        let mut mem = HostMemory::new();
        let data: Vec<u8> = (0..64).flat_map(|i| (i as f32).to_le_bytes()).collect();
        let buf = mem.alloc_bytes(&data);
        let karg = mem.alloc_bytes(&buf.to_le_bytes());
        let hw = HwDispatch {
            name: "classes".into(),
            entry: 0x1000,
            rsrc2: 2 << 1,
            user_sgprs: vec![karg as u32, (karg >> 32) as u32],
            wave_size: 32,
            grid: [64, 1, 1],
            workgroup: [64, 1, 1],
            lds_bytes: 256,
            ..HwDispatch::default()
        };
        (prog, hw, mem, buf)
    }

    #[test]
    fn a_counted_dispatch_gives_exact_class_and_mnemonic_counts() {
        let (prog, hw, mut mem, buf) = setup();
        let mut h = Histogram::default();
        let stats = dispatch_hw_counted(&prog, 0x1000, &hw, &mut mem, &mut h).unwrap();
        // The kernel ran: every float doubled.
        let mut out = [0u8; 256];
        mem.read(buf, &mut out).unwrap();
        for (i, c) in out.chunks(4).enumerate() {
            assert_eq!(f32::from_le_bytes(c.try_into().unwrap()), 2.0 * i as f32);
        }
        // Two waves, each: 1 SMEM, 2 waits, 2 VALU, 2 vector memory, 1 + 3 × 2 SALU, 1 LDS,
        // 3 branches and s_endpgm.
        assert_eq!(stats.waves, 2);
        let want = [
            (Class::Valu, 4),
            (Class::Salu, 14),
            (Class::VectorMemory, 4),
            (Class::ScalarMemory, 2),
            (Class::Lds, 2),
            (Class::Wait, 4),
            (Class::Other, 8),
        ];
        for (c, n) in want {
            assert_eq!(h.class(c), n, "{c:?}");
        }
        assert_eq!(h.total(), 38);
        assert_eq!(h.total(), stats.instructions);
        let m = |name: &str| h.mnemonics.get(name).copied();
        assert_eq!(m("s_sub_u32"), Some(6));
        assert_eq!(m("s_cbranch_scc1"), Some(6));
        assert_eq!(m("s_waitcnt"), Some(4));
        assert_eq!(m("global_load_b32"), Some(2));
        assert_eq!(m("ds_store_b32"), Some(2));
        assert_eq!(m("s_endpgm"), Some(2));
        assert_eq!(h.mnemonics.values().sum::<u64>(), 38);
        // Counting again adds to the same histogram; the plain dispatch reports the same
        // totals.
        let (prog, hw, mut mem, _) = setup();
        dispatch_hw_counted(&prog, 0x1000, &hw, &mut mem, &mut h).unwrap();
        assert_eq!(h.class(Class::Salu), 28);
        let (prog, hw, mut mem, _) = setup();
        assert_eq!(dispatch_hw(&prog, 0x1000, &hw, &mut mem).unwrap(), stats);
    }

    #[test]
    fn a_stopped_dispatch_counts_what_it_executed() {
        let (prog, mut hw, mut mem, _) = setup();
        hw.instruction_limit = Some(5);
        let mut h = Histogram::default();
        let r = dispatch_hw_counted(&prog, 0x1000, &hw, &mut mem, &mut h);
        assert!(matches!(r, Err(crate::Error::Stopped { .. })), "{r:?}");
        // The first wave's first five instructions, the one the limit stopped at included
        // (as the instruction count has always had it): s_load, wait, v_lshlrev,
        // global_load, wait... and the stop at the sixth.
        assert_eq!(h.total(), 6);
        assert_eq!(h.class(Class::Wait), 2);
        assert_eq!(h.class(Class::Valu), 2);
    }

    #[test]
    fn classes_of_mnemonics_the_lowered_encodings_carry() {
        assert_eq!(Class::of_mnemonic("v_mfma_f32_32x32x8_f16"), Class::Valu);
        assert_eq!(Class::of_mnemonic("s_wait_loadcnt"), Class::Wait);
        assert_eq!(Class::of_mnemonic("buffer_load_dword"), Class::VectorMemory);
        assert_eq!(Class::of_mnemonic("ds_read_b128"), Class::Lds);
        assert_eq!(Class::of_mnemonic("s_load_dwordx2"), Class::ScalarMemory);
        assert_eq!(Class::of_mnemonic("s_add_u32"), Class::Salu);
    }
}
