//! Files the user names, read only when they are regular files: opening a FIFO for reading
//! blocks until a writer comes (forever, if none does), and a device or a directory is never
//! what a command means by a file.

use std::path::Path;

use am_firmware::locate::file_kind as kind;
use anyhow::{Context, bail};

/// The size of `path` if it is a regular file (symbolic links followed); an error naming
/// it and what it is otherwise. Looks without opening it.
pub fn regular_size(path: &Path) -> anyhow::Result<u64> {
    let meta = std::fs::metadata(path).with_context(|| format!("reading {}", path.display()))?;
    if !meta.is_file() {
        bail!(
            "{}: not a regular file but {}",
            path.display(),
            kind(meta.file_type())
        );
    }
    Ok(meta.len())
}

/// The bytes of `path`, a regular file.
pub fn read(path: &Path) -> anyhow::Result<Vec<u8>> {
    regular_size(path)?;
    std::fs::read(path).with_context(|| format!("reading {}", path.display()))
}

/// The text of `path`, a regular file.
pub fn read_to_string(path: &Path) -> anyhow::Result<String> {
    regular_size(path)?;
    std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
}

/// `path`, a regular file, opened for reading.
pub fn open(path: &Path) -> anyhow::Result<std::fs::File> {
    regular_size(path)?;
    std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_and_a_device_are_refused_naming_what_they_are() {
        let dir = std::env::temp_dir();
        let e = read(&dir).unwrap_err().to_string();
        assert!(e.contains("not a regular file but a directory"), "{e}");
        let e = read(Path::new("/dev/null")).unwrap_err().to_string();
        assert!(
            e.contains("/dev/null: not a regular file but a character device"),
            "{e}"
        );
    }
}
