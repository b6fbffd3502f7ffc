//! The server: exports any [`PciDevice`] over the remote PCI protocol, trusting nothing the
//! client sends.
//!
//! Devices are opened by the caller and held open for the server's lifetime (no lazy open):
//! a device that cannot be opened fails before the server listens. Each connection gets its
//! own thread, its own BAR mappings and its own system-memory handles; allocations live
//! until the connection closes (the protocol has no free).

use std::collections::HashSet;
use std::io::{self, Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use am_isa::sync::lock;

use super::protocol::{
    Command, EXT_INDEXED, EXT_OWNER, EXT_SMU, EXTENSIONS_PROBE, INDEX_STEP_LEN, MAX_INDEX_STEPS,
    OWNER_CLAIM, OwnerState, ProbeEntry, REQUEST_HEADER_LEN, RESPONSE_HEADER_LEN, RequestHeader,
    ResponseHeader, WireStep, decode_index_steps, decode_probe_filter, encode_error,
    encode_extensions, encode_probe_names, probe_filter_matches, retry_text,
};
use super::ratelimit::{RateLimit, Verdict};
use crate::discovery::{MM_INDEX, MM_INDEX_HI};
use crate::ip::smu::SharedMailbox;
use crate::pci::{Bar, IndexStep, Ownership, PciDevice, SYSMEM_PAGE_SIZE, SysMem};
use crate::{Error, ErrorKind, Result};

/// Size of PCIe extended config space.
const CONFIG_SPACE_LEN: u64 = 4096;
/// Largest PROBE filter accepted: 8192 (mask, id) pairs, far more than any client sends.
const MAX_PROBE_PAYLOAD: u64 = 64 << 10;
/// Number of BARs of a PCI function.
const NUM_BARS: u32 = 6;
/// Config-space offset of the base class byte.
const PCI_CLASS_BASE: u16 = 0x0b;
/// Slowest payload a client may send or take: 1 MiB/s on top of the read timeout. A
/// 16.8 MB firmware write over a slow link still fits; a client trickling a 1 GiB payload a
/// byte at a time does not hold its connection for days.
const MIN_PAYLOAD_RATE: u64 = 1 << 20;
/// Most peers remembered as refused by `--allow` (each is logged once); past that, refusals
/// are only rate-limited, so a scan of many addresses cannot grow the set without bound.
const MAX_REMEMBERED_REFUSED_PEERS: usize = 4096;
/// Most refused connections lingering at once to be told why (see [`refuse_connection`]).
const MAX_LINGERING_REFUSALS: usize = 64;
/// How long a write waits for another connection's ownership to end before it is refused:
/// a client that closed its connection and at once opened the next (a job, then the next
/// one) frees the device only when the server's thread for it sees the close, a moment
/// later.
const CLAIM_GRACE: Duration = Duration::from_millis(250);
/// How long a refused connection lingers so its first request is read and its error arrives
/// before the close (closing with unread data sends a reset that can overtake it).
const REFUSAL_LINGER: Duration = Duration::from_millis(500);
/// How late a piece of a request other than PING may come and still count as progress (see
/// [`Conn::progress`]): a header within this of its first byte, a chunk of a payload or an
/// answer within this plus its size at [`MIN_PAYLOAD_RATE`]. Any client we know sends a
/// header in one go; one dribbled a few bytes a second is not progress.
const PROGRESS_ALLOWANCE: Duration = Duration::from_secs(1);
/// Longest an SMU query beside the owner may take, waiting for the mailbox to be idle and
/// for the answer together: the owner's accesses wait while the query holds the window
/// lock, and the driver's own wait for any SMU answer is 10 s.
const MAX_SMU_QUERY: Duration = Duration::from_secs(10);
/// How often a thread blocked writing an answer looks whether its connection was closed by
/// another thread (to make room, or to hand its device on); a blocked read is woken at once.
const EVICTION_POLL: Duration = Duration::from_millis(100);
/// TCP keepalive on every accepted connection: a peer that vanished without closing (a
/// cable pulled, a host powered off) is noticed after 60 s of silence and 6 unanswered
/// probes 10 s apart, two minutes in all, and its connection (and the device it owns) ends.
const KEEPALIVE_IDLE_SECS: u32 = 60;
const KEEPALIVE_INTERVAL_SECS: u32 = 10;
const KEEPALIVE_PROBES: u32 = 6;

/// An address range a client may connect from (`ADDR/PREFIX`, or one `ADDR`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cidr {
    net: IpAddr,
    prefix: u8,
}

impl Cidr {
    /// Whether `ip` is inside this range. IPv4 peers of an IPv6 socket (`::ffff:a.b.c.d`)
    /// count as the IPv4 address.
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.net, ip.to_canonical()) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

impl FromStr for Cidr {
    type Err = Error;

    fn from_str(text: &str) -> Result<Cidr> {
        let bad = |reason: &str| {
            Error::from(ErrorKind::BadCidr {
                text: text.to_string(),
                reason: reason.to_string(),
            })
        };
        let (addr, prefix) = match text.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (text, None),
        };
        let net: IpAddr = addr.parse().map_err(|_| bad("not an IP address"))?;
        let net = net.to_canonical();
        let max = if net.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => max,
            Some(p) => p
                .parse::<u8>()
                .ok()
                .filter(|&p| p <= max)
                .ok_or_else(|| bad(&format!("the prefix must be 0 to {max}")))?,
        };
        Ok(Cidr { net, prefix })
    }
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.net, self.prefix)
    }
}

/// Limits of a server. Every size a client sends is checked against them before anything
/// is allocated or touched.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    /// Largest MMIO or system-memory read or write in one request, in bytes. A boot
    /// writes about 16.8 MB of firmware in one MMIO_WRITE; payloads are streamed through a
    /// chunk buffer, so this bounds the time a request holds a device, not memory.
    pub max_payload: u64,
    /// Largest single MAP_SYSMEM, in bytes.
    pub max_sysmem_alloc: u64,
    /// Most system memory one connection may hold, in bytes.
    pub max_sysmem_per_connection: u64,
    /// Most system memory all connections together may hold, in bytes (default
    /// [`default_max_sysmem_total`]): the per-connection cap times the connection cap is
    /// far more than most hosts have.
    pub max_sysmem_total: u64,
    /// Size of the buffer payloads are streamed through, in bytes.
    pub chunk_size: usize,
    /// Most connections served at once. When all are taken, a newcomer whose first request
    /// is not a PING takes the place of the connection without progress for longest, once
    /// that is `idle_timeout` (see [`ServeOptions::idle_timeout`]); otherwise it gets an error
    /// naming the limit and is closed.
    pub max_connections: usize,
    /// Most connections from one IP address at once, served or awaiting their first request;
    /// more get an error naming this limit. One host cannot take every slot.
    pub max_connections_per_address: usize,
    /// Once a request's first byte arrived, its header must follow within this, and its
    /// payload may pause no longer (nor take longer than this plus 1 MiB/s). A response the
    /// client does not take within the same time (this plus 1 MiB/s of its size) closes the
    /// connection too.
    pub read_timeout: Duration,
    /// A served connection without progress for this long gives its place to a newcomer
    /// when the server is full, so idle and slow clients cannot lock others out; nobody is
    /// closed while slots are free. Progress is a request other than PING whose header comes
    /// within a second of its first byte, and each MiB of a payload or answer at 1 MiB/s
    /// (after that second): pinging, dribbling a header or trickling a payload is idle.
    pub idle_timeout: Duration,
    /// An owner from which nothing came (no request, not even a PING) for this long loses
    /// the device to another connection that wants to write, and its connection is closed
    /// with the reason: the owner rule must not keep a device for a peer that vanished.
    pub owner_timeout: Duration,
    /// Peers allowed to connect; empty allows everyone.
    pub allow: Vec<Cidr>,
    /// Serve only what reads: PROBE, MAP_BAR, CFG_READ, MMIO_READ, SYSMEM_READ, DMA_READ and
    /// PING; everything that writes, allocates or resets is refused.
    pub read_only: bool,
}

impl Default for ServeOptions {
    fn default() -> ServeOptions {
        ServeOptions {
            max_payload: 1 << 30,
            max_sysmem_alloc: 1 << 30,
            max_sysmem_per_connection: 4 << 30,
            max_sysmem_total: default_max_sysmem_total(),
            chunk_size: 1 << 20,
            max_connections: 16,
            // Half the slots: a second host always has room beside a greedy first one.
            max_connections_per_address: 8,
            // A request's bytes follow its first one at once from any client we know: ten
            // seconds is generous for a congested link and short for a half-sent header.
            read_timeout: Duration::from_secs(10),
            // Long enough for a client thinking between phases (compiling, say); only applied
            // while others are turned away.
            idle_timeout: Duration::from_secs(30),
            // Far longer than any pause of a working driver (one waiting on a long GPU job
            // polls its fences, and each poll is a request); a peer gone for good is usually
            // noticed sooner by TCP keepalive.
            owner_timeout: Duration::from_secs(300),
            allow: Vec::new(),
            read_only: false,
        }
    }
}

