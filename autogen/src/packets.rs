//! Packet layouts of the command streams — PM4 type-3 packets of compute queues, SDMA
//! packets, AQL (HSA) packets — for the runtime's encoders, the mock's engines and
//! `am ring`'s decoder, so the three read and write the same bits.
//!
//! **Hand-kept, not generated.** `scripts/autogen` does not write this file. It builds on the
//! generated modules wherever they state a fact:
//! - opcodes are the generated `PACKET3_*` / `SDMA_OP_*` constants, and packet names are
//!   their names (listed once here, each next to its constant);
//! - SDMA fields are the `_offset` / `_mask` / `_shift` triples of
//!   `sdma_v6_0_0_pkt_open.h` and `vega10_sdma_pkt_open.h` ([`Field::from_mask`]);
//! - PM4 fields take their shift from the shift-only helpers of `nvd.h` / `soc15d.h`
//!   (`WAIT_REG_MEM_FUNCTION(x)` is `x << 0`; [`Field::from_helper`]) and add the width,
//!   which those headers do not state;
//! - what no amdgpu header has (PM4 fields without a helper, `VGT_EVENT_TYPE` values,
//!   `COMPUTE_DISPATCH_INITIATOR` bits for a packet, the HSA packets of `hsa.h`) is written
//!   here, each with where it comes from; `autogen/tests/integration/packets.rs` checks the values
//!   against the generated tables where one has them.

/// The workspace's one field extractor, kept in `am-isa` (the lowest crate its users share).
pub use am_isa::bits;

/// A bit field of a packet: dword `dw` of the packet, bits `shift .. shift + width`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field {
    /// The dword the field is in (see each module for what dword 0 is).
    pub dw: usize,
    /// Its lowest bit.
    pub shift: u32,
    /// Its width in bits (1 to 32).
    pub width: u32,
}

impl Field {
    /// A field of `width` bits at `shift` in dword `dw`. Out-of-range positions fail the
    /// build of the constant that names them.
    pub const fn new(dw: usize, shift: u32, width: u32) -> Field {
        assert!(width >= 1 && shift + width <= 32, "field outside its dword");
        Field { dw, shift, width }
    }

    /// A field from a generated `_offset` / `_mask` / `_shift` triple (the mask unshifted,
    /// as the SDMA headers give it).
    pub const fn from_mask(offset: u32, mask: u32, shift: u32) -> Field {
        let width = 32 - mask.leading_zeros();
        assert!(mask.count_ones() == width, "mask is not one run from bit 0");
        Field::new(offset as usize, shift, width)
    }

    /// A field from a shift-only helper of `nvd.h` / `soc15d.h` evaluated at 1
    /// (`WAIT_REG_MEM_MEM_SPACE(1)` = `1 << 4`), or from a one-bit flag constant
    /// (`INDIRECT_BUFFER_VALID`), with the width the header leaves out.
    pub const fn from_helper(dw: usize, one: u32, width: u32) -> Field {
        assert!(one.is_power_of_two(), "not a single bit");
        Field::new(dw, one.trailing_zeros(), width)
    }

    /// The field's bits in place.
    #[inline]
    pub const fn mask(self) -> u32 {
        (((1u64 << self.width) - 1) as u32) << self.shift
    }

    /// The field's value in the dword `v`.
    #[inline]
    pub const fn get(self, v: u32) -> u32 {
        bits(v, self.shift, self.width)
    }

    /// The field's value in `words` (the packet from its dword 0); 0 when `words` is too
    /// short to hold it.
    #[inline]
    pub fn at(self, words: &[u32]) -> u32 {
        match words.get(self.dw) {
            Some(&v) => self.get(v),
            None => 0,
        }
    }

    /// `value` placed in the field (bits above its width dropped, as the headers' builders
    /// do).
    #[inline]
    pub const fn put(self, value: u32) -> u32 {
        (value << self.shift) & self.mask()
    }

    /// Whether a one-bit field is set in `v`.
    #[inline]
    pub const fn is_set(self, v: u32) -> bool {
        self.get(v) != 0
    }
}

/// A 64-bit value from its low and high dwords.
#[inline]
pub const fn qword(lo: u32, hi: u32) -> u64 {
    (hi as u64) << 32 | lo as u64
}

/// PM4 type-3 packets of compute queues.
///
/// The header is dword 0 of the stream; the per-packet fields below count from the first
/// dword *after* the header (the body), which is how the CP's handlers and Linux's
/// `amdgpu_ring_write` sequences see them. Opcodes are those of `nvd.h` (GFX10+); a compute
/// queue's packets have the same opcodes in `soc15d.h` (GFX9) — only `ACQUIRE_MEM`'s body
/// differs. Encoders use the generated `PACKET3_*` constants and helpers directly.
pub mod pm4 {
    use super::Field;
    use crate::pm4::nvd;

    /// Header: packet type (3 for type-3, 2 for the one-dword filler), bits 31:30.
    pub const TYPE: Field = Field::new(0, 30, 2);
    /// Header: body dwords − 1, bits 29:16.
    pub const COUNT: Field = Field::new(0, 16, 14);
    /// Header: opcode, bits 15:8.
    pub const OPCODE: Field = Field::new(0, 8, 8);
    /// `PACKET3(NOP, 0x3FFF)`: a one-dword NOP (the count says nothing follows).
    pub const NOP_FILLER: u32 = nvd::PACKET3(nvd::PACKET3_NOP, 0x3fff);

    /// A type-3 header for a packet of `body` dwords after the header.
    #[inline]
    pub const fn header(opcode: u32, body: usize) -> u32 {
        nvd::PACKET3(opcode, body as u32 - 1)
    }

