//! xlat's QEMU plugin: its C source (embedded in the binary) and its build, on first use, with
//! the system C compiler into a cache directory keyed by a hash of the source and flags.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::{require_tool, TracerError};

/// The plugin's C source (`crates/xlat/plugin/xlat_plugin.c`).
pub const SOURCE: &str = include_str!("../../plugin/xlat_plugin.c");

/// Compiler flags (part of the cache key).
pub const CFLAGS: &[&str] = &["-shared", "-fPIC", "-O2", "-fvisibility=hidden", "-std=gnu11"];

/// FNV-1a, 64 bits: a stable hash for the cache key (not for security).
fn fnv1a(data: &[u8], mut h: u64) -> u64 {
    for &b in data {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The cache key of the current source and flags.
pub fn key() -> String {
    let mut h = fnv1a(SOURCE.as_bytes(), 0xcbf2_9ce4_8422_2325);
    for f in CFLAGS {
        h = fnv1a(f.as_bytes(), h);
    }
    format!("{h:016x}")
}

/// The cache directory: `$XDG_CACHE_HOME/xlat`, else `$HOME/.cache/xlat`, else a directory
/// under the system's temporary directory.
pub fn cache_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("XDG_CACHE_HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(d).join("xlat");
    }
    if let Some(h) = std::env::var_os("HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(h).join(".cache").join("xlat");
    }
    std::env::temp_dir().join("xlat-cache")
}

/// The built plugin, compiling it first if the cache does not hold this source's build.
pub fn ensure_built() -> Result<PathBuf, TracerError> {
    let dir = cache_dir();
    let so = dir.join(format!("xlat_plugin-{}.so", key()));
    if so.is_file() {
        return Ok(so);
    }
    build_into(&dir, &so)
}

fn build_into(dir: &Path, so: &Path) -> Result<PathBuf, TracerError> {
    let cc = require_tool("cc", "gcc", "it compiles xlat's QEMU plugin")?;
    std::fs::create_dir_all(dir).map_err(|e| TracerError::io(format!("{}: cannot create", dir.display()), e))?;
    let tag = format!("{}-{}", std::process::id(), key());
    let src = dir.join(format!("xlat_plugin-{tag}.c"));
    let tmp = dir.join(format!("xlat_plugin-{tag}.so.partial"));
    std::fs::write(&src, SOURCE).map_err(|e| TracerError::io(format!("{}: cannot write", src.display()), e))?;
    let out = Command::new(&cc)
        .args(CFLAGS)
        .arg("-o")
        .arg(&tmp)
        .arg(&src)
        .output()
        .map_err(|e| TracerError::io(format!("cannot run {}", cc.display()), e));
    let _ = std::fs::remove_file(&src);
    let out = out?;
    if !out.status.success() {
        let _ = std::fs::remove_file(&tmp);
        let text = String::from_utf8_lossy(&out.stderr);
        let first: Vec<&str> = text.lines().filter(|l| l.contains("error")).take(2).collect();
        return Err(TracerError::Build {
            path: "crates/xlat/plugin/xlat_plugin.c".to_string(),
            message: if first.is_empty() { format!("cc exited with {}", out.status) } else { first.join("; ") },
        });
    }
    // Atomic: concurrent builds of the same source all end with a complete file.
    std::fs::rename(&tmp, so).map_err(|e| TracerError::io(format!("{}: cannot write", so.display()), e))?;
    Ok(so.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_is_stable_and_hex() {
        assert_eq!(key(), key());
        assert_eq!(key().len(), 16);
        assert_ne!(fnv1a(b"a", 1), fnv1a(b"b", 1));
    }
}
