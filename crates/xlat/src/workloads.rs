//! The reproducible workload suite: a manifest of real programs (`workloads/manifest.toml`),
//! deterministic input generators, and building each workload's trace (`.xtr`, through
//! [`crate::tracer`]) and address-space snapshot (`.xsnap`, through [`crate::snapshot`]) into a
//! cache directory, with a small JSON sidecar per workload that records what was built.
//!
//! A workload is rebuilt only when its sidecar's hash of the manifest entry and size differs
//! from the current one, or its trace is missing.

use crate::snapshot::{self, At};
use crate::trace::open::create_output;
use crate::trace::xtr::{XtrOptions, XtrWriter};
use crate::trace::{self, TraceWriter};
use crate::tracer::{self, Backend, TraceSpec};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Bumped whenever a generator's output changes, so that built workloads are rebuilt.
pub const GENERATOR_VERSION: u32 = 1;

/// The input kinds the generators make.
pub const KINDS: &[&str] = &["text", "binary", "c_source", "sql", "python", "sparse_heap", "makefile", "none"];

/// The suite's own C programs (`workloads/src/NAME.c`), embedded so that a built or installed
/// `xlat` can compile them; a workload names one as `program` and runs it as `{program}`.
pub const PROGRAMS: &[(&str, &str)] = &[
    ("extreme", include_str!("../../../workloads/src/extreme.c")),
    ("ctx-ring", include_str!("../../../workloads/src/ctx-ring.c")),
    ("mdb", include_str!("../../../workloads/src/mdb.c")),
    ("bigmsg", include_str!("../../../workloads/src/bigmsg.c")),
    ("radix", include_str!("../../../workloads/src/radix.c")),
    ("em3d", include_str!("../../../workloads/src/em3d.c")),
    ("compress", include_str!("../../../workloads/src/compress.c")),
    ("warehouse", include_str!("../../../workloads/src/warehouse.c")),
    ("vmloop", include_str!("../../../workloads/src/vmloop.c")),
    ("churn", include_str!("../../../workloads/src/churn.c")),
    ("shmserve", include_str!("../../../workloads/src/shmserve.c")),
];

/// The built program `name` of [`PROGRAMS`], compiling it on first use.
pub fn program(name: &str) -> Result<PathBuf, String> {
    let (n, src) = PROGRAMS
        .iter()
        .find(|(n, _)| *n == name)
        .ok_or_else(|| format!("no program '{name}' in workloads/src (known: {})", program_names()))?;
    tracer::plugin::ensure_program(n, src).map_err(|e| e.to_string())
}

fn program_names() -> String {
    PROGRAMS.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
}

/// A workload error: one line naming the file, workload or key concerned.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    /// The manifest is malformed.
    #[error("{file}: {message}")]
    Manifest {
        /// The manifest file.
        file: String,
        /// What is wrong.
        message: String,
    },
    /// A program a workload runs is not installed.
    #[error("workload '{workload}': {program} not found on PATH: install the Debian package {package} (apt-get install {package})")]
    Missing {
        /// The workload.
        workload: String,
        /// The program.
        program: String,
        /// The Debian package providing it.
        package: String,
    },
    /// Building a workload failed.
    #[error("workload '{workload}': {message}")]
    Build {
        /// The workload.
        workload: String,
        /// What failed.
        message: String,
    },
}

/// The manifest: one `[[workload]]` table per program.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// The workloads, in manifest order.
    pub workload: Vec<Workload>,
}

