//! ChampSim binary traces: a sequence of 64-byte little-endian `input_instr` records.
//!
//! ```text
//! offset  size  field
//!  0      8     ip                        instruction pointer
//!  8      1     is_branch
//!  9      1     branch_taken
//! 10      2     destination_registers[2]
//! 12      4     source_registers[4]
//! 16     16     destination_memory[2]     u64 each; 0 = unused slot
//! 32     32     source_memory[4]          u64 each; 0 = unused slot
//! ```
//!
//! Each record becomes, in this order: an [`Kind::Ifetch`] of `ip` with size 1 (ChampSim does
//! not record instruction lengths; one byte touches exactly the page the instruction starts
//! in), one [`Kind::Load`] of size 8 per non-zero `source_memory` slot, then one
//! [`Kind::Store`] of size 8 per non-zero `destination_memory` slot (ChampSim records no
//! operand sizes). Branch and register fields are ignored. A file whose length is not a
//! multiple of 64 is an error at the offset of the partial record.
//!
//! Writing is best effort (see [`ChampsimWriter`]).

use std::io::{Read, Write};

use super::compress::{CompressedWriter, Compression};
use super::{Kind, ReaderStats, Record, TraceError, TraceReader, TraceWriter};

/// Bytes per record.
pub const RECORD_BYTES: usize = 64;
/// Size given to instruction fetches.
pub const IFETCH_SIZE: u32 = 1;
/// Size given to loads and stores.
pub const DATA_SIZE: u32 = 8;
/// Most records one instruction expands to.
pub const MAX_PER_INSTR: usize = 7;

const CAP: usize = RECORD_BYTES * 4096;

/// Decodes one 64-byte record into `out` (1 to 7 records); returns how many.
pub fn decode_record(rec: &[u8; RECORD_BYTES], out: &mut [Record; MAX_PER_INSTR]) -> usize {
    let word = |i: usize| u64::from_le_bytes(rec[i..i + 8].try_into().unwrap());
    out[0] = Record::Access { kind: Kind::Ifetch, size: IFETCH_SIZE, addr: word(0) };
    let mut n = 1;
    for (off, kind) in
        [(32, Kind::Load), (40, Kind::Load), (48, Kind::Load), (56, Kind::Load), (16, Kind::Store), (24, Kind::Store)]
    {
        let addr = word(off);
        if addr != 0 {
            out[n] = Record::Access { kind, size: DATA_SIZE, addr };
            n += 1;
        }
    }
    n
}

/// Streaming reader of ChampSim traces (the stream must already be decompressed).
pub struct ChampsimReader<R> {
    inner: R,
    name: String,
    buf: Box<[u8]>,
    pos: usize,
    end: usize,
    base: u64,
    eof: bool,
    pending: [Record; MAX_PER_INSTR],
    pend_pos: usize,
    pend_len: usize,
    stats: ReaderStats,
}

impl<R: Read> ChampsimReader<R> {
    /// Reads ChampSim records from `inner`; `name` is used in errors.
    pub fn new(inner: R, name: &str) -> ChampsimReader<R> {
        ChampsimReader {
            inner,
            name: name.to_string(),
            buf: vec![0u8; CAP].into_boxed_slice(),
            pos: 0,
            end: 0,
            base: 0,
            eof: false,
            pending: [Record::Marker { id: 0 }; MAX_PER_INSTR],
            pend_pos: 0,
            pend_len: 0,
            stats: ReaderStats::default(),
        }
    }

    #[inline(never)]
    fn refill(&mut self) -> Result<(), TraceError> {
        super::refill_window(
            &mut self.inner,
            &mut self.buf,
            CAP,
            &mut self.pos,
            &mut self.end,
            &mut self.base,
            &mut self.eof,
        )
        .map_err(|(off, e)| TraceError::at_offset(&self.name, off, format!("cannot read: {e}")))
    }
}

