//! Hashes the compiler's own sources (and the code-object linker's) into `AM_COMPILER_SOURCE`,
//! part of every on-disk cache key: a change to the lowering or linking must not be served
//! programs an older build compiled and stored under the same kernel text.

include!("../build-support/source_hash.rs");

fn main() {
    println!("cargo:rerun-if-changed=../build-support/source_hash.rs");
    let h = source_hash(&["src", "../isa/src/code_object"]);
    println!("cargo:rustc-env=AM_COMPILER_SOURCE={h:016x}");
}