/// One workload of the manifest.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    /// Short unique name (file names in the cache derive from it).
    pub name: String,
    /// One line on what it does.
    pub description: String,
    /// The Debian package providing the program (`command[0]`).
    pub package: String,
    /// The argv; `{input}` is the generated input's path, `{dir}` the cache directory.
    pub command: Vec<String>,
    /// Tracing backend: `qemu` (default) or `lackey`.
    #[serde(default = "default_backend")]
    pub backend: String,
    /// Trace programs started with `execve` too (each exec'd image gets its own ASID).
    #[serde(default)]
    pub children: bool,
    /// Further programs needed, as program name to Debian package.
    #[serde(default)]
    pub requires: BTreeMap<String, String>,
    /// One of the suite's own C programs (`workloads/src/NAME.c`), built with `cc` and run as
    /// `{program}` in `command`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub program: Option<String>,
    /// How the input is generated.
    pub setup: Setup,
    /// Size parameters for CI.
    pub small: SizeParams,
    /// Size parameters for the full suite.
    pub full: SizeParams,
}

fn default_backend() -> String {
    "qemu".to_string()
}

/// How a workload's input is generated.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Setup {
    /// One of [`KINDS`].
    pub kind: String,
    /// Generator seed.
    #[serde(default = "default_seed")]
    pub seed: u64,
}

fn default_seed() -> u64 {
    1
}

/// A size: `n` means lines (text), KiB (binary), functions (c_source), rows (sql), items
/// (python), MiB (sparse_heap) or text parts (makefile).
#[derive(Clone, Copy, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SizeParams {
    /// The generator's size parameter.
    pub n: u64,
}

/// The two suite sizes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Size {
    /// Small inputs, for CI.
    Small,
    /// Full inputs.
    Full,
}

impl Size {
    /// `small` or `full`.
    pub fn name(self) -> &'static str {
        match self {
            Size::Small => "small",
            Size::Full => "full",
        }
    }

    /// Parses `small` or `full`.
    pub fn from_name(s: &str) -> Option<Size> {
        match s {
            "small" => Some(Size::Small),
            "full" => Some(Size::Full),
            _ => None,
        }
    }
}

impl Workload {
    /// The size parameters for `size`.
    pub fn params(&self, size: Size) -> SizeParams {
        match size {
            Size::Small => self.small,
            Size::Full => self.full,
        }
    }

    /// Every program the workload needs, with its Debian package (a placeholder such as
    /// `{cc1}` in `command[0]` is not a program: list the one it comes from in `requires`).
    pub fn programs(&self) -> Vec<(String, String)> {
        let mut v = Vec::new();
        if !self.command[0].starts_with('{') {
            v.push((self.command[0].clone(), self.package.clone()));
        }
        v.extend(self.requires.iter().map(|(p, k)| (p.clone(), k.clone())));
        v
    }

    /// The first program the workload needs that is not installed.
    pub fn missing(&self) -> Option<WorkloadError> {
        self.programs()
            .into_iter()
            .find(|(p, _)| tracer::find_in_path(p).is_none())
            .map(|(program, package)| WorkloadError::Missing { workload: self.name.clone(), program, package })
    }

    /// A hash of this entry, the size and the generator version: the sidecar's key.
    pub fn hash(&self, size: Size) -> String {
        let text = serde_json::to_string(self).unwrap_or_default();
        let source =
            self.program.as_deref().and_then(|p| PROGRAMS.iter().find(|(n, _)| *n == p)).map_or("", |(_, s)| s);
        let key = format!("{GENERATOR_VERSION}\n{}\n{text}\n{source}", size.name());
        format!("{:016x}", fnv1a(key.as_bytes()))
    }

    /// The command with its placeholders filled: `{input}`, `{dir}`, `{n}` (the size
    /// parameter), `{program}` (the built suite program) and `{cc1}` (the C compiler proper, as
    /// `gcc -print-prog-name=cc1` names it).
    pub fn argv(&self, input: &Path, dir: &Path, size: Size) -> Result<Vec<String>, WorkloadError> {
        let (input, dir) = (input.to_string_lossy(), dir.to_string_lossy());
        let n = self.params(size).n.to_string();
        let mut argv = Vec::new();
        for a in &self.command {
            let mut a = a.replace("{input}", &input).replace("{dir}", &dir).replace("{n}", &n);
            if a.contains("{program}") {
                let name =
                    self.program.as_deref().ok_or_else(|| build_err(self, "`{program}` needs a `program` key"))?;
                let built = program(name).map_err(|e| build_err(self, e))?;
                a = a.replace("{program}", &built.to_string_lossy());
            }
            if a.contains("{cc1}") {
                a = a.replace("{cc1}", &cc1().map_err(|e| build_err(self, e))?);
            }
            argv.push(a);
        }
        Ok(argv)
    }
}