    macro_rules! opcode_names {
        ($($c:ident)*) => {
            /// The name of a type-3 opcode (its `PACKET3_*` name without the prefix), for
            /// every opcode of `nvd.h` (aliases such as `COND_INDIRECT_BUFFER` give the
            /// first name) and `soc15d.h`'s `RUN_CLEANER_SHADER`.
            pub fn name(opcode: u32) -> Option<&'static str> {
                #[deny(unreachable_patterns)]
                match opcode {
                    $(nvd::$c => Some(&stringify!($c)["PACKET3_".len()..]),)*
                    crate::pm4::soc15d::PACKET3_RUN_CLEANER_SHADER => Some("RUN_CLEANER_SHADER"),
                    _ => None,
                }
            }
        };
    }

    opcode_names! {
        PACKET3_NOP PACKET3_SET_BASE PACKET3_CLEAR_STATE PACKET3_INDEX_BUFFER_SIZE
        PACKET3_DISPATCH_DIRECT PACKET3_DISPATCH_INDIRECT PACKET3_INDIRECT_BUFFER_END
        PACKET3_INDIRECT_BUFFER_CNST_END PACKET3_ATOMIC_GDS PACKET3_ATOMIC_MEM
        PACKET3_OCCLUSION_QUERY PACKET3_SET_PREDICATION PACKET3_REG_RMW PACKET3_COND_EXEC
        PACKET3_PRED_EXEC PACKET3_DRAW_INDIRECT PACKET3_DRAW_INDEX_INDIRECT PACKET3_INDEX_BASE
        PACKET3_DRAW_INDEX_2 PACKET3_CONTEXT_CONTROL PACKET3_INDEX_TYPE
        PACKET3_DRAW_INDIRECT_MULTI PACKET3_DRAW_INDEX_AUTO PACKET3_NUM_INSTANCES
        PACKET3_DRAW_INDEX_MULTI_AUTO PACKET3_INDIRECT_BUFFER_PRIV PACKET3_INDIRECT_BUFFER_CNST
        PACKET3_STRMOUT_BUFFER_UPDATE PACKET3_DRAW_INDEX_OFFSET_2 PACKET3_DRAW_PREAMBLE
        PACKET3_WRITE_DATA PACKET3_DRAW_INDEX_INDIRECT_MULTI PACKET3_MEM_SEMAPHORE
        PACKET3_DRAW_INDEX_MULTI_INST PACKET3_COPY_DW PACKET3_WAIT_REG_MEM
        PACKET3_INDIRECT_BUFFER PACKET3_COPY_DATA PACKET3_CP_DMA PACKET3_PFP_SYNC_ME
        PACKET3_SURFACE_SYNC PACKET3_ME_INITIALIZE PACKET3_COND_WRITE PACKET3_EVENT_WRITE
        PACKET3_EVENT_WRITE_EOP PACKET3_EVENT_WRITE_EOS PACKET3_RELEASE_MEM
        PACKET3_PREAMBLE_CNTL PACKET3_DMA_DATA PACKET3_CONTEXT_REG_RMW PACKET3_GFX_CNTX_UPDATE
        PACKET3_BLK_CNTX_UPDATE PACKET3_INCR_UPDT_STATE PACKET3_ACQUIRE_MEM PACKET3_REWIND
        PACKET3_INTERRUPT PACKET3_GEN_PDEPTE PACKET3_INDIRECT_BUFFER_PASID PACKET3_PRIME_UTCL2
        PACKET3_LOAD_UCONFIG_REG PACKET3_LOAD_SH_REG PACKET3_LOAD_CONFIG_REG
        PACKET3_LOAD_CONTEXT_REG PACKET3_LOAD_COMPUTE_STATE PACKET3_LOAD_SH_REG_INDEX
        PACKET3_SET_CONFIG_REG PACKET3_SET_CONTEXT_REG PACKET3_SET_CONTEXT_REG_INDEX
        PACKET3_SET_VGPR_REG_DI_MULTI PACKET3_SET_SH_REG_DI PACKET3_SET_CONTEXT_REG_INDIRECT
        PACKET3_SET_SH_REG_DI_MULTI PACKET3_GFX_PIPE_LOCK PACKET3_SET_SH_REG
        PACKET3_SET_SH_REG_OFFSET PACKET3_SET_QUEUE_REG PACKET3_SET_UCONFIG_REG
        PACKET3_SET_UCONFIG_REG_INDEX PACKET3_FORWARD_HEADER PACKET3_SCRATCH_RAM_WRITE
        PACKET3_SCRATCH_RAM_READ PACKET3_LOAD_CONST_RAM PACKET3_WRITE_CONST_RAM
        PACKET3_DUMP_CONST_RAM PACKET3_INCREMENT_CE_COUNTER PACKET3_INCREMENT_DE_COUNTER
        PACKET3_WAIT_ON_CE_COUNTER PACKET3_WAIT_ON_DE_COUNTER_DIFF PACKET3_SWITCH_BUFFER
        PACKET3_DISPATCH_DRAW_PREAMBLE PACKET3_DISPATCH_DRAW PACKET3_GET_LOD_STATS
        PACKET3_DRAW_MULTI_PREAMBLE PACKET3_FRAME_CONTROL PACKET3_INDEX_ATTRIBUTES_INDIRECT
        PACKET3_WAIT_REG_MEM64 PACKET3_COND_PREEMPT PACKET3_HDP_FLUSH PACKET3_COPY_DATA_RB
        PACKET3_INVALIDATE_TLBS PACKET3_AQL_PACKET PACKET3_DMA_DATA_FILL_MULTI
        PACKET3_SET_SH_REG_INDEX PACKET3_DRAW_INDIRECT_COUNT_MULTI
        PACKET3_DRAW_INDEX_INDIRECT_COUNT_MULTI PACKET3_DUMP_CONST_RAM_OFFSET
        PACKET3_LOAD_CONTEXT_REG_INDEX PACKET3_SET_RESOURCES PACKET3_MAP_PROCESS
        PACKET3_MAP_QUEUES PACKET3_UNMAP_QUEUES PACKET3_QUERY_STATUS PACKET3_RUN_LIST
        PACKET3_MAP_PROCESS_VM PACKET3_SET_Q_PREEMPTION_MODE
    }

    /// `SET_SH_REG`, `SET_UCONFIG_REG`, `SET_CONFIG_REG`, `SET_CONTEXT_REG`: body dword 0
    /// holds the first register's offset from the space's start
    /// (`PACKET3_SET_*_REG_START`); the values follow.
    pub mod set_reg {
        use super::Field;
        /// Register offset in the space, in dwords.
        pub const REG_OFFSET: Field = Field::new(0, 0, 16);
    }

    /// `WAIT_REG_MEM`: wait until `(value & MASK) FUNCTION (REFERENCE & MASK)`.
    pub mod wait_reg_mem {
        use super::{Field, nvd};
        /// Compare function (see [`FUNCTIONS`]).
        pub const FUNCTION: Field = Field::from_helper(0, nvd::WAIT_REG_MEM_FUNCTION(1), 3);
        /// 0 register, 1 memory.
        pub const MEM_SPACE: Field = Field::from_helper(0, nvd::WAIT_REG_MEM_MEM_SPACE(1), 2);
        /// 0 wait, 1 write the reference to one register and then wait on another.
        pub const OPERATION: Field = Field::from_helper(0, nvd::WAIT_REG_MEM_OPERATION(1), 2);
        /// 0 ME, 1 PFP.
        pub const ENGINE: Field = Field::from_helper(0, nvd::WAIT_REG_MEM_ENGINE(1), 2);
        /// `MEM_SPACE` of a register.
        pub const SPACE_REGISTER: u32 = 0;
        /// `MEM_SPACE` of memory.
        pub const SPACE_MEMORY: u32 = 1;
        /// `OPERATION`: wait only.
        pub const OP_WAIT: u32 = 0;
        /// `OPERATION`: write the reference to the register at `ADDR_LO`, poll `ADDR_HI`.
        pub const OP_WRITE_WAIT: u32 = 1;
        /// Poll address low dword (or the register / the register written).
        pub const ADDR_LO: usize = 1;
        /// Poll address high dword (or the register polled after a write).
        pub const ADDR_HI: usize = 2;
        /// The reference value.
        pub const REFERENCE: usize = 3;
        /// The compare mask.
        pub const MASK: usize = 4;
        /// The poll interval.
        pub const POLL_INTERVAL: usize = 5;
        /// Body dwords.
        pub const BODY: usize = 6;
        /// `FUNCTION` = always.
        pub const FUNC_ALWAYS: u32 = 0;
        /// `FUNCTION` = `==`.
        pub const FUNC_EQ: u32 = 3;
        /// `FUNCTION` = `>=`.
        pub const FUNC_GE: u32 = 5;
        /// The compare functions by value, as `nvd.h`'s comment lists them (SDMA's
        /// `POLL_REGMEM` uses the same encoding).
        pub const FUNCTIONS: [&str; 8] = ["always", "<", "<=", "==", "!=", ">=", ">", "reserved"];
    }

    /// `RELEASE_MEM`: after the work before it, an end-of-pipe event, then a write
    /// (`DATA_SEL`) and an interrupt (`INT_SEL`).
    pub mod release_mem {
        use super::{Field, nvd};
        /// `VGT_EVENT_TYPE` of the event.
        pub const EVENT_TYPE: Field =
            Field::from_helper(0, nvd::PACKET3_RELEASE_MEM_EVENT_TYPE(1), 6);
        /// Event index (5: end of pipe).
        pub const EVENT_INDEX: Field =
            Field::from_helper(0, nvd::PACKET3_RELEASE_MEM_EVENT_INDEX(1), 4);
        /// Destination: 0 memory (MC), 1 memory through L2 (TC_L2); higher values are queue
        /// write pointers.
        pub const DST_SEL: Field = Field::from_helper(1, nvd::PACKET3_RELEASE_MEM_DST_SEL(1), 2);
        /// 0 none, 1 interrupt, 2 interrupt after the write is confirmed, 3 none (see
        /// Linux's `gfx_v11_0_ring_emit_fence`).
        pub const INT_SEL: Field = Field::from_helper(1, nvd::PACKET3_RELEASE_MEM_INT_SEL(1), 3);
        /// What is written (see [`DATA_SELS`]).
        pub const DATA_SEL: Field = Field::from_helper(1, nvd::PACKET3_RELEASE_MEM_DATA_SEL(1), 3);
        /// Address low dword.
        pub const ADDR_LO: usize = 2;
        /// Address high dword.
        pub const ADDR_HI: usize = 3;
        /// Data low dword.
        pub const DATA_LO: usize = 4;
        /// Data high dword.
        pub const DATA_HI: usize = 5;
        /// Interrupt context id.
        pub const INT_CTXID: usize = 6;
        /// Body dwords.
        pub const BODY: usize = 7;
        /// `EVENT_INDEX` of an end-of-pipe event
        /// (`event_index__mec_release_mem__end_of_pipe`).
        pub const EVENT_INDEX_EOP: u32 = 5;
        /// `DATA_SEL` names by value.
        pub const DATA_SELS: [&str; 5] = ["none", "data32", "data64", "gpu clock", "clock counter"];
    }

    /// `EVENT_WRITE`: an event without a write.
    pub mod event_write {
        use super::{Field, nvd};
        /// `VGT_EVENT_TYPE` of the event.
        pub const EVENT_TYPE: Field = Field::from_helper(0, nvd::EVENT_TYPE(1), 6);
        /// Event index.
        pub const EVENT_INDEX: Field = Field::from_helper(0, nvd::EVENT_INDEX(1), 4);
        /// `EVENT_INDEX` of `CS_PARTIAL_FLUSH` (Linux `gfx_v9_0_emit_cs_partial_flush`…).
        pub const EVENT_INDEX_PARTIAL_FLUSH: u32 = 4;
    }

    /// `VGT_EVENT_TYPE` values (the GC registers' enum headers, which are not generated).
    pub mod event {
        /// `CS_PARTIAL_FLUSH`: wait for the compute work before.
        pub const CS_PARTIAL_FLUSH: u32 = 0x07;
        /// `CACHE_FLUSH_AND_INV_TS_EVENT`: the end-of-pipe event of `RELEASE_MEM`.
        pub const CACHE_FLUSH_AND_INV_TS_EVENT: u32 = 0x14;
    }

    /// `INDIRECT_BUFFER`: run `IB_SIZE` dwords at the dword-aligned base.
    pub mod indirect_buffer {
        use super::{Field, nvd};
        /// Base address low dword (bits 1:0 must be 0).
        pub const BASE_LO: usize = 0;
        /// Base address bits 47:32.
        pub const BASE_HI: Field = Field::new(1, 0, 16);
        /// Size in dwords.
        pub const IB_SIZE: Field = Field::new(2, 0, 20);
        /// Chain: the IB replaces the current one instead of returning to it.
        pub const CHAIN: Field = Field::new(2, 20, 1);
        /// Valid.
        pub const VALID: Field = Field::from_helper(2, nvd::INDIRECT_BUFFER_VALID, 1);
        /// The VMID the IB is fetched with.
        pub const VMID: Field = Field::new(2, 24, 4);
        /// Body dwords.
        pub const BODY: usize = 3;
    }

    /// `WRITE_DATA`: write the dwords after the address.
    pub mod write_data {
        use super::{Field, nvd};
        /// 0 register, 1 memory (MC), 2 TC_L2, 5 memory.
        pub const DST_SEL: Field = Field::from_helper(0, nvd::WRITE_DATA_DST_SEL(1), 4);
        /// Write every dword to the same address.
        pub const WR_ONE_ADDR: Field = Field::from_helper(0, nvd::WR_ONE_ADDR, 1);
        /// Wait for the write to be confirmed.
        pub const WR_CONFIRM: Field = Field::from_helper(0, nvd::WR_CONFIRM, 1);
        /// Address low dword (or the register).
        pub const ADDR_LO: usize = 1;
        /// Address high dword.
        pub const ADDR_HI: usize = 2;
        /// The first data dword.
        pub const DATA: usize = 3;
    }

    /// `COPY_DATA` (no helpers in `nvd.h`; positions as Linux's `gfx_v*_ring_emit_*`
    /// sequences and the PM4 packet reference lay them out).
    pub mod copy_data {
        use super::Field;
        /// 0 register, 1 memory, 2 TC_L2, 4 perf counter, 5 immediate, 9 GPU clock.
        pub const SRC_SEL: Field = Field::new(0, 0, 4);
        /// 0 register, 1 memory, 2 TC_L2, 5 memory.
        pub const DST_SEL: Field = Field::new(0, 8, 4);
        /// 64 bits instead of 32.
        pub const COUNT_SEL: Field = Field::new(0, 16, 1);
        /// Wait for the write to be confirmed.
        pub const WR_CONFIRM: Field = Field::new(0, 20, 1);
        /// Source address low dword (or register, or immediate).
        pub const SRC_LO: usize = 1;
        /// Source address high dword.
        pub const SRC_HI: usize = 2;
        /// Destination address low dword (or register).
        pub const DST_LO: usize = 3;
        /// Destination address high dword.
        pub const DST_HI: usize = 4;
        /// Body dwords.
        pub const BODY: usize = 5;
    }

    /// `PRED_EXEC`: the next `EXEC_COUNT` dwords run only on the XCCs `DEVICE_SELECT`
    /// names.
    pub mod pred_exec {
        use super::Field;
        /// Dwords predicated.
        pub const EXEC_COUNT: Field = Field::new(0, 0, 14);
        /// One bit per XCC.
        pub const DEVICE_SELECT: Field = Field::new(0, 24, 8);
        /// Body dwords.
        pub const BODY: usize = 1;
    }

    /// `ACQUIRE_MEM`: GFX9 has `CP_COHER_CNTL` in body dword 0 and 6 body dwords; GFX10+
    /// has `GCR_CNTL` in body dword 6 and 7 (the bits: `nvd::PACKET3_ACQUIRE_MEM_GCR_CNTL_*`,
    /// `soc15d::PACKET3_ACQUIRE_MEM_CP_COHER_CNTL_*`).
    pub mod acquire_mem {
        /// Body dwords of the GFX9 or the GFX10+ layout.
        pub const fn body(gfx9: bool) -> usize {
            if gfx9 { 6 } else { 7 }
        }
        /// GFX9: `CP_COHER_CNTL`.
        pub const COHER_CNTL: usize = 0;
        /// `COHER_SIZE` low dword.
        pub const SIZE_LO: usize = 1;
        /// `COHER_SIZE` high dword.
        pub const SIZE_HI: usize = 2;
        /// `COHER_BASE` low dword (256-byte units).
        pub const BASE_LO: usize = 3;
        /// `COHER_BASE` high dword.
        pub const BASE_HI: usize = 4;
        /// Poll interval.
        pub const POLL_INTERVAL: usize = 5;
        /// GFX10+: `GCR_CNTL`.
        pub const GCR_CNTL: usize = 6;
    }

    /// `DISPATCH_DIRECT`: workgroups in X, Y, Z, then `COMPUTE_DISPATCH_INITIATOR` (the
    /// register's fields, `autogen/tests/integration/packets.rs` checks them against GC 11.0.0's).
    pub mod dispatch_direct {
        use super::Field;
        /// Workgroup counts (or work-items with `USE_THREAD_DIMENSIONS`).
        pub const DIM_X: usize = 0;
        /// The initiator dword.
        pub const INITIATOR: usize = 3;
        /// Body dwords.
        pub const BODY: usize = 4;
        /// `COMPUTE_SHADER_EN`.
        pub const COMPUTE_SHADER_EN: Field = Field::new(INITIATOR, 0, 1);
        /// `FORCE_START_AT_000`: `COMPUTE_START_*` are taken as 0.
        pub const FORCE_START_AT_000: Field = Field::new(INITIATOR, 2, 1);
        /// `USE_THREAD_DIMENSIONS`: the dims count work-items.
        pub const USE_THREAD_DIMENSIONS: Field = Field::new(INITIATOR, 5, 1);
        /// `CS_W32_EN`: wave32 (GFX10+).
        pub const CS_W32_EN: Field = Field::new(INITIATOR, 15, 1);
    }
}

