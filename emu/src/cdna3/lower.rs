//! Lowering of decoded gfx942/gfx950 instructions onto the interpreter's instruction form.
//!
//! Most GFX9-family instructions have an RDNA3 twin with the same semantics under another
//! name or number (`v_add_u32` is gfx11's `v_add_nc_u32`, `global_load_dword` is
//! `global_load_b32`, `ds_read2_b32` is `ds_load_2addr_b32`): those become the gfx11 opcode, so
//! one set of semantics serves both ISAs. What differs is carried along: `m0` is operand code
//! 124 on GFX9 (gfx11's `null`), AccVGPRs are operand codes 512 + n, `v_cmpx` also writes its
//! scalar destination, most 16-bit results clear the high half ([`flag::ZERO_HI`]), DPP has
//! GFX9 controls and SDWA exists. Instructions only CDNA has (MFMA, packed f32, 64-bit moves,
//! ...) become [`Encoding::Ext`] operations run by the core's `exec_cdna`.

use super::decode::{self as raw, Extra};
use crate::interp::exec_cdna::{ExtOp, mfma_shape};
use crate::interp::inst::{self as r3, Dpp, Encoding, Inst, flag};
use crate::interp::names::gfx11;

/// The CDNA-only operation a VOP3P mnemonic lowers to: MFMA (the matrix instructions
/// themselves, not `v_mfma_ld_scale`) or packed f32 math.
fn ext_of_vop3p(name: &str) -> Option<ExtOp> {
    if raw::is_mai(name) && name.starts_with("v_mfma") {
        return Some(ExtOp::Mfma);
    }
    ExtOp::of_valu(name).filter(|op| {
        matches!(
            op,
            ExtOp::PkFmaF32 | ExtOp::PkMulF32 | ExtOp::PkAddF32 | ExtOp::PkMovB32
        )
    })
}

/// GFX9 mnemonics whose gfx11 twin has another name.
const RENAMES: &[(&str, &str)] = &[
    ("s_andn2_b32", "s_and_not1_b32"),
    ("s_andn2_b64", "s_and_not1_b64"),
    ("s_orn2_b32", "s_or_not1_b32"),
    ("s_orn2_b64", "s_or_not1_b64"),
    ("s_andn2_saveexec_b64", "s_and_not1_saveexec_b64"),
    ("s_orn2_saveexec_b64", "s_or_not1_saveexec_b64"),
    ("s_andn1_saveexec_b64", "s_and_not0_saveexec_b64"),
    ("s_orn1_saveexec_b64", "s_or_not0_saveexec_b64"),
    ("s_andn1_wrexec_b64", "s_and_not0_wrexec_b64"),
    ("s_andn2_wrexec_b64", "s_and_not1_wrexec_b64"),
    ("s_ff1_i32_b32", "s_ctz_i32_b32"),
    ("s_ff1_i32_b64", "s_ctz_i32_b64"),
    ("s_flbit_i32_b32", "s_clz_i32_u32"),
    ("s_flbit_i32_b64", "s_clz_i32_u64"),
    ("s_flbit_i32", "s_cls_i32"),
    ("s_flbit_i32_i64", "s_cls_i32_i64"),
    ("s_dcache_wb", "s_dcache_inv"),
    ("s_dcache_inv_vol", "s_dcache_inv"),
    ("s_dcache_wb_vol", "s_dcache_inv"),
    ("v_add_u32", "v_add_nc_u32"),
    ("v_sub_u32", "v_sub_nc_u32"),
    ("v_subrev_u32", "v_subrev_nc_u32"),
    ("v_addc_co_u32", "v_add_co_ci_u32"),
    ("v_subb_co_u32", "v_sub_co_ci_u32"),
    ("v_subbrev_co_u32", "v_subrev_co_ci_u32"),
    // GFX8's 16-bit multiply-adds, kept on GFX9 without op_sel (LLVM picks them for
    // 16-bit index arithmetic): gfx11's, the high half cleared like the other 16-bit results.
    ("v_mad_legacy_u16", "v_mad_u16"),
    ("v_mad_legacy_i16", "v_mad_i16"),
    ("v_add_u16", "v_add_nc_u16"),
    ("v_sub_u16", "v_sub_nc_u16"),
    ("v_add_i32", "v_add_nc_i32"),
    ("v_sub_i32", "v_sub_nc_i32"),
    ("v_add_i16", "v_add_nc_i16"),
    ("v_sub_i16", "v_sub_nc_i16"),
    ("v_mul_legacy_f32", "v_mul_dx9_zero_f32"),
    ("v_cvt_pkrtz_f16_f32", "v_cvt_pk_rtz_f16_f32"),
    ("v_cvt_pknorm_i16_f32", "v_cvt_pk_norm_i16_f32"),
    ("v_cvt_pknorm_u16_f32", "v_cvt_pk_norm_u16_f32"),
    ("v_ffbh_u32", "v_clz_i32_u32"),
    ("v_ffbl_b32", "v_ctz_i32_b32"),
    ("v_ffbh_i32", "v_cls_i32"),
    ("v_cvt_rpi_i32_f32", "v_cvt_nearest_i32_f32"),
    ("v_cvt_flr_i32_f32", "v_cvt_floor_i32_f32"),
    ("buffer_wbl2", "buffer_gl0_inv"),
    ("buffer_inv", "buffer_gl0_inv"),
    ("buffer_wbinvl1", "buffer_gl0_inv"),
    ("buffer_wbinvl1_vol", "buffer_gl0_inv"),
];

