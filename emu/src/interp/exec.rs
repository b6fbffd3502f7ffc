//! The semantics of the interpreter's form: gfx11's, which every ISA runs after lowering.
//!
//! The run loop executes a wave until it ends or reaches `s_barrier`. Vector instructions
//! loop over the set bits of EXEC; per-instruction work (operand kinds, constants, modifier
//! masks) is resolved once before the lane loop, and nothing is allocated per instruction.

use super::fast::{self, Fast};
use super::inst::{Dpp, Encoding, Inst, LITERAL, NULL, VCC_LO, VGPR0, flag};
use super::names::mnemonic;
use super::opcodes::{self, ds, flat, smem, sop1, sop2, sopc, sopk, sopp, valu, vop3p};
use crate::interp::float::{bf16_to_f32, cvt_i32, f16_to_f32, f32_to_f16, f64_to_f16};
use crate::interp::inst::{INVALID_OP, UNIMPL_OP};
use crate::interp::wave::{CONST_ROW, Ctx, DPP_ROW, VGPR_ROWS, Wave, WaveState};
use crate::{Error, Fault};

/// How a source operand's constants are read.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ty {
    /// 32-bit: inline floats as f32 bits.
    B32,
    /// 16-bit: inline floats as f16 bits.
    B16,
    /// 64-bit integer: inline integers sign-extended, literal zero-extended.
    I64,
    /// 64-bit float: inline floats as f64 bits, literal in the high half.
    F64,
}

pub(crate) fn inline_const(code: u16, ty: Ty) -> Option<u64> {
    let int = |v: i64| -> u64 {
        match ty {
            Ty::B16 => (v as u64) & 0xffff,
            Ty::B32 => (v as u64) & 0xffff_ffff,
            _ => v as u64,
        }
    };
    let fl = |f: f64| -> u64 {
        match ty {
            Ty::B16 => f32_to_f16(f as f32) as u64,
            Ty::B32 => (f as f32).to_bits() as u64,
            Ty::I64 | Ty::F64 => f.to_bits(),
        }
    };
    Some(match code {
        128..=192 => int(code as i64 - 128),
        193..=208 => int(192 - code as i64),
        240 => fl(0.5),
        241 => fl(-0.5),
        242 => fl(1.0),
        243 => fl(-1.0),
        244 => fl(2.0),
        245 => fl(-2.0),
        246 => fl(4.0),
        247 => fl(-4.0),
        248 => match ty {
            Ty::B16 => 0x3118,
            Ty::B32 => 0x3e22_f983,
            _ => 0x3fc4_5f30_6dc9_c882,
        },
        _ => return None,
    })
}

/// A resolved vector source: a VGPR row or a uniform value.
#[derive(Clone, Copy)]
pub(crate) enum Src {
    V(usize),
    K(u64),
}

/// A row of zeros, the high half of sources that have none.
static ZERO_ROW: [u32; 64] = [0; 64];

/// Apertures reported by `src_shared_base`/`src_private_base` (the high 32 bits of flat
/// addresses that reach LDS or scratch). The emulator does not route flat accesses through
/// them; they only need to be distinct from real memory.
const SHARED_BASE: u64 = 0x0001_0000_0000_0000;
const PRIVATE_BASE: u64 = 0x0002_0000_0000_0000;

impl Wave {
    /// Scalar value of an operand (32 bits).
    #[inline]
    pub(crate) fn sread(&self, code: u16, lit: u32) -> u32 {
        match code {
            0..=127 => self.s[code as usize],
            LITERAL => lit,
            253 => self.scc as u32,
            251 => (self.mask(VCC_LO) == 0) as u32,
            252 => (self.exec() == 0) as u32,
            235 => (SHARED_BASE >> 32) as u32,
            237 => (PRIVATE_BASE >> 32) as u32,
            _ => inline_const(code, Ty::B32).unwrap_or(0) as u32,
        }
    }

    /// Scalar 64-bit value of an operand.
    #[inline]
    pub(crate) fn sread64(&self, code: u16, lit: u32, ty: Ty) -> u64 {
        match code {
            0..=126 => self.s[code as usize] as u64 | (self.s[code as usize + 1] as u64) << 32,
            LITERAL if ty == Ty::F64 => (lit as u64) << 32,
            LITERAL => lit as u64,
            253 => self.scc as u64,
            251 => (self.mask(VCC_LO) == 0) as u64,
            252 => (self.exec() == 0) as u64,
            235 => SHARED_BASE,
            237 => PRIVATE_BASE,
            _ => inline_const(code, ty).unwrap_or(0),
        }
    }

    #[inline]
    pub(crate) fn src(&self, code: u16, lit: u32, ty: Ty) -> Src {
        if code >= VGPR0 {
            Src::V((code - VGPR0) as usize * 64)
        } else if matches!(ty, Ty::I64 | Ty::F64) {
            Src::K(self.sread64(code, lit, ty))
        } else if ty == Ty::B16 && code >= 128 {
            Src::K(if code == LITERAL {
                lit as u64 & 0xffff
            } else {
                inline_const(code, ty).unwrap_or(0)
            })
        } else {
            Src::K(self.sread(code, lit) as u64)
        }
    }

    #[inline]
    pub(crate) fn rd(&self, s: Src, lane: usize) -> u32 {
        match s {
            Src::V(b) => self.v[b + lane],
            Src::K(k) => k as u32,
        }
    }

    #[inline]
    pub(crate) fn wr(&mut self, dst: u16, lane: usize, v: u32) {
        let row = (dst.wrapping_sub(VGPR0)) as usize;
        if let Some(r) = self.v.get_mut(row * 64 + lane) {
            *r = v;
        }
    }

    #[inline]
    pub(crate) fn wr64(&mut self, dst: u16, lane: usize, v: u64) {
        self.wr(dst, lane, v as u32);
        self.wr(dst + 1, lane, (v >> 32) as u32);
    }

    /// A 16-bit VALU result into half `hi` of the destination; with [`flag::ZERO_HI`]
    /// (GFX9) a low-half result clears the high half.
    #[inline]
    pub(crate) fn wr16v(&mut self, i: &Inst, lane: usize, hi: bool, v: u16) {
        if !hi && i.flags & flag::ZERO_HI != 0 {
            self.wr(i.dst, lane, v as u32);
        } else {
            self.wr16(i.dst, lane, hi, v);
        }
    }

    #[inline]
    pub(crate) fn wr16(&mut self, dst: u16, lane: usize, hi: bool, v: u16) {
        let row = (dst.wrapping_sub(VGPR0)) as usize;
        if let Some(r) = self.v.get_mut(row * 64 + lane) {
            *r = if hi {
                (*r & 0xffff) | (v as u32) << 16
            } else {
                (*r & 0xffff_0000) | v as u32
            };
        }
    }
}

pub(crate) fn pc_of(ctx: &Ctx<'_>, idx: usize) -> u64 {
    ctx.code_base + 4 * ctx.prog.offsets.get(idx).copied().unwrap_or(0) as u64
}

pub(crate) fn unimplemented(ctx: &Ctx<'_>, idx: usize, _i: &Inst) -> Error {
    Error::Unimplemented {
        pc: pc_of(ctx, idx),
        text: ctx.prog.text(idx),
        dwords: ctx.prog.dwords(idx),
    }
}

pub(crate) fn fault(ctx: &Ctx<'_>, idx: usize, _i: &Inst, lane: u32, f: Fault) -> Error {
    Error::MemoryFault {
        pc: pc_of(ctx, idx),
        text: ctx.prog.text(idx),
        lane,
        fault: f,
    }
}

/// Runs a wave until `s_endpgm`, `s_barrier` or an error. Built for AVX2 too, as [`dense`]:
/// the lane loops of the hot forms (`fast.rs`) are inlined here.
#[cfg_attr(not(test), multiversion::multiversion(targets("x86_64+avx2+fma")))]
pub(crate) fn run(w: &mut Wave, ctx: &mut Ctx<'_>) -> Result<(), Error> {
    run_loop::<false>(w, ctx)
}

/// [`run`] that also adds one per executed instruction to its index's slot in
/// [`Ctx::counts`] (a counted dispatch, `stats.rs`). Built for the baseline x86-64 only:
/// each instance is the whole interpreter inlined, and an AVX2 one took a quarter of the
/// crate's build time for statistics runs, which count instructions rather than time them.
pub(crate) fn run_counted(w: &mut Wave, ctx: &mut Ctx<'_>) -> Result<(), Error> {
    run_loop::<true>(w, ctx)
}

/// The run loop of [`run`] and [`run_counted`], inlined into each (and so built for AVX2
/// with them). Only the instance with `COUNT` counts: statistics nobody asked for cost
/// nothing per instruction.
#[inline(always)]
fn run_loop<const COUNT: bool>(w: &mut Wave, ctx: &mut Ctx<'_>) -> Result<(), Error> {
    let prog = ctx.prog;
    // Kept in locals (registers) for the run and written back when it ends: the program
    // counter, and the instructions the budget has left.
    let budget = ctx.budget;
    let mut left = budget;
    let mut pc = w.pc;
    // Whether EXEC has every lane of the wave (wave32 tests its low half twice), and whether
    // f32 forms may run too (no denormal flushing). Only an SGPR or MODE write changes them,
    // so they are computed again after the instructions that may write one (the general
    // path, and the forms that write SGPRs), not for each instruction.
    let hi_exec = if w.lanes == 64 { 127 } else { 126 };
    let flags = |w: &Wave| {
        let dense = w.s[126] & w.s[hi_exec] == u32::MAX;
        (dense, dense && !w.mode.flush32())
    };
    let (mut dense, mut dense_f32) = flags(w);
    let fma = fma_available();
    // The instruction the budget stopped at counts, as it always has.
    let mut stopped = 0u64;
    let r = loop {
        let idx = pc;
        if left == 0 {
            if idx >= prog.insts.len() {
                break Err(Error::BadPc {
                    pc: pc_of(ctx, idx),
                });
            }
            (pc, stopped) = (idx + 1, 1);
            if COUNT && let Some(c) = ctx.counts.get_mut(idx) {
                *c += 1;
            }
            break Err(Error::Stopped {
                pc: pc_of(ctx, idx),
                reason: "instruction limit reached".into(),
            });
        }
        left -= 1;
        pc = idx + 1;
        // An index past the program fails below without counting, as in `instructions`.
        if COUNT && let Some(c) = ctx.counts.get_mut(idx) {
            *c += 1;
        }
        // The general path for instruction `i`, with the program counter synchronised with
        // the wave around it (it may branch) and the EXEC flags computed again after it. An
        // index past the program is not an instruction, and does not count as one.
        macro_rules! general {
            (|$i:ident| $e:expr) => {{
                let Some($i) = prog.insts.get(idx) else {
                    (left, pc) = (left + 1, idx);
                    break Err(Error::BadPc {
                        pc: pc_of(ctx, idx),
                    });
                };
                w.pc = pc;
                let r = $e;
                pc = w.pc;
                (dense, dense_f32) = flags(w);
                r
            }};
        }
        // The hot forms resolved when the program was predecoded (`fast.rs`); a vector form
        // with a partial EXEC (or, for floats, denormal flushing) takes the general path.
        let f = prog.fast.get(idx).unwrap_or(&Fast::Slow);
        let res = match *f {
            Fast::Nop => Ok(()),
            Fast::Wait => {
                wait_for_memory(w, ctx);
                Ok(())
            }
            Fast::Branch(t) => {
                pc = t as usize;
                Ok(())
            }
            Fast::CbranchScc0(t) | Fast::CbranchScc1(t) => {
                if w.scc == matches!(f, Fast::CbranchScc1(_)) {
                    pc = t as usize;
                }
                Ok(())
            }
            Fast::CbranchVccz(t) | Fast::CbranchVccnz(t) => {
                if (w.mask(VCC_LO) == 0) == matches!(f, Fast::CbranchVccz(_)) {
                    pc = t as usize;
                }
                Ok(())
            }
            Fast::CbranchExecz(t) | Fast::CbranchExecnz(t) => {
                if (w.exec() == 0) == matches!(f, Fast::CbranchExecz(_)) {
                    pc = t as usize;
                }
                Ok(())
            }
            Fast::Cmp(ref v, c) if dense => {
                let res = fast::compare(w, v, c);
                let r = finish_compare(w, v.sd, c, res);
                (dense, dense_f32) = flags(w);
                r
            }
            Fast::MovB32(ref v) if dense => fast::u32_op(w, v, |[a]| a),
            Fast::AddU32(ref v) if dense => fast::u32_op(w, v, |[a, b]| a.wrapping_add(b)),
            Fast::SubU32(ref v) if dense => fast::u32_op(w, v, |[a, b]| a.wrapping_sub(b)),
            Fast::SubrevU32(ref v) if dense => fast::u32_op(w, v, |[a, b]| b.wrapping_sub(a)),
            Fast::AndB32(ref v) if dense => fast::u32_op(w, v, |[a, b]| a & b),
            Fast::OrB32(ref v) if dense => fast::u32_op(w, v, |[a, b]| a | b),
            Fast::XorB32(ref v) if dense => fast::u32_op(w, v, |[a, b]| a ^ b),
            Fast::LshlrevB32(ref v) if dense => fast::u32_op(w, v, |[a, b]| b << (a & 31)),
            Fast::LshrrevB32(ref v) if dense => fast::u32_op(w, v, |[a, b]| b >> (a & 31)),
            Fast::AshrrevI32(ref v) if dense => {
                fast::u32_op(w, v, |[a, b]| ((b as i32) >> (a & 31)) as u32)
            }
            Fast::MulLoU32(ref v) if dense => fast::u32_op(w, v, |[a, b]| a.wrapping_mul(b)),
            Fast::MulHiU32(ref v) if dense => {
                fast::u32_op(w, v, |[a, b]| ((a as u64 * b as u64) >> 32) as u32)
            }
            Fast::MulU32U24(ref v) if dense => {
                fast::u32_op(w, v, |[a, b]| (a & 0xff_ffff).wrapping_mul(b & 0xff_ffff))
            }
            Fast::Add3U32(ref v) if dense => {
                fast::u32_op(w, v, |[a, b, c]| a.wrapping_add(b).wrapping_add(c))
            }
            Fast::LshlOrB32(ref v) if dense => fast::u32_op(w, v, |[a, b, c]| (a << (b & 31)) | c),
            Fast::LshlAddU32(ref v) if dense => {
                fast::u32_op(w, v, |[a, b, c]| (a << (b & 31)).wrapping_add(c))
            }
            Fast::AndOrB32(ref v) if dense => fast::u32_op(w, v, |[a, b, c]| (a & b) | c),
            Fast::Or3B32(ref v) if dense => fast::u32_op(w, v, |[a, b, c]| a | b | c),
            Fast::Xor3B32(ref v) if dense => fast::u32_op(w, v, |[a, b, c]| a ^ b ^ c),
            Fast::CvtF32U32(ref v) if dense => fast::u32_op(w, v, |[a]| (a as f32).to_bits()),
            Fast::NotB32(ref v) if dense => fast::u32_op(w, v, |[a]| !a),
            Fast::MinI32(ref v) if dense => {
                fast::u32_op(w, v, |[a, b]| (a as i32).min(b as i32) as u32)
            }
            Fast::MaxI32(ref v) if dense => {
                fast::u32_op(w, v, |[a, b]| (a as i32).max(b as i32) as u32)
            }
            Fast::MinU32(ref v) if dense => fast::u32_op(w, v, |[a, b]| a.min(b)),
            Fast::MaxU32(ref v) if dense => fast::u32_op(w, v, |[a, b]| a.max(b)),
            Fast::BfiB32(ref v) if dense => fast::u32_op(w, v, |[a, b, c]| (a & b) | (!a & c)),
            Fast::BfeU32(ref v) if dense => fast::u32_op(w, v, |[a, b, c]| {
                let (off, wd) = (b & 31, c & 31);
                if wd == 0 {
                    0
                } else {
                    (a >> off) & ((1u32 << wd) - 1)
                }
            }),
            Fast::CvtF32I32(ref v) if dense => {
                fast::u32_op(w, v, |[a]| (a as i32 as f32).to_bits())
            }
            Fast::CvtU32F32(ref v) if dense => {
                fast::bits_op(w, v, |_, [a]| cvt_u32(f32::from_bits(a)))
            }
            Fast::LdexpF32(ref v) if dense_f32 => fast::bits_op(w, v, |_, [a, b]| {
                ldexp(f32::from_bits(a), b as i32).to_bits()
            }),
            Fast::RcpF32(ref v) if dense_f32 => fast::f32_op(w, v, |[a]| (1.0 / a as f64) as f32),
            Fast::SqrtF32(ref v) if dense_f32 => fast::f32_op(w, v, |[a]| a.sqrt()),
            Fast::ExpF32(ref v) if dense_f32 => fast::exp_op(w, v),
            Fast::LogF32(ref v) if dense_f32 => fast::f32_op(w, v, |[a]| (a as f64).log2() as f32),
            Fast::FloorF32(ref v) if dense_f32 => fast::f32_op(w, v, |[a]| a.floor()),
            Fast::TruncF32(ref v) if dense_f32 => fast::f32_op(w, v, |[a]| a.trunc()),
            Fast::RndneF32(ref v) if dense_f32 => fast::f32_op(w, v, |[a]| round_even(a)),
            Fast::FractF32(ref v) if dense_f32 => fast::f32_op(w, v, |[a]| fract(a)),
            Fast::AddF32(ref v) if dense_f32 => fast::f32_op(w, v, |[a, b]| a + b),
            Fast::SubF32(ref v) if dense_f32 => fast::f32_op(w, v, |[a, b]| a - b),
            Fast::SubrevF32(ref v) if dense_f32 => fast::f32_op(w, v, |[a, b]| b - a),
            Fast::MulF32(ref v) if dense_f32 => fast::f32_op(w, v, |[a, b]| a * b),
            Fast::FmaF32(ref v) if dense_f32 && fma => fast::fma_op(w, v),
            Fast::CndmaskB32(ref v) if dense => {
                let m = w.mask(v.sd);
                fast::bits_op(w, v, |l, [a, b]| if m >> l & 1 != 0 { b } else { a })
            }
            Fast::CvtI32F32(ref v) if dense => {
                fast::bits_op(w, v, |_, [a]| cvt_i32(f32::from_bits(a)))
            }
            Fast::LshlrevB64(ref v) if dense => {
                fast::shift_b64::<true>(w, v);
                Ok(())
            }
            Fast::LshrrevB64(ref v) if dense => {
                fast::shift_b64::<false>(w, v);
                Ok(())
            }
            Fast::LshlAddU64(ref v) if dense => {
                fast::lshl_add_u64(w, v);
                Ok(())
            }
            Fast::Carry(ref v, op, cin) if dense => {
                let carry = fast::carry_op(w, v, op, cin);
                w.set_mask(v.sd, carry);
                (dense, dense_f32) = flags(w);
                Ok(())
            }
            Fast::MadU64U32(ref v) if dense => {
                let carry = fast::mad_u64_u32(w, v);
                w.set_mask(v.sd, carry);
                (dense, dense_f32) = flags(w);
                Ok(())
            }
            Fast::Endpgm => {
                w.state = WaveState::Done;
                break Ok(());
            }
            Fast::GlobalLoad(ref g) if dense => {
                if fast::global_dwords(w, g, &mut *ctx.mem, &mut *ctx.buf, true) {
                    Ok(())
                } else {
                    general!(|i| flat_op(w, i, idx, ctx))
                }
            }
            Fast::GlobalStore(ref g) if dense => {
                if fast::global_dwords(w, g, &mut *ctx.mem, &mut *ctx.buf, false) {
                    Ok(())
                } else {
                    general!(|i| flat_op(w, i, idx, ctx))
                }
            }
            Fast::SLoad(ref m) => {
                if fast::scalar_load(w, m, &mut *ctx.mem) {
                    (dense, dense_f32) = flags(w);
                    Ok(())
                } else {
                    general!(|i| smem_op(w, i, idx, ctx))
                }
            }
            Fast::DsLoad(ref d) | Fast::DsStore(ref d) => {
                if ds_form(w, ctx.lds, d, matches!(f, Fast::DsLoad(_))) {
                    Ok(())
                } else {
                    general!(|i| ds_op(w, i, idx, ctx))
                }
            }
            Fast::GlobalAtomic(ref a) if dense => {
                if fast::global_atomic(w, a, &mut *ctx.mem) {
                    Ok(())
                } else {
                    general!(|i| flat_op(w, i, idx, ctx))
                }
            }
            Fast::Barrier => {
                w.state = WaveState::Barrier;
                break Ok(());
            }
            Fast::Salu(ref s, op) => {
                let r = fast::salu(w, s, op);
                (dense, dense_f32) = flags(w);
                r
            }
            Fast::PkF32(ref p) if dense => {
                let rows = p.rows.map(|r| r as usize);
                if crate::interp::exec_cdna::packed_f32_on_rows(w, p.op, rows, p.d as usize) {
                    Ok(())
                } else {
                    match general!(|i| general(w, i, idx, ctx)) {
                        Ok(true) => break Ok(()),
                        Ok(false) => Ok(()),
                        Err(e) => Err(e),
                    }
                }
            }
            Fast::SdwaAndB32(ref v, [x, y]) if dense => {
                fast::u32_op(w, v, |[a, b]| x.apply(a) & y.apply(b))
            }
            _ => match general!(|i| general(w, i, idx, ctx)) {
                Ok(true) => break Ok(()),
                Ok(false) => Ok(()),
                Err(e) => Err(e),
            },
        };
        if let Err(e) = res {
            break Err(e);
        }
    };
    w.pc = pc;
    let count = budget - left + stopped;
    ctx.instructions += count;
    ctx.budget = ctx.budget.saturating_sub(count);
    r
}

/// The general path of [`run`]: instruction `i` by its encoding; true when the wave leaves
/// the run loop (`s_endpgm`, `s_barrier`). Out of line, so that the run loop keeps its
/// registers for the forms.
#[inline(never)]
fn general(w: &mut Wave, i: &Inst, idx: usize, ctx: &mut Ctx<'_>) -> Result<bool, Error> {
    match i.enc {
        Encoding::Vop1 | Encoding::Vop2 | Encoding::Vopc | Encoding::Vop3
            if matches!(i.dpp, Dpp::Sdwa { .. }) =>
        {
            crate::interp::exec_cdna::sdwa(w, i, idx, ctx)
        }
        Encoding::Ext => crate::interp::exec_cdna::ext(w, i, idx, ctx),
        Encoding::Rdna4 => crate::interp::exec_gfx12::run(w, i, idx, ctx),
        Encoding::Vopc => vopc(w, i, idx, ctx),
        Encoding::Vop3 if i.op < 0x100 => vopc(w, i, idx, ctx),
        Encoding::Vop1 | Encoding::Vop2 | Encoding::Vop3 | Encoding::Vop3sd => {
            valu_op(w, i, i.op, idx, ctx)
        }
        Encoding::Sop2 => sop2_op(w, i, idx, ctx),
        Encoding::Sop1 => sop1_op(w, i, idx, ctx),
        Encoding::Sopk => sopk_op(w, i, idx, ctx),
        Encoding::Sopc => sopc_op(w, i, idx, ctx),
        Encoding::Sopp => return sopp_op(w, i, idx, ctx),
        Encoding::Smem => smem_op(w, i, idx, ctx),
        Encoding::Vopd => vopd(w, i, idx, ctx),
        Encoding::Vop3p => vop3p_op(w, i, idx, ctx),
        Encoding::Ds => ds_op(w, i, idx, ctx),
        Encoding::Flat | Encoding::Global | Encoding::Scratch => flat_op(w, i, idx, ctx),
        Encoding::Mubuf => mubuf_op(w, i, idx, ctx),
        Encoding::Mtbuf => Err(unimplemented(ctx, idx, i)),
    }
    .map(|()| false)
}

// ---------------------------------------------------------------------------------------
// Scalar ALU

fn sop2_op(w: &mut Wave, i: &Inst, idx: usize, ctx: &Ctx<'_>) -> Result<(), Error> {
    let lit = i.literal;
    let a = w.sread(i.src[0], lit);
    let b = w.sread(i.src[1], lit);
    let a64 = || w.sread64(i.src[0], lit, Ty::I64);
    let b64 = || w.sread64(i.src[1], lit, Ty::I64);
    let (r, scc): (u32, Option<bool>) = match i.op {
        sop2::ADD_U32 => {
            let (r, c) = a.overflowing_add(b);
            (r, Some(c))
        }
        sop2::SUB_U32 => {
            let (r, c) = a.overflowing_sub(b);
            (r, Some(c))
        }
        sop2::ADD_I32 => {
            let (r, o) = (a as i32).overflowing_add(b as i32);
            (r as u32, Some(o))
        }
        sop2::SUB_I32 => {
            let (r, o) = (a as i32).overflowing_sub(b as i32);
            (r as u32, Some(o))
        }
        sop2::ADDC_U32 => {
            let s = a as u64 + b as u64 + w.scc as u64;
            (s as u32, Some(s >> 32 != 0))
        }
        sop2::SUBB_U32 => {
            let s = (a as u64).wrapping_sub(b as u64).wrapping_sub(w.scc as u64);
            (s as u32, Some((b as u64 + w.scc as u64) > a as u64))
        }
        sop2::ABSDIFF_I32 => {
            let r = (a as i32).wrapping_sub(b as i32).unsigned_abs();
            (r, Some(r != 0))
        }
        sop2::LSHL_B32 => {
            let r = a << (b & 31);
            (r, Some(r != 0))
        }
        sop2::LSHR_B32 => {
            let r = a >> (b & 31);
            (r, Some(r != 0))
        }
        sop2::ASHR_I32 => {
            let r = ((a as i32) >> (b & 31)) as u32;
            (r, Some(r != 0))
        }
        sop2::LSHL1_ADD_U32 | sop2::LSHL2_ADD_U32 | sop2::LSHL3_ADD_U32 | sop2::LSHL4_ADD_U32 => {
            let sh = (i.op - sop2::LSHL1_ADD_U32 + 1) as u32;
            let s = ((a as u64) << sh) + b as u64;
            (s as u32, Some(s >> 32 != 0))
        }
        sop2::MIN_I32 => (
            (a as i32).min(b as i32) as u32,
            Some((a as i32) < (b as i32)),
        ),
        sop2::MIN_U32 => (a.min(b), Some(a < b)),
        sop2::MAX_I32 => (
            (a as i32).max(b as i32) as u32,
            Some((a as i32) > (b as i32)),
        ),
        sop2::MAX_U32 => (a.max(b), Some(a > b)),
        sop2::AND_B32 => (a & b, Some(a & b != 0)),
        sop2::OR_B32 => (a | b, Some(a | b != 0)),
        sop2::XOR_B32 => (a ^ b, Some(a ^ b != 0)),
        sop2::NAND_B32 => (!(a & b), Some(!(a & b) != 0)),
        sop2::NOR_B32 => (!(a | b), Some(!(a | b) != 0)),
        sop2::XNOR_B32 => (!(a ^ b), Some(!(a ^ b) != 0)),
        sop2::AND_NOT1_B32 => (a & !b, Some(a & !b != 0)),
        sop2::OR_NOT1_B32 => (a | !b, Some(a | !b != 0)),
        sop2::BFE_U32 => {
            let (off, wd) = (b & 31, (b >> 16) & 0x7f);
            let r = if wd == 0 {
                0
            } else {
                (a >> off) & (((1u64 << wd.min(32)) - 1) as u32)
            };
            (r, Some(r != 0))
        }
        sop2::BFE_I32 => {
            let (off, wd) = (b & 31, (b >> 16) & 0x7f);
            let r = if wd == 0 {
                0
            } else {
                let wd = wd.min(32);
                (((a >> off) << (32 - wd)) as i32 >> (32 - wd)) as u32
            };
            (r, Some(r != 0))
        }
        sop2::BFM_B32 => ((((1u64 << (a & 31)) - 1) as u32) << (b & 31), None),
        sop2::MUL_I32 => ((a as i32).wrapping_mul(b as i32) as u32, None),
        sop2::MUL_HI_U32 => (((a as u64 * b as u64) >> 32) as u32, None),
        sop2::MUL_HI_I32 => (((a as i32 as i64 * b as i32 as i64) >> 32) as u32, None),
        sop2::CSELECT_B32 => (if w.scc { a } else { b }, None),
        sop2::PACK_LL_B32_B16 => ((a & 0xffff) | (b << 16), None),
        sop2::PACK_LH_B32_B16 => ((a & 0xffff) | (b & 0xffff_0000), None),
        sop2::PACK_HH_B32_B16 => ((a >> 16) | (b & 0xffff_0000), None),
        sop2::PACK_HL_B32_B16 => ((a >> 16) | (b << 16), None),
        // 64-bit forms.
        _ => {
            let (a, b) = (a64(), b64());
            let (r, scc): (u64, Option<bool>) = match i.op {
                sop2::LSHL_B64 => (a << (b & 63), None),
                sop2::LSHR_B64 => (a >> (b & 63), None),
                sop2::ASHR_I64 => (((a as i64) >> (b & 63)) as u64, None),
                sop2::AND_B64 => (a & b, None),
                sop2::OR_B64 => (a | b, None),
                sop2::XOR_B64 => (a ^ b, None),
                sop2::NAND_B64 => (!(a & b), None),
                sop2::NOR_B64 => (!(a | b), None),
                sop2::XNOR_B64 => (!(a ^ b), None),
                sop2::AND_NOT1_B64 => (a & !b, None),
                sop2::OR_NOT1_B64 => (a | !b, None),
                sop2::CSELECT_B64 => (if w.scc { a } else { b }, Some(w.scc)),
                sop2::BFE_U64 => {
                    let (off, wd) = (b & 63, (b >> 16) & 0x7f);
                    let r = if wd == 0 {
                        0
                    } else {
                        (a >> off) & (u64::MAX >> (64 - wd.min(64)))
                    };
                    (r, None)
                }
                sop2::BFE_I64 => {
                    let (off, wd) = (b & 63, (b >> 16) & 0x7f);
                    let r = if wd == 0 {
                        0
                    } else {
                        let wd = wd.min(64);
                        (((a >> off) << (64 - wd)) as i64 >> (64 - wd)) as u64
                    };
                    (r, None)
                }
                sop2::BFM_B64 => ((((1u128 << (a & 63)) - 1) as u64) << (b & 63), None),
                _ => return Err(unimplemented(ctx, idx, i)),
            };
            w.sset64(i.dst, r);
            // Logic and shifts of 64 bits set SCC to "result is non-zero"; cselect keeps it.
            w.scc = scc.unwrap_or(r != 0);
            return Ok(());
        }
    };
    w.sset(i.dst, r);
    if let Some(c) = scc {
        w.scc = c;
    }
    Ok(())
}

