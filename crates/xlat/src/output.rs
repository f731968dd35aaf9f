//! Output files that are either complete or absent.
//!
//! A regular file (or a new one) is written next to its final name, as `NAME.xlat-partial` (plus
//! a compression suffix if asked), and renamed over the final name only when complete: a failed
//! or interrupted command leaves the old file, or nothing. A special file (`/dev/null`, a FIFO, a
//! terminal) is written in place: renaming over it would replace the device with a regular file.
//!
//! Partial files are registered while they exist, so that a command killed by SIGINT or SIGTERM
//! can remove them ([`remove_partials`], called by the `xlat` command's signal handler).

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Partial files that exist now (removed on a terminating signal).
static PARTIALS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Removes every partial file that exists now. For signal handlers that run on a thread (not in
/// the signal context itself): it takes a lock and calls the file system.
pub fn remove_partials() {
    let list = PARTIALS.lock().unwrap_or_else(|e| e.into_inner());
    for p in list.iter() {
        let _ = std::fs::remove_file(p);
    }
}

/// An output being written: to a partial file renamed at [`Output::commit`], or in place.
#[derive(Debug)]
pub struct Output {
    target: PathBuf,
    /// The partial file, if the output is not written in place.
    partial: Option<PathBuf>,
}

impl Output {
    /// Starts writing `path`. `suffix` is appended to the partial file's name (for writers that
    /// pick the compression from the name, e.g. `.zst`).
    pub fn start(path: &str, suffix: &str) -> Output {
        let target = PathBuf::from(path);
        if is_special(&target) {
            return Output { target, partial: None };
        }
        let partial = PathBuf::from(format!("{path}.xlat-partial{suffix}"));
        PARTIALS.lock().unwrap_or_else(|e| e.into_inner()).push(partial.clone());
        Output { target, partial: Some(partial) }
    }

    /// Where to write now: the partial file, or the special file itself.
    pub fn path(&self) -> &Path {
        self.partial.as_deref().unwrap_or(&self.target)
    }

    /// Creates (truncates) the file to write; a special file is opened for writing as it is.
    pub fn create(&self) -> io::Result<File> {
        match &self.partial {
            Some(p) => File::create(p),
            None => std::fs::OpenOptions::new().write(true).open(&self.target),
        }
    }

    /// The output is complete: the partial file becomes the final file.
    pub fn commit(mut self) -> io::Result<()> {
        match self.partial.take() {
            Some(p) => {
                let r = std::fs::rename(&p, &self.target);
                if r.is_err() {
                    let _ = std::fs::remove_file(&p);
                }
                unregister(&p);
                r
            }
            None => Ok(()),
        }
    }
}

impl Drop for Output {
    /// Not committed: the partial file is removed.
    fn drop(&mut self) {
        if let Some(p) = self.partial.take() {
            let _ = std::fs::remove_file(&p);
            unregister(&p);
        }
    }
}

fn unregister(p: &Path) {
    PARTIALS.lock().unwrap_or_else(|e| e.into_inner()).retain(|q| q != p);
}

/// True for an existing file that is not a regular file (character or block device, FIFO,
/// socket): written in place, never replaced.
pub fn is_special(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| !m.is_file() && !m.is_dir())
}

/// True if `a` and `b` name the same existing file (same device and inode), however spelt.
pub fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_regular_file_appears_only_when_committed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.txt");
        std::fs::write(&path, "old").unwrap();
        let o = Output::start(path.to_str().unwrap(), "");
        o.create().unwrap().write_all(b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "old", "not yet");
        assert!(o.path().to_str().unwrap().ends_with(".xlat-partial"));
        o.commit().unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "no partial file left");
    }

    #[test]
    fn an_abandoned_output_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.txt");
        let o = Output::start(path.to_str().unwrap(), ".zst");
        o.create().unwrap();
        assert!(o.path().exists());
        assert!(PARTIALS.lock().unwrap().iter().any(|p| p == o.path()), "registered for signal handlers");
        drop(o);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_device_is_written_in_place() {
        let o = Output::start("/dev/null", "");
        assert_eq!(o.path(), Path::new("/dev/null"));
        o.create().unwrap().write_all(b"x").unwrap();
        o.commit().unwrap();
        assert!(is_special(Path::new("/dev/null")), "still a device");
    }
}
