//! The remote PCI client and server against an in-test device: what the client reads and
//! writes through the protocol is exactly what the device holds, and malformed input gets an
//! error or a closed connection, never a crash or an out-of-range access.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use am_driver::pci::remote::protocol::{
    Command, EXT_INDEXED, EXT_OWNER, EXT_SMU, EXTENSIONS_PROBE, RequestHeader, ResponseHeader,
    encode_extensions, encode_probe_filter,
};
use am_driver::pci::remote::{
    RemoteOptions, RemotePciDevice, ServeOptions, probe, probe_amd, serve,
};
use am_driver::{Bar, BarInfo, Error, ErrorKind, IndexStep, Ownership, PciDevice, Result, SysMem};

const BAR0_LEN: usize = 8 << 20;
const BAR5_LEN: usize = 64 << 10;
/// A BAR5 dword the fake refuses to write, as hardware-backed BARs can.
const READ_ONLY_REG: u64 = 0xffc;

/// Accesses that reached a fake outside its range; the server must make this impossible.
static OUT_OF_RANGE: AtomicU32 = AtomicU32::new(0);

fn oor(device: &str, what: &str, offset: u64, size: usize, len: usize) -> Error {
    OUT_OF_RANGE.fetch_add(1, Ordering::SeqCst);
    Error::new(
        device,
        ErrorKind::OutOfRange {
            what: what.into(),
            offset,
            size: size as u64,
            len: len as u64,
        },
    )
}

fn range(offset: u64, size: usize, len: usize) -> Option<std::ops::Range<usize>> {
    let start = usize::try_from(offset).ok()?;
    let end = start.checked_add(size)?;
    (end <= len).then_some(start..end)
}

struct FakeBar {
    device: String,
    index: u8,
    mem: Mutex<Vec<u8>>,
    /// The access width of the last access: `read32`, `write64`, `write_bytes` …
    last: Mutex<&'static str>,
}

impl FakeBar {
    fn new(device: &str, index: u8, len: usize) -> Arc<FakeBar> {
        Arc::new(FakeBar {
            device: device.into(),
            index,
            mem: Mutex::new(vec![0; len]),
            last: Mutex::new(""),
        })
    }

    fn access(&self, op: &'static str, offset: u64, size: usize) -> Result<std::ops::Range<usize>> {
        *self.last.lock().unwrap() = op;
        let len = self.mem.lock().unwrap().len();
        range(offset, size, len).ok_or_else(|| {
            oor(
                &self.device,
                &format!("BAR{}", self.index),
                offset,
                size,
                len,
            )
        })
    }

    fn last(&self) -> &'static str {
        *self.last.lock().unwrap()
    }
}

impl Bar for FakeBar {
    fn len(&self) -> u64 {
        self.mem.lock().unwrap().len() as u64
    }
    fn read32(&self, offset: u64) -> Result<u32> {
        let r = self.access("read32", offset, 4)?;
        Ok(u32::from_le_bytes(
            self.mem.lock().unwrap()[r].try_into().unwrap(),
        ))
    }
    fn write32(&self, offset: u64, value: u32) -> Result<()> {
        let r = self.access("write32", offset, 4)?;
        if self.index == 5 && offset == READ_ONLY_REG {
            return Err(Error::new(
                &self.device,
                ErrorKind::Backend {
                    message: format!("BAR5 {READ_ONLY_REG:#x} is read-only"),
                },
            ));
        }
        self.mem.lock().unwrap()[r].copy_from_slice(&value.to_le_bytes());
        Ok(())
    }
    fn read64(&self, offset: u64) -> Result<u64> {
        let r = self.access("read64", offset, 8)?;
        Ok(u64::from_le_bytes(
            self.mem.lock().unwrap()[r].try_into().unwrap(),
        ))
    }
    fn write64(&self, offset: u64, value: u64) -> Result<()> {
        let r = self.access("write64", offset, 8)?;
        self.mem.lock().unwrap()[r].copy_from_slice(&value.to_le_bytes());
        Ok(())
    }
    fn read8(&self, offset: u64) -> Result<u8> {
        let r = self.access("read8", offset, 1)?;
        Ok(self.mem.lock().unwrap()[r.start])
    }
    fn write8(&self, offset: u64, value: u8) -> Result<()> {
        let r = self.access("write8", offset, 1)?;
        self.mem.lock().unwrap()[r.start] = value;
        Ok(())
    }
    fn read_bytes(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let r = self.access("read_bytes", offset, buf.len())?;
        buf.copy_from_slice(&self.mem.lock().unwrap()[r]);
        Ok(())
    }
    fn write_bytes(&self, offset: u64, data: &[u8]) -> Result<()> {
        let r = self.access("write_bytes", offset, data.len())?;
        self.mem.lock().unwrap()[r].copy_from_slice(data);
        Ok(())
    }
}

struct FakeSysMem {
    mem: Mutex<Vec<u8>>,
    addrs: Vec<u64>,
}

impl SysMem for FakeSysMem {
    fn len(&self) -> usize {
        self.mem.lock().unwrap().len()
    }
    fn bus_addrs(&self) -> &[u64] {
        &self.addrs
    }
    fn read_bytes(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let mem = self.mem.lock().unwrap();
        let r = range(offset, buf.len(), mem.len())
            .ok_or_else(|| oor("fake", "sysmem", offset, buf.len(), mem.len()))?;
        buf.copy_from_slice(&mem[r]);
        Ok(())
    }
    fn write_bytes(&self, offset: u64, data: &[u8]) -> Result<()> {
        let mut mem = self.mem.lock().unwrap();
        let len = mem.len();
        let r = range(offset, data.len(), len)
            .ok_or_else(|| oor("fake", "sysmem", offset, data.len(), len))?;
        mem[r].copy_from_slice(data);
        Ok(())
    }
}

struct FakeDevice {
    name: String,
    config: Mutex<Vec<u8>>,
    bar0: Arc<FakeBar>,
    bar5: Arc<FakeBar>,
    sysmem: Mutex<Vec<Arc<FakeSysMem>>>,
    resets: AtomicU32,
    resized: AtomicU32,
}

impl FakeDevice {
    fn new(name: &str, device_id: u16) -> Arc<FakeDevice> {
        let mut config = vec![0u8; 4096];
        config[0..2].copy_from_slice(&0x1002u16.to_le_bytes());
        config[2..4].copy_from_slice(&device_id.to_le_bytes());
        config[0x0b] = 0x03; // display controller
        Arc::new(FakeDevice {
            name: name.into(),
            config: Mutex::new(config),
            bar0: FakeBar::new(name, 0, BAR0_LEN),
            bar5: FakeBar::new(name, 5, BAR5_LEN),
            sysmem: Mutex::new(Vec::new()),
            resets: AtomicU32::new(0),
            resized: AtomicU32::new(0),
        })
    }

    fn fake_bar(&self, index: u8) -> Result<&Arc<FakeBar>> {
        match index {
            0 => Ok(&self.bar0),
            5 => Ok(&self.bar5),
            _ => Err(Error::new(
                &self.name,
                ErrorKind::NoBar {
                    bar: index,
                    reason: "the fake has BAR0 and BAR5".into(),
                },
            )),
        }
    }
}

impl PciDevice for FakeDevice {
    fn name(&self) -> &str {
        &self.name
    }
    fn backend(&self) -> &'static str {
        "fake"
    }
    fn config_read(&self, offset: u16, size: u8) -> Result<u32> {
        let cfg = self.config.lock().unwrap();
        let r = range(u64::from(offset), usize::from(size), cfg.len())
            .ok_or_else(|| oor(&self.name, "config", offset.into(), size.into(), cfg.len()))?;
        let mut w = [0u8; 4];
        w[..usize::from(size)].copy_from_slice(&cfg[r]);
        Ok(u32::from_le_bytes(w))
    }
    fn config_write(&self, offset: u16, size: u8, value: u32) -> Result<()> {
        let mut cfg = self.config.lock().unwrap();
        let len = cfg.len();
        let r = range(u64::from(offset), usize::from(size), len)
            .ok_or_else(|| oor(&self.name, "config", offset.into(), size.into(), len))?;
        cfg[r].copy_from_slice(&value.to_le_bytes()[..usize::from(size)]);
        Ok(())
    }
    fn bar_info(&self, index: u8) -> Result<BarInfo> {
        let bar = self.fake_bar(index)?;
        Ok(BarInfo {
            index,
            bus_addr: 0xd000_0000 + u64::from(index) * 0x1000_0000,
            size: bar.len(),
        })
    }
    fn bar(&self, index: u8) -> Result<Arc<dyn Bar>> {
        Ok(self.fake_bar(index)?.clone())
    }
    fn resize_bar(&self, index: u8) -> Result<()> {
        self.fake_bar(index)?;
        self.resized.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
    fn alloc_sysmem(&self, size: usize, _contiguous: bool) -> Result<Arc<dyn SysMem>> {
        let mut all = self.sysmem.lock().unwrap();
        let pages = size.div_ceil(4096);
        // Distinct, deliberately non-contiguous bus addresses per allocation.
        let base = 0x1_0000_0000u64 * (all.len() as u64 + 1);
        let addrs = (0..pages as u64).map(|p| base + p * 0x3000).collect();
        let mem = Arc::new(FakeSysMem {
            mem: Mutex::new(vec![0; pages * 4096]),
            addrs,
        });
        all.push(mem.clone());
        Ok(mem)
    }
    fn reset(&self) -> Result<()> {
        self.resets.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

/// Panics on the server's connection threads (named `am-serve …`): they would go unseen,
/// since the listener keeps serving.
static SERVER_PANICS: AtomicU32 = AtomicU32::new(0);

fn count_server_panics() {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if std::thread::current()
                .name()
                .is_some_and(|n| n.starts_with("am-serve"))
            {
                SERVER_PANICS.fetch_add(1, Ordering::SeqCst);
            }
            default(info);
        }));
    });
}

fn start_with(devices: Vec<Arc<dyn PciDevice>>, options: ServeOptions) -> SocketAddr {
    count_server_panics();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || serve(listener, devices, options));
    addr
}

fn start(devices: &[Arc<FakeDevice>]) -> SocketAddr {
    let devices = devices
        .iter()
        .map(|d| d.clone() as Arc<dyn PciDevice>)
        .collect();
    start_with(devices, ServeOptions::default())
}

fn start_one(fake: &Arc<FakeDevice>) -> SocketAddr {
    start(std::slice::from_ref(fake))
}

fn client(addr: SocketAddr, index: u32) -> RemotePciDevice {
    RemotePciDevice::connect("127.0.0.1", addr.port(), index, &RemoteOptions::default()).unwrap()
}

/// A raw connection for speaking the protocol by hand.
struct Raw(TcpStream);

impl Raw {
    fn connect(addr: SocketAddr) -> Raw {
        let s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        Raw(s)
    }

