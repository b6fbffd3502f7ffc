//! Decodes every LLVM-assembled vector in `tests/vectors/gfx1100.txt` and
//! `tests/vectors/gfx1200.txt` and checks that our disassembly matches LLVM's text; likewise
//! the WMMA vectors (`wmma_gfx1100.txt`, `wmma_gfx1201.txt`), whose decoded modifier fields
//! are also checked against the text, and the true16 e32 vectors (`true16_gfx1100.txt`,
//! `true16_gfx1200.txt`).

use am_emu::rdna3::decode::{self, Gen};

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

/// gfx12 adds `s_wait_alu`, whose operand LLVM prints as `depctr_*` fields when it can.
const SYMBOLIC_GFX12: &[&str] = &["s_wait_alu"];

#[test]
fn llvm_vectors_decode_to_llvm_text() {
    let n = vectors_agree(Gen::Gfx11, include_str!("../vectors/gfx1100.txt"));
    assert!(n > 5000, "only {n} vectors read");
}

#[test]
fn gfx12_llvm_vectors_decode_to_llvm_text() {
    let n = vectors_agree(Gen::Gfx12, include_str!("../vectors/gfx1200.txt"));
    assert!(n > 5000, "only {n} vectors read");
}

/// True16 VOP1, VOP2 and VOPC (`v_cmp`, `v_cmpx`) in the 32-bit encodings: a 16-bit operand
/// whose VGPR number has bit 7 set names the high half of `v(n - 128)` (`v1.h`), never `v129`;
/// vectors from `gen_true16.py` (llvm-mc-22 `-mattr=+real-true16`).
#[test]
fn true16_e32_vectors_decode_to_llvm_text() {
    let n = vectors_agree(Gen::Gfx11, include_str!("../vectors/true16_gfx1100.txt"));
    assert!(n > 400, "only {n} gfx1100 vectors read");
    let n = vectors_agree(Gen::Gfx12, include_str!("../vectors/true16_gfx1200.txt"));
    assert!(n > 400, "only {n} gfx1200 vectors read");
}

/// Every WMMA form with its modifiers decodes to LLVM's text, and into the fields the
/// interpreter reads: registers, `neg_lo` (`Inst::neg`), `neg_hi` (`Inst::abs`), `op_sel`
/// and `clamp`.
#[test]
fn wmma_vectors_decode_to_llvm_text_and_fields() {
    for (rdna, src) in [
        (Gen::Gfx11, include_str!("../vectors/wmma_gfx1100.txt")),
        (Gen::Gfx12, include_str!("../vectors/wmma_gfx1201.txt")),
    ] {
        let n = vectors_agree(rdna, src);
        assert!(n >= 60, "only {n} {rdna:?} WMMA vectors read");
        for line in src.lines().filter(|l| !l.starts_with('#')) {
            let (text, words) = parse(line).unwrap();
            let i = decode::decode_in(rdna, &words).unwrap();
            // "[1,0,1]" after `key` as bits 0, 1, 2.
            let list = |key: &str| -> u8 {
                text.split_once(key).map_or(0, |(_, rest)| {
                    let l = &rest[..rest.find(']').unwrap()];
                    l.split(',')
                        .enumerate()
                        .map(|(b, x)| u8::from(x == "1") << b)
                        .sum()
                })
            };
            assert_eq!(i.neg, list("neg_lo:["), "neg_lo of {text}");
            assert_eq!(i.abs, list("neg_hi:["), "neg_hi of {text}");
            assert_eq!(i.opsel & 7, list(" op_sel:["), "op_sel of {text}");
            assert_eq!(i.clamp, text.ends_with(" clamp"), "clamp of {text}");
            // The first register of each operand, or the inline constant's operand code.
            let ops: Vec<u16> = text
                .split_once(' ')
                .unwrap()
                .1
                .split(", ")
                .map(|o| {
                    let o = o.split(' ').next().unwrap();
                    if let Some(r) = o.strip_prefix('v') {
                        let first = r.trim_start_matches('[').split([':', ']']).next();
                        return 256 + first.unwrap().parse::<u16>().unwrap();
                    }
                    match o {
                        "1.0" => 242,
                        "-2.0" => 245,
                        "0.5" => 240,
                        _ => match o.parse::<i16>().unwrap() {
                            v if v >= 0 => 128 + v as u16,
                            v => (192 - v) as u16,
                        },
                    }
                })
                .collect();
            assert_eq!(
                ops,
                vec![i.dst, i.src[0], i.src[1], i.src[2]],
                "operands of {text}"
            );
        }
    }
}

