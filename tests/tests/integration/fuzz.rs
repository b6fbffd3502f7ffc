//! Fuzz targets for every parser that faces a client, a file or a guest (docs/RELIABILITY.md):
//! the remote-protocol server, IP discovery, firmware files, ELF code objects, the mock's
//! PM4 and SDMA packet engines and AQL packets, and the emulator's decoders.
//!
//! Harness: proptest drives byte mutations (bit flips, byte and dword overwrites with
//! boundary values, insertions, deletions, splices) of a committed corpus of valid inputs
//! (`tests/fuzz/corpus/TARGET/`), so every case starts from something the parser accepts and
//! goes wrong in a few places. A failure is shrunk to the fewest mutations and its seed kept
//! by proptest. Each target runs a fixed number of cases sized for CI (a few seconds in
//! all); `AM_FUZZ_SCALE=N` runs N times as many (the long run of docs/RELIABILITY.md).
//!
//! Rewrite the corpus with `AM_FUZZ_WRITE_CORPUS=1 cargo test -p am-tests --test integration
//! fuzz::write_corpus -- --ignored`.
//!
//! Mock device indices 450..459 belong to this file.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use am_driver::PciDevice;
use am_driver::discovery::DiscoveryTable;
use am_driver::pci::remote::protocol::{Command, RequestHeader, encode_probe_filter};
use am_driver::pci::remote::{ServeOptions, serve};
use am_tests::rig::Rig;
use am_tests::{pm4, sdma};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

// ---- the harness ----

/// One change to an input.
#[derive(Clone, Debug)]
enum Mutation {
    FlipBit(usize, u8),
    SetByte(usize, u8),
    /// A dword at a 4-byte boundary set to a value parsers get wrong: 0, all ones, a sign
    /// bit, a large size.
    SetDword(usize, u32),
    Insert(usize, Vec<u8>),
    Delete(usize, usize),
    /// Bytes copied from elsewhere in the input (tables that point at themselves).
    Splice(usize, usize, usize),
    Truncate(usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let at = any::<usize>();
    prop_oneof![
        3 => (at, 0u8..8).prop_map(|(i, b)| Mutation::FlipBit(i, b)),
        2 => (at, any::<u8>()).prop_map(|(i, v)| Mutation::SetByte(i, v)),
        3 => (at, prop_oneof![
            Just(0u32), Just(u32::MAX), Just(0x8000_0000), Just(0x7fff_ffff),
            Just(0xffff_ffc0), Just(0x1000), Just(0x10_0000), any::<u32>()
        ]).prop_map(|(i, v)| Mutation::SetDword(i, v)),
        1 => (at, proptest::collection::vec(any::<u8>(), 1..64)).prop_map(|(i, b)| Mutation::Insert(i, b)),
        1 => (at, 1usize..256).prop_map(|(i, n)| Mutation::Delete(i, n)),
        1 => (at, at, 1usize..128).prop_map(|(f, t, n)| Mutation::Splice(f, t, n)),
        1 => at.prop_map(Mutation::Truncate),
    ]
}

fn apply(input: &[u8], mutations: &[Mutation]) -> Vec<u8> {
    let mut b = input.to_vec();
    for m in mutations {
        let len = b.len().max(1);
        match m {
            Mutation::FlipBit(i, bit) => {
                if let Some(x) = b.get_mut(i % len) {
                    *x ^= 1 << bit;
                }
            }
            Mutation::SetByte(i, v) => {
                if let Some(x) = b.get_mut(i % len) {
                    *x = *v;
                }
            }
            Mutation::SetDword(i, v) => {
                let at = (i % len) & !3;
                if at + 4 <= b.len() {
                    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
                }
            }
            Mutation::Insert(i, bytes) => {
                let at = i % (b.len() + 1);
                b.splice(at..at, bytes.iter().copied());
            }
            Mutation::Delete(i, n) => {
                let at = i % len;
                let end = (at + n).min(b.len());
                if at < end {
                    b.drain(at..end);
                }
            }
            Mutation::Splice(from, to, n) => {
                let (f, t) = (from % len, to % len);
                let n = (*n)
                    .min(b.len().saturating_sub(f))
                    .min(b.len().saturating_sub(t));
                let chunk = b[f..f + n].to_vec();
                b[t..t + n].copy_from_slice(&chunk);
            }
            Mutation::Truncate(i) => b.truncate(i % len),
        }
    }
    b
}

fn corpus_dir(target: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target)
}