impl<R: Read + Send> TraceReader for ChampsimReader<R> {
    fn read_batch(&mut self, out: &mut Vec<Record>, max: usize) -> Result<usize, TraceError> {
        out.clear();
        let max = max.max(1);
        out.reserve(max);
        while self.pend_pos < self.pend_len && out.len() < max {
            out.push(self.pending[self.pend_pos]);
            self.pend_pos += 1;
        }
        let mut tmp = [Record::Marker { id: 0 }; MAX_PER_INSTR];
        while out.len() < max {
            if self.end - self.pos < RECORD_BYTES {
                if !self.eof {
                    self.refill()?;
                }
                if self.end - self.pos < RECORD_BYTES {
                    if self.pos < self.end {
                        let left = self.end - self.pos;
                        return Err(TraceError::at_offset(
                            &self.name,
                            self.base + self.pos as u64,
                            format!(
                                "partial ChampSim record: {left} of {RECORD_BYTES} bytes \
                                 (the length is not a multiple of {RECORD_BYTES})"
                            ),
                        ));
                    }
                    break;
                }
            }
            let rec: &[u8; RECORD_BYTES] = self.buf[self.pos..self.pos + RECORD_BYTES].try_into().unwrap();
            // The two branch flags are booleans in every ChampSim trace: anything else means the
            // input is not one (e.g. text read with --format champsim).
            if rec[8] > 1 || rec[9] > 1 {
                return Err(TraceError::at_offset(
                    &self.name,
                    self.base + self.pos as u64 + 8,
                    format!(
                        "not a ChampSim trace: is_branch = {:#04x}, branch_taken = {:#04x} (expected 0 or 1)",
                        rec[8], rec[9]
                    ),
                ));
            }
            self.pos += RECORD_BYTES;
            let n = decode_record(rec, &mut tmp);
            let room = (max - out.len()).min(n);
            out.extend_from_slice(&tmp[..room]);
            if room < n {
                self.pending[..n - room].copy_from_slice(&tmp[room..n]);
                self.pend_pos = 0;
                self.pend_len = n - room;
            }
        }
        self.stats.records += out.len() as u64;
        self.stats.bytes = self.base + self.pos as u64;
        Ok(out.len())
    }

    fn stats(&self) -> ReaderStats {
        self.stats
    }
}

/// What a [`ChampsimWriter`] could not represent exactly.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ChampsimLoss {
    /// Events dropped (ChampSim has none).
    pub events: u64,
    /// Accesses at address 0 dropped (0 marks an unused slot).
    pub zero_addresses: u64,
    /// Extra records written for data accesses that did not fit the current instruction (more
    /// than 4 loads or 2 stores, a load after a store, or accesses before any ifetch); each
    /// reads back with an extra ifetch of the previous instruction's ip.
    pub extra_records: u64,
    /// Accesses whose size is not the one reading gives back (ifetch 1, data 8).
    pub resized: u64,
    /// Modifies written as a load plus a store of the same address.
    pub modifies: u64,
}

/// Writes ChampSim records, best effort.
///
/// Each [`Kind::Ifetch`] starts a new record with `ip` = its address; the loads that follow
/// fill `source_memory`, the stores `destination_memory`, a modify takes one slot of each.
/// The mapping is exact for traces that look like what [`ChampsimReader`] produces. Otherwise
/// it is lossy, as counted in [`ChampsimLoss`]: sizes are lost, events are dropped, accesses at
/// address 0 are dropped, and data accesses that do not fit the current record (a fifth load,
/// a third store, a load after a store, or data before the first ifetch) go into an extra
/// record carrying the previous ip (0 if none).
pub struct ChampsimWriter<W: Write> {
    out: CompressedWriter<W>,
    name: String,
    buf: Vec<u8>,
    /// The record being filled.
    cur: Option<Instr>,
    last_ip: u64,
    loss: ChampsimLoss,
}

#[derive(Clone, Copy)]
struct Instr {
    ip: u64,
    src: [u64; 4],
    nsrc: usize,
    dst: [u64; 2],
    ndst: usize,
}

impl Instr {
    fn new(ip: u64) -> Instr {
        Instr { ip, src: [0; 4], nsrc: 0, dst: [0; 2], ndst: 0 }
    }