    fn send(&mut self, cmd: u8, dev_id: u32, bar: u32, args: [u64; 3], payload: &[u8]) {
        let mut h = RequestHeader::new(Command::Ping, dev_id, bar, args);
        h.cmd = cmd;
        self.0.write_all(&h.encode()).unwrap();
        self.0.write_all(payload).unwrap();
    }

    /// The next response: `Ok((header, data))`, or `Err(message)` for an error response, or
    /// `None` when the server closed the connection.
    fn answer(
        &mut self,
        data_len: usize,
    ) -> Option<std::result::Result<(ResponseHeader, Vec<u8>), String>> {
        let mut h = [0u8; 17];
        if self.0.read_exact(&mut h).is_err() {
            return None;
        }
        let h = ResponseHeader::decode(&h);
        if h.status != 0 {
            let mut msg = vec![0u8; h.val0 as usize];
            self.0.read_exact(&mut msg).unwrap();
            return Some(Err(String::from_utf8(msg).unwrap()));
        }
        let mut data = vec![0u8; data_len];
        self.0.read_exact(&mut data).unwrap();
        Some(Ok((h, data)))
    }

    fn refused(&mut self) -> String {
        match self.answer(0) {
            Some(Err(msg)) => msg,
            other => panic!("expected an error response, got {other:?}"),
        }
    }

    fn closed(&mut self) -> bool {
        let mut rest = Vec::new();
        matches!(self.0.read_to_end(&mut rest), Ok(0))
    }

    fn ping(&mut self) {
        self.send(Command::Ping as u8, 0, 0, [0; 3], &[]);
        let (h, _) = self.answer(0).unwrap().unwrap();
        assert_eq!(h, ResponseHeader::ok(0, 0));
    }
}

#[test]
fn config_space_reads_and_writes_reach_the_served_device() {
    let fake = FakeDevice::new("fake0", 0x744c);
    let dev = client(start_one(&fake), 0);
    assert_eq!(
        dev.name(),
        format!(
            "remote:127.0.0.1:{}:0",
            dev.name().split(':').nth(2).unwrap()
        )
    );
    assert_eq!(dev.backend(), "remote");
    assert_eq!(dev.remote_name(), "fake0");
    assert_eq!(dev.vendor_id().unwrap(), 0x1002);
    assert_eq!(dev.device_id().unwrap(), 0x744c);
    assert_eq!(dev.config_read(0x0b, 1).unwrap(), 0x03);
    dev.config_write(0x10, 4, 0xdead_beef).unwrap();
    assert_eq!(
        &fake.config.lock().unwrap()[0x10..0x14],
        &[0xef, 0xbe, 0xad, 0xde]
    );
    dev.config_write(0x40, 1, 0x5a).unwrap();
    assert_eq!(dev.config_read(0x40, 4).unwrap(), 0x5a);
    dev.set_bus_master(true).unwrap();
    assert_eq!(fake.config.lock().unwrap()[0x04] & 0b110, 0b110);
}

#[test]
fn bar_accesses_keep_their_width_and_land_where_the_device_holds_them() {
    let fake = FakeDevice::new("fake0", 0x744c);
    let dev = client(start_one(&fake), 0);
    assert_eq!(
        dev.bar_info(5).unwrap(),
        BarInfo {
            index: 5,
            bus_addr: 0x1_2000_0000,
            size: BAR5_LEN as u64
        }
    );
    let bar5 = dev.bar(5).unwrap();
    assert!(
        Arc::ptr_eq(&bar5, &dev.bar(5).unwrap()),
        "bar() returns one mapping"
    );
    assert_eq!(bar5.len(), BAR5_LEN as u64);

    // PING answers after every earlier pipelined write has been applied.
    bar5.write32(0x100, 0x1234_5678).unwrap();
    dev.ping().unwrap();
    assert_eq!(fake.bar5.last(), "write32");
    assert_eq!(bar5.read32(0x100).unwrap(), 0x1234_5678);
    assert_eq!(fake.bar5.last(), "read32");
    assert_eq!(
        &fake.bar5.mem.lock().unwrap()[0x100..0x104],
        &[0x78, 0x56, 0x34, 0x12]
    );

    bar5.write64(0x200, 0x0102_0304_0506_0708).unwrap();
    assert_eq!(bar5.read32(0x204).unwrap(), 0x0102_0304);
    bar5.write64(0x200, 0x1112_1314_1516_1718).unwrap();
    dev.ping().unwrap();
    assert_eq!(fake.bar5.last(), "write64");
    assert_eq!(bar5.read64(0x200).unwrap(), 0x1112_1314_1516_1718);
    assert_eq!(fake.bar5.last(), "read64");

    bar5.write8(0x301, 0xab).unwrap();
    dev.ping().unwrap();
    assert_eq!(fake.bar5.last(), "write8");
    assert_eq!(bar5.read8(0x301).unwrap(), 0xab);
    assert_eq!(fake.bar5.last(), "read8");
    assert_eq!(fake.bar5.mem.lock().unwrap()[0x300..0x303], [0, 0xab, 0]);

    let mut odd = [0u8; 6];
    bar5.read_bytes(0x2ff, &mut odd).unwrap();
    assert_eq!(odd, [0, 0, 0xab, 0, 0, 0]);
    assert_eq!(fake.bar5.last(), "read_bytes");

    let end = BAR5_LEN as u64;
    match bar5.read32(end - 2) {
        Err(Error {
            kind: ErrorKind::OutOfRange {
                offset, size: 4, ..
            },
            ..
        }) => assert_eq!(offset, end - 2),
        other => panic!("a read past the BAR end must be OutOfRange, got {other:?}"),
    }
    assert!(matches!(
        dev.bar(6),
        Err(Error {
            kind: ErrorKind::NoBar { bar: 6, .. },
            ..
        })
    ));
    assert_eq!(OUT_OF_RANGE.load(Ordering::SeqCst), 0);
    assert_eq!(SERVER_PANICS.load(Ordering::SeqCst), 0);
}

#[test]
fn a_multi_mib_write_streams_into_the_bar_and_reads_back() {
    let fake = FakeDevice::new("fake0", 0x744c);
    let dev = client(start_one(&fake), 0);
    let bar0 = dev.bar(0).unwrap();
    // Firmware-sized (a boot writes ~16.8 MB in one go), at an odd offset, in one call.
    let data: Vec<u8> = (0..(5 << 20) + 3)
        .map(|i: u32| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    bar0.write_bytes(3, &data).unwrap();
    let mut back = vec![0u8; data.len()];
    bar0.read_bytes(3, &mut back).unwrap();
    assert!(back == data, "read-back differs from the streamed write");
    let mem = fake.bar0.mem.lock().unwrap();
    assert!(
        mem[3..3 + data.len()] == data[..],
        "the device does not hold the streamed write"
    );
    assert_eq!(mem[..3], [0, 0, 0]);
    assert!(
        mem[3 + data.len()..].iter().all(|&b| b == 0),
        "bytes past the write changed"
    );
}

#[test]
fn system_memory_has_the_devices_bus_addresses_and_contents() {
    let fake = FakeDevice::new("fake0", 0x744c);
    let dev = client(start_one(&fake), 0);
    let a = dev.alloc_sysmem(10_000, false).unwrap();
    let b = dev.alloc_sysmem(4096, true).unwrap();
    assert_eq!(a.len(), 3 * 4096, "rounded up to whole pages");
    let held = fake.sysmem.lock().unwrap().clone();
    assert_eq!(held.len(), 2);
    assert_eq!(a.bus_addrs(), held[0].addrs.as_slice());
    assert_eq!(a.bus_addrs(), [0x1_0000_0000, 0x1_0000_3000, 0x1_0000_6000]);
    assert_eq!(b.bus_addrs(), [0x2_0000_0000]);

    a.write64(0x1ff8, 0x0123_4567_89ab_cdef).unwrap();
    b.write32(0, 0xcafe_f00d).unwrap();
    assert_eq!(a.read64(0x1ff8).unwrap(), 0x0123_4567_89ab_cdef);
    assert_eq!(b.read32(0).unwrap(), 0xcafe_f00d);
    assert_eq!(
        &held[0].mem.lock().unwrap()[0x1ff8..0x2000],
        &0x0123_4567_89ab_cdefu64.to_le_bytes()
    );
    assert_eq!(
        &held[1].mem.lock().unwrap()[..4],
        &0xcafe_f00du32.to_le_bytes()
    );
    assert!(matches!(
        a.read32(3 * 4096 - 2),
        Err(Error {
            kind: ErrorKind::OutOfRange { .. },
            ..
        })
    ));
}

#[test]
fn reset_resize_and_ping_reach_the_device() {
    let fake = FakeDevice::new("fake0", 0x744c);
    let dev = client(start_one(&fake), 0);
    dev.reset().unwrap();
    dev.resize_bar(0).unwrap();
    dev.ping().unwrap();
    assert_eq!(fake.resets.load(Ordering::SeqCst), 1);
    assert_eq!(fake.resized.load(Ordering::SeqCst), 1);
    let err = dev.resize_bar(2).unwrap_err();
    assert!(
        matches!(
            err,
            Error {
                kind: ErrorKind::RemoteRefused { .. },
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("BAR2"), "{err}");
}

#[test]
fn probe_answers_matching_devices_with_their_index() {
    let navi = FakeDevice::new("0000:03:00.0", 0x744c);
    let other = FakeDevice::new("0000:04:00.0", 0x1234);
    let mi300 = FakeDevice::new("mock:mi300x:0", 0x74a1);
    let addr = start(&[navi, other, mi300]);
    let found = probe_amd("127.0.0.1", addr.port(), &RemoteOptions::default()).unwrap();
    let names: Vec<(String, u32)> = found.into_iter().map(|e| (e.name, e.index)).collect();
    assert_eq!(
        names,
        [
            ("0000:03:00.0".to_string(), 0),
            ("mock:mi300x:0".to_string(), 2)
        ]
    );

    // The wire answer is "<name>:<index>" lines and a count.
    let mut raw = Raw::connect(addr);
    let filter = encode_probe_filter(&[(0xff00, 0x7400)]);
    raw.send(0, 0, 0, [0, filter.len() as u64, 0x1002], &filter);
    let text = "0000:03:00.0:0\nmock:mi300x:0:2";
    let (h, data) = raw.answer(text.len()).unwrap().unwrap();
    assert_eq!((h.val0, h.val1), (text.len() as u64, 2));
    assert_eq!(data, text.as_bytes());

    let err = probe(
        "127.0.0.1",
        addr.port(),
        0x10de,
        0,
        &[(0xffff, 0x744c)],
        &RemoteOptions::default(),
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("no device matches vendor 0x10de"),
        "{err}"
    );
    let err = probe(
        "127.0.0.1",
        addr.port(),
        0x1002,
        0x02,
        &[(0xffff, 0x744c)],
        &RemoteOptions::default(),
    )
    .unwrap_err();
    assert!(err.to_string().contains("class 0x2"), "{err}");
}

#[test]
fn a_missing_device_index_is_refused_when_connecting() {
    let addr = start(&[FakeDevice::new("fake0", 0x744c)]);
    let err = RemotePciDevice::connect("127.0.0.1", addr.port(), 3, &RemoteOptions::default())
        .err()
        .unwrap();
    let msg = err.to_string();
    assert!(
        msg.contains("no AMD GPU with index 3") && msg.contains("0 (fake0)"),
        "{msg}"
    );
}

#[test]
fn a_refused_request_leaves_the_connection_usable() {
    let addr = start(&[FakeDevice::new("fake0", 0x744c)]);
    let dev = client(addr, 0);
    let err = dev.config_read(0xffe, 4).unwrap_err();
    assert!(
        matches!(
            err,
            Error {
                kind: ErrorKind::RemoteRefused { .. },
                ..
            }
        ),
        "{err}"
    );
    assert!(
        err.to_string().contains("CFG_READ offset 0xffe size 4"),
        "{err}"
    );
    assert!(
        err.to_string()
            .contains("outside the 0x1000-byte config space"),
        "{err}"
    );
    assert_eq!(dev.vendor_id().unwrap(), 0x1002);
}

#[test]
fn a_failed_write_closes_the_connection_and_the_next_read_says_so() {
    let fake = FakeDevice::new("fake0", 0x744c);
    let dev = client(start_one(&fake), 0);
    let bar5 = dev.bar(5).unwrap();
    bar5.write32(READ_ONLY_REG, 1).unwrap();
    // The next request reads why the write failed; the one after finds the close.
    let err = bar5.read32(0).unwrap_err();
    assert!(
        matches!(
            err,
            Error {
                kind: ErrorKind::RemoteRefused { .. },
                ..
            }
        ),
        "{err}"
    );
    let msg = err.to_string();
    assert!(
        msg.contains("MMIO_WRITE BAR5 offset 0xffc size 0x4 failed, so this connection is closed: fake0: BAR5 0xffc is read-only"),
        "{msg}"
    );
    let later = dev.ping().unwrap_err();
    assert!(
        matches!(
            later,
            Error {
                kind: ErrorKind::RemoteClosed { .. },
                ..
            }
        ),
        "{later}"
    );
    assert!(later.to_string().contains("pipelined write"), "{later}");
    // The server goes on serving others.
    let again = client(start_one(&fake), 0);
    again.ping().unwrap();
}

#[test]
fn a_silent_server_makes_the_client_time_out_naming_the_request() {
    // A server that answers PROBE, then reads requests and never answers.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut h = [0u8; 33];
        s.read_exact(&mut h).unwrap();
        let mut filter = vec![0u8; RequestHeader::decode(&h).arg1 as usize];
        s.read_exact(&mut filter).unwrap();
        let names = b"silent:0";
        s.write_all(&ResponseHeader::ok(names.len() as u64, 1).encode())
            .unwrap();
        s.write_all(names).unwrap();
        let mut sink = Vec::new();
        let _ = s.read_to_end(&mut sink);
    });
    // Long enough for the server thread to answer PROBE on a loaded machine (200 ms was
    // not, in a CI run beside three builds).
    let options = RemoteOptions {
        response_timeout: Duration::from_secs(1),
        ..RemoteOptions::default()
    };
    let dev = RemotePciDevice::connect("127.0.0.1", port, 0, &options).unwrap();
    let err = dev.config_read(0, 2).unwrap_err();
    assert!(
        matches!(
            err,
            Error {
                kind: ErrorKind::RemoteTimeout { .. },
                ..
            }
        ),
        "{err}"
    );
    let msg = err.to_string();
    assert!(
        msg.contains("no answer to CFG_READ offset 0x0 size 2 within 1s"),
        "{msg}"
    );
}

#[test]
fn a_server_that_never_answers_probe_times_out_on_connect() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut sink = Vec::new();
        let _ = s.read_to_end(&mut sink);
    });
    let options = RemoteOptions {
        response_timeout: Duration::from_millis(200),
        ..RemoteOptions::default()
    };
    let err = RemotePciDevice::connect("127.0.0.1", port, 0, &options)
        .err()
        .unwrap();
    assert!(
        err.to_string().contains("no answer to PROBE vendor 0x1002"),
        "{err}"
    );
}

