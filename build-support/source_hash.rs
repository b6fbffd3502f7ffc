// Included by the build scripts that key an on-disk cache by a crate's sources
// (`compiler/build.rs`, `tensor/build.rs`): `include!` it, then call `source_hash`.

/// A hash of every `.rs` file under `dirs` (names and contents, in path order), each dir
/// also registered with cargo so that a change reruns the build script.
fn source_hash(dirs: &[&str]) -> u64 {
    use std::hash::{DefaultHasher, Hasher};
    use std::path::Path;

    fn walk(dir: &Path, h: &mut DefaultHasher) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        let mut paths: Vec<_> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
        paths.sort();
        for p in paths {
            if p.is_dir() {
                walk(&p, h);
            } else if p.extension().is_some_and(|e| e == "rs")
                && let Ok(text) = std::fs::read(&p)
            {
                h.write(p.file_name().map_or(&[][..], |n| n.as_encoded_bytes()));
                h.write(&text);
            }
        }
    }

    let mut h = DefaultHasher::new();
    for dir in dirs {
        println!("cargo:rerun-if-changed={dir}");
        walk(Path::new(dir), &mut h);
    }
    h.finish()
}