/// GFX9 memory type suffixes and their gfx11 spelling (longest first).
const MEM_TYPES: &[(&str, &str)] = &[
    ("dwordx2", "b64"),
    ("dwordx3", "b96"),
    ("dwordx4", "b128"),
    ("dword", "b32"),
    ("ubyte_d16_hi", "d16_hi_u8"),
    ("ubyte_d16", "d16_u8"),
    ("sbyte_d16_hi", "d16_hi_i8"),
    ("sbyte_d16", "d16_i8"),
    ("short_d16_hi", "d16_hi_b16"),
    ("short_d16", "d16_b16"),
    ("byte_d16_hi", "d16_hi_b8"),
    ("ubyte", "u8"),
    ("sbyte", "i8"),
    ("ushort", "u16"),
    ("sshort", "i16"),
    ("byte", "b8"),
    ("short", "b16"),
];

/// GFX9 atomic names (32-bit; `_x2` is the 64-bit form) and gfx11's.
const ATOMICS: &[(&str, &str)] = &[
    ("swap", "swap_b32"),
    ("cmpswap", "cmpswap_b32"),
    ("add", "add_u32"),
    ("sub", "sub_u32"),
    ("smin", "min_i32"),
    ("umin", "min_u32"),
    ("smax", "max_i32"),
    ("umax", "max_u32"),
    ("and", "and_b32"),
    ("or", "or_b32"),
    ("xor", "xor_b32"),
    ("inc", "inc_u32"),
    ("dec", "dec_u32"),
    ("add_f32", "add_f32"),
];

/// `load_dwordx2` -> `load_b64`, `atomic_smax_x2` -> `atomic_max_i64` (segment prefix removed).
fn mem_name(rest: &str) -> Option<String> {
    for dir in ["load_", "store_"] {
        if let Some(ty) = rest.strip_prefix(dir) {
            let g = MEM_TYPES.iter().find(|(a, _)| *a == ty)?.1;
            return Some(format!("{dir}{g}"));
        }
    }
    let a = rest.strip_prefix("atomic_")?;
    let (a, wide) = match a.strip_suffix("_x2") {
        Some(a) => (a, true),
        None => (a, false),
    };
    let g = ATOMICS.iter().find(|(x, _)| *x == a)?.1;
    Some(if wide {
        format!("atomic_{}", g.replace("32", "64"))
    } else {
        format!("atomic_{g}")
    })
}