fn sop1_op(w: &mut Wave, i: &Inst, idx: usize, ctx: &Ctx<'_>) -> Result<(), Error> {
    let lit = i.literal;
    let a = w.sread(i.src[0], lit);
    let a64 = w.sread64(i.src[0], lit, Ty::I64);
    let is64 = |n: &str| n.ends_with("_b64") || n.ends_with("_u64") || n.ends_with("_i64");
    match i.op {
        sop1::MOV_B32 => w.sset(i.dst, a),
        sop1::MOV_B64 => w.sset64(i.dst, a64),
        sop1::CMOV_B32 => {
            if w.scc {
                w.sset(i.dst, a)
            }
        }
        sop1::CMOV_B64 => {
            if w.scc {
                w.sset64(i.dst, a64)
            }
        }
        sop1::NOT_B32 => {
            w.sset(i.dst, !a);
            w.scc = !a != 0;
        }
        sop1::NOT_B64 => {
            w.sset64(i.dst, !a64);
            w.scc = !a64 != 0;
        }
        sop1::BREV_B32 => w.sset(i.dst, a.reverse_bits()),
        sop1::BREV_B64 => w.sset64(i.dst, a64.reverse_bits()),
        sop1::CTZ_I32_B32 => w.sset(i.dst, if a == 0 { u32::MAX } else { a.trailing_zeros() }),
        sop1::CTZ_I32_B64 => w.sset(
            i.dst,
            if a64 == 0 {
                u32::MAX
            } else {
                a64.trailing_zeros()
            },
        ),
        sop1::CLZ_I32_U32 => w.sset(i.dst, if a == 0 { u32::MAX } else { a.leading_zeros() }),
        sop1::CLZ_I32_U64 => w.sset(
            i.dst,
            if a64 == 0 {
                u32::MAX
            } else {
                a64.leading_zeros()
            },
        ),
        sop1::CLS_I32 => {
            let v = a as i32;
            w.sset(
                i.dst,
                if v == 0 || v == -1 {
                    u32::MAX
                } else {
                    (if v < 0 { !a } else { a }).leading_zeros()
                },
            );
        }
        sop1::SEXT_I32_I8 => w.sset(i.dst, a as i8 as i32 as u32),
        sop1::SEXT_I32_I16 => w.sset(i.dst, a as i16 as i32 as u32),
        sop1::BITSET0_B32 | sop1::BITSET1_B32 => {
            let d = w.sread(i.dst, 0);
            let bit = 1u32 << (a & 31);
            w.sset(
                i.dst,
                if i.op == sop1::BITSET1_B32 {
                    d | bit
                } else {
                    d & !bit
                },
            );
        }
        sop1::BITSET0_B64 | sop1::BITSET1_B64 => {
            let d = w.sread64(i.dst, 0, Ty::I64);
            let bit = 1u64 << (a & 63);
            w.sset64(
                i.dst,
                if i.op == sop1::BITSET1_B64 {
                    d | bit
                } else {
                    d & !bit
                },
            );
        }
        sop1::ABS_I32 => {
            let r = (a as i32).unsigned_abs();
            w.sset(i.dst, r);
            w.scc = r != 0;
        }
        sop1::BCNT0_I32_B32 => {
            let r = a.count_zeros();
            w.sset(i.dst, r);
            w.scc = r != 0;
        }
        sop1::BCNT1_I32_B32 => {
            let r = a.count_ones();
            w.sset(i.dst, r);
            w.scc = r != 0;
        }
        sop1::BCNT0_I32_B64 => {
            let r = a64.count_zeros();
            w.sset(i.dst, r);
            w.scc = r != 0;
        }
        sop1::BCNT1_I32_B64 => {
            let r = a64.count_ones();
            w.sset(i.dst, r);
            w.scc = r != 0;
        }
        sop1::GETPC_B64 => w.sset64(i.dst, pc_of(ctx, idx + 1)),
        sop1::SETPC_B64 => jump(w, ctx, a64)?,
        sop1::SWAPPC_B64 => {
            w.sset64(i.dst, pc_of(ctx, idx + 1));
            jump(w, ctx, a64)?;
        }
        sop1::AND_SAVEEXEC_B32..=sop1::OR_NOT1_SAVEEXEC_B64 => {
            let Some((wide, kind)) = saveexec_kind(i.op) else {
                return Err(unimplemented(ctx, idx, i));
            };
            saveexec(w, if wide { a64 } else { a as u64 }, i.dst, kind, wide);
        }
        sop1::AND_NOT0_WREXEC_B32
        | sop1::AND_NOT1_WREXEC_B32
        | sop1::AND_NOT0_WREXEC_B64
        | sop1::AND_NOT1_WREXEC_B64 => {
            let wide = is64(mnemonic(i));
            let s = if wide { a64 } else { a as u64 };
            let e = w.exec();
            let new = if matches!(i.op, sop1::AND_NOT0_WREXEC_B32 | sop1::AND_NOT0_WREXEC_B64) {
                !s & e
            } else {
                s & !e
            };
            let new = if wide { new } else { new & 0xffff_ffff };
            w.set_exec(new);
            if wide {
                w.sset64(i.dst, new);
            } else {
                w.sset(i.dst, new as u32);
            }
            w.scc = new != 0;
        }
        sop1::SENDMSG_RTN_B32 | sop1::SENDMSG_RTN_B64 => {
            // Message returns (doorbell id, realtime clock) are not modelled: 0.
            w.sset(i.dst, 0);
            if i.op == sop1::SENDMSG_RTN_B64 {
                w.sset(i.dst + 1, 0);
            }
        }
        _ => return Err(unimplemented(ctx, idx, i)),
    }
    Ok(())
}

/// `s_*_saveexec_*` of source `s` (`wide`: 64 bits) and operation `kind` (see
/// [`saveexec_kind`]): EXEC to `dst`, then the new EXEC, and SCC.
#[inline(always)]
pub(crate) fn saveexec(w: &mut Wave, s: u64, dst: u16, kind: u8, wide: bool) {
    let e = w.exec();
    let new = match kind {
        0 => s & e,
        1 => s | e,
        2 => s ^ e,
        3 => !(s & e),
        4 => !(s | e),
        5 => !(s ^ e),
        // not0/not1 invert the first/second operand of (S0 op EXEC).
        6 => !s & e,
        7 => !s | e,
        8 => s & !e,
        _ => s | !e,
    };
    let new = if wide { new } else { new & 0xffff_ffff };
    if wide {
        w.sset64(dst, e);
    } else {
        w.sset(dst, e as u32);
    }
    w.set_exec(new);
    w.scc = new != 0;
}

/// Width and operation (an index into the list below) of an `s_*_saveexec_*` opcode, from its
/// mnemonic, computed once per opcode.
pub(crate) fn saveexec_kind(op: u16) -> Option<(bool, u8)> {
    static TABLE: std::sync::OnceLock<Vec<Option<(bool, u8)>>> = std::sync::OnceLock::new();
    let t = TABLE.get_or_init(|| {
        (0..=sop1::OR_NOT1_SAVEEXEC_B64)
            .map(|op| {
                let n = super::names::name(Encoding::Sop1, op)?;
                let kind = [
                    "s_and_saveexec",
                    "s_or_saveexec",
                    "s_xor_saveexec",
                    "s_nand_saveexec",
                    "s_nor_saveexec",
                    "s_xnor_saveexec",
                    "s_and_not0_saveexec",
                    "s_or_not0_saveexec",
                    "s_and_not1_saveexec",
                    "s_or_not1_saveexec",
                ]
                .iter()
                .position(|k| *k == n.trim_end_matches("_b32").trim_end_matches("_b64"))?;
                Some((n.ends_with("_b64"), kind as u8))
            })
            .collect()
    });
    t.get(op as usize).copied().flatten()
}

fn jump(w: &mut Wave, ctx: &Ctx<'_>, addr: u64) -> Result<(), Error> {
    w.pc = ctx
        .prog
        .index_of(ctx.code_base, addr)
        .ok_or(Error::BadPc { pc: addr })?;
    Ok(())
}

fn sopk_op(w: &mut Wave, i: &Inst, idx: usize, ctx: &mut Ctx<'_>) -> Result<(), Error> {
    let k = i.imm as u32;
    let sk = i.imm as u16 as i16 as i32;
    let d = w.sread(i.dst, 0);
    match i.op {
        sopk::MOVK_I32 => w.sset(i.dst, sk as u32),
        sopk::CMOVK_I32 => {
            if w.scc {
                w.sset(i.dst, sk as u32)
            }
        }
        sopk::CMPK_EQ_I32 => w.scc = d as i32 == sk,
        sopk::CMPK_LG_I32 => w.scc = d as i32 != sk,
        sopk::CMPK_GT_I32 => w.scc = d as i32 > sk,
        sopk::CMPK_GE_I32 => w.scc = d as i32 >= sk,
        sopk::CMPK_LT_I32 => w.scc = (d as i32) < sk,
        sopk::CMPK_LE_I32 => w.scc = d as i32 <= sk,
        sopk::CMPK_EQ_U32 => w.scc = d == k,
        sopk::CMPK_LG_U32 => w.scc = d != k,
        sopk::CMPK_GT_U32 => w.scc = d > k,
        sopk::CMPK_GE_U32 => w.scc = d >= k,
        sopk::CMPK_LT_U32 => w.scc = d < k,
        sopk::CMPK_LE_U32 => w.scc = d <= k,
        sopk::ADDK_I32 => {
            let (r, o) = (d as i32).overflowing_add(sk);
            w.sset(i.dst, r as u32);
            w.scc = o;
        }
        sopk::MULK_I32 => w.sset(i.dst, (d as i32).wrapping_mul(sk) as u32),
        sopk::GETREG_B32 => {
            let (id, off, size) = hwreg_fields(k);
            let v = read_hwreg(w, id);
            let mask = if size >= 32 {
                u32::MAX
            } else {
                (1u32 << size) - 1
            };
            w.sset(i.dst, (v >> off) & mask);
        }
        sopk::SETREG_B32 | sopk::SETREG_IMM32_B32 => {
            let v = if i.op == sopk::SETREG_B32 {
                d
            } else {
                i.literal
            };
            let (id, off, size) = hwreg_fields(k);
            let mask = if size >= 32 {
                u32::MAX
            } else {
                ((1u32 << size) - 1) << off
            };
            let cur = read_hwreg(w, id);
            write_hwreg(w, id, (cur & !mask) | ((v << off) & mask));
        }
        sopk::CALL_B64 => {
            w.sset64(i.dst, pc_of(ctx, idx + 1));
            let target = pc_of(ctx, idx + 1).wrapping_add((sk as i64 * 4) as u64);
            jump(w, ctx, target)?;
        }
        sopk::WAITCNT_VSCNT | sopk::WAITCNT_VMCNT => wait_for_memory(w, ctx),
        sopk::VERSION | sopk::WAITCNT_EXPCNT | sopk::WAITCNT_LGKMCNT => {}
        _ => return Err(unimplemented(ctx, idx, i)),
    }
    Ok(())
}

/// `hwreg(id, offset, size)` fields of a SOPK immediate.
fn hwreg_fields(k: u32) -> (usize, u32, u32) {
    ((k & 0x3f) as usize, (k >> 6) & 31, ((k >> 11) & 31) + 1)
}

/// HW_REG_MODE (id 1): round [3:0], denorm [7:4], dx10 clamp [8], ieee [9]. On CDNA,
/// HW_REG_HW_ID (4) and HW_REG_XCC_ID (20) report where the wave runs.
fn read_hwreg(w: &Wave, id: usize) -> u32 {
    match id {
        1 => {
            let m = &w.mode;
            m.round as u32
                | (m.denorm as u32) << 4
                | (m.dx10_clamp as u32) << 8
                | (m.ieee as u32) << 9
        }
        4 if w.isa.is_cdna() => w.hw_id,
        20 if w.isa.is_cdna() => w.xcc_id,
        _ => w.hwreg[id],
    }
}

fn write_hwreg(w: &mut Wave, id: usize, v: u32) {
    if id == 1 {
        w.mode.round = (v & 0xf) as u8;
        w.mode.denorm = ((v >> 4) & 0xf) as u8;
        w.mode.dx10_clamp = v & (1 << 8) != 0;
        w.mode.ieee = v & (1 << 9) != 0;
    }
    w.hwreg[id] = v;
}

fn sopc_op(w: &mut Wave, i: &Inst, idx: usize, ctx: &Ctx<'_>) -> Result<(), Error> {
    let lit = i.literal;
    let (a, b) = (w.sread(i.src[0], lit), w.sread(i.src[1], lit));
    w.scc = match i.op {
        sopc::CMP_EQ_I32 | sopc::CMP_EQ_U32 => a == b,
        sopc::CMP_LG_I32 | sopc::CMP_LG_U32 => a != b,
        sopc::CMP_GT_I32 => a as i32 > b as i32,
        sopc::CMP_GE_I32 => a as i32 >= b as i32,
        sopc::CMP_LT_I32 => (a as i32) < b as i32,
        sopc::CMP_LE_I32 => a as i32 <= b as i32,
        sopc::CMP_GT_U32 => a > b,
        sopc::CMP_GE_U32 => a >= b,
        sopc::CMP_LT_U32 => a < b,
        sopc::CMP_LE_U32 => a <= b,
        sopc::BITCMP0_B32 => a & (1 << (b & 31)) == 0,
        sopc::BITCMP1_B32 => a & (1 << (b & 31)) != 0,
        sopc::BITCMP0_B64 => w.sread64(i.src[0], lit, Ty::I64) & (1 << (b & 63)) == 0,
        sopc::BITCMP1_B64 => w.sread64(i.src[0], lit, Ty::I64) & (1 << (b & 63)) != 0,
        sopc::CMP_EQ_U64 => w.sread64(i.src[0], lit, Ty::I64) == w.sread64(i.src[1], lit, Ty::I64),
        sopc::CMP_LG_U64 => w.sread64(i.src[0], lit, Ty::I64) != w.sread64(i.src[1], lit, Ty::I64),
        _ => return Err(unimplemented(ctx, idx, i)),
    };
    Ok(())
}

/// A wave's wait on its vector memory operations (`s_waitcnt`, RDNA4's `s_wait_*` lowered to
/// it, `s_waitcnt_vscnt`, `s_waitcnt_vmcnt`, `s_wait_idle`): the atomics it posted are
/// performed ([`crate::Memory::flush_posted`]). Whatever counter and count the wait names, it
/// is taken to wait for all of them (the emulator's operations complete in order, and a wait
/// that the hardware would let pass early only performs the posted atomics sooner).
#[inline(always)]
pub(super) fn wait_for_memory(w: &mut Wave, ctx: &mut Ctx<'_>) {
    if w.posted {
        ctx.mem.flush_posted();
        w.posted = false;
    }
}

/// Returns `true` when the wave stops running (end of program or barrier).
/// SOPPs that change nothing the emulator models: ALU and event waits, hints, priorities,
/// messages, traces and cache invalidations (memory is coherent and instructions complete in
/// order). The waits on memory counters are not among them: see [`wait_for_memory`].
pub(super) fn sopp_is_no_op(op: u16) -> bool {
    matches!(
        op,
        sopp::NOP
            | sopp::SETKILL
            | sopp::SLEEP
            | sopp::SET_INST_PREFETCH_DISTANCE
            | sopp::CLAUSE
            | sopp::DELAY_ALU
            | sopp::WAITCNT_DEPCTR
            | sopp::WAIT_EVENT
            | sopp::SETPRIO
            | sopp::SENDMSG
            | sopp::INCPERFLEVEL
            | sopp::DECPERFLEVEL
            | sopp::TTRACEDATA
            | sopp::TTRACEDATA_IMM
            | sopp::ICACHE_INV
            | sopp::WAKEUP
    )
}

fn sopp_op(w: &mut Wave, i: &Inst, idx: usize, ctx: &mut Ctx<'_>) -> Result<bool, Error> {
    if i.op == INVALID_OP {
        return Err(Error::InvalidInstruction {
            pc: pc_of(ctx, idx),
            reason: ctx.prog.invalid_reason(idx),
            dwords: ctx.prog.dwords(idx),
        });
    }
    if i.op == UNIMPL_OP {
        return Err(Error::Unimplemented {
            pc: pc_of(ctx, idx),
            text: format!("{} ({})", ctx.prog.text(idx), ctx.prog.invalid_reason(idx)),
            dwords: ctx.prog.dwords(idx),
        });
    }
    let branch = |w: &mut Wave, take: bool| -> Result<(), Error> {
        if take {
            let target = pc_of(ctx, idx + 1).wrapping_add((i.imm as u16 as i16 as i64 * 4) as u64);
            jump(w, ctx, target)?;
        }
        Ok(())
    };
    match i.op {
        sopp::ENDPGM => {
            w.state = WaveState::Done;
            return Ok(true);
        }
        sopp::BARRIER => {
            w.state = WaveState::Barrier;
            return Ok(true);
        }
        sopp::BRANCH => branch(w, true)?,
        sopp::CBRANCH_SCC0 => branch(w, !w.scc)?,
        sopp::CBRANCH_SCC1 => branch(w, w.scc)?,
        sopp::CBRANCH_VCCZ => branch(w, w.mask(VCC_LO) == 0)?,
        sopp::CBRANCH_VCCNZ => branch(w, w.mask(VCC_LO) != 0)?,
        sopp::CBRANCH_EXECZ => branch(w, w.exec() == 0)?,
        sopp::CBRANCH_EXECNZ => branch(w, w.exec() != 0)?,
        sopp::DENORM_MODE => w.mode.denorm = (i.imm & 0xf) as u8,
        sopp::ROUND_MODE => w.mode.round = (i.imm & 0xf) as u8,
        sopp::WAITCNT | sopp::WAIT_IDLE => wait_for_memory(w, ctx),
        op if sopp_is_no_op(op) => {}
        sopp::TRAP => {
            return Err(Error::Stopped {
                pc: pc_of(ctx, idx),
                reason: format!("s_trap {}", i.imm),
            });
        }
        sopp::SETHALT | sopp::SENDMSGHALT | sopp::CODE_END => {
            return Err(Error::Stopped {
                pc: pc_of(ctx, idx),
                reason: ctx.prog.text(idx),
            });
        }
        _ => return Err(unimplemented(ctx, idx, i)),
    }
    Ok(false)
}

