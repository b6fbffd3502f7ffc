//! Linking without a linker: the relocatable AMDGPU object LLVM emits becomes an HSA code
//! object — an `ET_DYN` ELF with the layout a loader expects (AMDGPUUsage, "ELF Code
//! Object"): a read-only segment with the metadata note, `.dynsym`, `.hash`, `.dynstr` and
//! the kernel descriptors (`NAME.kd`, 64 bytes in `.rodata`), an executable segment with
//! `.text`, and a writable one with `.dynamic`. PC-relative relocations (the descriptor's
//! `kernel_code_entry_byte_offset` is one) are resolved here; absolute ones would need a
//! loader's dynamic relocations and are refused.
//!
//! Running `ld.lld-22` for this costs about 18 ms per kernel (process start-up); this takes
//! microseconds.

use goblin::elf::Elf;
use goblin::elf::header::{EM_AMDGPU, ET_DYN, ET_REL};
use goblin::elf::section_header::*;
use goblin::elf::sym::{STB_LOCAL, STT_SECTION};

use crate::Error;

const PAGE: u64 = 0x1000;
const SHN_ABS: usize = 0xfff1;

// AMDGPU relocation types (AMDGPUUsage, "Relocation Records").
const R_AMDGPU_NONE: u32 = 0;
const R_AMDGPU_REL32: u32 = 4;
const R_AMDGPU_REL64: u32 = 5;
const R_AMDGPU_REL32_LO: u32 = 10;
const R_AMDGPU_REL32_HI: u32 = 11;
const R_AMDGPU_REL16: u32 = 14;

struct Placed {
    /// Index of the section in the object.
    obj: usize,
    name: String,
    kind: u32,
    flags: u64,
    align: u64,
    data: Vec<u8>,
    offset: u64,
    addr: u64,
    /// Index in the output.
    out: usize,
}

fn align_up(x: u64, a: u64) -> u64 {
    x.next_multiple_of(a.max(1))
}

/// The SysV ELF hash of a symbol name.
fn elf_hash(name: &[u8]) -> u32 {
    let mut h: u32 = 0;
    for &c in name {
        h = (h << 4).wrapping_add(u32::from(c));
        let g = h & 0xf000_0000;
        if g != 0 {
            h ^= g >> 24;
        }
        h &= !g;
    }
    h
}

struct Sym {
    name: String,
    info: u8,
    other: u8,
    shndx: u16,
    value: u64,
    size: u64,
}

fn push_sym(out: &mut Vec<u8>, name_off: u32, s: &Sym) {
    out.extend(name_off.to_le_bytes());
    out.push(s.info);
    out.push(s.other);
    out.extend(s.shndx.to_le_bytes());
    out.extend(s.value.to_le_bytes());
    out.extend(s.size.to_le_bytes());
}

struct Strtab(Vec<u8>);
impl Strtab {
    fn new() -> Strtab {
        Strtab(vec![0])
    }
    fn add(&mut self, s: &str) -> u32 {
        if s.is_empty() {
            return 0;
        }
        let o = self.0.len() as u32;
        self.0.extend(s.as_bytes());
        self.0.push(0);
        o
    }
}