/// The path of gcc's compiler proper.
fn cc1() -> Result<String, String> {
    let out = std::process::Command::new("gcc")
        .arg("-print-prog-name=cc1")
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("cannot run gcc to find cc1: {e}"))?;
    let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !out.status.success() || !path.contains('/') {
        return Err(format!("gcc -print-prog-name=cc1 gave no path ('{path}')"));
    }
    Ok(path)
}

fn fnv1a(data: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in data {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

impl Manifest {
    /// Parses and checks a manifest; `file` names it in errors.
    pub fn parse(text: &str, file: &str) -> Result<Manifest, WorkloadError> {
        let err = |message: String| WorkloadError::Manifest { file: file.to_string(), message };
        let m: Manifest = toml::from_str(text).map_err(|e| err(e.to_string().replace('\n', " ")))?;
        for (i, w) in m.workload.iter().enumerate() {
            let at = format!("workload '{}'", w.name);
            if w.name.is_empty() || !w.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
                return Err(err(format!("{at}: `name` must be letters, digits, '-' or '_'")));
            }
            if m.workload[..i].iter().any(|o| o.name == w.name) {
                return Err(err(format!("{at}: `name` is used twice")));
            }
            if w.command.is_empty() {
                return Err(err(format!("{at}: `command` is empty")));
            }
            if Backend::from_name(&w.backend).is_none() {
                return Err(err(format!("{at}: `backend` must be qemu or lackey, not '{}'", w.backend)));
            }
            if !KINDS.contains(&w.setup.kind.as_str()) {
                return Err(err(format!(
                    "{at}: `setup.kind` must be one of {}, not '{}'",
                    KINDS.join(", "),
                    w.setup.kind
                )));
            }
            match &w.program {
                Some(p) if !PROGRAMS.iter().any(|(n, _)| n == p) => {
                    return Err(err(format!("{at}: `program` must be one of {}, not '{p}'", program_names())));
                }
                None if w.command.iter().any(|a| a.contains("{program}")) => {
                    return Err(err(format!("{at}: `command` uses {{program}} but there is no `program` key")));
                }
                _ => {}
            }
            if w.small.n == 0 || w.full.n == 0 {
                return Err(err(format!("{at}: `small.n` and `full.n` must be at least 1")));
            }
        }
        Ok(m)
    }

    /// Reads and parses a manifest file.
    pub fn load(path: &Path) -> Result<Manifest, WorkloadError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|e| WorkloadError::Manifest { file: file.clone(), message: format!("cannot read: {e}") })?;
        Manifest::parse(&text, &file)
    }

    /// The workloads named in `only` (all if empty), in manifest order; an unknown name is an
    /// error.
    pub fn select(&self, only: &[String]) -> Result<Vec<&Workload>, String> {
        for n in only {
            if !self.workload.iter().any(|w| &w.name == n) {
                let names: Vec<&str> = self.workload.iter().map(|w| w.name.as_str()).collect();
                return Err(format!("no workload named '{n}' (the manifest has {})", names.join(", ")));
            }
        }
        Ok(self.workload.iter().filter(|w| only.is_empty() || only.contains(&w.name)).collect())
    }
}

/// SplitMix64: a small, fixed pseudo-random generator (its output never changes).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        crate::trace::gen::splitmix64(&mut self.0)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

const SYLLABLES: &[&str] = &[
    "ka", "lo", "mi", "ne", "su", "ta", "ri", "po", "ve", "da", "zu", "fi", "go", "he", "ju", "wa", "xe", "yo", "bri",
    "cla", "dro", "fle", "gri", "plo", "stu", "tra", "qui", "sha", "the", "ion",
];