fn corpus(target: &str) -> Vec<Vec<u8>> {
    let mut files: Vec<_> = std::fs::read_dir(corpus_dir(target))
        .unwrap_or_else(|e| panic!("corpus of {target}: {e}"))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let seeds: Vec<Vec<u8>> = files.iter().map(|p| std::fs::read(p).unwrap()).collect();
    assert!(!seeds.is_empty(), "the corpus of {target} is empty");
    seeds
}

/// The target's CI budget, times `AM_FUZZ_SCALE` (a long run: `AM_FUZZ_SCALE=50`).
fn cases(default: u32) -> u32 {
    let scale: u32 = std::env::var("AM_FUZZ_SCALE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    default.saturating_mul(scale)
}

/// Run `check` on `cases` mutated corpus entries of `target`; a panic in `check` is the
/// finding (shrunk to its fewest mutations). Prints what ran, for the long run's record.
fn fuzz(target: &str, default_cases: u32, check: impl FnMut(&[u8])) {
    // The runner takes `Fn`; the targets keep state (a booted device) between cases.
    let check = std::cell::RefCell::new(check);
    let seeds = corpus(target);
    let n = cases(default_cases);
    let mut runner = TestRunner::new(Config {
        cases: n,
        failure_persistence: None,
        ..Config::default()
    });
    let start = Instant::now();
    let strategy = (0..seeds.len(), proptest::collection::vec(mutation(), 0..8));
    let result = runner.run(&strategy, |(seed, mutations)| {
        (check.borrow_mut())(&apply(&seeds[seed], &mutations));
        Ok(())
    });
    eprintln!(
        "fuzz {target}: {n} cases from {} seeds in {:.1} s",
        seeds.len(),
        start.elapsed().as_secs_f64()
    );
    if let Err(e) = result {
        panic!("fuzz {target}: {e}");
    }
}

// ---- targets ----

#[test]
fn fuzz_ip_discovery() {
    fuzz("discovery", 3000, |bytes| {
        if let Ok(t) = DiscoveryTable::parse("fuzz", bytes) {
            assert!(t.num_dies <= 16, "{} dies", t.num_dies);
            assert!(t.ips.iter().all(|ip| ip.die < t.num_dies));
        }
    });
}

#[test]
fn fuzz_firmware_files() {
    fuzz("firmware", 2000, |bytes| {
        // Each kind its name implies, and the generic header: an error or an image.
        for name in [
            "psp_13_0_0_sos.bin",
            "smu_13_0_0.bin",
            "sdma_6_0_0.bin",
            "gc_11_0_0_mec.bin",
            "gc_11_0_0_rlc.bin",
            "gc_11_0_0_imu.bin",
            "psp_13_0_0_ta.bin",
            "other.bin",
        ] {
            let _ = am_firmware::parse::parse(name, bytes);
        }
    });
}

#[test]
fn fuzz_elf_code_objects() {
    fuzz("code_object", 1000, |bytes| {
        if let Ok(co) = am_emu::CodeObject::parse(bytes, "fuzz") {
            // What parses is usable: building a program from it fails cleanly or works.
            let _ = am_emu::Program::new(&co, am_emu::Isa::Gfx1100);
        }
    });
}

#[test]
fn fuzz_emulator_decoders() {
    fuzz("decoder", 300, |bytes| {
        let words: Vec<u32> = bytes
            .chunks(4)
            .map(|c| {
                let mut w = [0u8; 4];
                w[..c.len()].copy_from_slice(c);
                u32::from_le_bytes(w)
            })
            .collect();
        let mut at = 0;
        while at < words.len() {
            let rest = &words[at..];
            let _ = am_emu::rdna3::decode::decode(rest);
            for t in [
                am_emu::cdna3::decode::Target::Gfx942,
                am_emu::cdna3::decode::Target::Gfx950,
            ] {
                let _ = am_emu::cdna3::decode::decode(t, rest);
            }
            at += 1;
        }
    });
}

/// Panics on the server's connection threads (named `am-serve …`), which would go unseen.
static SERVER_PANICS: AtomicU32 = AtomicU32::new(0);

fn served_mock() -> SocketAddr {
    static ADDR: OnceLock<SocketAddr> = OnceLock::new();
    *ADDR.get_or_init(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if std::thread::current()
                .name()
                .is_some_and(|n| n.starts_with("am-serve"))
            {
                SERVER_PANICS.fetch_add(1, Ordering::SeqCst);
            }
            default(info);
        }));
        let gpu = am_mock::gpu("navi31", 450).unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let options = ServeOptions {
            // Mutated sizes must stay cheap: a few MiB per request and connection.
            max_payload: 4 << 20,
            max_sysmem_alloc: 4 << 20,
            max_sysmem_per_connection: 16 << 20,
            read_timeout: Duration::from_millis(100),
            max_connections: 64,
            ..ServeOptions::default()
        };
        let exported: Vec<Arc<dyn PciDevice>> = vec![gpu.open()];
        std::thread::spawn(move || serve(listener, exported, options));
        addr
    })
}