/// SDMA packets (SDMA 6 of navi31 and 7 of RDNA4, `sdma_pkt::v6`; SDMA 4.4 of MI300,
/// `sdma_pkt::v4`). Dword 0 is the header; every field is a generated
/// `_offset`/`_mask`/`_shift` triple. Where SDMA 4 and 6 differ, a function takes `v6`.
pub mod sdma {
    use super::Field;
    use crate::sdma_pkt::{v4, v6};

    /// Header: opcode, bits 7:0.
    pub const OP: Field = Field::from_mask(
        v6::SDMA_PKT_NOP_HEADER_op_offset,
        v6::SDMA_PKT_NOP_HEADER_op_mask,
        v6::SDMA_PKT_NOP_HEADER_op_shift,
    );
    /// Header: sub-opcode, bits 15:8.
    pub const SUB_OP: Field = Field::from_mask(
        v6::SDMA_PKT_NOP_HEADER_sub_op_offset,
        v6::SDMA_PKT_NOP_HEADER_sub_op_mask,
        v6::SDMA_PKT_NOP_HEADER_sub_op_shift,
    );

    /// A header of `op` and `sub_op`.
    #[inline]
    pub const fn header(op: u32, sub_op: u32) -> u32 {
        OP.put(op) | SUB_OP.put(sub_op)
    }

