//! One driver per device: an exclusive `flock` on `/tmp/am_<bdf>.lock`.
//!
//! Two driver instances on one GPU corrupt each other's rings and page tables, so opening a
//! device takes this lock first. `flock` locks belong to the open file description: they are
//! released when the process exits, however it exits, and a second `open` of the same file in
//! the same process conflicts just like another process does. The holder writes its pid into
//! the file so that the loser can say who holds the device.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::{Error, ErrorKind, Result};

/// Directory of the lock files.
pub const LOCK_DIR: &str = "/tmp";

/// Environment variable that moves the lock directory (tests, and machines whose `/tmp` is
/// private per service).
pub const LOCK_DIR_ENV: &str = "AM_LOCK_DIR";

/// The lock directory: `$AM_LOCK_DIR` when set, else [`LOCK_DIR`].
pub fn lock_dir() -> PathBuf {
    match std::env::var_os(LOCK_DIR_ENV) {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => PathBuf::from(LOCK_DIR),
    }
}

/// A process holding a device lock, found without taking the lock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Holder {
    /// The device the lock file is named after (`0000:03:00.0`).
    pub device: String,
    /// The lock file.
    pub path: PathBuf,
    /// The holder's pid: the kernel's (`/proc/locks`), else the one the holder wrote.
    pub pid: Option<u32>,
    /// Its command line (`/proc/PID/cmdline`), when readable.
    pub command: Option<String>,
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.pid, &self.command) {
            (Some(pid), Some(cmd)) => write!(f, "pid {pid} ({cmd})")?,
            (Some(pid), None) => write!(f, "pid {pid}")?,
            (None, _) => write!(f, "an unknown process")?,
        }
        write!(f, ", lock file {}", self.path.display())
    }
}

/// The command line of a process, arguments joined by spaces.
pub fn process_command(pid: u32) -> Option<String> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let words: Vec<String> = raw
        .split(|&b| b == 0)
        .filter(|w| !w.is_empty())
        .map(|w| String::from_utf8_lossy(w).into_owned())
        .collect();
    (!words.is_empty()).then(|| words.join(" "))
}

/// The pids the kernel lists in `/proc/locks` for an `flock` on the file with this device
/// number and inode.
fn kernel_lock_pids(dev: u64, ino: u64) -> Vec<u32> {
    let Ok(text) = std::fs::read_to_string("/proc/locks") else {
        return vec![];
    };
    let (major, minor) = (libc::major(dev) as u64, libc::minor(dev) as u64);
    text.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            // `N: FLOCK ADVISORY WRITE PID MAJ:MIN:INODE START END` (a blocked waiter has
            // `->` after the number and is not a holder).
            if f.get(1) != Some(&"FLOCK") {
                return None;
            }
            let pid = f.get(4)?.parse::<u32>().ok()?;
            let mut id = f.get(5)?.split(':');
            let maj = u64::from_str_radix(id.next()?, 16).ok()?;
            let min = u64::from_str_radix(id.next()?, 16).ok()?;
            let inode = id.next()?.parse::<u64>().ok()?;
            (maj == major && min == minor && inode == ino).then_some(pid)
        })
        .collect()
}

/// Who holds the lock of `device` in `dir`, read without taking it: `None` when no process
/// holds it (or no lock file exists). A process holds it when the kernel lists an `flock`
/// on the file, or — where `/proc/locks` says nothing — when a shared `flock` attempt
/// fails.
pub fn holder_in(dir: &Path, device: &str) -> Result<Option<Holder>> {
    use std::os::unix::fs::MetadataExt;
    let path = dir.join(format!("am_{device}.lock"));
    let mut file = match File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(Error::new(
                device.to_string(),
                ErrorKind::Io {
                    op: "open",
                    path,
                    source,
                },
            ));
        }
    };
    let meta = file.metadata().map_err(|source| {
        Error::new(
            device.to_string(),
            ErrorKind::Io {
                op: "stat",
                path: path.clone(),
                source,
            },
        )
    })?;
    let kernel = kernel_lock_pids(meta.dev(), meta.ino());
    let held = if kernel.is_empty() {
        // SAFETY: `file` is an open descriptor owned by this function; flock has no memory
        // effects. A shared lock taken here is dropped at once (closing the file).
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_SH | libc::LOCK_NB) };
        rc != 0
    } else {
        true
    };
    if !held {
        return Ok(None);
    }
    let mut text = String::new();
    let written = file
        .read_to_string(&mut text)
        .ok()
        .and_then(|_| text.trim().parse::<u32>().ok());
    let pid = kernel.first().copied().or(written);
    Ok(Some(Holder {
        device: device.to_string(),
        path,
        pid,
        command: pid.and_then(process_command),
    }))
}

/// Every device whose lock in `dir` some process holds, sorted by device.
pub fn holders_in(dir: &Path) -> Vec<Holder> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return vec![];
    };
    let mut devices: Vec<String> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            Some(name.strip_prefix("am_")?.strip_suffix(".lock")?.to_string())
        })
        .collect();
    devices.sort();
    devices
        .iter()
        .filter_map(|d| holder_in(dir, d).ok().flatten())
        .collect()
}

/// A held device lock; dropping it releases the lock (the file stays, so that two processes
/// never lock two different files of the same name).
#[derive(Debug)]
pub struct DeviceLock {
    file: File,
    path: PathBuf,
}

impl DeviceLock {
    /// Take the lock of `device` (a BDF such as `0000:03:00.0`) in [`lock_dir`].
    pub fn acquire(device: &str) -> Result<Self> {
        Self::acquire_in(&lock_dir(), device)
    }

