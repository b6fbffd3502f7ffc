//! The client: a [`PciDevice`] whose config space, BARs and system memory live on another
//! machine, reached through one TCP connection per device object.

use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use super::protocol::{
    AMD_PROBE_DEVICE_IDS, Command, EXT_INDEXED, EXT_OWNER, EXT_SMU, EXTENSIONS_PROBE,
    MAX_INDEX_STEPS, OWNER_CLAIM, OwnerState, ProbeEntry, REQUEST_HEADER_LEN, RESPONSE_HEADER_LEN,
    RequestHeader, ResponseHeader, WireStep, decode_extensions, decode_probe_names,
    encode_index_steps, encode_probe_filter, retry_after,
};
use crate::pci::{
    AMD_VENDOR_ID, Bar, BarInfo, IndexStep, Ownership, PciDevice, SYSMEM_PAGE_SIZE, SmuAnswer,
    SysMem, plain_index_steps, restoring_index_steps,
};
use crate::{Error, ErrorKind, Result};

/// Payloads up to this size go out in the same `write` as their header, so that a register
/// write is one TCP segment; larger ones are streamed straight from the caller's slice.
const COALESCE_LIMIT: usize = 4096;

/// Longest error message or PROBE answer the client accepts. These are text for people; a
/// longer one means the stream is not the protocol.
const MAX_TEXT_LEN: u64 = 1 << 20;

/// Number of BARs of a PCI function.
const NUM_BARS: usize = 6;

/// Timeouts of a remote connection.
#[derive(Clone, Copy, Debug)]
pub struct RemoteOptions {
    /// How long to wait for the TCP connection. tinygrad's `REMOTE_TIMEOUT` default (3 s):
    /// a server on a reachable network answers a SYN in milliseconds.
    pub connect_timeout: Duration,
    /// How long to wait for each response (and for each blocked send). A response can
    /// queue behind a pipelined 16.8 MB firmware write and a device reset takes about a
    /// second, so this is generous; what it catches is a server that stopped answering.
    pub response_timeout: Duration,
    /// How long connecting keeps trying a server that is full ([`RemotePciDevice::connect`],
    /// [`probe`]): a refusal that names when to try again (`am serve` names when its
    /// stalest connection will have been idle for its `--idle-timeout`, 30 s by default) is
    /// tried again then, while that is within this time of the first try. Zero: never.
    pub admission_wait: Duration,
}

impl Default for RemoteOptions {
    fn default() -> RemoteOptions {
        RemoteOptions {
            connect_timeout: Duration::from_secs(3),
            response_timeout: Duration::from_secs(30),
            // Twice `am serve`'s default idle timeout: time for a full server to free a
            // place, and for the stalest connection to have been idle long enough.
            admission_wait: Duration::from_secs(60),
        }
    }
}

/// The socket and whether it can still be trusted: after a timeout or a cut-off transfer the
/// byte stream may be mid-message, so every later request fails with the original cause.
struct Link {
    stream: TcpStream,
    broken: Option<String>,
    /// Whether the server made this connection the owner of its device: a server with
    /// [`EXT_OWNER`] is asked to before the first request that writes, whose refusal then
    /// has an answer to carry it (a refused pipelined write would close the connection).
    owner: bool,
}

/// One TCP connection, shared by a device and its BARs and system-memory regions.
struct Connection {
    device: String,
    timeout: Duration,
    link: Mutex<Link>,
    /// The `am serve` extensions the server listed in its PROBE answer (0: tinygrad's
    /// server, or an older `am serve`).
    extensions: AtomicU32,
}

