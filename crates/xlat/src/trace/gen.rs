//! Seeded synthetic traces.
//!
//! A [`Generator`] produces `refs` data accesses of `access_size` bytes inside the footprint
//! `[BASE, BASE + footprint)` following a [`Pattern`]. Each access is a store with probability
//! `store_fraction`, else a load. The same [`GenSpec`] (seed included) always gives the same
//! trace, on every platform: the random numbers come from a self-contained xoshiro256**
//! generator seeded through splitmix64.

use super::{Kind, ReaderStats, Record, TraceError, TraceReader};

/// First address of every generated footprint.
pub const BASE: u64 = 0x1000_0000;
/// Page granularity of [`Pattern::Zipf`].
pub const ZIPF_PAGE: u64 = 4096;
/// Ranks with their own alias-table entry in [`Pattern::Zipf`] (the table stays within about
/// 70 KB, cache-resident); rarer ranks are sampled by bucket.
const ZIPF_HEAD: u64 = 1 << 13;

/// How addresses are chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pattern {
    /// Consecutive accesses: offsets 0, `access_size`, 2·`access_size`, ... wrapping to 0 when
    /// the next access would cross the end of the footprint. `stride` is ignored.
    Sequential,
    /// Offsets 0, `stride`, 2·`stride`, ... wrapping to 0 when the next access would cross the
    /// end of the footprint (so a stride of 4096 touches each 4 KB page once per sweep).
    Strided,
    /// Independent uniformly random offsets, aligned to `access_size`, anywhere in the
    /// footprint.
    Uniform,
    /// Independent Zipf-distributed 4 KB pages: the footprint's `n = footprint / 4096` pages
    /// (at least one) get ranks 1..n, and rank `k` is chosen with probability proportional to
    /// `k^-zipf_s`. Ranks are mapped to pages by a seed-dependent pseudo-random permutation, so
    /// hot pages are scattered over the footprint rather than adjacent (rank 1, the most
    /// frequent, is usually not the first page). Within the chosen page the offset is uniform,
    /// aligned to `access_size`. Sampling is exact (to the 2^-32 resolution of the table): one
    /// Walker alias table holds the 8192 most frequent ranks and buckets of rarer ranks (each
    /// spanning a factor of at most 2^(1/16)), and a rank within a bucket is drawn by rejection
    /// from the uniform distribution; memory stays below about 70 KB for any footprint.
    Zipf,
    /// Bursts of sequential, strided and Zipf references, each burst's pattern drawn at random
    /// (one in three each) and its length uniform in `1..=2·burst - 1` (mean `burst`): a sequential
    /// burst walks on from a random `access_size`-aligned offset, a strided one from a random
    /// offset with `stride`, both wrapping as their own patterns do; a Zipf burst draws pages
    /// from the one Zipf distribution of the whole footprint (as [`Pattern::Zipf`]).
    Mix,
}

impl Pattern {
    /// Parses `sequential` (`seq`), `strided` (`stride`), `uniform` (`random`), `zipf` or `mix`.
    pub fn from_name(s: &str) -> Option<Pattern> {
        match s.to_ascii_lowercase().as_str() {
            "sequential" | "seq" => Some(Pattern::Sequential),
            "strided" | "stride" => Some(Pattern::Strided),
            "uniform" | "random" => Some(Pattern::Uniform),
            "zipf" => Some(Pattern::Zipf),
            "mix" => Some(Pattern::Mix),
            _ => None,
        }
    }

    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Pattern::Sequential => "sequential",
            Pattern::Strided => "strided",
            Pattern::Uniform => "uniform",
            Pattern::Zipf => "zipf",
            Pattern::Mix => "mix",
        }
    }
}

/// What to generate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GenSpec {
    /// Address pattern.
    pub pattern: Pattern,
    /// Number of accesses.
    pub refs: u64,
    /// Bytes of address space the accesses stay in, starting at [`BASE`].
    pub footprint: u64,
    /// Distance between consecutive accesses for [`Pattern::Strided`] (bytes, at least 1).
    pub stride: u64,
    /// Zipf exponent for [`Pattern::Zipf`] and [`Pattern::Mix`] (greater than 0; 1 is classic Zipf).
    pub zipf_s: f64,
    /// Mean references per burst of [`Pattern::Mix`] (at least 1).
    pub burst: u64,
    /// Random seed.
    pub seed: u64,
    /// Bytes per access (at least 1, at most the footprint; at most 4096 for Zipf).
    pub access_size: u32,
    /// Probability that an access is a store (0 to 1).
    pub store_fraction: f64,
}

