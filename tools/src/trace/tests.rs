use am_driver::trace::{Header, Record, Trace};

use super::*;

fn w(offset: u64, value: u64) -> Record {
    Record::Write {
        bar: 5,
        offset,
        width: 4,
        value,
        alloc: false,
    }
}

fn r(offset: u64, value: u64) -> Record {
    Record::Read {
        bar: 5,
        offset,
        width: 4,
        value,
    }
}

fn phase(name: &str) -> Record {
    Record::Phase { name: name.into() }
}

fn trace(records: Vec<Record>) -> Trace {
    Trace {
        header: Header::default(),
        records,
    }
}

#[test]
fn identical_traces_have_no_difference() {
    let t = trace(vec![
        w(0x10, 1),
        r(0x20, 5),
        r(0x20, 7),
        w(0x30, 2),
        phase("soc"),
    ]);
    assert_eq!(diff(&t, &t), vec![]);
}

#[test]
fn a_register_written_by_one_side_only_is_reported_with_its_side() {
    let a = trace(vec![w(0x10, 1), w(0x14, 9)]);
    let b = trace(vec![w(0x10, 1)]);
    assert_eq!(
        diff(&a, &b),
        vec![Difference::WrittenByOneSide {
            phase: "(whole run)".into(),
            side: "a",
            register: "BAR5+0x14".into(),
            value: 9,
        }]
    );
}

#[test]
fn a_different_final_value_is_reported_but_not_a_different_way_there() {
    // Both end on 3 in 0x10 (b passes through 5 first); 0x14 ends differently.
    let a = trace(vec![w(0x10, 3), w(0x14, 1)]);
    let b = trace(vec![w(0x10, 5), w(0x10, 3), w(0x14, 2)]);
    assert_eq!(
        diff(&a, &b),
        vec![Difference::FinalValue {
            phase: "(whole run)".into(),
            register: "BAR5+0x14".into(),
            a: 1,
            b: 2,
        }]
    );
}

#[test]
fn allocation_dependent_values_are_not_compared() {
    let alloc = |value| Record::Write {
        bar: 5,
        offset: 0x40,
        width: 4,
        value,
        alloc: true,
    };
    let a = trace(vec![alloc(0x1000_0000)]);
    let b = trace(vec![alloc(0x2000_0000)]);
    assert_eq!(diff(&a, &b), vec![]);
}

#[test]
fn order_inside_a_burst_is_harmless() {
    let a = trace(vec![w(0x10, 1), w(0x14, 2), w(0x18, 3)]);
    let b = trace(vec![w(0x18, 3), w(0x10, 1), w(0x14, 2)]);
    assert_eq!(diff(&a, &b), vec![]);
}

#[test]
fn a_write_on_the_other_side_of_a_wait_is_reported() {
    // a writes 0x14 before waiting on 0x20, b after.
    let a = trace(vec![w(0x10, 1), w(0x14, 2), r(0x20, 0), r(0x20, 1)]);
    let b = trace(vec![w(0x10, 1), r(0x20, 0), r(0x20, 1), w(0x14, 2)]);
    assert_eq!(
        diff(&a, &b),
        vec![Difference::OrderAcrossWait {
            phase: "(whole run)".into(),
            register: "BAR5+0x14".into(),
            a_after: "start".into(),
            b_after: "wait on BAR5+0x20".into(),
        }]
    );
}

#[test]
fn a_different_polling_condition_is_reported() {
    let poll = |mask, want| Record::Poll {
        bar: 5,
        offset: 0x20,
        mask,
        want,
    };
    // The driver's condition against a client's reads: the value b ended on meets it.
    let a = trace(vec![
        poll(0x8000_0000, 0x8000_0000),
        r(0x20, 0),
        r(0x20, 0x8000_0001),
    ]);
    let b = trace(vec![r(0x20, 0), r(0x20, 0x8000_0001)]);
    assert_eq!(diff(&a, &b), vec![]);
    // … and one it does not meet.
    let c = trace(vec![r(0x20, 0), r(0x20, 0x1)]);
    assert_eq!(
        diff(&a, &c),
        vec![Difference::PollCondition {
            phase: "(whole run)".into(),
            register: "BAR5+0x20".into(),
            a: "& 0x80000000 == 0x80000000".into(),
            b: "until it reads 0x1".into(),
        }]
    );
}