#[test]
fn fuzz_remote_protocol_server() {
    let addr = served_mock();
    fuzz("remote_session", 1000, |bytes| {
        let Ok(mut s) = TcpStream::connect(addr) else {
            return;
        };
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let _ = s.write_all(bytes);
        let _ = s.shutdown(Shutdown::Write);
        // Whatever comes back, until the server closes (it must, within its read timeout).
        let mut sink = Vec::new();
        let _ = s.read_to_end(&mut sink);
    });
    assert_eq!(
        SERVER_PANICS.load(Ordering::SeqCst),
        0,
        "a server thread panicked"
    );
    // The server still answers.
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(&RequestHeader::new(Command::Ping, 0, 0, [0; 3]).encode())
        .unwrap();
    let mut h = [0u8; 17];
    s.read_exact(&mut h).unwrap();
    assert_eq!(h[0], 0, "PING after the fuzzing");
}

/// Mutated packet streams on a queue of a booted mock: each ends, halts its queue with a
/// reason, or is stopped by recovery; never a panic of the mock. A queue that did not end
/// cleanly costs a fresh device, so the next case starts clean.
fn fuzz_queue(target: &str, profile: &str, sdma_queue: bool, default_cases: u32) {
    // A booted device, its queue, the marker buffer and the last marker value.
    let mut state: Option<(Rig, am_tests::rig::Queue, am_tests::rig::Buf, u32)> = None;
    fuzz(target, default_cases, |bytes| {
        let (r, q, done, marker) = state.get_or_insert_with(|| {
            let mut r = Rig::new(profile);
            let q = if sdma_queue {
                r.sdma_queue(0, 0x4000)
            } else {
                r.compute_queue(0, false, 0x4000)
            };
            let done = r.vram(0x1000);
            (r, q, done, 0)
        });
        *marker += 1;
        let mut dwords: Vec<u32> = bytes
            .chunks(4)
            .map(|c| {
                let mut w = [0u8; 4];
                w[..c.len()].copy_from_slice(c);
                u32::from_le_bytes(w)
            })
            .take(0x800)
            .collect();
        if sdma_queue {
            dwords.extend(sdma::fence(done.va, *marker));
        } else {
            dwords.extend(pm4::release_mem(done.va, u64::from(*marker), 1, 0, 0));
        }
        q.submit(r, &dwords);
        let deadline = Instant::now() + Duration::from_millis(300);
        let clean = loop {
            if r.u32_at(done, 0) == *marker {
                break true;
            }
            if r.gpu.queues().iter().any(|q| q.1.halted.is_some()) || Instant::now() > deadline {
                break false;
            }
            std::thread::sleep(Duration::from_micros(200));
        };
        if !clean {
            state = None;
        }
    });
}

#[test]
fn fuzz_mock_pm4() {
    fuzz_queue("pm4", "navi31", false, 24);
}

#[test]
fn fuzz_mock_sdma() {
    fuzz_queue("sdma", "navi31", true, 24);
}

// ---- the corpus ----

