//! Code generation with LLVM 22 in-process, through its C API (`llvm-sys`): LLVM IR text →
//! optimised module → relocatable object (or assembly) in memory. `docs/DEPENDENCIES.md`
//! has the measurement that chose this over running `llc-22` and `ld.lld-22`.
//!
//! Every call creates its own LLVM context and target machine, so compilations on several
//! threads do not share LLVM state; the targets are registered once per process.

use std::ffi::{CStr, CString, c_char};
use std::ptr;
use std::sync::Once;

use llvm_sys::core::*;
use llvm_sys::error::*;
use llvm_sys::ir_reader::LLVMParseIRInContext2;
use llvm_sys::prelude::*;
use llvm_sys::target::*;
use llvm_sys::target_machine::*;
use llvm_sys::transforms::pass_builder::*;

use crate::{Error, Target};

/// What to produce from a module.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Output {
    /// A relocatable ELF object.
    Object,
    /// Assembly text.
    Assembly,
}

static INIT: Once = Once::new();

pub(crate) fn init() {
    INIT.call_once(|| {
        // SAFETY: LLVM's target registration functions take no arguments and only fill
        // LLVM's global registry; `Once` runs them once, before any other LLVM call here.
        unsafe {
            LLVMInitializeAMDGPUTargetInfo();
            LLVMInitializeAMDGPUTarget();
            LLVMInitializeAMDGPUTargetMC();
            LLVMInitializeAMDGPUAsmPrinter();
            LLVM_InitializeNativeTarget();
            LLVM_InitializeNativeAsmPrinter();
        }
    });
}

/// Takes ownership of an LLVM message string.
///
/// # Safety
/// `m` is null or a string LLVM allocated for the caller to dispose.
unsafe fn take_message(m: *mut c_char) -> String {
    if m.is_null() {
        return String::new();
    }
    // SAFETY: per this function's contract `m` is a live NUL-terminated LLVM string, which is
    // disposed exactly once here.
    unsafe {
        let s = CStr::from_ptr(m).to_string_lossy().into_owned();
        LLVMDisposeMessage(m);
        s
    }
}

/// The host's target triple (normalised), e.g. `x86_64-pc-linux-gnu`.
pub fn host_triple() -> String {
    // SAFETY: both calls return strings owned by the caller, each disposed once.
    unsafe {
        let t = LLVMGetDefaultTargetTriple();
        let n = LLVMNormalizeTargetTriple(t);
        LLVMDisposeMessage(t);
        take_message(n)
    }
}

/// The host CPU's name and the features host code is built with.
pub(crate) fn host_cpu() -> (String, String) {
    // SAFETY: both return caller-owned strings, disposed by take_message.
    let (cpu, features) = unsafe {
        (
            take_message(LLVMGetHostCPUName()),
            take_message(LLVMGetHostCPUFeatures()),
        )
    };
    // LLVM 22 lowers a scalar `llvm.minimumnum`/`maximumnum` wrongly with AVX-512
    // (min(0.75, NaN) gives NaN instead of 0.75; llc-22 -mcpu=x86-64-v4 shows it,
    // x86-64-v3 does not), so host code is built without AVX-512: results must not
    // depend on the machine (`tests/shapes.proptest-regressions` keeps the case).
    let features = if features.is_empty() {
        "-avx512f".to_string()
    } else {
        format!("{features},-avx512f")
    };
    (cpu, features)
}

/// (triple, cpu, features) of a target.
fn machine(target: Target) -> (String, String, String) {
    match target {
        Target::Cpu => {
            let (cpu, features) = host_cpu();
            (host_triple(), cpu, features)
        }
        t => {
            let features = if t.wave_size() == 32 {
                "+wavefrontsize32"
            } else {
                "+wavefrontsize64"
            };
            ("amdgcn-amd-amdhsa".into(), t.name().into(), features.into())
        }
    }
}

/// An owned LLVM target machine.
struct Machine(LLVMTargetMachineRef);

impl Drop for Machine {
    fn drop(&mut self) {
        // SAFETY: created by LLVMCreateTargetMachine and disposed only here.
        unsafe { LLVMDisposeTargetMachine(self.0) }
    }
}

