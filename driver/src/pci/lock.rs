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

use crate::{Error, Result};

/// Directory of the lock files.
pub const LOCK_DIR: &str = "/tmp";

/// A held device lock; dropping it releases the lock (the file stays, so that two processes
/// never lock two different files of the same name).
#[derive(Debug)]
pub struct DeviceLock {
    file: File,
    path: PathBuf,
}

impl DeviceLock {
    /// Take the lock of `device` (a BDF such as `0000:03:00.0`) in [`LOCK_DIR`].
    pub fn acquire(device: &str) -> Result<Self> {
        Self::acquire_in(Path::new(LOCK_DIR), device)
    }

    /// Take the lock of `device` in `dir` (tests use a temporary directory).
    pub fn acquire_in(dir: &Path, device: &str) -> Result<Self> {
        let path = dir.join(format!("am_{device}.lock"));
        let io = |op: &'static str, source: std::io::Error| Error::Io {
            device: device.to_string(),
            op,
            path: path.clone(),
            source,
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
                return Err(Error::Locked {
                    device: device.to_string(),
                    path,
                    holder,
                });
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
#[allow(clippy::unwrap_used)]
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
            Err(Error::Locked { path, holder, .. }) => {
                assert_eq!(path, dir.path().join("am_0000:03:00.0.lock"));
                assert_eq!(holder, Some(std::process::id()));
            }
            other => panic!("expected Locked, got {other:?}"),
        }
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
            Error::Locked { holder, .. } => assert_eq!(holder, Some(holder_pid)),
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
