//! Packet encoders: PM4 for compute queues (GFX10+ `nvd.h` and GFX9 `soc15d.h` layouts), AQL
//! packets, and SDMA packets (SDMA 6 and 4.4). Each encoder appends dwords and returns the
//! index of the fields a graph patches later (signal values, launch sizes). Opcodes and field
//! positions are `am_autogen`'s (`pm4`, `sdma_pkt` and the layouts of `packets`), the ones
//! the mock's engines and `am ring` decode with.

use am_autogen::packets::{aql as aql_pkt, pm4 as p4, sdma as sd};
use am_autogen::pm4::{nvd as op, soc15d};
use am_autogen::sdma_pkt::v6 as sdma_op;

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
    p4::header(opcode, body)
}

/// GFX9 `ACQUIRE_MEM` `CP_COHER_CNTL`: instruction, scalar, vector (TC, TCL1) caches, and
/// write back TC.
const COHER_CNTL_ALL: u32 = soc15d::PACKET3_ACQUIRE_MEM_CP_COHER_CNTL_SH_ICACHE_ACTION_ENA(1)
    | soc15d::PACKET3_ACQUIRE_MEM_CP_COHER_CNTL_SH_KCACHE_ACTION_ENA(1)
    | soc15d::PACKET3_ACQUIRE_MEM_CP_COHER_CNTL_TC_ACTION_ENA(1)
    | soc15d::PACKET3_ACQUIRE_MEM_CP_COHER_CNTL_TCL1_ACTION_ENA(1)
    | soc15d::PACKET3_ACQUIRE_MEM_CP_COHER_CNTL_TC_WB_ACTION_ENA(1);

/// GFX10+ `ACQUIRE_MEM` `GCR_CNTL`: GLI (all), GLM (wb+inv), GLK (wb+inv), GLV, GL1, GL2
/// (wb+inv).
const GCR_CNTL_ALL: u32 = op::PACKET3_ACQUIRE_MEM_GCR_CNTL_GLI_INV(1)
    | op::PACKET3_ACQUIRE_MEM_GCR_CNTL_GLM_WB(1)
    | op::PACKET3_ACQUIRE_MEM_GCR_CNTL_GLM_INV(1)
    | op::PACKET3_ACQUIRE_MEM_GCR_CNTL_GLK_WB(1)
    | op::PACKET3_ACQUIRE_MEM_GCR_CNTL_GLK_INV(1)
    | op::PACKET3_ACQUIRE_MEM_GCR_CNTL_GLV_INV(1)
    | op::PACKET3_ACQUIRE_MEM_GCR_CNTL_GL1_INV(1)
    | op::PACKET3_ACQUIRE_MEM_GCR_CNTL_GL2_INV(1)
    | op::PACKET3_ACQUIRE_MEM_GCR_CNTL_GL2_WB(1);

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
        // Layouts of `packets::pm4::acquire_mem`: control, size (all), base 0, poll interval.
        if self.gfx9 {
            self.pkt(
                op::PACKET3_ACQUIRE_MEM,
                &[COHER_CNTL_ALL, u32::MAX, 0xff, 0, 0, 0x0a],
            );
        } else {
            self.pkt(
                op::PACKET3_ACQUIRE_MEM,
                &[0, u32::MAX, u32::MAX, 0, 0, 0x0a, GCR_CNTL_ALL],
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
        use p4::release_mem as rm;
        self.pkt(
            op::PACKET3_RELEASE_MEM,
            &[
                rm::EVENT_TYPE.put(p4::event::CACHE_FLUSH_AND_INV_TS_EVENT)
                    | rm::EVENT_INDEX.put(rm::EVENT_INDEX_EOP),
                rm::DATA_SEL.put(sel as u32) | rm::INT_SEL.put(u32::from(interrupt) * 2),
                addr as u32,
                (addr >> 32) as u32,
                data as u32,
                (data >> 32) as u32,
                ctx,
            ],
        ) + rm::DATA_LO
    }

    /// `WAIT_REG_MEM` until the dword at `addr` is `>= value` (32 bits). Returns the index of
    /// the reference dword.
    pub fn wait_ge(&mut self, addr: u64, value: u64) -> usize {
        use p4::wait_reg_mem as w;
        self.pkt(
            op::PACKET3_WAIT_REG_MEM,
            &[
                w::FUNCTION.put(w::FUNC_GE) | w::MEM_SPACE.put(w::SPACE_MEMORY),
                addr as u32,
                (addr >> 32) as u32,
                value as u32,
                u32::MAX,
                4,
            ],
        ) + w::REFERENCE
    }

    /// `WAIT_REG_MEM` write-then-wait on registers: write `reference` to `req`, wait until
    /// `(done & reference) == reference` (the HDP flush request/done pair).
    pub fn write_wait_reg(&mut self, req: u32, done: u32, reference: u32) {
        use p4::wait_reg_mem as w;
        self.pkt(
            op::PACKET3_WAIT_REG_MEM,
            &[
                w::FUNCTION.put(w::FUNC_EQ) | w::OPERATION.put(w::OP_WRITE_WAIT),
                req,
                done,
                reference,
                reference,
                0x20,
            ],
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
        use p4::dispatch_direct as d;
        let initiator = d::COMPUTE_SHADER_EN.put(1)
            | d::FORCE_START_AT_000.put(1)
            | d::CS_W32_EN.put(u32::from(wave32 && !self.gfx9));
        self.pkt(
            op::PACKET3_DISPATCH_DIRECT,
            &[groups[0], groups[1], groups[2], initiator],
        )
    }

    /// `EVENT_WRITE CS_PARTIAL_FLUSH`: later packets wait for the dispatches before.
    pub fn cs_partial_flush(&mut self) {
        self.pkt(
            op::PACKET3_EVENT_WRITE,
            &[p4::event_write::EVENT_TYPE.put(p4::event::CS_PARTIAL_FLUSH)
                | p4::event_write::EVENT_INDEX.put(p4::event_write::EVENT_INDEX_PARTIAL_FLUSH)],
        );
    }

    /// `INDIRECT_BUFFER` of `dwords` at `addr`.
    pub fn indirect(&mut self, addr: u64, dwords: usize) {
        self.pkt(op::PACKET3_INDIRECT_BUFFER, &ib_body(addr, dwords));
    }
}

/// The names of the type-3 packets in a PM4 stream, in order (for messages).
pub fn pm4_names(words: &[u32]) -> Vec<String> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let h = words[i];
        out.push(pm4_name(h));
        if p4::TYPE.get(h) != op::PACKET_TYPE3 {
            break;
        }
        i += p4::COUNT.get(h) as usize + 2;
    }
    out
}

