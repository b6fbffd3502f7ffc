//! Disassembly of gfx942/gfx950 instructions in LLVM's syntax, so decoded instructions can be
//! compared with `llvm-mc` and `llvm-objdump` text. Symbolic immediates (`hwreg(...)`,
//! `sendmsg(...)`, `swizzle(...)`, `gpr_idx(...)`) print as plain numbers.

use super::decode::{
    AGPR0, Encoding, Extra, Inst, LITERAL, NONE, VGPR0, flag, shape_len, shape_regs,
};
use std::fmt;

/// Name of a register range starting at operand code `code`, `n` registers long, or of an
/// inline constant, in GFX9 spelling.
pub fn operand(code: u16, n: u16, literal: u32) -> String {
    let range = |p: &str, base: u16| {
        if n <= 1 {
            format!("{p}{base}")
        } else {
            format!("{p}[{}:{}]", base, base + n - 1)
        }
    };
    let pair = |lo: &str, hi: &str, both: &str, odd: bool| -> String {
        if n == 2 && !odd {
            both.into()
        } else if odd {
            hi.into()
        } else {
            lo.into()
        }
    };
    match code {
        0..=101 => range("s", code),
        102 | 103 => pair(
            "flat_scratch_lo",
            "flat_scratch_hi",
            "flat_scratch",
            code == 103,
        ),
        104 | 105 => pair("xnack_mask_lo", "xnack_mask_hi", "xnack_mask", code == 105),
        106 | 107 => pair("vcc_lo", "vcc_hi", "vcc", code == 107),
        108..=123 => range("ttmp", code - 108),
        124 => "m0".into(),
        126 | 127 => pair("exec_lo", "exec_hi", "exec", code == 127),
        128..=192 => format!("{}", code - 128),
        193..=208 => format!("-{}", code - 192),
        235 => "src_shared_base".into(),
        236 => "src_shared_limit".into(),
        237 => "src_private_base".into(),
        238 => "src_private_limit".into(),
        239 => "src_pops_exiting_wave_id".into(),
        240 => "0.5".into(),
        241 => "-0.5".into(),
        242 => "1.0".into(),
        243 => "-1.0".into(),
        244 => "2.0".into(),
        245 => "-2.0".into(),
        246 => "4.0".into(),
        247 => "-4.0".into(),
        248 => "0.15915494".into(),
        251 => "src_vccz".into(),
        252 => "src_execz".into(),
        253 => "src_scc".into(),
        254 => "src_lds_direct".into(),
        // A literal whose value an inline constant could encode is marked as such.
        LITERAL if crate::rdna3::print::is_inline32(literal) => format!("lit(0x{literal:x})"),
        LITERAL => format!("0x{literal:x}"),
        VGPR0..AGPR0 => range("v", code - VGPR0),
        AGPR0..=767 => range("a", code - AGPR0),
        _ => format!("?{code}"),
    }
}

fn with_mods(s: String, neg: bool, abs: bool) -> String {
    let s = if abs { format!("|{s}|") } else { s };
    if neg { format!("-{s}") } else { s }
}

/// LLVM prints 16-bit immediates that are inline integers in decimal, others in hex.
fn u16_imm(imm: u32) -> String {
    if imm <= 64 {
        format!("{imm}")
    } else {
        format!("0x{imm:x}")
    }
}

/// GFX9 `s_waitcnt`: vmcnt in bits 3:0 and 15:14, expcnt 6:4, lgkmcnt 11:8.
fn waitcnt(imm: u32) -> String {
    let vm = (imm & 0xf) | ((imm >> 14) & 3) << 4;
    let (exp, lgkm) = ((imm >> 4) & 7, (imm >> 8) & 0xf);
    let mut parts = vec![];
    if vm != 0x3f {
        parts.push(format!("vmcnt({vm})"));
    }
    if exp != 7 {
        parts.push(format!("expcnt({exp})"));
    }
    if lgkm != 0xf {
        parts.push(format!("lgkmcnt({lgkm})"));
    }
    if parts.is_empty() {
        return "vmcnt(63) expcnt(7) lgkmcnt(15)".into();
    }
    parts.join(" ")
}