    fn encode(&self, buf: &mut Vec<u8>) {
        let mut rec = [0u8; RECORD_BYTES];
        rec[0..8].copy_from_slice(&self.ip.to_le_bytes());
        for (i, a) in self.dst.iter().enumerate() {
            rec[16 + 8 * i..24 + 8 * i].copy_from_slice(&a.to_le_bytes());
        }
        for (i, a) in self.src.iter().enumerate() {
            rec[32 + 8 * i..40 + 8 * i].copy_from_slice(&a.to_le_bytes());
        }
        buf.extend_from_slice(&rec);
    }
}

impl<W: Write> ChampsimWriter<W> {
    /// Writes to `inner` compressed with `compression`; `name` is used in errors.
    pub fn new(inner: W, name: &str, compression: Compression) -> Result<ChampsimWriter<W>, TraceError> {
        let out = CompressedWriter::new(inner, compression)
            .map_err(|e| TraceError::Io { source_name: name.to_string(), error: e })?;
        Ok(ChampsimWriter {
            out,
            name: name.to_string(),
            buf: Vec::with_capacity(1 << 16),
            cur: None,
            last_ip: 0,
            loss: ChampsimLoss::default(),
        })
    }

    /// What was lost so far.
    pub fn loss(&self) -> ChampsimLoss {
        self.loss
    }

    fn emit(&mut self) -> Result<(), TraceError> {
        if let Some(i) = self.cur.take() {
            i.encode(&mut self.buf);
            if self.buf.len() >= 1 << 16 {
                self.flush_buf()?;
            }
        }
        Ok(())
    }

    fn flush_buf(&mut self) -> Result<(), TraceError> {
        if let Err(e) = self.out.write_all(&self.buf) {
            return Err(TraceError::Io { source_name: self.name.clone(), error: e });
        }
        self.buf.clear();
        Ok(())
    }

    /// The current record if it has room for `loads` more loads and `stores` more stores and
    /// (for loads) no store yet; else a fresh record with the previous ip.
    fn room(&mut self, loads: usize, stores: usize) -> Result<&mut Instr, TraceError> {
        let fits = self
            .cur
            .as_ref()
            .is_some_and(|i| i.nsrc + loads <= 4 && i.ndst + stores <= 2 && (loads == 0 || i.ndst == 0));
        if !fits {
            self.emit()?;
            self.loss.extra_records += 1;
            self.cur = Some(Instr::new(self.last_ip));
        }
        Ok(self.cur.as_mut().unwrap())
    }

    /// Ends the output and returns the inner writer.
    pub fn finish_into_inner(mut self) -> Result<W, TraceError> {
        self.emit()?;
        self.flush_buf()?;
        let name = self.name;
        self.out.finish().map_err(|e| TraceError::Io { source_name: name, error: e })
    }
}

impl<W: Write> TraceWriter for ChampsimWriter<W> {
    fn write(&mut self, records: &[Record]) -> Result<(), TraceError> {
        for r in records {
            let Record::Access { kind, size, addr } = *r else {
                self.loss.events += 1;
                continue;
            };
            if addr == 0 && kind != Kind::Ifetch {
                self.loss.zero_addresses += 1;
                continue;
            }
            let expected = if kind == Kind::Ifetch { IFETCH_SIZE } else { DATA_SIZE };
            if size != expected {
                self.loss.resized += 1;
            }
            match kind {
                Kind::Ifetch => {
                    self.emit()?;
                    self.cur = Some(Instr::new(addr));
                    self.last_ip = addr;
                }
                Kind::Load => {
                    let i = self.room(1, 0)?;
                    i.src[i.nsrc] = addr;
                    i.nsrc += 1;
                }
                Kind::Store => {
                    let i = self.room(0, 1)?;
                    i.dst[i.ndst] = addr;
                    i.ndst += 1;
                }
                Kind::Modify => {
                    self.loss.modifies += 1;
                    let i = self.room(1, 1)?;
                    i.src[i.nsrc] = addr;
                    i.nsrc += 1;
                    i.dst[i.ndst] = addr;
                    i.ndst += 1;
                }
            }
        }
        Ok(())
    }

    fn finish(self: Box<Self>) -> Result<(), TraceError> {
        self.finish_into_inner().map(|_| ())
    }
}
