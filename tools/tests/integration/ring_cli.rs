//! `am ring` on queues the runtime wrote: a mock device of this process, booted by the
//! runtime and served over the remote protocol, read by `am ring` in a child process.

use am_mock::MockGpu;
use am_runtime::{ComputeCommands, CopyCommands, Device, MemKind};
use serde_json::Value;

use crate::common;
use common::{am_json, opts, serve_here};

fn hex(v: u64) -> String {
    format!("{v:#x}")
}

fn field<'a>(p: &'a Value, name: &str) -> &'a str {
    p["fields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f[0] == name)
        .and_then(|f| f[1].as_str())
        .unwrap_or_else(|| panic!("no field {name} in {p}"))
}

fn names(packets: &Value) -> Vec<&str> {
    packets
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect()
}

fn queue<'a>(j: &'a Value, kind: &str) -> &'a Value {
    j.as_array()
        .unwrap()
        .iter()
        .find(|q| q["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} queue in {j:#}"))
}

#[test]
fn ring_decodes_work_the_runtime_left_blocked_on_navi31() {
    let gpu = MockGpu::new("navi31").unwrap();
    let dev = Device::open_with(gpu.open(), opts()).unwrap();
    let spec = serve_here(&gpu);
    let gate = dev.new_signal().unwrap();
    let done = dev.new_signal().unwrap();
    let buf = dev.alloc(4096, MemKind::Vram).unwrap();
    let mut c = ComputeCommands::new(&dev);
    c.wait(&gate, 1).signal(&done, 7);
    let f1 = c.submit().unwrap();
    let mut k = CopyCommands::new(&dev);
    k.wait(&gate, 1);
    k.fill(&buf, 0xdead_beef).unwrap();
    k.signal(&done, 9);
    let f2 = k.submit().unwrap();

    let j = am_json(&["ring", &spec, "--all"]);
    let pm4 = queue(&j, "pm4");
    assert_eq!(pm4["id"], "compute.p0.q0");
    assert_eq!(pm4["pointers_from"], "memory");
    assert_eq!(pm4["doorbell"], 3, "compute ring 0 rings doorbell 3");
    let p = &pm4["packets"];
    // The CP holds at the wait: it is the first packet past the read pointer, the signal
    // and the runtime's timeline release follow.
    assert_eq!(names(p), ["WAIT_REG_MEM", "RELEASE_MEM", "RELEASE_MEM"]);
    assert_eq!(field(&p[0], "addr"), hex(gate.va()));
    assert_eq!(field(&p[0], "function"), ">=");
    assert_eq!(field(&p[0], "reference"), "0x1");
    assert_eq!(field(&p[1], "addr"), hex(done.va()));
    assert_eq!(field(&p[1], "data"), "0x7");
    assert_eq!(pm4["pending"], 23);

    let sdma = queue(&j, "sdma");
    assert_eq!(sdma["id"], "sdma0");
    let s = &sdma["packets"];
    assert_eq!(names(s), ["POLL_REGMEM", "CONST_FILL", "WRITE", "WRITE"]);
    assert_eq!(field(&s[0], "addr"), hex(gate.va()));
    assert_eq!(field(&s[1], "dst"), hex(buf.va()));
    assert_eq!(field(&s[1], "pattern"), "0xdeadbeef");
    assert_eq!(field(&s[1], "bytes"), "4096");
    assert_eq!(field(&s[2], "dst"), hex(done.va()));
    assert_eq!(field(&s[2], "data"), "0x9 0x0");

    gate.set(1).unwrap();
    f1.wait().unwrap();
    f2.wait().unwrap();
    // Done: nothing pending, and the history still decodes from the ring's start.
    let j = am_json(&["ring", &spec, "compute", "--from-start"]);
    let pm4 = queue(&j, "pm4");
    assert_eq!(pm4["pending"], 0);
    assert_eq!(
        names(&pm4["packets"]),
        ["WAIT_REG_MEM", "RELEASE_MEM", "RELEASE_MEM"]
    );
}

#[test]
fn ring_follows_aql_vendor_packets_into_their_pm4_ibs_on_every_mi300x_xcc() {
    let gpu = MockGpu::new("mi300x").unwrap();
    let dev = Device::open_with(gpu.open(), opts()).unwrap();
    let spec = serve_here(&gpu);
    let gate = dev.new_signal().unwrap();
    let done = dev.new_signal().unwrap();
    let mut c = ComputeCommands::new(&dev);
    c.wait(&gate, 1).signal(&done, 5);
    let f = c.submit().unwrap();

    let j = am_json(&["ring", &spec, "compute"]);
    let aql = queue(&j, "aql");
    // One AQL queue, active on all eight XCCs.
    assert_eq!(aql["xccs"], serde_json::json!([0, 1, 2, 3, 4, 5, 6, 7]));
    assert_eq!(aql["unit"], "packets");
    let p = &aql["packets"];
    assert!(aql["pending"].as_u64().unwrap() >= 1, "{aql:#}");
    assert_eq!(p[0]["name"], "VENDOR_SPECIFIC");
    let ib = &p[0]["ib"][0];
    assert_eq!(ib["name"], "INDIRECT_BUFFER");
    let inner = names(&ib["ib"]);
    assert_eq!(inner.first(), Some(&"WAIT_REG_MEM"), "{ib:#}");
    assert_eq!(field(&ib["ib"][0], "addr"), hex(gate.va()));
    assert!(inner.contains(&"RELEASE_MEM"), "{inner:?}");
    gate.set(1).unwrap();
    f.wait().unwrap();
}

#[test]
fn ring_names_the_live_queues_when_asked_for_one_that_is_not() {
    let gpu = MockGpu::new("navi31").unwrap();
    let _dev = Device::open_with(gpu.open(), opts()).unwrap();
    let spec = serve_here(&gpu);
    let err = common::am_fails(&["ring", &spec, "gfx9"], &[]);
    assert!(
        err.contains("no live queue \"gfx9\" (live: compute.p0.q0, sdma0)"),
        "{err}"
    );
}
