//! The project's documentation links only to what the repository holds: every relative link
//! of `README.md` and `docs/*.md` names a file or directory that exists, inside the
//! repository.

use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .canonicalize()
        .unwrap()
}

/// The markdown pages checked.
fn pages(root: &Path) -> Vec<PathBuf> {
    let mut v = vec![root.join("README.md")];
    for e in std::fs::read_dir(root.join("docs")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "md") {
            v.push(p);
        }
    }
    v.sort();
    v
}

/// The targets of inline links `[text](target)` outside code spans and fenced blocks.
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        // Drop code spans: a `](…)` inside backticks is not a link.
        let mut plain = String::new();
        for (i, part) in line.split('`').enumerate() {
            if i % 2 == 0 {
                plain.push_str(part);
            }
        }
        let mut rest = plain.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            out.push(after[..end].trim().to_string());
            rest = &after[end..];
        }
    }
    out
}

/// What is wrong with a link of `page`, if anything.
fn broken(root: &Path, page: &Path, target: &str) -> Option<String> {
    if target.starts_with("http://") || target.starts_with("https://") || target.starts_with('#') {
        return None;
    }
    if target.starts_with("mailto:") {
        return None;
    }
    let path = target.split('#').next().unwrap_or_default();
    if path.starts_with('/') || path.contains(':') {
        return Some("not a path inside the repository".into());
    }
    let full = page.parent().unwrap().join(path);
    match full.canonicalize() {
        Err(_) => Some("does not exist".into()),
        Ok(p) if !p.starts_with(root) => Some("leads outside the repository".into()),
        Ok(_) => None,
    }
}

#[test]
fn every_relative_link_of_the_docs_resolves_inside_the_repository() {
    let root = repo();
    let mut bad = Vec::new();
    let mut checked = 0;
    for page in pages(&root) {
        let text = std::fs::read_to_string(&page).unwrap();
        for target in links(&text) {
            checked += 1;
            if let Some(why) = broken(&root, &page, &target) {
                bad.push(format!(
                    "{}: ({target}) {why}",
                    page.strip_prefix(&root).unwrap().display()
                ));
            }
        }
    }
    assert!(
        checked > 50,
        "only {checked} links found: the scan is broken"
    );
    assert!(bad.is_empty(), "broken links:\n{}", bad.join("\n"));
}

#[test]
fn the_checker_finds_what_it_should() {
    let root = repo();
    let page = root.join("docs").join("X.md");
    let found =
        links("see [a](A.md), `[not](code.md)`, [b](../README.md#two) and [c](https://x.y)");
    assert_eq!(found, ["A.md", "../README.md#two", "https://x.y"]);
    assert_eq!(
        broken(&root, &page, "../../outside.md").as_deref(),
        Some("does not exist")
    );
    assert_eq!(
        broken(&root, &page, "../..").as_deref(),
        Some("leads outside the repository")
    );
    assert_eq!(
        broken(&root, &page, "/etc/passwd").as_deref(),
        Some("not a path inside the repository")
    );
    assert_eq!(broken(&root, &page, "../README.md#two"), None);
    assert_eq!(broken(&root, &page, "RUNTIME.md"), None);
}
