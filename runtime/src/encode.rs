//! Packet encoders: PM4 for compute queues (GFX10+ `nvd.h` and GFX9 `soc15d.h` layouts), AQL
//! packets, and SDMA packets (SDMA 6 and 4.4). Each encoder appends dwords and returns the
//! index of the fields a graph patches later (signal values, launch sizes).

use am_autogen::pm4::nvd as op;

/// `CACHE_FLUSH_AND_INV_TS_EVENT`, the end-of-pipe event of `RELEASE_MEM`.
const CACHE_FLUSH_AND_INV_TS_EVENT: u32 = 0x14;
/// `event_index__mec_release_mem__end_of_pipe`.
const EVENT_INDEX_EOP: u32 = 5;
/// `CS_PARTIAL_FLUSH` and its event index.
const CS_PARTIAL_FLUSH: u32 = 7;
const EVENT_INDEX_PARTIAL_FLUSH: u32 = 4;

/// `RELEASE_MEM` `DATA_SEL`: what the end-of-pipe write sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DataSel {
    /// Nothing.
    None = 0,
    /// The low 32 bits of the data.
    Low32 = 1,
    /// All 64 bits.
    Data64 = 2,
    /// The 64-bit GPU clock.
    GpuClock = 3,
}

/// `WAIT_REG_MEM` function `>=`.
const FUNC_GEQ: u32 = 5;
/// `WAIT_REG_MEM` function `==`.
const FUNC_EQ: u32 = 3;

/// PM4 dwords for a compute queue.
#[derive(Clone, Debug, Default)]
pub struct Pm4 {
    /// GFX9 (MI300) layouts rather than GFX10+.
    pub gfx9: bool,
    /// The dwords so far.
    pub words: Vec<u32>,
}

/// A type-3 header for `body` dwords.
pub fn header(opcode: u32, body: usize) -> u32 {
    op::PACKET3(opcode, body as u32 - 1)
}

impl Pm4 {
    /// An empty stream for a GFX9 or GFX10+ compute queue.
    pub fn new(gfx9: bool) -> Pm4 {
        Pm4 {
            gfx9,
            words: Vec::new(),
        }
    }

    /// Append a packet; the index of its first body dword.
    fn pkt(&mut self, opcode: u32, body: &[u32]) -> usize {
        self.words.push(header(opcode, body.len()));
        let at = self.words.len();
        self.words.extend_from_slice(body);
        at
    }

    /// `ACQUIRE_MEM` invalidating the shader caches (instruction, scalar, vector, L1, L2).
    pub fn acquire_mem(&mut self) {
        if self.gfx9 {
            // CP_COHER_CNTL: SH_ICACHE, SH_KCACHE, TC, TCL1 and TC_WB actions.
            let cntl = 1 << 29 | 1 << 27 | 1 << 23 | 1 << 22 | 1 << 18;
            self.pkt(op::PACKET3_ACQUIRE_MEM, &[cntl, u32::MAX, 0xff, 0, 0, 0x0a]);
        } else {
            // GCR_CNTL: GLI, GLM (wb+inv), GLK (wb+inv), GLV, GL1, GL2 (wb+inv).
            let gcr = 1 | 1 << 4 | 1 << 5 | 1 << 6 | 1 << 7 | 1 << 8 | 1 << 9 | 1 << 14 | 1 << 15;
            self.pkt(
                op::PACKET3_ACQUIRE_MEM,
                &[0, u32::MAX, u32::MAX, 0, 0, 0x0a, gcr],
            );
        }
    }

    /// `RELEASE_MEM` at end of pipe (after all earlier work): write per `data_sel` at
    /// `addr`, interrupt with `ctx` if `interrupt`. Returns the index of the data's low dword.
    pub fn release_mem(
        &mut self,
        addr: u64,
        data: u64,
        sel: DataSel,
        interrupt: bool,
        ctx: u32,
    ) -> usize {
        self.pkt(
            op::PACKET3_RELEASE_MEM,
            &[
                CACHE_FLUSH_AND_INV_TS_EVENT | EVENT_INDEX_EOP << 8,
                (sel as u32) << 29 | (u32::from(interrupt) * 2) << 24,
                addr as u32,
                (addr >> 32) as u32,
                data as u32,
                (data >> 32) as u32,
                ctx,
            ],
        ) + 4
    }