/// The default of [`ServeOptions::max_sysmem_total`]: a quarter of the host's memory
/// (`MemTotal` in `/proc/meminfo`), so clients together cannot push the host into swap or
/// the OOM killer while the rest of it keeps working; 4 GiB (one connection's default) where
/// that cannot be read.
pub fn default_max_sysmem_total() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .as_deref()
        .and_then(mem_total)
        .map_or(4 << 30, |total| total / 4)
}

/// `MemTotal` of a `/proc/meminfo` text, in bytes.
fn mem_total(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let mut words = line["MemTotal:".len()..].split_whitespace();
    let kib: u64 = words.next()?.parse().ok()?;
    (words.next() == Some("kB"))
        .then_some(kib)?
        .checked_mul(1024)
}

/// The connection that may write a device.
struct Owner {
    conn: Arc<Conn>,
    peer: SocketAddr,
    since: SystemTime,
}

impl Owner {
    /// `127.0.0.1:PORT since 10:31:02 UTC (12 s ago)`.
    fn describe(&self) -> String {
        let day = self
            .since
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() % 86_400);
        let ago = self.since.elapsed().map_or(0, |d| d.as_secs());
        format!(
            "{} since {:02}:{:02}:{:02} UTC ({ago} s ago)",
            self.peer,
            day / 3600,
            day / 60 % 60,
            day % 60
        )
    }
}

/// A connection as the server's other threads see it: for admission when the server is
/// full, for closing it to make room, and for the owner's lease.
struct Conn {
    /// Numbers the connections (an owner is a connection, not an address).
    id: u64,
    peer: SocketAddr,
    /// Whether it holds one of the `max_connections` places; a connection accepted while all
    /// were taken has none until its first request takes one.
    served: AtomicBool,
    /// When it last made progress, in milliseconds of the server's clock
    /// ([`Shared::now_ms`]): a request other than PING that came at pace (see
    /// [`PROGRESS_ALLOWANCE`]), or a MiB of its payload or answer at pace; at first, when it
    /// got its place. The one without progress for longest makes room for a newcomer.
    progress: AtomicU64,
    /// When anything last came from it (any request, a PING too, or a piece of one): an
    /// owner quiet for `owner_timeout` loses its device to another that wants to write.
    heard: AtomicU64,
    /// Set once another thread closed it; the reason is in `why`.
    evicted: AtomicBool,
    why: Mutex<Option<String>>,
    /// A second handle on its socket, to wake its thread when it is closed.
    socket: Option<TcpStream>,
}

impl Conn {
    /// Close this connection from another thread: its thread sees `why` when its blocked
    /// read is woken (or its blocked write polls) and hangs up with it as the reason.
    fn evict(&self, why: String) {
        let mut slot = lock(&self.why);
        if slot.is_none() {
            *slot = Some(why);
        }
        drop(slot);
        self.evicted.store(true, Ordering::SeqCst);
        if let Some(s) = &self.socket {
            let _ = s.shutdown(Shutdown::Read);
        }
    }

    fn is_evicted(&self) -> bool {
        self.evicted.load(Ordering::SeqCst)
    }

    /// Why another thread closed this connection, if one has.
    fn eviction(&self) -> Option<String> {
        if !self.is_evicted() {
            return None;
        }
        lock(&self.why).clone()
    }
}

/// What the server keeps per device for the clients sharing it.
#[derive(Default)]
struct DeviceState {
    /// The one connection that may write, once one has.
    owner: Mutex<Option<Owner>>,
    /// Held across an INDEXED transaction and around every other device access, so that no
    /// access of another connection lands between its steps.
    window: Mutex<()>,
    /// The SMU mailbox, found from discovery at the first SMU query.
    mailbox: Mutex<Option<Arc<SharedMailbox>>>,
}

struct Shared {
    devices: Vec<Arc<dyn PciDevice>>,
    /// One per device.
    states: Vec<DeviceState>,
    /// Numbers the connections (an owner is a connection, not an address).
    next_connection: AtomicU64,
    options: ServeOptions,
    /// Every connection with a thread: served, awaiting its first request, or closed by
    /// another thread and on its way out. Admission decides under this lock.
    conns: Mutex<Vec<Arc<Conn>>>,
    /// The start of [`Shared::now_ms`]'s clock.
    epoch: Instant,
    /// System memory all connections hold, in bytes (see [`ServeOptions::max_sysmem_total`]).
    sysmem_in_use: AtomicU64,
    /// Refused requests and dropped connections: logged in bursts, the rest counted.
    log_limit: RateLimit,
    /// Connections and disconnections: a client reconnecting in a loop must not flood the
    /// log either.
    connection_log_limit: RateLimit,
    /// Peers refused by the allow list, each logged once.
    refused_peers: Mutex<HashSet<IpAddr>>,
    /// Refused connections lingering so their error arrives (see [`refuse_connection`]).
    lingering: AtomicUsize,
    /// Every allocation made for any connection, by device index, for DMA_READ (another
    /// client reading a ring this one wrote); weak, so a closed connection frees its memory.
    allocations: std::sync::Mutex<Vec<(u32, std::sync::Weak<dyn SysMem>)>>,
}

impl Shared {
    /// Read `buf.len()` bytes at bus address `bus` of device `dev_id`: page by page from the
    /// allocations this server made, else from the device itself.
    fn dma_read(
        &self,
        dev_id: u32,
        device: &dyn PciDevice,
        bus: u64,
        buf: &mut [u8],
    ) -> Result<()> {
        let page = SYSMEM_PAGE_SIZE as u64;
        let live: Vec<Arc<dyn SysMem>> = {
            let mut all = lock(&self.allocations);
            all.retain(|(_, w)| w.strong_count() > 0);
            all.iter()
                .filter(|(d, _)| *d == dev_id)
                .filter_map(|(_, w)| w.upgrade())
                .collect()
        };
        let mut done = 0usize;
        while done < buf.len() {
            let at = bus + done as u64;
            let in_page = ((page - at % page) as usize).min(buf.len() - done);
            let chunk = &mut buf[done..done + in_page];
            let found = live.iter().find_map(|m| {
                let i = m.bus_addrs().iter().position(|&b| b == at - at % page)?;
                Some((m, i as u64 * page + at % page))
            });
            match found {
                Some((m, off)) => m.read_bytes(off, chunk)?,
                None => device.dma_read(at, chunk)?,
            }
            done += in_page;
        }
        Ok(())
    }
}

/// Keeps a connection in [`Shared::conns`] for as long as its thread runs, however it ends.
struct ConnectionSlot(Arc<Shared>, Arc<Conn>);

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        lock(&self.0.conns).retain(|c| c.id != self.1.id);
    }
}

/// What a connection gets when it is accepted.
enum Admission {
    /// One of the `max_connections` places.
    Served,
    /// None yet: all are taken, and its first request decides ([`Shared::admit`]).
    Pending,
    /// None: the reason.
    Refused(String),
}

