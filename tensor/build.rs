//! Hashes the tensor layer's sources into `AM_TENSOR_SOURCE`, part of the kernel search's
//! on-disk record keys (`src/beam.rs`): a change to the code generator or the optimiser must
//! not be served choices an older build searched and stored under the same kernel text.

include!("../build-support/source_hash.rs");

fn main() {
    println!("cargo:rerun-if-changed=../build-support/source_hash.rs");
    let h = source_hash(&["src"]);
    println!("cargo:rustc-env=AM_TENSOR_SOURCE={h:016x}");
}
