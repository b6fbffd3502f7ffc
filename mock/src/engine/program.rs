//! Shader code as the dispatcher finds it in GPU memory, decoded once and kept while the
//! memory under it is unchanged.
//!
//! A dispatch names only its entry address (`COMPUTE_PGM_LO/HI`, or the kernel
//! descriptor's entry); hardware fetches instructions from there on. The mock reads from
//! the entry forward — up to [`MAX_CODE`], the end of the mapping, or the first 4 KiB page
//! of zeros (unused memory after the code) — and decodes it for `am_emu`. The first page is
//! read strictly (a fault or an unflushed BAR0 write there fails the dispatch); later pages
//! that cannot be read end the code instead, and the reason is kept to explain an
//! instruction fetch that runs past it. Code called below the entry is not reached (the
//! decode starts at the entry).
//!
//! A decoded program is reused while every VRAM page it came from is unwritten since it
//! was read (page generations) and the GPU's mapping is unchanged; code in system memory or
//! in another hive member's VRAM (whose write epochs are that member's) is compared byte for
//! byte.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use am_isa::sync::lock;

use super::mem::{GpuMem, MemError};
use crate::ip::gmc::Hub;
use crate::walker::{Access, PhysTarget};

/// The most code read for one entry point.
pub const MAX_CODE: u64 = 256 << 10;
const PAGE: u64 = 0x1000;

/// A decoded program and where it came from.
#[derive(Debug)]
pub struct Code {
    /// The decoded instructions (`.text` at the entry address).
    pub program: am_emu::Program,
    /// Bytes read.
    pub len: u64,
    /// Why reading stopped before [`MAX_CODE`], when it was not the end of the code.
    pub cut: Option<String>,
    /// The GMC epoch of the translation.
    vm_epoch: u64,
    /// Per page: where it was, and (this device's VRAM) the write epoch it was read in, or
    /// (elsewhere) its bytes.
    pages: Vec<(PhysTarget, Source)>,
}

#[derive(Debug)]
enum Source {
    Vram(u64),
    Bytes(Vec<u8>),
}

/// Decoded programs by (hub, vmid, entry address).
#[derive(Debug, Default)]
pub struct ProgramCache {
    map: Mutex<HashMap<(Hub, u8, u64), Arc<Code>>>,
}

impl ProgramCache {
    /// The program at `entry` for `isa`, from the cache if its memory is unchanged.
    pub fn get(
        &self,
        mem: &mut GpuMem<'_>,
        entry: u64,
        isa: am_emu::Isa,
    ) -> Result<Arc<Code>, MemError> {
        let key = (mem.hub(), mem.vmid(), entry);
        let cached = lock(&self.map).get(&key).cloned();
        if let Some(c) = cached
            && still_valid(mem, &c)
        {
            return Ok(c);
        }
        let code = Arc::new(read(mem, entry, isa)?);
        let mut map = lock(&self.map);
        if map.len() > 256 {
            // A long-lived device that ran many programs: start over rather than grow.
            map.clear();
        }
        map.insert(key, code.clone());
        Ok(code)
    }
}

fn still_valid(mem: &mut GpuMem<'_>, c: &Code) -> bool {
    let vram = &mem.shared().vram;
    if mem.shared().engines.vm_epoch() != c.vm_epoch {
        return false;
    }
    c.pages.iter().all(|(target, src)| match (target, src) {
        (PhysTarget::Vram(off), Source::Vram(epoch)) => vram.page_generation(*off) <= *epoch,
        (_, Source::Bytes(bytes)) => {
            let mut now = vec![0u8; bytes.len()];
            mem.read_target(0, *target, &mut now).is_ok() && now == *bytes
        }
        _ => false,
    })
}

fn read(mem: &mut GpuMem<'_>, entry: u64, isa: am_emu::Isa) -> Result<Code, MemError> {
    let sh = mem.shared();
    let vm_epoch = sh.engines.vm_epoch();
    // Writes after this snapshot have larger page generations than it.
    let epoch = sh.vram.snapshot();
    let mut bytes = Vec::new();
    let mut pages = Vec::new();
    let mut cut = None;
    let mut at = entry;
    while (at - entry) < MAX_CODE {
        let n = (PAGE - at % PAGE).min(MAX_CODE - (at - entry));
        let mut buf = vec![0u8; n as usize];
        let first = at == entry;
        let target = match mem.resolve_for(at, Access::Execute) {
            Ok(t) => t,
            Err(e) if first => return Err(e),
            Err(e) => {
                cut = Some(e.to_string());
                break;
            }
        };
        match mem.read_as(at, &mut buf, Access::Execute, true) {
            Ok(()) => {}
            Err(e) if first => return Err(e),
            Err(e) => {
                cut = Some(e.to_string());
                break;
            }
        }
        if !first && buf.iter().all(|&b| b == 0) {
            break;
        }
        let src = match target {
            PhysTarget::Vram(_) => Source::Vram(epoch),
            PhysTarget::System(_) | PhysTarget::Peer { .. } => Source::Bytes(buf.clone()),
        };
        pages.push((target, src));
        bytes.extend_from_slice(&buf);
        at += n;
    }
    let program = am_emu::Program::from_bytes(&bytes, entry, isa).map_err(|e| MemError::Dma {
        addr: entry,
        reason: format!("decoding the code: {e}"),
    })?;
    Ok(Code {
        program,
        len: bytes.len() as u64,
        cut,
        vm_epoch,
        pages,
    })
}
