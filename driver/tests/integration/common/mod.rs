//! Test helpers: discovery tables built from the `discovery.h` structs, and a small fake PCI
//! device with VRAM behind BAR0 and the MM_INDEX/MM_DATA window in BAR5.
#![allow(dead_code)]

use std::sync::{Arc, Mutex};

use am_autogen::discovery as layout;
use am_autogen::hwid;
use am_driver::discovery::DISCOVERY_TMR_SIZE;
use am_driver::{Bar, BarInfo, Error, ErrorKind, PciDevice, Result, SysMem};
use std::mem::offset_of;
use zerocopy::{FromZeros, IntoBytes};

/// One `ip_v4` entry to put in a table.
#[derive(Clone, Debug)]
pub struct Ip {
    pub hw_id: u16,
    pub instance: u8,
    pub version: (u8, u8, u8),
    pub bases: Vec<u64>,
}

pub fn ip(hw_id: u16, instance: u8, version: (u8, u8, u8), bases: &[u64]) -> Ip {
    Ip {
        hw_id,
        instance,
        version,
        bases: bases.to_vec(),
    }
}

/// Which `gc_info` to write.
#[derive(Clone, Copy, Debug)]
pub enum Gc {
    /// v1.0: SE, WGPs per SA (wgp0 + wgp1), SA per SE, wave size, LDS.
    V1 {
        se: u32,
        wgp0: u32,
        wgp1: u32,
        sa: u32,
        wave: u32,
        lds: u32,
    },
    /// v2.0: SE, CU per SH, SH per SE, wave size, LDS.
    V2 {
        se: u32,
        cu: u32,
        sh: u32,
        wave: u32,
        lds: u32,
    },
    None,
}

pub const IP_OFF: usize = 0x40;
pub const DIE_OFF: usize = 0x200;
pub const DIE_STRIDE: usize = 0x400;
pub const HARVEST_OFF: usize = 0x2000;
pub const GC_OFF: usize = 0x2200;

