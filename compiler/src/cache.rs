//! [`Compiler`]: kernel → program bytes, through a cache in memory and on disk.
//!
//! The key is SHA-256 of the compiler's version, the target and the kernel's text form (values
//! numbered, not named). A
//! disk entry (`DIR/KEY.bin`) carries a header with the key, the payload length and the
//! payload's SHA-256; an entry whose header, length or hash does not match (a truncated write,
//! a flipped bit, another version's file) is ignored and rebuilt, never trusted. Entries are
//! written to a temporary file and renamed, so a reader sees a whole entry or none.
//!
//! Beside the programs the cache keeps small **records** under keys of their own
//! ([`Cache::record_key`], also made with the compiler's version): what a tuning search
//! decided for a kernel (the tensor layer's `AM_BEAM` choices), so that a later process
//! finds the choice instead of searching again. Records are in memory and, with a
//! directory, on disk in the same checked format.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use sha2::{Digest, Sha256};

use crate::ir::Kernel;
use crate::{Error, Target};

/// Part of every cache key: a new compiler (or a change of its output format) makes new keys,
/// and so does any change to its sources or the code-object linker's (a hash of them, made
/// by the build script), so a build never loads what another build compiled differently.
pub const COMPILER_VERSION: &str = concat!(
    "am-compiler ",
    env!("CARGO_PKG_VERSION"),
    " llvm22 format5 source ",
    env!("AM_COMPILER_SOURCE")
);

const MAGIC: &[u8; 8] = b"AMCACHE1";
const HEADER: usize = 8 + 32 + 8 + 32;

/// A compiled kernel: an HSA code object (GPU targets) or a CPU program image
/// ([`crate::cpu::CpuProgram::load`] reads it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Compiled {
    /// What it was compiled for.
    pub target: Target,
    /// Kernel name (the code object's symbol; its descriptor is `NAME.kd`).
    pub kernel: String,
    /// The bytes.
    pub bytes: Vec<u8>,
}

/// Counts of cache outcomes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Found in memory.
    pub memory_hits: u64,
    /// Found on disk (and valid).
    pub disk_hits: u64,
    /// Compiled.
    pub misses: u64,
    /// Disk entries found invalid and replaced.
    pub rejected: u64,
}

/// The cache: always in memory, on disk when it has a directory.
pub struct Cache {
    dir: Option<PathBuf>,
    mem: Mutex<HashMap<[u8; 32], Arc<Compiled>>>,
    records: Mutex<HashMap<[u8; 32], Vec<u8>>>,
    memory_hits: AtomicU64,
    disk_hits: AtomicU64,
    misses: AtomicU64,
    rejected: AtomicU64,
}

impl Cache {
    /// A cache in memory and, if `dir` is given, on disk there.
    pub fn new(dir: Option<PathBuf>) -> Cache {
        Cache {
            dir,
            mem: Mutex::new(HashMap::new()),
            records: Mutex::new(HashMap::new()),
            memory_hits: AtomicU64::new(0),
            disk_hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            rejected: AtomicU64::new(0),
        }
    }

    /// `$XDG_CACHE_HOME/am`, else `$HOME/.cache/am`.
    pub fn default_dir() -> Option<PathBuf> {
        let nonempty = |v: &str| std::env::var_os(v).filter(|s| !s.is_empty());
        nonempty("XDG_CACHE_HOME")
            .map(|d| PathBuf::from(d).join("am"))
            .or_else(|| nonempty("HOME").map(|h| PathBuf::from(h).join(".cache").join("am")))
    }

    /// The disk directory, if any.
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// The cache key of a kernel for a target.
    pub fn key(k: &Kernel, target: Target) -> [u8; 32] {
        let mut h = Sha256::new();
        h.update(COMPILER_VERSION.as_bytes());
        h.update([0]);
        h.update(target.name().as_bytes());
        h.update([0]);
        h.update(crate::text::print_canonical(k).as_bytes());
        h.finalize().into()
    }

    /// The key of a record of kind `kind` (a short name of what decides it, e.g.
    /// `"beam"`) about `parts`: the compiler's version, the kind and each part, separated.
    pub fn record_key(kind: &str, parts: &[&[u8]]) -> [u8; 32] {
        let mut h = Sha256::new();
        h.update(COMPILER_VERSION.as_bytes());
        h.update([0]);
        h.update(b"record ");
        h.update(kind.as_bytes());
        for p in parts {
            h.update([0]);
            h.update((p.len() as u64).to_le_bytes());
            h.update(p);
        }
        h.finalize().into()
    }

    /// The record under `key`: from memory, else from disk (a valid entry; an invalid one
    /// is counted as rejected and ignored).
    pub fn record(&self, key: &[u8; 32]) -> Option<Vec<u8>> {
        if let Some(r) = self.records.lock().ok().and_then(|m| m.get(key).cloned()) {
            return Some(r);
        }
        let r = self.read_disk(key)?;
        if let Ok(mut m) = self.records.lock() {
            m.insert(*key, r.clone());
        }
        Some(r)
    }