fn sel_name(s: u8) -> &'static str {
    [
        "BYTE_0", "BYTE_1", "BYTE_2", "BYTE_3", "WORD_0", "WORD_1", "DWORD", "7",
    ]
    .get(s as usize)
    .copied()
    .unwrap_or("?")
}

fn dpp_text(ctrl: u16, row_mask: u8, bank_mask: u8, bound_ctrl: bool) -> String {
    let c = ctrl as u32;
    let sel = match c {
        0..=0xff => format!(
            "quad_perm:[{},{},{},{}]",
            c & 3,
            (c >> 2) & 3,
            (c >> 4) & 3,
            (c >> 6) & 3
        ),
        0x101..=0x10f => format!("row_shl:{}", c & 0xf),
        0x111..=0x11f => format!("row_shr:{}", c & 0xf),
        0x121..=0x12f => format!("row_ror:{}", c & 0xf),
        0x130 => "wave_shl:1".into(),
        0x134 => "wave_rol:1".into(),
        0x138 => "wave_shr:1".into(),
        0x13c => "wave_ror:1".into(),
        0x140 => "row_mirror".into(),
        0x141 => "row_half_mirror".into(),
        0x142 => "row_bcast:15".into(),
        0x143 => "row_bcast:31".into(),
        0x150..=0x15f => format!("row_newbcast:{}", c & 0xf),
        _ => format!("dpp_ctrl:{c:#x}"),
    };
    format!(
        " {sel} row_mask:{row_mask:#x} bank_mask:{bank_mask:#x}{}",
        if bound_ctrl { " bound_ctrl:1" } else { "" }
    )
}

fn bits_list(v: u8, n: usize) -> String {
    let l: Vec<String> = (0..n).map(|k| format!("{}", (v >> k) & 1)).collect();
    format!("[{}]", l.join(","))
}

/// Whether a VALU mnemonic of the 32-bit encodings also has a VOP3 (`_e64`) form, and the
/// other way round: LLVM then adds `_e32` / `_e64` to the mnemonic.
fn has_other_form(i: &Inst) -> bool {
    use super::decode::lookup;
    let t = super::decode::Target::Gfx950;
    let same = |enc: Encoding, op: u16| lookup(t, enc, op).is_some_and(|(n, _)| n == i.name);
    match i.enc {
        Encoding::Vopc => same(Encoding::Vop3, i.op),
        Encoding::Vop2 => same(Encoding::Vop3, i.op + 0x100),
        Encoding::Vop1 => same(Encoding::Vop3, i.op + 0x140),
        Encoding::Vop3 => match i.op {
            0..=0xff => same(Encoding::Vopc, i.op),
            0x100..=0x13f => same(Encoding::Vop2, i.op - 0x100),
            0x140..=0x1bf => same(Encoding::Vop1, i.op - 0x140),
            _ => false,
        },
        _ => false,
    }
}