/// Serve `devices` (index `N` is `devices[N]`) on every connection `listener` accepts, one
/// thread per connection. Returns only if the listener itself fails for good.
pub fn serve(
    listener: TcpListener,
    devices: Vec<Arc<dyn PciDevice>>,
    options: ServeOptions,
) -> Result<()> {
    let shared = Arc::new(Shared {
        states: devices.iter().map(|_| DeviceState::default()).collect(),
        next_connection: AtomicU64::new(0),
        devices,
        options: ServeOptions {
            chunk_size: options.chunk_size.max(1),
            ..options
        },
        conns: Mutex::new(Vec::new()),
        epoch: Instant::now(),
        sysmem_in_use: AtomicU64::new(0),
        log_limit: RateLimit::default_for_refusals(),
        connection_log_limit: RateLimit::default_for_refusals(),
        refused_peers: Mutex::new(HashSet::new()),
        lingering: AtomicUsize::new(0),
        allocations: std::sync::Mutex::new(Vec::new()),
    });
    loop {
        let (stream, peer) = match listener.accept() {
            Ok(c) => c,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                // Out of file descriptors and the like: refuse this one, keep serving.
                shared.warn(format_args!("remote PCI server: accept failed: {e}"));
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        let opts = &shared.options;
        if !opts.allow.is_empty() && !opts.allow.iter().any(|c| c.contains(peer.ip())) {
            let first = {
                let mut seen = lock(&shared.refused_peers);
                seen.len() < MAX_REMEMBERED_REFUSED_PEERS && seen.insert(peer.ip())
            };
            if first {
                tracing::warn!(
                    "remote PCI: {} refused: not in --allow (logged once per address)",
                    peer.ip()
                );
            }
            refuse_connection(
                &shared,
                stream,
                format!(
                    "this server does not serve {}: the address is outside its --allow list",
                    peer.ip()
                ),
            );
            continue;
        }
        // A peer that vanished without closing is otherwise never noticed by a connection
        // waiting for its next request.
        if let Err(e) = keep_alive(&stream) {
            shared.warn(format_args!("remote PCI: {peer}: no TCP keepalive: {e}"));
        }
        let now = shared.now_ms();
        let conn = Arc::new(Conn {
            id: shared.next_connection.fetch_add(1, Ordering::Relaxed),
            peer,
            served: AtomicBool::new(false),
            progress: AtomicU64::new(now),
            heard: AtomicU64::new(now),
            evicted: AtomicBool::new(false),
            why: Mutex::new(None),
            socket: stream.try_clone().ok(),
        });
        if let Admission::Refused(why) = shared.accept(&conn) {
            shared.warn(format_args!("remote PCI: {peer} refused: {why}"));
            refuse_connection(&shared, stream, why);
            continue;
        }
        let slot = ConnectionSlot(shared.clone(), conn);
        let spawned = std::thread::Builder::new()
            .name(format!("am-serve {peer}"))
            .spawn(move || {
                slot.0.info(format_args!("remote PCI: {peer} connected"));
                let why = Session::new(&slot.0, stream, slot.1.clone()).run();
                slot.0
                    .info(format_args!("remote PCI: {peer} disconnected: {why}"));
            });
        if let Err(e) = spawned {
            shared.warn(format_args!("remote PCI server: no thread for {peer}: {e}"));
        }
    }
}

/// Turn TCP keepalive on for an accepted connection (see [`KEEPALIVE_IDLE_SECS`]).
fn keep_alive(stream: &TcpStream) -> nix::Result<()> {
    use nix::sys::socket::{setsockopt, sockopt};
    setsockopt(stream, sockopt::KeepAlive, &true)?;
    setsockopt(stream, sockopt::TcpKeepIdle, &KEEPALIVE_IDLE_SECS)?;
    setsockopt(stream, sockopt::TcpKeepInterval, &KEEPALIVE_INTERVAL_SECS)?;
    setsockopt(stream, sockopt::TcpKeepCount, &KEEPALIVE_PROBES)
}

impl Shared {
    /// Milliseconds since the server started: the clock of [`Conn::progress`] and
    /// [`Conn::heard`], which other threads read.
    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Place a new connection: served while places are free; else awaiting its first
    /// request (as many as there are places), which may take an idle one's place; refused
    /// past the per-address limit or when those are full too.
    fn accept(&self, conn: &Arc<Conn>) -> Admission {
        let opts = &self.options;
        let mut conns = lock(&self.conns);
        let live = || conns.iter().filter(|c| !c.is_evicted());
        let same_address = live().filter(|c| c.peer.ip() == conn.peer.ip()).count();
        if same_address >= opts.max_connections_per_address {
            return Admission::Refused(format!(
                "this server already serves {same_address} connections from {}, its limit \
                 per address (am serve --max-connections-per-address): try again when one \
                 of them has closed",
                conn.peer.ip()
            ));
        }
        let served = live().filter(|c| c.served.load(Ordering::SeqCst)).count();
        let admission = if served < opts.max_connections {
            conn.served.store(true, Ordering::SeqCst);
            Admission::Served
        } else if live().count() - served < opts.max_connections {
            Admission::Pending
        } else {
            return Admission::Refused(self.full(&conns));
        };
        conns.push(conn.clone());
        admission
    }

    /// Give `conn`, awaiting its first request, a place for that request: a free one, else
    /// the place of the served connection without progress for longest, if that is
    /// `idle_timeout` or more (it is closed with the reason). Else the refusal to answer.
    fn admit(&self, conn: &Conn) -> std::result::Result<(), String> {
        let opts = &self.options;
        let conns = lock(&self.conns);
        let now = self.now_ms();
        let served = || {
            conns
                .iter()
                .filter(|c| !c.is_evicted() && c.served.load(Ordering::SeqCst))
        };
        if served().count() >= opts.max_connections {
            let idle_ms = u64::try_from(opts.idle_timeout.as_millis()).unwrap_or(u64::MAX);
            let stalest = served().min_by_key(|c| c.progress.load(Ordering::SeqCst));
            match stalest {
                Some(v) if now.saturating_sub(v.progress.load(Ordering::SeqCst)) >= idle_ms => {
                    let quiet = Duration::from_millis(now - v.progress.load(Ordering::SeqCst));
                    v.evict(format!(
                        "closed to make room for {}: no progress for {quiet:?} while the \
                         server was full ({} connections, its limit); progress is a request \
                         other than PING, sent at pace",
                        conn.peer, opts.max_connections
                    ));
                }
                _ => return Err(self.full(&conns)),
            }
        }
        conn.progress.store(now, Ordering::SeqCst);
        conn.served.store(true, Ordering::SeqCst);
        Ok(())
    }

    /// Why a newcomer finds no place: the limit, and when the served connection without
    /// progress for longest will have been idle long enough to give its place up.
    fn full(&self, conns: &[Arc<Conn>]) -> String {
        let opts = &self.options;
        let now = self.now_ms();
        let stalest = conns
            .iter()
            .filter(|c| !c.is_evicted() && c.served.load(Ordering::SeqCst))
            .map(|c| c.progress.load(Ordering::SeqCst))
            .min()
            .unwrap_or(now);
        let idle = Duration::from_millis(now.saturating_sub(stalest));
        let wait = opts.idle_timeout.saturating_sub(idle);
        format!(
            "this server already serves {} connections, its limit (am serve \
             --max-connections); one without progress for {:?} gives its place to a newcomer \
             whose first request is not a PING: {}",
            opts.max_connections,
            opts.idle_timeout,
            retry_text(wait)
        )
    }

    /// Take `bytes` of the server-wide system-memory budget, or say how much is held.
    fn reserve_sysmem(&self, bytes: u64) -> std::result::Result<(), u64> {
        let cap = self.options.max_sysmem_total;
        self.sysmem_in_use
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
                held.checked_add(bytes).filter(|&t| t <= cap)
            })
            .map(|_| ())
    }

    /// The window lock of device `dev_id` (see [`DeviceState::window`]); `None` past the
    /// devices.
    fn window(&self, dev_id: u32) -> Option<std::sync::MutexGuard<'_, ()>> {
        self.states.get(dev_id as usize).map(|s| lock(&s.window))
    }

    /// Give back what [`Shared::reserve_sysmem`] took.
    fn release_sysmem(&self, bytes: u64) {
        self.sysmem_in_use.fetch_sub(bytes, Ordering::AcqRel);
    }

    /// Note an allocation for DMA_READ, forgetting those that closed connections freed: a
    /// client allocating in a loop for hours must not grow the list.
    fn remember(&self, dev_id: u32, mem: &Arc<dyn SysMem>) {
        let mut all = lock(&self.allocations);
        all.retain(|(_, w)| w.strong_count() > 0);
        all.push((dev_id, Arc::downgrade(mem)));
    }

    /// A warning a client can trigger at will: rate-limited, with the count of suppressed ones.
    fn warn(&self, line: std::fmt::Arguments<'_>) {
        let verdict = self.log_limit.check();
        if verdict != Verdict::Suppress {
            tracing::warn!("{line}{}", verdict.suffix());
        }
    }

    /// A connection's coming and going, rate-limited like [`Shared::warn`].
    fn info(&self, line: std::fmt::Arguments<'_>) {
        if !tracing::enabled!(tracing::Level::INFO) {
            return;
        }
        let verdict = self.connection_log_limit.check();
        if verdict != Verdict::Suppress {
            tracing::info!("{line}{}", verdict.suffix());
        }
    }
}

/// Tell a connection we will not serve why, as an error response (the answer its first
/// request reads), then close it. The client's first request is read and dropped on a
/// short-lived thread first: closing a socket with unread data sends a reset, which can
/// overtake the error. Past [`MAX_LINGERING_REFUSALS`] at once the error is sent and the
/// socket closed at once, so a flood of connections costs no threads.
fn refuse_connection(shared: &Arc<Shared>, mut stream: TcpStream, message: String) {
    let _ = stream.set_nonblocking(true);
    let _ = stream.write_all(&encode_error(&message));
    let _ = stream.shutdown(Shutdown::Write);
    if shared.lingering.fetch_add(1, Ordering::SeqCst) >= MAX_LINGERING_REFUSALS {
        shared.lingering.fetch_sub(1, Ordering::SeqCst);
        return;
    }
    let counter = shared.clone();
    let spawned = std::thread::Builder::new()
        .name("am-serve refusal".to_string())
        .spawn(move || {
            let deadline = Instant::now() + REFUSAL_LINGER;
            let mut sink = [0u8; 4096];
            let _ = stream.set_nonblocking(false);
            while let Some(left) = deadline.checked_duration_since(Instant::now()) {
                if left.is_zero() || stream.set_read_timeout(Some(left)).is_err() {
                    break;
                }
                match stream.read(&mut sink) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
            }
            counter.lingering.fetch_sub(1, Ordering::SeqCst);
        });
    if spawned.is_err() {
        // The closure, and its decrement, went with the failed spawn.
        shared.lingering.fetch_sub(1, Ordering::SeqCst);
    }
}