fn smem_op(w: &mut Wave, i: &Inst, idx: usize, ctx: &mut Ctx<'_>) -> Result<(), Error> {
    let n = match i.op {
        smem::LOAD_B32 | smem::BUFFER_LOAD_B32 => 1,
        smem::LOAD_B64 | smem::BUFFER_LOAD_B64 => 2,
        smem::LOAD_B128 | smem::BUFFER_LOAD_B128 => 4,
        smem::LOAD_B256 | smem::BUFFER_LOAD_B256 => 8,
        smem::LOAD_B512 | smem::BUFFER_LOAD_B512 => 16,
        smem::GL1_INV | smem::DCACHE_INV => return Ok(()),
        _ => return Err(unimplemented(ctx, idx, i)),
    };
    let buffer = matches!(
        i.op,
        smem::BUFFER_LOAD_B32
            | smem::BUFFER_LOAD_B64
            | smem::BUFFER_LOAD_B128
            | smem::BUFFER_LOAD_B256
            | smem::BUFFER_LOAD_B512
    );
    let base = if buffer {
        // Buffer resource: base address in bits [47:0].
        w.sread64(i.src[0], 0, Ty::I64) & 0xffff_ffff_ffff
    } else {
        w.sread64(i.src[0], 0, Ty::I64)
    };
    let soff = if i.saddr == NULL {
        0
    } else {
        w.sread(i.saddr, 0) as u64
    };
    let addr = base.wrapping_add(i.imm as i64 as u64).wrapping_add(soff) & !3;
    let mut buf = [0u8; 64];
    ctx.mem
        .read(addr, &mut buf[..4 * n])
        .map_err(|f| fault(ctx, idx, i, 0, f))?;
    for k in 0..n {
        let v = u32::from_le_bytes([buf[4 * k], buf[4 * k + 1], buf[4 * k + 2], buf[4 * k + 3]]);
        w.sset(i.dst + k as u16, v);
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Vector ALU

/// Active lanes in `m`, low to high.
#[inline]
pub(crate) fn for_lanes(mut m: u64, mut f: impl FnMut(usize)) {
    while m != 0 {
        let l = m.trailing_zeros() as usize;
        m &= m - 1;
        f(l);
    }
}

/// Stages the DPP-permuted src0 in the DPP row and returns the lanes allowed to write.
pub(crate) fn apply_dpp(w: &mut Wave, i: &Inst) -> u64 {
    let exec = w.exec();
    let src_row = (i.src[0].wrapping_sub(VGPR0)) as usize;
    let lanes = w.lanes as usize;
    let mut write = exec;
    for lane in 0..lanes {
        let (from, row_ok) = match i.dpp {
            Dpp::None => (Some(lane), true),
            Dpp::Dpp8 { sel, .. } => {
                let s = (sel >> (3 * (lane % 8))) & 7;
                (Some(lane / 8 * 8 + s as usize), true)
            }
            Dpp::Dpp16 {
                ctrl,
                row_mask,
                bank_mask,
                bound_ctrl,
                ..
            } => {
                let c = ctrl as usize;
                let row = lane / 16;
                let l16 = lane % 16;
                let ok = row_mask >> (row % 4) & 1 != 0 && bank_mask >> ((l16 / 4) % 4) & 1 != 0;
                let src16: Option<usize> = match c {
                    0..=0xff => Some(l16 / 4 * 4 + ((c >> (2 * (l16 % 4))) & 3)),
                    0x101..=0x10f => (l16 + (c & 0xf) < 16).then(|| l16 + (c & 0xf)),
                    0x111..=0x11f => l16.checked_sub(c & 0xf),
                    0x121..=0x12f => Some((l16 + 16 - (c & 0xf)) % 16),
                    0x140 => Some(15 - l16),
                    0x141 => Some(l16 / 8 * 8 + 7 - l16 % 8),
                    0x150..=0x15f => Some(c & 0xf),
                    0x160..=0x16f => Some(l16 ^ (c & 0xf)),
                    _ => None,
                };
                let from = src16.map(|s| row * 16 + s);
                let from = match from {
                    Some(f)
                        if exec >> f & 1 == 0 && !matches!(i.dpp, Dpp::Dpp16 { fi: true, .. }) =>
                    {
                        None
                    }
                    f => f,
                };
                if from.is_none() && !bound_ctrl {
                    write &= !(1u64 << lane);
                }
                (from, ok)
            }
            Dpp::Gfx9 {
                ctrl,
                row_mask,
                bank_mask,
                bound_ctrl,
            } => {
                let c = ctrl as usize;
                let (row, l16) = (lane / 16, lane % 16);
                let ok = row_mask >> (row % 4) & 1 != 0 && bank_mask >> ((l16 / 4) % 4) & 1 != 0;
                let in_row = |s: Option<usize>| s.map(|s| row * 16 + s);
                let from: Option<usize> = match c {
                    0..=0xff => in_row(Some(l16 / 4 * 4 + ((c >> (2 * (l16 % 4))) & 3))),
                    0x101..=0x10f => in_row((l16 + (c & 0xf) < 16).then(|| l16 + (c & 0xf))),
                    0x111..=0x11f => in_row(l16.checked_sub(c & 0xf)),
                    0x121..=0x12f => in_row(Some((l16 + 16 - (c & 0xf)) % 16)),
                    // Whole-wave shifts and rotates by one lane.
                    0x130 => (lane + 1 < lanes).then_some(lane + 1),
                    0x134 => Some((lane + 1) % lanes),
                    0x138 => lane.checked_sub(1),
                    0x13c => Some((lane + lanes - 1) % lanes),
                    0x140 => in_row(Some(15 - l16)),
                    0x141 => in_row(Some(l16 / 8 * 8 + 7 - l16 % 8)),
                    // Lane 15 of each row to the next row; lane 31 to rows 2 and 3.
                    0x142 => (row >= 1).then(|| row * 16 - 1),
                    0x143 => (row >= 2).then_some(31),
                    // row_newbcast: lane n of each row to the whole row.
                    0x150..=0x15f => in_row(Some(c & 0xf)),
                    _ => None,
                };
                let from = from.filter(|&f| f < lanes && exec >> f & 1 != 0);
                if from.is_none() && !bound_ctrl {
                    write &= !(1u64 << lane);
                }
                (from, ok)
            }
            // SDWA is staged by its own path, never here.
            Dpp::Sdwa { .. } => (Some(lane), true),
        };
        if !row_ok {
            write &= !(1u64 << lane);
        }
        let v = from.map(|f| w.v[src_row * 64 + f]).unwrap_or(0);
        w.v[DPP_ROW * 64 + lane] = v;
    }
    write
}

/// Everything resolved once per VALU instruction.
pub(crate) struct Valu {
    /// Row base (`row * 64`) of each source; uniform sources are broadcast into const rows.
    pub r: [usize; 3],
    /// Per-source `(and, xor)` masks implementing abs/neg on the sign bit of the type.
    pub m: [(u64, u64); 3],
    /// Per-source 16-bit half shift.
    pub sh: [u32; 3],
    /// Lanes that execute (EXEC, narrowed by DPP masks).
    pub exec: u64,
}

impl Valu {
    #[inline(always)]
    pub(crate) fn f32(&self, w: &Wave, k: usize, lane: usize) -> f32 {
        let (a, x) = self.m[k];
        f32::from_bits((w.v[self.r[k] + lane] & a as u32) ^ x as u32)
    }
    #[inline(always)]
    pub(crate) fn u32(&self, w: &Wave, k: usize, lane: usize) -> u32 {
        w.v[self.r[k] + lane]
    }
    #[inline(always)]
    pub(crate) fn u16(&self, w: &Wave, k: usize, lane: usize) -> u16 {
        let (a, x) = self.m[k];
        (((w.v[self.r[k] + lane] >> self.sh[k]) as u16) & a as u16) ^ x as u16
    }
    #[inline(always)]
    pub(crate) fn f16(&self, w: &Wave, k: usize, lane: usize) -> f32 {
        f16_to_f32(self.u16(w, k, lane))
    }
    #[inline(always)]
    pub(crate) fn u64(&self, w: &Wave, k: usize, lane: usize) -> u64 {
        let b = self.r[k];
        w.v[b + lane] as u64 | (w.v.get(b + 64 + lane).copied().unwrap_or(0) as u64) << 32
    }
    #[inline(always)]
    pub(crate) fn f64(&self, w: &Wave, k: usize, lane: usize) -> f64 {
        let (a, x) = self.m[k];
        f64::from_bits((self.u64(w, k, lane) & a) ^ x)
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum K {
    I32,
    F32,
    I16,
    F16,
    I64,
    F64,
}

pub(crate) fn prep(w: &mut Wave, i: &Inst, kinds: [K; 3]) -> Valu {
    prep_n(w, i, kinds, 3)
}

/// Resolves the first `n` sources of a VALU instruction.
#[inline(always)]
pub(crate) fn prep_n(w: &mut Wave, i: &Inst, kinds: [K; 3], n: usize) -> Valu {
    let exec = if i.dpp != Dpp::None {
        apply_dpp(w, i)
    } else {
        w.exec()
    };
    let mut r = [0usize; 3];
    let mut m = [(u64::MAX, 0u64); 3];
    let mut sh = [0u32; 3];
    for k in 0..n {
        let code = if k == 0 && i.dpp != Dpp::None {
            VGPR0 + DPP_ROW as u16
        } else {
            i.src[k]
        };
        let ty = match kinds[k] {
            K::I32 | K::F32 => Ty::B32,
            K::I16 | K::F16 => Ty::B16,
            K::I64 => Ty::I64,
            K::F64 => Ty::F64,
        };
        r[k] = match w.src(code, i.literal, ty) {
            Src::V(b) => b,
            Src::K(c) => {
                // Whole rows (a constant length, so the fill is a few vector stores).
                let row = (CONST_ROW + 2 * k) * 64;
                set_row::<64>(&mut w.v, row, &[c as u32; 64]);
                if matches!(ty, Ty::I64 | Ty::F64) {
                    set_row::<64>(&mut w.v, row + 64, &[(c >> 32) as u32; 64]);
                }
                row
            }
        };
        let sign: u64 = match kinds[k] {
            K::F32 => 1 << 31,
            K::F16 => 1 << 15,
            K::F64 => 1 << 63,
            _ => 0,
        };
        if i.abs >> k & 1 != 0 && i.enc != Encoding::Vop3sd {
            m[k].0 = !sign;
        }
        if i.neg >> k & 1 != 0 {
            m[k].1 = sign;
        }
        if matches!(kinds[k], K::I16 | K::F16) && i.opsel >> k & 1 != 0 && code >= VGPR0 {
            sh[k] = 16;
        }
    }
    Valu { r, m, sh, exec }
}

/// `[g(0), .., g(N - 1)]` as a plain loop (it inlines into lane loops where
/// `std::array::from_fn` may not; the forms' lane loops in `fast.rs` use it too).
#[inline(always)]
pub(crate) fn arr<T: Copy + Default, const N: usize>(g: impl Fn(usize) -> T) -> [T; N] {
    let mut a = [T::default(); N];
    for (k, x) in a.iter_mut().enumerate() {
        *x = g(k);
    }
    a
}

/// All `L` lanes of a 32-bit operation with a dense EXEC: sources are rows `r[..N]`, the
/// result goes to row `d`. Compiled twice, for baseline x86-64 and for AVX2 with FMA (twice
/// the lanes per vector instruction), the second chosen at run time when the CPU has them.
#[cfg_attr(not(test), multiversion::multiversion(targets("x86_64+avx2+fma")))]
pub(crate) fn dense<const N: usize, const L: usize>(
    w: &mut Wave,
    r: &[usize; 3],
    d: usize,
    f: impl Fn([u32; N]) -> u32,
) {
    let mut out = [0u32; L];
    {
        let srcs: [&[u32; L]; N] =
            std::array::from_fn(|k| w.v[r[k]..r[k] + L].try_into().unwrap_or(&[0; L]));
        for (l, o) in out.iter_mut().enumerate() {
            *o = f(arr(|k| srcs[k][l]));
        }
    }
    if let Some(dst) = w.v.get_mut(d..d + L) {
        dst.copy_from_slice(&out);
    }
}

/// A 32-bit result from the bits of up to three sources of `kinds` (abs/neg applied to the
/// sign bit of float sources, no denormal flushing, no output modifiers) and the lane index:
/// with a full EXEC, a straight loop over the register rows the compiler can vectorise (built
/// for AVX2 too, as [`dense`]).
#[cfg_attr(not(test), multiversion::multiversion(targets("x86_64+avx2+fma")))]
pub(crate) fn vbits<const N: usize>(
    w: &mut Wave,
    i: &Inst,
    kinds: [K; 3],
    f: impl Fn(usize, [u32; N]) -> u32,
) {
    let v = prep_n(w, i, kinds, N);
    let d = (i.dst.wrapping_sub(VGPR0) as usize).min(VGPR_ROWS - 1) * 64;
    let m: [(u32, u32); N] = std::array::from_fn(|k| (v.m[k].0 as u32, v.m[k].1 as u32));
    if v.exec == full_mask(w.lanes) {
        if w.lanes == 64 {
            bits_rows::<N, 64>(w, &v.r, m, d, &f);
        } else {
            bits_rows::<N, 32>(w, &v.r, m, d, &f);
        }
        return;
    }
    each_lane(v.exec, w.lanes, |l| {
        let a: [u32; N] = std::array::from_fn(|k| (w.v[v.r[k] + l] & m[k].0) ^ m[k].1);
        w.v[d + l] = f(l, a);
    });
}

/// The full-EXEC body of [`vbits`] over `L` lanes.
#[inline(always)]
pub(crate) fn bits_rows<const N: usize, const L: usize>(
    w: &mut Wave,
    r: &[usize; 3],
    m: [(u32, u32); N],
    d: usize,
    f: &impl Fn(usize, [u32; N]) -> u32,
) {
    let mut out = [0u32; L];
    {
        let srcs: [&[u32; L]; N] = std::array::from_fn(|k| row::<L>(&w.v, r[k]));
        for (l, o) in out.iter_mut().enumerate() {
            *o = f(l, arr(|k| (srcs[k][l] & m[k].0) ^ m[k].1));
        }
    }
    set_row(&mut w.v, d, &out);
}

/// EXEC with every lane of the wave set.
#[inline(always)]
pub(crate) fn full_mask(lanes: u32) -> u64 {
    if lanes == 64 {
        u64::MAX
    } else {
        (1u64 << lanes) - 1
    }
}

/// Calls `f` for every lane set in `exec`, with a single call site so the lane body inlines
/// into a counted loop (the EXEC test is a well-predicted branch).
#[inline(always)]
pub(crate) fn each_lane(exec: u64, lanes: u32, mut f: impl FnMut(usize)) {
    for l in 0..lanes as usize {
        if exec >> l & 1 != 0 {
            f(l);
        }
    }
}

/// f32 fused multiply-add, correctly rounded: the product of two f32 is exact in f64, the sum
/// is rounded to f64 with round-to-odd (see [`add_round_odd`]), and the final rounding to f32
/// is then exact because f64 carries more than 2·24 + 2 bits.
#[inline(always)]
pub(crate) fn fma32(a: f32, b: f32, c: f32) -> f32 {
    add_round_odd(a as f64 * b as f64, c as f64) as f32
}

/// `p + c` rounded to f64 with round-to-odd: when the sum is inexact, the neighbour whose
/// last bit is 1. A later rounding to a narrower format is then the correct rounding of the
/// exact sum.
#[inline(always)]
pub(crate) fn add_round_odd(p: f64, c: f64) -> f64 {
    let s = p + c;
    let bb = s - p;
    let err = (p - (s - bb)) + (c - bb);
    // Branch-free so dense lane loops vectorise: step one ulp toward the exact value when the
    // sum is inexact, finite and even.
    let bits = s.to_bits();
    let fix = (err != 0.0) & s.is_finite() & (bits & 1 == 0);
    let step: u64 = if (err > 0.0) == (s > 0.0) {
        1
    } else {
        u64::MAX
    };
    f64::from_bits(bits.wrapping_add(if fix { step } else { 0 }))
}

/// A float result under the clamp bit: saturated to [0, 1], NaN to 0.
#[inline]
pub(crate) fn unit(x: f64) -> f64 {
    if x.is_nan() { 0.0 } else { x.clamp(0.0, 1.0) }
}

/// Output modifiers and clamp of a float result.
#[inline]
fn omod32(i: &Inst, x: f32, flush: bool) -> f32 {
    let mut x = match i.omod {
        1 => x * 2.0,
        2 => x * 4.0,
        3 => x * 0.5,
        _ => x,
    };
    if i.clamp {
        x = if x.is_nan() { 0.0 } else { x.clamp(0.0, 1.0) };
    }
    if flush && x.is_subnormal() {
        f32::from_bits(x.to_bits() & 0x8000_0000)
    } else {
        x
    }
}

#[inline]
fn ftz(x: f32, flush: bool) -> f32 {
    if flush && x.is_subnormal() {
        f32::from_bits(x.to_bits() & 0x8000_0000)
    } else {
        x
    }
}

pub(crate) fn vf32<const N: usize>(w: &mut Wave, i: &Inst, f: impl Fn([f32; N]) -> f32) {
    let v = prep_n(w, i, [K::F32; 3], N);
    vf32_prepped(w, i, v, f);
}

/// [`vf32`] once the sources are resolved.
#[inline(always)]
fn vf32_prepped<const N: usize>(w: &mut Wave, i: &Inst, v: Valu, f: impl Fn([f32; N]) -> f32) {
    let flush = w.mode.flush32();
    let plain = i.omod == 0 && !i.clamp && !flush;
    let d = (i.dst.wrapping_sub(VGPR0) as usize).min(VGPR_ROWS - 1) * 64;
    let lanes = w.lanes as usize;
    if plain && v.exec == full_mask(w.lanes) {
        // Dense EXEC, no modifiers on the result: a straight loop of constant length over
        // lane slices, which the compiler can vectorise.
        let g = |x: [u32; N]| -> u32 {
            f(arr(|k| {
                f32::from_bits((x[k] & v.m[k].0 as u32) ^ v.m[k].1 as u32)
            }))
            .to_bits()
        };
        if lanes == 32 {
            dense::<N, 32>(w, &v.r, d, g);
        } else {
            dense::<N, 64>(w, &v.r, d, g);
        }
        return;
    }
    each_lane(v.exec, w.lanes, |l| {
        let a: [f32; N] = std::array::from_fn(|k| ftz(v.f32(w, k, l), flush));
        let r = f(a);
        let r = if plain { r } else { omod32(i, r, flush) };
        w.v[d + l] = r.to_bits();
    });
}

/// The f32 fused multiply-adds D = a * b + c: `v_fma_f32`, `v_fmac_f32` (c is the
/// destination), `v_fmamk_f32` (b is the literal) and `v_fmaak_f32` (c is the literal). With
/// a full EXEC and no result modifiers, on a CPU with FMA, each lane is one hardware fused
/// multiply-add ([`fma_rows`]); otherwise [`fma32`]. Both round once, so the results are the
/// same bits.
fn vfma(w: &mut Wave, i: &Inst, op: u16) {
    let mut j = *i;
    if op == valu::FMAC_F32 {
        j.src[2] = i.dst;
        j.neg &= 3;
        j.abs &= 3;
    }
    let two = op == valu::FMAMK_F32 || op == valu::FMAAK_F32;
    let mut v = prep_n(w, &j, [K::F32; 3], if two { 2 } else { 3 });
    let k = f32::from_bits(i.literal);
    let lanes = w.lanes as usize;
    let plain = i.omod == 0 && !i.clamp && !w.mode.flush32();
    if plain && v.exec == full_mask(w.lanes) && fma_available() {
        if two {
            // The literal as a broadcast row in the third source's staging row.
            let row = (CONST_ROW + 4) * 64;
            w.v[row..row + lanes].fill(i.literal);
            if op == valu::FMAMK_F32 {
                v.r = [v.r[0], row, v.r[1]];
                v.m = [v.m[0], (u64::MAX, 0), v.m[1]];
            } else {
                v.r[2] = row;
                v.m[2] = (u64::MAX, 0);
            }
        }
        let d = (i.dst.wrapping_sub(VGPR0) as usize).min(VGPR_ROWS - 1) * 64;
        let m = v.m.map(|(a, x)| (a as u32, x as u32));
        if lanes == 32 {
            fma_rows::<32>(w, v.r, m, d);
        } else {
            fma_rows::<64>(w, v.r, m, d);
        }
        return;
    }
    match op {
        valu::FMAMK_F32 => vf32_prepped(w, &j, v, |[a, b]| fma32(a, k, b)),
        valu::FMAAK_F32 => vf32_prepped(w, &j, v, |[a, b]| fma32(a, b, k)),
        _ => vf32_prepped(w, &j, v, |[a, b, c]| fma32(a, b, c)),
    }
}

/// Whether the CPU does f32 fused multiply-adds in hardware (and AVX2, which the clone of
/// [`fma_rows`] that uses them is built for).
#[inline]
pub(crate) fn fma_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Row `d` = rows `r[0]` × `r[1]` + `r[2]` as f32 fused multiply-adds over `L` lanes, each
/// source's sign bit modified by its `(and, xor)` mask: the same bits as [`fma32`] (a NaN result
/// is a NaN in both, its payload the host's choice in both). Called when [`fma_available`], so the
/// AVX2+FMA clone runs and `mul_add` is one instruction per 8 lanes (the baseline clone would
/// call the C library's `fmaf`: the same results, slowly).
#[cfg_attr(not(test), multiversion::multiversion(targets("x86_64+avx2+fma")))]
pub(crate) fn fma_rows<const L: usize>(w: &mut Wave, r: [usize; 3], m: [(u32, u32); 3], d: usize) {
    fma_rows_inline::<L>(w, r, m, d);
}

/// The body of [`fma_rows`], inlined into it and into the run loop's FMA forms, which run only
/// when [`fma_available`], that is in the run loop's AVX2+FMA clone (the call was 4–6 % of
/// gfx942 `fmath` and `matmul` profiles).
#[inline(always)]
pub(crate) fn fma_rows_inline<const L: usize>(
    w: &mut Wave,
    r: [usize; 3],
    m: [(u32, u32); 3],
    d: usize,
) {
    let mut out = [0u32; L];
    {
        let s = [row::<L>(&w.v, r[0]), row(&w.v, r[1]), row(&w.v, r[2])];
        for (l, o) in out.iter_mut().enumerate() {
            let x = |k: usize| f32::from_bits((s[k][l] & m[k].0) ^ m[k].1);
            *o = x(0).mul_add(x(1), x(2)).to_bits();
        }
    }
    set_row(&mut w.v, d, &out);
}

pub(crate) fn vu32<const N: usize>(w: &mut Wave, i: &Inst, f: impl Fn([u32; N]) -> u32) {
    let v = prep_n(w, i, [K::I32; 3], N);
    let d = (i.dst.wrapping_sub(VGPR0) as usize).min(VGPR_ROWS - 1) * 64;
    let lanes = w.lanes as usize;
    if v.exec == full_mask(w.lanes) {
        if lanes == 32 {
            dense::<N, 32>(w, &v.r, d, f);
        } else {
            dense::<N, 64>(w, &v.r, d, f);
        }
        return;
    }
    each_lane(v.exec, w.lanes, |l| {
        let a: [u32; N] = std::array::from_fn(|k| v.u32(w, k, l));
        w.v[d + l] = f(a);
    });
}

/// A 64-bit integer result from the `N` sources of `kinds` (32-bit sources zero-extended):
/// with a full EXEC, straight loops over the register rows.
pub(crate) fn vu64<const N: usize>(
    w: &mut Wave,
    i: &Inst,
    kinds: [K; 3],
    f: impl Fn([u64; N]) -> u64,
) {
    vcarry(w, i, kinds, true, |x| (f(x), false));
}

/// A 32- or 64-bit (`wide`) integer result and a carry bit per lane from the `N` integer
/// sources of `kinds` (32-bit ones zero-extended; only those `N` are resolved); returns the
/// carry mask. With a full EXEC, straight loops over the register rows (built for AVX2 too,
/// as [`dense`]).
#[cfg_attr(not(test), multiversion::multiversion(targets("x86_64+avx2+fma")))]
pub(crate) fn vcarry<const N: usize>(
    w: &mut Wave,
    i: &Inst,
    kinds: [K; 3],
    wide_dst: bool,
    f: impl Fn([u64; N]) -> (u64, bool),
) -> u64 {
    let v = prep_n(w, i, kinds, N);
    let d = (i.dst.wrapping_sub(VGPR0) as usize).min(VGPR_ROWS - 2) * 64;
    let wide = kinds.map(|k| matches!(k, K::I64 | K::F64));
    let mut carry = 0u64;
    if v.exec == full_mask(w.lanes) {
        return if w.lanes == 64 {
            carry_rows::<N, 64>(w, &v.r, wide, d, wide_dst, &f)
        } else {
            carry_rows::<N, 32>(w, &v.r, wide, d, wide_dst, &f)
        };
    }
    each_lane(v.exec, w.lanes, |l| {
        let a: [u64; N] = std::array::from_fn(|k| {
            if wide[k] {
                v.u64(w, k, l)
            } else {
                v.u32(w, k, l) as u64
            }
        });
        let (r, c) = f(a);
        carry |= (c as u64) << l;
        if wide_dst {
            w.wr64(i.dst, l, r);
        } else {
            w.wr(i.dst, l, r as u32);
        }
    });
    carry
}

/// The `L` lanes of register row base `at` (`row * 64`) as a fixed-size array, so lane loops
/// and row copies have a constant length (inline moves, no `memcpy` calls); a row past the
/// register file reads as zeros.
#[inline(always)]
pub(crate) fn row<const L: usize>(v: &[u32], at: usize) -> &[u32; L] {
    v.get(at..)
        .and_then(|s| s.first_chunk::<L>())
        .unwrap_or(&[0; L])
}

/// Writes `L` lanes to register row base `at`, if it is inside the register file.
#[inline(always)]
pub(crate) fn set_row<const L: usize>(v: &mut [u32], at: usize, x: &[u32; L]) {
    if let Some(d) = v.get_mut(at..).and_then(|s| s.first_chunk_mut::<L>()) {
        *d = *x;
    }
}

/// The full-EXEC body of [`vcarry`] over `L` lanes: each source as a (low, high) pair of
/// rows, 32-bit sources with a high row of zeros.
#[inline(always)]
pub(crate) fn carry_rows<const N: usize, const L: usize>(
    w: &mut Wave,
    r: &[usize; 3],
    wide: [bool; 3],
    d: usize,
    wide_dst: bool,
    f: &impl Fn([u64; N]) -> (u64, bool),
) -> u64 {
    let (mut lo, mut hi) = ([0u32; L], [0u32; L]);
    let mut carry = 0u64;
    {
        let rows: [(&[u32; L], &[u32; L]); N] = std::array::from_fn(|k| {
            let hi = if wide[k] {
                row::<L>(&w.v, r[k] + 64)
            } else {
                row::<L>(&ZERO_ROW, 0)
            };
            (row::<L>(&w.v, r[k]), hi)
        });
        for l in 0..L {
            let (x, c) = f(arr(|k| rows[k].0[l] as u64 | (rows[k].1[l] as u64) << 32));
            lo[l] = x as u32;
            hi[l] = (x >> 32) as u32;
            carry |= (c as u64) << l;
        }
    }
    set_row(&mut w.v, d, &lo);
    if wide_dst {
        set_row(&mut w.v, d + 64, &hi);
    }
    carry
}

/// Two 32-bit sources and a per-lane carry-in (`cin[lane]`, 0 or 1) to a 32-bit result and a
/// carry-out mask.
fn vcarry_lanes(
    w: &mut Wave,
    i: &Inst,
    cin: &[u64; 64],
    f: impl Fn(u64, u64, u64) -> (u32, bool),
) -> u64 {
    let v = prep_n(w, i, [K::I32; 3], 2);
    let d = (i.dst.wrapping_sub(VGPR0) as usize).min(VGPR_ROWS - 1) * 64;
    let mut carry = 0u64;
    if v.exec == full_mask(w.lanes) {
        if w.lanes == 64 {
            carry_in_rows::<64>(w, &v.r, cin, d, &f, &mut carry);
        } else {
            carry_in_rows::<32>(w, &v.r, cin, d, &f, &mut carry);
        }
        return carry;
    }
    each_lane(v.exec, w.lanes, |l| {
        let (r, c) = f(v.u32(w, 0, l) as u64, v.u32(w, 1, l) as u64, cin[l]);
        carry |= (c as u64) << l;
        w.v[d + l] = r;
    });
    carry
}

/// The full-EXEC body of [`vcarry_lanes`] over `L` lanes.
#[inline(always)]
fn carry_in_rows<const L: usize>(
    w: &mut Wave,
    r: &[usize; 3],
    cin: &[u64; 64],
    d: usize,
    f: &impl Fn(u64, u64, u64) -> (u32, bool),
    carry: &mut u64,
) {
    let mut out = [0u32; L];
    {
        let (a, b) = (row::<L>(&w.v, r[0]), row::<L>(&w.v, r[1]));
        for l in 0..L {
            let (x, c) = f(a[l] as u64, b[l] as u64, cin[l]);
            out[l] = x;
            *carry |= (c as u64) << l;
        }
    }
    set_row(&mut w.v, d, &out);
}

/// f16 operations computed in f64 and rounded once to f16 (products of halves are exact in
/// f64; sums that feed a rounding use [`add_round_odd`]).
fn vf16<const N: usize>(w: &mut Wave, i: &Inst, f: impl Fn([f64; N]) -> f64) {
    let v = prep_n(w, i, [K::F16; 3], N);
    let hi = i.opsel & 8 != 0;
    let flush = w.mode.flush16_64();
    for_lanes(v.exec, |l| {
        let a: [f64; N] = std::array::from_fn(|k| {
            let x = v.f16(w, k, l);
            (if flush && f16_sub(x) {
                0.0f32.copysign(x)
            } else {
                x
            }) as f64
        });
        let mut r = f(a);
        r = match i.omod {
            1 => r * 2.0,
            2 => r * 4.0,
            3 => r * 0.5,
            _ => r,
        };
        if i.clamp {
            r = if r.is_nan() { 0.0 } else { r.clamp(0.0, 1.0) };
        }
        let mut h = f64_to_f16(r);
        if flush && h & 0x7c00 == 0 {
            h &= 0x8000;
        }
        w.wr16v(i, l, hi, h);
    });
}

fn f16_sub(x: f32) -> bool {
    x != 0.0 && x.abs() < 6.103_515_6e-5
}

fn vu16<const N: usize>(w: &mut Wave, i: &Inst, f: impl Fn([u16; N]) -> u16) {
    let v = prep_n(w, i, [K::I16; 3], N);
    let hi = i.opsel & 8 != 0;
    for_lanes(v.exec, |l| {
        let a: [u16; N] = std::array::from_fn(|k| v.u16(w, k, l));
        w.wr16v(i, l, hi, f(a));
    });
}

pub(crate) fn vf64<const N: usize>(w: &mut Wave, i: &Inst, f: impl Fn([f64; N]) -> f64) {
    let v = prep_n(w, i, [K::F64; 3], N);
    for_lanes(v.exec, |l| {
        let a: [f64; N] = std::array::from_fn(|k| v.f64(w, k, l));
        let mut r = f(a);
        r = match i.omod {
            1 => r * 2.0,
            2 => r * 4.0,
            3 => r * 0.5,
            _ => r,
        };
        if i.clamp {
            r = if r.is_nan() { 0.0 } else { r.clamp(0.0, 1.0) };
        }
        w.wr64(i.dst, l, r.to_bits());
    });
}

/// Generic lane loop with explicit operand kinds, for mixed-type instructions.
pub(crate) fn vmix(
    w: &mut Wave,
    i: &Inst,
    kinds: [K; 3],
    mut f: impl FnMut(&mut Wave, &Valu, usize),
) {
    let v = prep(w, i, kinds);
    each_lane(v.exec, w.lanes, |l| f(w, &v, l));
}

/// IEEE-754 maxNum/minNum as the hardware does them: a NaN operand yields the other, and
/// +0 is greater than -0.
pub(crate) fn fmax(a: f32, b: f32) -> f32 {
    if a.is_nan() {
        return if b.is_nan() { f32::NAN } else { b };
    }
    if b.is_nan() {
        return a;
    }
    if a == b {
        if a.is_sign_negative() { b } else { a }
    } else {
        a.max(b)
    }
}

pub(crate) fn fmin(a: f32, b: f32) -> f32 {
    if a.is_nan() {
        return if b.is_nan() { f32::NAN } else { b };
    }
    if b.is_nan() {
        return a;
    }
    if a == b {
        if a.is_sign_negative() { a } else { b }
    } else {
        a.min(b)
    }
}

fn is_snan32(x: f32) -> bool {
    x.is_nan() && x.to_bits() & 0x40_0000 == 0
}

fn fmed3(a: f32, b: f32, c: f32) -> f32 {
    if a.is_nan() || b.is_nan() || c.is_nan() {
        return fmin(fmin(a, b), c);
    }
    let mx = fmax(fmax(a, b), c);
    if mx == a {
        fmax(b, c)
    } else if mx == b {
        fmax(a, c)
    } else {
        fmax(a, b)
    }
}

pub(crate) fn cvt_u32(x: f32) -> u32 {
    if x.is_nan() { 0 } else { x as u32 }
}

fn frexp_exp(x: f32) -> i32 {
    if x == 0.0 || !x.is_finite() {
        return 0;
    }
    let b = x.to_bits();
    let e = ((b >> 23) & 0xff) as i32;
    if e == 0 {
        // Subnormal.
        let m = b & 0x7f_ffff;
        // x = m · 2^-149 with m of bit length 32 - lz, so x is in [2^(e-1), 2^e).
        -117 - m.leading_zeros() as i32
    } else {
        e - 126
    }
}

fn frexp_mant(x: f32) -> f32 {
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    ldexp(x, -frexp_exp(x))
}

pub(crate) fn ldexp(x: f32, e: i32) -> f32 {
    // x * 2^e is exact in f64 for every f32 x and |e| <= 400 (and beyond 400 every nonzero
    // f32 result overflows or underflows anyway), so the one rounding to f32 is correct;
    // branch-free, so lane loops vectorise.
    (x as f64 * pow2(e.clamp(-400, 400))) as f32
}

/// 2^e for e in the normal range of f64 (built from its bits: exact and cheaper than powi).
#[inline]
pub(crate) fn pow2(e: i32) -> f64 {
    f64::from_bits(((e.clamp(-1022, 1023) + 1023) as u64) << 52)
}

pub(crate) fn round_even(x: f32) -> f32 {
    // Below 2^23, adding and taking away 2^23 rounds to an integer, ties to even (the
    // default rounding); larger magnitudes, infinities and NaN are already integral.
    const BIG: f32 = 8_388_608.0;
    if x.abs() < BIG {
        ((x.abs() + BIG) - BIG).copysign(x)
    } else {
        x
    }
}

pub(crate) fn fract(x: f32) -> f32 {
    if x.is_infinite() {
        return f32::NAN;
    }
    (x - x.floor()).min(f32::from_bits(0x3f7f_ffff))
}

/// `v_div_scale_f32 d, vcc, s0, den, num`: scales the operand s0 (the numerator or the
/// denominator) by 2^±64 when the quotient would lose precision to overflow, underflow or
/// denormals; VCC tells `v_div_fmas` to undo the scaling.
fn div_scale32(s0: f32, den: f32, num: f32) -> (f32, bool) {
    let exp = |x: f32| ((x.to_bits() >> 23) & 0xff) as i32;
    // "Is denormal": below the normal range, including quotients that would underflow to 0.
    let small = |x: f64| x.abs() < f32::MIN_POSITIVE as f64;
    let (n, d) = (num as f64, den as f64);
    if num == 0.0 || den == 0.0 {
        (f32::NAN, false)
    } else if exp(num) - exp(den) >= 96 {
        (if s0 == den { ldexp(s0, 64) } else { s0 }, true)
    } else if den.is_subnormal() {
        (ldexp(s0, 64), false)
    } else if small(1.0 / d) && small(n / d) {
        // Scale only the denominator down: 1/den becomes normal and the quotient grows by
        // 2^64, which v_div_fmas takes back.
        (if s0 == den { ldexp(s0, -64) } else { s0 }, true)
    } else if small(1.0 / d) {
        (ldexp(s0, -64), false)
    } else if small(n / d) {
        (if s0 == num { ldexp(s0, 64) } else { s0 }, true)
    } else if exp(num) <= 23 {
        (ldexp(s0, 64), false)
    } else {
        (s0, false)
    }
}

/// `v_div_scale_f64`, as [`div_scale32`] with the f64 thresholds (2^±128, 768, 53).
fn div_scale64(s0: f64, den: f64, num: f64) -> (f64, bool) {
    let exp = |x: f64| ((x.to_bits() >> 52) & 0x7ff) as i64;
    // Quotients are formed in f64, so one that underflows to 0 counts as below normal too.
    let small = |x: f64| x.abs() < f64::MIN_POSITIVE;
    if num == 0.0 || den == 0.0 {
        (f64::NAN, false)
    } else if exp(num) - exp(den) >= 768 {
        (if s0 == den { ldexp64(s0, 128) } else { s0 }, true)
    } else if den.is_subnormal() {
        (ldexp64(s0, 128), false)
    } else if small(1.0 / den) && small(num / den) {
        (if s0 == den { ldexp64(s0, -128) } else { s0 }, true)
    } else if small(1.0 / den) {
        (ldexp64(s0, -128), false)
    } else if small(num / den) {
        (if s0 == num { ldexp64(s0, 128) } else { s0 }, true)
    } else if exp(num) <= 53 {
        (ldexp64(s0, 128), false)
    } else {
        (s0, false)
    }
}

/// x · 2^e with a single rounding (to nearest even; subnormal and overflowing results too).
fn ldexp64(x: f64, e: i32) -> f64 {
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    let (m, ex) = split64(x);
    round64(
        x.is_sign_negative(),
        u128::from(m),
        i64::from(ex) + i64::from(e),
    )
}

/// A finite f64 as an integer significand and a power of two: |x| = m · 2^e exactly.
fn split64(x: f64) -> (u64, i32) {
    let b = x.to_bits();
    let (field, frac) = (((b >> 52) & 0x7ff) as i32, b & ((1 << 52) - 1));
    if field == 0 {
        (frac, -1074)
    } else {
        (frac | 1 << 52, field - 1075)
    }
}

/// (−1)^neg · m · 2^e rounded once to the nearest f64, ties to even: subnormal results keep
/// the bits they can hold, results past the largest finite value become infinite. Built from
/// bits, so no intermediate power of two can underflow or overflow.
fn round64(neg: bool, m: u128, e: i64) -> f64 {
    let sign = if neg { 1u64 << 63 } else { 0 };
    if m == 0 {
        return f64::from_bits(sign);
    }
    // The value's leading bit is 2^top; the result's last bit is 2^lsb.
    let top = 127 - i64::from(m.leading_zeros()) + e;
    if top > 1023 {
        return f64::from_bits(sign | 0x7ff0_0000_0000_0000);
    }
    let lsb = (top - 52).max(-1074);
    let shift = lsb - e;
    let q: u64 = if shift <= 0 {
        // Exact: at most 53 bits.
        (m << (-shift)) as u64
    } else if shift > 128 {
        // Below half the smallest subnormal.
        0
    } else {
        let q = if shift == 128 { 0 } else { m >> shift };
        let rest = if shift == 128 {
            m
        } else {
            m & ((1u128 << shift) - 1)
        };
        let half = 1u128 << (shift - 1);
        let up = rest > half || (rest == half && q & 1 == 1);
        (q + u128::from(up)) as u64
    };
    // q · 2^lsb with q < 2^53, or 2^53 after rounding up, or below 2^52 for a subnormal.
    let (q, lsb) = if q == 1 << 53 {
        (q >> 1, lsb + 1)
    } else {
        (q, lsb)
    };
    if q < 1 << 52 {
        // Subnormal (lsb is -1074) or zero: the significand is the bits.
        return f64::from_bits(sign | q);
    }
    let field = lsb + 1075;
    if field >= 0x7ff {
        return f64::from_bits(sign | 0x7ff0_0000_0000_0000);
    }
    f64::from_bits(sign | (field as u64) << 52 | (q & ((1 << 52) - 1)))
}

/// a · b + c, scaled by 2^k, with one rounding: `v_div_fmas_f64` with VCC set, whose scaling
/// undoes `v_div_scale_f64`'s and must not round the fused result twice (nor lose it when it
/// is subnormal). The sum is formed exactly in integers: the term with the higher leading bit
/// is widened to 124 bits and the other aligned to it. Bits of the other below the last of
/// those (there are some only when its leading bit is 18 or more places lower, so the sum
/// keeps over 120 bits) only put the sum strictly between two neighbours, which a half unit
/// stands for: rounding to 53 bits cannot tell the two apart.
fn fma_scaled64(a: f64, b: f64, c: f64, k: i32) -> f64 {
    if !(a.is_finite() && b.is_finite() && c.is_finite()) || a == 0.0 || b == 0.0 {
        // NaN, infinity, or an exact product of zero: fused and unfused agree, and the
        // scaling rounds the one value there is.
        return ldexp64(a.mul_add(b, c), k);
    }
    let (ma, ea) = split64(a);
    let (mb, eb) = split64(b);
    let p = (
        u128::from(ma) * u128::from(mb),
        i64::from(ea) + i64::from(eb),
    );
    let p_neg = a.is_sign_negative() != b.is_sign_negative();
    if c == 0.0 {
        return round64(p_neg, p.0, p.1 + i64::from(k));
    }
    let (mc, ec) = split64(c);
    let q = (u128::from(mc), i64::from(ec));
    let top = |(m, e): (u128, i64)| 127 - i64::from(m.leading_zeros()) + e;
    let ((hi, hi_neg), (lo, lo_neg)) = if top(p) >= top(q) {
        ((p, p_neg), (q, c.is_sign_negative()))
    } else {
        ((q, c.is_sign_negative()), (p, p_neg))
    };
    // hi widened to 124 bits at exponent e; lo aligned to e, its bits below 2^e cut.
    let widen = 124 - (128 - i64::from(hi.0.leading_zeros()));
    let e = hi.1 - widen;
    let h = hi.0 << widen;
    let d = lo.1 - e;
    let (kept, cut) = if d >= 0 {
        (lo.0 << d, false)
    } else if -d >= 128 {
        (0, true)
    } else {
        (lo.0 >> -d, lo.0 & ((1u128 << -d) - 1) != 0)
    };
    // In units of 2^(e-1): a cut lo is kept + 1/2, strictly between its neighbours.
    let (e, h, l) = (e - 1, h << 1, kept << 1 | u128::from(cut));
    let (neg, m) = if hi_neg == lo_neg {
        (hi_neg, h + l)
    } else if h >= l {
        (hi_neg, h - l)
    } else {
        (lo_neg, l - h)
    };
    if m == 0 {
        // An exact zero sum of opposite terms is +0 when rounding to nearest.
        return 0.0;
    }
    round64(neg, m, e + i64::from(k))
}

fn frexp_exp64(x: f64) -> i32 {
    if x == 0.0 || !x.is_finite() {
        return 0;
    }
    let b = x.to_bits();
    let e = ((b >> 52) & 0x7ff) as i32;
    if e == 0 {
        let m = b & ((1 << 52) - 1);
        -1022 - (m.leading_zeros() as i32 - 12)
    } else {
        e - 1022
    }
}

/// `v_div_fixup_f64`: as [`div_fixup`].
fn div_fixup64(q: f64, b: f64, a: f64) -> f64 {
    let neg = a.is_sign_negative() != b.is_sign_negative();
    let signed = |v: f64| if neg { -v.abs() } else { v.abs() };
    if a.is_nan() {
        a
    } else if b.is_nan() {
        b
    } else if (a == 0.0 && b == 0.0) || (a.is_infinite() && b.is_infinite()) {
        f64::NAN
    } else if b == 0.0 || a.is_infinite() {
        signed(f64::INFINITY)
    } else if a == 0.0 || b.is_infinite() {
        signed(0.0)
    } else if q.is_nan() {
        signed(f64::INFINITY)
    } else {
        signed(q)
    }
}

/// `v_div_fixup_f32`: special cases of a / b around the quotient estimate q = src0.
fn div_fixup(q: f32, b: f32, a: f32) -> f32 {
    let sign = (a.is_sign_negative() != b.is_sign_negative()) as u32;
    let signed = |v: f32| f32::from_bits(v.to_bits() & 0x7fff_ffff | sign << 31);
    if a.is_nan() {
        a
    } else if b.is_nan() {
        b
    } else if (a == 0.0 && b == 0.0) || (a.is_infinite() && b.is_infinite()) {
        f32::NAN
    } else if b == 0.0 || a.is_infinite() {
        signed(f32::INFINITY)
    } else if a == 0.0 || b.is_infinite() {
        signed(0.0)
    } else if q.is_nan() {
        signed(f32::INFINITY)
    } else {
        signed(q.abs())
    }
}

pub(crate) fn valu_op(
    w: &mut Wave,
    i: &Inst,
    op: u16,
    idx: usize,
    ctx: &Ctx<'_>,
) -> Result<(), Error> {
    use valu::*;
    match op {
        NOP => {}
        MOV_B32 => vu32(w, i, |[a]| a),
        MOV_B16 => vu16(w, i, |[a]| a),
        CNDMASK_B32 => {
            let mask_code = if matches!(i.enc, Encoding::Vop2) {
                VCC_LO
            } else {
                i.src[2]
            };
            let m = w.mask(mask_code);
            // abs/neg (VOP3) act on the float sign bit of the selected source.
            vbits(w, i, [K::F32, K::F32, K::I32], |l, [a, b]| {
                if m >> l & 1 != 0 { b } else { a }
            });
        }
        ADD_F32 => vf32(w, i, |[a, b]| a + b),
        SUB_F32 => vf32(w, i, |[a, b]| a - b),
        SUBREV_F32 => vf32(w, i, |[a, b]| b - a),
        MUL_F32 => vf32(w, i, |[a, b]| a * b),
        MUL_DX9_ZERO_F32 => vf32(
            w,
            i,
            |[a, b]| if a == 0.0 || b == 0.0 { 0.0 } else { a * b },
        ),
        MIN_F32 | MAX_F32 => {
            // IEEE mode: a signalling NaN operand gives a quiet NaN (LLVM canonicalises with
            // v_max_f32 x, x, x); otherwise a NaN operand yields the other operand.
            let ieee = w.mode.ieee;
            let max = op == MAX_F32;
            vf32(w, i, move |[a, b]| {
                if ieee && (is_snan32(a) || is_snan32(b)) {
                    f32::from_bits(
                        if is_snan32(a) {
                            a.to_bits()
                        } else {
                            b.to_bits()
                        } | 0x40_0000,
                    )
                } else if max {
                    fmax(a, b)
                } else {
                    fmin(a, b)
                }
            })
        }
        FMAC_F32 | FMAMK_F32 | FMAAK_F32 | FMA_F32 => vfma(w, i, op),
        MIN3_F32 => vf32(w, i, |[a, b, c]| fmin(fmin(a, b), c)),
        MAX3_F32 => vf32(w, i, |[a, b, c]| fmax(fmax(a, b), c)),
        MED3_F32 => vf32(w, i, |[a, b, c]| fmed3(a, b, c)),
        MINMAX_F32 => vf32(w, i, |[a, b, c]| fmax(fmin(a, b), c)),
        MAXMIN_F32 => vf32(w, i, |[a, b, c]| fmin(fmax(a, b), c)),
        DIV_FIXUP_F32 => vf32(w, i, |[q, b, a]| div_fixup(q, b, a)),
        DIV_FMAS_F32 => {
            let vcc = w.mask(VCC_LO);
            vmix(w, i, [K::F32, K::F32, K::F32], |w, v, l| {
                let (a, b, c) = (v.f32(w, 0, l), v.f32(w, 1, l), v.f32(w, 2, l));
                // With VCC set, undo v_div_scale: 2^64 when the biased exponent of src2
                // exceeds 127, else 2^-64, applied before the single rounding.
                let r = if vcc >> l & 1 != 0 {
                    let e = (c.to_bits() >> 23) & 0xff;
                    let k = if e > 127 { 64 } else { -64 };
                    (add_round_odd(a as f64 * b as f64, c as f64) * pow2(k)) as f32
                } else {
                    fma32(a, b, c)
                };
                w.wr(i.dst, l, r.to_bits());
            });
        }
        DIV_FMAS_F64 => {
            let vcc = w.mask(VCC_LO);
            vmix(w, i, [K::F64, K::F64, K::F64], |w, v, l| {
                let (a, b, c) = (v.f64(w, 0, l), v.f64(w, 1, l), v.f64(w, 2, l));
                let r = if vcc >> l & 1 != 0 {
                    let e = (c.to_bits() >> 52) & 0x7ff;
                    fma_scaled64(a, b, c, if e > 1023 { 128 } else { -128 })
                } else {
                    a.mul_add(b, c)
                };
                w.wr64(i.dst, l, r.to_bits());
            });
        }
        DIV_SCALE_F32 => {
            let mut vcc = 0u64;
            vmix(w, i, [K::F32, K::F32, K::F32], |w, v, l| {
                let (r, c) = div_scale32(v.f32(w, 0, l), v.f32(w, 1, l), v.f32(w, 2, l));
                vcc |= (c as u64) << l;
                w.wr(i.dst, l, r.to_bits());
            });
            w.set_mask(i.sdst, vcc);
        }
        DIV_SCALE_F64 => {
            let mut vcc = 0u64;
            vmix(w, i, [K::F64, K::F64, K::F64], |w, v, l| {
                let (r, c) = div_scale64(v.f64(w, 0, l), v.f64(w, 1, l), v.f64(w, 2, l));
                vcc |= (c as u64) << l;
                w.wr64(i.dst, l, r.to_bits());
            });
            w.set_mask(i.sdst, vcc);
        }
        DIV_FIXUP_F64 => vf64(w, i, |[q, b, a]| div_fixup64(q, b, a)),
        // Halves are exact in f64, so the f64 fixup followed by the f16 rounding is exact.
        DIV_FIXUP_F16 => vf16(w, i, |[q, b, a]| div_fixup64(q, b, a)),
        LDEXP_F64 => vmix(w, i, [K::F64, K::I32, K::I32], |w, v, l| {
            let r = ldexp64(v.f64(w, 0, l), v.u32(w, 1, l) as i32);
            w.wr64(i.dst, l, r.to_bits());
        }),
        TRUNC_F64 => vf64(w, i, |[a]| a.trunc()),
        CEIL_F64 => vf64(w, i, |[a]| a.ceil()),
        RNDNE_F64 => vf64(w, i, |[a]| a.round_ties_even()),
        FRACT_F64 => vf64(w, i, |[a]| {
            if a.is_infinite() {
                f64::NAN
            } else {
                (a - a.floor()).min(f64::from_bits(0x3fef_ffff_ffff_ffff))
            }
        }),
        FREXP_MANT_F64 => vf64(w, i, |[a]| {
            if a == 0.0 || !a.is_finite() {
                a
            } else {
                ldexp64(a, -frexp_exp64(a))
            }
        }),
        FREXP_EXP_I32_F64 => vmix(w, i, [K::F64; 3], |w, v, l| {
            let r = frexp_exp64(v.f64(w, 0, l));
            w.wr(i.dst, l, r as u32);
        }),
        LDEXP_F32 if i.omod == 0 && !i.clamp && !w.mode.flush32() => {
            vbits(w, i, [K::F32, K::I32, K::I32], |_, [a, b]| {
                ldexp(f32::from_bits(a), b as i32).to_bits()
            })
        }
        LDEXP_F32 => vmix(w, i, [K::F32, K::I32, K::I32], |w, v, l| {
            let r = ldexp(v.f32(w, 0, l), v.u32(w, 1, l) as i32);
            w.wr(i.dst, l, omod32(i, r, false).to_bits());
        }),
        RCP_F32 | RCP_IFLAG_F32 => vf32(w, i, |[a]| (1.0 / a as f64) as f32),
        RSQ_F32 => vf32(w, i, |[a]| (1.0 / (a as f64).sqrt()) as f32),
        SQRT_F32 => vf32(w, i, |[a]| a.sqrt()),
        EXP_F32 => vf32(w, i, |[a]| (a as f64).exp2() as f32),
        LOG_F32 => vf32(w, i, |[a]| (a as f64).log2() as f32),
        SIN_F32 => vf32(w, i, |[a]| {
            ((a as f64) * std::f64::consts::TAU).sin() as f32
        }),
        COS_F32 => vf32(w, i, |[a]| {
            ((a as f64) * std::f64::consts::TAU).cos() as f32
        }),
        FLOOR_F32 => vf32(w, i, |[a]| a.floor()),
        CEIL_F32 => vf32(w, i, |[a]| a.ceil()),
        TRUNC_F32 => vf32(w, i, |[a]| a.trunc()),
        RNDNE_F32 => vf32(w, i, |[a]| round_even(a)),
        FRACT_F32 => vf32(w, i, |[a]| fract(a)),
        FREXP_MANT_F32 => vf32(w, i, |[a]| frexp_mant(a)),
        FREXP_EXP_I32_F32 => vmix(w, i, [K::F32; 3], |w, v, l| {
            let r = frexp_exp(v.f32(w, 0, l));
            w.wr(i.dst, l, r as u32);
        }),
        CVT_F32_I32 => vu32(w, i, |[a]| (a as i32 as f32).to_bits()),
        CVT_F32_U32 => vu32(w, i, |[a]| (a as f32).to_bits()),
        // A denormal input converts to 0 whether or not it is flushed.
        CVT_I32_F32 => vbits(w, i, [K::F32; 3], |_, [a]| cvt_i32(f32::from_bits(a))),
        CVT_U32_F32 => vbits(w, i, [K::F32; 3], |_, [a]| cvt_u32(f32::from_bits(a))),
        CVT_F32_UBYTE0 | CVT_F32_UBYTE1 | CVT_F32_UBYTE2 | CVT_F32_UBYTE3 => {
            let sh = 8 * (op - CVT_F32_UBYTE0) as u32;
            vu32(w, i, |[a]| (((a >> sh) & 0xff) as f32).to_bits())
        }
        CVT_F32_F16 => vmix(w, i, [K::F16; 3], |w, v, l| {
            let r = v.f16(w, 0, l);
            w.wr(i.dst, l, omod32(i, r, false).to_bits());
        }),
        CVT_F16_F32 => {
            let hi = i.opsel & 8 != 0;
            vmix(w, i, [K::F32; 3], |w, v, l| {
                let r = f32_to_f16(v.f32(w, 0, l));
                w.wr16v(i, l, hi, r);
            })
        }
        CVT_PK_RTZ_F16_F32 => vmix(w, i, [K::F32; 3], |w, v, l| {
            let rtz = |x: f32| {
                let h = f32_to_f16(x);
                // Round toward zero: step back one ulp when rounding went away from zero.
                if x.is_finite() && f16_to_f32(h).abs() > x.abs() {
                    h - 1
                } else {
                    h
                }
            };
            let r = rtz(v.f32(w, 0, l)) as u32 | (rtz(v.f32(w, 1, l)) as u32) << 16;
            w.wr(i.dst, l, r);
        }),
        PACK_B32_F16 => vmix(w, i, [K::F16; 3], |w, v, l| {
            let r = v.u16(w, 0, l) as u32 | (v.u16(w, 1, l) as u32) << 16;
            w.wr(i.dst, l, r);
        }),
        // f16
        ADD_F16 => vf16(w, i, |[a, b]| a + b),
        SUB_F16 => vf16(w, i, |[a, b]| a - b),
        SUBREV_F16 => vf16(w, i, |[a, b]| b - a),
        MUL_F16 => vf16(w, i, |[a, b]| a * b),
        FMA_F16 => vf16(w, i, |[a, b, c]| add_round_odd(a * b, c)),
        MIN_F16 => vf16(w, i, |[a, b]| fmin(a as f32, b as f32) as f64),
        MAX_F16 => vf16(w, i, |[a, b]| fmax(a as f32, b as f32) as f64),
        FMAMK_F16 => vf16(w, i, |[a, b]| {
            add_round_odd(a * f16_to_f32(i.literal as u16) as f64, b)
        }),
        FMAAK_F16 => vf16(w, i, |[a, b]| {
            add_round_odd(a * b, f16_to_f32(i.literal as u16) as f64)
        }),
        FMAC_F16 => {
            let hi = i.opsel & 8 != 0;
            let dst = i.dst;
            vmix(w, i, [K::F16; 3], |w, v, l| {
                let d = w.v[(dst - VGPR0) as usize * 64 + l];
                let c = f16_to_f32((d >> if hi { 16 } else { 0 }) as u16) as f64;
                let r = add_round_odd(v.f16(w, 0, l) as f64 * v.f16(w, 1, l) as f64, c);
                w.wr16(dst, l, hi, f64_to_f16(r));
            });
        }
        RCP_F16 => vf16(w, i, |[a]| 1.0 / a),
        SQRT_F16 => vf16(w, i, |[a]| a.sqrt()),
        RSQ_F16 => vf16(w, i, |[a]| 1.0 / a.sqrt()),
        EXP_F16 => vf16(w, i, |[a]| a.exp2()),
        LOG_F16 => vf16(w, i, |[a]| a.log2()),
        FLOOR_F16 => vf16(w, i, |[a]| a.floor()),
        CEIL_F16 => vf16(w, i, |[a]| a.ceil()),
        TRUNC_F16 => vf16(w, i, |[a]| a.trunc()),
        RNDNE_F16 => vf16(w, i, |[a]| a.round_ties_even()),
        // Integer
        // The clamp bit saturates integer sums and differences to their type's range (LLVM
        // selects `usub.sat` as `v_sub_nc_u32 … clamp`, e.g. an index clamped to 0).
        ADD_NC_U32 if i.clamp => vu32(w, i, |[a, b]| a.saturating_add(b)),
        SUB_NC_U32 if i.clamp => vu32(w, i, |[a, b]| a.saturating_sub(b)),
        SUBREV_NC_U32 if i.clamp => vu32(w, i, |[a, b]| b.saturating_sub(a)),
        ADD_NC_I32 if i.clamp => vu32(w, i, |[a, b]| (a as i32).saturating_add(b as i32) as u32),
        SUB_NC_I32 if i.clamp => vu32(w, i, |[a, b]| (a as i32).saturating_sub(b as i32) as u32),
        ADD_NC_U32 => vu32(w, i, |[a, b]| a.wrapping_add(b)),
        SUB_NC_U32 => vu32(w, i, |[a, b]| a.wrapping_sub(b)),
        SUBREV_NC_U32 => vu32(w, i, |[a, b]| b.wrapping_sub(a)),
        ADD_NC_I32 => vu32(w, i, |[a, b]| a.wrapping_add(b)),
        SUB_NC_I32 => vu32(w, i, |[a, b]| a.wrapping_sub(b)),
        MUL_LO_U32 => vu32(w, i, |[a, b]| a.wrapping_mul(b)),
        MUL_HI_U32 => vu32(w, i, |[a, b]| ((a as u64 * b as u64) >> 32) as u32),
        MUL_HI_I32 => vu32(w, i, |[a, b]| {
            ((a as i32 as i64 * b as i32 as i64) >> 32) as u32
        }),
        MUL_U32_U24 => vu32(w, i, |[a, b]| (a & 0xff_ffff).wrapping_mul(b & 0xff_ffff)),
        MUL_HI_U32_U24 => vu32(w, i, |[a, b]| {
            (((a & 0xff_ffff) as u64 * (b & 0xff_ffff) as u64) >> 32) as u32
        }),
        MUL_I32_I24 => vu32(w, i, |[a, b]| (sext24(a) as i64 * sext24(b) as i64) as u32),
        MUL_HI_I32_I24 => vu32(w, i, |[a, b]| {
            ((sext24(a) as i64 * sext24(b) as i64) >> 32) as u32
        }),
        MAD_U32_U24 => vu32(w, i, |[a, b, c]| {
            (a & 0xff_ffff).wrapping_mul(b & 0xff_ffff).wrapping_add(c)
        }),
        MAD_I32_I24 => vu32(w, i, |[a, b, c]| {
            ((sext24(a) as i64 * sext24(b) as i64) as u32).wrapping_add(c)
        }),
        AND_B32 => vu32(w, i, |[a, b]| a & b),
        OR_B32 => vu32(w, i, |[a, b]| a | b),
        XOR_B32 => vu32(w, i, |[a, b]| a ^ b),
        XNOR_B32 => vu32(w, i, |[a, b]| !(a ^ b)),
        NOT_B32 => vu32(w, i, |[a]| !a),
        BFREV_B32 => vu32(w, i, |[a]| a.reverse_bits()),
        CLZ_I32_U32 => vu32(
            w,
            i,
            |[a]| if a == 0 { u32::MAX } else { a.leading_zeros() },
        ),
        CTZ_I32_B32 => vu32(
            w,
            i,
            |[a]| if a == 0 { u32::MAX } else { a.trailing_zeros() },
        ),
        CLS_I32 => vu32(w, i, |[a]| {
            let v = a as i32;
            if v == 0 || v == -1 {
                u32::MAX
            } else {
                (if v < 0 { !a } else { a }).leading_zeros()
            }
        }),
        LSHLREV_B32 => vu32(w, i, |[a, b]| b << (a & 31)),
        LSHRREV_B32 => vu32(w, i, |[a, b]| b >> (a & 31)),
        ASHRREV_I32 => vu32(w, i, |[a, b]| ((b as i32) >> (a & 31)) as u32),
        MIN_I32 => vu32(w, i, |[a, b]| (a as i32).min(b as i32) as u32),
        MAX_I32 => vu32(w, i, |[a, b]| (a as i32).max(b as i32) as u32),
        MIN_U32 => vu32(w, i, |[a, b]| a.min(b)),
        MAX_U32 => vu32(w, i, |[a, b]| a.max(b)),
        MIN3_I32 => vu32(w, i, |[a, b, c]| {
            (a as i32).min(b as i32).min(c as i32) as u32
        }),
        MAX3_I32 => vu32(w, i, |[a, b, c]| {
            (a as i32).max(b as i32).max(c as i32) as u32
        }),
        MIN3_U32 => vu32(w, i, |[a, b, c]| a.min(b).min(c)),
        MAX3_U32 => vu32(w, i, |[a, b, c]| a.max(b).max(c)),
        MED3_I32 => vu32(w, i, |[a, b, c]| {
            let (a, b, c) = (a as i32, b as i32, c as i32);
            a.max(b).min(a.min(b).max(c)) as u32
        }),
        MED3_U32 => vu32(w, i, |[a, b, c]| a.max(b).min(a.min(b).max(c))),
        BFE_U32 => vu32(w, i, |[a, b, c]| {
            let (off, wd) = (b & 31, c & 31);
            if wd == 0 {
                0
            } else {
                (a >> off) & ((1u32 << wd) - 1)
            }
        }),
        BFE_I32 => vu32(w, i, |[a, b, c]| {
            let (off, wd) = (b & 31, c & 31);
            if wd == 0 {
                0
            } else {
                (((a >> off) << (32 - wd)) as i32 >> (32 - wd)) as u32
            }
        }),
        BFI_B32 => vu32(w, i, |[a, b, c]| (a & b) | (!a & c)),
        BFM_B32 => vu32(w, i, |[a, b]| (((1u64 << (a & 31)) - 1) as u32) << (b & 31)),
        LSHL_ADD_U32 => vu32(w, i, |[a, b, c]| (a << (b & 31)).wrapping_add(c)),
        ADD_LSHL_U32 => vu32(w, i, |[a, b, c]| a.wrapping_add(b) << (c & 31)),
        LSHL_OR_B32 => vu32(w, i, |[a, b, c]| (a << (b & 31)) | c),
        AND_OR_B32 => vu32(w, i, |[a, b, c]| (a & b) | c),
        OR3_B32 => vu32(w, i, |[a, b, c]| a | b | c),
        XOR3_B32 => vu32(w, i, |[a, b, c]| a ^ b ^ c),
        ADD3_U32 => vu32(w, i, |[a, b, c]| a.wrapping_add(b).wrapping_add(c)),
        XAD_U32 => vu32(w, i, |[a, b, c]| (a ^ b).wrapping_add(c)),
        ALIGNBIT_B32 => vu32(w, i, |[a, b, c]| {
            ((((a as u64) << 32) | b as u64) >> (c & 31)) as u32
        }),
        ALIGNBYTE_B32 => vu32(w, i, |[a, b, c]| {
            ((((a as u64) << 32) | b as u64) >> (8 * (c & 3))) as u32
        }),
        PERM_B32 => vu32(w, i, |[a, b, c]| perm(a, b, c)),
        BCNT_U32_B32 => vu32(w, i, |[a, b]| a.count_ones().wrapping_add(b)),
        MBCNT_LO_U32_B32 | MBCNT_HI_U32_B32 => {
            // Count of mask bits below this lane (in the low or high 32 lanes), plus src1.
            let hi = op == MBCNT_HI_U32_B32;
            vmix(w, i, [K::I32; 3], |w, v, l| {
                let m = v.u32(w, 0, l) as u64;
                let below = match (hi, l >= 32) {
                    (false, false) => (m & ((1u64 << l) - 1)).count_ones(),
                    (false, true) => m.count_ones(),
                    (true, false) => 0,
                    (true, true) => (m & ((1u64 << (l - 32)) - 1)).count_ones(),
                };
                w.wr(i.dst, l, v.u32(w, 1, l).wrapping_add(below));
            });
        }
        CVT_PK_U16_U32 => vu32(w, i, |[a, b]| (a.min(0xffff)) | (b.min(0xffff) << 16)),
        // 16-bit integer
        ADD_NC_U16 if i.clamp => vu16(w, i, |[a, b]| a.saturating_add(b)),
        ADD_NC_U16 => vu16(w, i, |[a, b]| a.wrapping_add(b)),
        DOT2ACC_F32_F16 | super::inst::VOPD_DOT2ACC_F32_BF16 => {
            // D += a.lo * b.lo + a.hi * b.hi, products and sum exact in f64, one rounding.
            let bf = op == super::inst::VOPD_DOT2ACC_F32_BF16;
            let dst = i.dst;
            vmix(w, i, [K::I32; 3], |w, v, l| {
                let cv = |h: u16| {
                    if bf {
                        bf16_to_f32(h) as f64
                    } else {
                        f16_to_f32(h) as f64
                    }
                };
                let (a, b) = (v.u32(w, 0, l), v.u32(w, 1, l));
                let d = f32::from_bits(w.v[(dst - VGPR0) as usize * 64 + l]) as f64;
                let p = cv(a as u16) * cv(b as u16) + cv((a >> 16) as u16) * cv((b >> 16) as u16);
                w.wr(dst, l, (add_round_odd(p, d) as f32).to_bits());
            });
        }
        PK_FMAC_F16 => {
            let dst = i.dst;
            vmix(w, i, [K::I32; 3], |w, v, l| {
                let (a, b) = (v.u32(w, 0, l), v.u32(w, 1, l));
                let d = w.v[(dst - VGPR0) as usize * 64 + l];
                let h = |x: u32, k: u32| f16_to_f32((x >> (16 * k)) as u16) as f64;
                let r = (0..2)
                    .map(|k| {
                        (f64_to_f16(add_round_odd(h(a, k) * h(b, k), h(d, k))) as u32) << (16 * k)
                    })
                    .sum();
                w.wr(dst, l, r);
            });
        }
        ADD_NC_I16 if i.clamp => vu16(w, i, |[a, b]| (a as i16).saturating_add(b as i16) as u16),
        SUB_NC_I16 if i.clamp => vu16(w, i, |[a, b]| (a as i16).saturating_sub(b as i16) as u16),
        ADD_NC_I16 => vu16(w, i, |[a, b]| a.wrapping_add(b)),
        SUB_NC_I16 => vu16(w, i, |[a, b]| a.wrapping_sub(b)),
        MAX_U16 => vu16(w, i, |[a, b]| a.max(b)),
        MIN_U16 => vu16(w, i, |[a, b]| a.min(b)),
        MAX_I16 => vu16(w, i, |[a, b]| (a as i16).max(b as i16) as u16),
        MIN_I16 => vu16(w, i, |[a, b]| (a as i16).min(b as i16) as u16),
        AND_B16 => vu16(w, i, |[a, b]| a & b),
        OR_B16 => vu16(w, i, |[a, b]| a | b),
        XOR_B16 => vu16(w, i, |[a, b]| a ^ b),
        NOT_B16 => vu16(w, i, |[a]| !a),
        MAD_U16 => vu16(w, i, |[a, b, c]| a.wrapping_mul(b).wrapping_add(c)),
        MAD_I16 => vu16(w, i, |[a, b, c]| a.wrapping_mul(b).wrapping_add(c)),
        MIN3_U16 => vu16(w, i, |[a, b, c]| a.min(b).min(c)),
        MAX3_U16 => vu16(w, i, |[a, b, c]| a.max(b).max(c)),
        MED3_U16 => vu16(w, i, |[a, b, c]| a.max(b).min(a.min(b).max(c))),
        MIN3_I16 => vu16(w, i, |[a, b, c]| {
            (a as i16).min(b as i16).min(c as i16) as u16
        }),
        MAX3_I16 => vu16(w, i, |[a, b, c]| {
            (a as i16).max(b as i16).max(c as i16) as u16
        }),
        MED3_I16 => vu16(w, i, |[a, b, c]| {
            let (a, b, c) = (a as i16, b as i16, c as i16);
            a.max(b).min(a.min(b).max(c)) as u16
        }),
        MIN3_F16 => vf16(w, i, |[a, b, c]| {
            fmin(fmin(a as f32, b as f32), c as f32) as f64
        }),
        MAX3_F16 => vf16(w, i, |[a, b, c]| {
            fmax(fmax(a as f32, b as f32), c as f32) as f64
        }),
        MED3_F16 => vf16(w, i, |[a, b, c]| fmed3(a as f32, b as f32, c as f32) as f64),
        MINMAX_F16 => vf16(w, i, |[a, b, c]| {
            fmax(fmin(a as f32, b as f32), c as f32) as f64
        }),
        MAXMIN_F16 => vf16(w, i, |[a, b, c]| {
            fmin(fmax(a as f32, b as f32), c as f32) as f64
        }),
        LDEXP_F16 => vmix(w, i, [K::F16, K::I16, K::I32], |w, v, l| {
            let x = v.f16(w, 0, l) as f64 * pow2((v.u16(w, 1, l) as i16 as i32).clamp(-100, 100));
            w.wr16v(i, l, i.opsel & 8 != 0, f64_to_f16(x));
        }),
        FRACT_F16 => vf16(w, i, |[a]| {
            if a.is_infinite() {
                f64::NAN
            } else {
                (a - a.floor()).min(1.0 - f64::powi(2.0, -11))
            }
        }),
        SIN_F16 => vf16(w, i, |[a]| (a * std::f64::consts::TAU).sin()),
        COS_F16 => vf16(w, i, |[a]| (a * std::f64::consts::TAU).cos()),
        CVT_F16_U16 => vu16(w, i, |[a]| f32_to_f16(a as f32)),
        CVT_F16_I16 => vu16(w, i, |[a]| f32_to_f16(a as i16 as f32)),
        CVT_U16_F16 => vu16(w, i, |[a]| {
            let x = f16_to_f32(a);
            if x.is_nan() { 0 } else { x as u16 }
        }),
        CVT_I16_F16 => vu16(w, i, |[a]| {
            let x = f16_to_f32(a);
            if x.is_nan() { 0 } else { x as i16 as u16 }
        }),
        CVT_I32_I16 => vmix(w, i, [K::I16; 3], |w, v, l| {
            let r = v.u16(w, 0, l) as i16 as i32 as u32;
            w.wr(i.dst, l, r);
        }),
        CVT_U32_U16 => vmix(w, i, [K::I16; 3], |w, v, l| {
            let r = v.u16(w, 0, l) as u32;
            w.wr(i.dst, l, r);
        }),
        CNDMASK_B16 => {
            let m = w.mask(i.src[2]);
            let hi = i.opsel & 8 != 0;
            vmix(w, i, [K::F16, K::F16, K::I32], |w, v, l| {
                let r = v.u16(w, (m >> l & 1) as usize, l);
                w.wr16v(i, l, hi, r);
            });
        }
        CVT_NEAREST_I32_F32 => vmix(w, i, [K::F32; 3], |w, v, l| {
            let r = cvt_i32((v.f32(w, 0, l) + 0.5).floor());
            w.wr(i.dst, l, r);
        }),
        CVT_FLOOR_I32_F32 => vmix(w, i, [K::F32; 3], |w, v, l| {
            let r = cvt_i32(v.f32(w, 0, l).floor());
            w.wr(i.dst, l, r);
        }),
        MINMAX_I32 => vu32(w, i, |[a, b, c]| {
            (a as i32).min(b as i32).max(c as i32) as u32
        }),
        MAXMIN_I32 => vu32(w, i, |[a, b, c]| {
            (a as i32).max(b as i32).min(c as i32) as u32
        }),
        MINMAX_U32 => vu32(w, i, |[a, b, c]| a.min(b).max(c)),
        MAXMIN_U32 => vu32(w, i, |[a, b, c]| a.max(b).min(c)),
        SAD_U32 => vu32(w, i, |[a, b, c]| a.abs_diff(b).wrapping_add(c)),
        SAD_U16 => vu32(w, i, |[a, b, c]| {
            (0..2)
                .map(|k| ((a >> (16 * k)) as u16).abs_diff((b >> (16 * k)) as u16) as u32)
                .sum::<u32>()
                .wrapping_add(c)
        }),
        SAD_U8 => vu32(w, i, |[a, b, c]| {
            (0..4)
                .map(|k| ((a >> (8 * k)) as u8).abs_diff((b >> (8 * k)) as u8) as u32)
                .sum::<u32>()
                .wrapping_add(c)
        }),
        MAD_U32_U16 => vmix(w, i, [K::I16, K::I16, K::I32], |w, v, l| {
            let r = (v.u16(w, 0, l) as u32 * v.u16(w, 1, l) as u32).wrapping_add(v.u32(w, 2, l));
            w.wr(i.dst, l, r);
        }),
        MAD_I32_I16 => vmix(w, i, [K::I16, K::I16, K::I32], |w, v, l| {
            let r = (v.u16(w, 0, l) as i16 as i32 * v.u16(w, 1, l) as i16 as i32) as u32;
            w.wr(i.dst, l, r.wrapping_add(v.u32(w, 2, l)));
        }),
        CVT_PK_I16_I32 => vu32(w, i, |[a, b]| {
            let sat = |x: u32| (x as i32).clamp(i16::MIN as i32, i16::MAX as i32) as u16 as u32;
            sat(a) | sat(b) << 16
        }),
        CVT_PK_U16_F32 | CVT_PK_I16_F32 | CVT_PK_NORM_I16_F32 | CVT_PK_NORM_U16_F32 => {
            vmix(w, i, [K::F32; 3], |w, v, l| {
                let cv = |x: f32| -> u32 {
                    if x.is_nan() {
                        return 0;
                    }
                    (match op {
                        CVT_PK_U16_F32 => x as u16,
                        CVT_PK_I16_F32 => x as i16 as u16,
                        CVT_PK_NORM_I16_F32 => {
                            (x.clamp(-1.0, 1.0) * 32767.0).round_ties_even() as i16 as u16
                        }
                        _ => (x.clamp(0.0, 1.0) * 65535.0).round_ties_even() as u16,
                    }) as u32
                };
                let r = cv(v.f32(w, 0, l)) | cv(v.f32(w, 1, l)) << 16;
                w.wr(i.dst, l, r);
            })
        }
        SWAP_B32 => {
            // Exchanges two VGPRs in every active lane.
            let (a, b) = (i.dst, i.src[0]);
            let exec = w.exec();
            for_lanes(exec, |l| {
                let (x, y) = (
                    w.rd(Src::V((a - VGPR0) as usize * 64), l),
                    w.rd(w.src(b, 0, Ty::B32), l),
                );
                w.wr(a, l, y);
                w.wr(b, l, x);
            });
        }
        PERMLANE64_B32 => {
            // Swaps the halves of a wave64; a wave32 has one half and keeps its values.
            if w.lanes == 64 {
                let s = w.src(i.src[0], i.literal, Ty::B32);
                let mut tmp = [0u32; 64];
                for (l, t) in tmp.iter_mut().enumerate() {
                    *t = w.rd(s, l ^ 32);
                }
                let exec = w.exec();
                for_lanes(exec, |l| w.wr(i.dst, l, tmp[l]));
            } else {
                let s = w.src(i.src[0], i.literal, Ty::B32);
                let exec = w.exec();
                for_lanes(exec, |l| {
                    let v = w.rd(s, l);
                    w.wr(i.dst, l, v);
                });
            }
        }
        PERMLANE16_B32 | PERMLANEX16_B32 => {
            // Within each row of 16 lanes, lane k reads the lane named by nibble k of the
            // 64-bit selector {src2, src1}: of its own row (permlane16) or of the other row of
            // its 32-lane half (permlanex16). op_sel[0] = fetch inactive, op_sel[1] = bound_ctrl.
            let sel =
                w.sread(i.src[1], i.literal) as u64 | (w.sread(i.src[2], i.literal) as u64) << 32;
            let s = w.src(i.src[0], i.literal, Ty::B32);
            let exec = w.exec();
            let fi = i.opsel & 1 != 0;
            let bc = i.opsel & 2 != 0;
            let mut tmp = [0u32; 64];
            let mut keep = 0u64;
            for (l, t) in tmp.iter_mut().enumerate().take(w.lanes as usize) {
                let row = l / 16;
                let src_row = if op == PERMLANEX16_B32 { row ^ 1 } else { row };
                let from = src_row * 16 + ((sel >> (4 * (l % 16))) & 0xf) as usize;
                if exec >> from & 1 != 0 || fi {
                    *t = w.rd(s, from);
                } else if bc {
                    *t = 0;
                } else {
                    keep |= 1 << l;
                }
            }
            for_lanes(exec & !keep, |l| w.wr(i.dst, l, tmp[l]));
        }
        SUB_NC_U16 if i.clamp => vu16(w, i, |[a, b]| a.saturating_sub(b)),
        SUB_NC_U16 => vu16(w, i, |[a, b]| a.wrapping_sub(b)),
        MUL_LO_U16 => vu16(w, i, |[a, b]| a.wrapping_mul(b)),
        LSHLREV_B16 => vu16(w, i, |[a, b]| b << (a & 15)),
        LSHRREV_B16 => vu16(w, i, |[a, b]| b >> (a & 15)),
        ASHRREV_I16 => vu16(w, i, |[a, b]| ((b as i16) >> (a & 15)) as u16),
        // 64-bit
        LSHLREV_B64 => vu64(w, i, [K::I32, K::I64, K::I32], |[a, b]| b << (a & 63)),
        LSHRREV_B64 => vu64(w, i, [K::I32, K::I64, K::I32], |[a, b]| b >> (a & 63)),
        ASHRREV_I64 => vu64(w, i, [K::I32, K::I64, K::I32], |[a, b]| {
            ((b as i64) >> (a & 63)) as u64
        }),
        ADD_F64 => vf64(w, i, |[a, b]| a + b),
        MUL_F64 => vf64(w, i, |[a, b]| a * b),
        FMA_F64 => vf64(w, i, |[a, b, c]| a.mul_add(b, c)),
        MIN_F64 => vf64(w, i, |[a, b]| {
            if a.is_nan() {
                b
            } else if b.is_nan() {
                a
            } else {
                a.min(b)
            }
        }),
        MAX_F64 => vf64(w, i, |[a, b]| {
            if a.is_nan() {
                b
            } else if b.is_nan() {
                a
            } else {
                a.max(b)
            }
        }),
        RCP_F64 => vf64(w, i, |[a]| 1.0 / a),
        SQRT_F64 => vf64(w, i, |[a]| a.sqrt()),
        RSQ_F64 => vf64(w, i, |[a]| 1.0 / a.sqrt()),
        FLOOR_F64 => vf64(w, i, |[a]| a.floor()),
        CVT_F64_F32 => vmix(w, i, [K::F32; 3], |w, v, l| {
            let r = v.f32(w, 0, l) as f64;
            w.wr64(i.dst, l, r.to_bits());
        }),
        CVT_F32_F64 => vmix(w, i, [K::F64; 3], |w, v, l| {
            let r = v.f64(w, 0, l) as f32;
            w.wr(i.dst, l, r.to_bits());
        }),
        CVT_F64_I32 => vmix(w, i, [K::I32; 3], |w, v, l| {
            let r = v.u32(w, 0, l) as i32 as f64;
            w.wr64(i.dst, l, r.to_bits());
        }),
        CVT_F64_U32 => vmix(w, i, [K::I32; 3], |w, v, l| {
            let r = v.u32(w, 0, l) as f64;
            w.wr64(i.dst, l, r.to_bits());
        }),
        CVT_I32_F64 => vmix(w, i, [K::F64; 3], |w, v, l| {
            let x = v.f64(w, 0, l);
            w.wr(i.dst, l, if x.is_nan() { 0 } else { x as i32 as u32 });
        }),
        CVT_U32_F64 => vmix(w, i, [K::F64; 3], |w, v, l| {
            let x = v.f64(w, 0, l);
            w.wr(i.dst, l, if x.is_nan() { 0 } else { x as u32 });
        }),
        // Carry chains (VOP3SD or VOP2 with VCC).
        ADD_CO_U32 | SUB_CO_U32 | SUBREV_CO_U32 => {
            let carry = vcarry(w, i, [K::I32; 3], false, |[a, b]| {
                let (a, b) = (a as u32, b as u32);
                let (r, c) = match op {
                    ADD_CO_U32 => a.overflowing_add(b),
                    SUB_CO_U32 => a.overflowing_sub(b),
                    _ => b.overflowing_sub(a),
                };
                // Clamped, a carry out saturates the result (the carry is still written).
                let r = match (i.clamp && c, op) {
                    (true, ADD_CO_U32) => u32::MAX,
                    (true, _) => 0,
                    (false, _) => r,
                };
                (r as u64, c)
            });
            let sdst = if i.enc == Encoding::Vop2 {
                VCC_LO
            } else {
                i.sdst
            };
            w.set_mask(sdst, carry);
        }
        ADD_CO_CI_U32 | SUB_CO_CI_U32 | SUBREV_CO_CI_U32 => {
            let (cin_code, sdst) = if i.enc == Encoding::Vop2 {
                (VCC_LO, VCC_LO)
            } else {
                (i.src[2], i.sdst)
            };
            let cin = w.mask(cin_code);
            // The carry-in comes from a lane mask, not a register: take it by lane index.
            let mut j = *i;
            j.src[2] = NULL;
            let lane_row: [u64; 64] = std::array::from_fn(|l| cin >> l & 1);
            let carry = vcarry_lanes(w, &j, &lane_row, |a, b, ci| match op {
                ADD_CO_CI_U32 => {
                    let s = a + b + ci;
                    (s as u32, s >> 32 != 0)
                }
                SUB_CO_CI_U32 => (a.wrapping_sub(b).wrapping_sub(ci) as u32, b + ci > a),
                _ => (b.wrapping_sub(a).wrapping_sub(ci) as u32, a + ci > b),
            });
            w.set_mask(sdst, carry);
        }
        MAD_U64_U32 | MAD_I64_I32 => {
            let signed = op == MAD_I64_I32;
            let carry = vcarry(w, i, [K::I32, K::I32, K::I64], true, |[a, b, c]| {
                if signed {
                    let (r, o) =
                        (a as u32 as i32 as i64 * b as u32 as i32 as i64).overflowing_add(c as i64);
                    (r as u64, o)
                } else {
                    (a * b).overflowing_add(c)
                }
            });
            w.set_mask(i.sdst, carry);
        }
        // Lane access.
        READFIRSTLANE_B32 => {
            let e = w.exec();
            let lane = if e == 0 {
                0
            } else {
                e.trailing_zeros() as usize
            };
            let s = w.src(i.src[0], i.literal, Ty::B32);
            let v = w.rd(s, lane);
            w.sset(i.dst, v);
        }
        READLANE_B32 => {
            let lane = (w.sread(i.src[1], i.literal) % w.lanes) as usize;
            let s = w.src(i.src[0], i.literal, Ty::B32);
            let v = w.rd(s, lane);
            w.sset(i.dst, v);
        }
        WRITELANE_B32 => {
            let lane = (w.sread(i.src[1], i.literal) % w.lanes) as usize;
            let v = w.sread(i.src[0], i.literal);
            w.wr(i.dst, lane, v);
        }
        _ => return Err(unimplemented(ctx, idx, i)),
    }
    Ok(())
}

fn sext24(a: u32) -> i32 {
    ((a << 8) as i32) >> 8
}

/// `v_perm_b32`: byte select from {src0, src1} by the bytes of src2.
fn perm(a: u32, b: u32, c: u32) -> u32 {
    let bytes = ((a as u64) << 32) | b as u64;
    let mut r = 0u32;
    for k in 0..4 {
        let sel = (c >> (8 * k)) & 0xff;
        let byte = match sel {
            0..=7 => ((bytes >> (8 * sel)) & 0xff) as u32,
            8..=11 => {
                // Sign of a 16-bit half, replicated.
                let bit = [15, 31, 47, 63][(sel - 8) as usize];
                if bytes >> bit & 1 != 0 { 0xff } else { 0 }
            }
            12 => 0,
            _ => 0xff,
        };
        r |= byte << (8 * k);
    }
    r
}

/// The mask of a 32-bit compare over a full wave, as straight loops the compiler can
/// vectorise (float sources get their abs/neg masks, integers are signed when `c.ty` < 6).
#[cfg_attr(not(test), multiversion::multiversion(targets("x86_64+avx2+fma")))]
pub(crate) fn dense_compare(w: &Wave, v: &Valu, kind: K, c: CmpInfo) -> u64 {
    compare_rows(w, v, kind, c)
}

/// The body of [`dense_compare`], inlined into it and into the run loop's compare form (a call
/// per compare was 6–7 % of a gfx942 `fmath` profile).
#[inline(always)]
pub(crate) fn compare_rows(w: &Wave, v: &Valu, kind: K, c: CmpInfo) -> u64 {
    if w.lanes == 64 {
        compare_lanes::<64>(w, v, kind, c)
    } else {
        compare_lanes::<32>(w, v, kind, c)
    }
}

/// A lane mask from per-lane bits given as bytes of 0 or 1, eight lanes per multiply: in an
/// 8-byte group, the product adds byte j's bit into bit 56 + j.
#[inline(always)]
pub(crate) fn pack_bits<const L: usize>(t: &[u8; L]) -> u64 {
    let mut r = 0u64;
    for (k, ch) in t.chunks_exact(8).enumerate() {
        let x = u64::from_le_bytes([ch[0], ch[1], ch[2], ch[3], ch[4], ch[5], ch[6], ch[7]]);
        r |= (x.wrapping_mul(0x0102_0408_1020_4080) >> 56) << (8 * k);
    }
    r
}

/// [`compare_rows`] for a wave of `L` lanes: each lane's result as a byte (a vector compare
/// and packs), then eight bytes at a time gathered into eight mask bits by one multiply.
#[allow(
    clippy::neg_cmp_op_on_partial_ord,
    clippy::nonminimal_bool,
    clippy::double_comparisons
)]
#[inline(always)]
fn compare_lanes<const L: usize>(w: &Wave, v: &Valu, kind: K, c: CmpInfo) -> u64 {
    let a = row::<L>(&w.v, v.r[0]);
    let b = row::<L>(&w.v, v.r[1]);
    let (m0, m1) = (v.m[0], v.m[1]);
    #[inline(always)]
    fn mask<T: Copy, const L: usize>(
        a: &[u32; L],
        b: &[u32; L],
        conv_a: impl Fn(u32) -> T,
        conv_b: impl Fn(u32) -> T,
        p: impl Fn(T, T) -> bool,
    ) -> u64 {
        let mut t = [0u8; L];
        for (t, (&x, &y)) in t.iter_mut().zip(a.iter().zip(b)) {
            *t = p(conv_a(x), conv_b(y)) as u8;
        }
        pack_bits(&t)
    }
    if kind == K::F32 {
        let fa = |x: u32| f32::from_bits((x & m0.0 as u32) ^ m0.1 as u32);
        let fb = |x: u32| f32::from_bits((x & m1.0 as u32) ^ m1.1 as u32);
        return match c.cond {
            0 => 0,
            1 => mask(a, b, fa, fb, |x, y| x < y),
            2 => mask(a, b, fa, fb, |x, y| x == y),
            3 => mask(a, b, fa, fb, |x, y| x <= y),
            4 => mask(a, b, fa, fb, |x, y| x > y),
            5 => mask(a, b, fa, fb, |x, y| x < y || x > y),
            6 => mask(a, b, fa, fb, |x, y| x >= y),
            7 => mask(a, b, fa, fb, |x, y| !x.is_nan() && !y.is_nan()),
            8 => mask(a, b, fa, fb, |x, y| x.is_nan() || y.is_nan()),
            9 => mask(a, b, fa, fb, |x, y| !(x >= y)),
            10 => mask(a, b, fa, fb, |x, y| !(x < y || x > y)),
            11 => mask(a, b, fa, fb, |x, y| !(x > y)),
            12 => mask(a, b, fa, fb, |x, y| !(x <= y)),
            13 => mask(a, b, fa, fb, |x, y| x != y),
            14 => mask(a, b, fa, fb, |x, y| !(x < y)),
            _ => full_mask(w.lanes),
        };
    }
    let signed = c.ty < 6;
    let id = |x: u32| x;
    macro_rules! int {
        ($p:expr) => {
            if signed {
                mask(a, b, |x| x as i32, |x| x as i32, $p)
            } else {
                mask(a, b, id, id, $p)
            }
        };
    }
    match c.cond {
        0 => 0,
        1 => int!(|x, y| x < y),
        2 => int!(|x, y| x == y),
        3 => int!(|x, y| x <= y),
        4 => int!(|x, y| x > y),
        6 => int!(|x, y| x >= y),
        5 | 16 => int!(|x, y| x != y),
        15 => full_mask(w.lanes),
        _ => 0,
    }
}

/// Condition and type of a VOPC opcode, from its mnemonic (computed once per opcode).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CmpInfo {
    pub cond: u8,
    pub ty: u8,
    pub x: bool,
    pub class: bool,
}

pub(crate) fn cmp_info(op: u16) -> Option<CmpInfo> {
    static TABLE: std::sync::OnceLock<Vec<Option<CmpInfo>>> = std::sync::OnceLock::new();
    let t = TABLE.get_or_init(|| {
        (0..256u16)
            .map(|op| {
                let n = super::names::name(Encoding::Vopc, op)?;
                let (x, rest) = match n.strip_prefix("v_cmpx_") {
                    Some(r) => (true, r),
                    None => (false, n.strip_prefix("v_cmp_")?),
                };
                let (cond, ty) = rest.rsplit_once('_')?;
                let ty = [
                    "f16", "f32", "f64", "i16", "i32", "i64", "u16", "u32", "u64",
                ]
                .iter()
                .position(|t| *t == ty)? as u8;
                let class = cond == "class";
                let cond = [
                    "f", "lt", "eq", "le", "gt", "lg", "ge", "o", "u", "nge", "nlg", "ngt", "nle",
                    "neq", "nlt", "t", "ne", "class",
                ]
                .iter()
                .position(|c| *c == cond)? as u8;
                Some(CmpInfo { cond, ty, x, class })
            })
            .collect()
    });
    t.get(op as usize).copied().flatten()
}

// The negated and doubled float comparisons are the point: `nge` is true for unordered
// operands and `lg` (a < b || a > b) is false for them, unlike `a != b`.
#[allow(
    clippy::neg_cmp_op_on_partial_ord,
    clippy::nonminimal_bool,
    clippy::double_comparisons
)]
pub(crate) fn vopc(w: &mut Wave, i: &Inst, idx: usize, ctx: &Ctx<'_>) -> Result<(), Error> {
    let Some(c) = cmp_info(i.op) else {
        return Err(unimplemented(ctx, idx, i));
    };
    let kind = match c.ty {
        0 => K::F16,
        1 => K::F32,
        2 => K::F64,
        3 | 6 => K::I16,
        4 | 7 => K::I32,
        _ => K::I64,
    };
    let kinds = if c.class {
        [kind, K::I32, K::I32]
    } else {
        [kind; 3]
    };
    // Every comparison has two sources.
    let v = prep_n(w, i, kinds, 2);
    let mut res = 0u64;
    if v.exec == full_mask(w.lanes) && !c.class && matches!(kind, K::F32 | K::I32) {
        res = dense_compare(w, &v, kind, c);
        return finish_compare(w, cmp_dst(i), c, res);
    }
    for_lanes(v.exec, |l| {
        let r = if c.class {
            let x = match kind {
                K::F16 => v.f16(w, 0, l) as f64,
                K::F32 => v.f32(w, 0, l) as f64,
                _ => v.f64(w, 0, l),
            };
            let is_snan = match kind {
                K::F16 => {
                    let b = v.u16(w, 0, l);
                    b & 0x7c00 == 0x7c00 && b & 0x3ff != 0 && b & 0x200 == 0
                }
                K::F32 => {
                    let b = v.f32(w, 0, l).to_bits();
                    b & 0x7f80_0000 == 0x7f80_0000 && b & 0x7f_ffff != 0 && b & 0x40_0000 == 0
                }
                _ => {
                    let b = v.f64(w, 0, l).to_bits();
                    x.is_nan() && b & (1 << 51) == 0
                }
            };
            let sub = match kind {
                K::F16 => f16_sub(x as f32),
                K::F32 => (x as f32).is_subnormal(),
                _ => x.is_subnormal(),
            };
            let neg = x.is_sign_negative();
            let bit = if x.is_nan() {
                if is_snan { 0 } else { 1 }
            } else if x.is_infinite() {
                if neg { 2 } else { 9 }
            } else if x == 0.0 {
                if neg { 5 } else { 6 }
            } else if sub {
                if neg { 4 } else { 7 }
            } else if neg {
                3
            } else {
                8
            };
            v.u32(w, 1, l) >> bit & 1 != 0
        } else {
            match kind {
                K::F16 | K::F32 | K::F64 => {
                    let (a, b) = match kind {
                        K::F16 => (v.f16(w, 0, l) as f64, v.f16(w, 1, l) as f64),
                        K::F32 => (v.f32(w, 0, l) as f64, v.f32(w, 1, l) as f64),
                        _ => (v.f64(w, 0, l), v.f64(w, 1, l)),
                    };
                    let un = a.is_nan() || b.is_nan();
                    match c.cond {
                        0 => false,
                        1 => a < b,
                        2 => a == b,
                        3 => a <= b,
                        4 => a > b,
                        5 => a < b || a > b,
                        6 => a >= b,
                        7 => !un,
                        8 => un,
                        9 => !(a >= b),
                        10 => !(a < b || a > b),
                        11 => !(a > b),
                        12 => !(a <= b),
                        13 => a != b,
                        14 => !(a < b),
                        _ => true,
                    }
                }
                _ => {
                    let signed = c.ty < 6;
                    let (a, b): (i128, i128) = match (kind, signed) {
                        (K::I16, true) => {
                            (v.u16(w, 0, l) as i16 as i128, v.u16(w, 1, l) as i16 as i128)
                        }
                        (K::I16, false) => (v.u16(w, 0, l) as i128, v.u16(w, 1, l) as i128),
                        (K::I32, true) => {
                            (v.u32(w, 0, l) as i32 as i128, v.u32(w, 1, l) as i32 as i128)
                        }
                        (K::I32, false) => (v.u32(w, 0, l) as i128, v.u32(w, 1, l) as i128),
                        (_, true) => (v.u64(w, 0, l) as i64 as i128, v.u64(w, 1, l) as i64 as i128),
                        _ => (v.u64(w, 0, l) as i128, v.u64(w, 1, l) as i128),
                    };
                    match c.cond {
                        0 => false,
                        1 => a < b,
                        2 => a == b,
                        3 => a <= b,
                        4 => a > b,
                        6 => a >= b,
                        16 | 5 => a != b,
                        15 => true,
                        _ => false,
                    }
                }
            }
        };
        res |= (r as u64) << l;
    });
    finish_compare(w, cmp_dst(i), c, res)
}