/// The name of the PM4 packet a header starts, for messages.
pub fn pm4_name(h: u32) -> String {
    if p4::TYPE.get(h) != op::PACKET_TYPE3 {
        return format!("type-{} packet", p4::TYPE.get(h));
    }
    let opcode = p4::OPCODE.get(h);
    p4::name(opcode).map_or_else(|| format!("PM4 opcode {opcode:#04x}"), str::to_string)
}

/// The body of an `INDIRECT_BUFFER` of `dwords` at `addr`.
fn ib_body(addr: u64, dwords: usize) -> [u32; 3] {
    use p4::indirect_buffer as ib;
    [
        addr as u32,
        ib::BASE_HI.put((addr >> 32) as u32),
        ib::IB_SIZE.put(dwords as u32) | ib::VALID.put(1),
    ]
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
    use aql_pkt::dispatch as d;
    let mut p = [0u32; aql_pkt::DWORDS];
    p[0] = aql_pkt::header(aql_pkt::KERNEL_DISPATCH) | d::DIMENSIONS.put(3);
    p[d::WORKGROUP_X.dw] = d::WORKGROUP_X.put(block[0]) | d::WORKGROUP_Y.put(block[1]);
    p[d::WORKGROUP_Z.dw] = d::WORKGROUP_Z.put(block[2]);
    p[d::GRID_X..d::GRID_X + 3].copy_from_slice(&grid_items);
    p[d::PRIVATE_SEGMENT_SIZE] = private;
    p[d::GROUP_SEGMENT_SIZE] = group;
    p[d::KERNEL_OBJECT] = kernel_object as u32;
    p[d::KERNEL_OBJECT + 1] = (kernel_object >> 32) as u32;
    p[d::KERNARG] = kernarg as u32;
    p[d::KERNARG + 1] = (kernarg >> 32) as u32;
    p[aql_pkt::COMPLETION_SIGNAL] = signal as u32;
    p[aql_pkt::COMPLETION_SIGNAL + 1] = (signal >> 32) as u32;
    p
}

