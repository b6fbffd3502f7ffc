//! The hand-kept packet layouts of `am_autogen::packets` against the generated tables, and
//! against the bit positions the runtime, mock and `am ring` used before they shared them.

use am_autogen::packets::{Field, aql, bits, pm4, qword, sdma};
use am_autogen::pm4::{nvd, soc15d};
use am_autogen::regs::{self, IpVersion, RegIp, gc};
use am_autogen::sdma_pkt::{v4, v6};

#[test]
fn bits_extracts_a_field_of_any_width() {
    assert_eq!(bits(0xabcd_1234, 16, 16), 0xabcd);
    assert_eq!(bits(0xabcd_1234, 0, 4), 0x4);
    assert_eq!(bits(0x8000_0000, 31, 1), 1);
    assert_eq!(bits(0xdead_beef, 0, 32), 0xdead_beef);
    assert_eq!(qword(0x9abc_def0, 0x1234_5678), 0x1234_5678_9abc_def0);
}

#[test]
fn field_puts_gets_and_masks() {
    let f = Field::new(2, 24, 4);
    assert_eq!(f.mask(), 0x0f00_0000);
    assert_eq!(f.put(0x1f), 0x0f00_0000, "bits above the width are dropped");
    assert_eq!(f.get(f.put(9) | 0x00ff_ffff), 9);
    assert_eq!(f.at(&[0, 0, 0x0500_0000]), 5);
    assert_eq!(f.at(&[0x0500_0000]), 0, "a missing dword reads as 0");
    assert_eq!(Field::from_mask(1, 0x3fff_ffff, 0), Field::new(1, 0, 30));
    assert_eq!(Field::from_helper(0, 1 << 23, 1), Field::new(0, 23, 1));
    assert!(Field::new(0, 31, 1).is_set(0x8000_0000));
}

#[test]
fn pm4_header_fields_match_the_header_macros() {
    for h in [
        0xc005_3c00u32,
        pm4::NOP_FILLER,
        nvd::PACKET3(0x49, 6),
        0x8000_0000,
    ] {
        assert_eq!(pm4::TYPE.get(h), nvd::CP_PACKET_GET_TYPE(h), "{h:#x}");
        assert_eq!(pm4::COUNT.get(h), nvd::CP_PACKET_GET_COUNT(h), "{h:#x}");
        assert_eq!(pm4::OPCODE.get(h), nvd::CP_PACKET3_GET_OPCODE(h), "{h:#x}");
    }
    assert_eq!(pm4::NOP_FILLER, 0xffff_1000);
    assert_eq!(pm4::header(nvd::PACKET3_WAIT_REG_MEM, 6), 0xc005_3c00);
}

#[test]
fn pm4_names_come_from_the_opcode_constants() {
    assert_eq!(pm4::name(nvd::PACKET3_WAIT_REG_MEM), Some("WAIT_REG_MEM"));
    assert_eq!(
        pm4::name(0x3f),
        Some("INDIRECT_BUFFER"),
        "not its COND_ alias"
    );
    assert_eq!(pm4::name(0x33), Some("INDIRECT_BUFFER_CNST"));
    assert_eq!(pm4::name(nvd::PACKET3_SET_SH_REG), Some("SET_SH_REG"));
    assert_eq!(
        pm4::name(soc15d::PACKET3_RUN_CLEANER_SHADER),
        Some("RUN_CLEANER_SHADER")
    );
    assert_eq!(pm4::name(0xee), None);
    // Every soc15d opcode has a name (the compute packets are common to both headers).
    for op in [
        soc15d::PACKET3_NOP,
        soc15d::PACKET3_ACQUIRE_MEM,
        soc15d::PACKET3_RELEASE_MEM,
        soc15d::PACKET3_DISPATCH_DIRECT,
        soc15d::PACKET3_PRED_EXEC,
        soc15d::PACKET3_MAP_QUEUES,
    ] {
        assert!(pm4::name(op).is_some(), "{op:#x}");
    }
}

