//! Disassembles the compiled test kernels with `llvm-objdump-22` and checks that our decoder
//! agrees instruction by instruction: same addresses, same lengths, same text.

use crate::common;
use common::*;
use std::process::Command;

/// Mnemonics whose operand LLVM prints symbolically (see `tests/integration/vectors.rs`).
const SYMBOLIC: &[&str] = &[
    "s_getreg_b32",
    "s_setreg_b32",
    "s_setreg_imm32_b32",
    "s_sendmsg",
    "s_sendmsghalt",
    "s_sendmsg_rtn_b32",
    "s_sendmsg_rtn_b64",
    "s_waitcnt_depctr",
    "ds_swizzle_b32",
];

/// CDNA mnemonics whose operand LLVM prints symbolically (see `tests/integration/vectors_cdna.rs`).
const CDNA_SYMBOLIC: &[&str] = &["s_set_gpr_idx_on", "s_set_gpr_idx_mode"];

/// gfx12 mnemonics whose operand LLVM prints symbolically when it can (see
/// `tests/integration/vectors.rs`).
const GFX12_SYMBOLIC: &[&str] = &["s_wait_alu"];

fn objdump_agrees(hsaco: &std::path::Path, bytes: &[u8]) -> usize {
    objdump_agrees_for(am_emu::Isa::Gfx1100, hsaco, bytes)
}

fn objdump_agrees_for(isa: am_emu::Isa, hsaco: &std::path::Path, bytes: &[u8]) -> usize {
    let out = Command::new("llvm-objdump-22")
        .arg("-d")
        .arg(format!("--mcpu={}", isa.name()))
        .arg(hsaco)
        .output()
        .unwrap_or_else(|e| panic!("cannot run llvm-objdump-22 ({e}): run scripts/setup"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let co = am_emu::CodeObject::parse(bytes, "kernels").unwrap();
    let prog = am_emu::Program::new(&co, isa).unwrap();
    let ours: std::collections::HashMap<u64, String> = prog.disassemble().into_iter().collect();
    let mut n = 0;
    let mut bad = vec![];
    for line in text.lines() {
        // "\tv_mov_b32_e32 v1, 0      // 000000005008: 7E020280"
        let Some((asm, rest)) = line.split_once("//") else {
            continue;
        };
        let Some((addr, _)) = rest.trim().split_once(':') else {
            continue;
        };
        let Ok(addr) = u64::from_str_radix(addr.trim(), 16) else {
            continue;
        };
        let asm = asm.trim();
        n += 1;
        let Some(mine) = ours.get(&addr) else {
            bad.push(format!("{addr:#x}: {asm}: we have no instruction here"));
            continue;
        };
        let mnemonic = asm.split_whitespace().next().unwrap_or("");
        let same = if SYMBOLIC.contains(&mnemonic)
            || CDNA_SYMBOLIC.contains(&mnemonic)
            || GFX12_SYMBOLIC.contains(&mnemonic)
        {
            mine.split_whitespace().next() == Some(mnemonic)
        } else {
            mine.replace(".l", "") == asm.replace(".l", "")
        };
        if !same {
            bad.push(format!("{addr:#x}: llvm: {asm}\n          ours: {mine}"));
        }
    }
    for b in bad.iter().take(40) {
        eprintln!("{b}");
    }
    assert!(
        bad.is_empty(),
        "{} of {n} instructions differ from llvm-objdump",
        bad.len()
    );
    n
}

#[test]
fn decoder_agrees_with_llvm_objdump_on_compiled_kernels() {
    let (path, bytes) = compile_cl(KERNELS, &[]);
    let n = objdump_agrees(&path, &bytes);
    assert!(n > 500, "only {n} instructions compared");
}

#[test]
fn decoder_agrees_with_llvm_objdump_on_wave64_kernels() {
    let (path, bytes) = compile_cl(KERNELS, &["-mwavefrontsize64"]);
    objdump_agrees(&path, &bytes);
}

#[test]
fn decoder_agrees_with_llvm_objdump_on_gfx1200_and_gfx1201_kernels() {
    for isa in [am_emu::Isa::Gfx1200, am_emu::Isa::Gfx1201] {
        for extra in [&[][..], &["-mwavefrontsize64"][..]] {
            let (path, bytes) = compile_cl_for(isa, KERNELS, extra);
            let n = objdump_agrees_for(isa, &path, &bytes);
            assert!(n > 500, "only {n} {isa:?} {extra:?} instructions compared");
        }
    }
}

#[test]
fn decoder_agrees_with_llvm_objdump_on_gfx942_and_gfx950_kernels() {
    for isa in [am_emu::Isa::Gfx942, am_emu::Isa::Gfx950] {
        let (path, bytes) = compile_cl_for(isa, KERNELS, &[]);
        let n = objdump_agrees_for(isa, &path, &bytes);
        assert!(n > 500, "only {n} {isa:?} instructions compared");
    }
}
