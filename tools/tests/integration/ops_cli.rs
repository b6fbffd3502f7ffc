//! `am smi`, `am reg` and `am vm` against the mock: navi31, mi300x (per XCC and AID),
//! mi350x-vf (what a VF may read), a hive member; devices booted in this process and
//! served over the remote protocol, so every command also runs through `am serve`'s server.

use am_driver::AmDevice;
use am_driver::ip::smu::Metrics;
use am_mock::MockGpu;
use am_mock::walker::{Access, PhysTarget};

use crate::common;
use common::{am, am_env, am_fails, am_json, golden, opts, serve_here};

/// A booted device with 64 MiB of VRAM mapped, served here.
fn booted(profile: &str) -> (MockGpu, AmDevice, String) {
    let gpu = MockGpu::new(profile).unwrap();
    let dev = AmDevice::open_with(gpu.open(), opts()).unwrap();
    let spec = serve_here(&gpu);
    (gpu, dev, spec)
}

#[test]
fn smi_table_of_navi31_and_mi300x_matches_its_golden_file() {
    let (_g1, d1, s1) = booted("navi31");
    let (_g2, d2, s2) = booted("mi300x");
    let _m1 = d1.valloc(64 << 20, true).unwrap();
    let _m2 = d2.valloc(64 << 20, true).unwrap();
    let text = am(&["smi", &s1, &s2])
        .replace(&s1, "remote:navi31")
        .replace(&s2, "remote:mi300x");
    golden("smi_navi31_mi300x.txt", &text);
}

#[test]
fn smi_numbers_equal_the_metrics_the_mock_smu_writes() {
    let (gpu, mut d, s) = booted("navi31");
    let j = &am_json(&["smi", &s])[0];
    let Metrics::V13_0_0(m) = d.with_smu(|c, smu| smu.metrics(c)).unwrap() else {
        panic!("navi31 speaks MP1 13.0.0")
    };
    let sm = &m.SmuMetrics;
    use am_autogen::smu::v13_0_0 as s0;
    assert_eq!(j["temp_edge"], sm.AvgTemperature[s0::TEMP_EDGE as usize]);
    assert_eq!(
        j["temp_hotspot"],
        sm.AvgTemperature[s0::TEMP_HOTSPOT as usize]
    );
    assert_eq!(j["temp_mem"], sm.AvgTemperature[s0::TEMP_MEM as usize]);
    assert_eq!(j["power_w"], sm.AverageSocketPower);
    assert_eq!(j["gfx_activity"], sm.AverageGfxActivity);
    assert_eq!(j["mem_activity"], sm.AverageUclkActivity);
    assert_eq!(j["fan_rpm"], sm.AvgFanRpm);
    assert_eq!(
        j["clocks"]["gfx"]["mhz"],
        sm.CurrClock[s0::PPCLK_GFXCLK as usize]
    );
    assert_eq!(
        j["clocks"]["mem"]["mhz"],
        sm.CurrClock[s0::PPCLK_UCLK as usize]
    );
    // The ranges are the firmware's DPM tables.
    let dpm = gpu.with_smu(|smu| smu.dpm(s0::PPCLK_UCLK).unwrap().levels);
    assert_eq!(j["clocks"]["mem"]["min"], dpm[0]);
    assert_eq!(j["clocks"]["mem"]["max"], dpm[dpm.len() - 1]);
    assert_eq!(
        j["power_limit_w"],
        d.with_smu(|c, smu| smu.power_limit(c)).unwrap()
    );
    assert_eq!(j["firmware"]["pmfw"], "78.74.0");
    assert_eq!(j["function"], "PF");
    assert_eq!(j["processes"], serde_json::json!([]));

    let (_g, mut d6, s6) = booted("mi300x");
    let j = &am_json(&["smi", &s6])[0];
    let Metrics::V13_0_6(m) = d6.with_smu(|c, smu| smu.metrics(c)).unwrap() else {
        panic!("mi300x speaks MP1 13.0.6")
    };
    let q = |v: u32| (v + 512) >> 10;
    assert_eq!(j["temp_hotspot"], q(m.MaxSocketTemperature));
    assert_eq!(j["temp_mem"], q(m.MaxHbmTemperature));
    assert_eq!(j["temp_edge"], serde_json::Value::Null);
    assert_eq!(j["power_w"], q(m.SocketPower));
    assert_eq!(j["power_max_w"], q(m.MaxSocketPowerLimit));
    let per_xcc: Vec<u32> = m.GfxclkFrequency.iter().map(|&v| q(v)).collect();
    assert_eq!(j["gfx_per_xcc_mhz"], serde_json::json!(per_xcc));
    assert_eq!(j["clocks"]["fclk"]["mhz"], q(m.FclkFrequency));
    assert_eq!(j["fan_rpm"], serde_json::Value::Null);

    // RDNA4: MP1 14.0.3 writes 14.0.2's table.
    let (_g, mut d4, s4) = booted("navi48");
    let j = &am_json(&["smi", &s4])[0];
    let Metrics::V14_0_2(m) = d4.with_smu(|c, smu| smu.metrics(c)).unwrap() else {
        panic!("navi48 speaks MP1 14.0.2's table")
    };
    let sm = &m.SmuMetrics;
    use am_autogen::smu::v14_0_2 as s14;
    assert_eq!(j["temp_edge"], sm.AvgTemperature[s14::TEMP_EDGE as usize]);
    assert_eq!(j["power_w"], sm.AverageSocketPower);
    assert_eq!(j["gfx_activity"], sm.AverageGfxActivity);
    assert_eq!(
        j["clocks"]["mem"]["mhz"],
        sm.CurrClock[s14::PPCLK_UCLK as usize]
    );
}