fn word(rng: &mut Rng) -> String {
    // Short words are frequent, long ones rare, so words repeat as in real text.
    let len = 1 + rng.below(3) + rng.below(2) * rng.below(3);
    (0..len).map(|_| SYLLABLES[rng.below(SYLLABLES.len() as u64) as usize]).collect()
}

/// Generated input: files relative to the input path (one file with an empty name, or a
/// directory's files).
pub type Files = Vec<(String, Vec<u8>)>;

/// Generates the input of `kind` with `seed` and size `n` (deterministic: the same arguments
/// give the same bytes).
pub fn generate(kind: &str, seed: u64, n: u64) -> Files {
    let mut rng = Rng(seed ^ fnv1a(kind.as_bytes()));
    let one = |s: String| vec![(String::new(), s.into_bytes())];
    match kind {
        "text" => one(gen_text(&mut rng, n)),
        "binary" => {
            let mut v = Vec::with_capacity((n * 1024) as usize);
            while v.len() < (n * 1024) as usize {
                // Runs of a repeated byte between random stretches: partly compressible.
                let b = rng.next().to_le_bytes();
                if b[0] < 64 {
                    v.extend(std::iter::repeat(b[1]).take(1 + b[2] as usize));
                } else {
                    v.extend_from_slice(&b);
                }
            }
            v.truncate((n * 1024) as usize);
            vec![(String::new(), v)]
        }
        "c_source" => one(gen_c(&mut rng, n, "f", true)),
        "sql" => one(gen_sql(&mut rng, n)),
        "python" => one(gen_python(&mut rng, n)),
        "sparse_heap" => one(gen_sparse_heap(&mut rng, n)),
        "makefile" => gen_makefile(&mut rng, n),
        _ => Vec::new(),
    }
}

fn gen_text(rng: &mut Rng, lines: u64) -> String {
    let mut s = String::new();
    for _ in 0..lines {
        let words = 3 + rng.below(10);
        let line: Vec<String> = (0..words).map(|_| word(rng)).collect();
        s.push_str(&line.join(" "));
        s.push('\n');
    }
    s
}

/// A valid C file: `functions` functions with loops over arrays, and a `main` calling them if
/// `main` is set.
fn gen_c(rng: &mut Rng, functions: u64, prefix: &str, main: bool) -> String {
    let mut s = String::from("/* Generated by xlat workloads (c_source). */\n#include <stddef.h>\n\n");
    for i in 0..functions {
        let len = 8 + rng.below(120);
        let (a, b, c) = (1 + rng.below(9), 1 + rng.below(17), rng.below(5));
        let _ = writeln!(s, "static long {prefix}{i}_table[{len}];\n");
        let _ = writeln!(s, "long {prefix}{i}(long x, const int *in, size_t n)\n{{");
        let _ = writeln!(s, "    long acc = x * {a};\n    int local[{len}];");
        let _ = writeln!(
            s,
            "    for (size_t i = 0; i < {len}; i++)\n        local[i] = (int)((i * {b} + (size_t)x) % 251);"
        );
        let _ = writeln!(s, "    for (size_t i = 0; i < n; i++) {{");
        let _ = writeln!(s, "        acc += (long)in[i] * local[i % {len}];");
        match c {
            0 => {
                let _ = writeln!(s, "        if (acc > {}) acc -= {};", 100_000 + rng.below(1000), 7 + rng.below(90));
            }
            1 => {
                let _ = writeln!(s, "        {prefix}{i}_table[i % {len}] += acc & 0xff;");
            }
            2 => {
                let _ = writeln!(
                    s,
                    "        for (int j = 0; j < {}; j++)\n            acc ^= (acc << 1) + j;",
                    2 + rng.below(6)
                );
            }
            3 => {
                let _ = writeln!(s, "        switch (in[i] & 3) {{\n        case 0: acc += 3; break;\n        case 1: acc -= 5; break;\n        default: acc *= 3; break;\n        }}");
            }
            _ => {
                let _ = writeln!(
                    s,
                    "        acc = acc % {} + {prefix}{i}_table[(size_t)acc % {len}];",
                    997 + rng.below(5000)
                );
            }
        }
        let _ = writeln!(s, "    }}");
        if i > 0 && rng.below(3) == 0 {
            let _ = writeln!(s, "    acc += {prefix}{}(acc & 15, in, n / 2);", rng.below(i));
        }
        let _ = writeln!(s, "    return acc;\n}}\n");
    }
    if main {
        s.push_str("int main(void)\n{\n    static int data[4096];\n    long total = 0;\n");
        s.push_str("    for (int i = 0; i < 4096; i++)\n        data[i] = (i * 2654435761u) >> 20;\n");
        for i in 0..functions {
            let _ = writeln!(s, "    total += {prefix}{i}(total & 255, data, {});", 16 + rng.below(256));
        }
        s.push_str("    return (int)(total & 1);\n}\n");
    }
    s
}