    /// `WAIT_REG_MEM` until the dword at `addr` is `>= value` (32 bits). Returns the index of
    /// the reference dword.
    pub fn wait_ge(&mut self, addr: u64, value: u64) -> usize {
        self.pkt(
            op::PACKET3_WAIT_REG_MEM,
            &[
                FUNC_GEQ | 1 << 4,
                addr as u32,
                (addr >> 32) as u32,
                value as u32,
                u32::MAX,
                4,
            ],
        ) + 3
    }

    /// `WAIT_REG_MEM` write-then-wait on registers: write `reference` to `req`, wait until
    /// `(done & reference) == reference` (the HDP flush request/done pair).
    pub fn write_wait_reg(&mut self, req: u32, done: u32, reference: u32) {
        self.pkt(
            op::PACKET3_WAIT_REG_MEM,
            &[FUNC_EQ | 1 << 6, req, done, reference, reference, 0x20],
        );
    }

    /// `SET_SH_REG` of consecutive registers from SH offset `off`. Returns the index of the
    /// first value.
    pub fn set_sh(&mut self, off: u32, values: &[u32]) -> usize {
        let mut body = Vec::with_capacity(values.len() + 1);
        body.push(off);
        body.extend_from_slice(values);
        self.pkt(op::PACKET3_SET_SH_REG, &body) + 1
    }

    /// `DISPATCH_DIRECT` of `groups` workgroups; `wave32` sets `CS_W32_EN` (GFX10+). Returns
    /// the index of the X dimension.
    pub fn dispatch(&mut self, groups: [u32; 3], wave32: bool) -> usize {
        // COMPUTE_SHADER_EN | FORCE_START_AT_000 | CS_W32_EN.
        let initiator = 1 | 1 << 2 | u32::from(wave32 && !self.gfx9) << 15;
        self.pkt(
            op::PACKET3_DISPATCH_DIRECT,
            &[groups[0], groups[1], groups[2], initiator],
        )
    }

    /// `EVENT_WRITE CS_PARTIAL_FLUSH`: later packets wait for the dispatches before.
    pub fn cs_partial_flush(&mut self) {
        self.pkt(
            op::PACKET3_EVENT_WRITE,
            &[CS_PARTIAL_FLUSH | EVENT_INDEX_PARTIAL_FLUSH << 8],
        );
    }

    /// `INDIRECT_BUFFER` of `dwords` at `addr`.
    pub fn indirect(&mut self, addr: u64, dwords: usize) {
        self.pkt(
            op::PACKET3_INDIRECT_BUFFER,
            &[
                addr as u32,
                (addr >> 32) as u32 & 0xffff,
                dwords as u32 | op::INDIRECT_BUFFER_VALID,
            ],
        );
    }
}

/// The names of the type-3 packets in a PM4 stream, in order (for messages).
pub fn pm4_names(words: &[u32]) -> Vec<String> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let h = words[i];
        out.push(pm4_name(h));
        if h >> 30 != 3 {
            break;
        }
        i += ((h >> 16) & 0x3fff) as usize + 2;
    }
    out
}

/// The name of the PM4 packet a header starts, for messages.
pub fn pm4_name(h: u32) -> String {
    if h >> 30 != 3 {
        return format!("type-{} packet", h >> 30);
    }
    let name = match (h >> 8) & 0xff {
        op::PACKET3_NOP => "NOP",
        op::PACKET3_SET_SH_REG => "SET_SH_REG",
        op::PACKET3_SET_UCONFIG_REG => "SET_UCONFIG_REG",
        op::PACKET3_ACQUIRE_MEM => "ACQUIRE_MEM",
        op::PACKET3_RELEASE_MEM => "RELEASE_MEM",
        op::PACKET3_WAIT_REG_MEM => "WAIT_REG_MEM",
        op::PACKET3_INDIRECT_BUFFER => "INDIRECT_BUFFER",
        op::PACKET3_DISPATCH_DIRECT => "DISPATCH_DIRECT",
        op::PACKET3_EVENT_WRITE => "EVENT_WRITE",
        op::PACKET3_COPY_DATA => "COPY_DATA",
        op::PACKET3_WRITE_DATA => "WRITE_DATA",
        _ => return format!("PM4 opcode {:#04x}", (h >> 8) & 0xff),
    };
    name.to_string()
}

