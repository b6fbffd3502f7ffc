//! Bad input never panics: random words through the decoder and the interpreter, faults and
//! invalid instructions reported with their PC, scratch bounds per lane.

use crate::common;
use am_emu::cdna3::Target;
use am_emu::rdna3::decode::{self, Gen, decode};
use am_emu::{CodeObject, Error, HostMemory, Isa, Launch, Program};
use common::*;
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: 20000, ..ProptestConfig::default() })]

    #[test]
    fn decoding_and_lowering_random_cdna_words_never_panics(w0 in any::<u32>(), w1 in any::<u32>(), w2 in any::<u32>()) {
        for t in [Target::Gfx942, Target::Gfx950] {
            if let Ok(i) = am_emu::cdna3::decode(t, &[w0, w1, w2]) {
                prop_assert!((1..=3).contains(&i.len));
                let _ = i.to_string();
            }
            let _ = am_emu::cdna3::decode(t, &[w0]);
        }
        // Predecoding lowers what decodes; nothing may panic.
        let bytes: Vec<u8> = [w0, w1, w2].iter().flat_map(|w| w.to_le_bytes()).collect();
        for isa in [Isa::Gfx942, Isa::Gfx950] {
            let p = Program::from_bytes(&bytes, 0x1000, isa).unwrap();
            let _ = p.disassemble();
        }
    }

    #[test]
    fn decoding_random_words_never_panics(w0 in any::<u32>(), w1 in any::<u32>(), w2 in any::<u32>()) {
        if let Ok(i) = decode(&[w0, w1, w2]) {
            prop_assert!((1..=3).contains(&i.len));
            let _ = i.to_string();
        }
        // Truncated input is an error, not a panic.
        let _ = decode(&[w0]);
    }

    #[test]
    fn decoding_and_lowering_random_gfx12_words_never_panics(w0 in any::<u32>(), w1 in any::<u32>(), w2 in any::<u32>()) {
        if let Ok(i) = decode::decode_in(Gen::Gfx12, &[w0, w1, w2]) {
            prop_assert!((1..=3).contains(&i.len));
            let _ = i.to_string();
        }
        let _ = decode::decode_in(Gen::Gfx12, &[w0]);
        let bytes: Vec<u8> = [w0, w1, w2].iter().flat_map(|w| w.to_le_bytes()).collect();
        let p = Program::from_bytes(&bytes, 0x1000, Isa::Gfx1200).unwrap();
        let _ = p.disassemble();
    }
}

/// The test kernels with their first instructions replaced by random words: executing them
/// must end in `Ok` or an error, never a panic or a hang (the instruction limit stops loops).
#[test]
fn executing_random_code_never_panics() {
    random_code_runs(Isa::Gfx1100, 3000);
}

/// The same on gfx942 and gfx950 code (wave64, the CDNA decoder and lowering, MFMA, SDWA,
/// DPP, AccVGPRs).
#[test]
fn executing_random_cdna_code_never_panics() {
    random_code_runs(Isa::Gfx942, 1500);
    random_code_runs(Isa::Gfx950, 1500);
}

/// The same on gfx1200 code (the gfx12 encodings, lowering and gfx12-only operations).
#[test]
fn executing_random_gfx12_code_never_panics() {
    random_code_runs(Isa::Gfx1200, 1500);
}

