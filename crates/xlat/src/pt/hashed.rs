//! Hashed page tables with chaining (talluri95 §2, §4.2, §4.3, Figure 4).
//!
//! One global table for all processes: each PTE holds a tag (VPN and ASID), a next pointer and
//! the mapping, 24 bytes with 8-byte words. A walk hashes (ASID, VPN) to a bucket, reads the
//! bucket's head pointer and follows the chain until a tag matches: one memory reference for the
//! head pointer and one per PTE probed. In talluri95's accounting the first PTE is reached
//! directly by the hash (its Figure 4 indexes an array of hash nodes) and every PTE probed starts
//! a new cache line, so `paper` lines leave the head-pointer read out and a successful search
//! costs `1 + α/2` lines on average (Table 2, α = `Nactive(1) / buckets`); `layout` lines count
//! it. Size: `24 × PTEs` bytes, bucket heads (8 bytes each) reported separately.
//!
//! Superpage and partial-subblock PTEs (also 24 bytes, the valid vector in the mapping word) are
//! stored one of two ways (`page_table.superpage_store`):
//! - `multiple`: one chained table per page size in use, each with `buckets` buckets and hashing
//!   the VPN at its size. The base-page table exists from the start, the others are created by
//!   their first PTE. A partial-subblock PTE lives in the table of its size (the page block). A
//!   walk searches the tables in `page_table.search_order`, then the other sizes in use smallest
//!   first, each table costing its bucket read and its probes.
//! - `superpage-index`: one table hashed on the VPN at `index_page`; every PTE of that region
//!   (base, superpage up to `index_page`, partial-subblock) chains from the same bucket with a tag
//!   of VPN and size, and a walk probes the chain until a PTE translates the page. Superpages
//!   larger than `index_page` go to per-size tables searched afterwards, smallest first.

use super::chain::{validate_buckets, Chained, Word};
use super::common::{validate_common, LineCfg, PtMem};
use super::{walk_block_each, HashFn, PageTableConfig, ParamError, PtSize, Pte, SuperpageStore, WalkEnv, WalkRecord};
use crate::addr::{Asid, PageSize, Vpn};
use std::fmt;

/// Hashed page table: chained hash tables of 24-byte PTEs for every process.
#[derive(Clone)]
pub struct HashedTable {
    store: SuperpageStore,
    buckets: u64,
    hash: HashFn,
    pte_bytes: u32,
    page: PageSize,
    lines: LineCfg,
    mem: PtMem,
    /// `superpage-index`: the table hashed at `index_page` and log2 base pages of `index_page`.
    index: Option<Box<(Chained, u32)>>,
    /// Per-size tables with the log2 base pages of their size.
    tables: Vec<(u32, Chained)>,
    /// Indices into `tables` in search order.
    order: Vec<usize>,
    /// `multiple`: log2 base pages of the configured `search_order`.
    preferred: Vec<u32>,
}

