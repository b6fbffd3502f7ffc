//! The mi350x-vf device with the PF side of the mailbox wired in: access is granted and
//! released through the mailbox registers of BAR5, as a VF driver does it.

use am_driver::{Bar, PciDevice};
use am_mock::MockGpu;
use am_mock::vf_pf::MailboxMessage;

const TRN_DW0: u64 = 0xe56 * 4;
const RCV_DW0: u64 = 0xe5a * 4;
const TRN: u64 = 0xe5e * 4;
const RCV: u64 = 0xe5e * 4 + 1;

/// One mailbox request the way `sriov-vf.md` describes it (no fault handling: the PF here
/// answers at once).
fn request(mmio: &dyn Bar, req: u32, data2: u32, event: Option<u32>) {
    mmio.write8(TRN, 0).unwrap();
    assert_eq!(mmio.read8(TRN).unwrap() & 2, 0, "ack clear");
    for (i, v) in [req, 0, data2, 0].into_iter().enumerate() {
        mmio.write32(TRN_DW0 + 4 * i as u64, v).unwrap();
    }
    mmio.write8(TRN, 1).unwrap();
    assert_ne!(mmio.read8(TRN).unwrap() & 2, 0, "PF ack");
    mmio.write8(TRN, 0).unwrap();
    if let Some(e) = event {
        assert_eq!(mmio.read32(RCV_DW0).unwrap(), e);
        mmio.write8(RCV, 2).unwrap();
    }
}

#[test]
fn init_access_through_the_mailbox_opens_mmio_and_vram() {
    let gpu = MockGpu::new("mi350x-vf").unwrap();
    let d = gpu.open();
    let mmio = d.bar(5).unwrap();
    let vram = d.bar(0).unwrap();
    let disc = gpu.profile().vram_size - (64 << 10);
    assert_eq!(vram.read32(disc).unwrap(), u32::MAX);
    request(&*mmio, 6, 2, Some(7)); // REQ_GPU_INIT_DATA → INIT_DATA_READY
    assert_eq!(
        vram.read32(disc).unwrap(),
        u32::MAX,
        "INIT_DATA does not grant access"
    );
    request(&*mmio, 1, 0, Some(1)); // REQ_GPU_INIT_ACCESS → READY_TO_ACCESS_GPU
    assert_eq!(vram.read32(disc).unwrap(), 0x2821_1407);
    assert_eq!(mmio.read32(0xde3 * 4).unwrap(), 288 * 1024);
    request(&*mmio, 2, 0, None); // REL_GPU_INIT_ACCESS
    assert_eq!(
        mmio.read32(0xde3 * 4).unwrap(),
        u32::MAX,
        "released: gated again"
    );
    let requests: Vec<u32> = gpu
        .with_vf_pf(|pf| {
            pf.log()
                .iter()
                .filter_map(|m| match m {
                    MailboxMessage::Request { request, .. } => Some(*request),
                    _ => None,
                })
                .collect()
        })
        .unwrap();
    assert_eq!(requests, vec![6, 1, 2]);
    assert!(gpu.violations().is_empty(), "{:?}", gpu.violations());
}

#[test]
fn mailbox_contract_breaches_are_device_violations() {
    let gpu = MockGpu::new("mi350x-vf").unwrap();
    let mmio = gpu.open().bar(5).unwrap();
    assert!(
        mmio.write32(TRN, 1).is_err(),
        "MAILBOX_CONTROL is byte-wide for writes"
    );
    let v = gpu.violations();
    assert_eq!(v.len(), 1);
    assert!(
        v[0].register
            .as_deref()
            .unwrap()
            .contains("MAILBOX_CONTROL"),
        "{:?}",
        v[0]
    );
}

#[test]
fn flr_revokes_mailbox_access() {
    let gpu = MockGpu::new("mi350x-vf").unwrap();
    let d = gpu.open();
    let mmio = d.bar(5).unwrap();
    request(&*mmio, 1, 0, Some(1));
    assert_eq!(mmio.read32(0xde3 * 4).unwrap(), 288 * 1024);
    d.reset().unwrap();
    assert_eq!(mmio.read32(0xde3 * 4).unwrap(), u32::MAX);
}

#[test]
fn pf_profiles_have_no_vf_mailbox() {
    let gpu = MockGpu::new("navi31").unwrap();
    assert!(gpu.with_vf_pf(|_| ()).is_none());
}

/// BAR5 byte offset of an MP register (MP0 and MP1 names share the MP0 instance's bases).
fn mp(gpu: &MockGpu, name: &str) -> u64 {
    use am_autogen::hwid::MP0_HWID;
    use am_autogen::regs::{RegIp, table};
    let ver = gpu.profile().version(MP0_HWID).unwrap();
    let r = table(RegIp::Mp, ver).unwrap().by_name(name).unwrap();
    let i = gpu.profile().instances(MP0_HWID).next().unwrap();
    (i.bases[usize::from(r.base_idx())] + u64::from(r.offset())) * 4
}

#[test]
fn psp_and_smu_accesses_after_init_access_are_violations() {
    let gpu = MockGpu::new("mi350x-vf").unwrap();
    let mmio = gpu.open().bar(5).unwrap();
    // Gated: the PF answers all-ones and the access reaches nothing.
    assert_eq!(
        mmio.read32(mp(&gpu, "MP1_SMN_C2PMSG_90")).unwrap(),
        u32::MAX
    );
    assert!(gpu.violations().is_empty());
    request(&*mmio, 6, 2, Some(7));
    request(&*mmio, 1, 0, Some(1));
    for (name, owner) in [
        ("MP0_SMN_C2PMSG_81", "PSP"),
        ("MP0_SMN_C2PMSG_35", "PSP"),
        ("MP1_SMN_C2PMSG_90", "SMU"),
        ("MP1_SMN_C2PMSG_66", "SMU"),
    ] {
        assert!(mmio.read32(mp(&gpu, name)).is_err(), "{name} read");
        assert!(mmio.write32(mp(&gpu, name), 0).is_err(), "{name} write");
        let v = gpu.take_violations();
        assert_eq!(v.len(), 2, "{name}: {v:?}");
        for x in &v {
            assert!(x.register.as_deref().unwrap().starts_with(name), "{x}");
            assert!(
                x.reason.contains(&format!("the {owner} belongs to the PF")),
                "{x}"
            );
        }
    }
}