    macro_rules! opcode_names {
        ($fn:ident, $m:ident: $($c:ident)*) => {
            fn $fn(op: u32) -> Option<&'static str> {
                #[deny(unreachable_patterns)]
                match op {
                    $($m::$c => Some(&stringify!($c)["SDMA_OP_".len()..]),)*
                    _ => None,
                }
            }
        };
    }

    opcode_names! { v6_name, v6:
        SDMA_OP_NOP SDMA_OP_COPY SDMA_OP_WRITE SDMA_OP_INDIRECT SDMA_OP_FENCE SDMA_OP_TRAP
        SDMA_OP_SEM SDMA_OP_POLL_REGMEM SDMA_OP_COND_EXE SDMA_OP_ATOMIC SDMA_OP_CONST_FILL
        SDMA_OP_PTEPDE SDMA_OP_TIMESTAMP SDMA_OP_SRBM_WRITE SDMA_OP_PRE_EXE SDMA_OP_GPUVM_INV
        SDMA_OP_GCR_REQ SDMA_OP_DUMMY_TRAP
    }
    opcode_names! { v4_name, v4:
        SDMA_OP_NOP SDMA_OP_COPY SDMA_OP_WRITE SDMA_OP_INDIRECT SDMA_OP_FENCE SDMA_OP_TRAP
        SDMA_OP_SEM SDMA_OP_POLL_REGMEM SDMA_OP_COND_EXE SDMA_OP_ATOMIC SDMA_OP_CONST_FILL
        SDMA_OP_PTEPDE SDMA_OP_TIMESTAMP SDMA_OP_SRBM_WRITE SDMA_OP_PRE_EXE SDMA_OP_DUMMY_TRAP
    }

    /// The name of an opcode (its `SDMA_OP_*` name without the prefix) on SDMA 6/7 (`v6`)
    /// or 4.
    pub fn name(op: u32, v6: bool) -> Option<&'static str> {
        if v6 { v6_name(op) } else { v4_name(op) }
    }

    /// The name of the packet a header starts: `COPY_LINEAR` for the linear copy, else the
    /// opcode's name.
    pub fn packet_name(header: u32, v6: bool) -> Option<&'static str> {
        if OP.get(header) == v6::SDMA_OP_COPY && SUB_OP.get(header) == v6::SDMA_SUBOP_COPY_LINEAR {
            return Some("COPY_LINEAR");
        }
        name(OP.get(header), v6)
    }

    /// Dwords of the packet whose first dwords are `words` (the header first), for the
    /// packets whose length the engines know (`WRITE_UNTILED` carries its count in dword 3,
    /// read as 0 when `words` ends before it). `None` for other opcodes, `GCR_REQ` before
    /// SDMA 5, and no header.
    pub fn packet_dwords(words: &[u32], v6: bool) -> Option<u64> {
        let header = *words.first()?;
        Some(match OP.get(header) {
            v6::SDMA_OP_NOP => 1 + u64::from(nop::COUNT.get(header)),
            v6::SDMA_OP_COPY => copy_linear::DWORDS,
            v6::SDMA_OP_WRITE => {
                write_untiled::DATA as u64 + u64::from(write_untiled::COUNT.at(words)) + 1
            }
            v6::SDMA_OP_INDIRECT => indirect::DWORDS,
            v6::SDMA_OP_FENCE => fence::DWORDS,
            v6::SDMA_OP_TRAP => trap::DWORDS,
            v6::SDMA_OP_POLL_REGMEM => poll_regmem::DWORDS,
            v6::SDMA_OP_CONST_FILL => constant_fill::DWORDS,
            v6::SDMA_OP_TIMESTAMP => timestamp::DWORDS,
            v6::SDMA_OP_GCR_REQ if v6 => gcr_req::DWORDS,
            _ => return None,
        })
    }

    /// `NOP`: `COUNT` dwords follow that are skipped.
    pub mod nop {
        use super::{Field, v6};
        /// Dwords skipped after the header.
        pub const COUNT: Field = Field::from_mask(
            v6::SDMA_PKT_NOP_HEADER_count_offset,
            v6::SDMA_PKT_NOP_HEADER_count_mask,
            v6::SDMA_PKT_NOP_HEADER_count_shift,
        );
    }

    /// `COPY_LINEAR`: copy `count + 1` bytes.
    pub mod copy_linear {
        use super::{Field, v4, v6};
        /// Backwards (SDMA 6; SDMA 4 has no such bit).
        pub const BACKWARDS: Field = Field::from_mask(
            v6::SDMA_PKT_COPY_LINEAR_HEADER_backwards_offset,
            v6::SDMA_PKT_COPY_LINEAR_HEADER_backwards_mask,
            v6::SDMA_PKT_COPY_LINEAR_HEADER_backwards_shift,
        );
        /// Broadcast to two destinations.
        pub const BROADCAST: Field = Field::from_mask(
            v6::SDMA_PKT_COPY_LINEAR_HEADER_broadcast_offset,
            v6::SDMA_PKT_COPY_LINEAR_HEADER_broadcast_mask,
            v6::SDMA_PKT_COPY_LINEAR_HEADER_broadcast_shift,
        );
        /// Bytes − 1: 30 bits on SDMA 6, 22 on SDMA 4.
        pub const fn count(v6: bool) -> Field {
            if v6 {
                Field::from_mask(
                    v6::SDMA_PKT_COPY_LINEAR_COUNT_count_offset,
                    v6::SDMA_PKT_COPY_LINEAR_COUNT_count_mask,
                    v6::SDMA_PKT_COPY_LINEAR_COUNT_count_shift,
                )
            } else {
                Field::from_mask(
                    v4::SDMA_PKT_COPY_LINEAR_COUNT_count_offset,
                    v4::SDMA_PKT_COPY_LINEAR_COUNT_count_mask,
                    v4::SDMA_PKT_COPY_LINEAR_COUNT_count_shift,
                )
            }
        }
        /// The parameter dword (swizzles and cache policies).
        pub const PARAMETER: usize = v6::SDMA_PKT_COPY_LINEAR_PARAMETER_dst_sw_offset as usize;
        /// Source address low dword.
        pub const SRC_LO: usize =
            v6::SDMA_PKT_COPY_LINEAR_SRC_ADDR_LO_src_addr_31_0_offset as usize;
        /// Destination address low dword.
        pub const DST_LO: usize =
            v6::SDMA_PKT_COPY_LINEAR_DST_ADDR_LO_dst_addr_31_0_offset as usize;
        /// Packet dwords.
        pub const DWORDS: u64 = 7;
    }

    /// `WRITE_UNTILED`: write `count + 1` dwords from dword [`DATA`] on.
    pub mod write_untiled {
        use super::{Field, v6};
        /// Destination address low dword.
        pub const DST_LO: usize =
            v6::SDMA_PKT_WRITE_UNTILED_DST_ADDR_LO_dst_addr_31_0_offset as usize;
        /// Dwords − 1.
        pub const COUNT: Field = Field::from_mask(
            v6::SDMA_PKT_WRITE_UNTILED_DW_3_count_offset,
            v6::SDMA_PKT_WRITE_UNTILED_DW_3_count_mask,
            v6::SDMA_PKT_WRITE_UNTILED_DW_3_count_shift,
        );
        /// The first data dword.
        pub const DATA: usize = v6::SDMA_PKT_WRITE_UNTILED_DATA0_data0_offset as usize;
    }

    /// `INDIRECT`: run an IB of `IB_SIZE` dwords.
    pub mod indirect {
        use super::{Field, v6};
        /// The VMID the IB is fetched with.
        pub const VMID: Field = Field::from_mask(
            v6::SDMA_PKT_INDIRECT_HEADER_vmid_offset,
            v6::SDMA_PKT_INDIRECT_HEADER_vmid_mask,
            v6::SDMA_PKT_INDIRECT_HEADER_vmid_shift,
        );
        /// Base address low dword.
        pub const BASE_LO: usize = v6::SDMA_PKT_INDIRECT_BASE_LO_ib_base_31_0_offset as usize;
        /// Size in dwords.
        pub const IB_SIZE: Field = Field::from_mask(
            v6::SDMA_PKT_INDIRECT_IB_SIZE_ib_size_offset,
            v6::SDMA_PKT_INDIRECT_IB_SIZE_ib_size_mask,
            v6::SDMA_PKT_INDIRECT_IB_SIZE_ib_size_shift,
        );
        /// Packet dwords.
        pub const DWORDS: u64 = 6;
    }

    /// `FENCE`: write a dword.
    pub mod fence {
        use super::v6;
        /// Address low dword.
        pub const ADDR_LO: usize = v6::SDMA_PKT_FENCE_ADDR_LO_addr_31_0_offset as usize;
        /// The value.
        pub const DATA: usize = v6::SDMA_PKT_FENCE_DATA_data_offset as usize;
        /// Packet dwords.
        pub const DWORDS: u64 = 4;
    }

    /// `TRAP`: an interrupt carrying a context.
    pub mod trap {
        use super::{Field, v6};
        /// The 28-bit context.
        pub const INT_CONTEXT: Field = Field::from_mask(
            v6::SDMA_PKT_TRAP_INT_CONTEXT_int_context_offset,
            v6::SDMA_PKT_TRAP_INT_CONTEXT_int_context_mask,
            v6::SDMA_PKT_TRAP_INT_CONTEXT_int_context_shift,
        );
        /// Packet dwords.
        pub const DWORDS: u64 = 2;
    }

    /// `POLL_REGMEM`: wait until `(value & MASK) FUNC (VALUE & MASK)` (the compare
    /// functions of PM4's `WAIT_REG_MEM`).
    pub mod poll_regmem {
        use super::{Field, v6};
        /// Write the reference to the register at `ADDR_HI`, then poll the one at `ADDR_LO`.
        pub const HDP_FLUSH: Field = Field::from_mask(
            v6::SDMA_PKT_POLL_REGMEM_HEADER_hdp_flush_offset,
            v6::SDMA_PKT_POLL_REGMEM_HEADER_hdp_flush_mask,
            v6::SDMA_PKT_POLL_REGMEM_HEADER_hdp_flush_shift,
        );
        /// Compare function.
        pub const FUNC: Field = Field::from_mask(
            v6::SDMA_PKT_POLL_REGMEM_HEADER_func_offset,
            v6::SDMA_PKT_POLL_REGMEM_HEADER_func_mask,
            v6::SDMA_PKT_POLL_REGMEM_HEADER_func_shift,
        );
        /// Poll memory (else a register).
        pub const MEM_POLL: Field = Field::from_mask(
            v6::SDMA_PKT_POLL_REGMEM_HEADER_mem_poll_offset,
            v6::SDMA_PKT_POLL_REGMEM_HEADER_mem_poll_mask,
            v6::SDMA_PKT_POLL_REGMEM_HEADER_mem_poll_shift,
        );
        /// Address low dword (a register's byte address with `HDP_FLUSH`).
        pub const ADDR_LO: usize = v6::SDMA_PKT_POLL_REGMEM_ADDR_LO_addr_31_0_offset as usize;
        /// Address high dword (the register written, with `HDP_FLUSH`).
        pub const ADDR_HI: usize = v6::SDMA_PKT_POLL_REGMEM_ADDR_HI_addr_63_32_offset as usize;
        /// The reference value.
        pub const VALUE: usize = v6::SDMA_PKT_POLL_REGMEM_VALUE_value_offset as usize;
        /// The compare mask.
        pub const MASK: usize = v6::SDMA_PKT_POLL_REGMEM_MASK_mask_offset as usize;
        /// Poll interval.
        pub const INTERVAL: Field = Field::from_mask(
            v6::SDMA_PKT_POLL_REGMEM_DW5_interval_offset,
            v6::SDMA_PKT_POLL_REGMEM_DW5_interval_mask,
            v6::SDMA_PKT_POLL_REGMEM_DW5_interval_shift,
        );
        /// Retries (0xfff: forever).
        pub const RETRY_COUNT: Field = Field::from_mask(
            v6::SDMA_PKT_POLL_REGMEM_DW5_retry_count_offset,
            v6::SDMA_PKT_POLL_REGMEM_DW5_retry_count_mask,
            v6::SDMA_PKT_POLL_REGMEM_DW5_retry_count_shift,
        );
        /// Packet dwords.
        pub const DWORDS: u64 = 6;
    }

    /// `CONSTANT_FILL`: fill `count + 1` bytes with a pattern.
    pub mod constant_fill {
        use super::{Field, v4, v6};
        /// Pattern size: 0 byte, 1 16-bit, 2 dword, 3 reserved.
        pub const FILLSIZE: Field = Field::from_mask(
            v6::SDMA_PKT_CONSTANT_FILL_HEADER_fillsize_offset,
            v6::SDMA_PKT_CONSTANT_FILL_HEADER_fillsize_mask,
            v6::SDMA_PKT_CONSTANT_FILL_HEADER_fillsize_shift,
        );
        /// `FILLSIZE` of a dword pattern.
        pub const FILLSIZE_DWORD: u32 = 2;
        /// Destination address low dword.
        pub const DST_LO: usize =
            v6::SDMA_PKT_CONSTANT_FILL_DST_ADDR_LO_dst_addr_31_0_offset as usize;
        /// The pattern.
        pub const DATA: usize = v6::SDMA_PKT_CONSTANT_FILL_DATA_src_data_31_0_offset as usize;
        /// Bytes − 1: 30 bits on SDMA 6, 22 on SDMA 4.
        pub const fn count(v6: bool) -> Field {
            if v6 {
                Field::from_mask(
                    v6::SDMA_PKT_CONSTANT_FILL_COUNT_count_offset,
                    v6::SDMA_PKT_CONSTANT_FILL_COUNT_count_mask,
                    v6::SDMA_PKT_CONSTANT_FILL_COUNT_count_shift,
                )
            } else {
                Field::from_mask(
                    v4::SDMA_PKT_CONSTANT_FILL_COUNT_count_offset,
                    v4::SDMA_PKT_CONSTANT_FILL_COUNT_count_mask,
                    v4::SDMA_PKT_CONSTANT_FILL_COUNT_count_shift,
                )
            }
        }
        /// Packet dwords.
        pub const DWORDS: u64 = 5;
    }

    /// `TIMESTAMP` (sub-ops `SDMA_SUBOP_TIMESTAMP_*`).
    pub mod timestamp {
        use super::v6;
        /// Address low dword.
        pub const ADDR_LO: usize =
            v6::SDMA_PKT_TIMESTAMP_GET_GLOBAL_WRITE_ADDR_LO_write_addr_31_3_offset as usize;
        /// Packet dwords.
        pub const DWORDS: u64 = 3;
    }

    /// `GCR_REQ` (SDMA 5+): a cache operation over an address range.
    pub mod gcr_req {
        /// Packet dwords.
        pub const DWORDS: u64 = 5;
    }
}