/// Links the relocatable object `obj` (from [`crate::codegen`]) into a loadable HSA code object.
/// `what` names the kernel in errors.
pub fn link(obj: &[u8], what: &str) -> Result<Vec<u8>, Error> {
    let bad = |reason: String| Error::CodeObject {
        kernel: what.to_string(),
        reason,
    };
    let elf = Elf::parse(obj).map_err(|e| bad(format!("LLVM's object is not ELF: {e}")))?;
    if elf.header.e_type != ET_REL || elf.header.e_machine != EM_AMDGPU {
        return Err(bad("expected a relocatable AMDGPU object".into()));
    }
    let sec_bytes = |i: usize| -> Result<Vec<u8>, Error> {
        let sh = &elf.section_headers[i];
        if sh.sh_type == SHT_NOBITS {
            return Ok(vec![0; sh.sh_size as usize]);
        }
        let r = sh.file_range().unwrap_or(0..0);
        obj.get(r)
            .map(|b| b.to_vec())
            .ok_or_else(|| bad(format!("section {i} is beyond the object")))
    };

    // Sections that are loaded, by segment.
    let (mut notes, mut rodata, mut text) = (vec![], vec![], vec![]);
    for (i, sh) in elf.section_headers.iter().enumerate() {
        if sh.sh_flags & u64::from(SHF_ALLOC) == 0 || sh.sh_size == 0 {
            continue;
        }
        let name = elf.shdr_strtab.get_at(sh.sh_name).unwrap_or("").to_string();
        if sh.sh_flags & u64::from(SHF_WRITE) != 0 {
            return Err(bad(format!(
                "writable section {name} is not supported in a code object"
            )));
        }
        let p = Placed {
            obj: i,
            name,
            kind: sh.sh_type,
            flags: sh.sh_flags,
            align: sh.sh_addralign.max(1),
            data: sec_bytes(i)?,
            offset: 0,
            addr: 0,
            out: 0,
        };
        if sh.sh_type == SHT_NOTE {
            notes.push(p);
        } else if sh.sh_flags & u64::from(SHF_EXECINSTR) != 0 {
            text.push(p);
        } else {
            rodata.push(p);
        }
    }

    // Symbols: all of the object's, with their new sections and addresses decided below.
    let globals: Vec<usize> = elf
        .syms
        .iter()
        .enumerate()
        .filter(|(_, s)| s.st_bind() != STB_LOCAL)
        .map(|(i, _)| i)
        .collect();
    for &g in &globals {
        if let Some(s) = elf.syms.get(g)
            && s.st_shndx == 0
        {
            let n = elf.strtab.get_at(s.st_name).unwrap_or("?");
            return Err(bad(format!(
                "undefined symbol {n} (a library call LLVM could not inline?)"
            )));
        }
    }
    let sym_name = |i: usize| -> String {
        elf.syms
            .get(i)
            .and_then(|s| elf.strtab.get_at(s.st_name))
            .unwrap_or("")
            .to_string()
    };
    let mut dynstr = Strtab::new();
    let dyn_names: Vec<(usize, u32)> = globals
        .iter()
        .map(|&g| (g, dynstr.add(&sym_name(g))))
        .collect();
    let ndyn = dyn_names.len() + 1;

    // Layout of the read-only segment (file offset = address).
    let phnum = 6u64;
    let mut off = 64 + phnum * 56;
    let place = |p: &mut Placed, off: &mut u64, base: u64| {
        *off = align_up(*off, p.align);
        p.offset = *off;
        p.addr = *off + base;
        *off += p.data.len() as u64;
    };
    for p in notes.iter_mut() {
        place(p, &mut off, 0);
    }
    let note_range = notes.first().map(|n| {
        (
            n.offset,
            notes
                .last()
                .map(|l| l.offset + l.data.len() as u64)
                .unwrap_or(0)
                - n.offset,
        )
    });
    off = align_up(off, 8);
    let dynsym_off = off;
    off += 24 * ndyn as u64;
    off = align_up(off, 4);
    let hash_off = off;
    let nbucket = ndyn as u32;
    off += 4 * (2 + u64::from(nbucket) + ndyn as u64);
    let dynstr_off = off;
    off += dynstr.0.len() as u64;
    for p in rodata.iter_mut() {
        place(p, &mut off, 0);
    }
    let r_end = off;
    // Executable segment: its own page of addresses, congruent to the file offset.
    off = align_up(off, 256);
    let x_start = off;
    for p in text.iter_mut() {
        place(p, &mut off, PAGE);
    }
    let x_end = off;
    // Writable segment: .dynamic.
    off = align_up(off, 8);
    let dyn_off = off;
    let dyn_addr = dyn_off + 2 * PAGE;
    let dyn_len = 6 * 16u64;
    off += dyn_len;

    // Output section indices.
    let mut idx = 1usize;
    for p in notes.iter_mut() {
        p.out = idx;
        idx += 1;
    }
    let (dynsym_idx, dynstr_idx) = (idx, idx + 2);
    idx += 3;
    for p in rodata.iter_mut().chain(text.iter_mut()) {
        p.out = idx;
        idx += 1;
    }
    // Then .dynamic (idx), .symtab, .strtab, .shstrtab.
    let (strtab_idx, shstrtab_idx) = (idx + 2, idx + 3);
    let shnum = idx + 4;

    let placed: Vec<&Placed> = notes
        .iter()
        .chain(rodata.iter())
        .chain(text.iter())
        .collect();
    let by_obj = |i: usize| placed.iter().find(|p| p.obj == i).copied();
    let sym_addr = |i: usize| -> Result<(u64, u16), Error> {
        let s = elf
            .syms
            .get(i)
            .ok_or_else(|| bad(format!("relocation names symbol {i}")))?;
        if s.st_shndx == SHN_ABS {
            return Ok((s.st_value, SHN_ABS as u16));
        }
        if s.st_shndx == 0 {
            return Ok((0, 0));
        }
        match by_obj(s.st_shndx) {
            Some(p) => Ok((p.addr + s.st_value, p.out as u16)),
            None => Ok((0, 0)),
        }
    };

    // Relocations.
    let mut datas: Vec<Vec<u8>> = placed.iter().map(|p| p.data.clone()).collect();
    for (rel_idx, relocs) in &elf.shdr_relocs {
        let Some(target) = elf
            .section_headers
            .get(*rel_idx)
            .map(|s| s.sh_info as usize)
        else {
            continue;
        };
        let Some(pi) = placed.iter().position(|p| p.obj == target) else {
            continue;
        };
        for r in relocs.iter() {
            let (s, _) = sym_addr(r.r_sym)?;
            let s = if elf
                .syms
                .get(r.r_sym)
                .is_some_and(|x| x.st_type() == STT_SECTION)
            {
                by_obj(elf.syms.get(r.r_sym).map(|x| x.st_shndx).unwrap_or(0))
                    .map(|p| p.addr)
                    .unwrap_or(s)
            } else {
                s
            };
            let a = r.r_addend.unwrap_or(0);
            let p = placed[pi].addr + r.r_offset;
            let v = (s as i64).wrapping_add(a).wrapping_sub(p as i64);
            let (bytes, width): (u64, usize) = match r.r_type {
                R_AMDGPU_NONE => continue,
                R_AMDGPU_REL64 => (v as u64, 8),
                R_AMDGPU_REL32 | R_AMDGPU_REL32_LO => (v as u64 & 0xffff_ffff, 4),
                R_AMDGPU_REL32_HI => ((v as u64) >> 32, 4),
                R_AMDGPU_REL16 => ((((v - 4) / 4) as u64) & 0xffff, 2),
                t => {
                    return Err(bad(format!(
                        "relocation type {t} against {} needs a dynamic loader; not supported",
                        sym_name(r.r_sym)
                    )));
                }
            };
            let o = r.r_offset as usize;
            let d = &mut datas[pi];
            let dst = d
                .get_mut(o..o + width)
                .ok_or_else(|| bad(format!("relocation at {o:#x} is outside its section")))?;
            dst.copy_from_slice(&bytes.to_le_bytes()[..width]);
        }
    }

    // Symbol tables.
    let mut dynsym = vec![0u8; 24];
    let mut dyn_syms = vec![];
    for &(g, name_off) in &dyn_names {
        let s = &elf
            .syms
            .get(g)
            .ok_or_else(|| bad("symbol vanished".into()))?;
        let (value, shndx) = sym_addr(g)?;
        let sym = Sym {
            name: sym_name(g),
            info: s.st_info,
            other: s.st_other,
            shndx,
            value,
            size: s.st_size,
        };
        push_sym(&mut dynsym, name_off, &sym);
        dyn_syms.push(sym);
    }
    let mut hash = vec![];
    let mut buckets = vec![0u32; nbucket as usize];
    let mut chains = vec![0u32; ndyn];
    for (i, s) in dyn_syms.iter().enumerate() {
        let h = (elf_hash(s.name.as_bytes()) % nbucket) as usize;
        let idx = i as u32 + 1;
        // Prepend to the bucket's chain.
        chains[idx as usize] = buckets[h];
        buckets[h] = idx;
    }
    hash.extend(nbucket.to_le_bytes());
    hash.extend((ndyn as u32).to_le_bytes());
    for b in buckets.iter().chain(chains.iter()) {
        hash.extend(b.to_le_bytes());
    }
    let mut strtab = Strtab::new();
    let mut symtab = vec![0u8; 24];
    let mut nlocal = 1u32;
    for pass_locals in [true, false] {
        for (i, s) in elf.syms.iter().enumerate().skip(1) {
            if (s.st_bind() == STB_LOCAL) != pass_locals || s.st_type() == STT_SECTION {
                continue;
            }
            let (value, shndx) = sym_addr(i)?;
            let sym = Sym {
                name: sym_name(i),
                info: s.st_info,
                other: s.st_other,
                shndx,
                value,
                size: s.st_size,
            };
            let n = strtab.add(&sym.name);
            push_sym(&mut symtab, n, &sym);
            if pass_locals {
                nlocal += 1;
            }
        }
    }
    let mut dynamic = vec![];
    for (tag, val) in [
        (6u64, dynsym_off),
        (11, 24),
        (5, dynstr_off),
        (10, dynstr.0.len() as u64),
        (4, hash_off),
        (0, 0),
    ] {
        dynamic.extend(tag.to_le_bytes());
        dynamic.extend(val.to_le_bytes());
    }

    // Non-loaded tables and the section headers.
    let mut shstr = Strtab::new();
    let symtab_off = align_up(off, 8);
    let strtab_off = symtab_off + symtab.len() as u64;
    let shstrtab_off = strtab_off + strtab.0.len() as u64;
    struct Sh {
        name: u32,
        kind: u32,
        flags: u64,
        addr: u64,
        offset: u64,
        size: u64,
        link: u32,
        info: u32,
        align: u64,
        entsize: u64,
    }
    let mut shs: Vec<Sh> = vec![];
    let mut add = |shstr: &mut Strtab,
                   name: &str,
                   kind,
                   flags,
                   addr,
                   offset,
                   size,
                   link,
                   info,
                   align,
                   entsize| {
        let name = shstr.add(name);
        shs.push(Sh {
            name,
            kind,
            flags,
            addr,
            offset,
            size,
            link,
            info,
            align,
            entsize,
        });
    };
    let a = u64::from(SHF_ALLOC);
    for p in &notes {
        add(
            &mut shstr,
            &p.name,
            p.kind,
            p.flags,
            p.addr,
            p.offset,
            p.data.len() as u64,
            0,
            0,
            p.align,
            0,
        );
    }
    add(
        &mut shstr,
        ".dynsym",
        SHT_DYNSYM,
        a,
        dynsym_off,
        dynsym_off,
        dynsym.len() as u64,
        dynstr_idx as u32,
        1,
        8,
        24,
    );
    add(
        &mut shstr,
        ".hash",
        SHT_HASH,
        a,
        hash_off,
        hash_off,
        hash.len() as u64,
        dynsym_idx as u32,
        0,
        4,
        4,
    );
    add(
        &mut shstr,
        ".dynstr",
        SHT_STRTAB,
        a,
        dynstr_off,
        dynstr_off,
        dynstr.0.len() as u64,
        0,
        0,
        1,
        0,
    );
    for p in rodata.iter().chain(text.iter()) {
        add(
            &mut shstr,
            &p.name,
            p.kind,
            p.flags,
            p.addr,
            p.offset,
            p.data.len() as u64,
            0,
            0,
            p.align,
            0,
        );
    }
    add(
        &mut shstr,
        ".dynamic",
        SHT_DYNAMIC,
        a | u64::from(SHF_WRITE),
        dyn_addr,
        dyn_off,
        dyn_len,
        dynstr_idx as u32,
        0,
        8,
        16,
    );
    add(
        &mut shstr,
        ".symtab",
        SHT_SYMTAB,
        0,
        0,
        symtab_off,
        symtab.len() as u64,
        strtab_idx as u32,
        nlocal,
        8,
        24,
    );
    add(
        &mut shstr,
        ".strtab",
        SHT_STRTAB,
        0,
        0,
        strtab_off,
        strtab.0.len() as u64,
        0,
        0,
        1,
        0,
    );
    let shstr_name = shstr.add(".shstrtab");
    let shstr_len = shstr.0.len() as u64;
    shs.push(Sh {
        name: shstr_name,
        kind: SHT_STRTAB,
        flags: 0,
        addr: 0,
        offset: shstrtab_off,
        size: shstr_len,
        link: 0,
        info: 0,
        align: 1,
        entsize: 0,
    });
    let shoff = align_up(shstrtab_off + shstr_len, 8);

    // The file.
    let total = shoff + 64 * shnum as u64;
    let mut f = vec![0u8; total as usize];
    let put = |f: &mut Vec<u8>, o: u64, b: &[u8]| {
        f[o as usize..o as usize + b.len()].copy_from_slice(b);
    };
    // ELF header: the object's identification (class, OS/ABI HSA, ABI version) and flags
    // (the gfx target and its features).
    let mut eh = obj[..16].to_vec();
    eh.extend(ET_DYN.to_le_bytes());
    eh.extend(EM_AMDGPU.to_le_bytes());
    eh.extend(1u32.to_le_bytes());
    eh.extend(0u64.to_le_bytes()); // entry
    eh.extend(64u64.to_le_bytes()); // phoff
    eh.extend(shoff.to_le_bytes());
    eh.extend(elf.header.e_flags.to_le_bytes());
    eh.extend(64u16.to_le_bytes());
    eh.extend(56u16.to_le_bytes());
    eh.extend((phnum as u16).to_le_bytes());
    eh.extend(64u16.to_le_bytes());
    eh.extend((shnum as u16).to_le_bytes());
    eh.extend((shstrtab_idx as u16).to_le_bytes());
    put(&mut f, 0, &eh);
    // Program headers: type, flags, offset, vaddr, paddr, filesz, memsz, align.
    let (note_off, note_len) = note_range.unwrap_or((0, 0));
    let phs: [(u32, u32, u64, u64, u64, u64); 6] = [
        (1, 4, 0, 0, r_end, PAGE),                              // PT_LOAD R
        (1, 5, x_start, x_start + PAGE, x_end - x_start, PAGE), // PT_LOAD R+X
        (1, 6, dyn_off, dyn_addr, dyn_len, PAGE),               // PT_LOAD R+W
        (2, 6, dyn_off, dyn_addr, dyn_len, 8),                  // PT_DYNAMIC
        (4, 4, note_off, note_off, note_len, 4),                // PT_NOTE
        (0x6474_e551, 6, 0, 0, 0, 0),                           // PT_GNU_STACK
    ];
    for (n, (kind, flags, o, va, size, al)) in phs.iter().enumerate() {
        let mut ph = vec![];
        ph.extend(kind.to_le_bytes());
        ph.extend(flags.to_le_bytes());
        ph.extend(o.to_le_bytes());
        ph.extend(va.to_le_bytes());
        ph.extend(va.to_le_bytes());
        ph.extend(size.to_le_bytes());
        ph.extend(size.to_le_bytes());
        ph.extend(al.to_le_bytes());
        put(&mut f, 64 + 56 * n as u64, &ph);
    }
    for (p, d) in placed.iter().zip(&datas) {
        put(&mut f, p.offset, d);
    }
    put(&mut f, dynsym_off, &dynsym);
    put(&mut f, hash_off, &hash);
    put(&mut f, dynstr_off, &dynstr.0);
    put(&mut f, dyn_off, &dynamic);
    put(&mut f, symtab_off, &symtab);
    put(&mut f, strtab_off, &strtab.0);
    put(&mut f, shstrtab_off, &shstr.0);
    for (n, s) in shs.iter().enumerate() {
        let mut b = vec![];
        b.extend(s.name.to_le_bytes());
        b.extend(s.kind.to_le_bytes());
        b.extend(s.flags.to_le_bytes());
        b.extend(s.addr.to_le_bytes());
        b.extend(s.offset.to_le_bytes());
        b.extend(s.size.to_le_bytes());
        b.extend(s.link.to_le_bytes());
        b.extend(s.info.to_le_bytes());
        b.extend(s.align.to_le_bytes());
        b.extend(s.entsize.to_le_bytes());
        put(&mut f, shoff + 64 * (n as u64 + 1), &b);
    }
    Ok(f)
}
