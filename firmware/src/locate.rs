//! Finding firmware files on disk: search path, `.zst`, SHA-256 pins.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Read as _;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::error::{FirmwareError, Result};

/// Environment variable with extra firmware directories (colon-separated), searched first.
pub const FIRMWARE_PATH_ENV: &str = "AM_FIRMWARE_PATH";
/// Environment variable naming a pin file (`sha256sum` format) that [`Locator::from_env`]
/// loads.
pub const FIRMWARE_PINS_ENV: &str = "AM_FIRMWARE_PINS";
/// Where Debian's `firmware-amd-graphics` puts the amdgpu blobs.
pub const SYSTEM_FIRMWARE_DIR: &str = "/lib/firmware/amdgpu";

/// Largest decompressed size accepted from a `.zst` file. The biggest amdgpu blob of the
/// linux-firmware tree is a few MiB; anything far beyond is a corrupt or hostile file.
const MAX_DECOMPRESSED: u64 = 64 << 20;
/// Largest firmware file read, compressed or not: the largest amdgpu firmware files are a
/// few MiB.
const MAX_FILE: u64 = 64 << 20;

/// A SHA-256 digest.
pub type Sha256Digest = [u8; 32];

/// Lower-case hex of a digest.
pub fn hex(digest: &Sha256Digest) -> String {
    let mut s = String::with_capacity(64);
    for b in digest {
        // Writing to a String cannot fail.
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// SHA-256 of `data`.
pub fn sha256(data: &[u8]) -> Sha256Digest {
    Sha256::digest(data).into()
}

/// Expected SHA-256 digests by file name (e.g. `psp_13_0_0_sos.bin`).
///
/// Digests are of the decompressed content, so a pin holds for the plain and the `.zst`
/// form of a file alike.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pins {
    by_name: BTreeMap<String, Sha256Digest>,
}

impl Pins {
    /// No pins: every file is accepted.
    pub fn new() -> Self {
        Self::default()
    }

    /// Pins `name` to `digest`.
    pub fn insert(&mut self, name: impl Into<String>, digest: Sha256Digest) {
        self.by_name.insert(name.into(), digest);
    }

    /// The pin of `name`, if any.
    pub fn get(&self, name: &str) -> Option<&Sha256Digest> {
        self.by_name.get(name)
    }

    /// Number of pins.
    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    /// True when nothing is pinned.
    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    /// Parses `sha256sum` output: `<64 hex digits>  <name>` per line; blank lines and lines
    /// starting with `#` are skipped. Only the file name of a path is kept, so the output of
    /// `sha256sum /lib/firmware/amdgpu/*.bin` works as it is. `.zst` suffixes are not
    /// allowed: pins are of the decompressed content.
    pub fn parse(text: &str, source_name: &str) -> Result<Self> {
        let mut pins = Self::new();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let bad = |reason: &str| FirmwareError::BadPin {
                source_name: source_name.to_string(),
                line: i + 1,
                reason: reason.to_string(),
            };
            let (digest, name) = line
                .split_once(char::is_whitespace)
                .ok_or_else(|| bad("expected `<sha256>  <file name>`"))?;
            // sha256sum marks binary mode with a leading `*` on the name.
            let name = name.trim_start().trim_start_matches('*');
            let name = Path::new(name)
                .file_name()
                .and_then(|n| n.to_str())
                .ok_or_else(|| bad("no file name"))?;
            if name.ends_with(".zst") {
                return Err(bad("pin the decompressed file name, without .zst"));
            }
            let digest =
                parse_hex_digest(digest).ok_or_else(|| bad("digest is not 64 hex digits"))?;
            pins.insert(name, digest);
        }
        Ok(pins)
    }

    /// Reads a pin file (see [`Pins::parse`]).
    pub fn load(path: &Path) -> Result<Self> {
        regular_file(path)?;
        let text = std::fs::read_to_string(path).map_err(|source| FirmwareError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(&text, &path.display().to_string())
    }
}

fn parse_hex_digest(s: &str) -> Option<Sha256Digest> {
    if s.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

/// A firmware file as read from disk (decompressed when it was `.zst`), not yet parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawFile {
    /// The name the driver asked for (always the `.bin` name).
    pub name: String,
    /// Where it was found (ends in `.zst` when it was compressed).
    pub path: PathBuf,
    /// The content, decompressed.
    pub data: Vec<u8>,
}

impl RawFile {
    /// SHA-256 of `data` (computed on each call: opening a device needs no hash unless a
    /// pin asks for one).
    pub fn sha256(&self) -> Sha256Digest {
        sha256(&self.data)
    }
}

/// The firmware search path and the pins to check files against.
#[derive(Debug, Clone, Default)]
pub struct Locator {
    dirs: Vec<PathBuf>,
    pins: Pins,
}

impl Locator {
    /// Searches `dirs` in order, no pins.
    pub fn new(dirs: Vec<PathBuf>) -> Self {
        Self {
            dirs,
            pins: Pins::new(),
        }
    }

    /// `$AM_FIRMWARE_PATH` (colon-separated, empty entries ignored), then
    /// `/lib/firmware/amdgpu`; pins from the file named by `$AM_FIRMWARE_PINS`, if set.
    pub fn from_env() -> Result<Self> {
        let path = std::env::var_os(FIRMWARE_PATH_ENV);
        let mut locator = Self::new(search_dirs(path.as_deref()));
        if let Some(pins) = std::env::var_os(FIRMWARE_PINS_ENV) {
            locator.pins = Pins::load(Path::new(&pins))?;
        }
        Ok(locator)
    }

    /// Replaces the pins.
    pub fn with_pins(mut self, pins: Pins) -> Self {
        self.pins = pins;
        self
    }

    /// The directories searched, in order.
    pub fn dirs(&self) -> &[PathBuf] {
        &self.dirs
    }

    /// The pins in force.
    pub fn pins(&self) -> &Pins {
        &self.pins
    }

    /// Where `name` would be read from: the first directory holding `name` or `name.zst`
    /// (plain first within a directory).
    pub fn find(&self, name: &str) -> Option<PathBuf> {
        self.dirs.iter().find_map(|dir| {
            let plain = dir.join(name);
            if plain.is_file() {
                return Some(plain);
            }
            let zst = dir.join(format!("{name}.zst"));
            zst.is_file().then_some(zst)
        })
    }

    /// Finds, reads, decompresses and checks `name` against its pin.
    pub fn read(&self, name: &str) -> Result<RawFile> {
        let path = self.find(name).ok_or_else(|| FirmwareError::NotFound {
            name: name.to_string(),
            searched: self.searched(),
        })?;
        let data = read_maybe_zst(&path)?;
        if let Some(pin) = self.pins.get(name) {
            let digest = sha256(&data);
            if *pin != digest {
                return Err(FirmwareError::HashMismatch {
                    path,
                    expected: hex(pin),
                    found: hex(&digest),
                });
            }
        }
        Ok(RawFile {
            name: name.to_string(),
            path,
            data,
        })
    }

    fn searched(&self) -> String {
        let dirs: Vec<String> = self.dirs.iter().map(|d| d.display().to_string()).collect();
        dirs.join(":")
    }
}

/// The search directories for a given `$AM_FIRMWARE_PATH` value.
pub fn search_dirs(env_value: Option<&std::ffi::OsStr>) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = env_value
        .map(|v| {
            std::env::split_paths(v)
                .filter(|p| !p.as_os_str().is_empty())
                .collect()
        })
        .unwrap_or_default();
    dirs.push(PathBuf::from(SYSTEM_FIRMWARE_DIR));
    dirs
}