impl fmt::Display for Inst {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = self.name;
        let shp = self.shape;
        let n = shape_len(shp);
        let regs = |k: usize| shape_regs(shp, k);
        let lit = self.literal;
        let mut ops: Vec<String> = vec![];
        let mut tail = String::new();
        use Encoding::*;
        let mut mnemonic = name.to_string();
        match self.enc {
            Sop1 | Sop2 | Sopc => {
                let mut k = 0;
                let no_dst = self.enc == Sopc || (self.enc == Sop2 && n == 2);
                if self.dst != NONE && !no_dst {
                    ops.push(operand(self.dst, regs(0), lit));
                    k = 1;
                }
                for (s, &code) in self.src.iter().enumerate().take(n.saturating_sub(k)) {
                    if name == "s_set_gpr_idx_on" && s == 1 {
                        ops.push(format!("gpr_idx({code})"));
                    } else {
                        ops.push(operand(code, regs(k + s), lit));
                    }
                }
            }
            Sopk => {
                let imm = self.imm as u32;
                match name {
                    "s_setreg_b32" => {
                        ops.push(format!("hwreg({imm})"));
                        ops.push(operand(self.dst, 1, lit));
                    }
                    "s_setreg_imm32_b32" => {
                        ops.push(format!("hwreg({imm})"));
                        ops.push(format!("0x{lit:x}"));
                    }
                    "s_getreg_b32" => {
                        ops.push(operand(self.dst, 1, lit));
                        ops.push(format!("hwreg({imm})"));
                    }
                    "s_call_b64" => {
                        ops.push(operand(self.dst, regs(0), lit));
                        ops.push(format!("{imm}"));
                    }
                    "s_cbranch_i_fork" => {
                        ops.push(operand(self.dst, regs(0), lit));
                        ops.push(format!("{imm}"));
                    }
                    _ => {
                        ops.push(operand(self.dst, regs(0), lit));
                        ops.push(format!("0x{imm:x}"));
                    }
                }
            }
            Sopp => {
                let imm = self.imm as u32;
                match name {
                    "s_barrier"
                    | "s_wakeup"
                    | "s_icache_inv"
                    | "s_ttracedata"
                    | "s_endpgm_saved"
                    | "s_endpgm_ordered_ps_done"
                    | "s_set_gpr_idx_off" => {}
                    "s_waitcnt" => ops.push(waitcnt(imm)),
                    "s_sendmsg" | "s_sendmsghalt" => ops.push(format!("sendmsg({imm})")),
                    "s_set_gpr_idx_mode" => ops.push(format!("gpr_idx({imm})")),
                    _ if name.starts_with("s_branch") || name.starts_with("s_cbranch") => {
                        ops.push(format!("{imm}"))
                    }
                    "s_endpgm" => {
                        if imm != 0 {
                            ops.push(format!("{imm}"))
                        }
                    }
                    _ => ops.push(u16_imm(imm)),
                }
            }
            Smem => {
                if n > 0 {
                    if name.starts_with("s_atc_probe") {
                        ops.push(format!("{}", self.dst));
                    } else if !(name == "s_dcache_discard" || name == "s_dcache_discard_x2") {
                        ops.push(operand(self.dst, regs(0), lit));
                    }
                    let base_k = ops.len();
                    if n == 1 {
                        // s_memtime, s_memrealtime: a destination only.
                    } else {
                        ops.push(operand(self.src[0], regs(base_k), lit));
                        if self.saddr != NONE {
                            ops.push(operand(self.saddr, 1, lit));
                            if self.imm != 0 {
                                tail.push_str(&format!(" offset:{}", hex_signed(self.imm)));
                            }
                        } else {
                            ops.push(hex_signed(self.imm));
                        }
                    }
                }
                if self.flags & flag::GLC != 0 {
                    tail.push_str(" glc");
                }
            }
            Vop1 | Vop2 | Vopc | Vop3 => {
                mnemonic = match (self.enc, self.extra) {
                    (_, Extra::Sdwa { .. }) => format!("{name}_sdwa"),
                    (_, Extra::Dpp { .. }) => format!("{name}_dpp"),
                    (Vop3, _) if has_other_form(self) => format!("{name}_e64"),
                    (Vop3, _) => name.to_string(),
                    _ if has_other_form(self) => format!("{name}_e32"),
                    _ => name.to_string(),
                };
                self.fmt_valu(&mut ops, &mut tail);
            }
            Vop3p => {
                let mai = matches!(self.extra, Extra::Mai { .. });
                let mix = name.contains("_mix");
                // v_mfma_ld_scale_b32 has two sources and no destination.
                let first = usize::from(name == "v_mfma_ld_scale_b32");
                for k in 0..n {
                    let code = if k + first == 0 {
                        self.dst
                    } else {
                        self.src[k + first - 1]
                    };
                    let t = operand(code, regs(k), lit);
                    let m = k.wrapping_sub(1);
                    ops.push(if mix && k > 0 {
                        with_mods(t, self.neg >> m & 1 != 0, self.abs >> m & 1 != 0)
                    } else {
                        t
                    });
                }
                if let Extra::Mai { cbsz, abid, blgp } = self.extra {
                    if cbsz != 0 {
                        tail.push_str(&format!(" cbsz:{cbsz}"));
                    }
                    if abid != 0 {
                        tail.push_str(&format!(" abid:{abid}"));
                    }
                    if blgp != 0 && name.ends_with("_f64") {
                        // The f64 MFMAs use the field as source negation.
                        tail.push_str(&format!(" neg:{}", bits_list(blgp, 3)));
                    } else if blgp != 0 {
                        tail.push_str(&format!(" blgp:{blgp}"));
                    }
                } else if !mai {
                    let ns = n.saturating_sub(1 - first);
                    let def_hi = if mix { 0 } else { (1u8 << ns) - 1 };
                    let mask = (1u8 << ns) - 1;
                    if self.opsel & mask != 0 {
                        tail.push_str(&format!(" op_sel:{}", bits_list(self.opsel, ns)));
                    }
                    if self.opsel_hi & mask != def_hi {
                        tail.push_str(&format!(" op_sel_hi:{}", bits_list(self.opsel_hi, ns)));
                    }
                    if !mix && self.neg & mask != 0 {
                        tail.push_str(&format!(" neg_lo:{}", bits_list(self.neg, ns)));
                    }
                    if !mix && self.abs & mask != 0 {
                        tail.push_str(&format!(" neg_hi:{}", bits_list(self.abs, ns)));
                    }
                    if self.clamp {
                        tail.push_str(" clamp");
                    }
                }
            }
            Ds => {
                let rtn = name.contains("_rtn")
                    || name.starts_with("ds_read")
                    || name.starts_with("ds_swizzle")
                    || name.starts_with("ds_permute")
                    || name.starts_with("ds_bpermute")
                    || name.starts_with("ds_consume")
                    || name.starts_with("ds_append");
                let mut codes = vec![];
                if rtn {
                    codes.push(self.dst);
                }
                if !(name.starts_with("ds_append") || name.starts_with("ds_consume")) {
                    if name.starts_with("ds_gws") {
                        codes.push(self.src[1]);
                    } else {
                        codes.extend([self.src[0], self.src[1], self.src[2]]);
                    }
                }
                for (k, c) in codes.into_iter().take(n).enumerate() {
                    ops.push(operand(c, regs(k), lit));
                }
                let two = ["read2", "write2", "wrxchg2"]
                    .iter()
                    .any(|p| name.contains(p));
                if two {
                    if self.imm != 0 {
                        tail.push_str(&format!(" offset0:{}", self.imm));
                    }
                    if self.imm2 != 0 {
                        tail.push_str(&format!(" offset1:{}", self.imm2));
                    }
                } else {
                    let off = self.imm as u32 | (self.imm2 as u32) << 8;
                    if name == "ds_swizzle_b32" && off != 0 {
                        tail.push_str(&format!(" offset:swizzle({off})"));
                    } else if off != 0 {
                        tail.push_str(&format!(" offset:{off}"));
                    }
                }
                if self.flags & flag::GDS != 0 {
                    tail.push_str(" gds");
                }
            }
            Flat | Global | Scratch => {
                let atomic = name.contains("atomic");
                let w = if name.ends_with("_x2") || name.ends_with("64") {
                    2
                } else {
                    1
                };
                let data_regs = if name.contains("cmpswap") { 2 * w } else { w };
                let lds = name.contains("_lds_");
                let load = if atomic {
                    self.flags & flag::SC0 != 0
                } else {
                    n > 0 && !name.contains("store") && !lds
                };
                let mut k = 0;
                if load {
                    ops.push(operand(self.dst, if atomic { w } else { regs(0) }, lit));
                    k = 1;
                }
                let vaddr = match self.enc {
                    Flat => operand(self.src[0], 2, lit),
                    Global if self.saddr == NONE => operand(self.src[0], 2, lit),
                    Scratch if self.flags & flag::SVE == 0 => "off".into(),
                    _ => operand(self.src[0], 1, lit),
                };
                ops.push(vaddr);
                k += 1;
                if atomic {
                    ops.push(operand(self.src[1], data_regs, lit));
                } else if !load && !lds {
                    ops.push(operand(self.src[1], regs(k), lit));
                }
                if self.enc != Flat {
                    ops.push(if self.saddr == NONE {
                        "off".into()
                    } else {
                        operand(self.saddr, if self.enc == Global { 2 } else { 1 }, lit)
                    });
                }
                if self.imm != 0 {
                    tail.push_str(&format!(" offset:{}", self.imm));
                }
                cache_bits(self.flags, &mut tail);
            }
            Mubuf | Mtbuf => {
                if n > 0 {
                    let lds = self.flags & flag::LDS != 0;
                    if !lds {
                        let atomic = name.contains("atomic");
                        let w = if name.ends_with("_x2") || name.ends_with("64") {
                            2
                        } else {
                            1
                        };
                        let data = if atomic && name.contains("cmpswap") {
                            2 * w
                        } else if atomic {
                            w
                        } else {
                            regs(0)
                        };
                        ops.push(operand(self.dst, data, lit));
                    }
                    let both = self.flags & flag::OFFEN != 0 && self.flags & flag::IDXEN != 0;
                    ops.push(if self.flags & (flag::OFFEN | flag::IDXEN) == 0 {
                        "off".into()
                    } else {
                        operand(self.src[0], if both { 2 } else { 1 }, lit)
                    });
                    ops.push(operand(self.srsrc, 4, lit));
                    ops.push(operand(self.saddr, 1, lit));
                    if self.enc == Mtbuf {
                        tail.push_str(&tbuffer_format(self.imm2));
                    }
                    if self.flags & flag::IDXEN != 0 {
                        tail.push_str(" idxen");
                    }
                    if self.flags & flag::OFFEN != 0 {
                        tail.push_str(" offen");
                    }
                    if self.imm != 0 {
                        tail.push_str(&format!(" offset:{}", self.imm));
                    }
                    cache_bits(self.flags, &mut tail);
                    if lds {
                        tail.push_str(" lds");
                    }
                } else {
                    cache_bits(self.flags, &mut tail);
                }
            }
        }
        f.write_str(&mnemonic)?;
        if !ops.is_empty() {
            write!(f, " {}", ops.join(", "))?;
        }
        f.write_str(&tail)
    }
}