/// AMD's AQL vendor packet that runs a PM4 indirect buffer (format 1).
pub fn aql_pm4_ib(ib: u64, dwords: usize) -> [u32; 16] {
    use aql_pkt::vendor as v;
    let mut p = [0u32; aql_pkt::DWORDS];
    p[0] = aql_pkt::header(aql_pkt::VENDOR_SPECIFIC) | v::AMD_FORMAT.put(v::FORMAT_PM4_IB);
    p[v::PM4] = header(op::PACKET3_INDIRECT_BUFFER, p4::indirect_buffer::BODY);
    p[v::PM4 + 1..v::PM4 + 4].copy_from_slice(&ib_body(ib, dwords));
    p[v::DW_CNT_REMAIN] = v::DW_CNT_REMAIN_IB;
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
                sd::header(sdma_op::SDMA_OP_COPY, sdma_op::SDMA_SUBOP_COPY_LINEAR),
                sd::copy_linear::count(self.v6).put((n - 1) as u32),
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
                sd::header(sdma_op::SDMA_OP_CONST_FILL, 0)
                    | sd::constant_fill::FILLSIZE.put(sd::constant_fill::FILLSIZE_DWORD),
                d as u32,
                (d >> 32) as u32,
                pattern,
                sd::constant_fill::count(self.v6).put((n - 1) as u32),
            ]);
            done += n;
        }
    }

    /// Write the 64-bit `value` at `addr` (`WRITE_UNTILED` of two dwords). Returns the index
    /// of the low dword.
    pub fn write64(&mut self, addr: u64, value: u64) -> usize {
        self.words.extend([
            sd::header(sdma_op::SDMA_OP_WRITE, sdma_op::SDMA_SUBOP_WRITE_LINEAR),
            addr as u32,
            (addr >> 32) as u32,
            sd::write_untiled::COUNT.put(1),
        ]);
        let at = self.words.len();
        self.words.extend([value as u32, (value >> 32) as u32]);
        at
    }

    /// `FENCE`: write the dword `value` at `addr` after the work before it.
    pub fn fence(&mut self, addr: u64, value: u32) -> usize {
        self.words.extend([
            sd::header(sdma_op::SDMA_OP_FENCE, 0),
            addr as u32,
            (addr >> 32) as u32,
            value,
        ]);
        self.words.len() - 1
    }

    /// `POLL_REGMEM` until the dword at `addr` is `>= value`. Returns the index of the value.
    pub fn wait_ge(&mut self, addr: u64, value: u64) -> usize {
        use sd::poll_regmem as p;
        self.words.extend([
            sd::header(sdma_op::SDMA_OP_POLL_REGMEM, 0)
                | p::FUNC.put(p4::wait_reg_mem::FUNC_GE)
                | p::MEM_POLL.put(1),
            addr as u32,
            (addr >> 32) as u32,
            value as u32,
            u32::MAX,
            p::INTERVAL.put(4) | p::RETRY_COUNT.put(0xfff),
        ]);
        self.words.len() - 3
    }

    /// `TIMESTAMP` (get global): the 64-bit GPU clock at `addr`.
    pub fn timestamp(&mut self, addr: u64) {
        self.words.extend([
            sd::header(
                sdma_op::SDMA_OP_TIMESTAMP,
                sdma_op::SDMA_SUBOP_TIMESTAMP_GET_GLOBAL,
            ),
            addr as u32,
            (addr >> 32) as u32,
        ]);
    }

    /// `NOP`s until the stream is `offset` dwords into an 8-dword boundary less `before`
    /// (an `INDIRECT` packet of 6 dwords must end on an 8-dword boundary of the ring:
    /// `ring_pos` is where the stream will start in the ring, in dwords).
    pub fn indirect(&mut self, ring_pos: u64, addr: u64, dwords: usize) {
        let pos = ring_pos + self.words.len() as u64;
        let pad = (8 - (pos + 6) % 8) % 8;
        self.words.extend(std::iter::repeat_n(0, pad as usize));
        self.words.extend([
            sd::header(sdma_op::SDMA_OP_INDIRECT, 0),
            addr as u32,
            (addr >> 32) as u32,
            sd::indirect::IB_SIZE.put(dwords as u32),
            0,
            0,
        ]);
    }
}

