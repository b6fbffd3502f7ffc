//! File names: which kind of header a name implies, which files a set of IP versions
//! needs, and profile names.

// Tests may unwrap: a panic is the failure report.

use am_firmware::parse::Kind;
use am_firmware::{FirmwareError, IpVersion, IpVersions, Role};

#[test]
fn file_names_imply_their_header_kind() {
    for (name, kind) in [
        ("psp_13_0_0_sos.bin", Kind::PspSos),
        ("psp_13_0_6_sos.bin.zst", Kind::PspSos),
        ("psp_13_0_6_ta.bin", Kind::Ta),
        ("smu_13_0_14.bin", Kind::Smc),
        ("sdma_4_4_2.bin", Kind::Sdma),
        ("gc_11_0_0_pfp.bin", Kind::Gfx),
        ("gc_11_0_0_me.bin", Kind::Gfx),
        ("gc_9_4_3_mec.bin", Kind::Gfx),
        ("gc_9_4_3_sjt_mec.bin", Kind::Gfx),
        ("gc_11_0_0_imu.bin", Kind::Imu),
        ("gc_11_0_0_rlc.bin", Kind::Rlc),
        ("gc_11_0_0_rlc_1.bin", Kind::Rlc),
        ("gc_11_0_0_mes_2.bin", Kind::Mes),
        ("gc_11_0_0_mes1.bin", Kind::Mes),
        ("gc_12_0_1_uni_mes.bin", Kind::Mes),
        ("gc_12_0_1_toc.bin", Kind::Other),
        ("vega10_smc.bin", Kind::Smc),
        ("polaris10_k_smc.bin", Kind::Smc),
        ("navi10_sdma1.bin", Kind::Sdma),
        ("vega10_rlc.bin", Kind::Rlc),
        ("navi10_mes.bin", Kind::Mes),
        ("navi10_sos.bin", Kind::PspSos),
        ("navi10_ce.bin", Kind::Gfx),
        ("vcn_4_0_0.bin", Kind::Other),
    ] {
        assert_eq!(Kind::from_file_name(name), kind, "{name}");
    }
}

#[test]
fn gc_12_adds_pfp_and_me_and_mp1_13_0_12_drops_the_smu_file() {
    let ips = IpVersions {
        gc: IpVersion::new(12, 0, 0),
        mp0: IpVersion::new(14, 0, 2),
        mp1: IpVersion::new(14, 0, 2),
        sdma: IpVersion::new(7, 0, 0),
    };
    let roles: Vec<Role> = ips.files().iter().map(|f| f.role).collect();
    assert_eq!(
        roles,
        [
            Role::Sos,
            Role::Smu,
            Role::Sdma,
            Role::Pfp,
            Role::Me,
            Role::Mec,
            Role::Imu,
            Role::Rlc
        ]
    );
    let mi300a_like = IpVersions {
        mp1: IpVersion::new(13, 0, 12),
        ..IpVersions::MI300X
    };
    let names: Vec<String> = mi300a_like.files().into_iter().map(|f| f.name).collect();
    assert_eq!(
        names,
        [
            "psp_13_0_6_sos.bin",
            "sdma_4_4_2.bin",
            "gc_9_4_3_mec.bin",
            "gc_9_4_3_rlc.bin"
        ]
    );
}

#[test]
fn profiles_by_name() {
    assert_eq!(IpVersions::by_name("navi31").unwrap(), IpVersions::NAVI31);
    assert_eq!(IpVersions::by_name("mi300x").unwrap(), IpVersions::MI300X);
    assert_eq!(
        IpVersions::by_name("mi350x-vf").unwrap(),
        IpVersions::MI350X
    );
    assert!(matches!(
        IpVersions::by_name("navi21"),
        Err(FirmwareError::UnknownProfile(name)) if name == "navi21"
    ));
}
