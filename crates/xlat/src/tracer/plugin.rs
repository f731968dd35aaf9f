//! xlat's QEMU plugin and exec shim: their C sources (embedded in the binary) and their builds,
//! on first use, with the system C compiler into a cache directory keyed by a hash of the source
//! and flags.

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

/// The exec shim's C source (`crates/xlat/plugin/xlat_exec_shim.c`), preloaded into the traced
/// programs under `--children` (docs/tracing.md, "Following execve").
pub const SHIM_SOURCE: &str = include_str!("../../plugin/xlat_exec_shim.c");

/// The exec shim's compiler flags (part of its cache key).
const SHIM_CFLAGS: &[&str] = &["-shared", "-fPIC", "-O2", "-fvisibility=hidden", "-std=gnu11", "-ldl"];

fn key_of(source: &str, flags: &[&str]) -> String {
    let mut h = fnv1a(source.as_bytes(), 0xcbf2_9ce4_8422_2325);
    for f in flags {
        h = fnv1a(f.as_bytes(), h);
    }
    format!("{h:016x}")
}

/// The cache key of the current source and flags.
pub fn key() -> String {
    key_of(SOURCE, CFLAGS)
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
    ensure(&Unit {
        name: "xlat_plugin",
        source: SOURCE,
        flags: CFLAGS,
        why: "it compiles xlat's QEMU plugin",
        ext: ".so",
        dir: "crates/xlat/plugin",
    })
}

/// The built exec shim (`xlat_exec_shim-KEY.so` in the same cache), compiling it first if
/// needed.
pub fn ensure_shim_built() -> Result<PathBuf, TracerError> {
    ensure(&Unit {
        name: "xlat_exec_shim",
        source: SHIM_SOURCE,
        flags: SHIM_CFLAGS,
        why: "it compiles xlat's exec shim for --children",
        ext: ".so",
        dir: "crates/xlat/plugin",
    })
}

/// Compiler flags of the workload suite's C programs (part of their cache key).
pub const PROGRAM_CFLAGS: &[&str] = &["-O2", "-std=gnu11"];

/// A C program of the workload suite (`workloads/src/NAME.c`, embedded in the binary), built
/// with the system C compiler into the same cache as `NAME-KEY`, compiling it first if needed.
pub fn ensure_program(name: &'static str, source: &'static str) -> Result<PathBuf, TracerError> {
    ensure(&Unit {
        name,
        source,
        flags: PROGRAM_CFLAGS,
        why: "it compiles the workload suite's C programs",
        ext: "",
        dir: "workloads/src",
    })
}

/// A C source built into a cached shared object or program.
struct Unit {
    name: &'static str,
    source: &'static str,
    flags: &'static [&'static str],
    why: &'static str,
    /// File extension of the build (`.so`, or nothing for a program).
    ext: &'static str,
    /// Where the source lives in the repository (for errors).
    dir: &'static str,
}

fn ensure(u: &Unit) -> Result<PathBuf, TracerError> {
    let dir = cache_dir();
    let so = dir.join(format!("{}-{}{}", u.name, key_of(u.source, u.flags), u.ext));
    if so.is_file() {
        return Ok(so);
    }
    build_into(u, &dir, &so)
}

fn build_into(u: &Unit, dir: &Path, so: &Path) -> Result<PathBuf, TracerError> {
    let cc = require_tool("cc", "gcc", u.why)?;
    std::fs::create_dir_all(dir).map_err(|e| TracerError::io(format!("{}: cannot create", dir.display()), e))?;
    let tag = format!("{}-{}", std::process::id(), key_of(u.source, u.flags));
    let src = dir.join(format!("{}-{tag}.c", u.name));
    let tmp = dir.join(format!("{}-{tag}{}.partial", u.name, u.ext));
    std::fs::write(&src, u.source).map_err(|e| TracerError::io(format!("{}: cannot write", src.display()), e))?;
    // Libraries come after the source.
    let (libs, flags): (Vec<&str>, Vec<&str>) = u.flags.iter().partition(|f| f.starts_with("-l"));
    let out = Command::new(&cc)
        .args(&flags)
        .arg("-o")
        .arg(&tmp)
        .arg(&src)
        .args(&libs)
        .output()
        .map_err(|e| TracerError::io(format!("cannot run {}", cc.display()), e));
    let _ = std::fs::remove_file(&src);
    let out = out?;
    if !out.status.success() {
        let _ = std::fs::remove_file(&tmp);
        let text = String::from_utf8_lossy(&out.stderr);
        let first: Vec<&str> = text.lines().filter(|l| l.contains("error")).take(2).collect();
        return Err(TracerError::Build {
            path: format!("{}/{}.c", u.dir, u.name),
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
