//! The firmware files of one device, read and parsed.

use std::path::PathBuf;
use std::sync::Arc;

use crate::error::{FirmwareError, Result};
use crate::ip::{FileSpec, IpVersions, Role};
use crate::locate::{Locator, RawFile, Sha256Digest};
use crate::parse::{self, Image};

/// One firmware file, read, verified and parsed.
#[derive(Debug, Clone)]
pub struct LoadedFile {
    /// The role it plays and the name it was asked for by.
    pub spec: FileSpec,
    /// Where it was read from.
    pub path: PathBuf,
    /// Its content (decompressed), shared with the payloads of a load plan.
    pub data: Arc<Vec<u8>>,
    /// What its headers say.
    pub image: Image,
}

impl LoadedFile {
    /// Parses a file already read.
    pub fn from_raw(spec: FileSpec, raw: RawFile) -> Result<Self> {
        let image = parse::parse(&raw.name, &raw.data)?;
        Ok(Self {
            spec,
            path: raw.path,
            data: Arc::new(raw.data),
            image,
        })
    }

    /// SHA-256 of `data`, computed on each call.
    pub fn sha256(&self) -> Sha256Digest {
        crate::locate::sha256(&self.data)
    }

    /// Finds, reads, verifies and parses `spec`.
    pub fn load(locator: &Locator, spec: &FileSpec) -> Result<Self> {
        Self::from_raw(spec.clone(), locator.read(&spec.name)?)
    }
}

/// Every firmware file the driver loads for one set of IP versions.
#[derive(Debug, Clone)]
pub struct FirmwareSet {
    /// The IP versions the files were chosen for.
    pub ips: IpVersions,
    /// The files, in [`IpVersions::files`] order.
    pub files: Vec<LoadedFile>,
}

impl FirmwareSet {
    /// Loads every file of [`IpVersions::files`]; the first missing or malformed file is the
    /// error.
    pub fn load(ips: IpVersions, locator: &Locator) -> Result<Self> {
        let files = ips
            .files()
            .iter()
            .map(|spec| LoadedFile::load(locator, spec))
            .collect::<Result<Vec<_>>>()?;
        Ok(Self { ips, files })
    }

    /// The file playing `role`.
    pub fn file(&self, role: Role) -> Option<&LoadedFile> {
        self.files.iter().find(|f| f.spec.role == role)
    }

    /// The file playing `role`, or an error naming the file the set lacks.
    pub(crate) fn require(&self, role: Role) -> Result<&LoadedFile> {
        self.file(role).ok_or_else(|| {
            let name = self
                .ips
                .files()
                .into_iter()
                .find(|s| s.role == role)
                .map(|s| s.name)
                .unwrap_or_else(|| role.name().to_string());
            FirmwareError::NotFound {
                name,
                searched: "the firmware set".to_string(),
            }
        })
    }
}
