//! Decodes every LLVM-assembled vector in `tests/vectors/gfx942.txt` and `gfx950.txt` and
//! checks that our disassembly matches LLVM's text, and that every opcode of the generated
//! tables has a vector.

use am_emu::cdna3::{Target, decode};

fn parse(line: &str) -> Option<(String, Vec<u32>)> {
    let (text, enc) = line.split_once(" ; encoding: [")?;
    let bytes: Vec<u8> = enc
        .trim_end_matches(']')
        .split(',')
        .map(|b| u8::from_str_radix(b.trim_start_matches("0x"), 16).unwrap())
        .collect();
    let words = bytes
        .chunks(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    Some((text.trim().to_string(), words))
}

/// Mnemonics whose immediate LLVM prints symbolically (`hwreg(…)`, `sendmsg(…)`,
/// `swizzle(…)`, `gpr_idx(…)`): compared by mnemonic and raw 16-bit field.
const SYMBOLIC: &[&str] = &[
    "s_getreg_b32",
    "s_setreg_b32",
    "s_setreg_imm32_b32",
    "s_sendmsg",
    "s_sendmsghalt",
    "ds_swizzle_b32",
    "s_set_gpr_idx_on",
    "s_set_gpr_idx_mode",
];

fn check(target: Target, src: &str) -> usize {
    let mut bad = vec![];
    let mut n = 0;
    for line in src.lines().filter(|l| !l.starts_with('#')) {
        let (text, words) = parse(line).unwrap();
        n += 1;
        match decode(target, &words) {
            Ok(i) => {
                let ours = i.to_string();
                if i.len as usize != words.len() {
                    bad.push(format!("{text}: length {} != {}", i.len, words.len()));
                } else if let Some(m) = SYMBOLIC.iter().find(|m| text.starts_with(&format!("{m} ")))
                {
                    let raw = if m.starts_with("ds_") {
                        (words[0] & 0xffff) as i32
                    } else if *m == "s_set_gpr_idx_on" {
                        (words[0] >> 8 & 0xff) as i32
                    } else {
                        (words[0] & 0xffff) as i32
                    };
                    let field = if m.starts_with("ds_") {
                        i.imm | (i.imm2 as i32) << 8
                    } else if *m == "s_set_gpr_idx_on" {
                        i.src[1] as i32
                    } else {
                        i.imm
                    };
                    if !ours.starts_with(&format!("{m} ")) || field != raw {
                        bad.push(format!("{text}\n   ours: {ours} (field {field:#x})"));
                    }
                } else if ours != text {
                    bad.push(format!("{text}\n   ours: {ours}"));
                }
            }
            Err(e) => bad.push(format!("{text}: {e}")),
        }
    }
    for b in bad.iter().take(3000) {
        eprintln!("{b}");
    }
    assert!(
        bad.is_empty(),
        "{} of {n} {target:?} vectors disagree with LLVM",
        bad.len()
    );
    n
}

#[test]
fn gfx942_llvm_vectors_decode_to_llvm_text() {
    let n = check(Target::Gfx942, include_str!("../vectors/gfx942.txt"));
    assert!(n > 7000, "only {n} vectors read");
}

#[test]
fn gfx950_llvm_vectors_decode_to_llvm_text() {
    let n = check(Target::Gfx950, include_str!("../vectors/gfx950.txt"));
    assert!(n > 7500, "only {n} vectors read");
}

/// Every opcode of the generated tables (gfx942, and what gfx950 adds or changes) has at least
/// one LLVM vector for its target.
#[test]
fn every_known_cdna_opcode_has_a_vector() {
    use am_emu::cdna3::opcodes::{GFX950_CHANGED, gfx942};
    use std::collections::HashSet;
    let seen = |target: Target, src: &str| -> HashSet<(&'static str, u16)> {
        src.lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| {
                let i = decode(target, &parse(l).unwrap().1).unwrap();
                (i.enc.key(), i.op)
            })
            .collect()
    };
    let s942 = seen(Target::Gfx942, include_str!("../vectors/gfx942.txt"));
    let s950 = seen(Target::Gfx950, include_str!("../vectors/gfx950.txt"));
    type Table = &'static [(u16, &'static str, &'static str)];
    let tables: [(&str, Table); 17] = [
        ("sop1", gfx942::SOP1),
        ("sop2", gfx942::SOP2),
        ("sopk", gfx942::SOPK),
        ("sopc", gfx942::SOPC),
        ("sopp", gfx942::SOPP),
        ("smem", gfx942::SMEM),
        ("vop1", gfx942::VOP1),
        ("vop2", gfx942::VOP2),
        ("vopc", gfx942::VOPC),
        ("vop3", gfx942::VOP3),
        ("vop3p", gfx942::VOP3P),
        ("ds", gfx942::DS),
        ("flat", gfx942::FLAT),
        ("global", gfx942::GLOBAL),
        ("scratch", gfx942::SCRATCH),
        ("mubuf", gfx942::MUBUF),
        ("mtbuf", gfx942::MTBUF),
    ];
    let mut missing = vec![];
    let mut total = 0;
    for (key, t) in tables {
        for (op, name, _) in t {
            total += 1;
            if !s942.contains(&(key, *op)) {
                missing.push(format!("gfx942 {key} {op:#x} {name}"));
            }
        }
    }
    for (key, op, name, _) in GFX950_CHANGED {
        total += 1;
        if !s950.contains(&(*key, *op)) {
            missing.push(format!("gfx950 {key} {op:#x} {name}"));
        }
    }
    assert!(
        missing.is_empty(),
        "{} of {total} opcodes have no vector: {missing:?}",
        missing.len()
    );
    assert!(total > 1500, "only {total} opcodes in the tables");
}