fn gen_sql(rng: &mut Rng, rows: u64) -> String {
    let mut s = String::from("-- Generated by xlat workloads (sql).\nPRAGMA journal_mode = OFF;\n");
    s.push_str("CREATE TABLE item (id INTEGER PRIMARY KEY, grp INTEGER, price INTEGER, name TEXT);\n");
    s.push_str("CREATE TABLE grp (id INTEGER PRIMARY KEY, label TEXT);\nBEGIN;\n");
    for g in 0..64 {
        let _ = writeln!(s, "INSERT INTO grp VALUES ({g}, '{}');", word(rng));
    }
    for i in 0..rows {
        let _ =
            writeln!(s, "INSERT INTO item VALUES ({i}, {}, {}, '{}');", rng.below(64), rng.below(100_000), word(rng));
    }
    s.push_str("COMMIT;\nCREATE INDEX item_grp ON item (grp);\n");
    s.push_str("SELECT count(*), sum(price) FROM item;\n");
    s.push_str("SELECT grp, count(*), avg(price) FROM item GROUP BY grp ORDER BY 3 DESC LIMIT 5;\n");
    s.push_str(
        "SELECT g.label, max(i.price) FROM item i JOIN grp g ON g.id = i.grp GROUP BY g.label ORDER BY 2 LIMIT 5;\n",
    );
    s.push_str("SELECT name, count(*) FROM item GROUP BY name ORDER BY 2 DESC, 1 LIMIT 5;\n");
    s.push_str("SELECT id FROM item WHERE price BETWEEN 1000 AND 1100 ORDER BY id LIMIT 5;\n");
    s.push_str("UPDATE item SET price = price + 1 WHERE grp % 3 = 0;\nDELETE FROM item WHERE price % 7 = 0;\n");
    s.push_str("SELECT count(*), sum(price) FROM item;\n");
    s
}

fn gen_python(rng: &mut Rng, items: u64) -> String {
    let words: Vec<String> = (0..64).map(|_| format!("{:?}", word(rng))).collect();
    format!(
        "# Generated by xlat workloads (python): dict and list work.\n\
         WORDS = [{}]\n\
         N = {items}\n\
         seed = {}\n\
         def rnd():\n    global seed\n    seed = (seed * 6364136223846793005 + 1442695040888963407) % (1 << 64)\n    return seed >> 33\n\
         counts = {{}}\n\
         rows = []\n\
         for i in range(N):\n    w = WORDS[rnd() % len(WORDS)] + str(rnd() % 1000)\n    counts[w] = counts.get(w, 0) + 1\n    rows.append((w, i, rnd() % 997))\n\
         rows.sort(key=lambda r: (r[2], r[0]))\n\
         index = {{}}\n\
         for w, i, v in rows:\n    index.setdefault(v, []).append(i)\n\
         top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:10]\n\
         total = sum(len(v) for v in index.values())\n\
         print(len(counts), total, top[:3])\n",
        words.join(", "),
        rng.below(1 << 32)
    )
}

