use std::path::Path;

use super::*;

fn sample() -> Trace {
    Trace {
        header: Header {
            device: "mock:navi31:0".into(),
            backend: "mock".into(),
            profile: "navi31".into(),
            command: "am init mock:navi31".into(),
        },
        records: vec![
            Record::ConfigRead {
                offset: 4,
                size: 2,
                value: 0x6,
            },
            Record::ConfigWrite {
                offset: 4,
                size: 2,
                value: 0x7,
            },
            Record::Discovery {
                ips: vec![TraceIp {
                    hw_id: 11,
                    instance: 0,
                    version: (11, 0, 0),
                    bases: vec![0x1260, 0xa000, 0x1_0000_0000],
                }],
            },
            Record::Read {
                bar: 5,
                offset: 0xde3 * 4,
                width: 4,
                value: 0x6000,
            },
            Record::Write {
                bar: 5,
                offset: 0x1234,
                width: 4,
                value: 0xdead_beef,
                alloc: false,
            },
            Record::Write {
                bar: 2,
                offset: 0x800,
                width: 8,
                value: u64::MAX,
                alloc: true,
            },
            Record::Write {
                bar: 5,
                offset: 0x10,
                width: 1,
                value: 1,
                alloc: false,
            },
            Record::ReadBytes {
                bar: 0,
                offset: 0x1000,
                data: vec![1, 2, 3, 4],
            },
            Record::ReadDigest {
                bar: 0,
                offset: 0x5ff_0000,
                len: 10240,
                digest: digest(&[0; 10240]),
            },
            Record::WriteBytes {
                bar: 0,
                offset: 0,
                data: vec![9; 300],
            },
            Record::Refused {
                access: "write 4 bytes at BAR5+0x0".into(),
                message: "refused".into(),
            },
            Record::SysMap {
                id: 0,
                size: 3 * 4096,
                contiguous: false,
                pages: vec![0x10_0000, 0x10_1000, 0x8000],
            },
            Record::Reset,
            Record::ResizeBar { bar: 0 },
            Record::WaitIrq {
                timeout_us: 1000,
                fired: true,
            },
            Record::Poll {
                bar: 5,
                offset: 0x40,
                mask: 0x8000_0000,
                want: 0x8000_0000,
            },
            Record::Mailbox {
                block: "smu".into(),
                name: "GetSmuVersion".into(),
                message: 2,
                param: 0,
                response: 1,
            },
            Record::Phase { name: "soc".into() },
            Record::SysWrite {
                id: 0,
                offset: 0x1ff8,
                data: vec![0xc0, 0xde, 0, 0, 0, 0, 0, 0x10],
            },
            Record::SysRead {
                id: 0,
                offset: 0x40,
                data: 7u64.to_le_bytes().to_vec(),
            },
            Record::SysReadDigest {
                id: 0,
                offset: 0,
                len: 4096,
                digest: digest(&[0; 4096]),
            },
        ],
    }
}

/// The records a version 1 file can hold: everything before system-memory contents.
fn sample_v1() -> Trace {
    let mut t = sample();
    t.records.retain(|r| {
        !matches!(
            r,
            Record::SysWrite { .. } | Record::SysRead { .. } | Record::SysReadDigest { .. }
        )
    });
    t
}

fn encode(t: &Trace) -> Vec<u8> {
    let mut w = TraceWriter::new(Vec::new(), &t.header).expect("writing to a Vec");
    for r in &t.records {
        w.record(r).expect("writing to a Vec");
    }
    w.finish().expect("writing to a Vec")
}

#[test]
fn every_record_kind_reads_back_as_written() {
    let t = sample();
    let back = Trace::parse(Path::new("t.amtrace"), &encode(&t)).expect("a trace we wrote");
    assert_eq!(back, t);
}

#[test]
fn a_register_access_takes_a_few_bytes() {
    let mut out = vec![];
    encode_record(
        &mut out,
        &Record::Write {
            bar: 5,
            offset: 0x1_2344,
            width: 4,
            value: 0x1,
            alloc: false,
        },
    );
    assert_eq!(
        out.len(),
        8,
        "tag, bar, width, flag, 3-byte offset, 1-byte value"
    );
}