impl HashedTable {
    /// Builds the table. `page_table.superpage_store` must be `multiple` (default) or
    /// `superpage-index`; `search_order` (multiple) and `index_page` (superpage-index) are checked.
    pub fn new(cfg: &PageTableConfig, page_size: PageSize) -> Result<Self, ParamError> {
        let lines = validate_common(cfg, page_size)?;
        validate_buckets(cfg)?;
        let base = page_size.shift();
        let mut mem = PtMem::new();
        let mut t = HashedTable {
            store: cfg.store(),
            buckets: cfg.buckets,
            hash: cfg.hash,
            pte_bytes: cfg.pte_bytes,
            page: page_size,
            lines,
            mem: PtMem::new(),
            index: None,
            tables: Vec::new(),
            order: Vec::new(),
            preferred: Vec::new(),
        };
        match cfg.store() {
            SuperpageStore::Multiple => {
                for &bytes in &cfg.search_order {
                    let ok = bytes.is_power_of_two() && bytes >= page_size.bytes() && bytes.trailing_zeros() < 64;
                    if !ok {
                        return Err(ParamError::new(
                            "page_table.search_order",
                            format!(
                                "{bytes} is not usable: page sizes in bytes must be powers of two of at least the \
                                 base page ({} bytes)",
                                page_size.bytes()
                            ),
                        ));
                    }
                    let p = bytes.trailing_zeros() - base;
                    if t.preferred.contains(&p) {
                        return Err(ParamError::new(
                            "page_table.search_order",
                            format!("{bytes} is listed twice: each page size may appear once"),
                        ));
                    }
                    t.preferred.push(p);
                }
                t.mem = mem;
                t.table_for(0);
            }
            SuperpageStore::SuperpageIndex => {
                let bytes = match cfg.index_page {
                    Some(b) => b,
                    None => {
                        let s = cfg.subblock_factor as u64;
                        if !s.is_power_of_two() {
                            return Err(ParamError::new(
                                "page_table.subblock_factor",
                                format!("{s} is not usable: base pages per page block must be a power of two"),
                            ));
                        }
                        s.saturating_mul(page_size.bytes())
                    }
                };
                if !bytes.is_power_of_two() || bytes < page_size.bytes() || bytes.trailing_zeros() >= cfg.va_bits {
                    return Err(ParamError::new(
                        "page_table.index_page",
                        format!(
                            "{bytes} is not usable: the hashed page size must be a power of two from the base page \
                             ({} bytes) to 2^va_bits",
                            page_size.bytes()
                        ),
                    ));
                }
                let ishift = bytes.trailing_zeros() - base;
                t.index = Some(Box::new((Chained::new(cfg, page_size, ishift, lines, &mut mem), ishift)));
                t.mem = mem;
            }
            other => {
                return Err(ParamError::new(
                    "page_table.superpage_store",
                    format!(
                        "\"{}\" is not usable with hashed tables: \"multiple\" or \"superpage-index\"",
                        other.name()
                    ),
                ))
            }
        }
        Ok(t)
    }

    /// The per-size table of `2^p` base pages, created (and the search order recomputed) if new.
    fn table_for(&mut self, p: u32) -> usize {
        match self.tables.iter().position(|(q, _)| *q == p) {
            Some(at) => at,
            None => {
                let cfg = PageTableConfig {
                    buckets: self.buckets,
                    hash: self.hash,
                    pte_bytes: self.pte_bytes,
                    ..PageTableConfig::default()
                };
                let t = Chained::new(&cfg, self.page, p, self.lines, &mut self.mem);
                self.tables.push((p, t));
                let mut order: Vec<usize> = Vec::with_capacity(self.tables.len());
                for q in &self.preferred {
                    if let Some(i) = self.tables.iter().position(|(r, _)| r == q) {
                        order.push(i);
                    }
                }
                let mut rest: Vec<usize> = (0..self.tables.len()).filter(|i| !order.contains(i)).collect();
                rest.sort_by_key(|&i| self.tables[i].0);
                order.extend(rest);
                self.order = order;
                self.tables.len() - 1
            }
        }
    }

    /// The page sizes (in bytes) of the per-size tables, in the order a walk searches them (after
    /// the `superpage-index` table, if any).
    pub fn table_sizes(&self) -> Vec<u64> {
        self.order.iter().map(|&i| self.page.bytes() << self.tables[i].0).collect()
    }

    /// Number of hash buckets per table.
    pub fn buckets(&self) -> u64 {
        self.buckets
    }

    /// Load factor α: PTEs per bucket, over all tables.
    pub fn load_factor(&self) -> f64 {
        let s = self.size();
        s.objects as f64 / (s.bucket_bytes / super::chain::BUCKET_BYTES) as f64
    }