fn session() -> Vec<u8> {
    let mut s = Vec::new();
    let mut req = |cmd: Command, bar: u32, args: [u64; 3], payload: &[u8]| {
        s.extend(RequestHeader::new(cmd, 0, bar, args).encode());
        s.extend(payload);
    };
    let filter = encode_probe_filter(&[(0xffff, 0x744c)]);
    req(Command::Probe, 0, [0, filter.len() as u64, 0x1002], &filter);
    req(Command::MapBar, 5, [0; 3], &[]);
    req(Command::CfgRead, 0, [0, 4, 0], &[]);
    req(Command::CfgWrite, 0, [4, 2, 6], &[]);
    req(Command::MmioRead, 5, [0xde3 * 4, 4, 0], &[]);
    req(
        Command::MmioWrite,
        0,
        [0x1000, 8, 0],
        &[1, 2, 3, 4, 5, 6, 7, 8],
    );
    req(Command::MmioRead, 0, [0x1000, 8, 0], &[]);
    req(Command::MapSysmem, 0, [0x2000, 0, 0], &[]);
    req(Command::SysmemWrite, 0, [8, 4, 0], &[9, 9, 9, 9]);
    req(Command::SysmemRead, 0, [8, 4, 0], &[]);
    req(Command::DmaRead, 0, [0x1000, 16, 0], &[]);
    req(Command::Ping, 0, [0; 3], &[]);
    s
}

fn write(target: &str, name: &str, bytes: &[u8]) {
    let dir = corpus_dir(target);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(name), bytes).unwrap();
}

#[test]
#[ignore = "writes the committed corpus"]
fn write_corpus() {
    if std::env::var_os("AM_FUZZ_WRITE_CORPUS").is_none() {
        return;
    }
    for p in ["navi31", "mi300x", "mi350x-vf"] {
        let profile = am_mock::profile::Profile::by_name(p).unwrap();
        write(
            "discovery",
            &format!("{p}.bin"),
            &am_mock::discovery::build(&profile).unwrap(),
        );
    }
    let dir = std::env::temp_dir().join(format!("am-fuzz-fw-{}", std::process::id()));
    let files = am_firmware::synth::write_set(&dir, &am_firmware::IpVersions::NAVI31).unwrap();
    for f in files {
        let bytes = std::fs::read(&f).unwrap();
        // Small files keep the corpus light; every header kind is among them.
        if bytes.len() <= 64 << 10 {
            write("firmware", f.file_name().unwrap().to_str().unwrap(), &bytes);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    let co = am_tests::runtime::code_object(am_isa::GfxTarget::Gfx1100);
    write("code_object", "kernels_gfx1100.co", co);
    let parsed = am_emu::CodeObject::parse(co, "corpus").unwrap();
    write("decoder", "gfx1100_text.bin", &parsed.text);
    let co942 = am_tests::runtime::code_object(am_isa::GfxTarget::Gfx942);
    let parsed = am_emu::CodeObject::parse(co942, "corpus").unwrap();
    write("decoder", "gfx942_text.bin", &parsed.text);
    write("remote_session", "boot_like.bin", &session());
    let mut p = Vec::new();
    p.extend(pm4::nop(3));
    p.extend(pm4::write_mem(0x10_0000, &[1, 2, 3]));
    p.extend(pm4::wait_mem(0x10_0000, 1, 0xffff_ffff, 3));
    p.extend(pm4::acquire_mem(false));
    p.extend(pm4::dispatch([1, 1, 1], true));
    write("pm4", "stream.bin", &words(&p));
    let mut s = Vec::new();
    s.extend(sdma::nop(2));
    s.extend(sdma::copy(0x10_0000, 0x10_1000, 0x100));
    s.extend(sdma::fill(0x10_2000, 0xdead_beef, 0x40));
    s.extend(sdma::write(0x10_3000, &[1, 2]));
    s.extend(sdma::poll_mem(0x10_0000, 1, 0xffff_ffff, 3));
    write("sdma", "stream.bin", &words(&s));
}

fn words(dw: &[u32]) -> Vec<u8> {
    dw.iter().flat_map(|d| d.to_le_bytes()).collect()
}
