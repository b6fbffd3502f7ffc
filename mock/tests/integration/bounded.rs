//! A mock served for a long time stays bounded: what it records for tests is capped, and no
//! size a driver writes into a register reaches an allocation unchecked.

use am_autogen::hwid::{MP0_HWID, MP1_HWID};
use am_autogen::regs::{RegIp, table};
use am_autogen::smu::v13_0_0 as s0;
use am_driver::PciDevice;
use am_mock::{MAX_VIOLATIONS, MockGpu};

/// BAR5 byte offset of an MP register on `gpu`.
fn mp_reg(gpu: &MockGpu, hwid: u16, name: &str) -> u64 {
    let ver = gpu.profile().version(hwid).unwrap();
    let r = table(RegIp::Mp, ver).unwrap().by_name(name).unwrap();
    let i = gpu.profile().instances(hwid).next().unwrap();
    (i.bases[usize::from(r.base_idx())] + u64::from(r.offset())) * 4
}

#[test]
fn the_violation_list_is_capped_and_the_count_kept() {
    let gpu = MockGpu::new("navi31").unwrap();
    let bar5 = gpu.open().bar(5).unwrap();
    let n = MAX_VIOLATIONS as u64 * 3 + 7;
    for i in 0..n {
        // A dword of no IP segment: refused and recorded every time.
        let err = bar5.read32(0x3ffff * 4).unwrap_err();
        assert!(err.to_string().contains("0x3ffff"), "read {i}: {err}");
    }
    assert_eq!(gpu.violation_count(), n, "every violation is counted");
    let kept = gpu.violations();
    assert_eq!(kept.len(), MAX_VIOLATIONS, "only the latest are kept");
    assert_eq!(gpu.take_violations().len(), MAX_VIOLATIONS);
    assert_eq!(gpu.violation_count(), 0, "taking them resets the count");
}

#[test]
fn a_huge_psp_ring_size_is_refused_before_anything_is_allocated() {
    let gpu = MockGpu::new("navi31").unwrap();
    let dev = gpu.open();
    let bar5 = dev.bar(5).unwrap();
    let reg = |n: u32| mp_reg(&gpu, MP0_HWID, &format!("MP0_SMN_C2PMSG_{n}"));
    gpu.run_foreign_firmware();
    // The size the hostile client wrote: 4 GiB less one frame.
    bar5.write32(reg(69), 0).unwrap();
    bar5.write32(reg(70), 0).unwrap();
    bar5.write32(reg(71), 0xffff_ffc0).unwrap();
    let err = bar5.write32(reg(64), 2 << 16).unwrap_err().to_string();
    assert!(
        err.contains("size C2PMSG_71 = 0xffffffc0 is larger than the 0x10000 bytes the PSP takes"),
        "{err}"
    );
}

#[test]
fn the_smu_log_stays_bounded_however_many_messages_come() {
    let gpu = MockGpu::new("navi31").unwrap();
    let bar5 = gpu.open().bar(5).unwrap();
    let reg = |n: u32| mp_reg(&gpu, MP1_HWID, &format!("MP1_SMN_C2PMSG_{n}"));
    gpu.run_foreign_firmware();
    for _ in 0..20_000 {
        bar5.write32(reg(90), 0).unwrap();
        bar5.write32(reg(82), 0).unwrap();
        bar5.write32(reg(66), s0::PPSMC_MSG_GetSmuVersion).unwrap();
        assert_eq!(bar5.read32(reg(90)).unwrap(), 1);
    }
    let kept = gpu.with_smu(|s| s.log().len());
    assert!(
        (4096..=8192).contains(&kept),
        "the SMU log keeps the latest messages, not all 20000: {kept}"
    );
}

const CHUNK: u64 = am_mock::vram::CHUNK_SIZE;

#[test]
fn zero_bytes_written_to_unwritten_vram_commit_no_host_memory() {
    let gpu = MockGpu::new("navi31").unwrap();
    let dev = gpu.open();
    dev.resize_bar(0).unwrap();
    let bar0 = dev.bar(0).unwrap();
    let before = gpu.vram().resident_bytes();
    // The client: one byte every 2 MiB, here zeros, from 1 GiB (clear of the
    // discovery table at the top).
    for i in 0..256 {
        bar0.write_bytes((1 << 30) + i * CHUNK + 17, &[0]).unwrap();
    }
    assert_eq!(
        gpu.vram().resident_bytes(),
        before,
        "zeros onto chunks that read as zeros commit nothing"
    );
    let mut b = [0xffu8];
    bar0.read_bytes((1 << 30) + 17, &mut b).unwrap();
    assert_eq!(b, [0], "an absent chunk reads as zeros");
    for i in 0..256 {
        bar0.write_bytes((1 << 30) + i * CHUNK + 17, &[i as u8 | 1])
            .unwrap();
    }
    assert_eq!(
        gpu.vram().resident_bytes(),
        before + 256 * CHUNK,
        "each non-zero byte commits its chunk"
    );
    for i in [0u64, 1, 255] {
        bar0.read_bytes((1 << 30) + i * CHUNK + 17, &mut b).unwrap();
        assert_eq!(b, [i as u8 | 1], "byte of chunk {i}");
    }
    assert!(gpu.violations().is_empty(), "{:?}", gpu.violations());
}

#[test]
fn the_vram_cap_refuses_a_write_naming_the_device_and_the_cap() {
    let gpu = MockGpu::new("navi31").unwrap();
    let dev = gpu.open();
    let bar0 = dev.bar(0).unwrap();
    let cap = gpu.vram().resident_bytes() + 4 * CHUNK;
    gpu.vram().set_limit(cap);
    for i in 0..4 {
        bar0.write32(i * CHUNK, 0x1234_5678).unwrap();
    }
    let err = bar0
        .write32(4 * CHUNK, 0x1234_5678)
        .unwrap_err()
        .to_string();
    assert!(err.contains("mock:navi31:0"), "names the device: {err}");
    assert!(
        err.contains(&format!("cap of {} MiB", cap >> 20)),
        "names the cap: {err}"
    );
    assert_eq!(gpu.vram().resident_bytes(), cap, "nothing past the cap");
    assert_eq!(
        bar0.read32(4 * CHUNK).unwrap(),
        0,
        "the refused write did not land"
    );
    let v = gpu.take_violations();
    assert_eq!((v.len(), v[0].offset), (1, 4 * CHUNK), "{v:?}");
    // What needs no new chunk still lands: committed chunks, zeros anywhere.
    bar0.write32(3 * CHUNK + 8, 9).unwrap();
    bar0.write32(5 * CHUNK, 0).unwrap();
    assert_eq!(bar0.read32(3 * CHUNK + 8).unwrap(), 9);
    assert!(gpu.violations().is_empty(), "{:?}", gpu.violations());
}