#[test]
fn pm4_fields_are_where_the_hand_written_code_had_them() {
    use pm4::*;
    assert_eq!(
        wait_reg_mem::FUNCTION.put(5) | wait_reg_mem::MEM_SPACE.put(1),
        5 | 1 << 4
    );
    assert_eq!(wait_reg_mem::OPERATION.put(1), 1 << 6);
    assert_eq!(
        (wait_reg_mem::FUNCTION.width, wait_reg_mem::MEM_SPACE.width),
        (3, 2)
    );
    assert_eq!(release_mem::DATA_SEL, Field::new(1, 29, 3));
    assert_eq!(release_mem::INT_SEL, Field::new(1, 24, 3));
    assert_eq!(release_mem::DST_SEL, Field::new(1, 16, 2));
    assert_eq!(release_mem::EVENT_TYPE, Field::new(0, 0, 6));
    assert_eq!(release_mem::EVENT_INDEX, Field::new(0, 8, 4));
    // GFX9's names for the same RELEASE_MEM fields agree.
    assert_eq!(soc15d::DATA_SEL(1), release_mem::DATA_SEL.put(1));
    assert_eq!(soc15d::INT_SEL(1), release_mem::INT_SEL.put(1));
    assert_eq!(soc15d::DST_SEL(1), release_mem::DST_SEL.put(1));
    assert_eq!(event_write::EVENT_INDEX.put(4), 4 << 8);
    assert_eq!(indirect_buffer::VALID, Field::new(2, 23, 1));
    assert_eq!(write_data::DST_SEL, Field::new(0, 8, 4));
    assert_eq!(write_data::WR_ONE_ADDR, Field::new(0, 16, 1));
}

#[test]
fn dispatch_initiator_bits_are_the_registers_fields() {
    let gc11 = regs::require_table(RegIp::Gc, IpVersion::new(11, 0, 0)).unwrap();
    let gc943 = regs::require_table(RegIp::Gc, IpVersion::new(9, 4, 3)).unwrap();
    use pm4::dispatch_direct::*;
    let fields = [
        ("COMPUTE_SHADER_EN", COMPUTE_SHADER_EN, true),
        ("FORCE_START_AT_000", FORCE_START_AT_000, true),
        ("USE_THREAD_DIMENSIONS", USE_THREAD_DIMENSIONS, true),
        // GC 9 is wave64 only: no CS_W32_EN.
        ("CS_W32_EN", CS_W32_EN, false),
    ];
    for (name, f, on_gc9) in fields {
        let tables = if on_gc9 {
            vec![gc11, gc943]
        } else {
            vec![gc11]
        };
        for t in tables {
            let r = t.resolve(gc::COMPUTE_DISPATCH_INITIATOR).unwrap();
            let reg = r.field(name).unwrap();
            assert_eq!(
                (u32::from(reg.shift), reg.mask),
                (f.shift, f.mask()),
                "{name}"
            );
        }
    }
}