#[test]
fn phases_align_by_name_when_both_sides_mark_them() {
    // The same write in different phases differs; a phase only one side has is named.
    let a = trace(vec![w(0x10, 1), phase("soc"), phase("gmc")]);
    let b = trace(vec![
        phase("soc"),
        w(0x10, 1),
        phase("gmc"),
        w(0x50, 1),
        phase("ih"),
    ]);
    assert_eq!(
        diff(&a, &b),
        vec![
            Difference::PhaseOnlyIn {
                side: "b",
                phase: "ih".into(),
            },
            Difference::WrittenByOneSide {
                phase: "soc".into(),
                side: "a",
                register: "BAR5+0x10".into(),
                value: 1,
            },
            Difference::WrittenByOneSide {
                phase: "gmc".into(),
                side: "b",
                register: "BAR5+0x10".into(),
                value: 1,
            },
        ]
    );
}

#[test]
fn show_names_registers_from_the_traces_discovery() {
    use am_driver::trace::TraceIp;
    // GC 11.0.0 with its first segment at dword 0x1260: GRBM_STATUS is at 0x1260+0xda4
    // per the generated table.
    let ips = vec![TraceIp {
        hw_id: 11,
        instance: 0,
        version: (11, 0, 0),
        bases: vec![0x1260, 0xa000, 0x1_c000, 0x2_402c00, 0],
    }];
    let gc = am_driver::regs::select_table(
        am_autogen::regs::RegIp::Gc,
        am_driver::IpVersion {
            major: 11,
            minor: 0,
            rev: 0,
        },
    )
    .expect("GC 11.0.0 has a table");
    let def = gc.by_name("GRBM_STATUS").expect("GC 11 has GRBM_STATUS");
    let base = ips[0].bases[usize::from(def.base_idx())];
    let offset = (base + u64::from(def.offset())) * 4;
    let t = trace(vec![Record::Discovery { ips }, r(offset, 0x3028)]);
    let text = show(&t, false);
    assert!(
        text.contains("read  GC[0] GRBM_STATUS = 0x00003028"),
        "{text}"
    );
    let j: serde_json::Value = serde_json::from_str(&show(&t, true)).expect("JSON");
    assert_eq!(j["records"][1]["register"]["name"], "GRBM_STATUS");
}

#[test]
fn a_wait_satisfied_at_its_first_read_counts_in_a_trace_without_poll_marks() {
    let poll = Record::Poll {
        bar: 5,
        offset: 0x20,
        mask: 0x8000_0000,
        want: 0x8000_0000,
    };
    // a (a driver that marks its polls) waits on 0x20, then writes 0x14; b (a client that
    // marks nothing) reads 0x20 once, finding the condition met, then writes 0x14.
    let a = trace(vec![
        w(0x10, 1),
        poll.clone(),
        r(0x20, 0x8000_0000),
        w(0x14, 2),
    ]);
    let b = trace(vec![w(0x10, 1), r(0x20, 0x8000_0001), w(0x14, 2)]);
    assert_eq!(diff(&a, &b), vec![], "the same wait, the same order");
    assert_eq!(diff(&b, &a), vec![], "either side");

    // A single read that does not find the condition is a plain read: b does not wait.
    let c = trace(vec![w(0x10, 1), r(0x20, 0x1), w(0x14, 2)]);
    assert_eq!(
        diff(&a, &c),
        vec![Difference::PolledByOneSide {
            phase: "(whole run)".into(),
            side: "a",
            register: "BAR5+0x20".into(),
        }]
    );

    // A trace with poll marks announced every wait: its single reads are plain reads.
    let other = Record::Poll {
        bar: 5,
        offset: 0x30,
        mask: 1,
        want: 1,
    };
    let d = trace(vec![
        w(0x10, 1),
        r(0x20, 0x8000_0000),
        w(0x14, 2),
        other,
        r(0x30, 1),
    ]);
    assert_eq!(
        diff(&a, &d),
        vec![
            Difference::PolledByOneSide {
                phase: "(whole run)".into(),
                side: "a",
                register: "BAR5+0x20".into(),
            },
            Difference::PolledByOneSide {
                phase: "(whole run)".into(),
                side: "b",
                register: "BAR5+0x30".into(),
            },
        ]
    );
}