/// A discovery table of `DISCOVERY_TMR_SIZE` bytes with the given dies, base width, harvest
/// entries and gc_info, and a correct binary checksum.
pub fn build_table(dies: &[Vec<Ip>], bits64: bool, harvest: &[(u16, u8)], gc: Gc) -> Vec<u8> {
    let mut t = vec![0u8; DISCOVERY_TMR_SIZE];
    let put = |t: &mut Vec<u8>, off: usize, b: &[u8]| t[off..off + b.len()].copy_from_slice(b);

    // `ip_discovery_header` ends in a union (no `IntoBytes`): write its fields in place.
    let ih = |field: usize| IP_OFF + field;
    put(
        &mut t,
        ih(offset_of!(layout::ip_discovery_header, signature)),
        &layout::DISCOVERY_TABLE_SIGNATURE.to_le_bytes(),
    );
    put(
        &mut t,
        ih(offset_of!(layout::ip_discovery_header, version)),
        &4u16.to_le_bytes(),
    );
    put(
        &mut t,
        ih(offset_of!(layout::ip_discovery_header, num_dies)),
        &(dies.len() as u16).to_le_bytes(),
    );
    let mut flags = layout::ip_discovery_header__bindgen_ty_1__bindgen_ty_1::new_zeroed();
    flags.set_base_addr_64_bit(u8::from(bits64));
    put(
        &mut t,
        ih(offset_of!(layout::ip_discovery_header, __bindgen_anon_1)),
        flags.as_bytes(),
    );
    for (d, ips) in dies.iter().enumerate() {
        let die_off = DIE_OFF + d * DIE_STRIDE;
        let info = layout::die_info {
            die_id: d as u16,
            die_offset: die_off as u16,
        };
        let at = ih(offset_of!(layout::ip_discovery_header, die_info))
            + d * size_of::<layout::die_info>();
        put(&mut t, at, info.as_bytes());
        let dh = layout::die_header {
            die_id: d as u16,
            num_ips: ips.len() as u16,
        };
        put(&mut t, die_off, dh.as_bytes());
        let mut off = die_off + size_of::<layout::die_header>();
        for ip in ips {
            // The 8-byte entry head: hw_id, instance, num_base_address, major, minor,
            // revision, sub_revision/variant.
            put(&mut t, off, &ip.hw_id.to_le_bytes());
            let (ma, mi, rev) = ip.version;
            put(
                &mut t,
                off + 2,
                &[ip.instance, ip.bases.len() as u8, ma, mi, rev, 0],
            );
            off += am_driver::discovery::IP_ENTRY_HEAD;
            for &b in &ip.bases {
                if bits64 {
                    put(&mut t, off, &b.to_le_bytes());
                    off += 8;
                } else {
                    put(&mut t, off, &(b as u32).to_le_bytes());
                    off += 4;
                }
            }
            assert!(off < die_off + DIE_STRIDE, "test die too large");
        }
    }

    let mut bhdr = layout::binary_header::new_zeroed();
    bhdr.binary_signature = layout::BINARY_SIGNATURE;
    bhdr.version_major = 1;
    bhdr.binary_size = DISCOVERY_TMR_SIZE as u16;
    bhdr.table_list[layout::IP_DISCOVERY as usize].offset = IP_OFF as u16;
    if !harvest.is_empty() {
        let mut h = layout::harvest_table::new_zeroed();
        h.header.signature = layout::HARVEST_TABLE_SIGNATURE;
        for (i, &(hw_id, instance)) in harvest.iter().enumerate() {
            h.list[i] = layout::harvest_info {
                hw_id,
                number_instance: instance,
                reserved: 0,
            };
        }
        put(&mut t, HARVEST_OFF, h.as_bytes());
        bhdr.table_list[layout::HARVEST_INFO as usize].offset = HARVEST_OFF as u16;
    }
    let header = |major, size| layout::gpu_info_header {
        table_id: layout::GC_TABLE_ID,
        version_major: major,
        version_minor: 0,
        size,
    };
    match gc {
        Gc::V1 {
            se,
            wgp0,
            wgp1,
            sa,
            wave,
            lds,
        } => {
            let mut g = layout::gc_info_v1_0::new_zeroed();
            g.header = header(1, size_of::<layout::gc_info_v1_0>() as u32);
            g.gc_num_se = se;
            g.gc_num_wgp0_per_sa = wgp0;
            g.gc_num_wgp1_per_sa = wgp1;
            g.gc_num_sa_per_se = sa;
            g.gc_wave_size = wave;
            g.gc_lds_size = lds;
            put(&mut t, GC_OFF, g.as_bytes());
            bhdr.table_list[layout::GC as usize].offset = GC_OFF as u16;
        }
        Gc::V2 {
            se,
            cu,
            sh,
            wave,
            lds,
        } => {
            let mut g = layout::gc_info_v2_0::new_zeroed();
            g.header = header(2, size_of::<layout::gc_info_v2_0>() as u32);
            g.gc_num_se = se;
            g.gc_num_cu_per_sh = cu;
            g.gc_num_sh_per_se = sh;
            g.gc_wave_size = wave;
            g.gc_lds_size = lds;
            put(&mut t, GC_OFF, g.as_bytes());
            bhdr.table_list[layout::GC as usize].offset = GC_OFF as u16;
        }
        Gc::None => {}
    }
    put(&mut t, 0, bhdr.as_bytes());
    let sum = t[10..DISCOVERY_TMR_SIZE]
        .iter()
        .fold(0u16, |a, &b| a.wrapping_add(u16::from(b)));
    t[8..10].copy_from_slice(&sum.to_le_bytes());
    t
}

pub const GC_HWID: u16 = hwid::GC_HWID;
pub const MMHUB_HWID: u16 = hwid::MMHUB_HWID;
pub const NBIF_HWID: u16 = hwid::NBIF_HWID;
pub const SDMA0_HWID: u16 = hwid::SDMA0_HWID;
pub const MP0_HWID: u16 = hwid::MP0_HWID;
pub const MP1_HWID: u16 = hwid::MP1_HWID;
pub const HDP_HWID: u16 = hwid::HDP_HWID;
pub const OSSSYS_HWID: u16 = hwid::OSSSYS_HWID;