/// The MTBUF data and number formats, omitting the defaults (8-bit, unorm) as LLVM does.
fn tbuffer_format(f: u16) -> String {
    const DFMT: [&str; 16] = [
        "INVALID",
        "8",
        "16",
        "8_8",
        "32",
        "16_16",
        "10_11_11",
        "11_11_10",
        "10_10_10_2",
        "2_10_10_10",
        "8_8_8_8",
        "32_32",
        "16_16_16_16",
        "32_32_32",
        "32_32_32_32",
        "RESERVED_15",
    ];
    const NFMT: [&str; 8] = [
        "UNORM",
        "SNORM",
        "USCALED",
        "SSCALED",
        "UINT",
        "SINT",
        "RESERVED_6",
        "FLOAT",
    ];
    let (d, n) = ((f & 0xf) as usize, (f >> 4 & 7) as usize);
    let mut parts = vec![];
    if d != 1 {
        parts.push(format!("BUF_DATA_FORMAT_{}", DFMT[d]));
    }
    if n != 0 {
        parts.push(format!("BUF_NUM_FORMAT_{}", NFMT[n]));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!(" format:[{}]", parts.join(","))
    }
}

fn hex_signed(v: i32) -> String {
    if v < 0 {
        format!("-0x{:x}", v.unsigned_abs())
    } else {
        format!("0x{v:x}")
    }
}