/// The mask a compare writes (besides EXEC for `v_cmpx`): VCC in the 32-bit encoding, else its
/// scalar destination.
pub(crate) fn cmp_dst(i: &Inst) -> u16 {
    if i.enc == Encoding::Vopc {
        VCC_LO
    } else {
        i.dst
    }
}

/// Writes a compare result: EXEC for v_cmpx (and on CDNA its destination `dst` too, see
/// [`cmp_dst`]), else the destination mask.
pub(crate) fn finish_compare(w: &mut Wave, dst: u16, c: CmpInfo, res: u64) -> Result<(), Error> {
    if c.x {
        w.set_exec(res);
    }
    // GFX9 (CDNA) v_cmpx also writes its destination.
    if !c.x || w.isa.is_cdna() {
        w.set_mask(dst, res);
    }
    Ok(())
}

fn vopd(w: &mut Wave, i: &Inst, idx: usize, ctx: &Ctx<'_>) -> Result<(), Error> {
    // Both halves read their sources before either writes (the encoding guarantees distinct
    // destinations and register banks, so running X then Y only differs when Y reads X's
    // destination, which VOPD forbids).
    let mut x = *i;
    x.enc = Encoding::Vop2;
    x.len = 1;
    let mut y = *i;
    y.enc = Encoding::Vop2;
    y.op = i.y.op;
    y.dst = i.y.dst;
    y.src = [i.y.src[0], i.y.src[1], NULL];
    if i.op == valu::FMAMK_F32 || i.op == valu::FMAAK_F32 {
        x.literal = i.literal;
    }
    let fix = |h: &mut Inst| {
        if h.op == valu::MOV_B32 {
            h.enc = Encoding::Vop1;
        }
    };
    fix(&mut x);
    fix(&mut y);
    // Y must not see X's result: stage X's destination value if Y reads it.
    let xd = (x.dst - VGPR0) as usize * 64;
    let reads_xd = y.src[..2].contains(&x.dst);
    if reads_xd {
        let lanes = w.lanes as usize;
        let (a, b) = w.v.split_at_mut(DPP_ROW * 64);
        b[..lanes].copy_from_slice(&a[xd..xd + lanes]);
    }
    valu_op(w, &x, x.op, idx, ctx)?;
    if reads_xd {
        for s in y.src.iter_mut().take(2) {
            if *s == x.dst {
                *s = VGPR0 + DPP_ROW as u16;
            }
        }
    }
    valu_op(w, &y, y.op, idx, ctx)
}

