//! What several CLI tests share: an `am serve` child holding mock devices in its process,
//! so that they outlive each `am` command as a GPU outlives a driver instance.

#![allow(clippy::unwrap_used)] // unwrap is how a test says "this must work"

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

/// An `am serve` child, killed (by its own pid) when dropped.
pub struct Server {
    child: Child,
    /// The address it listens on (`127.0.0.1:PORT`).
    pub addr: String,
}

impl Server {
    /// Serve `devices` on a free local port, with `env` set for the server.
    pub fn start(devices: &[&str], env: &[(&str, &str)]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_am"))
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(devices)
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let mut server = Server {
            child,
            addr: String::new(),
        };
        let mut lines = BufReader::new(stdout).lines();
        let line = lines.next().unwrap().unwrap();
        server.addr = line
            .trim()
            .strip_prefix("am serve: listening on ")
            .unwrap()
            .to_string();
        // Keep reading: with the pipe closed the server would die at its next line of output.
        std::thread::spawn(move || lines.for_each(drop));
        server
    }

    /// The `remote:` spec of the served device at `index`.
    pub fn spec(&self, index: usize) -> String {
        format!("remote:{}:{index}", self.addr)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
