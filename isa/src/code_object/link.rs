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
//!
//! The steps: [`Input::loaded_sections`] sorts the object's sections into the three
//! segments, [`Layout::place`] gives every section its file offset and address,
//! [`Input::relocate`] resolves the relocations against those addresses,
//! [`Tables::build`] makes the symbol, hash and dynamic tables, [`section_headers`] lists
//! the sections, and [`write_file`] puts it all into one file.

use goblin::elf::Elf;
use goblin::elf::header::{ET_DYN, ET_REL};
use goblin::elf::section_header::*;
use goblin::elf::sym::{STB_LOCAL, STT_SECTION};

use super::reloc::*;
use super::{EM_AMDGPU, bad};
use crate::Error;

const PAGE: u64 = 0x1000;
const SHN_ABS: usize = 0xfff1;
/// Program headers: three `PT_LOAD`, `PT_DYNAMIC`, `PT_NOTE`, `PT_GNU_STACK`.
const PHNUM: u64 = 6;
/// `.dynamic` entries: `DT_SYMTAB`, `DT_SYMENT`, `DT_STRTAB`, `DT_STRSZ`, `DT_HASH`, `DT_NULL`.
const DYNAMIC_LEN: u64 = 6 * 16;

/// Links the relocatable object `obj` (from LLVM's AMDGPU back end) into a loadable HSA code
/// object. `what` names the kernel in errors.
pub fn link(obj: &[u8], what: &str) -> Result<Vec<u8>, Error> {
    let input = Input::parse(obj, what)?;
    let mut sections = input.loaded_sections()?;
    let exported = input.exported_symbols()?;
    let layout = Layout::place(&mut sections, &exported);
    let datas = input.relocate(&sections)?;
    let tables = Tables::build(&input, &sections, &exported, &layout)?;
    let (headers, shstrtab) = section_headers(&sections, &layout, &tables);
    Ok(write_file(
        &input, &sections, &datas, &layout, &tables, &headers, &shstrtab,
    ))
}

/// LLVM's relocatable object.
struct Input<'a> {
    obj: &'a [u8],
    elf: Elf<'a>,
    what: &'a str,
}

/// A section of the object that is loaded, with its place in the output.
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

/// The loaded sections by segment.
struct Sections {
    notes: Vec<Placed>,
    rodata: Vec<Placed>,
    text: Vec<Placed>,
}

impl Sections {
    /// In file order.
    fn all(&self) -> impl Iterator<Item = &Placed> {
        self.notes.iter().chain(&self.rodata).chain(&self.text)
    }

    /// The output section of object section `i`.
    fn of_obj(&self, i: usize) -> Option<&Placed> {
        self.all().find(|p| p.obj == i)
    }
}

/// The object's global symbols, which the code object exports in `.dynsym`.
struct Exported {
    /// Their indices in the object's symbol table, with their offsets in `.dynstr`.
    names: Vec<(usize, u32)>,
    dynstr: Strtab,
}

impl Exported {
    /// Entries of `.dynsym` and chains of `.hash` (the null symbol included).
    fn count(&self) -> usize {
        self.names.len() + 1
    }
}

/// Where everything goes: file offsets (addresses in the read-only segment equal them), the
/// executable and writable segments' ranges, and output section indices.
struct Layout {
    note_range: (u64, u64),
    dynsym_off: u64,
    hash_off: u64,
    dynstr_off: u64,
    /// End of the read-only segment.
    r_end: u64,
    /// The executable segment's file range.
    x_start: u64,
    x_end: u64,
    dyn_off: u64,
    dyn_addr: u64,
    /// End of the loaded part of the file.
    end: u64,
    dynsym_idx: usize,
    dynstr_idx: usize,
    strtab_idx: usize,
    shstrtab_idx: usize,
    shnum: usize,
}

/// The tables the linker makes.
struct Tables {
    dynsym: Vec<u8>,
    hash: Vec<u8>,
    dynstr: Vec<u8>,
    dynamic: Vec<u8>,
    symtab: Vec<u8>,
    strtab: Vec<u8>,
    /// Local symbols in `.symtab` (the null symbol included): its `sh_info`.
    nlocal: u32,
}

/// A section header.
#[derive(Default)]
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

/// A symbol as written to `.dynsym` or `.symtab`.
struct Sym {
    name: String,
    info: u8,
    other: u8,
    shndx: u16,
    value: u64,
    size: u64,
}