/// `ds_read2st64_b32` -> `ds_load_2addr_stride64_b32` and the rest of the DS renames.
fn ds_name(n: &str) -> String {
    const DS: &[(&str, &str)] = &[
        ("ds_read2st64", "ds_load_2addr_stride64"),
        ("ds_read2", "ds_load_2addr"),
        ("ds_write2st64", "ds_store_2addr_stride64"),
        ("ds_write2", "ds_store_2addr"),
        ("ds_wrxchg2st64", "ds_storexchg_2addr_stride64"),
        ("ds_wrxchg2", "ds_storexchg_2addr"),
        ("ds_wrxchg", "ds_storexchg"),
        ("ds_cmpst", "ds_cmpstore"),
        ("ds_read", "ds_load"),
        ("ds_write", "ds_store"),
    ];
    for (g9, g11) in DS {
        if let Some(rest) = n.strip_prefix(g9)
            && rest.starts_with('_')
        {
            return format!("{g11}{rest}");
        }
    }
    n.to_string()
}

/// `s_load_dwordx4` -> `s_load_b128` (and the buffer loads).
fn smem_name(n: &str) -> String {
    const SIZES: [(&str, &str); 5] = [
        ("_dwordx16", "_b512"),
        ("_dwordx8", "_b256"),
        ("_dwordx4", "_b128"),
        ("_dwordx2", "_b64"),
        ("_dword", "_b32"),
    ];
    for (a, b) in SIZES {
        if let Some(p) = n.strip_suffix(a) {
            return format!("{p}{b}");
        }
    }
    rename(n).to_string()
}

fn rename(n: &str) -> &str {
    RENAMES.iter().find(|(a, _)| *a == n).map_or(n, |e| e.1)
}

/// GFX9 scalar operand codes in gfx11 numbering: `m0` is 124 on GFX9 and 125 on gfx11, and
/// an absent operand becomes gfx11's `null`.
fn sc(code: u16) -> u16 {
    match code {
        raw::M0 => r3::M0,
        raw::NONE => r3::NULL,
        c => c,
    }
}

/// 16-bit operations that keep the high half of their destination on GFX9 (LLVM's
/// `zeroesHigh16BitsOfDest` lists the rest as clearing it).
const PRESERVES_HIGH: &[&str] = &["v_fmac_f16", "v_mac_f16", "v_madak_f16", "v_madmk_f16"];