/// AQL packets: the 64-byte HSA packets of `hsa.h` (not among the amdgpu headers; the
/// layout is the HSA runtime specification's) and AMD's vendor packet of
/// `amd_hsa_queue`/ROCr (`AMD_AQL_FORMAT_PM4_IB`). Dword 0 is the packet's first dword,
/// whose low 16 bits are the header.
pub mod aql {
    use super::Field;

    /// Dwords of a packet.
    pub const DWORDS: usize = 16;

    /// `HSA_PACKET_TYPE_VENDOR_SPECIFIC`.
    pub const VENDOR_SPECIFIC: u32 = 0;
    /// `HSA_PACKET_TYPE_INVALID`: the slot is not written yet.
    pub const INVALID: u32 = 1;
    /// `HSA_PACKET_TYPE_KERNEL_DISPATCH`.
    pub const KERNEL_DISPATCH: u32 = 2;
    /// `HSA_PACKET_TYPE_BARRIER_AND`.
    pub const BARRIER_AND: u32 = 3;
    /// `HSA_PACKET_TYPE_AGENT_DISPATCH`.
    pub const AGENT_DISPATCH: u32 = 4;
    /// `HSA_PACKET_TYPE_BARRIER_OR`.
    pub const BARRIER_OR: u32 = 5;
    /// Packet type names by value (`hsa_packet_type_t`).
    pub const TYPE_NAMES: [&str; 6] = [
        "VENDOR_SPECIFIC",
        "INVALID",
        "KERNEL_DISPATCH",
        "BARRIER_AND",
        "AGENT_DISPATCH",
        "BARRIER_OR",
    ];