impl Connection {
    fn open(device: &str, host: &str, port: u16, options: &RemoteOptions) -> Result<Connection> {
        let fail = |reason: String| {
            Error::new(
                device.to_string(),
                ErrorKind::Remote {
                    request: format!("connect to {host}:{port}"),
                    reason,
                },
            )
        };
        let addrs: Vec<_> = (host, port)
            .to_socket_addrs()
            .map_err(|e| fail(format!("cannot resolve the host: {e}")))?
            .collect();
        let mut last = None;
        let mut stream = None;
        for addr in &addrs {
            match TcpStream::connect_timeout(addr, options.connect_timeout) {
                Ok(s) => {
                    stream = Some(s);
                    break;
                }
                Err(e) if addrs.len() == 1 => last = Some(e.to_string()),
                Err(e) => last = Some(format!("{addr}: {e}")),
            }
        }
        let stream = stream.ok_or_else(|| {
            fail(last.unwrap_or_else(|| "the host resolves to no address".to_string()))
        })?;
        let setup = || -> io::Result<()> {
            // Every register access is a round trip: Nagle would add tens of milliseconds.
            stream.set_nodelay(true)?;
            stream.set_read_timeout(Some(options.response_timeout))?;
            stream.set_write_timeout(Some(options.response_timeout))
        };
        setup().map_err(|e| fail(format!("cannot configure the socket: {e}")))?;
        Ok(Connection {
            device: device.to_string(),
            timeout: options.response_timeout,
            link: Mutex::new(Link {
                stream,
                broken: None,
                owner: false,
            }),
            extensions: AtomicU32::new(0),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Link> {
        am_isa::sync::lock(&self.link)
    }

    fn has(&self, extension: u32) -> bool {
        self.extensions.load(Ordering::Relaxed) & extension != 0
    }

    fn io_error(&self, req: &RequestHeader, e: io::Error) -> Error {
        let (device, request) = (self.device.clone(), req.to_string());
        match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => Error::new(
                device,
                ErrorKind::RemoteTimeout {
                    request,
                    timeout: self.timeout,
                },
            ),
            io::ErrorKind::UnexpectedEof
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe => Error::new(device, ErrorKind::RemoteClosed { request }),
            _ => Error::new(
                device,
                ErrorKind::Remote {
                    request,
                    reason: e.to_string(),
                },
            ),
        }
    }

    /// Send a request; when it has a response, read the header and hand the stream to
    /// `body` to read what follows a successful one.
    fn transact<T>(
        &self,
        req: RequestHeader,
        payload: &[u8],
        body: impl FnOnce(&mut TcpStream, ResponseHeader) -> std::result::Result<T, Body>,
    ) -> Result<Option<T>> {
        let writes = req.command().is_some_and(Command::writes);
        self.transact_as(req, payload, writes, body)
    }

    /// [`Connection::transact`], told whether the request writes (an INDEXED one does when
    /// one of its steps does). A writing request on a server with owners first claims the
    /// device, unless this connection did already.
    fn transact_as<T>(
        &self,
        req: RequestHeader,
        payload: &[u8],
        writes: bool,
        body: impl FnOnce(&mut TcpStream, ResponseHeader) -> std::result::Result<T, Body>,
    ) -> Result<Option<T>> {
        let mut link = self.lock();
        if let Some(cause) = &link.broken {
            return Err(Error::new(
                &self.device,
                ErrorKind::Remote {
                    request: req.to_string(),
                    reason: format!("the connection is unusable after an earlier failure: {cause}"),
                },
            ));
        }
        let result = if writes && !link.owner && self.has(EXT_OWNER) {
            let claim = RequestHeader::new(Command::Owner, req.dev_id, 0, [OWNER_CLAIM, 0, 0]);
            Self::exchange(&mut link.stream, &claim, &[], |s, resp| {
                // The answer's text describes the owner (us); it is not needed here.
                read_text(s, resp.val0, "OWNER", "text")?;
                Ok(())
            })
            .and_then(|_| {
                link.owner = true;
                Self::exchange(&mut link.stream, &req, payload, body)
            })
        } else {
            Self::exchange(&mut link.stream, &req, payload, body)
        };
        match result {
            Ok(v) => Ok(v),
            Err(Exchange::Refused(message)) => Err(Error::new(
                &self.device,
                ErrorKind::RemoteRefused {
                    request: req.to_string(),
                    message,
                },
            )),
            Err(Exchange::Io(e)) => {
                let err = self.io_error(&req, e);
                link.broken = Some(err.to_string());
                Err(err)
            }
            Err(Exchange::Protocol(reason)) => {
                let err = Error::new(
                    &self.device,
                    ErrorKind::Remote {
                        request: req.to_string(),
                        reason: format!("the server broke the protocol: {reason}"),
                    },
                );
                link.broken = Some(err.to_string());
                Err(err)
            }
        }
    }

    fn exchange<T>(
        stream: &mut TcpStream,
        req: &RequestHeader,
        payload: &[u8],
        body: impl FnOnce(&mut TcpStream, ResponseHeader) -> std::result::Result<T, Body>,
    ) -> std::result::Result<Option<T>, Exchange> {
        let header = req.encode();
        if payload.len() <= COALESCE_LIMIT {
            let mut msg = [0u8; REQUEST_HEADER_LEN + COALESCE_LIMIT];
            msg[..REQUEST_HEADER_LEN].copy_from_slice(&header);
            msg[REQUEST_HEADER_LEN..][..payload.len()].copy_from_slice(payload);
            stream.write_all(&msg[..REQUEST_HEADER_LEN + payload.len()])?;
        } else {
            stream.write_all(&header)?;
            stream.write_all(payload)?;
        }
        if !req.command().is_some_and(Command::has_response) {
            return Ok(None);
        }
        let mut rb = [0u8; RESPONSE_HEADER_LEN];
        stream.read_exact(&mut rb)?;
        let resp = ResponseHeader::decode(&rb);
        if resp.status != 0 {
            if resp.val0 > MAX_TEXT_LEN {
                return Err(Exchange::Protocol(format!(
                    "error status {} announces a {}-byte message",
                    resp.status, resp.val0
                )));
            }
            let mut msg = vec![0u8; resp.val0 as usize];
            stream.read_exact(&mut msg)?;
            let text = String::from_utf8_lossy(&msg).into_owned();
            return Err(Exchange::Refused(if text.is_empty() {
                format!("error status {} without a message", resp.status)
            } else {
                text
            }));
        }
        match body(stream, resp) {
            Ok(v) => Ok(Some(v)),
            Err(Body::Io(e)) => Err(Exchange::Io(e)),
            Err(Body::Protocol(r)) => Err(Exchange::Protocol(r)),
        }
    }

    /// A request whose successful answer is the header alone.
    fn call(&self, req: RequestHeader) -> Result<ResponseHeader> {
        self.transact(req, &[], |_, resp| Ok(resp))?
            .ok_or_else(|| self.no_response(&req))
    }

    /// A request that reads exactly `buf.len()` bytes of data.
    fn read_into(&self, req: RequestHeader, buf: &mut [u8]) -> Result<()> {
        let want = buf.len() as u64;
        self.transact(req, &[], |s, resp| {
            if resp.val0 != want {
                return Err(Body::Protocol(format!(
                    "answered {} bytes for a {want}-byte read",
                    resp.val0
                )));
            }
            Ok(s.read_exact(buf)?)
        })?
        .ok_or_else(|| self.no_response(&req))
    }

    /// A pipelined write: sent, never answered.
    fn send(&self, req: RequestHeader, payload: &[u8]) -> Result<()> {
        self.transact(req, payload, |_, _| Ok(())).map(|_| ())
    }

    fn no_response(&self, req: &RequestHeader) -> Error {
        Error::new(
            &self.device,
            ErrorKind::Remote {
                request: req.to_string(),
                reason: "a request without a response was used as a call".to_string(),
            },
        )
    }
}

/// Why reading a response body failed.
enum Body {
    Io(io::Error),
    Protocol(String),
}

/// Reads the `len` bytes of text an answer of `cmd` announces, refusing more than a message
/// may hold before allocating.
fn read_text(
    s: &mut TcpStream,
    len: u64,
    cmd: &str,
    what: &str,
) -> std::result::Result<Vec<u8>, Body> {
    if len > MAX_TEXT_LEN {
        return Err(Body::Protocol(format!(
            "{cmd} announces {len} bytes of {what}"
        )));
    }
    let mut text = vec![0u8; len as usize];
    s.read_exact(&mut text)?;
    Ok(text)
}

impl From<io::Error> for Body {
    fn from(e: io::Error) -> Body {
        Body::Io(e)
    }
}

enum Exchange {
    Io(io::Error),
    Protocol(String),
    Refused(String),
}

impl From<io::Error> for Exchange {
    fn from(e: io::Error) -> Exchange {
        Exchange::Io(e)
    }
}

/// Ask a server which devices it exports that match `vendor`, `base_class` (0 = any) and
/// the (mask, id) pairs. An answer with no device is an error from the server.
pub fn probe(
    host: &str,
    port: u16,
    vendor: u16,
    base_class: u8,
    ids: &[(u32, u32)],
    options: &RemoteOptions,
) -> Result<Vec<ProbeEntry>> {
    let name = format!("remote:{}:{port}", bracket(host));
    admitted(options, || {
        let conn = Connection::open(&name, host, port, options)?;
        probe_on(&conn, vendor, base_class, ids)
    })
}

/// Least wait before trying a full server again, whatever its refusal says (one naming
/// 0.0 s must not make a busy loop), and how much later than the time named the next try
/// comes (the server's clock and ours do not tick together).
const RETRY_FLOOR: Duration = Duration::from_millis(100);
const RETRY_MARGIN: Duration = Duration::from_millis(50);

/// `attempt` (a connection and its first request), tried again while the server refuses it
/// for being full and names when to come back, as long as that is within
/// [`RemoteOptions::admission_wait`] of the first try; else the last refusal.
fn admitted<T>(options: &RemoteOptions, mut attempt: impl FnMut() -> Result<T>) -> Result<T> {
    let start = std::time::Instant::now();
    loop {
        let err = match attempt() {
            Ok(v) => return Ok(v),
            Err(e) => e,
        };
        let named = match &err.kind {
            ErrorKind::RemoteRefused { message, .. } => retry_after(message),
            _ => None,
        };
        let Some(wait) = named.map(|w| w.max(RETRY_FLOOR) + RETRY_MARGIN) else {
            return Err(err);
        };
        if start.elapsed() + wait > options.admission_wait {
            return Err(err);
        }
        tracing::info!("{}; trying again in {wait:?}", err);
        std::thread::sleep(wait);
    }
}

/// The AMD GPUs a server exports, probed as tinygrad's AMD backend does (plus the MI350X VF).
pub fn probe_amd(host: &str, port: u16, options: &RemoteOptions) -> Result<Vec<ProbeEntry>> {
    probe(host, port, AMD_VENDOR_ID, 0, &amd_probe_filter(), options)
}

fn amd_probe_filter() -> Vec<(u32, u32)> {
    AMD_PROBE_DEVICE_IDS
        .iter()
        .map(|&id| (0xffff, u32::from(id)))
        .collect()
}

fn probe_on(
    conn: &Connection,
    vendor: u16,
    base_class: u8,
    ids: &[(u32, u32)],
) -> Result<Vec<ProbeEntry>> {
    let payload = encode_probe_filter(ids);
    // `bar` asks `am serve` for its extensions; other servers ignore it.
    let req = RequestHeader::new(
        Command::Probe,
        0,
        EXTENSIONS_PROBE,
        [
            u64::from(base_class),
            payload.len() as u64,
            u64::from(vendor),
        ],
    );
    let text = conn
        .transact(req, &payload, |s, resp| {
            let data = read_text(s, resp.val0, "PROBE", "names")?;
            conn.extensions
                .store(decode_extensions(resp.val1), Ordering::Relaxed);
            String::from_utf8(data)
                .map_err(|_| Body::Protocol("PROBE names are not UTF-8".to_string()))
        })?
        .ok_or_else(|| conn.no_response(&req))?;
    decode_probe_names(&text).ok_or_else(|| {
        Error::new(
            &conn.device,
            ErrorKind::Remote {
                request: req.to_string(),
                reason: format!("PROBE names {text:?} are not \"<name>:<index>\" lines"),
            },
        )
    })
}

fn bracket(host: &str) -> String {
    if host.contains(':') {
        format!("[{host}]")
    } else {
        host.to_string()
    }
}

/// A PCI device exported by a remote PCI server (`am serve`, or tinygrad's
/// `extra/remote/serve.py`).
///
/// Opening probes the server for AMD GPUs (servers answer only probed indices) and checks
/// that index `N` is among them; the server opens the device on the first command that
/// names it.
pub struct RemotePciDevice {
    name: String,
    remote_name: String,
    index: u32,
    conn: Arc<Connection>,
    infos: Mutex<[Option<BarInfo>; NUM_BARS]>,
    bars: Mutex<[Option<Arc<RemoteBar>>; NUM_BARS]>,
}

impl RemotePciDevice {
    /// Connect to device `index` of the server at `host:port`.
    pub fn connect(
        host: &str,
        port: u16,
        index: u32,
        options: &RemoteOptions,
    ) -> Result<RemotePciDevice> {
        let name = format!("remote:{}:{port}:{index}", bracket(host));
        let (conn, entries) = admitted(options, || {
            let conn = Connection::open(&name, host, port, options)?;
            let entries = probe_on(&conn, AMD_VENDOR_ID, 0, &amd_probe_filter())?;
            Ok((conn, entries))
        })?;
        let Some(entry) = entries.iter().find(|e| e.index == index) else {
            let have: Vec<String> = entries
                .iter()
                .map(|e| format!("{} ({})", e.index, e.name))
                .collect();
            return Err(Error::new(
                name,
                ErrorKind::Remote {
                    request: "PROBE".to_string(),
                    reason: format!(
                        "the server exports no AMD GPU with index {index}; it has: {}",
                        have.join(", ")
                    ),
                },
            ));
        };
        Ok(RemotePciDevice {
            remote_name: entry.name.clone(),
            name,
            index,
            conn: Arc::new(conn),
            infos: Mutex::new([None; NUM_BARS]),
            bars: Mutex::new(Default::default()),
        })
    }

    /// What the server calls this device (its BDF, or the spec it was opened with).
    pub fn remote_name(&self) -> &str {
        &self.remote_name
    }

    /// Round trip to the server.
    pub fn ping(&self) -> Result<()> {
        self.conn
            .call(RequestHeader::new(Command::Ping, self.index, 0, [0; 3]))
            .map(|_| ())
    }

    fn bar_index(&self, index: u8) -> Result<usize> {
        let i = usize::from(index);
        if i >= NUM_BARS {
            return Err(Error::new(
                &self.name,
                ErrorKind::NoBar {
                    bar: index,
                    reason: format!("a PCI function has BARs 0 to {}", NUM_BARS - 1),
                },
            ));
        }
        Ok(i)
    }
}

impl PciDevice for RemotePciDevice {
    fn name(&self) -> &str {
        &self.name
    }

    fn backend(&self) -> &'static str {
        "remote"
    }

    fn config_read(&self, offset: u16, size: u8) -> Result<u32> {
        let req = RequestHeader::new(
            Command::CfgRead,
            self.index,
            0,
            [u64::from(offset), u64::from(size), 0],
        );
        let resp = self.conn.call(req)?;
        u32::try_from(resp.val0).map_err(|_| {
            Error::new(
                &self.name,
                ErrorKind::Remote {
                    request: req.to_string(),
                    reason: format!("the server answered {:#x}, wider than 32 bits", resp.val0),
                },
            )
        })
    }

    fn config_write(&self, offset: u16, size: u8, value: u32) -> Result<()> {
        let args = [u64::from(offset), u64::from(size), u64::from(value)];
        let req = RequestHeader::new(Command::CfgWrite, self.index, 0, args);
        self.conn.call(req).map(|_| ())
    }

    fn bar_info(&self, index: u8) -> Result<BarInfo> {
        let i = self.bar_index(index)?;
        let mut infos = am_isa::sync::lock(&self.infos);
        if let Some(info) = infos[i] {
            return Ok(info);
        }
        let req = RequestHeader::new(Command::MapBar, self.index, u32::from(index), [0; 3]);
        let resp = self.conn.call(req)?;
        let info = BarInfo {
            index,
            bus_addr: resp.val0,
            size: resp.val1,
        };
        infos[i] = Some(info);
        Ok(info)
    }

    fn bar(&self, index: u8) -> Result<Arc<dyn Bar>> {
        let i = self.bar_index(index)?;
        let info = self.bar_info(index)?;
        let mut bars = am_isa::sync::lock(&self.bars);
        let bar = bars[i].get_or_insert_with(|| {
            Arc::new(RemoteBar {
                conn: self.conn.clone(),
                dev_id: self.index,
                index,
                size: info.size,
            })
        });
        Ok(bar.clone())
    }

    fn resize_bar(&self, index: u8) -> Result<()> {
        let i = self.bar_index(index)?;
        let req = RequestHeader::new(Command::ResizeBar, self.index, u32::from(index), [0; 3]);
        self.conn.call(req)?;
        // The size changed: the next bar_info asks again and the next bar() maps anew.
        am_isa::sync::lock(&self.infos)[i] = None;
        am_isa::sync::lock(&self.bars)[i] = None;
        Ok(())
    }

    fn alloc_sysmem(&self, size: usize, contiguous: bool) -> Result<Arc<dyn SysMem>> {
        let pages = size.div_ceil(SYSMEM_PAGE_SIZE);
        let len = pages.checked_mul(SYSMEM_PAGE_SIZE).ok_or_else(|| {
            Error::new(
                &self.name,
                ErrorKind::Remote {
                    request: "MAP_SYSMEM".to_string(),
                    reason: format!("{size} bytes cannot be rounded up to whole pages"),
                },
            )
        })?;
        let args = [len as u64, u64::from(contiguous), 0];
        let req = RequestHeader::new(Command::MapSysmem, self.index, 0, args);
        let want = (pages as u64).saturating_mul(8);
        let (handle, bus_addrs) = self
            .conn
            .transact(req, &[], |s, resp| {
                if resp.val0 != want {
                    return Err(Body::Protocol(format!(
                        "answered {} bytes of bus addresses for {pages} pages",
                        resp.val0
                    )));
                }
                let handle = u32::try_from(resp.val1).map_err(|_| {
                    Body::Protocol(format!("handle {} does not fit 32 bits", resp.val1))
                })?;
                let mut raw = vec![0u8; pages * 8];
                s.read_exact(&mut raw)?;
                let addrs = raw
                    .chunks_exact(8)
                    .map(|c| {
                        let mut w = [0u8; 8];
                        w.copy_from_slice(c);
                        u64::from_le_bytes(w)
                    })
                    .collect::<Vec<u64>>();
                Ok((handle, addrs))
            })?
            .ok_or_else(|| self.conn.no_response(&req))?;
        Ok(Arc::new(RemoteSysMem {
            conn: self.conn.clone(),
            dev_id: self.index,
            handle,
            len,
            bus_addrs,
        }))
    }

    fn reset(&self) -> Result<()> {
        let req = RequestHeader::new(Command::Reset, self.index, 0, [0; 3]);
        self.conn.call(req).map(|_| ())
    }

    fn dma_read(&self, bus: u64, buf: &mut [u8]) -> Result<()> {
        let req = RequestHeader::new(Command::DmaRead, self.index, 0, [bus, buf.len() as u64, 0]);
        self.conn.read_into(req, buf)
    }

    fn smu_query(&self, message: u32, param: u32, timeout: Duration) -> Result<Option<SmuAnswer>> {
        if !self.conn.has(EXT_SMU) {
            return Ok(None);
        }
        let ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
        let req = RequestHeader::new(
            Command::Smu,
            self.index,
            0,
            [message.into(), param.into(), ms],
        );
        let resp = self.conn.call(req)?;
        let word = |v: u64, what: &str| {
            u32::try_from(v).map_err(|_| {
                Error::new(
                    &self.conn.device,
                    ErrorKind::Remote {
                        request: req.to_string(),
                        reason: format!("the server broke the protocol: a {what} of {v:#x}"),
                    },
                )
            })
        };
        Ok(Some(SmuAnswer {
            response: word(resp.val0, "response")?,
            value: word(resp.val1, "result")?,
        }))
    }

    fn ownership(&self) -> Result<Option<Ownership>> {
        if !self.conn.has(EXT_OWNER) {
            return Ok(None);
        }
        let req = RequestHeader::new(Command::Owner, self.index, 0, [0; 3]);
        let (state, text) = self
            .conn
            .transact(req, &[], |s, resp| {
                let text = read_text(s, resp.val0, "OWNER", "text")?;
                let state = OwnerState::from_wire(resp.val1)
                    .ok_or_else(|| Body::Protocol(format!("OWNER answered state {}", resp.val1)))?;
                Ok((state, String::from_utf8_lossy(&text).into_owned()))
            })?
            .ok_or_else(|| self.conn.no_response(&req))?;
        Ok(Some(match state {
            OwnerState::Nobody => Ownership::Nobody,
            OwnerState::This => Ownership::Mine,
            OwnerState::Other => Ownership::Other(text),
        }))
    }
}

fn check_range(device: &str, what: &str, offset: u64, size: usize, len: u64) -> Result<()> {
    let size = size as u64;
    match offset.checked_add(size) {
        Some(end) if end <= len => Ok(()),
        _ => Err(Error::new(
            device.to_string(),
            ErrorKind::OutOfRange {
                what: what.to_string(),
                offset,
                size,
                len,
            },
        )),
    }
}

/// A BAR of a remote device: each access is a request on the device's connection.
struct RemoteBar {
    conn: Arc<Connection>,
    dev_id: u32,
    index: u8,
    size: u64,
}

impl RemoteBar {
    fn check(&self, offset: u64, size: usize) -> Result<()> {
        let what = format!("BAR{}", self.index);
        check_range(&self.conn.device, &what, offset, size, self.size)
    }

