//! Access traces end to end: `AM_TRACE=FILE` on an `am` command, `am serve --trace FILE`
//! recording a remote client, each file read back with `am trace show --json`; and a
//! recorded foreign run (tinygrad's) replayed against the mock with `am replay`.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::{self, Server};

/// `am trace show FILE --json`, parsed.
fn show(path: &Path) -> Value {
    common::am_json(&["trace", "show", path.to_str().unwrap()])
}

fn records(trace: &Value) -> &Vec<Value> {
    trace["records"].as_array().unwrap()
}

/// The records of a kind.
fn of_kind<'a>(trace: &'a Value, kind: &str) -> Vec<&'a Value> {
    records(trace)
        .iter()
        .filter(|r| r["kind"] == kind)
        .collect()
}

#[test]
fn am_trace_records_a_boot_with_its_phases_polls_and_mailbox_exchanges() {
    let d = common::dir("trace-init");
    let file = d.0.join("boot.amtrace");
    common::am_env(
        &["init", "mock:navi31"],
        &[("AM_TRACE", file.to_str().unwrap())],
    );
    let t = show(&file);
    assert_eq!(t["device"], "mock:navi31:0");
    assert_eq!(t["backend"], "mock");
    assert_eq!(t["profile"], "navi31");
    let command = t["command"].as_str().unwrap();
    assert!(command.ends_with("init mock:navi31"), "{command}");

    let recs = records(&t);
    for (i, r) in recs.iter().enumerate() {
        assert_eq!(r["index"], i, "records are numbered in order");
    }
    // The tools put the discovery table first, before the run, to name the registers.
    assert_eq!(recs[0]["kind"], "discovery");
    assert!(!recs[0]["ips"].as_array().unwrap().is_empty());

    let phases: Vec<&str> = of_kind(&t, "phase_end")
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    for wanted in ["soc", "gmc", "ih", "psp", "smu", "gfx", "sdma"] {
        assert!(phases.contains(&wanted), "phase {wanted} in {phases:?}");
    }
    let at = |name: &str| phases.iter().position(|p| *p == name).unwrap();
    assert!(at("gmc") < at("psp") && at("psp") < at("smu") && at("smu") < at("gfx"));

    // Every record of a phase carries that phase: the PSP's mailbox exchanges are in `psp`.
    let psp: Vec<&Value> = of_kind(&t, "mailbox")
        .into_iter()
        .filter(|r| r["block"] == "psp")
        .collect();
    assert!(!psp.is_empty(), "PSP ring commands are recorded");
    assert!(psp.iter().all(|r| r["phase"] == "psp"), "{psp:?}");
    assert!(
        of_kind(&t, "mailbox")
            .iter()
            .any(|r| r["block"] == "smu" && r["name"] == "EnableAllSmuFeatures"),
        "SMU messages are recorded by name"
    );
    // A poll mark names its register, and the read that follows it is of that register.
    let poll = of_kind(&t, "poll")[0];
    let next = &recs[poll["index"].as_u64().unwrap() as usize + 1];
    assert_eq!(next["kind"], "read");
    assert_eq!(next["register"], poll["register"]);
    assert!(poll["register"]["name"].is_string(), "{poll}");
}

/// Wait (a bounded while) until the server's trace, written out four times a second,
/// holds a record that `done` accepts; the trace then.
fn trace_when(path: &Path, done: impl Fn(&Value) -> bool) -> Value {
    let start = Instant::now();
    loop {
        if path.exists() {
            let t = show(path);
            if done(&t) {
                return t;
            }
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{} never held the client's accesses",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn am_serve_trace_records_what_a_remote_client_does() {
    let d = common::dir("trace-serve");
    let file = d.0.join("served.amtrace");
    let server = Server::start(&["--trace", file.to_str().unwrap(), "mock:navi31:41"], &[]);
    let spec = server.spec(0);
    common::am(&["reg", &spec, "GC:SCRATCH_REG7", "--write", "0x5ca1ab1e"]);
    common::am(&["reg", &spec, "GC:SCRATCH_REG7"]);

    let is_scratch = |r: &Value| r["register"]["name"] == "SCRATCH_REG7";
    let t = trace_when(&file, |t| {
        records(t)
            .iter()
            .any(|r| r["kind"] == "read" && is_scratch(r) && r["value"] == 0x5ca1_ab1e)
    });
    drop(server);
    assert_eq!(t["device"], "mock:navi31:41");
    assert_eq!(
        t["backend"], "mock",
        "the served device's backend, not the client's"
    );
    assert_eq!(t["profile"], "navi31");
    let command = t["command"].as_str().unwrap();
    assert!(
        command.contains("serve") && command.contains("--trace"),
        "{command}"
    );
    assert_eq!(records(&t)[0]["kind"], "discovery");

    let recs = records(&t);
    let write = recs
        .iter()
        .position(|r| r["kind"] == "write" && is_scratch(r))
        .expect("the client's write of SCRATCH_REG7");
    assert_eq!(recs[write]["value"], 0x5ca1_ab1e);
    assert_eq!(recs[write]["register"]["ip"], "GC 11.0.0");
    let read = recs
        .iter()
        .rposition(|r| r["kind"] == "read" && is_scratch(r))
        .unwrap();
    assert!(read > write, "the read back comes after the write");
}

const TINYGRAD: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/traces/tinygrad-navi31.amtrace.zst"
);

#[test]
fn tinygrads_recorded_run_replays_on_the_mock_to_the_end() {
    let t = show(Path::new(TINYGRAD));
    let total = records(&t).len();
    assert!(t["command"].as_str().unwrap().contains("am serve"));
    // What the replay needs beyond register accesses: the bytes tinygrad wrote to system
    // memory (rings, packets), and its reads of the signals the mock writes there.
    assert!(!of_kind(&t, "sysmem_write").is_empty());
    assert!(!of_kind(&t, "sysmem_read").is_empty());

    let out = common::am_json(&["replay", TINYGRAD, "--device", "mock:navi31"]);
    assert_eq!(out["divergence"], Value::Null, "{out}");
    assert_eq!(out["records"], total, "replayed to the last record");
    assert!(out["reads_compared"].as_u64().unwrap() > 1000, "{out}");
}

#[test]
fn a_replay_on_a_different_device_reports_its_first_divergence_and_fails() {
    // Navi 48 answers the device-id read differently from the Navi 31 tinygrad ran on.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_am"))
        .args(["replay", TINYGRAD, "--device", "mock:navi48", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "exit status 1 on a divergence");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let d = &v["divergence"];
    let t = show(Path::new(TINYGRAD));
    let first_id_read = records(&t)
        .iter()
        .find(|r| r["kind"] == "config_read" && r["offset"] == 2)
        .unwrap();
    assert_eq!(d["record"], first_id_read["index"], "{v}");
    assert_eq!(d["register"], "config 0x2");
    assert!(d["what"].as_str().unwrap().contains("0x744c"), "{v}");
}
