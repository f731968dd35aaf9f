//! Opening trace files: compression and format detection (stub: to be implemented).

use super::{Format, TraceError, TraceReader, TraceWriter};

/// Opens `path` (`-` for stdin) for reading. Compression (gzip, zstd, xz) is detected from the
/// content's magic bytes; the format from `format` if given, else from the content, else the name.
pub fn open_reader(_path: &str, _format: Option<Format>) -> Result<Box<dyn TraceReader>, TraceError> {
    todo!()
}

/// Creates `path` (`-` for stdout) for writing in `format` (default: inferred from the name);
/// compression follows the name's suffix (`.gz`, `.zst`, `.xz`; `.xtr` is zstd-compressed inside).
pub fn create_writer(_path: &str, _format: Option<Format>) -> Result<Box<dyn TraceWriter>, TraceError> {
    todo!()
}
