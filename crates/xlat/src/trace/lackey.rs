//! valgrind lackey `--trace-mem=yes` text traces.
//!
//! `valgrind --tool=lackey --trace-mem=yes prog` prints one line per memory reference:
//!
//! ```text
//! ==4321== Lackey, an example Valgrind tool
//! I  0400d7d4,8
//!  L 04222cac,8
//!  S 7ff000ff8,8
//!  M 0421e9a8,4
//! ```
//!
//! `I` is an instruction fetch, ` L` a load, ` S` a store and ` M` a modify (load and store of
//! the same bytes); then one or more blanks, a hexadecimal address (with or without `0x`), a
//! comma and the decimal size in bytes (1 to 2^32-1). Trailing blanks and a CR before the
//! newline are accepted.
//!
//! A line *looks like a reference* when it starts with `I`, or with a space followed by `L`,
//! `S` or `M`, and the next character is not a letter. Such a line must be well formed, else
//! reading fails with an error naming the line number. Every other line (valgrind's `==pid==`
//! banners, blank lines, program output mixed into the log) is skipped and counted in
//! [`ReaderStats::skipped`]. A last line without a newline is parsed like any other, so a line
//! cut off in the middle of a reference is an error unless what remains is itself valid.
//!
//! The reader parses bytes by hand out of a large buffer: no per-line allocation, no UTF-8
//! checks, memory independent of the trace length.

use std::io::{self, Read, Write};

use super::compress::{CompressedWriter, Compression};
use super::{Kind, ReaderStats, Record, TraceError, TraceReader, TraceWriter};

/// Read buffer size; also the longest line that can be a reference.
const BUF_CAP: usize = 1 << 18;

/// Hex digit values; 0xff for non-digits.
static HEX: [u8; 256] = {
    let mut t = [0xffu8; 256];
    let mut i = 0;
    while i < 10 {
        t[b'0' as usize + i] = i as u8;
        i += 1;
    }
    let mut i = 0;
    while i < 6 {
        t[b'a' as usize + i] = 10 + i as u8;
        t[b'A' as usize + i] = 10 + i as u8;
        i += 1;
    }
    t
};