/// Lowers a decoded gfx942/gfx950 instruction; the error says why it has no semantics here.
pub fn lower(i: &raw::Inst) -> Result<Inst, String> {
    use raw::Encoding as E;
    let name = i.name;
    let none = || Err(format!("{name} has no semantics in the emulator"));
    let table = |t: &'static str, n: &str| gfx11(t, n).ok_or(());
    let mut o;
    match i.enc {
        E::Sop1 | E::Sop2 | E::Sopk | E::Sopc | E::Sopp => {
            let t = i.enc.key();
            let Ok(op) = table(t, rename(name)) else {
                return none();
            };
            o = Inst::new(
                match i.enc {
                    E::Sop1 => Encoding::Sop1,
                    E::Sop2 => Encoding::Sop2,
                    E::Sopk => Encoding::Sopk,
                    E::Sopc => Encoding::Sopc,
                    _ => Encoding::Sopp,
                },
                op,
            );
            o.dst = sc(i.dst);
            o.src = [sc(i.src[0]), sc(i.src[1]), r3::NULL];
            o.literal = i.literal;
            o.imm = i.imm;
        }
        E::Smem => {
            let g = smem_name(name);
            let Ok(op) = table("smem", &g) else {
                return none();
            };
            o = Inst::new(Encoding::Smem, op);
            o.dst = i.dst;
            o.src[0] = i.src[0];
            o.imm = i.imm;
            o.saddr = sc(i.saddr);
            if i.flags & raw::flag::GLC != 0 {
                o.flags |= flag::GLC;
            }
        }
        E::Vop1 | E::Vop2 | E::Vopc | E::Vop3 => {
            if let Some(x) = ExtOp::of_valu(name) {
                o = Inst::new(Encoding::Ext, x as u16);
                copy_valu(i, &mut o);
                return Ok(o);
            }
            let (n, swap) = match name {
                "v_accvgpr_read_b32" | "v_accvgpr_write_b32" | "v_accvgpr_mov_b32" => {
                    ("v_mov_b32".to_string(), false)
                }
                // b - a on 16 bits is gfx11's v_sub_nc_u16 with the sources swapped.
                "v_subrev_u16" => ("v_sub_nc_u16".to_string(), true),
                _ => (rename(name).replace("_tru_", "_t_"), false),
            };
            let Ok(op) = table("valu", &n) else {
                return none();
            };
            let sdwa_vopc_sdst =
                i.enc == E::Vopc && matches!(i.extra, Extra::Sdwa { .. }) && i.dst != raw::VCC_LO;
            let enc = match i.enc {
                _ if swap => Encoding::Vop3,
                E::Vop1 => Encoding::Vop1,
                E::Vop2 => Encoding::Vop2,
                E::Vopc if sdwa_vopc_sdst => Encoding::Vop3,
                E::Vopc => Encoding::Vopc,
                _ if crate::rdna3::decode::is_vop3sd(op) => Encoding::Vop3sd,
                _ => Encoding::Vop3,
            };
            o = Inst::new(enc, op);
            copy_valu(i, &mut o);
            if name.starts_with("v_accvgpr") {
                o.enc = Encoding::Vop1;
                (o.neg, o.abs, o.opsel, o.clamp, o.omod) = (0, 0, 0, false, 0);
            }
            if swap {
                o.src.swap(0, 1);
                o.neg = (o.neg & !3) | (o.neg & 1) << 1 | (o.neg >> 1 & 1);
                o.abs = (o.abs & !3) | (o.abs & 1) << 1 | (o.abs >> 1 & 1);
                o.opsel = (o.opsel & !3) | (o.opsel & 1) << 1 | (o.opsel >> 1 & 1);
            }
            if !PRESERVES_HIGH.contains(&name) {
                o.flags |= flag::ZERO_HI;
            }
        }
        E::Vop3p => {
            if let Some(x) = ext_of_vop3p(name) {
                o = Inst::new(Encoding::Ext, x as u16);
                copy_vop3p(i, &mut o);
                if let Extra::Mai { cbsz, abid, blgp } = i.extra {
                    o.imm = i32::from(cbsz) | i32::from(abid) << 4 | i32::from(blgp) << 8;
                    o.literal = mfma_shape(name).ok_or_else(|| {
                        format!("{name}: an MFMA shape or type the emulator does not model")
                    })?;
                }
                return Ok(o);
            }
            if name == "v_accvgpr_read_b32" || name == "v_accvgpr_write_b32" {
                let Ok(op) = table("valu", "v_mov_b32") else {
                    return none();
                };
                o = Inst::new(Encoding::Vop1, op);
                o.len = i.len;
                o.dst = i.dst;
                o.src[0] = sc(i.src[0]);
                return Ok(o);
            }
            let Ok(op) = table("vop3p", name) else {
                return none();
            };
            o = Inst::new(Encoding::Vop3p, op);
            copy_vop3p(i, &mut o);
        }
        E::Ds => {
            let Ok(op) = table("ds", &ds_name(name)) else {
                return none();
            };
            o = Inst::new(Encoding::Ds, op);
            o.dst = i.dst;
            o.src = i.src;
            if name.starts_with("ds_cmpst") {
                // GFX9 compares with data0 and stores data1; gfx11 the other way round.
                o.src.swap(1, 2);
            }
            o.imm = i.imm;
            o.imm2 = i.imm2;
            if i.flags & raw::flag::GDS != 0 {
                o.flags |= flag::GDS;
            }
        }
        E::Flat | E::Global | E::Scratch => {
            let rest = name.split_once('_').map_or("", |p| p.1);
            let Some(g) = mem_name(rest) else {
                return none();
            };
            let Ok(op) = table("flat", &g) else {
                return none();
            };
            o = Inst::new(
                match i.enc {
                    E::Flat => Encoding::Flat,
                    E::Global => Encoding::Global,
                    _ => Encoding::Scratch,
                },
                op,
            );
            o.dst = i.dst;
            o.src = [i.src[0], i.src[1], r3::NULL];
            o.saddr = sc(i.saddr);
            o.imm = i.imm;
            o.flags = mem_flags(i.flags);
        }
        E::Mubuf => {
            if i.flags & raw::flag::LDS != 0 {
                return Err(format!("{name} into LDS has no semantics in the emulator"));
            }
            let g = match rename(name) {
                n if n.starts_with("buffer_gl") => n.to_string(),
                n => match n.strip_prefix("buffer_").and_then(mem_name) {
                    Some(g) => format!("buffer_{g}"),
                    None => return none(),
                },
            };
            let Ok(op) = table("mubuf", &g) else {
                return none();
            };
            o = Inst::new(Encoding::Mubuf, op);
            o.dst = i.dst;
            o.src[0] = i.src[0];
            o.srsrc = i.srsrc;
            o.saddr = sc(i.saddr);
            o.imm = i.imm;
            o.flags = mem_flags(i.flags)
                | if i.flags & raw::flag::OFFEN != 0 {
                    flag::OFFEN
                } else {
                    0
                }
                | if i.flags & raw::flag::IDXEN != 0 {
                    flag::IDXEN
                } else {
                    0
                };
        }
        E::Mtbuf => return none(),
    }
    o.len = i.len;
    Ok(o)
}