/// The metadata of `path` (links followed) if it is a regular file, looked at before the
/// file is opened: opening a FIFO for reading blocks until a writer comes.
fn regular_file(path: &Path) -> Result<std::fs::Metadata> {
    let meta = std::fs::metadata(path).map_err(|source| FirmwareError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    if meta.is_file() {
        return Ok(meta);
    }
    Err(FirmwareError::NotAFile {
        path: path.to_path_buf(),
        kind: file_kind(meta.file_type()).to_string(),
    })
}

/// What a file that is not a regular one is, for messages ("a FIFO", "a directory", ...).
pub fn file_kind(t: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_dir() {
        "a directory"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a file"
    }
}

/// Reads `path`, decompressing it when its name ends in `.zst`.
pub fn read_maybe_zst(path: &Path) -> Result<Vec<u8>> {
    let io = |source| FirmwareError::Io {
        path: path.to_path_buf(),
        source,
    };
    let meta = regular_file(path)?;
    let file = std::fs::File::open(path).map_err(io)?;
    let too_large = |size| FirmwareError::TooLarge {
        path: path.to_path_buf(),
        size,
        limit: MAX_FILE,
    };
    if meta.len() > MAX_FILE {
        return Err(too_large(meta.len()));
    }
    // The size is checked again while reading: a file may grow, and some files (in /proc)
    // report 0 bytes.
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(MAX_FILE + 1)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > MAX_FILE {
        return Err(too_large(bytes.len() as u64));
    }
    if path.extension().is_some_and(|e| e == "zst") {
        decompress_zst(&bytes).map_err(|reason| FirmwareError::Decompress {
            path: path.to_path_buf(),
            reason,
        })
    } else {
        Ok(bytes)
    }
}

fn decompress_zst(bytes: &[u8]) -> std::result::Result<Vec<u8>, String> {
    decompress_zstd(bytes, MAX_DECOMPRESSED)
}

/// Decompresses a whole zstd stream — every frame in turn, skippable frames skipped — into
/// at most `limit` bytes. The reason is a sentence for the caller's error.
pub fn decompress_zstd(bytes: &[u8], limit: u64) -> std::result::Result<Vec<u8>, String> {
    use ruzstd::decoding::StreamingDecoder;
    use ruzstd::decoding::errors::{FrameDecoderError, ReadFrameHeaderError};
    let mut rest = bytes;
    let mut out = Vec::new();
    // A stream is one or more frames back to back (RFC 8878, section 3).
    while !rest.is_empty() {
        let decoder = match StreamingDecoder::new(&mut rest) {
            Ok(d) => d,
            Err(FrameDecoderError::ReadFrameHeaderError(ReadFrameHeaderError::SkipFrame {
                length,
                ..
            })) => {
                let length = length as usize;
                if length > rest.len() {
                    return Err(format!(
                        "a skippable frame of {length} bytes runs past the end of the data"
                    ));
                }
                rest = &rest[length..];
                continue;
            }
            Err(e) => return Err(e.to_string()),
        };
        let room = (limit + 1).saturating_sub(out.len() as u64);
        decoder
            .take(room)
            .read_to_end(&mut out)
            .map_err(|e| e.to_string())?;
        if out.len() as u64 > limit {
            return Err(format!("output exceeds {limit} bytes"));
        }
    }
    if out.is_empty() && bytes.is_empty() {
        return Err("no zstd frame in the data".into());
    }
    Ok(out)
}