#[test]
fn smi_on_a_vf_and_a_hive_member_says_what_it_can() {
    let j = &am_json(&["smi", "mock:mi350x-vf"])[0];
    assert_eq!(j["function"], "VF");
    assert_eq!(
        j["notes"][0],
        "a VF has no SMU metrics: the PF owns the SMU"
    );
    assert_eq!(j["vram_total"], 288u64 << 30);
    let j = &am_json(&["smi", "mock:mi300x-hive4:2"])[0];
    assert_eq!(j["hive"], "region 2 of 4");
}

#[test]
fn smi_names_the_process_holding_a_local_device_and_leaves_it_alone() {
    let dir = std::env::temp_dir().join(format!("am-smi-locks-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let lock = dir.join("am_0000:c3:00.0.lock");
    let held = am_driver::pci::lock::DeviceLock::acquire_in(&dir, "0000:c3:00.0").unwrap();
    let env = [("AM_LOCK_DIR", dir.to_str().unwrap())];
    let j: serde_json::Value = serde_json::from_str(&am_env(&["smi", "--json"], &env)).unwrap();
    // No GPU on this machine's bus: the held device is found through its lock file.
    let r = &j[0];
    assert_eq!(r["device"], "0000:c3:00.0");
    assert_eq!(r["processes"][0]["pid"], std::process::id());
    assert_eq!(r["processes"][0]["lock_file"], lock.display().to_string());
    let note = r["notes"][0].as_str().unwrap();
    assert!(
        note.starts_with(&format!("held by pid {}", std::process::id())),
        "{note}"
    );
    // Writing a register of a held device is refused, naming the holder.
    let err = am_fails(
        &["reg", "0000:c3:00.0", "SCRATCH_REG7", "--write", "1"],
        &env,
    );
    assert!(
        err.contains(&format!("held by pid {}", std::process::id())),
        "{err}"
    );
    drop(held);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A device served here and booted through the server by a client of it, which owns it for
/// as long as the returned driver lives.
fn owned(profile: &str) -> (MockGpu, AmDevice, String) {
    let gpu = MockGpu::new(profile).unwrap();
    let spec = serve_here(&gpu);
    let pci = am_driver::pci::open_spec(&spec).unwrap();
    let dev = AmDevice::open_with(pci, opts()).unwrap();
    (gpu, dev, spec)
}

/// What the owner's SMU answers: the power limit and the PMFW version.
fn owner_answers(dev: &mut AmDevice) -> (u32, String) {
    dev.with_smu(|c, smu| Ok((smu.power_limit(c)?, smu.firmware_version(c)?)))
        .unwrap()
}

#[test]
fn smi_beside_the_owner_of_a_served_device_reads_the_smu_part_and_names_the_owner() {
    let (gpu, mut owner, spec) = owned("navi31");
    let (limit, pmfw) = owner_answers(&mut owner);
    let j = &am_json(&["smi", &spec])[0];
    let who = j["owner"].as_str().unwrap_or_default();
    assert!(
        who.starts_with("127.0.0.1:") && who.contains(" since "),
        "{j}"
    );
    assert!(j["metrics_counter"].is_number(), "{j}");
    assert_eq!(j["power_limit_w"], limit, "{j}");
    assert_eq!(j["firmware"]["pmfw"], pmfw.as_str(), "{j}");
    assert!(j["clocks"]["gfx"]["max"].is_number(), "{j}");
    assert_eq!(j["notes"], serde_json::json!([]), "{j}");
    let text = am(&["smi", &spec]);
    assert!(text.contains(&format!("  owner       {who}")), "{text}");
    // The owner keeps its device and its SMU answers as before.
    assert_eq!(owner_answers(&mut owner), (limit, pmfw));
    assert_eq!(
        owner.ctx().pci.ownership().unwrap(),
        Some(am_driver::Ownership::Mine)
    );
    assert!(gpu.violations().is_empty(), "{:?}", gpu.violations());
}

#[test]
fn smu_queries_beside_the_owner_never_land_between_the_owners_messages() {
    let (gpu, mut owner, spec) = owned("navi31");
    let (limit, pmfw) = owner_answers(&mut owner);
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let (spec, done) = (spec.clone(), done.clone());
        std::thread::spawn(move || {
            let reports: Vec<serde_json::Value> = (0..4)
                .map(|_| am_json(&["smi", &spec])[0].clone())
                .collect();
            done.store(true, std::sync::atomic::Ordering::SeqCst);
            reports
        })
    };
    // The owner asks its SMU all the while: an answer of the reader's, or a message of the
    // reader's written over one of the owner's, would show here or as a violation.
    let mut asked = 0;
    while !done.load(std::sync::atomic::Ordering::SeqCst) || asked == 0 {
        assert_eq!(owner_answers(&mut owner), (limit, pmfw.clone()));
        owner.with_smu(|c, smu| smu.metrics(c)).unwrap();
        asked += 1;
    }
    for r in reader.join().unwrap() {
        assert!(r["metrics_counter"].is_number(), "{r}");
        assert_eq!(r["power_limit_w"], limit, "{r}");
        assert_eq!(r["notes"], serde_json::json!([]), "{r}");
    }
    assert!(gpu.violations().is_empty(), "{:?}", gpu.violations());
    assert!(gpu.warnings().is_empty(), "{:?}", gpu.warnings());
}

#[test]
fn a_relay_sends_smu_queries_on_to_the_server_beside_the_owner() {
    let (gpu, mut owner, upstream) = owned("navi31");
    let (limit, pmfw) = owner_answers(&mut owner);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let relayed = am_driver::pci::open_spec(&upstream).unwrap();
    std::thread::spawn(move || {
        let _ = am_driver::pci::remote::serve(listener, vec![relayed], Default::default());
    });
    let j = &am_json(&["smi", &format!("remote:{addr}:0")])[0];
    assert!(j["metrics_counter"].is_number(), "{j}");
    assert_eq!(j["power_limit_w"], limit, "{j}");
    assert_eq!(j["firmware"]["pmfw"], pmfw.as_str(), "{j}");
    assert_eq!(j["notes"], serde_json::json!([]), "{j}");
    // The relay has no owner of its own: the one named is the upstream server's client.
    let who = j["owner"].as_str().unwrap_or_default();
    assert!(
        who.starts_with("127.0.0.1:") && who.contains("a client of the server behind remote:"),
        "{j}"
    );
    assert_eq!(owner_answers(&mut owner), (limit, pmfw));
    assert!(gpu.violations().is_empty(), "{:?}", gpu.violations());
}

#[test]
fn the_server_runs_only_queries_beside_the_owner() {
    use am_autogen::smu::v13_0_0 as s0;
    use am_driver::pci::SmuAnswer;
    let (_gpu, mut owner, spec) = owned("navi31");
    let (limit, _) = owner_answers(&mut owner);
    let reader = am_driver::pci::open_spec(&spec).unwrap();
    let wait = std::time::Duration::from_secs(2);
    let err = reader
        .smu_query(s0::PPSMC_MSG_SetPptLimit, limit - 1, wait)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("SMU message 0x") && err.contains("is not a query"),
        "{err}"
    );
    assert_eq!(owner_answers(&mut owner).0, limit, "the limit was not set");
    let answer = reader
        .smu_query(s0::PPSMC_MSG_GetPptLimit, 0, wait)
        .unwrap();
    assert_eq!(
        answer,
        Some(SmuAnswer {
            response: 1,
            value: limit
        })
    );
    // A query makes no owner.
    assert_eq!(
        owner.ctx().pci.ownership().unwrap(),
        Some(am_driver::Ownership::Mine)
    );
}

#[test]
fn smi_actions_need_yes() {
    let err = am_fails(&["smi", "mock:navi31", "--reset"], &[]);
    assert!(err.contains("add --yes"), "{err}");
    let err = am_fails(&["smi", "mock:navi31", "--power-limit", "300"], &[]);
    assert!(
        err.contains("--power-limit 300 W on mock:navi31 changes the device"),
        "{err}"
    );
}

#[test]
fn smi_watch_with_csv_prints_one_line_per_sample() {
    let out = am(&[
        "smi",
        "mock:mi350x-vf",
        "--watch",
        "0.01",
        "--count",
        "3",
        "--csv",
    ]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 4, "{out}");
    assert!(lines[0].starts_with("GPU,DEVICE,FN,"));
    assert!(lines[1].starts_with("0,mock:mi350x-vf:0,VF,"));
}

#[test]
fn reg_reads_decodes_and_writes_by_name_and_glob() {
    let (gpu, _d, s) = booted("navi31");
    let j = am_json(&["reg", &s, "GC:SCRATCH_REG7"]);
    assert_eq!(j[0]["value"], format!("{:#010x}", am_driver::AM_VERSION));
    assert_eq!(j[0]["ip"], "GC 11.0.0");
    // Read-modify-write of one field keeps the others.
    let before = gpu
        .peek(am_mock::profile::RegIp::Gc, "GRBM_CNTL", 0)
        .unwrap();
    let j = am_json(&["reg", &s, "GRBM_CNTL", "--set", "READ_TIMEOUT=0x80"]);
    let after = gpu
        .peek(am_mock::profile::RegIp::Gc, "GRBM_CNTL", 0)
        .unwrap();
    assert_eq!(after, (before & !0xff) | 0x80);
    assert_eq!(j[0]["before"], format!("{before:#010x}"));
    assert_eq!(j[0]["value"], format!("{after:#010x}"));
    let f = j[0]["fields"].as_array().unwrap();
    assert_eq!(f[0]["name"], "READ_TIMEOUT");
    assert_eq!(f[0]["value"], 0x80);
    // A glob lists every match; a write to a glob is refused.
    let j = am_json(&["reg", &s, "GC:CP_HQD_PQ_WPTR_*"]);
    let names: Vec<&str> = j
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["register"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "GC:CP_HQD_PQ_WPTR_HI",
            "GC:CP_HQD_PQ_WPTR_LO",
            "GC:CP_HQD_PQ_WPTR_POLL_ADDR",
            "GC:CP_HQD_PQ_WPTR_POLL_ADDR_HI"
        ]
    );
    let err = am_fails(&["reg", &s, "GC:CP_HQD_PQ_WPTR_*", "--write", "0"], &[]);
    assert!(
        err.contains("matches 4 registers; a write names exactly one"),
        "{err}"
    );
    // Past BAR5: the RSMU window.
    let j = am_json(&["reg", &s, "RCC_DEV0_EPF2_STRAP2"]);
    assert_eq!(j[0]["access"], "RSMU");
    // Unknown names suggest the nearest.
    let err = am_fails(&["reg", &s, "CP_HQD_ACTIV"], &[]);
    assert!(err.contains("nearest: GC:CP_HQD_ACTIVE,"), "{err}");
}