fn target_machine(target: Target, kernel: &str) -> Result<Machine, Error> {
    init();
    let (triple, cpu, features) = machine(target);
    let err = |message: String| Error::Llvm {
        kernel: kernel.to_string(),
        target,
        message,
    };
    let c = |s: &str| CString::new(s).map_err(|_| err(format!("NUL in {s:?}")));
    let (triple_c, cpu_c, feat_c) = (c(&triple)?, c(&cpu)?, c(&features)?);
    let mut t: LLVMTargetRef = ptr::null_mut();
    let mut msg: *mut c_char = ptr::null_mut();
    // SAFETY: the strings are live NUL-terminated C strings for the duration of the calls; `t`
    // and `msg` are out-parameters LLVM fills (msg is disposed by take_message).
    unsafe {
        if LLVMGetTargetFromTriple(triple_c.as_ptr(), &mut t, &mut msg) != 0 {
            return Err(err(take_message(msg)));
        }
        let tm = LLVMCreateTargetMachine(
            t,
            triple_c.as_ptr(),
            cpu_c.as_ptr(),
            feat_c.as_ptr(),
            LLVMCodeGenOptLevel::LLVMCodeGenLevelAggressive,
            LLVMRelocMode::LLVMRelocPIC,
            LLVMCodeModel::LLVMCodeModelDefault,
        );
        if tm.is_null() {
            return Err(err(format!("no target machine for {triple} {cpu}")));
        }
        Ok(Machine(tm))
    }
}

/// The data layout string of `target`'s machine (the `target datalayout` line of the IR).
pub fn datalayout(target: Target) -> Result<String, Error> {
    Ok(datalayout_of(&target_machine(target, "-")?))
}

/// Optimises the LLVM IR `ir` (from [`crate::lower::lower`]) with the O3 pipeline and generates
/// an object or assembly for `target`. `kernel` names the kernel in errors.
pub fn compile_ir(ir: &str, target: Target, kernel: &str, out: Output) -> Result<Vec<u8>, Error> {
    let tm = target_machine(target, kernel)?;
    let err = |message: String| Error::Llvm {
        kernel: kernel.to_string(),
        target,
        message,
    };
    let dl = datalayout_of(&tm);
    // LLVM's lexer needs a NUL after the text.
    let text = format!("target datalayout = \"{dl}\"\n{ir}\0");
    let name = CString::new(kernel).unwrap_or_default();
    let passes = CString::new("default<O3>").unwrap_or_default();
    // SAFETY: the context, module, buffers and pass options are created, used and disposed in
    // this block in LLVM's documented order: the input buffer borrows `text` (alive for the
    // whole block) and is disposed after parsing; the module is disposed before its context;
    // error messages are disposed once.
    unsafe {
        let ctx = LLVMContextCreate();
        let buf = LLVMCreateMemoryBufferWithMemoryRange(
            text.as_ptr() as *const c_char,
            text.len() - 1,
            name.as_ptr(),
            1,
        );
        let mut module: LLVMModuleRef = ptr::null_mut();
        let mut msg: *mut c_char = ptr::null_mut();
        let parsed = LLVMParseIRInContext2(ctx, buf, &mut module, &mut msg);
        LLVMDisposeMemoryBuffer(buf);
        if parsed != 0 {
            let m = take_message(msg);
            LLVMContextDispose(ctx);
            return Err(err(format!("the lowered IR does not parse: {m}")));
        }
        let result = (|| {
            let opts = LLVMCreatePassBuilderOptions();
            LLVMPassBuilderOptionsSetVerifyEach(opts, 0);
            let e = LLVMRunPasses(module, passes.as_ptr(), tm.0, opts);
            LLVMDisposePassBuilderOptions(opts);
            if !e.is_null() {
                return Err(err(take_error(e)));
            }
            let mut mb: LLVMMemoryBufferRef = ptr::null_mut();
            let kind = match out {
                Output::Object => LLVMCodeGenFileType::LLVMObjectFile,
                Output::Assembly => LLVMCodeGenFileType::LLVMAssemblyFile,
            };
            if LLVMTargetMachineEmitToMemoryBuffer(tm.0, module, kind, &mut msg, &mut mb) != 0 {
                return Err(err(take_message(msg)));
            }
            let start = LLVMGetBufferStart(mb) as *const u8;
            let len = LLVMGetBufferSize(mb);
            let bytes = std::slice::from_raw_parts(start, len).to_vec();
            LLVMDisposeMemoryBuffer(mb);
            Ok(bytes)
        })();
        LLVMDisposeModule(module);
        LLVMContextDispose(ctx);
        result
    }
}

fn datalayout_of(tm: &Machine) -> String {
    // SAFETY: tm is live; the data layout is created and disposed here, its string copied.
    unsafe {
        let dl = LLVMCreateTargetDataLayout(tm.0);
        let s = take_message(LLVMCopyStringRepOfTargetData(dl));
        LLVMDisposeTargetData(dl);
        s
    }
}

/// The message of an LLVM error (consumed).
///
/// # Safety
/// `e` is a non-null error LLVM returned and nobody else consumes.
pub(crate) unsafe fn take_error(e: LLVMErrorRef) -> String {
    // SAFETY: per the contract `e` is an unconsumed error; LLVMGetErrorMessage consumes it and
    // its message is disposed once.
    unsafe {
        let m = LLVMGetErrorMessage(e);
        let s = CStr::from_ptr(m).to_string_lossy().into_owned();
        LLVMDisposeErrorMessage(m);
        s
    }
}
