//! Disassembly in LLVM's syntax, so decoded instructions can be compared with `llvm-mc` and
//! `llvm-objdump` text. Symbolic immediates that only the trap handler and graphics use
//! (`hwreg(...)`, `sendmsg(...)`, `depctr_*`) print as plain numbers.

use super::decode::{
    Dpp, Encoding, Gen, Inst, LITERAL, NULL, VGPR0, flag, shape_in, shape_is_16, shape_regs, table,
    valu_dst_count_in,
};
use std::fmt::{self, Write};

/// Name of a register range starting at operand code `code` and `n` registers long
/// (`hi`: 16-bit high half), or of an inline constant.
pub fn operand(code: u16, n: u16, half: Option<bool>, literal: u32) -> String {
    let range = |p: &str, base: u16| {
        if n <= 1 {
            format!("{p}{base}")
        } else {
            format!("{p}[{}:{}]", base, base + n - 1)
        }
    };
    match code {
        0..=105 => range("s", code),
        106 if n == 2 => "vcc".into(),
        106 => "vcc_lo".into(),
        107 => "vcc_hi".into(),
        108..=123 => range("ttmp", code - 108),
        124 => "null".into(),
        125 => "m0".into(),
        126 if n == 2 => "exec".into(),
        126 => "exec_lo".into(),
        127 => "exec_hi".into(),
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
        // A literal whose value an inline constant could have encoded is marked as such.
        LITERAL if is_inline32(literal) => format!("lit(0x{literal:x})"),
        LITERAL => format!("0x{literal:x}"),
        256..=511 => match half {
            Some(h) => format!("v{}.{}", code - VGPR0, if h { 'h' } else { 'l' }),
            None => range("v", code - VGPR0),
        },
        _ => format!("?{code}"),
    }
}

/// Whether a 32-bit value is one of the inline constants (integers −16..=64, the f32 values
/// ±0.5, ±1, ±2, ±4 and 1/(2π)).
pub(crate) fn is_inline32(v: u32) -> bool {
    let i = v as i32;
    (-16..=64).contains(&i)
        || [
            0x3f00_0000,
            0xbf00_0000,
            0x3f80_0000,
            0xbf80_0000,
            0x4000_0000,
            0xc000_0000,
            0x4080_0000,
            0xc080_0000,
            0x3e22_f983,
        ]
        .contains(&v)
}

fn with_mods(s: String, neg: bool, abs: bool) -> String {
    let s = if abs { format!("|{s}|") } else { s };
    if neg { format!("-{s}") } else { s }
}

struct Shape<'a>(&'a str);

impl Shape<'_> {
    fn regs(&self, i: usize) -> u16 {
        shape_regs(self.0, i)
    }
    fn half(&self, i: usize, hi: bool) -> Option<bool> {
        shape_is_16(self.0, i).then_some(hi)
    }
    fn len(&self) -> usize {
        if self.0.is_empty() {
            0
        } else {
            self.0.split(',').count()
        }
    }
}

fn has_e32(rdna: Gen, op: u16) -> bool {
    let find = |t: &[(u16, &str)], o: u16| t.binary_search_by_key(&o, |e| e.0).is_ok();
    match op {
        0..=0xff => find(table!(rdna, shapes::VOPC), op),
        0x100..=0x13f => find(table!(rdna, shapes::VOP2), op - 0x100),
        0x180..=0x1ff => find(table!(rdna, shapes::VOP1), op - 0x180),
        _ => false,
    }
}

fn has_e64(rdna: Gen, op: u16) -> bool {
    table!(rdna, shapes::VOP3)
        .binary_search_by_key(&op, |e| e.0)
        .is_ok()
}

/// What a gfx12 memory instruction does, for the names of its temporal hint.
#[derive(PartialEq)]
enum Access {
    Load,
    Store,
    Atomic,
}

impl Access {
    fn of(name: &str) -> Access {
        if name.contains("atomic") {
            Access::Atomic
        } else if name.contains("store") {
            Access::Store
        } else {
            Access::Load
        }
    }
}