/// How a request failed, which decides what happens to the connection.
enum Fault {
    /// Answer with an error; the stream is still in step.
    Refuse(String),
    /// Answer with an error if the command has a response, then close: the stream may hold
    /// bytes we did not consume (a payload we would not read, an unknown command's payload).
    Close(String),
    /// The socket failed; nothing more can be said to this client.
    Io(io::Error),
}

impl From<io::Error> for Fault {
    fn from(e: io::Error) -> Fault {
        Fault::Io(e)
    }
}

impl From<Error> for Fault {
    fn from(e: Error) -> Fault {
        Fault::Refuse(e.to_string())
    }
}

type Handled<T = ()> = std::result::Result<T, Fault>;

/// The system memory allocated through one connection.
struct Allocation {
    dev_id: u32,
    mem: Arc<dyn SysMem>,
}

struct Session<'a> {
    shared: &'a Shared,
    stream: TcpStream,
    peer: SocketAddr,
    /// This connection as the other threads see it.
    conn: Arc<Conn>,
    /// This connection's number, as an [`Owner`] names it.
    id: u64,
    /// The socket's read timeout as last set (setting it costs a system call).
    timeout: Option<Duration>,
    /// The socket's write timeout as last set.
    write_timeout: Option<Duration>,
    bars: Vec<[Option<Arc<dyn Bar>>; NUM_BARS as usize]>,
    sysmem: Vec<Allocation>,
    sysmem_total: u64,
    chunk: Vec<u8>,
}

/// A connection's system memory goes back to the server-wide budget when it ends, however
/// it ends (the allocations themselves are freed with `sysmem`).
impl Drop for Session<'_> {
    fn drop(&mut self) {
        self.shared.release_sysmem(self.sysmem_total);
        for (index, state) in self.shared.states.iter().enumerate() {
            let mut owner = lock(&state.owner);
            if owner.as_ref().is_some_and(|o| o.conn.id == self.id) {
                *owner = None;
                drop(owner);
                let name = self.shared.devices.get(index).map_or("?", |d| d.name());
                self.shared.info(format_args!(
                    "remote PCI: {} no longer owns {name} (device {index})",
                    self.peer
                ));
            }
        }
    }
}