    /// The 16-bit header.
    pub const HEADER: Field = Field::new(0, 0, 16);
    /// Header: packet type.
    pub const TYPE: Field = Field::new(0, 0, 8);
    /// Header: barrier (wait for the packets before).
    pub const BARRIER: Field = Field::new(0, 8, 1);
    /// Header: acquire fence scope.
    pub const ACQUIRE_FENCE_SCOPE: Field = Field::new(0, 9, 2);
    /// Header: release fence scope.
    pub const RELEASE_FENCE_SCOPE: Field = Field::new(0, 11, 2);
    /// Fence scope `HSA_FENCE_SCOPE_SYSTEM`.
    pub const SCOPE_SYSTEM: u32 = 2;
    /// Fence scope names by value.
    pub const SCOPE_NAMES: [&str; 4] = ["none", "agent", "system", "reserved"];
    /// The completion signal's low dword (every packet type but the vendor packet's
    /// formats other than PM4-IB).
    pub const COMPLETION_SIGNAL: usize = 14;

    /// A header of `kind` with the barrier bit and system-scope acquire and release fences.
    #[inline]
    pub const fn header(kind: u32) -> u32 {
        TYPE.put(kind)
            | BARRIER.put(1)
            | ACQUIRE_FENCE_SCOPE.put(SCOPE_SYSTEM)
            | RELEASE_FENCE_SCOPE.put(SCOPE_SYSTEM)
    }