#[test]
fn sdma_fields_come_from_the_generated_triples_and_agree_on_sdma4() {
    use sdma::*;
    assert_eq!(copy_linear::count(true), Field::new(1, 0, 30));
    assert_eq!(copy_linear::count(false), Field::new(1, 0, 22));
    assert_eq!(constant_fill::count(true), Field::new(4, 0, 30));
    assert_eq!(constant_fill::count(false), Field::new(4, 0, 22));
    assert_eq!(copy_linear::BROADCAST, Field::new(0, 27, 1));
    assert_eq!(copy_linear::BACKWARDS, Field::new(0, 25, 1));
    assert_eq!(poll_regmem::FUNC, Field::new(0, 28, 3));
    assert_eq!(poll_regmem::MEM_POLL, Field::new(0, 31, 1));
    assert_eq!(poll_regmem::HDP_FLUSH, Field::new(0, 26, 1));
    assert_eq!(poll_regmem::RETRY_COUNT, Field::new(5, 16, 12));
    assert_eq!(nop::COUNT, Field::new(0, 16, 14));
    assert_eq!(indirect::VMID, Field::new(0, 16, 4));
    assert_eq!(trap::INT_CONTEXT, Field::new(1, 0, 28));
    // The fields taken from the SDMA 6 header are the same in SDMA 4's.
    let same = [
        (
            indirect::IB_SIZE,
            Field::from_mask(
                v4::SDMA_PKT_INDIRECT_IB_SIZE_ib_size_offset,
                v4::SDMA_PKT_INDIRECT_IB_SIZE_ib_size_mask,
                v4::SDMA_PKT_INDIRECT_IB_SIZE_ib_size_shift,
            ),
        ),
        (
            write_untiled::COUNT,
            Field::from_mask(
                v4::SDMA_PKT_WRITE_UNTILED_DW_3_count_offset,
                v4::SDMA_PKT_WRITE_UNTILED_DW_3_count_mask,
                v4::SDMA_PKT_WRITE_UNTILED_DW_3_count_shift,
            ),
        ),
        (
            poll_regmem::FUNC,
            Field::from_mask(
                v4::SDMA_PKT_POLL_REGMEM_HEADER_func_offset,
                v4::SDMA_PKT_POLL_REGMEM_HEADER_func_mask,
                v4::SDMA_PKT_POLL_REGMEM_HEADER_func_shift,
            ),
        ),
        (
            poll_regmem::HDP_FLUSH,
            Field::from_mask(
                v4::SDMA_PKT_POLL_REGMEM_HEADER_hdp_flush_offset,
                v4::SDMA_PKT_POLL_REGMEM_HEADER_hdp_flush_mask,
                v4::SDMA_PKT_POLL_REGMEM_HEADER_hdp_flush_shift,
            ),
        ),
        (
            constant_fill::FILLSIZE,
            Field::from_mask(
                v4::SDMA_PKT_CONSTANT_FILL_HEADER_fillsize_offset,
                v4::SDMA_PKT_CONSTANT_FILL_HEADER_fillsize_mask,
                v4::SDMA_PKT_CONSTANT_FILL_HEADER_fillsize_shift,
            ),
        ),
        (
            trap::INT_CONTEXT,
            Field::from_mask(
                v4::SDMA_PKT_TRAP_INT_CONTEXT_int_context_offset,
                v4::SDMA_PKT_TRAP_INT_CONTEXT_int_context_mask,
                v4::SDMA_PKT_TRAP_INT_CONTEXT_int_context_shift,
            ),
        ),
        (
            indirect::VMID,
            Field::from_mask(
                v4::SDMA_PKT_INDIRECT_HEADER_vmid_offset,
                v4::SDMA_PKT_INDIRECT_HEADER_vmid_mask,
                v4::SDMA_PKT_INDIRECT_HEADER_vmid_shift,
            ),
        ),
    ];
    for (ours, sdma4) in same {
        assert_eq!(ours, sdma4);
    }
    assert_eq!(
        (v4::SDMA_OP_POLL_REGMEM, v4::SDMA_OP_CONST_FILL),
        (v6::SDMA_OP_POLL_REGMEM, v6::SDMA_OP_CONST_FILL)
    );
}

#[test]
fn sdma_names_and_lengths() {
    use sdma::*;
    assert_eq!(name(v6::SDMA_OP_GCR_REQ, true), Some("GCR_REQ"));
    assert_eq!(name(0x11, false), None, "SDMA 4 has no GCR_REQ");
    assert_eq!(name(0x10, false), Some("DUMMY_TRAP"));
    assert_eq!(name(0x10, true), Some("GPUVM_INV"));
    assert_eq!(name(0x3f, true), None);
    assert_eq!(packet_name(header(1, 0), true), Some("COPY_LINEAR"));
    assert_eq!(packet_name(header(1, 4), true), Some("COPY"));
    assert_eq!(packet_dwords(&[header(0, 0) | 3 << 16], true), Some(4));
    assert_eq!(
        packet_dwords(&[header(2, 0), 0, 0, 1], true),
        Some(6),
        "WRITE of 2 dwords"
    );
    assert_eq!(
        packet_dwords(&[header(2, 0)], true),
        Some(5),
        "count not there yet"
    );
    assert_eq!(packet_dwords(&[header(17, 0)], false), None);
    assert_eq!(packet_dwords(&[header(17, 0)], true), Some(5));
    assert_eq!(packet_dwords(&[header(0x3f, 0)], true), None);
    assert_eq!(packet_dwords(&[], true), None);
}

#[test]
fn aql_header_and_fields() {
    assert_eq!(
        aql::header(aql::KERNEL_DISPATCH),
        2 | 1 << 8 | 2 << 9 | 2 << 11
    );
    let dw0 = aql::header(aql::VENDOR_SPECIFIC) | 1 << 16;
    assert_eq!(aql::vendor::AMD_FORMAT.get(dw0), aql::vendor::FORMAT_PM4_IB);
    assert_eq!(aql::TYPE.get(dw0), aql::VENDOR_SPECIFIC);
    let dw1 = 64 | 4 << 16;
    assert_eq!(
        (
            aql::dispatch::WORKGROUP_X.get(dw1),
            aql::dispatch::WORKGROUP_Y.get(dw1)
        ),
        (64, 4)
    );
    assert_eq!(aql::TYPE_NAMES[aql::BARRIER_OR as usize], "BARRIER_OR");
}