/// A Navi31-like table: GC 11.0.0 and friends, 32-bit bases, gc_info v1 with 96 CUs.
pub fn navi31_like() -> Vec<u8> {
    build_table(
        &[vec![
            ip(
                GC_HWID,
                0,
                (11, 0, 0),
                &[0x1260, 0xa000, 0x1c000, 0x2402c00],
            ),
            ip(HDP_HWID, 0, (6, 0, 0), &[0xf20, 0x240a400]),
            ip(
                SDMA0_HWID,
                0,
                (6, 0, 0),
                &[0x1260, 0xa000, 0x1c000, 0x2402c00],
            ),
            ip(MMHUB_HWID, 0, (3, 0, 0), &[0x1a000, 0x2408800]),
            ip(
                NBIF_HWID,
                0,
                (4, 3, 0),
                &[0, 0x14, 0xd20, 0x10400, 0x241b000, 0x4040000],
            ),
            ip(
                MP0_HWID,
                0,
                (13, 0, 0),
                &[0x16000, 0xdc0000, 0xe00000, 0xe40000, 0x243fc00],
            ),
            ip(
                MP1_HWID,
                0,
                (13, 0, 0),
                &[0x16000, 0xdc0000, 0xe00000, 0xe40000, 0x243fc00],
            ),
            ip(OSSSYS_HWID, 0, (6, 0, 0), &[0x4280, 0x240a000]),
        ]],
        false,
        &[],
        Gc::V1 {
            se: 6,
            wgp0: 4,
            wgp1: 0,
            sa: 2,
            wave: 32,
            lds: 64,
        },
    )
}

/// An MI300X-like table: 4 dies (AIDs), 2 GC 9.4.3 per die, one MMHUB per die, 64-bit
/// bases with AID bits above bit 32.
pub fn mi300x_like(harvest: &[(u16, u8)]) -> Vec<u8> {
    let dies: Vec<Vec<Ip>> = (0..4u8)
        .map(|aid| {
            // Bits above 32 carry the AID (ASIC-specific); the low half is the MMIO base.
            let hi = u64::from(aid) << 32;
            let xcc = |n: u8| hi | (0xa000 + u64::from(n) * 0x20000);
            let mut v = vec![
                ip(GC_HWID, aid * 2, (9, 4, 3), &[hi | 0x1260, xcc(aid * 2)]),
                ip(
                    GC_HWID,
                    aid * 2 + 1,
                    (9, 4, 3),
                    &[hi | 0x1260, xcc(aid * 2 + 1)],
                ),
                ip(MMHUB_HWID, aid, (1, 8, 0), &[hi | 0x1a000, hi | 0x2408800]),
            ];
            if aid == 0 {
                v.push(ip(
                    NBIF_HWID,
                    0,
                    (7, 9, 0),
                    &[0, 0x14, 0xd20, 0x10400, 0x241b000],
                ));
                v.push(ip(MP0_HWID, 0, (13, 0, 6), &[0x16000, 0x243fc00]));
            }
            v
        })
        .collect();
    build_table(
        &dies,
        true,
        harvest,
        Gc::V2 {
            se: 4,
            cu: 10,
            sh: 1,
            wave: 64,
            lds: 64,
        },
    )
}

/// A fake PCI device: VRAM of `vram_size` bytes of which BAR0 shows the first `bar0_len`,
/// BAR5 with `RCC_CONFIG_MEMSIZE`, `RCC_IOV_FUNC_IDENTIFIER` and the MM_INDEX/MM_DATA
/// window. Counts window reads so a test can tell which path was taken.
pub struct FakeDevice {
    pub vram: Arc<Mutex<Vec<u8>>>,
    pub bar0: Arc<FakeVram>,
    pub bar5: Arc<FakeMmio>,
}

pub struct FakeVram {
    vram: Arc<Mutex<Vec<u8>>>,
    len: u64,
}

pub struct FakeMmio {
    vram: Arc<Mutex<Vec<u8>>>,
    pub regs: Mutex<Vec<u32>>,
    pub window_reads: Mutex<u64>,
    /// Every dword write, in order: (dword index, value).
    pub writes: Mutex<Vec<(usize, u32)>>,
}

fn oob(what: &str, offset: u64, size: u64, len: u64) -> Error {
    Error::new(
        "fake",
        ErrorKind::OutOfRange {
            what: what.into(),
            offset,
            size,
            len,
        },
    )
}

impl Bar for FakeVram {
    fn len(&self) -> u64 {
        self.len
    }
    fn read_bytes(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        if offset + buf.len() as u64 > self.len {
            return Err(oob("BAR0", offset, buf.len() as u64, self.len));
        }
        let v = self.vram.lock().unwrap();
        buf.copy_from_slice(&v[offset as usize..offset as usize + buf.len()]);
        Ok(())
    }
    fn write_bytes(&self, offset: u64, data: &[u8]) -> Result<()> {
        if offset + data.len() as u64 > self.len {
            return Err(oob("BAR0", offset, data.len() as u64, self.len));
        }
        self.vram.lock().unwrap()[offset as usize..offset as usize + data.len()]
            .copy_from_slice(data);
        Ok(())
    }
}

