//! What several CLI tests share: an `am serve` child holding mock devices in its process,
//! so that they outlive each `am` command as a GPU outlives a driver instance; a scratch
//! directory per test with its own compile cache; a kernel in the IR's text form; a fake
//! machine (sysfs, procfs, /dev, firmware) for `am doctor`.

#![allow(clippy::unwrap_used)] // unwrap is how a test says "this must work"
#![allow(dead_code)] // each test file uses its part

pub mod fake_machine;

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

/// A mock device of this process served over the remote protocol on a free local port (a
/// thread that lives as long as the process), so that `am` commands in child processes see
/// the state this process gives it. Returns the `remote:` spec of device 0.
pub fn serve_here(gpu: &am_mock::MockGpu) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let dev: std::sync::Arc<dyn am_driver::PciDevice> = gpu.open();
    std::thread::spawn(move || {
        let _ = am_driver::pci::remote::serve(listener, vec![dev], Default::default());
    });
    format!("remote:{addr}:0")
}

/// Driver options for tests: no reset, no power limit, no settle wait after a mode1 reset.
pub fn opts() -> am_driver::Options {
    let mut o = am_driver::Options::from_env("test").unwrap();
    o.force_reset = false;
    o.power_limit_w = None;
    o.timeouts.mode1_settle = std::time::Duration::ZERO;
    o
}

/// Run `am ARGS…`; its stdout, or a panic with its stderr.
pub fn am(args: &[&str]) -> String {
    am_env(args, &[])
}

/// Run `am ARGS…` with environment variables set; its stdout, or a panic with its stderr.
pub fn am_env(args: &[&str], env: &[(&str, &str)]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_am"))
        .args(args)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "am {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Run `am ARGS…`, which must fail; its stderr.
pub fn am_fails(args: &[&str], env: &[(&str, &str)]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_am"))
        .args(args)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    assert!(
        !out.status.success(),
        "am {args:?} should fail: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8(out.stderr).unwrap()
}

/// `am ARGS… --json`, parsed.
pub fn am_json(args: &[&str]) -> serde_json::Value {
    let mut a = args.to_vec();
    a.push("--json");
    let s = am(&a);
    serde_json::from_str(&s).unwrap_or_else(|e| panic!("{e}: {s}"))
}

/// Compare `text` with the golden file `tests/golden/NAME`; `AM_BLESS=1` rewrites it.
pub fn golden(name: &str, text: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    if std::env::var("AM_BLESS").is_ok_and(|v| v == "1") {
        std::fs::write(&path, text).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (AM_BLESS=1 writes it)", path.display()));
    assert_eq!(text, want, "output differs from {}", path.display());
}

/// saxpy in the IR's text form (`y = a·x + y` over `n` elements, workgroups of 64).
pub const SAXPY: &str = "kernel saxpy(%x: ptr<global, f32> noalias, %y: ptr<global, f32>, %a: f32, %n: u32) workgroup(64, 1, 1) {
  %g = group_id x
  %l = local_id x
  %w = const u32 64
  %b = mul %g, %w
  %i = add %b, %l
  %in = lt %i, %n
  if %in {
    %xv = load %x[%i] : f32
    %yv = load %y[%i] : f32
    %r = fma %a, %xv, %yv
    store %y[%i], %r
  }
}
";

/// A scratch directory, removed when dropped.
pub struct Dir(pub std::path::PathBuf);

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A fresh scratch directory named after `tag` and this test process.
pub fn dir(tag: &str) -> Dir {
    let d = std::env::temp_dir().join(format!("am-cli-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    Dir(d)
}

/// Run `am ARGS…` in `d` with `env` set and the compile cache inside `d` (never the user's).
pub fn am_in(d: &Dir, args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_am"))
        .args(args)
        .current_dir(&d.0)
        .env("XDG_CACHE_HOME", d.0.join("cache"))
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

/// A FIFO (named pipe) at `path`: opening it for reading blocks until a writer comes.
pub fn fifo(path: &std::path::Path) {
    let st = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(st.success(), "mkfifo {}", path.display());
}

/// Run `am ARGS…` in `d` as [`am_in`] does, killed if it has not ended within a minute: a
/// command blocked for good (opening a FIFO that no one writes, say) then fails its test
/// instead of hanging it.
pub fn am_in_bounded(d: &Dir, args: &[&str]) -> std::process::Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_am"))
        .args(args)
        .current_dir(&d.0)
        .env("XDG_CACHE_HOME", d.0.join("cache"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let end = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > end {
            let _ = child.kill();
            let _ = child.wait();
            panic!("am {args:?} was still running after 60 s (blocked?)");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}