    /// Take the lock of `device` in `dir` (tests use a temporary directory).
    pub fn acquire_in(dir: &Path, device: &str) -> Result<Self> {
        let path = dir.join(format!("am_{device}.lock"));
        let io = |op: &'static str, source: std::io::Error| {
            Error::new(
                device.to_string(),
                ErrorKind::Io {
                    op,
                    path: path.clone(),
                    source,
                },
            )
        };
        // Not truncated on open: the current holder's pid must survive a failed attempt.
        // World-writable so that a lock left by root does not lock out a user for good.
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o666)
            .open(&path)
            .map_err(|e| io("open", e))?;
        // SAFETY: `file` is an open descriptor owned by this function; flock has no memory
        // effects.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc != 0 {
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
                let mut text = String::new();
                let holder = file
                    .read_to_string(&mut text)
                    .ok()
                    .and_then(|_| text.trim().parse::<u32>().ok());
                return Err(Error::new(
                    device.to_string(),
                    ErrorKind::Locked { path, holder },
                ));
            }
            return Err(io("flock", err));
        }
        file.set_len(0).map_err(|e| io("truncate", e))?;
        file.seek(SeekFrom::Start(0)).map_err(|e| io("seek", e))?;
        writeln!(file, "{}", std::process::id()).map_err(|e| io("write", e))?;
        Ok(Self { file, path })
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for DeviceLock {
    fn drop(&mut self) {
        // Clear the pid so a stale number never names an unrelated process; closing the
        // file (right after) releases the lock.
        let _ = self.file.set_len(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::TempDir;
    use std::io::BufRead;
    use std::process::{Command, Stdio};

    #[test]
    fn second_open_in_the_same_process_is_locked_and_names_us() {
        let dir = TempDir::new();
        let first = DeviceLock::acquire_in(dir.path(), "0000:03:00.0").unwrap();
        let text = std::fs::read_to_string(first.path()).unwrap();
        assert_eq!(text.trim(), std::process::id().to_string());
        match DeviceLock::acquire_in(dir.path(), "0000:03:00.0") {
            Err(Error {
                kind: ErrorKind::Locked { path, holder, .. },
                ..
            }) => {
                assert_eq!(path, dir.path().join("am_0000:03:00.0.lock"));
                assert_eq!(holder, Some(std::process::id()));
            }
            other => panic!("expected Locked, got {other:?}"),
        }
    }

    #[test]
    fn holder_is_found_without_taking_the_lock_and_gone_after_drop() {
        let dir = TempDir::new();
        assert_eq!(holder_in(dir.path(), "0000:07:00.0").unwrap(), None);
        let lock = DeviceLock::acquire_in(dir.path(), "0000:07:00.0").unwrap();
        let h = holder_in(dir.path(), "0000:07:00.0").unwrap().unwrap();
        assert_eq!(h.pid, Some(std::process::id()));
        assert_eq!(h.path, lock.path());
        assert!(h.command.is_some());
        // Looking did not take the lock from its holder.
        assert!(matches!(
            DeviceLock::acquire_in(dir.path(), "0000:07:00.0"),
            Err(Error {
                kind: ErrorKind::Locked { .. },
                ..
            })
        ));
        assert_eq!(holders_in(dir.path()), vec![h]);
        drop(lock);
        assert_eq!(holder_in(dir.path(), "0000:07:00.0").unwrap(), None);
        assert!(holders_in(dir.path()).is_empty());
    }

    #[test]
    fn lock_is_free_again_after_drop() {
        let dir = TempDir::new();
        drop(DeviceLock::acquire_in(dir.path(), "0000:04:00.0").unwrap());
        DeviceLock::acquire_in(dir.path(), "0000:04:00.0").unwrap();
    }

    #[test]
    fn different_devices_do_not_conflict() {
        let dir = TempDir::new();
        let _a = DeviceLock::acquire_in(dir.path(), "0000:03:00.0").unwrap();
        let _b = DeviceLock::acquire_in(dir.path(), "0000:83:00.0").unwrap();
    }

    #[test]
    fn lock_held_by_another_process_names_that_process() {
        let dir = TempDir::new();
        let path = dir.path().join("am_0000:05:00.0.lock");
        // util-linux flock holds the lock; the shell it runs writes its own pid into the file
        // as our holder would, says so, and waits until we close its stdin.
        let mut child = Command::new("flock")
            .arg("-xn")
            .arg(&path)
            .args(["sh", "-c"])
            .arg(format!(
                "echo $$ > '{}'; echo ready; read _ || true",
                path.display()
            ))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line.trim(), "ready");
        let holder_pid: u32 = std::fs::read_to_string(&path)
            .unwrap()
            .trim()
            .parse()
            .unwrap();

        let err = DeviceLock::acquire_in(dir.path(), "0000:05:00.0").unwrap_err();
        let msg = err.to_string();
        match err {
            Error {
                kind: ErrorKind::Locked { holder, .. },
                ..
            } => assert_eq!(holder, Some(holder_pid)),
            other => panic!("expected Locked, got {other:?}"),
        }
        assert!(msg.contains(&path.display().to_string()), "{msg}");
        assert!(msg.contains(&format!("pid {holder_pid}")), "{msg}");

        drop(child.stdin.take());
        assert!(child.wait().unwrap().success());
        let lock = DeviceLock::acquire_in(dir.path(), "0000:05:00.0").unwrap();
        let text = std::fs::read_to_string(lock.path()).unwrap();
        assert_eq!(text.trim(), std::process::id().to_string());
    }
}
