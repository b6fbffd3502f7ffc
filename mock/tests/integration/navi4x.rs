//! The RDNA4 profiles (`navi48` = RX 9070 XT, gfx1201; `navi44` = RX 9060 XT, gfx1200) present
//! themselves as the parts do: PCI identity and BARs, a discovery table the driver's parser
//! reads into the IP versions Linux pairs with GC 12.0.x, and a firmware plan of Debian's files.

use std::path::PathBuf;

use am_driver::{Discovery, HwIp, IpVersion, PciDevice};
use am_firmware::{FirmwareSet, IpVersions, Locator, PlanOptions};
use am_mock::MockGpu;

const GIB: u64 = 1 << 30;

struct Part {
    profile: &'static str,
    device_id: u32,
    target: &'static str,
    vram: u64,
    se: u32,
    gc: (u8, u8, u8),
    mp: (u8, u8, u8),
    sdma: (u8, u8, u8),
}

const PARTS: [Part; 2] = [
    Part {
        profile: "navi48",
        device_id: 0x7550,
        target: "gfx1201",
        vram: 16 * GIB,
        se: 4,
        gc: (12, 0, 1),
        mp: (14, 0, 3),
        sdma: (7, 0, 1),
    },
    Part {
        profile: "navi44",
        device_id: 0x7590,
        target: "gfx1200",
        vram: 8 * GIB,
        se: 2,
        gc: (12, 0, 0),
        mp: (14, 0, 2),
        sdma: (7, 0, 0),
    },
];

fn ver((a, b, c): (u8, u8, u8)) -> IpVersion {
    IpVersion::new(a, b, c)
}

#[test]
fn config_space_names_the_rdna4_parts() {
    for p in &PARTS {
        let gpu = MockGpu::new(p.profile).unwrap();
        let d = gpu.open();
        let name = p.profile;
        assert_eq!(d.config_read(0x00, 2).unwrap(), 0x1002, "{name}: vendor");
        assert_eq!(d.config_read(0x02, 2).unwrap(), p.device_id, "{name}");
        assert_eq!(d.config_read(0x08, 1).unwrap(), 0xc0, "{name}: revision");
        // Class 0x030000: a VGA-compatible display controller, as consumer boards are.
        assert_eq!(d.config_read(0x09, 1).unwrap(), 0x00, "{name}: prog-if");
        assert_eq!(d.config_read(0x0a, 2).unwrap(), 0x0300, "{name}: class");
        assert_eq!(gpu.profile().gfx_target().unwrap().name(), p.target);
        // BAR0 starts at 256 MiB and Resizable BAR grows it to cover all of VRAM.
        assert_eq!(d.bar_info(0).unwrap().size, 256 << 20, "{name}: BAR0");
        d.resize_bar(0).unwrap();
        assert_eq!(d.bar_info(0).unwrap().size, p.vram, "{name}: BAR0 resized");
        assert_eq!(d.bar_info(2).unwrap().size, 2 << 20, "{name}: doorbells");
        assert_eq!(d.bar_info(5).unwrap().size, 1 << 20, "{name}: registers");
        assert!(gpu.violations().is_empty(), "{:?}", gpu.violations());
    }
}

#[test]
fn driver_discovery_reads_the_gc12_ip_versions_and_shader_config() {
    for p in &PARTS {
        let gpu = MockGpu::new(p.profile).unwrap();
        let dev = gpu.open();
        let disc = Discovery::read(&*dev).unwrap();
        let name = p.profile;
        assert_eq!(disc.vram_size, p.vram, "{name}: RCC_CONFIG_MEMSIZE");
        let want = [
            (HwIp::GC, ver(p.gc)),
            (HwIp::SDMA0, ver(p.sdma)),
            (HwIp::SDMA1, ver(p.sdma)),
            (HwIp::MMHUB, ver((4, 1, 0))),
            (HwIp::ATHUB, ver((4, 1, 0))),
            (HwIp::NBIO, ver((6, 3, 1))),
            (HwIp::MP0, ver(p.mp)),
            (HwIp::MP1, ver(p.mp)),
            (HwIp::HDP, ver((7, 0, 0))),
            (HwIp::OSSSYS, ver((7, 0, 0))),
            (HwIp::SMUIO, ver((14, 0, 2))),
        ];
        for (ip, v) in want {
            assert_eq!(disc.version(ip), Some(v), "{name}: {ip:?}");
        }
        // The SOC21 apertures navi31 has (and tinygrad's GC 12.0.0 mock): GC segment 0.
        assert_eq!(disc.entry(HwIp::GC, 0).unwrap().bases[0], 0x1260);
        let gc = disc.table.gc_info.as_ref().unwrap();
        assert_eq!(gc.num_se, p.se, "{name}: shader engines");
        assert_eq!((gc.num_sh_per_se, gc.num_cu_per_sh), (2, 8), "{name}");
        assert_eq!(gc.cus_per_xcc(), u64::from(p.se) * 16, "{name}: CUs");
        assert_eq!((gc.wave_size, gc.lds_size), (32, 64), "{name}: wave32");
        assert!(gpu.violations().is_empty(), "{:?}", gpu.violations());
    }
}

#[test]
fn firmware_plan_names_debians_gc12_files() {
    for p in &PARTS {
        let v = |(a, b, c): (u8, u8, u8)| am_firmware::IpVersion::new(a, b, c);
        let ips = IpVersions {
            gc: v(p.gc),
            mp0: v(p.mp),
            mp1: v(p.mp),
            sdma: v(p.sdma),
        };
        let tag = |(a, b, c): (u8, u8, u8)| format!("{a}_{b}_{c}");
        let (gc, mp, sdma) = (tag(p.gc), tag(p.mp), tag(p.sdma));
        let names: Vec<String> = ips.files().into_iter().map(|f| f.name).collect();
        assert_eq!(
            names,
            [
                format!("psp_{mp}_sos.bin"),
                format!("smu_{mp}.bin"),
                format!("sdma_{sdma}.bin"),
                format!("gc_{gc}_pfp.bin"),
                format!("gc_{gc}_me.bin"),
                format!("gc_{gc}_mec.bin"),
                format!("gc_{gc}_imu.bin"),
                format!("gc_{gc}_rlc.bin"),
            ],
            "{}",
            p.profile
        );
        // Debian's firmware-amd-graphics has every one of them, and they make a plan.
        let loc = Locator::new(vec![PathBuf::from("/lib/firmware/amdgpu")]);
        let set = FirmwareSet::load(ips, &loc).unwrap();
        let plan = set.plan(PlanOptions::default()).unwrap();
        assert!(
            plan.steps.len() > 10,
            "{}: {} steps",
            p.profile,
            plan.steps.len()
        );
    }
}
