use std::path::PathBuf;

/// Everything that can go wrong while locating, verifying or parsing a firmware file.
///
/// Every variant names the file; parse errors also name the byte offset of the field or
/// region at fault, so a message alone tells where to look with a hex dump.
#[derive(Debug, thiserror::Error)]
pub enum FirmwareError {
    /// The file is in none of the search directories, neither plain nor `.zst`.
    #[error("{name}: not found (searched {searched})")]
    NotFound {
        /// File name as the driver asks for it, e.g. `gc_11_0_0_mec.bin`.
        name: String,
        /// The directories searched, colon-separated, in order.
        searched: String,
    },
    /// Reading (or writing, for the synthetic builder) a file failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file that could not be read or written.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// The path is not a regular file (a directory, a device, a pipe).
    #[error("{}: not a regular file but {kind}", path.display())]
    NotAFile {
        /// The path.
        path: PathBuf,
        /// What it is instead (`a directory`, `a character device` …).
        kind: String,
    },
    /// The file is larger than any firmware file.
    #[error("{}: {size} bytes is larger than the {limit} bytes of any firmware file", path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its size.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// A `.zst` file did not decompress.
    #[error("{}: zstd decompression failed: {reason}", path.display())]
    Decompress {
        /// The compressed file.
        path: PathBuf,
        /// What the decoder said, or that the output exceeded the size limit.
        reason: String,
    },
    /// The file is too short for a header or table the driver must read.
    #[error("{file}: truncated: {what} at offset {offset:#x} needs {need} bytes, file has {len}")]
    Truncated {
        /// File name.
        file: String,
        /// The header or table being read.
        what: String,
        /// Where it starts.
        offset: usize,
        /// How many bytes it needs from `offset`.
        need: usize,
        /// File length.
        len: usize,
    },
    /// A header field points at a region that does not fit in the file.
    #[error(
        "{file}: {what} ({offset:#x}..{end:#x}, from the header field at offset {field_offset:#x}) \
         lies past the end of the file ({len:#x} bytes)"
    )]
    OutOfBounds {
        /// File name.
        file: String,
        /// The region, in the header's words (e.g. `psp_fw_bin[3] KDB`).
        what: String,
        /// Offset of the header field that describes the region.
        field_offset: usize,
        /// Start of the region in the file.
        offset: u64,
        /// End (exclusive) of the region in the file.
        end: u64,
        /// File length.
        len: usize,
    },
    /// The header version is not one this crate (or the driver) knows for this kind of file.
    #[error(
        "{file}: unknown {kind} header version {major}.{minor} (common_firmware_header at offset {offset:#x})"
    )]
    UnknownVersion {
        /// File name.
        file: String,
        /// Kind of firmware (e.g. `RLC`).
        kind: &'static str,
        /// `header_version_major`.
        major: u16,
        /// `header_version_minor`.
        minor: u16,
        /// Offset of the version fields.
        offset: usize,
    },
    /// A value in the header is impossible (e.g. a jump table larger than the ucode).
    #[error("{file}: invalid {what} at offset {offset:#x}: {reason}")]
    Invalid {
        /// File name.
        file: String,
        /// The field, in the header's words.
        what: String,
        /// Offset of the field.
        offset: usize,
        /// Why the value cannot be right.
        reason: String,
    },
    /// A component the PSP load sequence cannot do without is absent from the file.
    #[error("{file}: no {component} component in the descriptor table at offset {offset:#x}")]
    MissingComponent {
        /// File name.
        file: String,
        /// The missing component (e.g. `SOS`).
        component: String,
        /// Offset of the descriptor table.
        offset: usize,
    },
    /// The file's SHA-256 differs from its pin.
    #[error("{}: SHA-256 mismatch: pinned {expected}, file has {found}", path.display())]
    HashMismatch {
        /// The file that was read.
        path: PathBuf,
        /// The pinned digest (hex).
        expected: String,
        /// The digest of the (decompressed) content (hex).
        found: String,
    },
    /// A pin list could not be read.
    #[error("{source_name}:{line}: bad pin line: {reason}")]
    BadPin {
        /// Where the pins came from (a path or `AM_FIRMWARE_PINS`).
        source_name: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong with it.
        reason: String,
    },
    /// The IP version set or profile is not one the firmware tables know.
    #[error("unknown profile {0:?} (known: navi31, mi300x, mi350x)")]
    UnknownProfile(String),
    /// A firmware file of the set is of the wrong kind for the role it fills.
    #[error("{file}: expected {expected} firmware, parsed as {found}")]
    WrongKind {
        /// File name.
        file: String,
        /// What the load plan needs there.
        expected: &'static str,
        /// What the file holds.
        found: &'static str,
    },
}

/// Result with [`FirmwareError`].
pub type Result<T, E = FirmwareError> = std::result::Result<T, E>;