#[test]
fn malformed_requests_get_an_error_or_a_closed_connection() {
    let fake = FakeDevice::new("fake0", 0x744c);
    let options = ServeOptions {
        max_payload: 1 << 20,
        max_sysmem_alloc: 1 << 20,
        ..ServeOptions::default()
    };
    let addr = start_with(vec![fake.clone() as Arc<dyn PciDevice>], options);
    let mut raw = Raw::connect(addr);
    let cfg_read = Command::CfgRead as u8;
    let mmio_read = Command::MmioRead as u8;
    let sysmem_read = Command::SysmemRead as u8;

    // Refusals that keep the connection in step.
    raw.send(cfg_read, 7, 0, [0, 4, 0], &[]);
    assert!(raw.refused().contains("no device 7"));
    raw.send(Command::MapBar as u8, 0, 6, [0; 3], &[]);
    assert!(raw.refused().contains("no BAR6"));
    raw.send(mmio_read, 0, 9, [0, 4, 0], &[]);
    assert!(raw.refused().contains("no BAR9"));
    raw.send(mmio_read, 0, 2, [0, 4, 0], &[]);
    assert!(raw.refused().contains("BAR2 is not available"));
    raw.send(mmio_read, 0, 5, [u64::MAX, 4, 0], &[]);
    assert!(raw.refused().contains("outside its 0x10000 bytes"));
    raw.send(mmio_read, 0, 5, [4, u64::MAX, 0], &[]);
    assert!(raw.refused().contains("limit per request"));
    raw.send(mmio_read, 0, 5, [BAR5_LEN as u64 - 2, 4, 0], &[]);
    assert!(raw.refused().contains("outside its 0x10000 bytes"));
    raw.send(mmio_read, 0, 0, [0, 2 << 20, 0], &[]);
    assert!(raw.refused().contains("0x100000-byte limit per request"));
    raw.send(cfg_read, 0, 0, [0, 3, 0], &[]);
    assert!(raw.refused().contains("only 1, 2 or 4"));
    raw.send(cfg_read, 0, 0, [u64::MAX, 4, 0], &[]);
    assert!(raw.refused().contains("config space"));
    raw.send(Command::CfgWrite as u8, 0, 0, [0x40, 1, 0x100], &[]);
    assert!(raw.refused().contains("does not fit 1 bytes"));
    raw.send(Command::MapSysmem as u8, 0, 0, [u64::MAX, 0, 0], &[]);
    assert!(raw.refused().contains("limit"));
    raw.send(Command::MapSysmem as u8, 0, 0, [1 << 40, 0, 0], &[]);
    assert!(raw.refused().contains("0x100000-byte limit"));
    raw.send(Command::MapSysmem as u8, 0, 0, [0, 0, 0], &[]);
    assert!(raw.refused().contains("0 bytes"));
    raw.send(sysmem_read, 0, 5, [0, 4, 0], &[]);
    assert!(raw.refused().contains("no system memory handle 5"));
    raw.send(Command::MapSysmemFd as u8, 0, 0, [4096, 0, 0], &[]);
    assert!(raw.refused().contains("Unix socket"));
    raw.send(0, 0, 0, [0, 7, 0x1002], &[0; 7]);
    assert!(raw.refused().contains("not 7 bytes"));
    raw.send(Command::MapSysmem as u8, 0, 0, [4096, 0, 0], &[]);
    let (h, _) = raw.answer(8).unwrap().unwrap();
    assert_eq!(h.val1, 0, "the first handle of a connection");
    raw.send(sysmem_read, 0, 0, [u64::MAX - 1, 4, 0], &[]);
    assert!(raw.refused().contains("system memory handle 0"));
    raw.send(sysmem_read, 0, 0, [4094, 4, 0], &[]);
    assert!(raw.refused().contains("outside its 0x1000 bytes"));
    raw.ping();

    // Cut-offs: an unknown command (its framing is unknown) is answered, then closed.
    raw.send(99, 0, 0, [0; 3], &[]);
    assert!(raw.refused().contains("unknown command 99"));
    assert!(raw.closed());
    // That connection owned the device (its MAP_SYSMEM); the device is free for the next
    // writer once the server's thread for it has ended.
    assert!(eventually(|| {
        client(addr, 0).ownership().unwrap() == Some(Ownership::Nobody)
    }));

    // A write that fails has no answer of its own: the server leaves the reason where the
    // client's next request reads it, then closes.
    let mut raw = Raw::connect(addr);
    raw.send(
        Command::MmioWrite as u8,
        0,
        5,
        [BAR5_LEN as u64, 4, 0],
        &[1, 2, 3, 4],
    );
    let msg = raw.refused();
    assert!(
        msg.starts_with(
            "MMIO_WRITE BAR5 offset 0x10000 size 0x4 failed, so this connection is closed"
        ),
        "{msg}"
    );
    assert!(raw.closed());
    let mut raw = Raw::connect(addr);
    raw.send(Command::SysmemWrite as u8, 0, 0, [0, 4, 0], &[1, 2, 3, 4]);
    let msg = raw.refused();
    assert!(msg.contains("there is no system memory handle 0"), "{msg}");
    assert!(raw.closed());

    // More payload than declared: the excess is read as the next header (here an unknown
    // command 0xee) and the connection ends; only the declared bytes reach the BAR.
    let mut raw = Raw::connect(addr);
    raw.send(Command::MmioWrite as u8, 0, 5, [0x800, 4, 0], &[0x11; 4]);
    raw.0.write_all(&[0xee; 40]).unwrap();
    match raw.answer(0) {
        None => {}
        Some(Err(msg)) => assert!(msg.contains("unknown command 238"), "{msg}"),
        Some(Ok(h)) => panic!("excess payload was answered as a request: {h:?}"),
    }
    assert!(raw.closed());
    let mem = fake.bar5.mem.lock().unwrap();
    assert_eq!(mem[0x800..0x804], [0x11; 4]);
    assert_eq!(mem[0x804..0x830], [0; 0x2c]);
    drop(mem);

    // A truncated header: the server sees the end of the stream and hangs up.
    let mut raw = Raw::connect(addr);
    raw.0.write_all(&[Command::Ping as u8, 0, 0]).unwrap();
    raw.0.shutdown(Shutdown::Write).unwrap();
    assert!(raw.closed());

    // A PROBE filter too large to accept is answered and closed.
    let mut raw = Raw::connect(addr);
    raw.send(0, 0, 0, [0, 1 << 40, 0x1002], &[]);
    assert!(raw.refused().contains("PROBE filter"));
    assert!(raw.closed());

    // After all that the server still serves.
    Raw::connect(addr).ping();
    assert_eq!(OUT_OF_RANGE.load(Ordering::SeqCst), 0);
    assert_eq!(SERVER_PANICS.load(Ordering::SeqCst), 0);
}