impl<'a> Input<'a> {
    fn parse(obj: &'a [u8], what: &'a str) -> Result<Input<'a>, Error> {
        let elf =
            Elf::parse(obj).map_err(|e| bad(what, format!("LLVM's object is not ELF: {e}")))?;
        if elf.header.e_type != ET_REL || elf.header.e_machine != EM_AMDGPU {
            return Err(bad(what, "expected a relocatable AMDGPU object".into()));
        }
        Ok(Input { obj, elf, what })
    }

    fn bad(&self, reason: String) -> Error {
        bad(self.what, reason)
    }

    fn section_data(&self, i: usize) -> Result<Vec<u8>, Error> {
        let sh = &self.elf.section_headers[i];
        if sh.sh_type == SHT_NOBITS {
            return Ok(vec![0; sh.sh_size as usize]);
        }
        let r = sh.file_range().unwrap_or(0..0);
        self.obj
            .get(r)
            .map(|b| b.to_vec())
            .ok_or_else(|| self.bad(format!("section {i} is beyond the object")))
    }

    /// The sections that are loaded, by segment: notes, read-only data, code. A writable
    /// one is refused (a code object's data segment holds only `.dynamic`).
    fn loaded_sections(&self) -> Result<Sections, Error> {
        let mut s = Sections {
            notes: vec![],
            rodata: vec![],
            text: vec![],
        };
        for (i, sh) in self.elf.section_headers.iter().enumerate() {
            if sh.sh_flags & u64::from(SHF_ALLOC) == 0 || sh.sh_size == 0 {
                continue;
            }
            let name = self
                .elf
                .shdr_strtab
                .get_at(sh.sh_name)
                .unwrap_or("")
                .to_string();
            if sh.sh_flags & u64::from(SHF_WRITE) != 0 {
                return Err(self.bad(format!(
                    "writable section {name} is not supported in a code object"
                )));
            }
            let p = Placed {
                obj: i,
                name,
                kind: sh.sh_type,
                flags: sh.sh_flags,
                align: sh.sh_addralign.max(1),
                data: self.section_data(i)?,
                offset: 0,
                addr: 0,
                out: 0,
            };
            if sh.sh_type == SHT_NOTE {
                s.notes.push(p);
            } else if sh.sh_flags & u64::from(SHF_EXECINSTR) != 0 {
                s.text.push(p);
            } else {
                s.rodata.push(p);
            }
        }
        Ok(s)
    }

    fn sym_name(&self, i: usize) -> String {
        self.elf
            .syms
            .get(i)
            .and_then(|s| self.elf.strtab.get_at(s.st_name))
            .unwrap_or("")
            .to_string()
    }

    /// The global symbols; an undefined one is refused (nothing would resolve it).
    fn exported_symbols(&self) -> Result<Exported, Error> {
        let mut dynstr = Strtab::new();
        let mut names = vec![];
        for (i, s) in self.elf.syms.iter().enumerate() {
            if s.st_bind() == STB_LOCAL {
                continue;
            }
            if s.st_shndx == 0 {
                return Err(self.bad(format!(
                    "undefined symbol {} (a library call LLVM could not inline?)",
                    self.sym_name(i)
                )));
            }
            names.push((i, dynstr.add(&self.sym_name(i))));
        }
        Ok(Exported { names, dynstr })
    }

    /// The output address and section index of symbol `i`.
    fn sym_addr(&self, sections: &Sections, i: usize) -> Result<(u64, u16), Error> {
        let s = self
            .elf
            .syms
            .get(i)
            .ok_or_else(|| self.bad(format!("relocation names symbol {i}")))?;
        if s.st_shndx == SHN_ABS {
            return Ok((s.st_value, SHN_ABS as u16));
        }
        if s.st_shndx == 0 {
            return Ok((0, 0));
        }
        Ok(match sections.of_obj(s.st_shndx) {
            Some(p) => (p.addr + s.st_value, p.out as u16),
            None => (0, 0),
        })
    }

    /// The loaded sections' bytes (in [`Sections::all`] order) with the PC-relative
    /// relocations resolved for the addresses of `sections`.
    fn relocate(&self, sections: &Sections) -> Result<Vec<Vec<u8>>, Error> {
        let placed: Vec<&Placed> = sections.all().collect();
        let mut datas: Vec<Vec<u8>> = placed.iter().map(|p| p.data.clone()).collect();
        for (rel_idx, relocs) in &self.elf.shdr_relocs {
            let Some(target) = self
                .elf
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
                let sym = self.elf.syms.get(r.r_sym);
                let s = match sym {
                    // A section symbol stands for its section's start.
                    Some(x) if x.st_type() == STT_SECTION => match sections.of_obj(x.st_shndx) {
                        Some(p) => p.addr,
                        None => self.sym_addr(sections, r.r_sym)?.0,
                    },
                    _ => self.sym_addr(sections, r.r_sym)?.0,
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
                        return Err(self.bad(format!(
                            "relocation type {t} against {} needs a dynamic loader; not supported",
                            self.sym_name(r.r_sym)
                        )));
                    }
                };
                let o = r.r_offset as usize;
                let dst = datas[pi].get_mut(o..o + width).ok_or_else(|| {
                    self.bad(format!("relocation at {o:#x} is outside its section"))
                })?;
                dst.copy_from_slice(&bytes.to_le_bytes()[..width]);
            }
        }
        Ok(datas)
    }
}

