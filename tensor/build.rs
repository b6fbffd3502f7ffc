//! Hashes the tensor layer's sources into `AM_TENSOR_SOURCE`, part of the kernel search's
//! on-disk record keys (`src/beam.rs`): a change to the code generator or the optimiser must
//! not be served choices an older build searched and stored under the same kernel text.

use std::hash::{DefaultHasher, Hasher};
use std::path::Path;

fn hash_sources(dir: &Path, h: &mut DefaultHasher) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut paths: Vec<_> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for p in paths {
        if p.is_dir() {
            hash_sources(&p, h);
        } else if p.extension().is_some_and(|e| e == "rs")
            && let Ok(text) = std::fs::read(&p)
        {
            h.write(p.file_name().map_or(&[][..], |n| n.as_encoded_bytes()));
            h.write(&text);
        }
    }
}

fn main() {
    println!("cargo:rerun-if-changed=src");
    let mut h = DefaultHasher::new();
    hash_sources(Path::new("src"), &mut h);
    println!("cargo:rustc-env=AM_TENSOR_SOURCE={:016x}", h.finish());
}