/// HSA packet types and header bits.
pub mod aql {
    /// `HSA_PACKET_TYPE_VENDOR_SPECIFIC`.
    pub const VENDOR: u16 = 0;
    /// `HSA_PACKET_TYPE_KERNEL_DISPATCH`.
    pub const KERNEL_DISPATCH: u16 = 2;
    /// `HSA_PACKET_TYPE_BARRIER_AND`.
    pub const BARRIER_AND: u16 = 3;

    /// A header of `kind` with the barrier bit and system-scope acquire and release fences.
    pub fn header(kind: u16) -> u16 {
        kind | 1 << 8 | 2 << 9 | 2 << 11
    }
}

/// An AQL kernel-dispatch packet (64 bytes as 16 dwords).
#[allow(clippy::too_many_arguments)]
pub fn aql_dispatch(
    block: [u32; 3],
    grid_items: [u32; 3],
    private: u32,
    group: u32,
    kernel_object: u64,
    kernarg: u64,
    signal: u64,
) -> [u32; 16] {
    let mut p = [0u32; 16];
    p[0] = u32::from(aql::header(aql::KERNEL_DISPATCH)) | 3 << 16;
    p[1] = block[0] | block[1] << 16;
    p[2] = block[2];
    p[3..6].copy_from_slice(&grid_items);
    p[6] = private;
    p[7] = group;
    p[8] = kernel_object as u32;
    p[9] = (kernel_object >> 32) as u32;
    p[10] = kernarg as u32;
    p[11] = (kernarg >> 32) as u32;
    p[14] = signal as u32;
    p[15] = (signal >> 32) as u32;
    p
}

/// AMD's AQL vendor packet that runs a PM4 indirect buffer (format 1).
pub fn aql_pm4_ib(ib: u64, dwords: usize) -> [u32; 16] {
    let mut p = [0u32; 16];
    p[0] = u32::from(aql::header(aql::VENDOR)) | 1 << 16;
    p[1] = header(op::PACKET3_INDIRECT_BUFFER, 3);
    p[2] = ib as u32;
    p[3] = (ib >> 32) as u32 & 0xffff;
    p[4] = dwords as u32 | op::INDIRECT_BUFFER_VALID;
    // dw_cnt_remain: the dwords after the IB command.
    p[5] = 10;
    p
}

/// SDMA packets.
#[derive(Clone, Debug, Default)]
pub struct Sdma {
    /// SDMA 5+ (navi31's SDMA 6) rather than 4.4 (MI300): the copy count field is wider.
    pub v6: bool,
    /// The dwords so far.
    pub words: Vec<u32>,
}

const SDMA_COPY: u32 = 1;
const SDMA_WRITE: u32 = 2;
const SDMA_INDIRECT: u32 = 4;
const SDMA_FENCE: u32 = 5;
const SDMA_POLL_REGMEM: u32 = 8;
const SDMA_CONST_FILL: u32 = 11;
const SDMA_TIMESTAMP: u32 = 13;

impl Sdma {
    /// An empty stream.
    pub fn new(v6: bool) -> Sdma {
        Sdma {
            v6,
            words: Vec::new(),
        }
    }

    /// The largest copy one packet does (`COPY_LINEAR` count field: 30 bits on SDMA ≥ 5, 22
    /// on 4.x, bytes − 1; kept to whole MiB).
    pub fn max_copy(&self) -> u64 {
        if self.v6 { 1 << 30 } else { 4 << 20 }
    }