fn gen_sparse_heap(rng: &mut Rng, mib: u64) -> String {
    format!(
        "# Generated by xlat workloads (sparse_heap): a large heap touched sparsely.\n\
         MIB = {mib}\n\
         seed = {}\n\
         buf = bytearray(MIB << 20)\n\
         pages = (MIB << 20) // 4096\n\
         touched = 0\n\
         for k in range(pages // 8):\n    seed = (seed * 6364136223846793005 + 1442695040888963407) % (1 << 64)\n    p = (seed >> 33) % pages\n    buf[p * 4096 + (k % 4096)] = k & 255\n    touched += 1\n\
         table = {{}}\n\
         for k in range(MIB * 256):\n    seed = (seed * 6364136223846793005 + 1442695040888963407) % (1 << 64)\n    table[seed >> 20] = k\n\
         print(touched, len(table), sum(buf[::65536]))\n",
        rng.below(1 << 32)
    )
}

fn gen_makefile(rng: &mut Rng, parts: u64) -> Files {
    // Shell steps only (sort, uniq, wc, cat): compiling under lackey takes minutes per file.
    let mut files = Vec::new();
    let mut counts = Vec::new();
    for i in 0..parts {
        let lines = 200 + rng.below(200);
        files.push((format!("part{i}.txt"), gen_text(rng, lines).into_bytes()));
        counts.push(format!("part{i}.count"));
    }
    let mut mk = String::from("# Generated by xlat workloads (makefile).\n\n");
    let _ = writeln!(
        mk,
        "all: summary.txt\n\nsummary.txt: {}\n\tcat $^ | sort -n | tail -n 20 > $@\n\twc -l $^ >> $@\n",
        counts.join(" ")
    );
    mk.push_str("%.sorted: %.txt\n\tsort $< > $@\n\n");
    mk.push_str("%.count: %.sorted\n\tuniq -c $< | sort -n > $@\n\n");
    mk.push_str(".PHONY: all\n");
    files.push(("Makefile".to_string(), mk.into_bytes()));
    files
}

/// The input's path in `dir` for a workload (a directory for `makefile`).
pub fn input_path(w: &Workload, dir: &Path) -> PathBuf {
    let ext = match w.setup.kind.as_str() {
        "text" => "txt",
        "binary" => "bin",
        "c_source" => "c",
        "sql" => "sql",
        "python" | "sparse_heap" => "py",
        _ => "d",
    };
    dir.join("inputs").join(format!("{}.{ext}", w.name))
}

/// Writes (afresh) the input of `w` at `size` into `dir` and returns its path.
pub fn write_input(w: &Workload, size: Size, dir: &Path) -> std::io::Result<PathBuf> {
    let path = input_path(w, dir);
    let files = generate(&w.setup.kind, w.setup.seed, w.params(size).n);
    std::fs::create_dir_all(path.parent().unwrap_or(dir))?;
    if path.is_dir() {
        std::fs::remove_dir_all(&path)?;
    }
    for (rel, bytes) in files {
        if rel.is_empty() {
            std::fs::write(&path, bytes)?;
        } else {
            std::fs::create_dir_all(&path)?;
            std::fs::write(path.join(rel), bytes)?;
        }
    }
    Ok(path)
}