/// Outcome of parsing one line.
enum Line {
    /// A reference and the bytes consumed including the newline.
    Ref(Record, usize),
    /// Not a reference line.
    Other,
    /// A reference-like line that is malformed.
    Bad(&'static str),
}

#[inline(always)]
fn is_blank(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

/// Parses the line starting at `s[0]`; the end of `s` counts as a newline.
#[inline(always)]
fn parse(s: &[u8]) -> Line {
    let at = |i: usize| -> u8 { s.get(i).copied().unwrap_or(b'\n') };
    let (kind, mut p) = match at(0) {
        b'I' if !at(1).is_ascii_alphabetic() => (Kind::Ifetch, 1),
        b' ' if !at(2).is_ascii_alphabetic() => match at(1) {
            b'L' => (Kind::Load, 2),
            b'S' => (Kind::Store, 2),
            b'M' => (Kind::Modify, 2),
            _ => return Line::Other,
        },
        _ => return Line::Other,
    };
    if !is_blank(at(p)) {
        return Line::Bad("expected a blank after the access kind");
    }
    while is_blank(at(p)) {
        p += 1;
    }
    if at(p) == b'0' && at(p + 1) | 0x20 == b'x' {
        p += 2;
    }
    let start = p;
    let mut addr = 0u64;
    loop {
        let d = HEX[at(p) as usize];
        if d > 15 {
            break;
        }
        if addr >> 60 != 0 {
            return Line::Bad("address wider than 64 bits");
        }
        addr = addr << 4 | d as u64;
        p += 1;
    }
    if at(p) != b',' {
        return Line::Bad(if p == start {
            "expected a hexadecimal address"
        } else if at(p).is_ascii_alphanumeric() {
            "bad hexadecimal digit in the address"
        } else {
            "expected ',' and a size after the address"
        });
    }
    if p == start {
        return Line::Bad("expected a hexadecimal address");
    }
    p += 1;
    let start = p;
    let mut size = 0u64;
    loop {
        let d = at(p).wrapping_sub(b'0');
        if d > 9 {
            break;
        }
        size = size * 10 + d as u64;
        if size > u32::MAX as u64 {
            return Line::Bad("size larger than 4294967295");
        }
        p += 1;
    }
    if p == start {
        return Line::Bad("expected a decimal size after ','");
    }
    if size == 0 {
        return Line::Bad("size 0 (sizes are at least 1)");
    }
    while matches!(at(p), b' ' | b'\t' | b'\r') {
        p += 1;
    }
    if at(p) != b'\n' {
        return Line::Bad("unexpected text after the size");
    }
    Line::Ref(Record::Access { kind, size: size as u32, addr }, p + 1)
}

/// Parses one line (without its newline): `None` if it is not a reference line, `Some(Err)`
/// with the reason if it looks like a reference but is malformed.
pub fn parse_line(line: &[u8]) -> Option<Result<Record, &'static str>> {
    match parse(line) {
        Line::Ref(r, _) => Some(Ok(r)),
        Line::Other => None,
        Line::Bad(m) => Some(Err(m)),
    }
}

/// A short printable excerpt of a line for error messages, quoted; binary data is not shown,
/// only named.
fn excerpt(line: &[u8]) -> String {
    let end = line.iter().position(|&b| b == b'\n').unwrap_or(line.len()).min(80);
    let text = &line[..end];
    if text.iter().any(|&b| !(b.is_ascii_graphic() || b == b' ' || b == b'\t' || b == b'\r')) {
        return "(binary data, not text)".to_string();
    }
    let s = format!("\"{}", String::from_utf8_lossy(text).trim_end());
    if end < line.len() && line[end] != b'\n' {
        s + "...\""
    } else {
        s + "\""
    }
}

/// Streaming reader of lackey text.
pub struct LackeyReader<R> {
    inner: R,
    name: String,
    /// `BUF_CAP + 1` bytes: the extra byte holds a newline appended to an unterminated last line.
    buf: Box<[u8]>,
    /// Next unparsed byte.
    pos: usize,
    /// End of the complete lines in the buffer (just past the last newline).
    lim: usize,
    /// End of the valid bytes.
    end: usize,
    /// Stream offset of `buf[0]`.
    base: u64,
    eof: bool,
    /// Discarding an overlong non-reference line up to its newline.
    discarding: bool,
    /// A newline was appended to an unterminated last line (not part of the input).
    appended: bool,
    /// Lines completed so far.
    line: u64,
    stats: ReaderStats,
}

impl<R: Read> LackeyReader<R> {
    /// Reads lackey text from `inner` (already decompressed); `name` is used in errors.
    pub fn new(inner: R, name: &str) -> LackeyReader<R> {
        LackeyReader {
            inner,
            name: name.to_string(),
            buf: vec![0u8; BUF_CAP + 1].into_boxed_slice(),
            pos: 0,
            lim: 0,
            end: 0,
            base: 0,
            eof: false,
            discarding: false,
            appended: false,
            line: 0,
            stats: ReaderStats::default(),
        }
    }

    fn read_error(&self, e: io::Error) -> TraceError {
        TraceError::at_offset(&self.name, self.base + self.end as u64, format!("cannot read: {e}"))
    }