#[test]
fn random_headers_never_crash_the_server_or_reach_out_of_range() {
    let fake = FakeDevice::new("fake0", 0x744c);
    let options = ServeOptions {
        max_payload: 1 << 20,
        max_sysmem_alloc: 64 << 10,
        max_sysmem_per_connection: 256 << 10,
        chunk_size: 4096,
        ..ServeOptions::default()
    };
    let addr = start_with(vec![fake as Arc<dyn PciDevice>], options);
    let mut keeper = Raw::connect(addr);
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let interesting = [
        0,
        1,
        2,
        4,
        8,
        0xffc,
        0x1000,
        BAR5_LEN as u64 - 4,
        BAR0_LEN as u64,
        u64::MAX,
        u64::MAX - 3,
        1 << 32,
    ];
    for _ in 0..300 {
        let mut pick = || {
            let r = next();
            if r % 3 == 0 {
                r
            } else {
                interesting[(r >> 8) as usize % interesting.len()]
            }
        };
        let (arg0, arg1, arg2) = (pick(), pick(), pick());
        let bar = if next() % 4 == 0 {
            next() as u32
        } else {
            (next() % 7) as u32
        };
        let mut h = RequestHeader::new(Command::Ping, (next() % 3) as u32, bar, [arg0, arg1, arg2]);
        h.cmd = (next() % 16) as u8;
        let mut msg = h.encode().to_vec();
        msg.extend((0..next() % 80).map(|_| next() as u8));
        // The server may hang up at any point: only its survival is asserted.
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let _ = s.write_all(&msg);
        let _ = s.shutdown(Shutdown::Write);
        let mut rest = Vec::new();
        let _ = s.read_to_end(&mut rest);
    }
    keeper.ping();
    assert_eq!(OUT_OF_RANGE.load(Ordering::SeqCst), 0);
    assert_eq!(SERVER_PANICS.load(Ordering::SeqCst), 0);
}

#[test]
fn a_remote_device_can_itself_be_served() {
    // fake ← server A ← client (relay) ← server B ← client: both hops carry everything.
    let fake = FakeDevice::new("0000:03:00.0", 0x744c);
    let a = start_one(&fake);
    let relay = client(a, 0);
    let b = start_with(
        vec![Arc::new(relay) as Arc<dyn PciDevice>],
        ServeOptions::default(),
    );
    let dev = client(b, 0);
    assert_eq!(
        dev.remote_name(),
        format!("remote:127.0.0.1:{}:0", a.port())
    );
    assert_eq!(dev.device_id().unwrap(), 0x744c);
    let bar0 = dev.bar(0).unwrap();
    let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
    bar0.write_bytes(0x10_0000, &data).unwrap();
    let mut back = vec![0u8; data.len()];
    bar0.read_bytes(0x10_0000, &mut back).unwrap();
    assert!(back == data);
    let mem = dev.alloc_sysmem(8192, false).unwrap();
    assert_eq!(
        mem.bus_addrs(),
        fake.sysmem.lock().unwrap()[0].addrs.as_slice()
    );
    mem.write32(4, 7).unwrap();
    assert_eq!(mem.read32(4).unwrap(), 7);
}

#[test]
fn system_memory_past_the_servers_total_is_refused_and_returned_when_clients_leave() {
    const MIB: u64 = 1 << 20;
    let fake = FakeDevice::new("fake0", 0x744c);
    let options = ServeOptions {
        max_sysmem_alloc: 8 * MIB,
        max_sysmem_per_connection: 8 * MIB,
        max_sysmem_total: 8 * MIB,
        ..ServeOptions::default()
    };
    // Two devices: system memory is for a device's owner, and each client owns one.
    let other = FakeDevice::new("fake1", 0x744c);
    let addr = start_with(
        vec![fake as Arc<dyn PciDevice>, other as Arc<dyn PciDevice>],
        options,
    );
    let map_on = |raw: &mut Raw, dev_id: u32, bytes: u64| {
        raw.send(Command::MapSysmem as u8, dev_id, 0, [bytes, 0, 0], &[]);
        // The answer is the bus address of every page.
        raw.answer((bytes / 4096 * 8) as usize)
            .expect("the server answers MAP_SYSMEM")
            .map(|_| ())
    };
    let map = |raw: &mut Raw, bytes: u64| map_on(raw, 1, bytes);
    let mut first = Raw::connect(addr);
    map_on(&mut first, 0, 6 * MIB).unwrap();
    let mut second = Raw::connect(addr);
    let msg = map(&mut second, 4 * MIB).unwrap_err();
    assert!(
        msg.contains("limit of 8.0 MiB of system memory for all clients together")
            && msg.contains("--max-sysmem-total-mib")
            && msg.contains("clients hold 6.0 MiB now"),
        "a client past the total is told the cap and what is held: {msg}"
    );
    map(&mut second, 2 * MIB).unwrap();
    drop((first, second));
    // Each connection's thread gives its memory back when it sees the close; until both
    // have, the whole budget is not free. Retry until it is.
    let whole = eventually(|| map(&mut Raw::connect(addr), 8 * MIB).is_ok());
    assert!(whole, "the memory of the clients that left never came back");
}

#[test]
fn connections_past_the_limit_are_told_the_limit_and_freed_slots_are_reused() {
    let fake = FakeDevice::new("fake0", 0x744c);
    let options = ServeOptions {
        max_connections: 1,
        ..ServeOptions::default()
    };
    let addr = start_with(vec![fake as Arc<dyn PciDevice>], options);
    let mut first = Raw::connect(addr);
    first.ping();
    let mut second = Raw::connect(addr);
    second.send(Command::Ping as u8, 0, 0, [0; 3], &[]);
    let msg = second.refused();
    assert!(
        msg.contains("already serves 1 connections, its limit")
            && msg.contains("--max-connections"),
        "a connection past the limit is told the limit: {msg}"
    );
    assert!(second.closed(), "and then closed");
    drop(first);
    // The first connection's thread frees its slot when it sees the close; retry until then.
    let served = eventually(|| {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let ping = RequestHeader::new(Command::Ping, 0, 0, [0; 3]).encode();
        let mut h = [0u8; 17];
        s.write_all(&ping).is_ok()
            && s.read_exact(&mut h).is_ok()
            && ResponseHeader::decode(&h) == ResponseHeader::ok(0, 0)
    });
    assert!(served, "the freed slot was never reused");
}

/// Whether `f` holds within 500 tries 10 ms apart: what a server thread frees when it sees a
/// close comes a little after the close.
fn eventually(mut f: impl FnMut() -> bool) -> bool {
    (0..500).any(|_| {
        let ok = f();
        if !ok {
            std::thread::sleep(Duration::from_millis(10));
        }
        ok
    })
}

#[test]
fn a_client_past_the_limit_gets_an_error_naming_the_limit_not_an_earlier_write() {
    let fake = FakeDevice::new("fake0", 0x744c);
    let options = ServeOptions {
        max_connections: 1,
        ..ServeOptions::default()
    };
    let addr = start_with(vec![fake as Arc<dyn PciDevice>], options);
    let held = client(addr, 0);
    held.ping().unwrap();
    let err = RemotePciDevice::connect("127.0.0.1", addr.port(), 0, &no_retry())
        .err()
        .unwrap();
    let msg = err.to_string();
    assert!(
        matches!(
            err,
            Error {
                kind: ErrorKind::RemoteRefused { .. },
                ..
            }
        ),
        "{msg}"
    );
    assert!(
        msg.contains("already serves 1 connections, its limit (am serve --max-connections)"),
        "{msg}"
    );
    assert!(!msg.contains("earlier write"), "{msg}");
}

/// Client options that take a full server's refusal as it comes (no
/// [`RemoteOptions::admission_wait`]): these tests look at the server's answers, or retry
/// on their own.
fn no_retry() -> RemoteOptions {
    RemoteOptions {
        admission_wait: Duration::ZERO,
        ..RemoteOptions::default()
    }
}

/// Options with short timeouts, for the tests of hostile clients; no cap per address
/// (every client here is 127.0.0.1).
fn short_timeouts(max_connections: usize) -> ServeOptions {
    ServeOptions {
        max_connections,
        max_connections_per_address: 64,
        read_timeout: Duration::from_millis(500),
        idle_timeout: Duration::from_millis(500),
        ..ServeOptions::default()
    }
}

#[test]
fn a_half_sent_header_is_closed_after_the_read_timeout_with_the_reason() {
    let fake = FakeDevice::new("fake0", 0x744c);
    let addr = start_with(vec![fake as Arc<dyn PciDevice>], short_timeouts(16));
    let mut raw = Raw::connect(addr);
    let ping = RequestHeader::new(Command::Ping, 0, 0, [0; 3]).encode();
    raw.0.write_all(&ping[..10]).unwrap();
    let msg = raw.refused();
    assert!(
        msg.contains("a request header took more than 500ms"),
        "the server says why it hangs up: {msg}"
    );
    assert!(raw.closed());
}

#[test]
fn a_stalled_payload_is_closed_after_the_read_timeout() {
    let fake = FakeDevice::new("fake0", 0x744c);
    let addr = start_with(vec![fake as Arc<dyn PciDevice>], short_timeouts(16));
    let mut raw = Raw::connect(addr);
    // An MMIO_WRITE of 4 KiB with 100 bytes of its payload, then nothing.
    raw.send(Command::MmioWrite as u8, 0, 0, [0, 4096, 0], &[0xab; 100]);
    let msg = raw.refused();
    assert!(msg.contains("the payload stalled"), "{msg}");
    assert!(raw.closed());
}

#[test]
fn an_idle_client_keeps_its_connection_while_the_server_has_room() {
    let fake = FakeDevice::new("fake0", 0x744c);
    let addr = start_with(vec![fake as Arc<dyn PciDevice>], short_timeouts(2));
    let mut raw = Raw::connect(addr);
    raw.ping();
    std::thread::sleep(Duration::from_millis(1500));
    raw.ping();
}

/// A CFG_READ of the vendor id: a request other than PING, which is progress.
fn cfg_read(raw: &mut Raw) {
    raw.send(Command::CfgRead as u8, 0, 0, [0, 2, 0], &[]);
    let (h, _) = raw.answer(0).unwrap().unwrap();
    assert_eq!(h.val0, 0x1002);
}

#[test]
fn an_idle_client_gives_its_place_to_a_newcomer_once_the_server_is_full_and_says_why() {
    let fake = FakeDevice::new("fake0", 0x744c);
    let addr = start_with(vec![fake as Arc<dyn PciDevice>], short_timeouts(2));
    let mut idle = Raw::connect(addr);
    idle.ping();
    let mut busy = Raw::connect(addr);
    // `busy` keeps asking; `idle` says nothing while the server is full, past its timeout.
    for _ in 0..30 {
        cfg_read(&mut busy);
        std::thread::sleep(Duration::from_millis(50));
    }
    // Nobody is closed while nobody else wants in.
    idle.ping();
    std::thread::sleep(Duration::from_millis(700));
    cfg_read(&mut busy);
    let newcomer = client(addr, 0);
    newcomer.ping().unwrap();
    idle.send(Command::Ping as u8, 0, 0, [0; 3], &[]);
    let msg = idle.refused();
    assert!(
        msg.contains("closed to make room for 127.0.0.1:")
            && msg.contains("while the server was full (2 connections, its limit)"),
        "{msg}"
    );
    // The busy one lives on.
    cfg_read(&mut busy);
}

