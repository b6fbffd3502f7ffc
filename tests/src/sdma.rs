//! SDMA packets for hand-built rings (SDMA 6 and 4.4 share these layouts; counts are bytes
//! or dwords minus one).

const NOP: u32 = 0;
const COPY: u32 = 1;
const WRITE: u32 = 2;
const INDIRECT: u32 = 4;
const FENCE: u32 = 5;
const TRAP: u32 = 6;
const POLL_REGMEM: u32 = 8;
const CONST_FILL: u32 = 11;
const TIMESTAMP: u32 = 13;
const GCR_REQ: u32 = 17;

/// `NOP` followed by `n` dwords it skips.
pub fn nop(n: usize) -> Vec<u32> {
    let mut v = vec![NOP | (n as u32) << 16];
    v.extend(std::iter::repeat_n(0, n));
    v
}

/// `COPY_LINEAR` of `bytes` from `src` to `dst`.
pub fn copy(src: u64, dst: u64, bytes: u64) -> Vec<u32> {
    vec![
        COPY,
        (bytes - 1) as u32,
        0,
        src as u32,
        (src >> 32) as u32,
        dst as u32,
        (dst >> 32) as u32,
    ]
}

/// `WRITE_UNTILED` of `data` at `dst`.
pub fn write(dst: u64, data: &[u32]) -> Vec<u32> {
    let mut v = vec![WRITE, dst as u32, (dst >> 32) as u32, data.len() as u32 - 1];
    v.extend_from_slice(data);
    v
}

/// `CONSTANT_FILL` of `bytes` at `dst` with the dword `pattern`.
pub fn fill(dst: u64, pattern: u32, bytes: u64) -> Vec<u32> {
    vec![
        CONST_FILL | 2 << 30,
        dst as u32,
        (dst >> 32) as u32,
        pattern,
        (bytes - 1) as u32,
    ]
}

/// `FENCE`: write `value` at `addr`.
pub fn fence(addr: u64, value: u32) -> Vec<u32> {
    vec![FENCE, addr as u32, (addr >> 32) as u32, value]
}

/// `TRAP` with an interrupt context.
pub fn trap(ctx: u32) -> Vec<u32> {
    vec![TRAP, ctx]
}

/// `POLL_REGMEM` on memory: wait for `(mem & mask) FUNC (reference & mask)`.
pub fn poll_mem(addr: u64, reference: u32, mask: u32, func: u32) -> Vec<u32> {
    vec![
        POLL_REGMEM | func << 28 | 1 << 31,
        addr as u32,
        (addr >> 32) as u32,
        reference,
        mask,
        4 | 0xfff << 16,
    ]
}

/// `POLL_REGMEM` with `HDP_FLUSH`: write `reference` to the register `req`, then poll the
/// register `done` (dword addresses).
pub fn hdp_flush(req: u32, done: u32, reference: u32) -> Vec<u32> {
    vec![
        POLL_REGMEM | 1 << 26 | 3 << 28,
        done << 2,
        req << 2,
        reference,
        reference,
        10 | 0xfff << 16,
    ]
}

/// `TIMESTAMP` get-global: the GPU clock as 64 bits at `addr`.
pub fn timestamp(addr: u64) -> Vec<u32> {
    vec![TIMESTAMP | 2 << 8, addr as u32, (addr >> 32) as u32]
}

/// `GCR_REQ` (SDMA 6) invalidating everything.
pub fn gcr() -> Vec<u32> {
    vec![GCR_REQ, 0, 0xffff_0000, 0xffff_ff87, 0]
}

/// `INDIRECT` of `dwords` at `addr` (vmid 0).
pub fn indirect(addr: u64, dwords: usize) -> Vec<u32> {
    vec![
        INDIRECT,
        addr as u32,
        (addr >> 32) as u32,
        dwords as u32,
        0,
        0,
    ]
}