/// What a build recorded: the sidecar `NAME.json` next to `NAME.xtr`.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub struct Sidecar {
    /// Workload name.
    pub name: String,
    /// `small` or `full`.
    pub size: String,
    /// [`Workload::hash`] of the entry built.
    pub entry_hash: String,
    /// The command run, placeholders filled.
    pub command: Vec<String>,
    /// Backend used.
    pub backend: String,
    /// Memory references in the trace.
    pub references: u64,
    /// References by kind: ifetch, load, store, modify.
    pub by_kind: BTreeMap<String, u64>,
    /// Distinct 4 KiB pages referenced.
    pub distinct_pages: u64,
    /// Footprint in bytes (distinct pages times the page size).
    pub footprint_bytes: u64,
    /// Processes in the trace.
    pub processes: u64,
    /// Events in the trace.
    pub events: u64,
    /// The traced program's exit status (`0`, `signal N`, ...).
    pub exit_status: String,
    /// Resident pages in the snapshot (0 if none was taken: the program ended before its
    /// memory could be captured).
    pub snapshot_resident_pages: u64,
    /// Processes in the snapshot (0 if none was taken).
    pub snapshot_processes: u64,
    /// First line of `--version` of each program used.
    pub tool_versions: BTreeMap<String, String>,
    /// The xlat version that built it.
    pub xlat_version: String,
    /// Seconds spent tracing.
    pub trace_seconds: f64,
}

/// The trace file of a workload in `dir`.
pub fn trace_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.xtr"))
}

/// The snapshot file of a workload in `dir`.
pub fn snapshot_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.xsnap"))
}

/// The sidecar file of a workload in `dir`.
pub fn sidecar_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.json"))
}

/// The sidecar of a workload in `dir`, if there is a readable one.
pub fn read_sidecar(dir: &Path, name: &str) -> Option<Sidecar> {
    let text = std::fs::read_to_string(sidecar_path(dir, name)).ok()?;
    serde_json::from_str(&text).ok()
}

/// The sidecar if `w` is built in `dir` for `size` from the current manifest entry.
pub fn up_to_date(w: &Workload, size: Size, dir: &Path) -> Option<Sidecar> {
    let s = read_sidecar(dir, &w.name)?;
    (s.entry_hash == w.hash(size) && trace_path(dir, &w.name).is_file()).then_some(s)
}

