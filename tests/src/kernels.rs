//! Kernels compiled by LLVM 22 for the end-to-end tests, uploaded into VRAM as a code
//! object's loadable image, and the PM4 packets that dispatch one.

use std::path::PathBuf;
use std::process::Command;

use am_emu::{CodeObject, Kernel};
use am_mock::profile::RegIp;

use crate::pm4;
use crate::rig::{Buf, Rig};

/// Compile OpenCL C for `mcpu` with clang-22 and link it with ld.lld-22.
pub fn compile_cl(src: &str, mcpu: &str) -> Vec<u8> {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let dir: PathBuf = std::env::temp_dir().join(format!(
        "am-tests-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let (cl, obj, hsaco) = (dir.join("k.cl"), dir.join("k.o"), dir.join("k.hsaco"));
    std::fs::write(&cl, src).unwrap();
    let target = format!("-mcpu={mcpu}");
    let steps: [(&str, Vec<&std::ffi::OsStr>); 2] = [
        (
            "clang-22",
            vec![
                "-x".as_ref(),
                "cl".as_ref(),
                "-cl-std=CL2.0".as_ref(),
                "--target=amdgcn-amd-amdhsa".as_ref(),
                target.as_ref(),
                "-nogpulib".as_ref(),
                "-O3".as_ref(),
                "-c".as_ref(),
                cl.as_os_str(),
                "-o".as_ref(),
                obj.as_os_str(),
            ],
        ),
        (
            "ld.lld-22",
            vec![
                "-shared".as_ref(),
                obj.as_os_str(),
                "-o".as_ref(),
                hsaco.as_os_str(),
            ],
        ),
    ];
    for (tool, args) in steps {
        let out = Command::new(tool).args(args).output().unwrap_or_else(|e| {
            panic!("cannot run {tool} ({e}): install LLVM 22 with scripts/setup")
        });
        assert!(
            out.status.success(),
            "{tool}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let bytes = std::fs::read(&hsaco).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    bytes
}

/// A code object uploaded to VRAM: its loadable segments at `code.va + vaddr`.
pub struct Loaded {
    /// The parsed code object.
    pub co: CodeObject,
    /// Where its image is.
    pub code: Buf,
}

impl Loaded {
    /// Upload `bytes` (a code object) to fresh VRAM.
    pub fn new(rig: &Rig, bytes: &[u8]) -> Loaded {
        let co = CodeObject::parse(bytes, "test kernels").unwrap();
        let end = co
            .segments
            .iter()
            .map(|s| s.vaddr + s.bytes.len() as u64)
            .max()
            .unwrap();
        let code = rig.vram(end);
        for s in &co.segments {
            rig.write_noflush(&code, s.vaddr, &s.bytes);
        }
        rig.dev.hdp_flush().unwrap();
        Loaded { co, code }
    }

    /// A kernel by name.
    pub fn kernel(&self, name: &str) -> &Kernel {
        self.co.kernel(name).unwrap()
    }

    /// The GPU address of a kernel's first instruction.
    pub fn entry(&self, k: &Kernel) -> u64 {
        self.code.va + k.entry
    }

    /// The GPU address of a kernel's descriptor.
    pub fn descriptor(&self, k: &Kernel) -> u64 {
        self.code.va + k.descriptor_address
    }
}

/// PM4 packets that dispatch `k` over `groups` workgroups of `wg` work-items with its
/// kernel arguments at `kernarg` (the kernel takes only the kernarg pointer in its user
/// SGPRs): `SET_SH_REG` of `COMPUTE_PGM_*`, `COMPUTE_USER_DATA_0/1`,
/// `COMPUTE_NUM_THREAD_*`, `COMPUTE_TMPRING_SIZE`, then `DISPATCH_DIRECT`.
pub fn dispatch(
    rig: &Rig,
    l: &Loaded,
    k: &Kernel,
    kernarg: u64,
    groups: [u32; 3],
    wg: [u32; 3],
) -> Vec<u32> {
    let sh = |name: &str| rig.reg(RegIp::Gc, name) - 0x2c00;
    let kd = &k.descriptor;
    let pgm = l.entry(k) >> 8;
    let mut p = vec![];
    p.extend(pm4::set_sh(
        sh("COMPUTE_PGM_LO"),
        &[pgm as u32, (pgm >> 32) as u32],
    ));
    p.extend(pm4::set_sh(
        sh("COMPUTE_PGM_RSRC1"),
        &[kd.compute_pgm_rsrc1, kd.compute_pgm_rsrc2],
    ));
    p.extend(pm4::set_sh(
        sh("COMPUTE_PGM_RSRC3"),
        &[kd.compute_pgm_rsrc3],
    ));
    p.extend(pm4::set_sh(sh("COMPUTE_TMPRING_SIZE"), &[0]));
    p.extend(pm4::set_sh(
        sh("COMPUTE_USER_DATA_0"),
        &[kernarg as u32, (kernarg >> 32) as u32],
    ));
    p.extend(pm4::set_sh(sh("COMPUTE_NUM_THREAD_X"), &wg));
    p.extend(pm4::dispatch(groups, kd.wave_size() == 32));
    p
}
