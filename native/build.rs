//! Records which sources the extension was built from: `SOURCE_HASH` (module attribute) is the
//! sha256 of `Cargo.toml`, `Cargo.lock`, `pyproject.toml`, `build.rs` and the files `src/*.rs` (by
//! name; not dot files, not subfolders), the same bytes in the same
//! order `pipeline/native.py` hashes in a checkout, so an extension left from older sources
//! (a `git pull` without `scripts/bootstrap`) is refused instead of decoding by older rules.

use sha2::{Digest, Sha256};
use std::fs;
use std::path::PathBuf;

fn main() {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let mut files = vec![
        root.join("Cargo.toml"),
        root.join("Cargo.lock"),
        root.join("pyproject.toml"),
        root.join("build.rs"),
    ];
    let mut src: Vec<PathBuf> = fs::read_dir(root.join("src"))
        .expect("native/src")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "rs") && p.is_file())
        .filter(|p| !p.file_name().is_some_and(|n| n.to_string_lossy().starts_with('.')))
        .collect();
    src.sort_by(|a, b| a.file_name().cmp(&b.file_name()));
    files.extend(src);
    let mut hash = Sha256::new();
    for f in &files {
        hash.update(fs::read(f).expect("a native source file"));
        println!("cargo:rerun-if-changed={}", f.display());
    }
    println!("cargo:rerun-if-changed={}", root.join("src").display());
    let hex: String = hash.finalize().iter().map(|b| format!("{b:02x}")).collect();
    println!("cargo:rustc-env=SLUICE_NATIVE_SOURCE={hex}");
}