#[test]
fn reg_reaches_every_mi300x_xcc_and_aid() {
    let (_g, _d, s) = booted("mi300x");
    let j = am_json(&["reg", &s, "GC:SCRATCH_REG7"]);
    let inst: Vec<u64> = j
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["instance"].as_u64().unwrap())
        .collect();
    assert_eq!(inst, [0, 1, 2, 3, 4, 5, 6, 7]);
    let j = am_json(&["reg", &s, "SCRATCH_REG7", "--xcc", "5"]);
    assert_eq!(j.as_array().unwrap().len(), 1);
    assert_eq!(j[0]["instance"], 5);
    // MMHUB has one instance per AID.
    let j = am_json(&["reg", &s, "MMHUB:MC_VM_FB_LOCATION_BASE"]);
    assert_eq!(j.as_array().unwrap().len(), 4);
    // The boot set SHUB_SLV_MODE on the fence of AIDs 1..3, reached through PCIE INDEX2.
    for aid in ["1", "2", "3"] {
        let j = am_json(&["reg", &s, "XCC_DOORBELL_FENCE", "--aid", aid]);
        assert_eq!(j[0]["access"], "PCIE INDEX2");
        let slv = j[0]["fields"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["name"] == "SHUB_SLV_MODE")
            .unwrap();
        assert_eq!(slv["value"], 1, "AID {aid}");
    }
    let err = am_fails(&["reg", &s, "XCC_DOORBELL_FENCE", "--aid", "4"], &[]);
    assert!(err.contains("the device has 4 AID(s)"), "{err}");
}