/// gfx12 cache policy (`th` bits 2:0, `scope` bits 4:3 of [`Inst::cpol`]) as LLVM prints it.
fn cpol_text(cpol: u8, access: Access) -> String {
    let (th, scope) = (cpol & 7, (cpol >> 3) & 3);
    let sys = scope == 3;
    let hint = match (access, th) {
        (_, 0) => None,
        (Access::Atomic, 1) => Some("TH_ATOMIC_RETURN".to_string()),
        (Access::Atomic, 2) => Some("TH_ATOMIC_NT".into()),
        (Access::Atomic, 3) => Some("TH_ATOMIC_NT_RETURN".into()),
        (Access::Atomic, 4 | 5) if sys => Some("TH_ATOMIC_CASCADE_RT".into()),
        (Access::Atomic, _) if sys => Some("TH_ATOMIC_CASCADE_NT".into()),
        (Access::Atomic, t) => Some(format!("TH_ATOMIC_0x{t:x}")),
        (Access::Load, 7) => Some("0x7".into()),
        (a, t) => {
            let p = if a == Access::Store { "STORE" } else { "LOAD" };
            let n = match t {
                1 => "NT",
                2 => "HT",
                3 if sys => "BYPASS",
                3 if a == Access::Store => "WB",
                3 => "LU",
                4 => "NT_RT",
                5 => "RT_NT",
                6 => "NT_HT",
                _ => "NT_WB",
            };
            Some(format!("TH_{p}_{n}"))
        }
    };
    let mut out = String::new();
    if let Some(h) = hint {
        let _ = write!(out, " th:{h}");
    }
    if scope != 0 {
        let _ = write!(
            out,
            " scope:SCOPE_{}",
            ["CU", "SE", "DEV", "SYS"][scope as usize]
        );
    }
    out
}

/// LLVM prints 16-bit immediates that are inline integers in decimal, others in hex.
fn u16_imm(imm: u32) -> String {
    if imm <= 64 {
        format!("{imm}")
    } else {
        format!("0x{imm:x}")
    }
}

fn waitcnt(imm: u32) -> String {
    // gfx11 s_waitcnt: expcnt [2:0], lgkmcnt [9:4], vmcnt [15:10].
    let (exp, lgkm, vm) = (imm & 7, (imm >> 4) & 0x3f, (imm >> 10) & 0x3f);
    let mut parts = vec![];
    if vm != 0x3f {
        parts.push(format!("vmcnt({vm})"));
    }
    if exp != 7 {
        parts.push(format!("expcnt({exp})"));
    }
    if lgkm != 0x3f {
        parts.push(format!("lgkmcnt({lgkm})"));
    }
    if parts.is_empty() {
        // LLVM spells an all-maximum wait as the three counters at their maxima.
        return "vmcnt(63) expcnt(7) lgkmcnt(63)".into();
    }
    parts.join(" ")
}

fn delay_alu(imm: u32) -> String {
    let id = |v: u32| -> Option<String> {
        Some(match v {
            0 => return None,
            1..=4 => format!("VALU_DEP_{v}"),
            5..=7 => format!("TRANS32_DEP_{}", v - 4),
            8 => "FMA_ACCUM_CYCLE_1".into(),
            9..=11 => format!("SALU_CYCLE_{}", v - 8),
            _ => format!("{v}"),
        })
    };
    let skip = [
        "SAME", "NEXT", "SKIP_1", "SKIP_2", "SKIP_3", "SKIP_4", "6", "7",
    ];
    let mut parts = vec![];
    if let Some(s) = id(imm & 0xf) {
        parts.push(format!("instid0({s})"));
    }
    let sk = (imm >> 4) & 7;
    if sk != 0 {
        parts.push(format!("instskip({})", skip[sk as usize]));
    }
    if let Some(s) = id((imm >> 7) & 0xf) {
        parts.push(format!("instid1({s})"));
    }
    if parts.is_empty() {
        return "0".into();
    }
    parts.join(" | ")
}