fn vop3p_op(w: &mut Wave, i: &Inst, idx: usize, ctx: &Ctx<'_>) -> Result<(), Error> {
    if let Some(form) = wmma_form(i.op) {
        return crate::interp::wmma::run(w, i, form, false).map_err(|_| unimplemented(ctx, idx, i));
    }
    let exec = w.exec();
    let mut s = [Src::K(0); 3];
    for (k, s) in s.iter_mut().enumerate() {
        let ty = if mnemonic(i).contains("_mix") {
            Ty::B32
        } else {
            Ty::B16
        };
        let code = i.src[k];
        if code == LITERAL && ty == Ty::B16 {
            // A literal is 32 bits, one half per operand half (LLVM emits 0x00ecd4ad for
            // the pair 0xd4ad, 0x00ec); an SGPR likewise (read whole below).
            *s = Src::K(u64::from(i.literal));
            continue;
        }
        *s = w.src(code, i.literal, ty);
        if let (Src::K(c), Ty::B16) = (*s, ty)
            && (128..VGPR0).contains(&code)
        {
            // An inline constant applies to both halves.
            *s = Src::K(c & 0xffff | (c & 0xffff) << 16);
        }
    }
    let half = |w: &Wave, k: usize, l: usize, hi_lane: bool| -> u16 {
        let raw = w.rd(s[k], l);
        let sel = if hi_lane {
            i.opsel_hi >> k & 1
        } else {
            i.opsel >> k & 1
        };
        let h = (raw >> (16 * sel as u32)) as u16;
        let neg = if hi_lane {
            i.abs >> k & 1
        } else {
            i.neg >> k & 1
        };
        h ^ ((neg as u16) << 15)
    };
    use vop3p::*;
    let f16op = |a: f64, b: f64, c: f64| -> Option<f64> {
        Some(match i.op {
            PK_FMA_F16 => add_round_odd(a * b, c),
            PK_ADD_F16 => a + b,
            PK_MUL_F16 => a * b,
            PK_MIN_F16 => fmin(a as f32, b as f32) as f64,
            PK_MAX_F16 => fmax(a as f32, b as f32) as f64,
            _ => return None,
        })
    };
    // The clamp bit saturates a float result to [0, 1] (NaN to 0, as `omod32`), and an
    // integer sum or difference to its type's range (LLVM selects `saddsat`/`uaddsat` on
    // v2i16 as `v_pk_add_i16`/`v_pk_add_u16 … clamp`). What it does to the products of
    // `v_pk_mul_lo_u16` and `v_pk_mad_*16` no source here settles: refused below.
    let clamp01 = |x: f64| if i.clamp { unit(x) } else { x };
    let i16op = |a: u16, b: u16, c: u16| -> Option<u16> {
        Some(match i.op {
            PK_MUL_LO_U16 | PK_MAD_U16 | PK_MAD_I16 if i.clamp => return None,
            // Clamped, sums and differences saturate to the type's range.
            PK_ADD_U16 if i.clamp => a.saturating_add(b),
            PK_SUB_U16 if i.clamp => a.saturating_sub(b),
            PK_ADD_I16 if i.clamp => (a as i16).saturating_add(b as i16) as u16,
            PK_SUB_I16 if i.clamp => (a as i16).saturating_sub(b as i16) as u16,
            PK_ADD_U16 | PK_ADD_I16 => a.wrapping_add(b),
            PK_SUB_U16 | PK_SUB_I16 => a.wrapping_sub(b),
            PK_MUL_LO_U16 => a.wrapping_mul(b),
            PK_MAD_U16 | PK_MAD_I16 => a.wrapping_mul(b).wrapping_add(c),
            PK_LSHLREV_B16 => b << (a & 15),
            PK_LSHRREV_B16 => b >> (a & 15),
            PK_ASHRREV_I16 => ((b as i16) >> (a & 15)) as u16,
            PK_MAX_I16 => (a as i16).max(b as i16) as u16,
            PK_MIN_I16 => (a as i16).min(b as i16) as u16,
            PK_MAX_U16 => a.max(b),
            PK_MIN_U16 => a.min(b),
            _ => return None,
        })
    };
    match i.op {
        PK_FMA_F16 | PK_ADD_F16 | PK_MUL_F16 | PK_MIN_F16 | PK_MAX_F16 => {
            let mut out = Ok(());
            for_lanes(exec, |l| {
                let mut r = 0u32;
                for hl in [false, true] {
                    let a = f16_to_f32(half(w, 0, l, hl)) as f64;
                    let b = f16_to_f32(half(w, 1, l, hl)) as f64;
                    let c = f16_to_f32(half(w, 2, l, hl)) as f64;
                    match f16op(a, b, c) {
                        Some(x) => r |= (f64_to_f16(clamp01(x)) as u32) << (16 * hl as u32),
                        None => out = Err(()),
                    }
                }
                w.wr(i.dst, l, r);
            });
            out.map_err(|_| unimplemented(ctx, idx, i))
        }
        FMA_MIX_F32 | FMA_MIXLO_F16 | FMA_MIXHI_F16 => {
            // Each source is f32, or f16 from the half op_sel picks when op_sel_hi is set;
            // neg_lo/neg_hi are neg/abs.
            for_lanes(exec, |l| {
                let arg = |k: usize| -> f64 {
                    let raw = w.rd(s[k], l);
                    let mut x = if i.opsel_hi >> k & 1 != 0 {
                        f16_to_f32((raw >> (16 * (i.opsel >> k & 1) as u32)) as u16) as f64
                    } else {
                        f32::from_bits(raw) as f64
                    };
                    if i.abs >> k & 1 != 0 {
                        x = x.abs();
                    }
                    if i.neg >> k & 1 != 0 {
                        x = -x;
                    }
                    x
                };
                let r = fma32(arg(0) as f32, arg(1) as f32, arg(2) as f32) as f64;
                let r = clamp01(r);
                match i.op {
                    FMA_MIX_F32 => w.wr(i.dst, l, (r as f32).to_bits()),
                    FMA_MIXLO_F16 => w.wr16(i.dst, l, false, f64_to_f16(r)),
                    _ => w.wr16(i.dst, l, true, f64_to_f16(r)),
                }
            });
            Ok(())
        }
        DOT2_F32_F16 | DOT2_F32_BF16 => {
            let bf = i.op == DOT2_F32_BF16;
            for_lanes(exec, |l| {
                let cv = |h: u16| {
                    if bf {
                        bf16_to_f32(h) as f64
                    } else {
                        f16_to_f32(h) as f64
                    }
                };
                let mut acc = f32::from_bits(w.rd(s[2], l)) as f64;
                for hl in [false, true] {
                    acc += cv(half(w, 0, l, hl)) * cv(half(w, 1, l, hl));
                }
                w.wr(i.dst, l, (clamp01(acc as f32 as f64) as f32).to_bits());
            });
            Ok(())
        }
        _ => {
            if i16op(0, 0, 0).is_none() {
                return Err(unimplemented(ctx, idx, i));
            }
            for_lanes(exec, |l| {
                let mut r = 0u32;
                for hl in [false, true] {
                    let x =
                        i16op(half(w, 0, l, hl), half(w, 1, l, hl), half(w, 2, l, hl)).unwrap_or(0);
                    r |= (x as u32) << (16 * hl as u32);
                }
                w.wr(i.dst, l, r);
            });
            Ok(())
        }
    }
}