    /// Makes complete lines available in `[pos, lim)`; false at the end of the input.
    #[inline(never)]
    fn refill(&mut self) -> Result<bool, TraceError> {
        loop {
            if self.eof {
                if self.pos < self.end {
                    // Unterminated last line: terminate it.
                    self.buf[self.end] = b'\n';
                    self.end += 1;
                    self.appended = true;
                    self.lim = self.end;
                    return Ok(true);
                }
                return Ok(false);
            }
            // Move the incomplete tail to the front.
            self.buf.copy_within(self.pos..self.end, 0);
            self.base += self.pos as u64;
            self.end -= self.pos;
            self.pos = 0;
            self.lim = 0;
            if self.end == BUF_CAP {
                // A line longer than the buffer.
                if matches!(parse(&self.buf[..64]), Line::Other) {
                    self.base += self.end as u64;
                    self.end = 0;
                    self.discarding = true;
                } else {
                    return Err(TraceError::at_line(
                        &self.name,
                        self.line + 1,
                        format!("reference line longer than {BUF_CAP} bytes"),
                    ));
                }
            }
            let old_end = self.end;
            let n = loop {
                match self.inner.read(&mut self.buf[old_end..BUF_CAP]) {
                    Ok(n) => break n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(self.read_error(e)),
                }
            };
            if n == 0 {
                self.eof = true;
                if self.discarding {
                    self.discarding = false;
                    self.line += 1;
                    self.stats.skipped += 1;
                    self.base += self.end as u64;
                    self.end = 0;
                }
                continue;
            }
            self.end += n;
            let new = &self.buf[old_end..self.end];
            if self.discarding {
                match new.iter().position(|&b| b == b'\n') {
                    Some(i) => {
                        self.discarding = false;
                        self.line += 1;
                        self.stats.skipped += 1;
                        self.pos = old_end + i + 1;
                    }
                    None => {
                        self.base += self.end as u64;
                        self.end = 0;
                        continue;
                    }
                }
            }
            if let Some(i) = self.buf[self.pos.max(old_end)..self.end].iter().rposition(|&b| b == b'\n') {
                self.lim = self.pos.max(old_end) + i + 1;
                return Ok(true);
            }
        }
    }
}

impl<R: Read + Send> TraceReader for LackeyReader<R> {
    fn read_batch(&mut self, out: &mut Vec<Record>, max: usize) -> Result<usize, TraceError> {
        out.clear();
        let max = max.max(1);
        out.reserve(max);
        loop {
            if self.pos >= self.lim && !self.refill()? {
                break;
            }
            let region = &self.buf[..self.lim];
            let mut pos = self.pos;
            let mut line = self.line;
            let mut skipped = 0;
            let mut bad = None;
            while pos < region.len() && out.len() < max {
                match parse(&region[pos..]) {
                    Line::Ref(rec, n) => {
                        out.push(rec);
                        pos += n;
                    }
                    Line::Other => {
                        let n = region[pos..].iter().position(|&b| b == b'\n').unwrap_or(0);
                        pos += n + 1;
                        skipped += 1;
                    }
                    Line::Bad(msg) => {
                        bad = Some(msg);
                        break;
                    }
                }
                line += 1;
            }
            if let Some(msg) = bad {
                let shown = excerpt(&region[pos..]);
                return Err(TraceError::at_line(
                    &self.name,
                    line + 1,
                    format!("malformed lackey reference {shown}: {msg}"),
                ));
            }
            self.pos = pos;
            self.line = line;
            self.stats.skipped += skipped;
            if out.len() >= max {
                break;
            }
        }
        self.stats.records += out.len() as u64;
        if out.is_empty() && self.stats.records == 0 && self.stats.skipped > 0 {
            // The end, and not one reference line: not a lackey trace at all (binary data, or
            // another format read as lackey), which must not pass for an empty trace.
            return Err(TraceError::at_line(
                &self.name,
                self.line,
                format!(
                    "no lackey reference line in {} line{} (expected lines like \"I  0400d7d4,8\" or \" L 04222cac,8\"): not a lackey trace",
                    self.stats.skipped,
                    if self.stats.skipped == 1 { "" } else { "s" }
                ),
            ));
        }
        self.stats.bytes = self.base + self.pos as u64 - (self.appended && self.pos == self.end) as u64;
        Ok(out.len())
    }

    fn stats(&self) -> ReaderStats {
        self.stats
    }
}

/// Writes accesses as lackey text; events have no lackey form and are dropped (counted by
/// [`LackeyWriter::dropped`]).
pub struct LackeyWriter<W: Write> {
    out: CompressedWriter<W>,
    name: String,
    buf: Vec<u8>,
    dropped: u64,
    written: u64,
}

const FLUSH_AT: usize = 1 << 16;

static HEX_DIGITS: &[u8; 16] = b"0123456789abcdef";

impl<W: Write> LackeyWriter<W> {
    /// Writes to `inner` compressed with `compression`; `name` is used in errors.
    pub fn new(inner: W, name: &str, compression: Compression) -> Result<LackeyWriter<W>, TraceError> {
        let out = CompressedWriter::new(inner, compression)
            .map_err(|e| TraceError::Io { source_name: name.to_string(), error: e })?;
        Ok(LackeyWriter { out, name: name.to_string(), buf: Vec::with_capacity(FLUSH_AT + 64), dropped: 0, written: 0 })
    }

    /// Events dropped so far.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Accesses written so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    fn io(&self, e: io::Error) -> TraceError {
        TraceError::Io { source_name: self.name.clone(), error: e }
    }

    fn flush_buf(&mut self) -> Result<(), TraceError> {
        if let Err(e) = self.out.write_all(&self.buf) {
            return Err(self.io(e));
        }
        self.buf.clear();
        Ok(())
    }