pub const MMIO_DWORDS: usize = 0x10000;

impl Bar for FakeMmio {
    fn len(&self) -> u64 {
        (MMIO_DWORDS * 4) as u64
    }
    fn read32(&self, offset: u64) -> Result<u32> {
        let i = (offset / 4) as usize;
        if !offset.is_multiple_of(4) || i >= MMIO_DWORDS {
            return Err(oob("BAR5", offset, 4, self.len()));
        }
        if i == 1 {
            let regs = self.regs.lock().unwrap();
            let addr = (u64::from(regs[6]) << 31) | u64::from(regs[0] & 0x7fff_ffff);
            assert!(regs[0] & 0x8000_0000 != 0, "MM_INDEX without the VRAM bit");
            *self.window_reads.lock().unwrap() += 1;
            let v = self.vram.lock().unwrap();
            let a = addr as usize;
            return Ok(u32::from_le_bytes(v[a..a + 4].try_into().unwrap()));
        }
        Ok(self.regs.lock().unwrap()[i])
    }
    fn write32(&self, offset: u64, value: u32) -> Result<()> {
        let i = (offset / 4) as usize;
        if !offset.is_multiple_of(4) || i >= MMIO_DWORDS {
            return Err(oob("BAR5", offset, 4, self.len()));
        }
        self.regs.lock().unwrap()[i] = value;
        self.writes.lock().unwrap().push((i, value));
        Ok(())
    }
    fn read_bytes(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        Err(oob("BAR5 bytes", offset, buf.len() as u64, self.len()))
    }
    fn write_bytes(&self, offset: u64, data: &[u8]) -> Result<()> {
        Err(oob("BAR5 bytes", offset, data.len() as u64, self.len()))
    }
}

impl FakeDevice {
    /// A device with `vram_mib` MiB of VRAM, BAR0 of `bar0_len` bytes, and `table` placed at
    /// `VRAM - 64 KiB`.
    pub fn new(vram_mib: u32, bar0_len: u64, table: &[u8]) -> Self {
        let vram_size = (vram_mib as usize) << 20;
        let mut v = vec![0u8; vram_size];
        let at = vram_size - (64 << 10);
        v[at..at + table.len()].copy_from_slice(table);
        let vram = Arc::new(Mutex::new(v));
        let mut regs = vec![0u32; MMIO_DWORDS];
        regs[0xde3] = vram_mib;
        Self {
            bar0: Arc::new(FakeVram {
                vram: vram.clone(),
                len: bar0_len,
            }),
            bar5: Arc::new(FakeMmio {
                vram: vram.clone(),
                regs: Mutex::new(regs),
                window_reads: Mutex::new(0),
                writes: Mutex::new(Vec::new()),
            }),
            vram,
        }
    }
}

impl PciDevice for FakeDevice {
    fn name(&self) -> &str {
        "fake:0"
    }
    fn backend(&self) -> &'static str {
        "fake"
    }
    fn config_read(&self, _offset: u16, _size: u8) -> Result<u32> {
        Ok(0)
    }
    fn config_write(&self, _offset: u16, _size: u8, _value: u32) -> Result<()> {
        Ok(())
    }
    fn bar_info(&self, index: u8) -> Result<BarInfo> {
        let size = match index {
            0 => self.bar0.len(),
            5 => self.bar5.len(),
            _ => 0,
        };
        Ok(BarInfo {
            index,
            bus_addr: 0,
            size,
        })
    }
    fn bar(&self, index: u8) -> Result<Arc<dyn Bar>> {
        match index {
            0 => Ok(self.bar0.clone()),
            5 => Ok(self.bar5.clone()),
            _ => Err(Error::new(
                "fake:0",
                ErrorKind::NoBar {
                    bar: index,
                    reason: "none".into(),
                },
            )),
        }
    }
    fn resize_bar(&self, _index: u8) -> Result<()> {
        Ok(())
    }
    fn alloc_sysmem(&self, _size: usize, _contiguous: bool) -> Result<Arc<dyn SysMem>> {
        Err(Error::new(
            "fake:0",
            ErrorKind::Unsupported {
                op: "sysmem",
                backend: "fake",
            },
        ))
    }
    fn reset(&self) -> Result<()> {
        Ok(())
    }
}