/// The name of the SDMA packet a header starts, for messages (SDMA 5+ with `v6`).
pub fn sdma_name(h: u32, v6: bool) -> String {
    sd::packet_name(h, v6).map_or_else(
        || format!("SDMA opcode {:#x}", sd::OP.get(h)),
        str::to_string,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The dwords the encoders wrote when they spelled their bits out by hand (before the
    /// layouts came from `am_autogen::packets`): the move changed no bit.
    #[test]
    fn pm4_words_are_the_hand_written_ones() {
        for gfx9 in [false, true] {
            let mut m = Pm4::new(gfx9);
            m.acquire_mem();
            let at = m.release_mem(0x1_2345_6780, 7, DataSel::Data64, true, 9);
            assert_eq!(m.words[at], 7);
            let wait = m.wait_ge(0x2000, 3);
            assert_eq!(m.words[wait], 3);
            m.write_wait_reg(0x10, 0x11, 1);
            m.dispatch([4, 2, 1], true);
            m.cs_partial_flush();
            m.indirect(0x1_2345_6780, 10);
            let acquire: &[u32] = if gfx9 {
                &[0xc005_5800, 0x28c4_0000, u32::MAX, 0xff, 0, 0, 0x0a]
            } else {
                &[0xc006_5800, 0, u32::MAX, u32::MAX, 0, 0, 0x0a, 0xc3f1]
            };
            let n = acquire.len();
            assert_eq!(&m.words[..n], acquire, "gfx9 {gfx9}");
            let rest = [
                0xc006_4900,
                0x514,
                0x4200_0000,
                0x2345_6780,
                1,
                7,
                0,
                9,
                0xc005_3c00,
                0x15,
                0x2000,
                0,
                3,
                u32::MAX,
                4,
                0xc005_3c00,
                0x43,
                0x10,
                0x11,
                1,
                1,
                0x20,
                0xc003_1500,
                4,
                2,
                1,
                if gfx9 { 5 } else { 0x8005 },
                0xc000_4600,
                0x407,
                0xc002_3f00,
                0x2345_6780,
                1,
                0x80_000a,
            ];
            assert_eq!(&m.words[n..], rest, "gfx9 {gfx9}");
        }
    }

    #[test]
    fn aql_words_are_the_hand_written_ones() {
        let d = aql_dispatch([64, 2, 3], [256, 4, 5], 6, 7, 0x1_0000_a000, 0xb000, 0xc000);
        assert_eq!(
            d,
            [
                0x3_1502,
                64 | 2 << 16,
                3,
                256,
                4,
                5,
                6,
                7,
                0xa000,
                1,
                0xb000,
                0,
                0,
                0,
                0xc000,
                0
            ]
        );
        let v = aql_pm4_ib(0x1_0000_9000, 12);
        assert_eq!(
            v,
            [
                0x1_1500,
                0xc002_3f00,
                0x9000,
                1,
                0x80_000c,
                10,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0
            ]
        );
    }

    #[test]
    fn sdma_words_are_the_hand_written_ones() {
        for v6 in [true, false] {
            let mut s = Sdma::new(v6);
            s.copy(0x1000, 0x2000, 4096);
            s.fill(0x3000, 0xdead, 64);
            let at = s.write64(0x4000, 0x1_0000_0002);
            assert_eq!(at, 7 + 5 + 4);
            s.wait_ge(0x5000, 3);
            s.timestamp(0x6000);
            s.fence(0x7000, 5);
            s.indirect(0, 0x8000, 16);
            let mut want = vec![
                1,
                4095,
                0,
                0x1000,
                0,
                0x2000,
                0,
                0x8000_000b,
                0x3000,
                0,
                0xdead,
                63,
                2,
                0x4000,
                0,
                1,
                2,
                1,
                0xd000_0008,
                0x5000,
                0,
                3,
                u32::MAX,
                0x0fff_0004,
                0x20d,
                0x6000,
                0,
                5,
                0x7000,
                0,
                5,
            ];
            // 31 dwords so far: three NOPs pad the INDIRECT to end on an 8-dword boundary.
            want.extend([0, 0, 0, 4, 0x8000, 0, 16, 0, 0]);
            assert_eq!(s.words, want, "v6 {v6}");
            assert_eq!(sdma_name(s.words[0], v6), "COPY_LINEAR");
        }
    }
}