impl Layout {
    /// Gives every loaded section its offset, address and output index, and the tables
    /// theirs. The read-only segment starts the file (offsets equal addresses); the
    /// executable one follows on the next page of addresses, congruent to its offsets; then
    /// the writable one with `.dynamic`.
    fn place(sections: &mut Sections, exported: &Exported) -> Layout {
        let place = |p: &mut Placed, off: &mut u64, base: u64| {
            *off = align_up(*off, p.align);
            p.offset = *off;
            p.addr = *off + base;
            *off += p.data.len() as u64;
        };
        let mut off = 64 + PHNUM * 56;
        for p in sections.notes.iter_mut() {
            place(p, &mut off, 0);
        }
        let note_range = match (sections.notes.first(), sections.notes.last()) {
            (Some(f), Some(l)) => (f.offset, l.offset + l.data.len() as u64 - f.offset),
            _ => (0, 0),
        };
        let ndyn = exported.count() as u64;
        off = align_up(off, 8);
        let dynsym_off = off;
        off += 24 * ndyn;
        off = align_up(off, 4);
        let hash_off = off;
        // As many buckets as symbols.
        off += 4 * (2 + ndyn + ndyn);
        let dynstr_off = off;
        off += exported.dynstr.0.len() as u64;
        for p in sections.rodata.iter_mut() {
            place(p, &mut off, 0);
        }
        let r_end = off;
        off = align_up(off, 256);
        let x_start = off;
        for p in sections.text.iter_mut() {
            place(p, &mut off, PAGE);
        }
        let x_end = off;
        off = align_up(off, 8);
        let dyn_off = off;
        off += DYNAMIC_LEN;

        // Section indices: the notes, .dynsym, .hash, .dynstr, read-only data, code, then
        // .dynamic, .symtab, .strtab, .shstrtab.
        let mut idx = 1usize;
        for p in sections.notes.iter_mut() {
            p.out = idx;
            idx += 1;
        }
        let (dynsym_idx, dynstr_idx) = (idx, idx + 2);
        idx += 3;
        for p in sections.rodata.iter_mut().chain(sections.text.iter_mut()) {
            p.out = idx;
            idx += 1;
        }
        Layout {
            note_range,
            dynsym_off,
            hash_off,
            dynstr_off,
            r_end,
            x_start,
            x_end,
            dyn_off,
            dyn_addr: dyn_off + 2 * PAGE,
            end: off,
            dynsym_idx,
            dynstr_idx,
            strtab_idx: idx + 2,
            shstrtab_idx: idx + 3,
            shnum: idx + 4,
        }
    }
}

impl Tables {
    fn build(
        input: &Input,
        sections: &Sections,
        exported: &Exported,
        layout: &Layout,
    ) -> Result<Tables, Error> {
        let syms = &input.elf.syms;
        let sym = |i: usize| -> Result<Sym, Error> {
            let s = syms
                .get(i)
                .ok_or_else(|| input.bad(format!("symbol {i} vanished")))?;
            let (value, shndx) = input.sym_addr(sections, i)?;
            Ok(Sym {
                name: input.sym_name(i),
                info: s.st_info,
                other: s.st_other,
                shndx,
                value,
                size: s.st_size,
            })
        };

        let mut dynsym = vec![0u8; 24];
        let mut dyn_syms = vec![];
        for &(g, name_off) in &exported.names {
            let s = sym(g)?;
            push_sym(&mut dynsym, name_off, &s);
            dyn_syms.push(s);
        }
        let hash = sysv_hash(&dyn_syms);

        // .symtab: the locals first (its sh_info counts them), section symbols left out.
        let mut strtab = Strtab::new();
        let mut symtab = vec![0u8; 24];
        let mut nlocal = 1u32;
        for pass_locals in [true, false] {
            for (i, s) in syms.iter().enumerate().skip(1) {
                if (s.st_bind() == STB_LOCAL) != pass_locals || s.st_type() == STT_SECTION {
                    continue;
                }
                let s = sym(i)?;
                let n = strtab.add(&s.name);
                push_sym(&mut symtab, n, &s);
                if pass_locals {
                    nlocal += 1;
                }
            }
        }

        let mut dynamic = vec![];
        for (tag, val) in [
            (6u64, layout.dynsym_off),            // DT_SYMTAB
            (11, 24),                             // DT_SYMENT
            (5, layout.dynstr_off),               // DT_STRTAB
            (10, exported.dynstr.0.len() as u64), // DT_STRSZ
            (4, layout.hash_off),                 // DT_HASH
            (0, 0),                               // DT_NULL
        ] {
            dynamic.extend(tag.to_le_bytes());
            dynamic.extend(val.to_le_bytes());
        }
        Ok(Tables {
            dynsym,
            hash,
            dynstr: exported.dynstr.0.clone(),
            dynamic,
            symtab,
            strtab: strtab.0,
            nlocal,
        })
    }