fn dpp_text(d: Dpp) -> String {
    match d {
        Dpp::None => String::new(),
        Dpp::Dpp8 { sel, fi } => {
            let l: Vec<String> = (0..8)
                .map(|k| format!("{}", (sel >> (3 * k)) & 7))
                .collect();
            format!(" dpp8:[{}]{}", l.join(","), if fi { " fi:1" } else { "" })
        }
        Dpp::Dpp16 {
            ctrl,
            row_mask,
            bank_mask,
            bound_ctrl,
            fi,
        } => {
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
                0x140 => "row_mirror".into(),
                0x141 => "row_half_mirror".into(),
                0x150..=0x15f => format!("row_share:{}", c & 0xf),
                0x160..=0x16f => format!("row_xmask:{}", c & 0xf),
                _ => format!("dpp_ctrl:{c:#x}"),
            };
            format!(
                " {sel} row_mask:{row_mask:#x} bank_mask:{bank_mask:#x}{}{}",
                if bound_ctrl { " bound_ctrl:1" } else { "" },
                if fi { " fi:1" } else { "" }
            )
        }
        // CDNA forms only appear in lowered instructions, which print through their own ISA.
        Dpp::Gfx9 { ctrl, .. } => format!(" dpp_ctrl:{ctrl:#x}"),
        Dpp::Sdwa { .. } => " sdwa".into(),
    }
}

fn bits_list(v: u8, n: usize) -> String {
    let l: Vec<String> = (0..n).map(|k| format!("{}", (v >> k) & 1)).collect();
    format!("[{}]", l.join(","))
}