    /// See [`super::PageTable::map`]: the PTE goes to the table of its size (`multiple`), or to the
    /// index table when it is at most `index_page` (`superpage-index`); it replaces a PTE of the
    /// same page (or block) and size.
    pub fn map(&mut self, asid: Asid, vpn: Vpn, pte: Pte) {
        let base = self.page.shift();
        let p = pte.size.shift() - base;
        let word = Word::of(pte, vpn, base);
        if let Some(ix) = &mut self.index {
            let (t, ishift) = &mut **ix;
            if p <= *ishift {
                t.put(asid, vpn, p, p, word, &mut self.mem);
                return;
            }
        }
        let at = self.table_for(p);
        self.tables[at].1.put(asid, vpn, p, p, word, &mut self.mem);
    }

    /// See [`super::PageTable::unmap`]: removes the whole PTE translating `vpn`.
    pub fn unmap(&mut self, asid: Asid, vpn: Vpn) -> Option<Pte> {
        if let Some(ix) = &mut self.index {
            let t = &mut ix.0;
            if let Some(p) = t.unmap(asid, vpn) {
                return Some(p);
            }
        }
        for k in 0..self.order.len() {
            let i = self.order[k];
            if let Some(p) = self.tables[i].1.unmap(asid, vpn) {
                return Some(p);
            }
        }
        None
    }

    /// See [`super::PageTable::get`].
    pub fn get(&self, asid: Asid, vpn: Vpn) -> Option<Pte> {
        if let Some(ix) = &self.index {
            let t = &ix.0;
            if let Some(p) = t.get(asid, vpn) {
                return Some(p);
            }
        }
        self.order.iter().find_map(|&i| self.tables[i].1.get(asid, vpn))
    }

    /// See [`super::PageTable::walk`]: each table searched in order costs its bucket head read and
    /// its probes, until one translates `vpn`.
    #[inline]
    pub fn walk<E: WalkEnv>(&mut self, asid: Asid, vpn: Vpn, _env: &mut E, rec: &mut WalkRecord) -> Option<Pte> {
        let mut lines = self.lines.tracker(rec);
        let mut r = None;
        if let Some(ix) = &self.index {
            let t = &ix.0;
            r = t.walk(asid, vpn, rec, &mut lines);
        }
        if r.is_none() {
            for &i in &self.order {
                r = self.tables[i].1.walk(asid, vpn, rec, &mut lines);
                if r.is_some() {
                    break;
                }
            }
        }
        lines.finish(rec);
        r
    }

    /// See [`super::PageTable::walk_block`]: one full walk per base page of the block (the PTEs
    /// of neighbouring pages are not adjacent: talluri95 §4.4, "multiple hash probes").
    pub fn walk_block<E: WalkEnv>(
        &mut self,
        asid: Asid,
        vpn: Vpn,
        env: &mut E,
        rec: &mut WalkRecord,
        out: &mut [Option<Pte>],
    ) -> Option<Pte> {
        walk_block_each(vpn, out, |v, env: &mut E| self.walk(asid, v, env, rec), env)
    }

    /// See [`super::PageTable::remove_asid`].
    pub fn remove_asid(&mut self, asid: Asid) {
        if let Some(ix) = &mut self.index {
            let t = &mut ix.0;
            t.remove_asid(asid);
        }
        for (_, t) in &mut self.tables {
            t.remove_asid(asid);
        }
    }

    /// See [`super::PageTable::size`]: the PTEs and bucket arrays of all tables.
    pub fn size(&self) -> PtSize {
        let mut s = PtSize::default();
        for t in self.index.iter().map(|ix| &ix.0).chain(self.tables.iter().map(|(_, t)| t)) {
            let z = t.size();
            s.table_bytes += z.table_bytes;
            s.bucket_bytes += z.bucket_bytes;
            s.objects += z.objects;
        }
        s
    }
}

impl fmt::Debug for HashedTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HashedTable")
            .field("store", &self.store)
            .field("buckets", &self.buckets())
            .field("table_sizes", &self.table_sizes())
            .field("size", &self.size())
            .finish()
    }
}