/// First line of a program's `--version` output (stdout or stderr), or `unknown`.
pub fn tool_version(program: &str) -> String {
    let out = std::process::Command::new(program).arg("--version").stdin(std::process::Stdio::null()).output();
    match out {
        Ok(o) => {
            let text = format!("{}\n{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
            text.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("unknown").to_string()
        }
        Err(_) => "unknown".to_string(),
    }
}

fn build_err(w: &Workload, message: impl std::fmt::Display) -> WorkloadError {
    WorkloadError::Build { workload: w.name.clone(), message: message.to_string() }
}

/// Builds `w` at `size` into `dir`: generates its input, traces it to `NAME.xtr`, takes a
/// snapshot at peak resident size into `NAME.xsnap` (if `with_snapshot`) and writes the
/// sidecar `NAME.json`. The program's standard output goes to `NAME.out`.
pub fn build(w: &Workload, size: Size, dir: &Path, with_snapshot: bool) -> Result<Sidecar, WorkloadError> {
    if let Some(e) = w.missing() {
        return Err(e);
    }
    std::fs::create_dir_all(dir).map_err(|e| build_err(w, format!("{}: cannot create: {e}", dir.display())))?;
    let input = write_input(w, size, dir).map_err(|e| build_err(w, format!("cannot write the input: {e}")))?;
    let argv = w.argv(&input, dir, size)?;
    let out_path = dir.join(format!("{}.out", w.name));
    let backend = Backend::from_name(&w.backend).unwrap_or(Backend::Qemu);
    let spec = TraceSpec {
        command: argv.iter().map(Into::into).collect(),
        backend,
        children: w.children,
        quantum: tracer::DEFAULT_QUANTUM,
        stdout: tracer::ProgramOutput::File(out_path.clone()),
    };
    let output = trace_path(dir, &w.name);
    let out_name = output.display().to_string();
    let out = crate::output::Output::start(&out_name, "");
    let partial = out.path().to_string_lossy().into_owned();
    let opts = XtrOptions {
        metadata: vec![
            ("command".to_string(), argv.join(" ")),
            ("backend".to_string(), backend.name().to_string()),
            ("quantum".to_string(), spec.quantum.to_string()),
            ("workload".to_string(), format!("{} ({})", w.name, size.name())),
        ],
        ..XtrOptions::default()
    };
    let started = Instant::now();
    let traced = (|| -> Result<tracer::TraceOutcome, WorkloadError> {
        if w.setup.kind == "makefile" {
            // A fresh tree each time: make must redo every step.
            write_input(w, size, dir).map_err(|e| build_err(w, e))?;
        }
        let mut writer =
            XtrWriter::with_options(create_output(&partial).map_err(|e| build_err(w, e))?, &out_name, opts)
                .map_err(|e| build_err(w, e))?;
        let mut reader = tracer::spawn(&spec).map_err(|e| build_err(w, e))?;
        let (copied, outcome) = reader.copy_into(&mut writer);
        copied.map_err(|e| build_err(w, e))?;
        outcome.write_notes(&mut writer).map_err(|e| build_err(w, e))?;
        Box::new(writer).finish().map_err(|e| build_err(w, e))?;
        Ok(outcome)
    })();
    let outcome = traced?;
    let trace_seconds = started.elapsed().as_secs_f64();
    out.commit().map_err(|e| build_err(w, format!("{out_name}: cannot write: {e}")))?;
    let mut reader = trace::open::open_reader(&out_name, None).map_err(|e| build_err(w, e))?;
    let info = trace::info::info(reader.as_mut()).map_err(|e| build_err(w, e))?;
    let (mut snapshot_resident_pages, mut snapshot_processes) = (0, 0);
    if with_snapshot {
        if w.setup.kind == "makefile" {
            write_input(w, size, dir).map_err(|e| build_err(w, e))?;
        }
        // A program that ends within the first sampling interval leaves no snapshot.
        let _ = std::fs::remove_file(snapshot_path(dir, &w.name));
        if let Some(snap) = take_snapshot(w, &argv)? {
            snapshot_resident_pages = snap.resident_pages();
            snapshot_processes = snap.processes.len() as u64;
            snapshot::write(&snap, &snapshot_path(dir, &w.name).display().to_string()).map_err(|e| build_err(w, e))?;
        }
    }
    let by_kind = [
        ("ifetch", info.by_kind.ifetch),
        ("load", info.by_kind.load),
        ("store", info.by_kind.store),
        ("modify", info.by_kind.modify),
    ];
    let sidecar = Sidecar {
        name: w.name.clone(),
        size: size.name().to_string(),
        entry_hash: w.hash(size),
        command: argv,
        backend: backend.name().to_string(),
        references: info.references,
        by_kind: by_kind.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
        distinct_pages: info.distinct_pages,
        footprint_bytes: info.footprint_bytes,
        processes: info.processes,
        events: info.events.total(),
        exit_status: outcome.status_text(),
        snapshot_resident_pages,
        snapshot_processes,
        tool_versions: w.programs().iter().map(|(p, _)| (p.clone(), tool_version(p))).collect(),
        xlat_version: env!("CARGO_PKG_VERSION").to_string(),
        trace_seconds,
    };
    let text = serde_json::to_string_pretty(&sidecar).map_err(|e| build_err(w, e))? + "\n";
    std::fs::write(sidecar_path(dir, &w.name), text).map_err(|e| build_err(w, e))?;
    Ok(sidecar)
}

/// Runs the command natively and keeps the process tree's snapshot at peak resident size
/// (`None` if it ended before one could be taken).
fn take_snapshot(w: &Workload, argv: &[String]) -> Result<Option<snapshot::Snapshot>, WorkloadError> {
    let mut child = std::process::Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .spawn()
        .map_err(|e| build_err(w, format!("cannot run '{}': {e}", argv[0])))?;
    let watched =
        snapshot::watch(child.id(), At::Peak, Duration::from_millis(2), || !matches!(child.try_wait(), Ok(None)));
    let _ = child.wait();
    Ok(watched.snapshot)
}