    /// `COPY_LINEAR` of `bytes`, split at [`Sdma::max_copy`].
    pub fn copy(&mut self, src: u64, dst: u64, bytes: u64) {
        let mut done = 0;
        while done < bytes {
            let n = (bytes - done).min(self.max_copy());
            let (s, d) = (src + done, dst + done);
            self.words.extend([
                SDMA_COPY,
                (n - 1) as u32,
                0,
                s as u32,
                (s >> 32) as u32,
                d as u32,
                (d >> 32) as u32,
            ]);
            done += n;
        }
    }

    /// `CONSTANT_FILL` of `bytes` at `dst` with the dword `pattern`, split at the maximum.
    pub fn fill(&mut self, dst: u64, pattern: u32, bytes: u64) {
        let mut done = 0;
        while done < bytes {
            let n = (bytes - done).min(self.max_copy());
            let d = dst + done;
            self.words.extend([
                SDMA_CONST_FILL | 2 << 30,
                d as u32,
                (d >> 32) as u32,
                pattern,
                (n - 1) as u32,
            ]);
            done += n;
        }
    }

    /// Write the 64-bit `value` at `addr` (`WRITE_UNTILED` of two dwords). Returns the index
    /// of the low dword.
    pub fn write64(&mut self, addr: u64, value: u64) -> usize {
        self.words
            .extend([SDMA_WRITE, addr as u32, (addr >> 32) as u32, 1]);
        let at = self.words.len();
        self.words.extend([value as u32, (value >> 32) as u32]);
        at
    }

    /// `FENCE`: write the dword `value` at `addr` after the work before it.
    pub fn fence(&mut self, addr: u64, value: u32) -> usize {
        self.words
            .extend([SDMA_FENCE, addr as u32, (addr >> 32) as u32, value]);
        self.words.len() - 1
    }

    /// `POLL_REGMEM` until the dword at `addr` is `>= value`. Returns the index of the value.
    pub fn wait_ge(&mut self, addr: u64, value: u64) -> usize {
        self.words.extend([
            SDMA_POLL_REGMEM | FUNC_GEQ << 28 | 1 << 31,
            addr as u32,
            (addr >> 32) as u32,
            value as u32,
            u32::MAX,
            4 | 0xfff << 16,
        ]);
        self.words.len() - 3
    }

    /// `TIMESTAMP` (get global): the 64-bit GPU clock at `addr`.
    pub fn timestamp(&mut self, addr: u64) {
        self.words
            .extend([SDMA_TIMESTAMP | 2 << 8, addr as u32, (addr >> 32) as u32]);
    }

    /// `NOP`s until the stream is `offset` dwords into an 8-dword boundary less `before`
    /// (an `INDIRECT` packet of 6 dwords must end on an 8-dword boundary of the ring:
    /// `ring_pos` is where the stream will start in the ring, in dwords).
    pub fn indirect(&mut self, ring_pos: u64, addr: u64, dwords: usize) {
        let pos = ring_pos + self.words.len() as u64;
        let pad = (8 - (pos + 6) % 8) % 8;
        self.words.extend(std::iter::repeat_n(0, pad as usize));
        self.words.extend([
            SDMA_INDIRECT,
            addr as u32,
            (addr >> 32) as u32,
            dwords as u32,
            0,
            0,
        ]);
    }
}

/// The name of the SDMA packet a header starts, for messages.
pub fn sdma_name(h: u32) -> String {
    match h & 0xff {
        0 => "NOP".into(),
        SDMA_COPY => "COPY_LINEAR".into(),
        SDMA_WRITE => "WRITE".into(),
        SDMA_INDIRECT => "INDIRECT".into(),
        SDMA_FENCE => "FENCE".into(),
        6 => "TRAP".into(),
        SDMA_POLL_REGMEM => "POLL_REGMEM".into(),
        SDMA_CONST_FILL => "CONST_FILL".into(),
        SDMA_TIMESTAMP => "TIMESTAMP".into(),
        o => format!("SDMA opcode {o:#x}"),
    }
}
