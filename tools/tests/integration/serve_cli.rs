//! `am serve` as a process: what a flood of bad requests does to its log.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};

#[test]
fn a_flood_of_refused_requests_logs_a_bounded_colourless_stderr_with_a_suppressed_count() {
    let log = std::env::temp_dir().join(format!("am-serve-flood-{}.log", std::process::id()));
    let mut child = Command::new(env!("CARGO_BIN_EXE_am"))
        .args(["serve", "--listen", "127.0.0.1:0", "mock:navi31:11"])
        .env_remove("AM_LOG")
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let line = lines.next().unwrap().unwrap();
    let addr = line
        .strip_prefix("am serve: listening on ")
        .unwrap()
        .to_string();
    std::thread::spawn(move || lines.for_each(drop));

    // MMIO_READ of BAR5 dword 0x3ffff, in no IP segment: each one a violation and a refusal.
    let mut s = TcpStream::connect(&addr).unwrap();
    let mut req = vec![6u8];
    req.extend(0u32.to_le_bytes());
    req.extend(5u32.to_le_bytes());
    req.extend((0x3ffffu64 * 4).to_le_bytes());
    req.extend(4u64.to_le_bytes());
    req.extend(0u64.to_le_bytes());
    let mut refused = |i: usize| {
        s.write_all(&req).unwrap();
        let mut h = [0u8; 17];
        s.read_exact(&mut h).unwrap();
        assert_ne!(h[0], 0, "request {i} must be refused");
        let len = u64::from_le_bytes(h[1..9].try_into().unwrap());
        let mut msg = vec![0u8; len as usize];
        s.read_exact(&mut msg).unwrap();
    };
    const N: usize = 5000;
    for i in 0..N {
        refused(i);
    }
    // One more in the next second's window: its line carries the count of the suppressed.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    refused(N);
    drop(s);
    let _ = child.kill();
    let _ = child.wait();
    let text = std::fs::read_to_string(&log).unwrap();
    let _ = std::fs::remove_file(&log);
    assert!(
        !text.contains('\x1b'),
        "no colour codes when stderr is a file: {:?}",
        &text[..text.len().min(300)]
    );
    let warnings = text.lines().filter(|l| l.contains("WARN")).count();
    assert!(
        warnings < N / 10,
        "{N} refusals logged {warnings} warning lines ({} bytes)",
        text.len()
    );
    assert!(
        text.contains("similar lines suppressed before this one)"),
        "a line that follows suppressed ones says how many: {text}"
    );
}