impl fmt::Display for Inst {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = self.name();
        let rdna = self.rdna;
        let shp = Shape(shape_in(rdna, self.enc, self.op));
        let lit = self.literal;
        let mut ops: Vec<String> = vec![];
        let mut tail = String::new();
        use Encoding::*;
        let mnemonic = match self.enc {
            Vop1 | Vop2 | Vopc => {
                if self.dpp == Dpp::None && !has_e64(rdna, self.op) {
                    name.to_string()
                } else if self.dpp == Dpp::None {
                    format!("{name}_e32")
                } else {
                    format!("{name}_dpp")
                }
            }
            Vop3 | Vop3sd if has_e32(rdna, self.op) => {
                if self.dpp == Dpp::None {
                    format!("{name}_e64")
                } else {
                    format!("{name}_e64_dpp")
                }
            }
            Vop3 | Vop3sd if self.dpp != Dpp::None => format!("{name}_e64_dpp"),
            Flat => format!("flat_{name}"),
            Global => format!("global_{name}"),
            Scratch => format!("scratch_{name}"),
            _ => name.to_string(),
        };
        match self.enc {
            Sop1 if name.starts_with("s_sendmsg_rtn") => {
                ops.push(operand(self.dst, shp.regs(0), None, lit));
                ops.push(format!("sendmsg({})", self.imm));
            }
            Sop2 if name == "s_fmamk_f32" || name == "s_fmaak_f32" => {
                ops.push(operand(self.dst, 1, None, lit));
                ops.push(operand(self.src[0], 1, None, lit));
                let k = format!("0x{lit:x}");
                if name == "s_fmamk_f32" {
                    ops.push(k);
                    ops.push(operand(self.src[1], 1, None, lit));
                } else {
                    ops.push(operand(self.src[1], 1, None, lit));
                    ops.push(k);
                }
            }
            Sop1 | Sop2 | Sopc => {
                let mut k = 0;
                if self.dst != NULL || matches!(self.enc, Sop1 | Sop2) && shp.len() > 0 {
                    let has_dst = match self.enc {
                        Sop2 => true,
                        Sop1 => self.dst != NULL || shp.len() == 2,
                        _ => false,
                    };
                    if has_dst {
                        ops.push(operand(self.dst, shp.regs(0), None, lit));
                        k = 1;
                    }
                }
                for (s, &code) in self
                    .src
                    .iter()
                    .enumerate()
                    .take(shp.len().saturating_sub(k))
                {
                    ops.push(operand(code, shp.regs(k + s), None, lit));
                }
            }
            Sopk => {
                let imm = self.imm as u32;
                if name == "s_setreg_b32" {
                    ops.push(format!("hwreg({imm})"));
                    ops.push(operand(self.dst, 1, None, lit));
                } else if name == "s_setreg_imm32_b32" {
                    ops.push(format!("hwreg({imm})"));
                    ops.push(format!("0x{lit:x}"));
                } else if name == "s_getreg_b32" {
                    ops.push(operand(self.dst, 1, None, lit));
                    ops.push(format!("hwreg({imm})"));
                } else if name == "s_version" {
                    ops.push(format!("0x{imm:x}"));
                } else if name == "s_call_b64" || name.starts_with("s_subvector_loop") {
                    ops.push(operand(self.dst, shp.regs(0), None, lit));
                    ops.push(format!("{imm}"));
                } else if name.starts_with("s_waitcnt_") {
                    ops.push(operand(self.dst, 1, None, lit));
                    ops.push(format!("0x{imm:x}"));
                } else {
                    ops.push(operand(self.dst, shp.regs(0), None, lit));
                    ops.push(format!("0x{imm:x}"));
                }
            }
            Sopp => {
                let imm = self.imm as u32;
                match name {
                    "s_barrier"
                    | "s_barrier_leave"
                    | "s_wakeup"
                    | "s_icache_inv"
                    | "s_ttracedata"
                    | "s_endpgm_saved"
                    | "s_code_end"
                    | "s_wait_idle"
                    | "s_endpgm_ordered_ps_done"
                    | "s_set_inst_prefetch_distance"
                        if imm == 0 || name != "s_set_inst_prefetch_distance" =>
                    {
                        if name == "s_set_inst_prefetch_distance" {
                            ops.push(format!("0x{imm:x}"));
                        }
                    }
                    "s_waitcnt" => ops.push(waitcnt(imm)),
                    // gfx12's split counters.
                    _ if name.starts_with("s_wait_") && name.contains("cnt") => {
                        ops.push(format!("0x{imm:x}"))
                    }
                    "s_wait_alu" => ops.push(format!("0x{imm:x}")),
                    "s_delay_alu" => ops.push(delay_alu(imm)),
                    "s_clause" | "s_set_inst_prefetch_distance" => ops.push(format!("0x{imm:x}")),
                    "s_sendmsg" | "s_sendmsghalt" => ops.push(format!("sendmsg({imm})")),
                    "s_waitcnt_depctr" => ops.push(format!("depctr({imm})")),
                    "s_wait_event" | "s_ttracedata_imm" | "s_round_mode" => {
                        ops.push(format!("0x{imm:x}"))
                    }
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
            Smem if rdna == Gen::Gfx12 => self.fmt_smem12(&shp, &mut ops, &mut tail),
            Smem => {
                if shp.len() > 0 {
                    if name.starts_with("s_atc_probe") {
                        ops.push(format!("{}", self.dst));
                    } else {
                        ops.push(operand(self.dst, shp.regs(0), None, lit));
                    }
                    ops.push(operand(self.src[0], shp.regs(1), None, lit));
                    if self.saddr != NULL {
                        ops.push(operand(self.saddr, 1, None, lit));
                        if self.imm != 0 {
                            tail.push_str(&format!(" offset:0x{:x}", self.imm));
                        }
                    } else if self.imm != 0 {
                        ops.push(format!("0x{:x}", self.imm));
                    } else {
                        ops.push("null".into());
                    }
                }
                if self.flags & flag::GLC != 0 {
                    tail.push_str(" glc");
                }
                if self.flags & flag::DLC != 0 {
                    tail.push_str(" dlc");
                }
            }
            Vop1 | Vop2 | Vopc | Vop3 | Vop3sd => self.fmt_valu(&shp, &mut ops, &mut tail),
            Vop3p => {
                let mix = name.contains("_mix");
                for k in 0..shp.len() {
                    let code = if k == 0 { self.dst } else { self.src[k - 1] };
                    let t = operand(code, shp.regs(k), None, lit);
                    // The mix instructions use neg_lo/neg_hi as the neg/abs input modifiers.
                    let m = k.wrapping_sub(1);
                    ops.push(if mix && k > 0 {
                        with_mods(t, self.neg >> m & 1 != 0, self.abs >> m & 1 != 0)
                    } else {
                        t
                    });
                }
                let n = shp.len().saturating_sub(1);
                let def_hi = if mix { 0 } else { (1u8 << n) - 1 };
                if self.opsel & ((1 << n) - 1) != 0 {
                    tail.push_str(&format!(" op_sel:{}", bits_list(self.opsel, n)));
                }
                if self.opsel_hi & ((1 << n) - 1) != def_hi {
                    tail.push_str(&format!(" op_sel_hi:{}", bits_list(self.opsel_hi, n)));
                }
                if !mix && self.neg & ((1 << n) - 1) != 0 {
                    tail.push_str(&format!(" neg_lo:{}", bits_list(self.neg, n)));
                }
                if !mix && self.abs & ((1 << n) - 1) != 0 {
                    tail.push_str(&format!(" neg_hi:{}", bits_list(self.abs, n)));
                }
                if self.clamp {
                    tail.push_str(" clamp");
                }
            }
            Vopd => {
                let x = self.vopd_half(self.op, self.dst, [self.src[0], self.src[1]]);
                let y = self.vopd_half(self.y.op, self.y.dst, self.y.src);
                return write!(f, "{x} :: {y}");
            }
            Ds => {
                // Operand order: vdst, addr, data0, data1, as many as the shape has.
                let n = shp.len();
                let rtn = name.contains("_rtn")
                    || name.starts_with("ds_load")
                    || name.starts_with("ds_read")
                    || name.starts_with("ds_swizzle")
                    || name.starts_with("ds_permute")
                    || name.starts_with("ds_bpermute")
                    || name.starts_with("ds_consume")
                    || name.starts_with("ds_append")
                    || name.starts_with("ds_bvh");
                let mut codes = vec![];
                if rtn {
                    codes.push(self.dst);
                }
                if !(name.starts_with("ds_append")
                    || name.starts_with("ds_consume")
                    || name.starts_with("ds_gws"))
                    || name == "ds_gws_init"
                    || name == "ds_gws_sema_br"
                    || name == "ds_gws_barrier"
                {
                    if name.starts_with("ds_gws") {
                        codes.push(self.src[1]);
                    } else {
                        codes.push(self.src[0]);
                        codes.push(self.src[1]);
                        codes.push(self.src[2]);
                    }
                }
                for (k, c) in codes.into_iter().take(n).enumerate() {
                    ops.push(operand(c, shp.regs(k), None, lit));
                }
                if name.contains("2addr") {
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
            Flat | Global | Scratch if matches!(name, "wb" | "inv" | "wbinv") => {
                tail.push_str(&cpol_text(self.cpol(), Access::Load));
            }
            Flat | Global | Scratch => {
                let atomic = name.contains("atomic");
                let returns = if rdna == Gen::Gfx12 {
                    self.cpol() & 1 != 0
                } else {
                    self.flags & flag::GLC != 0
                };
                // Atomics: the widths follow from the name (the shape table holds one of the
                // returning / non-returning spellings); glc makes them return the old value.
                let w = if name.ends_with("64") { 2 } else { 1 };
                let data_regs = if name.contains("cmpswap") { 2 * w } else { w };
                let load = if atomic {
                    returns
                } else {
                    shp.len() > 0 && !name.contains("store")
                };
                let mut k = 0;
                if load {
                    ops.push(operand(
                        self.dst,
                        if atomic { w } else { shp.regs(0) },
                        None,
                        lit,
                    ));
                    k = 1;
                }
                if !name.contains("addtid") {
                    let vaddr = match self.enc {
                        Flat => operand(self.src[0], 2, None, lit),
                        Global if self.saddr == NULL => operand(self.src[0], 2, None, lit),
                        Scratch if self.flags & flag::SVE == 0 => "off".into(),
                        _ => operand(self.src[0], 1, None, lit),
                    };
                    ops.push(vaddr);
                    k += 1;
                }
                if atomic {
                    ops.push(operand(self.src[1], data_regs, None, lit));
                } else if !load {
                    ops.push(operand(self.src[1], shp.regs(k), None, lit));
                }
                if self.enc != Flat {
                    ops.push(if self.saddr == NULL {
                        "off".into()
                    } else {
                        operand(
                            self.saddr,
                            if self.enc == Global { 2 } else { 1 },
                            None,
                            lit,
                        )
                    });
                }
                if self.imm != 0 {
                    tail.push_str(&format!(" offset:{}", self.imm));
                }
                if rdna == Gen::Gfx12 {
                    tail.push_str(&cpol_text(self.cpol(), Access::of(name)));
                }
                for (b, s) in [
                    (flag::GLC, " glc"),
                    (flag::SLC, " slc"),
                    (flag::DLC, " dlc"),
                ] {
                    if self.flags & b != 0 {
                        tail.push_str(s);
                    }
                }
            }
            Ext | Rdna4 => {}
            Mubuf | Mtbuf => {
                if shp.len() > 0 {
                    ops.push(operand(self.dst, shp.regs(0), None, lit));
                    let both = self.flags & flag::OFFEN != 0 && self.flags & flag::IDXEN != 0;
                    // gfx12 prints `idxen` before `offen`.
                    let idxen_first = rdna == Gen::Gfx12;
                    ops.push(if self.flags & (flag::OFFEN | flag::IDXEN) == 0 {
                        "off".into()
                    } else {
                        operand(self.src[0], if both { 2 } else { 1 }, None, lit)
                    });
                    ops.push(operand(self.srsrc, 4, None, lit));
                    ops.push(operand(self.saddr, 1, None, lit));
                    let format = self.imm2 & 0x7f;
                    let format_name = crate::rdna4::opcodes::BUF_FORMATS
                        .iter()
                        .find(|e| e.0 == format);
                    match format_name {
                        _ if self.enc != Mtbuf || format == 1 => {}
                        Some((_, n)) if rdna == Gen::Gfx12 => {
                            tail.push_str(&format!(" format:[{n}]"));
                        }
                        _ => tail.push_str(&format!(" format:{format}")),
                    }
                    if idxen_first && self.flags & flag::IDXEN != 0 {
                        tail.push_str(" idxen");
                    }
                    if self.flags & flag::OFFEN != 0 {
                        tail.push_str(" offen");
                    }
                    if !idxen_first && self.flags & flag::IDXEN != 0 {
                        tail.push_str(" idxen");
                    }
                    if self.imm != 0 {
                        tail.push_str(&format!(" offset:{}", self.imm));
                    }
                    if rdna == Gen::Gfx12 {
                        tail.push_str(&cpol_text(self.cpol(), Access::of(name)));
                    }
                    for (b, s) in [
                        (flag::GLC, " glc"),
                        (flag::SLC, " slc"),
                        (flag::DLC, " dlc"),
                    ] {
                        if self.flags & b != 0 {
                            tail.push_str(s);
                        }
                    }
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

impl Inst {
    fn vopd_half(&self, op: u16, dst: u16, src: [u16; 2]) -> String {
        let name = super::decode::name_in(self.rdna, Encoding::Vopd, op).unwrap_or("?");
        let base = name.trim_start_matches("v_");
        let mut s = format!("v_dual_{base} {}", operand(dst, 1, None, self.literal));
        let n = match base {
            "mov_b32" => 1,
            _ => 2,
        };
        for &c in src.iter().take(n) {
            let _ = write!(s, ", {}", operand(c, 1, None, self.literal));
        }
        match base {
            "fmamk_f32" => {
                let parts: Vec<&str> = s.rsplitn(2, ", ").collect();
                s = format!("{}, 0x{:x}, {}", parts[1], self.literal, parts[0]);
            }
            "fmaak_f32" => {
                let _ = write!(s, ", 0x{:x}", self.literal);
            }
            _ => {}
        }
        s
    }

    /// gfx12 SMEM: `sdata, sbase, offset` or `sdata, sbase, soffset offset:N`; the prefetches
    /// name their count (the `sdata` field) last.
    fn fmt_smem12(&self, shp: &Shape<'_>, ops: &mut Vec<String>, tail: &mut String) {
        let name = self.name();
        let lit = self.literal;
        let hex = |v: i32| {
            if v < 0 {
                format!("-0x{:x}", -(v as i64))
            } else {
                format!("0x{v:x}")
            }
        };
        if name.starts_with("s_prefetch") || name.starts_with("s_buffer_prefetch") {
            if !name.ends_with("_pc_rel") {
                let n = if name.starts_with("s_buffer") { 4 } else { 2 };
                ops.push(operand(self.src[0], n, None, lit));
            }
            ops.push(hex(self.imm));
            ops.push(operand(self.saddr, 1, None, lit));
            ops.push(format!("{}", self.dst));
            return;
        }
        if name == "s_dcache_inv" {
            return;
        }
        if name.starts_with("s_atc_probe") {
            ops.push(format!("{}", self.dst));
        } else {
            ops.push(operand(self.dst, shp.regs(0), None, lit));
        }
        ops.push(operand(self.src[0], shp.regs(1), None, lit));
        if self.saddr != NULL {
            ops.push(operand(self.saddr, 1, None, lit));
            tail.push_str(&format!(" offset:{}", hex(self.imm)));
        } else {
            ops.push(hex(self.imm));
        }
        if self.cpol() & 0x40 != 0 {
            tail.push_str(" scale_offset");
        }
        tail.push_str(&cpol_text(self.cpol() & 0x1b, Access::Load));
        if self.cpol() & 0x20 != 0 {
            tail.push_str(" nv");
        }
    }

    fn fmt_valu(&self, shp: &Shape<'_>, ops: &mut Vec<String>, tail: &mut String) {
        use Encoding::*;
        let lit = self.literal;
        let name = self.name();
        let e32 = matches!(self.enc, Vop1 | Vop2 | Vopc);
        // A high half the decoder folded from VGPR bit 7 prints as `.h` even where the
        // shape (gfx12's, fake16) has no halves; low halves keep the shape's spelling.
        let halves = Shape(if e32 {
            super::decode::e32_halves_shape(self.rdna, self.enc, self.op)
        } else {
            shp.0
        });
        let half_of = |t: usize, hi: bool| match shp.half(t, hi) {
            None if hi && shape_is_16(halves.0, t) => Some(true),
            h => h,
        };
        // Destinations in LLVM order.
        let ndst = if e32 {
            match self.enc {
                Vopc if name.starts_with("v_cmpx") => 0,
                Vopc => 1,
                _ if name == "v_nop" || name == "v_pipeflush" => 0,
                _ if name.starts_with("v_add_co_ci")
                    || name.starts_with("v_sub_co_ci")
                    || name.starts_with("v_subrev_co_ci") =>
                {
                    2
                }
                _ => 1,
            }
        } else {
            valu_dst_count_in(self.rdna, self.op)
        };
        let mut k = 0;
        if ndst >= 1 {
            let half = half_of(0, self.opsel & 8 != 0);
            let code = if e32 && self.enc == Vopc {
                super::decode::VCC_LO
            } else {
                self.dst
            };
            ops.push(operand(code, shp.regs(0), half, lit));
            k = 1;
        }
        if ndst == 2 {
            ops.push(operand(
                if e32 {
                    super::decode::VCC_LO
                } else {
                    self.sdst
                },
                shp.regs(1),
                None,
                lit,
            ));
            k = 2;
        }
        let mut nsrc = shp.len().saturating_sub(k);
        let mut extra_vcc = false;
        if e32
            && (name == "v_cndmask_b32"
                || name.starts_with("v_add_co_ci")
                || name.starts_with("v_sub_co_ci")
                || name.starts_with("v_subrev_co_ci"))
        {
            nsrc = nsrc.saturating_sub(1);
            extra_vcc = true;
        }
        let fmamk = name.starts_with("v_fmamk");
        let fmaak = name.starts_with("v_fmaak");
        if fmamk || fmaak {
            nsrc = 2;
        }
        for s in 0..nsrc.min(3) {
            let t = k + s + usize::from(fmamk && s == 1);
            let hi = self.opsel & (1 << s) != 0;
            // Both register sources of the f16 fmamk/fmaak are halves (see the decoder's
            // `true16_e32_halves`), whatever the shape says of src0.
            let half = if (fmamk || fmaak) && name.ends_with("_f16") && e32 {
                Some(hi)
            } else {
                half_of(t, hi)
            };
            let txt = operand(self.src[s], shp.regs(t), half, lit);
            let (neg, abs) = (self.neg & (1 << s) != 0, self.abs & (1 << s) != 0);
            ops.push(with_mods(txt, neg, abs));
            if fmamk && s == 0 {
                ops.push(format!("0x{lit:x}"));
            }
        }
        if fmaak {
            ops.push(format!("0x{lit:x}"));
        }
        if extra_vcc {
            ops.push("vcc_lo".into());
        }
        if !e32 {
            // op_sel on operands that are not 16-bit halves (or the destination of one that is).
            let n = nsrc.min(3);
            let mut explicit = false;
            for s in 0..n {
                if self.opsel & (1 << s) != 0 && !shape_is_16(shp.0, k + s) {
                    explicit = true;
                }
            }
            if self.opsel & 8 != 0 && (ndst == 0 || !shape_is_16(shp.0, 0)) {
                explicit = true;
            }
            if explicit || (self.opsel != 0 && self.enc == Vop3) {
                let mut v = self.opsel & ((1 << n) - 1);
                v |= (self.opsel >> 3 & 1) << n;
                tail.push_str(&format!(" op_sel:{}", bits_list(v, n + 1)));
            }
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
        tail.push_str(&dpp_text(self.dpp));
    }
}
