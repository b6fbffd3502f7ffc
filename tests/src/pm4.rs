//! PM4 type-3 packets for hand-built rings (compute queues, GFX9 and GFX10+ layouts).

use am_autogen::pm4::nvd as op;

/// A type-3 header for `body` dwords.
pub fn header(opcode: u32, body: usize) -> u32 {
    3 << 30 | ((body as u32 - 1) & 0x3fff) << 16 | (opcode & 0xff) << 8
}

fn pkt(opcode: u32, body: &[u32]) -> Vec<u32> {
    let mut v = vec![header(opcode, body.len())];
    v.extend_from_slice(body);
    v
}

/// `NOP` with `n` body dwords.
pub fn nop(n: usize) -> Vec<u32> {
    pkt(op::PACKET3_NOP, &vec![0xdead_0000; n])
}

/// The one-dword filler `PACKET3(NOP, 0x3FFF)`.
pub const NOP_FILLER: u32 = 0xffff_1000;

/// `WRITE_DATA` of `data` to memory (`DST_SEL` 5).
pub fn write_mem(addr: u64, data: &[u32]) -> Vec<u32> {
    let mut b = vec![5 << 8, addr as u32, (addr >> 32) as u32];
    b.extend_from_slice(data);
    pkt(op::PACKET3_WRITE_DATA, &b)
}

/// `WRITE_DATA` of `data` to consecutive registers from dword `reg` (`DST_SEL` 0).
pub fn write_reg(reg: u32, data: &[u32]) -> Vec<u32> {
    let mut b = vec![0, reg, 0];
    b.extend_from_slice(data);
    pkt(op::PACKET3_WRITE_DATA, &b)
}

/// `COPY_DATA`: `src_sel` (0 register, 1 memory, 5 immediate, 9 GPU clock) to `dst_sel`
/// (0 register, 5 memory), 64-bit with `wide`.
pub fn copy_data(src_sel: u32, src: u64, dst_sel: u32, dst: u64, wide: bool) -> Vec<u32> {
    pkt(
        op::PACKET3_COPY_DATA,
        &[
            src_sel | dst_sel << 8 | u32::from(wide) << 16 | 1 << 20,
            src as u32,
            (src >> 32) as u32,
            dst as u32,
            (dst >> 32) as u32,
        ],
    )
}

/// `RELEASE_MEM` at end of pipe: `data_sel` (0 none, 1 low 32 bits, 2 64 bits, 3 GPU clock),
/// `int_sel` (0 none, 2 interrupt after the write) carrying `ctx`.
pub fn release_mem(addr: u64, data: u64, data_sel: u32, int_sel: u32, ctx: u32) -> Vec<u32> {
    // CACHE_FLUSH_AND_INV_TS_EVENT (0x14), event index 5 (end of pipe).
    pkt(
        op::PACKET3_RELEASE_MEM,
        &[
            0x14 | 5 << 8,
            data_sel << 29 | int_sel << 24,
            addr as u32,
            (addr >> 32) as u32,
            data as u32,
            (data >> 32) as u32,
            ctx,
        ],
    )
}

/// `WAIT_REG_MEM` on a dword of memory: `(mem & mask) FUNC (reference & mask)`.
pub fn wait_mem(addr: u64, reference: u32, mask: u32, func: u32) -> Vec<u32> {
    pkt(
        op::PACKET3_WAIT_REG_MEM,
        &[
            func | 1 << 4,
            addr as u32,
            (addr >> 32) as u32,
            reference,
            mask,
            4,
        ],
    )
}

/// `WAIT_REG_MEM` on a register.
pub fn wait_reg(reg: u32, reference: u32, mask: u32, func: u32) -> Vec<u32> {
    pkt(
        op::PACKET3_WAIT_REG_MEM,
        &[func, reg, 0, reference, mask, 4],
    )
}

/// `WAIT_REG_MEM` operation 1: write `reference` to `req`, then wait for `done`
/// (`(done & mask) == (reference & mask)`): the HDP flush request/done pair.
pub fn write_wait_reg(req: u32, done: u32, reference: u32, mask: u32) -> Vec<u32> {
    pkt(
        op::PACKET3_WAIT_REG_MEM,
        &[3 | 1 << 6, req, done, reference, mask, 0x20],
    )
}

/// `INDIRECT_BUFFER` of `dwords` at `addr` (valid, vmid 0).
pub fn indirect(addr: u64, dwords: usize) -> Vec<u32> {
    pkt(
        op::PACKET3_INDIRECT_BUFFER,
        &[
            addr as u32,
            (addr >> 32) as u32 & 0xffff,
            dwords as u32 | op::INDIRECT_BUFFER_VALID,
        ],
    )
}

/// `SET_SH_REG` from SH offset `off` (dword address − 0x2C00).
pub fn set_sh(off: u32, values: &[u32]) -> Vec<u32> {
    let mut b = vec![off];
    b.extend_from_slice(values);
    pkt(op::PACKET3_SET_SH_REG, &b)
}

/// `SET_UCONFIG_REG` from UCONFIG offset `off` (dword address − 0xC000).
pub fn set_uconfig(off: u32, values: &[u32]) -> Vec<u32> {
    let mut b = vec![off];
    b.extend_from_slice(values);
    pkt(op::PACKET3_SET_UCONFIG_REG, &b)
}

/// `ACQUIRE_MEM` invalidating everything, in the layout of the GC generation (GFX9: 6
/// body dwords with `CP_COHER_CNTL`; GFX10+: 7 with `GCR_CNTL`).
pub fn acquire_mem(gfx9: bool) -> Vec<u32> {
    if gfx9 {
        pkt(
            op::PACKET3_ACQUIRE_MEM,
            &[0x28c0_0000, u32::MAX, 0xff, 0, 0, 0x0a],
        )
    } else {
        pkt(
            op::PACKET3_ACQUIRE_MEM,
            &[0, u32::MAX, u32::MAX, 0, 0, 0, 0x0003_c3ff],
        )
    }
}

/// `EVENT_WRITE` of `CS_PARTIAL_FLUSH` (event 7, index 4).
pub fn cs_partial_flush() -> Vec<u32> {
    pkt(op::PACKET3_EVENT_WRITE, &[7 | 4 << 8])
}

/// `PRED_EXEC`: the next `dwords` run only on the XCCs of `mask`.
pub fn pred_exec(mask: u8, dwords: usize) -> Vec<u32> {
    pkt(
        op::PACKET3_PRED_EXEC,
        &[u32::from(mask) << 24 | dwords as u32],
    )
}

/// `DISPATCH_DIRECT` of `groups` workgroups (`COMPUTE_SHADER_EN`, `FORCE_START_AT_000`, and
/// `CS_W32_EN` with `wave32`).
pub fn dispatch(groups: [u32; 3], wave32: bool) -> Vec<u32> {
    let initiator = 1 | 1 << 2 | u32::from(wave32) << 15;
    pkt(
        op::PACKET3_DISPATCH_DIRECT,
        &[groups[0], groups[1], groups[2], initiator],
    )
}