    /// Keeps `payload` as the record under `key`, in memory and (with a directory) on disk.
    pub fn put_record(&self, key: &[u8; 32], payload: &[u8]) -> Result<(), Error> {
        if let Ok(mut m) = self.records.lock() {
            m.insert(*key, payload.to_vec());
        }
        self.write_disk(key, payload)
    }

    /// Path of the disk entry for `key`.
    pub fn entry_path(&self, key: &[u8; 32]) -> Option<PathBuf> {
        let hex: String = key.iter().map(|b| format!("{b:02x}")).collect();
        self.dir.as_ref().map(|d| d.join(format!("{hex}.bin")))
    }

    /// Outcome counts so far.
    pub fn stats(&self) -> CacheStats {
        CacheStats {
            memory_hits: self.memory_hits.load(Ordering::Relaxed),
            disk_hits: self.disk_hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            rejected: self.rejected.load(Ordering::Relaxed),
        }
    }

    /// Forgets the in-memory entries and records (the disk stays).
    pub fn clear_memory(&self) {
        if let Ok(mut m) = self.mem.lock() {
            m.clear();
        }
        if let Ok(mut m) = self.records.lock() {
            m.clear();
        }
    }

    fn read_disk(&self, key: &[u8; 32]) -> Option<Vec<u8>> {
        let path = self.entry_path(key)?;
        let data = std::fs::read(&path).ok()?;
        let valid = data.len() >= HEADER
            && &data[..8] == MAGIC
            && data[8..40] == key[..]
            && u64::from_le_bytes(data[40..48].try_into().ok()?) == (data.len() - HEADER) as u64
            && Sha256::digest(&data[HEADER..])[..] == data[48..80];
        if valid {
            Some(data[HEADER..].to_vec())
        } else {
            tracing::warn!("compile cache: ignoring invalid entry {}", path.display());
            self.rejected.fetch_add(1, Ordering::Relaxed);
            None
        }
    }

    fn write_disk(&self, key: &[u8; 32], payload: &[u8]) -> Result<(), Error> {
        let (Some(dir), Some(path)) = (self.dir.as_ref(), self.entry_path(key)) else {
            return Ok(());
        };
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| Error::Cache { path, source }
        };
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        let mut data = Vec::with_capacity(HEADER + payload.len());
        data.extend(MAGIC);
        data.extend(key);
        data.extend((payload.len() as u64).to_le_bytes());
        data.extend(Sha256::digest(payload));
        data.extend(payload);
        static N: AtomicU64 = AtomicU64::new(0);
        let tmp = path.with_extension(format!(
            "tmp.{}.{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::write(&tmp, &data).map_err(io(&tmp))?;
        std::fs::rename(&tmp, &path).map_err(io(&path))
    }
}

/// Compiles kernels for any [`Target`] through a [`Cache`].
pub struct Compiler {
    cache: Cache,
}

impl Default for Compiler {
    fn default() -> Compiler {
        Compiler::new()
    }
}

impl Compiler {
    /// A compiler caching under the default directory ([`Cache::default_dir`]).
    pub fn new() -> Compiler {
        Compiler {
            cache: Cache::new(Cache::default_dir()),
        }
    }

    /// A compiler with the given cache.
    pub fn with_cache(cache: Cache) -> Compiler {
        Compiler { cache }
    }

    /// The cache.
    pub fn cache(&self) -> &Cache {
        &self.cache
    }

    /// The program of `k` for `target`: from memory, from disk, or compiled (then stored in
    /// both). A disk error when storing is logged, not returned: the program is still good.
    pub fn compile(&self, k: &Kernel, target: Target) -> Result<Arc<Compiled>, Error> {
        let key = Cache::key(k, target);
        if let Some(c) = self
            .cache
            .mem
            .lock()
            .ok()
            .and_then(|m| m.get(&key).cloned())
        {
            self.cache.memory_hits.fetch_add(1, Ordering::Relaxed);
            return Ok(c);
        }
        let (bytes, from_disk) = match self.cache.read_disk(&key) {
            Some(b) => (b, true),
            None => (compile(k, target)?, false),
        };
        let counter = if from_disk {
            &self.cache.disk_hits
        } else {
            &self.cache.misses
        };
        counter.fetch_add(1, Ordering::Relaxed);
        if !from_disk && let Err(e) = self.cache.write_disk(&key, &bytes) {
            tracing::warn!("{e}");
        }
        let c = Arc::new(Compiled {
            target,
            kernel: k.name.clone(),
            bytes,
        });
        if let Ok(mut m) = self.cache.mem.lock() {
            m.insert(key, c.clone());
        }
        Ok(c)
    }
}

/// Compiles without any cache: lowering, LLVM, then linking (GPU) or packaging (CPU).
pub fn compile(k: &Kernel, target: Target) -> Result<Vec<u8>, Error> {
    let ir = crate::lower::lower(k, target)?;
    let obj = crate::codegen::compile_ir(&ir, target, &k.name, crate::codegen::Output::Object)?;
    if target.is_gpu() {
        Ok(am_isa::code_object::link(&obj, &k.name)?)
    } else {
        Ok(crate::cpu::package(k, &obj))
    }
}