#[test]
fn a_truncated_trace_names_the_file_and_the_record() {
    let bytes = encode(&sample());
    let header_len = encode_header(&sample().header).len();
    // Cut inside the first record (a config read of 4 bytes encoded).
    let cut = &bytes[..header_len + 2];
    let e = Trace::parse(Path::new("/tmp/boot.amtrace"), cut).expect_err("truncated");
    let text = e.to_string();
    assert!(
        text.contains("/tmp/boot.amtrace") && text.contains(&format!("{header_len:#x}")),
        "{text}"
    );
    assert!(text.contains("truncated"), "{text}");
    // Every prefix fails cleanly or is a whole trace: never a panic.
    for n in 0..bytes.len() {
        let _ = Trace::parse(Path::new("p"), &bytes[..n]);
    }
}

#[test]
fn a_corrupt_trace_is_an_error_naming_what_is_wrong() {
    let mut bytes = encode(&sample());
    let e = Trace::parse(Path::new("x"), b"ELF\x7f....").expect_err("no magic");
    assert!(e.to_string().contains("no AMTRACE magic"), "{e}");
    let header_len = encode_header(&sample().header).len();
    bytes[header_len] = 0xee;
    let e = Trace::parse(Path::new("x"), &bytes).expect_err("bad tag");
    assert_eq!(
        e.to_string(),
        format!("access trace x at byte {header_len:#x}: unknown record tag 238")
    );
    let mut v3 = encode(&sample());
    v3[8] = 3;
    let e = Trace::parse(Path::new("x"), &v3).expect_err("version 3");
    assert!(e.to_string().contains("format version 3"), "{e}");
    // Flipping any byte never panics.
    let good = encode(&sample());
    for i in 0..good.len() {
        let mut b = good.clone();
        b[i] ^= 0xff;
        let _ = Trace::parse(Path::new("p"), &b);
    }
}

#[test]
fn a_version_1_file_still_reads_and_may_not_hold_later_records() {
    let v1 = sample_v1();
    let mut bytes = encode(&v1);
    assert_eq!(bytes[8..10], VERSION.to_le_bytes(), "the version field");
    bytes[8..10].copy_from_slice(&1u16.to_le_bytes());
    let back = Trace::parse(Path::new("old.amtrace"), &bytes).expect("a version 1 file");
    assert_eq!(back, v1);

    // A system-memory write is a version 2 record: in a version 1 file it is corruption.
    let mut with_sys = bytes.clone();
    let at = with_sys.len();
    encode_record(
        &mut with_sys,
        &Record::SysWrite {
            id: 0,
            offset: 0,
            data: vec![1],
        },
    );
    let e = Trace::parse(Path::new("old.amtrace"), &with_sys).expect_err("tag 17 in version 1");
    assert_eq!(
        e.to_string(),
        format!(
            "access trace old.amtrace at byte {at:#x}: record tag 17 in a version 1 file \
             (version 2 added it)"
        )
    );
}

#[test]
fn a_trace_compressed_with_zstd_reads_as_the_plain_file() {
    let t = sample();
    let plain = encode(&t);
    let packed =
        ruzstd::encoding::compress_to_vec(&plain[..], ruzstd::encoding::CompressionLevel::Fastest);
    assert_ne!(packed, plain);
    let back = Trace::parse(Path::new("t.amtrace.zst"), &packed).expect("a compressed trace");
    assert_eq!(back, t);

    // A zstd frame cut short is an error naming the file, not a panic or a short trace.
    let cut = &packed[..packed.len() / 2];
    let e = Trace::parse(Path::new("t.amtrace.zst"), cut).expect_err("a cut frame");
    let text = e.to_string();
    assert!(
        text.starts_with("access trace t.amtrace.zst at byte 0x0: compressed with zstd"),
        "{text}"
    );
}