    /// Offsets of the tables after the loaded part: `.symtab`, `.strtab`, `.shstrtab`.
    fn offsets(&self, layout: &Layout) -> (u64, u64, u64) {
        let symtab_off = align_up(layout.end, 8);
        let strtab_off = symtab_off + self.symtab.len() as u64;
        (
            symtab_off,
            strtab_off,
            strtab_off + self.strtab.len() as u64,
        )
    }
}

/// `.hash`: one bucket per symbol, each chain prepended to.
fn sysv_hash(dyn_syms: &[Sym]) -> Vec<u8> {
    let n = dyn_syms.len() + 1;
    let nbucket = n as u32;
    let mut buckets = vec![0u32; n];
    let mut chains = vec![0u32; n];
    for (i, s) in dyn_syms.iter().enumerate() {
        let h = (elf_hash(s.name.as_bytes()) % nbucket) as usize;
        let idx = i as u32 + 1;
        chains[idx as usize] = buckets[h];
        buckets[h] = idx;
    }
    let mut hash = vec![];
    hash.extend(nbucket.to_le_bytes());
    hash.extend((n as u32).to_le_bytes());
    for b in buckets.iter().chain(chains.iter()) {
        hash.extend(b.to_le_bytes());
    }
    hash
}

/// The section headers (after the null one) and `.shstrtab`.
fn section_headers(sections: &Sections, layout: &Layout, tables: &Tables) -> (Vec<Sh>, Vec<u8>) {
    let mut h = Headers {
        shstr: Strtab::new(),
        shs: vec![],
    };
    let a = u64::from(SHF_ALLOC);
    let (dynstr_idx, dynsym_idx) = (layout.dynstr_idx as u32, layout.dynsym_idx as u32);
    for p in &sections.notes {
        h.loaded(p);
    }
    let table = |kind, offset, size: usize, link, info, align, entsize| Sh {
        kind,
        flags: a,
        addr: offset,
        offset,
        size: size as u64,
        link,
        info,
        align,
        entsize,
        ..Sh::default()
    };
    h.add(
        ".dynsym",
        table(
            SHT_DYNSYM,
            layout.dynsym_off,
            tables.dynsym.len(),
            dynstr_idx,
            1,
            8,
            24,
        ),
    );
    h.add(
        ".hash",
        table(
            SHT_HASH,
            layout.hash_off,
            tables.hash.len(),
            dynsym_idx,
            0,
            4,
            4,
        ),
    );
    h.add(
        ".dynstr",
        table(
            SHT_STRTAB,
            layout.dynstr_off,
            tables.dynstr.len(),
            0,
            0,
            1,
            0,
        ),
    );
    for p in sections.rodata.iter().chain(&sections.text) {
        h.loaded(p);
    }
    h.add(
        ".dynamic",
        Sh {
            kind: SHT_DYNAMIC,
            flags: a | u64::from(SHF_WRITE),
            addr: layout.dyn_addr,
            offset: layout.dyn_off,
            size: DYNAMIC_LEN,
            link: dynstr_idx,
            align: 8,
            entsize: 16,
            ..Sh::default()
        },
    );
    let (symtab_off, strtab_off, shstrtab_off) = tables.offsets(layout);
    h.add(
        ".symtab",
        Sh {
            kind: SHT_SYMTAB,
            offset: symtab_off,
            size: tables.symtab.len() as u64,
            link: layout.strtab_idx as u32,
            info: tables.nlocal,
            align: 8,
            entsize: 24,
            ..Sh::default()
        },
    );
    h.add(
        ".strtab",
        Sh {
            kind: SHT_STRTAB,
            offset: strtab_off,
            size: tables.strtab.len() as u64,
            align: 1,
            ..Sh::default()
        },
    );
    // .shstrtab names itself, so its size is known only once its own name is in.
    let name = h.shstr.add(".shstrtab");
    h.shs.push(Sh {
        name,
        kind: SHT_STRTAB,
        offset: shstrtab_off,
        size: h.shstr.0.len() as u64,
        align: 1,
        ..Sh::default()
    });
    (h.shs, h.shstr.0)
}