    fn request(&self, cmd: Command, offset: u64, size: usize) -> RequestHeader {
        let args = [offset, size as u64, 0];
        RequestHeader::new(cmd, self.dev_id, u32::from(self.index), args)
    }
}

impl Bar for RemoteBar {
    fn len(&self) -> u64 {
        self.size
    }

    fn read_bytes(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.check(offset, buf.len())?;
        let req = self.request(Command::MmioRead, offset, buf.len());
        self.conn.read_into(req, buf)
    }

    fn write_bytes(&self, offset: u64, data: &[u8]) -> Result<()> {
        self.check(offset, data.len())?;
        let req = self.request(Command::MmioWrite, offset, data.len());
        self.conn.send(req, data)
    }

    /// A relay (`am serve remote:…`) runs its clients' INDEXED requests here: one INDEXED
    /// request on, whose server restores the index registers itself; its clients' plain
    /// accesses would otherwise interleave with other clients' of that server (and the
    /// restoring write would need the device's ownership there).
    fn shared_indexed(&self, steps: &[IndexStep]) -> Result<u32> {
        if self.conn.has(EXT_INDEXED) {
            self.indexed(steps)
        } else {
            restoring_index_steps(self, steps)
        }
    }

    /// One INDEXED request when the server has them, so that the window is this client's
    /// from the first step to the last; plain accesses otherwise.
    fn indexed(&self, steps: &[IndexStep]) -> Result<u32> {
        let wire: Option<Vec<WireStep>> = steps
            .iter()
            .map(|s| {
                let dword = |offset: u64| {
                    self.check(offset, 4).ok()?;
                    u32::try_from(offset).ok()
                };
                Some(match *s {
                    IndexStep::Aim { offset, value } => WireStep::Aim {
                        offset: dword(offset)?,
                        value,
                    },
                    IndexStep::Read { offset } => WireStep::Read {
                        offset: dword(offset)?,
                    },
                    IndexStep::Write { offset, value } => WireStep::Write {
                        offset: dword(offset)?,
                        value,
                    },
                })
            })
            .collect();
        let wire = match wire {
            Some(w)
                if self.conn.has(EXT_INDEXED) && !w.is_empty() && w.len() <= MAX_INDEX_STEPS =>
            {
                w
            }
            // Out-of-range steps get their error from the plain accesses.
            _ => return plain_index_steps(self, steps),
        };
        let payload = encode_index_steps(&wire);
        let args = [wire.len() as u64, payload.len() as u64, 0];
        let req = RequestHeader::new(Command::Indexed, self.dev_id, u32::from(self.index), args);
        let writes = wire.iter().any(|s| matches!(s, WireStep::Write { .. }));
        let resp = self
            .conn
            .transact_as(req, &payload, writes, |_, resp| Ok(resp))?
            .ok_or_else(|| self.conn.no_response(&req))?;
        u32::try_from(resp.val0).map_err(|_| {
            Error::new(
                &self.conn.device,
                ErrorKind::Remote {
                    request: req.to_string(),
                    reason: format!("the server answered {:#x}, wider than 32 bits", resp.val0),
                },
            )
        })
    }
}

/// System memory allocated on the server. The protocol has no free: the server keeps the
/// allocation until the connection closes.
struct RemoteSysMem {
    conn: Arc<Connection>,
    dev_id: u32,
    handle: u32,
    len: usize,
    bus_addrs: Vec<u64>,
}

impl RemoteSysMem {
    fn request(&self, cmd: Command, offset: u64, size: usize) -> Result<RequestHeader> {
        check_range(
            &self.conn.device,
            &format!("system memory (handle {})", self.handle),
            offset,
            size,
            self.len as u64,
        )?;
        let args = [offset, size as u64, 0];
        Ok(RequestHeader::new(cmd, self.dev_id, self.handle, args))
    }
}

impl SysMem for RemoteSysMem {
    fn len(&self) -> usize {
        self.len
    }

    fn bus_addrs(&self) -> &[u64] {
        &self.bus_addrs
    }

    fn read_bytes(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let req = self.request(Command::SysmemRead, offset, buf.len())?;
        self.conn.read_into(req, buf)
    }

    fn write_bytes(&self, offset: u64, data: &[u8]) -> Result<()> {
        let req = self.request(Command::SysmemWrite, offset, data.len())?;
        self.conn.send(req, data)
    }
}