impl<'a> Session<'a> {
    fn new(shared: &'a Shared, stream: TcpStream, conn: Arc<Conn>) -> Session<'a> {
        Session {
            shared,
            stream,
            peer: conn.peer,
            id: conn.id,
            conn,
            timeout: None,
            write_timeout: Some(shared.options.read_timeout),
            bars: shared.devices.iter().map(|_| Default::default()).collect(),
            sysmem: Vec::new(),
            sysmem_total: 0,
            chunk: Vec::new(),
        }
    }

    /// Serve requests until the client leaves or must be cut off; returns why it ended.
    fn run(mut self) -> String {
        let opts = &self.shared.options;
        let setup = self
            .stream
            .set_nodelay(true)
            .and_then(|()| self.stream.set_write_timeout(Some(opts.read_timeout)));
        if let Err(e) = setup {
            return format!("cannot configure the socket: {e}");
        }
        loop {
            let mut hb = [0u8; REQUEST_HEADER_LEN];
            match self.wait_for_request(&mut hb[..1]) {
                Ok(()) => {}
                Err(_) if self.conn.is_evicted() => return self.hang_up_evicted(),
                Err(Wait::Closed) => return "connection closed".to_string(),
                Err(Wait::Idle(idle)) => {
                    let why = format!(
                        "closed: no request within {idle:?} of connecting while the server \
                         was full; {}",
                        self.shared.full(&lock(&self.shared.conns))
                    );
                    return self.hang_up(&why);
                }
                Err(Wait::Io(e)) => return format!("waiting for a request: {e}"),
            }
            let first_byte = Instant::now();
            self.heard();
            let deadline = first_byte + self.shared.options.read_timeout;
            if let Err(e) = self.read_by(&mut hb[1..], deadline) {
                return if self.conn.is_evicted() {
                    self.hang_up_evicted()
                } else if is_timeout(&e) {
                    let why = format!(
                        "closed: a request header took more than {:?}",
                        self.shared.options.read_timeout
                    );
                    self.hang_up(&why)
                } else {
                    format!("reading a request header: {e}")
                };
            }
            let req = RequestHeader::decode(&hb);
            tracing::trace!("remote PCI: dev {} {req}", req.dev_id);
            self.heard();
            let has_response = req.command().is_none_or(Command::has_response);
            // A PING, or a header dribbled in, is no progress: a client doing only that is
            // idle, and gives its place up to a newcomer when the server is full.
            let progress = req.command().is_some_and(|c| c != Command::Ping)
                && first_byte.elapsed() <= PROGRESS_ALLOWANCE;
            let outcome = self.admit(&req, progress).and_then(|()| {
                if progress {
                    self.progress();
                }
                self.handle(&req)
            });
            if outcome.is_err() && self.conn.is_evicted() {
                return self.hang_up_evicted();
            }
            let result = match outcome {
                Ok(()) => continue,
                Err(Fault::Io(e)) if is_timeout(&e) => {
                    let why = format!(
                        "{req}: closed: the payload stalled or the answer was not taken for {:?}",
                        self.shared.options.read_timeout
                    );
                    return self.hang_up(&why);
                }
                Err(Fault::Io(e)) => return format!("{req}: {e}"),
                Err(Fault::Refuse(msg)) if has_response => {
                    self.shared.warn(format_args!(
                        "remote PCI: {}: refused {req}: {msg}",
                        self.peer
                    ));
                    let msg = encode_error(&msg);
                    let deadline = self.payload_deadline(msg.len());
                    self.write_by(&msg, deadline)
                }
                Err(Fault::Refuse(msg) | Fault::Close(msg)) => {
                    // The client may be waiting: tell it why before hanging up. After a
                    // write, which has no answer, its next request reads this instead.
                    let told = if has_response {
                        msg.clone()
                    } else {
                        format!("{req} failed, so this connection is closed: {msg}")
                    };
                    let told = encode_error(&told);
                    let deadline = self.payload_deadline(told.len());
                    let _ = self.write_by(&told, deadline);
                    self.linger_close();
                    let why = format!("closed after {req}: {msg}");
                    self.shared
                        .warn(format_args!("remote PCI: {}: {why}", self.peer));
                    return why;
                }
            };
            if let Err(e) = result {
                if self.conn.is_evicted() {
                    return self.hang_up_evicted();
                }
                return format!("answering {req}: {e}");
            }
        }
    }

    /// A connection accepted while the server was full gets a place with its first
    /// request, if that is progress and an idle connection can give its place up
    /// ([`Shared::admit`]); else it is told the limit and closed.
    fn admit(&self, req: &RequestHeader, progress: bool) -> Handled {
        if self.conn.served.load(Ordering::SeqCst) {
            return Ok(());
        }
        if !progress {
            let shared = self.shared;
            let full = shared.full(&lock(&shared.conns));
            return Err(Fault::Close(format!(
                "{full} (a PING, or a request header sent slower than in {PROGRESS_ALLOWANCE:?}, \
                 takes no place)"
            )));
        }
        self.shared.admit(&self.conn).map_err(Fault::Close)?;
        self.shared.info(format_args!(
            "remote PCI: {} served after the server was full ({req})",
            self.peer
        ));
        Ok(())
    }

    /// Note that something came from the client (the owner's lease).
    fn heard(&self) {
        self.conn
            .heard
            .store(self.shared.now_ms(), Ordering::SeqCst);
    }

    /// Note progress (see [`Conn::progress`]).
    fn progress(&self) {
        let now = self.shared.now_ms();
        self.conn.progress.store(now, Ordering::SeqCst);
        self.conn.heard.store(now, Ordering::SeqCst);
    }

    /// Note a piece of `len` bytes of a payload or answer that took `took`: progress when it
    /// came at pace (see [`PROGRESS_ALLOWANCE`]), and heard from the client in any case.
    fn piece(&self, len: usize, took: Duration) {
        let pace =
            PROGRESS_ALLOWANCE + Duration::from_secs_f64(len as f64 / MIN_PAYLOAD_RATE as f64);
        if took <= pace {
            self.progress();
        } else {
            self.heard();
        }
    }

    /// Close a connection another thread closed (to make room, or to hand its device to
    /// another client), telling the client why.
    fn hang_up_evicted(&mut self) -> String {
        let why = self
            .conn
            .eviction()
            .unwrap_or_else(|| "closed by the server".to_string());
        self.hang_up(&why)
    }

    /// Close the connection, leaving `why` as an error response: a client that sends another
    /// request reads it as that request's answer, which says more than a closed socket.
    fn hang_up(&mut self, why: &str) -> String {
        let _ = self.stream.set_nonblocking(true);
        let _ = self.stream.write_all(&encode_error(why));
        let _ = self.stream.set_nonblocking(false);
        self.linger_close();
        self.shared
            .warn(format_args!("remote PCI: {}: {why}", self.peer));
        why.to_string()
    }

    /// Close our side, then read and drop what the client still sends for a moment before
    /// the socket goes: closing with unread data sends a reset, which can destroy the error
    /// response we just wrote before the client reads it (a client pipelines writes).
    fn linger_close(&mut self) {
        let _ = self.stream.shutdown(Shutdown::Write);
        let deadline = Instant::now() + REFUSAL_LINGER;
        let mut sink = [0u8; 4096];
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            if left.is_zero() || self.stream.set_read_timeout(Some(left)).is_err() {
                break;
            }
            match self.stream.read(&mut sink) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
    }

    /// Set the socket's read timeout; `None` waits for ever.
    fn set_timeout(&mut self, t: Option<Duration>) -> io::Result<()> {
        // A zero timeout means "none" to the socket; keep at least a millisecond.
        let t = t.map(|t| t.max(Duration::from_millis(1)));
        if self.timeout != t {
            self.stream.set_read_timeout(t)?;
            self.timeout = t;
        }
        Ok(())
    }

    /// The first byte of the next request. A served client may wait as long as it likes (a
    /// newcomer takes its place once it has been idle long enough and the server is full; a
    /// peer that vanished is found by TCP keepalive); one awaiting a place has the read
    /// timeout to begin its first request.
    fn wait_for_request(&mut self, first: &mut [u8]) -> std::result::Result<(), Wait> {
        let limit =
            (!self.conn.served.load(Ordering::SeqCst)).then_some(self.shared.options.read_timeout);
        let start = Instant::now();
        loop {
            let left = match limit {
                None => None,
                Some(limit) => match limit.checked_sub(start.elapsed()) {
                    Some(left) if !left.is_zero() => Some(left),
                    _ => return Err(Wait::Idle(start.elapsed())),
                },
            };
            self.set_timeout(left).map_err(Wait::Io)?;
            match self.stream.read(first) {
                Ok(0) => return Err(Wait::Closed),
                Ok(_) => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // The socket's own timeout; a keepalive that went unanswered is TimedOut.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == io::ErrorKind::ConnectionReset => return Err(Wait::Closed),
                Err(e) => return Err(Wait::Io(e)),
            }
        }
    }

    /// Fill `buf` before `deadline`, waiting at most the read timeout for each piece.
    fn read_by(&mut self, buf: &mut [u8], deadline: Instant) -> io::Result<()> {
        let gap = self.shared.options.read_timeout;
        let mut done = 0;
        while done < buf.len() {
            let left = deadline
                .checked_duration_since(Instant::now())
                .filter(|d| !d.is_zero())
                .ok_or_else(|| io::Error::from(io::ErrorKind::TimedOut))?;
            self.set_timeout(Some(left.min(gap)))?;
            match self.stream.read(&mut buf[done..]) {
                Ok(0) => return Err(io::Error::from(io::ErrorKind::UnexpectedEof)),
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Write all of `data` before `deadline`, stalling no longer than the read timeout. The
    /// socket's timeout bounds one `write` call only, and a call that sent a little starts
    /// the next one's afresh: an answer the client takes a few bytes at a time (or, once
    /// buffers fill, not at all) would otherwise hold the connection for several timeouts.
    /// Each call waits at most [`EVICTION_POLL`], so a connection closed by another thread
    /// stops writing soon.
    fn write_by(&mut self, data: &[u8], deadline: Instant) -> io::Result<()> {
        let gap = self.shared.options.read_timeout;
        let mut done = 0;
        let mut last = Instant::now();
        while done < data.len() {
            if self.conn.is_evicted() {
                return Err(io::Error::from(io::ErrorKind::ConnectionAborted));
            }
            let left = deadline
                .min(last + gap)
                .checked_duration_since(Instant::now())
                .filter(|d| !d.is_zero())
                .ok_or_else(|| io::Error::from(io::ErrorKind::TimedOut))?;
            // A zero timeout means "none" to the socket; keep at least a millisecond.
            let t = Some(left.min(EVICTION_POLL).max(Duration::from_millis(1)));
            if self.write_timeout != t {
                self.stream.set_write_timeout(t)?;
                self.write_timeout = t;
            }
            match self.stream.write(&data[done..]) {
                Ok(0) => return Err(io::Error::from(io::ErrorKind::WriteZero)),
                Ok(n) => {
                    done += n;
                    last = Instant::now();
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::Interrupted | io::ErrorKind::WouldBlock
                    ) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// When a payload of `size` bytes must be in, or an answer of `size` bytes taken: the
    /// read timeout plus [`MIN_PAYLOAD_RATE`].
    fn payload_deadline(&self, size: usize) -> Instant {
        let secs = size as u64 / MIN_PAYLOAD_RATE;
        Instant::now() + self.shared.options.read_timeout + Duration::from_secs(secs)
    }

    /// Refuse what writes, allocates or resets on a `--read-only` server. The one write let
    /// through is a dword to BAR5's `MM_INDEX` or `MM_INDEX_HI`: those only aim the
    /// `MM_DATA` window, through which a small-BAR device's VRAM (its discovery table) is
    /// read; `MM_DATA` itself stays refused.
    fn check_read_only(&self, req: &RequestHeader, cmd: Command) -> Handled {
        let window_index = cmd == Command::MmioWrite
            && req.bar == 5
            && req.arg1 == 4
            && [MM_INDEX, MM_INDEX_HI].contains(&(req.arg0 / 4))
            && req.arg0.is_multiple_of(4);
        let reads = matches!(
            cmd,
            Command::Ping
                | Command::Probe
                | Command::MapBar
                | Command::CfgRead
                | Command::MmioRead
                | Command::SysmemRead
                | Command::DmaRead
                // These two check for themselves: an INDEXED payload must be read before
                // it can be refused, and only its write steps are; OWNER only claims.
                | Command::Indexed
                | Command::Owner
        );
        if self.shared.options.read_only && !reads && !window_index {
            let msg = format!(
                "{} is refused: this server is read-only (am serve --read-only serves config, \
                 BAR and system-memory reads)",
                cmd.name()
            );
            // A write's payload is still in the stream: the connection cannot go on.
            return Err(if cmd.has_response() {
                Fault::Refuse(msg)
            } else {
                Fault::Close(msg)
            });
        }
        Ok(())
    }

    fn handle(&mut self, req: &RequestHeader) -> Handled {
        let Some(cmd) = req.command() else {
            return Err(Fault::Close(format!("unknown command {}", req.cmd)));
        };
        self.check_read_only(req, cmd)?;
        // Each writing command claims the device once its request is checked, just before
        // it touches the device (see `claim`): a request refused for what it asks makes no
        // owner. SYSMEM_WRITE needs no claim: only the owner holds system memory.
        match cmd {
            Command::Ping => self.reply(ResponseHeader::ok(0, 0), &[]),
            Command::Probe => self.probe(req),
            Command::MapSysmemFd => Err(Fault::Refuse(
                "MAP_SYSMEM_FD passes a file descriptor over a Unix socket; over TCP use MAP_SYSMEM"
                    .to_string(),
            )),
            Command::MapBar => {
                // Only the BAR's place and size: the mapping waits for the first access.
                // A client asks MAP_BAR for `bar_info`, which may come before RESIZE_BAR,
                // and a mapped BAR can no longer be resized.
                let device = self.device(req)?;
                if req.bar >= NUM_BARS {
                    return Err(Fault::Refuse(format!(
                        "{}: there is no BAR{}",
                        device.name(),
                        req.bar
                    )));
                }
                let info = device.bar_info(bar_index(req.bar))?;
                self.reply(ResponseHeader::ok(info.bus_addr, info.size), &[])
            }
            Command::CfgRead => {
                let (offset, size) = config_range(req)?;
                let value = self.device(req)?.config_read(offset, size)?;
                self.reply(ResponseHeader::ok(u64::from(value), 0), &[])
            }
            Command::CfgWrite => {
                let (offset, size) = config_range(req)?;
                let max = u64::MAX >> (64 - 8 * u32::from(size));
                if req.arg2 > max {
                    return Err(Fault::Refuse(format!(
                        "value {:#x} does not fit {size} bytes",
                        req.arg2
                    )));
                }
                let device = self.device(req)?;
                self.claim(req, "CFG_WRITE")?;
                device.config_write(offset, size, req.arg2 as u32)?;
                self.reply(ResponseHeader::ok(0, 0), &[])
            }
            Command::Reset => {
                let device = self.device(req)?;
                self.claim(req, "RESET")?;
                {
                    let _window = self.window(req);
                    device.reset()?;
                }
                self.reply(ResponseHeader::ok(0, 0), &[])
            }
            Command::ResizeBar => {
                let device = self.device(req)?;
                if req.bar >= NUM_BARS {
                    return Err(Fault::Refuse(format!("there is no BAR{}", req.bar)));
                }
                self.claim(req, "RESIZE_BAR")?;
                device.resize_bar(bar_index(req.bar))?;
                // A resized BAR is a new mapping.
                self.bars[req.dev_id as usize][req.bar as usize] = None;
                self.reply(ResponseHeader::ok(0, 0), &[])
            }
            Command::MmioRead => {
                let bar = self.bar(req)?;
                let size = self.payload_range(req, bar.len(), &format!("BAR{}", req.bar))?;
                let shared = self.shared;
                self.stream_out(size, |off, buf| {
                    let _window = shared.window(req.dev_id);
                    if buf.len() == size {
                        bar_read(bar.as_ref(), req.arg0 + off, buf)
                    } else {
                        bar.read_bytes(req.arg0 + off, buf)
                    }
                })
            }
            Command::MmioWrite => {
                let bar = self.bar(req).map_err(close)?;
                let size = self
                    .payload_range(req, bar.len(), &format!("BAR{}", req.bar))
                    .map_err(close)?;
                // Its payload is still in the stream: a refused write ends the connection.
                self.claim(req, "MMIO_WRITE").map_err(close)?;
                let shared = self.shared;
                self.stream_in(size, |off, data| {
                    let _window = shared.window(req.dev_id);
                    if data.len() == size {
                        bar_write(bar.as_ref(), req.arg0 + off, data)
                    } else {
                        bar.write_bytes(req.arg0 + off, data)
                    }
                })
            }
            Command::MapSysmem => self.map_sysmem(req),
            Command::Indexed => self.indexed(req),
            Command::Smu => self.smu(req),
            Command::Owner => {
                let device = self.device(req)?;
                match req.arg0 {
                    0 => {}
                    OWNER_CLAIM if self.shared.options.read_only => {
                        return Err(Fault::Refuse(format!(
                            "{} (device {}) cannot be owned: this server is read-only \
                             (am serve --read-only serves config, BAR and system-memory reads)",
                            device.name(),
                            req.dev_id
                        )));
                    }
                    OWNER_CLAIM => self.claim(req, "OWNER claim")?,
                    other => {
                        return Err(Fault::Refuse(format!(
                            "OWNER {other}: 0 asks who owns the device, 1 claims it"
                        )));
                    }
                }
                // A relayed device is owned where it is served: a client of the server
                // behind holding it means writers here are refused there, whoever owns it
                // here. Its own answer names that owner (a local device has no such answer).
                let upstream = device.ownership().map_err(|e| {
                    Fault::Refuse(format!("who owns {} upstream is unknown: {e}", device.name()))
                })?;
                let (state, text) = match (upstream, &*lock(&self.shared.states[req.dev_id as usize].owner)) {
                    (Some(Ownership::Other(who)), _) => (
                        OwnerState::Other,
                        format!("{who}, a client of the server behind {}", device.name()),
                    ),
                    (_, None) => (OwnerState::Nobody, String::new()),
                    (_, Some(o)) if o.conn.id == self.id => (OwnerState::This, o.describe()),
                    (_, Some(o)) => (OwnerState::Other, o.describe()),
                };
                self.reply(
                    ResponseHeader::ok(text.len() as u64, state as u64),
                    text.as_bytes(),
                )
            }
            Command::DmaRead => {
                let device = self.device(req)?;
                let size = usize::try_from(req.arg1)
                    .ok()
                    .filter(|&n| n as u64 <= self.shared.options.max_payload)
                    .ok_or_else(|| {
                        Fault::Refuse(format!(
                            "DMA_READ of {:#x} bytes exceeds this server's {:#x}-byte limit",
                            req.arg1, self.shared.options.max_payload
                        ))
                    })?;
                req.arg0.checked_add(req.arg1).ok_or_else(|| {
                    Fault::Refuse(format!("DMA_READ at {:#x} wraps the address space", req.arg0))
                })?;
                // Streamed like the other reads: the size is the client's, and must not
                // size an allocation.
                let shared = self.shared;
                self.stream_out(size, |off, buf| {
                    shared.dma_read(req.dev_id, device.as_ref(), req.arg0 + off, buf)
                })
            }
            Command::SysmemRead => {
                let mem = self.allocation(req)?;
                let what = format!("system memory handle {}", req.bar);
                let size = self.payload_range(req, mem.len() as u64, &what)?;
                self.stream_out(size, |off, buf| mem.read_bytes(req.arg0 + off, buf))
            }
            Command::SysmemWrite => {
                let mem = self.allocation(req).map_err(close)?;
                let what = format!("system memory handle {}", req.bar);
                let size = self
                    .payload_range(req, mem.len() as u64, &what)
                    .map_err(close)?;
                self.stream_in(size, |off, data| mem.write_bytes(req.arg0 + off, data))
            }
        }
    }

    fn reply(&mut self, header: ResponseHeader, data: &[u8]) -> Handled {
        let deadline = self.payload_deadline(RESPONSE_HEADER_LEN + data.len());
        if data.is_empty() {
            self.write_by(&header.encode(), deadline)?;
        } else {
            let mut msg = Vec::with_capacity(RESPONSE_HEADER_LEN + data.len());
            msg.extend_from_slice(&header.encode());
            msg.extend_from_slice(data);
            self.write_by(&msg, deadline)?;
        }
        Ok(())
    }

    fn device(&self, req: &RequestHeader) -> Handled<Arc<dyn PciDevice>> {
        self.shared
            .devices
            .get(req.dev_id as usize)
            .cloned()
            .ok_or_else(|| {
                Fault::Refuse(format!(
                    "there is no device {} (this server exports {})",
                    req.dev_id,
                    self.shared.devices.len()
                ))
            })
    }

    /// The device and BAR a request names, mapped once per connection.
    fn bar(&mut self, req: &RequestHeader) -> Handled<Arc<dyn Bar>> {
        let device = self.device(req)?;
        if req.bar >= NUM_BARS {
            return Err(Fault::Refuse(format!(
                "{}: there is no BAR{}",
                device.name(),
                req.bar
            )));
        }
        let slot = &mut self.bars[req.dev_id as usize][req.bar as usize];
        if let Some(bar) = slot {
            return Ok(bar.clone());
        }
        let bar = device.bar(bar_index(req.bar))?;
        *slot = Some(bar.clone());
        Ok(bar)
    }

    fn allocation(&self, req: &RequestHeader) -> Handled<Arc<dyn SysMem>> {
        self.device(req)?;
        let a = self.sysmem.get(req.bar as usize).ok_or_else(|| {
            Fault::Refuse(format!(
                "there is no system memory handle {} ({} allocated on this connection)",
                req.bar,
                self.sysmem.len()
            ))
        })?;
        if a.dev_id != req.dev_id {
            return Err(Fault::Refuse(format!(
                "system memory handle {} belongs to device {}, not {}",
                req.bar, a.dev_id, req.dev_id
            )));
        }
        Ok(a.mem.clone())
    }

    /// Check `arg0..arg0+arg1` against a region of `len` bytes and the payload cap.
    fn payload_range(&self, req: &RequestHeader, len: u64, what: &str) -> Handled<usize> {
        let (offset, size) = (req.arg0, req.arg1);
        if size > self.shared.options.max_payload {
            return Err(Fault::Refuse(format!(
                "{size:#x} bytes exceeds this server's {:#x}-byte limit per request",
                self.shared.options.max_payload
            )));
        }
        match offset.checked_add(size) {
            Some(end) if end <= len => usize::try_from(size)
                .map_err(|_| Fault::Refuse(format!("{size:#x} bytes do not fit in memory"))),
            _ => Err(Fault::Refuse(format!(
                "{what}: {size:#x} bytes at offset {offset:#x} are outside its {len:#x} bytes"
            ))),
        }
    }

    /// Answer `size` bytes produced by `read(offset_within_request, buf)`, chunk by chunk.
    /// A failure before the header went out is an error response; after, only a close.
    fn stream_out(
        &mut self,
        size: usize,
        mut read: impl FnMut(u64, &mut [u8]) -> Result<()>,
    ) -> Handled {
        let chunk = size.min(self.shared.options.chunk_size);
        let deadline = self.payload_deadline(RESPONSE_HEADER_LEN + size);
        let mut buf = std::mem::take(&mut self.chunk);
        buf.resize(RESPONSE_HEADER_LEN + chunk, 0);
        let result = (|| {
            read(0, &mut buf[RESPONSE_HEADER_LEN..])?;
            buf[..RESPONSE_HEADER_LEN]
                .copy_from_slice(&ResponseHeader::ok(size as u64, 0).encode());
            let began = Instant::now();
            self.write_by(&buf, deadline)?;
            self.piece(buf.len(), began.elapsed());
            let mut done = chunk;
            while done < size {
                let n = (size - done).min(chunk);
                let part = &mut buf[..n];
                read(done as u64, part).map_err(|e| Fault::Close(e.to_string()))?;
                let began = Instant::now();
                self.write_by(part, deadline)?;
                self.piece(n, began.elapsed());
                done += n;
            }
            Ok(())
        })();
        self.chunk = buf;
        result
    }

    /// Take a write's `size`-byte payload from the socket chunk by chunk and hand each to
    /// `write`. Any failure closes the connection: writes have no response to carry it.
    fn stream_in(
        &mut self,
        size: usize,
        mut write: impl FnMut(u64, &[u8]) -> Result<()>,
    ) -> Handled {
        let chunk = size.min(self.shared.options.chunk_size);
        let mut buf = std::mem::take(&mut self.chunk);
        buf.resize(chunk, 0);
        let deadline = self.payload_deadline(size);
        let result = (|| {
            let mut done = 0;
            while done < size {
                let n = (size - done).min(chunk);
                let began = Instant::now();
                self.read_by(&mut buf[..n], deadline)?;
                self.piece(n, began.elapsed());
                write(done as u64, &buf[..n]).map_err(|e| Fault::Close(e.to_string()))?;
                done += n;
            }
            Ok(())
        })();
        self.chunk = buf;
        result
    }

    fn probe(&mut self, req: &RequestHeader) -> Handled {
        if req.arg1 > MAX_PROBE_PAYLOAD {
            return Err(Fault::Close(format!(
                "a {}-byte PROBE filter is larger than the {MAX_PROBE_PAYLOAD} bytes accepted",
                req.arg1
            )));
        }
        let mut payload = vec![0u8; req.arg1 as usize];
        let deadline = self.payload_deadline(payload.len());
        self.read_by(&mut payload, deadline)?;
        let Some(filter) = decode_probe_filter(&payload) else {
            return Err(Fault::Refuse(format!(
                "a PROBE filter is (mask, id) pairs of u32, not {} bytes",
                payload.len()
            )));
        };
        let mut found = Vec::new();
        for (index, device) in self.shared.devices.iter().enumerate() {
            match probe_matches(device.as_ref(), req.arg2, req.arg0, &filter) {
                Ok(true) => found.push(ProbeEntry {
                    name: device.name().to_string(),
                    index: index as u32,
                }),
                Ok(false) => {}
                Err(e) => self
                    .shared
                    .warn(format_args!("remote PCI: PROBE skips a device: {e}")),
            }
        }
        if found.is_empty() {
            let have: Vec<String> = self
                .shared
                .devices
                .iter()
                .map(|d| d.name().to_string())
                .collect();
            return Err(Fault::Refuse(format!(
                "no device matches vendor {:#x}, class {:#x} and device ids {:x?}; this server exports [{}]",
                req.arg2,
                req.arg0,
                filter,
                have.join(", ")
            )));
        }
        let names = encode_probe_names(&found);
        // Only our client asks (tinygrad's sends 0 in `bar`): the count becomes the list.
        // A read-only server has no owners: nothing may write.
        let val1 = if req.bar == EXTENSIONS_PROBE {
            // Nor SMU queries: they write the mailbox.
            let owners = if self.shared.options.read_only {
                0
            } else {
                EXT_OWNER | EXT_SMU
            };
            encode_extensions(EXT_INDEXED | owners)
        } else {
            found.len() as u64
        };
        self.reply(
            ResponseHeader::ok(names.len() as u64, val1),
            names.as_bytes(),
        )
    }

    /// The device's window lock (see [`DeviceState::window`]), for a request already checked
    /// to name a device.
    fn window(&self, req: &RequestHeader) -> Option<std::sync::MutexGuard<'a, ()>> {
        self.shared.window(req.dev_id)
    }

    /// Make this connection the owner of the device `req` names, unless another is: then
    /// refuse `what`, naming the owner. A read-only server has no owner (it refuses every
    /// write before this); a device index out of range is left to the handler to refuse.
    fn claim(&self, req: &RequestHeader, what: &str) -> Handled {
        let shared = self.shared;
        if shared.options.read_only {
            return Ok(());
        }
        let (Some(device), Some(state)) = (
            shared.devices.get(req.dev_id as usize),
            shared.states.get(req.dev_id as usize),
        ) else {
            return Ok(());
        };
        if self.conn.is_evicted() {
            return Err(Fault::Close(
                "this connection is being closed by the server".to_string(),
            ));
        }
        let grace = Instant::now() + CLAIM_GRACE;
        let lease = u64::try_from(shared.options.owner_timeout.as_millis()).unwrap_or(u64::MAX);
        let mut owner = lock(&state.owner);
        loop {
            let now = shared.now_ms();
            match &*owner {
                Some(o) if o.conn.id == self.id => return Ok(()),
                // Closed by another thread (to make room): it sends the device nothing more,
                // though its thread may still be telling its client why.
                Some(o) if o.conn.is_evicted() => break,
                // Nothing came from the owner for its lease: its peer may be gone without
                // closing. The device goes to this connection, and the owner's is closed.
                Some(o) if now.saturating_sub(o.conn.heard.load(Ordering::SeqCst)) >= lease => {
                    let quiet = Duration::from_millis(now - o.conn.heard.load(Ordering::SeqCst));
                    o.conn.evict(format!(
                        "closed: this connection owned {} (device {}) but nothing came from it \
                         for {quiet:?} (am serve --owner-timeout) while {} wanted to write",
                        device.name(),
                        req.dev_id,
                        self.peer
                    ));
                    shared.warn(format_args!(
                        "remote PCI: {} loses {} (device {}) to {}: nothing from it for {quiet:?}",
                        o.peer,
                        device.name(),
                        req.dev_id,
                        self.peer
                    ));
                    break;
                }
                Some(_) if Instant::now() < grace => {
                    drop(owner);
                    std::thread::sleep(CLAIM_GRACE / 25);
                    owner = lock(&state.owner);
                }
                Some(o) => {
                    return Err(Fault::Refuse(format!(
                        "{} (device {}) is owned by {}; read-only access: {what} is refused \
                         until the owner disconnects (or sends nothing for {:?})",
                        device.name(),
                        req.dev_id,
                        o.describe(),
                        shared.options.owner_timeout
                    )));
                }
                None => break,
            }
        }
        *owner = Some(Owner {
            conn: self.conn.clone(),
            peer: self.peer,
            since: SystemTime::now(),
        });
        drop(owner);
        shared.info(format_args!(
            "remote PCI: {} owns {} (device {}) from its {what}",
            self.peer,
            device.name(),
            req.dev_id
        ));
        Ok(())
    }

    /// INDEXED: the steps as one transaction under the device's window lock, the index
    /// registers put back afterwards, so that neither another client's transaction nor an
    /// owner aiming the window with plain writes sees this one.
    fn indexed(&mut self, req: &RequestHeader) -> Handled {
        let most = (MAX_INDEX_STEPS * INDEX_STEP_LEN) as u64;
        if req.arg1 > most {
            return Err(Fault::Close(format!(
                "an INDEXED payload of {} bytes is more than the {most} bytes of \
                 {MAX_INDEX_STEPS} steps",
                req.arg1
            )));
        }
        let mut payload = vec![0u8; req.arg1 as usize];
        let deadline = self.payload_deadline(payload.len());
        self.read_by(&mut payload, deadline)?;
        let steps = decode_index_steps(&payload)
            .filter(|s| !s.is_empty() && s.len() as u64 == req.arg0)
            .ok_or_else(|| {
                Fault::Refuse(format!(
                    "an INDEXED payload is {} steps of {INDEX_STEP_LEN} bytes (kind 0 aim, \
                     1 read, 2 write; offset; value), not these {} bytes",
                    req.arg0,
                    payload.len()
                ))
            })?;
        let bar = self.bar(req)?;
        for step in &steps {
            let at = u64::from(step.offset());
            if !at.is_multiple_of(4) || at + 4 > bar.len() {
                return Err(Fault::Refuse(format!(
                    "INDEXED: BAR{} offset {at:#x} is not a dword inside its {:#x} bytes",
                    req.bar,
                    bar.len()
                )));
            }
        }
        if steps.iter().any(|s| matches!(s, WireStep::Write { .. })) {
            if self.shared.options.read_only {
                return Err(Fault::Refuse(
                    "an INDEXED write is refused: this server is read-only (am serve \
                     --read-only serves config, BAR and system-memory reads)"
                        .to_string(),
                ));
            }
            self.claim(req, "an INDEXED write")?;
        }
        let value = {
            let _window = self.window(req);
            let steps: Vec<IndexStep> = steps
                .iter()
                .map(|s| match *s {
                    WireStep::Aim { offset, value } => IndexStep::Aim {
                        offset: offset.into(),
                        value,
                    },
                    WireStep::Read { offset } => IndexStep::Read {
                        offset: offset.into(),
                    },
                    WireStep::Write { offset, value } => IndexStep::Write {
                        offset: offset.into(),
                        value,
                    },
                })
                .collect();
            // A relayed device sends these on as one INDEXED request of its own.
            bar.shared_indexed(&steps)?
        };
        self.reply(ResponseHeader::ok(u64::from(value), 0), &[])
    }

    /// SMU: a query to the device's SMU from any client, the owner's or not, run between
    /// the owner's messages ([`SharedMailbox`]); a relayed device sends it on upstream. It
    /// makes no owner: it changes nothing the owner set.
    fn smu(&mut self, req: &RequestHeader) -> Handled {
        let device = self.device(req)?;
        let (Ok(id), Ok(param)) = (u32::try_from(req.arg0), u32::try_from(req.arg1)) else {
            return Err(Fault::Refuse(format!(
                "SMU: message {:#x} and param {:#x} are 32-bit",
                req.arg0, req.arg1
            )));
        };
        let wait = Duration::from_millis(req.arg2).min(MAX_SMU_QUERY);
        let answer = match device.smu_query(id, param, wait)? {
            Some(a) => a,
            None => {
                let state = &self.shared.states[req.dev_id as usize];
                let found = lock(&state.mailbox).clone();
                let mailbox = match found {
                    Some(m) => m,
                    None => {
                        let m = Arc::new(SharedMailbox::locate(device.as_ref(), &state.window)?);
                        lock(&state.mailbox).get_or_insert(m).clone()
                    }
                };
                mailbox.query(&state.window, id, param, wait)?
            }
        };
        self.reply(
            ResponseHeader::ok(u64::from(answer.response), u64::from(answer.value)),
            &[],
        )
    }

    fn map_sysmem(&mut self, req: &RequestHeader) -> Handled {
        let device = self.device(req)?;
        let shared = self.shared;
        let opts = &shared.options;
        let size = req.arg0;
        if size == 0 {
            return Err(Fault::Refuse("MAP_SYSMEM of 0 bytes".to_string()));
        }
        let rounded = size
            .checked_next_multiple_of(SYSMEM_PAGE_SIZE as u64)
            .filter(|&s| s <= opts.max_sysmem_alloc)
            .ok_or_else(|| {
                Fault::Refuse(format!(
                    "MAP_SYSMEM of {size:#x} bytes exceeds this server's {:#x}-byte limit",
                    opts.max_sysmem_alloc
                ))
            })?;
        let total = self
            .sysmem_total
            .checked_add(rounded)
            .filter(|&t| t <= opts.max_sysmem_per_connection)
            .ok_or_else(|| {
                Fault::Refuse(format!(
                    "MAP_SYSMEM of {rounded:#x} bytes would pass this connection's {:#x}-byte limit ({:#x} held)",
                    opts.max_sysmem_per_connection, self.sysmem_total
                ))
            })?;
        let handle = u32::try_from(self.sysmem.len())
            .map_err(|_| Fault::Refuse("no system memory handle left".to_string()))?;
        let len = usize::try_from(rounded)
            .map_err(|_| Fault::Refuse(format!("{rounded:#x} bytes do not fit in memory")))?;
        // Memory the device may DMA into is for its driver: the owner.
        self.claim(req, "MAP_SYSMEM")?;
        shared.reserve_sysmem(rounded).map_err(|held| {
            Fault::Refuse(format!(
                "MAP_SYSMEM of {} would pass this server's limit of {} of system memory for \
                 all clients together (am serve --max-sysmem-total-mib); clients hold {} now",
                mib(rounded),
                mib(opts.max_sysmem_total),
                mib(held)
            ))
        })?;
        let mem = match device.alloc_sysmem(len, req.arg1 != 0) {
            Ok(mem) => mem,
            Err(e) => {
                shared.release_sysmem(rounded);
                return Err(e.into());
            }
        };
        let addrs: Vec<u8> = mem
            .bus_addrs()
            .iter()
            .flat_map(|a| a.to_le_bytes())
            .collect();
        self.shared.remember(req.dev_id, &mem);
        self.sysmem.push(Allocation {
            dev_id: req.dev_id,
            mem,
        });
        self.sysmem_total = total;
        self.reply(
            ResponseHeader::ok(addrs.len() as u64, u64::from(handle)),
            &addrs,
        )
    }
}

/// `bytes` in MiB for a message, to a tenth.
fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / f64::from(1u32 << 20))
}

/// Why no request came.
enum Wait {
    /// The client closed the connection.
    Closed,
    /// Idle for this long while the server was full.
    Idle(Duration),
    /// The socket failed.
    Io(io::Error),
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

/// A write that fails has no response to carry the error: the connection must close.
fn close(f: Fault) -> Fault {
    match f {
        Fault::Refuse(m) => Fault::Close(m),
        other => other,
    }
}

/// `bar` is checked against [`NUM_BARS`] first.
fn bar_index(bar: u32) -> u8 {
    bar.min(NUM_BARS - 1) as u8
}

fn config_range(req: &RequestHeader) -> Handled<(u16, u8)> {
    let (offset, size) = (req.arg0, req.arg1);
    if !matches!(size, 1 | 2 | 4) {
        return Err(Fault::Refuse(format!(
            "config access of {size} bytes: only 1, 2 or 4"
        )));
    }
    match offset.checked_add(size) {
        Some(end) if end <= CONFIG_SPACE_LEN => Ok((offset as u16, size as u8)),
        _ => Err(Fault::Refuse(format!(
            "config access of {size} bytes at {offset:#x} is outside the {CONFIG_SPACE_LEN:#x}-byte config space"
        ))),
    }
}

fn probe_matches(
    device: &dyn PciDevice,
    vendor: u64,
    base_class: u64,
    filter: &[(u32, u32)],
) -> Result<bool> {
    if u64::from(device.vendor_id()?) != vendor {
        return Ok(false);
    }
    if base_class != 0 && u64::from(device.config_read(PCI_CLASS_BASE, 1)?) != base_class {
        return Ok(false);
    }
    Ok(probe_filter_matches(filter, device.device_id()?))
}

/// A request of 1, 4 or 8 bytes is one access of that width (byte registers, dword
/// registers, 64-bit doorbells), as on the client's side of the wire.
fn bar_read(bar: &dyn Bar, offset: u64, buf: &mut [u8]) -> Result<()> {
    match buf.len() {
        1 => buf[0] = bar.read8(offset)?,
        4 if offset.is_multiple_of(4) => buf.copy_from_slice(&bar.read32(offset)?.to_le_bytes()),
        8 if offset.is_multiple_of(8) => buf.copy_from_slice(&bar.read64(offset)?.to_le_bytes()),
        _ => bar.read_bytes(offset, buf)?,
    }
    Ok(())
}

fn bar_write(bar: &dyn Bar, offset: u64, data: &[u8]) -> Result<()> {
    match *data {
        [b] => bar.write8(offset, b),
        [a, b, c, d] if offset.is_multiple_of(4) => {
            bar.write32(offset, u32::from_le_bytes([a, b, c, d]))
        }
        [a, b, c, d, e, f, g, h] if offset.is_multiple_of(8) => {
            bar.write64(offset, u64::from_le_bytes([a, b, c, d, e, f, g, h]))
        }
        _ => bar.write_bytes(offset, data),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Page;

    impl SysMem for Page {
        fn len(&self) -> usize {
            SYSMEM_PAGE_SIZE
        }
        fn bus_addrs(&self) -> &[u64] {
            &[0x1000]
        }
        fn read_bytes(&self, _: u64, _: &mut [u8]) -> Result<()> {
            Ok(())
        }
        fn write_bytes(&self, _: u64, _: &[u8]) -> Result<()> {
            Ok(())
        }
    }

    #[test]
    fn freed_allocations_are_forgotten_when_the_next_is_noted() {
        // Found by the soak: every MAP_SYSMEM left an entry for DMA_READ behind, so the
        // list grew for as long as clients allocated.
        let shared = Shared {
            devices: Vec::new(),
            states: Vec::new(),
            next_connection: AtomicU64::new(0),
            options: ServeOptions::default(),
            conns: Mutex::new(Vec::new()),
            epoch: Instant::now(),
            sysmem_in_use: AtomicU64::new(0),
            log_limit: RateLimit::default_for_refusals(),
            connection_log_limit: RateLimit::default_for_refusals(),
            refused_peers: Mutex::new(HashSet::new()),
            lingering: AtomicUsize::new(0),
            allocations: Mutex::new(Vec::new()),
        };
        let kept: Arc<dyn SysMem> = Arc::new(Page);
        shared.remember(0, &kept);
        for _ in 0..1000 {
            let freed: Arc<dyn SysMem> = Arc::new(Page);
            shared.remember(0, &freed);
        }
        let len = lock(&shared.allocations).len();
        assert_eq!(
            len, 2,
            "the live allocation and the latest, not 1001 entries"
        );
    }

    #[test]
    fn mem_total_is_read_in_bytes_from_meminfo() {
        let meminfo = "MemTotal:       16318480 kB\nMemFree:         1234 kB\n";
        assert_eq!(mem_total(meminfo), Some(16_318_480 * 1024));
        assert_eq!(mem_total("MemFree: 5 kB\n"), None, "no MemTotal line");
        assert_eq!(mem_total("MemTotal: lots kB\n"), None, "not a number");
        assert_eq!(mem_total("MemTotal: 5 MB\n"), None, "not in kB");
    }
}
