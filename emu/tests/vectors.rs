//! Decodes every LLVM-assembled vector in `tests/vectors/gfx1100.txt` and checks that our
//! disassembly matches LLVM's text.

#![allow(clippy::unwrap_used)] // unwrap is fine in tests

use am_emu::rdna3::decode;

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

/// LLVM prints 16-bit operands of some VOP3 instructions in both the true16 (`v4.l`) and the
/// fake16 (`v4`) spelling, which assemble to the same bits; compare without the `.l`.
fn norm(t: &str) -> String {
    t.replace(".l", "")
}

/// Instructions whose immediate LLVM prints symbolically (`hwreg(HW_REG_…)`, `sendmsg(MSG_…)`,
/// `depctr_…`, `swizzle(…)`); our disassembler prints the number.
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

#[test]
fn llvm_vectors_decode_to_llvm_text() {
    let src = include_str!("vectors/gfx1100.txt");
    let mut bad = vec![];
    let mut n = 0;
    let mut symbolic = 0;
    for line in src.lines().filter(|l| !l.starts_with('#')) {
        let (text, words) = parse(line).unwrap();
        n += 1;
        match decode(&words) {
            Ok(i) => {
                let ours = i.to_string();
                if i.len as usize != words.len() {
                    bad.push(format!("{text}: length {} != {}", i.len, words.len()));
                } else if let Some(m) = SYMBOLIC.iter().find(|m| text.starts_with(&format!("{m} ")))
                {
                    // Symbolic operands: check the mnemonic and the raw 16-bit field.
                    symbolic += 1;
                    let mask = if m.starts_with("s_sendmsg_rtn") {
                        0xff
                    } else {
                        0xffff
                    };
                    if !ours.starts_with(&format!("{m} ")) || i.imm as u32 != words[0] & mask {
                        bad.push(format!("{text}\n   ours: {ours} (imm {:#x})", i.imm));
                    }
                } else if norm(&ours) != norm(&text) {
                    bad.push(format!("{text}\n   ours: {ours}"));
                }
            }
            Err(e) => bad.push(format!("{text}: {e}")),
        }
    }
    for b in bad.iter().take(2000) {
        eprintln!("{b}");
    }
    assert!(
        bad.is_empty(),
        "{} of {n} vectors disagree with LLVM",
        bad.len()
    );
    assert!(n > 5000, "only {n} vectors read");
    eprintln!(
        "{n} vectors agree with LLVM ({symbolic} with symbolic operands compared by raw field)"
    );
}

/// Every opcode the decoder knows (the generated tables) has at least one LLVM vector.
#[test]
fn every_known_opcode_has_a_vector() {
    use am_emu::rdna3::decode::{Encoding, classify};
    use am_emu::rdna3::opcodes as o;
    use std::collections::HashSet;
    let mut seen: HashSet<(String, u16)> = HashSet::new();
    for line in include_str!("vectors/gfx1100.txt")
        .lines()
        .filter(|l| !l.starts_with('#'))
    {
        let (_, words) = parse(line).unwrap();
        let i = decode(&words).unwrap();
        let key = match i.enc {
            Encoding::Vop1
            | Encoding::Vop2
            | Encoding::Vopc
            | Encoding::Vop3
            | Encoding::Vop3sd => "valu".to_string(),
            Encoding::Flat | Encoding::Global | Encoding::Scratch => "flat".to_string(),
            e => format!("{e:?}").to_lowercase(),
        };
        if i.enc == Encoding::Vopd {
            seen.insert(("valu".into(), i.op));
            seen.insert(("valu".into(), i.y.op));
        }
        seen.insert((key, i.op));
        let _ = classify(words[0]);
    }
    let tables: [(&str, &[(u16, &str)]); 12] = [
        ("sop1", o::sop1::NAMES),
        ("sop2", o::sop2::NAMES),
        ("sopk", o::sopk::NAMES),
        ("sopc", o::sopc::NAMES),
        ("sopp", o::sopp::NAMES),
        ("smem", o::smem::NAMES),
        ("valu", o::valu::NAMES),
        ("vop3p", o::vop3p::NAMES),
        ("ds", o::ds::NAMES),
        ("flat", o::flat::NAMES),
        ("mubuf", o::mubuf::NAMES),
        ("mtbuf", o::mtbuf::NAMES),
    ];
    let mut missing = vec![];
    let mut total = 0;
    for (key, names) in tables {
        for (op, name) in names {
            total += 1;
            if !seen.contains(&(key.to_string(), *op)) {
                missing.push(format!("{key} {op:#x} {name}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "{} of {total} opcodes have no vector: {missing:?}",
        missing.len()
    );
}
