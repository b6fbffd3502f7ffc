//! Code objects from LLVM's assembler: linked by `am-isa` or by `ld.lld-22`, then read back.
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;
use std::process::Command;

use am_isa::code_object::{CodeObject, kcp, link, read_metadata, reloc};
use am_isa::{Error, GfxTarget};

/// A gfx1100 kernel that reaches a table in `.rodata` PC-relatively (two `REL32` relocations)
/// and whose descriptor points at its code (a `REL64`), with its metadata.
const KERNEL: &str = r#"
.amdgcn_target "amdgcn-amd-amdhsa--gfx1100"
.text
.globl copy
.p2align 8
.type copy,@function
copy:
  s_load_b64 s[2:3], s[0:1], 0x0
  s_getpc_b64 s[4:5]
  s_add_u32 s4, s4, table@rel32@lo+4
  s_addc_u32 s5, s5, table@rel32@hi+12
  s_endpgm
.rodata
.p2align 4
table:
  .long 1, 2, 3, 4
ABSOLUTE
.p2align 6
.amdhsa_kernel copy
  .amdhsa_next_free_vgpr 1
  .amdhsa_next_free_sgpr 6
  .amdhsa_user_sgpr_kernarg_segment_ptr 1
  .amdhsa_user_sgpr_count 2
  .amdhsa_kernarg_size 8
  .amdhsa_wavefront_size32 1
.end_amdhsa_kernel
.amdgpu_metadata
---
amdhsa.version: [ 1, 2 ]
amdhsa.kernels:
  - .name: copy
    .symbol: copy.kd
    .kernarg_segment_size: 8
    .kernarg_segment_align: 8
    .group_segment_fixed_size: 0
    .private_segment_fixed_size: 0
    .wavefront_size: 32
    .sgpr_count: 6
    .vgpr_count: 1
    .max_flat_workgroup_size: 64
    .reqd_workgroup_size: [ 64, 1, 1 ]
    .args:
      - .name: out
        .offset: 0
        .size: 8
        .value_kind: global_buffer
        .address_space: global
...
.end_amdgpu_metadata
"#;

fn tempdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("am-isa-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn run(cmd: &mut Command) {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{cmd:?}: {e} (scripts/setup installs LLVM 22)"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// LLVM's relocatable object of `KERNEL`, with `absolute` where it says ABSOLUTE.
fn object(tag: &str, absolute: &str) -> (PathBuf, Vec<u8>) {
    let dir = tempdir(tag);
    let (s, o) = (dir.join("k.s"), dir.join("k.o"));
    std::fs::write(&s, KERNEL.replace("ABSOLUTE", absolute)).unwrap();
    run(Command::new("llvm-mc-22")
        .args([
            "-triple=amdgcn-amd-amdhsa",
            "-mcpu=gfx1100",
            "-filetype=obj",
        ])
        .arg(&s)
        .arg("-o")
        .arg(&o));
    let bytes = std::fs::read(&o).unwrap();
    (dir, bytes)
}

#[test]
fn linked_objects_read_back_with_descriptor_metadata_and_resolved_relocations() {
    let (_, obj) = object("link", "");
    let bytes = link(&obj, "copy").unwrap();
    let co = CodeObject::parse(&bytes, "copy").unwrap();
    assert_eq!(
        co.target,
        Some(GfxTarget::Gfx1100),
        "e_flags keep LLVM's target"
    );
    assert!(co.relocations.is_empty(), "nothing is left to a loader");

    let k = co.kernel("copy").unwrap();
    assert_eq!(
        k.entry, co.text_address,
        "the REL64 entry offset points at the code"
    );
    assert_eq!(k.descriptor.kernarg_size, 8);
    assert_eq!(k.descriptor.wave_size(), 32);
    assert_eq!(k.descriptor.user_sgpr_count(), 2);
    assert_eq!(
        k.descriptor.kernel_code_properties & kcp::ENABLE_SGPR_KERNARG_SEGMENT_PTR,
        kcp::ENABLE_SGPR_KERNARG_SEGMENT_PTR
    );

    // s_add_u32/s_addc_u32 take the table's distance from the PC s_getpc_b64 gave (the end of
    // s_getpc_b64, 12 bytes in); the table is the 64 bytes before the descriptor.
    let word = |o: usize| u64::from(u32::from_le_bytes(co.text[o..o + 4].try_into().unwrap()));
    let distance = (word(0x18) << 32 | word(0x10)) as i64;
    let table = co
        .text_address
        .wrapping_add(0xc)
        .wrapping_add_signed(distance);
    assert_eq!(table, k.descriptor_address - 0x40);
    let image = co.image().unwrap();
    assert_eq!(
        image[table as usize..table as usize + 8],
        [1, 0, 0, 0, 2, 0, 0, 0]
    );

    let md = co.kernel_metadata("copy").unwrap();
    assert_eq!(md.symbol, "copy.kd");
    assert_eq!(md.reqd_workgroup_size, Some([64, 1, 1]));
    assert_eq!(md.kernarg_segment_align, 8);
    assert_eq!(md.args.len(), 1);
    assert_eq!(
        (md.args[0].name.as_str(), md.args[0].value_kind.as_str()),
        ("out", "global_buffer")
    );
    assert!(!md.args[0].hidden());
    assert_eq!(read_metadata(&bytes, "copy").unwrap(), co.metadata);

    let e = co.kernel("paste").unwrap_err().to_string();
    assert!(
        e.contains("no kernel named paste") && e.contains("copy"),
        "{e}"
    );
}

#[test]
fn the_linker_refuses_what_needs_a_dynamic_loader_and_what_is_not_an_object() {
    // An absolute address in .rodata needs a loader's relocation.
    let (_, obj) = object("absolute", ".quad table");
    let e = link(&obj, "copy").unwrap_err().to_string();
    assert!(
        e.contains("code object copy") && e.contains("needs a dynamic loader"),
        "{e}"
    );
    let e = link(b"\x7fELF but not really", "junk").unwrap_err();
    assert!(
        matches!(e, Error::CodeObject { ref what, .. } if what == "junk"),
        "{e}"
    );
}

#[test]
fn dynamic_relocations_of_a_shared_object_are_applied_for_the_load_address() {
    // ld.lld-22 turns an absolute `.quad table` in writable data into an R_AMDGPU_RELATIVE64.
    let (dir, _) = object("lld", ".data\n.quad table\n.rodata");
    let so = dir.join("k.so");
    run(Command::new("ld.lld-22")
        .args(["-shared", "--no-undefined"])
        .arg(dir.join("k.o"))
        .arg("-o")
        .arg(&so));
    let bytes = std::fs::read(&so).unwrap();
    let co = CodeObject::parse(&bytes, "k.so").unwrap();
    let r = co
        .relocations
        .iter()
        .find(|r| r.kind == reloc::R_AMDGPU_RELATIVE64)
        .unwrap();
    let mut image = co.image().unwrap();
    let base = 0x7f00_0000_0000u64;
    co.relocate(&mut image, base).unwrap();
    let at = r.offset as usize;
    let value = u64::from_le_bytes(image[at..at + 8].try_into().unwrap());
    assert_eq!(value, base.wrapping_add_signed(r.addend));
    // The word now holds the table's GPU address.
    let table = (value - base) as usize;
    assert_eq!(image[table..table + 8], [1, 0, 0, 0, 2, 0, 0, 0]);
}