/// Section headers being listed, with their names.
struct Headers {
    shstr: Strtab,
    shs: Vec<Sh>,
}

impl Headers {
    fn add(&mut self, name: &str, sh: Sh) {
        let name = self.shstr.add(name);
        self.shs.push(Sh { name, ..sh });
    }

    /// A loaded section, as it is placed.
    fn loaded(&mut self, p: &Placed) {
        self.add(
            &p.name,
            Sh {
                kind: p.kind,
                flags: p.flags,
                addr: p.addr,
                offset: p.offset,
                size: p.data.len() as u64,
                align: p.align,
                ..Sh::default()
            },
        );
    }
}

/// The file: ELF header, program headers, the sections' bytes, the section headers.
fn write_file(
    input: &Input,
    sections: &Sections,
    datas: &[Vec<u8>],
    layout: &Layout,
    tables: &Tables,
    headers: &[Sh],
    shstrtab: &[u8],
) -> Vec<u8> {
    let (symtab_off, strtab_off, shstrtab_off) = tables.offsets(layout);
    let shoff = align_up(shstrtab_off + shstrtab.len() as u64, 8);
    let total = shoff + 64 * layout.shnum as u64;
    let mut f = vec![0u8; total as usize];
    let put = |f: &mut Vec<u8>, o: u64, b: &[u8]| {
        f[o as usize..o as usize + b.len()].copy_from_slice(b);
    };
    // ELF header: the object's identification (class, OS/ABI HSA, ABI version) and flags
    // (the gfx target and its features).
    let mut eh = input.obj.get(..16).unwrap_or(&[0; 16]).to_vec();
    eh.extend(ET_DYN.to_le_bytes());
    eh.extend(EM_AMDGPU.to_le_bytes());
    eh.extend(1u32.to_le_bytes());
    eh.extend(0u64.to_le_bytes()); // entry
    eh.extend(64u64.to_le_bytes()); // phoff
    eh.extend(shoff.to_le_bytes());
    eh.extend(input.elf.header.e_flags.to_le_bytes());
    eh.extend(64u16.to_le_bytes());
    eh.extend(56u16.to_le_bytes());
    eh.extend((PHNUM as u16).to_le_bytes());
    eh.extend(64u16.to_le_bytes());
    eh.extend((layout.shnum as u16).to_le_bytes());
    eh.extend((layout.shstrtab_idx as u16).to_le_bytes());
    put(&mut f, 0, &eh);
    // Program headers: type, flags, offset, vaddr (= paddr), size (file = memory), align.
    let (note_off, note_len) = layout.note_range;
    let (x_start, x_end, dyn_off, dyn_addr) = (
        layout.x_start,
        layout.x_end,
        layout.dyn_off,
        layout.dyn_addr,
    );
    let phs: [(u32, u32, u64, u64, u64, u64); PHNUM as usize] = [
        (1, 4, 0, 0, layout.r_end, PAGE),                       // PT_LOAD R
        (1, 5, x_start, x_start + PAGE, x_end - x_start, PAGE), // PT_LOAD R+X
        (1, 6, dyn_off, dyn_addr, DYNAMIC_LEN, PAGE),           // PT_LOAD R+W
        (2, 6, dyn_off, dyn_addr, DYNAMIC_LEN, 8),              // PT_DYNAMIC
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
    for (p, d) in sections.all().zip(datas) {
        put(&mut f, p.offset, d);
    }
    put(&mut f, layout.dynsym_off, &tables.dynsym);
    put(&mut f, layout.hash_off, &tables.hash);
    put(&mut f, layout.dynstr_off, &tables.dynstr);
    put(&mut f, layout.dyn_off, &tables.dynamic);
    put(&mut f, symtab_off, &tables.symtab);
    put(&mut f, strtab_off, &tables.strtab);
    put(&mut f, shstrtab_off, shstrtab);
    for (n, s) in headers.iter().enumerate() {
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
    f
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

fn push_sym(out: &mut Vec<u8>, name_off: u32, s: &Sym) {
    out.extend(name_off.to_le_bytes());
    out.push(s.info);
    out.push(s.other);
    out.extend(s.shndx.to_le_bytes());
    out.extend(s.value.to_le_bytes());
    out.extend(s.size.to_le_bytes());
}

/// A string table: a leading NUL, then each name once it is added.
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