fn cache_bits(flags: u16, tail: &mut String) {
    for (b, s) in [(flag::SC0, " sc0"), (flag::NT, " nt"), (flag::SC1, " sc1")] {
        if flags & b != 0 {
            tail.push_str(s);
        }
    }
}

impl Inst {
    fn fmt_valu(&self, ops: &mut Vec<String>, tail: &mut String) {
        use Encoding::*;
        let lit = self.literal;
        let name = self.name;
        let shp = self.shape;
        let n = shape_len(shp);
        let regs = |k: usize| shape_regs(shp, k);
        let sdwa = matches!(self.extra, Extra::Sdwa { .. });
        let e32 = matches!(self.enc, Vop1 | Vop2 | Vopc);
        // Destinations in LLVM order: VOPC writes VCC (or an SDWA sdst); carry ops and
        // VOP3b also write a scalar.
        let carry = matches!(
            name,
            "v_add_co_u32"
                | "v_sub_co_u32"
                | "v_subrev_co_u32"
                | "v_addc_co_u32"
                | "v_subb_co_u32"
                | "v_subbrev_co_u32"
        );
        if n == 0 {
            return;
        }
        let k = match self.enc {
            Vopc => {
                ops.push(operand(self.dst, 2, lit));
                1
            }
            _ => {
                ops.push(operand(self.dst, regs(0), lit));
                if e32 && carry {
                    ops.push("vcc".into());
                    2
                } else if self.enc == Vop3 && super::decode::is_vop3b(name) {
                    ops.push(operand(self.sdst, regs(1), lit));
                    2
                } else {
                    1
                }
            }
        };
        let mut nsrc = n.saturating_sub(k);
        // The VCC carry-in / select of the 32-bit forms is printed but not encoded.
        let implicit_vcc = e32
            && (name == "v_cndmask_b32"
                || name.starts_with("v_addc_co")
                || name.starts_with("v_subb"));
        if implicit_vcc {
            nsrc = nsrc.saturating_sub(1);
        }
        let mk = matches!(name, "v_fmamk_f32" | "v_madmk_f16" | "v_madmk_f32");
        let ak = matches!(name, "v_fmaak_f32" | "v_madak_f16" | "v_madak_f32");
        if mk || ak {
            nsrc = 2;
        }
        for s in 0..nsrc.min(3) {
            let t = k + s + usize::from(mk && s == 1);
            let mut txt = operand(self.src[s], regs(t), lit);
            if let Extra::Sdwa { sext, .. } = self.extra
                && s < 2
                && sext[s]
            {
                txt = format!("sext({txt})");
            }
            ops.push(with_mods(
                txt,
                self.neg >> s & 1 != 0,
                self.abs >> s & 1 != 0,
            ));
            if mk && s == 0 {
                ops.push(format!("0x{lit:x}"));
            }
        }
        if ak {
            ops.push(format!("0x{lit:x}"));
        }
        if implicit_vcc {
            ops.push("vcc".into());
        }
        if name.starts_with("v_bitop3") && self.imm != 0 {
            let b = self.imm;
            tail.push_str(&if b <= 10 {
                format!(" bitop3:{b}")
            } else {
                format!(" bitop3:0x{b:x}")
            });
        }
        if self.enc == Vop3 && self.opsel != 0 {
            // Conversions that write part of the destination print all four bits.
            let four = name.starts_with("v_cvt_sr_")
                || name.starts_with("v_cvt_scalef32_sr_")
                || name.starts_with("v_cvt_scalef32_pk_fp")
                || name.starts_with("v_cvt_scalef32_pk_bf8")
                || name.starts_with("v_ashr_pk_");
            let ns = if four { 3 } else { nsrc.min(3) };
            let mut v = self.opsel & ((1 << ns) - 1);
            v |= (self.opsel >> 3 & 1) << ns;
            tail.push_str(&format!(" op_sel:{}", bits_list(v, ns + 1)));
        }
        if self.enc == Vop3 || sdwa {
            if self.clamp {
                tail.push_str(" clamp");
            }
            match self.omod {
                1 => tail.push_str(" mul:2"),
                2 => tail.push_str(" mul:4"),
                3 => tail.push_str(" div:2"),
                _ => {}
            }
        }
        match self.extra {
            Extra::Sdwa {
                dst_sel,
                dst_unused,
                src_sel,
                ..
            } => {
                if self.enc != Vopc {
                    let unused = ["UNUSED_PAD", "UNUSED_SEXT", "UNUSED_PRESERVE", "3"];
                    tail.push_str(&format!(
                        " dst_sel:{} dst_unused:{}",
                        sel_name(dst_sel),
                        unused[dst_unused as usize & 3]
                    ));
                }
                tail.push_str(&format!(" src0_sel:{}", sel_name(src_sel[0])));
                if self.enc != Vop1 {
                    tail.push_str(&format!(" src1_sel:{}", sel_name(src_sel[1])));
                }
            }
            Extra::Dpp {
                ctrl,
                row_mask,
                bank_mask,
                bound_ctrl,
            } => tail.push_str(&dpp_text(ctrl, row_mask, bank_mask, bound_ctrl)),
            _ => {}
        }
    }
}