/// The shape of a gfx11 `v_wmma_*` opcode.
fn wmma_form(op: u16) -> Option<crate::interp::wmma::Form> {
    use crate::interp::wmma::{Elem::*, Form};
    use vop3p::*;
    let f = |a, d| Some(Form { a, b: a, d, k: 16 });
    match op {
        WMMA_F32_16X16X16_F16 => f(F16, F32),
        WMMA_F32_16X16X16_BF16 => f(Bf16, F32),
        WMMA_F16_16X16X16_F16 => f(F16, F16),
        WMMA_BF16_16X16X16_BF16 => f(Bf16, Bf16),
        WMMA_I32_16X16X16_IU8 => f(Iu8, I32),
        WMMA_I32_16X16X16_IU4 => f(Iu4, I32),
        _ => None,
    }
}

// ---------------------------------------------------------------------------------------
// LDS

fn lds_fault(addr: u64, write: bool, size: usize) -> Fault {
    Fault {
        addr,
        write,
        reason: format!("outside the workgroup's {size} bytes of LDS"),
    }
}

fn lds_read(lds: &[u8], addr: u32, buf: &mut [u8]) -> Result<(), Fault> {
    let a = addr as usize;
    match lds.get(a..a + buf.len()) {
        Some(s) => {
            buf.copy_from_slice(s);
            Ok(())
        }
        None => Err(lds_fault(addr as u64, false, lds.len())),
    }
}

fn lds_write(lds: &mut [u8], addr: u32, data: &[u8]) -> Result<(), Fault> {
    let a = addr as usize;
    let n = lds.len();
    match lds.get_mut(a..a + data.len()) {
        Some(s) => {
            s.copy_from_slice(data);
            Ok(())
        }
        None => Err(lds_fault(addr as u64, true, n)),
    }
}

/// Dword LDS loads or stores of the lanes in `r.exec` at the addresses `r.addrs`, every
/// access known to be inside the LDS: lane `l` accesses `words` dwords at
/// `r.addrs[l] + offs[h]` for each of `halves` addresses.
/// Loads go to rows `dst + h * words + k` of `v`; stores take their data from row bases
/// `data[h] + 64 * k`. Stores run lane by lane (lane, then address, then dword), the order of
/// the lane-by-lane path, so lanes that store to the same place leave the same value.
///
/// Each row of 16 lanes that `r` found to be a row-major tile (all active, consecutive
/// dwords) or a broadcast (all active, one address) moves as one 64-byte slice or one value;
/// other rows go lane by lane. A row's stores as a slice keep the lane order's result because
/// its lanes write different dwords (one-dword stores whose two addresses' 64-byte ranges do
/// not overlap) and rows run in lane order.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn lds_dwords(
    v: &mut [u32],
    lanes: usize,
    lds: &mut [u8],
    r: &fast::LdsRows,
    offs: [usize; 2],
    halves: usize,
    words: usize,
    load: bool,
    dst: usize,
    data: [usize; 2],
) {
    if load {
        if lanes == 64 {
            lds_loads::<64>(v, lds, r, offs, halves, words, dst);
        } else {
            lds_loads::<32>(v, lds, r, offs, halves, words, dst);
        }
        return;
    }
    let (addrs, exec, seq) = (&r.addrs, r.exec, r.seq);
    let apart = halves == 1 || offs[0].abs_diff(offs[1]) >= 64;
    for g in 0..lanes / 16 {
        if words == 1 && apart && seq[g] {
            for (&off, &row) in offs.iter().zip(&data).take(halves) {
                let at = addrs[16 * g] as usize + off;
                let src = &v[row + 16 * g..row + 16 * g + 16];
                if let Some(b) = lds.get_mut(at..).and_then(|b| b.first_chunk_mut::<64>()) {
                    for (c, v) in b.as_chunks_mut::<4>().0.iter_mut().zip(src) {
                        *c = v.to_le_bytes();
                    }
                }
            }
            continue;
        }
        for_lanes(exec >> (16 * g) & 0xffff, |l| {
            let l = 16 * g + l;
            let a = addrs[l] as usize;
            for (&off, &row) in offs.iter().zip(&data).take(halves) {
                for k in 0..words {
                    let at = a + off + 4 * k;
                    let v = v[row + 64 * k + l];
                    if let Some(b) = lds.get_mut(at..at + 4) {
                        b.copy_from_slice(&v.to_le_bytes());
                    }
                }
            }
        });
    }
}

/// [`lds_dwords`]' loads over the `L` lanes of a wave: row `dst + h * words + k` gets, in each
/// row of 16 lanes, one 64-byte slice (a tile row), one value (a broadcast) or the active
/// lanes one by one. The rows are fixed-size arrays (the lane count a constant), so the
/// loops have no bounds checks on lanes (over a run-time lane count, gfx942 `matmul`, whose
/// loop is mostly `ds_read2_b32`, took 208 host instructions a wave-instruction; this way,
/// 189).
#[inline(always)]
fn lds_loads<const L: usize>(
    v: &mut [u32],
    lds: &[u8],
    r: &fast::LdsRows,
    offs: [usize; 2],
    halves: usize,
    words: usize,
    dst: usize,
) {
    let get = |at: usize| -> u32 {
        lds.get(at..at + 4)
            .map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    for (h, &off) in offs.iter().enumerate().take(halves) {
        for k in 0..words {
            let o = off + 4 * k;
            let row = (dst + h * words + k) * 64;
            let Some(out) = v.get_mut(row..).and_then(|s| s.first_chunk_mut::<L>()) else {
                continue;
            };
            let (rows, _) = out.as_chunks_mut::<16>();
            let (firsts, _) = r.addrs.as_chunks::<16>();
            for (g, (out, a)) in rows.iter_mut().zip(firsts).enumerate() {
                let at = a[0] as usize + o;
                if r.seq[g]
                    && let Some(b) = lds.get(at..).and_then(|b| b.first_chunk::<64>())
                {
                    // Through a local array (straight into the row, the compiler moved the
                    // dwords one by one).
                    let mut t = [0u32; 16];
                    for (x, c) in t.iter_mut().zip(b.as_chunks::<4>().0) {
                        *x = u32::from_le_bytes(*c);
                    }
                    *out = t;
                } else if r.same[g] {
                    *out = [get(at); 16];
                } else {
                    for_lanes(r.exec >> (16 * g) & 0xffff, |l| {
                        if let (Some(x), Some(&a)) = (out.get_mut(l), a.get(l)) {
                            *x = get(a as usize + o);
                        }
                    });
                }
            }
        }
    }
}

/// A dword LDS load or store in its hot form (`fast.rs`): straight row copies, inlined
/// into the run loop with the common shapes' dword counts as constants. The address row's
/// classification comes from the wave's [`fast::LdsRows`] slot of the address register when
/// the slot holds the row as it is now (same lanes, same EXEC), else it is made and kept
/// there. Returns false, having done nothing to the registers or the LDS, when some active
/// lane's access leaves the LDS; the general path ([`ds_op`], lane by lane, the forms'
/// reference) then runs it and reports the lane.
#[inline(always)]
pub(crate) fn ds_form(w: &mut Wave, lds: &mut [u8], d: &fast::Ds, load: bool) -> bool {
    let (exec, lanes) = (w.exec(), w.lanes);
    let Wave { v, lds_rows, .. } = w;
    let cur = row::<64>(v, d.addr as usize);
    let r = &mut lds_rows[d.addr as usize / 64 % fast::LDS_ROW_SLOTS];
    if !r.holds(cur, exec, lanes) {
        *r = fast::LdsRows::new(cur, exec, lanes);
    }
    let far = d.offs[0].max(d.offs[1]) as usize + 4 * d.words as usize;
    if exec != 0 && r.max as usize + far > lds.len() {
        return false;
    }
    let r = &*r;
    let offs = [d.offs[0] as usize, d.offs[1] as usize];
    let (dst, data) = (d.dst as usize, [d.data[0] as usize, d.data[1] as usize]);
    let n = lanes as usize;
    match (d.halves, d.words) {
        (1, 1) => lds_dwords(v, n, lds, r, offs, 1, 1, load, dst, data),
        (2, 1) => lds_dwords(v, n, lds, r, offs, 2, 1, load, dst, data),
        (1, 4) => lds_dwords(v, n, lds, r, offs, 1, 4, load, dst, data),
        (h, k) => lds_dwords(v, n, lds, r, offs, h as usize, k as usize, load, dst, data),
    }
    true
}

/// DS (LDS) instructions, lane by lane: every instruction without a hot form, and a dword
/// load or store whose form ([`ds_form`]) found a lane outside the LDS (this path names
/// it). The forms' equivalence tests take this path as their reference.
fn ds_op(w: &mut Wave, i: &Inst, idx: usize, ctx: &mut Ctx<'_>) -> Result<(), Error> {
    if i.flags & flag::GDS != 0 {
        return Err(unimplemented(ctx, idx, i));
    }
    let exec = w.exec();
    let off = i.imm as u32 | (i.imm2 as u32) << 8;
    let addr_row = (i.src[0] - VGPR0) as usize * 64;
    let d0 = (i.src[1] - VGPR0) as usize * 64;
    let d1 = (i.src[2] - VGPR0) as usize * 64;
    let mut err: Option<(u32, Fault)> = None;
    let lds = &mut *ctx.lds;
    let op = i.op;
    // Plain loads and stores.
    let (load, store, n): (bool, bool, usize) = match op {
        ds::LOAD_B32 => (true, false, 4),
        ds::LOAD_B64 => (true, false, 8),
        ds::LOAD_B96 => (true, false, 12),
        ds::LOAD_B128 => (true, false, 16),
        ds::STORE_B32 => (false, true, 4),
        ds::STORE_B64 => (false, true, 8),
        ds::STORE_B96 => (false, true, 12),
        ds::STORE_B128 => (false, true, 16),
        _ => (false, false, 0),
    };
    // "ds_add_rtn_u32" -> ("add", "u32", true), parsed once per instruction.
    let ds_atomic = mnemonic(i).strip_prefix("ds_").and_then(|rest| {
        let (op, ty) = rest.rsplit_once('_')?;
        let rtn = op.ends_with("_rtn");
        Some((op.trim_end_matches("_rtn"), ty, rtn))
    });
    let two = |stride: u32, size: usize| -> (u32, u32) {
        (
            i.imm as u32 * stride * size as u32,
            i.imm2 as u32 * stride * size as u32,
        )
    };
    for_lanes(exec, |l| {
        if err.is_some() {
            return;
        }
        let a = w.v[addr_row + l].wrapping_add(off);
        let r: Result<(), Fault> = (|| {
            if load {
                let mut b = [0u8; 16];
                lds_read(lds, a, &mut b[..n])?;
                for k in 0..n / 4 {
                    let v =
                        u32::from_le_bytes([b[4 * k], b[4 * k + 1], b[4 * k + 2], b[4 * k + 3]]);
                    w.wr(i.dst + k as u16, l, v);
                }
                return Ok(());
            }
            if store {
                let mut b = [0u8; 16];
                for k in 0..n / 4 {
                    let v = w.v.get(d0 + 64 * k + l).copied().unwrap_or(0);
                    b[4 * k..4 * k + 4].copy_from_slice(&v.to_le_bytes());
                }
                return lds_write(lds, a, &b[..n]);
            }
            let base = w.v[addr_row + l];
            match op {
                ds::LOAD_2ADDR_B32
                | ds::LOAD_2ADDR_STRIDE64_B32
                | ds::LOAD_2ADDR_B64
                | ds::LOAD_2ADDR_STRIDE64_B64 => {
                    let size = if matches!(op, ds::LOAD_2ADDR_B64 | ds::LOAD_2ADDR_STRIDE64_B64) {
                        8
                    } else {
                        4
                    };
                    let stride = if matches!(
                        op,
                        ds::LOAD_2ADDR_STRIDE64_B32 | ds::LOAD_2ADDR_STRIDE64_B64
                    ) {
                        64
                    } else {
                        1
                    };
                    let (o0, o1) = two(stride, size);
                    let mut b = [0u8; 16];
                    lds_read(lds, base.wrapping_add(o0), &mut b[..size])?;
                    lds_read(lds, base.wrapping_add(o1), &mut b[size..2 * size])?;
                    for k in 0..2 * size / 4 {
                        let v = u32::from_le_bytes([
                            b[4 * k],
                            b[4 * k + 1],
                            b[4 * k + 2],
                            b[4 * k + 3],
                        ]);
                        w.wr(i.dst + k as u16, l, v);
                    }
                }
                ds::STORE_2ADDR_B32
                | ds::STORE_2ADDR_STRIDE64_B32
                | ds::STORE_2ADDR_B64
                | ds::STORE_2ADDR_STRIDE64_B64 => {
                    let size = if matches!(op, ds::STORE_2ADDR_B64 | ds::STORE_2ADDR_STRIDE64_B64) {
                        8
                    } else {
                        4
                    };
                    let stride = if matches!(
                        op,
                        ds::STORE_2ADDR_STRIDE64_B32 | ds::STORE_2ADDR_STRIDE64_B64
                    ) {
                        64
                    } else {
                        1
                    };
                    let (o0, o1) = two(stride, size);
                    let get = |row: usize| -> [u8; 8] {
                        let lo = w.v[row + l];
                        let hi = w.v.get(row + 64 + l).copied().unwrap_or(0);
                        ((lo as u64) | (hi as u64) << 32).to_le_bytes()
                    };
                    lds_write(lds, base.wrapping_add(o0), &get(d0)[..size])?;
                    lds_write(lds, base.wrapping_add(o1), &get(d1)[..size])?;
                }
                ds::LOAD_U8 | ds::LOAD_I8 | ds::LOAD_U16 | ds::LOAD_I16 => {
                    let mut b = [0u8; 2];
                    let n = if matches!(op, ds::LOAD_U8 | ds::LOAD_I8) {
                        1
                    } else {
                        2
                    };
                    lds_read(lds, a, &mut b[..n])?;
                    let v = match op {
                        ds::LOAD_U8 => b[0] as u32,
                        ds::LOAD_I8 => b[0] as i8 as i32 as u32,
                        ds::LOAD_U16 => u16::from_le_bytes(b) as u32,
                        _ => i16::from_le_bytes(b) as i32 as u32,
                    };
                    w.wr(i.dst, l, v);
                }
                ds::LOAD_U8_D16
                | ds::LOAD_U8_D16_HI
                | ds::LOAD_I8_D16
                | ds::LOAD_I8_D16_HI
                | ds::LOAD_U16_D16
                | ds::LOAD_U16_D16_HI => {
                    // 16-bit results into one half of the destination, the other half kept.
                    let mut b = [0u8; 2];
                    let byte = matches!(
                        op,
                        ds::LOAD_U8_D16 | ds::LOAD_U8_D16_HI | ds::LOAD_I8_D16 | ds::LOAD_I8_D16_HI
                    );
                    lds_read(lds, a, &mut b[..if byte { 1 } else { 2 }])?;
                    let v = match op {
                        ds::LOAD_U8_D16 | ds::LOAD_U8_D16_HI => b[0] as u16,
                        ds::LOAD_I8_D16 | ds::LOAD_I8_D16_HI => b[0] as i8 as i16 as u16,
                        _ => u16::from_le_bytes(b),
                    };
                    let hi = matches!(
                        op,
                        ds::LOAD_U8_D16_HI | ds::LOAD_I8_D16_HI | ds::LOAD_U16_D16_HI
                    );
                    w.wr16(i.dst, l, hi, v);
                }
                ds::STORE_B8 => lds_write(lds, a, &w.v[d0 + l].to_le_bytes()[..1])?,
                ds::STORE_B16 => lds_write(lds, a, &w.v[d0 + l].to_le_bytes()[..2])?,
                ds::STORE_B16_D16_HI => lds_write(lds, a, &w.v[d0 + l].to_le_bytes()[2..4])?,
                ds::STORE_B8_D16_HI => lds_write(lds, a, &w.v[d0 + l].to_le_bytes()[2..3])?,
                ds::PERMUTE_B32 | ds::BPERMUTE_B32 => {
                    // Handled after the lane loop (they read other lanes' data).
                }
                _ => {
                    // Atomics, 32 and 64 bits, with and without return.
                    let Some((op, ty, rtn)) = ds_atomic else {
                        return Err(Fault {
                            addr: a as u64,
                            write: false,
                            reason: "unimplemented".into(),
                        });
                    };
                    let wide = ty.ends_with("64");
                    let n = if wide { 8 } else { 4 };
                    let mut b = [0u8; 8];
                    lds_read(lds, a, &mut b[..n])?;
                    let old = u64::from_le_bytes(b);
                    let get = |row: usize| -> u64 {
                        let lo = w.v.get(row + l).copied().unwrap_or(0) as u64;
                        let hi = if wide {
                            w.v.get(row + 64 + l).copied().unwrap_or(0) as u64
                        } else {
                            0
                        };
                        lo | hi << 32
                    };
                    let (x, y) = (get(d0), get(d1));
                    let Some(new) = atomic_op(op, ty, old, x, y) else {
                        return Err(Fault {
                            addr: a as u64,
                            write: false,
                            reason: "unimplemented".into(),
                        });
                    };
                    lds_write(lds, a, &new.to_le_bytes()[..n])?;
                    if rtn {
                        w.wr(i.dst, l, old as u32);
                        if wide {
                            w.wr(i.dst + 1, l, (old >> 32) as u32);
                        }
                    }
                }
            }
            Ok(())
        })();
        if let Err(f) = r {
            err = Some((l as u32, f));
        }
    });
    if err.is_none() && matches!(op, ds::PERMUTE_B32 | ds::BPERMUTE_B32) {
        // Lane shuffles through the LDS crossbar: the address (plus offset) / 4 selects a
        // lane; bpermute pulls from it, permute pushes to it. Inactive lanes read 0.
        let lanes = w.lanes as usize;
        let mut out = [0u32; 64];
        let mut written = 0u64;
        for_lanes(exec, |l| {
            let sel = (w.v[addr_row + l].wrapping_add(off) / 4) as usize % lanes;
            if op == ds::BPERMUTE_B32 {
                out[l] = if exec >> sel & 1 != 0 {
                    w.v[d0 + sel]
                } else {
                    0
                };
                written |= 1 << l;
            } else {
                out[sel] = w.v[d0 + l];
                written |= 1 << sel;
            }
        });
        for_lanes(exec, |l| {
            w.wr(i.dst, l, if written >> l & 1 != 0 { out[l] } else { 0 });
        });
    }
    match err {
        Some((_, f)) if f.reason == "unimplemented" => Err(unimplemented(ctx, idx, i)),
        Some((l, f)) => Err(fault(ctx, idx, i, l, f)),
        None => Ok(()),
    }
}

/// Read-modify-write of an atomic `op` on type `ty` ("u32", "i64", "f32", "b64", …):
/// `x` is the data operand, `y` the compare value of cmpswap/cmpstore.
pub(crate) fn atomic_op(op: &str, ty: &str, old: u64, x: u64, y: u64) -> Option<u64> {
    let wide = ty.ends_with("64");
    let mask = if wide { u64::MAX } else { 0xffff_ffff };
    let (old, x, y) = (old & mask, x & mask, y & mask);
    let s = |v: u64| {
        if wide {
            v as i64
        } else {
            v as u32 as i32 as i64
        }
    };
    let f32op = |f: fn(f32, f32) -> f32| {
        f(f32::from_bits(old as u32), f32::from_bits(x as u32)).to_bits() as u64
    };
    let f64op = |f: fn(f64, f64) -> f64| f(f64::from_bits(old), f64::from_bits(x)).to_bits();
    let r = match (op, ty.as_bytes().first()) {
        ("add", Some(b'f')) if wide => f64op(|a, b| a + b),
        ("add", Some(b'f')) => f32op(|a, b| a + b),
        ("min", Some(b'f')) if wide => f64op(|a, b| {
            if a.is_nan() {
                b
            } else if b.is_nan() {
                a
            } else {
                a.min(b)
            }
        }),
        ("max", Some(b'f')) if wide => f64op(|a, b| {
            if a.is_nan() {
                b
            } else if b.is_nan() {
                a
            } else {
                a.max(b)
            }
        }),
        ("min", Some(b'f')) => f32op(fmin),
        ("max", Some(b'f')) => f32op(fmax),
        ("add", _) => old.wrapping_add(x),
        ("sub", _) => old.wrapping_sub(x),
        ("rsub", _) => x.wrapping_sub(old),
        ("min", Some(b'i')) => {
            if s(old) < s(x) {
                old
            } else {
                x
            }
        }
        ("max", Some(b'i')) => {
            if s(old) > s(x) {
                old
            } else {
                x
            }
        }
        ("min", _) => old.min(x),
        ("max", _) => old.max(x),
        ("and", _) => old & x,
        ("or", _) => old | x,
        ("xor", _) => old ^ x,
        ("swap", _) | ("storexchg", _) => x,
        ("cmpswap", _) | ("cmpstore", _) => {
            if old == y {
                x
            } else {
                old
            }
        }
        ("inc", _) => {
            if old >= x {
                0
            } else {
                old + 1
            }
        }
        ("dec", _) => {
            if old == 0 || old > x {
                x
            } else {
                old - 1
            }
        }
        ("mskor", _) => (old & !x) | y,
        ("csub", _) => old.saturating_sub(x),
        _ => return None,
    };
    Some(r & mask)
}

// ---------------------------------------------------------------------------------------
// FLAT / GLOBAL / SCRATCH

/// Size and direction of a FLAT-numbered memory opcode: `Some(true)` loads, `Some(false)`
/// stores, `None` is an atomic (or nothing known).
fn mem_kind(op: u16) -> (usize, Option<bool>) {
    match op {
        flat::LOAD_U8
        | flat::LOAD_I8
        | flat::LOAD_D16_U8
        | flat::LOAD_D16_I8
        | flat::LOAD_D16_HI_U8
        | flat::LOAD_D16_HI_I8 => (1, Some(true)),
        flat::LOAD_U16 | flat::LOAD_I16 | flat::LOAD_D16_B16 | flat::LOAD_D16_HI_B16 => {
            (2, Some(true))
        }
        flat::LOAD_B32 => (4, Some(true)),
        flat::LOAD_B64 => (8, Some(true)),
        flat::LOAD_B96 => (12, Some(true)),
        flat::LOAD_B128 => (16, Some(true)),
        flat::STORE_B8 | flat::STORE_D16_HI_B8 => (1, Some(false)),
        flat::STORE_B16 | flat::STORE_D16_HI_B16 => (2, Some(false)),
        flat::STORE_B32 => (4, Some(false)),
        flat::STORE_B64 => (8, Some(false)),
        flat::STORE_B96 => (12, Some(false)),
        flat::STORE_B128 => (16, Some(false)),
        _ => (0, None),
    }
}

fn flat_op(w: &mut Wave, i: &Inst, idx: usize, ctx: &mut Ctx<'_>) -> Result<(), Error> {
    let exec = w.exec();
    let (n, load) = mem_kind(i.op);
    let vaddr = (i.src[0] - VGPR0) as usize * 64;
    let data = (i.src[1] - VGPR0) as usize * 64;
    let scratch = i.enc == Encoding::Scratch;
    let sbase = if i.saddr == NULL {
        0
    } else if scratch {
        w.sread(i.saddr, 0) as u64
    } else {
        w.sread64(i.saddr, 0, Ty::I64)
    };
    // Every lane's address (inactive lanes' too, unused), one straight loop per form.
    let mut addrs = [0u64; 64];
    let imm = i.imm as i64 as u64;
    let lanes = w.lanes as usize;
    let lo = &w.v[vaddr..vaddr + lanes];
    // Whether the lanes' addresses follow each other by the access size (lane `l` at the
    // first lane's plus `l * n`), when the form shows it more cheaply than the addresses.
    let mut consecutive = None;
    match i.enc {
        Encoding::Global if i.saddr != NULL => {
            for (a, &v) in addrs.iter_mut().zip(lo) {
                *a = sbase.wrapping_add(v as u64).wrapping_add(imm);
            }
            // The addresses differ as the 32-bit offsets do: lane `l` is `l * n` on exactly
            // when its offset is the first lane's plus `l * n`, which the 32-bit differences
            // say once the last lane's offset cannot pass 2^32 (then no difference wraps).
            // Four offsets a vector operation instead of two addresses.
            let (first, mut off) = (lo.first().copied().unwrap_or(0), 0u32);
            for (l, &v) in lo.iter().enumerate() {
                off |= v.wrapping_sub(first) ^ (l * n) as u32;
            }
            let last = u64::from(first) + (lanes.saturating_sub(1) * n) as u64;
            consecutive = Some(off == 0 && last <= u64::from(u32::MAX));
        }
        Encoding::Scratch => {
            let sve = i.flags & flag::SVE != 0;
            for (a, &v) in addrs.iter_mut().zip(lo) {
                let v = if sve { v as u64 } else { 0 };
                *a = (sbase.wrapping_add(v) & 0xffff_ffff).wrapping_add(imm);
            }
        }
        _ => {
            let hi =
                w.v.get(vaddr + 64..vaddr + 64 + lanes)
                    .unwrap_or(&ZERO_ROW[..lanes]);
            for ((a, &v), &h) in addrs.iter_mut().zip(lo).zip(hi) {
                *a = (v as u64 | (h as u64) << 32).wrapping_add(imm);
            }
        }
    }
    // Plain loads and stores of global memory go through the coalescer; generic addresses in
    // the LDS or private aperture, scratch and atomics go lane by lane.
    let global = !scratch
        && (i.enc != Encoding::Flat || {
            let mut all = true;
            for_lanes(exec, |l| {
                all &= matches!(aperture(i.enc, addrs[l], false), Aperture::Global)
            });
            all
        });
    if global && load.is_some() {
        let load = load == Some(true);
        return coalesced(w, i, idx, ctx, exec, &addrs, consecutive, n, load, data);
    }
    let atomic = if load.is_none() {
        match ctx.prog.atom(idx) {
            Some(k) => Some(k),
            None => return Err(unimplemented(ctx, idx, i)),
        }
    } else {
        None
    };
    if let (true, Some(atom)) = (global, atomic) {
        return global_atomics(w, i, idx, ctx, atom, exec, &addrs, data);
    }
    let mut err: Option<(u32, Fault)> = None;
    let private = w.private_size;
    for_lanes(exec, |l| {
        if err.is_some() {
            return;
        }
        let r = match atomic {
            Some(k) => flat_atomic(w, i, k, l, addrs[l], data, ctx),
            None => lane_access(w, i, i.op, l, addrs[l], data, ctx, private),
        };
        if let Err(f) = r {
            err = Some((l as u32, f));
        }
    });
    match err {
        Some((_, f)) if f.reason == "unimplemented" => Err(unimplemented(ctx, idx, i)),
        Some((l, f)) => Err(fault(ctx, idx, i, l, f)),
        None => Ok(()),
    }
}

/// Global loads or stores of the active lanes as the hardware coalesces them: runs of lanes
/// whose addresses follow each other by the access size are one memory access each (a
/// whole-wave copy is one). A faulting run is retried lane by lane, so the error names the
/// first faulting lane and the lanes before it have done their access, as without
/// coalescing.
#[allow(clippy::too_many_arguments)]
fn coalesced(
    w: &mut Wave,
    i: &Inst,
    idx: usize,
    ctx: &mut Ctx<'_>,
    exec: u64,
    addrs: &[u64; 64],
    consecutive: Option<bool>,
    n: usize,
    load: bool,
    data: usize,
) -> Result<(), Error> {
    let lanes = w.lanes as usize;
    // A whole wave at consecutive addresses (the common case) is one run, found by a straight
    // loop instead of the lane-by-lane scan (or told by the caller, `consecutive`).
    // (Differences from the expected addresses OR-ed together: 64-bit subtractions and ORs
    // vectorise on baseline x86-64, where 64-bit compares do not.)
    let whole = exec == full_mask(w.lanes)
        && consecutive.unwrap_or_else(|| {
            let mut off = 0u64;
            for (l, &a) in addrs[..lanes].iter().enumerate() {
                off |= a.wrapping_sub(addrs[0]) ^ (l * n) as u64;
            }
            off == 0
        });
    // Lanes at scattered addresses (a broadcast, a column): one gather when the memory has
    // one. Loads change no memory, so reading every lane before writing any register
    // leaves what the run-by-run path leaves.
    if load
        && !whole
        && ctx
            .mem
            .read_lanes(&addrs[..lanes], exec, n, &mut ctx.buf[..lanes * n])
    {
        for (l, b) in ctx.buf[..lanes * n].chunks_exact(n).enumerate() {
            if exec >> l & 1 != 0 {
                write_loaded(w, i.op, i.dst, l, b);
            }
        }
        return Ok(());
    }
    // The address of the last one-lane load, while its bytes are still in `ctx.buf`: lanes
    // that load the same address again (a clamped index, a broadcast) get those bytes, as
    // the hardware serves them from one memory access, instead of a read each.
    let mut single: Option<u64> = None;
    let mut l = 0usize;
    while l < lanes {
        if exec >> l & 1 == 0 {
            l += 1;
            continue;
        }
        let start = l;
        let a0 = addrs[l];
        l += 1;
        if whole {
            l = lanes;
        }
        while l < lanes
            && exec >> l & 1 != 0
            && addrs[l] == a0.wrapping_add(((l - start) * n) as u64)
        {
            l += 1;
        }
        let len = (l - start) * n;
        // Whole dwords move between memory and register rows directly.
        let dwords = matches!(
            i.op,
            flat::LOAD_B32
                | flat::LOAD_B64
                | flat::LOAD_B96
                | flat::LOAD_B128
                | flat::STORE_B32
                | flat::STORE_B64
                | flat::STORE_B96
                | flat::STORE_B128
        );
        let dst = (i.dst.wrapping_sub(VGPR0)) as usize;
        let rows = dwords
            && if load {
                dst + n / 4 <= DPP_ROW
            } else {
                data + 64 * (n / 4) <= DPP_ROW * 64
            };
        // A memory that holds the run in one piece: the bytes move between it and the
        // register rows directly (no staging copy).
        if rows && let Some(m) = ctx.mem.contiguous(a0, len) {
            if load {
                dwords_to_rows(&mut w.v, dst, start, l, n, m);
            } else {
                rows_to_dwords(&w.v, data, start, l, n, m);
            }
            continue;
        }
        if load && len == n && single == Some(a0) {
            if rows {
                dwords_to_rows(&mut w.v, dst, start, l, n, &ctx.buf[..n]);
            } else {
                write_loaded(w, i.op, i.dst, start, &ctx.buf[..n]);
            }
            continue;
        }
        single = None;
        let r = if load {
            let r = ctx.mem.read(a0, &mut ctx.buf[..len]);
            if r.is_ok() && len == n {
                single = Some(a0);
            }
            if r.is_ok() {
                if rows {
                    dwords_to_rows(&mut w.v, dst, start, l, n, &ctx.buf[..len]);
                } else {
                    for (k, b) in ctx.buf[..len].chunks_exact(n).enumerate() {
                        write_loaded(w, i.op, i.dst, start + k, b);
                    }
                }
            }
            r
        } else {
            if rows {
                rows_to_dwords(&w.v, data, start, l, n, &mut ctx.buf[..len]);
            } else {
                for k in 0..l - start {
                    let mut b = [0u8; 16];
                    store_bytes(w, i.op, data, start + k, &mut b);
                    ctx.buf[k * n..(k + 1) * n].copy_from_slice(&b[..n]);
                }
            }
            ctx.mem.write(a0, &ctx.buf[..len])
        };
        if r.is_err() {
            // Lane by lane, to find (and report) the first lane that faults.
            let private = w.private_size;
            for (lane, &a) in addrs.iter().enumerate().take(l).skip(start) {
                if let Err(f) = lane_access(w, i, i.op, lane, a, data, ctx, private) {
                    return Err(fault(ctx, idx, i, lane as u32, f));
                }
            }
        }
    }
    Ok(())
}

/// Lanes `start..end` of the `n / 4` dword rows from `dst` (a row index) loaded from `b`,
/// `n` bytes per lane (4, 8, 12 or 16).
#[inline(always)]
pub(crate) fn dwords_to_rows(
    v: &mut [u32],
    dst: usize,
    start: usize,
    end: usize,
    n: usize,
    b: &[u8],
) {
    match n {
        4 => bytes_to_rows::<1>(v, dst, start, end, b),
        _ => wide_bytes_to_rows(v, dst, start, end, n, b),
    }
}

/// [`dwords_to_rows`] of 2 to 4 dwords per lane, out of line: compiled on their own (and for
/// AVX2 too) their lane loops vectorise as interleaved accesses, which they did not inlined
/// into the run loop (there they were over a quarter of a gfx942 `copy` wave's host
/// instructions, and moving them out took 12 % off the whole).
#[cfg_attr(not(test), multiversion::multiversion(targets("x86_64+avx2+fma")))]
fn wide_bytes_to_rows(v: &mut [u32], dst: usize, start: usize, end: usize, n: usize, b: &[u8]) {
    let done = start == 0
        && match (end, n) {
            (64, 8) => wave_bytes_to_rows::<64, 2, 128, 128>(v, dst, b),
            (64, 12) => wave_bytes_to_rows::<64, 3, 192, 192>(v, dst, b),
            (64, 16) => wave_bytes_to_rows::<64, 4, 256, 256>(v, dst, b),
            (32, 8) => wave_bytes_to_rows::<32, 2, 96, 64>(v, dst, b),
            (32, 12) => wave_bytes_to_rows::<32, 3, 160, 96>(v, dst, b),
            (32, 16) => wave_bytes_to_rows::<32, 4, 224, 128>(v, dst, b),
            _ => false,
        };
    if !done {
        match n {
            8 => bytes_to_rows::<2>(v, dst, start, end, b),
            12 => bytes_to_rows::<3>(v, dst, start, end, b),
            _ => bytes_to_rows::<4>(v, dst, start, end, b),
        }
    }
}

/// [`bytes_to_rows`] of a whole wave of `L` lanes and `W` rows: the rows span `R` =
/// 64 × (`W` − 1) + `L` dwords from row `dst`'s start, the bytes `B` = `L` × `W` dwords.
/// Every index is inside arrays of known sizes, so the loop has no bounds checks and
/// vectorises as one interleaved access. False, having done nothing, when the rows or bytes
/// are too few.
#[inline(always)]
fn wave_bytes_to_rows<const L: usize, const W: usize, const R: usize, const B: usize>(
    v: &mut [u32],
    dst: usize,
    b: &[u8],
) -> bool {
    let (words, _) = b.as_chunks::<4>();
    let rows: Option<&mut [u32; R]> = v
        .get_mut(dst * 64..dst * 64 + R)
        .and_then(|r| r.try_into().ok());
    let words: Option<&[[u8; 4]; B]> = words.get(..B).and_then(|w| w.try_into().ok());
    let (Some(rows), Some(words)) = (rows, words) else {
        return false;
    };
    for l in 0..L {
        for k in 0..W {
            rows[k * 64 + l] = u32::from_le_bytes(words[l * W + k]);
        }
    }
    true
}

/// [`rows_to_bytes`] of a whole wave from row base `data`, as [`wave_bytes_to_rows`] reads
/// them.
#[inline(always)]
fn wave_rows_to_bytes<const L: usize, const W: usize, const R: usize, const B: usize>(
    v: &[u32],
    data: usize,
    b: &mut [u8],
) -> bool {
    let (words, _) = b.as_chunks_mut::<4>();
    let rows: Option<&[u32; R]> = v.get(data..data + R).and_then(|r| r.try_into().ok());
    let words: Option<&mut [[u8; 4]; B]> = words.get_mut(..B).and_then(|w| w.try_into().ok());
    let (Some(rows), Some(words)) = (rows, words) else {
        return false;
    };
    for l in 0..L {
        for k in 0..W {
            words[l * W + k] = rows[k * 64 + l].to_le_bytes();
        }
    }
    true
}

/// Lanes `start..end` of the `n / 4` dword rows from row base `data` (`row * 64`) stored
/// into `b`, `n` bytes per lane (4, 8, 12 or 16).
#[inline(always)]
pub(crate) fn rows_to_dwords(
    v: &[u32],
    data: usize,
    start: usize,
    end: usize,
    n: usize,
    b: &mut [u8],
) {
    match n {
        4 => rows_to_bytes::<1>(v, data, start, end, b),
        _ => wide_rows_to_bytes(v, data, start, end, n, b),
    }
}

/// [`rows_to_dwords`] of 2 to 4 dwords per lane, out of line as [`wide_bytes_to_rows`].
#[cfg_attr(not(test), multiversion::multiversion(targets("x86_64+avx2+fma")))]
fn wide_rows_to_bytes(v: &[u32], data: usize, start: usize, end: usize, n: usize, b: &mut [u8]) {
    let done = start == 0
        && match (end, n) {
            (64, 8) => wave_rows_to_bytes::<64, 2, 128, 128>(v, data, b),
            (64, 12) => wave_rows_to_bytes::<64, 3, 192, 192>(v, data, b),
            (64, 16) => wave_rows_to_bytes::<64, 4, 256, 256>(v, data, b),
            (32, 8) => wave_rows_to_bytes::<32, 2, 96, 64>(v, data, b),
            (32, 12) => wave_rows_to_bytes::<32, 3, 160, 96>(v, data, b),
            (32, 16) => wave_rows_to_bytes::<32, 4, 224, 128>(v, data, b),
            _ => false,
        };
    if !done {
        match n {
            8 => rows_to_bytes::<2>(v, data, start, end, b),
            12 => rows_to_bytes::<3>(v, data, start, end, b),
            _ => rows_to_bytes::<4>(v, data, start, end, b),
        }
    }
}

/// Lanes `start..end` of `W` dword rows from `dst` (a row index) loaded from `b`, `4 * W`
/// bytes per lane. Lane by lane over the `W` rows at once, so that the loop vectorizes as
/// an interleaved access (whole vectors of bytes read, then shuffled into the rows).
#[inline(always)]
fn bytes_to_rows<const W: usize>(v: &mut [u32], dst: usize, start: usize, end: usize, b: &[u8]) {
    if W == 1 {
        // One row: a plain copy of dwords.
        let row = &mut v[dst * 64 + start..dst * 64 + end];
        for (r, c) in row.iter_mut().zip(b.chunks_exact(4)) {
            *r = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        }
        return;
    }
    let mut rows = v[dst * 64..(dst + W) * 64].chunks_exact_mut(64);
    let mut rows: [&mut [u32]; W] =
        std::array::from_fn(|_| &mut rows.next().unwrap_or_default()[start..end]);
    for (l, c) in b.chunks_exact(4 * W).take(end - start).enumerate() {
        for (k, r) in rows.iter_mut().enumerate() {
            let x = c.get(4 * k..).and_then(|s| s.first_chunk::<4>());
            r[l] = x.map_or(0, |x| u32::from_le_bytes(*x));
        }
    }
}

/// Lanes `start..end` of `W` dword rows from row base `data` (`row * 64`) into `b`, `4 * W`
/// bytes per lane, lane by lane as [`bytes_to_rows`] reads them.
#[inline(always)]
fn rows_to_bytes<const W: usize>(v: &[u32], data: usize, start: usize, end: usize, b: &mut [u8]) {
    if W == 1 {
        let row = &v[data + start..data + end];
        for (x, c) in row.iter().zip(b.chunks_exact_mut(4)) {
            c.copy_from_slice(&x.to_le_bytes());
        }
        return;
    }
    let rows: [&[u32]; W] = std::array::from_fn(|k| &v[data + 64 * k + start..data + 64 * k + end]);
    for (l, c) in b.chunks_exact_mut(4 * W).take(end - start).enumerate() {
        for (k, r) in rows.iter().enumerate() {
            if let Some(d) = c.get_mut(4 * k..).and_then(|s| s.first_chunk_mut::<4>()) {
                *d = r[l].to_le_bytes();
            }
        }
    }
}

/// Writes the `n` loaded bytes `b` of lane `l` to its destination registers.
#[inline]
fn write_loaded(w: &mut Wave, op: u16, dst: u16, l: usize, b: &[u8]) {
    match op {
        flat::LOAD_U8 => w.wr(dst, l, b[0] as u32),
        flat::LOAD_I8 => w.wr(dst, l, b[0] as i8 as i32 as u32),
        flat::LOAD_U16 => w.wr(dst, l, u16::from_le_bytes([b[0], b[1]]) as u32),
        flat::LOAD_I16 => w.wr(dst, l, i16::from_le_bytes([b[0], b[1]]) as i32 as u32),
        flat::LOAD_D16_U8 => w.wr16(dst, l, false, b[0] as u16),
        flat::LOAD_D16_I8 => w.wr16(dst, l, false, b[0] as i8 as i16 as u16),
        flat::LOAD_D16_HI_U8 => w.wr16(dst, l, true, b[0] as u16),
        flat::LOAD_D16_HI_I8 => w.wr16(dst, l, true, b[0] as i8 as i16 as u16),
        flat::LOAD_D16_B16 => w.wr16(dst, l, false, u16::from_le_bytes([b[0], b[1]])),
        flat::LOAD_D16_HI_B16 => w.wr16(dst, l, true, u16::from_le_bytes([b[0], b[1]])),
        _ => {
            for (k, c) in b.chunks_exact(4).enumerate() {
                w.wr(
                    dst + k as u16,
                    l,
                    u32::from_le_bytes([c[0], c[1], c[2], c[3]]),
                );
            }
        }
    }
}

/// The bytes lane `l` stores (from its data registers at row offset `data`) into `b`.
#[inline]
fn store_bytes(w: &Wave, op: u16, data: usize, l: usize, b: &mut [u8; 16]) {
    let (n, _) = mem_kind(op);
    let lo = w.v.get(data + l).copied().unwrap_or(0).to_le_bytes();
    match op {
        flat::STORE_D16_HI_B8 => b[0] = lo[2],
        flat::STORE_D16_HI_B16 => b[..2].copy_from_slice(&lo[2..4]),
        _ => {
            for k in 0..n.div_ceil(4) {
                let v = w.v.get(data + 64 * k + l).copied().unwrap_or(0);
                let m = (n - 4 * k).min(4);
                b[4 * k..4 * k + m].copy_from_slice(&v.to_le_bytes()[..m]);
            }
        }
    }
}

/// One lane's load or store of memory opcode `op` (FLAT numbering) at `addr`, through the
/// LDS or private aperture when the address is in one.
#[allow(clippy::too_many_arguments)]
fn lane_access(
    w: &mut Wave,
    i: &Inst,
    op: u16,
    l: usize,
    addr: u64,
    data: usize,
    ctx: &mut Ctx<'_>,
    private: usize,
) -> Result<(), Fault> {
    let (n, load) = mem_kind(op);
    let scratch = i.enc == Encoding::Scratch;
    let mut b = [0u8; 16];
    match load {
        Some(true) => {
            match aperture(i.enc, addr, scratch) {
                Aperture::Private(a) => scratch_access(w, l, a, &mut b[..n], None, private)?,
                Aperture::Lds(a) => lds_read(ctx.lds, a, &mut b[..n])?,
                Aperture::Global => ctx.mem.read(addr, &mut b[..n])?,
            }
            write_loaded(w, op, i.dst, l, &b[..n]);
            Ok(())
        }
        Some(false) => {
            store_bytes(w, op, data, l, &mut b);
            match aperture(i.enc, addr, scratch) {
                Aperture::Private(a) => {
                    let mut tmp = b;
                    scratch_access(w, l, a, &mut tmp[..n], Some(&b[..n]), private)
                }
                Aperture::Lds(a) => lds_write(ctx.lds, a, &b[..n]),
                Aperture::Global => ctx.mem.write(addr, &b[..n]),
            }
        }
        None => Err(Fault {
            addr,
            write: true,
            reason: "unimplemented".into(),
        }),
    }
}

/// An atomic operation and its operand type ("add", "u32") from the mnemonic of a FLAT,
/// GLOBAL or MUBUF atomic, once per program (see [`crate::Program`]).
pub(crate) fn atomic_kind(i: &Inst) -> Option<Atom> {
    if !matches!(
        i.enc,
        Encoding::Flat | Encoding::Global | Encoding::Scratch | Encoding::Mubuf
    ) {
        return None;
    }
    let base = mnemonic(i)
        .trim_start_matches("buffer_")
        .trim_start_matches("atomic_");
    let (op, ty) = base.rsplit_once('_')?;
    atomic_op(op, ty, 0, 0, 0).map(|_| Atom {
        op,
        ty,
        fast: atomic_fast(op, ty),
    })
}

/// An atomic operation of a memory instruction, resolved once per program.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Atom {
    op: &'static str,
    ty: &'static str,
    /// The common integer operations as a plain function of (old, data), the same as
    /// [`atomic_op`] gives.
    fast: Option<fn(u64, u64) -> u64>,
}