    /// `hsa_kernel_dispatch_packet_t`.
    pub mod dispatch {
        use super::Field;
        /// `setup`: dimensions (1 to 3).
        pub const DIMENSIONS: Field = Field::new(0, 16, 2);
        /// `workgroup_size_x`.
        pub const WORKGROUP_X: Field = Field::new(1, 0, 16);
        /// `workgroup_size_y`.
        pub const WORKGROUP_Y: Field = Field::new(1, 16, 16);
        /// `workgroup_size_z`.
        pub const WORKGROUP_Z: Field = Field::new(2, 0, 16);
        /// `grid_size_x` (then y, z).
        pub const GRID_X: usize = 3;
        /// `private_segment_size`.
        pub const PRIVATE_SEGMENT_SIZE: usize = 6;
        /// `group_segment_size`.
        pub const GROUP_SEGMENT_SIZE: usize = 7;
        /// `kernel_object` low dword.
        pub const KERNEL_OBJECT: usize = 8;
        /// `kernarg_address` low dword.
        pub const KERNARG: usize = 10;
    }

    /// `hsa_barrier_and_packet_t` / `hsa_barrier_or_packet_t`.
    pub mod barrier {
        /// `dep_signal[0]` low dword; five 64-bit handles follow each other.
        pub const DEP_SIGNAL: usize = 2;
        /// Number of dependency signals.
        pub const DEP_SIGNALS: usize = 5;
    }

    /// AMD's vendor packet (`hsa_ext_amd_aql_pm4_packet_t`): a PM4 command in dwords 1..5.
    pub mod vendor {
        use super::Field;
        /// The AMD packet format, bits 31:16 of dword 0.
        pub const AMD_FORMAT: Field = Field::new(0, 16, 16);
        /// `AMD_AQL_FORMAT_PM4_IB`: dwords 1..5 are a PM4 `INDIRECT_BUFFER`.
        pub const FORMAT_PM4_IB: u32 = 1;
        /// The PM4 command's first dword (its header).
        pub const PM4: usize = 1;
        /// `dw_cnt_remain`: dwords left in the packet after the command.
        pub const DW_CNT_REMAIN: usize = 5;
        /// The value of `dw_cnt_remain` after a 4-dword IB command.
        pub const DW_CNT_REMAIN_IB: u32 = 10;
    }
}
