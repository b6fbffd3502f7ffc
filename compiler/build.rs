//! Hashes the compiler's own sources (and the code-object linker's) into `AM_COMPILER_SOURCE`,
//! part of every on-disk cache key: a change to the lowering or linking must not be served
//! programs an older build compiled and stored under the same kernel text.

use std::hash::{DefaultHasher, Hasher};
use std::path::Path;

fn hash_dir(dir: &Path, h: &mut DefaultHasher) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut paths: Vec<_> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for p in paths {
        if p.is_dir() {
            hash_dir(&p, h);
        } else if p.extension().is_some_and(|e| e == "rs")
            && let Ok(text) = std::fs::read(&p)
        {
            h.write(p.file_name().map_or(&[][..], |n| n.as_encoded_bytes()));
            h.write(&text);
        }
    }
}

fn main() {
    let mut h = DefaultHasher::new();
    for dir in ["src", "../isa/src/code_object"] {
        println!("cargo:rerun-if-changed={dir}");
        hash_dir(Path::new(dir), &mut h);
    }
    println!("cargo:rustc-env=AM_COMPILER_SOURCE={:016x}", h.finish());
}