#[test]
fn hostile_clients_delay_a_newcomer_by_at_most_the_timeouts() {
    // Four slots, all taken by hostile clients: two idle, one stuck halfway through a
    // header, one that asked for 8 MiB and never reads the answer. A well-behaved client
    // that retries must get in within the idle and read timeouts plus scheduling slack.
    let fake = FakeDevice::new("fake0", 0x744c);
    let options = short_timeouts(4);
    let bound = options.idle_timeout + options.read_timeout + Duration::from_secs(8);
    let addr = start_with(vec![fake as Arc<dyn PciDevice>], options);
    let mut hostile = Vec::new();
    for _ in 0..2 {
        hostile.push(Raw::connect(addr));
    }
    let mut half = Raw::connect(addr);
    let ping = RequestHeader::new(Command::Ping, 0, 0, [0; 3]).encode();
    half.0.write_all(&ping[..7]).unwrap();
    hostile.push(half);
    let mut greedy = Raw::connect(addr);
    greedy.send(Command::MmioRead as u8, 0, 0, [0, BAR0_LEN as u64, 0], &[]);
    hostile.push(greedy);
    // Let the server take all four before the newcomer comes.
    std::thread::sleep(Duration::from_millis(100));

    let start = std::time::Instant::now();
    let mut refusals = Vec::new();
    let served = loop {
        if start.elapsed() > bound {
            break false;
        }
        match RemotePciDevice::connect("127.0.0.1", addr.port(), 0, &no_retry()) {
            Ok(dev) => break dev.ping().is_ok(),
            Err(e) => refusals.push(e.to_string()),
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let waited = start.elapsed();
    assert!(
        served,
        "a newcomer was locked out for {waited:?} (bound {bound:?}); refusals: {:?}",
        refusals.last()
    );
    assert!(
        refusals.iter().all(|r| r.contains("its limit")),
        "every refusal named the limit: {refusals:?}"
    );
    drop(hostile);
}

#[test]
fn a_peer_outside_the_allow_list_is_refused_with_the_reason() {
    let fake = FakeDevice::new("fake0", 0x744c);
    let options = ServeOptions {
        allow: vec!["10.0.0.0/8".parse().unwrap()],
        ..ServeOptions::default()
    };
    let addr = start_with(vec![fake.clone() as Arc<dyn PciDevice>], options);
    let err = RemotePciDevice::connect("127.0.0.1", addr.port(), 0, &RemoteOptions::default())
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("does not serve 127.0.0.1: the address is outside its --allow list"),
        "{err}"
    );
    let options = ServeOptions {
        allow: vec![
            "10.0.0.0/8".parse().unwrap(),
            "127.0.0.0/8".parse().unwrap(),
        ],
        ..ServeOptions::default()
    };
    let addr = start_with(vec![fake as Arc<dyn PciDevice>], options);
    client(addr, 0).ping().unwrap();
}

#[test]
fn allow_ranges_parse_and_match_v4_v6_and_mapped_v4() {
    use am_driver::pci::remote::Cidr;
    let net: Cidr = "192.168.4.0/22".parse().unwrap();
    assert!(net.contains("192.168.7.255".parse().unwrap()));
    assert!(!net.contains("192.168.8.0".parse().unwrap()));
    assert!(
        net.contains("::ffff:192.168.5.1".parse().unwrap()),
        "mapped IPv4"
    );
    let one: Cidr = "10.1.2.3".parse().unwrap();
    assert_eq!(one.to_string(), "10.1.2.3/32");
    assert!(one.contains("10.1.2.3".parse().unwrap()));
    assert!(!one.contains("10.1.2.4".parse().unwrap()));
    let v6: Cidr = "fd00::/8".parse().unwrap();
    assert!(v6.contains("fd12::1".parse().unwrap()));
    assert!(!v6.contains("10.1.2.3".parse().unwrap()));
    let any: Cidr = "0.0.0.0/0".parse().unwrap();
    assert!(any.contains("8.8.8.8".parse().unwrap()));
    for bad in ["10.0.0.0/33", "host", "10.0.0.0/x", "::/129"] {
        let e = bad.parse::<Cidr>().unwrap_err().to_string();
        assert!(e.contains(&format!("{bad:?}")), "{e}");
    }
}

#[test]
fn a_read_only_server_serves_reads_and_refuses_what_writes() {
    let fake = FakeDevice::new("fake0", 0x744c);
    fake.bar0.mem.lock().unwrap()[0x40..0x44].copy_from_slice(&0x1234_5678u32.to_le_bytes());
    let options = ServeOptions {
        read_only: true,
        ..ServeOptions::default()
    };
    let addr = start_with(vec![fake.clone() as Arc<dyn PciDevice>], options);
    let dev = client(addr, 0);
    assert_eq!(dev.vendor_id().unwrap(), 0x1002);
    assert_eq!(dev.bar(0).unwrap().read32(0x40).unwrap(), 0x1234_5678);
    for (what, err) in [
        ("CFG_WRITE", dev.config_write(4, 2, 6).unwrap_err()),
        ("RESET", dev.reset().unwrap_err()),
        ("MAP_SYSMEM", dev.alloc_sysmem(4096, false).err().unwrap()),
    ] {
        let msg = err.to_string();
        assert!(
            msg.contains(&format!("{what} is refused: this server is read-only")),
            "{msg}"
        );
    }
    assert_eq!(
        fake.resets.load(Ordering::SeqCst),
        0,
        "no reset reached the device"
    );
    dev.ping().unwrap();
    // MM_INDEX and MM_INDEX_HI only aim the MM_DATA window (reads of a small BAR's VRAM).
    let bar5 = dev.bar(5).unwrap();
    bar5.write32(0, 0x8000_1000).unwrap();
    bar5.write32(0x18, 0x2).unwrap();
    dev.ping().unwrap();
    assert_eq!(
        fake.bar5.mem.lock().unwrap()[0..4],
        0x8000_1000u32.to_le_bytes()
    );
    // A write has no answer: the connection closes and the next request says why.
    dev.bar(0).unwrap().write32(0x40, 0).unwrap();
    let msg = dev.ping().unwrap_err().to_string();
    assert!(
        msg.contains("MMIO_WRITE BAR0 offset 0x40 size 0x4 failed, so this connection is closed: MMIO_WRITE is refused: this server is read-only"),
        "{msg}"
    );
    assert_eq!(
        fake.bar0.mem.lock().unwrap()[0x40..0x44],
        0x1234_5678u32.to_le_bytes(),
        "the write never reached the BAR"
    );
}

#[test]
fn an_answer_taken_a_trickle_at_a_time_is_cut_off_at_one_deadline() {
    // An MMIO_READ of the 8 MiB BAR, taken 4 KiB every 50 ms (80 KiB/s, far below the
    // 1 MiB/s the deadline allows). Every `write` the server makes still sends something, so
    // a timeout per `write` call would never fire; one deadline for the whole answer (the
    // read timeout plus 8 s) ends it while most of it is unsent. Past the deadline (and a
    // margin) the test takes the rest as fast as it comes: what the socket buffers already
    // hold (megabytes on loopback) would otherwise take a minute at the trickle's rate.
    let fake = FakeDevice::new("fake0", 0x744c);
    let addr = start_with(vec![fake as Arc<dyn PciDevice>], short_timeouts(16));
    let mut raw = Raw::connect(addr);
    let start = std::time::Instant::now();
    raw.send(Command::MmioRead as u8, 0, 0, [0, BAR0_LEN as u64, 0], &[]);
    let whole = 17 + BAR0_LEN;
    let cutoff = Duration::from_millis(500) + Duration::from_secs(BAR0_LEN as u64 >> 20);
    let trickle_until = start + cutoff + Duration::from_secs(2);
    let mut got = 0;
    let mut buf = [0u8; 4096];
    // Only a bound for a server that never cuts the answer off.
    let give_up = start + Duration::from_secs(60);
    let closed = loop {
        match raw.0.read(&mut buf) {
            Ok(0) | Err(_) => break true,
            Ok(n) => got += n,
        }
        let now = std::time::Instant::now();
        if got == whole || now > give_up {
            break false;
        }
        if now < trickle_until {
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    assert!(
        closed && got < whole,
        "the connection stayed open: {got} of {whole} bytes taken"
    );
    assert_eq!(SERVER_PANICS.load(Ordering::SeqCst), 0);
}

/// `MM_INDEX`, `MM_DATA` and `MM_INDEX_HI` of [`WindowBar`], as on the GPUs (byte offsets).
const MM_INDEX: u64 = 0x0;
const MM_DATA: u64 = 0x4;
const MM_INDEX_HI: u64 = 0x18;
/// Dwords of VRAM behind [`WindowBar`]'s window.
const WINDOW_VRAM_DWORDS: u64 = 1 << 16;

/// What VRAM holds at byte address `at`: every dword different, so a read through a window
/// someone else aimed shows.
fn vram_pattern(at: u64) -> u32 {
    (at as u32).wrapping_mul(0x9e37_79b9) ^ 0x5a5a_0000
}

/// A BAR5 with an `MM_INDEX`/`MM_DATA` window onto VRAM, as a small-BAR GPU reads its
/// discovery table: the index registers hold what was last written; `MM_DATA` is the VRAM
/// dword they point at. Each access yields, so that interleaved clients interleave often.
struct WindowBar {
    regs: Mutex<[u32; 2]>,
    vram: Mutex<Vec<u32>>,
}

impl WindowBar {
    fn vram_index(&self) -> Result<usize> {
        let [index, hi] = *self.regs.lock().unwrap();
        let at = (u64::from(hi) << 31) | u64::from(index & 0x7fff_ffff);
        (at / 4 < WINDOW_VRAM_DWORDS && index & 0x8000_0000 != 0)
            .then_some((at / 4) as usize)
            .ok_or_else(|| oor("window", "VRAM", at, 4, (WINDOW_VRAM_DWORDS * 4) as usize))
    }
}

impl Bar for WindowBar {
    fn len(&self) -> u64 {
        BAR5_LEN as u64
    }
    fn read32(&self, offset: u64) -> Result<u32> {
        std::thread::yield_now();
        match offset {
            MM_INDEX => Ok(self.regs.lock().unwrap()[0]),
            MM_INDEX_HI => Ok(self.regs.lock().unwrap()[1]),
            MM_DATA => {
                let i = self.vram_index()?;
                Ok(self.vram.lock().unwrap()[i])
            }
            _ => Ok(0),
        }
    }
    fn write32(&self, offset: u64, value: u32) -> Result<()> {
        std::thread::yield_now();
        match offset {
            MM_INDEX => self.regs.lock().unwrap()[0] = value,
            MM_INDEX_HI => self.regs.lock().unwrap()[1] = value,
            MM_DATA => {
                let i = self.vram_index()?;
                self.vram.lock().unwrap()[i] = value;
            }
            _ => {}
        }
        Ok(())
    }
    fn read_bytes(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        match <[u8; 4]>::try_from(&*buf) {
            Ok(_) => {
                buf.copy_from_slice(&self.read32(offset)?.to_le_bytes());
                Ok(())
            }
            Err(_) => Err(oor("window", "BAR5", offset, buf.len(), BAR5_LEN)),
        }
    }
    fn write_bytes(&self, offset: u64, data: &[u8]) -> Result<()> {
        match <[u8; 4]>::try_from(data) {
            Ok(w) => self.write32(offset, u32::from_le_bytes(w)),
            Err(_) => Err(oor("window", "BAR5", offset, data.len(), BAR5_LEN)),
        }
    }
}

/// A device whose BAR5 is a [`WindowBar`]; its config space is the [`FakeDevice`]'s.
struct WindowDevice {
    config: Arc<FakeDevice>,
    bar5: Arc<WindowBar>,
}

impl WindowDevice {
    fn new() -> Arc<WindowDevice> {
        let vram = (0..WINDOW_VRAM_DWORDS)
            .map(|d| vram_pattern(d * 4))
            .collect();
        Arc::new(WindowDevice {
            config: FakeDevice::new("window0", 0x744c),
            bar5: Arc::new(WindowBar {
                regs: Mutex::new([0; 2]),
                vram: Mutex::new(vram),
            }),
        })
    }
}

impl PciDevice for WindowDevice {
    fn name(&self) -> &str {
        "window0"
    }
    fn backend(&self) -> &'static str {
        "fake"
    }
    fn config_read(&self, offset: u16, size: u8) -> Result<u32> {
        self.config.config_read(offset, size)
    }
    fn config_write(&self, offset: u16, size: u8, value: u32) -> Result<()> {
        self.config.config_write(offset, size, value)
    }
    fn bar_info(&self, index: u8) -> Result<BarInfo> {
        self.config.bar_info(index)
    }
    fn bar(&self, index: u8) -> Result<Arc<dyn Bar>> {
        match index {
            5 => Ok(self.bar5.clone()),
            _ => self.config.bar(index),
        }
    }
    fn resize_bar(&self, index: u8) -> Result<()> {
        self.config.resize_bar(index)
    }
    fn alloc_sysmem(&self, size: usize, contiguous: bool) -> Result<Arc<dyn SysMem>> {
        self.config.alloc_sysmem(size, contiguous)
    }
    fn reset(&self) -> Result<()> {
        self.config.reset()
    }
}

/// The steps that read the VRAM dword at `at` through the window.
/// The owner's `reads` reads of VRAM through the window, aimed with plain writes as
/// tinygrad's driver does; how many gave another value than the pattern.
fn owner_reads_by_hand(bar5: &dyn Bar, reads: u64) -> u32 {
    let mut wrong = 0;
    for i in 0..reads {
        let at = ((i * 31_337) % WINDOW_VRAM_DWORDS) * 4;
        bar5.write32(MM_INDEX_HI, (at >> 31) as u32).unwrap();
        bar5.write32(MM_INDEX, (at as u32 & 0x7fff_ffff) | 0x8000_0000)
            .unwrap();
        if bar5.read32(MM_DATA).unwrap() != vram_pattern(at) {
            wrong += 1;
        }
    }
    wrong
}

fn window_read(at: u64) -> [IndexStep; 3] {
    [
        IndexStep::Aim {
            offset: MM_INDEX_HI,
            value: (at >> 31) as u32,
        },
        IndexStep::Aim {
            offset: MM_INDEX,
            value: (at as u32 & 0x7fff_ffff) | 0x8000_0000,
        },
        IndexStep::Read { offset: MM_DATA },
    ]
}

#[test]
fn window_reads_of_readers_and_an_owner_aiming_by_hand_never_see_each_others_window() {
    // Three readers read VRAM through INDEXED transactions while the owner aims the window
    // with plain writes and reads MM_DATA, as tinygrad's driver does: the readers' steps
    // run whole under the device's window lock and put the index registers back, so the
    // owner's window stays where it aimed it between its requests.
    let dev = WindowDevice::new();
    let addr = start_with(
        vec![dev.clone() as Arc<dyn PciDevice>],
        ServeOptions::default(),
    );
    let owner = client(addr, 0);
    owner.config_write(0x40, 1, 1).unwrap();
    assert_eq!(owner.ownership().unwrap(), Some(Ownership::Mine));
    let wrong = Arc::new(AtomicU32::new(0));
    let mut threads = Vec::new();
    for t in 0..3u64 {
        let wrong = wrong.clone();
        threads.push(std::thread::spawn(move || {
            let reader = client(addr, 0);
            let bar5 = reader.bar(5).unwrap();
            for i in 0..400u64 {
                let at = ((i * 7919 + t * 104_729) % WINDOW_VRAM_DWORDS) * 4;
                if bar5.indexed(&window_read(at)).unwrap() != vram_pattern(at) {
                    wrong.fetch_add(1, Ordering::SeqCst);
                }
            }
            assert!(matches!(
                reader.ownership().unwrap(),
                Some(Ownership::Other(_))
            ));
        }));
    }
    wrong.fetch_add(
        owner_reads_by_hand(&*owner.bar(5).unwrap(), 400),
        Ordering::SeqCst,
    );
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(
        wrong.load(Ordering::SeqCst),
        0,
        "reads through a window another aimed"
    );
    assert_eq!(OUT_OF_RANGE.load(Ordering::SeqCst), 0);
    assert_eq!(SERVER_PANICS.load(Ordering::SeqCst), 0);
}

#[test]
fn a_second_client_reads_and_its_writes_are_refused_naming_the_owner_until_it_leaves() {
    let fake = FakeDevice::new("fake0", 0x744c);
    let addr = start_one(&fake);
    let first = client(addr, 0);
    let second = client(addr, 0);
    assert_eq!(first.ownership().unwrap(), Some(Ownership::Nobody));
    // The first connection that writes owns the device.
    first.config_write(0x40, 1, 0x11).unwrap();
    assert_eq!(first.ownership().unwrap(), Some(Ownership::Mine));
    let Some(Ownership::Other(who)) = second.ownership().unwrap() else {
        panic!("the second client is told another owns the device");
    };
    assert!(
        who.starts_with("127.0.0.1:") && who.contains(" since "),
        "{who}"
    );
    let bar0 = second.bar(0).unwrap();
    let bar5 = second.bar(5).unwrap();
    for (what, err) in [
        ("CFG_WRITE", second.config_write(0x40, 1, 0x22).unwrap_err()),
        ("RESET", second.reset().unwrap_err()),
        ("RESIZE_BAR", second.resize_bar(0).unwrap_err()),
        (
            "MAP_SYSMEM",
            second.alloc_sysmem(4096, false).err().unwrap(),
        ),
        ("MMIO_WRITE", bar0.write32(0x40, 7).unwrap_err()),
        (
            "INDEXED",
            bar5.indexed(&[IndexStep::Write {
                offset: 0x100,
                value: 1,
            }])
            .unwrap_err(),
        ),
    ] {
        let msg = err.to_string();
        assert!(
            msg.contains(&format!("the server refused {what}"))
                && msg.contains("fake0 (device 0) is owned by 127.0.0.1:")
                && msg.contains("; read-only access"),
            "{msg}"
        );
        assert!(
            matches!(err.kind, ErrorKind::RemoteRefused { .. }),
            "{err:?}"
        );
    }
    // Refused with an answer, so the connection goes on; reads are served.
    second.ping().unwrap();
    assert_eq!(second.config_read(0x40, 1).unwrap(), 0x11);
    assert_eq!(bar0.read32(0x40).unwrap(), 0);
    assert_eq!(fake.resets.load(Ordering::SeqCst), 0);
    assert_eq!(fake.resized.load(Ordering::SeqCst), 0);
    assert!(fake.sysmem.lock().unwrap().is_empty());
    // Once the owner leaves, the next writer owns the device.
    drop(first);
    assert!(
        eventually(|| second.config_write(0x40, 1, 0x22).is_ok()),
        "the owner's close never freed the device"
    );
    assert_eq!(second.ownership().unwrap(), Some(Ownership::Mine));
    assert_eq!(fake.config.lock().unwrap()[0x40], 0x22);
}

#[test]
fn a_plain_client_writing_beside_the_owner_is_closed_with_the_owners_name() {
    // tinygrad's client pipelines MMIO_WRITE without asking first: a refused one cannot be
    // answered, so the connection closes after an error response naming the owner.
    let fake = FakeDevice::new("fake0", 0x744c);
    let addr = start_one(&fake);
    let owner = client(addr, 0);
    owner.config_write(0x40, 1, 1).unwrap();
    let mut raw = Raw::connect(addr);
    raw.send(
        Command::MmioWrite as u8,
        0,
        0,
        [0x80, 4, 0],
        &0xfeed_f00du32.to_le_bytes(),
    );
    let msg = raw.refused();
    assert!(
        msg.contains("MMIO_WRITE BAR0 offset 0x80 size 0x4 failed, so this connection is closed")
            && msg.contains("fake0 (device 0) is owned by 127.0.0.1:"),
        "{msg}"
    );
    assert!(raw.closed());
    assert_eq!(fake.bar0.mem.lock().unwrap()[0x80..0x84], [0; 4]);
}

#[test]
fn a_plain_probe_still_answers_the_device_count_and_ours_lists_the_extensions() {
    let fake = FakeDevice::new("fake0", 0x744c);
    let addr = start_one(&fake);
    let filter = encode_probe_filter(&[(0xffff, 0x744c)]);
    for (bar, val1) in [
        (0, 1),
        (
            EXTENSIONS_PROBE,
            encode_extensions(EXT_INDEXED | EXT_OWNER | EXT_SMU),
        ),
    ] {
        let mut raw = Raw::connect(addr);
        raw.send(
            Command::Probe as u8,
            0,
            bar,
            [0, filter.len() as u64, 0x1002],
            &filter,
        );
        let (h, data) = raw.answer("fake0:0".len()).unwrap().unwrap();
        assert_eq!((h.val1, data.as_slice()), (val1, &b"fake0:0"[..]));
    }
}

#[test]
fn a_read_only_server_answers_indexed_reads_and_refuses_indexed_writes_and_owners() {
    let dev = WindowDevice::new();
    let options = ServeOptions {
        read_only: true,
        ..ServeOptions::default()
    };
    let addr = start_with(vec![dev.clone() as Arc<dyn PciDevice>], options);
    let reader = client(addr, 0);
    let bar5 = reader.bar(5).unwrap();
    assert_eq!(
        bar5.indexed(&window_read(0x40)).unwrap(),
        vram_pattern(0x40)
    );
    let err = bar5
        .indexed(&[IndexStep::Write {
            offset: MM_INDEX,
            value: 1,
        }])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("an INDEXED write is refused: this server is read-only"),
        "{err}"
    );
    assert_eq!(*dev.bar5.regs.lock().unwrap(), [0, 0], "nothing was aimed");
    // No owners on a read-only server: nothing may write.
    assert_eq!(reader.ownership().unwrap(), None);
    let mut raw = Raw::connect(addr);
    raw.send(Command::Owner as u8, 0, 0, [1, 0, 0], &[]);
    let msg = raw.refused();
    assert!(
        msg.contains("window0 (device 0) cannot be owned: this server is read-only"),
        "{msg}"
    );
    raw.ping();
    // Nor SMU queries, which write the mailbox: our client does not send them here, and
    // one sent anyway is refused.
    assert_eq!(
        reader.smu_query(1, 0, Duration::from_secs(1)).unwrap(),
        None
    );
    raw.send(Command::Smu as u8, 0, 0, [1, 0, 1000], &[]);
    let msg = raw.refused();
    assert!(
        msg.contains("SMU is refused: this server is read-only"),
        "{msg}"
    );
    raw.ping();
}

/// A well-behaved newcomer (our client: its first request a PROBE) tries every 20 ms until
/// it is served. Each refusal must name the limit; past `bound` the test fails with the
/// last one.
fn newcomer_gets_in_within(addr: SocketAddr, bound: Duration) -> RemotePciDevice {
    let start = std::time::Instant::now();
    loop {
        match RemotePciDevice::connect("127.0.0.1", addr.port(), 0, &no_retry()) {
            Ok(dev) => {
                dev.ping().unwrap();
                return dev;
            }
            Err(e) => {
                let msg = e.to_string();
                assert!(
                    msg.contains("its limit"),
                    "a refusal names the limit: {msg}"
                );
                assert!(
                    start.elapsed() <= bound,
                    "a newcomer was locked out for {:?} (bound {bound:?}): {msg}",
                    start.elapsed()
                );
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Hostile clients on threads of their own, stopped when this is dropped.
struct Hostile {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Hostile {
    fn new() -> Hostile {
        Hostile {
            stop: Arc::new(AtomicBool::new(false)),
            threads: Vec::new(),
        }
    }

    /// Run `client` until stopped; it returns when its connection failed.
    fn spawn(&mut self, client: impl Fn(&AtomicBool) + Send + 'static) {
        let stop = self.stop.clone();
        self.threads.push(std::thread::spawn(move || client(&stop)));
    }
}

impl Drop for Hostile {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// A connection the hostile clients use: reads wake now and then to look at `stop`.
fn hostile_connection(addr: SocketAddr) -> Option<TcpStream> {
    let s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_millis(100))).ok()?;
    Some(s)
}

/// Sleep `d` unless stopped first; whether to go on.
fn pause(stop: &AtomicBool, d: Duration) -> bool {
    std::thread::sleep(d);
    !stop.load(Ordering::SeqCst)
}

/// Give the hostile clients time to take every place before the newcomer comes.
fn settle() {
    std::thread::sleep(Duration::from_millis(300));
}

#[test]
fn clients_that_only_ping_give_their_place_to_a_newcomer() {
    // Issue 40: 16 clients pinging every 5 s held the cap for as long as they liked. A PING
    // is no progress: they are idle, and a newcomer gets in once they were for the idle
    // timeout.
    let fake = FakeDevice::new("fake0", 0x744c);
    let options = short_timeouts(4);
    let bound = options.idle_timeout + Duration::from_secs(8);
    let addr = start_with(vec![fake as Arc<dyn PciDevice>], options);
    let mut hostile = Hostile::new();
    for _ in 0..4 {
        hostile.spawn(move |stop| {
            let Some(s) = hostile_connection(addr) else {
                return;
            };
            let mut raw = Raw(s);
            let ping = RequestHeader::new(Command::Ping, 0, 0, [0; 3]).encode();
            let mut h = [0u8; 17];
            while raw.0.write_all(&ping).is_ok()
                && raw.0.read_exact(&mut h).is_ok()
                && h[0] == 0
                && pause(stop, Duration::from_millis(100))
            {}
        });
    }
    settle();
    newcomer_gets_in_within(addr, bound);
}

#[test]
fn idle_clients_that_reconnect_the_moment_they_are_closed_leave_a_newcomer_its_place() {
    // Issue 40: 16 idle clients that reconnected at once won every freed place (a newcomer
    // got in 0 times in 299). A place now changes hands only to a newcomer's request, and a
    // reconnected client that sends none gets none.
    let fake = FakeDevice::new("fake0", 0x744c);
    let options = short_timeouts(4);
    let bound = options.idle_timeout + options.read_timeout + Duration::from_secs(8);
    let addr = start_with(vec![fake as Arc<dyn PciDevice>], options);
    let mut hostile = Hostile::new();
    for _ in 0..4 {
        hostile.spawn(move |stop| {
            while !stop.load(Ordering::SeqCst) {
                let Some(mut s) = hostile_connection(addr) else {
                    continue;
                };
                let mut sink = [0u8; 256];
                // Until the server closes it; then at once again.
                loop {
                    match s.read(&mut sink) {
                        Ok(0) => break,
                        Ok(_) => {}
                        Err(_) if stop.load(Ordering::SeqCst) => return,
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                        Err(_) => break,
                    }
                }
            }
        });
    }
    settle();
    // It keeps its place while the one it replaced reconnects: another newcomer comes in,
    // and the first, still working, was not the one that made room.
    let first = newcomer_gets_in_within(addr, bound);
    for _ in 0..10 {
        first.config_read(0, 2).unwrap();
        std::thread::sleep(Duration::from_millis(50));
    }
    let _second = newcomer_gets_in_within(addr, bound);
    assert_eq!(first.config_read(0, 2).unwrap(), 0x1002);
}

#[test]
fn clients_dribbling_request_headers_give_their_place_to_a_newcomer() {
    // Issue 40: headers dribbled at 4 B/s kept the cap full, each complete within the read
    // timeout. Real requests, but no progress: a header must come within a second of its
    // first byte to count. Here each of 33 bytes comes 60 ms after the last (2 s a header,
    // inside the 3-second read timeout).
    let fake = FakeDevice::new("fake0", 0x744c);
    let options = ServeOptions {
        read_timeout: Duration::from_secs(3),
        ..short_timeouts(2)
    };
    let bound = options.idle_timeout + Duration::from_secs(8);
    let addr = start_with(vec![fake as Arc<dyn PciDevice>], options);
    let mut hostile = Hostile::new();
    for _ in 0..2 {
        hostile.spawn(move |stop| {
            let Some(mut s) = hostile_connection(addr) else {
                return;
            };
            let read = RequestHeader::new(Command::CfgRead, 0, 0, [0, 2, 0]).encode();
            let mut h = [0u8; 17];
            loop {
                for b in read {
                    if s.write_all(&[b]).is_err() || !pause(stop, Duration::from_millis(60)) {
                        return;
                    }
                }
                let mut got = 0;
                while got < h.len() {
                    match s.read(&mut h[got..]) {
                        Ok(0) => return,
                        Ok(n) => got += n,
                        Err(_) if stop.load(Ordering::SeqCst) => return,
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                        Err(_) => return,
                    }
                }
                if h[0] != 0 {
                    return;
                }
            }
        });
    }
    settle();
    newcomer_gets_in_within(addr, bound);
}

#[test]
fn clients_trickling_a_payload_give_their_place_to_a_newcomer() {
    // Issue 40: a payload trickled a byte at a time held a place for the read timeout plus
    // a second per MiB it claimed. Each client here maps 32 MiB of system memory (on a
    // device of its own: the first writer owns a device) and trickles a SYSMEM_WRITE of
    // all of it, a byte every 100 ms: 32.5 s allowed before, no progress now.
    let devices: Vec<Arc<dyn PciDevice>> = (0..2)
        .map(|i| FakeDevice::new(&format!("fake{i}"), 0x744c) as Arc<dyn PciDevice>)
        .collect();
    let options = short_timeouts(2);
    let bound = options.idle_timeout + Duration::from_secs(8);
    let addr = start_with(devices, options);
    let mut hostile = Hostile::new();
    for dev in 0..2u32 {
        hostile.spawn(move |stop| {
            let Some(s) = hostile_connection(addr) else {
                return;
            };
            let mut raw = Raw(s);
            let size = 32u64 << 20;
            raw.send(Command::MapSysmem as u8, dev, 0, [size, 0, 0], &[]);
            if !matches!(raw.answer((size / 4096 * 8) as usize), Some(Ok(_))) {
                return;
            }
            raw.send(Command::SysmemWrite as u8, dev, 0, [0, size, 0], &[]);
            while raw.0.write_all(&[0x5a]).is_ok() && pause(stop, Duration::from_millis(100)) {}
        });
    }
    settle();
    newcomer_gets_in_within(addr, bound);
}

#[test]
fn a_client_making_progress_keeps_its_place_and_a_newcomer_is_told_when_to_retry() {
    // Making room is not taking anyone's place: a client whose requests keep coming is
    // never closed for a newcomer, which is told the limit and when to try again.
    let fake = FakeDevice::new("fake0", 0x744c);
    let options = ServeOptions {
        // Far longer than the 100 ms between the busy client's requests, on a loaded machine.
        idle_timeout: Duration::from_secs(3),
        ..short_timeouts(1)
    };
    let addr = start_with(vec![fake as Arc<dyn PciDevice>], options);
    let mut busy = Raw::connect(addr);
    cfg_read(&mut busy);
    let mut refusals = 0;
    for _ in 0..20 {
        cfg_read(&mut busy);
        match RemotePciDevice::connect("127.0.0.1", addr.port(), 0, &no_retry()) {
            Ok(_) => panic!("a newcomer took the place of a client making progress"),
            Err(e) => {
                let msg = e.to_string();
                assert!(
                    msg.contains("already serves 1 connections, its limit")
                        && msg.contains("try again in "),
                    "{msg}"
                );
                refusals += 1;
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(refusals, 20);
    cfg_read(&mut busy);
}

#[test]
fn our_client_waits_the_time_a_full_server_names_and_then_gets_in() {
    // A newcomer refused because every place is taken by a connection that has not been
    // idle long enough yet is told when to come back; our client comes back then, on its
    // own, rather than failing.
    let fake = FakeDevice::new("fake0", 0x744c);
    let options = ServeOptions {
        idle_timeout: Duration::from_secs(2),
        ..short_timeouts(1)
    };
    let addr = start_with(vec![fake as Arc<dyn PciDevice>], options);
    let mut idle = Raw::connect(addr);
    cfg_read(&mut idle);
    let refused = RemotePciDevice::connect("127.0.0.1", addr.port(), 0, &no_retry())
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(refused.contains("try again in "), "{refused}");
    let dev =
        RemotePciDevice::connect("127.0.0.1", addr.port(), 0, &RemoteOptions::default()).unwrap();
    dev.ping().unwrap();
    idle.send(Command::Ping as u8, 0, 0, [0; 3], &[]);
    let why = idle.refused();
    assert!(why.contains("closed to make room for 127.0.0.1:"), "{why}");
}

#[test]
fn our_client_gives_up_on_a_full_server_past_its_admission_wait() {
    // The place is held by a client making progress: the newcomer is told when to come
    // back, but no time it waits makes room, so it stops trying and says why.
    let fake = FakeDevice::new("fake0", 0x744c);
    let options = ServeOptions {
        // Far longer than the 20 ms between the busy client's requests, on a loaded machine.
        idle_timeout: Duration::from_secs(3),
        ..short_timeouts(1)
    };
    let addr = start_with(vec![fake as Arc<dyn PciDevice>], options);
    let stop = Arc::new(AtomicBool::new(false));
    let busy = {
        let stop = stop.clone();
        let mut busy = Raw::connect(addr);
        cfg_read(&mut busy);
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                cfg_read(&mut busy);
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    let options = RemoteOptions {
        // One retry after the 3 s named, none after the next.
        admission_wait: Duration::from_secs(5),
        ..RemoteOptions::default()
    };
    let err = RemotePciDevice::connect("127.0.0.1", addr.port(), 0, &options)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    stop.store(true, Ordering::SeqCst);
    busy.join().unwrap();
    assert!(
        err.contains("already serves 1 connections, its limit") && err.contains("try again in "),
        "{err}"
    );
}

/// A connection to `addr` from the loopback address `source` (127.0.0.2 and so on), so that
/// the server sees another peer address.
fn connect_from(source: std::net::Ipv4Addr, addr: SocketAddr) -> TcpStream {
    use nix::sys::socket::{AddressFamily, SockFlag, SockType, SockaddrIn, bind, connect, socket};
    use std::os::fd::AsRawFd;
    let SocketAddr::V4(to) = addr else {
        panic!("the servers here listen on IPv4")
    };
    let fd = socket(
        AddressFamily::Inet,
        SockType::Stream,
        SockFlag::empty(),
        None,
    )
    .unwrap();
    bind(
        fd.as_raw_fd(),
        &SockaddrIn::from(std::net::SocketAddrV4::new(source, 0)),
    )
    .unwrap();
    connect(fd.as_raw_fd(), &SockaddrIn::from(to)).unwrap();
    let s = TcpStream::from(fd);
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

#[test]
fn one_address_holds_at_most_its_share_and_another_still_gets_in() {
    let fake = FakeDevice::new("fake0", 0x744c);
    let options = ServeOptions {
        max_connections_per_address: 2,
        ..short_timeouts(16)
    };
    let addr = start_with(vec![fake as Arc<dyn PciDevice>], options);
    let local = std::net::Ipv4Addr::LOCALHOST;
    let mut first = Raw(connect_from(local, addr));
    first.ping();
    let mut second = Raw(connect_from(local, addr));
    second.ping();
    let mut third = Raw(connect_from(local, addr));
    third.send(Command::Ping as u8, 0, 0, [0; 3], &[]);
    let msg = third.refused();
    assert!(
        msg.contains("already serves 2 connections from 127.0.0.1, its limit per address")
            && msg.contains("--max-connections-per-address"),
        "{msg}"
    );
    let mut other = Raw(connect_from(std::net::Ipv4Addr::new(127, 0, 0, 2), addr));
    other.ping();
    first.ping();
    second.ping();
}

#[test]
fn accepted_connections_have_tcp_keepalive_so_a_vanished_peer_is_noticed() {
    // A peer gone without closing sends nothing, and a connection waiting for its next
    // request would wait for ever (with the device it owns). The kernel's keepalive timer
    // on the server's side of the connection shows in /proc/net/tcp as timer 2.
    let fake = FakeDevice::new("fake0", 0x744c);
    let addr = start_one(&fake);
    let mut raw = Raw::connect(addr);
    raw.ping();
    let client_port = raw.0.local_addr().unwrap().port();
    let tcp = std::fs::read_to_string("/proc/net/tcp").unwrap();
    let server_side = tcp
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| {
            f[1].ends_with(&format!(":{:04X}", addr.port()))
                && f[2].ends_with(&format!(":{client_port:04X}"))
        })
        .expect("the server's side of the connection in /proc/net/tcp");
    let timer = server_side[5].split(':').next().unwrap();
    assert_eq!(timer, "02", "the keepalive timer runs: {server_side:?}");
}

/// Options for the owner lease tests: an owner quiet for half a second loses its device.
fn short_lease() -> ServeOptions {
    ServeOptions {
        owner_timeout: Duration::from_millis(500),
        ..short_timeouts(16)
    }
}

#[test]
fn an_owner_that_sends_nothing_loses_the_device_to_a_writer_and_is_told_why() {
    // RELIABILITY.md said: an owner whose peer vanished without closing keeps the device
    // until the server notices, without traffic never. Here it claims and falls silent.
    let fake = FakeDevice::new("fake0", 0x744c);
    let addr = start_with(vec![fake.clone() as Arc<dyn PciDevice>], short_lease());
    let mut silent = Raw::connect(addr);
    silent.send(Command::Owner as u8, 0, 0, [1, 0, 0], &[]);
    let (h, _) = silent.answer(0).unwrap().unwrap();
    let mut text = vec![0u8; h.val0 as usize];
    silent.0.read_exact(&mut text).unwrap();
    assert_eq!(h.val1, 1, "the claim made it the owner");
    let writer = client(addr, 0);
    std::thread::sleep(Duration::from_millis(700));
    writer.config_write(0x40, 1, 0x22).unwrap();
    assert_eq!(writer.ownership().unwrap(), Some(Ownership::Mine));
    assert_eq!(fake.config_read(0x40, 1).unwrap(), 0x22);
    silent.send(Command::Ping as u8, 0, 0, [0; 3], &[]);
    let msg = silent.refused();
    assert!(
        msg.contains("this connection owned fake0 (device 0) but nothing came from it")
            && msg.contains("--owner-timeout"),
        "{msg}"
    );
}

#[test]
fn an_owner_that_keeps_asking_keeps_its_device_past_the_owner_timeout() {
    // A driver waiting on a long GPU job polls its fences: each poll is a request, so the
    // lease holds however long the job runs. Here it polls every 20 ms, for three times
    // its 1-second lease, while another client keeps trying to write.
    let fake = FakeDevice::new("fake0", 0x744c);
    let options = ServeOptions {
        owner_timeout: Duration::from_secs(1),
        ..short_lease()
    };
    let addr = start_with(vec![fake as Arc<dyn PciDevice>], options);
    let owner = Arc::new(client(addr, 0));
    owner.config_write(0x40, 1, 0x11).unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let poller = {
        let (owner, done) = (owner.clone(), done.clone());
        std::thread::spawn(move || {
            while !done.load(Ordering::SeqCst) {
                owner.config_read(0x40, 1).unwrap();
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    let other = client(addr, 0);
    let start = std::time::Instant::now();
    while start.elapsed() < Duration::from_secs(3) {
        let err = other.config_write(0x40, 1, 0x22).unwrap_err();
        assert!(err.to_string().contains("is owned by"), "{err}");
    }
    done.store(true, Ordering::SeqCst);
    poller.join().unwrap();
    assert_eq!(owner.ownership().unwrap(), Some(Ownership::Mine));
    assert_eq!(owner.config_read(0x40, 1).unwrap(), 0x11);
}

#[test]
fn a_relay_names_the_upstream_owner_to_its_clients() {
    // fake ← server A ← relay (our client) ← server B ← reader. The owner is A's client, so
    // B has no owner of its own; its readers must still be told who owns the device.
    let fake = FakeDevice::new("fake0", 0x744c);
    let a = start_one(&fake);
    let owner = client(a, 0);
    owner.config_write(0x40, 1, 0x11).unwrap();
    let relay = client(a, 0);
    let b = start_with(
        vec![Arc::new(relay) as Arc<dyn PciDevice>],
        ServeOptions::default(),
    );
    let reader = client(b, 0);
    let Some(Ownership::Other(who)) = reader.ownership().unwrap() else {
        panic!("a relay's client is told that an upstream client owns the device");
    };
    let Some(Ownership::Mine) = owner.ownership().unwrap() else {
        panic!("the owner still owns the device");
    };
    assert!(
        who.starts_with("127.0.0.1:") && who.contains(" since ") && who.contains("behind remote:"),
        "{who}"
    );
    // A client of the relay that writes becomes the relay's owner, but the device is still
    // held upstream: it is told so, and its write is refused there.
    let writer = client(b, 0);
    assert!(writer.config_write(0x40, 1, 0x22).is_err());
    let Some(Ownership::Other(still)) = writer.ownership().unwrap() else {
        panic!("a relay's owner is told that an upstream client holds the device");
    };
    assert_eq!(still.split(" since ").next(), who.split(" since ").next());
    drop(writer);
    drop(owner);
    // Once the upstream owner is gone, nobody owns it, upstream or here.
    let mut nobody = false;
    for _ in 0..200 {
        if reader.ownership().unwrap() == Some(Ownership::Nobody) {
            nobody = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(
        nobody,
        "the upstream owner left but the relay still names one"
    );
}

#[test]
fn a_relay_keeps_window_reads_one_transaction_beside_an_owner_aiming_by_hand() {
    // window ← server A ← relay (our client) ← server B ← readers. The relay must send its
    // readers' INDEXED requests on as INDEXED requests: as plain accesses they interleave
    // with the owner's on A, and their aiming writes are refused there (A's owner is
    // another connection).
    let dev = WindowDevice::new();
    let a = start_with(
        vec![dev.clone() as Arc<dyn PciDevice>],
        ServeOptions::default(),
    );
    let owner = client(a, 0);
    owner.config_write(0x40, 1, 1).unwrap();
    let relay = client(a, 0);
    let b = start_with(
        vec![Arc::new(relay) as Arc<dyn PciDevice>],
        ServeOptions::default(),
    );
    let wrong = Arc::new(AtomicU32::new(0));
    let mut threads = Vec::new();
    for t in 0..2u64 {
        let wrong = wrong.clone();
        threads.push(std::thread::spawn(move || {
            let reader = client(b, 0);
            let bar5 = reader.bar(5).unwrap();
            for i in 0..200u64 {
                let at = ((i * 7919 + t * 104_729) % WINDOW_VRAM_DWORDS) * 4;
                if bar5.indexed(&window_read(at)).unwrap() != vram_pattern(at) {
                    wrong.fetch_add(1, Ordering::SeqCst);
                }
            }
        }));
    }
    wrong.fetch_add(
        owner_reads_by_hand(&*owner.bar(5).unwrap(), 200),
        Ordering::SeqCst,
    );
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(
        wrong.load(Ordering::SeqCst),
        0,
        "reads through a window another aimed"
    );
    assert_eq!(owner.ownership().unwrap(), Some(Ownership::Mine));
}