impl Default for GenSpec {
    /// 1 M sequential 8-byte loads over 64 MiB, seed 1.
    fn default() -> GenSpec {
        GenSpec {
            pattern: Pattern::Sequential,
            refs: 1 << 20,
            footprint: 64 << 20,
            stride: 4096,
            zipf_s: 1.0,
            burst: 1000,
            seed: 1,
            access_size: 8,
            store_fraction: 0.0,
        }
    }
}

impl GenSpec {
    /// Checks the parameters; the message says what is wrong.
    pub fn validate(&self) -> Result<(), String> {
        if self.access_size == 0 {
            return Err("access size must be at least 1 byte".into());
        }
        if self.footprint < self.access_size as u64 {
            return Err(format!(
                "footprint ({} bytes) is smaller than the access size ({} bytes)",
                self.footprint, self.access_size
            ));
        }
        if self.footprint > u64::MAX - BASE {
            return Err(format!("footprint must be at most {} bytes", u64::MAX - BASE));
        }
        if matches!(self.pattern, Pattern::Strided | Pattern::Mix) && self.stride == 0 {
            return Err("stride must be at least 1 byte".into());
        }
        if self.pattern == Pattern::Mix && self.burst == 0 {
            return Err("burst must be at least 1 reference".into());
        }
        if matches!(self.pattern, Pattern::Zipf | Pattern::Mix) {
            if !(self.zipf_s.is_finite() && self.zipf_s > 0.0) {
                return Err(format!("zipf exponent must be > 0, got {}", self.zipf_s));
            }
            if self.access_size as u64 > ZIPF_PAGE {
                return Err(format!("zipf access size must be at most {ZIPF_PAGE} bytes"));
            }
        }
        if !(0.0..=1.0).contains(&self.store_fraction) {
            return Err(format!("store fraction must be between 0 and 1, got {}", self.store_fraction));
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Random numbers

/// xoshiro256** (Blackman and Vigna), seeded with splitmix64.
#[derive(Clone, Debug)]
pub struct Rng {
    s: [u64; 4],
}

/// One step of splitmix64.
pub fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Rng {
    /// A generator whose state is four splitmix64 outputs from `seed`.
    pub fn new(seed: u64) -> Rng {
        let mut st = seed;
        Rng { s: [splitmix64(&mut st), splitmix64(&mut st), splitmix64(&mut st), splitmix64(&mut st)] }
    }

    /// 64 random bits.
    #[inline(always)]
    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let result = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// Uniform in `[0, n)` (multiply-shift; bias below n / 2^64).
    #[inline(always)]
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }

    /// Uniform in `[0, 1)` with 53 bits.
    #[inline(always)]
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

// ---------------------------------------------------------------------------------------------
// Zipf

/// `expm1(t) / t`, continuous at 0.
fn helper1(t: f64) -> f64 {
    if t.abs() > 1e-8 {
        t.exp_m1() / t
    } else {
        1.0 + t * 0.5 * (1.0 + t / 3.0)
    }
}

/// An antiderivative of `x^-s`: `(x^(1-s) - 1) / (1-s)`, or `ln x` for s = 1.
fn integral(x: f64, s: f64) -> f64 {
    let l = x.ln();
    helper1((1.0 - s) * l) * l
}

/// Sum of `k^-s` for integer `k` in `[a, b]`, `a >= 1`: summed term by term for short ranges or
/// small `a`, else by Euler-Maclaurin, whose error is below `s(s+1)(s+2) a^(-s-3) / 720`
/// (negligible from `a = 1024` on).
fn zeta_range(a: u64, b: u64, s: f64) -> f64 {
    if b < a {
        return 0.0;
    }
    if b - a < 64 || a < 1024 {
        return (a..=b).map(|k| (k as f64).powf(-s)).sum();
    }
    let (af, bf) = (a as f64, b as f64);
    let (fa, fb) = (af.powf(-s), bf.powf(-s));
    let (da, db) = (-s * fa / af, -s * fb / bf);
    integral(bf, s) - integral(af, s) + (fa + fb) / 2.0 + (db - da) / 12.0
}

/// Ranks `lo..lo + width` (1-based) sampled as one alias-table item.
#[derive(Clone, Copy, Debug)]
struct Bucket {
    lo: u64,
    width: u64,
    /// `(lo / hi)^s`: a uniform draw below it accepts without computing the exact ratio.
    squeeze: f64,
}

/// Buckets span ranks within this factor, so that most draws pass the squeeze (for s = 1,
/// 96% do).
const BUCKET_RATIO: f64 = 1.044_273_782_427_413_8; // 2^(1/16)

/// Samples 0-based ranks in `[0, n)` with weight `(rank+1)^-s`, exactly (to the 2^-32
/// resolution of the alias thresholds).
///
/// The first `head` ranks are items of a Walker alias table; the remaining ranks are grouped
/// into buckets spanning a factor of at most 2^(1/16), each one more item of the same table
/// weighted by its exact mass. A bucket draw picks a rank uniformly in the bucket and accepts
/// it with probability `(lo/k)^s` (retrying otherwise), which makes rank `k` exactly
/// proportional to `k^-s`. Memory is `O(head + 16 log2(n / head))`.
#[derive(Clone, Debug)]
struct Zipf {
    /// Alias table over the items: threshold in the low 32 bits, alias in the high 32 (one
    /// load gives both, so the choice compiles to a conditional move, not a branch).
    table: Vec<u64>,
    items: u64,
    head: u64,
    buckets: Vec<Bucket>,
    s: f64,
}

impl Zipf {
    fn new(n: u64, s: f64, head: u64) -> Zipf {
        let head = n.min(head).max(1);
        let mut w: Vec<f64> = (1..=head).map(|k| (k as f64).powf(-s)).collect();
        let mut buckets = Vec::new();
        let mut lo = head + 1;
        while lo <= n {
            let hi = ((lo as f64 * BUCKET_RATIO).floor() as u64).clamp(lo, n);
            w.push(zeta_range(lo, hi, s));
            buckets.push(Bucket { lo, width: hi - lo + 1, squeeze: (lo as f64 / hi as f64).powf(s) });
            if hi == n {
                break;
            }
            lo = hi + 1;
        }
        // Vose's alias method.
        let m = w.len();
        let total: f64 = w.iter().sum();
        let mut p: Vec<f64> = w.iter().map(|x| x * m as f64 / total).collect();
        let mut table = vec![(u32::MAX, 0u32); m];
        let (mut small, mut large): (Vec<usize>, Vec<usize>) = (0..m).partition(|&i| p[i] < 1.0);
        while let (Some(&l), Some(&g)) = (small.last(), large.last()) {
            small.pop();
            table[l] = (((p[l] * 2f64.powi(32)) as u64).min(u32::MAX as u64) as u32, g as u32);
            p[g] -= 1.0 - p[l];
            if p[g] < 1.0 {
                large.pop();
                small.push(g);
            }
        }
        for i in small.into_iter().chain(large) {
            table[i] = (u32::MAX, i as u32);
        }
        let table = table.into_iter().map(|(thr, alias)| thr as u64 | (alias as u64) << 32).collect();
        Zipf { table, items: m as u64, head, buckets, s }
    }

    #[inline(always)]
    fn sample(&self, rng: &mut Rng) -> u64 {
        let r = rng.next_u64();
        let i = ((r >> 32) * self.items) >> 32;
        let e = self.table[i as usize];
        let alias = e >> 32;
        let item = if r & 0xffff_ffff < e & 0xffff_ffff { i } else { alias };
        if item < self.head {
            return item;
        }
        self.sample_bucket(rng, item - self.head)
    }

    #[inline(never)]
    fn sample_bucket(&self, rng: &mut Rng, b: u64) -> u64 {
        let b = self.buckets[b as usize];
        loop {
            let k = b.lo + rng.below(b.width);
            let u = rng.next_f64();
            if u <= b.squeeze || u <= (b.lo as f64 / k as f64).powf(self.s) {
                return k - 1;
            }
        }
    }
}

/// A seed-dependent permutation of `[0, n)` (cycle-walking over a bijection of `[0, 2^bits)`).
#[derive(Clone, Copy, Debug)]
struct Scramble {
    n: u64,
    mask: u64,
    shift: u32,
    a: u64,
    b: u64,
    c: u64,
}

impl Scramble {
    fn new(n: u64, rng: &mut Rng) -> Scramble {
        let bits = 64 - (n.max(1) - 1).leading_zeros();
        Scramble {
            n,
            mask: if bits == 64 { u64::MAX } else { (1u64 << bits) - 1 },
            shift: (bits / 2).max(1),
            a: rng.next_u64() | 1,
            b: rng.next_u64(),
            c: rng.next_u64() | 1,
        }
    }

    #[inline(always)]
    fn step(&self, x: u64) -> u64 {
        let mut y = x.wrapping_mul(self.a).wrapping_add(self.b) & self.mask;
        y ^= y >> self.shift;
        y = y.wrapping_mul(self.c) & self.mask;
        y ^ (y >> self.shift)
    }

    #[inline(always)]
    fn map(&self, x: u64) -> u64 {
        let mut y = self.step(x);
        while y >= self.n {
            y = self.step(y);
        }
        y
    }
}

// ---------------------------------------------------------------------------------------------
// Generator

/// A [`TraceReader`] producing the trace a [`GenSpec`] describes.
#[derive(Clone, Debug)]
pub struct Generator {
    spec: GenSpec,
    rng: Rng,
    done: u64,
    /// Next offset (sequential, strided).
    offset: u64,
    step: u64,
    /// Largest offset an access may start at.
    last_offset: u64,
    /// Access-size slots in the footprint (uniform) or in a page (zipf).
    slots: u64,
    zipf: Option<(Zipf, Scramble)>,
    /// [`Pattern::Mix`]: the current burst's pattern and the references left in it.
    burst: (Pattern, u64),
    /// Store probability scaled to 2^64; `None` when it is 0 or 1.
    store_thr: Option<u64>,
    fixed_kind: Kind,
}

impl Generator {
    /// A generator for `spec` (checked with [`GenSpec::validate`]).
    pub fn new(spec: GenSpec) -> Result<Generator, TraceError> {
        spec.validate().map_err(|message| TraceError::Format {
            source_name: format!("generator ({})", spec.pattern.name()),
            message,
        })?;
        let size = spec.access_size as u64;
        let mut rng = Rng::new(spec.seed);
        let mut slots = spec.footprint / size;
        let zipf = if matches!(spec.pattern, Pattern::Zipf | Pattern::Mix) {
            let pages = (spec.footprint / ZIPF_PAGE).max(1);
            if spec.pattern == Pattern::Zipf {
                slots = ZIPF_PAGE.min(spec.footprint) / size;
            }
            let scramble = Scramble::new(pages, &mut rng);
            Some((Zipf::new(pages, spec.zipf_s, ZIPF_HEAD), scramble))
        } else {
            None
        };
        let (store_thr, fixed_kind) = if spec.store_fraction <= 0.0 {
            (None, Kind::Load)
        } else if spec.store_fraction >= 1.0 {
            (None, Kind::Store)
        } else {
            (Some((spec.store_fraction * 2f64.powi(64)) as u64), Kind::Load)
        };
        Ok(Generator {
            spec,
            rng,
            done: 0,
            offset: 0,
            step: if spec.pattern == Pattern::Strided { spec.stride } else { size },
            last_offset: spec.footprint - size,
            slots,
            zipf,
            burst: (Pattern::Mix, 0),
            store_thr,
            fixed_kind,
        })
    }

    /// The spec being generated.
    pub fn spec(&self) -> &GenSpec {
        &self.spec
    }

    #[inline(always)]
    fn kind(rng: &mut Rng, thr: Option<u64>, fixed: Kind) -> Kind {
        match thr {
            Some(t) if rng.next_u64() < t => Kind::Store,
            _ => fixed,
        }
    }
}

/// Appends `n` records made by `f`, through a stack chunk (one copy per 128 records rather
/// than a length update per record).
#[inline(always)]
fn fill(out: &mut Vec<Record>, n: usize, mut f: impl FnMut() -> Record) {
    const CHUNK: usize = 128;
    let mut chunk = [Record::Marker { id: 0 }; CHUNK];
    let mut left = n;
    while left > 0 {
        let m = left.min(CHUNK);
        for slot in &mut chunk[..m] {
            *slot = f();
        }
        out.extend_from_slice(&chunk[..m]);
        left -= m;
    }
}

impl TraceReader for Generator {
    fn read_batch(&mut self, out: &mut Vec<Record>, max: usize) -> Result<usize, TraceError> {
        out.clear();
        let n = (self.spec.refs - self.done).min(max.max(1) as u64) as usize;
        out.reserve(n);
        let size = self.spec.access_size;
        let (thr, fixed) = (self.store_thr, self.fixed_kind);
        let mut rng = self.rng.clone();
        match self.spec.pattern {
            Pattern::Sequential | Pattern::Strided => {
                let (mut off, step, last) = (self.offset, self.step, self.last_offset);
                fill(out, n, || {
                    let r = Record::Access { kind: Self::kind(&mut rng, thr, fixed), size, addr: BASE + off };
                    off = match off.checked_add(step) {
                        Some(o) if o <= last => o,
                        _ => 0,
                    };
                    r
                });
                self.offset = off;
            }
            Pattern::Uniform => {
                let slots = self.slots;
                fill(out, n, || {
                    let kind = Self::kind(&mut rng, thr, fixed);
                    Record::Access { kind, size, addr: BASE + rng.below(slots) * size as u64 }
                });
            }
            Pattern::Zipf => {
                let (zipf, scramble) = self.zipf.as_ref().unwrap();
                let scramble = *scramble;
                let slots = self.slots;
                fill(out, n, || {
                    let kind = Self::kind(&mut rng, thr, fixed);
                    let page = scramble.map(zipf.sample(&mut rng));
                    let slot = rng.below(slots);
                    Record::Access { kind, size, addr: BASE + page * ZIPF_PAGE + slot * size as u64 }
                });
            }
            Pattern::Mix => {
                let (zipf, scramble) = self.zipf.as_ref().unwrap();
                let scramble = *scramble;
                let (slots, stride, last, burst) = (self.slots, self.spec.stride, self.last_offset, self.spec.burst);
                let page_slots = ZIPF_PAGE.min(self.spec.footprint) / size as u64;
                let (mut pattern, mut left) = self.burst;
                let mut off = self.offset;
                let mut step = self.step;
                fill(out, n, || {
                    if left == 0 {
                        pattern = [Pattern::Sequential, Pattern::Strided, Pattern::Zipf][rng.below(3) as usize];
                        left = 1 + rng.below(burst.saturating_mul(2) - 1);
                        off = rng.below(slots) * size as u64;
                        step = if pattern == Pattern::Strided { stride } else { size as u64 };
                    }
                    left -= 1;
                    let kind = Self::kind(&mut rng, thr, fixed);
                    if pattern == Pattern::Zipf {
                        let page = scramble.map(zipf.sample(&mut rng));
                        let slot = rng.below(page_slots);
                        return Record::Access { kind, size, addr: BASE + page * ZIPF_PAGE + slot * size as u64 };
                    }
                    let r = Record::Access { kind, size, addr: BASE + off };
                    off = match off.checked_add(step) {
                        Some(o) if o <= last => o,
                        _ => 0,
                    };
                    r
                });
                (self.burst, self.offset, self.step) = ((pattern, left), off, step);
            }
        }
        self.rng = rng;
        self.done += n as u64;
        Ok(n)
    }

    fn stats(&self) -> ReaderStats {
        ReaderStats { bytes: 0, records: self.done, skipped: 0 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Checks every rank's frequency (or, for ranks beyond 200, each bucket-sized group's)
    /// against the exact Zipf probabilities.
    #[test]
    fn alias_and_buckets_match_the_distribution() {
        for &(n, s, head) in &[(40u64, 0.6, 5u64), (3000, 1.0, 16), (5000, 1.3, 1), (100, 2.0, 100)] {
            let z = Zipf::new(n, s, head);
            let mut rng = Rng::new(7);
            let draws = 400_000;
            let mut counts = vec![0u64; n as usize];
            for _ in 0..draws {
                counts[z.sample(&mut rng) as usize] += 1;
            }
            let total: f64 = (1..=n).map(|k| (k as f64).powf(-s)).sum();
            let mut groups: Vec<(usize, usize)> = (0..n.min(200) as usize).map(|i| (i, i + 1)).collect();
            let mut lo = 200usize;
            while lo < n as usize {
                let hi = (lo + lo / 4).min(n as usize);
                groups.push((lo, hi));
                lo = hi;
            }
            for (a, b) in groups {
                let c: u64 = counts[a..b].iter().sum();
                let p: f64 = (a + 1..=b).map(|k| (k as f64).powf(-s)).sum::<f64>() / total;
                let expect = p * draws as f64;
                let sd = (expect * (1.0 - p)).sqrt();
                assert!((c as f64 - expect).abs() < 5.0 * sd + 1.0, "n={n} s={s} ranks {a}..{b}: {c} vs {expect:.0}");
            }
        }
    }

    #[test]
    fn zeta_range_approximation() {
        for &(a, b, s) in
            &[(100_000u64, 3_000_000u64, 1.1), (8193, 8935, 1.0), (70, 76, 0.5), (1100, 5000, 1.5), (65, 2000, 2.5)]
        {
            let exact: f64 = (a..=b).map(|k| (k as f64).powf(-s)).sum();
            let approx = zeta_range(a, b, s);
            assert!((exact - approx).abs() / exact < 1e-10, "{a} {b} {s}: {exact} {approx}");
        }
    }

    #[test]
    fn scramble_is_a_permutation() {
        for n in [1u64, 2, 3, 17, 1000, 4096] {
            let s = Scramble::new(n, &mut Rng::new(n));
            let mut seen = vec![false; n as usize];
            for x in 0..n {
                let y = s.map(x) as usize;
                assert!(!seen[y]);
                seen[y] = true;
            }
        }
    }
}