impl Atom {
    /// The operation and its operand type ("add", "u32").
    pub(crate) fn names(&self) -> (&'static str, &'static str) {
        (self.op, self.ty)
    }

    #[inline]
    fn apply(&self, old: u64, x: u64, y: u64) -> u64 {
        match self.fast {
            Some(f) => f(old, x),
            None => atomic_op(self.op, self.ty, old, x, y).unwrap_or(old),
        }
    }
}

/// [`atomic_op`] of the frequent integer atomics without the mnemonic matching.
fn atomic_fast(op: &str, ty: &str) -> Option<fn(u64, u64) -> u64> {
    let f: fn(u64, u64) -> u64 = match (op, ty) {
        ("add", "u32") => |o, x| (o as u32).wrapping_add(x as u32) as u64,
        ("sub", "u32") => |o, x| (o as u32).wrapping_sub(x as u32) as u64,
        ("and", "b32") => |o, x| (o & x) & 0xffff_ffff,
        ("or", "b32") => |o, x| (o | x) & 0xffff_ffff,
        ("xor", "b32") => |o, x| (o ^ x) & 0xffff_ffff,
        ("swap", "b32") => |_, x| x & 0xffff_ffff,
        ("min", "u32") => |o, x| (o as u32).min(x as u32) as u64,
        ("max", "u32") => |o, x| (o as u32).max(x as u32) as u64,
        ("min", "i32") => |o, x| (o as u32 as i32).min(x as u32 as i32) as u32 as u64,
        ("max", "i32") => |o, x| (o as u32 as i32).max(x as u32 as i32) as u32 as u64,
        ("add", "u64") => |o, x| o.wrapping_add(x),
        ("sub", "u64") => |o, x| o.wrapping_sub(x),
        ("and", "b64") => |o, x| o & x,
        ("or", "b64") => |o, x| o | x,
        ("xor", "b64") => |o, x| o ^ x,
        ("swap", "b64") => |_, x| x,
        _ => return None,
    };
    Some(f)
}

/// MUBUF: untyped buffer loads, stores and atomics through a buffer resource (V#, four SGPRs:
/// base address in bits 47:0, stride in 61:48, `num_records` in the third dword, ADD_TID_ENABLE
/// in bit 23 of the fourth). A lane's address is base + soffset + offset + stride * index,
/// offset being the instruction offset plus the VGPR offset (`offen`) and index the VGPR index
/// (`idxen`) plus the lane id (ADD_TID_ENABLE). Range checking: with stride 0 an access whose
/// offset + size exceeds `num_records` bytes is out of range, otherwise an index at or past
/// `num_records`; out-of-range loads return 0, stores and atomics are dropped. Swizzled
/// buffers and format conversions are not modelled.
fn mubuf_op(w: &mut Wave, i: &Inst, idx: usize, ctx: &mut Ctx<'_>) -> Result<(), Error> {
    let name = mnemonic(i);
    if name.starts_with("buffer_gl") {
        return Ok(());
    }
    let Some(op) = name
        .strip_prefix("buffer_")
        .and_then(lookup_flat)
        .filter(|_| !name.contains("format"))
    else {
        return Err(unimplemented(ctx, idx, i));
    };
    let rs = |k: u16| w.sread(i.srsrc + k, 0);
    let (d0, d1, d2, d3) = (rs(0), rs(1), rs(2), rs(3));
    let base = d0 as u64 | ((d1 & 0xffff) as u64) << 32;
    let stride = ((d1 >> 16) & 0x3fff) as u64;
    let records = d2 as u64;
    let add_tid = d3 & (1 << 23) != 0;
    let soffset = w.sread(i.saddr, 0) as u64;
    let (n, load) = mem_kind(op);
    let size = if load.is_none() {
        if name.ends_with("64") { 8 } else { 4 }
    } else {
        n
    };
    let (offen, idxen) = (i.flags & flag::OFFEN != 0, i.flags & flag::IDXEN != 0);
    let vaddr = (i.src[0] - VGPR0) as usize * 64;
    let data = (i.dst.wrapping_sub(VGPR0)) as usize * 64;
    let exec = w.exec();
    let mut err: Option<(u32, Fault)> = None;
    let private = w.private_size;
    let atomic = if load.is_none() {
        match ctx.prog.atom(idx) {
            Some(k) => Some(k),
            None => return Err(unimplemented(ctx, idx, i)),
        }
    } else {
        None
    };
    // The data registers are `vdata` (stores and atomics read them, loads write them).
    let mut li = *i;
    li.src[1] = i.dst;
    for_lanes(exec, |l| {
        if err.is_some() {
            return;
        }
        let vgpr = |k: usize| w.v.get(vaddr + 64 * k + l).copied().unwrap_or(0) as u64;
        let index = if idxen { vgpr(0) } else { 0 } + if add_tid { l as u64 } else { 0 };
        let offset = if offen { vgpr(usize::from(idxen)) } else { 0 } + i.imm as u64;
        let in_range = if stride == 0 {
            offset + size as u64 <= records
        } else {
            index < records
        };
        if !in_range {
            if load == Some(true) {
                for k in 0..n.div_ceil(4) {
                    w.wr(i.dst + k as u16, l, 0);
                }
            }
            return;
        }
        let addr = base
            .wrapping_add(soffset)
            .wrapping_add(offset)
            .wrapping_add(stride.wrapping_mul(index));
        let r = match atomic {
            Some(k) => flat_atomic(w, &li, k, l, addr, data, ctx),
            None => lane_access(w, &li, op, l, addr, data, ctx, private),
        };
        if let Err(f) = r {
            err = Some((l as u32, f));
        }
    });
    match err {
        Some((_, f)) if f.reason == "unimplemented" => Err(unimplemented(ctx, idx, i)),
        Some((l, f)) => Err(fault(ctx, idx, i, l, f)),
        None => Ok(()),
    }
}

/// The FLAT opcode of a memory mnemonic without segment prefix (`load_b32`).
fn lookup_flat(n: &str) -> Option<u16> {
    opcodes::flat::NAMES.iter().find(|e| e.1 == n).map(|e| e.0)
}

/// Where a memory instruction's address goes.
enum Aperture {
    Global,
    Lds(u32),
    Private(u64),
}

/// Scratch instructions address the private segment; FLAT (generic) addresses in the shared
/// or private aperture (the high dword `src_shared_base` / `src_private_base` return) reach
/// LDS or scratch at the low dword; everything else is global memory.
#[inline]
fn aperture(enc: Encoding, addr: u64, scratch: bool) -> Aperture {
    if scratch {
        Aperture::Private(addr)
    } else if enc == Encoding::Flat && addr >> 32 == SHARED_BASE >> 32 {
        Aperture::Lds(addr as u32)
    } else if enc == Encoding::Flat && addr >> 32 == PRIVATE_BASE >> 32 {
        Aperture::Private(addr & 0xffff_ffff)
    } else {
        Aperture::Global
    }
}

/// Reads (`data` None) or writes a lane's private memory. Scratch addresses are offsets
/// into the lane's private segment (the hardware's per-lane swizzle is invisible to the
/// program), so they live in the wave, not in the memory trait.
fn scratch_access(
    w: &mut Wave,
    lane: usize,
    addr: u64,
    buf: &mut [u8],
    data: Option<&[u8]>,
    private: usize,
) -> Result<(), Fault> {
    let n = buf.len();
    let ok = (addr as usize).checked_add(n).is_some_and(|e| e <= private);
    if !ok {
        return Err(Fault {
            addr,
            write: data.is_some(),
            reason: format!("outside the {private}-byte private segment of lane {lane}"),
        });
    }
    let at = lane * private + addr as usize;
    match data {
        Some(d) => w.scratch[at..at + n].copy_from_slice(d),
        None => buf.copy_from_slice(&w.scratch[at..at + n]),
    }
    Ok(())
}

fn flat_atomic(
    w: &mut Wave,
    i: &Inst,
    atom: Atom,
    l: usize,
    addr: u64,
    data: usize,
    ctx: &mut Ctx<'_>,
) -> Result<(), Fault> {
    if !matches!(aperture(i.enc, addr, false), Aperture::Global) || i.enc == Encoding::Scratch {
        return Err(Fault {
            addr,
            write: true,
            reason: "unimplemented".into(),
        });
    }
    let wide = atom.ty.ends_with("64");
    let x = w.v[data + l] as u64
        | if wide {
            (w.v[data + 64 + l] as u64) << 32
        } else {
            0
        };
    let y_row = data + if wide { 128 } else { 64 };
    let y = w.v.get(y_row + l).copied().unwrap_or(0) as u64
        | if wide {
            (w.v.get(y_row + 64 + l).copied().unwrap_or(0) as u64) << 32
        } else {
            0
        };
    let n = if wide { 8 } else { 4 };
    let old = ctx
        .mem
        .atomic_rmw(addr, n, &mut |old| atom.apply(old, x, y))?;
    if i.flags & flag::GLC != 0 {
        w.wr(i.dst, l, old as u32);
        if wide {
            w.wr(i.dst + 1, l, (old >> 32) as u32);
        }
    }
    Ok(())
}