/// `sc0` makes an atomic return the old value (gfx11's `glc`); `nt` is `slc`; SVE as is.
fn mem_flags(f: u16) -> u8 {
    let mut o = 0;
    if f & raw::flag::SC0 != 0 {
        o |= flag::GLC;
    }
    if f & raw::flag::NT != 0 {
        o |= flag::SLC;
    }
    if f & raw::flag::SVE != 0 {
        o |= flag::SVE;
    }
    o
}

fn copy_valu(i: &raw::Inst, o: &mut Inst) {
    o.len = i.len;
    o.dst = sc(i.dst);
    o.sdst = sc(i.sdst);
    o.src = [sc(i.src[0]), sc(i.src[1]), sc(i.src[2])];
    o.literal = i.literal;
    o.imm = i.imm;
    o.neg = i.neg;
    o.abs = i.abs;
    o.opsel = i.opsel;
    o.clamp = i.clamp;
    o.omod = i.omod;
    o.dpp = match i.extra {
        Extra::Dpp {
            ctrl,
            row_mask,
            bank_mask,
            bound_ctrl,
        } => Dpp::Gfx9 {
            ctrl,
            row_mask,
            bank_mask,
            bound_ctrl,
        },
        Extra::Sdwa {
            dst_sel,
            dst_unused,
            src_sel,
            sext,
        } => Dpp::Sdwa {
            dst_sel,
            dst_unused,
            src_sel,
            sext,
        },
        _ => Dpp::None,
    };
}

fn copy_vop3p(i: &raw::Inst, o: &mut Inst) {
    o.len = i.len;
    o.dst = i.dst;
    o.src = [sc(i.src[0]), sc(i.src[1]), sc(i.src[2])];
    o.neg = i.neg;
    o.abs = i.abs;
    o.opsel = i.opsel;
    o.opsel_hi = i.opsel_hi;
    o.clamp = i.clamp;
}