/// `AM_EMU_FUZZ_SCALE=N` runs N times as many random kernels (a longer local fuzz run).
fn random_code_runs(isa: Isa, kernels_run: usize) {
    let scale: usize = std::env::var("AM_EMU_FUZZ_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let kernels_run = kernels_run * scale.max(1);
    let decodes = |w: &[u32; 3]| -> Option<usize> {
        match am_emu::cdna3::target(isa) {
            None if isa.is_gfx12() => decode::decode_in(Gen::Gfx12, w)
                .ok()
                .map(|i| i.len as usize),
            None => decode(w).ok().map(|i| i.len as usize),
            Some(t) => am_emu::cdna3::decode(t, w).ok().map(|i| i.len as usize),
        }
    };
    let (co, _) = kernels_for(isa);
    let k = co.kernel("vadd").unwrap().clone();
    let entry_off = (k.entry - co.text_address) as usize;
    let mut rng = Rng(99);
    let mut outcomes = std::collections::BTreeMap::new();
    for _ in 0..kernels_run {
        let mut co2 = co.clone();
        // Random but decodable instructions, so the semantics (not just the decoder) see
        // random operands.
        let mut words = vec![];
        while words.len() < 24 {
            let w = [rng.next() as u32, rng.next() as u32, rng.next() as u32];
            if let Some(len) = decodes(&w) {
                words.extend_from_slice(&w[..len]);
            }
        }
        for (k, w) in words.iter().take(24).enumerate() {
            co2.text[entry_off + 4 * k..entry_off + 4 * k + 4].copy_from_slice(&w.to_le_bytes());
        }
        let prog = Program::new(&co2, isa).unwrap();
        let mut mem = HostMemory::new();
        let kernarg = mem.alloc(256);
        let mut l = Launch::new([64, 1, 1], [64, 1, 1], kernarg);
        l.instruction_limit = Some(10_000);
        let r = am_emu::dispatch(&prog, &k, &l, &mut mem);
        let key = match r {
            Ok(_) => "ok".to_string(),
            Err(e) => format!("{e:?}")
                .split([' ', '{', '('])
                .next()
                .unwrap_or("")
                .to_string(),
        };
        *outcomes.entry(key).or_insert(0) += 1;
    }
    assert!(
        outcomes.len() > 3,
        "random {isa:?} code should end in several ways: {outcomes:?}"
    );
}

#[test]
fn unmapped_access_reports_address_and_pc() {
    let k = kernels();
    let mut mem = HostMemory::new();
    let n = 64u32;
    let a = mem.alloc(4 * 64);
    let bogus = 0xdead_0000_0000u64;
    let c = mem.alloc(4 * 64);
    let kd = k.0.kernel("vadd").unwrap();
    let args = Args::default().ptr(a).ptr(bogus).ptr(c).u32(n).0;
    let mut buf = args.clone();
    buf.resize(kd.descriptor.kernarg_size as usize, 0);
    let kernarg = mem.alloc_bytes(&buf);
    let err = am_emu::dispatch(
        &k.1,
        kd,
        &Launch::new([n, 1, 1], [64, 1, 1], kernarg),
        &mut mem,
    )
    .unwrap_err();
    match err {
        Error::MemoryFault {
            pc,
            text,
            lane,
            fault,
        } => {
            assert_eq!(fault.addr, bogus, "lane 0 reads b[0]");
            assert!(!fault.write);
            assert_eq!(lane, 0);
            assert!(text.starts_with("global_load"), "{text}");
            assert!(
                pc >= kd.entry && pc < kd.entry + 0x200,
                "pc {pc:#x} inside vadd at {:#x}",
                kd.entry
            );
        }
        e => panic!("expected a memory fault, got {e}"),
    }
}

#[test]
fn invalid_instruction_reports_pc_and_dwords() {
    let (co, _) = kernels();
    let mut co2: CodeObject = co.clone();
    let k = co2.kernel("saxpy").unwrap().clone();
    let off = (k.entry - co2.text_address) as usize;
    co2.text[off..off + 4].copy_from_slice(&0xffff_ffffu32.to_le_bytes());
    let prog = Program::new(&co2, Isa::Gfx1100).unwrap();
    let mut mem = HostMemory::new();
    let kernarg = mem.alloc(256);
    let err = am_emu::dispatch(
        &prog,
        &k,
        &Launch::new([64, 1, 1], [64, 1, 1], kernarg),
        &mut mem,
    )
    .unwrap_err();
    match err {
        Error::InvalidInstruction { pc, dwords, reason } => {
            assert_eq!(pc, k.entry);
            assert_eq!(dwords, vec![0xffff_ffff]);
            assert!(reason.contains("encoding"), "{reason}");
        }
        e => panic!("expected an invalid instruction, got {e}"),
    }
}

#[test]
fn private_arrays_live_in_per_lane_scratch() {
    for isa in [Isa::Gfx1100, Isa::Gfx942, Isa::Gfx950, Isa::Gfx1200] {
        private_arrays_on(isa);
    }
}

fn private_arrays_on(isa: Isa) {
    let k = kernels_for(isa);
    let kd = k.0.kernel("priv").unwrap();
    assert!(
        kd.descriptor.private_segment_fixed_size >= 256,
        "the array must be in scratch"
    );
    let n = 128usize;
    let idx: Vec<u32> = (0..n as u32).map(|i| i * 37 + 5).collect();
    let mut mem = HostMemory::new();
    let pi = upload(&mut mem, &idx);
    let po = mem.alloc(4 * n);
    launch(
        k,
        "priv",
        [n as u32, 1, 1],
        [64, 1, 1],
        Args::default().ptr(pi).ptr(po),
        &mut mem,
    );
    let out = download_u32(&mut mem, po, n);
    for i in 0..n {
        assert_eq!(out[i], i as u32 * 1000 + (idx[i] & 63), "{isa:?} lane {i}");
    }
}

#[test]
fn instruction_limit_stops_a_long_kernel() {
    let k = kernels();
    let kd = k.0.kernel("spin").unwrap();
    let mut mem = HostMemory::new();
    let out = mem.alloc(4 * 256);
    let mut a = Args::default().ptr(out).u32(1_000_000).0;
    a.resize(kd.descriptor.kernarg_size as usize, 0);
    let kernarg = mem.alloc_bytes(&a);
    let mut l = Launch::new([256, 1, 1], [256, 1, 1], kernarg);
    l.instruction_limit = Some(5000);
    let err = am_emu::dispatch(&k.1, kd, &l, &mut mem).unwrap_err();
    assert!(
        matches!(err, Error::Stopped { ref reason, .. } if reason.contains("limit")),
        "{err}"
    );
}