#[test]
fn reg_on_a_vf_reads_gc_but_refuses_psp_smu_and_the_pf_windows() {
    let j = am_json(&["reg", "mock:mi350x-vf", "GC:SCRATCH_REG0", "--xcc", "0"]);
    assert_eq!(j[0]["ip"], "GC 9.5.0");
    let err = am_fails(&["reg", "mock:mi350x-vf", "MP1_SMN_C2PMSG_90"], &[]);
    assert!(err.contains("belongs to the PF"), "{err}");
    let err = am_fails(
        &["reg", "mock:mi350x-vf", "XCC_DOORBELL_FENCE", "--aid", "1"],
        &[],
    );
    assert!(
        err.contains("PCIE INDEX2 window, which belongs to the PF"),
        "{err}"
    );
}

/// Random mappings; `am vm` must land where the mock's own walker lands, and fault where it
/// faults.
fn vm_agrees_with_the_mock_walker(profile: &str, seed: u64) {
    let (gpu, d, s) = booted(profile);
    let mut rng = seed;
    let mut next = || {
        rng = rng
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        rng >> 33
    };
    let mut maps = vec![];
    for _ in 0..4 {
        let size = (1 + next() % 8) << 20 | (next() % 16) << 12;
        maps.push(d.valloc(size.max(4096), next() % 2 == 0).unwrap());
    }
    let mem = d.ctx().pci.alloc_sysmem(5 * 4096, false).unwrap();
    maps.push(d.map_sysmem(&*mem, true).unwrap());
    let hub = am_mock::ip::gmc::Hub::gc(0);
    for m in &maps {
        for _ in 0..3 {
            let va = m.va + next() % m.size;
            let j = am_json(&["vm", &s, &format!("{va:#x}")]);
            let t = gpu
                .gpu_access(hub, 0, va, Access::Read, 0)
                .unwrap()
                .unwrap();
            let (mem_kind, phys) = match t.target {
                PhysTarget::Vram(p) => ("vram", p),
                PhysTarget::System(p) => ("system", p),
                PhysTarget::Peer { region, offset } => {
                    panic!(
                        "{profile} {va:#x}: a local mapping reached region {region} ({offset:#x})"
                    )
                }
            };
            assert_eq!(j["memory"], mem_kind, "{profile} {va:#x}");
            assert_eq!(j["phys"], format!("{phys:#x}"), "{profile} {va:#x}");
            assert_eq!(j["page_size"], t.page_size, "{profile} {va:#x}");
            let last = j["levels"].as_array().unwrap().last().unwrap().clone();
            assert_eq!(
                last["raw"],
                format!("{:#018x}", t.entry),
                "{profile} {va:#x}"
            );
        }
    }
    // Past every mapping: not mapped, and the mock faults there too.
    let hole = maps.iter().map(|m| m.va + m.size).max().unwrap() + (1 << 30);
    let j = am_json(&["vm", &s, &format!("{hole:#x}")]);
    assert_eq!(j["mapped"], false);
    assert!(
        gpu.gpu_access(hub, 0, hole, Access::Read, 0)
            .unwrap()
            .is_err()
    );
    // That fault is latched and posted: --faults shows it without clearing it.
    let f = am_json(&["vm", &s, "--faults"]);
    let gc0 = f["hubs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["hub"] == "GC hub of XCC0")
        .unwrap();
    assert_eq!(gc0["va"], format!("{:#x}", hole & !0xfff));
    assert_ne!(gc0["status"], "0x00000000");
    assert!(
        f["pending"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["kind"] == "gc-fault" && p["va"] == format!("{:#x}", hole & !0xfff)),
        "{f:#}"
    );
    let again = am_json(&["vm", &s, "--faults"]);
    assert_eq!(again["hubs"], f["hubs"]);
}

#[test]
fn vm_agrees_with_the_mock_walker_on_navi31() {
    vm_agrees_with_the_mock_walker("navi31", 11);
}

#[test]
fn vm_agrees_with_the_mock_walker_on_mi300x() {
    vm_agrees_with_the_mock_walker("mi300x", 23);
}

#[test]
fn vm_names_a_hive_peers_vram_where_the_mock_reaches_it() {
    let mut gpus = MockGpu::new_hive("mi300x", 2).unwrap().into_iter();
    let (ga, gb) = (gpus.next().unwrap(), gpus.next().unwrap());
    let a = AmDevice::open_with(ga.open(), opts()).unwrap();
    let b = AmDevice::open_with(gb.open(), opts()).unwrap();
    let theirs = b.valloc(0x3000, false).unwrap();
    let m = a.map_peer(&b.peer_vram(&theirs)).unwrap();
    let s = serve_here(&ga);
    let va = m.va + 0x1234;
    let j = am_json(&["vm", &s, &format!("{va:#x}")]);
    let t = ga
        .gpu_access(am_mock::ip::gmc::Hub::gc(0), 0, va, Access::Read, 0)
        .unwrap()
        .unwrap();
    let PhysTarget::Peer { region, offset } = t.target else {
        panic!("the mock reached {:?}", t.target);
    };
    assert_eq!(
        (j["memory"].as_str(), j["peer_region"].as_u64()),
        (Some("peer"), Some(u64::from(region)))
    );
    assert_eq!(j["phys"], format!("{offset:#x}"));
    let text = am(&["vm", &s, &format!("{va:#x}")]);
    assert!(
        text.contains(&format!("VRAM of hive region {region}")),
        "{text}"
    );
}

#[test]
fn vm_walk_text_shows_every_level() {
    let (_g, d, s) = booted("navi31");
    let m = d.valloc(4096, true).unwrap();
    let text = am(&["vm", &s, &format!("{:#x}", m.va)]);
    for level in ["PDB2", "PDB1", "PDB0", "PTB"] {
        assert!(text.contains(&format!("  {level:<4} [")), "{text}");
    }
    assert!(text.contains("=> VRAM 0x"), "{text}");
}

#[test]
fn smi_watch_out_of_range_is_refused_with_the_range() {
    for secs in ["1e300", "0", "-1", "nan", "86401"] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_am"))
            .args(["smi", "mock:navi31", &format!("--watch={secs}")])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "--watch {secs}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!("invalid value '{secs}' for '--watch"))
                && err.contains("give seconds from 0.01 to 86400"),
            "--watch {secs}: {err}"
        );
    }
}

#[test]
fn smi_watch_into_a_pipe_prints_a_plain_table_per_sample() {
    // stdout is a pipe here: no terminal to redraw on, so each sample is printed as the
    // table `am smi` prints once, without terminal control codes.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_am"))
        .args(["smi", "mock:navi31", "--watch", "0.01", "--count", "2"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(!text.contains('\x1b'), "no control codes: {text:?}");
    let headers = text
        .lines()
        .filter(|l| l.starts_with("GPU  DEVICE"))
        .count();
    assert_eq!(headers, 2, "{text}");
    assert_eq!(text.matches("GPU 0  mock:navi31:0").count(), 2, "{text}");
}