/// Decodes and prints every vector of a file; returns how many agreed.
fn vectors_agree(rdna: Gen, src: &str) -> usize {
    let mut bad = vec![];
    let mut n = 0;
    let mut symbolic = 0;
    for line in src.lines().filter(|l| !l.starts_with('#')) {
        let (text, words) = parse(line).unwrap();
        n += 1;
        match decode::decode_in(rdna, &words) {
            Ok(i) => {
                let ours = i.to_string();
                if i.len as usize != words.len() {
                    bad.push(format!("{text}: length {} != {}", i.len, words.len()));
                } else if let Some(m) = SYMBOLIC
                    .iter()
                    .chain(if rdna == Gen::Gfx12 {
                        SYMBOLIC_GFX12
                    } else {
                        &[]
                    })
                    .find(|m| text.starts_with(&format!("{m} ")))
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
        "{} of {n} {rdna:?} vectors disagree with LLVM",
        bad.len()
    );
    eprintln!(
        "{n} {rdna:?} vectors agree with LLVM ({symbolic} with symbolic operands compared by raw field)"
    );
    n
}

/// The name tables of an RDNA generation's `opcodes` module, per encoding.
macro_rules! opcode_tables {
    ($o:ident) => {
        [
            ("sop1", $o::sop1::NAMES),
            ("sop2", $o::sop2::NAMES),
            ("sopk", $o::sopk::NAMES),
            ("sopc", $o::sopc::NAMES),
            ("sopp", $o::sopp::NAMES),
            ("smem", $o::smem::NAMES),
            ("valu", $o::valu::NAMES),
            ("vop3p", $o::vop3p::NAMES),
            ("ds", $o::ds::NAMES),
            ("flat", $o::flat::NAMES),
            ("mubuf", $o::mubuf::NAMES),
            ("mtbuf", $o::mtbuf::NAMES),
        ]
    };
}

/// Every opcode the decoder knows (the generated tables) has at least one LLVM vector.
#[test]
fn every_known_opcode_has_a_vector() {
    use am_emu::rdna3::opcodes as o;
    let tables = opcode_tables!(o);
    every_opcode_has_a_vector(Gen::Gfx11, include_str!("../vectors/gfx1100.txt"), tables);
}

/// The same for gfx12's tables and vectors.
#[test]
fn every_known_gfx12_opcode_has_a_vector() {
    use am_emu::rdna4::opcodes as o;
    let tables = opcode_tables!(o);
    every_opcode_has_a_vector(Gen::Gfx12, include_str!("../vectors/gfx1200.txt"), tables);
}

fn every_opcode_has_a_vector(rdna: Gen, src: &str, tables: [(&str, &[(u16, &str)]); 12]) {
    use am_emu::rdna3::decode::{Encoding, classify_in};
    use std::collections::HashSet;
    let mut seen: HashSet<(String, u16)> = HashSet::new();
    for line in src.lines().filter(|l| !l.starts_with('#')) {
        let (_, words) = parse(line).unwrap();
        let i = decode::decode_in(rdna, &words).unwrap();
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
        let _ = classify_in(rdna, words[0]);
    }
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
        "{} of {total} {rdna:?} opcodes have no vector: {missing:?}",
        missing.len()
    );
}

/// A true16 compare in the 32-bit encoding names a high half by bit 7 of the VGPR number,
/// for either source and with or without the VCC destination (`v_cmp`, `v_cmpx`); the
/// decoder folds it into `opsel` and reads the register below. Before, a `v_cmp`'s first
/// source kept `v(n + 128)`: `v_cmp_le_u16_e32 vcc_lo, v1.h, v1.l` (LLVM's code for a
/// `tril` mask) compared v129 on the mock Navi31. (gfx12's tables are LLVM's fake16 forms:
/// LLVM 22 emits no true16 code for it.)
#[test]
fn true16_compare_sources_name_high_halves() {
    use decode::VGPR0;
    // (encoding, sources, opsel bits of the sources), from llvm-mc-22 -mattr=+real-true16.
    let cases: [([u8; 4], [u16; 2], u8); 3] = [
        // v_cmp_le_u16_e32 vcc_lo, v1.h, v1.l
        ([0x81, 0x03, 0x76, 0x7c], [1, 1], 0b01),
        // v_cmpx_le_u16_e32 v1.h, v2.l
        ([0x81, 0x05, 0x76, 0x7d], [1, 2], 0b01),
        // v_cmp_lt_f16_e32 vcc_lo, v3.l, v2.h
        ([0x03, 0x05, 0x03, 0x7c], [3, 2], 0b10),
    ];
    for (bytes, src, opsel) in cases {
        let i = decode::decode_in(Gen::Gfx11, &[u32::from_le_bytes(bytes)]).unwrap();
        assert_eq!(
            [i.src[0], i.src[1]],
            [VGPR0 + src[0], VGPR0 + src[1]],
            "{bytes:x?}"
        );
        assert_eq!(i.opsel & 0b11, opsel, "{bytes:x?}");
    }
}