    /// Ends the output (compression trailer included) and returns the inner writer.
    pub fn finish_into_inner(mut self) -> Result<W, TraceError> {
        self.flush_buf()?;
        let name = self.name;
        self.out.finish().map_err(|e| TraceError::Io { source_name: name, error: e })
    }
}

/// Appends one lackey line for an access.
#[inline]
pub fn format_access(buf: &mut Vec<u8>, kind: Kind, size: u32, addr: u64) {
    buf.extend_from_slice(match kind {
        Kind::Ifetch => b"I  ",
        Kind::Load => b" L ",
        Kind::Store => b" S ",
        Kind::Modify => b" M ",
    });
    let digits = ((67 - (addr | 1).leading_zeros()) / 4).max(8);
    for i in (0..digits).rev() {
        buf.push(HEX_DIGITS[(addr >> (4 * i)) as usize & 15]);
    }
    buf.push(b',');
    let mut tmp = [0u8; 10];
    let mut n = tmp.len();
    let mut v = size;
    loop {
        n -= 1;
        tmp[n] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    buf.extend_from_slice(&tmp[n..]);
    buf.push(b'\n');
}

impl<W: Write> TraceWriter for LackeyWriter<W> {
    fn write(&mut self, records: &[Record]) -> Result<(), TraceError> {
        for r in records {
            match *r {
                Record::Access { kind, size, addr } => {
                    format_access(&mut self.buf, kind, size, addr);
                    self.written += 1;
                    if self.buf.len() >= FLUSH_AT {
                        self.flush_buf()?;
                    }
                }
                _ => self.dropped += 1,
            }
        }
        Ok(())
    }

    fn finish(self: Box<Self>) -> Result<(), TraceError> {
        self.finish_into_inner().map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(text: &[u8]) -> Result<(Vec<Record>, ReaderStats), TraceError> {
        let mut r = LackeyReader::new(text, "t");
        let mut all = Vec::new();
        let mut batch = Vec::new();
        while r.read_batch(&mut batch, 3)? > 0 {
            all.extend_from_slice(&batch);
        }
        Ok((all, r.stats()))
    }

    #[test]
    fn parses_kinds_and_prefixes() {
        let (recs, st) =
            read_all(b"==1== hi\nI  0400d7d4,8\n L 0x04222cac,8\n S 7ff000ff8,16\r\n M 0421e9a8,4").unwrap();
        assert_eq!(
            recs,
            vec![
                Record::Access { kind: Kind::Ifetch, size: 8, addr: 0x0400d7d4 },
                Record::Access { kind: Kind::Load, size: 8, addr: 0x04222cac },
                Record::Access { kind: Kind::Store, size: 16, addr: 0x7ff000ff8 },
                Record::Access { kind: Kind::Modify, size: 4, addr: 0x0421e9a8 },
            ]
        );
        assert_eq!(st.skipped, 1);
        assert_eq!(st.records, 4);
    }

    #[test]
    fn errors_name_the_line() {
        let e = read_all(b"==1==\nI  0400d7d4,8\n L 0422zz,8\n").unwrap_err().to_string();
        assert!(e.contains("line 3"), "{e}");
        let e = read_all(b"I  0400d7d4\n").unwrap_err().to_string();
        assert!(e.contains("line 1"), "{e}");
        let e = read_all(b"I  0400d7d4,0\n").unwrap_err().to_string();
        assert!(e.contains("size 0"), "{e}");
        let e = read_all(b"I  0400d7d4,8\n S 04").unwrap_err().to_string();
        assert!(e.contains("line 2"), "{e}");
    }

    #[test]
    fn long_banner_lines_are_skipped() {
        let mut t = vec![b'='; BUF_CAP * 2 + 17];
        t.extend_from_slice(b"\nI  10,1\n");
        let (recs, st) = read_all(&t).unwrap();
        assert_eq!(recs.len(), 1);
        assert_eq!(st.skipped, 1);
    }

    #[test]
    fn writer_formats() {
        let mut b = Vec::new();
        format_access(&mut b, Kind::Ifetch, 3, 0x400);
        format_access(&mut b, Kind::Store, 4096, u64::MAX);
        assert_eq!(b, b"I  00000400,3\n S ffffffffffffffff,4096\n");
    }
}