/// The atomics of a FLAT or GLOBAL instruction whose active lanes all address global memory,
/// as one [`Memory::atomic_rmw_batch`] in lane order (what [`flat_atomic`] does lane by lane):
/// the memory is found once for the run instead of once per lane. On a fault the lanes
/// before the faulting one have done their atomic (and, with GLC, received its old value).
#[allow(clippy::too_many_arguments)]
fn global_atomics(
    w: &mut Wave,
    i: &Inst,
    idx: usize,
    ctx: &mut Ctx<'_>,
    atom: Atom,
    exec: u64,
    addrs: &[u64; 64],
    data: usize,
) -> Result<(), Error> {
    let wide = atom.ty.ends_with("64");
    let lanes = w.lanes as usize;
    // A full wave of 32-bit integer atomics (a histogram's): the addresses and the data row
    // go to memory as they are, without gathering the lanes into arrays first.
    if let (Some(f), false, true) = (atom.fast, wide, exec == full_mask(w.lanes))
        && let Some(xs) = w.v.get(data..data + lanes)
    {
        let mut olds = [0u64; 64];
        let r = ctx.mem.atomic_rmw_batch(
            &addrs[..lanes],
            4,
            &mut |k, old| f(old, xs[k] as u64),
            &mut olds[..lanes],
        );
        return atomic_results(w, i, idx, ctx, r, &olds[..lanes], false, |k| k);
    }
    let y_row = data + if wide { 128 } else { 64 };
    let read = |w: &Wave, row: usize, l: usize| -> u64 {
        w.v.get(row + l).copied().unwrap_or(0) as u64
            | if wide {
                (w.v.get(row + 64 + l).copied().unwrap_or(0) as u64) << 32
            } else {
                0
            }
    };
    let (mut at, mut xs, mut ys, mut lane) = ([0u64; 64], [0u64; 64], [0u64; 64], [0u8; 64]);
    let mut n = 0;
    for_lanes(exec, |l| {
        at[n] = addrs[l];
        xs[n] = read(w, data, l);
        ys[n] = read(w, y_row, l);
        lane[n] = l as u8;
        n += 1;
    });
    let mut olds = [0u64; 64];
    let len = if wide { 8 } else { 4 };
    let r = match atom.fast {
        Some(f) => {
            ctx.mem
                .atomic_rmw_batch(&at[..n], len, &mut |k, old| f(old, xs[k]), &mut olds[..n])
        }
        None => ctx.mem.atomic_rmw_batch(
            &at[..n],
            len,
            &mut |k, old| atom.apply(old, xs[k], ys[k]),
            &mut olds[..n],
        ),
    };
    atomic_results(w, i, idx, ctx, r, &olds[..n], wide, |k| lane[k] as usize)
}

/// The end of [`global_atomics`]: with GLC, the old values of the atomics done (all of
/// `olds`, or those before the faulting one) to their lanes (`lane(k)` of the `k`-th
/// atomic); a fault names its lane.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn atomic_results(
    w: &mut Wave,
    i: &Inst,
    idx: usize,
    ctx: &Ctx<'_>,
    r: Result<(), (usize, Fault)>,
    olds: &[u64],
    wide: bool,
    lane: impl Fn(usize) -> usize,
) -> Result<(), Error> {
    let done = match &r {
        Ok(()) => olds.len(),
        Err((k, _)) => *k,
    };
    if i.flags & flag::GLC != 0 {
        for (k, &old) in olds[..done].iter().enumerate() {
            w.wr(i.dst, lane(k), old as u32);
            if wide {
                w.wr(i.dst + 1, lane(k), (old >> 32) as u32);
            }
        }
    }
    r.map_err(|(k, f)| fault(ctx, idx, i, lane(k) as u32, f))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `compare_rows` (lane results packed eight at a time) against a plain loop that sets one
    /// mask bit per lane, for every condition, f32 (with abs/neg masks), signed and unsigned
    /// sources, on both wave sizes.
    #[test]
    #[allow(
        clippy::neg_cmp_op_on_partial_ord,
        clippy::nonminimal_bool,
        clippy::double_comparisons
    )]
    fn compare_rows_match_a_lane_by_lane_reference() {
        let mut next = crate::xorshift(0x2545_f491_4f6c_dd1d);
        let special = [
            0x0000_0000u32,
            0x8000_0000,
            0x3f80_0000,
            0xbf80_0000,
            0x7f80_0000,
            0xff80_0000,
            0x7fc0_0000,
            0xffc0_0001,
            0x0000_0001,
            0x7fff_ffff,
            0xffff_ffff,
        ];
        let mut w = Wave::new();
        for l in 0..64 {
            let pick = |r: u64| special[(r % special.len() as u64) as usize];
            let (r0, r1) = (next(), next());
            w.v[l] = if r0 & 1 == 0 {
                pick(r0 >> 8)
            } else {
                (r0 >> 16) as u32
            };
            // Equal to the first source in about one lane of four.
            w.v[64 + l] = match r1 % 4 {
                0 => w.v[l],
                1 => pick(r1 >> 8),
                _ => (r1 >> 16) as u32,
            };
        }
        let plain = (u64::MAX, 0);
        let masks = [[plain, plain], [(0x7fff_ffff, 0), (u64::MAX, 0x8000_0000)]];
        for lanes in [32u32, 64] {
            w.lanes = lanes;
            for cond in 0..=16u8 {
                for (kind, ty) in [(K::F32, 1u8), (K::I32, 3), (K::I32, 7)] {
                    for m in masks {
                        let v = Valu {
                            r: [0, 64, 0],
                            m: [m[0], m[1], plain],
                            sh: [0; 3],
                            exec: full_mask(lanes),
                        };
                        let c = CmpInfo {
                            cond,
                            ty,
                            x: false,
                            class: false,
                        };
                        let mut want = 0u64;
                        for l in 0..lanes as usize {
                            let (a, b) = (w.v[l], w.v[64 + l]);
                            let bit = if kind == K::F32 {
                                let f = |x: u32, (and, xor): (u64, u64)| {
                                    f32::from_bits((x & and as u32) ^ xor as u32)
                                };
                                let (x, y) = (f(a, m[0]), f(b, m[1]));
                                match cond {
                                    0 => false,
                                    1 => x < y,
                                    2 => x == y,
                                    3 => x <= y,
                                    4 => x > y,
                                    5 => x < y || x > y,
                                    6 => x >= y,
                                    7 => !x.is_nan() && !y.is_nan(),
                                    8 => x.is_nan() || y.is_nan(),
                                    9 => !(x >= y),
                                    10 => !(x < y || x > y),
                                    11 => !(x > y),
                                    12 => !(x <= y),
                                    13 => x != y,
                                    14 => !(x < y),
                                    _ => true,
                                }
                            } else {
                                let (x, y) = if ty < 6 {
                                    (a as i32 as i64, b as i32 as i64)
                                } else {
                                    (a as i64, b as i64)
                                };
                                match cond {
                                    1 => x < y,
                                    2 => x == y,
                                    3 => x <= y,
                                    4 => x > y,
                                    6 => x >= y,
                                    5 | 16 => x != y,
                                    15 => true,
                                    _ => false,
                                }
                            };
                            want |= (bit as u64) << l;
                        }
                        let got = compare_rows(&w, &v, kind, c);
                        assert_eq!(
                            got, want,
                            "{lanes} lanes, cond {cond}, ty {ty}, masks {m:?}"
                        );
                    }
                }
            }
        }
    }

    /// Reference for `dwords_to_rows` and `rows_to_dwords`: lane `start + j` of dword row
    /// `k` is the little-endian dword at byte `n * j + 4 * k` of the buffer.
    #[test]
    fn dword_transpositions_match_a_lane_by_lane_reference() {
        let mut xs = crate::xorshift(0x9e37_79b9_7f4a_7c15);
        let mut next = move || xs() as u32;
        // Full waves, the 16-lane runs of the GLOBAL forms, and ranges with a partial chunk.
        let ranges = [
            (0, 64),
            (0, 32),
            (16, 32),
            (48, 64),
            (3, 29),
            (0, 7),
            (5, 6),
            (8, 8),
        ];
        for n in [4usize, 8, 12, 16] {
            for (start, end) in ranges {
                let lanes = end - start;
                let bytes: Vec<u8> = (0..n * lanes).map(|_| next() as u8).collect();
                let dst = 7;
                let mut v: Vec<u32> = (0..16 * 64).map(|_| next()).collect();
                let before = v.clone();
                dwords_to_rows(&mut v, dst, start, end, n, &bytes);
                for (at, (&got, &old)) in v.iter().zip(&before).enumerate() {
                    let (row, lane) = (at / 64, at % 64);
                    let k = row.wrapping_sub(dst);
                    let want = if k < n / 4 && (start..end).contains(&lane) {
                        let o = n * (lane - start) + 4 * k;
                        u32::from_le_bytes([bytes[o], bytes[o + 1], bytes[o + 2], bytes[o + 3]])
                    } else {
                        old
                    };
                    assert_eq!(
                        got, want,
                        "load of {n} bytes per lane, lanes {start}..{end}: row {row} lane {lane}"
                    );
                }
                let mut out = vec![0xa5u8; n * lanes];
                rows_to_dwords(&v, dst * 64, start, end, n, &mut out);
                assert_eq!(
                    out, bytes,
                    "store of {n} bytes per lane, lanes {start}..{end}"
                );
            }
        }
    }

    #[test]
    fn fma_rows_match_fma32_bit_for_bit() {
        let special = [
            0.0f32,
            -0.0,
            1.0,
            -1.5,
            f32::MIN_POSITIVE,
            -1e-45,
            f32::MAX,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::from_bits(0x7fc0_0001),
            f32::from_bits(0xffc0_0abc),
            f32::from_bits(0x7f80_0123),
            3.0e-39,
            16_777_217.0,
        ];
        let mut vals = vec![];
        for &a in &special {
            for &b in &special {
                for &c in &special {
                    vals.push([a, b, c]);
                }
            }
        }
        let mut w = Wave::new();
        for chunk in vals.chunks(64) {
            for (l, x) in chunk.iter().enumerate() {
                for (k, v) in x.iter().enumerate() {
                    w.v[64 * k + l] = v.to_bits();
                }
            }
            // src1 negated, as `-v` does.
            fma_rows::<64>(&mut w, [0, 64, 128], [(!0, 0), (!0, 1 << 31), (!0, 0)], 192);
            for (l, x) in chunk.iter().enumerate() {
                let (got, want) = (w.v[192 + l], fma32(x[0], -x[1], x[2]));
                // Which NaN comes out of two NaN operands depends on the host's operand order.
                let same = got == want.to_bits() || (want.is_nan() && f32::from_bits(got).is_nan());
                assert!(
                    same,
                    "fma({:?}, -{:?}, {:?}): {got:#x}, not {want:?}",
                    x[0], x[1], x[2]
                );
            }
        }
    }

    #[test]
    fn lds_row_paths_match_lane_by_lane() {
        let mut next = crate::xorshift(0x2545_f491_4f6c_dd1du64);
        const LDS: usize = 4096;
        for case in 0..3000 {
            let lanes = if case % 2 == 0 { 64 } else { 32 };
            let exec = match case % 3 {
                0 => u64::MAX,
                1 => next() | 0xffff_0000_ffff,
                _ => next(),
            } & if lanes == 64 { u64::MAX } else { 0xffff_ffff };
            let (halves, words) = (1 + (next() % 2) as usize, 1 + (next() % 2) as usize);
            let offs = [4 * (next() % 24) as usize, 4 * (next() % 24) as usize];
            // Per row of 16 lanes: consecutive dwords, one address, or scattered dwords.
            let mut addrs = [0usize; 64];
            for g in 0..lanes / 16 {
                let base = 4 * (next() % 512) as usize;
                let kind = next() % 3;
                for k in 0..16 {
                    addrs[16 * g + k] = match kind {
                        0 => base + 4 * k,
                        1 => base,
                        _ => 4 * (next() % 512) as usize,
                    };
                }
            }
            let addrs: [u32; 64] = addrs.map(|a| a as u32);
            let load = next() & 1 == 0;
            let lds0: Vec<u8> = (0..LDS).map(|_| next() as u8).collect();
            let mut w = Wave::new();
            w.lanes = lanes as u32;
            for r in w.v.iter_mut().take(64 * 16) {
                *r = next() as u32;
            }
            let (dst, data) = (8, [0, 4 * 64]);
            let mut want_v = w.v.clone();
            let mut want_lds = lds0.clone();
            for_lanes(exec, |l| {
                for h in 0..halves {
                    for k in 0..words {
                        let at = addrs[l] as usize + offs[h] + 4 * k;
                        if load {
                            let b = &want_lds[at..at + 4];
                            want_v[(dst + h * words + k) * 64 + l] =
                                u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                        } else {
                            let v = w.v[data[h] + 64 * k + l];
                            want_lds[at..at + 4].copy_from_slice(&v.to_le_bytes());
                        }
                    }
                }
            });
            let mut lds = lds0.clone();
            let r = fast::LdsRows::new(&addrs, exec, lanes as u32);
            lds_dwords(
                &mut w.v, lanes, &mut lds, &r, offs, halves, words, load, dst, data,
            );
            assert!(
                w.v == want_v && lds == want_lds,
                "case {case}: {} of {words} dword(s) at {halves} address(es) {offs:?}, \
                 EXEC {exec:#x}, wave{lanes}, addresses {addrs:?}",
                if load { "load" } else { "store" }
            );
        }
    }

    #[test]
    fn fast_atomics_match_the_general_ones() {
        let mut next = crate::xorshift(0x9e37_79b9_7f4a_7c15u64);
        let ops = ["add", "sub", "and", "or", "xor", "swap", "min", "max"];
        let tys = ["u32", "i32", "b32", "u64", "i64", "b64"];
        let mut checked = 0;
        for op in ops {
            for ty in tys {
                let Some(f) = atomic_fast(op, ty) else {
                    continue;
                };
                checked += 1;
                for k in 0..2000 {
                    let (mut o, mut d) = (next(), next());
                    if k % 3 == 0 {
                        o &= 0xffff_ffff;
                    }
                    if k % 5 == 0 {
                        d = o.wrapping_add(k);
                    }
                    assert_eq!(Some(f(o, d)), atomic_op(op, ty, o, d, next()), "{op}_{ty}");
                }
            }
        }
        assert_eq!(checked, 16);
    }

    #[test]
    fn fma32_matches_the_library_fused_multiply_add() {
        let mut bits = crate::xorshift(0x9e37_79b9_7f4a_7c15);
        let mut next = || bits() as u32;
        for k in 0..200_000 {
            // Mix random bit patterns with values whose product nearly cancels the addend.
            let a = f32::from_bits(next());
            let b = f32::from_bits(next());
            let c = if k % 2 == 0 {
                f32::from_bits(next())
            } else {
                -(a * b) * (1.0 + f32::EPSILON * (k % 7) as f32)
            };
            let (got, want) = (fma32(a, b, c), a.mul_add(b, c));
            assert!(
                got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
                "fma({a:e}, {b:e}, {c:e}) = {got:e}, want {want:e}"
            );
        }
    }

    /// `v_div_fmas_f64` with VCC set scales the fused result by 2^-128 (2^128 when src2's
    /// exponent is above 1023) with one rounding: subnormal results keep their bits (they
    /// came out 0 when the scaling went through `powi`), and the fused sum is not rounded to
    /// 53 bits before the scaled result is rounded again.
    #[test]
    fn div_fmas_f64_rounds_scaled_subnormal_results_once() {
        let p2 = |e: i32| crate::interp::exec::pow2(e);
        let tiny = |bits: u64| f64::from_bits(bits);
        // (a, b, c, the result's bits)
        let cases: [(f64, f64, f64, u64); 8] = [
            // 1.5 · 2^-1050: a subnormal the old scaling lost.
            (1.5 * p2(-461), p2(-461), 0.0, 0x0180_0000),
            // 2^-1028 + 2^-1075 + 2^-1128: above the tie, so up (rounding the fused sum to 53
            // bits first would leave an exact tie, which goes down to even).
            (
                (1.0 + p2(-47)) * p2(-450),
                p2(-450),
                p2(-1000),
                (1 << 46) + 1,
            ),
            // Just above half the smallest subnormal: up to it.
            ((1.0 + p2(-52)) * p2(-473), p2(-474), 0.0, 1),
            // Exactly half the smallest subnormal: to even, 0.
            (p2(-473), p2(-474), 0.0, 0),
            // Far below: 0, with the product's sign.
            (-p2(-600), p2(-600), 0.0, 1 << 63),
            // Normal: (3 · 5 + 1) · 2^-128.
            (3.0, 5.0, 1.0, ((1023 - 124) as u64) << 52),
            // Cancellation to -2^-104, scaled: -2^-232.
            (
                -(1.0 + p2(-52)),
                1.0 + p2(-52),
                1.0 + p2(-51),
                1 << 63 | ((1023 - 232) as u64) << 52,
            ),
            // src2's exponent above 1023 scales up: (1 + 4) · 2^128.
            (1.0, 1.0, 4.0, (5.0 * p2(128)).to_bits()),
        ];
        // v_div_fmas_f64 v[2:3], v[4:5], v[6:7], v[8:9]; s_endpgm
        let words = [0xd638_0002u32, 0x0422_0d04, 0xbfb0_0000];
        let code: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        let prog = crate::Program::from_bytes(&code, 0, crate::Isa::Gfx1100).unwrap();
        let mut w = Wave::new();
        w.lanes = 32;
        w.state = WaveState::Running;
        w.set_exec(u64::from(u32::MAX));
        w.set_mask(VCC_LO, u64::from(u32::MAX));
        for (l, &(a, b, c, _)) in cases.iter().enumerate() {
            for (row, x) in [(4, a), (6, b), (8, c)] {
                w.v[row * 64 + l] = x.to_bits() as u32;
                w.v[(row + 1) * 64 + l] = (x.to_bits() >> 32) as u32;
            }
        }
        run_alone(&mut w, &prog).unwrap();
        for (l, &(a, b, c, want)) in cases.iter().enumerate() {
            let got = u64::from(w.v[2 * 64 + l]) | u64::from(w.v[3 * 64 + l]) << 32;
            assert_eq!(
                got,
                want,
                "lane {l}: div_fmas({a:e}, {b:e}, {c:e}) = {:e}, want {:e}",
                tiny(got),
                tiny(want)
            );
        }
    }

    /// Where the scaled result is normal, the one rounding of `fma_scaled64` is the host's
    /// fused multiply-add scaled exactly; and `ldexp64` reaches every subnormal.
    #[test]
    fn fma_scaled64_matches_the_host_fma_on_normal_results() {
        let mut next = crate::xorshift(0x9e37_79b9_7f4a_7c15);
        let mut checked = 0;
        for _ in 0..20000 {
            let mut pick = || {
                let r = next();
                let e = (r % 200) as i32 - 100;
                let m = f64::from_bits(0x3ff0_0000_0000_0000 | (r >> 12));
                if r >> 11 & 1 == 1 {
                    -m * pow2(e)
                } else {
                    m * pow2(e)
                }
            };
            let (a, b, c) = (pick(), pick(), pick());
            let f = a.mul_add(b, c);
            for k in [-128, 128] {
                let want = f * pow2(k);
                if want.abs() >= f64::MIN_POSITIVE && want.is_finite() {
                    assert_eq!(
                        fma_scaled64(a, b, c, k).to_bits(),
                        want.to_bits(),
                        "{a:e} {b:e} {c:e} {k}"
                    );
                    checked += 1;
                }
            }
        }
        assert!(checked > 30000);
        for n in [1u64, 3, 0x8_0000_0000_0001, (1 << 52) - 1] {
            let x = f64::from_bits(n);
            assert_eq!(ldexp64(x * pow2(200), -200).to_bits(), n);
        }
    }

    /// Runs `prog` on wave `w` alone: host memory of its own, no LDS, at most 16
    /// instructions.
    fn run_alone(w: &mut Wave, prog: &crate::Program) -> Result<(), Error> {
        let mut mem = crate::HostMemory::new();
        let (mut lds, mut buf) = (vec![], vec![0u8; 1024]);
        let mut ctx = Ctx {
            mem: &mut mem,
            lds: &mut lds,
            code_base: 0,
            prog,
            instructions: 0,
            budget: 16,
            buf: &mut buf,
            counts: &mut [],
        };
        run(w, &mut ctx).map(|_| ())
    }

    /// Runs the VOP3P instruction `words` (then `s_endpgm`) on one wave of `isa` whose lane
    /// `l` holds `regs[k].1[l]` in VGPR `regs[k].0`.
    fn run_packed(isa: crate::Isa, words: &[u32], regs: &[(usize, &[u32])]) -> Result<Wave, Error> {
        let cdna = isa == crate::Isa::Gfx942;
        let end = if cdna { 0xbf81_0000u32 } else { 0xbfb0_0000 };
        let code: Vec<u8> = words
            .iter()
            .chain([&end])
            .flat_map(|w| w.to_le_bytes())
            .collect();
        let prog = crate::Program::from_bytes(&code, 0, isa).unwrap();
        let mut w = Wave::new();
        w.lanes = if cdna { 64 } else { 32 };
        w.state = WaveState::Running;
        w.set_exec(full_mask(w.lanes));
        for &(row, vals) in regs {
            for (l, &x) in vals.iter().enumerate() {
                w.v[row * 64 + l] = x;
            }
        }
        run_alone(&mut w, &prog).map(|_| w)
    }

    fn pair(lo: u16, hi: u16) -> u32 {
        lo as u32 | (hi as u32) << 16
    }

    fn h(x: f32) -> u16 {
        crate::interp::float::f32_to_f16(x)
    }

    /// The VOP3P clamp bit on gfx1100 (words from llvm-mc-22 -mcpu=gfx1100): float results
    /// saturate to [0, 1] with NaN to 0, packed 16-bit sums and differences to their type's
    /// range, in both halves; without the bit the same inputs pass through or wrap.
    #[test]
    fn packed_clamp_saturates_floats_and_integer_sums_on_gfx1100() {
        let nan = 0x7e00;
        // (a, b, result with clamp, result without), each a pair of halves.
        type Halves = [f32; 2];
        let f16_add: [(Halves, Halves, Halves, Halves); 3] = [
            ([0.25, 0.75], [0.5, 0.5], [0.75, 1.0], [0.75, 1.25]),
            ([-2.0, 0.125], [0.5, 0.0], [0.0, 0.125], [-1.5, 0.125]),
            ([3.0, -0.5], [4.0, 0.25], [1.0, 0.0], [7.0, -0.25]),
        ];
        let p = |x: [f32; 2]| pair(h(x[0]), h(x[1]));
        let a: Vec<u32> = f16_add
            .iter()
            .map(|c| p(c.0))
            .chain([pair(nan, h(0.5))])
            .collect();
        let b: Vec<u32> = f16_add
            .iter()
            .map(|c| p(c.1))
            .chain([pair(h(1.0), h(0.25))])
            .collect();
        // v_pk_add_f16 v2, v4, v6 clamp / without clamp
        for (clamp, w0) in [(true, 0xcc0f_c002u32), (false, 0xcc0f_4002)] {
            let w =
                run_packed(crate::Isa::Gfx1100, &[w0, 0x1802_0d04], &[(4, &a), (6, &b)]).unwrap();
            for (l, c) in f16_add.iter().enumerate() {
                assert_eq!(
                    w.v[2 * 64 + l],
                    p(if clamp { c.2 } else { c.3 }),
                    "clamp {clamp} lane {l}"
                );
            }
            let nan_lane = w.v[2 * 64 + 3];
            if clamp {
                assert_eq!(nan_lane, pair(0, h(0.75)), "NaN clamps to 0");
            } else {
                assert_eq!(nan_lane & 0x7c00, 0x7c00, "NaN stays NaN unclamped");
            }
        }
        // v_pk_add_u16 v2, v4, v6 clamp / without; v_pk_sub_i16 v2, v4, v6 clamp
        let (a, b) = (
            [pair(0xfff0, 1), pair(0x8000, 5)],
            [pair(0x20, 2), pair(1, 3)],
        );
        let sum =
            |w0| run_packed(crate::Isa::Gfx1100, &[w0, 0x1802_0d04], &[(4, &a), (6, &b)]).unwrap();
        let w = sum(0xcc0a_c002);
        assert_eq!([w.v[128], w.v[129]], [pair(0xffff, 3), pair(0x8001, 8)]);
        let w = sum(0xcc0a_4002);
        assert_eq!([w.v[128], w.v[129]], [pair(0x0010, 3), pair(0x8001, 8)]);
        let w = sum(0xcc03_c002);
        assert_eq!(
            [w.v[128], w.v[129]],
            [pair(0xffd0, 0xffff), pair(0x8000, 2)],
            "i16: -16 - 32 = -48; -32768 - 1 saturates; 5 - 3 = 2"
        );
        // v_dot2_f32_f16 v2, v4, v6, v8 clamp: 0.5·0.5 + 0.25·0.5 + 0 = 0.375 passes,
        // 2·1 + 0 + 0.5 saturates to 1, -1·1 + 0 + 0 to 0.
        let a = [pair(h(0.5), h(0.25)), pair(h(2.0), 0), pair(h(-1.0), 0)];
        let b = [pair(h(0.5), h(0.5)), pair(h(1.0), 0), pair(h(1.0), 0)];
        let c = [0.0f32.to_bits(), 0.5f32.to_bits(), 0.0f32.to_bits()];
        let w = run_packed(
            crate::Isa::Gfx1100,
            &[0xcc13_c002, 0x1c22_0d04],
            &[(4, &a), (6, &b), (8, &c)],
        )
        .unwrap();
        assert_eq!(
            [w.v[128], w.v[129], w.v[130]],
            [0.375f32.to_bits(), 1.0f32.to_bits(), 0]
        );
        // v_pk_mad_u16 v2, v4, v6, v8 clamp: no source settles what clamp does to a product.
        let e = run_packed(crate::Isa::Gfx1100, &[0xcc09_c002, 0x1c22_0d04], &[]);
        assert!(
            matches!(e, Err(Error::Unimplemented { .. })),
            "{:?}",
            e.err()
        );
    }

    /// On gfx942 (words from llvm-mc-22 -mcpu=gfx942) `v_pk_add/mul/fma_f32 … clamp` saturate
    /// each f32 result to [0, 1] (NaN to 0), where the straight-loop form does not apply;
    /// the shared 16-bit packed ops clamp as on gfx11.
    #[test]
    fn packed_clamp_saturates_on_gfx942() {
        let f = |x: f32| x.to_bits();
        // Lane l: v[4:5] = (a, a'), v[6:7] = (b, b'), v[8:9] = (c, c').
        let a = [f(0.25), f(1.5), f(-3.0), f(f32::NAN)];
        let a1 = [f(0.5), f(2.0), f(0.125), f(0.0)];
        let b = [f(0.5), f(0.5), f(2.0), f(1.0)];
        let b1 = [f(0.25), f(-4.0), f(0.5), f(1.0)];
        let c = [f(0.125), f(0.0), f(7.0), f(0.0)];
        let c1 = [f(0.0), f(8.5), f(-1.0), f(0.25)];
        // Each op has lanes inside [0, 1] (0.25 + 0.5), above (1.5 + 0.5), below (-3 + 2)
        // and NaN.
        let regs: [(usize, &[u32]); 6] = [(4, &a), (5, &a1), (6, &b), (7, &b1), (8, &c), (9, &c1)];
        type Op = fn(f32, f32, f32) -> f32;
        let cases: [(u32, u32, Op); 3] = [
            // v_pk_add_f32 v[2:3], v[4:5], v[6:7] clamp
            (0xd3b2_c002, 0x1802_0d04, |a, b, _| a + b),
            // v_pk_mul_f32 v[2:3], v[4:5], v[6:7] clamp
            (0xd3b1_c002, 0x1802_0d04, |a, b, _| a * b),
            // v_pk_fma_f32 v[2:3], v[4:5], v[6:7], v[8:9] clamp
            (0xd3b0_c002, 0x1c22_0d04, |a, b, c| a.mul_add(b, c)),
        ];
        let unit = |x: f32| if x.is_nan() { 0.0 } else { x.clamp(0.0, 1.0) };
        for (w0, w1, op) in cases {
            for clamp in [true, false] {
                let w0 = if clamp { w0 } else { w0 & !0x8000 };
                let w = run_packed(crate::Isa::Gfx942, &[w0, w1], &regs).unwrap();
                for l in 0..4 {
                    let v = |r: [u32; 4]| f32::from_bits(r[l]);
                    for (row, want) in [(2, op(v(a), v(b), v(c))), (3, op(v(a1), v(b1), v(c1)))] {
                        let want = if clamp { unit(want) } else { want };
                        let got = f32::from_bits(w.v[row * 64 + l]);
                        assert!(
                            got.to_bits() == want.to_bits() || got.is_nan() && want.is_nan(),
                            "{w0:#x} clamp {clamp} lane {l} row {row}: {got} != {want}"
                        );
                    }
                }
            }
        }
        // v_pk_add_u16 v2, v4, v6 clamp; v_pk_add_f16 v2, v4, v6 clamp
        let (a, b) = ([pair(0xfff0, 1)], [pair(0x20, 2)]);
        let w = run_packed(
            crate::Isa::Gfx942,
            &[0xd38a_c002, 0x1802_0d04],
            &[(4, &a), (6, &b)],
        )
        .unwrap();
        assert_eq!(w.v[128], pair(0xffff, 3));
        let (a, b) = ([pair(h(0.75), h(0.25))], [pair(h(0.5), h(0.5))]);
        let w = run_packed(
            crate::Isa::Gfx942,
            &[0xd38f_c002, 0x1802_0d04],
            &[(4, &a), (6, &b)],
        )
        .unwrap();
        assert_eq!(w.v[128], pair(h(1.0), h(0.75)));
    }

    /// On gfx1100 and gfx1200 `v_add_f16_e32 v1.h, v2.h, v3.h` (llvm-mc-22 -mattr=+real-true16:
    /// VGPR fields 129, 130, 131) adds the high halves of v2 and v3 into the high half of v1,
    /// keeping v1's low half, and leaves v129 alone.
    #[test]
    fn true16_e32_high_halves_execute_on_gfx11_and_gfx12() {
        for isa in [crate::Isa::Gfx1100, crate::Isa::Gfx1200] {
            let (v1, v2, v3) = (
                [pair(h(9.0), h(5.0))],
                [pair(h(7.0), h(1.5))],
                [pair(h(8.0), h(0.25))],
            );
            let w = run_packed(isa, &[0x6503_0782], &[(1, &v1), (2, &v2), (3, &v3)]).unwrap();
            assert_eq!(w.v[64], pair(h(9.0), h(1.75)), "{isa:?}");
            assert_eq!(w.v[129 * 64], 0, "{isa:?}: v129 untouched");
        }
    }
}
